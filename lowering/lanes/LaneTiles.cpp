//===- LaneTiles.cpp - the tile primitives on a GPU block's registers -----===//

#include "lowering/lanes/LaneTiles.h"
#include "lowering/GpuPipeline.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/STLExtras.h"

#include <set>

using namespace mlir;
using namespace mlir::kda;

//===----------------------------------------------------------------------===//
// LaneLayout
//===----------------------------------------------------------------------===//

namespace {
int64_t log2Exact(int64_t v) {
  int64_t bits = 0;
  while ((int64_t(1) << bits) < v)
    ++bits;
  return (int64_t(1) << bits) == v ? bits : -1;
}
bool isZero(ArrayRef<int64_t> c) {
  return llvm::all_of(c, [](int64_t x) { return x == 0; });
}
int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}
} // namespace

LaneLayout::Coords LaneLayout::at(int64_t r, int64_t lane, int64_t warp) const {
  Coords c = regs[r];
  for (auto [bit, basis] : llvm::enumerate(lanes))
    if ((lane >> bit) & 1)
      for (int64_t d = 0; d < rank(); ++d)
        c[d] += basis[d];
  for (auto [bit, basis] : llvm::enumerate(warps))
    if ((warp >> bit) & 1)
      for (int64_t d = 0; d < rank(); ++d)
        c[d] += basis[d];
  return c;
}

int64_t LaneLayout::replicatedLaneMask() const {
  int64_t m = 0;
  for (auto [bit, basis] : llvm::enumerate(lanes))
    if (isZero(basis))
      m |= int64_t(1) << bit;
  return m;
}

int64_t LaneLayout::replicatedWarpMask() const {
  int64_t m = 0;
  for (auto [bit, basis] : llvm::enumerate(warps))
    if (isZero(basis))
      m |= int64_t(1) << bit;
  return m;
}

std::string LaneLayout::check() const {
  for (const Coords &c : llvm::concat<const Coords>(regs, lanes, warps))
    if (int64_t(c.size()) != rank())
      return "a basis of another rank than the tile";
  int64_t copies = (int64_t(1) << llvm::popcount(uint64_t(replicatedLaneMask()))) *
                   (int64_t(1) << llvm::popcount(uint64_t(replicatedWarpMask())));
  std::map<Coords, int64_t> seen;
  for (int64_t w = 0; w < numWarps(); ++w)
    for (int64_t l = 0; l < numLanes(); ++l) {
      std::set<Coords> own;
      for (int64_t r = 0; r < int64_t(regs.size()); ++r) {
        Coords c = at(r, l, w);
        for (int64_t d = 0; d < rank(); ++d)
          if (c[d] < 0 || c[d] >= shape[d])
            return "an element out of the tile's bounds";
        if (!own.insert(c).second)
          return "an element twice in one lane's registers";
        ++seen[c];
      }
    }
  if (int64_t(seen.size()) != numElements(shape))
    return "elements that no lane holds";
  for (auto &[c, n] : seen)
    if (n != copies)
      return "elements held an uneven number of times";
  return "";
}

LaneLayout LaneLayout::replicated(ArrayRef<int64_t> shape, int64_t laneBits,
                                  int64_t warpBits) {
  LaneLayout l;
  l.shape.assign(shape.begin(), shape.end());
  Coords zero(shape.size(), 0);
  l.lanes.assign(laneBits, zero);
  l.warps.assign(warpBits, zero);
  int64_t n = numElements(shape);
  for (int64_t e = 0; e < n; ++e) {
    Coords c(shape.size(), 0);
    int64_t rest = e;
    for (int64_t d = shape.size() - 1; d >= 0; --d) {
      c[d] = rest % shape[d];
      rest /= shape[d];
    }
    l.regs.push_back(c);
  }
  return l;
}

LaneLayout LaneLayout::slice(int64_t dim, SmallVectorImpl<int64_t> *regOf) const {
  LaneLayout s;
  s.shape = {shape[dim]};
  std::map<int64_t, int64_t> index;
  for (const Coords &c : regs) {
    auto [it, fresh] = index.try_emplace(c[dim], s.regs.size());
    if (fresh)
      s.regs.push_back({c[dim]});
    if (regOf)
      regOf->push_back(it->second);
  }
  for (const Coords &c : lanes)
    s.lanes.push_back({c[dim]});
  for (const Coords &c : warps)
    s.warps.push_back({c[dim]});
  return s;
}

LaneLayout LaneLayout::squeezed(int64_t dim) const {
  LaneLayout s = *this;
  s.shape.erase(s.shape.begin() + dim);
  for (Coords &c : llvm::concat<Coords>(s.regs, s.lanes, s.warps))
    c.erase(c.begin() + dim);
  return s;
}

LaneLayout LaneLayout::unsqueezed(int64_t dim) const {
  LaneLayout s = *this;
  s.shape.insert(s.shape.begin() + dim, 1);
  for (Coords &c : llvm::concat<Coords>(s.regs, s.lanes, s.warps))
    c.insert(c.begin() + dim, 0);
  return s;
}

LaneLayout LaneLayout::transposed() const {
  LaneLayout s = *this;
  std::swap(s.shape[0], s.shape[1]);
  for (Coords &c : llvm::concat<Coords>(s.regs, s.lanes, s.warps))
    std::swap(c[0], c[1]);
  return s;
}

SmallVector<std::pair<int64_t, int64_t>>
LaneLayout::vectorRuns(int64_t dim, int64_t most) const {
  for (const Coords &c : llvm::concat<const Coords>(lanes, warps))
    while (most > 1 && c[dim] % most != 0)
      most /= 2;
  SmallVector<std::pair<int64_t, int64_t>> runs;
  const int64_t n = regs.size();
  for (int64_t r = 0; r < n;) {
    int64_t len = most;
    for (; len > 1; len /= 2) {
      bool ok = r + len <= n && regs[r][dim] % len == 0;
      for (int64_t e = 1; ok && e < len; ++e)
        ok = regs[r + e][1 - dim] == regs[r][1 - dim] &&
             regs[r + e][dim] == regs[r][dim] + e;
      if (ok)
        break;
    }
    runs.push_back({r, len});
    r += len;
  }
  return runs;
}

LaneLayout LaneLayout::spread(ArrayRef<int64_t> shape, Coords step,
                              int64_t warps) const {
  LaneLayout l = *this;
  l.shape.assign(shape.begin(), shape.end());
  l.warps.clear();
  for (int64_t w = 1; w < warps; w *= 2)
    l.warps.push_back({step[0] * w, step[1] * w});
  return l;
}

//===----------------------------------------------------------------------===//
// LaneTileBuilder
//===----------------------------------------------------------------------===//

LaneTileBuilder::LaneTileBuilder(ImplicitLocOpBuilder &b, int64_t warpSize,
                                 int64_t warps, Value lane, Value warp)
    : TileBuilder(b), warpSize(warpSize), warps(warps), lane(lane),
      warp(warp) {
  if (log2Exact(warpSize) < 0 || log2Exact(warps) < 0)
    error = "the warp size and the warps per block must be powers of two";
}

Value LaneTileBuilder::fail(const Twine &why, ArrayRef<int64_t> shape) {
  if (error.empty())
    error = why.str();
  // A placeholder of the right shape, so that the algorithm can go on to
  // the driver's check (every primitive returns at once after a failure).
  Value zero = constantF32(0.0);
  Value handle = vector::FromElementsOp::create(
      b, VectorType::get({1}, f32()), ValueRange{zero});
  Tile t;
  t.layout.shape.assign(shape.begin(), shape.end());
  tiles[handle.getAsOpaquePointer()] = std::move(t);
  return handle;
}

Value LaneTileBuilder::make(const LaneLayout &layout, ArrayRef<Value> regs) {
  if (!error.empty())
    return fail("", layout.shape);
  if (int64_t(layout.lanes.size()) != log2Exact(warpSize) ||
      int64_t(layout.warps.size()) != log2Exact(warps))
    return fail("a layout for another warp size or block", layout.shape);
  if (layout.regs.size() != regs.size())
    return fail("a tile whose registers do not match its layout",
                layout.shape);
  if (std::string why = layout.check(); !why.empty())
    return fail("a lane layout with " + why, layout.shape);
  for (Value r : regs)
    if (!r.getType().isF32())
      return fail("a tile of another element type than f32", layout.shape);
  Value handle = vector::FromElementsOp::create(
      b, VectorType::get({int64_t(regs.size())}, f32()), regs);
  // Copied before the insertion: `layout` and `regs` may be another tile's.
  Tile t{layout, SmallVector<Value>(regs)};
  tiles[handle.getAsOpaquePointer()] = std::move(t);
  return handle;
}

const LaneLayout &LaneTileBuilder::layoutOf(Value tile) {
  return tile_(tile).layout;
}

ArrayRef<Value> LaneTileBuilder::registersOf(Value tile) {
  return tile_(tile).regs;
}

void LaneTileBuilder::anchor(const LaneLayout &layout) {
  llvm::erase_if(anchors,
                 [&](const LaneLayout &l) { return l.shape == layout.shape; });
  anchors.push_back(layout);
}

SmallVector<int64_t> LaneTileBuilder::shape(Value tile) {
  if (auto sh = shared.find(tile.getAsOpaquePointer()); sh != shared.end())
    return llvm::to_vector(ArrayRef<int64_t>(sh->second.shape));
  if (auto pk = parked.find(tile.getAsOpaquePointer()); pk != parked.end())
    return llvm::to_vector(ArrayRef<int64_t>(pk->second.layout.shape));
  auto it = tiles.find(tile.getAsOpaquePointer());
  if (it == tiles.end()) {
    fail("a value that is not a lane tile", {1});
    return {1};
  }
  return llvm::to_vector(ArrayRef<int64_t>(it->second.layout.shape));
}

void LaneTileBuilder::useParking(Value buffer) {
  parking = buffer;
  parkingWords = cast<MemRefType>(buffer.getType()).getNumElements();
}

void LaneTileBuilder::barrier() {
  gpu::BarrierOp::create(b);
  ++barriers;
}

const LaneLayout *LaneTileBuilder::distribution(Value v) {
  if (auto it = tiles.find(v.getAsOpaquePointer()); it != tiles.end())
    return &it->second.layout;
  if (auto it = parked.find(v.getAsOpaquePointer()); it != parked.end())
    return &it->second.layout;
  return nullptr;
}

Value LaneTileBuilder::inRegistersView(Value v) {
  auto it = parked.find(v.getAsOpaquePointer());
  if (it == parked.end() || !it->second.stride)
    return v;
  const Tile &t = unpark(v);
  return make(t.layout, t.regs);
}

Value LaneTileBuilder::rowMajorIndex(int64_t base, int64_t stride, Value i,
                                     Value j) {
  return arith::AddIOp::create(
      b, arith::AddIOp::create(b, arith::MulIOp::create(b, i, index(stride)),
                               j),
      index(base));
}

Value LaneTileBuilder::park(Value tile) {
  // A hint: without room (or for a tile not in registers) the tile stays
  // where it is.
  if (!parking || !error.empty() || !tiles.count(tile.getAsOpaquePointer()))
    return tile;
  const Tile &t = tiles[tile.getAsOpaquePointer()];
  const int64_t threads = warpSize * warps, n = t.regs.size();
  const LaneLayout &l = t.layout;
  // Row-major: rows of a multiple of 4 words, plus 4 (16-byte rows; with
  // 4 (mod 32) words a row, the lanes of a row group and of a column pair
  // meet different banks).
  const bool rowMajor = l.rank() == 2 && l.replicatedLaneMask() == 0 &&
                        l.replicatedWarpMask() == 0 &&
                        int64_t(l.regs.size()) * threads ==
                            l.shape[0] * l.shape[1];
  const int64_t stride = rowMajor ? (l.shape[1] + 3) / 4 * 4 + 4 : 0;
  const int64_t words = rowMajor ? l.shape[0] * stride : n * threads;
  if (parkingUsed + words > parkingWords)
    return tile;
  Parked pk{l, parkingUsed, stride, barriers};
  parkingUsed += words;
  Value handle;
  if (rowMajor) {
    // The region may still be read by the products of the program before
    // (a loop around the program): a barrier first, unless the builder
    // emitted one before (it runs between them).
    if (barriers == 0 && warps > 1)
      barrier();
    pk.barriersAtPark = barriers;
    for (int64_t r = 0; r < n; ++r)
      memref::StoreOp::create(
          b, t.regs[r], parking,
          ValueRange{rowMajorIndex(pk.base, stride, coordinate(l, r, 0),
                                   coordinate(l, r, 1))});
    SharedTile st{parking, {}, SmallVector<int64_t, 2>(l.shape), Value()};
    st.base = pk.base;
    st.stride = stride;
    handle = sharedHandle(std::move(st));
  } else {
    // Word base + r * threads + thread: consecutive lanes, consecutive
    // words (no bank conflicts).
    Value thread = arith::AddIOp::create(
        b, arith::MulIOp::create(b, warp, index(warpSize)), lane);
    for (int64_t r = 0; r < n; ++r)
      memref::StoreOp::create(
          b, t.regs[r], parking,
          ValueRange{arith::AddIOp::create(b, thread,
                                           index(pk.base + r * threads))});
    handle = sharedHandle(SharedTile{});
    shared.erase(handle.getAsOpaquePointer());
  }
  parked[handle.getAsOpaquePointer()] = std::move(pk);
  return handle;
}

LaneTileBuilder::Tile &LaneTileBuilder::unpark(Value handle) {
  const Parked &pk = parked[handle.getAsOpaquePointer()];
  auto key = std::make_pair(handle.getAsOpaquePointer(), b.getInsertionBlock());
  if (auto it = unparked.find(key); it != unparked.end())
    return it->second;
  const int64_t threads = warpSize * warps;
  Value thread = arith::AddIOp::create(
      b, arith::MulIOp::create(b, warp, index(warpSize)), lane);
  Tile t{pk.layout, {}};
  for (int64_t r = 0; r < int64_t(pk.layout.regs.size()); ++r) {
    Value at;
    if (pk.stride) {
      // Each element where its own lane wrote it: no barrier.
      at = rowMajorIndex(pk.base, pk.stride, coordinate(pk.layout, r, 0),
                         coordinate(pk.layout, r, 1));
    } else {
      at = arith::AddIOp::create(b, thread, index(pk.base + r * threads));
    }
    t.regs.push_back(memref::LoadOp::create(b, parking, ValueRange{at}));
  }
  return unparked[key] = std::move(t);
}

Value LaneTileBuilder::coordinate(const LaneLayout &layout, int64_t r,
                                  int64_t dim) {
  auto idx = [&](int64_t v) { return index(v); };
  Value c = idx(layout.regs[r][dim]);
  // Runs of bits whose bases double: ((id >> first) & mask) * basis.
  auto addBits = [&](Value id, ArrayRef<LaneLayout::Coords> bases) {
    int64_t n = bases.size();
    for (int64_t bit = 0; bit < n;) {
      int64_t basis = bases[bit][dim];
      if (basis == 0) {
        ++bit;
        continue;
      }
      int64_t len = 1;
      while (bit + len < n && bases[bit + len][dim] == basis << len)
        ++len;
      Value field = arith::ShRUIOp::create(b, id, idx(bit));
      field = arith::AndIOp::create(b, field, idx((int64_t(1) << len) - 1));
      if (basis != 1)
        field = arith::MulIOp::create(b, field, idx(basis));
      c = arith::AddIOp::create(b, c, field);
      bit += len;
    }
  };
  addBits(lane, layout.lanes);
  addBits(warp, layout.warps);
  return c;
}

Value LaneTileBuilder::holdsFirstCopy(const LaneLayout &layout) {
  return arith::AndIOp::create(b, noneOf(lane, layout.replicatedLaneMask()),
                               noneOf(warp, layout.replicatedWarpMask()));
}

Value LaneTileBuilder::holdsFirstCopyInWarp(const LaneLayout &layout) {
  return noneOf(lane, layout.replicatedLaneMask());
}

Value LaneTileBuilder::noneOf(Value id, int64_t mask) {
  if (mask == 0)
    return arith::ConstantOp::create(b, b.getBoolAttr(true));
  Value bits = arith::AndIOp::create(b, id, index(mask));
  return arith::CmpIOp::create(b, arith::CmpIPredicate::eq, bits, index(0));
}

namespace {
using LaneFunction = LaneTileBuilder::LaneFunction;

/// The lane function that gives `srcLaneOf` (every lane's source lane), or
/// nullopt if neither form does.
std::optional<LaneFunction> fitLaneFunction(
    const std::map<int64_t, int64_t> &srcLaneOf, int64_t bits) {
  LaneFunction add, xr;
  add.c = xr.c = srcLaneOf.at(0);
  xr.additive = false;
  for (int64_t bit = 0; bit < bits; ++bit) {
    add.m.push_back(srcLaneOf.at(int64_t(1) << bit) - add.c);
    xr.m.push_back(srcLaneOf.at(int64_t(1) << bit) ^ xr.c);
  }
  bool isAdd = true, isXor = true;
  for (auto [l, src] : srcLaneOf) {
    int64_t sa = add.c, sx = xr.c;
    for (int64_t bit = 0; bit < bits; ++bit)
      if ((l >> bit) & 1) {
        sa += add.m[bit];
        sx ^= xr.m[bit];
      }
    isAdd &= sa == src;
    isXor &= sx == src;
  }
  if (isAdd)
    return add;
  if (isXor)
    return xr;
  return std::nullopt;
}
} // namespace

FailureOr<SmallVector<LaneTileBuilder::ConversionStep>>
LaneTileBuilder::planConversion(const LaneLayout &from, const LaneLayout &to,
                                int64_t warpSize, int64_t warps,
                                std::string &why) {
  if (from.shape != to.shape) {
    why = "a layout conversion between tiles of different shapes";
    return mlir::failure();
  }
  // Per warp: which (register, lane) of the source holds each element.
  SmallVector<std::map<LaneLayout::Coords, SmallVector<std::pair<int64_t, int64_t>>>>
      holders(warps);
  for (int64_t w = 0; w < warps; ++w)
    for (int64_t l = 0; l < warpSize; ++l)
      for (int64_t r = 0; r < int64_t(from.regs.size()); ++r)
        holders[w][from.at(r, l, w)].push_back({r, l});

  SmallVector<ConversionStep> steps;
  for (int64_t r = 0; r < int64_t(to.regs.size()); ++r) {
    // A source register that holds the element for every lane and warp.
    std::optional<std::set<int64_t>> common;
    for (int64_t w = 0; w < warps && (!common || !common->empty()); ++w)
      for (int64_t l = 0; l < warpSize; ++l) {
        std::set<int64_t> here;
        auto it = holders[w].find(to.at(r, l, w));
        if (it != holders[w].end())
          for (auto [sr, sl] : it->second)
            here.insert(sr);
        if (!common) {
          common = here;
        } else {
          std::set<int64_t> both;
          for (int64_t x : here)
            if (common->count(x))
              both.insert(x);
          common = both;
        }
      }
    if (!common || common->empty()) {
      why = "a layout conversion that needs data from another warp (or from "
            "registers that differ between lanes)";
      // Which tile: its shape and whether the warps split it.
      why += " (a [";
      for (size_t d = 0; d < from.shape.size(); ++d)
        why += (d ? ", " : "") + std::to_string(from.shape[d]);
      why += "] tile";
      bool split = false, toSplit = false;
      for (const LaneLayout::Coords &w : from.warps)
        for (int64_t x : w)
          split |= x != 0;
      for (const LaneLayout::Coords &w : to.warps)
        for (int64_t x : w)
          toSplit |= x != 0;
      why += std::string(split ? ", split" : ", copied") + " over the warps, to " +
             (toSplit ? "split" : "copied") + ")";
      return mlir::failure();
    }
    // Prefer the register the lane itself holds the element in.
    ConversionStep step;
    int64_t bestOwn = -1;
    for (int64_t sr : *common) {
      int64_t own = 0;
      for (int64_t w = 0; w < warps; ++w)
        for (int64_t l = 0; l < warpSize; ++l)
          own += from.at(sr, l, w) == to.at(r, l, w);
      if (own > bestOwn) {
        step.srcReg = sr;
        bestOwn = own;
      }
    }
    if (bestOwn == warps * warpSize) {
      steps.push_back(step);
      continue;
    }
    // Otherwise every lane reads the lowest lane that holds it.
    std::map<int64_t, int64_t> srcLaneOf;
    bool uniform = true;
    for (int64_t w = 0; w < warps; ++w)
      for (int64_t l = 0; l < warpSize; ++l) {
        int64_t lowest = -1;
        for (auto [sr, sl] : holders[w][to.at(r, l, w)])
          if (sr == step.srcReg && (lowest < 0 || sl < lowest))
            lowest = sl;
        auto [it, fresh] = srcLaneOf.try_emplace(l, lowest);
        uniform &= it->second == lowest;
      }
    if (uniform)
      step.from = fitLaneFunction(srcLaneOf, log2Exact(warpSize));
    if (!step.from) {
      why = "a layout conversion whose source lane is not a linear function "
            "of the lane";
      return mlir::failure();
    }
    steps.push_back(step);
  }
  return steps;
}

