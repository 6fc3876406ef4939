//===- KdaOps.cpp - kda operations and their verifiers --------------------===//
//
// Every verifier speaks in the terms of SPEC.md: named dimensions (B, T, H,
// K, HV, V, N, ...) are bound by the first operand that carries them and
// checked against every later one, so a diagnostic says which operand, which
// dimension, what was expected and where that expectation came from.
//
//===----------------------------------------------------------------------===//

#include "dialect/KdaOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>

using namespace mlir;
using namespace mlir::kda;

//===----------------------------------------------------------------------===//
// Custom assembly: enum keywords right after the op name
//===----------------------------------------------------------------------===//

/// `kda.gated_delta delta ...`: the enum as a bare keyword (the attribute's
/// own printer would add a second space, made for `#kda<update delta>`).
template <typename EnumAttrT>
static ParseResult parseEnumKeyword(OpAsmParser &parser, EnumAttrT &attr) {
  using EnumT = decltype(std::declval<EnumAttrT>().getValue());
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<EnumT> value = symbolizeEnum<EnumT>(keyword);
  if (!value) {
    InFlightDiagnostic diag = parser.emitError(loc);
    diag << "unknown " << EnumAttrT::getMnemonic() << " '" << keyword
         << "', expected one of:";
    // Enum cases are numbered from 0; stringify is empty past the last one.
    for (uint32_t i = 0; !stringifyEnum(static_cast<EnumT>(i)).empty(); ++i)
      diag << (i ? ", " : " ") << stringifyEnum(static_cast<EnumT>(i));
    return diag;
  }
  attr = EnumAttrT::get(parser.getContext(), *value);
  return success();
}

template <typename EnumAttrT>
static void printEnumKeyword(OpAsmPrinter &printer, Operation *,
                             EnumAttrT attr) {
  printer << stringifyEnum(attr.getValue());
}

#include "dialect/KdaInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "dialect/KdaOps.cpp.inc"

namespace {

/// Element types the checks accept, spelled for diagnostics.
enum class ElemKind { Activation, GateValue, Float32, State, Integer };

bool isAllowed(Type t, ElemKind kind) {
  switch (kind) {
  case ElemKind::Activation: // q, k, v, o: what the reference kernels take
  case ElemKind::GateValue:  // g, beta, z, A_log, dt_bias
    return t.isF32() || t.isBF16() || t.isF16();
  case ElemKind::Float32:
    return t.isF32();
  case ElemKind::State: // the recurrent state: fp32, or bf16 as an option
    return t.isF32() || t.isBF16();
  case ElemKind::Integer:
    return t.isSignlessInteger(32) || t.isSignlessInteger(64);
  }
  return false;
}

StringRef describe(ElemKind kind) {
  switch (kind) {
  case ElemKind::Activation:
  case ElemKind::GateValue:
    return "f32, bf16 or f16";
  case ElemKind::Float32:
    return "f32";
  case ElemKind::State:
    return "f32 or bf16";
  case ElemKind::Integer:
    return "i32 or i64";
  }
  return "";
}

std::string formatDims(ArrayRef<StringRef> dims) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(dims, os);
  os << "]";
  return s;
}

/// A value the verifier checks: an operand or a result, by its kernel ABI
/// name (and an index for the entries of a variadic operand).
struct Role {
  StringRef kind; // "operand" or "result"
  std::string name;
  std::optional<size_t> index;
  /// How diagnostics say it: "operand 'q'", "operand 'gates'[1]".
  std::string text() const {
    std::string s = (kind + " '" + name + "'").str();
    if (index)
      s += "[" + std::to_string(*index) + "]";
    return s;
  }
  /// Its kernel argument's name: "q", "gates1".
  std::string abiName() const {
    return index ? name + std::to_string(*index) : name;
  }
};

/// Binds named dimensions to sizes and checks later uses against them.
class ShapeChecker {
public:
  explicit ShapeChecker(Operation *op) : op(op) {}

  /// Checks that `value` has rank dims.size() and an allowed element type,
  /// binding or checking each named dimension. `role` names the value: its
  /// kernel ABI name and how diagnostics say it ("operand 'q'", "result
  /// 'o'"); recorded for kda::nameDimensions.
  LogicalResult check(const Role &role, Value value, ArrayRef<StringRef> dims,
                      ElemKind kind) {
    if (dimensionRecorder)
      (*dimensionRecorder)[value] = {
          role.abiName(), SmallVector<std::string>(dims.begin(), dims.end())};
    return check(role.text(), value.getType(), dims, kind);
  }

  /// Set while kda::nameDimensions re-runs a verifier to learn its names.
  static thread_local DimensionNames *dimensionRecorder;

  LogicalResult check(StringRef what, Type type, ArrayRef<StringRef> dims,
                      ElemKind kind) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return op->emitOpError() << what << ": expected a ranked tensor, found "
                               << type;
    if (tensor.getRank() != static_cast<int64_t>(dims.size()))
      return op->emitOpError()
             << what << ": expected rank " << dims.size() << " "
             << formatDims(dims) << ", found rank " << tensor.getRank() << " ("
             << type << ")";
    if (!isAllowed(tensor.getElementType(), kind))
      return op->emitOpError()
             << what << ": expected element type " << describe(kind)
             << ", found " << tensor.getElementType();
    for (auto [axis, name] : llvm::enumerate(dims))
      if (failed(bind(what, axis, name, tensor.getDimSize(axis))))
        return failure();
    return success();
  }

  /// Binds `name` to `size` (from `what`, axis `axis`) or checks it.
  LogicalResult bind(StringRef what, size_t axis, StringRef name,
                     int64_t size) {
    if (ShapedType::isDynamic(size))
      return success(); // nothing to check statically
    auto it = sizes.find(name);
    if (it == sizes.end()) {
      sizes[name] = {size, what.str(), axis};
      return success();
    }
    if (it->second.size != size)
      return op->emitOpError()
             << what << ": dimension " << axis << " (" << name << ") is "
             << size << ", but " << it->second.source << " has " << name
             << " = " << it->second.size;
    return success();
  }

  /// The static size bound to `name`, if any.
  std::optional<int64_t> get(StringRef name) const {
    auto it = sizes.find(name);
    if (it == sizes.end())
      return std::nullopt;
    return it->second.size;
  }

  /// Where `name` was bound (for diagnostics).
  std::string source(StringRef name) const {
    auto it = sizes.find(name);
    return it == sizes.end() ? std::string() : it->second.source;
  }

  /// Checks `multiple % base == 0` when both are static.
  LogicalResult checkMultiple(StringRef multiple, StringRef base) {
    auto m = get(multiple), b = get(base);
    if (m && b && (*b == 0 || *m % *b != 0))
      return op->emitOpError()
             << multiple << " = " << *m << " (from " << source(multiple)
             << ") must be a multiple of " << base << " = " << *b << " (from "
             << source(base) << ")";
    return success();
  }

  /// Rejects a static size of 0 for each of `names` (head counts, head
  /// dimensions): kernels divide by them and size tiles with them, so an
  /// empty one reaches a division by zero (SIGFPE) or an empty tile instead
  /// of a diagnostic. Token and batch counts may be 0 (nothing to do).
  LogicalResult checkNonEmpty(ArrayRef<StringRef> names) {
    for (StringRef name : names) {
      auto it = sizes.find(name);
      if (it != sizes.end() && it->second.size == 0)
        return op->emitOpError()
               << it->second.source << ": dimension " << it->second.axis
               << " (" << name << ") must be at least 1, found 0";
    }
    return success();
  }

