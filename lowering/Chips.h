//===- Chips.h - the GPU chips kda compiles for, in one table -*- C++ -*-===//
//
// Everything kda decides from a chip reads this table: its vendor and warp
// size, the matrix instructions of the tile primitives, the shared memory a
// block may use and the registers a lane may use (kda-compile refuses
// kernels past them), the default tiles, and, for AMD, the machine value a
// code object of the chip carries. `kda-compile --print-chips` prints it as
// JSON, so that the Python package (python/kda/chips.py) and the tests check
// their copies against it instead of restating it
// (test/tools/print-chips.test).
//
//===----------------------------------------------------------------------===//

#ifndef KDA_LOWERING_CHIPS_H
#define KDA_LOWERING_CHIPS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::kda {

/// The target of a GPU pipeline: one row of the chip table.
struct GpuTarget {
  enum class Vendor { Nvidia, Amd } vendor;
  std::string chip;
  int64_t warpSize;
  std::string matrixInstructions; // kda-gpu-tile-matmuls' instructions
  // Default tiles at K = V = 128: C = 16 with V blocks of 16 on both
  // vendors. On the H200 the chunk-parallel state pass is latency-bound, and
  // V blocks of 16 (256 programs at H = 32) beat 8, 32 and 64 over BENCH.md's
  // cases (bench/RESULTS.md, 2026-12-01); on AMD they also fit 64 KB of LDS.
  // fp32 inputs (f32 workspaces, the derived state program split by K) take
  // V blocks of 32 on NVIDIA: 0.97, 0.88 and 0.96 of the per-lane split-K
  // program's time at T = 8192 H = 32, 8 x 4096 H = 32 and T = 8192 H = 96,
  // where V blocks of 16 took 1.12 and 128 five times as long
  // (bench/RESULTS.md, seventeenth session).
  int64_t defaultChunk, defaultVBlock, defaultVBlockF32;
  /// Bytes of shared memory (LDS) one block may use: the opt-in maximum on
  /// NVIDIA (the runtime raises the limit for kernels past 48 KB).
  int64_t sharedMemoryPerBlock;
  /// 32-bit registers one lane may use: NVIDIA's 255; AMD's vector
  /// registers (gfx90a and gfx942 count VGPRs and AGPRs together).
  int64_t registersPerLane;
  /// AMD: the EF_AMDGPU_MACH value in a code object's e_flags (0 on NVIDIA).
  unsigned amdMachine;
  /// Hopper's warpgroup products (wgmma.mma_async, sm_90a only): lane
  /// kernels whose B operands stay in shared memory take them.
  bool wgmma = false;
  /// The derived gradient (kda.gated_delta_grad): V block and block threads
  /// of its tile-lowered kernels. The V block splits the reverse scan's
  /// programs and is the chunk-parallel adjoint's step over V. At K = V =
  /// 128 on the H200 (T = 8192 H = 32, bench/RESULTS.md, twenty-fourth
  /// session), 256 threads: V blocks of 16 took the scan 5.6 ms and the
  /// adjoint 19.6 ms, 32 7.4 and 20.5, 64 10.6 and 18.9. (Before the
  /// schedule was split, one program per V block walked the chunks: 32 and
  /// 256 threads were best there, 43 ms in all.) AMD keeps 16 at 128
  /// threads (the tile programs do not fit its 64 KB of LDS yet).
  /// On lanes (NVIDIA) the V block splits only the reverse scan; the step
  /// program loops over V in `gradientStepVBlock` columns (0: the V
  /// block). sm_90a: the reverse scan on V blocks of 32 (its dO rows staged
  /// with its workspaces) and the step on 16: fwdbwd T = 8192 H = 32 6.71
  /// -> 6.53 ms, 8 x 4096 27.88 -> 27.29 on the H100, where the reverse on
  /// 32 with its dO loaded at use took 6.98 and 27.26, on 64 7.29 and
  /// 26.65 (bench/RESULTS.md, thirty-fifth session).
  int64_t gradientVBlock = 16, gradientThreads = 128, gradientStepVBlock = 0;

  bool isNvidia() const { return vendor == Vendor::Nvidia; }
  const char *vendorName() const { return isNvidia() ? "nvidia" : "amd"; }
};

/// Every chip kda compiles for, NVIDIA's first.
llvm::ArrayRef<GpuTarget> gpuChips();
/// The target for `chip`, or nullopt for an unknown chip.
std::optional<GpuTarget> gpuTargetForChip(llvm::StringRef chip);
/// "sm_80, sm_90a, gfx90a, gfx942 or gfx1100" (only one vendor's when
/// `vendor` is given), for messages.
std::string knownChips(std::optional<GpuTarget::Vendor> vendor = std::nullopt);
/// The table as JSON: {"chips": [{"chip": ..., "vendor": ..., ...}]}.
void printChipTable(llvm::raw_ostream &os);

} // namespace mlir::kda

#endif // KDA_LOWERING_CHIPS_H
