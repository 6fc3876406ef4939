#!/usr/bin/env bash
# The GPU suite's bundles with every lane kernel (state, intra-chunk, window)
# written for AMD's gfx1100 (WMMA's layouts, its warp splits and its plain
# staged copies: LaneTileBuilder::unitProduct) and each 16x16x16 step
# emulated with shuffles and FMAs (kda-compile --emulate-wmma): the AMD lane
# programs run against the float64 oracle on an NVIDIA GPU, where no AMD GPU
# is at hand. MFMA's own register layouts and the instructions
# themselves are not exercised (they are checked by disassembly:
# test/gpu-codegen/amd-bundle.test).
#
# Usage: scripts/build-emulated-amd-bundles.sh OUT_DIR
# then, on the GPU machine:
#   KDA_EXPECT_STATE_INSTRUCTION=wmma_emulated test/gpu/run.sh OUT_DIR
# (the suite then also asserts that every lane kernel it ran was emulated;
# 16-bit windows with K or V past 128 take tiles on AMD, as it expects).
# Environment: as scripts/build-gpu-bundles.sh (KDA_COMPILE: the real
# kda-compile; this script sets KDA_COMPILE_FLAGS).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
KDA_COMPILE_FLAGS=--emulate-wmma SET=none exec "$root/scripts/build-gpu-bundles.sh" "$1"
