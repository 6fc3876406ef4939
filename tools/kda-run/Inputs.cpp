//===- Inputs.cpp - argument roles and seeded random inputs ---------------===//

#include "tools/kda-run/Inputs.h"

#include "tools/kda-run/Npy.h"

#include "dialect/KdaOps.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

using namespace mlir;

namespace kda::run {

std::string roleName(Role role) {
  switch (role) {
  case Role::Q:
    return "q";
  case Role::K:
    return "k";
  case Role::V:
    return "v";
  case Role::Gate:
    return "gate";
  case Role::RawGate:
    return "raw_gate";
  case Role::Beta:
    return "beta";
  case Role::BetaLogits:
    return "beta_logits";
  case Role::InitialState:
    return "initial_state";
  case Role::CuSeqlens:
    return "cu_seqlens";
  case Role::ALog:
    return "A_log";
  case Role::DtBias:
    return "dt_bias";
  case Role::Indices:
    return "indices";
  case Role::ReadIndices:
    return "read_indices";
  case Role::StatePool:
    return "state_pool";
  case Role::OInit:
    return "o_init";
  case Role::WindowSizes:
    return "window_sizes";
  case Role::Z:
    return "z";
  case Role::Other:
    return "other";
  }
  return "?";
}

namespace {

//===----------------------------------------------------------------------===//
// Role of one use
//===----------------------------------------------------------------------===//

/// What one operand use says about the argument it reads.
struct UseInfo {
  Role role = Role::Other;
  std::string use;
  bool unitRows = false; // Q/K: the consumer does not normalise itself
  int64_t tokens = -1;
  int64_t poolSlots = -1;
  bool splitPool = false;
};

/// The ODS name of operand `operandNumber` of `op` (names in ODS order).
template <typename OpTy>
std::string odsName(OpTy op, unsigned operandNumber,
                    llvm::ArrayRef<const char *> names) {
  for (unsigned i = 0; i < names.size(); ++i) {
    auto [start, length] = op.getODSOperandIndexAndLength(i);
    if (operandNumber >= start && operandNumber < start + length)
      return names[i];
  }
  return "";
}

int64_t dimOf(Value v, unsigned axis) {
  auto t = dyn_cast<ShapedType>(v.getType());
  if (!t || !t.hasRank() || t.getRank() <= static_cast<int64_t>(axis) ||
      t.isDynamicDim(axis))
    return -1;
  return t.getDimSize(axis);
}

std::string useText(StringRef operand, Operation *op) {
  return ("operand '" + operand + "' of " + op->getName().getStringRef())
      .str();
}

/// The roles kda.gated_delta, its gradient and the decode step give their
/// common operands (q, k, v, gate, beta, A_log, dt_bias): true when `name`
/// is one of them.
template <typename RecurrenceOp>
bool recurrenceRole(RecurrenceOp op, StringRef name,
                    llvm::function_ref<void(Role)> set, UseInfo &info) {
  if (name == "q" || name == "k") {
    set(name == "q" ? Role::Q : Role::K);
    info.unitRows = !op.getQkL2norm();
  } else if (name == "v") {
    set(Role::V);
  } else if (name == "gate") {
    set(op.getGateActivation() != mlir::kda::GateActivation::none
            ? Role::RawGate
            : Role::Gate);
  } else if (name == "beta") {
    set(op.getBetaActivation() != mlir::kda::BetaActivation::none
            ? Role::BetaLogits
            : Role::Beta);
  } else if (name == "A_log") {
    set(Role::ALog);
  } else if (name == "dt_bias") {
    set(Role::DtBias);
  } else {
    return false;
  }
  return true;
}

UseInfo classify(OpOperand &operand) {
  Operation *op = operand.getOwner();
  unsigned n = operand.getOperandNumber();
  UseInfo info;
  std::string name;
  auto set = [&](Role role) {
    info.role = role;
    info.use = useText(name, op);
  };

  if (auto g = dyn_cast<mlir::kda::GatedDeltaOp>(op)) {
    name = odsName(g, n,
                   {"q", "k", "v", "gate", "beta", "initial_state",
                    "cu_seqlens", "A_log", "dt_bias", "boundary_indices"});
    if (recurrenceRole(g, name, set, info))
      return info;
    if (name == "initial_state") {
      set(Role::InitialState);
    } else if (name == "cu_seqlens") {
      set(Role::CuSeqlens);
      info.tokens = dimOf(g.getQ(), 1);
    } else if (name == "boundary_indices") {
      // Pool slots of the boundary states, distinct like decode's.
      set(Role::Indices);
      info.poolSlots = dimOf(g.getBoundaryStates(), 0);
    }
    return info;
  }
  if (auto g = dyn_cast<mlir::kda::GatedDeltaGradOp>(op)) {
    // The forward's operands as kda.gated_delta's; the output gradients
    // as values of v and of a state.
    name = odsName(g, n,
                   {"q", "k", "v", "d_o", "gate", "beta", "initial_state",
                    "cu_seqlens", "A_log", "dt_bias", "d_final_state",
                    "chunk_states"});
    if (recurrenceRole(g, name, set, info))
      return info;
    if (name == "d_o") {
      set(Role::V);
    } else if (name == "initial_state" || name == "d_final_state" ||
               name == "chunk_states") {
      set(Role::InitialState);
    } else if (name == "cu_seqlens") {
      set(Role::CuSeqlens);
      info.tokens = dimOf(g.getQ(), 1);
    }
    return info;
  }
  if (auto g = dyn_cast<mlir::kda::GateOp>(op)) {
    name = odsName(g, n, {"input", "A_log", "dt_bias"});
    if (name == "input")
      set(Role::RawGate);
    else if (name == "A_log")
      set(Role::ALog);
    else if (name == "dt_bias")
      set(Role::DtBias);
    return info;
  }
  if (auto d = dyn_cast<mlir::kda::DecodeStepOp>(op)) {
    name = odsName(d, n,
                   {"q", "k", "v", "gate", "beta", "A_log", "dt_bias",
                    "indices", "read_indices", "read_pool", "o_init",
                    "state_pool"});
    if (recurrenceRole(d, name, set, info))
      return info;
    if (name == "indices" || name == "read_indices") {
      set(name == "indices" ? Role::Indices : Role::ReadIndices);
      // Slots of the pool they index: read_indices index read_pool where
      // there is one; indices read from it too without read_indices.
      int64_t pool = dimOf(d.getStatePool(), 0);
      int64_t read = d.getReadPool() ? dimOf(d.getReadPool(), 0) : pool;
      info.poolSlots = name == "read_indices"   ? read
                       : d.getReadIndices()     ? pool
                       : (pool < 0 || read < 0) ? -1
                                                : std::min(pool, read);
      // One pool read and written: destinations and read slots apart.
      info.splitPool =
          static_cast<bool>(d.getReadIndices()) && !d.getReadPool();
    } else if (name == "o_init") {
      set(Role::OInit);
    } else if (name == "state_pool" || name == "read_pool") {
      set(Role::StatePool);
    }
    return info;
  }
  if (auto w = dyn_cast<mlir::kda::WindowAttentionOp>(op)) {
    name = odsName(w, n, {"q", "k", "v", "window_sizes", "cu_seqlens",
                          "mix_linear", "mix_gate"});
    if (name == "mix_gate") {
      set(Role::Z);
    } else if (name == "mix_linear") {
      info.use = useText(name, op); // role stays Other (normal values)
    } else if (name == "q" || name == "k") {
      set(name == "q" ? Role::Q : Role::K);
      info.unitRows = true; // window attention has no qk_l2norm
    } else if (name == "v") {
      set(Role::V);
    } else if (name == "window_sizes") {
      set(Role::WindowSizes);
      info.tokens = dimOf(w.getQ(), 1);
    } else if (name == "cu_seqlens") {
      set(Role::CuSeqlens);
      info.tokens = dimOf(w.getQ(), 1);
    }
    return info;
  }
  if (auto h = dyn_cast<mlir::kda::HybridOp>(op)) {
    name = odsName(h, n, {"branches", "z"});
    if (name == "z")
      set(Role::Z);
    else if (name == "branches")
      info.use = useText(name, op); // role stays Other (normal values)
    return info;
  }
  if (auto m = dyn_cast<mlir::kda::MultiScaleOp>(op)) {
    name = odsName(m, n,
                   {"q", "k", "v", "gates", "beta", "initial_states",
                    "cu_seqlens", "z"});
    if (name == "q" || name == "k") {
      set(name == "q" ? Role::Q : Role::K);
      info.unitRows = !m.getQkL2norm();
    } else if (name == "v") {
      set(Role::V);
    } else if (name == "gates") {
      set(Role::Gate); // multi_scale gates are always log-space
    } else if (name == "beta") {
      set(m.getBetaActivation() != mlir::kda::BetaActivation::none
              ? Role::BetaLogits
              : Role::Beta);
    } else if (name == "initial_states") {
      set(Role::InitialState);
    } else if (name == "cu_seqlens") {
      set(Role::CuSeqlens);
      info.tokens = dimOf(m.getQ(), 1);
    } else if (name == "z") {
      set(Role::Z);
    }
    return info;
  }
  return info; // not a kda op: Other
}

bool compatible(Role a, Role b) {
  auto in = [](Role r, std::initializer_list<Role> set) {
    return std::find(set.begin(), set.end(), r) != set.end();
  };
  return a == b || a == Role::Other || b == Role::Other ||
         (in(a, {Role::Q, Role::K}) && in(b, {Role::Q, Role::K})) ||
         (in(a, {Role::InitialState, Role::StatePool}) &&
          in(b, {Role::InitialState, Role::StatePool})) ||
         (in(a, {Role::V, Role::Z}) && in(b, {Role::V, Role::Z}));
}

std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

std::string argText(unsigned i, Role role) {
  return "argument #" + std::to_string(i) + " (" + roleName(role) + ")";
}

std::string shapeText(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// The multi-index of a row-major linear offset, as "[i, j, k]".
std::string indexText(ArrayRef<int64_t> shape, int64_t linear) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    int64_t n = shape[d] > 0 ? shape[d] : 1;
    idx[d] = linear % n;
    linear /= n;
  }
  return shapeText(idx);
}

std::string valueText(double x) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << x;
  return s;
}

