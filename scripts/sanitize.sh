#!/usr/bin/env bash
# Builds every kda target with AddressSanitizer + UndefinedBehaviorSanitizer
# (clang-22, -fsanitize=address,undefined -fno-omit-frame-pointer) in
# ./build-asan (or $KDA_ASAN_BUILD_DIR) and runs the whole test suite (ctest:
# lit + unit tests) on it. LLVM/MLIR are Debian's uninstrumented libraries:
# reports are about kda's code. Tests that load kda libraries into an
# uninstrumented host (stock mlir-opt, python, the install test) are
# UNSUPPORTED there (lit feature `asan`).
# Installs libclang-rt-22-dev (the sanitizer runtimes) when it is missing.
# Extra arguments go to ctest (e.g. -R lit).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KDA_ASAN_BUILD_DIR:-$root/build-asan}
jobs=${KDA_JOBS:-2}
# The sanitizer and libFuzzer runtimes (not in scripts/setup.sh: only these
# scripts need them).
if ! dpkg-query -W -f='${Status}' libclang-rt-22-dev 2>/dev/null | grep -q "install ok installed"; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends libclang-rt-22-dev
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DLLVM_USE_LINKER=lld \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DKDA_SANITIZE=ON
fi
cmake --build "$build" -j "$jobs"
# No leak checking (upstream MLIR's exit-time allocations would drown it).
# allow_user_poisoning=0: LLVM's inline BumpPtrAllocator, compiled into kda's
# instrumented code, poisons slabs that the uninstrumented libMLIR then reads
# (a use-after-poison in FileLineColRange::get on every parse). Halt on the
# first UBSan report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allow_user_poisoning=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
ctest --output-on-failure "$@"
