//===- Emulator.cpp - the GPU pipeline's lane kernels, run on the CPU -----===//
//
// See Emulator.h. One Frame per function call: every SSA value of the
// function has a slot (its element count wide) in each lane's row of the
// frame; memref values have a view per lane. A kernel with explicit threads
// runs every op for all its active lanes before the next op; scf.if splits
// the lanes, scf.for and scf.while run each lane's own iterations a round at
// a time (warp-wide instructions and barriers check their lanes).
//
//===----------------------------------------------------------------------===//

#include "Emulator.h"
#include "Npy.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>

using namespace mlir;

namespace kda::emu {
bool ignoreWarpSyncs = false;
bool shortWgmmaWaits = false;
namespace {

constexpr int kMaxRank = 8;

/// A view with its sizes and strides inline (a lane's copy is cheap).
struct LaneView {
  Memory *memory = nullptr;
  int64_t offset = 0;
  int rank = 0;
  int64_t sizes[kMaxRank] = {}, strides[kMaxRank] = {};
};

/// Where a value lives in a frame row: `offset` .. offset + width in the
/// doubles, or view `view` (memrefs).
struct Slot {
  uint32_t offset = 0, width = 0;
  int32_t view = -1;
};

/// The slots of one function's values (computed once a function).
struct Layout {
  llvm::DenseMap<Value, Slot> slots;
  uint32_t doubles = 0, views = 0;
};

int64_t elementsOf(Type t) {
  if (auto v = dyn_cast<VectorType>(t))
    return v.getNumElements();
  // (nvvm.mma.sync's result: a struct of its accumulator registers.)
  if (auto s = dyn_cast<LLVM::LLVMStructType>(t))
    return int64_t(s.getBody().size());
  return 1;
}

Type elementOf(Type t) {
  if (auto v = dyn_cast<VectorType>(t))
    return v.getElementType();
  return t;
}

unsigned bitsOf(Type t) {
  t = elementOf(t);
  if (t.isIndex())
    return 64;
  if (auto i = dyn_cast<IntegerType>(t))
    return i.getWidth();
  return 64;
}

/// Integers: widths under 64 as their unsigned bits, i64 and index signed.
double wrap(uint64_t x, unsigned w) {
  if (w >= 64)
    return double(int64_t(x));
  return double(x & ((uint64_t(1) << w) - 1));
}
int64_t asSigned(double x, unsigned w) {
  if (w >= 64)
    return int64_t(x);
  uint64_t u = uint64_t(x);
  if (w < 64 && (u >> (w - 1)) & 1)
    return int64_t(u) - int64_t(uint64_t(1) << w);
  return int64_t(u);
}
uint64_t asUnsigned(double x, unsigned w) {
  if (w >= 64)
    return uint64_t(int64_t(x));
  return uint64_t(x);
}

double roundTo(Type t, double x) {
  if (t.isF32())
    return double(float(x));
  if (t.isF64() || !isa<FloatType>(t))
    return x;
  if (t.isBF16())
    return ::kda::npy::roundToBinary(x, 8, -126, 127);
  if (t.isF16())
    return ::kda::npy::roundToBinary(x, 11, -14, 15);
  return double(float(x));
}

float bitsToFloat(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t floatToBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

struct Frame {
  const Layout *layout = nullptr;
  int64_t lanes = 1;
  std::vector<double> data;
  std::vector<LaneView> views;
  double *row(int64_t lane) { return data.data() + lane * layout->doubles; }
};

/// cp.async copies: the elements a copy writes, read when it was issued.
struct PendingCopy {
  int64_t thread = 0;
  Operation *op = nullptr;
  LaneView dst;
  std::vector<int64_t> at;
  std::vector<double> values;
};

class Interpreter {
public:
  Interpreter(ModuleOp module, int64_t threads, int64_t warpSize,
              std::vector<std::unique_ptr<Memory>> &owner, Stats &stats)
      : symbols(module), threads(threads), warpSize(warpSize), owner(owner),
        stats(stats) {}

  std::string error;

  std::string call(func::FuncOp f, const std::vector<LaneView> &args,
                   std::vector<LaneView> &results) {
    Frame frame = makeFrame(f);
    Block &body = f.getBody().front();
    for (int64_t l = 0; l < frame.lanes; ++l)
      for (auto [arg, v] : llvm::zip(body.getArguments(), args))
        if (isa<MemRefType>(arg.getType()))
          viewOf(frame, l, arg) = v;
    std::vector<int64_t> all(frame.lanes);
    for (int64_t l = 0; l < frame.lanes; ++l)
      all[l] = l;
    runBlock(frame, body, all);
    if (!error.empty())
      return error;
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    for (Value v : ret.getOperands()) {
      if (!isa<MemRefType>(v.getType()))
        return fail(ret, "a scalar result (the emulator returns memrefs)");
      results.push_back(viewOf(frame, 0, v));
    }
    return error;
  }

  static LaneView fromView(const View &v) {
    LaneView lv;
    lv.memory = v.memory;
    lv.offset = v.offset;
    lv.rank = int(v.sizes.size());
    for (int d = 0; d < lv.rank; ++d) {
      lv.sizes[d] = v.sizes[d];
      lv.strides[d] = v.strides[d];
    }
    return lv;
  }
  static View toView(const LaneView &lv) {
    View v;
    v.memory = lv.memory;
    v.offset = lv.offset;
    v.sizes.assign(lv.sizes, lv.sizes + lv.rank);
    v.strides.assign(lv.strides, lv.strides + lv.rank);
    return v;
  }

private:
  SymbolTable symbols;
  int64_t threads, warpSize;
  std::vector<std::unique_ptr<Memory>> &owner;
  Stats &stats;
  llvm::DenseMap<Operation *, std::unique_ptr<Layout>> layouts;
  llvm::DenseMap<Operation *, Memory *> globals;
  // The program's cp.async groups: the open one, then committed ones.
  std::vector<PendingCopy> openGroup;
  std::vector<std::vector<PendingCopy>> committed;

  std::string fail(Operation &op, const llvm::Twine &what) {
    return fail(&op, what);
  }
  std::string fail(Operation *op, const llvm::Twine &what) {
    if (error.empty()) {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << what << " at " << op->getName();
      if (auto fn = op->getParentOfType<func::FuncOp>())
        os << " in @" << fn.getSymName();
      os << " (" << op->getLoc() << ")";
      error = s;
    }
    return error;
  }

  const Layout &layoutOf(func::FuncOp f) {
    auto &l = layouts[f];
    if (l)
      return *l;
    l = std::make_unique<Layout>();
    auto add = [&](Value v) {
      Slot s;
      if (isa<MemRefType>(v.getType())) {
        s.view = int32_t(l->views++);
      } else {
        s.offset = l->doubles;
        s.width = uint32_t(elementsOf(v.getType()));
        l->doubles += s.width;
      }
      l->slots[v] = s;
    };
    f->walk([&](Block *b) {
      for (BlockArgument a : b->getArguments())
        add(a);
    });
    f->walk([&](Operation *op) {
      for (Value r : op->getResults())
        add(r);
    });
    return *l;
  }

  Frame makeFrame(func::FuncOp f) {
    Frame frame;
    frame.layout = &layoutOf(f);
    frame.lanes = 1;
    // A lane kernel's block: its own size where it has one, the pipeline's
    // threads otherwise.
    if (f->hasAttr("kda.explicit_threads")) {
      frame.lanes = threads;
      if (auto t = f->getAttrOfType<IntegerAttr>("kda.block_threads"))
        frame.lanes = t.getInt();
    }
    frame.data.assign(size_t(frame.lanes) * frame.layout->doubles, 0.0);
    frame.views.assign(size_t(frame.lanes) * frame.layout->views, LaneView());
    return frame;
  }

  const Slot &slot(Frame &f, Value v) {
    auto it = f.layout->slots.find(v);
    assert(it != f.layout->slots.end() && "a value outside the function");
    return it->second;
  }
  double *valueOf(Frame &f, int64_t lane, Value v) {
    return f.row(lane) + slot(f, v).offset;
  }
  double scalar(Frame &f, int64_t lane, Value v) {
    return *valueOf(f, lane, v);
  }
  LaneView &viewOf(Frame &f, int64_t lane, Value v) {
    return f.views[size_t(lane) * f.layout->views + slot(f, v).view];
  }

  /// The flat element of `view` at `at` (bounds checked).
  bool address(Operation *op, const LaneView &v, ArrayRef<int64_t> at,
               int64_t &flat) {
    if (!v.memory)
      return fail(op, "a memref with no memory"), false;
    if (int(at.size()) != v.rank)
      return fail(op, "an access of the wrong rank"), false;
    flat = v.offset;
    for (int d = 0; d < v.rank; ++d) {
      if (at[d] < 0 || at[d] >= v.sizes[d]) {
        std::string s = "index " + std::to_string(at[d]) + " of dimension " +
                        std::to_string(d) + " out of bounds (size " +
                        std::to_string(v.sizes[d]) + ")";
        return fail(op, s), false;
      }
      flat += at[d] * v.strides[d];
    }
    if (flat < 0 || flat >= int64_t(v.memory->data.size()))
      return fail(op, "an access outside its memory"), false;
    return true;
  }

  /// Barrier epochs: the block's, and each warp's syncs.
  int64_t blockEpoch = 1;
  std::vector<int64_t> warpEpoch;
  int64_t &warpEpochOf(int64_t thread) {
    size_t w = size_t(thread / warpSize);
    if (warpEpoch.size() <= w)
      warpEpoch.resize(w + 1, 1);
    return warpEpoch[w];
  }
  /// Records `thread`'s access of element `flat` of `m` and checks it
  /// against the last other thread's since a barrier; false (and the error)
  /// on a hazard.
  /// `record` false: only the check (a cp.async copy at its issue, below).
  bool touch(Operation *op, Memory *m, int64_t flat, int64_t thread,
             bool write, bool record = true) {
    AccessLog *log = m->log.get();
    if (!log)
      return true;
    auto synced = [&](int32_t other, int64_t block, int64_t warp) {
      if (other < 0 || other == thread || blockEpoch > block)
        return true;
      return other / warpSize == thread / warpSize &&
             warpEpochOf(thread) > warp;
    };
    auto hazard = [&](const char *kind, int32_t other, Operation *before) {
      std::string where;
      if (before) {
        llvm::raw_string_ostream os(where);
        os << ", after " << before->getName() << " (" << before->getLoc()
           << ")";
      }
      fail(op, llvm::Twine("a race on shared memory (") + kind +
                   "): thread " + llvm::Twine(thread) + " and thread " +
                   llvm::Twine(other) + " at element " + llvm::Twine(flat) +
                   " of " + llvm::Twine(int64_t(m->data.size())) +
                   " with no barrier between" + where);
      return false;
    };
    if (write && !wgmmaReads.empty() && wgmmaReads.count({m, flat}))
      return fail(op, "a write to shared memory a wgmma still reads (element " +
                          llvm::Twine(flat) +
                          ", before the wgmma.wait_group that retires it)"),
             false;
    if (!synced(log->writer[flat], log->writeBlock[flat], log->writeWarp[flat]))
      return hazard(write ? "write after write" : "read after write",
                    log->writer[flat], log->writeOp[flat]);
    if (write &&
        !synced(log->reader[flat], log->readBlock[flat], log->readWarp[flat]))
      return hazard("write after read", log->reader[flat], log->readOp[flat]);
    if (!record)
      return true;
    if (write) {
      log->writer[flat] = int32_t(thread);
      log->writeBlock[flat] = blockEpoch;
      log->writeWarp[flat] = warpEpochOf(thread);
      log->writeOp[flat] = op;
    } else {
      log->reader[flat] = int32_t(thread);
      log->readBlock[flat] = blockEpoch;
      log->readWarp[flat] = warpEpochOf(thread);
      log->readOp[flat] = op;
    }
    return true;
  }

  /// Static or dynamic sizes, offsets, bounds: lane `lane`'s values.
  std::vector<int64_t> foldValues(Frame &f, int64_t lane,
                                  ArrayRef<OpFoldResult> xs) {
    std::vector<int64_t> out;
    for (OpFoldResult x : xs) {
      if (auto a = dyn_cast<Attribute>(x))
        out.push_back(cast<IntegerAttr>(a).getInt());
      else
        out.push_back(int64_t(scalar(f, lane, cast<Value>(x))));
    }
    return out;
  }

  std::vector<int64_t> indices(Frame &f, int64_t lane, ValueRange is) {
    std::vector<int64_t> at;
    at.reserve(is.size());
    for (Value i : is)
      at.push_back(int64_t(scalar(f, lane, i)));
    return at;
  }

  Memory *allocate(Type element, int64_t count) {
    owner.push_back(std::make_unique<Memory>());
    owner.back()->element = element;
    owner.back()->data.assign(size_t(count), 0.0);
    return owner.back().get();
  }

  /// The memory index of element `e` (row-major order) of `v`.
  static int64_t flatOf(const LaneView &v, int64_t e) {
    int64_t flat = v.offset;
    for (int d = v.rank - 1; d >= 0; --d) {
      flat += (e % v.sizes[d]) * v.strides[d];
      e /= v.sizes[d];
    }
    return flat;
  }

  LaneView contiguous(Memory *m, ArrayRef<int64_t> sizes) {
    LaneView v;
    v.memory = m;
    v.rank = int(sizes.size());
    int64_t stride = 1;
    for (int d = v.rank - 1; d >= 0; --d) {
      v.sizes[d] = sizes[d];
      v.strides[d] = stride;
      stride *= sizes[d];
    }
    return v;
  }

  void runBlock(Frame &f, Block &block, const std::vector<int64_t> &active) {
    for (Operation &op : block) {
      if (!error.empty())
        return;
      if (op.hasTrait<OpTrait::IsTerminator>())
        return;
      runOp(f, op, active);
    }
  }

  /// Binds the region's block arguments from `values(lane)` and runs it.
  void yieldInto(Frame &f, Operation *terminator, ValueRange to,
                 const std::vector<int64_t> &active) {
    for (int64_t l : active)
      for (auto [dst, src] : llvm::zip(to, terminator->getOperands()))
        copyValue(f, l, src, dst);
  }
  void copyValue(Frame &f, int64_t l, Value src, Value dst) {
    if (isa<MemRefType>(dst.getType())) {
      viewOf(f, l, dst) = viewOf(f, l, src);
      return;
    }
    const Slot &s = slot(f, src), &d = slot(f, dst);
    std::memcpy(f.row(l) + d.offset, f.row(l) + s.offset,
                sizeof(double) * d.width);
  }

  void runOp(Frame &f, Operation &op, const std::vector<int64_t> &active);
  void runArith(Frame &f, Operation &op, const std::vector<int64_t> &active);
  void runMma(Frame &f, nvgpu::MmaSyncOp op, const std::vector<int64_t> &active);
  void runAmdUnit(Frame &f, Operation &op, const std::vector<int64_t> &active);
  void runWgmma(Frame &f, LLVM::InlineAsmOp op,
                const std::vector<int64_t> &active);
  std::optional<uint64_t> exactBits(Frame &f, int64_t lane, Value v,
                                    int depth = 0);

  /// The block's shared window: each workgroup allocation at a fixed byte
  /// address (its op's, as a static shared allocation has), the memory of
  /// its latest run there. The first starts at 256, so that a kernel that
  /// aligns a buffer to 1024 itself (wgmma's swizzle) has to.
  struct SharedRange {
    Operation *op;
    int64_t address, bytes;
    Memory *memory;
  };
  std::vector<SharedRange> sharedWindow;
  int64_t sharedTop = 256;

  /// wgmma's asynchrony. Each wgmma.mma_async runs when it is issued, but
  /// its result and its reads of shared memory belong to the open group
  /// until a commit, and stay in flight until a wgmma.wait_group retires
  /// that group. Using a result before then (other than extracting its
  /// registers or accumulating into another wgmma), or writing an element a
  /// wgmma reads, is what the hardware leaves undefined: an error here.
  int64_t wgmmaOpen = 0;               // the open group
  std::vector<int64_t> wgmmaCommitted; // committed, not yet retired
  llvm::DenseMap<Value, int64_t> wgmmaPending;
  llvm::DenseMap<std::pair<Memory *, int64_t>, int64_t> wgmmaReads;
  bool wgmmaOperandsReady(Operation &op);
  void retireWgmma(uint64_t keep);
  static constexpr int64_t kSharedWindow = int64_t(1) << 18;
  void runGeneric(Frame &f, linalg::GenericOp op, int64_t lane);
  void applyCopies(size_t keep);
};

void Interpreter::applyCopies(size_t keep) {
  while (committed.size() > keep) {
    for (PendingCopy &c : committed.front()) {
      int64_t flat = c.dst.offset;
      for (int d = 0; d < c.dst.rank; ++d)
        flat += c.at[d] * c.dst.strides[d];
      const int64_t step = c.dst.strides[c.dst.rank - 1];
      for (size_t e = 0; e < c.values.size(); ++e) {
        if (!touch(c.op, c.dst.memory, flat + int64_t(e) * step, c.thread,
                   true))
          return;
        c.dst.memory->data[flat + int64_t(e) * step] =
            roundTo(c.dst.memory->element, c.values[e]);
      }
    }
    committed.erase(committed.begin());
  }
}

/// One warp-wide m16n8k`k` product from the lanes' fragments (the PTX ISA's:
/// g = lane / 4, t = lane % 4; A's register element e of row g + 8 (e / 2 %
/// 2), ...; see the accessors), accumulated in double and rounded to f32.
/// `a(lane, e)`, `b(lane, e)`, `c(lane, e)`: the e-th element of a lane's
/// fragment (A: k = 16 eight 16-bit values, k = 8 four tf32, k = 4 two).
template <typename A, typename B, typename C, typename D>
static void warpProduct(int64_t k, A a, B b, C c, D d) {
  auto aAt = [&](int64_t row, int64_t col) {
    if (k == 16)
      return a(4 * (row % 8) + (col % 8) / 2,
               2 * (row / 8 + 2 * (col / 8)) + col % 2);
    if (k == 8)
      return a(4 * (row % 8) + col % 4, row / 8 + 2 * (col / 4));
    return a(4 * (row % 8) + col, row / 8);
  };
  auto bAt = [&](int64_t kk, int64_t col) {
    if (k == 16)
      return b(4 * col + (kk % 8) / 2, 2 * (kk / 8) + kk % 2);
    if (k == 8)
      return b(4 * col + kk % 4, kk / 4);
    return b(4 * col + kk, int64_t(0));
  };
  double out[32][4];
  for (int64_t lane = 0; lane < 32; ++lane) {
    const int64_t g = lane / 4, t = lane % 4;
    for (int64_t e = 0; e < 4; ++e) {
      const int64_t row = g + 8 * (e / 2), col = 2 * t + e % 2;
      double acc = c(lane, e);
      for (int64_t kk = 0; kk < k; ++kk)
        acc += aAt(row, kk) * bAt(kk, col);
      out[lane][e] = double(float(acc));
    }
  }
  for (int64_t lane = 0; lane < 32; ++lane)
    for (int64_t e = 0; e < 4; ++e)
      d(lane, e, out[lane][e]);
}

/// Half `h` of an i32 register holding two bf16 / f16 values (element 0 in
/// the low half): the operand registers of mma.sync and wgmma.
static double halfOfPair(double reg, int64_t h, bool bf16) {
  uint32_t bits = uint32_t(asUnsigned(reg, 32)) >> (16 * h) & 0xffffu;
  return bf16 ? double(bitsToFloat(bits << 16))
              : ::kda::npy::halfBitsToDouble(uint16_t(bits));
}

/// Whether `active` is whole warps of `size` lanes (a warp-wide
/// instruction's lanes).
static bool wholeWarps(const std::vector<int64_t> &active, int64_t size = 32) {
  if (active.size() % size != 0)
    return false;
  for (size_t i = 0; i < active.size(); i += size)
    if (active[i] % size != 0 || active[i + size - 1] != active[i] + size - 1)
      return false;
  return true;
}

/// AMD's matrix steps, one wave at a time (the ISA's register layouts; lane
/// l of the wave): MFMA 16x16x4 f32 (wave64) A[l % 16][l / 16],
/// B[l / 16][l % 16]; MFMA 16x16x16 bf16 / f16 A[l % 16][4 (l / 16) + e],
/// B[4 (l / 16) + e][l % 16]; both D[4 (l / 16) + e][l % 16], e < 4. WMMA
/// 16x16x16 (gfx11, wave32) A[l % 16][e], B[e][l % 16] (lanes 16..31 hold
/// copies), D[2 e + l / 16][l % 16], e < 8.
/// An integer value's bits exactly. The frame holds integers as doubles,
/// exact below 2^53; a wgmma descriptor sets bit 62, so it is evaluated
/// again from its definition: integer ops over constants and values that
/// are exact.
std::optional<uint64_t> Interpreter::exactBits(Frame &f, int64_t lane, Value v,
                                               int depth) {
  const unsigned w = bitsOf(v.getType());
  const uint64_t mask = w >= 64 ? ~uint64_t(0) : (uint64_t(1) << w) - 1;
  Operation *def = v.getDefiningOp();
  if (def && depth < 16) {
    if (auto c = dyn_cast<arith::ConstantOp>(def))
      if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
        return i.getValue().getZExtValue() & mask;
    auto get = [&](unsigned i) {
      return exactBits(f, lane, def->getOperand(i), depth + 1);
    };
    if (isa<arith::ExtUIOp, arith::IndexCastUIOp, arith::TruncIOp>(def)) {
      if (auto x = get(0))
        return *x & mask;
      return std::nullopt;
    }
    if (isa<arith::ExtSIOp, arith::IndexCastOp>(def)) {
      auto x = get(0);
      if (!x)
        return std::nullopt;
      const unsigned from = bitsOf(def->getOperand(0).getType());
      int64_t s = from >= 64 ? int64_t(*x)
                             : int64_t(*x << (64 - from)) >> (64 - from);
      return uint64_t(s) & mask;
    }
    if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::OrIOp,
            arith::AndIOp, arith::XOrIOp, arith::ShLIOp, arith::ShRUIOp>(def)) {
      auto x = get(0), y = get(1);
      if (!x || !y)
        return std::nullopt;
      uint64_t r = 0;
      if (isa<arith::AddIOp>(def))
        r = *x + *y;
      else if (isa<arith::SubIOp>(def))
        r = *x - *y;
      else if (isa<arith::MulIOp>(def))
        r = *x * *y;
      else if (isa<arith::OrIOp>(def))
        r = *x | *y;
      else if (isa<arith::AndIOp>(def))
        r = *x & *y;
      else if (isa<arith::XOrIOp>(def))
        r = *x ^ *y;
      else if (isa<arith::ShLIOp>(def))
        r = *y >= w ? 0 : *x << *y;
      else
        r = *y >= w ? 0 : *x >> *y;
      return r & mask;
    }
  }
  const double x = scalar(f, lane, v);
  if (std::fabs(x) >= 9007199254740992.0) // 2^53
    return std::nullopt;
  return asUnsigned(x, w) & mask;
}

/// Hopper's wgmma.mma_async m64nNk16 with f32 accumulators on bf16 / f16,
/// as LaneTileBuilder::wgmmaProduct writes it: D (+)= A B per warpgroup,
/// A from registers (mma.sync's m16k16 fragment for each warp's 16 rows) or
/// from shared memory, B from shared memory, both through matrix
/// descriptors in the 128-byte swizzle (PTX ISA: the matrix descriptor and
/// its K-major and MN-major canonical layouts); D in mma.sync's accumulator
/// fragments, n8 block after n8 block. Shared reads are checked by the race
/// check as the warpgroup's first thread's.
void Interpreter::runWgmma(Frame &f, LLVM::InlineAsmOp op,
                           const std::vector<int64_t> &active) {
  StringRef text = op.getAsmString();
  int64_t N = 0;
  const bool bf16 = text.contains(".f32.bf16.bf16 ");
  {
    StringRef rest = text.drop_front(text.find(".m64n") + 5);
    if (rest.consumeInteger(10, N) || !rest.starts_with("k16.f32.") ||
        !(bf16 || text.contains(".f32.f16.f16 ")))
      return (void)fail(op, "a wgmma other than m64nNk16 into f32 on bf16 / "
                            "f16");
  }
  const int64_t regsOut = N / 2;
  auto st = dyn_cast<LLVM::LLVMStructType>(op.getResult(0).getType());
  const int64_t nOps = int64_t(op.getOperands().size());
  const bool aShared = nOps == regsOut + 2;
  if (N % 8 != 0 || N > 256 || !st || int64_t(st.getBody().size()) != regsOut ||
      !(aShared || nOps == regsOut + 5))
    return (void)fail(op, "a wgmma whose operands are not A (four registers "
                          "or a descriptor), B's descriptor and N / 2 "
                          "accumulators");
  // The immediates after the operands: scale-d, scale-a, scale-b,
  // (trans-a), trans-b.
  SmallVector<StringRef> parts;
  text.drop_front(text.rfind('}') + 1).split(parts, ',');
  SmallVector<int64_t> imm;
  for (StringRef p : parts) {
    p = p.trim().rtrim(';').trim();
    int64_t x;
    if (!p.empty() && !p.starts_with("$") && !p.getAsInteger(10, x))
      imm.push_back(x);
  }
  if (int64_t(imm.size()) != (aShared ? 5 : 4) || (imm[0] != 0 && imm[0] != 1) ||
      std::abs(imm[1]) != 1 || std::abs(imm[2]) != 1 ||
      (aShared && imm[3] != 0))
    return (void)fail(op, "a wgmma whose immediates are not scale-d 0 / 1, "
                          "scales +-1 and a K-major shared A");
  const bool accumulate = imm[0] == 1, bMajorN = imm.back() == 1;
  const double sign = double(imm[1] * imm[2]);
  if (!wholeWarps(active, 128))
    return (void)fail(op, "a wgmma without whole warpgroups");

  struct Desc {
    int64_t start, lbo, sbo;
  };
  auto descriptor = [&](int64_t base, Value v, Desc &d) {
    std::optional<uint64_t> bits = exactBits(f, base, v);
    for (int64_t l = base + 1; bits && l < base + 128; ++l)
      if (exactBits(f, l, v) != bits)
        return fail(op, "a wgmma descriptor that differs across its "
                        "warpgroup"),
               false;
    if (!bits)
      return fail(op, "a wgmma descriptor the emulator cannot evaluate "
                      "exactly (not integer ops over exact values)"),
             false;
    if ((*bits >> 62) != 1 || ((*bits >> 49) & 7) != 0)
      return fail(op, "a wgmma descriptor other than the 128-byte swizzle "
                      "with base offset 0"),
             false;
    d.start = int64_t(*bits & 0x3FFF) << 4;
    d.lbo = int64_t((*bits >> 16) & 0x3FFF) << 4;
    d.sbo = int64_t((*bits >> 32) & 0x3FFF) << 4;
    return true;
  };
  // A 16-bit element at a descriptor's logical byte address: the swizzle
  // moves its 16-byte piece (address bits 4..6) by the 128-byte row
  // within the 1024-byte pattern (bits 7..9).
  auto shared = [&](int64_t thread, int64_t logical, double &x) {
    const int64_t at = logical ^ (((logical >> 7) & 7) << 4);
    for (const SharedRange &r : sharedWindow) {
      if (r.address < 0 || at < r.address || at >= r.address + r.bytes)
        continue;
      Memory *m = r.memory;
      if (!(m->element.isBF16() || m->element.isF16()) ||
          m->element.isBF16() != bf16)
        return fail(op, "a wgmma operand in a shared buffer of another "
                        "element type"),
               false;
      if ((at - r.address) % 2 != 0)
        return fail(op, "a wgmma operand address not 2-byte aligned"), false;
      const int64_t idx = (at - r.address) / 2;
      if (!touch(op, m, idx, thread, false))
        return false;
      wgmmaReads[{m, idx}] = wgmmaOpen;
      x = m->data[idx];
      return true;
    }
    return fail(op, "a wgmma descriptor addressing no shared allocation "
                    "(byte " +
                        llvm::Twine(at) + ")"),
           false;
  };
  auto half = [&](int64_t lane, Value reg, int64_t h) {
    return halfOfPair(scalar(f, lane, reg), h, bf16);
  };
  ValueRange ops = op.getOperands();
  Value bDesc = ops[aShared ? 1 : 4];
  ValueRange accIn = ops.drop_front(aShared ? 2 : 5);
  std::vector<double> a(64 * 16), bm(16 * size_t(N)), out(128 * size_t(regsOut));
  for (size_t i = 0; i < active.size(); i += 128) {
    const int64_t base = active[i];
    Desc bd, ad;
    if (!descriptor(base, bDesc, bd) ||
        (aShared && !descriptor(base, ops[0], ad)))
      return;
    for (int64_t k = 0; k < 16; ++k)
      for (int64_t n = 0; n < N; ++n) {
        const int64_t at =
            bMajorN ? bd.start + (n / 64) * bd.lbo + (k / 8) * bd.sbo +
                          (k % 8) * 128 + (n % 64) * 2
                    : bd.start + (n / 8) * bd.sbo + (n % 8) * 128 + k * 2;
        if (!shared(base, at, bm[k * N + n]))
          return;
      }
    for (int64_t m = 0; m < 64; ++m)
      for (int64_t k = 0; k < 16; ++k) {
        double &x = a[m * 16 + k];
        if (aShared) {
          if (!shared(base, ad.start + (m / 8) * ad.sbo + (m % 8) * 128 + k * 2,
                      x))
            return;
          continue;
        }
        // mma.sync's A fragment of warp m / 16: lane 4 (r % 8) + (k % 8) / 2,
        // register r / 8 + 2 (k / 8), half k % 2.
        const int64_t r = m % 16;
        x = half(base + 32 * (m / 16) + 4 * (r % 8) + (k % 8) / 2,
                 ops[r / 8 + 2 * (k / 8)], k % 2);
      }
    for (int64_t m = 0; m < 64; ++m)
      for (int64_t n = 0; n < N; ++n) {
        const int64_t r = m % 16, c = n % 8;
        const int64_t lane = 32 * (m / 16) + 4 * (r % 8) + c / 2;
        const int64_t reg = 4 * (n / 8) + 2 * (r / 8) + c % 2;
        double acc = accumulate ? scalar(f, base + lane, accIn[reg]) : 0.0;
        double sum = 0.0;
        for (int64_t k = 0; k < 16; ++k)
          sum += a[m * 16 + k] * bm[k * N + n];
        out[size_t(lane) * regsOut + reg] = double(float(acc + sign * sum));
      }
    for (int64_t lane = 0; lane < 128; ++lane)
      std::memcpy(valueOf(f, base + lane, op.getResult(0)),
                  &out[size_t(lane) * regsOut], regsOut * sizeof(double));
  }
  wgmmaPending[op.getResult(0)] = wgmmaOpen;
}

bool Interpreter::wgmmaOperandsReady(Operation &op) {
  for (auto [i, v] : llvm::enumerate(op.getOperands())) {
    auto it = wgmmaPending.find(v);
    if (it == wgmmaPending.end())
      continue;
    if (isa<LLVM::ExtractValueOp>(op))
      continue; // its result is in flight too
    if (auto asmOp = dyn_cast<LLVM::InlineAsmOp>(op);
        asmOp && asmOp.getAsmString().starts_with("wgmma.mma_async.")) {
      // Accumulators (the operands after A and B) chain within a group.
      const int64_t regsOut =
          int64_t(cast<LLVM::LLVMStructType>(asmOp.getResult(0).getType())
                      .getBody()
                      .size());
      const int64_t first = int64_t(op.getNumOperands()) - regsOut;
      if (int64_t(i) >= first)
        continue;
    }
    fail(op, "a wgmma result used before the wgmma.wait_group that retires "
             "its group");
    return false;
  }
  return true;
}

void Interpreter::retireWgmma(uint64_t keep) {
  while (wgmmaCommitted.size() > keep) {
    const int64_t g = wgmmaCommitted.front();
    wgmmaCommitted.erase(wgmmaCommitted.begin());
    for (auto it = wgmmaPending.begin(); it != wgmmaPending.end();) {
      auto cur = it++;
      if (cur->second == g)
        wgmmaPending.erase(cur);
    }
    for (auto it = wgmmaReads.begin(); it != wgmmaReads.end();) {
      auto cur = it++;
      if (cur->second == g)
        wgmmaReads.erase(cur);
    }
  }
}

void Interpreter::runAmdUnit(Frame &f, Operation &op,
                             const std::vector<int64_t> &active) {
  const bool wmma = isa<amdgpu::WMMAOp>(op);
  Value a = op.getOperand(0), bv = op.getOperand(1), c = op.getOperand(2);
  int64_t k = 16;
  const int64_t wave = wmma ? 32 : 64;
  if (auto mfma = dyn_cast<amdgpu::MFMAOp>(op)) {
    if (mfma.getM() != 16 || mfma.getN() != 16 || mfma.getBlocks() != 1 ||
        (mfma.getK() != 4 && mfma.getK() != 16) || mfma.getCbsz() != 0 ||
        mfma.getAbid() != 0 || mfma.getBlgp() != amdgpu::MFMAPermB::none ||
        mfma.getNegateA() || mfma.getNegateB() || mfma.getNegateC())
      return (void)fail(op, "an MFMA other than 16x16x4 f32 / 16x16x16 "
                            "without broadcasts or negation");
    k = mfma.getK();
  } else {
    auto w = cast<amdgpu::WMMAOp>(op);
    if (w.getSubwordOffset() != 0 || w.getClamp() || w.getUnsignedA() ||
        w.getUnsignedB() || elementsOf(c.getType()) != 8)
      return (void)fail(op, "a WMMA other than 16x16x16 into eight f32");
  }
  if (warpSize != wave || !wholeWarps(active, wave))
    return (void)fail(op, "a matrix step without its whole wave");
  const int64_t n = wmma ? 8 : 4;
  Type dType = elementOf(op.getResult(0).getType());
  for (size_t i = 0; i < active.size(); i += wave) {
    const int64_t base = active[i];
    auto aAt = [&](int64_t row, int64_t kk) {
      if (wmma)
        return valueOf(f, base + row, a)[kk];
      if (k == 4)
        return valueOf(f, base + row + 16 * kk, a)[0];
      return valueOf(f, base + row + 16 * (kk / 4), a)[kk % 4];
    };
    auto bAt = [&](int64_t kk, int64_t col) {
      if (wmma)
        return valueOf(f, base + col, bv)[kk];
      if (k == 4)
        return valueOf(f, base + col + 16 * kk, bv)[0];
      return valueOf(f, base + col + 16 * (kk / 4), bv)[kk % 4];
    };
    std::vector<double> out(wave * n);
    for (int64_t l = 0; l < wave; ++l)
      for (int64_t e = 0; e < n; ++e) {
        const int64_t row = wmma ? 2 * e + l / 16 : 4 * (l / 16) + e,
                      col = l % 16;
        double acc = valueOf(f, base + l, c)[e];
        for (int64_t kk = 0; kk < k; ++kk)
          acc += aAt(row, kk) * bAt(kk, col);
        out[l * n + e] = roundTo(dType, acc);
      }
    for (int64_t l = 0; l < wave; ++l)
      std::memcpy(valueOf(f, base + l, op.getResult(0)), &out[l * n],
                  n * sizeof(double));
  }
}

void Interpreter::runMma(Frame &f, nvgpu::MmaSyncOp op,
                         const std::vector<int64_t> &active) {
  std::array<int64_t, 3> shape = op.getMmaShapeAsArray();
  const int64_t m = shape[0], n = shape[1], k = shape[2];
  if (m != 16 || n != 8 || (k != 4 && k != 8 && k != 16))
    return (void)fail(op, "an mma.sync shape other than m16n8k4/8/16");
  auto aType = cast<VectorType>(op.getMatrixA().getType());
  const bool tf32 = aType.getElementType().isF32();
  if (tf32 == (k == 16))
    return (void)fail(op, "an mma.sync operand type its shape does not take");
  if (!wholeWarps(active))
    return (void)fail(op, "an mma.sync without all 32 lanes of its warp");
  auto operand = [&](double x) {
    if (!tf32)
      return x;
    // TF32: the low 13 bits of the f32 ignored.
    return double(bitsToFloat(floatToBits(float(x)) & 0xffffe000u));
  };
  for (size_t i = 0; i < active.size(); i += 32) {
    const int64_t base = active[i];
    std::vector<double> res(32 * 4);
    warpProduct(
        k,
        [&](int64_t lane, int64_t e) {
          return operand(valueOf(f, base + lane, op.getMatrixA())[e]);
        },
        [&](int64_t lane, int64_t e) {
          return operand(valueOf(f, base + lane, op.getMatrixB())[e]);
        },
        [&](int64_t lane, int64_t e) {
          return valueOf(f, base + lane, op.getMatrixC())[e];
        },
        [&](int64_t lane, int64_t e, double x) { res[lane * 4 + e] = x; });
    for (int64_t lane = 0; lane < 32; ++lane)
      std::memcpy(valueOf(f, base + lane, op.getRes()), &res[lane * 4],
                  4 * sizeof(double));
  }
}

void Interpreter::runGeneric(Frame &f, linalg::GenericOp op, int64_t lane) {
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  const unsigned loops = op.getNumLoops();
  std::vector<int64_t> ranges(loops, -1);
  SmallVector<LaneView> views;
  for (auto [operand, map] : llvm::zip(op->getOperands(), maps)) {
    if (!isa<MemRefType>(operand.getType())) {
      views.push_back(LaneView());
      continue;
    }
    LaneView v = viewOf(f, lane, operand);
    views.push_back(v);
    for (auto [d, e] : llvm::enumerate(map.getResults()))
      if (auto dim = dyn_cast<AffineDimExpr>(e))
        ranges[dim.getPosition()] = v.sizes[d];
  }
  for (int64_t r : ranges)
    if (r < 0)
      return (void)fail(op, "a linalg.generic loop no operand dimension bounds");
  Block &body = op.getRegion().front();
  std::vector<int64_t> one{lane};
  std::vector<int64_t> point(loops, 0);
  auto evalExpr = [&](AffineExpr e, auto &&self) -> int64_t {
    if (auto d = dyn_cast<AffineDimExpr>(e))
      return point[d.getPosition()];
    if (auto c = dyn_cast<AffineConstantExpr>(e))
      return c.getValue();
    if (auto b = dyn_cast<AffineBinaryOpExpr>(e)) {
      int64_t x = self(b.getLHS(), self), y = self(b.getRHS(), self);
      switch (e.getKind()) {
      case AffineExprKind::Add: return x + y;
      case AffineExprKind::Mul: return x * y;
      case AffineExprKind::Mod: return x % y;
      case AffineExprKind::FloorDiv: return x / y;
      case AffineExprKind::CeilDiv: return (x + y - 1) / y;
      default: break;
      }
    }
    fail(op, "an indexing map the emulator does not evaluate");
    return 0;
  };
  int64_t total = 1;
  for (int64_t r : ranges)
    total *= r;
  for (int64_t it = 0; it < total && error.empty(); ++it) {
    int64_t rest = it;
    for (int d = int(loops) - 1; d >= 0; --d) {
      point[d] = rest % ranges[d];
      rest /= ranges[d];
    }
    std::vector<int64_t> flats(op->getNumOperands(), 0);
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      Value operand = op->getOperand(i);
      BlockArgument arg = body.getArgument(i);
      if (!views[i].memory) {
        copyValue(f, lane, operand, arg);
        continue;
      }
      std::vector<int64_t> at;
      for (AffineExpr e : maps[i].getResults())
        at.push_back(evalExpr(e, evalExpr));
      if (!address(op, views[i], at, flats[i]))
        return;
      *valueOf(f, lane, arg) = views[i].memory->data[flats[i]];
    }
    // linalg.index reads `point`: bound through the op's results below.
    for (Operation &inner : body) {
      if (!error.empty())
        return;
      if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
        *valueOf(f, lane, index.getResult()) = double(point[index.getDim()]);
        continue;
      }
      if (auto y = dyn_cast<linalg::YieldOp>(inner)) {
        for (auto [i, v] : llvm::enumerate(y.getValues())) {
          unsigned o = op.getNumDpsInputs() + unsigned(i);
          Memory *m = views[o].memory;
          m->data[flats[o]] = roundTo(m->element, scalar(f, lane, v));
        }
        break;
      }
      runOp(f, inner, one);
    }
  }
}

