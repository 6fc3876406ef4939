// RUN: timeout 120 kda-opt %s --kda-lower-to-cpu | FileCheck %s --check-prefix=CPU
// RUN: timeout 120 kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=GPU

// The gradient with kept states whose chunk count is static, here the
// largest a dimension takes (fuzz-structure, seed 31, a mutant of
// mixed-dims-grad.mlir): the grids summing the gate parameters' per-chunk
// shares unrolled a static count, and building 2^63 - 1 additions never
// finished. A static count past a few is a loop now.
// CPU: llvm.func @kda_gated_delta_grad(
// GPU: llvm.func @kda_gated_delta_grad_kernel_sum_d_A_log
func.func @kda_gated_delta_grad(%q: tensor<1x?x?x128xbf16>, %k: tensor<1x?x?x128xbf16>, %v: tensor<1x?x?x128xbf16>, %d_o: tensor<1x?x?x128xbf16>, %g: tensor<1x?x?x128xbf16>, %beta: tensor<1x?x?xbf16>, %h0: tensor<?x?x128x?xf32>, %cu_seqlens: tensor<?xi32>, %A_log: tensor<?xf32>, %dt_bias: tensor<?x128xf32>, %d_ht: tensor<?x?x128x?xf32>, %chunk_states: tensor<?x9223372036854775807x?x128x128xf32>) -> (tensor<1x?x?x128xf32>, tensor<1x?x?x128xf32>, tensor<1x?x?x128xf32>, tensor<1x?x?x128xf32>, tensor<1x?x?xf32>, tensor<?x?x128x?xf32>, tensor<?xf32>, tensor<?x128xf32>) {
  %d_q, %d_k, %d_v, %d_gate, %d_beta, %d_h0, %d_A_log, %d_dt_bias = kda.gated_delta_grad delta %q, %k, %v, %d_o gate(%g : tensor<1x?x?x128xbf16>) beta(%beta : tensor<1x?x?xbf16>) initial_state(%h0 : tensor<?x?x128x?xf32>) cu_seqlens(%cu_seqlens : tensor<?xi32>) A_log(%A_log : tensor<?xf32>) dt_bias(%dt_bias : tensor<?x128xf32>) d_final_state(%d_ht : tensor<?x?x128x?xf32>) chunk_states(%chunk_states : tensor<?x9223372036854775807x?x128x128xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.00000000000000000e+00 : f64, state_layout = #kda<layout v_major>, states_interval = 16 : i64, tile = #kda.tile<chunk = 16, sub_chunk = 16>} : tensor<1x?x?x128xbf16>, tensor<1x?x?x128xbf16>, tensor<1x?x?x128xbf16>, tensor<1x?x?x128xbf16> -> tensor<1x?x?x128xf32>, tensor<1x?x?x128xf32>, tensor<1x?x?x128xf32> d_gate tensor<1x?x?x128xf32> d_beta tensor<1x?x?xf32> d_initial_state tensor<?x?x128x?xf32> d_A_log tensor<?xf32> d_dt_bias tensor<?x128xf32>
  return %d_q, %d_k, %d_v, %d_gate, %d_beta, %d_h0, %d_A_log, %d_dt_bias : tensor<1x?x?x128xf32>, tensor<1x?x?x128xf32>, tensor<1x?x?x128xf32>, tensor<1x?x?x128xf32>, tensor<1x?x?xf32>, tensor<?x?x128x?xf32>, tensor<?xf32>, tensor<?x128xf32>
}
