//===- ChunkTiling.cpp - kda ops -> chunkwise tiled form ------------------===//
//
// Distributes each kda op over programs and walks its sequence in chunks:
//
//   scf.forall (n, hv) in (N, HV)          one program per (sequence, head)
//     S = initial state                    [K, V] f32
//     scf.for c in chunks(sequence n)      sequential: carries S
//       tiles = load q, k, v, g, beta of chunk c (zero past the end)
//       (O, S) = emitGatedDeltaChunk(tiles, S)
//       store O rows; record S at boundaries
//     store S as the final state
//
// With schedule=chunk-parallel a grid over (sequence, chunk, head) first
// writes each chunk's emitIntraChunk results into workspaces, and the chunk
// loop above only loads them and runs emitStateStep.
//
// The per-chunk computation lives in GatedDeltaKernel.cpp; this file only
// says where tiles come from and go to.
//
//===----------------------------------------------------------------------===//

#include "passes/GatedDeltaBackward.h"
#include "passes/GatedDeltaKernel.h"
#include "passes/Passes.h"
#include "passes/Sequences.h"
#include "passes/TileAdjoint.h"
#include "passes/TileBuilder.h"
#include "passes/WindowAttentionKernel.h"

#include "dialect/KdaOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDATILECHUNKS
#include "passes/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;
using namespace mlir::kda;

namespace {

int64_t dimOf(Value v, unsigned d) {
  return cast<RankedTensorType>(v.getType()).getDimSize(d);
}

/// Gives every dynamic dimension of a kda op's operands and results the
/// static size another of its values states for the same dimension (the
/// verifier's names: q's K and a state's K are one size), through
/// tensor.cast. The verifier accepts such mixes; the tiling builds its tiles
/// from whichever value it reads (a state's dynamic K beside q's static one
/// crashed it).
void refineStaticSizes(Operation *op) {
  DimensionNames names = nameDimensions(op);
  if (names.empty())
    return;
  llvm::StringMap<int64_t> known;
  for (auto &[value, naming] : names) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type || type.getRank() != static_cast<int64_t>(naming.dims.size()))
      return;
    for (auto [axis, name] : llvm::enumerate(naming.dims))
      if (!type.isDynamicDim(axis))
        known[name] = type.getDimSize(axis);
  }
  auto refined = [&](Value v) -> RankedTensorType {
    auto type = cast<RankedTensorType>(v.getType());
    auto it = names.find(v);
    if (it == names.end())
      return type;
    SmallVector<int64_t> shape(type.getShape());
    for (auto [axis, name] : llvm::enumerate(it->second.dims))
      if (type.isDynamicDim(axis))
        if (auto k = known.find(name); k != known.end())
          shape[axis] = k->second;
    return type.clone(shape);
  };
  OpBuilder b(op);
  for (OpOperand &use : op->getOpOperands())
    if (isa<RankedTensorType>(use.get().getType()))
      if (RankedTensorType r = refined(use.get()); r != use.get().getType())
        use.set(tensor::CastOp::create(b, op->getLoc(), r, use.get()));
  b.setInsertionPointAfter(op);
  for (OpResult result : op->getResults()) {
    auto type = dyn_cast<RankedTensorType>(result.getType());
    if (!type)
      continue;
    RankedTensorType r = refined(result);
    if (r == type)
      continue;
    result.setType(r);
    auto back = tensor::CastOp::create(b, op->getLoc(), type, result);
    result.replaceAllUsesExcept(back, back);
  }
}

Value dimValue(ImplicitLocOpBuilder &b, Value v, unsigned d) {
  return tensor::DimOp::create(b, v, d);
}

/// Dimension `d` of `v`: an attribute when static, else a tensor.dim.
OpFoldResult sizeOf(ImplicitLocOpBuilder &b, Value v, unsigned d) {
  if (!ShapedType::isDynamic(dimOf(v, d)))
    return b.getIndexAttr(dimOf(v, d));
  return dimValue(b, v, d);
}

/// Reads element `indices` of a float tensor as f32.
Value extractF32(ImplicitLocOpBuilder &b, Value t, ValueRange indices) {
  Value e = tensor::ExtractOp::create(b, t, indices);
  if (e.getType().isF32())
    return e;
  return arith::ExtFOp::create(b, b.getF32Type(), e);
}

/// What of an op's #kda.tile no target takes (empty: nothing). Segments
/// (sequence-parallel segments of one sequence) are kda.gated_delta's only
/// (kda-tile-chunks checks the rest: segmentsRefusal). Window attention takes
/// only the chunk (queries per program): its programs compute all of V, and
/// it has no sub-chunks.
std::string untakenTileFields(Operation *op, TileAttr tile) {
  std::string why;
  llvm::raw_string_ostream os(why);
  if (tile.getSegments() != 1 && !isa<GatedDeltaOp>(op)) {
    os << "segments = " << tile.getSegments()
       << ": only kda.gated_delta runs sequence-parallel segments; use "
          "segments = 1";
  } else if (auto w = dyn_cast<WindowAttentionOp>(op)) {
    const int64_t vd = cast<ShapedType>(w.getV().getType()).getDimSize(3);
    if (tile.getVBlock() > 0 && tile.getVBlock() != vd)
      os << "v_block = " << tile.getVBlock()
         << " on window attention: its programs compute all of V (" << vd
         << "); leave v_block out";
    else if (tile.getSubChunk() != 16)
      os << "sub_chunk = " << tile.getSubChunk()
         << " on window attention, which has no sub-chunks (only chunk, the "
            "queries per program, is taken); leave sub_chunk out";
  }
  return why;
}

/// Chunk and sub-chunk of an op: its #kda.tile, else the pass options.
std::pair<int64_t, int64_t> tileSizes(std::optional<TileAttr> tile,
                                      int64_t chunk, int64_t subChunk) {
  if (tile && *tile)
    return {tile->getChunk(), tile->getSubChunk()};
  return {chunk, std::min(subChunk, chunk)};
}

/// Columns of V per program: the op's #kda.tile v_block, else the pass
/// option where it divides V, else all of V. Every column of the state, the
/// values and the output evolves independently, so V splits over programs;
/// what depends only on q, k, gates and beta is recomputed per block.
/// nullopt when the op's v_block does not divide V.
std::optional<int64_t> valueBlock(std::optional<TileAttr> tile,
                                  int64_t option, int64_t vd) {
  int64_t vb = vd;
  if (tile && *tile && tile->getVBlock() > 0)
    vb = tile->getVBlock();
  else if (option > 0 && option < vd && vd % option == 0)
    vb = option;
  if (vb <= 0 || vd % vb != 0)
    return std::nullopt;
  return vb;
}

/// The state tile [K, V] of a state tensor slice, whichever its layout.
Value loadState(TensorTileBuilder &tb, Value src, ArrayRef<OpFoldResult> offsets,
                int64_t firstStateDim, bool vMajor, int64_t kd, int64_t vd) {
  int64_t rows = vMajor ? vd : kd, cols = vMajor ? kd : vd;
  Value t = tb.load(src, offsets, {firstStateDim, firstStateDim + 1},
                    {rows, cols}, tb.index(rows));
  return vMajor ? tb.transpose(t) : t;
}

Value storeState(TensorTileBuilder &tb, Value state, Value dest,
                 ArrayRef<OpFoldResult> offsets, int64_t firstStateDim,
                 bool vMajor) {
  Value t = vMajor ? tb.transpose(state) : state;
  int64_t rows = cast<RankedTensorType>(t.getType()).getDimSize(0);
  return tb.store(t, dest, offsets, {firstStateDim, firstStateDim + 1},
                  tb.index(rows));
}

/// Prologue parameters of one value head: A_log as a scalar, dt_bias as a
/// [K] row (head-wise dt_bias broadcast to every channel).
void loadGateParams(TensorTileBuilder &tb, Value aLog, Value dtBias, Value hv,
                    bool channelWise, int64_t kd, Value &aLogOut,
                    Value &dtBiasOut) {
  ImplicitLocOpBuilder &b = tb.builder();
  if (aLog)
    aLogOut = extractF32(b, aLog, hv);
  if (!dtBias)
    return;
  if (channelWise) {
    dtBiasOut = tb.load(dtBias, {hv, b.getIndexAttr(0)}, {1}, {kd},
                        tb.index(kd));
    return;
  }
  Value scalar = extractF32(b, dtBias, hv);
  dtBiasOut = tb.map({kd}, {}, [&](ImplicitLocOpBuilder &, ValueRange,
                                   ValueRange) { return scalar; });
}

/// The prologue entries of kda.intra_pass and kda.decode_pass (passes/
/// Passes.h; lowering/lanes/PassDescription.h reads them): update rule, gate form
/// and activation, beta and its activation, l2 norm, scale.
PrologueAttr prologueDescription(Builder &b, const ChunkConfig &config,
                                 bool hasGate, bool channelGate, bool hasBeta) {
  GateForm gate = !hasGate ? GateForm::none
                  : channelGate ? GateForm::channel
                                : GateForm::head;
  return PrologueAttr::get(
      b.getContext(), b.getBoolAttr(config.update == UpdateRule::delta), gate,
      config.gateActivation, b.getF64FloatAttr(config.lowerBound),
      b.getBoolAttr(hasBeta), config.betaActivation,
      b.getBoolAttr(config.qkL2Norm), b.getF64FloatAttr(config.scale));
}

LogicalResult requireStatic(PatternRewriter &rewriter, Operation *op,
                            ArrayRef<std::pair<Value, unsigned>> dims) {
  for (auto [v, d] : dims)
    if (ShapedType::isDynamic(dimOf(v, d)))
      return rewriter.notifyMatchFailure(
          op, "heads and head dimensions must be static to tile");
  return success();
}


//===----------------------------------------------------------------------===//
// The chunk-parallel schedule's intra-chunk grid
//===----------------------------------------------------------------------===//

/// What the intra-chunk grid hands the state pass, one f32 tensor per
/// emitIntraChunk result, indexed like the tokens ([B, T, HV, .]): the rows
/// of chunk c of sequence n sit at the chunk's own token rows, so sequences
/// never overlap and varlen needs no chunk offsets. The chunk's decay
/// exp(G_last) ([K] per chunk) is stored in the chunk's first row of `g`.
struct IntraWorkspaces {
  Value w, u, q, k, p, g; // w and g may be null (no delta rule, no gate)
};

/// A [1, N] tile from an [N] vector.
Value asRow(TensorTileBuilder &tb, Value vec) {
  int64_t n = cast<RankedTensorType>(vec.getType()).getDimSize(0);
  return tb.map({1, n}, {perColumn(vec)},
                [](ImplicitLocOpBuilder &, ValueRange s, ValueRange) {
                  return s[0];
                });
}

/// For kda.gated_delta (the forward's first grid) and kda.gated_delta_grad
/// (the backward's: the same workspaces, which its reverse scan reads as
/// the forward's state pass does).
/// `allowHalf`: 16-bit inputs may keep W, Gamma Q and the decayed k in bf16
/// (the forward's choice); the gradient keeps them f32 (below).
template <typename ChunkOp>
IntraWorkspaces emitIntraChunkGrid(ImplicitLocOpBuilder &b, ChunkOp op,
                                   const ChunkConfig &config,
                                   const SequenceLayout &sequences,
                                   OpFoldResult hv, Value headsPerQueryHead,
                                   bool allowHalf = true) {
  TensorTileBuilder tb(b);
  const int64_t c = config.chunk, kd = config.keyDim, vd = config.valueDim;
  const bool delta = config.update == UpdateRule::delta;
  const bool decays = static_cast<bool>(op.getGate());
  bool channelGate = op.getGateGranularity() == GateGranularity::channel;
  Value q = op.getQ(), v = op.getV();

  // Workspaces, in the order of IntraWorkspaces.
  SmallVector<int64_t> widths;
  if (delta)
    widths.push_back(kd);
  widths.append({vd, kd, kd, c});
  if (decays)
    widths.push_back(kd);
  // Element types. With 16-bit inputs the three [C, K] workspaces every V
  // block of the state pass reads (W, Gamma Q, the decayed k) are bf16:
  // half the bytes of the schedule's largest traffic, for a rounding the
  // 16-bit bars allow (FLA keeps them in the inputs' type too); bf16 rather
  // than f16 for its range (W = A beta Gamma K is not bounded by the
  // inputs). U [C, V] is bf16 too (FLA's u is): the intra grid's largest
  // write and the state pass's one read of it, V_new = U - W S, takes it
  // into an f32 accumulator. P ([C, C]) and the chunk decay stay f32, as
  // does everything of fp32 kernels, which keep the 1e-4 bar.
  bool halfWorkspaces =
      allowHalf && !isa<Float32Type>(getElementTypeOrSelf(q.getType()));
  SmallVector<Type> types;
  for (size_t i = 0; i < widths.size(); ++i) {
    size_t role = delta ? i : i + 1; // 0 w, 1 u, 2 q, 3 k, 4 p, 5 g
    bool shared = role <= 3;
    types.push_back(halfWorkspaces && shared ? Type(b.getBF16Type())
                                             : tb.f32());
  }
  SmallVector<Value> outs;
  for (auto [width, type] : llvm::zip(widths, types))
    outs.push_back(tb.emptyOfType(
        RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic,
                               ShapedType::kDynamic, width},
                              type),
        {sequences.batch(), sequences.tokens(), hv}));

  Value cIdx = tb.index(c);
  Value maxChunks = arith::CeilDivUIOp::create(b, sequences.tokens(), cIdx);
  auto forall = scf::ForallOp::create(
      b, SmallVector<OpFoldResult>{sequences.gridSize(), maxChunks, hv}, outs,
      std::nullopt);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(forall.getBody());
  Value n = forall.getInductionVar(0), chunkIdx = forall.getInductionVar(1),
        head = forall.getInductionVar(2);
  ValueRange shared = forall.getRegionIterArgs();
  SequenceLayout::Bounds where = sequences.bounds(b, n);
  Value local = arith::MulIOp::create(b, chunkIdx, cIdx);
  Value t0 = arith::AddIOp::create(b, where.start, local);
  Value z = tb.index(0);
  // A sequence shorter than the longest has no chunk here: its program
  // writes nothing (empty regions).
  Value clamped = arith::MinUIOp::create(b, local, where.length);
  Value valid = validRows(b, cIdx, where.length, clamped);
  Value firstRow = arith::MinUIOp::create(b, valid, tb.index(1));

  // This program's rows of each workspace.
  SmallVector<Value> regions;
  SmallVector<SmallVector<OpFoldResult>> regionSizes;
  for (auto [i, width] : llvm::enumerate(widths)) {
    bool gRow = decays && i + 1 == widths.size();
    SmallVector<OpFoldResult> sizes = {
        b.getIndexAttr(1), gRow ? firstRow : valid, b.getIndexAttr(1),
        b.getIndexAttr(width)};
    regions.push_back(tensor::ExtractSliceOp::create(
        b, RankedTensorType::get({ShapedType::kDynamic, width}, types[i]),
        shared[i], ArrayRef<OpFoldResult>{where.row, t0, head, z}, sizes,
        SmallVector<OpFoldResult>(4, b.getIndexAttr(1))));
    regionSizes.push_back(sizes);
  }

  // Programs past their sequence's end run on zero rows (valid = 0) and
  // store nothing; branching around them would make the workspace regions
  // branch results, which GPU bufferization copies.
  SmallVector<Value> written;
  {
    ImplicitLocOpBuilder &ib = b;
    TensorTileBuilder &itb = tb;
    Value qkHead = arith::DivUIOp::create(ib, head, headsPerQueryHead);
    Value row = where.row;
    ChunkInputs in;
    in.validRows = valid;
    in.q = itb.load(q, {row, t0, qkHead, z}, {1, 3}, {c, kd}, valid);
    in.k = itb.load(op.getK(), {row, t0, qkHead, z}, {1, 3}, {c, kd}, valid);
    in.v = itb.load(v, {row, t0, head, z}, {1, 3}, {c, vd}, valid);
    if (Value g = op.getGate()) {
      if (channelGate) {
        in.gate = itb.load(g, {row, t0, head, z}, {1, 3}, {c, kd}, valid);
      } else {
        Value gh = itb.load(g, {row, t0, head}, {1}, {c}, valid);
        in.gate = itb.map({c, kd}, {perRow(gh)},
                          [](ImplicitLocOpBuilder &, ValueRange s,
                             ValueRange) { return s[0]; });
      }
    }
    if (Value beta = op.getBeta())
      in.beta = itb.load(beta, {row, t0, head}, {1}, {c}, valid);
    loadGateParams(itb, op.getALog(), op.getDtBias(), head, channelGate, kd,
                   in.aLog, in.dtBias);
    IntraChunk intra = emitIntraChunk(itb, config, in);
    SmallVector<Value> tiles;
    if (delta)
      tiles.push_back(intra.w);
    tiles.append({intra.u, intra.qDecayed, intra.kToEnd, intra.p});
    if (decays)
      tiles.push_back(asRow(itb, intra.decayLast));
    for (auto [i, tile] : llvm::enumerate(tiles)) {
      bool gRow = decays && i + 1 == tiles.size();
      written.push_back(itb.store(tile, regions[i], {z, z}, {0, 1},
                                  gRow ? firstRow : valid));
    }
  }

  b.setInsertionPointToStart(forall.getTerminator().getBody());
  for (auto [i, sizes] : llvm::enumerate(regionSizes))
    tensor::ParallelInsertSliceOp::create(
        b, written[i], shared[i],
        ArrayRef<OpFoldResult>{where.row, t0, head, z}, sizes,
        SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));

  IntraWorkspaces ws;
  unsigned i = 0;
  ws.w = delta ? forall.getResult(i++) : Value();
  ws.u = forall.getResult(i++);
  ws.q = forall.getResult(i++);
  ws.k = forall.getResult(i++);
  ws.p = forall.getResult(i++);
  ws.g = decays ? forall.getResult(i++) : Value();
  return ws;
}

/// The state pass's view of chunk `t0`: the intra-chunk tiles of one V block.
IntraChunk loadIntraChunk(TensorTileBuilder &tb, const IntraWorkspaces &ws,
                          Value row, Value t0, Value head, Value vCol,
                          Value valid, int64_t c, int64_t kd, int64_t vb,
                          bool pastEnd = false) {
  Value z = tb.index(0);
  IntraChunk intra;
  if (ws.w)
    intra.w = tb.load(ws.w, {row, t0, head, z}, {1, 3}, {c, kd}, valid);
  intra.u = tb.load(ws.u, {row, t0, head, vCol}, {1, 3}, {c, vb}, valid);
  intra.qDecayed = tb.load(ws.q, {row, t0, head, z}, {1, 3}, {c, kd}, valid);
  intra.kToEnd = tb.load(ws.k, {row, t0, head, z}, {1, 3}, {c, kd}, valid);
  intra.p = tb.load(ws.p, {row, t0, head, z}, {1, 3}, {c, c}, valid);
  // `pastEnd`: the program may lie past its sequence's end (a gradient's
  // chunk-parallel grids), with t0 past the workspace's last token: the
  // chunk's first row read through the row clamp, inside the workspace.
  // (The forward's programs read theirs directly: the same IR as the
  // kernels measured.)
  if (ws.g && pastEnd)
    intra.decayLast = tb.rowOf(
        tb.load(ws.g, {row, t0, head, z}, {1, 3}, {1, kd},
                arith::MinUIOp::create(tb.builder(), valid, tb.index(1))),
        0);
  else if (ws.g)
    intra.decayLast = tb.load(ws.g, {row, t0, head, z}, {3}, {kd}, tb.index(kd));
  return intra;
}

//===----------------------------------------------------------------------===//
// kda.gated_delta
//===----------------------------------------------------------------------===//

/// The caller's buffer for `result` where the op sits in a destination-style
/// kernel (the function returns `result` and takes one argument per result
/// after its inputs), else null.
Value kernelDestination(Value result) {
  if (!result.hasOneUse())
    return {};
  auto ret = dyn_cast<func::ReturnOp>(*result.getUsers().begin());
  if (!ret)
    return {};
  auto func = ret->getParentOfType<func::FuncOp>();
  if (!func || !func->hasAttr("kda.kernel"))
    return {};
  unsigned firstDest = func.getNumArguments() - ret.getNumOperands();
  for (OpOperand &use : result.getUses())
    if (use.getOwner() == ret) {
      Value dest = func.getArgument(firstDest + use.getOperandNumber());
      return dest.getType() == result.getType() ? dest : Value();
    }
  return {};
}

