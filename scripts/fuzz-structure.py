#!/usr/bin/env python3
"""Structure-aware fuzzing of kda's passes: valid modules with one thing changed.

The libFuzzer targets (scripts/fuzz.sh) mutate bytes and rarely produce a module
that parses; this takes the valid modules under test/ and examples/ (one function
each, with a kda op) and changes one thing at a time, consistently across the
module, so that what reaches the verifier and the passes is a plausible module:

  dim      one tensor type's dimension set to 0, 1, 17, 2^31, 2^63 - 1 or dynamic
           (every occurrence of that type)
  rank     one tensor type's dimension dropped or doubled
  elt      one tensor type's element type swapped (f32, bf16, f16, f64, i32, i8, index)
  int      an integer attribute set to 0, -1, 1, 2^31 or 2^63 - 1
  float    a float attribute set to 0, -1e30, 1e30 or NaN
  enum     a kda enum swapped for another of its kind
  drop     an optional operand clause (gate(...), beta(...), ...) dropped
  dup      an optional operand clause written twice

Each mutant goes through every kda pipeline (the CPU, NVIDIA and AMD lowerings to
the LLVM / NVVM / ROCDL dialects) and each outcome is classified: ok, a clear error
(exit 1 with a diagnostic), or a defect: a crash (a signal, a stack dump, an
abort), a hang (past --timeout) or an exit status that is neither. Defects are
written to --out as reproducers (the module and the command) and make the exit
status 1.

With --kda-run and --execute N, the first N mutants the CPU lowering accepts are
also run (kda-run --check: random inputs, every result against the float64
oracle with SPEC.md's bars) under each tile and schedule variant (chunks of 16;
chunks of 64 with sub-chunks of 16 on the chunk-parallel schedule, with the
whole-chunk state step and with the wide one; the token recurrence; the sm_90a
GPU pipeline's kernels, emulated on the CPU), so that every variant computes the same function: "ran" (within the
bars), "refused" (a clear error: a type or size kda-run does not run), "slow"
(past --timeout with a tensor of 2^20 rows or more: millions of programs run
serially beside the float64 oracle), or a defect: "wrong" (a result past its
bar), a crash or a hang (past --timeout on a smaller input).

  scripts/fuzz-structure.py --kda-opt build/bin/kda-opt --count 300 --seed 1   # CI
  scripts/fuzz-structure.py --kda-opt build/bin/kda-opt --minutes 30 --out DIR # a long run
  scripts/fuzz-structure.py --count 40 --seed 2 --kda-run build/bin/kda-run --execute 12  # CI, execution
"""

import argparse
import concurrent.futures
import os
import random
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPELINES = [
    ["--kda-lower-to-cpu"],
    ["--kda-lower-to-nvvm=chip=sm_90a format=none"],
    ["--kda-lower-to-rocdl=chip=gfx942 format=none"],
]
# kda-run's tile and schedule variants of one module (ops with their own
# #kda.tile keep it): each must match the oracle within SPEC.md's bars.
VARIANTS = [
    ["--chunk=16"],
    ["--chunk=64", "--sub-chunk=16", "--schedule=chunk-parallel"],
    ["--chunk=64", "--sub-chunk=16", "--schedule=chunk-parallel", "--state-step=wide"],
    ["--chunk=16", "--schedule=chunk-parallel", "--segments=3"],
    ["--chunk=1"],
    # The GPU pipeline's kernels for sm_90a run on the CPU (kda-run --emulate:
    # every thread of a lane kernel in lock step).
    ["--emulate=sm_90a"],
]
DIMS = ["0", "1", "17", "2147483648", "9223372036854775807", "?"]
ELTS = ["f32", "bf16", "f16", "f64", "i32", "i8", "index"]
INTS = ["0", "-1", "1", "2147483648", "9223372036854775807"]
FLOATS = ["0.0", "-1.0e+30", "1.0e+30", "0x7FC00000"]
ENUMS = {
    "gate": ["none", "softplus", "lower_bound", "sigmoid"],
    "beta": ["none", "sigmoid"],
    "layout": ["k_major", "v_major"],
}
CLAUSES = ["gate", "beta", "A_log", "dt_bias", "initial_state", "cu_seqlens", "boundary_indices",
           "indices", "read_indices", "window_sizes"]
