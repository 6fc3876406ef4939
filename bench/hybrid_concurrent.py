#!/usr/bin/env python3
"""A probe for issue 23's bar (docs/pipelining.md, Next 4): the hybrid's parts run side by side.

chunk_kda (its pieces on the caller's stream and the runtime's side stream) beside kda.window_attention on a
second torch stream, then the torch mix (`conc`; `conc_wfirst` issues the window first), against the fused layer
(kda.hybrid_attention) and the parts one after another (`separate`), in one process: CUDA events around each
call, the median of 40 calls, three rounds. `hybrid gated T=8192 H=32 W=512` by default (T from the
environment). Runs on the GPU machine with the package, the runtime and bundles for the layer, chunk_kda and
the window:
    KDA_RUNTIME_LIBRARY=... KDA_BUNDLE_PATH=... KDA_NO_COMPILE=1 PYTHONPATH=python python3 bench/hybrid_concurrent.py
"""
import os
import statistics

import torch

import kda

B, T, H, K, W = 1, int(os.environ.get("T", 8192)), 32, 128, 512
g = torch.Generator(device="cuda").manual_seed(0)
r = lambda s, dt=torch.bfloat16: torch.randn(s, generator=g, device="cuda").to(dt)
q, k, v, gate, beta, z = r((B, T, H, K)), r((B, T, H, K)), r((B, T, H, K)), r((B, T, H, K)), r((B, T, H)), r((B, T, H))
q = torch.nn.functional.normalize(q.float(), dim=-1).bfloat16(); k = torch.nn.functional.normalize(k.float(), dim=-1).bfloat16()
A_log = torch.log(1 + 15 * torch.rand(H, device="cuda")); dt_bias = 0.5 * torch.randn(H * K, device="cuda")
kw = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, lower_bound=-5.0)
main = torch.cuda.current_stream()
side = torch.cuda.Stream()
lo, hi = torch.cuda.Stream.priority_range() if hasattr(torch.cuda.Stream, "priority_range") else (0, -1)
gd = lambda: kda.chunk_kda(q, k, v, gate, beta, A_log=A_log, dt_bias=dt_bias, **kw)[0]
win = lambda: kda.window_attention(q, k, v, W)
mix = lambda lin, w: torch.lerp(w, lin, torch.sigmoid(z)[..., None])
def fused():
    return kda.hybrid_attention(q, k, v, gate, beta, z, window=W, A_log=A_log, dt_bias=dt_bias, **kw)
def separate():
    return mix(gd(), win())
def conc(first_window=False, stream=side):
    stream.wait_stream(main)
    if first_window:
        with torch.cuda.stream(stream):
            w = win()
        o = gd()
    else:
        o = gd()
        with torch.cuda.stream(stream):
            w = win()
    main.wait_stream(stream)
    w.record_stream(main)
    return mix(o, w)
variants = {"fused": fused, "separate": separate, "conc": conc, "conc_wfirst": lambda: conc(True)}
ref = separate().float()
for name, fn in variants.items():
    out = fn().float()
    print(f"{name}: max |diff| against separate {(out - ref).abs().max().item():.3e}")
def timed(fn, reps=40):
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record()
        ts.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ts)
for name, fn in variants.items():
    for _ in range(5):
        fn()
torch.cuda.synchronize()
res = {n: [] for n in variants}
for rnd in range(3):
    for name, fn in variants.items():
        res[name].append(timed(fn))
for name in variants:
    print(f"{name:12s} median ms {statistics.median(res[name]):.4f}  rounds {[round(x, 4) for x in res[name]]}")
sep = statistics.median(res["separate"])
for name in variants:
    print(f"  {name} / separate = {statistics.median(res[name]) / sep:.3f}")