private:
  struct Binding {
    int64_t size;
    std::string source; // the operand or result that bound it
    size_t axis;        // its axis there
  };
  Operation *op;
  llvm::StringMap<Binding> sizes;
};

thread_local DimensionNames *ShapeChecker::dimensionRecorder = nullptr;

/// Dimensions of the recurrences that must not be empty (checkNonEmpty).
constexpr StringRef kHeadsAndHeadDims[] = {"H", "HV", "K", "V"};

Role operandName(StringRef name) { return {"operand", name.str(), {}}; }
Role resultName(StringRef name) { return {"result", name.str(), {}}; }

Type elementTypeOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}

/// q, k and v: their shapes (dimension names per operand) and one shared
/// element type.
LogicalResult verifyQueryKeyValue(Operation *op, ShapeChecker &shapes, Value q,
                                  Value k, Value v, ArrayRef<StringRef> qDims,
                                  ArrayRef<StringRef> kDims,
                                  ArrayRef<StringRef> vDims) {
  if (failed(shapes.check(operandName("q"), q, qDims, ElemKind::Activation)) ||
      failed(shapes.check(operandName("k"), k, kDims, ElemKind::Activation)) ||
      failed(shapes.check(operandName("v"), v, vDims, ElemKind::Activation)))
    return failure();
  if (elementTypeOf(k) != elementTypeOf(q) ||
      elementTypeOf(v) != elementTypeOf(q))
    return op->emitOpError()
           << "operands 'q', 'k', 'v' must share one element type, found "
           << elementTypeOf(q) << ", " << elementTypeOf(k) << ", "
           << elementTypeOf(v);
  return success();
}

/// The output o [B, T, HV, V] (element type of v) and the optional initial
/// and final states (`stateDims`, one element type between them).
LogicalResult verifyOutputAndStates(Operation *op, ShapeChecker &shapes,
                                    Value v, Value o, Value initial,
                                    StringRef initialName, Value final,
                                    StringRef finalName,
                                    ArrayRef<StringRef> stateDims) {
  if (initial && failed(shapes.check(operandName(initialName), initial,
                                     stateDims, ElemKind::State)))
    return failure();
  if (failed(shapes.check(resultName("o"), o, {"B", "T", "HV", "V"},
                          ElemKind::Activation)))
    return failure();
  if (elementTypeOf(o) != elementTypeOf(v))
    return op->emitOpError() << "result 'o': expected element type "
                             << elementTypeOf(v) << " (that of 'v'), found "
                             << elementTypeOf(o);
  if (!final)
    return success();
  if (failed(shapes.check(resultName(finalName), final, stateDims,
                          ElemKind::State)))
    return failure();
  if (initial && elementTypeOf(final) != elementTypeOf(initial))
    return op->emitOpError()
           << "result '" << finalName << "': expected element type "
           << elementTypeOf(initial) << " (that of '" << initialName
           << "'), found " << elementTypeOf(final);
  return success();
}

/// The names of the state's last two axes in a layout.
SmallVector<StringRef, 2> stateAxes(StateLayout layout) {
  if (layout == StateLayout::v_major)
    return {"V", "K"};
  return {"K", "V"};
}

/// Dimension names of a gate operand given the leading (token) axes.
SmallVector<StringRef> gateDims(ArrayRef<StringRef> tokenAxes,
                                GateGranularity granularity) {
  SmallVector<StringRef> dims(tokenAxes);
  dims.push_back("HV");
  if (granularity == GateGranularity::channel)
    dims.push_back("K");
  return dims;
}

