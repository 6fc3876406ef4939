func.func @gated(%q: tensor<1x16x1x16xf32>, %k: tensor<1x16x1x16xf32>, %v: tensor<1x16x1x16xf32>, %g: tensor<1x16x1x16xf32>) -> tensor<1x16x1x16xf32> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x16x1x16xf32>) : tensor<1x16x1x16xf32>, tensor<1x16x1x16xf32>, tensor<1x16x1x16xf32> -> tensor<1x16x1x16xf32>
  return %o : tensor<1x16x1x16xf32>
}
