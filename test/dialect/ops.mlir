// RUN: kda-opt %s | FileCheck %s
// RUN: kda-opt %s | kda-opt | FileCheck %s
// RUN: kda-opt %s --mlir-print-op-generic | kda-opt | FileCheck %s
// RUN: kda-opt %s --kda-decompose | FileCheck %s --check-prefix=DECOMPOSE

// Round trip of every kda op, attribute and enum value (custom form, printed
// form parsed again, and the generic form parsed back). Shapes: B = 2,
// T = 64, H = 4, K = 32, HV = 4 (8 with GVA), V = 16 (K != V so that a
// swapped state layout would not verify).

//===----------------------------------------------------------------------===//
// Attributes on their own: every enum value, #kda.tile defaults and fields.
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @enum_values()
// CHECK-SAME: beta_none = #kda<beta none>
// CHECK-SAME: beta_sigmoid = #kda<beta sigmoid>
// CHECK-SAME: beta_sigmoid_neg = #kda<beta sigmoid_neg_eigval>
// CHECK-SAME: combine_gated = #kda<combine gated>
// CHECK-SAME: combine_sum = #kda<combine sum>
// CHECK-SAME: gate_lower_bound = #kda<gate lower_bound>
// CHECK-SAME: gate_none = #kda<gate none>
// CHECK-SAME: gate_softplus = #kda<gate softplus>
// CHECK-SAME: granularity_channel = #kda<granularity channel>
// CHECK-SAME: granularity_head = #kda<granularity head>
// CHECK-SAME: layout_k = #kda<layout k_major>
// CHECK-SAME: layout_v = #kda<layout v_major>
// CHECK-SAME: update_additive = #kda<update additive>
// CHECK-SAME: update_delta = #kda<update delta>
func.func @enum_values() attributes {
    update_delta = #kda<update delta>, update_additive = #kda<update additive>,
    layout_k = #kda<layout k_major>, layout_v = #kda<layout v_major>,
    beta_none = #kda<beta none>, beta_sigmoid = #kda<beta sigmoid>,
    beta_sigmoid_neg = #kda<beta sigmoid_neg_eigval>,
    gate_none = #kda<gate none>, gate_softplus = #kda<gate softplus>,
    gate_lower_bound = #kda<gate lower_bound>,
    granularity_head = #kda<granularity head>,
    granularity_channel = #kda<granularity channel>,
    combine_sum = #kda<combine sum>, combine_gated = #kda<combine gated>} {
  return
}

// Defaults are elided when printed: an explicit default equals #kda.tile<>.
// CHECK-LABEL: func.func @tile_values()
// CHECK-SAME: tile_all = #kda.tile<chunk = 32, sub_chunk = 8, v_block = 64, warps = 8, stages = 3, segments = 4>
// CHECK-SAME: tile_chunk16 = #kda.tile<chunk = 16>
// CHECK-SAME: tile_default = #kda.tile<>
// CHECK-SAME: tile_explicit_defaults = #kda.tile<>
// CHECK-SAME: tile_limits = #kda.tile<sub_chunk = 64, warps = 16, stages = 8>
// CHECK-SAME: tile_min = #kda.tile<chunk = 16, sub_chunk = 1, warps = 1, stages = 1>
// CHECK-SAME: tile_some = #kda.tile<sub_chunk = 32, v_block = 128>
func.func @tile_values() attributes {
    tile_default = #kda.tile<>,
    tile_explicit_defaults = #kda.tile<chunk = 64, sub_chunk = 16, v_block = 0, warps = 4, stages = 2, segments = 1>,
    tile_all = #kda.tile<chunk = 32, sub_chunk = 8, v_block = 64, warps = 8, stages = 3, segments = 4>,
    tile_some = #kda.tile<v_block = 128, sub_chunk = 32>,
    tile_chunk16 = #kda.tile<chunk = 16>,
    tile_min = #kda.tile<chunk = 16, sub_chunk = 1, warps = 1, stages = 1, segments = 1>,
    tile_limits = #kda.tile<chunk = 64, sub_chunk = 64, warps = 16, stages = 8>} {
  return
}

//===----------------------------------------------------------------------===//
// kda.gated_delta: the family (SPEC.md section 2).
//===----------------------------------------------------------------------===//

// Linear attention: additive update, no gate, no beta; nothing optional.
// CHECK-LABEL: func.func @linear_attention
// CHECK: %{{.*}} = kda.gated_delta additive %arg0, %arg1, %arg2 :
// CHECK-SAME: tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
// CHECK-NOT: final_state
// CHECK-NEXT: return
func.func @linear_attention(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x32xf32>,
                            %v: tensor<2x64x4x16xf32>) -> tensor<2x64x4x16xf32> {
  %o = kda.gated_delta additive %q, %k, %v
      : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>
      -> tensor<2x64x4x16xf32>
  return %o : tensor<2x64x4x16xf32>
}

// GLA: additive update, channel-wise gate [B, T, HV, K]; f16 activations.
// CHECK-LABEL: func.func @gla
// CHECK: kda.gated_delta additive %arg0, %arg1, %arg2 gate(%arg3 : tensor<2x64x4x32xf32>) :
// CHECK-SAME: tensor<2x64x4x32xf16>, tensor<2x64x4x32xf16>, tensor<2x64x4x16xf16> -> tensor<2x64x4x16xf16>
// CHECK-SAME: final_state tensor<2x4x32x16xf32>
func.func @gla(%q: tensor<2x64x4x32xf16>, %k: tensor<2x64x4x32xf16>,
               %v: tensor<2x64x4x16xf16>, %g: tensor<2x64x4x32xf32>)
    -> (tensor<2x64x4x16xf16>, tensor<2x4x32x16xf32>) {
  %o, %s = kda.gated_delta additive %q, %k, %v gate(%g : tensor<2x64x4x32xf32>)
      : tensor<2x64x4x32xf16>, tensor<2x64x4x32xf16>, tensor<2x64x4x16xf16>
      -> tensor<2x64x4x16xf16> final_state tensor<2x4x32x16xf32>
  return %o, %s : tensor<2x64x4x16xf16>, tensor<2x4x32x16xf32>
}

// Mamba2 / simple GLA (and RetNet with a constant gate): additive update,
// head-wise gate [B, T, HV]; bf16 activations and a bf16 gate.
// CHECK-LABEL: func.func @mamba2_simple_gla
// CHECK: kda.gated_delta additive %arg0, %arg1, %arg2 gate(%arg3 : tensor<2x64x4xbf16>)
// CHECK-SAME: initial_state(%arg4 : tensor<2x4x32x16xf32>) :
// CHECK-SAME: tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xbf16>
// CHECK-SAME: final_state tensor<2x4x32x16xf32>
func.func @mamba2_simple_gla(%q: tensor<2x64x4x32xbf16>, %k: tensor<2x64x4x32xbf16>,
                             %v: tensor<2x64x4x16xbf16>, %g: tensor<2x64x4xbf16>,
                             %s0: tensor<2x4x32x16xf32>)
    -> (tensor<2x64x4x16xbf16>, tensor<2x4x32x16xf32>) {
  %o, %s = kda.gated_delta additive %q, %k, %v gate(%g : tensor<2x64x4xbf16>)
      initial_state(%s0 : tensor<2x4x32x16xf32>)
      : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16>
      -> tensor<2x64x4x16xbf16> final_state tensor<2x4x32x16xf32>
  return %o, %s : tensor<2x64x4x16xbf16>, tensor<2x4x32x16xf32>
}

// DeltaNet: delta update, no gate, beta given directly.
// CHECK-LABEL: func.func @deltanet
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 beta(%arg3 : tensor<2x64x4xf32>) :
// CHECK-SAME: -> tensor<2x64x4x16xf32>
// CHECK-NOT: gate(
// CHECK-NEXT: return
func.func @deltanet(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x32xf32>,
                    %v: tensor<2x64x4x16xf32>, %b: tensor<2x64x4xf32>)
    -> tensor<2x64x4x16xf32> {
  %o = kda.gated_delta delta %q, %k, %v beta(%b : tensor<2x64x4xf32>)
      : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>
      -> tensor<2x64x4x16xf32>
  return %o : tensor<2x64x4x16xf32>
}

// DeltaNet without beta (beta = 1).
// CHECK-LABEL: func.func @deltanet_no_beta
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 :
// CHECK-SAME: -> tensor<2x64x4x16xf32>
func.func @deltanet_no_beta(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x32xf32>,
                            %v: tensor<2x64x4x16xf32>) -> tensor<2x64x4x16xf32> {
  %o = kda.gated_delta delta %q, %k, %v
      : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>
      -> tensor<2x64x4x16xf32>
  return %o : tensor<2x64x4x16xf32>
}

