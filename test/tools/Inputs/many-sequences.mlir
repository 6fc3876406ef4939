// 2^20 sequences of one token: small inputs (a few GB) but a float64 state per
// (sequence, head) in the oracle (550 GB), which kda-run --check must count
// before allocating anything.
func.func @f(%q: tensor<1x1048576x4x128xbf16>, %k: tensor<1x1048576x4x128xbf16>, %v: tensor<1x1048576x4x128xbf16>, %cu: tensor<1048577xi32>) -> tensor<1x1048576x4x128xbf16> {
  %o = kda.gated_delta delta %q, %k, %v cu_seqlens(%cu : tensor<1048577xi32>) : tensor<1x1048576x4x128xbf16>, tensor<1x1048576x4x128xbf16>, tensor<1x1048576x4x128xbf16> -> tensor<1x1048576x4x128xbf16>
  return %o : tensor<1x1048576x4x128xbf16>
}
