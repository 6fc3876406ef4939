//===- GpuIntraRegisters.cpp - the intra-chunk grid in registers ----------===//
//
// The chunk-parallel schedule's intra-chunk grid runs one program per
// (sequence, chunk, value head) (varlen: per window of C packed tokens, and
// per sequence for its chunk 0: IntraProgram::emitVarlen, a flat grid with no
// empty programs) and computes everything of a chunk that does not depend on
// the state entering it: the prologue (l2 norm, scale, beta and gate
// activations), the gate's prefix sum G, the decayed products
//
//   P = tril(Q_r K_r^T),  L = beta * strict_tril(K'_r K_r^T),  A = (I + L)^-1
//   W = A (beta Gamma K),  U = A (beta V)
//
// and the decayed q and k the state pass reads. Lowered like every tile
// program, each of these steps is a phase over shared memory fenced by
// barriers (64 per chunk). This pass runs the algorithm itself,
// passes/GatedDeltaKernel.cpp's emitIntraChunk, on lane tiles
// (lowering/lanes/LaneTiles.h) for NVIDIA tensor cores: tf32 mma.sync
// products (3xTF32 for fp32 inputs), the decays factored through a reference
// row per group of keys, or pairwise where a warp's gates would overflow f32
// (LaneTileBuilder::factoredPairs), the triangular inverse per lane.
//
// What is this file's own is the memory side: the grid (dense or the flat
// varlen grid), loading the chunk's rows into blocked() tiles (lane (g, t),
// g = lane / 4, t = lane % 4, holds rows g and g + 8 of K / warps / 4
// consecutive columns: every global row access one 16-byte vector; the
// products take them as they are, the tile builder relabels the contracted
// index), the shared memory the builder uses where data crosses warps (sums
// across warps, the inverse's exchange, the parked right-hand sides of the
// UT transform), and storing each workspace as soon as the algorithm has it
// final (emitIntraChunk's `early` and `done` hooks).
//
// AMD: the same program on the chip's matrix unit (the strategy's mfma /
// wmma: LaneTileBuilder::unitProduct, f32 operands), blocked() with one row
// a lane on 64-lane waves; the products' fragments come from the blocked
// rows through the exchange region. Unbounded gates' pairwise decays take
// the factored form on the unit (LaneTileBuilder::unitFactoredPairs: each
// warp sizes its key groups by its own gates, down to exact pairwise).
//
// What it does not take (chunks other than 16 in one sub-chunk, sizes that
// do not split over the warps) is intraLanesRefusal's answer to
// kda-gpu-select-strategy, which gives those kernels the tile lowering and
// says so in a remark.
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"
#include "lowering/lanes/LaneBuilder.h"
#include "lowering/lanes/LaneTiles.h"
#include "lowering/lanes/PassDescription.h"
#include "lowering/Strategy.h"

#include "passes/GatedDeltaKernel.h"
#include "passes/TileAdjoint.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Pass/Pass.h"

#include "lowering/Passes.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAGPUINTRAREGISTERS
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;
using namespace mlir::kda;

namespace {

struct IntraPassConfig : PrologueDescription {
  int64_t chunk = 0, subChunk = 0, keyDim = 0, valueDim = 0;
  SmallVector<std::string> roles;
  SmallVector<int64_t> grid; // (sequence, chunk, head); -1 dynamic
  bool gateOutside = false;   // the chunk grid's: see #kda.intra_pass
};

std::optional<IntraPassConfig> readConfig(IntraPassAttr desc) {
  if (!desc)
    return std::nullopt;
  IntraPassConfig c;
  c.chunk = desc.getChunk();
  c.subChunk = desc.getSubChunk();
  c.keyDim = desc.getKeyDim();
  c.valueDim = desc.getValueDim();
  c.readPrologue(desc.getPrologue());
  for (Attribute r : desc.getWorkspaces())
    c.roles.push_back(cast<StringAttr>(r).getValue().str());
  llvm::append_range(c.grid, desc.getGrid().asArrayRef());
  c.gateOutside = desc.getGateOutside();
  return c;
}

/// The f32 words of shared memory the program gives the lane tile builder
/// (C = 16, K, V, NW warps): sums across warps (the 16 x 16 products'
/// accumulators, 8 registers a lane and the decayed pairs of P and L in one
/// sum: 16; two halves), each warp's exchange region (the triangular
/// inverse's column per lane to the products' fragments, and beta Gamma K /
/// beta V as B operands, each warp its columns; on AMD also K^T's fragments,
/// a warp's [KW, C], from the blocked rows), and the parking of beta Gamma K
/// and beta V (row-major, 16-byte rows plus 4 words).
struct SharedWords {
  int64_t scratch = 0, exchange = 0, parking = 0;
  int64_t bytes() const { return 4 * (scratch + exchange + parking); }
};
SharedWords sharedWords(int64_t C, int64_t K, int64_t V, int64_t NW,
                        bool amd, int64_t exchangeSlack = 0) {
  SharedWords w;
  if (NW > 1)
    w.scratch = 2 * NW * (2 * C * C / 32) * 32;
  const int64_t wide = std::max(std::max(K / NW, V / NW), C);
  w.exchange =
      NW * (amd ? std::max(C * (wide + 1), wide * (C + 1))
                : C * (wide + 1 + exchangeSlack));
  auto rowWords = [](int64_t d) { return (d + 3) / 4 * 4 + 4; };
  w.parking = C * (rowWords(K) + rowWords(V));
  return w;
}

/// Emits one program of the intra-chunk grid. Sizes: C = 16 (chunk), K, V,
/// NW warps, KW = K / NW and VW = V / NW columns per warp, KL = KW / 4 and
/// VL = VW / 4 per lane and row.
struct IntraProgram : kda::LaneBuilder {
  const IntraPassConfig &cfg;
  /// The matrix unit (the strategy's instruction; AMD's: MFMA, WMMA, or
  /// WMMA emulated on NVIDIA for tests) and its warp size. A block's rows
  /// sit on the lane bits above the two column bits: two row halves (g,
  /// g + 8) a lane on 32-lane warps, one row a lane on 64-lane waves.
  kda::MatrixUnit unit;
  bool emulated;
  int64_t warpSize, halves;
  int64_t C, K, V, NW, KW, VW, KL, VL;
  bool precise;
  bool amd() const { return unit != kda::MatrixUnit::MmaSync; }
  // Arguments.
  Value q, k, v, gate, beta, aLog, dtBias, cuSeqlens;
  Value ws[6]; // w, u, q, k, p, g (null when absent)
  // Lane coordinates.
  Value tid, lane, warp, g, t, colK, colV;

  IntraProgram(ImplicitLocOpBuilder &b, const IntraPassConfig &cfg,
               int64_t threads, bool precise, kda::MatrixUnit unit,
               bool emulated)
      : LaneBuilder(b), cfg(cfg), unit(unit), emulated(emulated),
        warpSize(kda::LaneTileBuilder::unitWarpSize(unit)),
        halves(2 * 32 / kda::LaneTileBuilder::unitWarpSize(unit)),
        C(cfg.chunk), K(cfg.keyDim), V(cfg.valueDim),
        NW(threads / warpSize), KW(cfg.keyDim / NW), VW(cfg.valueDim / NW),
        KL(KW / 4), VL(VW / 4), precise(precise) {}