TENSOR = re.compile(r"tensor<([0-9?x]*?)x?(f32|bf16|f16|f64|i32|i64|i8|index)>")
INT_ATTR = re.compile(r"(\b[a-z_]+ = )(-?\d+)( : i64)")
FLOAT_ATTR = re.compile(r"(\b[a-z_]+ = )(-?[0-9.]+(?:e[+-]?\d+)?)( : f64)")
ENUM = re.compile(r"#kda<(gate|beta|layout) ([a-z_]+)>")
CLAUSE = re.compile(r"\b(" + "|".join(CLAUSES) + r")\((%[\w]+) : ([^)]*>)\)")


def seeds(kda_opt):
    """The valid single-function modules with a kda op (at the tensor level) under test/ and
    examples/: those kda-opt parses and verifies as they are."""
    out = []
    for base in ("test", "examples"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, base)):
            for name in sorted(files):
                if not name.endswith(".mlir"):
                    continue
                path = os.path.join(dirpath, name)
                with open(path) as f:
                    text = f.read()
                if (not re.search(r"= kda\.[a-z_]+ ", text) or "// -----" in text
                        or "expected-error" in text or "memref<" in text
                        or text.count("func.func @") != 1 or len(text) > 20000):
                    continue
                if subprocess.run([kda_opt, path, "-o", os.devnull], capture_output=True).returncode:
                    continue
                out.append((os.path.relpath(path, ROOT), text))
    return sorted(out)


def mutate(text, rng):
    """One mutation of text: (kind, description, mutant) or None where it does not apply."""
    kind = rng.choice(["dim", "dim", "rank", "elt", "int", "float", "enum", "drop", "dup"])
    if kind in ("dim", "rank", "elt"):
        types = sorted(set(m.group(0) for m in TENSOR.finditer(text)))
        if not types:
            return None
        t = rng.choice(types)
        m = TENSOR.fullmatch(t)
        dims = [d for d in m.group(1).split("x") if d] if m.group(1) else []
        elt = m.group(2)
        if kind == "elt":
            new = rng.choice([e for e in ELTS if e != elt])
            dims2 = dims
            elt2 = new
        else:
            if not dims:
                return None
            i = rng.randrange(len(dims))
            dims2 = list(dims)
            if kind == "dim":
                dims2[i] = rng.choice([d for d in DIMS if d != dims[i]])
            elif rng.random() < 0.5:
                del dims2[i]
            else:
                dims2.insert(i, dims[i])
            elt2 = elt
        t2 = "tensor<" + "".join(d + "x" for d in dims2) + elt2 + ">"
        return kind, f"{t} -> {t2}", text.replace(t, t2)
    if kind == "int":
        ms = list(INT_ATTR.finditer(text))
        if not ms:
            return None
        m = rng.choice(ms)
        v = rng.choice([x for x in INTS if x != m.group(2)])
        return kind, f"{m.group(0)} -> {v}", text[:m.start(2)] + v + text[m.end(2):]
    if kind == "float":
        ms = list(FLOAT_ATTR.finditer(text))
        if not ms:
            return None
        m = rng.choice(ms)
        v = rng.choice(FLOATS)
        return kind, f"{m.group(0)} -> {v}", text[:m.start(2)] + v + text[m.end(2):]
    if kind == "enum":
        ms = list(ENUM.finditer(text))
        if not ms:
            return None
        m = rng.choice(ms)
        v = rng.choice([x for x in ENUMS[m.group(1)] if x != m.group(2)])
        return kind, f"{m.group(0)} -> {v}", text[:m.start(2)] + v + text[m.end(2):]
    ms = list(CLAUSE.finditer(text))
    if not ms:
        return None
    m = rng.choice(ms)
    if kind == "drop":
        return kind, f"drop {m.group(0)}", text[:m.start()] + text[m.end():]
    return kind, f"dup {m.group(0)}", text[:m.end()] + " " + m.group(0) + text[m.end():]


