//===- KdaDialect.h - the kda dialect ---------------------------*- C++ -*-===//

#ifndef KDA_DIALECT_KDADIALECT_H
#define KDA_DIALECT_KDADIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialect/KdaDialect.h.inc"

#endif // KDA_DIALECT_KDADIALECT_H
