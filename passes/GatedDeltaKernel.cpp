//===- GatedDeltaKernel.cpp - the chunkwise gated delta rule, once --------===//
//
// Notation of SPEC.md section 3. Within a chunk, G is the inclusive prefix
// sum of the log-decays (per key channel) and Gamma = exp(G).
//
//   L_ij = beta_i sum_d k_id k_jd exp(G_id - G_jd)   (j < i)
//   P_ij =        sum_d q_id k_jd exp(G_id - G_jd)   (j <= i, q pre-scaled)
//   A    = (I + L)^-1
//   W    = A (beta Gamma K),  U = A (beta V),  V_new = U - W S
//   O    = (Gamma Q) S + P V_new
//   S'   = Diag(Gamma_last) S + (exp(G_last - G) K)^T V_new
//
// Numerics: exp(G_i - G_j) <= 1 for j <= i, but exp(G_i) and exp(-G_j) taken
// separately overflow for channel-wise gates over a long chunk. The chunk is
// therefore cut into sub-chunks; the block of rows I against earlier columns
// is measured from the first row r of I:
//   exp(G_i - G_j) = exp(G_i - G_r) * exp(G_r - G_j),  both exponents <= 0,
// which turns the block into one tile matmul. Pairs inside a sub-chunk are
// computed pairwise with the exact exponent G_i - G_j <= 0. Every exponent in
// this file is <= 0, so nothing overflows for any valid gate.
//
//===----------------------------------------------------------------------===//

#include "passes/GatedDeltaKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <tuple>

using namespace mlir;
using namespace mlir::kda;

namespace {

Value cst(ImplicitLocOpBuilder &b, double v) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
}

Value sigmoid(ImplicitLocOpBuilder &b, Value x) {
  // 1 / (1 + exp(-x)): exp(-x) = inf for very negative x gives exactly 0.
  Value e = math::ExpOp::create(b, arith::NegFOp::create(b, x));
  return arith::DivFOp::create(b, cst(b, 1.0),
                               arith::AddFOp::create(b, cst(b, 1.0), e));
}

/// x * rsqrt(sum_d x_d^2 + 1e-6) for every row of an [M, D] tile.
Value l2NormalizeRows(TileBuilder &tb, Value x) {
  SmallVector<int64_t> shape = tb.shape(x);
  Value squares = tb.map(shape, {x}, [](ImplicitLocOpBuilder &b, ValueRange s,
                                        ValueRange) -> Value {
    return arith::MulFOp::create(b, s[0], s[0]);
  });
  Value norms = tb.rowSum(squares);
  return tb.map(shape, {x, perRow(norms)},
                [](ImplicitLocOpBuilder &b, ValueRange s, ValueRange) -> Value {
                  Value inv = math::RsqrtOp::create(
                      b, arith::AddFOp::create(b, s[1], cst(b, 1e-6)));
                  return arith::MulFOp::create(b, s[0], inv);
                });
}

/// Keeps the lower triangle of a square tile (j <= i, or j < i).
Value lowerTriangle(TileBuilder &tb, Value a, bool inclusive) {
  int64_t m = tb.shape(a)[0];
  return tb.map({m, m}, {a}, [&](ImplicitLocOpBuilder &b, ValueRange s,
                                 ValueRange ivs) -> Value {
    Value keep = arith::CmpIOp::create(
        b, inclusive ? arith::CmpIPredicate::ule : arith::CmpIPredicate::ult,
        ivs[1], ivs[0]);
    return arith::SelectOp::create(b, keep, s[0], cst(b, 0.0));
  });
}

/// Gate activation of SPEC.md: raw gates [C, K] -> log-decays [C, K].
Value activateGate(TileBuilder &tb, const ChunkConfig &config, Value raw,
                   Value aLog, Value dtBias) {
  SmallVector<int64_t> shape = tb.shape(raw);
  SmallVector<TileOperand> operands = {raw};
  if (dtBias)
    operands.push_back(perColumn(dtBias));
  return tb.map(shape, operands, [&](ImplicitLocOpBuilder &b, ValueRange s,
                                     ValueRange) -> Value {
    return activateGateValue(b, config.gateActivation, config.lowerBound, s[0],
                             aLog, dtBias ? s[1] : Value());
  });
}