  /// The kernel's inputs by their ABI names (null where absent).
  void bindInputs(func::FuncOp func, ArrayAttr abi) {
    auto byName = [&](StringRef name) {
      return kda::abiArgument(func, abi, name);
    };
    q = byName("q");
    k = byName("k");
    v = byName("v");
    gate = byName("gate");
    beta = byName("beta");
    aLog = byName("A_log");
    dtBias = byName("dt_bias");
    cuSeqlens = byName("cu_seqlens");
  }

  /// Runs `body` only where `cond` holds.
  void when(Value cond, llvm::function_ref<void()> body) {
    auto op = scf::IfOp::create(b, cond, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(op.thenBlock());
    body();
  }

  /// `width` consecutive elements of `mem` at (prefix..., col) as f32, with
  /// the widest vector loads up to 16 bytes; zeros where `keep` is false.
  SmallVector<Value> loadRow(Value mem, ValueRange prefix, Value col,
                             int64_t width, Value keep) {
    SmallVector<Value> out =
        kda::loadRowAsF32(b, b.getLoc(), mem, prefix, col, width);
    if (keep)
      for (Value &x : out)
        x = select(keep, x, f32(0.0));
    return out;
  }

  /// Stores f32 `values` at consecutive columns of `mem` from (prefix...,
  /// col), converted to mem's element type (bf16 workspaces), 16 bytes at a
  /// time where the count allows (`col` is a multiple of the vector).
  void storeRow(Value mem, ValueRange prefix, Value col,
                ArrayRef<Value> values) {
    kda::storeRowFromF32(b, b.getLoc(), mem, prefix, col, values);
  }

  void emit(ArrayRef<Value> ivs) {
    Value n = ivs[0], chunkIdx = ivs[1], head = ivs[2];
    if (cuSeqlens)
      return emitVarlen(chunkIdx, head);
    Value tokens = memref::DimOp::create(b, q, 1);
    Value local = mul(chunkIdx, C);
    // Chunks past a shorter sequence's end have nothing to do (the
    // condition is uniform over the block: the barriers inside are safe).
    when(ult(local, tokens), [&] {
      emitChunk(n, local, arith::SubIOp::create(b, tokens, local), head);
    });
  }

  /// Varlen: the flat grid over the packed tokens, ceil(T / C) + N programs
  /// per head (a grid of sequences x the longest sequence's chunks launched
  /// N times as many, nearly all of them empty at N = 32):
  ///   * program x < ceil(T / C) takes the chunk that starts in tokens
  ///     [x C, x C + C) of the sequence holding token x C, found by a binary
  ///     search over cu_seqlens, unless it is that sequence's chunk 0 (a
  ///     sequence's chunks start every C tokens, so one starts in each window
  ///     it covers);
  ///   * program ceil(T / C) + n takes chunk 0 of sequence n.
  /// Every chunk is taken exactly once, with one copy of the chunk's code
  /// and no loop around it (values kept live across it would spill: it is
  /// at its register limit). Everything is uniform over the block, so the
  /// barriers inside the chunk are safe.
  void emitVarlen(Value x, Value head) {
    Type indexType = b.getIndexType();
    auto offset = [&](Value i) -> Value {
      Value e = memref::LoadOp::create(b, cuSeqlens, ValueRange{i});
      return arith::IndexCastOp::create(b, indexType, e);
    };
    auto slt = [&](Value l, Value r) -> Value {
      return arith::CmpIOp::create(b, arith::CmpIPredicate::slt, l, r);
    };
    Value numSeq =
        arith::SubIOp::create(b, memref::DimOp::create(b, cuSeqlens, 0), idx(1));
    Value windows = arith::CeilDivUIOp::create(
        b, memref::DimOp::create(b, q, 1), idx(C));
    Value w0 = mul(x, C);
    Type i1 = b.getI1Type();
    auto pick = scf::IfOp::create(b, TypeRange{i1, indexType, indexType},
                                  slt(x, windows), /*withElseRegion=*/true);
    {
      // A window: the last n in [0, N) with cu[n] <= x C (with empty
      // sequences, the last of equal offsets: the one that holds the token).
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(pick.thenBlock());
      auto search = scf::WhileOp::create(
          b, TypeRange{indexType, indexType},
          ValueRange{idx(0), arith::SubIOp::create(b, numSeq, idx(1))},
          [&](OpBuilder &nb, Location, ValueRange lohi) {
            OpBuilder::InsertionGuard inner(b);
            b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
            scf::ConditionOp::create(b, slt(lohi[0], lohi[1]), lohi);
          },
          [&](OpBuilder &nb, Location, ValueRange lohi) {
            OpBuilder::InsertionGuard inner(b);
            b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
            Value mid = arith::DivSIOp::create(
                b, add(add(lohi[0], lohi[1]), 1), idx(2));
            Value le = arith::CmpIOp::create(b, arith::CmpIPredicate::sle,
                                             offset(mid), w0);
            scf::YieldOp::create(
                b, ValueRange{select(le, mid, lohi[0]),
                              select(le, lohi[1],
                                     arith::SubIOp::create(b, mid, idx(1)))});
          });
      Value first = search.getResult(0);
      Value start = offset(first), end = offset(add(first, 1));
      // Its first chunk start at or after x C (x C >= start here).
      Value local = mul(
          arith::CeilDivSIOp::create(b, arith::SubIOp::create(b, w0, start),
                                     idx(C)),
          C);
      Value t0 = add(start, local);
      Value take = arith::AndIOp::create(
          b, arith::AndIOp::create(b, slt(idx(0), numSeq), slt(idx(0), local)),
          arith::AndIOp::create(b, slt(t0, add(w0, C)), slt(t0, end)));
      scf::YieldOp::create(b, ValueRange{take, t0, end});
    }
    {
      // Chunk 0 of sequence x - ceil(T / C), if it has one.
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(pick.elseBlock());
      Value n = arith::SubIOp::create(b, x, windows);
      Value has = slt(n, numSeq);
      Value seq = select(has, n, idx(0));
      Value start = offset(seq), end = offset(add(seq, 1));
      Value take = arith::AndIOp::create(b, has, slt(start, end));
      scf::YieldOp::create(b, ValueRange{take, start, end});
    }
    Value t0 = pick.getResult(1), end = pick.getResult(2);
    when(pick.getResult(0), [&] {
      emitChunk(idx(0), t0, arith::SubIOp::create(b, end, t0), head);
    });
  }

  /// A chunk's rows as a lane sees them: rows g and g + 8,
  /// whether each is a token of the sequence, the token it reads (the last
  /// valid one past the end), and the lane coordinates (tid, lane, warp, g,
  /// t, colK, colV).
  struct ChunkRows {
    Value valid, qkHead;
    Value ok[2], tok[2];
  };
  ChunkRows chunkRows(Value t0, Value remaining, Value head) {
    ChunkRows cr;
    cr.valid = minu(idx(C), remaining);
    Value lastRow = arith::SubIOp::create(b, cr.valid, idx(1));
    Value heads = memref::DimOp::create(b, v, 2);
    Value qkHeads = memref::DimOp::create(b, q, 2);
    cr.qkHead = arith::DivUIOp::create(
        b, head, arith::DivUIOp::create(b, heads, qkHeads));

    tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    lane = arith::RemUIOp::create(b, tid, idx(warpSize));
    warp = arith::DivUIOp::create(b, tid, idx(warpSize));
    g = arith::DivUIOp::create(b, lane, idx(4));
    t = arith::RemUIOp::create(b, lane, idx(4));
    colK = add(mul(warp, KW), mul(t, KL));
    colV = add(mul(warp, VW), mul(t, VL));
    for (int h = 0; h < halves; ++h) {
      Value r = add(g, 8 * h);
      cr.ok[h] = ult(r, cr.valid);
      cr.tok[h] = add(t0, minu(r, lastRow));
    }
    return cr;
  }

  /// [C, D] tiles as the program loads them: lane (g, t) holds rows g and
  /// g + 8 of D / NW / 4 consecutive columns (16-byte vectors), t after t,
  /// warp after warp. Products over D take them as they are (the lane tile
  /// builder relabels the contracted index: relabeledOperands).
  kda::LaneLayout blocked(int64_t D) const {
    return kda::LaneTileBuilder::rowBlocked(D, warpSize, NW);
  }
  /// The rows of blocked(): one register per row half, copies on t and on
  /// the warps (beta).
  kda::LaneLayout blockedRows() const {
    kda::LaneLayout l;
    l.shape = {C};
    l.regs = {{0}, {8}};
    l.lanes = {{0}, {0}, {1}, {2}, {4}};
    if (halves == 1) {
      l.regs = {{0}};
      l.lanes.push_back({8});
    }
    for (int64_t w = 1; w < NW; w *= 2)
      l.warps.push_back({0});
    return l;
  }
  /// The columns of blocked(): copies on g (dt_bias, G's last row).
  kda::LaneLayout blockedColumns(int64_t D) const {
    const int64_t DW = D / NW, DL = DW / 4;
    kda::LaneLayout l;
    l.shape = {D};
    for (int64_t c = 0; c < DL; ++c)
      l.regs.push_back({c});
    l.lanes = {{DL}, {2 * DL}, {0}, {0}, {0}};
    if (halves == 1)
      l.lanes.push_back({0});
    for (int64_t w = 1; w < NW; w *= 2)
      l.warps.push_back({DW * w});
    return l;
  }

  /// Whether registers r and r + 1 of a rank-2 layout are columns j and
  /// j + 1 of one row (j even): one 8-byte access.
  static bool pairedWithNext(const kda::LaneLayout &l, size_t r) {
    return l.rank() == 2 && r + 1 < l.regs.size() &&
           l.regs[r + 1][0] == l.regs[r][0] &&
           l.regs[r + 1][1] == l.regs[r][1] + 1 && l.regs[r][1] % 2 == 0;
  }

  /// Stores the rows below `valid` of a [C, D] tile at mem[prefix(i)...,
  /// column] or of a [C] tile at mem[prefix(i)...], each element once (the
  /// first copy): blocked() tiles as 16-byte rows, other layouts by element,
  /// consecutive column pairs of a lane as one vector.
  void storeRows(kda::LaneTileBuilder &tb, Value tile, Value mem,
                 llvm::function_ref<SmallVector<Value>(Value i)> prefix,
                 Value valid) {
    const kda::LaneLayout &l = tb.layoutOf(tile);
    ArrayRef<Value> regs = tb.registersOf(tile);
    if (l.rank() == 2 && l == blocked(l.shape[1])) {
      // 16-byte rows.
      const int64_t DL = l.regs.size() / halves;
      Value col = add(mul(warp, l.shape[1] / NW), mul(t, DL));
      for (int h = 0; h < halves; ++h) {
        Value i = add(g, 8 * h);
        when(ult(i, valid), [&] {
          storeRow(mem, prefix(i), col, regs.slice(h * DL, DL));
        });
      }
      return;
    }
    Value first = tb.holdsFirstCopy(l);
    when(first, [&] {
      for (size_t r = 0; r < l.regs.size(); ++r) {
        const bool pair = pairedWithNext(l, r);
        Value i = tb.coordinate(l, r, 0);
        Value j = l.rank() == 2 ? tb.coordinate(l, r, 1) : Value();
        SmallVector<Value> values = {regs[r]};
        if (pair)
          values.push_back(regs[r + 1]);
        when(ult(i, valid), [&] {
          if (l.rank() == 1)
            memref::StoreOp::create(
                b,
                fromF32(values[0],
                        cast<MemRefType>(mem.getType()).getElementType()),
                mem, prefix(i));
          else
            storeRow(mem, prefix(i), j, values);
        });
        if (pair)
          ++r;
      }
    });
  }

  /// A [C, D] tile's rows below `valid` at mem[row, t0 + i, head, column]
  /// (workspaces [B, T, H, D]).
  void storeTile(kda::LaneTileBuilder &tb, Value tile, Value mem, Value row,
                 Value t0, Value head, Value valid) {
    storeRows(
        tb, tile, mem,
        [&](Value i) { return SmallVector<Value>{row, add(t0, i), head}; },
        valid);
  }

  /// A [C, D] tile of mem[row, token, headIdx, col ...] rows in blocked():
  /// rows past the sequence's end read its last row, zeros there where
  /// `masked`.
  Value loadBlocked(kda::LaneTileBuilder &tb, const ChunkRows &cr, Value mem,
                    Value row, Value headIdx, Value col, int64_t D,
                    bool masked) {
    SmallVector<Value> regsOut;
    for (int h = 0; h < halves; ++h)
      llvm::append_range(regsOut,
                         loadRow(mem, {row, cr.tok[h], headIdx}, col,
                                 D / NW / 4, masked ? cr.ok[h] : Value()));
    return tb.make(blocked(D), regsOut);
  }

  /// The lane tile builder's products, shared memory and anchor, as every
  /// chunk program of this file sets them up.
  void setUpBuilder(kda::LaneTileBuilder &tb) {
    Type f32Type = b.getF32Type();
    // Products of f32 tiles (decayed q and k need f32's range): one TF32
    // product a step for 16-bit inputs, 3xTF32 for fp32 inputs; AMD: MFMA's
    // fp32 steps, WMMA's three bf16 products (LaneTileBuilder::unitProduct).
    if (amd())
      tb.useMatrixUnit(unit, f32Type, emulated);
    else
      tb.useMmaSync(f32Type, precise);
    auto wg = gpu::AddressSpaceAttr::get(b.getContext(),
                                         gpu::AddressSpace::Workgroup);
    // Sums across warps: the 16 x 16 products' accumulators (8 registers a
    // lane; the decayed pairs of P and L meet in one sum: 16); two halves.
    const SharedWords words =
        sharedWords(C, K, V, NW, amd(), wideExchange ? 7 : 0);
    tb.searchExchangeStrides(wideExchange);
    tb.searchExchangeSwizzles(wideExchange && exchangeSwizzle);
    if (words.scratch)
      tb.useScratch(memref::AllocOp::create(
          b, MemRefType::get({words.scratch}, f32Type,
                             MemRefLayoutAttrInterface(), wg)));
    // The triangular inverse leaves a column per lane; the products take
    // mma.sync's fragments: converted through each warp's region.
    // W and U take beta Gamma K and beta V (rows of tokens) as B operands
    // (the contracted index on the rows): through the same regions, each
    // warp its columns.
    // AMD: the fragments of K^T (Q K^T's B operand, a warp's [KW, C]) come
    // from the blocked rows through the region too (an MFMA B register's
    // source register differs between lanes).
    tb.useExchange(memref::AllocOp::create(
        b, MemRefType::get({words.exchange}, f32Type,
                           MemRefLayoutAttrInterface(), wg)));
    tb.preferColumnSplits();
    // beta Gamma K and beta V, parked through the intra-chunk matrices
    // (row-major, 16-byte rows plus 4 words): the UT transform's products
    // read them from there as B operands, and their registers are free for
    // the pairs (held, ptxas spilled the softplus gate's form at 128).
    tb.useParking(memref::AllocOp::create(
        b, MemRefType::get({words.parking}, f32Type,
                           MemRefLayoutAttrInterface(), wg)));
    // Fills of the chunk's [C, C] matrices (the algorithm's P and L before
    // their blocks are inserted): the accumulator's layout, a copy per warp.
    kda::LaneLayout cc =
        kda::LaneTileBuilder::unitAccumulator(unit, C, C).spread({C, C},
                                                                 {0, 0}, NW);
    tb.anchor(cc);
  }

  /// The chunk's inputs as blocked() tiles (rows past the sequence's end
  /// zero; the gate reads the last valid row there), beta as blockedRows(),
  /// A_log a scalar, dt_bias as blockedColumns(K) (head-wise: copies).
  kda::ChunkInputs loadInputs(kda::LaneTileBuilder &tb, const ChunkRows &cr,
                              Value row, Value head) {
    const Value *ok = cr.ok, *tok = cr.tok;
    Value qkHead = cr.qkHead;
    auto loadTile = [&](Value mem, Value headIdx, Value col, int64_t D,
                        bool masked) {
      return loadBlocked(tb, cr, mem, row, headIdx, col, D, masked);
    };
    kda::ChunkInputs in;
    in.q = loadTile(q, qkHead, colK, K, true);
    in.k = loadTile(k, qkHead, colK, K, true);
    in.v = loadTile(v, head, colV, V, true);
    if (cfg.gate == "channel") {
      in.gate = loadTile(gate, head, colK, K, false);
    } else if (cfg.gate == "head") {
      SmallVector<Value> regsOut;
      for (int h = 0; h < halves; ++h) {
        Value x = toF32(
            memref::LoadOp::create(b, gate, ValueRange{row, tok[h], head}));
        regsOut.append(KL, x);
      }
      in.gate = tb.make(blocked(K), regsOut);
    }
    if (cfg.beta) {
      SmallVector<Value> bs;
      for (int h = 0; h < halves; ++h)
        bs.push_back(select(ok[h],
                            toF32(memref::LoadOp::create(
                                b, beta, ValueRange{row, tok[h], head})),
                            f32(0.0)));
      in.beta = tb.make(blockedRows(), bs);
    }
    if (aLog)
      in.aLog = toF32(memref::LoadOp::create(b, aLog, ValueRange{head}));
    if (dtBias) {
      SmallVector<Value> dt;
      if (cast<MemRefType>(dtBias.getType()).getRank() == 2)
        dt = loadRow(dtBias, {head}, colK, KL, {});
      else
        dt.assign(KL, toF32(memref::LoadOp::create(b, dtBias,
                                                   ValueRange{head})));
      in.dtBias = tb.make(blockedColumns(K), dt);
    }
    in.validRows = cr.valid;
    return in;
  }

  /// One chunk, emitIntraChunk (passes/GatedDeltaKernel.cpp) on lane tiles:
  /// this driver loads the chunk's inputs into blocked() tiles and stores
  /// what the state pass reads; every step between is the algorithm's.
  void emitChunk(Value row, Value t0, Value remaining, Value head) {
    ChunkRows cr = chunkRows(t0, remaining, head);
    Value valid = cr.valid;
    kda::LaneTileBuilder tb(b, warpSize, NW, lane, warp);
    setUpBuilder(tb);
    kda::ChunkInputs in = loadInputs(tb, cr, row, head);

    kda::ChunkConfig config = cfg.chunkConfig(C, cfg.subChunk, K, V);
    // What the state pass reads of q and k, stored as soon as it is final
    // (its registers are free for the products after).
    auto early = [&](Value qDecayed, Value kToEnd, Value decayLast) {
      if (!tb.failure().empty())
        return;
      storeTile(tb, qDecayed, ws[2], row, t0, head, valid);
      storeTile(tb, kToEnd, ws[3], row, t0, head, valid);
      if (decayLast) {
        // exp(G_last) in the chunk's first row, stored by the lanes of row 0.
        SmallVector<Value> gl = tb.convertLayout(decayLast, blockedColumns(K));
        if (!tb.failure().empty())
          return;
        when(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, g, idx(0)),
             [&] { storeRow(ws[5], {row, t0, head}, colK, gl); });
      }
    };
    // P, W and U stored as each is final (their registers free for what
    // follows).
    auto done = [&](StringRef role, Value tile) {
      if (!tb.failure().empty())
        return;
      Value mem = role == "p" ? ws[4] : role == "w" ? ws[0] : ws[1];
      // 16-bit W and U leave the products' accumulator layout (a lane's
      // column pairs: one 4-byte store each, half of every sector) for
      // blocked() rows through the warp's exchange region: 16-byte stores,
      // a quarter of the store instructions and of the partial-sector
      // writes L2 merges. 1 to 2.4 % of the forward on the H100, every case
      // measured (bench/RESULTS.md, forty-second session). (f32 workspaces,
      // twice the bytes a pair, and AMD's waves keep the direct stores.)
      if (role != "p" && !amd() &&
          cast<MemRefType>(mem.getType()).getElementTypeBitWidth() == 16) {
        const kda::LaneLayout &l = tb.layoutOf(tile);
        if (l.rank() == 2 && !(l == blocked(l.shape[1])))
          tile = tb.make(blocked(l.shape[1]),
                         tb.convertLayout(tile, blocked(l.shape[1])));
      }
      storeTile(tb, tile, mem, row, t0, head, valid);
    };
    (void)kda::emitIntraChunk(tb, config, in, early, done);
    if (!tb.failure().empty())
      failure = tb.failure();
  }
  // The gradient's chunk grid (kda.chunk_pass): the step grid's seeds in,
  // the chunk's gradients out.
  Value seeds[6]; // dW, d(Gamma Q), d(decayed k), dP, d(exp(g_last)), dU
  Value dqPart, dkPart, dV, dGate, dBeta, dALogShares, dDtShares;
  // dq and dk themselves (written here where q, k and v have as many heads).
  Value dQ, dK;
  // The activated gate's gradient (f32 [B, T, HV, K]) where the gate's
  // activation is outside the tape (cfg.gateOutside).
  Value dGateAct;

