// RUN: kda-opt %s --kda-lower-to-cpu | FileCheck %s

// Batch and length known only at run time still lower (the op stays inline
// and its tiles read the sizes from the tensors).
// CHECK-LABEL: llvm.func @dyn(
// CHECK: omp.parallel
// CHECK-NOT: kda.
// CHECK-NOT: linalg.
func.func @dyn(%q: tensor<?x?x2x16xf32>, %k: tensor<?x?x2x16xf32>, %v: tensor<?x?x2x8xf32>, %g: tensor<?x?x2xf32>) -> (tensor<?x?x2x8xf32>, tensor<?x2x16x8xf32>) {
  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : tensor<?x?x2xf32>) : tensor<?x?x2x16xf32>, tensor<?x?x2x16xf32>, tensor<?x?x2x8xf32> -> tensor<?x?x2x8xf32> final_state tensor<?x2x16x8xf32>
  return %o, %s : tensor<?x?x2x8xf32>, tensor<?x2x16x8xf32>
}
