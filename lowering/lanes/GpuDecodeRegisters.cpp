//===- GpuDecodeRegisters.cpp - the decode step as one pass over the state ===//
//
// A decode step (kda.decode_step, SPEC.md section 4) reads each named
// sequence's state from its pool slot, takes one token of the recurrence and
// writes the state back. Per (sequence, value head) that is 2 K V state
// elements moved against about 3 (K + V) elements of q, k, v, gate and
// output: the step is a stream over the state, and the whole game is
// streaming it once at the memory's bandwidth. Lowered like every tile
// program (ChunkTiling.cpp's loop nest), each product is a barrier-fenced
// phase over shared memory and the block waits on each in turn. This pass
// writes the program per lane instead, and takes the arithmetic from the one
// algorithm: the chunk step at C = 1 (emitGatedDeltaChunk, GatedDeltaKernel.cpp)
// run on lane tiles (LaneTiles.h). What is its own is the memory side:
//
//   * one warp per (sequence, value head, VW value columns); a lane holds
//     RK x CL state elements in registers (RK = K / groups, CL = 4 value
//     columns, below), loaded as 16-byte rows (f32 pool), every load of the
//     step issued before the first use;
//   * q, k, the gate and dt_bias are loaded 4 keys per lane (one 16-byte
//     load of f32), each key once per warp, so the prologue (l2 norms, the
//     scale, beta's sigmoid, either gate form) is computed once per key; the
//     algorithm's products against the state move the vectors they need to
//     the lanes of the state's keys by indexed shuffles, and its reductions
//     over K are xor shuffles over the lanes along K: no shared memory, no
//     barrier;
//   * a skipped sequence (negative slot) writes its zero output row and
//     touches no state; with read_indices the state comes from one slot
//     and goes to another (indices; negative: not kept).
//
// State layouts (lane l of a warp of W lanes; groups G; CL = 4):
//   K-major pool [P, HV, K, V]: 4 lanes along V (CL columns each, VW = 4 CL
//     contiguous columns per warp), G = W / 4 groups along K; lane l holds
//     rows (l / 4) RK + i, i < RK = K / G.
//   V-major pool [P, HV, V, K]: 8 lanes along K, G = W / 8 groups along V;
//     lane l holds key columns 4 (l % 8) + 32 jj + e (jj < K / 32, e < 4)
//     and value rows CL (l / 8) + j, j < CL (VW = CL G).
//
// Blocks hold up to 8 warps of the same (sequence, head) (one block per
// (sequence, head) at V = 128); the grid is launched V block fastest, then
// value heads, then sequences, so that the blocks running together stream
// whole slots (HV x K x V contiguous in the pool) instead of one head of many
// random slots: on the H200 that took the step from 0.85 to 0.92 of the
// copy-bandwidth floor at 1024 x 32 heads (bench/RESULTS.md). Configurations
// it does not cover (K or V that do not split as above) keep the tile
// lowering.
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"
#include "lowering/lanes/LaneBuilder.h"
#include "lowering/lanes/LaneTiles.h"
#include "lowering/lanes/PassDescription.h"
#include "lowering/Strategy.h"

#include "passes/GatedDeltaKernel.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Pass/Pass.h"

#include "lowering/Passes.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAGPUDECODEREGISTERS
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;
using namespace mlir::kda;

namespace {

struct DecodeConfig : PrologueDescription {
  int64_t keyDim = 0, valueDim = 0;
  bool vMajor = false;
  bool multiToken = false; // q [N, T, H, K], indices [N, T]
};

std::optional<DecodeConfig> readConfig(DecodePassAttr desc) {
  if (!desc)
    return std::nullopt;
  DecodeConfig c;
  c.keyDim = desc.getKeyDim();
  c.valueDim = desc.getValueDim();
  c.vMajor = desc.getVMajor().getValue();
  c.multiToken = desc.getMultiToken().getValue();
  c.readPrologue(desc.getPrologue());
  return c;
}

/// The lane layout of a warp of `warpSize` lanes for a configuration (file
/// comment), or nullopt where K or V does not split that way.
/// Value columns per lane: 8 (16 KB of state in flight per warp, 233
/// registers) measured no faster on the H200 (bench/RESULTS.md).
constexpr int64_t kColumnsPerLane = 4;

/// Warps per block of a multi-token step: it runs uncapped (below, at the
/// register cap), at 158 registers for K = V = 128, where blocks of 8 warps
/// leave one block (8 warps) per NVIDIA multiprocessor and blocks of 4 leave
/// three (12 warps).
constexpr int64_t kMultiTokenWarps = 4;

struct DecodeLayout {
  int64_t groups = 0;  // lane groups that split K (K-major) or V (V-major)
  int64_t along = 0;   // lanes per group
  int64_t rowsK = 0;   // RK: key indices per lane
  int64_t colsLane = 0; // CL: value columns per lane
  int64_t colsV = 0;   // VW: value columns per warp
  int64_t warps = 0;   // warps per block

