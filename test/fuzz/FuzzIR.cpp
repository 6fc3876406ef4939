//===- FuzzIR.cpp - libFuzzer: parse + verify + kda-lower-to-cpu ----------===//
//
// Input: MLIR text. It is parsed with every dialect kda's tools register
// (tools/Registration.h), verified, and, when it parses and verifies, run
// through the CPU pipeline (kda-lower-to-cpu, lowering/cpu/CpuPipeline.cpp) up to
// the LLVM dialect; nothing is JIT-compiled or run. Parse and verify failures
// are expected (diagnostics are swallowed); a crash, a sanitizer report or a
// pass that fails without a diagnostic is a finding. Inputs over 16 KiB are
// skipped (the pipeline's time grows with the IR, not the bugs).
// Run: scripts/fuzz.sh ir [seconds]   (README "Reliability")
//
//===----------------------------------------------------------------------===//

#include "lowering/CpuPipeline.h"
#include "tools/Registration.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

static mlir::DialectRegistry &registry() {
  static mlir::DialectRegistry *r = [] {
    auto *reg = new mlir::DialectRegistry();
    kda::registerEverything(*reg);
    return reg;
  }();
  return *r;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 16 * 1024)
    return -1; // not added to the corpus
  std::string text(reinterpret_cast<const char *>(data), size);

  mlir::MLIRContext context(registry(),
                            mlir::MLIRContext::Threading::DISABLED);
  bool diagnosed = false;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
      diagnosed = true;
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  if (!module || mlir::failed(mlir::verify(*module)))
    return 0;

  mlir::PassManager pm(&context);
  mlir::kda::CpuPipelineOptions options;
  // One thread and the sequential schedule: what kda-run --serial compiles.
  options.parallel = false;
  mlir::kda::buildCpuPipeline(pm, options);
  diagnosed = false;
  if (mlir::failed(pm.run(*module)) && !diagnosed) {
    std::fprintf(stderr, "kda-lower-to-cpu failed without an error\n");
    std::abort();
  }
  return 0;
}
