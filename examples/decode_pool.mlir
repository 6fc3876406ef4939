// KDA-RUN: --check --seed=7
// Serving: one decode step for 16 sequences whose KDA states live in a pool
// of 64 slots (one sequence is skipped with index -1); the pool is updated in
// place and every other slot stays bit-exact.
func.func @decode_pool(%q: tensor<16x4x128xbf16>, %k: tensor<16x4x128xbf16>,
                       %v: tensor<16x4x128xbf16>, %g: tensor<16x4x128xf32>,
                       %beta: tensor<16x4xf32>, %A_log: tensor<4xf32>,
                       %dt_bias: tensor<4x128xf32>, %slots: tensor<16xi32>,
                       %o_init: tensor<16x4x128xbf16>, %pool: tensor<64x4x128x128xf32>)
    -> (tensor<16x4x128xbf16>, tensor<64x4x128x128xf32>) {
  %o, %pool2 = kda.decode_step delta %q, %k, %v
      gate(%g : tensor<16x4x128xf32>) beta(%beta : tensor<16x4xf32>)
      A_log(%A_log : tensor<4xf32>) dt_bias(%dt_bias : tensor<4x128xf32>)
      indices(%slots : tensor<16xi32>)
      outs(%o_init, %pool : tensor<16x4x128xbf16>, tensor<64x4x128x128xf32>)
      {qk_l2norm, beta_activation = #kda<beta sigmoid>,
       gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64}
      : tensor<16x4x128xbf16>, tensor<16x4x128xbf16>, tensor<16x4x128xbf16>
  return %o, %pool2 : tensor<16x4x128xbf16>, tensor<64x4x128x128xf32>
}
