//===- Oracle.h - float64 reference for every kda operation -----*- C++ -*-===//
//
// The numerical contract of ../shared/SPEC.md, evaluated naively in float64.
// Every numeric test of every target compares against these functions; they
// are deliberately written from the specification's formulas (the token-by-
// token recurrence, never the chunkwise form) so that a bug in the compiler's
// algorithm cannot be reproduced here by construction.
//
// Tensors are dense, row-major, float64. An absent optional tensor is a
// Tensor with an empty shape. Functions validate their arguments and return a
// Status naming the offending argument instead of throwing (the project is
// built without exceptions).
//
//===----------------------------------------------------------------------===//

#ifndef KDA_TEST_ORACLE_ORACLE_H
#define KDA_TEST_ORACLE_ORACLE_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kda::oracle {

/// Dense row-major float64 tensor. `shape.empty()` means "absent".
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data;

  Tensor() = default;
  explicit Tensor(std::vector<int64_t> shape, double fill = 0.0);

  bool present() const { return !shape.empty(); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  /// Row-major linear offset of a full index (asserts rank and bounds).
  int64_t offset(const std::vector<int64_t> &index) const;
  double &at(const std::vector<int64_t> &index) { return data[offset(index)]; }
  double at(const std::vector<int64_t> &index) const {
    return data[offset(index)];
  }
};

/// Result of argument validation: empty message means success.
struct Status {
  std::string message;
  bool ok() const { return message.empty(); }
  static Status success() { return {}; }
  static Status error(std::string m) { return {std::move(m)}; }
};

enum class Update { Delta, Additive };
enum class StateLayout { KMajor, VMajor }; // [.., K, V] or [.., V, K]
enum class BetaActivation { None, Sigmoid, SigmoidNegEigval }; // b, s(b), 2 s(b)
enum class GateActivation { None, Softplus, LowerBound };
enum class Combine { Sum, Gated };

/// Gate activation parameters (SPEC.md section 2, "Optional prologue").
struct GateParams {
  GateActivation activation = GateActivation::None;
  Tensor aLog;   // optional [HV]
  Tensor dtBias; // optional [HV, K] (or [HV] for head-wise gates)
  double lowerBound = -5.0; // LowerBound form only, in [-5, 0)
};

/// Applies the gate activation to raw gates `gRaw`. With `channelWise` the
/// last axis is K and the one before it the value head ([..., HV, K]);
/// otherwise the last axis is the value head ([..., HV]) and dtBias is [HV].
/// With activation None `g` is a copy of `gRaw`.
Status gateActivation(const Tensor &gRaw, const GateParams &params,
                      bool channelWise, Tensor &g);

/// softplus(x) = log(1 + e^x), taken as x for x > 20 (SPEC.md).
double softplus(double x);
double sigmoid(double x);

/// The gated delta family, sequence level (SPEC.md section 2).
struct GatedDeltaArgs {
  Tensor q, k;          // [B, T, H, K]
  Tensor v;             // [B, T, HV, V], HV a multiple of H
  Tensor g;             // optional: [B, T, HV] head-wise or [B, T, HV, K]
                        // channel-wise; raw when gate.activation != None
  Tensor beta;          // optional [B, T, HV]; logits when betaActivation != None
  Tensor initialState;  // optional [N, HV, K, V] (KMajor) / [N, HV, V, K]
  std::vector<int64_t> cuSeqlens; // optional, N+1 offsets, requires B == 1

  Update update = Update::Delta;
  std::optional<double> scale; // default 1/sqrt(K)
  StateLayout layout = StateLayout::KMajor;
  bool qkL2Norm = false;
  BetaActivation betaActivation = BetaActivation::None;
  GateParams gate;
  /// > 0: also return the state at every multiple of this many tokens of
  /// each sequence (the state *before* chunk j, j = 0 .. NT-1).
  int64_t boundaryInterval = 0;
};

struct GatedDeltaResult {
  Tensor o;              // [B, T, HV, V]
  Tensor finalState;     // [N, HV, K, V] or [N, HV, V, K] (layout), N = B or
                         // cuSeqlens.size() - 1
  Tensor boundaryStates; // [N, NT, HV, K, V] / [N, NT, HV, V, K] when
                         // boundaryInterval > 0; NT = ceil(maxLen / interval),
                         // entries past a shorter sequence's end are zero
};

Status gatedDelta(const GatedDeltaArgs &args, GatedDeltaResult &result);

/// The gradient of gatedDelta (training, issue 24): for the loss
///   L = sum(dO * o) + sum(dFinalState * finalState)
/// the derivative of L with respect to every input, by reverse-mode
/// differentiation of the token recurrence itself (SPEC.md section 2) in
/// float64: each sequence's states are recomputed forward and kept, then the
/// steps are walked back,
///   dq += scale S_t dO_t,  dS_t += scale q dO_t^T            (the output)
///   e = v - S'^T k:  dbeta += k^T dS_t e,  dk += beta dS_t e - S' de,
///   de = beta dS_t^T k,  dv += de,  dS' = dS_t - k de^T     (the delta rule)
///   dS_{t-1} = Diag(alpha) dS',  dg += alpha * rowsum(S_{t-1} * dS')
/// (S' = Diag(alpha) S_{t-1}), then through the prologue: the l2 norms, beta's
/// sigmoid, the gate activation and its parameters; grouped value heads sum
/// into their q / k head. Checked against central finite differences
/// (OracleTest.cpp): every gradient test of every target compares against it.
struct GatedDeltaGradArgs {
  GatedDeltaArgs forward; // boundaryInterval must be 0
  Tensor dO;              // [B, T, HV, V]
  Tensor dFinalState;     // optional, finalState's shape and layout
};

