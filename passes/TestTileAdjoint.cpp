//===- TestTileAdjoint.cpp - the tile adjoints against finite differences ===//
//
// kda-test-tile-adjoint fills a module with small tile programs, written
// once against TileBuilder, and with what checks their adjoints
// (TileAdjoint.h) when the module is executed: for each program P,
//   @P(inputs) -> outputs            the forward (TensorTileBuilder);
//   @P_grad(inputs, seeds) -> grads  the forward recorded by a
//                                    TapeTileBuilder, then its adjoint;
//   @check_P()                       prints, per input, 1 where every
//                                    element's gradient of sum(seed * out)
//                                    agrees with a central difference of @P,
//                                    0 where one does not;
// and @main, which runs every check. The programs cover every primitive
// with a rule, and the chunk step of the gated delta rule itself
// (emitGatedDeltaChunk, both gate forms, A_log included): the backward
// derived from the one algorithm. test/passes/tile-adjoint.mlir lowers and runs it.
//
//===----------------------------------------------------------------------===//

#include "passes/GatedDeltaBackward.h"
#include "passes/GatedDeltaKernel.h"
#include "passes/Passes.h"
#include "passes/TileAdjoint.h"
#include "passes/TileBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Pass/Pass.h"

#include <cmath>
#include <functional>

