// RUN: kda-opt %S/Inputs/varlen_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=DERIVED
// RUN: kda-opt %S/Inputs/varlen_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none state-registers=false" | FileCheck %s --check-prefix=TILES
// RUN: kda-opt %S/Inputs/varlen_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none state-stages=3" | FileCheck %s --check-prefix=STAGES
// RUN: not kda-opt %S/Inputs/varlen_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none state-stages=9" 2>&1 | FileCheck %s --check-prefix=STAGES9
// RUN: kda-opt %S/Inputs/boundary_states.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=BOUNDARY
// RUN: kda-opt %S/Inputs/boundary_pool.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=POOL
// RUN: not kda-opt %S/Inputs/boundary_pool.mlir --kda-lower-to-nvvm="chip=sm_90a format=none v-block=8" 2>&1 | FileCheck %s --check-prefix=POOLTILE
// RUN: not kda-opt %S/Inputs/boundary_pool.mlir --kda-lower-to-nvvm="chip=sm_90a format=none state-registers=false" 2>&1 | FileCheck %s --check-prefix=POOLNONE
// RUN: kda-opt %S/Inputs/boundary_pool.mlir --kda-lower-to-rocdl="chip=gfx942 format=none" | FileCheck %s --check-prefix=POOLAMD
// RUN: kda-opt %s --kda-lower-to-nvvm="chip=sm_80 format=none" | FileCheck %s --check-prefix=F32DERIVED
// RUN: kda-opt %S/Inputs/varlen_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none intra-registers=false" --mlir-print-ir-after=kda-gpu-map-kernels 2>&1 >/dev/null | FileCheck %s --check-prefix=SKIP
// RUN: kda-opt %S/Inputs/single_head.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=UNIT
// RUN: kda-opt %S/Inputs/single_head.mlir --kda-lower-to-nvvm="chip=sm_80 format=none state-registers=false" | FileCheck %s --check-prefix=UNITTILES
// RUN: kda-opt %S/../tools/Inputs/gated.mlir --kda-lower-to-nvvm="chip=sm_90a format=none" | FileCheck %s --check-prefix=ONE
// RUN: kda-opt %S/../tools/Inputs/gated.mlir --kda-lower-to-rocdl="chip=gfx942 format=none" | FileCheck %s --check-prefix=ONE
// RUN: kda-opt %S/Inputs/varlen_prefill.mlir --kda-lower-to-rocdl="chip=gfx942 format=none" | FileCheck %s --check-prefix=MFMA
// RUN: kda-opt %S/Inputs/varlen_prefill.mlir --kda-lower-to-rocdl="chip=gfx1100 format=none" | FileCheck %s --check-prefix=WMMA
// RUN: kda-opt %S/Inputs/varlen_prefill.mlir --kda-lower-to-nvvm="chip=sm_90a format=none emulate-wmma=true" | FileCheck %s --check-prefix=EMULATED

// The chunk-parallel state pass on NVIDIA (kda-gpu-state-registers): the
// state stays in mma.sync accumulators for the whole sequence. 16-bit
// inputs: emitStateStep on lane tiles (LaneStateProgram), one warp per 16 V
// rows (the default V block of 16: one warp) holding all of
// K; a chunk's workspaces come in by cp.async, one barrier per chunk, and
// every product is a bf16 mma.sync.
// DERIVED: {block = [32, 1, 1], dynamic_shared_memory = {{[1-9][0-9]+}} : i64, grid = [{{.*}}], module = "kda_gated_delta_kernel_state_module"
// DERIVED-LABEL: gpu.module @kda_gated_delta_kernel_state_module
// DERIVED: nvvm.cp.async.shared.global
// DERIVED: nvvm.barrier
// DERIVED-NOT: nvvm.barrier
// DERIVED: nvvm.ldmatrix
// DERIVED: nvvm.mma.sync {{.*}}bf16
// DERIVED-NOT: nvvm.barrier
// DERIVED: llvm.return

// Three chunks in flight (the strategy's stages): chunks 0 and 1 are issued
// before the loop, and each step waits for the oldest of two pending groups.
// STAGES: strategy = #kda.strategy<kernel = "state", kind = "lanes", instruction = "mma_sync", program = "derived", stages = 3>
// STAGES-LABEL: gpu.module @kda_gated_delta_kernel_state_module
// STAGES: nvvm.cp.async.commit.group
// STAGES: nvvm.cp.async.commit.group
// STAGES: nvvm.cp.async.wait.group 1
// STAGES-NEXT: nvvm.barrier
// STAGES9: error: kda-gpu-state-registers: the state program's chunks in flight (state-stages) are 2 to 8, got 9

