//===- main.cpp - a project that uses an installed kda ---------------------===//
//
// Parses a kda module (the file named on the command line, or the one
// below), verifies it, lowers it to the LLVM dialect with kda's CPU pipeline
// (kda-lower-to-cpu) through a PassManager, and says which functions it
// lowered. Built by CMakeLists.txt against `find_package(Kda CONFIG)`;
// scripts/test-install.sh builds and runs it against a fresh install.
//
//===----------------------------------------------------------------------===//

// kda's headers are included as in kda's own tree.
#include "dialect/KdaDialect.h"
#include "lowering/CpuPipeline.h"
#include "runtime/kda_runtime.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/raw_ostream.h"

// One gated delta (KDA) layer: 2 heads, 64 tokens, chunks of 32.
static const char *const kModule = R"mlir(
func.func @f(%q: tensor<1x64x2x16xf32>, %k: tensor<1x64x2x16xf32>,
             %v: tensor<1x64x2x8xf32>, %g: tensor<1x64x2x16xf32>)
    -> tensor<1x64x2x8xf32> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x64x2x16xf32>)
      {tile = #kda.tile<chunk = 32, sub_chunk = 16>}
      : tensor<1x64x2x16xf32>, tensor<1x64x2x16xf32>, tensor<1x64x2x8xf32>
      -> tensor<1x64x2x8xf32>
  return %o : tensor<1x64x2x8xf32>
}
)mlir";

int main(int argc, char **argv) {
  // The pipeline goes through upstream dialects (linalg, bufferization, scf,
  // OpenMP, LLVM) and their external interface models (bufferization of
  // tensor/linalg/scf/func ops); register them all, and kda.
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<mlir::kda::KdaDialect>();
  mlir::MLIRContext context(registry);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      argc > 1 ? mlir::parseSourceFile<mlir::ModuleOp>(argv[1], &context)
               : mlir::parseSourceString<mlir::ModuleOp>(kModule, &context);
  if (!module || mlir::failed(mlir::verify(*module))) {
    llvm::errs() << "downstream: the kda module did not parse or verify\n";
    return 1;
  }

  // kda-lower-to-cpu, built through its C++ entry point (after
  // mlir::kda::registerCpuPipeline(), the string "kda-lower-to-cpu" works
  // with mlir::parsePassPipeline too).
  mlir::PassManager pm(&context);
  mlir::kda::CpuPipelineOptions options;
  options.parallel = false; // no OpenMP runtime needed to run the result
  mlir::kda::buildCpuPipeline(pm, options);
  if (mlir::failed(pm.run(*module))) {
    llvm::errs() << "downstream: kda-lower-to-cpu failed\n";
    return 1;
  }

  int lowered = 0;
  for (auto func : module->getOps<mlir::LLVM::LLVMFuncOp>()) {
    if (func.isExternal() || func.isPrivate())
      continue; // malloc, free; kda's private helpers
    llvm::outs() << "downstream: lowered @" << func.getSymName()
                 << " to the LLVM dialect\n";
    ++lowered;
  }
  if (lowered == 0) {
    llvm::errs() << "downstream: no function was lowered\n";
    return 1;
  }

  // The runtime a serving process links: a missing bundle is a clear error.
  kda_bundle *bundle = nullptr;
  kda_status status = kda_bundle_load("/nonexistent-kda-bundle", &bundle);
  llvm::outs() << "downstream (runtime): " << kda_status_name(status) << ": "
               << kda_last_error() << "\n";
  if (status == KDA_OK || bundle)
    return 1;
  return 0;
}
