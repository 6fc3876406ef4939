// RUN: kda-opt %s --kda-lower-to-cpu | FileCheck %s
// RUN: kda-opt %s --kda-lower-to-cpu=parallel=0 | FileCheck %s --check-prefix=SERIAL

// Everything ends in the LLVM dialect; programs run on OpenMP threads, and
// the tensor result became an out-parameter.
// CHECK-LABEL: llvm.func @kda(
// CHECK-NOT: -> !llvm.struct
// CHECK: omp.parallel
// CHECK: omp.wsloop
// CHECK: llvm.intr.exp
// CHECK-NOT: linalg.
// CHECK-NOT: scf.
// CHECK-NOT: kda.
// SERIAL-LABEL: llvm.func @kda(
// SERIAL-NOT: omp.
func.func @kda(%q: tensor<1x40x2x16xf32>, %k: tensor<1x40x2x16xf32>, %v: tensor<1x40x2x8xf32>, %g: tensor<1x40x2x16xf32>) -> tensor<1x40x2x8xf32> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<1x40x2x16xf32>) {tile = #kda.tile<chunk = 16>} : tensor<1x40x2x16xf32>, tensor<1x40x2x16xf32>, tensor<1x40x2x8xf32> -> tensor<1x40x2x8xf32>
  return %o : tensor<1x40x2x8xf32>
}
