"""Can the state pass run beside the intra-chunk grid on SMs of its own? (#22 long sequences, #23 overlap)

PROBE_BUNDLES="a=DIR,b=DIR,..." (bundles of BENCH.md's Kimi forward, h0 and ht; the intra kernel always from `a`),
PT (tokens, default 32768). For every state variant: the state kernel alone, intra then state (one stream), and the
state kernel launched first on a high-priority side stream beside an intra-chunk kernel of other data.
The forty-fourth session's bundles (bench/RESULTS.md): kda-compile of a bench bundle's source.mlir with
--state-stages=3 and --v-block=16 (a), --v-block=128 --block-threads=256 (b; c at 2 stages), --v-block=64 (d), the
x variants the same with the state kernel's dynamic_shared_memory raised to 200 KiB in manifest.json (one block a
multiprocessor: no intra-chunk block beside it). On the GPU machine, with the runtime built there:
    KDA_RUNTIME_LIBRARY=... KDA_NO_COMPILE=1 PYTHONPATH=python PROBE_BUNDLES=a=DIR,... python3 bench/overlap_probe.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_kda as bk  # noqa: E402
from hybrid_probe import graph_ms as _graph_ms, workspaces  # noqa: E402
from kda import runtime as rt  # noqa: E402

T, H = int(os.environ.get("PT", 32768)), 32
CASE = bk.Case(f"fwd T={T} H={H}", "fwd", H, B=1, T=T)


def graph_ms(fn):
    """ms per replay of fn in a CUDA graph (hybrid_probe.graph_ms, 20 replays a run)."""
    return _graph_ms(fn, reps=20)


def main():
    variants = dict(x.split("=", 1) for x in os.environ["PROBE_BUNDLES"].split(","))
    x = bk.make_set(CASE, torch, 3)
    dims = {"B": 1, "T": T, "HV": H, "H": H}
    bundles = {n: rt.load_bundle(p) for n, p in variants.items()}
    e = next(iter(bundles["a"].entries.values()))
    base = dict(q=x["q"], k=x["k"], v=x["v"], gate=x["g"], beta=x["beta"], initial_state=x["h0"],
                A_log=x["A_log"], dt_bias=x["dt_bias"].view(H, -1))

    def tensors():
        return dict(base, o=torch.empty_like(x["v"]), final_state=torch.empty_like(x["h0"]),
                    **workspaces(e, dims))
    mine, other = tensors(), tensors()
    IK, SK = "kda_gated_delta_kernel_intra", "kda_gated_delta_kernel_state"
    ba = bundles["a"]
    pick = lambda b, k, t: {p["name"]: t[p["name"]] for p in b.tensor_params(k)}  # noqa: E731
    intra_mine = pick(ba, IK, mine)
    intra_other = pick(ba, IK, other)
    hi = torch.cuda.Stream(priority=-1)
    print(torch.cuda.get_device_name(), f"T={T} H={H}", "stream priorities", torch.cuda.Stream.priority_range())

    def intra(t=intra_mine):
        ba.launch(IK, t)
    intra()
    ba.launch(SK, pick(ba, SK, mine))
    torch.cuda.synchronize()
    ref = mine["o"].clone()
    print(f"{'intra alone':40s} {graph_ms(intra):.3f} ms")
    print(f"{'intra (other data) alone':40s} {graph_ms(lambda: intra(intra_other)):.3f} ms")
    for n, b in bundles.items():
        st = pick(b, SK, mine)

        def state():
            b.launch(SK, st)
        mine["o"].zero_()
        state()
        torch.cuda.synchronize()
        err = (mine["o"].float() - ref.float()).abs().max().item()

        def seq():
            intra()
            state()

        def par():
            hi.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(hi):
                state()
            intra(intra_other)
            torch.cuda.current_stream().wait_stream(hi)

        def par_low():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                state()
            intra(intra_other)
            torch.cuda.current_stream().wait_stream(side)
        k = b._kernel(SK)
        print(f"[{n}] block {k['block']} grid {k['grid']} smem {k['dynamic_shared_memory']} tile {k.get('tile')} "
              f"max |o - a's o| {err:.2e}")
        print(f"  {'state alone':38s} {graph_ms(state):.3f} ms")
        print(f"  {'intra, state (one stream)':38s} {graph_ms(seq):.3f} ms")
        print(f"  {'state (hi prio) beside intra (other)':38s} {graph_ms(par):.3f} ms")
        print(f"  {'state (same prio) beside intra (other)':38s} {graph_ms(par_low):.3f} ms")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                par()
            torch.cuda.synchronize()
        for ev in prof.key_averages():
            if "kda_" in ev.key:
                print(f"    beside: {ev.key[:40]:40s} {ev.device_time_total / ev.count / 1e3:.3f} ms a call")


if __name__ == "__main__":
    main()
