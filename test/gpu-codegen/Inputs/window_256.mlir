// Sliding-window attention with heads of 256 (local-attention layers of models with wide heads): K = V = 256, bf16, W = 512.
func.func @window(%q: tensor<?x?x?x256xbf16>, %k: tensor<?x?x?x256xbf16>, %v: tensor<?x?x?x256xbf16>) -> tensor<?x?x?x256xbf16> {
  %o = kda.window_attention %q, %k, %v {window = 512 : i64} : tensor<?x?x?x256xbf16>, tensor<?x?x?x256xbf16>, tensor<?x?x?x256xbf16> -> tensor<?x?x?x256xbf16>
  return %o : tensor<?x?x?x256xbf16>
}
