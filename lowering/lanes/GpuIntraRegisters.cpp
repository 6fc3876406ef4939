//===- GpuIntraRegisters.cpp - the intra-chunk grid in registers ----------===//
//
// The chunk-parallel schedule's intra-chunk grid runs one program per
// (sequence, chunk, value head) (varlen: per window of C packed tokens, and
// per sequence for its chunk 0: IntraProgram::emitVarlen, a flat grid with no
// empty programs) and computes everything of a chunk that does
// not depend on the state entering it (passes/GatedDeltaKernel.cpp,
// emitIntraChunk, is the definition): the prologue (l2 norm, scale, beta and
// gate activations), the gate's prefix sum G, the decayed products
//
//   P = tril(Q_r K_r^T),  L = beta * strict_tril(K'_r K_r^T),  A = (I + L)^-1
//   W = A (beta Gamma K),  U = A (beta V)
//
// with the decays factored from a reference row r (Q_r = Q exp(G - G_r),
// K_r = K exp(G_r - G), K'_r = K exp(G - G_r); r the middle row of each
// 8-key n tile, or the exact pairwise form where that would overflow:
// products()), and the decayed q and k the state pass reads. Lowered like every tile program, each of these steps is
// a phase over shared memory fenced by barriers (64 per chunk). This pass
// writes the program for NVIDIA tensor cores with the tiles in registers.
//
// Layout (g = lane / 4, t = lane % 4): the K columns are split over the
// warps (K / warps each) and, within a warp, over t: lane (g, t) holds rows
// g and g + 8 of its warp's columns t * KL .. t * KL + KL - 1 (KL = K /
// warps / 4), so every global row access is one 16-byte vector. The
// mma.sync m16n8k8 operand fragments of the products over K come straight
// from these registers: k-step s takes the lane's columns 2s and 2s + 1 as
// the fragment's k indices t and t + 4 (any bijection works for a
// contracted index, as long as A and B use the same one). The prefix sum
// over rows is a shuffle scan over g; row sums (the l2 norm) are shuffles
// over t and one exchange between warps.
//
// Shared memory holds what crosses warps: the warps' partial P and L (their
// sum is the product over all of K), beta and the full L, A as an operand
// fragment, and beta Gamma K and beta V transposed for W and U (the
// products over chunk rows want the row index where the first products
// had the column). Four barriers per chunk.
//
// Every gate form: decays are factored where their exponents stay within
// f32 and computed pairwise where a chunk's would not (products()). What it
// does not take (chunks other than 16 in one sub-chunk, sizes that do not
// split over the warps) is intraLanesRefusal's answer to
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
  return c;
}

/// Emits one program of the intra-chunk grid. Sizes: C = 16 (chunk), K, V,
/// NW warps, KW = K / NW and VW = V / NW columns per warp, KL = KW / 4 and
/// VL = VW / 4 per lane and row.
struct IntraProgram : kda::LaneBuilder {
  const IntraPassConfig &cfg;
  int64_t C, K, V, NW, KW, VW, KL, VL, threads;
  bool precise;
  // Arguments.
  Value q, k, v, gate, beta, aLog, dtBias, cuSeqlens;
  Value ws[6]; // w, u, q, k, p, g (null when absent)
  // Lane coordinates.
  Value tid, lane, warp, g, t, colK, colV;

  /// The chunk from the one algorithm (emitIntraChunk on lane tiles,
  /// emitDerivedChunk) instead of the program written here per lane.
  bool derived = false;

  IntraProgram(ImplicitLocOpBuilder &b, const IntraPassConfig &cfg,
               int64_t threads, bool precise)
      : LaneBuilder(b), cfg(cfg), C(cfg.chunk), K(cfg.keyDim), V(cfg.valueDim),
        NW(threads / 32), KW(cfg.keyDim / (threads / 32)),
        VW(cfg.valueDim / (threads / 32)), KL(KW / 4), VL(VW / 4),
        threads(threads), precise(precise) {}