  /// A [C, D] seed of workspace `mem` ([B, T, HV, D], the step grid's) in
  /// `layout` (the forward value's it seeds): rows below cr.valid of
  /// mem[row, t0 + i, head, :], zeros below. Every lane loads its own
  /// registers (copies included), rows past the end read the last valid one.
  Value loadSeed(kda::LaneTileBuilder &tb, const kda::LaneLayout &l, Value mem,
                 Value row, Value t0, Value head, const ChunkRows &cr) {
    const int64_t D = l.shape[1];
    if (l == blocked(D))
      return loadBlocked(tb, cr, mem, row, head,
                         add(mul(warp, D / NW), mul(t, D / NW / 4)), D, true);
    Value lastRow = arith::SubIOp::create(b, cr.valid, idx(1));
    SmallVector<Value> regs(l.regs.size());
    for (size_t r = 0; r < l.regs.size(); ++r) {
      const bool pair = pairedWithNext(l, r);
      Value i = tb.coordinate(l, r, 0), j = tb.coordinate(l, r, 1);
      SmallVector<Value> x = loadRow(mem, {row, add(t0, minu(i, lastRow)), head},
                                     j, pair ? 2 : 1, ult(i, cr.valid));
      regs[r] = x[0];
      if (pair)
        regs[++r] = x[1];
    }
    return tb.make(l, regs);
  }