/// NT, the number of recorded boundary states: the result's static size,
/// else ceil(T / interval) without varlen, else the caller's (the kernel's
/// destination; kda-tile-chunks checks that there is one).
OpFoldResult boundaryCount(ImplicitLocOpBuilder &b, GatedDeltaOp op) {
  Value boundary = op.getBoundaryStates();
  int64_t nt = cast<RankedTensorType>(boundary.getType()).getDimSize(1);
  if (!ShapedType::isDynamic(nt))
    return b.getIndexAttr(nt);
  if (!op.getCuSeqlens()) {
    return arith::CeilDivUIOp::create(
               b, tensor::DimOp::create(b, op.getQ(), 1),
               arith::ConstantIndexOp::create(b, *op.getBoundaryInterval()))
        .getResult();
  }
  return tensor::DimOp::create(b, kernelDestination(boundary), 1).getResult();
}


//===----------------------------------------------------------------------===//
// Segments: one sequence's chunks run side by side
//===----------------------------------------------------------------------===//

/// Segments per sequence of `op`: its #kda.tile's where that sets more
/// than one, else the pass option's.
int64_t segmentsOf(GatedDeltaOp op, int64_t option) {
  if (std::optional<TileAttr> tile = op.getTile();
      tile && *tile && tile->getSegments() != 1)
    return tile->getSegments();
  return std::max<int64_t>(option, 1);
}

/// Why `op` cannot run in `segments` segments under the given schedule
/// (empty: it can).
std::string segmentsRefusal(GatedDeltaOp op, int64_t segments,
                            bool chunkParallel) {
  if (segments <= 1)
    return "";
  std::string why;
  llvm::raw_string_ostream os(why);
  if (!chunkParallel)
    os << "segments = " << segments
       << " need the chunk-parallel schedule (the segments' scan reads the "
          "intra-chunk workspaces); use --schedule=chunk-parallel or "
          "segments = 1";
  else if (op.getBoundaryStates())
    os << "segments = " << segments
       << " with boundary states are not implemented (a segment's state is "
          "known only after the scan); use segments = 1";
  else if (segments > kMaxSegments)
    os << "segments = " << segments << " exceed " << kMaxSegments;
  return why;
}

/// `extent` x P: the grid over (sequence, segment).
OpFoldResult timesSegments(ImplicitLocOpBuilder &b, OpFoldResult extent,
                           int64_t P) {
  if (std::optional<int64_t> e = getConstantIntValue(extent))
    return b.getIndexAttr(*e * P);
  return arith::MulIOp::create(
             b, getValueOrCreateConstantIndexOp(b, b.getLoc(), extent),
             arith::ConstantIndexOp::create(b, P))
      .getResult();
}

struct TileGatedDelta : OpRewritePattern<GatedDeltaOp> {
  TileGatedDelta(MLIRContext *ctx, int64_t chunk, int64_t subChunk,
                 int64_t vBlock, int64_t vBlockF32, bool chunkParallel,
                 bool slotsInKernel, bool subChunkSteps, bool wideSteps,
                 int64_t segments)
      : OpRewritePattern(ctx), chunk(chunk), subChunk(subChunk),
        vBlock(vBlock), vBlockF32(vBlockF32), chunkParallel(chunkParallel),
        slotsInKernel(slotsInKernel), subChunkSteps(subChunkSteps),
        wideSteps(wideSteps), segments(segments) {}

  LogicalResult matchAndRewrite(GatedDeltaOp op,
                                PatternRewriter &rewriter) const override {
    Value q = op.getQ(), v = op.getV();
    if (failed(requireStatic(rewriter, op, {{q, 3}, {v, 3}})))
      return failure();

    // Head counts may be dynamic (a GPU kernel serves any number of heads);
    // head dimensions size the tiles and are static.
    const int64_t kd = dimOf(q, 3), vd = dimOf(v, 3);
    // Every check before the first op is created: a pattern that creates ops
    // and then fails leaves them behind, and the driver never converges.
    // fp32 inputs have a default of their own (f32 workspaces: the chip
    // table's defaultVBlockF32) where it divides V; else v-block's.
    const bool f32Inputs =
        cast<ShapedType>(q.getType()).getElementType().isF32();
    const bool ownVBlock = op.getTile() && *op.getTile() &&
                           op.getTile()->getVBlock() > 0;
    const int64_t vBlockOption =
        f32Inputs && vBlockF32 > 0 && vd % vBlockF32 == 0 ? vBlockF32
                                                           : vBlock;
    std::optional<int64_t> vBlocked =
        valueBlock(op.getTile(), vBlockOption, vd);
    if (!vBlocked)
      return rewriter.notifyMatchFailure(op, "v_block must divide V");

    const int64_t P = segmentsOf(op, segments);

    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    TensorTileBuilder tb(b);
    auto [cTile, subTile] = tileSizes(op.getTile(), chunk, subChunk);
    // A V block other than the pass's v-block, and segments from the pass
    // option, are recorded where the bundle manifest reads the kernel's
    // tile: the kernel's kda.tile (the op's own, completed).
    const bool recordVBlock = !ownVBlock && vBlockOption != vBlock;
    if (recordVBlock || P > 1)
      if (auto kernel = op->getParentOfType<func::FuncOp>();
          kernel && kernel->hasAttr("kda.kernel")) {
        auto had = kernel->getAttrOfType<TileAttr>("kda.tile");
        const int64_t vbRecorded =
            recordVBlock || (!had && ownVBlock) ? *vBlocked
            : had                               ? had.getVBlock()
                                                : 0;
        kernel->setAttr(
            "kda.tile",
            had ? TileAttr::get(op.getContext(), had.getChunk(),
                                had.getSubChunk(), vbRecorded, had.getWarps(),
                                had.getStages(), P > 1 ? P : had.getSegments())
                : TileAttr::get(op.getContext(), cTile, subTile, vbRecorded,
                                4, 2, P));
      }
    // sub-chunk-steps: a chunk of several 16-token sub-chunks runs as that
    // many chunk steps of 16. Same chunkwise form (SPEC.md section 3), same
    // result up to rounding; the sub-chunks meet through the state instead
    // of the chunk's off-diagonal blocks. The boundary interval belongs to
    // the op and stays a multiple of the step.
    const int64_t tileChunk = cTile;
    if (chunkParallel && subChunkSteps && subTile == 16 && cTile > 16)
      cTile = subTile;
    const int64_t c = cTile, sub = subTile;
    // Wide steps: the state pass takes `wide` sub-chunk steps at once.
    const int64_t wide =
        chunkParallel && wideSteps && c != tileChunk ? tileChunk / c : 1;
    OpFoldResult hv = sizeOf(b, v, 2);
    Value headsPerQueryHead = arith::DivUIOp::create(
        b, getValueOrCreateConstantIndexOp(b, b.getLoc(), hv),
        getValueOrCreateConstantIndexOp(b, b.getLoc(), sizeOf(b, q, 2)));
    const bool vMajor = op.getStateLayout() == StateLayout::v_major;
    const int64_t vb = *vBlocked;
    const bool splitV = vb < vd;
    ChunkConfig config = chunkConfigOf(op, c, sub, kd, vb);
    std::optional<GateGranularity> granularity = op.getGateGranularity();
    bool channelGate = granularity == GateGranularity::channel;

    // Result tensors, written by the programs.
    SequenceLayout sequences(b, q, op.getCuSeqlens());
    Value numSeqs = sequences.numSequences();
    auto oType = cast<RankedTensorType>(op.getO().getType());
    SmallVector<Value> outs;
    outs.push_back(tb.emptyOfType(
        oType, {sequences.batch(), sequences.tokens(), hv,
                b.getIndexAttr(vd)}));
    Value finalState = op.getFinalState();
    // Segmented, the combine grid writes the final state (the scan's last
    // state), not the state grid.
    if (finalState && P == 1) {
      auto type = cast<RankedTensorType>(finalState.getType());
      outs.push_back(tb.emptyOfType(type, {numSeqs, hv, {}, {}}));
    }
    Value result = op.getBoundaryStates();
    Value table = op.getBoundaryIndices();
    // `boundary`: the programs record boundary states densely ([N, NT, HV,
    // ., .]; with a table, NT = NB and a copy into the slots follows);
    // `poolInKernel`: the state kernel writes the pool itself.
    const bool poolInKernel = result && table && slotsInKernel;
    Value boundary = poolInKernel ? Value() : result;
    int64_t interval = 0;
    OpFoldResult numBoundaries;
    RankedTensorType denseType;
    if (result)
      interval = *op.getBoundaryInterval();
    if (boundary) {
      auto type = cast<RankedTensorType>(result.getType());
      denseType = type;
      numBoundaries = table ? sizeOf(b, table, 1) : boundaryCount(b, op);
      if (table) {
        SmallVector<int64_t> shape = {ShapedType::kDynamic,
                                      ShapedType::kDynamic,
                                      ShapedType::kDynamic};
        shape.append({type.getDimSize(2), type.getDimSize(3)});
        if (auto nb = getConstantIntValue(numBoundaries))
          shape[1] = *nb;
        denseType = RankedTensorType::get(shape, type.getElementType());
      }
      // Each program zeroes its own entries (those past a shorter
      // sequence's end stay zero): a fill of the whole tensor before the
      // grid would, on a GPU, run in every block and race with the others'
      // stores.
      outs.push_back(tb.emptyOfType(
          denseType, {numSeqs, numBoundaries, hv, {}, {}}));
    } else if (poolInKernel) {
      auto type = cast<RankedTensorType>(result.getType());
      OpFoldResult slots = b.getIndexAttr(type.getDimSize(0));
      if (type.isDynamicDim(0))
        slots = tensor::DimOp::create(b, kernelDestination(result), 0)
                    .getResult();
      outs.push_back(tb.emptyOfType(type, {slots, hv, {}, {}}));
    }

    // Chunk-parallel schedule: the state-independent part of every chunk
    // first, over (sequence, chunk, head) programs, into workspaces.
    IntraWorkspaces ws;
    if (chunkParallel) {
      ChunkConfig full = chunkConfigOf(op, c, sub, kd, vd);
      ws = emitIntraChunkGrid(b, op, full, sequences, hv, headsPerQueryHead);
    }
    Value starts, segmentedFinal;
    if (P > 1)
      std::tie(starts, segmentedFinal) =
          emitSegmentScan(b, tb, op, ws, sequences, hv, P, c, c * wide, kd,
                          vd, vb);
    // The state grid's first dimension: sequences, or (segmented) sequence
    // x segment, segment fastest.
    OpFoldResult seqGrid = sequences.gridSize();
    if (P > 1)
      seqGrid = timesSegments(b, seqGrid, P);

    SmallVector<OpFoldResult> grid = {seqGrid, hv};
    if (splitV)
      grid.push_back(b.getIndexAttr(vd / vb));
    auto forall = scf::ForallOp::create(b, grid, outs, std::nullopt);
    if (chunkParallel) {
      // Canonicalization rebuilds grids (dropping attributes): the names of
      // the schedule's grids, in order, go on the function.
      if (auto f = forall->getParentOfType<FunctionOpInterface>()) {
        if (P > 1)
          f->setAttr(kPhaseAttr, b.getStrArrayAttr(
                                     {"intra", "summary", "combine", "state"}));
        else
          f->setAttr(kPhaseAttr, b.getStrArrayAttr({"intra", "state"}));
        // The state grid's extents where static (-1: dynamic), in order
        // (sequence, head, V block): canonicalization drops the dimensions
        // of extent 1, and a target that reads the grid needs to know which.
        auto staticOr = [](int64_t d) {
          return ShapedType::isDynamic(d) ? int64_t(-1) : d;
        };
        int64_t numSeqsStatic = staticOr(dimOf(q, 0));
        if (Value cu = op.getCuSeqlens()) {
          int64_t offsets = dimOf(cu, 0);
          numSeqsStatic = ShapedType::isDynamic(offsets) ? -1 : offsets - 1;
        }
        const int64_t seqsStatic = numSeqsStatic;
        if (P > 1 && numSeqsStatic >= 0)
          numSeqsStatic *= P;
        SmallVector<int64_t> gridExtents = {numSeqsStatic,
                                            staticOr(dimOf(v, 2))};
        if (splitV)
          gridExtents.push_back(vd / vb);
        SmallVector<StringRef> roles;
        if (ws.w)
          roles.push_back("w");
        roles.append({"u", "q", "k", "p"});
        if (ws.g)
          roles.push_back("g");
        // (Wide steps have no lane program: the state grid keeps the tile
        // lowering, so no description for kda-gpu-state-registers.)
        if (wide == 1)
        f->setAttr(kStatePassAttr,
                   StatePassAttr::get(
                       b.getContext(), c, tileChunk, kd, vb,
                       b.getBoolAttr(vMajor), b.getBoolAttr(bool(result)),
                       b.getBoolAttr(poolInKernel), interval,
                       b.getStrArrayAttr(roles),
                       b.getDenseI64ArrayAttr(gridExtents), P, vd, false));
        // The segments' summary grid: the state program over the V blocks
        // and, past them, the K / vb blocks of the transition.
        if (wide == 1 && P > 1)
          f->setAttr(kSummaryPassAttr,
                     StatePassAttr::get(
                         b.getContext(), c, tileChunk, kd, vb,
                         b.getBoolAttr(false), b.getBoolAttr(false),
                         b.getBoolAttr(false), 0, b.getStrArrayAttr(roles),
                         b.getDenseI64ArrayAttr(
                             {gridExtents[0], gridExtents[1],
                              (vd + (kd + vb - 1) / vb * vb) / vb}),
                         P, vd, true));
        // The intra-chunk grid: (sequence, chunk, head).
        int64_t tokensStatic = staticOr(dimOf(q, 1));
        int64_t chunksStatic =
            tokensStatic < 0 ? -1 : (tokensStatic + c - 1) / c;
        auto intra = IntraPassAttr::get(
            b.getContext(), c, tileChunk, sub, kd, vd,
            b.getStrArrayAttr(roles),
            b.getDenseI64ArrayAttr(
                {seqsStatic, chunksStatic, gridExtents[1]}),
            prologueDescription(b, config, bool(op.getGate()), channelGate,
                                bool(op.getBeta())),
            false);
        f->setAttr(kIntraPassAttr, intra);
      }
    }
    Block *body = forall.getBody();
    b.setInsertionPointToStart(body);
    Value n = forall.getInductionVar(0), head = forall.getInductionVar(1);
    Value segment;
    if (P > 1) {
      segment = arith::RemUIOp::create(b, n, tb.index(P));
      n = arith::DivUIOp::create(b, n, tb.index(P));
    }
    Value vCol = splitV ? arith::MulIOp::create(b, forall.getInductionVar(2),
                                                tb.index(vb))
                        : tb.index(0);
    ValueRange shared = forall.getRegionIterArgs();

    // Where program n's tokens are (segmented: its segment's).
    Value zero = tb.index(0), one = tb.index(1);
    SequenceLayout::Bounds where = sequences.bounds(b, n);
    if (P > 1)
      where = segmentBounds(b, where, segment, P, c * wide);
    Value row = where.row, start = where.start, length = where.length;
    Value qkHead = arith::DivUIOp::create(b, head, headsPerQueryHead);

    Value state =
        P > 1 ? tb.load(starts, {n, segment, head, zero, vCol}, {3, 4},
                        {kd, vb}, tb.index(kd))
        : op.getInitialState()
            ? loadState(tb, op.getInitialState(),
                        vMajor ? ArrayRef<OpFoldResult>{n, head, vCol, zero}
                               : ArrayRef<OpFoldResult>{n, head, zero, vCol},
                        2, vMajor, kd, vb)
            : tb.filled({kd, vb}, 0.0);
    Value aLog, dtBias;
    loadGateParams(tb, op.getALog(), op.getDtBias(), head, channelGate, kd,
                   aLog, dtBias);

    // This program's slices of the outputs ([length, V] and [NT, ., .]).
    auto oRegionType =
        RankedTensorType::get({ShapedType::kDynamic, vb}, oType.getElementType());
    Value oRegion = tensor::ExtractSliceOp::create(
        b, oRegionType, shared[0],
        ArrayRef<OpFoldResult>{row, start, head, vCol},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), length, b.getIndexAttr(1),
                               b.getIndexAttr(vb)},
        SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
    SmallVector<Value> iterInit = {state, oRegion};
    Value bRegion;
    SmallVector<OpFoldResult> bOffsets, bSizes;
    if (boundary) {
      auto type = denseType;
      int64_t rows = vMajor ? vb : kd, cols = vMajor ? kd : vb;
      bOffsets = {n, zero, head, vMajor ? OpFoldResult(vCol) : zero,
                  vMajor ? zero : OpFoldResult(vCol)};
      // NT from the program's view of the result (the destination's, in a
      // destination-style kernel).
      OpFoldResult nt = numBoundaries;
      if (isa<Value>(nt))
        nt = tensor::DimOp::create(b, shared.back(), 1).getResult();
      bSizes = {b.getIndexAttr(1), nt, b.getIndexAttr(1),
                b.getIndexAttr(rows), b.getIndexAttr(cols)};
      std::optional<int64_t> ntStatic = getConstantIntValue(nt);
      bRegion = tensor::ExtractSliceOp::create(
          b,
          RankedTensorType::get(
              {ntStatic ? *ntStatic : ShapedType::kDynamic, rows, cols},
              type.getElementType()),
          shared.back(), bOffsets, bSizes,
          SmallVector<OpFoldResult>(5, b.getIndexAttr(1)));
      Value zeroElt = arith::ConstantOp::create(
          b, b.getZeroAttr(type.getElementType()));
      bRegion = linalg::FillOp::create(b, ValueRange{zeroElt},
                                       ValueRange{bRegion})
                    .getResult(0);
      numBoundaries = nt;
      iterInit.push_back(bRegion);
    }

