//===- GpuPipeline.h - kda on GPUs ------------------------------*- C++ -*-===//
//
// The GPU pipelines: the chunkwise tile IR mapped to blocks, threads and
// shared memory (GpuMapKernels.cpp), tile matmuls on tensor cores, then NVVM and
// a cubin per kernel (kda-lower-to-nvvm).
//
//===----------------------------------------------------------------------===//

#ifndef KDA_LOWERING_GPUPIPELINE_H
#define KDA_LOWERING_GPUPIPELINE_H

#include "lowering/Chips.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include <optional>
#include <string>

namespace mlir::kda {

std::unique_ptr<Pass> createGpuBindDestinationsPass();
std::unique_ptr<Pass> createGpuFuseTilesPass();
std::unique_ptr<Pass> createGpuPrepareTilesPass();
std::unique_ptr<Pass> createGpuOutlineElementwisePass();
/// Refuses work in host functions (outside every kda.kernel function) that
/// a bundle of kernels would drop, with an error at the first such op.
LogicalResult refuseWorkOutsideKernels(ModuleOp module, llvm::StringRef pass);
std::unique_ptr<Pass> createGpuTileMatmulsPass(int64_t threads,
                                               StringRef instructions);

/// Marks a loop whose iterations a target primitive already spread over the
/// block's threads (warps of a tile matmul): kda-gpu-map-kernels fences it
/// with barriers like any primitive and leaves its body alone.
inline constexpr llvm::StringLiteral kWarpDistributedAttr =
    "kda.warp_distributed";
std::unique_ptr<Pass> createGpuMapKernelsPass(int64_t threads);
/// Marks a kernel whose program body already says what each thread does
/// (gpu.thread_id, barriers, registers; kda-gpu-state-registers):
/// kda-gpu-map-kernels maps its grid, shared memory and arguments and leaves
/// its body alone.
inline constexpr llvm::StringLiteral kExplicitThreadsAttr =
    "kda.explicit_threads";
/// On a kernel with explicit threads: its block size when it is not the
/// pipeline's (kda-gpu-state-registers' warp programs: 32 per 16 V rows).
inline constexpr llvm::StringLiteral kBlockThreadsAttr = "kda.block_threads";
/// On a kernel: the registers per thread it is compiled for (NVIDIA
/// .maxnreg), where its author measured that more blocks per SM pay and
/// ptxas fits the program without spills.
inline constexpr llvm::StringLiteral kMaxRegistersAttr = "kda.max_registers";
/// acc (vector<2x2xf32>) += A * B on one NVIDIA mma.sync m16n8k8 with tf32
/// operands: `a` the lane's 4 A elements (rows g, g+8 x cols t, t+4), `b` its
/// 2 B elements (rows t, t+4 x col g), g = lane / 4, t = lane % 4. `precise`
/// splits each operand into its tf32 part and the rest (3 products,
/// "3xTF32", fp32 accuracy).
Value emitMmaSyncTf32(OpBuilder &b, Location loc, ValueRange a, ValueRange bv,
                      Value acc, bool precise);
/// Index of the kernel argument named `name` in a `kda.abi` description, if
/// any.
std::optional<unsigned> abiArgumentIndex(ArrayAttr abi, llvm::StringRef name);
/// Whether a kernel with these argument types keeps fp32 accuracy in its
/// products (no 16-bit float argument: 3xTF32 on NVIDIA, no bf16 WMMA).
bool keepsFp32Accuracy(TypeRange argumentTypes);
/// Puts a 16-bit kernel's transcendental math on the approximate hardware
/// paths: exponentials, logarithms and divisions get `afn arcp` (ex2.approx,
/// lg2.approx, div.approx: about 2 instructions each instead of libdevice's
/// 10 to 30), and log1p(y) becomes log(1 + y) (libdevice's log1pf is a
/// 30-instruction polynomial with no fast form; the softplus gate took one per
/// key of every token: measured +50 % on the intra-chunk kernel). Relative
/// errors are about 2^-22, log(1 + y)'s absolute error for small y about
/// 2^-24: far under what 16-bit inputs, workspaces and outputs round away.
/// fp32 kernels keep the accurate forms for SPEC's 1e-4 bar.
void useApproximateMath(Operation *root);
/// Elements of `elementType` per vector access of a row of `count` of them:
/// the most that fit in 16 bytes and divide `count` (4 f32, 8 bf16).
int64_t rowVectorWidth(Type elementType, int64_t count);
/// `width` consecutive elements of `mem` at (prefix..., col + i), as f32,
/// read rowVectorWidth at a time (`col` a multiple of it).
SmallVector<Value> loadRowAsF32(OpBuilder &b, Location loc, Value mem,
                                ValueRange prefix, Value col, int64_t width);
/// Stores f32 `values` at (prefix..., col + i), converted to mem's element
/// type, rowVectorWidth at a time (`col` a multiple of it).
void storeRowFromF32(OpBuilder &b, Location loc, Value mem, ValueRange prefix,
                     Value col, ArrayRef<Value> values);
/// Marks the `kda.abi` arguments for which `vectorRows(name, type)` holds as
/// needing 16-byte aligned pointers (kernels that read or write their rows
/// as 16-byte vectors; the runtime checks what the manifest states).
void requireAlignedRows(
    func::FuncOp func,
    llvm::function_ref<bool(llvm::StringRef name, MemRefType type)> vectorRows);
/// Lowers a decode step (kda.decode_pass) to a kernel that streams each
/// state once through registers, reductions by warp shuffles (any vendor).
std::unique_ptr<Pass> createGpuDecodeRegistersPass(int64_t warpSize,
                                                   int64_t maxRegisters = 0);
/// Lowers window attention (kda.window_pass) to an NVIDIA kernel with its
/// tiles in registers and its products on mma.sync.
std::unique_ptr<Pass> createGpuWindowRegistersPass();
/// Lowers the intra-chunk grid of a chunk-parallel schedule (kda.intra_pass)
/// to a kernel with its tiles in registers (NVIDIA mma.sync).
std::unique_ptr<Pass>
createGpuIntraRegistersPass(int64_t threads, bool chunkTf32 = true,
                            bool chunkExchangePads = true,
                            bool chunkStageSeeds = true,
                            bool chunkExchangeSwizzle = false,
                            int64_t intraBlocks = 0);
/// One kernel per program grid of a multi-grid kernel function (the
/// chunk-parallel schedule), recorded as a bundle entry (`kda.entries`).
std::unique_ptr<Pass> createGpuSplitSchedulePass();
/// A function of several kernel / entry calls (a hybrid layer) as one more
/// bundle entry, named after the function (GpuLayerEntry.cpp).
std::unique_ptr<Pass> createGpuLayerEntryPass(bool remarks = false,
                                              bool progress = true);
/// A dimension name as a manifest symbol ("N+1" -> "N_plus_1").
std::string manifestSymbol(llvm::StringRef dim);
/// An element type as a manifest dtype ("" when the runtime has none).
llvm::StringRef manifestDtype(Type t);

/// Options of the GPU pipelines (kda-lower-to-nvvm, kda-lower-to-rocdl).
struct GpuPipelineOptions : public PassPipelineOptions<GpuPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("Target chip: sm_80, sm_90a (NVIDIA); gfx90a, gfx942, "
                     "gfx1100 (AMD)"),
      llvm::cl::init("")};
  PassOptions::Option<int64_t> chunk{
      *this, "chunk",
      llvm::cl::desc("Chunk size for ops without #kda.tile (0: the "
                     "target's default)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> subChunk{
      *this, "sub-chunk", llvm::cl::desc("Sub-chunk size"), llvm::cl::init(16)};
  PassOptions::Option<int64_t> vBlock{
      *this, "v-block",
      llvm::cl::desc("Columns of V per program for ops without #kda.tile (0: "
                     "the target's default)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> segments{
      *this, "segments",
      llvm::cl::desc("Sequence-parallel segments per sequence of "
                     "kda.gated_delta ops without #kda.tile segments (1: "
                     "none)"),
      llvm::cl::init(1)};
  PassOptions::Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("kda.gated_delta's chunk schedule: chunk-parallel "
                     "(default: an intra-chunk kernel over every chunk, then "
                     "the state pass) or sequential (one kernel)"),
      llvm::cl::init("chunk-parallel")};
  PassOptions::Option<int64_t> threads{
      *this, "threads", llvm::cl::desc("Threads per block"),
      llvm::cl::init(128)};
  PassOptions::Option<bool> stateRegisters{
      *this, "state-registers",
      llvm::cl::desc("The chunk-parallel state pass with the state in the "
                     "matrix unit's registers (mma.sync, MFMA, WMMA; false: "
                     "the tile lowering)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> stepRegisters{
      *this, "step-registers",
      llvm::cl::desc("NVIDIA: the gradient's step grid (the state step's "
                     "adjoint with respect to each chunk's inputs) on the "
                     "state program's lanes (off: the tile lowering)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> chunkRegisters{
      *this, "chunk-registers",
      llvm::cl::desc("NVIDIA: the gradient's chunk grid (the intra-chunk "
                     "part recomputed under the tape and its adjoint) on "
                     "lanes (off: the tile lowering)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> emulateWmma{
      *this, "emulate-wmma",
      llvm::cl::desc("NVIDIA, for tests: the lane kernels (state, intra, "
                     "window) written for gfx1100's WMMA (its layouts, splits "
                     "and staging), each "
                     "16x16x16 step emulated with shuffles and FMAs "
                     "(instruction wmma_emulated): the AMD lane program run "
                     "against the oracle on an NVIDIA GPU"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> stateStages{
      *this, "state-stages",
      llvm::cl::desc("NVIDIA: chunks in flight (cp.async stages, 2 to 8) of "
                     "the register state kernel"),
      llvm::cl::init(2)};
  PassOptions::Option<int64_t> stepVBlock{
      *this, "step-v-block",
      llvm::cl::desc("NVIDIA: V columns a loop iteration of the gradient's "
                     "step program (0: the grid's V block)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> stepMaxRegisters{
      *this, "step-max-registers",
      llvm::cl::desc("NVIDIA: registers per thread of the gradient's step "
                     "program (0: ptxas decides)"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> reverseTf32{
      *this, "reverse-tf32",
      llvm::cl::desc("NVIDIA: the gradient's reverse scan's f32 products as "
                     "one TF32 product a step where the call's inputs are "
                     "16-bit (false: 3xTF32; true by default: bench/RESULTS.md, "
                     "thirty-fourth session)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> reverseStageDO{
      *this, "reverse-stage-do",
      llvm::cl::desc("NVIDIA: the gradient's reverse scan copies each chunk's "
                     "dO rows by cp.async with its workspaces, stages ahead "
                     "(the default; false: loaded at their use)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> reverseSplitV{
      *this, "reverse-split-v",
      llvm::cl::desc("NVIDIA: the gradient's reverse scan's warps split V, "
                     "each all of K (no sum across warps a step)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> chunkExchangePads{
      *this, "chunk-exchange-pads",
      llvm::cl::desc("NVIDIA: the gradient's chunk grid pads the rows of its "
                     "layout conversions' shared regions by what bank "
                     "conflicts counted on the host say (0 to 8), not by one "
                     "(the default; false: by one)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> chunkGateOutside{
      *this, "chunk-gate-outside",
      llvm::cl::desc("the gradient's chunk grid applies the gate's "
                     "activation outside its tape; a grid of its own takes "
                     "the activated gate's gradient to d_gate, dA_log and "
                     "ddt_bias (NVIDIA's chunk lanes then take the softplus "
                     "gate; default false)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> reverseDStatesBf16{
      *this, "reverse-ds-bf16",
      llvm::cl::desc("the gradient's reverse scan records dS after every "
                     "chunk in bf16 where q is 16-bit, which the step grid "
                     "reads (half the bytes; the default since the "
                     "thirty-seventh session; false: f32)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> chunkExchangeSwizzle{
      *this, "chunk-exchange-swizzle",
      llvm::cl::desc("NVIDIA: with chunk-exchange-pads, the chunk grid's "
                     "exchange rows may instead be unpadded with their "
                     "columns permuted per row (j ^ f(i)), where that counts "
                     "fewer bank conflicts"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> chunkStageSeeds{
      *this, "chunk-stage-seeds",
      llvm::cl::desc("NVIDIA: the gradient's chunk grid copies its seeds by "
                     "cp.async into shared memory when it starts (the default; "
                     "false: loaded at their use)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> chunkTf32{
      *this, "chunk-tf32",
      llvm::cl::desc("NVIDIA: the gradient's chunk grid's products as one "
                     "TF32 product a step where the call's inputs are 16-bit, "
                     "but for the factored decayed pairs' adjoint (false: "
                     "3xTF32 throughout)"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> stepThreads{
      *this, "step-threads",
      llvm::cl::desc("NVIDIA: threads per block of the gradient's step "
                     "program (0: `threads`)"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> stepTf32{
      *this, "step-tf32",
      llvm::cl::desc("NVIDIA: the gradient's step program's f32 products one "
                     "TF32 product where the call's inputs are 16-bit (the "
                     "default since the thirty-eighth session; false: "
                     "3xTF32)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> stepScatterSums{
      *this, "step-scatter-sums",
      llvm::cl::desc("NVIDIA: the gradient's step program sums across warps "
                     "in two steps (a share of the registers a warp)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> stepPrefetch{
      *this, "step-prefetch",
      llvm::cl::desc("NVIDIA: the gradient's step program loads each V "
                     "block's inputs one block ahead of their use"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> reverseThreads{
      *this, "reverse-threads",
      llvm::cl::desc("NVIDIA: threads per block of the gradient's reverse "
                     "scan (0: `threads`; 128 by default: 4 warps)"),
      llvm::cl::init(128)};
  PassOptions::Option<bool> reversePrefetch{
      *this, "reverse-prefetch",
      llvm::cl::desc("NVIDIA: the gradient's reverse scan loads each chunk's "
                     "dO rows a step ahead"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> stateRotateStages{
      *this, "state-rotate-stages",
      llvm::cl::desc("the state program's stage index carried and rotated "
                     "where the stages are not a power of two"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> stateStagedOutput{
      *this, "state-staged-output",
      llvm::cl::desc("the forward state program's outputs through shared "
                     "memory, stored a step later as 16-byte rows"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> intraBlocks{
      *this, "intra-blocks",
      llvm::cl::desc("NVIDIA: resident blocks per SM the forward "
                     "intra-chunk kernel's register budget is cut for (0: "
                     "four for 16-bit kernels, three for fp32 ones)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> elementwiseTileElements{
      *this, "elementwise-tile-elements",
      llvm::cl::desc("kda-gpu-outline-elementwise's tile-elements: up to "
                     "this many elements a program of an elementwise kernel "
                     "(0: a dynamic trailing dimension one index a program; "
                     "4096, the default, measured best on the H100: "
                     "bench/RESULTS.md, fiftieth session)"),
      llvm::cl::init(4096)};
  PassOptions::Option<int64_t> stateCopyRuns{
      *this, "state-copy-runs",
      llvm::cl::desc("the state program's whole-chunk copies in runs "
                     "of this many consecutive 16-byte pieces a thread"),
      llvm::cl::init(1)};
  PassOptions::Option<int64_t> stepStages{
      *this, "step-stages",
      llvm::cl::desc("NVIDIA: the gradient's step program copies each V "
                     "block's inputs by cp.async into this many stages of "
                     "shared memory, blocks ahead (0: loads at their use)"),
      llvm::cl::init(2)};
  PassOptions::Option<bool> stepVNewFirst{
      *this, "step-vnew-first",
      llvm::cl::desc("NVIDIA: the gradient's step program computes V_new of "
                     "the whole chunk first, split by V (no sum across warps "
                     "in its V blocks)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> decodeRegisters{
      *this, "decode-registers",
      llvm::cl::desc("Decode steps as one pass over each state in registers "
                     "(warp shuffles, no shared memory; false: the tile "
                     "lowering of the chunk step at C = 1)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> windowRegisters{
      *this, "window-registers",
      llvm::cl::desc("Window attention with its tiles in registers and "
                     "products on the matrix unit (wgmma / mma.sync, MFMA, "
                     "WMMA), key blocks only where the window reaches "
                     "(false: the tile lowering)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> intraRegisters{
      *this, "intra-registers",
      llvm::cl::desc("The chunk-parallel intra-chunk grid with its tiles "
                     "in registers (mma.sync, MFMA, WMMA; false: the tile "
                     "lowering)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> strategyRemarks{
      *this, "strategy-remarks",
      llvm::cl::desc("A remark for every kernel of a kda op that gets the "
                     "shared-memory tile lowering instead of lanes, with the "
                     "reason and the fix (kda-gpu-select-strategy; kda-compile "
                     "asks for them)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> tensorCores{
      *this, "tensor-cores",
      llvm::cl::desc("Tile matmuls on the matrix units (mma.sync, MFMA, "
                     "WMMA)"),
      llvm::cl::init(true)};
  PassOptions::Option<std::string> until{
      *this, "until",
      llvm::cl::desc("Stop early: 'lanes' stops after the register passes (the "
                     "lane kernels as scf / memref / nvgpu programs: what "
                     "kda-run --emulate runs on the CPU); empty runs it all"),
      llvm::cl::init("")};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Binary format: bin (cubin / HSACO), isa (PTX / AMDGPU "
                     "assembly), or none (stop at the NVVM / ROCDL dialect)"),
      llvm::cl::init("bin")};
  PassOptions::Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("NVIDIA: the CUDA toolkit (ptxas, libdevice; default "
                     "$CUDA_ROOT or /usr/local/cuda). AMD: a folder with "
                     "llvm/bin/ld.lld (default $ROCM_PATH, else the one kda "
                     "builds)"),
      llvm::cl::init("")};
};


/// Adds an upstream pipeline given in textual form (the passes are
/// registered by every kda tool). A typo there is a programming error.
void addUpstream(OpPassManager &pm, llvm::StringRef pipeline);

/// The end of the pipeline per vendor: the kernels' lowering to NVVM
/// (lowering/nvidia/NvvmLowering.cpp) or ROCDL (lowering/amd/
/// RocdlLowering.cpp) and the target attached for serialization. Each
/// returns the toolkit gpu-module-to-binary uses: `toolkit`, else the
/// vendor's default.
std::string addNvvmLowering(OpPassManager &pm, const GpuTarget &target,
                            llvm::StringRef toolkit);
std::string addRocdlLowering(OpPassManager &pm, const GpuTarget &target,
                             llvm::StringRef toolkit);

/// kda ops -> gpu.module kernels for the target chip, serialized as the
/// options say, plus a `kda.launches` module attribute describing each
/// kernel's parameters and launch geometry.
void buildGpuPipeline(OpPassManager &pm, const GpuTarget &target,
                      const GpuPipelineOptions &options);
void registerGpuPipelines();

} // namespace mlir::kda

#endif // KDA_LOWERING_GPUPIPELINE_H
