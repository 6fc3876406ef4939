// Chunk-boundary states into the slots of a pool (a prefix cache's block
// table), varlen, V-major bf16 pool, any pool size and table width.
func.func @boundary_pool(%q: tensor<1x?x?x64xbf16>, %k: tensor<1x?x?x64xbf16>, %v: tensor<1x?x?x64xbf16>, %g: tensor<1x?x?x64xbf16>, %b: tensor<1x?x?xbf16>, %cu: tensor<?xi32>, %t: tensor<?x?xi32>) -> (tensor<1x?x?x64xbf16>, tensor<?x?x64x64xbf16>) {
  %o, %bs = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x?x?x64xbf16>) beta(%b : tensor<1x?x?xbf16>) cu_seqlens(%cu : tensor<?xi32>) boundary_indices(%t : tensor<?x?xi32>) {boundary_interval = 32 : i64, state_layout = #kda<layout v_major>} : tensor<1x?x?x64xbf16>, tensor<1x?x?x64xbf16>, tensor<1x?x?x64xbf16> -> tensor<1x?x?x64xbf16> boundary_states tensor<?x?x64x64xbf16>
  return %o, %bs : tensor<1x?x?x64xbf16>, tensor<?x?x64x64xbf16>
}
