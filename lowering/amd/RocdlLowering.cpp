//===- RocdlLowering.cpp - the AMD end of the GPU pipeline -----------------===//
//
// After the shared GPU pipeline (lowering/common/GpuPipeline.cpp): the
// kernels' gpu, amdgpu and math ops to ROCDL, the target attached for
// serialization to HSACO (linked by <toolkit>/llvm/bin/ld.lld).
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"

#include "mlir/Pass/PassManager.h"

#include <cstdlib>

using namespace mlir;

std::string mlir::kda::addRocdlLowering(OpPassManager &pm,
                                        const GpuTarget &target,
                                        llvm::StringRef toolkit) {
  // Math lowers to LLVM intrinsics (no device library needed); the wave
  // size follows the chip.
  const std::string &chip = target.chip;
  std::string wave64 = target.warpSize == 64 ? "true" : "false";
  addUpstream(pm, "rocdl-attach-target{chip=" + chip + " O=3 wave64=" +
                      wave64 + "}");
  // exp2 (the window softmax's) as exp: convert-gpu-to-rocdl takes
  // llvm.intr.exp but not llvm.intr.exp2 without the device library.
  addUpstream(pm, "gpu.module(math-expand-ops{ops=exp2},"
                  "convert-amdgpu-to-rocdl{chipset=" + chip +
                      "},convert-math-to-llvm,convert-gpu-to-rocdl{chipset=" +
                      chip + " index-bitwidth=64},canonicalize,cse)");
  if (!toolkit.empty())
    return toolkit.str();
  // ROCm's layout; kda's build makes such a folder around Debian's ld.lld.
  if (const char *root = std::getenv("ROCM_PATH"))
    return root;
  return KDA_ROCM_TOOLKIT_DIR;
}
