#!/usr/bin/env python3
"""Context parallelism across GPUs (issue 27): `cp T=262144 H=16 P=2`, Kimi's call (gate, l2 norm and
beta sigmoid in kernel, bf16, K = V = 128, V-major states), one sequence split over the ranks of a
torch.distributed NCCL group (kda.cp), against the same sequence on one GPU (kda's, and FLA's where
it imports), in one job:

    torchrun --nproc-per-node 2 bench/bench_cp.py [--T 262144] [--H 16] [--fla DIR] [--json OUT]
    python3 bench/bench_cp.py --print-configs   # the kernel configurations (JSON; no torch)

(bench/device-call.sh's "cp" step runs it on nvidia-h200-x2 with the bench bundles.) Every rank
builds the same inputs from one seed and takes its share; rank 0 also times the whole sequence on
its GPU (the one-GPU baseline) and compares the ranks' gathered outputs with it (relative RMSE,
SPEC's bf16 bar 5e-3). NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and its companions: the
device machines' rule). Times: CUDA events around each call, after a barrier, median of --reps;
the CP time is the slowest rank's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

for _var, _val in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                   ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_var, _val)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))


class _Meta:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


def configs(H=16, K=128):
    """The kernel configurations a rank launches (kda.cp): the summary of its last piece (copies
    from zeros and the identity's columns: a dense batch with initial and final states) and its
    finish (its pieces, varlen with or without the merged initial state); the one-GPU baseline."""
    from kda import ops as kops

    def call(B, h0, ht, cu):
        q, v = _Meta((B, 64, H, K), "bf16"), _Meta((B, 64, H, K), "bf16")
        cu_m = _Meta((3,), "i32") if cu else None
        st = _Meta((2 if cu else B, H, K, K), "f32") if h0 else None
        return kops.chunk_kda_config(q, q, v, q, _Meta((B, 64, H), "bf16"), initial_state=st,
                                     output_final_state=ht, use_qk_l2norm_in_kernel=True,
                                     use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                                     state_v_first=True, cu_seqlens=cu_m, A_log=_Meta((H,), "f32"),
                                     dt_bias=_Meta((H * K,), "f32"), lower_bound=-5.0)
    return [call(2, True, True, False), call(1, True, False, True), call(1, False, False, True),
            call(1, False, False, False)]


def main():
    if "--print-configs" in sys.argv[1:]:
        print(json.dumps(configs(), indent=1, sort_keys=True))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--T", type=int, default=262144)
    ap.add_argument("--H", type=int, default=16)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--fla", default=os.environ.get("KDA_FLA_DIR", ""))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch
    import torch.distributed as dist
    import kda
    from kda import cp

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dev = torch.device("cuda")
    T, H, K = args.T, args.H, 128
    if T % world:
        raise SystemExit(f"--T {T} is not a multiple of the {world} ranks")
    gen = torch.Generator(device=dev).manual_seed(262144)
    r = lambda *s: torch.randn(*s, generator=gen, device=dev)  # noqa: E731
    x = dict(q=r(1, T, H, K).bfloat16(), k=r(1, T, H, K).bfloat16(), v=r(1, T, H, K).bfloat16(),
             g=r(1, T, H, K).bfloat16(), beta=r(1, T, H).bfloat16(),
             A_log=torch.log(torch.rand(H, generator=gen, device=dev) * 15 + 1), dt_bias=r(H * K) * 0.5)
    kw = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
              lower_bound=-5.0, state_v_first=True, A_log=x["A_log"], dt_bias=x["dt_bias"])
    ctx = cp.build_cp_context(torch.tensor([0, T], dtype=torch.int64), group=dist.group.WORLD, device=dev)
    part = T // world
    mine = {n: x[n][:, rank * part:(rank + 1) * part] for n in ("q", "k", "v", "g", "beta")}

    def timed(fn, barrier):
        times = []
        for i in range(args.warmup + args.reps):
            if barrier:
                dist.barrier()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            out = fn()
            b.record()
            torch.cuda.synchronize()
            if i >= args.warmup:
                times.append(a.elapsed_time(b))
        return statistics.median(times), out

    with torch.inference_mode():
        cp_ms, o_mine = timed(lambda: kda.chunk_kda(mine["q"], mine["k"], mine["v"], mine["g"], mine["beta"],
                                                    cp_context=ctx, **kw)[0], barrier=True)
        slowest = torch.tensor([cp_ms], device=dev)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        pieces = [torch.empty_like(o_mine) for _ in range(world)]
        dist.all_gather(pieces, o_mine.contiguous())
        row = {"case": f"cp T={T} H={H} P={world}", "T": T, "H": H, "ranks": world,
               "cp_ms": float(slowest.item()), "gpu": torch.cuda.get_device_name(0)}
        if rank == 0:
            one_ms, o_one = timed(lambda: kda.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], **kw)[0],
                                  barrier=False)
            o_cp = torch.cat(pieces, dim=1).double()
            row["kda_one_gpu_ms"] = one_ms
            row["cp_over_one_gpu"] = row["cp_ms"] / one_ms
            row["o_rel_rmse_cp_vs_one_gpu"] = float(((o_cp - o_one.double()).norm() / o_one.double().norm()).item())
            try:
                if args.fla:
                    sys.path.insert(0, args.fla)
                from fla.ops.kda import chunk_kda as fla_chunk_kda
                fla_kw = dict(kw)
                fla_kw.pop("state_v_first")
                fla_ms, _ = timed(lambda: fla_chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"],
                                                        **fla_kw)[0], barrier=False)
                row["fla_one_gpu_ms"] = fla_ms
            except Exception as e:  # noqa: BLE001
                row["fla_one_gpu_ms"] = None
                row["fla_error"] = f"{type(e).__name__}: {e}"
        dist.barrier()  # the other ranks wait while rank 0 times one GPU
    if rank == 0:
        print(json.dumps(row, indent=1, sort_keys=True))
        bar_ok = row["o_rel_rmse_cp_vs_one_gpu"] <= 5e-3
        print(f"{row['case']}: {row['cp_ms']:.3f} ms on {world} GPUs, {row['kda_one_gpu_ms']:.3f} ms on one "
              f"({row['cp_over_one_gpu']:.2f}); outputs {row['o_rel_rmse_cp_vs_one_gpu']:.1e} from one GPU's "
              f"({'within' if bar_ok else 'OUTSIDE'} 5e-3)")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rows": [row]}, f, indent=1, sort_keys=True)
                f.write("\n")
    dist.destroy_process_group()
    return 0 if rank else (0 if row["o_rel_rmse_cp_vs_one_gpu"] <= 5e-3 else 1)


if __name__ == "__main__":
    sys.exit(main())
