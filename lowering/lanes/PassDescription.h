//===- PassDescription.h - reading kda-tile-chunks' kernel descriptions ---===//
//
// kda-tile-chunks describes what a kernel's grids compute (kda.state_pass,
// kda.intra_pass, kda.decode_pass; passes/Passes.h) for the lowerings that
// write those programs per lane. These read them: every read says whether
// the entry is there with its type, and a kernel whose description lacks one
// keeps the tile lowering instead of being lowered from a guess.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_LOWERING_PASSDESCRIPTION_H
#define KDA_LOWERING_PASSDESCRIPTION_H

#include "dialect/KdaOps.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <string>

namespace mlir::kda {

struct PassDescription {
  DictionaryAttr dict;

  bool read(StringRef name, int64_t &out) const {
    auto a = dict.getAs<IntegerAttr>(name);
    if (a)
      out = a.getInt();
    return static_cast<bool>(a);
  }
  bool read(StringRef name, double &out) const {
    auto a = dict.getAs<FloatAttr>(name);
    if (a)
      out = a.getValueAsDouble();
    return static_cast<bool>(a);
  }
  bool read(StringRef name, bool &out) const {
    auto a = dict.getAs<BoolAttr>(name);
    if (a)
      out = a.getValue();
    return static_cast<bool>(a);
  }
  bool read(StringRef name, std::string &out) const {
    auto a = dict.getAs<StringAttr>(name);
    if (a)
      out = a.getValue().str();
    return static_cast<bool>(a);
  }
};

/// The prologue entries kda.intra_pass and kda.decode_pass share: the update
/// rule, the gate's form and activation, beta and its activation, the l2
/// norm and the scale.
struct PrologueDescription {
  bool delta = false, beta = false, l2norm = false;
  std::string gate; // none, channel, head
  GateActivation gateActivation = GateActivation::none;
  BetaActivation betaActivation = BetaActivation::none;
  double lowerBound = -5.0, scale = 1.0;

  bool readPrologue(const PassDescription &d) {
    std::string gateAct, betaAct;
    if (!d.read("delta", delta) || !d.read("beta", beta) ||
        !d.read("l2norm", l2norm) || !d.read("lower_bound", lowerBound) ||
        !d.read("scale", scale) || !d.read("gate", gate) ||
        !d.read("gate_activation", gateAct) ||
        !d.read("beta_activation", betaAct))
      return false;
    auto ga = symbolizeGateActivation(gateAct);
    auto ba = symbolizeBetaActivation(betaAct);
    if (!ga || !ba)
      return false;
    gateActivation = *ga;
    betaActivation = *ba;
    return true;
  }
};

} // namespace mlir::kda

#endif // KDA_LOWERING_PASSDESCRIPTION_H
