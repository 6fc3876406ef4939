#!/usr/bin/env bash
# The main job: set up, build, compile the example KDA layer and run it,
# checking it against the float64 oracle. It runs on the CPU (kda-run, MLIR's
# ExecutionEngine); the GPU backends are not built yet (see README, "Support").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KDA_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "main: a GPU is present, but kda has no GPU backend yet: running on the CPU"
fi
example=$root/examples/kda_prefill.mlir
args=$(head -n 1 "$example"); args=${args#"// KDA-RUN:"}
echo "main: kda-run $example$args"
# shellcheck disable=SC2086
exec "$build/bin/kda-run" "$example" $args
