//===- LaneTilesTest.cpp - unit tests of the lane tile builder ------------===//
//
// lowering/lanes/LaneTiles.h on its own, without a GPU: layouts are checked
// (every element held evenly, in bounds, once per lane), and the code the
// builder emits is evaluated lane by lane on the CPU. Each program is built
// with the lane and warp ids as constants, so every shuffle's source lane
// folds to a number: a layout conversion is right when, for every lane and
// register, the (register, lane) it reads holds the element the destination
// wants; a reduction is right when it shuffles over exactly the lane bits
// that split the reduced dimension.
//
//===----------------------------------------------------------------------===//

#include "lowering/lanes/LaneTiles.h"
#include "passes/GatedDeltaBackward.h"
#include "passes/GatedDeltaKernel.h"
#include "passes/TileAdjoint.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>

using namespace mlir;
using namespace mlir::kda;

namespace {

/// The value of an index / i32 computation of constants (what the builder
/// emits for lane arithmetic), or nullopt.
std::optional<int64_t> evalInt(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op)
    return std::nullopt;
  if (auto c = dyn_cast<arith::ConstantOp>(op))
    if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
      return i.getValue().getSExtValue();
  if (auto cast = dyn_cast<arith::IndexCastOp>(op))
    return evalInt(cast.getIn());
  if (op->getNumOperands() != 2)
    return std::nullopt;
  std::optional<int64_t> x = evalInt(op->getOperand(0)),
                         y = evalInt(op->getOperand(1));
  if (!x || !y)
    return std::nullopt;
  if (isa<arith::AddIOp>(op))
    return *x + *y;
  if (isa<arith::SubIOp>(op))
    return *x - *y;
  if (isa<arith::MulIOp>(op))
    return *x * *y;
  if (isa<arith::AndIOp>(op))
    return *x & *y;
  if (isa<arith::OrIOp>(op))
    return *x | *y;
  if (isa<arith::XOrIOp>(op))
    return *x ^ *y;
  if (isa<arith::ShRUIOp>(op))
    return int64_t(uint64_t(*x) >> *y);
  if (isa<arith::DivUIOp>(op))
    return *x / *y;
  if (isa<arith::RemUIOp>(op))
    return *x % *y;
  return std::nullopt;
}

class LaneTilesTest : public ::testing::Test {
protected:
  LaneTilesTest() {
    ctx.loadDialect<amdgpu::AMDGPUDialect, nvgpu::NVGPUDialect,
                    arith::ArithDialect,
                    func::FuncDialect, gpu::GPUDialect, LLVM::LLVMDialect,
                    math::MathDialect, memref::MemRefDialect,
                    scf::SCFDialect, vector::VectorDialect>();
    module = ModuleOp::create(UnknownLoc::get(&ctx));
    OpBuilder ob(&ctx);
    ob.setInsertionPointToEnd(module.getBody());
    auto func = func::FuncOp::create(ob, UnknownLoc::get(&ctx), "program",
                                     ob.getFunctionType({}, {}));
    block = func.addEntryBlock();
  }
  ~LaneTilesTest() override { module->erase(); }

  /// A builder for lane `lane` of warp `warp` (both constants).
  struct Lane {
    ImplicitLocOpBuilder b;
    std::unique_ptr<LaneTileBuilder> tb;
  };
  std::unique_ptr<Lane> lane(int64_t warpSize, int64_t warps, int64_t l,
                             int64_t w) {
    auto out = std::unique_ptr<Lane>(new Lane{
        ImplicitLocOpBuilder::atBlockEnd(UnknownLoc::get(&ctx), block), {}});
    Value lv = arith::ConstantIndexOp::create(out->b, l);
    Value wv = arith::ConstantIndexOp::create(out->b, w);
    out->tb = std::make_unique<LaneTileBuilder>(out->b, warpSize, warps, lv, wv);
    return out;
  }
  /// A tile of `layout` whose register r holds the constant r.
  static Value numbered(Lane &l, const LaneLayout &layout) {
    SmallVector<Value> regs;
    for (size_t r = 0; r < layout.regs.size(); ++r)
      regs.push_back(l.tb->constantF32(double(r)));
    return l.tb->make(layout, regs);
  }
  /// A [rows, cols] tile of `layout` on lane `lane` (warp 0) whose element
  /// (i, j) is the constant f(i, j).
  static Value constants(LaneTileBuilder &tb, const LaneLayout &layout,
                         int64_t lane,
                         std::function<double(int64_t, int64_t)> f) {
    SmallVector<Value> regs;
    for (int64_t r = 0; r < int64_t(layout.regs.size()); ++r) {
      LaneLayout::Coords c = layout.at(r, lane, 0);
      regs.push_back(tb.constantF32(f(c[0], c[1])));
    }
    return tb.make(layout, regs);
  }
  /// The source register a value of `numbered` is (its constant).
  static std::optional<int64_t> registerOf(Value v) {
    if (auto c = v.getDefiningOp<arith::ConstantOp>())
      if (auto f = dyn_cast<FloatAttr>(c.getValue()))
        return int64_t(f.getValueAsDouble());
    return std::nullopt;
  }

  /// Checks convertLayout(from -> to) on every lane of every warp.
  void expectConversion(int64_t warpSize, int64_t warps,
                        const LaneLayout &from, const LaneLayout &to,
                        int64_t expectShuffles) {
    for (int64_t w = 0; w < warps; ++w)
      for (int64_t l = 0; l < warpSize; ++l) {
        auto ln = lane(warpSize, warps, l, w);
        Value t = numbered(*ln, from);
        SmallVector<Value> out = ln->tb->convertLayout(t, to);
        ASSERT_EQ(ln->tb->failure(), "");
        ASSERT_EQ(out.size(), to.regs.size());
        int64_t shuffles = 0;
        for (auto [r, v] : llvm::enumerate(out)) {
          int64_t srcLane = l, srcReg = -1;
          if (auto s = v.getDefiningOp<gpu::ShuffleOp>()) {
            ASSERT_EQ(s.getMode(), gpu::ShuffleMode::IDX);
            std::optional<int64_t> from = evalInt(s.getOffset());
            ASSERT_TRUE(from.has_value());
            srcLane = *from;
            ASSERT_TRUE(registerOf(s.getValue()).has_value());
            srcReg = *registerOf(s.getValue());
            ++shuffles;
          } else {
            ASSERT_TRUE(registerOf(v).has_value());
            srcReg = *registerOf(v);
          }
          ASSERT_GE(srcLane, 0);
          ASSERT_LT(srcLane, warpSize);
          EXPECT_EQ(from.at(srcReg, srcLane, w), to.at(r, l, w))
              << "lane " << l << " warp " << w << " register " << r;
        }
        EXPECT_EQ(shuffles, expectShuffles) << "lane " << l;
      }
  }

  /// A tile read back by name after a lock-step run.
  struct Kept {
    std::string name;
    LaneLayout layout;
    SmallVector<Value> regs;
  };
  static Kept kept(LaneTileBuilder &tb, std::string name, Value t) {
    return {std::move(name), tb.layoutOf(t),
            SmallVector<Value>(tb.registersOf(t))};
  }
  /// Elements by (name, i, j) ((name, i, 0) for vectors).
  using Elements = std::map<std::tuple<std::string, int64_t, int64_t>, double>;
  /// One program per lane of `warps` warps of `warpSize` lanes, each built
  /// by `build` on lane l of warp w's builder and returning the tiles to
  /// read back; the programs run in lock step (SimtInterpreter), and the
  /// kept tiles' elements come back. `unitSteps`: the matrix-unit
  /// instructions in lane 0's program.
  Elements runLockStep(
      int64_t warpSize, int64_t warps,
      std::function<std::vector<Kept>(Lane &, int64_t l, int64_t w)> build,
      int64_t *unitSteps = nullptr);
  /// A tile of `layout` on lane l of warp w whose element (i, j) ((i, 0)
  /// for a vector) is f(i, j).
  static Value tileAt(LaneTileBuilder &tb, const LaneLayout &layout,
                      int64_t l, int64_t w,
                      std::function<double(int64_t, int64_t)> f) {
    SmallVector<Value> regs;
    for (int64_t r = 0; r < int64_t(layout.regs.size()); ++r) {
      LaneLayout::Coords c = layout.at(r, l, w);
      regs.push_back(tb.constantF32(f(c[0], c.size() > 1 ? c[1] : 0)));
    }
    return tb.make(layout, regs);
  }
  /// emitIntraChunk on lane l of warp w's builder: its six outputs kept as
  /// "u", "w", "q", "k", "p", "g"; or (`adjoint`) recorded by the tape, its
  /// adjoint seeded on every output o with seed(o, i, j), and the gradients
  /// of `wrt` kept under `wrtNames`.
  static std::vector<Kept>
  intraChunkOnLane(LaneTileBuilder &tb, const ChunkConfig &config,
                   const ChunkInputs &in, int64_t l, int64_t w, bool adjoint,
                   std::function<double(int, int64_t, int64_t)> seed,
                   ArrayRef<Value> wrt, ArrayRef<const char *> wrtNames) {
    static const char *const outputs[] = {"u", "w", "q", "k", "p", "g"};
    std::vector<Kept> out;
    TapeTileBuilder tape(tb);
    IntraChunk intra = emitIntraChunk(adjoint ? static_cast<TileBuilder &>(tape)
                                              : static_cast<TileBuilder &>(tb),
                                      config, in);
    EXPECT_EQ(tb.failure(), "");
    Value tiles[] = {intra.u, intra.w, intra.qDecayed, intra.kToEnd,
                     intra.p, intra.decayLast};
    if (!adjoint) {
      for (int o = 0; o < 6; ++o)
        out.push_back(kept(tb, outputs[o], tiles[o]));
      return out;
    }
    SmallVector<std::pair<Value, Value>> seeds;
    for (int o = 0; o < 6; ++o)
      seeds.push_back({tiles[o], tileAt(tb, tb.layoutOf(tiles[o]), l, w,
                                        [&](int64_t i, int64_t j) {
                                          return seed(o, i, j);
                                        })});
    std::string why;
    auto g = tape.emitAdjoint(seeds, wrt, why);
    EXPECT_TRUE(succeeded(g)) << why;
    if (failed(g))
      return out;
    EXPECT_EQ(tb.failure(), "");
    for (size_t x = 0; x < wrt.size(); ++x)
      out.push_back(kept(tb, wrtNames[x], (*g)[x]));
    return out;
  }

  /// The sum over the elements of f(name, i, j) x (of its magnitude, with
  /// `absolute`).
  static double weighted(
      const Elements &e,
      std::function<double(const std::string &, int64_t, int64_t)> f,
      bool absolute = false) {
    double sum = 0;
    for (auto &[key, x] : e) {
      auto &[name, i, j] = key;
      const double t = f(name, i, j) * x;
      sum += absolute ? std::abs(t) : t;
    }
    return sum;
  }

  int64_t evaluate(const LaneLayout &in,
                   std::function<double(int64_t, int64_t)> value,
                   std::function<Value(LaneTileBuilder &, Value)> program,
                   std::function<double(const LaneLayout::Coords &)> expected,
                   std::optional<LaneLayout> expectLayout = std::nullopt,
                   double tolerance = 0.0);

  /// prefixSumRows of a tile in layout `l` (element (r, c) = 10 r + c + 1),
  /// evaluated lane by lane: every element the sum of its column's rows up
  /// to its own, in the same layout. Returns the shuffles one lane took.
  int64_t prefixSumRowsShuffles(const LaneLayout &l) {
    auto value = [](int64_t r, int64_t c) { return double(r * 10 + c + 1); };
    return evaluate(
        l, value,
        [](LaneTileBuilder &tb, Value x) { return tb.prefixSumRows(x); },
        [&](const LaneLayout::Coords &c) {
          double sum = 0;
          for (int64_t row = 0; row <= c[0]; ++row)
            sum += value(row, c[1]);
          return sum;
        },
        l);
  }

  MLIRContext ctx;
  ModuleOp module;
  Block *block = nullptr;
};

/// K keys 4 per lane, lanes along K, each key once per warp where K allows
/// (the decode kernel's layout for q, k and the gate).
LaneLayout keysBlocked(int64_t K, int64_t laneBits) {
  LaneLayout l;
  l.shape = {K};
  int64_t nL = 1;
  while (2 * nL <= (int64_t(1) << laneBits) && (K / 4) % (2 * nL) == 0)
    nL *= 2;
  for (int64_t blk = 0; blk < K / (4 * nL); ++blk)
    for (int64_t e = 0; e < 4; ++e)
      l.regs.push_back({blk * 4 * nL + e});
  for (int64_t bit = 0; bit < laneBits; ++bit)
    l.lanes.push_back({(int64_t(1) << bit) < nL ? 4 << bit : 0});
  return l;
}

/// The decode kernel's K-major state [K, 16]: 4 lanes along V with 4
/// columns each, the other lane bits along K (RK rows per lane).
LaneLayout stateKMajor(int64_t K, int64_t laneBits) {
  const int64_t groups = (int64_t(1) << laneBits) / 4, RK = K / groups;
  LaneLayout l;
  l.shape = {K, 16};
  for (int64_t i = 0; i < RK; ++i)
    for (int64_t j = 0; j < 4; ++j)
      l.regs.push_back({i, j});
  for (int64_t bit = 0; bit < laneBits; ++bit)
    l.lanes.push_back(bit < 2 ? LaneLayout::Coords{0, 4 << bit}
                              : LaneLayout::Coords{RK << (bit - 2), 0});
  return l;
}