Value activateBeta(TileBuilder &tb, const ChunkConfig &config, Value beta) {
  if (config.betaActivation == BetaActivation::none)
    return beta;
  SmallVector<int64_t> shape = tb.shape(beta);
  return tb.map(shape, {beta}, [&](ImplicitLocOpBuilder &b, ValueRange s,
                                   ValueRange) -> Value {
    return activateBetaValue(b, config.betaActivation, s[0]);
  });
}

Value mul(TileBuilder &tb, ArrayRef<int64_t> shape, ArrayRef<TileOperand> ops) {
  return tb.map(shape, ops, [](ImplicitLocOpBuilder &b, ValueRange s,
                               ValueRange) -> Value {
    Value r = s[0];
    for (Value x : s.drop_front())
      r = arith::MulFOp::create(b, r, x);
    return r;
  });
}

/// a + b or a - b, element by element.
Value addOrSub(TileBuilder &tb, Value a, Value b2, bool add) {
  return tb.map(tb.shape(a), {a, b2},
                [add](ImplicitLocOpBuilder &bb, ValueRange s,
                      ValueRange) -> Value {
                  return add ? Value(arith::AddFOp::create(bb, s[0], s[1]))
                             : Value(arith::SubFOp::create(bb, s[0], s[1]));
                });
}

/// a * exp(g - ref) (ref per column) or a * exp(ref - g) when `refFirst`.
Value decayed(TileBuilder &tb, Value a, Value g, Value ref, bool refFirst) {
  SmallVector<int64_t> shape = tb.shape(a);
  return tb.map(shape, {a, g, perColumn(ref)},
                [&](ImplicitLocOpBuilder &b, ValueRange s, ValueRange) -> Value {
                  Value e = refFirst ? arith::SubFOp::create(b, s[2], s[1])
                                     : arith::SubFOp::create(b, s[1], s[2]);
                  return arith::MulFOp::create(b, s[0],
                                               math::ExpOp::create(b, e));
                });
}

} // namespace

Value mlir::kda::activateGateValue(ImplicitLocOpBuilder &b,
                                   GateActivation activation,
                                   double lowerBound, Value x, Value aLog,
                                   Value dtBias) {
  if (dtBias)
    x = arith::AddFOp::create(b, x, dtBias);
  Value expA = aLog ? Value(math::ExpOp::create(b, aLog)) : Value();
  if (activation == GateActivation::softplus) {
    // softplus(x) = log(1 + e^x), taken as x above 20 (SPEC.md).
    Value soft = math::Log1pOp::create(b, math::ExpOp::create(b, x));
    Value big =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, x, cst(b, 20.0));
    Value sp = arith::SelectOp::create(b, big, x, soft);
    Value factor = expA ? expA : cst(b, 1.0);
    return arith::NegFOp::create(b, arith::MulFOp::create(b, factor, sp));
  }
  // Lower-bound form: every per-token decay stays >= exp(lowerBound).
  Value arg = expA ? Value(arith::MulFOp::create(b, expA, x)) : x;
  return arith::MulFOp::create(b, cst(b, lowerBound), sigmoid(b, arg));
}

Value mlir::kda::activateGateTile(TileBuilder &tb, const ChunkConfig &config,
                                  Value raw, Value aLog, Value dtBias) {
  return activateGate(tb, config, raw, aLog, dtBias);
}

Value mlir::kda::activateBetaValue(ImplicitLocOpBuilder &b,
                                   BetaActivation activation, Value x) {
  if (activation == BetaActivation::none)
    return x;
  Value sg = sigmoid(b, x);
  if (activation == BetaActivation::sigmoid_neg_eigval)
    return arith::MulFOp::create(b, sg, cst(b, 2.0));
  return sg;
}

