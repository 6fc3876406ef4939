//===- KdaAttrs.td - kda enums and attributes --------------*- tablegen -*-===//

#ifndef KDA_DIALECT_KDAATTRS_TD
#define KDA_DIALECT_KDAATTRS_TD

include "dialect/KdaDialect.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Kda_UpdateRule : I32EnumAttr<"UpdateRule", "how a token writes the state", [
    I32EnumAttrCase<"delta", 0>,    // S += beta k (v - S^T k)^T
    I32EnumAttrCase<"additive", 1>  // S += k v^T
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::kda";
}
def Kda_UpdateRuleAttr : EnumAttr<Kda_Dialect, Kda_UpdateRule, "update">;

def Kda_StateLayout : I32EnumAttr<"StateLayout", "memory order of a K x V state", [
    I32EnumAttrCase<"k_major", 0>,  // [..., K, V]
    I32EnumAttrCase<"v_major", 1>   // [..., V, K]
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::kda";
}
def Kda_StateLayoutAttr : EnumAttr<Kda_Dialect, Kda_StateLayout, "layout">;

def Kda_BetaActivation : I32EnumAttr<"BetaActivation",
    "how beta is obtained from the beta operand", [
    I32EnumAttrCase<"none", 0>,               // beta given directly
    I32EnumAttrCase<"sigmoid", 1>,            // beta = sigmoid(b)
    I32EnumAttrCase<"sigmoid_neg_eigval", 2>  // beta = 2 sigmoid(b)
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::kda";
}
def Kda_BetaActivationAttr : EnumAttr<Kda_Dialect, Kda_BetaActivation, "beta">;

def Kda_GateActivation : I32EnumAttr<"GateActivation",
    "how the log-decay g is obtained from raw gates", [
    I32EnumAttrCase<"none", 0>,        // g given in log space
    I32EnumAttrCase<"softplus", 1>,    // g = -exp(A_log) softplus(g + dt_bias)
    I32EnumAttrCase<"lower_bound", 2>  // g = lb sigmoid(exp(A_log)(g + dt_bias))
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::kda";
}
def Kda_GateActivationAttr : EnumAttr<Kda_Dialect, Kda_GateActivation, "gate">;

def Kda_GateGranularity : I32EnumAttr<"GateGranularity",
    "one decay per head or one per key channel", [
    I32EnumAttrCase<"head", 0>,     // g [..., HV]
    I32EnumAttrCase<"channel", 1>   // g [..., HV, K]
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::kda";
}
def Kda_GateGranularityAttr
    : EnumAttr<Kda_Dialect, Kda_GateGranularity, "granularity">;

def Kda_CombineMode : I32EnumAttr<"CombineMode", "how branch outputs are mixed", [
    I32EnumAttrCase<"sum", 0>,   // o = sum_i o_i
    I32EnumAttrCase<"gated", 1>  // sigmoid gates from z
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::kda";
}
def Kda_CombineModeAttr : EnumAttr<Kda_Dialect, Kda_CombineMode, "combine">;

//===----------------------------------------------------------------------===//
// Tile parameters
//===----------------------------------------------------------------------===//

def Kda_TileAttr : AttrDef<Kda_Dialect, "Tile"> {
  let mnemonic = "tile";
  let summary = "how a kda op is tiled: chunk size and kernel tile parameters";
  let description = [{
    Tile parameters are data, not code: the chunk-tiling pass and the target
    lowerings read them, and defaults, the tuner or a user choose them.

    - `chunk`: tokens per chunk of the chunkwise form (16, 32 or 64).
    - `sub_chunk`: tokens per sub-chunk whose local reference point keeps every
      gate exponent <= 0 (divides `chunk`).
    - `v_block`: columns of V handled by one program (0: all of V).
    - `warps`: warps (waves) per program on GPU targets.
    - `stages`: software pipeline depth of tile loads on GPU targets.
    - `segments`: sequence-parallel segments per sequence (1: sequential).

    Example: `#kda.tile<chunk = 64, sub_chunk = 16, v_block = 64>`; omitted
    fields take their defaults.
  }];
  let parameters = (ins
    DefaultValuedParameter<"int64_t", "64">:$chunk,
    DefaultValuedParameter<"int64_t", "16">:$sub_chunk,
    DefaultValuedParameter<"int64_t", "0">:$v_block,
    DefaultValuedParameter<"int64_t", "4">:$warps,
    DefaultValuedParameter<"int64_t", "2">:$stages,
    DefaultValuedParameter<"int64_t", "1">:$segments
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // KDA_DIALECT_KDAATTRS_TD