TEST_F(LaneTilesTest, CheckNamesWhatIsWrong) {
  LaneLayout ok = keysBlocked(128, 5);
  EXPECT_EQ(ok.check(), "");
  LaneLayout twice = ok;
  twice.regs[1] = twice.regs[0];
  EXPECT_EQ(twice.check(), "an element twice in one lane's registers");
  LaneLayout outside = ok;
  outside.lanes[4] = {128};
  EXPECT_EQ(outside.check(), "an element out of the tile's bounds");
  LaneLayout uneven = ok;
  uneven.lanes[4] = {0}; // lanes 16..31 copy 0..15: half the keys unheld
  EXPECT_EQ(uneven.check(), "elements that no lane holds");
  EXPECT_EQ(stateKMajor(128, 5).check(), "");
  EXPECT_EQ(stateKMajor(96, 5).check(), "");
  EXPECT_EQ(LaneLayout::replicated({1, 1}, 5, 3).check(), "");
}

TEST_F(LaneTilesTest, SliceAndTranspose) {
  LaneLayout s = stateKMajor(128, 5);
  SmallVector<int64_t> regOf;
  LaneLayout rows = s.slice(0, &regOf);
  EXPECT_EQ(rows.shape, SmallVector<int64_t>{128});
  EXPECT_EQ(rows.regs.size(), 16u);        // RK distinct rows per lane
  EXPECT_EQ(regOf[5], 1);                  // register (1, 1) is row 1
  EXPECT_EQ(rows.replicatedLaneMask(), 3); // the 4 lanes along V hold copies
  EXPECT_EQ(rows.check(), "");
  LaneLayout t = s.transposed();
  // Register 5 is (1, 1); lane 7 adds columns 4 and 8 (bits 0, 1) and the
  // rows of lane group 1 (bit 2: RK = 16).
  EXPECT_EQ(s.at(5, 7, 0), (LaneLayout::Coords{1 + 16, 1 + 4 + 8}));
  EXPECT_EQ(t.at(5, 7, 0), (LaneLayout::Coords{1 + 4 + 8, 1 + 16}));
}

/// The decode kernel's V-major state [K, 16]: 8 lanes along K (4 keys each
/// per 32), the other lane bits along V (4 columns each).
LaneLayout stateVMajor(int64_t K) {
  LaneLayout l;
  l.shape = {K, 16};
  for (int64_t i = 0; i < K / 8; ++i)
    for (int64_t j = 0; j < 4; ++j)
      l.regs.push_back({32 * (i / 4) + i % 4, j});
  for (int64_t bit = 0; bit < 5; ++bit)
    l.lanes.push_back(bit < 3 ? LaneLayout::Coords{4 << bit, 0}
                              : LaneLayout::Coords{0, 4 << (bit - 3)});
  return l;
}

/// K / 32 consecutive keys per lane.
LaneLayout keysContiguous(int64_t K) {
  LaneLayout l;
  l.shape = {K};
  for (int64_t e = 0; e < K / 32; ++e)
    l.regs.push_back({e});
  for (int64_t bit = 0; bit < 5; ++bit)
    l.lanes.push_back({(K / 32) << bit});
  return l;
}

// The decode step's conversions: keys move to the lanes of the state's rows
// (16 indexed shuffles at K = 128, one per state row of the lane), on warps
// of 32 and of 64 lanes, both state layouts; from 4 keys per lane where
// that reaches every row with one register per row, else from K / 32
// consecutive keys per lane (the decode kernel's choice).
TEST_F(LaneTilesTest, KeysToStateRows) {
  for (int64_t K : {64, 96, 128, 256}) {
    SCOPED_TRACE("K = " + std::to_string(K));
    // (At K = 96 the 8 lanes along K hold 3 blocks of 4 at 32-key strides,
    // exactly the V-major state's rows: no shuffle at all.)
    expectConversion(32, 1, keysBlocked(K, 5), stateVMajor(K).slice(0),
                     K == 96 ? 0 : K / 8);
    LaneLayout rows = stateKMajor(K, 5).slice(0);
    if (K == 64 || K == 128) {
      expectConversion(32, 1, keysBlocked(K, 5), rows, K / 8);
      continue;
    }
    // 4-key blocks would need another register in other lane groups.
    EXPECT_NE(LaneTileBuilder::conversionRefusal(keysBlocked(K, 5), rows, 32,
                                                 1),
              "");
    expectConversion(32, 1, keysContiguous(K), rows, K / 8);
  }
  expectConversion(64, 1, keysBlocked(128, 6), stateKMajor(128, 6).slice(0),
                   128 / 16);
}

TEST_F(LaneTilesTest, SameLayoutAndOwnRegistersNeedNoShuffle) {
  LaneLayout keys = keysBlocked(128, 5);
  expectConversion(32, 1, keys, keys, 0);
  // The same elements in another register order: registers, not lanes.
  LaneLayout reordered = keys;
  std::swap(reordered.regs[0], reordered.regs[3]);
  expectConversion(32, 1, keys, reordered, 0);
}

TEST_F(LaneTilesTest, ReductionsShuffleOverTheReducedLaneBits) {
  for (int64_t K : {64, 128}) {
    auto ln = lane(32, 1, 3, 0);
    Value x = numbered(*ln, keysBlocked(K, 5).unsqueezed(0));
    Value sum = ln->tb->rowSum(x);
    ASSERT_EQ(ln->tb->failure(), "");
    EXPECT_EQ(ln->tb->shape(sum), SmallVector<int64_t>{1});
    SmallVector<int64_t> offsets;
    block->walk([&](gpu::ShuffleOp s) {
      if (s.getMode() == gpu::ShuffleMode::XOR)
        offsets.push_back(*evalInt(s.getOffset()));
    });
    // K = 64 fills 16 lanes: lane bit 4 holds copies and is not summed.
    SmallVector<int64_t> expected = {1, 2, 4, 8};
    if (K == 128)
      expected.push_back(16);
    EXPECT_EQ(offsets, expected) << "K = " << K;
    block->clear();
  }
}

TEST_F(LaneTilesTest, VectorTimesStateSumsOverTheKeyLanes) {
  auto ln = lane(32, 1, 5, 0);
  LaneLayout state = stateKMajor(128, 5);
  Value s = numbered(*ln, state);
  Value q = numbered(*ln, keysBlocked(128, 5).unsqueezed(0));
  Value o = ln->tb->matmul(q, s);
  ASSERT_EQ(ln->tb->failure(), "");
  EXPECT_EQ(ln->tb->shape(o), (SmallVector<int64_t>{1, 16}));
  // q moves to the state's rows (16 indexed shuffles), the 4 columns of the
  // lane sum over the 3 lane bits along K (12 xor shuffles).
  int64_t idx = 0, xors = 0;
  block->walk([&](gpu::ShuffleOp sh) {
    (sh.getMode() == gpu::ShuffleMode::IDX ? idx : xors) += 1;
  });
  EXPECT_EQ(idx, 16);
  EXPECT_EQ(xors, 12);
}

/// Runs `build` once per lane of a warp (lane ids constant) and evaluates
/// the f32 values it returns for every lane, shuffles reading the same op of
/// the source lane's program (the programs differ only in their constants).
/// AMD's 16 x 16 steps as the ISA places their operands (lane l of the
/// wave): MFMA 16x16x16: A[l % 16][4 (l / 16) + e], B[4 (l / 16) + e][l %
/// 16], C[4 (l / 16) + e][l % 16]; MFMA 16x16x4 (f32): A[l % 16][l / 16],
/// B[l / 16][l % 16], C as above; WMMA 16x16x16: A[l % 16][e], B[e][l %
/// 16], C[2 e + l / 16][l % 16].
struct UnitPlace {
  int64_t lane, element;
};
/// Where accumulator element e of `lane` is: (row, column).
std::pair<int64_t, int64_t> unitAccumulatorAt(bool wmma, int64_t lane,
                                              int64_t e) {
  return {wmma ? 2 * e + lane / 16 : 4 * (lane / 16) + e, lane % 16};
}
/// Which lane and element hold A[row][kk] and B[kk][col] of a step with k
/// = 4 or 16.
std::pair<UnitPlace, UnitPlace> unitOperandsAt(bool wmma, int64_t k,
                                               int64_t row, int64_t col,
                                               int64_t kk) {
  if (wmma)
    return {{row, kk}, {col, kk}};
  if (k == 4)
    return {{row + 16 * kk, 0}, {col + 16 * kk, 0}};
  return {{row + 16 * (kk / 4), kk % 4}, {col + 16 * (kk / 4), kk % 4}};
}

class WarpEvaluator {
public:
  std::vector<std::vector<Operation *>> programs;
  std::map<Operation *, std::pair<int64_t, int64_t>> where; // lane, index
  /// The contents of shared buffers (memref.alloc values) the programs read,
  /// by their indices.
  std::map<Operation *, std::function<double(ArrayRef<int64_t>)>> memory;

  /// A load's value: `buffer`'s element at `indices` with `extra` added to
  /// the last (a vector load's element).
  std::optional<double> loaded(Value buffer, ValueRange indices,
                               int64_t extra) {
    auto it = memory.find(buffer.getDefiningOp());
    if (it == memory.end())
      return std::nullopt;
    SmallVector<int64_t> at;
    for (Value i : indices) {
      std::optional<int64_t> x = evalInt(i);
      if (!x)
        return std::nullopt;
      at.push_back(*x);
    }
    at.back() += extra;
    return it->second(at);
  }

  /// Lane `lane`'s program: the ops of `block` from position `before` (the
  /// lanes' programs are built one after another, in lane order).
  void record(Block *block, size_t before, int64_t lane) {
    std::vector<Operation *> ops;
    auto it = block->begin();
    std::advance(it, before);
    for (; it != block->end(); ++it) {
      where[&*it] = {lane, int64_t(ops.size())};
      ops.push_back(&*it);
    }
    programs.push_back(std::move(ops));
  }

  std::optional<double> f32(Value v, int64_t lane) {
    Operation *op = v.getDefiningOp();
    if (!op)
      return std::nullopt;
    if (auto c = dyn_cast<arith::ConstantOp>(op))
      if (auto f = dyn_cast<FloatAttr>(c.getValue()))
        return f.getValueAsDouble();
    if (isa<arith::AddFOp>(op)) {
      auto x = f32(op->getOperand(0), lane), y = f32(op->getOperand(1), lane);
      if (!x || !y)
        return std::nullopt;
      return *x + *y;
    }
    if (auto sel = dyn_cast<arith::SelectOp>(op)) {
      std::optional<int64_t> c = cond(sel.getCondition());
      if (!c)
        return std::nullopt;
      return f32(*c ? sel.getTrueValue() : sel.getFalseValue(), lane);
    }
    if (isa<arith::SubFOp, arith::MulFOp>(op)) {
      auto x = f32(op->getOperand(0), lane), y = f32(op->getOperand(1), lane);
      if (!x || !y)
        return std::nullopt;
      return isa<arith::SubFOp>(op) ? *x - *y : *x * *y;
    }
    if (isa<math::FmaOp>(op)) {
      auto x = f32(op->getOperand(0), lane), y = f32(op->getOperand(1), lane),
           z = f32(op->getOperand(2), lane);
      if (!x || !y || !z)
        return std::nullopt;
      return *x * *y + *z;
    }
    if (isa<math::ExpOp>(op)) {
      auto x = f32(op->getOperand(0), lane);
      if (!x)
        return std::nullopt;
      return std::exp(*x);
    }
    if (auto ld = dyn_cast<memref::LoadOp>(op))
      return loaded(ld.getMemref(), ld.getIndices(), 0);
    // Rounding to an operand type is left out (the tests' values are small
    // integers, exact in bf16).
    if (isa<arith::TruncFOp, arith::ExtFOp>(op))
      return f32(op->getOperand(0), lane);
    if (auto ex = dyn_cast<vector::ExtractOp>(op)) {
      if (ex.getStaticPosition().size() != 1)
        return std::nullopt;
      return element(ex.getSource(), ex.getStaticPosition()[0], lane);
    }
    if (auto sh = dyn_cast<gpu::ShuffleOp>(op)) {
      std::optional<int64_t> off = evalInt(sh.getOffset());
      if (!off || (sh.getMode() != gpu::ShuffleMode::XOR &&
                   sh.getMode() != gpu::ShuffleMode::IDX))
        return std::nullopt;
      const int64_t src =
          sh.getMode() == gpu::ShuffleMode::XOR ? lane ^ *off : *off;
      auto [l, i] = where.at(op);
      (void)l;
      auto other = cast<gpu::ShuffleOp>(programs[src][i]);
      return f32(other.getValue(), src);
    }
    return std::nullopt;
  }
  /// Element `e` of a vector (or a scalar operand, e = 0) on `lane`.
  std::optional<double> element(Value v, int64_t e, int64_t lane) {
    if (!isa<VectorType>(v.getType()))
      return f32(v, lane);
    Operation *op = v.getDefiningOp();
    if (!op)
      return std::nullopt;
    if (auto fe = dyn_cast<vector::FromElementsOp>(op))
      return f32(fe.getElements()[e], lane);
    if (auto ld = dyn_cast<vector::LoadOp>(op))
      return loaded(ld.getBase(), ld.getIndices(), e);
    if (isa<amdgpu::MFMAOp, amdgpu::WMMAOp>(op))
      return unitStep(op, e, lane);
    return std::nullopt;
  }
  /// One 16 x 16 step of AMD's units (unitOperandsAt; the op at the same
  /// place in every lane's program).
  std::optional<double> unitStep(Operation *op, int64_t e, int64_t lane) {
    auto [l0, at] = where.at(op);
    (void)l0;
    const bool wmma = isa<amdgpu::WMMAOp>(op);
    const int64_t k = wmma ? 16 : cast<amdgpu::MFMAOp>(op).getK();
    auto [row, col] = unitAccumulatorAt(wmma, lane, e);
    std::optional<double> sum = element(op->getOperand(2), e, lane);
    if (!sum)
      return std::nullopt;
    for (int64_t kk = 0; kk < k; ++kk) {
      auto [pa, pb] = unitOperandsAt(wmma, k, row, col, kk);
      Operation *aOp = programs[pa.lane][at], *bOp = programs[pb.lane][at];
      auto a = element(aOp->getOperand(0), pa.element, pa.lane);
      auto b = element(bOp->getOperand(1), pb.element, pb.lane);
      if (!a || !b)
        return std::nullopt;
      *sum += *a * *b;
    }
    return sum;
  }
  std::optional<int64_t> cond(Value v) {
    if (auto c = v.getDefiningOp<arith::CmpIOp>()) {
      auto x = evalInt(c.getLhs()), y = evalInt(c.getRhs());
      if (!x || !y)
        return std::nullopt;
      switch (c.getPredicate()) {
      case arith::CmpIPredicate::ne:
        return *x != *y;
      case arith::CmpIPredicate::eq:
        return *x == *y;
      case arith::CmpIPredicate::ult:
        return uint64_t(*x) < uint64_t(*y);
      case arith::CmpIPredicate::ule:
        return uint64_t(*x) <= uint64_t(*y);
      default:
        return std::nullopt;
      }
    }
    return std::nullopt;
  }
};

