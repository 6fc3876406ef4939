func.func @small(%q: tensor<1x16x1x16xf32>, %k: tensor<1x16x1x16xf32>, %v: tensor<1x16x1x16xf32>) -> tensor<1x16x1x16xf32> {
  %o = kda.gated_delta delta %q, %k, %v : tensor<1x16x1x16xf32>, tensor<1x16x1x16xf32>, tensor<1x16x1x16xf32> -> tensor<1x16x1x16xf32>
  return %o : tensor<1x16x1x16xf32>
}
func.func @large(%q: tensor<1x32x1x16xf32>, %k: tensor<1x32x1x16xf32>, %v: tensor<1x32x1x16xf32>) -> tensor<1x32x1x16xf32> {
  %o = kda.gated_delta delta %q, %k, %v : tensor<1x32x1x16xf32>, tensor<1x32x1x16xf32>, tensor<1x32x1x16xf32> -> tensor<1x32x1x16xf32>
  return %o : tensor<1x32x1x16xf32>
}
