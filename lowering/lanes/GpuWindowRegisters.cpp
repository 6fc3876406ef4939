//===- GpuWindowRegisters.cpp - window attention on register tiles --------===//
//
// Causal sliding-window attention (SPEC.md section 5) as a lane kernel: the
// online softmax of passes/WindowAttentionKernel.cpp (windowStep, written
// once) run on LaneTileBuilder tiles whose products are mma.sync m16n8k16
// with bf16 or fp16 operands and f32 accumulators. What is this file's own
// is the memory side and the loops, FlashAttention-2 style:
//
//   * one block of 4 warps per (64 queries, output head, sequence); each
//     warp holds 16 query rows: Q as the A operand, the scores, the running
//     max / sum and the output accumulator, all in registers (the
//     accumulator's and the A operand's layouts hold the same elements per
//     lane, so P goes from scores to operand without a shuffle);
//   * only the key blocks of 64 the window reaches are visited: from the
//     block of the first key the block's first query sees (windowFirstKey)
//     to the block of its last query. The work grows with T x W, not T^2;
//   * K and V blocks are copied into shared memory by cp.async (16 bytes a
//     thread, zero-filled past the sequence), the next block in flight
//     while this one is multiplied (two stages); products read them through
//     ldmatrix (.trans for V). Rows are padded by 16 bytes so that the
//     eight rows of an 8 x 8 matrix fall in different banks;
//   * blocks wholly inside every row's window and causal (the interior)
//     run without the mask; the edges run it;
//   * the grid's first dimension walks query blocks last to first: with
//     windows longer than a block, later blocks have more keys, and
//     starting them first shortens the tail.
//
// Per-position windows (window_sizes) take each row's first key from its
// own size; the block's first key block is the least of its rows'.
//
// Measured on the H200 against this form (bench/RESULTS.md, twelfth
// session): 8 warps / 128 queries per block, key blocks of 32, and a
// 168-register cap (3 blocks per SM) were each no faster; ptxas uses 255
// registers without spills. The kernel issues on 38 % of cycles with two
// warps per scheduler: latency, not a pipe, bounds it (Nsight Compute).
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"
#include "lowering/Strategy.h"
#include "lowering/lanes/LaneBuilder.h"
#include "lowering/lanes/LaneTiles.h"

