//===- kda-opt.cpp - mlir-opt with the kda dialect and passes -------------===//
//
// Like mlir-opt: every upstream dialect, extension and pass, plus the kda
// dialect and kda's passes and pipelines (tools/Registration.h).
//
//===----------------------------------------------------------------------===//

#include "tools/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  kda::registerEverything(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "kda optimizer driver\n", registry));
}
