//===- TileBuilder.h - the tile primitives kda kernels are written in -*- C++ -*-===//
//
// Every kda kernel (the chunkwise gated delta rule, the decode step, window
// attention) is written once against this small set of tile primitives:
// tile matmul, elementwise map, row reductions, prefix sums, the triangular
// inverse. Two implementations emit them: TensorTileBuilder as
// target-independent IR on small static f32 tensors, which every target
// lowers with its own instructions (scalar/vector loops on the CPU, tensor
// core fragments on GPUs), and the lane builder (lowering/lanes/LaneTiles.h)
// as registers of a GPU block's lanes. The algorithm never changes per
// target.
//
// Matmuls are linalg.generic ops whose loop order is (i, k, j): after
// conversion to loops the innermost loop walks contiguous output columns,
// which LLVM vectorizes without reassociating a floating-point reduction.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_PASSES_TILEBUILDER_H
#define KDA_PASSES_TILEBUILDER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::kda {

/// How an operand of an elementwise tile op is indexed from a 2-D result
/// [M, N]: fully, by the row index (an [M] vector broadcast along columns) or
/// by the column index (an [N] vector broadcast along rows).
enum class Broadcast { None, AlongColumns, AlongRows };

struct TileOperand {
  Value value;
  Broadcast broadcast = Broadcast::None;
  TileOperand(Value v, Broadcast b = Broadcast::None) : value(v), broadcast(b) {}
};
/// An [M] vector used as a per-row value of an [M, N] tile.
inline TileOperand perRow(Value v) { return {v, Broadcast::AlongColumns}; }
/// An [N] vector used as a per-column value of an [M, N] tile.
inline TileOperand perColumn(Value v) { return {v, Broadcast::AlongRows}; }

/// Body of an elementwise map: scalar operands and the result indices.
using MapBody = llvm::function_ref<Value(ImplicitLocOpBuilder &b,
                                         ValueRange scalars, ValueRange ivs)>;

/// The primitives an algorithm is written in. Tiles are Values; what a Value
/// is belongs to the implementation: a small static f32 tensor here
/// (TensorTileBuilder, which every target can lower), or a tile distributed
/// over the registers of a block's lanes (lowering/lanes/LaneTiles.h, the
/// GPU lane kernels). The algorithms (GatedDeltaKernel.cpp) see only this
/// interface, so they are written once for every target.
class TileBuilder {
public:
  explicit TileBuilder(ImplicitLocOpBuilder &b) : b(b) {}
  virtual ~TileBuilder() = default;

  ImplicitLocOpBuilder &builder() { return b; }
  Type f32() { return b.getF32Type(); }
  Value index(int64_t v);
  Value constantF32(double v);

  /// The static shape of a tile.
  virtual SmallVector<int64_t> shape(Value tile) = 0;

  /// A tile of `shape` filled with `value`.
  virtual Value filled(ArrayRef<int64_t> shape, double value) = 0;

  /// result[shape] = body(operands at the same indices); operands may be
  /// broadcast (see TileOperand). The result is f32 unless `resultType` says
  /// otherwise.
  virtual Value map(ArrayRef<int64_t> shape, ArrayRef<TileOperand> operands,
                    MapBody body, Type resultType = {}) = 0;

  /// [M, K] x [K, N] -> [M, N] in f32; `transA` / `transB` read the operand
  /// transposed ([K, M] / [N, K]) without materializing the transpose.
  virtual Value matmul(Value a, Value bTile, bool transA = false,
                       bool transB = false) = 0;

  /// acc + a b, shapes as in matmul: a product accumulated into a tile
  /// that exists already. By default a matmul and an elementwise sum; a
  /// matrix instruction (LaneTileBuilder) accumulates in place, which saves
  /// the product's registers.
  virtual Value matmulAdd(Value acc, Value a, Value bTile, bool transA = false,
                          bool transB = false);

  /// [M] x [M, N] -> [N]: a row vector times a matrix.
  virtual Value vecmat(Value x, Value a) = 0;

  /// Row reductions of an [M, N] tile -> [M].
  virtual Value rowSum(Value a) = 0;
  virtual Value rowMax(Value a) = 0;

  /// Inclusive prefix sum along the rows of an [M, N] tile (axis 0),
  /// accumulated in row order.
  virtual Value prefixSumRows(Value a) = 0;

  /// (I + L)^-1 for a strictly lower triangular [C, C] tile L.
  virtual Value invertUnitLower(Value l) = 0;

  /// out[i, j] = sum_d a[i, d] b[j, d] exp(g[i, d] - g[j, d]) for j < i
  /// (j <= i when `inclusive`), zero elsewhere ([M, D] tiles -> [M, M]):
  /// the exact pairwise decayed product, for gates whose factored form would
  /// overflow. Discarded pairs take the exponent 0, so they cannot produce
  /// inf.
  virtual Value decayedPairs(Value a, Value bTile, Value g, bool inclusive) = 0;
  /// decayedPairs of several tiles `as` against one `bTile` and `g`
  /// (inclusive[i] for as[i]): P and L of a chunk share their keys. A
  /// builder may share the keys' decays and checks between them; by
  /// default, one decayedPairs each.
  virtual SmallVector<Value> decayedPairsMany(ArrayRef<Value> as, Value bTile,
                                              Value g,
                                              ArrayRef<bool> inclusive) {
    SmallVector<Value> out;
    for (auto [a, inc] : llvm::zip(as, inclusive))
      out.push_back(decayedPairs(a, bTile, g, inc));
    return out;
  }

