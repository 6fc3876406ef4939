// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s
// RUN: kda-opt %S/../../examples/decode_pool.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=KMAJOR
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none decode-registers=false" | FileCheck %s --check-prefix=TILES
// RUN: kda-opt %s --kda-lower-to-rocdl="chip=gfx942 format=none" | FileCheck %s --check-prefix=AMD
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | grep -o "nvvm.shfl.sync *[a-z]*" | sed "s/  */ /g" | FileCheck %s --check-prefix=SHFL
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | grep -o "nvvm.shfl.sync *[a-z]*" | sed "s/  */ /g" | FileCheck %s --check-prefix=BFLY
// RUN: kda-opt %S/../../examples/decode_pool.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | grep -o "nvvm.shfl.sync *[a-z]*" | sed "s/  */ /g" | FileCheck %s --check-prefix=SHFL
// RUN: kda-opt %s --kda-lower-to-rocdl="chip=gfx942 format=none" | FileCheck %s --check-prefix=AMDPERM
// RUN: kda-opt %S/Inputs/decode_multi_token.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" --mlir-print-ir-after=kda-gpu-decode-registers 2>&1 >/dev/null | FileCheck %s --check-prefix=MULTI
// RUN: kda-opt %S/Inputs/decode_multi_token.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=MULTIKERNEL
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=ONETOKEN
// RUN: kda-opt %S/Inputs/decode_head_gate.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=HEAD

// The decode step as one pass over each state (kda-gpu-decode-registers):
// one warp per (sequence, value head, 16 value rows), 8 warps per block (one
// block per (sequence, head) at V = 128), launched V block fastest, then
// heads, then sequences; no shared memory and no barrier. The V-major pool
// [P, HV, V, K] is read and written as 16-byte rows (16 x 4 f32 per lane at
// K = 128). The step is the one algorithm's chunk step at C = 1
// (GatedDeltaKernel.cpp) on lane tiles (LaneTiles.h): q, k, the gate and
// dt_bias live 4 keys per lane, each key once per warp; the four [K]
// vectors the state meets (beta Gamma k, Gamma q, k and the decay) move to
// the lanes of the state's 16 keys by indexed shuffles (4 x 16 = 64). Xor
// shuffles: the norms and q . k are sums over the warp's 32 lanes (3 x 5),
// k^T S and q^T S per value column of the lane (8) sums over the 8 lanes
// along K (offsets 1, 2, 4): 24.
// CHECK: {block = [256, 1, 1], dynamic_shared_memory = 0 : i64, grid = [1, "HV", "B"], module = "kda_decode_step_kernel_module"
// CHECK-SAME: name = "state_pool", shape = ["P", "HV", 128, 128]
// CHECK-LABEL: gpu.module @kda_decode_step_kernel_module
// CHECK-NOT: nvvm.barrier
// CHECK-COUNT-16: llvm.load {{.*}} -> vector<4xf32>
// CHECK-NOT: nvvm.barrier
// CHECK-COUNT-16: llvm.store {{.*}} : vector<4xf32>, !llvm.ptr
// CHECK-NOT: nvvm.barrier
// CHECK: llvm.return
// SHFL-COUNT-64: nvvm.shfl.sync idx
// SHFL-NOT: nvvm.shfl.sync idx
// BFLY-COUNT-39: nvvm.shfl.sync bfly
// BFLY-NOT: nvvm.shfl.sync bfly

// K-major pool [P, HV, K, V]: 4 lanes along V (they share their 16 key
// rows), 8 groups along K (offsets 4, 8, 16); the same counts.
// KMAJOR: {block = [256, 1, 1], dynamic_shared_memory = 0 : i64, grid = [1, 4, 16], module = "kda_decode_step_kernel_module"
// KMAJOR-LABEL: gpu.module @kda_decode_step_kernel_module
// KMAJOR-NOT: nvvm.barrier
// KMAJOR: llvm.return

