//===- KdaOps.td - kda operations ---------------------------*- tablegen -*-===//
//
// Operand constraints are deliberately loose here (any ranked tensor): the
// C++ verifiers check every shape, dtype and attribute rule and name the
// operand, the dimension, what was expected and what was found.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_DIALECT_KDAOPS_TD
#define KDA_DIALECT_KDAOPS_TD

include "dialect/KdaAttrs.td"
include "dialect/KdaInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"

//===----------------------------------------------------------------------===//
// kda.gated_delta
//===----------------------------------------------------------------------===//

def Kda_GatedDeltaOp : Kda_Op<"gated_delta",
    [Pure, AttrSizedOperandSegments, AttrSizedResultSegments,
     Kda_KernelAbiOpInterface]> {
  let summary = "the gated delta family over whole sequences";
  let description = [{
    Runs the recurrence of SPEC.md section 2 over every sequence, per value
    head, with a `K x V` fp32 state:

    ```
    S <- Diag(exp(g_t)) S
    S <- S + beta_t k_t (v_t - S^T k_t)^T     (update = delta)
    S <- S + k_t v_t^T                        (update = additive)
    o_t = S^T (scale q_t)
    ```

    One op covers the family: the gate granularity follows from `g`'s rank
    (absent: no decay; `[B, T, HV]`: head-wise, GDN / Mamba2; `[B, T, HV, K]`:
    channel-wise, GLA / KDA), the update rule from `update`, and `beta` is
    optional (1 when absent; not allowed with the additive update).

    Operands: `q`, `k` `[B, T, H, K]`, `v` `[B, T, HV, V]` with HV a multiple
    of H (value head `hv` reads q/k head `hv / (HV / H)`); optional `gate`,
    `beta` `[B, T, HV]`, `initial_state` `[N, HV, K, V]` (`v_major`:
    `[N, HV, V, K]`), `cu_seqlens` `[N + 1]` (requires B = 1; N = B
    otherwise), and the gate activation parameters `A_log` `[HV]`, `dt_bias`
    `[HV, K]` (`[HV]` for head-wise gates).

    Fusible prologue, applied inside the op when asked: `qk_l2norm`
    normalises q and k over K; `beta_activation` derives beta from logits;
    `gate_activation` derives `g` from raw gates (softplus or lower-bound form,
    `lower_bound` in [-5, 0)).

    Results: `o` `[B, T, HV, V]` (dtype of v); optional `final_state` (shape
    of the state); optional `boundary_states` `[N, NT, HV, K, V]`, the state
    before every `boundary_interval` tokens of each sequence, NT =
    ceil(T / boundary_interval) without cu_seqlens (with them NT is the
    caller's: entries j with j * interval < the sequence's length are
    recorded, the others are zero).

    Boundary states into state-pool slots (a serving engine's prefix cache):
    with `boundary_indices(%table)` (`[N, NB]`, i32 or i64), `boundary_states`
    is a pool `[S, HV, K, V]`: boundary j of sequence n (j < NB, j *
    interval < its length) is written to slot `table[n, j]` (negative:
    not kept). Slots named twice are undefined; the other slots are left as
    the result's buffer holds them: the form is meant for a caller's pool
    updated in place through a destination-style kernel (bundles), and is
    unspecified at the tensor level (the CPU lowering leaves them zero).

    Example (KDA with the full prologue):
    ```mlir
    %o, %s = kda.gated_delta delta %q, %k, %v
        gate(%g : tensor<1x8192x32x128xf32>) beta(%b : tensor<1x8192x32xf32>)
        A_log(%a : tensor<32xf32>) dt_bias(%d : tensor<32x128xf32>)
        {qk_l2norm, beta_activation = #kda<beta sigmoid>,
         gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64}
        : tensor<1x8192x32x128xbf16>, tensor<1x8192x32x128xbf16>,
          tensor<1x8192x32x128xbf16>
        -> tensor<1x8192x32x128xbf16> final_state tensor<1x32x128x128xf32>
    ```
  }];
  let arguments = (ins
    AnyRankedTensor:$q,
    AnyRankedTensor:$k,
    AnyRankedTensor:$v,
    Optional<AnyRankedTensor>:$gate,
    Optional<AnyRankedTensor>:$beta,
    Optional<AnyRankedTensor>:$initial_state,
    Optional<AnyRankedTensor>:$cu_seqlens,
    Optional<AnyRankedTensor>:$A_log,
    Optional<AnyRankedTensor>:$dt_bias,
    Optional<AnyRankedTensor>:$boundary_indices,
    Kda_UpdateRuleAttr:$update,
    OptionalAttr<F64Attr>:$scale,
    DefaultValuedAttr<Kda_StateLayoutAttr, "StateLayout::k_major">:$state_layout,
    UnitAttr:$qk_l2norm,
    DefaultValuedAttr<Kda_BetaActivationAttr, "BetaActivation::none">:$beta_activation,
    DefaultValuedAttr<Kda_GateActivationAttr, "GateActivation::none">:$gate_activation,
    OptionalAttr<F64Attr>:$lower_bound,
    OptionalAttr<I64Attr>:$boundary_interval,
    OptionalAttr<Kda_TileAttr>:$tile
  );
  let results = (outs
    AnyRankedTensor:$o,
    Optional<AnyRankedTensor>:$final_state,
    Optional<AnyRankedTensor>:$boundary_states
  );
  let assemblyFormat = [{
    custom<EnumKeyword>($update) $q `,` $k `,` $v
    (`gate` `(` $gate^ `:` type($gate) `)`)?
    (`beta` `(` $beta^ `:` type($beta) `)`)?
    (`initial_state` `(` $initial_state^ `:` type($initial_state) `)`)?
    (`cu_seqlens` `(` $cu_seqlens^ `:` type($cu_seqlens) `)`)?
    (`A_log` `(` $A_log^ `:` type($A_log) `)`)?
    (`dt_bias` `(` $dt_bias^ `:` type($dt_bias) `)`)?
    (`boundary_indices` `(` $boundary_indices^ `:` type($boundary_indices) `)`)?
    attr-dict `:` type($q) `,` type($k) `,` type($v) `->` type($o)
    (`final_state` type($final_state)^)?
    (`boundary_states` type($boundary_states)^)?
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    /// Gate granularity implied by the gate operand (nullopt: no gate).
    std::optional<GateGranularity> getGateGranularity();
    /// The scale applied to q: the attribute, or 1/sqrt(K).
    double getScaleOrDefault();
  }];
}

//===----------------------------------------------------------------------===//
// kda.gated_delta_grad
//===----------------------------------------------------------------------===//

def Kda_GatedDeltaGradOp : Kda_Op<"gated_delta_grad",
    [Pure, AttrSizedOperandSegments, AttrSizedResultSegments,
     Kda_KernelAbiOpInterface]> {
  let summary = "the gradient of kda.gated_delta, derived from its algorithm";
  let description = [{
    The reverse-mode gradient of the `kda.gated_delta` op with the same
    operands and attributes: given the gradient `d_o` of its output `o`
    (`[B, T, HV, V]`) and, optionally, `d_final_state` of its final state
    (the state's shape), it returns the gradient of every input the forward
    reads, computed in f32 and returned in f32 or, for `d_q`, `d_k`, `d_v`,
    `d_gate` and `d_beta`, in their input's element type (the kernels that
    write them convert on their stores: what a framework returns, without
    a cast after the call):

    - `d_q`, `d_k` `[B, T, H, K]` (with GVA, the value heads of a q / k head
      summed), `d_v` `[B, T, HV, V]`;
    - `d_gate`, `d_beta`, `d_initial_state`, `d_A_log` and `d_dt_bias`, each
      present exactly when its operand is, in its operand's shape. With a
      gate activation, `d_gate` is the gradient of the raw gate (through the
      activation), `d_A_log` and `d_dt_bias` those of its parameters; with
      `beta_activation`, `d_beta` is that of the logits; with `qk_l2norm`,
      `d_q` and `d_k` are those of the un-normalised q and k.

    What is kept from the forward and what is recomputed is the caller's
    choice: with `chunk_states` (`[N, NT, HV, K, V]`, `[N, NT, HV, V, K]`
    for `v_major`: the forward's `boundary_states` at `states_interval`
    tokens, which must be the chunk the gradient is tiled with) the
    backward reads the state before every chunk; without, it recomputes
    them by running the forward's chunks first (one more pass over the
    sequence).

    The chunkwise tiling derives it from the forward's tile algorithm
    (passes/GatedDeltaKernel.cpp) by adjoint rules (passes/TileAdjoint.h):
    nothing of the algorithm is written twice. Taken so far: the delta rule
    with a gate (channel- or head-wise). Chunk-boundary states have no
    gradient form.

    Example (KDA with the full prologue, as the forward's example):
    ```mlir
    %dq, %dk, %dv, %dg, %db, %da, %dd = kda.gated_delta_grad delta
        %q, %k, %v, %do
        gate(%g : tensor<1x64x2x32xf32>) beta(%b : tensor<1x64x2xf32>)
        A_log(%a : tensor<2xf32>) dt_bias(%d : tensor<2x32xf32>)
        {qk_l2norm, beta_activation = #kda<beta sigmoid>,
         gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64}
        : tensor<1x64x2x32xbf16>, tensor<1x64x2x32xbf16>,
          tensor<1x64x2x32xbf16>, tensor<1x64x2x32xbf16>
        -> tensor<1x64x2x32xf32>, tensor<1x64x2x32xf32>, tensor<1x64x2x32xf32>
        d_gate tensor<1x64x2x32xf32> d_beta tensor<1x64x2xf32>
        d_A_log tensor<2xf32> d_dt_bias tensor<2x32xf32>
    ```
  }];
  let arguments = (ins
    AnyRankedTensor:$q,
    AnyRankedTensor:$k,
    AnyRankedTensor:$v,
    AnyRankedTensor:$d_o,
    Optional<AnyRankedTensor>:$gate,
    Optional<AnyRankedTensor>:$beta,
    Optional<AnyRankedTensor>:$initial_state,
    Optional<AnyRankedTensor>:$cu_seqlens,
    Optional<AnyRankedTensor>:$A_log,
    Optional<AnyRankedTensor>:$dt_bias,
    Optional<AnyRankedTensor>:$d_final_state,
    Optional<AnyRankedTensor>:$chunk_states,
    Kda_UpdateRuleAttr:$update,
    OptionalAttr<F64Attr>:$scale,
    DefaultValuedAttr<Kda_StateLayoutAttr, "StateLayout::k_major">:$state_layout,
    UnitAttr:$qk_l2norm,
    DefaultValuedAttr<Kda_BetaActivationAttr, "BetaActivation::none">:$beta_activation,
    DefaultValuedAttr<Kda_GateActivationAttr, "GateActivation::none">:$gate_activation,
    OptionalAttr<F64Attr>:$lower_bound,
    OptionalAttr<I64Attr>:$states_interval,
    OptionalAttr<Kda_TileAttr>:$tile
  );
  let results = (outs
    AnyRankedTensor:$d_q,
    AnyRankedTensor:$d_k,
    AnyRankedTensor:$d_v,
    Optional<AnyRankedTensor>:$d_gate,
    Optional<AnyRankedTensor>:$d_beta,
    Optional<AnyRankedTensor>:$d_initial_state,
    Optional<AnyRankedTensor>:$d_A_log,
    Optional<AnyRankedTensor>:$d_dt_bias
  );
  let assemblyFormat = [{
    custom<EnumKeyword>($update) $q `,` $k `,` $v `,` $d_o
    (`gate` `(` $gate^ `:` type($gate) `)`)?
    (`beta` `(` $beta^ `:` type($beta) `)`)?
    (`initial_state` `(` $initial_state^ `:` type($initial_state) `)`)?
    (`cu_seqlens` `(` $cu_seqlens^ `:` type($cu_seqlens) `)`)?
    (`A_log` `(` $A_log^ `:` type($A_log) `)`)?
    (`dt_bias` `(` $dt_bias^ `:` type($dt_bias) `)`)?
    (`d_final_state` `(` $d_final_state^ `:` type($d_final_state) `)`)?
    (`chunk_states` `(` $chunk_states^ `:` type($chunk_states) `)`)?
    attr-dict `:` type($q) `,` type($k) `,` type($v) `,` type($d_o)
    `->` type($d_q) `,` type($d_k) `,` type($d_v)
    (`d_gate` type($d_gate)^)?
    (`d_beta` type($d_beta)^)?
    (`d_initial_state` type($d_initial_state)^)?
    (`d_A_log` type($d_A_log)^)?
    (`d_dt_bias` type($d_dt_bias)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Gate granularity implied by the gate operand (nullopt: no gate).
    std::optional<GateGranularity> getGateGranularity();
    /// The scale applied to q: the attribute, or 1/sqrt(K).
    double getScaleOrDefault();
  }];
}

//===----------------------------------------------------------------------===//
// kda.gate
//===----------------------------------------------------------------------===//

def Kda_GateOp : Kda_Op<"gate", [Pure, AttrSizedOperandSegments,
    Kda_KernelAbiOpInterface]> {
  let summary = "gate activation: log-decay from raw gates";
  let description = [{
    Computes the log-space decay `g` (always <= 0) from raw gates, as the
    prologue of `kda.gated_delta` would (SPEC.md section 2):

    - `softplus`: `g = -exp(A_log) * softplus(x + dt_bias)`
      (Kimi-Linear-48B; softplus(x) = x for x > 20);
    - `lower_bound`: `g = lb * sigmoid(exp(A_log) * (x + dt_bias))`, or
      `lb * sigmoid(x + dt_bias)` without `A_log` (Kimi K3, FlashKDA).

    `granularity` says where the value-head axis is: `channel` gates are
    `[..., HV, K]` (dt_bias `[HV, K]`), `head` gates `[..., HV]` (dt_bias
    `[HV]`); `A_log` is `[HV]`. The result is f32 with the input's shape.

    ```mlir
    %g = kda.gate lower_bound channel %raw A_log(%a : tensor<32xf32>)
        {lower_bound = -5.0 : f64} : tensor<1x64x32x128xbf16> -> tensor<1x64x32x128xf32>
    ```
  }];
  let arguments = (ins
    Kda_GateActivationAttr:$activation,
    Kda_GateGranularityAttr:$granularity,
    AnyRankedTensor:$input,
    Optional<AnyRankedTensor>:$A_log,
    Optional<AnyRankedTensor>:$dt_bias,
    OptionalAttr<F64Attr>:$lower_bound
  );
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    custom<EnumKeyword>($activation) custom<EnumKeyword>($granularity) $input
    (`A_log` `(` $A_log^ `:` type($A_log) `)`)?
    (`dt_bias` `(` $dt_bias^ `:` type($dt_bias) `)`)?
    attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// kda.decode_step
//===----------------------------------------------------------------------===//

def Kda_DecodeStepOp : Kda_Op<"decode_step", [Pure, AttrSizedOperandSegments,
    DestinationStyleOpInterface, Kda_KernelAbiOpInterface,
    AllTypesMatch<["o_init", "o"]>,
    AllTypesMatch<["state_pool", "new_state_pool"]>]> {
  let summary = "one recurrence step per sequence on a state pool";
  let description = [{
    Single-token decode (SPEC.md section 4). Sequence `n` reads its state from
    pool slot `indices[n]`, takes one step of the recurrence of
    `kda.gated_delta` with token `n` of q, k, v, gate, beta, writes the state
    back to the same slot and produces its output. A negative index skips the
    sequence (its output row is zero). Slots not named are untouched,
    bit-exact.

    With `read_indices(%r)` ([N]), sequence `n` reads slot `r[n]` instead
    (negative: skip) and writes `indices[n]` (negative: the new state is
    not kept): a speculative step can start from the accepted state and
    write a slot of its own, never clobbering it. No sequence may read a
    slot another one writes.

    Several tokens per sequence (speculative decoding, multi-token
    prediction): q, k `[N, T, H, K]`, v `[N, T, HV, V]`, gate and beta with
    the T axis, o_init `[N, T, HV, V]` and indices `[N, T]`. Sequence `n`
    reads `read_indices[n]`, else `indices[n, 0]` (negative: skip, every
    output row zero), takes its T tokens in order and after token `t`
    writes its state to `indices[n, t]` (negative: not kept). Every
    non-negative entry of indices is distinct.

    With `read_pool(%rp)` (`[PR, HV, K, V]`, the state pool's element type
    and layout), the start states come from `%rp` instead of the pool: slot
    `read_indices[n]`, else the slot `indices` names (of the first token),
    is read from `%rp`, and `indices` name where the new states go in the
    pool, as with `read_indices`. A decode on per-sequence states
    (`read_pool` the caller's `[N, ...]` states, `indices` 0 .. N - 1, the
    pool a fresh `[N, ...]` tensor) so reads each state once and writes
    each once, with no copy of the states before the step.

    Destination-passing style: `outs(%o_init, %pool)` name the output and the
    pool the results update, so bufferization updates the pool in place.

    Operands: `q`, `k` `[N, H, K]`, `v` `[N, HV, V]`, optional `gate`
    `[N, HV]` / `[N, HV, K]`, `beta` `[N, HV]`, `A_log`, `dt_bias`;
    `indices` `[N]` (i32 or i64); outs: `o_init` `[N, HV, V]`, `state_pool`
    `[P, HV, K, V]` (`v_major`: `[P, HV, V, K]`). Prologue attributes as for
    `kda.gated_delta`.

    ```mlir
    %o, %pool2 = kda.decode_step delta %q, %k, %v beta(%b : tensor<64x32xf32>)
        indices(%idx : tensor<64xi32>)
        outs(%o0, %pool : tensor<64x32x128xbf16>, tensor<512x32x128x128xf32>)
        : tensor<64x32x128xbf16>, tensor<64x32x128xbf16>, tensor<64x32x128xbf16>
    ```
  }];
  let arguments = (ins
    AnyRankedTensor:$q,
    AnyRankedTensor:$k,
    AnyRankedTensor:$v,
    Optional<AnyRankedTensor>:$gate,
    Optional<AnyRankedTensor>:$beta,
    Optional<AnyRankedTensor>:$A_log,
    Optional<AnyRankedTensor>:$dt_bias,
    AnyRankedTensor:$indices,
    Optional<AnyRankedTensor>:$read_indices,
    Optional<AnyRankedTensor>:$read_pool,
    AnyRankedTensor:$o_init,
    AnyRankedTensor:$state_pool,
    Kda_UpdateRuleAttr:$update,
    OptionalAttr<F64Attr>:$scale,
    DefaultValuedAttr<Kda_StateLayoutAttr, "StateLayout::k_major">:$state_layout,
    UnitAttr:$qk_l2norm,
    DefaultValuedAttr<Kda_BetaActivationAttr, "BetaActivation::none">:$beta_activation,
    DefaultValuedAttr<Kda_GateActivationAttr, "GateActivation::none">:$gate_activation,
    OptionalAttr<F64Attr>:$lower_bound,
    OptionalAttr<Kda_TileAttr>:$tile
  );
  let results = (outs AnyRankedTensor:$o, AnyRankedTensor:$new_state_pool);
  let assemblyFormat = [{
    custom<EnumKeyword>($update) $q `,` $k `,` $v
    (`gate` `(` $gate^ `:` type($gate) `)`)?
    (`beta` `(` $beta^ `:` type($beta) `)`)?
    (`A_log` `(` $A_log^ `:` type($A_log) `)`)?
    (`dt_bias` `(` $dt_bias^ `:` type($dt_bias) `)`)?
    `indices` `(` $indices `:` type($indices) `)`
    (`read_indices` `(` $read_indices^ `:` type($read_indices) `)`)?
    (`read_pool` `(` $read_pool^ `:` type($read_pool) `)`)?
    `outs` `(` $o_init `,` $state_pool `:` type($o_init) `,` type($state_pool) `)`
    attr-dict `:` type($q) `,` type($k) `,` type($v)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    std::optional<GateGranularity> getGateGranularity();
    double getScaleOrDefault();
    MutableOperandRange getDpsInitsMutable();
  }];
}

//===----------------------------------------------------------------------===//
// kda.window_attention
//===----------------------------------------------------------------------===//

def Kda_WindowAttentionOp : Kda_Op<"window_attention",
    [Pure, AttrSizedOperandSegments, Kda_KernelAbiOpInterface]> {
  let summary = "causal sliding-window softmax attention";
  let description = [{
    Token t of a sequence attends to its last W positions
    `max(start, t - W + 1) .. t` with `softmax(scale q k^T) v` (SPEC.md
    section 5), never across `cu_seqlens` boundaries. W is the `window`
    attribute (one per layer) or, the adaptive window, the per-position
    `window_sizes` tensor `[T]` of integers >= 1: exactly one of the two.

    Head grouping covers GQA and the KDA grouping alike: q `[B, T, HQ, K]`,
    k `[B, T, HK, K]`, v `[B, T, HV, V]`, output `[B, T, HO, V]` with
    HO = max(HQ, HV) and each of HQ, HK, HV dividing HO; output head `h` reads
    q head `h / (HO/HQ)`, k head `h / (HO/HK)`, v head `h / (HO/HV)`.

    ```mlir
    %o = kda.window_attention %q, %k, %v {window = 512 : i64}
        : tensor<1x8192x32x128xbf16>, tensor<1x8192x32x128xbf16>,
          tensor<1x8192x32x128xbf16> -> tensor<1x8192x32x128xbf16>
    ```

    A hybrid's mix may be part of the op (kda-fuse-window-mix makes it so
    where a `kda.hybrid` mixes a window with another branch): with `mix`
    (`#kda<combine sum>` or `#kda<combine gated>`) and `mix_linear` x of the
    result's type, the op computes `kda.hybrid mix x, window` in its
    epilogue, in registers: `o = x + window` (sum), or
    `o = sigmoid(z) * x + (1 - sigmoid(z)) * window` (gated, `mix_gate` z
    `[B, T, HO]` or `[B, T, HO, V]`).

    `earlier_keys`: k and v hold S >= T rows, `[B, S, HK, K]` and
    `[B, S, HV, V]`, of which the queries are the last T (query row t sits
    at key row t + S - T and attends to key rows
    `max(0, t + S - T - W + 1) .. t + S - T`): a chunk of a sequence whose
    earlier keys are kept, as a layer run in pieces or a chunked prefill
    reads them. Dense sequences only (no `cu_seqlens`); per-position
    windows are per query row, `[T]`. The kernel's ABI then names the key
    rows `S`, a symbol of their own.

    ```mlir
    %o = kda.window_attention %q, %k, %v {window = 512 : i64, earlier_keys}
        : tensor<1x1024x32x128xbf16>, tensor<1x4096x32x128xbf16>,
          tensor<1x4096x32x128xbf16> -> tensor<1x1024x32x128xbf16>
    ```

    ```mlir
    %o = kda.window_attention %q, %k, %v mix_linear(%x : tensor<1x64x4x32xbf16>)
        mix_gate(%z : tensor<1x64x4xf32>) {window = 16 : i64, mix = #kda<combine gated>}
        : tensor<1x64x4x32xbf16>, tensor<1x64x4x32xbf16>, tensor<1x64x4x32xbf16>
        -> tensor<1x64x4x32xbf16>
    ```
  }];
  let arguments = (ins
    AnyRankedTensor:$q,
    AnyRankedTensor:$k,
    AnyRankedTensor:$v,
    Optional<AnyRankedTensor>:$window_sizes,
    Optional<AnyRankedTensor>:$cu_seqlens,
    Optional<AnyRankedTensor>:$mix_linear,
    Optional<AnyRankedTensor>:$mix_gate,
    OptionalAttr<I64Attr>:$window,
    OptionalAttr<F64Attr>:$scale,
    OptionalAttr<Kda_TileAttr>:$tile,
    OptionalAttr<Kda_CombineModeAttr>:$mix,
    UnitAttr:$earlier_keys
  );
  let results = (outs AnyRankedTensor:$o);
  let assemblyFormat = [{
    $q `,` $k `,` $v
    (`window_sizes` `(` $window_sizes^ `:` type($window_sizes) `)`)?
    (`cu_seqlens` `(` $cu_seqlens^ `:` type($cu_seqlens) `)`)?
    (`mix_linear` `(` $mix_linear^ `:` type($mix_linear) `)`)?
    (`mix_gate` `(` $mix_gate^ `:` type($mix_gate) `)`)?
    attr-dict `:` type($q) `,` type($k) `,` type($v) `->` type($o)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// kda.hybrid
//===----------------------------------------------------------------------===//

def Kda_HybridOp : Kda_Op<"hybrid", [Pure, AttrSizedOperandSegments,
    Kda_KernelAbiOpInterface]> {
  let summary = "combines the outputs of several branches";
  let description = [{
    `sum`: `o = sum_i branches[i]` (two or more branches, e.g. linear plus
    window attention). `gated`: exactly two branches and a gate `z`,
    `o = sigmoid(z) * branches[0] + (1 - sigmoid(z)) * branches[1]`, with `z`
    head-wise `[B, T, HV]` or channel-wise `[B, T, HV, V]`. Every branch has
    the result's type `[B, T, HV, V]`.

    `overlap` asks for the window branch to run beside the other branch's
    state pass instead of after it: kda-fuse-window-mix still folds the mix
    into the window (marking it `kda.overlap`), and on NVIDIA's register
    kernels kda-gpu-layer-entry puts the state pass on the side stream, a
    multiprocessor a block, publishing its progress, which the window waits
    for before it reads the rows it mixes (runtime/BUNDLE.md, "Progress").

    ```mlir
    %o = kda.hybrid gated %lin, %win gate(%z : tensor<1x64x4xf32>)
        : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32> -> tensor<1x64x4x32xf32>
    ```
  }];
  let arguments = (ins
    Kda_CombineModeAttr:$mode,
    Variadic<AnyRankedTensor>:$branches,
    Optional<AnyRankedTensor>:$z,
    UnitAttr:$overlap
  );
  let results = (outs AnyRankedTensor:$o);
  let assemblyFormat = [{
    custom<EnumKeyword>($mode) $branches (`gate` `(` $z^ `:` type($z) `)`)? attr-dict
    `:` type($branches) `->` type($o)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// kda.multi_scale
//===----------------------------------------------------------------------===//

def Kda_MultiScaleOp : Kda_Op<"multi_scale",
    [Pure, AttrSizedOperandSegments, Kda_KernelAbiOpInterface]> {
  let summary = "several recurrent states over the same q, k, v";
  let description = [{
    M recurrences of `kda.gated_delta` share q, k, v and beta but decay with
    different gates: either one gate tensor scaled by the constants
    `decay_scales = [c_1, .., c_M]` (scale m decays with `c_m * g`), or M gate
    tensors of the same shape. Outputs are combined by `sum`
    (`o = sum_m o_m`) or `gated` (`o = sum_m sigmoid(z[..., m]) * o_m` with
    `z` `[B, T, HV, M]`). The optional `initial_states` and `final_states`
    stack the M states: `[M, N, HV, K, V]` (`v_major`: `[M, N, HV, V, K]`).

    ```mlir
    %o = kda.multi_scale delta sum %q, %k, %v gates(%g : tensor<1x64x4xf32>)
        beta(%b : tensor<1x64x4xf32>) {decay_scales = [1.0, 0.25]}
        : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>
        -> tensor<1x64x4x32xf32>
    ```
  }];
  let arguments = (ins
    Kda_UpdateRuleAttr:$update,
    Kda_CombineModeAttr:$mode,
    AnyRankedTensor:$q,
    AnyRankedTensor:$k,
    AnyRankedTensor:$v,
    Variadic<AnyRankedTensor>:$gates,
    Optional<AnyRankedTensor>:$beta,
    Optional<AnyRankedTensor>:$initial_states,
    Optional<AnyRankedTensor>:$cu_seqlens,
    Optional<AnyRankedTensor>:$z,
    OptionalAttr<F64ArrayAttr>:$decay_scales,
    OptionalAttr<F64Attr>:$scale,
    DefaultValuedAttr<Kda_StateLayoutAttr, "StateLayout::k_major">:$state_layout,
    UnitAttr:$qk_l2norm,
    DefaultValuedAttr<Kda_BetaActivationAttr, "BetaActivation::none">:$beta_activation,
    OptionalAttr<Kda_TileAttr>:$tile
  );
  let results = (outs
    AnyRankedTensor:$o,
    Optional<AnyRankedTensor>:$final_states
  );
  let assemblyFormat = [{
    custom<EnumKeyword>($update) custom<EnumKeyword>($mode) $q `,` $k `,` $v
    `gates` `(` $gates `:` type($gates) `)`
    (`beta` `(` $beta^ `:` type($beta) `)`)?
    (`initial_states` `(` $initial_states^ `:` type($initial_states) `)`)?
    (`cu_seqlens` `(` $cu_seqlens^ `:` type($cu_seqlens) `)`)?
    (`z` `(` $z^ `:` type($z) `)`)?
    attr-dict `:` type($q) `,` type($k) `,` type($v) `->` type($o)
    (`final_states` type($final_states)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Number of scales M.
    int64_t getNumScales();
  }];
}

#endif // KDA_DIALECT_KDAOPS_TD
