//===- Passes.td - target lowerings of the tile IR --------*- tablegen -*-===//
//
// Every pass of lowering/: its argument, summary, description and options,
// declared once (mlir-tblgen -gen-pass-decls -name KdaLowering makes their
// base classes, option structs and registration, lowering/Passes.h). Each
// is implemented in the file named after it; each has a lit test of its own
// under test/lowering/ or test/gpu-codegen/, fed its own input IR. The
// pipelines that order them: CpuPipeline.cpp (kda-lower-to-cpu) and
// GpuPipeline.cpp (kda-lower-to-nvvm, kda-lower-to-rocdl).
//
//===----------------------------------------------------------------------===//

#ifndef KDA_LOWERING_PASSES_TD
#define KDA_LOWERING_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// CPU
//===----------------------------------------------------------------------===//

def KdaCpuSequentialNestedGrids
    : Pass<"kda-cpu-sequential-nested-grids", "func::FuncOp"> {
  let summary = "Run grids nested inside a program in order (CPU)";
  let description = [{
    Programs run in parallel on the CPU (OpenMP over the outermost grid);
    grids nested inside a program (the columns of TileBuilder's triangular
    solve) become sequential scf.for loops within it.
  }];
}

//===----------------------------------------------------------------------===//
// GPU: kernels and schedules (tensors)
//===----------------------------------------------------------------------===//

def KdaGpuOutlineElementwise
    : Pass<"kda-gpu-outline-elementwise", "ModuleOp"> {
  let summary =
      "Move elementwise work between kda kernels into kernels of its own";
  let description = [{
    Elementwise linalg work left between kernel calls (a hybrid's mix, a
    gate computed outside the op) becomes a destination-style kernel
    function with its kda.abi, one program per leading index, so that every
    GPU launch is a grid of programs (GpuOutlineElementwise.cpp).
  }];
  let options = [
    Option<"tileElements", "tile-elements", "int64_t", /*default=*/"0",
           "Elements a program may take: 0 keeps a dynamic trailing "
           "dimension one index a program (the GPU pipelines take 4096); N > 0 "
           "blocks the first trailing dimension (a power of two of its "
           "indices, the last block partial) up to N elements a program">
  ];
}

def KdaGpuFuseTiles : Pass<"kda-gpu-fuse-tiles", "func::FuncOp"> {
  let summary =
      "Fuse chains of elementwise tile maps (fewer GPU phases and tiles)";
  let description = [{
    On a GPU every tile primitive is a phase of the block, fenced by
    barriers, and every intermediate tile a shared-memory buffer. Chains of
    elementwise maps fuse into one primitive; matmuls keep their plain
    multiply-accumulate bodies (they run on the matrix units), so only
    elementwise consumers take producers in.
  }];
}

def KdaGpuSplitSchedule : Pass<"kda-gpu-split-schedule", "ModuleOp"> {
  let summary = "One GPU kernel per program grid of a multi-grid kda kernel; "
                "the order of launches and the workspaces become a bundle "
                "entry";
  let description = [{
    kda-tile-chunks' chunk-parallel schedule leaves a kernel function with
    several program grids that hand each other tensors. Each grid becomes a
    kernel function named after its kda.phase, described in kda.abi; the
    original function calls them in order on fresh workspaces; the module's
    kda.entries records the schedule for the runtime (runtime/BUNDLE.md).
  }];
}

