//===- WindowAttentionKernel.cpp - sliding-window attention, once ---------===//
//
// Causal sliding-window attention (SPEC.md section 5) in the same tile
// primitives as the gated delta kernel. Per query block:
//
//   state = windowStart
//   for each key block the window reaches: state = windowStep(state, ...)
//   O = windowOutput(state)
//
// (the softmax in base 2: the running maximum in units of log2(e) times the
// scaled scores, see windowStep).
//
// windowStep is the online softmax (WindowAttentionKernel.h); which keys a
// row counts (causal, inside the window, inside the sequence) is the
// driver's filter, built from windowFirstKey.
//
//===----------------------------------------------------------------------===//

#include "passes/WindowAttentionKernel.h"
#include "passes/GatedDeltaKernel.h"
#include "passes/Sequences.h"
#include "passes/TileBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::kda;

namespace {
Value f32c(ImplicitLocOpBuilder &b, double v) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
}
int64_t dimOf(Value v, unsigned d) {
  return cast<RankedTensorType>(v.getType()).getDimSize(d);
}
} // namespace

SoftmaxState mlir::kda::windowStart(TileBuilder &tb, int64_t rows,
                                    int64_t valueDim) {
  return {tb.filled({rows}, -1e30), tb.filled({rows}, 0.0),
          tb.filled({rows, valueDim}, 0.0)};
}

SoftmaxState mlir::kda::windowStep(TileBuilder &tb, Value q, Value k, Value v,
                                   double scale, KeyFilter keep,
                                   ArrayRef<Value> rowData,
                                   const SoftmaxState &s) {
  const int64_t rows = tb.shape(q)[0], keys = tb.shape(k)[0],
                vd = tb.shape(v)[1];
  // In base 2: with c = scale log2(e), exp(scale s - M) = exp2(c s - m) for
  // m = M log2(e). The running maximum is kept in those units, so that each
  // score costs one fused multiply-add and one exp2.
  const double c = scale / std::log(2.0);
  Value scores = tb.matmul(q, k, false, true);
  Value masked = scores;
  if (keep) {
    SmallVector<TileOperand> operands = {scores};
    for (Value d : rowData)
      operands.push_back(perRow(d));
    masked = tb.map(
        {rows, keys}, operands,
        [&](ImplicitLocOpBuilder &bb, ValueRange x, ValueRange ivs) {
          return Value(arith::SelectOp::create(
              bb, keep(bb, ivs[0], ivs[1], x.drop_front()), x[0],
              f32c(bb, -std::numeric_limits<double>::infinity())));
        });
  }
  Value blockMax = tb.rowMax(masked);
  Value mNew = tb.map({rows}, {s.m, blockMax},
                      [&](ImplicitLocOpBuilder &bb, ValueRange x, ValueRange) {
                        return Value(arith::MaximumFOp::create(
                            bb, x[0], arith::MulFOp::create(bb, x[1], f32c(bb, c))));
                      });
  Value p = tb.map({rows, keys}, {masked, perRow(mNew)},
                   [&](ImplicitLocOpBuilder &bb, ValueRange x, ValueRange) {
                     return Value(math::Exp2Op::create(
                         bb, math::FmaOp::create(
                                 bb, x[0], f32c(bb, c),
                                 arith::NegFOp::create(bb, x[1]))));
                   });
  Value rescale = tb.map({rows}, {s.m, mNew},
                         [](ImplicitLocOpBuilder &bb, ValueRange x, ValueRange) {
                           return Value(math::Exp2Op::create(
                               bb, arith::SubFOp::create(bb, x[0], x[1])));
                         });
  Value lNew = tb.map({rows}, {s.l, rescale, tb.rowSum(p)},
                      [](ImplicitLocOpBuilder &bb, ValueRange x, ValueRange) {
                        return Value(arith::AddFOp::create(
                            bb, arith::MulFOp::create(bb, x[0], x[1]), x[2]));
                      });
  // The accumulator is rescaled first and the product added to it, which a
  // matrix instruction does in place (no registers for P V of its own).
  Value kept = tb.map({rows, vd}, {s.acc, perRow(rescale)},
                      [](ImplicitLocOpBuilder &bb, ValueRange x, ValueRange) {
                        return Value(arith::MulFOp::create(bb, x[0], x[1]));
                      });
  Value accNew = tb.matmulAdd(kept, p, v);
  return {mNew, lNew, accNew};
}

