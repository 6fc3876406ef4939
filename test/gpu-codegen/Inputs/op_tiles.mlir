// An op with its own tiles (#kda.tile): V blocks of 8, V-major boundary states.
func.func @boundary_states_v_major_v_block(%q: tensor<1x100x2x32xf32>, %k: tensor<1x100x2x32xf32>, %v: tensor<1x100x2x16xf32>, %g: tensor<1x100x2xf32>, %b: tensor<1x100x2xf32>, %s0: tensor<1x2x16x32xf32>) -> (tensor<1x100x2x16xf32>, tensor<1x2x16x32xf32>, tensor<1x2x2x16x32xf32>) {
  %o, %s, %bs = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x100x2xf32>) beta(%b : tensor<1x100x2xf32>) initial_state(%s0 : tensor<1x2x16x32xf32>) {state_layout = #kda<layout v_major>, boundary_interval = 64 : i64, tile = #kda.tile<chunk = 32, v_block = 8>} : tensor<1x100x2x32xf32>, tensor<1x100x2x32xf32>, tensor<1x100x2x16xf32> -> tensor<1x100x2x16xf32> final_state tensor<1x2x16x32xf32> boundary_states tensor<1x2x2x16x32xf32>
  return %o, %s, %bs : tensor<1x100x2x16xf32>, tensor<1x2x16x32xf32>, tensor<1x2x2x16x32xf32>
}
