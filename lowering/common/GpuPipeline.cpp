//===- GpuPipeline.cpp - kda -> NVVM / ROCDL -> cubin / HSACO -------------===//
//
// The GPU pipelines. The first half (kda -> tiles -> buffers) is the CPU's;
// what differs per target is small: the matrix instruction of the tile
// matmul (GpuTileMatmuls.cpp), the warp size, and upstream's NVVM or ROCDL
// lowering and serialization (ptxas from the CUDA toolkit; ld.lld for
// HSACO). The mapping to blocks, threads and shared memory
// (GpuMapKernels.cpp) is the same for both vendors.
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"
#include "lowering/Passes.h"
#include "lowering/Strategy.h"

#include "lowering/Bufferization.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;
using mlir::kda::GpuTarget;

void mlir::kda::addUpstream(OpPassManager &pm, StringRef pipeline) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  if (failed(parsePassPipeline(pipeline, pm, os)))
    llvm::report_fatal_error(llvm::Twine("kda: bad upstream pipeline '") +
                             pipeline + "': " + errors);
}

namespace {
using mlir::kda::addUpstream;

/// The canonicalizer, except that program grids keep their dimensions of
/// extent 1 (one sequence, one head, one chunk): a grid folded away
/// entirely would leave a kernel without the grid its mapping needs, and the
/// positions of a grid's coordinates are what the kernels read.
std::unique_ptr<Pass> createGridPreservingCanonicalizer() {
  return createCanonicalizerPass(
      GreedyRewriteConfig(),
      /*disabledPatterns=*/{"(anonymous namespace)::"
                            "ForallOpSingleOrZeroIterationDimsFolder"});
}

} // namespace

