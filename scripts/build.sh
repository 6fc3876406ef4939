#!/usr/bin/env bash
# Configures and builds kda in ./build (or $KDA_BUILD_DIR). Idempotent.
# KDA_CMAKE_ARGS: extra configure options (scripts/fuzz.sh, scripts/sanitize.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KDA_BUILD_DIR:-$root/build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DLLVM_USE_LINKER=lld \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit ${KDA_CMAKE_ARGS:-}
fi
cmake --build "$build" "$@"
