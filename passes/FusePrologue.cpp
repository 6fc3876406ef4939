//===- FusePrologue.cpp - fold gate activations into the recurrence -------===//

#include "passes/Passes.h"

#include "dialect/KdaOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAFUSEPROLOGUE
#include "passes/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;
using namespace mlir::kda;

namespace {

/// gate(kda.gate(x)) -> gate(x) with the activation done in the kernel.
template <typename RecurrenceOp>
struct FoldGateActivation : OpRewritePattern<RecurrenceOp> {
  using OpRewritePattern<RecurrenceOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(RecurrenceOp op,
                                PatternRewriter &rewriter) const override {
    Value gate = op.getGate();
    if (!gate || op.getGateActivation() != GateActivation::none)
      return failure();
    auto gateOp = gate.getDefiningOp<GateOp>();
    if (!gateOp || !gateOp->hasOneUse())
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      op.getGateMutable().assign(gateOp.getInput());
      if (Value a = gateOp.getALog())
        op.getALogMutable().assign(a);
      if (Value d = gateOp.getDtBias())
        op.getDtBiasMutable().assign(d);
      op.setGateActivation(gateOp.getActivation());
      if (auto lb = gateOp.getLowerBoundAttr())
        op.setLowerBoundAttr(lb);
    });
    rewriter.eraseOp(gateOp);
    return success();
  }
};

struct KdaFuseProloguePass
    : mlir::kda::impl::KdaFusePrologueBase<KdaFuseProloguePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldGateActivation<GatedDeltaOp>,
                 FoldGateActivation<DecodeStepOp>>(&getContext());
    // A failure always comes with a message (tools print "see the errors
    // above").
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      getOperation().emitError()
          << "kda-fuse-prologue: internal error: the rewrite did not converge";
      signalPassFailure();
    }
  }
};

} // namespace
