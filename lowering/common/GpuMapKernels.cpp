//===- GpuMapKernels.cpp - chunkwise tile IR -> one GPU kernel per kda op ---===//
//
// The GPU targets receive the same tile IR as the CPU (kda-tile-chunks) and
// differ only in how a tile primitive runs. After bufferization every tile
// is a small static buffer and every primitive a loop nest; here
//
//   * a program (sequence, head) of the scf.forall becomes a thread block,
//   * every tile primitive (an outermost scf.parallel) is spread over the
//     block's threads, with a barrier between primitives,
//   * tiles live in shared memory: one arena, offsets planned from the
//     tiles' live ranges, so tiles that are never live together share bytes,
//   * the kernel takes bare pointers plus the dynamic sizes it needs, named
//     after the op's dimensions (B, T, H, HV, N+1), and the launch geometry
//     is recorded on the module for the bundle's manifest.
//
// Tile matmuls are lowered to tensor-core instructions before this pass
// (kda-gpu-tile-matmuls); everything else stays target-neutral until
// convert-gpu-to-nvvm / -rocdl. Declared in lowering/Passes.td
// (kda-gpu-map-kernels).
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
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/STLExtras.h"

#include "lowering/Passes.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAGPUMAPKERNELS
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;

namespace {

constexpr StringLiteral kKernelAttr = "kda.kernel";
constexpr StringLiteral kAbiAttr = "kda.abi";

//===----------------------------------------------------------------------===//
// kda-gpu-map-kernels
//===----------------------------------------------------------------------===//

/// Elementwise copy src -> dst of one static shape, as an scf.parallel nest
/// (spread over threads like every primitive).
void emitCopyLoop(OpBuilder &b, Location loc, Value src, Value dst) {
  auto type = cast<MemRefType>(dst.getType());
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    lbs.push_back(arith::ConstantIndexOp::create(b, loc, 0));
    ubs.push_back(memref::DimOp::create(b, loc, dst, d));
    steps.push_back(arith::ConstantIndexOp::create(b, loc, 1));
  }
  scf::ParallelOp::create(
      b, loc, lbs, ubs, steps,
      [&](OpBuilder &nb, Location l, ValueRange ivs) {
        Value x = memref::LoadOp::create(nb, l, src, ivs);
        memref::StoreOp::create(nb, l, x, dst, ivs);
      });
}

/// Loop-carried tiles (the recurrent state) are updated in one buffer: the
/// carried value lives in a buffer allocated before the loop, and the new
/// value is copied into it at the end of each iteration. Without this, the
/// arena would give the next iteration's new tile the bytes of the tile the
/// iteration reads.
FailureOr<scf::ForOp> carryInPlace(scf::ForOp loop) {
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  SmallVector<unsigned> memrefArgs;
  for (auto [i, arg] : llvm::enumerate(loop.getRegionIterArgs()))
    if (isa<MemRefType>(arg.getType()))
      memrefArgs.push_back(i);
  if (memrefArgs.empty())
    return loop;
  for (unsigned i : memrefArgs) {
    Value arg = loop.getRegionIterArgs()[i];
    Value init = loop.getInitArgs()[i];
    Value next = yield.getOperand(i);
    Value carrier = init;
    if (next != arg) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity())
        return loop.emitError("kda-gpu-map-kernels: a loop carries a tile "
                              "of dynamic shape");
      // A fresh carrier unless the initial value is a tile no one else uses.
      Operation *initDef = init.getDefiningOp();
      bool reusable = initDef && isa<memref::AllocOp>(initDef) &&
                      initDef->getBlock() == loop->getBlock() &&
                      llvm::all_of(init.getUsers(), [&](Operation *u) {
                        return u == loop.getOperation() ||
                               (u->getBlock() == loop->getBlock() &&
                                u->isBeforeInBlock(loop));
                      });
      if (!reusable) {
        carrier = memref::AllocOp::create(b, loc, type);
        emitCopyLoop(b, loc, init, carrier);
      }
      OpBuilder end(yield);
      emitCopyLoop(end, loc, next, carrier);
    }
    arg.replaceAllUsesWith(carrier);
    loop.getResult(i).replaceAllUsesWith(carrier);
  }
  // Rebuild the loop without the memref iter_args.
  SmallVector<Value> keptInits;
  SmallVector<unsigned> kept;
  for (unsigned i = 0; i < loop.getNumRegionIterArgs(); ++i)
    if (!llvm::is_contained(memrefArgs, i)) {
      kept.push_back(i);
      keptInits.push_back(loop.getInitArgs()[i]);
    }
  auto newLoop = scf::ForOp::create(b, loc, loop.getLowerBound(),
                                    loop.getUpperBound(), loop.getStep(),
                                    keptInits);
  newLoop->setDiscardableAttrs(loop->getDiscardableAttrDictionary());
  Block *newBody = newLoop.getBody();
  if (newBody->mightHaveTerminator())
    newBody->getTerminator()->erase();
  SmallVector<Value> argMap;
  argMap.push_back(newLoop.getInductionVar());
  unsigned k = 0;
  for (unsigned i = 0; i < loop.getNumRegionIterArgs(); ++i)
    argMap.push_back(llvm::is_contained(memrefArgs, i)
                         ? Value()
                         : newLoop.getRegionIterArgs()[k++]);
  Block *oldBody = loop.getBody();
  for (auto [oldArg, newArg] : llvm::zip(oldBody->getArguments(), argMap))
    if (newArg)
      oldArg.replaceAllUsesWith(newArg);
  newBody->getOperations().splice(newBody->end(), oldBody->getOperations());
  auto oldYield = cast<scf::YieldOp>(newBody->getTerminator());
  SmallVector<Value> yielded;
  for (unsigned i : kept)
    yielded.push_back(oldYield.getOperand(i));
  OpBuilder yb(oldYield);
  scf::YieldOp::create(yb, oldYield.getLoc(), yielded);
  oldYield.erase();
  for (auto [j, i] : llvm::enumerate(kept))
    loop.getResult(i).replaceAllUsesWith(newLoop.getResult(j));
  loop.erase();
  return newLoop;
}

/// scf.if results that are the same buffer on both sides are that buffer.
LogicalResult forwardIfResults(scf::IfOp ifOp) {
  if (ifOp.getNumResults() == 0)
    return success();
  for (OpResult r : ifOp.getResults()) {
    if (!isa<MemRefType>(r.getType()))
      continue;
    Value thenV = ifOp.thenYield().getOperand(r.getResultNumber());
    Value elseV = ifOp.elseYield().getOperand(r.getResultNumber());
    // A branch that writes in place into the other branch's buffer yields
    // the same value; anything else would need a copy.
    if (thenV != elseV ||
        !thenV.getParentRegion()->isProperAncestor(&ifOp.getThenRegion()))
      return ifOp.emitError("kda-gpu-map-kernels: a branch produces a new "
                            "tile buffer");
    r.replaceAllUsesWith(thenV);
  }
  return success();
}

