//===- WindowAttentionKernel.h - sliding-window attention, once -*- C++ -*-===//
//
// Causal sliding-window attention (SPEC.md section 5) written once against
// the tile primitives of TileBuilder: the online-softmax step over one block
// of keys (windowStep) and the normalization at the end (windowOutput). Two
// drivers run it: emitWindowAttention below on tensor tiles (every target's
// tile lowering), and the NVIDIA lane kernel (lowering/lanes/
// GpuWindowRegisters.cpp) on register tiles, whose products are mma.sync.
//
//===----------------------------------------------------------------------===//

#ifndef KDA_PASSES_WINDOWATTENTIONKERNEL_H
#define KDA_PASSES_WINDOWATTENTIONKERNEL_H

#include "dialect/KdaOps.h"
#include "passes/TileBuilder.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::kda {

/// The online softmax of a block of R query rows: the running row maximum
/// m [R], the running row sum l [R] and the unnormalized output acc [R, V].
struct SoftmaxState {
  Value m, l, acc;
};

/// Whether key column `col` of the block counts for query row `row`
/// (i1; tile coordinates), given the row's scalars of the map's `rowData`.
using KeyFilter = llvm::function_ref<Value(
    ImplicitLocOpBuilder &b, Value row, Value col, ValueRange rowScalars)>;

/// The state before the first key block: m = -1e30 (finite, so that a row
/// whose keys so far are all masked keeps r = 1 and p = 0 instead of
/// exp(-inf + inf)), l = 0, acc = 0.
SoftmaxState windowStart(TileBuilder &tb, int64_t rows, int64_t valueDim);

/// One block of keys (in base 2, c = scale log2(e); m in those units):
///   s  = Q K^T, -inf where `keep` says the key does not count (no filter:
///        every key counts)
///   m' = max(m, c rowmax(s));  p = exp2(c s - m');  r = exp2(m - m')
///   l  = r l + rowsum(p);      acc = r acc + p V;   m = m'
/// q [R, K], k [B, K], v [B, V]; `rowData` are [R] tiles whose elements
/// `keep` reads per row.
SoftmaxState windowStep(TileBuilder &tb, Value q, Value k, Value v,
                        double scale, KeyFilter keep,
                        ArrayRef<Value> rowData, const SoftmaxState &s);

/// O = acc / l.
Value windowOutput(TileBuilder &tb, const SoftmaxState &s);

/// kda.hybrid's mix of two f32 scalars, written once (kda-decompose's
/// elementwise hybrid, the window kernels' fused epilogues): linear + window
/// without `gate`, else window + sigmoid(z) (linear - window), which is
/// sigmoid(z) linear + (1 - sigmoid(z)) window.
Value mixValue(ImplicitLocOpBuilder &b, Value window, Value linear,
               Value gate);

/// mixValue over the window's output `window` [R, V] and the other branch's
/// rows `linear` [R, V] (kda.window_attention's fused mix), with `gate` z
/// [R] (head-wise), [R, V] (channel-wise) or null (sum).
Value windowMix(TileBuilder &tb, Value window, Value linear, Value gate);

/// The keys query position `qi` attends to start at
/// max(sequenceStart, qi - window + 1) (positions, index values; `window`
/// >= 1).
Value windowFirstKey(ImplicitLocOpBuilder &b, Value qi, Value window);

/// Whether key position `kj` counts for query position `qi` (positions in
/// the sequence, index values): windowFirstKey(qi) <= kj <= qi. Every
/// driver's filter (keys past the sequence are past every real query).
Value windowKeeps(ImplicitLocOpBuilder &b, Value qi, Value kj, Value window);

/// A row's window size carried as f32 in a tile (exact up to 2^24; larger
/// sizes reach every key of any shorter sequence), as an index.
Value windowFromF32(ImplicitLocOpBuilder &b, Value size);

/// Emits the tiled form of `op`: one program per (sequence, output head),
/// query blocks of `chunk` tokens, windowStep over the key blocks the window
/// reaches. Returns the output tensor.
Value emitWindowAttention(ImplicitLocOpBuilder &b, WindowAttentionOp op,
                          int64_t chunk);

} // namespace mlir::kda

#endif // KDA_PASSES_WINDOWATTENTIONKERNEL_H
