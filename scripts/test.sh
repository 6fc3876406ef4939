#!/usr/bin/env bash
# Sets up, builds and runs every test: lit (IR, diagnostics, tools, examples)
# and the unit tests, through ctest. GPU tests skip here with a message when
# no GPU is present (scripts/gpu-tests.sh runs them on a GPU machine).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KDA_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
cd "$build"
ctest --output-on-failure
