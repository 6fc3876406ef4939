// A varlen KDA prefill (bf16, K = V = 128, no states): chunk grids over
// sequences of any length.
func.func @varlen(%q: tensor<1x?x4x128xbf16>, %k: tensor<1x?x4x128xbf16>, %v: tensor<1x?x4x128xbf16>, %g: tensor<1x?x4x128xbf16>, %b: tensor<1x?x4xbf16>, %cu: tensor<?xi32>) -> tensor<1x?x4x128xbf16> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x?x4x128xbf16>) beta(%b : tensor<1x?x4xbf16>) cu_seqlens(%cu : tensor<?xi32>) : tensor<1x?x4x128xbf16>, tensor<1x?x4x128xbf16>, tensor<1x?x4x128xbf16> -> tensor<1x?x4x128xbf16>
  return %o : tensor<1x?x4x128xbf16>
}
