// One small gated delta (KDA) layer for the install test (scripts/test-install.sh).
func.func @f(%q: tensor<1x64x2x16xf32>, %k: tensor<1x64x2x16xf32>, %v: tensor<1x64x2x8xf32>, %g: tensor<1x64x2x16xf32>) -> tensor<1x64x2x8xf32> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x64x2x16xf32>) {tile = #kda.tile<chunk = 32, sub_chunk = 16>} : tensor<1x64x2x16xf32>, tensor<1x64x2x16xf32>, tensor<1x64x2x8xf32> -> tensor<1x64x2x8xf32>
  return %o : tensor<1x64x2x8xf32>
}
