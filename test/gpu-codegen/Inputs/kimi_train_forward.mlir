// The training forward kda.ops builds for Kimi-style training (bench fwdbwd): Kimi's prologue, the
// states kept every 16 tokens in f32, V-major (chunk_kda_grad_config's forward).
func.func @kda_gated_delta(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>, %g: tensor<?x?x?x128xbf16>, %beta: tensor<?x?x?xbf16>, %A_log: tensor<?xf32>, %dt_bias: tensor<?x128xf32>) -> (tensor<?x?x?x128xbf16>, tensor<?x?x?x128x128xf32>) {
  %o, %hb = kda.gated_delta delta %q, %k, %v gate(%g : tensor<?x?x?x128xbf16>) beta(%beta : tensor<?x?x?xbf16>) A_log(%A_log : tensor<?xf32>) dt_bias(%dt_bias : tensor<?x128xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.00000000000000000e+00 : f64, state_layout = #kda<layout v_major>, boundary_interval = 16 : i64} : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16> -> tensor<?x?x?x128xbf16> boundary_states tensor<?x?x?x128x128xf32>
  return %o, %hb : tensor<?x?x?x128xbf16>, tensor<?x?x?x128x128xf32>
}
