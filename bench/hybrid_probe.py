"""Issue 23's overlap probe: can window attention hide under the gated delta's kernels?

On the GPU machine (bundles of `fwd T=8192 H=32` and `window T=8192 H=32 W=512`, FLA exported):
    bench/device-call.sh "py:bench/hybrid_probe.py"
Part 1 times, each in a CUDA graph, kda's gated delta forward (BENCH.md's Kimi prologue, h0 and ht), kda's window
attention on the same q, k, v, both back to back on one stream and both on two streams; FLA's chunk_kda and
parallel_attn (eager) and a torch mix for scale. Part 2 launches the gated delta entry's two kernels one by one
(the runtime launches a kernel by its name) to time the window beside the intra-chunk kernel only, with the state
kernel after both: the schedule a fused hybrid's chunk-parallel programs would have. Part 3 runs the state kernel
beside an intra-chunk kernel of other data: how much a schedule that overlaps the two passes would slow each.
bench/RESULTS.md (forty-first session) has part 1's H100 numbers. PT and PW (environment) change T and W.
"""
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_kda as bk  # noqa: E402
import kda  # noqa: E402
from kda import ops as kops  # noqa: E402

T, H, W = int(os.environ.get("PT", 8192)), 32, int(os.environ.get("PW", 512))
CASE = bk.Case(f"fwd T={T} H={H}", "fwd", H, B=1, T=T)


def capture(fn, warm=3):
    """fn captured in a CUDA graph, after `warm` runs and one on the capture's side stream."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def graph_ms(fn, reps=50):
    """fn captured in a CUDA graph (capture), ms per replay: the median of 5 runs of `reps` replays."""
    return _median_ms(capture(fn).replay, reps)


def eager_ms(fn, reps=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    return _median_ms(fn, reps)


def _median_ms(fn, reps):
    times = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / reps)
    return statistics.median(times)


def profile_table(fn, rows):
    """The torch profiler's per-kernel table of 10 runs of fn."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="cuda_time_total", row_limit=rows)


def workspaces(entry, dims):
    """An entry's workspaces as torch tensors of the manifest's shapes and dtypes (dims: B, T, H, HV)."""
    dtypes = {"bf16": torch.bfloat16, "f32": torch.float32}
    return {w["name"]: torch.empty([dims.get(s, s) for s in w["shape"]], dtype=dtypes[w["dtype"]], device="cuda")
            for w in entry["workspaces"]}


def beside(main, other, then=None):
    """`other` on a side stream while `main` runs on the current one; `then` after both."""
    side = torch.cuda.Stream()

    def run():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            other()
        main()
        torch.cuda.current_stream().wait_stream(side)
        if then is not None:
            then()
    return run


def main():
    x = bk.make_set(CASE, torch, 3)
    kw = bk.prologue(CASE)
    gates = dict(A_log=x["A_log"], dt_bias=x["dt_bias"], initial_state=x["h0"], output_final_state=True, **kw)

    def gd():
        return kda.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], **gates)[0]

    def win():
        return kda.window_attention(x["q"], x["k"], x["v"], W)

    print(torch.cuda.get_device_name(), f"T={T} H={H} W={W}")
    # Part 1: whole calls.
    z = torch.randn((1, T, H), device="cuda", dtype=torch.bfloat16)
    ow, og = win(), gd()

    def mix():  # (torch's ops in fp32: several kernels, not a fair reference for a fused mix)
        s = torch.sigmoid(z.float()).unsqueeze(-1)
        return (og.float() * s + ow.float() * (1 - s)).to(torch.bfloat16)

    def one_stream():
        gd()
        win()
    for name, fn in [("kda gated delta", gd), ("kda window", win), ("torch mix", mix),
                     ("kda both, one stream", one_stream), ("kda both, window on a side stream", beside(gd, win)),
                     ("kda both, gated delta on a side stream", beside(win, gd))]:
        print(f"{name:45s} graph {graph_ms(fn):.3f} ms")
    try:
        from fla.ops.kda import chunk_kda as fla_kda
        from fla.ops.attn.parallel import parallel_attn
        for name, fn in [("FLA chunk_kda", lambda: fla_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], **gates)),
                         ("FLA parallel_attn", lambda: parallel_attn(x["q"], x["k"], x["v"], scale=128 ** -0.5,
                                                                     window_size=W))]:
            print(f"{name:45s} eager {eager_ms(fn):.3f} ms")
    except ImportError as e:
        print(f"FLA not timed: {e}")
    print(profile_table(beside(gd, win), 8))

    # Part 2: the entry's kernels one by one, on workspaces of the manifest's types.
    cfg = kops.chunk_kda_config(x["q"], x["k"], x["v"], x["g"], x["beta"], **gates)
    bundle, entry, _ = kops._bundle_for(cfg, kops.chip_for_device())
    e = bundle.entries[entry]
    named = dict(q=x["q"], k=x["k"], v=x["v"], gate=x["g"], beta=x["beta"], initial_state=x["h0"],
                 A_log=x["A_log"], dt_bias=x["dt_bias"].view(H, -1),
                 o=torch.empty_like(x["v"]), final_state=torch.empty_like(x["h0"]),
                 **workspaces(e, {"B": 1, "T": T, "HV": H, "H": H}))
    kernels = [launch["kernel"] for launch in e["launches"]]
    if len(kernels) != 2:
        print(f"part 2 needs the intra / state pair, the entry launches {kernels}")
        return
    calls = [{p["name"]: named[p["name"]] for p in bundle.tensor_params(k)} for k in kernels]

    def intra():
        bundle.launch(kernels[0], calls[0])

    def state():
        bundle.launch(kernels[1], calls[1])

    intra()
    state()
    torch.cuda.synchronize()
    print("the kernels one by one give the entry's output:", torch.equal(og, named["o"]))

    def in_order():
        intra()
        state()
        win()
    state_beside_window = beside(state, win)

    def after_intra():
        intra()
        state_beside_window()
    for name, fn in [("intra", intra), ("state", state), ("window", win), ("intra, state, window", in_order),
                     ("window beside intra, then state", beside(intra, win, state)),
                     ("intra, then window beside state", after_intra)]:
        print(f"{name:45s} graph {graph_ms(fn):.3f} ms")

    # Part 3: the state kernel beside an intra-chunk kernel of other data (its own workspaces), the state
    # launched first so that all its programs are resident: what a schedule that overlaps the two passes
    # (chunk i's state step while later chunks' intra-chunk work runs) would see of each other.
    other = dict(calls[0])
    for w in e["workspaces"]:
        if w["name"] in other:
            other[w["name"]] = torch.empty_like(named[w["name"]])

    def intra_other():
        bundle.launch(kernels[0], other)
    for name, fn in [("intra (other data)", intra_other), ("state, then intra (other data)",
                                                           lambda: (state(), intra_other())),
                     ("state beside intra (other data)", beside(intra_other, state))]:
        print(f"{name:45s} graph {graph_ms(fn):.3f} ms")
    print(profile_table(beside(intra_other, state), 6))


if __name__ == "__main__":
    main()
