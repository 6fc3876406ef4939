//===- LaneBuilder.h - scalar builders of the per-lane GPU programs --------===//
//
// The kernels written per lane (GpuStateRegisters, GpuIntraRegisters,
// GpuDecodeRegisters) build their programs from index and f32 arithmetic on
// one ImplicitLocOpBuilder; these are the shorthands they share.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_LOWERING_LANEBUILDER_H
#define KDA_LOWERING_LANEBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::kda {

struct LaneBuilder {
  ImplicitLocOpBuilder &b;

  explicit LaneBuilder(ImplicitLocOpBuilder &b) : b(b) {}

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value i32(int64_t v) {
    return arith::ConstantOp::create(b, b.getI32IntegerAttr(v));
  }
  Value f32(double v) {
    return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value add(Value x, int64_t c) { return c == 0 ? x : add(x, idx(c)); }
  Value mul(Value x, int64_t c) {
    return c == 1 ? x : arith::MulIOp::create(b, x, idx(c));
  }
  Value minu(Value x, Value y) { return arith::MinUIOp::create(b, x, y); }
  Value ult(Value x, Value y) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::ult, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, c, x, y);
  }
  Value fadd(Value x, Value y) { return arith::AddFOp::create(b, x, y); }
  Value fsub(Value x, Value y) { return arith::SubFOp::create(b, x, y); }
  Value fmul(Value x, Value y) { return arith::MulFOp::create(b, x, y); }
  Value fma(Value x, Value y, Value acc) {
    return math::FmaOp::create(b, x, y, acc);
  }
  Value toF32(Value v) {
    return v.getType().isF32() ? v
                               : arith::ExtFOp::create(b, b.getF32Type(), v);
  }
  Value fromF32(Value v, Type t) {
    return t.isF32() ? v : arith::TruncFOp::create(b, t, v);
  }
};

} // namespace mlir::kda

#endif // KDA_LOWERING_LANEBUILDER_H
