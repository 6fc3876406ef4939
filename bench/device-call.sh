#!/usr/bin/env bash
# One call on the GPU machine (device tool), batching what belongs together:
#   bench/device-call.sh STEP [STEP...]
# Steps, run in order, each with its log under $OUT (default /tmp/kda-out):
#   suite[:DIR]      test/gpu/run.sh .gpub (or DIR) without the sanitizers
#   sanitize[:DIR]   compute-sanitizer memcheck and racecheck on the suite's --sanitize subset (bundles .gpub or DIR;
#                    each tool's whole report in $OUT/sanitize-TOOL-full.log, its last lines in sanitize.log)
#   bench:NAME:CASES bench/run.sh .benchb (or $BENCH_BUNDLES) .fla --quick --cases CASES --json $OUT/NAME.json
#                    (CASES: bench_kda.py's comma-separated substrings, e.g. "fwd T=8192 H=32";
#                    $BENCH_EXTRA is added, e.g. "--kda-variant acc=$PWD/.var/acc-benchb";
#                    BENCH_QUICK= (empty) times with bench_kda.py's full method instead of --quick)
#                    (with --flashkda .flashkda once the flashkda step built it: a FlashKDA column)
#   flashkda         build FlashKDA (MoonshotAI/FlashKDA and the CUTLASS headers its submodule names,
#                    exported as the git-ignored .flashkda.tgz; never committed) in place, ~90 s
#   kda:NAME:DIR:CASES  the same with --no-fla and bundles from DIR (tile variants; $BENCH_EXTRA too)
#   ncu:KERNEL:ARGS  Nsight Compute (clocks left alone) on the first launch of kernels matching
#                    the regex KERNEL in bench/profile_kda.py ARGS (bundles from .benchb, or
#                    $NCU_BUNDLES: a variant's folder)
#   tune:PLAN[,PLAN] kda-tune time over plan folders (kda-tune compile here; carry them):
#                    $OUT/tune-NAME.json each, then `kda-tune pick PLAN --measurements ...`
#   py:SCRIPT        python3 SCRIPT with the package, the runtime and .benchb's bundles
#                    (host-side measurements, one-off experiments)
#   cp[:ARGS]        bench/bench_cp.py under torchrun over every GPU of the machine (context parallelism,
#                    `cp T=262144 H=16 P=2` on nvidia-h200-x2; bundles from $BENCH_BUNDLES or .benchb)
#   profile:ARGS     bench/profile_kda.py --torch-profile ARGS (per-kernel times), e.g.
#                    "profile:--T 8192 --H 32" or "profile:--seqlens 1300,547 --H 64"
# Carry .gpub, .benchb, .fla and, when it exists, .triton-cache.tgz: Triton's
# kernel cache and autotuning results (TRITON_CACHE_AUTOTUNING=1) from an earlier
# call, so FLA's autotuning compiles nothing twice. The cache comes back as
# $OUT/triton-cache.tgz.part-aa, -ab, ... (the device tool returns files of at
# most 16 MiB; IR and PTX files are dropped: about 20 MB for BENCH.md's cases);
# `cat .../triton-cache.tgz.part-* > .triton-cache.tgz` for the next call.
# KDA_CALL_BUDGET (seconds, default 540): steps that start after it are skipped.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-/tmp/kda-out}
mkdir -p "$out"
export TRITON_CACHE_DIR=$root/.triton-cache
export TRITON_CACHE_AUTOTUNING=1
export PYTHONUNBUFFERED=1
mkdir -p "$TRITON_CACHE_DIR"
[ -f .triton-cache.tgz ] && tar -xzf .triton-cache.tgz -C "$TRITON_CACHE_DIR"
budget=${KDA_CALL_BUDGET:-540}
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
status=0
for step in "$@"; do
  elapsed=$(( $(date +%s) - start ))
  if [ "$elapsed" -ge "$budget" ]; then
    echo "== skipped (budget ${budget}s spent): $step"
    continue
  fi
  left=$(( budget - elapsed ))
  echo "== [$elapsed s] $step"
  case "$step" in
    suite|suite:*)
      dir=.gpub; [ "$step" != suite ] && dir=${step#suite:}
      KDA_SANITIZE=0 timeout "$left" bash test/gpu/run.sh "$dir" 2>&1 | tee -a "$out/suite.log" | grep -E "^(FAIL|summary)|policy" ;;
    sanitize|sanitize:*)
      dir=.gpub; [ "$step" != sanitize ] && dir=${step#sanitize:}
      KDA_SANITIZE_BUNDLES=$dir KDA_SANITIZE_OUT=$out timeout "$left" bash -c '
        s=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
        work=$(mktemp -d); CXX=g++ runtime/gpu/build-runtime.sh "$work" >/dev/null
        g++ -std=c++17 -O2 -shared -fPIC -I. test/oracle/Oracle.cpp test/oracle/OracleC.cpp -o "$work/liboracle.so"
        export KDA_RUNTIME_LIBRARY=$work/libkda_runtime.so KDA_ORACLE_LIBRARY=$work/liboracle.so
        export KDA_BUNDLE_PATH=$PWD/$KDA_SANITIZE_BUNDLES KDA_NO_COMPILE=1 PYTHONPATH=$PWD/python
        for tool in memcheck racecheck; do
          echo "== compute-sanitizer --tool $tool"
          "$s" --tool $tool --error-exitcode 3 --target-processes all python3 test/gpu/test_gpu.py --sanitize 2>&1 |
            tee "$KDA_SANITIZE_OUT/sanitize-$tool-full.log" | tail -6
        done' 2>&1 | tee "$out/sanitize.log" ;;
    flashkda)
      timeout "$left" bash -c 'rm -rf .flashkda && tar -xzf .flashkda.tgz && cd .flashkda &&
        FLASH_KDA_CUDA_ARCHS=90a NVCC_THREADS=16 python3 setup.py build_ext --inplace' > "$out/flashkda-build.log" 2>&1
      echo "flashkda build rc $? ($(ls .flashkda/flash_kda_C*.so 2>/dev/null))"; tail -3 "$out/flashkda-build.log" ;;
    bench:*)
      IFS=: read -r _ name cases <<<"$step"
      fx=(); ls .flashkda/flash_kda_C*.so >/dev/null 2>&1 && fx=(--flashkda .flashkda)
      timeout "$left" bash bench/run.sh "${BENCH_BUNDLES:-.benchb}" .fla ${BENCH_QUICK---quick} --cases "$cases" \
        --json "$out/$name.json" "${fx[@]}" ${BENCH_EXTRA:-} 2>&1 | tee "$out/$name.log" | grep -vE '^\s*$' | tail -24 ;;
    kda:*)
      IFS=: read -r _ name dir cases <<<"$step"
      timeout "$left" bash bench/run.sh "$dir" .fla --quick --no-fla --cases "$cases" \
        --json "$out/$name.json" ${BENCH_EXTRA:-} 2>&1 | tee "$out/$name.log" | grep -vE '^\s*$' | tail -12 ;;
    tune:*)
      # kda-tune time over plan folders (comma-separated; kda-tune compile made
      # them here): $OUT/tune-NAME.json each, for `kda-tune pick PLAN
      # --measurements FILE` back here.
      timeout "$left" bash -c '
        work=$(mktemp -d); CXX=g++ runtime/gpu/build-runtime.sh "$work" >/dev/null
        export KDA_RUNTIME_LIBRARY=$work/libkda_runtime.so PYTHONPATH=$PWD/python
        IFS=, read -ra plans <<<"$1"
        for p in "${plans[@]}"; do
          python3 tools/kda-tune/kda-tune time "$p" --out "$2/tune-$(basename "$p").json" 2>&1 | tail -2
        done' _ "${step#tune:}" "$out" 2>&1 | tee -a "$out/tune.log" ;;
    py:*)
      script=${step#py:}
      timeout "$left" bash -c "
        work=\$(mktemp -d); CXX=g++ runtime/gpu/build-runtime.sh \"\$work\" >/dev/null
        KDA_RUNTIME_LIBRARY=\$work/libkda_runtime.so KDA_BUNDLE_PATH=\$PWD/${NCU_BUNDLES:-.benchb} KDA_NO_COMPILE=1 \
        PYTHONPATH=\$PWD/python:\$PWD/.fla python3 $script" 2>&1 | tee -a "$out/py.log" | tail -45 ;;
    cp|cp:*)
      # Context parallelism over the machine's GPUs (nvidia-h200-x2: two ranks, NCCL, NVLink
      # multicast off): bench/bench_cp.py under torchrun, $out/cp.json; ARGS after "cp:" go to it.
      args=${step#cp}; args=${args#:}
      timeout "$left" bash -c "
        work=\$(mktemp -d); CXX=g++ runtime/gpu/build-runtime.sh \"\$work\" >/dev/null
        NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
        KDA_RUNTIME_LIBRARY=\$work/libkda_runtime.so KDA_BUNDLE_PATH=\$PWD/${BENCH_BUNDLES:-.benchb} KDA_NO_COMPILE=1 \
        FLA_FLASH_KDA=0 FLA_TILELANG=0 PYTHONPATH=\$PWD/python:\$PWD/.fla \
        torchrun --nproc-per-node \$(nvidia-smi -L | wc -l) bench/bench_cp.py --fla \$PWD/.fla --json $out/cp.json $args" \
        2>&1 | tee "$out/cp.log" | tail -8 ;;
    profile:*)
      args=${step#profile:}
      timeout "$left" bash -c "
        work=\$(mktemp -d); CXX=g++ runtime/gpu/build-runtime.sh \"\$work\" >/dev/null
        KDA_RUNTIME_LIBRARY=\$work/libkda_runtime.so KDA_BUNDLE_PATH=\$PWD/${NCU_BUNDLES:-.benchb} KDA_NO_COMPILE=1 \
        PYTHONPATH=\$PWD/python:\$PWD/.fla python3 bench/profile_kda.py --torch-profile $args" \
        2>&1 | tee -a "$out/profile.log" | tail -20 ;;
    ncu:*)
      IFS=: read -r _ kernel args <<<"$step"
      timeout "$left" bash -c "
        work=\$(mktemp -d); CXX=g++ runtime/gpu/build-runtime.sh \"\$work\" >/dev/null
        KDA_RUNTIME_LIBRARY=\$work/libkda_runtime.so KDA_BUNDLE_PATH=\$PWD/${NCU_BUNDLES:-.benchb} KDA_NO_COMPILE=1 \
        PYTHONPATH=\$PWD/python ncu --clock-control none -k regex:$kernel --launch-count 1 \
          --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
          --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats \
          python3 bench/profile_kda.py $args" 2>&1 | tee -a "$out/ncu.log" | grep -vE '^\s*$' | grep -E 'Duration|Throughput|Occupancy|Registers|Warp Cycles|Issued|Executed Instructions|Eligible|Stall|Block Limit|Waves|Busy|Hit Rate|^  [a-z_]+' | head -60 ;;
    *)
      echo "unknown step: $step"; status=2 ;;
  esac
  rc=${PIPESTATUS[0]}
  [ "$rc" -ne 0 ] && { echo "== step '$step' exited $rc"; status=1; }