std::string LaneTileBuilder::conversionRefusal(const LaneLayout &from,
                                               const LaneLayout &to,
                                               int64_t warpSize,
                                               int64_t warps) {
  std::string why;
  (void)planConversion(from, to, warpSize, warps, why);
  return why;
}

Value LaneTileBuilder::laneIndexI32(const LaneFunction &f) {
  const int64_t bits = log2Exact(warpSize);
  auto i32 = [&](int64_t v) {
    return arith::ConstantOp::create(b, b.getI32IntegerAttr(v)).getResult();
  };
  Value laneI32 = arith::IndexCastOp::create(b, b.getI32Type(), lane);
  auto combine = [&](Value acc, Value t) {
    return f.additive ? Value(arith::AddIOp::create(b, acc, t))
                      : Value(arith::XOrIOp::create(b, acc, t));
  };
  // Bits that map to themselves: one mask.
  int64_t keep = 0;
  Value acc = i32(f.c);
  for (int64_t bit = 0; bit < bits; ++bit) {
    if (f.m[bit] == 0)
      continue;
    if (f.m[bit] == (int64_t(1) << bit)) {
      keep |= f.m[bit];
      continue;
    }
    Value t = arith::ShRUIOp::create(b, laneI32, i32(bit));
    t = arith::AndIOp::create(b, t, i32(1));
    acc = combine(acc, arith::MulIOp::create(b, t, i32(f.m[bit])));
  }
  if (keep)
    acc = combine(acc, arith::AndIOp::create(b, laneI32, i32(keep)));
  return acc;
}

bool LaneTileBuilder::isConstantTile(Value tile) {
  return constantTiles.count(tile.getAsOpaquePointer());
}

Value LaneTileBuilder::markConstant(Value tile) {
  if (tiles.count(tile.getAsOpaquePointer()))
    constantTiles.insert(tile.getAsOpaquePointer());
  return tile;
}

SmallVector<Value> LaneTileBuilder::convertLayout(Value tile,
                                                  const LaneLayout &to) {
  const Tile &src = tile_(tile);
  if (!error.empty())
    return SmallVector<Value>(to.regs.size(), constantF32(0.0));
  if (src.layout == to)
    return src.regs;
  // A tile of one constant (the zeros of a product with a stand-in
  // operand) is that constant in any layout: no shuffle, no exchange.
  if (isConstantTile(tile))
    return SmallVector<Value>(to.regs.size(), src.regs.front());
  std::string why;
  FailureOr<SmallVector<ConversionStep>> steps =
      planConversion(src.layout, to, warpSize, warps, why);
  if (failed(steps)) {
    if (std::optional<SmallVector<Value>> out = exchangeInWarp(src, to))
      return *out;
    fail(why, to.shape);
    return SmallVector<Value>(to.regs.size(), constantF32(0.0));
  }
  SmallVector<Value> out;
  for (const ConversionStep &step : *steps) {
    if (!step.from) {
      out.push_back(src.regs[step.srcReg]);
      continue;
    }
    Value width = arith::ConstantOp::create(b, b.getI32IntegerAttr(warpSize));
    out.push_back(gpu::ShuffleOp::create(b, src.regs[step.srcReg],
                                         laneIndexI32(*step.from), width,
                                         gpu::ShuffleMode::IDX)
                      .getResult(0));
  }
  return out;
}

std::optional<SmallVector<Value>>
LaneTileBuilder::exchangeInWarp(const Tile &src, const LaneLayout &to) {
  // Through the warp's own region of shared memory: every element's first
  // copy in the warp stores it, a warp barrier, every lane loads what it
  // needs, a warp barrier (the region's next use may not overwrite what a
  // lane still reads). Rows padded by one element against bank conflicts.
  // Only where each warp holds the same part of the tile in both layouts.
  const LaneLayout &from = src.layout;
  // A vector as the column [n, 1] (a gate's row, beta's rows).
  if (exchange && from.rank() == 1 && to.rank() == 1)
    return exchangeInWarp(Tile{from.unsqueezed(1), src.regs},
                          to.unsqueezed(1));
  if (!exchange || from.rank() != 2 || to.shape != from.shape ||
      from.warps != to.warps)
    return std::nullopt;
  auto type = cast<MemRefType>(exchange.getType());
  // Each warp's part at its own coordinates (the warp bases left out: the
  // parts are translations of warp 0's), rows of its extent.
  auto local = [](LaneLayout l) {
    for (LaneLayout::Coords &c : l.warps)
      c.assign(c.size(), 0);
    return l;
  };
  const LaneLayout fromL = local(from), toL = local(to);
  int64_t rows = 0, cols = 0;
  for (int64_t ln = 0; ln < fromL.numLanes(); ++ln)
    for (size_t r = 0; r < fromL.regs.size(); ++r) {
      LaneLayout::Coords c = fromL.at(r, ln, 0);
      rows = std::max(rows, c[0] + 1);
      cols = std::max(cols, c[1] + 1);
    }
  const int64_t perWarp = type.getDimSize(0) / warps;
  int64_t stride = cols + 1;
  if (rows * stride > perWarp)
    return std::nullopt;
  // Row i's columns may also be permuted, j -> j ^ swizzle(i) with
  // swizzle(i) = ((i >> shift) * mult) mod cols (cols a power of two: a
  // bijection of each row's columns), so that unpadded rows spread a
  // lane group's rows over the banks. shift < 0: none.
  int64_t shift = -1, mult = 0;
  auto swizzle = [&](int64_t i, int64_t sh, int64_t m) {
    return sh < 0 ? int64_t(0) : ((i >> sh) * m) & (cols - 1);
  };
  if (exchangeSearch) {
    // Shared memory wavefronts of the stores (from) and loads (to) at row
    // stride s and swizzle (sh, m): per register, the most distinct words
    // any bank serves (copies of an element read or write one word).
    auto wavefronts = [&](const LaneLayout &l, int64_t s, int64_t sh,
                          int64_t m) {
      int64_t total = 0;
      for (size_t r = 0; r < l.regs.size(); ++r) {
        std::map<int64_t, std::set<int64_t>> byBank;
        for (int64_t ln = 0; ln < l.numLanes(); ++ln) {
          LaneLayout::Coords c = l.at(r, ln, 0);
          const int64_t word = c[0] * s + (c[1] ^ swizzle(c[0], sh, m));
          byBank[word % 32].insert(word);
        }
        int64_t most = 1;
        for (auto &[bank, words] : byBank)
          most = std::max<int64_t>(most, words.size());
        total += most;
      }
      return total;
    };
    auto cost = [&](int64_t s, int64_t sh, int64_t m) {
      return wavefronts(fromL, s, sh, m) + wavefronts(toL, s, sh, m);
    };
    int64_t best = cost(stride, -1, 0);
    for (int64_t s = cols; s <= cols + 8; ++s) {
      if (s == cols + 1 || rows * s > perWarp)
        continue;
      const int64_t w = cost(s, -1, 0);
      if (w < best) {
        best = w;
        stride = s;
      }
    }
    // Swizzled unpadded rows, taken only where they beat every padding.
    if (exchangeSwizzle && llvm::isPowerOf2_64(cols) && cols > 1)
      for (int64_t sh = 0; sh < 4; ++sh)
        for (int64_t m = 1; m < cols; m += 2) {
          const int64_t w = cost(cols, sh, m);
          if (w < best) {
            best = w;
            stride = cols;
            shift = sh;
            mult = m;
          }
        }
  }
  auto at = [&](const LaneLayout &l, int64_t r) -> Value {
    Value i = coordinate(l, r, 0), j = coordinate(l, r, 1);
    if (shift >= 0) {
      Value key = arith::AndIOp::create(
          b,
          arith::MulIOp::create(
              b, arith::ShRUIOp::create(b, i, index(shift)), index(mult)),
          index(cols - 1));
      j = arith::XOrIOp::create(b, j, key);
    }
    Value e = arith::AddIOp::create(
        b, arith::MulIOp::create(b, i, index(stride)), j);
    return arith::AddIOp::create(
        b, arith::MulIOp::create(b, warp, index(perWarp)), e);
  };
  auto ifOp = scf::IfOp::create(b, holdsFirstCopyInWarp(from),
                                /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    for (size_t r = 0; r < from.regs.size(); ++r)
      memref::StoreOp::create(b, src.regs[r], exchange,
                              ValueRange{at(fromL, r)});
  }
  warpSync();
  SmallVector<Value> out;
  for (size_t r = 0; r < to.regs.size(); ++r)
    out.push_back(memref::LoadOp::create(b, exchange, ValueRange{at(toL, r)}));
  warpSync();
  return out;
}

Value LaneTileBuilder::filled(ArrayRef<int64_t> shape, double value) {
  if (!error.empty())
    return fail("", shape);
  Value c = constantF32(value);
  for (const LaneLayout &a : anchors)
    if (ArrayRef<int64_t>(a.shape) == shape)
      return markConstant(make(a, SmallVector<Value>(a.regs.size(), c)));
  if (numElements(shape) > 64)
    return fail("a fill of a large tile with no anchored layout", shape);
  LaneLayout l = LaneLayout::replicated(shape, log2Exact(warpSize),
                                        log2Exact(warps));
  return markConstant(make(l, SmallVector<Value>(l.regs.size(), c)));
}

Value LaneTileBuilder::map(ArrayRef<int64_t> shape,
                           ArrayRef<TileOperand> operands, MapBody body,
                           Type resultType) {
  if (!error.empty())
    return fail("", shape);
  if (resultType && !resultType.isF32())
    return fail("a map to another element type than f32", shape);
  // The result lives where the first full operand does, one that is not
  // a constant (a product of a stand-in's zeros: any layout holds it, and
  // the operands that vary would be moved to its layout for nothing).
  std::optional<LaneLayout> layout;
  for (const TileOperand &op : operands)
    if (op.broadcast == Broadcast::None) {
      if (!tiles.count(op.value.getAsOpaquePointer()))
        return fail("a map of a value that is not a lane tile", shape);
      const bool constant = isConstantTile(op.value);
      if (!layout || !constant)
        layout = tile_(op.value).layout;
      if (!constant)
        break;
    }
  if (!layout) {
    for (const LaneLayout &a : anchors)
      if (ArrayRef<int64_t>(a.shape) == shape)
        layout = a;
    // [1, N] from an [N] operand read per column ([M, 1] from one read
    // per row): where that vector lives (the adjoint's sums of a vector).
    if (!layout && shape.size() == 2 && (shape[0] == 1 || shape[1] == 1))
      for (const TileOperand &op : operands) {
        const bool alongRows = op.broadcast == Broadcast::AlongRows;
        if (!tiles.count(op.value.getAsOpaquePointer()) ||
            (alongRows ? shape[0] : shape[1]) != 1)
          continue;
        const LaneLayout &v = tile_(op.value).layout;
        if (v.rank() == 1)
          layout = v.unsqueezed(alongRows ? 0 : 1);
        break;
      }
    if (!layout) {
      if (numElements(shape) > 64)
        return fail("a map of only broadcasts to a large tile", shape);
      layout = LaneLayout::replicated(shape, log2Exact(warpSize),
                                      log2Exact(warps));
    }
  }
  if (ArrayRef<int64_t>(layout->shape) != shape)
    return fail("a map whose operand has another shape than its result",
                shape);
  const int64_t n = layout->regs.size();
  // Each operand's registers, indexed by the result's register.
  SmallVector<SmallVector<Value>> held;
  SmallVector<SmallVector<int64_t>> regOf;
  held.reserve(operands.size());
  regOf.reserve(operands.size());
  for (const TileOperand &op : operands) {
    regOf.emplace_back();
    if (op.broadcast == Broadcast::None) {
      held.push_back(convertLayout(op.value, *layout));
      for (int64_t r = 0; r < n; ++r)
        regOf.back().push_back(r);
      continue;
    }
    int64_t dim = op.broadcast == Broadcast::AlongColumns ? 0 : shape.size() - 1;
    LaneLayout s = layout->slice(dim, &regOf.back());
    held.push_back(convertLayout(op.value, s));
  }
  SmallVector<Value> out;
  for (int64_t r = 0; r < n; ++r) {
    SmallVector<Value> scalars, ivs;
    for (size_t i = 0; i < operands.size(); ++i)
      scalars.push_back(held[i][regOf[i][r]]);
    for (int64_t d = 0; d < int64_t(shape.size()); ++d)
      ivs.push_back(coordinate(*layout, r, d));
    out.push_back(body(b, scalars, ivs));
  }
  return make(*layout, out);
}

Value LaneTileBuilder::reduce(Value tile, int64_t dim, bool isMax) {
  const Tile &t = tile_(tile);
  const LaneLayout &l = t.layout;
  const int64_t keep = l.rank() == 2 ? 1 - dim : -1;
  SmallVector<int64_t> resultShape =
      keep >= 0 ? SmallVector<int64_t>{l.shape[keep]} : SmallVector<int64_t>{1};
  if (!error.empty())
    return fail("", resultShape);
  auto combine = [&](Value x, Value y) -> Value {
    return isMax ? Value(arith::MaximumFOp::create(b, x, y))
                 : Value(arith::AddFOp::create(b, x, y));
  };
  LaneLayout out;
  out.shape.assign(resultShape.begin(), resultShape.end());
  SmallVector<Value> acc;
  std::map<int64_t, int64_t> group;
  for (int64_t r = 0; r < int64_t(l.regs.size()); ++r) {
    int64_t key = keep >= 0 ? l.regs[r][keep] : 0;
    auto [it, fresh] = group.try_emplace(key, acc.size());
    if (fresh) {
      out.regs.push_back({key});
      acc.push_back(t.regs[r]);
    } else {
      acc[it->second] = combine(acc[it->second], t.regs[r]);
    }
  }
  Value width = arith::ConstantOp::create(b, b.getI32IntegerAttr(warpSize));
  for (auto [bit, basis] : llvm::enumerate(l.lanes)) {
    out.lanes.push_back({keep >= 0 ? basis[keep] : 0});
    if (basis[dim] == 0)
      continue;
    if (keep >= 0 && basis[keep] != 0)
      return fail("a reduction over lanes that also split the kept dimension",
                  resultShape);
    Value offset =
        arith::ConstantOp::create(b, b.getI32IntegerAttr(int64_t(1) << bit));
    for (Value &a : acc)
      a = combine(a, gpu::ShuffleOp::create(b, a, offset, width,
                                            gpu::ShuffleMode::XOR)
                         .getResult(0));
  }
  // Warps along the reduced dimension: each holds a partial sum of the
  // same (lane, register) elements, summed in shared memory (crossWarpSum);
  // every warp then holds the total, a copy.
  bool acrossWarps = false;
  for (const LaneLayout::Coords &basis : l.warps) {
    if (basis[dim] != 0) {
      if (isMax || (keep >= 0 && basis[keep] != 0))
        return fail("a reduction across warps other than a sum over the "
                    "reduced dimension alone",
                    resultShape);
      acrossWarps = true;
    }
    out.warps.push_back({keep >= 0 && basis[dim] == 0 ? basis[keep] : 0});
  }
  if (acrossWarps) {
    acc = crossWarpSum(acc);
    if (!error.empty())
      return fail("", resultShape);
  }
  return make(out, acc);
}

Value LaneTileBuilder::rowSum(Value a) {
  if (shape(a).size() != 2)
    return fail("a row sum of a tile that is not 2-D", {1});
  return reduce(a, 1, false);
}

Value LaneTileBuilder::rowMax(Value a) {
  if (shape(a).size() != 2)
    return fail("a row max of a tile that is not 2-D", {1});
  return reduce(a, 1, true);
}

bool LaneTileBuilder::onAmdUnit(Value a, Value bTile, bool transA,
                                bool transB) {
  if (unit == MatrixUnit::MmaSync || !mmaType || !error.empty())
    return false;
  SmallVector<int64_t> sa = shape(a), sb = shape(bTile);
  if (sa.size() != 2 || sb.size() != 2)
    return false;
  // A shared operand is read by the unit's product; two distributed tiles
  // go there where no side is a vector (those keep matmul's shuffle forms).
  if (shared.count(a.getAsOpaquePointer()) ||
      shared.count(bTile.getAsOpaquePointer()))
    return true;
  const int64_t M = transA ? sa[1] : sa[0], K = transA ? sa[0] : sa[1],
                N = transB ? sb[0] : sb[1];
  return M > 1 && K > 1 && N > 1;
}

bool LaneTileBuilder::runsTransposed(Value a, Value bTile, bool transB) {
  // Only on mma.sync (AMD's units run every product as it is written:
  // unitProduct), and op(b) must be a distributed tile.
  if (!mmaType || unit != MatrixUnit::MmaSync ||
      shared.count(bTile.getAsOpaquePointer()) ||
      !inRegisters(bTile) || !error.empty())
    return false;
  LaneLayout opB = tile_(bTile).layout;
  if (opB.rank() != 2)
    return false;
  if (transB)
    opB = opB.transposed();
  // op(b) split over the warps by its columns (C^T's rows: the state split
  // by V) or by its rows (the contracted index of C^T: the state split by
  // K, partial products summed across warps), not both.
  bool onRows = false, onCols = false;
  for (const LaneLayout::Coords &w : opB.warps) {
    onRows |= w[0] != 0;
    onCols |= w[1] != 0;
  }
  if (onRows && onCols)
    return false;
  if (auto sh = shared.find(a.getAsOpaquePointer()); sh != shared.end())
    return !sh->second.address;
  if (!inRegisters(a))
    return false;
  // A copy times op(b) split by columns: C split by columns in the
  // accumulator's layout (mmaProduct's split by columns) where asked.
  if (columnSplits && onCols)
    return false;
  // Products with a vector side keep their shuffle forms (matmul).
  const LaneLayout &al = tile_(a).layout;
  if (al.rank() != 2 || al.shape[0] == 1 || al.shape[1] == 1 ||
      opB.shape[1] == 1)
    return false;
  for (const LaneLayout::Coords &w : al.warps)
    if (w[0] != 0 || w[1] != 0)
      return false;
  return true;
}

Value LaneTileBuilder::transposedProduct(Value a, Value bTile, bool transA,
                                         bool transB, Value acc) {
  // C = op(a) op(b) as C^T = op(b)^T op(a)^T: op(b)^T is the matrix
  // instruction's A operand, with its rows (op(b)'s columns) over the warps;
  // op(a)^T is its B operand, from shared memory or a copy in every warp.
  SmallVector<int64_t> sa = shape(a), sb = shape(bTile);
  const int64_t M = transA ? sa[1] : sa[0], K = transA ? sa[0] : sa[1],
                N = transB ? sb[0] : sb[1];
  if ((transB ? sb[1] : sb[0]) != K)
    return fail("a product whose inner dimensions differ", {M, N});
  const Tile &B = tile_(bTile);
  Value aT = make(transB ? B.layout : B.layout.transposed(), B.regs);
  Value bT = a;
  bool bTransposed = !transA; // B' = T^T reads a shared T's rows as they are
  if (!shared.count(a.getAsOpaquePointer())) {
    const Tile &A = tile_(a);
    bT = make(transA ? A.layout : A.layout.transposed(), A.regs);
    bTransposed = false;
  }
  Value init;
  if (acc) {
    const Tile &C = tile_(acc);
    init = make(C.layout.transposed(), C.regs);
  }
  Value t = mmaProduct(aT, bT, bTransposed, N, K, M, init);
  if (!error.empty())
    return fail("", {M, N});
  return transpose(t);
}

