//===- TileBuilder.cpp - the tile primitives kda kernels are written in ---===//

#include "passes/TileBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mlir::kda;

namespace {
using utils::IteratorType;

RankedTensorType tensorOf(ArrayRef<int64_t> shape, Type elem) {
  return RankedTensorType::get(shape, elem);
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// Body of every product: acc + a * b (fp32 accumulation).
void multiplyAccumulate(OpBuilder &nested, Location loc, ValueRange args) {
  ImplicitLocOpBuilder ib(loc, nested);
  Value prod = arith::MulFOp::create(ib, args[0], args[1]);
  linalg::YieldOp::create(ib, ValueRange{arith::AddFOp::create(ib, args[2], prod)});
}
} // namespace

Value TileBuilder::index(int64_t v) {
  return arith::ConstantIndexOp::create(b, v);
}

Value TileBuilder::constantF32(double v) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
}

SmallVector<int64_t> TensorTileBuilder::shape(Value tile) {
  return llvm::to_vector(shapeOf(tile));
}

Value TensorTileBuilder::emptyOfType(RankedTensorType type,
                               ArrayRef<OpFoldResult> sizes) {
  SmallVector<OpFoldResult> mixed;
  for (int64_t d = 0; d < type.getRank(); ++d)
    mixed.push_back(type.isDynamicDim(d)
                        ? sizes[d]
                        : OpFoldResult(b.getIndexAttr(type.getDimSize(d))));
  return tensor::EmptyOp::create(b, mixed, type.getElementType());
}

Value TensorTileBuilder::filled(ArrayRef<int64_t> shape, double value) {
  Value empty = tensor::EmptyOp::create(b, shape, f32());
  return linalg::FillOp::create(b, ValueRange{constantF32(value)},
                                ValueRange{empty})
      .getResult(0);
}

Value TensorTileBuilder::map(ArrayRef<int64_t> shape, ArrayRef<TileOperand> operands,
                       MapBody body, Type resultType) {
  MLIRContext *ctx = b.getContext();
  unsigned rank = shape.size();
  if (!resultType)
    resultType = f32();
  SmallVector<AffineMap> maps;
  SmallVector<Value> inputs;
  for (const TileOperand &operand : operands) {
    inputs.push_back(operand.value);
    switch (operand.broadcast) {
    case Broadcast::None:
      maps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
      break;
    case Broadcast::AlongColumns: // [M] read at the row index
      maps.push_back(AffineMap::get(rank, 0, {b.getAffineDimExpr(0)}, ctx));
      break;
    case Broadcast::AlongRows: // [N] read at the column index
      maps.push_back(
          AffineMap::get(rank, 0, {b.getAffineDimExpr(rank - 1)}, ctx));
      break;
    }
  }
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
  Value init = tensor::EmptyOp::create(b, shape, resultType);
  SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
  auto op = linalg::GenericOp::create(
      b, TypeRange{init.getType()}, inputs, ValueRange{init}, maps, iterators,
      [&](OpBuilder &nested, Location loc, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nested);
        SmallVector<Value> ivs;
        for (unsigned d = 0; d < rank; ++d)
          ivs.push_back(linalg::IndexOp::create(ib, d));
        Value r = body(ib, args.drop_back(), ivs);
        linalg::YieldOp::create(ib, r);
      });
  return op.getResult(0);
}

Value TileBuilder::matmulAdd(Value acc, Value a, Value bTile, bool transA,
                             bool transB) {
  Value product = matmul(a, bTile, transA, transB);
  return map(shape(acc), {acc, product},
             [](ImplicitLocOpBuilder &bb, ValueRange s, ValueRange) -> Value {
               return arith::AddFOp::create(bb, s[0], s[1]);
             });
}

