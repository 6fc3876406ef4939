// A kda op beside an argument it does not read, returned as it came (the
// element type is ELT, replaced by the test): kda-run must refuse what it
// cannot generate, write or compare, and pass f64 through exactly.
func.func @f(%q: tensor<1x32x1x16xf32>, %k: tensor<1x32x1x16xf32>, %v: tensor<1x32x1x16xf32>, %x: tensor<4xELT>) -> (tensor<1x32x1x16xf32>, tensor<4xELT>) {
  %o = kda.gated_delta delta %q, %k, %v : tensor<1x32x1x16xf32>, tensor<1x32x1x16xf32>, tensor<1x32x1x16xf32> -> tensor<1x32x1x16xf32>
  return %o, %x : tensor<1x32x1x16xf32>, tensor<4xELT>
}