  Value exp(Value x) { return math::ExpOp::create(b, x); }
  Value element(Value acc, int64_t e) {
    return vector::ExtractOp::create(b, acc, ArrayRef<int64_t>{e / 2, e % 2});
  }
  Value zeroAcc() {
    Value z = f32(0.0);
    return vector::FromElementsOp::create(
        b, VectorType::get({2, 2}, b.getF32Type()), ValueRange{z, z, z, z});
  }
  Value mma(ArrayRef<Value> a, ArrayRef<Value> bv, Value acc) {
    return kda::emitMmaSyncTf32(b, b.getLoc(), a, bv, acc, precise);
  }
  Value shuffle(Value x, Value offset, gpu::ShuffleMode mode) {
    return gpu::ShuffleOp::create(b, x, offset, i32(32), mode).getResult(0);
  }
  Value laneI32(Value x) {
    return arith::IndexCastOp::create(b, b.getI32Type(), x);
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

  /// Stores the warp's partial P = Q K^T and L = K K^T over its columns,
  /// decayed pairwise by exp(G_i - G_j), into red[warp][0 / 1] (16 x 16;
  /// entries above the diagonal are left as they come: the reader masks
  /// them).
  ///
  /// Decays enter the products factored, exp(G_i - G_j) =
  /// exp(G_i - G_r) exp(G_r - G_j), with a reference row r per group of
  /// keys: the middle row of each 8-key n tile (r = 8 nt + 4), whose
  /// positive exponents span at most 4 gate steps (query rows 8 nt .. r - 1)
  /// and 3 (key rows r + 1 .. 8 nt + 7). Lower-bounded gates (g >= lb) keep
  /// them under 4 |lb| <= 80 by construction. Other gates (softplus,
  /// log-space inputs) may not, and each warp checks, per chunk, the largest
  /// exponent it would use (exp overflows f32 near 88):
  ///   - up to 80: the 8-key groups (one mma per n tile and product);
  ///   - else, with 4-key groups (r = 8 nt + 4 gr + 2, exponents within 2
  ///     gate steps; two mma per n tile, each with the other group's keys
  ///     zeroed), up to 80: that form. Steep gates (Kimi's softplus with
  ///     A = exp(A_log) up to 16 reaches -48 a token) land here, where the
  ///     pairwise form cost half of the kernel's time again;
  ///   - else, with 2-key groups (r = 8 nt + 2 gr + 1: the one positive
  ///     exponent is a single gate step, checked by stepSpread()), up to 80:
  ///     that form. Two steps of Kimi's steepest heads pass 80 often enough
  ///     that the pairwise form behind them took a third of softplus' intra
  ///     time at 8 x 4096 (bench/RESULTS.md);
  ///   - else the pairwise form, exact for any gate (the tile algorithm's,
  ///     GatedDeltaKernel.cpp).
  /// The choice is uniform within the warp (mma.sync needs the whole warp)
  /// and needs no barrier.
  void products(SmallVector<Value> *Q, SmallVector<Value> *Kx,
                SmallVector<Value> *G, Value red) {
    const bool decays = cfg.gate != "none";
    const bool bounded = cfg.gateActivation == GateActivation::lower_bound &&
                         -cfg.lowerBound * 4.0 <= 80.0;
    for (int nt = 0; nt < 2; ++nt) {
      if (!decays || bounded) {
        factored(Q, Kx, G, nt, 8, red);
        continue;
      }
      auto tryGroups = [&](int gs, llvm::function_ref<void()> otherwise) {
        Value fits = arith::CmpFOp::create(b, arith::CmpFPredicate::OLE,
                                           spread(G, nt, gs), f32(80.0));
        auto ifOp = scf::IfOp::create(b, fits, /*withElseRegion=*/true);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        factored(Q, Kx, G, nt, gs, red);
        b.setInsertionPointToStart(ifOp.elseBlock());
        otherwise();
      };
      tryGroups(8, [&] {
        tryGroups(4, [&] {
          Value fits = arith::CmpFOp::create(
              b, arith::CmpFPredicate::OLE, stepSpread(G, nt), f32(80.0));
          auto ifOp = scf::IfOp::create(b, fits, /*withElseRegion=*/true);
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(ifOp.thenBlock());
          factored(Q, Kx, G, nt, 2, red);
          b.setInsertionPointToStart(ifOp.elseBlock());
          pairwise(Q, Kx, G, nt, red);
        });
      });
    }
  }

  /// G at the reference row of key group gr (gs rows) of n tile nt, row
  /// 8 nt + gs gr + gs / 2, the lane's column c.
  Value ref(SmallVector<Value> *G, int nt, int gs, int gr, int64_t c,
            bool forSpread = false) {
    // spread() names the source lane differently (t | 4 r, the same lane
    // as t + 4 r): CSE would otherwise merge its shuffles with factored()'s
    // and keep the references live from one to the other (ptxas spilled at
    // 128 registers); recomputing them there costs a shuffle each.
    Value row4 = idx(4 * (gs * gr + gs / 2));
    Value src = forSpread ? Value(arith::OrIOp::create(b, t, row4))
                          : add(t, row4);
    return shuffle(G[nt][c], laneI32(src), gpu::ShuffleMode::IDX);
  }
  /// The reference of the group holding the lane's key row 8 nt + g (for
  /// groups smaller than 8 the reference row is computed per lane: one
  /// shuffle).
  Value ownRef(SmallVector<Value> *G, int nt, int gs, int64_t c,
               bool forSpread = false) {
    if (gs == 8)
      return ref(G, nt, gs, 0, c, forSpread);
    Value row = add(mul(arith::DivUIOp::create(b, g, idx(gs)), gs), gs / 2);
    Value row4 = mul(row, 4);
    Value src = forSpread ? Value(arith::OrIOp::create(b, t, row4))
                          : add(t, row4);
    return shuffle(G[nt][c], laneI32(src), gpu::ShuffleMode::IDX);
  }

  /// The largest exponent the factored form of n tile nt with `gs`-key
  /// groups would take, over the warp (query rows from their group's start
  /// on; the others are zeroed there). It is taken as minus the least of
  /// the negated exponents: the differences factored() takes would be merged
  /// with these by CSE and kept live from here to there (spills at 128
  /// registers), where the references alone are few.
  Value spread(SmallVector<Value> *G, int nt, int gs) {
    Value least = f32(0.0);
    auto narrow = [&](Value x) {
      least = arith::MinimumFOp::create(b, least, x);
    };
    for (int64_t c = 0; c < KL; ++c) {
      narrow(fsub(G[nt][c], ownRef(G, nt, gs, c, /*forSpread=*/true)));
      for (int gr = 0; gr < 8 / gs; ++gr) {
        Value r = ref(G, nt, gs, gr, c, /*forSpread=*/true);
        for (int h = nt; h < 2; ++h) {
          Value d = fsub(r, G[h][c]);
          if (h == nt && gr > 0)
            d = select(ult(g, idx(gs * gr)), f32(0.0), d);
          narrow(d);
        }
      }
    }
    for (int off : {1, 2, 4, 8, 16})
      least = arith::MinimumFOp::create(
          b, least, shuffle(least, i32(off), gpu::ShuffleMode::XOR));
    return arith::NegFOp::create(b, least);
  }

  /// The largest exponent the factored form with 2-key groups takes: its
  /// reference rows are the odd rows r of n tile nt, and the only positive
  /// exponent is one gate step, G_{r-1} - G_r (row r - 1 against r's keys),
  /// over the warp's columns. Cheaper than spread() (one xor shuffle per
  /// column), which kept too many references live at this depth.
  Value stepSpread(SmallVector<Value> *G, int nt) {
    Value odd = arith::CmpIOp::create(
        b, arith::CmpIPredicate::eq, arith::AndIOp::create(b, g, idx(1)),
        idx(1));
    Value most = f32(0.0);
    for (int64_t c = 0; c < KL; ++c) {
      // Lane (g, t) ^ 4 holds row g ^ 1: row r - 1 for an odd row r.
      Value step =
          fsub(shuffle(G[nt][c], i32(4), gpu::ShuffleMode::XOR), G[nt][c]);
      most = arith::MaximumFOp::create(b, most, select(odd, step, f32(0.0)));
    }
    for (int off : {1, 2, 4, 8, 16})
      most = arith::MaximumFOp::create(
          b, most, shuffle(most, i32(off), gpu::ShuffleMode::XOR));
    return most;
  }

  /// The factored form of n tile nt: per key group, A rows Q exp(G_i - G_r)
  /// and K exp(G_i - G_r) (zero for rows before the group: they pair with
  /// none of its keys), B rows K exp(G_r - G_j) for the group's keys (zero
  /// for the others); mma.sync over the warp's columns.
  void factored(SmallVector<Value> *Q, SmallVector<Value> *Kx,
                SmallVector<Value> *G, int nt, int gs, Value red) {
    const bool delta = cfg.delta;
    const bool decays = cfg.gate != "none";
    const int groups = 8 / gs;
    SmallVector<Value> kOwn;
    for (int64_t c = 0; c < KL; ++c)
      kOwn.push_back(decays ? fmul(Kx[nt][c],
                                   exp(fsub(ownRef(G, nt, gs, c), G[nt][c])))
                            : Kx[nt][c]);
    Value acc[2] = {zeroAcc(), zeroAcc()}; // P, L
    for (int gr = 0; gr < groups; ++gr) {
      SmallVector<Value> kR = kOwn, qA[2], kA[2];
      if (groups > 1) {
        Value mine =
            arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                  arith::DivUIOp::create(b, g, idx(gs)),
                                  idx(gr));
        for (Value &x : kR)
          x = select(mine, x, f32(0.0));
      }
      for (int h = 0; h < 2; ++h) {
        Value before =
            groups > 1 && h == nt && gr > 0 ? ult(g, idx(gs * gr)) : Value();
        for (int64_t c = 0; c < KL; ++c) {
          if (h < nt) {
            qA[h].push_back(f32(0.0));
            kA[h].push_back(f32(0.0));
            continue;
          }
          Value up = decays ? exp(fsub(G[h][c], ref(G, nt, gs, gr, c)))
                            : Value();
          Value qa = decays ? fmul(Q[h][c], up) : Q[h][c];
          Value ka = decays ? fmul(Kx[h][c], up) : Kx[h][c];
          if (before) {
            qa = select(before, f32(0.0), qa);
            ka = select(before, f32(0.0), ka);
          }
          qA[h].push_back(qa);
          kA[h].push_back(ka);
        }
      }
      for (int64_t s = 0; s < KL / 2; ++s) {
        SmallVector<Value> bK = {kR[2 * s], kR[2 * s + 1]};
        acc[0] = mma({qA[0][2 * s], qA[1][2 * s], qA[0][2 * s + 1],
                      qA[1][2 * s + 1]},
                     bK, acc[0]);
        if (delta)
          acc[1] = mma({kA[0][2 * s], kA[1][2 * s], kA[0][2 * s + 1],
                        kA[1][2 * s + 1]},
                       bK, acc[1]);
      }
    }
    // Accumulator element e: row g + 8 (e / 2), column 8 nt + 2t + e % 2.
    for (int m = 0; m < (delta ? 2 : 1); ++m)
      for (int64_t e = 0; e < 4; ++e)
        memref::StoreOp::create(b, element(acc[m], e), red,
                                ValueRange{warp, idx(m), add(g, 8 * (e / 2)),
                                           add(mul(t, 2), 8 * nt + e % 2)});
  }

