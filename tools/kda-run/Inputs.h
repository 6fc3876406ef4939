//===- Inputs.h - argument roles and seeded random inputs -------*- C++ -*-===//
//
// kda-run feeds a func.func made of kda ops with inputs. This infers what each
// function argument is (q, k, gate, cu_seqlens, ...) from the kda operands it
// feeds, generates valid random values for it, and validates values a user
// gave instead (.npy files).
//
//===----------------------------------------------------------------------===//

#ifndef KDA_TOOLS_KDA_RUN_INPUTS_H
#define KDA_TOOLS_KDA_RUN_INPUTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kda::run {

/// What a function argument is, from the kda operand it feeds.
enum class Role {
  Q,            // q of gated_delta / decode_step / window_attention / multi_scale
  K,            // k of the same
  V,            // v of the same
  Gate,         // log-space gate (g <= 0): gate without gate_activation,
                // gates of multi_scale
  RawGate,      // raw gate: gate with gate_activation, input of kda.gate
  Beta,         // beta in (0, 1) (beta_activation = none)
  BetaLogits,   // beta logits (beta_activation != none)
  InitialState, // initial_state of gated_delta, initial_states of multi_scale
  CuSeqlens,    // cu_seqlens [N + 1]
  ALog,         // A_log [HV]
  DtBias,       // dt_bias
  Indices,      // indices [N] of decode_step
  ReadIndices,  // read_indices [N] of decode_step
  StatePool,    // state_pool of decode_step
  OInit,        // o_init of decode_step
  WindowSizes,  // window_sizes [T] of window_attention
  Z,            // z of hybrid (gated) and multi_scale (gated)
  Other         // anything else (hybrid branches, unused, non-kda uses)
};

/// The role's name as printed in messages: "q", "k", "v", "gate",
/// "raw_gate", "beta", "beta_logits", "initial_state", "cu_seqlens", "A_log",
/// "dt_bias", "indices", "read_indices", "state_pool", "o_init",
/// "window_sizes", "z", "other".
std::string roleName(Role role);

/// Everything known about one function argument.
struct InputSpec {
  Role role = Role::Other;
  mlir::RankedTensorType type;
  /// The use the role comes from, e.g. "operand 'q' of kda.gated_delta"
  /// (empty for an argument no kda op consumes).
  std::string use;
  /// Q / K only: generation L2-normalises every row of the last axis. True
  /// unless every consuming op normalises itself (qk_l2norm).
  bool unitRows = false;
  /// CuSeqlens / WindowSizes: T, the token count of the consuming op
  /// (dim 1 of its q); -1 if dynamic.
  int64_t tokens = -1;
  /// Indices / ReadIndices: P, the number of slots of the consuming
  /// decode_step's state_pool; -1 if dynamic.
  int64_t poolSlots = -1;
  /// Indices / ReadIndices of a decode_step with read_indices: generated
  /// destinations come from the first half of the pool and read slots from
  /// the second, so that no sequence reads another's destination.
  bool splitPool = false;
};

/// The element count of a static tensor type, or nullopt when a dimension is
/// dynamic or the product overflows int64 (getNumElements() wraps silently:
/// tensor<2^62 x 2^62 x ...> would be an empty buffer).
std::optional<int64_t> checkedNumElements(mlir::RankedTensorType type);
/// The same in bytes of its element type.
std::optional<int64_t> checkedByteSize(mlir::RankedTensorType type);
/// The element types kda-run generates, reads, passes and compares: f32,
/// f16, bf16, f64, i32 and i64 (anything else is refused by name before any
/// buffer is made).
bool runnableElementType(mlir::Type type);
inline constexpr const char *kRunnableElementTypes =
    "f32, f16, bf16, f64, i32 and i64";

/// Infers one InputSpec per argument of `f`, in order. Fails with `error`
/// set if an argument is not a statically shaped ranked tensor of float or
/// integer elements (whose element count fits in int64), or is used by two operands in incompatible roles
/// (compatible: equal roles, q with k, initial_state with state_pool, v with
/// z, and anything with Other; two cu_seqlens / window_sizes uses must agree
/// on T and two indices uses on P).
mlir::LogicalResult inferInputSpecs(mlir::func::FuncOp f,
                                    std::vector<InputSpec> &specs,
                                    std::string &error);

/// Seeded random values for every argument of `f` (specs from
/// inferInputSpecs), row-major, already rounded to each argument's element
/// type. Argument i draws from its own std::mt19937_64 seeded from (seed, i),
/// so one argument's values do not depend on the others' shapes. Normal
/// variates come from a Box-Muller transform written here (identical on
/// every standard library). `seqlens`: the lengths of the sequences for
/// cu_seqlens arguments (empty: an even split of T over the N the type
/// says). Returns "" or a message naming the argument.
///
///   q, k:       normal; rows of the last axis L2-normalised if unitRows
///   v, z, other: normal;   o_init: zeros
///   initial_state, state_pool: 0.1 * normal
///   beta:       sigmoid(normal);   beta_logits: normal
///   gate:       log(sigmoid(normal + 2)) (<= 0);   raw_gate: normal
///   A_log:      log(uniform(1, 16));   dt_bias: 0.5 * normal
///   cu_seqlens: prefix sums of seqlens (or the even split), from 0 to T
///   indices:    N distinct slots of [0, P); one entry -1 if N >= 4
///   window_sizes: uniform integers in [1, T]
std::string makeRandomInputs(mlir::func::FuncOp f,
                             const std::vector<InputSpec> &specs,
                             uint64_t seed,
                             const std::vector<int64_t> &seqlens,
                             std::vector<std::vector<double>> &values);

/// Rounds `values` in place to the precision of `elementType`: bf16, f16
/// and f32 to nearest even (overflow to +-inf), other float types through
/// APFloat, f64 unchanged; integer and index types to the nearest integer
/// (integrality of user data is checked by validateInput, not here).
void roundToElementType(mlir::Type elementType, std::vector<double> &values);

/// Checks user-given values for argument `argIndex`: the element count
/// matches the type; every value of a float role is finite; values of
/// integer roles (and of integer-typed arguments) are integers in the
/// type's range; cu_seqlens starts at 0, never decreases and ends at T;
/// indices are < P and the non-negative ones distinct; window_sizes >= 1;
/// log-space gates (Role::Gate) <= 0.
/// Returns "" or a message naming the argument (position and role) and the
/// offending element (multi-index and value).
std::string validateInput(const InputSpec &spec, unsigned argIndex,
                          const std::vector<double> &values);

} // namespace kda::run

#endif // KDA_TOOLS_KDA_RUN_INPUTS_H
