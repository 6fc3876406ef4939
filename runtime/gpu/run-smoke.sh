#!/usr/bin/env bash
# GPU smoke test of the kda runtime, for a machine with an NVIDIA GPU (not
# part of CI). Needs g++ and, to build the kernel, nvcc; no CMake, MLIR or LLVM:
#   1. compiles runtime/*.cpp (the library sources) + runtime/gpu/smoke.cpp with
#      g++ -std=c++17 -ldl -lpthread,
#   2. checks runtime/CudaDriver.h against the toolkit's cuda.h,
#   3. builds runtime/gpu/saxpy.cu into cubins for sm_90a and sm_80 with
#      `nvcc -cubin` and writes one bundle (manifest.json + cubin) per chip,
#   4. runs the smoke test (launches the bundle that matches device 0, checks
#      that the other is refused with KDA_ERROR_WRONG_ARCHITECTURE), then again
#      under compute-sanitizer if it is installed.
# Without a driver or GPU the smoke test prints "SKIP: ..." and exits 0.
#
# Usage: runtime/gpu/run-smoke.sh [WORK_DIR]   (default ${TMPDIR:-/tmp}/kda-runtime-smoke)
# Environment: CXX (default g++), NVCC (default nvcc on PATH, else
# /usr/local/cuda/bin/nvcc), CUDA_HOME (default: nvcc's parent directory).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-${TMPDIR:-/tmp}/kda-runtime-smoke}
cxx=${CXX:-g++}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuda_home=${CUDA_HOME:-$(cd "$(dirname "$nvcc")/.." 2>/dev/null && pwd || echo /usr/local/cuda)}

rm -rf "$work"
mkdir -p "$work"
cd "$root"

echo "== build the smoke test ($cxx)"
sources="runtime/CudaDriver.cpp runtime/HipDriver.cpp runtime/Json.cpp runtime/Manifest.cpp runtime/Runtime.cpp"
"$cxx" -std=c++17 -O2 -g -Wall -Wextra -I. $sources runtime/gpu/smoke.cpp -o "$work/smoke" -ldl -lpthread

if [ -f "$cuda_home/include/cuda.h" ]; then
  echo "== check runtime/CudaDriver.h against $cuda_home/include/cuda.h"
  "$cxx" -std=c++17 -fsyntax-only -I. -I"$cuda_home/include" runtime/gpu/cuda_abi_check.cpp
else
  echo "== no cuda.h under $cuda_home/include: ABI check skipped"
fi

if [ ! -x "$nvcc" ]; then
  echo "== no nvcc ($nvcc): cannot build the kernel; running the smoke test without bundles"
  "$work/smoke" || true
  echo "SKIP: no nvcc"
  exit 0
fi

hash=$(sha256sum runtime/gpu/saxpy.cu | cut -d' ' -f1)
bundles=()
for chip in sm_90a sm_80; do
  dir=$work/bundle-$chip
  mkdir -p "$dir"
  echo "== nvcc -cubin -arch=$chip runtime/gpu/saxpy.cu"
  "$nvcc" -cubin -arch="$chip" -O3 runtime/gpu/saxpy.cu -o "$dir/saxpy.$chip.cubin"
  cat > "$dir/manifest.json" <<JSON
{
  "format": "kda-bundle",
  "version": 1,
  "target": {"vendor": "nvidia", "chip": "$chip"},
  "source_hash": "$hash",
  "kernels": [{
    "name": "saxpy",
    "binary": "saxpy.$chip.cubin",
    "entry": "kda_smoke_saxpy",
    "params": [
      {"name": "x", "kind": "tensor", "dtype": "f32", "shape": ["NB", 256], "alignment": 16},
      {"name": "y", "kind": "tensor", "dtype": "f32", "shape": ["NB", 256], "alignment": 16},
      {"name": "NB", "kind": "dim"},
      {"name": "a", "kind": "f32", "value": 2.5},
      {"name": "bias", "kind": "i64", "value": 3}
    ],
    "grid": ["NB", 1, 1],
    "block": [256, 1, 1],
    "dynamic_shared_memory": 65536,
    "tile": {"block": 256}
  }]
}
JSON
  bundles+=("$dir")
done

echo "== smoke test"
"$work/smoke" "${bundles[@]}"

sanitizer=$(command -v compute-sanitizer || true)
for candidate in "$cuda_home/bin/compute-sanitizer" \
                 "$cuda_home/compute-sanitizer/compute-sanitizer"; do
  if [ -z "$sanitizer" ] && [ -x "$candidate" ]; then sanitizer=$candidate; fi
done
if [ -n "$sanitizer" ]; then
  echo "== smoke test under compute-sanitizer (memcheck)"
  "$sanitizer" --tool memcheck --error-exitcode 99 "$work/smoke" "${bundles[@]}"
else
  echo "== compute-sanitizer not found: sanitizer run skipped"
fi