  /// The pairwise form of n tile nt: key row j's columns come from lane
  /// (j % 8, t) by shuffles, each lane sums its rows' products over its own
  /// columns, the four lanes of a row group add theirs (butterfly over t),
  /// and one of them stores the entry.
  void pairwise(SmallVector<Value> *Q, SmallVector<Value> *Kx,
                SmallVector<Value> *G, int nt, Value red) {
    const bool delta = cfg.delta;
    for (int64_t j = 8 * nt; j < 8 * nt + 8; ++j) {
      const int hj = j / 8;
      Value src = laneI32(add(t, 4 * (j % 8)));
      SmallVector<Value> kj, gj;
      for (int64_t c = 0; c < KL; ++c) {
        kj.push_back(shuffle(Kx[hj][c], src, gpu::ShuffleMode::IDX));
        gj.push_back(shuffle(G[hj][c], src, gpu::ShuffleMode::IDX));
      }
      Value sums[2][2]; // [row half][P or L]
      for (int h = hj; h < 2; ++h) { // rows 0..7 pair with no key past 7
        Value p = f32(0.0), l = f32(0.0);
        for (int64_t c = 0; c < KL; ++c) {
          Value e = exp(fsub(G[h][c], gj[c]));
          p = fma(fmul(Q[h][c], kj[c]), e, p);
          if (delta)
            l = fma(fmul(Kx[h][c], kj[c]), e, l);
        }
        for (int off : {1, 2}) {
          p = fadd(p, shuffle(p, i32(off), gpu::ShuffleMode::XOR));
          if (delta)
            l = fadd(l, shuffle(l, i32(off), gpu::ShuffleMode::XOR));
        }
        sums[h][0] = p;
        sums[h][1] = l;
      }
      when(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, t, idx(0)),
           [&] {
             for (int h = hj; h < 2; ++h)
               for (int m = 0; m < (delta ? 2 : 1); ++m)
                 memref::StoreOp::create(b, sums[h][m], red,
                                         ValueRange{warp, idx(m), add(g, 8 * h),
                                                    idx(j)});
           });
    }
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

