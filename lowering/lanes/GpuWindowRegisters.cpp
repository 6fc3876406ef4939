//===- GpuWindowRegisters.cpp - window attention on register tiles --------===//
//
// Causal sliding-window attention (SPEC.md section 5) as a lane kernel: the
// online softmax of passes/WindowAttentionKernel.cpp (windowStep, written
// once) run on LaneTileBuilder tiles whose products take the strategy's
// matrix instruction, with bf16 or fp16 operands and f32 accumulators:
// Hopper's wgmma m64nNk16 (sm_90a, K and V multiples of 64), K and V read
// from shared memory in the 128-byte swizzle through descriptors, or
// mma.sync m16n8k16, K and V read through ldmatrix. What is this file's own
// is the memory side and the loops, FlashAttention-2 style:
//
//   * one block of 4 warps (a warpgroup) per (64 queries, output head,
//     sequence); each warp holds 16 query rows: Q as the A operand (from
//     registers; on wgmma with K or V past 128, heads up to 256, Q stays in
//     the shared swizzle instead), the scores, the running
//     max / sum and the output accumulator, all in registers (the
//     accumulator's and the A operand's layouts hold the same elements per
//     lane, so P goes from scores to operand without a shuffle);
//   * only the key blocks of 64 the window reaches are visited: from the
//     block of the first key the block's first query sees (windowFirstKey)
//     to the block of its last query. The work grows with T x W, not T^2;
//   * K and V blocks are copied into shared memory by cp.async (16 bytes a
//     thread, zero-filled past the sequence, addresses planned once per
//     program), the next block in flight while this one is multiplied (two
//     stages, one barrier per block). mma.sync reads them through ldmatrix
//     (.trans for V) from rows padded by 16 bytes, so that the eight rows of
//     an 8 x 8 matrix fall in different banks; wgmma from one flat buffer in
//     the 128-byte swizzle, aligned to 1024 bytes at run time, after a
//     proxy fence;
//   * exp2 is ex2.approx.ftz: one MUFU instruction per score;
//   * blocks wholly inside every row's window and causal (the interior)
//     run without the mask; the edges run it;
//   * the grid's first dimension walks query blocks last to first: with
//     windows longer than a block, later blocks have more keys, and
//     starting them first shortens the tail.
//
// Per-position windows (window_sizes) take each row's first key from its
// own size; the block's first key block is the least of its rows'.
//
// Measured on the H200 (bench/RESULTS.md, tenth and eleventh sessions): on
// mma.sync, 8 warps / 128 queries per block, key blocks of 32 and a
// 168-register cap were each no faster (255 registers, latency-bound). On
// wgmma, the in-place accumulation (matmulAdd), ex2.approx.ftz and the
// planned copy addresses took the kernel from 231 to 168 registers (3
// blocks per SM) and under FLA's Triton kernel; three stages were slower
// than two.
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"
#include "lowering/Strategy.h"
#include "lowering/lanes/LaneBuilder.h"
#include "lowering/lanes/LaneTiles.h"

#include "passes/Passes.h"
#include "passes/WindowAttentionKernel.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
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

#include "lowering/Passes.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAGPUWINDOWREGISTERS
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;
using namespace mlir::kda;

namespace {

constexpr int64_t kWarps = 4;
constexpr int64_t kRows = 16 * kWarps; // queries per block
constexpr int64_t kKeys = 64;          // keys per block
constexpr int64_t kPad = 8;            // elements of padding per shared row

/// The element type of the kernel's q, k and v where all three have the
/// same 16-bit float type; null otherwise.
Type operandType(TypeRange args) {
  if (args.size() < 3)
    return {};
  Type t;
  for (Type a : args.take_front(3)) {
    auto shaped = dyn_cast<ShapedType>(a);
    if (!shaped)
      return {};
    Type e = shaped.getElementType();
    if (!e.isBF16() && !e.isF16())
      return {};
    if (t && t != e)
      return {};
    t = e;
  }
  return t;
}

struct WindowProgram : LaneBuilder {
  WindowPassAttr desc;
  int64_t K, V;
  Type elem;
  /// Products on Hopper's wgmma (the strategy's instruction): K and V
  /// blocks in the 128-byte swizzled form (LaneTileBuilder::
  /// makeSwizzledShared) of one flat buffer, aligned at run time.
  bool wgmma = false;
  Value flat, pad; // wgmma: the buffer and its alignment pad (elements)
  /// K / V blocks in shared memory: this one and stages - 1 in flight.
  int64_t stages = 2;
  /// wgmma with K or V past 128: Q too stays in shared memory (the swizzle,
  /// before the stages), read by descriptors: its registers and the
  /// accumulator's would not fit together.
  bool qShared = false;
  /// The matrix unit (the strategy's instruction): mma.sync / wgmma on
  /// NVIDIA, or AMD's MFMA / WMMA (emitBlockUnit; `emulated`: WMMA's
  /// program on NVIDIA for tests) and its warp size.
  kda::MatrixUnit unit = kda::MatrixUnit::MmaSync;
  bool emulated = false;
  int64_t warpSize = 32;
  bool amd() const { return unit != kda::MatrixUnit::MmaSync; }
  int64_t threads() const { return kWarps * warpSize; }
  /// Keys per block: 64; AMD with K or V past 128, 32 (a block of 64 and
  /// its transposed V would not fit 64 KB of LDS).
  int64_t keys = kKeys;
  Value q, k, v, o, cu, sizes;
  /// The fused hybrid mix (kda.window_attention's mix_linear / mix_gate):
  /// the other branch [B, T, HO, V] and its gate [B, T, HO] or [B, T, HO,
  /// V]; null without.
  Value mixLinear, mixGate;
  /// A layer's overlap schedule (kda.wait_progress): the state kernel's
  /// progress counters [B, HO, V blocks + 1] and its chunk; the block waits
  /// until every V block of its head has stored the chunks of its rows
  /// before it reads them (mixLinear). Null without.
  Value progress;
  int64_t progressChunk = 16;
  /// Earlier keys (WindowPassAttr's earlier_keys): the key rows S (k's and
  /// v's dimension 1) and the query rows' shift into them, S - T (null
  /// without: keys and queries are the same rows). Set per program (emit).
  bool earlierKeys = false;
  Value keyLength, shift;
  Value lane, warp, tid;
  std::string failure;

  WindowProgram(ImplicitLocOpBuilder &b, WindowPassAttr desc, Type elem)
      : LaneBuilder(b), desc(desc), K(desc.getKeyDim()),
        V(desc.getValueDim()), elem(elem) {}