  static std::optional<DecodeLayout> of(const DecodeConfig &c,
                                        int64_t warpSize, int64_t colsLane,
                                        int64_t maxWarps) {
    DecodeLayout l;
    const int64_t K = c.keyDim, V = c.valueDim;
    if (warpSize % 8 != 0 || colsLane % 4 != 0 || colsLane <= 0)
      return std::nullopt;
    l.colsLane = colsLane;
    if (c.vMajor) {
      l.along = 8;
      l.groups = warpSize / 8;
      l.colsV = colsLane * l.groups;
      if (K % 32 != 0)
        return std::nullopt;
      l.rowsK = K / 8;
    } else {
      l.along = 4;
      l.groups = warpSize / 4;
      l.colsV = 4 * colsLane;
      if (K % (4 * l.groups) != 0)
        return std::nullopt;
      l.rowsK = K / l.groups;
    }
    if (V % l.colsV != 0 || l.rowsK > 64 || l.rowsK % 4 != 0)
      return std::nullopt;
    const int64_t programs = V / l.colsV;
    for (int64_t w : {8, 4, 2, 1})
      if (w <= maxWarps && programs % w == 0) {
        l.warps = w;
        break;
      }
    return l;
  }
};

struct DecodeProgram : kda::LaneBuilder {
  const DecodeConfig &cfg;
  const DecodeLayout &lay;
  int64_t W; // warp size
  // Arguments.
  Value q, k, v, gate, beta, aLog, dtBias, indices, readIndices, o, pool;
  Value readPool; // where start states come from, if not the pool
  // Lane coordinates.
  Value lane, warp, groupOfLane, posInGroup, vFirst;
  /// Why the lane builder could not take the step (empty: it did).
  std::string failure;
  /// The token of a multi-token step (null: one token per sequence).
  Value token;
  /// Indices of sequence n's current token, then `rest`.
  SmallVector<Value> at(Value n, std::initializer_list<Value> rest) {
    SmallVector<Value> i = {n};
    if (token)
      i.push_back(token);
    i.append(rest.begin(), rest.end());
    return i;
  }

  DecodeProgram(ImplicitLocOpBuilder &b, const DecodeConfig &cfg,
                const DecodeLayout &lay, int64_t warpSize)
      : LaneBuilder(b), cfg(cfg), lay(lay), W(warpSize),
        keyLayoutOnce(keyLayout()) {}
  /// keyLayout(), chosen once per kernel.
  LaneLayout keyLayoutOnce;

