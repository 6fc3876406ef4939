// A decode step of 0 sequences, every size static: nothing a GPU bundle can launch.
func.func @decode(%q: tensor<0x4x128xbf16>, %k: tensor<0x4x128xbf16>, %v: tensor<0x4x128xbf16>, %idx: tensor<0xi32>, %o0: tensor<0x4x128xbf16>, %pool: tensor<8x4x128x128xf32>) -> (tensor<0x4x128xbf16>, tensor<8x4x128x128xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v indices(%idx : tensor<0xi32>) outs(%o0, %pool : tensor<0x4x128xbf16>, tensor<8x4x128x128xf32>) : tensor<0x4x128xbf16>, tensor<0x4x128xbf16>, tensor<0x4x128xbf16>
  return %o, %p : tensor<0x4x128xbf16>, tensor<8x4x128x128xf32>
}
