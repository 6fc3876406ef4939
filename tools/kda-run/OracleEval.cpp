//===- OracleEval.cpp - float64 evaluation of a kda function --------------===//

#include "tools/kda-run/OracleEval.h"

#include "dialect/KdaOps.h"
#include "test/oracle/Oracle.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
namespace oracle = ::kda::oracle;

namespace kda::run {
namespace {

std::string str(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

std::string str(Location loc) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << loc;
  return s;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

double toDouble(llvm::APFloat x) {
  bool losesInfo = false;
  x.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  return x.convertToDouble();
}

oracle::Update update(mlir::kda::UpdateRule u) {
  return u == mlir::kda::UpdateRule::additive ? oracle::Update::Additive
                                        : oracle::Update::Delta;
}

oracle::StateLayout layout(mlir::kda::StateLayout l) {
  return l == mlir::kda::StateLayout::v_major ? oracle::StateLayout::VMajor
                                        : oracle::StateLayout::KMajor;
}

oracle::BetaActivation betaActivation(mlir::kda::BetaActivation b) {
  switch (b) {
  case mlir::kda::BetaActivation::none:
    return oracle::BetaActivation::None;
  case mlir::kda::BetaActivation::sigmoid:
    return oracle::BetaActivation::Sigmoid;
  case mlir::kda::BetaActivation::sigmoid_neg_eigval:
    return oracle::BetaActivation::SigmoidNegEigval;
  }
  return oracle::BetaActivation::None;
}

oracle::GateActivation gateActivation(mlir::kda::GateActivation g) {
  switch (g) {
  case mlir::kda::GateActivation::none:
    return oracle::GateActivation::None;
  case mlir::kda::GateActivation::softplus:
    return oracle::GateActivation::Softplus;
  case mlir::kda::GateActivation::lower_bound:
    return oracle::GateActivation::LowerBound;
  }
  return oracle::GateActivation::None;
}

oracle::Combine combine(mlir::kda::CombineMode m) {
  return m == mlir::kda::CombineMode::gated ? oracle::Combine::Gated
                                      : oracle::Combine::Sum;
}

std::optional<double> optDouble(std::optional<llvm::APFloat> x) {
  if (!x)
    return std::nullopt;
  return toDouble(*x);
}

/// The interpreter state: one float64 tensor per SSA value.
class Evaluator {
public:
  std::string run(func::FuncOp f, const std::vector<std::vector<double>> &args,
                  std::vector<std::vector<double>> &results);
  /// Verifies `f` and binds its arguments to `args` ("" or why not).
  std::string bind(func::FuncOp f, const std::vector<std::vector<double>> &args);

private:
  /// The tensor of `v` (nullptr with `error` set if unknown). A null `v`
  /// (an absent optional operand) gives the absent Tensor.
  const oracle::Tensor *get(Value v);
  /// Copies get(v) into `out` (absent when v is null).
  bool load(Value v, oracle::Tensor &out);
  /// Reads integer offsets / indices / windows out of `v`.
  bool loadInts(Value v, StringRef what, std::vector<int64_t> &out);
  /// Binds `result` to `t`, checking t against the result's static type.
  bool store(Value result, oracle::Tensor t, bool padDim1 = false);

  bool evalGatedDelta(mlir::kda::GatedDeltaOp op);
  /// The oracle's arguments of `op` (inputs from `env`, attributes).
  template <typename RecurrenceOp>
  bool argsOf(RecurrenceOp op, oracle::GatedDeltaArgs &a);
  bool evalGatedDeltaGrad(mlir::kda::GatedDeltaGradOp op);
  bool evalGate(mlir::kda::GateOp op);
  bool evalDecodeStep(mlir::kda::DecodeStepOp op);
  bool evalWindow(mlir::kda::WindowAttentionOp op);
  bool evalHybrid(mlir::kda::HybridOp op);
  bool evalMultiScale(mlir::kda::MultiScaleOp op);
  bool evalConstant(arith::ConstantOp op);
  bool evalEmpty(Operation *op);
  bool evalExtractSlice(tensor::ExtractSliceOp op);

  bool fail(const std::string &message) {
    error = current ? current->getName().getStringRef().str() + " at " +
                          str(current->getLoc()) + ": " + message
                    : message;
    return false;
  }
  bool check(const oracle::Status &status) {
    return status.ok() ? true : fail("oracle: " + status.message);
  }

  llvm::DenseMap<Value, oracle::Tensor> env;
  Operation *current = nullptr;
  std::string error;
};

const oracle::Tensor *Evaluator::get(Value v) {
  auto it = env.find(v);
  if (it == env.end()) {
    fail("operand has no value (defined outside the evaluated block?)");
    return nullptr;
  }
  return &it->second;
}

bool Evaluator::load(Value v, oracle::Tensor &out) {
  if (!v) {
    out = oracle::Tensor();
    return true;
  }
  const oracle::Tensor *t = get(v);
  if (!t)
    return false;
  out = *t;
  return true;
}

bool Evaluator::loadInts(Value v, StringRef what, std::vector<int64_t> &out) {
  out.clear();
  if (!v)
    return true;
  const oracle::Tensor *t = get(v);
  if (!t)
    return false;
  out.reserve(t->data.size());
  for (size_t i = 0; i < t->data.size(); ++i) {
    double x = t->data[i];
    if (!std::isfinite(x) || x != std::nearbyint(x) || std::fabs(x) > 0x1p62)
      return fail(("operand '" + what + "': element " + std::to_string(i) +
                   " is not an integer (" + std::to_string(x) + ")")
                      .str());
    out.push_back(static_cast<int64_t>(x));
  }
  return true;
}

bool Evaluator::store(Value result, oracle::Tensor t, bool padDim1) {
  auto type = dyn_cast<RankedTensorType>(result.getType());
  if (!type)
    return fail("result type " + str(result.getType()) +
                " is not a ranked tensor");
  // A dynamic dimension takes the oracle's size (the function's own results
  // are static: kda-run checks them).
  std::vector<int64_t> want(type.getShape().begin(), type.getShape().end());
  if (t.shape.size() == want.size())
    for (size_t d = 0; d < want.size(); ++d)
      if (ShapedType::isDynamic(want[d]))
        want[d] = t.shape[d];
  if (t.shape != want) {
    // boundary_states with cu_seqlens: the oracle sizes NT after the
    // longest sequence; a larger static NT is padded with zero states.
    bool pad = padDim1 && t.shape.size() == want.size() && want.size() >= 2 &&
               t.shape[0] == want[0] && t.shape[1] <= want[1] &&
               std::equal(t.shape.begin() + 2, t.shape.end(), want.begin() + 2);
    if (!pad)
      return fail("the oracle produced shape " + shapeText(t.shape) +
                  " for a result of type " + str(type));
    oracle::Tensor padded(want);
    int64_t inner = 1;
    for (size_t d = 2; d < want.size(); ++d)
      inner *= want[d];
    for (int64_t a = 0; a < want[0]; ++a)
      std::copy(t.data.begin() + a * t.shape[1] * inner,
                t.data.begin() + (a + 1) * t.shape[1] * inner,
                padded.data.begin() + a * want[1] * inner);
    t = std::move(padded);
  }
  env[result] = std::move(t);
  return true;
}

/// kda.gated_delta and kda.gated_delta_grad share their operands and
/// attributes (the gradient has no boundary states).
template <typename RecurrenceOp>
bool Evaluator::argsOf(RecurrenceOp op, oracle::GatedDeltaArgs &a) {
  if (!load(op.getQ(), a.q) || !load(op.getK(), a.k) || !load(op.getV(), a.v) ||
      !load(op.getGate(), a.g) || !load(op.getBeta(), a.beta) ||
      !load(op.getInitialState(), a.initialState) ||
      !loadInts(op.getCuSeqlens(), "cu_seqlens", a.cuSeqlens) ||
      !load(op.getALog(), a.gate.aLog) || !load(op.getDtBias(), a.gate.dtBias))
    return false;
  a.update = update(op.getUpdate());
  a.scale = optDouble(op.getScale());
  a.layout = layout(op.getStateLayout());
  a.qkL2Norm = op.getQkL2norm();
  a.betaActivation = betaActivation(op.getBetaActivation());
  a.gate.activation = gateActivation(op.getGateActivation());
  if (auto lb = optDouble(op.getLowerBound()))
    a.gate.lowerBound = *lb;
  if constexpr (std::is_same_v<RecurrenceOp, mlir::kda::GatedDeltaOp>)
    if (op.getBoundaryStates())
      a.boundaryInterval =
          static_cast<int64_t>(op.getBoundaryInterval().value_or(0));
  return true;
}

bool Evaluator::evalGatedDeltaGrad(mlir::kda::GatedDeltaGradOp op) {
  oracle::GatedDeltaGradArgs ga;
  if (!argsOf(op, ga.forward) || !load(op.getDO(), ga.dO) ||
      !load(op.getDFinalState(), ga.dFinalState))
    return false;
  oracle::GatedDeltaGrads g;
  if (!check(oracle::gatedDeltaGrad(ga, g)))
    return false;
  if (!store(op.getDQ(), std::move(g.dq)) ||
      !store(op.getDK(), std::move(g.dk)) ||
      !store(op.getDV(), std::move(g.dv)))
    return false;
  for (auto [result, t] :
       {std::pair<Value, oracle::Tensor *>(op.getDGate(), &g.dg),
        {op.getDBeta(), &g.dbeta},
        {op.getDInitialState(), &g.dInitialState},
        {op.getD_ALog(), &g.dALog},
        {op.getDDtBias(), &g.dDtBias}})
    if (result && !store(result, std::move(*t)))
      return false;
  return true;
}

bool Evaluator::evalGatedDelta(mlir::kda::GatedDeltaOp op) {
  oracle::GatedDeltaArgs a;
  if (!argsOf(op, a))
    return false;
  oracle::GatedDeltaResult r;
  if (!check(oracle::gatedDelta(a, r)))
    return false;
  if (!store(op.getO(), std::move(r.o)))
    return false;
  if (op.getFinalState() && !store(op.getFinalState(), std::move(r.finalState)))
    return false;
  if (op.getBoundaryStates() && !op.getBoundaryIndices() &&
      !store(op.getBoundaryStates(), std::move(r.boundaryStates),
             /*padDim1=*/true))
    return false;
  if (Value table = op.getBoundaryIndices()) {
    // Into pool slots: boundary j of sequence n into slot table[n, j]; the
    // other slots zero, as the CPU lowering leaves them (entries past a
    // sequence's end are zero in the dense form, so copying them changes
    // nothing).
    std::vector<int64_t> slots;
    if (!loadInts(table, "boundary_indices", slots))
      return false;
    auto type = cast<RankedTensorType>(op.getBoundaryStates().getType());
    if (!type.hasStaticShape())
      return fail("result 'boundary_states' needs a static pool size");
    oracle::Tensor pool(std::vector<int64_t>(type.getShape().begin(),
                                             type.getShape().end()));
    const oracle::Tensor &dense = r.boundaryStates;
    int64_t n = dense.shape[0], nt = dense.shape[1];
    int64_t nb = cast<RankedTensorType>(table.getType()).getDimSize(1);
    int64_t entry = 1;
    for (size_t d = 2; d < dense.shape.size(); ++d)
      entry *= dense.shape[d];
    for (int64_t s = 0; s < n; ++s)
      for (int64_t j = 0; j < std::min(nt, nb); ++j) {
        int64_t slot = slots[static_cast<size_t>(s * nb + j)];
        if (slot < 0 || slot >= pool.shape[0])
          continue;
        std::copy(dense.data.begin() + (s * nt + j) * entry,
                  dense.data.begin() + (s * nt + j + 1) * entry,
                  pool.data.begin() + slot * entry);
      }
    if (!store(op.getBoundaryStates(), std::move(pool)))
      return false;
  }
  return true;
}

bool Evaluator::evalGate(mlir::kda::GateOp op) {
  oracle::Tensor raw;
  oracle::GateParams p;
  if (!load(op.getInput(), raw) || !load(op.getALog(), p.aLog) ||
      !load(op.getDtBias(), p.dtBias))
    return false;
  p.activation = gateActivation(op.getActivation());
  if (auto lb = optDouble(op.getLowerBound()))
    p.lowerBound = *lb;
  oracle::Tensor g;
  if (!check(oracle::gateActivation(
          raw, p, op.getGranularity() == mlir::kda::GateGranularity::channel, g)))
    return false;
  return store(op.getResult(), std::move(g));
}

bool Evaluator::evalDecodeStep(mlir::kda::DecodeStepOp op) {
  oracle::DecodeArgs a;
  if (!load(op.getQ(), a.q) || !load(op.getK(), a.k) || !load(op.getV(), a.v) ||
      !load(op.getGate(), a.g) || !load(op.getBeta(), a.beta) ||
      !load(op.getStatePool(), a.statePool) ||
      !loadInts(op.getIndices(), "indices", a.indices) ||
      !loadInts(op.getReadIndices(), "read_indices", a.readIndices) ||
      !load(op.getALog(), a.gate.aLog) || !load(op.getDtBias(), a.gate.dtBias))
    return false;
  // o_init only names the destination: skipped rows are zero (SPEC.md 4).
  if (!get(op.getOInit()))
    return false;
  a.update = update(op.getUpdate());
  a.scale = optDouble(op.getScale());
  a.layout = layout(op.getStateLayout());
  a.qkL2Norm = op.getQkL2norm();
  a.betaActivation = betaActivation(op.getBetaActivation());
  a.gate.activation = gateActivation(op.getGateActivation());
  if (auto lb = optDouble(op.getLowerBound()))
    a.gate.lowerBound = *lb;
  // read_pool: the start states come from another pool. The oracle is
  // written for one pool, so both become one: the read pool's slots after
  // the P of the pool, every read slot shifted by P (never a destination).
  const int64_t poolSlots = a.statePool.shape.empty() ? 0 : a.statePool.shape[0];
  if (op.getReadPool()) {
    oracle::Tensor readPool;
    if (!load(op.getReadPool(), readPool))
      return false;
    if (a.readIndices.empty()) {
      // Sequence n reads the slot indices names (of its first token).
      const int64_t n = a.q.shape.empty() ? 0 : a.q.shape[0];
      const int64_t perSeq = n > 0 ? int64_t(a.indices.size()) / n : 1;
      for (int64_t s = 0; s < n; ++s)
        a.readIndices.push_back(a.indices[s * perSeq]);
    }
    for (int64_t &slot : a.readIndices)
      if (slot >= 0)
        slot += poolSlots;
    a.statePool.shape[0] += readPool.shape[0];
    a.statePool.data.insert(a.statePool.data.end(), readPool.data.begin(),
                            readPool.data.end());
  }
  oracle::DecodeResult r;
  if (!check(oracle::decodeStep(a, r)))
    return false;
  if (op.getReadPool()) {
    r.statePool.data.resize(r.statePool.data.size() / r.statePool.shape[0] *
                            poolSlots);
    r.statePool.shape[0] = poolSlots;
  }
  return store(op.getO(), std::move(r.o)) &&
         store(op.getNewStatePool(), std::move(r.statePool));
}

bool Evaluator::evalWindow(mlir::kda::WindowAttentionOp op) {
  oracle::WindowArgs a;
  if (!load(op.getQ(), a.q) || !load(op.getK(), a.k) || !load(op.getV(), a.v) ||
      !loadInts(op.getWindowSizes(), "window_sizes", a.windowPerPosition) ||
      !loadInts(op.getCuSeqlens(), "cu_seqlens", a.cuSeqlens))
    return false;
  if (auto w = op.getWindow())
    a.window = static_cast<int64_t>(*w);
  a.scale = optDouble(op.getScale());
  oracle::Tensor o;
  if (!check(oracle::windowAttention(a, o)))
    return false;
  if (auto mode = op.getMix()) {
    // The fused hybrid mix: kda.hybrid mode(mix_linear, window).
    std::vector<oracle::Tensor> branches(2);
    oracle::Tensor z, mixed;
    if (!load(op.getMixLinear(), branches[0]) || !load(op.getMixGate(), z))
      return false;
    branches[1] = std::move(o);
    if (!check(oracle::hybridCombine(branches, combine(*mode), z, mixed)))
      return false;
    o = std::move(mixed);
  }
  return store(op.getO(), std::move(o));
}

bool Evaluator::evalHybrid(mlir::kda::HybridOp op) {
  std::vector<oracle::Tensor> branches;
  for (Value b : op.getBranches()) {
    branches.emplace_back();
    if (!load(b, branches.back()))
      return false;
  }
  oracle::Tensor z, o;
  if (!load(op.getZ(), z))
    return false;
  if (!check(oracle::hybridCombine(branches, combine(op.getMode()), z, o)))
    return false;
  return store(op.getO(), std::move(o));
}

bool Evaluator::evalMultiScale(mlir::kda::MultiScaleOp op) {
  oracle::MultiScaleArgs ms;
  oracle::GatedDeltaArgs &base = ms.base;
  oracle::Tensor initialStates;
  if (!load(op.getQ(), base.q) || !load(op.getK(), base.k) ||
      !load(op.getV(), base.v) || !load(op.getBeta(), base.beta) ||
      !load(op.getInitialStates(), initialStates) ||
      !loadInts(op.getCuSeqlens(), "cu_seqlens", base.cuSeqlens) ||
      !load(op.getZ(), ms.z))
    return false;
  base.update = update(op.getUpdate());
  base.scale = optDouble(op.getScale());
  base.layout = layout(op.getStateLayout());
  base.qkL2Norm = op.getQkL2norm();
  base.betaActivation = betaActivation(op.getBetaActivation());
  ms.combine = combine(op.getMode());

  std::vector<oracle::Tensor> gates;
  for (Value g : op.getGates()) {
    gates.emplace_back();
    if (!load(g, gates.back()))
      return false;
  }
  if (auto scales = op.getDecayScales()) {
    for (Attribute c : *scales) {
      auto fc = dyn_cast<FloatAttr>(c);
      if (!fc)
        return fail("attribute 'decay_scales' holds a non-float entry");
      ms.decayScales.push_back(toDouble(fc.getValue()));
    }
    if (gates.size() != 1)
      return fail("'decay_scales' needs exactly one gate tensor, found " +
                  std::to_string(gates.size()));
    base.g = gates[0];
  } else {
    ms.gates = gates;
  }

  oracle::MultiScaleResult r;
  if (!initialStates.present()) {
    if (!check(oracle::multiScale(ms, r)))
      return false;
  } else {
    // The oracle's multiScale starts every scale from base.initialState;
    // stacked per-scale initial states [M, N, HV, ., .] are evaluated as M
    // gatedDelta runs combined exactly as oracle::multiScale combines them
    // (multi_scale has no gate activation: scaling the log-space gate is
    // scaling the activated gate).
    const int64_t M = static_cast<int64_t>(
        ms.decayScales.empty() ? ms.gates.size() : ms.decayScales.size());
    if (initialStates.rank() < 1 || initialStates.shape[0] != M)
      return fail("operand 'initial_states': expected a leading dimension of "
                  "M = " +
                  std::to_string(M) + ", found shape " +
                  shapeText(initialStates.shape));
    std::vector<int64_t> sliceShape(initialStates.shape.begin() + 1,
                                    initialStates.shape.end());
    const size_t sliceSize = initialStates.data.size() / M;
    std::vector<oracle::GatedDeltaResult> runs(M);
    for (int64_t m = 0; m < M; ++m) {
      oracle::GatedDeltaArgs s = base;
      s.initialState = oracle::Tensor(sliceShape);
      std::copy(initialStates.data.begin() + m * sliceSize,
                initialStates.data.begin() + (m + 1) * sliceSize,
                s.initialState.data.begin());
      if (ms.decayScales.empty()) {
        s.g = ms.gates[m];
      } else {
        for (double &x : s.g.data)
          x *= ms.decayScales[m];
      }
      oracle::Status st = oracle::gatedDelta(s, runs[m]);
      if (!st.ok())
        return fail("oracle (scale " + std::to_string(m) +
                    "): " + st.message);
    }
    const std::vector<int64_t> &os = runs[0].o.shape; // [B, T, HV, V]
    if (os.size() != 4)
      return fail("unexpected output rank from the oracle");
    const int64_t V = os[3];
    if (ms.combine == oracle::Combine::Gated) {
      std::vector<int64_t> want = {os[0], os[1], os[2], M};
      if (ms.z.shape != want)
        return fail("operand 'z': expected shape " + shapeText(want) +
                    ", found " + shapeText(ms.z.shape));
    }
    r.o = oracle::Tensor(os);
    for (int64_t m = 0; m < M; ++m)
      for (size_t i = 0; i < r.o.data.size(); ++i) {
        double w = ms.combine == oracle::Combine::Sum
                       ? 1.0
                       : oracle::sigmoid(ms.z.data[(i / V) * M + m]);
        r.o.data[i] += w * runs[m].o.data[i];
      }
    std::vector<int64_t> fs = runs[0].finalState.shape;
    fs.insert(fs.begin(), M);
    r.finalStates = oracle::Tensor(fs);
    const size_t per = runs[0].finalState.data.size();
    for (int64_t m = 0; m < M; ++m)
      std::copy(runs[m].finalState.data.begin(), runs[m].finalState.data.end(),
                r.finalStates.data.begin() + m * per);
  }
  if (!store(op.getO(), std::move(r.o)))
    return false;
  if (op.getFinalStates() &&
      !store(op.getFinalStates(), std::move(r.finalStates)))
    return false;
  return true;
}

bool Evaluator::evalConstant(arith::ConstantOp op) {
  Attribute value = op.getValue();
  oracle::Tensor t;
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    auto type = dyn_cast<RankedTensorType>(dense.getType());
    if (!type || !type.hasStaticShape())
      return fail("constant of type " + str(dense.getType()) +
                  " is not a statically shaped ranked tensor");
    t.shape.assign(type.getShape().begin(), type.getShape().end());
    t.data.reserve(type.getNumElements());
    Type elem = type.getElementType();
    if (isa<FloatType>(elem)) {
      for (llvm::APFloat x : dense.getValues<llvm::APFloat>())
        t.data.push_back(toDouble(x));
    } else if (isa<IntegerType>(elem) || elem.isIndex()) {
      bool unsignedBit = elem.isInteger(1) ||
                         (isa<IntegerType>(elem) && elem.isUnsignedInteger());
      for (const llvm::APInt &x : dense.getValues<llvm::APInt>())
        t.data.push_back(unsignedBit ? static_cast<double>(x.getZExtValue())
                                     : static_cast<double>(x.getSExtValue()));
    } else {
      return fail("constant elements of type " + str(elem) +
                  " are not supported");
    }
  } else if (auto f = dyn_cast<FloatAttr>(value)) {
    t.data.push_back(toDouble(f.getValue()));
  } else if (auto i = dyn_cast<IntegerAttr>(value)) {
    t.data.push_back(static_cast<double>(i.getValue().getSExtValue()));
  } else {
    return fail("only dense float / integer constants are supported, found " +
                str(op.getType()));
  }
  env[op.getResult()] = std::move(t);
  return true;
}

bool Evaluator::evalEmpty(Operation *op) {
  if (op->getNumResults() != 1)
    return fail("expected one result");
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || !type.hasStaticShape())
    return fail("result type " + str(op->getResult(0).getType()) +
                " is not a statically shaped ranked tensor");
  env[op->getResult(0)] = oracle::Tensor(
      std::vector<int64_t>(type.getShape().begin(), type.getShape().end()));
  return true;
}

/// A static slice (offsets, sizes, strides all constant), rank-reducing or
/// not: copies the selected elements in row-major order of the slice.
bool Evaluator::evalExtractSlice(tensor::ExtractSliceOp op) {
  const oracle::Tensor *src = get(op.getSource());
  if (!src)
    return false;
  if (!op.getOffsets().empty() || !op.getSizes().empty() ||
      !op.getStrides().empty())
    return fail("only static offsets, sizes and strides are supported");
  ArrayRef<int64_t> offsets = op.getStaticOffsets(),
                    sizes = op.getStaticSizes(),
                    strides = op.getStaticStrides();
  auto type = cast<RankedTensorType>(op.getResult().getType());
  oracle::Tensor out(
      std::vector<int64_t>(type.getShape().begin(), type.getShape().end()));
  int64_t rank = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> index(rank, 0), srcIndex(rank);
  for (int64_t n = 0; n < out.numel(); ++n) {
    for (int64_t d = 0; d < rank; ++d)
      srcIndex[d] = offsets[d] + index[d] * strides[d];
    out.data[n] = src->at(srcIndex);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[d] < sizes[d])
        break;
      index[d] = 0;
    }
  }
  env[op.getResult()] = std::move(out);
  return true;
}

