//===- KdaDialect.cpp - the kda dialect -----------------------------------===//

#include "dialect/KdaDialect.h"
#include "dialect/KdaAttrs.h"
#include "dialect/KdaOps.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

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

namespace {
/// Kernel descriptions name their workspaces by role: strings from the set
/// kda-tile-chunks writes.
LogicalResult verifyWorkspaces(function_ref<InFlightDiagnostic()> emitError,
                               StringRef attr, ArrayAttr workspaces) {
  for (Attribute a : workspaces) {
    auto s = dyn_cast<StringAttr>(a);
    if (!s || !llvm::is_contained(
                  ArrayRef<StringRef>{"w", "u", "q", "k", "p", "g"},
                  s.getValue()))
      return emitError() << attr
                         << ": 'workspaces' holds the roles \"w\", \"u\", "
                            "\"q\", \"k\", \"p\", \"g\", found "
                         << a;
  }
  return success();
}
} // namespace

LogicalResult IntraPassAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                    int64_t chunk, int64_t tileChunk,
                                    int64_t subChunk, int64_t keyDim,
                                    int64_t valueDim, ArrayAttr workspaces,
                                    DenseI64ArrayAttr grid,
                                    PrologueAttr prologue, bool gateOutside) {
  if (chunk <= 0 || tileChunk < chunk || tileChunk % chunk != 0)
    return emitError() << "#kda.intra_pass: 'tile_chunk' must be a multiple "
                          "of 'chunk' ("
                       << chunk << "), found " << tileChunk;
  if (subChunk <= 0 || chunk % subChunk != 0)
    return emitError() << "#kda.intra_pass: 'sub_chunk' must divide 'chunk' ("
                       << chunk << "), found " << subChunk;
  if (keyDim <= 0 || valueDim <= 0)
    return emitError() << "#kda.intra_pass: 'key_dim' and 'value_dim' must "
                          "be positive, found "
                       << keyDim << " and " << valueDim;
  if (grid.size() != 3)
    return emitError() << "#kda.intra_pass: 'grid' has the extents of "
                          "(sequence, chunk, head), found "
                       << grid.size() << " of them";
  return verifyWorkspaces(emitError, "#kda.intra_pass", workspaces);
}

LogicalResult StatePassAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                    int64_t chunk, int64_t tileChunk,
                                    int64_t keyDim, int64_t vBlock,
                                    BoolAttr vMajor, BoolAttr boundary,
                                    BoolAttr boundaryPool,
                                    int64_t boundaryInterval,
                                    ArrayAttr workspaces,
                                    DenseI64ArrayAttr grid, int64_t segments,
                                    int64_t valueDim, bool summary) {
  if (segments < 1)
    return emitError() << "#kda.state_pass: 'segments' must be positive, "
                          "found "
                       << segments;
  if (summary && (segments < 2 || valueDim <= 0 || valueDim % vBlock != 0))
    return emitError() << "#kda.state_pass: a summary needs segments > 1 and "
                          "a 'value_dim' that 'v_block' ("
                       << vBlock << ") divides, found segments " << segments
                       << ", value_dim " << valueDim;
  if (chunk <= 0 || tileChunk < chunk || tileChunk % chunk != 0)
    return emitError() << "#kda.state_pass: 'tile_chunk' must be a multiple "
                          "of 'chunk' ("
                       << chunk << "), found " << tileChunk;
  if (keyDim <= 0 || vBlock <= 0)
    return emitError() << "#kda.state_pass: 'key_dim' and 'v_block' must be "
                          "positive, found "
                       << keyDim << " and " << vBlock;
  if (boundary.getValue() &&
      (boundaryInterval <= 0 || boundaryInterval % chunk != 0))
    return emitError() << "#kda.state_pass: 'boundary_interval' must be a "
                          "positive multiple of 'chunk' ("
                       << chunk << "), found " << boundaryInterval;
  if (grid.size() < 2 || grid.size() > 3)
    return emitError() << "#kda.state_pass: 'grid' has the extents of "
                          "(sequence, head[, V block]), found "
                       << grid.size() << " of them";
  return verifyWorkspaces(emitError, "#kda.state_pass", workspaces);
}

