#!/usr/bin/env bash
# kda against flash-linear-attention on the GPU machine (NVIDIA GPU, PyTorch,
# Triton, g++; no MLIR): builds libkda_runtime.so with g++ into a temp dir and
# runs bench/bench_kda.py with
#   PYTHONPATH = python/ and FLA_DIR (the folder that holds FLA's `fla` package),
#   KDA_BUNDLE_PATH = BUNDLES_DIR (built elsewhere by scripts/build-bench-bundles.sh),
#   KDA_NO_COMPILE=1 (never compile on the GPU machine),
#   FLA_FLASH_KDA=0 and FLA_TILELANG=0 (FLA's Triton kernels, the ones BENCH.md's
#   "flash-linear-attention Triton chunk_kda" column measures; override by
#   setting them before the call).
# FLA's checkout is not part of this repository: pass its location.
#
# Usage: bench/run.sh BUNDLES_DIR FLA_DIR [bench_kda.py args...]
#   e.g. bench/run.sh .benchb .fla --json "$OUT/bench.json"
#        bench/run.sh .benchb .fla --quick --cases "fwd T=8192"
# Environment: CXX (default g++), PYTHON (default python3), WORK (build dir,
# default a fresh mktemp -d).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 BUNDLES_DIR FLA_DIR [bench_kda.py args...]" >&2
  exit 2
fi
bundles=$(cd "$1" && pwd)
fla=$(cd "$2" && pwd)
shift 2
if [ ! -f "$fla/fla/__init__.py" ]; then
  echo "$fla does not hold FLA's package (expected $fla/fla/__init__.py)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
cxx=${CXX:-g++}
py=${PYTHON:-python3}
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/kda-bench.XXXXXX")}
mkdir -p "$work"
cd "$root"

echo "== build libkda_runtime.so ($cxx) in $work"
CXX=$cxx runtime/gpu/build-runtime.sh "$work"

export KDA_RUNTIME_LIBRARY=$work/libkda_runtime.so
export KDA_BUNDLE_PATH=$bundles
export KDA_NO_COMPILE=1
export FLA_FLASH_KDA=${FLA_FLASH_KDA:-0}
export FLA_TILELANG=${FLA_TILELANG:-0}
export PYTHONPATH=$root/python:$fla${PYTHONPATH:+:$PYTHONPATH}

echo "== bench_kda.py (bundles from $bundles, FLA from $fla)"
exec "$py" bench/bench_kda.py "$@"
