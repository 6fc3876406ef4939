// Gates at the edge of the valid range over T = 4096: lower-bound gates of -5
// on every token and softplus gates with A_log = log(16) stay finite and
// within the bars (every exponent in the chunkwise form is <= 0).
// RUN: kda-run %s --function=lower_bound_gates --chunk=64 --check | FileCheck %s
// RUN: kda-run %s --function=lower_bound_gates --chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=softplus_gates --chunk=64 --check | FileCheck %s
// RUN: kda-run %s --function=softplus_gates --chunk=32 --check | FileCheck %s
// CHECK: result 0: {{.*}} ok
// CHECK-NOT: FAIL

func.func @lower_bound_gates(%q: tensor<1x4096x1x32xf32>, %k: tensor<1x4096x1x32xf32>, %v: tensor<1x4096x1x32xf32>, %b: tensor<1x4096x1xf32>) -> (tensor<1x4096x1x32xf32>, tensor<1x1x32x32xf32>) {
  // Every token decays by exp(-5): the steepest gate the lower-bound form allows.
  %g = arith.constant dense<-5.0> : tensor<1x4096x1x32xf32>
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x4096x1x32xf32>) beta(%b : tensor<1x4096x1xf32>) : tensor<1x4096x1x32xf32>, tensor<1x4096x1x32xf32>, tensor<1x4096x1x32xf32> -> tensor<1x4096x1x32xf32> final_state tensor<1x1x32x32xf32>
  return %o, %s : tensor<1x4096x1x32xf32>, tensor<1x1x32x32xf32>
}

func.func @softplus_gates(%q: tensor<1x4096x1x32xf32>, %k: tensor<1x4096x1x32xf32>, %v: tensor<1x4096x1x32xf32>, %graw: tensor<1x4096x1x32xf32>, %b: tensor<1x4096x1xf32>, %d: tensor<1x32xf32>) -> (tensor<1x4096x1x32xf32>, tensor<1x1x32x32xf32>) {
  // A_log = log(16): g = -16 softplus(x + dt_bias), up to tens of nats per token.
  %a = arith.constant dense<2.77258872> : tensor<1xf32>
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%graw : tensor<1x4096x1x32xf32>) beta(%b : tensor<1x4096x1xf32>) A_log(%a : tensor<1xf32>) dt_bias(%d : tensor<1x32xf32>) {gate_activation = #kda<gate softplus>} : tensor<1x4096x1x32xf32>, tensor<1x4096x1x32xf32>, tensor<1x4096x1x32xf32> -> tensor<1x4096x1x32xf32> final_state tensor<1x1x32x32xf32>
  return %o, %s : tensor<1x4096x1x32xf32>, tensor<1x1x32x32xf32>
}