Value TensorTileBuilder::matmul(Value a, Value bTile, bool transA, bool transB) {
  MLIRContext *ctx = b.getContext();
  ArrayRef<int64_t> as = shapeOf(a), bs = shapeOf(bTile);
  int64_t m = transA ? as[1] : as[0];
  int64_t n = transB ? bs[0] : bs[1];
  // Loop dims (d0, d1, d2) = (i, k, j): j innermost, see the file comment.
  AffineExpr i = b.getAffineDimExpr(0), k = b.getAffineDimExpr(1),
             j = b.getAffineDimExpr(2);
  SmallVector<AffineMap> maps = {
      AffineMap::get(3, 0, transA ? ArrayRef<AffineExpr>{k, i}
                                  : ArrayRef<AffineExpr>{i, k},
                     ctx),
      AffineMap::get(3, 0, transB ? ArrayRef<AffineExpr>{j, k}
                                  : ArrayRef<AffineExpr>{k, j},
                     ctx),
      AffineMap::get(3, 0, {i, j}, ctx)};
  Value init = filled({m, n}, 0.0);
  auto op = linalg::GenericOp::create(
      b, TypeRange{init.getType()}, ValueRange{a, bTile}, ValueRange{init},
      maps,
      {IteratorType::parallel, IteratorType::reduction,
       IteratorType::parallel},
      multiplyAccumulate);
  return op.getResult(0);
}

Value TensorTileBuilder::vecmat(Value x, Value a) {
  MLIRContext *ctx = b.getContext();
  int64_t n = shapeOf(a)[1];
  AffineExpr i = b.getAffineDimExpr(0), j = b.getAffineDimExpr(1);
  SmallVector<AffineMap> maps = {AffineMap::get(2, 0, {i}, ctx),
                                 AffineMap::get(2, 0, {i, j}, ctx),
                                 AffineMap::get(2, 0, {j}, ctx)};
  Value init = filled({n}, 0.0);
  auto op = linalg::GenericOp::create(
      b, TypeRange{init.getType()}, ValueRange{x, a}, ValueRange{init}, maps,
      {IteratorType::reduction, IteratorType::parallel},
      multiplyAccumulate);
  return op.getResult(0);
}

static Value rowReduce(ImplicitLocOpBuilder &b, TensorTileBuilder &tb, Value a,
                       double init, bool isMax) {
  MLIRContext *ctx = b.getContext();
  int64_t m = shapeOf(a)[0];
  AffineExpr i = b.getAffineDimExpr(0), j = b.getAffineDimExpr(1);
  Value acc = tb.filled({m}, init);
  auto op = linalg::GenericOp::create(
      b, TypeRange{acc.getType()}, ValueRange{a}, ValueRange{acc},
      {AffineMap::get(2, 0, {i, j}, ctx), AffineMap::get(2, 0, {i}, ctx)},
      {IteratorType::parallel, IteratorType::reduction},
      [&](OpBuilder &nested, Location loc, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nested);
        Value r = isMax ? Value(arith::MaximumFOp::create(ib, args[1], args[0]))
                        : Value(arith::AddFOp::create(ib, args[1], args[0]));
        linalg::YieldOp::create(ib, ValueRange{r});
      });
  return op.getResult(0);
}

Value TensorTileBuilder::rowSum(Value a) { return rowReduce(b, *this, a, 0.0, false); }

Value TensorTileBuilder::rowMax(Value a) {
  return rowReduce(b, *this, a, -std::numeric_limits<double>::infinity(), true);
}

Value TensorTileBuilder::prefixSumRows(Value a) {
  int64_t m = shapeOf(a)[0];
  Value lowerOnes = map({m, m}, {}, [&](ImplicitLocOpBuilder &ib, ValueRange,
                                        ValueRange ivs) -> Value {
    Value keep =
        arith::CmpIOp::create(ib, arith::CmpIPredicate::ule, ivs[1], ivs[0]);
    return arith::UIToFPOp::create(ib, ib.getF32Type(), keep);
  });
  return matmul(lowerOnes, a);
}

Value TensorTileBuilder::subTile(Value tile, ArrayRef<int64_t> offsets,
                           ArrayRef<int64_t> sizes) {
  SmallVector<OpFoldResult> offs, szs, strides;
  for (auto [o, s] : llvm::zip(offsets, sizes)) {
    offs.push_back(b.getIndexAttr(o));
    szs.push_back(b.getIndexAttr(s));
    strides.push_back(b.getIndexAttr(1));
  }
  auto type = RankedTensorType::get(
      sizes, cast<RankedTensorType>(tile.getType()).getElementType());
  return tensor::ExtractSliceOp::create(b, type, tile, offs, szs, strides);
}

