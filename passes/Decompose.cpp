//===- Decompose.cpp - kda.gate / hybrid / multi_scale in simpler ops -----===//
//
// These ops are elementwise around the recurrences: they decompose into
// linalg.generic ops (and, for multi_scale, one kda.gated_delta per scale)
// that later passes tile and fuse like any other elementwise work.
//
//===----------------------------------------------------------------------===//

#include "passes/GatedDeltaKernel.h"
#include "passes/Passes.h"
#include "passes/WindowAttentionKernel.h"

#include "dialect/KdaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDADECOMPOSE
#include "passes/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;
using namespace mlir::kda;

namespace {
using utils::IteratorType;

Value toF32(ImplicitLocOpBuilder &b, Value x) {
  if (x.getType().isF32())
    return x;
  return arith::ExtFOp::create(b, b.getF32Type(), x);
}

Value fromF32(ImplicitLocOpBuilder &b, Value x, Type t) {
  if (t.isF32())
    return x;
  return arith::TruncFOp::create(b, t, x);
}

/// An elementwise generic over `result`'s shape; operand i is read through
/// the dims `dims[i]` of the result (e.g. {0, 1, 2} for [B, T, HV] of a
/// [B, T, HV, V] result). Scalars reach the body in f32.
Value elementwise(ImplicitLocOpBuilder &b, RankedTensorType resultType,
                  ValueRange like, ArrayRef<Value> operands,
                  ArrayRef<AffineMap> operandMaps,
                  function_ref<Value(ImplicitLocOpBuilder &, ArrayRef<Value>)>
                      body) {
  unsigned rank = resultType.getRank();
  SmallVector<AffineMap> maps(operandMaps);
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank, b.getContext()));
  SmallVector<OpFoldResult> sizes =
      tensor::getMixedSizes(b, b.getLoc(), like.front());
  Value init = tensor::EmptyOp::create(b, sizes, resultType.getElementType());
  auto op = linalg::GenericOp::create(
      b, TypeRange{resultType}, operands, ValueRange{init}, maps,
      SmallVector<IteratorType>(rank, IteratorType::parallel),
      [&](OpBuilder &nested, Location loc, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nested);
        SmallVector<Value> scalars;
        for (Value a : args.drop_back())
          scalars.push_back(toF32(ib, a));
        Value r = body(ib, scalars);
        linalg::YieldOp::create(
            ib, ValueRange{fromF32(ib, r, resultType.getElementType())});
      });
  return op.getResult(0);
}

/// The same, operand i read through the dims `dims[i]` of the result.
Value elementwise(ImplicitLocOpBuilder &b, RankedTensorType resultType,
                  ValueRange like, ArrayRef<Value> operands,
                  ArrayRef<SmallVector<unsigned>> dims,
                  function_ref<Value(ImplicitLocOpBuilder &, ArrayRef<Value>)>
                      body) {
  SmallVector<AffineMap> maps;
  for (auto &d : dims) {
    SmallVector<AffineExpr> exprs;
    for (unsigned x : d)
      exprs.push_back(b.getAffineDimExpr(x));
    maps.push_back(AffineMap::get(resultType.getRank(), 0, exprs,
                                  b.getContext()));
  }
  return elementwise(b, resultType, like, operands, maps, body);
}

SmallVector<unsigned> iota(unsigned n) {
  SmallVector<unsigned> r;
  for (unsigned i = 0; i < n; ++i)
    r.push_back(i);
  return r;
}

Value sigmoid(ImplicitLocOpBuilder &b, Value x) {
  return activateBetaValue(b, BetaActivation::sigmoid, x);
}