Value LaneTileBuilder::amdProduct(Value a, bool transA, Value bTile,
                                  bool transB, Value acc) {
  if (!sharedTransposed || !shared.count(bTile.getAsOpaquePointer()))
    return unitProduct(a, transA, bTile, transB, acc);
  // C^T = op(b)^T op(a)^T (+ acc^T).
  Value init;
  if (acc) {
    const Tile &C = tile_(acc);
    init = make(C.layout.transposed(), C.regs);
  }
  return transpose(unitProduct(bTile, !transB, a, !transA, init));
}

Value LaneTileBuilder::matmulAdd(Value acc, Value a, Value bTile, bool transA,
                                 bool transB) {
  // A product on the matrix instruction adds to the accumulator in place;
  // every other product is a product and a sum.
  if (onAmdUnit(a, bTile, transA, transB))
    return amdProduct(a, transA, bTile, transB, acc);
  a = inRegistersView(a);
  if (!mmaType || !mmaType.isF32() || transA)
    bTile = inRegistersView(bTile);
  if (runsTransposed(a, bTile, transB))
    return transposedProduct(a, bTile, transA, transB, acc);
  SmallVector<int64_t> sa = shape(a), sb = shape(bTile);
  if (!transA && sa.size() == 2 && sb.size() == 2 &&
      shared.count(bTile.getAsOpaquePointer()) &&
      !shared.count(a.getAsOpaquePointer())) {
    const int64_t M = sa[0], K = sa[1], N = transB ? sb[0] : sb[1];
    if ((transB ? sb[1] : sb[0]) != K)
      return fail("a product whose inner dimensions differ", {M, N});
    return mmaProduct(a, bTile, transB, M, K, N, acc);
  }
  return TileBuilder::matmulAdd(acc, a, bTile, transA, transB);
}

Value LaneTileBuilder::matmul(Value a, Value bTile, bool transA, bool transB) {
  if (onAmdUnit(a, bTile, transA, transB))
    return amdProduct(a, transA, bTile, transB, {});
  // A parked tile is B straight from shared memory (f32 products only);
  // anywhere else its registers are read back.
  a = inRegistersView(a);
  if (!mmaType || !mmaType.isF32() || transA)
    bTile = inRegistersView(bTile);
  SmallVector<int64_t> sa = shape(a), sb = shape(bTile);
  if (sa.size() != 2 || sb.size() != 2)
    return fail("a product of tiles that are not 2-D", {1, 1});
  if (runsTransposed(a, bTile, transB))
    return transposedProduct(a, bTile, transA, transB, {});
  if (shared.count(bTile.getAsOpaquePointer()) ||
      shared.count(a.getAsOpaquePointer())) {
    const int64_t M = transA ? sa[1] : sa[0], K = transA ? sa[0] : sa[1],
                  N = transB ? sb[0] : sb[1];
    auto shA = shared.find(a.getAsOpaquePointer());
    if (transA || (shA != shared.end() && !shA->second.address))
      return fail("a product whose A operand is transposed or in shared "
                  "memory other than the 128-byte swizzle",
                  {M, N});
    if ((transB ? sb[1] : sb[0]) != K)
      return fail("a product whose inner dimensions differ", {M, N});
    return mmaProduct(a, bTile, transB, M, K, N);
  }
  Tile A = tile_(a), B = tile_(bTile);
  if (transA)
    A.layout = A.layout.transposed();
  if (transB)
    B.layout = B.layout.transposed();
  const int64_t M = A.layout.shape[0], K = A.layout.shape[1],
                N = B.layout.shape[1];
  if (!error.empty())
    return fail("", {M, N});
  if (B.layout.shape[0] != K)
    return fail("a product whose inner dimensions differ", {M, N});
  // Views of the operands as tiles of their own (transposed layouts).
  Value av = make(A.layout, A.regs), bv = make(B.layout, B.regs);
  auto scalarOf = [&](Value t) {
    LaneLayout one = LaneLayout::replicated(shape(t), log2Exact(warpSize),
                                            log2Exact(warps));
    return convertLayout(t, one)[0];
  };
  auto times = [&](Value s, const Tile &t) {
    SmallVector<Value> out;
    for (Value x : t.regs)
      out.push_back(arith::MulFOp::create(b, s, x));
    return make(t.layout, out);
  };
  if (K == 1) {
    // Outer products.
    if (M == 1)
      return times(scalarOf(av), B);
    if (N == 1)
      return times(scalarOf(bv), A);
    const LaneLayout *target = nullptr;
    for (const LaneLayout &l : anchors)
      if (l.shape == SmallVector<int64_t, 2>{M, N})
        target = &l;
    if (!target)
      return fail("an outer product with no anchored layout for its result",
                  {M, N});
    LaneLayout result = *target;
    SmallVector<int64_t> rowOf, colOf;
    LaneLayout rows = result.slice(0, &rowOf), cols = result.slice(1, &colOf);
    SmallVector<Value> x =
        convertLayout(make(A.layout.squeezed(1), A.regs), rows);
    SmallVector<Value> y =
        convertLayout(make(B.layout.squeezed(0), B.regs), cols);
    SmallVector<Value> out;
    for (int64_t r = 0; r < int64_t(result.regs.size()); ++r)
      out.push_back(arith::MulFOp::create(b, x[rowOf[r]], y[colOf[r]]));
    return make(result, out);
  }
  if (M == 1 && N == 1) {
    // A dot product: both vectors where the second one lives.
    Value y = make(B.layout.squeezed(1), B.regs);
    LaneLayout yl = tile_(y).layout;
    SmallVector<Value> yr = tile_(y).regs;
    SmallVector<Value> x = convertLayout(make(A.layout.squeezed(0), A.regs), yl);
    if (!error.empty())
      return fail("", {1, 1});
    SmallVector<Value> prod;
    for (auto [xi, yi] : llvm::zip(x, yr))
      prod.push_back(arith::MulFOp::create(b, xi, yi));
    Value summed = reduce(make(yl, prod), 0, false);
    if (!error.empty())
      return fail("", {1, 1});
    return make(tile_(summed).layout.unsqueezed(1), tile_(summed).regs);
  }
  if (M == 1) {
    // A row vector times a distributed matrix: the vector where the
    // matrix's rows live, multiply-accumulate per column, then the lanes
    // along K.
    SmallVector<int64_t> rowOf;
    LaneLayout rows = B.layout.slice(0, &rowOf);
    SmallVector<Value> x =
        convertLayout(make(A.layout.squeezed(0), A.regs), rows);
    if (!error.empty())
      return fail("", {1, N});
    LaneLayout out;
    out.shape = {N};
    SmallVector<Value> acc;
    std::map<int64_t, int64_t> group;
    for (int64_t r = 0; r < int64_t(B.regs.size()); ++r) {
      int64_t col = B.layout.regs[r][1];
      auto [it, fresh] = group.try_emplace(col, acc.size());
      if (fresh) {
        out.regs.push_back({col});
        acc.push_back(arith::MulFOp::create(b, x[rowOf[r]], B.regs[r]));
      } else {
        acc[it->second] =
            math::FmaOp::create(b, x[rowOf[r]], B.regs[r], acc[it->second]);
      }
    }
    Value width = arith::ConstantOp::create(b, b.getI32IntegerAttr(warpSize));
    for (auto [bit, basis] : llvm::enumerate(B.layout.lanes)) {
      out.lanes.push_back({basis[1]});
      if (basis[0] == 0)
        continue;
      if (basis[1] != 0)
        return fail("a product whose matrix splits rows and columns over the "
                    "same lane bit",
                    {1, N});
      Value offset =
          arith::ConstantOp::create(b, b.getI32IntegerAttr(int64_t(1) << bit));
      for (Value &v : acc)
        v = arith::AddFOp::create(
            b, v,
            gpu::ShuffleOp::create(b, v, offset, width, gpu::ShuffleMode::XOR)
                .getResult(0));
    }
    for (const LaneLayout::Coords &basis : B.layout.warps) {
      if (basis[0] != 0)
        return fail("a product that sums across warps (it would need shared "
                    "memory)",
                    {1, N});
      out.warps.push_back({basis[1]});
    }
    return make(out.unsqueezed(0), acc);
  }
  if (N == 1) {
    // (B^T A^T)^T.
    Value t = matmul(bv, av, /*transA=*/true, /*transB=*/true);
    return transpose(t);
  }
  // A transposed A operand (the adjoint's A^T dC): its registers relabeled
  // (av), which the product converts to its fragments like any A.
  return mmaProduct(transA ? av : a, bTile, transB, M, K, N);
}

//===----------------------------------------------------------------------===//
// Products on the matrix instruction
//===----------------------------------------------------------------------===//

namespace {
/// The lane and warp bases the accumulator and the A operand share: lane
/// l = 4 g + t holds rows g (+ 8) and columns 2 t (+ 1) of each 16-row
/// tile; warps take blocks of `perWarp` rows.
void mmaRowsOverWarps(LaneLayout &l, int64_t perWarp, int64_t warps) {
  l.lanes = {{0, 2}, {0, 4}, {1, 0}, {2, 0}, {4, 0}};
  for (int64_t w = 1; w < warps; w *= 2)
    l.warps.push_back({perWarp * w, 0});
}
} // namespace

LaneLayout LaneTileBuilder::mmaAccumulator(int64_t rows, int64_t cols,
                                           int64_t warps) {
  LaneLayout l;
  l.shape = {rows, cols};
  const int64_t perWarp = rows / warps;
  for (int64_t mt = 0; mt < perWarp / 16; ++mt)
    for (int64_t nt = 0; nt < cols / 8; ++nt)
      for (int64_t e = 0; e < 4; ++e)
        l.regs.push_back({16 * mt + 8 * (e / 2), 8 * nt + e % 2});
  mmaRowsOverWarps(l, perWarp, warps);
  return l;
}

LaneLayout LaneTileBuilder::mmaOperandA(int64_t rows, int64_t k,
                                        int64_t warps) {
  LaneLayout l;
  l.shape = {rows, k};
  const int64_t perWarp = rows / warps;
  // a0 a1: row g, columns 2 t (+ 1); a2 a3: row g + 8; a4..a7: the same
  // eight columns on.
  for (int64_t mt = 0; mt < perWarp / 16; ++mt)
    for (int64_t kt = 0; kt < k / 16; ++kt)
      for (int64_t e = 0; e < 8; ++e)
        l.regs.push_back(
            {16 * mt + 8 * ((e / 2) % 2), 16 * kt + 8 * (e / 4) + e % 2});
  mmaRowsOverWarps(l, perWarp, warps);
  return l;
}

LaneLayout LaneTileBuilder::rowBlocked(int64_t cols, int64_t warpSize,
                                       int64_t warps) {
  const int64_t halves = 64 / warpSize, perWarp = cols / warps,
                perLane = perWarp / 4;
  LaneLayout l;
  l.shape = {16, cols};
  for (int64_t h = 0; h < halves; ++h)
    for (int64_t c = 0; c < perLane; ++c)
      l.regs.push_back({8 * h, c});
  l.lanes = {{0, perLane}, {0, 2 * perLane}, {1, 0}, {2, 0}, {4, 0}};
  if (halves == 1)
    l.lanes.push_back({8, 0});
  for (int64_t w = 1; w < warps; w *= 2)
    l.warps.push_back({0, perWarp * w});
  return l;
}

LaneLayout LaneTileBuilder::mmaOperandB(int64_t k, int64_t cols,
                                        int64_t warps) {
  LaneLayout l;
  l.shape = {k, cols};
  // b0 b1: rows 2 t (+ 1), column g; b2 b3: rows 2 t + 8 (+ 1).
  for (int64_t kt = 0; kt < k / 16; ++kt)
    for (int64_t nt = 0; nt < cols / 8; ++nt)
      for (int64_t e = 0; e < 4; ++e)
        l.regs.push_back({16 * kt + 8 * (e / 2) + e % 2, 8 * nt});
  l.lanes = {{2, 0}, {4, 0}, {0, 1}, {0, 2}, {0, 4}};
  for (int64_t w = 1; w < warps; w *= 2)
    l.warps.push_back({0, 0});
  return l;
}

Value LaneTileBuilder::makeShared(Value buffer, ValueRange prefix,
                                  ArrayRef<int64_t> shape) {
  return sharedHandle(SharedTile{buffer, SmallVector<Value>(prefix),
                                 SmallVector<int64_t, 2>(shape), Value()});
}

Value LaneTileBuilder::makeSharedTransposed(Value buffer, ValueRange prefix,
                                            ArrayRef<int64_t> shape) {
  if (unit == MatrixUnit::MmaSync)
    return fail("a shared tile stored transposed outside AMD's unit "
                "products",
                shape);
  SharedTile t{buffer, SmallVector<Value>(prefix),
               SmallVector<int64_t, 2>(shape), Value()};
  t.storedTransposed = true;
  return sharedHandle(t);
}

Value LaneTileBuilder::sharedHandle(SharedTile tile) {
  Value zero = constantF32(0.0);
  Value handle = vector::FromElementsOp::create(
      b, VectorType::get({1}, f32()), ValueRange{zero});
  shared[handle.getAsOpaquePointer()] = std::move(tile);
  return handle;
}

Value LaneTileBuilder::makeSwizzledShared(Value address,
                                          ArrayRef<int64_t> shape) {
  return sharedHandle(
      SharedTile{Value(), {}, SmallVector<int64_t, 2>(shape), address});
}

Value LaneTileBuilder::swizzledOffset(ImplicitLocOpBuilder &b, Value row,
                                      Value col, int64_t rows) {
  // Column block col / 64 is a [rows][64] array; in it the 16-byte piece
  // p = (col % 64) / 8 of row r sits at piece p ^ (r % 8): the eight rows
  // of an 8 x 8 matrix fall in eight different bank groups, and it is the
  // 128-byte swizzle wgmma's descriptors name.
  auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, v); };
  Value block = arith::DivUIOp::create(b, col, c(64));
  Value inBlock = arith::RemUIOp::create(b, col, c(64));
  Value piece = arith::DivUIOp::create(b, inBlock, c(8));
  Value swz = arith::XOrIOp::create(b, piece,
                                    arith::RemUIOp::create(b, row, c(8)));
  Value at = arith::AddIOp::create(
      b, arith::MulIOp::create(b, block, c(rows * 64)),
      arith::AddIOp::create(b, arith::MulIOp::create(b, row, c(64)),
                            arith::MulIOp::create(b, swz, c(8))));
  return arith::AddIOp::create(b, at, arith::RemUIOp::create(b, inBlock, c(8)));
}

Value LaneTileBuilder::packPair(Value lo, Value hi) {
  auto half = [&](Value x) -> Value {
    return x.getType() == mmaType ? x
                                  : Value(arith::TruncFOp::create(b, mmaType, x));
  };
  Value pair = vector::FromElementsOp::create(
      b, VectorType::get({2}, mmaType), ValueRange{half(lo), half(hi)});
  return operandRegister(b, pair);
}

Value LaneTileBuilder::operandRegister(ImplicitLocOpBuilder &b, Value pair) {
  // NVVM's mma.sync takes f16 operands as vector<2xf16>, bf16 ones as i32.
  if (cast<VectorType>(pair.getType()).getElementType().isF16())
    return pair;
  Value word = vector::BitCastOp::create(
      b, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, word, ArrayRef<int64_t>{0});
}

bool LaneTileBuilder::relabeledOperands(Value a, Value bTile, bool transB,
                                        int64_t M, int64_t KW, int64_t N,
                                        SmallVector<Value> &aRegs,
                                        SmallVector<Value> &bRegs) {
  if (M != N || !inRegisters(a) ||
      !inRegisters(bTile) || warpSize != 32)
    return false;
  const LaneLayout &l = tile_(a).layout;
  // op(b)^T: the tile itself for B = T^T, its transposed view for B = T.
  const LaneLayout bT = transB ? tile_(bTile).layout
                               : tile_(bTile).layout.transposed();
  if (!(bT == l) || l.rank() != 2 || l.lanes.size() != 5)
    return false;
  // Rows: g = lane / 4 on lane bits 2..4, the rest on registers (16 mt +
  // 8 h); columns: lane bits 0 and 1 and registers, never the rows' bits;
  // warps on columns only.
  for (int64_t bit = 0; bit < 5; ++bit) {
    const LaneLayout::Coords &c = l.lanes[bit];
    if (bit < 2 ? c[0] != 0 : c != LaneLayout::Coords{int64_t(1) << (bit - 2), 0})
      return false;
  }
  for (const LaneLayout::Coords &c : l.warps)
    if (c[0] != 0)
      return false;
  // Per register row: the lane's columns, ascending (the same set in every
  // row, and a function of t alone by the lane bases above).
  std::map<int64_t, std::map<int64_t, Value>> byRow;
  for (auto [r, c] : llvm::enumerate(l.regs)) {
    if (c[0] % 8 != 0)
      return false;
    byRow[c[0]][c[1]] = tile_(a).regs[r];
  }
  if (int64_t(byRow.size()) != M / 8)
    return false;
  SmallVector<int64_t> cols;
  for (auto &[col, v] : byRow.begin()->second)
    cols.push_back(col);
  if (int64_t(cols.size()) * 4 != KW)
    return false;
  for (auto &[row, m] : byRow) {
    SmallVector<int64_t> here;
    for (auto &[col, v] : m)
      here.push_back(col);
    if (here != cols)
      return false;
  }
  auto regOf = [&](const Tile &t, int64_t row, int64_t slot) -> Value {
    const LaneLayout tl = &t == &tile_(a) || transB ? t.layout
                                                     : t.layout.transposed();
    for (auto [r, c] : llvm::enumerate(tl.regs))
      if (c[0] == row && c[1] == cols[slot])
        return t.regs[r];
    return {};
  };
  const Tile &ta = tile_(a), &tbt = tile_(bTile);
  const int64_t MT = M / 16, KT = KW / 16, NT = N / 8;
  // mma.sync m16n8k16 A a_i at (g + 8 ((i / 2) % 2), k slot i % 2 + 2 (i / 4))
  // and B b_i at (k slot i % 2 + 2 (i / 2), n = g): slot j of k step kt is
  // the lane's column cols[4 kt + j].
  for (int64_t mt = 0; mt < MT; ++mt)
    for (int64_t kt = 0; kt < KT; ++kt)
      for (int64_t i = 0; i < 8; ++i)
        aRegs.push_back(regOf(ta, 16 * mt + 8 * ((i / 2) % 2),
                              4 * kt + i % 2 + 2 * (i / 4)));
  for (int64_t kt = 0; kt < KT; ++kt)
    for (int64_t nt = 0; nt < NT; ++nt)
      for (int64_t i = 0; i < 4; ++i)
        bRegs.push_back(regOf(tbt, 8 * nt, 4 * kt + i % 2 + 2 * (i / 2)));
  return llvm::all_of(aRegs, [](Value v) { return bool(v); }) &&
         llvm::all_of(bRegs, [](Value v) { return bool(v); });
}

