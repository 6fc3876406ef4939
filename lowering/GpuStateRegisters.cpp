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
// Programs it does not cover (boundary states, V blocks not a multiple of 16,
// K not a multiple of 8 x warps, C not a multiple of 8 or above 64) keep the
// tile lowering.
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"

#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;

namespace {

struct StatePassConfig {
  int64_t chunk = 0, keyDim = 0, vBlock = 0;
  bool vMajor = false, boundary = false;
  SmallVector<std::string> roles; // workspace roles, in workspace order
  SmallVector<int64_t> grid;      // (sequence, head[, V block]); -1 dynamic
};

std::optional<StatePassConfig> readConfig(DictionaryAttr d) {
  if (!d)
    return std::nullopt;
  StatePassConfig c;
  auto i64 = [&](StringRef name, int64_t &out) {
    auto a = d.getAs<IntegerAttr>(name);
    if (a)
      out = a.getInt();
    return static_cast<bool>(a);
  };
  auto flag = [&](StringRef name, bool &out) {
    auto a = d.getAs<BoolAttr>(name);
    if (a)
      out = a.getValue();
    return static_cast<bool>(a);
  };
  auto roles = d.getAs<ArrayAttr>("workspaces");
  if (!i64("chunk", c.chunk) || !i64("key_dim", c.keyDim) ||
      !i64("v_block", c.vBlock) || !flag("v_major", c.vMajor) ||
      !flag("boundary", c.boundary) || !roles)
    return std::nullopt;
  for (Attribute r : roles)
    c.roles.push_back(cast<StringAttr>(r).getValue().str());
  auto grid = d.getAs<ArrayAttr>("grid");
  if (!grid || grid.size() < 2 || grid.size() > 3)
    return std::nullopt;
  for (Attribute e : grid)
    c.grid.push_back(cast<IntegerAttr>(e).getInt());
  return c;
}

/// Emits one program of the state pass. Sizes: C (chunk), K, VB (V block),
/// NW warps; J = K / NW / 8 accumulator tiles per warp and V tile, MT = VB /
/// 16 V tiles, NC = C / 8 row tiles of a chunk.
struct StateProgram {
  ImplicitLocOpBuilder &b;
  const StatePassConfig &cfg;
  int64_t C, K, VB, NW, J, MT, NC, threads;
  bool precise;
  // Arguments.
  Value ws[6]; // w, u, q, k, p, g (null when absent)
  Value o, h0, ht, cuSeqlens;
  // Program and lane coordinates.
  Value n, head, vCol, row, start, length, tokens;
  Value tid, lane, warp, g, t, kBase;

