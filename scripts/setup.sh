#!/usr/bin/env bash
# Installs every package kda needs on Debian 12 (idempotent, non-interactive),
# then configures and builds. Extra arguments go to the build (e.g. --target).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  cmake ninja-build python3            # build, lit
  clang-22 lld-22                      # host compiler and linker
  llvm-22-dev llvm-22-tools            # LLVM libraries, FileCheck, lit
  libmlir-22-dev mlir-22-tools         # MLIR libraries, mlir-tblgen
  libgtest-dev                         # unit tests
  libomp-22-dev                        # OpenMP runtime for CPU programs
  python3-venv python3-pip             # the package's install test (a fresh venv)
  python3-setuptools python3-wheel     #   and its wheel, built without network
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

"$root/scripts/build.sh" "$@"
