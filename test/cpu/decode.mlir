// The decode step on a state pool: one token per sequence, slots picked by
// indices (one of them -1: skipped). kda-run also checks that every pool slot
// no sequence names is bit-exact unchanged.
// RUN: kda-run %s --function=decode_kda --check | FileCheck %s
// RUN: kda-run %s --function=decode_v_major_gva --check | FileCheck %s
// RUN: kda-run %s --function=decode_prologue_bf16 --check | FileCheck %s
// RUN: kda-run %s --function=decode_no_gate --check | FileCheck %s
// V split over programs (v_block, as GPU kernels run it):
// RUN: kda-run %s --function=decode_v_major_gva_v_block --check | FileCheck %s
// Read one slot, write another (read_indices): destinations drawn from the
// first half of the pool, read slots from the second; one read slot -1 (the
// sequence skipped) and one destination -1 (the state not kept):
// RUN: kda-run %s --function=decode_read_write --check | FileCheck %s
// RUN: kda-run %s --function=decode_read_write_v_major_bf16 --check | FileCheck %s
// Several tokens per sequence (speculative decoding, multi-token
// prediction): q [N, T, H, K], indices [N, T], the state after token t kept
// in indices[n, t] (one entry -1: not kept; a sequence whose first entry is
// -1 is skipped), read from indices[n, 0] or read_indices[n]:
// RUN: kda-run %s --function=decode_multi_token --check | FileCheck %s
// RUN: kda-run %s --function=decode_multi_token_read_v_major_bf16 --check | FileCheck %s
// Start states from another pool (read_pool, the per-sequence decode's
// form): indices name the read_pool slot read and the pool slot written;
// with read_indices the read slot comes from them; several tokens too:
// RUN: kda-run %s --function=decode_read_pool --check | FileCheck %s
// RUN: kda-run %s --function=decode_read_pool_indices_v_major_bf16 --check | FileCheck %s
// RUN: kda-run %s --function=decode_read_pool_multi_token --check | FileCheck %s
// CHECK: result 0: {{.*}} ok
// CHECK-NOT: FAIL

func.func @decode_kda(%q: tensor<8x2x32xf32>, %k: tensor<8x2x32xf32>, %v: tensor<8x2x32xf32>, %g: tensor<8x2x32xf32>, %b: tensor<8x2xf32>, %idx: tensor<8xi32>, %o0: tensor<8x2x32xf32>, %pool: tensor<16x2x32x32xf32>) -> (tensor<8x2x32xf32>, tensor<16x2x32x32xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<8x2x32xf32>) beta(%b : tensor<8x2xf32>) indices(%idx : tensor<8xi32>) outs(%o0, %pool : tensor<8x2x32xf32>, tensor<16x2x32x32xf32>) : tensor<8x2x32xf32>, tensor<8x2x32xf32>, tensor<8x2x32xf32>
  return %o, %p : tensor<8x2x32xf32>, tensor<16x2x32x32xf32>
}

func.func @decode_v_major_gva(%q: tensor<8x2x32xf32>, %k: tensor<8x2x32xf32>, %v: tensor<8x4x16xf32>, %g: tensor<8x4xf32>, %b: tensor<8x4xf32>, %idx: tensor<8xi64>, %o0: tensor<8x4x16xf32>, %pool: tensor<12x4x16x32xf32>) -> (tensor<8x4x16xf32>, tensor<12x4x16x32xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<8x4xf32>) beta(%b : tensor<8x4xf32>) indices(%idx : tensor<8xi64>) outs(%o0, %pool : tensor<8x4x16xf32>, tensor<12x4x16x32xf32>) {state_layout = #kda<layout v_major>} : tensor<8x2x32xf32>, tensor<8x2x32xf32>, tensor<8x4x16xf32>
  return %o, %p : tensor<8x4x16xf32>, tensor<12x4x16x32xf32>
}

func.func @decode_prologue_bf16(%q: tensor<6x2x64xbf16>, %k: tensor<6x2x64xbf16>, %v: tensor<6x2x64xbf16>, %g: tensor<6x2x64xf32>, %b: tensor<6x2xf32>, %a: tensor<2xf32>, %d: tensor<2x64xf32>, %idx: tensor<6xi32>, %o0: tensor<6x2x64xbf16>, %pool: tensor<10x2x64x64xf32>) -> (tensor<6x2x64xbf16>, tensor<10x2x64x64xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<6x2x64xf32>) beta(%b : tensor<6x2xf32>) A_log(%a : tensor<2xf32>) dt_bias(%d : tensor<2x64xf32>) indices(%idx : tensor<6xi32>) outs(%o0, %pool : tensor<6x2x64xbf16>, tensor<10x2x64x64xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64} : tensor<6x2x64xbf16>, tensor<6x2x64xbf16>, tensor<6x2x64xbf16>
  return %o, %p : tensor<6x2x64xbf16>, tensor<10x2x64x64xf32>
}