Value TensorTileBuilder::insertSubTile(Value sub, Value tile,
                                 ArrayRef<int64_t> offsets) {
  SmallVector<OpFoldResult> offs, sizes, strides;
  for (auto [o, s] : llvm::zip(offsets, shapeOf(sub))) {
    offs.push_back(b.getIndexAttr(o));
    sizes.push_back(b.getIndexAttr(s));
    strides.push_back(b.getIndexAttr(1));
  }
  return tensor::InsertSliceOp::create(b, sub, tile, offs, sizes, strides);
}

Value TensorTileBuilder::invertUnitLower(Value l) {
  int64_t c = shapeOf(l)[0];
  Value zero = index(0), one = index(1), cIdx = index(c);
  Value init = emptyOfType(tensorOf({c, c}, f32()), {});
  auto columns = scf::ForallOp::create(
      b, ArrayRef<OpFoldResult>{b.getIndexAttr(c)}, ValueRange{init},
      std::nullopt);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(columns.getBody());
  Value j = columns.getInductionVar(0);
  Value out = columns.getRegionIterArgs()[0];
  // Column j of the result, written in place row by row.
  auto colType = tensorOf({c}, f32());
  SmallVector<OpFoldResult> colOffsets = {b.getIndexAttr(0), j};
  SmallVector<OpFoldResult> colSizes = {b.getIndexAttr(c), b.getIndexAttr(1)};
  SmallVector<OpFoldResult> unit = {b.getIndexAttr(1), b.getIndexAttr(1)};
  Value col0 = tensor::ExtractSliceOp::create(b, colType, out, colOffsets,
                                              colSizes, unit);
  auto rows = scf::ForOp::create(
      b, zero, cIdx, one, ValueRange{col0},
      [&](OpBuilder &nb, Location loc, Value i, ValueRange iter) {
        ImplicitLocOpBuilder ib(loc, nb);
        auto sum = scf::ForOp::create(
            ib, zero, i, one, ValueRange{constantF32(0.0)},
            [&](OpBuilder &mb, Location l2, Value m, ValueRange acc) {
              ImplicitLocOpBuilder jb(l2, mb);
              Value lim = tensor::ExtractOp::create(jb, l, ValueRange{i, m});
              Value xm = tensor::ExtractOp::create(jb, iter[0], ValueRange{m});
              Value prod = arith::MulFOp::create(jb, lim, xm);
              scf::YieldOp::create(jb, ValueRange{arith::AddFOp::create(
                                           jb, acc[0], prod)});
            });
        Value diag = arith::CmpIOp::create(ib, arith::CmpIPredicate::eq, i, j);
        Value unitValue = arith::UIToFPOp::create(ib, ib.getF32Type(), diag);
        Value x = arith::SubFOp::create(ib, unitValue, sum.getResult(0));
        Value next = tensor::InsertOp::create(ib, x, iter[0], ValueRange{i});
        scf::YieldOp::create(ib, next);
      });
  b.setInsertionPointToStart(columns.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(b, rows.getResult(0), out, colOffsets,
                                        colSizes, unit);
  return columns.getResult(0);
}

Value TensorTileBuilder::rowOf(Value tile, OpFoldResult row) {
  int64_t n = shapeOf(tile)[1];
  auto type = tensorOf({n}, cast<RankedTensorType>(tile.getType()).getElementType());
  return tensor::ExtractSliceOp::create(
      b, type, tile, ArrayRef<OpFoldResult>{row, b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(n)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
}

Value TensorTileBuilder::rowOf(Value tile, int64_t row) {
  return rowOf(tile, OpFoldResult(b.getIndexAttr(row)));
}

/// The body of decayedPairs and decayedApply: acc + x y exp(gi - gj) where
/// the pair (row, col) is kept (col < row, col <= row when `inclusive`), acc
/// elsewhere; a discarded pair's exponent is 0, so it cannot produce inf.
static Value decayedTerm(ImplicitLocOpBuilder &ib, bool inclusive, Value row,
                         Value col, Value x, Value y, Value gi, Value gj,
                         Value acc) {
  Value keep = arith::CmpIOp::create(
      ib, inclusive ? arith::CmpIPredicate::ule : arith::CmpIPredicate::ult,
      col, row);
  Value zero = arith::ConstantOp::create(ib, ib.getF32FloatAttr(0.0));
  Value exponent =
      arith::SelectOp::create(ib, keep, arith::SubFOp::create(ib, gi, gj), zero);
  Value term = arith::MulFOp::create(ib, arith::MulFOp::create(ib, x, y),
                                     math::ExpOp::create(ib, exponent));
  Value kept = arith::SelectOp::create(ib, keep, term, zero);
  return arith::AddFOp::create(ib, acc, kept);
}

Value TensorTileBuilder::decayedPairs(Value a, Value bt, Value g,
                                      bool inclusive) {
  MLIRContext *ctx = b.getContext();
  int64_t m = shapeOf(a)[0];
  AffineExpr i = b.getAffineDimExpr(0), d = b.getAffineDimExpr(1),
             j = b.getAffineDimExpr(2);
  SmallVector<AffineMap> maps = {
      AffineMap::get(3, 0, {i, d}, ctx), AffineMap::get(3, 0, {j, d}, ctx),
      AffineMap::get(3, 0, {i, d}, ctx), AffineMap::get(3, 0, {j, d}, ctx),
      AffineMap::get(3, 0, {i, j}, ctx)};
  Value init = filled({m, m}, 0.0);
  auto op = linalg::GenericOp::create(
      b, TypeRange{init.getType()}, ValueRange{a, bt, g, g}, ValueRange{init},
      maps,
      {IteratorType::parallel, IteratorType::reduction,
       IteratorType::parallel},
      [&](OpBuilder &nested, Location loc, ValueRange s) {
        ImplicitLocOpBuilder ib(loc, nested);
        Value row = linalg::IndexOp::create(ib, 0);
        Value col = linalg::IndexOp::create(ib, 2);
        linalg::YieldOp::create(
            ib, ValueRange{decayedTerm(ib, inclusive, row, col, s[0], s[1],
                                       s[2], s[3], s[4])});
      });
  return op.getResult(0);
}

Value TileBuilder::decayedApply(Value dP, Value x, Value g, bool inclusive,
                                bool transposed) {
  emitError(b.getLoc(), "this tile builder has no decayedApply (the adjoint "
                        "of decayedPairs)");
  return filled(shape(x), 0.0);
}

Value TensorTileBuilder::decayedApply(Value dP, Value x, Value g,
                                      bool inclusive, bool transposed) {
  MLIRContext *ctx = b.getContext();
  ArrayRef<int64_t> xs = shapeOf(x);
  // Loops (r, d, s): r the output row, s the summed one. The pair (i, j) of
  // the forward is (r, s), or (s, r) when transposed.
  AffineExpr r = b.getAffineDimExpr(0), d = b.getAffineDimExpr(1),
             s = b.getAffineDimExpr(2);
  AffineMap pair = transposed ? AffineMap::get(3, 0, {s, r}, ctx)
                              : AffineMap::get(3, 0, {r, s}, ctx);
  SmallVector<AffineMap> maps = {
      pair, AffineMap::get(3, 0, {s, d}, ctx),
      AffineMap::get(3, 0, {r, d}, ctx), AffineMap::get(3, 0, {s, d}, ctx),
      AffineMap::get(3, 0, {r, d}, ctx)};
  Value init = filled({xs[0], xs[1]}, 0.0);
  auto op = linalg::GenericOp::create(
      b, TypeRange{init.getType()}, ValueRange{dP, x, g, g}, ValueRange{init},
      maps,
      {IteratorType::parallel, IteratorType::parallel,
       IteratorType::reduction},
      [&](OpBuilder &nested, Location loc, ValueRange a) {
        ImplicitLocOpBuilder ib(loc, nested);
        Value row = linalg::IndexOp::create(ib, transposed ? 2 : 0);
        Value col = linalg::IndexOp::create(ib, transposed ? 0 : 2);
        // exp(g_i - g_j) with i the pair's row: g at (r, d) is g_i unless
        // transposed.
        Value gi = transposed ? a[3] : a[2], gj = transposed ? a[2] : a[3];
        linalg::YieldOp::create(
            ib, ValueRange{decayedTerm(ib, inclusive, row, col, a[0], a[1], gi,
                                       gj, a[4])});
      });
  return op.getResult(0);
}

Value TensorTileBuilder::convert(Value t, Type elementType) {
  auto type = cast<RankedTensorType>(t.getType());
  Type from = type.getElementType();
  if (from == elementType)
    return t;
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, b.getLoc(), t);
  Value init = tensor::EmptyOp::create(b, sizes, elementType);
  unsigned rank = type.getRank();
  auto identity = AffineMap::getMultiDimIdentityMap(rank, b.getContext());
  SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
  auto op = linalg::GenericOp::create(
      b, TypeRange{init.getType()}, ValueRange{t}, ValueRange{init},
      {identity, identity}, iterators,
      [&](OpBuilder &nested, Location loc, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nested);
        Value r;
        if (isa<IntegerType>(from))
          r = arith::SIToFPOp::create(ib, elementType, args[0]);
        else if (from.getIntOrFloatBitWidth() <
                 elementType.getIntOrFloatBitWidth())
          r = arith::ExtFOp::create(ib, elementType, args[0]);
        else
          r = arith::TruncFOp::create(ib, elementType, args[0]);
        linalg::YieldOp::create(ib, ValueRange{r});
      });
  return op.getResult(0);
}

/// Offsets/sizes/strides of the src region a tile covers, and the rank-
/// reduced type of that region with `rows` rows.
static void tileRegion(ImplicitLocOpBuilder &b, Value src,
                       ArrayRef<int64_t> tileDims, ArrayRef<int64_t> tileShape,
                       Value rows, SmallVectorImpl<OpFoldResult> &sizes,
                       SmallVectorImpl<OpFoldResult> &strides,
                       RankedTensorType &regionType, Type elementType) {
  auto srcType = cast<RankedTensorType>(src.getType());
  SmallVector<int64_t> regionShape;
  for (int64_t d = 0; d < srcType.getRank(); ++d) {
    strides.push_back(b.getIndexAttr(1));
    auto it = llvm::find(tileDims, d);
    if (it == tileDims.end()) {
      sizes.push_back(b.getIndexAttr(1));
      continue;
    }
    size_t tileDim = it - tileDims.begin();
    if (tileDim == 0) {
      OpFoldResult size = getAsOpFoldResult(rows);
      sizes.push_back(size);
      std::optional<int64_t> known = getConstantIntValue(size);
      regionShape.push_back(known ? *known : ShapedType::kDynamic);
    } else {
      sizes.push_back(b.getIndexAttr(tileShape[tileDim]));
      regionShape.push_back(tileShape[tileDim]);
    }
  }
  regionType = RankedTensorType::get(regionShape, elementType);
}

Value TensorTileBuilder::load(Value src, ArrayRef<OpFoldResult> offsets,
                        ArrayRef<int64_t> tileDims,
                        ArrayRef<int64_t> tileShape, Value validRows) {
  // One elementwise primitive: read, convert to f32, and zero the rows past
  // validRows (a zero row contributes nothing to any product, so partial
  // chunks need no other special case). Read rows are clamped into the
  // valid ones, so nothing past the source's end is touched; on GPUs this
  // is one phase instead of a copy, a conversion, a fill and an insert.
  auto srcType = cast<RankedTensorType>(src.getType());
  Type from = srcType.getElementType();
  Value zero = index(0), one = index(1);
  // The last row that may be read: validRows - 1, or 0 when there is none
  // (the source's first row of this region then; the value is discarded).
  Value lastValid = arith::SubIOp::create(
      b, arith::MaxUIOp::create(b, validRows, one), one);
  Value srcRows;
  if (!tileDims.empty()) {
    int64_t rowDim = tileDims[0];
    srcRows = tensor::DimOp::create(b, src, rowDim);
  }
  Value init = tensor::EmptyOp::create(b, tileShape, f32());
  unsigned rank = tileShape.size();
  auto identity = AffineMap::getMultiDimIdentityMap(rank, b.getContext());
  SmallVector<IteratorType> iterators(rank, IteratorType::parallel);
  SmallVector<Value> offsetValues;
  for (OpFoldResult o : offsets)
    offsetValues.push_back(getValueOrCreateConstantIndexOp(b, b.getLoc(), o));
  auto op = linalg::GenericOp::create(
      b, TypeRange{init.getType()}, ValueRange{}, ValueRange{init},
      ArrayRef<AffineMap>{identity}, iterators,
      [&](OpBuilder &nested, Location loc, ValueRange) {
        ImplicitLocOpBuilder ib(loc, nested);
        SmallVector<Value> ivs;
        for (unsigned d = 0; d < rank; ++d)
          ivs.push_back(linalg::IndexOp::create(ib, d));
        SmallVector<Value> idx;
        for (int64_t d = 0; d < srcType.getRank(); ++d) {
          auto it = llvm::find(tileDims, d);
          if (it == tileDims.end()) {
            idx.push_back(offsetValues[d]);
            continue;
          }
          size_t t = it - tileDims.begin();
          Value iv = ivs[t];
          if (t == 0) {
            iv = arith::MinUIOp::create(ib, iv, lastValid);
            Value row = arith::AddIOp::create(ib, offsetValues[d], iv);
            // Stay inside the source even for an empty region at its end.
            Value last = arith::SubIOp::create(
                ib, arith::MaxUIOp::create(ib, srcRows, one), one);
            idx.push_back(arith::MinUIOp::create(ib, row, last));
            continue;
          }
          idx.push_back(arith::AddIOp::create(ib, offsetValues[d], iv));
        }
        Value v = tensor::ExtractOp::create(ib, src, idx);
        if (from != ib.getF32Type()) {
          if (isa<IntegerType>(from))
            v = arith::SIToFPOp::create(ib, ib.getF32Type(), v);
          else if (from.getIntOrFloatBitWidth() < 32)
            v = arith::ExtFOp::create(ib, ib.getF32Type(), v);
          else
            v = arith::TruncFOp::create(ib, ib.getF32Type(), v);
        }
        Value real = arith::CmpIOp::create(ib, arith::CmpIPredicate::ult,
                                           ivs[0], validRows);
        Value zeroF = arith::ConstantOp::create(ib, ib.getF32FloatAttr(0.0));
        linalg::YieldOp::create(
            ib, ValueRange{arith::SelectOp::create(ib, real, v, zeroF)});
      });
  (void)zero;
  return op.getResult(0);
}

Value TensorTileBuilder::store(Value tile, Value dest, ArrayRef<OpFoldResult> offsets,
                         ArrayRef<int64_t> tileDims, Value validRows) {
  auto destType = cast<RankedTensorType>(dest.getType());
  ArrayRef<int64_t> tileShape = shapeOf(tile);
  SmallVector<OpFoldResult> tileOffsets(tileShape.size(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> tileSizes, unitStrides;
  for (auto [i, s] : llvm::enumerate(tileShape)) {
    tileSizes.push_back(i == 0 ? getAsOpFoldResult(validRows)
                               : OpFoldResult(b.getIndexAttr(s)));
    unitStrides.push_back(b.getIndexAttr(1));
  }
  Value rows = tensor::ExtractSliceOp::create(b, tile, tileOffsets, tileSizes,
                                              unitStrides);
  rows = convert(rows, destType.getElementType());
  SmallVector<OpFoldResult> sizes, strides;
  RankedTensorType regionType;
  tileRegion(b, dest, tileDims, tileShape, validRows, sizes, strides,
             regionType, destType.getElementType());
  return tensor::InsertSliceOp::create(b, rows, dest, offsets, sizes, strides);
}

Value TensorTileBuilder::transpose(Value a) {
  ArrayRef<int64_t> s = shapeOf(a);
  MLIRContext *ctx = b.getContext();
  AffineExpr i = b.getAffineDimExpr(0), j = b.getAffineDimExpr(1);
  Value init = tensor::EmptyOp::create(
      b, ArrayRef<int64_t>{s[1], s[0]},
      cast<RankedTensorType>(a.getType()).getElementType());
  auto op = linalg::GenericOp::create(
      b, TypeRange{init.getType()}, ValueRange{a}, ValueRange{init},
      {AffineMap::get(2, 0, {j, i}, ctx), AffineMap::get(2, 0, {i, j}, ctx)},
      {IteratorType::parallel, IteratorType::parallel},
      [&](OpBuilder &nested, Location loc, ValueRange args) {
        linalg::YieldOp::create(nested, loc, ValueRange{args[0]});
      });
  return op.getResult(0);
}
