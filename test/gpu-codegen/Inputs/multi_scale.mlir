// A multi-scale layer as kda.multi_scale_attention writes it: two log-space
// gates mixed by z [B, T, HV, 2], the Kimi l2 norm and beta sigmoid.
func.func @kda_multi_scale(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>, %g0: tensor<?x?x?x128xf32> {kda.name = "g0"}, %g1: tensor<?x?x?x128xf32> {kda.name = "g1"}, %beta: tensor<?x?x?xbf16>, %z: tensor<?x?x?x2xbf16> {kda.name = "z"}) -> tensor<?x?x?x128xbf16> {
  %o = kda.multi_scale delta gated %q, %k, %v gates(%g0, %g1 : tensor<?x?x?x128xf32>, tensor<?x?x?x128xf32>) beta(%beta : tensor<?x?x?xbf16>) z(%z : tensor<?x?x?x2xbf16>) {qk_l2norm, beta_activation = #kda<beta sigmoid>} : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16> -> tensor<?x?x?x128xbf16>
  return %o : tensor<?x?x?x128xbf16>
}
