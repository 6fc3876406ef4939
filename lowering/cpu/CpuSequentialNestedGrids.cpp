//===- CpuSequentialNestedGrids.cpp - nested grids in order on the CPU ---===//
//
// kda-cpu-sequential-nested-grids (lowering/Passes.td), in kda-lower-to-cpu
// (CpuPipeline.cpp).
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDACPUSEQUENTIALNESTEDGRIDS
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;

namespace {
/// Programs run in parallel on the CPU (OpenMP over the outermost grid);
/// grids nested inside a program (the columns of TileBuilder's triangular
/// solve) run in order within it.
struct SequentialNestedGridsPass : kda::impl::KdaCpuSequentialNestedGridsBase<SequentialNestedGridsPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<scf::ForallOp> nested;
    getOperation().walk([&](scf::ForallOp f) {
      if (f->getParentOfType<scf::ForallOp>())
        nested.push_back(f);
    });
    // It runs after bufferization (kda-lower-to-cpu): a nested grid still
    // on tensors (shared_outs) would become loops whose results the forall's
    // terminator no longer yields, IR the verifier cannot read.
    for (scf::ForallOp f : nested)
      if (f.getNumResults() != 0) {
        f.emitOpError("kda-cpu-sequential-nested-grids runs on bufferized "
                      "kernels (kda-lower-to-cpu): this nested grid still has ")
            << f.getNumResults() << " tensor result(s) (shared_outs)";
        return signalPassFailure();
      }
    IRRewriter rewriter(&getContext());
    for (scf::ForallOp f : nested) {
      rewriter.setInsertionPoint(f);
      if (failed(scf::forallToForLoop(rewriter, f)))
        return signalPassFailure();
    }
  }
};
} // namespace
