//===- GpuTileMatmuls.cpp - tile matmuls on NVIDIA tensor cores -----------===//
//
// The tile matmul primitive ([M, K] x [K, N] +=, operands possibly read
// transposed; TileBuilder::matmul) on GPU matrix units, written once
// (emitTileMatmul: warps take output tiles in turn, accumulate over K,
// write back) against a MatrixInstruction that says which elements each lane
// holds and which instruction multiplies them. Fragments are read straight
// from the shared-memory tiles.
//
//   NVIDIA sm_80/sm_90a: mma.sync m16n8k8, tf32 operands. Kernels with
//     bf16/fp16 inputs use one tf32 product (operand rounding 2^-11, well
//     under the 5e-3 bar); fp32 kernels use three (hi*hi + hi*lo + lo*hi,
//     "3xTF32"), which keeps fp32 accuracy (the 1e-4 bar).
//   AMD gfx90a/gfx942 (wave64): v_mfma_f32_16x16x4f32, fp32 operands.
//   AMD gfx1100 (wave32): v_wmma_f32_16x16x16_bf16 for kernels with 16-bit
//     inputs; fp32 kernels keep their matmuls on the vector ALUs.
//
// Matmuls whose sizes are not multiples of the instruction shape (K = 60,
// say) stay scalar: kda-gpu-map-kernels spreads them over threads like any
// other primitive.
//
//===----------------------------------------------------------------------===//

#include "lowering/GpuPipeline.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/AffineMap.h"

#include "lowering/Passes.h"

namespace mlir::kda {
#define GEN_PASS_DEF_KDAGPUTILEMATMULS
#include "lowering/Passes.h.inc"
} // namespace mlir::kda

using namespace mlir;
using mlir::kda::kWarpDistributedAttr;

namespace {

/// out[i, j] += a[i, k] * b[k, j], with a and b possibly stored transposed.
struct TileMatmul {
  Value a, b, out;
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
};

bool isF32Tile(Value v) {
  auto t = dyn_cast<MemRefType>(v.getType());
  return t && t.getRank() == 2 && t.hasStaticShape() &&
         t.getElementType().isF32();
}

/// Recognizes TileBuilder::matmul after bufferization: loops (i, k, j),
/// a multiply-accumulate body.
std::optional<TileMatmul> matchTileMatmul(linalg::GenericOp g) {
  if (g.getNumLoops() != 3 || g.getNumDpsInputs() != 2 ||
      g.getNumDpsInits() != 1 || !g.hasPureBufferSemantics())
    return std::nullopt;
  auto iters = g.getIteratorTypesArray();
  if (iters[0] != utils::IteratorType::parallel ||
      iters[1] != utils::IteratorType::reduction ||
      iters[2] != utils::IteratorType::parallel)
    return std::nullopt;
  TileMatmul mm;
  mm.a = g.getDpsInputs()[0];
  mm.b = g.getDpsInputs()[1];
  mm.out = g.getDpsInits()[0];
  if (!isF32Tile(mm.a) || !isF32Tile(mm.b) || !isF32Tile(mm.out))
    return std::nullopt;
  MLIRContext *ctx = g.getContext();
  AffineExpr i = getAffineDimExpr(0, ctx), k = getAffineDimExpr(1, ctx),
             j = getAffineDimExpr(2, ctx);
  auto map = [&](ArrayRef<AffineExpr> e) { return AffineMap::get(3, 0, e, ctx); };
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  if (maps[2] != map({i, j}))
    return std::nullopt;
  if (maps[0] == map({k, i}))
    mm.transA = true;
  else if (maps[0] != map({i, k}))
    return std::nullopt;
  if (maps[1] == map({j, k}))
    mm.transB = true;
  else if (maps[1] != map({k, j}))
    return std::nullopt;
  // Body: yield acc + a * b.
  Block &body = g.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || body.getOperations().size() != 3)
    return std::nullopt;
  Value acc = body.getArgument(2);
  Value product = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  auto mul = product.getDefiningOp<arith::MulFOp>();
  if (!mul || !(add.getLhs() == acc || add.getRhs() == acc))
    return std::nullopt;
  Value x = body.getArgument(0), y = body.getArgument(1);
  if (!((mul.getLhs() == x && mul.getRhs() == y) ||
        (mul.getLhs() == y && mul.getRhs() == x)))
    return std::nullopt;
  auto outType = cast<MemRefType>(mm.out.getType());
  auto aType = cast<MemRefType>(mm.a.getType());
  mm.m = outType.getDimSize(0);
  mm.n = outType.getDimSize(1);
  mm.k = aType.getDimSize(mm.transA ? 0 : 1);
  return mm;
}

