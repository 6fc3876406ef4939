// A multi-scale layer of two decay scales of one log-space gate (the second
// scale's gate 0.25 g: an elementwise kernel), mixed by z [B, T, HV, 2].
func.func @ms_sum(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>, %g: tensor<?x?x?x128xf32> {kda.name = "g"}, %b: tensor<?x?x?xbf16>, %z: tensor<?x?x?x2xbf16> {kda.name = "z"}) -> tensor<?x?x?x128xbf16> {
  %o = kda.multi_scale delta gated %q, %k, %v gates(%g : tensor<?x?x?x128xf32>) beta(%b : tensor<?x?x?xbf16>) z(%z : tensor<?x?x?x2xbf16>) {decay_scales = [1.0, 0.25], qk_l2norm} : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16> -> tensor<?x?x?x128xbf16>
  return %o : tensor<?x?x?x128xbf16>
}
