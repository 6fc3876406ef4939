//===- PassDescription.h - reading kda-tile-chunks' kernel descriptions ---===//
//
// kda-tile-chunks describes what a kernel's grids compute (#kda.state_pass,
// #kda.intra_pass, #kda.decode_pass, dialect/KdaAttrs.td) for the lane
// kernels' drivers. The attributes are typed and verified;
// this reads the prologue they share into the plain values the lane programs
// test.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_LOWERING_PASSDESCRIPTION_H
#define KDA_LOWERING_PASSDESCRIPTION_H

#include "dialect/KdaOps.h"
#include "passes/GatedDeltaKernel.h"

#include <string>

namespace mlir::kda {

/// The prologue entries #kda.intra_pass and #kda.decode_pass share: the
/// update rule, the gate's form and activation, beta and its activation, the
/// l2 norm and the scale.
struct PrologueDescription {
  bool delta = false, beta = false, l2norm = false;
  std::string gate; // none, channel, head
  GateActivation gateActivation = GateActivation::none;
  BetaActivation betaActivation = BetaActivation::none;
  double lowerBound = -5.0, scale = 1.0;

  void readPrologue(PrologueAttr p) {
    delta = p.getDelta().getValue();
    beta = p.getBeta().getValue();
    l2norm = p.getL2norm().getValue();
    gate = stringifyGateForm(p.getGate()).str();
    gateActivation = p.getGateActivation();
    betaActivation = p.getBetaActivation();
    lowerBound = p.getLowerBound().getValueAsDouble();
    scale = p.getScale().getValueAsDouble();
  }

  /// The algorithm's chunk step for this prologue (GatedDeltaKernel.h).
  ChunkConfig chunkConfig(int64_t chunk, int64_t subChunk, int64_t keyDim,
                          int64_t valueDim) const {
    ChunkConfig c;
    c.chunk = chunk;
    c.subChunk = subChunk;
    c.keyDim = keyDim;
    c.valueDim = valueDim;
    c.update = delta ? UpdateRule::delta : UpdateRule::additive;
    c.scale = scale;
    c.qkL2Norm = l2norm;
    c.betaActivation = betaActivation;
    c.gateActivation = gateActivation;
    c.lowerBound = lowerBound;
    return c;
  }
};

} // namespace mlir::kda

#endif // KDA_LOWERING_PASSDESCRIPTION_H