void Interpreter::runOp(Frame &f, Operation &op,
                        const std::vector<int64_t> &active) {
  stats.laneInstructions += int64_t(active.size());
  if (!wgmmaPending.empty() && !wgmmaOperandsReady(op))
    return;
  for (Type t : op.getResultTypes())
    if (auto m = dyn_cast<MemRefType>(t); m && m.getRank() > kMaxRank)
      return (void)fail(op, "a memref of rank over " + llvm::Twine(kMaxRank));
  // Structure.
  if (auto ifOp = dyn_cast<scf::IfOp>(op)) {
    std::vector<int64_t> yes, no;
    for (int64_t l : active)
      (scalar(f, l, ifOp.getCondition()) != 0 ? yes : no).push_back(l);
    if (!yes.empty()) {
      runBlock(f, ifOp.getThenRegion().front(), yes);
      yieldInto(f, ifOp.getThenRegion().front().getTerminator(),
                ifOp.getResults(), yes);
    }
    if (!no.empty() && !ifOp.getElseRegion().empty()) {
      runBlock(f, ifOp.getElseRegion().front(), no);
      yieldInto(f, ifOp.getElseRegion().front().getTerminator(),
                ifOp.getResults(), no);
    }
    return;
  }
  if (auto forOp = dyn_cast<scf::ForOp>(op)) {
    // Bounds may differ over the lanes (a per-lane loop): round r runs the
    // lanes that have an r-th iteration; warp-wide instructions and
    // barriers in the body then fail on their own checks.
    std::vector<int64_t> lo, hi, st;
    for (int64_t l : active) {
      lo.push_back(int64_t(scalar(f, l, forOp.getLowerBound())));
      hi.push_back(int64_t(scalar(f, l, forOp.getUpperBound())));
      st.push_back(int64_t(scalar(f, l, forOp.getStep())));
      if (st.back() <= 0)
        return (void)fail(op, "a loop step that is not positive");
    }
    Block *body = forOp.getBody();
    for (int64_t l : active)
      for (auto [arg, init] :
           llvm::zip(forOp.getRegionIterArgs(), forOp.getInitArgs()))
        copyValue(f, l, init, arg);
    for (int64_t round = 0; error.empty(); ++round) {
      std::vector<int64_t> running;
      for (size_t i = 0; i < active.size(); ++i) {
        const int64_t iv = lo[i] + round * st[i];
        if (iv < hi[i]) {
          running.push_back(active[i]);
          *valueOf(f, active[i], forOp.getInductionVar()) = double(iv);
        }
      }
      if (running.empty())
        break;
      runBlock(f, *body, running);
      yieldInto(f, body->getTerminator(), forOp.getRegionIterArgs(), running);
    }
    for (int64_t l : active)
      for (auto [res, arg] :
           llvm::zip(forOp.getResults(), forOp.getRegionIterArgs()))
        copyValue(f, l, arg, res);
    return;
  }
  if (auto whileOp = dyn_cast<scf::WhileOp>(op)) {
    // Lanes leave as their condition fails (the varlen grids' binary
    // searches differ over the lanes).
    Block &before = whileOp.getBefore().front(),
          &after = whileOp.getAfter().front();
    for (int64_t l : active)
      for (auto [arg, init] : llvm::zip(before.getArguments(), whileOp.getInits()))
        copyValue(f, l, init, arg);
    std::vector<int64_t> running = active;
    while (!running.empty() && error.empty()) {
      runBlock(f, before, running);
      auto cond = cast<scf::ConditionOp>(before.getTerminator());
      std::vector<int64_t> stay;
      for (int64_t l : running) {
        if (scalar(f, l, cond.getCondition()) != 0) {
          stay.push_back(l);
          for (auto [arg, v] : llvm::zip(after.getArguments(), cond.getArgs()))
            copyValue(f, l, v, arg);
        } else {
          for (auto [res, v] : llvm::zip(whileOp.getResults(), cond.getArgs()))
            copyValue(f, l, v, res);
        }
      }
      running = std::move(stay);
      if (running.empty())
        break;
      runBlock(f, after, running);
      yieldInto(f, after.getTerminator(), before.getArguments(), running);
    }
    return;
  }
  if (auto forall = dyn_cast<scf::ForallOp>(op)) {
    const int64_t l0 = active[0];
    auto values = [&](ArrayRef<OpFoldResult> xs) {
      return foldValues(f, l0, xs);
    };
    std::vector<int64_t> lo = values(forall.getMixedLowerBound()),
                         hi = values(forall.getMixedUpperBound()),
                         st = values(forall.getMixedStep());
    const size_t rank = lo.size();
    std::vector<int64_t> iv(lo);
    bool empty = false;
    for (size_t d = 0; d < rank; ++d)
      empty |= lo[d] >= hi[d];
    ++stats.kernels;
    while (!empty && error.empty()) {
      ++stats.programs;
      for (int64_t l : active)
        for (size_t d = 0; d < rank; ++d)
          *valueOf(f, l, forall.getInductionVar(d)) = double(iv[d]);
      openGroup.clear();
      committed.clear();
      runBlock(f, *forall.getBody(), active);
      // Copies a program never waited for land at its end.
      if (!openGroup.empty())
        committed.push_back(std::move(openGroup));
      applyCopies(0);
      size_t d = rank;
      while (d > 0) {
        --d;
        iv[d] += st[d];
        if (iv[d] < hi[d])
          break;
        iv[d] = lo[d];
        if (d == 0)
          empty = true;
      }
      if (rank == 0)
        empty = true;
    }
    return;
  }
  if (auto callOp = dyn_cast<func::CallOp>(op)) {
    auto callee = symbols.lookup<func::FuncOp>(callOp.getCallee());
    if (!callee || callee.isExternal())
      return (void)fail(op, "a call of a function with no body");
    std::vector<LaneView> args, results;
    for (Value a : callOp.getOperands()) {
      if (!isa<MemRefType>(a.getType()))
        return (void)fail(op, "a call with a scalar argument");
      args.push_back(viewOf(f, active[0], a));
    }
    call(callee, args, results);
    if (!error.empty())
      return;
    for (int64_t l : active)
      for (auto [r, v] : llvm::zip(callOp.getResults(), results))
        viewOf(f, l, r) = v;
    return;
  }
  if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
    for (int64_t l : active)
      runGeneric(f, generic, l);
    return;
  }
  if (auto fill = dyn_cast<linalg::FillOp>(op)) {
    for (int64_t l : active) {
      LaneView v = viewOf(f, l, fill.getOutputs()[0]);
      double x = roundTo(v.memory->element,
                         scalar(f, l, fill.getInputs()[0]));
      int64_t count = 1;
      for (int d = 0; d < v.rank; ++d)
        count *= v.sizes[d];
      for (int64_t e = 0; e < count; ++e)
        v.memory->data[flatOf(v, e)] = x;
    }
    return;
  }
  if (auto copy = dyn_cast<memref::CopyOp>(op)) {
    for (int64_t l : active) {
      LaneView s = viewOf(f, l, copy.getSource()),
               d = viewOf(f, l, copy.getTarget());
      if (s.rank != d.rank)
        return (void)fail(op, "a copy between ranks");
      int64_t count = 1;
      for (int r = 0; r < s.rank; ++r) {
        if (s.sizes[r] != d.sizes[r])
          return (void)fail(op, "a copy between shapes");
        count *= s.sizes[r];
      }
      std::vector<double> tmp(count);
      for (int64_t e = 0; e < count; ++e)
        tmp[e] = s.memory->data[flatOf(s, e)];
      for (int64_t e = 0; e < count; ++e)
        d.memory->data[flatOf(d, e)] = roundTo(d.memory->element, tmp[e]);
    }
    return;
  }
  // Memory.
  if (isa<memref::AllocOp, memref::AllocaOp>(op)) {
    auto type = cast<MemRefType>(op.getResult(0).getType());
    std::vector<int64_t> sizes;
    unsigned dyn = 0;
    for (int64_t s : type.getShape())
      sizes.push_back(ShapedType::isDynamic(s)
                          ? int64_t(scalar(f, active[0], op.getOperand(dyn++)))
                          : s);
    int64_t count = 1;
    for (int64_t s : sizes)
      count *= s;
    // One memory for the lanes that run it: a program's shared memory
    // (with an access log where threads share it).
    Memory *m = allocate(type.getElementType(), count);
    if (f.lanes > 1) {
      m->log = std::make_unique<AccessLog>();
      m->log->writer.assign(size_t(count), -1);
      m->log->reader.assign(size_t(count), -1);
      m->log->writeBlock.assign(size_t(count), 0);
      m->log->writeWarp.assign(size_t(count), 0);
      m->log->readBlock.assign(size_t(count), 0);
      m->log->readWarp.assign(size_t(count), 0);
      m->log->writeOp.assign(size_t(count), nullptr);
      m->log->readOp.assign(size_t(count), nullptr);
    }
    if (auto space =
            dyn_cast_or_null<gpu::AddressSpaceAttr>(type.getMemorySpace());
        space && space.getValue() == gpu::AddressSpace::Workgroup) {
      auto it = llvm::find_if(sharedWindow,
                              [&](const SharedRange &r) { return r.op == &op; });
      const Type e = type.getElementType();
      const int64_t bytes =
          count * (e.isIndex() ? 8 : std::max<int64_t>(1, e.getIntOrFloatBitWidth() / 8));
      // The emulator keeps every buffer apart (the compiler's arena lets
      // buffers whose live ranges do not meet share bytes), so a kernel's
      // buffers can add up past the 256 KiB a descriptor addresses: those
      // past it have no window address (a wgmma reading one fails, named).
      if (it == sharedWindow.end()) {
        const int64_t at = (sharedTop + 255) / 256 * 256;
        const bool fits = at + bytes <= kSharedWindow;
        if (fits)
          sharedTop = at + bytes;
        it = sharedWindow.insert(sharedWindow.end(),
                                 {&op, fits ? at : -1, bytes, m});
      } else if (it->bytes != bytes) {
        return (void)fail(op, "a shared allocation whose size changes from "
                              "one run to the next");
      }
      it->memory = m;
      m->sharedAddress = it->address;
    }
    LaneView v = contiguous(m, sizes);
    for (int64_t l : active)
      viewOf(f, l, op.getResult(0)) = v;
    return;
  }
  if (isa<memref::DeallocOp>(op))
    return;
  if (auto dim = dyn_cast<memref::DimOp>(op)) {
    for (int64_t l : active) {
      const LaneView &v = viewOf(f, l, dim.getSource());
      int64_t d = int64_t(scalar(f, l, dim.getIndex()));
      if (d < 0 || d >= v.rank)
        return (void)fail(op, "a dimension out of range");
      *valueOf(f, l, dim.getResult()) = double(v.sizes[d]);
    }
    return;
  }
  if (auto load = dyn_cast<memref::LoadOp>(op)) {
    for (int64_t l : active) {
      int64_t flat;
      const LaneView &v = viewOf(f, l, load.getMemRef());
      if (!address(&op, v, indices(f, l, load.getIndices()), flat) ||
          !touch(&op, v.memory, flat, l, false))
        return;
      *valueOf(f, l, load.getResult()) = v.memory->data[flat];
    }
    return;
  }
  // Atomics (a layer's progress counters in global memory): the lanes in
  // order, each reading the element and writing the result back.
  if (auto rmw = dyn_cast<memref::AtomicRMWOp>(op)) {
    for (int64_t l : active) {
      int64_t flat;
      const LaneView &v = viewOf(f, l, rmw.getMemref());
      if (!address(&op, v, indices(f, l, rmw.getIndices()), flat) ||
          !touch(&op, v.memory, flat, l, true))
        return;
      const double old = v.memory->data[flat];
      const double x = scalar(f, l, rmw.getValue());
      double out;
      switch (rmw.getKind()) {
      case arith::AtomicRMWKind::addi:
      case arith::AtomicRMWKind::addf:
        out = old + x;
        break;
      case arith::AtomicRMWKind::assign:
        out = x;
        break;
      case arith::AtomicRMWKind::maxs:
      case arith::AtomicRMWKind::maximumf:
        out = std::max(old, x);
        break;
      case arith::AtomicRMWKind::ori:
        out = double(int64_t(old) | int64_t(x));
        break;
      default:
        return (void)fail(op, "an atomic read-modify-write of another kind");
      }
      v.memory->data[flat] = roundTo(v.memory->element, out);
      *valueOf(f, l, rmw.getResult()) = old;
    }
    return;
  }
  if (auto store = dyn_cast<memref::StoreOp>(op)) {
    for (int64_t l : active) {
      int64_t flat;
      const LaneView &v = viewOf(f, l, store.getMemRef());
      if (!address(&op, v, indices(f, l, store.getIndices()), flat) ||
          !touch(&op, v.memory, flat, l, true))
        return;
      v.memory->data[flat] =
          roundTo(v.memory->element, scalar(f, l, store.getValue()));
    }
    return;
  }
  if (isa<vector::LoadOp, vector::StoreOp>(op)) {
    const bool isLoad = isa<vector::LoadOp>(op);
    Value mem = isLoad ? cast<vector::LoadOp>(op).getBase()
                       : cast<vector::StoreOp>(op).getBase();
    ValueRange idx = isLoad ? cast<vector::LoadOp>(op).getIndices()
                            : cast<vector::StoreOp>(op).getIndices();
    auto vt = isLoad ? cast<vector::LoadOp>(op).getVectorType()
                     : cast<vector::StoreOp>(op).getVectorType();
    if (vt.getRank() != 1)
      return (void)fail(op, "a vector load or store of rank other than 1");
    const int64_t n = vt.getNumElements();
    // The alignment the op claims is what the GPU instruction needs (LLVM
    // emits one n-element access only then; a misaligned one faults):
    // every memory starts 256-aligned, so the byte offset decides.
    const uint64_t align =
        (isLoad ? cast<vector::LoadOp>(op).getAlignment()
                : cast<vector::StoreOp>(op).getAlignment())
            .value_or(0);
    for (int64_t l : active) {
      const LaneView &v = viewOf(f, l, mem);
      std::vector<int64_t> at = indices(f, l, idx);
      int64_t flat;
      if (!address(&op, v, at, flat))
        return;
      if (align > 1) {
        const int64_t bytes =
            flat * int64_t(v.memory->element.getIntOrFloatBitWidth() / 8);
        if (bytes % int64_t(align))
          return (void)fail(op, "a vector " + std::string(isLoad ? "load" : "store") +
                                    " claiming " + std::to_string(align) +
                                    "-byte alignment at byte offset " +
                                    std::to_string(bytes) + " (thread " +
                                    std::to_string(l) + ")");
      }
      at.back() += n - 1;
      int64_t last;
      if (!address(&op, v, at, last))
        return;
      const int64_t step = v.strides[v.rank - 1];
      for (int64_t e = 0; e < n; ++e)
        if (!touch(&op, v.memory, flat + e * step, l, !isLoad))
          return;
      if (isLoad) {
        double *out = valueOf(f, l, op.getResult(0));
        for (int64_t e = 0; e < n; ++e)
          out[e] = v.memory->data[flat + e * step];
      } else {
        const double *in = valueOf(f, l, cast<vector::StoreOp>(op).getValueToStore());
        for (int64_t e = 0; e < n; ++e)
          v.memory->data[flat + e * step] = roundTo(v.memory->element, in[e]);
      }
    }
    return;
  }
  if (auto sub = dyn_cast<memref::SubViewOp>(op)) {
    llvm::SmallBitVector dropped = sub.getDroppedDims();
    for (int64_t l : active) {
      const LaneView &s = viewOf(f, l, sub.getSource());
      auto values = [&](ArrayRef<OpFoldResult> xs) {
        return foldValues(f, l, xs);
      };
      std::vector<int64_t> off = values(sub.getMixedOffsets()),
                           sz = values(sub.getMixedSizes()),
                           st = values(sub.getMixedStrides());
      LaneView v;
      v.memory = s.memory;
      v.offset = s.offset;
      for (int d = 0; d < s.rank; ++d) {
        if (off[d] < 0 || sz[d] < 0 ||
            (sz[d] > 0 && off[d] + (sz[d] - 1) * st[d] >= s.sizes[d]))
          return (void)fail(op, "a subview outside its source");
        v.offset += off[d] * s.strides[d];
        if (dropped.test(d))
          continue;
        v.sizes[v.rank] = sz[d];
        v.strides[v.rank] = s.strides[d] * st[d];
        ++v.rank;
      }
      viewOf(f, l, sub.getResult()) = v;
    }
    return;
  }
  if (auto rc = dyn_cast<memref::ReinterpretCastOp>(op)) {
    for (int64_t l : active) {
      const LaneView &s = viewOf(f, l, rc.getSource());
      auto values = [&](ArrayRef<OpFoldResult> xs) {
        return foldValues(f, l, xs);
      };
      std::vector<int64_t> off = values(rc.getMixedOffsets()),
                           sz = values(rc.getMixedSizes()),
                           st = values(rc.getMixedStrides());
      LaneView v;
      v.memory = s.memory;
      // The source's base (a reinterpret_cast starts from the allocation).
      v.offset = off[0];
      v.rank = int(sz.size());
      for (int d = 0; d < v.rank; ++d) {
        v.sizes[d] = sz[d];
        v.strides[d] = st[d];
      }
      viewOf(f, l, rc.getResult()) = v;
    }
    return;
  }
  if (auto collapse = dyn_cast<memref::CollapseShapeOp>(op)) {
    for (int64_t l : active) {
      const LaneView &s = viewOf(f, l, collapse.getSrc());
      LaneView v;
      v.memory = s.memory;
      v.offset = s.offset;
      for (const ReassociationIndices &group :
           collapse.getReassociationIndices()) {
        int64_t size = 1;
        for (int64_t d : group)
          size *= s.sizes[d];
        // The group must be contiguous: each dimension's stride the next
        // one's times its size.
        for (size_t i = 0; i + 1 < group.size(); ++i)
          if (s.sizes[group[i + 1]] > 1 && s.sizes[group[i]] > 1 &&
              s.strides[group[i]] !=
                  s.strides[group[i + 1]] * s.sizes[group[i + 1]])
            return (void)fail(op, "a collapse of dimensions that are not "
                                  "contiguous");
        v.sizes[v.rank] = size;
        v.strides[v.rank] = group.empty() ? 1 : s.strides[group.back()];
        ++v.rank;
      }
      viewOf(f, l, collapse.getResult()) = v;
    }
    return;
  }
  if (auto expand = dyn_cast<memref::ExpandShapeOp>(op)) {
    auto type = cast<MemRefType>(expand.getResult().getType());
    SmallVector<OpFoldResult> mixed = expand.getMixedOutputShape();
    for (int64_t l : active) {
      const LaneView &s = viewOf(f, l, expand.getSrc());
      LaneView v;
      v.memory = s.memory;
      v.offset = s.offset;
      v.rank = int(type.getRank());
      std::vector<int64_t> sizes = foldValues(f, l, mixed);
      for (int d = 0; d < v.rank; ++d)
        v.sizes[d] = sizes[d];
      for (auto [src, group] :
           llvm::enumerate(expand.getReassociationIndices())) {
        int64_t stride = s.strides[src];
        for (int64_t i = int64_t(group.size()) - 1; i >= 0; --i) {
          v.strides[group[i]] = stride;
          stride *= v.sizes[group[i]];
        }
      }
      viewOf(f, l, expand.getResult()) = v;
    }
    return;
  }
  if (auto get = dyn_cast<memref::GetGlobalOp>(op)) {
    auto global = symbols.lookup<memref::GlobalOp>(get.getName());
    auto init = global ? dyn_cast_or_null<DenseElementsAttr>(
                             global.getInitialValueAttr())
                       : DenseElementsAttr();
    if (!init)
      return (void)fail(op, "a memref.global with no dense initial value");
    auto type = cast<MemRefType>(get.getResult().getType());
    Memory *&m = globals[global];
    if (!m) {
      m = allocate(type.getElementType(), type.getNumElements());
      size_t i = 0;
      if (init.getElementType().isIntOrIndex())
        for (APInt x : init.getValues<APInt>())
          m->data[i++] = double(x.getSExtValue());
      else
        for (APFloat x : init.getValues<APFloat>())
          m->data[i++] = x.convertToDouble();
      if (init.isSplat())
        std::fill(m->data.begin(), m->data.end(), m->data[0]);
    }
    LaneView v = contiguous(m, type.getShape());
    for (int64_t l : active)
      viewOf(f, l, get.getResult()) = v;
    return;
  }
  if (auto ptr = dyn_cast<memref::ExtractAlignedPointerAsIndexOp>(op)) {
    // Shared memory: its address in the block's shared window (wgmma's
    // descriptors are computed from it). Others: an address for alignment
    // checks; every memory starts 256-aligned.
    for (int64_t l : active) {
      const LaneView &v = viewOf(f, l, ptr.getSource());
      *valueOf(f, l, ptr.getResult()) =
          v.memory && v.memory->sharedAddress >= 0
              ? double(v.memory->sharedAddress)
              : double((reinterpret_cast<uintptr_t>(v.memory) & 0xffffffu) *
                       256);
    }
    return;
  }
  if (isa<memref::CastOp, memref::MemorySpaceCastOp>(op)) {
    for (int64_t l : active)
      viewOf(f, l, op.getResult(0)) = viewOf(f, l, op.getOperand(0));
    return;
  }
  // Threads and warps.
  if (auto tid = dyn_cast<gpu::ThreadIdOp>(op)) {
    for (int64_t l : active)
      *valueOf(f, l, tid.getResult()) =
          tid.getDimension() == gpu::Dimension::x ? double(l) : 0.0;
    return;
  }
  if (auto lid = dyn_cast<gpu::LaneIdOp>(op)) {
    for (int64_t l : active)
      *valueOf(f, l, lid.getResult()) = double(l % warpSize);
    return;
  }
  if (isa<gpu::BarrierOp>(op)) {
    if (int64_t(active.size()) != f.lanes)
      return (void)fail(op, "a barrier some threads of the block skip");
    ++blockEpoch;
    return;
  }
  if (isa<NVVM::NanosleepOp>(op))
    return; // (a spin's back-off; the kernels before have run to their end)
  if (isa<NVVM::SyncWarpOp, LLVM::FenceOp>(op)) {
    // A warp's sync (AMD: a wavefront fence) orders its own threads (not
    // under kda-run --inject-fault=warp-sync: the race check's own test).
    if (ignoreWarpSyncs)
      return;
    int64_t last = -1;
    for (int64_t l : active)
      if (l / warpSize != last) {
        last = l / warpSize;
        ++warpEpochOf(l);
      }
    return;
  }
  if (auto asmOp = dyn_cast<LLVM::InlineAsmOp>(op)) {
    if (asmOp.getAsmString().starts_with("wgmma.mma_async."))
      return runWgmma(f, asmOp, active);
    return (void)fail(op, "inline assembly other than wgmma.mma_async");
  }
  // wgmma's fence, commit and wait, and the proxy fence before it: the
  // emulator runs each wgmma.mma_async to its end when it is issued (after
  // the cp.async groups its barrier waited for); commits and waits keep the
  // groups' results and reads in flight for the checks (wgmmaPending).
  if (op.getName().getStringRef().starts_with("nvvm.wgmma") ||
      isa<NVVM::FenceProxyOp>(op)) {
    if (!wholeWarps(active, 128))
      return (void)fail(op, "a wgmma fence, commit or wait without whole "
                            "warpgroups");
    if (isa<NVVM::WgmmaGroupSyncAlignedOp>(op))
      wgmmaCommitted.push_back(wgmmaOpen++);
    else if (auto wait = dyn_cast<NVVM::WgmmaWaitGroupSyncOp>(op))
      retireWgmma(wait.getGroup() + (shortWgmmaWaits ? 1 : 0));
    return;
  }
  if (auto call = dyn_cast<LLVM::CallIntrinsicOp>(op)) {
    StringRef name = call.getIntrin();
    double (*fn)(double) = nullptr;
    if (name.starts_with("llvm.nvvm.ex2.approx"))
      fn = [](double x) { return std::exp2(x); };
    else if (name.starts_with("llvm.nvvm.lg2.approx"))
      fn = [](double x) { return std::log2(x); };
    else if (name.starts_with("llvm.nvvm.rcp.approx"))
      fn = [](double x) { return 1.0 / x; };
    else if (name.starts_with("llvm.nvvm.rsqrt.approx"))
      fn = [](double x) { return 1.0 / std::sqrt(x); };
    if (!fn || call->getNumOperands() != 1 || call->getNumResults() != 1)
      return (void)fail(op, "an intrinsic the emulator does not run (" +
                                name + ")");
    Type t = call->getResult(0).getType();
    for (int64_t l : active)
      *valueOf(f, l, call->getResult(0)) =
          roundTo(t, fn(scalar(f, l, call->getOperand(0))));
    return;
  }
  if (auto sh = dyn_cast<gpu::ShuffleOp>(op)) {
    std::vector<double> got(active.size());
    std::vector<bool> ok(active.size());
    std::vector<char> live(f.lanes, 0);
    for (int64_t l : active)
      live[l] = 1;
    for (size_t i = 0; i < active.size(); ++i) {
      const int64_t l = active[i];
      const int64_t width = int64_t(scalar(f, l, sh.getWidth()));
      const int64_t off = int64_t(scalar(f, l, sh.getOffset()));
      const int64_t base = l - l % width, in = l % width;
      int64_t src = l;
      bool valid = true;
      switch (sh.getMode()) {
      case gpu::ShuffleMode::XOR: src = base + ((in ^ off) % width); break;
      case gpu::ShuffleMode::IDX: src = base + off % width; break;
      case gpu::ShuffleMode::DOWN:
        valid = in + off < width;
        src = valid ? l + off : l;
        break;
      case gpu::ShuffleMode::UP:
        valid = in >= off;
        src = valid ? l - off : l;
        break;
      }
      if (src < 0 || src >= f.lanes || !live[src])
        return (void)fail(op, "a shuffle from a lane not running it");
      got[i] = scalar(f, src, sh.getValue());
      ok[i] = valid;
    }
    for (size_t i = 0; i < active.size(); ++i) {
      *valueOf(f, active[i], sh.getShuffleResult()) = got[i];
      *valueOf(f, active[i], sh.getValid()) = ok[i] ? 1.0 : 0.0;
    }
    return;
  }
  if (auto mma = dyn_cast<nvgpu::MmaSyncOp>(op))
    return runMma(f, mma, active);
  if (isa<amdgpu::MFMAOp, amdgpu::WMMAOp>(op))
    return runAmdUnit(f, op, active);
  if (auto bc = dyn_cast<gpu::SubgroupBroadcastOp>(op)) {
    // The first active lane's value, or lane `lane`'s, within each wave.
    std::vector<double> got(active.size());
    for (size_t i = 0; i < active.size(); ++i) {
      const int64_t l = active[i], base = l - l % warpSize;
      int64_t src = -1;
      if (bc.getBroadcastType() == gpu::BroadcastType::specific_lane) {
        src = base + int64_t(scalar(f, l, bc.getLane()));
      } else {
        for (int64_t m : active)
          if (m >= base && m < base + warpSize) {
            src = m;
            break;
          }
      }
      if (!llvm::is_contained(active, src))
        return (void)fail(op, "a broadcast from a lane not running it");
      got[i] = scalar(f, src, bc.getSrc());
    }
    for (size_t i = 0; i < active.size(); ++i)
      *valueOf(f, active[i], bc.getResult()) = got[i];
    return;
  }
  if (auto mma = dyn_cast<NVVM::MmaOp>(op)) {
    // m16n8k16 on bf16 / f16 pairs packed in i32 registers (element 0 in
    // the low half), row-major A, column-major B, f32 accumulators.
    NVVM::MMAShapeAttr shape = mma.getShape();
    std::optional<NVVM::MMATypes> type = mma.getMultiplicandAPtxType();
    const bool bf16 = type == NVVM::MMATypes::bf16;
    if (shape.getM() != 16 || shape.getN() != 8 || shape.getK() != 16 ||
        !(bf16 || type == NVVM::MMATypes::f16) ||
        mma.getLayoutA() != NVVM::MMALayout::row ||
        mma.getLayoutB() != NVVM::MMALayout::col ||
        mma.getOperandA().size() != 4 || mma.getOperandB().size() != 2 ||
        mma.getOperandC().size() != 4)
      return (void)fail(op, "an nvvm.mma.sync other than m16n8k16 bf16 / f16 "
                            "row x col into four f32");
    if (!wholeWarps(active))
      return (void)fail(op, "an mma.sync without all 32 lanes of its warp");
    // An operand register is an i32 of two halves (bf16; element 0 in the
    // low half) or, as NVVM takes f16 operands, a vector<2xf16> whose
    // elements are the values themselves.
    auto half = [&](int64_t lane, Value reg, int64_t h) {
      if (isa<VectorType>(reg.getType()))
        return valueOf(f, lane, reg)[h];
      return halfOfPair(scalar(f, lane, reg), h, bf16);
    };
    for (size_t i = 0; i < active.size(); i += 32) {
      const int64_t base = active[i];
      std::vector<double> res(32 * 4);
      warpProduct(
          16,
          [&](int64_t lane, int64_t e) {
            return half(base + lane, mma.getOperandA()[e / 2], e % 2);
          },
          [&](int64_t lane, int64_t e) {
            return half(base + lane, mma.getOperandB()[e / 2], e % 2);
          },
          [&](int64_t lane, int64_t e) {
            return scalar(f, base + lane, mma.getOperandC()[e]);
          },
          [&](int64_t lane, int64_t e, double x) { res[lane * 4 + e] = x; });
      for (int64_t lane = 0; lane < 32; ++lane)
        std::memcpy(valueOf(f, base + lane, mma.getRes()), &res[lane * 4],
                    4 * sizeof(double));
    }
    return;
  }
  if (auto ev = dyn_cast<LLVM::ExtractValueOp>(op)) {
    if (ev.getPosition().size() != 1)
      return (void)fail(op, "an extractvalue of a nested position");
    const int64_t at = ev.getPosition()[0];
    for (int64_t l : active)
      *valueOf(f, l, ev.getResult()) = valueOf(f, l, ev.getContainer())[at];
    if (auto it = wgmmaPending.find(ev.getContainer()); it != wgmmaPending.end())
      wgmmaPending[ev.getResult()] = it->second;
    return;
  }
  if (auto ld = dyn_cast<nvgpu::LdMatrixOp>(op)) {
    // ldmatrix .m8n8 .x1/.x2/.x4: lane 8i + r gives row r of matrix i (8
    // elements of 16 bits, or 4 of 32); lane l gets row l / 4's elements
    // 2 (l % 4) and 2 (l % 4) + 1 of each matrix (transposed: column l / 4
    // of rows 2 (l % 4) and 2 (l % 4) + 1), or 32-bit element l % 4.
    auto type = cast<VectorType>(ld.getRes().getType());
    const bool wide = type.getElementType().getIntOrFloatBitWidth() == 32;
    const int64_t tiles = ld.getNumTiles();
    const bool transpose = ld.getTranspose();
    if (wide && transpose)
      return (void)fail(op, "a transposed ldmatrix of 32-bit elements");
    if (active.size() % 32 != 0)
      return (void)fail(op, "an ldmatrix some lanes of a warp skip");
    std::vector<double> out(active.size() * tiles * (wide ? 1 : 2));
    const size_t per = wide ? tiles : 2 * tiles;
    for (size_t i = 0; i < active.size(); ++i) {
      const int64_t l = active[i], base = l - l % 32, in = l % 32;
      auto element = [&](int64_t provider, int64_t col, double &x) {
        const int64_t p = base + provider;
        const LaneView &v = viewOf(f, p, ld.getSrcMemref());
        std::vector<int64_t> at = indices(f, p, ld.getIndices());
        at.back() += col;
        int64_t flat;
        if (!address(&op, v, at, flat) || !touch(&op, v.memory, flat, p, false))
          return false;
        x = v.memory->data[flat];
        return true;
      };
      for (int64_t t = 0; t < tiles; ++t) {
        if (wide) {
          if (!element(8 * t + in / 4, in % 4, out[i * per + t]))
            return;
          continue;
        }
        for (int64_t h = 0; h < 2; ++h) {
          bool ok = transpose
                        ? element(8 * t + 2 * (in % 4) + h, in / 4,
                                  out[i * per + 2 * t + h])
                        : element(8 * t + in / 4, 2 * (in % 4) + h,
                                  out[i * per + 2 * t + h]);
          if (!ok)
            return;
        }
      }
    }
    for (size_t i = 0; i < active.size(); ++i)
      std::memcpy(valueOf(f, active[i], ld.getRes()), &out[i * per],
                  per * sizeof(double));
    return;
  }
  if (auto cp = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op)) {
    const int64_t n = cp.getDstElements().getZExtValue();
    for (int64_t l : active) {
      const LaneView &src = viewOf(f, l, cp.getSrc());
      const LaneView &dst = viewOf(f, l, cp.getDst());
      int64_t readN = cp.getSrcElements()
                          ? int64_t(scalar(f, l, cp.getSrcElements()))
                          : n;
      PendingCopy c;
      c.thread = l;
      c.op = &op;
      c.dst = dst;
      c.at = indices(f, l, cp.getDstIndices());
      int64_t first, end;
      std::vector<int64_t> last = c.at;
      last.back() += n - 1;
      if (!address(&op, dst, c.at, first) || !address(&op, dst, last, end))
        return;
      // The copy may land any time from its issue to the wait that covers
      // it: its elements must already be free of other threads' reads and
      // writes since the last barrier (checked here; recorded where it
      // lands). A warp refilling a stage its other lanes read, with no warp
      // sync between, is such a hazard (racecheck's intra-warp warnings).
      const int64_t step = dst.strides[dst.rank - 1];
      for (int64_t e = 0; e < n; ++e)
        if (!touch(&op, dst.memory, first + e * step, l, /*write=*/true,
                   /*record=*/false))
          return;
      std::vector<int64_t> from = indices(f, l, cp.getSrcIndices());
      c.values.assign(n, 0.0);
      if (readN > 0) {
        int64_t s0, s1;
        std::vector<int64_t> end = from;
        end.back() += readN - 1;
        if (!address(&op, src, from, s0) || !address(&op, src, end, s1))
          return;
        const int64_t step = src.strides[src.rank - 1];
        for (int64_t e = 0; e < std::min(readN, n); ++e)
          c.values[e] = src.memory->data[s0 + e * step];
      }
      openGroup.push_back(std::move(c));
    }
    return;
  }
  if (isa<NVVM::CpAsyncCommitGroupOp, nvgpu::DeviceAsyncCreateGroupOp>(op)) {
    committed.push_back(std::move(openGroup));
    openGroup.clear();
    return;
  }
  if (auto w = dyn_cast<NVVM::CpAsyncWaitGroupOp>(op))
    return applyCopies(size_t(w.getN()));
  if (auto w = dyn_cast<nvgpu::DeviceAsyncWaitOp>(op))
    return applyCopies(w.getNumGroups() ? size_t(*w.getNumGroups()) : 0);
  // Vectors.
  if (auto fe = dyn_cast<vector::FromElementsOp>(op)) {
    for (int64_t l : active) {
      double *out = valueOf(f, l, fe.getResult());
      for (auto [i, e] : llvm::enumerate(fe.getElements()))
        out[i] = scalar(f, l, e);
    }
    return;
  }
  if (auto ex = dyn_cast<vector::ExtractOp>(op)) {
    if (!ex.getDynamicPosition().empty())
      return (void)fail(op, "a vector.extract at a dynamic position");
    auto type = cast<VectorType>(ex.getSource().getType());
    int64_t flat = 0;
    ArrayRef<int64_t> pos = ex.getStaticPosition();
    for (int64_t d = 0; d < type.getRank(); ++d)
      flat = flat * type.getDimSize(d) + (d < int64_t(pos.size()) ? pos[d] : 0);
    const int64_t n = elementsOf(ex.getResult().getType());
    for (int64_t l : active)
      std::memcpy(valueOf(f, l, ex.getResult()),
                  valueOf(f, l, ex.getSource()) + flat, n * sizeof(double));
    return;
  }
  if (auto ins = dyn_cast<vector::InsertOp>(op)) {
    if (!ins.getDynamicPosition().empty())
      return (void)fail(op, "a vector.insert at a dynamic position");
    auto type = cast<VectorType>(ins.getDest().getType());
    int64_t flat = 0;
    ArrayRef<int64_t> pos = ins.getStaticPosition();
    for (int64_t d = 0; d < type.getRank(); ++d)
      flat = flat * type.getDimSize(d) + (d < int64_t(pos.size()) ? pos[d] : 0);
    const int64_t n = elementsOf(ins.getValueToStore().getType());
    const int64_t all = type.getNumElements();
    for (int64_t l : active) {
      double *out = valueOf(f, l, ins.getResult());
      std::memmove(out, valueOf(f, l, ins.getDest()), all * sizeof(double));
      std::memcpy(out + flat, valueOf(f, l, ins.getValueToStore()),
                  n * sizeof(double));
    }
    return;
  }
  if (auto bc = dyn_cast<vector::BitCastOp>(op)) {
    // Through the bits, element 0 in the low bits (little-endian).
    Type from = elementOf(bc.getSource().getType()), to = elementOf(bc.getType());
    const int64_t n = elementsOf(bc.getSource().getType()),
                  m = elementsOf(bc.getType());
    const unsigned fw = from.getIntOrFloatBitWidth(),
                   tw = to.getIntOrFloatBitWidth();
    if (n * fw > 64 || m * tw != n * fw)
      return (void)fail(op, "a vector.bitcast over 64 bits");
    auto toBits = [&](Type t, double x) -> uint64_t {
      if (t.isF32())
        return floatToBits(float(x));
      if (t.isBF16())
        return floatToBits(float(x)) >> 16; // rounded to bf16 already
      if (t.isF16())
        return ::kda::npy::doubleToHalfBits(x);
      return asUnsigned(x, t.getIntOrFloatBitWidth());
    };
    auto fromBits = [&](Type t, uint64_t b) -> double {
      if (t.isF32())
        return bitsToFloat(uint32_t(b));
      if (t.isBF16())
        return bitsToFloat(uint32_t(b) << 16);
      if (t.isF16())
        return ::kda::npy::halfBitsToDouble(uint16_t(b));
      return wrap(b, t.getIntOrFloatBitWidth());
    };
    for (int64_t l : active) {
      const double *in = valueOf(f, l, bc.getSource());
      uint64_t bits = 0;
      for (int64_t e = 0; e < n; ++e)
        bits |= (toBits(from, in[e]) & ((fw == 64 ? 0 : (uint64_t(1) << fw)) - 1))
                << (e * fw);
      double *out = valueOf(f, l, bc.getResult());
      for (int64_t e = 0; e < m; ++e)
        out[e] = fromBits(to, tw == 64 ? bits : (bits >> (e * tw)) &
                                                    ((uint64_t(1) << tw) - 1));
    }
    return;
  }
  if (auto bc = dyn_cast<vector::BroadcastOp>(op)) {
    if (isa<VectorType>(bc.getSource().getType()))
      return (void)fail(op, "a vector broadcast of a vector");
    const int64_t n = elementsOf(bc.getResult().getType());
    for (int64_t l : active) {
      double x = scalar(f, l, bc.getSource());
      double *out = valueOf(f, l, bc.getResult());
      for (int64_t e = 0; e < n; ++e)
        out[e] = x;
    }
    return;
  }
  if (isa<func::ReturnOp>(op))
    return;
  runArith(f, op, active);
}