#include "passes/Passes.h"
#include "passes/WindowAttentionKernel.h"

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
  Value q, k, v, o, cu, sizes;
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
  void when(Value cond, llvm::function_ref<void()> body) {
    auto op = scf::IfOp::create(b, cond, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(op.thenBlock());
    body();
  }

  /// Copies key block `kb` (positions 64 kb.. of the sequence) of k and v
  /// into `stage` of the shared buffers; rows past the sequence are zeros.
  void issue(Value ks, Value vs, Value stage, Value kb, Value row,
             Value start, Value length, Value kHead, Value vHead) {
    Value k0 = mul(kb, kKeys);
    Value last = arith::SubIOp::create(b, length, idx(1));
    auto copy = [&](Value src, Value dst, Value head, int64_t width) {
      const int64_t perRow = width / 8; // 16-byte pieces
      const int64_t pieces = kKeys * perRow;
      for (int64_t i = 0; i < pieces / (kWarps * 32); ++i) {
        Value c = add(tid, i * kWarps * 32);
        Value r = arith::DivUIOp::create(b, c, idx(perRow));
        Value col = mul(arith::RemUIOp::create(b, c, idx(perRow)), 8);
        Value token = add(k0, r);
        Value valid = ult(token, length);
        Value at = add(start, minu(token, last));
        Value count = select(valid, idx(8), idx(0));
        nvgpu::DeviceAsyncCopyOp::create(
            b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), dst,
            ValueRange{stage, r, col}, src, ValueRange{row, at, head, col},
            b.getIndexAttr(8), count, /*bypassL1=*/b.getUnitAttr());
      }
    };
    copy(k, ks, kHead, K);
    copy(v, vs, vHead, V);
  }

  /// One program: query block `qb` of sequence `n`, output head `head`.
  void emit(Value qb, Value head, Value n) {
    tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    lane = arith::RemUIOp::create(b, tid, idx(32));
    warp = arith::DivUIOp::create(b, tid, idx(32));
    const bool varlen = desc.getVarlen().getValue();
    Value row = n, start = idx(0), length = memref::DimOp::create(b, q, 1);
    if (varlen) {
      row = idx(0);
      start = asIndex(load(cu, ValueRange{n}));
      length = arith::SubIOp::create(b, asIndex(load(cu, ValueRange{add(n, 1)})),
                                     start);
    }
    Value q0 = mul(qb, kRows);
    when(ult(q0, length), [&] { emitBlock(q0, head, row, start, length); });
  }

  void emitBlock(Value q0, Value head, Value row, Value start, Value length) {
    Value ho = memref::DimOp::create(b, o, 2);
    auto headOf = [&](Value mem) {
      return arith::DivUIOp::create(
          b, head,
          arith::DivUIOp::create(b, ho, memref::DimOp::create(b, mem, 2)));
    };
    Value qHead = headOf(q), kHead = headOf(k), vHead = headOf(v);
    Value last = arith::SubIOp::create(b, length, idx(1));
    Value qLast = minu(add(q0, kRows - 1), last);
    const int64_t window = desc.getWindow();

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
    for (int64_t r = 0; r < int64_t(qL.regs.size()); r += 2) {
      Value qi = minu(add(q0, tb.coordinate(qL, r, 0)), last);
      Value pair = vector::LoadOp::create(
          b, VectorType::get({2}, elem), q,
          ValueRange{row, add(start, qi), qHead, tb.coordinate(qL, r, 1)});
      for (int64_t e = 0; e < 2; ++e)
        qRegs.push_back(toF32(
            vector::ExtractOp::create(b, pair, ArrayRef<int64_t>{e})));
    }
    Value qTile = tb.make(qL, qRegs);

    // Each row's window (per-position sizes), as f32 for the filter.
    Value windows;
    Value firstKey;
    if (window > 0) {
      firstKey = windowFirstKey(b, q0, idx(window));
    } else {
      SmallVector<Value> w;
      Value cap = f32(double(int64_t(1) << 62));
      for (int64_t r = 0; r < int64_t(rowL.regs.size()); ++r) {
        Value qi = minu(add(q0, tb.coordinate(rowL, r, 0)), last);
        Value size = arith::SIToFPOp::create(
            b, b.getF32Type(), load(sizes, ValueRange{add(start, qi)}));
        w.push_back(arith::MinimumFOp::create(b, size, cap));
      }
      windows = tb.make(rowL, w);
      // The block's first key: the least over its rows (each thread walks
      // them; once per program).
      auto loop = scf::ForOp::create(b, q0, add(qLast, 1), idx(1),
                                     ValueRange{q0});
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(loop.getBody());
        Value qi = loop.getInductionVar();
        Value size = asIndex(load(sizes, ValueRange{add(start, qi)}));
        Value first = windowFirstKey(b, qi, size);
        scf::YieldOp::create(b, ValueRange{minu(first,
                                                loop.getRegionIterArgs()[0])});
      }
      firstKey = loop.getResult(0);
    }
    Value kbFirst = arith::DivUIOp::create(b, firstKey, idx(kKeys));
    Value kbLast = arith::DivUIOp::create(b, qLast, idx(kKeys));

    // Shared memory: two stages of K and V blocks.
    auto wg = gpu::AddressSpaceAttr::get(b.getContext(),
                                         gpu::AddressSpace::Workgroup);
    Value ks = memref::AllocOp::create(
        b, MemRefType::get({2, kKeys, K + kPad}, elem,
                           MemRefLayoutAttrInterface{}, wg));
    Value vs = memref::AllocOp::create(
        b, MemRefType::get({2, kKeys, V + kPad}, elem,
                           MemRefLayoutAttrInterface{}, wg));
    issue(ks, vs, idx(0), kbFirst, row, start, length, kHead, vHead);
    NVVM::CpAsyncCommitGroupOp::create(b);

    SoftmaxState s0 = windowStart(tb, kRows, V);
    SmallVector<Value> init;
    for (Value t : {s0.m, s0.l, s0.acc})
      llvm::append_range(init, tb.registersOf(t));
    const int64_t nRow = rowL.regs.size(), nAcc = accL.regs.size();

    auto loop = scf::ForOp::create(b, kbFirst, add(kbLast, 1), idx(1), init);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value kb = loop.getInductionVar();
      ValueRange it = loop.getRegionIterArgs();
      Value stage = arith::AndIOp::create(
          b, arith::SubIOp::create(b, kb, kbFirst), idx(1));
      Value other = arith::XOrIOp::create(b, stage, idx(1));
      when(ult(kb, kbLast), [&] {
        issue(ks, vs, other, add(kb, 1), row, start, length, kHead, vHead);
      });
      // Always a group (empty at the last block), so that "all but the
      // newest group" is this block's.
      NVVM::CpAsyncCommitGroupOp::create(b);
      NVVM::CpAsyncWaitGroupOp::create(b, 1);
      gpu::BarrierOp::create(b);

      Value k0 = mul(kb, kKeys);
      auto step = [&](bool masked) -> SmallVector<Value> {
        SoftmaxState s{tb.make(rowL, llvm::to_vector(it.take_front(nRow))),
                       tb.make(rowL, llvm::to_vector(it.slice(nRow, nRow))),
                       tb.make(accL, llvm::to_vector(it.slice(2 * nRow, nAcc)))};
        Value kTile = tb.makeShared(ks, ValueRange{stage}, {kKeys, K});
        Value vTile = tb.makeShared(vs, ValueRange{stage}, {kKeys, V});
        auto keep = [&](ImplicitLocOpBuilder &bb, Value r, Value col,
                        ValueRange rowScalars) -> Value {
          Value qi = arith::AddIOp::create(bb, q0, r);
          Value kj = arith::AddIOp::create(bb, k0, col);
          return windowKeeps(
              bb, qi, kj,
              window > 0 ? Value(arith::ConstantIndexOp::create(bb, window))
                         : windowFromF32(bb, rowScalars[0]));
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
        SmallVector<Value> out;
        for (Value t : {next.m, next.l, next.acc})
          llvm::append_range(out, tb.convertLayout(
                                      t, t == next.acc ? accL : rowL));
        return out;
      };
      // The interior: every key of the block is at or before the block's
      // first query and inside its last valid query's window.
      Value interior = arith::ConstantOp::create(b, b.getBoolAttr(false));
      if (window > 0)
        interior = arith::AndIOp::create(
            b, cmp(arith::CmpIPredicate::ule, add(k0, kKeys - 1), q0),
            cmp(arith::CmpIPredicate::uge, k0,
                windowFirstKey(b, qLast, idx(window))));
      auto branch = scf::IfOp::create(b, TypeRange(ValueRange(init)),
                                      interior, /*withElse=*/true);
      {
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(branch.thenBlock());
        scf::YieldOp::create(b, step(false));
        b.setInsertionPointToStart(branch.elseBlock());
        scf::YieldOp::create(b, step(true));
      }
      // Every warp is done with this stage before the next block's copies
      // overwrite it.
      gpu::BarrierOp::create(b);
      scf::YieldOp::create(b, branch.getResults());
    }
    ValueRange fin = loop.getResults();
    SoftmaxState s{tb.make(rowL, llvm::to_vector(fin.take_front(nRow))),
                   tb.make(rowL, llvm::to_vector(fin.slice(nRow, nRow))),
                   tb.make(accL, llvm::to_vector(fin.slice(2 * nRow, nAcc)))};
    Value out = windowOutput(tb, s);
    SmallVector<Value> regs = tb.convertLayout(out, accL);
    if (!tb.failure().empty()) {
      failure = tb.failure();
      return;
    }
    // Rows inside the sequence store their pairs of columns.
    std::map<int64_t, SmallVector<int64_t>> byRow;
    for (int64_t r = 0; r < int64_t(accL.regs.size()); r += 2)
      byRow[accL.regs[r][0]].push_back(r);
    for (auto &[rowCoord, rs] : byRow) {
      Value qi = add(q0, tb.coordinate(accL, rs.front(), 0));
      when(ult(qi, length), [&] {
        for (int64_t r : rs) {
          Value pair = vector::FromElementsOp::create(
              b, VectorType::get({2}, elem),
              ValueRange{fromF32(regs[r], elem), fromF32(regs[r + 1], elem)});
          vector::StoreOp::create(
              b, pair, o,
              ValueRange{row, add(start, qi), head, tb.coordinate(accL, r, 1)});
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
    if (!desc || !abi || func.isExternal() ||
        !kda::runsOnLanes(func, kda::windowLanesRefusal(
                                    desc, func.getFunctionType().getInputs())))
      return;
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
    auto byName = [&](StringRef name) {
      return kda::abiArgument(func, abi, name);
    };
    prog.q = byName("q");
    prog.k = byName("k");
    prog.v = byName("v");
    prog.o = byName("o");
    prog.cu = byName("cu_seqlens");
    prog.sizes = byName("window_sizes");
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
    Value qb = arith::SubIOp::create(
        b, arith::SubIOp::create(b, blocks, arith::ConstantIndexOp::create(b, 1)),
        forall.getInductionVar(0));
    Value n = forall.getInductionVar(2);
    // cu_seqlens' grid launches N + 1 sequences (the manifest's extent);
    // the last has no sequence.
    if (desc.getVarlen().getValue()) {
      auto guard = scf::IfOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, n, seqs),
          false);
      b.setInsertionPointToStart(guard.thenBlock());
    }
    prog.emit(qb, forall.getInductionVar(1), n);
    if (!prog.failure.empty()) {
      func.emitError("kda-gpu-window-registers: the lane tiles do not take "
                     "this kernel: ")
          << prog.failure;
      return signalPassFailure();
    }
    kda::useApproximateMath(forall);
    func->setAttr(kda::kExplicitThreadsAttr, b.getUnitAttr());
    func->setAttr(kda::kBlockThreadsAttr, b.getI64IntegerAttr(kWarps * 32));
    // cp.async copies 16 bytes and pairs are read and written as 4: rows
    // need aligned pointers (the runtime checks what the manifest states).
    kda::requireAlignedRows(func, [&](StringRef name, MemRefType) {
      return name == "q" || name == "k" || name == "v" || name == "o";
    });
  }
};

} // namespace

std::string mlir::kda::windowLanesRefusal(WindowPassAttr windowPass,
                                          TypeRange argumentTypes) {
  if (!windowPass)
    return "its description (kda.window_pass) is missing";
  if (!operandType(argumentTypes))
    return "q, k and v are not all bf16 or all fp16 (the register kernel's "
           "products are bf16 / fp16 mma.sync; fp32 keeps the tile lowering "
           "and its 1e-4 bar)";
  const int64_t K = windowPass.getKeyDim(), V = windowPass.getValueDim();
  if (K % 16 != 0 || V % 16 != 0 || K > 128 || V > 128) {
    std::string why;
    llvm::raw_string_ostream os(why);
    os << "K = " << K << ", V = " << V
       << " are not multiples of 16 up to 128 (the register tiles of 64 "
          "queries)";
    return why;
  }
  return "";
}

std::unique_ptr<Pass> mlir::kda::createGpuWindowRegistersPass() {
  return std::make_unique<WindowRegistersPass>();
}
