//===- TileAdjoint.cpp - reverse mode over the tile primitives ------------===//
//
// The rules are docs/backward.md's table, one per primitive, each emitted
// with the primitives themselves on the inner builder.
//
//===----------------------------------------------------------------------===//

#include "passes/TileAdjoint.h"

#include "passes/ScalarAdjoint.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/ScopeExit.h"

using namespace mlir;
using namespace mlir::kda;

namespace {
enum class Kind {
  Filled,
  Map,
  Matmul,
  MatmulAdd,
  Vecmat,
  RowSum,
  RowMax,
  PrefixSumRows,
  InvertUnitLower,
  DecayedPairs,
  Park,
  SubTile,
  InsertSubTile,
  RowOf,
  Transpose,
};

/// A map body held as IR: a block not in any region, whose arguments are the
/// body's scalars then its indices. Dropped with the tape.
struct BodyDeleter {
  void operator()(Block *block) const {
    block->dropAllDefinedValueUses();
    block->clear();
    delete block;
  }
};
} // namespace

struct TapeTileBuilder::Entry {
  Kind kind;
  SmallVector<Value> inputs;
  Value result;
  SmallVector<int64_t> shape;   // map: the result shape
  SmallVector<Broadcast> casts; // map: each operand's broadcast
  SmallVector<int64_t> offsets; // subTile, insertSubTile; rowOf: {row}
  bool transA = false, transB = false, inclusive = false;
  bool rangeSensitive = false; // matmul: rangeSensitiveProducts was on
  std::unique_ptr<Block, BodyDeleter> body; // map
  Value bodyResult;                         // map: in `body`, or outside it
};

TapeTileBuilder::TapeTileBuilder(TileBuilder &inner)
    : TileBuilder(inner.builder()), inner(inner) {}

TapeTileBuilder::~TapeTileBuilder() = default;

namespace {
std::unique_ptr<TapeTileBuilder::Entry> entry(Kind kind, ValueRange inputs,
                                              Value result) {
  auto e = std::make_unique<TapeTileBuilder::Entry>();
  e->kind = kind;
  e->inputs.assign(inputs.begin(), inputs.end());
  e->result = result;
  return e;
}
} // namespace

SmallVector<int64_t> TapeTileBuilder::shape(Value tile) {
  return inner.shape(tile);
}

Value TapeTileBuilder::filled(ArrayRef<int64_t> shape, double value) {
  return inner.filled(shape, value); // a constant: nothing to record
}

Value TapeTileBuilder::map(ArrayRef<int64_t> shape,
                           ArrayRef<TileOperand> operands, MapBody body,
                           Type resultType) {
  auto e = entry(Kind::Map, {}, Value());
  for (const TileOperand &o : operands) {
    e->inputs.push_back(o.value);
    e->casts.push_back(o.broadcast);
  }
  e->shape.assign(shape.begin(), shape.end());
  e->body.reset(new Block());
  Block *copy = e->body.get();
  bool captured = false;
  Value result = inner.map(
      shape, operands,
      [&](ImplicitLocOpBuilder &ib, ValueRange scalars,
          ValueRange ivs) -> Value {
        if (!captured) {
          // The body once more, into the tape's own block, for its adjoint.
          captured = true;
          for (Value s : scalars)
            copy->addArgument(s.getType(), ib.getLoc());
          for (Value i : ivs)
            copy->addArgument(i.getType(), ib.getLoc());
          OpBuilder::InsertionGuard guard(ib);
          ib.setInsertionPointToStart(copy);
          e->bodyResult =
              body(ib, copy->getArguments().take_front(scalars.size()),
                   copy->getArguments().drop_front(scalars.size()));
        }
        return body(ib, scalars, ivs);
      },
      resultType);
  e->result = result;
  tape.push_back(std::move(e));
  return result;
}