namespace mlir::kda {
#define GEN_PASS_DEF_KDATESTTILEADJOINT
#include "passes/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;
using namespace mlir::kda;

namespace {

struct InputSpec {
  SmallVector<int64_t> shape;
  double lo, hi;       // values drawn in [lo, hi]
  bool scalar = false; // a [1] tile the program reads as a scalar (A_log)
};

using Program =
    std::function<SmallVector<Value>(TileBuilder &tb, ArrayRef<Value> in)>;

/// A gradient written for a program (instead of the tape over `run`):
/// (inputs as the program gets them, seeds) -> a gradient per input.
using GradProgram = std::function<FailureOr<SmallVector<Value>>(
    ImplicitLocOpBuilder &b, ArrayRef<Value> in, ArrayRef<Value> seeds,
    std::string &why)>;

struct TestProgram {
  std::string name;
  SmallVector<InputSpec> inputs;
  Program run;
  GradProgram grad = {};
};

/// The sequence programs' inputs in their order: q, k, v, gate, beta,
/// dt_bias, state, A_log.
template <typename Tiles>
Tiles fromInputs(ArrayRef<Value> in) {
  Tiles t;
  t.q = in[0];
  t.k = in[1];
  t.v = in[2];
  t.gate = in[3];
  t.beta = in[4];
  t.dtBias = in[5];
  t.state = in[6];
  t.aLog = in[7];
  return t;
}

/// Their gradients in the same order.
FailureOr<SmallVector<Value>> inInputOrder(FailureOr<SequenceGrads> g) {
  if (failed(g))
    return failure();
  return SmallVector<Value>{g->dq,    g->dk,      g->dv,     g->dgate,
                            g->dbeta, g->dDtBias, g->dState, g->dALog};
}

/// The chunk step of the chunk and sequence programs (the chunk programs vary
/// the gate and the l2 norm): C = 8, sub-chunks of 4, K = 4, V = 3,
/// l2 norm, beta sigmoid, the lower-bound gate.
ChunkConfig sequenceConfig() {
  ChunkConfig cfg;
  cfg.chunk = 8;
  cfg.subChunk = 4;
  cfg.keyDim = 4;
  cfg.valueDim = 3;
  cfg.scale = 0.5;
  cfg.qkL2Norm = true;
  cfg.betaActivation = BetaActivation::sigmoid;
  cfg.gateActivation = GateActivation::lower_bound;
  return cfg;
}

Value f32c(ImplicitLocOpBuilder &b, double v) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
}

/// Deterministic values in [lo, hi] (a hash of the position and a salt).
Value constantTile(ImplicitLocOpBuilder &b, ArrayRef<int64_t> shape, double lo,
                   double hi, unsigned salt) {
  auto type = RankedTensorType::get(shape, b.getF32Type());
  SmallVector<float> values;
  for (int64_t e = 0; e < type.getNumElements(); ++e) {
    double x = std::sin(12.9898 * (e + 1) + 78.233 * salt) * 43758.5453;
    double frac = x - std::floor(x);
    values.push_back(static_cast<float>(lo + (hi - lo) * frac));
  }
  return arith::ConstantOp::create(
      b, DenseElementsAttr::get(type, ArrayRef<float>(values)));
}

/// The row-major indices of linear position `e` in `shape`.
SmallVector<Value> indicesOf(ImplicitLocOpBuilder &b, Value e,
                             ArrayRef<int64_t> shape) {
  SmallVector<Value> idx(shape.size());
  for (size_t d = shape.size(); d-- > 1;) {
    Value size = arith::ConstantIndexOp::create(b, shape[d]);
    idx[d] = arith::RemUIOp::create(b, e, size);
    e = arith::DivUIOp::create(b, e, size);
  }
  idx[0] = e;
  return idx;
}

/// A static slice of a tensor: offsets and sizes per dimension, dimensions
/// of size 1 in `drop` removed from the result.
Value staticSlice(ImplicitLocOpBuilder &b, Value t, ArrayRef<int64_t> offsets,
                  ArrayRef<int64_t> sizes, ArrayRef<int64_t> drop) {
  SmallVector<OpFoldResult> o, z, st;
  SmallVector<int64_t> shape;
  for (size_t d = 0; d < offsets.size(); ++d) {
    o.push_back(b.getIndexAttr(offsets[d]));
    z.push_back(b.getIndexAttr(sizes[d]));
    st.push_back(b.getIndexAttr(1));
    if (!llvm::is_contained(drop, int64_t(d)))
      shape.push_back(sizes[d]);
  }
  return tensor::ExtractSliceOp::create(
      b, RankedTensorType::get(shape, b.getF32Type()), t, o, z, st);
}

Value staticInsert(ImplicitLocOpBuilder &b, Value sub, Value dest,
                   ArrayRef<int64_t> offsets, ArrayRef<int64_t> sizes) {
  SmallVector<OpFoldResult> o, z, st;
  for (size_t d = 0; d < offsets.size(); ++d) {
    o.push_back(b.getIndexAttr(offsets[d]));
    z.push_back(b.getIndexAttr(sizes[d]));
    st.push_back(b.getIndexAttr(1));
  }
  return tensor::InsertSliceOp::create(b, sub, dest, o, z, st);
}

/// sum(x * s) over every element, in f32.
Value sumProduct(ImplicitLocOpBuilder &b, Value x, Value s) {
  auto type = cast<RankedTensorType>(x.getType());
  Value c0 = arith::ConstantIndexOp::create(b, 0);
  Value c1 = arith::ConstantIndexOp::create(b, 1);
  Value n = arith::ConstantIndexOp::create(b, type.getNumElements());
  auto loop = scf::ForOp::create(
      b, c0, n, c1, ValueRange{f32c(b, 0.0)},
      [&](OpBuilder &nb, Location loc, Value e, ValueRange acc) {
        ImplicitLocOpBuilder ib(loc, nb);
        SmallVector<Value> idx = indicesOf(ib, e, type.getShape());
        Value p = arith::MulFOp::create(ib, tensor::ExtractOp::create(ib, x, idx),
                                        tensor::ExtractOp::create(ib, s, idx));
        scf::YieldOp::create(ib, ValueRange{arith::AddFOp::create(ib, acc[0], p)});
      });
  return loop.getResult(0);
}

/// The programs. Ranges keep them smooth and every exponent small.
SmallVector<TestProgram> programs() {
  SmallVector<TestProgram> out;
  out.push_back(
      {"products",
       {{{4, 3}, -1, 1}, {{5, 3}, -1, 1}, {{4, 5}, -1, 1}, {{4}, -1, 1}},
       [](TileBuilder &tb, ArrayRef<Value> in) -> SmallVector<Value> {
         Value c = tb.matmulAdd(in[2], in[0], in[1], false, true); // [4, 5]
         Value d = tb.matmul(in[0], in[2], true, false);           // [3, 5]
         Value e = tb.vecmat(in[3], in[2]);                        // [5]
         Value f = tb.transpose(tb.matmul(in[1], in[0], false, true));
         return {c, d, e, f};
       }});
  out.push_back(
      {"maps",
       {{{4, 5}, -1, 1}, {{4}, -1, 1}, {{5}, 0.5, 1.5}},
       [](TileBuilder &tb, ArrayRef<Value> in) -> SmallVector<Value> {
         Value m = tb.map(
             {4, 5}, {in[0], perRow(in[1]), perColumn(in[2])},
             [](ImplicitLocOpBuilder &b, ValueRange s, ValueRange ivs) -> Value {
               Value keep = arith::CmpIOp::create(b, arith::CmpIPredicate::ule,
                                                  ivs[1], ivs[0]);
               Value decayed = arith::MulFOp::create(
                   b, math::ExpOp::create(b, arith::SubFOp::create(b, s[0], s[1])),
                   s[2]);
               Value other = arith::MulFOp::create(b, math::TanhOp::create(b, s[0]),
                                                   s[1]);
               return arith::SelectOp::create(b, keep, decayed, other);
             });
         return {m, tb.rowSum(m), tb.prefixSumRows(m)};
       }});
  out.push_back(
      {"inverse",
       {{{5, 5}, -1, 1}},
       [](TileBuilder &tb, ArrayRef<Value> in) -> SmallVector<Value> {
         Value l = tb.map({5, 5}, {in[0]},
                          [](ImplicitLocOpBuilder &b, ValueRange s,
                             ValueRange ivs) -> Value {
                            Value below = arith::CmpIOp::create(
                                b, arith::CmpIPredicate::ult, ivs[1], ivs[0]);
                            return arith::SelectOp::create(
                                b, below, arith::MulFOp::create(b, s[0], f32c(b, 0.5)),
                                f32c(b, 0.0));
                          });
         return {tb.matmul(tb.invertUnitLower(l), in[0])};
       }});
  out.push_back(
      {"pairs",
       {{{6, 4}, -1, 1}, {{6, 4}, -1, 1}, {{6, 4}, -1, 1}},
       [](TileBuilder &tb, ArrayRef<Value> in) -> SmallVector<Value> {
         // A cumulative log-decay, as the algorithm's G: non-increasing rows.
         Value step = tb.map({6, 4}, {in[2]},
                             [](ImplicitLocOpBuilder &b, ValueRange s,
                                ValueRange) -> Value {
                               return arith::MulFOp::create(
                                   b, math::ExpOp::create(b, s[0]), f32c(b, -0.3));
                             });
         Value g = tb.prefixSumRows(step);
         return {tb.decayedPairs(in[0], in[1], g, false),
                 tb.decayedPairs(in[0], in[0], g, true)};
       }});
  out.push_back(
      {"structural",
       {{{4, 6}, -1, 1}, {{2, 3}, -1, 1}},
       [](TileBuilder &tb, ArrayRef<Value> in) -> SmallVector<Value> {
         Value s = tb.subTile(in[0], {1, 2}, {2, 3});
         Value p = tb.map({2, 3}, {s, in[1]},
                          [](ImplicitLocOpBuilder &b, ValueRange v,
                             ValueRange) -> Value {
                            return arith::MulFOp::create(b, v[0], v[1]);
                          });
         Value w = tb.insertSubTile(p, in[0], {2, 0});
         Value r = tb.rowOf(w, 3);
         Value e = tb.park(tb.map({6}, {r},
                                  [](ImplicitLocOpBuilder &b, ValueRange v,
                                     ValueRange) -> Value {
                                    return math::ExpOp::create(b, v[0]);
                                  }));
         return {w, e};
       }});
  // The chunk step of the gated delta rule (passes/GatedDeltaKernel.cpp):
  // q, k [C, K], v [C, V], the raw gate [C, K], beta logits [C], dt_bias [K],
  // the state [K, V] -> o [C, V], the next state [K, V].
  auto chunk = [](GateActivation gate, bool l2, int64_t valid) {
    return [gate, l2, valid](TileBuilder &tb,
                             ArrayRef<Value> in) -> SmallVector<Value> {
      ChunkConfig cfg = sequenceConfig();
      cfg.qkL2Norm = l2;
      cfg.gateActivation = gate;
      ChunkInputs ci;
      ci.q = in[0];
      ci.k = in[1];
      ci.v = in[2];
      ci.gate = in[3];
      ci.beta = in[4];
      ci.dtBias = in[5];
      ci.aLog = in[7];
      ci.validRows = tb.index(valid);
      ChunkOutputs o = emitGatedDeltaChunk(tb, cfg, ci, in[6]);
      return {o.o, o.nextState};
    };
  };
  SmallVector<InputSpec> chunkInputs = {
      {{8, 4}, -1, 1},     {{8, 4}, -1, 1}, {{8, 3}, -1, 1},
      {{8, 4}, -1, 1},     {{8}, -1, 1},    {{4}, -0.5, 0.5},
      {{4, 3}, -0.5, 0.5}, {{1}, -0.2, 0.8, /*scalar=*/true}};
  out.push_back({"chunk_lower_bound", chunkInputs,
                 chunk(GateActivation::lower_bound, true, 7)});
  out.push_back({"chunk_softplus", chunkInputs,
                 chunk(GateActivation::softplus, false, 8)});
  // Three chunks chained through the state, the last with 4 real rows of 8:
  // a sequence of 20 tokens, whose adjoint is the reverse state pass
  // (docs/backward.md) run chunk by chunk.
  out.push_back(
      {"sequence",
       {{{24, 4}, -1, 1}, {{24, 4}, -1, 1}, {{24, 3}, -1, 1}, {{24, 4}, -1, 1},
        {{24}, -1, 1}, {{4}, -0.5, 0.5}, {{4, 3}, -0.5, 0.5},
        {{1}, -0.2, 0.8, /*scalar=*/true}},
       [](TileBuilder &tb, ArrayRef<Value> in) -> SmallVector<Value> {
         ChunkConfig cfg = sequenceConfig();
         Value state = in[6];
         Value o = tb.filled({24, 3}, 0.0);
         for (int64_t c = 0; c < 3; ++c) {
           auto rows = [&](Value x) {
             SmallVector<int64_t> s = tb.shape(x);
             if (s.size() == 1) // beta [24]: as a [24, 1] column, sliced, back
               return tb.rowOf(tb.transpose(tb.subTile(
                                   tb.transpose(tb.map({1, s[0]}, {perColumn(x)},
                                                       [](ImplicitLocOpBuilder &,
                                                          ValueRange v, ValueRange) {
                                                         return v[0];
                                                       })),
                                   {8 * c, 0}, {8, 1})),
                               0);
             return tb.subTile(x, {8 * c, 0}, {8, s[1]});
           };
           ChunkInputs ci;
           ci.q = rows(in[0]);
           ci.k = rows(in[1]);
           ci.v = rows(in[2]);
           ci.gate = rows(in[3]);
           ci.beta = rows(in[4]);
           ci.dtBias = in[5];
           ci.aLog = in[7];
           ci.validRows = tb.index(c == 2 ? 4 : 8);
           ChunkOutputs r = emitGatedDeltaChunk(tb, cfg, ci, state);
           // Only the real rows are outputs (as the kernels write them).
           o = tb.insertSubTile(c == 2 ? tb.subTile(r.o, {0, 0}, {4, 3}) : r.o, o,
                                {8 * c, 0});
           state = r.nextState;
         }
         return {o, state};
       }});
  // The same sequence's gradient by emitSequenceBackward (the forward pass
  // keeping each chunk's state, then the reverse pass over scf.for loops:
  // each chunk recomputed under a tape), checked against the unrolled
  // forward's differences.
  {
    TestProgram loop = out.back();
    loop.name = "sequence_loop";
    loop.grad = [](ImplicitLocOpBuilder &b, ArrayRef<Value> in,
                   ArrayRef<Value> seeds,
                   std::string &why) -> FailureOr<SmallVector<Value>> {
      auto t = fromInputs<SequenceTiles>(in);
      t.tokens = 20;
      return inInputOrder(emitSequenceBackward(b, sequenceConfig(), t, seeds[0],
                                               seeds[1], why));
    };
    out.push_back(loop);
  }
  // A dense call: B = 2 sequences of T = 12 tokens (chunks of 8, the second
  // with 4 real rows), one q / k head shared by 2 value heads (GVA), A_log
  // and dt_bias per value head. Its gradient by emitDenseBackward (each
  // (sequence, value head) through emitSequenceBackward; dq and dk summed
  // over the value heads, dA_log and ddt_bias over the sequences), against
  // the differences of a forward written here with the chunks unrolled.
  out.push_back(
      {"dense_gva",
       {{{2, 12, 1, 4}, -1, 1}, {{2, 12, 1, 4}, -1, 1}, {{2, 12, 2, 3}, -1, 1},
        {{2, 12, 2, 4}, -1, 1}, {{2, 12, 2}, -1, 1}, {{2, 4}, -0.5, 0.5},
        {{2, 2, 4, 3}, -0.5, 0.5}, {{2}, -0.2, 0.8}},
       [](TileBuilder &tb, ArrayRef<Value> in) -> SmallVector<Value> {
         ImplicitLocOpBuilder &b = tb.builder();
         ChunkConfig cfg = sequenceConfig();
         Value o = tb.filled({2, 12, 2, 3}, 0.0);
         Value ht = tb.filled({2, 2, 4, 3}, 0.0);
         for (int64_t s = 0; s < 2; ++s)
           for (int64_t hv = 0; hv < 2; ++hv) {
             Value state = staticSlice(b, in[6], {s, hv, 0, 0}, {1, 1, 4, 3}, {0, 1});
             Value aLog = tensor::ExtractOp::create(
                 b, in[7], ValueRange{arith::ConstantIndexOp::create(b, hv)});
             Value dt = staticSlice(b, in[5], {hv, 0}, {1, 4}, {0});
             for (int64_t c = 0; c < 2; ++c) {
               int64_t rows = c == 0 ? 8 : 4;
               auto chunkOf = [&](Value t, int64_t head) {
                 auto shape = cast<RankedTensorType>(t.getType()).getShape();
                 Value part =
                     shape.size() == 4
                         ? staticSlice(b, t, {s, 8 * c, head, 0},
                                       {1, rows, 1, shape[3]}, {0, 2})
                         : staticSlice(b, t, {s, 8 * c, head}, {1, rows, 1}, {0, 2});
                 if (rows == 8)
                   return part;
                 SmallVector<int64_t> full = {8};
                 if (shape.size() == 4)
                   full.push_back(shape[3]);
                 SmallVector<int64_t> at(full.size(), 0);
                 SmallVector<int64_t> size = {rows};
                 if (shape.size() == 4)
                   size.push_back(shape[3]);
                 return staticInsert(b, part, tb.filled(full, 0.0), at, size);
               };
               ChunkInputs ci;
               ci.q = chunkOf(in[0], 0);
               ci.k = chunkOf(in[1], 0);
               ci.v = chunkOf(in[2], hv);
               ci.gate = chunkOf(in[3], hv);
               ci.beta = chunkOf(in[4], hv);
               ci.dtBias = dt;
               ci.aLog = aLog;
               ci.validRows = tb.index(rows);
               ChunkOutputs r = emitGatedDeltaChunk(tb, cfg, ci, state);
               Value real = rows == 8 ? r.o : staticSlice(b, r.o, {0, 0}, {rows, 3}, {});
               Value real4 = tensor::ExpandShapeOp::create(
                   b, RankedTensorType::get({1, rows, 1, 3}, b.getF32Type()), real,
                   SmallVector<ReassociationIndices>{{0, 1}, {2, 3}});
               o = staticInsert(b, real4, o, {s, 8 * c, hv, 0}, {1, rows, 1, 3});
               state = r.nextState;
             }
             Value st4 = tensor::ExpandShapeOp::create(
                 b, RankedTensorType::get({1, 1, 4, 3}, b.getF32Type()), state,
                 SmallVector<ReassociationIndices>{{0, 1, 2}, {3}});
             ht = staticInsert(b, st4, ht, {s, hv, 0, 0}, {1, 1, 4, 3});
           }
         return {o, ht};
       },
       [](ImplicitLocOpBuilder &b, ArrayRef<Value> in, ArrayRef<Value> seeds,
          std::string &why) -> FailureOr<SmallVector<Value>> {
         return inInputOrder(emitDenseBackward(b, sequenceConfig(),
                                               fromInputs<DenseTensors>(in),
                                               seeds[0], seeds[1], why));
       }});
  // A primitive without a rule: the pass must fail and name it.
  out.push_back({"row_max",
                 {{{3, 4}, -1, 1}},
                 [](TileBuilder &tb, ArrayRef<Value> in) -> SmallVector<Value> {
                   return {tb.rowMax(in[0])};
                 }});
  return out;
}

/// What a program gets: its input tiles, a scalar input read from its [1]
/// tile (the value the tape differentiates it as).
SmallVector<Value> programArgs(ImplicitLocOpBuilder &b, const TestProgram &p,
                               ValueRange tiles) {
  SmallVector<Value> args(tiles.begin(), tiles.end());
  for (auto [i, spec] : llvm::enumerate(p.inputs))
    if (spec.scalar)
      args[i] = tensor::ExtractOp::create(
          b, args[i], ValueRange{arith::ConstantIndexOp::create(b, 0)});
  return args;
}

struct TestTileAdjointPass
    : kda::impl::KdaTestTileAdjointBase<TestTileAdjointPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    Location loc = module.getLoc();
    OpBuilder top(ctx);
    top.setInsertionPointToEnd(module.getBody());
    SmallVector<func::FuncOp> checks;
    for (const TestProgram &p : programs()) {
      bool wanted = only.empty() ? p.name != "row_max"
                                 : llvm::is_contained(only, p.name);
      if (!wanted)
        continue;
      SmallVector<Type> ins;
      for (const InputSpec &s : p.inputs)
        ins.push_back(RankedTensorType::get(s.shape, Float32Type::get(ctx)));

      // The forward; its result types give the seeds'.
      auto fwd = func::FuncOp::create(top, loc, p.name,
                                      FunctionType::get(ctx, ins, {}));
      SmallVector<Type> outs;
      {
        Block *entry = fwd.addEntryBlock();
        ImplicitLocOpBuilder b(loc, entry, entry->begin());
        TensorTileBuilder tb(b);
        SmallVector<Value> args = programArgs(b, p, entry->getArguments());
        SmallVector<Value> r = p.run(tb, args);
        for (Value v : r)
          outs.push_back(v.getType());
        func::ReturnOp::create(b, r);
        fwd.setType(FunctionType::get(ctx, ins, outs));
      }

      // The gradient: (inputs, seeds) -> d sum(seed * out) / d input.
      SmallVector<Type> gradIns(ins);
      llvm::append_range(gradIns, outs);
      auto grad = func::FuncOp::create(top, loc, p.name + "_grad",
                                       FunctionType::get(ctx, gradIns, ins));
      {
        Block *entry = grad.addEntryBlock();
        ImplicitLocOpBuilder b(loc, entry, entry->begin());
        TensorTileBuilder inner(b);
        TapeTileBuilder tape(inner);
        SmallVector<Value> args = programArgs(
            b, p, entry->getArguments().take_front(ins.size()));
        std::string why;
        FailureOr<SmallVector<Value>> grads;
        if (p.grad) {
          SmallVector<Value> seedArgs(
              entry->getArguments().drop_front(ins.size()));
          grads = p.grad(b, args, seedArgs, why);
        } else {
          SmallVector<Value> r = p.run(tape, args);
          SmallVector<std::pair<Value, Value>> seeds;
          for (auto [i, v] : llvm::enumerate(r))
            seeds.push_back({v, entry->getArgument(ins.size() + i)});
          grads = tape.emitAdjoint(seeds, args, why);
        }
        if (failed(grads)) {
          module.emitError() << "kda-test-tile-adjoint: " << p.name << ": "
                             << why;
          return signalPassFailure();
        }
        func::ReturnOp::create(b, *grads);
      }

      // The check.
      auto check = func::FuncOp::create(top, loc, "check_" + p.name,
                                        FunctionType::get(ctx, {}, {}));
      checks.push_back(check);
      Block *entry = check.addEntryBlock();
      ImplicitLocOpBuilder b(loc, entry, entry->begin());
      SmallVector<Value> inputs, seeds;
      for (auto [i, s] : llvm::enumerate(p.inputs))
        inputs.push_back(constantTile(b, s.shape, s.lo, s.hi, 1 + i));
      for (auto [i, t] : llvm::enumerate(outs))
        seeds.push_back(constantTile(b, cast<RankedTensorType>(t).getShape(),
                                     -1, 1, 101 + i));
      SmallVector<Value> gradArgs(inputs);
      llvm::append_range(gradArgs, seeds);
      auto grads = func::CallOp::create(b, grad, gradArgs);
      const double h = 1e-2, tolerance = 2e-3;
      auto loss = [&](ImplicitLocOpBuilder &ib, ArrayRef<Value> args) {
        auto call = func::CallOp::create(ib, fwd, args);
        Value sum = f32c(ib, 0.0);
        for (auto [o, s] : llvm::zip(call.getResults(), seeds))
          sum = arith::AddFOp::create(ib, sum, sumProduct(ib, o, s));
        return sum;
      };
      for (size_t i = 0; i < inputs.size(); ++i) {
        auto type = cast<RankedTensorType>(inputs[i].getType());
        Value c0 = arith::ConstantIndexOp::create(b, 0);
        Value c1 = arith::ConstantIndexOp::create(b, 1);
        Value n = arith::ConstantIndexOp::create(b, type.getNumElements());
        auto loop = scf::ForOp::create(
            b, c0, n, c1, ValueRange{f32c(b, 0.0)},
            [&](OpBuilder &nb, Location l, Value e, ValueRange acc) {
              ImplicitLocOpBuilder ib(l, nb);
              SmallVector<Value> idx = indicesOf(ib, e, type.getShape());
              Value x = tensor::ExtractOp::create(ib, inputs[i], idx);
              auto shifted = [&](double by) {
                Value xs = arith::AddFOp::create(ib, x, f32c(ib, by));
                SmallVector<Value> args(inputs);
                args[i] = tensor::InsertOp::create(ib, xs, inputs[i], idx);
                return loss(ib, args);
              };
              Value fd = arith::DivFOp::create(
                  ib, arith::SubFOp::create(ib, shifted(h), shifted(-h)),
                  f32c(ib, 2 * h));
              Value g = tensor::ExtractOp::create(ib, grads.getResult(i), idx);
              Value err = math::AbsFOp::create(ib, arith::SubFOp::create(ib, g, fd));
              Value scale = arith::MaximumFOp::create(
                  ib, math::AbsFOp::create(ib, fd), f32c(ib, 1.0));
              Value rel = arith::DivFOp::create(ib, err, scale);
              scf::YieldOp::create(
                  ib, ValueRange{arith::MaximumFOp::create(ib, acc[0], rel)});
            });
        if (printErrors)
          vector::PrintOp::create(b, loop.getResult(0));
        Value ok = arith::CmpFOp::create(b, arith::CmpFPredicate::OLE,
                                         loop.getResult(0), f32c(b, tolerance));
        vector::PrintOp::create(b, ok);
      }
      func::ReturnOp::create(b);
    }
    auto mainFn = func::FuncOp::create(top, loc, "main",
                                       FunctionType::get(ctx, {}, {}));
    Block *entry = mainFn.addEntryBlock();
    ImplicitLocOpBuilder b(loc, entry, entry->begin());
    for (func::FuncOp c : checks)
      func::CallOp::create(b, c, ValueRange{});
    func::ReturnOp::create(b);
  }
};

} // namespace
