#!/usr/bin/env bash
# Builds kda's libFuzzer targets (test/fuzz) with clang-22 and
# -fsanitize=fuzzer,address,undefined in ./build-fuzz (or $KDA_FUZZ_BUILD_DIR)
# and runs each for SECONDS (default 60) with -max_total_time.
#
#   scripts/fuzz.sh [TARGET|all] [SECONDS]
#
# TARGET: ir (parse + verify + kda-lower-to-cpu), model (kda-model's JSON
# reader), npy (kda-run's .npy reader), manifest (the runtime's bundle
# manifest parser), or all (the default). Seeds come from the tests' inputs
# (test/**/*.mlir split at `// -----`, examples, test/tools/Inputs/*.json)
# and test/fuzz/seeds/; the growing corpus is kept in build-fuzz/corpus/TARGET
# and crashes, timeouts and leaks go to build-fuzz/crashes/TARGET (a
# reproducer runs with `build-fuzz/bin/kda-fuzz-TARGET FILE`).
# Installs libclang-rt-22-dev (libFuzzer, sanitizer runtimes) when missing.
# KDA_JOBS: build parallelism (2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KDA_FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${KDA_JOBS:-2}
which=${1:-all}
seconds=${2:-60}
all=(ir model npy manifest)
case "$which" in
  all) targets=("${all[@]}") ;;
  ir|model|npy|manifest) targets=("$which") ;;
  *) echo "fuzz.sh: unknown target '$which' (ir, model, npy, manifest, all)" >&2
     exit 2 ;;
esac

# shellcheck source=scripts/clang-rt.sh
. "$root/scripts/clang-rt.sh"
KDA_BUILD_DIR=$build KDA_CMAKE_ARGS=-DKDA_FUZZ=ON "$root/scripts/build.sh" -j "$jobs" --target $(printf 'kda-fuzz-%s ' "${targets[@]}")

seed() { # TARGET DIR: copies the tree's inputs for TARGET into DIR
  local t=$1 dir=$2 f
  mkdir -p "$dir"
  case "$t" in
    ir)
      # lit files with --split-input-file hold several modules: one seed each.
      for f in $(cd "$root" && find test examples -name '*.mlir' | sort); do
        awk -v out="$dir/$(echo "$f" | tr / _)" \
          'BEGIN { n = 0 } /^\/\/ -----/ { n++; next } { print > (out "." n) }' \
          "$root/$f"
      done ;;
    model)
      cp "$root"/test/tools/Inputs/*.json "$root"/examples/*.json "$dir"/ ;;
    npy|manifest)
      cp "$root"/test/fuzz/seeds/"$t"/* "$dir"/ ;;
  esac
}

# allow_user_poisoning=0: see scripts/sanitize.sh (mixed instrumentation).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allow_user_poisoning=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${targets[@]}"; do
  corpus=$build/corpus/$t crashes=$build/crashes/$t
  mkdir -p "$corpus" "$crashes"
  [ -n "$(ls -A "$corpus")" ] || seed "$t" "$corpus"
  extra=()
  [ -f "$root/test/fuzz/$t.dict" ] && extra+=(-dict="$root/test/fuzz/$t.dict")
  echo "== fuzz $t for ${seconds}s (corpus $corpus, crashes $crashes)"
  # -fork keeps going after a crash (each one saved under $crashes);
  # -ignore_crashes: report them all at the end rather than stop.
  if ! "$build/bin/kda-fuzz-$t" "$corpus" -max_total_time="$seconds" \
      -timeout=30 -rss_limit_mb=4096 -max_len=16384 \
      -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
      -artifact_prefix="$crashes/" -print_final_stats=1 "${extra[@]}" \
      > "$build/fuzz-$t.log" 2>&1; then
    status=1
  fi
  tail -n 5 "$build/fuzz-$t.log"
  # slow-unit-* files are inputs that merely took long (large modules).
  found=$(find "$crashes" -type f ! -name 'slow-unit-*' | wc -l)
  echo "== $t: $found crash/timeout/oom file(s) in $crashes (log: $build/fuzz-$t.log)"
  [ "$found" -eq 0 ] || status=1
done
exit $status