    Value cIdx = tb.index(c * wide);
    Value numChunks = arith::CeilDivUIOp::create(b, length, cIdx);
    auto loop = scf::ForOp::create(
        b, zero, numChunks, one, iterInit,
        [&](OpBuilder &nested, Location loc, Value chunkIdx, ValueRange iter) {
          ImplicitLocOpBuilder ib(loc, nested);
          TensorTileBuilder itb(ib);
          Value s = iter[0];
          Value local = arith::MulIOp::create(ib, chunkIdx, cIdx);
          Value t0 = arith::AddIOp::create(ib, start, local);
          Value valid = validRows(ib, cIdx, length, local);
          Value z = itb.index(0);

          SmallVector<Value> results;
          Value bAcc;
          if (boundary) {
            // Record the state before every `interval` tokens (the first
            // NT of them).
            Value atBoundary = arith::AndIOp::create(
                ib,
                arith::CmpIOp::create(
                    ib, arith::CmpIPredicate::eq,
                    arith::RemUIOp::create(ib, local, itb.index(interval)), z),
                arith::CmpIOp::create(
                    ib, arith::CmpIPredicate::ult,
                    arith::DivUIOp::create(ib, local, itb.index(interval)),
                    getValueOrCreateConstantIndexOp(ib, loc, numBoundaries)));
            auto ifOp = scf::IfOp::create(
                ib, atBoundary,
                [&](OpBuilder &tb2, Location l2) {
                  ImplicitLocOpBuilder bb(l2, tb2);
                  TensorTileBuilder btb(bb);
                  Value slot = arith::DivUIOp::create(
                      bb, local, btb.index(interval));
                  Value stored = storeState(btb, s, iter.back(),
                                            {slot, z, z}, 1, vMajor);
                  scf::YieldOp::create(bb, stored);
                },
                [&](OpBuilder &tb2, Location l2) {
                  scf::YieldOp::create(tb2, l2, iter.back());
                });
            bAcc = ifOp.getResult(0);
          }

          ChunkOutputs out;
          if (chunkParallel && wide > 1) {
            // The wide chunk's sub-chunks, each from its own workspace
            // rows; one past the sequence's end comes in empty (zero rows,
            // a decay of 1), read at the sequence's start so that nothing
            // is read out of bounds.
            SmallVector<IntraChunk> subs;
            SmallVector<Value> subValid;
            for (int64_t j = 0; j < wide; ++j) {
              Value lj = arith::AddIOp::create(ib, local, itb.index(j * c));
              Value present = arith::CmpIOp::create(
                  ib, arith::CmpIPredicate::ult, lj, length);
              Value vj = arith::SelectOp::create(
                  ib, present, validRows(ib, itb.index(c), length, lj), z);
              Value tj = arith::SelectOp::create(
                  ib, present, arith::AddIOp::create(ib, start, lj), start);
              IntraChunk in =
                  loadIntraChunk(itb, ws, row, tj, head, vCol, vj, c, kd, vb);
              if (in.decayLast)
                in.decayLast = itb.map(
                    {kd}, {in.decayLast},
                    [&](ImplicitLocOpBuilder &bb, ValueRange x,
                        ValueRange) -> Value {
                      return arith::SelectOp::create(
                          bb, present, x[0],
                          arith::ConstantOp::create(bb, bb.getF32FloatAttr(1.0)));
                    });
              subs.push_back(in);
              subValid.push_back(vj);
            }
            WideStepOutputs w = emitWideStateStep(itb, subs, s);
            Value oAcc = iter[1];
            for (int64_t j = 0; j < wide; ++j) {
              Value lj = arith::AddIOp::create(ib, local, itb.index(j * c));
              oAcc = itb.store(w.o[j], oAcc, {lj, z}, {0, 1}, subValid[j]);
            }
            results = {w.nextState, oAcc};
            if (boundary)
              results.push_back(bAcc);
            scf::YieldOp::create(ib, results);
            return;
          }
          if (chunkParallel) {
            out = emitStateStep(
                itb, loadIntraChunk(itb, ws, row, t0, head, vCol, valid, c, kd,
                                    vb),
                s);
          } else {
          ChunkInputs in;
          in.validRows = valid;
          in.q = itb.load(q, {row, t0, qkHead, z}, {1, 3}, {c, kd}, valid);
          in.k = itb.load(op.getK(), {row, t0, qkHead, z}, {1, 3}, {c, kd},
                          valid);
          in.v = itb.load(v, {row, t0, head, vCol}, {1, 3}, {c, vb}, valid);
          if (Value g = op.getGate()) {
            if (channelGate) {
              in.gate = itb.load(g, {row, t0, head, z}, {1, 3}, {c, kd}, valid);
            } else {
              Value gh = itb.load(g, {row, t0, head}, {1}, {c}, valid);
              in.gate = itb.map({c, kd}, {perRow(gh)},
                                [](ImplicitLocOpBuilder &, ValueRange s,
                                   ValueRange) { return s[0]; });
            }
          }
          if (Value beta = op.getBeta())
            in.beta = itb.load(beta, {row, t0, head}, {1}, {c}, valid);
          in.aLog = aLog;
          in.dtBias = dtBias;

          out = emitGatedDeltaChunk(itb, config, in, s);
          }
          Value oNext = itb.store(out.o, iter[1], {local, z}, {0, 1}, valid);
          results = {out.nextState, oNext};
          if (boundary)
            results.push_back(bAcc);
          scf::YieldOp::create(ib, results);
        });

    // Publish this program's slices.
    Value lastState = loop.getResult(0);
    b.setInsertionPoint(forall.getTerminator());
    Value finalTile;
    if (finalState && P == 1) {
      auto type = cast<RankedTensorType>(finalState.getType());
      Value t = vMajor ? tb.transpose(lastState) : lastState;
      finalTile = tb.convert(t, type.getElementType());
    }
    b.setInsertionPointToStart(forall.getTerminator().getBody());
    tensor::ParallelInsertSliceOp::create(
        b, loop.getResult(1), shared[0],
        ArrayRef<OpFoldResult>{row, start, head, vCol},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), length, b.getIndexAttr(1),
                               b.getIndexAttr(vb)},
        SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
    if (finalState && P == 1) {
      tensor::ParallelInsertSliceOp::create(
          b, finalTile, shared[1],
          vMajor ? ArrayRef<OpFoldResult>{n, head, vCol, zero}
                 : ArrayRef<OpFoldResult>{n, head, zero, vCol},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                                 b.getIndexAttr(vMajor ? vb : kd),
                                 b.getIndexAttr(vMajor ? kd : vb)},
          SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
    }
    if (boundary)
      tensor::ParallelInsertSliceOp::create(
          b, loop.getResults().back(), shared.back(), bOffsets, bSizes,
          SmallVector<OpFoldResult>(5, b.getIndexAttr(1)));

    // Results in op order: o, final_state?, boundary_states?.
    SmallVector<Value> replacements;
    replacements.push_back(forall.getResult(0));
    if (finalState)
      replacements.push_back(P > 1 ? segmentedFinal : forall.getResult(1));
    if (result) {
      b.setInsertionPointAfter(forall);
      replacements.push_back(
          table && !poolInKernel
              ? copyIntoSlots(b, tb, op, sequences, forall.getResults().back(),
                              interval)
              : forall.getResults().back());
    }
    rewriter.replaceOp(op, replacements);
    return success();
  }

  /// The segments' first two grids. The state pass is affine in the state
  /// (SPEC.md section 3): over a segment, S_end = A S_start + B. The summary
  /// grid, (sequence x segment, head, (V + K) / vb), runs every segment's
  /// chunk steps from a zero state on the V blocks (B, the offset) and,
  /// past them, from the identity's columns with U taken as zero (A, the
  /// K x K transition), into `summary` [rows, P, HV, K, V + KT] (KT: K
  /// rounded up to a multiple of vb; the columns past K stay zero). The combine
  /// grid, (sequence, head, V block), walks the segments in order from the
  /// initial state: start_s = S; S = A_s S + B_s; it writes every start
  /// into `starts` [rows, P, HV, K, V] and the last S as the final state.
  /// (rows: B, or N + 1 with varlen: workspace sizes are argument sizes.)
  /// Returns (starts, final state or null).
  std::pair<Value, Value>
  emitSegmentScan(ImplicitLocOpBuilder &b, TensorTileBuilder &tb,
                  GatedDeltaOp op, const IntraWorkspaces &ws,
                  const SequenceLayout &sequences, OpFoldResult hv, int64_t P,
                  int64_t c, int64_t step, int64_t kd, int64_t vd,
                  int64_t vb) const {
    Value carrier = op.getCuSeqlens() ? op.getCuSeqlens() : op.getQ();
    OpFoldResult rows = sizeOf(b, carrier, 0);
    Type f32 = b.getF32Type();
    auto wsType = [&](int64_t width) {
      return RankedTensorType::get(
          {dimOf(carrier, 0), P, dimOf(op.getV(), 2), kd, width}, f32);
    };
    Value zero = tb.index(0), one = tb.index(1);
    OpFoldResult unit = b.getIndexAttr(1);
    const bool vMajor = op.getStateLayout() == StateLayout::v_major;

    // The summary grid.
    const int64_t kt = (kd + vb - 1) / vb * vb;
    Value summary = tb.emptyOfType(wsType(vd + kt), {rows, {}, hv, {}, {}});
    auto sg = scf::ForallOp::create(
        b,
        ArrayRef<OpFoldResult>{timesSegments(b, sequences.gridSize(), P), hv,
                               b.getIndexAttr((vd + kt) / vb)},
        ValueRange{summary}, std::nullopt);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(sg.getBody());
      Value p = sg.getInductionVar(0), head = sg.getInductionVar(1);
      Value seg = arith::RemUIOp::create(b, p, tb.index(P));
      Value n = arith::DivUIOp::create(b, p, tb.index(P));
      Value col = arith::MulIOp::create(b, sg.getInductionVar(2), tb.index(vb));
      Value transition = arith::CmpIOp::create(b, arith::CmpIPredicate::uge,
                                               col, tb.index(vd));
      Value uCol = arith::SelectOp::create(b, transition, zero, col);
      Value diag = arith::SelectOp::create(
          b, transition, arith::SubIOp::create(b, col, tb.index(vd)), zero);
      SequenceLayout::Bounds where =
          segmentBounds(b, sequences.bounds(b, n), seg, P, step);
      // The identity's columns [col - V, col - V + vb) or zeros.
      Value init = tb.map(
          {kd, vb}, {tb.filled({kd, vb}, 0.0)},
          [&](ImplicitLocOpBuilder &bb, ValueRange, ValueRange ivs) -> Value {
            Value onDiag = arith::CmpIOp::create(
                bb, arith::CmpIPredicate::eq, ivs[0],
                arith::AddIOp::create(bb, ivs[1], diag));
            return arith::SelectOp::create(
                bb, arith::AndIOp::create(bb, transition, onDiag),
                arith::ConstantOp::create(bb, bb.getF32FloatAttr(1.0)),
                arith::ConstantOp::create(bb, bb.getF32FloatAttr(0.0)));
          });
      Value cIdx = tb.index(c);
      Value numChunks = arith::CeilDivUIOp::create(b, where.length, cIdx);
      auto loop = scf::ForOp::create(
          b, zero, numChunks, one, ValueRange{init},
          [&](OpBuilder &nested, Location loc, Value i, ValueRange iter) {
            ImplicitLocOpBuilder ib(loc, nested);
            TensorTileBuilder itb(ib);
            Value local = arith::MulIOp::create(ib, i, cIdx);
            Value t0 = arith::AddIOp::create(ib, where.start, local);
            Value valid = validRows(ib, cIdx, where.length, local);
            IntraChunk in = loadIntraChunk(itb, ws, where.row, t0, head, uCol,
                                           valid, c, kd, vb);
            in.u = itb.map({c, vb}, {in.u},
                           [&](ImplicitLocOpBuilder &bb, ValueRange x,
                               ValueRange) -> Value {
                             return arith::SelectOp::create(
                                 bb, transition,
                                 arith::ConstantOp::create(
                                     bb, bb.getF32FloatAttr(0.0)),
                                 x[0]);
                           });
            ChunkOutputs out = emitStateStep(itb, in, iter[0]);
            scf::YieldOp::create(ib, out.nextState);
          });
      b.setInsertionPointToStart(sg.getTerminator().getBody());
      tensor::ParallelInsertSliceOp::create(
          b, loop.getResult(0), sg.getRegionIterArgs()[0],
          ArrayRef<OpFoldResult>{n, seg, head, zero, col},
          ArrayRef<OpFoldResult>{unit, unit, unit, b.getIndexAttr(kd),
                                 b.getIndexAttr(vb)},
          SmallVector<OpFoldResult>(5, b.getIndexAttr(1)));
    }
    summary = sg.getResult(0);

    // The combine grid, over V blocks of its own: 16 columns where V takes
    // them (a program's scan is P products of the K x K transition with its
    // block, so narrow blocks give more programs; few (sequence, head)
    // units are why a call has segments at all).
    vb = vd % 16 == 0 ? 16 : vb;
    const bool splitV = vb < vd;
    SmallVector<Value> outs = {
        tb.emptyOfType(wsType(vd), {rows, {}, hv, {}, {}})};
    Value finalState = op.getFinalState();
    if (finalState)
      outs.push_back(tb.emptyOfType(
          cast<RankedTensorType>(finalState.getType()),
          {sequences.numSequences(), hv, {}, {}}));
    SmallVector<OpFoldResult> grid = {sequences.gridSize(), hv};
    if (splitV)
      grid.push_back(b.getIndexAttr(vd / vb));
    auto cg = scf::ForallOp::create(b, grid, outs, std::nullopt);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(cg.getBody());
      Value n = cg.getInductionVar(0), head = cg.getInductionVar(1);
      Value vCol = splitV ? arith::MulIOp::create(b, cg.getInductionVar(2),
                                                  tb.index(vb))
                          : zero;
      Value state =
          op.getInitialState()
              ? loadState(tb, op.getInitialState(),
                          vMajor ? ArrayRef<OpFoldResult>{n, head, vCol, zero}
                                 : ArrayRef<OpFoldResult>{n, head, zero, vCol},
                          2, vMajor, kd, vb)
              : tb.filled({kd, vb}, 0.0);
      ValueRange shared = cg.getRegionIterArgs();
      // The program's [P, K, vb] region of the starts: a view of the grid's
      // output, written in place. Each step reads its start state back from
      // it, so no tile lives from one step to the next (on GPUs a tile is a
      // shared-memory slot, and a slot carried around a loop is what their
      // arena does not hold).
      auto regionType = RankedTensorType::get({P, kd, vb}, f32);
      Value region = tensor::ExtractSliceOp::create(
          b, regionType, shared[0],
          ArrayRef<OpFoldResult>{n, zero, head, zero, vCol},
          ArrayRef<OpFoldResult>{unit, b.getIndexAttr(P), unit,
                                 b.getIndexAttr(kd), b.getIndexAttr(vb)},
          SmallVector<OpFoldResult>(5, b.getIndexAttr(1)));
      auto put = [&](ImplicitLocOpBuilder &ib, Value tile, Value into,
                     Value s) -> Value {
        return tensor::InsertSliceOp::create(
            ib, tile, into, ArrayRef<OpFoldResult>{s, zero, zero},
            ArrayRef<OpFoldResult>{unit, ib.getIndexAttr(kd),
                                   ib.getIndexAttr(vb)},
            SmallVector<OpFoldResult>(3, ib.getIndexAttr(1)));
      };
      // S_{s+1} = A_s S_s + B_s from the summary's [K, V + KT] rows.
      // A_s S in key blocks of 32 where K takes them: a [K, 32] slice of
      // the transition at a time, not all [K, K] of it (64 KB at K = 128:
      // all of an AMD block's LDS).
      const int64_t kb = kd % 32 == 0 ? 32 : kd;
      auto step = [&](ImplicitLocOpBuilder &ib, TensorTileBuilder &itb,
                      Value from, Value s) -> Value {
        Value z = itb.index(0), kIdx = itb.index(kd);
        Value acc = itb.load(summary, {n, s, head, z, vCol}, {3, 4}, {kd, vb},
                             kIdx);
        for (int64_t k0 = 0; k0 < kd; k0 += kb) {
          Value S = itb.load(from, {s, itb.index(k0), z}, {1, 2}, {kb, vb},
                             itb.index(kb));
          Value A = itb.load(summary, {n, s, head, z, itb.index(vd + k0)},
                             {3, 4}, {kd, kb}, kIdx);
          acc = itb.matmulAdd(acc, A, S);
        }
        return acc;
      };
      region = put(b, state, region, zero);
      auto loop = scf::ForOp::create(
          b, zero, tb.index(P - 1), one, ValueRange{region},
          [&](OpBuilder &nested, Location loc, Value s, ValueRange iter) {
            ImplicitLocOpBuilder ib(loc, nested);
            TensorTileBuilder itb(ib);
            Value next = step(ib, itb, iter[0], s);
            scf::YieldOp::create(
                ib, put(ib, next, iter[0],
                        arith::AddIOp::create(ib, s, itb.index(1))));
          });
      region = loop.getResult(0);
      Value last;
      if (finalState)
        last = step(b, tb, region, tb.index(P - 1));
      Value finalTile;
      if (finalState) {
        auto type = cast<RankedTensorType>(finalState.getType());
        finalTile = tb.convert(vMajor ? tb.transpose(last) : last,
                               type.getElementType());
      }
      b.setInsertionPointToStart(cg.getTerminator().getBody());
      tensor::ParallelInsertSliceOp::create(
          b, region, shared[0],
          ArrayRef<OpFoldResult>{n, zero, head, zero, vCol},
          ArrayRef<OpFoldResult>{unit, b.getIndexAttr(P), unit,
                                 b.getIndexAttr(kd), b.getIndexAttr(vb)},
          SmallVector<OpFoldResult>(5, b.getIndexAttr(1)));
      if (finalState)
        tensor::ParallelInsertSliceOp::create(
            b, finalTile, shared[1],
            vMajor ? ArrayRef<OpFoldResult>{n, head, vCol, zero}
                   : ArrayRef<OpFoldResult>{n, head, zero, vCol},
            ArrayRef<OpFoldResult>{unit, unit,
                                   b.getIndexAttr(vMajor ? vb : kd),
                                   b.getIndexAttr(vMajor ? kd : vb)},
            SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
    }
    return {cg.getResult(0), finalState ? cg.getResult(1) : Value()};
  }

  /// The pool of a boundary_indices op from its dense boundary states
  /// ([N, NB, HV, ., .]): boundary j of sequence n into slot table[n, j]
  /// where that is a slot (0 <= slot < S) and j * interval < the sequence's
  /// length; the other slots zero. A loop nest after the grid, in order.
  Value copyIntoSlots(ImplicitLocOpBuilder &b, TensorTileBuilder &tb,
                      GatedDeltaOp op, const SequenceLayout &sequences,
                      Value dense, int64_t interval) const {
    Value table = op.getBoundaryIndices();
    auto poolType = cast<RankedTensorType>(op.getBoundaryStates().getType());
    OpFoldResult slots = b.getIndexAttr(poolType.getDimSize(0));
    if (poolType.isDynamicDim(0))
      slots = tensor::DimOp::create(b, kernelDestination(op.getBoundaryStates()), 0)
                  .getResult();
    Value zeroElt = arith::ConstantOp::create(
        b, b.getZeroAttr(poolType.getElementType()));
    Value pool = linalg::FillOp::create(
                     b, ValueRange{zeroElt},
                     ValueRange{tb.emptyOfType(poolType,
                                               {slots, sizeOf(b, dense, 2),
                                                {}, {}})})
                     .getResult(0);
    Value zero = tb.index(0), one = tb.index(1);
    Value slotCount = getValueOrCreateConstantIndexOp(b, b.getLoc(), slots);
    Value nb = getValueOrCreateConstantIndexOp(b, b.getLoc(), sizeOf(b, table, 1));
    auto seqLoop = scf::ForOp::create(
        b, zero, sequences.numSequences(), one, ValueRange{pool},
        [&](OpBuilder &nb1, Location loc, Value n, ValueRange iter) {
          ImplicitLocOpBuilder ib(loc, nb1);
          Value length = sequences.bounds(ib, n).length;
          auto entryLoop = scf::ForOp::create(
              ib, zero, nb, one, iter,
              [&](OpBuilder &nb2, Location loc2, Value j, ValueRange iter2) {
                ImplicitLocOpBuilder jb(loc2, nb2);
                Value raw = tensor::ExtractOp::create(jb, table, ValueRange{n, j});
                Value slot64 =
                    raw.getType().isInteger(64)
                        ? raw
                        : Value(arith::ExtSIOp::create(jb, jb.getI64Type(), raw));
                Value nonNeg = arith::CmpIOp::create(
                    jb, arith::CmpIPredicate::sge, slot64,
                    arith::ConstantIntOp::create(jb, 0, 64));
                Value slot = arith::IndexCastOp::create(jb, jb.getIndexType(), slot64);
                Value keep = arith::AndIOp::create(
                    jb, nonNeg,
                    arith::AndIOp::create(
                        jb,
                        arith::CmpIOp::create(jb, arith::CmpIPredicate::ult,
                                              slot, slotCount),
                        arith::CmpIOp::create(
                            jb, arith::CmpIPredicate::ult,
                            arith::MulIOp::create(
                                jb, j, arith::ConstantIndexOp::create(jb, interval)),
                            length)));
                auto ifOp = scf::IfOp::create(
                    jb, keep,
                    [&](OpBuilder &tb3, Location l3) {
                      ImplicitLocOpBuilder kb(l3, tb3);
                      auto entryType = RankedTensorType::get(
                          {ShapedType::kDynamic, poolType.getDimSize(2),
                           poolType.getDimSize(3)},
                          poolType.getElementType());
                      Value heads = tensor::DimOp::create(kb, dense, 2);
                      Value entry = tensor::ExtractSliceOp::create(
                          kb, entryType, dense,
                          ArrayRef<OpFoldResult>{n, j, kb.getIndexAttr(0),
                                                 kb.getIndexAttr(0),
                                                 kb.getIndexAttr(0)},
                          ArrayRef<OpFoldResult>{
                              kb.getIndexAttr(1), kb.getIndexAttr(1), heads,
                              kb.getIndexAttr(poolType.getDimSize(2)),
                              kb.getIndexAttr(poolType.getDimSize(3))},
                          SmallVector<OpFoldResult>(5, kb.getIndexAttr(1)));
                      Value updated = tensor::InsertSliceOp::create(
                          kb, entry, iter2[0],
                          ArrayRef<OpFoldResult>{slot, kb.getIndexAttr(0),
                                                 kb.getIndexAttr(0),
                                                 kb.getIndexAttr(0)},
                          ArrayRef<OpFoldResult>{
                              kb.getIndexAttr(1), heads,
                              kb.getIndexAttr(poolType.getDimSize(2)),
                              kb.getIndexAttr(poolType.getDimSize(3))},
                          SmallVector<OpFoldResult>(4, kb.getIndexAttr(1)));
                      scf::YieldOp::create(kb, updated);
                    },
                    [&](OpBuilder &tb3, Location l3) {
                      scf::YieldOp::create(tb3, l3, iter2[0]);
                    });
                scf::YieldOp::create(jb, ifOp.getResults());
              });
          scf::YieldOp::create(ib, entryLoop.getResults());
        });
    return seqLoop.getResult(0);
  }

  int64_t chunk, subChunk, vBlock, vBlockF32;
  bool chunkParallel;
  /// Boundary states into pool slots (boundary_indices): written by the
  /// target's state kernel (the tile program leaves the pool alone), else
  /// recorded densely and copied into their slots after the grid.
  bool slotsInKernel;
  bool subChunkSteps;
  /// With sub-chunk steps: the state pass steps the op's whole chunk, its
  /// sub-chunks coupled in the step (emitWideStateStep).
  bool wideSteps;
  /// Segments per sequence for ops whose #kda.tile sets none (the pass
  /// checked that the op takes them).
  int64_t segments;
};