/// Shared rules of the recurrence prologue (gated_delta and decode_step):
/// gate, beta, A_log / dt_bias and the activation attributes. `tokenAxes` are
/// the leading axes of per-token operands ([B, T] or [N]).
LogicalResult verifyPrologue(Operation *op, ShapeChecker &shapes,
                             ArrayRef<StringRef> tokenAxes, StringRef gateName,
                             Value gate,
                             Value beta, Value aLog, Value dtBias,
                             UpdateRule update, BetaActivation betaActivation,
                             GateActivation gateActivation,
                             std::optional<double> lowerBound,
                             std::optional<GateGranularity> granularity) {
  if (gate) {
    if (!granularity) {
      int64_t rank = cast<ShapedType>(gate.getType()).getRank();
      SmallVector<StringRef> head = gateDims(tokenAxes, GateGranularity::head);
      SmallVector<StringRef> chan =
          gateDims(tokenAxes, GateGranularity::channel);
      return op->emitOpError()
             << operandName(gateName).text() << ": expected rank " << head.size() << " "
             << formatDims(head) << " (head-wise) or rank " << chan.size()
             << " " << formatDims(chan) << " (channel-wise), found rank "
             << rank;
    }
    if (failed(shapes.check(operandName(gateName), gate,
                            gateDims(tokenAxes, *granularity),
                            ElemKind::GateValue)))
      return failure();
  }

  if (beta) {
    if (update == UpdateRule::additive)
      return op->emitOpError()
             << "operand 'beta': the additive update writes k v^T with "
                "strength 1 and takes no beta (use update 'delta')";
    SmallVector<StringRef> dims(tokenAxes);
    dims.push_back("HV");
    if (failed(shapes.check(operandName("beta"), beta, dims,
                            ElemKind::GateValue)))
      return failure();
  } else if (betaActivation != BetaActivation::none) {
    return op->emitOpError()
           << "attribute 'beta_activation' = "
           << stringifyBetaActivation(betaActivation)
           << " needs the 'beta' operand (the logits it activates)";
  }

  bool activated = gateActivation != GateActivation::none;
  if (activated && !gate)
    return op->emitOpError()
           << "attribute 'gate_activation' = "
           << stringifyGateActivation(gateActivation)
           << " needs the '" << gateName
           << "' operand (the raw gates it activates)";
  if (!activated && (aLog || dtBias))
    return op->emitOpError()
           << "operand '" << (aLog ? "A_log" : "dt_bias")
           << "' is only meaningful with a 'gate_activation' (found none)";
  if (aLog && failed(shapes.check(operandName("A_log"), aLog, {"HV"},
                                  ElemKind::GateValue)))
    return failure();
  if (dtBias && granularity) {
    SmallVector<StringRef> dims = {"HV"};
    if (*granularity == GateGranularity::channel)
      dims.push_back("K");
    if (failed(shapes.check(operandName("dt_bias"), dtBias, dims,
                            ElemKind::GateValue)))
      return failure();
  }

  if (gateActivation == GateActivation::lower_bound) {
    if (!lowerBound)
      return op->emitOpError() << "gate_activation = lower_bound needs the "
                                  "'lower_bound' attribute (in [-5, 0))";
    if (!(*lowerBound >= -5.0 && *lowerBound < 0.0))
      return op->emitOpError()
             << "attribute 'lower_bound': expected a value in [-5, 0), found "
             << *lowerBound;
  } else if (lowerBound) {
    return op->emitOpError()
           << "attribute 'lower_bound' is only meaningful with "
              "gate_activation = lower_bound (found "
           << stringifyGateActivation(gateActivation) << ")";
  }
  return success();
}

LogicalResult verifyScale(Operation *op, std::optional<double> scale) {
  if (scale && !(std::isfinite(*scale) && *scale > 0.0))
    return op->emitOpError()
           << "attribute 'scale': expected a finite positive value, found "
           << *scale;
  return success();
}

/// Varlen operand: rank 1 integers [N + 1], which requires B = 1.
LogicalResult verifyCuSeqlens(Operation *op, ShapeChecker &shapes,
                              Value cuSeqlens) {
  if (!cuSeqlens)
    return success();
  if (failed(shapes.check(operandName("cu_seqlens"), cuSeqlens, {"N+1"},
                          ElemKind::Integer)))
    return failure();
  // B as bound by every operand checked so far (q's B may be dynamic while
  // k's or v's is not); binding B = 1 then holds later ones (o) to it.
  if (auto b = shapes.get("B"); b && *b != 1)
    return op->emitOpError()
           << "operand 'cu_seqlens': variable-length batches pack every "
              "sequence into one row, so B must be 1, found B = "
           << *b << " (from " << shapes.source("B") << ")";
  if (failed(shapes.bind(operandName("cu_seqlens").text(), 0, "B", 1)))
    return failure();
  int64_t n1 = cast<ShapedType>(cuSeqlens.getType()).getDimSize(0);
  if (!ShapedType::isDynamic(n1)) {
    if (n1 < 2)
      return op->emitOpError()
             << "operand 'cu_seqlens': expected at least 2 offsets (N + 1 "
                "with N >= 1 sequences), found "
             << n1;
    if (failed(shapes.bind(operandName("cu_seqlens").text(), 0, "N", n1 - 1)))
      return failure();
  }
  return success();
}

/// Tile attribute rules that depend on the op (the attribute verifies its
/// own fields).
LogicalResult verifyTileAgainst(Operation *op, std::optional<TileAttr> tile,
                                ShapeChecker &shapes) {
  if (!tile || !*tile)
    return success();
  auto v = shapes.get("V");
  if (!v || tile->getVBlock() == 0)
    return success();
  if (tile->getVBlock() > *v)
    return op->emitOpError()
           << "attribute 'tile': v_block = " << tile->getVBlock()
           << " exceeds V = " << *v;
  // Programs split V into equal blocks; a remainder would be left unwritten.
  if (*v % tile->getVBlock() != 0)
    return op->emitOpError()
           << "attribute 'tile': v_block = " << tile->getVBlock()
           << " must divide V = " << *v << " (from " << shapes.source("V")
           << ")";
  return success();
}

std::optional<GateGranularity> granularityFromRank(Value gate,
                                                   int64_t headWiseRank) {
  if (!gate)
    return std::nullopt;
  int64_t rank = cast<ShapedType>(gate.getType()).getRank();
  if (rank == headWiseRank)
    return GateGranularity::head;
  if (rank == headWiseRank + 1)
    return GateGranularity::channel;
  return std::nullopt;
}

double defaultScale(Value q) {
  int64_t k = cast<ShapedType>(q.getType()).getShape().back();
  return ShapedType::isDynamic(k) ? 0.0 : 1.0 / std::sqrt(double(k));
}

} // namespace

//===----------------------------------------------------------------------===//
// GatedDeltaOp
//===----------------------------------------------------------------------===//

namespace {
/// What kda.gated_delta and kda.gated_delta_grad check alike: q, k, v, the
/// head counts, the prologue (gate, beta, A_log, dt_bias and their
/// activations), the scale and the sequences (N from cu_seqlens or B).
template <typename RecurrenceOp>
LogicalResult verifyRecurrenceInputs(RecurrenceOp op, ShapeChecker &shapes) {
  Operation *o = op.getOperation();
  if (failed(verifyQueryKeyValue(o, shapes, op.getQ(), op.getK(), op.getV(),
                                 {"B", "T", "H", "K"}, {"B", "T", "H", "K"},
                                 {"B", "T", "HV", "V"})) ||
      failed(shapes.checkNonEmpty(kHeadsAndHeadDims)) ||
      failed(shapes.checkMultiple("HV", "H")))
    return failure();
  std::optional<double> lowerBound;
  if (auto lb = op.getLowerBound())
    lowerBound = lb->convertToDouble();
  if (failed(verifyPrologue(o, shapes, {"B", "T"}, "gate", op.getGate(),
                            op.getBeta(), op.getALog(), op.getDtBias(),
                            op.getUpdate(), op.getBetaActivation(),
                            op.getGateActivation(), lowerBound,
                            op.getGateGranularity())))
    return failure();
  std::optional<double> scale;
  if (auto s = op.getScale())
    scale = s->convertToDouble();
  if (failed(verifyScale(o, scale)))
    return failure();
  // N: number of sequences, from cu_seqlens when varlen, else B.
  if (op.getCuSeqlens())
    return verifyCuSeqlens(o, shapes, op.getCuSeqlens());
  if (auto b = shapes.get("B"))
    return shapes.bind("operand 'q'", 0, "N", *b);
  return success();
}
} // namespace