/// The tf32 part of x (low 13 mantissa bits cleared) and the remainder.
std::pair<Value, Value> splitTf32(OpBuilder &b, Location loc, Value x) {
  Type i32 = b.getI32Type();
  Value bits = arith::BitcastOp::create(b, loc, i32, x);
  Value mask = arith::ConstantIntOp::create(b, loc, i32, 0xFFFFE000);
  Value hi = arith::BitcastOp::create(
      b, loc, b.getF32Type(), arith::AndIOp::create(b, loc, bits, mask));
  Value lo = arith::SubFOp::create(b, loc, x, hi);
  return {hi, lo};
}

} // namespace

bool mlir::kda::keepsFp32Accuracy(TypeRange argumentTypes) {
  return llvm::none_of(argumentTypes, [](Type t) {
    auto m = dyn_cast<MemRefType>(t);
    return m && (m.getElementType().isBF16() || m.getElementType().isF16());
  });
}

void mlir::kda::useApproximateMath(Operation *root) {
  auto fast = arith::FastMathFlagsAttr::get(
      root->getContext(),
      arith::FastMathFlags::afn | arith::FastMathFlags::arcp);
  SmallVector<math::Log1pOp> log1ps;
  root->walk([&](Operation *op) {
    if (isa<math::ExpOp, math::Exp2Op, math::LogOp, arith::DivFOp>(op))
      op->setAttr("fastmath", fast);
    else if (auto l = dyn_cast<math::Log1pOp>(op))
      log1ps.push_back(l);
  });
  for (math::Log1pOp l : log1ps) {
    OpBuilder b(l);
    Location loc = l.getLoc();
    Value one = arith::ConstantOp::create(
        b, loc, b.getFloatAttr(l.getType(), 1.0));
    Value sum = arith::AddFOp::create(b, loc, one, l.getOperand());
    Value log = math::LogOp::create(b, loc, sum);
    log.getDefiningOp()->setAttr("fastmath", fast);
    l.replaceAllUsesWith(log);
    l.erase();
  }
}

int64_t mlir::kda::rowVectorWidth(Type elementType, int64_t count) {
  int64_t vec = 16 / (elementType.getIntOrFloatBitWidth() / 8);
  while (count % vec != 0)
    vec /= 2;
  return vec;
}

/// (prefix..., col + i); col itself for i = 0.
static SmallVector<Value> rowIndices(OpBuilder &b, Location loc,
                                     ValueRange prefix, Value col, int64_t i) {
  SmallVector<Value> indices(prefix.begin(), prefix.end());
  indices.push_back(
      i == 0 ? col
             : arith::AddIOp::create(b, loc, col,
                                     arith::ConstantIndexOp::create(b, loc, i))
                   .getResult());
  return indices;
}