  StateProgram(ImplicitLocOpBuilder &b, const StatePassConfig &cfg,
               int64_t threads, bool precise)
      : b(b), cfg(cfg), C(cfg.chunk), K(cfg.keyDim), VB(cfg.vBlock),
        NW(threads / 32), J(cfg.keyDim / (threads / 32) / 8),
        MT(cfg.vBlock / 16), NC(cfg.chunk / 8), threads(threads),
        precise(precise) {}

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value add(Value x, int64_t c) { return c == 0 ? x : add(x, idx(c)); }
  Value mul(Value x, int64_t c) {
    return arith::MulIOp::create(b, x, idx(c));
  }
  Value minu(Value x, Value y) { return arith::MinUIOp::create(b, x, y); }
  Value ult(Value x, Value y) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::ult, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, c, x, y);
  }
  Value toF32(Value v) {
    return v.getType().isF32() ? v : arith::ExtFOp::create(b, b.getF32Type(), v);
  }
  Value fromF32(Value v, Type t) {
    return t.isF32() ? v : arith::TruncFOp::create(b, t, v);
  }
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

  /// `width` consecutive f32 of workspace `w` at (row, token, head, col),
  /// read with the widest aligned vector loads.
  SmallVector<Value> loadRow(Value w, Value token, Value col, int64_t width,
                             Value keep) {
    int64_t vec = width % 4 == 0 ? 4 : (width % 2 == 0 ? 2 : 1);
    SmallVector<Value> out;
    Value zero = f32(0.0);
    for (int64_t i = 0; i < width; i += vec) {
      Value c = add(col, i);
      if (vec == 1) {
        out.push_back(memref::LoadOp::create(b, w, ValueRange{row, token, head, c}));
      } else {
        Value v = vector::LoadOp::create(
            b, VectorType::get({vec}, b.getF32Type()), w,
            ValueRange{row, token, head, c}, /*nontemporal=*/false,
            llvm::MaybeAlign(4 * vec));
        for (int64_t e = 0; e < vec; ++e)
          out.push_back(vector::ExtractOp::create(b, v, ArrayRef<int64_t>{e}));
      }
    }
    if (keep)
      for (Value &v : out)
        v = select(keep, v, zero);
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

  /// `ivs`: the program's (sequence, head, V block) coordinates, 0 where
  /// the grid has no such dimension.
  void emit(ArrayRef<Value> ivs) {
    Type f32Type = b.getF32Type();
    n = ivs[0];
    head = ivs[1];
    vCol = mul(ivs[2], VB);
    tokens = memref::DimOp::create(b, o, 1);
    if (cuSeqlens) {
      auto offset = [&](Value i) -> Value {
        Value e = memref::LoadOp::create(b, cuSeqlens, ValueRange{i});
        return arith::IndexCastOp::create(b, b.getIndexType(), e);
      };
      row = idx(0);
      start = offset(n);
      length = arith::SubIOp::create(b, offset(add(n, 1)), start);
    } else {
      row = n;
      start = idx(0);
      length = tokens;
    }
    tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    lane = arith::RemUIOp::create(b, tid, idx(32));
    warp = arith::DivUIOp::create(b, tid, idx(32));
    g = arith::DivUIOp::create(b, lane, idx(4));
    t = arith::RemUIOp::create(b, lane, idx(4));
    kBase = add(mul(warp, K / NW), mul(t, 2 * J));

    // Shared memory: the warps' partial products (rows padded by one word
    // against bank conflicts), V_new^T and (Gamma Q) S as A operands (rows
    // padded by four).
    const bool delta = static_cast<bool>(ws[0]);
    const int64_t products = delta ? 2 : 1;
    auto red = memref::AllocOp::create(
        b, MemRefType::get({NW, products, C, VB + 1}, f32Type));
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

    Value numChunks = arith::CeilDivUIOp::create(b, length, idx(C));
    auto loop = scf::ForOp::create(b, idx(0), numChunks, idx(1), init);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      SmallVector<Value> S(loop.getRegionIterArgs().begin(),
                           loop.getRegionIterArgs().end());
      SmallVector<Value> next = emitChunk(loop.getInductionVar(), S, red, vnT, oS);
      scf::YieldOp::create(b, next);
    }

    // The final state.
    if (ht) {
      Type type = cast<MemRefType>(ht.getType()).getElementType();
      for (int64_t mt = 0; mt < MT; ++mt)
        for (int64_t j = 0; j < J; ++j) {
          Value acc = loop.getResult(mt * J + j);
          for (int64_t i = 0; i < 4; ++i)
            memref::StoreOp::create(b, fromF32(element(acc, i), type), ht,
                                    stateIndex(kcol(j, i), vRow(mt, i)));
        }
    }
  }

  SmallVector<Value> emitChunk(Value chunkIdx, ArrayRef<Value> S, Value red,
                               Value vnT, Value oS) {
    Value w = ws[0], u = ws[1], qd = ws[2], kd = ws[3], p = ws[4],
          gl = ws[5];
    const bool delta = static_cast<bool>(w);
    const int64_t products = delta ? 2 : 1;
    Value local = mul(chunkIdx, C);
    Value t0 = add(start, local);
    Value valid = minu(idx(C), arith::SubIOp::create(b, length, local));
    Value lastRow = arith::SubIOp::create(b, valid, idx(1));
    // Token of chunk row r (rows past the end read the last valid row, and
    // are masked where they matter).
    auto token = [&](Value r) { return add(t0, minu(r, lastRow)); };
    auto rowOk = [&](Value r) { return ult(r, valid); };

    // All global loads of the chunk first.
    // W and Gamma Q rows 8m + g: the lane's 2J key columns.
    SmallVector<SmallVector<Value>> wRows, qRows;
    for (int64_t m = 0; m < NC; ++m) {
      Value r = add(g, 8 * m);
      if (delta)
        wRows.push_back(loadRow(w, token(r), kBase, 2 * J, rowOk(r)));
      qRows.push_back(loadRow(qd, token(r), kBase, 2 * J, {}));
    }
    // Decayed k, B operand of S^T += V_new^T k~: rows 8kk + t (+4), the key
    // column of output column g of tile j.
    Value gHalf = arith::DivUIOp::create(b, g, idx(2));
    Value gOdd = arith::RemUIOp::create(b, g, idx(2));
    Value kColOfG = add(add(mul(warp, K / NW), mul(gHalf, 2 * J)), gOdd);
    SmallVector<Value> kFrag; // [kk][j][2]
    for (int64_t kk = 0; kk < NC; ++kk)
      for (int64_t j = 0; j < J; ++j)
        for (int64_t h = 0; h < 2; ++h) {
          Value r = add(t, 8 * kk + 4 * h);
          kFrag.push_back(
              loadF32(kd, {row, token(r), head, add(kColOfG, 2 * j)}, rowOk(r)));
        }
    SmallVector<Value> decay;
    if (gl)
      for (Value x : loadRow(gl, t0, kBase, 2 * J, {}))
        decay.push_back(math::ExpOp::create(b, x));
    // U for the elements this thread reduces: e = tid + s * threads.
    SmallVector<std::pair<Value, Value>> mine; // (c, v) per element
    SmallVector<Value> uVals;
    for (int64_t s = 0; s * threads < VB * C; ++s) {
      Value e = add(tid, s * threads);
      Value c = arith::DivUIOp::create(b, e, idx(VB));
      Value v = arith::RemUIOp::create(b, e, idx(VB));
      mine.push_back({c, v});
      uVals.push_back(loadF32(u, {row, token(c), head, add(vCol, v)}, rowOk(c)));
    }
    // P fragments of the output tiles this warp owns (tile = warp + s * NW;
    // past the last tile it reads the last one, unused): rows 8 nt + g,
    // columns 8 kk + t (+4).
    SmallVector<SmallVector<Value>> pFrag; // [s][kk * 2 + h]
    for (int64_t s = 0; s * NW < MT * NC; ++s) {
      Value tile = minu(add(warp, s * NW), idx(MT * NC - 1));
      Value pr = add(g, mul(arith::RemUIOp::create(b, tile, idx(NC)), 8));
      SmallVector<Value> frags;
      for (int64_t kk = 0; kk < NC; ++kk)
        for (int64_t h = 0; h < 2; ++h)
          frags.push_back(
              loadF32(p, {row, token(pr), head, add(t, 8 * kk + 4 * h)}));
      pFrag.push_back(frags);
    }

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
      vn = select(rowOk(c), vn, f32(0.0));
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
                    {kFrag[(kk * J + j) * 2], kFrag[(kk * J + j) * 2 + 1]},
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
        auto store = scf::IfOp::create(b, rowOk(c), false);
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(store.thenBlock());
        memref::StoreOp::create(
            b, fromF32(element(acc, i), oType), o,
            ValueRange{row, add(t0, c), head, add(vCol, vRow(mt, i))});
      }
    }

    return next;
  }
};