/// Runs the lanes' programs in lock step, op by op, as a wave does (the
/// WarpEvaluator above folds straight-line code; this one executes control
/// flow): every lane's program has the same structure, so the op at one
/// place is one instruction of the wave. scf.if runs each region for the
/// lanes whose condition chose it; scf.for's bounds must agree over the
/// lanes. Shuffles and AMD's matrix steps read the other lanes' values at
/// the same instruction; shared memory is one map for the wave. Values are
/// doubles (rounding to an operand type is left out: the tests check
/// factored decays in f32's range, not rounding).
class SimtInterpreter {
public:
  /// `warpSize` (0: all the lanes): several warps run in lock step as one
  /// wave of warps x warpSize lanes, lane L of warp L / warpSize; shuffles
  /// and mma.sync stay within a warp, and barriers need nothing (every
  /// lane finishes an instruction before the next starts).
  explicit SimtInterpreter(int64_t lanes, int64_t warpSize = 0)
      : warpSize(warpSize ? warpSize : lanes), env(lanes) {}
  int64_t warpSize;
  std::vector<DenseMap<Value, std::vector<double>>> env;
  std::map<std::pair<Operation *, std::vector<int64_t>>, double> shared;
  std::string error;

  std::vector<double> &of(int64_t lane, Value v) {
    auto it = env[lane].find(v);
    if (it == env[lane].end()) {
      // Values defined outside the programs (the test's buffers).
      if (error.empty())
        error = "a value used before it is defined";
      static std::vector<double> none{0.0};
      return none;
    }
    return it->second;
  }
  double scalar(int64_t lane, Value v) { return of(lane, v)[0]; }

  /// Runs ops[l] (the same instruction of lane l's program) for the lanes
  /// in `active`.
  void run(const std::vector<Operation *> &ops,
           const std::vector<int64_t> &active) {
    Operation *op0 = ops[active[0]];
    auto set = [&](int64_t l, Value v, std::vector<double> x) {
      env[l][v] = std::move(x);
    };
    if (auto ifOp = dyn_cast<scf::IfOp>(op0)) {
      std::vector<int64_t> yes, no;
      for (int64_t l : active)
        (scalar(l, ops[l]->getOperand(0)) != 0 ? yes : no).push_back(l);
      for (int side = 0; side < 2; ++side) {
        const std::vector<int64_t> &who = side == 0 ? yes : no;
        if (who.empty())
          continue;
        std::vector<Block *> blocks(ops.size(), nullptr);
        bool empty = false;
        for (int64_t l : who) {
          Region &r = ops[l]->getRegion(side);
          if (r.empty()) {
            empty = true;
            break;
          }
          blocks[l] = &r.front();
        }
        if (empty)
          continue;
        std::vector<std::vector<double>> none;
        runBlock(blocks, who);
        for (int64_t l : who) {
          auto y = cast<scf::YieldOp>(blocks[l]->getTerminator());
          for (auto [res, val] : llvm::zip(ops[l]->getResults(), y.getOperands()))
            set(l, res, of(l, val));
        }
      }
      return;
    }
    if (auto forOp = dyn_cast<scf::ForOp>(op0)) {
      int64_t lo = int64_t(scalar(active[0], forOp.getLowerBound())),
              hi = int64_t(scalar(active[0], forOp.getUpperBound())),
              st = int64_t(scalar(active[0], forOp.getStep()));
      for (int64_t l : active) {
        auto f = cast<scf::ForOp>(ops[l]);
        if (int64_t(scalar(l, f.getLowerBound())) != lo ||
            int64_t(scalar(l, f.getUpperBound())) != hi ||
            int64_t(scalar(l, f.getStep())) != st)
          error = "a loop whose bounds differ over the lanes";
        for (auto [arg, init] :
             llvm::zip(f.getRegionIterArgs(), f.getInitArgs()))
          set(l, arg, of(l, init));
      }
      if (st <= 0) {
        error = "a loop step that is not positive";
        return;
      }
      std::vector<Block *> blocks(ops.size(), nullptr);
      for (int64_t l : active)
        blocks[l] = cast<scf::ForOp>(ops[l]).getBody();
      for (int64_t i = lo; i < hi && error.empty(); i += st) {
        for (int64_t l : active)
          set(l, cast<scf::ForOp>(ops[l]).getInductionVar(), {double(i)});
        runBlock(blocks, active);
        for (int64_t l : active) {
          auto f = cast<scf::ForOp>(ops[l]);
          auto y = cast<scf::YieldOp>(f.getBody()->getTerminator());
          std::vector<std::vector<double>> next;
          for (Value v : y.getOperands())
            next.push_back(of(l, v));
          for (auto [arg, x] : llvm::zip(f.getRegionIterArgs(), next))
            set(l, arg, x);
        }
      }
      for (int64_t l : active) {
        auto f = cast<scf::ForOp>(ops[l]);
        for (auto [res, arg] : llvm::zip(f.getResults(), f.getRegionIterArgs()))
          set(l, res, of(l, arg));
      }
      return;
    }
    if (auto mma = dyn_cast<nvgpu::MmaSyncOp>(op0)) {
      // NVIDIA mma.sync m16n8k8 tf32 (the PTX ISA's fragments: g = lane /
      // 4, t = lane % 4; a: (g, t) (g + 8, t) (g, t + 4) (g + 8, t + 4),
      // b: (t, g) (t + 4, g), c: (g, 2t) (g, 2t + 1) (g + 8, 2t)
      // (g + 8, 2t + 1)); operands as they are (no tf32 rounding).
      const std::array<int64_t, 3> shape = mma.getMmaShapeAsArray();
      if (shape[0] != 16 || shape[1] != 8 ||
          shape[2] != 8) {
        error = "an mma.sync shape other than m16n8k8";
        return;
      }
      int64_t base = 0; // the warp's first lane
      auto aAt = [&](int64_t row, int64_t col) {
        int64_t lane = base + 4 * (row % 8) + col % 4;
        int64_t e = (row / 8) + 2 * (col / 4);
        return of(lane, ops[lane]->getOperand(0))[e];
      };
      auto bAt = [&](int64_t row, int64_t col) {
        int64_t lane = base + 4 * col + row % 4;
        return of(lane, ops[lane]->getOperand(1))[row / 4];
      };
      std::vector<std::vector<double>> got(ops.size());
      for (int64_t lane : active) {
        std::vector<double> c = of(lane, ops[lane]->getOperand(2));
        base = lane - lane % 32;
        const int64_t g = (lane % 32) / 4, t = lane % 4;
        for (int64_t e = 0; e < 4; ++e) {
          const int64_t row = g + 8 * (e / 2), col = 2 * t + e % 2;
          for (int64_t kk = 0; kk < 8; ++kk)
            c[e] += aAt(row, kk) * bAt(kk, col);
        }
        got[lane] = c;
      }
      for (int64_t lane : active)
        set(lane, ops[lane]->getResult(0), got[lane]);
      return;
    }
    if (isa<amdgpu::MFMAOp, amdgpu::WMMAOp>(op0)) {
      const bool wmma = isa<amdgpu::WMMAOp>(op0);
      const int64_t k = wmma ? 16 : cast<amdgpu::MFMAOp>(op0).getK();
      const int64_t n = wmma ? 8 : 4;
      for (int64_t lane : active) {
        std::vector<double> c = of(lane, ops[lane]->getOperand(2));
        for (int64_t e = 0; e < n; ++e) {
          auto [row, col] = unitAccumulatorAt(wmma, lane, e);
          for (int64_t kk = 0; kk < k; ++kk) {
            auto [pa, pb] = unitOperandsAt(wmma, k, row, col, kk);
            c[e] += of(pa.lane, ops[pa.lane]->getOperand(0))[pa.element] *
                    of(pb.lane, ops[pb.lane]->getOperand(1))[pb.element];
          }
        }
        set(lane, ops[lane]->getResult(0), c);
      }
      return;
    }
    if (isa<gpu::ShuffleOp>(op0)) {
      const int64_t width = int64_t(env.size());
      std::vector<std::vector<double>> got(ops.size());
      for (int64_t l : active) {
        auto sh = cast<gpu::ShuffleOp>(ops[l]);
        int64_t off = int64_t(scalar(l, sh.getOffset())), src = l;
        switch (sh.getMode()) {
        case gpu::ShuffleMode::XOR: src = l ^ off; break;
        case gpu::ShuffleMode::IDX: src = l - l % warpSize + off; break;
        case gpu::ShuffleMode::DOWN:
          src = (l % warpSize) + off < warpSize ? l + off : l;
          break;
        case gpu::ShuffleMode::UP: src = l % warpSize >= off ? l - off : l; break;
        }
        if (src < 0 || src >= width || src / warpSize != l / warpSize) {
          error = "a shuffle from outside the wave";
          return;
        }
        got[l] = of(src, ops[src]->getOperand(0));
      }
      for (int64_t l : active) {
        set(l, ops[l]->getResult(0), got[l]);
        set(l, ops[l]->getResult(1), {1.0});
      }
      return;
    }
    if (isa<gpu::SubgroupBroadcastOp>(op0)) {
      std::vector<double> first = of(active[0], ops[active[0]]->getOperand(0));
      for (int64_t l : active)
        set(l, ops[l]->getResult(0), first);
      return;
    }
    for (int64_t l : active)
      runOne(l, ops[l]);
  }

  void runBlock(const std::vector<Block *> &blocks,
                const std::vector<int64_t> &active) {
    std::vector<Block::iterator> it(blocks.size());
    for (int64_t l : active)
      it[l] = blocks[l]->begin();
    while (error.empty()) {
      std::vector<Operation *> ops(blocks.size(), nullptr);
      bool done = false;
      for (int64_t l : active) {
        if (it[l] == blocks[l]->end() ||
            it[l]->hasTrait<OpTrait::IsTerminator>()) {
          done = true;
          break;
        }
        ops[l] = &*it[l];
      }
      if (done)
        return;
      run(ops, active);
      for (int64_t l : active)
        ++it[l];
    }
  }

