#!/usr/bin/env python3
"""GPU test suite: kda.chunk_kda / kda.fused_recurrent_kda against the float64 oracle.

Runs on a machine with an NVIDIA GPU, PyTorch and prebuilt bundles (no MLIR):

    KDA_BUNDLE_PATH=BUNDLES KDA_RUNTIME_LIBRARY=.../libkda_runtime.so \
    KDA_ORACLE_LIBRARY=.../liboracle.so python3 test/gpu/test_gpu.py [--sanitize] [-k SUBSTR]

(test/gpu/run.sh BUNDLES does all of that.) Bundles are looked up exactly as
users' calls look them up (KDA_BUNDLE_PATH, then ~/.cache/kda/bundles).

Every case draws fresh seeded inputs, rounds them to the case's dtype, fills
the outputs with NaN before the launch (kda.ops._alloc), and compares o and
the final state against test/oracle (float64, evaluated on the rounded
inputs) by relative RMSE with SPEC.md's bars: 1e-4 for fp32 inputs, 5e-3
for bf16/fp16. Every output element must be written and finite. One line per
case, a summary, exit 1 on any failure. Without torch or a CUDA GPU: prints
"SKIP: no CUDA GPU" and exits 0.

    python3 test/gpu/test_gpu.py --print-configs   # the kernel configurations the
                                                   # cases need (JSON; no torch needed)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import zlib
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)

import kda.ops as kops  # noqa: E402  (needs no torch at import)

BARS = {"f32": 1e-4, "bf16": 5e-3, "f16": 5e-3}
TORCH_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


class Case:
    """One test: dims, dtype, states, varlen, prologue, and which API to call."""

    def __init__(self, name, dtype, KV, B=2, T=100, H=4, HV=None, seqlens=None, h0=False, ht=False,
                 layout="k_major", prologue="none", g_dtype=None, cu_dtype="i64",
                 api="chunk", neg_eigval=False, scale=None, seed=0):
        self.name, self.dtype, self.K, self.V = name, dtype, KV, KV
        self.B, self.T, self.H, self.HV = B, T, H, HV or H
        self.seqlens = seqlens
        if seqlens is not None:
            self.B, self.T = 1, sum(seqlens)
        self.h0, self.ht, self.layout = h0, ht, layout
        self.prologue = prologue  # none | kimi_lb | kimi_softplus | lb_no_A_log
        self.g_dtype = g_dtype or dtype
        self.cu_dtype = cu_dtype
        self.api = api  # chunk | recurrent
        self.neg_eigval = neg_eigval
        self.scale = scale
        self.seed = seed

    @property
    def N(self):
        return len(self.seqlens) if self.seqlens is not None else self.B

    def kwargs(self):
        p = self.prologue
        kw = dict(scale=self.scale, output_final_state=self.ht, state_v_first=self.layout == "v_major",
                  use_qk_l2norm_in_kernel=p != "none", use_gate_in_kernel=p != "none",
                  use_beta_sigmoid_in_kernel=p != "none" or self.neg_eigval,
                  allow_neg_eigval=self.neg_eigval)
        if p in ("kimi_lb", "lb_no_A_log"):
            kw["lower_bound"] = -5.0
        return kw

    def shapes(self):
        B, T, H, HV, K, V = self.B, self.T, self.H, self.HV, self.K, self.V
        st = (self.N, HV, K, V) if self.layout == "k_major" else (self.N, HV, V, K)
        return dict(q=(B, T, H, K), k=(B, T, H, K), v=(B, T, HV, V), g=(B, T, HV, K), beta=(B, T, HV),
                    h0=st, A_log=(HV,), dt_bias=(HV * K,), cu=(self.N + 1,))

    def config(self):
        """The kernel configuration, derived exactly as kda.ops derives it."""
        s = self.shapes()
        q = Meta(s["q"], self.dtype)
        g = Meta(s["g"], self.g_dtype)
        beta = Meta(s["beta"], self.dtype)
        v = Meta(s["v"], self.dtype)
        h0 = Meta(s["h0"], "f32") if self.h0 else None
        cu = Meta(s["cu"], self.cu_dtype) if self.seqlens is not None else None
        A_log = Meta(s["A_log"], "f32") if self.prologue in ("kimi_lb", "kimi_softplus") else None
        dt_bias = Meta(s["dt_bias"], "f32") if self.prologue != "none" else None
        kw = self.kwargs()
        if self.api == "recurrent":
            return kops.fused_recurrent_kda_config(q, q, v, g, beta, A_log=A_log, dt_bias=dt_bias,
                                                   initial_state=h0, cu_seqlens=cu, **kw)
        return kops.chunk_kda_config(q, q, v, g, beta, initial_state=h0, cu_seqlens=cu,
                                     A_log=A_log, dt_bias=dt_bias, **kw)


class Meta:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


def all_cases():
    cases = []
    for dt in ("f32", "bf16"):
        for kv in (64, 128):
            p = f"{dt}-k{kv}"
            cases += [
                Case(f"{p}-kda-T100-H4", dt, kv, B=2, T=100, H=4),
                Case(f"{p}-kda-T1000-H1-h0-ht", dt, kv, B=2, T=1000, H=1, h0=True, ht=True, g_dtype="f32"),
                Case(f"{p}-kda-gva-H1-HV4-h0-ht-vmajor", dt, kv, B=2, T=100, H=1, HV=4, h0=True, ht=True,
                     layout="v_major"),
                Case(f"{p}-kda-varlen-37,1,64,200-h0-ht", dt, kv, seqlens=[37, 1, 64, 200], H=4, h0=True,
                     ht=True),
                Case(f"{p}-kda-varlen-i32-1,100,23-ht-vmajor", dt, kv, seqlens=[1, 100, 23], H=1, ht=True,
                     layout="v_major", cu_dtype="i32"),
                Case(f"{p}-kimi-lb-T100-H4-h0-ht", dt, kv, B=2, T=100, H=4, h0=True, ht=True, prologue="kimi_lb"),
                Case(f"{p}-kimi-softplus-T1000-H1-ht", dt, kv, B=2, T=1000, H=1, ht=True,
                     prologue="kimi_softplus"),
                Case(f"{p}-lb-noAlog-varlen-vmajor-h0-ht", dt, kv, seqlens=[5, 1, 130], H=4, h0=True, ht=True,
                     layout="v_major", prologue="lb_no_A_log"),
                Case(f"{p}-recurrent-T100-H4-h0-ht", dt, kv, B=2, T=100, H=4, h0=True, ht=True,
                     api="recurrent"),
            ]
    cases += [
        Case("f16-k64-kda-T100-H4-ht", "f16", 64, B=2, T=100, H=4, ht=True),
        Case("f16-k128-kimi-lb-varlen-h0-ht", "f16", 128, seqlens=[37, 1, 64], H=4, h0=True, ht=True,
             prologue="kimi_lb"),
        Case("f32-k64-neg-eigval-scale0.3-T100-ht", "f32", 64, B=2, T=100, H=2, ht=True, neg_eigval=True,
             scale=0.3),
    ]
    return cases


def sanitize_cases():
    return [
        Case("san-f32-k64-kda-T40-h0-ht", "f32", 64, B=2, T=40, H=1, h0=True, ht=True),
        Case("san-bf16-k128-kimi-lb-varlen-h0-ht", "bf16", 128, seqlens=[17, 1, 30], H=2, h0=True, ht=True,
             prologue="kimi_lb"),
        Case("san-bf16-k64-gva-vmajor-ht", "bf16", 64, B=1, T=33, H=1, HV=2, ht=True, layout="v_major"),
    ]


def unique_configs(cases):
    seen, out = set(), []
    for c in cases:
        cfg = c.config()
        key = json.dumps(cfg, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(cfg)
    return out


# ---------------------------------------------------------------------------
# Running (torch from here on)
# ---------------------------------------------------------------------------

def make_inputs(case, torch):
    """Inputs on the GPU in the case's dtypes, and their float64 values."""
    gen = torch.Generator().manual_seed(1000 + case.seed + zlib.crc32(case.name.encode()) % 100000)
    s = case.shapes()
    F = torch.nn.functional

    def randn(shape, scale=1.0):
        return torch.randn(shape, generator=gen, dtype=torch.float64) * scale

    def rand(shape, lo, hi):
        return lo + (hi - lo) * torch.rand(shape, generator=gen, dtype=torch.float64)

    p = case.prologue
    q, k = randn(s["q"]), randn(s["k"])
    if p == "none":  # unit rows keep the delta rule contractive without the kernel's l2 norm
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    v = randn(s["v"])
    if p == "none":
        g = F.logsigmoid(randn(s["g"], 2.0))  # log-space decay < 0, down to about -6
        beta = rand(s["beta"], 0.0, 1.0) if not case.neg_eigval else randn(s["beta"])
    else:
        g = randn(s["g"])  # raw gate
        beta = randn(s["beta"])  # logits
    x = {"q": q, "k": k, "v": v, "g": g, "beta": beta}
    if case.h0:
        x["h0"] = randn(s["h0"], 0.5)
    if p in ("kimi_lb", "kimi_softplus"):
        x["A_log"] = torch.log(rand(s["A_log"], 1.0, 16.0))
    if p != "none":
        x["dt_bias"] = randn(s["dt_bias"], 0.5)
    td = {n: getattr(torch, TORCH_DTYPES[d]) for n, d in
          (("q", case.dtype), ("k", case.dtype), ("v", case.dtype), ("g", case.g_dtype),
           ("beta", case.dtype), ("h0", "f32"), ("A_log", "f32"), ("dt_bias", "f32"))}
    gpu, ref = {}, {}
    for n, t in x.items():
        r = t.to(td[n])
        gpu[n] = r.cuda()
        ref[n] = r.to(torch.float64).numpy()
    if case.seqlens is not None:
        cu = [0]
        for L in case.seqlens:
            cu.append(cu[-1] + L)
        cu_t = torch.tensor(cu, dtype=torch.int64 if case.cu_dtype == "i64" else torch.int32)
        gpu["cu"], ref["cu"] = cu_t.cuda(), cu
    return gpu, ref


