// An op tile that sets warps and stages (bundle.test, compile-errors.test):
// the state program runs the tile's 3 chunks in flight; 8 warps need 256
// threads per block.
func.func @f(%q: tensor<1x?x2x64xbf16>, %k: tensor<1x?x2x64xbf16>, %v: tensor<1x?x2x64xbf16>, %g: tensor<1x?x2x64xf32>, %b: tensor<1x?x2xbf16>) -> tensor<1x?x2x64xbf16> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x?x2x64xf32>) beta(%b : tensor<1x?x2xbf16>) {tile = #kda.tile<chunk = 16, warps = 8, stages = 3>} : tensor<1x?x2x64xbf16>, tensor<1x?x2x64xbf16>, tensor<1x?x2x64xbf16> -> tensor<1x?x2x64xbf16>
  return %o : tensor<1x?x2x64xbf16>
}