Value TapeTileBuilder::matmul(Value a, Value bTile, bool transA, bool transB) {
  Value r = inner.matmul(a, bTile, transA, transB);
  auto e = entry(Kind::Matmul, {a, bTile}, r);
  e->transA = transA;
  e->transB = transB;
  e->rangeSensitive = sensitive;
  tape.push_back(std::move(e));
  return r;
}

Value TapeTileBuilder::matmulAdd(Value acc, Value a, Value bTile, bool transA,
                                 bool transB) {
  Value r = inner.matmulAdd(acc, a, bTile, transA, transB);
  auto e = entry(Kind::MatmulAdd, {acc, a, bTile}, r);
  e->transA = transA;
  e->transB = transB;
  tape.push_back(std::move(e));
  return r;
}

#define KDA_RECORD(KIND, CALL, ...)                                            \
  Value r = inner.CALL;                                                        \
  tape.push_back(entry(Kind::KIND, {__VA_ARGS__}, r));                          \
  return r;

Value TapeTileBuilder::vecmat(Value x, Value a) {
  KDA_RECORD(Vecmat, vecmat(x, a), x, a)
}
Value TapeTileBuilder::rowSum(Value a) { KDA_RECORD(RowSum, rowSum(a), a) }
Value TapeTileBuilder::rowMax(Value a) { KDA_RECORD(RowMax, rowMax(a), a) }
Value TapeTileBuilder::prefixSumRows(Value a) {
  KDA_RECORD(PrefixSumRows, prefixSumRows(a), a)
}
Value TapeTileBuilder::invertUnitLower(Value l) {
  KDA_RECORD(InvertUnitLower, invertUnitLower(l), l)
}
Value TapeTileBuilder::park(Value tile) {
  // A builder whose park is the tile itself (TensorTileBuilder) made no new
  // value: recording it would pass the tile's gradient to itself.
  Value r = inner.park(tile);
  if (r != tile)
    tape.push_back(entry(Kind::Park, {tile}, r));
  return r;
}
Value TapeTileBuilder::transpose(Value a) {
  KDA_RECORD(Transpose, transpose(a), a)
}
#undef KDA_RECORD

void TapeTileBuilder::recordPairs(Value a, Value bTile, Value g,
                                  bool inclusive, Value r) {
  auto e = entry(Kind::DecayedPairs, {a, bTile, g}, r);
  e->inclusive = inclusive;
  tape.push_back(std::move(e));
}

Value TapeTileBuilder::decayedPairs(Value a, Value bTile, Value g,
                                    bool inclusive) {
  Value r = inner.decayedPairs(a, bTile, g, inclusive);
  recordPairs(a, bTile, g, inclusive, r);
  return r;
}

SmallVector<Value> TapeTileBuilder::decayedPairsMany(ArrayRef<Value> as,
                                                     Value bTile, Value g,
                                                     ArrayRef<bool> inclusive) {
  SmallVector<Value> rs = inner.decayedPairsMany(as, bTile, g, inclusive);
  for (auto [a, inc, r] : llvm::zip(as, inclusive, rs))
    recordPairs(a, bTile, g, inc, r);
  return rs;
}

Value TapeTileBuilder::decayedApply(Value dP, Value x, Value g,
                                    bool inclusive, bool transposed) {
  // Only adjoints use it (no second derivative): not recorded.
  return inner.decayedApply(dP, x, g, inclusive, transposed);
}

Value TapeTileBuilder::subTile(Value tile, ArrayRef<int64_t> offsets,
                               ArrayRef<int64_t> sizes) {
  Value r = inner.subTile(tile, offsets, sizes);
  // A builder whose sub-tile of the whole tile is the tile itself (the
  // lane builder) made no new value: recording it would pass the tile's
  // gradient to itself once more (as park; the intra-chunk adjoint on
  // lanes doubled q's and k's gradients).
  if (r == tile)
    return r;
  auto e = entry(Kind::SubTile, {tile}, r);
  e->offsets.assign(offsets.begin(), offsets.end());
  tape.push_back(std::move(e));
  return r;
}