// Chunk-boundary states of fp32 inputs (varlen, V = 32 in one block): the
// derived program, the state split by K; where a chunk starts a boundary
// interval each lane stores its accumulators (f32) before the chunk's
// products.
// BOUNDARY: name = "kda_gated_delta_kernel_state"{{.*}}program = "derived"
// BOUNDARY-LABEL: gpu.module @kda_gated_delta_kernel_state_module
// BOUNDARY: nvvm.cp.async.shared.global
// BOUNDARY: nvvm.cp.async.wait.group
// BOUNDARY: llvm.store {{.*}} : f32, !llvm.ptr
// BOUNDARY: nvvm.mma.sync {{.*}}tf32
// BOUNDARY: llvm.return

// Boundary states into pool slots: the state kernel stores them itself (the
// derived program of these bf16 inputs: a lane's key pair of a V-major row
// as one 2-element vector); the pool is a kernel argument it only writes.
// Where the register program cannot take the tiling, or there is none (AMD,
// state-registers off), the tiling is refused with the reason.
// POOL: name = "boundary_states", shape = ["S", "HV", 64, 64]
// POOL-LABEL: gpu.module @kda_gated_delta_kernel_state_module
// POOL: nvvm.cp.async.shared.global
// POOL: llvm.store {{.*}} : vector<2xbf16>, !llvm.ptr
// POOL: llvm.return
// POOLTILE: error: kda-gpu-state-registers: boundary states into pool slots need the register state kernel, which does not cover this tiling (V block 8, K 64, chunk 16: V blocks, K and chunks multiples of 16
// POOLNONE: error: kda-tile-chunks: boundary states into pool slots (boundary_indices) are not supported on this target
// On AMD the state kernel on MFMA writes the pool slots too (negative slots
// skipped: the signed compare, before each chunk's step).
// POOLAMD: name = "boundary_states", shape = ["S", "HV", 64, 64]
// POOLAMD-LABEL: gpu.module @kda_gated_delta_kernel_state_module
// POOLAMD: llvm.icmp "sge"
// POOLAMD: rocdl.mfma.f32.16x16x16bf16.1k
// POOLAMD: llvm.return

// The tile lowering stays where the pass is switched off: a barrier per
// primitive.
// TILES-LABEL: gpu.module @kda_gated_delta_kernel_state_module
// TILES-COUNT-8: nvvm.barrier

// fp32 inputs keep fp32 accuracy (3xTF32: three tf32 products per
// product) on emitStateStep too (the chip table's fp32 V block, 32), the
// state split by K: four warps of 16 keys, each holding all 32
// V rows of its keys; f32 workspaces in shared memory for two chunks (W,
// Gamma Q and decayed k: 16 x (64 + 4) f32 each; U 16 x (32 + 4); P 16 x
// (16 + 4): 2 x 4 x (3 x 1088 + 576 + 320) = 33280 bytes) and the warps'
// partial W S and Gamma Q S, one half each (2 x 4 x 32 x 16 f32: 16384
// bytes); every m16n8k16 step two tf32 steps of three products. A chunk:
// the staging barrier, W S over the warp's keys, its sum across warps (one
// barrier), Gamma Q S and its sum (one), then P V_new and the state update
// on the warp's own keys.
// F32DERIVED: {block = [128, 1, 1], dynamic_shared_memory = 49664 : i64, grid = [2, 2, 2], module = "kda_gated_delta_kernel_state_module"
// F32DERIVED-SAME: program = "derived"
// F32DERIVED-LABEL: gpu.module @kda_gated_delta_kernel_state_module
// F32DERIVED: nvvm.cp.async.shared.global
// F32DERIVED: nvvm.barrier
// F32DERIVED-NOT: nvvm.barrier
// F32DERIVED: nvvm.mma.sync {{.*}}tf32
// F32DERIVED: nvvm.barrier
// F32DERIVED-NOT: nvvm.barrier
// F32DERIVED: nvvm.mma.sync {{.*}}tf32
// F32DERIVED: nvvm.barrier
// F32DERIVED-NOT: nvvm.barrier
// F32DERIVED: nvvm.mma.sync {{.*}}tf32
// F32DERIVED-NOT: nvvm.barrier
// F32DERIVED-NOT: bf16
// F32DERIVED: llvm.return

