//===- FuseWindowMix.cpp - a hybrid's mix into the window's epilogue ------===//
//
// kda.hybrid mixes a window's output with another branch (the linear
// attention's) in a pass over memory of its own: the window's output is
// written, read back beside the other branch, and the mix written. Folded
// into kda.window_attention (its mix_linear / mix_gate operands), the window
// kernel applies the mix to its output registers and writes the layer's
// output once: one kernel and two round trips of the window's output fewer.
//
// The window then reads the other branch, so it runs after it: a layer
// entry's window no longer runs beside the state pass (kda-gpu-layer-entry's
// side stream). That is the measured choice (bench/RESULTS.md, forty-seventh
// session: on the H100 the state pass beside the window took longer than
// one after the other; the mix kernel cost more than the fused epilogue).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/KdaOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAFUSEWINDOWMIX
#include "passes/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;
using namespace mlir::kda;

namespace {

/// kda.hybrid mode(x, window_attention(q, k, v)) -> window_attention(q, k,
/// v) mix_linear(x) {mix = mode}. A sum of two takes the window from either
/// side; a gated mix only as its second branch (the (1 - sigmoid(z)) side).
struct FoldMixIntoWindow : OpRewritePattern<HybridOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(HybridOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getBranches().size() != 2)
      return failure();
    const bool gated = op.getMode() == CombineMode::gated;
    auto windowAt = [&](unsigned i) {
      auto w = op.getBranches()[i].getDefiningOp<WindowAttentionOp>();
      return w && w->hasOneUse() && !w.getMix() &&
                     w.getO().getType() == op.getO().getType()
                 ? w
                 : WindowAttentionOp();
    };
    unsigned at = 1;
    WindowAttentionOp window = windowAt(1);
    if (!window && !gated) {
      at = 0;
      window = windowAt(0);
    }
    if (!window)
      return failure();
    Value linear = op.getBranches()[1 - at];
    auto fused = WindowAttentionOp::create(
        rewriter, window.getLoc(), op.getO().getType(), window.getQ(),
        window.getK(), window.getV(), window.getWindowSizes(),
        window.getCuSeqlens(), linear, gated ? op.getZ() : Value(),
        window.getWindowAttr(), window.getScaleAttr(), window.getTileAttr(),
        op.getModeAttr(), window.getEarlierKeysAttr());
    // The overlap schedule (kda-gpu-layer-entry): the window beside the
    // state pass, waiting for its progress.
    if (op.getOverlap())
      fused->setAttr(kOverlapAttr, rewriter.getUnitAttr());
    rewriter.replaceOp(op, fused.getO());
    rewriter.eraseOp(window);
    return success();
  }
};

struct KdaFuseWindowMixPass
    : mlir::kda::impl::KdaFuseWindowMixBase<KdaFuseWindowMixPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldMixIntoWindow>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      getOperation().emitError()
          << "kda-fuse-window-mix: internal error: the rewrite did not "
             "converge";
      signalPassFailure();
    }
  }
};

} // namespace