  Value scalar(Value mem, ValueRange at) {
    return toF32(memref::LoadOp::create(b, mem, at));
  }
  /// Key index of the lane's state row i.
  Value keyOf(int64_t i) {
    if (!cfg.vMajor)
      return add(mul(groupOfLane, lay.rowsK), i);
    return add(mul(posInGroup, 4), 32 * (i / 4) + i % 4);
  }
  /// The layouts of the lane tiles (LaneTiles.h) the step is computed on.
  /// The state [K, VB] (VB = the block's value columns): register i CL + j is
  /// S[i][j] of loadState, at key keyOf(i) and column j of the lane's.
  LaneLayout stateLayout() const {
    const int64_t CL = lay.colsLane;
    LaneLayout l;
    l.shape = {cfg.keyDim, lay.colsV * lay.warps};
    for (int64_t i = 0; i < lay.rowsK; ++i)
      for (int64_t j = 0; j < CL; ++j)
        l.regs.push_back({cfg.vMajor ? 32 * (i / 4) + i % 4 : i, j});
    for (int64_t bit = 0; (int64_t(1) << bit) < W; ++bit) {
      const int64_t v = int64_t(1) << bit;
      const bool inGroup = v < lay.along; // a bit of posInGroup
      const int64_t step = inGroup ? v : v / lay.along;
      if (cfg.vMajor)
        l.lanes.push_back(inGroup ? LaneLayout::Coords{4 * step, 0}
                                  : LaneLayout::Coords{0, CL * step});
      else
        l.lanes.push_back(inGroup ? LaneLayout::Coords{0, CL * step}
                                  : LaneLayout::Coords{lay.rowsK * step, 0});
    }
    for (int64_t w = 1; w < lay.warps; w *= 2)
      l.warps.push_back({0, lay.colsV * w});
    return l;
  }
  /// Rows of K (q, k, the gate, dt_bias), in the first of these layouts
  /// from which the state's key rows are reached by shuffles of one register
  /// per row:
  ///   - blocks of 4 keys per lane (one 16-byte load of f32), the lanes of a
  ///     warp along K, each key once per warp where K allows (the rest of
  ///     the lanes hold copies): V-major states, and K-major ones up to
  ///     K = 4 x the warp size;
  ///   - K / warp size consecutive keys per lane (K-major states past that,
  ///     or with K not a power of two: the rows of a lane group are
  ///     consecutive);
  ///   - where the state's rows are (the prologue then runs on every lane
  ///     of a row).
  /// The first two run the prologue once per key.
  LaneLayout keyLayout() const {
    const int64_t K = cfg.keyDim;
    auto blocked = [&](int64_t perLane, int64_t laneStride, int64_t lanes) {
      LaneLayout l;
      l.shape = {K};
      for (int64_t blk = 0; blk < K / (perLane * lanes); ++blk)
        for (int64_t e = 0; e < perLane; ++e)
          l.regs.push_back({blk * perLane * lanes + e});
      for (int64_t bit = 0; (int64_t(1) << bit) < W; ++bit)
        l.lanes.push_back(
            {(int64_t(1) << bit) < lanes ? laneStride << bit : 0});
      for (int64_t w = 1; w < lay.warps; w *= 2)
        l.warps.push_back({0});
      return l;
    };
    int64_t nL = 1;
    while (2 * nL <= W && (K / 4) % (2 * nL) == 0)
      nL *= 2;
    SmallVector<LaneLayout> candidates = {blocked(4, 4, nL)};
    if (K % W == 0)
      candidates.push_back(blocked(K / W, K / W, W));
    LaneLayout rows = stateLayout().slice(0);
    for (const LaneLayout &l : candidates)
      if (LaneTileBuilder::conversionRefusal(l, rows, W, lay.warps).empty())
        return l;
    return rows;
  }
  /// A row [K] of `mem` at `prefix` in `keys`: runs of 4 consecutive keys
  /// at multiples of 4 as one vector load (the layouts above have only
  /// those).
  SmallVector<Value> loadKeys(LaneTileBuilder &tb, const LaneLayout &keys,
                              Value mem, ValueRange prefix) {
    SmallVector<Value> out;
    const int64_t n = keys.regs.size();
    for (int64_t r = 0; r < n;) {
      int64_t run = 1;
      while (run < 4 && r + run < n &&
             keys.regs[r + run][0] == keys.regs[r][0] + run)
        ++run;
      if (run != 4 || keys.regs[r][0] % 4 != 0)
        run = 1;
      llvm::append_range(out,
                         kda::loadRowAsF32(b, b.getLoc(), mem, prefix,
                                           tb.coordinate(keys, r, 0), run));
      r += run;
    }
    return out;
  }

  /// State elements S[i][j] (key row i, value column j of the lane), as f32.
  SmallVector<SmallVector<Value>> loadState(Value slot, Value head) {
    const int64_t CL = lay.colsLane;
    // The start state: from read_pool where the step has one.
    Value pool = readPool ? readPool : this->pool;
    SmallVector<SmallVector<Value>> S(lay.rowsK, SmallVector<Value>(CL));
    if (!cfg.vMajor) {
      for (int64_t i = 0; i < lay.rowsK; ++i) {
        SmallVector<Value> row = kda::loadRowAsF32(
            b, b.getLoc(), pool, ValueRange{slot, head, keyOf(i)}, vFirst, CL);
        for (int64_t j = 0; j < CL; ++j)
          S[i][j] = row[j];
      }
      return S;
    }
    for (int64_t j = 0; j < CL; ++j)
      for (int64_t jj = 0; jj < cfg.keyDim / 32; ++jj) {
        SmallVector<Value> row = kda::loadRowAsF32(
            b, b.getLoc(), pool, ValueRange{slot, head, add(vFirst, j)},
            add(mul(posInGroup, 4), 32 * jj), 4);
        for (int64_t e = 0; e < 4; ++e)
          S[jj * 4 + e][j] = row[e];
      }
    return S;
  }

