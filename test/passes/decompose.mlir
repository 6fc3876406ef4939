// RUN: kda-opt %s --kda-decompose | FileCheck %s

// (multi_scale_gated's reads of z, below)
// CHECK-DAG: #[[Z0:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
// CHECK-DAG: #[[Z1:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 1)>

// multi_scale: one recurrence per scale, on the scaled gate, then a sum.
// CHECK-LABEL: func.func @multi_scale(
// CHECK: %[[O0:.*]], %{{.*}} = kda.gated_delta delta %arg0, %arg1, %arg2 gate(%arg3
// CHECK: linalg.generic
// CHECK: arith.mulf
// CHECK: %[[O1:.*]], %{{.*}} = kda.gated_delta delta
// CHECK: linalg.generic {{.*}} ins(%[[O0]], %[[O1]]
// CHECK: arith.addf
// CHECK-NOT: kda.multi_scale
func.func @multi_scale(%q: tensor<1x32x2x16xf32>, %k: tensor<1x32x2x16xf32>, %v: tensor<1x32x2x8xf32>, %g: tensor<1x32x2xf32>) -> (tensor<1x32x2x8xf32>, tensor<2x1x2x16x8xf32>) {
  %o, %s = kda.multi_scale delta sum %q, %k, %v gates(%g : tensor<1x32x2xf32>) {decay_scales = [1.0, 0.25]} : tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x8xf32> -> tensor<1x32x2x8xf32> final_states tensor<2x1x2x16x8xf32>
  return %o, %s : tensor<1x32x2x8xf32>, tensor<2x1x2x16x8xf32>
}

// multi_scale gated: z [B, T, HV, M] read by the mix itself at z[..., m]
// (constant indices), no slice of it (a strided view a GPU bundle entry
// cannot pass).
// CHECK-LABEL: func.func @multi_scale_gated
// CHECK-NOT: tensor.extract_slice
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #[[Z0]], #[[Z1]], #{{.*}}]{{.*}} ins({{.*}}, %arg6, %arg6 :
// CHECK-NOT: kda.multi_scale
func.func @multi_scale_gated(%q: tensor<1x50x2x32xf32>, %k: tensor<1x50x2x32xf32>, %v: tensor<1x50x2x16xf32>, %g0: tensor<1x50x2xf32>, %g1: tensor<1x50x2xf32>, %b: tensor<1x50x2xf32>, %z: tensor<1x50x2x2xf32>) -> tensor<1x50x2x16xf32> {
  %o = kda.multi_scale delta gated %q, %k, %v gates(%g0, %g1 : tensor<1x50x2xf32>, tensor<1x50x2xf32>) beta(%b : tensor<1x50x2xf32>) z(%z : tensor<1x50x2x2xf32>) : tensor<1x50x2x32xf32>, tensor<1x50x2x32xf32>, tensor<1x50x2x16xf32> -> tensor<1x50x2x16xf32>
  return %o : tensor<1x50x2x16xf32>
}

// hybrid gated: sigmoid(z) * a + (1 - sigmoid(z)) * b, z per head.
// CHECK-LABEL: func.func @hybrid
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #[[ZMAP:.*]], #{{.*}}]
// CHECK: math.exp
// CHECK-NOT: kda.hybrid
func.func @hybrid(%a: tensor<1x32x2x8xf32>, %b: tensor<1x32x2x8xf32>, %z: tensor<1x32x2xf32>) -> tensor<1x32x2x8xf32> {
  %o = kda.hybrid gated %a, %b gate(%z : tensor<1x32x2xf32>) : tensor<1x32x2x8xf32>, tensor<1x32x2x8xf32> -> tensor<1x32x2x8xf32>
  return %o : tensor<1x32x2x8xf32>
}

// gate: softplus form with the threshold at 20.
// CHECK-LABEL: func.func @gate
// CHECK: linalg.generic
// CHECK: math.log1p
// CHECK: arith.cmpf ogt, {{.*}}, %{{.*}}
// CHECK-NOT: kda.gate
func.func @gate(%raw: tensor<1x32x2x16xf32>, %a: tensor<2xf32>) -> tensor<1x32x2x16xf32> {
  %g = kda.gate softplus channel %raw A_log(%a : tensor<2xf32>) : tensor<1x32x2x16xf32> -> tensor<1x32x2x16xf32>
  return %g : tensor<1x32x2x16xf32>
}
