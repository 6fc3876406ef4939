// KDA-RUN: --check --seed=1
// One Kimi-Linear KDA layer's prefill (heads of 128, bf16 activations, fp32
// state): q/k L2 norm, beta sigmoid and the lower-bound gate (-5) fused into
// the op, as FlashKDA and flash-linear-attention run it; the final state is
// kept for decoding. T = 8192 with 4 of the 32 heads: the size the CPU path
// must run in seconds (kda-run prints the time).
func.func @kda_prefill(%q: tensor<1x8192x4x128xbf16>, %k: tensor<1x8192x4x128xbf16>,
                       %v: tensor<1x8192x4x128xbf16>, %g: tensor<1x8192x4x128xbf16>,
                       %beta: tensor<1x8192x4xbf16>, %A_log: tensor<4xf32>,
                       %dt_bias: tensor<4x128xf32>)
    -> (tensor<1x8192x4x128xbf16>, tensor<1x4x128x128xf32>) {
  %o, %state = kda.gated_delta delta %q, %k, %v
      gate(%g : tensor<1x8192x4x128xbf16>) beta(%beta : tensor<1x8192x4xbf16>)
      A_log(%A_log : tensor<4xf32>) dt_bias(%dt_bias : tensor<4x128xf32>)
      {qk_l2norm, beta_activation = #kda<beta sigmoid>,
       gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64,
       tile = #kda.tile<chunk = 64, sub_chunk = 16>}
      : tensor<1x8192x4x128xbf16>, tensor<1x8192x4x128xbf16>, tensor<1x8192x4x128xbf16>
      -> tensor<1x8192x4x128xbf16> final_state tensor<1x4x128x128xf32>
  return %o, %state : tensor<1x8192x4x128xbf16>, tensor<1x4x128x128xf32>
}
