#!/usr/bin/env bash
# The GPU suite's bundles with the gradient's chunk grid on lanes
# (kda-compile --chunk-registers: IntraProgram::emitAdjoint, the intra-chunk
# part recomputed under the tape and its adjoint on the intra program's
# layouts). The switch is off by default until the sanitizers have run it on
# the GPU machine (the suite's gradient cases passed with it, thirtieth
# session; its --sanitize subset has a K = 128 gradient case for it).
#
# Usage: scripts/build-chunk-lane-bundles.sh OUT_DIR
# then, on the GPU machine:
#   KDA_EXPECT_STEP=lanes KDA_EXPECT_CHUNK=lanes test/gpu/run.sh OUT_DIR -k grad
# (the gradient cases then assert that their step and chunk kernels ran on
# lanes: K = 128 with the lower-bound gate; K = 64 at 8 warps and the
# softplus gate take the tiles, and say so) and test/gpu/run.sh OUT_DIR for
# the whole suite with the sanitizers.
# Environment: as scripts/build-gpu-bundles.sh (KDA_COMPILE: the real
# kda-compile; this script sets KDA_COMPILE_FLAGS).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
KDA_COMPILE_FLAGS=--chunk-registers SET=${SET:-none} \
  exec "$root/scripts/build-gpu-bundles.sh" "$1"
