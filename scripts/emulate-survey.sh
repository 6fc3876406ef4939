#!/usr/bin/env bash
# Runs every `kda-run ... --check` configuration of test/cpu through the GPU
# pipeline's kernels on the CPU emulator (kda-run --emulate, tools/kda-run/
# Emulator.h): each line says ok, FAIL (a result past its bar) or ERR (the
# message: a compile refusal, an op the emulator does not run, a race on
# shared memory). A sweep for a change to the lane kernels while no GPU is
# at hand; test/emulate holds the subset CI runs.
#
# Usage: scripts/emulate-survey.sh [CHIP] [THREADS]   (default sm_90a 128)
# Environment: KDA_RUN (default build/bin/kda-run), EMULATE_PIPELINE (more
# pipeline options, e.g. "step-prefetch=true").
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
chip=${1:-sm_90a}
threads=${2:-128}
run=${KDA_RUN:-build/bin/kda-run}
ok=0 bad=0
for f in test/cpu/*.mlir; do
  while read -r file args; do
    file=${file/\%s/$f}
    file=${file/\%S/test\/cpu}
    # shellcheck disable=SC2086
    out=$(timeout 600 "$run" "$file" $args --emulate="$chip" \
          --emulate-pipeline="threads=$threads ${EMULATE_PIPELINE:-}" 2>&1)
    st=$?
    if grep -q "FAIL" <<<"$out"; then
      r=FAIL
    elif [ $st -ne 0 ]; then
      r="ERR: $(grep -m1 error <<<"$out" | cut -c1-200)"
    else
      r=ok
    fi
    [ "$r" = ok ] && ok=$((ok + 1)) || bad=$((bad + 1))
    echo "$(basename "$file") $args :: $r"
  done < <(grep -h "^// RUN: kda-run" "$f" | grep -- "--check" |
           grep -v "inject-fault\|--input" | sed 's|^// RUN: kda-run ||; s/|.*//')
done
echo "emulate-survey ($chip, $threads threads): $ok ok, $bad not"
