#!/usr/bin/env bash
# The main job: set up, build, turn the Kimi-Linear-48B-shaped model
# description into one kda module, compile it and run it, checking every
# layer's outputs and final states against the float64 oracle.
# It runs on the CPU (kda-run, MLIR's ExecutionEngine): the GPU backends are
# not built yet (README, "Support"). KDA_MAIN_TOKENS sets the prefill length.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KDA_BUILD_DIR:-$root/build}
tokens=${KDA_MAIN_TOKENS:-256}
"$root/scripts/setup.sh"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "main: a GPU is present, but kda has no GPU backend yet: running on the CPU"
fi
module=$build/kimi-linear-48b.mlir
echo "main: kda-model examples/kimi-linear-48b.json --tokens=$tokens -o $module"
"$build/bin/kda-model" "$root/examples/kimi-linear-48b.json" --tokens="$tokens" -o "$module"
echo "main: kda-run $module --check"
exec "$build/bin/kda-run" "$module" --check
