//===- GpuPrepareTiles.cpp - every tile primitive a loop nest of one shape ---===//
//
// kda-gpu-prepare-tiles (lowering/Passes.td): copies as linalg.copy and
// reductions innermost, the shape kda-gpu-map-kernels spreads over threads.
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"
#include "lowering/Strategy.h"

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

/// In an elementwise kernel (kda-gpu-outline-elementwise), a generic that
/// writes a fresh buffer which is then only copied into the destination
/// writes the destination instead. Bufferization leaves the program's tile
/// as such a buffer (shared memory on the GPU): staged, every program pays a
/// store to shared memory, a barrier and a copy out with barriers around it,
/// for work that is a load, a few operations and a store a thread. Only
/// where the generic is all-parallel, the buffer is a memref.alloc of the
/// program's block, the generic does not read its output, and the copy is
/// the next operation that touches memory (so nothing in between sees the
/// destination early).
void forwardElementwiseDestinations(func::FuncOp f) {
  if (!kda::isElementwiseKernel(f))
    return;
  SmallVector<linalg::GenericOp> generics;
  f.walk([&](linalg::GenericOp g) { generics.push_back(g); });
  for (linalg::GenericOp g : generics) {
    if (g.getNumDpsInits() != 1 || g.getNumReductionLoops() != 0 ||
        !g.hasPureBufferSemantics())
      continue;
    OpOperand *init = g.getDpsInitOperand(0);
    if (g.payloadUsesValueFromOperand(init))
      continue;
    auto alloc = init->get().getDefiningOp<memref::AllocOp>();
    if (!alloc || alloc->getBlock() != g->getBlock())
      continue;
    memref::CopyOp copy;
    bool other = false;
    for (Operation *user : alloc->getUsers()) {
      if (user == g.getOperation())
        continue;
      auto c = dyn_cast<memref::CopyOp>(user);
      if (!c || c.getSource() != alloc.getResult() || copy)
        other = true;
      else
        copy = c;
    }
    if (other || !copy || copy->getBlock() != g->getBlock())
      continue;
    // Nothing between the generic and the copy reads or writes memory (a
    // subview of the destination is only an address).
    bool clear = !copy->isBeforeInBlock(g);
    for (Operation *op = g->getNextNode(); clear && op != copy.getOperation();
         op = op->getNextNode())
      clear = isa<memref::SubViewOp>(op) || isPure(op);
    if (!clear)
      continue;
    Value target = copy.getTarget();
    if (cast<MemRefType>(target.getType()).getShape() !=
        alloc.getType().getShape())
      continue;
    if (auto sv = target.getDefiningOp<memref::SubViewOp>()) {
      if (sv->getBlock() == g->getBlock() && g->isBeforeInBlock(sv)) {
        // Its operands are the program's ids and constants: defined above.
        bool above = llvm::all_of(sv->getOperands(), [&](Value v) {
          Operation *d = v.getDefiningOp();
          return !d || d->getBlock() != g->getBlock() ||
                 d->isBeforeInBlock(g);
        });
        if (!above)
          continue;
        sv->moveBefore(g);
      }
    } else if (Operation *d = target.getDefiningOp()) {
      if (d->getBlock() == g->getBlock() && g->isBeforeInBlock(d))
        continue;
    }
    init->set(target);
    copy->erase();
    if (alloc->use_empty())
      alloc->erase();
  }
}

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
    forwardElementwiseDestinations(getOperation());
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

