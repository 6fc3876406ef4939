#!/usr/bin/env python3
"""One kda.chunk_kda call (BENCH.md's configuration, bf16, K = V = 128), or with
--decode N one decode step of N sequences on a pool of 2N fp32 V-major slots
(bench_kda.py's decode case), for a profiler to look at:

    ncu --clock-control none -k regex:kda_ --launch-count 1 --set full \\
        -o prof python3 bench/profile_kda.py --T 2048 --H 32

KDA_BUNDLE_PATH / KDA_RUNTIME_LIBRARY as for bench/run.sh."""
import argparse
import math
import torch
import kda

p = argparse.ArgumentParser()
p.add_argument("--T", type=int, default=2048)
p.add_argument("--H", type=int, default=32)
p.add_argument("--B", type=int, default=1, help="batch (sequences of T tokens each)")
p.add_argument("--seqlens", default="",
               help="comma-separated sequence lengths: one packed varlen batch (cu_seqlens); "
                    "T is their sum")
p.add_argument("--decode", type=int, default=0,
               help="N: one decode step of N sequences (pool of 2N slots) instead of chunk_kda")
p.add_argument("--intermediate", action="store_true",
               help="chunk_kda with return_intermediate_states=True (FLA's h, every 64 tokens)")
p.add_argument("--variant", default="lb", choices=("lb", "softplus", "logspace"),
               help="the gate form (bench_kda.py's variants): lower-bound gate (BENCH.md), Kimi's "
                    "softplus gate without a bound, or FLA's default call (log-space g in fp32, "
                    "q/k normalised and beta after its sigmoid beforehand)")
p.add_argument("--chunk", type=int, default=None, help="chunk_size passed to chunk_kda")
p.add_argument("--flashkda", default=None, metavar="DIR",
               help="profile FlashKDA's fwd (built in place in DIR) on the same tensors instead "
                    "of kda (lower-bound gate only): its kernels under the same profiler")
p.add_argument("--backward", action="store_true",
               help="a training call: chunk_kda with q, k, v, g, beta, A_log and dt_bias requiring "
                    "grad and no states, then the gradients of sum(o * do) (kda.gated_delta_grad)")
p.add_argument("--torch-profile", action="store_true",
               help="time 10 calls under torch.profiler and print the GPU time "
                    "of each kernel (an entry's launches one by one)")
a = p.parse_args()
dev = "cuda"
# Fixed inputs: two bundles profiled in two processes see the same tensors (the
# softplus gate's steepest heads decide how often the intra kernel takes its
# smaller key groups, and they come from A_log's draw).
torch.manual_seed(0)
if a.decode:
    N, H, K = a.decode, a.H, 128
    x = {n: torch.randn(N, 1, H, K, device=dev, dtype=torch.bfloat16) for n in ("q", "k", "v", "g")}
    beta = torch.randn(N, 1, H, device=dev, dtype=torch.bfloat16)
    A_log = torch.rand(H, device=dev) * math.log(16)
    dt_bias = torch.randn(H * K, device=dev)
    pool = torch.randn(2 * N, H, K, K, device=dev) * 0.5
    idx = torch.randperm(2 * N, device=dev)[:N].to(torch.int32)
    step = lambda: kda.fused_recurrent_kda(x["q"], x["k"], x["v"], x["g"], beta, A_log, dt_bias,
                                           initial_state=pool, use_qk_l2norm_in_kernel=True,
                                           use_gate_in_kernel=True, lower_bound=-5.0,
                                           use_beta_sigmoid_in_kernel=True, state_v_first=True,
                                           ssm_state_indices=idx)
    with torch.no_grad():
        o, _ = step()
        for _ in range(3):
            step()
    torch.cuda.synchronize()
    print("ok", o.shape, torch.isfinite(o).all().item())
    raise SystemExit(0)
B, T, H, K = a.B, a.T, a.H, 128
cu = None
if a.seqlens:
    lens = [int(x) for x in a.seqlens.split(",")]
    B, T = 1, sum(lens)
    cu = torch.tensor([0] + list(__import__("itertools").accumulate(lens)),
                      device=dev, dtype=torch.int64)
N = len(cu) - 1 if cu is not None else B
q = torch.randn(B, T, H, K, device=dev, dtype=torch.bfloat16)
k = torch.randn(B, T, H, K, device=dev, dtype=torch.bfloat16)
v = torch.randn(B, T, H, K, device=dev, dtype=torch.bfloat16)
g = torch.randn(B, T, H, K, device=dev, dtype=torch.bfloat16)
beta = torch.randn(B, T, H, device=dev, dtype=torch.bfloat16)
# The gate's parameters as bench_kda.py draws them: the softplus gate's decay range
# (and so how often the intra kernel falls back to smaller key groups) depends on them.
A_log = torch.log(1.0 + 15.0 * torch.rand(H, device=dev))
dt_bias = torch.randn(H * K, device=dev) * 0.5
h0 = torch.randn(N, H, K, K, device=dev) * 0.1
extra = {"return_intermediate_states": True} if a.intermediate else {}
if a.chunk:
    extra["chunk_size"] = a.chunk
if a.variant == "logspace":
    F = torch.nn.functional
    q, k = F.normalize(q.float(), dim=-1).bfloat16(), F.normalize(k.float(), dim=-1).bfloat16()
    g = F.logsigmoid(torch.randn(B, T, H, K, device=dev))
    beta = torch.sigmoid(beta.float()).bfloat16()
    flags = dict(use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                 use_beta_sigmoid_in_kernel=False)
else:
    flags = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, A_log=A_log,
                 dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True)
    if a.variant == "lb":
        flags.update(lower_bound=-5.0, safe_gate=True)
run = lambda: kda.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                            state_v_first=True, cu_seqlens=cu, **flags, **extra)
if a.backward:
    leaves = [q, k, v, g, beta] + ([A_log, dt_bias] if "A_log" in flags else [])
    for t in leaves:
        t.requires_grad_(True)
    do = torch.randn_like(v)

    def run():
        o, _ = kda.chunk_kda(q, k, v, g, beta, state_v_first=True, cu_seqlens=cu, **flags, **extra)
        return (o.detach(),) + torch.autograd.grad(o, leaves, do)
if a.flashkda is not None:
    if a.variant != "lb" or a.chunk or a.intermediate:
        raise SystemExit("--flashkda: FlashKDA computes the lower-bound gate at chunk 16 only")
    import sys, os
    sys.path.insert(0, os.path.abspath(a.flashkda))
    import flash_kda
    # FlashKDA takes the raw gate and beta logits with the activations in the kernel, as kda here.
    def run():
        o = torch.empty_like(v)
        ht = torch.empty_like(h0)
        flash_kda.fwd(q, k, v, g, beta, K ** -0.5, o, A_log, dt_bias.view(H, K), -5.0,
                      initial_state=h0, final_state=ht, cu_seqlens=cu)
        return o, ht
with torch.inference_mode(not a.backward):
    o, ht = run()[:2]
    if a.torch_profile:
        run()
        torch.cuda.synchronize()
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                run()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12))
torch.cuda.synchronize()
print("ok", o.shape, ht.shape, torch.isfinite(o).all().item())
