// A hybrid of three branches: KDA and two sliding windows over the same
// q/k/v, summed. A sum of three is not a window's epilogue: the mix stays a
// kernel of its own, and the windows run beside the state pass.
func.func @sum_three(%q: tensor<?x?x4x64xbf16>, %k: tensor<?x?x4x64xbf16>, %v: tensor<?x?x4x64xbf16>, %g: tensor<?x?x4x64xbf16>, %b: tensor<?x?x4xbf16>) -> tensor<?x?x4x64xbf16> {
  %lin = kda.gated_delta delta %q, %k, %v gate(%g : tensor<?x?x4x64xbf16>) beta(%b : tensor<?x?x4xbf16>) : tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16> -> tensor<?x?x4x64xbf16>
  %w0 = kda.window_attention %q, %k, %v {window = 64 : i64} : tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16> -> tensor<?x?x4x64xbf16>
  %w1 = kda.window_attention %q, %k, %v {window = 8 : i64} : tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16> -> tensor<?x?x4x64xbf16>
  %o = kda.hybrid sum %lin, %w0, %w1 : tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16> -> tensor<?x?x4x64xbf16>
  return %o : tensor<?x?x4x64xbf16>
}
