//===- Passes.h - kda -> kda transformations --------------------*- C++ -*-===//

#ifndef KDA_PASSES_PASSES_H
#define KDA_PASSES_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::kda {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Marks an scf.for whose iterations are independent programs that a target
/// may run in parallel (the decode step's sequence and head loops, which
/// update distinct pool slots in place).
inline constexpr llvm::StringLiteral kProgramLoopAttr = "kda.program_loop";
/// On a function: the names of its program grids, in order, when a
/// multi-grid schedule made them (kda-tile-chunks schedule=chunk-parallel:
/// "intra", then "state"); GPU targets make each grid a kernel of its own,
/// named after it.
inline constexpr llvm::StringLiteral kPhaseAttr = "kda.phase";
/// On a function with a chunk-parallel schedule: what its state grid
/// computes, for targets that lower the state pass with a kernel of their
/// own (kda-gpu-state-registers): {chunk, key_dim, v_block, v_major,
/// boundary, workspaces}, the last naming the intra-chunk workspaces in
/// order ("w" = A(beta Gamma K), "u", "q" = Gamma Q, "k" = the decayed k,
/// "p", "g" = the chunk's total decay exp(G_last) in its first row).
inline constexpr llvm::StringLiteral kStatePassAttr = "kda.state_pass";
/// On a gradient's function (kda.gated_delta_grad with chunk_states): its
/// reverse scan, described as the forward's state grid it transposes (the
/// same fields; no boundary states). kda-gpu-state-registers runs it on
/// lanes: the tape's adjoint of emitStateStep with respect to the state.
inline constexpr llvm::StringLiteral kReversePassAttr = "kda.reverse_pass";
/// On a gradient's function: its step grid (the state step's adjoint with
/// respect to each chunk's inputs), described with the reverse scan's
/// fields, its grid (sequence, chunk, value head). kda-gpu-state-registers
/// runs it on lanes: per program, the tape's adjoint of emitStateStep
/// V block by V block from the kept state and the recorded dS, into the
/// intra-chunk part's seeds.
inline constexpr llvm::StringLiteral kStepPassAttr = "kda.step_pass";
/// On a gradient's function: its chunk grid (the intra-chunk part
/// recomputed under the tape, and its adjoint seeded by the step grid's
/// seeds), described as the forward's intra-chunk grid (a #kda.intra_pass,
/// the same fields). kda-gpu-intra-registers runs it on lanes.
inline constexpr llvm::StringLiteral kChunkPassAttr = "kda.chunk_pass";
/// On a function whose gated delta runs in segments: its summary grid, a
/// #kda.state_pass with `summary` set (kda-gpu-split-schedule hands it to
/// the summary kernel as that kernel's kda.state_pass).
inline constexpr llvm::StringLiteral kSummaryPassAttr = "kda.summary_pass";
/// The most sequence-parallel segments a sequence takes (kda-tile-chunks'
/// `segments`, kda-run / kda-compile --segments, KDA_SEGMENTS): past a
/// few dozen each segment's summary costs more than its parallelism gives.
inline constexpr int64_t kMaxSegments = 64;
/// On a function with a chunk-parallel schedule: what its intra-chunk grid
/// computes, for targets that lower it with a kernel of their own
/// (kda-gpu-intra-registers): {chunk, sub_chunk, key_dim, value_dim, delta,
/// gate ("none", "channel", "head"), gate_activation, lower_bound, beta,
/// beta_activation, l2norm, scale, workspaces (as in kda.state_pass), grid
/// (sequence, chunk, head extents; -1 dynamic)}.
inline constexpr llvm::StringLiteral kIntraPassAttr = "kda.intra_pass";
/// On a function with a decode step: what its programs compute, for targets
/// that lower decode with a kernel of their own (kda-gpu-decode-registers):
/// {key_dim, value_dim, v_major, multi_token (q [N, T, H, K], indices
/// [N, T]), delta, gate ("none", "channel", "head"),
/// gate_activation, lower_bound, beta, beta_activation, l2norm, scale}.
inline constexpr llvm::StringLiteral kDecodePassAttr = "kda.decode_pass";
/// On a function with window attention: what its programs compute
/// (#kda.window_pass), for targets that write the kernel per lane
/// (kda-gpu-window-registers).
inline constexpr llvm::StringLiteral kWindowPassAttr = "kda.window_pass";
/// A layer's overlap schedule (kda-gpu-layer-entry): the state kernel that
/// publishes its progress every N chunks (i64 N) into its `progress`
/// argument, and the window kernel that waits for it before it reads the
/// rows it mixes (runtime/BUNDLE.md, "Progress").
inline constexpr llvm::StringLiteral kPublishProgressAttr =
    "kda.publish_progress";
inline constexpr llvm::StringLiteral kWaitProgressAttr = "kda.wait_progress";
/// On a fused window op and its kernel (kda.hybrid {overlap}): the layer's
/// overlap schedule asked for.
inline constexpr llvm::StringLiteral kOverlapAttr = "kda.overlap";
/// On a kernel whose grid is (sequence, chunk, ...) with chunks of the given
/// size: programs past their sequence's end have nothing to do (GPU targets
/// return from them at once).
inline constexpr llvm::StringLiteral kChunkGridAttr = "kda.chunk_grid";

/// Checks tile sizes given as options (kda-tile-chunks, kda-run, kda-compile)
/// for ops without #kda.tile: `chunk` is 1 (the token recurrence) or one of
/// the attribute's 16, 32, 64, and, unless it is 1, `subChunk` a positive
/// divisor of it; `vBlock` >= 0 (0: all of V). Tiles are static, so an
/// unbounded chunk would build (and allocate) chunk x chunk tiles. Returns ""
/// or a message that spells each option as `prefix` + its name ("--" for a
/// tool's flags).
std::string checkTileOptions(int64_t chunk, int64_t subChunk, int64_t vBlock,
                             llvm::StringRef prefix = "");

} // namespace mlir::kda

#endif // KDA_PASSES_PASSES_H