std::optional<GateGranularity> GatedDeltaOp::getGateGranularity() {
  return granularityFromRank(getGate(), /*headWiseRank=*/3);
}

double GatedDeltaOp::getScaleOrDefault() {
  if (auto s = getScale())
    return s->convertToDouble();
  return defaultScale(getQ());
}

LogicalResult GatedDeltaOp::verify() {
  Operation *op = getOperation();
  ShapeChecker shapes(op);
  if (failed(verifyRecurrenceInputs(*this, shapes)))
    return failure();

  SmallVector<StringRef, 2> axes = stateAxes(getStateLayout());
  SmallVector<StringRef> stateDims = {"N", "HV", axes[0], axes[1]};
  if (failed(verifyOutputAndStates(op, shapes, getV(), getO(),
                                   getInitialState(), "initial_state",
                                   getFinalState(), "final_state", stateDims)))
    return failure();

  std::optional<int64_t> interval = getBoundaryInterval();
  if (getBoundaryStates()) {
    if (!interval)
      return emitOpError() << "result 'boundary_states' needs the "
                              "'boundary_interval' attribute (tokens between "
                              "two recorded states)";
    if (*interval <= 0)
      return emitOpError()
             << "attribute 'boundary_interval': expected a positive number "
                "of tokens, found "
             << *interval;
    if (Value table = getBoundaryIndices()) {
      // Into pool slots: the table names them, the result is the pool.
      if (failed(shapes.check(operandName("boundary_indices"), table,
                              {"N", "NB"}, ElemKind::Integer)))
        return failure();
      SmallVector<StringRef> dims = {"S", "HV", axes[0], axes[1]};
      if (failed(shapes.check(resultName("boundary_states"),
                              getBoundaryStates(), dims, ElemKind::State)))
        return failure();
    } else {
      // NT is known statically only without varlen (ceil(T / interval)),
      // computed without forming T + interval - 1, which overflows for a
      // large interval.
      if (auto t = shapes.get("T"); t && !getCuSeqlens())
        if (failed(shapes.bind("'boundary_interval' and T", 0, "NT",
                               *t == 0 ? 0 : (*t - 1) / *interval + 1)))
          return failure();
      SmallVector<StringRef> dims = {"N", "NT", "HV", axes[0], axes[1]};
      if (failed(shapes.check(resultName("boundary_states"),
                              getBoundaryStates(), dims, ElemKind::State)))
        return failure();
    }
    if (auto tile = getTile(); tile && *interval % tile->getChunk() != 0)
      return emitOpError()
             << "attribute 'tile': chunk = " << tile->getChunk()
             << " must divide boundary_interval = " << *interval
             << " so that every recorded state falls on a chunk boundary";
  } else if (interval) {
    return emitOpError() << "attribute 'boundary_interval' is set but the "
                            "op has no 'boundary_states' result";
  } else if (getBoundaryIndices()) {
    return emitOpError() << "operand 'boundary_indices' names pool slots for "
                            "boundary states, but the op has no "
                            "'boundary_states' result";
  }
  // Rules across dimensions again, now that every operand and result has
  // bound its own (q's, k's, v's may be dynamic where a later one's is not).
  if (failed(shapes.checkNonEmpty(kHeadsAndHeadDims)) ||
      failed(shapes.checkMultiple("HV", "H")))
    return failure();
  if (auto b = shapes.get("B"); b && !getCuSeqlens())
    if (failed(shapes.bind(shapes.source("B"), 0, "N", *b)))
      return failure();
  return verifyTileAgainst(op, getTile(), shapes);
}

//===----------------------------------------------------------------------===//
// GatedDeltaGradOp
//===----------------------------------------------------------------------===//

std::optional<GateGranularity> GatedDeltaGradOp::getGateGranularity() {
  return granularityFromRank(getGate(), /*headWiseRank=*/3);
}

double GatedDeltaGradOp::getScaleOrDefault() {
  if (auto s = getScale())
    return s->convertToDouble();
  return defaultScale(getQ());
}