/// The value of an affine expression of integer dimensions and symbols
/// (operands: the dimensions, then the symbols); none for a division by 0.
static std::optional<int64_t> evalAffine(AffineExpr e, ArrayRef<int64_t> in,
                                         unsigned numDims) {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return c.getValue();
  if (auto d = dyn_cast<AffineDimExpr>(e))
    return in[d.getPosition()];
  if (auto s = dyn_cast<AffineSymbolExpr>(e))
    return in[numDims + s.getPosition()];
  auto b = cast<AffineBinaryOpExpr>(e);
  std::optional<int64_t> l = evalAffine(b.getLHS(), in, numDims);
  std::optional<int64_t> r = evalAffine(b.getRHS(), in, numDims);
  if (!l || !r)
    return std::nullopt;
  switch (e.getKind()) {
  case AffineExprKind::Add:
    return *l + *r;
  case AffineExprKind::Mul:
    return *l * *r;
  case AffineExprKind::Mod:
    if (*r == 0)
      return std::nullopt;
    return ((*l % *r) + *r) % *r;
  case AffineExprKind::FloorDiv:
    if (*r == 0)
      return std::nullopt;
    return llvm::divideFloorSigned(*l, *r);
  case AffineExprKind::CeilDiv:
    if (*r == 0)
      return std::nullopt;
    return llvm::divideCeilSigned(*l, *r);
  default:
    return std::nullopt;
  }
}

