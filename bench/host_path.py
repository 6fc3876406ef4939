#!/usr/bin/env python3
"""Where a planned chunk_kda call spends its host time, step by step (issue 22's
30 us): the whole call as bench_kda.py's host column measures it, then each step
of kda.ops' fast path timed alone (the plan look-up up to the fast path, the two
output allocations, the stream handle, the kept workspace, the C launch), and
the same call with the fast path turned off (the planned path before it). The fast
path is timed twice, alternating in one process: through kda_prepare's handle
(kda_launch_prepared, `call_us`) and through kda_launch_trusted as before it
(`call_trusted_us`, kda.ops._Fast.use_prepared = False).
Times without a profiler: a profiler's own cost per Python call is larger than
most of these steps.

Runs on the GPU machine with the package, the runtime and bundles for the cases
(bench/device-call.sh's `py:` step):
    python3 bench/host_path.py [--cases "fwd T=1024 H=32,fwd T=8192 H=32"] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_kda as bk  # noqa: E402


def per_call_us(torch, fn, calls=20, runs=7):
    """bench_kda.host_time's method in microseconds: `calls` calls issued after a
    synchronization (too few to fill the launch queue), the median of `runs`."""
    out = []
    for _ in range(runs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) * 1e6 / calls)
    torch.cuda.synchronize()
    return statistics.median(out)


def measure(case, torch, kda, ops):
    x = bk.make_set(case, torch, 0)
    kw = dict(bk.prologue(case))
    if case.variant != "logspace":
        kw.update(A_log=x["A_log"], dt_bias=x["dt_bias"])

    def call():
        return kda.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"],
                             output_final_state=True, cu_seqlens=x.get("cu"),
                             cu_seqlens_cpu=x.get("cu_cpu"), **kw)

    def fast_path(prepared):
        """Remakes the plan's fast path, through kda_prepare's handle or
        kda_launch_trusted (the fast path before this session)."""
        ops._Fast.use_prepared = prepared
        for p in ops._chunk_plans.values():
            p.fast = None
        call()
        call()
        torch.cuda.synchronize()
        p = list(ops._chunk_plans.values())[0]
        return p.fast

    ops._chunk_plans.clear()
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    plans = list(ops._chunk_plans.values())
    row = {"case": case.name, "plans": len(plans)}
    plan = plans[0] if plans else None
    f = plan.fast if plan is not None else None
    row["fast_path"] = f is not None
    if f is None:
        row["call_us"] = per_call_us(torch, call)
        return row
    # The whole call, the prepared launch (after) and kda_launch_trusted
    # (before) alternating, three rounds each; medians.
    after, before = [], []
    for _ in range(3):
        fast_path(True)
        after.append(per_call_us(torch, call))
        fast_path(False)
        before.append(per_call_us(torch, call))
    row["call_trusted_us"] = statistics.median(before)
    f = fast_path(True)
    row["prepared"] = f.prepared is not None
    row["call_us"] = statistics.median(after)
    row["call_us_rounds"] = after
    row["call_trusted_us_rounds"] = before
    from kda.runtime import _stream_handle
    stream = _stream_handle(None, f.index) or 0
    row["alloc_o_us"] = per_call_us(torch, lambda: ops._alloc(f.o_shape, f.o_dtype, f.device))
    if f.fs_shape is not None:
        row["alloc_final_state_us"] = per_call_us(
            torch, lambda: ops._alloc(f.fs_shape, torch.float32, f.device))
    row["stream_handle_us"] = per_call_us(torch, lambda: _stream_handle(None, f.index))
    if plan.nbytes:
        row["workspace_bytes"] = plan.nbytes
        row["kept_workspace_us"] = per_call_us(
            torch, lambda: ops._workspace(f.device, f.index, stream, plan.nbytes))
        row["fresh_workspace_us"] = per_call_us(
            torch, lambda: torch.empty(plan.nbytes, dtype=torch.uint8, device=f.device))
    ws = ops._workspace(f.device, f.index, stream, plan.nbytes) if plan.nbytes else None
    # The C launch alone: kda_launch_trusted (before) and kda_launch_prepared
    # (after), on the pointers of the last call.
    row["c_launch_trusted_us"] = per_call_us(
        torch, lambda: f.bundle.launch_prepared(f.kernel, f.array, stream, ws, plan.nbytes))
    if f.prepared is not None:
        wptr = ws.data_ptr() if ws is not None else None
        p = f.prepared
        row["c_launch_us"] = per_call_us(torch, lambda: p.launch(wptr, plan.nbytes or 0, stream or None))
    # Everything before the fast path: argument handling and the plan key.
    real = ops._run_fast
    ops._run_fast = lambda *a: None
    try:
        row["dispatch_us"] = per_call_us(torch, call)
    finally:
        ops._run_fast = real
    # The planned path without the fast path (this session's starting point,
    # less its key and environment changes).
    plan.fast = None
    ops._Fast.use_prepared = True
    real_of, real_of_pieces = ops._Fast.of, ops._Fast.of_pieces
    ops._Fast.of = ops._Fast.of_pieces = classmethod(lambda cls, *a: None)
    try:
        row["planned_slow_us"] = per_call_us(torch, call)
    finally:
        ops._Fast.of, ops._Fast.of_pieces = real_of, real_of_pieces
    call()
    row["fast_path_restored"] = plan.fast is not None
    # Bit-exact: the prepared fast path and the trusted one against an
    # unplanned call of the same inputs.
    ops._chunk_plans.clear()
    ref = call()
    exact = {}
    for prepared in (True, False):
        f = fast_path(prepared)
        got = call()
        torch.cuda.synchronize()
        exact["prepared" if prepared else "trusted"] = (
            f is not None and (f.prepared is not None) == prepared
            and all(torch.equal(a, b) for a, b in zip(got, ref) if a is not None))
    ops._Fast.use_prepared = True
    row["bit_exact"] = exact
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="fwd T=1024 H=32,fwd T=8192 H=32,fwd varlen32")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import torch
    import kda
    from kda import ops
    rows = []
    with torch.no_grad():
        for case in bk.select(bk.all_cases(), args.cases):
            row = measure(case, torch, kda, ops)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
