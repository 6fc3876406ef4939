//===- KdaPlugin.cpp - kda as a plugin of a stock mlir-opt -----------------===//
//
// One shared library with both plugin entry points, for an mlir-opt that
// links the MLIR dylib (Debian's /usr/lib/llvm-22/bin/mlir-opt does):
//
//   mlir-opt --load-dialect-plugin=lib/KdaPlugin.so   the kda dialect
//   mlir-opt --load-pass-plugin=lib/KdaPlugin.so      kda's passes and the
//                                                     kda-lower-to-cpu pipeline
//
// The plugin links libMLIR.so, never static MLIR libraries: the upstream
// dialects' TypeIDs must be the tool's, not a second copy.
//
//===----------------------------------------------------------------------===//

#include "dialect/KdaDialect.h"
#include "lowering/CpuPipeline.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Compiler.h"

namespace {
/// Both entry points register the passes; a pipeline must be registered once.
void registerKdaPassesAndPipelines() {
  static const bool registered = [] {
    mlir::kda::registerKdaPasses();
    mlir::kda::registerCpuPipeline();
    return true;
  }();
  (void)registered;
}
} // namespace

/// --load-dialect-plugin: the dialect (and, as upstream's example does, the
/// passes, so one flag is enough to run them).
extern "C" LLVM_ATTRIBUTE_WEAK mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "Kda", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            registry->insert<mlir::kda::KdaDialect>();
            registerKdaPassesAndPipelines();
          }};
}

/// --load-pass-plugin: kda's passes and pipelines.
extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "KdaPasses", LLVM_VERSION_STRING,
          registerKdaPassesAndPipelines};
}
