// Decode steps the Python package does not generate: a head-wise softplus
// gate with per-head dt_bias (Gated DeltaNet / Mamba2 style), and the
// additive rule without beta or gate (linear attention), both K-major fp32.
func.func @gdn(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x128xf32>,
               %g: tensor<?x?xf32>, %beta: tensor<?x?xf32>, %A_log: tensor<?xf32>,
               %dt_bias: tensor<?xf32>, %idx: tensor<?xi64>, %o0: tensor<?x?x128xf32>,
               %pool: tensor<?x?x64x128xf32>) -> (tensor<?x?x128xf32>, tensor<?x?x64x128xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<?x?xf32>) beta(%beta : tensor<?x?xf32>)
      A_log(%A_log : tensor<?xf32>) dt_bias(%dt_bias : tensor<?xf32>)
      indices(%idx : tensor<?xi64>) outs(%o0, %pool : tensor<?x?x128xf32>, tensor<?x?x64x128xf32>)
      {gate_activation = #kda<gate softplus>}
      : tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x128xf32>
  return %o, %p : tensor<?x?x128xf32>, tensor<?x?x64x128xf32>
}

func.func @linear(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>,
                  %idx: tensor<?xi32>, %o0: tensor<?x?x64xf32>, %pool: tensor<?x?x64x64xf32>)
    -> (tensor<?x?x64xf32>, tensor<?x?x64x64xf32>) {
  %o, %p = kda.decode_step additive %q, %k, %v indices(%idx : tensor<?xi32>)
      outs(%o0, %pool : tensor<?x?x64xf32>, tensor<?x?x64x64xf32>)
      : tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
  return %o, %p : tensor<?x?x64xf32>, tensor<?x?x64x64xf32>
}
