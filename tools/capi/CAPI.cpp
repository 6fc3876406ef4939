//===- CAPI.cpp - C API of the kda dialect and passes ---------------------===//

#include "tools/capi/CAPI.h"

#include "dialect/KdaDialect.h"
#include "lowering/CpuPipeline.h"
#include "passes/Passes.h"

#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Kda, kda, mlir::kda::KdaDialect)

void mlirRegisterKdaPasses(void) {
  // Passes tolerate a second registration; a pipeline must be registered once.
  static const bool registered = [] {
    mlir::kda::registerKdaPasses();
    mlir::kda::registerCpuPipeline();
    return true;
  }();
  (void)registered;
}
