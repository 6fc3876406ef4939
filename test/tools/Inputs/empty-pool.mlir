func.func @dec(%q: tensor<0x4x32xf32>, %v: tensor<0x4x16xf32>, %i: tensor<0xi32>, %o0: tensor<0x4x16xf32>, %p: tensor<0x4x32x16xf32>) -> (tensor<0x4x16xf32>, tensor<0x4x32x16xf32>) {
  %o, %p2 = kda.decode_step delta %q, %q, %v indices(%i : tensor<0xi32>) outs(%o0, %p : tensor<0x4x16xf32>, tensor<0x4x32x16xf32>) : tensor<0x4x32xf32>, tensor<0x4x32xf32>, tensor<0x4x16xf32>
  return %o, %p2 : tensor<0x4x16xf32>, tensor<0x4x32x16xf32>
}
