//===- GatedDeltaBackward.cpp - the gated delta rule's backward, derived --===//

#include "passes/GatedDeltaBackward.h"

#include "passes/TileAdjoint.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::kda;

namespace {

Value zerosOf(ImplicitLocOpBuilder &b, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, b.getF32Type());
  return arith::ConstantOp::create(
      b, DenseElementsAttr::get(type, b.getF32FloatAttr(0.0)));
}

/// A static-size window of a tensor at (possibly dynamic) offsets, read
/// (extract) or written (insert) with the shape `shape`: the dimensions a
/// pick() indexes are dropped from it.
struct Window {
  SmallVector<OpFoldResult> offsets, sizes;
  SmallVector<int64_t> shape;

  Value extract(ImplicitLocOpBuilder &b, Value t) const {
    SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
    auto type = cast<RankedTensorType>(t.getType());
    return tensor::ExtractSliceOp::create(
        b, RankedTensorType::get(shape, type.getElementType()), t, offsets,
        sizes, strides);
  }
  Value insert(ImplicitLocOpBuilder &b, Value sub, Value dest) const {
    SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
    return tensor::InsertSliceOp::create(b, sub, dest, offsets, sizes, strides);
  }
};

/// Dimension d of `t` at index at[d] (dropped), or whole where at[d] is null
/// or past the end of `at`: (b, :, x, :) of [B, T, X, N] is [T, N].
Window pick(ImplicitLocOpBuilder &b, Value t, ArrayRef<Value> at) {
  ArrayRef<int64_t> s = cast<RankedTensorType>(t.getType()).getShape();
  Window w;
  for (size_t d = 0; d < s.size(); ++d) {
    bool indexed = d < at.size() && at[d];
    w.offsets.push_back(indexed ? OpFoldResult(at[d]) : b.getIndexAttr(0));
    w.sizes.push_back(b.getIndexAttr(indexed ? 1 : s[d]));
    if (!indexed)
      w.shape.push_back(s[d]);
  }
  return w;
}

/// Rows [off, off + n) of a [P] or [P, N] tensor.
Window rowsOf(ImplicitLocOpBuilder &b, Value t, Value off, int64_t n) {
  Window w = pick(b, t, {});
  w.offsets[0] = off;
  w.sizes[0] = b.getIndexAttr(n);
  w.shape[0] = n;
  return w;
}

Value rowsAt(ImplicitLocOpBuilder &b, Value t, Value off, int64_t n) {
  return rowsOf(b, t, off, n).extract(b, t);
}

/// `sub` written over rows [off, off + its rows) of `dest`.
Value putRows(ImplicitLocOpBuilder &b, Value sub, Value dest, Value off) {
  int64_t n = cast<RankedTensorType>(sub.getType()).getDimSize(0);
  return rowsOf(b, dest, off, n).insert(b, sub, dest);
}

} // namespace

FailureOr<StateStepGrads> mlir::kda::emitStateStepAdjoint(
    TileBuilder &tb, const IntraChunk &intra, Value state, Value dO, Value dS,
    StepAdjointOf of, std::string &why, Value dVNew) {
  TapeTileBuilder tape(tb);
  StateStepGrads r;
  SmallVector<Value *> into;
  SmallVector<Value> wrt;
  SmallVector<std::pair<Value, Value>> seeds;
  if (of == StepAdjointOf::State) {
    ChunkOutputs out = emitStateStep(tape, intra, state);
    wrt = {state, out.vNew};
    into = {&r.dState, &r.dVNew};
    seeds = {{out.o, dO}, {out.nextState, dS}};
  } else {
    if (!dVNew) {
      why = "the state step's adjoint with respect to its inputs takes "
            "dV_new from the reverse scan";
      return failure();
    }
    Value vNew = emitNewValues(tape, intra, state);
    // The rest of the step reads a copy the tape does not follow: the only
    // gradient that reaches V_new is the reverse scan's.
    Value copy = tb.map(tb.shape(vNew), {vNew},
                        [](ImplicitLocOpBuilder &, ValueRange s, ValueRange) {
                          return s[0];
                        });
    ChunkOutputs out = emitStateStepFrom(tape, intra, state, copy);
    seeds = {{out.o, dO}, {out.nextState, dS}, {vNew, dVNew}};
    std::pair<Value, Value *> fields[] = {
        {intra.w, &r.dW},         {intra.qDecayed, &r.dQDecayed},
        {intra.kToEnd, &r.dKToEnd}, {intra.p, &r.dP},
        {intra.decayLast, &r.dDecayLast}};
    for (auto [f, g] : fields)
      if (f) {
        wrt.push_back(f);
        into.push_back(g);
      }
  }
  FailureOr<SmallVector<Value>> g = tape.emitAdjoint(seeds, wrt, why);
  if (failed(g))
    return failure();
  for (auto [dst, v] : llvm::zip(into, *g))
    *dst = v;
  return r;
}

