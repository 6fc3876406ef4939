// RUN: kda-opt %S/Inputs/kimi_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s
// RUN: kda-opt %S/Inputs/kimi_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none intra-registers=false" | FileCheck %s --check-prefix=TILES
// RUN: kda-opt %S/Inputs/varlen_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=LOGSPACE
// RUN: kda-opt %S/Inputs/single_head.mlir --kda-lower-to-nvvm="chip=sm_80 format=none" | FileCheck %s --check-prefix=NOGATE
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=F32
// RUN: kda-opt %S/Inputs/kimi_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=FASTMATH
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=ACCURATE
// RUN: kda-opt %S/Inputs/softplus_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=SOFTPLUS
// RUN: kda-opt %S/Inputs/softplus_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none intra-program=derived" | FileCheck %s --check-prefix=DERIVED

// The chunk-parallel intra-chunk grid on NVIDIA (kda-gpu-intra-registers),
// here for Kimi's prologue (l2 norm, beta sigmoid, lower-bound gate with
// A_log and dt_bias): the tiles stay in registers; rows are read as 16-byte
// vectors (so the manifest asks for 16-byte aligned q, k, v, gate and
// dt_bias); the gate's prefix sum and the l2 norms are warp shuffles;
// P and L are mma.sync partial products over each warp's key columns.
// Four barriers per chunk: the l2 norms, the partial products, the full L,
// the inverse. Shared memory: norms 4 x 2 x 16, partials 4 x 2 x 16 x 17,
// beta 16, L 16 x 20, A 4 x 16 x 20, beta Gamma K and beta V 2 x 4 x 16 x 40
// f32 = 36160 bytes.
// CHECK: {block = [128, 1, 1], dynamic_shared_memory = 36160 : i64, grid = [{ceil_div = 16 : i64, symbol = "T"}, "B", "HV"], module = "kda_gated_delta_kernel_intra_module", name = "kda_gated_delta_kernel_intra", params = [{alignment = 16 : i64, dtype = "bf16", kind = "tensor", name = "q"
// CHECK-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// CHECK: llvm.load {{.*}} -> vector<8xbf16>
// CHECK: nvvm.shfl.sync bfly
// CHECK: nvvm.barrier
// CHECK: nvvm.shfl.sync up
// CHECK: nvvm.shfl.sync idx
// CHECK: nvvm.mma.sync
// CHECK-COUNT-3: nvvm.barrier
// CHECK-NOT: nvvm.barrier
// CHECK: nvvm.mma.sync
// CHECK-NOT: nvvm.barrier
// CHECK: llvm.return
// CHECK-LABEL: gpu.module @kda_gated_delta_kernel_state_module

// Switched off, the intra-chunk kernel keeps the tile lowering: a barrier per
// primitive.
// TILES-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// TILES-COUNT-20: nvvm.barrier

// Log-space gates without a lower bound (varlen, no prologue) take the same
// kernel. Per 8-key n tile, each warp finds the largest exponent its
// factored decays would use (a least negated exponent over its lanes by
// butterfly shuffles): at most 80, it multiplies operands factored from each
// tile's middle row on the tensor cores; else, checked the same way, from the
// middle rows of 4-key groups (two mma passes, exponents within 2 gate
// steps); else it forms the tile's partial products pairwise
// (exp(G_i - G_j) per pair and column, key rows fetched by shuffles). No
// barrier in any branch.
// Varlen runs the flat grid: ceil(T / 16) windows of packed tokens plus one
// program per sequence (chunk 0 of sequence x - ceil(T / 16)), not sequences
// x the longest sequence's chunks; a window's sequence is a binary search
// over cu_seqlens (a loop of loads from it before the first barrier).
// LOGSPACE: grid = [{ceil_div = 16 : i64, plus = "N_plus_1", symbol = "T"}, 1, 4], module = "kda_gated_delta_kernel_intra_module"
// LOGSPACE-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// LOGSPACE: llvm.intr.minimum
// LOGSPACE-COUNT-5: nvvm.shfl.sync bfly
// LOGSPACE: llvm.fneg
// LOGSPACE-NEXT: llvm.fcmp "ole" {{.*}} : f32
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: nvvm.mma.sync
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: llvm.fcmp "ole" {{.*}} : f32
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: nvvm.mma.sync
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: nvvm.shfl.sync idx
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: llvm.call @__nv_fast_expf
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: nvvm.shfl.sync bfly
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: llvm.fcmp "ole" {{.*}} : f32
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: llvm.fcmp "ole" {{.*}} : f32
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: nvvm.mma.sync
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: nvvm.shfl.sync idx
// LOGSPACE-COUNT-3: nvvm.barrier
// LOGSPACE-NOT: nvvm.barrier
// LOGSPACE: llvm.return

// No gate, no prologue (K = V = 64, sm_80): no shuffles for the gate, no
// barrier for the norms; the partial products, L and the inverse.
// NOGATE-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// NOGATE-NOT: nvvm.shfl.sync
// NOGATE-COUNT-3: nvvm.barrier
// NOGATE-NOT: nvvm.barrier
// NOGATE: llvm.return

// 16-bit kernels take the approximate exponential and division (gate
// activation, decays, sigmoids); fp32 kernels keep libdevice's accurate
// forms for the 1e-4 bar.
// FASTMATH-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// FASTMATH-NOT: @__nv_expf
// FASTMATH: llvm.call @__nv_fast_expf
// FASTMATH: llvm.fdiv {{.*}}fastmath<arcp, afn>
// FASTMATH: gpu.module @kda_gated_delta_kernel_state_module
// ACCURATE-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// ACCURATE-NOT: @__nv_fast_expf
// ACCURATE-NOT: afn
// ACCURATE: gpu.module @kda_gated_delta_kernel_state_module

// fp32 inputs keep fp32 accuracy: three tf32 products per product (3xTF32).
// F32-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// F32: nvvm.barrier
// F32-COUNT-3: nvvm.mma.sync
// F32-COUNT-3: nvvm.barrier
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
// made the kernel 1.5 times slower than the lower-bound gate's.
// SOFTPLUS-LABEL: gpu.module @kda_gated_delta_kernel_intra_module
// SOFTPLUS-NOT: @__nv_log1pf
// SOFTPLUS: llvm.call @__nv_fast_logf
// SOFTPLUS-NOT: @__nv_log1pf
// SOFTPLUS: gpu.module @kda_gated_delta_kernel_state_module

// The derived program (emitIntraChunk on lane tiles), Kimi's softplus gate:
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