  /// The seeds copied by cp.async into shared memory when the program
  /// starts (kda-compile --chunk-stage-seeds): in flight while the forward
  /// is recomputed under the tape, read from there in the layout of the
  /// value each seeds (rows past the sequence's end zero-filled). Null
  /// where a seed is absent or the seeds are loaded at their use.
  bool stageSeeds = false;
  Value stagedSeed[6];

  /// Issues the copies of seed workspace `mem` ([B, T, HV, D] f32) rows
  /// t0 .. t0 + rows - 1 (`rows` = C, or 1 for d(exp(g_last)), read from
  /// the chunk's first row) into a [rows, D + 4] shared buffer.
  Value issueSeed(Value mem, int64_t rows, Value row, Value t0, Value head,
                  const ChunkRows &cr) {
    auto type = cast<MemRefType>(mem.getType());
    const int64_t D = type.getDimSize(3);
    auto wg = gpu::AddressSpaceAttr::get(b.getContext(),
                                         gpu::AddressSpace::Workgroup);
    Value buf = memref::AllocOp::create(
        b, MemRefType::get({rows, D + 4}, type.getElementType(),
                           MemRefLayoutAttrInterface(), wg));
    const int64_t pieces = D / 4;
    Value last = arith::SubIOp::create(b, cr.valid, idx(1));
    forEachPiece(tid, NW * warpSize, rows * pieces, [&](Value p) {
      Value r = arith::DivUIOp::create(b, p, idx(pieces));
      Value c = mul(arith::RemUIOp::create(b, p, idx(pieces)), 4);
      Value count =
          arith::SelectOp::create(b, ult(r, cr.valid), idx(4), idx(0));
      nvgpu::DeviceAsyncCopyOp::create(
          b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), buf,
          ValueRange{r, c}, mem,
          ValueRange{row, add(t0, minu(r, last)), head, c}, b.getIndexAttr(4),
          count, /*bypassL1=*/b.getUnitAttr());
    });
    return buf;
  }