//===----------------------------------------------------------------------===//
// Random numbers, identical on every standard library
//===----------------------------------------------------------------------===//

class Random {
public:
  explicit Random(uint64_t seed) : engine(seed) {}

  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine() >> 11) * 0x1p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

  /// Uniform integer in [0, n), n >= 1, without modulo bias.
  uint64_t below(uint64_t n) {
    uint64_t limit = std::numeric_limits<uint64_t>::max() -
                     std::numeric_limits<uint64_t>::max() % n;
    uint64_t x;
    do
      x = engine();
    while (x >= limit);
    return x % n;
  }

  /// Standard normal (Box-Muller, both variates used).
  double normal() {
    if (hasSpare) {
      hasSpare = false;
      return spare;
    }
    double u1 = 1.0 - uniform(); // (0, 1]
    double u2 = uniform();
    double r = std::sqrt(-2.0 * std::log(u1));
    double theta = 6.283185307179586476925286766559 * u2;
    spare = r * std::sin(theta);
    hasSpare = true;
    return r * std::cos(theta);
  }

private:
  std::mt19937_64 engine;
  bool hasSpare = false;
  double spare = 0.0;
};

/// Seed of argument `i`'s generator: splitmix64 of (seed, i).
uint64_t argumentSeed(uint64_t seed, unsigned i) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(i) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double sigmoid(double x) {
  if (x >= 0)
    return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

/// log(sigmoid(x)) = -softplus(-x), computed without cancellation.
double logSigmoid(double x) {
  if (x < -30.0)
    return x;
  return -std::log1p(std::exp(-x));
}

bool isIntegerRole(Role r) {
  return r == Role::CuSeqlens || r == Role::Indices ||
         r == Role::ReadIndices || r == Role::WindowSizes;
}

} // namespace

