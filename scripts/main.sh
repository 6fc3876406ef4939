#!/usr/bin/env bash
# The main job: set up, build, turn the Kimi-Linear-48B-shaped model
# description into one kda module, compile it into one GPU bundle (every
# layer's kernels: kda-compile), and run it, checking every layer's outputs
# and final states against the float64 oracle:
#   - on the CPU always (kda-run, MLIR's ExecutionEngine);
#   - on the GPU when there is one (a CUDA GPU and PyTorch): the GPU suite
#     (test/gpu/run.sh) runs the model's layer configurations, among the
#     others, through kda's bundles and runtime against the same oracle.
# KDA_MAIN_TOKENS sets the prefill length; KDA_MAIN_CHIP the bundle's chip
# (default: the GPU's, else sm_90a).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KDA_BUILD_DIR:-$root/build}
tokens=${KDA_MAIN_TOKENS:-256}
"$root/scripts/setup.sh"

gpu=0
chip=${KDA_MAIN_CHIP:-sm_90a}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpu=1
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' ')
  case "$cap" in
    9.0) chip=${KDA_MAIN_CHIP:-sm_90a} ;;
    8.*) chip=${KDA_MAIN_CHIP:-sm_80} ;;
    *) echo "main: GPU compute capability $cap: kda targets sm_80 and sm_90a"; gpu=0 ;;
  esac
fi

module=$build/kimi-linear-48b.mlir
echo "main: kda-model examples/kimi-linear-48b.json --tokens=$tokens -o $module"
"$build/bin/kda-model" "$root/examples/kimi-linear-48b.json" --tokens="$tokens" -o "$module"

ptxas=${CUDA_ROOT:-/usr/local/cuda}/bin/ptxas
if [ -x "$ptxas" ]; then
  echo "main: kda-compile $module -o $build/kimi-linear-48b.$chip.kda --chip=$chip"
  "$build/bin/kda-compile" "$module" -o "$build/kimi-linear-48b.$chip.kda" --chip="$chip"
else
  echo "main: no ptxas under ${CUDA_ROOT:-/usr/local/cuda}: the GPU bundle is not built"
fi

echo "main: kda-run $module --check"
"$build/bin/kda-run" "$module" --check

if [ $gpu = 1 ] && python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  bundles=$build/gpu-bundles
  echo "main: GPU present ($chip): building the GPU suite's bundles into $bundles and running it"
  SET=none "$root/scripts/build-gpu-bundles.sh" "$bundles" "$chip"
  exec "$root/test/gpu/run.sh" "$bundles"
elif [ $gpu = 1 ]; then
  echo "main: a GPU is present but PyTorch with CUDA is not: the GPU run needs it (python/README.md)"
fi
