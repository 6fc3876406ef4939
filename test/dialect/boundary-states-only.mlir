// A gated_delta with boundary_states but no final_state prints and parses
// again (the optional result groups are anchored on their keywords).
// RUN: kda-opt %s | kda-opt | FileCheck %s

// CHECK-LABEL: func.func @boundary_states_only
// CHECK: kda.gated_delta delta %arg0, %arg0, %arg1 {boundary_interval = 64 : i64}
// CHECK-SAME: -> tensor<2x100x4x16xf32> boundary_states tensor<2x2x4x32x16xf32>
func.func @boundary_states_only(%q: tensor<2x100x4x32xf32>, %v: tensor<2x100x4x16xf32>)
    -> tensor<2x2x4x32x16xf32> {
  %0:2 = "kda.gated_delta"(%q, %q, %v) <{boundary_interval = 64 : i64,
      operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0>,
      resultSegmentSizes = array<i32: 1, 0, 1>, update = #kda<update delta>}>
      : (tensor<2x100x4x32xf32>, tensor<2x100x4x32xf32>, tensor<2x100x4x16xf32>)
      -> (tensor<2x100x4x16xf32>, tensor<2x2x4x32x16xf32>)
  return %0#1 : tensor<2x2x4x32x16xf32>
}
