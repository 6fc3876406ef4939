#!/usr/bin/env bash
# Runs every examples/*.mlir with the kda-run arguments on its first line
# (`// KDA-RUN: <args>`). Usage: run-examples.sh [KDA_RUN] [EXAMPLES_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kda_run=${1:-$root/build/bin/kda-run}
dir=${2:-$root/examples}
status=0
for f in "$dir"/*.mlir; do
  first=$(head -n 1 "$f")
  case "$first" in
    "// KDA-RUN:"*) args=${first#"// KDA-RUN:"} ;;
    *) echo "run-examples: $f: first line must be '// KDA-RUN: <args>'" >&2; status=1; continue ;;
  esac
  echo "== $(basename "$f"):$args"
  # shellcheck disable=SC2086  # the arguments are meant to be split
  "$kda_run" "$f" $args || status=1
done
exit $status
