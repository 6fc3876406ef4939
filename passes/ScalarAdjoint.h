//===- ScalarAdjoint.h - reverse-mode derivatives of scalar bodies -*- C++ -*-===//
//
// The first piece of the derived backward (docs/backward.md): every
// elementwise map of the tile algorithms (TileBuilder::map) has a body of
// straight-line arith / math ops on scalars, and its adjoint needs the
// partial derivatives of that body with respect to each operand. This
// differentiates such a body symbolically, by reverse mode over the ops
// that compute it: the adjoint of a map is then a map whose body is the
// body's own ops followed by these.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_PASSES_SCALARADJOINT_H
#define KDA_PASSES_SCALARADJOINT_H

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir::kda {

/// Emits, at `b`'s insertion point, seed * d(y)/d(w) for every w of `wrt`
/// (floating-point scalars; y a floating-point scalar of the same type
/// computed from them by ops of one block, all before the insertion point).
/// Ops whose results do not depend on `wrt` are constants to it; a
/// comparison or a select's condition carries no derivative (a mask or a
/// branch of a piecewise function keeps its choice). Fails, saying which op,
/// where y depends on `wrt` through an op without a rule here.
/// `constants`: values the walk from y stops at, as constants, whatever
/// computed them (an elementwise body's other operands: on lane tiles they
/// may be shuffles of the very registers differentiated).
FailureOr<SmallVector<Value>> emitScalarAdjoint(ImplicitLocOpBuilder &b,
                                                Value y, ArrayRef<Value> wrt,
                                                Value seed, std::string &why,
                                                ArrayRef<Value> constants = {});

} // namespace mlir::kda

#endif // KDA_PASSES_SCALARADJOINT_H
