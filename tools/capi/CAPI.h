/*===- CAPI.h - C API of the kda dialect and passes ----------------*- C -*-===//
 *
 * The C interface of kda, in the conventions of upstream's mlir-c headers:
 *
 *   MlirDialectHandle kda = mlirGetDialectHandle__kda__();
 *   mlirDialectHandleLoadDialect(kda, context);   // or ...InsertDialect
 *   mlirRegisterKdaPasses();  // then "kda-tile-chunks", "kda-lower-to-cpu"
 *                             // parse with mlirParsePassPipeline
 *
 * libKdaCAPI.so carries kda and upstream's core C API (mlir-c/IR.h,
 * mlir-c/Pass.h, mlir-c/RegisterEverything.h, the func dialect handle), over
 * the MLIR dylib: a C program links this one library.
 *
 *===----------------------------------------------------------------------===*/

#ifndef KDA_DIALECT_CAPI_CAPI_H
#define KDA_DIALECT_CAPI_CAPI_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mlirGetDialectHandle__kda__(): the kda dialect. */
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Kda, kda);

/* Registers kda's passes (kda-decompose, kda-fuse-prologue, kda-tile-chunks)
 * and the kda-lower-to-cpu pipeline globally. Idempotent. */
MLIR_CAPI_EXPORTED void mlirRegisterKdaPasses(void);

#ifdef __cplusplus
}
#endif

#endif /* KDA_DIALECT_CAPI_CAPI_H */