//===----------------------------------------------------------------------===//
// kda.decode_step
//===----------------------------------------------------------------------===//

/// One token step per (sequence, head) on its pool slot: the chunk step with
/// C = 1. Programs (sequence, head) are a loop nest here, marked
/// `kda.program_loop`: the CPU runs it in order, which keeps the pool update
/// in place after bufferization and makes skipped sequences a plain branch;
/// GPU targets turn the marked nest into their grid (slots are distinct, so
/// programs are independent).
struct TileDecodeStep : OpRewritePattern<DecodeStepOp> {
  TileDecodeStep(MLIRContext *ctx, int64_t vBlock)
      : OpRewritePattern(ctx), vBlock(vBlock) {}

  LogicalResult matchAndRewrite(DecodeStepOp op,
                                PatternRewriter &rewriter) const override {
    Value q = op.getQ(), v = op.getV();
    // One token per sequence ([N, H, K]) or T of them ([N, T, H, K]): the
    // leading axes are (N) or (N, T), and a tile row is one token.
    const bool multi = cast<RankedTensorType>(q.getType()).getRank() == 4;
    const int64_t row = multi ? 1 : 0, last = row + 2;
    if (failed(requireStatic(rewriter, op, {{q, last}, {v, last}})))
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    TensorTileBuilder tb(b);
    const int64_t kd = dimOf(q, last), vd = dimOf(v, last);
    const bool vMajor = op.getStateLayout() == StateLayout::v_major;
    // V splits over programs like the chunk kernel's.
    std::optional<int64_t> vBlocked = valueBlock(op.getTile(), vBlock, vd);
    if (!vBlocked)
      return rewriter.notifyMatchFailure(op, "v_block must divide V");
    const int64_t vb = *vBlocked;
    ChunkConfig config = chunkConfigOf(op, 1, 1, kd, vb);
    bool channelGate = op.getGateGranularity() == GateGranularity::channel;
    Value zero = tb.index(0), one = tb.index(1);
    Value hv = getValueOrCreateConstantIndexOp(b, b.getLoc(), sizeOf(b, v, row + 1));
    Value headsPerQueryHead = arith::DivUIOp::create(
        b, hv, getValueOrCreateConstantIndexOp(b, b.getLoc(), sizeOf(b, q, row + 1)));
    Value tokens = multi ? dimValue(b, q, 1) : one;

    Value numSeqs = dimValue(b, q, 0);
    auto outer = scf::ForOp::create(
        b, zero, numSeqs, one, ValueRange{op.getOInit(), op.getStatePool()},
        [&](OpBuilder &n1, Location l1, Value n, ValueRange seqIter) {
          ImplicitLocOpBuilder b1(l1, n1);
          auto heads = scf::ForOp::create(
              b1, zero, hv, one, seqIter,
              [&](OpBuilder &nh, Location lh, Value head, ValueRange headIter) {
                ImplicitLocOpBuilder bh(lh, nh);
                auto blocks = scf::ForOp::create(
                    bh, zero, tb.index(vd / vb), one, headIter,
                    [&](OpBuilder &n2, Location l2, Value block,
                        ValueRange iter) {
                ImplicitLocOpBuilder b2(l2, n2);
                Value vCol = arith::MulIOp::create(b2, block, tb.index(vb));
                // Offsets of token t of sequence n, then the given tail.
                auto at = [&](Value t, std::initializer_list<OpFoldResult> tail) {
                  SmallVector<OpFoldResult> o = {n};
                  if (multi)
                    o.push_back(t);
                  o.append(tail.begin(), tail.end());
                  return o;
                };
                auto indexAt = [&](ImplicitLocOpBuilder &bb, Value t) {
                  SmallVector<Value> i = {n};
                  if (multi)
                    i.push_back(t);
                  return tensor::ExtractOp::create(bb, op.getIndices(), i)
                      .getResult();
                };
                // The slot read (read_indices, else indices (of the first
                // token)) and those written (indices; with read_indices or
                // several tokens, negative means not kept).
                Value rawSlot =
                    op.getReadIndices()
                        ? tensor::ExtractOp::create(b2, op.getReadIndices(), n)
                              .getResult()
                        : indexAt(b2, zero);
                Value zeroInt = arith::ConstantOp::create(
                    b2, b2.getZeroAttr(rawSlot.getType()));
                Value skip = arith::CmpIOp::create(
                    b2, arith::CmpIPredicate::slt, rawSlot, zeroInt);
                auto ifOp = scf::IfOp::create(
                    b2, skip,
                    [&](OpBuilder &n3, Location l3) {
                      // Skipped sequence: zero output rows, pool untouched.
                      ImplicitLocOpBuilder b3(l3, n3);
                      auto rows = scf::ForOp::create(
                          b3, zero, tokens, one, ValueRange{iter[0]},
                          [&](OpBuilder &n4, Location l4, Value t,
                              ValueRange oIter) {
                            ImplicitLocOpBuilder b4(l4, n4);
                            TensorTileBuilder tb4(b4);
                            Value zeros = tb4.filled({1, vb}, 0.0);
                            Value o = tb4.store(zeros, oIter[0],
                                                at(t, {head, vCol}),
                                                {row, last}, tb4.index(1));
                            scf::YieldOp::create(b4, ValueRange{o});
                          });
                      scf::YieldOp::create(
                          b3, ValueRange{rows.getResult(0), iter[1]});
                    },
                    [&](OpBuilder &n3, Location l3) {
                      ImplicitLocOpBuilder b3(l3, n3);
                      TensorTileBuilder tb3(b3);
                      Value slot = arith::IndexCastOp::create(
                          b3, b3.getIndexType(), rawSlot);
                      Value z = tb3.index(0), o1 = tb3.index(1);
                      Value qkHead =
                          arith::DivUIOp::create(b3, head, headsPerQueryHead);
                      auto stateAt = [&](Value s) {
                        return vMajor
                                   ? SmallVector<OpFoldResult>{s, head, vCol, z}
                                   : SmallVector<OpFoldResult>{s, head, z, vCol};
                      };
                      // The start state: from read_pool where the op has
                      // one, else from the pool itself.
                      Value source = op.getReadPool() ? op.getReadPool()
                                                      : iter[1];
                      Value s0 = loadState(tb3, source, stateAt(slot), 2,
                                           vMajor, kd, vb);
                      auto steps = scf::ForOp::create(
                          b3, zero, tokens, one,
                          ValueRange{iter[0], iter[1], s0},
                          [&](OpBuilder &n4, Location l4, Value t,
                              ValueRange tIter) {
                            ImplicitLocOpBuilder b4(l4, n4);
                            TensorTileBuilder tb4(b4);
                            ChunkInputs in;
                            in.validRows = o1;
                            in.q = tb4.load(q, at(t, {qkHead, z}), {row, last},
                                            {1, kd}, o1);
                            in.k = tb4.load(op.getK(), at(t, {qkHead, z}),
                                            {row, last}, {1, kd}, o1);
                            in.v = tb4.load(v, at(t, {head, vCol}),
                                            {row, last}, {1, vb}, o1);
                            if (Value g = op.getGate()) {
                              if (channelGate) {
                                in.gate = tb4.load(g, at(t, {head, z}),
                                                   {row, last}, {1, kd}, o1);
                              } else {
                                Value gh = tb4.load(g, at(t, {head}), {row},
                                                    {1}, o1);
                                in.gate = tb4.map(
                                    {1, kd}, {perRow(gh)},
                                    [](ImplicitLocOpBuilder &, ValueRange s,
                                       ValueRange) { return s[0]; });
                              }
                            }
                            if (Value beta = op.getBeta())
                              in.beta =
                                  tb4.load(beta, at(t, {head}), {row}, {1}, o1);
                            loadGateParams(tb4, op.getALog(), op.getDtBias(),
                                           head, channelGate, kd, in.aLog,
                                           in.dtBias);
                            ChunkOutputs out =
                                emitGatedDeltaChunk(tb4, config, in, tIter[2]);
                            Value o = tb4.store(out.o, tIter[0],
                                                at(t, {head, vCol}),
                                                {row, last}, o1);
                            if (!op.getReadIndices() && !op.getReadPool() &&
                                !multi) {
                              // In place: the slot read is the one written.
                              Value pool = storeState(tb4, out.nextState,
                                                      tIter[1], stateAt(slot),
                                                      2, vMajor);
                              scf::YieldOp::create(
                                  b4, ValueRange{o, pool, out.nextState});
                              return;
                            }
                            Value rawDest = indexAt(b4, t);
                            Value keep = arith::CmpIOp::create(
                                b4, arith::CmpIPredicate::sge, rawDest,
                                arith::ConstantOp::create(
                                    b4, b4.getZeroAttr(rawDest.getType())));
                            auto write = scf::IfOp::create(
                                b4, keep,
                                [&](OpBuilder &n5, Location l5) {
                                  ImplicitLocOpBuilder b5(l5, n5);
                                  TensorTileBuilder tb5(b5);
                                  Value dest = arith::IndexCastOp::create(
                                      b5, b5.getIndexType(), rawDest);
                                  scf::YieldOp::create(
                                      b5, storeState(tb5, out.nextState,
                                                     tIter[1], stateAt(dest),
                                                     2, vMajor));
                                },
                                [&](OpBuilder &n5, Location l5) {
                                  scf::YieldOp::create(n5, l5, tIter[1]);
                                });
                            scf::YieldOp::create(
                                b4, ValueRange{o, write.getResult(0),
                                               out.nextState});
                          });
                      scf::YieldOp::create(
                          b3, ValueRange{steps.getResult(0),
                                         steps.getResult(1)});
                    });
                scf::YieldOp::create(b2, ifOp.getResults());
                    });
                blocks->setAttr(kProgramLoopAttr, bh.getUnitAttr());
                scf::YieldOp::create(bh, blocks.getResults());
              });
          heads->setAttr(kProgramLoopAttr, b1.getUnitAttr());
          scf::YieldOp::create(b1, heads.getResults());
        });
    outer->setAttr(kProgramLoopAttr, b.getUnitAttr());
    // What the programs compute, for a target's own decode kernel
    // (GpuDecodeRegisters.cpp); the loop nest above stays the definition.
    if (auto f = outer->getParentOfType<func::FuncOp>()) {
      auto decode = DecodePassAttr::get(
          b.getContext(), kd, vd, b.getBoolAttr(vMajor), b.getBoolAttr(multi),
          prologueDescription(b, config, bool(op.getGate()), channelGate,
                              bool(op.getBeta())));
      f->setAttr(kDecodePassAttr, decode);
    }
    rewriter.replaceOp(op, outer.getResults());
    return success();
  }

  int64_t vBlock;
};

//===----------------------------------------------------------------------===//
// kda.window_attention
//===----------------------------------------------------------------------===//

struct TileWindowAttention : OpRewritePattern<WindowAttentionOp> {
  TileWindowAttention(MLIRContext *ctx, int64_t chunk)
      : OpRewritePattern(ctx), chunk(chunk) {}

  LogicalResult matchAndRewrite(WindowAttentionOp op,
                                PatternRewriter &rewriter) const override {
    Value q = op.getQ(), v = op.getV();
    if (failed(requireStatic(rewriter, op, {{q, 3}, {v, 3}})))
      return failure();
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    auto [c, sub] = tileSizes(op.getTile(), std::max<int64_t>(chunk, 16), 16);
    (void)sub;
    // What the programs compute, for a target's own window kernel
    // (GpuWindowRegisters.cpp); the tile program stays the definition. Only
    // outlined kernels (one op each) carry it.
    if (auto f = op->getParentOfType<func::FuncOp>();
        f && f->hasAttr("kda.kernel")) {
      const int64_t kd = cast<RankedTensorType>(q.getType()).getDimSize(3);
      double scale = op.getScale() ? op.getScale()->convertToDouble()
                                   : 1.0 / std::sqrt(double(kd));
      int64_t window =
          op.getWindowSizes()
              ? 0
              : static_cast<int64_t>(std::min<uint64_t>(
                    *op.getWindow(), uint64_t(1) << 62));
      f->setAttr(kWindowPassAttr,
                 WindowPassAttr::get(
                     b.getContext(), kd,
                     cast<RankedTensorType>(v.getType()).getDimSize(3), window,
                     b.getF64FloatAttr(scale),
                     b.getBoolAttr(static_cast<bool>(op.getCuSeqlens())),
                     op.getEarlierKeys() ? b.getBoolAttr(true) : BoolAttr()));
    }
    rewriter.replaceOp(op, emitWindowAttention(b, op, c));
    return success();
  }

  int64_t chunk;
};

/// kda.gated_delta_grad: the gradient derived from the forward's tile
/// algorithm. With the forward's states (chunk_states, what a GPU call
/// always has) it is the forward's grids transposed (rewriteSplit below).
/// Without them (the CPU only) it is GatedDeltaBackward.h's
/// emitChunkBackward per chunk, as programs:
///
///   scf.forall (n, hv, vb) in (N, HV, V / v_block)   one program per
///                                          (sequence, value head, V block)
///     scf.for over the chunks keeping each one's state
///     scf.for c = last .. 0                reverse: carries dS [K, v_block]
///       tiles = load chunk c (zero past the end); h = the state before it
///       grads = the chunk step's adjoint (dO rows of c, dS)
///       store the rows' gradients; dS = the state's gradient
///     store dh0 = dS; this program's dA_log, ddt_bias partials
///   scf.forall grids summing the partials: dq and dk over each q / k
///   head's value heads and V blocks, d_gate and d_beta over V blocks, dA_log
///   and ddt_bias over sequences and V blocks
///
/// The V columns of the state evolve independently given q, k, the gate and
/// beta, so the loss is a sum over V blocks and each block's program gives
/// its share of the gradients of what the blocks share (q, k, gate, beta,
/// the gate's parameters) and all of its own (v, dh0). Every program writes
/// only its own rows and slots: the sums across programs are grids of their
/// own.
/// The gate's parameters of value head `head` as the gradient's tape sees
/// them: A_log and a head-wise dt_bias are f32 scalars the gate's map bodies
/// capture (their gradients: [1] tiles); a channel-wise dt_bias is a [K]
/// tile.
struct GradGateParams {
  Value aLog, dtBias, dtScalar;
};

GradGateParams gradGateParams(TensorTileBuilder &tb, GatedDeltaGradOp op,
                              Value head, bool channelGate, int64_t kd) {
  ImplicitLocOpBuilder &b = tb.builder();
  GradGateParams p;
  if (Value a = op.getALog())
    p.aLog = extractF32(b, a, head);
  if (Value dt = op.getDtBias()) {
    if (channelGate)
      p.dtBias = tb.load(dt, {head, b.getIndexAttr(0)}, {1}, {kd},
                         tb.index(kd));
    else
      p.dtScalar = extractF32(b, dt, head);
  }
  return p;
}

/// A chunk's inputs for the gradient's tape: rows [t0, t0 + c) of batch row
/// `row` (the first `valid` real, the others zero), V columns [vCol, vCol +
/// width). The loads are the leaves (`leaves` gets them: the values whose
/// gradients are wanted); what is built from them (the head-wise gate's
/// broadcast, a head-wise dt_bias as a [K] tile) is built on `on`, the tape,
/// so that it is differentiated through.
ChunkInputs gradChunkInputs(TensorTileBuilder &lb, TileBuilder &on,
                            GatedDeltaGradOp op, const GradGateParams &gp,
                            Value row, Value t0, Value qkHead, Value head,
                            Value vCol, int64_t width, Value valid, int64_t c,
                            int64_t kd, bool channelGate,
                            ChunkInputs &leaves) {
  Value z = lb.index(0);
  ChunkInputs ci;
  ci.validRows = leaves.validRows = valid;
  ci.q = leaves.q =
      lb.load(op.getQ(), {row, t0, qkHead, z}, {1, 3}, {c, kd}, valid);
  ci.k = leaves.k =
      lb.load(op.getK(), {row, t0, qkHead, z}, {1, 3}, {c, kd}, valid);
  ci.v = leaves.v =
      lb.load(op.getV(), {row, t0, head, vCol}, {1, 3}, {c, width}, valid);
  if (Value g = op.getGate()) {
    if (channelGate) {
      ci.gate = leaves.gate =
          lb.load(g, {row, t0, head, z}, {1, 3}, {c, kd}, valid);
    } else {
      leaves.gate = lb.load(g, {row, t0, head}, {1}, {c}, valid);
      ci.gate = on.map({c, kd}, {perRow(leaves.gate)},
                       [](ImplicitLocOpBuilder &, ValueRange s, ValueRange) {
                         return s[0];
                       });
    }
  }
  if (Value beta = op.getBeta())
    ci.beta = leaves.beta = lb.load(beta, {row, t0, head}, {1}, {c}, valid);
  ci.aLog = leaves.aLog = gp.aLog;
  if (gp.dtBias) {
    ci.dtBias = leaves.dtBias = gp.dtBias;
  } else if (Value dt = gp.dtScalar) {
    leaves.dtBias = dt;
    ci.dtBias = on.map({kd}, {}, [dt](ImplicitLocOpBuilder &, ValueRange,
                                      ValueRange) { return dt; });
  }
  return ci;
}

/// Slices of the gradient's per-chunk gate-parameter shares summed side by
/// side before their sum over the slices (sumSequences): 16 x HV programs.
constexpr int64_t kShareSlices = 16;

struct TileGatedDeltaGrad : OpRewritePattern<GatedDeltaGradOp> {
  TileGatedDeltaGrad(MLIRContext *ctx, int64_t chunk, int64_t subChunk,
                     int64_t vBlock, bool recomputeStates,
                     bool dStatesBf16, bool gateOutside)
      : OpRewritePattern(ctx), chunk(chunk), subChunk(subChunk),
        vBlock(vBlock), recomputeStates(recomputeStates),
        dStatesBf16(dStatesBf16), gateOutsideOption(gateOutside) {}