  /// A chunk's rows as a lane sees them (both programs): rows g and g + 8,
  /// whether each is a token of the sequence, the token it reads (the last
  /// valid one past the end), and the lane coordinates (tid, lane, warp, g,
  /// t, colK, colV).
  struct ChunkRows {
    Value valid, qkHead;
    Value r[2], ok[2], tok[2];
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
    lane = arith::RemUIOp::create(b, tid, idx(32));
    warp = arith::DivUIOp::create(b, tid, idx(32));
    g = arith::DivUIOp::create(b, lane, idx(4));
    t = arith::RemUIOp::create(b, lane, idx(4));
    colK = add(mul(warp, KW), mul(t, KL));
    colV = add(mul(warp, VW), mul(t, VL));
    for (int h = 0; h < 2; ++h) {
      cr.r[h] = add(g, 8 * h);
      cr.ok[h] = ult(cr.r[h], cr.valid);
      cr.tok[h] = add(t0, minu(cr.r[h], lastRow));
    }
    return cr;
  }

  /// [C, D] tiles as the program loads them: lane (g, t) holds rows g and
  /// g + 8 of D / NW / 4 consecutive columns (16-byte vectors), t after t,
  /// warp after warp. Products over D take them as they are (the lane tile
  /// builder relabels the contracted index: relabeledOperands).
  kda::LaneLayout blocked(int64_t D) const {
    const int64_t DW = D / NW, DL = DW / 4;
    kda::LaneLayout l;
    l.shape = {C, D};
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t c = 0; c < DL; ++c)
        l.regs.push_back({8 * h, c});
    l.lanes = {{0, DL}, {0, 2 * DL}, {1, 0}, {2, 0}, {4, 0}};
    for (int64_t w = 1; w < NW; w *= 2)
      l.warps.push_back({0, DW * w});
    return l;
  }
  /// The rows of blocked(): one register per row half, copies on t and on
  /// the warps (beta).
  kda::LaneLayout blockedRows() const {
    kda::LaneLayout l;
    l.shape = {C};
    l.regs = {{0}, {8}};
    l.lanes = {{0}, {0}, {1}, {2}, {4}};
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
    for (int64_t w = 1; w < NW; w *= 2)
      l.warps.push_back({DW * w});
    return l;
  }

  /// Stores a [C, D] tile's rows below `valid` at mem[row, t0 + i, head,
  /// column] (workspaces [B, T, H, D]), each element once (the first copy),
  /// consecutive column pairs of a lane as one vector.
  void storeTile(kda::LaneTileBuilder &tb, Value tile, Value mem, Value row,
                 Value t0, Value head, Value valid) {
    const kda::LaneLayout &l = tb.layoutOf(tile);
    ArrayRef<Value> regs = tb.registersOf(tile);
    if (l == blocked(l.shape[1])) {
      // 16-byte rows.
      const int64_t DL = l.regs.size() / 2;
      Value col = add(mul(warp, l.shape[1] / NW), mul(t, DL));
      for (int h = 0; h < 2; ++h) {
        Value i = add(g, 8 * h);
        when(ult(i, valid), [&] {
          storeRow(mem, {row, add(t0, i), head}, col,
                   regs.slice(h * DL, DL));
        });
      }
      return;
    }
    Value first = tb.holdsFirstCopy(l);
    when(first, [&] {
      for (size_t r = 0; r < l.regs.size(); ++r) {
        const bool pair = r + 1 < l.regs.size() &&
                          l.regs[r + 1][0] == l.regs[r][0] &&
                          l.regs[r + 1][1] == l.regs[r][1] + 1 &&
                          l.regs[r][1] % 2 == 0;
        Value i = tb.coordinate(l, r, 0), j = tb.coordinate(l, r, 1);
        SmallVector<Value> values = {regs[r]};
        if (pair)
          values.push_back(regs[r + 1]);
        when(ult(i, valid), [&] {
          storeRow(mem, {row, add(t0, i), head}, j, values);
        });
        if (pair)
          ++r;
      }
    });
  }

  /// One chunk, emitIntraChunk (passes/GatedDeltaKernel.cpp) on lane tiles:
  /// this driver loads the chunk's inputs into blocked() tiles and stores
  /// what the state pass reads; every step between is the algorithm's.
  void emitDerivedChunk(Value row, Value t0, Value remaining, Value head) {
    Type f32Type = b.getF32Type();
    ChunkRows cr = chunkRows(t0, remaining, head);
    Value valid = cr.valid, qkHead = cr.qkHead, *ok = cr.ok, *tok = cr.tok;

    kda::LaneTileBuilder tb(b, 32, NW, lane, warp);
    // Products of f32 tiles (decayed q and k need f32's range): one TF32
    // product a step for 16-bit inputs (the per-lane program's precision),
    // 3xTF32 for fp32 inputs.
    tb.useMmaSync(f32Type, precise);
    auto wg = gpu::AddressSpaceAttr::get(b.getContext(),
                                         gpu::AddressSpace::Workgroup);
    // Sums across warps: the 16 x 16 products' accumulators (8 registers a
    // lane; the decayed pairs of P and L meet in one sum: 16); two halves.
    const int64_t regs = 2 * C * C / 32;
    if (NW > 1)
      tb.useScratch(memref::AllocOp::create(
          b, MemRefType::get({2 * NW * regs * 32}, f32Type,
                             MemRefLayoutAttrInterface(), wg)));
    // The triangular inverse leaves a column per lane; the products take
    // mma.sync's fragments: converted through each warp's region.
    // W and U take beta Gamma K and beta V (rows of tokens) as B operands
    // (the contracted index on the rows): through the same regions, each
    // warp its columns.
    tb.useExchange(memref::AllocOp::create(
        b, MemRefType::get({NW * C * (std::max(std::max(KW, VW), C) + 1)},
                           f32Type, MemRefLayoutAttrInterface(), wg)));
    tb.preferColumnSplits();
    // beta Gamma K and beta V, parked through the intra-chunk matrices
    // (row-major, 16-byte rows plus 4 words): the UT transform's products
    // read them from there as B operands, and their registers are free for
    // the pairs (held, ptxas spilled the softplus gate's form at 128).
    auto rowWords = [](int64_t d) { return (d + 3) / 4 * 4 + 4; };
    tb.useParking(memref::AllocOp::create(
        b, MemRefType::get({C * (rowWords(K) + rowWords(V))}, f32Type,
                           MemRefLayoutAttrInterface(), wg)));
    // Fills of the chunk's [C, C] matrices (the algorithm's P and L before
    // their blocks are inserted): the accumulator's layout, a copy per warp.
    kda::LaneLayout cc = kda::LaneTileBuilder::mmaAccumulator(C, C, 1);
    for (int64_t w = 1; w < NW; w *= 2)
      cc.warps.push_back({0, 0});
    tb.anchor(cc);

    auto loadTile = [&](Value mem, Value headIdx, Value col, int64_t D,
                        bool masked) {
      SmallVector<Value> regsOut;
      for (int h = 0; h < 2; ++h)
        llvm::append_range(regsOut,
                           loadRow(mem, {row, tok[h], headIdx}, col, D / NW / 4,
                                   masked ? ok[h] : Value()));
      return tb.make(blocked(D), regsOut);
    };
    kda::ChunkInputs in;
    in.q = loadTile(q, qkHead, colK, K, true);
    in.k = loadTile(k, qkHead, colK, K, true);
    in.v = loadTile(v, head, colV, V, true);
    if (cfg.gate == "channel") {
      in.gate = loadTile(gate, head, colK, K, false);
    } else if (cfg.gate == "head") {
      SmallVector<Value> regsOut;
      for (int h = 0; h < 2; ++h) {
        Value x = toF32(
            memref::LoadOp::create(b, gate, ValueRange{row, tok[h], head}));
        regsOut.append(KL, x);
      }
      in.gate = tb.make(blocked(K), regsOut);
    }
    if (cfg.beta) {
      SmallVector<Value> bs;
      for (int h = 0; h < 2; ++h)
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
    in.validRows = valid;

    kda::ChunkConfig config = cfg.chunkConfig(C, cfg.subChunk, K, V);
    // What the state pass reads of q and k, stored as soon as it is final
    // (its registers are free for the products after).
    auto early = [&](Value qDecayed, Value kToEnd, Value gLast) {
      if (!tb.failure().empty())
        return;
      storeTile(tb, qDecayed, ws[2], row, t0, head, valid);
      storeTile(tb, kToEnd, ws[3], row, t0, head, valid);
      if (gLast) {
        // G_last in the chunk's first row, stored by the lanes of row 0.
        SmallVector<Value> gl = tb.convertLayout(gLast, blockedColumns(K));
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
      storeTile(tb, tile, mem, row, t0, head, valid);
    };
    (void)kda::emitIntraChunk(tb, config, in, early, done);
    if (!tb.failure().empty())
      failure = tb.failure();
  }
  /// Why the derived chunk could not be built; empty if it could.
  std::string failure;

  void emitChunk(Value row, Value t0, Value remaining, Value head) {
    if (derived)
      return emitDerivedChunk(row, t0, remaining, head);
    Type f32Type = b.getF32Type();
    const bool delta = cfg.delta;
    const bool decays = cfg.gate != "none";
    ChunkRows cr = chunkRows(t0, remaining, head);
    Value valid = cr.valid, qkHead = cr.qkHead, *r = cr.r, *ok = cr.ok,
          *tok = cr.tok;

    // Shared memory (rows padded against bank conflicts).
    auto alloc = [&](ArrayRef<int64_t> shape) -> Value {
      return memref::AllocOp::create(b, MemRefType::get(shape, f32Type));
    };
    auto pad8 = [](int64_t w) { return w + ((8 - w % 32) % 32 + 32) % 32; };
    Value norms = cfg.l2norm ? alloc({NW, 2, C}) : Value();
    Value red = alloc({NW, delta ? 2 : 1, C, C + 1});
    Value betaS = delta ? alloc({C}) : Value();
    Value lFull = delta ? alloc({C, C + 4}) : Value();
    Value aInv = delta ? alloc({NW, C, C + 4}) : Value();
    Value kT = delta ? alloc({NW, C, pad8(KW)}) : Value();
    Value vT = delta ? alloc({NW, C, pad8(VW)}) : Value();

    // All global loads first.
    SmallVector<Value> Q[2], Kx[2], Vx[2], Gr[2];
    Value betaRaw[2];
    for (int h = 0; h < 2; ++h) {
      Q[h] = loadRow(q, {row, tok[h], qkHead}, colK, KL, ok[h]);
      Kx[h] = loadRow(k, {row, tok[h], qkHead}, colK, KL, ok[h]);
      Vx[h] = loadRow(v, {row, tok[h], head}, colV, VL, ok[h]);
      if (cfg.gate == "channel") {
        Gr[h] = loadRow(gate, {row, tok[h], head}, colK, KL, {});
      } else if (cfg.gate == "head") {
        Value x = toF32(
            memref::LoadOp::create(b, gate, ValueRange{row, tok[h], head}));
        Gr[h].assign(KL, x);
      }
      if (cfg.beta)
        betaRaw[h] = select(ok[h],
                            toF32(memref::LoadOp::create(
                                b, beta, ValueRange{row, tok[h], head})),
                            f32(0.0));
    }
    Value aLogV = aLog ? toF32(memref::LoadOp::create(b, aLog, ValueRange{head}))
                       : Value();
    SmallVector<Value> dt;
    if (dtBias) {
      if (cast<MemRefType>(dtBias.getType()).getRank() == 2)
        dt = loadRow(dtBias, {head}, colK, KL, {});
      else
        dt.assign(KL, toF32(memref::LoadOp::create(b, dtBias,
                                                   ValueRange{head})));
    }

    // l2 norm over K: sums over the lane's columns, over t (shuffles),
    // then over the warps.
    if (cfg.l2norm) {
      SmallVector<Value> *tiles[2] = {Q, Kx};
      for (int x = 0; x < 2; ++x)
        for (int h = 0; h < 2; ++h) {
          Value ss = f32(0.0);
          for (Value e : tiles[x][h])
            ss = arith::AddFOp::create(b, ss, fmul(e, e));
          for (int off : {1, 2})
            ss = fadd(ss, shuffle(ss, i32(off), gpu::ShuffleMode::XOR));
          when(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, t, idx(0)),
               [&] {
                 memref::StoreOp::create(b, ss, norms,
                                         ValueRange{warp, idx(x), r[h]});
               });
        }
      gpu::BarrierOp::create(b);
      for (int x = 0; x < 2; ++x)
        for (int h = 0; h < 2; ++h) {
          Value sum = f32(0.0);
          for (int64_t w = 0; w < NW; ++w)
            sum = fadd(sum, memref::LoadOp::create(
                                b, norms, ValueRange{idx(w), idx(x), r[h]}));
          Value inv = math::RsqrtOp::create(b, fadd(sum, f32(1e-6)));
          for (Value &e : tiles[x][h])
            e = fmul(e, inv);
        }
    }
    Value scale = f32(cfg.scale);
    for (int h = 0; h < 2; ++h)
      for (Value &e : Q[h])
        e = fmul(e, scale);
    Value betaV[2];
    if (cfg.beta)
      for (int h = 0; h < 2; ++h)
        betaV[h] = activateBetaValue(b, cfg.betaActivation, betaRaw[h]);

    // Gate: activation, zero past the sequence's end, prefix sum over the
    // chunk's rows (a shuffle scan over g, then the first half's total into
    // the second), G at the first and last rows.
    SmallVector<Value> G[2], gLast;
    if (decays) {
      for (int h = 0; h < 2; ++h)
        for (int64_t c = 0; c < KL; ++c) {
          Value x = Gr[h][c];
          if (cfg.gateActivation != GateActivation::none)
            x = activateGateValue(b, cfg.gateActivation, cfg.lowerBound, x,
                                  aLogV, dt.empty() ? Value() : dt[c]);
          G[h].push_back(select(ok[h], x, f32(0.0)));
        }
      for (int64_t step : {1, 2, 4}) {
        Value has = arith::CmpIOp::create(b, arith::CmpIPredicate::uge, g,
                                          idx(step));
        for (int h = 0; h < 2; ++h)
          for (Value &x : G[h])
            x = select(has,
                       fadd(x, shuffle(x, i32(4 * step), gpu::ShuffleMode::UP)),
                       x);
      }
      Value fromRow7 = laneI32(add(t, 28));
      for (int64_t c = 0; c < KL; ++c)
        G[1][c] = fadd(G[1][c], shuffle(G[0][c], fromRow7,
                                        gpu::ShuffleMode::IDX));
      for (int64_t c = 0; c < KL; ++c)
        gLast.push_back(shuffle(G[1][c], fromRow7, gpu::ShuffleMode::IDX));
    }

    // What the state pass reads: Gamma Q and exp(G_last - G) K (stored
    // now, their registers are free after), G_last in the chunk's first row.
    for (int h = 0; h < 2; ++h) {
      SmallVector<Value> qd, ke;
      for (int64_t c = 0; c < KL; ++c) {
        qd.push_back(decays ? fmul(Q[h][c], exp(G[h][c])) : Q[h][c]);
        ke.push_back(decays ? fmul(Kx[h][c], exp(fsub(gLast[c], G[h][c])))
                            : Kx[h][c]);
      }
      when(ok[h], [&] {
        storeRow(ws[2], {row, add(t0, r[h]), head}, colK, qd);
        storeRow(ws[3], {row, add(t0, r[h]), head}, colK, ke);
      });
    }
    if (decays)
      when(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, g, idx(0)),
           [&] { storeRow(ws[5], {row, t0, head}, colK, gLast); });
    if (!delta) {
      // The additive rule writes V itself.
      for (int h = 0; h < 2; ++h)
        when(ok[h],
             [&] { storeRow(ws[1], {row, add(t0, r[h]), head}, colV, Vx[h]); });
    }

    if (delta) {
      // beta per row, and beta Gamma K and beta V transposed for W and U
      // (first: V's registers are free for the products after).
      if (cfg.beta)
        when(arith::AndIOp::create(
                 b,
                 arith::CmpIOp::create(b, arith::CmpIPredicate::eq, warp,
                                       idx(0)),
                 arith::CmpIOp::create(b, arith::CmpIPredicate::eq, t, idx(0))),
             [&] {
               for (int h = 0; h < 2; ++h)
                 memref::StoreOp::create(b, betaV[h], betaS, ValueRange{r[h]});
             });
      for (int h = 0; h < 2; ++h) {
        SmallVector<Value> ks, vs;
        for (int64_t c = 0; c < KL; ++c) {
          Value x = Kx[h][c];
          if (decays)
            x = fmul(x, exp(G[h][c]));
          if (cfg.beta)
            x = fmul(x, betaV[h]);
          ks.push_back(x);
        }
        for (int64_t c = 0; c < VL; ++c)
          vs.push_back(cfg.beta ? fmul(Vx[h][c], betaV[h]) : Vx[h][c]);
        storeRow(kT, {warp, r[h]}, mul(t, KL), ks);
        storeRow(vT, {warp, r[h]}, mul(t, VL), vs);
      }
    }
    // Partial P and L over this warp's columns: 16 x 16, two n tiles of 8
    // key rows each (rows g and g + 8 of K are the B fragments of tiles 0
    // and 1).
    products(Q, Kx, G, red);
    gpu::BarrierOp::create(b);

    // P: the warps' partial sums, lower triangle (inclusive), rows of the
    // sequence only. L likewise, strict, times beta, into shared memory.
    for (int64_t s = 0; s * threads < C * C; ++s) {
      Value e = add(tid, s * threads);
      Value i = arith::DivUIOp::create(b, e, idx(C));
      Value j = arith::RemUIOp::create(b, e, idx(C));
      auto sumOf = [&](int64_t m) {
        Value sum = f32(0.0);
        for (int64_t w = 0; w < NW; ++w)
          sum = fadd(sum, memref::LoadOp::create(
                              b, red, ValueRange{idx(w), idx(m), i, j}));
        return sum;
      };
      Value p = select(arith::CmpIOp::create(b, arith::CmpIPredicate::ule, j, i),
                       sumOf(0), f32(0.0));
      when(ult(i, valid), [&] {
        memref::StoreOp::create(b, p, ws[4], ValueRange{row, add(t0, i), head, j});
      });
      if (delta) {
        Value l = sumOf(1);
        if (cfg.beta)
          l = fmul(l, memref::LoadOp::create(b, betaS, ValueRange{i}));
        l = select(ult(j, i), l, f32(0.0));
        memref::StoreOp::create(b, l, lFull, ValueRange{i, j});
      }
    }
    if (!delta)
      return;
    gpu::BarrierOp::create(b);

    // A = (I + L)^-1 by forward substitution, column c = lane % 16 per lane:
    // A[i][c] = [i == c] - sum_{j < i} L[i][j] A[j][c].
    Value c16 = arith::RemUIOp::create(b, lane, idx(C));
    SmallVector<Value> col;
    for (int64_t i = 0; i < C; ++i) {
      Value x = select(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, c16,
                                             idx(i)),
                       f32(1.0), f32(0.0));
      for (int64_t j = 0; j < i; ++j)
        x = fsub(x, fmul(memref::LoadOp::create(b, lFull,
                                                ValueRange{idx(i), idx(j)}),
                         col[j]));
      col.push_back(x);
    }
    when(ult(lane, idx(C)), [&] {
      for (int64_t i = 0; i < C; ++i)
        memref::StoreOp::create(b, col[i], aInv, ValueRange{warp, idx(i), c16});
    });
    gpu::BarrierOp::create(b);

    // W = A (beta Gamma K), U = A (beta V): n tiles of 8 of this warp's
    // columns, k over the chunk's rows (two steps of 8).
    SmallVector<SmallVector<Value>> aFrag;
    for (int64_t kk = 0; kk < C / 8; ++kk) {
      Value c0 = add(t, 8 * kk), c1 = add(t, 8 * kk + 4);
      Value g8 = add(g, 8);
      aFrag.push_back(
          {memref::LoadOp::create(b, aInv, ValueRange{warp, g, c0}),
           memref::LoadOp::create(b, aInv, ValueRange{warp, g8, c0}),
           memref::LoadOp::create(b, aInv, ValueRange{warp, g, c1}),
           memref::LoadOp::create(b, aInv, ValueRange{warp, g8, c1})});
    }
    auto product = [&](Value operand, int64_t width, Value out) {
      for (int64_t nt = 0; nt < width / 8; ++nt) {
        Value acc = zeroAcc();
        Value n = add(g, 8 * nt);
        for (int64_t kk = 0; kk < C / 8; ++kk)
          acc = mma(aFrag[kk],
                    {memref::LoadOp::create(
                         b, operand, ValueRange{warp, add(t, 8 * kk), n}),
                     memref::LoadOp::create(
                         b, operand, ValueRange{warp, add(t, 8 * kk + 4), n})},
                    acc);
        Value colOut = add(add(mul(warp, width), 8 * nt), mul(t, 2));
        for (int h = 0; h < 2; ++h)
          when(ok[h], [&] {
            storeRow(out, {row, add(t0, r[h]), head}, colOut,
                     {element(acc, 2 * h), element(acc, 2 * h + 1)});
          });
      }
    };
    product(kT, KW, ws[0]);
    product(vT, VW, ws[1]);
  }
};

