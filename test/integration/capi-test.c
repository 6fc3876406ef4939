/*===- capi-test.c - kda through the C API (C, not C++) ------------------===//
 *
 * Creates a context, loads func and kda through their dialect handles,
 * parses, verifies and prints a module with a kda.gated_delta, runs
 * kda-tile-chunks through a parsed pass pipeline and prints the result;
 * then parses malformed kda IR and expects a null module (no crash).
 * capi.test checks the output. Exit status 0 iff every step behaved.
 *
 *===----------------------------------------------------------------------===*/

#include "tools/capi/CAPI.h"

#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#include <stdio.h>

static const char *const kModule =
    "func.func @f(%q: tensor<1x64x2x16xf32>, %k: tensor<1x64x2x16xf32>,\n"
    "             %v: tensor<1x64x2x8xf32>, %g: tensor<1x64x2x16xf32>)\n"
    "    -> tensor<1x64x2x8xf32> {\n"
    "  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x64x2x16xf32>)\n"
    "      {tile = #kda.tile<chunk = 32, sub_chunk = 16>}\n"
    "      : tensor<1x64x2x16xf32>, tensor<1x64x2x16xf32>, "
    "tensor<1x64x2x8xf32>\n"
    "      -> tensor<1x64x2x8xf32>\n"
    "  return %o : tensor<1x64x2x8xf32>\n"
    "}\n";

/* The value head dimension of v (8) does not match the result's (4). */
static const char *const kMalformed =
    "func.func @bad(%q: tensor<1x64x2x16xf32>, %v: tensor<1x64x2x8xf32>)\n"
    "    -> tensor<1x64x2x4xf32> {\n"
    "  %o = kda.gated_delta delta %q, %q, %v\n"
    "      : tensor<1x64x2x16xf32>, tensor<1x64x2x16xf32>, "
    "tensor<1x64x2x8xf32>\n"
    "      -> tensor<1x64x2x4xf32>\n"
    "  return %o : tensor<1x64x2x4xf32>\n"
    "}\n";

static void printToStdout(MlirStringRef text, void *userData) {
  (void)userData;
  fwrite(text.data, 1, text.length, stdout);
}

/* Diagnostics go to stdout, in order with everything else. */
static MlirLogicalResult printDiagnostic(MlirDiagnostic diagnostic,
                                         void *userData) {
  (void)userData;
  printf("diagnostic: ");
  mlirDiagnosticPrint(diagnostic, printToStdout, NULL);
  printf("\n");
  return mlirLogicalResultSuccess();
}

static void printOperation(const char *title, MlirOperation op) {
  printf("== %s\n", title);
  mlirOperationPrint(op, printToStdout, NULL);
  printf("\n");
}

static int run(MlirContext ctx) {
  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kModule));
  if (mlirModuleIsNull(module)) {
    printf("error: the module did not parse\n");
    return 1;
  }
  MlirOperation op = mlirModuleGetOperation(module);
  if (!mlirOperationVerify(op)) {
    printf("error: the module did not verify\n");
    mlirModuleDestroy(module);
    return 1;
  }
  printOperation("parsed", op);

  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  MlirLogicalResult parsed = mlirParsePassPipeline(
      opm,
      mlirStringRefCreateFromCString(
          "builtin.module(func.func(kda-tile-chunks))"),
      printToStdout, NULL);
  int status = 0;
  if (mlirLogicalResultIsFailure(parsed)) {
    printf("\nerror: the pass pipeline did not parse\n");
    status = 1;
  } else if (mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, op))) {
    printf("error: kda-tile-chunks failed\n");
    status = 1;
  } else {
    printOperation("kda-tile-chunks", op);
  }
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);
  if (status)
    return status;

  /* mlirRegisterKdaPasses also registered the CPU pipeline. */
  MlirPassManager cpu = mlirPassManagerCreate(ctx);
  parsed = mlirParsePassPipeline(
      mlirPassManagerGetAsOpPassManager(cpu),
      mlirStringRefCreateFromCString("builtin.module(kda-lower-to-cpu)"),
      printToStdout, NULL);
  mlirPassManagerDestroy(cpu);
  if (mlirLogicalResultIsFailure(parsed)) {
    printf("\nerror: kda-lower-to-cpu is not registered\n");
    return 1;
  }
  printf("== kda-lower-to-cpu: registered\n");

  /* Malformed kda IR: a diagnostic and a null module, no crash. */
  printf("== malformed\n");
  module = mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kMalformed));
  if (!mlirModuleIsNull(module)) {
    printf("error: malformed IR parsed\n");
    mlirModuleDestroy(module);
    return 1;
  }
  printf("malformed kda IR: null module\n");
  return 0;
}

int main(void) {
  MlirContext ctx = mlirContextCreate();
  mlirContextAttachDiagnosticHandler(ctx, printDiagnostic, NULL, NULL);
  mlirDialectHandleLoadDialect(mlirGetDialectHandle__func__(), ctx);
  MlirDialect kda =
      mlirDialectHandleLoadDialect(mlirGetDialectHandle__kda__(), ctx);
  MlirStringRef ns = mlirDialectGetNamespace(kda);
  printf("loaded dialect: %.*s\n", (int)ns.length, ns.data);
  mlirRegisterKdaPasses();
  mlirRegisterKdaPasses(); /* idempotent */

  int status = run(ctx);
  mlirContextDestroy(ctx);
  fflush(stdout);
  return status;
}