IntraChunk mlir::kda::emitIntraChunk(
    TileBuilder &tb, const ChunkConfig &config, const ChunkInputs &in,
    llvm::function_ref<void(Value, Value, Value)> early,
    llvm::function_ref<void(StringRef, Value)> done) {
  ImplicitLocOpBuilder &b = tb.builder();
  const int64_t c = config.chunk, kd = config.keyDim, vd = config.valueDim;
  const int64_t sub = std::min(config.subChunk, c);
  const bool delta = config.update == UpdateRule::delta;

  // Prologue: l2 norm over K, the scale folded into q, beta, gate.
  Value q = in.q, k = in.k;
  if (config.qkL2Norm) {
    q = l2NormalizeRows(tb, q);
    k = l2NormalizeRows(tb, k);
  }
  Value scale = cst(b, config.scale);
  q = tb.map({c, kd}, {q}, [&](ImplicitLocOpBuilder &bb, ValueRange s,
                               ValueRange) -> Value {
    return arith::MulFOp::create(bb, s[0], scale);
  });
  Value beta = in.beta ? activateBeta(tb, config, in.beta) : Value();

  // Without a gate nothing decays: no prefix sums, no exponentials, and the
  // intra-chunk matrices are plain masked tile matmuls.
  const bool decays = static_cast<bool>(in.gate);
  Value G, gamma, gLast, decayLast;
  if (decays) {
    Value g = in.gate;
    if (config.gateActivation != GateActivation::none)
      g = activateGate(tb, config, g, in.aLog, in.dtBias);
    // Rows past the sequence end must not decay: their gate is zero, so the
    // last row of G is the cumulative decay of the real tokens.
    Value valid = in.validRows;
    g = tb.map({c, kd}, {g}, [&](ImplicitLocOpBuilder &bb, ValueRange s,
                                 ValueRange ivs) -> Value {
      Value real = arith::CmpIOp::create(bb, arith::CmpIPredicate::ult, ivs[0],
                                         valid);
      return arith::SelectOp::create(bb, real, s[0], cst(bb, 0.0));
    });
    G = tb.prefixSumRows(g);
    gamma = tb.map({c, kd}, {G}, [](ImplicitLocOpBuilder &bb, ValueRange s,
                                    ValueRange) -> Value {
      return math::ExpOp::create(bb, s[0]);
    });
    gLast = tb.rowOf(G, c - 1);
    // The chunk's decay per key, exp(G_last) (every exponent <= 0): the
    // state step's one use of the gate. Taken here, where every chunk runs
    // at once, it costs the sequential state pass nothing (there it was a
    // third of a chunk step's instructions, the exponentials of each lane's
    // keys).
    decayLast = tb.map({kd}, {gLast}, [](ImplicitLocOpBuilder &bb,
                                          ValueRange s, ValueRange) {
      return Value(math::ExpOp::create(bb, s[0]));
    });
  }
  // The start state as q reads it, and k as the chunk end sees it.
  // (A chunk of one token: exp(G_last - G) = exp(0) = 1.)
  auto decayedQK = [&]() -> std::pair<Value, Value> {
    return {decays ? mul(tb, {c, kd}, {q, gamma}) : q,
            decays && c > 1 ? decayed(tb, k, G, gLast, /*refFirst=*/true) : k};
  };
  Value qDecayed, kToEnd;
  if (early) {
    std::tie(qDecayed, kToEnd) = decayedQK();
    early(qDecayed, kToEnd, decayLast);
  }
  // The UT transform's right-hand sides, beta Gamma K and beta V: taken
  // now, while Gamma and V are at hand, and parked through the intra-chunk
  // matrices, the chunk's longest stretch (they wait for the inverse).
  Value kScaled, vScaled;
  if (delta) {
    SmallVector<TileOperand> kFactors = {k};
    if (decays)
      kFactors.push_back(gamma);
    if (beta)
      kFactors.push_back(perRow(beta));
    kScaled = tb.park(kFactors.size() > 1 ? mul(tb, {c, kd}, kFactors) : k);
    vScaled = tb.park(beta ? mul(tb, {c, vd}, {in.v, perRow(beta)}) : in.v);
  }

  Value P, L;
  if (decays) {
    // Intra-chunk matrices, one row block (sub-chunk) at a time.
    P = tb.filled({c, c}, 0.0);
    L = delta ? tb.filled({c, c}, 0.0) : Value();
    // Within a sub-chunk, exact pairwise decays exp(G_i - G_j) (every
    // exponent <= 0) work for any gate; with lower-bounded gates
    // (g >= lb per token) the sub-chunk's own reference point keeps every
    // factor within e^{|lb| (sub - 1)} <= e^80, and the block is a matmul.
    const bool boundedSubChunk =
        config.gateActivation == GateActivation::lower_bound &&
        -config.lowerBound * double(sub - 1) <= 80.0;
    // The factored blocks' products (factors up to e^{+-80}): the tape runs
    // their adjoint's products precise (TileBuilder::rangeSensitiveProducts).
    auto factored = [&](Value a, Value bTile) {
      tb.rangeSensitiveProducts(true);
      Value r = tb.matmul(a, bTile, false, true);
      tb.rangeSensitiveProducts(false);
      return r;
    };
    for (int64_t r = 0; r < c; r += sub) {
      Value qI = tb.subTile(q, {r, 0}, {sub, kd});
      Value kI = tb.subTile(k, {r, 0}, {sub, kd});
      Value gI = tb.subTile(G, {r, 0}, {sub, kd});
      if (r > 0) {
        Value gRef = tb.rowOf(G, r);
        Value kBefore = decayed(tb, tb.subTile(k, {0, 0}, {r, kd}),
                                tb.subTile(G, {0, 0}, {r, kd}), gRef,
                                /*refFirst=*/true);
        Value qRel = decayed(tb, qI, gI, gRef, /*refFirst=*/false);
        P = tb.insertSubTile(factored(qRel, kBefore), P, {r, 0});
        if (delta) {
          Value kRel = decayed(tb, kI, gI, gRef, /*refFirst=*/false);
          L = tb.insertSubTile(factored(kRel, kBefore), L, {r, 0});
        }
      }
      if (sub == 1) {
        // One token per sub-chunk: a token's decay from itself is
        // exp(0) = 1, so the diagonal block of P is the plain product q_r . k_r
        // and L's (strictly lower) one is empty.
        P = tb.insertSubTile(
            lowerTriangle(tb, tb.matmul(qI, kI, false, true),
                          /*inclusive=*/true),
            P, {r, r});
        continue;
      }
      if (boundedSubChunk) {
        // Lower-bounded gates: measured from the sub-chunk's first row,
        // q and k factors stay within [e^{lb (sub - 1)}, e^{-lb (sub - 1)}],
        // finite in f32, so the diagonal block is a tile matmul too.
        Value gFirst = tb.rowOf(G, r);
        Value kFromFirst = decayed(tb, kI, gI, gFirst, /*refFirst=*/true);
        Value qToFirst = decayed(tb, qI, gI, gFirst, /*refFirst=*/false);
        P = tb.insertSubTile(
            lowerTriangle(tb, factored(qToFirst, kFromFirst),
                          /*inclusive=*/true),
            P, {r, r});
        if (delta) {
          Value kToFirst = decayed(tb, kI, gI, gFirst, /*refFirst=*/false);
          L = tb.insertSubTile(
              lowerTriangle(tb, factored(kToFirst, kFromFirst),
                            /*inclusive=*/false),
              L, {r, r});
        }
        continue;
      }
      // P's pairs j <= i, L's j < i, against the same keys.
      SmallVector<Value> pairs =
          delta ? tb.decayedPairsMany({qI, kI}, kI, gI, {true, false})
                : tb.decayedPairsMany({qI}, kI, gI, {true});
      P = tb.insertSubTile(pairs[0], P, {r, r});
      if (delta)
        L = tb.insertSubTile(pairs[1], L, {r, r});
    }
  } else {
    P = lowerTriangle(tb, tb.matmul(q, k, false, true), /*inclusive=*/true);
    if (delta)
      L = lowerTriangle(tb, tb.matmul(k, k, false, true), /*inclusive=*/false);
  }

  IntraChunk out;
  out.p = P;
  if (done)
    done("p", P);
  out.decayLast = decayLast;
  // The UT transform: what each token writes is U - W S, after erasing what
  // the state (and the earlier tokens of the chunk) already predict for its
  // key.
  out.u = in.v;
  if (delta) {
    if (beta)
      L = mul(tb, {c, c}, {L, perRow(beta)});
    Value A = tb.invertUnitLower(L);
    out.w = tb.matmul(A, kScaled);
    if (done)
      done("w", out.w);
    out.u = tb.matmul(A, vScaled);
  }
  if (done)
    done("u", out.u);
  if (!early)
    std::tie(qDecayed, kToEnd) = decayedQK();
  out.qDecayed = qDecayed;
  out.kToEnd = kToEnd;
  return out;
}

