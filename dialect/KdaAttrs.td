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
    - `warps`: warps (waves) per program on GPU targets: those of the
      pipeline's threads per block, which every kernel takes (a different
      count is refused, naming the threads that give it).
    - `stages`: software pipeline depth of tile loads on GPU targets: the
      NVIDIA state program's chunks in flight (2 to 8; 1 runs as 2). Other
      than 2, it wins over the tuning database's and the shape policy's.
    - `segments`: sequence-parallel segments per sequence (1: sequential).
      kda.gated_delta under the chunk-parallel schedule, without boundary
      states, takes more: every sequence splits into that many runs of
      whole chunks; a summary grid gives each its K x K transition and
      offset from a zero state, a combine grid scans them into each
      segment's true start state, and the state grid runs the segments side
      by side (SPEC.md: the chunk step is affine in the state). Other ops
      refuse them.

    Window attention takes only `chunk` (its queries per program): a
    `v_block` or `sub_chunk` there is refused by kda-tile-chunks.

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


//===----------------------------------------------------------------------===//
// Kernel descriptions: what kda-tile-chunks tells the target lowerings
//===----------------------------------------------------------------------===//
// kda-tile-chunks writes the loop nests that define every kernel (they stay
// the definition), and beside them, on the kernel function, a description of
// what its grids compute: the strategy stage (kda-gpu-select-strategy)
// decides from it whether the lane kernels take the kernel, and the lane
// passes build their programs from it. Typed, so that a description a pass
// cannot read is a verifier error, not a silent fallback.

def Kda_GateForm : I32EnumAttr<"GateForm", "which gate a kernel reads", [
    I32EnumAttrCase<"none", 0>,    // no gate: nothing decays
    I32EnumAttrCase<"channel", 1>, // one decay per key channel
    I32EnumAttrCase<"head", 2>     // one decay per head
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::kda";
}

