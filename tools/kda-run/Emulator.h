//===- Emulator.h - the GPU pipeline's lane kernels, run on the CPU -*- C++ -*-===//
//
// kda-run --emulate=CHIP: the GPU pipeline (lowering/GpuPipeline.h) up to and
// including its register passes (`until=lanes`), then this interpreter runs
// the module's entry: the host function's allocations and calls, each
// kernel's grid (scf.forall) program by program, and in every program of a
// lane kernel (kda.explicit_threads) all its threads in lock step, an
// instruction at a time: mma.sync and shuffles read the other lanes of the
// warp at the same instruction (AMD's MFMA and WMMA the wave's), cp.async
// copies land at the wait that covers their group (and are checked for
// races at their issue too: they may land any time between), shared memory
// is one buffer a program. Tile programs run as
// one thread. So the hand-derived parts of the GPU kernels (layouts,
// fragments, index arithmetic, staging, the workspaces between grids) run,
// and are checked against the float64 oracle, on a machine with no GPU; what
// comes after (kda-gpu-tile-matmuls, the NVVM conversion, ptxas) is the GPU
// suite's. Values are doubles rounded to their element type after every
// instruction (tf32 operands truncated as the hardware does). Lock step is
// one valid order of the threads; races on shared memory are checked as
// compute-sanitizer's racecheck does: an element another thread wrote (or
// read, for a write) since the last barrier (a warp's sync for threads of
// one warp, a wavefront fence on AMD) is a hazard, named with the op.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_TOOLS_KDA_RUN_EMULATOR_H
#define KDA_TOOLS_KDA_RUN_EMULATOR_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kda::emu {

/// Who touched a shared memory's elements last, for the race check: the
/// thread and the barrier / warp-sync epochs it did so in.
struct AccessLog {
  std::vector<int32_t> writer, reader;
  std::vector<int64_t> writeBlock, writeWarp, readBlock, readWarp;
  std::vector<mlir::Operation *> writeOp, readOp;
};

/// Memory: values as doubles, rounded to `element` when stored. A block's
/// shared memory has an access log and a byte address in the block's shared
/// window (what a kernel computes addresses from: wgmma's descriptors).
struct Memory {
  mlir::Type element;
  std::vector<double> data;
  std::unique_ptr<AccessLog> log;
  int64_t sharedAddress = -1;
};

/// A memref value: a strided view of a Memory.
struct View {
  Memory *memory = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
};

/// For the race check's own test (kda-run --inject-fault=warp-sync): warp
/// syncs and wavefront fences order nothing, so kernels that rely on them
/// must report a race.
extern bool ignoreWarpSyncs;
/// For the wgmma check's own test (kda-run --inject-fault=wgmma-wait): each
/// wgmma.wait_group leaves one more committed group in flight, so kernels
/// that read their products after it must report it.
extern bool shortWgmmaWaits;

/// What ran: kernels, programs and lane instructions.
struct Stats {
  int64_t kernels = 0, programs = 0, laneInstructions = 0;
};

/// Runs `entry` (a function of the module after the GPU pipeline's register
/// passes) on `args` (one view per argument, contiguous); its results' views
/// go to `results`. Lane kernels without a block size of their own
/// (kda.block_threads) run `threads` threads, in warps (waves) of `warpSize`
/// lanes. Returns an error message, empty on success. Memories the run
/// allocates live as long as `owner`.
std::string run(mlir::func::FuncOp entry, int64_t threads, int64_t warpSize,
                const std::vector<View> &args, std::vector<View> &results,
                std::vector<std::unique_ptr<Memory>> &owner, Stats &stats);

} // namespace kda::emu

#endif // KDA_TOOLS_KDA_RUN_EMULATOR_H