struct GatedDeltaGrads {
  Tensor dq, dk;        // [B, T, H, K], w.r.t. the raw q and k
  Tensor dv;            // [B, T, HV, V]
  Tensor dg;            // g's shape (the raw gate when it is activated)
  Tensor dbeta;         // [B, T, HV] (the logits when activated)
  Tensor dInitialState; // initialState's shape and layout
  Tensor dALog;         // [HV] when gate.aLog is present
  Tensor dDtBias;       // gate.dtBias's shape when present
};

Status gatedDeltaGrad(const GatedDeltaGradArgs &args, GatedDeltaGrads &grads);

/// One recurrence step per sequence on a state pool (SPEC.md section 4).
/// Multi-token form (q of rank 4): q, k [N, T, H, K], v [N, T, HV, V], g
/// [N, T, HV(, K)], beta [N, T, HV], o [N, T, HV, V] and indices [N, T]
/// (row-major): sequence n reads readIndices[n], else indices[n][0]
/// (negative: skip, every row of o zero), takes T tokens, and after token t
/// writes its state to indices[n][t] (negative: not kept). Every
/// non-negative entry of indices is distinct.
struct DecodeArgs {
  Tensor q, k;      // [N, H, K] (or [N, T, H, K])
  Tensor v;         // [N, HV, V]
  Tensor g;         // optional [N, HV] or [N, HV, K] (raw if gate.activation)
  Tensor beta;      // optional [N, HV]
  Tensor statePool; // [P, HV, K, V] or [P, HV, V, K]
  std::vector<int64_t> indices; // [N], negative: skip this sequence
  /// Optional [N] (empty: `indices`): the slot sequence n reads its state
  /// from (negative: skip the sequence, its output row zero, nothing
  /// written); `indices` then names where the new state goes (negative:
  /// nowhere). A slot one sequence reads may not be another's destination.
  std::vector<int64_t> readIndices;

  Update update = Update::Delta;
  std::optional<double> scale;
  StateLayout layout = StateLayout::KMajor;
  bool qkL2Norm = false;
  BetaActivation betaActivation = BetaActivation::None;
  GateParams gate;
};

struct DecodeResult {
  Tensor o;         // [N, HV, V] ([N, T, HV, V]); skipped sequences' rows zero
  Tensor statePool; // the updated pool; unnamed slots bit-exact copies
};

Status decodeStep(const DecodeArgs &args, DecodeResult &result);

/// Causal sliding-window softmax attention (SPEC.md section 5).
/// Output heads HO = max(HQ, HV); each of HQ, HK, HV divides HO and output
/// head o reads q head o / (HO/HQ), k head o / (HO/HK), v head o / (HO/HV).
/// This covers both GQA (HQ > HK = HV) and the KDA grouping (HQ = HK < HV).
/// Earlier keys: k and v may hold S > T rows (dense sequences only), the
/// queries then being the last T of them (query row t meets key rows up to
/// t + S - T: a chunk of a sequence whose earlier keys are kept).
struct WindowArgs {
  Tensor q; // [B, T, HQ, K]
  Tensor k; // [B, T, HK, K] or [B, S, HK, K] (S >= T, earlier keys)
  Tensor v; // [B, T, HV, V] or [B, S, HV, V]
  int64_t window = 0;                    // per op, >= 1; or
  std::vector<int64_t> windowPerPosition; // [T], each >= 1
  std::vector<int64_t> cuSeqlens;         // optional, requires B == 1
  std::optional<double> scale;            // default 1/sqrt(K)
};

Status windowAttention(const WindowArgs &args, Tensor &o /*[B,T,HO,V]*/);

/// o = sum_i outputs[i]                          (Combine::Sum, >= 2 inputs)
/// o = s(z) * outputs[0] + (1 - s(z)) outputs[1] (Combine::Gated, 2 inputs)
/// z is [B, T, HV] (head-wise) or [B, T, HV, V] (channel-wise).
Status hybridCombine(const std::vector<Tensor> &outputs, Combine combine,
                     const Tensor &z, Tensor &o);

/// Several recurrent states over the same q, k, v with different decays.
/// Scale m uses gate `decayScales[m] * g` when `gates` is empty, else its own
/// gate tensor `gates[m]` (then `base.g` must be absent). Outputs are summed
/// (Combine::Sum) or mixed as sum_m s(z[..., m]) * o_m with z [B, T, HV, M]
/// (Combine::Gated). Final states are stacked [M, N, HV, K, V].
struct MultiScaleArgs {
  GatedDeltaArgs base;
  std::vector<double> decayScales;
  std::vector<Tensor> gates;
  Combine combine = Combine::Sum;
  Tensor z;
};

struct MultiScaleResult {
  Tensor o;
  Tensor finalStates; // [M, N, HV, K, V] (layout as base.layout)
};

Status multiScale(const MultiScaleArgs &args, MultiScaleResult &result);

/// Comparison metrics of SPEC.md section 6.
double relativeRmse(const std::vector<double> &out,
                    const std::vector<double> &ref);
double maxAbsError(const std::vector<double> &out,
                   const std::vector<double> &ref);

} // namespace kda::oracle

#endif // KDA_TEST_ORACLE_ORACLE_H
