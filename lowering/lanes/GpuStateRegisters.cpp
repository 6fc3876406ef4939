//===- GpuStateRegisters.cpp - the state pass with the state in registers -===//
//
// The chunk-parallel schedule's state grid (one program per sequence, value
// head and V block) is the only sequential part of the gated delta rule:
// per chunk of C tokens it computes, from the intra-chunk workspaces,
//
//   V_new = U - W S          O = (Gamma Q) S + P V_new
//   S     <- Diag(exp(g_last)) S + (decayed K)^T V_new
//
// (exp(g_last), the chunk's decay, comes from the intra-chunk grid: the
// pass's only exponentials were those of each lane's keys, a third of a
// step's instructions.)
//
// (passes/GatedDeltaKernel.cpp, emitStateStep, is the definition). Lowered
// like every other tile program, each of these products is a phase over
// shared memory fenced by barriers, and the chain of chunk steps is all
// latency. This pass runs emitStateStep itself on lane tiles
// (lowering/lanes/LaneTiles.h) with the state where it is used: in mma.sync
// accumulators, in registers, for the whole sequence. The driver
// (LaneStateProgram) only stages each chunk's workspaces in shared memory
// (cp.async, `stages` chunks in flight) and stores the outputs, the final
// state and the chunk-boundary states (prefix caching: dense, or into the
// slots of a pool).
//
// AMD (the strategy's mfma / wmma): the same program on the chip's unit
// (LaneTileBuilder::unitProduct), every product untransposed with the state
// and the rows in the unit's accumulator layout (MFMA's B operand layout),
// W / Gamma Q / decayed k / P read from LDS by the products, the chunks
// staged by plain copies. WMMA splits K over the warps.
//
// 16-bit inputs: the warps split the V block and every warp holds all of K
// (bf16 m16n8k16, no product crosses warps). fp32 inputs: the warps split K
// (3xTF32 m16n8k8; partial products meet in shared memory), at V blocks of
// 32 (the chip table's fp32 default).
//
// What it does not take (V blocks, K or chunks not multiples of 16, chunks
// above 64, mixed workspace types) is stateLanesRefusal's answer to
// kda-gpu-select-strategy, which gives those kernels the tile lowering and
// says so in a remark.
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"
#include "lowering/lanes/LaneBuilder.h"
#include "lowering/lanes/LaneTiles.h"
#include "lowering/lanes/PassDescription.h"
#include "lowering/Strategy.h"

#include "passes/GatedDeltaKernel.h"
#include "passes/Sequences.h"
#include "passes/GatedDeltaBackward.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Pass/Pass.h"

#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "lowering/Passes.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAGPUSTATEREGISTERS
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;

namespace {

struct StatePassConfig {
  int64_t chunk = 0, keyDim = 0, vBlock = 0;
  bool vMajor = false, boundary = false;
  bool boundaryPool = false; // boundary states into the slots of a pool
  int64_t interval = 0;      // tokens between two boundary states
  SmallVector<std::string> roles; // workspace roles, in workspace order
  SmallVector<int64_t> grid;      // (sequence, head[, V block]); -1 dynamic
  int64_t segments = 1;           // per sequence (grid: sequence x segment)
  int64_t valueDim = 0;           // V (a summary's blocks past it: A)
  bool summary = false;           // the segments' summary grid
};

std::optional<StatePassConfig> readConfig(kda::StatePassAttr desc) {
  if (!desc)
    return std::nullopt;
  StatePassConfig c;
  c.chunk = desc.getChunk();
  c.keyDim = desc.getKeyDim();
  c.vBlock = desc.getVBlock();
  c.vMajor = desc.getVMajor().getValue();
  c.boundary = desc.getBoundary().getValue();
  c.boundaryPool = desc.getBoundaryPool().getValue();
  c.interval = desc.getBoundaryInterval();
  for (Attribute r : desc.getWorkspaces())
    c.roles.push_back(cast<StringAttr>(r).getValue().str());
  llvm::append_range(c.grid, desc.getGrid().asArrayRef());
  c.segments = desc.getSegments();
  c.valueDim = desc.getValueDim();
  c.summary = desc.getSummary();
  return c;
}

/// A 1-D view of workspace `ws` ([rows, tokens, heads, width], any element
/// type): element (row, token, head, col) is at
/// ((row * T + token) * HV + head) * width + col.
Value flatWorkspace(ImplicitLocOpBuilder &b, Value ws) {
  auto type = cast<MemRefType>(ws.getType());
  Value total = arith::ConstantIndexOp::create(b, 1);
  for (int d = 0; d < 4; ++d)
    total = arith::MulIOp::create(b, total, memref::DimOp::create(b, ws, d));
  return memref::ReinterpretCastOp::create(
      b, MemRefType::get({ShapedType::kDynamic}, type.getElementType()), ws,
      OpFoldResult(b.getIndexAttr(0)), ArrayRef<OpFoldResult>{total},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
}

/// Where sequence `n`'s tokens are: (batch row, first token, length), from
/// cu_seqlens when the kernel is varlen (one batch row), else row n of
/// `tokens` each.
std::tuple<Value, Value, Value> sequenceBounds(ImplicitLocOpBuilder &b,
                                               Value n, Value tokens,
                                               Value cuSeqlens) {
  kda::LaneBuilder lb(b);
  if (!cuSeqlens)
    return {n, lb.idx(0), tokens};
  auto offset = [&](Value i) -> Value {
    Value e = memref::LoadOp::create(b, cuSeqlens, ValueRange{i});
    return arith::IndexCastOp::create(b, b.getIndexType(), e);
  };
  Value start = offset(n);
  return {lb.idx(0), start,
          arith::SubIOp::create(b, offset(lb.add(n, 1)), start)};
}

/// Where the boundary entry before chunk `chunkIdx` of sequence `n` goes,
/// for both state programs: where that chunk starts an interval of `per`
/// chunks and the entry is one of those recorded, `store` runs with the
/// entry's leading indices, (n, entry, head) for a dense `boundary`, or
/// (slot, head) for the pool slot `table` names (negative slots, not kept,
/// and slots past the pool are skipped).
void atBoundaryEntry(ImplicitLocOpBuilder &b, Value chunkIdx, int64_t per,
                     Value boundary, Value table, Value n, Value head,
                     llvm::function_ref<void(ArrayRef<Value>)> store) {
  kda::LaneBuilder lb(b);
  Value j = arith::DivUIOp::create(b, chunkIdx, lb.idx(per));
  Value nt = table ? memref::DimOp::create(b, table, 1)
                   : memref::DimOp::create(b, boundary, 1);
  Value at = arith::AndIOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                            arith::RemUIOp::create(b, chunkIdx, lb.idx(per)),
                            lb.idx(0)),
      lb.ult(j, nt));
  auto op = scf::IfOp::create(b, at, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(op.thenBlock());
  if (!table) {
    store({n, j, head});
    return;
  }
  Value raw = memref::LoadOp::create(b, table, ValueRange{n, j});
  Value slot64 = raw.getType().isInteger(64)
                     ? raw
                     : Value(arith::ExtSIOp::create(b, b.getI64Type(), raw));
  Value slots = arith::IndexCastOp::create(
      b, b.getI64Type(), memref::DimOp::create(b, boundary, 0));
  Value keep = arith::AndIOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::sge, slot64,
                            arith::ConstantIntOp::create(b, 0, 64)),
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, slot64, slots));
  auto inPool = scf::IfOp::create(b, keep, /*withElseRegion=*/false);
  b.setInsertionPointToStart(inPool.thenBlock());
  Value slot = arith::IndexCastOp::create(b, b.getIndexType(), slot64);
  store({slot, head});
}

/// The state pass derived from the one algorithm: emitStateStep
/// (passes/GatedDeltaKernel.cpp) runs on LaneTileBuilder tiles, and this
/// driver only stages a chunk's workspaces in shared memory and stores.
///
/// Layout: the warps split the program's V block (VB / NW rows of S^T each,
/// a multiple of 16) and every warp holds all of K, so no product of a chunk
/// step crosses warps. The state [K, VB] is mma.sync's accumulator layout of
/// S^T, transposed; the products against it run transposed
/// (LaneTileBuilder::runsTransposed), with S^T as the A operand (rounded to
/// bf16, as FLA's and FlashKDA's kernels round it) and W, Gamma Q and the
/// decayed k read from shared memory through ldmatrix. U, P and the chunk's
/// decay exp(g_last) are read from shared memory into the layouts their
/// products want, so no layout conversion moves data between lanes.
///
/// Staging: `stages` cp.async stages (the strategy's; 2 or 3 from the shape
/// policy), one barrier per chunk; chunks i + 1 .. i + stages - 1 are in
/// flight while chunk i's products run. Rows past a partial chunk's
/// end are zero-filled (no bytes read), which makes their V_new rows zero;
/// their outputs are not stored.
///
/// Chunk-boundary states (prefix caching, dense or into pool slots) are the
/// state registers stored where a chunk that starts an interval begins, and
/// zeros for the dense entries past the sequence's end.
///
/// Its matrix instruction takes the W, Gamma Q and decayed k workspaces'
/// type: bf16 (16-bit inputs; S^T rounded to bf16 as its A operand) or f32
/// (fp32 inputs: 3xTF32, S^T split into its tf32 part and the rest). With
/// all of K per warp, an fp32 chunk step's 3xTF32 products were one warp's
/// long chain (1.5 times the time of the split-K program then written per
/// lane, fifteenth session; removed since); fp32 kernels therefore split K over the warps (byK: partial
/// products summed across warps, one barrier each) at V blocks of 32, the
/// chip table's fp32 default: 0.88 to 0.97 of the split-K program's time on
/// the H200 (bench/RESULTS.md, seventeenth session), and the default since.
struct LaneStateProgram : kda::LaneBuilder {
  const StatePassConfig &cfg;
  int64_t C, K, VB, NW;
  /// Chunks in flight: cp.async stages (chunk i + stages - 1 is copied
  /// while chunk i computes).
  int64_t stages = 2;
  /// The warps split K (splitsK), not V.
  bool byK = false;
  static constexpr int64_t kPad16 = 8; // bf16 row padding: 16 bytes
  static constexpr int64_t kPad32 = 4; // f32 row padding: 16 bytes
  Value ws[6]; // w, u, q, k, p, g (null when absent)
  Value o, h0, ht, cuSeqlens;
  /// A layer's progress counters ([B, HV, V / VB + 1] i32; kda-gpu-layer-
  /// entry's `kda.publish_progress`): this program's counter, at (n, head,
  /// V block), holds the chunks whose outputs every warp has stored, every
  /// `progressEvery` chunks and at the end; [0, 0, V / VB] counts the
  /// programs that started (runtime/BUNDLE.md, "Progress"). A window that
  /// mixes the outputs reads each row once its chunk is counted.
  Value progress;
  int64_t progressEvery = 16;
  /// The reverse scan of a gradient (kda.reverse_pass): chunks last to
  /// first, the carried tile dS (from d_final_state, `h0` here; zeros
  /// without it), each step the tape's adjoint of emitStateStep with
  /// respect to the state, seeded with the chunk's dO rows (`dO`, read in
  /// place of U, which the adjoint does not read) and dS. dS before each
  /// step goes to `dStates` ([N, NT, HV, V, K] f32, V-major) at the chunk;
  /// the last one to `ht` (d_initial_state).
  bool reverse = false;
  /// The reverse scan's (or the step program's) f32 products as one TF32
  /// product a step (a call of 16-bit inputs, kda-compile --reverse-tf32,
  /// --step-tf32).
  bool singleTf32 = false;
  /// The reverse scan loads each chunk's dO rows a step ahead
  /// (kda-compile --reverse-prefetch).
  bool reversePrefetch = false;
  /// Whole chunks' copies in runs of this many consecutive 16-byte pieces
  /// a thread (kda-compile --state-copy-runs; 1: pieces a block apart).
  int64_t copyRuns = 1;
  /// The forward's outputs through shared memory (kda-compile
  /// --state-staged-output): each step writes its chunk's rows there, and
  /// the next step, past the barrier it has anyway, stores them as 16-byte
  /// rows (the registers hold o transposed, token pairs: no two of a lane's
  /// outputs are adjacent in memory, so they leave as 2-byte stores
  /// otherwise).
  bool stagedOutput = false;
  /// Chunk i's stage carried through the loop and rotated where the stages
  /// are not a power of two (kda-compile --state-rotate-stages), not the
  /// remainder of the 64-bit chunk index.
  bool rotateStageIndex = false;
  /// The reverse scan copies each chunk's dO rows by cp.async with its W,
  /// Gamma Q, decayed k and P, stages ahead (kda-compile
  /// --reverse-stage-do): bound to ws[1], U's slot, which a reverse scan
  /// does not take.
  bool reverseStageDO = false;
  Value dO, dStates;
  /// The reverse scan's dV_new of every chunk ([B, T, HV, V] f32, the
  /// workspace after dStates): U's seed, which the step grid reads.
  Value dU;
  Value boundary;      // chunk-boundary states, or null
  Value boundaryTable; // pool slots per (sequence, entry), or null
  /// Segments (cfg.segments > 1): program n of the grid is segment
  /// n % segments of sequence n / segments. The state program starts from
  /// `starts` [rows, P, HV, K, V] (the combine grid's), at (sequence,
  /// segment, head); a summary (cfg.summary) writes its segment's final
  /// state into `summaryOut` [rows, P, HV, K, V + KT] instead of outputs:
  /// on its V blocks from zeros (the offset), on the blocks past V from the
  /// identity's columns with U taken as zero (the transition).
  Value segment, starts, summaryOut;
  Value values; // v [B, T, HV, V]: a summary's token and head counts
  Value n, head, vCol, row, start, length, tokens, heads;
  Value uCol; // U's first column: vCol, or 0 on a summary's transition
  Value tid, lane, warp;
  Value flat[6];
  Value shW, shQ, shK, shU, shP, shG;

