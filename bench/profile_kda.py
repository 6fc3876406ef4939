#!/usr/bin/env python3
"""One kda.chunk_kda call (BENCH.md's configuration, bf16, K = V = 128) for a
profiler to look at:

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
p.add_argument("--torch-profile", action="store_true",
               help="time 10 calls under torch.profiler and print the GPU time "
                    "of each kernel (an entry's launches one by one)")
a = p.parse_args()
dev = "cuda"
B, T, H, K = 1, a.T, a.H, 128
q = torch.randn(B, T, H, K, device=dev, dtype=torch.bfloat16)
k = torch.randn(B, T, H, K, device=dev, dtype=torch.bfloat16)
v = torch.randn(B, T, H, K, device=dev, dtype=torch.bfloat16)
g = torch.randn(B, T, H, K, device=dev, dtype=torch.bfloat16)
beta = torch.randn(B, T, H, device=dev, dtype=torch.bfloat16)
A_log = torch.rand(H, device=dev) * math.log(16)
dt_bias = torch.randn(H, K, device=dev)
h0 = torch.randn(B, H, K, K, device=dev) * 0.1
with torch.no_grad():
    o, ht = kda.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                          use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                          A_log=A_log, dt_bias=dt_bias, lower_bound=-5.0,
                          use_beta_sigmoid_in_kernel=True, state_v_first=True, safe_gate=True)
    if a.torch_profile:
        run = lambda: kda.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                    use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                                    A_log=A_log, dt_bias=dt_bias, lower_bound=-5.0,
                                    use_beta_sigmoid_in_kernel=True, state_v_first=True,
                                    safe_gate=True)
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
