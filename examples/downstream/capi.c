/*===- capi.c - a C program that uses an installed kda's C API ------------===//
 *
 * Links Kda::KdaCAPI (libKdaCAPI.so) only: loads func and kda through their
 * dialect handles, parses and verifies a kda module, and says so.
 *
 *===----------------------------------------------------------------------===*/

#include "tools/capi/CAPI.h"

#include "mlir-c/Dialect/Func.h"
#include "mlir-c/IR.h"

#include <stdio.h>

int main(void) {
  MlirContext ctx = mlirContextCreate();
  mlirDialectHandleLoadDialect(mlirGetDialectHandle__func__(), ctx);
  mlirDialectHandleLoadDialect(mlirGetDialectHandle__kda__(), ctx);
  mlirRegisterKdaPasses();
  MlirModule module = mlirModuleCreateParse(
      ctx, mlirStringRefCreateFromCString(
               "func.func @g(%q: tensor<1x16x1x8xf32>, "
               "%v: tensor<1x16x1x4xf32>) -> tensor<1x16x1x4xf32> {\n"
               "  %o = kda.gated_delta delta %q, %q, %v : "
               "tensor<1x16x1x8xf32>, tensor<1x16x1x8xf32>, "
               "tensor<1x16x1x4xf32> -> tensor<1x16x1x4xf32>\n"
               "  return %o : tensor<1x16x1x4xf32>\n"
               "}\n"));
  int ok = !mlirModuleIsNull(module) &&
           mlirOperationVerify(mlirModuleGetOperation(module));
  printf("downstream (C API): %s\n",
         ok ? "parsed and verified @g" : "FAILED to parse or verify @g");
  if (!mlirModuleIsNull(module))
    mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
  return ok ? 0 : 1;
}
