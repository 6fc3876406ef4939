#!/usr/bin/env bash
# Builds the kda Python package as a wheel (python/pyproject.toml), with
# libkda_runtime.so compiled in and, optionally, a directory of prebuilt
# bundles (e.g. scripts/build-bench-bundles.sh BB: sm_90a bundles of BENCH.md's
# configurations), so that a GPU machine without MLIR runs those
# configurations with no compile step. No network: the system's setuptools
# builds it (--no-build-isolation).
#
# Usage: scripts/build-wheel.sh OUT_DIR [BUNDLES_DIR]
#   then: pip install OUT_DIR/kda-*.whl
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: $0 OUT_DIR [BUNDLES_DIR]}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ $# -ge 2 ]; then
  export KDA_WHEEL_BUNDLES
  KDA_WHEEL_BUNDLES=$(cd "$2" && pwd)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A copy of python/ next to runtime/ keeps the source tree free of build/ and
# *.egg-info (setup.py finds the runtime's sources one level up).
mkdir -p "$work/src/runtime"
cp -r "$root/python" "$work/src/python"
cp "$root"/runtime/*.cpp "$root"/runtime/*.h "$work/src/runtime/"
rm -rf "$work/src/python/kda/__pycache__"
"${PYTHON:-python3}" -m pip wheel --no-build-isolation --no-deps -q -w "$out" "$work/src/python"
ls "$out"/kda-*.whl
