// Kimi-Linear-48B's own gate (examples/kimi-linear-48b.json): softplus
// without a lower bound, otherwise as kimi_prefill.mlir.
func.func @kimi(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>,
                %v: tensor<?x?x?x128xbf16>, %g: tensor<?x?x?x128xbf16>,
                %beta: tensor<?x?x?xbf16>, %A_log: tensor<?xf32>,
                %dt_bias: tensor<?x128xf32>, %h0: tensor<?x?x128x128xf32>)
    -> (tensor<?x?x?x128xbf16>, tensor<?x?x128x128xf32>) {
  %o, %ht = kda.gated_delta delta %q, %k, %v
      gate(%g : tensor<?x?x?x128xbf16>) beta(%beta : tensor<?x?x?xbf16>)
      initial_state(%h0 : tensor<?x?x128x128xf32>)
      A_log(%A_log : tensor<?xf32>) dt_bias(%dt_bias : tensor<?x128xf32>)
      {qk_l2norm, beta_activation = #kda<beta sigmoid>,
       gate_activation = #kda<gate softplus>,
       state_layout = #kda<layout v_major>}
      : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>
      -> tensor<?x?x?x128xbf16> final_state tensor<?x?x128x128xf32>
  return %o, %ht : tensor<?x?x?x128xbf16>, tensor<?x?x128x128xf32>
}
