#!/usr/bin/env python3
"""kda alone under two or more values of a shape-policy constant of kda.tune, in
the same process and passes (what a policy change is measured by before it
lands), e.g. the V block of calls with chunk-boundary states:
    python3 bench/policy_ab.py --set BOUNDARY_V_BLOCK=64,128 --cases "fwd-h 8x4096,fwd-h varlen6"
Each value runs with its own plans (kda.ops' plan caches are cleared between
values); passes alternate the values, odd passes in reverse order. Prints, per
case and value, the median per-call time (CUDA events), the tile the call got
(kda.ops.last_launch) and the ratio to the first value. Needs the bundles of
every tile the values choose (kda.prebuild builds the policy's tiles).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_kda as bk  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", required=True, help="NAME=V1,V2,... (integers): a kda.tune constant")
    ap.add_argument("--cases", required=True)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    name, values = args.set.split("=", 1)
    values = [int(v) for v in values.split(",")]
    import torch
    import kda
    from kda import ops
    from kda import tune
    if not hasattr(tune, name):
        sys.exit(f"kda.tune has no constant {name}")
    saved = getattr(tune, name)
    rows = []
    with torch.no_grad():
        for case in bk.select(bk.all_cases(), args.cases):
            sets = [bk.make_set(case, torch, 100 + i) for i in range(2)]
            runner = bk.Runner(case, torch, None, kda, sets, None)
            times = {v: [] for v in values}
            tiles = {}
            for p in range(args.passes):
                for v in (values if p % 2 == 0 else values[::-1]):
                    setattr(tune, name, v)
                    ops._chunk_plans.clear()
                    runner.kda_call(0)
                    tiles[v] = getattr(ops.last_launch, "bundle_tile", None)
                    per_call, _ = bk.time_calls(torch, runner.kda_call, len(sets), args.warmup, args.reps)
                    times[v] += per_call
            setattr(tune, name, saved)
            ops._chunk_plans.clear()
            base = statistics.median(times[values[0]])
            row = {"case": case.name, "constant": name, "values": {}}
            for v in values:
                med = statistics.median(times[v])
                row["values"][str(v)] = {"median_ms": med, "tile": tiles[v], "ratio_to_first": med / base}
                print(f"{case.name:32s} {name}={v:<5d} {med:8.4f} ms  x{med / base:.3f}  tile {tiles[v]}",
                      flush=True)
            rows.append(row)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
