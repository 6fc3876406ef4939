// RUN: kda-opt %s --pass-pipeline="builtin.module(func.func(kda-cpu-sequential-nested-grids))" -verify-diagnostics

// kda-cpu-sequential-nested-grids runs on bufferized kernels. A nested grid
// still on tensors is refused by name (it used to become loops that crashed
// the verifier).
func.func @tensor_grid(%init: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %r = scf.forall (%p) in (4) shared_outs(%o = %init) -> tensor<4x16xf32> {
    %row = tensor.extract_slice %o[%p, 0] [1, 16] [1, 1] : tensor<4x16xf32> to tensor<16xf32>
    // expected-error @+1 {{'scf.forall' op kda-cpu-sequential-nested-grids runs on bufferized kernels (kda-lower-to-cpu): this nested grid still has 1 tensor result(s) (shared_outs)}}
    %inner = scf.forall (%j) in (16) shared_outs(%v = %row) -> tensor<16xf32> {
      %c = arith.constant 1.0 : f32
      %t = tensor.from_elements %c : tensor<1xf32>
      scf.forall.in_parallel {
        tensor.parallel_insert_slice %t into %v[%j] [1] [1] : tensor<1xf32> into tensor<16xf32>
      }
    }
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %inner into %o[%p, 0] [1, 16] [1, 1] : tensor<16xf32> into tensor<4x16xf32>
    }
  }
  return %r : tensor<4x16xf32>
}