// A head-wise softplus gate with per-head dt_bias (K = 64, V = 128: 8 warps)
// and the additive rule without beta or gate (K = V = 64: 4 warps) take the
// same lowering (compiled here; the GPU suite runs the package's KDA forms).
// HEAD: {block = [256, 1, 1], dynamic_shared_memory = 0 : i64, grid = [1, "HV", "B"]
// HEAD-SAME: {block = [128, 1, 1], dynamic_shared_memory = 0 : i64, grid = [1, "HV", "B"]
// HEAD-NOT: nvvm.barrier

// Several tokens per sequence: the state stays in registers across a token
// loop (64 f32 carried per lane); each token's state goes to indices[n, t]
// where that is not negative. Blocks of 4 warps and no register cap (158
// registers, no spill; under the one-token kernel's cap of 128 it spilled
// 80 bytes, and blocks of 8 warps left one block per multiprocessor).
// MULTIKERNEL: {block = [128, 1, 1], dynamic_shared_memory = 0 : i64, grid = [2, "HV", "B"]
// MULTIKERNEL-NOT: maxnreg
// MULTIKERNEL: llvm.return
// ONETOKEN: maxnreg = 128
// MULTI: scf.forall
// MULTI: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32
// MULTI: memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x?xi32>
// MULTI: arith.cmpi sge
// MULTI-NOT: gpu.barrier

// Switched off, the chunk step at C = 1 keeps the tile lowering: phases over
// shared memory, fenced by barriers.
// TILES-LABEL: gpu.module @kda_decode_step_kernel_module
// TILES-COUNT-8: nvvm.barrier

// AMD (wave64): the same program with 8 groups of 8 lanes along V (32 value
// rows per wave, 4 waves per block at V = 128); xor shuffles at offsets below
// 32 are ds_swizzle (39: 128 keys take 32 of the 64 lanes, so the sums over
// K stop at offset 16), the indexed ones ds_bpermute (64).
// AMD: {block = [256, 1, 1], dynamic_shared_memory = 0 : i64, grid = [1, "HV", "B"], module = "kda_decode_step_kernel_module"
// AMD-LABEL: gpu.module @kda_decode_step_kernel_module
// AMD-NOT: rocdl.barrier
// AMD-COUNT-39: rocdl.ds_swizzle
// AMD-NOT: rocdl.barrier
// AMD: llvm.return
// AMDPERM-COUNT-64: rocdl.ds_bpermute
// AMDPERM-NOT: rocdl.ds_bpermute

func.func @decode(%q: tensor<?x?x128xbf16>, %k: tensor<?x?x128xbf16>, %v: tensor<?x?x128xbf16>,
                  %g: tensor<?x?x128xbf16>, %beta: tensor<?x?xbf16>, %A_log: tensor<?xf32>,
                  %dt_bias: tensor<?x128xf32>, %idx: tensor<?xi32>, %o0: tensor<?x?x128xbf16>,
                  %pool: tensor<?x?x128x128xf32>)
    -> (tensor<?x?x128xbf16>, tensor<?x?x128x128xf32>) {
  %o, %p = kda.decode_step delta %q, %k, %v gate(%g : tensor<?x?x128xbf16>)
      beta(%beta : tensor<?x?xbf16>) A_log(%A_log : tensor<?xf32>) dt_bias(%dt_bias : tensor<?x128xf32>)
      indices(%idx : tensor<?xi32>) outs(%o0, %pool : tensor<?x?x128xbf16>, tensor<?x?x128x128xf32>)
      {qk_l2norm, beta_activation = #kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>,
       lower_bound = -5.0 : f64, state_layout = #kda<layout v_major>}
      : tensor<?x?x128xbf16>, tensor<?x?x128xbf16>, tensor<?x?x128xbf16>
  return %o, %p : tensor<?x?x128xbf16>, tensor<?x?x128x128xf32>
}
