//===- CpuPipeline.cpp - kda on the CPU: tiles -> loops -> LLVM -----------===//
//
// The CPU is a target like the GPUs: it receives the same chunkwise tile IR
// from kda-tile-chunks and implements the tile primitives with loops that
// LLVM vectorizes (matmuls iterate (i, k, j) so the innermost loop is over
// contiguous output columns), while programs (sequence, head) become an
// OpenMP parallel loop.
//
//===----------------------------------------------------------------------===//

#include "lowering/CpuPipeline.h"

#include "lowering/Bufferization.h"
#include "passes/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include "lowering/Passes.h"

using namespace mlir;

void mlir::kda::buildCpuPipeline(OpPassManager &pm,
                                 const CpuPipelineOptions &options) {
  // kda -> target-independent tiles, one kernel function per configuration.
  pm.nest<func::FuncOp>().addPass(createKdaFuseWindowMix());
  pm.nest<func::FuncOp>().addPass(createKdaDecompose());
  pm.nest<func::FuncOp>().addPass(createKdaFusePrologue());
  pm.addPass(createKdaOutlineKernels());
  OpPassManager &fpm = pm.nest<func::FuncOp>();
  KdaTileChunksOptions tiling;
  tiling.chunk = options.chunk;
  // The recurrence (chunk 1) has no sub-chunks; otherwise kda-tile-chunks
  // checks the pair (a sub-chunk larger than the chunk is an error, not
  // clamped).
  tiling.subChunk = options.chunk > 1 ? options.subChunk : options.chunk;
  tiling.schedule = options.schedule;
  tiling.subChunkSteps = options.stateStep != "chunk";
  tiling.wideSteps = options.stateStep == "wide";
  tiling.segments = options.segments;
  fpm.addPass(createKdaTileChunks(tiling));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // Tensors -> buffers. Loop-carried tiles are new values each chunk, hence
  // allow-return-allocs-from-loops; deallocation frees every tile buffer.
  addTileBufferization(pm);
  // Results become caller-provided out-parameters (callers own every buffer).
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  bufferization::BufferDeallocationPipelineOptions dealloc;
  bufferization::buildBufferDeallocationPipeline(pm, dealloc);

  // Tiles -> loops; programs -> OpenMP.
  pm.nest<func::FuncOp>().addPass(createConvertLinalgToLoopsPass());
  pm.nest<func::FuncOp>().addPass(createKdaCpuSequentialNestedGrids());
  pm.addPass(createForallToParallelLoopPass());
  if (options.parallel)
    pm.addPass(createConvertSCFToOpenMPPass());
  pm.addPass(createCanonicalizerPass());

  // -> LLVM. alloca_scope regions from the OpenMP conversion must be lowered
  // (with memrefs) before scf -> cf splits them into several blocks.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::kda::registerCpuPipeline() {
  registerKdaLoweringPasses(); // lowering/Passes.td (a second call is harmless)
  PassPipelineRegistration<CpuPipelineOptions>(
      "kda-lower-to-cpu",
      "Lower kda ops to the LLVM dialect for the CPU (chunkwise tiles, "
      "OpenMP over programs)",
      buildCpuPipeline);
}
