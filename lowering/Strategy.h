//===- Strategy.h - how each GPU kernel is written -------------*- C++ -*-===//
//
// Every GPU kernel of a kda op is written one of two ways:
//   lanes  the register kernels (GpuIntraRegisters, GpuStateRegisters,
//          GpuDecodeRegisters, GpuWindowRegisters: an algorithm of passes/ run on
//          LaneTileBuilder tiles): tiles in registers in the matrix instruction's
//          layout, shared memory only where warps exchange data; the fast path;
//   tiles  the shared-memory tile lowering (GpuTileMatmuls + GpuMapKernels): every
//          tile primitive a phase of the block fenced by barriers; correct for
//          every configuration, several times slower.
// kda-gpu-select-strategy (GpuSelectStrategy.cpp) decides it, in one place,
// for every kernel, from the target and the kernel's description: it records
// `#kda.strategy<kernel, kind, reason, instruction>` on the kernel function, the
// instruction being the lane kernel's matrix instruction (the manifest
// carries it, kda.ops.last_launch reports it) and says in a remark why a
// kernel of a gated delta op or a decode step gets tiles. The register passes
// write the kernels the strategy gives them and nothing else.
//
// What a lane kernel takes is a property of its layout, so each register pass
// states it (the *LanesRefusal functions below, next to the layout they
// check); the selection pass is the one place that asks.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_LOWERING_STRATEGY_H
#define KDA_LOWERING_STRATEGY_H

#include "dialect/KdaAttrs.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <string>

namespace mlir::kda {

/// The strategy attribute on a kernel function: #kda.strategy (KdaAttrs.td)
/// with `kernel` (intra, state, decode, window, elementwise, chunkwise),
/// `kind` (lanes or tiles) and, for tiles, `reason`.
inline constexpr llvm::StringLiteral kStrategyAttr = "kda.strategy";

/// Whether `f` is elementwise work between kda ops made a kernel
/// (kda-gpu-outline-elementwise; its kda.strategy's kernel "elementwise").
inline bool isElementwiseKernel(func::FuncOp f) {
  auto s = f->getAttrOfType<StrategyAttr>(kStrategyAttr);
  return s && s.getKernel() == "elementwise";
}

/// What the selection pass knows of the pipeline it runs in.
struct StrategyOptions {
  bool nvidia = true;      // the target's vendor
  bool tensorCores = true; // tensor-core tile matmuls (off: no lane kernels)
  bool intraLanes = true;  // the pipeline's intra-registers option
  bool stateLanes = true;  // state-registers
  /// step-registers: the gradient's step grid on lanes (GpuStateRegisters.cpp,
  /// emitStep). On since the thirtieth session: the GPU suite's gradient
  /// cases within their bars and the sanitizers clean with it, and faster
  /// than its tile lowering (bench/RESULTS.md).
  bool stepLanes = true;
  /// chunk-registers: the gradient's chunk grid (emitIntraChunk recomputed
  /// under the tape, and its adjoint) on lanes (GpuIntraRegisters.cpp).
  /// On since the thirty-first session: the GPU suite (its gradient cases
  /// among them) passed with it and the sanitizers ran it clean; faster
  /// than its tile lowering (bench/RESULTS.md).
  bool chunkLanes = true;
  bool decodeLanes = true; // decode-registers
  bool windowLanes = true; // window-registers
  int64_t stateStages = 2; // state-stages (its cp.async stages)
  int64_t threads = 128;   // threads per block
  int64_t warpSize = 32;
  /// The chip's matrix instructions (Chips.h: mma_sync, mfma, wmma).
  std::string instructions = "mma_sync";
  /// The chip's shared memory per block in bytes (Chips.h; 0: unchecked).
  int64_t sharedMemory = 0;
  bool wgmma = false; // the chip has Hopper's wgmma (Chips.h)
  bool remarks = false; // a remark for each kernel of a kda op given tiles
};

std::unique_ptr<Pass> createGpuSelectStrategyPass(const StrategyOptions &o);
void registerGpuSelectStrategyPass();

/// Why the register intra-chunk kernel cannot take the description
/// (kda.intra_pass) with `threads` per block; empty if it can. `fix`, where
/// given, gets what the user can do about it.
/// `instruction`: the chip's matrix instructions (mma_sync, mfma, wmma).
/// `sharedMemory`: the chip's bytes per block (0: not checked).
std::string intraLanesRefusal(IntraPassAttr intraPass, int64_t threads,
                              std::string *fix = nullptr,
                              StringRef instruction = "mma_sync",
                              int64_t sharedMemory = 0);
/// The same for the register state kernel (kda.state_pass) of `func`
/// (its workspace types decide the matrix instruction), or with `reverse`
/// for a gradient's reverse scan (kda.reverse_pass: the state program run
/// backwards, which takes no U workspace).
/// `instruction`: the chip's matrix instructions (mma_sync, mfma, wmma).
std::string stateLanesRefusal(func::FuncOp func, StatePassAttr statePass,
                              int64_t threads, std::string *fix = nullptr,
                              bool reverse = false,
                              StringRef instruction = "mma_sync");
/// The same for a gradient's step grid (kda.step_pass: the state step's
/// adjoint with respect to each chunk's inputs, on the state program's
/// layouts; NVIDIA only).
std::string stepLanesRefusal(func::FuncOp func, StatePassAttr stepPass,
                             int64_t threads, std::string *fix = nullptr,
                             StringRef instruction = "mma_sync");
/// The same for a gradient's chunk grid (kda.chunk_pass: the intra-chunk
/// part recomputed under the tape and its adjoint; NVIDIA only).
std::string chunkLanesRefusal(IntraPassAttr chunkPass, int64_t threads,
                              std::string *fix = nullptr);
/// The same for the register decode kernel (kda.decode_pass).
std::string decodeLanesRefusal(DecodePassAttr decodePass, int64_t warpSize);

/// The same for the register window kernel (kda.window_pass) of a kernel
/// with these argument types, on `instruction` (AMD's MFMA takes K and V up
/// to 256, WMMA and mma.sync up to 128; wgmma multiples of 64 up to 256).
std::string windowLanesRefusal(WindowPassAttr windowPass,
                               TypeRange argumentTypes, bool chipHasWgmma,
                               llvm::StringRef instruction = "mma_sync");

/// The window lane kernel's matrix instruction: wgmma where the chip has it
/// and K and V are multiples of 64 (its shared tiles' 128-byte swizzle),
/// mma_sync otherwise.
std::string windowInstruction(WindowPassAttr windowPass, bool chipHasWgmma);

/// Whether `func` is to be written per lane: its kda.strategy says so, or,
/// without one (a register pass run on its own), `refusal` is empty.
bool runsOnLanes(func::FuncOp func, llvm::StringRef refusal);
/// The matrix instruction `func`'s kda.strategy gives its products (empty
/// without one, or for tiles: a register pass run on its own takes its
/// target's default).
llvm::StringRef strategyInstruction(func::FuncOp func);

} // namespace mlir::kda

#endif // KDA_LOWERING_STRATEGY_H