Value mlir::kda::emitNewValues(TileBuilder &tb, const IntraChunk &intra,
                               Value state) {
  // New values: V_new = U - W S (delta rule), V otherwise.
  if (!intra.w)
    return intra.u;
  return addOrSub(tb, intra.u, tb.matmul(intra.w, state), /*add=*/false);
}

ChunkOutputs mlir::kda::emitStateStep(TileBuilder &tb,
                                      const IntraChunk &intra, Value state) {
  return emitStateStepFrom(tb, intra, state, emitNewValues(tb, intra, state));
}

ChunkOutputs mlir::kda::emitStateStepFrom(TileBuilder &tb,
                                          const IntraChunk &intra,
                                          Value state, Value vNew) {
  const int64_t vd = tb.shape(vNew)[1];
  const int64_t kd = tb.shape(state)[0];

  // Output: the decayed start state read by q, plus the chunk's own writes.
  Value fromState = tb.matmul(intra.qDecayed, state);
  Value fromChunk = tb.matmul(intra.p, vNew);
  Value o = addOrSub(tb, fromState, fromChunk, /*add=*/true);

  // State at the chunk end: the decayed state plus what the chunk writes,
  // one product added in place (a matrix instruction accumulates into the
  // state's own registers).
  Value kept = state;
  if (intra.decayLast)
    kept = mul(tb, {kd, vd}, {state, perRow(intra.decayLast)});
  Value next = tb.matmulAdd(kept, intra.kToEnd, vNew, /*transA=*/true);
  return {o, next, vNew};
}