  Value load(Value mem, ValueRange at) {
    return memref::LoadOp::create(b, mem, at);
  }
  Value asIndex(Value x) {
    return x.getType().isIndex()
               ? x
               : Value(arith::IndexCastOp::create(b, b.getIndexType(), x));
  }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, p, x, y);
  }
  /// Query position `x`'s key row (earlier keys: x + S - T).
  Value toKey(Value x) { return shift ? add(x, shift) : x; }
  void when(Value cond, llvm::function_ref<void()> body) {
    auto op = scf::IfOp::create(b, cond, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(op.thenBlock());
    body();
  }

  /// What one thread copies of a K or V block, planned once per program:
  /// 16-byte pieces of columns col + 128 h (h < halves) of rows r0,
  /// r0 + rowsPerPass, ... (a row every min(perRow, 16) threads), read from
  /// the tensor flattened to 1-D at rowBase + 128 h + position * stride.
  /// rowsPerPass is a multiple of 8, so every piece of a thread keeps r0's
  /// swizzle: piece i of half h lands at dstBase[h] + i rowsPerPass 64.
  struct CopyPlan {
    Value flatSrc, rowBase, stride, r0, col;
    SmallVector<Value, 2> dstBase;
    int64_t rowsPerPass = 0, halves = 1;
    bool isV = false;
  };

  CopyPlan planCopy(Value src, Value row, Value start, Value head,
                    int64_t width, bool isV) {
    CopyPlan p;
    p.isV = isV;
    const int64_t perRow = width / 8; // 16-byte pieces
    const int64_t threadsPerRow = std::min<int64_t>(perRow, 16);
    p.halves = perRow / threadsPerRow; // 256-wide rows: two 128-wide halves
    p.rowsPerPass = kWarps * 32 / threadsPerRow;
    p.r0 = arith::DivUIOp::create(b, tid, idx(threadsPerRow));
    p.col = mul(arith::RemUIOp::create(b, tid, idx(threadsPerRow)), 8);
    auto type = cast<MemRefType>(src.getType());
    p.flatSrc = memref::CollapseShapeOp::create(
        b, src, ArrayRef<ReassociationIndices>{{0, 1, 2, 3}});
    p.stride = mul(memref::DimOp::create(b, src, 2), type.getDimSize(3));
    // Position 0 of this thread's first piece.
    p.rowBase = add(sequenceStart(src, row, start, head), p.col);
    if (wgmma)
      for (int64_t h = 0; h < p.halves; ++h)
        p.dstBase.push_back(LaneTileBuilder::swizzledOffset(
            b, p.r0, add(p.col, 128 * h), kKeys));
    return p;
  }

  /// Where position 0 of sequence (row, start) and head `head` of a [B, T,
  /// H, width] tensor is in its 1-D view: ((row T + start) H + head) width.
  Value sequenceStart(Value src, Value row, Value start, Value head) {
    Value tokens = memref::DimOp::create(b, src, 1);
    Value heads = memref::DimOp::create(b, src, 2);
    return mul(add(arith::MulIOp::create(
                       b, add(arith::MulIOp::create(b, row, tokens), start),
                       heads),
                   head),
               cast<MemRefType>(src.getType()).getDimSize(3));
  }

  /// Copies key block `kb` (positions 64 kb.. of the sequence) of k and v
  /// into `stage` of the shared buffers; rows past the sequence are zeros.
  void issue(Value ks, Value vs, Value stage, Value kb, Value length,
             ArrayRef<CopyPlan> plans) {
    Value k0 = mul(kb, kKeys);
    Value last = arith::SubIOp::create(b, length, idx(1));
    for (const CopyPlan &p : plans) {
      Value stageBase;
      if (wgmma)
        stageBase = add(pad, stageOffset(stage, p.isV));
      for (int64_t i = 0; i < kKeys / p.rowsPerPass; ++i) {
        Value r = add(p.r0, i * p.rowsPerPass);
        Value token = add(k0, r);
        Value valid = ult(token, length);
        Value at = add(p.rowBase, arith::MulIOp::create(
                                      b, minu(token, last), p.stride));
        Value count = select(valid, idx(8), idx(0));
        for (int64_t h = 0; h < p.halves; ++h) {
          SmallVector<Value> to = {stage, r, add(p.col, 128 * h)};
          if (wgmma)
            to = {add(add(stageBase, p.dstBase[h]), i * p.rowsPerPass * 64)};
          nvgpu::DeviceAsyncCopyOp::create(
              b, nvgpu::DeviceAsyncTokenType::get(b.getContext()),
              wgmma ? flat : (p.isV ? vs : ks), to, p.flatSrc,
              ValueRange{add(at, 128 * h)}, b.getIndexAttr(8), count,
              /*bypassL1=*/b.getUnitAttr());
        }
      }
    }
  }

  /// wgmma: elements of Q's block before the stages (qShared).
  int64_t qElems() const { return qShared ? kRows * K : 0; }

  /// wgmma: where stage `stage`'s K (or V) block starts in the flat buffer,
  /// in elements past the pad. A stage is K then V, 64 rows each; blocks of
  /// 64 rows x 64 elements are 8 KB, so every block stays 1024-aligned.
  Value stageOffset(Value stage, bool isV) {
    Value s = add(mul(stage, kKeys * (K + V)), qElems());
    return isV ? add(s, kKeys * K) : s;
  }

  /// One program: query block `qb` of sequence `n`, output head `head`.
  void emit(Value qb, Value head, Value n) {
    tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    lane = arith::RemUIOp::create(b, tid, idx(warpSize));
    warp = arith::DivUIOp::create(b, tid, idx(warpSize));
    const bool varlen = desc.getVarlen().getValue();
    Value row = n, start = idx(0), length = memref::DimOp::create(b, q, 1);
    if (varlen) {
      row = idx(0);
      start = asIndex(load(cu, ValueRange{n}));
      length = arith::SubIOp::create(b, asIndex(load(cu, ValueRange{add(n, 1)})),
                                     start);
    }
    keyLength = length;
    shift = Value();
    if (earlierKeys) {
      keyLength = memref::DimOp::create(b, k, 1);
      shift = arith::SubIOp::create(b, keyLength, length);
    }
    Value q0 = mul(qb, kRows);
    when(ult(q0, length), [&] {
      if (amd())
        emitBlockUnit(q0, head, row, start, length);
      else
        emitBlock(q0, head, row, start, length);
    });
  }

  /// Waits until the state kernel has stored every row of this query
  /// block (q0 .. its last valid query) in every V block of `head`: each
  /// thread spins on atomic reads of the counters, a back-off between
  /// reads, then an acquire fence. The runtime launches this kernel only once every state
  /// program has started (or after the state pass), so the wait ends.
  void waitRows(Value q0, Value length, Value row, Value head) {
    if (!progress)
      return;
    Value end = minu(add(q0, kRows), length);
    Value need = arith::IndexCastUIOp::create(
        b, b.getI32Type(),
        arith::CeilDivUIOp::create(b, end, idx(progressChunk)));
    Value vBlocks = arith::SubIOp::create(
        b, memref::DimOp::create(b, progress, 2), idx(1));
    auto each = scf::ForOp::create(b, idx(0), vBlocks, idx(1));
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(each.getBody());
    Value vb = each.getInductionVar();
    auto spin = scf::WhileOp::create(b, TypeRange{}, ValueRange{});
    {
      Block *before = b.createBlock(&spin.getBefore());
      b.setInsertionPointToStart(before);
      Value got = memref::AtomicRMWOp::create(
          b, arith::AtomicRMWKind::ori, i32(0), progress,
          ValueRange{row, head, vb});
      Value short_ = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                           got, need);
      scf::ConditionOp::create(b, short_, ValueRange{});
      Block *after = b.createBlock(&spin.getAfter());
      b.setInsertionPointToStart(after);
      NVVM::NanosleepOp::create(b, i32(256));
      scf::YieldOp::create(b);
    }
    b.setInsertionPointAfter(each);
    // Acquire: the reads above are relaxed atomics; x's rows are read after
    // this fence (the state kernel's fence precedes its count).
    LLVM::FenceOp::create(b, LLVM::AtomicOrdering::acq_rel, "device");
  }

  /// A query block's heads (output head `head`'s q, k and v heads: GQA),
  /// the sequence's last position and the block's last valid query.
  struct QueryBlock {
    Value qHead, kHead, vHead, last, qLast;
  };
  QueryBlock queryBlock(Value q0, Value head, Value length) {
    Value ho = memref::DimOp::create(b, o, 2);
    auto headOf = [&](Value mem) {
      return arith::DivUIOp::create(
          b, head,
          arith::DivUIOp::create(b, ho, memref::DimOp::create(b, mem, 2)));
    };
    QueryBlock out;
    out.qHead = headOf(q);
    out.kHead = headOf(k);
    out.vHead = headOf(v);
    out.last = arith::SubIOp::create(b, length, idx(1));
    out.qLast = minu(add(q0, kRows - 1), out.last);
    return out;
  }

  /// AMD: key block `kb` (positions `keys` kb..) of k and v into `stage` of the
  /// shared buffers by plain 16-byte loads, zeros past the sequence (the
  /// loop's barriers order them): K as it is, [stage, key, col] (16-byte
  /// stores), V transposed, [stage, col, key] (the products' fragments take
  /// consecutive keys of a V column: one vector read each).
  void issueUnit(Value ks, Value vs, Value stage, Value kb, Value length,
                 Value row, Value start, Value kHead, Value vHead) {
    Value k0 = mul(kb, keys);
    Value last = arith::SubIOp::create(b, length, idx(1));
    auto piece = VectorType::get({8}, elem);
    for (bool isV : {false, true}) {
      const int64_t perRow = (isV ? V : K) / 8;
      forEachPiece(tid, threads(), keys * perRow, [&](Value p) {
        Value r = arith::DivUIOp::create(b, p, idx(perRow));
        Value c = mul(arith::RemUIOp::create(b, p, idx(perRow)), 8);
        Value token = add(k0, r);
        Value x = vector::LoadOp::create(
            b, piece, isV ? v : k,
            ValueRange{row, add(start, minu(token, last)), isV ? vHead : kHead,
                       c});
        x = arith::SelectOp::create(
            b, ult(token, length), x,
            arith::ConstantOp::create(b, b.getZeroAttr(piece)));
        if (!isV) {
          vector::StoreOp::create(b, x, ks, ValueRange{stage, r, c});
          return;
        }
        for (int64_t e = 0; e < 8; ++e)
          memref::StoreOp::create(
              b, vector::ExtractOp::create(b, x, ArrayRef<int64_t>{e}), vs,
              ValueRange{stage, add(c, e), r});
      });
    }
  }

  /// AMD's MFMA / WMMA (and WMMA emulated on NVIDIA): the same online
  /// softmax, each wave its own 16 queries of the block's 64 (a program of
  /// [16, ...] tiles, a copy in every wave: the waves share only the staged
  /// K and V blocks), every product transposed
  /// (transposeSharedProducts): S^T = K Q^T, then O^T += V^T P^T, so that
  /// P^T, S^T's accumulator, is the next product's B operand where it is
  /// (MFMA) or a shuffle away (WMMA), with no trip through LDS. Q is that B
  /// operand too: MFMA loads it in its fragments (8-byte loads, registers
  /// for the whole block); WMMA, whose operands hold every element twice,
  /// keeps each wave's Q in LDS. K and V blocks: plain copies, two stages
  /// where the chip's 64 KB allow, one otherwise (a second barrier).
  void emitBlockUnit(Value q0, Value head, Value row, Value start,
                     Value length) {
    QueryBlock blk = queryBlock(q0, head, length);
    Value qHead = blk.qHead, kHead = blk.kHead, vHead = blk.vHead,
          last = blk.last, qLast = blk.qLast;
    // This wave's queries.
    Value qw = add(q0, mul(warp, 16));

    LaneTileBuilder tb(b, warpSize, kWarps, lane, warp);
    tb.useMatrixUnit(unit, elem, emulated);
    tb.transposeSharedProducts();
    auto copies = [&](const LaneLayout &l) {
      return l.spread(l.shape, {0, 0}, kWarps);
    };
    // O as O^T's accumulator [V, 16], transposed; its rows (queries).
    const LaneLayout accL =
        copies(LaneTileBuilder::unitAccumulator(unit, V, 16)).transposed();
    const LaneLayout rowL = accL.slice(0);
    tb.anchor(accL);
    tb.anchor(rowL);

    auto wg = gpu::AddressSpaceAttr::get(b.getContext(),
                                         gpu::AddressSpace::Workgroup);
    auto alloc = [&](ArrayRef<int64_t> shape) -> Value {
      return memref::AllocOp::create(
          b, MemRefType::get(shape, elem, MemRefLayoutAttrInterface{}, wg));
    };
    const bool qInRegisters = unit == kda::MatrixUnit::Mfma;
    const int64_t qBytes = qInRegisters ? 0 : kWarps * 16 * (K + kPad) * 2;
    const int64_t stageBytes = (keys * (K + kPad) + V * (keys + kPad)) * 2;
    const int64_t unitStages = qBytes + 2 * stageBytes <= 65536 ? 2 : 1;
    Value ks = alloc({unitStages, keys, K + kPad});
    Value vs = alloc({unitStages, V, keys + kPad});

    // Q: rows past the sequence read its last.
    Value qTile;
    if (qInRegisters) {
      const LaneLayout qL =
          copies(LaneTileBuilder::unitOperandB(unit, K, 16)).transposed();
      SmallVector<Value> regs(qL.regs.size());
      for (auto [r0, len] : qL.vectorRuns(1, 8)) {
        Value qi = minu(add(qw, tb.coordinate(qL, r0, 0)), last);
        Value x = vector::LoadOp::create(
            b, VectorType::get({len}, elem), q,
            ValueRange{row, add(start, qi), qHead, tb.coordinate(qL, r0, 1)});
        for (int64_t e = 0; e < len; ++e)
          regs[r0 + e] =
              toF32(vector::ExtractOp::create(b, x, ArrayRef<int64_t>{e}));
      }
      qTile = tb.make(qL, regs);
    } else {
      // Each wave copies its 16 rows into its own [16, K] (16-byte pieces).
      Value qs = alloc({kWarps, 16, K + kPad});
      const int64_t perRow = K / 8;
      auto piece = VectorType::get({8}, elem);
      forEachPiece(lane, warpSize, 16 * perRow, [&](Value p) {
        Value r = arith::DivUIOp::create(b, p, idx(perRow));
        Value c = mul(arith::RemUIOp::create(b, p, idx(perRow)), 8);
        Value x = vector::LoadOp::create(
            b, piece, q,
            ValueRange{row, add(start, minu(add(qw, r), last)), qHead, c});
        vector::StoreOp::create(b, x, qs, ValueRange{warp, r, c});
      });
      // (The key loop's first barrier publishes them.)
      qTile = tb.makeShared(qs, ValueRange{warp}, {16, K});
    }

    // Each row's window (per-position sizes) and the key blocks to visit
    // (the block's: its waves share the staged K and V).
    KeyBlocks blocks = keyBlocks(tb, rowL, qw, q0, qLast, start, last);
    Value windows = blocks.windows, kbFirst = blocks.first,
          kbLast = blocks.last;
    Value qwKey = toKey(qw);
    auto issueBlock = [&](Value stage, Value kb) {
      issueUnit(ks, vs, stage, kb, keyLength, row, start, kHead, vHead);
    };
    if (unitStages == 2)
      issueBlock(idx(0), kbFirst);

    SmallVector<Value> init =
        carried(tb, windowStart(tb, 16, V), rowL, accL);

    auto loop = scf::ForOp::create(b, kbFirst, add(kbLast, 1), idx(1), init);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value kb = loop.getInductionVar();
      ValueRange it = loop.getRegionIterArgs();
      Value visited = arith::SubIOp::create(b, kb, kbFirst);
      Value stage = arith::RemUIOp::create(b, visited, idx(unitStages));
      // Past this barrier every wave is done with the previous block (and
      // this block's copies, issued before it, are visible).
      gpu::BarrierOp::create(b);
      if (unitStages == 2) {
        Value ahead = add(kb, 1);
        when(cmp(arith::CmpIPredicate::ule, ahead, kbLast), [&] {
          issueBlock(arith::RemUIOp::create(b, add(visited, 1), idx(2)),
                     ahead);
        });
      } else {
        issueBlock(stage, kb);
        gpu::BarrierOp::create(b);
      }

      Value k0 = mul(kb, keys);
      // One step, its mask kept everywhere but the interior (a branch per
      // case, as on NVIDIA, had the compiler hoist both cases' shared
      // fragment reads above it: WMMA's kernel spilled).
      Value interior = interiorOf(k0, toKey(q0), toKey(qLast));
      SoftmaxState s = fromCarried(tb, it, rowL, accL);
      Value kTile = tb.makeShared(ks, ValueRange{stage}, {keys, K});
      Value vTile =
          tb.makeSharedTransposed(vs, ValueRange{stage}, {keys, V});
      auto keep = [&](ImplicitLocOpBuilder &bb, Value r, Value col,
                      ValueRange rowScalars) {
        return keeps(bb, qwKey, k0, interior, r, col, rowScalars);
      };
      SmallVector<Value> rowData;
      if (windows)
        rowData.push_back(windows);
      SoftmaxState next =
          windowStep(tb, qTile, kTile, vTile,
                     desc.getScale().getValueAsDouble(), keep, rowData, s);
      scf::YieldOp::create(b, carried(tb, next, rowL, accL));
    }
    Value out = windowOutput(tb, fromCarried(tb, loop.getResults(), rowL, accL));
    SmallVector<Value> regs = tb.convertLayout(out, accL);
    if (!tb.failure().empty()) {
      failure = tb.failure();
      return;
    }
    // The wave's rows inside the sequence, runs of consecutive columns as
    // one vector each.
    for (auto run : accL.vectorRuns(1, 8)) {
      const int64_t r0 = run.first, len = run.second;
      Value qi = add(qw, tb.coordinate(accL, r0, 0));
      when(ult(qi, length), [&] {
        SmallVector<Value, 4> at = {row, add(start, qi), head,
                                    tb.coordinate(accL, r0, 1)};
        SmallVector<Value> w(regs.begin() + r0, regs.begin() + r0 + len);
        if (mixLinear)
          mix(w, at, rowGateAt(row, add(start, qi), head));
        SmallVector<Value> xs;
        for (int64_t e = 0; e < len; ++e)
          xs.push_back(fromF32(w[e], elem));
        Value x = vector::FromElementsOp::create(
            b, VectorType::get({len}, elem), xs);
        vector::StoreOp::create(b, x, o, at);
      });
    }
  }

  /// Each row's window as f32 (per-position sizes: `windows`, in `rowL`,
  /// row i the query rowBase + i; null for one window per op), and the key
  /// blocks the block of queries q0 .. qLast reaches: from the one of its
  /// least first key to the one of its last query (the queries' key rows:
  /// toKey, with earlier keys).
  struct KeyBlocks {
    Value windows, first, last;
  };
  KeyBlocks keyBlocks(LaneTileBuilder &tb, const LaneLayout &rowL,
                      Value rowBase, Value q0, Value qLast, Value start,
                      Value last) {
    const int64_t window = desc.getWindow();
    KeyBlocks out;
    Value firstKey;
    if (window > 0) {
      firstKey = windowFirstKey(b, toKey(q0), idx(window));
    } else {
      SmallVector<Value> w;
      Value cap = f32(double(int64_t(1) << 62));
      for (int64_t r = 0; r < int64_t(rowL.regs.size()); ++r) {
        Value qi = minu(add(rowBase, tb.coordinate(rowL, r, 0)), last);
        Value size = arith::SIToFPOp::create(
            b, b.getF32Type(), load(sizes, ValueRange{add(start, qi)}));
        w.push_back(arith::MinimumFOp::create(b, size, cap));
      }
      out.windows = tb.make(rowL, w);
      // The block's first key: the least over its rows (each thread walks
      // them; once per program).
      auto loop = scf::ForOp::create(b, q0, add(qLast, 1), idx(1),
                                     ValueRange{q0});
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(loop.getBody());
        Value qi = loop.getInductionVar();
        Value size = asIndex(load(sizes, ValueRange{add(start, qi)}));
        Value first = windowFirstKey(b, toKey(qi), size);
        scf::YieldOp::create(b, ValueRange{minu(first,
                                                loop.getRegionIterArgs()[0])});
      }
      firstKey = loop.getResult(0);
    }
    out.first = arith::DivUIOp::create(b, firstKey, idx(keys));
    out.last = arith::DivUIOp::create(b, toKey(qLast), idx(keys));
    return out;
  }

  /// Whether the key block from k0 is interior to the block of queries
  /// whose key rows are q0 .. qLast: every key at or before its first query
  /// and inside its last valid query's window (false for per-position
  /// windows).
  Value interiorOf(Value k0, Value q0, Value qLast) {
    const int64_t window = desc.getWindow();
    Value interior = arith::ConstantOp::create(b, b.getBoolAttr(false));
    if (window > 0)
      interior = arith::AndIOp::create(
          b, cmp(arith::CmpIPredicate::ule, add(k0, keys - 1), q0),
          cmp(arith::CmpIPredicate::uge, k0,
              windowFirstKey(b, qLast, idx(window))));
    return interior;
  }

  /// Whether the query at key row rowBase + r keeps key k0 + col: causal
  /// and inside the row's window (per-position windows: rowScalars[0]);
  /// every key where `interior` (when given) holds.
  Value keeps(ImplicitLocOpBuilder &bb, Value rowBase, Value k0, Value interior,
              Value r, Value col, ValueRange rowScalars) {
    const int64_t window = desc.getWindow();
    Value qi = arith::AddIOp::create(bb, rowBase, r);
    Value kj = arith::AddIOp::create(bb, k0, col);
    Value keep = windowKeeps(
        bb, qi, kj,
        window > 0 ? Value(arith::ConstantIndexOp::create(bb, window))
                   : windowFromF32(bb, rowScalars[0]));
    return interior ? Value(arith::OrIOp::create(bb, interior, keep)) : keep;
  }

  /// The online softmax's state as the key loop carries it: m and l in
  /// `rowL`, then the accumulator in `accL`, register after register.
  static SmallVector<Value> carried(LaneTileBuilder &tb, const SoftmaxState &s,
                                    const LaneLayout &rowL,
                                    const LaneLayout &accL) {
    SmallVector<Value> out;
    for (Value t : {s.m, s.l, s.acc})
      llvm::append_range(out, tb.convertLayout(t, t == s.acc ? accL : rowL));
    return out;
  }
  static SoftmaxState fromCarried(LaneTileBuilder &tb, ValueRange regs,
                                  const LaneLayout &rowL,
                                  const LaneLayout &accL) {
    const int64_t nRow = rowL.regs.size();
    return {tb.make(rowL, llvm::to_vector(regs.take_front(nRow))),
            tb.make(rowL, llvm::to_vector(regs.slice(nRow, nRow))),
            tb.make(accL, llvm::to_vector(regs.drop_front(2 * nRow)))};
  }

  /// The fused hybrid mix (kda::mixValue) of a run of consecutive output
  /// columns `w` (f32, in place) at `at` (batch row, token, head, first
  /// column) with the other branch's x there, gated by the row's `rowGate`
  /// or the columns' own z (channel-wise), or summed.
  void mix(MutableArrayRef<Value> w, ValueRange at, Value rowGate) {
    const int64_t n = w.size();
    auto runOf = [&](Value mem) {
      Type t = cast<MemRefType>(mem.getType()).getElementType();
      Value p = vector::LoadOp::create(b, VectorType::get({n}, t), mem, at);
      SmallVector<Value> xs;
      for (int64_t e = 0; e < n; ++e)
        xs.push_back(
            toF32(vector::ExtractOp::create(b, p, ArrayRef<int64_t>{e})));
      return xs;
    };
    SmallVector<Value> x = runOf(mixLinear);
    SmallVector<Value> z(n, rowGate);
    if (mixGate && !rowGate)
      z = runOf(mixGate);
    for (int64_t e = 0; e < n; ++e)
      w[e] = kda::mixValue(b, w[e], x[e], z[e]);
  }

  /// A head-wise gate's value for output row `qi` (null without one).
  Value rowGateAt(Value row, Value token, Value head) {
    if (!mixGate || cast<MemRefType>(mixGate.getType()).getRank() != 3)
      return Value();
    return toF32(
        memref::LoadOp::create(b, mixGate, ValueRange{row, token, head}));
  }

  void emitBlock(Value q0, Value head, Value row, Value start, Value length) {
    QueryBlock blk = queryBlock(q0, head, length);
    Value qHead = blk.qHead, kHead = blk.kHead, vHead = blk.vHead,
          last = blk.last, qLast = blk.qLast;

    LaneTileBuilder tb(b, 32, kWarps, lane, warp);
    tb.useMmaSync(elem);
    const LaneLayout accL = LaneTileBuilder::mmaAccumulator(kRows, V, kWarps);
    const LaneLayout rowL = accL.slice(0);
    tb.anchor(accL);
    tb.anchor(rowL);

    // Q, as the A operand (f32 registers; the product rounds them back to
    // their 16-bit values exactly). Rows past the sequence read its last.
    const LaneLayout qL = LaneTileBuilder::mmaOperandA(kRows, K, kWarps);
    SmallVector<Value> qRegs;
    for (int64_t r = 0; r < int64_t(qL.regs.size()) && !qShared; r += 2) {
      Value qi = minu(add(q0, tb.coordinate(qL, r, 0)), last);
      Value pair = vector::LoadOp::create(
          b, VectorType::get({2}, elem), q,
          ValueRange{row, add(start, qi), qHead, tb.coordinate(qL, r, 1)});
      for (int64_t e = 0; e < 2; ++e)
        qRegs.push_back(toF32(
            vector::ExtractOp::create(b, pair, ArrayRef<int64_t>{e})));
    }
    Value qTile = qShared ? Value() : tb.make(qL, qRegs);

    // Each row's window (per-position sizes) and the key blocks to visit.
    KeyBlocks blocks = keyBlocks(tb, rowL, q0, q0, qLast, start, last);
    Value windows = blocks.windows, kbFirst = blocks.first,
          kbLast = blocks.last;

    // Shared memory: two stages of K and V blocks.
    auto wg = gpu::AddressSpaceAttr::get(b.getContext(),
                                         gpu::AddressSpace::Workgroup);
    Value ks, vs, sharedBase;
    if (wgmma) {
      // One buffer, 1024 bytes longer: the swizzle is a function of the
      // address bits, so the blocks start at a multiple of 1024 (the pad).
      flat = memref::AllocOp::create(
          b, MemRefType::get({qElems() + stages * kKeys * (K + V) + 512}, elem,
                             MemRefLayoutAttrInterface{}, wg));
      sharedBase = arith::IndexCastUIOp::create(
          b, b.getI32Type(),
          memref::ExtractAlignedPointerAsIndexOp::create(b, flat));
      Value mis = arith::AndIOp::create(
          b, sharedBase,
          arith::ConstantOp::create(b, b.getI32IntegerAttr(1023)));
      Value padBytes = arith::AndIOp::create(
          b,
          arith::SubIOp::create(
              b, arith::ConstantOp::create(b, b.getI32IntegerAttr(1024)), mis),
          arith::ConstantOp::create(b, b.getI32IntegerAttr(1023)));
      pad = arith::DivUIOp::create(
          b, arith::IndexCastUIOp::create(b, b.getIndexType(), padBytes),
          idx(2));
      sharedBase = arith::AddIOp::create(b, sharedBase, padBytes);
      ks = flat;
      vs = Value();
    } else {
      ks = memref::AllocOp::create(
          b, MemRefType::get({stages, kKeys, K + kPad}, elem,
                             MemRefLayoutAttrInterface{}, wg));
      vs = memref::AllocOp::create(
          b, MemRefType::get({stages, kKeys, V + kPad}, elem,
                             MemRefLayoutAttrInterface{}, wg));
    }
    // The first stages - 1 blocks in flight, a group each (empty past the
    // last block, so that group counts stay per block).
    const CopyPlan plans[] = {planCopy(k, row, start, kHead, K, false),
                              planCopy(v, row, start, vHead, V, true)};
    if (qShared) {
      // Q's rows (past the sequence: its last) into the swizzle, with the
      // first block's group.
      const int64_t perRow = K / 8;
      Value qFlat = memref::CollapseShapeOp::create(
          b, q, ArrayRef<ReassociationIndices>{{0, 1, 2, 3}});
      Value stride = mul(memref::DimOp::create(b, q, 2), K);
      Value rowBase = sequenceStart(q, row, start, qHead);
      for (int64_t i = 0; i < kRows * perRow / (kWarps * 32); ++i) {
        Value c = add(tid, i * kWarps * 32);
        Value r = arith::DivUIOp::create(b, c, idx(perRow));
        Value col = mul(arith::RemUIOp::create(b, c, idx(perRow)), 8);
        Value token = minu(add(q0, r), last);
        Value at = add(add(rowBase, arith::MulIOp::create(b, token, stride)),
                       col);
        nvgpu::DeviceAsyncCopyOp::create(
            b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), flat,
            ValueRange{add(pad, LaneTileBuilder::swizzledOffset(b, r, col,
                                                               kRows))},
            qFlat, ValueRange{at}, b.getIndexAttr(8), Value(),
            /*bypassL1=*/b.getUnitAttr());
      }
      qTile = tb.makeSwizzledShared(sharedBase, {kRows, K});
    }
    for (int64_t i = 0; i + 1 < stages; ++i) {
      when(cmp(arith::CmpIPredicate::ule, add(kbFirst, i), kbLast), [&] {
        issue(ks, vs, idx(i), add(kbFirst, i), keyLength, plans);
      });
      NVVM::CpAsyncCommitGroupOp::create(b);
    }

    SmallVector<Value> init =
        carried(tb, windowStart(tb, kRows, V), rowL, accL);
    Value qk0 = toKey(q0); // the block's first query's key row

    auto loop = scf::ForOp::create(b, kbFirst, add(kbLast, 1), idx(1), init);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value kb = loop.getInductionVar();
      ValueRange it = loop.getRegionIterArgs();
      Value visited = arith::SubIOp::create(b, kb, kbFirst);
      Value stage = arith::RemUIOp::create(b, visited, idx(stages));
      // This block's group is done when at most the stages - 2 newer ones
      // are pending.
      NVVM::CpAsyncWaitGroupOp::create(b, stages - 2);
      // wgmma reads shared memory through the async proxy: this thread's
      // copies are made visible to it before the barrier publishes them.
      if (wgmma)
        NVVM::FenceProxyOp::create(
            b, NVVM::ProxyKind::async_shared,
            NVVM::SharedSpaceAttr::get(b.getContext(),
                                       NVVM::SharedSpace::shared_cta));
      // Past this barrier every warp is done with the previous block, whose
      // stage now takes the block stages - 1 ahead (a group every time).
      gpu::BarrierOp::create(b);
      Value ahead = add(kb, stages - 1);
      when(cmp(arith::CmpIPredicate::ule, ahead, kbLast), [&] {
        issue(ks, vs,
              arith::RemUIOp::create(b, add(visited, stages - 1),
                                     idx(stages)),
              ahead, keyLength, plans);
      });
      NVVM::CpAsyncCommitGroupOp::create(b);

      Value k0 = mul(kb, kKeys);
      auto step = [&](bool masked) -> SmallVector<Value> {
        SoftmaxState s = fromCarried(tb, it, rowL, accL);
        Value kTile, vTile;
        if (wgmma) {
          auto at = [&](bool isV) -> Value {
            Value bytes = arith::IndexCastUIOp::create(
                b, b.getI32Type(), mul(stageOffset(stage, isV), 2));
            return arith::AddIOp::create(b, sharedBase, bytes);
          };
          kTile = tb.makeSwizzledShared(at(false), {kKeys, K});
          vTile = tb.makeSwizzledShared(at(true), {kKeys, V});
        } else {
          kTile = tb.makeShared(ks, ValueRange{stage}, {kKeys, K});
          vTile = tb.makeShared(vs, ValueRange{stage}, {kKeys, V});
        }
        auto keep = [&](ImplicitLocOpBuilder &bb, Value r, Value col,
                        ValueRange rowScalars) {
          return keeps(bb, qk0, k0, Value(), r, col, rowScalars);
        };
        SmallVector<Value> rowData;
        if (windows)
          rowData.push_back(windows);
        SoftmaxState next =
            masked ? windowStep(tb, qTile, kTile, vTile,
                                desc.getScale().getValueAsDouble(), keep,
                                rowData, s)
                   : windowStep(tb, qTile, kTile, vTile,
                                desc.getScale().getValueAsDouble(), {}, {},
                                s);
        return carried(tb, next, rowL, accL);
      };
      // The interior runs without the mask.
      Value interior = interiorOf(k0, qk0, toKey(qLast));
      auto branch = scf::IfOp::create(b, TypeRange(ValueRange(init)),
                                      interior, /*withElse=*/true);
      {
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(branch.thenBlock());
        scf::YieldOp::create(b, step(false));
        b.setInsertionPointToStart(branch.elseBlock());
        scf::YieldOp::create(b, step(true));
      }
      scf::YieldOp::create(b, branch.getResults());
    }
    waitRows(q0, length, row, head);
    Value out = windowOutput(tb, fromCarried(tb, loop.getResults(), rowL, accL));
    SmallVector<Value> regs = tb.convertLayout(out, accL);
    if (!tb.failure().empty()) {
      failure = tb.failure();
      return;
    }
    // Rows inside the sequence store their pairs of columns.
    std::map<int64_t, SmallVector<int64_t>> byRow;
    for (int64_t r = 0; r < int64_t(accL.regs.size()); r += 2)
      byRow[accL.regs[r][0]].push_back(r);
    for (auto &entry : byRow) {
      const SmallVector<int64_t> &rs = entry.second;
      Value qi = add(q0, tb.coordinate(accL, rs.front(), 0));
      when(ult(qi, length), [&] {
        // A head-wise gate is one value a row.
        Value rowGate = rowGateAt(row, add(start, qi), head);
        for (int64_t r : rs) {
          Value col = tb.coordinate(accL, r, 1);
          SmallVector<Value, 4> at = {row, add(start, qi), head, col};
          SmallVector<Value, 2> w = {regs[r], regs[r + 1]};
          if (mixLinear)
            mix(w, at, rowGate);
          Value pair = vector::FromElementsOp::create(
              b, VectorType::get({2}, elem),
              ValueRange{fromF32(w[0], elem), fromF32(w[1], elem)});
          vector::StoreOp::create(b, pair, o, at);
        }
      });
    }
  }
};