  LogicalResult matchAndRewrite(GatedDeltaGradOp op,
                                PatternRewriter &rewriter) const override {
    Value q = op.getQ(), v = op.getV();
    if (failed(requireStatic(rewriter, op, {{q, 3}, {v, 3}})))
      return failure();
    const int64_t kd = dimOf(q, 3), vd = dimOf(v, 3);
    std::optional<int64_t> vBlocked = valueBlock(op.getTile(), vBlock, vd);
    if (!vBlocked)
      return rewriter.notifyMatchFailure(op, "v_block must divide V");
    const int64_t vb = *vBlocked, blocks = vd / vb;
    auto [cTile, subTile] = tileSizes(op.getTile(), chunk, subChunk);
    const int64_t c = cTile, sub = subTile;
    ChunkConfig config = chunkConfigOf(op, c, sub, kd, vb);
    if (!op.getChunkStates() && !recomputeStates) {
      op.emitError() << "kda.gated_delta_grad on a GPU needs chunk_states "
                        "(the forward's boundary states at the chunk, "
                        "states_interval): recomputing them runs on the CPU "
                        "only";
      return failure();
    }
    if (op.getChunkStates() && op.getStatesInterval() != c) {
      op.emitError() << "kda-tile-chunks: chunk_states every "
                     << *op.getStatesInterval() << " tokens, but the gradient "
                     << "is tiled in chunks of " << c
                     << ": it reads the state before every chunk (tile it "
                        "with chunk = states_interval)";
      return failure();
    }
    if (op.getChunkStates())
      return rewriteSplit(op, rewriter, config,
                          chunkConfigOf(op, c, sub, kd, vd));
    const bool vMajor = op.getStateLayout() == StateLayout::v_major;
    const bool channelGate =
        op.getGateGranularity() == GateGranularity::channel;

    // Built in a block of its own and moved before the op once it succeeds:
    // a failure (a tape step without a rule) leaves nothing behind.
    Block scratch;
    OpBuilder ob(op.getContext());
    ob.setInsertionPointToStart(&scratch);
    ImplicitLocOpBuilder b(op.getLoc(), ob);
    TensorTileBuilder tb(b);
    Type f32 = b.getF32Type();
    Value zero = tb.index(0), one = tb.index(1), cIdx = tb.index(c);
    SequenceLayout sequences(b, q, op.getCuSeqlens());
    OpFoldResult hv = sizeOf(b, v, 2);
    Value hvValue = getValueOrCreateConstantIndexOp(b, b.getLoc(), hv);
    Value group =
        arith::DivUIOp::create(b, hvValue, dimValue(b, q, 2)); // HV / H
    // Partials: one per (value head, V block), as two dimensions (every
    // workspace dimension is a dimension of an argument, or static).
    auto tokensOf = [&](bool perBlock, int64_t last) {
      // [B, T, HV(, blocks)(, last)] f32 (last < 0: none).
      SmallVector<int64_t> shape = {dimOf(q, 0), dimOf(q, 1), dimOf(v, 2)};
      SmallVector<OpFoldResult> sizes = {sizeOf(b, q, 0), sizeOf(b, q, 1), hv};
      if (perBlock) {
        shape.push_back(blocks);
        sizes.push_back(b.getIndexAttr(blocks));
      }
      if (last >= 0) {
        shape.push_back(last);
        sizes.push_back(b.getIndexAttr(last));
      }
      return tb.emptyOfType(RankedTensorType::get(shape, f32), sizes);
    };
    OpFoldResult numSeqs = sequences.gridSize();
    // Rows of the per-sequence partials: B, or N + 1 with cu_seqlens (the
    // last one unused), so that the workspace's size is an argument's.
    OpFoldResult seqRows = op.getCuSeqlens() ? sizeOf(b, op.getCuSeqlens(), 0)
                                             : sizeOf(b, q, 0);
    auto perSequence = [&](bool perBlock, ArrayRef<int64_t> tail) {
      SmallVector<OpFoldResult> sizes = {perBlock ? seqRows : numSeqs, hv};
      SmallVector<int64_t> shape;
      for (OpFoldResult f : sizes) {
        auto c = getConstantIntValue(f);
        shape.push_back(c ? *c : ShapedType::kDynamic);
      }
      if (perBlock) {
        shape.push_back(blocks);
        sizes.push_back(b.getIndexAttr(blocks));
      }
      shape.append(tail.begin(), tail.end());
      for (int64_t t : tail)
        sizes.push_back(b.getIndexAttr(t));
      return tb.emptyOfType(RankedTensorType::get(shape, f32), sizes);
    };
    // Shared outputs: dq, dk, d_gate, d_beta per (value head, V block); dv;
    // dh0; dA_log and ddt_bias per (sequence, value head, V block).
    Value dtBiasIn = op.getDtBias();
    SmallVector<Value> outs = {tokensOf(true, kd), tokensOf(true, kd),
                               tokensOf(false, vd)};
    int idxGate = -1, idxBeta = -1, idxState = -1, idxALog = -1, idxDt = -1;
    if (op.getGate()) {
      idxGate = outs.size();
      outs.push_back(tokensOf(true, channelGate ? kd : -1));
    }
    if (op.getBeta()) {
      idxBeta = outs.size();
      outs.push_back(tokensOf(true, -1));
    }
    if (op.getInitialState()) {
      idxState = outs.size();
      outs.push_back(perSequence(false, {vMajor ? vd : kd, vMajor ? kd : vd}));
    }
    if (op.getALog()) {
      idxALog = outs.size();
      outs.push_back(perSequence(true, {1}));
    }
    if (dtBiasIn) {
      idxDt = outs.size();
      outs.push_back(perSequence(true, {channelGate ? kd : 1}));
    }

    SmallVector<OpFoldResult> grid = {numSeqs, hv};
    if (blocks > 1)
      grid.push_back(b.getIndexAttr(blocks));
    auto forall = scf::ForallOp::create(b, grid, outs, std::nullopt);
    Block *body = forall.getBody();
    b.setInsertionPointToStart(body);
    Value n = forall.getInductionVar(0), head = forall.getInductionVar(1);
    Value block = blocks > 1 ? forall.getInductionVar(2) : zero;
    Value vCol = arith::MulIOp::create(b, block, tb.index(vb));
    ValueRange shared = forall.getRegionIterArgs();
    SequenceLayout::Bounds where = sequences.bounds(b, n);
    Value row = where.row, start = where.start, length = where.length;
    Value qkHead = arith::DivUIOp::create(b, head, group);
    Value numChunks = arith::CeilDivUIOp::create(b, length, cIdx);
    // A [K, v_block] state of a state tensor at (prefix..., this block).
    auto stateAt = [&](TensorTileBuilder &sb, Value src,
                       ArrayRef<OpFoldResult> prefix) {
      SmallVector<OpFoldResult> offsets(prefix);
      offsets.push_back(vMajor ? OpFoldResult(vCol) : OpFoldResult(zero));
      offsets.push_back(vMajor ? OpFoldResult(zero) : OpFoldResult(vCol));
      return loadState(sb, src, offsets, prefix.size(), vMajor, kd, vb);
    };

    GradGateParams gate = gradGateParams(tb, op, head, channelGate, kd);
    Value aLog = gate.aLog, dtBias = gate.dtBias, dtScalar = gate.dtScalar;

    // This program's rows of each per-token output: (output, its head
    // index, columns at, width; width < 0: no column dimension).
    struct Region {
      int shared;
      bool perBlock;
      Value col;
      int64_t width;
    };
    SmallVector<Region> regions = {{0, true, zero, kd},
                                   {1, true, zero, kd},
                                   {2, false, vCol, vb}};
    if (idxGate >= 0)
      regions.push_back({idxGate, true, zero, channelGate ? kd : -1});
    if (idxBeta >= 0)
      regions.push_back({idxBeta, true, zero, -1});
    SmallVector<SmallVector<OpFoldResult>> regionOffsets, regionSizes;
    SmallVector<Value> init = {
        op.getDFinalState() ? stateAt(tb, op.getDFinalState(), {n, head})
                            : tb.filled({kd, vb}, 0.0)};
    for (const Region &r : regions) {
      bool columns = r.width >= 0;
      auto type = columns
                      ? RankedTensorType::get({ShapedType::kDynamic, r.width},
                                              f32)
                      : RankedTensorType::get({ShapedType::kDynamic}, f32);
      SmallVector<OpFoldResult> offsets = {row, start, head};
      SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), length,
                                         b.getIndexAttr(1)};
      if (r.perBlock) {
        offsets.push_back(block);
        sizes.push_back(b.getIndexAttr(1));
      }
      if (columns) {
        offsets.push_back(r.col);
        sizes.push_back(b.getIndexAttr(r.width));
      }
      SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
      init.push_back(tensor::ExtractSliceOp::create(
          b, type, shared[r.shared], offsets, sizes, strides));
      regionOffsets.push_back(offsets);
      regionSizes.push_back(sizes);
    }
    const size_t accAt = init.size();
    if (aLog)
      init.push_back(tb.filled({1}, 0.0));
    if (dtBias || dtScalar)
      init.push_back(tb.filled({dtBias ? kd : 1}, 0.0));

    Value h0 = op.getInitialState() ? stateAt(tb, op.getInitialState(), {n, head})
                                    : tb.filled({kd, vb}, 0.0);

    // Chunk c's inputs, loaded (the leaves: their rows past the sequence's
    // end read as zeros) and built on the tape (the head-wise gate's
    // broadcast, the captured gate parameters).
    auto chunkInputs = [&](ImplicitLocOpBuilder &ib, Value local,
                           TileBuilder &on, ChunkInputs &leaves) {
      TensorTileBuilder lb(ib);
      return gradChunkInputs(lb, on, op, gate, row,
                             arith::AddIOp::create(ib, start, local), qkHead,
                             head, vCol, vb, validRows(ib, cIdx, length, local),
                             c, kd, channelGate, leaves);
    };

    // The state before every chunk: this program's forward pass over its
    // chunks (with chunk_states, rewriteSplit took the op).
    Value stack;
    {
      Value empty = tensor::EmptyOp::create(
          b, ArrayRef<OpFoldResult>{numChunks, b.getIndexAttr(kd),
                                    b.getIndexAttr(vb)},
          f32);
      auto fwd = scf::ForOp::create(
          b, zero, numChunks, one, ValueRange{h0, empty},
          [&](OpBuilder &nb, Location loc, Value ch, ValueRange it) {
            ImplicitLocOpBuilder ib(loc, nb);
            TensorTileBuilder itb(ib);
            Value kept = tensor::InsertSliceOp::create(
                ib, it[0], it[1],
                ArrayRef<OpFoldResult>{ch, ib.getIndexAttr(0),
                                       ib.getIndexAttr(0)},
                ArrayRef<OpFoldResult>{ib.getIndexAttr(1),
                                       ib.getIndexAttr(kd),
                                       ib.getIndexAttr(vb)},
                SmallVector<OpFoldResult>(3, ib.getIndexAttr(1)));
            ChunkInputs leaves;
            ChunkInputs ci = chunkInputs(
                ib, arith::MulIOp::create(ib, ch, cIdx), itb, leaves);
            ChunkOutputs out = emitGatedDeltaChunk(itb, config, ci, it[0]);
            scf::YieldOp::create(ib, ValueRange{out.nextState, kept});
          });
      stack = fwd.getResult(1);
    }

    // The reverse pass.
    std::string whyNot;
    auto reverse = scf::ForOp::create(
        b, zero, numChunks, one, init,
        [&](OpBuilder &nb, Location loc, Value i, ValueRange it) {
          ImplicitLocOpBuilder ib(loc, nb);
          TensorTileBuilder itb(ib);
          Value ch = arith::SubIOp::create(
              ib, arith::SubIOp::create(ib, numChunks, one), i);
          Value local = arith::MulIOp::create(ib, ch, cIdx);
          Value t0 = arith::AddIOp::create(ib, start, local);
          Value valid = validRows(ib, cIdx, length, local);
          Value z = itb.index(0);
          Value h = tensor::ExtractSliceOp::create(
                ib, RankedTensorType::get({kd, vb}, f32), stack,
                ArrayRef<OpFoldResult>{ch, ib.getIndexAttr(0),
                                       ib.getIndexAttr(0)},
                ArrayRef<OpFoldResult>{ib.getIndexAttr(1),
                                       ib.getIndexAttr(kd),
                                       ib.getIndexAttr(vb)},
                SmallVector<OpFoldResult>(3, ib.getIndexAttr(1)));
          Value dOc = itb.load(op.getDO(), {row, t0, head, vCol}, {1, 3},
                               {c, vb}, valid);
          FailureOr<ChunkGrads> g = emitChunkBackward(
              itb, config,
              [&](TileBuilder &tape, ChunkInputs &leaves) {
                return chunkInputs(ib, local, tape, leaves);
              },
              h, dOc, it[0], whyNot);
          if (failed(g)) {
            scf::YieldOp::create(ib, it);
            return;
          }
          SmallVector<Value> next = {g->dState};
          Value grads[] = {g->dq, g->dk, g->dv, g->dgate, g->dbeta};
          size_t r = 0;
          for (Value grad : grads) {
            if (!grad)
              continue;
            bool rows2d = cast<RankedTensorType>(grad.getType()).getRank() == 2;
            next.push_back(rows2d ? itb.store(grad, it[1 + r], {local, z},
                                              {0, 1}, valid)
                                  : itb.store(grad, it[1 + r], {local}, {0},
                                              valid));
            ++r;
          }
          auto add = [&](Value a, Value d) {
            return itb.map(itb.shape(a), {a, d},
                           [](ImplicitLocOpBuilder &bb, ValueRange s,
                              ValueRange) -> Value {
                             return arith::AddFOp::create(bb, s[0], s[1]);
                           });
          };
          size_t acc = accAt;
          if (aLog) {
            next.push_back(add(it[acc], g->dALog));
            ++acc;
          }
          if (dtBias || dtScalar)
            next.push_back(add(it[acc], g->dDtBias));
          scf::YieldOp::create(ib, next);
        });
    if (!whyNot.empty()) {
      op.emitError() << "kda-tile-chunks: " << whyNot;
      return failure();
    }

    // Publish this program's rows and slots.
    b.setInsertionPoint(forall.getTerminator());
    Value dh0;
    if (idxState >= 0)
      dh0 = vMajor ? tb.transpose(reverse.getResult(0)) : reverse.getResult(0);
    b.setInsertionPointToStart(forall.getTerminator().getBody());
    for (auto [k, r] : llvm::enumerate(regions))
      tensor::ParallelInsertSliceOp::create(
          b, reverse.getResult(1 + k), shared[r.shared], regionOffsets[k],
          regionSizes[k],
          SmallVector<OpFoldResult>(regionOffsets[k].size(),
                                    b.getIndexAttr(1)));
    auto slot = [&](Value tile, int at) {
      int64_t len = cast<RankedTensorType>(tile.getType()).getDimSize(0);
      tensor::ParallelInsertSliceOp::create(
          b, tile, shared[at], ArrayRef<OpFoldResult>{n, head, block, zero},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                                 b.getIndexAttr(1), b.getIndexAttr(len)},
          SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
    };
    if (dh0) {
      auto type = cast<RankedTensorType>(dh0.getType());
      tensor::ParallelInsertSliceOp::create(
          b, dh0, shared[idxState],
          ArrayRef<OpFoldResult>{n, head, vMajor ? vCol : zero,
                                 vMajor ? zero : vCol},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                                 b.getIndexAttr(type.getDimSize(0)),
                                 b.getIndexAttr(type.getDimSize(1))},
          SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
    }
    if (idxALog >= 0)
      slot(reverse.getResult(accAt), idxALog);
    if (idxDt >= 0)
      slot(reverse.getResult(accAt + (aLog ? 1 : 0)), idxDt);

    // The sums across programs.
    b.setInsertionPointAfter(forall);
    SmallVector<Value> results;
    for (int which = 0; which < 2; ++which)
      results.push_back(sumGroups(b, forall.getResult(which), q,
                                  sizeOf(b, q, 2), group, blocks, c,
                                  resultElementType(op, which)));
    results.push_back(forall.getResult(2));
    if (idxGate >= 0)
      results.push_back(sumGroups(b, forall.getResult(idxGate), q, hv,
                                  tb.index(1), blocks, c,
                                  resultElementType(op, results.size())));
    if (idxBeta >= 0)
      results.push_back(sumGroups(b, forall.getResult(idxBeta), q, hv,
                                  tb.index(1), blocks, c,
                                  resultElementType(op, results.size())));
    if (idxState >= 0)
      results.push_back(forall.getResult(idxState));
    Value sequencesCount = sequences.numSequences();
    if (idxALog >= 0)
      results.push_back(sumSequences(b, forall.getResult(idxALog), hv,
                                     sequencesCount, b.getIndexAttr(blocks), 1,
                                     /*squeeze=*/true));
    if (idxDt >= 0)
      results.push_back(sumSequences(b, forall.getResult(idxDt), hv,
                                     sequencesCount, b.getIndexAttr(blocks),
                                     channelGate ? kd : 1,
                                     /*squeeze=*/!channelGate));
    // Results in the op's types (static where the op's are; a gradient
    // returned in its input's type converted where no kernel wrote it so).
    castResults(tb, results, op);
    op->getBlock()->getOperations().splice(Block::iterator(op),
                                           scratch.getOperations());
    rewriter.replaceOp(op, results);
    return success();
  }

  /// With the forward's states (chunk_states), the gradient as docs/
  /// backward.md schedules it: the forward's two grids transposed, so that
  /// only the state's gradient is sequential.
  ///
  ///   intra    (sequence, chunk, value head)  the forward's intra-chunk
  ///            grid (emitIntraChunkGrid): W, U, Gamma Q, the decayed k, P,
  ///            exp(g_last) into workspaces, as the forward's state pass reads
  ///            them (and on the same lane kernel)
  ///   reverse  (sequence, value head, V block)  chunks last to first,
  ///            carrying dS: records dS after each chunk (workspace), then
  ///            dS <- the adjoint of emitStateStep with respect to the
  ///            state; writes dh0
  ///   chunk    (sequence, chunk, value head)  every chunk at once: the
  ///            adjoint of emitStateStep with respect to its chunk inputs
  ///            (V blocks in turn, from the chunk's state and dS), then
  ///            emitIntraChunk recomputed under a tape and its adjoint,
  ///            once for all of V: dq, dk, dv, d_gate, d_beta, and the
  ///            chunk's share of dA_log and ddt_bias
  ///   sums     dq and dk over the value heads of a q / k head; dA_log and
  ///            ddt_bias over sequences and chunks
  ///
  /// Both adjoints come from the tape (TileAdjoint.h) over the forward's
  /// own functions: nothing of the algorithm is restated here.
  LogicalResult rewriteSplit(GatedDeltaGradOp op, PatternRewriter &rewriter,
                             const ChunkConfig &blockConfig,
                             const ChunkConfig &fullConfig) const {
    Value q = op.getQ(), v = op.getV(), kept = op.getChunkStates();
    const int64_t c = blockConfig.chunk, kd = blockConfig.keyDim,
                  vb = blockConfig.valueDim, vd = fullConfig.valueDim;
    const int64_t blocks = vd / vb;
    const bool vMajor = op.getStateLayout() == StateLayout::v_major;
    const bool channelGate =
        op.getGateGranularity() == GateGranularity::channel;
    const bool delta = blockConfig.update == UpdateRule::delta;

    Block scratch;
    OpBuilder ob(op.getContext());
    ob.setInsertionPointToStart(&scratch);
    ImplicitLocOpBuilder b(op.getLoc(), ob);
    TensorTileBuilder tb(b);
    Type f32 = b.getF32Type();
    Value zero = tb.index(0), one = tb.index(1), cIdx = tb.index(c);
    OpFoldResult unit = b.getIndexAttr(1);
    SequenceLayout sequences(b, q, op.getCuSeqlens());
    OpFoldResult hv = sizeOf(b, v, 2);
    Value hvValue = getValueOrCreateConstantIndexOp(b, b.getLoc(), hv);
    Value group = arith::DivUIOp::create(b, hvValue, dimValue(b, q, 2));
    OpFoldResult numSeqs = sequences.gridSize();
    // The kept states' sequences and chunks: NS >= N, NT >= every
    // sequence's chunks (dimensions of an argument, so workspaces sized by
    // them are the runtime's to allocate).
    OpFoldResult keptSeqs = sizeOf(b, kept, 0), keptChunks = sizeOf(b, kept, 1);
    Value keptChunksValue =
        getValueOrCreateConstantIndexOp(b, b.getLoc(), keptChunks);
    auto staticOr = [](OpFoldResult f) {
      auto c = getConstantIntValue(f);
      return c ? *c : ShapedType::kDynamic;
    };
    auto stateAt = [&](TensorTileBuilder &sb, Value src, bool srcVMajor,
                       ArrayRef<OpFoldResult> prefix, Value col) {
      SmallVector<OpFoldResult> offsets(prefix);
      offsets.push_back(srcVMajor ? OpFoldResult(col) : OpFoldResult(zero));
      offsets.push_back(srcVMajor ? OpFoldResult(zero) : OpFoldResult(col));
      return loadState(sb, src, offsets, prefix.size(), srcVMajor, kd, vb);
    };

    // 1. The intra-chunk grid, the forward's.
    // In f32: the gradient's sums over every token and channel (dA_log, a
    // sum with cancellation) read what the reverse scan and the step grid
    // make of these products. With bf16 W, Gamma Q and decayed k it measured
    // 2.0e-2 against the oracle in the twenty-fourth session, and in the
    // thirty-eighth (the reverse scan's and step grid's f32 products
    // widening them as they read, a build since removed) the emulated
    // two-head varlen case's dA_log 3.3e-3 with f32 products and 7.5e-3 with
    // bf16 ones in the step grid, and the whole gradient 2 to 3 times slower
    // on the H100 (bench/RESULTS.md): the widened reads lose ldmatrix. They
    // add 3 [T, HV, K] reads to the 1 GB of states and dS at T = 8192 H = 32.
    IntraWorkspaces ws = emitIntraChunkGrid(b, op, fullConfig, sequences, hv,
                                            group, /*allowHalf=*/false);

    // 2. The reverse scan. dS after every chunk goes to `dStates` ([NS, NT,
    // HV, V, K] f32, V-major whatever the states' layout: the NVIDIA lane
    // programs' state registers hold pairs of consecutive keys, stored as
    // one 8-byte vector, whole 32-byte sectors a warp, where K-major rows
    // took one 4-byte store an element, half sectors).
    // (bf16 with kda-tile-chunks' gradient-d-states-bf16 where q is 16-bit,
    // FLA's record of dh; an fp32 call keeps its 1e-4 bars with f32. The
    // readers convert to f32.)
    Type dStatesElement =
        dStatesBf16 && cast<ShapedType>(q.getType()).getElementTypeBitWidth() ==
                           16
            ? Type(b.getBF16Type())
            : f32;
    Value dStates = tb.emptyOfType(
        RankedTensorType::get({staticOr(keptSeqs), staticOr(keptChunks),
                               staticOr(hv), vd, kd},
                              dStatesElement),
        {keptSeqs, keptChunks, hv, {}, {}});
    SmallVector<Value> scanOuts = {dStates};
    if (Value h0 = op.getInitialState()) {
      auto type = cast<RankedTensorType>(h0.getType());
      scanOuts.push_back(tb.emptyOfType(
          RankedTensorType::get({staticOr(numSeqs), staticOr(hv),
                                 type.getDimSize(2), type.getDimSize(3)},
                                f32),
          {numSeqs, hv, {}, {}}));
    }
    // And dV_new of every chunk ([B, T, HV, V] f32): the step's adjoint
    // with respect to the state passes through it (dS gets -W^T dV_new), and
    // it is the seed of U, which the step grid would otherwise make again
    // from P^T dO + (decayed k) dS.
    const size_t dUAt = scanOuts.size();
    scanOuts.push_back(tb.emptyOfType(
        RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic,
                               ShapedType::kDynamic, vd},
                              f32),
        {sequences.batch(), sequences.tokens(), hv}));
    std::string whyNot;
    Value dStatesDone, dh0Done, dUDone;
    {
      SmallVector<OpFoldResult> grid = {numSeqs, hv};
      if (blocks > 1)
        grid.push_back(b.getIndexAttr(blocks));
      auto forall = scf::ForallOp::create(b, grid, scanOuts, std::nullopt);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(forall.getBody());
      Value n = forall.getInductionVar(0), head = forall.getInductionVar(1);
      Value block = blocks > 1 ? forall.getInductionVar(2) : zero;
      Value vCol = arith::MulIOp::create(b, block, tb.index(vb));
      ValueRange shared = forall.getRegionIterArgs();
      SequenceLayout::Bounds where = sequences.bounds(b, n);
      Value numChunks = arith::CeilDivUIOp::create(b, where.length, cIdx);
      Value dS0 = op.getDFinalState()
                      ? stateAt(tb, op.getDFinalState(), vMajor, {n, head},
                                vCol)
                      : tb.filled({kd, vb}, 0.0);
      SmallVector<OpFoldResult> rOffsets = {n, zero, head, vCol, zero};
      SmallVector<OpFoldResult> rSizes = {unit, keptChunks, unit,
                                          b.getIndexAttr(vb),
                                          b.getIndexAttr(kd)};
      SmallVector<OpFoldResult> strides5(5, b.getIndexAttr(1));
      Value region = tensor::ExtractSliceOp::create(
          b,
          RankedTensorType::get({staticOr(keptChunks), vb, kd},
                                dStatesElement),
          shared[0], rOffsets, rSizes, strides5);
      // The sequence's rows of dV_new at this V block.
      SmallVector<OpFoldResult> uOffsets = {where.row, where.start, head,
                                            vCol};
      SmallVector<OpFoldResult> uSizes = {unit, where.length, unit,
                                          b.getIndexAttr(vb)};
      SmallVector<OpFoldResult> strides4(4, b.getIndexAttr(1));
      Value uRegion = tensor::ExtractSliceOp::create(
          b, RankedTensorType::get({ShapedType::kDynamic, vb}, f32),
          shared[dUAt], uOffsets, uSizes, strides4);
      auto scan = scf::ForOp::create(
          b, zero, numChunks, one, ValueRange{dS0, region, uRegion},
          [&](OpBuilder &nb, Location loc, Value i, ValueRange it) {
            ImplicitLocOpBuilder ib(loc, nb);
            TensorTileBuilder itb(ib);
            Value ch = arith::SubIOp::create(
                ib, arith::SubIOp::create(ib, numChunks, one), i);
            Value local = arith::MulIOp::create(ib, ch, cIdx);
            Value t0 = arith::AddIOp::create(ib, where.start, local);
            Value valid = validRows(ib, cIdx, where.length, local);
            Value recorded = tensor::InsertSliceOp::create(
                ib, itb.convert(itb.transpose(it[0]), dStatesElement), it[1],
                ArrayRef<OpFoldResult>{ch, ib.getIndexAttr(0),
                                       ib.getIndexAttr(0)},
                ArrayRef<OpFoldResult>{ib.getIndexAttr(1),
                                       ib.getIndexAttr(vb),
                                       ib.getIndexAttr(kd)},
                SmallVector<OpFoldResult>(3, ib.getIndexAttr(1)));
            IntraChunk intra = loadIntraChunk(itb, ws, where.row, t0, head,
                                              vCol, valid, c, kd, vb);
            Value h = stateAt(itb, kept, vMajor, {n, ch, head}, vCol);
            Value dO = itb.load(op.getDO(), {where.row, t0, head, vCol},
                                {1, 3}, {c, vb}, valid);
            FailureOr<StateStepGrads> g = emitStateStepAdjoint(
                itb, intra, h, dO, it[0], StepAdjointOf::State, whyNot);
            if (failed(g)) {
              scf::YieldOp::create(ib, ValueRange{it[0], recorded, it[2]});
              return;
            }
            Value dU = itb.store(g->dVNew, it[2], {local, ib.getIndexAttr(0)},
                                 {0, 1}, valid);
            scf::YieldOp::create(ib, ValueRange{g->dState, recorded, dU});
          });
      b.setInsertionPointToStart(forall.getTerminator().getBody());
      tensor::ParallelInsertSliceOp::create(b, scan.getResult(1), shared[0],
                                            rOffsets, rSizes, strides5);
      if (op.getInitialState()) {
        b.setInsertionPoint(forall.getTerminator());
        Value dh0 = vMajor ? tb.transpose(scan.getResult(0))
                           : scan.getResult(0);
        auto type = cast<RankedTensorType>(dh0.getType());
        // (After dS's: the terminator's inserts in the order of the
        // outputs, as forall's canonicalizations expect.)
        b.setInsertionPointToEnd(forall.getTerminator().getBody());
        tensor::ParallelInsertSliceOp::create(
            b, dh0, shared[1],
            ArrayRef<OpFoldResult>{n, head, vMajor ? vCol : zero,
                                   vMajor ? zero : vCol},
            ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                                   b.getIndexAttr(type.getDimSize(0)),
                                   b.getIndexAttr(type.getDimSize(1))},
            SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
      }
      {
        OpBuilder::InsertionGuard end(b);
        b.setInsertionPointToEnd(forall.getTerminator().getBody());
        tensor::ParallelInsertSliceOp::create(b, scan.getResult(2),
                                              shared[dUAt], uOffsets, uSizes,
                                              strides4);
      }
      dStatesDone = forall.getResult(0);
      if (op.getInitialState())
        dh0Done = forall.getResult(1);
      dUDone = forall.getResult(dUAt);
    }
    if (!whyNot.empty()) {
      op.emitError() << "kda-tile-chunks: " << whyNot;
      return failure();
    }

    // 3. The chunk-parallel adjoint. Per-token results ([B, T, HV(, X)]:
    // dq and dk per value head, summed into q / k heads after), and the
    // gate parameters' shares per (kept sequence, value head, chunk).
    // (dq and dk as sumGroups' partials [B, T, HV, 1, K]: one V block.)
    // dv, d_gate and d_beta are the op's results, in their types (f32 or
    // the input's 16-bit type: the grid's stores convert).
    auto tokens = [&](int64_t last, bool unitBlock = false,
                      Type element = Type()) {
      SmallVector<int64_t> shape = {dimOf(q, 0), dimOf(q, 1), dimOf(v, 2)};
      SmallVector<OpFoldResult> sizes = {sizeOf(b, q, 0), sizeOf(b, q, 1), hv};
      if (unitBlock) {
        shape.push_back(1);
        sizes.push_back(b.getIndexAttr(1));
      }
      if (last >= 0) {
        shape.push_back(last);
        sizes.push_back(b.getIndexAttr(last));
      }
      return tb.emptyOfType(
          RankedTensorType::get(shape, element ? element : f32), sizes);
    };
    auto shares = [&](int64_t len) {
      return tb.emptyOfType(
          RankedTensorType::get({staticOr(keptSeqs), staticOr(hv),
                                 staticOr(keptChunks), len},
                                f32),
          {keptSeqs, hv, keptChunks, {}});
    };
    Value dtBiasIn = op.getDtBias();
    const int64_t dtLen = channelGate ? kd : 1;
    // (output, columns; -1: none)
    // (Their positions are the op's result indices: dq, dk, dv, d_gate,
    // d_beta.)
    SmallVector<std::pair<Value, int64_t>> rowOuts = {
        {tokens(kd, true), kd},
        {tokens(kd, true), kd},
        {tokens(vd, false, resultElementType(op, 2)), vd}};
    // kda-tile-chunks' gradient-gate-outside (off): a channel-wise gate's
    // activation outside the chunk grid's tape (see #kda.intra_pass's
    // gate_outside): the chunk grid writes the gradient of the activated
    // gate (f32), the gate grid (4b below) takes it through the activation
    // to d_gate, dA_log's and ddt_bias's shares. (Measured far slower: the
    // gate grid is a tile program. The softplus gate's chunk program runs on
    // lanes either way since the fortieth session.)
    const bool gateOutside =
        gateOutsideOption && op.getGate() && channelGate &&
        fullConfig.gateActivation != GateActivation::none;
    int idxGate = -1, idxBeta = -1;
    if (op.getGate()) {
      idxGate = rowOuts.size();
      rowOuts.push_back(
          {tokens(channelGate ? kd : -1, false,
                  gateOutside ? f32 : resultElementType(op, idxGate)),
           channelGate ? kd : -1});
    }
    if (op.getBeta()) {
      idxBeta = rowOuts.size();
      rowOuts.push_back({tokens(-1, false, resultElementType(op, idxBeta)), -1});
    }
    SmallVector<Value> chunkOuts;
    for (auto &[t, w] : rowOuts)
      chunkOuts.push_back(t);
    int idxALog = -1, idxDt = -1;
    if (op.getALog() && !gateOutside) {
      idxALog = chunkOuts.size();
      chunkOuts.push_back(shares(1));
    }
    if (dtBiasIn && !gateOutside) {
      idxDt = chunkOuts.size();
      chunkOuts.push_back(shares(dtLen));
    }
    // dq and dk in place, in their result types, where every q / k head has
    // one value head (no GVA: group 1, known only at run time): the chunk
    // grid writes their rows there and the partials' none, and the sums
    // below then write nothing (their rows count zero). With GVA the chunk
    // grid writes the partials and these none. (The sums of one value head
    // were a copy of 2 x [B, T, H, K] f32: 0.23 ms of 6.1 at T = 8192
    // H = 32 on the H100, bench/RESULTS.md, thirty-sixth session.)
    // (A constant where the heads are static: the sums then fold away.
    // The sums' grids have no program where HV = H, the same condition
    // where the verifier holds, in the symbols the manifest states it in:
    // the runtime skips their launches.)
    auto staticHv = getConstantIntValue(hv);
    auto staticH = getConstantIntValue(sizeOf(b, q, 2));
    Value oneHead =
        staticHv && staticH
            ? Value(arith::ConstantIntOp::create(b, *staticHv == *staticH, 1))
            : Value(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, group,
                                          one));
    Value noSums =
        staticHv && staticH
            ? oneHead
            : Value(arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                          hvValue, dimValue(b, q, 2)));
    const int idxDirect = chunkOuts.size();
    for (int which = 0; which < 2; ++which)
      chunkOuts.push_back(tb.emptyOfType(
          RankedTensorType::get({dimOf(q, 0), dimOf(q, 1), dimOf(q, 2), kd},
                                resultElementType(op, which)),
          {sizeOf(b, q, 0), sizeOf(b, q, 1), sizeOf(b, q, 2), {}}));
    Value maxChunks = arith::CeilDivUIOp::create(b, sequences.tokens(), cIdx);
    // A program (sequence, chunk, value head) of the step and chunk grids:
    // its rows, and its slot among the kept states' chunks.
    struct ChunkProgram {
      Value n, ch, head, row, qkHead, t0, valid, firstRow, live, chRead,
          slotRows;
    };
    auto programOf = [&](scf::ForallOp grid) {
      ChunkProgram p;
      p.n = grid.getInductionVar(0);
      p.ch = grid.getInductionVar(1);
      p.head = grid.getInductionVar(2);
      SequenceLayout::Bounds where = sequences.bounds(b, p.n);
      p.row = where.row;
      p.qkHead = arith::DivUIOp::create(b, p.head, group);
      Value local = arith::MulIOp::create(b, p.ch, cIdx);
      p.t0 = arith::AddIOp::create(b, where.start, local);
      // Programs past their sequence's end run on zero rows and seeds and
      // write no rows (see emitIntraChunkGrid); their gate-parameter
      // slots, where the kept states have them, get zeros.
      Value clamped = arith::MinUIOp::create(b, local, where.length);
      p.valid = validRows(b, cIdx, where.length, clamped);
      p.firstRow = arith::MinUIOp::create(b, p.valid, one);
      p.live =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, p.valid, zero);
      p.chRead = arith::MinUIOp::create(
          b, p.ch, arith::SubIOp::create(b, keptChunksValue, one));
      p.slotRows = arith::SelectOp::create(
          b,
          arith::CmpIOp::create(b, arith::CmpIPredicate::ult, p.ch,
                                keptChunksValue),
          one, zero);
      return p;
    };
    auto liveOnly = [&](TensorTileBuilder &on, Value live, Value t) {
      return on.map(on.shape(t), {t},
                    [&](ImplicitLocOpBuilder &bb, ValueRange s,
                        ValueRange) -> Value {
                      return arith::SelectOp::create(
                          bb, live, s[0],
                          arith::ConstantOp::create(bb,
                                                    bb.getF32FloatAttr(0.0)));
                    });
    };
    // A program's writes into its grid's shared outputs, one per output in
    // their order, inserted by commitWrites at the grid's terminator.
    using Write = std::tuple<Value, SmallVector<OpFoldResult>,
                             SmallVector<OpFoldResult>>;
    // `rows` rows of a [c, width] tile at (row, t0, h, 0) of a [B, T, H,
    // width] output, in its element type.
    auto rowWrite = [&](Value dest, Value tile, Value row, Value t0, Value h,
                        Value rows, int64_t width) -> Write {
      Value z = zero;
      SmallVector<OpFoldResult> offsets = {row, t0, h, z};
      SmallVector<OpFoldResult> sizes = {unit, rows, unit,
                                         b.getIndexAttr(width)};
      Value regionT = tensor::ExtractSliceOp::create(
          b,
          RankedTensorType::get(
              {ShapedType::kDynamic, width},
              cast<RankedTensorType>(dest.getType()).getElementType()),
          dest, offsets, sizes, SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
      return {tb.store(tile, regionT, {z, z}, {0, 1}, rows), offsets, sizes};
    };
    // The chunk's share ([len]) of a gate parameter's gradient into its
    // slot (n, head, chunk) of a shares output (zeros past the sequence).
    auto slotWrite = [&](const ChunkProgram &p, Value dest, Value share,
                         int64_t len) -> Write {
      Value z = zero;
      SmallVector<OpFoldResult> offsets = {p.n, p.head, p.chRead, z};
      SmallVector<OpFoldResult> sizes = {unit, unit, p.slotRows,
                                         b.getIndexAttr(len)};
      Value regionT = tensor::ExtractSliceOp::create(
          b, RankedTensorType::get({ShapedType::kDynamic, len}, f32), dest,
          offsets, sizes, SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
      Value asRowTile =
          tb.map({1, len}, {perColumn(liveOnly(tb, p.live, share))},
                 [](ImplicitLocOpBuilder &, ValueRange s, ValueRange) {
                   return s[0];
                 });
      return {tb.store(asRowTile, regionT, {z, z}, {0, 1}, p.slotRows),
              offsets, sizes};
    };
    auto commitWrites = [&](scf::ForallOp grid, ArrayRef<Write> writes) {
      b.setInsertionPointToStart(grid.getTerminator().getBody());
      ValueRange shared = grid.getRegionIterArgs();
      for (auto [k, w] : llvm::enumerate(writes)) {
        auto &[stored, offsets, sizes] = w;
        tensor::ParallelInsertSliceOp::create(
            b, stored, shared[k], offsets, sizes,
            SmallVector<OpFoldResult>(offsets.size(), b.getIndexAttr(1)));
      }
    };

    // 3. The state step's adjoint with respect to each chunk's inputs (the
    // step grid), V block by V block (its state and dS are [K, v_block] at a
    // time), into f32 workspaces [B, T, HV, width]: dW (delta rule),
    // d(Gamma Q), d(decayed k), dP, d(exp(g_last)) (gates; the chunk's first
    // row); dU is the reverse scan's dV_new, which seeds V_new here. A grid
    // of its own rather than the head of the chunk grid:
    // each program's live tiles (GPU tile lowering: shared memory) are the
    // V loop's alone, and the chunk grid's are the intra-chunk tape's alone.
    SmallVector<int64_t> seedWidths;
    if (ws.w)
      seedWidths.push_back(kd);
    seedWidths.append({kd, kd, c});
    if (ws.g)
      seedWidths.push_back(kd);
    SmallVector<Value> seedOuts;
    for (int64_t width : seedWidths)
      seedOuts.push_back(tb.emptyOfType(
          RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic,
                                 ShapedType::kDynamic, width},
                                f32),
          {sequences.batch(), sequences.tokens(), hv}));
    auto stepGrid = scf::ForallOp::create(
        b, SmallVector<OpFoldResult>{numSeqs, maxChunks, hv}, seedOuts,
        std::nullopt);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(stepGrid.getBody());
      ChunkProgram p = programOf(stepGrid);
      Value row = p.row, t0 = p.t0, head = p.head, valid = p.valid;
      IntraChunk whole = loadIntraChunk(tb, ws, row, t0, head, zero, valid,
                                        c, kd, vb, /*pastEnd=*/true);
      SmallVector<Value> acc = {tb.filled({c, kd}, 0.0),
                                tb.filled({c, kd}, 0.0),
                                tb.filled({c, kd}, 0.0),
                                tb.filled({c, c}, 0.0),
                                tb.filled({kd}, 0.0)};
      auto vLoop = scf::ForOp::create(
          b, zero, tb.index(blocks), one, acc,
          [&](OpBuilder &nb, Location loc, Value blk, ValueRange it) {
            ImplicitLocOpBuilder ib(loc, nb);
            TensorTileBuilder itb(ib);
            Value vCol = arith::MulIOp::create(ib, blk, itb.index(vb));
            IntraChunk intra = whole;
            intra.u = itb.load(ws.u, {row, t0, head, vCol}, {1, 3}, {c, vb},
                               valid);
            Value h = stateAt(itb, kept, vMajor, {p.n, p.chRead, head}, vCol);
            Value dS = liveOnly(itb, p.live,
                                stateAt(itb, dStatesDone, /*srcVMajor=*/true,
                                        {p.n, p.chRead, head}, vCol));
            Value dO = itb.load(op.getDO(), {row, t0, head, vCol}, {1, 3},
                                {c, vb}, valid);
            Value dVNew = itb.load(dUDone, {row, t0, head, vCol}, {1, 3},
                                   {c, vb}, valid);
            FailureOr<StateStepGrads> g =
                emitStateStepAdjoint(itb, intra, h, dO, dS,
                                     StepAdjointOf::Inputs, whyNot, dVNew);
            if (failed(g)) {
              scf::YieldOp::create(ib, it);
              return;
            }
            // The carried sums' order: dW, d(Gamma Q), d(decayed k), dP,
            // d(exp(g_last)); W and the decay may be absent.
            Value grads[] = {g->dW, g->dQDecayed, g->dKToEnd, g->dP,
                             g->dDecayLast};
            SmallVector<Value> next;
            for (int k = 0; k < 5; ++k) {
              next.push_back(!grads[k]
                                 ? it[k]
                                 : itb.map(itb.shape(it[k]),
                                              {it[k], grads[k]},
                                              [](ImplicitLocOpBuilder &bb,
                                                 ValueRange s, ValueRange) {
                                                return Value(
                                                    arith::AddFOp::create(
                                                        bb, s[0], s[1]));
                                              }));
            }
            scf::YieldOp::create(ib, next);
          });
      // This program's rows of each seed.
      SmallVector<Value> seedTiles;
      if (ws.w)
        seedTiles.push_back(vLoop.getResult(0));
      seedTiles.append(
          {vLoop.getResult(1), vLoop.getResult(2), vLoop.getResult(3)});
      if (ws.g)
        seedTiles.push_back(asRow(tb, vLoop.getResult(4)));
      ValueRange shared = stepGrid.getRegionIterArgs();
      SmallVector<std::pair<Value, SmallVector<OpFoldResult>>> writes;
      for (auto [i, width] : llvm::enumerate(seedWidths)) {
        bool gRow = ws.g && i + 1 == seedWidths.size();
        Value rows = gRow ? p.firstRow : valid;
        SmallVector<OpFoldResult> sizes = {unit, rows, unit,
                                           b.getIndexAttr(width)};
        Value regionT = tensor::ExtractSliceOp::create(
            b, RankedTensorType::get({ShapedType::kDynamic, width}, f32),
            shared[i], ArrayRef<OpFoldResult>{row, t0, head, zero}, sizes,
            SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
        writes.push_back(
            {tb.store(seedTiles[i], regionT, {zero, zero}, {0, 1}, rows),
             sizes});
      }
      b.setInsertionPointToStart(stepGrid.getTerminator().getBody());
      for (auto [i, w] : llvm::enumerate(writes))
        tensor::ParallelInsertSliceOp::create(
            b, w.first, shared[i], ArrayRef<OpFoldResult>{row, t0, head, zero},
            w.second, SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
    }
    if (!whyNot.empty()) {
      op.emitError() << "kda-tile-chunks: " << whyNot;
      return failure();
    }
    Value seedW, seedQ, seedK, seedP, seedG, seedU;
    {
      unsigned i = 0;
      seedW = ws.w ? stepGrid.getResult(i++) : Value();
      seedQ = stepGrid.getResult(i++);
      seedK = stepGrid.getResult(i++);
      seedP = stepGrid.getResult(i++);
      seedG = ws.g ? stepGrid.getResult(i++) : Value();
      seedU = dUDone;
    }

    // 4. The chunk-parallel adjoint of the intra-chunk part.
    auto chunkGrid = scf::ForallOp::create(
        b, SmallVector<OpFoldResult>{numSeqs, maxChunks, hv}, chunkOuts,
        std::nullopt);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(chunkGrid.getBody());
      ChunkProgram p = programOf(chunkGrid);
      Value head = p.head, row = p.row, qkHead = p.qkHead, t0 = p.t0,
            valid = p.valid;
      ValueRange shared = chunkGrid.getRegionIterArgs();
      Value z = zero;
      auto seedRows = [&](Value ws, int64_t width) {
        return tb.load(ws, {row, t0, head, z}, {1, 3}, {c, width}, valid);
      };
      Value dW = seedW ? seedRows(seedW, kd) : Value();
      Value dQDecayed = seedRows(seedQ, kd), dKToEnd = seedRows(seedK, kd),
            dP = seedRows(seedP, c), dU = seedRows(seedU, vd);
      Value dDecayLast =
          seedG ? tb.rowOf(tb.load(seedG, {row, t0, head, z}, {1, 3},
                                   {1, kd}, p.firstRow),
                           0)
                : Value();

      // The intra-chunk part, recomputed under a tape once for all of V.
      TapeTileBuilder tape(tb);
      ChunkInputs leaves;
      ChunkInputs ci = gradChunkInputs(
          tb, tape, op, gradGateParams(tb, op, head, channelGate, kd), row,
          t0, qkHead, head, zero, vd, valid, c, kd, channelGate, leaves);
      ChunkConfig tapeConfig = fullConfig;
      if (gateOutside) {
        // The activated gate, off the tape, is the leaf.
        ci.gate = leaves.gate =
            activateGateTile(tb, fullConfig, ci.gate, ci.aLog, ci.dtBias);
        ci.aLog = ci.dtBias = leaves.aLog = leaves.dtBias = Value();
        tapeConfig.gateActivation = GateActivation::none;
      }
      IntraChunk intra = emitIntraChunk(tape, tapeConfig, ci);
      SmallVector<std::pair<Value, Value>> seeds = {
          {intra.u, dU},
          {intra.qDecayed, dQDecayed},
          {intra.kToEnd, dKToEnd},
          {intra.p, dP}};
      if (delta)
        seeds.push_back({intra.w, dW});
      if (intra.decayLast && dDecayLast)
        seeds.push_back({intra.decayLast, dDecayLast});
      SmallVector<Value> wrt = {leaves.q, leaves.k, leaves.v};
      for (Value l : {leaves.gate, leaves.beta, leaves.dtBias, leaves.aLog})
        if (l)
          wrt.push_back(l);
      FailureOr<SmallVector<Value>> g = tape.emitAdjoint(seeds, wrt, whyNot);
      if (failed(g)) {
        op.emitError() << "kda-tile-chunks: " << whyNot;
        return failure();
      }
      size_t at = 3;
      Value dGate = leaves.gate ? (*g)[at++] : Value();
      Value dBeta = leaves.beta ? (*g)[at++] : Value();
      Value dDt = leaves.dtBias ? (*g)[at++] : Value();
      Value dALog = leaves.aLog ? (*g)[at++] : Value();

      // This program's rows and slots.
      SmallVector<Value> rowGrads = {(*g)[0], (*g)[1], (*g)[2]};
      if (idxGate >= 0)
        rowGrads.push_back(dGate);
      if (idxBeta >= 0)
        rowGrads.push_back(dBeta);
      SmallVector<Write> writes;
      // dq's and dk's rows go to the partials or in place (see oneHead).
      // (As min(valid, C or 0): the tile lowering bounds a min's size.)
      Value partialRows = arith::MinUIOp::create(
          b, valid, arith::SelectOp::create(b, oneHead, zero, cIdx));
      Value directRows = arith::MinUIOp::create(
          b, valid, arith::SelectOp::create(b, oneHead, cIdx, zero));
      for (auto [k, out] : llvm::enumerate(rowOuts)) {
        int64_t width = out.second;
        SmallVector<OpFoldResult> offsets = {row, t0, head};
        SmallVector<OpFoldResult> sizes = {unit, k < 2 ? partialRows : valid,
                                           unit};
        if (k < 2) { // dq, dk: the unit V-block dimension
          offsets.push_back(z);
          sizes.push_back(unit);
        }
        Type element =
            cast<RankedTensorType>(shared[k].getType()).getElementType();
        RankedTensorType type =
            width >= 0
                ? RankedTensorType::get({ShapedType::kDynamic, width}, element)
                : RankedTensorType::get({ShapedType::kDynamic}, element);
        if (width >= 0) {
          offsets.push_back(z);
          sizes.push_back(b.getIndexAttr(width));
        }
        Value regionT = tensor::ExtractSliceOp::create(
            b, type, shared[k], offsets, sizes,
            SmallVector<OpFoldResult>(offsets.size(), b.getIndexAttr(1)));
        Value rows = k < 2 ? partialRows : valid;
        Value stored =
            width >= 0 ? tb.store(rowGrads[k], regionT, {z, z}, {0, 1}, rows)
                       : tb.store(rowGrads[k], regionT, {z}, {0}, rows);
        writes.push_back({stored, offsets, sizes});
      }
      if (idxALog >= 0)
        writes.push_back(slotWrite(p, shared[idxALog], dALog, 1));
      if (idxDt >= 0)
        writes.push_back(slotWrite(p, shared[idxDt], dDt, dtLen));
      for (int which = 0; which < 2; ++which)
        writes.push_back(rowWrite(shared[idxDirect + which], rowGrads[which],
                                  row, t0, qkHead, directRows, kd));
      commitWrites(chunkGrid, writes);
    }
    if (!whyNot.empty()) {
      op.emitError() << "kda-tile-chunks: " << whyNot;
      return failure();
    }

    // 4b. The gate grid (gateOutside): per (sequence, chunk, value head)
    // the activation's adjoint of the chunk's rows, seeded with the chunk
    // grid's gradient of the activated gate: d_gate's rows and the chunk's
    // shares of dA_log and ddt_bias (the chunk grid's slots otherwise).
    Value dGateDone, aLogShares, dtShares;
    if (gateOutside) {
      SmallVector<Value> gateOuts = {
          tokens(kd, false, resultElementType(op, idxGate))};
      if (op.getALog()) {
        idxALog = gateOuts.size();
        gateOuts.push_back(shares(1));
      }
      if (dtBiasIn) {
        idxDt = gateOuts.size();
        gateOuts.push_back(shares(dtLen));
      }
      auto gateGrid = scf::ForallOp::create(
          b, SmallVector<OpFoldResult>{numSeqs, maxChunks, hv}, gateOuts,
          std::nullopt);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(gateGrid.getBody());
        ChunkProgram p = programOf(gateGrid);
        ValueRange shared = gateGrid.getRegionIterArgs();
        Value z = zero;
        GradGateParams gp = gradGateParams(tb, op, p.head, channelGate, kd);
        Value raw = tb.load(op.getGate(), {p.row, p.t0, p.head, z}, {1, 3},
                            {c, kd}, p.valid);
        Value dAct = tb.load(chunkGrid.getResult(idxGate),
                             {p.row, p.t0, p.head, z}, {1, 3}, {c, kd},
                             p.valid);
        TapeTileBuilder tape(tb);
        Value act = activateGateTile(tape, fullConfig, raw, gp.aLog,
                                     gp.dtBias);
        SmallVector<Value> wrt = {raw};
        if (gp.dtBias)
          wrt.push_back(gp.dtBias);
        if (gp.aLog)
          wrt.push_back(gp.aLog);
        FailureOr<SmallVector<Value>> g =
            tape.emitAdjoint({{act, dAct}}, wrt, whyNot);
        if (failed(g)) {
          op.emitError() << "kda-tile-chunks: " << whyNot;
          return failure();
        }
        SmallVector<Write> writes = {
            rowWrite(shared[0], (*g)[0], p.row, p.t0, p.head, p.valid, kd)};
        size_t at = 1;
        Value dDt = gp.dtBias ? (*g)[at++] : Value();
        Value dALog = gp.aLog ? (*g)[at++] : Value();
        if (idxALog >= 0)
          writes.push_back(slotWrite(p, shared[idxALog], dALog, 1));
        if (idxDt >= 0)
          writes.push_back(slotWrite(p, shared[idxDt], dDt, dtLen));
        commitWrites(gateGrid, writes);
      }
      dGateDone = gateGrid.getResult(0);
      if (idxALog >= 0)
        aLogShares = gateGrid.getResult(idxALog);
      if (idxDt >= 0)
        dtShares = gateGrid.getResult(idxDt);
    } else {
      if (idxGate >= 0)
        dGateDone = chunkGrid.getResult(idxGate);
      if (idxALog >= 0)
        aLogShares = chunkGrid.getResult(idxALog);
      if (idxDt >= 0)
        dtShares = chunkGrid.getResult(idxDt);
    }

    // 5. The sums.
    SmallVector<Value> results;
    for (int which = 0; which < 2; ++which)
      results.push_back(sumGroups(b, chunkGrid.getResult(which), q,
                                  sizeOf(b, q, 2), group, 1, c,
                                  resultElementType(op, which),
                                  chunkGrid.getResult(idxDirect + which),
                                  oneHead, noSums));
    results.push_back(chunkGrid.getResult(2));
    if (idxGate >= 0)
      results.push_back(dGateDone);
    if (idxBeta >= 0)
      results.push_back(chunkGrid.getResult(idxBeta));
    if (dh0Done)
      results.push_back(dh0Done);
    Value seqCount = sequences.numSequences();
    if (aLogShares)
      results.push_back(sumSequences(b, aLogShares, hv, seqCount, keptChunks,
                                     1, /*squeeze=*/true, kShareSlices));
    if (dtShares)
      results.push_back(sumSequences(b, dtShares, hv, seqCount, keptChunks,
                                     dtLen, /*squeeze=*/!channelGate,
                                     kShareSlices));
    // The grids' names, and the intra-chunk grid's description (the
    // forward's: it takes the same lane kernel).
    if (auto f = op->getParentOfType<FunctionOpInterface>()) {
      SmallVector<StringRef> phases = {"intra", "reverse", "step", "chunk"};
      if (gateOutside)
        phases.push_back("gate");
      if (!matchPattern(oneHead, m_One())) // (no sums where heads are static)
        phases.append({"sum_dq", "sum_dk"});
      // (Each gate parameter's sum in two grids where its shares are a
      // dimension's worth of chunks: sumSequences' slices.)
      const bool sliced = !getConstantIntValue(keptChunks) ||
                          *getConstantIntValue(keptChunks) > 16;
      if (aLogShares) {
        if (sliced)
          phases.push_back("sum_d_A_log_slices");
        phases.push_back("sum_d_A_log");
      }
      if (dtShares) {
        if (sliced)
          phases.push_back("sum_d_dt_bias_slices");
        phases.push_back("sum_d_dt_bias");
      }
      f->setAttr(kPhaseAttr, b.getStrArrayAttr(phases));
      SmallVector<StringRef> roles;
      if (ws.w)
        roles.push_back("w");
      roles.append({"u", "q", "k", "p"});
      if (ws.g)
        roles.push_back("g");
      int64_t seqsStatic = dimOf(q, 0);
      if (Value cu = op.getCuSeqlens())
        seqsStatic = ShapedType::isDynamic(dimOf(cu, 0)) ? ShapedType::kDynamic
                                                         : dimOf(cu, 0) - 1;
      int64_t tokensStatic = dimOf(q, 1);
      auto minusOne = [](int64_t d) {
        return ShapedType::isDynamic(d) ? int64_t(-1) : d;
      };
      int64_t chunksStatic =
          ShapedType::isDynamic(tokensStatic) ? -1 : (tokensStatic + c - 1) / c;
      SmallVector<int64_t> scanGrid = {minusOne(seqsStatic),
                                       minusOne(dimOf(v, 2))};
      if (blocks > 1)
        scanGrid.push_back(blocks);
      f->setAttr(kReversePassAttr,
                 StatePassAttr::get(b.getContext(), c, c, kd, vb,
                                    b.getBoolAttr(vMajor), b.getBoolAttr(false),
                                    b.getBoolAttr(false), 0,
                                    b.getStrArrayAttr(roles),
                                    b.getDenseI64ArrayAttr(scanGrid), 1, vd,
                                    false));
      // The step grid: the reverse scan's fields over (sequence, chunk,
      // value head) programs.
      f->setAttr(kStepPassAttr,
                 StatePassAttr::get(
                     b.getContext(), c, c, kd, vb, b.getBoolAttr(vMajor),
                     b.getBoolAttr(false), b.getBoolAttr(false), 0,
                     b.getStrArrayAttr(roles),
                     b.getDenseI64ArrayAttr({minusOne(seqsStatic),
                                             chunksStatic,
                                             minusOne(dimOf(v, 2))}),
                     1, vd, false));
      auto intraPass = [&](bool outside) {
        return IntraPassAttr::get(
            b.getContext(), c, c, fullConfig.subChunk, kd, vd,
            b.getStrArrayAttr(roles),
            b.getDenseI64ArrayAttr(
                {minusOne(seqsStatic), chunksStatic, minusOne(dimOf(v, 2))}),
            prologueDescription(b, fullConfig, bool(op.getGate()), channelGate,
                                bool(op.getBeta())),
            outside);
      };
      f->setAttr(kIntraPassAttr, intraPass(false));
      // The chunk grid: the same chunk recomputed under the tape, over the
      // same (sequence, chunk, value head) programs (its gate's activation
      // outside the tape where gateOutside).
      f->setAttr(kChunkPassAttr, intraPass(gateOutside));
    }
    castResults(tb, results, op);
    op->getBlock()->getOperations().splice(Block::iterator(op),
                                           scratch.getOperations());
    rewriter.replaceOp(op, results);
    return success();
  }

  /// The element type of the op's result `index` (a gradient: f32, or its
  /// input's type).
  static Type resultElementType(GatedDeltaGradOp op, size_t index) {
    return cast<ShapedType>(op->getResult(index).getType()).getElementType();
  }

  /// `results` in the op's result types: a converted copy where an element
  /// type differs (a gradient the op returns in its input's 16-bit type that
  /// a grid wrote in f32), a tensor.cast where only static sizes do.
  static void castResults(TensorTileBuilder &tb, SmallVector<Value> &results,
                          GatedDeltaGradOp op) {
    for (auto [r, want] : llvm::zip(results, op->getResultTypes())) {
      auto wantType = cast<RankedTensorType>(want);
      if (cast<RankedTensorType>(r.getType()).getElementType() !=
          wantType.getElementType())
        r = tb.convert(r, wantType.getElementType());
      if (r.getType() != want)
        r = tensor::CastOp::create(tb.builder(), want, r);
    }
  }

  /// [B, T, heads(, X)] from partials [B, T, HV, blocks(, X)]: output head
  /// j sums value heads [j group, (j + 1) group) and every V block; a grid
  /// over (batch row, chunk, head), one chunk's rows a program (`like`
  /// gives B and T). Every program is independent: a grid over (row, head)
  /// walking its chunks in turn ran 32 programs for T = 8192 H = 32 and took
  /// 3.5 ms per result on the H200 (bench/RESULTS.md, twenty-third session).
  /// With `into` (and `skip`), the sums write into it, and nothing where
  /// `skip` holds (a run-time i1: their rows count zero; `into` has them);
  /// `noPrograms`, the same condition in other terms (HV = H), empties the
  /// grid: the manifest states it, and the runtime skips the launch.
  static Value sumGroups(ImplicitLocOpBuilder &b, Value partials, Value like,
                         OpFoldResult heads, Value group, int64_t blocks,
                         int64_t c, Type elementType, Value into = {},
                         Value skip = {}, Value noPrograms = {}) {
    TensorTileBuilder tb(b);
    auto pType = cast<RankedTensorType>(partials.getType());
    const bool columns = pType.getRank() == 5;
    const int64_t width = columns ? pType.getDimSize(4) : 1;
    auto staticHeads = getConstantIntValue(heads);
    SmallVector<int64_t> shape = {pType.getDimSize(0), pType.getDimSize(1),
                                  staticHeads ? *staticHeads
                                              : ShapedType::kDynamic};
    SmallVector<OpFoldResult> sizes = {sizeOf(b, like, 0), sizeOf(b, like, 1),
                                       heads};
    if (columns) {
      shape.push_back(width);
      sizes.push_back({});
    }
    Value out = into ? into
                     : tb.emptyOfType(RankedTensorType::get(shape, elementType),
                                      sizes);
    if (skip && matchPattern(skip, m_One()))
      return out; // (static heads: nothing to sum, no grid)
    Value tokens = tensor::DimOp::create(b, like, 1);
    Value cIdx = tb.index(c);
    Value chunks = arith::CeilDivUIOp::create(b, tokens, cIdx);
    OpFoldResult headPrograms = heads;
    if (noPrograms)
      headPrograms = arith::SelectOp::create(
                         b, noPrograms, tb.index(0),
                         getValueOrCreateConstantIndexOp(b, b.getLoc(), heads))
                         .getResult();
    auto grid = scf::ForallOp::create(
        b, {sizeOf(b, like, 0), OpFoldResult(chunks), headPrograms},
        ValueRange{out}, std::nullopt);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(grid.getBody());
    TensorTileBuilder gb(b);
    Value row = grid.getInductionVar(0), ch = grid.getInductionVar(1),
          h = grid.getInductionVar(2);
    Value z = gb.index(0);
    Value local = arith::MulIOp::create(b, ch, cIdx);
    Value valid = validRows(b, cIdx, tokens, local);
    if (skip) // (min(valid, 0 or c): the tile lowering bounds a min's size)
      valid = arith::MinUIOp::create(
          b, valid, arith::SelectOp::create(b, skip, z, cIdx));
    SmallVector<int64_t> tile = {c};
    if (columns)
      tile.push_back(width);
    Value first = arith::MulIOp::create(b, h, group);
    auto sum = scf::ForOp::create(
        b, z, group, gb.index(1), ValueRange{gb.filled(tile, 0.0)},
        [&](OpBuilder &gnb, Location gl, Value g, ValueRange acc) {
          ImplicitLocOpBuilder gib(gl, gnb);
          TensorTileBuilder gtb(gib);
          Value hv = arith::AddIOp::create(gib, first, g);
          Value total = acc[0];
          for (int64_t blk = 0; blk < blocks; ++blk) {
            Value bi = gtb.index(blk);
            Value piece =
                columns ? gtb.load(partials, {row, local, hv, bi, z}, {1, 4},
                                   tile, valid)
                        : gtb.load(partials, {row, local, hv, bi}, {1}, tile,
                                   valid);
            total = gtb.map(tile, {total, piece},
                            [](ImplicitLocOpBuilder &bb, ValueRange s,
                               ValueRange) {
                              return Value(
                                  arith::AddFOp::create(bb, s[0], s[1]));
                            });
          }
          scf::YieldOp::create(gib, total);
        });
    // The chunk's valid rows of the program's (row, head), written in place.
    SmallVector<OpFoldResult> offsets = {row, local, h};
    SmallVector<OpFoldResult> regionSizes = {b.getIndexAttr(1), valid,
                                             b.getIndexAttr(1)};
    auto regionType =
        columns ? RankedTensorType::get({ShapedType::kDynamic, width},
                                        elementType)
                : RankedTensorType::get({ShapedType::kDynamic}, elementType);
    if (columns) {
      offsets.push_back(b.getIndexAttr(0));
      regionSizes.push_back(b.getIndexAttr(width));
    }
    SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
    Value region = tensor::ExtractSliceOp::create(
        b, regionType, grid.getRegionIterArgs()[0], offsets, regionSizes,
        strides);
    Value stored =
        columns ? gb.store(sum.getResult(0), region, {z, z}, {0, 1}, valid)
                : gb.store(sum.getResult(0), region, {z}, {0}, valid);
    b.setInsertionPointToStart(grid.getTerminator().getBody());
    tensor::ParallelInsertSliceOp::create(b, stored, grid.getRegionIterArgs()[0],
                                          offsets, regionSizes, strides);
    return grid.getResult(0);
  }

  /// The sum of partials[n, head, from .. to, 0 .. len) ([len], f32): a
  /// few static blocks unrolled, otherwise a loop taking eight blocks an
  /// iteration, summed pairwise (the ones past `to` read at its last and
  /// taken as zero): one dependent load an iteration left its latency
  /// exposed once a block (0.23 ms for d_dt_bias on the H200, thirty-first
  /// session's profile; thirty-two an iteration measured slower than eight,
  /// thirty-ninth session).
  static Value sumBlocks(ImplicitLocOpBuilder &ib, Value partials, Value n,
                         Value head, Value from, Value to,
                         std::optional<int64_t> fixed, int64_t len,
                         Value total) {
    TensorTileBuilder itb(ib);
    auto sum = [](ImplicitLocOpBuilder &bb, ValueRange s, ValueRange) {
      return Value(arith::AddFOp::create(bb, s[0], s[1]));
    };
    if (fixed) {
      for (int64_t blk = 0; blk < *fixed; ++blk) {
        Value piece = itb.load(partials, {n, head, itb.index(blk), itb.index(0)},
                               {3}, {len}, itb.index(len));
        total = itb.map({len}, {total, piece}, sum);
      }
      return total;
    }
    constexpr int64_t unroll = 8;
    Value last = arith::SubIOp::create(
        ib, arith::MaxUIOp::create(ib, to, itb.index(1)), itb.index(1));
    return scf::ForOp::create(
               ib, from, to, itb.index(unroll), ValueRange{total},
               [&](OpBuilder &bnb, Location bl, Value blk, ValueRange bacc) {
                 ImplicitLocOpBuilder bib(bl, bnb);
                 TensorTileBuilder btb(bib);
                 SmallVector<Value> pieces;
                 for (int64_t i = 0; i < unroll; ++i) {
                   Value at = arith::AddIOp::create(bib, blk, btb.index(i));
                   Value in = arith::CmpIOp::create(
                       bib, arith::CmpIPredicate::ult, at, to);
                   Value clamped = arith::MinUIOp::create(bib, at, last);
                   Value piece =
                       btb.load(partials, {n, head, clamped, btb.index(0)},
                                {3}, {len}, btb.index(len));
                   pieces.push_back(btb.map(
                       {len}, {piece},
                       [in](ImplicitLocOpBuilder &bb, ValueRange s,
                            ValueRange) {
                         Value zero = arith::ConstantOp::create(
                             bb, bb.getF32FloatAttr(0.0f));
                         return Value(
                             arith::SelectOp::create(bb, in, s[0], zero));
                       }));
                 }
                 while (pieces.size() > 1) {
                   SmallVector<Value> next;
                   for (size_t i = 0; i + 1 < pieces.size(); i += 2)
                     next.push_back(
                         btb.map({len}, {pieces[i], pieces[i + 1]}, sum));
                   pieces = next;
                 }
                 scf::YieldOp::create(bib,
                                      btb.map({len}, {bacc[0], pieces[0]}, sum));
               })
        .getResult(0);
  }

  /// [HV, len] (or [HV] with `squeeze`, len 1) from the partials
  /// [rows, HV, blocks, len] of `count` sequences: a grid over the value
  /// heads summing every sequence's and V block's. With `slices` (the
  /// gradient's per-chunk shares: thousands of blocks a head), first a grid
  /// over (value head, slice) summing each slice's run of blocks into
  /// [1, HV, slices, len], then the grid over the heads summing those: one
  /// program a head walking every chunk of 8 x 4096 tokens took 0.16 ms for
  /// d_dt_bias and 0.10 for d_A_log on the H100 (thirty-ninth session), on
  /// 32 of its 132 multiprocessors.
  static Value sumSequences(ImplicitLocOpBuilder &b, Value partials,
                            OpFoldResult hv, Value count, OpFoldResult blocks,
                            int64_t len, bool squeeze, int64_t slices = 0) {
    TensorTileBuilder tb(b);
    auto staticHeads = getConstantIntValue(hv);
    // A few static blocks (V blocks) unrolled; more, or as many as an
    // argument's dimension (the gradient's per-chunk shares, static where
    // the kept states' chunk count is: unrolled, a static count of 2^63 - 1
    // never finished building), a loop.
    std::optional<int64_t> fixed = getConstantIntValue(blocks);
    if (fixed && *fixed > 16)
      fixed.reset();
    if (slices > 1 && !fixed) {
      SmallVector<int64_t> shape = {1,
                                    staticHeads ? *staticHeads
                                                : ShapedType::kDynamic,
                                    slices, len};
      Value out = tb.emptyOfType(RankedTensorType::get(shape, b.getF32Type()),
                                 {{}, hv, {}, {}});
      auto grid = scf::ForallOp::create(b, {hv, b.getIndexAttr(slices)},
                                        ValueRange{out}, std::nullopt);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(grid.getBody());
        TensorTileBuilder gb(b);
        Value head = grid.getInductionVar(0), slice = grid.getInductionVar(1);
        Value all = getValueOrCreateConstantIndexOp(b, b.getLoc(), blocks);
        // Slice `slice` of ceil(all / slices) blocks, clipped to `all`.
        Value per = arith::CeilDivUIOp::create(b, all, gb.index(slices));
        Value from = arith::MinUIOp::create(
            b, arith::MulIOp::create(b, slice, per), all);
        Value to = arith::MinUIOp::create(
            b, arith::AddIOp::create(b, from, per), all);
        auto loop = scf::ForOp::create(
            b, gb.index(0), count, gb.index(1),
            ValueRange{gb.filled({len}, 0.0)},
            [&](OpBuilder &nb, Location loc, Value n, ValueRange acc) {
              ImplicitLocOpBuilder ib(loc, nb);
              scf::YieldOp::create(ib, sumBlocks(ib, partials, n, head, from,
                                                 to, std::nullopt, len,
                                                 acc[0]));
            });
        Value piece = tensor::ExpandShapeOp::create(
            b, RankedTensorType::get({1, 1, 1, len}, b.getF32Type()),
            loop.getResult(0), ArrayRef<ReassociationIndices>{{0, 1, 2, 3}});
        b.setInsertionPointToStart(grid.getTerminator().getBody());
        SmallVector<OpFoldResult> offsets = {b.getIndexAttr(0), head, slice,
                                             b.getIndexAttr(0)};
        SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(1),
                                           b.getIndexAttr(1),
                                           b.getIndexAttr(len)};
        tensor::ParallelInsertSliceOp::create(
            b, piece, grid.getRegionIterArgs()[0], offsets, sizes,
            SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
      }
      return sumSequences(b, grid.getResult(0), hv, tb.index(1),
                          b.getIndexAttr(slices), len, squeeze);
    }
    SmallVector<int64_t> shape = {staticHeads ? *staticHeads
                                              : ShapedType::kDynamic};
    SmallVector<OpFoldResult> dynamicSizes = {hv};
    if (!squeeze) {
      shape.push_back(len);
      dynamicSizes.push_back({});
    }
    Value out = tb.emptyOfType(RankedTensorType::get(shape, b.getF32Type()),
                               dynamicSizes);
    auto grid = scf::ForallOp::create(b, {hv}, ValueRange{out}, std::nullopt);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(grid.getBody());
    TensorTileBuilder gb(b);
    Value head = grid.getInductionVar(0);
    Value all = getValueOrCreateConstantIndexOp(b, b.getLoc(), blocks);
    auto loop = scf::ForOp::create(
        b, gb.index(0), count, gb.index(1), ValueRange{gb.filled({len}, 0.0)},
        [&](OpBuilder &nb, Location loc, Value n, ValueRange acc) {
          ImplicitLocOpBuilder ib(loc, nb);
          scf::YieldOp::create(ib, sumBlocks(ib, partials, n, head,
                                             TensorTileBuilder(ib).index(0),
                                             all, fixed, len, acc[0]));
        });
    b.setInsertionPointToStart(grid.getTerminator().getBody());
    SmallVector<OpFoldResult> offsets = {head}, sizes = {b.getIndexAttr(1)};
    if (!squeeze) {
      offsets.push_back(b.getIndexAttr(0));
      sizes.push_back(b.getIndexAttr(len));
    }
    tensor::ParallelInsertSliceOp::create(
        b, loop.getResult(0), grid.getRegionIterArgs()[0], offsets, sizes,
        SmallVector<OpFoldResult>(offsets.size(), b.getIndexAttr(1)));
    return grid.getResult(0);
  }

  int64_t chunk, subChunk, vBlock;
  bool recomputeStates;
  bool dStatesBf16;
  bool gateOutsideOption;
};