def KdaGpuLayerEntry : Pass<"kda-gpu-layer-entry", "ModuleOp"> {
  let summary = "Record a function of several kernel and entry calls (a "
                "hybrid layer) as one bundle entry";
  let description = [{
    After kda-gpu-split-schedule a function of several kda ops is host code:
    calls to kernels and entries on fresh tensors. Such a function becomes
    one more entry of `kda.entries`, named after it: its arguments and
    results the parameters, every other fresh tensor a workspace, each call
    its launches (a called entry's spliced in, its workspaces renamed), the
    dimensions unified across calls so that every launch argument has its
    kernel parameter's symbols. The runtime then runs the layer in one call.
  }];
  let options = [
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "A remark for every function of several calls that gets no entry, "
           "with the reason">,
    Option<"overlap", "overlap", "bool", /*default=*/"true",
           "Launches of a called entry after its first (the state pass) on "
           "the side stream where another call's launches are independent "
           "of them (the window beside the state pass)">,
    Option<"progress", "progress", "bool", /*default=*/"true",
           "kda.hybrid {overlap}: the state pass publishes its progress and "
           "the fused window waits for it (NVIDIA's register kernels; off: "
           "the window follows the state pass)">,
  ];
}

def KdaGpuBindDestinations
    : Pass<"kda-gpu-bind-destinations", "func::FuncOp"> {
  let summary =
      "Make destination-style kda kernels write their result arguments";
  let description = [{
    Outlined destination-style kernels return what their scf.forall wrote
    into fresh tensors; the forall writes into the result arguments instead,
    so that bufferization writes the caller's buffers in place. Empty and
    zero-filled tiles that CSE merged get one per use.
  }];
}

def KdaGpuSelectStrategy : Pass<"kda-gpu-select-strategy", "ModuleOp"> {
  let summary = "Decide for every GPU kernel whether it runs on lanes "
                "(register kernels) or as shared-memory tiles, record it as "
                "kda.strategy, and (remarks) say why a kernel gets tiles";
  let description = [{
    The one place that decides (lowering/Strategy.h): from the target, the
    pipeline's switches and what each lane layout takes (the *LanesRefusal
    functions beside the layouts), every kernel gets kda.strategy = {kernel,
    kind = lanes | tiles, reason}. The register passes write what it says;
    the manifest and kda.ops.last_launch report it.
  }];
  let options = [
    Option<"nvidia", "nvidia", "bool", /*default=*/"true", "NVIDIA target">,
    Option<"tensorCores", "tensor-cores", "bool", /*default=*/"true",
           "Tensor-core tile matmuls">,
    Option<"intraLanes", "intra-registers", "bool", /*default=*/"true",
           "Register intra-chunk kernels">,
    Option<"stateLanes", "state-registers", "bool", /*default=*/"true",
           "Register state kernels">,
    Option<"stepLanes", "step-registers", "bool", /*default=*/"true",
           "The gradient's step grid on lanes">,
    Option<"chunkLanes", "chunk-registers", "bool", /*default=*/"true",
           "The gradient's chunk grid (the intra-chunk adjoint) on lanes">,
    Option<"decodeLanes", "decode-registers", "bool", /*default=*/"true",
           "Register decode kernels">,
    Option<"windowLanes", "window-registers", "bool", /*default=*/"true",
           "Register window-attention kernels">,
    Option<"stateStages", "state-stages", "int64_t", /*default=*/"2",
           "Chunks in flight (cp.async stages) of the state program">,
    Option<"threads", "threads", "int64_t", /*default=*/"128",
           "Threads per block">,
    Option<"warpSize", "warp-size", "int64_t", /*default=*/"32", "Warp size">,
    Option<"instructions", "instructions", "std::string",
           /*default=*/"\"mma_sync\"",
           "The chip's matrix instructions (mma_sync, mfma, wmma)">,
    Option<"sharedMemory", "shared-memory", "int64_t", /*default=*/"0",
           "The chip's shared memory per block in bytes (0: unchecked)">,
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "The chip has Hopper's wgmma (sm_90a)">,
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "A remark for every kernel of a gated delta op or decode step "
           "that gets tiles">,
  ];
}

//===----------------------------------------------------------------------===//
// GPU: lane kernels (buffers)
//===----------------------------------------------------------------------===//

def KdaGpuDecodeRegisters : Pass<"kda-gpu-decode-registers", "func::FuncOp"> {
  let summary = "Lower a decode step to a kernel that streams each state "
                "once, held in registers, with warp-shuffle reductions";
  let description = [{
    Kernels kda-gpu-select-strategy gave lanes: the decode step written per
    lane (GpuDecodeRegisters.cpp), any vendor.
  }];
  let options = [
    Option<"warpSize", "warp-size", "int64_t", /*default=*/"32",
           "Lanes per warp (32; 64 on CDNA)">,
    Option<"maxRegisters", "max-registers", "int64_t", /*default=*/"0",
           "Registers per thread (NVIDIA .maxnreg; 0: the backend decides)">,
  ];
}

def KdaGpuWindowRegisters : Pass<"kda-gpu-window-registers", "func::FuncOp"> {
  let summary = "Lower window attention to a kernel with its tiles in "
                "registers, products on the matrix unit and K / V blocks "
                "streamed through shared memory";
  let description = [{
    Kernels kda-gpu-select-strategy gave lanes: the online softmax of
    WindowAttentionKernel.cpp run on lane tiles (GpuWindowRegisters.cpp):
    64 queries per block of 4 warps, key blocks of 64 visited only where the
    window reaches. The products take the strategy's instruction: wgmma (K
    and V blocks in 128-byte swizzled shared memory) or mma.sync (ldmatrix
    from padded rows; also without a strategy), copied by cp.async one block
    ahead; on AMD MFMA or WMMA, each wave its 16 queries, every product
    transposed (S^T = K Q^T, O^T += V^T P^T), V staged transposed by plain
    copies.
  }];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect", "::mlir::vector::VectorDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect",
    "::mlir::nvgpu::NVGPUDialect", "::mlir::NVVM::NVVMDialect",
    "::mlir::amdgpu::AMDGPUDialect", "::mlir::LLVM::LLVMDialect"
  ];
}