SmallVector<Value> mlir::kda::loadRowAsF32(OpBuilder &b, Location loc,
                                           Value mem, ValueRange prefix,
                                           Value col, int64_t width) {
  Type elem = cast<MemRefType>(mem.getType()).getElementType();
  int64_t bytes = elem.getIntOrFloatBitWidth() / 8;
  int64_t vec = rowVectorWidth(elem, width);
  auto toF32 = [&](Value x) -> Value {
    return elem.isF32() ? x : arith::ExtFOp::create(b, loc, b.getF32Type(), x);
  };
  SmallVector<Value> out;
  for (int64_t i = 0; i < width; i += vec) {
    SmallVector<Value> indices = rowIndices(b, loc, prefix, col, i);
    if (vec == 1) {
      out.push_back(toF32(memref::LoadOp::create(b, loc, mem, indices)));
      continue;
    }
    Value x = vector::LoadOp::create(b, loc, VectorType::get({vec}, elem), mem,
                                     indices, /*nontemporal=*/false,
                                     llvm::MaybeAlign(vec * bytes));
    for (int64_t e = 0; e < vec; ++e)
      out.push_back(
          toF32(vector::ExtractOp::create(b, loc, x, ArrayRef<int64_t>{e})));
  }
  return out;
}

void mlir::kda::requireAlignedRows(
    func::FuncOp func,
    llvm::function_ref<bool(llvm::StringRef, MemRefType)> vectorRows) {
  auto abi = func->getAttrOfType<ArrayAttr>("kda.abi");
  if (!abi)
    return;
  MLIRContext *ctx = func.getContext();
  SmallVector<Attribute> entries;
  for (auto [i, a] : llvm::enumerate(abi)) {
    auto d = cast<DictionaryAttr>(a);
    StringRef name = cast<StringAttr>(d.get("name")).getValue();
    auto type = dyn_cast<MemRefType>(func.getArgument(i).getType());
    if (!type || !vectorRows(name, type)) {
      entries.push_back(d);
      continue;
    }
    NamedAttrList attrs(d);
    attrs.set("alignment", IntegerAttr::get(IntegerType::get(ctx, 64), 16));
    entries.push_back(attrs.getDictionary(ctx));
  }
  func->setAttr("kda.abi", ArrayAttr::get(ctx, entries));
}

void mlir::kda::storeRowFromF32(OpBuilder &b, Location loc, Value mem,
                                ValueRange prefix, Value col,
                                ArrayRef<Value> values) {
  Type type = cast<MemRefType>(mem.getType()).getElementType();
  int64_t bytes = type.getIntOrFloatBitWidth() / 8;
  int64_t width = values.size();
  int64_t vec = rowVectorWidth(type, width);
  SmallVector<Value> converted;
  for (Value v : values)
    converted.push_back(type.isF32()
                            ? v
                            : arith::TruncFOp::create(b, loc, type, v)
                                  .getResult());
  for (int64_t i = 0; i < width; i += vec) {
    SmallVector<Value> indices = rowIndices(b, loc, prefix, col, i);
    if (vec == 1) {
      memref::StoreOp::create(b, loc, converted[i], mem, indices);
      continue;
    }
    Value x = vector::FromElementsOp::create(
        b, loc, VectorType::get({vec}, type), ArrayRef(converted).slice(i, vec));
    vector::StoreOp::create(b, loc, x, mem, indices, /*nontemporal=*/false,
                            llvm::MaybeAlign(vec * bytes));
  }
}

Value mlir::kda::emitMmaSyncTf32(OpBuilder &b, Location loc, ValueRange a,
                                 ValueRange bv, Value acc, bool precise) {
  Type f32 = b.getF32Type();
  auto mma = [&](ValueRange x, ValueRange y, Value c) -> Value {
    return nvgpu::MmaSyncOp::create(
               b, loc,
               vector::FromElementsOp::create(
                   b, loc, VectorType::get({4, 1}, f32), x),
               vector::FromElementsOp::create(
                   b, loc, VectorType::get({2, 1}, f32), y),
               c, ArrayRef<int64_t>{16, 8, 8}, /*tf32Enabled=*/true)
        .getResult();
  };
  if (!precise)
    return mma(a, bv, acc);
  SmallVector<Value> aHi, aLo, bHi, bLo;
  for (Value e : a) {
    auto [h, l] = splitTf32(b, loc, e);
    aHi.push_back(h);
    aLo.push_back(l);
  }
  for (Value e : bv) {
    auto [h, l] = splitTf32(b, loc, e);
    bHi.push_back(h);
    bLo.push_back(l);
  }
  acc = mma(aLo, bHi, acc); // small terms first
  acc = mma(aHi, bLo, acc);
  return mma(aHi, bHi, acc);
}