func.func @decode_no_gate(%q: tensor<5x1x32xf32>, %k: tensor<5x1x32xf32>, %v: tensor<5x1x32xf32>, %b: tensor<5x1xf32>, %idx: tensor<5xi32>, %o0: tensor<5x1x32xf32>, %pool: tensor<5x1x32x32xf32>) -> (tensor<5x1x32xf32>, tensor<5x1x32x32xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v beta(%b : tensor<5x1xf32>) indices(%idx : tensor<5xi32>) outs(%o0, %pool : tensor<5x1x32xf32>, tensor<5x1x32x32xf32>) : tensor<5x1x32xf32>, tensor<5x1x32xf32>, tensor<5x1x32xf32>
  return %o, %p : tensor<5x1x32xf32>, tensor<5x1x32x32xf32>
}

func.func @decode_v_major_gva_v_block(%q: tensor<8x2x32xf32>, %k: tensor<8x2x32xf32>, %v: tensor<8x4x16xf32>, %g: tensor<8x4xf32>, %b: tensor<8x4xf32>, %idx: tensor<8xi64>, %o0: tensor<8x4x16xf32>, %pool: tensor<12x4x16x32xf32>) -> (tensor<8x4x16xf32>, tensor<12x4x16x32xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<8x4xf32>) beta(%b : tensor<8x4xf32>) indices(%idx : tensor<8xi64>) outs(%o0, %pool : tensor<8x4x16xf32>, tensor<12x4x16x32xf32>) {state_layout = #kda<layout v_major>, tile = #kda.tile<chunk = 16, v_block = 8>} : tensor<8x2x32xf32>, tensor<8x2x32xf32>, tensor<8x4x16xf32>
  return %o, %p : tensor<8x4x16xf32>, tensor<12x4x16x32xf32>
}

func.func @decode_read_write(%q: tensor<8x2x32xf32>, %k: tensor<8x2x32xf32>, %v: tensor<8x2x32xf32>, %g: tensor<8x2x32xf32>, %b: tensor<8x2xf32>, %idx: tensor<8xi32>, %ridx: tensor<8xi32>, %o0: tensor<8x2x32xf32>, %pool: tensor<20x2x32x32xf32>) -> (tensor<8x2x32xf32>, tensor<20x2x32x32xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<8x2x32xf32>) beta(%b : tensor<8x2xf32>) indices(%idx : tensor<8xi32>) read_indices(%ridx : tensor<8xi32>) outs(%o0, %pool : tensor<8x2x32xf32>, tensor<20x2x32x32xf32>) : tensor<8x2x32xf32>, tensor<8x2x32xf32>, tensor<8x2x32xf32>
  return %o, %p : tensor<8x2x32xf32>, tensor<20x2x32x32xf32>
}

func.func @decode_read_write_v_major_bf16(%q: tensor<6x2x64xbf16>, %k: tensor<6x2x64xbf16>, %v: tensor<6x4x64xbf16>, %g: tensor<6x4x64xf32>, %b: tensor<6x4xf32>, %a: tensor<4xf32>, %d: tensor<4x64xf32>, %idx: tensor<6xi64>, %ridx: tensor<6xi64>, %o0: tensor<6x4x64xbf16>, %pool: tensor<13x4x64x64xf32>) -> (tensor<6x4x64xbf16>, tensor<13x4x64x64xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<6x4x64xf32>) beta(%b : tensor<6x4xf32>) A_log(%a : tensor<4xf32>) dt_bias(%d : tensor<4x64xf32>) indices(%idx : tensor<6xi64>) read_indices(%ridx : tensor<6xi64>) outs(%o0, %pool : tensor<6x4x64xbf16>, tensor<13x4x64x64xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64, state_layout = #kda<layout v_major>} : tensor<6x2x64xbf16>, tensor<6x2x64xbf16>, tensor<6x4x64xbf16>
  return %o, %p : tensor<6x4x64xbf16>, tensor<13x4x64x64xf32>
}

func.func @decode_multi_token(%q: tensor<5x3x2x32xf32>, %k: tensor<5x3x2x32xf32>, %v: tensor<5x3x2x32xf32>, %g: tensor<5x3x2x32xf32>, %b: tensor<5x3x2xf32>, %idx: tensor<5x3xi32>, %o0: tensor<5x3x2x32xf32>, %pool: tensor<20x2x32x32xf32>) -> (tensor<5x3x2x32xf32>, tensor<20x2x32x32xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<5x3x2x32xf32>) beta(%b : tensor<5x3x2xf32>) indices(%idx : tensor<5x3xi32>) outs(%o0, %pool : tensor<5x3x2x32xf32>, tensor<20x2x32x32xf32>) : tensor<5x3x2x32xf32>, tensor<5x3x2x32xf32>, tensor<5x3x2x32xf32>
  return %o, %p : tensor<5x3x2x32xf32>, tensor<20x2x32x32xf32>
}