Value LaneTileBuilder::mmaProduct(Value a, Value bTile, bool transB, int64_t M,
                                  int64_t K, int64_t N, Value init) {
  if (!error.empty())
    return fail("", {M, N});
  if (!mmaType)
    return fail("a product of two distributed tiles (M, N, K > 1) without "
                "a matrix instruction (the strategy gives this kernel none)",
                {M, N});
  // How the block's warps share the product, from where its operands live:
  // rows of A (and C) over the warps; the contracted index over the warps
  // (A's columns: each warp multiplies its slice, and the partial products
  // meet in shared memory, crossWarpSum); C's columns over the warps (A a
  // copy in every warp, the accumulator `init` split by columns: each warp
  // computes its columns); or the whole product in every warp (A a copy
  // in every warp otherwise: the result a copy in every warp too, as the
  // elementwise maps around it expect).
  enum class Split { Rows, Contracted, Columns, Copies };
  Split split = Split::Rows;
  if (!shared.count(a.getAsOpaquePointer()) &&
      inRegisters(a)) {
    bool onRows = false, onCols = false;
    for (const LaneLayout::Coords &w : tile_(a).layout.warps) {
      onRows |= w[0] != 0;
      onCols |= w[1] != 0;
    }
    bool initOnCols = false;
    if (init && inRegisters(init))
      for (const LaneLayout::Coords &w : tile_(init).layout.warps)
        initOnCols |= w[1] != 0;
    // A distributed B operand (op(b) [K, N]) split over the warps by its
    // columns asks for a split by columns too.
    // (A parked B: as it was distributed.)
    bool bOnCols = false;
    if (const LaneLayout *bl = distribution(bTile))
      for (const LaneLayout::Coords &w : bl->warps)
        bOnCols |= w[transB ? 0 : 1] != 0;
    if (onRows && onCols)
      return fail("a product whose A operand splits rows and columns over "
                  "the warps",
                  {M, N});
    if (onCols)
      split = Split::Contracted;
    else if (!onRows && (initOnCols || bOnCols))
      split = Split::Columns;
    else if (!onRows && warps > 1)
      split = Split::Copies;
  }
  const int64_t rowWarps = split == Split::Rows ? warps : 1;
  const int64_t KW = split == Split::Contracted ? K / warps : K;
  const int64_t NWc = split == Split::Columns ? N / warps : N;
  if (warpSize != 32 || M % (16 * rowWarps) != 0 || KW % 16 != 0 ||
      K % warps != 0 || NWc % 8 != 0 || N % warps != 0)
    return fail("a product whose shape does not split into mma.sync "
                "m16n8k16 tiles over the block's warps",
                {M, N});
  // Layouts of A and of the accumulator for the split.
  LaneLayout aLayout = mmaOperandA(M, K, warps);
  LaneLayout accLayout = mmaAccumulator(M, N, warps);
  if (split == Split::Contracted) {
    aLayout = mmaOperandA(M, KW, 1).spread({M, K}, {0, KW}, warps);
    accLayout = mmaAccumulator(M, N, 1).spread({M, N}, {0, 0}, warps);
  } else if (split == Split::Columns) {
    aLayout = mmaOperandA(M, K, 1).spread({M, K}, {0, 0}, warps);
    accLayout = mmaAccumulator(M, NWc, 1).spread({M, N}, {0, NWc}, warps);
  } else if (split == Split::Copies) {
    aLayout = mmaOperandA(M, K, 1).spread({M, K}, {0, 0}, warps);
    accLayout = mmaAccumulator(M, N, 1).spread({M, N}, {0, 0}, warps);
  }
  // The warp's slice of the contracted index or of C's columns in B.
  Value kOff, nOff;
  if (split == Split::Contracted)
    kOff = arith::MulIOp::create(b, warp, index(KW));
  if (split == Split::Columns)
    nOff = arith::MulIOp::create(b, warp, index(NWc));
  // f32 operands: each m16n8k16 step runs as two m16n8k8 tf32 steps, each
  // 3xTF32 (a = hi + lo, a b ~ hi hi + hi lo + lo hi: fp32's 1e-4 bar), on
  // the same fragment layouts. The contracted index needs only a bijection
  // shared by A and B: tf32 step s takes the k16 fragment's columns
  // 2t + s and 2t + 8 + s as its k indices t and t + 4.
  const bool tf32x3 = mmaType.isF32();
  const int64_t MT = M / (16 * rowWarps), KT = KW / 16, NT = NWc / 8;
  // The accumulator `init` as the product adds to it: a copy in every warp
  // where the warps' partial products meet after the product.
  const LaneLayout initLayout =
      split == Split::Contracted
          ? mmaAccumulator(M, N, 1).spread({M, N}, {0, 0}, warps)
          : accLayout;
  // An operand of zeros (a reverse scan's stand-in state, which its
  // adjoint never reads): no product, the accumulator as it was, in its
  // own layout. (A product nothing reads is dead code anyway, but one
  // whose warps' partial sums meet in shared memory is not: stores and a
  // barrier; so is a conversion of the accumulator through shared memory.)
  auto zeros = [&](Value t) {
    auto it = tiles.find(t.getAsOpaquePointer());
    return !shared.count(t.getAsOpaquePointer()) &&
           !parked.count(t.getAsOpaquePointer()) && it != tiles.end() &&
           llvm::all_of(it->second.regs, [](Value r) {
             return matchPattern(r, m_AnyZeroFloat());
           });
  };
  if (zeros(a) || zeros(bTile)) {
    if (init) {
      Tile t = tile_(init); // (a copy: make adds to `tiles`)
      Value same = make(t.layout, t.regs);
      return isConstantTile(init) ? markConstant(same) : same;
    }
    return markConstant(make(
        accLayout,
        SmallVector<Value>(accLayout.regs.size(), constantF32(0.0))));
  }
  SmallVector<Value> initRegs;
  if (init)
    initRegs = convertLayout(init, initLayout);
  auto sh = shared.find(bTile.getAsOpaquePointer());
  auto shA = shared.find(a.getAsOpaquePointer());
  if (sh != shared.end() && !sh->second.address &&
      cast<MemRefType>(sh->second.buffer.getType()).getElementType() !=
          mmaType)
    return fail("a product whose B operand is a shared tile of another "
                "element type than the matrix instruction's operands",
                {M, N});
  // A parked B: the writes of other lanes and warps seen first.
  if (auto pk = parked.find(bTile.getAsOpaquePointer());
      pk != parked.end() && pk->second.stride &&
      barriers == pk->second.barriersAtPark) {
    if (warps > 1)
      barrier();
    else
      warpSync();
  }
  if (tf32x3 && ((sh != shared.end() && sh->second.address) ||
                 shA != shared.end()))
    return fail("a wgmma product of f32 operands (wgmma here takes 16-bit "
                "operands)",
                {M, N});
  if (split != Split::Rows &&
      ((sh != shared.end() && sh->second.address) || shA != shared.end()))
    return fail("a wgmma product split over the warps other than by rows",
                {M, N});
  if (shA != shared.end()) {
    // A read by wgmma from the swizzle too (its rows too many registers).
    if (sh == shared.end() || !sh->second.address || !shA->second.address)
      return fail("a product whose A operand is in shared memory and B is "
                  "not in the 128-byte swizzle",
                  {M, N});
    if (!error.empty())
      return fail("", {M, N});
    return wgmmaProduct({}, initRegs, sh->second, transB, M, K, N,
                        &shA->second);
  }
  // A and op(b)^T in one layout with mma.sync's rows (Q K^T with q and k
  // loaded alike): the contracted index is relabeled instead of moved. Any
  // bijection of it serves, as long as A and B share it, and the lanes that
  // hold a k fragment slot hold the same column in every row.
  SmallVector<Value> aRegs, bRegs;
  const bool relabeled = split != Split::Rows && split != Split::Columns &&
                         relabeledOperands(a, bTile, transB, M, KW, N, aRegs,
                                           bRegs);
  if (!relabeled)
    aRegs = convertLayout(a, aLayout);
  if (!error.empty())
    return fail("", {M, N});
  if (sh != shared.end() && sh->second.address)
    return wgmmaProduct(aRegs, initRegs, sh->second, transB, M, K, N);
  auto aFrag = [&](int64_t mt, int64_t kt) {
    SmallVector<Value, 8> f;
    const int64_t base = (mt * KT + kt) * 8;
    if (tf32x3) {
      // a0 .. a7 as they are; the tf32 steps pick theirs (below).
      f.append(aRegs.begin() + base, aRegs.begin() + base + 8);
      return f;
    }
    for (int64_t e = 0; e < 8; e += 2)
      f.push_back(packPair(aRegs[base + e], aRegs[base + e + 1]));
    return f;
  };
  // B fragments of one k step, [nt] (two 32-bit registers each), loaded
  // right before its products: the live operand registers stay one k step's.
  Value rowInMatrix, half, second;
  if (relabeled) {
    // bRegs are the fragments already.
  } else if (sh != shared.end()) {
    // ldmatrix: lane l gives the address of row l % 8 of matrix l / 8.
    rowInMatrix = arith::RemUIOp::create(b, lane, index(8));
    Value matrix = arith::DivUIOp::create(b, lane, index(8));
    half = arith::RemUIOp::create(b, matrix, index(2));
    second = arith::DivUIOp::create(b, matrix, index(2));
  } else {
    // A distributed B: converted within each warp to the fragments of the
    // warp's slice (its rows of the contracted index, or its columns).
    LaneLayout bl = mmaOperandB(K, N, warps);
    if (split == Split::Contracted)
      bl = mmaOperandB(KW, N, 1).spread({K, N}, {KW, 0}, warps);
    else if (split == Split::Columns)
      bl = mmaOperandB(K, NWc, 1).spread({K, N}, {0, NWc}, warps);
    bRegs = convertLayout(bTile, transB ? bl.transposed() : bl);
    if (!error.empty())
      return fail("", {M, N});
  }
  // 16-bit: two 32-bit registers of pairs per n tile; f32: b0 .. b3.
  auto bFrags = [&](int64_t kt) {
    SmallVector<SmallVector<Value, 4>> frag(NT);
    if (sh == shared.end()) {
      for (int64_t nt = 0; nt < NT; ++nt) {
        const int64_t base = (kt * NT + nt) * 4;
        if (tf32x3)
          frag[nt].assign(bRegs.begin() + base, bRegs.begin() + base + 4);
        else
          frag[nt] = {packPair(bRegs[base], bRegs[base + 1]),
                      packPair(bRegs[base + 2], bRegs[base + 3])};
      }
      return frag;
    }
    const SharedTile &t = sh->second;
    if (tf32x3) {
      // f32 in shared memory (no ldmatrix for 32-bit transposes): the
      // lane's elements (k 16 kt + 2 t + e % 2 + 8 (e / 2), n 8 nt + g) by
      // address; B = T^T reads T [N, K] rows, two consecutive k at once.
      Value g = arith::DivUIOp::create(b, lane, index(4));
      Value t2 = arith::MulIOp::create(
          b, arith::RemUIOp::create(b, lane, index(4)), index(2));
      auto f32Type = VectorType::get({2}, f32());
      for (int64_t nt = 0; nt < NT; ++nt) {
        Value n = arith::AddIOp::create(b, g, index(8 * nt));
        if (nOff)
          n = arith::AddIOp::create(b, n, nOff);
        for (int64_t h = 0; h < 2; ++h) {
          Value k = arith::AddIOp::create(b, t2, index(16 * kt + 8 * h));
          if (kOff)
            k = arith::AddIOp::create(b, k, kOff);
          // Element (i, j) of T: by prefix, or row-major (parked).
          auto at = [&](Value i, Value j) {
            SmallVector<Value> x(t.prefix);
            if (!t.stride) {
              x.append({i, j});
              return x;
            }
            x.push_back(rowMajorIndex(t.base, t.stride, i, j));
            return x;
          };
          if (transB) {
            Value pair = vector::LoadOp::create(b, f32Type, t.buffer, at(n, k));
            for (int64_t e = 0; e < 2; ++e)
              frag[nt].push_back(vector::ExtractOp::create(
                  b, pair, ArrayRef<int64_t>{e}));
            continue;
          }
          for (int64_t e = 0; e < 2; ++e)
            frag[nt].push_back(memref::LoadOp::create(
                b, t.buffer, at(arith::AddIOp::create(b, k, index(e)), n)));
        }
      }
      return frag;
    }
    // B = T^T (transB) reads T's rows as they are; B = T reads them
    // transposed (.trans). Four matrices per load: (kt, nt) and
    // (kt, nt + 1), each as its two 8-row halves of k.
    for (int64_t nt = 0; nt < NT; nt += 2) {
      const int64_t tiles = nt + 1 < NT ? 4 : 2;
      Value row, col;
      if (transB) {
        // T [N, K]: row 8 (nt + second) + r, column 16 kt + 8 half.
        row = arith::AddIOp::create(
            b,
            arith::MulIOp::create(
                b, arith::AddIOp::create(b, second, index(nt)), index(8)),
            rowInMatrix);
        col = arith::AddIOp::create(
            b, arith::MulIOp::create(b, half, index(8)), index(16 * kt));
      } else {
        // T [K, N]: row 16 kt + 8 half + r, column 8 (nt + second).
        row = arith::AddIOp::create(
            b,
            arith::AddIOp::create(b, arith::MulIOp::create(b, half, index(8)),
                                  rowInMatrix),
            index(16 * kt));
        col = arith::MulIOp::create(
            b, arith::AddIOp::create(b, second, index(nt)), index(8));
      }
      // The warp's slice (split by the contracted index or by columns).
      Value kAt = kOff, nAt = nOff;
      if (kAt)
        (transB ? col : row) = arith::AddIOp::create(b, transB ? col : row, kAt);
      if (nAt)
        (transB ? row : col) = arith::AddIOp::create(b, transB ? row : col, nAt);
      if (tiles == 2) {
        // Lanes 16..31 give addresses too (ignored): keep them in bounds.
        row = arith::RemUIOp::create(b, row, index(t.shape[0]));
        col = arith::RemUIOp::create(b, col, index(t.shape[1]));
      }
      SmallVector<Value> at(t.prefix);
      at.push_back(row);
      at.push_back(col);
      Value frags = nvgpu::LdMatrixOp::create(
          b, VectorType::get({tiles, 2}, mmaType), t.buffer, at,
          /*transpose=*/!transB, static_cast<uint32_t>(tiles));
      for (int64_t i = 0; i < tiles; ++i) {
        Value pair = vector::ExtractOp::create(b, frags, ArrayRef<int64_t>{i});
        frag[nt + i / 2].push_back(operandRegister(b, pair));
      }
    }
    return frag;
  };
  // acc[mt][nt] += A(mt, kt) B(kt, nt), kt outermost: the n tiles'
  // accumulators are independent chains.
  Type f32t = f32();
  auto accType = LLVM::LLVMStructType::getLiteral(
      b.getContext(), {f32t, f32t, f32t, f32t});
  const NVVM::MMATypes ptx =
      mmaType.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  Value zero = constantF32(0.0);
  SmallVector<SmallVector<std::array<Value, 4>>> acc(
      MT, SmallVector<std::array<Value, 4>>(NT, {zero, zero, zero, zero}));
  if (init && split != Split::Contracted)
    for (int64_t mt = 0; mt < MT; ++mt)
      for (int64_t nt = 0; nt < NT; ++nt)
        for (int64_t e = 0; e < 4; ++e)
          acc[mt][nt][e] = initRegs[(mt * NT + nt) * 4 + e];
  auto accVector = VectorType::get({2, 2}, f32t);
  for (int64_t kt = 0; kt < KT; ++kt) {
    SmallVector<SmallVector<Value, 4>> bf = bFrags(kt);
    for (int64_t mt = 0; mt < MT; ++mt) {
      SmallVector<Value, 8> af = aFrag(mt, kt);
      for (int64_t nt = 0; nt < NT; ++nt) {
        std::array<Value, 4> &c = acc[mt][nt];
        if (tf32x3) {
          Value cv = vector::FromElementsOp::create(
              b, accVector, ValueRange{c[0], c[1], c[2], c[3]});
          for (int64_t s = 0; s < 2; ++s)
            cv = emitMmaSyncTf32(
                b, b.getLoc(),
                ValueRange{af[s], af[2 + s], af[4 + s], af[6 + s]},
                ValueRange{bf[nt][s], bf[nt][2 + s]}, cv,
                precise3xTf32());
          for (int64_t e = 0; e < 4; ++e)
            c[e] = vector::ExtractOp::create(
                b, cv, ArrayRef<int64_t>{e / 2, e % 2});
          continue;
        }
        Value d = NVVM::MmaOp::create(
            b, accType, af, ValueRange{bf[nt][0], bf[nt][1]},
            ValueRange{c[0], c[1], c[2], c[3]}, ArrayRef<int64_t>{16, 8, 16},
            std::nullopt, std::nullopt,
            std::array<NVVM::MMATypes, 2>{ptx, ptx},
            std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                           NVVM::MMALayout::col});
        for (int64_t e = 0; e < 4; ++e)
          c[e] = LLVM::ExtractValueOp::create(b, d, ArrayRef<int64_t>{e});
      }
    }
  }
  SmallVector<Value> out;
  for (int64_t mt = 0; mt < MT; ++mt)
    for (int64_t nt = 0; nt < NT; ++nt)
      llvm::append_range(out, acc[mt][nt]);
  if (split == Split::Contracted) {
    // The warps' partial products, summed (then the accumulator added).
    out = crossWarpSum(out);
    if (!error.empty())
      return fail("", {M, N});
    if (init)
      for (auto [o, i] : llvm::zip(out, initRegs))
        o = arith::AddFOp::create(b, i, o);
  }
  return make(accLayout, out);
}

//===----------------------------------------------------------------------===//
// Products on AMD's matrix units
//===----------------------------------------------------------------------===//

// One 16 x 16 x 16 step of each unit, lane l of the wave (the ISA's
// register layouts, as lowering/common/GpuTileMatmuls.cpp states them):
//   MFMA 16x16x16 (wave64): A[l % 16][4 (l / 16) + e], B[4 (l / 16) + e][l % 16]
//     and C[4 (l / 16) + e][l % 16], e < 4: B's layout is C's.
//   WMMA 16x16x16 (wave32): A[l % 16][e] and B[e][l % 16], e < 16 (lanes
//     16..31 hold copies of lanes 0..15), C[2 e + l / 16][l % 16], e < 8.
// Tiled: registers in (row tile, column tile, e) order.

namespace {
/// [rows, cols] in 16 x 16 tiles, registers in (row tile, column tile, e)
/// order, register e of a tile at e x `step` from its corner, one lane bit
/// for each basis of `lanes`.
LaneLayout unitTiles(int64_t rows, int64_t cols, int64_t per,
                     LaneLayout::Coords step,
                     SmallVector<LaneLayout::Coords> lanes) {
  LaneLayout l;
  l.shape = {rows, cols};
  for (int64_t t0 = 0; t0 < rows / 16; ++t0)
    for (int64_t t1 = 0; t1 < cols / 16; ++t1)
      for (int64_t e = 0; e < per; ++e)
        l.regs.push_back({16 * t0 + step[0] * e, 16 * t1 + step[1] * e});
  l.lanes = std::move(lanes);
  return l;
}
} // namespace

LaneLayout LaneTileBuilder::unitAccumulator(MatrixUnit u, int64_t rows,
                                            int64_t cols) {
  if (u == MatrixUnit::MmaSync)
    return mmaAccumulator(rows, cols, 1);
  // Columns on lane bits 0..3; rows on the registers and the bits above.
  if (u == MatrixUnit::Mfma)
    return unitTiles(rows, cols, 4, {1, 0},
                     {{0, 1}, {0, 2}, {0, 4}, {0, 8}, {4, 0}, {8, 0}});
  return unitTiles(rows, cols, 8, {2, 0},
                   {{0, 1}, {0, 2}, {0, 4}, {0, 8}, {1, 0}});
}

LaneLayout LaneTileBuilder::unitOperandB(MatrixUnit u, int64_t k,
                                         int64_t cols) {
  if (u == MatrixUnit::MmaSync)
    return mmaOperandB(k, cols, 1);
  // MFMA: the accumulator's layout. WMMA: all 16 k a lane, lane bit 4 a
  // copy.
  if (u == MatrixUnit::Mfma)
    return unitAccumulator(u, k, cols);
  return unitTiles(k, cols, 16, {1, 0},
                   {{0, 1}, {0, 2}, {0, 4}, {0, 8}, {0, 0}});
}

LaneLayout LaneTileBuilder::unitOperandA(MatrixUnit u, int64_t rows,
                                         int64_t k) {
  if (u == MatrixUnit::MmaSync)
    return mmaOperandA(rows, k, 1);
  // B's layout transposed: rows on lane bits 0..3, k on the registers and
  // the bits above.
  if (u == MatrixUnit::Mfma)
    return unitTiles(rows, k, 4, {0, 1},
                     {{1, 0}, {2, 0}, {4, 0}, {8, 0}, {0, 4}, {0, 8}});
  return unitTiles(rows, k, 16, {0, 1},
                   {{1, 0}, {2, 0}, {4, 0}, {8, 0}, {0, 0}});
}

void LaneTileBuilder::warpSync() {
  // (The emulated unit runs on NVIDIA.)
  if (unit == MatrixUnit::MmaSync || emulateSteps) {
    NVVM::SyncWarpOp::create(
        b, arith::ConstantOp::create(b, b.getI32IntegerAttr(-1)));
    return;
  }
  // A wave's lanes run in lock step and its LDS accesses in order; the
  // fence keeps the compiler from moving them across.
  LLVM::FenceOp::create(b, LLVM::AtomicOrdering::acq_rel, "wavefront");
}