struct DecomposeGate : OpRewritePattern<GateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GateOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    auto type = cast<RankedTensorType>(op.getResult().getType());
    unsigned rank = type.getRank();
    bool channel = op.getGranularity() == GateGranularity::channel;
    unsigned headAxis = channel ? rank - 2 : rank - 1;
    SmallVector<Value> operands = {op.getInput()};
    SmallVector<SmallVector<unsigned>> dims = {iota(rank)};
    if (op.getALog()) {
      operands.push_back(op.getALog());
      dims.push_back({headAxis});
    }
    if (op.getDtBias()) {
      operands.push_back(op.getDtBias());
      dims.push_back(channel ? SmallVector<unsigned>{headAxis, rank - 1}
                             : SmallVector<unsigned>{headAxis});
    }
    double lb = op.getLowerBound() ? op.getLowerBound()->convertToDouble() : -5.0;
    bool hasALog = static_cast<bool>(op.getALog());
    bool hasDt = static_cast<bool>(op.getDtBias());
    Value r = elementwise(
        b, type, op.getInput(), operands, dims,
        [&](ImplicitLocOpBuilder &ib, ArrayRef<Value> s) {
          unsigned i = 1;
          Value aLog = hasALog ? s[i++] : Value();
          Value dt = hasDt ? s[i++] : Value();
          return activateGateValue(ib, op.getActivation(), lb, s[0], aLog, dt);
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct DecomposeHybrid : OpRewritePattern<HybridOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(HybridOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    auto type = cast<RankedTensorType>(op.getO().getType());
    SmallVector<Value> operands(op.getBranches());
    SmallVector<SmallVector<unsigned>> dims(operands.size(), iota(4));
    bool gated = op.getMode() == CombineMode::gated;
    if (gated) {
      operands.push_back(op.getZ());
      dims.push_back(
          iota(cast<RankedTensorType>(op.getZ().getType()).getRank()));
    }
    size_t numBranches = op.getBranches().size();
    Value r = elementwise(
        b, type, op.getBranches(), operands, dims,
        [&](ImplicitLocOpBuilder &ib, ArrayRef<Value> s) -> Value {
          if (!gated) {
            Value acc = s[0];
            for (size_t i = 1; i < numBranches; ++i)
              acc = arith::AddFOp::create(ib, acc, s[i]);
            return acc;
          }
          // sigmoid(z) * first + (1 - sigmoid(z)) * second
          return mixValue(ib, /*window=*/s[1], /*linear=*/s[0], s[2]);
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct DecomposeMultiScale : OpRewritePattern<MultiScaleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MultiScaleOp op,
                                PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    int64_t m = op.getNumScales();
    auto oType = cast<RankedTensorType>(op.getO().getType());
    auto statesType =
        op.getFinalStates()
            ? cast<RankedTensorType>(op.getFinalStates().getType())
            : RankedTensorType();
    SmallVector<Value> outputs;
    // The stacked final states [M, N, HV, ., .], created once the first
    // recurrence exists: its dynamic sizes are read from that recurrence's
    // final state, never from op's own result (which is defined after any
    // op created here, and replaced by `states` below).
    Value states;

    for (int64_t i = 0; i < m; ++i) {
      Value gate;
      double c = 1.0;
      if (auto scales = op.getDecayScales())
        c = cast<FloatAttr>((*scales)[i]).getValueAsDouble();
      if (op.getDecayScales() && c != 1.0) {
        Value g = op.getGates()[0];
        auto gType = cast<RankedTensorType>(g.getType());
        Value cv = arith::ConstantOp::create(b, b.getF32FloatAttr(c));
        gate = elementwise(b, gType, g, {g}, {iota(gType.getRank())},
                           [&](ImplicitLocOpBuilder &ib, ArrayRef<Value> s) {
                             return Value(arith::MulFOp::create(ib, s[0], cv));
                           });
      } else {
        gate = op.getGates()[op.getDecayScales() ? 0 : i];
      }
      Value init;
      if (Value all = op.getInitialStates()) {
        auto t = cast<RankedTensorType>(all.getType());
        SmallVector<OpFoldResult> offsets(5, b.getIndexAttr(0));
        offsets[0] = b.getIndexAttr(i);
        SmallVector<OpFoldResult> sizes =
            tensor::getMixedSizes(b, b.getLoc(), all);
        sizes[0] = b.getIndexAttr(1);
        auto sliceType = RankedTensorType::get(t.getShape().drop_front(),
                                               t.getElementType());
        init = tensor::ExtractSliceOp::create(
            b, sliceType, all, offsets, sizes,
            SmallVector<OpFoldResult>(5, b.getIndexAttr(1)));
      }
      Type finalType;
      if (statesType)
        finalType = RankedTensorType::get(statesType.getShape().drop_front(),
                                          statesType.getElementType());
      SmallVector<Type> resultTypes = {oType};
      if (finalType)
        resultTypes.push_back(finalType);
      OperationState state(op.getLoc(), GatedDeltaOp::getOperationName());
      state.addTypes(resultTypes);
      SmallVector<Value> operands = {op.getQ(), op.getK(), op.getV(), gate};
      Value beta = op.getBeta();
      if (beta)
        operands.push_back(beta);
      if (init)
        operands.push_back(init);
      if (Value cu = op.getCuSeqlens())
        operands.push_back(cu);
      state.addOperands(operands);
      state.addAttribute("operandSegmentSizes",
                         b.getDenseI32ArrayAttr({1, 1, 1, 1, beta ? 1 : 0,
                                                 init ? 1 : 0,
                                                 op.getCuSeqlens() ? 1 : 0, 0,
                                                 0, 0}));
      state.addAttribute("resultSegmentSizes",
                         b.getDenseI32ArrayAttr({1, finalType ? 1 : 0, 0}));
      state.addAttribute("update", op.getUpdateAttr());
      if (op.getScale())
        state.addAttribute("scale", op.getScaleAttr());
      state.addAttribute("state_layout", op.getStateLayoutAttr());
      if (op.getQkL2norm())
        state.addAttribute("qk_l2norm", b.getUnitAttr());
      state.addAttribute("beta_activation", op.getBetaActivationAttr());
      if (op.getTile())
        state.addAttribute("tile", *op.getTile());
      Operation *recurrence = b.create(state);
      outputs.push_back(recurrence->getResult(0));
      if (statesType) {
        if (!states) {
          SmallVector<OpFoldResult> sizes = {b.getIndexAttr(m)};
          llvm::append_range(sizes, tensor::getMixedSizes(
                                        b, b.getLoc(), recurrence->getResult(1)));
          states = tensor::EmptyOp::create(b, sizes,
                                           statesType.getElementType());
        }
        SmallVector<OpFoldResult> offsets(5, b.getIndexAttr(0));
        offsets[0] = b.getIndexAttr(i);
        SmallVector<OpFoldResult> sizes =
            tensor::getMixedSizes(b, b.getLoc(), states);
        sizes[0] = b.getIndexAttr(1);
        states = tensor::InsertSliceOp::create(
            b, recurrence->getResult(1), states, offsets, sizes,
            SmallVector<OpFoldResult>(5, b.getIndexAttr(1)));
      }
    }

    // o = sum_m o_m, or sum_m sigmoid(z[..., m]) o_m.
    bool gated = op.getMode() == CombineMode::gated;
    SmallVector<Value> operands(outputs);
    SmallVector<SmallVector<unsigned>> dims(outputs.size(), iota(4));
    if (gated) {
      operands.push_back(op.getZ());
      dims.push_back({0, 1, 2}); // z [B, T, HV, M]: read all M at once below
    }
    Value o;
    if (!gated) {
      o = elementwise(b, oType, outputs, operands, dims,
                      [&](ImplicitLocOpBuilder &ib, ArrayRef<Value> s) {
                        Value acc = s[0];
                        for (int64_t i = 1; i < m; ++i)
                          acc = arith::AddFOp::create(ib, acc, s[i]);
                        return acc;
                      });
    } else {
      // z [B, T, HV, M] read once per scale at z[..., i]: the same operand
      // through the map (b, t, h, v) -> (b, t, h, i), so that no slice of z
      // (a strided view a GPU bundle entry cannot pass) exists.
      operands.pop_back();
      dims.pop_back();
      unsigned rank = oType.getRank();
      SmallVector<AffineMap> maps;
      for (int64_t i = 0; i < m; ++i)
        maps.push_back(AffineMap::getMultiDimIdentityMap(rank, b.getContext()));
      for (int64_t i = 0; i < m; ++i) {
        operands.push_back(op.getZ());
        maps.push_back(AffineMap::get(
            rank, 0,
            {b.getAffineDimExpr(0), b.getAffineDimExpr(1),
             b.getAffineDimExpr(2), b.getAffineConstantExpr(i)},
            b.getContext()));
      }
      o = elementwise(b, oType, outputs, operands, maps,
                      [&](ImplicitLocOpBuilder &ib, ArrayRef<Value> s) {
                        Value acc;
                        for (int64_t i = 0; i < m; ++i) {
                          Value term = arith::MulFOp::create(
                              ib, sigmoid(ib, s[m + i]), s[i]);
                          acc = acc ? Value(arith::AddFOp::create(ib, acc, term))
                                    : term;
                        }
                        return acc;
                      });
    }
    SmallVector<Value> replacements = {o};
    if (statesType) {
      // M is static here; the result may spell it '?'.
      if (states.getType() != statesType)
        states = tensor::CastOp::create(b, statesType, states);
      replacements.push_back(states);
    }
    rewriter.replaceOp(op, replacements);
    return success();
  }
};

struct KdaDecomposePass : mlir::kda::impl::KdaDecomposeBase<KdaDecomposePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<DecomposeGate, DecomposeHybrid, DecomposeMultiScale>(
        &getContext());
    // A failure always comes with a message (tools print "see the errors
    // above").
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      getOperation().emitError()
          << "kda-decompose: internal error: the rewrite did not converge";
      signalPassFailure();
    }
  }
};

} // namespace