//===----------------------------------------------------------------------===//
// Sizes
//===----------------------------------------------------------------------===//

std::optional<int64_t> checkedNumElements(RankedTensorType type) {
  int64_t n = 1;
  for (int64_t d : type.getShape()) {
    if (ShapedType::isDynamic(d) || d < 0)
      return std::nullopt;
    std::optional<int64_t> next = llvm::checkedMul(n, d);
    if (!next)
      return std::nullopt;
    n = *next;
  }
  return n;
}

std::optional<int64_t> checkedByteSize(RankedTensorType type) {
  std::optional<int64_t> n = checkedNumElements(type);
  if (!n)
    return std::nullopt;
  Type elem = type.getElementType();
  // index has no bit width of its own (64 bits in kda's lowerings).
  int64_t width =
      elem.isIntOrFloat() ? (elem.getIntOrFloatBitWidth() + 7) / 8 : 8;
  return llvm::checkedMul(*n, width);
}

//===----------------------------------------------------------------------===//
// inferInputSpecs
//===----------------------------------------------------------------------===//

LogicalResult inferInputSpecs(func::FuncOp f, std::vector<InputSpec> &specs,
                              std::string &error) {
  specs.clear();
  // Every use of every argument, in program order (Value::getUses() lists
  // the most recent use first), so that the first use names the role.
  std::vector<std::vector<OpOperand *>> usesOf(f.getNumArguments());
  f.walk<WalkOrder::PreOrder>([&](Operation *op) {
    for (OpOperand &operand : op->getOpOperands())
      if (auto arg = dyn_cast<BlockArgument>(operand.get());
          arg && arg.getOwner()->getParentOp() == f.getOperation())
        usesOf[arg.getArgNumber()].push_back(&operand);
  });
  for (BlockArgument arg : f.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape()) {
      error = "argument #" + std::to_string(i) +
              ": expected a statically shaped ranked tensor, found " +
              typeString(arg.getType());
      specs.clear();
      return failure();
    }
    if (!checkedNumElements(type)) {
      error = "argument #" + std::to_string(i) + ": " +
              typeString(arg.getType()) +
              " has more elements than a 64-bit count holds";
      specs.clear();
      return failure();
    }
    Type elem = type.getElementType();
    if (!runnableElementType(elem)) {
      error = "argument #" + std::to_string(i) + ": " +
              typeString(arg.getType()) + ": kda-run handles " +
              kRunnableElementTypes + " elements";
      specs.clear();
      return failure();
    }

    InputSpec spec;
    spec.type = type;
    bool anyQK = false, allNormalise = true;
    for (OpOperand *use : usesOf[i]) {
      UseInfo info = classify(*use);
      if (info.role == Role::Other) {
        if (spec.use.empty())
          spec.use = info.use;
        continue;
      }
      if (!compatible(spec.role, info.role)) {
        error = "argument #" + std::to_string(i) + " is used as '" +
                roleName(spec.role) + "' (" + spec.use + ") and as '" +
                roleName(info.role) + "' (" + info.use +
                "): these roles need different values";
        specs.clear();
        return failure();
      }
      if (info.role == Role::Q || info.role == Role::K) {
        anyQK = true;
        allNormalise = allNormalise && !info.unitRows;
      }
      if (info.tokens >= 0) {
        if (spec.tokens >= 0 && spec.tokens != info.tokens) {
          error = "argument #" + std::to_string(i) + " (" +
                  roleName(info.role) + ") is used with T = " +
                  std::to_string(spec.tokens) + " (" + spec.use +
                  ") and T = " + std::to_string(info.tokens) + " (" +
                  info.use + ")";
          specs.clear();
          return failure();
        }
        spec.tokens = info.tokens;
      }
      if (info.poolSlots >= 0) {
        if (spec.poolSlots >= 0 && spec.poolSlots != info.poolSlots) {
          error = "argument #" + std::to_string(i) +
                  " (indices) is used with pools of P = " +
                  std::to_string(spec.poolSlots) + " (" + spec.use +
                  ") and P = " + std::to_string(info.poolSlots) + " (" +
                  info.use + ")";
          specs.clear();
          return failure();
        }
        spec.poolSlots = info.poolSlots;
        spec.splitPool = spec.splitPool || info.splitPool;
      }
      if (spec.role == Role::Other) {
        spec.role = info.role;
        spec.use = info.use;
      }
    }
    spec.unitRows = anyQK && !allNormalise;
    if (spec.role == Role::WindowSizes && spec.tokens < 0)
      spec.tokens = type.getDimSize(0);
    specs.push_back(std::move(spec));
  }
  return success();
}