SmallVector<Value> LaneTileBuilder::readShared(const SharedTile &t,
                                               const LaneLayout &layout,
                                               bool transposed) {
  // A tile stored transposed: its element (i, j) at memory (j, i).
  transposed = transposed != t.storedTransposed;
  SmallVector<Value> regs;
  // AMD: registers that hold consecutive elements of a shared row (the
  // memory's last index: the layout's columns, its rows where transposed)
  // are read as one aligned vector, up to 16 bytes (MFMA's A and B
  // fragments: 4 consecutive k; WMMA's: 16), where the buffer's rows and
  // the lanes' and warps' offsets along the row keep the vector aligned.
  // (NVIDIA's shared f32 operands keep their element loads.)
  auto type = cast<MemRefType>(t.buffer.getType());
  Type elem = type.getElementType();
  const int64_t elemBytes = elem.getIntOrFloatBitWidth() / 8;
  const int64_t rowDim = transposed ? 0 : 1;
  int64_t most = 1;
  if (unit != MatrixUnit::MmaSync && type.hasStaticShape()) {
    most = 16 / elemBytes;
    const int64_t pitch = t.stride ? t.stride : type.getShape().back();
    auto fits = [&](int64_t v) { return v % most == 0; };
    while (most > 1 && !(fits(pitch) && fits(t.base)))
      most /= 2;
  }
  for (auto [r, len] : layout.vectorRuns(rowDim, most)) {
    Value i = coordinate(layout, r, 0), j = coordinate(layout, r, 1);
    if (transposed)
      std::swap(i, j);
    SmallVector<Value> at(t.prefix);
    if (t.stride)
      at.push_back(rowMajorIndex(t.base, t.stride, i, j));
    else
      at.append({i, j});
    SmallVector<Value> xs;
    if (len == 1) {
      xs.push_back(memref::LoadOp::create(b, t.buffer, at));
    } else {
      auto load = vector::LoadOp::create(b, VectorType::get({len}, elem),
                                         t.buffer, at);
      load.setAlignment(uint64_t(len * elemBytes));
      for (int64_t e = 0; e < len; ++e)
        xs.push_back(
            vector::ExtractOp::create(b, load, ArrayRef<int64_t>{e}));
    }
    for (Value x : xs)
      regs.push_back(x.getType().isF32()
                         ? x
                         : arith::ExtFOp::create(b, f32(), x).getResult());
  }
  return regs;
}

Value LaneTileBuilder::unitProduct(Value a, bool transA, Value bTile,
                                   bool transB, Value init) {
  a = inRegistersView(a);
  bTile = inRegistersView(bTile);
  SmallVector<int64_t> sa = shape(a), sb = shape(bTile);
  if (sa.size() != 2 || sb.size() != 2)
    return fail("a product of tiles that are not 2-D", {1, 1});
  const int64_t M = transA ? sa[1] : sa[0], K = transA ? sa[0] : sa[1],
                N = transB ? sb[0] : sb[1];
  if (!error.empty())
    return fail("", {M, N});
  if ((transB ? sb[1] : sb[0]) != K)
    return fail("a product whose inner dimensions differ", {M, N});
  if (!mmaType || !(mmaType.isF32() || mmaType.isBF16() || mmaType.isF16()))
    return fail("a product of two distributed tiles without a matrix "
                "instruction (the strategy gives this kernel none)",
                {M, N});
  auto shA = shared.find(a.getAsOpaquePointer());
  auto shB = shared.find(bTile.getAsOpaquePointer());
  if ((shA != shared.end() && shA->second.address) ||
      (shB != shared.end() && shB->second.address))
    return fail("a product of a swizzled shared tile (wgmma's) on AMD's "
                "matrix units",
                {M, N});
  // Where op(a), op(b) and the accumulator are distributed (none: a shared
  // tile, which any split reads).
  std::optional<LaneLayout> la, lb, li;
  if (shA == shared.end())
    la = transA ? tile_(a).layout.transposed() : tile_(a).layout;
  if (shB == shared.end())
    lb = transB ? tile_(bTile).layout.transposed() : tile_(bTile).layout;
  if (init)
    li = tile_(init).layout;
  auto over = [](const std::optional<LaneLayout> &l, int64_t dim) {
    return l && llvm::any_of(l->warps, [&](const LaneLayout::Coords &w) {
             return w[dim] != 0;
           });
  };
  const bool aRows = over(la, 0), aCols = over(la, 1), bRows = over(lb, 0),
             bCols = over(lb, 1), iRows = over(li, 0), iCols = over(li, 1);
  if ((aRows && aCols) || (bRows && bCols) || (iRows && iCols))
    return fail("a product whose operand splits rows and columns over the "
                "warps",
                {M, N});
  // The contracted index over the warps where an operand splits it (partial
  // products summed across warps), else C's rows or columns as A, B or the
  // accumulator split them, else the whole product in every warp.
  enum class Split { Rows, Contracted, Columns, Copies };
  const Split split = aCols || bRows          ? Split::Contracted
                      : aRows || iRows        ? Split::Rows
                      : bCols || iCols        ? Split::Columns
                                              : Split::Copies;
  const int64_t rowW = split == Split::Rows ? warps : 1,
                kW = split == Split::Contracted ? warps : 1,
                colW = split == Split::Columns ? warps : 1;
  if (M % (16 * rowW) != 0 || K % (16 * kW) != 0 || N % (16 * colW) != 0)
    return fail("a product whose shape does not split into 16 x 16 x 16 "
                "matrix-unit steps over the block's warps",
                {M, N});
  const int64_t MW = M / rowW, KW = K / kW, NW = N / colW;
  const LaneLayout aL = unitOperandA(unit, MW, KW).spread(
      {M, K}, {split == Split::Rows ? MW : 0, split == Split::Contracted ? KW : 0},
      warps);
  const LaneLayout bL = unitOperandB(unit, KW, NW).spread(
      {K, N},
      {split == Split::Contracted ? KW : 0, split == Split::Columns ? NW : 0},
      warps);
  const LaneLayout accL = unitAccumulator(unit, MW, NW).spread(
      {M, N}, {split == Split::Rows ? MW : 0, split == Split::Columns ? NW : 0},
      warps);
  SmallVector<Value> initRegs;
  if (init)
    initRegs = convertLayout(init, accL);
  if (!error.empty())
    return fail("", {M, N});

  const bool mfma = unit == MatrixUnit::Mfma;
  const int64_t per = mfma ? 4 : 16, accPer = mfma ? 4 : 8;
  const int64_t MT = MW / 16, KT = KW / 16, NT = NW / 16;
  // An operand's fragments of k step kt, in its layout's register order
  // (A: (mt, e); B: (nt, e)), made right before that step's products: the
  // live operand registers stay one k step's (WMMA's operands hold every
  // element twice, and a whole converted state would spill).
  struct Operand {
    Value handle;
    const SharedTile *sharedTile = nullptr;
    bool trans = false;
    std::optional<LaneLayout> from; // distributed: where it is
    LaneLayout to;                  // the fragments' layout
    int64_t kDim = 0;               // the contracted dimension of `to`
    SmallVector<Value> whole;       // converted at once (where needed)
  };
  Operand opA{a, shA == shared.end() ? nullptr : &shA->second, transA, la, aL,
              1, {}};
  Operand opB{bTile, shB == shared.end() ? nullptr : &shB->second, transB, lb,
              bL, 0, {}};
  // The registers of `l` in k tile kt, as a layout of a 16-deep tile (k
  // shifted to it); none where lanes or warps move k past a tile.
  auto kPiece = [](const LaneLayout &l, int64_t d, int64_t kt,
                   SmallVectorImpl<int64_t> &regIdx)
      -> std::optional<LaneLayout> {
    int64_t span = 0;
    for (const LaneLayout::Coords &c : llvm::concat<const LaneLayout::Coords>(
             l.lanes, l.warps))
      span += c[d];
    LaneLayout p = l;
    p.shape[d] = 16;
    p.regs.clear();
    for (auto [r, c] : llvm::enumerate(l.regs)) {
      if (c[d] / 16 != kt)
        continue;
      if (c[d] % 16 + span >= 16)
        return std::nullopt;
      LaneLayout::Coords shifted = c;
      shifted[d] -= 16 * kt;
      p.regs.push_back(shifted);
      regIdx.push_back(r);
    }
    if (!p.check().empty())
      return std::nullopt;
    return p;
  };
  // `tile` >= 0: only the fragments of that row tile (A) of the k step.
  auto fragments = [&](Operand &op, int64_t kt,
                       int64_t tile = -1) -> SmallVector<Value> {
    // The fragments' registers of this k step (their order kept).
    LaneLayout sub = op.to;
    sub.regs.clear();
    SmallVector<int64_t> toIdx;
    for (auto [r, c] : llvm::enumerate(op.to.regs))
      if (c[op.kDim] / 16 == kt && (tile < 0 || c[1 - op.kDim] / 16 == tile)) {
        sub.regs.push_back(c);
        toIdx.push_back(r);
      }
    if (op.sharedTile)
      return readShared(*op.sharedTile, sub, op.trans);
    if (!op.whole.empty()) {
      SmallVector<Value> regs;
      for (int64_t r : toIdx)
        regs.push_back(op.whole[r]);
      return regs;
    }
    const Tile &t = tile_(op.handle);
    if (*op.from == op.to) {
      SmallVector<Value> regs;
      for (int64_t r : toIdx)
        regs.push_back(t.regs[r]);
      return regs;
    }
    SmallVector<int64_t> fromIdx, unused;
    std::optional<LaneLayout> src = kPiece(*op.from, op.kDim, kt, fromIdx);
    std::optional<LaneLayout> dst = kPiece(op.to, op.kDim, kt, unused);
    if (src && dst &&
        conversionRefusal(*src, *dst, warpSize, warps).empty()) {
      SmallVector<Value> regs;
      for (int64_t r : fromIdx)
        regs.push_back(t.regs[r]);
      return convertLayout(make(*src, regs), *dst);
    }
    // Otherwise the whole operand at once, kept for the other k steps.
    op.whole = convertLayout(make(*op.from, SmallVector<Value>(t.regs)), op.to);
    if (!error.empty())
      return SmallVector<Value>(toIdx.size(), constantF32(0.0));
    SmallVector<Value> regs;
    for (int64_t r : toIdx)
      regs.push_back(op.whole[r]);
    return regs;
  };
  Type f32t = f32(), bf16 = b.getBF16Type();
  auto accType = VectorType::get({accPer}, f32t);
  auto vec = [&](Type t, ArrayRef<Value> xs) -> Value {
    return vector::FromElementsOp::create(
        b, VectorType::get({int64_t(xs.size())}, t), xs);
  };
  auto narrow = [&](Type t, Value x) -> Value {
    return arith::TruncFOp::create(b, t, x);
  };
  // One 16 x 16 x 16 step: acc += A B with the fragments' f32 registers.
  auto step = [&](ArrayRef<Value> af, ArrayRef<Value> bf, Value acc) -> Value {
    if (emulateSteps) {
      // WMMA on 32 NVIDIA lanes: C[2 e + l / 16][l % 16] += sum over k of
      // A[2 e + l / 16][k] (row r's lane is r) B[k][l % 16] (this lane's).
      auto round = [&](Value x) -> Value {
        if (mmaType.isF32())
          return x;
        return arith::ExtFOp::create(b, f32t, narrow(mmaType, x));
      };
      Type i32 = b.getI32Type();
      Value half = arith::IndexCastOp::create(
          b, i32, arith::DivUIOp::create(b, lane, index(16)));
      Value width = arith::ConstantOp::create(b, b.getI32IntegerAttr(32));
      SmallVector<Value> c;
      for (int64_t e = 0; e < accPer; ++e) {
        Value src = arith::AddIOp::create(
            b, half, arith::ConstantOp::create(b, b.getI32IntegerAttr(2 * e)));
        Value sum = vector::ExtractOp::create(b, acc, ArrayRef<int64_t>{e});
        for (int64_t k = 0; k < 16; ++k) {
          Value x = gpu::ShuffleOp::create(b, round(af[k]), src, width,
                                           gpu::ShuffleMode::IDX)
                        .getResult(0);
          sum = math::FmaOp::create(b, x, round(bf[k]), sum);
        }
        c.push_back(sum);
      }
      return vec(f32t, c);
    }
    if (mfma && mmaType.isF32()) {
      // Four fp32 16x16x4 steps: step e takes register e of both, whose k
      // index 4 (l / 16) + e is the instruction's l / 16 (one bijection
      // of the contracted index for A and B).
      for (int64_t e = 0; e < 4; ++e)
        acc = amdgpu::MFMAOp::create(b, accType, 16, 16, 4, 1, af[e], bf[e],
                                     acc);
      return acc;
    }
    auto run = [&](Value x, Value y, Value c) -> Value {
      if (mfma)
        return amdgpu::MFMAOp::create(b, accType, 16, 16, 16, 1, x, y, c);
      return amdgpu::WMMAOp::create(b, accType, 16, 16, 16, x, y, c);
    };
    if (!mmaType.isF32()) {
      SmallVector<Value> x, y;
      for (Value v : af)
        x.push_back(narrow(mmaType, v));
      for (Value v : bf)
        y.push_back(narrow(mmaType, v));
      return run(vec(mmaType, x), vec(mmaType, y), acc);
    }
    // WMMA has no fp32 form: v = hi + lo with hi = bf16(v), lo = bf16(v -
    // hi); a b ~ lo_a hi_b + hi_a lo_b + hi_a hi_b (small terms first).
    auto split2 = [&](ArrayRef<Value> xs, SmallVector<Value> &hi,
                      SmallVector<Value> &lo) {
      for (Value v : xs) {
        Value h = narrow(bf16, v);
        hi.push_back(h);
        lo.push_back(narrow(
            bf16, arith::SubFOp::create(b, v, arith::ExtFOp::create(b, f32t, h))));
      }
    };
    SmallVector<Value> ah, al, bh, bl;
    split2(af, ah, al);
    split2(bf, bh, bl);
    acc = run(vec(bf16, al), vec(bf16, bh), acc);
    acc = run(vec(bf16, ah), vec(bf16, bl), acc);
    return run(vec(bf16, ah), vec(bf16, bh), acc);
  };
  Value zero = constantF32(0.0);
  SmallVector<Value> acc(MT * NT);
  for (int64_t t = 0; t < MT * NT; ++t) {
    SmallVector<Value> c(accPer, zero);
    if (init && split != Split::Contracted)
      c.assign(initRegs.begin() + t * accPer,
               initRegs.begin() + (t + 1) * accPer);
    acc[t] = vec(f32t, c);
  }
  // A shared A operand is read a row tile at a time (the decayed keys'
  // [K, C] of a state update are eight row tiles of one k step).
  for (int64_t kt = 0; kt < KT; ++kt) {
    SmallVector<Value> aRegs =
        opA.sharedTile ? SmallVector<Value>() : fragments(opA, kt);
    SmallVector<Value> bRegs = fragments(opB, kt);
    if (!error.empty())
      return fail("", {M, N});
    for (int64_t mt = 0; mt < MT; ++mt) {
      SmallVector<Value> aTile =
          opA.sharedTile
              ? fragments(opA, kt, mt)
              : SmallVector<Value>(ArrayRef<Value>(aRegs).slice(mt * per, per));
      for (int64_t nt = 0; nt < NT; ++nt)
        acc[mt * NT + nt] =
            step(aTile, ArrayRef<Value>(bRegs).slice(nt * per, per),
                 acc[mt * NT + nt]);
    }
  }
  SmallVector<Value> out;
  for (Value c : acc)
    for (int64_t e = 0; e < accPer; ++e)
      out.push_back(vector::ExtractOp::create(b, c, ArrayRef<int64_t>{e}));
  if (split == Split::Contracted) {
    // The warps' partial products, summed (then the accumulator added).
    out = crossWarpSum(out);
    if (!error.empty())
      return fail("", {M, N});
    if (init)
      for (auto [o, i] : llvm::zip(out, initRegs))
        o = arith::AddFOp::create(b, i, o);
  }
  return make(accL, out);
}

std::optional<LaneTileBuilder::PendingSum>
LaneTileBuilder::reserveSum(int64_t n) {
  const int64_t half = warps * n * warpSize;
  auto type = scratch ? dyn_cast<MemRefType>(scratch.getType()) : MemRefType();
  if (!type || type.getRank() != 1 || !type.getElementType().isF32() ||
      !type.hasStaticShape() || type.getDimSize(0) < half) {
    fail("a sum across warps without shared memory for it (the driver's "
         "useScratch: f32, warps x registers x lanes)",
         {1});
    return std::nullopt;
  }
  // Two halves, taken in turn, where the buffer holds two: a half is
  // written again only after the other half's barrier (or the barrier
  // every loop around the program keeps at its top: useScratch), so a sum
  // needs one barrier, not two.
  // The halves are the buffer's, whatever each sum's size: a sum of fewer
  // registers must not sit across the boundary where the next sum of more
  // registers begins (the racecheck hazard of sums of 2 then 8 registers).
  PendingSum p;
  p.n = n;
  const int64_t bufferHalf = type.getDimSize(0) / 2;
  p.twoHalves = bufferHalf >= half;
  p.base = p.twoHalves ? (scratchTurn++ % 2) * bufferHalf : 0;
  // A sum that needs the whole buffer writes the half a previous two-half
  // sum's readers may still read (they run on past that sum's barrier): a
  // barrier first (kda-run --emulate's race check found it: K = 32 f32 with
  // a softplus gate, a sum of 32 registers a lane after one of 16). After a
  // whole-buffer sum, whose readers a barrier closes, none is needed.
  if (!p.twoHalves && scratchReadsOpen)
    barrier();
  return p;
}

Value LaneTileBuilder::sumSlot(const PendingSum &p, Value w, int64_t r) {
  return sumSlot(p, w, index(r));
}

Value LaneTileBuilder::sumSlot(const PendingSum &p, Value w, Value r) {
  // Register r of lane l in warp w at ((w n + r) 32 + l): each warp writes
  // its partials, and every lane adds the warps' in warp order, so every
  // copy is the same sum.
  Value slot = arith::AddIOp::create(
      b, arith::MulIOp::create(b, w, index(p.n)), r);
  return arith::AddIOp::create(
      b, arith::MulIOp::create(b, slot, index(warpSize)),
      arith::AddIOp::create(b, lane, index(p.base)));
}

void LaneTileBuilder::depositSum(const PendingSum &p, int64_t r, Value v) {
  memref::StoreOp::create(b, v, scratch, ValueRange{sumSlot(p, warp, r)});
}

SmallVector<Value> LaneTileBuilder::collectSum(const PendingSum &p) {
  barrier();
  SmallVector<Value> out(p.n);
  if (scatterSums) {
    // Warp w adds register r's partials for r = w, w + warps, ... (in warp
    // order, as below) into warp 0's slot of r, which no other warp reads;
    // after a barrier every lane reads its registers' sums there.
    for (int64_t r0 = 0; r0 < p.n; r0 += warps) {
      Value r = arith::AddIOp::create(b, index(r0), warp);
      auto mine = scf::IfOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, r,
                                   index(p.n)),
          false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(mine.thenBlock());
      Value sum;
      for (int64_t w = 0; w < warps; ++w) {
        Value x = memref::LoadOp::create(b, scratch,
                                         ValueRange{sumSlot(p, index(w), r)});
        sum = sum ? Value(arith::AddFOp::create(b, sum, x)) : x;
      }
      memref::StoreOp::create(b, sum, scratch,
                              ValueRange{sumSlot(p, index(0), r)});
    }
    barrier();
    for (int64_t r = 0; r < p.n; ++r)
      out[r] = memref::LoadOp::create(b, scratch,
                                      ValueRange{sumSlot(p, index(0), r)});
    if (!p.twoHalves)
      barrier();
    scratchReadsOpen = p.twoHalves;
    return out;
  }
  for (int64_t r = 0; r < p.n; ++r) {
    Value sum;
    for (int64_t w = 0; w < warps; ++w) {
      Value x =
          memref::LoadOp::create(b, scratch, ValueRange{sumSlot(p, index(w), r)});
      sum = sum ? Value(arith::AddFOp::create(b, sum, x)) : x;
    }
    out[r] = sum;
  }
  // One half: the next sum may not overwrite it before every warp has read.
  if (!p.twoHalves)
    barrier();
  scratchReadsOpen = p.twoHalves;
  return out;
}

SmallVector<Value> LaneTileBuilder::crossWarpSum(ArrayRef<Value> regs) {
  SmallVector<Value> out(regs.begin(), regs.end());
  if (warps == 1)
    return out;
  std::optional<PendingSum> p = reserveSum(regs.size());
  if (!p)
    return out;
  for (auto [r, v] : llvm::enumerate(regs))
    depositSum(*p, r, v);
  return collectSum(*p);
}

