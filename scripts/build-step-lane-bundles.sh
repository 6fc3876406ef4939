#!/usr/bin/env bash
# The GPU suite's bundles with the gradient's step and chunk grids on lanes
# (kda-compile --step-registers --chunk-registers: LaneStateProgram::emitStep,
# the state step's adjoint with respect to each chunk's inputs on the state
# program's layouts; IntraProgram::emitAdjoint, the intra-chunk part
# recomputed under the tape and its adjoint on the intra program's layouts).
# Both switches are off by default until the suite's gradient cases
# (test_gpu.py -k grad, test_torch.py's grad and layer parts) and the
# sanitizers pass with them on the GPU machine.
#
# Usage: scripts/build-step-lane-bundles.sh OUT_DIR
# then, on the GPU machine:
#   KDA_EXPECT_STEP=lanes KDA_EXPECT_CHUNK=lanes test/gpu/run.sh OUT_DIR
# (the gradient cases then assert that their step and chunk kernels ran on
# lanes)
# Environment: as scripts/build-gpu-bundles.sh (KDA_COMPILE: the real
# kda-compile; this script sets KDA_COMPILE_FLAGS).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
KDA_COMPILE_FLAGS="--step-registers --chunk-registers" SET=${SET:-none} \
  exec "$root/scripts/build-gpu-bundles.sh" "$1"