FailureOr<ChunkGrads>
mlir::kda::emitChunkBackward(TileBuilder &inner, const ChunkConfig &config,
                             ChunkInputsBuilder inputs, Value state, Value dO,
                             Value dStateAfter, std::string &why) {
  const int64_t C = config.chunk, V = config.valueDim;
  TapeTileBuilder tape(inner);
  ChunkInputs leaves;
  ChunkInputs ci = inputs(tape, leaves);
  ChunkOutputs out = emitGatedDeltaChunk(tape, config, ci, state);
  SmallVector<Value> wrt = {leaves.q, leaves.k, leaves.v, state};
  for (Value v : {leaves.gate, leaves.beta, leaves.dtBias, leaves.aLog})
    if (v)
      wrt.push_back(v);
  // The output rows past the sequence's end are not its outputs: no
  // gradient enters through them.
  Value valid = ci.validRows;
  Value dOc = inner.map(
      {C, V}, {dO},
      [&](ImplicitLocOpBuilder &bb, ValueRange s, ValueRange ivs) -> Value {
        Value keep = arith::CmpIOp::create(bb, arith::CmpIPredicate::ult,
                                           ivs[0], valid);
        return arith::SelectOp::create(
            bb, keep, s[0],
            arith::ConstantOp::create(bb, bb.getF32FloatAttr(0.0)));
      });
  FailureOr<SmallVector<Value>> g = tape.emitAdjoint(
      {{out.o, dOc}, {out.nextState, dStateAfter}}, wrt, why);
  if (failed(g))
    return failure();
  ChunkGrads r;
  r.dq = (*g)[0];
  r.dk = (*g)[1];
  r.dv = (*g)[2];
  r.dState = (*g)[3];
  size_t at = 4;
  if (leaves.gate)
    r.dgate = (*g)[at++];
  if (leaves.beta)
    r.dbeta = (*g)[at++];
  if (leaves.dtBias)
    r.dDtBias = (*g)[at++];
  if (leaves.aLog)
    r.dALog = (*g)[at++];
  return r;
}

