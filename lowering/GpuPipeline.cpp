//===- GpuPipeline.cpp - kda -> NVVM -> cubin -----------------------------===//
//
// The NVIDIA pipeline. The first half (kda -> tiles -> buffers) is the CPU's;
// the target-specific part is small: tile matmuls on tensor cores, the
// mapping to blocks/threads/shared memory (GpuMapping.cpp), and upstream's
// NVVM lowering and serialization (ptxas from the CUDA toolkit).
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"

#include "passes/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

namespace {

/// Adds an upstream pipeline given in textual form (the passes are
/// registered by every kda tool). A typo here is a programming error.
void addUpstream(OpPassManager &pm, StringRef pipeline) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  if (failed(parsePassPipeline(pipeline, pm, os)))
    llvm::report_fatal_error(llvm::Twine("kda: bad upstream pipeline '") +
                             pipeline + "': " + errors);
}

std::string defaultToolkit() {
  if (const char *root = std::getenv("CUDA_ROOT"))
    return root;
  return "/usr/local/cuda";
}

} // namespace

void mlir::kda::buildNvvmPipeline(OpPassManager &pm,
                                  const NvvmPipelineOptions &options) {
  // kda -> tiles, one destination-style kernel function per configuration.
  pm.nest<func::FuncOp>().addPass(createKdaDecompose());
  pm.nest<func::FuncOp>().addPass(createKdaFusePrologue());
  KdaOutlineKernelsOptions outline;
  outline.destinationStyle = true;
  pm.addPass(createKdaOutlineKernels(outline));
  pm.addPass(createGpuOutlineElementwisePass());
  KdaTileChunksOptions tiling;
  tiling.chunk = options.chunk;
  tiling.subChunk =
      std::min<int64_t>(options.subChunk, std::max<int64_t>(options.chunk, 1));
  tiling.vBlock = options.vBlock;
  pm.nest<func::FuncOp>().addPass(createKdaTileChunks(tiling));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.nest<func::FuncOp>().addPass(createGpuBindDestinationsPass());

  // Tensors -> buffers; kernels write their argument buffers in place.
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  bufferize.allowReturnAllocsFromLoops = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  pm.addPass(bufferization::createDropEquivalentBufferResultsPass());
  pm.addPass(createCanonicalizerPass());

  // Target tile primitives, then blocks / threads / shared memory.
  if (options.tensorCores)
    pm.nest<func::FuncOp>().addPass(createGpuTileMatmulsPass(options.threads));
  pm.nest<func::FuncOp>().addPass(createGpuPrepareTilesPass());
  addUpstream(pm, "func.func(convert-linalg-to-parallel-loops)");
  pm.addPass(createGpuMapKernelsPass(options.threads));
  addUpstream(pm, "gpu.module(scf-parallel-for-to-nested-fors)");
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // -> NVVM -> PTX / cubin.
  std::string chip = options.chip;
  // sm_90a's wgmma/setmaxnreg need PTX 8.0; sm_80 is fine with 7.0 but 8.0
  // is what CUDA 12+ ptxas reads for both.
  std::string attach = "nvvm-attach-target{chip=" + chip +
                       " features=+ptx80 O=3}";
  addUpstream(pm, "gpu.module(expand-strided-metadata,lower-affine,"
                  "convert-scf-to-cf)");
  addUpstream(pm, attach);
  addUpstream(pm, "gpu.module(convert-nvgpu-to-nvvm,convert-gpu-to-nvvm{"
                  "index-bitwidth=64},canonicalize,cse)");
  addUpstream(pm, "reconcile-unrealized-casts");
  if (options.format != "none") {
    std::string toolkit =
        options.toolkit.empty() ? defaultToolkit() : std::string(options.toolkit);
    addUpstream(pm, "gpu-module-to-binary{format=" +
                        std::string(options.format) + " toolkit=" + toolkit +
                        "}");
  }
}

void mlir::kda::registerGpuPipelines() {
  registerGpuMappingPasses();
  registerGpuTileMatmulsPass();
  registerGpuOutlineElementwisePass();
  PassPipelineRegistration<NvvmPipelineOptions>(
      "kda-lower-to-nvvm",
      "Lower kda ops to NVIDIA GPU kernels (tensor-core tile matmuls, "
      "shared-memory tiles) and serialize them (PTX or cubin)",
      buildNvvmPipeline);
}