Value LaneTileBuilder::wgmmaProduct(ArrayRef<Value> aRegs,
                                    SmallVector<Value> acc,
                                    const SharedTile &t, bool transB,
                                    int64_t M, int64_t K, int64_t N,
                                    const SharedTile *aTile) {
  // One warpgroup (4 warps) per 64 rows: warp w's 16 rows of mmaOperandA
  // and mmaAccumulator are rows 16 (w % 4) of its warpgroup's m64 tile,
  // with mma.sync's fragment layouts (PTX: wgmma register fragments).
  if (warpSize != 32 || warps % 4 != 0 || M != 16 * warps || K % 16 != 0 ||
      N % 8 != 0 || N > 256)
    return fail("a wgmma product whose shape is not one m64nNk16 per "
                "warpgroup (N a multiple of 8 up to 256)",
                {M, N});
  // T is [N, K] (transB, K-major) or [K, N] (N-major); its column blocks
  // of 64 are [rows][64] arrays of 128-byte rows.
  const int64_t rows = t.shape[0], cols = t.shape[1];
  if (cols % 64 != 0 || rows % 8 != 0 ||
      (transB ? (rows != N || cols != K) : (rows != K || cols != N)))
    return fail("a wgmma B operand whose shared tile is not in 64-column "
                "blocks of 8-row groups",
                {M, N});
  // An A operand in shared memory: [M, K] K-major in the same form.
  if (aTile && (aTile->shape[0] != M || aTile->shape[1] != K || K % 64 != 0))
    return fail("a wgmma A operand whose shared tile is not [M, K] in "
                "64-column blocks",
                {M, N});
  Type i32 = b.getI32Type(), i64 = b.getI64Type(), f32t = f32();
  auto c64 = [&](int64_t v) {
    return arith::ConstantOp::create(b, b.getI64IntegerAttr(v));
  };
  // Descriptor (PTX: matrix descriptor): start address >> 4 in bits 0..13,
  // leading byte offset >> 4 in 16..29, stride byte offset >> 4 in 32..45,
  // 128-byte swizzle (1) in 62..63. The stride is 8 rows of 128 bytes
  // either way; the leading offset is the next 64-column block for
  // N-major (unused K-major, where a k step stays in one block).
  const int64_t lbo = transB ? 16 : rows * 128, sbo = 1024;
  auto descriptor = [&](Value address, int64_t leading) -> Value {
    Value start = arith::ExtUIOp::create(
        b, i64,
        arith::ShRUIOp::create(
            b,
            arith::AndIOp::create(b, address,
                                  arith::ConstantOp::create(
                                      b, b.getI32IntegerAttr(0x3FFFF))),
            arith::ConstantOp::create(b, b.getI32IntegerAttr(4))));
    return arith::OrIOp::create(b, start,
                                c64(((leading >> 4) << 16) |
                                    ((sbo >> 4) << 32) | (int64_t(1) << 62)));
  };
  Value base = descriptor(t.address, lbo);
  // A from shared memory: each warpgroup's 64 rows, K-major.
  Value aBase;
  if (aTile) {
    Value group = arith::IndexCastUIOp::create(
        b, i32, arith::DivUIOp::create(b, warp, index(4)));
    aBase = descriptor(
        arith::AddIOp::create(
            b, aTile->address,
            arith::MulIOp::create(
                b, group,
                arith::ConstantOp::create(b, b.getI32IntegerAttr(64 * 128)))),
        16);
  }
  const int64_t KT = K / 16, regsOut = N / 2;
  if (acc.empty())
    acc.assign(regsOut, constantF32(0.0));
  // wgmma.mma_async with A from registers: D (+)= A B, issued for every k
  // step, then committed and waited for (the accumulators are read next).
  const char *ty = mmaType.isBF16() ? "bf16" : "f16";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "wgmma.mma_async.sync.aligned.m64n" << N << "k16.f32." << ty << "."
     << ty << " {";
  for (int64_t i = 0; i < regsOut; ++i)
    os << (i ? "," : "") << "$" << i;
  if (aTile)
    os << "}, $" << regsOut << ", $" << regsOut + 1 << ", 1, 1, 1, 0, "
       << (transB ? 0 : 1) << ";";
  else
    os << "}, {$" << regsOut << ",$" << regsOut + 1 << ",$" << regsOut + 2
       << ",$" << regsOut + 3 << "}, $" << regsOut + 4 << ", 1, 1, 1, "
       << (transB ? 0 : 1) << ";";
  std::string constraints;
  for (int64_t i = 0; i < regsOut; ++i)
    constraints += "=f,";
  constraints += aTile ? "l,l" : "r,r,r,r,l";
  for (int64_t i = 0; i < regsOut; ++i)
    constraints += "," + std::to_string(i);
  auto resultType = LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(regsOut, f32t));
  // Every k step's A registers and descriptor exist before the fence: a
  // register written between two wgmma makes ptxas fence them apart.
  SmallVector<SmallVector<Value>> stepOperands;
  for (int64_t kt = 0; kt < KT; ++kt) {
    SmallVector<Value> &operands = stepOperands.emplace_back();
    const int64_t abase = kt * 8;
    if (aTile)
      operands.push_back(arith::AddIOp::create(
          b, aBase,
          c64(((16 * kt / 64) * aTile->shape[0] * 128 + (16 * kt % 64) * 2) >>
              4)));
    for (int64_t e = 0; e < 8 && !aTile; e += 2) {
      Value reg = packPair(aRegs[abase + e], aRegs[abase + e + 1]);
      if (reg.getType() != i32)
        reg = vector::ExtractOp::create(
            b,
            vector::BitCastOp::create(b, VectorType::get({1}, i32), reg),
            ArrayRef<int64_t>{0});
      operands.push_back(reg);
    }
    // Byte offset of k step kt: K-major, 32 bytes along a 128-byte row
    // (the swizzle applies to the address bits); N-major, 16 rows down.
    const int64_t offset =
        transB ? (16 * kt / 64) * rows * 128 + (16 * kt % 64) * 2
               : kt * 16 * 128;
    operands.push_back(arith::AddIOp::create(b, base, c64(offset >> 4)));
  }
  NVVM::WgmmaFenceAlignedOp::create(b);
  for (int64_t kt = 0; kt < KT; ++kt) {
    SmallVector<Value> operands = stepOperands[kt];
    llvm::append_range(operands, acc);
    auto op = LLVM::InlineAsmOp::create(
        b, resultType, operands, text, constraints, /*has_side_effects=*/true,
        /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
        LLVM::AsmDialectAttr(), ArrayAttr());
    for (int64_t i = 0; i < regsOut; ++i)
      acc[i] = LLVM::ExtractValueOp::create(b, op.getResult(0),
                                            ArrayRef<int64_t>{i});
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b);
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
  return make(mmaAccumulator(M, N, warps), acc);
}

Value LaneTileBuilder::vecmat(Value x, Value a) {
  SmallVector<int64_t> sx = shape(x);
  if (sx.size() != 1)
    return fail("a vector-matrix product of a tile that is not 1-D", {1});
  const Tile &t = tile_(x);
  Value row = make(t.layout.unsqueezed(0), t.regs);
  Value r = matmul(row, a);
  if (!error.empty())
    return fail("", {shape(a).back()});
  return make(tile_(r).layout.squeezed(0), tile_(r).regs);
}

Value LaneTileBuilder::prefixSumRows(Value a) {
  SmallVector<int64_t> s = shape(a);
  if (s.size() != 2)
    return fail("a prefix sum of a tile that is not 2-D", s);
  if (!error.empty())
    return fail("", s);
  if (s[0] == 1)
    return a;
  // The row index of an element is a sum of distinct powers of two, each
  // the basis of a register bit (a lane's registers of one column) or of a
  // lane bit. The scan takes them from the lowest: at basis B, every group
  // of B consecutive rows already holds its inclusive prefix and total; the
  // partner group (the other value of that bit) gives its total, which a
  // group with the bit set adds to its prefix, and both to their totals.
  // Register bits pair registers of the lane; lane bits are one xor shuffle
  // of the totals. Any row order over registers and lanes works: blocks of
  // consecutive rows per lane, or mma.sync's rows g and g + 8.
  const Tile &t = tile_(a);
  const LaneLayout &l = t.layout;
  for (const LaneLayout::Coords &c : l.warps)
    if (c[0] != 0)
      return fail("a prefix sum over rows split across warps (it would need "
                  "shared memory)",
                  s);
  auto isPow2 = [](int64_t x) { return x > 0 && (x & (x - 1)) == 0; };
  std::map<int64_t, int64_t> laneBitOfBase; // row basis -> lane bit
  for (auto [bit, c] : llvm::enumerate(l.lanes)) {
    if (c[0] == 0)
      continue;
    if (c[1] != 0)
      return fail("a prefix sum whose lane bits split rows and columns at "
                  "once",
                  s);
    if (!isPow2(c[0]) || !laneBitOfBase.emplace(c[0], bit).second)
      return fail("a prefix sum over rows whose lanes are not numbered by "
                  "powers of two",
                  s);
  }
  // Per column: the row of each of the lane's registers.
  std::map<int64_t, std::map<int64_t, int64_t>> byColumn; // col -> row -> reg
  for (auto [r, c] : llvm::enumerate(l.regs))
    byColumn[c[1]][c[0]] = r;
  int64_t regRowBits = -1;
  for (auto &[col, rows] : byColumn) {
    int64_t bits = 0;
    for (auto &[row, r] : rows)
      bits |= row;
    if (!isPow2(int64_t(rows.size())) && rows.size() != 1)
      return fail("a prefix sum over a lane's rows that are no set of "
                  "register bits",
                  s);
    if (int64_t(llvm::popcount(uint64_t(bits))) !=
            int64_t(llvm::countr_zero(uint64_t(rows.size()))) ||
        (regRowBits >= 0 && bits != regRowBits))
      return fail("a prefix sum over a lane's rows that are no set of "
                  "register bits",
                  s);
    regRowBits = bits;
    for (auto &[base, bit] : laneBitOfBase)
      if (bits & base)
        return fail("a prefix sum over rows held twice (registers and lanes)",
                    s);
  }
  SmallVector<int64_t> bases; // every row basis, lowest first
  for (int64_t x = 1; x < s[0]; x *= 2)
    if ((regRowBits & x) || laneBitOfBase.count(x))
      bases.push_back(x);
  SmallVector<Value> out(t.regs.size());
  Value width = arith::ConstantOp::create(b, b.getI32IntegerAttr(warpSize));
  Value laneI32 = arith::IndexCastOp::create(b, b.getI32Type(), lane);
  for (auto &[col, rows] : byColumn) {
    std::map<int64_t, Value> incl, total; // by row (of this lane's registers)
    for (auto &[row, r] : rows)
      incl[row] = total[row] = t.regs[r];
    for (int64_t base : bases) {
      if (regRowBits & base) {
        for (auto &[row, r] : rows) {
          if (!(row & base))
            continue;
          const int64_t low = row - base;
          Value sum = arith::AddFOp::create(b, total[low], total[row]);
          incl[row] = arith::AddFOp::create(b, incl[row], total[low]);
          total[low] = total[row] = sum;
        }
        continue;
      }
      const int64_t bit = laneBitOfBase.at(base);
      Value mask = arith::ConstantOp::create(
          b, b.getI32IntegerAttr(int64_t(1) << bit));
      Value mine = arith::CmpIOp::create(
          b, arith::CmpIPredicate::ne, arith::AndIOp::create(b, laneI32, mask),
          arith::ConstantOp::create(b, b.getI32IntegerAttr(0)));
      // Registers of one group (rows equal above `base`'s register bits)
      // share a total: shuffle it once per group.
      std::map<int64_t, Value> otherOf;
      for (auto &[row, r] : rows) {
        const int64_t groupKey = row & ~(base - 1) & regRowBits;
        auto it = otherOf.find(groupKey);
        if (it == otherOf.end())
          it = otherOf
                   .emplace(groupKey,
                            gpu::ShuffleOp::create(b, total[row], mask, width,
                                                   gpu::ShuffleMode::XOR)
                                .getResult(0))
                   .first;
        Value other = it->second;
        incl[row] = arith::SelectOp::create(
            b, mine, arith::AddFOp::create(b, incl[row], other), incl[row]);
        total[row] = arith::AddFOp::create(b, total[row], other);
      }
      // The same sum for every register of a group: keep one Value.
      std::map<int64_t, Value> shared;
      for (auto &[row, r] : rows) {
        const int64_t groupKey = row & ~(base - 1) & regRowBits;
        auto [it, fresh] = shared.emplace(groupKey, total[row]);
        total[row] = it->second;
      }
    }
    for (auto &[row, r] : rows)
      out[r] = incl[row];
  }
  return make(l, out);
}

/// Where each element of a tile is first held: (register, lane) of warp 0
/// (-1 where warp 0 holds none of it).
static std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>>
holders(const LaneLayout &l) {
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> at;
  for (int64_t lane = 0; lane < l.numLanes(); ++lane)
    for (int64_t r = 0; r < int64_t(l.regs.size()); ++r) {
      LaneLayout::Coords c = l.at(r, lane, 0);
      at.try_emplace({c[0], c[1]}, std::make_pair(r, lane));
    }
  return at;
}

std::optional<Value> LaneTileBuilder::stageInWarp(const Tile &t,
                                                  int64_t rows,
                                                  int64_t stride) {
  if (!exchange)
    return std::nullopt;
  const int64_t perWarp =
      cast<MemRefType>(exchange.getType()).getDimSize(0) / warps;
  if (rows * stride > perWarp)
    return std::nullopt;
  Value base = arith::MulIOp::create(b, warp, index(perWarp));
  // Every warp writes its own region; one copy of each element.
  auto ifOp = scf::IfOp::create(b, holdsFirstCopyInWarp(t.layout),
                                /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    for (size_t r = 0; r < t.regs.size(); ++r) {
      Value e = arith::AddIOp::create(
          b, arith::MulIOp::create(b, coordinate(t.layout, r, 0), index(stride)),
          coordinate(t.layout, r, 1));
      memref::StoreOp::create(b, t.regs[r], exchange,
                              ValueRange{arith::AddIOp::create(b, base, e)});
    }
  }
  warpSync();
  return base;
}

Value LaneTileBuilder::invertUnitLower(Value l) {
  SmallVector<int64_t> s = shape(l);
  if (s.size() != 2 || s[0] != s[1])
    return fail("a triangular inverse of a tile that is not square", s);
  if (!error.empty())
    return fail("", s);
  const int64_t n = s[0];
  if (n == 1)
    // A strictly lower 1 x 1 tile is zero: the inverse of I is I.
    return filled({1, 1}, 1.0);
  const Tile &t = tile_(l);
  for (const LaneLayout::Coords &c : t.layout.warps)
    if (c[0] != 0 || c[1] != 0)
      return fail("a triangular inverse of a tile split over warps", s);
  if (n > warpSize || (n & (n - 1)) != 0)
    return fail("a triangular inverse larger than a warp's lanes or not a "
                "power of two",
                s);
  // Forward substitution, one column of (I + L)^-1 per lane (column
  // lane % n; the lanes past n hold copies):
  //   X[i][c] = [i == c] - sum_{j < i} L[i][j] X[j][c].
  // L's entries come from the lanes that hold them, one broadcast shuffle
  // each (n (n - 1) / 2, every lane the same source), used at once: no copy
  // of L is kept in any lane's registers.
  //
  // With an exchange region (useExchange), L goes there once and its
  // entries are read back as broadcast loads instead (no register of L
  // stays live while the columns are computed).
  auto at = holders(t.layout);
  Value width = arith::ConstantOp::create(b, b.getI32IntegerAttr(warpSize));
  Value col = arith::RemUIOp::create(b, lane, index(n));
  std::function<Value(int64_t, int64_t)> entry;
  const int64_t stride = n + 1;
  Value base;
  if (std::optional<Value> staged = stageInWarp(t, n, stride)) {
    base = *staged;
    entry = [&, base](int64_t i, int64_t j) -> Value {
      return memref::LoadOp::create(
          b, exchange,
          ValueRange{arith::AddIOp::create(b, base, index(i * stride + j))});
    };
  } else {
    entry = [&](int64_t i, int64_t j) -> Value {
      auto [reg, src] = at.at({i, j});
      return gpu::ShuffleOp::create(
                 b, t.regs[reg],
                 arith::ConstantOp::create(b, b.getI32IntegerAttr(src)), width,
                 gpu::ShuffleMode::IDX)
          .getResult(0);
    };
  }
  SmallVector<Value> x;
  for (int64_t i = 0; i < n; ++i) {
    Value xi = arith::SelectOp::create(
        b,
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, col, index(i)),
        constantF32(1.0), constantF32(0.0));
    for (int64_t j = 0; j < i; ++j)
      xi = arith::SubFOp::create(
          b, xi, arith::MulFOp::create(b, entry(i, j), x[j]));
    x.push_back(xi);
  }
  if (base)
    // The region's next use may not overwrite L before every lane read it.
    warpSync();
  LaneLayout out;
  out.shape = {n, n};
  for (int64_t i = 0; i < n; ++i)
    out.regs.push_back({i, 0});
  for (int64_t bit = 0; (int64_t(1) << bit) < warpSize; ++bit)
    out.lanes.push_back({0, (int64_t(1) << bit) < n ? int64_t(1) << bit : 0});
  for (int64_t w = 1; w < warps; w *= 2)
    out.warps.push_back({0, 0});
  return make(out, x);
}

/// Where a [16, K] layout has mma.sync's rows (g = lane / 4 on lane bits
/// 2..4, rows 0 and 8 on registers) and its columns on lane bits 0, 1 and
/// registers (the same columns, in one order, for both rows), warps on
/// columns only: each row's registers by column slot. Empty otherwise.
static std::optional<std::array<SmallVector<int64_t>, 2>>
mmaRowRegisters(const LaneLayout &l) {
  if (l.rank() != 2 || l.shape[0] != 16 || l.lanes.size() != 5)
    return std::nullopt;
  for (int64_t bit = 0; bit < 5; ++bit) {
    const LaneLayout::Coords &c = l.lanes[bit];
    if (bit < 2 ? c[0] != 0
                : c != LaneLayout::Coords{int64_t(1) << (bit - 2), 0})
      return std::nullopt;
  }
  for (const LaneLayout::Coords &c : l.warps)
    if (c[0] != 0)
      return std::nullopt;
  std::array<std::map<int64_t, int64_t>, 2> byCol;
  for (auto [r, c] : llvm::enumerate(l.regs)) {
    if (c[0] != 0 && c[0] != 8)
      return std::nullopt;
    byCol[c[0] / 8][c[1]] = r;
  }
  std::array<SmallVector<int64_t>, 2> out;
  SmallVector<int64_t> cols[2];
  for (int h = 0; h < 2; ++h)
    for (auto [col, r] : byCol[h]) {
      cols[h].push_back(col);
      out[h].push_back(r);
    }
  if (cols[0] != cols[1] || cols[0].empty() || cols[0].size() % 4 != 0)
    return std::nullopt;
  return out;
}