LogicalResult GatedDeltaGradOp::verify() {
  Operation *op = getOperation();
  ShapeChecker shapes(op);
  // The forward's operands, checked as kda.gated_delta checks them.
  if (failed(verifyRecurrenceInputs(*this, shapes)))
    return failure();
  SmallVector<StringRef, 2> axes = stateAxes(getStateLayout());
  SmallVector<StringRef> stateDims = {"N", "HV", axes[0], axes[1]};
  if (Value h0 = getInitialState())
    if (failed(shapes.check(operandName("initial_state"), h0, stateDims,
                            ElemKind::State)))
      return failure();

  // What the derived gradient takes (passes/GatedDeltaBackward.h).
  if (getUpdate() != UpdateRule::delta)
    return emitOpError() << "attribute 'update': the gradient is derived for "
                            "the delta rule only, found "
                         << stringifyUpdateRule(getUpdate());
  if (!getGate())
    return emitOpError() << "operand 'gate' is required: the gradient is "
                            "derived for gated recurrences only";

  // The output gradients: d_o as the forward's o, d_final_state as a state.
  if (failed(shapes.check(operandName("d_o"), getDO(), {"B", "T", "HV", "V"},
                          ElemKind::Activation)))
    return failure();
  if (Value dEnd = getDFinalState())
    if (failed(shapes.check(operandName("d_final_state"), dEnd, stateDims,
                            ElemKind::State)))
      return failure();
  // Kept states: the forward's boundary states, one every states_interval
  // tokens of each sequence (NT = ceil(T / interval) without cu_seqlens).
  std::optional<int64_t> interval = getStatesInterval();
  if (Value kept = getChunkStates()) {
    if (!interval)
      return emitOpError() << "operand 'chunk_states' needs the "
                              "'states_interval' attribute (tokens between "
                              "two kept states)";
    if (*interval <= 0)
      return emitOpError() << "attribute 'states_interval': expected a "
                              "positive number of tokens, found "
                           << *interval;
    if (auto t = shapes.get("T"); t && !getCuSeqlens())
      if (failed(shapes.bind("'states_interval' and T", 0, "NT",
                             *t == 0 ? 0 : (*t - 1) / *interval + 1)))
        return failure();
    if (failed(shapes.check(operandName("chunk_states"), kept,
                            {"N", "NT", "HV", axes[0], axes[1]},
                            ElemKind::State)))
      return failure();
    if (auto tile = getTile(); tile && *tile && tile->getChunk() != *interval)
      return emitOpError()
             << "attribute 'tile': chunk = " << tile->getChunk()
             << " must equal states_interval = " << *interval
             << " (the backward reads the state before every chunk)";
  } else if (interval) {
    return emitOpError() << "attribute 'states_interval' is set but the op "
                            "has no 'chunk_states' operand";
  }

  // One gradient per input the forward reads, in that input's shape: f32,
  // or for q, k, v, gate and beta the input's own element type (what a
  // framework returns: FLA's gradients are its inputs' dtype), which the
  // kernels that write them convert to on their stores, saving a cast
  // kernel per gradient after the call.
  auto ownTypeOrF32 = [&](StringRef input, Value in, StringRef grad,
                          Value out) -> LogicalResult {
    Type want = cast<ShapedType>(in.getType()).getElementType();
    Type got = cast<ShapedType>(out.getType()).getElementType();
    if (got.isF32() || got == want)
      return success();
    return emitOpError() << "result '" << grad << "': element type " << got
                         << ", expected f32 or the element type of operand '"
                         << input << "' (" << want << ")";
  };
  if (failed(shapes.check(resultName("d_q"), getDQ(), {"B", "T", "H", "K"},
                          ElemKind::Activation)) ||
      failed(shapes.check(resultName("d_k"), getDK(), {"B", "T", "H", "K"},
                          ElemKind::Activation)) ||
      failed(shapes.check(resultName("d_v"), getDV(), {"B", "T", "HV", "V"},
                          ElemKind::Activation)) ||
      failed(ownTypeOrF32("q", getQ(), "d_q", getDQ())) ||
      failed(ownTypeOrF32("k", getK(), "d_k", getDK())) ||
      failed(ownTypeOrF32("v", getV(), "d_v", getDV())))
    return failure();
  SmallVector<StringRef> gateAxes;
  if (auto g = getGateGranularity())
    gateAxes = gateDims({"B", "T"}, *g);
  SmallVector<StringRef> dtAxes = {"HV"};
  if (getGateGranularity() == GateGranularity::channel)
    dtAxes.push_back("K");
  struct Pair {
    StringRef input, grad;
    Value in, out;
    SmallVector<StringRef> dims;
  };
  Pair pairs[] = {
      {"gate", "d_gate", getGate(), getDGate(), gateAxes},
      {"beta", "d_beta", getBeta(), getDBeta(), {"B", "T", "HV"}},
      {"initial_state", "d_initial_state", getInitialState(),
       getDInitialState(), stateDims},
      {"A_log", "d_A_log", getALog(), getD_ALog(), {"HV"}},
      {"dt_bias", "d_dt_bias", getDtBias(), getDDtBias(), dtAxes},
  };
  for (const Pair &p : pairs) {
    if (p.in && !p.out)
      return emitOpError() << "operand '" << p.input << "' needs its gradient, "
                           << "result '" << p.grad << "'";
    if (!p.in && p.out)
      return emitOpError() << "result '" << p.grad << "' is the gradient of '"
                           << p.input << "', but the op has no operand '"
                           << p.input << "'";
    // The gate's and beta's gradients may take their input's type; the
    // state's and the gate parameters' stay f32 (sums over a whole call).
    const bool ownType = p.grad == "d_gate" || p.grad == "d_beta";
    if (p.out &&
        failed(shapes.check(resultName(p.grad), p.out, p.dims,
                            ownType ? ElemKind::GateValue : ElemKind::Float32)))
      return failure();
    if (p.out && ownType && failed(ownTypeOrF32(p.input, p.in, p.grad, p.out)))
      return failure();
  }
  if (failed(shapes.checkNonEmpty(kHeadsAndHeadDims)) ||
      failed(shapes.checkMultiple("HV", "H")))
    return failure();
  if (auto b = shapes.get("B"); b && !getCuSeqlens())
    if (failed(shapes.bind(shapes.source("B"), 0, "N", *b)))
      return failure();
  return verifyTileAgainst(op, getTile(), shapes);
}

//===----------------------------------------------------------------------===//
// GateOp
//===----------------------------------------------------------------------===//