FailureOr<SequenceGrads>
mlir::kda::emitSequenceBackward(ImplicitLocOpBuilder &b,
                                const ChunkConfig &config,
                                const SequenceTiles &in, Value dO,
                                Value dStateEnd, std::string &why) {
  const int64_t C = config.chunk, K = config.keyDim, V = config.valueDim;
  const int64_t padded = cast<RankedTensorType>(in.q.getType()).getShape()[0];
  const int64_t chunks = (in.tokens + C - 1) / C;
  if (in.tokens < 0 || (!in.start && chunks * C > padded)) {
    why = "emitSequenceBackward: " + std::to_string(in.tokens) +
          " tokens in chunks of " + std::to_string(C) + " need " +
          std::to_string(chunks * C) + " rows, the tiles have " +
          std::to_string(padded);
    return failure();
  }
  Type f32 = b.getF32Type();
  Value c0 = arith::ConstantIndexOp::create(b, 0);
  Value c1 = arith::ConstantIndexOp::create(b, 1);
  Value cC = arith::ConstantIndexOp::create(b, C);
  // The sequence's rows and chunks (dynamic for a varlen batch's).
  Value cTokens = in.count ? in.count : arith::ConstantIndexOp::create(b, in.tokens);
  Value cStart = in.start ? in.start : c0;
  Value cChunks = arith::CeilDivUIOp::create(b, cTokens, cC);
  Value cLast = arith::SubIOp::create(b, cChunks, c1);

  // Chunk c's inputs: rows [start + c C, start + c C + C), the real ones
  // min(C, T - c C). `local` is c C.
  // The rows past the sequence's end read as zeros, as the forward's loads
  // give them (TensorTileBuilder::load): masked through `tb`, so that a tape
  // sees the masks (`raw` gets the slices before them, the values whose
  // gradients are wanted).
  auto inputsAt = [&](ImplicitLocOpBuilder &ib, Value local, TileBuilder &tb,
                      ChunkInputs *raw = nullptr) {
    Value off = arith::AddIOp::create(ib, cStart, local);
    ChunkInputs ci;
    ci.validRows = arith::MinSIOp::create(
        ib, arith::SubIOp::create(ib, cTokens, local), cC);
    Value valid = ci.validRows;
    auto slice = [&](Value t) -> std::pair<Value, Value> {
      if (!t)
        return {Value(), Value()};
      Value rows = rowsAt(ib, t, off, C);
      if (!in.start)
        return {rows, rows}; // padded with zeros by the caller
      Value masked = tb.map(
          tb.shape(rows), {rows},
          [&](ImplicitLocOpBuilder &bb, ValueRange s, ValueRange ivs) -> Value {
            Value keep = arith::CmpIOp::create(bb, arith::CmpIPredicate::ult,
                                               ivs[0], valid);
            return arith::SelectOp::create(
                bb, keep, s[0],
                arith::ConstantOp::create(bb, bb.getF32FloatAttr(0.0)));
          });
      return {rows, masked};
    };
    ChunkInputs r;
    std::tie(r.q, ci.q) = slice(in.q);
    std::tie(r.k, ci.k) = slice(in.k);
    std::tie(r.v, ci.v) = slice(in.v);
    std::tie(r.gate, ci.gate) = slice(in.gate);
    std::tie(r.beta, ci.beta) = slice(in.beta);
    ci.dtBias = r.dtBias = in.dtBias;
    ci.aLog = r.aLog = in.aLog;
    if (raw)
      *raw = r;
    return ci;
  };

  // Forward: the state before every chunk (unless the caller kept them).
  Value stack = in.states;
  if (!stack) {
    auto stackType =
        RankedTensorType::get({std::max<int64_t>(chunks, 1), K, V}, f32);
    Value stack0 = tensor::EmptyOp::create(b, stackType.getShape(), f32);
    auto forward = scf::ForOp::create(
        b, c0, cChunks, c1, ValueRange{in.state, stack0},
        [&](OpBuilder &nb, Location loc, Value c, ValueRange carried) {
          ImplicitLocOpBuilder ib(loc, nb);
          Value stack =
              pick(ib, carried[1], {c}).insert(ib, carried[0], carried[1]);
          TensorTileBuilder tb(ib);
          Value off = arith::MulIOp::create(ib, c, cC);
          ChunkOutputs out = emitGatedDeltaChunk(
              tb, config, inputsAt(ib, off, tb), carried[0]);
          scf::YieldOp::create(ib, ValueRange{out.nextState, stack});
        });
    stack = forward.getResult(1);
  }

  // Reverse: each chunk's step recomputed under a tape, its adjoint seeded
  // with the chunk's output gradient and the state gradient from after it.
  SmallVector<Value> init = {dStateEnd,
                             zerosOf(b, {padded, K}),
                             zerosOf(b, {padded, K}),
                             zerosOf(b, {padded, V}),
                             zerosOf(b, {padded, K}),
                             zerosOf(b, {padded}),
                             zerosOf(b, {K}),
                             zerosOf(b, {1})};
  std::string whyNot;
  auto reverse = scf::ForOp::create(
      b, c0, cChunks, c1, init,
      [&](OpBuilder &nb, Location loc, Value i, ValueRange carried) {
        ImplicitLocOpBuilder ib(loc, nb);
        Value c = arith::SubIOp::create(ib, cLast, i);
        Value local = arith::MulIOp::create(ib, c, cC);
        Value off = arith::AddIOp::create(ib, cStart, local);
        Value h = pick(ib, stack, {c}).extract(ib, stack);
        TensorTileBuilder inner(ib);
        if (in.states && in.statesVMajor)
          h = inner.transpose(h);
        // The tape sees the masked rows; the gradients are the slices'
        // themselves (before the masks).
        FailureOr<ChunkGrads> g = emitChunkBackward(
            inner, config,
            [&](TileBuilder &tape, ChunkInputs &leaves) {
              return inputsAt(ib, local, tape, &leaves);
            },
            h, rowsAt(ib, dO, off, C), carried[0], whyNot);
        if (failed(g)) {
          scf::YieldOp::create(ib, carried);
          return;
        }
        auto sum = [&](Value a, Value d) {
          return inner.map(inner.shape(a), {a, d},
                           [](ImplicitLocOpBuilder &bb, ValueRange s,
                              ValueRange) -> Value {
                             return arith::AddFOp::create(bb, s[0], s[1]);
                           });
        };
        SmallVector<Value> next = {g->dState, putRows(ib, g->dq, carried[1], off),
                                   putRows(ib, g->dk, carried[2], off),
                                   putRows(ib, g->dv, carried[3], off),
                                   carried[4], carried[5], carried[6],
                                   carried[7]};
        if (g->dgate)
          next[4] = putRows(ib, g->dgate, carried[4], off);
        if (g->dbeta)
          next[5] = putRows(ib, g->dbeta, carried[5], off);
        if (g->dDtBias)
          next[6] = sum(carried[6], g->dDtBias);
        if (g->dALog)
          next[7] = sum(carried[7], g->dALog);
        scf::YieldOp::create(ib, next);
      });
  if (!whyNot.empty()) {
    why = whyNot;
    return failure();
  }
  SequenceGrads out;
  out.dState = reverse.getResult(0);
  out.dq = reverse.getResult(1);
  out.dk = reverse.getResult(2);
  out.dv = reverse.getResult(3);
  if (in.gate)
    out.dgate = reverse.getResult(4);
  if (in.beta)
    out.dbeta = reverse.getResult(5);
  if (in.dtBias)
    out.dDtBias = reverse.getResult(6);
  if (in.aLog)
    out.dALog = reverse.getResult(7);
  return out;
}