SmallVector<Value> LaneTileBuilder::factoredPairs(ArrayRef<Value> as,
                                                  Value bTile, Value g,
                                                  ArrayRef<bool> inclusive) {
  // P_ij = sum_d a_id b_jd exp(g_id - g_jd) for the 16 x 16 pairs of a
  // chunk, on tf32 mma.sync with the decays factored through a reference
  // value per group of keys and column (as the sub-chunks of
  // GatedDeltaKernel.cpp, at a finer grain): for n tile nt (keys 8 nt ..
  // 8 nt + 7) and groups of gs keys from row f = 8 nt + gs gr to
  // l = f + gs - 1, the reference r = (g_f + g_l) / 2:
  //   A rows  a_i exp(g_i - r)   (zero before the group: no pair),
  //   B rows  b_j exp(r - g_j)   (the group's keys only).
  // For a decaying gate (g non-increasing down the rows) the positive
  // exponents are at most (g_f - g_l) / 2 on either side: half the group's
  // gate steps, where the middle row as reference (g_{f + gs/2}) leaves
  // gs / 2 steps on the A side. On the bench's softplus gates that takes
  // groups of 8 in 89 % of (warp, chunk, n tile)s instead of 72 % (a
  // simulation of its gate draw; with the check below, the softplus
  // 8 x 4096 intra kernel went from 1.162 to 1.108 ms). For groups of one
  // key r = g_f: the pairwise form, exact. Lower-bounded
  // gates keep them small by construction; others (softplus, log-space
  // inputs) may not, and each warp checks, per chunk and n tile, the
  // largest exponent it would take (exp overflows f32 near 88): groups of
  // 8 up to 80, else of 4, else of 2, else groups of one key, each its own
  // reference: exp(g_i - g_j) with i >= j, every exponent <= 0, exact for
  // any decaying gate (the pairwise form, as products). The choice is uniform
  // within the warp (mma.sync needs the whole warp): the group size, then
  // one loop over the groups; the warps' partial sums over their columns
  // meet after it (crossWarpSum).
  const int64_t nA = as.size();
  SmallVector<const Tile *> ta;
  for (Value a : as)
    ta.push_back(&tile_(a));
  const Tile &tbk = tile_(bTile), &tg = tile_(g);
  auto rows = *mmaRowRegisters(tg.layout);
  const int64_t slots = rows[0].size();
  Value laneI = lane;
  Value gIdx = arith::DivUIOp::create(b, laneI, index(4));
  Value tIdx = arith::RemUIOp::create(b, laneI, index(4));
  Value width = arith::ConstantOp::create(b, b.getI32IntegerAttr(warpSize));
  auto i32 = [&](Value x) {
    return arith::IndexCastOp::create(b, b.getI32Type(), x).getResult();
  };
  auto reg = [&](const Tile &t, int h, int64_t c) { return t.regs[rows[h][c]]; };
  auto exp = [&](Value x) { return math::ExpOp::create(b, x).getResult(); };
  auto sub = [&](Value x, Value y) {
    return arith::SubFOp::create(b, x, y).getResult();
  };
  auto mulf = [&](Value x, Value y) {
    return arith::MulFOp::create(b, x, y).getResult();
  };
  Value zero = constantF32(0.0);
  // g at row 8 nt + row (row < 8, a warp-uniform value), the lane's column
  // c: from lane (row, t).
  auto gAt = [&](int64_t nt, Value row, int64_t c) {
    Value src = i32(arith::AddIOp::create(
        b, tIdx, arith::MulIOp::create(b, row, index(4))));
    return gpu::ShuffleOp::create(b, reg(tg, nt, c), src, width,
                                  gpu::ShuffleMode::IDX)
        .getResult(0);
  };
  // The reference of the keys from row `first` to row `last` of n tile nt
  // (warp-uniform values), column c: the middle of their gates.
  auto reference = [&](int64_t nt, Value first, Value last, int64_t c) {
    return mulf(arith::AddFOp::create(b, gAt(nt, first, c), gAt(nt, last, c)),
                constantF32(0.5));
  };
  // Whether the lane's row (8 nt + g) is before row `first` of the n tile,
  // and whether it is one of the `count` rows from there.
  auto before = [&](Value first) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::ult, gIdx, first)
        .getResult();
  };
  auto inRows = [&](Value first, Value count) -> Value {
    return arith::AndIOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::uge, gIdx, first),
        before(arith::AddIOp::create(b, first, count)));
  };
  auto warpMax = [&](Value x) {
    for (int64_t off = 1; off < warpSize; off *= 2)
      x = arith::MaximumFOp::create(
          b, x,
          gpu::ShuffleOp::create(b, x,
                                 arith::ConstantOp::create(
                                     b, b.getI32IntegerAttr(off)),
                                 width, gpu::ShuffleMode::XOR)
              .getResult(0));
    return x;
  };
  // The largest exponent of n tile nt's groups of gs, over the warp.
  auto spread = [&](int64_t nt, int64_t gs) {
    // SPEC.md's gates are log-decays, g <= 0, so G is non-increasing down
    // every column (the lanes' scan adds in another order per row: up to a
    // few ulps of G, far inside the margin between 80 and exp's overflow
    // near 88.7): a group's exponents are largest at its ends,
    // (g_f - g_l) / 2 on either side of the reference. Each lane takes its
    // columns' difference to the row gs - 1 below (4 (gs - 1) lanes on);
    // the lanes of a group's first row hold the group's. (Outside SPEC, g > 0, this bound is not one; nor
    // does the pairwise form keep its exponents <= 0 then.)
    Value offset =
        arith::ConstantOp::create(b, b.getI32IntegerAttr(4 * (gs - 1)));
    Value most = zero;
    for (int64_t c = 0; c < slots; ++c) {
      Value own = reg(tg, nt, c);
      Value below = gpu::ShuffleOp::create(b, own, offset, width,
                                           gpu::ShuffleMode::DOWN)
                        .getResult(0);
      most = arith::MaximumFOp::create(b, most, sub(own, below));
    }
    Value starts = arith::CmpIOp::create(
        b, arith::CmpIPredicate::eq,
        arith::AndIOp::create(b, gIdx, index(gs - 1)), index(0));
    return warpMax(
        mulf(arith::SelectOp::create(b, starts, most, zero), constantF32(0.5)));
  };
  // One group of keys of n tile nt: its `gs` key rows from row `first` of
  // the n tile (both warp-uniform values), added to the accumulators `acc`
  // (4 registers a tile of `as`).
  auto group = [&](int64_t nt, Value gs, Value first,
                   SmallVector<Value> acc) {
    Value last = arith::SubIOp::create(b, arith::AddIOp::create(b, first, gs),
                                       index(1));
    Value inGroup = inRows(first, gs), isBefore = before(first);
    // One k block (4 of the lane's columns, two tf32 steps) at a time, so
    // that only its decays are live. Those of the A rows (exp(g_i - r))
    // are the same for every A tile: taken once.
    SmallVector<Value> cv;
    for (int64_t m = 0; m < nA; ++m)
      cv.push_back(vector::FromElementsOp::create(
          b, VectorType::get({2, 2}, f32()),
          ArrayRef<Value>(acc).slice(4 * m, 4)));
    for (int64_t kb = 0; kb < slots / 4; ++kb) {
      DenseMap<int64_t, Value> up[2], B;
      for (int64_t c = 4 * kb; c < 4 * kb + 4; ++c) {
        Value ref = reference(nt, first, last, c);
        for (int h = nt; h < 2; ++h) {
          up[h][c] = exp(sub(reg(tg, h, c), ref));
          // Query rows before the group have no pair with its keys: their
          // decay is zero (once for every A tile).
          if (h == nt)
            up[h][c] = arith::SelectOp::create(b, isBefore, zero, up[h][c]);
        }
        // The group's keys decayed from its reference (the same shuffle as
        // the A rows'; the others zero).
        B[c] = arith::SelectOp::create(
            b, inGroup, mulf(reg(tbk, nt, c), exp(sub(ref, reg(tg, nt, c)))),
            zero);
      }
      for (int64_t m = 0; m < nA; ++m) {
        auto aAt = [&](int h, int64_t c) -> Value {
          if (h < nt)
            return zero;
          return mulf(reg(*ta[m], h, c), up[h][c]);
        };
        for (int64_t s = 0; s < 2; ++s) {
          const int64_t c0 = 4 * kb + s, c1 = 4 * kb + 2 + s;
          cv[m] = emitMmaSyncTf32(
              b, b.getLoc(),
              ValueRange{aAt(0, c0), aAt(1, c0), aAt(0, c1), aAt(1, c1)},
              ValueRange{B[c0], B[c1]}, cv[m], precise3xTf32());
        }
      }
    }
    for (int64_t m = 0; m < nA; ++m)
      for (int64_t e = 0; e < 4; ++e)
        acc[4 * m + e] = vector::ExtractOp::create(
            b, cv[m], ArrayRef<int64_t>{e / 2, e % 2});
    return acc;
  };
  auto fitsIn = [&](Value most) {
    return arith::CmpFOp::create(b, arith::CmpFPredicate::OLE, most,
                                 constantF32(80.0))
        .getResult();
  };
  // The group size of n tile nt: the largest of 8, 4, 2 whose exponents
  // fit, else 1; each check only where the larger one failed.
  std::function<Value(int64_t, int64_t)> groupSize = [&](int64_t nt,
                                                         int64_t gs) -> Value {
    if (gs == 1)
      return index(1);
    auto ifOp = scf::IfOp::create(b, TypeRange{b.getIndexType()},
                                  fitsIn(spread(nt, gs)),
                                  /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    scf::YieldOp::create(b, index(gs));
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, groupSize(nt, gs / 2));
    return ifOp.getResult(0);
  };
  bool acrossWarps = false;
  for (const LaneLayout::Coords &c : tg.layout.warps)
    acrossWarps |= c[1] != 0;
  // The warps' partial sums of every tile meet in one sum across warps (one
  // barrier); each n tile's go to shared memory as soon as they are done,
  // so that no register holds them through the next n tile's products.
  std::optional<PendingSum> pending;
  if (acrossWarps && warps > 1) {
    pending = reserveSum(8 * nA);
    if (!pending)
      return SmallVector<Value>(nA, fail("", {16, 16}));
  }
  // Register e of n tile nt of tile m: the accumulator's order (n tile 0's
  // four registers, then n tile 1's).
  auto slotOf = [](int64_t m, int64_t nt, int64_t e) {
    return 8 * m + 4 * nt + e;
  };
  SmallVector<Value> summed(8 * nA);
  for (int64_t nt = 0; nt < 2; ++nt) {
    // One loop over the n tile's key groups, whatever their size: one
    // iteration for groups of 8 (the usual case), up to 8 for groups of one
    // key. (Written as a branch per size, each with its products, ptxas
    // spilled at the 128-register cap, and still with 255 registers.)
    Value gs = groupSize(nt, 8);
    auto loop = scf::ForOp::create(b, index(0), index(8), gs,
                                   SmallVector<Value>(4 * nA, zero));
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      scf::YieldOp::create(
          b, group(nt, gs, loop.getInductionVar(),
                   SmallVector<Value>(loop.getRegionIterArgs())));
    }
    for (int64_t m = 0; m < nA; ++m)
      for (int64_t e = 0; e < 4; ++e) {
        Value x = loop.getResult(4 * m + e);
        if (pending)
          depositSum(*pending, slotOf(m, nt, e), x);
        else
          summed[slotOf(m, nt, e)] = x;
      }
  }
  if (pending)
    summed = collectSum(*pending);
  LaneLayout accL = mmaAccumulator(16, 16, 1);
  for (int64_t w = 1; w < warps; w *= 2)
    accL.warps.push_back({0, 0});
  SmallVector<Value> results;
  for (int64_t m = 0; m < nA; ++m)
    results.push_back(
        keptPairs(accL, ArrayRef<Value>(summed).slice(8 * m, 8), inclusive[m]));
  return results;
}

Value LaneTileBuilder::keptPairs(const LaneLayout &accL, ArrayRef<Value> regs,
                                 bool inclusive) {
  // Pairs j <= i (inclusive) or j < i.
  SmallVector<Value> out(regs);
  Value zero = constantF32(0.0);
  for (size_t r = 0; r < out.size(); ++r) {
    Value keep = arith::CmpIOp::create(
        b, inclusive ? arith::CmpIPredicate::ule : arith::CmpIPredicate::ult,
        coordinate(accL, r, 1), coordinate(accL, r, 0));
    out[r] = arith::SelectOp::create(b, keep, out[r], zero);
  }
  return make(accL, out);
}

bool LaneTileBuilder::onAmdUnitPairs(ArrayRef<Value> as, Value bTile,
                                     Value g) {
  if (!error.empty() || unit == MatrixUnit::MmaSync || !mmaType ||
      !mmaType.isF32() || !inRegisters(g) || !inRegisters(bTile) ||
      !(tile_(bTile).layout == tile_(g).layout))
    return false;
  for (Value a : as)
    if (!inRegisters(a) || !(tile_(a).layout == tile_(g).layout))
      return false;
  return true;
}

std::optional<SmallVector<Value>>
LaneTileBuilder::unitFactoredPairs(ArrayRef<Value> as, Value bTile, Value g,
                                   ArrayRef<bool> inclusive) {
  // factoredPairs' form on AMD's units. P_ij = sum_d a_id b_jd exp(g_id -
  // g_jd) for the 16 x 16 pairs, the decays factored through a reference
  // per group of keys and column: for the group of gs keys from row f to
  // l = f + gs - 1, r = (g_f + g_l) / 2,
  //   A rows  a_i exp(g_i - r)   (zero before the group: no pair),
  //   B rows  b_j exp(r - g_j)   (the group's keys only),
  // and P += A B^T, one product on the unit a group. For a decaying gate
  // the positive exponents are at most (g_f - g_l) / 2 on either side;
  // each warp takes, for its own columns, the largest group size (16, 8,
  // 4, 2) whose groups keep them within 80 (exp overflows f32 near 88),
  // else groups of one key, r = g_f: exp(g_i - g_j), i >= j, every
  // exponent <= 0, exact for any decaying gate. The unit's products are
  // per warp (the block's warps split the columns, the contracted index:
  // each warp its own partial P over its own group sizes), so the choice
  // only needs to be uniform over the warp, and the partial sums meet in
  // one sum across warps after the loop.
  const Tile &tg = tile_(g);
  const LaneLayout full = tg.layout;
  if (full.rank() != 2 || full.shape[0] != 16)
    return std::nullopt;
  for (const LaneLayout::Coords &c : full.warps)
    if (c[0] != 0)
      return std::nullopt;
  // One warp's part: its columns, the warp bits copies. Every warp holds
  // the same columns of its own part in the same registers and lanes, so
  // A's and B's contracted index is labeled alike (what a product needs).
  LaneLayout local = full;
  local.shape[1] = full.shape[1] / full.numWarps();
  for (LaneLayout::Coords &c : local.warps)
    c = {0, 0};
  if (!local.check().empty() || local.shape[1] % 16 != 0)
    return std::nullopt;
  int64_t regRowBits = 0;
  for (const LaneLayout::Coords &c : local.regs)
    regRowBits |= c[0];
  for (const LaneLayout::Coords &c : local.lanes)
    if (c[0] != 0 && (c[1] != 0 || !llvm::isPowerOf2_64(c[0])))
      return std::nullopt;
  const int64_t nA = as.size();
  const Tile &tbk = tile_(bTile);
  SmallVector<SmallVector<Value>> aRegs;
  for (Value a : as)
    aRegs.push_back(SmallVector<Value>(tile_(a).regs));
  SmallVector<Value> gRegs(tg.regs), bRegs(tbk.regs);

  // The lane's columns (distinct coordinates of its registers) and, per
  // column, the register of each register-row part.
  std::map<int64_t, std::map<int64_t, int64_t>> regOf; // col -> regRow -> r
  for (auto [r, c] : llvm::enumerate(local.regs))
    regOf[c[1]][c[0]] = r;
  Value width = arith::ConstantOp::create(b, b.getI32IntegerAttr(warpSize));
  auto i32 = [&](Value x) {
    return arith::IndexCastOp::create(b, b.getI32Type(), x).getResult();
  };
  auto eqIdx = [&](Value x, int64_t v) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::eq, x, index(v))
        .getResult();
  };
  // The lane that holds row `row` of the calling lane's columns.
  auto sourceLane = [&](Value row) {
    Value src = index(0);
    for (auto [bit, c] : llvm::enumerate(local.lanes)) {
      Value piece;
      if (c[0] == 0) {
        piece = arith::AndIOp::create(b, lane, index(int64_t(1) << bit));
      } else {
        Value set = arith::AndIOp::create(b, row, index(c[0]));
        piece = arith::SelectOp::create(b, eqIdx(set, 0), index(0),
                                        index(int64_t(1) << bit));
      }
      src = arith::OrIOp::create(b, src, piece);
    }
    return i32(src);
  };
  // Element (row, column `col`) of a tile in `local` (registers `regs`):
  // `row` uniform over the warp (the register chosen before one shuffle)
  // or not (every register-row part shuffled, the right one chosen after).
  auto readRow = [&](ArrayRef<Value> regs, Value row, int64_t col,
                     bool uniform) -> Value {
    const std::map<int64_t, int64_t> &parts = regOf.at(col);
    Value part = arith::AndIOp::create(b, row, index(regRowBits));
    Value src = sourceLane(row);
    auto shuffle = [&](Value v) {
      return gpu::ShuffleOp::create(b, v, src, width, gpu::ShuffleMode::IDX)
          .getResult(0);
    };
    Value out;
    for (auto [regRow, r] : parts) {
      Value v = uniform ? regs[r] : shuffle(regs[r]);
      out = out ? arith::SelectOp::create(b, eqIdx(part, regRow), v, out)
                      .getResult()
                : v;
    }
    return uniform ? shuffle(out) : out;
  };
  auto sub = [&](Value x, Value y) {
    return arith::SubFOp::create(b, x, y).getResult();
  };
  auto mulf = [&](Value x, Value y) {
    return arith::MulFOp::create(b, x, y).getResult();
  };
  auto exp = [&](Value x) { return math::ExpOp::create(b, x).getResult(); };
  Value zero = constantF32(0.0);
  // A value the warp's lanes all hold, as one the compiler knows uniform on
  // AMD (a scalar register: the group loop's bounds and branches).
  auto warpUniform = [&](Value x) -> Value {
    if (emulateSteps)
      return x;
    return gpu::SubgroupBroadcastOp::create(
        b, x, /*lane=*/Value(), gpu::BroadcastType::first_active_lane);
  };
  auto warpMax = [&](Value x) {
    for (int64_t off = 1; off < warpSize; off *= 2)
      x = arith::MaximumFOp::create(
          b, x,
          gpu::ShuffleOp::create(
              b, x, arith::ConstantOp::create(b, b.getI32IntegerAttr(off)),
              width, gpu::ShuffleMode::XOR)
              .getResult(0));
    return warpUniform(x);
  };
  SmallVector<Value> rowOfReg;
  for (int64_t r = 0; r < int64_t(local.regs.size()); ++r)
    rowOfReg.push_back(coordinate(local, r, 0));
  // The largest exponent of the warp's groups of gs keys: half the largest
  // g_f - g_l over them and the warp's columns (SPEC.md's gates are
  // log-decays: G is non-increasing down each column, so a group's largest
  // exponents are at its ends). A lane whose row starts a group reads the
  // group's last row, i | (gs - 1).
  auto spread = [&](int64_t gs) {
    Value most = zero;
    for (int64_t r = 0; r < int64_t(local.regs.size()); ++r) {
      Value i = rowOfReg[r];
      Value last = arith::OrIOp::create(b, i, index(gs - 1));
      Value other = readRow(gRegs, last, local.regs[r][1], false);
      Value starts =
          eqIdx(arith::AndIOp::create(b, i, index(gs - 1)), 0);
      most = arith::MaximumFOp::create(
          b, most,
          arith::SelectOp::create(b, starts, sub(gRegs[r], other), zero));
    }
    return warpMax(mulf(most, constantF32(0.5)));
  };
  std::function<Value(int64_t)> groupSize = [&](int64_t gs) -> Value {
    if (gs == 1)
      return index(1);
    Value fits = arith::CmpFOp::create(b, arith::CmpFPredicate::OLE,
                                       spread(gs), constantF32(80.0));
    auto ifOp = scf::IfOp::create(b, TypeRange{b.getIndexType()}, fits,
                                  /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    scf::YieldOp::create(b, index(gs));
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, groupSize(gs / 2));
    return ifOp.getResult(0);
  };

  const LaneLayout accL =
      unitAccumulator(unit, 16, 16).spread({16, 16}, {0, 0}, warps);
  const int64_t accRegs = accL.regs.size();
  Value gs = groupSize(16);
  auto loop = scf::ForOp::create(b, index(0), index(16), gs,
                                 SmallVector<Value>(nA * accRegs, zero));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value first = loop.getInductionVar();
    Value last = arith::SubIOp::create(
        b, arith::AddIOp::create(b, first, gs), index(1));
    std::map<int64_t, Value> ref;
    for (auto &[col, parts] : regOf) {
      (void)parts;
      ref[col] = mulf(arith::AddFOp::create(b, readRow(gRegs, first, col, true),
                                            readRow(gRegs, last, col, true)),
                      constantF32(0.5));
    }
    SmallVector<SmallVector<Value>> aDecayed(nA);
    SmallVector<Value> bDecayed;
    for (int64_t r = 0; r < int64_t(local.regs.size()); ++r) {
      Value i = rowOfReg[r];
      Value rf = ref.at(local.regs[r][1]);
      Value before =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, first);
      Value inGroup = arith::AndIOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::uge, i, first),
          arith::CmpIOp::create(b, arith::CmpIPredicate::ule, i, last));
      // Rows before the group have no pair with its keys.
      Value up = arith::SelectOp::create(b, before, zero, exp(sub(gRegs[r], rf)));
      for (int64_t m = 0; m < nA; ++m)
        aDecayed[m].push_back(mulf(aRegs[m][r], up));
      bDecayed.push_back(arith::SelectOp::create(
          b, inGroup, mulf(bRegs[r], exp(sub(rf, gRegs[r]))), zero));
    }
    Value bt = make(local, bDecayed);
    SmallVector<Value> next;
    ValueRange carried = loop.getRegionIterArgs();
    for (int64_t m = 0; m < nA; ++m) {
      Value init = make(accL, SmallVector<Value>(
                                  carried.slice(m * accRegs, accRegs)));
      Value p = unitProduct(make(local, aDecayed[m]), false, bt, true, init);
      if (!error.empty() || !(layoutOf(p) == accL)) {
        scf::YieldOp::create(b, carried);
        return std::nullopt;
      }
      llvm::append_range(next, registersOf(p));
    }
    scf::YieldOp::create(b, next);
  }
  SmallVector<Value> summed(loop.getResults());
  if (warps > 1) {
    summed = crossWarpSum(summed);
    if (!error.empty())
      return std::nullopt;
  }
  SmallVector<Value> results;
  for (int64_t m = 0; m < nA; ++m)
    results.push_back(keptPairs(
        accL, ArrayRef<Value>(summed).slice(m * accRegs, accRegs), inclusive[m]));
  return results;
}