Value mlir::kda::windowOutput(TileBuilder &tb, const SoftmaxState &s) {
  SmallVector<int64_t> shape = tb.shape(s.acc);
  return tb.map(shape, {s.acc, perRow(s.l)},
                [](ImplicitLocOpBuilder &bb, ValueRange x, ValueRange) {
                  return Value(arith::DivFOp::create(bb, x[0], x[1]));
                });
}

Value mlir::kda::mixValue(ImplicitLocOpBuilder &b, Value window,
                          Value linear, Value gate) {
  if (!gate)
    return arith::AddFOp::create(b, linear, window);
  Value s = activateBetaValue(b, BetaActivation::sigmoid, gate);
  return arith::AddFOp::create(
      b, window,
      arith::MulFOp::create(b, s, arith::SubFOp::create(b, linear, window)));
}

Value mlir::kda::windowMix(TileBuilder &tb, Value window, Value linear,
                           Value gate) {
  SmallVector<TileOperand> operands = {window, linear};
  if (gate)
    operands.push_back(tb.shape(gate).size() == 1 ? perRow(gate)
                                                  : TileOperand(gate));
  return tb.map(tb.shape(window), operands,
                [](ImplicitLocOpBuilder &bb, ValueRange x, ValueRange) {
                  return mixValue(bb, x[0], x[1],
                                  x.size() > 2 ? x[2] : Value());
                });
}

Value mlir::kda::windowKeeps(ImplicitLocOpBuilder &b, Value qi, Value kj,
                             Value window) {
  Value causal = arith::CmpIOp::create(b, arith::CmpIPredicate::ule, kj, qi);
  Value inWindow = arith::CmpIOp::create(b, arith::CmpIPredicate::uge, kj,
                                         windowFirstKey(b, qi, window));
  return arith::AndIOp::create(b, causal, inWindow);
}

Value mlir::kda::windowFromF32(ImplicitLocOpBuilder &b, Value size) {
  return arith::IndexCastOp::create(
      b, b.getIndexType(), arith::FPToSIOp::create(b, b.getI64Type(), size));
}

Value mlir::kda::windowFirstKey(ImplicitLocOpBuilder &b, Value qi,
                                Value window) {
  // qi + 1 > window: the window starts inside the sequence.
  Value next = arith::AddIOp::create(b, qi, arith::ConstantIndexOp::create(b, 1));
  Value inside =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, next, window);
  return arith::SelectOp::create(b, inside,
                                 arith::SubIOp::create(b, next, window),
                                 arith::ConstantIndexOp::create(b, 0));
}