// Gated DeltaNet: delta update, head-wise gate, beta, initial and final state.
// CHECK-LABEL: func.func @gated_deltanet
// CHECK: %[[O:.*]], %[[S:.*]] = kda.gated_delta delta %arg0, %arg1, %arg2
// CHECK-SAME: gate(%arg3 : tensor<2x64x4xf32>) beta(%arg4 : tensor<2x64x4xf32>)
// CHECK-SAME: initial_state(%arg5 : tensor<2x4x32x16xf32>) :
// CHECK-SAME: tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xbf16>
// CHECK-SAME: final_state tensor<2x4x32x16xf32>
// CHECK-NEXT: return %[[O]], %[[S]]
func.func @gated_deltanet(%q: tensor<2x64x4x32xbf16>, %k: tensor<2x64x4x32xbf16>,
                          %v: tensor<2x64x4x16xbf16>, %g: tensor<2x64x4xf32>,
                          %b: tensor<2x64x4xf32>, %s0: tensor<2x4x32x16xf32>)
    -> (tensor<2x64x4x16xbf16>, tensor<2x4x32x16xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x64x4xf32>)
      beta(%b : tensor<2x64x4xf32>) initial_state(%s0 : tensor<2x4x32x16xf32>)
      : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16>
      -> tensor<2x64x4x16xbf16> final_state tensor<2x4x32x16xf32>
  return %o, %s : tensor<2x64x4x16xbf16>, tensor<2x4x32x16xf32>
}

// KDA with the full prologue: channel-wise raw gates, beta logits, A_log,
// dt_bias, q/k L2 norm, lower-bound gate, explicit scale and tile.
// CHECK-LABEL: func.func @kda_full_prologue
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2
// CHECK-SAME: gate(%arg3 : tensor<2x64x4x32xf32>) beta(%arg4 : tensor<2x64x4xf32>)
// CHECK-SAME: initial_state(%arg5 : tensor<2x4x32x16xf32>)
// CHECK-SAME: A_log(%arg6 : tensor<4xf32>) dt_bias(%arg7 : tensor<4x32xf32>)
// CHECK-SAME: {beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>,
// CHECK-SAME: lower_bound = -5.000000e+00 : f64, qk_l2norm, scale = 1.250000e-01 : f64,
// CHECK-SAME: tile = #kda.tile<chunk = 32, sub_chunk = 8, v_block = 16, warps = 8, stages = 3>}
// CHECK-SAME: : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xbf16>
// CHECK-SAME: final_state tensor<2x4x32x16xf32>
func.func @kda_full_prologue(%q: tensor<2x64x4x32xbf16>, %k: tensor<2x64x4x32xbf16>,
                             %v: tensor<2x64x4x16xbf16>, %g: tensor<2x64x4x32xf32>,
                             %b: tensor<2x64x4xf32>, %s0: tensor<2x4x32x16xf32>,
                             %a: tensor<4xf32>, %d: tensor<4x32xf32>)
    -> (tensor<2x64x4x16xbf16>, tensor<2x4x32x16xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x64x4x32xf32>)
      beta(%b : tensor<2x64x4xf32>) initial_state(%s0 : tensor<2x4x32x16xf32>)
      A_log(%a : tensor<4xf32>) dt_bias(%d : tensor<4x32xf32>)
      {qk_l2norm, scale = 0.125 : f64, beta_activation = #kda<beta sigmoid>,
       gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64,
       tile = #kda.tile<chunk = 32, sub_chunk = 8, v_block = 16, warps = 8, stages = 3>}
      : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16>
      -> tensor<2x64x4x16xbf16> final_state tensor<2x4x32x16xf32>
  return %o, %s : tensor<2x64x4x16xbf16>, tensor<2x4x32x16xf32>
}

// KDA, Kimi-Linear-48B style: softplus gate with A_log and dt_bias, beta with
// negative eigenvalues allowed (2 sigmoid).
// CHECK-LABEL: func.func @kda_softplus
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 gate(%arg3 : tensor<2x64x4x32xbf16>)
// CHECK-SAME: beta(%arg4 : tensor<2x64x4xbf16>) A_log(%arg5 : tensor<4xf32>) dt_bias(%arg6 : tensor<4x32xf32>)
// CHECK-SAME: {beta_activation = #kda<beta sigmoid_neg_eigval>, gate_activation = #kda<gate softplus>}
// CHECK-SAME: -> tensor<2x64x4x16xf32>
func.func @kda_softplus(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x32xf32>,
                        %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xbf16>,
                        %b: tensor<2x64x4xbf16>, %a: tensor<4xf32>,
                        %d: tensor<4x32xf32>) -> tensor<2x64x4x16xf32> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x64x4x32xbf16>)
      beta(%b : tensor<2x64x4xbf16>) A_log(%a : tensor<4xf32>)
      dt_bias(%d : tensor<4x32xf32>)
      {beta_activation = #kda<beta sigmoid_neg_eigval>,
       gate_activation = #kda<gate softplus>}
      : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>
      -> tensor<2x64x4x16xf32>
  return %o : tensor<2x64x4x16xf32>
}

// Lower-bound gate without A_log (g = lb sigmoid(g_raw + dt_bias)), lb at the
// other end of its range; head-wise gate so dt_bias is [HV].
// CHECK-LABEL: func.func @gdn_lower_bound_no_a_log
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 gate(%arg3 : tensor<2x64x4xf32>)
// CHECK-SAME: beta(%arg4 : tensor<2x64x4xf32>) dt_bias(%arg5 : tensor<4xf16>)
// CHECK-SAME: {gate_activation = #kda<gate lower_bound>, lower_bound = -1.000000e-01 : f64}
// CHECK-NOT: A_log
func.func @gdn_lower_bound_no_a_log(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x32xf32>,
                                    %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>,
                                    %b: tensor<2x64x4xf32>, %d: tensor<4xf16>)
    -> tensor<2x64x4x16xf32> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x64x4xf32>)
      beta(%b : tensor<2x64x4xf32>) dt_bias(%d : tensor<4xf16>)
      {gate_activation = #kda<gate lower_bound>, lower_bound = -0.1 : f64}
      : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>
      -> tensor<2x64x4x16xf32>
  return %o : tensor<2x64x4x16xf32>
}

// Softplus gate with A_log only (no dt_bias), head-wise; plain sigmoid beta.
// CHECK-LABEL: func.func @gdn_softplus_a_log_only
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 gate(%arg3 : tensor<2x64x4xf32>)
// CHECK-SAME: beta(%arg4 : tensor<2x64x4xf32>) A_log(%arg5 : tensor<4xf32>)
// CHECK-SAME: {beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate softplus>}
// CHECK-NOT: dt_bias
func.func @gdn_softplus_a_log_only(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x32xf32>,
                                   %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>,
                                   %b: tensor<2x64x4xf32>, %a: tensor<4xf32>)
    -> tensor<2x64x4x16xf32> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x64x4xf32>)
      beta(%b : tensor<2x64x4xf32>) A_log(%a : tensor<4xf32>)
      {beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate softplus>}
      : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>
      -> tensor<2x64x4x16xf32>
  return %o : tensor<2x64x4x16xf32>
}

