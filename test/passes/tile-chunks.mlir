// RUN: kda-opt %s --kda-tile-chunks --split-input-file --verify-diagnostics | FileCheck %s

// One program per (sequence, value head), a sequential loop over chunks that
// carries the fp32 state, C x C tiles of the chunk size in #kda.tile.
// CHECK-LABEL: func.func @kda
// CHECK: scf.forall (%[[N:.*]], %[[H:.*]]) in (1, 4)
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<32x8xf32>, tensor<?x8xf32>)
// CHECK: tensor<32x32xf32>
// CHECK: math.exp
// CHECK: scf.forall.in_parallel
// CHECK: tensor.parallel_insert_slice
// CHECK-NOT: kda.gated_delta
func.func @kda(%q: tensor<1x100x2x32xf32>, %k: tensor<1x100x2x32xf32>, %v: tensor<1x100x4x8xf32>, %g: tensor<1x100x4x32xf32>) -> (tensor<1x100x4x8xf32>, tensor<1x4x32x8xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x100x4x32xf32>) {tile = #kda.tile<chunk = 32, sub_chunk = 16>} : tensor<1x100x2x32xf32>, tensor<1x100x2x32xf32>, tensor<1x100x4x8xf32> -> tensor<1x100x4x8xf32> final_state tensor<1x4x32x8xf32>
  return %o, %s : tensor<1x100x4x8xf32>, tensor<1x4x32x8xf32>
}

// -----

// Without #kda.tile the pass option decides (default 64); varlen programs
// read their bounds from cu_seqlens.
// CHECK-LABEL: func.func @varlen
// CHECK: tensor.extract %arg3
// CHECK: tensor<64x64xf32>
func.func @varlen(%q: tensor<1x100x2x32xf32>, %k: tensor<1x100x2x32xf32>, %v: tensor<1x100x2x8xf32>, %cu: tensor<3xi32>) -> tensor<1x100x2x8xf32> {
  %o = kda.gated_delta delta %q, %k, %v cu_seqlens(%cu : tensor<3xi32>) : tensor<1x100x2x32xf32>, tensor<1x100x2x32xf32>, tensor<1x100x2x8xf32> -> tensor<1x100x2x8xf32>
  return %o : tensor<1x100x2x8xf32>
}

// -----

// Tiles need static head dimensions; the pass says so.
func.func @dynamic_head_dim(%q: tensor<1x100x2x?xf32>, %v: tensor<1x100x2x8xf32>) -> tensor<1x100x2x8xf32> {
  // expected-error @+1 {{kda-tile-chunks: cannot tile this op}}
  %o = kda.gated_delta delta %q, %q, %v : tensor<1x100x2x?xf32>, tensor<1x100x2x?xf32>, tensor<1x100x2x8xf32> -> tensor<1x100x2x8xf32>
  return %o : tensor<1x100x2x8xf32>
}

// -----

// Head counts may be dynamic (one kernel for any head count), and v_block
// splits V over a third grid dimension: programs (sequence, head, V block),
// each carrying a [K, v_block] state.
// CHECK-LABEL: func.func @dynamic_heads_v_block
// CHECK: %[[HV:.*]] = tensor.dim %{{.*}}, %c2 : tensor<2x100x?x32xf32>
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %[[VB:.*]]) in (2, %[[HV]], 4)
// CHECK: arith.muli %[[VB]], %c8
// CHECK: scf.for {{.*}} -> (tensor<16x8xf32>, tensor<?x8xf32>)
func.func @dynamic_heads_v_block(%q: tensor<2x100x?x16xf32>, %v: tensor<2x100x?x32xf32>) -> (tensor<2x100x?x32xf32>, tensor<2x?x16x32xf32>) {
  %o, %s = kda.gated_delta delta %q, %q, %v {tile = #kda.tile<chunk = 16, v_block = 8>} : tensor<2x100x?x16xf32>, tensor<2x100x?x16xf32>, tensor<2x100x?x32xf32> -> tensor<2x100x?x32xf32> final_state tensor<2x?x16x32xf32>
  return %o, %s : tensor<2x100x?x32xf32>, tensor<2x?x16x32xf32>
}
