//===- GpuStateRegisters.cpp - the state pass with the state in registers -===//
//
// The chunk-parallel schedule's state grid (one program per sequence, value
// head and V block) is the only sequential part of the gated delta rule:
// per chunk of C tokens it computes, from the intra-chunk workspaces,
//
//   V_new = U - W S          O = (Gamma Q) S + P V_new
//   S     <- Diag(exp(g_last)) S + (decayed K)^T V_new
//
// (passes/GatedDeltaKernel.cpp, emitStateStep, is the definition). Lowered
// like every other tile program, each of these products is a phase over
// shared memory fenced by barriers, and the chain of chunk steps is all
// latency. This pass writes the program for NVIDIA tensor cores with the
// state where it is used: in the accumulators of mma.sync m16n8k8, in
// registers, for the whole sequence.
//
// Layouts (g = lane / 4, t = lane % 4; the PTX ISA's m16n8k8 fragments):
//   * The program keeps S^T ([V block, K]) as accumulator tiles: V rows in
//     16-row tiles, K split over the warps (K / warps columns each) in 8-column
//     tiles. A lane's accumulator element (tile j, element e) holds key column
//       kcol(warp, t, j, e%2) = warp * K/warps + t * 2J + 2j + e%2
//     (J tiles per warp). The mma's own column order is 2t + e%2 within the
//     tile; since K is only ever contracted or stored, any bijection works,
//     and this one gives every lane 2J consecutive key columns: workspace rows
//     are read with 16-byte loads.
//   * The same registers are the A operand of S^T x (W^T or (Gamma Q)^T):
//     the accumulator's columns (2t, 2t+1) serve as the A fragment's k
//     columns (t, t+4) when B's rows are read in the same order; so the
//     products against the state need no layout change at all.
//   * Products over K are split over warps; their partial sums meet in shared
//     memory ([warps, 2, C, V block]), the only data that crosses warps along
//     with V_new^T (the A operand of the output and state updates).
// Two barriers per chunk; every global load of a chunk is issued before its
// first use, from the f32 workspaces (rows past the sequence's end read as
// zeros).
//
// Chunk-boundary states (prefix caching) are the accumulators stored where a
// chunk that starts a boundary interval begins, and zeros for the entries
// past the sequence's end; each program writes only its own entries.
//
// What it does not take (V blocks not a multiple of 16, K not a multiple of
// 8 x warps, C not a multiple of 8 or above 64) is stateLanesRefusal's answer
// to kda-gpu-select-strategy, which gives those kernels the tile lowering and
// says so in a remark.
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"
#include "lowering/lanes/LaneBuilder.h"
#include "lowering/lanes/LaneTiles.h"
#include "lowering/lanes/PassDescription.h"
#include "lowering/Strategy.h"

#include "passes/GatedDeltaKernel.h"
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

#include <tuple>

#include "lowering/Passes.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAGPUSTATEREGISTERS
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;

namespace {

struct StatePassConfig {
  int64_t chunk = 0, keyDim = 0, vBlock = 0;
  bool vMajor = false, boundary = false;
  bool boundaryPool = false; // boundary states into the slots of a pool
  int64_t interval = 0;      // tokens between two boundary states
  SmallVector<std::string> roles; // workspace roles, in workspace order
  SmallVector<int64_t> grid;      // (sequence, head[, V block]); -1 dynamic
};

std::optional<StatePassConfig> readConfig(kda::StatePassAttr desc) {
  if (!desc)
    return std::nullopt;
  StatePassConfig c;
  c.chunk = desc.getChunk();
  c.keyDim = desc.getKeyDim();
  c.vBlock = desc.getVBlock();
  c.vMajor = desc.getVMajor().getValue();
  c.boundary = desc.getBoundary().getValue();
  c.boundaryPool = desc.getBoundaryPool().getValue();
  c.interval = desc.getBoundaryInterval();
  for (Attribute r : desc.getWorkspaces())
    c.roles.push_back(cast<StringAttr>(r).getValue().str());
  llvm::append_range(c.grid, desc.getGrid().asArrayRef());
  return c;
}

/// A 1-D view of workspace `ws` ([rows, tokens, heads, width], any element
/// type): element (row, token, head, col) is at
/// ((row * T + token) * HV + head) * width + col.
Value flatWorkspace(ImplicitLocOpBuilder &b, Value ws) {
  auto type = cast<MemRefType>(ws.getType());
  Value total = arith::ConstantIndexOp::create(b, 1);
  for (int d = 0; d < 4; ++d)
    total = arith::MulIOp::create(b, total, memref::DimOp::create(b, ws, d));
  return memref::ReinterpretCastOp::create(
      b, MemRefType::get({ShapedType::kDynamic}, type.getElementType()), ws,
      OpFoldResult(b.getIndexAttr(0)), ArrayRef<OpFoldResult>{total},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
}

/// Element `at` of a flat workspace view, as f32.
Value loadWorkspaceElement(ImplicitLocOpBuilder &b, Value flat, Value at) {
  Value x = memref::LoadOp::create(b, flat, ValueRange{at});
  return x.getType().isF32() ? x
                             : arith::ExtFOp::create(b, b.getF32Type(), x);
}

/// `width` consecutive elements of a flat workspace view from element `at`
/// (which the caller keeps aligned to the vector), as f32, with the widest
/// vector loads of at most 16 bytes that divide `width`: 4 f32 or 8 bf16.
SmallVector<Value> loadWorkspaceRow(ImplicitLocOpBuilder &b, Value flat,
                                    Value at, int64_t width) {
  return kda::loadRowAsF32(b, b.getLoc(), flat, ValueRange{}, at, width);
}

/// Where sequence `n`'s tokens are: (batch row, first token, length), from
/// cu_seqlens when the kernel is varlen (one batch row), else row n of
/// `tokens` each.
std::tuple<Value, Value, Value> sequenceBounds(ImplicitLocOpBuilder &b,
                                               Value n, Value tokens,
                                               Value cuSeqlens) {
  kda::LaneBuilder lb(b);
  if (!cuSeqlens)
    return {n, lb.idx(0), tokens};
  auto offset = [&](Value i) -> Value {
    Value e = memref::LoadOp::create(b, cuSeqlens, ValueRange{i});
    return arith::IndexCastOp::create(b, b.getIndexType(), e);
  };
  Value start = offset(n);
  return {lb.idx(0), start,
          arith::SubIOp::create(b, offset(lb.add(n, 1)), start)};
}

/// Where the boundary entry before chunk `chunkIdx` of sequence `n` goes,
/// for both state programs: where that chunk starts an interval of `per`
/// chunks and the entry is one of those recorded, `store` runs with the
/// entry's leading indices, (n, entry, head) for a dense `boundary`, or
/// (slot, head) for the pool slot `table` names (negative slots, not kept,
/// and slots past the pool are skipped).
void atBoundaryEntry(ImplicitLocOpBuilder &b, Value chunkIdx, int64_t per,
                     Value boundary, Value table, Value n, Value head,
                     llvm::function_ref<void(ArrayRef<Value>)> store) {
  kda::LaneBuilder lb(b);
  Value j = arith::DivUIOp::create(b, chunkIdx, lb.idx(per));
  Value nt = table ? memref::DimOp::create(b, table, 1)
                   : memref::DimOp::create(b, boundary, 1);
  Value at = arith::AndIOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                            arith::RemUIOp::create(b, chunkIdx, lb.idx(per)),
                            lb.idx(0)),
      lb.ult(j, nt));
  auto op = scf::IfOp::create(b, at, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(op.thenBlock());
  if (!table) {
    store({n, j, head});
    return;
  }
  Value raw = memref::LoadOp::create(b, table, ValueRange{n, j});
  Value slot64 = raw.getType().isInteger(64)
                     ? raw
                     : Value(arith::ExtSIOp::create(b, b.getI64Type(), raw));
  Value slots = arith::IndexCastOp::create(
      b, b.getI64Type(), memref::DimOp::create(b, boundary, 0));
  Value keep = arith::AndIOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::sge, slot64,
                            arith::ConstantIntOp::create(b, 0, 64)),
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, slot64, slots));
  auto inPool = scf::IfOp::create(b, keep, /*withElseRegion=*/false);
  b.setInsertionPointToStart(inPool.thenBlock());
  Value slot = arith::IndexCastOp::create(b, b.getIndexType(), slot64);
  store({slot, head});
}

