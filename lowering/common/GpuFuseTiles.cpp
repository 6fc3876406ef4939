//===- GpuFuseTiles.cpp - fewer, larger elementwise primitives --------------===//
//
// kda-gpu-fuse-tiles (lowering/Passes.td): chains of elementwise tile maps
// become one primitive (one GPU phase, no intermediate tile).
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"

#include "dialect/KdaAttrs.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/STLExtras.h"

#include "lowering/Passes.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAGPUFUSETILES
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;

namespace {

//===----------------------------------------------------------------------===//
// kda-gpu-fuse-tiles: fewer, larger elementwise primitives
//===----------------------------------------------------------------------===//

/// On a GPU every tile primitive is a phase of the block, fenced by
/// barriers, and every intermediate tile a shared-memory buffer. Chains of
/// elementwise maps (gating, activations, masks) fuse into one primitive;
/// matmuls keep their plain multiply-accumulate bodies (they run on the
/// matrix units), so only elementwise consumers take producers in.
struct FuseTilesPass : kda::impl::KdaGpuFuseTilesBase<FuseTilesPass> {
  using Base::Base;
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<linalg::LinalgDialect, tensor::TensorDialect>();
  }
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::ControlFusionFn control = [](OpOperand *fused) {
      auto consumer = dyn_cast<linalg::GenericOp>(fused->getOwner());
      auto producer = fused->get().getDefiningOp<linalg::GenericOp>();
      if (!consumer || !producer)
        return false;
      auto allParallel = [](linalg::GenericOp g) {
        return llvm::all_of(g.getIteratorTypesArray(), [](auto t) {
          return t == utils::IteratorType::parallel;
        });
      };
      return allParallel(consumer) && allParallel(producer);
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace

std::unique_ptr<Pass> mlir::kda::createGpuFuseTilesPass() {
  return std::make_unique<FuseTilesPass>();
}