void mlir::kda::buildGpuPipeline(OpPassManager &pm, const GpuTarget &target,
                                 const GpuPipelineOptions &options) {
  // kda -> tiles, one destination-style kernel function per configuration;
  // elementwise work between kda ops gets kernels of its own.
  pm.nest<func::FuncOp>().addPass(createKdaFuseWindowMix());
  pm.nest<func::FuncOp>().addPass(createKdaDecompose());
  pm.nest<func::FuncOp>().addPass(createKdaFusePrologue());
  KdaOutlineKernelsOptions outline;
  outline.destinationStyle = true;
  pm.addPass(createKdaOutlineKernels(outline));
  KdaGpuOutlineElementwiseOptions elementwise;
  elementwise.tileElements = options.elementwiseTileElements;
  pm.addPass(createKdaGpuOutlineElementwise(elementwise));
  KdaTileChunksOptions tiling;
  tiling.chunk = options.chunk > 0 ? options.chunk : target.defaultChunk;
  // No sub-chunks in the recurrence (chunk 1); otherwise kda-tile-chunks
  // checks the pair instead of clamping a sub-chunk larger than the chunk.
  tiling.subChunk = tiling.chunk > 1 ? options.subChunk : tiling.chunk;
  tiling.vBlock = options.vBlock > 0 ? options.vBlock : target.defaultVBlock;
  tiling.segments = options.segments;
  tiling.vBlockF32 =
      options.vBlock > 0 ? options.vBlock : target.defaultVBlockF32;
  tiling.vBlockGradient =
      options.vBlock > 0 ? options.vBlock : target.gradientVBlock;
  tiling.schedule = options.schedule;
  // A GPU program has no buffer of its own for a sequence's states: the
  // gradient reads the forward's (chunk_states).
  tiling.gradientStates = "required";
  // [C, K] tiles in shared memory and registers: past 1024 nothing fits a
  // block on any of the five chips (and the lowering took minutes first).
  tiling.maxHeadDim = 1024;
  // Boundary states into pool slots are written by the register state
  // kernel (mma.sync, MFMA or WMMA); a copy loop after the grid would be a
  // second grid in the kernel.
  tiling.boundarySlots = options.tensorCores && options.stateRegisters &&
                                 options.schedule == "chunk-parallel"
                             ? "kernel"
                             : "none";
  // The lane kernels run a chunk of 16-token sub-chunks as sub-chunk steps
  // (their intra-chunk program is one sub-chunk): chunk_size=32 or 64, FLA's
  // habit, takes them instead of the tile lowering (on AMD too).
  tiling.subChunkSteps = options.tensorCores && options.intraRegisters &&
                         options.stateRegisters &&
                         options.schedule == "chunk-parallel";
  tiling.gradientDStatesBf16 = options.reverseDStatesBf16;
  tiling.gradientGateOutside = options.chunkGateOutside;
  pm.nest<func::FuncOp>().addPass(createKdaTileChunks(tiling));
  pm.nest<func::FuncOp>().addPass(createGpuFuseTilesPass());
  pm.addPass(createGridPreservingCanonicalizer());
  pm.addPass(createCSEPass());
  // Multi-grid schedules: one kernel per grid, the order a bundle entry.
  pm.addPass(createGpuSplitSchedulePass());
  // A function of several kda ops (a hybrid layer): one more entry.
  // (Its overlap schedule's progress: NVIDIA's register kernels only; the
  // HIP runtime runs the window after the state pass anyway.)
  pm.addPass(createGpuLayerEntryPass(
      options.strategyRemarks, target.vendor == GpuTarget::Vendor::Nvidia &&
                                   !options.emulateWmma));
  pm.nest<func::FuncOp>().addPass(createGpuBindDestinationsPass());
  // Lanes or tiles, for every kernel, in one place (Strategy.h): the register
  // passes below write what it gives them.
  StrategyOptions strategy;
  strategy.nvidia = target.vendor == GpuTarget::Vendor::Nvidia;
  strategy.tensorCores = options.tensorCores;
  strategy.intraLanes = options.intraRegisters;
  strategy.stateLanes = options.stateRegisters;
  strategy.stepLanes = options.stepRegisters;
  strategy.chunkLanes = options.chunkRegisters;
  strategy.decodeLanes = options.decodeRegisters;
  strategy.windowLanes = options.windowRegisters;
  strategy.stateStages = options.stateStages;
  strategy.threads = options.threads;
  strategy.warpSize = target.warpSize;
  strategy.instructions = target.matrixInstructions;
  strategy.sharedMemory = target.sharedMemoryPerBlock;
  if (options.emulateWmma && target.vendor == GpuTarget::Vendor::Nvidia)
    strategy.instructions = "wmma_emulated";
  strategy.wgmma = target.wgmma;
  strategy.remarks = options.strategyRemarks;
  pm.addPass(createGpuSelectStrategyPass(strategy));

  // Tensors -> buffers; kernels write their argument buffers in place.
  addTileBufferization(pm);
  pm.addPass(bufferization::createDropEquivalentBufferResultsPass());
  // A program's results are written in place, then "inserted" where they
  // already are: CSE makes those copies copy a view onto itself, which the
  // canonicalizer drops (each would be a phase of the block and a round trip
  // through global memory).
  pm.addPass(createCSEPass());
  pm.addPass(createGridPreservingCanonicalizer());

  // Decode steps stream each state once, in registers (GpuDecodeRegisters.cpp).
  if (options.decodeRegisters)
    pm.nest<func::FuncOp>().addPass(createGpuDecodeRegistersPass(
        target.warpSize,
        target.vendor == GpuTarget::Vendor::Nvidia ? 128 : 0));
  // Window attention on register tiles: mma.sync / wgmma on NVIDIA, MFMA /
  // WMMA on AMD (GpuWindowRegisters.cpp).
  if (options.tensorCores && options.windowRegisters)
    pm.nest<func::FuncOp>().addPass(createGpuWindowRegistersPass());
  // The state pass of a chunk-parallel schedule keeps the state in the
  // matrix unit's accumulators (a kernel of its own, GpuStateRegisters.cpp:
  // mma.sync on NVIDIA, MFMA or WMMA on AMD).
  // The gradient's step program and reverse scan take measuring knobs
  // (kda-compile --step-v-block, --step-max-registers, --step-threads,
  // --step-prefetch, --step-scatter-sums, --step-vnew-first, --reverse-tf32,
  // --reverse-prefetch, --reverse-threads, --reverse-split-v; Passes.td says what each does).
  if (options.tensorCores && options.stateRegisters) {
    KdaGpuStateRegistersOptions state;
    state.threads = options.threads;
    // The step program's V columns a loop iteration: the flag's, else the
    // chip's (the grid's V block splits only the reverse scan there).
    state.stepVBlock = options.stepVBlock > 0 ? int64_t(options.stepVBlock)
                                              : target.gradientStepVBlock;
    state.stepMaxRegisters = options.stepMaxRegisters;
    state.stepPrefetch = options.stepPrefetch;
    state.stepThreads = options.stepThreads;
    state.stepScatterSums = options.stepScatterSums;
    state.stepTf32 = options.stepTf32;
    state.stepVNewFirst = options.stepVNewFirst;
    state.stepStages = options.stepStages;
    state.reversePrefetch = options.reversePrefetch;
    state.stateCopyRuns = options.stateCopyRuns;
    state.stateStagedOutput = options.stateStagedOutput;
    state.stateRotateStages = options.stateRotateStages;
    state.reverseThreads = options.reverseThreads;
    state.reverseTf32 = options.reverseTf32;
    state.reverseSplitV = options.reverseSplitV;
    state.reverseStageDO = options.reverseStageDO;
    pm.nest<func::FuncOp>().addPass(createKdaGpuStateRegisters(state));
  }
  // ... and its intra-chunk grid keeps its tiles in registers
  // (GpuIntraRegisters.cpp).
  if (options.tensorCores && options.intraRegisters)
    pm.nest<func::FuncOp>().addPass(
        createGpuIntraRegistersPass(options.threads, options.chunkTf32,
                                    options.chunkExchangePads,
                                    options.chunkStageSeeds,
                                    options.chunkExchangeSwizzle,
                                    options.intraBlocks));
  // kda-run --emulate runs the module from here (tools/kda-run/Emulator.h):
  // every kernel's program explicit, nothing of the target's yet.
  if (options.until == "lanes")
    return;
  // The target's tile primitives, then blocks / threads / shared memory.
  if (options.tensorCores)
    pm.nest<func::FuncOp>().addPass(
        createGpuTileMatmulsPass(options.threads, target.matrixInstructions));
  pm.nest<func::FuncOp>().addPass(createGpuPrepareTilesPass());
  addUpstream(pm, "func.func(convert-linalg-to-parallel-loops)");
  pm.addPass(createGpuMapKernelsPass(options.threads));
  addUpstream(pm, "gpu.module(scf-parallel-for-to-nested-fors)");
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  addUpstream(pm, "gpu.module(expand-strided-metadata,lower-affine,"
                  "convert-scf-to-cf)");

  // The vendor's lowering to its LLVM dialect and its toolkit
  // (lowering/nvidia/NvvmLowering.cpp, lowering/amd/RocdlLowering.cpp).
  std::string toolkit =
      target.vendor == GpuTarget::Vendor::Nvidia
          ? mlir::kda::addNvvmLowering(pm, target, options.toolkit)
          : mlir::kda::addRocdlLowering(pm, target, options.toolkit);
  addUpstream(pm, "reconcile-unrealized-casts");
  if (options.format != "none")
    addUpstream(pm, "gpu-module-to-binary{format=" +
                        std::string(options.format) + " toolkit=" + toolkit +
                        "}");
}

