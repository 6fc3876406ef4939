"""Per-kernel timeline of the hybrid layer in pipelined pieces (GPU machine).

kda.hybrid_attention at `hybrid gated T=8192 H=32 W=512` (bf16, K = V = 128, the Kimi prologue) with
KDA_HYBRID_PIECES unset (the shape policy's choice) and each count given: every kernel of the last of three
calls with its start and end relative to the call's first kernel (torch.profiler's CUDA activity), so that the
window pieces' overlap with the state pieces, and what it costs the state chain, show.

    python3 bench/hybrid_timeline.py [PIECES ...]      (default: policy 1 4 8)
"""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import kda

B, T, H, K, W = 1, 8192, 32, 128, 512


def main(counts):
    g = torch.Generator(device="cuda").manual_seed(0)

    def r(s, dt=torch.bfloat16):
        return torch.randn(s, generator=g, device="cuda").to(dt)

    q, k, v, gate = (r((B, T, H, K)) for _ in range(4))
    beta, z = r((B, T, H)), r((B, T, H))
    A_log = torch.log(1 + 15 * torch.rand(H, device="cuda"))
    dt_bias = 0.5 * torch.randn(H * K, device="cuda")
    kw = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
              lower_bound=-5.0)
    for count in counts:
        if count == "policy":
            os.environ.pop("KDA_HYBRID_PIECES", None)
        else:
            os.environ["KDA_HYBRID_PIECES"] = count

        def fn():
            return kda.hybrid_attention(q, k, v, gate, beta, z, window=W, A_log=A_log, dt_bias=dt_bias, **kw)

        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(3):
                fn()
                torch.cuda.synchronize()
        evs = sorted((e for e in p.events() if e.device_type.name == "CUDA"), key=lambda e: e.time_range.start)
        last = evs[-(len(evs) // 3):]
        base = last[0].time_range.start
        span = (max(e.time_range.end for e in last) - base) / 1e3
        print(f"== pieces {count}: {len(last)} kernels a call, call span {span:.3f} ms")
        for e in last:
            s = e.time_range.start
            print(f"   {e.name[:44]:44s} start {(s - base) / 1e3:.3f} end {(e.time_range.end - base) / 1e3:.3f} "
                  f"dur {(e.time_range.end - s) / 1e3:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["policy", "1", "4", "8"])
