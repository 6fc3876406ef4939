//===- KdaDialect.td - the kda dialect ---------------------*- tablegen -*-===//

#ifndef KDA_DIALECT_KDADIALECT_TD
#define KDA_DIALECT_KDADIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Kda_Dialect : Dialect {
  let name = "kda";
  let summary = "Kimi Delta Attention and the gated linear-attention family";
  let description = [{
    The `kda` dialect says *what* a gated linear-attention layer computes, at
    the tensor level with value semantics: the gated delta family (linear
    attention, GLA, DeltaNet, Gated DeltaNet, KDA) with its fusible prologue,
    gate activation, the single-token decode step on a state pool, causal
    sliding-window attention, and hybrid / multi-scale combinations.

    Shapes follow the ecosystem's convention (time-major `[B, T, H, K]`); the
    numerical contract of every op is `SPEC.md`. How the computation is tiled
    is data: the `#kda.tile<...>` attribute carries chunk size and the other
    tile parameters, chosen by defaults, a tuner or by hand.
  }];
  let cppNamespace = "::mlir::kda";
  let useDefaultAttributePrinterParser = 1;
}

class Kda_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kda_Dialect, mnemonic, traits>;

#endif // KDA_DIALECT_KDADIALECT_TD