bool isInsideParallel(Operation *op, Operation *limit) {
  for (Operation *p = op->getParentOp(); p && p != limit; p = p->getParentOp())
    if (isa<scf::ParallelOp>(p))
      return true;
  return false;
}

void barrierBefore(OpBuilder &b, Operation *op) {
  if (Operation *prev = op->getPrevNode(); prev && isa<gpu::BarrierOp>(prev))
    return;
  b.setInsertionPoint(op);
  gpu::BarrierOp::create(b, op->getLoc());
}

void barrierAfter(OpBuilder &b, Operation *op) {
  if (Operation *next = op->getNextNode(); next && isa<gpu::BarrierOp>(next))
    return;
  b.setInsertionPointAfter(op);
  gpu::BarrierOp::create(b, op->getLoc());
}

/// The indices a thread of an elementwise kernel takes an iteration
/// (distribute's `unroll`).
constexpr int64_t kElementwiseUnroll = 4;

/// Spreads one primitive's iteration space over the block's threads:
/// for (i = tid; i < count; i += threads) body(delinearize(i)).
///
/// With `unroll` > 1 (a program's only primitive whose body loads, computes
/// and stores: an elementwise kernel's) a thread takes `unroll` indices an
/// iteration, i + u * threads, and issues every load of all of them before
/// its first store, so that each thread has `unroll` times the loads in
/// flight (one a thread leaves the memory system idle: an elementwise
/// kernel is all latency). Indices past the end load at the last index and
/// store nothing.
void distribute(scf::ParallelOp par, Value tid, Value threads,
                int64_t unroll = 1) {
  OpBuilder b(par);
  Location loc = par.getLoc();
  SmallVector<Value> counts;
  Value total = arith::ConstantIndexOp::create(b, loc, 1);
  for (auto [lb, ub, step] : llvm::zip(par.getLowerBound(), par.getUpperBound(),
                                       par.getStep())) {
    Value span = arith::SubIOp::create(b, loc, ub, lb);
    Value count = arith::CeilDivUIOp::create(b, loc, span, step);
    counts.push_back(count);
    total = arith::MulIOp::create(b, loc, total, count);
  }
  // Leading dimensions of one index (a tile of [1, 1, heads, V] rows: an
  // elementwise program's) take their lower bound: the first dimension of
  // more than one index is the flat index divided by the inner counts, with
  // no remainder, so that a dynamic count (the heads of a partial tile) costs
  // no division an element.
  auto constant = [](Value v) -> std::optional<int64_t> {
    APInt c;
    if (matchPattern(v, m_ConstantInt(&c)))
      return c.getSExtValue();
    return std::nullopt;
  };
  int64_t first = 0;
  while (first + 1 < int64_t(counts.size())) {
    std::optional<int64_t> lb = constant(par.getLowerBound()[first]);
    std::optional<int64_t> ub = constant(par.getUpperBound()[first]);
    std::optional<int64_t> step = constant(par.getStep()[first]);
    if (!lb || !ub || !step || *step <= 0 || *ub - *lb > *step)
      break;
    ++first;
  }
  auto delinearize = [&](OpBuilder &ib, Value rest) {
    SmallVector<Value> ivs(counts.size());
    for (int64_t d = counts.size() - 1; d >= 0; --d) {
      if (d < first) {
        ivs[d] = par.getLowerBound()[d];
        continue;
      }
      Value local =
          d == first ? rest : arith::RemUIOp::create(ib, loc, rest, counts[d]);
      if (d > first)
        rest = arith::DivUIOp::create(ib, loc, rest, counts[d]);
      Value scaled = arith::MulIOp::create(ib, loc, local, par.getStep()[d]);
      ivs[d] = arith::AddIOp::create(ib, loc, par.getLowerBound()[d], scaled);
    }
    return ivs;
  };
  Block *body = par.getBody();
  // Unrolled, a body of loads, pure operations and stores only, and more
  // indices than threads (one row of a program each thread takes once).
  std::optional<int64_t> knownTotal = constant(total),
                         knownThreads = constant(threads);
  if (unroll > 1 &&
      (llvm::any_of(body->without_terminator(),
                    [](Operation &op) {
                      return !isa<memref::LoadOp, memref::StoreOp>(op) &&
                             !isPure(&op);
                    }) ||
       (knownTotal && knownThreads && *knownTotal <= *knownThreads)))
    unroll = 1;
  if (unroll == 1) {
    auto loop = scf::ForOp::create(b, loc, tid, total, threads);
    OpBuilder ib = OpBuilder::atBlockBegin(loop.getBody());
    IRMapping map;
    map.map(par.getInductionVars(), delinearize(ib, loop.getInductionVar()));
    for (Operation &op : body->without_terminator())
      ib.clone(op, map);
    par.erase();
    return;
  }
  Value stride = arith::MulIOp::create(
      b, loc, threads, arith::ConstantIndexOp::create(b, loc, unroll));
  Value last = arith::SubIOp::create(b, loc, total,
                                     arith::ConstantIndexOp::create(b, loc, 1));
  auto loop = scf::ForOp::create(b, loc, tid, total, stride);
  OpBuilder ib = OpBuilder::atBlockBegin(loop.getBody());
  SmallVector<IRMapping> maps(unroll);
  SmallVector<Value> inside(unroll);
  for (int64_t u = 0; u < unroll; ++u) {
    Value index = arith::AddIOp::create(
        ib, loc, loop.getInductionVar(),
        arith::MulIOp::create(ib, loc, threads,
                              arith::ConstantIndexOp::create(ib, loc, u)));
    if (u == 0) {
      maps[u].map(par.getInductionVars(), delinearize(ib, index));
      continue;
    }
    inside[u] = arith::CmpIOp::create(ib, loc, arith::CmpIPredicate::ult,
                                      index, total);
    Value clamped = arith::SelectOp::create(ib, loc, inside[u], index, last);
    maps[u].map(par.getInductionVars(), delinearize(ib, clamped));
  }
  // Every index's loads and arithmetic, then every index's stores.
  for (int64_t u = 0; u < unroll; ++u)
    for (Operation &op : body->without_terminator())
      if (!isa<memref::StoreOp>(op))
        ib.clone(op, maps[u]);
  // (The first index is inside by the loop's bound: no guard, which would
  // let LLVM sink its loads past the others' into the guarded block.)
  for (Operation &op : body->without_terminator())
    if (isa<memref::StoreOp>(op))
      ib.clone(op, maps[0]);
  for (int64_t u = 1; u < unroll; ++u) {
    auto guard = scf::IfOp::create(ib, loc, inside[u], false);
    OpBuilder gb = OpBuilder::atBlockBegin(guard.thenBlock());
    gb.setInsertionPoint(guard.thenBlock()->getTerminator());
    for (Operation &op : body->without_terminator())
      if (isa<memref::StoreOp>(op))
        gb.clone(op, maps[u]);
  }
  par.erase();
}