  void storeState(Value slot, Value head,
                  ArrayRef<SmallVector<Value>> S) {
    const int64_t CL = lay.colsLane;
    if (!cfg.vMajor) {
      for (int64_t i = 0; i < lay.rowsK; ++i)
        kda::storeRowFromF32(b, b.getLoc(), pool,
                             ValueRange{slot, head, keyOf(i)}, vFirst, S[i]);
      return;
    }
    for (int64_t j = 0; j < CL; ++j)
      for (int64_t jj = 0; jj < cfg.keyDim / 32; ++jj) {
        SmallVector<Value> row;
        for (int64_t e = 0; e < 4; ++e)
          row.push_back(S[jj * 4 + e][j]);
        kda::storeRowFromF32(b, b.getLoc(), pool,
                             ValueRange{slot, head, add(vFirst, j)},
                             add(mul(posInGroup, 4), 32 * jj), row);
      }
  }

  /// Runs `then` where `cond` holds, `otherwise` elsewhere.
  void branch(Value cond, llvm::function_ref<void()> then,
              llvm::function_ref<void()> otherwise = {}) {
    auto op = scf::IfOp::create(b, cond, static_cast<bool>(otherwise));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(op.thenBlock());
    then();
    if (otherwise) {
      b.setInsertionPointToStart(op.elseBlock());
      otherwise();
    }
  }

  /// One program: sequence n, value head `head`, the block's V columns from
  /// `blockCol`.
  void emit(Value n, Value head, Value blockCol) {
    Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    lane = arith::RemUIOp::create(b, tid, idx(W));
    warp = arith::DivUIOp::create(b, tid, idx(W));
    groupOfLane = arith::DivUIOp::create(b, lane, idx(lay.along));
    posInGroup = arith::RemUIOp::create(b, lane, idx(lay.along));
    Value warpCol = add(blockCol, mul(warp, lay.colsV));
    vFirst = add(warpCol, mul(cfg.vMajor ? groupOfLane : posInGroup,
                              lay.colsLane));
    // Lanes that hold the first key rows write the output (every lane of a
    // column set has the same reduced values).
    Value writesOutput = arith::CmpIOp::create(
        b, arith::CmpIPredicate::eq, cfg.vMajor ? posInGroup : groupOfLane,
        idx(0));

    // The slot read (read_indices, else indices); the destination is
    // indices (with read_indices, negative: the new state is not kept).
    SmallVector<Value> first = {n};
    if (cfg.multiToken)
      first.push_back(idx(0));
    Value rawSlot =
        readIndices ? memref::LoadOp::create(b, readIndices, ValueRange{n})
                          .getResult()
                    : memref::LoadOp::create(b, indices, first).getResult();
    Value skip = arith::CmpIOp::create(
        b, arith::CmpIPredicate::slt, rawSlot,
        arith::ConstantOp::create(b, b.getZeroAttr(rawSlot.getType())));
    branch(
        skip,
        [&] {
          // Skipped sequence: a zero output row, the pool untouched.
          branch(writesOutput, [&] {
            forTokens(n, {}, [&](ValueRange) {
              SmallVector<Value> zeros(lay.colsLane, f32(0.0));
              kda::storeRowFromF32(b, b.getLoc(), o, at(n, {head}), vFirst,
                                   zeros);
              return SmallVector<Value>{};
            });
          });
        },
        [&] { emitStep(n, head, rawSlot); });
  }

