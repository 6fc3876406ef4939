// Decode on a state pool at K = V = 128 for any batch and head count.
func.func @decode(%q: tensor<?x?x128xbf16>, %k: tensor<?x?x128xbf16>, %v: tensor<?x?x128xbf16>, %g: tensor<?x?x128xbf16>, %b: tensor<?x?xbf16>, %idx: tensor<?xi32>, %o0: tensor<?x?x128xbf16>, %pool: tensor<?x?x128x128xf32>) -> (tensor<?x?x128xbf16>, tensor<?x?x128x128xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<?x?x128xbf16>) beta(%b : tensor<?x?xbf16>) indices(%idx : tensor<?xi32>) outs(%o0, %pool : tensor<?x?x128xbf16>, tensor<?x?x128x128xf32>) : tensor<?x?x128xbf16>, tensor<?x?x128xbf16>, tensor<?x?x128xbf16>
  return %o, %p : tensor<?x?x128xbf16>, tensor<?x?x128x128xf32>
}