/// Emits one program of the state pass. Sizes: C (chunk), K, VB (V block),
/// NW warps; J = K / NW / 8 accumulator tiles per warp and V tile, MT = VB /
/// 16 V tiles, NC = C / 8 row tiles of a chunk.
struct StateProgram : kda::LaneBuilder {
  const StatePassConfig &cfg;
  /// Whether chunk i + 1's loads are issued before chunk i's products
  /// (more registers, fewer resident blocks).
  bool prefetch = true;
  int64_t C, K, VB, NW, J, MT, NC, threads;
  bool precise;
  // Arguments.
  Value ws[6]; // w, u, q, k, p, g (null when absent)
  Value o, h0, ht, cuSeqlens;
  Value boundary; // [N, NT, HV, K, V] (V-major: [N, NT, HV, V, K]) or null;
                  // with a table, the pool [S, HV, K, V]
  Value boundaryTable; // [N, NB] slots of the pool, or null
  // Program and lane coordinates.
  Value n, head, vCol, row, start, length, tokens;
  Value tid, lane, warp, g, t, kBase;

  StateProgram(ImplicitLocOpBuilder &b, const StatePassConfig &cfg,
               int64_t threads, bool precise)
      : LaneBuilder(b), cfg(cfg), C(cfg.chunk), K(cfg.keyDim), VB(cfg.vBlock),
        NW(threads / 32), J(cfg.keyDim / (threads / 32) / 8),
        MT(cfg.vBlock / 16), NC(cfg.chunk / 8), threads(threads),
        precise(precise) {}

  Value element(Value acc, int64_t e) {
    return vector::ExtractOp::create(b, acc, ArrayRef<int64_t>{e / 2, e % 2});
  }
  Value accOf(ArrayRef<Value> e) {
    return vector::FromElementsOp::create(
        b, VectorType::get({2, 2}, b.getF32Type()), e);
  }
  Value zeroAcc() {
    Value z = f32(0.0);
    return accOf({z, z, z, z});
  }
  Value mma(ArrayRef<Value> a, ArrayRef<Value> bv, Value acc) {
    return kda::emitMmaSyncTf32(b, b.getLoc(), a, bv, acc, precise);
  }

  /// Key column of a lane's accumulator element (see the file comment).
  Value kcol(int64_t j, int64_t e) { return add(kBase, 2 * j + e % 2); }

  /// 1-D views of the workspaces (flat[i] for ws[i]) and their head count:
  /// element (row, token, head, col) of a workspace of `width` columns is
  /// ((row * T + token) * HV + head) * width + col. Addresses are built as
  /// a per-chunk base plus a per-lane row offset that does not change from
  /// chunk to chunk (hoisted out of the loop), so a chunk's loads cost a
  /// few integer instructions instead of a 64-bit index computation each.
  Value flat[6];
  Value heads;

  void makeFlatViews() {
    heads = memref::DimOp::create(b, o, 2);
    for (int i = 0; i < 6; ++i)
      if (ws[i])
        flat[i] = flatWorkspace(b, ws[i]);
  }
  int64_t widthOf(int i) {
    return cast<MemRefType>(ws[i].getType()).getDimSize(3);
  }
  /// Element index of chunk row 0, column 0 of workspace i.
  Value chunkBase(int i, Value t0) {
    Value r = arith::MulIOp::create(b, row, tokens);
    r = add(r, t0);
    r = add(arith::MulIOp::create(b, r, heads), head);
    return mul(r, widthOf(i));
  }
  /// Offset of chunk row r from row 0 in workspace i: computed in 32 bits
  /// (r < 64, and HV x width < 2^25 for any real head count), so the
  /// loop-invariant offsets a lane keeps take one register each.
  Value rowOffset(int i, Value r) {
    Type i32 = b.getI32Type();
    Value r32 = arith::IndexCastUIOp::create(b, i32, r);
    Value h32 = arith::IndexCastUIOp::create(b, i32, heads);
    Value off = arith::MulIOp::create(
        b, arith::MulIOp::create(b, r32, h32),
        arith::ConstantOp::create(b, b.getI32IntegerAttr(widthOf(i))));
    return arith::IndexCastUIOp::create(b, b.getIndexType(), off);
  }
  /// `width` consecutive elements of workspace i from element `at`, as f32
  /// (loadWorkspaceRow), rows past a partial chunk's end zero where `keep`.
  SmallVector<Value> loadFlat(int i, Value at, int64_t width, Value keep) {
    SmallVector<Value> out = loadWorkspaceRow(b, flat[i], at, width);
    if (keep)
      for (Value &v : out)
        v = select(keep, v, f32(0.0));
    return out;
  }

  Value loadF32(Value w, ValueRange indices, Value keep = {}) {
    Value v = memref::LoadOp::create(b, w, indices);
    return keep ? select(keep, v, f32(0.0)) : v;
  }

  /// Memory index of state element (k, v) of this program ([N, HV, K, V]
  /// or, V-major, [N, HV, V, K]).
  SmallVector<Value> stateIndex(Value k, Value v) {
    Value vg = add(vCol, v);
    return cfg.vMajor ? SmallVector<Value>{n, head, vg, k}
                      : SmallVector<Value>{n, head, k, vg};
  }

  /// The lane's V row of accumulator element e of V tile mt.
  Value vRow(int64_t mt, int64_t e) { return add(g, mt * 16 + (e / 2) * 8); }

  /// Stores the lane's state elements (the accumulators, or zeros where
  /// `state` is empty) as the boundary entry at `lead` (sequence, entry,
  /// head; or pool slot, head).
  void storeBoundaryEntry(ArrayRef<Value> lead, ArrayRef<Value> state) {
    Type type = cast<MemRefType>(boundary.getType()).getElementType();
    if (cfg.vMajor) {
      // A lane's key columns kBase .. kBase + 2J - 1 of one V row are
      // consecutive in a V-major state: one row store (16-byte vectors;
      // the four lanes of a row group write 8J consecutive columns).
      for (int64_t mt = 0; mt < MT; ++mt)
        for (int64_t half = 0; half < 2; ++half) {
          SmallVector<Value> row;
          for (int64_t jt = 0; jt < J; ++jt)
            for (int64_t e = 0; e < 2; ++e)
              row.push_back(state.empty()
                                ? f32(0.0)
                                : element(state[mt * J + jt], half * 2 + e));
          SmallVector<Value> prefix(lead);
          prefix.push_back(add(vCol, vRow(mt, half * 2)));
          kda::storeRowFromF32(b, b.getLoc(), boundary, prefix, kBase, row);
        }
      return;
    }
    Value zero = fromF32(f32(0.0), type);
    for (int64_t mt = 0; mt < MT; ++mt)
      for (int64_t jt = 0; jt < J; ++jt)
        for (int64_t i = 0; i < 4; ++i) {
          SmallVector<Value> at(lead);
          at.push_back(kcol(jt, i));
          at.push_back(add(vCol, vRow(mt, i)));
          Value x = state.empty()
                        ? zero
                        : fromF32(element(state[mt * J + jt], i), type);
          memref::StoreOp::create(b, x, boundary, at);
        }
  }

  /// Boundary state before chunk `chunkIdx`, where that chunk starts an
  /// interval and the entry is one of the NT recorded.
  void storeBoundaryBefore(Value chunkIdx, ArrayRef<Value> S) {
    if (!boundary)
      return;
    atBoundaryEntry(b, chunkIdx, cfg.interval / C, boundary, boundaryTable, n,
                    head, [&](ArrayRef<Value> lead) {
                      storeBoundaryEntry(lead, S);
                    });
  }

