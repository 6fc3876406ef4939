// RUN: kda-opt %s --kda-fuse-window-mix | FileCheck %s

// A hybrid's mix folds into its window: the window reads the other branch
// (and the gate) and writes the layer's output; no kda.hybrid is left.

// CHECK-LABEL: func.func @gated
// CHECK: %[[LIN:.*]] = kda.gated_delta
// CHECK-NEXT: %[[O:.*]] = kda.window_attention %arg0, %arg1, %arg2 mix_linear(%[[LIN]] : tensor<1x64x2x16xbf16>) mix_gate(%arg5 : tensor<1x64x2xf32>) {mix = #kda<combine gated>, window = 8 : i64}
// CHECK-NOT: kda.hybrid
// CHECK: return %[[O]]
func.func @gated(%q: tensor<1x64x2x32xbf16>, %k: tensor<1x64x2x32xbf16>, %v: tensor<1x64x2x16xbf16>, %g: tensor<1x64x2x32xf32>, %b: tensor<1x64x2xf32>, %z: tensor<1x64x2xf32>) -> tensor<1x64x2x16xbf16> {
  %lin = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x64x2x32xf32>) beta(%b : tensor<1x64x2xf32>) : tensor<1x64x2x32xbf16>, tensor<1x64x2x32xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  %win = kda.window_attention %q, %k, %v {window = 8 : i64} : tensor<1x64x2x32xbf16>, tensor<1x64x2x32xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  %o = kda.hybrid gated %lin, %win gate(%z : tensor<1x64x2xf32>) : tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  return %o : tensor<1x64x2x16xbf16>
}

// A sum takes the window from either side.
// CHECK-LABEL: func.func @sum_window_first
// CHECK: %[[LIN:.*]] = kda.gated_delta
// CHECK-NEXT: kda.window_attention %arg0, %arg1, %arg2 mix_linear(%[[LIN]] : tensor<1x64x2x16xbf16>) {mix = #kda<combine sum>, window = 8 : i64}
// CHECK-NOT: kda.hybrid
func.func @sum_window_first(%q: tensor<1x64x2x32xbf16>, %k: tensor<1x64x2x32xbf16>, %v: tensor<1x64x2x16xbf16>, %g: tensor<1x64x2x32xf32>, %b: tensor<1x64x2xf32>) -> tensor<1x64x2x16xbf16> {
  %win = kda.window_attention %q, %k, %v {window = 8 : i64} : tensor<1x64x2x32xbf16>, tensor<1x64x2x32xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  %lin = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x64x2x32xf32>) beta(%b : tensor<1x64x2xf32>) : tensor<1x64x2x32xbf16>, tensor<1x64x2x32xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  %o = kda.hybrid sum %win, %lin : tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  return %o : tensor<1x64x2x16xbf16>
}

// Left as they are: a gated mix with the window first (sigmoid(z) would
// weigh the window), a window used elsewhere too, three branches. A hybrid
// that asks for the overlap schedule is fused and marked (kda.overlap: the
// layer entry runs the window beside the state pass, waiting for its
// progress).
// CHECK-LABEL: func.func @not_fused
// CHECK-COUNT-3: kda.hybrid
// CHECK: kda.window_attention {{.*}} mix_linear({{.*}}) mix_gate({{.*}}) {kda.overlap, mix = #kda<combine gated>, window = 3 : i64}
// CHECK-NOT: kda.hybrid
func.func @not_fused(%q: tensor<1x64x2x32xbf16>, %v: tensor<1x64x2x16xbf16>, %x: tensor<1x64x2x16xbf16>, %z: tensor<1x64x2xf32>) -> (tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16>) {
  %w0 = kda.window_attention %q, %q, %v {window = 8 : i64} : tensor<1x64x2x32xbf16>, tensor<1x64x2x32xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  %a = kda.hybrid gated %w0, %x gate(%z : tensor<1x64x2xf32>) : tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  %w1 = kda.window_attention %q, %q, %v {window = 4 : i64} : tensor<1x64x2x32xbf16>, tensor<1x64x2x32xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  %b = kda.hybrid sum %x, %w1 : tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  %w2 = kda.window_attention %q, %q, %v {window = 2 : i64} : tensor<1x64x2x32xbf16>, tensor<1x64x2x32xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  %c = kda.hybrid sum %x, %x, %w2 : tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  %w3 = kda.window_attention %q, %q, %v {window = 3 : i64} : tensor<1x64x2x32xbf16>, tensor<1x64x2x32xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  %d = kda.hybrid gated %x, %w3 gate(%z : tensor<1x64x2xf32>) {overlap} : tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16> -> tensor<1x64x2x16xbf16>
  return %a, %b, %c, %d, %w1 : tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16>, tensor<1x64x2x16xbf16>
}
