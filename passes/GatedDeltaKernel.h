//===- GatedDeltaKernel.h - the chunkwise gated delta rule, once -*- C++ -*-===//
//
// The chunkwise form of SPEC.md section 3, written once against the tile
// primitives of TileBuilder. A chunk of C tokens of one (sequence, value
// head) goes in with the state at its start and comes out as C output rows
// and the state at its end. With C = 1 the same step is exactly one token of
// the recurrence, which is how the sequence-level lowering and the decode
// step reuse it.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_PASSES_GATEDDELTAKERNEL_H
#define KDA_PASSES_GATEDDELTAKERNEL_H

#include "dialect/KdaOps.h"
#include "passes/TileBuilder.h"

namespace mlir::kda {

/// What one chunk step computes: the op's semantics plus tile parameters.
struct ChunkConfig {
  int64_t chunk = 64;    // C: tokens per chunk (1: the token recurrence)
  int64_t subChunk = 16; // tokens per sub-chunk reference point (divides C)
  int64_t keyDim = 0;    // K
  int64_t valueDim = 0;  // V
  UpdateRule update = UpdateRule::delta;
  double scale = 1.0;
  bool qkL2Norm = false;
  BetaActivation betaActivation = BetaActivation::none;
  GateActivation gateActivation = GateActivation::none;
  double lowerBound = -5.0;
};

/// One chunk's raw inputs, as tiles loaded from memory (rows past
/// `validRows` are zero).
/// The configuration of a recurrence op's chunk step (kda.gated_delta,
/// kda.decode_step): its attributes, and the chunk, sub-chunk and head sizes
/// the caller tiles it with.
template <typename RecurrenceOp>
ChunkConfig chunkConfigOf(RecurrenceOp op, int64_t chunk, int64_t subChunk,
                          int64_t keyDim, int64_t valueDim) {
  ChunkConfig config;
  config.chunk = chunk;
  config.subChunk = subChunk;
  config.keyDim = keyDim;
  config.valueDim = valueDim;
  config.update = op.getUpdate();
  config.scale = op.getScaleOrDefault();
  config.qkL2Norm = op.getQkL2norm();
  config.betaActivation = op.getBetaActivation();
  config.gateActivation = op.getGateActivation();
  if (auto lb = op.getLowerBound())
    config.lowerBound = lb->convertToDouble();
  return config;
}

struct ChunkInputs {
  Value q;        // [C, K]
  Value k;        // [C, K]
  Value v;        // [C, V]
  Value gate;     // [C, K] raw or log-space gate (head-wise broadcast), or null
  Value beta;     // [C] beta or logits, or null (beta = 1)
  Value aLog;     // f32 scalar or null (gate activation parameter)
  Value dtBias;   // [K] or null (gate activation parameter)
  Value validRows; // index: rows of this chunk that are real tokens
};

struct ChunkOutputs {
  Value o;         // [C, V] f32
  Value nextState; // [K, V] f32
  Value vNew;      // [C, V] f32: U - W S (delta rule), U otherwise
};

/// The gate activation of SPEC.md on one raw gate value `x` (f32 scalars;
/// `aLog` and `dtBias` may be null): the softplus or the lower-bound form.
Value activateGateValue(ImplicitLocOpBuilder &b, GateActivation activation,
                        double lowerBound, Value x, Value aLog, Value dtBias);

/// The gate activation of a [C, K] tile of raw gates (one map on `tb`, so
/// that a tape differentiates it as one body): `config`'s activation with
/// A_log (a scalar, may be null) and dt_bias (a [K] tile, may be null).
Value activateGateTile(TileBuilder &tb, const ChunkConfig &config, Value raw,
                       Value aLog, Value dtBias);

/// sigmoid(x), or 2 sigmoid(x) when negative eigenvalues are allowed.
Value activateBetaValue(ImplicitLocOpBuilder &b, BetaActivation activation,
                        Value x);

/// Applies the prologue (l2 norm, scale, beta and gate activations) and one
/// chunk of the chunkwise gated delta rule to `state` ([K, V] f32).
/// What a chunk contributes independently of the state entering it: every
/// chunk of every sequence can compute it at once. Shapes for chunk C, key
/// dimension K and the V columns of `inputs.v`.
struct IntraChunk {
  Value w;        // [C, K] A (beta Gamma K); null without the delta rule
  Value u;        // [C, V] A (beta V); V itself without the delta rule
  Value qDecayed; // [C, K] Gamma Q, scaled
  Value kToEnd;   // [C, K] exp(G_last - G) K
  Value p;        // [C, C] the masked, decayed Q K^T of the chunk
  Value decayLast; // [K] exp(G_last), the chunk's total decay per key (the
                   // state step's only use of the gate: taken here, once per
                   // chunk, not in the sequential pass); null without a gate
};

/// The state-independent part of a chunk (prologue, gate cumsum, intra-chunk
/// matrices, UT transform, W and U, decayed q and k).
/// `early`, where given, receives Gamma Q, exp(G_last - G) K and exp(G_last) as
/// soon as they are final, before the intra-chunk products (a lane kernel
/// stores them there and frees their registers); they are in the result
/// too. `done`, where given, receives each of P, W and U (by the names
/// "p", "w", "u") as soon as it is final, for the same reason.
IntraChunk emitIntraChunk(
    TileBuilder &tb, const ChunkConfig &config, const ChunkInputs &inputs,
    llvm::function_ref<void(Value qDecayed, Value kToEnd, Value decayLast)>
        early = {},
    llvm::function_ref<void(StringRef role, Value tile)> done = {});

/// The sequential part: V_new = U - W S, O = (Gamma Q) S + P V_new,
/// S' = Diag(exp(G_last)) S + (exp(G_last - G) K)^T V_new (exp(G_last) is
/// the intra-chunk part's decayLast). The V columns are
/// those of `intra.u` and `state` (a V block of the intra-chunk's).
ChunkOutputs emitStateStep(TileBuilder &tb, const IntraChunk &intra,
                           Value state);
/// Its two halves: the new values V_new = U - W S (U without the delta
/// rule), and the rest of the step from them (`vNew` in place of U - W S).
Value emitNewValues(TileBuilder &tb, const IntraChunk &intra, Value state);
ChunkOutputs emitStateStepFrom(TileBuilder &tb, const IntraChunk &intra,
                               Value state, Value vNew);

/// What a wide state step returns: each sub-chunk's output rows and the
/// state after the last.
struct WideStepOutputs {
  SmallVector<Value> o; // [C_i, V] f32 per sub-chunk
  Value nextState;      // [K, V] f32
};

/// The state step of several consecutive chunks at once (the sub-chunks of
/// a wide chunk, each with its own intra-chunk part): the same result as
/// emitStateStep applied to each in turn, up to rounding, but with the
/// state read once. With S the state before sub-chunk 0, E_i the product
/// of the decays of sub-chunks 0 .. i-1 and F_ji that of j+1 .. i-1 (every
/// factor <= 1):
///   V_new_i = U_i - (W_i E_i) S - sum_{j<i} (W_i F_ji K_j^T) V_new_j
///   O_i     = (Gamma Q_i E_i) S + sum_{j<i} (Gamma Q_i F_ji K_j^T) V_new_j
///             + P_i V_new_i
///   S'      = E_m S + sum_j (K_j F_jm)^T V_new_j
/// (K_j the sub-chunk's decayed k). Every product against S is independent
/// of the others; what is sequential is the short chain of V_new_i through
/// C_i x C_j blocks: the sequential pass takes one step per wide chunk
/// instead of one per sub-chunk. A sub-chunk past a sequence's end comes in
/// with zero rows and a decay of 1 (it changes nothing).
WideStepOutputs emitWideStateStep(TileBuilder &tb,
                                  ArrayRef<IntraChunk> subChunks, Value state);

/// One chunk: emitIntraChunk then emitStateStep.
ChunkOutputs emitGatedDeltaChunk(TileBuilder &tb, const ChunkConfig &config,
                                 const ChunkInputs &inputs, Value state);

} // namespace mlir::kda

#endif // KDA_PASSES_GATEDDELTAKERNEL_H