// Default-valued attributes spelled out are accepted and elided on print.
// CHECK-LABEL: func.func @explicit_defaults
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 beta(%arg3 : tensor<2x64x4xf32>) :
// CHECK-NOT: state_layout
// CHECK-NOT: beta_activation
// CHECK-NOT: gate_activation
// CHECK: return
func.func @explicit_defaults(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x32xf32>,
                             %v: tensor<2x64x4x16xf32>, %b: tensor<2x64x4xf32>)
    -> tensor<2x64x4x16xf32> {
  %o = kda.gated_delta delta %q, %k, %v beta(%b : tensor<2x64x4xf32>)
      {state_layout = #kda<layout k_major>, beta_activation = #kda<beta none>,
       gate_activation = #kda<gate none>}
      : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>
      -> tensor<2x64x4x16xf32>
  return %o : tensor<2x64x4x16xf32>
}

// V-major state [N, HV, V, K], bf16 state (initial and final).
// CHECK-LABEL: func.func @v_major_bf16_state
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 gate(%arg3 : tensor<2x64x4x32xf32>)
// CHECK-SAME: beta(%arg4 : tensor<2x64x4xf32>) initial_state(%arg5 : tensor<2x4x16x32xbf16>)
// CHECK-SAME: {state_layout = #kda<layout v_major>}
// CHECK-SAME: -> tensor<2x64x4x16xf32> final_state tensor<2x4x16x32xbf16>
func.func @v_major_bf16_state(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x32xf32>,
                              %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>,
                              %b: tensor<2x64x4xf32>, %s0: tensor<2x4x16x32xbf16>)
    -> (tensor<2x64x4x16xf32>, tensor<2x4x16x32xbf16>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x64x4x32xf32>)
      beta(%b : tensor<2x64x4xf32>) initial_state(%s0 : tensor<2x4x16x32xbf16>)
      {state_layout = #kda<layout v_major>}
      : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>
      -> tensor<2x64x4x16xf32> final_state tensor<2x4x16x32xbf16>
  return %o, %s : tensor<2x64x4x16xf32>, tensor<2x4x16x32xbf16>
}

// GVA: HV = 2H (H = 4, HV = 8); beta, gate, state and o carry HV.
// CHECK-LABEL: func.func @gva
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 gate(%arg3 : tensor<2x64x8x32xf32>)
// CHECK-SAME: beta(%arg4 : tensor<2x64x8xf32>) :
// CHECK-SAME: tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x8x16xf32> -> tensor<2x64x8x16xf32>
// CHECK-SAME: final_state tensor<2x8x32x16xf32>
func.func @gva(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x32xf32>,
               %v: tensor<2x64x8x16xf32>, %g: tensor<2x64x8x32xf32>,
               %b: tensor<2x64x8xf32>) -> (tensor<2x64x8x16xf32>, tensor<2x8x32x16xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x64x8x32xf32>)
      beta(%b : tensor<2x64x8xf32>)
      : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x8x16xf32>
      -> tensor<2x64x8x16xf32> final_state tensor<2x8x32x16xf32>
  return %o, %s : tensor<2x64x8x16xf32>, tensor<2x8x32x16xf32>
}

// Varlen with i32 offsets: B = 1, N = 3 sequences (cu_seqlens [4]).
// CHECK-LABEL: func.func @varlen_i32
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 gate(%arg3 : tensor<1x100x4x32xf32>)
// CHECK-SAME: beta(%arg4 : tensor<1x100x4xf32>) initial_state(%arg5 : tensor<3x4x32x16xf32>)
// CHECK-SAME: cu_seqlens(%arg6 : tensor<4xi32>) :
// CHECK-SAME: -> tensor<1x100x4x16xbf16> final_state tensor<3x4x32x16xf32>
func.func @varlen_i32(%q: tensor<1x100x4x32xbf16>, %k: tensor<1x100x4x32xbf16>,
                      %v: tensor<1x100x4x16xbf16>, %g: tensor<1x100x4x32xf32>,
                      %b: tensor<1x100x4xf32>, %s0: tensor<3x4x32x16xf32>,
                      %cu: tensor<4xi32>)
    -> (tensor<1x100x4x16xbf16>, tensor<3x4x32x16xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x100x4x32xf32>)
      beta(%b : tensor<1x100x4xf32>) initial_state(%s0 : tensor<3x4x32x16xf32>)
      cu_seqlens(%cu : tensor<4xi32>)
      : tensor<1x100x4x32xbf16>, tensor<1x100x4x32xbf16>, tensor<1x100x4x16xbf16>
      -> tensor<1x100x4x16xbf16> final_state tensor<3x4x32x16xf32>
  return %o, %s : tensor<1x100x4x16xbf16>, tensor<3x4x32x16xf32>
}

// Varlen with i64 offsets and boundary states (NT is not known statically
// with varlen, so any NT verifies).
// CHECK-LABEL: func.func @varlen_i64_boundary_states
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = kda.gated_delta additive %arg0, %arg1, %arg2 gate(%arg3 : tensor<1x100x4xf32>)
// CHECK-SAME: cu_seqlens(%arg4 : tensor<3xi64>) {boundary_interval = 32 : i64}
// CHECK-SAME: -> tensor<1x100x4x16xf32> final_state tensor<2x4x32x16xf32>
// CHECK-SAME: boundary_states tensor<2x4x4x32x16xf32>
func.func @varlen_i64_boundary_states(%q: tensor<1x100x4x32xf32>, %k: tensor<1x100x4x32xf32>,
                                      %v: tensor<1x100x4x16xf32>, %g: tensor<1x100x4xf32>,
                                      %cu: tensor<3xi64>)
    -> (tensor<1x100x4x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x4x32x16xf32>) {
  %o, %s, %bs = kda.gated_delta additive %q, %k, %v gate(%g : tensor<1x100x4xf32>)
      cu_seqlens(%cu : tensor<3xi64>) {boundary_interval = 32 : i64}
      : tensor<1x100x4x32xf32>, tensor<1x100x4x32xf32>, tensor<1x100x4x16xf32>
      -> tensor<1x100x4x16xf32> final_state tensor<2x4x32x16xf32> boundary_states tensor<2x4x4x32x16xf32>
  return %o, %s, %bs : tensor<1x100x4x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x4x32x16xf32>
}

// Boundary states into the slots of a pool (a block table [N, NB]): the
// result is the pool [S, HV, K, V], any S and NB.
// CHECK-LABEL: func.func @boundary_states_into_pool
// CHECK: cu_seqlens(%arg4 : tensor<3xi64>) boundary_indices(%arg5 : tensor<2x7xi32>) {boundary_interval = 32 : i64}
// CHECK-SAME: boundary_states tensor<40x4x32x16xf32>
func.func @boundary_states_into_pool(%q: tensor<1x100x4x32xf32>, %k: tensor<1x100x4x32xf32>,
                                     %v: tensor<1x100x4x16xf32>, %g: tensor<1x100x4xf32>,
                                     %cu: tensor<3xi64>, %t: tensor<2x7xi32>)
    -> (tensor<1x100x4x16xf32>, tensor<40x4x32x16xf32>) {
  %o, %bs = kda.gated_delta additive %q, %k, %v gate(%g : tensor<1x100x4xf32>)
      cu_seqlens(%cu : tensor<3xi64>) boundary_indices(%t : tensor<2x7xi32>) {boundary_interval = 32 : i64}
      : tensor<1x100x4x32xf32>, tensor<1x100x4x32xf32>, tensor<1x100x4x16xf32>
      -> tensor<1x100x4x16xf32> boundary_states tensor<40x4x32x16xf32>
  return %o, %bs : tensor<1x100x4x16xf32>, tensor<40x4x32x16xf32>
}

