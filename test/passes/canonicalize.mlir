// RUN: kda-opt %s --canonicalize | FileCheck %s

// A zero log-gate decays nothing and beta = 1 is the delta rule's default:
// both operands go, so the kernel skips their work.
// CHECK-LABEL: func.func @trivial_gate_and_beta
// CHECK-NOT: arith.constant
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 :
func.func @trivial_gate_and_beta(%q: tensor<1x32x2x16xf32>, %k: tensor<1x32x2x16xf32>, %v: tensor<1x32x2x8xf32>) -> tensor<1x32x2x8xf32> {
  %g = arith.constant dense<0.0> : tensor<1x32x2x16xf32>
  %b = arith.constant dense<1.0> : tensor<1x32x2xf32>
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x32x2x16xf32>) beta(%b : tensor<1x32x2xf32>) : tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x8xf32> -> tensor<1x32x2x8xf32>
  return %o : tensor<1x32x2x8xf32>
}

// Other constants mean something and stay; so do gates that get activated.
// CHECK-LABEL: func.func @meaningful
// CHECK: kda.gated_delta delta %arg0, %arg1, %arg2 gate(%{{.*}}) beta(%{{.*}})
func.func @meaningful(%q: tensor<1x32x2x16xf32>, %k: tensor<1x32x2x16xf32>, %v: tensor<1x32x2x8xf32>) -> tensor<1x32x2x8xf32> {
  %g = arith.constant dense<-0.5> : tensor<1x32x2x16xf32>
  %b = arith.constant dense<0.5> : tensor<1x32x2xf32>
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x32x2x16xf32>) beta(%b : tensor<1x32x2xf32>) : tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x8xf32> -> tensor<1x32x2x8xf32>
  return %o : tensor<1x32x2x8xf32>
}

// CHECK-LABEL: func.func @activated_zero_gate
// CHECK: gate(%{{.*}}) {gate_activation = #kda<gate softplus>}
func.func @activated_zero_gate(%q: tensor<1x32x2x16xf32>, %k: tensor<1x32x2x16xf32>, %v: tensor<1x32x2x8xf32>) -> tensor<1x32x2x8xf32> {
  %g = arith.constant dense<0.0> : tensor<1x32x2x16xf32>
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x32x2x16xf32>) {gate_activation = #kda<gate softplus>} : tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x8xf32> -> tensor<1x32x2x8xf32>
  return %o : tensor<1x32x2x8xf32>
}