LogicalResult GateOp::verify() {
  Operation *op = getOperation();
  if (getActivation() == GateActivation::none)
    return emitOpError() << "attribute 'activation': expected softplus or "
                            "lower_bound (none would be the identity)";
  auto input = cast<RankedTensorType>(getInput().getType());
  bool channel = getGranularity() == GateGranularity::channel;
  int64_t minRank = channel ? 2 : 1;
  if (input.getRank() < minRank)
    return emitOpError() << "operand 'input': " << (channel ? "channel" : "head")
                         << "-wise gates need rank >= " << minRank
                         << (channel ? " [..., HV, K]" : " [..., HV]")
                         << ", found rank " << input.getRank();
  // Name the leading axes generically; only HV (and K) are constrained.
  SmallVector<std::string> leadingNames;
  int64_t leading = input.getRank() - minRank;
  for (int64_t i = 0; i < leading; ++i)
    leadingNames.push_back("d" + std::to_string(i));
  SmallVector<StringRef> leadingRefs(leadingNames.begin(), leadingNames.end());
  SmallVector<StringRef> dims = gateDims(leadingRefs, getGranularity());

  ShapeChecker shapes(op);
  std::optional<double> lowerBound;
  if (auto lb = getLowerBound())
    lowerBound = lb->convertToDouble();
  if (failed(verifyPrologue(op, shapes, leadingRefs, "input", getInput(),
                            /*beta=*/Value(), getALog(), getDtBias(),
                            UpdateRule::delta, BetaActivation::none,
                            getActivation(), lowerBound, getGranularity())))
    return failure();
  if (failed(shapes.check(resultName("result"), getResult(), dims,
                          ElemKind::Float32)))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// DecodeStepOp
//===----------------------------------------------------------------------===//

std::optional<GateGranularity> DecodeStepOp::getGateGranularity() {
  // [N, HV] / [N, HV, K], or with T tokens per sequence one rank more.
  const int64_t tokens =
      cast<RankedTensorType>(getQ().getType()).getRank() == 4 ? 1 : 0;
  return granularityFromRank(getGate(), /*headWiseRank=*/2 + tokens);
}

double DecodeStepOp::getScaleOrDefault() {
  if (auto s = getScale())
    return s->convertToDouble();
  return defaultScale(getQ());
}

MutableOperandRange DecodeStepOp::getDpsInitsMutable() {
  // o_init and state_pool are the last two operands.
  return MutableOperandRange(getOperation(), getOperation()->getNumOperands() - 2,
                             2);
}

LogicalResult DecodeStepOp::verify() {
  Operation *op = getOperation();
  ShapeChecker shapes(op);
  // One token per sequence ([N, H, K]) or T of them ([N, T, H, K], indices
  // [N, T]): the rank of q says which.
  const bool multi = cast<RankedTensorType>(getQ().getType()).getRank() == 4;
  SmallVector<StringRef, 4> lead = {"N"};
  if (multi)
    lead.push_back("T");
  auto dims = [&](std::initializer_list<StringRef> tail) {
    SmallVector<StringRef, 4> d(lead);
    d.append(tail.begin(), tail.end());
    return d;
  };
  if (failed(verifyQueryKeyValue(op, shapes, getQ(), getK(), getV(),
                                 dims({"H", "K"}), dims({"H", "K"}),
                                 dims({"HV", "V"}))))
    return failure();
  if (failed(shapes.checkNonEmpty(kHeadsAndHeadDims)))
    return failure();
  if (failed(shapes.checkMultiple("HV", "H")))
    return failure();
  std::optional<double> lowerBound;
  if (auto lb = getLowerBound())
    lowerBound = lb->convertToDouble();
  if (failed(verifyPrologue(op, shapes, lead, "gate", getGate(), getBeta(),
                            getALog(), getDtBias(), getUpdate(),
                            getBetaActivation(), getGateActivation(),
                            lowerBound, getGateGranularity())))
    return failure();
  std::optional<double> scale;
  if (auto s = getScale())
    scale = s->convertToDouble();
  if (failed(verifyScale(op, scale)))
    return failure();
  if (failed(shapes.check(operandName("indices"), getIndices(), lead,
                          ElemKind::Integer)))
    return failure();
  if (getReadIndices() &&
      failed(shapes.check(operandName("read_indices"), getReadIndices(), {"N"},
                          ElemKind::Integer)))
    return failure();
  if (failed(shapes.check(operandName("o_init"), getOInit(), dims({"HV", "V"}),
                          ElemKind::Activation)))
    return failure();
  if (elementTypeOf(getOInit()) != elementTypeOf(getV()))
    return emitOpError() << "operand 'o_init': expected element type "
                         << elementTypeOf(getV()) << " (that of 'v'), found "
                         << elementTypeOf(getOInit());
  SmallVector<StringRef, 2> axes = stateAxes(getStateLayout());
  if (failed(shapes.check(operandName("state_pool"), getStatePool(),
                          {"P", "HV", axes[0], axes[1]}, ElemKind::State)))
    return failure();
  if (Value readPool = getReadPool()) {
    if (failed(shapes.check(operandName("read_pool"), readPool,
                            {"PR", "HV", axes[0], axes[1]}, ElemKind::State)))
      return failure();
    if (elementTypeOf(readPool) != elementTypeOf(getStatePool()))
      return emitOpError() << "operand 'read_pool': expected element type "
                           << elementTypeOf(getStatePool())
                           << " (that of 'state_pool'), found "
                           << elementTypeOf(readPool);
  }
  // Again, now that every operand has bound HV (v's may be dynamic).
  if (failed(shapes.checkNonEmpty(kHeadsAndHeadDims)) ||
      failed(shapes.checkMultiple("HV", "H")))
    return failure();
  return verifyTileAgainst(op, getTile(), shapes);
}

//===----------------------------------------------------------------------===//
// WindowAttentionOp
//===----------------------------------------------------------------------===//

/// A hybrid mix's gate z: head-wise [B, T, heads] or channel-wise [B, T,
/// heads, V] (kda.hybrid's `gate`, kda.window_attention's `mix_gate`).
static LogicalResult verifyMixGate(Operation *op, ShapeChecker &shapes,
                                   Value z, StringRef name, StringRef heads) {
  int64_t rank = cast<ShapedType>(z.getType()).getRank();
  SmallVector<StringRef> dims = {"B", "T", heads};
  if (rank == 4)
    dims.push_back("V");
  else if (rank != 3)
    return op->emitOpError()
           << "operand '" << name << "': expected rank 3 [B, T, " << heads
           << "] (head-wise) or rank 4 [B, T, " << heads
           << ", V] (channel-wise), found rank " << rank;
  return shapes.check(operandName(name), z, dims, ElemKind::GateValue);
}

LogicalResult WindowAttentionOp::verify() {
  Operation *op = getOperation();
  ShapeChecker shapes(op);
  // Earlier keys: the key rows are a dimension S of their own (the ABI's
  // symbol too), at least the T query rows, of dense sequences.
  const bool earlier = getEarlierKeys();
  const StringRef keyRows = earlier ? "S" : "T";
  if (failed(verifyQueryKeyValue(op, shapes, getQ(), getK(), getV(), {"B", "T", "HQ", "K"},
                                 {"B", keyRows, "HK", "K"}, {"B", keyRows, "HV", "V"})))
    return failure();
  if (earlier) {
    if (getCuSeqlens())
      return emitOpError()
             << "attribute 'earlier_keys' takes dense sequences: no "
                "'cu_seqlens' operand (the keys before a packed sequence's "
                "queries would be another sequence's)";
    auto t = shapes.get("T"), rows = shapes.get("S");
    if (t && rows && *rows < *t)
      return emitOpError() << "operand 'k': dimension 1 (S, the key rows): "
                              "expected at least T = "
                           << *t << " (the query rows), found " << *rows;
  }
  if (failed(shapes.checkNonEmpty({"HQ", "HK", "HV", "K", "V"})))
    return failure();
  // Output heads: HO = max(HQ, HV); each head count must divide it.
  if (auto hq = shapes.get("HQ"), hv = shapes.get("HV"); hq && hv) {
    if (failed(shapes.bind("max(HQ, HV)", 0, "HO", std::max(*hq, *hv))))
      return failure();
    for (StringRef h : {"HQ", "HK", "HV"})
      if (failed(shapes.checkMultiple("HO", h)))
        return failure();
  }

  bool perOp = getWindow().has_value();
  bool perPosition = static_cast<bool>(getWindowSizes());
  if (perOp == perPosition)
    return emitOpError() << "expected exactly one window: the 'window' "
                            "attribute (per op) or the 'window_sizes' "
                            "operand (per position), found "
                         << (perOp ? "both" : "neither");
  // getWindow() is unsigned (I64Attr): read the signed value, or a negative
  // window would pass as a huge one.
  if (perOp && getWindowAttr().getInt() < 1)
    return emitOpError()
           << "attribute 'window': expected at least 1 position, found "
           << getWindowAttr().getInt();
  if (perPosition && failed(shapes.check(operandName("window_sizes"),
                                         getWindowSizes(), {"T"},
                                         ElemKind::Integer)))
    return failure();
  if (failed(verifyCuSeqlens(op, shapes, getCuSeqlens())))
    return failure();
  std::optional<double> scale;
  if (auto s = getScale())
    scale = s->convertToDouble();
  if (failed(verifyScale(op, scale)))
    return failure();
  if (failed(shapes.check(resultName("o"), getO(), {"B", "T", "HO", "V"},
                          ElemKind::Activation)))
    return failure();
  if (elementTypeOf(getO()) != elementTypeOf(getV()))
    return emitOpError() << "result 'o': expected element type "
                         << elementTypeOf(getV()) << " (that of 'v'), found "
                         << elementTypeOf(getO());
  // Again with HO from the result, when HQ or HV is dynamic.
  if (failed(shapes.checkNonEmpty({"HO", "V"})))
    return failure();
  for (StringRef h : {"HQ", "HK", "HV"})
    if (failed(shapes.checkMultiple("HO", h)))
      return failure();
  // The fused mix: the other branch x and, gated, its gate z.
  if (static_cast<bool>(getMix()) != static_cast<bool>(getMixLinear()))
    return emitOpError()
           << (getMix() ? "attribute 'mix' needs the 'mix_linear' operand "
                          "(the branch the window is mixed with)"
                        : "operand 'mix_linear' needs the 'mix' attribute "
                          "(#kda<combine sum> or #kda<combine gated>)");
  if (getMix()) {
    const bool gated = *getMix() == CombineMode::gated;
    if (gated != static_cast<bool>(getMixGate()))
      return emitOpError()
             << (gated ? "a gated mix needs the 'mix_gate' operand z [B, T, "
                         "HO] or [B, T, HO, V]"
                       : "operand 'mix_gate': a 'sum' mix takes no gate");
    if (getMixLinear().getType() != getO().getType())
      return emitOpError() << "operand 'mix_linear': expected type "
                           << getO().getType() << " (the result's), found "
                           << getMixLinear().getType();
    if (failed(shapes.check(operandName("mix_linear"), getMixLinear(),
                            {"B", "T", "HO", "V"}, ElemKind::Activation)))
      return failure();
    if (gated && failed(verifyMixGate(op, shapes, getMixGate(), "mix_gate",
                                      "HO")))
      return failure();
  } else if (getMixGate()) {
    return emitOpError() << "operand 'mix_gate' needs the 'mix' attribute "
                            "#kda<combine gated> and 'mix_linear'";
  }
  return verifyTileAgainst(op, getTile(), shapes);
}

//===----------------------------------------------------------------------===//
// HybridOp
//===----------------------------------------------------------------------===//

LogicalResult HybridOp::verify() {
  Operation *op = getOperation();
  ShapeChecker shapes(op);
  if (failed(shapes.check(resultName("o"), getO(), {"B", "T", "HV", "V"},
                          ElemKind::Activation)))
    return failure();
  size_t n = getBranches().size();
  if (n < 2)
    return emitOpError() << "expected at least 2 branches to combine, found "
                         << n;
  for (auto [i, branch] : llvm::enumerate(getBranches()))
    if (branch.getType() != getO().getType())
      return emitOpError() << "branch " << i << ": expected type "
                           << getO().getType() << " (the result's), found "
                           << branch.getType();
  if (getMode() == CombineMode::sum) {
    if (getZ())
      return emitOpError() << "operand 'gate': a 'sum' combination takes no "
                              "gate (use 'gated')";
    return success();
  }
  if (n != 2)
    return emitOpError() << "a 'gated' combination mixes exactly 2 branches "
                            "(sigmoid(z) * first + (1 - sigmoid(z)) * "
                            "second), found "
                         << n;
  if (!getZ())
    return emitOpError() << "a 'gated' combination needs the 'gate' operand z "
                            "[B, T, HV] or [B, T, HV, V]";
  return verifyMixGate(op, shapes, getZ(), "gate", "HV");
}

//===----------------------------------------------------------------------===//
// MultiScaleOp
//===----------------------------------------------------------------------===//

int64_t MultiScaleOp::getNumScales() {
  if (auto scales = getDecayScales())
    return scales->size();
  return getGates().size();
}

LogicalResult MultiScaleOp::verify() {
  Operation *op = getOperation();
  ShapeChecker shapes(op);
  if (failed(verifyQueryKeyValue(op, shapes, getQ(), getK(), getV(), {"B", "T", "H", "K"},
                                 {"B", "T", "H", "K"}, {"B", "T", "HV", "V"})))
    return failure();
  if (failed(shapes.checkNonEmpty(kHeadsAndHeadDims)))
    return failure();
  if (failed(shapes.checkMultiple("HV", "H")))
    return failure();

  size_t numGates = getGates().size();
  if (auto scales = getDecayScales()) {
    if (numGates != 1)
      return emitOpError() << "with 'decay_scales' expected exactly 1 gate "
                              "tensor (scaled per state), found "
                           << numGates;
    if (scales->size() < 2)
      return emitOpError() << "attribute 'decay_scales': expected at least 2 "
                              "scales, found "
                           << scales->size();
    for (auto [i, c] : llvm::enumerate(scales->getAsValueRange<FloatAttr>()))
      if (!(c.convertToDouble() >= 0.0) || !std::isfinite(c.convertToDouble()))
        return emitOpError()
               << "attribute 'decay_scales': scale " << i
               << " must be finite and >= 0 (a negative scale would grow the "
                  "state), found "
               << c.convertToDouble();
  } else if (numGates < 2) {
    return emitOpError() << "expected at least 2 gate tensors (one per "
                            "state) or 1 gate with 'decay_scales', found "
                         << numGates;
  }
  for (auto [i, gate] : llvm::enumerate(getGates())) {
    std::optional<GateGranularity> g = granularityFromRank(gate, 3);
    Role role{"operand", "gates", static_cast<size_t>(i)};
    std::string what = role.text();
    if (!g)
      return emitOpError() << what << ": expected rank 3 [B, T, HV] "
                           << "(head-wise) or rank 4 [B, T, HV, K] "
                              "(channel-wise), found rank "
                           << cast<ShapedType>(gate.getType()).getRank();
    if (gate.getType() != getGates()[0].getType())
      return emitOpError() << what << ": expected the type of gate 0, "
                           << getGates()[0].getType() << ", found "
                           << gate.getType();
    if (failed(shapes.check(role, gate, gateDims({"B", "T"}, *g),
                            ElemKind::GateValue)))
      return failure();
  }
  if (failed(verifyPrologue(op, shapes, {"B", "T"}, "gates", Value(),
                            getBeta(),
                            Value(), Value(), getUpdate(),
                            getBetaActivation(), GateActivation::none,
                            std::nullopt, std::nullopt)))
    return failure();
  std::optional<double> scale;
  if (auto s = getScale())
    scale = s->convertToDouble();
  if (failed(verifyScale(op, scale)))
    return failure();

  if (getCuSeqlens()) {
    if (failed(verifyCuSeqlens(op, shapes, getCuSeqlens())))
      return failure();
  } else if (auto b = shapes.get("B")) {
    if (failed(shapes.bind("operand 'q'", 0, "N", *b)))
      return failure();
  }
  if (failed(shapes.bind("the number of scales", 0, "M", getNumScales())))
    return failure();

  if (getMode() == CombineMode::gated) {
    if (!getZ())
      return emitOpError() << "a 'gated' combination needs the 'z' operand "
                              "[B, T, HV, M]";
    if (failed(shapes.check(operandName("z"), getZ(), {"B", "T", "HV", "M"},
                            ElemKind::GateValue)))
      return failure();
  } else if (getZ()) {
    return emitOpError() << "operand 'z': a 'sum' combination takes no gate";
  }

  SmallVector<StringRef, 2> axes = stateAxes(getStateLayout());
  SmallVector<StringRef> stateDims = {"M", "N", "HV", axes[0], axes[1]};
  if (failed(verifyOutputAndStates(op, shapes, getV(), getO(),
                                   getInitialStates(), "initial_states",
                                   getFinalStates(), "final_states",
                                   stateDims)))
    return failure();
  // Rules across dimensions again, now that every operand and result has
  // bound its own (q's, k's, v's may be dynamic where a later one's is not).
  if (failed(shapes.checkNonEmpty(kHeadsAndHeadDims)) ||
      failed(shapes.checkMultiple("HV", "H")))
    return failure();
  if (auto b = shapes.get("B"); b && !getCuSeqlens())
    if (failed(shapes.bind(shapes.source("B"), 0, "N", *b)))
      return failure();
  return verifyTileAgainst(op, getTile(), shapes);
}

//===----------------------------------------------------------------------===//
// Canonicalization
//===----------------------------------------------------------------------===//

namespace {

/// True if `v` is a constant tensor whose every element equals `value`.
bool isSplatConstant(Value v, double value) {
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || !attr.isSplat())
    return false;
  auto f = dyn_cast<FloatAttr>(attr.getSplatValue<Attribute>());
  return f && f.getValueAsDouble() == value;
}

/// A log-space gate of zeros decays nothing: the op without a gate is the
/// same computation and skips every exp in the kernel.
template <typename RecurrenceOp>
struct DropZeroGate : OpRewritePattern<RecurrenceOp> {
  using OpRewritePattern<RecurrenceOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(RecurrenceOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getGateActivation() != GateActivation::none ||
        !isSplatConstant(op.getGate(), 0.0))
      return failure();
    rewriter.modifyOpInPlace(op, [&] { op.getGateMutable().clear(); });
    return success();
  }
};