  /// Runs `body` once (one token per sequence) or for every token t of a
  /// multi-token step (`token` = t), carrying `carried` through the tokens;
  /// returns what the last run returned.
  SmallVector<Value>
  forTokens(Value n, ValueRange carried,
            llvm::function_ref<SmallVector<Value>(ValueRange)> body) {
    if (!cfg.multiToken)
      return body(carried);
    Value tokens = memref::DimOp::create(b, q, 1);
    auto loop = scf::ForOp::create(b, idx(0), tokens, idx(1), carried);
    OpBuilder::InsertionGuard guard(b);
    // Without carried values the loop already has its (empty) yield.
    if (carried.empty())
      b.setInsertionPoint(loop.getBody()->getTerminator());
    else
      b.setInsertionPointToStart(loop.getBody());
    token = loop.getInductionVar();
    SmallVector<Value> next = body(loop.getRegionIterArgs());
    token = Value();
    if (!carried.empty())
      scf::YieldOp::create(b, next);
    return SmallVector<Value>(loop.getResults().begin(),
                              loop.getResults().end());
  }

  void emitStep(Value n, Value head, Value rawSlot) {
    const int64_t RK = lay.rowsK, CL = lay.colsLane;
    Value slot = arith::IndexCastOp::create(b, b.getIndexType(), rawSlot);
    // Every global load first: the state (the bulk of the bytes), then the
    // token's inputs. (Loading the inputs and running the prologue before
    // the state saves no register that pays: measured, no faster.)
    SmallVector<SmallVector<Value>> S = loadState(slot, head);
    const int64_t headAxis = cfg.multiToken ? 2 : 1;
    Value heads = memref::DimOp::create(b, v, headAxis);
    Value qkHeads = memref::DimOp::create(b, q, headAxis);
    Value qkHead = arith::DivUIOp::create(
        b, head, arith::DivUIOp::create(b, heads, qkHeads));
    if (!cfg.multiToken && !readIndices && !readPool) {
      emitToken(n, head, qkHead, S);
      storeState(slot, head, S); // in place
      return;
    }
    // Where the new state goes: indices (of the token), negative: nowhere.
    auto storeWhereNamed = [&] {
      Value rawDest = memref::LoadOp::create(b, indices, at(n, {}));
      Value keep = arith::CmpIOp::create(
          b, arith::CmpIPredicate::sge, rawDest,
          arith::ConstantOp::create(b, b.getZeroAttr(rawDest.getType())));
      branch(keep, [&] {
        storeState(arith::IndexCastOp::create(b, b.getIndexType(), rawDest),
                   head, S);
      });
    };
    SmallVector<Value> flat;
    for (auto &row : S)
      llvm::append_range(flat, row);
    forTokens(n, flat, [&](ValueRange carried) {
      for (int64_t i = 0; i < RK; ++i)
        for (int64_t j = 0; j < CL; ++j)
          S[i][j] = carried[i * CL + j];
      emitToken(n, head, qkHead, S);
      storeWhereNamed();
      SmallVector<Value> out;
      for (auto &row : S)
        llvm::append_range(out, row);
      return out;
    });
  }

