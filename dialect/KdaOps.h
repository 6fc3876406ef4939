//===- KdaOps.h - kda operations --------------------------------*- C++ -*-===//

#ifndef KDA_DIALECT_KDAOPS_H
#define KDA_DIALECT_KDAOPS_H

#include "dialect/KdaAttrs.h"
#include "dialect/KdaDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialect/KdaOps.h.inc"

#endif // KDA_DIALECT_KDAOPS_H
