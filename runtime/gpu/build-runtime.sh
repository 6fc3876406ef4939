#!/usr/bin/env bash
# Builds libkda_runtime.so with the C++ compiler alone (no CMake, MLIR or CUDA
# toolkit), for GPU machines that have none of them: the GPU suite
# (test/gpu/run.sh) and the benchmark (bench/run.sh) use it.
# Usage: runtime/gpu/build-runtime.sh OUT_DIR   (writes OUT_DIR/libkda_runtime.so)
# Environment: CXX (default g++).
set -euo pipefail
out=${1:?usage: $0 OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
cd "$root"
"${CXX:-g++}" -std=c++17 -O2 -shared -fPIC -fvisibility=hidden -DKDA_RUNTIME_BUILDING -I. \
  runtime/CudaDriver.cpp runtime/HipDriver.cpp runtime/Json.cpp runtime/Manifest.cpp runtime/Runtime.cpp \
  -o "$out/libkda_runtime.so" -ldl -lpthread
