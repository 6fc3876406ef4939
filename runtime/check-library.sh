#!/usr/bin/env bash
# Checks libkda_runtime.so: it exports exactly the C API of kda_runtime.h, and
# needs no MLIR, LLVM, CUDA or HIP library (GPU servers have no MLIR; the
# drivers are dlopen'ed).
# Usage: check-library.sh LIBRARY [NM [READELF]]
set -euo pipefail
lib=$1
nm=${2:-nm}
readelf=${3:-readelf}
[ -n "$nm" ] || nm=nm
[ -n "$readelf" ] || readelf=readelf

expected="kda_bundle_entry_name
kda_bundle_free
kda_bundle_kernel_name
kda_bundle_load
kda_bundle_num_entries
kda_bundle_num_kernels
kda_bundle_target_chip
kda_check_tensors
kda_entry_workspace_bytes
kda_last_error
kda_launch
kda_launch_pieces
kda_launch_prepared
kda_launch_trusted
kda_launch_with_workspace
kda_pieces_count
kda_pieces_free
kda_prepare
kda_prepare_pieces
kda_prepared_free
kda_status_name"
exported=$("$nm" -D --defined-only "$lib" | awk '{print $NF}' | LC_ALL=C sort)
if [ "$exported" != "$expected" ]; then
  echo "check-library: $lib exports:" >&2
  echo "$exported" >&2
  echo "expected exactly:" >&2
  echo "$expected" >&2
  exit 1
fi

needed=$("$readelf" -d "$lib" | awk '/NEEDED/ {print $NF}' | tr -d '[]')
if echo "$needed" | grep -Eiq 'mlir|llvm|cuda|hip'; then
  echo "check-library: $lib links: $needed" >&2
  exit 1
fi
echo "check-library: exports the C API only; needs:" $needed
