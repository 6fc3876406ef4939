//===- GatedDeltaBackward.h - the gated delta rule's backward, derived -*- C++ -*-===//
//
// The backward of one (sequence, head) of the gated delta rule, as
// docs/backward.md schedules it, with no line of the algorithm written
// twice: a forward pass over the chunks keeps the state before each chunk
// (emitGatedDeltaChunk, GatedDeltaKernel.cpp), then a reverse pass over the
// chunks recomputes each chunk's step under a TapeTileBuilder and emits its
// adjoint (TileAdjoint.h), carrying the state's gradient back to the chunk
// before (the transposed state step) and writing each chunk's gradients.
// Tiles are f32 tensors (TensorTileBuilder); the loops are scf.for over the
// chunks. This is the sequential CPU form; the GPU schedule splits it into
// the three grids of docs/backward.md.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_PASSES_GATEDDELTABACKWARD_H
#define KDA_PASSES_GATEDDELTABACKWARD_H

#include "passes/GatedDeltaKernel.h"

#include <string>

namespace mlir::kda {

/// One sequence of one head, as f32 tensors padded to whole chunks:
/// q, k, gate [NC C, K], v [NC C, V], beta [NC C] (logits or values, as the
/// config's activation says), dtBias [K] or null, aLog an f32 scalar or
/// null, state [K, V] the initial state; `tokens` <= NC C are real.
struct SequenceTiles {
  Value q, k, v, gate, beta, dtBias, aLog, state;
  int64_t tokens = 0;
};

/// Their gradients (same shapes; dALog [1]; null where the input is).
struct SequenceGrads {
  Value dq, dk, dv, dgate, dbeta, dDtBias, dALog, dState;
};

/// The outputs' gradients dO [NC C, V] and dStateEnd [K, V] in; the inputs'
/// out. Fails, saying why, where the tape has no rule for a step.
FailureOr<SequenceGrads> emitSequenceBackward(ImplicitLocOpBuilder &b,
                                              const ChunkConfig &config,
                                              const SequenceTiles &in,
                                              Value dO, Value dStateEnd,
                                              std::string &why);

} // namespace mlir::kda

#endif // KDA_PASSES_GATEDDELTABACKWARD_H
