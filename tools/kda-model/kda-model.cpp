//===- kda-model.cpp - a model description -> one kda module --------------===//
//
//   kda-model model.json [-o model.mlir] [--tokens=T] [--batch=B]
//
// Reads a model description (docs/model-description.md), reports every
// problem with the path of the field that has it, and writes one verified kda
// module whose function runs all of the model's attention layers.
//
//===----------------------------------------------------------------------===//

#include "tools/Registration.h"
#include "tools/kda-model/ModelDescription.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

// Only these are listed by --help (LLVM and MLIR register hundreds more).
static cl::OptionCategory modelCategory("kda-model options");

static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("<model description .json>"),
                                      cl::Required, cl::cat(modelCategory));
static cl::opt<std::string> outputFile("o", cl::desc("output .mlir file"),
                                       cl::init("-"), cl::cat(modelCategory));
static cl::opt<int64_t> tokens("tokens",
                               cl::desc("override the description's tokens"),
                               cl::init(0), cl::cat(modelCategory));
static cl::opt<int64_t> batch("batch",
                              cl::desc("override the description's batch"),
                              cl::init(0), cl::cat(modelCategory));

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::HideUnrelatedOptions(modelCategory);
  cl::ParseCommandLineOptions(argc, argv, "kda model description driver\n");

  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(inputFile);
  if (!buffer) {
    llvm::errs() << "kda-model: error: " << inputFile << ": "
                 << buffer.getError().message() << "\n";
    return 1;
  }
  kda::model::Model model;
  std::string errors = kda::model::parseModel((*buffer)->getBuffer().str(), model);
  if (!errors.empty()) {
    llvm::errs() << "kda-model: error: " << inputFile << " is not a valid model "
                 << "description:\n" << errors;
    return 1;
  }
  // Overrides obey the description's bounds (0: no override).
  if (tokens < 0 || tokens > kda::model::kMaxTokens ||
      batch < 0 || batch > kda::model::kMaxBatch) {
    llvm::errs() << "kda-model: error: "
                 << (tokens < 0 || tokens > kda::model::kMaxTokens
                         ? "--tokens=" + std::to_string(tokens) +
                               ": expected 1 to " +
                               std::to_string(kda::model::kMaxTokens)
                         : "--batch=" + std::to_string(batch) +
                               ": expected 1 to " +
                               std::to_string(kda::model::kMaxBatch))
                 << "\n";
    return 1;
  }
  if (tokens > 0)
    model.tokens = tokens;
  if (batch > 0)
    model.batch = batch;
  if (std::string sizes = kda::model::checkTensorSizes(model); !sizes.empty()) {
    llvm::errs() << "kda-model: error: with --tokens / --batch:\n" << sizes;
    return 1;
  }

  // Parse and verify what we generate: the module that leaves is valid IR.
  mlir::DialectRegistry registry;
  kda::registerEverything(registry);
  mlir::MLIRContext context(registry);
  std::string text = kda::model::emitModule(model);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  if (!module || mlir::failed(mlir::verify(*module))) {
    llvm::errs() << "kda-model: internal error: the generated module does not "
                    "verify\n";
    return 2;
  }
  std::string error;
  auto output = mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << "kda-model: error: " << error << "\n";
    return 1;
  }
  output->os() << "// kda module of '" << model.name << "': "
               << model.layers.size() << " layers, batch " << model.batch
               << ", " << model.tokens << " tokens (kda-model " << inputFile
               << ")\n";
  module->print(output->os());
  output->keep();
  return 0;
}
