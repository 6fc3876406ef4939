//===- WindowAttentionKernel.h - sliding-window attention tiles -*- C++ -*-===//

#ifndef KDA_PASSES_WINDOWATTENTIONKERNEL_H
#define KDA_PASSES_WINDOWATTENTIONKERNEL_H

#include "dialect/KdaOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::kda {

/// Emits the tiled form of `op`: one program per (sequence, output head),
/// query blocks of `chunk` tokens, an online softmax over the key blocks the
/// window reaches. Returns the output tensor.
Value emitWindowAttention(ImplicitLocOpBuilder &b, WindowAttentionOp op,
                          int64_t chunk);

} // namespace mlir::kda

#endif // KDA_PASSES_WINDOWATTENTIONKERNEL_H
