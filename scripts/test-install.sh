#!/usr/bin/env bash
# Installs a kda build into a fresh prefix, builds examples/downstream against
# the installed CMake package (find_package(Kda CONFIG)) and runs it, and runs
# the installed kda-opt, kda-run and KdaPlugin.so once each. Idempotent.
# Usage: test-install.sh [BUILD_DIR [WORK_DIR]]
#   BUILD_DIR  a built kda tree (default $KDA_BUILD_DIR or ./build)
#   WORK_DIR   prefix and downstream build go here, replaced on every run
#              (default BUILD_DIR/test-install)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-${KDA_BUILD_DIR:-$root/build}}" && pwd)
work=${2:-$build/test-install}
cmake=${CMAKE:-cmake}
prefix=$work/prefix
downstream=$work/downstream

rm -rf "$work"
mkdir -p "$work"

echo "== install into $prefix"
"$cmake" --install "$build" --prefix "$prefix" > "$work/install.log" ||
  { cat "$work/install.log" >&2; exit 1; }
for f in lib/cmake/kda/KdaConfig.cmake lib/cmake/kda/KdaTargets.cmake \
         include/kda/dialect/KdaOps.h include/kda/dialect/KdaOps.h.inc \
         include/kda/passes/Passes.h.inc include/kda/lowering/CpuPipeline.h \
         include/kda/tools/capi/CAPI.h lib/libKdaCAPI.so lib/KdaPlugin.so \
         bin/kda-opt bin/kda-run; do
  [ -e "$prefix/$f" ] || { echo "test-install: missing $prefix/$f" >&2; exit 1; }
done

echo "== configure and build examples/downstream"
"$cmake" -G Ninja -S "$root/examples/downstream" -B "$downstream" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
  -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld \
  -DKda_DIR="$prefix/lib/cmake/kda" > "$work/configure.log" ||
  { cat "$work/configure.log" >&2; exit 1; }
"$cmake" --build "$downstream" > "$work/build.log" || { cat "$work/build.log" >&2; exit 1; }

echo "== run"
"$downstream/kda-downstream"
"$downstream/kda-downstream-capi"

echo "== installed tools"
example=$root/test/integration/Inputs/small-kda.mlir
"$prefix/bin/kda-opt" "$example" --kda-tile-chunks > "$work/kda-opt.mlir"
grep scf.forall "$work/kda-opt.mlir" > /dev/null
echo "kda-opt --kda-tile-chunks: ok"
"$prefix/bin/kda-run" "$example" --check > "$work/kda-run.log" ||
  { cat "$work/kda-run.log" >&2; exit 1; }
grep -E "result 0: .* ok" "$work/kda-run.log"
"${MLIR_OPT:-/usr/lib/llvm-22/bin/mlir-opt}" "$example" \
  --load-dialect-plugin="$prefix/lib/KdaPlugin.so" \
  --load-pass-plugin="$prefix/lib/KdaPlugin.so" \
  --pass-pipeline='builtin.module(func.func(kda-tile-chunks))' > "$work/mlir-opt.mlir"
grep scf.forall "$work/mlir-opt.mlir" > /dev/null
echo "mlir-opt with the installed KdaPlugin.so: ok"
