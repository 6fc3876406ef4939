//===- TileBuilder.h - the tile primitives kda kernels are written in -*- C++ -*-===//
//
// Every kda kernel (the chunkwise gated delta rule, the decode step, window
// attention) is written once against this small set of tile primitives:
// load / store tile, tile matmul, elementwise map, row reductions and
// prefix sums. Here they emit target-independent IR on small static f32
// tensors (tensor, linalg.generic, arith, math); each target lowers those
// tiles with its own instructions (scalar/vector loops on the CPU, tensor
// core fragments on GPUs), so the algorithm never changes per target.
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

class TileBuilder {
public:
  explicit TileBuilder(ImplicitLocOpBuilder &b) : b(b) {}

  ImplicitLocOpBuilder &builder() { return b; }
  Type f32() { return b.getF32Type(); }
  Value index(int64_t v);
  Value constantF32(double v);

  /// An empty tensor of `type`; `sizes` give the dynamic dimensions (static
  /// ones come from the type, so results keep the op's static shapes).
  Value emptyOfType(RankedTensorType type, ArrayRef<OpFoldResult> sizes);

  /// A tile of `shape` filled with `value`.
  Value filled(ArrayRef<int64_t> shape, double value);

  /// result[shape] = body(operands at the same indices); operands may be
  /// broadcast (see TileOperand). The result is f32 unless `resultType` says
  /// otherwise.
  Value map(ArrayRef<int64_t> shape, ArrayRef<TileOperand> operands,
            MapBody body, Type resultType = {});

  /// [M, K] x [K, N] -> [M, N] in f32; `transA` / `transB` read the operand
  /// transposed ([K, M] / [N, K]) without materializing the transpose.
  Value matmul(Value a, Value bTile, bool transA = false, bool transB = false);

  /// [M] x [M, N] -> [N]: a row vector times a matrix.
  Value vecmat(Value x, Value a);

  /// Row reductions of an [M, N] tile -> [M].
  Value rowSum(Value a);
  Value rowMax(Value a);

  /// Inclusive prefix sum along the rows of an [M, N] tile (axis 0),
  /// accumulated in row order (as a lower-triangular ones matrix times the
  /// tile: the same tile matmul every target accelerates).
  Value prefixSumRows(Value a);

  /// (I + L)^-1 for a strictly lower triangular [C, C] tile L, by forward
  /// substitution. Each column of the inverse depends only on L and itself
  /// (x_i = [i == j] - sum_{m < i} L[i, m] x_m), so columns are independent
  /// programs (an scf.forall nested in the caller's) and rows within a
  /// column are sequential: a GPU solves all columns at once with no
  /// barrier, a CPU one after another.
  Value invertUnitLower(Value l);

  /// Static sub-tile [offsets, offsets + sizes) of the same rank.
  Value subTile(Value tile, ArrayRef<int64_t> offsets, ArrayRef<int64_t> sizes);
  /// Writes `sub` into `tile` at `offsets`.
  Value insertSubTile(Value sub, Value tile, ArrayRef<int64_t> offsets);
  /// Row `row` of an [M, N] tile as an [N] vector.
  Value rowOf(Value tile, OpFoldResult row);

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

  /// [M, N] -> [N, M].
  Value transpose(Value a);

private:
  ImplicitLocOpBuilder &b;
};

} // namespace mlir::kda

#endif // KDA_PASSES_TILEBUILDER_H
