// The Kimi prologue in fp32 with cu_seqlens (the GPU suite's configuration whose
// intra-chunk kernel spilled at 128 registers).
func.func @kda_gated_delta(%q: tensor<1x?x?x128xf32>, %k: tensor<1x?x?x128xf32>, %v: tensor<1x?x?x128xf32>, %g: tensor<1x?x?x128xf32>, %beta: tensor<1x?x?xf32>, %h0: tensor<?x?x128x128xf32>, %cu_seqlens: tensor<?xi64>, %dt_bias: tensor<?x128xf32>) -> (tensor<1x?x?x128xf32>, tensor<?x?x128x128xf32>) {
  %o, %ht = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x?x?x128xf32>) beta(%beta : tensor<1x?x?xf32>) initial_state(%h0 : tensor<?x?x128x128xf32>) cu_seqlens(%cu_seqlens : tensor<?xi64>) dt_bias(%dt_bias : tensor<?x128xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.00000000000000000e+00 : f64, state_layout = #kda<layout v_major>} : tensor<1x?x?x128xf32>, tensor<1x?x?x128xf32>, tensor<1x?x?x128xf32> -> tensor<1x?x?x128xf32> final_state tensor<?x?x128x128xf32>
  return %o, %ht : tensor<1x?x?x128xf32>, tensor<?x?x128x128xf32>
}
