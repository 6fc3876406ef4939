// RUN: kda-opt %S/Inputs/kimi_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s
// RUN: kda-opt %S/Inputs/kimi_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none intra-registers=false" | FileCheck %s --check-prefix=TILES
// RUN: kda-opt %S/Inputs/varlen_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=LOGSPACE
// RUN: kda-opt %S/Inputs/single_head.mlir --kda-lower-to-nvvm="chip=sm_80 format=none" | FileCheck %s --check-prefix=NOGATE
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=F32
// RUN: kda-opt %S/Inputs/kimi_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=FASTMATH
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=ACCURATE
// RUN: kda-opt %S/Inputs/softplus_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=SOFTPLUS
// RUN: kda-opt %S/Inputs/softplus_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=DERIVED

// The chunk-parallel intra-chunk grid on NVIDIA (kda-gpu-intra-registers):
// emitIntraChunk (passes/GatedDeltaKernel.cpp) on lane tiles, here for
// Kimi's prologue (l2 norm, beta sigmoid, lower-bound gate with A_log and
// dt_bias). Rows are read as 16-byte vectors (so the manifest asks for
// 16-byte aligned q, k, v, gate and dt_bias); the l2 norms are butterfly
// shuffles and one sum across warps each; the lower-bounded gate's chunk is
// one sub-chunk factored from its first row, so P and L are plain mma.sync
// products over each warp's key columns, each summed across warps (a
// barrier); the triangular inverse and the conversions to W's and U's A
// operands need warp barriers only. Shared memory: sums across warps
// 2 x 4 x 16 x 32, the warps' exchange regions 4 x 16 x 33, beta Gamma K and
// beta V parked 16 x (132 + 132) f32 = 41728 bytes.
// CHECK: {block = [128, 1, 1], dynamic_shared_memory = 41728 : i64, grid = [{ceil_div = 16 : i64, symbol = "T"}, "B", "HV"], module = "kda_gated_delta_kernel_intra_module", name = "kda_gated_delta_kernel_intra", params = [{alignment = 16 : i64, dtype = "bf16", kind = "tensor", name = "q"
// CHECK-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// CHECK: llvm.load {{.*}} -> vector<8xbf16>
// CHECK: nvvm.shfl.sync bfly
// CHECK-COUNT-2: nvvm.barrier
// CHECK-NOT: nvvm.barrier
// CHECK: nvvm.mma.sync
// CHECK: nvvm.barrier
// CHECK-NOT: nvvm.barrier
// CHECK: nvvm.mma.sync
// CHECK: nvvm.barrier
// CHECK-NOT: nvvm.barrier
// CHECK: nvvm.bar.warp.sync
// CHECK: nvvm.mma.sync
// CHECK-NOT: nvvm.barrier
// CHECK: llvm.return
// CHECK-LABEL: gpu.module @kda_gated_delta_kernel_state_module

// Switched off, the intra-chunk kernel keeps the tile lowering: a barrier per
// primitive.
// TILES-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// TILES-COUNT-20: nvvm.barrier

// Log-space gates without a lower bound (varlen, no prologue) take the same
// kernel, with the factored pairs (LaneTileBuilder::factoredPairs) for P
// and L. Per 8-key n tile, each warp finds the largest exponent its
// factored decays would take: g <= 0 makes a group's end rows its extremes,
// so each lane takes its columns' difference to the row gs - 1 below (a
// shuffle down per column, a maximum), then five butterfly shuffles: at
// most 80, groups of 8 keys, each factored from the middle of its end
// gates; else, checked the same way, groups of 4, then of 2, else groups
// of one key (exact for any decaying gate). Then one loop over
// the n tile's groups, whatever their size, on mma.sync, P's and L's
// products against the same keys. No barrier in any of it: the two n tiles'
// sums across warps meet after both (one barrier).
// Varlen runs the flat grid: ceil(T / 16) windows of packed tokens plus one
// program per sequence (chunk 0 of sequence x - ceil(T / 16)), not sequences
// x the longest sequence's chunks; a window's sequence is a binary search
// over cu_seqlens (a loop of loads from it before the first barrier).
// LOGSPACE: grid = [{ceil_div = 16 : i64, plus = "N_plus_1", symbol = "T"}, 1, 4], module = "kda_gated_delta_kernel_intra_module"
// LOGSPACE-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// LOGSPACE: nvvm.barrier
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: nvvm.shfl.sync down
// LOGSPACE-NEXT: llvm.fsub
// LOGSPACE-NEXT: llvm.intr.maximum
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE-COUNT-5: nvvm.shfl.sync bfly
// LOGSPACE: llvm.fcmp "ole" {{.*}} : f32
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: llvm.fcmp "ole" {{.*}} : f32
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: llvm.fcmp "ole" {{.*}} : f32
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: nvvm.shfl.sync idx
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE-COUNT-4: nvvm.mma.sync
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: llvm.fcmp "ole" {{.*}} : f32
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: nvvm.mma.sync
// LOGSPACE: nvvm.barrier
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: nvvm.bar.warp.sync
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: llvm.return

