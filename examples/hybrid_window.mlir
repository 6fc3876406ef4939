// KDA-RUN: --check --seed=3
// A hybrid layer: KDA and sliding-window attention (W = 256) over the same
// q, k, v, mixed by a per-channel sigmoid gate.
func.func @hybrid_window(%q: tensor<1x1024x2x64xbf16>, %k: tensor<1x1024x2x64xbf16>,
                         %v: tensor<1x1024x2x64xbf16>, %g: tensor<1x1024x2x64xf32>,
                         %beta: tensor<1x1024x2xf32>, %z: tensor<1x1024x2x64xf32>)
    -> tensor<1x1024x2x64xbf16> {
  %linear = kda.gated_delta delta %q, %k, %v
      gate(%g : tensor<1x1024x2x64xf32>) beta(%beta : tensor<1x1024x2xf32>)
      : tensor<1x1024x2x64xbf16>, tensor<1x1024x2x64xbf16>, tensor<1x1024x2x64xbf16>
      -> tensor<1x1024x2x64xbf16>
  %local = kda.window_attention %q, %k, %v {window = 256 : i64}
      : tensor<1x1024x2x64xbf16>, tensor<1x1024x2x64xbf16>, tensor<1x1024x2x64xbf16>
      -> tensor<1x1024x2x64xbf16>
  %o = kda.hybrid gated %linear, %local gate(%z : tensor<1x1024x2x64xf32>)
      : tensor<1x1024x2x64xbf16>, tensor<1x1024x2x64xbf16> -> tensor<1x1024x2x64xbf16>
  return %o : tensor<1x1024x2x64xbf16>
}