Value mlir::kda::emitWindowAttention(ImplicitLocOpBuilder &b,
                                     WindowAttentionOp op, int64_t c) {
  TensorTileBuilder tb(b);
  Value q = op.getQ(), k = op.getK(), v = op.getV();
  const int64_t kd = dimOf(q, 3), vd = dimOf(v, 3);
  // Head counts (dimension 2) and token rows (1) may be dynamic (one GPU
  // kernel serves any).
  auto size = [&](Value t, unsigned d) -> Value {
    if (!ShapedType::isDynamic(dimOf(t, d)))
      return tb.index(dimOf(t, d));
    return tensor::DimOp::create(b, t, d);
  };
  Value hq = size(q, 2), hk = size(k, 2), hvIn = size(v, 2);
  Value ho = arith::MaxUIOp::create(b, hq, hvIn);
  const bool perPosition = static_cast<bool>(op.getWindowSizes());
  const double scale =
      op.getScale() ? op.getScale()->convertToDouble() : 1.0 / std::sqrt(double(kd));
  auto oType = cast<RankedTensorType>(op.getO().getType());

  Value zero = tb.index(0), one = tb.index(1), cIdx = tb.index(c);
  SequenceLayout sequences(b, q, op.getCuSeqlens());
  // Earlier keys (dense): k and v hold S >= T rows, query row t at key row
  // t + shift, shift = S - T; every key position below is the key rows'.
  Value keyRows, shift;
  if (op.getEarlierKeys()) {
    keyRows = size(k, 1);
    shift = arith::SubIOp::create(b, keyRows, size(q, 1));
  }
  Value out = tb.emptyOfType(oType, {sequences.batch(), sequences.tokens(),
                                     ho, b.getIndexAttr(vd)});

  auto forall = scf::ForallOp::create(
      b, ArrayRef<OpFoldResult>{sequences.gridSize(), getAsOpFoldResult(ho)},
      ValueRange{out}, std::nullopt);
  b.setInsertionPointToStart(forall.getBody());
  Value n = forall.getInductionVar(0), head = forall.getInductionVar(1);
  Value shared = forall.getRegionIterArgs()[0];
  SequenceLayout::Bounds where = sequences.bounds(b, n);
  Value row = where.row, start = where.start, length = where.length;
  Value qHead = arith::DivUIOp::create(b, head, arith::DivUIOp::create(b, ho, hq));
  Value kHead = arith::DivUIOp::create(b, head, arith::DivUIOp::create(b, ho, hk));
  Value vHead = arith::DivUIOp::create(b, head, arith::DivUIOp::create(b, ho, hvIn));

  auto regionType =
      RankedTensorType::get({ShapedType::kDynamic, vd}, oType.getElementType());
  SmallVector<OpFoldResult> regionOffsets = {row, start, head, zero};
  SmallVector<OpFoldResult> regionSizes = {b.getIndexAttr(1), length,
                                           b.getIndexAttr(1),
                                           b.getIndexAttr(vd)};
  SmallVector<OpFoldResult> unit(4, b.getIndexAttr(1));
  Value region = tensor::ExtractSliceOp::create(b, regionType, shared,
                                                regionOffsets, regionSizes, unit);

  Value numBlocks = arith::CeilDivUIOp::create(b, length, cIdx);
  auto queryLoop = scf::ForOp::create(
      b, zero, numBlocks, one, ValueRange{region},
      [&](OpBuilder &n1, Location l1, Value qb, ValueRange qIter) {
        ImplicitLocOpBuilder b1(l1, n1);
        TensorTileBuilder tb1(b1);
        Value z = tb1.index(0);
        Value q0 = arith::MulIOp::create(b1, qb, cIdx);
        Value validQ = validRows(b1, cIdx, length, q0);
        Value qAbs = arith::AddIOp::create(b1, start, q0);
        Value qTile = tb1.load(q, {row, qAbs, qHead, z},
                               {1, 3}, {c, kd}, validQ);
        // Window per query row (f32 holds the integer sizes exactly).
        Value windows;
        Value firstBlock = z;
        // The block's first query's key row.
        Value qk0 = shift ? Value(arith::AddIOp::create(b1, q0, shift)) : q0;
        if (perPosition) {
          windows = tb1.load(op.getWindowSizes(),
                             {qAbs}, {0}, {c},
                             validQ);
          // Sizes past 2^62 reach every key: clamped (as a static window
          // is, below) so that their f32 copies convert back to i64.
          Value cap = f32c(b1, double(int64_t(1) << 62));
          windows = tb1.map({c}, {windows}, [&](ImplicitLocOpBuilder &bb,
                                                ValueRange s, ValueRange) {
            return Value(arith::MinimumFOp::create(bb, s[0], cap));
          });
        } else {
          // Windows past 2^62 reach every key of any sequence: clamped
          // there, so that the f32 copy converts back to i64 (2^63 - 1
          // rounds to 2^63, which does not, and masked every key: NaN).
          int64_t w = static_cast<int64_t>(
              std::min<uint64_t>(*op.getWindow(), uint64_t(1) << 62));
          windows = tb1.filled({c}, double(w));
          // First key block the window reaches from this query block.
          Value reach = tb1.index(w - 1);
          Value lowest = arith::SelectOp::create(
              b1,
              arith::CmpIOp::create(b1, arith::CmpIPredicate::ugt, qk0, reach),
              arith::SubIOp::create(b1, qk0, reach), z);
          firstBlock = arith::DivUIOp::create(b1, lowest, cIdx);
        }
        // One past the key block of the block's last valid query: qb + 1
        // where keys and queries are the same rows.
        Value endBlock = arith::AddIOp::create(b1, qb, tb1.index(1));
        if (shift) {
          Value qEnd = arith::MinUIOp::create(
              b1, arith::AddIOp::create(b1, q0, cIdx), length);
          endBlock = arith::AddIOp::create(
              b1,
              arith::DivUIOp::create(
                  b1,
                  arith::SubIOp::create(
                      b1, arith::AddIOp::create(b1, qEnd, shift),
                      tb1.index(1)),
                  cIdx),
              tb1.index(1));
        }
        SoftmaxState start0 = windowStart(tb1, c, vd);
        auto keyLoop = scf::ForOp::create(
            b1, firstBlock, endBlock,
            tb1.index(1), ValueRange{start0.m, start0.l, start0.acc},
            [&](OpBuilder &n2, Location l2, Value kb, ValueRange it) {
              ImplicitLocOpBuilder b2(l2, n2);
              TensorTileBuilder tb2(b2);
              Value z2 = tb2.index(0);
              Value k0 = arith::MulIOp::create(b2, kb, cIdx);
              Value validK =
                  validRows(b2, cIdx, keyRows ? keyRows : length, k0);
              Value kAbs = arith::AddIOp::create(b2, start, k0);
              Value kTile = tb2.load(k, {row, kAbs, kHead, z2}, {1, 3},
                                     {c, kd}, validK);
              Value vTile = tb2.load(v, {row, kAbs, vHead, z2}, {1, 3},
                                     {c, vd}, validK);
              auto keep = [&](ImplicitLocOpBuilder &bb, Value r, Value col,
                              ValueRange rowScalars) -> Value {
                return windowKeeps(bb, arith::AddIOp::create(bb, qk0, r),
                                   arith::AddIOp::create(bb, k0, col),
                                   windowFromF32(bb, rowScalars[0]));
              };
              SoftmaxState next =
                  windowStep(tb2, qTile, kTile, vTile, scale, keep, {windows},
                             {it[0], it[1], it[2]});
              scf::YieldOp::create(b2,
                                   ValueRange{next.m, next.l, next.acc});
            });
        Value o = windowOutput(tb1, {keyLoop.getResult(0),
                                     keyLoop.getResult(1),
                                     keyLoop.getResult(2)});
        if (op.getMix()) {
          // The fused hybrid mix (kda-fuse-window-mix): the other branch's
          // rows of this block and, gated, their gates.
          Value x = tb1.load(op.getMixLinear(), {row, qAbs, head, z}, {1, 3},
                             {c, vd}, validQ);
          Value gate;
          if (Value zt = op.getMixGate()) {
            gate = cast<ShapedType>(zt.getType()).getRank() == 4
                       ? tb1.load(zt, {row, qAbs, head, z}, {1, 3}, {c, vd},
                                  validQ)
                       : tb1.load(zt, {row, qAbs, head}, {1}, {c}, validQ);
          }
          o = windowMix(tb1, o, x, gate);
        }
        Value next = tb1.store(o, qIter[0], {q0, z}, {0, 1}, validQ);
        scf::YieldOp::create(b1, next);
      });

  b.setInsertionPointToStart(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(b, queryLoop.getResult(0), shared,
                                        regionOffsets, regionSizes, unit);
  b.setInsertionPointAfter(forall);
  return forall.getResult(0);
}