int64_t elementBytes(Type t) {
  return std::max<int64_t>(1, t.getIntOrFloatBitWidth() / 8);
}

/// A constant upper bound of an index value: constants, and the min with a
/// constant that bounds every tile's row count (kda::validRows).
std::optional<int64_t> constantUpperBound(Value v) {
  if (auto c = getConstantIntValue(v))
    return *c;
  Operation *def = v.getDefiningOp();
  if (def && isa<arith::MinUIOp, arith::MinSIOp>(def)) {
    std::optional<int64_t> best;
    for (Value operand : def->getOperands())
      if (auto bound = constantUpperBound(operand))
        best = best ? std::min(*best, *bound) : *bound;
    return best;
  }
  FailureOr<int64_t> bound = ValueBoundsConstraintSet::computeConstantBound(
      presburger::BoundType::UB, v, /*stopCondition=*/nullptr,
      /*closedUB=*/true);
  if (failed(bound))
    return std::nullopt;
  return *bound;
}

/// Bytes an alloc needs in the arena: dynamic sizes are bounded statically
/// (tiles of a sequence's last chunk are at most a chunk long).
FailureOr<int64_t> arenaBytes(memref::AllocOp alloc) {
  MemRefType type = alloc.getType();
  int64_t elements = 1;
  unsigned dyn = 0;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    int64_t size = type.getDimSize(d);
    if (ShapedType::isDynamic(size)) {
      std::optional<int64_t> bound =
          constantUpperBound(alloc.getDynamicSizes()[dyn++]);
      if (!bound)
        return failure();
      size = *bound;
    }
    elements *= size;
  }
  return elements * elementBytes(type.getElementType());
}

/// All ops that use `root` or a view of it.
void collectUsers(Value root, SmallVectorImpl<Operation *> &users) {
  SmallVector<Value> work = {root};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *u : v.getUsers()) {
      users.push_back(u);
      if (isa<ViewLikeOpInterface>(u) || isa<memref::CastOp>(u))
        for (Value r : u->getResults())
          if (isa<MemRefType>(r.getType()))
            work.push_back(r);
    }
  }
}

/// Shared-memory arena: each tile gets an offset such that tiles live at the
/// same time never overlap. Live ranges are intervals of a pre-order
/// numbering of the program body; a use inside a nested loop keeps the tile
/// alive for the whole loop.
FailureOr<int64_t> planArena(Block &body, Value base, int64_t alignment) {
  DenseMap<Operation *, int64_t> position, subtreeEnd;
  int64_t counter = 0;
  std::function<void(Operation *)> number = [&](Operation *op) {
    position[op] = counter++;
    for (Region &r : op->getRegions())
      for (Block &blk : r)
        for (Operation &nested : blk)
          number(&nested);
    subtreeEnd[op] = counter - 1;
  };
  for (Operation &op : body)
    number(&op);

  struct Slot {
    memref::AllocOp alloc;
    int64_t start, end, bytes, offset = -1;
  };
  SmallVector<Slot> slots;
  WalkResult walked = body.getParentOp()->walk([&](memref::AllocOp alloc) {
    FailureOr<int64_t> bytes = arenaBytes(alloc);
    if (failed(bytes)) {
      alloc.emitError("kda-gpu-map-kernels: cannot bound the size of this "
                      "tile");
      return WalkResult::interrupt();
    }
    SmallVector<Operation *> users;
    collectUsers(alloc.getResult(), users);
    int64_t end = position[alloc];
    Block *scope = alloc->getBlock();
    for (Operation *u : users) {
      Operation *a = scope->findAncestorOpInBlock(*u);
      if (!a) {
        alloc.emitError("kda-gpu-map-kernels: a tile escapes its block");
        return WalkResult::interrupt();
      }
      end = std::max(end, subtreeEnd[a]);
    }
    slots.push_back({alloc, position[alloc], end,
                     static_cast<int64_t>(llvm::alignTo(*bytes, alignment))});
    return WalkResult::advance();
  });
  if (walked.wasInterrupted())
    return failure();

  // First fit, in order of first use.
  llvm::sort(slots, [](const Slot &a, const Slot &b) { return a.start < b.start; });
  int64_t arenaSize = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    SmallVector<std::pair<int64_t, int64_t>> busy;
    for (size_t j = 0; j < i; ++j)
      if (slots[j].start <= slots[i].end && slots[i].start <= slots[j].end)
        busy.push_back({slots[j].offset, slots[j].offset + slots[j].bytes});
    llvm::sort(busy);
    int64_t offset = 0;
    for (auto [lo, hi] : busy) {
      if (offset + slots[i].bytes <= lo)
        break;
      offset = std::max(offset, hi);
    }
    slots[i].offset = offset;
    arenaSize = std::max(arenaSize, offset + slots[i].bytes);
  }

  // Each tile becomes a view of the arena, seen through the generic address
  // space so that its users keep their types (the backend infers the shared
  // address space back).
  for (Slot &s : slots) {
    OpBuilder b(s.alloc);
    Location loc = s.alloc.getLoc();
    MemRefType type = s.alloc.getType();
    auto shared = MemRefType::get(
        type.getShape(), type.getElementType(), MemRefLayoutAttrInterface{},
        gpu::AddressSpaceAttr::get(b.getContext(),
                                   gpu::AddressSpace::Workgroup));
    Value offset = arith::ConstantIndexOp::create(b, loc, s.offset);
    Value view = memref::ViewOp::create(b, loc, shared, base, offset,
                                        s.alloc.getDynamicSizes());
    // Lane kernels allocate in the workgroup space themselves (their
    // ldmatrix and cp.async name it): those keep it.
    Value generic =
        type.getMemorySpace() == shared.getMemorySpace()
            ? view
            : Value(memref::MemorySpaceCastOp::create(b, loc, type, view));
    s.alloc.replaceAllUsesWith(generic);
    s.alloc.erase();
  }
  return arenaSize;
}

std::string symbolName(StringRef dim) { return kda::manifestSymbol(dim); }
StringRef dtypeName(Type t) { return kda::manifestDtype(t); }

