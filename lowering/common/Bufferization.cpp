//===- Bufferization.cpp - tiles -> buffers, the same for every target ----===//

#include "lowering/Bufferization.h"

#include "mlir/Dialect/Bufferization/Transforms/Passes.h"

void mlir::kda::addTileBufferization(OpPassManager &pm) {
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  bufferize.allowReturnAllocsFromLoops = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
}