namespace {

using IndexFn = llvm::function_ref<Value(int64_t)>;
using ElementFn = llvm::function_ref<Value(OpBuilder &, Value row, Value col)>;

/// One matrix instruction of a target: its shape, the lanes of one warp
/// (wave), which output elements each lane accumulates, and how it
/// multiplies fragments read through element accessors.
struct MatrixInstruction {
  int64_t warpSize, m, n, k;
  VectorType accType;
  virtual ~MatrixInstruction() = default;
  /// (row, col) in the m x n output tile of accumulator element i.
  virtual std::pair<Value, Value> accElement(OpBuilder &b, Location loc,
                                             Value lane, int64_t i) const = 0;
  /// acc += A[rows, kk:kk+k] * B[kk:kk+k, cols], reading operands through
  /// aAt(row, kcol) / bAt(krow, col) with tile-local row/col bases added.
  virtual Value multiply(OpBuilder &b, Location loc, Value lane, Value rowBase,
                         Value colBase, Value kk, ElementFn aAt, ElementFn bAt,
                         Value acc) const = 0;
};

Value constIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}
Value addIndex(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AddIOp::create(b, loc, x, y);
}
Value addIndex(OpBuilder &b, Location loc, Value x, int64_t c) {
  return c == 0 ? x : addIndex(b, loc, x, constIndex(b, loc, c));
}
Value vectorOf(OpBuilder &b, Location loc, VectorType type, ValueRange elts) {
  return vector::FromElementsOp::create(b, loc, type, elts);
}

/// NVIDIA mma.sync m16n8k8 with tf32 operands (sm_80, sm_90a). Lane layout
/// from the PTX ISA: g = lane / 4 picks rows, t = lane % 4 columns.
struct MmaSyncTf32 : MatrixInstruction {
  bool precise;
  MmaSyncTf32(MLIRContext *ctx, bool precise) : precise(precise) {
    warpSize = 32, m = 16, n = 8, k = 8;
    accType = VectorType::get({2, 2}, Float32Type::get(ctx));
  }
  std::pair<Value, Value> accElement(OpBuilder &b, Location loc, Value lane,
                                     int64_t i) const override {
    Value g = arith::DivUIOp::create(b, loc, lane, constIndex(b, loc, 4));
    Value t = arith::RemUIOp::create(b, loc, lane, constIndex(b, loc, 4));
    Value row = addIndex(b, loc, g, (i / 2) * 8);
    Value col = addIndex(
        b, loc, arith::MulIOp::create(b, loc, t, constIndex(b, loc, 2)), i % 2);
    return {row, col};
  }
  Value multiply(OpBuilder &b, Location loc, Value lane, Value rowBase,
                 Value colBase, Value kk, ElementFn aAt, ElementFn bAt,
                 Value acc) const override {
    Value g = arith::DivUIOp::create(b, loc, lane, constIndex(b, loc, 4));
    Value t = arith::RemUIOp::create(b, loc, lane, constIndex(b, loc, 4));
    Value r0 = addIndex(b, loc, rowBase, g), r1 = addIndex(b, loc, r0, 8);
    Value k0 = addIndex(b, loc, kk, t), k1 = addIndex(b, loc, k0, 4);
    Value col = addIndex(b, loc, colBase, g);
    SmallVector<Value> a = {aAt(b, r0, k0), aAt(b, r1, k0), aAt(b, r0, k1),
                            aAt(b, r1, k1)};
    SmallVector<Value> bv = {bAt(b, k0, col), bAt(b, k1, col)};
    return kda::emitMmaSyncTf32(b, loc, a, bv, acc, precise);
  }
};

