"""Pipelined pieces (kda.ops' _Pieces) timed as users call them: chunk_kda with KDA_PIECES=P (PIECES, a comma
list; PT tokens, H = 32, BENCH.md's Kimi forward with h0 and ht), eagerly back to back and the same call captured in a
CUDA graph, with KDA_PIECES_GRAPH as set outside. PROFILE=1 prints the torch profiler's kernel table of 8 pieces
and writes chrome traces of three eager calls and three graph replays ($OUT/trace-{eager,graph}-T.json: the kernels'
streams and start and end times). Writes
$OUT/paths-T.txt: the one-piece and the last pieces bundle (for bench/pipeline_probe.py's PROBE_BUNDLES)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
import bench_kda as bk  # noqa: E402
from hybrid_probe import capture, graph_ms, eager_ms, profile_table  # noqa: E402
import kda  # noqa: E402

T, H = int(os.environ.get("PT", 32768)), 32
case = bk.Case(f"fwd T={T} H={H}", "fwd", H, B=1, T=T)
x = bk.make_set(case, torch, 3)


def call():
    return kda.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], output_final_state=True,
                         A_log=x["A_log"], dt_bias=x["dt_bias"], **bk.prologue(case))


paths = {}
with torch.no_grad():
    for p in [int(v) for v in os.environ.get("PIECES", "1,4,8").split(",")]:
        os.environ["KDA_PIECES"] = str(p)
        e = eager_ms(call)
        ll = kda.ops.last_launch
        g = graph_ms(call)
        paths[p] = ll.bundle
        print(f"T={T} pieces {p} ({ll.pieces}): eager {e:.3f} ms, graph {g:.3f} ms; {ll.bundle}",
              flush=True)
    if os.environ.get("PROFILE"):
        os.environ["KDA_PIECES"] = "8"
        call()
        print(profile_table(call, 8), flush=True)
        # Kernel timelines (chrome traces): three eager calls, then three replays of the call in a graph.
        g = capture(call, warm=0)
        for name, fn in (("eager", call), ("graph", g.replay)):
            fn()
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    fn()
                torch.cuda.synchronize()
            prof.export_chrome_trace(os.environ.get("OUT", "/tmp") + f"/trace-{name}-{T}.json")
with open(os.environ.get("OUT", "/tmp") + f"/paths-{T}.txt", "w") as f:
    f.write(f"{paths[1]} {paths[max(paths)]}\n")
