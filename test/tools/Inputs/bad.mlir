func.func @bad(%q: tensor<1x16x1x16xf32>, %v: tensor<1x8x1x16xf32>) -> tensor<1x8x1x16xf32> {
  %o = kda.gated_delta delta %q, %q, %v : tensor<1x16x1x16xf32>, tensor<1x16x1x16xf32>, tensor<1x8x1x16xf32> -> tensor<1x8x1x16xf32>
  return %o : tensor<1x8x1x16xf32>
}
