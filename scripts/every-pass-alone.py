#!/usr/bin/env python3
"""Runs every pass of lowering/ and passes/ alone (kda-opt --pass-pipeline)
on every stage input of the tests (test/*/Inputs/*.mlir): each run may
succeed or fail with a diagnostic, never crash or hang. A pass run on IR it
was not written for (another stage's, another target's) is exactly what a
user of kda-opt does, and what the fuzzers do not reach.

    scripts/every-pass-alone.py KDA_OPT [INPUT...]

Prints each crash (signal, assertion, stack dump) or timeout and exits 1 if
there is any. The pass list is read from the .td files, so a new pass is
swept without being named here."""
import concurrent.futures
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def passes():
    out = []
    for td in ("lowering/Passes.td", "passes/Passes.td"):
        with open(os.path.join(ROOT, td)) as f:
            for name, anchor in re.findall(r'Pass<"([a-z0-9-]+)",\s*"([A-Za-z:]+)"', f.read()):
                out.append((name, anchor))
    return out


def pipeline(name, anchor):
    if anchor == "func::FuncOp":
        return f"builtin.module(func.func({name}))"
    if anchor == "gpu::GPUModuleOp":
        return f"builtin.module(gpu.module({name}))"
    return f"builtin.module({name})"


def run(kda_opt, inp, name, anchor):
    try:
        p = subprocess.run([kda_opt, inp, f"--pass-pipeline={pipeline(name, anchor)}", "-o", os.devnull],
                           capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return f"timeout  {name} on {os.path.relpath(inp, ROOT)}"
    crashed = p.returncode < 0 or p.returncode > 1 or re.search(
        r"PLEASE submit a bug report|Stack dump|Assertion .* failed", p.stderr)
    if crashed:
        first = next((l for l in p.stderr.splitlines() if l.strip() and not l.lstrip().startswith("#")), "")
        return f"crash    {name} on {os.path.relpath(inp, ROOT)} (exit {p.returncode}): {first[:160]}"
    return None


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    kda_opt = sys.argv[1]
    inputs = sys.argv[2:] or sorted(glob.glob(os.path.join(ROOT, "test", "*", "Inputs", "*.mlir")))
    jobs = [(kda_opt, i, n, a) for i in inputs for n, a in passes()]
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        problems = [r for r in ex.map(lambda j: run(*j), jobs) if r]
    for p in problems:
        print(p)
    print(f"every-pass-alone: {len(jobs)} runs ({len(passes())} passes x {len(inputs)} inputs), "
          f"{len(problems)} crashed or hung")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
