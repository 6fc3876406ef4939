//===- GpuBindDestinations.cpp - kernels write their result arguments -------===//
//
// kda-gpu-bind-destinations (lowering/Passes.td): outlined destination-style
// kernels write their result arguments, so that bufferization writes the
// caller's buffers in place.
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
#define GEN_PASS_DEF_KDAGPUBINDDESTINATIONS
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;

namespace {

constexpr StringLiteral kAbiAttr = "kda.abi";

//===----------------------------------------------------------------------===//
// kda-gpu-bind-destinations: results are written into the kernel's arguments
//===----------------------------------------------------------------------===//

/// Outlined destination-style kernels return what their scf.forall wrote into
/// fresh tensors; make the forall write into the result arguments instead, so
/// that bufferization writes the caller's buffers in place.
struct BindDestinationsPass : kda::impl::KdaGpuBindDestinationsBase<BindDestinationsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func->hasAttr(kAbiAttr) || func.isExternal())
      return;
    // CSE merges every empty (and zero-filled) tile of one shape into one
    // value, hoisted to its first use; every op writing into it would then
    // share one buffer live for the whole program, or copy it into its own.
    // One empty / fill per use bufferizes each in place.
    SmallVector<tensor::EmptyOp> empties;
    func.walk([&](tensor::EmptyOp e) {
      if (!e->getResult(0).hasOneUse())
        empties.push_back(e);
    });
    for (tensor::EmptyOp e : empties)
      for (OpOperand &use :
           llvm::make_early_inc_range(e->getResult(0).getUses())) {
        OpBuilder b(use.getOwner());
        use.set(b.clone(*e)->getResult(0));
      }
    SmallVector<linalg::FillOp> fills;
    func.walk([&](linalg::FillOp f) {
      if (f.hasPureTensorSemantics() && !f->getResult(0).hasOneUse())
        fills.push_back(f);
    });
    for (linalg::FillOp f : fills) {
      for (OpOperand &use :
           llvm::make_early_inc_range(f->getResult(0).getUses())) {
        OpBuilder b(use.getOwner());
        IRMapping map;
        if (auto empty = f.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
          map.map(empty.getResult(), b.clone(*empty)->getResult(0));
        use.set(b.clone(*f, map)->getResult(0));
      }
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    unsigned firstDest = func.getNumArguments() - ret.getNumOperands();
    for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
      Value dest = func.getArgument(firstDest + i);
      Value v = value;
      while (auto cast = v.getDefiningOp<tensor::CastOp>())
        v = cast.getSource();
      if (v == dest)
        continue;
      // A result no program writes (boundary states into pool slots, which
      // the state kernel stores itself: the grid's shared output folds
      // away) is the caller's buffer, left as it holds it.
      if (auto empty = v.getDefiningOp<tensor::EmptyOp>()) {
        OpBuilder b(ret);
        Value destCast = dest;
        if (dest.getType() != value.getType())
          destCast = tensor::CastOp::create(b, ret.getLoc(), value.getType(),
                                            dest);
        ret->setOperand(i, destCast);
        continue;
      }
      // Program loop nests (decode) update their destination operands in
      // place already.
      if (auto loop = v.getDefiningOp<scf::ForOp>();
          loop && loop->hasAttr(kda::kProgramLoopAttr))
        continue;
      auto forall = v.getDefiningOp<scf::ForallOp>();
      if (!forall) {
        func.emitError() << "kda-gpu-bind-destinations: result " << i
                         << " is not written by the kernel's program grid";
        return signalPassFailure();
      }
      OpOperand &init =
          forall.getOutputsMutable()[cast<OpResult>(v).getResultNumber()];
      Value initValue = init.get();
      while (auto cast = initValue.getDefiningOp<tensor::CastOp>())
        initValue = cast.getSource();
      if (initValue == dest)
        continue; // already writes the destination (elementwise kernels)
      // The grid starts from an empty tensor, or one filled with a constant
      // (boundary states): that empty becomes the destination.
      auto fill = initValue.getDefiningOp<linalg::FillOp>();
      Value start = fill ? fill.getOutputs()[0] : initValue;
      auto empty = start.getDefiningOp<tensor::EmptyOp>();
      if (!empty) {
        func.emitError() << "kda-gpu-bind-destinations: result " << i
                         << " starts from a value the kernel cannot write in "
                            "place";
        return signalPassFailure();
      }
      OpBuilder b(fill ? fill.getOperation() : forall.getOperation());
      Value destCast = dest;
      if (dest.getType() != empty.getType())
        destCast = tensor::CastOp::create(b, forall.getLoc(), empty.getType(),
                                          dest);
      if (fill) {
        fill.getOutputsMutable()[0].set(destCast);
        continue;
      }
      init.set(destCast);
      // A grid extent that sized the result (window attention's output
      // heads, max(HQ, HV)) is that dimension of the destination: a symbol
      // of the kernel's ABI.
      SmallVector<OpFoldResult> ubs = forall.getMixedUpperBound();
      bool changed = false;
      for (OpFoldResult &ub : ubs) {
        auto v = dyn_cast<Value>(ub);
        if (!v)
          continue;
        for (int64_t d = 0, e = empty.getType().getRank(); d < e; ++d)
          if (empty.getType().isDynamicDim(d) && empty.getDynamicSize(d) == v) {
            ub = tensor::DimOp::create(b, forall.getLoc(), dest, d).getResult();
            changed = true;
            break;
          }
      }
      if (changed) {
        SmallVector<Value> dynamicUbs;
        SmallVector<int64_t> staticUbs;
        dispatchIndexOpFoldResults(ubs, dynamicUbs, staticUbs);
        forall.getDynamicUpperBoundMutable().assign(dynamicUbs);
        forall.setStaticUpperBound(staticUbs);
      }
    }
  }
};

} // namespace

std::unique_ptr<Pass> mlir::kda::createGpuBindDestinationsPass() {
  return std::make_unique<BindDestinationsPass>();
}