void Interpreter::runArith(Frame &f, Operation &op,
                           const std::vector<int64_t> &active) {
  if (op.getNumResults() != 1)
    return (void)fail(&op, "an op the emulator does not run");
  Value result = op.getResult(0);
  Type rt = elementOf(result.getType());
  const int64_t n = elementsOf(result.getType());
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    std::vector<double> v;
    Attribute a = c.getValue();
    if (auto fa = dyn_cast<FloatAttr>(a)) {
      v.push_back(fa.getValueAsDouble());
    } else if (auto ia = dyn_cast<IntegerAttr>(a)) {
      v.push_back(wrap(ia.getValue().getZExtValue(), bitsOf(rt)));
      if (bitsOf(rt) >= 64)
        v.back() = double(ia.getValue().getSExtValue());
    } else if (auto d = dyn_cast<DenseElementsAttr>(a)) {
      if (d.getElementType().isIntOrIndex()) {
        for (APInt x : d.getValues<APInt>())
          v.push_back(bitsOf(rt) >= 64 ? double(x.getSExtValue())
                                       : wrap(x.getZExtValue(), bitsOf(rt)));
      } else {
        for (APFloat x : d.getValues<APFloat>())
          v.push_back(x.convertToDouble());
      }
    } else {
      return (void)fail(&op, "a constant the emulator does not read");
    }
    if (int64_t(v.size()) == 1 && n > 1)
      v.assign(n, v[0]);
    for (int64_t l : active)
      std::memcpy(valueOf(f, l, result), v.data(), n * sizeof(double));
    return;
  }
  // Affine index arithmetic (the size of a partial tile: affine.min of a
  // tile size and what is left of a dimension); the GPU pipeline lowers it
  // to arith after the register passes this emulator stops at.
  if (isa<affine::AffineApplyOp, affine::AffineMinOp, affine::AffineMaxOp>(
          op)) {
    AffineMap map;
    if (auto a = dyn_cast<affine::AffineApplyOp>(op))
      map = a.getAffineMap();
    else if (auto a = dyn_cast<affine::AffineMinOp>(op))
      map = a.getAffineMap();
    else
      map = cast<affine::AffineMaxOp>(op).getAffineMap();
    for (int64_t l : active) {
      SmallVector<int64_t> in;
      for (Value v : op.getOperands())
        in.push_back(int64_t(scalar(f, l, v)));
      std::optional<int64_t> best;
      for (AffineExpr e : map.getResults()) {
        std::optional<int64_t> x = evalAffine(e, in, map.getNumDims());
        if (!x)
          return (void)fail(&op, "an affine expression the emulator does not "
                                 "evaluate (a division by zero)");
        best = !best                         ? *x
               : isa<affine::AffineMaxOp>(op) ? std::max(*best, *x)
                                              : std::min(*best, *x);
      }
      *valueOf(f, l, result) = double(*best);
    }
    return;
  }
  // Elementwise ops over scalars or vectors of one shape.
  const unsigned w = bitsOf(op.getNumOperands() ? op.getOperand(0).getType()
                                                 : result.getType());
  const unsigned rw = bitsOf(result.getType());
  using Fn = double (*)(const double *, unsigned, unsigned, Operation *);
  Fn fn = nullptr;
