//===- GpuPrepareTiles.cpp - every tile primitive a loop nest of one shape ---===//
//
// kda-gpu-prepare-tiles (lowering/Passes.td): copies as linalg.copy and
// reductions innermost, the shape kda-gpu-map-kernels spreads over threads.
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
#define GEN_PASS_DEF_KDAGPUPREPARETILES
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;

namespace {

//===----------------------------------------------------------------------===//
// kda-gpu-prepare-tiles: every tile primitive a loop nest of one shape
//===----------------------------------------------------------------------===//

/// memref.copy becomes linalg.copy (a loop nest like every other primitive),
/// and reductions move innermost, so that each primitive lowers to one
/// scf.parallel over its output elements with a sequential reduction inside:
/// the shape kda-gpu-map-kernels spreads over threads.
struct PrepareTilesPass : kda::impl::KdaGpuPrepareTilesBase<PrepareTilesPass> {
  using Base::Base;
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<linalg::LinalgDialect>();
  }

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp c) { copies.push_back(c); });
    for (memref::CopyOp c : copies) {
      rewriter.setInsertionPoint(c);
      linalg::CopyOp::create(rewriter, c.getLoc(), c.getSource(),
                             c.getTarget());
      rewriter.eraseOp(c);
    }
    SmallVector<linalg::GenericOp> generics;
    getOperation().walk([&](linalg::GenericOp g) { generics.push_back(g); });
    for (linalg::GenericOp g : generics) {
      SmallVector<utils::IteratorType> iters = g.getIteratorTypesArray();
      SmallVector<unsigned> order;
      for (unsigned i = 0; i < iters.size(); ++i)
        if (iters[i] == utils::IteratorType::parallel)
          order.push_back(i);
      for (unsigned i = 0; i < iters.size(); ++i)
        if (iters[i] != utils::IteratorType::parallel)
          order.push_back(i);
      if (llvm::equal(order, llvm::seq<unsigned>(0, iters.size())))
        continue;
      rewriter.setInsertionPoint(g);
      if (failed(linalg::interchangeGenericOp(rewriter, g, order))) {
        g.emitError("kda-gpu-prepare-tiles: cannot move reductions innermost");
        return signalPassFailure();
      }
    }
  }
};

} // namespace

std::unique_ptr<Pass> mlir::kda::createGpuPrepareTilesPass() {
  return std::make_unique<PrepareTilesPass>();
}

