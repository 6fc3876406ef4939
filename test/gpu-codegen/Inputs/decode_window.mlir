// A decode step on a state pool and a sliding window, both for any batch
// and head count.
func.func @decode(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %g: tensor<?x?x64xf32>, %b: tensor<?x?xf32>, %idx: tensor<?xi32>, %o0: tensor<?x?x64xf32>, %pool: tensor<?x?x64x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64x64xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<?x?x64xf32>) beta(%b : tensor<?x?xf32>) indices(%idx : tensor<?xi32>) outs(%o0, %pool : tensor<?x?x64xf32>, tensor<?x?x64x64xf32>) : tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
  return %o, %p : tensor<?x?x64xf32>, tensor<?x?x64x64xf32>
}

func.func @window(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>, %v: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  %o = kda.window_attention %q, %k, %v {window = 64 : i64} : tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16> -> tensor<?x?x?x64xbf16>
  return %o : tensor<?x?x?x64xbf16>
}