bool runnableElementType(Type type) {
  return type.isF32() || type.isF16() || type.isBF16() || type.isF64() ||
         type.isSignlessInteger(32) || type.isSignlessInteger(64);
}

//===----------------------------------------------------------------------===//
// roundToElementType
//===----------------------------------------------------------------------===//

void roundToElementType(Type elementType, std::vector<double> &values) {
  if (elementType.isF64())
    return;
  if (elementType.isBF16() || elementType.isF16() || elementType.isF32()) {
    int precision = elementType.isBF16() ? 8 : elementType.isF16() ? 11 : 24;
    int minExp = elementType.isF16() ? -14 : -126;
    int maxExp = elementType.isF16() ? 15 : 127;
    for (double &x : values)
      x = npy::roundToBinary(x, precision, minExp, maxExp);
    return;
  }
  if (auto ft = dyn_cast<FloatType>(elementType)) {
    const llvm::fltSemantics &sem = ft.getFloatSemantics();
    for (double &x : values) {
      llvm::APFloat a(x);
      bool losesInfo = false;
      a.convert(sem, llvm::APFloat::rmNearestTiesToEven, &losesInfo);
      a.convert(llvm::APFloat::IEEEdouble(),
                llvm::APFloat::rmNearestTiesToEven, &losesInfo);
      x = a.convertToDouble();
    }
    return;
  }
  if (isa<IntegerType>(elementType) || elementType.isIndex())
    for (double &x : values)
      if (std::isfinite(x))
        x = std::nearbyint(x);
}