  /// One lane's own instruction (no other lane's values).
  void runOne(int64_t l, Operation *op) {
    auto x = [&](unsigned i) { return scalar(l, op->getOperand(i)); };
    auto out = [&](std::vector<double> v) { env[l][op->getResult(0)] = v; };
    auto asInt = [](double v) { return int64_t(v); };
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      if (auto f = dyn_cast<FloatAttr>(c.getValue()))
        return out({f.getValueAsDouble()});
      if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
        return out({double(i.getValue().getSExtValue())});
      if (auto d = dyn_cast<DenseElementsAttr>(c.getValue())) {
        std::vector<double> v;
        if (d.getElementType().isIntOrIndex())
          for (APInt a : d.getValues<APInt>())
            v.push_back(double(a.getSExtValue()));
        else
          for (APFloat a : d.getValues<APFloat>())
            v.push_back(a.convertToDouble());
        return out(v);
      }
    }
    if (auto bc = dyn_cast<arith::BitcastOp>(op)) {
      // f32 <-> i32 (splitting tf32 operands): through float's bits.
      if (bc.getType().isF32()) {
        uint32_t bits = uint32_t(asInt(x(0)));
        float f;
        std::memcpy(&f, &bits, 4);
        return out({double(f)});
      }
      float f = float(x(0));
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return out({double(bits)});
    }
    if (isa<arith::IndexCastOp, arith::ExtFOp, arith::TruncFOp>(op))
      return out(of(l, op->getOperand(0)));
    if (isa<arith::AddIOp>(op)) return out({double(asInt(x(0)) + asInt(x(1)))});
    if (isa<arith::SubIOp>(op)) return out({double(asInt(x(0)) - asInt(x(1)))});
    if (isa<arith::MulIOp>(op)) return out({double(asInt(x(0)) * asInt(x(1)))});
    if (isa<arith::AndIOp>(op)) return out({double(asInt(x(0)) & asInt(x(1)))});
    if (isa<arith::OrIOp>(op)) return out({double(asInt(x(0)) | asInt(x(1)))});
    if (isa<arith::XOrIOp>(op)) return out({double(asInt(x(0)) ^ asInt(x(1)))});
    if (isa<arith::ShRUIOp>(op))
      return out({double(int64_t(uint64_t(asInt(x(0))) >> asInt(x(1))))});
    if (isa<arith::DivUIOp>(op)) return out({double(asInt(x(0)) / asInt(x(1)))});
    if (isa<arith::RemUIOp>(op)) return out({double(asInt(x(0)) % asInt(x(1)))});
    if (isa<arith::MinUIOp>(op)) return out({std::min(x(0), x(1))});
    if (auto c = dyn_cast<arith::CmpIOp>(op)) {
      int64_t a = asInt(x(0)), b = asInt(x(1));
      bool r = false;
      switch (c.getPredicate()) {
      case arith::CmpIPredicate::eq: r = a == b; break;
      case arith::CmpIPredicate::ne: r = a != b; break;
      case arith::CmpIPredicate::ult: case arith::CmpIPredicate::slt: r = a < b; break;
      case arith::CmpIPredicate::ule: case arith::CmpIPredicate::sle: r = a <= b; break;
      case arith::CmpIPredicate::ugt: case arith::CmpIPredicate::sgt: r = a > b; break;
      case arith::CmpIPredicate::uge: case arith::CmpIPredicate::sge: r = a >= b; break;
      }
      return out({r ? 1.0 : 0.0});
    }
    if (auto c = dyn_cast<arith::CmpFOp>(op)) {
      double a = x(0), b = x(1);
      bool r = false;
      switch (c.getPredicate()) {
      case arith::CmpFPredicate::OLE: r = a <= b; break;
      case arith::CmpFPredicate::OLT: r = a < b; break;
      case arith::CmpFPredicate::OGE: r = a >= b; break;
      case arith::CmpFPredicate::OGT: r = a > b; break;
      case arith::CmpFPredicate::OEQ: r = a == b; break;
      case arith::CmpFPredicate::ONE: r = a != b && a == a && b == b; break;
      case arith::CmpFPredicate::UNE: r = !(a == b); break;
      case arith::CmpFPredicate::ULT: r = !(a >= b); break;
      case arith::CmpFPredicate::UGT: r = !(a <= b); break;
      case arith::CmpFPredicate::ULE: r = !(a > b); break;
      case arith::CmpFPredicate::UGE: r = !(a < b); break;
      case arith::CmpFPredicate::UEQ: r = !(a < b) && !(a > b); break;
      case arith::CmpFPredicate::ORD: r = a == a && b == b; break;
      case arith::CmpFPredicate::UNO: r = a != a || b != b; break;
      default: error = "an unhandled float comparison"; break;
      }
      return out({r ? 1.0 : 0.0});
    }
    if (isa<arith::SelectOp>(op))
      return out(x(0) != 0 ? of(l, op->getOperand(1)) : of(l, op->getOperand(2)));
    if (isa<arith::AddFOp>(op)) return out({x(0) + x(1)});
    if (isa<arith::SubFOp>(op)) return out({x(0) - x(1)});
    if (isa<arith::MulFOp>(op)) return out({x(0) * x(1)});
    if (isa<arith::MaximumFOp>(op)) return out({std::max(x(0), x(1))});
    if (isa<math::ExpOp>(op)) return out({std::exp(x(0))});
    if (isa<arith::DivFOp>(op)) return out({x(0) / x(1)});
    if (isa<arith::NegFOp>(op)) return out({-x(0)});
    if (isa<arith::MinimumFOp>(op)) return out({std::min(x(0), x(1))});
    if (isa<math::RsqrtOp>(op)) return out({1.0 / std::sqrt(x(0))});
    if (isa<math::SqrtOp>(op)) return out({std::sqrt(x(0))});
    if (isa<math::LogOp>(op)) return out({std::log(x(0))});
    if (isa<math::Log1pOp>(op)) return out({std::log1p(x(0))});
    if (isa<math::AbsFOp>(op)) return out({std::abs(x(0))});
    if (isa<math::TanhOp>(op)) return out({std::tanh(x(0))});
    if (isa<math::FmaOp>(op)) return out({x(0) * x(1) + x(2)});
    if (auto fe = dyn_cast<vector::FromElementsOp>(op)) {
      std::vector<double> v;
      for (Value e : fe.getElements())
        v.push_back(scalar(l, e));
      return out(v);
    }
    if (auto ex = dyn_cast<vector::ExtractOp>(op)) {
      auto type = cast<VectorType>(ex.getSource().getType());
      int64_t flat = 0;
      for (auto [d, p] : llvm::enumerate(ex.getStaticPosition()))
        flat = flat * type.getDimSize(d) + p;
      return out({of(l, ex.getSource())[flat]});
    }
    auto indices = [&](ValueRange is) {
      std::vector<int64_t> at;
      for (Value i : is)
        at.push_back(asInt(scalar(l, i)));
      return at;
    };
    if (auto st = dyn_cast<memref::StoreOp>(op)) {
      shared[{st.getMemref().getDefiningOp(), indices(st.getIndices())}] =
          scalar(l, st.getValue());
      return;
    }
    if (auto vl = dyn_cast<vector::LoadOp>(op)) {
      // Consecutive words along the last index.
      std::vector<int64_t> at = indices(vl.getIndices());
      std::vector<double> v;
      for (int64_t k = 0; k < vl.getVectorType().getNumElements(); ++k) {
        std::vector<int64_t> w = at;
        w.back() += k;
        auto it = shared.find({vl.getBase().getDefiningOp(), w});
        if (it == shared.end()) {
          error = "a shared vector load of a word nothing stored";
          return;
        }
        v.push_back(it->second);
      }
      return out(v);
    }
    if (auto vs = dyn_cast<vector::StoreOp>(op)) {
      std::vector<int64_t> at = indices(vs.getIndices());
      std::vector<double> v = of(l, vs.getValueToStore());
      for (size_t k = 0; k < v.size(); ++k) {
        std::vector<int64_t> w = at;
        w.back() += int64_t(k);
        shared[{vs.getBase().getDefiningOp(), w}] = v[k];
      }
      return;
    }
    if (auto ld = dyn_cast<memref::LoadOp>(op)) {
      auto it = shared.find({ld.getMemref().getDefiningOp(), indices(ld.getIndices())});
      if (it == shared.end()) {
        error = "a shared load of a word nothing stored";
        return;
      }
      return out({it->second});
    }
    if (isa<LLVM::FenceOp, gpu::BarrierOp>(op) ||
        op->getName().getStringRef() == "nvvm.barrier0" ||
        op->getName().getStringRef() == "nvvm.bar.warp.sync")
      return;
    if (error.empty())
      error = "no rule for " + op->getName().getStringRef().str();
  }
};

/// mma.sync m16n8k16's fragments, lane by lane, as the PTX ISA states them
/// (g = lane / 4, t = lane % 4): the accumulator c_i at (g + 8 (i / 2),
/// 2 t + i % 2); the A operand a_i at (g + 8 ((i / 2) % 2), 2 t + i % 2 +
/// 8 (i / 4)); the B operand b_i at (2 t + i % 2 + 8 (i / 2), g). Rows of
/// the accumulator and of A split over the warps in blocks of 16.
TEST_F(LaneTilesTest, MmaLayoutsAreThePtxFragments) {
  const int64_t warps = 4;
  LaneLayout acc = LaneTileBuilder::mmaAccumulator(64, 8, warps);
  LaneLayout a = LaneTileBuilder::mmaOperandA(64, 16, warps);
  LaneLayout bop = LaneTileBuilder::mmaOperandB(16, 8, warps);
  for (const LaneLayout *l : {&acc, &a, &bop})
    EXPECT_EQ(l->check(), "");
  ASSERT_EQ(acc.regs.size(), 4u);
  ASSERT_EQ(a.regs.size(), 8u);
  ASSERT_EQ(bop.regs.size(), 4u);
  for (int64_t w = 0; w < warps; ++w)
    for (int64_t lane = 0; lane < 32; ++lane) {
      const int64_t g = lane / 4, t = lane % 4;
      for (int64_t i = 0; i < 4; ++i)
        EXPECT_EQ(acc.at(i, lane, w),
                  (LaneLayout::Coords{16 * w + g + 8 * (i / 2), 2 * t + i % 2}))
            << "c" << i << " lane " << lane << " warp " << w;
      for (int64_t i = 0; i < 8; ++i)
        EXPECT_EQ(a.at(i, lane, w),
                  (LaneLayout::Coords{16 * w + g + 8 * ((i / 2) % 2),
                                      2 * t + i % 2 + 8 * (i / 4)}))
            << "a" << i << " lane " << lane << " warp " << w;
      for (int64_t i = 0; i < 4; ++i)
        EXPECT_EQ(bop.at(i, lane, w),
                  (LaneLayout::Coords{2 * t + i % 2 + 8 * (i / 2), g}))
            << "b" << i << " lane " << lane << " warp " << w;
    }
}

/// AMD's fragments, lane by lane, as the ISA states them (lane l of the
/// wave): MFMA 16x16x16 (wave64) A[l % 16][4 (l / 16) + e], B[4 (l / 16) +
/// e][l % 16], C[4 (l / 16) + e][l % 16]; WMMA 16x16x16 (wave32) A[l %
/// 16][e] and B[e][l % 16] (lanes 16..31 copies), C[2 e + l / 16][l % 16].
/// Tiled: registers in (row tile, column tile, e) order.
TEST_F(LaneTilesTest, AmdUnitLayoutsAreTheIsaFragments) {
  for (MatrixUnit u : {MatrixUnit::Mfma, MatrixUnit::Wmma}) {
    const bool mfma = u == MatrixUnit::Mfma;
    const int64_t lanes = LaneTileBuilder::unitWarpSize(u);
    const int64_t per = mfma ? 4 : 16, accPer = mfma ? 4 : 8;
    LaneLayout acc = LaneTileBuilder::unitAccumulator(u, 32, 32);
    LaneLayout a = LaneTileBuilder::unitOperandA(u, 32, 32);
    LaneLayout bop = LaneTileBuilder::unitOperandB(u, 32, 32);
    for (const LaneLayout *l : {&acc, &a, &bop})
      EXPECT_EQ(l->check(), "");
    for (int64_t lane = 0; lane < lanes; ++lane)
      for (int64_t t0 = 0; t0 < 2; ++t0)
        for (int64_t t1 = 0; t1 < 2; ++t1) {
          for (int64_t e = 0; e < accPer; ++e) {
            const int64_t r = (t0 * 2 + t1) * accPer + e;
            const int64_t row = mfma ? 4 * (lane / 16) + e : 2 * e + lane / 16;
            EXPECT_EQ(acc.at(r, lane, 0),
                      (LaneLayout::Coords{16 * t0 + row, 16 * t1 + lane % 16}))
                << "c" << e << " lane " << lane;
          }
          for (int64_t e = 0; e < per; ++e) {
            const int64_t r = (t0 * 2 + t1) * per + e;
            const int64_t k = mfma ? 4 * (lane / 16) + e : e;
            EXPECT_EQ(a.at(r, lane, 0),
                      (LaneLayout::Coords{16 * t0 + lane % 16, 16 * t1 + k}))
                << "a" << e << " lane " << lane;
            EXPECT_EQ(bop.at(r, lane, 0),
                      (LaneLayout::Coords{16 * t0 + k, 16 * t1 + lane % 16}))
                << "b" << e << " lane " << lane;
          }
        }
  }
}

/// Products on AMD's units (unitProduct), evaluated lane by lane with the
/// instructions as the ISA defines them: C = A B + C0 for [32, 32] tiles
/// (two tiles each way, two k steps), A in the A operand layout, B and C0 in
/// the accumulator layout (MFMA's B operand layout; WMMA's B rows come by
/// shuffles), for bf16 and f32 operands (MFMA's fp32 16x16x4 steps, WMMA's
/// three bf16 products).
TEST_F(LaneTilesTest, UnitProductsOnAmd) {
  auto aVal = [](int64_t i, int64_t k) { return double((i * 3 + k) % 7) - 3; };
  auto bVal = [](int64_t k, int64_t j) { return double((k + 2 * j) % 5) - 2; };
  auto cVal = [](int64_t i, int64_t j) { return double(i - j); };
  for (MatrixUnit u : {MatrixUnit::Mfma, MatrixUnit::Wmma})
    for (bool f32 : {false, true}) {
      const int64_t lanes = LaneTileBuilder::unitWarpSize(u);
      const LaneLayout aL = LaneTileBuilder::unitOperandA(u, 32, 32);
      const LaneLayout accL = LaneTileBuilder::unitAccumulator(u, 32, 32);
      WarpEvaluator ev;
      std::vector<std::unique_ptr<Lane>> ls;
      std::vector<SmallVector<Value>> results;
      std::vector<LaneLayout> layouts;
      for (int64_t lane = 0; lane < lanes; ++lane) {
        const size_t before = block->getOperations().size();
        ls.push_back(this->lane(lanes, 1, lane, 0));
        LaneTileBuilder &tb = *ls.back()->tb;
        tb.useMatrixUnit(u, f32 ? Float32Type::get(&ctx)
                                : Type(BFloat16Type::get(&ctx)));
        auto tile = [&](const LaneLayout &l,
                        std::function<double(int64_t, int64_t)> f) {
          return constants(tb, l, lane, f);
        };
        Value y = tb.matmulAdd(tile(accL, cVal), tile(aL, aVal),
                               tile(accL, bVal));
        ASSERT_EQ(tb.failure(), "");
        layouts.push_back(tb.layoutOf(y));
        results.push_back(SmallVector<Value>(tb.registersOf(y)));
        ev.record(block, before, lane);
      }
      int64_t steps = 0;
      for (Operation *op : ev.programs[0])
        steps += isa<amdgpu::MFMAOp, amdgpu::WMMAOp>(op);
      // 2 x 2 tiles x 2 k steps; MFMA fp32 four 16x16x4 steps each, WMMA
      // fp32 three products each.
      EXPECT_EQ(steps, 8 * (!f32 ? 1 : u == MatrixUnit::Mfma ? 4 : 3));
      for (int64_t lane = 0; lane < lanes; ++lane) {
        EXPECT_EQ(layouts[lane], accL);
        for (int64_t r = 0; r < int64_t(results[lane].size()); ++r) {
          LaneLayout::Coords c = layouts[lane].at(r, lane, 0);
          double want = cVal(c[0], c[1]);
          for (int64_t k = 0; k < 32; ++k)
            want += aVal(c[0], k) * bVal(k, c[1]);
          std::optional<double> got = ev.f32(results[lane][r], lane);
          ASSERT_TRUE(got.has_value()) << "lane " << lane << " register " << r;
          EXPECT_EQ(*got, want) << (u == MatrixUnit::Mfma ? "mfma" : "wmma")
                                << (f32 ? " f32" : " bf16") << " lane " << lane
                                << " at (" << c[0] << ", " << c[1] << ")";
        }
      }
    }
}

