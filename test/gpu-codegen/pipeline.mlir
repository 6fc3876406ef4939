// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s

// kda -> one GPU kernel per op: programs are blocks, tiles live in one
// dynamic shared-memory arena, tile matmuls run on tensor cores, and the
// kernel takes bare pointers plus the sizes named after the op's dimensions.
// The module records each kernel's launch for the bundle manifest.

// CHECK: kda.launches = [{block = [128, 1, 1], dynamic_shared_memory = [[SMEM:[0-9]+]] : i64, grid = ["B", "HV", 4], module = "kda_gated_delta_kernel_module", name = "kda_gated_delta_kernel", params = [
// CHECK-SAME: {alignment = 2 : i64, dtype = "bf16", kind = "tensor", name = "q", shape = ["B", "T", "H", 128]}
// CHECK-SAME: {alignment = 2 : i64, dtype = "bf16", kind = "tensor", name = "beta", shape = ["B", "T", "HV"]}
// CHECK-SAME: {alignment = 4 : i64, dtype = "f32", kind = "tensor", name = "initial_state", shape = ["B", "HV", 128, 128]}
// CHECK-SAME: {alignment = 2 : i64, dtype = "bf16", kind = "tensor", name = "o", shape = ["B", "T", "HV", 128]}
// CHECK-SAME: {alignment = 4 : i64, dtype = "f32", kind = "tensor", name = "final_state", shape = ["B", "HV", 128, 128]}
// CHECK-SAME: {kind = "dim", name = "B"}, {kind = "dim", name = "T"}, {kind = "dim", name = "H"}, {kind = "dim", name = "HV"}]
// CHECK: gpu.module @kda_gated_delta_kernel_module [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// CHECK: llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32
// CHECK: llvm.func @kda_gated_delta_kernel(%{{.*}}: !llvm.ptr, {{.*}}, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64) attributes {gpu.kernel, nvvm.kernel}
// CHECK: nvvm.read.ptx.sreg.ctaid.x
// CHECK: nvvm.mma.sync
// CHECK-SAME: multiplicandAPtxType = #nvvm.mma_type<tf32>
// CHECK: nvvm.barrier
// CHECK-NOT: func.func
func.func @kimi(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>,
                %v: tensor<?x?x?x128xbf16>, %g: tensor<?x?x?x128xbf16>,
                %beta: tensor<?x?x?xbf16>, %A_log: tensor<?xf32>,
                %dt_bias: tensor<?x128xf32>, %h0: tensor<?x?x128x128xf32>)
    -> (tensor<?x?x?x128xbf16>, tensor<?x?x128x128xf32>) {
  %o, %ht = kda.gated_delta delta %q, %k, %v
      gate(%g : tensor<?x?x?x128xbf16>) beta(%beta : tensor<?x?x?xbf16>)
      initial_state(%h0 : tensor<?x?x128x128xf32>)
      A_log(%A_log : tensor<?xf32>) dt_bias(%dt_bias : tensor<?x128xf32>)
      {qk_l2norm, beta_activation = #kda<beta sigmoid>,
       gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64,
       state_layout = #kda<layout v_major>}
      : tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>
      -> tensor<?x?x?x128xbf16> final_state tensor<?x?x128x128xf32>
  return %o, %ht : tensor<?x?x?x128xbf16>, tensor<?x?x128x128xf32>
}