/// beta = 1 is the default of the delta rule.
template <typename RecurrenceOp>
struct DropUnitBeta : OpRewritePattern<RecurrenceOp> {
  using OpRewritePattern<RecurrenceOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(RecurrenceOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getBetaActivation() != BetaActivation::none ||
        !isSplatConstant(op.getBeta(), 1.0))
      return failure();
    rewriter.modifyOpInPlace(op, [&] { op.getBetaMutable().clear(); });
    return success();
  }
};

} // namespace

void GatedDeltaOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                               MLIRContext *context) {
  results.add<DropZeroGate<GatedDeltaOp>, DropUnitBeta<GatedDeltaOp>>(context);
}

void DecodeStepOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                               MLIRContext *context) {
  results.add<DropZeroGate<DecodeStepOp>, DropUnitBeta<DecodeStepOp>>(context);
}

//===----------------------------------------------------------------------===//
// Dimension names
//===----------------------------------------------------------------------===//

SmallVector<mlir::kda::KernelArgument>
mlir::kda::kernelArguments(Operation *op) {
  DimensionNames names = nameDimensions(op);
  SmallVector<KernelArgument> args;
  auto add = [&](Value v) {
    auto it = names.find(v);
    if (it != names.end())
      args.push_back({v, it->second.name, it->second.dims});
  };
  for (Value v : op->getOperands())
    add(v);
  for (Value v : op->getResults())
    add(v);
  return args;
}

DimensionNames mlir::kda::nameDimensions(Operation *op) {
  DimensionNames names;
  ShapeChecker::dimensionRecorder = &names;
  LogicalResult verified =
      llvm::TypeSwitch<Operation *, LogicalResult>(op)
          .Case<GatedDeltaOp, GatedDeltaGradOp, DecodeStepOp,
                WindowAttentionOp, GateOp, HybridOp, MultiScaleOp>([](auto typed) { return typed.verify(); })
          .Default([](Operation *) { return failure(); });
  ShapeChecker::dimensionRecorder = nullptr;
  if (failed(verified))
    names.clear();
  return names;
}
