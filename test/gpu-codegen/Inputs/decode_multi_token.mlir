// Several tokens per sequence (speculative decoding, multi-token prediction):
// q [N, T, H, K], indices [N, T], the slot read given by read_indices.
func.func @mt(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>,
                  %g: tensor<?x?x?x128xbf16>, %beta: tensor<?x?x?xbf16>, %A_log: tensor<?xf32>,
                  %dt_bias: tensor<?x128xf32>, %idx: tensor<?x?xi32>, %ridx: tensor<?xi32>, %o0: tensor<?x?x?x128xbf16>,
                  %pool: tensor<?x?x128x128xf32>)
    -> (tensor<?x?x?x128xbf16>, tensor<?x?x128x128xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<?x?x?x128xbf16>)
      beta(%beta : tensor<?x?x?xbf16>) A_log(%A_log : tensor<?xf32>) dt_bias(%dt_bias : tensor<?x128xf32>)
      indices(%idx : tensor<?x?xi32>) read_indices(%ridx : tensor<?xi32>) outs(%o0, %pool : tensor<?x?x?x128xbf16>, tensor<?x?x128x128xf32>)
      {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>,
       lower_bound = -5.0 : f64, state_layout = #kda<layout v_major>}
      : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>
  return %o, %p : tensor<?x?x?x128xbf16>, tensor<?x?x128x128xf32>
}