  /// One token of the recurrence on the lane's state S (updated in place):
  /// the token's loads, then the chunk step at C = 1 of the one algorithm
  /// (emitGatedDeltaChunk) on lane tiles, then the output row. False (with
  /// `failure` set) where the lane builder could not take a step.
  bool emitToken(Value n, Value head, Value qkHead,
                 SmallVector<SmallVector<Value>> &S) {
    const int64_t RK = lay.rowsK, CL = lay.colsLane, K = cfg.keyDim;
    LaneTileBuilder tb(b, W, lay.warps, lane, warp);
    const LaneLayout state = stateLayout();
    const LaneLayout &keys = keyLayoutOnce;
    const LaneLayout row = keys.unsqueezed(0);
    const LaneLayout values = state.slice(1).unsqueezed(0);
    tb.anchor(state);
    auto uniformRow = [&](const LaneLayout &l, Value x) {
      return tb.make(l, SmallVector<Value>(l.regs.size(), x));
    };

    ChunkInputs in;
    in.q = tb.make(row, loadKeys(tb, keys, q, at(n, {qkHead})));
    in.k = tb.make(row, loadKeys(tb, keys, k, at(n, {qkHead})));
    in.v = tb.make(values, kda::loadRowAsF32(b, b.getLoc(), v, at(n, {head}),
                                             vFirst, CL));
    if (cfg.gate == "channel")
      in.gate = tb.make(row, loadKeys(tb, keys, gate, at(n, {head})));
    else if (cfg.gate == "head")
      in.gate = uniformRow(row, scalar(gate, at(n, {head})));
    if (dtBias)
      in.dtBias = cast<MemRefType>(dtBias.getType()).getRank() == 2
                      ? tb.make(keys, loadKeys(tb, keys, dtBias, ValueRange{head}))
                      : uniformRow(keys, scalar(dtBias, ValueRange{head}));
    if (aLog)
      in.aLog = scalar(aLog, ValueRange{head});
    if (cfg.beta)
      in.beta = uniformRow(LaneLayout::replicated({1}, state.lanes.size(),
                                                  state.warps.size()),
                           scalar(beta, at(n, {head})));
    in.validRows = idx(1);
    SmallVector<Value> flat;
    for (auto &r : S)
      llvm::append_range(flat, r);
    Value start = tb.make(state, flat);

    ChunkConfig step = cfg.chunkConfig(1, 1, K, state.shape[1]);
    ChunkOutputs out = emitGatedDeltaChunk(tb, step, in, start);

    SmallVector<Value> o = tb.convertLayout(out.o, values);
    SmallVector<Value> next = tb.convertLayout(out.nextState, state);
    if (!tb.failure().empty()) {
      failure = tb.failure();
      return false;
    }
    branch(tb.holdsFirstCopy(values), [&] {
      kda::storeRowFromF32(b, b.getLoc(), this->o, at(n, {head}), vFirst, o);
    });
    for (int64_t i = 0; i < RK; ++i)
      for (int64_t j = 0; j < CL; ++j)
        S[i][j] = next[i * CL + j];
    return true;
  }
};

struct DecodeRegistersPass : kda::impl::KdaGpuDecodeRegistersBase<DecodeRegistersPass> {
  using Base::Base;
  DecodeRegistersPass() = default;
  DecodeRegistersPass(int64_t warpSize, int64_t maxRegisters) {
    this->warpSize = warpSize;
    this->maxRegisters = maxRegisters;
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<gpu::GPUDialect, vector::VectorDialect, math::MathDialect,
                    scf::SCFDialect, memref::MemRefDialect,
                    arith::ArithDialect>();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto desc = func->getAttrOfType<DecodePassAttr>(kda::kDecodePassAttr);
    std::optional<DecodeConfig> cfg = readConfig(desc);
    auto abi = func->getAttrOfType<ArrayAttr>("kda.abi");
    if (!cfg || !abi || func.isExternal() ||
        !kda::runsOnLanes(func, kda::decodeLanesRefusal(desc, warpSize)))
      return;
    std::optional<DecodeLayout> lay =
        DecodeLayout::of(*cfg, warpSize, kColumnsPerLane,
                         cfg->multiToken ? kMultiTokenWarps : 8);
    SmallVector<scf::ForOp> nests;
    for (Operation &op : func.getBody().front())
      if (auto l = dyn_cast<scf::ForOp>(op);
          l && l->hasAttr(kda::kProgramLoopAttr))
        nests.push_back(l);
    if (!lay || nests.size() != 1 || nests[0].getNumResults() != 0) {
      func.emitError("kda-gpu-decode-registers: the strategy gives this "
                     "kernel lanes, but it is not one nest of programs with "
                     "a lane layout");
      return signalPassFailure();
    }
    auto byName = [&](StringRef name) {
      return kda::abiArgument(func, abi, name);
    };
    ImplicitLocOpBuilder b(nests[0].getLoc(), &getContext());
    b.setInsertionPoint(nests[0]);
    DecodeProgram prog(b, *cfg, *lay, warpSize);
    prog.q = byName("q");
    prog.k = byName("k");
    prog.v = byName("v");
    prog.gate = byName("gate");
    prog.beta = byName("beta");
    prog.aLog = byName("A_log");
    prog.dtBias = byName("dt_bias");
    prog.indices = byName("indices");
    prog.readIndices = byName("read_indices");
    prog.o = byName("o_init");
    prog.pool = byName("state_pool");
    prog.readPool = byName("read_pool");
    if (!prog.q || !prog.k || !prog.v || !prog.indices || !prog.o ||
        !prog.pool || (cfg->gate != "none" && !prog.gate) ||
        (cfg->beta && !prog.beta)) {
      func.emitError("kda-gpu-decode-registers: the decode kernel lacks an "
                     "argument its description names");
      return signalPassFailure();
    }
    // The grid: x = block of V columns, y = value head, z = sequence, so
    // that the blocks that start together stream whole slots (a slot's
    // heads are contiguous in the pool); sequence-major was 7 % slower at
    // 1024 x 32 heads on the H200 (bench/RESULTS.md).
    Value numSeqs = memref::DimOp::create(b, prog.q, 0);
    Value heads = memref::DimOp::create(b, prog.v, cfg->multiToken ? 2 : 1);
    const int64_t blockCols = lay->colsV * lay->warps;
    Value blocks = arith::ConstantIndexOp::create(b, cfg->valueDim / blockCols);
    auto forall = scf::ForallOp::create(
        b, SmallVector<OpFoldResult>{blocks, heads, numSeqs}, ValueRange{},
        std::nullopt);
    nests[0].erase();
    b.setInsertionPoint(forall.getBody()->getTerminator());
    prog.emit(forall.getInductionVar(2), forall.getInductionVar(1),
              arith::MulIOp::create(
                  b, forall.getInductionVar(0),
                  arith::ConstantIndexOp::create(b, blockCols)));
    if (!prog.failure.empty()) {
      func.emitError("kda-gpu-decode-registers: the lane tiles do not take "
                     "this step: ")
          << prog.failure;
      return signalPassFailure();
    }

    // 16-bit kernels: the prologue's exponentials, logarithms and divisions
    // (two exps and a division per key of the lane for the gate, measured at
    // about half of the kernel's instructions with libdevice's accurate
    // forms) on the approximate paths (useApproximateMath); fp32 kernels
    // keep the accurate forms.
    if (!kda::keepsFp32Accuracy(func.getArgumentTypes()))
      kda::useApproximateMath(forall);
    func->setAttr(kda::kExplicitThreadsAttr, b.getUnitAttr());
    func->setAttr(kda::kBlockThreadsAttr,
                  b.getI64IntegerAttr(lay->warps * warpSize));
    // NVIDIA: 16 warps per SM (128 registers; the step is bound by the
    // state loads in flight, and ptxas fits it there without spills up to
    // 64 state elements per lane, bundle.test): a register more would halve
    // the resident blocks of 8 warps. Past 64 (K = 256: 128 state elements
    // per lane) the state alone fills the 128: no cap, rather than spills.
    // A multi-token step carries the state through its token loop beside
    // each token's inputs (158 registers at K = V = 128, 80 bytes of spills
    // under the cap): no cap either; it loads the state once for all its
    // tokens, so it needs fewer loads in flight (bench/RESULTS.md).
    if (maxRegisters > 0 && lay->rowsK * lay->colsLane <= 64 &&
        !cfg->multiToken)
      func->setAttr(kda::kMaxRegistersAttr, b.getI32IntegerAttr(maxRegisters));
    // Rows read and written as vectors need aligned pointers (the runtime
    // checks what the manifest states).
    kda::requireAlignedRows(func, [&](StringRef name, MemRefType type) {
      return name == "q" || name == "k" || name == "v" || name == "o_init" ||
             name == "state_pool" || name == "read_pool" ||
             (name == "gate" && cfg->gate == "channel") ||
             (name == "dt_bias" && type.getRank() == 2);
    });
  }
};

} // namespace

std::string mlir::kda::decodeLanesRefusal(DecodePassAttr decodePass,
                                          int64_t warpSize) {
  std::optional<DecodeConfig> cfg = readConfig(decodePass);
  if (!cfg)
    return "its description (kda.decode_pass) is incomplete";
  if (DecodeLayout::of(*cfg, warpSize, kColumnsPerLane, 8))
    return "";
  std::string why;
  llvm::raw_string_ostream os(why);
  os << "K = " << cfg->keyDim << ", V = " << cfg->valueDim << " ("
     << (cfg->vMajor ? "V" : "K") << "-major) do not split over a warp of "
     << warpSize << " lanes with " << kColumnsPerLane
     << " value columns per lane";
  return why;
}

std::unique_ptr<Pass>
mlir::kda::createGpuDecodeRegistersPass(int64_t warpSize,
                                        int64_t maxRegisters) {
  return std::make_unique<DecodeRegistersPass>(warpSize, maxRegisters);
}

