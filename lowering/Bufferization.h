//===- Bufferization.h - tiles -> buffers, the same for every target -*- C++ -*-===//

#ifndef KDA_LOWERING_BUFFERIZATION_H
#define KDA_LOWERING_BUFFERIZATION_H

#include "mlir/Pass/PassManager.h"

namespace mlir::kda {

/// One-shot bufferization of the chunkwise tile IR, as every target runs it:
/// function boundaries with identity layouts, and loop-carried tiles (the
/// recurrent state) allowed to be new buffers each chunk.
void addTileBufferization(OpPassManager &pm);

} // namespace mlir::kda

#endif // KDA_LOWERING_BUFFERIZATION_H
