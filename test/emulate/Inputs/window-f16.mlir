// fp16 window attention on the lane kernel (mma.sync m16n8k16 f16), with a
// partial last block of queries.
func.func @window_f16(%q: tensor<1x129x2x64xf16>, %k: tensor<1x129x2x64xf16>, %v: tensor<1x129x2x64xf16>) -> tensor<1x129x2x64xf16> {
  %o = kda.window_attention %q, %k, %v {window = 40 : i64} : tensor<1x129x2x64xf16>, tensor<1x129x2x64xf16>, tensor<1x129x2x64xf16> -> tensor<1x129x2x64xf16>
  return %o : tensor<1x129x2x64xf16>
}