/// The window kernel's products on AMD's units (transposeSharedProducts):
/// S = Q K^T with K a shared [64, 32] tile, run as S^T = K Q^T (K the A
/// operand, read from shared memory as aligned vectors; Q the B operand in
/// its fragments), then O = O0 + S V with V a [64, 32] shared tile stored
/// transposed (makeSharedTransposed), run as O^T = V^T S^T + O0^T: S^T, the
/// first product's accumulator, is the second's B operand (MFMA: as it is;
/// WMMA: after shuffles). Evaluated lane by lane, the loads read from the
/// buffers' contents; the vector reads are checked too.
TEST_F(LaneTilesTest, WindowProductsOnAmdRunTransposed) {
  const int64_t K = 32, V = 32, keys = 64, pad = 8;
  auto qVal = [](int64_t i, int64_t k) { return double((i + k) % 3) - 1; };
  auto kVal = [](int64_t j, int64_t k) { return double((j * 3 + k) % 5) - 2; };
  auto vVal = [](int64_t j, int64_t c) { return double((j + 2 * c) % 7) - 3; };
  auto oVal = [](int64_t i, int64_t c) { return double(i - c); };
  for (MatrixUnit u : {MatrixUnit::Mfma, MatrixUnit::Wmma}) {
    const int64_t lanes = LaneTileBuilder::unitWarpSize(u);
    const LaneLayout qL = LaneTileBuilder::unitOperandB(u, K, 16).transposed();
    const LaneLayout oL =
        LaneTileBuilder::unitAccumulator(u, V, 16).transposed();
    WarpEvaluator ev;
    auto wg = gpu::AddressSpaceAttr::get(&ctx, gpu::AddressSpace::Workgroup);
    ImplicitLocOpBuilder ab =
        ImplicitLocOpBuilder::atBlockEnd(UnknownLoc::get(&ctx), block);
    Type bf16 = ab.getBF16Type();
    Value ks = memref::AllocOp::create(
        ab, MemRefType::get({1, keys, K + pad}, bf16,
                            MemRefLayoutAttrInterface{}, wg));
    Value vs = memref::AllocOp::create(
        ab, MemRefType::get({1, V, keys + pad}, bf16,
                            MemRefLayoutAttrInterface{}, wg));
    ev.memory[ks.getDefiningOp()] = [&](ArrayRef<int64_t> at) {
      return at[2] < K ? kVal(at[1], at[2]) : 1e9;
    };
    // V^T: element (c, j) is V's (j, c).
    ev.memory[vs.getDefiningOp()] = [&](ArrayRef<int64_t> at) {
      return at[2] < keys ? vVal(at[2], at[1]) : 1e9;
    };
    std::vector<std::unique_ptr<Lane>> ls;
    std::vector<SmallVector<Value>> sRegs, oRegs;
    std::vector<LaneLayout> sLayouts, oLayouts;
    int64_t vectorReads = 0, scalarReads = 0;
    for (int64_t lane = 0; lane < lanes; ++lane) {
      const size_t before = block->getOperations().size();
      ls.push_back(this->lane(lanes, 1, lane, 0));
      LaneTileBuilder &tb = *ls.back()->tb;
      tb.useMatrixUnit(u, bf16);
      tb.transposeSharedProducts();
      auto tile = [&](const LaneLayout &l,
                      std::function<double(int64_t, int64_t)> f) {
        return constants(tb, l, lane, f);
      };
      Value zero = arith::ConstantIndexOp::create(ls.back()->b, 0);
      Value kTile = tb.makeShared(ks, ValueRange{zero}, {keys, K});
      Value vTile = tb.makeSharedTransposed(vs, ValueRange{zero}, {keys, V});
      Value sTile = tb.matmul(tile(qL, qVal), kTile, false, true);
      Value oTile = tb.matmulAdd(tile(oL, oVal), sTile, vTile);
      ASSERT_EQ(tb.failure(), "");
      sLayouts.push_back(tb.layoutOf(sTile));
      oLayouts.push_back(tb.layoutOf(oTile));
      sRegs.push_back(SmallVector<Value>(tb.registersOf(sTile)));
      oRegs.push_back(SmallVector<Value>(tb.registersOf(oTile)));
      ev.record(block, before, lane);
    }
    for (Operation *op : ev.programs[0]) {
      if (auto ld = dyn_cast<vector::LoadOp>(op)) {
        ++vectorReads;
        EXPECT_EQ(ld.getAlignment().value_or(0),
                  uint64_t(ld.getVectorType().getNumElements() * 2));
      }
      scalarReads += isa<memref::LoadOp>(op);
    }
    // Every shared read a vector: MFMA's fragments 4 consecutive k, WMMA's 16.
    EXPECT_EQ(scalarReads, 0);
    EXPECT_GT(vectorReads, 0);
    for (int64_t lane = 0; lane < lanes; ++lane) {
      EXPECT_EQ(sLayouts[lane], LaneTileBuilder::unitAccumulator(u, keys, 16)
                                    .transposed());
      EXPECT_EQ(oLayouts[lane], oL);
      for (int64_t r = 0; r < int64_t(sRegs[lane].size()); ++r) {
        LaneLayout::Coords c = sLayouts[lane].at(r, lane, 0);
        double want = 0;
        for (int64_t k = 0; k < K; ++k)
          want += qVal(c[0], k) * kVal(c[1], k);
        std::optional<double> got = ev.f32(sRegs[lane][r], lane);
        ASSERT_TRUE(got.has_value()) << "S lane " << lane << " register " << r;
        EXPECT_EQ(*got, want) << (u == MatrixUnit::Mfma ? "mfma" : "wmma")
                              << " S lane " << lane << " at (" << c[0] << ", "
                              << c[1] << ")";
      }
      for (int64_t r = 0; r < int64_t(oRegs[lane].size()); ++r) {
        LaneLayout::Coords c = oL.at(r, lane, 0);
        double want = oVal(c[0], c[1]);
        for (int64_t j = 0; j < keys; ++j) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k)
            s += qVal(c[0], k) * kVal(j, k);
          want += s * vVal(j, c[1]);
        }
        std::optional<double> got = ev.f32(oRegs[lane][r], lane);
        ASSERT_TRUE(got.has_value()) << "O lane " << lane << " register " << r;
        EXPECT_EQ(*got, want) << (u == MatrixUnit::Mfma ? "mfma" : "wmma")
                              << " O lane " << lane << " at (" << c[0] << ", "
                              << c[1] << ")";
      }
    }
  }
}

/// The window kernel's P: the scores' accumulator registers are the next
/// product's A operand, reordered, with no shuffle (FlashAttention-2's
/// register reuse, as a layout conversion the builder plans).
TEST_F(LaneTilesTest, AccumulatorToOperandIsARegisterPermutation) {
  expectConversion(32, 4, LaneTileBuilder::mmaAccumulator(64, 64, 4),
                   LaneTileBuilder::mmaOperandA(64, 64, 4), 0);
}

/// The gate cumsum's primitive on lanes: a [16, 4] tile whose rows are
/// blocks of 4 registers, lane bits 2 and 4 numbering the blocks (bit 3
/// holds copies), lane bits 0 and 1 the columns: every lane's every element
/// is the sum of its column's rows up to its own, evaluated lane by lane.
TEST_F(LaneTilesTest, PrefixSumRowsScansRegistersThenLaneBlocks) {
  LaneLayout l;
  l.shape = {16, 4};
  for (int64_t r = 0; r < 4; ++r)
    l.regs.push_back({r, 0});
  l.lanes = {{0, 1}, {0, 2}, {4, 0}, {0, 0}, {8, 0}};
  ASSERT_EQ(l.check(), "");
  // Two levels of xor shuffles (lane bits 2 and 4), one per lane.
  EXPECT_EQ(prefixSumRowsShuffles(l), 2);
}

/// Builds `program` once per lane of one warp (the tile's registers
/// numbered by `value` of their coordinates), evaluates the registers of the
/// tile it returns lane by lane, and checks each against `expected` of its
/// coordinates. Returns the number of shuffles of lane 0's program.
int64_t LaneTilesTest::evaluate(
    const LaneLayout &in, std::function<double(int64_t, int64_t)> value,
    std::function<Value(LaneTileBuilder &, Value)> program,
    std::function<double(const LaneLayout::Coords &)> expected,
    std::optional<LaneLayout> expectLayout, double tolerance) {
  WarpEvaluator ev;
  std::vector<std::unique_ptr<Lane>> lanes;
  std::vector<SmallVector<Value>> results;
  std::vector<LaneLayout> layouts;
  for (int64_t lane = 0; lane < 32; ++lane) {
    const size_t before = block->getOperations().size();
    lanes.push_back(this->lane(32, 1, lane, 0));
    SmallVector<Value> regs;
    for (int64_t r = 0; r < int64_t(in.regs.size()); ++r) {
      LaneLayout::Coords c = in.at(r, lane, 0);
      regs.push_back(lanes.back()->tb->constantF32(value(c[0], c[1])));
    }
    Value x = lanes.back()->tb->make(in, regs);
    Value y = program(*lanes.back()->tb, x);
    EXPECT_EQ(lanes.back()->tb->failure(), "");
    if (!lanes.back()->tb->failure().empty())
      return -1;
    layouts.push_back(lanes.back()->tb->layoutOf(y));
    if (expectLayout)
      EXPECT_EQ(layouts.back(), *expectLayout);
    results.push_back(SmallVector<Value>(lanes.back()->tb->registersOf(y)));
    ev.record(block, before, lane);
  }
  for (int64_t lane = 0; lane < 32; ++lane)
    for (int64_t r = 0; r < int64_t(results[lane].size()); ++r) {
      LaneLayout::Coords c = layouts[lane].at(r, lane, 0);
      std::optional<double> got = ev.f32(results[lane][r], lane);
      EXPECT_TRUE(got.has_value()) << "lane " << lane << " register " << r;
      if (!got)
        return -1;
      EXPECT_NEAR(*got, expected(c), tolerance)
          << "lane " << lane << " register " << r << " at (" << c[0]
          << (c.size() > 1 ? ", " + std::to_string(c[1]) : std::string())
          << ")";
    }
  int64_t shuffles = 0;
  for (Operation *op : ev.programs[0])
    shuffles += isa<gpu::ShuffleOp>(op);
  return shuffles;
}

/// The gate cumsum in mma.sync's own layout (rows g and g + 8 of a lane:
/// a register bit above three lane bits): the scan takes the lane bits
/// (xor shuffles of the totals), then the register bit.
TEST_F(LaneTilesTest, PrefixSumRowsInTheMmaLayout) {
  // Three lane bits (rows 1, 2, 4), one shuffle each per register (rows
  // g and g + 8 are in different 8-row groups until the register bit, row
  // 8, which needs none): 3 x 16.
  EXPECT_EQ(prefixSumRowsShuffles(LaneTileBuilder::mmaOperandA(16, 32, 1)), 48);
}

/// A row of a tile whose rows are on lanes: every lane reads its columns of
/// the row from the lane holding them (G's last row for the chunk's decay).
TEST_F(LaneTilesTest, RowOfRowsOnLanes) {
  auto value = [](int64_t r, int64_t c) { return double(r * 100 + c); };
  LaneLayout acc = LaneTileBuilder::mmaAccumulator(16, 16, 1);
  for (int64_t row : {0, 5, 8, 15})
    evaluate(
        acc, value,
        [&](LaneTileBuilder &tb, Value x) { return tb.rowOf(x, row); },
        [&](const LaneLayout::Coords &c) { return value(row, c[0]); });
}

/// (I + L)^-1 of a strictly lower 16 x 16 L held in the accumulator layout
/// (as the intra-chunk products leave it): one column per lane, checked
/// against the same forward substitution in double.
TEST_F(LaneTilesTest, InvertUnitLowerOnLanes) {
  auto value = [](int64_t i, int64_t j) {
    return j < i ? 0.1 * double((i * 7 + j * 3) % 11) - 0.5 : 0.0;
  };
  double ref[16][16];
  for (int64_t c = 0; c < 16; ++c)
    for (int64_t i = 0; i < 16; ++i) {
      double x = i == c ? 1.0 : 0.0;
      for (int64_t j = 0; j < i; ++j)
        x -= value(i, j) * ref[j][c];
      ref[i][c] = x;
    }
  int64_t shuffles = evaluate(
      LaneTileBuilder::mmaAccumulator(16, 16, 1), value,
      [](LaneTileBuilder &tb, Value x) { return tb.invertUnitLower(x); },
      [&](const LaneLayout::Coords &c) { return ref[c[0]][c[1]]; },
      std::nullopt, 1e-5);
  EXPECT_EQ(shuffles, 16 * 15 / 2);
}

