// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none schedule=sequential" | FileCheck %s --check-prefix=SEQ

// kda -> GPU kernels: programs are blocks, tiles live in one dynamic
// shared-memory arena, tile matmuls run on tensor cores, and each kernel
// takes bare pointers plus the sizes named after the op's dimensions. The
// module records each kernel's launch for the bundle manifest.
//
// The default (chunk-parallel) schedule: an intra-chunk kernel over
// (sequence, chunk, head) writes workspaces that the state kernel, over
// (V block, head, sequence), reads; the entry runs both in order. With
// 16-bit inputs W, U, Gamma Q and the decayed k are bf16 (ws0 to ws3), P and
// the chunk decay f32.
// CHECK: kda.entries = [{launches = [{args = ["q", "k", "v", "gate", "beta", "initial_state", "A_log", "dt_bias", "ws0", "ws1", "ws2", "ws3", "ws4", "ws5"], kernel = "kda_gated_delta_kernel_intra"}, {args = ["q", "k", "v", "gate", "beta", "initial_state", "A_log", "dt_bias", "ws0", "ws2", "ws3", "ws4", "ws1", "ws5", "o", "final_state"], kernel = "kda_gated_delta_kernel_state"}], name = "kda_gated_delta_kernel"
// CHECK-SAME: workspaces = [{dtype = "bf16", name = "ws0", shape = ["B", "T", "HV", 128]}
// CHECK-SAME: {dtype = "bf16", name = "ws1", shape = ["B", "T", "HV", 128]}
// CHECK-SAME: {dtype = "bf16", name = "ws2", shape = ["B", "T", "HV", 128]}
// CHECK-SAME: {dtype = "bf16", name = "ws3", shape = ["B", "T", "HV", 128]}
// CHECK-SAME: {dtype = "f32", name = "ws4", shape = ["B", "T", "HV", 16]}
// CHECK-SAME: kda.launches = [{block = [128, 1, 1], dynamic_shared_memory = {{[0-9]+}} : i64, grid = [{ceil_div = 16 : i64, symbol = "T"}, "B", "HV"], module = "kda_gated_delta_kernel_intra_module", name = "kda_gated_delta_kernel_intra"
// CHECK-SAME: {block = [32, 1, 1], dynamic_shared_memory = {{[0-9]+}} : i64, grid = [8, "HV", "B"], module = "kda_gated_delta_kernel_state_module", name = "kda_gated_delta_kernel_state"
// CHECK: gpu.module @kda_gated_delta_kernel_intra_module
// CHECK: nvvm.mma.sync
// CHECK: gpu.module @kda_gated_delta_kernel_state_module
// CHECK: nvvm.mma.sync
// CHECK-NOT: func.func

// One kernel per op with schedule=sequential (the whole chunk step on the
// chain of one program per (sequence, head, V block)):
// SEQ: kda.launches = [{block = [128, 1, 1], dynamic_shared_memory = [[SMEM:[0-9]+]] : i64, grid = ["B", "HV", 8], module = "kda_gated_delta_kernel_module", name = "kda_gated_delta_kernel", params = [
// SEQ-SAME: {alignment = 2 : i64, dtype = "bf16", kind = "tensor", name = "q", shape = ["B", "T", "H", 128]}
// SEQ-SAME: {alignment = 2 : i64, dtype = "bf16", kind = "tensor", name = "beta", shape = ["B", "T", "HV"]}
// SEQ-SAME: {alignment = 4 : i64, dtype = "f32", kind = "tensor", name = "initial_state", shape = ["B", "HV", 128, 128]}
// SEQ-SAME: {alignment = 2 : i64, dtype = "bf16", kind = "tensor", name = "o", shape = ["B", "T", "HV", 128]}
// SEQ-SAME: {alignment = 4 : i64, dtype = "f32", kind = "tensor", name = "final_state", shape = ["B", "HV", 128, 128]}
// SEQ-SAME: {kind = "dim", name = "B"}, {kind = "dim", name = "T"}, {kind = "dim", name = "H"}, {kind = "dim", name = "HV"}]
// SEQ: gpu.module @kda_gated_delta_kernel_module [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// SEQ: llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32
// SEQ: llvm.func @kda_gated_delta_kernel(%{{.*}}: !llvm.ptr, {{.*}}, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64) attributes {gpu.kernel, nvvm.kernel}
// SEQ: nvvm.read.ptx.sreg.ctaid.x
// SEQ: nvvm.mma.sync
// SEQ-SAME: multiplicandAPtxType = #nvvm.mma_type<tf32>
// SEQ: nvvm.barrier
// SEQ-NOT: func.func
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