def Kda_PrologueAttr : AttrDef<Kda_Dialect, "Prologue"> {
  let mnemonic = "prologue";
  let summary = "the per-token work before the recurrence, as a kernel computes it";
  let description = [{
    The update rule (`delta`), the gate read (`gate`) and its activation with
    its lower bound, beta (present or not) and its activation, the l2 norm of
    q and k, and the scale folded into q.
  }];
  let parameters = (ins
    "::mlir::BoolAttr":$delta,
    EnumParameter<Kda_GateForm>:$gate,
    EnumParameter<Kda_GateActivation>:$gate_activation,
    "::mlir::FloatAttr":$lower_bound,
    "::mlir::BoolAttr":$beta,
    EnumParameter<Kda_BetaActivation>:$beta_activation,
    "::mlir::BoolAttr":$l2norm,
    "::mlir::FloatAttr":$scale
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def Kda_IntraPassAttr : AttrDef<Kda_Dialect, "IntraPass"> {
  let mnemonic = "intra_pass";
  let summary = "what a chunk-parallel schedule's intra-chunk grid computes";
  let description = [{
    On a kernel function (key `kda.intra_pass`): the grid over (sequence,
    chunk, head) computes emitIntraChunk for chunks of `chunk` tokens
    (`tile_chunk`: the op's chunk, larger when it runs as sub-chunk steps)
    with sub-chunks of `sub_chunk`, K = `key_dim`, V = `value_dim`, into the
    workspaces named in order by `workspaces` ("w", "u", "q", "k", "p",
    "g"); `grid` holds the static extents (-1: dynamic). `gate_outside`
    (the gradient's chunk grid only): the gate's activation is applied to
    the loaded gate before the tape, and the grid writes the gradient of the
    activated gate to an f32 workspace, which a grid of its own (`gate`)
    takes through the activation's adjoint to the raw gate's, A_log's and
    dt_bias's (the softplus gate's: its adjoint kept in the chunk program
    spilled the register file).
  }];
  let parameters = (ins
    "int64_t":$chunk,
    "int64_t":$tile_chunk,
    "int64_t":$sub_chunk,
    "int64_t":$key_dim,
    "int64_t":$value_dim,
    "::mlir::ArrayAttr":$workspaces,
    "::mlir::DenseI64ArrayAttr":$grid,
    "::mlir::kda::PrologueAttr":$prologue,
    DefaultValuedParameter<"bool", "false">:$gate_outside
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Kda_StatePassAttr : AttrDef<Kda_Dialect, "StatePass"> {
  let mnemonic = "state_pass";
  let summary = "what a chunk-parallel schedule's state grid computes";
  let description = [{
    On a kernel function (key `kda.state_pass`): the grid over (sequence,
    head[, V block]) runs emitStateStep over chunks of `chunk` tokens
    (`tile_chunk` as in #kda.intra_pass) with K = `key_dim` and V blocks of
    `v_block`, the state `v_major` or not, reading the workspaces named by
    `workspaces`; `boundary`: it writes boundary states every
    `boundary_interval` tokens (`boundary_pool`: into pool slots).
    `segments` > 1: each sequence runs as that many segments of whole chunks
    (grid (sequence x segment, head[, V block])). `summary`: the segments'
    first pass: from a zero state and, on the V blocks past V (value_dim),
    from the identity with U taken as zero, it writes each segment's final
    state (its offset and its K x K transition) and no outputs; without
    `summary` a segmented grid starts each segment from the state the
    combine grid wrote for it.
  }];
  let parameters = (ins
    "int64_t":$chunk,
    "int64_t":$tile_chunk,
    "int64_t":$key_dim,
    "int64_t":$v_block,
    "::mlir::BoolAttr":$v_major,
    "::mlir::BoolAttr":$boundary,
    "::mlir::BoolAttr":$boundary_pool,
    "int64_t":$boundary_interval,
    "::mlir::ArrayAttr":$workspaces,
    "::mlir::DenseI64ArrayAttr":$grid,
    DefaultValuedParameter<"int64_t", "1">:$segments,
    DefaultValuedParameter<"int64_t", "0">:$value_dim,
    DefaultValuedParameter<"bool", "false">:$summary
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Kda_DecodePassAttr : AttrDef<Kda_Dialect, "DecodePass"> {
  let mnemonic = "decode_pass";
  let summary = "what a decode step's programs compute";
  let description = [{
    On a kernel function (key `kda.decode_pass`): one token of the
    recurrence per (sequence, head) program on a state pool, K = `key_dim`,
    V = `value_dim`, the pool `v_major` or not; `multi_token`: q is
    [N, T, H, K] and indices [N, T] (a token loop per sequence).
  }];
  let parameters = (ins
    "int64_t":$key_dim,
    "int64_t":$value_dim,
    "::mlir::BoolAttr":$v_major,
    "::mlir::BoolAttr":$multi_token,
    "::mlir::kda::PrologueAttr":$prologue
  );
  let assemblyFormat = "`<` struct(params) `>`";
}


def Kda_WindowPassAttr : AttrDef<Kda_Dialect, "WindowPass"> {
  let mnemonic = "window_pass";
  let summary = "what a window-attention kernel's programs compute";
  let description = [{
    On a kernel function (key `kda.window_pass`): causal sliding-window
    attention (emitWindowAttention) with K = `key_dim`, V = `value_dim`,
    scores scaled by `scale`, over a window of `window` positions (0: the
    per-position sizes of the `window_sizes` argument); `varlen`: sequences
    are the `cu_seqlens` offsets of one batch row; `earlier_keys` (absent:
    false): k and v hold S >= T rows, query row t at key row t + S - T
    (kda.window_attention's `earlier_keys`).
  }];
  let parameters = (ins
    "int64_t":$key_dim,
    "int64_t":$value_dim,
    "int64_t":$window,
    "::mlir::FloatAttr":$scale,
    "::mlir::BoolAttr":$varlen,
    OptionalParameter<"::mlir::BoolAttr">:$earlier_keys
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}


def Kda_StrategyAttr : AttrDef<Kda_Dialect, "Strategy"> {
  let mnemonic = "strategy";
  let summary = "how a GPU kernel is written (kda-gpu-select-strategy)";
  let description = [{
    On a kernel function (key `kda.strategy`): the strategy stage's decision
    for the kernel `kernel` (intra, state, decode, window, chunkwise,
    elementwise): `kind` lanes (the register kernels) or tiles (the
    shared-memory tile lowering), with the `reason` for tiles; `step` and
    `tile_chunk` (0: absent) where a chunk runs as sub-chunk steps;
    `instruction`, the matrix instruction of a lane kernel's products
    (mma_sync, or wgmma on Hopper; mfma on gfx90a / gfx942, wmma on gfx1100;
    empty where it has none); `program`,
    how a lane kernel is written: derived (an algorithm of passes/ run on
    LaneTileBuilder tiles: every lane kernel today; the field names the
    program should another way of writing one come);
    `stages`, the chunks a lane kernel has in flight through staged
    asynchronous copies (the derived state program's cp.async stages; 0
    where it stages none). The
    register passes write what it gives them lanes; the manifest carries it
    as JSON and `kda.ops.last_launch` reports it.
  }];
  let parameters = (ins
    StringRefParameter<"the kernel">:$kernel,
    StringRefParameter<"lanes or tiles">:$kind,
    StringRefParameter<"why tiles", "\"\"">:$reason,
    DefaultValuedParameter<"int64_t", "0">:$step,
    DefaultValuedParameter<"int64_t", "0">:$tile_chunk,
    StringRefParameter<"the matrix instruction", "\"\"">:$instruction,
    StringRefParameter<"derived (lanes only)", "\"\"">:$program,
    DefaultValuedParameter<"int64_t", "0">:$stages
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // KDA_DIALECT_KDAATTRS_TD
