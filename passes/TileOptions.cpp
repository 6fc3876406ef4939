//===- TileOptions.cpp - validation of tile sizes given as options --------===//

#include "passes/Passes.h"

#include "llvm/ADT/Twine.h"

std::string mlir::kda::checkTileOptions(int64_t chunk, int64_t subChunk,
                                        int64_t vBlock,
                                        llvm::StringRef prefix) {
  if (chunk != 1 && chunk != 16 && chunk != 32 && chunk != 64)
    return (prefix + "chunk must be 1 (the token recurrence), 16, 32 or 64, "
                     "found " +
            llvm::Twine(chunk))
        .str();
  // The recurrence has no sub-chunks: the option is not read.
  if (chunk > 1 && (subChunk < 1 || chunk % subChunk != 0))
    return (prefix + "sub-chunk must be a positive divisor of " + prefix +
            "chunk (" + llvm::Twine(chunk) + "), found " +
            llvm::Twine(subChunk))
        .str();
  if (vBlock < 0)
    return (prefix + "v-block must be >= 0 (0: all of V), found " +
            llvm::Twine(vBlock))
        .str();
  return "";
}