struct StateRegistersPass
    : PassWrapper<StateRegistersPass, OperationPass<func::FuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(StateRegistersPass)
  StateRegistersPass() = default;
  StateRegistersPass(const StateRegistersPass &other) : PassWrapper(other) {}
  explicit StateRegistersPass(int64_t threads) { this->threads = threads; }
  StringRef getArgument() const override { return "kda-gpu-state-registers"; }
  StringRef getDescription() const override {
    return "Lower the state grid of a chunk-parallel schedule to an NVIDIA "
           "kernel that keeps the state in mma.sync accumulators";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<gpu::GPUDialect, nvgpu::NVGPUDialect,
                    vector::VectorDialect, math::MathDialect, scf::SCFDialect,
                    memref::MemRefDialect, arith::ArithDialect>();
  }
  Option<int64_t> threads{*this, "threads",
                          llvm::cl::desc("Threads per block"),
                          llvm::cl::init(128)};

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    std::optional<StatePassConfig> cfg = readConfig(
        func->getAttrOfType<DictionaryAttr>(kda::kStatePassAttr));
    auto abi = func->getAttrOfType<ArrayAttr>("kda.abi");
    if (!cfg || !abi || func.isExternal())
      return;
    // What this lowering covers; everything else keeps the tile lowering.
    const int64_t warps = threads / 32;
    if (cfg->boundary || threads % 32 != 0 || cfg->vBlock % 16 != 0 ||
        cfg->chunk % 8 != 0 || cfg->chunk > 64 ||
        cfg->keyDim % (8 * warps) != 0)
      return;
    SmallVector<scf::ForallOp> grids;
    for (Operation &op : func.getBody().front())
      if (auto f = dyn_cast<scf::ForallOp>(op))
        grids.push_back(f);
    if (grids.size() != 1 || !grids[0].getOutputs().empty())
      return;
    scf::ForallOp forall = grids[0];

    // Arguments by name.
    auto byName = [&](StringRef name) -> Value {
      std::optional<unsigned> i = kda::abiArgumentIndex(abi, name);
      return i ? func.getArgument(*i) : Value();
    };
    // fp32 kernels (no 16-bit float argument) keep fp32 accuracy (3xTF32).
    bool precise = kda::keepsFp32Accuracy(func.getArgumentTypes());
    // The GPU pipelines keep a grid's dimensions of extent 1; where a
    // canonicalizer folded them away, the remaining induction variables are
    // the other coordinates, in order.
    SmallVector<int64_t> kept;
    for (auto [d, extent] : llvm::enumerate(cfg->grid))
      if (extent != 1 || forall.getRank() == static_cast<int64_t>(cfg->grid.size()))
        kept.push_back(d);
    if (kept.size() != static_cast<size_t>(forall.getRank()))
      return;
    Block *body = forall.getBody();
    SmallVector<Value> ivs;
    SmallVector<Operation *> old;
    for (Operation &op : body->without_terminator())
      old.push_back(&op);
    for (Operation *op : llvm::reverse(old)) {
      op->dropAllUses();
      op->erase();
    }
    ImplicitLocOpBuilder b(forall.getLoc(), &getContext());
    b.setInsertionPoint(body->getTerminator());
    Value zero = arith::ConstantIndexOp::create(b, 0);
    ivs.assign(3, zero);
    for (auto [i, d] : llvm::enumerate(kept))
      ivs[d] = forall.getInductionVar(i);
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
    if (!prog.ws[1] || !prog.ws[2] || !prog.ws[3] || !prog.ws[4] || !prog.o) {
      func.emitError("kda-gpu-state-registers: the state kernel lacks a "
                     "workspace or its output");
      return signalPassFailure();
    }
    prog.emit(ivs);
    func->setAttr(kda::kExplicitThreadsAttr, b.getUnitAttr());
  }
};

} // namespace

std::unique_ptr<Pass> mlir::kda::createGpuStateRegistersPass(int64_t threads) {
  return std::make_unique<StateRegistersPass>(threads);
}

void mlir::kda::registerGpuStateRegistersPass() {
  PassRegistration<StateRegistersPass>();
}