// Boundary states with final_state: NT = ceil(100 / 64) = 2, the tile's
// chunk (32) divides boundary_interval (64); v_major states.
// (Boundary states WITHOUT final_state do not round trip through the custom
// form: see boundary-states-only.mlir.)
// CHECK-LABEL: func.func @boundary_states_v_major
// CHECK: %[[O:[a-z_0-9]+]], %{{[a-z_0-9]+}}, %[[BS:[a-z_0-9]+]] = kda.gated_delta delta %arg0, %arg1, %arg2 beta(%arg3 : tensor<2x100x4xf32>)
// CHECK-SAME: {boundary_interval = 64 : i64, state_layout = #kda<layout v_major>, tile = #kda.tile<chunk = 32>}
// CHECK-SAME: -> tensor<2x100x4x16xf32> final_state tensor<2x4x16x32xf32>
// CHECK-SAME: boundary_states tensor<2x2x4x16x32xf32>
// CHECK-NEXT: return %[[O]], %[[BS]]
func.func @boundary_states_v_major(%q: tensor<2x100x4x32xf32>, %k: tensor<2x100x4x32xf32>,
                                   %v: tensor<2x100x4x16xf32>, %b: tensor<2x100x4xf32>)
    -> (tensor<2x100x4x16xf32>, tensor<2x2x4x16x32xf32>) {
  %o, %s, %bs = kda.gated_delta delta %q, %k, %v beta(%b : tensor<2x100x4xf32>)
      {boundary_interval = 64 : i64, state_layout = #kda<layout v_major>,
       tile = #kda.tile<chunk = 32>}
      : tensor<2x100x4x32xf32>, tensor<2x100x4x32xf32>, tensor<2x100x4x16xf32>
      -> tensor<2x100x4x16xf32> final_state tensor<2x4x16x32xf32> boundary_states tensor<2x2x4x16x32xf32>
  return %o, %bs : tensor<2x100x4x16xf32>, tensor<2x2x4x16x32xf32>
}

// Boundary interval longer than the sequence: NT = 1.
// CHECK-LABEL: func.func @boundary_interval_huge
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 {boundary_interval = 9223372036854775807 : i64}
// CHECK-SAME: boundary_states tensor<2x1x4x32x16xf32>
func.func @boundary_interval_huge(%q: tensor<2x100x4x32xf32>, %k: tensor<2x100x4x32xf32>,
                                  %v: tensor<2x100x4x16xf32>)
    -> (tensor<2x100x4x16xf32>, tensor<2x1x4x32x16xf32>) {
  %o, %s, %bs = kda.gated_delta delta %q, %k, %v
      {boundary_interval = 9223372036854775807 : i64}
      : tensor<2x100x4x32xf32>, tensor<2x100x4x32xf32>, tensor<2x100x4x16xf32>
      -> tensor<2x100x4x16xf32> final_state tensor<2x4x32x16xf32> boundary_states tensor<2x1x4x32x16xf32>
  return %o, %bs : tensor<2x100x4x16xf32>, tensor<2x1x4x32x16xf32>
}

// Dynamic dimensions everywhere: nothing to check statically.
// CHECK-LABEL: func.func @dynamic_dims
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 gate(%arg3 : tensor<?x?x?x?xf32>)
// CHECK-SAME: beta(%arg4 : tensor<?x?x?xf32>) initial_state(%arg5 : tensor<?x?x?x?xf32>)
// CHECK-SAME: cu_seqlens(%arg6 : tensor<?xi64>) {boundary_interval = 64 : i64} :
// CHECK-SAME: tensor<?x?x?x?xf16>, tensor<?x?x?x?xf16>, tensor<?x?x?x?xf16> -> tensor<?x?x?x?xf16>
// CHECK-SAME: final_state tensor<?x?x?x?xf32> boundary_states tensor<?x?x?x?x?xf32>
func.func @dynamic_dims(%q: tensor<?x?x?x?xf16>, %k: tensor<?x?x?x?xf16>,
                        %v: tensor<?x?x?x?xf16>, %g: tensor<?x?x?x?xf32>,
                        %b: tensor<?x?x?xf32>, %s0: tensor<?x?x?x?xf32>,
                        %cu: tensor<?xi64>)
    -> (tensor<?x?x?x?xf16>, tensor<?x?x?x?xf32>, tensor<?x?x?x?x?xf32>) {
  %o, %s, %bs = kda.gated_delta delta %q, %k, %v gate(%g : tensor<?x?x?x?xf32>)
      beta(%b : tensor<?x?x?xf32>) initial_state(%s0 : tensor<?x?x?x?xf32>)
      cu_seqlens(%cu : tensor<?xi64>) {boundary_interval = 64 : i64}
      : tensor<?x?x?x?xf16>, tensor<?x?x?x?xf16>, tensor<?x?x?x?xf16>
      -> tensor<?x?x?x?xf16> final_state tensor<?x?x?x?xf32> boundary_states tensor<?x?x?x?x?xf32>
  return %o, %s, %bs : tensor<?x?x?x?xf16>, tensor<?x?x?x?xf32>, tensor<?x?x?x?x?xf32>
}

// Mixed static and dynamic dimensions that agree where both are static.
// CHECK-LABEL: func.func @mixed_dynamic_dims
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 gate(%arg3 : tensor<2x?x4xf32>)
// CHECK-SAME: : tensor<?x64x4x32xf32>, tensor<2x?x?x32xf32>, tensor<2x64x?x?xf32> -> tensor<?x?x4x16xf32>
// CHECK-SAME: final_state tensor<?x4x32x?xf32>
func.func @mixed_dynamic_dims(%q: tensor<?x64x4x32xf32>, %k: tensor<2x?x?x32xf32>,
                              %v: tensor<2x64x?x?xf32>, %g: tensor<2x?x4xf32>)
    -> (tensor<?x?x4x16xf32>, tensor<?x4x32x?xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x?x4xf32>)
      : tensor<?x64x4x32xf32>, tensor<2x?x?x32xf32>, tensor<2x64x?x?xf32>
      -> tensor<?x?x4x16xf32> final_state tensor<?x4x32x?xf32>
  return %o, %s : tensor<?x?x4x16xf32>, tensor<?x4x32x?xf32>
}

//===----------------------------------------------------------------------===//
// kda.gate
//===----------------------------------------------------------------------===//

// Softplus, channel-wise, with A_log [HV] and dt_bias [HV, K].
// CHECK-LABEL: func.func @gate_softplus_channel
// CHECK: kda.gate softplus channel %arg0 A_log(%arg1 : tensor<4xf32>) dt_bias(%arg2 : tensor<4x32xf32>) :
// CHECK-SAME: tensor<2x64x4x32xbf16> -> tensor<2x64x4x32xf32>
func.func @gate_softplus_channel(%raw: tensor<2x64x4x32xbf16>, %a: tensor<4xf32>,
                                 %d: tensor<4x32xf32>) -> tensor<2x64x4x32xf32> {
  %g = kda.gate softplus channel %raw A_log(%a : tensor<4xf32>)
      dt_bias(%d : tensor<4x32xf32>)
      : tensor<2x64x4x32xbf16> -> tensor<2x64x4x32xf32>
  return %g : tensor<2x64x4x32xf32>
}

// Lower bound, channel-wise, A_log only (FlashKDA form).
// CHECK-LABEL: func.func @gate_lower_bound_channel
// CHECK: kda.gate lower_bound channel %arg0 A_log(%arg1 : tensor<4xf32>)
// CHECK-SAME: {lower_bound = -5.000000e+00 : f64} : tensor<2x64x4x32xf16> -> tensor<2x64x4x32xf32>
func.func @gate_lower_bound_channel(%raw: tensor<2x64x4x32xf16>, %a: tensor<4xf32>)
    -> tensor<2x64x4x32xf32> {
  %g = kda.gate lower_bound channel %raw A_log(%a : tensor<4xf32>)
      {lower_bound = -5.0 : f64} : tensor<2x64x4x32xf16> -> tensor<2x64x4x32xf32>
  return %g : tensor<2x64x4x32xf32>
}

// Lower bound, head-wise, dt_bias [HV] only, no A_log.
// CHECK-LABEL: func.func @gate_lower_bound_head
// CHECK: kda.gate lower_bound head %arg0 dt_bias(%arg1 : tensor<4xf32>)
// CHECK-SAME: {lower_bound = -2.500000e+00 : f64} : tensor<2x64x4xf32> -> tensor<2x64x4xf32>
func.func @gate_lower_bound_head(%raw: tensor<2x64x4xf32>, %d: tensor<4xf32>)
    -> tensor<2x64x4xf32> {
  %g = kda.gate lower_bound head %raw dt_bias(%d : tensor<4xf32>)
      {lower_bound = -2.5 : f64} : tensor<2x64x4xf32> -> tensor<2x64x4xf32>
  return %g : tensor<2x64x4xf32>
}

// Softplus, head-wise, no parameters; minimal ranks ([HV] and [HV, K]) and
// decode-shaped [N, HV, K] gates; dynamic dims.
// CHECK-LABEL: func.func @gate_minimal_ranks
// CHECK: kda.gate softplus head %arg0 : tensor<4xbf16> -> tensor<4xf32>
// CHECK: kda.gate softplus channel %arg1 : tensor<4x32xf32> -> tensor<4x32xf32>
// CHECK: kda.gate softplus channel %arg2 A_log(%arg3 : tensor<?xf32>) : tensor<?x?x?xf32> -> tensor<?x?x?xf32>
func.func @gate_minimal_ranks(%h: tensor<4xbf16>, %c: tensor<4x32xf32>,
                              %dyn: tensor<?x?x?xf32>, %a: tensor<?xf32>)
    -> (tensor<4xf32>, tensor<4x32xf32>, tensor<?x?x?xf32>) {
  %0 = kda.gate softplus head %h : tensor<4xbf16> -> tensor<4xf32>
  %1 = kda.gate softplus channel %c : tensor<4x32xf32> -> tensor<4x32xf32>
  %2 = kda.gate softplus channel %dyn A_log(%a : tensor<?xf32>)
      : tensor<?x?x?xf32> -> tensor<?x?x?xf32>
  return %0, %1, %2 : tensor<4xf32>, tensor<4x32xf32>, tensor<?x?x?xf32>
}

//===----------------------------------------------------------------------===//
// kda.decode_step
//===----------------------------------------------------------------------===//