/// AMD CDNA (gfx90a, gfx942) v_mfma_f32_16x16x4f32, wave64: full fp32
/// operands. Lane l holds A[l % 16][l / 16], B[l / 16][l % 16] and the
/// outputs C[4 (l / 16) + i][l % 16], i < 4.
struct MfmaF32 : MatrixInstruction {
  explicit MfmaF32(MLIRContext *ctx) {
    warpSize = 64, m = 16, n = 16, k = 4;
    accType = VectorType::get({4}, Float32Type::get(ctx));
  }
  std::pair<Value, Value> accElement(OpBuilder &b, Location loc, Value lane,
                                     int64_t i) const override {
    Value quad = arith::DivUIOp::create(b, loc, lane, constIndex(b, loc, 16));
    Value row = addIndex(
        b, loc, arith::MulIOp::create(b, loc, quad, constIndex(b, loc, 4)), i);
    Value col = arith::RemUIOp::create(b, loc, lane, constIndex(b, loc, 16));
    return {row, col};
  }
  Value multiply(OpBuilder &b, Location loc, Value lane, Value rowBase,
                 Value colBase, Value kk, ElementFn aAt, ElementFn bAt,
                 Value acc) const override {
    Value r = arith::RemUIOp::create(b, loc, lane, constIndex(b, loc, 16));
    Value q = arith::DivUIOp::create(b, loc, lane, constIndex(b, loc, 16));
    Value kIdx = addIndex(b, loc, kk, q);
    Value a = aAt(b, addIndex(b, loc, rowBase, r), kIdx);
    Value bv = bAt(b, kIdx, addIndex(b, loc, colBase, r));
    return amdgpu::MFMAOp::create(b, loc, acc.getType(), /*m=*/16, /*n=*/16,
                                  /*k=*/4, /*blocks=*/1, a, bv, acc)
        .getResult();
  }
};

/// AMD RDNA3 (gfx1100) v_wmma_f32_16x16x16_bf16, wave32: bf16 operands
/// (kernels with 16-bit inputs only), fp32 accumulators. Lane l holds row
/// l % 16 of A and column l % 16 of B (all 16 k), and C[2 i + l / 16][l % 16].
struct WmmaBf16 : MatrixInstruction {
  explicit WmmaBf16(MLIRContext *ctx) {
    warpSize = 32, m = 16, n = 16, k = 16;
    accType = VectorType::get({8}, Float32Type::get(ctx));
  }
  std::pair<Value, Value> accElement(OpBuilder &b, Location loc, Value lane,
                                     int64_t i) const override {
    Value half = arith::DivUIOp::create(b, loc, lane, constIndex(b, loc, 16));
    Value row = addIndex(b, loc, half, 2 * i);
    Value col = arith::RemUIOp::create(b, loc, lane, constIndex(b, loc, 16));
    return {row, col};
  }
  Value multiply(OpBuilder &b, Location loc, Value lane, Value rowBase,
                 Value colBase, Value kk, ElementFn aAt, ElementFn bAt,
                 Value acc) const override {
    Value r = arith::RemUIOp::create(b, loc, lane, constIndex(b, loc, 16));
    Type bf16 = b.getBF16Type();
    SmallVector<Value> a, bv;
    for (int64_t j = 0; j < 16; ++j) {
      Value kj = addIndex(b, loc, kk, j);
      a.push_back(arith::TruncFOp::create(
          b, loc, bf16, aAt(b, addIndex(b, loc, rowBase, r), kj)));
      bv.push_back(arith::TruncFOp::create(
          b, loc, bf16, bAt(b, kj, addIndex(b, loc, colBase, r))));
    }
    auto type = VectorType::get({16}, bf16);
    return amdgpu::WMMAOp::create(b, loc, acc.getType(), /*m=*/16, /*n=*/16,
                                  /*k=*/16, vectorOf(b, loc, type, a),
                                  vectorOf(b, loc, type, bv), acc)
        .getResult();
  }
};