#define KDA_EMU(OP, EXPR)                                                      \
  if (isa<OP>(op))                                                             \
    fn = [](const double *x, unsigned w, unsigned rw, Operation *o) -> double { \
      (void)x; (void)w; (void)rw; (void)o;                                      \
      return EXPR;                                                             \
    };
  KDA_EMU(arith::AddFOp, x[0] + x[1])
  KDA_EMU(arith::SubFOp, x[0] - x[1])
  KDA_EMU(arith::MulFOp, x[0] * x[1])
  KDA_EMU(arith::DivFOp, x[0] / x[1])
  KDA_EMU(arith::NegFOp, -x[0])
  KDA_EMU(arith::MaximumFOp, (x[0] != x[0] || x[1] != x[1]) ? NAN : std::max(x[0], x[1]))
  KDA_EMU(arith::MinimumFOp, (x[0] != x[0] || x[1] != x[1]) ? NAN : std::min(x[0], x[1]))
  KDA_EMU(arith::MaxNumFOp, std::fmax(x[0], x[1]))
  KDA_EMU(arith::MinNumFOp, std::fmin(x[0], x[1]))
  KDA_EMU(arith::ExtFOp, x[0])
  KDA_EMU(arith::TruncFOp, x[0])
  KDA_EMU(arith::SIToFPOp, double(asSigned(x[0], w)))
  KDA_EMU(arith::UIToFPOp, double(asUnsigned(x[0], w)))
  KDA_EMU(arith::FPToSIOp, wrap(uint64_t(int64_t(std::trunc(x[0]))), rw))
  KDA_EMU(arith::FPToUIOp, wrap(uint64_t(std::trunc(x[0])), rw))
  KDA_EMU(math::ExpOp, std::exp(x[0]))
  KDA_EMU(math::Exp2Op, std::exp2(x[0]))
  KDA_EMU(math::LogOp, std::log(x[0]))
  KDA_EMU(math::Log2Op, std::log2(x[0]))
  KDA_EMU(math::Log1pOp, std::log1p(x[0]))
  KDA_EMU(math::SqrtOp, std::sqrt(x[0]))
  KDA_EMU(math::RsqrtOp, 1.0 / std::sqrt(x[0]))
  KDA_EMU(math::TanhOp, std::tanh(x[0]))
  KDA_EMU(math::AbsFOp, std::fabs(x[0]))
  KDA_EMU(math::FmaOp, x[0] * x[1] + x[2])
  KDA_EMU(math::CopySignOp, std::copysign(x[0], x[1]))
  KDA_EMU(arith::AddIOp, wrap(asUnsigned(x[0], w) + asUnsigned(x[1], w), w))
  KDA_EMU(arith::SubIOp, wrap(asUnsigned(x[0], w) - asUnsigned(x[1], w), w))
  KDA_EMU(arith::MulIOp, wrap(asUnsigned(x[0], w) * asUnsigned(x[1], w), w))
  KDA_EMU(arith::AndIOp, wrap(asUnsigned(x[0], w) & asUnsigned(x[1], w), w))
  KDA_EMU(arith::OrIOp, wrap(asUnsigned(x[0], w) | asUnsigned(x[1], w), w))
  KDA_EMU(arith::XOrIOp, wrap(asUnsigned(x[0], w) ^ asUnsigned(x[1], w), w))
  KDA_EMU(arith::ShLIOp, wrap(asUnsigned(x[0], w) << asUnsigned(x[1], w), w))
  KDA_EMU(arith::ShRUIOp, wrap(asUnsigned(x[0], w) >> asUnsigned(x[1], w), w))
  KDA_EMU(arith::ShRSIOp, wrap(uint64_t(asSigned(x[0], w) >> asUnsigned(x[1], w)), w))
  KDA_EMU(arith::DivUIOp, wrap(asUnsigned(x[0], w) / asUnsigned(x[1], w), w))
  KDA_EMU(arith::RemUIOp, wrap(asUnsigned(x[0], w) % asUnsigned(x[1], w), w))
  KDA_EMU(arith::DivSIOp, wrap(uint64_t(asSigned(x[0], w) / asSigned(x[1], w)), w))
  KDA_EMU(arith::RemSIOp, wrap(uint64_t(asSigned(x[0], w) % asSigned(x[1], w)), w))
  KDA_EMU(arith::CeilDivUIOp,
          wrap((asUnsigned(x[0], w) + asUnsigned(x[1], w) - 1) / asUnsigned(x[1], w), w))
  KDA_EMU(arith::CeilDivSIOp,
          wrap(uint64_t((asSigned(x[0], w) + asSigned(x[1], w) - 1) / asSigned(x[1], w)), w))
  KDA_EMU(arith::FloorDivSIOp,
          wrap(uint64_t(int64_t(std::floor(double(asSigned(x[0], w)) / double(asSigned(x[1], w))))), w))
  KDA_EMU(arith::MinUIOp, wrap(std::min(asUnsigned(x[0], w), asUnsigned(x[1], w)), w))
  KDA_EMU(arith::MaxUIOp, wrap(std::max(asUnsigned(x[0], w), asUnsigned(x[1], w)), w))
  KDA_EMU(arith::MinSIOp, wrap(uint64_t(std::min(asSigned(x[0], w), asSigned(x[1], w))), w))
  KDA_EMU(arith::MaxSIOp, wrap(uint64_t(std::max(asSigned(x[0], w), asSigned(x[1], w))), w))
  KDA_EMU(arith::ExtUIOp, wrap(asUnsigned(x[0], w), rw))
  KDA_EMU(arith::ExtSIOp, wrap(uint64_t(asSigned(x[0], w)), rw))
  KDA_EMU(arith::TruncIOp, wrap(asUnsigned(x[0], w), rw))
  KDA_EMU(arith::IndexCastOp, rw >= 64 ? double(asSigned(x[0], w)) : wrap(uint64_t(asSigned(x[0], w)), rw))
  KDA_EMU(arith::IndexCastUIOp, wrap(asUnsigned(x[0], w), rw))
  KDA_EMU(arith::SelectOp, x[0] != 0 ? x[1] : x[2])