/// The fields of an inner extent that a compound one extends: a symbol S as
/// {"symbol": S, "ceil_div": 1}, a dictionary as it is; failure where the
/// dictionary already has one of `taken` (a field the compound sets).
FailureOr<NamedAttrList> extentFields(Attribute inner, ArrayRef<StringRef> taken,
                                      Builder &b) {
  NamedAttrList fields;
  if (auto s = dyn_cast<StringAttr>(inner)) {
    fields.append("symbol", b.getStringAttr(symbolName(s.getValue())));
    fields.append("ceil_div", b.getI64IntegerAttr(1));
    return fields;
  }
  auto d = dyn_cast<DictionaryAttr>(inner);
  if (!d || llvm::any_of(taken, [&](StringRef k) { return bool(d.get(k)); }))
    return failure();
  fields.append(d.getValue());
  return fields;
}

/// A grid extent as the manifest writes it: an integer, a symbol, ceil(symbol
/// / c), or one of those plus a symbol. Extents of the form `symbol - c`
/// launch `symbol` programs (the kernel's guard skips the extra ones).
FailureOr<Attribute> gridExtent(Value extent, ArrayAttr abi, Builder &b) {
  if (auto c = getConstantIntValue(extent))
    return Attribute(b.getI64IntegerAttr(*c));
  if (auto sub = extent.getDefiningOp<arith::SubIOp>())
    if (getConstantIntValue(sub.getRhs()))
      return gridExtent(sub.getLhs(), abi, b);
  // ceil(symbol / c): the chunk-parallel schedule's chunks per sequence.
  if (auto div = extent.getDefiningOp<arith::CeilDivUIOp>())
    if (auto c = getConstantIntValue(div.getRhs())) {
      FailureOr<Attribute> inner = gridExtent(div.getLhs(), abi, b);
      if (failed(inner) || !isa<StringAttr>(*inner))
        return failure();
      return Attribute(b.getDictionaryAttr(
          {b.getNamedAttr("symbol",
                          b.getStringAttr(symbolName(
                              cast<StringAttr>(*inner).getValue()))),
           b.getNamedAttr("ceil_div", b.getI64IntegerAttr(*c))}));
    }
  // e x c: segments of every sequence ({"symbol", "ceil_div", "times"}).
  if (auto mul = extent.getDefiningOp<arith::MulIOp>())
    if (auto c = getConstantIntValue(mul.getRhs())) {
      FailureOr<Attribute> inner = gridExtent(mul.getLhs(), abi, b);
      if (failed(inner))
        return failure();
      FailureOr<NamedAttrList> fields =
          extentFields(*inner, {"plus", "times"}, b);
      if (failed(fields))
        return failure();
      fields->append("times", b.getI64IntegerAttr(*c));
      return Attribute(b.getDictionaryAttr(*fields));
    }
  // e + symbol: the flat varlen grid (windows of packed tokens, plus one
  // program per sequence).
  if (auto sum = extent.getDefiningOp<arith::AddIOp>()) {
    FailureOr<Attribute> lhs = gridExtent(sum.getLhs(), abi, b);
    FailureOr<Attribute> rhs = gridExtent(sum.getRhs(), abi, b);
    if (failed(lhs) || failed(rhs) || !isa<StringAttr>(*rhs))
      return failure();
    FailureOr<NamedAttrList> fields = extentFields(*lhs, {"plus"}, b);
    if (failed(fields))
      return failure();
    fields->append("plus", b.getStringAttr(symbolName(
                               cast<StringAttr>(*rhs).getValue())));
    return Attribute(b.getDictionaryAttr(*fields));
  }
  // select(a == b, 0, e): e programs, none where the dimensions a and b are
  // equal ({..., "zero_if_equal": [a, b]}: the runtime skips the launch).
  if (auto sel = extent.getDefiningOp<arith::SelectOp>()) {
    auto cmp = sel.getCondition().getDefiningOp<arith::CmpIOp>();
    if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::eq ||
        !isConstantIntValue(sel.getTrueValue(), 0))
      return failure();
    FailureOr<Attribute> lhs = gridExtent(cmp.getLhs(), abi, b);
    FailureOr<Attribute> rhs = gridExtent(cmp.getRhs(), abi, b);
    FailureOr<Attribute> inner = gridExtent(sel.getFalseValue(), abi, b);
    if (failed(lhs) || failed(rhs) || failed(inner) ||
        !isa<StringAttr>(*lhs) || !isa<StringAttr>(*rhs))
      return failure();
    FailureOr<NamedAttrList> fields =
        extentFields(*inner, {"zero_if_equal"}, b);
    if (failed(fields))
      return failure();
    fields->append(
        "zero_if_equal",
        b.getArrayAttr(
            {b.getStringAttr(symbolName(cast<StringAttr>(*lhs).getValue())),
             b.getStringAttr(symbolName(cast<StringAttr>(*rhs).getValue()))}));
    return Attribute(b.getDictionaryAttr(*fields));
  }
  if (auto dim = extent.getDefiningOp<memref::DimOp>()) {
    auto arg = dyn_cast<BlockArgument>(dim.getSource());
    auto index = getConstantIntValue(dim.getIndex());
    if (arg && index && arg.getArgNumber() < abi.size()) {
      auto dims = cast<ArrayAttr>(
          cast<DictionaryAttr>(abi[arg.getArgNumber()]).get("dims"));
      return dims[*index];
    }
  }
  return failure();
}


/// The programs a grid dimension of step c launches: ceil(extent / c) where
/// the loop starts at 0 (a tile of several heads a program), so that no
/// program is launched only to fail its guard. A form whose division the
/// manifest cannot write (a plus, a product) keeps the full extent: the
/// guard `lb + id * step < ub` still skips the extra programs.
Attribute stepped(Attribute e, scf::ForallOp forall, unsigned d, Builder &b) {
  std::optional<int64_t> step =
      getConstantIntValue(forall.getMixedStep()[d]);
  std::optional<int64_t> lb =
      getConstantIntValue(forall.getMixedLowerBound()[d]);
  if (!step || *step <= 1 || !lb || *lb != 0)
    return e;
  if (auto n = dyn_cast<IntegerAttr>(e))
    return b.getI64IntegerAttr(llvm::divideCeil(n.getInt(), *step));
  if (auto s = dyn_cast<StringAttr>(e))
    return b.getDictionaryAttr(
        {b.getNamedAttr("symbol", s),
         b.getNamedAttr("ceil_div", b.getI64IntegerAttr(*step))});
  auto dict = dyn_cast<DictionaryAttr>(e);
  auto div = dict ? dict.getAs<IntegerAttr>("ceil_div") : nullptr;
  // ceil(ceil(n / a) / c) = ceil(n / (a c)) for positive a, c.
  if (!div || dict.size() != 2 || !dict.get("symbol"))
    return e;
  return b.getDictionaryAttr(
      {b.getNamedAttr("symbol", dict.get("symbol")),
       b.getNamedAttr("ceil_div",
                      b.getI64IntegerAttr(div.getInt() * *step))});
}

