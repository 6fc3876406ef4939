// RUN: kda-opt %s --kda-outline-kernels | FileCheck %s

// Dynamically shaped results stay inline: kernels return through
// caller-allocated buffers, which need static shapes.
// CHECK-LABEL: func.func @dynamic
// CHECK: kda.gated_delta delta
// CHECK-NOT: call
func.func @dynamic(%q: tensor<1x?x2x16xf32>, %v: tensor<1x?x2x8xf32>) -> tensor<1x?x2x8xf32> {
  %o = kda.gated_delta delta %q, %q, %v : tensor<1x?x2x16xf32>, tensor<1x?x2x16xf32>, tensor<1x?x2x8xf32> -> tensor<1x?x2x8xf32>
  return %o : tensor<1x?x2x8xf32>
}

// Two layers with the same configuration share one kernel; a different
// configuration (here: another window) gets its own.
// CHECK-LABEL: func.func @two_layers
// CHECK: %[[O0:.*]] = call @kda_gated_delta_kernel(%arg0, %arg1, %arg2)
// CHECK: %[[O1:.*]] = call @kda_gated_delta_kernel(%arg3, %arg4, %arg5)
// CHECK: call @kda_window_attention_kernel(
// CHECK: call @kda_window_attention_kernel_0(
// CHECK-NOT: kda.gated_delta
// CHECK: func.func private @kda_gated_delta_kernel({{.*}}) -> tensor<1x32x2x8xf32> attributes {kda.kernel}
// CHECK-NEXT: kda.gated_delta delta
// CHECK: func.func private @kda_window_attention_kernel({{.*}}) -> tensor<1x32x2x8xf32> attributes {kda.kernel}
// CHECK: window = 4
// CHECK: func.func private @kda_window_attention_kernel_0({{.*}}) -> tensor<1x32x2x8xf32> attributes {kda.kernel}
// CHECK: window = 8
// CHECK-NOT: func.func private
func.func @two_layers(%q0: tensor<1x32x2x16xf32>, %k0: tensor<1x32x2x16xf32>, %v0: tensor<1x32x2x8xf32>,
                      %q1: tensor<1x32x2x16xf32>, %k1: tensor<1x32x2x16xf32>, %v1: tensor<1x32x2x8xf32>)
    -> (tensor<1x32x2x8xf32>, tensor<1x32x2x8xf32>, tensor<1x32x2x8xf32>, tensor<1x32x2x8xf32>) {
  %a = kda.gated_delta delta %q0, %k0, %v0 : tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x8xf32> -> tensor<1x32x2x8xf32>
  %b = kda.gated_delta delta %q1, %k1, %v1 : tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x8xf32> -> tensor<1x32x2x8xf32>
  %c = kda.window_attention %q0, %k0, %v0 {window = 4 : i64} : tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x8xf32> -> tensor<1x32x2x8xf32>
  %d = kda.window_attention %q0, %k0, %v0 {window = 8 : i64} : tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x8xf32> -> tensor<1x32x2x8xf32>
  return %a, %b, %c, %d : tensor<1x32x2x8xf32>, tensor<1x32x2x8xf32>, tensor<1x32x2x8xf32>, tensor<1x32x2x8xf32>
}