  /// The two sums of decayedPairs' adjoint (docs/backward.md), with the
  /// forward's exponents: out[i, d] = sum_j dP[i, j] x[j, d] exp(g[i, d] -
  /// g[j, d]) over the pairs decayedPairs keeps (j < i, or j <= i when
  /// `inclusive`); `transposed`: out[j, d] = sum_i dP[i, j] x[i, d]
  /// exp(g[i, d] - g[j, d]). [M, M], [M, D], [M, D] -> [M, D]. Builders
  /// without it emit an error (both builders have it).
  virtual Value decayedApply(Value dP, Value x, Value g, bool inclusive,
                             bool transposed);

  /// A hint: `tile` is not used again for a long stretch of other work. A
  /// builder whose tiles live in registers may hold it elsewhere until then
  /// (its registers free for that work); the result stands for `tile`. By
  /// default, `tile` itself.
  virtual Value park(Value tile) { return tile; }

  /// A hint from the algorithm: the products that follow, until it is
  /// turned off, have operands of a wide dynamic range whose gradient is a
  /// small difference of large terms (the factored decayed pairs: q and k
  /// scaled by e^{+-G}). Builders ignore it; the tape records it on those
  /// products and has their adjoint's products run precise
  /// (preciseProducts).
  virtual void rangeSensitiveProducts(bool on) {}
  /// Products as precise as the builder makes them (3xTF32 for f32 tiles on
  /// mma.sync) until turned off, whatever it was told for the others; by
  /// default every product is.
  virtual void preciseProducts(bool on) {}

  /// Static sub-tile [offsets, offsets + sizes) of the same rank.
  virtual Value subTile(Value tile, ArrayRef<int64_t> offsets,
                        ArrayRef<int64_t> sizes) = 0;
  /// Writes `sub` into `tile` at `offsets`.
  virtual Value insertSubTile(Value sub, Value tile,
                              ArrayRef<int64_t> offsets) = 0;
  /// Row `row` of an [M, N] tile as an [N] vector.
  virtual Value rowOf(Value tile, int64_t row) = 0;

  /// [M, N] -> [N, M].
  virtual Value transpose(Value a) = 0;

protected:
  ImplicitLocOpBuilder &b;
};

/// The primitives on small static f32 tensors (tensor, linalg.generic,
/// arith, math); each target lowers those tiles with its own instructions
/// (scalar/vector loops on the CPU, tensor core fragments on GPUs). Also the
/// memory side of the tile programs (ChunkTiling.cpp,
/// WindowAttentionKernel.cpp): loads, stores, conversions.
class TensorTileBuilder final : public TileBuilder {
public:
  using TileBuilder::TileBuilder;

  SmallVector<int64_t> shape(Value tile) override;
  Value filled(ArrayRef<int64_t> shape, double value) override;
  Value map(ArrayRef<int64_t> shape, ArrayRef<TileOperand> operands,
            MapBody body, Type resultType = {}) override;
  Value matmul(Value a, Value bTile, bool transA = false,
               bool transB = false) override;
  Value vecmat(Value x, Value a) override;
  Value rowSum(Value a) override;
  Value rowMax(Value a) override;
  /// As a lower-triangular ones matrix times the tile: the same tile matmul
  /// every target accelerates.
  Value prefixSumRows(Value a) override;
  /// By forward substitution. Each column of the inverse depends only on L
  /// and itself (x_i = [i == j] - sum_{m < i} L[i, m] x_m), so columns are
  /// independent programs (an scf.forall nested in the caller's) and rows
  /// within a column are sequential: a GPU solves all columns at once with
  /// no barrier, a CPU one after another.
  Value invertUnitLower(Value l) override;
  Value decayedPairs(Value a, Value bTile, Value g, bool inclusive) override;
  Value decayedApply(Value dP, Value x, Value g, bool inclusive,
                     bool transposed) override;
  Value subTile(Value tile, ArrayRef<int64_t> offsets,
                ArrayRef<int64_t> sizes) override;
  Value insertSubTile(Value sub, Value tile,
                      ArrayRef<int64_t> offsets) override;
  Value rowOf(Value tile, int64_t row) override;
  /// Row `row` (dynamic or static) of an [M, N] tensor tile.
  Value rowOf(Value tile, OpFoldResult row);
  Value transpose(Value a) override;

  /// An empty tensor of `type`; `sizes` give the dynamic dimensions (static
  /// ones come from the type, so results keep the op's static shapes).
  Value emptyOfType(RankedTensorType type, ArrayRef<OpFoldResult> sizes);

  /// Loads a tile of `tileShape` from tensor `src` at `offsets` (one per src
  /// dimension). `tileDims[i]` is the src dimension that tile dimension i
  /// walks; every other src dimension is indexed (size 1). Only the first
  /// `validRows` rows exist in `src`; the others are zero. The tile is f32.
  Value load(Value src, ArrayRef<OpFoldResult> offsets,
             ArrayRef<int64_t> tileDims, ArrayRef<int64_t> tileShape,
             Value validRows);

  /// Writes the first `validRows` rows of f32 `tile` into `dest` (converted
  /// to dest's element type), laid out as in `load`. Returns the new dest.
  Value store(Value tile, Value dest, ArrayRef<OpFoldResult> offsets,
              ArrayRef<int64_t> tileDims, Value validRows);

  /// Converts every element of `t` (any shape, dynamic too) to `elementType`.
  Value convert(Value t, Type elementType);
};

} // namespace mlir::kda

#endif // KDA_PASSES_TILEBUILDER_H
