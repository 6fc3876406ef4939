//===- CpuPipeline.h - kda on the CPU: tiles -> loops -> LLVM ---*- C++ -*-===//

#ifndef KDA_LOWERING_CPUPIPELINE_H
#define KDA_LOWERING_CPUPIPELINE_H

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace mlir::kda {

struct CpuPipelineOptions : public PassPipelineOptions<CpuPipelineOptions> {
  Option<int64_t> chunk{*this, "chunk",
                        llvm::cl::desc("tokens per chunk for ops without "
                                       "#kda.tile (1: token recurrence)"),
                        llvm::cl::init(64)};
  Option<int64_t> subChunk{*this, "sub-chunk",
                           llvm::cl::desc("tokens per sub-chunk for ops "
                                          "without #kda.tile"),
                           llvm::cl::init(16)};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("kda-tile-chunks' schedule: sequential or "
                     "chunk-parallel (the GPU's, run on the CPU)"),
      llvm::cl::init("sequential")};
  Option<std::string> stateStep{
      *this, "state-step",
      llvm::cl::desc("chunk-parallel only: what one step of the state pass "
                     "takes: 'chunk' (the whole-chunk algorithm), "
                     "'sub-chunk' (a chunk of several 16-token sub-chunks as "
                     "that many steps, the GPU lane kernels' form) or 'wide' "
                     "(the chunk's sub-chunks coupled in one step)"),
      llvm::cl::init("chunk")};
  Option<int64_t> segments{
      *this, "segments",
      llvm::cl::desc("chunk-parallel only: sequence-parallel segments per "
                     "sequence of kda.gated_delta ops without their own "
                     "#kda.tile segments (1: none)"),
      llvm::cl::init(1)};
  Option<bool> parallel{*this, "parallel",
                        llvm::cl::desc("run (sequence, head) programs on "
                                       "OpenMP threads"),
                        llvm::cl::init(true)};
};

/// kda (tensor level) -> chunkwise tiles -> buffers -> loops (OpenMP over
/// programs) -> LLVM dialect. Functions keep memref arguments; tensor
/// results become trailing out-parameters.
void buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options);

/// Registers `kda-lower-to-cpu` for kda-opt and the other tools.
void registerCpuPipeline();

} // namespace mlir::kda

#endif // KDA_LOWERING_CPUPIPELINE_H
