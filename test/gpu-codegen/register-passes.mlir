// Each register pass on its own input (the IR the GPU pipeline hands it):
// it writes the kernel kda-gpu-select-strategy gives lanes, and leaves every
// other function alone.
// RUN: kda-opt %S/Inputs/register_kernels_small.mlir --pass-pipeline="builtin.module(func.func(kda-gpu-intra-registers))" | FileCheck %s --check-prefix=INTRA
// RUN: kda-opt %S/Inputs/register_kernels_small.mlir --pass-pipeline="builtin.module(func.func(kda-gpu-state-registers))" | FileCheck %s --check-prefix=STATE
// RUN: sed 's/kernel = "intra", kind = "lanes"/kernel = "intra", kind = "tiles", reason = "a test"/' %S/Inputs/register_kernels_small.mlir | kda-opt --pass-pipeline="builtin.module(func.func(kda-gpu-intra-registers))" | FileCheck %s --check-prefix=TILES
// RUN: sed 's/, kda.strategy = #kda.strategy<kernel = "[a-z]*", kind = "lanes">//' %S/Inputs/register_kernels_small.mlir | kda-opt --pass-pipeline="builtin.module(func.func(kda-gpu-intra-registers,kda-gpu-state-registers))" | FileCheck %s --check-prefix=BOTH

// kda-gpu-intra-registers: emitIntraChunk on lane tiles (sums across warps
// behind block barriers, the triangular inverse behind warp barriers, W and
// U on mma.sync); the state kernel is untouched. (At K = 32 a warp holds 8
// key columns, too few for the factored pairs' tf32 fragments: P and L take
// the tile builder's generic pairs.)
// INTRA-LABEL: func.func private @kda_gated_delta_kernel_intra
// INTRA-SAME: kda.explicit_threads
// INTRA: gpu.barrier
// INTRA: nvvm.bar.warp.sync
// INTRA: nvgpu.mma.sync
// INTRA-LABEL: func.func private @kda_gated_delta_kernel_state
// INTRA-NOT: gpu.shuffle
// INTRA-NOT: nvgpu.mma.sync
// INTRA: linalg.generic

// kda-gpu-state-registers: the state kernel with the state in mma.sync
// accumulators (16-bit inputs: emitStateStep on lane tiles, its products on
// nvvm.mma.sync directly); the intra-chunk kernel is untouched.
// STATE-LABEL: func.func private @kda_gated_delta_kernel_intra
// STATE-NOT: nvgpu.mma.sync
// STATE-LABEL: func.func private @kda_gated_delta_kernel_state
// STATE-SAME: kda.explicit_threads
// STATE: nvvm.mma.sync
// STATE-NOT: linalg.generic
// STATE: return

// A kernel the strategy gives tiles is left to the tile lowering.
// TILES-LABEL: func.func private @kda_gated_delta_kernel_intra
// TILES-SAME: kind = "tiles"
// TILES-NOT: gpu.shuffle
// TILES-NOT: nvgpu.mma.sync
// TILES: linalg.generic
// TILES-LABEL: func.func private @kda_gated_delta_kernel_state

// Without a strategy (a register pass run on its own input), each pass asks
// its own layout whether it takes the kernel: both do here.
// BOTH-NOT: kda.strategy
// BOTH-LABEL: func.func private @kda_gated_delta_kernel_intra
// BOTH: nvgpu.mma.sync
// BOTH-LABEL: func.func private @kda_gated_delta_kernel_state
// BOTH: nvvm.mma.sync

// kda-gpu-state-registers on a gradient's reverse scan (kda.reverse_pass):
// the state program run backwards. Chunks staged by cp.async, the adjoint's
// products on mma.sync (f32 workspaces: 3xTF32, K split over 2 warps at
// K = 32), dS carried in registers through the chunk loop and stored into
// the dS workspace (ws6, V-major: a lane's key pairs as one vector) every
// chunk, as dV_new into its workspace (ws7: U's
// seed, which the step grid reads), dh0 into d_initial_state at the end; no
// tile program left. Given tiles by the strategy, it is left alone.
// RUN: kda-opt %S/Inputs/reverse_kernel_small.mlir --pass-pipeline="builtin.module(func.func(kda-gpu-state-registers))" | FileCheck %s --check-prefix=REVERSE
// RUN: sed 's/kernel = "reverse", kind = "lanes", instruction = "mma_sync", program = "derived", stages = 2/kernel = "reverse", kind = "tiles", reason = "a test"/' %S/Inputs/reverse_kernel_small.mlir | kda-opt --pass-pipeline="builtin.module(func.func(kda-gpu-state-registers))" | FileCheck %s --check-prefix=REVTILES
// REVERSE-LABEL: func.func private @kda_gated_delta_grad_kernel_reverse
// REVERSE-SAME: kda.block_threads = 64
// REVERSE-NOT: linalg.generic
// REVERSE: nvgpu.device_async_copy
// REVERSE: scf.for {{.*}} iter_args(
// REVERSE: vector.store %{{.*}}, %arg17[{{.*}}] {alignment = 8 : i64} : memref<?x?x?x32x32xf32>, vector<2xf32>
// REVERSE: nvgpu.mma.sync
// REVERSE: memref.store %{{.*}}, %arg18[
// REVERSE: memref.store %{{.*}}, %arg19[
// REVERSE-NOT: linalg.generic
// REVTILES-LABEL: func.func private @kda_gated_delta_grad_kernel_reverse
// REVTILES-SAME: kind = "tiles"
// REVTILES-NOT: nvgpu.mma.sync
// REVTILES: linalg.generic

// kda-gpu-decode-registers: one pass over each state, reductions by
// shuffles, no shared memory or barrier; tiles where the strategy says so.
// RUN: kda-opt %S/Inputs/decode_kernel_128.mlir --pass-pipeline="builtin.module(func.func(kda-gpu-decode-registers))" | FileCheck %s --check-prefix=DECODE
// RUN: sed 's/kernel = "decode", kind = "lanes"/kernel = "decode", kind = "tiles", reason = "a test"/' %S/Inputs/decode_kernel_128.mlir | kda-opt --pass-pipeline="builtin.module(func.func(kda-gpu-decode-registers))" | FileCheck %s --check-prefix=DECODETILES
// DECODE-LABEL: func.func private @kda_decode_step_kernel
// DECODE: gpu.shuffle xor
// DECODE-NOT: gpu.barrier
// DECODE-NOT: linalg.generic
// DECODE: return
// DECODETILES-LABEL: func.func private @kda_decode_step_kernel
// DECODETILES-NOT: gpu.shuffle
// DECODETILES: linalg.generic