struct WindowRegistersPass
    : kda::impl::KdaGpuWindowRegistersBase<WindowRegistersPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto desc = func->getAttrOfType<WindowPassAttr>(kda::kWindowPassAttr);
    auto abi = func->getAttrOfType<ArrayAttr>("kda.abi");
    if (!desc || !abi || func.isExternal())
      return;
    if (!kda::runsOnLanes(func, kda::windowLanesRefusal(
                                    desc, func.getFunctionType().getInputs(),
                                    /*chipHasWgmma=*/false))) {
      // The tile lowering does not wait: it would read rows the state pass
      // has not stored yet.
      if (func->hasAttr(kda::kWaitProgressAttr)) {
        func.emitError("kda-gpu-window-registers: a layer's overlap schedule "
                       "needs the register window kernel to wait for the "
                       "state pass's progress, and this kernel takes tiles");
        signalPassFailure();
      }
      return;
    }
    Type elem = operandType(func.getFunctionType().getInputs());
    std::optional<ProgramGrid> grid =
        findProgramGrid(func, {-1, -1}, "kda-gpu-window-registers");
    if (!grid || !elem) {
      if (grid)
        func.emitError("kda-gpu-window-registers: the strategy gives this "
                       "kernel lanes, but q, k and v are not one 16-bit "
                       "float type");
      return signalPassFailure();
    }
    ImplicitLocOpBuilder b(grid->forall.getLoc(), &getContext());
    b.setInsertionPoint(grid->forall);
    WindowProgram prog(b, desc, elem);
    if (auto s = func->getAttrOfType<StrategyAttr>(kda::kStrategyAttr)) {
      prog.wgmma = s.getInstruction() == "wgmma";
      const kda::UnitChoice choice = kda::unitChoice(s.getInstruction());
      prog.unit = choice.unit;
      prog.emulated = choice.emulated;
      prog.warpSize = kda::LaneTileBuilder::unitWarpSize(choice.unit);
    }
    if (prog.amd() && (prog.K > 128 || prog.V > 128))
      prog.keys = 32;
    prog.qShared = prog.wgmma && (prog.K > 128 || prog.V > 128);
    auto byName = [&](StringRef name) {
      return kda::abiArgument(func, abi, name);
    };
    prog.q = byName("q");
    prog.k = byName("k");
    prog.v = byName("v");
    prog.o = byName("o");
    prog.cu = byName("cu_seqlens");
    prog.sizes = byName("window_sizes");
    prog.mixLinear = byName("mix_linear");
    prog.earlierKeys =
        desc.getEarlierKeys() && desc.getEarlierKeys().getValue();
    prog.mixGate = byName("mix_gate");
    const bool waits = func->hasAttr(kda::kWaitProgressAttr);
    if (waits) {
      prog.progress = byName("progress");
      if (auto c = func->getAttrOfType<IntegerAttr>(kda::kWaitProgressAttr))
        prog.progressChunk = std::max<int64_t>(1, c.getInt());
      if (!prog.progress || !prog.mixLinear || prog.amd() ||
          desc.getVarlen().getValue()) {
        func.emitError("kda-gpu-window-registers: only a dense NVIDIA window "
                       "kernel with a mix and a `progress` argument waits for "
                       "a state pass's progress");
        return signalPassFailure();
      }
    }
    if (!prog.q || !prog.k || !prog.v || !prog.o ||
        (desc.getVarlen().getValue() && !prog.cu) ||
        (desc.getWindow() == 0 && !prog.sizes)) {
      func.emitError("kda-gpu-window-registers: the window kernel lacks an "
                     "argument its description names");
      return signalPassFailure();
    }
    // The grid: x = query block (last first), y = output head, z = sequence
    // (batch row, or cu_seqlens' sequences: N + 1 - 1, launched N + 1 with
    // the extra one skipped).
    Value tokens = memref::DimOp::create(b, prog.q, 1);
    Value blocks = arith::CeilDivUIOp::create(
        b, tokens, arith::ConstantIndexOp::create(b, kRows));
    Value heads = memref::DimOp::create(b, prog.o, 2);
    Value seqs =
        desc.getVarlen().getValue()
            ? Value(arith::SubIOp::create(
                  b, memref::DimOp::create(b, prog.cu, 0),
                  arith::ConstantIndexOp::create(b, 1)))
            : Value(memref::DimOp::create(b, prog.q, 0));
    auto forall = scf::ForallOp::create(
        b, SmallVector<OpFoldResult>{blocks, heads, seqs}, ValueRange{},
        std::nullopt);
    grid->forall.erase();
    b.setInsertionPoint(forall.getBody()->getTerminator());
    Value qb, head;
    if (!waits) {
      // The last query block first (the causal case's longest rows).
      qb = arith::SubIOp::create(
          b,
          arith::SubIOp::create(b, blocks,
                                arith::ConstantIndexOp::create(b, 1)),
          forall.getInductionVar(0));
      head = forall.getInductionVar(1);
    } else {
      // Waiting for a state pass: query blocks first to last, the order its
      // rows come, and every head's block i before any head's block i + 1.
      // The launch runs programs in the grid's linear order (x, the query
      // block, fastest: kda-gpu-map-kernels puts the tokens on x), so the
      // program of linear id L takes query block L / heads of head
      // L mod heads. Taken as (query block, head) instead, the first
      // resident programs would be all of head 0's blocks, most of them
      // waiting for the state pass's end while they hold the
      // multiprocessors the ready rows need (the forty-ninth session's
      // 1.73 ms against the fused layer's 0.86).
      Value linear = arith::AddIOp::create(
          b, forall.getInductionVar(0),
          arith::MulIOp::create(b, blocks, forall.getInductionVar(1)));
      qb = arith::DivUIOp::create(b, linear, heads);
      head = arith::RemUIOp::create(b, linear, heads);
    }
    Value n = forall.getInductionVar(2);
    // cu_seqlens' grid launches N + 1 sequences (the manifest's extent);
    // the last has no sequence.
    if (desc.getVarlen().getValue()) {
      auto guard = scf::IfOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, n, seqs),
          false);
      b.setInsertionPointToStart(guard.thenBlock());
    }
    prog.emit(qb, head, n);
    if (!prog.failure.empty()) {
      func.emitError("kda-gpu-window-registers: the lane tiles do not take "
                     "this kernel: ")
          << prog.failure;
      return signalPassFailure();
    }
    kda::useApproximateMath(forall);
    // exp2 as one MUFU.EX2: the flush-to-zero form. Without it ptxas wraps
    // every exp2 in a range check and two multiplies for subnormal results
    // (3 of the key step's ~800 instructions per score); a probability
    // under 2^-126 adds nothing to a row whose largest term is 1.
    // (AMD: math.exp2 is v_exp_f32 already.)
    forall.walk([&](math::Exp2Op e) {
      if (prog.amd() && !prog.emulated)
        return;
      OpBuilder eb(e);
      if (!e.getType().isF32())
        return;
      Value r = LLVM::CallIntrinsicOp::create(
                    eb, e.getLoc(), e.getType(),
                    eb.getStringAttr("llvm.nvvm.ex2.approx.ftz.f"),
                    ValueRange{e.getOperand()})
                    .getResult(0);
      e.replaceAllUsesWith(r);
      e.erase();
    });
    func->setAttr(kda::kExplicitThreadsAttr, b.getUnitAttr());
    func->setAttr(kda::kBlockThreadsAttr, b.getI64IntegerAttr(prog.threads()));
    // cp.async copies 16 bytes and pairs are read and written as 4: rows
    // need aligned pointers (the runtime checks what the manifest states).
    kda::requireAlignedRows(func, [&](StringRef name, MemRefType) {
      return name == "q" || name == "k" || name == "v" || name == "o";
    });
  }
};

} // namespace

