//===- PassDescription.h - reading kda-tile-chunks' kernel descriptions ---===//
//
// kda-tile-chunks describes what a kernel's grids compute (#kda.state_pass,
// #kda.intra_pass, #kda.decode_pass, dialect/KdaAttrs.td) for the lowerings
// that write those programs per lane. The attributes are typed and verified;
// this reads the prologue they share into the plain values the lane programs
// test.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_LOWERING_PASSDESCRIPTION_H
#define KDA_LOWERING_PASSDESCRIPTION_H

#include "dialect/KdaOps.h"

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
};

} // namespace mlir::kda

#endif // KDA_LOWERING_PASSDESCRIPTION_H