//===----------------------------------------------------------------------===//
// makeRandomInputs
//===----------------------------------------------------------------------===//

std::string makeRandomInputs(func::FuncOp f,
                             const std::vector<InputSpec> &specs,
                             uint64_t seed,
                             const std::vector<int64_t> &seqlens,
                             std::vector<std::vector<double>> &values) {
  values.clear();
  if (specs.size() != f.getNumArguments())
    return "makeRandomInputs: " + std::to_string(specs.size()) +
           " input specs for a function of " +
           std::to_string(f.getNumArguments()) + " arguments";
  std::vector<std::vector<double>> out(specs.size());
  for (unsigned i = 0; i < specs.size(); ++i) {
    const InputSpec &spec = specs[i];
    if (!spec.type || !spec.type.hasStaticShape())
      return argText(i, spec.role) +
             ": needs a statically shaped ranked tensor type";
    ArrayRef<int64_t> shape = spec.type.getShape();
    int64_t numel = spec.type.getNumElements();
    std::vector<double> &v = out[i];
    v.assign(static_cast<size_t>(numel), 0.0);
    Random rng(argumentSeed(seed, i));

    switch (spec.role) {
    case Role::Q:
    case Role::K: {
      for (double &x : v)
        x = rng.normal();
      int64_t k = shape.empty() ? 1 : shape.back();
      if (spec.unitRows && k > 0)
        for (int64_t r = 0; r < numel / k; ++r) {
          double ss = 0;
          for (int64_t c = 0; c < k; ++c)
            ss += v[r * k + c] * v[r * k + c];
          double norm = std::sqrt(ss);
          if (norm > 0)
            for (int64_t c = 0; c < k; ++c)
              v[r * k + c] /= norm;
        }
      break;
    }
    case Role::V:
    case Role::Z:
    case Role::Other:
    case Role::RawGate:
    case Role::BetaLogits:
      for (double &x : v)
        x = rng.normal();
      break;
    case Role::OInit:
      break; // zeros
    case Role::InitialState:
    case Role::StatePool:
      for (double &x : v)
        x = 0.1 * rng.normal();
      break;
    case Role::Beta:
      for (double &x : v)
        x = sigmoid(rng.normal());
      break;
    case Role::Gate:
      for (double &x : v)
        x = logSigmoid(rng.normal() + 2.0);
      break;
    case Role::ALog:
      for (double &x : v)
        x = std::log(rng.uniform(1.0, 16.0));
      break;
    case Role::DtBias:
      for (double &x : v)
        x = 0.5 * rng.normal();
      break;
    case Role::CuSeqlens: {
      if (shape.size() != 1 || shape[0] < 2)
        return argText(i, spec.role) + ": expected shape [N + 1] with N >= 1, "
                                       "found " +
               shapeText(shape);
      int64_t n = shape[0] - 1;
      int64_t t = spec.tokens;
      std::vector<int64_t> lengths;
      if (!seqlens.empty()) {
        if (static_cast<int64_t>(seqlens.size()) != n)
          return argText(i, spec.role) + ": " +
                 std::to_string(seqlens.size()) +
                 " sequence lengths given, but the type " +
                 typeString(spec.type) + " holds N = " + std::to_string(n) +
                 " sequences";
        int64_t sum = 0;
        for (int64_t len : seqlens) {
          if (len < 0)
            return argText(i, spec.role) + ": sequence length " +
                   std::to_string(len) + " is negative";
          if (__builtin_add_overflow(sum, len, &sum))
            return argText(i, spec.role) +
                   ": the sequence lengths sum to more than 2^63 - 1";
        }
        if (t >= 0 && sum != t)
          return argText(i, spec.role) +
                 ": the sequence lengths sum to " + std::to_string(sum) +
                 ", but the op has T = " + std::to_string(t) + " tokens";
        lengths = seqlens;
      } else {
        if (t < 0)
          return argText(i, spec.role) +
                 ": T is dynamic; give the sequence lengths";
        for (int64_t s = 0; s < n; ++s)
          lengths.push_back(t / n + (s < t % n ? 1 : 0));
      }
      v[0] = 0;
      for (int64_t s = 0; s < n; ++s)
        v[s + 1] = v[s] + static_cast<double>(lengths[s]);
      break;
    }
    case Role::Indices:
    case Role::ReadIndices: {
      // Every entry a distinct slot ([N], or [N, T] for several tokens).
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      int64_t p = spec.poolSlots;
      if (p < 0)
        return argText(i, spec.role) +
               ": the state pool size P is dynamic";
      // With read_indices, destinations come from [0, P/2) and read slots
      // from [P/2, P): no sequence reads another's destination.
      int64_t first = 0, count = p;
      if (spec.splitPool) {
        first = spec.role == Role::ReadIndices ? p / 2 : 0;
        count = spec.role == Role::ReadIndices ? p - p / 2 : p / 2;
      }
      if (n > count)
        return argText(i, spec.role) + ": " + std::to_string(n) +
               " sequences need distinct slots, but the state pool has only "
               "P = " +
               std::to_string(p) +
               (spec.splitPool ? " (destinations and read slots take half "
                                 "each)"
                               : "");
      // Partial Fisher-Yates over the slots [first, first + count).
      std::vector<int64_t> slots(static_cast<size_t>(count));
      std::iota(slots.begin(), slots.end(), first);
      for (int64_t s = 0; s < n; ++s) {
        int64_t j = s + static_cast<int64_t>(rng.below(count - s));
        std::swap(slots[s], slots[j]);
        v[s] = static_cast<double>(slots[s]);
      }
      if (n >= 4)
        v[rng.below(n)] = -1;
      break;
    }
    case Role::WindowSizes: {
      int64_t t = spec.tokens >= 0 ? spec.tokens
                                   : (shape.empty() ? 1 : shape[0]);
      if (t < 1)
        t = 1;
      for (double &x : v)
        x = static_cast<double>(1 + rng.below(static_cast<uint64_t>(t)));
      break;
    }
    }
    roundToElementType(spec.type.getElementType(), v);
  }
  values = std::move(out);
  return "";
}