def KdaGpuStateRegisters : Pass<"kda-gpu-state-registers", "func::FuncOp"> {
  let summary = "Lower the state grid of a chunk-parallel schedule to an "
                "NVIDIA kernel that keeps the state in mma.sync accumulators";
  let description = [{
    Kernels kda-gpu-select-strategy gave lanes: the state pass derived from
    the one algorithm, emitStateStep (passes/GatedDeltaKernel.cpp) run on
    lane tiles (GpuStateRegisters.cpp stages the chunks' workspaces and
    stores). With segments (kda.state_pass `segments`), each program is one
    segment of a sequence: the summary kernel's (`summary`) starts from
    zeros or the identity's columns and stores its final state, the state
    kernel's from the combine grid's start state.
  }];
  let options = [
    Option<"threads", "threads", "int64_t", /*default=*/"128",
           "Threads per block">,
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "Without a strategy: cp.async stages, chunks in flight (2 to 8)">,
    Option<"stepVBlock", "step-v-block", "int64_t", /*default=*/"0",
           "The gradient's step program: V columns a loop iteration "
           "(0: the grid's V block)">,
    Option<"stepMaxRegisters", "step-max-registers", "int64_t",
           /*default=*/"0",
           "The gradient's step program: registers per thread (NVIDIA "
           ".maxnreg; 0: ptxas decides)">,
    Option<"reverseTf32", "reverse-tf32", "bool", /*default=*/"true",
           "The gradient's reverse scan: its f32 products one TF32 product "
           "a step where the call's inputs are 16-bit (3xTF32 otherwise)">,
    Option<"stepThreads", "step-threads", "int64_t", /*default=*/"0",
           "The gradient's step program: threads per block (0: `threads`; "
           "fewer warps, more blocks per multiprocessor)">,
    Option<"stepTf32", "step-tf32", "bool", /*default=*/"true",
           "The gradient's step program: its f32 products one TF32 product "
           "where the call's inputs are 16-bit (3xTF32 otherwise), as the "
           "reverse scan's reverse-tf32">,
    Option<"stepScatterSums", "step-scatter-sums", "bool", /*default=*/"false",
           "The gradient's step program: its sums across warps in two steps "
           "(each warp adds a share of the registers, then all read them)">,
    Option<"stepPrefetch", "step-prefetch", "bool", /*default=*/"false",
           "The gradient's step program: loads each V block's inputs one "
           "block ahead of their use">,
    Option<"reverseThreads", "reverse-threads", "int64_t", /*default=*/"128",
           "The gradient's reverse scan: threads per block (0: `threads`; "
           "fewer warps, a shorter sum across them a step)">,
    Option<"reverseStageDO", "reverse-stage-do", "bool", /*default=*/"true",
           "The gradient's reverse scan: each chunk's dO rows copied by "
           "cp.async with its workspaces, stages ahead">,
    Option<"reverseSplitV", "reverse-split-v", "bool", /*default=*/"false",
           "The gradient's reverse scan: its warps split V, each all of K "
           "(no sum across warps a step), not K">,
    Option<"reversePrefetch", "reverse-prefetch", "bool", /*default=*/"false",
           "The gradient's reverse scan: loads each chunk's dO rows a step "
           "ahead">,
    Option<"stateCopyRuns", "state-copy-runs", "int64_t", /*default=*/"1",
           "The state program's whole-chunk copies (cp.async; AMD: 16-byte "
           "loads and stores) give each thread runs of this many "
           "consecutive 16-byte pieces of a row (one address a run; 1: "
           "pieces a block apart)">,
    Option<"stateRotateStages", "state-rotate-stages", "bool",
           /*default=*/"false",
           "The state program carries each chunk's stage through the loop "
           "and rotates it where the stages are not a power of two (not the "
           "remainder of the 64-bit chunk index)">,
    Option<"stateStagedOutput", "state-staged-output", "bool",
           /*default=*/"false",
           "The forward's outputs through shared memory: each chunk step "
           "writes its rows there and the next stores them as 16-byte rows">,
    Option<"stepStages", "step-stages", "int64_t", /*default=*/"2",
           "The gradient's step program: each V block's inputs copied by "
           "cp.async into this many stages of shared memory, blocks ahead of "
           "their use (each warp the pieces its registers read; 0: loads at "
           "their use)">,
    Option<"stepVNewFirst", "step-vnew-first", "bool", /*default=*/"true",
           "The gradient's step program: V_new of the whole chunk first, "
           "split by V (no sum across warps), then the V blocks">,
  ];
}