  /// The gradient's chunk grid: program (n, ch, head) recomputes its
  /// chunk's intra-chunk part under the tape (the forward's loads and
  /// emitIntraChunk, on the same lanes), seeds the values the state step
  /// reads with the step grid's seeds, and stores the adjoint: dq and dk
  /// (per value head: the sums' partials), dv, the gate's and beta's
  /// gradients, and the chunk's shares of dA_log and ddt_bias in its slot.
  /// A program past its sequence's end writes zeros to its slot (the sums
  /// read every kept chunk's).
  void emitAdjoint(ArrayRef<Value> ivs) {
    Value n = ivs[0], ch = ivs[1], head = ivs[2];
    Value row = n, start = idx(0), length = memref::DimOp::create(b, q, 1);
    if (cuSeqlens) {
      auto offset = [&](Value i) -> Value {
        Value e = memref::LoadOp::create(b, cuSeqlens, ValueRange{i});
        return arith::IndexCastOp::create(b, b.getIndexType(), e);
      };
      row = idx(0);
      start = offset(n);
      length = arith::SubIOp::create(b, offset(add(n, 1)), start);
    }
    Value local = mul(ch, C);
    auto live = scf::IfOp::create(b, ult(local, length), true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(live.thenBlock());
      emitAdjointChunk(row, n, ch, add(start, local),
                       arith::SubIOp::create(b, length, local), head);
    }
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(live.elseBlock());
    // Zero slots where the kept states have this chunk.
    Value shares = dALogShares ? dALogShares : dDtShares;
    if (!shares)
      return;
    Value tid0 = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    when(ult(ch, memref::DimOp::create(b, shares, 2)), [&] {
      for (Value s : {dALogShares, dDtShares}) {
        if (!s)
          continue;
        int64_t len = cast<MemRefType>(s.getType()).getDimSize(3);
        when(ult(tid0, idx(len)), [&] {
          memref::StoreOp::create(b, f32(0.0), s,
                                  ValueRange{n, head, ch, tid0});
        });
      }
    });
  }

  /// The adjoint's exchange regions with room for rows padded by up to 8
  /// (LaneTileBuilder::searchExchangeStrides: the padding with the fewest
  /// bank conflicts; its conversions were a quarter of its stall samples).
  bool wideExchange = false;
  /// With it, rows permuted per row where that counts fewer wavefronts
  /// than any padding (kda-compile --chunk-exchange-swizzle).
  bool exchangeSwizzle = false;