struct MapKernelsPass : kda::impl::KdaGpuMapKernelsBase<MapKernelsPass> {
  using Base::Base;
  MapKernelsPass() = default;
  explicit MapKernelsPass(int64_t threads) { this->threads = threads; }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<gpu::GPUDialect, LLVM::LLVMDialect, scf::SCFDialect,
                    memref::MemRefDialect, arith::ArithDialect>();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> kernels;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(kKernelAttr) && !f.isExternal())
        kernels.push_back(f);
    SmallVector<Attribute> launches;
    for (func::FuncOp f : kernels) {
      FailureOr<DictionaryAttr> launch = mapKernel(f);
      if (failed(launch))
        return signalPassFailure();
      launches.push_back(*launch);
    }
    // Host functions call kernels that now live on the device: they are not
    // part of the GPU output (the runtime launches kernels directly). Work
    // they do themselves (a matmul between kda ops, say) would be lost:
    // refuse it.
    if (failed(kda::refuseWorkOutsideKernels(module, getArgument())))
      return signalPassFailure();
    for (auto f : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      f.erase();
    module->setAttr("gpu.container_module", UnitAttr::get(&getContext()));
    module->setAttr("kda.launches",
                    ArrayAttr::get(&getContext(), launches));
  }

  FailureOr<DictionaryAttr> mapKernel(func::FuncOp f) {
    MLIRContext *ctx = f.getContext();
    auto abi = f->getAttrOfType<ArrayAttr>(kAbiAttr);
    if (!abi || abi.size() != f.getNumArguments())
      return f.emitError("kda-gpu-map-kernels: kernel without a 'kda.abi' "
                         "description of its arguments (outline with "
                         "destination-style)");
    if (failed(programLoopsToGrid(f)))
      return failure();
    SmallVector<scf::ForallOp> grids;
    for (Operation &op : f.getBody().front())
      if (auto forall = dyn_cast<scf::ForallOp>(op))
        grids.push_back(forall);
    if (grids.size() != 1 || grids[0].getRank() > 3)
      return f.emitError("kda-gpu-map-kernels: expected one program grid "
                         "(scf.forall of rank <= 3) per kernel");
    scf::ForallOp forall = grids[0];
    if (!forall.getOutputs().empty())
      return forall.emitError("kda-gpu-map-kernels: the grid still has tensor "
                              "outputs (bufferize first)");

    // 1. Buffers carried by loops and branches are updated in place.
    SmallVector<scf::ForOp> loops;
    forall.walk([&](scf::ForOp l) { loops.push_back(l); });
    for (scf::ForOp l : loops)
      if (failed(carryInPlace(l)))
        return failure();
    SmallVector<scf::IfOp> ifs;
    forall.walk([&](scf::IfOp i) { ifs.push_back(i); });
    for (scf::IfOp i : ifs)
      if (failed(forwardIfResults(i)))
        return failure();

    // 2. The launch grid, read before the body moves.
    Builder builder(ctx);
    SmallVector<Attribute> grid;
    for (OpFoldResult ub : forall.getMixedUpperBound()) {
      OpBuilder ob(forall);
      Value v = getValueOrCreateConstantIndexOp(ob, forall.getLoc(), ub);
      FailureOr<Attribute> e = gridExtent(v, abi, builder);
      if (failed(e))
        return forall.emitError("kda-gpu-map-kernels: a grid extent is not "
                                "a dimension of an argument");
      if (auto s = dyn_cast<StringAttr>(*e))
        e = builder.getStringAttr(symbolName(s.getValue()));
      grid.push_back(stepped(*e, forall, grid.size(), builder));
    }
    // A dimension that grows with the tokens (T or ceil(T / c): chunks,
    // query blocks) is launched on x, which holds 2^31 - 1 blocks; y and z
    // hold 65535, which a sequence of 2^20 tokens in chunks of 16 passes.
    // Program ids keep the grid's order: only the block id each reads
    // changes.
    SmallVector<unsigned> blockDim = {0, 1, 2};
    auto tokens = [](Attribute e) {
      if (auto d = dyn_cast<DictionaryAttr>(e))
        e = d.get("symbol");
      auto s = dyn_cast_or_null<StringAttr>(e);
      return s && s.getValue() == "T";
    };
    if (!grid.empty() && !tokens(grid[0]))
      for (unsigned d = 1; d < grid.size(); ++d)
        if (tokens(grid[d])) {
          std::swap(blockDim[0], blockDim[d]);
          std::swap(grid[0], grid[d]);
          break;
        }
    while (grid.size() < 3)
      grid.push_back(builder.getI64IntegerAttr(1));

    // 3. A gpu.func with the same arguments, the program body guarded by
    //    block ids.
    OpBuilder mb = OpBuilder::atBlockEnd(cast<ModuleOp>(f->getParentOp()).getBody());
    std::string name = f.getSymName().str();
    auto gpuModule = gpu::GPUModuleOp::create(mb, f.getLoc(), name + "_module");
    OpBuilder gb = OpBuilder::atBlockBegin(gpuModule.getBody());
    auto gpuFunc =
        gpu::GPUFuncOp::create(gb, f.getLoc(), name, f.getFunctionType());
    gpuFunc->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                     UnitAttr::get(ctx));
    // No known_block_size: the .maxntid it implies makes ptxas trade
    // registers for occupancy and spill (the block size is in the manifest).
    // A kernel that knows its register budget states it (NVIDIA .maxnreg).
    // Past 256 threads a lane's 255 registers no longer fit the 64K of a
    // block: without a cap the kernel compiles and then fails every launch
    // (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES; a gradient kernel of 147
    // registers at 512 threads did). The cap makes ptxas fit the block,
    // spilling if it must; a kernel's own budget (kda.max_registers) is
    // held to it too.
    int64_t blockThreads = threads;
    if (auto a = f->getAttrOfType<IntegerAttr>(kda::kBlockThreadsAttr))
      blockThreads = a.getInt();
    const int64_t fits = ((65536 / std::max<int64_t>(blockThreads, 1)) / 8) * 8;
    if (auto regs = f->getAttrOfType<IntegerAttr>(kda::kMaxRegistersAttr)) {
      gpuFunc->setAttr("nvvm.maxnreg",
                       mb.getI32IntegerAttr(std::min<int64_t>(regs.getInt(), fits)));
    } else if (blockThreads > 256) {
      gpuFunc->setAttr("nvvm.maxnreg", mb.getI32IntegerAttr(fits));
    }
    Block &entry = gpuFunc.getBody().front();
    Block &oldEntry = f.getBody().front();
    for (auto [o, n] : llvm::zip(oldEntry.getArguments(), entry.getArguments()))
      o.replaceAllUsesWith(n);
    entry.getOperations().splice(entry.end(), oldEntry.getOperations());
    Operation *ret = entry.getTerminator();
    OpBuilder rb(ret);
    gpu::ReturnOp::create(rb, ret->getLoc());
    ret->erase();

    OpBuilder b(forall);
    Location loc = forall.getLoc();
    Value inGrid = arith::ConstantIntOp::create(b, loc, 1, 1);
    SmallVector<Value> ids;
    const gpu::Dimension dims[] = {gpu::Dimension::x, gpu::Dimension::y,
                                   gpu::Dimension::z};
    for (auto [d, ub] : llvm::enumerate(forall.getMixedUpperBound())) {
      Value id = gpu::BlockIdOp::create(b, loc, dims[blockDim[d]]);
      Value bound = getValueOrCreateConstantIndexOp(b, loc, ub);
      Value lb = getValueOrCreateConstantIndexOp(b, loc,
                                                 forall.getMixedLowerBound()[d]);
      Value step =
          getValueOrCreateConstantIndexOp(b, loc, forall.getMixedStep()[d]);
      Value iv = arith::AddIOp::create(b, loc, lb,
                                       arith::MulIOp::create(b, loc, id, step));
      inGrid = arith::AndIOp::create(
          b, loc, inGrid,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, iv, bound));
      ids.push_back(iv);
    }
    auto guard = scf::IfOp::create(b, loc, inGrid, /*withElse=*/false);
    Block *programBody = forall.getBody();
    for (auto [iv, id] : llvm::zip(forall.getInductionVars(), ids))
      iv.replaceAllUsesWith(id);
    programBody->getTerminator()->erase();
    Block *guardBody = guard.thenBlock();
    guardBody->getOperations().splice(guardBody->begin(),
                                      programBody->getOperations());
    forall.erase();
    if (failed(skipEmptyChunks(f, gpuFunc, abi, guard, ids)))
      return failure();

    // 4. Grids nested in a program (the columns of a triangular solve) are
    //    primitives like the others. Then tile primitives over threads,
    //    barriers between them; stores outside any primitive are made by one
    //    thread. Kernels that say what each thread does are left alone.
    bool explicitThreads = f->hasAttr(kda::kExplicitThreadsAttr);
    SmallVector<scf::ForallOp> nestedGrids;
    guard.walk([&](scf::ForallOp f) { nestedGrids.push_back(f); });
    IRRewriter rewriter(ctx);
    for (scf::ForallOp f : nestedGrids) {
      if (!f.getOutputs().empty())
        return f.emitError("kda-gpu-map-kernels: a nested grid still has "
                           "tensor outputs");
      rewriter.setInsertionPoint(f);
      if (failed(scf::forallToParallelLoop(rewriter, f)))
        return f.emitError("kda-gpu-map-kernels: cannot map a nested grid");
    }
    if (!explicitThreads) {
      OpBuilder tb = OpBuilder::atBlockBegin(&entry);
      Value tid = gpu::ThreadIdOp::create(tb, loc, gpu::Dimension::x);
      Value numThreads = arith::ConstantIndexOp::create(tb, loc, threads);
      SmallVector<scf::ParallelOp> primitives;
      guard.walk([&](scf::ParallelOp p) {
        if (!isInsideParallel(p, guard))
          primitives.push_back(p);
      });
      OpBuilder bb(ctx);
      // Barriers order one primitive's tiles before the next one's reads. An
      // elementwise kernel's program of one primitive and no tiles (its
      // generic writes the destination, kda-gpu-prepare-tiles) has nothing
      // to order: each thread loads, computes and stores its own elements.
      bool alone = kda::isElementwiseKernel(f) && primitives.size() == 1;
      guard.walk([&](Operation *op) {
        if (isa<memref::AllocOp>(op) ||
            (isa<memref::StoreOp>(op) && !isInsideParallel(op, guard)))
          alone = false;
      });
      for (scf::ParallelOp p : primitives) {
        if (!alone) {
          barrierBefore(bb, p);
          barrierAfter(bb, p);
        }
        distribute(p, tid, numThreads, alone ? kElementwiseUnroll : 1);
      }
      guard.walk([&](scf::ForOp loop) {
        if (loop->hasAttr(kda::kWarpDistributedAttr)) {
          barrierBefore(bb, loop);
          barrierAfter(bb, loop);
        }
      });
      if (failed(singleThreadStores(guard, tid)))
        return failure();
    }

    // 5. Tiles -> shared-memory arena.
    OpBuilder sb = OpBuilder::atBlockBegin(&entry);
    auto byteArena = MemRefType::get(
        {ShapedType::kDynamic}, sb.getI8Type(), MemRefLayoutAttrInterface{},
        gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
    Value base = gpu::DynamicSharedMemoryOp::create(sb, loc, byteArena);
    FailureOr<int64_t> arena = planArena(*guardBody, base, /*alignment=*/16);
    if (failed(arena))
      return failure();
    bool anyAlloc = false;
    gpuFunc.walk([&](memref::AllocOp) { anyAlloc = true; });
    if (anyAlloc)
      return gpuFunc.emitError("kda-gpu-map-kernels: a buffer is allocated "
                               "outside the program body");

    // 6. Bare pointers and named sizes (the manifest's kernel ABI).
    FailureOr<SmallVector<Attribute>> params = rewriteAbi(gpuFunc, abi);
    if (failed(params))
      return failure();
    Attribute opTile = f->getAttr("kda.tile");
    Attribute strategy = f->getAttr("kda.strategy");
    // A window with earlier keys reads k's rows S as at least q's rows T:
    // the runtime checks it at launch ("at_least").
    Attribute atLeast;
    if (auto w = f->getAttrOfType<kda::WindowPassAttr>(kda::kWindowPassAttr);
        w && w.getEarlierKeys() && w.getEarlierKeys().getValue()) {
      auto rows = [&](StringRef name) -> Attribute {
        std::optional<unsigned> i = kda::abiArgumentIndex(abi, name);
        if (!i)
          return {};
        auto dims = cast<DictionaryAttr>(abi[*i]).getAs<ArrayAttr>("dims");
        auto d = dims && dims.size() > 1 ? dyn_cast<StringAttr>(dims[1])
                                         : StringAttr();
        return d ? builder.getStringAttr(symbolName(d.getValue()))
                 : Attribute();
      };
      Attribute keys = rows("k"), queries = rows("q");
      if (!keys || !queries)
        return f.emitError("kda-gpu-map-kernels: a window kernel with "
                           "earlier keys needs k's and q's rows as symbols");
      atLeast = builder.getArrayAttr({builder.getArrayAttr({keys, queries})});
    }
    f.erase();

    SmallVector<NamedAttribute> launch = {
        builder.getNamedAttr("name", builder.getStringAttr(name)),
        builder.getNamedAttr("module", builder.getStringAttr(name + "_module")),
        builder.getNamedAttr("params", builder.getArrayAttr(*params)),
        builder.getNamedAttr("grid", builder.getArrayAttr(grid)),
        builder.getNamedAttr(
            "block", builder.getI64ArrayAttr({blockThreads, 1, 1})),
        builder.getNamedAttr("dynamic_shared_memory",
                             builder.getI64IntegerAttr(*arena))};
    if (strategy) // lanes or tiles (kda-gpu-select-strategy)
      launch.push_back(builder.getNamedAttr("strategy", strategy));
    if (atLeast)
      launch.push_back(builder.getNamedAttr("at_least", atLeast));
    if (auto tile = dyn_cast_or_null<kda::TileAttr>(opTile)) {
      // What the op asked for (#kda.tile); the driver adds the defaults.
      // Segments only where there are some (manifests before them match).
      SmallVector<NamedAttribute> fields = {
          builder.getNamedAttr("chunk",
                               builder.getI64IntegerAttr(tile.getChunk())),
          builder.getNamedAttr("sub_chunk",
                               builder.getI64IntegerAttr(tile.getSubChunk())),
          builder.getNamedAttr("v_block",
                               builder.getI64IntegerAttr(tile.getVBlock()))};
      if (tile.getSegments() > 1)
        fields.push_back(builder.getNamedAttr(
            "segments", builder.getI64IntegerAttr(tile.getSegments())));
      launch.push_back(builder.getNamedAttr(
          "tile", builder.getDictionaryAttr(fields)));
    }
    return builder.getDictionaryAttr(launch);
  }

  /// Chunk grids over varlen sequences (kda.chunk_grid = C: programs
  /// (sequence n, chunk c, ...)) launch max-length chunks for every sequence;
  /// a program past its sequence's end would compute a whole chunk of
  /// zeros and store nothing. It returns at once instead.
  LogicalResult skipEmptyChunks(func::FuncOp f, gpu::GPUFuncOp gpuFunc,
                                ArrayAttr abi, scf::IfOp guard,
                                ArrayRef<Value> ids) {
    // A grid that lost dimensions of extent 1 to canonicalization (one
    // sequence, one head) keeps its programs: (sequence, chunk) are known
    // positions only in the full grid.
    auto chunk = f->getAttrOfType<IntegerAttr>(kda::kChunkGridAttr);
    if (!chunk || ids.size() != 3)
      return success();
    std::optional<unsigned> cuIndex = kda::abiArgumentIndex(abi, "cu_seqlens");
    if (!cuIndex)
      return success();
    Value cu = gpuFunc.getArgument(*cuIndex);
    Block *body = guard.thenBlock();
    OpBuilder b = OpBuilder::atBlockBegin(body);
    Location loc = guard.getLoc();
    auto offset = [&](Value i) -> Value {
      Value e = memref::LoadOp::create(b, loc, cu, ValueRange{i});
      return arith::IndexCastOp::create(b, loc, b.getIndexType(), e);
    };
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value length = arith::SubIOp::create(
        b, loc, offset(arith::AddIOp::create(b, loc, ids[0], one)),
        offset(ids[0]));
    Value first = arith::MulIOp::create(
        b, loc, ids[1],
        arith::ConstantIndexOp::create(b, loc, chunk.getInt()));
    Value nonEmpty = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                           first, length);
    auto inner = scf::IfOp::create(b, loc, nonEmpty, /*withElse=*/false);
    Block *innerBody = inner.thenBlock();
    innerBody->getOperations().splice(
        innerBody->begin(), body->getOperations(),
        std::next(inner->getIterator()), std::prev(body->end()));
    return success();
  }

  /// A nest of program loops (kda.program_loop, updating buffers in place)
  /// becomes the program grid, like the scf.forall other kernels have.
  LogicalResult programLoopsToGrid(func::FuncOp f) {
    SmallVector<scf::ForOp> nest;
    for (Operation &op : f.getBody().front())
      if (auto loop = dyn_cast<scf::ForOp>(op);
          loop && loop->hasAttr(kda::kProgramLoopAttr))
        nest.push_back(loop);
    if (nest.empty())
      return success();
    if (nest.size() != 1)
      return f.emitError("kda-gpu-map-kernels: expected one program loop nest");
    // Perfectly nested program loops, each with its buffers carried in place.
    while (true) {
      FailureOr<scf::ForOp> inner = carryInPlace(nest.back());
      if (failed(inner))
        return failure();
      nest.back() = *inner;
      Block *body = inner->getBody();
      scf::ForOp next;
      for (Operation &op : *body)
        if (auto l = dyn_cast<scf::ForOp>(op);
            l && l->hasAttr(kda::kProgramLoopAttr))
          next = l;
      if (!next)
        break;
      if (body->getOperations().size() != 2 || nest.size() == 3)
        return inner->emitError("kda-gpu-map-kernels: program loops must be "
                                "perfectly nested (at most 3)");
      nest.push_back(next);
    }
    SmallVector<OpFoldResult> lbs, ubs, steps;
    for (scf::ForOp l : nest) {
      if (!l.getUpperBound().getParentRegion()->isAncestor(
              &f.getBody()) ||
          (l != nest.front() &&
           nest.front()->isAncestor(l.getUpperBound().getDefiningOp())))
        return l.emitError("kda-gpu-map-kernels: a program loop's bound "
                           "depends on an outer program");
      lbs.push_back(l.getLowerBound());
      ubs.push_back(l.getUpperBound());
      steps.push_back(l.getStep());
    }
    OpBuilder b(nest.front());
    auto forall = scf::ForallOp::create(b, nest.front().getLoc(), lbs, ubs,
                                        steps, ValueRange{}, std::nullopt);
    Block *innermost = nest.back().getBody();
    for (auto [l, iv] : llvm::zip(nest, forall.getInductionVars()))
      l.getInductionVar().replaceAllUsesWith(iv);
    innermost->getTerminator()->erase();
    Block *target = forall.getBody();
    target->getOperations().splice(target->begin(),
                                   innermost->getOperations());
    nest.front().erase();
    return success();
  }

  /// Stores that no primitive spreads over threads (0-d tiles, scalars) are
  /// made by thread 0, then published with a barrier.
  LogicalResult singleThreadStores(scf::IfOp guard, Value tid) {
    SmallVector<memref::StoreOp> stores;
    guard.walk([&](memref::StoreOp s) {
      // Distributed primitives are scf.for loops stepping by the thread
      // count from the thread id.
      for (Operation *p = s->getParentOp(); p != guard; p = p->getParentOp())
        if (auto loop = dyn_cast<scf::ForOp>(p))
          if (loop.getLowerBound() == tid ||
              loop->hasAttr(kda::kWarpDistributedAttr))
            return;
      stores.push_back(s);
    });
    OpBuilder b(guard.getContext());
    for (memref::StoreOp s : stores) {
      b.setInsertionPoint(s);
      Value zero = arith::ConstantIndexOp::create(b, s.getLoc(), 0);
      Value first = arith::CmpIOp::create(b, s.getLoc(),
                                          arith::CmpIPredicate::eq, tid, zero);
      auto one = scf::IfOp::create(b, s.getLoc(), first, false);
      s->moveBefore(one.thenBlock()->getTerminator());
      barrierAfter(b, one);
    }
    return success();
  }

  /// Memref arguments -> !llvm.ptr, then one i64 per dynamic dimension
  /// symbol; the memrefs are rebuilt from them (row-major, contiguous).
  FailureOr<SmallVector<Attribute>> rewriteAbi(gpu::GPUFuncOp func,
                                               ArrayAttr abi) {
    MLIRContext *ctx = func.getContext();
    Builder builder(ctx);
    Block &entry = func.getBody().front();
    unsigned numTensors = entry.getNumArguments();
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    SmallVector<Attribute> params;
    SmallVector<std::string> symbols;
    for (unsigned i = 0; i < numTensors; ++i) {
      auto dict = cast<DictionaryAttr>(abi[i]);
      auto type = dyn_cast<MemRefType>(entry.getArgument(i).getType());
      if (!type || !type.getLayout().isIdentity())
        return func.emitError("kda-gpu-map-kernels: argument ")
               << i << " is not an identity-layout buffer";
      StringRef dtype = dtypeName(type.getElementType());
      if (dtype.empty())
        return func.emitError("kda-gpu-map-kernels: argument ")
               << i << " has an element type the runtime cannot describe";
      SmallVector<Attribute> shape;
      for (auto [d, dim] :
           llvm::enumerate(cast<ArrayAttr>(dict.get("dims")))) {
        if (auto s = dyn_cast<StringAttr>(dim)) {
          std::string sym = symbolName(s.getValue());
          shape.push_back(builder.getStringAttr(sym));
          if (!llvm::is_contained(symbols, sym))
            symbols.push_back(sym);
        } else {
          shape.push_back(dim);
        }
      }
      params.push_back(builder.getDictionaryAttr(
          {builder.getNamedAttr("name", dict.get("name")),
           builder.getNamedAttr("kind", builder.getStringAttr("tensor")),
           builder.getNamedAttr("dtype", builder.getStringAttr(dtype)),
           builder.getNamedAttr("shape", builder.getArrayAttr(shape)),
           builder.getNamedAttr(
               "alignment",
               builder.getI64IntegerAttr(std::max<int64_t>(
                   elementBytes(type.getElementType()),
                   // A kernel that reads rows as vectors states more.
                   dict.getAs<IntegerAttr>("alignment")
                       ? dict.getAs<IntegerAttr>("alignment").getInt()
                       : 0)))}));
    }
    for (const std::string &s : symbols)
      params.push_back(builder.getDictionaryAttr(
          {builder.getNamedAttr("name", builder.getStringAttr(s)),
           builder.getNamedAttr("kind", builder.getStringAttr("dim"))}));

    // New arguments.
    Location loc = func.getLoc();
    SmallVector<BlockArgument> ptrs, sizes;
    for (unsigned i = 0; i < numTensors; ++i)
      ptrs.push_back(entry.addArgument(ptrType, loc));
    for (size_t i = 0; i < symbols.size(); ++i)
      sizes.push_back(entry.addArgument(i64, loc));

    OpBuilder b = OpBuilder::atBlockBegin(&entry);
    for (unsigned i = 0; i < numTensors; ++i) {
      BlockArgument old = entry.getArgument(i);
      auto type = cast<MemRefType>(old.getType());
      int64_t rank = type.getRank();
      auto arrayType = LLVM::LLVMArrayType::get(i64, rank);
      auto descType = LLVM::LLVMStructType::getLiteral(
          ctx, {ptrType, ptrType, i64, arrayType, arrayType});
      Value desc = LLVM::PoisonOp::create(b, loc, descType);
      desc = LLVM::InsertValueOp::create(b, loc, desc, ptrs[i], ArrayRef<int64_t>{0});
      desc = LLVM::InsertValueOp::create(b, loc, desc, ptrs[i], ArrayRef<int64_t>{1});
      Value zero = LLVM::ConstantOp::create(b, loc, i64, 0);
      desc = LLVM::InsertValueOp::create(b, loc, desc, zero, ArrayRef<int64_t>{2});
      auto dims = cast<ArrayAttr>(cast<DictionaryAttr>(abi[i]).get("dims"));
      SmallVector<Value> extents(rank);
      for (int64_t d = 0; d < rank; ++d) {
        if (auto s = dyn_cast<StringAttr>(dims[d]))
          extents[d] = sizes[llvm::find(symbols, symbolName(s.getValue())) -
                             symbols.begin()];
        else
          extents[d] = LLVM::ConstantOp::create(
              b, loc, i64, cast<IntegerAttr>(dims[d]).getInt());
      }
      Value stride = LLVM::ConstantOp::create(b, loc, i64, 1);
      for (int64_t d = rank - 1; d >= 0; --d) {
        desc = LLVM::InsertValueOp::create(b, loc, desc, extents[d],
                                           ArrayRef<int64_t>{3, d});
        desc = LLVM::InsertValueOp::create(b, loc, desc, stride,
                                           ArrayRef<int64_t>{4, d});
        if (d > 0)
          stride = LLVM::MulOp::create(b, loc, stride, extents[d]);
      }
      Value memref =
          UnrealizedConversionCastOp::create(b, loc, type, desc).getResult(0);
      old.replaceAllUsesWith(memref);
    }
    entry.eraseArguments(0, numTensors);
    SmallVector<Type> argTypes(entry.getArgumentTypes());
    func.setFunctionType(FunctionType::get(ctx, argTypes, {}));
    return params;
  }
};

} // namespace

std::unique_ptr<Pass> mlir::kda::createGpuMapKernelsPass(int64_t threads) {
  return std::make_unique<MapKernelsPass>(threads);
}

std::optional<unsigned> mlir::kda::abiArgumentIndex(ArrayAttr abi,
                                                    llvm::StringRef name) {
  for (auto [i, a] : llvm::enumerate(abi))
    if (auto d = dyn_cast<DictionaryAttr>(a))
      if (auto s = d.getAs<StringAttr>("name"); s && s.getValue() == name)
        return static_cast<unsigned>(i);
  return std::nullopt;
}
