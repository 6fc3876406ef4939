// RUN: kda-run %s --chunk=16 --check | FileCheck %s
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=GPU
// RUN: kda-opt %s --kda-lower-to-rocdl="chip=gfx942 format=none" | FileCheck %s --check-prefix=GPU

// A state whose K is dynamic beside q's static K (the verifier accepts any
// mix that agrees where both are static): kda-tile-chunks gives the op's
// values the static sizes its other values state (tensor.cast) before it
// builds tiles from them. It crashed there on every target.
// CHECK: result 0: {{.*}} ok
// CHECK: result 1: {{.*}} ok
// GPU: llvm.func @kda_gated_delta_kernel_intra
// GPU: llvm.func @kda_gated_delta_kernel_state
func.func @mixed(%q: tensor<1x64x2x32xf32>, %k: tensor<1x64x2x32xf32>, %v: tensor<1x64x2x16xf32>,
                 %g: tensor<1x64x2x32xf32>, %b: tensor<1x64x2xf32>, %h0: tensor<1x2x32x16xf32>)
    -> (tensor<1x64x2x16xf32>, tensor<1x2x32x16xf32>) {
  %h = tensor.cast %h0 : tensor<1x2x32x16xf32> to tensor<1x2x?x16xf32>
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x64x2x32xf32>) beta(%b : tensor<1x64x2xf32>)
      initial_state(%h : tensor<1x2x?x16xf32>)
      : tensor<1x64x2x32xf32>, tensor<1x64x2x32xf32>, tensor<1x64x2x16xf32>
      -> tensor<1x64x2x16xf32> final_state tensor<1x2x32x?xf32>
  %s1 = tensor.cast %s : tensor<1x2x32x?xf32> to tensor<1x2x32x16xf32>
  return %o, %s1 : tensor<1x64x2x16xf32>, tensor<1x2x32x16xf32>
}
