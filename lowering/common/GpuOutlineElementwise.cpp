//===- GpuOutlineElementwise.cpp - elementwise work as kernels of its own -===//
//
// A bundle holds kernels only: whatever a model computes between kda ops
// must be a kernel too. kda-decompose leaves such work as elementwise
// linalg.generic ops (a hybrid's sum or sigmoid-gated combine, a
// multi-scale sum); this pass moves each one into a kernel function of its
// own, tiled into one program per row of its leading dimensions
// (scf.forall), which the GPU mapping then treats like any kda kernel.
//
// Kernel arguments are the op's inputs and its destination; every dynamic
// dimension of the iteration space has one symbol, so that every argument's
// shape is described in the same symbols (a launch checks they agree): the
// symbol of the kernel that produced the operand walked (B, T of a gated
// delta output), else D0, D1, ... after the loop's position.
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/StringSet.h"

#include "lowering/Passes.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAGPUOUTLINEELEMENTWISE
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;

namespace {

/// Each result a distinct loop, or a constant: a fixed index into that
/// operand dimension (a gated multi-scale mix reads z [B, T, HV, M] at
/// z[..., m] once per scale, kda-decompose).
bool isElementwiseMap(AffineMap m) {
  llvm::SmallBitVector seen(m.getNumDims());
  for (AffineExpr e : m.getResults()) {
    if (isa<AffineConstantExpr>(e))
      continue;
    auto d = dyn_cast<AffineDimExpr>(e);
    if (!d || seen.test(d.getPosition()))
      return false;
    seen.set(d.getPosition());
  }
  return true;
}

/// A constant index names a static dimension and lies inside it (the
/// kernel's argument keeps that dimension whole).
bool constantsInRange(linalg::GenericOp g) {
  for (OpOperand &operand : g->getOpOperands()) {
    auto type = cast<RankedTensorType>(operand.get().getType());
    for (auto [d, e] : llvm::enumerate(
             g.getMatchingIndexingMap(&operand).getResults()))
      if (auto c = dyn_cast<AffineConstantExpr>(e))
        if (type.isDynamicDim(d) || c.getValue() < 0 ||
            c.getValue() >= type.getDimSize(d))
          return false;
  }
  return true;
}

bool isElementwise(linalg::GenericOp g) {
  return g.hasPureTensorSemantics() && g.getNumDpsInits() == 1 &&
         llvm::all_of(g.getIteratorTypesArray(),
                      [](utils::IteratorType t) {
                        return t == utils::IteratorType::parallel;
                      }) &&
         llvm::all_of(g.getIndexingMapsArray(), [&](AffineMap m) {
           return isElementwiseMap(m);
         }) &&
         constantsInRange(g);
}

/// The symbol a kernel gives dimension `d` of `v` where `v` is a result of
/// a call to a kernel (its destination argument's kda.abi), else null.
StringAttr producerSymbol(Value v, int64_t d) {
  while (auto cast = v.getDefiningOp<tensor::CastOp>())
    v = cast.getSource();
  auto call = v.getDefiningOp<func::CallOp>();
  if (!call)
    return nullptr;
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      call, call.getCalleeAttr());
  auto abi = callee ? callee->getAttrOfType<ArrayAttr>("kda.abi") : nullptr;
  if (!abi || abi.size() != callee.getNumArguments())
    return nullptr;
  unsigned arg = callee.getNumArguments() - call.getNumResults() +
                 cast<OpResult>(v).getResultNumber();
  auto dims = dyn_cast_or_null<ArrayAttr>(
      cast<DictionaryAttr>(abi[arg]).get("dims"));
  return dims && d < int64_t(dims.size()) ? dyn_cast<StringAttr>(dims[d])
                                          : nullptr;
}

