// Window attention with earlier keys (k and v hold S >= T rows, the queries
// the last T of them): window-earlier-keys.test.
func.func @kda_window_attention(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %o = kda.window_attention %q, %k, %v {window = 512 : i64, earlier_keys} : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16> -> tensor<?x?x?x128xbf16>
  return %o : tensor<?x?x?x128xbf16>
}
