// RUN: kda-opt %s --kda-fuse-prologue | FileCheck %s

// A gate activation feeding one recurrence runs inside its kernel.
// CHECK-LABEL: func.func @fold
// CHECK-NOT: kda.gate
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 gate(%arg3 : tensor<1x32x2x16xbf16>)
// CHECK-SAME: A_log(%arg4 : tensor<2xf32>) dt_bias(%arg5 : tensor<2x16xf32>)
// CHECK-SAME: gate_activation = #kda<gate lower_bound>, lower_bound = -4.000000e+00 : f64
func.func @fold(%q: tensor<1x32x2x16xf32>, %k: tensor<1x32x2x16xf32>, %v: tensor<1x32x2x8xf32>, %raw: tensor<1x32x2x16xbf16>, %a: tensor<2xf32>, %d: tensor<2x16xf32>) -> tensor<1x32x2x8xf32> {
  %g = kda.gate lower_bound channel %raw A_log(%a : tensor<2xf32>) dt_bias(%d : tensor<2x16xf32>) {lower_bound = -4.0 : f64} : tensor<1x32x2x16xbf16> -> tensor<1x32x2x16xf32>
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x32x2x16xf32>) : tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x8xf32> -> tensor<1x32x2x8xf32>
  return %o : tensor<1x32x2x8xf32>
}

// Decode steps too.
// CHECK-LABEL: func.func @fold_decode
// CHECK-NOT: kda.gate
// CHECK: kda.decode_step delta {{.*}} gate(%arg3 : tensor<4x2xf32>) {{.*}}dt_bias(%arg4 : tensor<2xf32>)
// CHECK-SAME: gate_activation = #kda<gate softplus>
func.func @fold_decode(%q: tensor<4x1x16xf32>, %k: tensor<4x1x16xf32>, %v: tensor<4x2x8xf32>, %raw: tensor<4x2xf32>, %d: tensor<2xf32>, %idx: tensor<4xi32>, %o0: tensor<4x2x8xf32>, %pool: tensor<8x2x16x8xf32>) -> (tensor<4x2x8xf32>, tensor<8x2x16x8xf32>) {
  %g = kda.gate softplus head %raw dt_bias(%d : tensor<2xf32>) : tensor<4x2xf32> -> tensor<4x2xf32>
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<4x2xf32>) indices(%idx : tensor<4xi32>) outs(%o0, %pool : tensor<4x2x8xf32>, tensor<8x2x16x8xf32>) : tensor<4x1x16xf32>, tensor<4x1x16xf32>, tensor<4x2x8xf32>
  return %o, %p : tensor<4x2x8xf32>, tensor<8x2x16x8xf32>
}

// A gate with another use stays: folding would compute it twice.
// CHECK-LABEL: func.func @shared_gate
// CHECK: %[[G:.*]] = kda.gate
// CHECK: kda.gated_delta delta {{.*}} gate(%[[G]]
// CHECK-NOT: gate_activation
func.func @shared_gate(%q: tensor<1x32x2x16xf32>, %k: tensor<1x32x2x16xf32>, %v: tensor<1x32x2x8xf32>, %raw: tensor<1x32x2x16xf32>) -> (tensor<1x32x2x8xf32>, tensor<1x32x2x16xf32>) {
  %g = kda.gate softplus channel %raw : tensor<1x32x2x16xf32> -> tensor<1x32x2x16xf32>
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x32x2x16xf32>) : tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x8xf32> -> tensor<1x32x2x8xf32>
  return %o, %g : tensor<1x32x2x8xf32>, tensor<1x32x2x16xf32>
}
