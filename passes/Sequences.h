//===- Sequences.h - where a kernel's sequences lie -------------*- C++ -*-===//
//
// Every kda kernel runs one program per (sequence, head) over operands laid
// out [B, T, ...]: either B rows of T tokens, or (with cu_seqlens) one row
// packing N sequences back to back. This is the one place that says where
// sequence n's tokens are and how many rows of a block are real tokens.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_PASSES_SEQUENCES_H
#define KDA_PASSES_SEQUENCES_H

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpDefinition.h"

namespace mlir::kda {

class SequenceLayout {
public:
  /// `tokensCarrier` is any [B, T, ...] operand; `cuSeqlens` may be null.
  SequenceLayout(ImplicitLocOpBuilder &b, Value tokensCarrier, Value cuSeqlens);

  Value batch() const { return batchSize; }   // B
  Value tokens() const { return tokenCount; } // T
  Value numSequences() const { return count; } // N
  /// N as a program-grid extent: static when B is and there is no varlen.
  OpFoldResult gridSize() const { return grid; }

  /// Where sequence `n` is: its batch row, first token and token count.
  struct Bounds {
    Value row, start, length;
  };
  Bounds bounds(ImplicitLocOpBuilder &b, Value n) const;

private:
  Value cuSeqlens, batchSize, tokenCount, count;
  OpFoldResult grid;
};

/// Segment `s` of `P` of a sequence at `seq` (sequence-parallel segments,
/// kda-tile-chunks' `segments`): whole steps of `step` tokens, ceil(steps /
/// P) per segment, the last ones shorter or empty. The tile programs and
/// the GPU state programs take their runs from here.
SequenceLayout::Bounds segmentBounds(ImplicitLocOpBuilder &b,
                                     SequenceLayout::Bounds seq, Value s,
                                     int64_t P, int64_t step);

/// How many of the `block` rows starting at sequence-local token `offset` are
/// real tokens of a sequence of `length` tokens: min(block, length - offset).
Value validRows(ImplicitLocOpBuilder &b, Value block, Value length,
                Value offset);

} // namespace mlir::kda

#endif // KDA_PASSES_SEQUENCES_H
