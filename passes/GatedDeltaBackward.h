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

/// The gradients of one chunk's inputs (null where the input is): dq, dk
/// [C, K], dv [C, V], dgate [C, K] (or the shape of the tile the inputs gave
/// for it), dbeta [C], dDtBias [K] or [1] (a captured scalar's), dALog [1],
/// dState [K, V] (of the state before the chunk).
struct ChunkGrads {
  Value dq, dk, dv, dgate, dbeta, dDtBias, dALog, dState;
};

/// The gradients of the state step's inputs (null where not asked for or
/// absent).
struct StateStepGrads {
  Value dW, dQDecayed, dKToEnd, dP, dDecayLast, dState, dVNew;
};
/// What emitStateStepAdjoint differentiates with respect to: the state
/// before the step and the new values V_new (the reverse scan's: dV_new is
/// on its way to dS, and it is dU too), or the chunk's inputs W, Gamma Q,
/// the decayed k, P and exp(g_last), given dV_new (the step grid's).
enum class StepAdjointOf { State, Inputs };

/// The state step's adjoint, for every builder (tensor tiles, lane tiles):
/// emitStateStep(intra, state) recorded by a tape on `tb` and its adjoint
/// seeded with `dO` (its output rows) and `dS` (the state after it).
/// Gradients do not read the values they are taken with respect to (the
/// step is affine in the state and bilinear in its products): a caller may
/// pass stand-ins for those (zeros, or another tile's handle).
/// With respect to the inputs, `dVNew` (the reverse scan's) seeds V_new
/// itself: the rest of the step reads a copy of V_new the tape does not
/// follow, so the products over K that made dV_new (P^T dO + (decayed k)
/// dS, summed across warps on lanes) are not made twice.
FailureOr<StateStepGrads> emitStateStepAdjoint(TileBuilder &tb,
                                               const IntraChunk &intra,
                                               Value state, Value dO, Value dS,
                                               StepAdjointOf of,
                                               std::string &why,
                                               Value dVNew = {});

/// Builds a chunk's inputs on the tape (`tape`): whatever it computes there
/// (masks, broadcasts) is differentiated through. `leaves` gets the values
/// whose gradients are wanted (tiles, or the f32 scalars map bodies
/// capture: A_log, a head-wise dt_bias), in ChunkInputs' fields.
using ChunkInputsBuilder =
    llvm::function_ref<ChunkInputs(TileBuilder &tape, ChunkInputs &leaves)>;

/// One chunk's backward: the chunk step (emitGatedDeltaChunk) recomputed
/// under a tape from `state`, the state before the chunk, and its adjoint
/// emitted on `inner`, seeded with `dO` [C, V] (rows from the inputs'
/// validRows on are no outputs: masked here) and `dStateAfter` [K, V].
FailureOr<ChunkGrads> emitChunkBackward(TileBuilder &inner,
                                        const ChunkConfig &config,
                                        ChunkInputsBuilder inputs, Value state,
                                        Value dO, Value dStateAfter,
                                        std::string &why);

/// One sequence of one head, as f32 tensors padded to whole chunks:
/// q, k, gate [NC C, K], v [NC C, V], beta [NC C] (logits or values, as the
/// config's activation says), dtBias [K] or null, aLog an f32 scalar or
/// null, state [K, V] the initial state; `tokens` <= NC C are real.
struct SequenceTiles {
  Value q, k, v, gate, beta, dtBias, aLog, state;
  int64_t tokens = 0;
  /// Optional (index values): the sequence is rows [start, start + count)
  /// of the tiles, count <= tokens (a varlen batch's sequence in its packed
  /// rows; the tiles then hold C rows past the last one). Gradients are zero
  /// outside those rows.
  Value start, count;
  /// Optional: the state before every chunk, [NT, K, V] (or [NT, V, K] with
  /// `statesVMajor`), NT at least the chunks: read instead of recomputed.
  Value states;
  bool statesVMajor = false;
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

/// A whole call (dense, or packed with cu_seqlens), as f32 tensors of static
/// shapes: q, k [B, T, H, K],
/// v [B, T, HV, V], gate [B, T, HV, K] or head-wise [B, T, HV], beta
/// [B, T, HV] (or null), dtBias [HV, K] or head-wise [HV], and aLog [HV] (or
/// null), state [B, HV, K, V] ([B, HV, V, K] when `vMajor`; or null: zeros).
/// HV a multiple of H (GVA: value head hv reads q / k head hv / (HV / H)).
struct DenseTensors {
  Value q, k, v, gate, beta, dtBias, aLog, state;
  bool vMajor = false;
  /// Optional [N + 1] int32 / int64 offsets (B = 1): N packed sequences, each
  /// with its own state (state, dStateEnd and dState [N, HV, ...]).
  Value cuSeqlens;
  /// Optional: the state before every chunk of every sequence, [N, NT, HV,
  /// K, V] ([N, NT, HV, V, K] when `vMajor`), as the forward's boundary
  /// states at the chunk give them: read instead of recomputed.
  Value chunkStates;
};

/// Gradients of every input of DenseTensors (same shapes; null where the
/// input is; dState also where the state is null: the zero state's), given
/// dO [B, T, HV, V] and dStateEnd (the state's layout; or null: zeros). Each
/// (sequence, value head) runs emitSequenceBackward; GVA sums the value
/// heads' dq and dk into their q / k head, and dA_log and ddt_bias sum over
/// the sequences.
FailureOr<SequenceGrads> emitDenseBackward(ImplicitLocOpBuilder &b,
                                           const ChunkConfig &config,
                                           const DenseTensors &in, Value dO,
                                           Value dStateEnd, std::string &why);

} // namespace mlir::kda

#endif // KDA_PASSES_GATEDDELTABACKWARD_H