def KdaGpuIntraRegisters : Pass<"kda-gpu-intra-registers", "func::FuncOp"> {
  let summary = "Lower the intra-chunk grid of a chunk-parallel schedule to "
                "a kernel with its tiles in registers and products on the "
                "matrix unit (mma.sync, MFMA, WMMA)";
  let description = [{
    Kernels kda-gpu-select-strategy gave lanes: emitIntraChunk
    (passes/GatedDeltaKernel.cpp), every gate form, run on lane tiles
    (lowering/lanes/LaneTiles.h); the driver (GpuIntraRegisters.cpp) only
    loads the chunk's rows and stores its workspaces.
  }];
  let options = [
    Option<"threads", "threads", "int64_t", /*default=*/"128",
           "Threads per block">,
    Option<"chunkExchangePads", "chunk-exchange-pads", "bool",
           /*default=*/"true",
           "The gradient's chunk grid: rows of its layout conversions' "
           "shared regions padded by what bank conflicts counted on the host "
           "say (0 to 8 elements), not by one (the default; false: by one)">,
    Option<"chunkExchangeSwizzle", "chunk-exchange-swizzle", "bool",
           /*default=*/"false",
           "The gradient's chunk grid, with chunk-exchange-pads: unpadded "
           "rows with their columns permuted per row (j ^ ((i >> s) m) mod "
           "cols) compete with the paddings, taken where they count fewer "
           "bank conflicts">,
    Option<"chunkStageSeeds", "chunk-stage-seeds", "bool",
           /*default=*/"true",
           "The gradient's chunk grid: its seeds copied by cp.async into "
           "shared memory when the program starts (in flight while the "
           "forward is recomputed), read from there (the default; false: "
           "loaded from global memory at their use)">,
    Option<"chunkTf32", "chunk-tf32", "bool", /*default=*/"true",
           "The gradient's chunk grid: its products one TF32 product a step "
           "where the call's inputs are 16-bit, but for the adjoint of the "
           "factored decayed pairs (false: 3xTF32 throughout)">,
    Option<"intraBlocks", "intra-blocks", "int64_t", /*default=*/"0",
           "NVIDIA: resident blocks per SM the forward intra-chunk kernel's "
           "register budget is cut for (.maxnreg = 65536 / (threads x "
           "blocks)); 0: four for 16-bit kernels, three for fp32 ones">,
  ];
}

//===----------------------------------------------------------------------===//
// GPU: tile kernels (buffers)
//===----------------------------------------------------------------------===//

def KdaGpuTileMatmuls : Pass<"kda-gpu-tile-matmuls", "func::FuncOp"> {
  let summary = "Run tile matmuls on the target's matrix instructions "
                "(NVIDIA mma.sync, AMD MFMA or WMMA)";
  let options = [
    Option<"threads", "threads", "int64_t", /*default=*/"128",
           "Threads per block">,
    Option<"instructions", "instructions", "std::string",
           /*default=*/"\"mma_sync\"",
           "mma_sync (NVIDIA), mfma (AMD CDNA) or wmma (AMD RDNA3)">,
  ];
}

def KdaGpuPrepareTiles : Pass<"kda-gpu-prepare-tiles", "func::FuncOp"> {
  let summary =
      "Copies as linalg.copy and reductions innermost, for GPU mapping";
  let description = [{
    Each tile primitive becomes one loop nest of one shape: an scf.parallel
    over its output elements with any reduction sequential inside, the shape
    kda-gpu-map-kernels spreads over threads.
  }];
}

def KdaNvvmFtzMath : Pass<"kda-nvvm-ftz-math", "gpu::GPUModuleOp"> {
  let summary = "NVIDIA: approximate exp and log as ex2 / lg2.approx.ftz";
  let description = [{
    After convert-gpu-to-nvvm: libdevice's __nv_fast_expf and __nv_fast_logf
    (math ops marked afn) become x * log2(e) then ex2.approx.ftz.f32, and
    lg2.approx.ftz.f32 then * ln(2), one MUFU instruction each where the
    denormal-preserving forms take three more. Results below 2^-126 flush to
    zero (lowering/nvidia/NvvmFtzMath.cpp says why that is safe).
  }];
}

def KdaGpuMapKernels : Pass<"kda-gpu-map-kernels", "ModuleOp"> {
  let summary = "Map bufferized kda kernels to GPU kernels (programs -> "
                "blocks, tile primitives -> threads, tiles -> shared memory)";
  let options = [
    Option<"threads", "threads", "int64_t", /*default=*/"128",
           "Threads per block">,
  ];
}

#endif // KDA_LOWERING_PASSES_TD
