// Prefix caching: resuming from the compiled boundary state before token 64
// with the remaining tokens reproduces the full run's outputs (rows 64..) and
// final state. The second recurrence consumes the first one's boundary state.
// RUN: kda-run %s --function=resume --chunk=32 --check | FileCheck %s
// RUN: kda-run %s --function=resume --chunk=64 --check | FileCheck %s
// CHECK-COUNT-6: ok
// CHECK-NOT: FAIL

func.func @resume(%q: tensor<1x150x2x32xf32>, %k: tensor<1x150x2x32xf32>, %v: tensor<1x150x2x16xf32>, %g: tensor<1x150x2x32xf32>, %b: tensor<1x150x2xf32>, %s0: tensor<1x2x32x16xf32>)
    -> (tensor<1x150x2x16xf32>, tensor<1x2x32x16xf32>, tensor<1x3x2x32x16xf32>, tensor<1x86x2x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x16xf32>) {
  %o, %s, %bs = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x150x2x32xf32>) beta(%b : tensor<1x150x2xf32>) initial_state(%s0 : tensor<1x2x32x16xf32>) {boundary_interval = 64 : i64} : tensor<1x150x2x32xf32>, tensor<1x150x2x32xf32>, tensor<1x150x2x16xf32> -> tensor<1x150x2x16xf32> final_state tensor<1x2x32x16xf32> boundary_states tensor<1x3x2x32x16xf32>
  %b1 = tensor.extract_slice %bs[0, 1, 0, 0, 0] [1, 1, 2, 32, 16] [1, 1, 1, 1, 1] : tensor<1x3x2x32x16xf32> to tensor<1x2x32x16xf32>
  %qt = tensor.extract_slice %q[0, 64, 0, 0] [1, 86, 2, 32] [1, 1, 1, 1] : tensor<1x150x2x32xf32> to tensor<1x86x2x32xf32>
  %kt = tensor.extract_slice %k[0, 64, 0, 0] [1, 86, 2, 32] [1, 1, 1, 1] : tensor<1x150x2x32xf32> to tensor<1x86x2x32xf32>
  %vt = tensor.extract_slice %v[0, 64, 0, 0] [1, 86, 2, 16] [1, 1, 1, 1] : tensor<1x150x2x16xf32> to tensor<1x86x2x16xf32>
  %gt = tensor.extract_slice %g[0, 64, 0, 0] [1, 86, 2, 32] [1, 1, 1, 1] : tensor<1x150x2x32xf32> to tensor<1x86x2x32xf32>
  %bt = tensor.extract_slice %b[0, 64, 0] [1, 86, 2] [1, 1, 1] : tensor<1x150x2xf32> to tensor<1x86x2xf32>
  %o2, %s2 = kda.gated_delta delta %qt, %kt, %vt gate(%gt : tensor<1x86x2x32xf32>) beta(%bt : tensor<1x86x2xf32>) initial_state(%b1 : tensor<1x2x32x16xf32>) : tensor<1x86x2x32xf32>, tensor<1x86x2x32xf32>, tensor<1x86x2x16xf32> -> tensor<1x86x2x16xf32> final_state tensor<1x2x32x16xf32>
  return %o, %s, %bs, %o2, %s2, %b1 : tensor<1x150x2x16xf32>, tensor<1x2x32x16xf32>, tensor<1x3x2x32x16xf32>, tensor<1x86x2x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x16xf32>
}
