//===- Registration.cpp - one registration shared by every kda tool -------===//

#include "tools/Registration.h"

#include "dialect/KdaDialect.h"
#include "lowering/CpuPipeline.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"

void kda::registerEverything(mlir::DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllPasses();
  registry.insert<mlir::kda::KdaDialect>();
  mlir::kda::registerKdaPasses();
  mlir::kda::registerCpuPipeline();
}