#undef KDA_EMU
  if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
    const arith::CmpIPredicate p = cmp.getPredicate();
    for (int64_t l : active)
      for (int64_t e = 0; e < n; ++e) {
        double a = valueOf(f, l, cmp.getLhs())[e], b = valueOf(f, l, cmp.getRhs())[e];
        int64_t sa = asSigned(a, w), sb = asSigned(b, w);
        uint64_t ua = asUnsigned(a, w), ub = asUnsigned(b, w);
        bool r = false;
        switch (p) {
        case arith::CmpIPredicate::eq: r = ua == ub; break;
        case arith::CmpIPredicate::ne: r = ua != ub; break;
        case arith::CmpIPredicate::slt: r = sa < sb; break;
        case arith::CmpIPredicate::sle: r = sa <= sb; break;
        case arith::CmpIPredicate::sgt: r = sa > sb; break;
        case arith::CmpIPredicate::sge: r = sa >= sb; break;
        case arith::CmpIPredicate::ult: r = ua < ub; break;
        case arith::CmpIPredicate::ule: r = ua <= ub; break;
        case arith::CmpIPredicate::ugt: r = ua > ub; break;
        case arith::CmpIPredicate::uge: r = ua >= ub; break;
        }
        valueOf(f, l, result)[e] = r ? 1.0 : 0.0;
      }
    return;
  }
  if (auto cmp = dyn_cast<arith::CmpFOp>(op)) {
    const arith::CmpFPredicate p = cmp.getPredicate();
    for (int64_t l : active)
      for (int64_t e = 0; e < n; ++e) {
        double a = valueOf(f, l, cmp.getLhs())[e], b = valueOf(f, l, cmp.getRhs())[e];
        bool uno = a != a || b != b, r = false;
        switch (p) {
        case arith::CmpFPredicate::AlwaysFalse: r = false; break;
        case arith::CmpFPredicate::OEQ: r = !uno && a == b; break;
        case arith::CmpFPredicate::OGT: r = !uno && a > b; break;
        case arith::CmpFPredicate::OGE: r = !uno && a >= b; break;
        case arith::CmpFPredicate::OLT: r = !uno && a < b; break;
        case arith::CmpFPredicate::OLE: r = !uno && a <= b; break;
        case arith::CmpFPredicate::ONE: r = !uno && a != b; break;
        case arith::CmpFPredicate::ORD: r = !uno; break;
        case arith::CmpFPredicate::UEQ: r = uno || a == b; break;
        case arith::CmpFPredicate::UGT: r = uno || a > b; break;
        case arith::CmpFPredicate::UGE: r = uno || a >= b; break;
        case arith::CmpFPredicate::ULT: r = uno || a < b; break;
        case arith::CmpFPredicate::ULE: r = uno || a <= b; break;
        case arith::CmpFPredicate::UNE: r = uno || a != b; break;
        case arith::CmpFPredicate::UNO: r = uno; break;
        case arith::CmpFPredicate::AlwaysTrue: r = true; break;
        }
        valueOf(f, l, result)[e] = r ? 1.0 : 0.0;
      }
    return;
  }
  if (auto bc = dyn_cast<arith::BitcastOp>(op)) {
    Type from = elementOf(bc.getIn().getType());
    if (!((from.isF32() && rt.isInteger(32)) || (from.isInteger(32) && rt.isF32())))
      return (void)fail(&op, "a bitcast other than f32 <-> i32");
    for (int64_t l : active)
      for (int64_t e = 0; e < n; ++e) {
        double x = valueOf(f, l, bc.getIn())[e];
        valueOf(f, l, result)[e] =
            rt.isF32() ? double(bitsToFloat(uint32_t(asUnsigned(x, 32))))
                       : double(floatToBits(float(x)));
      }
    return;
  }
  if (!fn)
    return (void)fail(&op, "an op the emulator does not run");
  const bool isFloat = isa<FloatType>(rt);
  const unsigned operands = op.getNumOperands();
  std::vector<const double *> in(operands);
  std::vector<int64_t> width(operands);
  for (unsigned i = 0; i < operands; ++i)
    width[i] = elementsOf(op.getOperand(i).getType());
  double x[4];
  if (operands > 4)
    return (void)fail(&op, "an op of more than four operands");
  for (int64_t l : active) {
    for (unsigned i = 0; i < operands; ++i)
      in[i] = valueOf(f, l, op.getOperand(i));
    double *out = valueOf(f, l, result);
    for (int64_t e = 0; e < n; ++e) {
      for (unsigned i = 0; i < operands; ++i)
        x[i] = in[i][width[i] == 1 ? 0 : e];
      double r = fn(x, w, rw, &op);
      out[e] = isFloat ? roundTo(rt, r) : r;
    }
  }
}

} // namespace

std::string run(func::FuncOp entry, int64_t threads, int64_t warpSize,
                const std::vector<View> &args, std::vector<View> &results,
                std::vector<std::unique_ptr<Memory>> &owner, Stats &stats) {
  auto module = entry->getParentOfType<ModuleOp>();
  if (!module)
    return "the entry function is not in a module";
  if (args.size() != entry.getNumArguments())
    return "the entry takes " + std::to_string(entry.getNumArguments()) +
           " arguments, given " + std::to_string(args.size());
  Interpreter interp(module, threads, warpSize, owner, stats);
  std::vector<LaneView> in, out;
  for (const View &v : args) {
    if (int(v.sizes.size()) > kMaxRank)
      return "a memref of rank over " + std::to_string(kMaxRank);
    in.push_back(Interpreter::fromView(v));
  }
  std::string error = interp.call(entry, in, out);
  if (!error.empty())
    return error;
  for (const LaneView &v : out)
    results.push_back(Interpreter::toView(v));
  return "";
}

} // namespace kda::emu