  /// Zeros for the entries at or past the sequence's end (j * interval >=
  /// length), which no chunk records.
  void zeroBoundariesPastEnd() {
    if (!boundary || boundaryTable)
      return; // pool slots past the end are not named: nothing to write
    Value nt = memref::DimOp::create(b, boundary, 1);
    Value first = arith::CeilDivUIOp::create(b, length, idx(cfg.interval));
    auto loop = scf::ForOp::create(b, minu(first, nt), nt, idx(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    storeBoundaryEntry({n, loop.getInductionVar(), head}, {});
  }

  /// `ivs`: the program's (sequence, head, V block) coordinates, 0 where
  /// the grid has no such dimension.
  void emit(ArrayRef<Value> ivs) {
    Type f32Type = b.getF32Type();
    n = ivs[0];
    head = ivs[1];
    vCol = mul(ivs[2], VB);
    tokens = memref::DimOp::create(b, o, 1);
    std::tie(row, start, length) = sequenceBounds(b, n, tokens, cuSeqlens);
    tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    lane = arith::RemUIOp::create(b, tid, idx(32));
    warp = arith::DivUIOp::create(b, tid, idx(32));
    g = arith::DivUIOp::create(b, lane, idx(4));
    t = arith::RemUIOp::create(b, lane, idx(4));
    kBase = add(mul(warp, K / NW), mul(t, 2 * J));

    // Shared memory: the warps' partial products, V_new^T and (Gamma Q) S
    // as A operands. Rows are padded against bank conflicts: a partial
    // product's store puts lane (g, t) at row 2t, column g, so a row length
    // of 4 mod 16 words spreads the 32 lanes over the 32 banks (8t + g).
    const bool delta = static_cast<bool>(ws[0]);
    const int64_t products = delta ? 2 : 1;
    const int64_t redRow = VB + (4 - VB % 16 + 16) % 16;
    auto red = memref::AllocOp::create(
        b, MemRefType::get({NW, products, C, redRow}, f32Type));
    auto vnT = memref::AllocOp::create(b, MemRefType::get({VB, C + 4}, f32Type));
    auto oS = memref::AllocOp::create(b, MemRefType::get({VB, C + 4}, f32Type));

    // The initial state, in accumulator layout.
    SmallVector<Value> init;
    for (int64_t mt = 0; mt < MT; ++mt)
      for (int64_t j = 0; j < J; ++j) {
        if (!h0) {
          init.push_back(zeroAcc());
          continue;
        }
        SmallVector<Value> e;
        for (int64_t i = 0; i < 4; ++i)
          e.push_back(toF32(memref::LoadOp::create(
              b, h0, stateIndex(kcol(j, i), vRow(mt, i)))));
        init.push_back(accOf(e));
      }

    // Software pipelining: chunk i + 1's global loads are issued before
    // chunk i's products (the chain of chunk steps is latency: a step that
    // waits for its own loads waits for memory every time). Full chunks run
    // in the loop; a partial last chunk, whose rows are clamped and masked,
    // after it.
    makeFlatViews();
    Value numFull = arith::DivUIOp::create(b, length, idx(C));
    const size_t numState = init.size();
    auto zerosOr = [&](Value cond, llvm::function_ref<SmallVector<Value>()> f) {
      auto op = scf::IfOp::create(b, loadTypes(), cond, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(op.thenBlock());
      scf::YieldOp::create(b, f());
      b.setInsertionPointToStart(op.elseBlock());
      SmallVector<Value> zeros;
      for (Type type : loadTypes())
        zeros.push_back(arith::ConstantOp::create(b, b.getZeroAttr(type)));
      scf::YieldOp::create(b, zeros);
      return SmallVector<Value>(op.getResults().begin(), op.getResults().end());
    };
    if (prefetch)
      llvm::append_range(
          init, zerosOr(arith::CmpIOp::create(b, arith::CmpIPredicate::ugt,
                                              numFull, idx(0)),
                        [&] { return loadChunk(idx(0), /*full=*/true); }));
    auto loop = scf::ForOp::create(b, idx(0), numFull, idx(1), init);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      ValueRange iter = loop.getRegionIterArgs();
      SmallVector<Value> S(iter.begin(), iter.begin() + numState);
      SmallVector<Value> next;
      if (prefetch) {
        SmallVector<Value> loaded(iter.begin() + numState, iter.end());
        // The last iteration loads its own chunk again (unused): every
        // address stays inside the sequence.
        Value nextChunk = minu(add(loop.getInductionVar(), 1),
                               arith::SubIOp::create(b, numFull, idx(1)));
        SmallVector<Value> prefetched = loadChunk(nextChunk, /*full=*/true);
        storeBoundaryBefore(loop.getInductionVar(), S);
        next = emitChunk(loop.getInductionVar(), loaded, S, red, vnT, oS,
                         /*full=*/true);
        next.append(prefetched);
      } else {
        SmallVector<Value> loaded =
            loadChunk(loop.getInductionVar(), /*full=*/true);
        storeBoundaryBefore(loop.getInductionVar(), S);
        next = emitChunk(loop.getInductionVar(), loaded, S, red, vnT, oS,
                         /*full=*/true);
      }
      scf::YieldOp::create(b, next);
    }
    SmallVector<Value> afterFull(loop.getResults().begin(),
                                 loop.getResults().begin() + numState);
    SmallVector<Type> stateTypes;
    for (Value v : afterFull)
      stateTypes.push_back(v.getType());
    auto tail = scf::IfOp::create(
        b, stateTypes,
        ult(mul(numFull, C), length), /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(tail.thenBlock());
      SmallVector<Value> loaded = loadChunk(numFull, /*full=*/false);
      storeBoundaryBefore(numFull, afterFull);
      scf::YieldOp::create(
          b, emitChunk(numFull, loaded, afterFull, red, vnT, oS, /*full=*/false));
      b.setInsertionPointToStart(tail.elseBlock());
      scf::YieldOp::create(b, afterFull);
    }
    SmallVector<Value> finalState(tail.getResults().begin(),
                                  tail.getResults().end());
    zeroBoundariesPastEnd();

    // The final state.
    if (ht) {
      Type type = cast<MemRefType>(ht.getType()).getElementType();
      for (int64_t mt = 0; mt < MT; ++mt)
        for (int64_t j = 0; j < J; ++j) {
          Value acc = finalState[mt * J + j];
          for (int64_t i = 0; i < 4; ++i)
            memref::StoreOp::create(b, fromF32(element(acc, i), type), ht,
                                    stateIndex(kcol(j, i), vRow(mt, i)));
        }
    }
  }

  /// Where chunk `chunkIdx`'s rows are: (first token, valid rows).
  std::pair<Value, Value> chunkRows(Value chunkIdx) {
    Value local = mul(chunkIdx, C);
    return {add(start, local),
            minu(idx(C), arith::SubIOp::create(b, length, local))};
  }

  /// Counts of the values a chunk loads, in loadChunk's order.
  int64_t numUElements() const { return (VB * C + threads - 1) / threads; }
  int64_t numPTiles() const { return (MT * NC + NW - 1) / NW; }
  SmallVector<Type> loadTypes() {
    const bool delta = static_cast<bool>(ws[0]);
    int64_t count = (delta ? NC * 2 * J : 0) + NC * 2 * J + NC * J * 2 +
                    (ws[5] ? 2 * J : 0) + numUElements() +
                    numPTiles() * NC * 2;
    return SmallVector<Type>(count, b.getF32Type());
  }

  /// Every global load of chunk `chunkIdx`, in this order: W rows and
  /// Gamma Q rows (NC x 2J each, W only with the delta rule), the decayed k
  /// fragments (NC x 2 x J), the chunk's log-decay (2J, with a gate), U for
  /// the elements this thread reduces, the P fragments of the output tiles
  /// this warp owns.
  SmallVector<Value> loadChunk(Value chunkIdx, bool full) {
    const bool delta = static_cast<bool>(ws[0]);
    Value t0, valid;
    std::tie(t0, valid) = chunkRows(chunkIdx);
    Value lastRow = arith::SubIOp::create(b, valid, idx(1));
    // Chunk row r's offset in workspace i. Rows past the end of a partial
    // chunk read the last valid row, and are masked where they matter; a
    // full chunk needs neither (and its row offsets are loop-invariant).
    auto at = [&](int i, Value base, Value r, Value col) {
      return add(add(base, rowOffset(i, full ? r : minu(r, lastRow))), col);
    };
    auto rowOk = [&](Value r) -> Value { return full ? Value() : ult(r, valid); };
    Value base[6];
    for (int i = 0; i < 6; ++i)
      if (ws[i])
        base[i] = chunkBase(i, t0);
    SmallVector<Value> out;

    // W and Gamma Q rows 8m + g: the lane's 2J key columns.
    if (delta)
      for (int64_t m = 0; m < NC; ++m) {
        Value r = add(g, 8 * m);
        llvm::append_range(out, loadFlat(0, at(0, base[0], r, kBase), 2 * J,
                                         rowOk(r)));
      }
    for (int64_t m = 0; m < NC; ++m) {
      Value r = add(g, 8 * m);
      llvm::append_range(out, loadFlat(2, at(2, base[2], r, kBase), 2 * J, {}));
    }
    // Decayed k, B operand of S^T += V_new^T k~: rows 8kk + t (+4), the key
    // column of output column g of tile j.
    Value gHalf = arith::DivUIOp::create(b, g, idx(2));
    Value gOdd = arith::RemUIOp::create(b, g, idx(2));
    Value kColOfG = add(add(mul(warp, K / NW), mul(gHalf, 2 * J)), gOdd);
    for (int64_t kk = 0; kk < NC; ++kk)
      for (int64_t h = 0; h < 2; ++h) {
        Value r = add(t, 8 * kk + 4 * h);
        Value a = at(3, base[3], r, kColOfG);
        Value keep = rowOk(r);
        for (int64_t j = 0; j < J; ++j) {
          Value x = loadWorkspaceElement(b, flat[3], add(a, 2 * j));
          out.push_back(keep ? select(keep, x, f32(0.0)) : x);
        }
      }
    if (ws[5])
      llvm::append_range(out, loadFlat(5, add(base[5], kBase), 2 * J, {}));
    // U for the elements this thread reduces: e = tid + s * threads.
    for (int64_t s = 0; s < numUElements(); ++s) {
      Value e = minu(add(tid, s * threads), idx(VB * C - 1));
      Value c = arith::DivUIOp::create(b, e, idx(VB));
      Value v = arith::RemUIOp::create(b, e, idx(VB));
      Value x = memref::LoadOp::create(
          b, flat[1], ValueRange{at(1, base[1], c, add(vCol, v))});
      Value keep = rowOk(c);
      out.push_back(keep ? select(keep, x, f32(0.0)) : x);
    }
    // P fragments of the output tiles this warp owns (tile = warp + s * NW;
    // past the last tile it reads the last one, unused): rows 8 nt + g,
    // columns 8 kk + t (+4).
    for (int64_t s = 0; s < numPTiles(); ++s) {
      Value tile = minu(add(warp, s * NW), idx(MT * NC - 1));
      Value pr = add(g, mul(arith::RemUIOp::create(b, tile, idx(NC)), 8));
      Value a = at(4, base[4], pr, t);
      for (int64_t kk = 0; kk < NC; ++kk)
        for (int64_t h = 0; h < 2; ++h)
          out.push_back(memref::LoadOp::create(
              b, flat[4], ValueRange{add(a, 8 * kk + 4 * h)}));
    }
    return out;
  }

  /// One chunk step from its loads (loadChunk's order) and the state.
  /// A full chunk masks nothing (every row is a token of the sequence).
  SmallVector<Value> emitChunk(Value chunkIdx, ArrayRef<Value> loaded,
                               ArrayRef<Value> S, Value red, Value vnT,
                               Value oS, bool full) {
    Value w = ws[0], o = this->o;
    const bool delta = static_cast<bool>(w);
    const int64_t products = delta ? 2 : 1;
    Value t0, valid;
    std::tie(t0, valid) = chunkRows(chunkIdx);
    auto rowOk = [&](Value r) -> Value {
      return full ? Value() : ult(r, valid);
    };
    // Unpack the loads.
    size_t at = 0;
    auto take = [&](int64_t count) {
      SmallVector<Value> part(loaded.begin() + at,
                              loaded.begin() + at + count);
      at += count;
      return part;
    };
    SmallVector<SmallVector<Value>> wRows, qRows;
    if (delta)
      for (int64_t m = 0; m < NC; ++m)
        wRows.push_back(take(2 * J));
    for (int64_t m = 0; m < NC; ++m)
      qRows.push_back(take(2 * J));
    SmallVector<Value> kFrag = take(NC * J * 2); // [kk][2][j]
    SmallVector<Value> decay;
    if (ws[5])
      for (Value x : take(2 * J))
        decay.push_back(math::ExpOp::create(b, x));
    SmallVector<std::pair<Value, Value>> mine; // (c, v) per element
    SmallVector<Value> uVals = take(numUElements());
    for (int64_t s = 0; s < numUElements(); ++s) {
      Value e = add(tid, s * threads);
      mine.push_back({arith::DivUIOp::create(b, e, idx(VB)),
                      arith::RemUIOp::create(b, e, idx(VB))});
    }
    SmallVector<SmallVector<Value>> pFrag; // [s][kk * 2 + h]
    for (int64_t s = 0; s < numPTiles(); ++s)
      pFrag.push_back(take(NC * 2));

    // 1. Partial products over this warp's key columns:
    //    Y1^T = S^T W^T, Y2^T = S^T (Gamma Q)^T, [VB, C] each.
    SmallVector<Value> y1(MT * NC), y2(MT * NC);
    for (int64_t mt = 0; mt < MT; ++mt)
      for (int64_t m = 0; m < NC; ++m) {
        Value a1 = zeroAcc(), a2 = zeroAcc();
        for (int64_t j = 0; j < J; ++j) {
          Value s = S[mt * J + j];
          SmallVector<Value> a = {element(s, 0), element(s, 2), element(s, 1),
                                  element(s, 3)};
          if (delta)
            a1 = mma(a, {wRows[m][2 * j], wRows[m][2 * j + 1]}, a1);
          a2 = mma(a, {qRows[m][2 * j], qRows[m][2 * j + 1]}, a2);
        }
        y1[mt * NC + m] = a1;
        y2[mt * NC + m] = a2;
      }

    // 2. Partial sums meet in shared memory; each thread reduces its
    //    elements into V_new^T and ((Gamma Q) S)^T.
    for (int64_t mt = 0; mt < MT; ++mt)
      for (int64_t m = 0; m < NC; ++m)
        for (int64_t i = 0; i < 4; ++i) {
          Value c = add(mul(t, 2), 8 * m + i % 2);
          Value v = vRow(mt, i);
          if (delta)
            memref::StoreOp::create(b, element(y1[mt * NC + m], i), red,
                                    ValueRange{warp, idx(0), c, v});
          memref::StoreOp::create(b, element(y2[mt * NC + m], i), red,
                                  ValueRange{warp, idx(products - 1), c, v});
        }
    gpu::BarrierOp::create(b);
    for (auto [s, cv] : llvm::enumerate(mine)) {
      auto [c, v] = cv;
      // Threads past the last element skip (VB * C need not be a multiple
      // of the block).
      Value e = add(tid, static_cast<int64_t>(s) * threads);
      OpBuilder::InsertionGuard guard(b);
      if ((VB * C) % threads != 0) {
        auto inRange = scf::IfOp::create(b, ult(e, idx(VB * C)), false);
        b.setInsertionPointToStart(inRange.thenBlock());
      }
      Value sum1 = f32(0.0), sum2 = f32(0.0);
      for (int64_t wi = 0; wi < NW; ++wi) {
        if (delta)
          sum1 = arith::AddFOp::create(
              b, sum1,
              memref::LoadOp::create(b, red, ValueRange{idx(wi), idx(0), c, v}));
        sum2 = arith::AddFOp::create(
            b, sum2,
            memref::LoadOp::create(
                b, red, ValueRange{idx(wi), idx(products - 1), c, v}));
      }
      Value vn = delta ? arith::SubFOp::create(b, uVals[s], sum1) : uVals[s];
      if (Value ok = rowOk(c))
        vn = select(ok, vn, f32(0.0));
      memref::StoreOp::create(b, vn, vnT, ValueRange{v, c});
      memref::StoreOp::create(b, sum2, oS, ValueRange{v, c});
    }
    gpu::BarrierOp::create(b);

    // A fragment of V_new^T: V tile mt, k-step kk (chunk rows 8kk..8kk+7).
    auto vnFrag = [&](int64_t mt, int64_t kk) {
      Value r0 = add(g, mt * 16), r1 = add(g, mt * 16 + 8);
      Value k0 = add(t, 8 * kk), k1 = add(t, 8 * kk + 4);
      return SmallVector<Value>{
          memref::LoadOp::create(b, vnT, ValueRange{r0, k0}),
          memref::LoadOp::create(b, vnT, ValueRange{r1, k0}),
          memref::LoadOp::create(b, vnT, ValueRange{r0, k1}),
          memref::LoadOp::create(b, vnT, ValueRange{r1, k1})};
    };

    // 3. The state: S^T <- S^T Diag(exp(g_last)) + V_new^T k~.
    SmallVector<Value> next;
    for (int64_t mt = 0; mt < MT; ++mt) {
      SmallVector<SmallVector<Value>> aFrags;
      for (int64_t kk = 0; kk < NC; ++kk)
        aFrags.push_back(vnFrag(mt, kk));
      for (int64_t j = 0; j < J; ++j) {
        Value acc = S[mt * J + j];
        if (!decay.empty()) {
          SmallVector<Value> e;
          for (int64_t i = 0; i < 4; ++i)
            e.push_back(arith::MulFOp::create(b, element(acc, i),
                                              decay[2 * j + i % 2]));
          acc = accOf(e);
        }
        for (int64_t kk = 0; kk < NC; ++kk)
          acc = mma(aFrags[kk],
                    {kFrag[(kk * 2) * J + j], kFrag[(kk * 2 + 1) * J + j]},
                    acc);
        next.push_back(acc);
      }
    }
    // 4. The output (after the state update, which the next chunk waits
    //    for): O^T = ((Gamma Q) S)^T + V_new^T P^T, tile (mt, n) by
    //    warp (mt * NC + n) mod NW; rows past the chunk's end are not
    //    stored.
    Type oType = cast<MemRefType>(o.getType()).getElementType();
    for (int64_t tile = 0; tile < MT * NC; ++tile) {
      int64_t mt = tile / NC, nt = tile % NC;
      auto mine = scf::IfOp::create(
          b,
          arith::CmpIOp::create(b, arith::CmpIPredicate::eq, warp,
                                idx(tile % NW)),
          false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(mine.thenBlock());
      SmallVector<Value> e;
      for (int64_t i = 0; i < 4; ++i)
        e.push_back(memref::LoadOp::create(
            b, oS,
            ValueRange{vRow(mt, i), add(mul(t, 2), 8 * nt + i % 2)}));
      Value acc = accOf(e);
      const SmallVector<Value> &pf = pFrag[tile / NW];
      for (int64_t kk = 0; kk <= nt; ++kk)
        acc = mma(vnFrag(mt, kk), {pf[kk * 2], pf[kk * 2 + 1]}, acc);
      for (int64_t i = 0; i < 4; ++i) {
        Value c = add(mul(t, 2), 8 * nt + i % 2);
        OpBuilder::InsertionGuard g2(b);
        if (Value ok = rowOk(c)) {
          auto store = scf::IfOp::create(b, ok, false);
          b.setInsertionPointToStart(store.thenBlock());
        }
        memref::StoreOp::create(
            b, fromF32(element(acc, i), oType), o,
            ValueRange{row, add(t0, c), head, add(vCol, vRow(mt, i))});
      }
    }

    return next;
  }
};

/// The state pass derived from the one algorithm: emitStateStep
/// (passes/GatedDeltaKernel.cpp) runs on LaneTileBuilder tiles, and this
/// driver only stages a chunk's workspaces in shared memory and stores.
///
/// Layout: the warps split the program's V block (VB / NW rows of S^T each,
/// a multiple of 16) and every warp holds all of K, so no product of a chunk
/// step crosses warps. The state [K, VB] is mma.sync's accumulator layout of
/// S^T, transposed; the products against it run transposed
/// (LaneTileBuilder::runsTransposed), with S^T as the A operand (rounded to
/// bf16, as FLA's and FlashKDA's kernels round it) and W, Gamma Q and the
/// decayed k read from shared memory through ldmatrix. U, P and the chunk's
/// log-decay are read from shared memory into the layouts their products
/// want, so no layout conversion moves data between lanes.
///
/// Staging: `stages` cp.async stages (the strategy's; 2 or 3 from the shape
/// policy), one barrier per chunk; chunks i + 1 .. i + stages - 1 are in
/// flight while chunk i's products run. Rows past a partial chunk's
/// end are zero-filled (no bytes read), which makes their V_new rows zero;
/// their outputs are not stored.
///
/// Chunk-boundary states (prefix caching, dense or into pool slots) are the
/// state registers stored where a chunk that starts an interval begins, and
/// zeros for the dense entries past the sequence's end.
///
/// Its matrix instruction takes the W, Gamma Q and decayed k workspaces'
/// type: bf16 (16-bit inputs; S^T rounded to bf16 as its A operand) or f32
/// (fp32 inputs: 3xTF32, S^T split into its tf32 part and the rest). With
/// all of K per warp, an fp32 chunk step's 3xTF32 products were one warp's
/// long chain (1.5 times the per-lane split-K program's time, fifteenth
/// session); fp32 kernels therefore split K over the warps (byK: partial
/// products summed across warps, one barrier each) at V blocks of 32, the
/// chip table's fp32 default: 0.88 to 0.97 of the split-K program's time on
/// the H200 (bench/RESULTS.md, seventeenth session), and the default since.
struct LaneStateProgram : kda::LaneBuilder {
  const StatePassConfig &cfg;
  int64_t C, K, VB, NW;
  /// Chunks in flight: cp.async stages (chunk i + stages - 1 is copied
  /// while chunk i computes).
  int64_t stages = 2;
  /// The warps split K (splitsK), not V.
  bool byK = false;
  static constexpr int64_t kPad16 = 8; // bf16 row padding: 16 bytes
  static constexpr int64_t kPad32 = 4; // f32 row padding: 16 bytes
  Value ws[6]; // w, u, q, k, p, g (null when absent)
  Value o, h0, ht, cuSeqlens;
  Value boundary;      // as the split-K program's, or null
  Value boundaryTable; // pool slots per (sequence, entry), or null
  Value n, head, vCol, row, start, length, tokens, heads;
  Value tid, lane, warp;
  Value flat[6];
  Value shW, shQ, shK, shU, shP, shG;

  LaneStateProgram(ImplicitLocOpBuilder &b, const StatePassConfig &cfg,
                   int64_t warps)
      : LaneBuilder(b), cfg(cfg), C(cfg.chunk), K(cfg.keyDim), VB(cfg.vBlock),
        NW(warps) {}

  /// Warps for `threads` per block: at most one per 16 V rows.
  /// Where the warps split the state: by V (16-bit inputs: every warp all
  /// of K, no product crosses warps) or, for f32 workspaces, by K: each
  /// warp's 3xTF32 chain of a chunk step is then 1 / warps as long (six
  /// mma.sync per bf16 one), and the products over K meet in shared memory
  /// (LaneTileBuilder's sums across warps).
  static bool splitsK(TypeRange wsTypes, const StatePassConfig &cfg) {
    for (auto [role, type] : llvm::zip(cfg.roles, wsTypes))
      if (role == "q")
        return cast<MemRefType>(type).getElementType().isF32();
    return false;
  }
  /// Warps for `threads` per block: at most one per 16 V rows (by V) or
  /// per 16 keys (by K).
  static int64_t warpsFor(const StatePassConfig &cfg, int64_t threads,
                          bool byK = false) {
    int64_t w = std::max<int64_t>(1, threads / 32);
    while (w > 1 && (byK ? cfg.keyDim : cfg.vBlock) % (16 * w) != 0)
      w /= 2;
    return w;
  }
  /// Why the derived program does not take `cfg`; empty if it does.
  static std::string refusal(const StatePassConfig &cfg, TypeRange wsTypes) {
    if (cfg.vBlock % 16 != 0 || cfg.keyDim % 16 != 0 || cfg.chunk % 16 != 0 ||
        cfg.chunk > 64)
      return "V block " + std::to_string(cfg.vBlock) + ", K " +
             std::to_string(cfg.keyDim) + ", chunk " +
             std::to_string(cfg.chunk) +
             ": V blocks, K and chunks multiples of 16, chunks up to 64";
    Type operandType;
    for (auto [role, type] : llvm::zip(cfg.roles, wsTypes)) {
      Type e = cast<MemRefType>(type).getElementType();
      if (role == "w" || role == "q" || role == "k") {
        if ((!e.isBF16() && !e.isF32()) || (operandType && e != operandType))
          return "W, Gamma Q and decayed k workspaces that are not all bf16 "
                 "or all f32";
        operandType = e;
      } else if (!e.isF32()) {
        return "a " + role + " workspace that is not f32";
      }
    }
    return "";
  }
  int64_t threads() const { return 32 * NW; }
  /// The products' operand type: the W, Gamma Q and decayed k workspaces'
  /// (bf16: mma.sync m16n8k16; f32: 3xTF32 m16n8k8 pairs).
  Type operandType() {
    return cast<MemRefType>(ws[2].getType()).getElementType();
  }
  int64_t operandBytes() { return operandType().getIntOrFloatBitWidth() / 8; }

  SmallVector<Value> stateIndex(Value key, Value v) {
    Value vg = add(vCol, v);
    return cfg.vMajor ? SmallVector<Value>{n, head, vg, key}
                      : SmallVector<Value>{n, head, key, vg};
  }
  int64_t widthOf(int i) {
    return cast<MemRefType>(ws[i].getType()).getDimSize(3);
  }
  Value chunkBase(int i, Value t0) {
    Value r = add(arith::MulIOp::create(b, row, tokens), t0);
    r = add(arith::MulIOp::create(b, r, heads), head);
    return mul(r, widthOf(i));
  }
  Value rowOffset(int i, Value r) {
    return arith::MulIOp::create(b, arith::MulIOp::create(b, r, heads),
                                 idx(widthOf(i)));
  }

  /// Copies `rows` rows of `pieces` 16-byte pieces of workspace i (from
  /// column `col0`) into shared buffer `dst` [stage, row, col]; rows at or
  /// past `valid` are zero-filled and read their last valid row's address.
  void issueRows(int i, Value dst, Value stage, Value t0, Value valid,
                 int64_t rows, int64_t pieces, Value col0, bool perRow) {
    auto type = cast<MemRefType>(ws[i].getType());
    const int64_t perPiece = 16 / (type.getElementTypeBitWidth() / 8);
    const int64_t total = rows * pieces;
    Value base = chunkBase(i, t0);
    if (col0)
      base = add(base, col0);
    Value last = arith::SubIOp::create(b, valid, idx(1));
    for (int64_t s0 = 0; s0 < total; s0 += threads()) {
      Value p = add(tid, s0);
      OpBuilder::InsertionGuard guard(b);
      if (s0 + threads() > total) {
        auto inRange = scf::IfOp::create(b, ult(p, idx(total)), false);
        b.setInsertionPointToStart(inRange.thenBlock());
      }
      Value r = arith::DivUIOp::create(b, p, idx(pieces));
      Value c = mul(arith::RemUIOp::create(b, p, idx(pieces)), perPiece);
      Value src = perRow ? add(add(base, rowOffset(i, minu(r, last))), c)
                         : add(base, c);
      Value count = perRow ? select(ult(r, valid), idx(perPiece), idx(0))
                           : idx(perPiece);
      SmallVector<Value> to = {stage};
      if (perRow)
        to.push_back(r);
      to.push_back(c);
      nvgpu::DeviceAsyncCopyOp::create(
          b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), dst, to,
          flat[i], ValueRange{src}, b.getIndexAttr(perPiece), count,
          /*bypassL1=*/b.getUnitAttr());
    }
  }

  /// Chunk `chunkIdx`'s workspaces into `stage`.
  void issue(Value chunkIdx, Value stage) {
    Value local = mul(chunkIdx, C);
    Value t0 = add(start, local);
    Value valid = minu(idx(C), arith::SubIOp::create(b, length, local));
    // 16-byte pieces of a K row: 8 bf16 or 4 f32 elements.
    const int64_t kPieces = K * operandBytes() / 16;
    if (ws[0])
      issueRows(0, shW, stage, t0, valid, C, kPieces, {}, true);
    issueRows(2, shQ, stage, t0, valid, C, kPieces, {}, true);
    issueRows(3, shK, stage, t0, valid, C, kPieces, {}, true);
    issueRows(1, shU, stage, t0, valid, C, VB / 4, vCol, true);
    issueRows(4, shP, stage, t0, valid, C, C / 4, {}, true);
    if (ws[5])
      issueRows(5, shG, stage, t0, valid, 1, K / 4, {}, false);
  }

  /// A tile of `layout` read from shared buffer `buf` [stage, r, c] (or
  /// [stage, c] for rank 1).
  Value readTile(kda::LaneTileBuilder &tb, const kda::LaneLayout &layout,
                 Value buf, Value stage) {
    SmallVector<Value> regs;
    for (int64_t r = 0; r < int64_t(layout.regs.size()); ++r) {
      SmallVector<Value> at = {stage};
      for (int64_t d = 0; d < layout.rank(); ++d)
        at.push_back(tb.coordinate(layout, r, d));
      regs.push_back(memref::LoadOp::create(b, buf, at));
    }
    return tb.make(layout, regs);
  }

  /// Stores the state registers `S` (zeros where empty) in `layout` as the
  /// boundary entry at `lead` (sequence, entry, head; or slot, head).
  void storeBoundaryEntry(kda::LaneTileBuilder &tb,
                          const kda::LaneLayout &layout, ArrayRef<Value> lead,
                          ArrayRef<Value> S) {
    Type type = cast<MemRefType>(boundary.getType()).getElementType();
    Value zero = fromF32(f32(0.0), type);
    for (int64_t r = 0; r < int64_t(layout.regs.size()); ++r) {
      // V-major: a lane's registers r, r + 1 hold keys k, k + 1 of one V
      // row (the accumulator's column pair), one 2-element store.
      const bool pair = cfg.vMajor && r + 1 < int64_t(layout.regs.size()) &&
                        layout.regs[r + 1][0] == layout.regs[r][0] + 1 &&
                        layout.regs[r + 1][1] == layout.regs[r][1] &&
                        layout.regs[r][0] % 2 == 0;
      if (pair) {
        Value key = tb.coordinate(layout, r, 0);
        Value v = add(vCol, tb.coordinate(layout, r, 1));
        SmallVector<Value> at(lead);
        at.append({v, key});
        Value lo = S.empty() ? zero : fromF32(S[r], type);
        Value hi = S.empty() ? zero : fromF32(S[r + 1], type);
        Value vec = vector::FromElementsOp::create(
            b, VectorType::get({2}, type), ValueRange{lo, hi});
        vector::StoreOp::create(b, vec, boundary, at);
        ++r;
        continue;
      }
      Value key = tb.coordinate(layout, r, 0);
      Value v = add(vCol, tb.coordinate(layout, r, 1));
      SmallVector<Value> at(lead);
      if (cfg.vMajor)
        at.append({v, key});
      else
        at.append({key, v});
      memref::StoreOp::create(b, S.empty() ? zero : fromF32(S[r], type),
                              boundary, at);
    }
  }

  /// The boundary state before chunk `chunkIdx`, where that chunk starts an
  /// interval and the entry is one of those recorded (dense), or has a
  /// slot in the pool (table: negative slots and slots past the pool are
  /// skipped).
  void storeBoundaryBefore(kda::LaneTileBuilder &tb,
                           const kda::LaneLayout &layout, Value chunkIdx,
                           ArrayRef<Value> S) {
    atBoundaryEntry(b, chunkIdx, cfg.interval / C, boundary, boundaryTable, n,
                    head, [&](ArrayRef<Value> lead) {
                      storeBoundaryEntry(tb, layout, lead, S);
                    });
  }

  /// Zeros for the dense entries at or past the sequence's end (j x
  /// interval >= length), which no chunk records.
  void zeroBoundariesPastEnd(kda::LaneTileBuilder &tb,
                             const kda::LaneLayout &layout) {
    if (!boundary || boundaryTable)
      return;
    Value nt = memref::DimOp::create(b, boundary, 1);
    Value first = arith::CeilDivUIOp::create(b, length, idx(cfg.interval));
    auto loop = scf::ForOp::create(b, minu(first, nt), nt, idx(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    storeBoundaryEntry(tb, layout, {n, loop.getInductionVar(), head}, {});
  }

  /// Emits the program; returns the builder's refusal (empty on success).
  std::string emit(ArrayRef<Value> ivs) {
    Type f32Type = b.getF32Type();
    n = ivs[0];
    head = ivs[1];
    vCol = mul(ivs[2], VB);
    tokens = memref::DimOp::create(b, o, 1);
    heads = memref::DimOp::create(b, o, 2);
    std::tie(row, start, length) = sequenceBounds(b, n, tokens, cuSeqlens);
    tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    lane = arith::RemUIOp::create(b, tid, idx(32));
    warp = arith::DivUIOp::create(b, tid, idx(32));
    for (int i = 0; i < 6; ++i)
      if (ws[i])
        flat[i] = flatWorkspace(b, ws[i]);

    auto wg = gpu::AddressSpaceAttr::get(b.getContext(),
                                         gpu::AddressSpace::Workgroup);
    auto alloc = [&](ArrayRef<int64_t> shape, Type e) -> Value {
      return memref::AllocOp::create(
          b, MemRefType::get(shape, e, MemRefLayoutAttrInterface(), wg));
    };
    Type opType = operandType();
    const int64_t kRow = K + (opType.isF32() ? kPad32 : kPad16);
    if (ws[0])
      shW = alloc({stages, C, kRow}, opType);
    shQ = alloc({stages, C, kRow}, opType);
    shK = alloc({stages, C, kRow}, opType);
    shU = alloc({stages, C, VB + kPad32}, f32Type);
    shP = alloc({stages, C, C + kPad32}, f32Type);
    if (ws[5])
      shG = alloc({stages, K}, f32Type);

    kda::LaneTileBuilder tb(b, 32, NW, lane, warp);
    tb.useMmaSync(opType);
    using kda::LaneLayout;
    using kda::LaneTileBuilder;
    // Layouts by V (rows of S^T over the warps) or by K (its columns; U, P
    // and the outputs a copy in every warp, stored by warp 0).
    auto split = [&](LaneLayout l, ArrayRef<int64_t> shape,
                     LaneLayout::Coords step) {
      l.shape.assign(shape.begin(), shape.end());
      l.warps.clear();
      for (int64_t w = 1; w < NW; w *= 2)
        l.warps.push_back({step[0] * w, step[1] * w});
      return l;
    };
    if (byK) {
      // Two halves for the sums of W S and Gamma Q S (one barrier each);
      // the staging barrier at the top of the chunk loop keeps them apart.
      Value scratch = alloc({2 * NW * VB * C}, f32Type);
      tb.useScratch(scratch);
    }
    const LaneLayout stateL =
        byK ? split(LaneTileBuilder::mmaAccumulator(VB, K / NW, 1), {VB, K},
                    {0, K / NW})
                  .transposed()
            :
        LaneTileBuilder::mmaAccumulator(VB, K, NW).transposed();
    const LaneLayout rowsL =
        byK ? split(LaneTileBuilder::mmaAccumulator(VB, C, 1), {VB, C}, {0, 0})
                  .transposed()
            :
        LaneTileBuilder::mmaAccumulator(VB, C, NW).transposed(); // U, O
    const LaneLayout pL = LaneTileBuilder::mmaOperandB(C, C, NW).transposed();
    const LaneLayout gL = stateL.slice(0);

    // The initial state.
    SmallVector<Value> S;
    for (int64_t r = 0; r < int64_t(stateL.regs.size()); ++r) {
      if (!h0) {
        S.push_back(f32(0.0));
        continue;
      }
      S.push_back(toF32(memref::LoadOp::create(
          b, h0,
          stateIndex(tb.coordinate(stateL, r, 0), tb.coordinate(stateL, r, 1)))));
    }

    Value numChunks = arith::CeilDivUIOp::create(b, length, idx(C));
    // Chunks 0 .. stages - 2 in flight, one commit group each (empty past
    // the sequence's end, so that every wait below counts the same groups).
    for (int64_t j = 0; j + 1 < stages; ++j) {
      {
        auto first = scf::IfOp::create(b, ult(idx(j), numChunks), false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(first.thenBlock());
        issue(idx(j), idx(j));
      }
      NVVM::CpAsyncCommitGroupOp::create(b);
    }
    auto loop = scf::ForOp::create(b, idx(0), numChunks, idx(1), S);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value i = loop.getInductionVar();
      Value stage = arith::RemUIOp::create(b, i, idx(stages));
      // Chunk i's group is the oldest of the stages - 1 pending ones; past
      // the barrier every warp is done with chunk i - 1, whose stage takes
      // chunk i + stages - 1's copies.
      NVVM::CpAsyncWaitGroupOp::create(b, stages - 2);
      gpu::BarrierOp::create(b);
      {
        Value nextChunk = add(i, stages - 1);
        auto more = scf::IfOp::create(b, ult(nextChunk, numChunks), false);
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(more.thenBlock());
        issue(nextChunk, arith::RemUIOp::create(b, nextChunk, idx(stages)));
      }
      NVVM::CpAsyncCommitGroupOp::create(b);

      kda::IntraChunk intra;
      if (ws[0])
        intra.w = tb.makeShared(shW, ValueRange{stage}, {C, K});
      intra.qDecayed = tb.makeShared(shQ, ValueRange{stage}, {C, K});
      intra.kToEnd = tb.makeShared(shK, ValueRange{stage}, {C, K});
      intra.u = readTile(tb, rowsL, shU, stage);
      intra.p = readTile(tb, pL, shP, stage);
      if (ws[5])
        intra.gLast = readTile(tb, gL, shG, stage);
      SmallVector<Value> cur(loop.getRegionIterArgs().begin(),
                             loop.getRegionIterArgs().end());
      if (boundary)
        storeBoundaryBefore(tb, stateL, i, cur);
      Value state = tb.make(stateL, cur);
      kda::ChunkOutputs out = kda::emitStateStep(tb, intra, state);
      SmallVector<Value> oRegs = tb.convertLayout(out.o, rowsL);
      SmallVector<Value> next = tb.convertLayout(out.nextState, stateL);
      if (!tb.failure().empty()) {
        scf::YieldOp::create(b, cur);
        return tb.failure();
      }

      // The output rows of the chunk's tokens.
      Value local = mul(i, C);
      Value t0 = add(start, local);
      Value valid = minu(idx(C), arith::SubIOp::create(b, length, local));
      Type oType = cast<MemRefType>(o.getType()).getElementType();
      // Split by K, every warp holds the outputs: warp 0 stores them.
      Value first = byK ? tb.holdsFirstCopy(rowsL) : Value();
      for (int64_t r = 0; r < int64_t(rowsL.regs.size()); ++r) {
        Value c = tb.coordinate(rowsL, r, 0);
        Value v = tb.coordinate(rowsL, r, 1);
        Value keep = ult(c, valid);
        if (first)
          keep = arith::AndIOp::create(b, keep, first);
        auto store = scf::IfOp::create(b, keep, false);
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(store.thenBlock());
        memref::StoreOp::create(b, fromF32(oRegs[r], oType), o,
                                ValueRange{row, add(t0, c), head, add(vCol, v)});
      }
      scf::YieldOp::create(b, next);
    }

    zeroBoundariesPastEnd(tb, stateL);
    if (ht) {
      Type type = cast<MemRefType>(ht.getType()).getElementType();
      for (int64_t r = 0; r < int64_t(stateL.regs.size()); ++r)
        memref::StoreOp::create(
            b, fromF32(loop.getResult(r), type), ht,
            stateIndex(tb.coordinate(stateL, r, 0), tb.coordinate(stateL, r, 1)));
    }
    return "";
  }
};

/// The types of `func`'s workspaces (kda.abi's ws0, ws1, ...), in the
/// description's role order; fewer where one is missing.
SmallVector<Type> workspaceTypes(func::FuncOp func,
                                 const StatePassConfig &cfg) {
  SmallVector<Type> types;
  auto abi = func->getAttrOfType<ArrayAttr>("kda.abi");
  if (!abi || func.isExternal())
    return types;
  for (size_t i = 0; i < cfg.roles.size(); ++i)
    if (Value arg = kda::abiArgument(func, abi, "ws" + std::to_string(i)))
      types.push_back(arg.getType());
  return types;
}

struct StateRegistersPass : kda::impl::KdaGpuStateRegistersBase<StateRegistersPass> {
  using Base::Base;
  StateRegistersPass() = default;
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<gpu::GPUDialect, nvgpu::NVGPUDialect,
                    vector::VectorDialect, math::MathDialect, scf::SCFDialect,
                    memref::MemRefDialect, arith::ArithDialect,
                    LLVM::LLVMDialect, NVVM::NVVMDialect>();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto desc = func->getAttrOfType<kda::StatePassAttr>(kda::kStatePassAttr);
    std::optional<StatePassConfig> cfg = readConfig(desc);
    auto abi = func->getAttrOfType<ArrayAttr>("kda.abi");
    if (!cfg || !abi || func.isExternal())
      return;
    std::string refusal =
        kda::stateLanesRefusal(func, desc, threads, program);
    if (!kda::runsOnLanes(func, refusal)) {
      // The tile lowering records no boundary states into pool slots (the
      // tiling left them to this kernel).
      if (cfg->boundaryPool) {
        func.emitError()
            << "kda-gpu-state-registers: boundary states into pool slots "
               "need the register state kernel, which does not cover this "
               "tiling ("
            << (refusal.empty() ? std::string("its strategy says tiles")
                                : refusal)
            << ")";
        signalPassFailure();
      }
      return;
    }
    std::optional<kda::ProgramGrid> grid =
        kda::findProgramGrid(func, cfg->grid, "kda-gpu-state-registers");
    if (!grid)
      return signalPassFailure();
    scf::ForallOp forall = grid->forall;
    // Arguments by name.
    auto byName = [&](StringRef name) {
      return kda::abiArgument(func, abi, name);
    };
    // fp32 kernels (no 16-bit float argument) keep fp32 accuracy (3xTF32).
    bool precise = kda::keepsFp32Accuracy(func.getArgumentTypes());
    Block *body = forall.getBody();
    kda::clearProgram(body);
    // Blocks start in x-fastest order. The grid's dimensions are reversed
    // (x = V block, y = head, z = sequence) so that the V blocks of one
    // (sequence, head) run side by side, at about the same chunk: they read
    // the same W, Gamma Q and decayed k rows, which then come from L2 once
    // instead of from DRAM once per V block (in sequence-major order a batch
    // of 8 x 32 heads fills the chip with V block 0 alone).
    const int64_t rank = forall.getRank();
    SmallVector<OpFoldResult> reversedBounds(
        llvm::reverse(forall.getMixedUpperBound()));
    OpBuilder gridBuilder(forall);
    auto reversed = scf::ForallOp::create(gridBuilder, forall.getLoc(),
                                          reversedBounds, ValueRange{},
                                          std::nullopt);
    forall.erase();
    forall = reversed;
    body = forall.getBody();
    ImplicitLocOpBuilder b(forall.getLoc(), &getContext());
    b.setInsertionPoint(body->getTerminator());
    Value zero = arith::ConstantIndexOp::create(b, 0);
    SmallVector<Value> ivs(3, zero);
    for (auto [i, d] : llvm::enumerate(grid->kept))
      ivs[d] = forall.getInductionVar(rank - 1 - i);
    StateProgram prog(b, *cfg, threads, precise);
    static const char *const kRoles[] = {"w", "u", "q", "k", "p", "g"};
    for (auto [i, role] : llvm::enumerate(cfg->roles)) {
      Value arg = byName("ws" + std::to_string(i));
      for (int r = 0; r < 6; ++r)
        if (role == kRoles[r])
          prog.ws[r] = arg;
    }
    prog.o = byName("o");
    prog.h0 = byName("initial_state");
    prog.ht = byName("final_state");
    prog.cuSeqlens = byName("cu_seqlens");
    prog.boundary = byName("boundary_states");
    prog.boundaryTable = byName("boundary_indices");
    if (cfg->boundaryPool != static_cast<bool>(prog.boundaryTable)) {
      func.emitError("kda-gpu-state-registers: the state kernel's pool slot "
                     "table does not match its description");
      return signalPassFailure();
    }
    if (cfg->boundary != static_cast<bool>(prog.boundary)) {
      func.emitError("kda-gpu-state-registers: the state kernel's boundary "
                     "states argument does not match its description");
      return signalPassFailure();
    }
    if (!prog.ws[1] || !prog.ws[2] || !prog.ws[3] || !prog.ws[4] || !prog.o) {
      func.emitError("kda-gpu-state-registers: the state kernel lacks a "
                     "workspace or its output");
      return signalPassFailure();
    }
    if (prog.boundary && cfg->vMajor)
      kda::requireAlignedRows(func, [](StringRef name, MemRefType) {
        return name == "boundary_states";
      });
    // The program the strategy stage named; without one (kda-opt runs of
    // this pass alone), the pass's own state-program option decides the
    // same way. The split-K program covers every shape the derived one does.
    SmallVector<Type> wsTypes = workspaceTypes(func, *cfg);
    std::string chosen = kda::stateLanesProgram(func, desc, threads, program);
    if (auto s = func->getAttrOfType<kda::StrategyAttr>(kda::kStrategyAttr);
        s && !s.getProgram().empty())
      chosen = s.getProgram().str();
    std::string derivedRefusal =
        chosen == "derived" ? LaneStateProgram::refusal(*cfg, wsTypes)
                            : std::string("the per-lane program is chosen");
    if (chosen == "derived" && !derivedRefusal.empty()) {
      func.emitError() << "kda-gpu-state-registers: the strategy names the "
                          "derived state program, which does not take this "
                          "kernel ("
                       << derivedRefusal << ")";
      return signalPassFailure();
    }
    if (derivedRefusal.empty()) {
      // The strategy stage's count (the pipeline gives state-stages only
      // to kda-gpu-select-strategy); the pass option serves kda-opt runs of
      // this pass alone, without a strategy.
      int64_t stages = this->stages;
      if (auto s = func->getAttrOfType<kda::StrategyAttr>(kda::kStrategyAttr);
          s && s.getStages() > 0)
        stages = s.getStages();
      if (stages < 2 || stages > 8) {
        func.emitError() << "kda-gpu-state-registers: the derived state "
                            "program's chunks in flight (state-stages) are 2 "
                            "to 8, got "
                         << stages;
        return signalPassFailure();
      }
      const bool byK = LaneStateProgram::splitsK(wsTypes, *cfg);
      LaneStateProgram lp(b, *cfg,
                          LaneStateProgram::warpsFor(*cfg, threads, byK));
      lp.byK = byK;
      lp.stages = stages;
      std::copy(std::begin(prog.ws), std::end(prog.ws), std::begin(lp.ws));
      lp.o = prog.o;
      lp.h0 = prog.h0;
      lp.ht = prog.ht;
      lp.cuSeqlens = prog.cuSeqlens;
      lp.boundary = prog.boundary;
      lp.boundaryTable = prog.boundaryTable;
      if (std::string why = lp.emit(ivs); !why.empty()) {
        func.emitError() << "kda-gpu-state-registers: the derived state "
                            "program cannot be built: "
                         << why;
        return signalPassFailure();
      }
      func->setAttr(kda::kBlockThreadsAttr,
                    b.getI64IntegerAttr(lp.threads()));
    } else {
      prog.prefetch = prefetch;
      prog.emit(ivs);
      if (maxRegisters > 0)
        func->setAttr(kda::kMaxRegistersAttr,
                      b.getI32IntegerAttr(maxRegisters));
    }
    func->setAttr(kda::kExplicitThreadsAttr, b.getUnitAttr());
  }
};

} // namespace

std::string mlir::kda::stateLanesRefusal(func::FuncOp func,
                                         StatePassAttr statePass,
                                         int64_t threads, StringRef program) {
  std::optional<StatePassConfig> cfg = readConfig(statePass);
  if (!cfg)
    return "its description (kda.state_pass) is incomplete";
  if (stateLanesProgram(func, statePass, threads, program) == "derived")
    return "";
  const int64_t warps = threads / 32;
  std::string why;
  llvm::raw_string_ostream os(why);
  if (threads % 32 != 0 || warps < 1 || cfg->vBlock % 16 != 0 ||
      cfg->chunk % 8 != 0 || cfg->chunk > 64 ||
      cfg->keyDim % (8 * warps) != 0)
    os << "V block " << cfg->vBlock << ", chunk " << cfg->chunk << ", K "
       << cfg->keyDim << ", " << threads
       << " threads: V blocks a multiple of 16, chunks a multiple of 8 up to "
          "64, K a multiple of 8 x warps";
  return why;
}

std::string mlir::kda::stateLanesProgram(func::FuncOp func,
                                         StatePassAttr statePass,
                                         int64_t threads, StringRef program) {
  std::optional<StatePassConfig> cfg = readConfig(statePass);
  if (!cfg || program == "per_lane")
    return "per_lane";
  SmallVector<Type> wsTypes = workspaceTypes(func, *cfg);
  if (wsTypes.size() != cfg->roles.size() ||
      !LaneStateProgram::refusal(*cfg, wsTypes).empty())
    return "per_lane";
  // derived or auto: every configuration LaneStateProgram takes (fp32
  // inputs since the seventeenth session: split by K at V blocks of 32, the
  // chip table's fp32 default, faster than the per-lane split-K program on
  // every shape measured; bench/RESULTS.md).
  return "derived";
}

std::unique_ptr<Pass>
mlir::kda::createGpuStateRegistersPass(int64_t threads, StringRef program,
                                       bool prefetch, int64_t maxRegisters) {
  KdaGpuStateRegistersOptions o;
  o.threads = threads;
  o.program = program.str();
  o.prefetch = prefetch;
  o.maxRegisters = maxRegisters;
  return std::make_unique<StateRegistersPass>(o);
}

