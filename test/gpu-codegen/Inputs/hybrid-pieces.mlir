// kda configuration: hybrid gated:head:bf16 pieces window=512 of [gated_delta delta K=128 V=128 qk=bf16 v=bf16 gate=channel:bf16 beta=bf16 l2norm beta_act=sigmoid gate_act=lower_bound(-5) A_log dt_bias h0=f32 ht=f32 k_major chunk=default]
// A gated hybrid layer in pipelined pieces (kda.tune.hybrid_pieces_config, as kda.bundles writes it):
// the gated delta part with fp32 states, the window over earlier keys of window_k / window_v.
func.func @kda_hybrid(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>, %g: tensor<?x?x?x128xbf16>, %beta: tensor<?x?x?xbf16>, %h0: tensor<?x?x128x128xf32>, %A_log: tensor<?xf32>, %dt_bias: tensor<?x128xf32>, %z: tensor<?x?x?xbf16> {kda.name = "z"}, %window_k: tensor<?x?x?x128xbf16> {kda.name = "window_k"}, %window_v: tensor<?x?x?x128xbf16> {kda.name = "window_v"}) -> (tensor<?x?x?x128xbf16> {kda.name = "o"}, tensor<?x?x128x128xf32> {kda.name = "final_state"}) {
  %lin, %ht = kda.gated_delta delta %q, %k, %v gate(%g : tensor<?x?x?x128xbf16>) beta(%beta : tensor<?x?x?xbf16>) initial_state(%h0 : tensor<?x?x128x128xf32>) A_log(%A_log : tensor<?xf32>) dt_bias(%dt_bias : tensor<?x128xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.00000000000000000e+00 : f64} : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16> -> tensor<?x?x?x128xbf16> final_state tensor<?x?x128x128xf32>
  %win = kda.window_attention %q, %window_k, %window_v {window = 512 : i64, earlier_keys} : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16> -> tensor<?x?x?x128xbf16>
  %o = kda.hybrid gated %lin, %win gate(%z : tensor<?x?x?xbf16>) : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16> -> tensor<?x?x?x128xbf16>
  return %o, %ht : tensor<?x?x?x128xbf16>, tensor<?x?x128x128xf32>
}

