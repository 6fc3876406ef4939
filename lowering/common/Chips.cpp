//===- Chips.cpp - the GPU chips kda compiles for, in one table ------------===//

#include "lowering/Chips.h"

#include "llvm/BinaryFormat/ELF.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir::kda;

namespace {
using V = GpuTarget::Vendor;

// Shared memory per block: sm_80 227 - 64 = 163 KB and sm_90a 227 KB
// (cudaDevAttrMaxSharedMemoryPerBlockOptin); the AMD chips' 64 KB of LDS.
const GpuTarget kChips[] = {
    {V::Nvidia, "sm_80", 32, "mma_sync", 16, 16, 32, 163 * 1024, 255, 0, false,
     16, 256},
    {V::Nvidia, "sm_90a", 32, "mma_sync", 16, 16, 32, 227 * 1024, 255, 0, true,
     32, 256, 16},
    {V::Amd, "gfx90a", 64, "mfma", 16, 16, 16, 64 * 1024, 512,
     llvm::ELF::EF_AMDGPU_MACH_AMDGCN_GFX90A},
    {V::Amd, "gfx942", 64, "mfma", 16, 16, 16, 64 * 1024, 512,
     llvm::ELF::EF_AMDGPU_MACH_AMDGCN_GFX942},
    {V::Amd, "gfx1100", 32, "wmma", 16, 16, 16, 64 * 1024, 256,
     llvm::ELF::EF_AMDGPU_MACH_AMDGCN_GFX1100},
};
} // namespace

llvm::ArrayRef<GpuTarget> mlir::kda::gpuChips() { return kChips; }

std::optional<GpuTarget> mlir::kda::gpuTargetForChip(llvm::StringRef chip) {
  for (const GpuTarget &t : kChips)
    if (t.chip == chip)
      return t;
  return std::nullopt;
}

std::string mlir::kda::knownChips(std::optional<GpuTarget::Vendor> vendor) {
  llvm::SmallVector<llvm::StringRef> names;
  for (const GpuTarget &t : kChips)
    if (!vendor || t.vendor == *vendor)
      names.push_back(t.chip);
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0)
      s += i + 1 == names.size() ? " or " : ", ";
    s += names[i].str();
  }
  return s;
}

void mlir::kda::printChipTable(llvm::raw_ostream &os) {
  llvm::json::Array chips;
  for (const GpuTarget &t : kChips) {
    llvm::json::Object row{
        {"chip", t.chip},
        {"vendor", t.vendorName()},
        {"warp_size", t.warpSize},
        {"matrix_instructions", t.matrixInstructions},
        {"shared_memory_per_block", t.sharedMemoryPerBlock},
        {"registers_per_lane", t.registersPerLane},
        {"wgmma", t.wgmma},
        {"default_tile",
         llvm::json::Object{{"chunk", t.defaultChunk},
                            {"v_block", t.defaultVBlock},
                            {"v_block_f32", t.defaultVBlockF32},
                            {"v_block_gradient", t.gradientVBlock},
                            {"threads_gradient", t.gradientThreads},
                            {"v_block_gradient_step", t.gradientStepVBlock}}}};
    if (!t.isNvidia())
      row["amd_machine"] = int64_t(t.amdMachine);
    chips.push_back(std::move(row));
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                   {"chips", std::move(chips)}}))
     << "\n";
}
