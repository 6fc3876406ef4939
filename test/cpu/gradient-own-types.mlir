// The gradient returned in its inputs' types (bf16 d_q, d_k, d_v, d_gate and
// d_beta; the state's gradient f32) where the states are recomputed (no
// chunk_states: the CPU's schedule, whose grids write f32 and convert at the
// end; the split schedule's, whose chunk grid and dq / dk sums store bf16,
// is test/emulate/gradient.mlir's kimi_kept): against the float64 oracle at
// SPEC's 16-bit bar, the rounding to bf16 included (relative RMSE near 2e-3).
// RUN: kda-run %s --function=recomputed --chunk=16 --sub-chunk=16 --check | FileCheck %s
// RUN: kda-run %s --function=recomputed --chunk=32 --sub-chunk=16 --check | FileCheck %s
// CHECK-COUNT-4: result {{[0-3]}}: tensor<1x37x2x32xbf16> {{.*}} bar=5e-03 ok
// CHECK-NEXT: result 4: tensor<1x37x2xbf16> {{.*}} bar=5e-03 ok
// CHECK-NEXT: result 5: tensor<1x2x32x32xf32> {{.*}} bar=5e-03 ok
// CHECK-NOT: FAIL

func.func @recomputed(%q: tensor<1x37x2x32xbf16>, %k: tensor<1x37x2x32xbf16>, %v: tensor<1x37x2x32xbf16>, %g: tensor<1x37x2x32xbf16>, %b: tensor<1x37x2xbf16>, %h0: tensor<1x2x32x32xf32>, %do: tensor<1x37x2x32xbf16>) -> (tensor<1x37x2x32xbf16>, tensor<1x37x2x32xbf16>, tensor<1x37x2x32xbf16>, tensor<1x37x2x32xbf16>, tensor<1x37x2xbf16>, tensor<1x2x32x32xf32>) {
  %dq, %dk, %dv, %dg, %db, %dh0 = kda.gated_delta_grad delta %q, %k, %v, %do gate(%g : tensor<1x37x2x32xbf16>) beta(%b : tensor<1x37x2xbf16>) initial_state(%h0 : tensor<1x2x32x32xf32>) {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64} : tensor<1x37x2x32xbf16>, tensor<1x37x2x32xbf16>, tensor<1x37x2x32xbf16>, tensor<1x37x2x32xbf16> -> tensor<1x37x2x32xbf16>, tensor<1x37x2x32xbf16>, tensor<1x37x2x32xbf16> d_gate tensor<1x37x2x32xbf16> d_beta tensor<1x37x2xbf16> d_initial_state tensor<1x2x32x32xf32>
  return %dq, %dk, %dv, %dg, %db, %dh0 : tensor<1x37x2x32xbf16>, tensor<1x37x2x32xbf16>, tensor<1x37x2x32xbf16>, tensor<1x37x2x32xbf16>, tensor<1x37x2xbf16>, tensor<1x2x32x32xf32>
}