func.func @decode_multi_token_read_v_major_bf16(%q: tensor<4x3x1x64xbf16>, %k: tensor<4x3x1x64xbf16>, %v: tensor<4x3x2x64xbf16>, %g: tensor<4x3x2x64xf32>, %b: tensor<4x3x2xf32>, %a: tensor<2xf32>, %d: tensor<2x64xf32>, %idx: tensor<4x3xi64>, %ridx: tensor<4xi64>, %o0: tensor<4x3x2x64xbf16>, %pool: tensor<30x2x64x64xf32>) -> (tensor<4x3x2x64xbf16>, tensor<30x2x64x64xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<4x3x2x64xf32>) beta(%b : tensor<4x3x2xf32>) A_log(%a : tensor<2xf32>) dt_bias(%d : tensor<2x64xf32>) indices(%idx : tensor<4x3xi64>) read_indices(%ridx : tensor<4xi64>) outs(%o0, %pool : tensor<4x3x2x64xbf16>, tensor<30x2x64x64xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64, state_layout = #kda<layout v_major>} : tensor<4x3x1x64xbf16>, tensor<4x3x1x64xbf16>, tensor<4x3x2x64xbf16>
  return %o, %p : tensor<4x3x2x64xbf16>, tensor<30x2x64x64xf32>
}

func.func @decode_read_pool(%q: tensor<8x2x32xf32>, %k: tensor<8x2x32xf32>, %v: tensor<8x2x32xf32>, %g: tensor<8x2x32xf32>, %b: tensor<8x2xf32>, %idx: tensor<8xi32>, %h0: tensor<8x2x32x32xf32>, %o0: tensor<8x2x32xf32>, %pool: tensor<8x2x32x32xf32>) -> (tensor<8x2x32xf32>, tensor<8x2x32x32xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<8x2x32xf32>) beta(%b : tensor<8x2xf32>) indices(%idx : tensor<8xi32>) read_pool(%h0 : tensor<8x2x32x32xf32>) outs(%o0, %pool : tensor<8x2x32xf32>, tensor<8x2x32x32xf32>) : tensor<8x2x32xf32>, tensor<8x2x32xf32>, tensor<8x2x32xf32>
  return %o, %p : tensor<8x2x32xf32>, tensor<8x2x32x32xf32>
}

func.func @decode_read_pool_indices_v_major_bf16(%q: tensor<6x2x64xbf16>, %k: tensor<6x2x64xbf16>, %v: tensor<6x4x64xbf16>, %g: tensor<6x4x64xf32>, %b: tensor<6x4xf32>, %a: tensor<4xf32>, %d: tensor<4x64xf32>, %idx: tensor<6xi64>, %ridx: tensor<6xi64>, %h0: tensor<9x4x64x64xf32>, %o0: tensor<6x4x64xbf16>, %pool: tensor<7x4x64x64xf32>) -> (tensor<6x4x64xbf16>, tensor<7x4x64x64xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<6x4x64xf32>) beta(%b : tensor<6x4xf32>) A_log(%a : tensor<4xf32>) dt_bias(%d : tensor<4x64xf32>) indices(%idx : tensor<6xi64>) read_indices(%ridx : tensor<6xi64>) read_pool(%h0 : tensor<9x4x64x64xf32>) outs(%o0, %pool : tensor<6x4x64xbf16>, tensor<7x4x64x64xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64, state_layout = #kda<layout v_major>} : tensor<6x2x64xbf16>, tensor<6x2x64xbf16>, tensor<6x4x64xbf16>
  return %o, %p : tensor<6x4x64xbf16>, tensor<7x4x64x64xf32>
}

func.func @decode_read_pool_multi_token(%q: tensor<5x3x2x32xf32>, %k: tensor<5x3x2x32xf32>, %v: tensor<5x3x2x32xf32>, %g: tensor<5x3x2x32xf32>, %b: tensor<5x3x2xf32>, %idx: tensor<5x3xi32>, %h0: tensor<20x2x32x32xf32>, %o0: tensor<5x3x2x32xf32>, %pool: tensor<20x2x32x32xf32>) -> (tensor<5x3x2x32xf32>, tensor<20x2x32x32xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<5x3x2x32xf32>) beta(%b : tensor<5x3x2xf32>) indices(%idx : tensor<5x3xi32>) read_pool(%h0 : tensor<20x2x32x32xf32>) outs(%o0, %pool : tensor<5x3x2x32xf32>, tensor<20x2x32x32xf32>) : tensor<5x3x2x32xf32>, tensor<5x3x2x32xf32>, tensor<5x3x2x32xf32>
  return %o, %p : tensor<5x3x2x32xf32>, tensor<20x2x32x32xf32>
}
