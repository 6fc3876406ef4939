#!/usr/bin/env bash
# Builds, on this machine (kda-compile, no GPU needed), exactly the bundles
# bench/bench_kda.py needs (its --print-configs: the gated_delta kernels of the
# forward and per-sequence decode cases, the decode_step kernel of the state-pool
# cases) into OUT_DIR, in the cache layout kda.ops reads. Carry OUT_DIR to the
# GPU machine and run
#   bench/run.sh OUT_DIR FLA_DIR
#
# Usage: scripts/build-bench-bundles.sh OUT_DIR [chip...]   (default chip sm_90a)
#        scripts/build-bench-bundles.sh --print-configs     (the configurations, JSON)
# Environment: KDA_COMPILE (default build/bin/kda-compile), PYTHON (python3),
# JOBS (parallel kda-compile runs, default nproc), BENCH_ARGS (extra arguments
# for bench_kda.py --print-configs, e.g. "--chunk 16" or "--cases fwd"), SEGMENTS
# (segment counts whose tiles are built too, for KDA_SEGMENTS; default 4,8,16;
# empty: none), KDA_COMPILE_FLAGS (more kda-compile flags for every bundle, e.g.
# "--step-prefetch": a variant build to time beside the default one with
# bench_kda.py --kda-variant NAME=DIR).
# Exit status 1 if any configuration failed to compile (the others are built;
# OUT_DIR/prebuild-report.json lists every result with kda-compile's message).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
# shellcheck disable=SC2086
if [ "${1:-}" = "--print-configs" ]; then
  exec "$py" "$root/bench/bench_kda.py" --print-configs ${BENCH_ARGS:-}
fi
if [ $# -lt 1 ]; then
  echo "usage: $0 OUT_DIR [chip...] | $0 --print-configs" >&2
  exit 2
fi
out=$1
shift
chips=("$@")
[ ${#chips[@]} -eq 0 ] && chips=(sm_90a)
export KDA_COMPILE=${KDA_COMPILE:-$root/build/bin/kda-compile}
# shellcheck source=scripts/kda-compile-flags.sh
source "$root/scripts/kda-compile-flags.sh"
mkdir -p "$out"

configs=$out/bench-configs.json
# shellcheck disable=SC2086
"$py" "$root/bench/bench_kda.py" --print-configs ${BENCH_ARGS:-} > "$configs"
# bench/bench_cp.py's (context parallelism: the ranks' summaries and finishes)
"$py" "$root/bench/bench_cp.py" --print-configs > "$out/bench-cp-configs.json"
chip_args=()
for c in "${chips[@]}"; do chip_args+=(--chip "$c"); done
"$py" -m kda.prebuild "${chip_args[@]}" --out "$out" --set none \
  --configs "$configs" --configs "$out/bench-cp-configs.json" --jobs "${JOBS:-$(nproc)}" --segments "${SEGMENTS-4,8,16}"