namespace {
/// Parses the options and builds the vendor's pipeline. An unknown chip (or
/// another vendor's) is reported through the pipeline parser's error
/// handler, so the tool prints a diagnostic and fails instead of aborting in
/// report_fatal_error with a stack dump.
template <GpuTarget::Vendor vendor>
LogicalResult buildForVendor(
    OpPassManager &pm, StringRef optionsText,
    function_ref<LogicalResult(const Twine &)> errorHandler) {
  mlir::kda::GpuPipelineOptions options;
  if (failed(options.parseFromString(optionsText)))
    return failure();
  bool nvidia = vendor == GpuTarget::Vendor::Nvidia;
  std::string chip = options.chip;
  if (chip.empty())
    chip = nvidia ? "sm_90a" : "gfx942";
  std::optional<GpuTarget> target = mlir::kda::gpuTargetForChip(chip);
  if (!target || target->vendor != vendor)
    return errorHandler(
        llvm::Twine(nvidia ? "kda-lower-to-nvvm" : "kda-lower-to-rocdl") +
        ": unsupported chip '" + chip + "' (expected " +
        mlir::kda::knownChips(vendor) + ")");
  // Threads per block: whole warps, within the hardware's 1024 (0 made
  // kernels of block [0, 1, 1]).
  int64_t threads = options.threads;
  if (threads < 1 || threads > 1024 || threads % target->warpSize != 0)
    return errorHandler(
        llvm::Twine(nvidia ? "kda-lower-to-nvvm" : "kda-lower-to-rocdl") +
        ": threads must be a positive multiple of the warp size (" +
        llvm::Twine(target->warpSize) + " on " + chip + "), at most 1024, "
        "found " + llvm::Twine(threads));
  if (!options.until.empty() && options.until != "lanes")
    return errorHandler(
        llvm::Twine(nvidia ? "kda-lower-to-nvvm" : "kda-lower-to-rocdl") +
        ": until must be empty or 'lanes', found '" + options.until + "'");
  mlir::kda::buildGpuPipeline(pm, *target, options);
  return success();
}

template <GpuTarget::Vendor vendor>
void registerForVendor(StringRef name, StringRef description) {
  registerPassPipeline(
      name, description, buildForVendor<vendor>,
      [](function_ref<void(const detail::PassOptions &)> printOptions) {
        printOptions(mlir::kda::GpuPipelineOptions());
      });
}
} // namespace

void mlir::kda::registerGpuPipelines() {
  registerKdaLoweringPasses(); // lowering/Passes.td (a second call is harmless)
  registerForVendor<GpuTarget::Vendor::Nvidia>(
      "kda-lower-to-nvvm",
      "Lower kda ops to NVIDIA GPU kernels (chip=sm_80|sm_90a; tensor-core "
      "tile matmuls, shared-memory tiles) and serialize them (PTX or cubin)");
  registerForVendor<GpuTarget::Vendor::Amd>(
      "kda-lower-to-rocdl",
      "Lower kda ops to AMD GPU kernels (chip=gfx90a|gfx942|gfx1100; MFMA or "
      "WMMA tile matmuls, LDS tiles) and serialize them (HSACO)");
}