  void emitAdjointChunk(Value row, Value n, Value ch, Value t0,
                        Value remaining, Value head) {
    ChunkRows cr = chunkRows(t0, remaining, head);
    Value valid = cr.valid;
    kda::LaneTileBuilder tb(b, warpSize, NW, lane, warp);
    setUpBuilder(tb);
    if (stageSeeds) {
      for (int i : {5, 1, 2, 3, 0, 4})
        stagedSeed[i] = seeds[i] ? issueSeed(seeds[i], i == 4 ? 1 : C, row,
                                             t0, head, cr)
                                 : Value();
      NVVM::CpAsyncCommitGroupOp::create(b);
    }
    kda::ChunkInputs in = loadInputs(tb, cr, row, head);
    kda::ChunkConfig config = cfg.chunkConfig(C, cfg.subChunk, K, V);
    if (cfg.gateOutside && in.gate) {
      // The activated gate, off the tape, is the leaf (its gradient goes to
      // dGateAct; the gate grid takes it through the activation).
      in.gate = kda::activateGateTile(tb, config, in.gate, in.aLog, in.dtBias);
      in.aLog = in.dtBias = Value();
      config.gateActivation = GateActivation::none;
    }
    kda::TapeTileBuilder tape(tb);
    kda::IntraChunk intra = kda::emitIntraChunk(tape, config, in);
    if (!tb.failure().empty()) {
      failure = tb.failure();
      return;
    }
    if (stageSeeds) {
      // Every thread's copies landed, then every thread may read any row.
      NVVM::CpAsyncWaitGroupOp::create(b, 0);
      gpu::BarrierOp::create(b);
    }
    // Each seed in the layout of the value it seeds.
    auto fromStage = [&](const kda::LaneLayout &l, Value buf, bool firstRow) {
      SmallVector<Value> regs;
      for (size_t r = 0; r < l.regs.size(); ++r) {
        Value i = firstRow ? idx(0) : tb.coordinate(l, r, 0);
        Value j = tb.coordinate(l, r, firstRow ? 0 : 1);
        regs.push_back(memref::LoadOp::create(b, buf, ValueRange{i, j}));
      }
      return tb.make(l, regs);
    };
    auto seedOf = [&](Value forward, int i) {
      if (stagedSeed[i])
        return fromStage(tb.layoutOf(forward), stagedSeed[i], false);
      return loadSeed(tb, tb.layoutOf(forward), seeds[i], row, t0, head, cr);
    };
    SmallVector<std::pair<Value, Value>> pairs = {
        {intra.u, seedOf(intra.u, 5)},
        {intra.qDecayed, seedOf(intra.qDecayed, 1)},
        {intra.kToEnd, seedOf(intra.kToEnd, 2)},
        {intra.p, seedOf(intra.p, 3)}};
    if (intra.w && seeds[0])
      pairs.push_back({intra.w, seedOf(intra.w, 0)});
    if (intra.decayLast && seeds[4]) {
      // d(exp(g_last)) [K], in the chunk's first row.
      const kda::LaneLayout l = tb.layoutOf(intra.decayLast);
      if (stagedSeed[4]) {
        pairs.push_back({intra.decayLast, fromStage(l, stagedSeed[4], true)});
      } else {
        SmallVector<Value> regs;
        for (size_t r = 0; r < l.regs.size(); ++r)
          regs.push_back(loadRow(seeds[4], {row, t0, head},
                                 tb.coordinate(l, r, 0), 1, {})[0]);
        pairs.push_back({intra.decayLast, tb.make(l, regs)});
      }
    }
    SmallVector<Value> wrt = {in.q, in.k, in.v};
    for (Value x : {in.gate, in.beta, in.aLog, in.dtBias})
      if (x)
        wrt.push_back(x);
    std::string why;
    FailureOr<SmallVector<Value>> grads = tape.emitAdjoint(pairs, wrt, why);
    if (failed(grads)) {
      failure = why;
      return;
    }
    if (!tb.failure().empty()) {
      failure = tb.failure();
      return;
    }
    size_t at = 3;
    Value gGate = in.gate ? (*grads)[at++] : Value();
    Value gBeta = in.beta ? (*grads)[at++] : Value();
    Value gALog = in.aLog ? (*grads)[at++] : Value();
    Value gDt = in.dtBias ? (*grads)[at++] : Value();
    Value zero = idx(0);
    auto tokenRow = [&](Value i) {
      return SmallVector<Value>{row, add(t0, i), head};
    };
    auto partialRow = [&](Value i) {
      return SmallVector<Value>{row, add(t0, i), head, zero};
    };
    // dq and dk in place where every q / k head has one value head (the
    // sums then write nothing: ChunkTiling's oneHead), else as partials.
    auto inPlace = [&](Value i) {
      return SmallVector<Value>{row, add(t0, i), cr.qkHead};
    };
    auto storeInPlace = [&] {
      storeRows(tb, (*grads)[0], dQ, inPlace, valid);
      storeRows(tb, (*grads)[1], dK, inPlace, valid);
    };
    if (!dqPart) { // (as many heads, known when compiled)
      storeInPlace();
    } else {
      Value oneHead = arith::CmpIOp::create(
          b, arith::CmpIPredicate::eq, memref::DimOp::create(b, q, 2),
          memref::DimOp::create(b, v, 2));
      auto split = scf::IfOp::create(b, oneHead, /*withElse=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(split.thenBlock());
      storeInPlace();
      b.setInsertionPointToStart(split.elseBlock());
      storeRows(tb, (*grads)[0], dqPart, partialRow, valid);
      storeRows(tb, (*grads)[1], dkPart, partialRow, valid);
    }
    storeRows(tb, (*grads)[2], dV, tokenRow, valid);
    if (gGate) // (channel-wise: chunkLanesRefusal takes head-wise gates)
      storeRows(tb, gGate, cfg.gateOutside ? dGateAct : dGate, tokenRow,
                valid);
    if (gBeta)
      storeRows(tb, gBeta, dBeta, tokenRow, valid);
    // The chunk's shares: [1] (A_log, a head-wise dt_bias) or [K].
    auto identity = [](ImplicitLocOpBuilder &, ValueRange s, ValueRange) {
      return s[0];
    };
    auto slot = [&](Value share, Value mem) {
      int64_t len = cast<MemRefType>(mem.getType()).getDimSize(3);
      if (len == 1 && tb.shape(share)[0] != 1)
        share = tb.rowSum(tb.map({1, tb.shape(share)[0]}, {kda::perColumn(share)},
                                 identity));
      storeRows(tb, share, mem,
                [&](Value j) { return SmallVector<Value>{n, head, ch, j}; },
                idx(len));
    };
    if (gALog && dALogShares)
      slot(gALog, dALogShares);
    if (gDt && dDtShares)
      slot(gDt, dDtShares);
    if (!tb.failure().empty())
      failure = tb.failure();
  }

  /// Why the chunk could not be built on lane tiles; empty if it could.
  std::string failure;
};

struct IntraRegistersPass : kda::impl::KdaGpuIntraRegistersBase<IntraRegistersPass> {
  using Base::Base;
  IntraRegistersPass() = default;
  IntraRegistersPass(int64_t threads, bool chunkTf32, bool exchangePads,
                     bool stageSeeds, bool exchangeSwizzle,
                     int64_t intraBlocks) {
    this->threads = threads;
    this->intraBlocks = intraBlocks;
    this->chunkTf32 = chunkTf32;
    this->chunkExchangePads = exchangePads;
    this->chunkStageSeeds = stageSeeds;
    this->chunkExchangeSwizzle = exchangeSwizzle;
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    // The lane tiles' products are nvvm.mma.sync on LLVM struct types: a
    // run of this pass alone (kda-opt) must load both dialects itself.
    registry.insert<gpu::GPUDialect, nvgpu::NVGPUDialect,
                    vector::VectorDialect, math::MathDialect, scf::SCFDialect,
                    memref::MemRefDialect, arith::ArithDialect,
                    LLVM::LLVMDialect, NVVM::NVVMDialect>();
  }

  /// The gradient's chunk grid (kda.chunk_pass) on lanes: IntraProgram's
  /// emitAdjoint over the (sequence, chunk, value head) programs.
  void runChunkGrid(func::FuncOp func, IntraPassAttr desc) {
    std::optional<IntraPassConfig> cfg = readConfig(desc);
    auto abi = func->getAttrOfType<ArrayAttr>("kda.abi");
    if (!cfg || !abi || func.isExternal() ||
        !kda::runsOnLanes(func, kda::chunkLanesRefusal(desc, threads)))
      return;
    std::optional<kda::ProgramGrid> grid =
        kda::findProgramGrid(func, cfg->grid, "kda-gpu-intra-registers");
    if (!grid)
      return signalPassFailure();
    scf::ForallOp forall = grid->forall;
    Block *body = forall.getBody();
    kda::clearProgram(body);
    ImplicitLocOpBuilder b(forall.getLoc(), &getContext());
    b.setInsertionPoint(body->getTerminator());
    SmallVector<Value> ivs = kda::programCoordinates(forall, *grid, b);
    auto byName = [&](StringRef name) {
      return kda::abiArgument(func, abi, name);
    };
    // --chunk-tf32 (default): one TF32 product a step for 16-bit calls,
    // but for the adjoint of the factored decayed pairs (3xTF32: the tape's
    // range-sensitive products). Their gradients meet in dG as a difference
    // of e^{+-G}-scaled terms: emulated (kimi_kept), ddt_bias 1.1e-3 with
    // 3xTF32 throughout, 1.2e-3 so, 4.7e-3 with one TF32 product throughout,
    // 1.3e-2 with those two products alone in one (bench/RESULTS.md,
    // thirty-ninth session). fp32 calls: 3xTF32.
    const bool precise =
        !chunkTf32 || kda::keepsFp32Accuracy(func.getArgumentTypes());
    IntraProgram prog(b, *cfg, threads, precise,
                      kda::MatrixUnit::MmaSync, /*emulated=*/false);
    prog.wideExchange = chunkExchangePads;
    prog.stageSeeds = chunkStageSeeds;
    prog.exchangeSwizzle = chunkExchangeSwizzle;
    prog.bindInputs(func, abi);
    // Workspaces: the step grid's seeds, then this grid's: the dq and dk
    // partials, the dA_log and ddt_bias shares.
    const bool delta = llvm::is_contained(cfg->roles, "w");
    const bool decays = llvm::is_contained(cfg->roles, "g");
    int64_t next = kda::seedWorkspaces(func, abi, cfg->roles, prog.seeds);
    // (No partials where the sums were known to write nothing: q, k and v
    // with as many heads statically, ChunkTiling's oneHead folded.)
    auto rankOf = [](Value v) {
      return v ? cast<MemRefType>(v.getType()).getRank() : -1;
    };
    if (rankOf(byName("ws" + std::to_string(next))) == 5) {
      prog.dqPart = byName("ws" + std::to_string(next++));
      prog.dkPart = byName("ws" + std::to_string(next++));
    }
    if (cfg->gateOutside) {
      prog.dGateAct = byName("ws" + std::to_string(next++));
    } else {
      if (prog.aLog)
        prog.dALogShares = byName("ws" + std::to_string(next++));
      if (prog.dtBias)
        prog.dDtShares = byName("ws" + std::to_string(next++));
    }
    prog.dQ = byName("d_q");
    prog.dK = byName("d_k");
    prog.dV = byName("d_v");
    prog.dGate = byName("d_gate");
    prog.dBeta = byName("d_beta");
    if (!prog.q || !prog.k || !prog.v || !prog.seeds[1] || !prog.seeds[2] ||
        !prog.seeds[3] || !prog.seeds[5] || (delta && !prog.seeds[0]) ||
        (decays && (!prog.seeds[4] || !prog.gate ||
                    !(cfg->gateOutside ? prog.dGateAct : prog.dGate))) ||
        (cfg->beta && (!prog.beta || !prog.dBeta)) || !prog.dV ||
        !prog.dQ || !prog.dK ||
        (prog.dqPart && rankOf(prog.dkPart) != 5) ||
        (prog.aLog && !cfg->gateOutside && rankOf(prog.dALogShares) != 4) ||
        (prog.dtBias && !cfg->gateOutside && rankOf(prog.dDtShares) != 4) ||
        (cfg->gateOutside && rankOf(prog.dGateAct) != 4)) {
      func.emitError("kda-gpu-intra-registers: the gradient's chunk kernel "
                     "lacks an input, a seed workspace or an output its "
                     "description names");
      return signalPassFailure();
    }
    prog.emitAdjoint(ivs);
    if (!prog.failure.empty()) {
      func.emitError("kda-gpu-intra-registers: the intra-chunk adjoint "
                     "does not run on lane tiles for this kernel: ")
          << prog.failure;
      return signalPassFailure();
    }
    func->setAttr(kda::kExplicitThreadsAttr, b.getUnitAttr());
    // One block of `threads` per SM, every register it can take: the tape
    // keeps the forward's intermediates live until the adjoint reads them.
    func->setAttr(kda::kMaxRegistersAttr,
                  b.getI32IntegerAttr(std::min<int64_t>(
                      255, 65536 / threads / 8 * 8)));
    kda::requireAlignedRows(func, [&](StringRef name, MemRefType type) {
      return name == "q" || name == "k" || name == "v" ||
             (name == "gate" && cfg->gate == "channel") ||
             (name == "dt_bias" && type.getRank() == 2) ||
             name.starts_with("ws") || name == "d_v" ||
             (name == "d_gate" && cfg->gate == "channel");
    });
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (auto chunk = func->getAttrOfType<IntraPassAttr>(kda::kChunkPassAttr))
      return runChunkGrid(func, chunk);
    auto desc = func->getAttrOfType<IntraPassAttr>(kda::kIntraPassAttr);
    std::optional<IntraPassConfig> cfg = readConfig(desc);
    auto abi = func->getAttrOfType<ArrayAttr>("kda.abi");
    // The matrix unit is the strategy's instruction (without a strategy:
    // mma.sync, kda-opt runs of this pass alone).
    StringRef instruction = kda::strategyInstruction(func);
    const kda::UnitChoice choice = kda::unitChoice(instruction);
    const kda::MatrixUnit unit = choice.unit;
    const bool emulated = choice.emulated;
    if (!cfg || !abi || func.isExternal() ||
        !kda::runsOnLanes(func, kda::intraLanesRefusal(desc, threads, nullptr,
                                                       instruction)))
      return;
    const bool decays = cfg->gate != "none";
    std::optional<kda::ProgramGrid> grid =
        kda::findProgramGrid(func, cfg->grid, "kda-gpu-intra-registers");
    if (!grid)
      return signalPassFailure();
    scf::ForallOp forall = grid->forall;
    auto byName = [&](StringRef name) {
      return kda::abiArgument(func, abi, name);
    };
    bool precise = kda::keepsFp32Accuracy(func.getArgumentTypes());
    Block *body = forall.getBody();
    kda::clearProgram(body);
    if (Value cu = byName("cu_seqlens")) {
      // Varlen runs the flat grid (IntraProgram::emitVarlen): ceil(T / C)
      // windows of packed tokens plus one program per sequence on the chunk
      // dimension, and 1 on the sequence dimension.
      OpBuilder gridBuilder(forall);
      Location loc = forall.getLoc();
      SmallVector<OpFoldResult> bounds(forall.getMixedUpperBound());
      for (auto [i, d] : llvm::enumerate(grid->kept)) {
        if (d == 0)
          bounds[i] = gridBuilder.getIndexAttr(1);
        if (d == 1) {
          Value windows =
              getValueOrCreateConstantIndexOp(gridBuilder, loc, bounds[i]);
          Value sequences = arith::SubIOp::create(
              gridBuilder, loc, memref::DimOp::create(gridBuilder, loc, cu, 0),
              arith::ConstantIndexOp::create(gridBuilder, loc, 1));
          bounds[i] = Value(
              arith::AddIOp::create(gridBuilder, loc, windows, sequences));
        }
      }
      auto flat = scf::ForallOp::create(gridBuilder, loc, bounds, ValueRange{},
                                        std::nullopt);
      forall.erase();
      forall = flat;
      body = forall.getBody();
      // Its programs are no longer (sequence, chunk) pairs: kda-gpu-map-
      // kernels must not skip them by that reading (kda.chunk_grid).
      func->removeAttr(kda::kChunkGridAttr);
    }
    ImplicitLocOpBuilder b(forall.getLoc(), &getContext());
    b.setInsertionPoint(body->getTerminator());
    SmallVector<Value> ivs = kda::programCoordinates(forall, *grid, b);

    IntraProgram prog(b, *cfg, threads, precise, unit, emulated);
    prog.bindInputs(func, abi);
    kda::workspacesByRole(func, abi, cfg->roles, prog.ws);
    if (!prog.q || !prog.k || !prog.v || !prog.ws[1] || !prog.ws[2] ||
        !prog.ws[3] || !prog.ws[4] || (cfg->delta && !prog.ws[0]) ||
        (decays && (!prog.gate || !prog.ws[5])) || (cfg->beta && !prog.beta)) {
      func.emitError("kda-gpu-intra-registers: the intra-chunk kernel lacks "
                     "an input or a workspace its description names");
      return signalPassFailure();
    }
    prog.emit(ivs);
    if (!prog.failure.empty()) {
      func.emitError("kda-gpu-intra-registers: the intra-chunk algorithm "
                     "does not run on lane tiles for this kernel: ")
          << prog.failure;
      return signalPassFailure();
    }
    // 16-bit kernels: approximate exponentials, logarithms and divisions
    // (useApproximateMath says why that is safe). Every exponent the
    // factored form takes is <= 80 (LaneTileBuilder::factoredPairs).
    if (!precise)
      kda::useApproximateMath(func);
    func->setAttr(kda::kExplicitThreadsAttr, b.getUnitAttr());
    // Four blocks of 128 threads per SM (65536 registers): the program is a chain of
    // short phases, and more resident blocks hide their latencies. At
    // K = V = 128 ptxas fits a 16-bit kernel in 128 registers without
    // spills (156 unbounded); fp32 kernels (3xTF32 products) spilled there
    // (4 bytes, the varlen form) and get three blocks per SM, registers
    // rounded down to ptxas's granule of 8 (bundle.test checks for spills).
    // The target is resident warps (16, fp32 12), not blocks: at 256
    // threads (the gradient's modules) the same budget is two blocks of
    // 128 registers (four blocks of 64 spilled).
    // (NVIDIA's register file; AMD's kernels take what the compiler gives.)
    // kda-compile --intra-blocks=N states the blocks instead (a measuring
    // knob: fewer registers, more resident warps, spills where ptxas must).
    const int64_t residentThreads = (precise ? 3 : 4) * 128;
    const int64_t blocksPerSM =
        intraBlocks > 0 ? int64_t(intraBlocks)
                        : std::max<int64_t>(1, residentThreads / threads);
    if (unit == kda::MatrixUnit::MmaSync || emulated)
      func->setAttr(kda::kMaxRegistersAttr,
                    b.getI32IntegerAttr(std::min<int64_t>(
                        255, 65536 / (threads * blocksPerSM) / 8 * 8)));
    // Inputs read as 16-byte vectors need 16-byte aligned pointers (the
    // runtime checks what the manifest states).
    kda::requireAlignedRows(func, [&](StringRef name, MemRefType type) {
      return name == "q" || name == "k" || name == "v" ||
             (name == "gate" && cfg->gate == "channel") ||
             (name == "dt_bias" && type.getRank() == 2) ||
             name.starts_with("ws");
    });
  }
};

} // namespace