  /// The matrix unit (the strategy's instruction) and its warp size.
  kda::MatrixUnit unit = kda::MatrixUnit::MmaSync;
  int64_t warpSize = 32;
  bool amd() const { return unit != kda::MatrixUnit::MmaSync; }
  /// WMMA's program on NVIDIA (instruction wmma_emulated, for tests): the
  /// steps emulated, the staging still AMD's plain copies.
  bool emulated = false;

  LaneStateProgram(ImplicitLocOpBuilder &b, const StatePassConfig &cfg,
                   int64_t warps, kda::MatrixUnit unit)
      : LaneBuilder(b), cfg(cfg), C(cfg.chunk), K(cfg.keyDim), VB(cfg.vBlock),
        NW(warps), unit(unit),
        warpSize(kda::LaneTileBuilder::unitWarpSize(unit)) {}

  /// Warps for `threads` per block: at most one per 16 V rows.
  /// Where the warps split the state: by V (16-bit inputs: every warp all
  /// of K, no product crosses warps) or, for f32 workspaces, by K: each
  /// warp's 3xTF32 chain of a chunk step is then 1 / warps as long (six
  /// mma.sync per bf16 one), and the products over K meet in shared memory
  /// (LaneTileBuilder's sums across warps). On WMMA (gfx1100) always by
  /// K: its B operand holds every element twice (both half-waves), and the
  /// state's fragments of W S and (Gamma Q) S, shared by the two products,
  /// spilled at all of K per warp (K = 128, bf16).
  static bool splitsK(TypeRange wsTypes, const StatePassConfig &cfg,
                      kda::MatrixUnit unit) {
    if (unit == kda::MatrixUnit::Wmma)
      return true;
    // (The decayed k's type, or W's in the step grid, which takes no decayed
    // k: they are alike.)
    for (auto [role, type] : llvm::zip(cfg.roles, wsTypes))
      if (role == "k" || role == "w")
        return cast<MemRefType>(type).getElementType().isF32();
    return false;
  }
  /// Warps for `threads` per block: at most one per 16 V rows (by V) or
  /// per 16 keys (by K).
  static int64_t warpsFor(const StatePassConfig &cfg, int64_t threads,
                          bool byK, int64_t warpSize) {
    int64_t w = std::max<int64_t>(1, threads / warpSize);
    while (w > 1 && (byK ? cfg.keyDim : cfg.vBlock) % (16 * w) != 0)
      w /= 2;
    return w;
  }
  /// Why the derived program does not take `cfg`; empty if it does.
  static std::string refusal(const StatePassConfig &cfg, TypeRange wsTypes,
                             kda::MatrixUnit unit) {
    if (cfg.vBlock % 16 != 0 || cfg.keyDim % 16 != 0 || cfg.chunk % 16 != 0 ||
        cfg.chunk > 64)
      return "V block " + std::to_string(cfg.vBlock) + ", K " +
             std::to_string(cfg.keyDim) + ", chunk " +
             std::to_string(cfg.chunk) +
             ": V blocks, K and chunks multiples of 16, chunks up to 64";
    Type operandType;
    for (auto [role, type] : llvm::zip(cfg.roles, wsTypes)) {
      Type e = cast<MemRefType>(type).getElementType();
      if (role == "w" || role == "q" || role == "k") {
        if ((!e.isBF16() && !e.isF32()) || (operandType && e != operandType))
          return "W, Gamma Q and decayed k workspaces that are not all bf16 "
                 "or all f32";
        operandType = e;
      } else if (!e.isF32() && !(role == "u" && e.isBF16())) {
        return "a " + role + " workspace that is not f32" +
               (role == "u" ? " or bf16" : "");
      }
    }
    // WMMA has no fp32 form: each product is three bf16 ones of split
    // operands, and past 16-token chunks the step spilled (gfx1100).
    if (unit == kda::MatrixUnit::Wmma && operandType && operandType.isF32() &&
        cfg.chunk > 16)
      return "fp32 workspaces at chunk " + std::to_string(cfg.chunk) +
             " on WMMA (three bf16 products a step; past chunk 16 the step "
             "spills)";
    return "";
  }
  int64_t threads() const { return warpSize * NW; }
  /// The products' operand type: the W, Gamma Q and decayed k workspaces'
  /// (bf16: mma.sync m16n8k16; f32: 3xTF32 m16n8k8 pairs), read from the
  /// decayed k's (W's in the gradient's step grid, which reads no decayed
  /// k; f32 where it reads neither).
  Type operandType() {
    for (Value w : {ws[3], ws[0]})
      if (w)
        return cast<MemRefType>(w.getType()).getElementType();
    return b.getF32Type();
  }
  int64_t operandBytes() { return operandType().getIntOrFloatBitWidth() / 8; }

  SmallVector<Value> stateIndex(Value key, Value v) {
    Value vg = add(vCol, v);
    return cfg.vMajor ? SmallVector<Value>{n, head, vg, key}
                      : SmallVector<Value>{n, head, key, vg};
  }
  int64_t widthOf(int i) {
    return cast<MemRefType>(ws[i].getType()).getDimSize(3);
  }
  Value chunkBase(int i, Value t0) {
    Value r = add(arith::MulIOp::create(b, row, tokens), t0);
    r = add(arith::MulIOp::create(b, r, heads), head);
    return mul(r, widthOf(i));
  }
  Value rowOffset(int i, Value r) {
    return arith::MulIOp::create(b, arith::MulIOp::create(b, r, heads),
                                 idx(widthOf(i)));
  }