//===----------------------------------------------------------------------===//
// validateInput
//===----------------------------------------------------------------------===//

std::string validateInput(const InputSpec &spec, unsigned argIndex,
                          const std::vector<double> &values) {
  std::string who = argText(argIndex, spec.role);
  if (!spec.type || !spec.type.hasStaticShape())
    return who + ": needs a statically shaped ranked tensor type";
  ArrayRef<int64_t> shape = spec.type.getShape();
  int64_t numel = spec.type.getNumElements();
  if (static_cast<int64_t>(values.size()) != numel)
    return who + ": expected " + std::to_string(numel) + " values (shape " +
           shapeText(shape) + ", " + typeString(spec.type) + "), found " +
           std::to_string(values.size());
  auto bad = [&](int64_t i, const std::string &why) {
    return who + ": element " + indexText(shape, i) + " = " +
           valueText(values[i]) + " " + why;
  };

  Type elem = spec.type.getElementType();
  bool integral = isIntegerRole(spec.role) || isa<IntegerType>(elem) ||
                  elem.isIndex();
  double lo = -0x1p63, hiExcl = 0x1p63;
  if (auto it = dyn_cast<IntegerType>(elem); it && it.getWidth() < 64) {
    if (it.getWidth() == 1) {
      lo = 0;
      hiExcl = 2;
    } else {
      lo = -std::ldexp(1.0, it.getWidth() - 1);
      hiExcl = -lo;
    }
  }
  for (int64_t i = 0; i < numel; ++i) {
    double x = values[i];
    if (!std::isfinite(x))
      return bad(i, "is not finite");
    if (integral && x != std::nearbyint(x))
      return bad(i, "is not an integer");
    if (integral && (x < lo || x >= hiExcl))
      return bad(i, "is out of range for " + typeString(elem));
  }

  switch (spec.role) {
  case Role::CuSeqlens: {
    if (numel < 1)
      return who + ": expected at least one offset";
    if (values[0] != 0)
      return bad(0, "must be 0 (the first sequence starts at token 0)");
    for (int64_t i = 1; i < numel; ++i)
      if (values[i] < values[i - 1])
        return bad(i, "is smaller than the previous offset " +
                          valueText(values[i - 1]) +
                          " (offsets must not decrease)");
    if (spec.tokens >= 0 && values[numel - 1] != spec.tokens)
      return bad(numel - 1, "must equal T = " + std::to_string(spec.tokens) +
                                " (the last offset ends the last sequence)");
    break;
  }
  case Role::ReadIndices: {
    // Range only: sequences may share a read slot (the oracle refuses one
    // that another sequence writes).
    for (int64_t i = 0; i < numel; ++i)
      if (values[i] >= 0 && spec.poolSlots >= 0 && values[i] >= spec.poolSlots)
        return bad(i, "is not a slot of the state pool (P = " +
                          std::to_string(spec.poolSlots) + ")");
    break;
  }
  case Role::Indices: {
    std::vector<int64_t> firstUse(
        spec.poolSlots > 0 ? static_cast<size_t>(spec.poolSlots) : 0, -1);
    for (int64_t i = 0; i < numel; ++i) {
      double x = values[i];
      if (x < 0)
        continue; // skipped sequence
      if (spec.poolSlots >= 0 && x >= spec.poolSlots)
        return bad(i, "is not a slot of the state pool (P = " +
                          std::to_string(spec.poolSlots) + ")");
      if (spec.poolSlots >= 0) {
        int64_t &prev = firstUse[static_cast<size_t>(x)];
        if (prev >= 0)
          return bad(i, "repeats element " + indexText(shape, prev) +
                            " (two sequences cannot share a slot)");
        prev = i;
      }
    }
    break;
  }
  case Role::Gate:
    // SPEC.md: a log-space gate is g <= 0 (alpha = exp(g) in (0, 1]); a
    // positive one grows the state, and the chunkwise form (whose exponents
    // are kept <= 0 by that rule) no longer computes the recurrence.
    for (int64_t i = 0; i < numel; ++i)
      if (values[i] > 0)
        return bad(i, "is positive: log-space gates must be <= 0 "
                      "(alpha = exp(g) <= 1; raw gates need a "
                      "gate_activation)");
    break;
  case Role::WindowSizes:
    for (int64_t i = 0; i < numel; ++i)
      if (values[i] < 1)
        return bad(i, "must be >= 1 (a window holds at least the token "
                      "itself)");
    break;
  default:
    break;
  }
  return "";
}

} // namespace kda::run
