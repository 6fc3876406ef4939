// 2^32 value heads: every size static, so the grid is too; no launch takes it.
func.func @f(%q: tensor<1x4x4294967296x16xf32>, %k: tensor<1x4x4294967296x16xf32>, %v: tensor<1x4x4294967296x16xf32>) -> tensor<1x4x4294967296x16xf32> {
  %o = kda.gated_delta delta %q, %k, %v : tensor<1x4x4294967296x16xf32>, tensor<1x4x4294967296x16xf32>, tensor<1x4x4294967296x16xf32> -> tensor<1x4x4294967296x16xf32>
  return %o : tensor<1x4x4294967296x16xf32>
}