/// [{name, dims}] per argument. A dynamic loop takes the symbol of the
/// kernel whose result it walks (a hybrid's mix of two gated delta outputs
/// walks B and T), so that a bundle entry for the whole function
/// (kda-gpu-layer-entry) describes every launch in one set of symbols;
/// loops no kernel names are D0, D1, ... after their position.
ArrayAttr describe(OpBuilder &b, linalg::GenericOp g) {
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  SmallVector<Value> operands(g.getDpsInputs());
  operands.push_back(g.getDpsInits()[0]);
  SmallVector<StringAttr> loopNames(g.getNumLoops());
  llvm::StringSet<> taken;
  for (auto [v, map] : llvm::zip(operands, maps))
    for (auto [d, expr] : llvm::enumerate(map.getResults())) {
      auto dim = dyn_cast<AffineDimExpr>(expr);
      if (!dim)
        continue; // a constant index: a static dimension
      unsigned loop = dim.getPosition();
      StringAttr name = producerSymbol(v, d);
      if (!loopNames[loop] && name && !taken.contains(name.getValue())) {
        loopNames[loop] = name;
        taken.insert(name.getValue());
      }
    }
  for (size_t loop = 0; loop < loopNames.size(); ++loop)
    if (!loopNames[loop] || loopNames[loop].getValue().empty())
      loopNames[loop] = b.getStringAttr("D" + std::to_string(loop));
  SmallVector<Attribute> entries;
  auto entry = [&](StringRef name, Value v, AffineMap map) {
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<Attribute> dims;
    for (auto [d, expr] : llvm::enumerate(map.getResults())) {
      if (!type.isDynamicDim(d) || !isa<AffineDimExpr>(expr))
        dims.push_back(b.getI64IntegerAttr(type.getDimSize(d)));
      else
        dims.push_back(loopNames[cast<AffineDimExpr>(expr).getPosition()]);
    }
    entries.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("name", b.getStringAttr(name)),
         b.getNamedAttr("dims", b.getArrayAttr(dims))}));
  };
  for (auto [i, in] : llvm::enumerate(g.getDpsInputs()))
    entry("in" + std::to_string(i), in, maps[i]);
  entry("out", g.getDpsInits()[0], maps.back());
  return b.getArrayAttr(entries);
}