SmallVector<Value> LaneTileBuilder::decayedPairsMany(ArrayRef<Value> as,
                                                     Value bTile, Value g,
                                                     ArrayRef<bool> inclusive) {
  // (factoredPairs runs on mma.sync: NVIDIA only.)
  bool fast = error.empty() && mmaType && mmaType.isF32() &&
              unit == MatrixUnit::MmaSync && warpSize == 32 &&
              inRegisters(g) &&
              inRegisters(bTile) &&
              mmaRowRegisters(tile_(g).layout) &&
              tile_(bTile).layout == tile_(g).layout;
  for (Value a : as)
    fast &= inRegisters(a) &&
            tile_(a).layout == tile_(g).layout;
  if (fast)
    return factoredPairs(as, bTile, g, inclusive);
  if (onAmdUnitPairs(as, bTile, g))
    if (std::optional<SmallVector<Value>> r =
            unitFactoredPairs(as, bTile, g, inclusive))
      return *r;
  return TileBuilder::decayedPairsMany(as, bTile, g, inclusive);
}

Value LaneTileBuilder::decayedPairs(Value a, Value bTile, Value g,
                                    bool inclusive) {
  SmallVector<int64_t> s = shape(a);
  const int64_t m = s.size() == 2 ? s[0] : 1;
  if (s.size() != 2 || shape(bTile) != s || shape(g) != s)
    return fail("a pairwise decayed product of tiles of unequal shapes",
                {m, m});
  if (!error.empty())
    return fail("", {m, m});
  const Tile &ta = tile_(a);
  const LaneLayout &l = ta.layout;
  if (!(tile_(bTile).layout == l) || !(tile_(g).layout == l))
    return fail("a pairwise decayed product of tiles in different layouts",
                {m, m});
  // Sixteen rows as mma.sync holds them, on the tf32 matrix instruction:
  // the factored form (exact pairwise only where a warp's gates need it).
  if (mmaType && mmaType.isF32() && unit == MatrixUnit::MmaSync &&
      warpSize == 32 && mmaRowRegisters(l))
    return factoredPairs({a}, bTile, g, {inclusive})[0];
  if (onAmdUnitPairs({a}, bTile, g))
    if (std::optional<SmallVector<Value>> r =
            unitFactoredPairs({a}, bTile, g, {inclusive}))
      return (*r)[0];
  for (const LaneLayout::Coords &c : l.warps)
    if (c[0] != 0)
      return fail("a pairwise decayed product whose rows are split over "
                  "warps",
                  {m, m});
  // Exact for any gate: sum_d a_id b_jd exp(g_id - g_jd), with j <= i
  // (inclusive) or j < i, every exponent <= 0 for a log-decay prefix sum.
  // Key row j's columns come to every lane from the lanes that hold them
  // (rowOf: indexed shuffles), each lane sums its registers' terms per row,
  // then the sums meet over the column lane bits (xor shuffles) and the
  // warps (crossWarpSum). The result holds, per lane, every j of the rows
  // the lane holds.
  std::map<int64_t, SmallVector<int64_t>> regsOfRow;
  for (auto [r, c] : llvm::enumerate(l.regs))
    regsOfRow[c[0]].push_back(r);
  LaneLayout out;
  out.shape = {m, m};
  SmallVector<Value> sums;
  const Tile &tb_ = tile_(bTile);
  const Tile &tg = tile_(g);
  SmallVector<Value> bRegs(tb_.regs), gRegs(tg.regs), aRegs(ta.regs);
  for (int64_t j = 0; j < m; ++j) {
    Value bj = rowOf(bTile, j), gj = rowOf(g, j);
    if (!error.empty())
      return fail("", {m, m});
    // rowOf keeps the lane's registers of one row in order: column c of
    // the lane's row registers is the k-th register of the row.
    ArrayRef<Value> bjr = registersOf(bj), gjr = registersOf(gj);
    for (auto &[row, rs] : regsOfRow) {
      Value sum = constantF32(0.0);
      for (auto [k, r] : llvm::enumerate(rs)) {
        Value e = math::ExpOp::create(
            b, arith::SubFOp::create(b, gRegs[r], gjr[k]));
        sum = math::FmaOp::create(
            b, arith::MulFOp::create(b, aRegs[r], bjr[k]), e, sum);
      }
      Value keep = arith::CmpIOp::create(
          b, inclusive ? arith::CmpIPredicate::ule : arith::CmpIPredicate::ult,
          index(j), coordinate(l, rs.front(), 0));
      out.regs.push_back({row, j});
      sums.push_back(arith::SelectOp::create(b, keep, sum, constantF32(0.0)));
    }
  }
  Value width = arith::ConstantOp::create(b, b.getI32IntegerAttr(warpSize));
  bool acrossWarps = false;
  for (auto [bit, c] : llvm::enumerate(l.lanes)) {
    out.lanes.push_back({c[0], 0});
    if (c[1] == 0)
      continue;
    if (c[0] != 0)
      return fail("a pairwise decayed product whose lane bits split rows and "
                  "columns at once",
                  {m, m});
    Value offset =
        arith::ConstantOp::create(b, b.getI32IntegerAttr(int64_t(1) << bit));
    for (Value &x : sums)
      x = arith::AddFOp::create(
          b, x,
          gpu::ShuffleOp::create(b, x, offset, width, gpu::ShuffleMode::XOR)
              .getResult(0));
  }
  for (const LaneLayout::Coords &c : l.warps) {
    acrossWarps |= c[1] != 0;
    out.warps.push_back({0, 0});
  }
  if (acrossWarps) {
    sums = crossWarpSum(sums);
    if (!error.empty())
      return fail("", {m, m});
  }
  return make(out, sums);
}

/// The pairs decayedApply sums, as `key row s PRED row r`: s < r (s <= r
/// inclusive); transposed, s > r (s >= r).
static arith::CmpIPredicate applyPairs(bool inclusive, bool transposed) {
  if (transposed)
    return inclusive ? arith::CmpIPredicate::uge : arith::CmpIPredicate::ugt;
  return inclusive ? arith::CmpIPredicate::ule : arith::CmpIPredicate::ult;
}

std::optional<Value> LaneTileBuilder::loopedApply(Value dP, Value x,
                                                  Value g, bool inclusive,
                                                  bool transposed) {
  // decayedApply where x and g hold sixteen rows as mma.sync does (rows g
  // and g + 8 of lane group g = lane / 4, columns on lane bits 0, 1 and
  // registers, the warps splitting columns only) and dP is the same in
  // every warp: dP goes once into the warp's exchange region (rows of 17
  // words), then one loop over the key rows s of each register half
  // shuffles row s of x and g to every lane and adds its terms. The
  // unrolled form (every row's shuffles and a full copy of dP in each
  // lane's registers, decayedApply's general form below) held 32 registers
  // of coefficients through the whole sum: four of them in the gradient's
  // chunk program spilled 1.3 to 1.7 KB a thread (log-space and softplus
  // gates). Each lane now holds only its outputs and one row's terms.
  const LaneLayout &l = tile_(x).layout;
  std::optional<std::array<SmallVector<int64_t>, 2>> rows =
      mmaRowRegisters(l);
  const LaneLayout &cl = tile_(dP).layout;
  if (!rows || warpSize != 32 || cl.rank() != 2 ||
      cl.shape != SmallVector<int64_t, 2>{16, 16})
    return std::nullopt;
  for (const LaneLayout::Coords &c : cl.warps)
    if (c[0] != 0 || c[1] != 0)
      return std::nullopt;
  const int64_t stride = 17;
  // dP (every warp its own copy) into the warp's region, row-major.
  std::optional<Value> staged = stageInWarp(tile_(dP), 16, stride);
  if (!staged)
    return std::nullopt;
  Value warpBase = *staged;
  const int64_t slots = (*rows)[0].size();
  SmallVector<Value> xRegs(tile_(x).regs), gRegs(tile_(g).regs);
  Value gIdx = arith::DivUIOp::create(b, lane, index(4));
  Value tIdx = arith::RemUIOp::create(b, lane, index(4));
  Value width = arith::ConstantOp::create(b, b.getI32IntegerAttr(warpSize));
  Value zero = constantF32(0.0);
  const arith::CmpIPredicate pred = applyPairs(inclusive, transposed);
  SmallVector<Value> out(xRegs.size(), zero);
  for (int64_t hs = 0; hs < 2; ++hs) {
    // Rows of the lane's halves that have a pair with a key row of half
    // hs: without transposing, rows i >= s (half 0 only for keys of half
    // 0); transposed, rows i <= s (half 1 only for keys of half 1).
    SmallVector<int64_t> halves;
    for (int64_t h = 0; h < 2; ++h)
      if (transposed ? h <= hs : h >= hs)
        halves.push_back(h);
    SmallVector<int64_t> carried;
    for (int64_t h : halves)
      for (int64_t c = 0; c < slots; ++c)
        carried.push_back((*rows)[h][c]);
    SmallVector<Value> init;
    for (int64_t r : carried)
      init.push_back(out[r]);
    auto loop = scf::ForOp::create(b, index(0), index(8), index(1), init);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value sl = loop.getInductionVar();
      Value s = arith::AddIOp::create(b, sl, index(8 * hs));
      Value src = arith::IndexCastOp::create(
          b, b.getI32Type(),
          arith::AddIOp::create(b, tIdx, arith::MulIOp::create(b, sl, index(4))));
      SmallVector<Value> xs, gs;
      for (int64_t c = 0; c < slots; ++c) {
        xs.push_back(gpu::ShuffleOp::create(b, xRegs[(*rows)[hs][c]], src,
                                            width, gpu::ShuffleMode::IDX)
                         .getResult(0));
        gs.push_back(gpu::ShuffleOp::create(b, gRegs[(*rows)[hs][c]], src,
                                            width, gpu::ShuffleMode::IDX)
                         .getResult(0));
      }
      SmallVector<Value> acc(loop.getRegionIterArgs());
      int64_t n = 0;
      for (int64_t h : halves) {
        Value i = arith::AddIOp::create(b, gIdx, index(8 * h));
        Value keep = arith::CmpIOp::create(b, pred, s, i);
        Value at = transposed
                       ? arith::AddIOp::create(
                             b, arith::MulIOp::create(b, s, index(stride)), i)
                       : arith::AddIOp::create(
                             b, arith::MulIOp::create(b, i, index(stride)), s);
        Value coef = memref::LoadOp::create(
            b, exchange, ValueRange{arith::AddIOp::create(b, warpBase, at)});
        coef = arith::SelectOp::create(b, keep, coef, zero);
        for (int64_t c = 0; c < slots; ++c, ++n) {
          Value own = gRegs[(*rows)[h][c]];
          Value diff = transposed ? arith::SubFOp::create(b, gs[c], own)
                                  : arith::SubFOp::create(b, own, gs[c]);
          // Discarded pairs take the exponent 0: no inf times zero.
          Value e = math::ExpOp::create(
              b, arith::SelectOp::create(b, keep, diff, zero));
          acc[n] = math::FmaOp::create(
              b, arith::MulFOp::create(b, coef, xs[c]), e, acc[n]);
        }
      }
      scf::YieldOp::create(b, acc);
    }
    for (auto [k, r] : llvm::enumerate(carried))
      out[r] = loop.getResult(k);
  }
  // The region's next use may not overwrite what a lane still reads.
  warpSync();
  return make(l, out);
}

Value LaneTileBuilder::decayedApply(Value dP, Value x, Value g,
                                    bool inclusive, bool transposed) {
  SmallVector<int64_t> s = shape(x);
  if (s.size() != 2 || shape(g) != s ||
      shape(dP) != SmallVector<int64_t>{s[0], s[0]})
    return fail("a decayed apply of tiles of unequal shapes", s);
  if (!error.empty())
    return fail("", s);
  const int64_t m = s[0];
  const LaneLayout l = tile_(x).layout;
  if (!(tile_(g).layout == l))
    return fail("a decayed apply of x and g in different layouts", s);
  for (const LaneLayout::Coords &c : l.warps)
    if (c[0] != 0)
      return fail("a decayed apply whose rows are split over warps", s);
  if (std::optional<Value> r = loopedApply(dP, x, g, inclusive, transposed))
    return *r;
  // The coefficients each lane needs: row r of dP (dP^T transposed) for
  // each of its rows r, every column, copies over the column lane bits and
  // the warps.
  std::map<int64_t, SmallVector<int64_t>> regsOfRow; // by row register part
  for (auto [r, c] : llvm::enumerate(l.regs))
    regsOfRow[c[0]].push_back(r);
  LaneLayout full;
  full.shape = {m, m};
  std::map<int64_t, int64_t> firstOfRow; // row register part -> full's base
  for (auto &[row, rs] : regsOfRow) {
    firstOfRow[row] = full.regs.size();
    for (int64_t j = 0; j < m; ++j)
      full.regs.push_back({row, j});
  }
  for (const LaneLayout::Coords &c : l.lanes) {
    if (c[0] != 0 && c[1] != 0)
      return fail("a decayed apply whose lane bits split rows and columns "
                  "at once",
                  s);
    full.lanes.push_back({c[0], 0});
  }
  for (size_t w = 0; w < l.warps.size(); ++w)
    full.warps.push_back({0, 0});
  if (std::string why = full.check(); !why.empty())
    return fail("a decayed apply's coefficient layout: " + why, s);
  Value coef = transposed ? transpose(dP) : dP;
  SmallVector<Value> cRegs = convertLayout(coef, full);
  if (!error.empty())
    return fail("", s);
  SmallVector<Value> xRegs(tile_(x).regs), gRegs(tile_(g).regs);
  SmallVector<Value> out(xRegs.size(), constantF32(0.0));
  Value zero = constantF32(0.0);
  // Term (r, s): dP[r, s] x[s, d] exp(g[r, d] - g[s, d]) for the pairs
  // s < r (s <= r inclusive); transposed, dP[s, r] x[s, d] exp(g[s, d] -
  // g[r, d]) for s > r (s >= r).
  const arith::CmpIPredicate pred = applyPairs(inclusive, transposed);
  for (int64_t sr = 0; sr < m; ++sr) {
    Value xs = rowOf(x, sr), gs = rowOf(g, sr);
    if (!error.empty())
      return fail("", s);
    // rowOf keeps the lane's registers of one row in order.
    ArrayRef<Value> xsr = registersOf(xs), gsr = registersOf(gs);
    for (auto &[row, rs] : regsOfRow) {
      Value keep = arith::CmpIOp::create(b, pred, index(sr),
                                         coordinate(l, rs.front(), 0));
      Value c = arith::SelectOp::create(b, keep, cRegs[firstOfRow[row] + sr],
                                        zero);
      for (auto [k, r] : llvm::enumerate(rs)) {
        Value diff = transposed
                         ? arith::SubFOp::create(b, gsr[k], gRegs[r])
                         : arith::SubFOp::create(b, gRegs[r], gsr[k]);
        // Discarded pairs take the exponent 0: no inf times zero.
        Value e = math::ExpOp::create(
            b, arith::SelectOp::create(b, keep, diff, zero));
        out[r] = math::FmaOp::create(b, arith::MulFOp::create(b, c, xsr[k]),
                                     e, out[r]);
      }
    }
  }
  return make(l, out);
}

Value LaneTileBuilder::subTile(Value tile, ArrayRef<int64_t> offsets,
                               ArrayRef<int64_t> sizes) {
  SmallVector<int64_t> s = shape(tile);
  if (ArrayRef<int64_t>(s) == sizes &&
      llvm::all_of(offsets, [](int64_t o) { return o == 0; }))
    return tile;
  return fail("a sub-tile smaller than its tile", sizes);
}

Value LaneTileBuilder::insertSubTile(Value sub, Value tile,
                                     ArrayRef<int64_t> offsets) {
  SmallVector<int64_t> s = shape(tile);
  if (shape(sub) == s &&
      llvm::all_of(offsets, [](int64_t o) { return o == 0; }))
    return sub;
  return fail("an insertion of a sub-tile smaller than its tile", s);
}

Value LaneTileBuilder::rowOf(Value tile, int64_t row) {
  SmallVector<int64_t> s = shape(tile);
  if (s.size() != 2)
    return fail("a row of a tile that is not 2-D", {1});
  const Tile &t = tile_(tile);
  if (!error.empty())
    return fail("", {s[1]});
  const LaneLayout &l = t.layout;
  for (const LaneLayout::Coords &c : l.warps)
    if (c[0] != 0)
      return fail("a row of a tile whose rows are split over warps", {s[1]});
  // The row's part held by registers and the part numbered by lane bits:
  // every lane reads its columns of the row from the lane that holds them
  // (one indexed shuffle a register where rows are on lanes), and the
  // result is a copy on those lane bits.
  int64_t regRowBits = 0;
  for (const LaneLayout::Coords &c : l.regs)
    regRowBits |= c[0];
  LaneFunction from;
  from.c = 0;
  from.m.assign(l.lanes.size(), 0);
  int64_t rest = row & ~regRowBits;
  bool rowsOnLanes = false;
  for (auto [bit, c] : llvm::enumerate(l.lanes)) {
    if (c[0] != 0 && c[1] != 0)
      return fail("a row of a tile whose lane bits split rows and columns "
                  "at once",
                  {s[1]});
    if (c[0] == 0) {
      from.m[bit] = int64_t(1) << bit;
      continue;
    }
    rowsOnLanes = true;
    if (rest & c[0]) {
      rest &= ~c[0];
      from.c |= int64_t(1) << bit;
    }
  }
  if (rest != 0)
    return fail("a row of a tile that no lane holds as one", {s[1]});
  const int64_t regRow = row & regRowBits;
  LaneLayout out;
  out.shape = {s[1]};
  SmallVector<Value> regs;
  Value width = arith::ConstantOp::create(b, b.getI32IntegerAttr(warpSize));
  Value srcLane = rowsOnLanes ? laneIndexI32(from) : Value();
  for (auto [r, c] : llvm::enumerate(l.regs))
    if (c[0] == regRow) {
      out.regs.push_back({c[1]});
      regs.push_back(rowsOnLanes ? gpu::ShuffleOp::create(b, t.regs[r], srcLane,
                                                          width,
                                                          gpu::ShuffleMode::IDX)
                                       .getResult(0)
                                 : t.regs[r]);
    }
  for (const LaneLayout::Coords &c : l.lanes)
    out.lanes.push_back({c[1]});
  for (const LaneLayout::Coords &c : l.warps)
    out.warps.push_back({c[1]});
  return make(out, regs);
}

Value LaneTileBuilder::transpose(Value a) {
  SmallVector<int64_t> s = shape(a);
  if (s.size() != 2)
    return fail("a transpose of a tile that is not 2-D", s);
  const Tile &t = tile_(a);
  if (!error.empty())
    return fail("", {s[1], s[0]});
  Value r = make(t.layout.transposed(), t.regs);
  return isConstantTile(a) ? markConstant(r) : r;
}