// Gated DeltaNet decode: head-wise gate, beta, i32 indices, bf16.
// CHECK-LABEL: func.func @decode_gdn
// CHECK: %[[O:.*]], %[[P:.*]] = kda.decode_step delta %arg0, %arg1, %arg2 gate(%arg3 : tensor<8x4xf32>)
// CHECK-SAME: beta(%arg4 : tensor<8x4xf32>) indices(%arg5 : tensor<8xi32>)
// CHECK-SAME: outs(%arg6, %arg7 : tensor<8x4x16xbf16>, tensor<32x4x32x16xf32>)
// CHECK-SAME: : tensor<8x4x32xbf16>, tensor<8x4x32xbf16>, tensor<8x4x16xbf16>
// CHECK-NEXT: return %[[O]], %[[P]]
func.func @decode_gdn(%q: tensor<8x4x32xbf16>, %k: tensor<8x4x32xbf16>,
                      %v: tensor<8x4x16xbf16>, %g: tensor<8x4xf32>,
                      %b: tensor<8x4xf32>, %idx: tensor<8xi32>,
                      %o0: tensor<8x4x16xbf16>, %pool: tensor<32x4x32x16xf32>)
    -> (tensor<8x4x16xbf16>, tensor<32x4x32x16xf32>) {
  %o, %pool2 = kda.decode_step delta %q, %k, %v gate(%g : tensor<8x4xf32>)
      beta(%b : tensor<8x4xf32>) indices(%idx : tensor<8xi32>)
      outs(%o0, %pool : tensor<8x4x16xbf16>, tensor<32x4x32x16xf32>)
      : tensor<8x4x32xbf16>, tensor<8x4x32xbf16>, tensor<8x4x16xbf16>
  return %o, %pool2 : tensor<8x4x16xbf16>, tensor<32x4x32x16xf32>
}

// Linear attention decode: additive, no gate, no beta, i64 indices, f16.
// CHECK-LABEL: func.func @decode_linear
// CHECK: kda.decode_step additive %arg0, %arg1, %arg2 indices(%arg3 : tensor<8xi64>)
// CHECK-SAME: outs(%arg4, %arg5 : tensor<8x4x16xf16>, tensor<32x4x32x16xf32>)
// CHECK-SAME: : tensor<8x4x32xf16>, tensor<8x4x32xf16>, tensor<8x4x16xf16>
func.func @decode_linear(%q: tensor<8x4x32xf16>, %k: tensor<8x4x32xf16>,
                         %v: tensor<8x4x16xf16>, %idx: tensor<8xi64>,
                         %o0: tensor<8x4x16xf16>, %pool: tensor<32x4x32x16xf32>)
    -> (tensor<8x4x16xf16>, tensor<32x4x32x16xf32>) {
  %o, %pool2 = kda.decode_step additive %q, %k, %v indices(%idx : tensor<8xi64>)
      outs(%o0, %pool : tensor<8x4x16xf16>, tensor<32x4x32x16xf32>)
      : tensor<8x4x32xf16>, tensor<8x4x32xf16>, tensor<8x4x16xf16>
  return %o, %pool2 : tensor<8x4x16xf16>, tensor<32x4x32x16xf32>
}