done
# Only what a cache hit loads goes back (the cubin and the metadata; Triton's
# intermediate IR and PTX are four fifths of the bytes, and the carry limit is
# 64 MiB): the group files then list only the files that are kept.
find "$TRITON_CACHE_DIR" \( -name '*.llir' -o -name '*.ttir' -o -name '*.ttgir' -o -name '*.source' \
  -o -name '*.ptx' \) -delete 2>/dev/null
python3 - "$TRITON_CACHE_DIR" <<'PY' || true
import glob, json, os, sys
for g in glob.glob(os.path.join(sys.argv[1], "*", "__grp__*.json")):
    d = json.load(open(g))
    here = os.path.dirname(g)
    d["child_paths"] = {k: v for k, v in d.get("child_paths", {}).items() if os.path.exists(os.path.join(here, k))}
    json.dump(d, open(g, "w"))
PY
tar -czf - -C "$TRITON_CACHE_DIR" . 2>/dev/null | split -b 15m - "$out/triton-cache.tgz.part-"
# The device tool brings back a handful of files per call (the cache takes
# two): past five results (JSON, logs, kda-tune measurements written to
# $OUT by a step or by commands after this script), they travel as one
# results.tgz (`tar -xzf results.tgz` here). Steps run later in the same
# call should write to $OUT before calling this script last.
results=$(find "$out" -maxdepth 1 -type f ! -name 'triton-cache.tgz.part-*' ! -name results.tgz | wc -l)
if [ "$results" -gt 5 ]; then
  (cd "$out" && find . -maxdepth 1 -type f ! -name 'triton-cache.tgz.part-*' ! -name results.tgz -printf '%f\n' |
     tar -czf results.tgz -T - && find . -maxdepth 1 -type f ! -name 'triton-cache.tgz.part-*' ! -name results.tgz -delete)
fi
ls -la "$out"
exit $status
