//===- Sequences.cpp - where a kernel's sequences lie ---------------------===//

#include "passes/Sequences.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::kda;

SequenceLayout::SequenceLayout(ImplicitLocOpBuilder &b, Value tokensCarrier,
                               Value cuSeqlens)
    : cuSeqlens(cuSeqlens) {
  batchSize = tensor::DimOp::create(b, tokensCarrier, 0);
  tokenCount = tensor::DimOp::create(b, tokensCarrier, 1);
  if (cuSeqlens) {
    Value offsets = tensor::DimOp::create(b, cuSeqlens, 0);
    count = arith::SubIOp::create(b, offsets,
                                  arith::ConstantIndexOp::create(b, 1));
    grid = count;
  } else {
    count = batchSize;
    grid = tensor::getMixedSize(b, b.getLoc(), tokensCarrier, 0);
  }
}

SequenceLayout::Bounds SequenceLayout::bounds(ImplicitLocOpBuilder &b,
                                              Value n) const {
  Value zero = arith::ConstantIndexOp::create(b, 0);
  if (!cuSeqlens)
    return {n, zero, tokenCount};
  auto offset = [&](Value i) -> Value {
    Value e = tensor::ExtractOp::create(b, cuSeqlens, ValueRange{i});
    return arith::IndexCastOp::create(b, b.getIndexType(), e);
  };
  Value start = offset(n);
  Value end = offset(
      arith::AddIOp::create(b, n, arith::ConstantIndexOp::create(b, 1)));
  return {zero, start, arith::SubIOp::create(b, end, start)};
}

Value mlir::kda::validRows(ImplicitLocOpBuilder &b, Value block, Value length,
                           Value offset) {
  return arith::MinUIOp::create(b, block,
                                arith::SubIOp::create(b, length, offset));
}

SequenceLayout::Bounds mlir::kda::segmentBounds(ImplicitLocOpBuilder &b,
                                                SequenceLayout::Bounds seq, Value s,
                                     int64_t P, int64_t step) {
  auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, v); };
  Value steps = arith::CeilDivUIOp::create(b, seq.length, c(step));
  Value per = arith::CeilDivUIOp::create(b, steps, c(P));
  Value tokens = arith::MulIOp::create(b, per, c(step));
  Value first = arith::MinUIOp::create(
      b, arith::MulIOp::create(b, s, tokens), seq.length);
  Value end = arith::MinUIOp::create(
      b, arith::AddIOp::create(b, first, tokens), seq.length);
  return {seq.row, arith::AddIOp::create(b, seq.start, first),
          arith::SubIOp::create(b, end, first)};
}
