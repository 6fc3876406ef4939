#!/usr/bin/env bash
# Builds, on this machine (kda-compile, no GPU needed), every bundle the GPU
# test suite needs plus the common set of kda.prebuild, into OUT_DIR, in the
# cache layout kda.ops reads. Carry OUT_DIR to the GPU machine and run
#   test/gpu/run.sh OUT_DIR
#
# Usage: scripts/build-gpu-bundles.sh OUT_DIR [chip...]   (default chip sm_90a)
# Environment: KDA_COMPILE (default build/bin/kda-compile), PYTHON (python3),
# JOBS (parallel kda-compile runs, default nproc), SET (kda.prebuild's
# built-in set: common (default) or none, i.e. only the test configurations),
# KDA_COMPILE_FLAGS (more kda-compile flags for every bundle, e.g.
# --emulate-wmma: scripts/build-emulated-amd-bundles.sh; or
# --chunk-registers=false: the gradient's chunk grid on its tile lowering).
# Exit status 1 if any configuration failed to compile (the others are built;
# OUT_DIR/prebuild-report.json lists every result with kda-compile's message).
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 OUT_DIR [chip...]" >&2
  exit 2
fi
out=$1
shift
chips=("$@")
[ ${#chips[@]} -eq 0 ] && chips=(sm_90a)
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
export KDA_COMPILE=${KDA_COMPILE:-$root/build/bin/kda-compile}
# shellcheck source=scripts/kda-compile-flags.sh
source "$root/scripts/kda-compile-flags.sh"
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
# The suite runs without a tuning database (test/gpu/run.sh): no tuned tiles.
export KDA_TUNING_DB=
mkdir -p "$out"

"$py" "$root/test/gpu/test_gpu.py" --print-configs > "$out/test-gpu-configs.json"
"$py" "$root/test/gpu/test_torch.py" --print-configs > "$out/test-torch-configs.json"
chip_args=()
for c in "${chips[@]}"; do chip_args+=(--chip "$c"); done
"$py" -m kda.prebuild "${chip_args[@]}" --out "$out" --set "${SET:-common}" \
  --configs "$out/test-gpu-configs.json" --configs "$out/test-torch-configs.json" \
  --jobs "${JOBS:-$(nproc)}" --segments 4,8,16
