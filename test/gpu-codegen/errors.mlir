// RUN: kda-opt %s --split-input-file --kda-lower-to-nvvm="format=none" --verify-diagnostics

// Work between kda ops that is not elementwise (a matmul here) would run
// outside every kernel and be lost: refused.
func.func @matmul_between(%q: tensor<1x90x2x32xf32>, %k: tensor<1x90x2x32xf32>, %v: tensor<1x90x2x16xf32>, %a: tensor<16x16xf32>, %b: tensor<16x16xf32>) -> (tensor<1x90x2x16xf32>, tensor<16x16xf32>) {
  %lin = kda.gated_delta additive %q, %k, %v : tensor<1x90x2x32xf32>, tensor<1x90x2x32xf32>, tensor<1x90x2x16xf32> -> tensor<1x90x2x16xf32>
  %z = tensor.empty() : tensor<16x16xf32>
  // expected-error @+1 {{outside every kda kernel}}
  %m = linalg.matmul ins(%a, %b : tensor<16x16xf32>, tensor<16x16xf32>) outs(%z : tensor<16x16xf32>) -> tensor<16x16xf32>
  return %lin, %m : tensor<1x90x2x16xf32>, tensor<16x16xf32>
}

// -----

// Tiles are sized by the head dimensions: they must be static.
func.func @dynamic_head_dim(%q: tensor<1x100x2x?xf32>, %v: tensor<1x100x2x8xf32>) -> tensor<1x100x2x8xf32> {
  // expected-error @+1 {{kda-tile-chunks: cannot tile this op}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<1x100x2x?xf32>, tensor<1x100x2x?xf32>, tensor<1x100x2x8xf32> -> tensor<1x100x2x8xf32>
  return %o : tensor<1x100x2x8xf32>
}
