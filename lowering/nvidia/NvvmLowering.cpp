//===- NvvmLowering.cpp - the NVIDIA end of the GPU pipeline ---------------===//
//
// After the shared GPU pipeline (lowering/common/GpuPipeline.cpp): the
// kernels' gpu, nvgpu and arith ops to NVVM, the target attached for
// serialization to PTX and cubin (ptxas from the CUDA toolkit).
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"

#include <cstdlib>

using namespace mlir;

std::string mlir::kda::addNvvmLowering(OpPassManager &pm,
                                       const GpuTarget &target,
                                       llvm::StringRef toolkit) {
  // Shared-memory addresses in 32 bits (LLVM's NVPTX option; a block's
  // shared memory is at most 228 KB): the lane kernels' staging copies and
  // fragment reads compute their addresses every chunk step, and the state
  // kernel's step is issue-bound (ncu: 1.76 cycles per issued instruction
  // per warp). 1 to 3 % of the forward on the H200 (bench/RESULTS.md,
  // twenty-seventh session). Set once; a command line that names it wins.
  auto &options = llvm::cl::getRegisteredOptions();
  if (auto it = options.find("nvptx-short-ptr");
      it != options.end() && it->second->getNumOccurrences() == 0)
    (void)it->second->addOccurrence(0, "nvptx-short-ptr", "true");
  // sm_90a needs PTX 8.0 (CUDA 12+ ptxas reads it for sm_80 as well).
  addUpstream(pm, "nvvm-attach-target{chip=" + target.chip +
                      " features=+ptx80 O=3}");
  // kda-nvvm-ftz-math: the approximate exp and log as one MUFU instruction
  // each (NvvmFtzMath.cpp).
  addUpstream(pm, "gpu.module(convert-nvgpu-to-nvvm,convert-gpu-to-nvvm{"
                  "index-bitwidth=64},kda-nvvm-ftz-math,canonicalize,cse)");
  if (!toolkit.empty())
    return toolkit.str();
  if (const char *root = std::getenv("CUDA_ROOT"))
    return root;
  return "/usr/local/cuda";
}