// No gate, no prologue (K = V = 64, sm_80): no shuffles for the gate, no
// barrier for the norms; P's and L's sums across warps and the parked
// tiles' one barrier before W and U read them.
// NOGATE-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// NOGATE-NOT: nvvm.shfl.sync
// NOGATE-COUNT-3: nvvm.barrier
// NOGATE-NOT: nvvm.barrier
// NOGATE: llvm.return

// 16-bit kernels take the approximate exponential and division (gate
// activation, decays, sigmoids), the exponential as the hardware's
// flush-to-zero ex2 (kda-nvvm-ftz-math: no libdevice fast form left); fp32
// kernels keep libdevice's accurate forms for the 1e-4 bar.
// FASTMATH-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// FASTMATH-NOT: @__nv_expf
// FASTMATH-NOT: @__nv_fast_expf
// FASTMATH: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// FASTMATH-NOT: @__nv_fast_expf
// FASTMATH: llvm.fdiv {{.*}}fastmath<arcp, afn>
// FASTMATH: gpu.module @kda_gated_delta_kernel_state_module
// ACCURATE-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// ACCURATE-NOT: @__nv_fast_expf
// ACCURATE-NOT: approx.ftz
// ACCURATE-NOT: afn
// ACCURATE: gpu.module @kda_gated_delta_kernel_state_module

// fp32 inputs keep fp32 accuracy: three tf32 products per product (3xTF32),
// 12 mma.sync where a 16-bit kernel takes 4 (K = 64 over 4 warps).
// F32-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// F32-COUNT-2: nvvm.barrier
// F32-COUNT-12: nvvm.mma.sync
// F32: nvvm.barrier
// F32-COUNT-12: nvvm.mma.sync
// F32: nvvm.barrier
// F32-NOT: nvvm.barrier
// F32: nvvm.mma.sync
// F32-NOT: nvvm.barrier
// F32: llvm.return
func.func @f32(%q: tensor<2x?x2x64xf32>, %k: tensor<2x?x2x64xf32>, %v: tensor<2x?x2x64xf32>,
               %g: tensor<2x?x2x64xf32>, %beta: tensor<2x?x2xf32>, %dt_bias: tensor<2x64xf32>)
    -> tensor<2x?x2x64xf32> {
  %o = kda.gated_delta delta %q, %k, %v gate(%g : tensor<2x?x2x64xf32>)
      beta(%beta : tensor<2x?x2xf32>) dt_bias(%dt_bias : tensor<2x64xf32>)
      {qk_l2norm, beta_activation = #kda<beta sigmoid>,
       gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64}
      : tensor<2x?x2x64xf32>, tensor<2x?x2x64xf32>, tensor<2x?x2x64xf32> -> tensor<2x?x2x64xf32>
  return %o : tensor<2x?x2x64xf32>
}

// The softplus gate of a 16-bit kernel, log(1 + e^x), on the approximate
// logarithm: libdevice's log1pf (a 30-instruction polynomial, no fast form)
// made the kernel 1.5 times slower than the lower-bound gate's. It is the
// hardware's flush-to-zero lg2 times ln 2.
// SOFTPLUS-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// SOFTPLUS-NOT: @__nv_log1pf
// SOFTPLUS: llvm.call_intrinsic "llvm.nvvm.lg2.approx.ftz.f"
// SOFTPLUS-NOT: @__nv_log1pf
// SOFTPLUS-NOT: @__nv_fast_logf
// SOFTPLUS: gpu.module @kda_gated_delta_kernel_state_module

// Kimi's softplus gate:
// after the l2 norms' two sums across warps, beta Gamma K and beta V are
// parked row-major in shared memory (32 stores a lane; rows of K + 4 and
// V + 4 words), the decayed pairs run on mma.sync, their sums across warps
// take the one barrier left, and the UT transform's products read the parked
// tiles as B operands after it: no barrier of their own. Shared memory: sums
// across warps 2 x 4 x 16 x 32, the warps' exchange regions 4 x 16 x 33, the
// parked tiles 16 x (132 + 132) f32 = 41728 bytes.
// DERIVED: dynamic_shared_memory = 41728 : i64, {{.*}} module = "kda_gated_delta_kernel_intra_module"
// DERIVED-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// DERIVED-COUNT-2: nvvm.barrier
// DERIVED-COUNT-32: llvm.store {{.*}} : f32, !llvm.ptr<3>
// DERIVED: nvvm.mma.sync
// DERIVED: nvvm.barrier
// DERIVED-NOT: nvvm.barrier
// DERIVED: nvvm.mma.sync
// DERIVED-NOT: nvvm.barrier
// DERIVED: gpu.module @kda_gated_delta_kernel_state_module