/// The exact pairwise product of the intra-chunk matrices for gates whose
/// factored form would overflow: sum_d a_id b_jd exp(g_id - g_jd), j <= i.
TEST_F(LaneTilesTest, DecayedPairsOnLanes) {
  // One tile in A's layout stands for a, b and g (the evaluator numbers a
  // single input): a = b = x, g = x / 100.
  auto value = [](int64_t r, int64_t c) {
    return 0.01 * double((r * 5 + c * 3) % 17) - 0.05 * double(r);
  };
  const int64_t K = 32;
  for (bool inclusive : {true, false})
    evaluate(
        LaneTileBuilder::mmaOperandA(16, K, 1), value,
        [&](LaneTileBuilder &tb, Value x) {
          Value g = tb.map({16, K}, {x},
                           [](ImplicitLocOpBuilder &b, ValueRange s,
                              ValueRange) -> Value {
                             return arith::MulFOp::create(
                                 b, s[0],
                                 arith::ConstantOp::create(
                                     b, b.getF32FloatAttr(0.01)));
                           });
          return tb.decayedPairs(x, x, g, inclusive);
        },
        [&](const LaneLayout::Coords &c) {
          const int64_t i = c[0], j = c[1];
          if (inclusive ? j > i : j >= i)
            return 0.0;
          double sum = 0;
          for (int64_t d = 0; d < K; ++d)
            sum += value(i, d) * value(j, d) *
                   std::exp(0.01 * (value(i, d) - value(j, d)));
          return sum;
        },
        std::nullopt, 1e-5);
}

/// Unbounded gates' decayed pairs on AMD's units (unitFactoredPairs), run
/// lane by lane in lock step: the intra kernel's blocked [16, 32] rows (one
/// row a lane on MFMA's 64 lanes, two on WMMA's 32), P = sum_d q_id k_jd
/// exp(G_id - G_jd) for j <= i and L the same for j < i, against the sum
/// itself, for gates whose steps make the wave take groups of 16, 8, 4 and
/// one key.
TEST_F(LaneTilesTest, FactoredPairsOnAmdUnits) {
  const int64_t C = 16, D = 32;
  // Values exact in f32 (the program's constants are f32): eighths.
  auto qVal = [](int64_t i, int64_t d) { return double((i * 5 + d * 3) % 7 - 3) / 8; };
  auto kVal = [](int64_t i, int64_t d) { return double((i * 3 + d) % 5 - 2) / 8; };
  // Per-token steps of steep x 2/8 .. 9/8: the largest group whose half
  // span stays within 80 is 16 keys, then 8 (steep 12), 4 (24), one (160).
  for (MatrixUnit u : {MatrixUnit::Mfma, MatrixUnit::Wmma})
    for (double steep : {0.0625, 12.0, 24.0, 160.0}) {
      auto gVal = [&](int64_t i, int64_t d) {
        double sum = 0;
        for (int64_t t = 0; t <= i; ++t)
          sum -= steep * double(2 + (t * 7 + d * 3) % 8) / 8;
        return sum;
      };
      const int64_t lanes = LaneTileBuilder::unitWarpSize(u);
      // The intra program's own layout, one warp.
      const LaneLayout blocked = LaneTileBuilder::rowBlocked(D, lanes, 1);
      ASSERT_EQ(blocked.check(), "");
      ImplicitLocOpBuilder ab =
          ImplicitLocOpBuilder::atBlockEnd(UnknownLoc::get(&ctx), block);
      Value exchange = memref::AllocOp::create(
          ab, MemRefType::get({std::max(C * (D + 1), D * (C + 1))}, ab.getF32Type(),
                              MemRefLayoutAttrInterface{},
                              gpu::AddressSpaceAttr::get(
                                  &ctx, gpu::AddressSpace::Workgroup)));
      std::vector<std::unique_ptr<Lane>> ls;
      std::vector<std::vector<Operation *>> programs;
      std::vector<SmallVector<Value>> pRegs, lRegs;
      std::vector<LaneLayout> layouts;
      for (int64_t lane = 0; lane < lanes; ++lane) {
        const size_t before = block->getOperations().size();
        ls.push_back(this->lane(lanes, 1, lane, 0));
        LaneTileBuilder &tb = *ls.back()->tb;
        tb.useMatrixUnit(u, ab.getF32Type());
        tb.useExchange(exchange);
        auto tile = [&](std::function<double(int64_t, int64_t)> f) {
          return constants(tb, blocked, lane, f);
        };
        Value q = tile(qVal), k = tile(kVal), g = tile(gVal);
        SmallVector<Value> pairs =
            tb.decayedPairsMany({q, k}, k, g, {true, false});
        ASSERT_EQ(tb.failure(), "");
        layouts.push_back(tb.layoutOf(pairs[0]));
        pRegs.push_back(SmallVector<Value>(tb.registersOf(pairs[0])));
        lRegs.push_back(SmallVector<Value>(tb.registersOf(pairs[1])));
        std::vector<Operation *> ops;
        auto it = block->begin();
        std::advance(it, before);
        for (; it != block->end(); ++it)
          ops.push_back(&*it);
        programs.push_back(std::move(ops));
      }
      // The factored form, not the per-lane pairwise one: a loop over key
      // groups whose size a branch picks.
      bool loops = false;
      for (Operation *op : programs[0])
        loops |= isa<scf::ForOp>(op);
      EXPECT_TRUE(loops);
      SimtInterpreter sim(lanes);
      std::vector<int64_t> all;
      for (int64_t l = 0; l < lanes; ++l) {
        all.push_back(l);
        ASSERT_EQ(programs[l].size(), programs[0].size());
      }
      for (size_t i = 0; i < programs[0].size() && sim.error.empty(); ++i) {
        std::vector<Operation *> ops;
        for (int64_t l = 0; l < lanes; ++l)
          ops.push_back(programs[l][i]);
        sim.run(ops, all);
      }
      ASSERT_EQ(sim.error, "");
      for (int64_t lane = 0; lane < lanes; ++lane)
        for (int64_t r = 0; r < int64_t(pRegs[lane].size()); ++r) {
          LaneLayout::Coords c = layouts[lane].at(r, lane, 0);
          const int64_t i = c[0], j = c[1];
          // (Pairs j > i are not summed: their decays overflow a double.)
          double want = 0, scale = 0, wantL = 0;
          for (int64_t d = 0; d < D && j <= i; ++d) {
            double t = kVal(j, d) * std::exp(gVal(i, d) - gVal(j, d));
            want += qVal(i, d) * t;
            wantL += kVal(i, d) * t;
            scale += std::abs(qVal(i, d) * t) + std::abs(kVal(i, d) * t);
          }
          const double p = sim.scalar(lane, pRegs[lane][r]);
          const double lv = sim.scalar(lane, lRegs[lane][r]);
          const char *unit = u == MatrixUnit::Mfma ? "mfma" : "wmma";
          EXPECT_NEAR(p, j <= i ? want : 0.0, 1e-9 * (1 + scale))
              << unit << " steep " << steep << " P(" << i << ", " << j << ")";
          EXPECT_NEAR(lv, j < i ? wantL : 0.0, 1e-9 * (1 + scale))
              << unit << " steep " << steep << " L(" << i << ", " << j << ")";
        }
    }
}

/// decayedPairs' adjoint sums on lanes (decayedApply, the gradient's
/// intra-chunk adjoint), run lane by lane in lock step: out[r, d] = sum_s
/// dP[r, s] x[s, d] exp(g[r, d] - g[s, d]) over s < r (s <= r inclusive),
/// and transposed sum_s dP[s, r] x[s, d] exp(g[s, d] - g[r, d]) over s > r
/// (s >= r), against the sums in double, for x and g in mma.sync's row
/// layout and in the intra program's blocked rows, dP in the accumulator's.
/// The gates are steep enough that the discarded pairs' exponents overflow
/// f32 (they must take the exponent 0, not inf times zero).
TEST_F(LaneTilesTest, DecayedApplyOnLanes) {
  const int64_t C = 16, D = 16;
  auto xVal = [](int64_t i, int64_t d) { return double((i * 5 + d * 3) % 7 - 3) / 8; };
  auto pVal = [](int64_t i, int64_t j) { return double((i * 3 + j * 7) % 9 - 4) / 8; };
  auto gVal = [](int64_t i, int64_t d) {
    double sum = 0;
    for (int64_t t = 0; t <= i; ++t)
      sum -= 12.0 * double(2 + (t * 7 + d * 3) % 8) / 8;
    return sum;
  };
  const LaneLayout acc = LaneTileBuilder::mmaAccumulator(C, C, 1);
  // dP's rows to the lanes that hold x's rows: through the exchange region
  // (a register that differs between the reading lanes).
  ImplicitLocOpBuilder ab =
      ImplicitLocOpBuilder::atBlockEnd(UnknownLoc::get(&ctx), block);
  Value exchange = memref::AllocOp::create(
      ab, MemRefType::get({C * (C + 1)}, ab.getF32Type(),
                          MemRefLayoutAttrInterface{},
                          gpu::AddressSpaceAttr::get(
                              &ctx, gpu::AddressSpace::Workgroup)));
  // mma.sync's rows: dP staged in the exchange region, one loop over the
  // key rows (loopedApply, the gradient's chunk programs); blocked rows:
  // the unrolled form.
  for (const LaneLayout &rows : {LaneTileBuilder::mmaOperandA(C, D, 1),
                                 LaneTileBuilder::rowBlocked(D, 32, 1)})
    for (bool transposed : {false, true})
      for (bool inclusive : {false, true}) {
        ASSERT_EQ(rows.check(), "");
        Elements got = runLockStep(32, 1, [&](Lane &ln, int64_t l, int64_t w) {
          LaneTileBuilder &tb = *ln.tb;
          tb.useExchange(exchange);
          Value x = tileAt(tb, rows, l, w, xVal);
          Value g = tileAt(tb, rows, l, w, gVal);
          Value dP = tileAt(tb, acc, l, w, pVal);
          Value out = tb.decayedApply(dP, x, g, inclusive, transposed);
          EXPECT_EQ(tb.failure(), "");
          EXPECT_EQ(tb.layoutOf(out), rows);
          return std::vector<Kept>{kept(tb, "out", out)};
        });
        EXPECT_EQ(int64_t(got.size()), C * D);
        for (auto &[key, value] : got) {
          auto &[name, i, d] = key;
          double want = 0, scale = 0;
          for (int64_t t = 0; t < C; ++t) {
            const bool pair = transposed ? (inclusive ? t >= i : t > i)
                                         : (inclusive ? t <= i : t < i);
            if (!pair)
              continue;
            const double term =
                transposed ? pVal(t, i) * xVal(t, d) *
                                 std::exp(gVal(t, d) - gVal(i, d))
                           : pVal(i, t) * xVal(t, d) *
                                 std::exp(gVal(i, d) - gVal(t, d));
            want += term;
            scale += std::abs(term);
          }
          EXPECT_TRUE(std::isfinite(value));
          EXPECT_NEAR(value, want, 1e-9 * (1 + scale))
              << (transposed ? "transposed " : "") << (inclusive ? "inclusive " : "")
              << "(" << i << ", " << d << ")";
        }
      }
}

LaneTilesTest::Elements LaneTilesTest::runLockStep(
    int64_t warpSize, int64_t warps,
    std::function<std::vector<Kept>(Lane &, int64_t, int64_t)> build,
    int64_t *unitSteps) {
  const int64_t lanes = warpSize * warps;
  std::vector<std::vector<Operation *>> programs;
  std::vector<std::vector<Kept>> tiles;
  for (int64_t lane = 0; lane < lanes; ++lane) {
    // (The program's first op found from the block's last before it:
    // counting from the block's start is quadratic in the lanes.)
    Operation *last = block->empty() ? nullptr : &block->back();
    const int64_t l = lane % warpSize, w = lane / warpSize;
    auto ln = this->lane(warpSize, warps, l, w);
    tiles.push_back(build(*ln, l, w));
    std::vector<Operation *> ops;
    auto it = last ? std::next(Block::iterator(last)) : block->begin();
    for (; it != block->end(); ++it)
      ops.push_back(&*it);
    programs.push_back(std::move(ops));
  }
  if (unitSteps) {
    *unitSteps = 0;
    for (Operation *op : programs[0])
      *unitSteps += isa<nvgpu::MmaSyncOp, amdgpu::MFMAOp>(op);
  }
  SimtInterpreter sim(lanes, warpSize);
  std::vector<int64_t> all;
  for (int64_t l = 0; l < lanes; ++l) {
    all.push_back(l);
    EXPECT_EQ(programs[l].size(), programs[0].size());
  }
  for (size_t i = 0; i < programs[0].size() && sim.error.empty(); ++i) {
    std::vector<Operation *> ops;
    for (int64_t l = 0; l < lanes; ++l)
      ops.push_back(programs[l][i]);
    sim.run(ops, all);
  }
  EXPECT_EQ(sim.error, "");
  Elements values;
  for (int64_t lane = 0; lane < lanes; ++lane)
    for (Kept &k : tiles[lane])
      for (int64_t r = 0; r < int64_t(k.layout.regs.size()); ++r) {
        LaneLayout::Coords c = k.layout.at(r, lane % warpSize, lane / warpSize);
        values[{k.name, c[0], c.size() > 1 ? c[1] : 0}] =
            sim.scalar(lane, k.regs[r]);
      }
  return values;
}

