//===- TileAdjoint.h - reverse mode over the tile primitives ---*- C++ -*-===//
//
// The derived backward's second piece (docs/backward.md): a TileBuilder that
// forwards every primitive to another builder and records it, and the
// adjoint of what it recorded, emitted on that same builder. An algorithm
// written once against TileBuilder (passes/GatedDeltaKernel.cpp) then has
// its gradient without being written a second time: each primitive's rule
// is written here once (docs/backward.md's table), and an elementwise map's
// rule differentiates the map's own body (ScalarAdjoint.h).
//
// What is a constant to the adjoint: values a map body captures instead of
// taking them as operands (the scale), unless they are named among the
// scalars to differentiate (A_log), and index operands (validRows).
//
//===----------------------------------------------------------------------===//

#ifndef KDA_PASSES_TILEADJOINT_H
#define KDA_PASSES_TILEADJOINT_H

#include "passes/TileBuilder.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mlir::kda {

class TapeTileBuilder final : public TileBuilder {
public:
  /// Records on top of `inner`, which emits everything (the forward and,
  /// later, the adjoint).
  explicit TapeTileBuilder(TileBuilder &inner);
  ~TapeTileBuilder() override;

  SmallVector<int64_t> shape(Value tile) override;
  Value filled(ArrayRef<int64_t> shape, double value) override;
  Value map(ArrayRef<int64_t> shape, ArrayRef<TileOperand> operands,
            MapBody body, Type resultType = {}) override;
  Value matmul(Value a, Value bTile, bool transA = false,
               bool transB = false) override;
  Value matmulAdd(Value acc, Value a, Value bTile, bool transA = false,
                  bool transB = false) override;
  Value vecmat(Value x, Value a) override;
  Value rowSum(Value a) override;
  Value rowMax(Value a) override;
  Value prefixSumRows(Value a) override;
  Value invertUnitLower(Value l) override;
  Value decayedPairs(Value a, Value bTile, Value g, bool inclusive) override;
  /// The inner builder's (P and L share their keys' decays there), one
  /// DecayedPairs entry a result.
  SmallVector<Value> decayedPairsMany(ArrayRef<Value> as, Value bTile,
                                      Value g,
                                      ArrayRef<bool> inclusive) override;
  Value park(Value tile) override;
  /// Recorded on the matmuls that follow (their adjoint's products run
  /// precise); the inner builder is not told (the forward is as it was).
  void rangeSensitiveProducts(bool on) override { sensitive = on; }
  void preciseProducts(bool on) override { inner.preciseProducts(on); }
  Value subTile(Value tile, ArrayRef<int64_t> offsets,
                ArrayRef<int64_t> sizes) override;
  Value insertSubTile(Value sub, Value tile,
                      ArrayRef<int64_t> offsets) override;
  Value rowOf(Value tile, int64_t row) override;
  Value transpose(Value a) override;
  Value decayedApply(Value dP, Value x, Value g, bool inclusive,
                     bool transposed) override;

  /// Emits, on the inner builder, the gradient of every `wrt` tile given the
  /// gradients `seeds` (forward tile, its gradient) of the values the loss
  /// reads: reverse mode over the tape. A `wrt` the seeds do not reach gets
  /// zeros. Only values computed from a `wrt` take gradients (activity: no
  /// dead adjoint code, which a lane builder might not be able to lay out),
  /// and a product's contribution to a gradient that exists already is
  /// accumulated into it with matmulAdd (in the accumulator's layout, as
  /// the forward's state update). A `wrt` that is a float scalar (A_log) is one map bodies capture:
  /// its gradient, a [1] tile, sums what every body that captures it
  /// contributes. Fails, saying which primitive, where a seed reaches a `wrt`
  /// through a primitive without a rule (rowMax) or a map body op without
  /// one (ScalarAdjoint.h).
  FailureOr<SmallVector<Value>>
  emitAdjoint(ArrayRef<std::pair<Value, Value>> seeds, ArrayRef<Value> wrt,
              std::string &why);

  struct Entry;

private:
  /// One DecayedPairs entry: r = decayedPairs(a, bTile, g, inclusive).
  void recordPairs(Value a, Value bTile, Value g, bool inclusive, Value r);
  TileBuilder &inner;
  bool sensitive = false;
  std::vector<std::unique_ptr<Entry>> tape;
};

} // namespace mlir::kda

#endif // KDA_PASSES_TILEADJOINT_H