std::string mlir::kda::intraLanesRefusal(IntraPassAttr intraPass,
                                         int64_t threads, std::string *fix,
                                         StringRef instruction,
                                         int64_t sharedMemory) {
  std::optional<IntraPassConfig> cfg = readConfig(intraPass);
  if (!cfg)
    return "its description (kda.intra_pass) is incomplete";
  const kda::MatrixUnit unit = kda::unitChoice(instruction).unit;
  const int64_t warpSize = kda::LaneTileBuilder::unitWarpSize(unit);
  const int64_t warps = threads / warpSize;
  std::string why;
  llvm::raw_string_ostream os(why);
  auto say = [&](StringRef f) {
    if (fix)
      *fix = f.str();
  };
  if (threads % warpSize != 0 || warps < 1) {
    os << threads << " threads per block are not whole warps";
    say("threads per block a multiple of " + std::to_string(warpSize) +
        " (kda-compile: --block-threads)");
  } else if (cfg->chunk != 16 || cfg->subChunk != 16) {
    // The program is one sub-chunk of 16 (its exponent guards are made for
    // 16 rows). Chunks of 32 and 64 with sub-chunks of 16 reach it as
    // sub-chunk steps: kda-tile-chunks' sub-chunk-steps, on in the NVIDIA
    // pipeline, so this description comes from kda-opt runs without it.
    os << "chunk " << cfg->chunk << " with sub-chunk " << cfg->subChunk
       << ": the register program is one sub-chunk of 16 (chunks of 32 and "
          "64 with sub_chunk=16 reach it as sub-chunk steps, kda-tile-chunks' "
          "sub-chunk-steps)";
    say("tile with sub-chunks of 16 and sub-chunk-steps (kda-compile: "
        "--sub-chunk=16, the default), or accept the tile lowering");
  } else if (unit != kda::MatrixUnit::MmaSync &&
             (cfg->keyDim % (16 * warps) != 0 ||
              cfg->valueDim % (16 * warps) != 0)) {
    // AMD's units take 16 x 16 x 16 steps: the products split K or V over
    // the warps in whole steps.
    os << "K = " << cfg->keyDim << " and V = " << cfg->valueDim
       << " do not split over " << warps << " warps of " << warpSize
       << " lanes (K and V multiples of " << 16 * warps
       << ": whole 16 x 16 x 16 " << instruction << " steps per warp)";
    say("pad K and V to multiples of " + std::to_string(16 * warps) +
        " with zero columns, or use fewer threads per block, or accept the "
        "tile lowering");
  } else if (int64_t bytes = sharedWords(16, cfg->keyDim, cfg->valueDim,
                                         warps,
                                         unit != kda::MatrixUnit::MmaSync)
                                 .bytes();
             sharedMemory > 0 && bytes > sharedMemory) {
    // (The kernel's workspaces' staging is the tile lowering's: none here.)
    os << "its shared memory (" << bytes << " bytes at K = " << cfg->keyDim
       << ", V = " << cfg->valueDim << ") exceeds the chip's " << sharedMemory;
    say("fewer threads per block, or accept the tile lowering");
  } else if (const bool wholeSteps =
                 warps > 4 || cfg->gate == "none" || cfg->gate.empty() ||
                 cfg->gateActivation == GateActivation::lower_bound;
             cfg->keyDim % (8 * warps) != 0 ||
             cfg->valueDim % (8 * warps) != 0 ||
             (cfg->keyDim / warps / 4) % 2 != 0 ||
             (wholeSteps && cfg->keyDim % (16 * warps) != 0)) {
    // Past 4 warps (the gradient's modules run 8), without a gate (q k^T
    // is a plain product, no decayed pairs) and with a lower-bound gate, the
    // products contracted over K split it over the warps in whole m16n8k16
    // steps (LaneTileBuilder::matmul): K = 64 at 8 warps, and DeltaNet's,
    // linear attention's and Kimi's prologue's K = 32 at 4, passed the check
    // of 8 per warp and then failed in the lane program (kda-compile stopped
    // with an error; kda-run --emulate's sweep of test/cpu found the last
    // two). A builder dry run in the strategy would make this exact.
    const int64_t kMultiple = wholeSteps ? 16 * warps : 8 * warps;
    os << "K = " << cfg->keyDim << " and V = " << cfg->valueDim
       << " do not split over " << warps
       << " warps (K a multiple of " << kMultiple << " and V of "
       << 8 * warps << " at " << warps
       << " warps: whole mma.sync steps per warp, an even number of key "
          "columns per lane)";
    // Zero key columns of q, k and the gate add nothing to any product
    // (and nothing to an l2 norm); zero value columns give zero outputs.
    say("pad K to a multiple of " + std::to_string(kMultiple) +
        " and V to a multiple of " + std::to_string(8 * warps) +
        " with zero columns, or use fewer threads per block" +
        " (q, k and gate columns of zeros leave the output unchanged; "
        "slice the padded value columns off), or accept the tile lowering");
  }
  return why;
}

std::string mlir::kda::chunkLanesRefusal(IntraPassAttr chunkPass,
                                         int64_t threads, std::string *fix) {
  // The forward intra program's sizes (on mma.sync), whose layouts the
  // adjoint program takes.
  std::string why = intraLanesRefusal(chunkPass, threads, fix, "mma_sync");
  if (!why.empty())
    return why;
  std::optional<IntraPassConfig> cfg = readConfig(chunkPass);
  if (cfg->gate == "head") {
    if (fix)
      *fix = "accept the tile lowering";
    return "a head-wise gate's adjoint has not been built on lanes";
  }
  return "";
}

std::unique_ptr<Pass>
mlir::kda::createGpuIntraRegistersPass(int64_t threads, bool chunkTf32,
                                       bool chunkExchangePads,
                                       bool chunkStageSeeds,
                                       bool chunkExchangeSwizzle,
                                       int64_t intraBlocks) {
  return std::make_unique<IntraRegistersPass>(threads, chunkTf32,
                                              chunkExchangePads,
                                              chunkStageSeeds,
                                              chunkExchangeSwizzle,
                                              intraBlocks);
}

