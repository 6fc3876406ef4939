// KDA-RUN: --check --seqlens=700,1,300,23 --chunk=32
// Gated DeltaNet (head-wise decay) over a packed batch of four sequences of
// uneven length, with per-sequence initial states and V-major states.
func.func @gdn_varlen(%q: tensor<1x1024x2x64xf32>, %k: tensor<1x1024x2x64xf32>,
                      %v: tensor<1x1024x4x64xf32>, %g: tensor<1x1024x4xf32>,
                      %beta: tensor<1x1024x4xf32>, %h0: tensor<4x4x64x64xf32>,
                      %cu_seqlens: tensor<5xi32>)
    -> (tensor<1x1024x4x64xf32>, tensor<4x4x64x64xf32>) {
  %o, %state = kda.gated_delta delta %q, %k, %v
      gate(%g : tensor<1x1024x4xf32>) beta(%beta : tensor<1x1024x4xf32>)
      initial_state(%h0 : tensor<4x4x64x64xf32>)
      cu_seqlens(%cu_seqlens : tensor<5xi32>)
      {state_layout = #kda<layout v_major>}
      : tensor<1x1024x2x64xf32>, tensor<1x1024x2x64xf32>, tensor<1x1024x4x64xf32>
      -> tensor<1x1024x4x64xf32> final_state tensor<4x4x64x64xf32>
  return %o, %state : tensor<1x1024x4x64xf32>, tensor<4x4x64x64xf32>
}
