//===- FuzzModel.cpp - libFuzzer: kda-model's description reader ----------===//
//
// Input: a model description (JSON, docs/model-description.md). It goes
// through kda::model::parseModel (tools/kda-model/ModelDescription.cpp);
// descriptions it accepts are emitted as a kda module (emitModule), which
// must parse and verify: kda-model promises valid IR for every description
// it accepts, so an accepted description whose module does not verify is a
// finding (abort), like a crash or a sanitizer report.
// Run: scripts/fuzz.sh model [seconds]   (README "Reliability")
//
//===----------------------------------------------------------------------===//

#include "tools/Registration.h"
#include "tools/kda-model/ModelDescription.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 64 * 1024)
    return -1;
  std::string json(reinterpret_cast<const char *>(data), size);
  kda::model::Model model;
  if (!kda::model::parseModel(json, model).empty())
    return 0;
  // Every layer is a few ops: keep accepted descriptions of thousands of
  // layers from dominating the time.
  if (model.layers.size() > 64)
    return 0;
  std::string text = kda::model::emitModule(model);

  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry();
    kda::registerEverything(*r);
    return r;
  }();
  mlir::MLIRContext context(*registry, mlir::MLIRContext::Threading::DISABLED);
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  if (!module || mlir::failed(mlir::verify(*module))) {
    std::fprintf(stderr,
                 "accepted description, invalid module:\n%s\n--- module:\n%s\n",
                 diagnostics.c_str(), text.c_str());
    std::abort();
  }
  return 0;
}
