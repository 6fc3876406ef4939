// One sequence, one head, all static but T: the grids lose their unit
// dimensions to canonicalization.
func.func @f(%q: tensor<1x?x1x64xbf16>, %k: tensor<1x?x1x64xbf16>, %v: tensor<1x?x1x64xbf16>) -> tensor<1x?x1x64xbf16> {
  %o = kda.gated_delta delta %q, %k, %v : tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16>, tensor<1x?x1x64xbf16> -> tensor<1x?x1x64xbf16>
  return %o : tensor<1x?x1x64xbf16>
}
