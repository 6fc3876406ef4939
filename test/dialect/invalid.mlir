// RUN: kda-opt %s -split-input-file -verify-diagnostics

// One case per split: every diagnostic of TileAttr::verify and of the
// verifiers in dialect/KdaOps.cpp, the ODS constraints they rely on, and
// malformed syntax (which must be a parse error, never a crash).
// Shapes unless said otherwise: B = 2, T = 64, H = 4, K = 32, HV = 4, V = 16.

//===----------------------------------------------------------------------===//
// #kda.tile
//===----------------------------------------------------------------------===//

// expected-error @+1 {{#kda.tile: 'chunk' must be 16, 32 or 64, found 48}}
func.func @tile_chunk_48() attributes {t = #kda.tile<chunk = 48>} { return }

// -----

// expected-error @+1 {{#kda.tile: 'chunk' must be 16, 32 or 64, found 128}}
func.func @tile_chunk_128() attributes {t = #kda.tile<chunk = 128, sub_chunk = 16>} { return }

// -----

// expected-error @+1 {{#kda.tile: 'chunk' must be 16, 32 or 64, found 0}}
func.func @tile_chunk_0() attributes {t = #kda.tile<chunk = 0>} { return }

// -----

// expected-error @+1 {{#kda.tile: 'sub_chunk' must be a positive divisor of 'chunk' (64), found 0}}
func.func @tile_sub_chunk_0() attributes {t = #kda.tile<sub_chunk = 0>} { return }

// -----

// expected-error @+1 {{#kda.tile: 'sub_chunk' must be a positive divisor of 'chunk' (32), found -16}}
func.func @tile_sub_chunk_negative() attributes {t = #kda.tile<chunk = 32, sub_chunk = -16>} { return }

// -----

// expected-error @+1 {{#kda.tile: 'sub_chunk' must be a positive divisor of 'chunk' (64), found 24}}
func.func @tile_sub_chunk_not_divisor() attributes {t = #kda.tile<sub_chunk = 24>} { return }

// -----

// A sub_chunk larger than the chunk.
// expected-error @+1 {{#kda.tile: 'sub_chunk' must be a positive divisor of 'chunk' (16), found 32}}
func.func @tile_sub_chunk_larger() attributes {t = #kda.tile<chunk = 16, sub_chunk = 32>} { return }

// -----

// expected-error @+1 {{#kda.tile: 'v_block' must be >= 0 (0: all of V), found -1}}
func.func @tile_v_block_negative() attributes {t = #kda.tile<v_block = -1>} { return }

// -----

// expected-error @+1 {{#kda.tile: 'warps' must be a power of two in [1, 16], found 0}}
func.func @tile_warps_0() attributes {t = #kda.tile<warps = 0>} { return }

// -----

// expected-error @+1 {{#kda.tile: 'warps' must be a power of two in [1, 16], found 3}}
func.func @tile_warps_3() attributes {t = #kda.tile<warps = 3>} { return }

// -----

// expected-error @+1 {{#kda.tile: 'warps' must be a power of two in [1, 16], found 32}}
func.func @tile_warps_32() attributes {t = #kda.tile<warps = 32>} { return }

// -----

// expected-error @+1 {{#kda.tile: 'warps' must be a power of two in [1, 16], found -4}}
func.func @tile_warps_negative() attributes {t = #kda.tile<warps = -4>} { return }

// -----

// expected-error @+1 {{#kda.tile: 'stages' must be in [1, 8], found 0}}
func.func @tile_stages_0() attributes {t = #kda.tile<stages = 0>} { return }

// -----

// expected-error @+1 {{#kda.tile: 'stages' must be in [1, 8], found 9}}
func.func @tile_stages_9() attributes {t = #kda.tile<stages = 9>} { return }

// -----

// expected-error @+1 {{#kda.tile: 'segments' must be >= 1, found 0}}
func.func @tile_segments_0() attributes {t = #kda.tile<segments = 0>} { return }

// -----

// An invalid tile inside an op's attribute dictionary.
func.func @tile_in_op(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{#kda.tile: 'chunk' must be 16, 32 or 64, found 20}}
  %o = kda.gated_delta delta %q, %q, %v {tile = #kda.tile<chunk = 20>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

//===----------------------------------------------------------------------===//
// Malformed syntax: parse errors, not crashes.
//===----------------------------------------------------------------------===//

// -----

// expected-error @+2 {{expected ::mlir::kda::UpdateRule to be one of: delta, additive}}
// expected-error @+1 {{failed to parse Kda_UpdateRuleAttr parameter 'value'}}
func.func @unknown_update() attributes {u = #kda<update foo>} { return }

// -----

// expected-error @+2 {{expected ::mlir::kda::StateLayout to be one of: k_major, v_major}}
// expected-error @+1 {{failed to parse Kda_StateLayoutAttr parameter 'value'}}
func.func @unknown_layout() attributes {l = #kda<layout x_major>} { return }

// -----

// expected-error @+2 {{expected ::mlir::kda::BetaActivation to be one of: none, sigmoid, sigmoid_neg_eigval}}
// expected-error @+1 {{failed to parse Kda_BetaActivationAttr parameter 'value'}}
func.func @unknown_beta() attributes {b = #kda<beta tanh>} { return }

// -----

// expected-error @+2 {{expected ::mlir::kda::GateActivation to be one of: none, softplus, lower_bound}}
// expected-error @+1 {{failed to parse Kda_GateActivationAttr parameter 'value'}}
func.func @unknown_gate() attributes {g = #kda<gate relu>} { return }

// -----

// expected-error @+2 {{expected ::mlir::kda::GateGranularity to be one of: head, channel}}
// expected-error @+1 {{failed to parse Kda_GateGranularityAttr parameter 'value'}}
func.func @unknown_granularity() attributes {g = #kda<granularity token>} { return }

// -----

// expected-error @+2 {{expected ::mlir::kda::CombineMode to be one of: sum, gated}}
// expected-error @+1 {{failed to parse Kda_CombineModeAttr parameter 'value'}}
func.func @unknown_combine() attributes {c = #kda<combine max>} { return }

// -----

// expected-error @+1 {{unknown attribute `foo` in dialect `kda`}}
func.func @unknown_attribute() attributes {x = #kda<foo bar>} { return }

// -----

// expected-error @+1 {{duplicate or unknown struct parameter name: chunks}}
func.func @unknown_tile_field() attributes {t = #kda.tile<chunks = 32>} { return }

// -----

// expected-error @+1 {{duplicate or unknown struct parameter name: chunk}}
func.func @duplicate_tile_field() attributes {t = #kda.tile<chunk = 32, chunk = 16>} { return }

// -----

// expected-error @+2 {{expected integer value}}
// expected-error @+1 {{failed to parse Kda_TileAttr parameter 'chunk' which is to be a `int64_t`}}
func.func @tile_field_not_integer() attributes {t = #kda.tile<chunk = "x">} { return }

// -----

func.func @unknown_update_keyword(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{custom op 'kda.gated_delta' unknown update 'foo', expected one of: delta, additive}}
  %o = kda.gated_delta foo %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @unknown_combine_keyword(%v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{custom op 'kda.hybrid' unknown combine 'mean', expected one of: sum, gated}}
  %o = kda.hybrid mean %v, %v : tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @missing_operand(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{expected ','}}
  %o = kda.gated_delta delta %q, %q : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @missing_result_type(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{expected '->'}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>
  return
}

// -----

func.func @missing_indices(%q: tensor<8x4x32xf32>, %o0: tensor<8x4x32xf32>, %p: tensor<2x4x32x32xf32>) {
  // expected-error @+1 {{expected 'indices'}}
  %o, %p2 = kda.decode_step delta %q, %q, %q outs(%o0, %p : tensor<8x4x32xf32>, tensor<2x4x32x32xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x32xf32>
  return
}

// -----

func.func @missing_gates(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{expected 'gates'}}
  %o = kda.multi_scale delta sum %q, %q, %v {decay_scales = [1.0, 0.5]} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @operand_type_count(%v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{number of operands and types do not match: got 2 operands and 1 types}}
  %o = kda.hybrid sum %v, %v : tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @unknown_op(%q: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{custom op 'kda.nope' is unknown}}
  %o = kda.nope %q : tensor<2x64x4x32xf32>
  return
}

// -----

func.func @unranked_operand(%q: tensor<*xf32>) {
  // expected-error @+1 {{invalid kind of type specified: expected builtin.tensor, but found 'tensor<*xf32>'}}
  %o = kda.gated_delta delta %q, %q, %q : tensor<*xf32>, tensor<*xf32>, tensor<*xf32> -> tensor<*xf32>
  return
}

// -----

// Optional results are introduced by their keyword; anything else is an error.
func.func @final_state_keyword(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{operation defines 1 results but was provided 2 to bind}}
  %o, %s = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> state tensor<2x4x32x16xf32>
  return
}

//===----------------------------------------------------------------------===//
// ODS constraints (attribute kinds, operand kinds, segments, type equality).
//===----------------------------------------------------------------------===//

// -----

func.func @scale_not_f64(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'scale' failed to satisfy constraint: 64-bit float attribute}}
  %o = kda.gated_delta delta %q, %q, %v {scale = 1 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @lower_bound_not_f64(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{attribute 'lower_bound' failed to satisfy constraint: 64-bit float attribute}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4xf32>) {gate_activation = #kda<gate lower_bound>, lower_bound = -1.0 : f32} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @boundary_interval_not_i64(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'boundary_interval' failed to satisfy constraint: 64-bit signless integer attribute}}
  %o, %s, %bs = kda.gated_delta delta %q, %q, %v {boundary_interval = 64 : i32} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x4x32x16xf32> boundary_states tensor<2x1x4x32x16xf32>
  return
}

// -----

func.func @window_not_i64(%q: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'window' failed to satisfy constraint: 64-bit signless integer attribute}}
  %o = kda.window_attention %q, %q, %q {window = 4.0 : f64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @tile_not_tile(%q: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'tile' failed to satisfy constraint}}
  %o = kda.window_attention %q, %q, %q {window = 4 : i64, tile = 64 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @decay_scales_not_f64(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{attribute 'decay_scales' failed to satisfy constraint: 64-bit float array attribute}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g : tensor<2x64x4xf32>) {decay_scales = [1, 2]} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @generic_missing_update(%q: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{'kda.gated_delta' op requires attribute 'update'}}
  %o = "kda.gated_delta"(%q, %q, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>) -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @generic_update_not_enum(%q: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{Invalid attribute `update` in property conversion: 1 : i32}}
  %o = "kda.gated_delta"(%q, %q, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0>, update = 1 : i32}> : (tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>) -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @generic_segment_mismatch(%v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{'kda.hybrid' op operand count (2) does not match with the total size (1) specified in attribute 'operandSegmentSizes'}}
  %o = "kda.hybrid"(%v, %v) <{mode = #kda<combine sum>, operandSegmentSizes = array<i32: 1, 0>}> : (tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32>) -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @generic_result_segments(%q: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{size mismatch in attribute conversion: 4 vs 3}}
  %o = "kda.gated_delta"(%q, %q, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>, update = #kda<update delta>}> : (tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>) -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @generic_memref_operand(%q: memref<2x64x4x32xf32>) {
  // expected-error @+1 {{'kda.window_attention' op operand #0 must be ranked tensor of any type values, but got 'memref<2x64x4x32xf32>'}}
  %o = "kda.window_attention"(%q, %q, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0>, window = 4 : i64}> : (memref<2x64x4x32xf32>, memref<2x64x4x32xf32>, memref<2x64x4x32xf32>) -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @generic_decode_one_result(%q: tensor<8x4x32xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x32xf32>, %p: tensor<2x4x32x32xf32>) {
  // expected-error @+1 {{'kda.decode_step' op expected 2 results}}
  %o = "kda.decode_step"(%q, %q, %q, %i, %o0, %p) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1>, update = #kda<update delta>}> : (tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8xi32>, tensor<8x4x32xf32>, tensor<2x4x32x32xf32>) -> tensor<8x4x32xf32>
  return
}

// -----

func.func @generic_decode_o_type(%q: tensor<8x4x32xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x32xf32>, %p: tensor<2x4x32x32xf32>) {
  // expected-error @+1 {{'kda.decode_step' op failed to verify that all of {o_init, o} have same type}}
  %o:2 = "kda.decode_step"(%q, %q, %q, %i, %o0, %p) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1>, update = #kda<update delta>}> : (tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8xi32>, tensor<8x4x32xf32>, tensor<2x4x32x32xf32>) -> (tensor<8x4x32xbf16>, tensor<2x4x32x32xf32>)
  return
}

// -----

func.func @generic_decode_pool_type(%q: tensor<8x4x32xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x32xf32>, %p: tensor<2x4x32x32xf32>) {
  // expected-error @+1 {{'kda.decode_step' op failed to verify that all of {state_pool, new_state_pool} have same type}}
  %o:2 = "kda.decode_step"(%q, %q, %q, %i, %o0, %p) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1>, update = #kda<update delta>}> : (tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8xi32>, tensor<8x4x32xf32>, tensor<2x4x32x32xf32>) -> (tensor<8x4x32xf32>, tensor<4x4x32x32xf32>)
  return
}

// -----

func.func @generic_hybrid_no_branches() {
  // expected-error @+1 {{'kda.hybrid' op expected at least 2 branches to combine, found 0}}
  %o = "kda.hybrid"() <{mode = #kda<combine sum>, operandSegmentSizes = array<i32: 0, 0>}> : () -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @generic_multi_scale_no_gates(%q: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{'kda.multi_scale' op with 'decay_scales' expected exactly 1 gate tensor (scaled per state), found 0}}
  %o = "kda.multi_scale"(%q, %q, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>, update = #kda<update delta>, mode = #kda<combine sum>, decay_scales = [1.0, 2.0]}> : (tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>) -> tensor<2x64x4x32xf32>
  return
}

//===----------------------------------------------------------------------===//
// kda.gated_delta: q, k, v
//===----------------------------------------------------------------------===//

// -----

func.func @gd_q_rank(%q: tensor<2x64x32xf32>, %k: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{'kda.gated_delta' op operand 'q': expected rank 4 [B, T, H, K], found rank 3 ('tensor<2x64x32xf32>')}}
  %o = kda.gated_delta delta %q, %k, %v : tensor<2x64x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_q_element_type(%q: tensor<2x64x4x32xf64>, %k: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{'kda.gated_delta' op operand 'q': expected element type f32, bf16 or f16, found 'f64'}}
  %o = kda.gated_delta delta %q, %k, %v : tensor<2x64x4x32xf64>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_k_rank(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x32x1xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{operand 'k': expected rank 4 [B, T, H, K], found rank 5}}
  %o = kda.gated_delta delta %q, %k, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32x1xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_k_element_type(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x32xi8>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{operand 'k': expected element type f32, bf16 or f16, found 'i8'}}
  %o = kda.gated_delta delta %q, %k, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xi8>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_k_head_dim(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x16xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{operand 'k': dimension 3 (K) is 16, but operand 'q' has K = 32}}
  %o = kda.gated_delta delta %q, %k, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_k_heads(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x2x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{operand 'k': dimension 2 (H) is 2, but operand 'q' has H = 4}}
  %o = kda.gated_delta delta %q, %k, %v : tensor<2x64x4x32xf32>, tensor<2x64x2x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_v_batch(%q: tensor<2x64x4x32xf32>, %v: tensor<3x64x4x16xf32>) {
  // expected-error @+1 {{operand 'v': dimension 0 (B) is 3, but operand 'q' has B = 2}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<3x64x4x16xf32> -> tensor<3x64x4x16xf32>
  return
}

// -----

func.func @gd_v_time(%q: tensor<2x64x4x32xf32>, %v: tensor<2x32x4x16xf32>) {
  // expected-error @+1 {{operand 'v': dimension 1 (T) is 32, but operand 'q' has T = 64}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x32x4x16xf32> -> tensor<2x32x4x16xf32>
  return
}

// -----

func.func @gd_v_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x64xf32>) {
  // expected-error @+1 {{operand 'v': expected rank 4 [B, T, HV, V], found rank 3}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x64xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_mixed_element_types(%q: tensor<2x64x4x32xbf16>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{operands 'q', 'k', 'v' must share one element type, found 'bf16', 'bf16', 'f32'}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_mixed_element_types_k(%q: tensor<2x64x4x32xf16>, %k: tensor<2x64x4x32xbf16>, %v: tensor<2x64x4x16xf16>) {
  // expected-error @+1 {{operands 'q', 'k', 'v' must share one element type, found 'f16', 'bf16', 'f16'}}
  %o = kda.gated_delta delta %q, %k, %v : tensor<2x64x4x32xf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xf16> -> tensor<2x64x4x16xf16>
  return
}

// -----

func.func @gd_gva_not_multiple(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x6x16xf32>) {
  // expected-error @+1 {{HV = 6 (from operand 'v') must be a multiple of H = 4 (from operand 'q')}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x6x16xf32> -> tensor<2x64x6x16xf32>
  return
}

// -----

func.func @gd_gva_fewer_value_heads(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x2x16xf32>) {
  // expected-error @+1 {{HV = 2 (from operand 'v') must be a multiple of H = 4 (from operand 'q')}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x2x16xf32> -> tensor<2x64x2x16xf32>
  return
}

// -----

// HV bound by a later operand (v's HV is dynamic): still checked.
func.func @gd_gva_from_gate(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x?x16xf32>, %g: tensor<2x64x6xf32>) {
  // expected-error @+1 {{HV = 6 (from operand 'gate') must be a multiple of H = 4 (from operand 'q')}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x6xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x?x16xf32> -> tensor<2x64x?x16xf32>
  return
}

// -----

func.func @gd_zero_heads(%q: tensor<2x64x0x32xf32>, %v: tensor<2x64x0x16xf32>) {
  // expected-error @+1 {{operand 'q': dimension 2 (H) must be at least 1, found 0}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x0x32xf32>, tensor<2x64x0x32xf32>, tensor<2x64x0x16xf32> -> tensor<2x64x0x16xf32>
  return
}

// -----

// Empty head dimensions and head counts: the tiling divides by them (V = 0
// was a SIGFPE in kda-tile-chunks). Empty B or T is fine (nothing to do).
func.func @gd_zero_v(%q: tensor<1x16x1x16xf32>, %v: tensor<1x16x1x0xf32>) {
  // expected-error @+1 {{'kda.gated_delta' op operand 'v': dimension 3 (V) must be at least 1, found 0}}
  %o = kda.gated_delta additive %q, %q, %v : tensor<1x16x1x16xf32>, tensor<1x16x1x16xf32>, tensor<1x16x1x0xf32> -> tensor<1x16x1x0xf32>
  return
}

// -----

func.func @gd_zero_k(%q: tensor<1x16x1x0xf32>, %v: tensor<1x16x1x16xf32>) {
  // expected-error @+1 {{operand 'q': dimension 3 (K) must be at least 1, found 0}}
  %o = kda.gated_delta additive %q, %q, %v : tensor<1x16x1x0xf32>, tensor<1x16x1x0xf32>, tensor<1x16x1x16xf32> -> tensor<1x16x1x16xf32>
  return
}

// -----

// HV = 0 is a multiple of any H: refused as empty.
func.func @gd_zero_value_heads(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x0x16xf32>) {
  // expected-error @+1 {{operand 'v': dimension 2 (HV) must be at least 1, found 0}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x0x16xf32> -> tensor<2x64x0x16xf32>
  return
}

// -----

// V bound only by the result (v's is dynamic): still refused, naming it.
func.func @gd_zero_v_from_result(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x?xf32>) {
  // expected-error @+1 {{result 'o': dimension 3 (V) must be at least 1, found 0}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x?xf32> -> tensor<2x64x4x0xf32>
  return
}

//===----------------------------------------------------------------------===//
// kda.gated_delta: gate, beta, prologue
//===----------------------------------------------------------------------===//

// -----

func.func @gd_gate_rank_low(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64xf32>) {
  // expected-error @+1 {{operand 'gate': expected rank 3 [B, T, HV] (head-wise) or rank 4 [B, T, HV, K] (channel-wise), found rank 2}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_gate_rank_high(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32x1xf32>) {
  // expected-error @+1 {{operand 'gate': expected rank 3 [B, T, HV] (head-wise) or rank 4 [B, T, HV, K] (channel-wise), found rank 5}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32x1xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_channel_gate_k(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{operand 'gate': dimension 3 (K) is 16, but operand 'q' has K = 32}}
  %o = kda.gated_delta additive %q, %q, %v gate(%g : tensor<2x64x4x16xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_head_gate_heads(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x8xf32>) {
  // expected-error @+1 {{operand 'gate': dimension 2 (HV) is 8, but operand 'v' has HV = 4}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x8xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_gate_time(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x63x4xf32>) {
  // expected-error @+1 {{operand 'gate': dimension 1 (T) is 63, but operand 'q' has T = 64}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x63x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_gate_element_type(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xi32>) {
  // expected-error @+1 {{operand 'gate': expected element type f32, bf16 or f16, found 'i32'}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4xi32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_additive_with_beta(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %b: tensor<2x64x4xf32>) {
  // expected-error @+1 {{operand 'beta': the additive update writes k v^T with strength 1 and takes no beta (use update 'delta')}}
  %o = kda.gated_delta additive %q, %q, %v beta(%b : tensor<2x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_beta_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %b: tensor<2x64x4x1xf32>) {
  // expected-error @+1 {{operand 'beta': expected rank 3 [B, T, HV], found rank 4}}
  %o = kda.gated_delta delta %q, %q, %v beta(%b : tensor<2x64x4x1xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_beta_heads(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x8x16xf32>, %b: tensor<2x64x4xf32>) {
  // expected-error @+1 {{operand 'beta': dimension 2 (HV) is 4, but operand 'v' has HV = 8}}
  %o = kda.gated_delta delta %q, %q, %v beta(%b : tensor<2x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x8x16xf32> -> tensor<2x64x8x16xf32>
  return
}

// -----

func.func @gd_beta_batch(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %b: tensor<1x64x4xf32>) {
  // expected-error @+1 {{operand 'beta': dimension 0 (B) is 1, but operand 'q' has B = 2}}
  %o = kda.gated_delta delta %q, %q, %v beta(%b : tensor<1x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_beta_element_type(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %b: tensor<2x64x4xf64>) {
  // expected-error @+1 {{operand 'beta': expected element type f32, bf16 or f16, found 'f64'}}
  %o = kda.gated_delta delta %q, %q, %v beta(%b : tensor<2x64x4xf64>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_beta_activation_without_beta(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'beta_activation' = sigmoid needs the 'beta' operand (the logits it activates)}}
  %o = kda.gated_delta delta %q, %q, %v {beta_activation = #kda<beta sigmoid>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_beta_activation_additive(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'beta_activation' = sigmoid_neg_eigval needs the 'beta' operand}}
  %o = kda.gated_delta additive %q, %q, %v {beta_activation = #kda<beta sigmoid_neg_eigval>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_gate_activation_without_gate(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'gate_activation' = softplus needs the 'gate' operand (the raw gates it activates)}}
  %o = kda.gated_delta delta %q, %q, %v A_log(%a : tensor<4xf32>) {gate_activation = #kda<gate softplus>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_a_log_without_activation(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{operand 'A_log' is only meaningful with a 'gate_activation' (found none)}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) A_log(%a : tensor<4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_dt_bias_without_activation(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>, %d: tensor<4x32xf32>) {
  // expected-error @+1 {{operand 'dt_bias' is only meaningful with a 'gate_activation' (found none)}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) dt_bias(%d : tensor<4x32xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_a_log_heads(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>, %a: tensor<8xf32>) {
  // expected-error @+1 {{operand 'A_log': dimension 0 (HV) is 8, but operand 'v' has HV = 4}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) A_log(%a : tensor<8xf32>) {gate_activation = #kda<gate softplus>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_a_log_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>, %a: tensor<4x32xf32>) {
  // expected-error @+1 {{operand 'A_log': expected rank 1 [HV], found rank 2}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) A_log(%a : tensor<4x32xf32>) {gate_activation = #kda<gate softplus>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_a_log_element_type(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>, %a: tensor<4xi32>) {
  // expected-error @+1 {{operand 'A_log': expected element type f32, bf16 or f16, found 'i32'}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) A_log(%a : tensor<4xi32>) {gate_activation = #kda<gate softplus>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_dt_bias_channel_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>, %d: tensor<4xf32>) {
  // expected-error @+1 {{operand 'dt_bias': expected rank 2 [HV, K], found rank 1}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) dt_bias(%d : tensor<4xf32>) {gate_activation = #kda<gate softplus>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_dt_bias_head_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %d: tensor<4x32xf32>) {
  // expected-error @+1 {{operand 'dt_bias': expected rank 1 [HV], found rank 2}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4xf32>) dt_bias(%d : tensor<4x32xf32>) {gate_activation = #kda<gate softplus>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_dt_bias_k(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>, %d: tensor<4x16xf32>) {
  // expected-error @+1 {{operand 'dt_bias': dimension 1 (K) is 16, but operand 'q' has K = 32}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) dt_bias(%d : tensor<4x16xf32>) {gate_activation = #kda<gate softplus>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_dt_bias_element_type(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>, %d: tensor<4x32xi32>) {
  // expected-error @+1 {{operand 'dt_bias': expected element type f32, bf16 or f16, found 'i32'}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) dt_bias(%d : tensor<4x32xi32>) {gate_activation = #kda<gate softplus>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_lower_bound_missing(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{gate_activation = lower_bound needs the 'lower_bound' attribute (in [-5, 0))}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) {gate_activation = #kda<gate lower_bound>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_lower_bound_zero(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'lower_bound': expected a value in [-5, 0), found 0.000000e+00}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) {gate_activation = #kda<gate lower_bound>, lower_bound = 0.0 : f64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_lower_bound_below(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'lower_bound': expected a value in [-5, 0), found -5.500000e+00}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) {gate_activation = #kda<gate lower_bound>, lower_bound = -5.5 : f64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_lower_bound_positive(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'lower_bound': expected a value in [-5, 0), found 1.000000e+00}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) {gate_activation = #kda<gate lower_bound>, lower_bound = 1.0 : f64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_lower_bound_nan(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'lower_bound': expected a value in [-5, 0), found nan}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) {gate_activation = #kda<gate lower_bound>, lower_bound = 0x7FF8000000000000 : f64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_lower_bound_with_softplus(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'lower_bound' is only meaningful with gate_activation = lower_bound (found softplus)}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) {gate_activation = #kda<gate softplus>, lower_bound = -5.0 : f64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_lower_bound_without_activation(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'lower_bound' is only meaningful with gate_activation = lower_bound (found none)}}
  %o = kda.gated_delta delta %q, %q, %v gate(%g : tensor<2x64x4x32xf32>) {lower_bound = -5.0 : f64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_scale_zero(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'scale': expected a finite positive value, found 0.000000e+00}}
  %o = kda.gated_delta delta %q, %q, %v {scale = 0.0 : f64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_scale_negative(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'scale': expected a finite positive value, found -5.000000e-01}}
  %o = kda.gated_delta delta %q, %q, %v {scale = -0.5 : f64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_scale_inf(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'scale': expected a finite positive value, found INF}}
  %o = kda.gated_delta delta %q, %q, %v {scale = 0x7FF0000000000000 : f64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

//===----------------------------------------------------------------------===//
// kda.gated_delta: varlen, states, results
//===----------------------------------------------------------------------===//

// -----

func.func @gd_varlen_batch(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{operand 'cu_seqlens': variable-length batches pack every sequence into one row, so B must be 1, found B = 2}}
  %o = kda.gated_delta delta %q, %q, %v cu_seqlens(%cu : tensor<3xi32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

// B from v when q's B is dynamic.
func.func @gd_varlen_batch_from_v(%q: tensor<?x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{operand 'cu_seqlens': variable-length batches pack every sequence into one row, so B must be 1, found B = 2 (from operand 'v')}}
  %o = kda.gated_delta delta %q, %q, %v cu_seqlens(%cu : tensor<3xi32>) : tensor<?x64x4x32xf32>, tensor<?x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

// B from the result when every operand's B is dynamic.
func.func @gd_varlen_batch_from_o(%q: tensor<?x64x4x32xf32>, %cu: tensor<3xi64>) {
  // expected-error @+1 {{result 'o': dimension 0 (B) is 2, but operand 'cu_seqlens' has B = 1}}
  %o = kda.gated_delta delta %q, %q, %q cu_seqlens(%cu : tensor<3xi64>) : tensor<?x64x4x32xf32>, tensor<?x64x4x32xf32>, tensor<?x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @gd_varlen_element_type(%q: tensor<1x64x4x32xf32>, %v: tensor<1x64x4x16xf32>, %cu: tensor<3xf32>) {
  // expected-error @+1 {{operand 'cu_seqlens': expected element type i32 or i64, found 'f32'}}
  %o = kda.gated_delta delta %q, %q, %v cu_seqlens(%cu : tensor<3xf32>) : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x16xf32> -> tensor<1x64x4x16xf32>
  return
}

// -----

func.func @gd_varlen_index_type(%q: tensor<1x64x4x32xf32>, %v: tensor<1x64x4x16xf32>, %cu: tensor<3xindex>) {
  // expected-error @+1 {{operand 'cu_seqlens': expected element type i32 or i64, found 'index'}}
  %o = kda.gated_delta delta %q, %q, %v cu_seqlens(%cu : tensor<3xindex>) : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x16xf32> -> tensor<1x64x4x16xf32>
  return
}

// -----

func.func @gd_varlen_unsigned(%q: tensor<1x64x4x32xf32>, %v: tensor<1x64x4x16xf32>, %cu: tensor<3xui32>) {
  // expected-error @+1 {{operand 'cu_seqlens': expected element type i32 or i64, found 'ui32'}}
  %o = kda.gated_delta delta %q, %q, %v cu_seqlens(%cu : tensor<3xui32>) : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x16xf32> -> tensor<1x64x4x16xf32>
  return
}

// -----

func.func @gd_varlen_rank(%q: tensor<1x64x4x32xf32>, %v: tensor<1x64x4x16xf32>, %cu: tensor<1x3xi32>) {
  // expected-error @+1 {{operand 'cu_seqlens': expected rank 1 [N+1], found rank 2}}
  %o = kda.gated_delta delta %q, %q, %v cu_seqlens(%cu : tensor<1x3xi32>) : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x16xf32> -> tensor<1x64x4x16xf32>
  return
}

// -----

func.func @gd_varlen_too_short(%q: tensor<1x64x4x32xf32>, %v: tensor<1x64x4x16xf32>, %cu: tensor<1xi32>) {
  // expected-error @+1 {{operand 'cu_seqlens': expected at least 2 offsets (N + 1 with N >= 1 sequences), found 1}}
  %o = kda.gated_delta delta %q, %q, %v cu_seqlens(%cu : tensor<1xi32>) : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x16xf32> -> tensor<1x64x4x16xf32>
  return
}

// -----

func.func @gd_varlen_empty(%q: tensor<1x64x4x32xf32>, %v: tensor<1x64x4x16xf32>, %cu: tensor<0xi64>) {
  // expected-error @+1 {{operand 'cu_seqlens': expected at least 2 offsets (N + 1 with N >= 1 sequences), found 0}}
  %o = kda.gated_delta delta %q, %q, %v cu_seqlens(%cu : tensor<0xi64>) : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x16xf32> -> tensor<1x64x4x16xf32>
  return
}

// -----

func.func @gd_varlen_state_count(%q: tensor<1x64x4x32xf32>, %v: tensor<1x64x4x16xf32>, %cu: tensor<4xi32>, %s: tensor<2x4x32x16xf32>) {
  // expected-error @+1 {{operand 'initial_state': dimension 0 (N) is 2, but operand 'cu_seqlens' has N = 3}}
  %o = kda.gated_delta delta %q, %q, %v initial_state(%s : tensor<2x4x32x16xf32>) cu_seqlens(%cu : tensor<4xi32>) : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x16xf32> -> tensor<1x64x4x16xf32>
  return
}

// -----

func.func @gd_varlen_final_state_count(%q: tensor<1x64x4x32xf32>, %v: tensor<1x64x4x16xf32>, %cu: tensor<4xi32>) {
  // expected-error @+1 {{result 'final_state': dimension 0 (N) is 1, but operand 'cu_seqlens' has N = 3}}
  %o, %s = kda.gated_delta delta %q, %q, %v cu_seqlens(%cu : tensor<4xi32>) : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x16xf32> -> tensor<1x64x4x16xf32> final_state tensor<1x4x32x16xf32>
  return
}

// -----

func.func @gd_state_count(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %s: tensor<3x4x32x16xf32>) {
  // expected-error @+1 {{operand 'initial_state': dimension 0 (N) is 3, but operand 'q' has N = 2}}
  %o = kda.gated_delta delta %q, %q, %v initial_state(%s : tensor<3x4x32x16xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

// N = B without varlen, B known only from the result.
func.func @gd_state_count_from_o(%q: tensor<?x64x4x32xf32>, %v: tensor<?x64x4x16xf32>, %s: tensor<3x4x32x16xf32>) {
  // expected-error @+1 {{result 'o': dimension 0 (N) is 2, but operand 'initial_state' has N = 3}}
  %o = kda.gated_delta delta %q, %q, %v initial_state(%s : tensor<3x4x32x16xf32>) : tensor<?x64x4x32xf32>, tensor<?x64x4x32xf32>, tensor<?x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_state_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %s: tensor<4x32x16xf32>) {
  // expected-error @+1 {{operand 'initial_state': expected rank 4 [N, HV, K, V], found rank 3}}
  %o = kda.gated_delta delta %q, %q, %v initial_state(%s : tensor<4x32x16xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_state_rank_v_major(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %s: tensor<4x16x32xf32>) {
  // expected-error @+1 {{operand 'initial_state': expected rank 4 [N, HV, V, K], found rank 3}}
  %o = kda.gated_delta delta %q, %q, %v initial_state(%s : tensor<4x16x32xf32>) {state_layout = #kda<layout v_major>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_state_f16(%q: tensor<2x64x4x32xf16>, %v: tensor<2x64x4x16xf16>, %s: tensor<2x4x32x16xf16>) {
  // expected-error @+1 {{operand 'initial_state': expected element type f32 or bf16, found 'f16'}}
  %o = kda.gated_delta delta %q, %q, %v initial_state(%s : tensor<2x4x32x16xf16>) : tensor<2x64x4x32xf16>, tensor<2x64x4x32xf16>, tensor<2x64x4x16xf16> -> tensor<2x64x4x16xf16>
  return
}

// -----

// A V-major state under the default K-major layout.
func.func @gd_state_layout_k_major(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %s: tensor<2x4x16x32xf32>) {
  // expected-error @+1 {{operand 'initial_state': dimension 2 (K) is 16, but operand 'q' has K = 32}}
  %o = kda.gated_delta delta %q, %q, %v initial_state(%s : tensor<2x4x16x32xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

// A K-major state under the V-major layout.
func.func @gd_state_layout_v_major(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %s: tensor<2x4x32x16xf32>) {
  // expected-error @+1 {{operand 'initial_state': dimension 2 (V) is 32, but operand 'v' has V = 16}}
  %o = kda.gated_delta delta %q, %q, %v initial_state(%s : tensor<2x4x32x16xf32>) {state_layout = #kda<layout v_major>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_state_heads(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %s: tensor<2x8x32x16xf32>) {
  // expected-error @+1 {{operand 'initial_state': dimension 1 (HV) is 8, but operand 'v' has HV = 4}}
  %o = kda.gated_delta delta %q, %q, %v initial_state(%s : tensor<2x8x32x16xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_o_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{result 'o': expected rank 4 [B, T, HV, V], found rank 3}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x64xf32>
  return
}

// -----

func.func @gd_o_value_dim(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{result 'o': dimension 3 (V) is 32, but operand 'v' has V = 16}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

// o has HV heads, not H.
func.func @gd_o_heads(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x8x16xf32>) {
  // expected-error @+1 {{result 'o': dimension 2 (HV) is 4, but operand 'v' has HV = 8}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x8x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_o_element_type_kind(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{result 'o': expected element type f32, bf16 or f16, found 'i32'}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xi32>
  return
}

// -----

func.func @gd_o_element_type(%q: tensor<2x64x4x32xbf16>, %v: tensor<2x64x4x16xbf16>) {
  // expected-error @+1 {{result 'o': expected element type 'bf16' (that of 'v'), found 'f32'}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_final_state_shape(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{result 'final_state': dimension 3 (V) is 32, but operand 'v' has V = 16}}
  %o, %s = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x4x32x32xf32>
  return
}

// -----

func.func @gd_final_state_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{result 'final_state': expected rank 4 [N, HV, K, V], found rank 5}}
  %o, %s = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x1x4x32x16xf32>
  return
}

// -----

func.func @gd_final_state_layout(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{result 'final_state': dimension 2 (V) is 32, but operand 'v' has V = 16}}
  %o, %s = kda.gated_delta delta %q, %q, %v {state_layout = #kda<layout v_major>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x4x32x16xf32>
  return
}

// -----

func.func @gd_final_state_f16(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{result 'final_state': expected element type f32 or bf16, found 'f16'}}
  %o, %s = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x4x32x16xf16>
  return
}

// -----

func.func @gd_final_state_element_type(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %s0: tensor<2x4x32x16xf32>) {
  // expected-error @+1 {{result 'final_state': expected element type 'f32' (that of 'initial_state'), found 'bf16'}}
  %o, %s = kda.gated_delta delta %q, %q, %v initial_state(%s0 : tensor<2x4x32x16xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x4x32x16xbf16>
  return
}

// -----

func.func @gd_boundary_states_without_interval(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{result 'boundary_states' needs the 'boundary_interval' attribute (tokens between two recorded states)}}
  %o, %s, %bs = kda.gated_delta delta %q, %q, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x4x32x16xf32> boundary_states tensor<2x1x4x32x16xf32>
  return
}

// -----

func.func @gd_boundary_interval_zero(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'boundary_interval': expected a positive number of tokens, found 0}}
  %o, %s, %bs = kda.gated_delta delta %q, %q, %v {boundary_interval = 0 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x4x32x16xf32> boundary_states tensor<2x1x4x32x16xf32>
  return
}

// -----

func.func @gd_boundary_interval_negative(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'boundary_interval': expected a positive number of tokens, found -64}}
  %o, %s, %bs = kda.gated_delta delta %q, %q, %v {boundary_interval = -64 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x4x32x16xf32> boundary_states tensor<2x1x4x32x16xf32>
  return
}

// -----

// NT = ceil(100 / 32) = 4.
func.func @gd_boundary_count(%q: tensor<2x100x4x32xf32>, %v: tensor<2x100x4x16xf32>) {
  // expected-error @+1 {{result 'boundary_states': dimension 1 (NT) is 3, but 'boundary_interval' and T has NT = 4}}
  %o, %s, %bs = kda.gated_delta delta %q, %q, %v {boundary_interval = 32 : i64} : tensor<2x100x4x32xf32>, tensor<2x100x4x32xf32>, tensor<2x100x4x16xf32> -> tensor<2x100x4x16xf32> final_state tensor<2x4x32x16xf32> boundary_states tensor<2x3x4x32x16xf32>
  return
}

// -----

// A huge interval: NT = 1 (and no overflow computing it).
func.func @gd_boundary_count_huge_interval(%q: tensor<2x100x4x32xf32>, %v: tensor<2x100x4x16xf32>) {
  // expected-error @+1 {{result 'boundary_states': dimension 1 (NT) is 0, but 'boundary_interval' and T has NT = 1}}
  %o, %s, %bs = kda.gated_delta delta %q, %q, %v {boundary_interval = 9223372036854775807 : i64} : tensor<2x100x4x32xf32>, tensor<2x100x4x32xf32>, tensor<2x100x4x16xf32> -> tensor<2x100x4x16xf32> final_state tensor<2x4x32x16xf32> boundary_states tensor<2x0x4x32x16xf32>
  return
}

// -----

func.func @gd_boundary_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{result 'boundary_states': expected rank 5 [N, NT, HV, K, V], found rank 4}}
  %o, %s, %bs = kda.gated_delta delta %q, %q, %v {boundary_interval = 64 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x4x32x16xf32> boundary_states tensor<2x4x32x16xf32>
  return
}

// -----

func.func @gd_boundary_layout(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{result 'boundary_states': dimension 3 (V) is 32, but operand 'v' has V = 16}}
  %o, %s, %bs = kda.gated_delta delta %q, %q, %v {boundary_interval = 64 : i64, state_layout = #kda<layout v_major>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x4x16x32xf32> boundary_states tensor<2x1x4x32x16xf32>
  return
}

// -----

func.func @gd_boundary_element_type(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{result 'boundary_states': expected element type f32 or bf16, found 'f16'}}
  %o, %s, %bs = kda.gated_delta delta %q, %q, %v {boundary_interval = 64 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x4x32x16xf32> boundary_states tensor<2x1x4x32x16xf16>
  return
}

// -----

func.func @gd_boundary_interval_not_chunk_multiple(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'tile': chunk = 64 must divide boundary_interval = 32 so that every recorded state falls on a chunk boundary}}
  %o, %s, %bs = kda.gated_delta delta %q, %q, %v {boundary_interval = 32 : i64, tile = #kda.tile<>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x4x32x16xf32> boundary_states tensor<2x2x4x32x16xf32>
  return
}

// -----

func.func @gd_boundary_interval_without_states(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'boundary_interval' is set but the op has no 'boundary_states' result}}
  %o, %s = kda.gated_delta delta %q, %q, %v {boundary_interval = 64 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_state tensor<2x4x32x16xf32>
  return
}

// -----

// A v_block that does not divide V would leave the last columns unwritten
// (kda-compile used to fail with no message).
func.func @gd_tile_v_block_not_divisor(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'tile': v_block = 12 must divide V = 16 (from operand 'v')}}
  %o = kda.gated_delta delta %q, %q, %v {tile = #kda.tile<v_block = 12>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_tile_v_block(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'tile': v_block = 32 exceeds V = 16}}
  %o = kda.gated_delta delta %q, %q, %v {tile = #kda.tile<v_block = 32>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

//===----------------------------------------------------------------------===//
// kda.gate
//===----------------------------------------------------------------------===//

// -----

func.func @gate_activation_none(%x: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{'kda.gate' op attribute 'activation': expected softplus or lower_bound (none would be the identity)}}
  %g = kda.gate none channel %x : tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @gate_channel_rank(%x: tensor<4xf32>) {
  // expected-error @+1 {{operand 'input': channel-wise gates need rank >= 2 [..., HV, K], found rank 1}}
  %g = kda.gate softplus channel %x : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @gate_head_rank(%x: tensor<f32>) {
  // expected-error @+1 {{operand 'input': head-wise gates need rank >= 1 [..., HV], found rank 0}}
  %g = kda.gate softplus head %x : tensor<f32> -> tensor<f32>
  return
}

// -----

func.func @gate_input_element_type(%x: tensor<2x64x4xi32>) {
  // expected-error @+1 {{operand 'input': expected element type f32, bf16 or f16, found 'i32'}}
  %g = kda.gate softplus head %x : tensor<2x64x4xi32> -> tensor<2x64x4xf32>
  return
}

// -----

func.func @gate_a_log_heads(%x: tensor<2x64x4x32xbf16>, %a: tensor<8xf32>) {
  // expected-error @+1 {{operand 'A_log': dimension 0 (HV) is 8, but operand 'input' has HV = 4}}
  %g = kda.gate softplus channel %x A_log(%a : tensor<8xf32>) : tensor<2x64x4x32xbf16> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @gate_a_log_rank(%x: tensor<2x64x4xf32>, %a: tensor<4x1xf32>) {
  // expected-error @+1 {{operand 'A_log': expected rank 1 [HV], found rank 2}}
  %g = kda.gate softplus head %x A_log(%a : tensor<4x1xf32>) : tensor<2x64x4xf32> -> tensor<2x64x4xf32>
  return
}

// -----

func.func @gate_dt_bias_channel_rank(%x: tensor<2x64x4x32xf32>, %d: tensor<4xf32>) {
  // expected-error @+1 {{operand 'dt_bias': expected rank 2 [HV, K], found rank 1}}
  %g = kda.gate softplus channel %x dt_bias(%d : tensor<4xf32>) : tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @gate_dt_bias_k(%x: tensor<2x64x4x32xf32>, %d: tensor<4x16xf32>) {
  // expected-error @+1 {{operand 'dt_bias': dimension 1 (K) is 16, but operand 'input' has K = 32}}
  %g = kda.gate softplus channel %x dt_bias(%d : tensor<4x16xf32>) : tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @gate_dt_bias_head_rank(%x: tensor<2x64x4xf32>, %d: tensor<4x32xf32>) {
  // expected-error @+1 {{operand 'dt_bias': expected rank 1 [HV], found rank 2}}
  %g = kda.gate softplus head %x dt_bias(%d : tensor<4x32xf32>) : tensor<2x64x4xf32> -> tensor<2x64x4xf32>
  return
}

// -----

func.func @gate_dt_bias_element_type(%x: tensor<2x64x4xf32>, %d: tensor<4xi64>) {
  // expected-error @+1 {{operand 'dt_bias': expected element type f32, bf16 or f16, found 'i64'}}
  %g = kda.gate softplus head %x dt_bias(%d : tensor<4xi64>) : tensor<2x64x4xf32> -> tensor<2x64x4xf32>
  return
}

// -----

func.func @gate_lower_bound_missing(%x: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{gate_activation = lower_bound needs the 'lower_bound' attribute (in [-5, 0))}}
  %g = kda.gate lower_bound channel %x : tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @gate_lower_bound_range(%x: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'lower_bound': expected a value in [-5, 0), found -6.000000e+00}}
  %g = kda.gate lower_bound channel %x {lower_bound = -6.0 : f64} : tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @gate_lower_bound_with_softplus(%x: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'lower_bound' is only meaningful with gate_activation = lower_bound (found softplus)}}
  %g = kda.gate softplus channel %x {lower_bound = -1.0 : f64} : tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @gate_result_element_type(%x: tensor<2x64x4x32xbf16>) {
  // expected-error @+1 {{result 'result': expected element type f32, found 'bf16'}}
  %g = kda.gate softplus channel %x : tensor<2x64x4x32xbf16> -> tensor<2x64x4x32xbf16>
  return
}

// -----

func.func @gate_result_shape(%x: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{result 'result': dimension 1 (d1) is 32, but operand 'input' has d1 = 64}}
  %g = kda.gate softplus channel %x : tensor<2x64x4x32xf32> -> tensor<2x32x4x32xf32>
  return
}

// -----

func.func @gate_result_heads(%x: tensor<2x64x4xf32>) {
  // expected-error @+1 {{result 'result': dimension 2 (HV) is 8, but operand 'input' has HV = 4}}
  %g = kda.gate softplus head %x : tensor<2x64x4xf32> -> tensor<2x64x8xf32>
  return
}

// -----

func.func @gate_result_rank(%x: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{result 'result': expected rank 4 [d0, d1, HV, K], found rank 3}}
  %g = kda.gate softplus channel %x : tensor<2x64x4x32xf32> -> tensor<2x64x128xf32>
  return
}

//===----------------------------------------------------------------------===//
// kda.decode_step (N = 8, H = 4, K = 32, HV = 4, V = 16, P = 32)
//===----------------------------------------------------------------------===//

// -----

func.func @decode_q_rank(%q: tensor<1x1x8x4x32xf32>, %k: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{'kda.decode_step' op operand 'q': expected rank 3 [N, H, K], found rank 5}}
  %o, %p2 = kda.decode_step delta %q, %k, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<1x1x8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

// A q of rank 4 is the multi-token form: every other operand follows it.
func.func @decode_multi_token_k_rank(%q: tensor<1x8x4x32xf32>, %k: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{'kda.decode_step' op operand 'k': expected rank 4 [N, T, H, K], found rank 3}}
  %o, %p2 = kda.decode_step delta %q, %k, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<1x8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_multi_token_indices(%q: tensor<8x3x4x32xf32>, %v: tensor<8x3x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x3x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{'kda.decode_step' op operand 'indices': expected rank 2 [N, T], found rank 1}}
  %o, %p2 = kda.decode_step additive %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x3x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x3x4x32xf32>, tensor<8x3x4x32xf32>, tensor<8x3x4x16xf32>
  return
}

// -----

func.func @decode_k_head_dim(%q: tensor<8x4x32xf32>, %k: tensor<8x4x16xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'k': dimension 2 (K) is 16, but operand 'q' has K = 32}}
  %o, %p2 = kda.decode_step delta %q, %k, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x16xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_v_count(%q: tensor<8x4x32xf32>, %v: tensor<4x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'v': dimension 0 (N) is 4, but operand 'q' has N = 8}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<4x4x16xf32>
  return
}

// -----

func.func @decode_v_element_type_kind(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xi8>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'v': expected element type f32, bf16 or f16, found 'i8'}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xi8>
  return
}

// -----

func.func @decode_mixed_element_types(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xbf16>, %i: tensor<8xi32>, %o0: tensor<8x4x16xbf16>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operands 'q', 'k', 'v' must share one element type, found 'f32', 'f32', 'bf16'}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xbf16>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xbf16>
  return
}

// -----

func.func @decode_gva_not_multiple(%q: tensor<8x4x32xf32>, %v: tensor<8x6x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x6x16xf32>, %p: tensor<32x6x32x16xf32>) {
  // expected-error @+1 {{HV = 6 (from operand 'v') must be a multiple of H = 4 (from operand 'q')}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x6x16xf32>, tensor<32x6x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x6x16xf32>
  return
}

// -----

// HV bound by o_init (v's HV is dynamic): still checked.
func.func @decode_gva_from_o_init(%q: tensor<8x4x32xf32>, %v: tensor<8x?x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x6x16xf32>, %p: tensor<32x?x32x16xf32>) {
  // expected-error @+1 {{HV = 6 (from operand 'o_init') must be a multiple of H = 4 (from operand 'q')}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x6x16xf32>, tensor<32x?x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x?x16xf32>
  return
}

// -----

func.func @decode_gate_rank(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %g: tensor<1x8x4x32xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'gate': expected rank 2 [N, HV] (head-wise) or rank 3 [N, HV, K] (channel-wise), found rank 4}}
  %o, %p2 = kda.decode_step delta %q, %q, %v gate(%g : tensor<1x8x4x32xf32>) indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_gate_count(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %g: tensor<16x4xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'gate': dimension 0 (N) is 16, but operand 'q' has N = 8}}
  %o, %p2 = kda.decode_step delta %q, %q, %v gate(%g : tensor<16x4xf32>) indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_channel_gate_k(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %g: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'gate': dimension 2 (K) is 16, but operand 'q' has K = 32}}
  %o, %p2 = kda.decode_step delta %q, %q, %v gate(%g : tensor<8x4x16xf32>) indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_additive_with_beta(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %b: tensor<8x4xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'beta': the additive update writes k v^T with strength 1 and takes no beta}}
  %o, %p2 = kda.decode_step additive %q, %q, %v beta(%b : tensor<8x4xf32>) indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_beta_rank(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %b: tensor<8xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'beta': expected rank 2 [N, HV], found rank 1}}
  %o, %p2 = kda.decode_step delta %q, %q, %v beta(%b : tensor<8xf32>) indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_beta_activation_without_beta(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{attribute 'beta_activation' = sigmoid needs the 'beta' operand}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) {beta_activation = #kda<beta sigmoid>} : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_gate_activation_without_gate(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{attribute 'gate_activation' = lower_bound needs the 'gate' operand}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) {gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64} : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_dt_bias_without_activation(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %g: tensor<8x4xf32>, %d: tensor<4xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'dt_bias' is only meaningful with a 'gate_activation' (found none)}}
  %o, %p2 = kda.decode_step delta %q, %q, %v gate(%g : tensor<8x4xf32>) dt_bias(%d : tensor<4xf32>) indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_a_log_heads(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %g: tensor<8x4xf32>, %a: tensor<2xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'A_log': dimension 0 (HV) is 2, but operand 'v' has HV = 4}}
  %o, %p2 = kda.decode_step delta %q, %q, %v gate(%g : tensor<8x4xf32>) A_log(%a : tensor<2xf32>) indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) {gate_activation = #kda<gate softplus>} : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_lower_bound_range(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %g: tensor<8x4x32xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{attribute 'lower_bound': expected a value in [-5, 0), found -1.000000e+01}}
  %o, %p2 = kda.decode_step delta %q, %q, %v gate(%g : tensor<8x4x32xf32>) indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) {gate_activation = #kda<gate lower_bound>, lower_bound = -10.0 : f64} : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_lower_bound_without_activation(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{attribute 'lower_bound' is only meaningful with gate_activation = lower_bound (found none)}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) {lower_bound = -1.0 : f64} : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_scale(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{attribute 'scale': expected a finite positive value, found -1.000000e+00}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) {scale = -1.0 : f64} : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_indices_element_type(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xf32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'indices': expected element type i32 or i64, found 'f32'}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xf32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_read_indices_count(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %r: tensor<7xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'read_indices': dimension 0 (N) is 7, but operand 'q' has N = 8}}
  %o, %np = kda.decode_step additive %q, %q, %v indices(%i : tensor<8xi32>) read_indices(%r : tensor<7xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_read_indices_type(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %r: tensor<8xf32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'read_indices': expected element type i32 or i64, found 'f32'}}
  %o, %np = kda.decode_step additive %q, %q, %v indices(%i : tensor<8xi32>) read_indices(%r : tensor<8xf32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_read_pool_heads(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %rp: tensor<8x2x32x16xf32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'read_pool': dimension 1 (HV) is 2, but operand 'v' has HV = 4}}
  %o, %np = kda.decode_step additive %q, %q, %v indices(%i : tensor<8xi32>) read_pool(%rp : tensor<8x2x32x16xf32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_read_pool_type(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %rp: tensor<8x4x32x16xbf16>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'read_pool': expected element type 'f32' (that of 'state_pool'), found 'bf16'}}
  %o, %np = kda.decode_step additive %q, %q, %v indices(%i : tensor<8xi32>) read_pool(%rp : tensor<8x4x32x16xbf16>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_indices_i16(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi16>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'indices': expected element type i32 or i64, found 'i16'}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi16>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_indices_count(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<16xi64>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'indices': dimension 0 (N) is 16, but operand 'q' has N = 8}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<16xi64>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_indices_rank(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8x1xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'indices': expected rank 1 [N], found rank 2}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8x1xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_o_init_rank(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x64xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'o_init': expected rank 3 [N, HV, V], found rank 2}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x64xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_o_init_value_dim(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x32xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'o_init': dimension 2 (V) is 32, but operand 'v' has V = 16}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x32xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_o_init_element_type_kind(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xi32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'o_init': expected element type f32, bf16 or f16, found 'i32'}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xi32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_o_init_element_type(%q: tensor<8x4x32xbf16>, %v: tensor<8x4x16xbf16>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'o_init': expected element type 'bf16' (that of 'v'), found 'f32'}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) : tensor<8x4x32xbf16>, tensor<8x4x32xbf16>, tensor<8x4x16xbf16>
  return
}

// -----

func.func @decode_pool_rank(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<4x32x16xf32>) {
  // expected-error @+1 {{operand 'state_pool': expected rank 4 [P, HV, K, V], found rank 3}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<4x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_pool_f16(%q: tensor<8x4x32xf16>, %v: tensor<8x4x16xf16>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf16>, %p: tensor<32x4x32x16xf16>) {
  // expected-error @+1 {{operand 'state_pool': expected element type f32 or bf16, found 'f16'}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf16>, tensor<32x4x32x16xf16>) : tensor<8x4x32xf16>, tensor<8x4x32xf16>, tensor<8x4x16xf16>
  return
}

// -----

func.func @decode_pool_heads(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x8x32x16xf32>) {
  // expected-error @+1 {{operand 'state_pool': dimension 1 (HV) is 8, but operand 'v' has HV = 4}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x8x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

// A K-major pool under the V-major layout.
func.func @decode_pool_layout(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{operand 'state_pool': dimension 2 (V) is 32, but operand 'v' has V = 16}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) {state_layout = #kda<layout v_major>} : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_zero_v(%q: tensor<8x4x32xf32>, %v: tensor<8x4x0xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x0xf32>, %p: tensor<32x4x32x0xf32>) {
  // expected-error @+1 {{'kda.decode_step' op operand 'v': dimension 2 (V) must be at least 1, found 0}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x0xf32>, tensor<32x4x32x0xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x0xf32>
  return
}

// -----

func.func @decode_zero_k(%q: tensor<8x4x0xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x0x16xf32>) {
  // expected-error @+1 {{operand 'q': dimension 2 (K) must be at least 1, found 0}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x0x16xf32>) : tensor<8x4x0xf32>, tensor<8x4x0xf32>, tensor<8x4x16xf32>
  return
}

// -----

// HV bound only by the pool (v's is dynamic).
func.func @decode_zero_value_heads_from_pool(%q: tensor<8x4x32xf32>, %v: tensor<8x?x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x?x16xf32>, %p: tensor<32x0x32x16xf32>) {
  // expected-error @+1 {{operand 'state_pool': dimension 1 (HV) must be at least 1, found 0}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x?x16xf32>, tensor<32x0x32x16xf32>) : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x?x16xf32>
  return
}

// -----

func.func @decode_tile_v_block_not_divisor(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{attribute 'tile': v_block = 6 must divide V = 16 (from operand 'v')}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) {tile = #kda.tile<v_block = 6>} : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

// -----

func.func @decode_tile_v_block(%q: tensor<8x4x32xf32>, %v: tensor<8x4x16xf32>, %i: tensor<8xi32>, %o0: tensor<8x4x16xf32>, %p: tensor<32x4x32x16xf32>) {
  // expected-error @+1 {{attribute 'tile': v_block = 64 exceeds V = 16}}
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<8xi32>) outs(%o0, %p : tensor<8x4x16xf32>, tensor<32x4x32x16xf32>) {tile = #kda.tile<v_block = 64>} : tensor<8x4x32xf32>, tensor<8x4x32xf32>, tensor<8x4x16xf32>
  return
}

//===----------------------------------------------------------------------===//
// kda.window_attention
//===----------------------------------------------------------------------===//

// -----

func.func @win_keys_not_queries(%q: tensor<2x64x4x32xf32>, %k: tensor<2x80x4x32xf32>) {
  // expected-error @+1 {{operand 'k': dimension 1 (T) is 80, but operand 'q' has T = 64}}
  %o = kda.window_attention %q, %k, %k {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x80x4x32xf32>, tensor<2x80x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_earlier_keys_fewer(%q: tensor<2x64x4x32xf32>, %k: tensor<2x48x4x32xf32>) {
  // expected-error @+1 {{operand 'k': dimension 1 (S, the key rows): expected at least T = 64 (the query rows), found 48}}
  %o = kda.window_attention %q, %k, %k {window = 8 : i64, earlier_keys} : tensor<2x64x4x32xf32>, tensor<2x48x4x32xf32>, tensor<2x48x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_earlier_keys_values(%q: tensor<2x64x4x32xf32>, %k: tensor<2x80x4x32xf32>, %v: tensor<2x96x4x32xf32>) {
  // expected-error @+1 {{operand 'v': dimension 1 (S) is 96, but operand 'k' has S = 80}}
  %o = kda.window_attention %q, %k, %v {window = 8 : i64, earlier_keys} : tensor<2x64x4x32xf32>, tensor<2x80x4x32xf32>, tensor<2x96x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_earlier_keys_varlen(%q: tensor<1x64x4x32xf32>, %k: tensor<1x80x4x32xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{attribute 'earlier_keys' takes dense sequences: no 'cu_seqlens' operand}}
  %o = kda.window_attention %q, %k, %k cu_seqlens(%cu : tensor<3xi32>) {window = 8 : i64, earlier_keys} : tensor<1x64x4x32xf32>, tensor<1x80x4x32xf32>, tensor<1x80x4x32xf32> -> tensor<1x64x4x32xf32>
  return
}

// -----

func.func @win_mix_without_linear(%q: tensor<2x64x4x32xf32>, %x: tensor<2x64x4x32xf32>, %y: tensor<2x64x4x32xbf16>, %z: tensor<2x64x4xf32>, %zw: tensor<2x64x3xf32>, %zr: tensor<2x64xf32>) {
  // expected-error @+1 {{attribute 'mix' needs the 'mix_linear' operand}}
  %o = kda.window_attention %q, %q, %q {window = 8 : i64, mix = #kda<combine sum>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_linear_without_mix(%q: tensor<2x64x4x32xf32>, %x: tensor<2x64x4x32xf32>, %y: tensor<2x64x4x32xbf16>, %z: tensor<2x64x4xf32>, %zw: tensor<2x64x3xf32>, %zr: tensor<2x64xf32>) {
  // expected-error @+1 {{operand 'mix_linear' needs the 'mix' attribute}}
  %o = kda.window_attention %q, %q, %q mix_linear(%x : tensor<2x64x4x32xf32>) {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_gated_without_gate(%q: tensor<2x64x4x32xf32>, %x: tensor<2x64x4x32xf32>, %y: tensor<2x64x4x32xbf16>, %z: tensor<2x64x4xf32>, %zw: tensor<2x64x3xf32>, %zr: tensor<2x64xf32>) {
  // expected-error @+1 {{a gated mix needs the 'mix_gate' operand z}}
  %o = kda.window_attention %q, %q, %q mix_linear(%x : tensor<2x64x4x32xf32>) {window = 8 : i64, mix = #kda<combine gated>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_sum_with_gate(%q: tensor<2x64x4x32xf32>, %x: tensor<2x64x4x32xf32>, %y: tensor<2x64x4x32xbf16>, %z: tensor<2x64x4xf32>, %zw: tensor<2x64x3xf32>, %zr: tensor<2x64xf32>) {
  // expected-error @+1 {{operand 'mix_gate': a 'sum' mix takes no gate}}
  %o = kda.window_attention %q, %q, %q mix_linear(%x : tensor<2x64x4x32xf32>) mix_gate(%z : tensor<2x64x4xf32>) {window = 8 : i64, mix = #kda<combine sum>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_gate_without_mix(%q: tensor<2x64x4x32xf32>, %x: tensor<2x64x4x32xf32>, %y: tensor<2x64x4x32xbf16>, %z: tensor<2x64x4xf32>, %zw: tensor<2x64x3xf32>, %zr: tensor<2x64xf32>) {
  // expected-error @+1 {{operand 'mix_gate' needs the 'mix' attribute}}
  %o = kda.window_attention %q, %q, %q mix_gate(%z : tensor<2x64x4xf32>) {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_linear_type(%q: tensor<2x64x4x32xf32>, %x: tensor<2x64x4x32xf32>, %y: tensor<2x64x4x32xbf16>, %z: tensor<2x64x4xf32>, %zw: tensor<2x64x3xf32>, %zr: tensor<2x64xf32>) {
  // expected-error @+1 {{operand 'mix_linear': expected type 'tensor<2x64x4x32xf32>' (the result's), found 'tensor<2x64x4x32xbf16>'}}
  %o = kda.window_attention %q, %q, %q mix_linear(%y : tensor<2x64x4x32xbf16>) {window = 8 : i64, mix = #kda<combine sum>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_gate_heads(%q: tensor<2x64x4x32xf32>, %x: tensor<2x64x4x32xf32>, %y: tensor<2x64x4x32xbf16>, %z: tensor<2x64x4xf32>, %zw: tensor<2x64x3xf32>, %zr: tensor<2x64xf32>) {
  // expected-error @+1 {{operand 'mix_gate': dimension 2 (HO) is 3, but max(HQ, HV) has HO = 4}}
  %o = kda.window_attention %q, %q, %q mix_linear(%x : tensor<2x64x4x32xf32>) mix_gate(%zw : tensor<2x64x3xf32>) {window = 8 : i64, mix = #kda<combine gated>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_gate_rank(%q: tensor<2x64x4x32xf32>, %x: tensor<2x64x4x32xf32>, %y: tensor<2x64x4x32xbf16>, %z: tensor<2x64x4xf32>, %zw: tensor<2x64x3xf32>, %zr: tensor<2x64xf32>) {
  // expected-error @+1 {{operand 'mix_gate': expected rank 3 [B, T, HO] (head-wise) or rank 4 [B, T, HO, V] (channel-wise), found rank 2}}
  %o = kda.window_attention %q, %q, %q mix_linear(%x : tensor<2x64x4x32xf32>) mix_gate(%zr : tensor<2x64xf32>) {window = 8 : i64, mix = #kda<combine gated>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_q_rank(%q: tensor<2x64x128xf32>, %k: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{'kda.window_attention' op operand 'q': expected rank 4 [B, T, HQ, K], found rank 3}}
  %o = kda.window_attention %q, %k, %k {window = 8 : i64} : tensor<2x64x128xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_k_rank(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x128xf32>) {
  // expected-error @+1 {{operand 'k': expected rank 4 [B, T, HK, K], found rank 3}}
  %o = kda.window_attention %q, %k, %q {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x128xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_k_time(%q: tensor<2x64x4x32xf32>, %k: tensor<2x32x4x32xf32>) {
  // expected-error @+1 {{operand 'k': dimension 1 (T) is 32, but operand 'q' has T = 64}}
  %o = kda.window_attention %q, %k, %q {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x32x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_k_head_dim(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x64xf32>) {
  // expected-error @+1 {{operand 'k': dimension 3 (K) is 64, but operand 'q' has K = 32}}
  %o = kda.window_attention %q, %k, %q {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x64xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_v_batch(%q: tensor<2x64x4x32xf32>, %v: tensor<4x64x4x16xf32>) {
  // expected-error @+1 {{operand 'v': dimension 0 (B) is 4, but operand 'q' has B = 2}}
  %o = kda.window_attention %q, %q, %v {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<4x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @win_v_element_type_kind(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xi32>) {
  // expected-error @+1 {{operand 'v': expected element type f32, bf16 or f16, found 'i32'}}
  %o = kda.window_attention %q, %q, %v {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xi32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @win_mixed_element_types(%q: tensor<2x64x4x32xf16>, %k: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf16>) {
  // expected-error @+1 {{operands 'q', 'k', 'v' must share one element type, found 'f16', 'f32', 'f16'}}
  %o = kda.window_attention %q, %k, %v {window = 8 : i64} : tensor<2x64x4x32xf16>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf16> -> tensor<2x64x4x16xf16>
  return
}

// -----

// HO = max(HQ, HV) = 6, HQ = 4 does not divide it.
func.func @win_hq_not_divisor(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x2x32xf32>, %v: tensor<2x64x6x16xf32>) {
  // expected-error @+1 {{HO = 6 (from max(HQ, HV)) must be a multiple of HQ = 4 (from operand 'q')}}
  %o = kda.window_attention %q, %k, %v {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x2x32xf32>, tensor<2x64x6x16xf32> -> tensor<2x64x6x16xf32>
  return
}

// -----

func.func @win_hk_not_divisor(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x3x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{HO = 4 (from max(HQ, HV)) must be a multiple of HK = 3 (from operand 'k')}}
  %o = kda.window_attention %q, %k, %v {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x3x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

// More k heads than output heads.
func.func @win_hk_too_many(%q: tensor<2x64x2x32xf32>, %k: tensor<2x64x4x32xf32>, %v: tensor<2x64x2x16xf32>) {
  // expected-error @+1 {{HO = 2 (from max(HQ, HV)) must be a multiple of HK = 4 (from operand 'k')}}
  %o = kda.window_attention %q, %k, %v {window = 8 : i64} : tensor<2x64x2x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x2x16xf32> -> tensor<2x64x2x16xf32>
  return
}

// -----

// HO = max(HQ, HV) = 6, HV = 4 does not divide it.
func.func @win_hv_not_divisor(%q: tensor<2x64x6x32xf32>, %k: tensor<2x64x2x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{HO = 6 (from max(HQ, HV)) must be a multiple of HV = 4 (from operand 'v')}}
  %o = kda.window_attention %q, %k, %v {window = 8 : i64} : tensor<2x64x6x32xf32>, tensor<2x64x2x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x6x16xf32>
  return
}

// -----

// HQ dynamic: HO comes from the result and HK is still checked against it.
func.func @win_hk_not_divisor_dynamic_hq(%q: tensor<2x64x?x32xf32>, %k: tensor<2x64x3x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{HO = 4 (from result 'o') must be a multiple of HK = 3 (from operand 'k')}}
  %o = kda.window_attention %q, %k, %v {window = 8 : i64} : tensor<2x64x?x32xf32>, tensor<2x64x3x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @win_no_window(%q: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{expected exactly one window: the 'window' attribute (per op) or the 'window_sizes' operand (per position), found neither}}
  %o = kda.window_attention %q, %q, %q : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_both_windows(%q: tensor<2x64x4x32xf32>, %w: tensor<64xi32>) {
  // expected-error @+1 {{expected exactly one window: the 'window' attribute (per op) or the 'window_sizes' operand (per position), found both}}
  %o = kda.window_attention %q, %q, %q window_sizes(%w : tensor<64xi32>) {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_window_zero(%q: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'window': expected at least 1 position, found 0}}
  %o = kda.window_attention %q, %q, %q {window = 0 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_window_negative(%q: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'window': expected at least 1 position, found -3}}
  %o = kda.window_attention %q, %q, %q {window = -3 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_window_sizes_element_type(%q: tensor<2x64x4x32xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{operand 'window_sizes': expected element type i32 or i64, found 'f32'}}
  %o = kda.window_attention %q, %q, %q window_sizes(%w : tensor<64xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_window_sizes_length(%q: tensor<2x64x4x32xf32>, %w: tensor<32xi64>) {
  // expected-error @+1 {{operand 'window_sizes': dimension 0 (T) is 32, but operand 'q' has T = 64}}
  %o = kda.window_attention %q, %q, %q window_sizes(%w : tensor<32xi64>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_window_sizes_rank(%q: tensor<2x64x4x32xf32>, %w: tensor<2x64xi32>) {
  // expected-error @+1 {{operand 'window_sizes': expected rank 1 [T], found rank 2}}
  %o = kda.window_attention %q, %q, %q window_sizes(%w : tensor<2x64xi32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_varlen_batch(%q: tensor<2x64x4x32xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{operand 'cu_seqlens': variable-length batches pack every sequence into one row, so B must be 1, found B = 2}}
  %o = kda.window_attention %q, %q, %q cu_seqlens(%cu : tensor<3xi32>) {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

// B known only from the result.
func.func @win_varlen_batch_from_o(%q: tensor<?x64x4x32xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{result 'o': dimension 0 (B) is 2, but operand 'cu_seqlens' has B = 1}}
  %o = kda.window_attention %q, %q, %q cu_seqlens(%cu : tensor<3xi32>) {window = 8 : i64} : tensor<?x64x4x32xf32>, tensor<?x64x4x32xf32>, tensor<?x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_varlen_element_type(%q: tensor<1x64x4x32xf32>, %cu: tensor<3xi8>) {
  // expected-error @+1 {{operand 'cu_seqlens': expected element type i32 or i64, found 'i8'}}
  %o = kda.window_attention %q, %q, %q cu_seqlens(%cu : tensor<3xi8>) {window = 8 : i64} : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32> -> tensor<1x64x4x32xf32>
  return
}

// -----

func.func @win_varlen_too_short(%q: tensor<1x64x4x32xf32>, %cu: tensor<1xi64>) {
  // expected-error @+1 {{operand 'cu_seqlens': expected at least 2 offsets (N + 1 with N >= 1 sequences), found 1}}
  %o = kda.window_attention %q, %q, %q cu_seqlens(%cu : tensor<1xi64>) {window = 8 : i64} : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32> -> tensor<1x64x4x32xf32>
  return
}

// -----

func.func @win_scale(%q: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'scale': expected a finite positive value, found 0.000000e+00}}
  %o = kda.window_attention %q, %q, %q {window = 8 : i64, scale = 0.0 : f64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

// GQA: the output has HO = max(HQ, HV) = 8 heads.
func.func @win_o_heads(%q: tensor<2x64x8x32xf32>, %k: tensor<2x64x2x32xf32>, %v: tensor<2x64x2x16xf32>) {
  // expected-error @+1 {{result 'o': dimension 2 (HO) is 2, but max(HQ, HV) has HO = 8}}
  %o = kda.window_attention %q, %k, %v {window = 8 : i64} : tensor<2x64x8x32xf32>, tensor<2x64x2x32xf32>, tensor<2x64x2x16xf32> -> tensor<2x64x2x16xf32>
  return
}

// -----

func.func @win_o_value_dim(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{result 'o': dimension 3 (V) is 32, but operand 'v' has V = 16}}
  %o = kda.window_attention %q, %q, %v {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x32xf32>
  return
}

// -----

func.func @win_o_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{result 'o': expected rank 4 [B, T, HO, V], found rank 3}}
  %o = kda.window_attention %q, %q, %v {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x64xf32>
  return
}

// -----

func.func @win_o_element_type(%q: tensor<2x64x4x32xbf16>, %v: tensor<2x64x4x16xbf16>) {
  // expected-error @+1 {{result 'o': expected element type 'bf16' (that of 'v'), found 'f16'}}
  %o = kda.window_attention %q, %q, %v {window = 8 : i64} : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xf16>
  return
}

// -----

func.func @win_zero_v(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x0xf32>) {
  // expected-error @+1 {{'kda.window_attention' op operand 'v': dimension 3 (V) must be at least 1, found 0}}
  %o = kda.window_attention %q, %q, %v {window = 8 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x0xf32> -> tensor<2x64x4x0xf32>
  return
}

// -----

func.func @win_zero_k(%q: tensor<2x64x4x0xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{operand 'q': dimension 3 (K) must be at least 1, found 0}}
  %o = kda.window_attention %q, %q, %v {window = 8 : i64} : tensor<2x64x4x0xf32>, tensor<2x64x4x0xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @win_tile_v_block(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{attribute 'tile': v_block = 17 exceeds V = 16}}
  %o = kda.window_attention %q, %q, %v {window = 8 : i64, tile = #kda.tile<v_block = 17>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

//===----------------------------------------------------------------------===//
// kda.hybrid
//===----------------------------------------------------------------------===//

// -----

func.func @hybrid_result_rank(%x: tensor<2x64x64xf32>) {
  // expected-error @+1 {{'kda.hybrid' op result 'o': expected rank 4 [B, T, HV, V], found rank 3}}
  %o = kda.hybrid sum %x, %x : tensor<2x64x64xf32>, tensor<2x64x64xf32> -> tensor<2x64x64xf32>
  return
}

// -----

func.func @hybrid_result_element_type(%x: tensor<2x64x4x16xi32>) {
  // expected-error @+1 {{result 'o': expected element type f32, bf16 or f16, found 'i32'}}
  %o = kda.hybrid sum %x, %x : tensor<2x64x4x16xi32>, tensor<2x64x4x16xi32> -> tensor<2x64x4x16xi32>
  return
}

// -----

func.func @hybrid_one_branch(%x: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{expected at least 2 branches to combine, found 1}}
  %o = kda.hybrid sum %x : tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @hybrid_branch_type(%x: tensor<2x64x4x16xf32>, %y: tensor<2x64x4x16xbf16>) {
  // expected-error @+1 {{branch 1: expected type 'tensor<2x64x4x16xf32>' (the result's), found 'tensor<2x64x4x16xbf16>'}}
  %o = kda.hybrid sum %x, %y : tensor<2x64x4x16xf32>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @hybrid_branch_shape(%x: tensor<2x64x4x16xf32>, %y: tensor<2x64x8x16xf32>) {
  // expected-error @+1 {{branch 0: expected type 'tensor<2x64x4x16xf32>' (the result's), found 'tensor<2x64x8x16xf32>'}}
  %o = kda.hybrid sum %y, %x : tensor<2x64x8x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @hybrid_sum_with_gate(%x: tensor<2x64x4x16xf32>, %z: tensor<2x64x4xf32>) {
  // expected-error @+1 {{operand 'gate': a 'sum' combination takes no gate (use 'gated')}}
  %o = kda.hybrid sum %x, %x gate(%z : tensor<2x64x4xf32>) : tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @hybrid_gated_three(%x: tensor<2x64x4x16xf32>, %z: tensor<2x64x4xf32>) {
  // expected-error @+1 {{a 'gated' combination mixes exactly 2 branches (sigmoid(z) * first + (1 - sigmoid(z)) * second), found 3}}
  %o = kda.hybrid gated %x, %x, %x gate(%z : tensor<2x64x4xf32>) : tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @hybrid_gated_without_gate(%x: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{a 'gated' combination needs the 'gate' operand z [B, T, HV] or [B, T, HV, V]}}
  %o = kda.hybrid gated %x, %x : tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @hybrid_gate_rank_low(%x: tensor<2x64x4x16xf32>, %z: tensor<2x64xf32>) {
  // expected-error @+1 {{operand 'gate': expected rank 3 [B, T, HV] (head-wise) or rank 4 [B, T, HV, V] (channel-wise), found rank 2}}
  %o = kda.hybrid gated %x, %x gate(%z : tensor<2x64xf32>) : tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @hybrid_gate_rank_high(%x: tensor<2x64x4x16xf32>, %z: tensor<2x64x4x16x1xf32>) {
  // expected-error @+1 {{operand 'gate': expected rank 3 [B, T, HV] (head-wise) or rank 4 [B, T, HV, V] (channel-wise), found rank 5}}
  %o = kda.hybrid gated %x, %x gate(%z : tensor<2x64x4x16x1xf32>) : tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @hybrid_gate_heads(%x: tensor<2x64x4x16xf32>, %z: tensor<2x64x8xf32>) {
  // expected-error @+1 {{operand 'gate': dimension 2 (HV) is 8, but result 'o' has HV = 4}}
  %o = kda.hybrid gated %x, %x gate(%z : tensor<2x64x8xf32>) : tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @hybrid_channel_gate_value_dim(%x: tensor<2x64x4x16xf32>, %z: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{operand 'gate': dimension 3 (V) is 32, but result 'o' has V = 16}}
  %o = kda.hybrid gated %x, %x gate(%z : tensor<2x64x4x32xf32>) : tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @hybrid_gate_element_type(%x: tensor<2x64x4x16xf32>, %z: tensor<2x64x4xi1>) {
  // expected-error @+1 {{operand 'gate': expected element type f32, bf16 or f16, found 'i1'}}
  %o = kda.hybrid gated %x, %x gate(%z : tensor<2x64x4xi1>) : tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

//===----------------------------------------------------------------------===//
// kda.multi_scale (M = 2 unless said otherwise)
//===----------------------------------------------------------------------===//

// -----

func.func @ms_q_rank(%q: tensor<2x64x128xf32>, %k: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{'kda.multi_scale' op operand 'q': expected rank 4 [B, T, H, K], found rank 3}}
  %o = kda.multi_scale delta sum %q, %k, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) : tensor<2x64x128xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_k_head_dim(%q: tensor<2x64x4x32xf32>, %k: tensor<2x64x4x16xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{operand 'k': dimension 3 (K) is 16, but operand 'q' has K = 32}}
  %o = kda.multi_scale delta sum %q, %k, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_v_time(%q: tensor<2x64x4x32xf32>, %v: tensor<2x16x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{operand 'v': dimension 1 (T) is 16, but operand 'q' has T = 64}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x16x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_mixed_element_types(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xbf16>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{operands 'q', 'k', 'v' must share one element type, found 'f32', 'f32', 'bf16'}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xbf16>
  return
}

// -----

func.func @ms_gva_not_multiple(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x6x16xf32>, %g: tensor<2x64x6xf32>) {
  // expected-error @+1 {{HV = 6 (from operand 'v') must be a multiple of H = 4 (from operand 'q')}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x6xf32>, tensor<2x64x6xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x6x16xf32> -> tensor<2x64x6x16xf32>
  return
}

// -----

// HV bound by the gates (v's HV is dynamic): still checked.
func.func @ms_gva_from_gates(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x?x16xf32>, %g: tensor<2x64x6xf32>) {
  // expected-error @+1 {{HV = 6 (from operand 'gates'[0]) must be a multiple of H = 4 (from operand 'q')}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x6xf32>, tensor<2x64x6xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x?x16xf32> -> tensor<2x64x?x16xf32>
  return
}

// -----

func.func @ms_decay_scales_two_gates(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{with 'decay_scales' expected exactly 1 gate tensor (scaled per state), found 2}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) {decay_scales = [1.0, 0.5]} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_decay_scales_one(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{attribute 'decay_scales': expected at least 2 scales, found 1}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g : tensor<2x64x4xf32>) {decay_scales = [1.0]} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_decay_scales_empty(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{attribute 'decay_scales': expected at least 2 scales, found 0}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g : tensor<2x64x4xf32>) {decay_scales = []} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_decay_scale_negative(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{attribute 'decay_scales': scale 1 must be finite and >= 0 (a negative scale would grow the state), found -5.000000e-01}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g : tensor<2x64x4xf32>) {decay_scales = [1.0, -0.5]} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_decay_scale_nan(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{attribute 'decay_scales': scale 0 must be finite and >= 0 (a negative scale would grow the state), found nan}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g : tensor<2x64x4xf32>) {decay_scales = [0x7FF8000000000000 : f64, 1.0]} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_decay_scale_inf(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{attribute 'decay_scales': scale 2 must be finite and >= 0 (a negative scale would grow the state), found INF}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g : tensor<2x64x4xf32>) {decay_scales = [1.0, 0.5, 0x7FF0000000000000 : f64]} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_one_gate(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{expected at least 2 gate tensors (one per state) or 1 gate with 'decay_scales', found 1}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g : tensor<2x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_gate_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64xf32>) {
  // expected-error @+1 {{operand 'gates'[0]: expected rank 3 [B, T, HV] (head-wise) or rank 4 [B, T, HV, K] (channel-wise), found rank 2}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64xf32>, tensor<2x64xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_gate_types_differ(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %c: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{operand 'gates'[1]: expected the type of gate 0, 'tensor<2x64x4xf32>', found 'tensor<2x64x4x32xf32>'}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %c : tensor<2x64x4xf32>, tensor<2x64x4x32xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_gate_heads(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x8xf32>) {
  // expected-error @+1 {{operand 'gates'[0]: dimension 2 (HV) is 8, but operand 'v' has HV = 4}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x8xf32>, tensor<2x64x8xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_channel_gate_k(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{operand 'gates'[0]: dimension 3 (K) is 16, but operand 'q' has K = 32}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g : tensor<2x64x4x16xf32>) {decay_scales = [1.0, 0.5]} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_gate_element_type(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xi32>) {
  // expected-error @+1 {{operand 'gates'[0]: expected element type f32, bf16 or f16, found 'i32'}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xi32>, tensor<2x64x4xi32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_additive_with_beta(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{operand 'beta': the additive update writes k v^T with strength 1 and takes no beta}}
  %o = kda.multi_scale additive sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) beta(%g : tensor<2x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_beta_activation_without_beta(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{attribute 'beta_activation' = sigmoid_neg_eigval needs the 'beta' operand}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) {beta_activation = #kda<beta sigmoid_neg_eigval>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_beta_time(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %b: tensor<2x32x4xf32>) {
  // expected-error @+1 {{operand 'beta': dimension 1 (T) is 32, but operand 'q' has T = 64}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) beta(%b : tensor<2x32x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_scale(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{attribute 'scale': expected a finite positive value, found -2.000000e+00}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) {scale = -2.0 : f64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_varlen_batch(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %cu: tensor<3xi64>) {
  // expected-error @+1 {{operand 'cu_seqlens': variable-length batches pack every sequence into one row, so B must be 1, found B = 2}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) cu_seqlens(%cu : tensor<3xi64>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_varlen_state_count(%q: tensor<1x64x4x32xf32>, %v: tensor<1x64x4x16xf32>, %g: tensor<1x64x4xf32>, %cu: tensor<3xi32>, %s: tensor<2x3x4x32x16xf32>) {
  // expected-error @+1 {{operand 'initial_states': dimension 1 (N) is 3, but operand 'cu_seqlens' has N = 2}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<1x64x4xf32>, tensor<1x64x4xf32>) initial_states(%s : tensor<2x3x4x32x16xf32>) cu_seqlens(%cu : tensor<3xi32>) : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x16xf32> -> tensor<1x64x4x16xf32>
  return
}

// -----

func.func @ms_varlen_too_short(%q: tensor<1x64x4x32xf32>, %v: tensor<1x64x4x16xf32>, %g: tensor<1x64x4xf32>, %cu: tensor<1xi32>) {
  // expected-error @+1 {{operand 'cu_seqlens': expected at least 2 offsets (N + 1 with N >= 1 sequences), found 1}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<1x64x4xf32>, tensor<1x64x4xf32>) cu_seqlens(%cu : tensor<1xi32>) : tensor<1x64x4x32xf32>, tensor<1x64x4x32xf32>, tensor<1x64x4x16xf32> -> tensor<1x64x4x16xf32>
  return
}

// -----

func.func @ms_gated_without_z(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{a 'gated' combination needs the 'z' operand [B, T, HV, M]}}
  %o = kda.multi_scale delta gated %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_z_scales(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %z: tensor<2x64x4x3xf32>) {
  // expected-error @+1 {{operand 'z': dimension 3 (M) is 3, but the number of scales has M = 2}}
  %o = kda.multi_scale delta gated %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) z(%z : tensor<2x64x4x3xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

// With decay_scales, M is the number of scales (3), not of gate tensors (1).
func.func @ms_z_decay_scales(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %z: tensor<2x64x4x1xf32>) {
  // expected-error @+1 {{operand 'z': dimension 3 (M) is 1, but the number of scales has M = 3}}
  %o = kda.multi_scale delta gated %q, %q, %v gates(%g : tensor<2x64x4xf32>) z(%z : tensor<2x64x4x1xf32>) {decay_scales = [1.0, 0.5, 0.25]} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_z_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{operand 'z': expected rank 4 [B, T, HV, M], found rank 3}}
  %o = kda.multi_scale delta gated %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) z(%g : tensor<2x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_z_element_type(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %z: tensor<2x64x4x2xi32>) {
  // expected-error @+1 {{operand 'z': expected element type f32, bf16 or f16, found 'i32'}}
  %o = kda.multi_scale delta gated %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) z(%z : tensor<2x64x4x2xi32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_sum_with_z(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %z: tensor<2x64x4x2xf32>) {
  // expected-error @+1 {{operand 'z': a 'sum' combination takes no gate}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) z(%z : tensor<2x64x4x2xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_states_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %s: tensor<2x4x32x16xf32>) {
  // expected-error @+1 {{operand 'initial_states': expected rank 5 [M, N, HV, K, V], found rank 4}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) initial_states(%s : tensor<2x4x32x16xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_states_scales(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %s: tensor<3x2x4x32x16xf32>) {
  // expected-error @+1 {{operand 'initial_states': dimension 0 (M) is 3, but the number of scales has M = 2}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) initial_states(%s : tensor<3x2x4x32x16xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_states_count(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %s: tensor<2x1x4x32x16xf32>) {
  // expected-error @+1 {{operand 'initial_states': dimension 1 (N) is 1, but operand 'q' has N = 2}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) initial_states(%s : tensor<2x1x4x32x16xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

// N = B without varlen, B known only from the result.
func.func @ms_states_count_from_o(%q: tensor<?x64x4x32xf32>, %v: tensor<?x64x4x16xf32>, %g: tensor<?x64x4xf32>, %s: tensor<2x1x4x32x16xf32>) {
  // expected-error @+1 {{result 'o': dimension 0 (N) is 2, but operand 'initial_states' has N = 1}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<?x64x4xf32>, tensor<?x64x4xf32>) initial_states(%s : tensor<2x1x4x32x16xf32>) : tensor<?x64x4x32xf32>, tensor<?x64x4x32xf32>, tensor<?x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_states_layout(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %s: tensor<2x2x4x32x16xf32>) {
  // expected-error @+1 {{operand 'initial_states': dimension 3 (V) is 32, but operand 'v' has V = 16}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) initial_states(%s : tensor<2x2x4x32x16xf32>) {state_layout = #kda<layout v_major>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_states_element_type(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %s: tensor<2x2x4x32x16xf16>) {
  // expected-error @+1 {{operand 'initial_states': expected element type f32 or bf16, found 'f16'}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) initial_states(%s : tensor<2x2x4x32x16xf16>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_o_value_dim(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{result 'o': dimension 3 (V) is 8, but operand 'v' has V = 16}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x8xf32>
  return
}

// -----

func.func @ms_o_element_type(%q: tensor<2x64x4x32xf16>, %v: tensor<2x64x4x16xf16>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{result 'o': expected element type 'f16' (that of 'v'), found 'f32'}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) : tensor<2x64x4x32xf16>, tensor<2x64x4x32xf16>, tensor<2x64x4x16xf16> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_final_states_scales(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{result 'final_states': dimension 0 (M) is 1, but the number of scales has M = 2}}
  %o, %s = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_states tensor<1x2x4x32x16xf32>
  return
}

// -----

func.func @ms_final_states_f16(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{result 'final_states': expected element type f32 or bf16, found 'f16'}}
  %o, %s = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_states tensor<2x2x4x32x16xf16>
  return
}

// -----

func.func @ms_final_states_element_type(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>, %s0: tensor<2x2x4x32x16xf32>) {
  // expected-error @+1 {{result 'final_states': expected element type 'f32' (that of 'initial_states'), found 'bf16'}}
  %o, %s = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) initial_states(%s0 : tensor<2x2x4x32x16xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> final_states tensor<2x2x4x32x16xbf16>
  return
}

// -----

func.func @ms_tile_v_block(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{attribute 'tile': v_block = 128 exceeds V = 16}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) {tile = #kda.tile<v_block = 128>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @ms_zero_v(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x0xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{'kda.multi_scale' op operand 'v': dimension 3 (V) must be at least 1, found 0}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x0xf32> -> tensor<2x64x4x0xf32>
  return
}

// -----

func.func @ms_tile_v_block_not_divisor(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4xf32>) {
  // expected-error @+1 {{attribute 'tile': v_block = 5 must divide V = 16 (from operand 'v')}}
  %o = kda.multi_scale delta sum %q, %q, %v gates(%g, %g : tensor<2x64x4xf32>, tensor<2x64x4xf32>) {tile = #kda.tile<v_block = 5>} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_boundary_indices_without_states(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %t: tensor<2x2xi32>) {
  // expected-error @+1 {{operand 'boundary_indices' names pool slots for boundary states, but the op has no 'boundary_states' result}}
  %o = kda.gated_delta delta %q, %q, %v boundary_indices(%t : tensor<2x2xi32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32>
  return
}

// -----

func.func @gd_boundary_indices_sequences(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %t: tensor<3x2xi32>) {
  // expected-error @+1 {{operand 'boundary_indices': dimension 0 (N) is 3}}
  %o, %bs = kda.gated_delta delta %q, %q, %v boundary_indices(%t : tensor<3x2xi32>) {boundary_interval = 32 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> boundary_states tensor<8x4x32x16xf32>
  return
}

// -----

func.func @gd_boundary_indices_float(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %t: tensor<2x2xf32>) {
  // expected-error @+1 {{operand 'boundary_indices'}}
  %o, %bs = kda.gated_delta delta %q, %q, %v boundary_indices(%t : tensor<2x2xf32>) {boundary_interval = 32 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> boundary_states tensor<8x4x32x16xf32>
  return
}

// -----

// With a table, boundary_states is the pool [S, HV, K, V], not [N, NT, ...].
func.func @gd_boundary_pool_rank(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %t: tensor<2x2xi32>) {
  // expected-error @+1 {{result 'boundary_states'}}
  %o, %bs = kda.gated_delta delta %q, %q, %v boundary_indices(%t : tensor<2x2xi32>) {boundary_interval = 32 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> boundary_states tensor<2x2x4x32x16xf32>
  return
}

// -----

func.func @gd_boundary_pool_heads(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %t: tensor<2x2xi32>) {
  // expected-error @+1 {{result 'boundary_states': dimension 1 (HV) is 2}}
  %o, %bs = kda.gated_delta delta %q, %q, %v boundary_indices(%t : tensor<2x2xi32>) {boundary_interval = 32 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x16xf32> boundary_states tensor<8x2x32x16xf32>
  return
}


//===----------------------------------------------------------------------===//
// kda.gated_delta_grad
//===----------------------------------------------------------------------===//

// -----

// Every input the forward reads has its gradient.
func.func @grad_missing_result(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{operand 'gate' needs its gradient, result 'd_gate'}}
  %dq, %dk, %dv = kda.gated_delta_grad delta %q, %q, %v, %v gate(%g : tensor<2x64x4x32xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>
  return
}

// -----

func.func @grad_extra_result(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{result 'd_beta' is the gradient of 'beta', but the op has no operand 'beta'}}
  %dq, %dk, %dv, %dg, %db = kda.gated_delta_grad delta %q, %q, %v, %v gate(%g : tensor<2x64x4x32xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> d_gate tensor<2x64x4x32xf32> d_beta tensor<2x64x4xf32>
  return
}

// -----

// A gradient is f32 or its input's element type: not another 16-bit type.
func.func @grad_f16_result(%q: tensor<2x64x4x32xbf16>, %v: tensor<2x64x4x16xbf16>, %g: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{result 'd_q': element type 'f16', expected f32 or the element type of operand 'q' ('bf16')}}
  %dq, %dk, %dv, %dg = kda.gated_delta_grad delta %q, %q, %v, %v gate(%g : tensor<2x64x4x32xf32>) : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x32xf16>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> d_gate tensor<2x64x4x32xf32>
  return
}

// -----

// ... nor a 16-bit type where the input is f32 (the gate here).
func.func @grad_gate_narrowed(%q: tensor<2x64x4x32xbf16>, %v: tensor<2x64x4x16xbf16>, %g: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{result 'd_gate': element type 'bf16', expected f32 or the element type of operand 'gate' ('f32')}}
  %dq, %dk, %dv, %dg = kda.gated_delta_grad delta %q, %q, %v, %v gate(%g : tensor<2x64x4x32xf32>) : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16> d_gate tensor<2x64x4x32xbf16>
  return
}

// -----

// The gate parameters' gradients stay f32 (sums over the whole call).
func.func @grad_a_log_bf16(%q: tensor<2x64x4x32xbf16>, %v: tensor<2x64x4x16xbf16>, %g: tensor<2x64x4x32xbf16>, %a: tensor<4xbf16>) {
  // expected-error @+1 {{result 'd_A_log': expected element type f32, found 'bf16'}}
  %dq, %dk, %dv, %dg, %da = kda.gated_delta_grad delta %q, %q, %v, %v gate(%g : tensor<2x64x4x32xbf16>) A_log(%a : tensor<4xbf16>) {gate_activation = #kda<gate softplus>} : tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16>, tensor<2x64x4x16xbf16> -> tensor<2x64x4x32xbf16>, tensor<2x64x4x32xbf16>, tensor<2x64x4x16xbf16> d_gate tensor<2x64x4x32xbf16> d_A_log tensor<4xbf16>
  return
}

// -----

func.func @grad_do_shape(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %do: tensor<2x64x4x32xf32>, %g: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{operand 'd_o': dimension 3 (V) is 32, but operand 'v' has V = 16}}
  %dq, %dk, %dv, %dg = kda.gated_delta_grad delta %q, %q, %v, %do gate(%g : tensor<2x64x4x32xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>, tensor<2x64x4x32xf32> -> tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> d_gate tensor<2x64x4x32xf32>
  return
}

// -----

func.func @grad_additive(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>) {
  // expected-error @+1 {{attribute 'update': the gradient is derived for the delta rule only, found additive}}
  %dq, %dk, %dv, %dg = kda.gated_delta_grad additive %q, %q, %v, %v gate(%g : tensor<2x64x4x32xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> d_gate tensor<2x64x4x32xf32>
  return
}

// -----

func.func @grad_no_gate(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>) {
  // expected-error @+1 {{operand 'gate' is required: the gradient is derived for gated recurrences only}}
  %dq, %dk, %dv = kda.gated_delta_grad delta %q, %q, %v, %v : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>
  return
}

// -----

func.func @grad_final_state_layout(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>, %dht: tensor<2x4x16x32xf32>) {
  // expected-error @+1 {{operand 'd_final_state': dimension 2 (K) is 16, but operand 'q' has K = 32}}
  %dq, %dk, %dv, %dg = kda.gated_delta_grad delta %q, %q, %v, %v gate(%g : tensor<2x64x4x32xf32>) d_final_state(%dht : tensor<2x4x16x32xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> d_gate tensor<2x64x4x32xf32>
  return
}

// -----

func.func @grad_states_interval(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>, %s: tensor<2x4x4x32x16xf32>) {
  // expected-error @+1 {{operand 'chunk_states' needs the 'states_interval' attribute}}
  %dq, %dk, %dv, %dg = kda.gated_delta_grad delta %q, %q, %v, %v gate(%g : tensor<2x64x4x32xf32>) chunk_states(%s : tensor<2x4x4x32x16xf32>) : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> d_gate tensor<2x64x4x32xf32>
  return
}

// -----

// T = 64 at an interval of 16: four kept states per sequence.
func.func @grad_states_count(%q: tensor<2x64x4x32xf32>, %v: tensor<2x64x4x16xf32>, %g: tensor<2x64x4x32xf32>, %s: tensor<2x3x4x32x16xf32>) {
  // expected-error @+1 {{operand 'chunk_states': dimension 1 (NT) is 3, but 'states_interval' and T has NT = 4}}
  %dq, %dk, %dv, %dg = kda.gated_delta_grad delta %q, %q, %v, %v gate(%g : tensor<2x64x4x32xf32>) chunk_states(%s : tensor<2x3x4x32x16xf32>) {states_interval = 16 : i64} : tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32>, tensor<2x64x4x16xf32> -> tensor<2x64x4x32xf32>, tensor<2x64x4x32xf32>, tensor<2x64x4x16xf32> d_gate tensor<2x64x4x32xf32>
  return
}