def classify(rc, output):
    if rc == 0:
        return "ok"
    crashed = rc < 0 or "Stack dump" in output or "PLEASE submit a bug report" in output \
        or "LLVM ERROR" in output or "Assertion" in output
    if crashed:
        return "crash"
    if rc == 1 and ("error:" in output or "error" in output.lower()):
        return "error"
    return f"exit {rc}"


def run_one(kda_opt, text, pipeline, timeout):
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        p = subprocess.run([kda_opt, path, *pipeline, "-o", os.devnull], capture_output=True,
                           text=True, errors="replace", timeout=timeout)
        return classify(p.returncode, p.stdout + p.stderr), (p.stdout + p.stderr)[-2000:]
    except subprocess.TimeoutExpired:
        return "hang", ""
    finally:
        os.unlink(path)


# An execution past --timeout is a hang (a defect) only for inputs with fewer
# rows than this; larger ones (2^20 sequences of one token, 2^20 heads: as
# many programs, run serially beside the float64 oracle) are counted as slow.
SLOW_ROWS = 1 << 20
# The emulated GPU variant interprets every thread's instructions (about 6e7
# a second): a module of a few thousand rows already takes minutes there
# (examples/kda_prefill.mlir's 8192 tokens x 4 heads: past 120 s).
SLOW_ROWS_EMULATED = 1 << 12


def largest_rows(text):
    """The most rows (elements over the last dimension: tokens x heads x ...)
    of any tensor type in the module, a dynamic size counted as 1."""
    most = 0
    for dims, _ in TENSOR.findall(text):
        sizes = [1 if d == "?" else int(d) for d in filter(None, dims.split("x"))]
        n = 1
        for d in sizes[:-1]:
            n *= d
        most = max(most, n)
    return most


def classify_run(rc, output):
    """kda-run --check's outcome: ran (every result within its bar), refused
    (a clear error), wrong (a result past its bar), or a crash / other exit."""
    if rc == 0:
        return "ran"
    if re.search(r"bar=\S+ FAIL|output check failed", output):
        return "wrong"  # kda-run exits 2 when a result is past its bar
    kind = classify(rc, output)
    return "refused" if kind == "error" else kind


