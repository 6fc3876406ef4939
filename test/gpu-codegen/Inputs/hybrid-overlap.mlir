// A gated hybrid layer that asks for the overlap schedule (kda.hybrid
// {overlap}): the window beside the state pass, waiting for its progress.
func.func @gated_hybrid(%q: tensor<?x?x4x64xbf16>, %k: tensor<?x?x4x64xbf16>, %v: tensor<?x?x4x64xbf16>, %g: tensor<?x?x4x64xbf16>, %b: tensor<?x?x4xbf16>, %z: tensor<?x?x4xbf16>) -> tensor<?x?x4x64xbf16> {
  %lin = kda.gated_delta delta %q, %k, %v gate(%g : tensor<?x?x4x64xbf16>) beta(%b : tensor<?x?x4xbf16>) : tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16> -> tensor<?x?x4x64xbf16>
  %win = kda.window_attention %q, %k, %v {window = 64 : i64} : tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16> -> tensor<?x?x4x64xbf16>
  %o = kda.hybrid gated %lin, %win gate(%z : tensor<?x?x4xbf16>) {overlap} : tensor<?x?x4x64xbf16>, tensor<?x?x4x64xbf16> -> tensor<?x?x4x64xbf16>
  return %o : tensor<?x?x4x64xbf16>
}
