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
# shellcheck source=scripts/clang-rt.sh
. "$root/scripts/clang-rt.sh"
KDA_BUILD_DIR=$build KDA_CMAKE_ARGS=-DKDA_SANITIZE=ON "$root/scripts/build.sh" -j "$jobs"
# No leak checking (upstream MLIR's exit-time allocations would drown it).
# allow_user_poisoning=0: LLVM's inline BumpPtrAllocator, compiled into kda's
# instrumented code, poisons slabs that the uninstrumented libMLIR then reads
# (a use-after-poison in FileLineColRange::get on every parse). Halt on the
# first UBSan report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allow_user_poisoning=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
ctest --output-on-failure "$@"
