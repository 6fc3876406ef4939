// One tensor as both q and k (valid IR): the kernel still takes one argument
// per operand, named q and k.
func.func @f(%q: tensor<1x64x1x64xf32>, %v: tensor<1x64x1x64xf32>) -> tensor<1x64x1x64xf32> {
  %o = kda.gated_delta additive %q, %q, %v : tensor<1x64x1x64xf32>, tensor<1x64x1x64xf32>, tensor<1x64x1x64xf32> -> tensor<1x64x1x64xf32>
  return %o : tensor<1x64x1x64xf32>
}