LogicalResult WindowPassAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                     int64_t keyDim, int64_t valueDim,
                                     int64_t window, FloatAttr scale,
                                     BoolAttr varlen, BoolAttr earlierKeys) {
  if (keyDim <= 0 || valueDim <= 0)
    return emitError() << "#kda.window_pass: 'key_dim' and 'value_dim' must "
                          "be positive, found "
                       << keyDim << " and " << valueDim;
  if (window < 0)
    return emitError() << "#kda.window_pass: 'window' must be a size >= 1 "
                          "(or 0: per-position sizes), found "
                       << window;
  double s = scale ? scale.getValueAsDouble() : 0.0;
  if (!(s > 0) || !std::isfinite(s))
    return emitError() << "#kda.window_pass: 'scale' must be finite and "
                          "positive, found "
                       << s;
  if (earlierKeys && earlierKeys.getValue() && varlen && varlen.getValue())
    return emitError() << "#kda.window_pass: 'earlier_keys' takes dense "
                          "sequences, not 'varlen'";
  return success();
}

LogicalResult StrategyAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   StringRef kernel, StringRef kind,
                                   StringRef reason, int64_t step,
                                   int64_t tileChunk, StringRef instruction,
                                   StringRef program, int64_t stages) {
  // (gradient: the derived gradient's tile-lowered kernels; reverse and
  // step: its reverse scan and its step grid; chunk: its intra-chunk
  // adjoint; combine: the segments' combine. Missing here, a printed kernel of theirs did not parse again.)
  if (!llvm::is_contained(ArrayRef<StringRef>{"intra", "state", "decode",
                                              "window", "chunkwise",
                                              "elementwise", "gradient",
                                              "reverse", "step", "chunk",
                                              "combine"},
                          kernel))
    return emitError() << "#kda.strategy: 'kernel' is intra, state, decode, "
                          "window, chunkwise, elementwise, gradient, "
                          "reverse, step, chunk or combine, found '"
                       << kernel << "'";
  if (kind != "lanes" && kind != "tiles")
    return emitError() << "#kda.strategy: 'kind' is lanes or tiles, found '"
                       << kind << "'";
  if ((kind == "tiles") == reason.empty())
    return emitError() << "#kda.strategy: a 'reason' goes with tiles and "
                          "only with tiles (kind '"
                       << kind << "', reason '" << reason << "')";
  if (step < 0 || tileChunk < 0 || (step == 0) != (tileChunk == 0) ||
      (step > 0 && tileChunk % step != 0))
    return emitError() << "#kda.strategy: 'step' and 'tile_chunk' go "
                          "together, tile_chunk a multiple of step, found "
                       << step << " and " << tileChunk;
  if (!instruction.empty() && (kind != "lanes" ||
                               !llvm::is_contained(
                                   ArrayRef<StringRef>{"mma_sync", "wgmma",
                                                       "mfma", "wmma",
                                                       "wmma_emulated"},
                                   instruction)))
    return emitError() << "#kda.strategy: 'instruction' is mma_sync, wgmma, "
                          "mfma or wmma, "
                          "for lanes only, found '"
                       << instruction << "' (kind '" << kind << "')";
  if (!program.empty() &&
      (kind != "lanes" || program != "derived"))
    return emitError() << "#kda.strategy: 'program' is derived, for lanes "
                          "only, found '"
                       << program << "' (kind '" << kind << "')";
  if (stages != 0 && (kind != "lanes" || stages < 2 || stages > 8))
    return emitError() << "#kda.strategy: 'stages' is 0 or 2 to 8, for "
                          "lanes only, found "
                       << stages << " (kind '" << kind << "')";
  return success();
}