std::string Evaluator::bind(func::FuncOp f,
                            const std::vector<std::vector<double>> &args) {
  if (f.isExternal())
    return "function '" + f.getSymName().str() + "' has no body";
  {
    // Verify first: the accessors below assume a verified op. Diagnostics
    // are captured into the message instead of being printed.
    std::string diags;
    ScopedDiagnosticHandler handler(f->getContext(), [&](Diagnostic &d) {
      if (!diags.empty())
        diags += "\n";
      diags += str(d.getLocation()) + ": " + d.str();
      return success();
    });
    if (failed(mlir::verify(f)))
      return "function '" + f.getSymName().str() +
             "' does not verify: " + diags;
  }
  if (!f.getBody().hasOneBlock())
    return "function '" + f.getSymName().str() +
           "': expected a single-block body";
  Block &block = f.getBody().front();
  if (args.size() != block.getNumArguments())
    return "function '" + f.getSymName().str() + "' takes " +
           std::to_string(block.getNumArguments()) + " arguments, " +
           std::to_string(args.size()) + " given";
  for (BlockArgument arg : block.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape())
      return "argument #" + std::to_string(i) + ": type " +
             str(arg.getType()) +
             " is not a statically shaped ranked tensor";
    if (static_cast<int64_t>(args[i].size()) != type.getNumElements())
      return "argument #" + std::to_string(i) + ": expected " +
             std::to_string(type.getNumElements()) + " values for " +
             str(type) + ", found " + std::to_string(args[i].size());
    oracle::Tensor t;
    t.shape.assign(type.getShape().begin(), type.getShape().end());
    t.data = args[i];
    env[arg] = std::move(t);
  }
  return "";
}

