#!/usr/bin/env bash
# GPU test suite of the kda Python package (not CI): on a machine with an
# NVIDIA GPU, PyTorch, g++ (no MLIR needed), with bundles built elsewhere by
# scripts/build-gpu-bundles.sh:
#   1. builds libkda_runtime.so and liboracle.so with g++ into a temp dir,
#   2. runs test/gpu/test_gpu.py with KDA_BUNDLE_PATH=BUNDLES_DIR (the lookup
#      users' calls do), then its --sanitize subset under compute-sanitizer
#      memcheck and racecheck when compute-sanitizer is installed
#      (KDA_SANITIZE=0 skips that).
# Without torch or a CUDA GPU the test prints "SKIP: no CUDA GPU" and exits 0.
#
# Usage: test/gpu/run.sh BUNDLES_DIR [test_gpu.py args...]
# Environment: CXX (default g++), PYTHON (default python3), WORK (build dir,
# default a fresh mktemp -d), KDA_SANITIZE (default 1).
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 BUNDLES_DIR [test_gpu.py args...]" >&2
  exit 2
fi
bundles=$(cd "$1" && pwd)
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
cxx=${CXX:-g++}
py=${PYTHON:-python3}
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/kda-gpu-test.XXXXXX")}
mkdir -p "$work"
cd "$root"

echo "== build libkda_runtime.so and liboracle.so ($cxx) in $work"
CXX=$cxx runtime/gpu/build-runtime.sh "$work" &
runtime_pid=$!
"$cxx" -std=c++17 -O2 -shared -fPIC -I. test/oracle/Oracle.cpp test/oracle/OracleC.cpp \
  -o "$work/liboracle.so" &
oracle_pid=$!
wait $runtime_pid
wait $oracle_pid

export KDA_RUNTIME_LIBRARY=$work/libkda_runtime.so
export KDA_ORACLE_LIBRARY=$work/liboracle.so
export KDA_BUNDLE_PATH=$bundles
# Bundles must come from BUNDLES_DIR: never compile on the GPU machine.
export KDA_NO_COMPILE=1
# The cases choose their tiles (the chip default, the shape policy's): no
# tuning database, the package's included, replaces them (kda-tune checks
# every tuned candidate against the default tile's output before timing it).
export KDA_TUNING_DB=
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}

echo "== test_gpu.py (bundles from $bundles)"
status=0
"$py" test/gpu/test_gpu.py "$@" || status=$?

# PyTorch integration: custom ops, torch.compile, CUDA graphs and the layer
# against flash-linear-attention's (KDA_FLA_DIR, default .fla: the git-ignored
# export the GPU machine is given; its layer parts skip without it).
if [ $# -eq 0 ]; then
  echo "== test_torch.py"
  KDA_FLA_DIR=${KDA_FLA_DIR:-$root/.fla} "$py" test/gpu/test_torch.py || status=$((status == 0 ? 1 : status))
fi

if [ "${KDA_SANITIZE:-1}" != 0 ] && [ $status -ne 124 ]; then
  sanitizer=$(command -v compute-sanitizer || true)
  [ -z "$sanitizer" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && sanitizer=/usr/local/cuda/bin/compute-sanitizer
  if [ -n "$sanitizer" ] && "$py" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    for tool in memcheck racecheck; do
      echo "== compute-sanitizer --tool $tool: test_gpu.py --sanitize"
      "$sanitizer" --tool "$tool" --error-exitcode 3 --target-processes all \
        "$py" test/gpu/test_gpu.py --sanitize || status=$((status == 0 ? 3 : status))
    done
  else
    echo "== compute-sanitizer or GPU not available: sanitizer runs skipped"
  fi
fi
exit $status
