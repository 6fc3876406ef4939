//===- KdaDialect.cpp - the kda dialect -----------------------------------===//

#include "dialect/KdaDialect.h"
#include "dialect/KdaAttrs.h"
#include "dialect/KdaOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::kda;

#include "dialect/KdaDialect.cpp.inc"
#include "dialect/KdaEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialect/KdaAttrs.cpp.inc"

void KdaDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/KdaAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialect/KdaOps.cpp.inc"
      >();
}

LogicalResult TileAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t chunk, int64_t subChunk, int64_t vBlock,
                               int64_t warps, int64_t stages,
                               int64_t segments) {
  // Chunk sizes outside {16, 32, 64} either waste the tensor cores (smaller)
  // or make the intra-chunk matrices too large for registers (larger).
  if (chunk != 16 && chunk != 32 && chunk != 64)
    return emitError() << "#kda.tile: 'chunk' must be 16, 32 or 64, found "
                       << chunk;
  if (subChunk <= 0 || chunk % subChunk != 0)
    return emitError() << "#kda.tile: 'sub_chunk' must be a positive divisor "
                          "of 'chunk' ("
                       << chunk << "), found " << subChunk;
  if (vBlock < 0)
    return emitError() << "#kda.tile: 'v_block' must be >= 0 (0: all of V), "
                          "found "
                       << vBlock;
  if (warps <= 0 || (warps & (warps - 1)) != 0 || warps > 16)
    return emitError()
           << "#kda.tile: 'warps' must be a power of two in [1, 16], found "
           << warps;
  if (stages < 1 || stages > 8)
    return emitError() << "#kda.tile: 'stages' must be in [1, 8], found "
                       << stages;
  if (segments < 1)
    return emitError() << "#kda.tile: 'segments' must be >= 1, found "
                       << segments;
  return success();
}