/// The intra-chunk part's adjoint on lane tiles (the gradient's chunk grid,
/// docs/backward.md): emitIntraChunk recorded by the tape over a lane
/// builder (one wave of AMD's MFMA: products the interpreter evaluates),
/// its adjoint seeded on every output (U, W, Gamma Q, the decayed k, P,
/// exp(g_last)), all run lane by lane in lock step; checked against central
/// differences of the same lane forward along a direction that moves every
/// input at once (q, k, v, the gate, beta). Configurations: FLA's log-space
/// gate, and Kimi's prologue (l2 norm, beta's sigmoid).
TEST_F(LaneTilesTest, IntraChunkAdjointOnLanes) {
 for (MatrixUnit u : {MatrixUnit::Mfma, MatrixUnit::MmaSync}) {
  const int64_t C = 16, D = 16, lanes = LaneTileBuilder::unitWarpSize(u);
  ImplicitLocOpBuilder ab =
      ImplicitLocOpBuilder::atBlockEnd(UnknownLoc::get(&ctx), block);
  auto wg = gpu::AddressSpaceAttr::get(&ctx, gpu::AddressSpace::Workgroup);
  const LaneLayout blocked = LaneTileBuilder::rowBlocked(D, lanes, 1);
  LaneLayout rowsL; // beta: the blocked rows, copies on the column bits
  rowsL.shape = {C};
  if (lanes == 64) {
    rowsL.regs = {{0}};
    rowsL.lanes = {{0}, {0}, {1}, {2}, {4}, {8}};
  } else {
    rowsL.regs = {{0}, {8}};
    rowsL.lanes = {{0}, {0}, {1}, {2}, {4}};
  }
  ASSERT_EQ(rowsL.check(), "");
  // Inputs 0 q, 1 k, 2 v, 3 the gate (log space), 4 beta, and a direction;
  // values exact in f32 (eighths).
  auto input = [](int which, int64_t i, int64_t j) {
    switch (which) {
    case 0: return double((i * 5 + j * 3) % 7 - 3) / 8;
    case 1: return double((i * 3 + j * 5) % 9 - 4) / 8;
    case 2: return double((i * 7 + j) % 5 - 2) / 8;
    case 3: return -double(1 + (i * 3 + j * 7) % 4) / 8;
    default: return double((i * 5) % 7 - 3) / 4;
    }
  };
  auto direction = [](int which, int64_t i, int64_t j) {
    return double(((which + 1) * 13 + i * 7 + j * 11) % 17 - 8) / 8;
  };
  // Outputs 0 U, 1 W, 2 Gamma Q, 3 the decayed k, 4 P, 5 exp(g_last) [K]
  // (its element k at (k, 0)), each with its seed.
  const char *outputs[] = {"u", "w", "q", "k", "p", "g"};
  const char *inputs[] = {"q", "k", "v", "gate", "beta"};
  auto indexOf = [](ArrayRef<const char *> names, const std::string &n) {
    return int(llvm::find_if(names, [&](const char *x) { return n == x; }) -
               names.begin());
  };
  auto seedOf = [](int which, int64_t i, int64_t j) {
    return double((which * 5 + i * 3 + j * 7) % 11 - 5) / 8;
  };
  for (int form = 0; form < 2; ++form) {
    ChunkConfig config;
    config.chunk = C;
    config.subChunk = C;
    config.keyDim = D;
    config.valueDim = D;
    if (form == 1) {
      config.qkL2Norm = true;
      config.betaActivation = BetaActivation::sigmoid;
    }
    Value exchange = memref::AllocOp::create(
        ab, MemRefType::get({4096}, ab.getF32Type(),
                            MemRefLayoutAttrInterface{}, wg));
    const double h = 1.0 / 1024;
    // Lane l's program: the forward at x + sign h d (its outputs), or (sign
    // 0) the forward at x under the tape and its adjoint (the inputs'
    // gradients).
    auto program = [&](int sign) {
      return [&, sign](Lane &ln, int64_t l, int64_t w) {
        LaneTileBuilder &tb = *ln.tb;
        if (u == MatrixUnit::MmaSync)
          tb.useMmaSync(ab.getF32Type()); // 3xTF32
        else
          tb.useMatrixUnit(u, ab.getF32Type());
        tb.useExchange(exchange);
        tb.anchor(LaneTileBuilder::unitAccumulator(u, C, C)
                      .spread({C, C}, {0, 0}, 1));
        auto at = [&](int which) {
          return [=](int64_t i, int64_t j) {
            return input(which, i, j) + sign * h * direction(which, i, j);
          };
        };
        ChunkInputs in;
        in.q = tileAt(tb, blocked, l, w, at(0));
        in.k = tileAt(tb, blocked, l, w, at(1));
        in.v = tileAt(tb, blocked, l, w, at(2));
        in.gate = tileAt(tb, blocked, l, w, at(3));
        in.beta = tileAt(tb, rowsL, l, w, at(4));
        in.validRows = arith::ConstantIndexOp::create(ln.b, C);
        return intraChunkOnLane(tb, config, in, l, w, sign == 0, seedOf,
                                {in.q, in.k, in.v, in.gate, in.beta}, inputs);
      };
    };
    // The products ran on the unit's instruction (the interpreter's).
    int64_t steps = 0;
    Elements grads = runLockStep(lanes, 1, program(0), &steps);
    EXPECT_GT(steps, 0);
    auto seedWeight = [&](const std::string &n, int64_t i, int64_t j) {
      return seedOf(indexOf(outputs, n), i, j);
    };
    const double fd = (weighted(runLockStep(lanes, 1, program(1)), seedWeight) -
                       weighted(runLockStep(lanes, 1, program(-1)), seedWeight)) /
                      (2 * h);
    auto along = [&](const std::string &n, int64_t i, int64_t j) {
      return direction(indexOf(inputs, n), i, j);
    };
    const double analytic = weighted(grads, along),
                 scale = weighted(grads, along, /*absolute=*/true);
    // q, k, v, gate [16, 16] and beta [16].
    EXPECT_EQ(int64_t(grads.size()), 4 * C * D + C);
    EXPECT_GT(scale, 1.0);
    EXPECT_NEAR(analytic, fd, 1e-5 * (1 + scale))
        << (form ? "Kimi's prologue" : "log-space gate") << " on "
        << (u == MatrixUnit::Mfma ? "mfma" : "mma.sync");
  }
 }
}

/// The gradient's chunk grid as its lane driver sets it up
/// (GpuIntraRegisters.cpp, IntraProgram::emitAdjointChunk): two warps of
/// mma.sync (3xTF32) splitting K and V by columns, cross-warp sums in
/// shared memory, the UT transform's parked operands, products contracted
/// over the warps' columns and transposed A operands (the adjoint's
/// A^T dC), and Kimi's whole prologue: l2 norm, beta's sigmoid, the gate's
/// lower-bound and softplus forms with A_log (a scalar the gate's maps
/// capture: its gradient sums every element's share) and a channel-wise
/// dt_bias ([K], copies on the row lanes). Every input's gradient along one
/// direction against central differences of the same lane forward.
TEST_F(LaneTilesTest, ChunkAdjointOnLanesKimi) {
  const int64_t C = 16, D = 32, NW = 2, warpSize = 32;
  ImplicitLocOpBuilder ab =
      ImplicitLocOpBuilder::atBlockEnd(UnknownLoc::get(&ctx), block);
  auto wg = gpu::AddressSpaceAttr::get(&ctx, gpu::AddressSpace::Workgroup);
  const LaneLayout blocked = LaneTileBuilder::rowBlocked(D, warpSize, NW);
  LaneLayout rowsL; // beta: the blocked rows, copies on t and the warps
  rowsL.shape = {C};
  rowsL.regs = {{0}, {8}};
  rowsL.lanes = {{0}, {0}, {1}, {2}, {4}};
  rowsL.warps = {{0}};
  LaneLayout colsL; // dt_bias: the blocked columns, copies on g
  colsL.shape = {D};
  const int64_t DW = D / NW, DL = DW / 4;
  for (int64_t c = 0; c < DL; ++c)
    colsL.regs.push_back({c});
  colsL.lanes = {{DL}, {2 * DL}, {0}, {0}, {0}};
  colsL.warps = {{DW}};
  ASSERT_EQ(rowsL.check(), "");
  ASSERT_EQ(colsL.check(), "");
  // Inputs 0 q, 1 k, 2 v, 3 the raw gate, 4 beta's logits, 5 A_log (a
  // scalar), 6 dt_bias [K].
  auto input = [](int which, int64_t i, int64_t j) {
    switch (which) {
    case 0: return double((i * 5 + j * 3) % 7 - 3) / 8;
    case 1: return double((i * 3 + j * 5) % 9 - 4) / 8;
    case 2: return double((i * 7 + j) % 5 - 2) / 8;
    case 3: return double((i * 3 + j * 7) % 9 - 4) / 4;
    case 4: return double((i * 5) % 7 - 3) / 4;
    case 5: return -0.375;
    default: return double((i * 3) % 5 - 2) / 8;
    }
  };
  auto direction = [](int which, int64_t i, int64_t j) {
    return double(((which + 1) * 13 + i * 7 + j * 11) % 17 - 8) / 8;
  };
  const char *outputs[] = {"u", "w", "q", "k", "p", "g"};
  const char *inputs[] = {"q", "k", "v", "gate", "beta", "A_log", "dt_bias"};
  auto indexOf = [](ArrayRef<const char *> names, const std::string &n) {
    return int(llvm::find_if(names, [&](const char *x) { return n == x; }) -
               names.begin());
  };
  auto seedOf = [](int which, int64_t i, int64_t j) {
    return double((which * 5 + i * 3 + j * 7) % 11 - 5) / 8;
  };
  for (GateActivation act :
       {GateActivation::lower_bound, GateActivation::softplus}) {
    ChunkConfig config;
    config.chunk = C;
    config.subChunk = C;
    config.keyDim = D;
    config.valueDim = D;
    config.qkL2Norm = true;
    config.scale = 1.0 / std::sqrt(double(D));
    config.betaActivation = BetaActivation::sigmoid;
    config.gateActivation = act;
    auto buffer = [&](int64_t words) {
      return memref::AllocOp::create(
          ab, MemRefType::get({words}, ab.getF32Type(),
                              MemRefLayoutAttrInterface{}, wg));
    };
    // The driver's shared memory (sharedWords at C = 16, K = V = 32, two
    // warps): cross-warp sums, the exchange regions, the parking.
    Value scratch = buffer(2 * NW * (2 * C * C / 32) * 32);
    Value exchange = buffer(NW * C * (C + 1) * 2);
    Value parking = buffer(C * 2 * (D + 4));
    const double h = 1.0 / 1024;
    bool onlyParams = false;
    auto program = [&](int sign) {
      return [&, sign](Lane &ln, int64_t l, int64_t w) {
        LaneTileBuilder &tb = *ln.tb;
        tb.useMmaSync(ab.getF32Type()); // 3xTF32
        tb.useScratch(scratch);
        tb.useExchange(exchange);
        tb.preferColumnSplits();
        tb.useParking(parking);
        tb.anchor(LaneTileBuilder::unitAccumulator(MatrixUnit::MmaSync, C, C)
                      .spread({C, C}, {0, 0}, NW));
        auto at = [&](int which) {
          const int moved = onlyParams && which < 5 ? 0 : sign;
          return [=](int64_t i, int64_t j) {
            return input(which, i, j) + moved * h * direction(which, i, j);
          };
        };
        ChunkInputs in;
        in.q = tileAt(tb, blocked, l, w, at(0));
        in.k = tileAt(tb, blocked, l, w, at(1));
        in.v = tileAt(tb, blocked, l, w, at(2));
        in.gate = tileAt(tb, blocked, l, w, at(3));
        in.beta = tileAt(tb, rowsL, l, w, at(4));
        in.aLog = tb.constantF32(at(5)(0, 0));
        in.dtBias = tileAt(tb, colsL, l, w, at(6));
        in.validRows = arith::ConstantIndexOp::create(ln.b, C);
        return intraChunkOnLane(
            tb, config, in, l, w, sign == 0, seedOf,
            {in.q, in.k, in.v, in.gate, in.beta, in.aLog, in.dtBias}, inputs);
      };
    };
    Elements grads = runLockStep(warpSize, NW, program(0));
    auto seedWeight = [&](const std::string &n, int64_t i, int64_t j) {
      return seedOf(indexOf(outputs, n), i, j);
    };
    const double fd =
        (weighted(runLockStep(warpSize, NW, program(1)), seedWeight) -
         weighted(runLockStep(warpSize, NW, program(-1)), seedWeight)) /
        (2 * h);
    auto along = [&](const std::string &n, int64_t i, int64_t j) {
      return direction(indexOf(inputs, n), i, j);
    };
    // q, k, v, gate [16, 32], beta [16], A_log [1], dt_bias [32].
    EXPECT_EQ(int64_t(grads.size()), 4 * C * D + C + 1 + D);
    const double analytic = weighted(grads, along),
                 scale = weighted(grads, along, /*absolute=*/true);
    EXPECT_GT(scale, 1.0);
    EXPECT_NEAR(analytic, fd, 1e-5 * (1 + scale))
        << (act == GateActivation::softplus ? "softplus" : "lower bound");
    // The gate's parameters alone (their share of the sum above is small):
    // a direction that moves only A_log and dt_bias.
    onlyParams = true;
    const double fdParams =
        (weighted(runLockStep(warpSize, NW, program(1)), seedWeight) -
         weighted(runLockStep(warpSize, NW, program(-1)), seedWeight)) /
        (2 * h);
    onlyParams = false;
    auto alongParams = [&](const std::string &n, int64_t i, int64_t j) {
      int which = indexOf(inputs, n);
      return which >= 5 ? direction(which, i, j) : 0.0;
    };
    const double analyticParams = weighted(grads, alongParams),
                 scaleParams = weighted(grads, alongParams, true);
    EXPECT_GT(scaleParams, 0.01);
    EXPECT_NEAR(analyticParams, fdParams, 1e-4 * (1 + scaleParams))
        << (act == GateActivation::softplus ? "softplus" : "lower bound");
  }
}

