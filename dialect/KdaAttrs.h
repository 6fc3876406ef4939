//===- KdaAttrs.h - kda enums and attributes --------------------*- C++ -*-===//

#ifndef KDA_DIALECT_KDAATTRS_H
#define KDA_DIALECT_KDAATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialect/KdaEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/KdaAttrs.h.inc"

#endif // KDA_DIALECT_KDAATTRS_H
