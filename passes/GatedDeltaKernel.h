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
};

/// The gate activation of SPEC.md on one raw gate value `x` (f32 scalars;
/// `aLog` and `dtBias` may be null): the softplus or the lower-bound form.
Value activateGateValue(ImplicitLocOpBuilder &b, GateActivation activation,
                        double lowerBound, Value x, Value aLog, Value dtBias);

/// sigmoid(x), or 2 sigmoid(x) when negative eigenvalues are allowed.
Value activateBetaValue(ImplicitLocOpBuilder &b, BetaActivation activation,
                        Value x);

/// Applies the prologue (l2 norm, scale, beta and gate activations) and one
/// chunk of the chunkwise gated delta rule to `state` ([K, V] f32).
ChunkOutputs emitGatedDeltaChunk(TileBuilder &tb, const ChunkConfig &config,
                                 const ChunkInputs &inputs, Value state);

} // namespace mlir::kda

#endif // KDA_PASSES_GATEDDELTAKERNEL_H