/// The state step's adjoint on lane tiles with respect to everything it
/// reads (the gradient's reverse scan takes the state's part, its step grid
/// the chunk's inputs' part): emitStateStep recorded by the tape over one
/// MFMA wave with the state program's AMD layouts (the state and the rows
/// in the unit's accumulator layout, W, Gamma Q, the decayed k and P read
/// from shared memory by the products), every lane run in lock step, the
/// gradients of all seven inputs along one direction against central
/// differences of the same lane forward.
TEST_F(LaneTilesTest, StateStepAdjointOnLanes) {
 struct Config {
  MatrixUnit u;
  int64_t warps;
 };
 // One wave of MFMA; one warp of mma.sync; two warps of mma.sync splitting
 // K as the step grid's f32 program does (partial products summed across
 // the warps through shared memory).
 for (Config cfg : {Config{MatrixUnit::Mfma, 1}, Config{MatrixUnit::MmaSync, 1},
                    Config{MatrixUnit::MmaSync, 2}}) {
  const MatrixUnit u = cfg.u;
  const int64_t NW = cfg.warps, warpSize = LaneTileBuilder::unitWarpSize(u);
  const int64_t C = 16, K = 16 * NW, VB = 16;
  ImplicitLocOpBuilder ab =
      ImplicitLocOpBuilder::atBlockEnd(UnknownLoc::get(&ctx), block);
  auto wg = gpu::AddressSpaceAttr::get(&ctx, gpu::AddressSpace::Workgroup);
  // The state program's layouts (GpuStateRegisters.cpp) at one warp: AMD's
  // unit accumulators; NVIDIA's mma.sync accumulators of S^T and the rows'
  // transposes (products against the state run transposed).
  const LaneLayout stateL =
      u == MatrixUnit::MmaSync
          ? LaneTileBuilder::mmaAccumulator(VB, K / NW, 1)
                .spread({VB, K}, {0, K / NW}, NW)
                .transposed()
          : LaneTileBuilder::unitAccumulator(u, K, VB).spread({K, VB}, {0, 0},
                                                              1);
  const LaneLayout rowsL =
      u == MatrixUnit::MmaSync
          ? LaneTileBuilder::mmaAccumulator(VB, C, 1)
                .spread({VB, C}, {0, 0}, NW)
                .transposed()
          : LaneTileBuilder::unitAccumulator(u, C, VB).spread({C, VB}, {0, 0},
                                                              1);
  const LaneLayout gL = stateL.slice(0);
  ASSERT_EQ(stateL.check(), "");
  ASSERT_EQ(rowsL.check(), "");
  // Inputs: 0 W, 1 Gamma Q, 2 decayed k, 3 P (lower triangular), 4
  // exp(g_last), 5 U, 6 the state; eighths (exact in f32).
  auto input = [](int which, int64_t i, int64_t j) {
    if (which == 3 && j > i)
      return 0.0;
    if (which == 4)
      return double(4 + (i * 3) % 4) / 8;
    return double(((which + 2) * 7 + i * 5 + j * 3) % 9 - 4) / 8;
  };
  auto direction = [](int which, int64_t i, int64_t j) {
    if (which == 3 && j > i)
      return 0.0;
    return double(((which + 1) * 13 + i * 7 + j * 11) % 17 - 8) / 8;
  };
  auto seedOf = [](int which, int64_t i, int64_t j) {
    return double((which * 5 + i * 3 + j * 7) % 11 - 5) / 8;
  };
  Value shared[4];
  for (int t = 0; t < 4; ++t)
    shared[t] = memref::AllocOp::create(
        ab, MemRefType::get({C, t == 3 ? C : K}, ab.getF32Type(),
                            MemRefLayoutAttrInterface{}, wg));
  Value scratch = memref::AllocOp::create(
      ab, MemRefType::get({4096}, ab.getF32Type(), MemRefLayoutAttrInterface{},
                          wg));
  Value sums = memref::AllocOp::create(
      ab, MemRefType::get({2 * NW * VB * C}, ab.getF32Type(),
                          MemRefLayoutAttrInterface{}, wg));
  const double h = 1.0 / 1024;
  // Lane l of warp w's program: the step at x + sign h d (O and the state
  // after), or (sign 0) under the tape with its adjoint (the inputs'
  // gradients, named by their index).
  auto program = [&](int sign) {
    return [&, sign](Lane &ln, int64_t l, int64_t w) {
      std::vector<Kept> out;
      LaneTileBuilder &tb = *ln.tb;
      if (u == MatrixUnit::MmaSync)
        tb.useMmaSync(ab.getF32Type()); // 3xTF32
      else
        tb.useMatrixUnit(u, ab.getF32Type());
      tb.useExchange(scratch);
      if (NW > 1)
        tb.useScratch(sums);
      auto at = [&](int which) {
        return [=](int64_t i, int64_t j) {
          return input(which, i, j) + (sign == 3 ? 0 : sign) * h * direction(which, i, j);
        };
      };
      // The shared tiles, every lane storing every element (one value).
      for (int t = 0; t < 4; ++t)
        for (int64_t i = 0; i < C; ++i)
          for (int64_t j = 0; j < (t == 3 ? C : K); ++j)
            memref::StoreOp::create(
                ln.b, tb.constantF32(at(t)(i, j)), shared[t],
                ValueRange{arith::ConstantIndexOp::create(ln.b, i),
                           arith::ConstantIndexOp::create(ln.b, j)});
      IntraChunk intra;
      intra.w = tb.makeShared(shared[0], ValueRange{}, {C, K});
      intra.qDecayed = tb.makeShared(shared[1], ValueRange{}, {C, K});
      intra.kToEnd = tb.makeShared(shared[2], ValueRange{}, {C, K});
      intra.p = tb.makeShared(shared[3], ValueRange{}, {C, C});
      intra.decayLast = tileAt(tb, gL, l, w, at(4));
      intra.u = tileAt(tb, rowsL, l, w, at(5));
      Value state = tileAt(tb, stateL, l, w, at(6));
      if (sign == 3) {
        // The GPU schedule's two grids: the reverse scan's adjoint with
        // respect to the state and V_new (the forward on zeros, U not read),
        // then the step grid's with respect to the inputs, seeded at V_new
        // with the reverse scan's dV_new, Gamma Q, the decayed k and P zeros
        // in their places (copies in every warp), as the drivers do.
        Value dO = tileAt(tb, rowsL, l, w,
                          [&](int64_t i, int64_t j) { return seedOf(0, i, j); });
        Value dS = tileAt(tb, stateL, l, w,
                          [&](int64_t i, int64_t j) { return seedOf(1, i, j); });
        IntraChunk rev = intra;
        rev.u = tileAt(tb, rowsL, l, w, [](int64_t, int64_t) { return 0.0; });
        std::string why;
        auto r = emitStateStepAdjoint(
            tb, rev,
            tileAt(tb, stateL, l, w, [](int64_t, int64_t) { return 0.0; }),
            dO, dS, StepAdjointOf::State, why);
        EXPECT_TRUE(succeeded(r)) << why;
        if (failed(r))
          return out;
        IntraChunk step = intra;
        if (u == MatrixUnit::MmaSync) {
          auto standIn = [&](int64_t cols) {
            LaneLayout sl = LaneTileBuilder::mmaOperandA(C, cols, 1)
                                .spread({C, cols}, {0, 0}, NW);
            return tileAt(tb, sl, l, w, [](int64_t, int64_t) { return 0.0; });
          };
          step.qDecayed = standIn(K);
          step.kToEnd = standIn(K);
          step.p = standIn(C);
        }
        auto g = emitStateStepAdjoint(tb, step, state, dO, dS,
                                      StepAdjointOf::Inputs, why, r->dVNew);
        EXPECT_TRUE(succeeded(g)) << why;
        EXPECT_EQ(tb.failure(), "");
        if (failed(g))
          return out;
        Value got[] = {g->dW, g->dQDecayed, g->dKToEnd, g->dP, g->dDecayLast,
                       r->dVNew, r->dState};
        for (int x = 0; x < 7; ++x)
          out.push_back(kept(tb, std::to_string(x), got[x]));
        // A product of zeros added to a tile is that tile.
        if (u == MatrixUnit::MmaSync)
          out.push_back(kept(tb, "acc", tb.matmulAdd(dO, step.qDecayed, state)));
        EXPECT_EQ(tb.failure(), "");
        return out;
      }
      if (sign != 0) {
        ChunkOutputs o = emitStateStep(tb, intra, state);
        EXPECT_EQ(tb.failure(), "");
        out.push_back(kept(tb, "o", o.o));
        out.push_back(kept(tb, "s", o.nextState));
        return out;
      }
      TapeTileBuilder tape(tb);
      ChunkOutputs o = emitStateStep(tape, intra, state);
      EXPECT_EQ(tb.failure(), "");
      auto seed = [&](Value t, int which) {
        return tileAt(tb, tb.layoutOf(t), l, w, [&](int64_t i, int64_t j) {
          return seedOf(which, i, j);
        });
      };
      std::string why;
      auto g = tape.emitAdjoint(
          {{o.o, seed(o.o, 0)}, {o.nextState, seed(o.nextState, 1)}},
          {intra.w, intra.qDecayed, intra.kToEnd, intra.p, intra.decayLast,
           intra.u, state},
          why);
      EXPECT_TRUE(succeeded(g)) << why;
      if (failed(g))
        return out;
      EXPECT_EQ(tb.failure(), "");
      for (int x = 0; x < 7; ++x)
        out.push_back(kept(tb, std::to_string(x), (*g)[x]));
      return out;
    };
  };
  Elements grads = runLockStep(warpSize, NW, program(0));
  {
    // The two grids' gradients (dU: the reverse scan's dV_new) equal the
    // one tape's.
    Elements split = runLockStep(warpSize, NW, program(3));
    int64_t kept = 0;
    for (auto it = split.begin(); it != split.end();) {
      if (std::get<0>(it->first) != "acc") {
        ++it;
        continue;
      }
      auto [name, i, j] = it->first;
      EXPECT_EQ(it->second, seedOf(0, i, j)) << "acc[" << i << ", " << j << "]";
      ++kept;
      it = split.erase(it);
    }
    EXPECT_EQ(kept, u == MatrixUnit::MmaSync ? C * VB : 0);
    EXPECT_EQ(split.size(), grads.size());
    for (auto &[key, value] : grads) {
      auto it = split.find(key);
      ASSERT_NE(it, split.end()) << std::get<0>(key);
      EXPECT_NEAR(it->second, value, 1e-5 * (1 + std::abs(value)))
          << "input " << std::get<0>(key) << " [" << std::get<1>(key) << ", "
          << std::get<2>(key) << "]";
    }
  }
  auto seedWeight = [&](const std::string &n, int64_t i, int64_t j) {
    return seedOf(n == "o" ? 0 : 1, i, j);
  };
  const double fd = (weighted(runLockStep(warpSize, NW, program(1)), seedWeight) -
                     weighted(runLockStep(warpSize, NW, program(-1)), seedWeight)) /
                    (2 * h);
  auto along = [&](const std::string &n, int64_t i, int64_t j) {
    return direction(std::stoi(n), i, j);
  };
  const double analytic = weighted(grads, along),
               scale = weighted(grads, along, /*absolute=*/true);
  // W, Gamma Q, the decayed k [16, K]; P [16, 16]; exp(g_last) [K];
  // U [16, 16]; the state [K, 16].
  EXPECT_EQ(int64_t(grads.size()), 3 * 16 * K + 256 + K + 256 + K * 16);
  EXPECT_GT(scale, 1.0);
  EXPECT_NEAR(analytic, fd, 1e-6 * (1 + scale))
      << (u == MatrixUnit::Mfma ? "mfma" : "mma.sync") << " at " << NW
      << " warps";
 }
}

TEST_F(LaneTilesTest, WhatItDoesNotTakeIsAReasonNotWrongCode) {
  {
    auto ln = lane(32, 1, 0, 0);
    Value a = numbered(*ln, LaneLayout::replicated({4, 4}, 5, 0));
    ln->tb->matmul(a, a);
    EXPECT_NE(ln->tb->failure().find("without a matrix instruction"),
              std::string::npos);
  }
  {
    // Keys split over two warps cannot reach the other warp's lanes.
    auto ln = lane(32, 2, 0, 0);
    LaneLayout split = keysBlocked(128, 5);
    split.shape = {256};
    split.warps = {{128}};
    LaneLayout whole = LaneLayout::replicated({256}, 5, 1);
    ln->tb->convertLayout(numbered(*ln, split), whole);
    EXPECT_NE(ln->tb->failure().find("another warp"), std::string::npos);
  }
  {
    auto ln = lane(32, 1, 0, 0);
    LaneLayout bad = keysBlocked(128, 5);
    bad.regs[1] = bad.regs[0];
    SmallVector<Value> regs(bad.regs.size(), ln->tb->constantF32(0.0));
    ln->tb->make(bad, regs);
    EXPECT_EQ(ln->tb->failure(),
              "a lane layout with an element twice in one lane's registers");
  }
}

} // namespace
