//===- Registration.cpp - one registration shared by every kda tool -------===//

#include "tools/Registration.h"

#include "dialect/KdaDialect.h"
#include "lowering/CpuPipeline.h"
#include "lowering/GpuPipeline.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

void kda::registerEverything(mlir::DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates device code to LLVM IR.
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::registerAllGPUToLLVMIRTranslations(registry);
  mlir::registerAllPasses();
  registry.insert<mlir::kda::KdaDialect>();
  mlir::kda::registerKdaPasses();
  mlir::kda::registerCpuPipeline();
  mlir::kda::registerGpuPipelines();
}