/// The linalg.fill of zero into `out` that `op` follows with no other use
/// of `out` in between, if any. Matmul outputs are whole static tiles that
/// every warp tile covers, so such a fill only sets the starting value.
linalg::FillOp zeroFillBefore(Operation *op, Value out) {
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (auto fill = dyn_cast<linalg::FillOp>(prev);
        fill && fill.getOutputs()[0] == out) {
      auto c = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
      auto f = c ? dyn_cast<FloatAttr>(c.getValue()) : FloatAttr();
      return f && f.getValue().isZero() && !f.getValue().isNegative()
                 ? fill
                 : linalg::FillOp();
    }
    bool touches = false;
    prev->walk([&](Operation *inner) {
      touches |= llvm::is_contained(inner->getOperands(), out);
    });
    if (touches)
      return {};
  }
  return {};
}

/// The tile matmul written once: warps (waves) take output tiles of the
/// instruction's shape in turn, accumulate over K, and write back.
void emitTileMatmul(OpBuilder &b, Location loc, const TileMatmul &mm,
                    int64_t threads, const MatrixInstruction &inst,
                    bool zeroInit) {
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, loc, tid, constIndex(b, loc, inst.warpSize));
  Value warp = arith::DivUIOp::create(b, loc, tid, constIndex(b, loc, inst.warpSize));
  const int64_t tilesN = mm.n / inst.n, tiles = (mm.m / inst.m) * tilesN;
  Value numTiles = constIndex(b, loc, tiles);
  Value numWarps =
      constIndex(b, loc, std::max<int64_t>(threads / inst.warpSize, 1));
  auto loop = scf::ForOp::create(b, loc, warp, numTiles, numWarps);
  loop->setAttr(kWarpDistributedAttr, b.getUnitAttr());
  OpBuilder lb = OpBuilder::atBlockBegin(loop.getBody());
  Value tile = loop.getInductionVar();
  Value rowBase = arith::MulIOp::create(
      lb, loc, arith::DivUIOp::create(lb, loc, tile, constIndex(lb, loc, tilesN)),
      constIndex(lb, loc, inst.m));
  Value colBase = arith::MulIOp::create(
      lb, loc, arith::RemUIOp::create(lb, loc, tile, constIndex(lb, loc, tilesN)),
      constIndex(lb, loc, inst.n));
  int64_t count = inst.accType.getNumElements();
  SmallVector<std::pair<Value, Value>> where;
  SmallVector<Value> accElts;
  for (int64_t i = 0; i < count; ++i) {
    auto [r, c] = inst.accElement(lb, loc, lane, i);
    where.push_back({addIndex(lb, loc, rowBase, r), addIndex(lb, loc, colBase, c)});
    accElts.push_back(
        zeroInit ? arith::ConstantOp::create(
                       lb, loc, lb.getZeroAttr(inst.accType.getElementType()))
                       .getResult()
                 : memref::LoadOp::create(
                       lb, loc, mm.out,
                       ValueRange{where.back().first, where.back().second})
                       .getResult());
  }
  Value acc = vectorOf(lb, loc, inst.accType, accElts);

  auto kLoop = scf::ForOp::create(lb, loc, constIndex(lb, loc, 0),
                                  constIndex(lb, loc, mm.k),
                                  constIndex(lb, loc, inst.k), ValueRange{acc});
  OpBuilder kb = OpBuilder::atBlockBegin(kLoop.getBody());
  auto load = [&](OpBuilder &ob, Value mem, Value r, Value c) -> Value {
    return memref::LoadOp::create(ob, loc, mem, ValueRange{r, c});
  };
  auto aAt = [&](OpBuilder &ob, Value row, Value col) {
    return mm.transA ? load(ob, mm.a, col, row) : load(ob, mm.a, row, col);
  };
  auto bAt = [&](OpBuilder &ob, Value row, Value col) {
    return mm.transB ? load(ob, mm.b, col, row) : load(ob, mm.b, row, col);
  };
  Value sum = inst.multiply(kb, loc, lane, rowBase, colBase,
                            kLoop.getInductionVar(), aAt, bAt,
                            kLoop.getRegionIterArgs()[0]);
  scf::YieldOp::create(kb, loc, sum);

  SmallVector<int64_t> shape(inst.accType.getShape());
  for (int64_t i = 0; i < count; ++i) {
    SmallVector<int64_t> pos(shape.size());
    for (int64_t d = shape.size() - 1, rest = i; d >= 0; --d) {
      pos[d] = rest % shape[d];
      rest /= shape[d];
    }
    Value e = vector::ExtractOp::create(lb, loc, kLoop.getResult(0), pos);
    memref::StoreOp::create(lb, loc, e, mm.out,
                            ValueRange{where[i].first, where[i].second});
  }
}

