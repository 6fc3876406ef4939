//===- GpuPipeline.h - kda on GPUs ------------------------------*- C++ -*-===//
//
// The GPU pipelines: the chunkwise tile IR mapped to blocks, threads and
// shared memory (GpuMapping.cpp), tile matmuls on tensor cores, then NVVM and
// a cubin per kernel (kda-lower-to-nvvm).
//
//===----------------------------------------------------------------------===//

#ifndef KDA_LOWERING_GPUPIPELINE_H
#define KDA_LOWERING_GPUPIPELINE_H

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::kda {

std::unique_ptr<Pass> createGpuBindDestinationsPass();
std::unique_ptr<Pass> createGpuPrepareTilesPass();
std::unique_ptr<Pass> createGpuOutlineElementwisePass();
void registerGpuOutlineElementwisePass();
std::unique_ptr<Pass> createGpuTileMatmulsPass(int64_t threads);
void registerGpuTileMatmulsPass();

/// Marks a loop whose iterations a target primitive already spread over the
/// block's threads (warps of a tile matmul): kda-gpu-map-kernels fences it
/// with barriers like any primitive and leaves its body alone.
inline constexpr llvm::StringLiteral kWarpDistributedAttr =
    "kda.warp_distributed";
std::unique_ptr<Pass> createGpuMapKernelsPass(int64_t threads);
void registerGpuMappingPasses();

struct NvvmPipelineOptions : public PassPipelineOptions<NvvmPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("NVIDIA target: sm_80 or sm_90a"),
      llvm::cl::init("sm_90a")};
  PassOptions::Option<int64_t> chunk{
      *this, "chunk", llvm::cl::desc("Chunk size for ops without #kda.tile"),
      llvm::cl::init(32)};
  PassOptions::Option<int64_t> subChunk{
      *this, "sub-chunk", llvm::cl::desc("Sub-chunk size"), llvm::cl::init(16)};
  PassOptions::Option<int64_t> vBlock{
      *this, "v-block",
      llvm::cl::desc("Columns of V per program for ops without #kda.tile"),
      llvm::cl::init(32)};
  PassOptions::Option<int64_t> threads{
      *this, "threads", llvm::cl::desc("Threads per block"),
      llvm::cl::init(128)};
  PassOptions::Option<bool> tensorCores{
      *this, "tensor-cores",
      llvm::cl::desc("Tile matmuls on tensor cores (mma.sync)"),
      llvm::cl::init(true)};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Binary format: isa (PTX), bin (cubin), or none (stop "
                     "at the NVVM dialect)"),
      llvm::cl::init("bin")};
  PassOptions::Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit (ptxas, libdevice); default $CUDA_ROOT or "
                     "/usr/local/cuda"),
      llvm::cl::init("")};
};

/// kda ops -> gpu.module kernels for an NVIDIA chip, plus a `kda.launches`
/// module attribute describing each kernel's parameters and launch geometry.
void buildNvvmPipeline(OpPassManager &pm, const NvvmPipelineOptions &options);
void registerGpuPipelines();

} // namespace mlir::kda

#endif // KDA_LOWERING_GPUPIPELINE_H