std::string Evaluator::run(func::FuncOp f,
                           const std::vector<std::vector<double>> &args,
                           std::vector<std::vector<double>> &results) {
  if (std::string e = bind(f, args); !e.empty())
    return e;
  Block &block = f.getBody().front();
  for (Operation &opRef : block) {
    Operation *op = &opRef;
    current = op;
    bool ok = true;
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<std::vector<double>> out;
      for (Value v : ret.getOperands()) {
        const oracle::Tensor *t = get(v);
        if (!t)
          return error;
        out.push_back(t->data);
      }
      results = std::move(out);
      return "";
    }
    if (auto g = dyn_cast<mlir::kda::GatedDeltaOp>(op))
      ok = evalGatedDelta(g);
    else if (auto g = dyn_cast<mlir::kda::GatedDeltaGradOp>(op))
      ok = evalGatedDeltaGrad(g);
    else if (auto g = dyn_cast<mlir::kda::GateOp>(op))
      ok = evalGate(g);
    else if (auto d = dyn_cast<mlir::kda::DecodeStepOp>(op))
      ok = evalDecodeStep(d);
    else if (auto w = dyn_cast<mlir::kda::WindowAttentionOp>(op))
      ok = evalWindow(w);
    else if (auto h = dyn_cast<mlir::kda::HybridOp>(op))
      ok = evalHybrid(h);
    else if (auto m = dyn_cast<mlir::kda::MultiScaleOp>(op))
      ok = evalMultiScale(m);
    else if (auto c = dyn_cast<arith::ConstantOp>(op))
      ok = evalConstant(c);
    else if (op->getName().getStringRef() == "tensor.empty")
      ok = evalEmpty(op);
    else if (auto e = dyn_cast<tensor::ExtractSliceOp>(op))
      ok = evalExtractSlice(e);
    else if (auto c = dyn_cast<tensor::CastOp>(op)) {
      // Only the static type changes: the values are the source's.
      const oracle::Tensor *src = get(c.getSource());
      ok = src != nullptr;
      if (ok)
        env[c.getResult()] = *src;
    } else
      return "unsupported operation '" +
             op->getName().getStringRef().str() + "' at " +
             str(op->getLoc()) +
             ": the oracle evaluator knows kda.gated_delta, "
             "kda.gated_delta_grad, kda.gate, "
             "kda.decode_step, kda.window_attention, kda.hybrid, "
             "kda.multi_scale, arith.constant, tensor.empty, "
             "tensor.extract_slice (static), tensor.cast and func.return";
    if (!ok)
      return error;
  }
  return "function '" + f.getSymName().str() + "' has no func.return";
}

} // namespace

std::string evaluateWithOracle(func::FuncOp f,
                               const std::vector<std::vector<double>> &args,
                               std::vector<std::vector<double>> &results) {
  Evaluator e;
  return e.run(f, args, results);
}

} // namespace kda::run