struct OutlineElementwisePass : kda::impl::KdaGpuOutlineElementwiseBase<OutlineElementwisePass> {
  using Base::Base;
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<scf::SCFDialect, tensor::TensorDialect,
                    linalg::LinalgDialect>();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<linalg::GenericOp> ops;
    for (auto f : module.getOps<func::FuncOp>())
      if (!f->hasAttr("kda.kernel"))
        f.walk([&](linalg::GenericOp g) {
          if (isElementwise(g))
            ops.push_back(g);
        });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp g : ops) {
      // An empty iteration space (a static size of 0) writes no element: its
      // result is its destination, and no kernel is needed (tiling it would
      // crash inside scf::tileUsingSCF).
      if (llvm::is_contained(g.getStaticLoopRanges(), 0)) {
        rewriter.replaceOp(g, g.getDpsInits()[0]);
        continue;
      }
      Location loc = g.getLoc();
      OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
      SmallVector<Value> args(g.getDpsInputs());
      args.push_back(g.getDpsInits()[0]);
      auto type = b.getFunctionType(ValueRange(args).getTypes(),
                                    g->getResultTypes());
      auto kernel = func::FuncOp::create(b, loc, "kda_elementwise_kernel", type);
      kernel.setPrivate();
      kernel->setAttr("kda.kernel", b.getUnitAttr());
      kernel->setAttr("kda.abi", describe(b, g));
      symbols.insert(kernel);
      Block *entry = kernel.addEntryBlock();
      b.setInsertionPointToStart(entry);
      IRMapping map;
      map.map(args, entry->getArguments());
      // Constants the body captures come along (the kernel is isolated).
      llvm::SetVector<Value> captured;
      getUsedValuesDefinedAbove(g.getRegion(), captured);
      for (Value c : captured) {
        Operation *def = c.getDefiningOp();
        if (!def || !def->hasTrait<OpTrait::ConstantLike>()) {
          g.emitError("kda-gpu-outline-elementwise: the op's body uses a "
                      "value computed outside it");
          return signalPassFailure();
        }
        map.map(c, b.clone(*def)->getResult(0));
      }
      auto clone = cast<linalg::GenericOp>(b.clone(*g, map));
      auto ret = func::ReturnOp::create(b, loc, clone->getResults());

      // One program per row of the leading dimensions; each program's
      // elementwise tile is spread over its threads. A program's tile must
      // have a static size (its threads and buffers are sized from it): a
      // dynamic trailing dimension (the head count of a [B, T, HV, V] mix
      // whose heads are dynamic) is split one index a program too. With
      // tile-elements = N, the first trailing dimension goes in blocks of as
      // many indices as N elements hold, a power of two (8 heads of
      // V = 128 for 1024), the last block partial: 32768 programs of 1024
      // elements at T = 8192, HV = 32 instead of 262144 of 128. The GPU
      // pipelines take 4096 (kda-compile's default): with the destination
      // written directly and four indices a thread an iteration
      // (kda-gpu-prepare-tiles, kda-gpu-map-kernels) the multi-scale layer
      // took 1.235 ms against one row a program's 1.356 at T = 8192 (H100,
      // bench/RESULTS.md, fiftieth session; staged through shared memory,
      // blocks of 8 heads had lost, forty-seventh session). The pass's own
      // default stays one row.
      int64_t rank = clone.getNumLoops();
      SmallVector<int64_t> ranges = clone.getStaticLoopRanges();
      SmallVector<OpFoldResult> tileSizes(rank, b.getIndexAttr(0));
      for (int64_t d = 0; d < rank; ++d)
        if (d + 2 < rank || ShapedType::isDynamic(ranges[d]))
          tileSizes[d] = b.getIndexAttr(1);
      if (rank <= 2)
        tileSizes[0] = b.getIndexAttr(1);
      if (tileElements > 0 && rank > 2 &&
          !ShapedType::isDynamic(ranges[rank - 1])) {
        const int64_t outer = rank - 2, inner = ranges[rank - 1];
        if (ShapedType::isDynamic(ranges[outer]) ||
            ranges[outer] * inner > tileElements) {
          int64_t block = 1;
          while (2 * block * inner <= tileElements)
            block *= 2;
          tileSizes[outer] = b.getIndexAttr(block);
        }
      }
      scf::SCFTilingOptions options;
      options.setTileSizes(tileSizes);
      options.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
      rewriter.setInsertionPoint(clone);
      FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
          rewriter, cast<TilingInterface>(clone.getOperation()), options);
      if (failed(tiled)) {
        g.emitError("kda-gpu-outline-elementwise: cannot tile this op");
        return signalPassFailure();
      }
      rewriter.replaceOp(clone, tiled->replacements);
      (void)ret;

      rewriter.setInsertionPoint(g);
      auto call = func::CallOp::create(rewriter, loc, kernel, args);
      rewriter.replaceOp(g, call.getResults());
    }
    // Other work between kda ops (a matmul, a reduction) would run outside
    // every kernel of the bundle and be lost: refuse it here, where its
    // location is still the user's.
    if (failed(kda::refuseWorkOutsideKernels(module, getArgument())))
      return signalPassFailure();
  }
};

} // namespace

LogicalResult mlir::kda::refuseWorkOutsideKernels(ModuleOp module,
                                                  StringRef pass) {
  for (auto f : module.getOps<func::FuncOp>()) {
    if (f->hasAttr("kda.kernel"))
      continue;
    WalkResult r = f.walk([&](Operation *op) {
      if (op->getParentOfType<linalg::LinalgOp>())
        return WalkResult::advance(); // a body: judged with its op
      if (isa<linalg::LinalgOp>(op) ||
          op->getDialect()->getNamespace() == "math" ||
          isa<arith::AddFOp, arith::MulFOp, arith::SubFOp, arith::DivFOp>(op)) {
        op->emitError() << pass
                        << ": this computation is outside every kda kernel; a "
                           "GPU bundle holds only kernels (kda ops and "
                           "elementwise work between them)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      return failure();
  }
  return success();
}

std::unique_ptr<Pass> mlir::kda::createGpuOutlineElementwisePass() {
  return std::make_unique<OutlineElementwisePass>();
}