def run_case(case, torch, oracle):
    import kda
    gpu, ref = make_inputs(case, torch)
    kw = case.kwargs()
    A_log, dt_bias = gpu.get("A_log"), gpu.get("dt_bias")
    with torch.inference_mode():
        if case.api == "recurrent":
            o, ht = kda.fused_recurrent_kda(gpu["q"], gpu["k"], gpu["v"], gpu["g"], gpu["beta"],
                                            A_log=A_log, dt_bias=dt_bias, initial_state=gpu.get("h0"),
                                            cu_seqlens=gpu.get("cu"), **kw)
        else:
            extra = {}
            if A_log is not None:
                extra["A_log"] = A_log
            if dt_bias is not None:
                extra["dt_bias"] = dt_bias
            o, ht = kda.chunk_kda(gpu["q"], gpu["k"], gpu["v"], gpu["g"], gpu["beta"],
                                  initial_state=gpu.get("h0"), cu_seqlens=gpu.get("cu"), **kw, **extra)
        torch.cuda.synchronize()
    p = case.prologue
    ref_o, ref_ht = oracle.gated_delta(
        ref["q"], ref["k"], ref["v"], ref["g"], ref["beta"], initial_state=ref.get("h0"),
        cu_seqlens=ref.get("cu"), A_log=ref.get("A_log"), dt_bias=ref.get("dt_bias"),
        scale=kw["scale"], state_layout=case.layout, qk_l2norm=kw["use_qk_l2norm_in_kernel"],
        beta_activation=("sigmoid_neg_eigval" if case.neg_eigval else "sigmoid")
        if kw["use_beta_sigmoid_in_kernel"] else "none",
        gate_activation={"none": "none", "kimi_lb": "lower_bound", "lb_no_A_log": "lower_bound",
                         "kimi_softplus": "softplus"}[p],
        lower_bound=kw.get("lower_bound", -5.0))
    problems, metrics = [], []
    bar = BARS[case.dtype]
    for name, out, r in (("o", o, ref_o), ("ht", ht, ref_ht if case.ht else None)):
        if r is None:
            if out is not None:
                problems.append(f"{name}: expected None")
            continue
        if out is None:
            problems.append(f"{name}: missing")
            continue
        if tuple(out.shape) != tuple(r.shape):
            problems.append(f"{name}: shape {tuple(out.shape)}, expected {tuple(r.shape)}")
            continue
        finite = torch.isfinite(out.float())
        bad = int((~finite).sum())
        if bad:
            problems.append(f"{name}: {bad} of {out.numel()} elements not written or not finite")
            continue
        err = oracle.relative_rmse(out.double().cpu().numpy(), r)
        metrics.append(f"{name}={err:.2e}")
        if not err <= bar:
            problems.append(f"{name}: relative RMSE {err:.3e} > {bar:g}")
    return problems, metrics, bar


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sanitize", action="store_true",
                    help="a few small cases, for compute-sanitizer memcheck / racecheck")
    ap.add_argument("--print-configs", action="store_true",
                    help="print the kernel configurations of the cases (JSON) and exit")
    ap.add_argument("-k", dest="filter", default="", help="only cases whose name contains this")
    args = ap.parse_args()

    cases = sanitize_cases() if args.sanitize else all_cases()
    if args.print_configs:
        cases = all_cases() + sanitize_cases()
        print(json.dumps(unique_configs(cases), indent=1, sort_keys=True))
        return 0
    cases = [c for c in cases if args.filter in c.name]

    try:
        import torch
    except ImportError:
        print("SKIP: no CUDA GPU (torch is not installed)")
        return 0
    if not torch.cuda.is_available():
        print("SKIP: no CUDA GPU")
        return 0
    import numpy  # noqa: F401  (the oracle wrapper needs it)
    import oracle
    import kda
    import kda.ops

    def poisoned(shape, dtype, device):
        return torch.full(shape, float("nan"), dtype=dtype, device=device)

    kda.ops._alloc = poisoned

    print(f"device: {torch.cuda.get_device_name(0)} (cc {'.'.join(map(str, torch.cuda.get_device_capability(0)))}), "
          f"chip {kda.ops.chip_for_device(0)}; runtime {kda.runtime.library_path()}; "
          f"KDA_BUNDLE_PATH={os.environ.get('KDA_BUNDLE_PATH', '')}", flush=True)
    failed, passed = [], 0
    t_start = time.time()
    for case in cases:
        t0 = time.time()
        try:
            problems, metrics, bar = run_case(case, torch, oracle)
        except Exception as e:  # report and continue with the next case
            msg = f"{type(e).__name__}: {e}"
            if os.environ.get("KDA_TEST_TRACEBACK"):
                msg += "\n" + traceback.format_exc()
            problems, metrics, bar = [msg], [], BARS[case.dtype]
            try:
                torch.cuda.synchronize()
            except Exception as e2:
                problems.append(f"CUDA context: {e2}")
        dt = time.time() - t0
        status = "FAIL" if problems else "PASS"
        line = f"{status} {case.name:50s} {' '.join(metrics):30s} (bar {bar:g}, {dt:.2f}s)"
        if problems:
            line += "\n     " + "\n     ".join(p.replace("\n", "\n     ") for p in problems)
            failed.append(case.name)
        else:
            passed += 1
        print(line, flush=True)
    print(f"summary: {passed} passed, {len(failed)} failed of {len(cases)} "
          f"({time.time() - t_start:.1f}s)")
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