WideStepOutputs mlir::kda::emitWideStateStep(TileBuilder &tb,
                                             ArrayRef<IntraChunk> subs,
                                             Value state) {
  const int64_t m = subs.size();
  const int64_t vd = tb.shape(state)[1], kd = tb.shape(state)[0];
  // A [rows, K] tile with its columns scaled by a [K] decay (null: as is).
  auto scaled = [&](Value a, Value decay) -> Value {
    if (!a || !decay)
      return a;
    return mul(tb, tb.shape(a), {a, perColumn(decay)});
  };
  // The product of the decays of sub-chunks [from, to) (null: none, 1).
  auto decayOver = [&](int64_t from, int64_t to) -> Value {
    Value d;
    for (int64_t l = from; l < to; ++l) {
      if (!subs[l].decayLast)
        continue;
      d = d ? mul(tb, {kd}, {d, subs[l].decayLast}) : subs[l].decayLast;
    }
    return d;
  };

  WideStepOutputs out;
  SmallVector<Value> vNew;
  for (int64_t i = 0; i < m; ++i) {
    const IntraChunk &in = subs[i];
    Value E = decayOver(0, i);
    // The state as sub-chunk i's q reads it, and what its W erases.
    Value fromState = tb.matmul(scaled(in.qDecayed, E), state);
    Value v = in.u;
    if (in.w)
      v = addOrSub(tb, v, tb.matmul(scaled(in.w, E), state), /*add=*/false);
    for (int64_t j = 0; j < i; ++j) {
      // Sub-chunk j's writes as sub-chunk i sees them: its decayed k
      // carried over the sub-chunks between.
      Value kj = scaled(subs[j].kToEnd, decayOver(j + 1, i));
      if (in.w)
        v = addOrSub(
            tb, v,
            tb.matmul(tb.matmul(in.w, kj, false, /*transB=*/true), vNew[j]),
            /*add=*/false);
      fromState = addOrSub(
          tb, fromState,
          tb.matmul(tb.matmul(in.qDecayed, kj, false, /*transB=*/true),
                    vNew[j]),
          /*add=*/true);
    }
    vNew.push_back(v);
    out.o.push_back(addOrSub(tb, fromState, tb.matmul(in.p, v), /*add=*/true));
  }
  // The state after the last sub-chunk.
  Value next = state;
  if (Value E = decayOver(0, m))
    next = mul(tb, {kd, vd}, {state, perRow(E)});
  for (int64_t j = 0; j < m; ++j)
    next = tb.matmulAdd(next, scaled(subs[j].kToEnd, decayOver(j + 1, m)),
                        vNew[j], /*transA=*/true);
  out.nextState = next;
  return out;
}

ChunkOutputs mlir::kda::emitGatedDeltaChunk(TileBuilder &tb,
                                            const ChunkConfig &config,
                                            const ChunkInputs &in,
                                            Value state) {
  return emitStateStep(tb, emitIntraChunk(tb, config, in), state);
}