std::string mlir::kda::windowLanesRefusal(WindowPassAttr windowPass,
                                          TypeRange argumentTypes,
                                          bool chipHasWgmma,
                                          StringRef instruction) {
  if (!windowPass)
    return "its description (kda.window_pass) is missing";
  if (!operandType(argumentTypes))
    return "q, k and v are not all bf16 or all fp16 (the register kernel's "
           "products are bf16 / fp16 mma.sync; fp32 keeps the tile lowering "
           "and its 1e-4 bar)";
  const int64_t K = windowPass.getKeyDim(), V = windowPass.getValueDim();
  // Up to 128 on either instruction; up to 256 where the chip has wgmma and
  // both are multiples of 64 (Q then stays in shared memory as well), or on
  // MFMA (key blocks of 32: a block and its transposed V within 64 KB of
  // LDS; Q and O^T in registers, 128 of a wave64 lane's).
  const bool wide = chipHasWgmma && K % 64 == 0 && V % 64 == 0 && K <= 256 &&
                    V <= 256;
  const bool mfma = unitChoice(instruction).unit == MatrixUnit::Mfma;
  const int64_t most = mfma ? 256 : 128;
  if (!wide && (K % 16 != 0 || V % 16 != 0 || K > most || V > most)) {
    std::string why;
    llvm::raw_string_ostream os(why);
    os << "K = " << K << ", V = " << V << " are not multiples of 16 up to "
       << most
       << " (the register tiles of 64 queries), nor, on a chip with wgmma, "
          "multiples of 64 up to 256";
    return why;
  }
  return "";
}

std::string mlir::kda::windowInstruction(WindowPassAttr windowPass,
                                         bool chipHasWgmma) {
  // wgmma's B operands are read from 64-column blocks of the 128-byte
  // swizzle (LaneTileBuilder::makeSwizzledShared).
  if (chipHasWgmma && windowPass.getKeyDim() % 64 == 0 &&
      windowPass.getValueDim() % 64 == 0)
    return "wgmma";
  return "mma_sync";
}

std::unique_ptr<Pass> mlir::kda::createGpuWindowRegistersPass() {
  return std::make_unique<WindowRegistersPass>();
}