struct KdaTileChunksPass
    : mlir::kda::impl::KdaTileChunksBase<KdaTileChunksPass> {
  using KdaTileChunksBase::KdaTileChunksBase;

  void runOnOperation() override {
    std::string invalid = checkTileOptions(chunk, subChunk, vBlock);
    if (invalid.empty() && vBlockF32 != 0)
      invalid = checkTileOptions(chunk, subChunk, vBlockF32);
    if (invalid.empty() && vBlockGradient != 0)
      invalid = checkTileOptions(chunk, subChunk, vBlockGradient);
    if (!invalid.empty()) {
      getOperation().emitError() << "kda-tile-chunks: option " << invalid;
      return signalPassFailure();
    }
    if (boundarySlots != "copy" && boundarySlots != "kernel" &&
        boundarySlots != "none") {
      getOperation().emitError()
          << "kda-tile-chunks: boundary-slots must be 'copy', 'kernel' or "
             "'none', found '"
          << boundarySlots << "'";
      return signalPassFailure();
    }
    if (gradientStates != "recompute" && gradientStates != "required") {
      getOperation().emitError()
          << "kda-tile-chunks: gradient-states must be 'recompute' or "
             "'required', found '"
          << gradientStates << "'";
      return signalPassFailure();
    }
    if (schedule != "sequential" && schedule != "chunk-parallel") {
      getOperation().emitError()
          << "kda-tile-chunks: schedule must be 'sequential' or "
             "'chunk-parallel', found '"
          << schedule << "'";
      return signalPassFailure();
    }
    // Head dimensions the target lowers.
    if (maxHeadDim > 0) {
      WalkResult tooWide = getOperation().walk([&](Operation *op) {
        Value q, v;
        if (auto g = dyn_cast<GatedDeltaOp>(op))
          q = g.getQ(), v = g.getV();
        else if (auto w = dyn_cast<WindowAttentionOp>(op))
          q = w.getQ(), v = w.getV();
        else if (auto d = dyn_cast<DecodeStepOp>(op))
          q = d.getQ(), v = d.getV();
        else
          return WalkResult::advance();
        for (auto [name, value] : {std::pair<StringRef, Value>{"K", q},
                                   std::pair<StringRef, Value>{"V", v}}) {
          int64_t d = cast<RankedTensorType>(value.getType()).getShape().back();
          if (!ShapedType::isDynamic(d) && d > maxHeadDim) {
            op->emitError() << "kda-tile-chunks: head dimension " << name
                            << " = " << d << " exceeds the largest this "
                            << "target lowers, " << int64_t(maxHeadDim)
                            << " (its tiles would not fit a block)";
            return WalkResult::interrupt();
          }
        }
        return WalkResult::advance();
      });
      if (tooWide.wasInterrupted())
        return signalPassFailure();
    }
    // Tile fields no target takes would be dropped without a word: refused.
    WalkResult badTile = getOperation().walk([&](Operation *op) {
      auto tile = op->getAttrOfType<TileAttr>("tile");
      if (!tile)
        return WalkResult::advance();
      std::string why = untakenTileFields(op, tile);
      if (why.empty())
        return WalkResult::advance();
      op->emitError() << "kda-tile-chunks: #kda.tile " << why;
      return WalkResult::interrupt();
    });
    if (badTile.wasInterrupted())
      return signalPassFailure();
    // Segments (the op's #kda.tile or the pass option) where the op takes
    // them.
    WalkResult badSegments = getOperation().walk([&](GatedDeltaOp op) {
      std::string why = segmentsRefusal(op, segmentsOf(op, segments),
                                        schedule == "chunk-parallel");
      if (why.empty())
        return WalkResult::advance();
      op.emitError() << "kda-tile-chunks: " << why;
      return WalkResult::interrupt();
    });
    if (badSegments.wasInterrupted())
      return signalPassFailure();
    // Static sizes wherever the op states them (refineStaticSizes).
    SmallVector<Operation *> kdaOps;
    getOperation().walk([&](Operation *op) {
      if (isa<GatedDeltaOp, GatedDeltaGradOp, WindowAttentionOp>(op))
        kdaOps.push_back(op);
    });
    for (Operation *op : kdaOps)
      refineStaticSizes(op);
    // Boundary states are recorded where a chunk starts: an interval the
    // chunks do not end on would leave boundaries inside chunks unwritten
    // (zeros), a silent wrong answer. Refuse it, naming what would work.
    WalkResult badInterval = getOperation().walk([&](GatedDeltaOp op) {
      std::optional<int64_t> interval = op.getBoundaryInterval();
      if (!op.getBoundaryStates() || !interval)
        return WalkResult::advance();
      if (op.getBoundaryIndices() && boundarySlots == "none") {
        op.emitError() << "kda-tile-chunks: boundary states into pool slots "
                          "(boundary_indices) are not supported on this "
                          "target: they are written by the NVIDIA register "
                          "state kernel (chunk-parallel schedule, "
                          "state-registers)";
        return WalkResult::interrupt();
      }
      // The pool's slot count is the caller's: no operand says it.
      if (op.getBoundaryIndices() &&
          ShapedType::isDynamic(dimOf(op.getBoundaryStates(), 0)) &&
          !kernelDestination(op.getBoundaryStates())) {
        op.emitError() << "kda-tile-chunks: boundary states into pool slots "
                          "with a dynamic pool size (result 'boundary_states' "
                          "dimension 0) need a destination-style kernel (the "
                          "caller passes the pool, as in the GPU pipelines) "
                          "or a static pool size";
        return WalkResult::interrupt();
      }
      if (!op.getBoundaryIndices() && op.getCuSeqlens() &&
          ShapedType::isDynamic(dimOf(op.getBoundaryStates(), 1)) &&
          !kernelDestination(op.getBoundaryStates())) {
        op.emitError() << "kda-tile-chunks: boundary_states with cu_seqlens "
                          "and a dynamic NT: NT is the caller's choice, so "
                          "the op must be a destination-style kernel (the "
                          "caller passes the result buffer) or NT static";
        return WalkResult::interrupt();
      }
      int64_t c = tileSizes(op.getTile(), chunk, subChunk).first;
      if (c > 0 && *interval % c != 0) {
        op.emitError() << "kda-tile-chunks: boundary_interval " << *interval
                       << " is not a multiple of the chunk " << c
                       << ": boundary states are taken where chunks start "
                          "(use an interval that is a multiple of "
                       << c << ", or a chunk that divides " << *interval
                       << ")";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (badInterval.wasInterrupted())
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    patterns.add<TileGatedDelta>(&getContext(), chunk, subChunk, vBlock,
                                 vBlockF32, schedule == "chunk-parallel",
                                 boundarySlots == "kernel", subChunkSteps,
                                 wideSteps, segments);
    patterns.add<TileDecodeStep>(&getContext(), vBlock);
    patterns.add<TileGatedDeltaGrad>(
        &getContext(), chunk, subChunk,
        vBlockGradient > 0 ? int64_t(vBlockGradient) : int64_t(vBlock),
        gradientStates == "recompute", gradientDStatesBf16,
        gradientGateOutside);
    patterns.add<TileWindowAttention>(&getContext(), chunk);
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    // Never a failure without a message: kda-compile would exit 1 with
    // nothing to show (a pattern that created ops and then failed did that).
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config))) {
      getOperation().emitError()
          << "kda-tile-chunks: internal error: the rewrite did not converge";
      return signalPassFailure();
    }
    // Whatever is left could not be tiled: say why instead of miscompiling.
    WalkResult result = getOperation().walk([&](Operation *op) {
      if (isa<GatedDeltaGradOp>(op)) {
        // The pattern said why where it could; otherwise the head
        // dimensions are dynamic.
        auto grad = cast<GatedDeltaGradOp>(op);
        if (ShapedType::isDynamic(dimOf(grad.getQ(), 3)) ||
            ShapedType::isDynamic(dimOf(grad.getV(), 3)))
          op->emitError() << "kda-tile-chunks: cannot tile this op (head "
                             "dimensions K and V must be static)";
        return WalkResult::interrupt();
      }
      if (isa<GatedDeltaOp, DecodeStepOp, WindowAttentionOp>(op)) {
        op->emitError() << "kda-tile-chunks: cannot tile this op (head "
                           "dimensions K and V and the number of boundary "
                           "states must be static; v_block must divide V)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
