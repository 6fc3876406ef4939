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

#include "llvm/ADT/DenseMap.h"

namespace mlir::kda {
/// How the verifier names an operand or result: `name` is its name in the
/// kernel ABI ("q", "o"), `dims` its dimensions' names ("B", "T", "H", "K";
/// "N+1" for cu_seqlens).
struct DimensionNaming {
  std::string name;
  SmallVector<std::string> dims;
};
using DimensionNames = llvm::DenseMap<Value, DimensionNaming>;

/// The names the op's verifier gives each shaped operand and result; empty
/// for ops without named dimensions or that do not verify. Kernel ABIs use
/// them to turn dynamic sizes into shared symbols.
DimensionNames nameDimensions(Operation *op);

/// One argument of a kda op's kernel ABI (KernelAbiOpInterface).
struct KernelArgument {
  Value value;
  std::string name;               // "q", "gate", "o"
  SmallVector<std::string> dims;  // "B", "T", "H", "K", ...
};

/// The op's operands, then its results, that its verifier names, in that
/// order, with their names (KernelAbiOpInterface's implementation).
SmallVector<KernelArgument> kernelArguments(Operation *op);
} // namespace mlir::kda

#include "dialect/KdaInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialect/KdaOps.h.inc"

#endif // KDA_DIALECT_KDAOPS_H