struct IntraRegistersPass : kda::impl::KdaGpuIntraRegistersBase<IntraRegistersPass> {
  using Base::Base;
  IntraRegistersPass() = default;
  IntraRegistersPass(int64_t threads, StringRef program) {
    this->threads = threads;
    this->program = program.str();
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<gpu::GPUDialect, nvgpu::NVGPUDialect,
                    vector::VectorDialect, math::MathDialect, scf::SCFDialect,
                    memref::MemRefDialect, arith::ArithDialect>();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto desc = func->getAttrOfType<IntraPassAttr>(kda::kIntraPassAttr);
    std::optional<IntraPassConfig> cfg = readConfig(desc);
    auto abi = func->getAttrOfType<ArrayAttr>("kda.abi");
    if (!cfg || !abi || func.isExternal() ||
        !kda::runsOnLanes(func, kda::intraLanesRefusal(desc, threads)))
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
    Value zero = arith::ConstantIndexOp::create(b, 0);
    SmallVector<Value> ivs(3, zero);
    for (auto [i, d] : llvm::enumerate(grid->kept))
      ivs[d] = forall.getInductionVar(i);

    IntraProgram prog(b, *cfg, threads, precise);
    // The program the strategy stage named; without one (kda-opt runs of
    // this pass alone), the pass's own option.
    std::string chosen = program;
    if (auto s = func->getAttrOfType<kda::StrategyAttr>(kda::kStrategyAttr);
        s && !s.getProgram().empty())
      chosen = s.getProgram().str();
    if (chosen != "per_lane" && chosen != "derived") {
      func.emitError("kda-gpu-intra-registers: program is derived or "
                     "per_lane, got '")
          << chosen << "'";
      return signalPassFailure();
    }
    prog.derived = chosen == "derived";
    prog.q = byName("q");
    prog.k = byName("k");
    prog.v = byName("v");
    prog.gate = byName("gate");
    prog.beta = byName("beta");
    prog.aLog = byName("A_log");
    prog.dtBias = byName("dt_bias");
    prog.cuSeqlens = byName("cu_seqlens");
    static const char *const kRoles[] = {"w", "u", "q", "k", "p", "g"};
    for (auto [i, role] : llvm::enumerate(cfg->roles)) {
      Value arg = byName("ws" + std::to_string(i));
      for (int r = 0; r < 6; ++r)
        if (role == kRoles[r])
          prog.ws[r] = arg;
    }
    if (!prog.q || !prog.k || !prog.v || !prog.ws[1] || !prog.ws[2] ||
        !prog.ws[3] || !prog.ws[4] || (cfg->delta && !prog.ws[0]) ||
        (decays && (!prog.gate || !prog.ws[5])) || (cfg->beta && !prog.beta)) {
      func.emitError("kda-gpu-intra-registers: the intra-chunk kernel lacks "
                     "an input or a workspace its description names");
      return signalPassFailure();
    }
    prog.emit(ivs);
    if (!prog.failure.empty()) {
      func.emitError("kda-gpu-intra-registers: the derived intra-chunk "
                     "program does not take this kernel: ")
          << prog.failure;
      return signalPassFailure();
    }
    // 16-bit kernels: approximate exponentials, logarithms and divisions
    // (useApproximateMath says why that is safe). Every exponent the
    // factored form takes is <= 80 (products()).
    if (!precise)
      kda::useApproximateMath(func);
    func->setAttr(kda::kExplicitThreadsAttr, b.getUnitAttr());
    // Four blocks per SM (65536 registers): the program is a chain of
    // short phases, and more resident blocks hide their latencies. At
    // K = V = 128 ptxas fits a 16-bit kernel in 128 registers without
    // spills (156 unbounded); fp32 kernels (3xTF32 products) spilled there
    // (4 bytes, the varlen form) and get three blocks per SM, registers
    // rounded down to ptxas's granule of 8 (bundle.test checks for spills).
    const int64_t blocksPerSM = precise ? 3 : 4;
    func->setAttr(kda::kMaxRegistersAttr,
                  b.getI32IntegerAttr(65536 / (threads * blocksPerSM) / 8 * 8));
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
                                         int64_t threads, std::string *fix) {
  std::optional<IntraPassConfig> cfg = readConfig(intraPass);
  if (!cfg)
    return "its description (kda.intra_pass) is incomplete";
  const int64_t warps = threads / 32;
  std::string why;
  llvm::raw_string_ostream os(why);
  auto say = [&](StringRef f) {
    if (fix)
      *fix = f.str();
  };
  if (threads % 32 != 0 || warps < 1) {
    os << threads << " threads per block are not whole warps";
    say("threads per block a multiple of 32 (kda-compile: --block-threads)");
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
  } else if (cfg->keyDim % (8 * warps) != 0 ||
             cfg->valueDim % (8 * warps) != 0 ||
             (cfg->keyDim / warps / 4) % 2 != 0) {
    os << "K = " << cfg->keyDim << " and V = " << cfg->valueDim
       << " do not split over " << warps
       << " warps (multiples of 8 per warp, an even number of key columns per "
          "lane: K and V multiples of " << 8 * warps << " at " << warps
       << " warps)";
    // Zero key columns of q, k and the gate add nothing to any product
    // (and nothing to an l2 norm); zero value columns give zero outputs.
    say("pad K and V with zero columns to multiples of " +
        std::to_string(8 * warps) +
        " (q, k and gate columns of zeros leave the output unchanged; "
        "slice the padded value columns off), or accept the tile lowering");
  }
  return why;
}

std::unique_ptr<Pass> mlir::kda::createGpuIntraRegistersPass(int64_t threads,
                                                            StringRef program) {
  return std::make_unique<IntraRegistersPass>(threads, program);
}

