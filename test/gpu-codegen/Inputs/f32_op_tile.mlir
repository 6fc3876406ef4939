// fp32 gated delta with an op tile that sets no v_block: the chip's fp32
// V block (32) applies, and the manifest records it (bundle.test).
func.func @f(%q: tensor<1x?x2x64xf32>, %k: tensor<1x?x2x64xf32>, %v: tensor<1x?x2x64xf32>, %g: tensor<1x?x2x64xf32>, %b: tensor<1x?x2xf32>) -> tensor<1x?x2x64xf32> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x?x2x64xf32>) beta(%b : tensor<1x?x2xf32>) {tile = #kda.tile<chunk = 16>} : tensor<1x?x2x64xf32>, tensor<1x?x2x64xf32>, tensor<1x?x2x64xf32> -> tensor<1x?x2x64xf32>
  return %o : tensor<1x?x2x64xf32>
}