def run_exec(kda_run, text, variant, seed, timeout):
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        p = subprocess.run([kda_run, path, "--check", f"--seed={seed}", "--serial", *variant],
                           capture_output=True, text=True, errors="replace", timeout=timeout)
        return classify_run(p.returncode, p.stdout + p.stderr), (p.stdout + p.stderr)[-2000:]
    except subprocess.TimeoutExpired:
        return "hang", ""
    finally:
        os.unlink(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--kda-opt", default=os.path.join(ROOT, "build", "bin", "kda-opt"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=300, help="mutants (each through every pipeline)")
    ap.add_argument("--minutes", type=float, default=0, help="run for this long instead of --count")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per run before it is a hang")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", help="where reproducers of defects go (default: a temporary folder)")
    ap.add_argument("--kda-run", help="kda-run, to execute mutants the CPU lowering accepts (--execute)")
    ap.add_argument("--execute", type=int, default=0,
                    help="run this many accepted mutants under every tile / schedule variant with --check")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    pool = seeds(args.kda_opt)
    if not pool:
        print("fuzz-structure: no seed modules found", file=sys.stderr)
        return 2
    out = args.out or tempfile.mkdtemp(prefix="kda-fuzz-")
    os.makedirs(out, exist_ok=True)
    deadline = time.time() + 60 * args.minutes if args.minutes else None

    def mutants():
        n = 0
        while (deadline and time.time() < deadline) or (not deadline and n < args.count):
            name, text = rng.choice(pool)
            m = mutate(text, rng)
            if m is None:
                continue
            n += 1
            yield n, name, m

    counts, defects = {}, []

    def gather(fut, info):
        """A finished run: counted (and a defect written out); a CPU lowering
        that succeeded queues the mutant's execution under every variant."""
        n, name, kind, what, mutant, pipeline = info
        if pipeline[0] == "exec":
            variant = pipeline[1:]
            outcome, tail = fut.result()
            emulated = any(a.startswith("--emulate") for a in variant)
            if outcome == "hang" and largest_rows(mutant) >= (
                    SLOW_ROWS_EMULATED if emulated else SLOW_ROWS):
                # Millions of programs or tokens in the CPU tile code and the
                # float64 oracle, serially: past the timeout without looping.
                outcome = "slow"
            execs[outcome] = execs.get(outcome, 0) + 1
            if outcome not in ("ran", "refused", "slow"):
                report(outcome, n, name, kind, what, mutant, ["kda-run", "--check", f"--seed={n}", "--serial",
                                                               *variant], tail, defects, out)
            return
        ok = collect(fut, info, counts, defects, out)
        if ok and pipeline == PIPELINES[0] and execs["mutants"] < args.execute:
            execs["mutants"] += 1
            for variant in VARIANTS:
                f2 = ex.submit(run_exec, args.kda_run, mutant, variant, n, args.timeout)
                futures[f2] = (n, name, kind, what, mutant, ["exec", *variant])

    if args.execute and not args.kda_run:
        ap.error("--execute needs --kda-run")
    execs = {"count": 0, "mutants": 0}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        futures = {}
        for n, name, (kind, what, mutant) in mutants():
            for pipeline in PIPELINES:
                fut = ex.submit(run_one, args.kda_opt, mutant, pipeline, args.timeout)
                futures[fut] = (n, name, kind, what, mutant, pipeline)
            # Bounded queue: results are collected as we go.
            while len(futures) > 4 * max(1, args.jobs):
                done, _ = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)
                for fut in done:
                    gather(fut, futures.pop(fut))
        while futures:
            done, _ = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)
            for fut in done:
                gather(fut, futures.pop(fut))
    total = sum(counts.values())
    mutants_run = total // len(PIPELINES)
    print(f"fuzz-structure: {mutants_run} mutants x {len(PIPELINES)} pipelines = {total} runs (seed "
          f"{args.seed}): " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if args.execute:
        runs = {k: v for k, v in execs.items() if k not in ("count", "mutants")}
        print(f"fuzz-structure: executed {execs['mutants']} mutants x {len(VARIANTS)} variants = "
              f"{sum(runs.values())} kda-run --check runs: "
              + ", ".join(f"{k} {v}" for k, v in sorted(runs.items())))
    for d in defects:
        print(f"DEFECT {d}")
    return 1 if defects else 0


def collect(fut, info, counts, defects, out):
    """Counts a lowering's outcome; a defect is written out. True if it succeeded."""
    n, name, kind, what, mutant, pipeline = info
    outcome, tail = fut.result()
    counts[outcome] = counts.get(outcome, 0) + 1
    if outcome in ("ok", "error"):
        return outcome == "ok"
    report(outcome, n, name, kind, what, mutant, ["kda-opt", *pipeline], tail, defects, out)
    return False


def report(outcome, n, name, kind, what, mutant, command, tail, defects, out):
    stem = f"defect-{n}-{kind}-{len(defects)}"
    path = os.path.join(out, stem + ".mlir")
    with open(path, "w") as f:
        f.write(f"// fuzz-structure: {name}, {kind}: {what}\n// RUN: {command[0]} %s {' '.join(command[1:])}\n")
        f.write(mutant)
    with open(os.path.join(out, stem + ".log"), "w") as f:
        f.write(tail)
    defects.append(f"{outcome}: {name} [{kind}: {what}] {' '.join(command)} -> {path}")


if __name__ == "__main__":
    sys.exit(main())
