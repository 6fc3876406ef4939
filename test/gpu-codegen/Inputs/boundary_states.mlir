// Chunk-boundary states (prefix caching) with varlen and a V split.
func.func @varlen_boundary(%q: tensor<1x128x2x32xf32>, %k: tensor<1x128x2x32xf32>, %v: tensor<1x128x2x32xf32>, %g: tensor<1x128x2x32xf32>, %b: tensor<1x128x2xf32>, %s0: tensor<3x2x32x32xf32>, %cu: tensor<4xi32>) -> (tensor<1x128x2x32xf32>, tensor<3x2x32x32xf32>, tensor<3x2x2x32x32xf32>) {
  %o, %s, %bs = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x128x2x32xf32>) beta(%b : tensor<1x128x2xf32>) initial_state(%s0 : tensor<3x2x32x32xf32>) cu_seqlens(%cu : tensor<4xi32>) {boundary_interval = 32 : i64} : tensor<1x128x2x32xf32>, tensor<1x128x2x32xf32>, tensor<1x128x2x32xf32> -> tensor<1x128x2x32xf32> final_state tensor<3x2x32x32xf32> boundary_states tensor<3x2x2x32x32xf32>
  return %o, %s, %bs : tensor<1x128x2x32xf32>, tensor<3x2x32x32xf32>, tensor<3x2x2x32x32xf32>
}