// Varlen chunk grids of the tile lowering launch every sequence's chunks up
// to the longest: a program past its sequence's end returns before doing
// anything. (The register intra-chunk kernel runs a flat grid instead, with
// no such programs: intra-registers.mlir.)
// SKIP-LABEL: gpu.func @kda_gated_delta_kernel_intra
// SKIP: scf.if
// SKIP-NEXT: arith.constant 1 : index
// SKIP: memref.load {{.*}} : memref<?xi32>
// SKIP: memref.load {{.*}} : memref<?xi32>
// SKIP: arith.muli %{{.*}}, %c16
// SKIP: arith.cmpi ult
// SKIP-NEXT: scf.if
// A grid whose sequence and head dimensions have extent 1 (kept: program
// grids keep their unit dimensions):
// (1, 1, 4 V blocks of 16), K = V = 64; the register state kernel launches
// it V block first (x), so that a (sequence, head)'s V blocks run together
// and share their W, Gamma Q and decayed k reads in L2.
// UNIT: {block = [32, 1, 1], dynamic_shared_memory = {{[1-9][0-9]+}} : i64, grid = [4, 1, 1], module = "kda_gated_delta_kernel_state_module"
// UNITTILES: grid = [1, 1, 4], module = "kda_gated_delta_kernel_state_module"

// All static, one program per grid (1 x 16 x 1 x 16): the grids stay (they
// used to be folded away, and the kernels had no grid to map).
// ONE: grid = [1, 1, 1], module = "kda_gated_delta_kernel_intra_module"
// ONE: grid = [1, 1, 1], module = "kda_gated_delta_kernel_state_module"

func.func @f32_k64(%q: tensor<2x?x2x64xf32>, %k: tensor<2x?x2x64xf32>,
                   %v: tensor<2x?x2x64xf32>, %b: tensor<2x?x2xf32>,
                   %h0: tensor<2x2x64x64xf32>)
    -> (tensor<2x?x2x64xf32>, tensor<2x2x64x64xf32>) {
  %o, %ht = kda.gated_delta delta %q, %k, %v beta(%b : tensor<2x?x2xf32>)
      initial_state(%h0 : tensor<2x2x64x64xf32>)
      {tile = #kda.tile<chunk = 16, sub_chunk = 16, v_block = 32>}
      : tensor<2x?x2x64xf32>, tensor<2x?x2x64xf32>, tensor<2x?x2x64xf32>
      -> tensor<2x?x2x64xf32> final_state tensor<2x2x64x64xf32>
  return %o, %ht : tensor<2x?x2x64xf32>, tensor<2x2x64x64xf32>
}

// AMD: the same program on the chip's matrix unit (LaneTileBuilder's
// unitProduct): gfx942's wave64 MFMA with the state's V block on one wave
// (64 lanes), its workspaces staged by plain 16-byte copies (no cp.async),
// one barrier per chunk, every product a bf16 MFMA; gfx1100's wave32 WMMA
// splits K over the warps (partial products summed in LDS).
// MFMA-LABEL: gpu.module @kda_gated_delta_kernel_state_module
// MFMA: rocdl.workitem.id.x
// MFMA: rocdl.barrier
// MFMA-NOT: rocdl.barrier
// MFMA: rocdl.mfma.f32.16x16x16bf16.1k
// MFMA-NOT: rocdl.barrier
// MFMA: llvm.return
// WMMA-LABEL: gpu.module @kda_gated_delta_kernel_state_module
// WMMA: rocdl.wmma.f32.16x16x16.bf16
// WMMA: llvm.return

// --emulate-wmma (tests): gfx1100's program for NVIDIA, each WMMA step as
// shuffles and FMAs, the workspaces staged as on AMD.
// EMULATED-LABEL: gpu.module @kda_gated_delta_kernel_state_module
// EMULATED-NOT: nvvm.cp.async
// EMULATED-NOT: nvvm.mma.sync
// EMULATED: nvvm.shfl.sync idx
// EMULATED-NOT: nvvm.mma.sync
// EMULATED: llvm.return
