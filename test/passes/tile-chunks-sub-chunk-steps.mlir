// RUN: kda-opt %s --kda-tile-chunks="schedule=chunk-parallel sub-chunk-steps=true" | FileCheck %s
// RUN: kda-opt %s --kda-tile-chunks="schedule=chunk-parallel" | FileCheck %s --check-prefix=WHOLE
// RUN: kda-opt %s --kda-tile-chunks="sub-chunk-steps=true" | FileCheck %s --check-prefix=SEQ

// sub-chunk-steps (the NVIDIA pipeline's setting): an op whose chunk holds
// several sub-chunks of 16 (here chunk 64, FLA's) is tiled at the sub-chunk.
// The state pass carries what the chunk's off-diagonal blocks would: same
// chunkwise form, same result up to rounding, and the intra-chunk program is
// one sub-chunk, the one the lane kernels write. Both descriptions keep the
// op's chunk (tile_chunk); the boundary interval is the op's (64), every
// fourth step. The intra grid has T / 16 chunks.
// CHECK-LABEL: func.func @chunk64
// CHECK-SAME: kda.intra_pass = #kda.intra_pass<chunk = 16, tile_chunk = 64, sub_chunk = 16,{{.*}}grid = [1, 7, 4],
// CHECK-SAME: kda.state_pass = #kda.state_pass<chunk = 16, tile_chunk = 64,{{.*}}boundary = true, boundary_pool = false, boundary_interval = 64,
// CHECK-DAG: tensor<16x16xf32>
// CHECK-NOT: tensor<64x64xf32>

// Without it the chunk is one program of four sub-chunks: 64 x 64 tiles.
// WHOLE-LABEL: func.func @chunk64
// WHOLE-SAME: kda.intra_pass = #kda.intra_pass<chunk = 64, tile_chunk = 64, sub_chunk = 16,{{.*}}grid = [1, 2, 4],
// WHOLE: tensor<64x64xf32>

// The sequential schedule is one program per (sequence, head): the option is
// not read there, the chunk stays 64.
// SEQ-LABEL: func.func @chunk64
// SEQ: tensor<64x64xf32>
func.func @chunk64(%q: tensor<1x100x2x32xbf16>, %v: tensor<1x100x4x32xbf16>, %g: tensor<1x100x4x32xf32>, %beta: tensor<1x100x4xbf16>) -> (tensor<1x100x4x32xbf16>, tensor<1x2x4x32x32xf32>) {
  %o, %b = kda.gated_delta delta %q, %q, %v gate(%g : tensor<1x100x4x32xf32>) beta(%beta : tensor<1x100x4xbf16>) {tile = #kda.tile<chunk = 64, sub_chunk = 16>, boundary_interval = 64 : i64} : tensor<1x100x2x32xbf16>, tensor<1x100x2x32xbf16>, tensor<1x100x4x32xbf16> -> tensor<1x100x4x32xbf16> boundary_states tensor<1x2x4x32x32xf32>
  return %o, %b : tensor<1x100x4x32xbf16>, tensor<1x2x4x32x32xf32>
}