struct TileMatmulsPass : kda::impl::KdaGpuTileMatmulsBase<TileMatmulsPass> {
  using Base::Base;
  TileMatmulsPass() = default;
  TileMatmulsPass(int64_t threads, StringRef instructions) {
    this->threads = threads;
    this->instructions = instructions.str();
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<gpu::GPUDialect, nvgpu::NVGPUDialect,
                    amdgpu::AMDGPUDialect, vector::VectorDialect,
                    scf::SCFDialect, arith::ArithDialect,
                    memref::MemRefDialect>();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func->hasAttr("kda.kernel"))
      return;
    // fp32 kernels (no 16-bit float argument) keep fp32 accuracy.
    // The segments' combine scans fp32 transitions and states (a product
    // per segment, rounding compounding along the scan): always 3xTF32.
    bool precise = kda::keepsFp32Accuracy(func.getArgumentTypes()) ||
                   func.getSymName().ends_with("_combine");
    MLIRContext *ctx = &getContext();
    std::unique_ptr<MatrixInstruction> inst;
    if (instructions == "mma_sync")
      inst = std::make_unique<MmaSyncTf32>(ctx, precise);
    else if (instructions == "mfma")
      inst = std::make_unique<MfmaF32>(ctx);
    else if (instructions == "wmma")
      inst = precise ? nullptr : std::make_unique<WmmaBf16>(ctx);
    else {
      func.emitError() << "kda-gpu-tile-matmuls: unknown instructions '"
                       << instructions << "'";
      return signalPassFailure();
    }
    // WMMA's bf16 operands would not keep an fp32 kernel's accuracy: those
    // stay on the vector ALUs.
    if (!inst)
      return;
    if (threads % inst->warpSize != 0) {
      // The option cast to its value: streamed as is, 100 printed as 'd'.
      func.emitError() << "kda-gpu-tile-matmuls: "
                       << static_cast<int64_t>(threads)
                       << " threads are not whole warps of " << inst->warpSize;
      return signalPassFailure();
    }
    SmallVector<std::pair<linalg::GenericOp, TileMatmul>> matmuls;
    func.walk([&](linalg::GenericOp g) {
      if (auto mm = matchTileMatmul(g); mm && mm->m % inst->m == 0 &&
                                        mm->n % inst->n == 0 &&
                                        mm->k % inst->k == 0)
        matmuls.push_back({g, *mm});
    });
    for (auto &[g, mm] : matmuls) {
      OpBuilder b(g);
      // A zero fill of the output just before (TileBuilder::matmul's fresh
      // accumulator) becomes zero accumulators: one phase fewer.
      linalg::FillOp fill = zeroFillBefore(g, mm.out);
      emitTileMatmul(b, g.getLoc(), mm, threads, *inst, /*zeroInit=*/!!fill);
      g.erase();
      if (fill)
        fill.erase();
    }
  }
};

} // namespace

std::unique_ptr<Pass>
mlir::kda::createGpuTileMatmulsPass(int64_t threads, StringRef instructions) {
  return std::make_unique<TileMatmulsPass>(threads, instructions);
}