namespace {

/// Rows [0, rows) of a [P] or [P, N] tensor, or `t` grown to `rows` rows of
/// zeros after its own.
Value withRows(ImplicitLocOpBuilder &b, Value t, int64_t rows) {
  auto type = cast<RankedTensorType>(t.getType());
  SmallVector<int64_t> shape(type.getShape());
  if (shape[0] == rows)
    return t;
  Value zero = arith::ConstantIndexOp::create(b, 0);
  if (shape[0] > rows)
    return rowsAt(b, t, zero, rows);
  shape[0] = rows;
  return putRows(b, t, zerosOf(b, shape), zero);
}

/// `dest` with `grad` added over the window `w`.
Value accumulate(ImplicitLocOpBuilder &b, Value dest, const Window &w,
                 Value grad) {
  TensorTileBuilder tb(b);
  Value sum = tb.map(tb.shape(grad), {w.extract(b, dest), grad},
                     [](ImplicitLocOpBuilder &bb, ValueRange s, ValueRange) -> Value {
                       return arith::AddFOp::create(bb, s[0], s[1]);
                     });
  return w.insert(b, sum, dest);
}

} // namespace

FailureOr<SequenceGrads>
mlir::kda::emitDenseBackward(ImplicitLocOpBuilder &b, const ChunkConfig &config,
                             const DenseTensors &in, Value dO, Value dStateEnd,
                             std::string &why) {
  auto shapeOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  const int64_t B = shapeOf(in.q)[0], T = shapeOf(in.q)[1],
                H = shapeOf(in.q)[2], K = config.keyDim,
                HV = shapeOf(in.v)[2], V = config.valueDim,
                C = config.chunk;
  if (HV % H != 0) {
    why = "emitDenseBackward: " + std::to_string(HV) +
          " value heads are not a multiple of " + std::to_string(H) +
          " q / k heads";
    return failure();
  }
  const bool varlen = static_cast<bool>(in.cuSeqlens);
  if (varlen && B != 1) {
    why = "emitDenseBackward: cu_seqlens with a batch of " + std::to_string(B) +
          " (expected 1)";
    return failure();
  }
  const int64_t N =
      varlen ? cast<RankedTensorType>(in.cuSeqlens.getType()).getDimSize(0) - 1 : B;
  // Packed sequences read C rows past their last one (masked).
  const int64_t padded = varlen ? T + C : (T + C - 1) / C * C;
  Value c0 = arith::ConstantIndexOp::create(b, 0);
  Value c1 = arith::ConstantIndexOp::create(b, 1);
  Value cB = arith::ConstantIndexOp::create(b, N);
  Value cHV = arith::ConstantIndexOp::create(b, HV);
  Value cGroup = arith::ConstantIndexOp::create(b, HV / H);

  // dq, dk, dv, dgate, dbeta, dstate, dA_log, ddt_bias: zeros to start.
  const bool headGate =
      in.gate && cast<RankedTensorType>(in.gate.getType()).getRank() == 3;
  const bool headDt =
      in.dtBias && cast<RankedTensorType>(in.dtBias.getType()).getRank() == 1;
  SmallVector<int64_t> stateShape = {N, HV, in.vMajor ? V : K,
                                     in.vMajor ? K : V};
  SmallVector<Value> init = {
      zerosOf(b, {B, T, H, K}),  zerosOf(b, {B, T, H, K}),
      zerosOf(b, {B, T, HV, V}),
      headGate ? zerosOf(b, {B, T, HV}) : zerosOf(b, {B, T, HV, K}),
      zerosOf(b, {B, T, HV}),    zerosOf(b, stateShape),
      zerosOf(b, {HV}),          headDt ? zerosOf(b, {HV}) : zerosOf(b, {HV, K})};
  std::string whyNot;
  auto outer = scf::ForOp::create(
      b, c0, cB, c1, init,
      [&](OpBuilder &ob, Location ol, Value n, ValueRange seqAcc) {
        ImplicitLocOpBuilder sb(ol, ob);
        // Sequence n: batch row n, or rows [cu[n], cu[n + 1]) of row 0.
        Value bi = varlen ? c0 : n;
        Value start, count;
        if (varlen) {
          auto offset = [&](Value i) -> Value {
            Value x = tensor::ExtractOp::create(sb, in.cuSeqlens, ValueRange{i});
            return arith::IndexCastOp::create(sb, sb.getIndexType(), x);
          };
          start = offset(n);
          count = arith::SubIOp::create(
              sb, offset(arith::AddIOp::create(sb, n, c1)), start);
        }
        auto inner = scf::ForOp::create(
            sb, c0, cHV, c1, seqAcc,
            [&](OpBuilder &nb, Location loc, Value hv, ValueRange acc) {
              ImplicitLocOpBuilder ib(loc, nb);
              Value qh = arith::DivUIOp::create(ib, hv, cGroup);
              SequenceTiles t;
              t.tokens = T;
              t.start = start;
              t.count = count;
              // (bi, :, x, :) of [B, T, X, N], (bi, :, x) of [B, T, X].
              auto tokens = [&](Value t, Value x) {
                return withRows(ib, pick(ib, t, {bi, Value(), x}).extract(ib, t),
                                padded);
              };
              t.q = tokens(in.q, qh);
              t.k = tokens(in.k, qh);
              t.v = tokens(in.v, hv);
              if (in.gate && headGate) {
                // One gate per token, every channel's: broadcast, and its
                // gradient summed back over the channels.
                TensorTileBuilder tb(ib);
                t.gate = tb.map({padded, K},
                                {perRow(tokens(in.gate, hv))},
                                [](ImplicitLocOpBuilder &, ValueRange s,
                                   ValueRange) { return s[0]; });
              } else if (in.gate) {
                t.gate = tokens(in.gate, hv);
              }
              if (in.beta)
                t.beta = tokens(in.beta, hv);
              if (in.dtBias && headDt) {
                Value scalar =
                    tensor::ExtractOp::create(ib, in.dtBias, ValueRange{hv});
                TensorTileBuilder tb(ib);
                t.dtBias = tb.map({K}, {},
                                  [&](ImplicitLocOpBuilder &, ValueRange,
                                      ValueRange) { return scalar; });
              } else if (in.dtBias) {
                t.dtBias = pick(ib, in.dtBias, {hv}).extract(ib, in.dtBias);
              }
              if (in.aLog)
                t.aLog = tensor::ExtractOp::create(ib, in.aLog, ValueRange{hv});
              TensorTileBuilder ttb(ib);
              auto kMajor = [&](Value st) {
                return in.vMajor ? ttb.transpose(st) : st;
              };
              // (n, hv, :, :) of a state stack.
              auto stateOf = [&](Value st) {
                return st ? kMajor(pick(ib, st, {n, hv}).extract(ib, st))
                          : zerosOf(ib, {K, V});
              };
              t.state = stateOf(in.state);
              if (in.chunkStates) {
                t.states = pick(ib, in.chunkStates, {n, Value(), hv})
                               .extract(ib, in.chunkStates);
                t.statesVMajor = in.vMajor;
              }
              Value dOs = tokens(dO, hv);
              Value dEnd = stateOf(dStateEnd);
              FailureOr<SequenceGrads> g =
                  emitSequenceBackward(ib, config, t, dOs, dEnd, whyNot);
              if (failed(g)) {
                scf::YieldOp::create(ib, acc);
                return;
              }
              SmallVector<Value> next(acc.begin(), acc.end());
              // Added, not written: the value heads of a q / k head sum into
              // it (GVA), packed sequences share the rows of a head (each
              // one's gradient is zero outside its own), and A_log and
              // dt_bias are every sequence's.
              auto perToken = [&](Value acc, Value grad, Value x) {
                return accumulate(ib, acc, pick(ib, acc, {bi, Value(), x}),
                                  withRows(ib, grad, T));
              };
              next[0] = perToken(acc[0], g->dq, qh);
              next[1] = perToken(acc[1], g->dk, qh);
              next[2] = perToken(acc[2], g->dv, hv);
              if (g->dgate)
                next[3] = perToken(acc[3], headGate ? ttb.rowSum(g->dgate) : g->dgate, hv);
              if (g->dbeta)
                next[4] = perToken(acc[4], g->dbeta, hv);
              next[5] = pick(ib, acc[5], {n, hv}).insert(ib, kMajor(g->dState), acc[5]);
              if (g->dALog)
                next[6] = accumulate(ib, acc[6], rowsOf(ib, acc[6], hv, 1), g->dALog);
              if (g->dDtBias && headDt) {
                Value sum = ttb.rowSum(ttb.map({1, K}, {perColumn(g->dDtBias)},
                                               [](ImplicitLocOpBuilder &,
                                                  ValueRange s, ValueRange) {
                                                 return s[0];
                                               }));
                next[7] = accumulate(ib, acc[7], rowsOf(ib, acc[7], hv, 1), sum);
              } else if (g->dDtBias) {
                next[7] = accumulate(ib, acc[7], pick(ib, acc[7], {hv}), g->dDtBias);
              }
              scf::YieldOp::create(ib, next);
            });
        scf::YieldOp::create(sb, inner.getResults());
      });
  if (!whyNot.empty()) {
    why = whyNot;
    return failure();
  }
  SequenceGrads out;
  out.dq = outer.getResult(0);
  out.dk = outer.getResult(1);
  out.dv = outer.getResult(2);
  if (in.gate)
    out.dgate = outer.getResult(3);
  if (in.beta)
    out.dbeta = outer.getResult(4);
  out.dState = outer.getResult(5);
  if (in.aLog)
    out.dALog = outer.getResult(6);
  if (in.dtBias)
    out.dDtBias = outer.getResult(7);
  return out;
}