// KDA decode with the full prologue, GVA (H = 2, HV = 4), V-major bf16 pool.
// CHECK-LABEL: func.func @decode_kda_full
// CHECK: kda.decode_step delta %arg0, %arg1, %arg2 gate(%arg3 : tensor<8x4x32xf32>)
// CHECK-SAME: beta(%arg4 : tensor<8x4xf32>) A_log(%arg5 : tensor<4xf32>) dt_bias(%arg6 : tensor<4x32xf32>)
// CHECK-SAME: indices(%arg7 : tensor<8xi32>) outs(%arg8, %arg9 : tensor<8x4x16xf32>, tensor<32x4x16x32xbf16>)
// CHECK-SAME: {beta_activation = #kda<beta sigmoid_neg_eigval>, gate_activation = #kda<gate lower_bound>,
// CHECK-SAME: lower_bound = -4.000000e+00 : f64, qk_l2norm, scale = 2.500000e-01 : f64,
// CHECK-SAME: state_layout = #kda<layout v_major>, tile = #kda.tile<v_block = 16, warps = 2>}
// CHECK-SAME: : tensor<8x2x32xf32>, tensor<8x2x32xf32>, tensor<8x4x16xf32>
func.func @decode_kda_full(%q: tensor<8x2x32xf32>, %k: tensor<8x2x32xf32>,
                           %v: tensor<8x4x16xf32>, %g: tensor<8x4x32xf32>,
                           %b: tensor<8x4xf32>, %a: tensor<4xf32>, %d: tensor<4x32xf32>,
                           %idx: tensor<8xi32>, %o0: tensor<8x4x16xf32>,
                           %pool: tensor<32x4x16x32xbf16>)
    -> (tensor<8x4x16xf32>, tensor<32x4x16x32xbf16>) {
  %o, %pool2 = kda.decode_step delta %q, %k, %v gate(%g : tensor<8x4x32xf32>)
      beta(%b : tensor<8x4xf32>) A_log(%a : tensor<4xf32>) dt_bias(%d : tensor<4x32xf32>)
      indices(%idx : tensor<8xi32>)
      outs(%o0, %pool : tensor<8x4x16xf32>, tensor<32x4x16x32xbf16>)
      {qk_l2norm, scale = 0.25 : f64, state_layout = #kda<layout v_major>,
       beta_activation = #kda<beta sigmoid_neg_eigval>,
       gate_activation = #kda<gate lower_bound>, lower_bound = -4.0 : f64,
       tile = #kda.tile<v_block = 16, warps = 2>}
      : tensor<8x2x32xf32>, tensor<8x2x32xf32>, tensor<8x4x16xf32>
  return %o, %pool2 : tensor<8x4x16xf32>, tensor<32x4x16x32xbf16>
}

// GLA decode: additive with a softplus channel gate (dt_bias only); dynamic N.
// CHECK-LABEL: func.func @decode_gla_dynamic
// CHECK: kda.decode_step additive %arg0, %arg1, %arg2 gate(%arg3 : tensor<?x4x32xf32>)
// CHECK-SAME: dt_bias(%arg4 : tensor<4x32xf32>) indices(%arg5 : tensor<?xi64>)
// CHECK-SAME: outs(%arg6, %arg7 : tensor<?x4x16xf32>, tensor<?x4x32x16xf32>)
// CHECK-SAME: {gate_activation = #kda<gate softplus>}
// CHECK-SAME: : tensor<?x4x32xf32>, tensor<?x4x32xf32>, tensor<?x4x16xf32>
func.func @decode_gla_dynamic(%q: tensor<?x4x32xf32>, %k: tensor<?x4x32xf32>,
                              %v: tensor<?x4x16xf32>, %g: tensor<?x4x32xf32>,
                              %d: tensor<4x32xf32>, %idx: tensor<?xi64>,
                              %o0: tensor<?x4x16xf32>, %pool: tensor<?x4x32x16xf32>)
    -> (tensor<?x4x16xf32>, tensor<?x4x32x16xf32>) {
  %o, %pool2 = kda.decode_step additive %q, %k, %v gate(%g : tensor<?x4x32xf32>)
      dt_bias(%d : tensor<4x32xf32>) indices(%idx : tensor<?xi64>)
      outs(%o0, %pool : tensor<?x4x16xf32>, tensor<?x4x32x16xf32>)
      {gate_activation = #kda<gate softplus>}
      : tensor<?x4x32xf32>, tensor<?x4x32xf32>, tensor<?x4x16xf32>
  return %o, %pool2 : tensor<?x4x16xf32>, tensor<?x4x32x16xf32>
}

//===----------------------------------------------------------------------===//
// kda.window_attention
//===----------------------------------------------------------------------===//

// Per-op window, MHA (HQ = HK = HV).
// CHECK-LABEL: func.func @window_per_op
// CHECK: kda.window_attention %arg0, %arg1, %arg2 {window = 512 : i64} :
// CHECK-SAME: tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xbf16>
func.func @window_per_op(%q: tensor<2x64x4x32xbf16>, %k: tensor<2x64x4x32xbf16>,
                         %v: tensor<2x64x4x16xbf16>) -> tensor<2x64x4x16xbf16> {
  %o = kda.window_attention %q, %k, %v {window = 512 : i64}
      : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16>
      -> tensor<2x64x4x16xbf16>
  return %o : tensor<2x64x4x16xbf16>
}

// Earlier keys: the queries are the last 64 of 192 key rows (dynamic too).
// CHECK-LABEL: func.func @window_earlier_keys
// CHECK: kda.window_attention %arg0, %arg1, %arg2 {earlier_keys, window = 512 : i64} :
// CHECK-SAME: tensor<2x64x4x32xbf16>, tensor<2x192x4x32xbf16>, tensor<2x192x4x16xbf16> -> tensor<2x64x4x16xbf16>
// CHECK: kda.window_attention %arg3, %arg4, %arg5 {earlier_keys, window = 16 : i64} :
// CHECK-SAME: tensor<?x?x4x32xbf16>, tensor<?x?x4x32xbf16>, tensor<?x?x4x16xbf16> -> tensor<?x?x4x16xbf16>
func.func @window_earlier_keys(%q: tensor<2x64x4x32xbf16>, %k: tensor<2x192x4x32xbf16>,
                               %v: tensor<2x192x4x16xbf16>, %dq: tensor<?x?x4x32xbf16>,
                               %dk: tensor<?x?x4x32xbf16>, %dv: tensor<?x?x4x16xbf16>)
    -> (tensor<2x64x4x16xbf16>, tensor<?x?x4x16xbf16>) {
  %o = kda.window_attention %q, %k, %v {window = 512 : i64, earlier_keys}
      : tensor<2x64x4x32xbf16>, tensor<2x192x4x32xbf16>, tensor<2x192x4x16xbf16>
      -> tensor<2x64x4x16xbf16>
  %p = kda.window_attention %dq, %dk, %dv {window = 16 : i64, earlier_keys}
      : tensor<?x?x4x32xbf16>, tensor<?x?x4x32xbf16>, tensor<?x?x4x16xbf16>
      -> tensor<?x?x4x16xbf16>
  return %o, %p : tensor<2x64x4x16xbf16>, tensor<?x?x4x16xbf16>
}

// A hybrid's mix fused into the window (kda-fuse-window-mix): sum, and gated
// head-wise and channel-wise.
// CHECK-LABEL: func.func @window_mix
// CHECK: kda.window_attention %arg0, %arg1, %arg2 mix_linear(%arg3 : tensor<2x64x4x16xbf16>) {mix = #kda<combine sum>, window = 8 : i64}
// CHECK: kda.window_attention %arg0, %arg1, %arg2 mix_linear(%arg3 : tensor<2x64x4x16xbf16>) mix_gate(%arg4 : tensor<2x64x4xf32>) {mix = #kda<combine gated>, window = 8 : i64}
// CHECK: kda.window_attention %arg0, %arg1, %arg2 mix_linear(%arg3 : tensor<2x64x4x16xbf16>) mix_gate(%arg5 : tensor<2x64x4x16xbf16>) {mix = #kda<combine gated>, window = 8 : i64}
func.func @window_mix(%q: tensor<2x64x4x32xbf16>, %k: tensor<2x64x4x32xbf16>, %v: tensor<2x64x4x16xbf16>,
                      %x: tensor<2x64x4x16xbf16>, %zh: tensor<2x64x4xf32>, %zc: tensor<2x64x4x16xbf16>)
    -> (tensor<2x64x4x16xbf16>, tensor<2x64x4x16xbf16>, tensor<2x64x4x16xbf16>) {
  %s = kda.window_attention %q, %k, %v mix_linear(%x : tensor<2x64x4x16xbf16>) {window = 8 : i64, mix = #kda<combine sum>}
      : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xbf16>
  %h = kda.window_attention %q, %k, %v mix_linear(%x : tensor<2x64x4x16xbf16>) mix_gate(%zh : tensor<2x64x4xf32>) {window = 8 : i64, mix = #kda<combine gated>}
      : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xbf16>
  %c = kda.window_attention %q, %k, %v mix_linear(%x : tensor<2x64x4x16xbf16>) mix_gate(%zc : tensor<2x64x4x16xbf16>) {window = 8 : i64, mix = #kda<combine gated>}
      : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xbf16>
  return %s, %h, %c : tensor<2x64x4x16xbf16>, tensor<2x64x4x16xbf16>, tensor<2x64x4x16xbf16>
}

// GQA (HQ = 8, HK = HV = 2, HO = 8), window of 1, scale and tile.
// CHECK-LABEL: func.func @window_gqa
// CHECK: kda.window_attention %arg0, %arg1, %arg2
// CHECK-SAME: {scale = 5.000000e-01 : f64, tile = #kda.tile<chunk = 16, v_block = 8>, window = 1 : i64} :
// CHECK-SAME: tensor<2x64x8x32xf32>, tensor<2x64x2x32xf32>, tensor<2x64x2x16xf32> -> tensor<2x64x8x16xf32>
func.func @window_gqa(%q: tensor<2x64x8x32xf32>, %k: tensor<2x64x2x32xf32>,
                      %v: tensor<2x64x2x16xf32>) -> tensor<2x64x8x16xf32> {
  %o = kda.window_attention %q, %k, %v
      {window = 1 : i64, scale = 0.5 : f64, tile = #kda.tile<chunk = 16, v_block = 8>}
      : tensor<2x64x8x32xf32>, tensor<2x64x2x32xf32>, tensor<2x64x2x16xf32>
      -> tensor<2x64x8x16xf32>
  return %o : tensor<2x64x8x16xf32>
}

// The KDA grouping (HQ = HK = 2, HV = 4, HO = 4).
// CHECK-LABEL: func.func @window_kda_grouping
// CHECK: kda.window_attention %arg0, %arg1, %arg2 {window = 128 : i64} :
// CHECK-SAME: tensor<2x64x2x32xf16>, tensor<2x64x2x32xf16>, tensor<2x64x4x16xf16> -> tensor<2x64x4x16xf16>
func.func @window_kda_grouping(%q: tensor<2x64x2x32xf16>, %k: tensor<2x64x2x32xf16>,
                               %v: tensor<2x64x4x16xf16>) -> tensor<2x64x4x16xf16> {
  %o = kda.window_attention %q, %k, %v {window = 128 : i64}
      : tensor<2x64x2x32xf16>, tensor<2x64x2x32xf16>, tensor<2x64x4x16xf16>
      -> tensor<2x64x4x16xf16>
  return %o : tensor<2x64x4x16xf16>
}

// Adaptive window (per-position window_sizes [T], i32) and varlen (i64).
// CHECK-LABEL: func.func @window_adaptive_varlen
// CHECK: kda.window_attention %arg0, %arg1, %arg2 window_sizes(%arg3 : tensor<100xi32>)
// CHECK-SAME: cu_seqlens(%arg4 : tensor<5xi64>) :
// CHECK-SAME: tensor<1x100x4x32xbf16>, tensor<1x100x4x32xbf16>, tensor<1x100x4x16xbf16> -> tensor<1x100x4x16xbf16>
func.func @window_adaptive_varlen(%q: tensor<1x100x4x32xbf16>, %k: tensor<1x100x4x32xbf16>,
                                  %v: tensor<1x100x4x16xbf16>, %w: tensor<100xi32>,
                                  %cu: tensor<5xi64>) -> tensor<1x100x4x16xbf16> {
  %o = kda.window_attention %q, %k, %v window_sizes(%w : tensor<100xi32>)
      cu_seqlens(%cu : tensor<5xi64>)
      : tensor<1x100x4x32xbf16>, tensor<1x100x4x32xbf16>, tensor<1x100x4x16xbf16>
      -> tensor<1x100x4x16xbf16>
  return %o : tensor<1x100x4x16xbf16>
}

// Per-op window with i32 varlen offsets and i64 adaptive sizes, dynamic dims.
// CHECK-LABEL: func.func @window_dynamic
// CHECK: kda.window_attention %arg0, %arg1, %arg2 cu_seqlens(%arg3 : tensor<?xi32>) {window = 4096 : i64} :
// CHECK-SAME: tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32> -> tensor<?x?x?x?xf32>
// CHECK: kda.window_attention %arg0, %arg1, %arg2 window_sizes(%arg4 : tensor<?xi64>) :
func.func @window_dynamic(%q: tensor<?x?x?x?xf32>, %k: tensor<?x?x?x?xf32>,
                          %v: tensor<?x?x?x?xf32>, %cu: tensor<?xi32>,
                          %w: tensor<?xi64>) -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>) {
  %o = kda.window_attention %q, %k, %v cu_seqlens(%cu : tensor<?xi32>)
      {window = 4096 : i64}
      : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
      -> tensor<?x?x?x?xf32>
  %o2 = kda.window_attention %q, %k, %v window_sizes(%w : tensor<?xi64>)
      : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
      -> tensor<?x?x?x?xf32>
  return %o, %o2 : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
}

//===----------------------------------------------------------------------===//
// kda.hybrid
//===----------------------------------------------------------------------===//

// Linear plus window attention, summed; then three branches summed.
// CHECK-LABEL: func.func @hybrid_sum
// CHECK: %[[H:.*]] = kda.hybrid sum %arg0, %arg1 :
// CHECK-SAME: tensor<2x64x4x16xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xbf16>
// CHECK: kda.hybrid sum %arg0, %arg1, %[[H]] :
// CHECK-SAME: tensor<2x64x4x16xbf16>, tensor<2x64x4x16xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xbf16>
func.func @hybrid_sum(%lin: tensor<2x64x4x16xbf16>, %win: tensor<2x64x4x16xbf16>)
    -> tensor<2x64x4x16xbf16> {
  %h = kda.hybrid sum %lin, %win
      : tensor<2x64x4x16xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xbf16>
  %h3 = kda.hybrid sum %lin, %win, %h
      : tensor<2x64x4x16xbf16>, tensor<2x64x4x16xbf16>, tensor<2x64x4x16xbf16>
      -> tensor<2x64x4x16xbf16>
  return %h3 : tensor<2x64x4x16xbf16>
}

// Gated with a head-wise z [B, T, HV] and a channel-wise z [B, T, HV, V].
// CHECK-LABEL: func.func @hybrid_gated
// CHECK: kda.hybrid gated %arg0, %arg1 gate(%arg2 : tensor<2x64x4xf32>) :
// CHECK-SAME: tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
// CHECK: kda.hybrid gated %arg0, %arg1 gate(%arg3 : tensor<2x64x4x16xbf16>) :
// CHECK-SAME: tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
func.func @hybrid_gated(%lin: tensor<2x64x4x16xf32>, %win: tensor<2x64x4x16xf32>,
                        %zh: tensor<2x64x4xf32>, %zc: tensor<2x64x4x16xbf16>)
    -> (tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32>) {
  %0 = kda.hybrid gated %lin, %win gate(%zh : tensor<2x64x4xf32>)
      : tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  %1 = kda.hybrid gated %lin, %win gate(%zc : tensor<2x64x4x16xbf16>)
      : tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return %0, %1 : tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32>
}

// Dynamic dims, f16.
// CHECK-LABEL: func.func @hybrid_dynamic
// CHECK: kda.hybrid gated %arg0, %arg0 gate(%arg1 : tensor<?x?x4xf16>) :
// CHECK-SAME: tensor<?x?x4x?xf16>, tensor<?x?x4x?xf16> -> tensor<?x?x4x?xf16>
func.func @hybrid_dynamic(%x: tensor<?x?x4x?xf16>, %z: tensor<?x?x4xf16>)
    -> tensor<?x?x4x?xf16> {
  %0 = kda.hybrid gated %x, %x gate(%z : tensor<?x?x4xf16>)
      : tensor<?x?x4x?xf16>, tensor<?x?x4x?xf16> -> tensor<?x?x4x?xf16>
  return %0 : tensor<?x?x4x?xf16>
}

// A whole hybrid layer: KDA + sliding window, gated.
// CHECK-LABEL: func.func @hybrid_layer
// CHECK: %[[LIN:.*]] = kda.gated_delta delta %arg0, %arg1, %arg2
// CHECK: %[[WIN:.*]] = kda.window_attention %arg0, %arg1, %arg2 {window = 64 : i64}
// CHECK: kda.hybrid gated %[[LIN]], %[[WIN]] gate(%arg5 : tensor<1x64x4xf32>)
func.func @hybrid_layer(%q: tensor<1x64x4x32xbf16>, %k: tensor<1x64x4x32xbf16>,
                        %v: tensor<1x64x4x16xbf16>, %g: tensor<1x64x4x32xf32>,
                        %b: tensor<1x64x4xf32>, %z: tensor<1x64x4xf32>)
    -> tensor<1x64x4x16xbf16> {
  %lin = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x64x4x32xf32>)
      beta(%b : tensor<1x64x4xf32>)
      : tensor<1x64x4x32xbf16>, tensor<1x64x4x32xbf16>, tensor<1x64x4x16xbf16>
      -> tensor<1x64x4x16xbf16>
  %win = kda.window_attention %q, %k, %v {window = 64 : i64}
      : tensor<1x64x4x32xbf16>, tensor<1x64x4x32xbf16>, tensor<1x64x4x16xbf16>
      -> tensor<1x64x4x16xbf16>
  %o = kda.hybrid gated %lin, %win gate(%z : tensor<1x64x4xf32>)
      : tensor<1x64x4x16xbf16>, tensor<1x64x4x16xbf16> -> tensor<1x64x4x16xbf16>
  return %o : tensor<1x64x4x16xbf16>
}

//===----------------------------------------------------------------------===//
// kda.multi_scale
//===----------------------------------------------------------------------===//

// One head-wise gate scaled by constants, summed; delta with beta.
// CHECK-LABEL: func.func @multi_scale_decay_scales
// CHECK: kda.multi_scale delta sum %arg0, %arg1, %arg2 gates(%arg3 : tensor<2x64x4xf32>)
// CHECK-SAME: beta(%arg4 : tensor<2x64x4xf32>) {decay_scales = [1.000000e+00, 2.500000e-01, 0.000000e+00]} :
// CHECK-SAME: tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
func.func @multi_scale_decay_scales(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x32xf32>,
                                    %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>,
                                    %b: tensor<2x64x4xf32>) -> tensor<2x64x4x16xf32> {
  %o = kda.multi_scale delta sum %q, %k, %v gates(%g : tensor<2x64x4xf32>)
      beta(%b : tensor<2x64x4xf32>) {decay_scales = [1.0, 0.25, 0.0]}
      : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>
      -> tensor<2x64x4x16xf32>
  return %o : tensor<2x64x4x16xf32>
}

// Two channel-wise gate tensors, gated by z [B, T, HV, M], additive, with
// stacked initial and final states [M, N, HV, K, V].
// CHECK-LABEL: func.func @multi_scale_gated
// CHECK: %[[O:.*]], %[[S:.*]] = kda.multi_scale additive gated %arg0, %arg1, %arg2
// CHECK-SAME: gates(%arg3, %arg4 : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>)
// CHECK-SAME: initial_states(%arg5 : tensor<2x2x4x32x16xf32>) z(%arg6 : tensor<2x64x4x2xf32>) :
// CHECK-SAME: tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xbf16>
// CHECK-SAME: final_states tensor<2x2x4x32x16xf32>
// CHECK-NEXT: return %[[O]], %[[S]]
func.func @multi_scale_gated(%q: tensor<2x64x4x32xbf16>, %k: tensor<2x64x4x32xbf16>,
                             %v: tensor<2x64x4x16xbf16>, %g0: tensor<2x64x4x32xf32>,
                             %g1: tensor<2x64x4x32xf32>, %s0: tensor<2x2x4x32x16xf32>,
                             %z: tensor<2x64x4x2xf32>)
    -> (tensor<2x64x4x16xbf16>, tensor<2x2x4x32x16xf32>) {
  %o, %s = kda.multi_scale additive gated %q, %k, %v
      gates(%g0, %g1 : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>)
      initial_states(%s0 : tensor<2x2x4x32x16xf32>) z(%z : tensor<2x64x4x2xf32>)
      : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16>
      -> tensor<2x64x4x16xbf16> final_states tensor<2x2x4x32x16xf32>
  return %o, %s : tensor<2x64x4x16xbf16>, tensor<2x2x4x32x16xf32>
}

// Varlen (i32), GVA, V-major bf16 states, every attribute set, 3 scales.
// CHECK-LABEL: func.func @multi_scale_full
// CHECK: kda.multi_scale delta gated %arg0, %arg1, %arg2 gates(%arg3 : tensor<1x100x8x32xf16>)
// CHECK-SAME: beta(%arg4 : tensor<1x100x8xf16>) initial_states(%arg5 : tensor<3x2x8x16x32xbf16>)
// CHECK-SAME: cu_seqlens(%arg6 : tensor<3xi32>) z(%arg7 : tensor<1x100x8x3xf16>)
// CHECK-SAME: {beta_activation = #kda<beta sigmoid>, decay_scales = [1.000000e+00, 5.000000e-01, 2.500000e-01],
// CHECK-SAME: qk_l2norm, scale = 1.000000e+00 : f64, state_layout = #kda<layout v_major>,
// CHECK-SAME: tile = #kda.tile<chunk = 16, v_block = 16, segments = 2>} :
// CHECK-SAME: tensor<1x100x4x32xf16>, tensor<1x100x4x32xf16>, tensor<1x100x8x16xf16> -> tensor<1x100x8x16xf16>
// CHECK-SAME: final_states tensor<3x2x8x16x32xbf16>
func.func @multi_scale_full(%q: tensor<1x100x4x32xf16>, %k: tensor<1x100x4x32xf16>,
                            %v: tensor<1x100x8x16xf16>, %g: tensor<1x100x8x32xf16>,
                            %b: tensor<1x100x8xf16>, %s0: tensor<3x2x8x16x32xbf16>,
                            %cu: tensor<3xi32>, %z: tensor<1x100x8x3xf16>)
    -> (tensor<1x100x8x16xf16>, tensor<3x2x8x16x32xbf16>) {
  %o, %s = kda.multi_scale delta gated %q, %k, %v gates(%g : tensor<1x100x8x32xf16>)
      beta(%b : tensor<1x100x8xf16>) initial_states(%s0 : tensor<3x2x8x16x32xbf16>)
      cu_seqlens(%cu : tensor<3xi32>) z(%z : tensor<1x100x8x3xf16>)
      {decay_scales = [1.0, 0.5, 0.25], scale = 1.0 : f64, qk_l2norm,
       state_layout = #kda<layout v_major>, beta_activation = #kda<beta sigmoid>,
       tile = #kda.tile<chunk = 16, sub_chunk = 16, v_block = 16, segments = 2>}
      : tensor<1x100x4x32xf16>, tensor<1x100x4x32xf16>, tensor<1x100x8x16xf16>
      -> tensor<1x100x8x16xf16> final_states tensor<3x2x8x16x32xbf16>
  return %o, %s : tensor<1x100x8x16xf16>, tensor<3x2x8x16x32xbf16>
}

// Three head-wise gate tensors, summed, i64 varlen, dynamic dims, no beta.
// Decomposed, its stacked final states are sized from the first recurrence's
// final state (which dominates them), not from the op's own result.
// DECOMPOSE-LABEL: func.func @multi_scale_dynamic
// DECOMPOSE: %{{.*}}, %[[S0:.*]] = kda.gated_delta delta
// DECOMPOSE: %[[N:.*]] = tensor.dim %[[S0]], %{{.*}} : tensor<?x?x?x?xf32>
// DECOMPOSE: %[[ALL:.*]] = tensor.empty(%[[N]], {{.*}}) : tensor<3x?x?x?x?xf32>
// DECOMPOSE: tensor.insert_slice %[[S0]] into %[[ALL]][0, 0, 0, 0, 0]
// DECOMPOSE: kda.gated_delta delta
// DECOMPOSE: kda.gated_delta delta
// DECOMPOSE: %[[STATES:.*]] = tensor.cast %{{.*}} : tensor<3x?x?x?x?xf32> to tensor<?x?x?x?x?xf32>
// DECOMPOSE: return %{{.*}}, %[[STATES]]
// CHECK-LABEL: func.func @multi_scale_dynamic
// CHECK: kda.multi_scale delta sum %arg0, %arg0, %arg1
// CHECK-SAME: gates(%arg2, %arg2, %arg2 : tensor<?x?x?xf32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>)
// CHECK-SAME: cu_seqlens(%arg3 : tensor<?xi64>) :
// CHECK-SAME: tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32> -> tensor<?x?x?x?xf32>
// CHECK-SAME: final_states tensor<?x?x?x?x?xf32>
func.func @multi_scale_dynamic(%qk: tensor<?x?x?x?xf32>, %v: tensor<?x?x?x?xf32>,
                               %g: tensor<?x?x?xf32>, %cu: tensor<?xi64>)
    -> (tensor<?x?x?x?xf32>, tensor<?x?x?x?x?xf32>) {
  %o, %s = kda.multi_scale delta sum %qk, %qk, %v
      gates(%g, %g, %g : tensor<?x?x?xf32>, tensor<?x?x?xf32>, tensor<?x?x?xf32>)
      cu_seqlens(%cu : tensor<?xi64>)
      : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>
      -> tensor<?x?x?x?xf32> final_states tensor<?x?x?x?x?xf32>
  return %o, %s : tensor<?x?x?x?xf32>, tensor<?x?x?x?x?xf32>
}

// The gradient op: the forward's operands and attributes, d_o and
// d_final_state in, one gradient per input out (head-wise gate, V-major
// states, varlen).
// CHECK-LABEL: func.func @gdn_grad
// CHECK: kda.gated_delta_grad delta %arg0, %arg1, %arg2, %arg3 gate(%arg4 : tensor<1x64x4xf32>)
// CHECK-SAME: initial_state(%arg5 : tensor<2x4x16x32xf32>) cu_seqlens(%arg6 : tensor<3xi32>)
// CHECK-SAME: d_final_state(%arg7 : tensor<2x4x16x32xf32>)
// CHECK-SAME: state_layout = #kda<layout v_major>
// CHECK-SAME: -> tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x16xf32> d_gate tensor<1x64x4xf32> d_initial_state tensor<2x4x16x32xf32>
func.func @gdn_grad(%q: tensor<1x64x4x32xbf16>, %k: tensor<1x64x4x32xbf16>,
                    %v: tensor<1x64x4x16xbf16>, %do: tensor<1x64x4x16xbf16>,
                    %g: tensor<1x64x4xf32>, %h0: tensor<2x4x16x32xf32>,
                    %cu: tensor<3xi32>, %dht: tensor<2x4x16x32xf32>)
    -> (tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x16xf32>,
        tensor<1x64x4xf32>, tensor<2x4x16x32xf32>) {
  %dq, %dk, %dv, %dg, %dh0 = kda.gated_delta_grad delta %q, %k, %v, %do
      gate(%g : tensor<1x64x4xf32>) initial_state(%h0 : tensor<2x4x16x32xf32>)
      cu_seqlens(%cu : tensor<3xi32>) d_final_state(%dht : tensor<2x4x16x32xf32>)
      {state_layout = #kda<layout v_major>}
      : tensor<1x64x4x32xbf16>, tensor<1x64x4x32xbf16>, tensor<1x64x4x16xbf16>,
        tensor<1x64x4x16xbf16>
      -> tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x16xf32>
      d_gate tensor<1x64x4xf32> d_initial_state tensor<2x4x16x32xf32>
  return %dq, %dk, %dv, %dg, %dh0 : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>,
      tensor<1x64x4x16xf32>, tensor<1x64x4xf32>, tensor<2x4x16x32xf32>
}

// The gradients of q, k and v in their inputs' bf16 (what a framework
// returns), the head-wise f32 gate's and the state's in f32.
// CHECK-LABEL: func.func @gdn_grad_own_types
// CHECK: -> tensor<1x64x4x32xbf16>, tensor<1x64x4x32xbf16>, tensor<1x64x4x16xbf16> d_gate tensor<1x64x4xf32> d_initial_state tensor<1x4x32x16xf32>
func.func @gdn_grad_own_types(%q: tensor<1x64x4x32xbf16>, %k: tensor<1x64x4x32xbf16>,
                              %v: tensor<1x64x4x16xbf16>, %do: tensor<1x64x4x16xbf16>,
                              %g: tensor<1x64x4xf32>, %h0: tensor<1x4x32x16xf32>)
    -> (tensor<1x64x4x32xbf16>, tensor<1x64x4x32xbf16>, tensor<1x64x4x16xbf16>,
        tensor<1x64x4xf32>, tensor<1x4x32x16xf32>) {
  %dq, %dk, %dv, %dg, %dh0 = kda.gated_delta_grad delta %q, %k, %v, %do
      gate(%g : tensor<1x64x4xf32>) initial_state(%h0 : tensor<1x4x32x16xf32>)
      : tensor<1x64x4x32xbf16>, tensor<1x64x4x32xbf16>, tensor<1x64x4x16xbf16>,
        tensor<1x64x4x16xbf16>
      -> tensor<1x64x4x32xbf16>, tensor<1x64x4x32xbf16>, tensor<1x64x4x16xbf16>
      d_gate tensor<1x64x4xf32> d_initial_state tensor<1x4x32x16xf32>
  return %dq, %dk, %dv, %dg, %dh0 : tensor<1x64x4x32xbf16>, tensor<1x64x4x32xbf16>,
      tensor<1x64x4x16xbf16>, tensor<1x64x4xf32>, tensor<1x4x32x16xf32>
}