Value TapeTileBuilder::insertSubTile(Value sub, Value tile,
                                     ArrayRef<int64_t> offsets) {
  Value r = inner.insertSubTile(sub, tile, offsets);
  // The whole tile replaced (the lane builder's result is `sub` itself):
  // `sub` keeps its own gradient, the replaced tile gets none.
  if (r == sub)
    return r;
  auto e = entry(Kind::InsertSubTile, {sub, tile}, r);
  e->offsets.assign(offsets.begin(), offsets.end());
  tape.push_back(std::move(e));
  return r;
}

Value TapeTileBuilder::rowOf(Value tile, int64_t row) {
  Value r = inner.rowOf(tile, row);
  auto e = entry(Kind::RowOf, {tile}, r);
  e->offsets = {row};
  tape.push_back(std::move(e));
  return r;
}

FailureOr<SmallVector<Value>>
TapeTileBuilder::emitAdjoint(ArrayRef<std::pair<Value, Value>> seeds,
                             ArrayRef<Value> wrt, std::string &why) {
  TileBuilder &tb = inner;
  llvm::DenseMap<Value, Value> grads;
  auto add = [&](Value x, Value dx) {
    auto it = grads.find(x);
    if (it == grads.end()) {
      grads[x] = dx;
      return;
    }
    it->second = tb.map(tb.shape(dx), {it->second, dx},
                        [](ImplicitLocOpBuilder &ib, ValueRange s,
                           ValueRange) -> Value {
                          return arith::AddFOp::create(ib, s[0], s[1]);
                        });
  };
  for (auto [x, dx] : seeds)
    add(x, dx);
  // Scalars among `wrt` (A_log): map bodies capture them rather than take
  // them as operands. Their gradients are [1] tiles.
  SmallVector<Value> watched;
  for (Value w : wrt)
    if (isa<FloatType>(w.getType()))
      watched.push_back(w);
  auto isFloatTile = [&](Value v) {
    Type t = v.getType();
    if (auto shaped = dyn_cast<ShapedType>(t))
      t = shaped.getElementType();
    return isa<FloatType>(t);
  };
  auto zeros = [&](Value like) { return tb.filled(tb.shape(like), 0.0); };
  auto identity = [](ImplicitLocOpBuilder &, ValueRange s, ValueRange) {
    return s[0];
  };
  auto mul = [](ImplicitLocOpBuilder &ib, ValueRange s, ValueRange) -> Value {
    return arith::MulFOp::create(ib, s[0], s[1]);
  };

  // Activity: the values computed from a `wrt` (or from a watched scalar a
  // map body captures). Only those take gradients: the others' would be
  // dead code, and a builder that cannot emit some dead product (a lane
  // builder's layouts) would fail for nothing. (The reverse scan of the
  // gradient asks only for the state's: without this, every matmul rule
  // also built the gradient of its workspace operand.)
  llvm::DenseSet<Value> active(wrt.begin(), wrt.end());
  for (const std::unique_ptr<Entry> &ep : tape) {
    const Entry &e = *ep;
    bool act = llvm::any_of(e.inputs,
                            [&](Value v) { return active.contains(v); });
    if (!act && e.kind == Kind::Map && e.body && !watched.empty()) {
      for (Value w : watched) {
        act |= e.bodyResult == w;
        e.body->walk([&](Operation *op) {
          act |= llvm::is_contained(op->getOperands(), w);
        });
      }
    }
    if (act)
      active.insert(e.result);
  }
  auto live = [&](Value v) { return active.contains(v); };

  for (auto it = tape.rbegin(); it != tape.rend(); ++it) {
    Entry &e = **it;
    auto found = grads.find(e.result);
    if (found == grads.end() || !live(e.result))
      continue;
    Value dy = found->second;
    const SmallVector<Value> &in = e.inputs;
    switch (e.kind) {
    case Kind::Filled:
      break;
    case Kind::Park:
      add(in[0], dy);
      break;
    case Kind::Transpose:
      add(in[0], tb.transpose(dy));
      break;
    case Kind::MatmulAdd:
    case Kind::Matmul: {
      // C = op(a) op(b): d op(a) = dC op(b)^T, d op(b) = op(a)^T dC, with
      // the transposes folded into the flags.
      size_t first = e.kind == Kind::MatmulAdd ? 1 : 0;
      if (first && live(in[0]))
        add(in[0], dy);
      Value a = in[first], bt = in[first + 1];
      // The factored decayed pairs' products: their gradients meet in a
      // difference of large terms (dG = a da - b db of e^{+-G}-scaled rows),
      // which a single TF32 product's error swamps (thirty-ninth session).
      if (e.rangeSensitive)
        tb.preciseProducts(true);
      auto restore = llvm::make_scope_exit([&] {
        if (e.rangeSensitive)
          tb.preciseProducts(false);
      });
      // A gradient that exists already takes the product accumulated into
      // it (matmulAdd): a matrix instruction accumulates in place, in the
      // accumulator's own layout (the lane builder's state, whose layout a
      // fresh product's would not match); elsewhere the same sum.
      auto addProduct = [&](Value x, Value l, Value r, bool tl, bool tr) {
        auto it = grads.find(x);
        if (it == grads.end())
          grads[x] = tb.matmul(l, r, tl, tr);
        else
          it->second = tb.matmulAdd(it->second, l, r, tl, tr);
      };
      if (live(a)) {
        if (e.transA)
          addProduct(a, bt, dy, e.transB, true);
        else
          addProduct(a, dy, bt, false, !e.transB);
      }
      if (live(bt)) {
        if (e.transB)
          addProduct(bt, dy, a, true, e.transA);
        else
          addProduct(bt, a, dy, !e.transA, false);
      }
      break;
    }
    case Kind::Vecmat: {
      // y[N] = x[M] a[M, N]: dx = a dy, da = x dy^T.
      SmallVector<int64_t> s = tb.shape(in[1]);
      if (live(in[0]))
        add(in[0], tb.rowSum(tb.map(s, {in[1], perColumn(dy)}, mul)));
      // (The gradient laid out like the forward's matrix, an operand the
      // body does not read: a lane builder needs a full operand to place a
      // tile of more than a few elements.)
      if (live(in[1]))
        add(in[1], tb.map(s, {in[1], perRow(in[0]), perColumn(dy)},
                          [](ImplicitLocOpBuilder &ib, ValueRange x,
                             ValueRange) -> Value {
                            return arith::MulFOp::create(ib, x[1], x[2]);
                          }));
      break;
    }
    case Kind::RowSum:
      add(in[0], tb.map(tb.shape(in[0]), {in[0], perRow(dy)},
                        [](ImplicitLocOpBuilder &, ValueRange x, ValueRange) {
                          return x[1];
                        }));
      break;
    case Kind::PrefixSumRows: {
      // G_i = sum_{j <= i} a_j: da_i = sum_{j >= i} dG_j, the column total
      // less the inclusive prefix, plus dG_i.
      SmallVector<int64_t> s = tb.shape(in[0]);
      if (s.size() != 2) {
        why = "prefixSumRows of a tile of rank " + std::to_string(s.size()) +
              " (the rule is for [M, N] tiles)";
        return failure();
      }
      Value total = tb.vecmat(tb.filled({s[0]}, 1.0), dy);
      Value prefix = tb.prefixSumRows(dy);
      add(in[0], tb.map(s, {perColumn(total), prefix, dy},
                        [](ImplicitLocOpBuilder &ib, ValueRange v,
                           ValueRange) -> Value {
                          return arith::AddFOp::create(
                              ib, arith::SubFOp::create(ib, v[0], v[1]), v[2]);
                        }));
      break;
    }
    case Kind::InvertUnitLower: {
      // A = (I + L)^-1: dL = strict_tril(-A^T dA A^T).
      Value a = e.result;
      Value t = tb.matmul(tb.matmul(a, dy, /*transA=*/true), a, false,
                          /*transB=*/true);
      add(in[0], tb.map(tb.shape(t), {t},
                        [](ImplicitLocOpBuilder &ib, ValueRange v,
                           ValueRange ivs) -> Value {
                          Value below = arith::CmpIOp::create(
                              ib, arith::CmpIPredicate::ult, ivs[1], ivs[0]);
                          Value zero = arith::ConstantOp::create(
                              ib, ib.getF32FloatAttr(0.0));
                          return arith::SelectOp::create(
                              ib, below, arith::NegFOp::create(ib, v[0]),
                              zero);
                        }));
      break;
    }
    case Kind::DecayedPairs: {
      // P_ij = sum_d a_id b_jd exp(g_id - g_jd): the two sums with the
      // forward's exponents, and dg = a da - b db.
      Value a = in[0], bt = in[1], g = in[2];
      Value da = tb.decayedApply(dy, bt, g, e.inclusive, false);
      Value db = tb.decayedApply(dy, a, g, e.inclusive, true);
      if (live(a))
        add(a, da);
      if (live(bt))
        add(bt, db);
      if (live(g))
        add(g, tb.map(tb.shape(g), {a, da, bt, db},
                    [](ImplicitLocOpBuilder &ib, ValueRange v,
                       ValueRange) -> Value {
                      return arith::SubFOp::create(
                          ib, arith::MulFOp::create(ib, v[0], v[1]),
                          arith::MulFOp::create(ib, v[2], v[3]));
                    }));
      break;
    }
    case Kind::SubTile:
      add(in[0], tb.insertSubTile(dy, zeros(in[0]), e.offsets));
      break;
    case Kind::InsertSubTile: {
      SmallVector<int64_t> s = tb.shape(in[0]);
      if (live(in[0]))
        add(in[0], tb.subTile(dy, e.offsets, s));
      if (live(in[1]))
        add(in[1], tb.insertSubTile(tb.filled(s, 0.0), dy, e.offsets));
      break;
    }
    case Kind::RowOf: {
      // dy in row `row`, zeros elsewhere: a masked map where the tile
      // lives (the forward tile gives the layout; its values are not read),
      // which every builder takes (a lane builder inserts no sub-tiles).
      SmallVector<int64_t> s = tb.shape(in[0]);
      const int64_t row = e.offsets[0];
      add(in[0], tb.map(s, {in[0], perColumn(dy)},
                        [row](ImplicitLocOpBuilder &ib, ValueRange v,
                              ValueRange ivs) -> Value {
                          Value here = arith::CmpIOp::create(
                              ib, arith::CmpIPredicate::eq, ivs[0],
                              arith::ConstantIndexOp::create(ib, row));
                          return arith::SelectOp::create(
                              ib, here, v[1],
                              arith::ConstantOp::create(
                                  ib, ib.getZeroAttr(v[1].getType())));
                        }));
      break;
    }
    case Kind::RowMax:
      why = "rowMax has no adjoint rule (a softmax's stabilizer; the window "
            "backward will give it one)";
      return failure();
    case Kind::Map: {
      if (!isFloatTile(e.result))
        break;
      Block *body = e.body.get();
      size_t n = in.size();
      if (!e.bodyResult || body->getNumArguments() < n)
        break; // the body never ran (an empty tile)
      // d y / d (operand `wrt`) * dy over the tile: a map of the forward's
      // operands, the `captured` scalar as one more (a tile of it, `splat`)
      // where one is differentiated, and dy, whose body is the recorded body
      // followed by its scalar adjoint.
      auto partial = [&](size_t wrt, Value captured,
                         Value splat) -> FailureOr<Value> {
        SmallVector<TileOperand> operands;
        for (size_t i = 0; i < n; ++i)
          operands.push_back({in[i], e.casts[i]});
        if (splat)
          operands.push_back(TileOperand(splat));
        operands.push_back(TileOperand(dy));
        std::string whyNot;
        Value full = tb.map(
            e.shape, operands,
            [&](ImplicitLocOpBuilder &ib, ValueRange s,
                ValueRange ivs) -> Value {
              // The operand differentiated as a value of its own (x 1,
              // folded away later), every scalar the body is given a
              // constant to the walk: on lane tiles two operands may be
              // one register, or one a shuffle of the other (a row of
              // the tile broadcast), which a tensor's block arguments
              // never are.
              Value own = arith::MulFOp::create(
                  ib, s[wrt],
                  arith::ConstantOp::create(
                      ib, ib.getFloatAttr(s[wrt].getType(), 1.0)));
              IRMapping m;
              for (size_t i = 0; i < n; ++i)
                m.map(body->getArgument(i), i == wrt ? own : s[i]);
              for (size_t i = 0; i < ivs.size() &&
                                 n + i < body->getNumArguments();
                   ++i)
                m.map(body->getArgument(n + i), ivs[i]);
              if (captured)
                m.map(captured, wrt == n ? own : s[n]);
              for (Operation &op : *body)
                ib.clone(op, m);
              Value y = m.lookupOrDefault(e.bodyResult);
              Value seed = s.back();
              SmallVector<Value> fixed(s.begin(), s.end());
              llvm::append_range(fixed, ivs);
              FailureOr<SmallVector<Value>> parts = emitScalarAdjoint(
                  ib, y, {own}, seed, whyNot, fixed);
              if (failed(parts) || parts->empty())
                return arith::ConstantOp::create(
                    ib, ib.getZeroAttr(seed.getType()));
              return (*parts)[0];
            });
        if (!whyNot.empty()) {
          why = "map: " + whyNot;
          return failure();
        }
        return full;
      };
      for (size_t k = 0; k < n; ++k) {
        if (!isFloatTile(in[k]) || !live(in[k]))
          continue;
        FailureOr<Value> full = partial(k, Value(), Value());
        if (failed(full))
          return failure();
        switch (e.casts[k]) {
        case Broadcast::None:
          add(in[k], *full);
          break;
        case Broadcast::AlongColumns: // an [M] operand read per row
          add(in[k], tb.rowSum(*full));
          break;
        case Broadcast::AlongRows: // an [N] operand read per column
          add(in[k], tb.vecmat(tb.filled({e.shape[0]}, 1.0), *full));
          break;
        }
      }
      // A watched scalar the body captures: the body once more with the
      // scalar as an operand (a tile filled with it), differentiated with
      // respect to that operand, summed over the tile to a [1] tile.
      for (Value w : watched) {
        bool captured = false;
        body->walk([&](Operation *op) {
          captured |= llvm::is_contained(op->getOperands(), w);
        });
        if (!captured && e.bodyResult != w)
          continue;
        // (Laid out like the map's first full operand, which a lane
        // builder needs for a tile of more than a few elements; the body
        // ignores it.)
        SmallVector<TileOperand> like;
        for (size_t i = 0; i < n; ++i)
          if (e.casts[i] == Broadcast::None && isFloatTile(in[i])) {
            like.push_back(TileOperand(in[i]));
            break;
          }
        Value splat = tb.map(e.shape, like,
                             [&](ImplicitLocOpBuilder &, ValueRange,
                                 ValueRange) { return w; });
        FailureOr<Value> full = partial(n, w, splat);
        if (failed(full))
          return failure();
        Value vec = e.shape.size() == 2 ? tb.rowSum(*full) : *full;
        int64_t len = tb.shape(vec)[0];
        add(w, tb.rowSum(tb.map({1, len}, {perColumn(vec)}, identity)));
      }
      break;
    }
    }
  }

  SmallVector<Value> out;
  for (Value w : wrt) {
    auto it = grads.find(w);
    if (it != grads.end())
      out.push_back(it->second);
    else
      out.push_back(isa<FloatType>(w.getType()) ? tb.filled({1}, 0.0)
                                                : zeros(w));
  }
  return out;
}