  /// Copies `rows` rows of `pieces` 16-byte pieces of workspace i (from
  /// column `col0`) into shared buffer `dst` [stage, row, col]; rows at or
  /// past `valid` are zero-filled and read their last valid row's address.
  /// A null `valid` says every row is real (a whole chunk): no clamp and no
  /// zero fill, so a piece's address is the chunk's base plus an offset
  /// that depends on the thread only (hoisted out of the chunk loop).
  void issueRows(int i, Value dst, Value stage, Value t0, Value valid,
                 int64_t rows, int64_t pieces, Value col0, bool perRow) {
    auto type = cast<MemRefType>(ws[i].getType());
    const int64_t perPiece = 16 / (type.getElementTypeBitWidth() / 8);
    const int64_t total = rows * pieces;
    Value base = chunkBase(i, t0);
    if (col0)
      base = add(base, col0);
    const bool whole = !valid;
    Value last = whole ? Value() : arith::SubIOp::create(b, valid, idx(1));
    // Piece (r, c) of the buffer from element `src` of the workspace.
    auto copyPiece = [&](Value r, Value c, Value src) {
      Value count = perRow && !whole
                        ? select(ult(r, valid), idx(perPiece), idx(0))
                        : idx(perPiece);
      SmallVector<Value> to = {stage};
      if (perRow)
        to.push_back(r);
      to.push_back(c);
      if (amd()) {
        // AMD: a 16-byte load and store (zeros past the chunk's valid
        // rows); the chunk-loop barrier orders them like cp.async's waits.
        auto piece = VectorType::get({perPiece}, type.getElementType());
        Value x = vector::LoadOp::create(b, piece, flat[i], ValueRange{src});
        if (perRow && !whole)
          x = arith::SelectOp::create(
              b, ult(r, valid), x,
              arith::ConstantOp::create(b, b.getZeroAttr(piece)));
        vector::StoreOp::create(b, x, dst, to);
        return;
      }
      nvgpu::DeviceAsyncCopyOp::create(
          b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), dst, to,
          flat[i], ValueRange{src}, b.getIndexAttr(perPiece), count,
          /*bypassL1=*/b.getUnitAttr());
    };
    // Which thread copies which piece. Whole chunks with copyRuns > 1
    // (kda-compile --state-copy-runs): runs of R consecutive pieces of a
    // row, run q = (k / R) threads + tid for a thread's k-th piece, so that
    // a run's pieces share one address plus immediates (R - 1 fewer 64-bit
    // adds and hoisted offsets a run) at the price of half-used sectors per
    // instruction. Otherwise piece p = tid + k threads (whole sectors).
    int64_t R = copyRuns;
    while (R > 1 && (pieces % R || total % (threads() * R)))
      R /= 2;
    if (whole && perRow && R > 1) {
      const int64_t runsPerRow = pieces / R;
      for (int64_t k0 = 0; k0 < total / threads(); k0 += R) {
        Value q = add(tid, (k0 / R) * threads());
        Value r = arith::DivUIOp::create(b, q, idx(runsPerRow));
        Value c0 = mul(arith::RemUIOp::create(b, q, idx(runsPerRow)),
                       R * perPiece);
        Value runSrc = add(base, add(rowOffset(i, r), c0));
        for (int64_t j = 0; j < R; ++j)
          copyPiece(r, add(c0, j * perPiece), add(runSrc, j * perPiece));
      }
      return;
    }
    forEachPiece(tid, threads(), total, [&](Value p) {
      Value r = arith::DivUIOp::create(b, p, idx(pieces));
      Value c = mul(arith::RemUIOp::create(b, p, idx(pieces)), perPiece);
      Value src = !perRow ? add(base, c)
                  : whole ? add(base, add(rowOffset(i, r), c))
                          : add(add(base, rowOffset(i, minu(r, last))), c);
      copyPiece(r, c, src);
    });
  }

  /// Chunk `c`'s first token and how many of its C rows the sequence has.
  std::pair<Value, Value> chunkRows(Value c) {
    Value local = mul(c, C);
    Value t0 = add(start, local);
    return {t0, minu(idx(C), arith::SubIOp::create(b, length, local))};
  }

  /// Chunk `chunkIdx`'s workspaces into `stage`.
  void issue(Value chunkIdx, Value stage) {
    auto [t0, valid] = chunkRows(chunkIdx);
    // 16-byte pieces of a K row: 8 bf16 or 4 f32 elements.
    const int64_t kPieces = K * operandBytes() / 16;
    // Every chunk but a sequence's last is whole: its copies skip the
    // clamp and the zero fill. The step is issue-bound, so the copies'
    // address arithmetic is time: 2 to 4 % of the forward on the H200
    // (bench/RESULTS.md, twenty-seventh session).
    auto rowsOf = [&](Value rowsValid) {
      if (ws[0])
        issueRows(0, shW, stage, t0, rowsValid, C, kPieces, {}, true);
      // (A summary computes no outputs: no Gamma Q, no P.)
      if (ws[2])
        issueRows(2, shQ, stage, t0, rowsValid, C, kPieces, {}, true);
      issueRows(3, shK, stage, t0, rowsValid, C, kPieces, {}, true);
      // U's rows (the reverse scan's staged dO rows: ws[1] is d_o).
      if (ws[1])
        issueRows(1, shU, stage, t0, rowsValid, C,
                  VB * cast<MemRefType>(ws[1].getType())
                           .getElementTypeBitWidth() /
                      128,
                  uCol, true);
      if (ws[4])
        issueRows(4, shP, stage, t0, rowsValid, C, C / 4, {}, true);
    };
    auto whole = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, valid, idx(C)),
        /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(whole.thenBlock());
      rowsOf(Value());
      b.setInsertionPointToStart(whole.elseBlock());
      rowsOf(valid);
    }
    if (ws[5])
      issueRows(5, shG, stage, t0, valid, 1, K / 4, {}, false);
  }

  /// A tile of `layout` read from shared buffer `buf` [stage, r, c] (or
  /// [stage, c] for rank 1), as f32 (the reverse scan's dO rows are 16-bit).
  Value readTile(kda::LaneTileBuilder &tb, const kda::LaneLayout &layout,
                 Value buf, Value stage) {
    SmallVector<Value> regs;
    for (int64_t r = 0; r < int64_t(layout.regs.size()); ++r) {
      SmallVector<Value> at = {stage};
      for (int64_t d = 0; d < layout.rank(); ++d)
        at.push_back(tb.coordinate(layout, r, d));
      regs.push_back(toF32(memref::LoadOp::create(b, buf, at)));
    }
    return tb.make(layout, regs);
  }

  /// Stores the state registers `S` (zeros where empty) in `layout` as the
  /// boundary entry at `lead` (sequence, entry, head; or slot, head).
  void storeBoundaryEntry(kda::LaneTileBuilder &tb,
                          const kda::LaneLayout &layout, ArrayRef<Value> lead,
                          ArrayRef<Value> S) {
    // Runs of a lane's registers consecutive along the entry's inner
    // dimension (K when V-major: the accumulator's column pairs on NVIDIA)
    // as one row vector (vectorRuns keeps the run's start a multiple of its
    // length whatever the lane; the rows are aligned, requireAlignedRows):
    // one 8-byte store (f32) or 4-byte (bf16) a pair.
    const int64_t inner = cfg.vMajor ? 0 : 1;
    for (auto [r0, len] : layout.vectorRuns(inner, /*most=*/4)) {
      Value key = tb.coordinate(layout, r0, 0);
      Value v = add(vCol, tb.coordinate(layout, r0, 1));
      SmallVector<Value> prefix(lead);
      prefix.push_back(cfg.vMajor ? v : key);
      kda::storeRowFromF32(b, b.getLoc(), boundary, prefix,
                           cfg.vMajor ? key : v,
                           S.empty() ? SmallVector<Value>(len, f32(0.0))
                                     : SmallVector<Value>(S.slice(r0, len)));
    }
  }

  /// The boundary state before chunk `chunkIdx`, where that chunk starts an
  /// interval and the entry is one of those recorded (dense), or has a
  /// slot in the pool (table: negative slots and slots past the pool are
  /// skipped).
  void storeBoundaryBefore(kda::LaneTileBuilder &tb,
                           const kda::LaneLayout &layout, Value chunkIdx,
                           ArrayRef<Value> S) {
    atBoundaryEntry(b, chunkIdx, cfg.interval / C, boundary, boundaryTable, n,
                    head, [&](ArrayRef<Value> lead) {
                      storeBoundaryEntry(tb, layout, lead, S);
                    });
  }

  /// Zeros for the dense entries at or past the sequence's end (j x
  /// interval >= length), which no chunk records.
  void zeroBoundariesPastEnd(kda::LaneTileBuilder &tb,
                             const kda::LaneLayout &layout) {
    if (!boundary || boundaryTable)
      return;
    Value nt = memref::DimOp::create(b, boundary, 1);
    Value first = arith::CeilDivUIOp::create(b, length, idx(cfg.interval));
    auto loop = scf::ForOp::create(b, minu(first, nt), nt, idx(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    storeBoundaryEntry(tb, layout, {n, loop.getInductionVar(), head}, {});
  }

  /// The calling thread's ids, and the workspaces' flat views (what
  /// issueRows reads).
  void beginProgram() {
    tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    lane = arith::RemUIOp::create(b, tid, idx(warpSize));
    warp = arith::DivUIOp::create(b, tid, idx(warpSize));
    for (int i = 0; i < 6; ++i)
      if (ws[i])
        flat[i] = flatWorkspace(b, ws[i]);
  }
  /// A static workgroup buffer.
  Value allocShared(ArrayRef<int64_t> shape, Type e) {
    auto wg = gpu::AddressSpaceAttr::get(b.getContext(),
                                         gpu::AddressSpace::Workgroup);
    return memref::AllocOp::create(
        b, MemRefType::get(shape, e, MemRefLayoutAttrInterface(), wg));
  }
  /// Where the program keeps the state and dS [K, VB] (stateLayout) and
  /// the chunk's rows U, V_new, O, dO [C, VB] (rowsLayout): split by V
  /// (rows of S^T over the warps) or by K (its columns; the rows a copy in
  /// every warp, stored by warp 0). AMD: every product untransposed
  /// (LaneTileBuilder::unitProduct), the state and the rows in the
  /// accumulator's layout, which is MFMA's B operand layout: W S, (Gamma Q)
  /// S, P V_new and (decayed k)^T V_new read their A operands from shared
  /// memory (P from registers) and take the state and V_new as they are.
  kda::LaneLayout stateLayout() const { return stateLayout(byK, VB); }
  kda::LaneLayout rowsLayout() const { return rowsLayout(byK, VB); }
  /// The same for a V block of `vb` columns split by K (`splitK`) or by V.
  kda::LaneLayout stateLayout(bool splitK, int64_t vb) const {
    using kda::LaneTileBuilder;
    const int64_t vPer = splitK ? vb : vb / NW, kPer = splitK ? K / NW : K;
    if (amd())
      return LaneTileBuilder::unitAccumulator(unit, kPer, vPer)
          .spread({K, vb}, {splitK ? kPer : 0, splitK ? 0 : vPer}, NW);
    return splitK ? LaneTileBuilder::mmaAccumulator(vb, K / NW, 1)
                        .spread({vb, K}, {0, K / NW}, NW)
                        .transposed()
                  : LaneTileBuilder::mmaAccumulator(vb, K, NW).transposed();
  }
  kda::LaneLayout rowsLayout(bool splitK, int64_t vb) const {
    using kda::LaneTileBuilder;
    const int64_t vPer = splitK ? vb : vb / NW;
    if (amd())
      return LaneTileBuilder::unitAccumulator(unit, C, vPer)
          .spread({C, vb}, {0, splitK ? 0 : vPer}, NW);
    return splitK ? LaneTileBuilder::mmaAccumulator(vb, C, 1)
                        .spread({vb, C}, {0, 0}, NW)
                        .transposed()
                  : LaneTileBuilder::mmaAccumulator(vb, C, NW).transposed();
  }
  /// The chunk's rows of `mem` [B, T, HV, V] at V columns col0 .. col0 + VB
  /// in `rowsL`, as f32, zeros past its `valid` rows (read at the last
  /// valid one).
  Value rowTile(kda::LaneTileBuilder &tb, const kda::LaneLayout &rowsL,
                Value mem, Value t0, Value valid, Value col0) {
    Value last = arith::SubIOp::create(b, valid, idx(1));
    SmallVector<Value> regs;
    for (int64_t r = 0; r < int64_t(rowsL.regs.size()); ++r) {
      Value c = tb.coordinate(rowsL, r, 0);
      Value v = tb.coordinate(rowsL, r, 1);
      Value x = toF32(memref::LoadOp::create(
          b, mem, ValueRange{row, add(t0, minu(c, last)), head, add(col0, v)}));
      regs.push_back(select(ult(c, valid), x, f32(0.0)));
    }
    return tb.make(rowsL, regs);
  }

  /// The reverse scan's dS before chunk `chunkIdx`'s step (the gradient of
  /// the state after it), into `dStates` [N, NT, HV, V, K] (V-major) at
  /// (n, chunkIdx, head): runs of a lane's registers consecutive along K
  /// (the accumulator's column pairs on NVIDIA) as one aligned vector.
  void storeDState(kda::LaneTileBuilder &tb, const kda::LaneLayout &layout,
                   Value chunkIdx, ArrayRef<Value> S) {
    // Split by K, every warp holds its own keys; by V, its own V rows: each
    // register is one element, stored once.
    for (auto [r0, len] : layout.vectorRuns(/*dim=*/0, /*most=*/4)) {
      Value key = tb.coordinate(layout, r0, 0);
      Value v = add(vCol, tb.coordinate(layout, r0, 1));
      kda::storeRowFromF32(b, b.getLoc(), dStates, {n, chunkIdx, head, v},
                           key, S.slice(r0, len));
    }
  }

  /// The gradient's step grid (kda.step_pass): one program per (sequence,
  /// chunk, value head), the tape's adjoint of emitStateStep with respect
  /// to the chunk's inputs, seeded at V_new with the reverse scan's dV_new,
  /// V block by V block: the state before the chunk from the kept states
  /// (`keptStates`), dS after it from the reverse scan's record
  /// (`dStates`), U, dO and dV_new (`seeds[5]`, the reverse scan's) rows in
  /// the rows' layout, W staged in shared memory once. The [C, K]
  /// gradients (dW, d(Gamma Q), d(decayed k)), dP and d(exp(g_last)) sum
  /// over the V blocks in registers. Out: `seeds[0..4]` [B, T, HV, width]
  /// f32 in the order dW, d(Gamma Q), d(decayed k), dP, d(exp(g_last))
  /// (the chunk's first row); null where absent. The forward's values the
  /// adjoint does not read (Gamma Q, the decayed k, P, exp(g_last)) are not
  /// loaded: their gradients do not depend on them.
  bool step = false;
  /// Loads each V block's inputs one block ahead (kda-compile
  /// --step-prefetch, a measuring knob).
  bool stepPrefetch = false;
  /// Sums across warps in two steps (kda-compile --step-scatter-sums).
  bool stepScatterSums = false;
  /// V_new of the whole chunk first (kda-compile --step-vnew-first): each
  /// warp V / warps columns of U - W S with all of K, into shared memory,
  /// then the V blocks read it there and take W as zeros (dW = -dV_new S^T
  /// does not read W): no sum across warps in the loop. Where V is a
  /// multiple of 16 x warps (otherwise W S per V block, summed).
  bool stepVNewFirst = false;
  /// Whether the step program takes V_new first: asked for, a delta rule
  /// (W, `ws[0]`, set) and V in whole 16-column blocks a warp.
  bool takesVNewFirst() const {
    return stepVNewFirst && ws[0] && cfg.valueDim % (16 * NW) == 0;
  }
  /// Stages of shared memory the step program's V blocks are copied into
  /// by cp.async, blocks ahead of their use (kda-compile --step-stages; 0:
  /// plain loads at their use). Where V_new comes first on NVIDIA.
  int64_t stepStages = 0;
  Value keptStates;
  Value seeds[6];

  /// One input of the step program's V blocks staged by cp.async: each
  /// warp copies the box of tile coordinates its own registers hold (the
  /// layout's warp 0 box moved by the warp's offset) into its own region
  /// of `buffer` [stages, warps, outer, inner + pad], `inner` being the
  /// tile dimension contiguous in memory. No warp reads another's pieces:
  /// a warp sync after the copies' wait orders them, no block barrier.
  struct StagedInput {
    kda::LaneLayout layout;
    int64_t lo[2] = {0, 0}, size[2] = {0, 0};
    /// The tile dimension contiguous in memory, the rows' padding
    /// (elements) and the elements of a 16-byte piece.
    int64_t inner = 1, pad = 0, per = 0;
    /// The layout as coordinates within the warp's box (warp bits dropped,
    /// less `lo`), and the box's origin in the block (a register at `lo`,
    /// the warp bits alone): LaneTileBuilder::coordinate emits both.
    kda::LaneLayout local, origin;
    /// The 16-byte pieces of outer row o sit at piece index i ^ x(o),
    /// x(o) = ((o >> xorShift) & xorMask) << xorScale (a swizzle: the
    /// pieces' copies and the registers' reads both free of bank
    /// conflicts where padding alone serves only one of them).
    int64_t xorShift = 0, xorMask = 0, xorScale = 0;
    Value mem, buffer;
    /// The chunk's rows (tile dimension 0 a row): zeros past `valid`.
    bool rows = false;
    /// mem's indices of tile coordinate (c0, c1) of the V block at `col`.
    std::function<SmallVector<Value>(Value, Value, Value)> at;
  };

  /// The box of coordinates warp 0 holds in `l`, if it holds every
  /// element of it.
  static bool warpBox(const kda::LaneLayout &l, int64_t (&lo)[2],
                      int64_t (&size)[2]) {
    std::set<std::pair<int64_t, int64_t>> seen;
    int64_t hi[2] = {INT64_MIN, INT64_MIN};
    lo[0] = lo[1] = INT64_MAX;
    for (int64_t r = 0; r < int64_t(l.regs.size()); ++r)
      for (int64_t lane = 0; lane < l.numLanes(); ++lane) {
        kda::LaneLayout::Coords c = l.at(r, lane, 0);
        seen.insert({c[0], c[1]});
        for (int d = 0; d < 2; ++d) {
          lo[d] = std::min(lo[d], c[d]);
          hi[d] = std::max(hi[d], c[d]);
        }
      }
    size[0] = hi[0] - lo[0] + 1;
    size[1] = hi[1] - lo[1] + 1;
    return int64_t(seen.size()) == size[0] * size[1];
  }

  /// Sets up `in` for its layout and element type (`elemBytes`); false
  /// where its box is not dense or its rows not whole 16-byte pieces.
  /// The row padding and swizzle are the ones with the fewest shared-memory
  /// wavefronts, counted on the host: every register's read (a word a
  /// lane) and every copy instruction's pieces (16 bytes a lane, a
  /// quarter-warp a wavefront at best); ties take the least memory.
  bool planStaged(StagedInput &in, int64_t elemBytes) {
    if (!warpBox(in.layout, in.lo, in.size))
      return false;
    const int64_t per = in.per = 16 / elemBytes;
    if (in.size[in.inner] % per || in.lo[in.inner] % per)
      return false;
    in.local = in.layout;
    for (kda::LaneLayout::Coords &c : in.local.regs)
      for (int d = 0; d < 2; ++d)
        c[d] -= in.lo[d];
    for (kda::LaneLayout::Coords &c : in.local.warps)
      c.assign(2, 0);
    in.origin = in.layout;
    in.origin.regs.assign(1, {in.lo[0], in.lo[1]});
    for (kda::LaneLayout::Coords &c : in.origin.lanes)
      c.assign(2, 0);
    const int64_t outerDim = 1 - in.inner;
    const int64_t pieces = in.size[in.inner] / per;
    const int64_t rows = in.size[outerDim];
    auto maxPerBank = [](const std::map<int64_t, std::set<int64_t>> &banks) {
      int64_t worst = 0;
      for (auto &[bank, words] : banks)
        worst = std::max<int64_t>(worst, words.size());
      return worst;
    };
    int64_t best = -1;
    for (int64_t pad = 0; pad <= 2 * per; pad += per)
      for (int64_t shift = 0; shift < 4; ++shift)
        for (int64_t mask = 0; mask < pieces; mask = mask * 2 + 1)
          for (int64_t scale = 0;
               scale == 0 || (mask && (mask << scale) < pieces);
               ++scale) {
            if (mask == 0 && shift)
              break;
            const int64_t stride = in.size[in.inner] + pad;
            auto word = [&](int64_t o, int64_t i) {
              int64_t x = ((o >> shift) & mask) << scale;
              int64_t at = ((i / per) ^ x) * per + i % per;
              return (o * stride + at) * elemBytes / 4;
            };
            int64_t cost = 0;
            for (int64_t r = 0; r < int64_t(in.layout.regs.size()); ++r) {
              std::map<int64_t, std::set<int64_t>> banks;
              for (int64_t lane = 0; lane < in.layout.numLanes(); ++lane) {
                kda::LaneLayout::Coords c = in.layout.at(r, lane, 0);
                int64_t w = word(c[outerDim] - in.lo[outerDim],
                                 c[in.inner] - in.lo[in.inner]);
                banks[w % 32].insert(w);
              }
              cost += maxPerBank(banks);
            }
            for (int64_t p0 = 0; p0 < rows * pieces; p0 += warpSize)
              for (int64_t q = 0; q < warpSize; q += 8) {
                std::map<int64_t, std::set<int64_t>> banks;
                for (int64_t p = p0 + q; p < std::min(p0 + q + 8, rows * pieces);
                     ++p)
                  for (int64_t e = 0; e < 16 / 4; ++e) {
                    int64_t w = word(p / pieces, (p % pieces) * per) + e;
                    banks[w % 32].insert(w);
                  }
                cost += maxPerBank(banks);
              }
            if (best < 0 || cost < best) {
              best = cost;
              in.pad = pad;
              in.xorShift = shift;
              in.xorMask = mask;
              in.xorScale = scale;
            }
          }
    return true;
  }

  /// The buffer's inner index of element `i` of outer row `o` (swizzled).
  Value stagedInner(const StagedInput &in, Value o, Value i) {
    const int64_t per = in.per;
    if (in.xorMask == 0)
      return i;
    Value x = arith::ShLIOp::create(
        b,
        arith::AndIOp::create(b, arith::ShRUIOp::create(b, o, idx(in.xorShift)),
                              idx(in.xorMask)),
        idx(in.xorScale));
    Value piece = arith::XOrIOp::create(
        b, arith::DivUIOp::create(b, i, idx(per)), x);
    return add(mul(piece, per), arith::RemUIOp::create(b, i, idx(per)));
  }

  /// Issues the copies of the V block at `col` into stage `stage` of
  /// `in`'s buffer (this warp's box; rows past `valid` zero-filled).
  void issueStaged(kda::LaneTileBuilder &tb, StagedInput &in, Value stage,
                   Value col, Value valid) {
    const int64_t per = in.per;
    const int64_t outerDim = 1 - in.inner;
    const int64_t pieces = in.size[in.inner] / per;
    Value off[2] = {tb.coordinate(in.origin, 0, 0),
                    tb.coordinate(in.origin, 0, 1)};
    Value last = in.rows ? arith::SubIOp::create(b, valid, idx(1)) : Value();
    forEachPiece(lane, warpSize, in.size[outerDim] * pieces, [&](Value p) {
      Value o = arith::DivUIOp::create(b, p, idx(pieces));
      Value i = mul(arith::RemUIOp::create(b, p, idx(pieces)), per);
      Value c[2];
      c[outerDim] = add(off[outerDim], o);
      c[in.inner] = add(off[in.inner], i);
      Value count = idx(per);
      if (in.rows) {
        count = select(ult(c[0], valid), idx(per), idx(0));
        c[0] = minu(c[0], last);
      }
      nvgpu::DeviceAsyncCopyOp::create(
          b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), in.buffer,
          ValueRange{stage, warp, o, stagedInner(in, o, i)}, in.mem,
          in.at(c[0], c[1], col), b.getIndexAttr(per), count,
          /*bypassL1=*/b.getUnitAttr());
    });
  }

  /// `in`'s registers in its layout from stage `stage`, as f32.
  SmallVector<Value> readStaged(kda::LaneTileBuilder &tb, StagedInput &in,
                                Value stage) {
    const int64_t outerDim = 1 - in.inner;
    SmallVector<Value> regs;
    for (int64_t r = 0; r < int64_t(in.local.regs.size()); ++r) {
      Value o = tb.coordinate(in.local, r, outerDim);
      Value i = tb.coordinate(in.local, r, in.inner);
      regs.push_back(toF32(memref::LoadOp::create(
          b, in.buffer, ValueRange{stage, warp, o, stagedInner(in, o, i)})));
    }
    return regs;
  }

  /// Stores the rows below `valid` of a [C, D] register tile at
  /// mem[row, t0 + i, head, col0 + j], each element once (its first copy).
  void storeRows(kda::LaneTileBuilder &tb, Value tile, Value mem, Value t0,
                 Value valid, Value col0) {
    const kda::LaneLayout &l = tb.layoutOf(tile);
    ArrayRef<Value> regs = tb.registersOf(tile);
    Value first = tb.holdsFirstCopy(l);
    for (int64_t r = 0; r < int64_t(l.regs.size()); ++r) {
      Value i = tb.coordinate(l, r, 0), j = tb.coordinate(l, r, 1);
      auto keep = scf::IfOp::create(
          b, arith::AndIOp::create(b, first, ult(i, valid)), false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(keep.thenBlock());
      memref::StoreOp::create(b, regs[r], mem,
                              ValueRange{row, add(t0, i), head, add(col0, j)});
    }
  }

  /// Stores every element of `tile` once (the lanes holding its first
  /// copy) at mem[at(layout, register)].
  void storeOnce(
      kda::LaneTileBuilder &tb, Value tile, Value mem,
      function_ref<SmallVector<Value>(const kda::LaneLayout &, int64_t)> at) {
    const kda::LaneLayout &l = tb.layoutOf(tile);
    ArrayRef<Value> regs = tb.registersOf(tile);
    Value first = tb.holdsFirstCopy(l);
    auto keep = scf::IfOp::create(b, first, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(keep.thenBlock());
    for (int64_t r = 0; r < int64_t(l.regs.size()); ++r)
      memref::StoreOp::create(b, regs[r], mem, at(l, r));
  }

  std::string emitStep(ArrayRef<Value> ivs) {
    Type f32Type = b.getF32Type();
    n = ivs[0];
    Value chunkIdx = ivs[1];
    head = ivs[2];
    tokens = memref::DimOp::create(b, dO, 1);
    heads = memref::DimOp::create(b, dO, 2);
    std::tie(row, start, length) = sequenceBounds(b, n, tokens, cuSeqlens);
    Value local = mul(chunkIdx, C);
    // Programs past their sequence's end have nothing to do (uniform over
    // the block: the barriers inside are safe).
    auto live = scf::IfOp::create(b, ult(local, length), false);
    OpBuilder::InsertionGuard liveGuard(b);
    b.setInsertionPointToStart(live.thenBlock());
    Value t0 = add(start, local);
    Value valid = minu(idx(C), arith::SubIOp::create(b, length, local));
    beginProgram();
    auto alloc = [&](ArrayRef<int64_t> shape, Type e) {
      return allocShared(shape, e);
    };
    Type opType = operandType();
    const int64_t kRow = K + (opType.isF32() ? kPad32 : kPad16);
    // One chunk's W, read by every V block's W S (V_new's value, which
    // the decayed k's and P's gradients read). Nothing reads the decayed k,
    // P or Gamma Q: their gradients are products of V_new, dV_new, dO, S
    // and dS alone.
    Value stage = idx(0);
    // V_new's buffer (V_new first, below), allocated before anything phase
    // one reads: the shared-memory arena (kda-gpu-map-kernels) gives a
    // buffer the bytes of one whose last use came before its first, and W's
    // and the exchange's last reads are phase one's, which other warps may
    // still be running when a warp stores V_new (no block barrier between).
    const bool vNewFirst = takesVNewFirst();
    Value shVNew;
    // (Rows padded by 4 words: the V blocks read it as B operands, lane
    // group g a row, and unpadded rows of 128 words put all eight rows in
    // one bank: 8-way conflicts, Nsight Compute, thirty-fourth session.)
    if (vNewFirst)
      shVNew = alloc({C, cfg.valueDim + 4}, f32Type);
    if (ws[0]) {
      shW = alloc({1, C, kRow}, opType);
      issueRows(0, shW, stage, t0, valid, C, K * operandBytes() / 16, {},
                true);
      NVVM::CpAsyncCommitGroupOp::create(b);
    }
    // W's copies land before its first reader (with `stepPrefetch`, after
    // the first two V blocks' loads are issued; with V_new first, after
    // phase one's loads are issued, `later` groups of copies committed
    // after W's still in flight).
    bool wLanded = false;
    auto awaitW = [&](int64_t later = 0) {
      if (!ws[0] || wLanded)
        return;
      NVVM::CpAsyncWaitGroupOp::create(b, later);
      gpu::BarrierOp::create(b);
      wLanded = true;
    };
    if (!stepPrefetch && !vNewFirst)
      awaitW();

    kda::LaneTileBuilder tb(b, warpSize, NW, lane, warp);
    tb.useMmaSync(opType, !singleTf32);
    tb.useScatterSums(stepScatterSums);
    using kda::LaneLayout;
    // The state program's layouts (split by K or by V, as its workspaces
    // say): the state and dS [K, VB], the rows U, dO [C, VB].
    if (byK)
      tb.useScratch(alloc({2 * NW * VB * C}, f32Type));
    // Conversions within a warp that shuffles cannot make (the products'
    // fragments of a copy in every warp): each warp's region holds its
    // part of the largest such tile, rows padded by one.
    const int64_t wide = std::max({C, K / NW, VB});
    tb.useExchange(alloc({NW * wide * (wide + 1)}, f32Type));
    // With V_new first, every product of a V block runs transposed on a
    // split-K operand (d(Gamma Q) = dO S^T as S dO^T, ...): the state and
    // dS come as the A operands [K, VB] (the warps' keys the rows), the
    // rows U / V_new, dO and dV_new as the B operands of their transposes,
    // loaded so (global and shared loads take any layout), not converted.
    const bool operandLoads = vNewFirst && byK && !amd();
    const LaneLayout stateL =
        operandLoads ? kda::LaneTileBuilder::mmaOperandA(K, VB, NW)
                     : stateLayout();
    const LaneLayout rowsL =
        operandLoads
            ? kda::LaneTileBuilder::mmaOperandB(VB, C, NW).transposed()
            : rowsLayout();
    const LaneLayout gL = stateL.slice(0);

    kda::IntraChunk intra;
    if (ws[0])
      intra.w = tb.makeShared(shW, ValueRange{stage}, {C, K});
    // Their gradients do not read Gamma Q, the decayed k or P: zeros in
    // their places (the tape tells tiles apart by handle), copies in every
    // warp (as shared operands would be: the products run transposed, and
    // their results are where they were), so that the forward's products
    // of them, which nothing reads, are none (LaneTileBuilder's zero
    // operands) and (Gamma Q) S no sum across the warps.
    auto standIn = [&](int64_t cols) {
      LaneLayout l = kda::LaneTileBuilder::mmaOperandA(C, cols, 1)
                         .spread({C, cols}, {0, 0}, NW);
      return tb.make(l, SmallVector<Value>(l.regs.size(), f32(0.0)));
    };
    intra.qDecayed = standIn(K);
    intra.kToEnd = standIn(K);
    intra.p = standIn(C);
    if (seeds[4])
      intra.decayLast =
          tb.make(gL, SmallVector<Value>(gL.regs.size(), f32(0.0)));

    const int64_t blocks = cfg.valueDim / VB;
    // Staged V blocks (--step-stages): the state, dS, dO and dV_new of the
    // first blocks are in flight while phase one computes V_new, and each
    // V block's copies are issued stages - 1 blocks ahead of its use.
    const int64_t S = stepStages;
    SmallVector<StagedInput, 4> staged;
    if (S > 0 && operandLoads) {
      auto addStaged = [&](const LaneLayout &l, Value mem, int64_t inner,
                       bool rows,
                       std::function<SmallVector<Value>(Value, Value, Value)>
                           at) {
        StagedInput in;
        in.layout = l;
        in.mem = mem;
        in.inner = inner;
        in.rows = rows;
        in.at = std::move(at);
        Type e = cast<MemRefType>(mem.getType()).getElementType();
        if (!planStaged(in, e.getIntOrFloatBitWidth() / 8))
          return false;
        const int64_t outerDim = 1 - inner;
        in.buffer = alloc({S, NW, in.size[outerDim], in.size[inner] + in.pad},
                          e);
        staged.push_back(std::move(in));
        return true;
      };
      Value chunk = chunkIdx;
      auto rowsAt = [&](Value c, Value v, Value col) {
        return SmallVector<Value>{row, add(t0, c), head, add(col, v)};
      };
      bool ok =
          addStaged(stateL, keptStates, cfg.vMajor ? 0 : 1, false,
                [&, chunk](Value key, Value v, Value col) {
                  return cfg.vMajor
                             ? SmallVector<Value>{n, chunk, head,
                                                  add(col, v), key}
                             : SmallVector<Value>{n, chunk, head, key,
                                                  add(col, v)};
                }) &&
          addStaged(stateL, dStates, 0, false,
                [&, chunk](Value key, Value v, Value col) {
                  return SmallVector<Value>{n, chunk, head, add(col, v),
                                            key};
                }) &&
          addStaged(rowsL, dO, 1, true, rowsAt) &&
          addStaged(rowsL, seeds[5], 1, true, rowsAt);
      if (!ok)
        return "step-stages: a V block's input is not a dense box of each "
               "warp's 16-byte pieces in the step program's layouts";
      for (int64_t s = 0; s + 1 < S; ++s) {
        if (s < blocks)
          for (StagedInput &in : staged)
            issueStaged(tb, in, idx(s), idx(s * VB), valid);
        NVVM::CpAsyncCommitGroupOp::create(b);
      }
    }

    // V_new = U - W S of the whole chunk, split by V (every warp all of K:
    // no sum across warps), into shared memory [C, V]; the V blocks then
    // read their columns there and take W as zeros, whose products are
    // none (W's gradient, -dV_new S^T, does not read W).
    if (vNewFirst) {
      const int64_t V = cfg.valueDim;
      const LaneLayout sAll = stateLayout(/*splitK=*/false, V);
      const LaneLayout uAll = rowsLayout(/*splitK=*/false, V);
      // The whole state, a lane's runs of registers consecutive along the
      // kept states' inner dimension as one aligned vector (V-major: the
      // accumulator's key pairs, one 8-byte load for two 4-byte ones; the
      // rows are aligned, requireAlignedRows).
      SmallVector<Value> sRegs;
      for (auto [r0, len] : sAll.vectorRuns(cfg.vMajor ? 0 : 1, /*most=*/4)) {
        Value key = tb.coordinate(sAll, r0, 0), v = tb.coordinate(sAll, r0, 1);
        llvm::append_range(
            sRegs, kda::loadRowAsF32(b, b.getLoc(), keptStates,
                                     {n, chunkIdx, head, cfg.vMajor ? v : key},
                                     cfg.vMajor ? key : v, len));
      }
      kda::IntraChunk whole;
      whole.w = intra.w;
      whole.u = rowTile(tb, uAll, ws[1], t0, valid, idx(0));
      // (The state's and U's loads are in flight while W lands.)
      awaitW(staged.empty() ? 0 : S - 1);
      Value vNew = kda::emitNewValues(tb, whole, tb.make(sAll, sRegs));
      if (!tb.failure().empty())
        return tb.failure();
      storeOnce(tb, vNew, shVNew, [&](const LaneLayout &l, int64_t r) {
        return SmallVector<Value>{tb.coordinate(l, r, 0),
                                  tb.coordinate(l, r, 1)};
      });
      gpu::BarrierOp::create(b);
      intra.w = standIn(K);
    }

    // A V block's inputs at column `col`, as registers: the state and dS
    // [K, VB] in the state's layout, then U, dO and dV_new [C, VB] in the
    // rows'. (Loaded a block ahead of their use where `prefetch` says: the
    // program is one block per multiprocessor, and a block's loads stalled
    // every warp at the next barrier.)
    const int64_t stateRegs = stateL.regs.size(), rowRegs = rowsL.regs.size();
    auto vNewRegs = [&](Value col) {
      SmallVector<Value> regs;
      for (int64_t r = 0; r < rowRegs; ++r)
        regs.push_back(memref::LoadOp::create(
            b, shVNew,
            ValueRange{tb.coordinate(rowsL, r, 0),
                       add(col, tb.coordinate(rowsL, r, 1))}));
      return regs;
    };
    // Block `j` from its stage, after issuing block j + S - 1's copies
    // (the warp's own pieces: its wait and a warp sync order them).
    auto stagedBlock = [&](Value j) {
      Value next = add(j, S - 1);
      // The copies below overwrite the stage the previous block read: a
      // warp sync first, so no lane's copy lands before every lane's read
      // (racecheck's intra-warp hazards without it).
      NVVM::SyncWarpOp::create(
          b, arith::ConstantOp::create(b, b.getI32IntegerAttr(-1)));
      {
        auto more = scf::IfOp::create(b, ult(next, idx(blocks)), false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(more.thenBlock());
        Value at = arith::RemUIOp::create(b, next, idx(S));
        for (StagedInput &in : staged)
          issueStaged(tb, in, at, mul(next, VB), valid);
      }
      NVVM::CpAsyncCommitGroupOp::create(b);
      NVVM::CpAsyncWaitGroupOp::create(b, S - 1);
      NVVM::SyncWarpOp::create(
          b, arith::ConstantOp::create(b, b.getI32IntegerAttr(-1)));
      Value at = arith::RemUIOp::create(b, j, idx(S));
      SmallVector<Value> regs = readStaged(tb, staged[0], at);
      llvm::append_range(regs, readStaged(tb, staged[1], at));
      llvm::append_range(regs, vNewRegs(mul(j, VB)));
      llvm::append_range(regs, readStaged(tb, staged[2], at));
      llvm::append_range(regs, readStaged(tb, staged[3], at));
      return regs;
    };
    auto loadBlock = [&](Value col) {
      SmallVector<Value> regs(2 * stateRegs);
      for (int64_t r = 0; r < stateRegs; ++r) {
        Value key = tb.coordinate(stateL, r, 0);
        Value v = add(col, tb.coordinate(stateL, r, 1));
        regs[r] = toF32(memref::LoadOp::create(
            b, keptStates,
            cfg.vMajor ? ValueRange{n, chunkIdx, head, v, key}
                       : ValueRange{n, chunkIdx, head, key, v}));
        regs[stateRegs + r] = toF32(memref::LoadOp::create(
            b, dStates, ValueRange{n, chunkIdx, head, v, key}));
      }
      for (Value mem : {ws[1], dO, seeds[5]}) {
        if (mem == ws[1] && shVNew) {
          // V_new's columns (U's place: emitNewValues of a zero W).
          llvm::append_range(regs, vNewRegs(col));
          continue;
        }
        llvm::append_range(
            regs, tb.registersOf(rowTile(tb, rowsL, mem, t0, valid, col)));
      }
      return regs;
    };
    // One V block at column `col` from its loaded registers: the gradients
    // (null where absent), or the builder's refusal.
    std::string why;
    auto stepBlock = [&](Value col, ArrayRef<Value> regs)
        -> std::optional<SmallVector<Value>> {
      vCol = col;
      auto part = [&](const LaneLayout &l, int64_t at, int64_t count) {
        return tb.make(l, SmallVector<Value>(regs.slice(at, count)));
      };
      intra.u = part(rowsL, 2 * stateRegs, rowRegs);
      Value dORows = part(rowsL, 2 * stateRegs + rowRegs, rowRegs);
      Value dVNew = part(rowsL, 2 * stateRegs + 2 * rowRegs, rowRegs);
      FailureOr<kda::StateStepGrads> g = kda::emitStateStepAdjoint(
          tb, intra, part(stateL, 0, stateRegs), dORows,
          part(stateL, stateRegs, stateRegs), kda::StepAdjointOf::Inputs, why,
          dVNew);
      if (failed(g) || !tb.failure().empty())
        return std::nullopt;
      return SmallVector<Value>{g->dW, g->dQDecayed, g->dKToEnd, g->dP,
                                g->dDecayLast};
    };
    const int64_t loadedRegs = 2 * stateRegs + 3 * rowRegs;
    // Block `j`'s loads where j < blocks, zeros past the last (one branch,
    // uniform over the block).
    auto loadIfBlock = [&](Value j) -> SmallVector<Value> {
      SmallVector<Type> types(loadedRegs, f32Type);
      auto more = scf::IfOp::create(b, types, ult(j, idx(blocks)), true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(more.thenBlock());
      scf::YieldOp::create(b, loadBlock(mul(j, VB)));
      b.setInsertionPointToStart(more.elseBlock());
      scf::YieldOp::create(b, SmallVector<Value>(loadedRegs, f32(0.0)));
      return SmallVector<Value>(more.getResults());
    };
    auto addTiles = [&](Value x, Value y) {
      return tb.map(tb.shape(x), {x, y},
                    [](ImplicitLocOpBuilder &bb, ValueRange s,
                       ValueRange) -> Value {
                      return arith::AddFOp::create(bb, s[0], s[1]);
                    });
    };
    // Block 0 gives the sums' layouts; the other blocks run as a loop
    // carrying the sums' registers (unrolled, ptxas hoisted the blocks'
    // loads over each other and spilled 612 bytes at 255 registers).
    // Block 0 gives the sums' layouts; the other blocks run as a loop
    // carrying the sums' registers and, with `stepPrefetch`, the next
    // block's loads.
    SmallVector<Value> first =
        staged.empty() ? loadBlock(idx(0)) : stagedBlock(idx(0));
    SmallVector<Value> ahead;
    if (stepPrefetch && staged.empty()) {
      if (blocks > 1)
        ahead = loadBlock(idx(VB));
      awaitW();
    }
    std::optional<SmallVector<Value>> block0 = stepBlock(idx(0), first);
    if (!block0)
      return why.empty() ? tb.failure() : why;
    SmallVector<Value> sums = *block0;
    if (blocks > 1) {
      SmallVector<LaneLayout> layouts;
      SmallVector<Value> init;
      for (Value s : sums) {
        if (!s)
          continue;
        layouts.push_back(tb.layoutOf(s));
        llvm::append_range(init, tb.registersOf(s));
      }
      const size_t sumRegs = init.size();
      llvm::append_range(init, ahead);
      auto loop = scf::ForOp::create(b, idx(1), idx(blocks), idx(1), init);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(loop.getBody());
        ValueRange carriedArgs = loop.getRegionIterArgs();
        // (The sums across warps take the scratch's halves in turn: a
        // barrier at the top keeps an iteration's first sum off the half
        // the previous one's last sum still reads.)
        auto top = gpu::BarrierOp::create(b);
        Value j = loop.getInductionVar();
        SmallVector<Value> loaded, next;
        if (!staged.empty()) {
          loaded = stagedBlock(j);
        } else if (stepPrefetch) {
          next = loadIfBlock(add(j, 1));
          loaded.assign(carriedArgs.begin() + sumRegs, carriedArgs.end());
        } else {
          loaded = loadBlock(mul(j, VB));
        }
        std::optional<SmallVector<Value>> g = stepBlock(mul(j, VB), loaded);
        if (!g) {
          scf::YieldOp::create(b, carriedArgs);
          return why.empty() ? tb.failure() : why;
        }
        SmallVector<Value> yielded;
        size_t at = 0, l = 0;
        for (auto [s, x] : llvm::zip(sums, *g)) {
          if (!s)
            continue;
          const LaneLayout &layout = layouts[l++];
          const size_t count = layout.regs.size();
          Value carried = tb.make(
              layout, SmallVector<Value>(carriedArgs.slice(at, count)));
          at += count;
          llvm::append_range(yielded,
                             tb.convertLayout(addTiles(carried, x), layout));
        }
        if (!tb.failure().empty()) {
          scf::YieldOp::create(b, carriedArgs);
          return tb.failure();
        }
        llvm::append_range(yielded, next);
        scf::YieldOp::create(b, yielded);
        // A body without sums across warps (V_new first) touches no
        // shared memory another warp writes: no barrier at its top.
        bool sums = false;
        loop.getBody()->walk([&](gpu::BarrierOp other) {
          sums |= other != top;
        });
        if (!sums)
          top.erase();
      }
      size_t at = 0, l = 0;
      for (Value &s : sums) {
        if (!s)
          continue;
        const LaneLayout &layout = layouts[l++];
        const size_t count = layout.regs.size();
        s = tb.make(layout, SmallVector<Value>(
                                ValueRange(loop.getResults()).slice(at, count)));
        at += count;
      }
    }
    if (!tb.failure().empty())
      return tb.failure();
    // The sums' rows, each element once.
    Value zero = idx(0);
    for (int k = 0; k < 4; ++k)
      if (sums[k] && seeds[k])
        storeRows(tb, sums[k], seeds[k], t0, valid, zero);
    if (sums[4] && seeds[4]) {
      // d(exp(g_last)) [K] in the chunk's first row.
      storeOnce(tb, sums[4], seeds[4], [&](const LaneLayout &l, int64_t r) {
        return SmallVector<Value>{row, t0, head, tb.coordinate(l, r, 0)};
      });
    }
    return "";
  }

  /// Emits the program; returns the builder's refusal (empty on success).
  std::string emit(ArrayRef<Value> ivs) {
    Type f32Type = b.getF32Type();
    n = ivs[0];
    head = ivs[1];
    vCol = mul(ivs[2], VB);
    const int64_t P = cfg.segments;
    if (P > 1) {
      segment = arith::RemUIOp::create(b, n, idx(P));
      n = arith::DivUIOp::create(b, n, idx(P));
    }
    Value rows = reverse ? dO : cfg.summary ? values : o; // [B, T, HV, V]
    tokens = memref::DimOp::create(b, rows, 1);
    heads = memref::DimOp::create(b, rows, 2);
    std::tie(row, start, length) = sequenceBounds(b, n, tokens, cuSeqlens);
    if (P > 1) {
      // The program's segment, whole chunks (the tile program's runs).
      kda::SequenceLayout::Bounds run =
          kda::segmentBounds(b, {row, start, length}, segment, P, C);
      start = run.start;
      length = run.length;
    }
    // A summary's transition blocks (past V) read U at column 0 and take
    // it as zero.
    Value transition;
    if (cfg.summary) {
      transition = arith::CmpIOp::create(b, arith::CmpIPredicate::uge, vCol,
                                         idx(cfg.valueDim));
      uCol = arith::SelectOp::create(b, transition, idx(0), vCol);
    } else {
      uCol = vCol;
    }
    beginProgram();
    auto alloc = [&](ArrayRef<int64_t> shape, Type e) {
      return allocShared(shape, e);
    };
    Type opType = operandType();
    const int64_t kRow = K + (opType.isF32() ? kPad32 : kPad16);
    if (ws[0])
      shW = alloc({stages, C, kRow}, opType);
    shQ = alloc({stages, C, kRow}, opType);
    shK = alloc({stages, C, kRow}, opType);
    if (!reverse || ws[1]) {
      // U's rows (the reverse scan's staged dO rows) in ws[1]'s type: bf16 U
      // for 16-bit inputs (cp.async copies bytes, readTile widens). Rows of
      // VB plus 16 bytes.
      Type rowType = ws[1] ? cast<MemRefType>(ws[1].getType()).getElementType()
                           : f32Type;
      shU = alloc({stages, C, VB + 128 / rowType.getIntOrFloatBitWidth()},
                  rowType);
    }
    shP = alloc({stages, C, C + kPad32}, f32Type);
    if (ws[5])
      shG = alloc({stages, K}, f32Type);

    kda::LaneTileBuilder tb(b, warpSize, NW, lane, warp);
    if (amd())
      tb.useMatrixUnit(unit, opType, emulated);
    else
      tb.useMmaSync(opType, !(reverse && singleTf32));
    using kda::LaneLayout;
    using kda::LaneTileBuilder;
    if (byK) {
      // Two halves for the sums of W S and Gamma Q S (one barrier each);
      // the staging barrier at the top of the chunk loop keeps them apart.
      Value scratch = alloc({2 * NW * VB * C}, f32Type);
      tb.useScratch(scratch);
    }
    const LaneLayout stateL = stateLayout(), rowsL = rowsLayout(); // U, O
    // (NVIDIA's P operand; AMD's products read P from shared memory.)
    const LaneLayout pL = LaneTileBuilder::mmaOperandB(C, C, NW).transposed();
    const LaneLayout gL = stateL.slice(0);

    // The initial state.
    SmallVector<Value> S;
    for (int64_t r = 0; r < int64_t(stateL.regs.size()); ++r) {
      if (cfg.summary) {
        // The identity's column (vCol + v - V) on transition blocks.
        Value key = tb.coordinate(stateL, r, 0);
        Value col = add(vCol, tb.coordinate(stateL, r, 1));
        Value onDiag = arith::CmpIOp::create(
            b, arith::CmpIPredicate::eq, add(key, idx(cfg.valueDim)), col);
        S.push_back(select(arith::AndIOp::create(b, transition, onDiag),
                           f32(1.0), f32(0.0)));
        continue;
      }
      if (cfg.segments > 1) {
        Value key = tb.coordinate(stateL, r, 0);
        Value col = add(vCol, tb.coordinate(stateL, r, 1));
        S.push_back(memref::LoadOp::create(
            b, starts, ValueRange{n, segment, head, key, col}));
        continue;
      }
      if (!h0) {
        S.push_back(f32(0.0));
        continue;
      }
      S.push_back(toF32(memref::LoadOp::create(
          b, h0,
          stateIndex(tb.coordinate(stateL, r, 0), tb.coordinate(stateL, r, 1)))));
    }

    Value numChunks = arith::CeilDivUIOp::create(b, length, idx(C));
    // The layer's progress: thread 0 zeroes this program's counter, then
    // counts the program as started (the fence orders the two for the
    // window, which the runtime launches once every program has started).
    Value vBlock, firstThread;
    auto publish = [&](Value chunksDone) {
      auto one = scf::IfOp::create(b, firstThread, false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(one.thenBlock());
      // Release: the outputs every thread stored before the barrier that
      // precedes this (cumulative through it) before the count.
      LLVM::FenceOp::create(b, LLVM::AtomicOrdering::acq_rel, "device");
      memref::AtomicRMWOp::create(
          b, arith::AtomicRMWKind::assign,
          arith::IndexCastUIOp::create(b, b.getI32Type(), chunksDone), progress,
          ValueRange{row, head, vBlock});
    };
    if (progress) {
      vBlock = arith::DivUIOp::create(b, vCol, idx(VB));
      firstThread = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tid,
                                          idx(0));
      auto one = scf::IfOp::create(b, firstThread, false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(one.thenBlock());
      memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::assign, i32(0),
                                  progress, ValueRange{row, head, vBlock});
      LLVM::FenceOp::create(b, LLVM::AtomicOrdering::acq_rel, "device");
      Value startedAt =
          memref::DimOp::create(b, progress, 2); // V / VB + 1
      memref::AtomicRMWOp::create(
          b, arith::AtomicRMWKind::addi, i32(1), progress,
          ValueRange{idx(0), idx(0),
                     arith::SubIOp::create(b, startedAt, idx(1))});
    }
    // The chunk of step j: j, or (reverse) numChunks - 1 - j.
    auto chunkOf = [&](Value j) -> Value {
      if (!reverse)
        return j;
      return arith::SubIOp::create(
          b, arith::SubIOp::create(b, numChunks, idx(1)), j);
    };
    // Chunks 0 .. stages - 2 in flight, one commit group each (empty past
    // the sequence's end, so that every wait below counts the same groups).
    for (int64_t j = 0; j + 1 < stages; ++j) {
      {
        auto first = scf::IfOp::create(b, ult(idx(j), numChunks), false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(first.thenBlock());
        issue(chunkOf(idx(j)), idx(j));
      }
      if (!amd())
        NVVM::CpAsyncCommitGroupOp::create(b);
    }
    // The reverse scan's dO rows of chunk chunkOf(j) (zeros past the
    // sequence's end and for j past the last step), with `prefetch` loaded
    // a step ahead and carried by the loop: the step's one global load, off
    // the sequential chain.
    const int64_t rowRegs = rowsL.regs.size();
    auto dORowsOf = [&](Value j) -> SmallVector<Value> {
      SmallVector<Type> types(rowRegs, f32Type);
      auto in = scf::IfOp::create(b, types, ult(j, numChunks), true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(in.thenBlock());
      Value c = chunkOf(j);
      Value local = mul(c, C);
      Value valid = minu(idx(C), arith::SubIOp::create(b, length, local));
      scf::YieldOp::create(
          b, tb.registersOf(
                 rowTile(tb, rowsL, dO, add(start, local), valid, vCol)));
      b.setInsertionPointToStart(in.elseBlock());
      scf::YieldOp::create(b, SmallVector<Value>(rowRegs, f32(0.0)));
      return SmallVector<Value>(in.getResults());
    };
    const bool dOAhead = reverse && reversePrefetch;
    SmallVector<Value> carried(S);
    if (dOAhead)
      llvm::append_range(carried, dORowsOf(idx(0)));
    // Chunk i's stage, i mod stages. With rotateStageIndex (kda-compile
    // --state-rotate-stages), where stages is not a power of two (3: the
    // shape policy's choice for long sequences), it is carried by the loop
    // as an i32 and rotated (a compare and a select a step) instead of the
    // remainders of the 64-bit chunk index (two wide divisions a step, 50 of
    // the sequential step's 411 instructions at T = 32768; ncu, forty-third
    // session). Fewer instructions, and yet 17 to 20 % slower on the H100
    // where the state pass is the long part (forty-fourth session): off. A
    // power of two's remainder is an and.
    const bool rotateStages = rotateStageIndex && (stages & (stages - 1)) != 0;
    auto i32c = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(b, v, 32);
    };
    if (rotateStages)
      carried.push_back(i32c(0));
    // Staged outputs: two buffers of the chunk's [C, VB] rows (16-byte
    // aligned rows plus 16 bytes against bank conflicts), chunk j's in
    // buffer j mod 2; copyOut stores chunk j's valid rows as 16-byte
    // pieces, every thread its share.
    const bool staged = stagedOutput && !reverse && !cfg.summary && o;
    Value shO;
    Type oType = o ? cast<MemRefType>(o.getType()).getElementType() : Type();
    const int64_t oBytes = o ? oType.getIntOrFloatBitWidth() / 8 : 0;
    if (staged)
      shO = allocShared({2, C, VB + 16 / oBytes}, oType);
    auto copyOut = [&](Value j) {
      const int64_t per = 16 / oBytes, pieces = VB / per;
      Value buffer = arith::RemUIOp::create(b, j, idx(2));
      auto [t0, valid] = chunkRows(chunkOf(j));
      forEachPiece(tid, threads(), C * pieces, [&](Value p) {
        Value c = arith::DivUIOp::create(b, p, idx(pieces));
        Value v = mul(arith::RemUIOp::create(b, p, idx(pieces)), per);
        auto keep = scf::IfOp::create(b, ult(c, valid), false);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(keep.thenBlock());
        auto vt = VectorType::get({per}, oType);
        Value x = vector::LoadOp::create(b, vt, shO, ValueRange{buffer, c, v});
        vector::StoreOp::create(b, x, o,
                                ValueRange{row, add(t0, c), head, add(vCol, v)},
                                /*nontemporal=*/false, llvm::MaybeAlign(16));
      });
    };
    auto loop = scf::ForOp::create(b, idx(0), numChunks, idx(1), carried);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value i = loop.getInductionVar();
      auto rotated = [&](Value at, Value wrapAt, int64_t wrapTo,
                         int64_t step) -> Value {
        Value wraps = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, at,
                                            wrapAt);
        return select(wraps, i32c(wrapTo),
                      arith::AddIOp::create(b, at, i32c(step)));
      };
      // Chunk i's stage, the next chunk's, and the stage chunk
      // i + stages - 1 lands in (the one before chunk i's).
      Value stage, stageNext, issueStage;
      if (rotateStages) {
        Value stage32 = loop.getRegionIterArgs().back();
        stageNext = rotated(stage32, i32c(stages - 1), 0, 1);
        stage = arith::IndexCastUIOp::create(b, b.getIndexType(), stage32);
        issueStage = arith::IndexCastUIOp::create(
            b, b.getIndexType(), rotated(stage32, i32c(0), stages - 1, -1));
      } else {
        stage = arith::RemUIOp::create(b, i, idx(stages));
      }
      auto withStage = [&](SmallVector<Value> yielded) {
        if (rotateStages)
          yielded.push_back(stageNext);
        return yielded;
      };
      // Chunk i's group is the oldest of the stages - 1 pending ones; past
      // the barrier every warp is done with chunk i - 1, whose stage takes
      // chunk i + stages - 1's copies.
      if (!amd())
        NVVM::CpAsyncWaitGroupOp::create(b, stages - 2);
      gpu::BarrierOp::create(b);
      // Past the barrier every warp has written chunk i - 1's outputs.
      if (progress) {
        // Chunks 0 .. i - 1 stored (staged: 0 .. i - 2; chunk i - 1's rows
        // leave below), every progressEvery chunks.
        Value done = staged ? arith::SubIOp::create(b, i, idx(1)) : i;
        Value due = arith::AndIOp::create(
            b, ult(idx(staged ? 1 : 0), i),
            arith::CmpIOp::create(
                b, arith::CmpIPredicate::eq,
                arith::RemUIOp::create(b, i, idx(progressEvery)), idx(0)));
        auto at = scf::IfOp::create(b, due, false);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(at.thenBlock());
        publish(done);
      }
      if (staged) {
        auto previous = scf::IfOp::create(b, ult(idx(0), i), false);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(previous.thenBlock());
        copyOut(arith::SubIOp::create(b, i, idx(1)));
      }
      {
        Value nextChunk = add(i, stages - 1);
        auto more = scf::IfOp::create(b, ult(nextChunk, numChunks), false);
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(more.thenBlock());
        issue(chunkOf(nextChunk),
              rotateStages
                  ? issueStage
                  : Value(arith::RemUIOp::create(b, nextChunk, idx(stages))));
      }
      if (!amd())
        NVVM::CpAsyncCommitGroupOp::create(b);

      kda::IntraChunk intra;
      if (ws[0])
        intra.w = tb.makeShared(shW, ValueRange{stage}, {C, K});
      intra.qDecayed = tb.makeShared(shQ, ValueRange{stage}, {C, K});
      intra.kToEnd = tb.makeShared(shK, ValueRange{stage}, {C, K});
      if (!reverse)
        intra.u = readTile(tb, rowsL, shU, stage);
      if (cfg.summary) {
        SmallVector<Value> uRegs = tb.convertLayout(intra.u, rowsL);
        for (Value &x : uRegs)
          x = select(transition, f32(0.0), x);
        intra.u = tb.make(rowsL, uRegs);
      }
      // The reverse step reads P transposed (P^T dO): from shared memory,
      // in whichever operand layout its product takes.
      // AMD: the A operand of P V_new, read from shared memory a row tile
      // at a time by the product (unitProduct), not held for the step.
      intra.p = reverse || amd() ? tb.makeShared(shP, ValueRange{stage}, {C, C})
                                 : readTile(tb, pL, shP, stage);
      if (ws[5])
        intra.decayLast = readTile(tb, gL, shG, stage);
      SmallVector<Value> cur(loop.getRegionIterArgs().begin(),
                             loop.getRegionIterArgs().begin() + S.size());
      if (reverse) {
        Value c = chunkOf(i);
        auto [t0, valid] = chunkRows(c);
        storeDState(tb, stateL, c, cur);
        // The chunk's dO rows (zeros past the sequence's end) where U was.
        Value dORows;
        SmallVector<Value> dONext;
        if (dOAhead) {
          dORows = tb.make(
              rowsL, SmallVector<Value>(
                         loop.getRegionIterArgs().begin() + S.size(),
                         loop.getRegionIterArgs().end() - (rotateStages ? 1 : 0)));
          dONext = dORowsOf(add(i, 1));
        } else if (ws[1]) {
          // Staged with the chunk's workspaces (rows past the sequence's
          // end zero-filled by the copies).
          dORows = readTile(tb, rowsL, shU, stage);
        } else {
          dORows = rowTile(tb, rowsL, dO, t0, valid, vCol);
        }
        intra.u =
            tb.make(rowsL, SmallVector<Value>(rowsL.regs.size(), f32(0.0)));
        SmallVector<Value> zeroState(stateL.regs.size(), f32(0.0));
        // The adjoint with respect to the state does not read the state's
        // value (the step is affine in it): the forward runs on zeros, and
        // what it computes is dead.
        Value state = tb.make(stateL, zeroState);
        std::string why;
        FailureOr<kda::StateStepGrads> g = kda::emitStateStepAdjoint(
            tb, intra, state, dORows, tb.make(stateL, cur),
            kda::StepAdjointOf::State, why);
        if (failed(g)) {
          scf::YieldOp::create(b, loop.getRegionIterArgs());
          return why;
        }
        storeRows(tb, g->dVNew, dU, t0, valid, vCol);
        SmallVector<Value> next = tb.convertLayout(g->dState, stateL);
        if (!tb.failure().empty()) {
          scf::YieldOp::create(b, loop.getRegionIterArgs());
          return tb.failure();
        }
        llvm::append_range(next, dONext);
        scf::YieldOp::create(b, withStage(next));
      } else {
      if (boundary)
        storeBoundaryBefore(tb, stateL, i, cur);
      Value state = tb.make(stateL, cur);
      kda::ChunkOutputs out = kda::emitStateStep(tb, intra, state);
      // (A summary stores no outputs: its O product is dead code, and no
      // layout conversion of it is emitted.)
      SmallVector<Value> oRegs;
      if (!cfg.summary)
        oRegs = tb.convertLayout(out.o, rowsL);
      SmallVector<Value> next = tb.convertLayout(out.nextState, stateL);
      if (!tb.failure().empty()) {
        scf::YieldOp::create(b, loop.getRegionIterArgs());
        return tb.failure();
      }
      // The output rows of the chunk's tokens (a summary's state carries
      // on, stored once after the loop).
      if (!cfg.summary) {
      auto [t0, valid] = chunkRows(i);
      // Split by K, every warp holds the outputs: warp 0 stores them.
      Value first = byK ? tb.holdsFirstCopy(rowsL) : Value();
      if (staged) {
        // Every row into this chunk's buffer (rows past the sequence's
        // end too: copyOut leaves them); the next step stores them.
        Value buffer = arith::RemUIOp::create(b, i, idx(2));
        auto write = first ? scf::IfOp::create(b, first, false) : nullptr;
        OpBuilder::InsertionGuard g2(b);
        if (write)
          b.setInsertionPointToStart(write.thenBlock());
        for (int64_t r = 0; r < int64_t(rowsL.regs.size()); ++r)
          memref::StoreOp::create(b, fromF32(oRegs[r], oType), shO,
                                  ValueRange{buffer, tb.coordinate(rowsL, r, 0),
                                             tb.coordinate(rowsL, r, 1)});
      }
      for (int64_t r = 0; !staged && r < int64_t(rowsL.regs.size()); ++r) {
        Value c = tb.coordinate(rowsL, r, 0);
        Value v = tb.coordinate(rowsL, r, 1);
        Value keep = ult(c, valid);
        if (first)
          keep = arith::AndIOp::create(b, keep, first);
        auto store = scf::IfOp::create(b, keep, false);
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(store.thenBlock());
        memref::StoreOp::create(b, fromF32(oRegs[r], oType), o,
                                ValueRange{row, add(t0, c), head, add(vCol, v)});
      }
      }
      scf::YieldOp::create(b, withStage(next));
      }
    }

    // The last chunk's outputs, once every warp has written them.
    if (staged) {
      gpu::BarrierOp::create(b);
      auto any = scf::IfOp::create(b, ult(idx(0), numChunks), false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(any.thenBlock());
      copyOut(arith::SubIOp::create(b, numChunks, idx(1)));
    }
    if (progress) {
      // Every chunk, once every thread has stored its last rows.
      gpu::BarrierOp::create(b);
      publish(numChunks);
    }
    zeroBoundariesPastEnd(tb, stateL);
    if (cfg.summary) {
      // Split by K, every warp holds its own keys; by V, its own V rows.
      for (int64_t r = 0; r < int64_t(stateL.regs.size()); ++r)
        memref::StoreOp::create(
            b, loop.getResult(r), summaryOut,
            ValueRange{n, segment, head, tb.coordinate(stateL, r, 0),
                       add(vCol, tb.coordinate(stateL, r, 1))});
      return "";
    }
    if (ht) {
      Type type = cast<MemRefType>(ht.getType()).getElementType();
      for (int64_t r = 0; r < int64_t(stateL.regs.size()); ++r)
        memref::StoreOp::create(
            b, fromF32(loop.getResult(r), type), ht,
            stateIndex(tb.coordinate(stateL, r, 0), tb.coordinate(stateL, r, 1)));
    }
    return "";
  }
};

/// Whether the kernel of `cfg` takes the workspace of `role`: a reverse
/// scan no U (the adjoint with respect to the state does not read it), a
/// gradient's step grid no Gamma Q and no chunk decay (the gradients it
/// computes do not read them), a summary no Gamma Q and no P (it computes
/// no outputs).
bool takesRole(const StatePassConfig &cfg, bool reverse, StringRef role,
               bool step = false) {
  if (step)
    return role == "w" || role == "u";
  if (reverse)
    return role != "u";
  return !cfg.summary || (role != "q" && role != "p");
}
/// The description with only the roles its kernel takes.
StatePassConfig takenRoles(StatePassConfig cfg, bool reverse,
                           bool step = false) {
  llvm::erase_if(cfg.roles, [&](const std::string &r) {
    return !takesRole(cfg, reverse, r, step);
  });
  return cfg;
}

/// The types of `func`'s workspaces (kda.abi's ws0, ws1, ...), in the
/// description's role order; fewer where one is missing. Roles the kernel
/// does not take are skipped (takesRole; ws<i> keeps the index of its role
/// in the full description).
SmallVector<Type> workspaceTypes(func::FuncOp func, const StatePassConfig &cfg,
                                 bool reverse = false, bool step = false) {
  SmallVector<Type> types;
  auto abi = func->getAttrOfType<ArrayAttr>("kda.abi");
  if (!abi || func.isExternal())
    return types;
  for (size_t i = 0; i < cfg.roles.size(); ++i)
    if (takesRole(cfg, reverse, cfg.roles[i], step))
      if (Value arg = kda::abiArgument(func, abi, "ws" + std::to_string(i)))
        types.push_back(arg.getType());
  return types;
}

struct StateRegistersPass : kda::impl::KdaGpuStateRegistersBase<StateRegistersPass> {
  using Base::Base;
  StateRegistersPass() = default;
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<gpu::GPUDialect, nvgpu::NVGPUDialect,
                    vector::VectorDialect, math::MathDialect, scf::SCFDialect,
                    memref::MemRefDialect, arith::ArithDialect,
                    LLVM::LLVMDialect, NVVM::NVVMDialect>();
  }

  /// The gradient's step grid (kda.step_pass): LaneStateProgram::emitStep
  /// over (sequence, chunk, value head) programs.
  void runStep(func::FuncOp func, kda::StatePassAttr desc) {
    std::optional<StatePassConfig> cfg = readConfig(desc);
    auto abi = func->getAttrOfType<ArrayAttr>("kda.abi");
    if (!cfg || !abi || func.isExternal())
      return;
    StringRef instruction = kda::strategyInstruction(func);
    const kda::MatrixUnit unit = kda::unitChoice(instruction).unit;
    std::string refusal =
        kda::stepLanesRefusal(func, desc, threads, nullptr, instruction);
    if (!kda::runsOnLanes(func, refusal))
      return;
    if (!refusal.empty()) {
      func.emitError() << "kda-gpu-state-registers: the step program does "
                          "not take this kernel ("
                       << refusal << ")";
      return signalPassFailure();
    }
    std::optional<kda::ProgramGrid> grid =
        kda::findProgramGrid(func, cfg->grid, "kda-gpu-state-registers");
    if (!grid)
      return signalPassFailure();
    // The measuring knobs: the V columns a loop iteration takes (the
    // program loops over all of V whatever the grid's V block) and a
    // register budget.
    if (stepVBlock > 0) {
      if (stepVBlock % 16 != 0 || cfg->valueDim % stepVBlock != 0) {
        func.emitError() << "kda-gpu-state-registers: step-v-block "
                         << int64_t(stepVBlock)
                         << " is not a multiple of 16 dividing V "
                         << "= " << cfg->valueDim;
        return signalPassFailure();
      }
      cfg->vBlock = stepVBlock;
    }
    auto byName = [&](StringRef name) {
      return kda::abiArgument(func, abi, name);
    };
    scf::ForallOp forall = grid->forall;
    Block *body = forall.getBody();
    kda::clearProgram(body);
    ImplicitLocOpBuilder b(forall.getLoc(), &getContext());
    b.setInsertionPoint(body->getTerminator());
    SmallVector<Value> ivs = kda::programCoordinates(forall, *grid, b);
    const StatePassConfig taken = takenRoles(*cfg, false, true);
    SmallVector<Type> wsTypes = workspaceTypes(func, *cfg, false, true);
    const bool byK = LaneStateProgram::splitsK(wsTypes, taken, unit);
    LaneStateProgram lp(
        b, *cfg,
        LaneStateProgram::warpsFor(*cfg,
                                   stepThreads > 0 ? stepThreads : threads,
                                   byK,
                                   kda::LaneTileBuilder::unitWarpSize(unit)),
        unit);
    lp.byK = byK;
    lp.step = true;
    lp.stepPrefetch = stepPrefetch;
    lp.stepScatterSums = stepScatterSums;
    if (stepTf32) {
      // As the reverse scan's: only where the call's inputs are 16-bit.
      Value v = byName("v");
      lp.singleTf32 = v && cast<MemRefType>(v.getType())
                                   .getElementType()
                                   .getIntOrFloatBitWidth() == 16;
    }
    lp.stepVNewFirst = stepVNewFirst;
    lp.stepStages = stepStages;
    // (The kernel has no Gamma Q and no chunk decay: takesRole.)
    kda::workspacesByRole(func, abi, cfg->roles, lp.ws);
    // A register budget: the knob's, or with V_new first (no sum across
    // warps, 130 registers at K = V = 128 on 8 warps) two blocks of 256
    // threads a multiprocessor, 128 registers, which ptxas meets without
    // spilling (fwdbwd T = 8192 H = 32 on the H200, with the first build's
    // V_new buffer on W's bytes: 7.45 against 8.14 ms; the fixed build at
    // 128 registers on an H100: 7.69 ms, against 10.50 for the sums form:
    // bench/RESULTS.md, thirty-third session).
    int64_t maxRegisters = stepMaxRegisters;
    if (maxRegisters == 0 && lp.takesVNewFirst() && lp.threads() == 256)
      maxRegisters = 128;
    if (maxRegisters > 0)
      func->setAttr(kda::kMaxRegistersAttr,
                    IntegerAttr::get(IntegerType::get(&getContext(), 32),
                                     maxRegisters));
    const bool gate = llvm::is_contained(cfg->roles, "g");
    // Workspaces: the intra grid's (ws0 ..), the reverse scan's dS, then
    // this grid's seeds (seedWorkspaces).
    lp.dStates = byName("ws" + std::to_string(cfg->roles.size()));
    const bool delta = llvm::is_contained(cfg->roles, "w");
    kda::seedWorkspaces(func, abi, cfg->roles, lp.seeds);
    lp.dO = byName("d_o");
    lp.keptStates = byName("chunk_states");
    lp.cuSeqlens = byName("cu_seqlens");
    if (!lp.dO || !lp.keptStates || !lp.dStates || !lp.ws[1] ||
        (delta && !lp.ws[0]) || !lp.seeds[1] || !lp.seeds[2] ||
        !lp.seeds[3] || !lp.seeds[5] || (delta && !lp.seeds[0]) ||
        (gate && !lp.seeds[4])) {
      func.emitError("kda-gpu-state-registers: the step kernel lacks d_o, "
                     "chunk_states, a workspace of the intra grid, the dS "
                     "record, the reverse scan's dV_new or a seed workspace");
      return signalPassFailure();
    }
    if (std::string why = lp.emitStep(ivs); !why.empty()) {
      func.emitError() << "kda-gpu-state-registers: the step program cannot "
                          "be built: "
                       << why;
      return signalPassFailure();
    }
    // The kept states are read as aligned vectors (phase one's key pairs)
    // and, with dO, by 16-byte cp.async copies (the staged V blocks): a
    // caller's misaligned tensor is the runtime's clear error, not a fault.
    kda::requireAlignedRows(func, [](StringRef name, MemRefType) {
      return name == "chunk_states" || name == "d_o";
    });
    func->setAttr(kda::kBlockThreadsAttr, b.getI64IntegerAttr(lp.threads()));
    func->setAttr(kda::kExplicitThreadsAttr, b.getUnitAttr());
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (auto step = func->getAttrOfType<kda::StatePassAttr>(kda::kStepPassAttr))
      return runStep(func, step);
    auto desc = func->getAttrOfType<kda::StatePassAttr>(kda::kStatePassAttr);
    const bool reverse = !desc;
    if (reverse)
      desc = func->getAttrOfType<kda::StatePassAttr>(kda::kReversePassAttr);
    std::optional<StatePassConfig> cfg = readConfig(desc);
    auto abi = func->getAttrOfType<ArrayAttr>("kda.abi");
    if (!cfg || !abi || func.isExternal())
      return;
    // The matrix unit is the strategy's instruction (kda-opt runs of this
    // pass alone, without a strategy: mma.sync).
    StringRef instruction = kda::strategyInstruction(func);
    const kda::UnitChoice choice = kda::unitChoice(instruction);
    const kda::MatrixUnit unit = choice.unit;
    std::string refusal = kda::stateLanesRefusal(func, desc, threads, nullptr,
                                                 reverse, instruction);
    const bool publishes = func->hasAttr(kda::kPublishProgressAttr);
    if (!kda::runsOnLanes(func, refusal)) {
      // The tile lowering publishes no progress: a window waiting for it
      // would wait forever.
      if (publishes) {
        func.emitError()
            << "kda-gpu-state-registers: a layer's overlap schedule needs "
               "the register state kernel to publish its progress, which "
               "does not cover this tiling ("
            << (refusal.empty() ? std::string("its strategy says tiles")
                                : refusal)
            << ")";
        return signalPassFailure();
      }
      // The tile lowering records no boundary states into pool slots (the
      // tiling left them to this kernel).
      if (cfg->boundaryPool) {
        func.emitError()
            << "kda-gpu-state-registers: boundary states into pool slots "
               "need the register state kernel, which does not cover this "
               "tiling ("
            << (refusal.empty() ? std::string("its strategy says tiles")
                                : refusal)
            << ")";
        signalPassFailure();
      }
      return;
    }
    std::optional<kda::ProgramGrid> grid =
        kda::findProgramGrid(func, cfg->grid, "kda-gpu-state-registers");
    if (!grid)
      return signalPassFailure();
    scf::ForallOp forall = grid->forall;
    // Arguments by name.
    auto byName = [&](StringRef name) {
      return kda::abiArgument(func, abi, name);
    };
    Block *body = forall.getBody();
    kda::clearProgram(body);
    // Blocks start in x-fastest order. The grid's dimensions are reversed
    // (x = V block, y = head, z = sequence) so that the V blocks of one
    // (sequence, head) run side by side, at about the same chunk: they read
    // the same W, Gamma Q and decayed k rows, which then come from L2 once
    // instead of from DRAM once per V block (in sequence-major order a batch
    // of 8 x 32 heads fills the chip with V block 0 alone).
    const int64_t rank = forall.getRank();
    SmallVector<OpFoldResult> reversedBounds(
        llvm::reverse(forall.getMixedUpperBound()));
    OpBuilder gridBuilder(forall);
    auto reversed = scf::ForallOp::create(gridBuilder, forall.getLoc(),
                                          reversedBounds, ValueRange{},
                                          std::nullopt);
    forall.erase();
    forall = reversed;
    body = forall.getBody();
    ImplicitLocOpBuilder b(forall.getLoc(), &getContext());
    b.setInsertionPoint(body->getTerminator());
    Value zero = arith::ConstantIndexOp::create(b, 0);
    SmallVector<Value> ivs(3, zero);
    for (auto [i, d] : llvm::enumerate(grid->kept))
      ivs[d] = forall.getInductionVar(rank - 1 - i);
    SmallVector<Type> wsTypes = workspaceTypes(func, *cfg, reverse);
    if (std::string why = LaneStateProgram::refusal(
            takenRoles(*cfg, reverse), wsTypes, unit);
        !why.empty()) {
      func.emitError() << "kda-gpu-state-registers: the state program does "
                          "not take this kernel ("
                       << why << ")";
      return signalPassFailure();
    }
    // The strategy stage's count (the pipeline gives state-stages only to
    // kda-gpu-select-strategy); the pass option serves kda-opt runs of this
    // pass alone, without a strategy.
    int64_t stages = this->stages;
    if (auto s = func->getAttrOfType<kda::StrategyAttr>(kda::kStrategyAttr);
        s && s.getStages() > 0)
      stages = s.getStages();
    if (stages < 2 || stages > 8) {
      func.emitError() << "kda-gpu-state-registers: the state program's "
                          "chunks in flight (state-stages) are 2 to 8, got "
                       << stages;
      return signalPassFailure();
    }
    // The reverse scan's warps may split V instead (--reverse-split-v): each
    // warp then sums over all of K itself, no sum across warps a step.
    const bool byK =
        !(reverse && reverseSplitV) &&
        LaneStateProgram::splitsK(wsTypes, takenRoles(*cfg, reverse), unit);
    if (reverse && unit != kda::MatrixUnit::MmaSync) {
      func.emitError("kda-gpu-state-registers: the reverse scan has no lane "
                     "program on AMD's matrix units");
      return signalPassFailure();
    }
    LaneStateProgram lp(
        b, *cfg,
        LaneStateProgram::warpsFor(
            *cfg, reverse && reverseThreads > 0 ? reverseThreads : threads,
            byK, kda::LaneTileBuilder::unitWarpSize(unit)),
        unit);
    lp.byK = byK;
    lp.emulated = choice.emulated;
    lp.stages = stages;
    kda::workspacesByRole(func, abi, cfg->roles, lp.ws);
    lp.reverse = reverse;
    lp.reversePrefetch = reverse && reversePrefetch;
    lp.copyRuns = stateCopyRuns;
    lp.stagedOutput = stateStagedOutput;
    lp.rotateStageIndex = stateRotateStages;
    if (reverse && reverseTf32) {
      // Only where the call's inputs are 16-bit: fp32 calls keep their
      // 1e-4 bar's 3xTF32.
      Value v = byName("v");
      lp.singleTf32 = v && cast<MemRefType>(v.getType())
                                   .getElementType()
                                   .getIntOrFloatBitWidth() == 16;
    }
    if (reverse) {
      // dS in from d_final_state, dh0 out to d_initial_state; dS per chunk
      // into the workspace after the intra grid's (ws<roles>).
      lp.dO = byName("d_o");
      lp.h0 = byName("d_final_state");
      lp.ht = byName("d_initial_state");
      lp.dStates = byName("ws" + std::to_string(cfg->roles.size()));
      lp.dU = byName("ws" + std::to_string(cfg->roles.size() + 1));
      // (The prefetch carries its rows in registers instead.)
      lp.reverseStageDO = reverseStageDO && !reversePrefetch;
      lp.ws[1] = lp.reverseStageDO ? lp.dO : Value();
      if (!lp.dO || !lp.dStates || !lp.dU || !lp.ws[2] || !lp.ws[3] ||
          !lp.ws[4]) {
        func.emitError("kda-gpu-state-registers: the reverse scan lacks d_o, "
                       "its dS or dV_new workspace or a workspace of the "
                       "intra grid");
        return signalPassFailure();
      }
    } else if (cfg->summary) {
      // Workspaces: the intra grid's (ws0 ..), then this grid's output.
      lp.values = byName("v");
      lp.summaryOut = byName("ws" + std::to_string(cfg->roles.size()));
      if (!lp.values || !lp.summaryOut) {
        func.emitError("kda-gpu-state-registers: the segments' summary "
                       "kernel lacks v or its workspace");
        return signalPassFailure();
      }
    } else {
      lp.o = byName("o");
      lp.h0 = byName("initial_state");
      lp.ht = byName("final_state");
      if (cfg->segments > 1) {
        // The combine grid's start states (after the summary's workspace);
        // the initial state went into them, and the combine grid writes
        // the final state.
        lp.starts = byName("ws" + std::to_string(cfg->roles.size() + 1));
        lp.h0 = lp.ht = Value();
        if (!lp.starts) {
          func.emitError("kda-gpu-state-registers: the segmented state "
                         "kernel lacks its start states");
          return signalPassFailure();
        }
      }
    }
    lp.cuSeqlens = byName("cu_seqlens");
    if (publishes) {
      lp.progress = byName("progress");
      if (auto every = func->getAttrOfType<IntegerAttr>(kda::kPublishProgressAttr))
        lp.progressEvery = std::max<int64_t>(1, every.getInt());
      if (!lp.progress || reverse || cfg->summary || cfg->segments > 1 ||
          lp.cuSeqlens) {
        func.emitError("kda-gpu-state-registers: only a dense forward state "
                       "kernel with a `progress` argument publishes its "
                       "progress");
        return signalPassFailure();
      }
    }
    lp.boundary = byName("boundary_states");
    lp.boundaryTable = byName("boundary_indices");
    if (cfg->boundaryPool != static_cast<bool>(lp.boundaryTable)) {
      func.emitError("kda-gpu-state-registers: the state kernel's pool slot "
                     "table does not match its description");
      return signalPassFailure();
    }
    if (cfg->boundary != static_cast<bool>(lp.boundary)) {
      func.emitError("kda-gpu-state-registers: the state kernel's boundary "
                     "states argument does not match its description");
      return signalPassFailure();
    }
    if (!reverse &&
        (!lp.ws[1] || !lp.ws[3] ||
         (!cfg->summary && (!lp.ws[2] || !lp.ws[4] || !lp.o)))) {
      func.emitError("kda-gpu-state-registers: the state kernel lacks a "
                     "workspace or its output");
      return signalPassFailure();
    }
    if (lp.boundary && cfg->vMajor)
      kda::requireAlignedRows(func, [](StringRef name, MemRefType) {
        return name == "boundary_states";
      });
    // Staged outputs leave as 16-byte rows.
    if (lp.stagedOutput && !reverse && !cfg->summary)
      kda::requireAlignedRows(func, [](StringRef name, MemRefType) {
        return name == "o";
      });
    // The reverse scan's staged dO rows are 16-byte cp.async copies: a
    // caller's misaligned d_o is the runtime's clear error, not a fault.
    if (reverse && lp.reverseStageDO)
      kda::requireAlignedRows(func, [](StringRef name, MemRefType) {
        return name == "d_o";
      });
    if (std::string why = lp.emit(ivs); !why.empty()) {
      func.emitError() << "kda-gpu-state-registers: the state program cannot "
                          "be built: "
                       << why;
      return signalPassFailure();
    }
    func->setAttr(kda::kBlockThreadsAttr, b.getI64IntegerAttr(lp.threads()));
    func->setAttr(kda::kExplicitThreadsAttr, b.getUnitAttr());
  }
};

} // namespace

std::string mlir::kda::stateLanesRefusal(func::FuncOp func,
                                         StatePassAttr statePass,
                                         int64_t threads, std::string *fix,
                                         bool reverse, StringRef instruction) {
  const kda::MatrixUnit unit = kda::unitChoice(instruction).unit;
  const int64_t warpSize = kda::LaneTileBuilder::unitWarpSize(unit);
  auto say = [&](StringRef f) {
    if (fix)
      *fix = f.str();
  };
  std::optional<StatePassConfig> desc = readConfig(statePass);
  if (!desc)
    return reverse ? "its description (kda.reverse_pass) is incomplete"
                   : "its description (kda.state_pass) is incomplete";
  if (threads % warpSize != 0 || threads < warpSize) {
    say("threads per block a multiple of " + std::to_string(warpSize) +
        " (kda-compile: --block-threads)");
    return std::to_string(threads) + " threads per block are not whole warps";
  }
  // The workspaces decide the matrix instruction. A kernel without every
  // one its description names (the intra-chunk grid given the tile
  // lowering may keep some to itself) is not the program's; a description
  // alone (no arguments: kda-opt runs of the strategy stage) is judged by
  // its shape. A reverse scan takes no U.
  StatePassConfig cfg = takenRoles(*desc, reverse);
  SmallVector<Type> wsTypes = workspaceTypes(func, *desc, reverse);
  if (wsTypes.size() != cfg.roles.size()) {
    if (func.getNumArguments() > 0) {
      say("give the intra-chunk kernel lanes (its remark says how)");
      return "the kernel lacks workspaces its description names (" +
             std::to_string(cfg.roles.size() - wsTypes.size()) + " of " +
             std::to_string(cfg.roles.size()) + ")";
    }
    wsTypes.clear();
  }
  std::string why = LaneStateProgram::refusal(cfg, wsTypes, unit);
  if (!why.empty() && why.find("WMMA") != std::string::npos)
    say("compile with --chunk 16 (or 16-bit inputs)");
  else if (!why.empty())
    say(reverse ? "compile the gradient with a V block of 16 or 32 and a "
                  "chunk of 16, 32 or 64"
                : "compile with a V block of 16 or 32 (--v-block) and a "
                  "chunk of 16, 32 or 64 (--chunk)");
  return why;
}

std::string mlir::kda::stepLanesRefusal(func::FuncOp func,
                                        StatePassAttr stepPass,
                                        int64_t threads, std::string *fix,
                                        StringRef instruction) {
  auto say = [&](StringRef f) {
    if (fix)
      *fix = f.str();
  };
  std::optional<StatePassConfig> desc = readConfig(stepPass);
  if (!desc)
    return "its description (kda.step_pass) is incomplete";
  if (kda::unitChoice(instruction).unit != kda::MatrixUnit::MmaSync) {
    say("");
    return "AMD targets have no lane program for the gradient's step grid "
           "yet (the state program on MFMA / WMMA runs forwards only)";
  }
  if (threads % 32 != 0 || threads < 32) {
    say("threads per block a multiple of 32 (kda-compile: --block-threads)");
    return std::to_string(threads) + " threads per block are not whole warps";
  }
  if (desc->valueDim <= 0 || desc->valueDim % desc->vBlock != 0) {
    say("compile the gradient with a V block that divides V");
    return "V = " + std::to_string(desc->valueDim) +
           " in V blocks of " + std::to_string(desc->vBlock);
  }
  StatePassConfig cfg = takenRoles(*desc, false, true);
  SmallVector<Type> wsTypes = workspaceTypes(func, *desc, false, true);
  if (wsTypes.size() != cfg.roles.size()) {
    if (func.getNumArguments() > 0) {
      say("give the intra-chunk kernel lanes (its remark says how)");
      return "the kernel lacks workspaces its description names (" +
             std::to_string(cfg.roles.size() - wsTypes.size()) + " of " +
             std::to_string(cfg.roles.size()) + ")";
    }
    wsTypes.clear();
  }
  std::string why =
      LaneStateProgram::refusal(cfg, wsTypes, kda::MatrixUnit::MmaSync);
  if (!why.empty())
    say("compile the gradient with a V block of 16 or 32 and a chunk of 16, "
        "32 or 64");
  return why;
}

