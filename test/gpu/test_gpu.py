#!/usr/bin/env python3
"""GPU test suite: kda.chunk_kda / kda.fused_recurrent_kda / kda.window_attention against the float64 oracle.

Runs on a machine with an NVIDIA GPU, PyTorch and prebuilt bundles (no MLIR):

    KDA_BUNDLE_PATH=BUNDLES KDA_RUNTIME_LIBRARY=.../libkda_runtime.so \
    KDA_ORACLE_LIBRARY=.../liboracle.so python3 test/gpu/test_gpu.py [--sanitize] [-k SUBSTR]

(test/gpu/run.sh BUNDLES does all of that.) Bundles are looked up exactly as
users' calls look them up (KDA_BUNDLE_PATH, then ~/.cache/kda/bundles).

Every case draws fresh seeded inputs, rounds them to the case's dtype, fills
the outputs with NaN before the launch (kda.ops._alloc), and compares o and
the final state against test/oracle (float64, evaluated on the rounded
inputs) by relative RMSE with SPEC.md's bars: 1e-4 for fp32 inputs, 5e-3
for bf16/fp16. Every output element must be written and finite. Decode
cases (fused_recurrent_kda with ssm_state_indices on a pool of P > N slots,
some indices negative) compare o and the named pool slots with the oracle's
decodeStep, and require skipped rows of o to be exactly zero and the slots
not named to be bit-exact copies. Window cases compare kda.window_attention
with the oracle's windowAttention. One line per
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
                 api="chunk", neg_eigval=False, scale=None, seed=0, boundary=None, pool=None,
                 gate_scale=1.0, chunk=None, inplace=False, segments=None, pieces=None):
        self.name, self.dtype, self.K, self.V = name, dtype, KV, KV
        # log-space gates (prologue "none") times this: steep decays, tens per token, take the
        # intra-chunk kernel's exact pairwise form where the factored one would overflow
        self.gate_scale = gate_scale
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
        # chunk-boundary states: "fla" (return_intermediate_states: FLA's h,
        # every 64 tokens, in the inputs' dtype) or an interval (fp32, dense)
        self.boundary = boundary
        # boundary states into pool slots: None, or the pool's dtype ("f32" /
        # "bf16"); the block table has NB = max boundaries + 1 columns
        self.pool = pool
        # chunk_size (16, 32, 64; None: the default): 32 and 64 run on the lane kernels as
        # sub-chunk steps of 16, which the strategy records (step, tile_chunk)
        self.chunk = chunk
        # fused_recurrent_kda(..., inplace_final_state=True): the final state written over the
        # initial one, which must come back as the final state
        self.inplace = inplace
        # sequence-parallel segments (KDA_SEGMENTS: the shape policy's tile with that many): the
        # summary, combine and segmented state kernels
        self.segments = segments
        # the pipelined pieces the shape policy must choose (kda.ops.last_launch.pieces)
        self.pieces = pieces

    @property
    def N(self):
        return len(self.seqlens) if self.seqlens is not None else self.B

    @property
    def interval(self):
        return 64 if self.boundary == "fla" else (self.boundary or 0)

    def kwargs(self):
        p = self.prologue
        kw = dict(scale=self.scale, output_final_state=self.ht, state_v_first=self.layout == "v_major",
                  use_qk_l2norm_in_kernel=p != "none", use_gate_in_kernel=p != "none",
                  use_beta_sigmoid_in_kernel=p != "none" or self.neg_eigval,
                  allow_neg_eigval=self.neg_eigval)
        if p in ("kimi_lb", "lb_no_A_log"):
            kw["lower_bound"] = -5.0
        if self.boundary == "fla":
            kw["return_intermediate_states"] = True
        elif self.boundary:
            kw["boundary_interval"] = self.boundary
        if self.chunk:
            kw["chunk_size"] = self.chunk
        return kw

    def table_width(self):
        lengths = self.seqlens if self.seqlens is not None else [self.T] * self.B
        return max(-(-L // self.interval) for L in lengths) + 1

    def shapes(self):
        B, T, H, HV, K, V = self.B, self.T, self.H, self.HV, self.K, self.V
        st = (self.N, HV, K, V) if self.layout == "k_major" else (self.N, HV, V, K)
        return dict(q=(B, T, H, K), k=(B, T, H, K), v=(B, T, HV, V), g=(B, T, HV, K), beta=(B, T, HV),
                    h0=st, A_log=(HV,), dt_bias=(HV * K,), cu=(self.N + 1,))

    def _metas(self):
        """The call's operands as shapes and dtypes: q, k, v, g, beta, h0, A_log,
        dt_bias, cu_seqlens (None where the case has none)."""
        s = self.shapes()
        q = Meta(s["q"], self.dtype)
        g = Meta(s["g"], self.g_dtype)
        beta = Meta(s["beta"], self.dtype)
        v = Meta(s["v"], self.dtype)
        h0 = Meta(s["h0"], "f32") if self.h0 else None
        A_log = Meta(s["A_log"], "f32") if self.prologue in ("kimi_lb", "kimi_softplus") else None
        dt_bias = Meta(s["dt_bias"], "f32") if self.prologue != "none" else None
        cu = Meta(s["cu"], self.cu_dtype) if self.seqlens is not None else None
        return q, q, v, g, beta, h0, A_log, dt_bias, cu

    def config(self):
        """The kernel configuration, derived exactly as kda.ops derives it."""
        q, _, v, g, beta, h0, A_log, dt_bias, cu = self._metas()
        kw = self.kwargs()
        if self.api == "recurrent":
            return kops.fused_recurrent_kda_config(q, q, v, g, beta, A_log=A_log, dt_bias=dt_bias,
                                                   initial_state=h0, cu_seqlens=cu, **kw)
        if self.boundary and self.boundary != "fla":
            kw["boundary_dtype"] = self.pool or "f32"
            if self.pool:
                kw["boundary_indices_dtype"] = "i32"
        return kops.chunk_kda_config(q, q, v, g, beta, initial_state=h0, cu_seqlens=cu,
                                     A_log=A_log, dt_bias=dt_bias, **kw)

    def run(self, torch, oracle):
        return run_case(self, torch, oracle)


# FLA's bars for the gradients of 16-bit inputs (issue 24); fp32 keeps 1e-4.
GRAD_BARS = {"dq": 8e-3, "dk": 8e-3, "dv": 8e-3, "dh0": 8e-3, "dg": 2e-2, "dbeta": 2e-2, "dA_log": 2e-2,
             "ddt_bias": 2e-2}


class GradCase(Case):
    """chunk_kda's gradients (autograd: the forward keeping its states every
    kda.ops.GRAD_CHUNK tokens, then kda.gated_delta_grad) against the float64
    oracle's gatedDeltaGrad, for L = sum(do * o) + sum(dht * final_state).
    grad_v_block: the reverse scan's V block (KDA_GRAD_V_BLOCK, kda.tune's
    gradient tiles) instead of the shape policy's choice."""

    def __init__(self, *args, grad_v_block=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.grad_v_block = grad_v_block

    def configs(self):
        """The plain forward (torch.no_grad calls), the forward keeping its
        states, and the gradient."""
        q, k, v, g, beta, h0, A_log, dt_bias, cu = self._metas()
        gcfg = kops.chunk_kda_grad_config(q, k, v, g, beta, h0, A_log, dt_bias, cu, self._opts(),
                                          d_final_state=self.ht)
        return [Case.config(self), self._forward_with_states(), gcfg]

    def _opts(self):
        kw = self.kwargs()
        return dict(scale=kw["scale"], output_final_state=kw["output_final_state"],
                    use_qk_l2norm_in_kernel=kw["use_qk_l2norm_in_kernel"],
                    use_gate_in_kernel=kw["use_gate_in_kernel"],
                    use_beta_sigmoid_in_kernel=kw["use_beta_sigmoid_in_kernel"],
                    allow_neg_eigval=kw["allow_neg_eigval"], safe_gate=False,
                    lower_bound=kw.get("lower_bound"), state_v_first=kw["state_v_first"], cu_seqlens_cpu=None)

    def _forward_with_states(self):
        q, k, v, g, beta, h0, A_log, dt_bias, cu = self._metas()
        kw = self.kwargs()
        kw["boundary_interval"] = kops.GRAD_CHUNK
        return kops.chunk_kda_config(q, k, v, g, beta, initial_state=h0, cu_seqlens=cu, A_log=A_log,
                                     dt_bias=dt_bias, **kw)

    def run(self, torch, oracle):
        if self.grad_v_block is None:
            return run_grad_case(self, torch, oracle)
        os.environ["KDA_GRAD_V_BLOCK"] = str(self.grad_v_block)
        try:
            return run_grad_case(self, torch, oracle)
        finally:
            del os.environ["KDA_GRAD_V_BLOCK"]


class DecodeCase(Case):
    """fused_recurrent_kda(..., initial_state=pool, ssm_state_indices=idx): one
    token per sequence on a pool of P slots; every third index is -1 (skip).
    form "batch": q [N, 1, H, K]; "varlen": q [1, N, H, K] with cu_seqlens =
    arange(N + 1)."""

    def __init__(self, name, dtype, KV, N=6, P=16, H=2, HV=None, layout="k_major", prologue="none",
                 g_dtype=None, idx_dtype="i32", form="batch", seed=0, pool_dtype="f32",
                 read_write=False, tokens=1, spec=False):
        super().__init__(name, dtype, KV, B=N, T=tokens, H=H, HV=HV, layout=layout, prologue=prologue,
                         g_dtype=g_dtype, api="recurrent", seed=seed)
        # form "ragged" (tokens > 1): vLLM's packed q [1, total, H, K] with cu_seqlens, sequence n
        # has T - n % T tokens (1 .. T); the indices of its padding name real slots, which must
        # stay untouched.
        assert P > N * tokens and (tokens == 1 or form in ("batch", "ragged"))
        self.Nseq, self.P, self.idx_dtype, self.form = N, P, idx_dtype, form
        self.pool_dtype = pool_dtype
        self.read_write = read_write
        # tokens > 1: ssm_state_indices [N, T]; spec: with num_accepted_tokens.
        self.tokens, self.spec = tokens, spec
        if form == "varlen":
            self.B, self.T = 1, N

    def lengths(self):
        return [self.tokens - n % self.tokens for n in range(self.Nseq)]

    def shapes(self):
        s = super().shapes()
        HV, K, V = self.HV, self.K, self.V
        s["h0"] = (self.P, HV, K, V) if self.layout == "k_major" else (self.P, HV, V, K)
        s["cu"] = (self.Nseq + 1,)
        s["idx"] = (self.Nseq,) if self.tokens == 1 else (self.Nseq, self.tokens)
        return s

    def indices(self):
        """Distinct slots spread over the pool (deterministic), every third -1."""
        N, P = self.Nseq, self.P
        step = max(1, P // N)
        slots = [(self.seed * 7 + 3 + i * step) % P for i in range(N)]
        assert len(set(slots)) == N
        return [-1 if i % 3 == 1 else slots[i] for i in range(N)]

    def indices_2d(self):
        """tokens > 1: [N][T] distinct slots; sequence n % 3 == 1 keeps no state
        after its first token (skipped when it reads indices[n][0]), n % 3 ==
        2 none after its second."""
        N, T, P = self.Nseq, self.tokens, self.P
        slots = [(self.seed * 7 + 3 + i * (P // (N * T))) % P for i in range(N * T)]
        assert len(set(slots)) == N * T
        rows = [slots[n * T:(n + 1) * T] for n in range(N)]
        for n in range(N):
            if n % 3 in (1, 2):
                rows[n][n % 3 - 1] = -1
        return rows

    def accepted(self):
        """spec cases: num_accepted_tokens, 1 .. T."""
        return [1 + (2 * n) % self.tokens for n in range(self.Nseq)]

    def read_indices(self):
        """read_write cases: the slots the sequences read (read_state_indices):
        distinct from every destination (two sequences share one), every
        third from the second one -1 (skipped); else None (read in place)."""
        if not self.read_write:
            return None
        N, P = self.Nseq, self.P
        writes = {s for s in self.indices() if s >= 0}
        free = [p for p in range(P) if p not in writes]
        assert len(free) >= N - 1
        reads = [free[(i * 5 + 1) % len(free)] for i in range(N)]
        reads[-1] = reads[0]  # two sequences may read one slot
        return [-1 if i % 3 == 2 else reads[i] for i in range(N)]

    def config(self):
        s = self.shapes()
        q = Meta(s["q"], self.dtype)
        g = Meta(s["g"], self.g_dtype)
        v = Meta(s["v"], self.dtype)
        A_log = Meta(s["A_log"], "f32") if self.prologue in ("kimi_lb", "kimi_softplus") else None
        dt_bias = Meta(s["dt_bias"], "f32") if self.prologue != "none" else None
        cu = Meta(s["cu"], "i64") if self.form in ("varlen", "ragged") else None
        beta = Meta(s["beta"], self.dtype)
        if self.form == "ragged":
            total = sum(self.lengths())
            q = Meta((1, total, self.H, self.K), self.dtype)
            g = Meta((1, total, self.HV, self.K), self.g_dtype)
            v = Meta((1, total, self.HV, self.V), self.dtype)
            beta = Meta((1, total, self.HV), self.dtype)
        # num_accepted_tokens becomes read_state_indices (gathered from the
        # [N, T] indices, their dtype).
        reads = Meta((self.Nseq,), self.idx_dtype) if self.read_write or self.spec else None
        return kops.fused_recurrent_kda_config(q, q, v, g, beta, A_log=A_log,
                                               dt_bias=dt_bias, initial_state=Meta(s["h0"], self.pool_dtype),
                                               cu_seqlens=cu, ssm_state_indices=Meta(s["idx"], self.idx_dtype),
                                               read_state_indices=reads,
                                               **self.kwargs())

    def run(self, torch, oracle):
        return run_decode_case(self, torch, oracle)


class WindowCase:
    """kda.window_attention(q, k, v, window, scale, cu_seqlens)."""

    def __init__(self, name, dtype, KV, window, B=2, T=100, HQ=4, HK=None, HV=None, V=None, seqlens=None,
                 cu_dtype="i64", scale=None, seed=0, per_position=None, S=None):
        self.name, self.dtype, self.K, self.V, self.window = name, dtype, KV, V or KV, window
        # S > T: earlier keys (k and v hold S rows, the queries the last T of them).
        self.S = S
        # per_position = "i32" / "i64": window_sizes [T] drawn from 1 .. 2 window instead of the one window.
        self.per_position = per_position
        self.B, self.T, self.HQ = B, T, HQ
        self.HK, self.HV = HK or HQ, HV or HK or HQ
        self.seqlens, self.cu_dtype, self.scale, self.seed = seqlens, cu_dtype, scale, seed
        if seqlens is not None:
            self.B, self.T = 1, sum(seqlens)

    def shapes(self):
        B, T, K, V = self.B, self.T, self.K, self.V
        S = self.S or T
        return dict(q=(B, T, self.HQ, K), k=(B, S, self.HK, K), v=(B, S, self.HV, V),
                    cu=(len(self.seqlens) + 1,) if self.seqlens is not None else None)

    def config(self):
        s = self.shapes()
        cu = Meta(s["cu"], self.cu_dtype) if self.seqlens is not None else None
        ws = Meta((self.T,), self.per_position) if self.per_position else None
        return kops.window_attention_config(Meta(s["q"], self.dtype), Meta(s["k"], self.dtype),
                                            Meta(s["v"], self.dtype), None if ws else self.window,
                                            scale=self.scale, cu_seqlens=cu, window_sizes=ws)

    def run(self, torch, oracle):
        return run_window_case(self, torch, oracle)


class HybridCase:
    """kda.hybrid_attention(q, k, v, g, beta, z, window, mix, ...): the layer entry (the gated
    delta rule, the window, the mix in one call) against the oracle's gated_delta and
    window_attention, mixed in float64 (SPEC.md section 5)."""

    def __init__(self, name, dtype, KV, window, mix, B=2, T=100, H=2, HV=None, seqlens=None, z_form="head",
                 kimi=True, seed=0, schedule=None, pieces=None):
        self.name, self.dtype, self.K, self.V, self.window, self.mix = name, dtype, KV, KV, window, mix
        # Pipelined pieces (KDA_HYBRID_PIECES; None: kda.tune.hybrid_pieces' choice, one piece
        # for every such case here: none is one dense sequence of 8192 tokens or more).
        self.pieces = pieces
        # None: kda.tune.hybrid_schedule's choice (fused); "fused" or "overlap": forced through
        # KDA_HYBRID_SCHEDULE.
        self.schedule = schedule
        self.B, self.T, self.H, self.HV = B, T, H, HV or H
        self.seqlens, self.z_form, self.kimi, self.seed = seqlens, z_form, kimi, seed
        if seqlens is not None:
            self.B, self.T = 1, sum(seqlens)

    def shapes(self):
        B, T, H, HV, K, V = self.B, self.T, self.H, self.HV, self.K, self.V
        return dict(q=(B, T, H, K), k=(B, T, H, K), v=(B, T, HV, V), g=(B, T, HV, K), beta=(B, T, HV),
                    z=(B, T, HV) if self.z_form == "head" else (B, T, HV, V), A_log=(HV,), dt_bias=(HV * K,),
                    cu=(len(self.seqlens) + 1,) if self.seqlens is not None else None)

    def kwargs(self):
        if not self.kimi:
            return {}
        return dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                    lower_bound=-5.0)

    def config(self):
        s = self.shapes()
        M = lambda n, dt=self.dtype: Meta(s[n], dt)  # noqa: E731
        extra = dict(A_log=M("A_log", "f32"), dt_bias=M("dt_bias", "f32")) if self.kimi else {}
        cu = Meta(s["cu"], "i64") if self.seqlens is not None else None
        return kops.hybrid_attention_config(M("q"), M("k"), M("v"), M("g", "f32" if not self.kimi else self.dtype),
                                            M("beta"), M("z") if self.mix == "gated" else None,
                                            window=self.window, mix=self.mix, cu_seqlens=cu, **extra,
                                            **self.kwargs())

    def configs(self):
        base = self.config()
        if self.schedule == "fused":
            return [base]
        overlap = dict(base, schedule="overlap")
        return [overlap] if self.schedule == "overlap" else [base, overlap]

    def run(self, torch, oracle):
        return run_hybrid_case(self, torch, oracle)


class MultiScaleCase:
    """kda.multi_scale_attention(q, k, v, g, beta, z, decay_scales | M gates, mix): the layer entry
    (each scale's gated delta rule, the scaled gates and the mix in one call) against the oracle's
    gated_delta per scale, combined in float64 (SPEC.md section 5)."""

    def __init__(self, name, dtype, KV, mix, decay_scales=None, M=2, B=2, T=100, H=2, HV=None, seqlens=None,
                 l2norm=True, seed=0):
        self.name, self.dtype, self.K, self.V, self.mix = name, dtype, KV, KV, mix
        self.decay_scales = decay_scales
        self.M = len(decay_scales) if decay_scales is not None else M
        self.B, self.T, self.H, self.HV = B, T, H, HV or H
        self.seqlens, self.l2norm, self.seed = seqlens, l2norm, seed
        if seqlens is not None:
            self.B, self.T = 1, sum(seqlens)

    def shapes(self):
        B, T, H, HV, K, V = self.B, self.T, self.H, self.HV, self.K, self.V
        return dict(q=(B, T, H, K), k=(B, T, H, K), v=(B, T, HV, V), g=(B, T, HV, K), beta=(B, T, HV),
                    z=(B, T, HV, self.M), cu=(len(self.seqlens) + 1,) if self.seqlens is not None else None)

    def kwargs(self):
        return dict(use_qk_l2norm_in_kernel=self.l2norm, use_beta_sigmoid_in_kernel=True)

    def config(self):
        s = self.shapes()
        g = Meta(s["g"], "f32")
        cu = Meta(s["cu"], "i64") if self.seqlens is not None else None
        return kops.multi_scale_attention_config(
            Meta(s["q"], self.dtype), Meta(s["k"], self.dtype), Meta(s["v"], self.dtype),
            g if self.decay_scales is not None else [g] * self.M, Meta(s["beta"], self.dtype),
            Meta(s["z"], self.dtype) if self.mix == "gated" else None, decay_scales=self.decay_scales,
            mix=self.mix, cu_seqlens=cu, **self.kwargs())

    def run(self, torch, oracle):
        return run_multi_scale_case(self, torch, oracle)


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
                Case(f"{p}-kimi-lb-gva-H1-HV4-vmajor-T50-h0-ht", dt, kv, B=2, T=50, H=1, HV=4, h0=True,
                     ht=True, layout="v_major", prologue="kimi_lb"),
                Case(f"{p}-lb-noAlog-varlen-vmajor-h0-ht", dt, kv, seqlens=[5, 1, 130], H=4, h0=True, ht=True,
                     layout="v_major", prologue="lb_no_A_log"),
                Case(f"{p}-recurrent-T100-H4-h0-ht", dt, kv, B=2, T=100, H=4, h0=True, ht=True,
                     api="recurrent"),
            ]
    cases += [
        # FLA's decode call without a pool (one token per sequence, dense initial state): the decode
        # step on the N states as slots (kda.ops._per_sequence_decode); keeping the final state it
        # reads the caller's states as its read pool and writes a fresh pool (the caller's initial
        # state must come back unchanged), without it the step reads the caller's states and keeps
        # none.
        Case("bf16-k128-recurrent-T1-kimi-lb-vmajor-N7-h0-ht", "bf16", 128, B=7, T=1, H=4, h0=True, ht=True,
             layout="v_major", prologue="kimi_lb", api="recurrent"),
        Case("f32-k64-recurrent-T1-gva-H1-HV4-N5-h0-ht", "f32", 64, B=5, T=1, H=1, HV=4, h0=True, ht=True,
             api="recurrent"),
        Case("bf16-k64-recurrent-T1-softplus-N3-h0", "bf16", 64, B=3, T=1, H=2, h0=True, ht=False,
             prologue="kimi_softplus", api="recurrent"),
        # ... with inplace_final_state (kda.layers' decode): the step on the caller's states, no copy;
        # and a longer call, whose final state is copied over the initial one
        Case("bf16-k128-recurrent-T1-kimi-softplus-vmajor-N6-inplace", "bf16", 128, B=6, T=1, H=4, h0=True,
             ht=True, layout="v_major", prologue="kimi_softplus", api="recurrent", inplace=True),
        Case("f32-k64-recurrent-T40-inplace", "f32", 64, B=2, T=40, H=2, h0=True, ht=True, api="recurrent",
             inplace=True),
        # Steep log-space gates (down to about -70 per token): chunks whose factored decays would
        # overflow f32 take the pairwise form, warp by warp, beside chunks that do not.
        Case("bf16-k128-steep-gate-T300-H4-h0-ht", "bf16", 128, B=2, T=300, H=4, h0=True, ht=True,
             gate_scale=12.0, g_dtype="f32"),
        Case("f32-k64-steep-gate-varlen-37,1,64,200-ht-vmajor", "f32", 64, seqlens=[37, 1, 64, 200], H=2,
             ht=True, layout="v_major", gate_scale=12.0),
        # Steeper still (down to about -120 per token): a single gate step past 80 takes the pairwise
        # form; the chunks in between, the 2-key groups.
        Case("bf16-k128-steeper-gate-T300-H4-ht", "bf16", 128, B=2, T=300, H=4, ht=True,
             gate_scale=20.0, g_dtype="f32"),
        Case("f16-k64-kda-T100-H4-ht", "f16", 64, B=2, T=100, H=4, ht=True),
        Case("f16-k128-kimi-lb-varlen-h0-ht", "f16", 128, seqlens=[37, 1, 64], H=4, h0=True, ht=True,
             prologue="kimi_lb"),
        Case("f32-k64-neg-eigval-scale0.3-T100-ht", "f32", 64, B=2, T=100, H=2, ht=True, neg_eigval=True,
             scale=0.3),
        # Launch edges (issue 22): one sequence of 2^20 + 37 tokens (65,539 chunks: the intra-chunk
        # grid's chunk index is on grid x, whose limit is 2^31 - 1, not y's 65,535), and a varlen
        # batch with one long sequence among short ones (the flat grid's windows all belong to it
        # but a few; every other sequence fits in its first chunk).
        Case("bf16-k64-T1048613-H1-ht", "bf16", 64, B=1, T=(1 << 20) + 37, H=1, ht=True),
        Case("bf16-k128-kimi-lb-varlen-one-long-3,17,40000,5,64,1-h0-ht", "bf16", 128,
             seqlens=[3, 17, 40000, 5, 64, 1], H=2, h0=True, ht=True, prologue="kimi_lb"),
        # Sequence-parallel segments (the shape policy's tile with KDA_SEGMENTS segments): each
        # sequence's chunks in P runs, their transitions scanned; from an initial state or zeros,
        # both layouts, a varlen batch with one long sequence among short ones (empty segments),
        # V blocks of 32 (few units) and 128 (units x segments past the chip's half).
        Case("bf16-k128-kimi-lb-segments4-T3000-H2-h0-ht-vmajor", "bf16", 128, B=1, T=3000, H=2,
             h0=True, ht=True, layout="v_major", prologue="kimi_lb", segments=4),
        Case("bf16-k128-kimi-softplus-segments16-varlen-3,17,5000,5,64,1-h0-ht", "bf16", 128,
             seqlens=[3, 17, 5000, 5, 64, 1], H=2, h0=True, ht=True, prologue="kimi_softplus",
             segments=16),
        Case("f16-k128-kda-segments8-T1000-H3-ht", "f16", 128, B=2, T=1000, H=3, ht=True, segments=8),
        Case("bf16-k128-kimi-lb-segments8-T20000-H1-h0-ht", "bf16", 128, B=1, T=20000, H=1, h0=True,
             ht=True, prologue="kimi_lb", segments=8),
        # Pipelined pieces as the shape policy chooses them (kda.tune.shape_policy_pieces: one dense
        # sequence of 8192 tokens or more, few heads, no segments): 4 pieces under 16384 tokens, 8
        # from there; the runtime's graph form; states in and out, and none (the first piece's zeros,
        # the last one's scratch state); T not a multiple of the chunk.
        Case("bf16-k128-kimi-lb-pieces4-T8229-H2-h0-ht", "bf16", 128, B=1, T=8229, H=2, h0=True, ht=True,
             prologue="kimi_lb", pieces=4),
        Case("bf16-k128-kimi-softplus-pieces8-T16400-H1", "bf16", 128, B=1, T=16400, H=1,
             prologue="kimi_softplus", pieces=8),
        # The shape policy's tiles (kda.tune.shape_policy_tile, H200: 132 multiprocessors): 48 and
        # 40 (sequence, head) units take V blocks of 32, 80 and 72 units V blocks of 128 (the
        # derived state program's 4 warps of 32 rows); T not a multiple of the chunk, both state
        # layouts, varlen.
        Case("bf16-k128-kimi-lb-HV48-policy-vb32-T70-h0-ht-vmajor", "bf16", 128, B=1, T=70, H=48,
             h0=True, ht=True, layout="v_major", prologue="kimi_lb"),
        Case("bf16-k128-kimi-lb-B2-HV20-policy-vb32-T33-h0-ht", "bf16", 128, B=2, T=33, H=20,
             h0=True, ht=True, prologue="kimi_lb"),
        Case("bf16-k128-kimi-lb-HV80-policy-vb128-T150-h0-ht-vmajor", "bf16", 128, B=1,
             T=150, H=80, h0=True, ht=True, layout="v_major", prologue="kimi_lb"),
        Case("bf16-k128-kimi-softplus-varlen-HV24-policy-vb128-h0-ht", "bf16", 128,
             seqlens=[5, 40, 17], H=24, h0=True, ht=True, prologue="kimi_softplus"),
        # chunk_size 32 and 64 (FLA's habit): the lane kernels as sub-chunk steps of 16, with every
        # gate form, boundary states at the op's interval, varlen and both layouts.
        Case("bf16-k128-chunk64-kimi-softplus-varlen-37,1,64,200-h0-ht-fla-h", "bf16", 128,
             seqlens=[37, 1, 64, 200], H=4, h0=True, ht=True, prologue="kimi_softplus", boundary="fla",
             chunk=64),
        Case("f32-k64-chunk32-T100-h0-ht-vmajor", "f32", 64, B=2, T=100, H=2, h0=True, ht=True,
             layout="v_major", chunk=32),
        Case("bf16-k128-chunk64-steep-gate-T300-H4-ht", "bf16", 128, B=2, T=300, H=4, ht=True,
             gate_scale=12.0, g_dtype="f32", chunk=64),
        Case("bf16-k128-chunk64-kimi-lb-pool-f32-boundary64-varlen-37,1,64,200-h0-ht", "bf16", 128,
             seqlens=[37, 1, 64, 200], H=4, h0=True, ht=True, prologue="kimi_lb", boundary=64,
             pool="f32", chunk=64),
        # Chunk-boundary states (prefix caching): FLA's h (return_intermediate_states, every 64
        # tokens, dense and varlen-flattened) and explicit intervals (fp32; zeros past a shorter
        # sequence's end), both layouts, the shape policy's V blocks.
        Case("bf16-k128-fla-h-T200-h0-ht", "bf16", 128, B=2, T=200, H=4, h0=True, ht=True, boundary="fla"),
        Case("f32-k128-fla-h-T1000-H1-ht", "f32", 128, B=2, T=1000, H=1, ht=True, boundary="fla"),
        Case("bf16-k128-kimi-lb-fla-h-varlen-37,1,64,200-h0-ht-vmajor", "bf16", 128, seqlens=[37, 1, 64, 200],
             H=4, h0=True, ht=True, layout="v_major", prologue="kimi_lb", boundary="fla"),
        Case("f32-k64-boundary32-varlen-5,100,33-h0-vmajor", "f32", 64, seqlens=[5, 100, 33], H=2, h0=True,
             layout="v_major", boundary=32),
        Case("bf16-k64-boundary16-T70-ht", "bf16", 64, B=3, T=70, H=2, ht=True, boundary=16),
        Case("bf16-k128-kimi-lb-HV48-policy-vb32-boundary128-T300-h0-ht", "bf16", 128, B=1, T=300, H=48,
             h0=True, ht=True, prologue="kimi_lb", boundary=128),
        # ... written straight into the slots of a pool by a block table (some entries negative, one
        # column past every sequence's end): the slots not named stay bit-exact.
        Case("bf16-k128-kimi-lb-pool-f32-boundary64-varlen-37,1,64,200-h0-ht-vmajor", "bf16", 128,
             seqlens=[37, 1, 64, 200], H=4, h0=True, ht=True, layout="v_major", prologue="kimi_lb",
             boundary=64, pool="f32"),
        Case("bf16-k128-pool-bf16-boundary32-T100-ht", "bf16", 128, B=2, T=100, H=2, ht=True, boundary=32,
             pool="bf16"),
        Case("f32-k64-pool-f32-boundary16-varlen-5,40,17-vmajor", "f32", 64, seqlens=[5, 40, 17], H=2,
             layout="v_major", boundary=16, pool="f32"),
    ]
    cases += grad_cases() + decode_cases() + window_cases() + hybrid_cases() + multi_scale_cases()
    return cases


def grad_cases():
    """chunk_kda's gradients (issue 24): every gate form, GVA, varlen with an empty and a one-token
    sequence, both state layouts, initial and final states, K and V of 64 and 128."""
    return [
        GradCase("grad-bf16-k128-kimi-lb-varlen-37,1,0,90-h0-ht-vmajor", "bf16", 128,
                 seqlens=[37, 1, 0, 90], H=2, h0=True, ht=True, layout="v_major", prologue="kimi_lb"),
        # The reverse scan's wider V blocks (kda.tune.grad_policy_tile): 64 as the policy
        # takes it on its own for 136 (sequence, head) units, and 64 and 128 asked for.
        GradCase("grad-bf16-k128-kimi-lb-varlen-37,1,0,90-H34-h0-ht-vmajor-policy", "bf16", 128,
                 seqlens=[37, 1, 0, 90], H=34, h0=True, ht=True, layout="v_major", prologue="kimi_lb"),
        GradCase("grad-bf16-k128-kimi-lb-varlen-37,1,0,90-h0-ht-vmajor-vblock64", "bf16", 128,
                 seqlens=[37, 1, 0, 90], H=2, h0=True, ht=True, layout="v_major", prologue="kimi_lb",
                 grad_v_block=64),
        GradCase("grad-bf16-k128-kimi-lb-varlen-37,1,0,90-h0-ht-vmajor-vblock128", "bf16", 128,
                 seqlens=[37, 1, 0, 90], H=2, h0=True, ht=True, layout="v_major", prologue="kimi_lb",
                 grad_v_block=128),
        GradCase("grad-bf16-k128-kimi-softplus-gva-T100", "bf16", 128, B=2, T=100, H=1, HV=2,
                 prologue="kimi_softplus", layout="v_major"),
        # The exact decayed pairs' adjoint on lanes (K = 128: the softplus and log-space gates'
        # chunk programs, LaneTileBuilder::loopedApply).
        GradCase("grad-bf16-k128-kimi-softplus-varlen-37,1,0,90-h0-ht-vmajor", "bf16", 128,
                 seqlens=[37, 1, 0, 90], H=2, h0=True, ht=True, layout="v_major", prologue="kimi_softplus"),
        GradCase("grad-bf16-k128-logspace-f32-gate-varlen-37,1,90-h0-ht", "bf16", 128, seqlens=[37, 1, 90],
                 H=2, h0=True, ht=True, g_dtype="f32"),
        GradCase("grad-bf16-k64-logspace-f32-gate-T130-h0", "bf16", 64, B=2, T=130, H=2, h0=True,
                 g_dtype="f32"),
        GradCase("grad-bf16-k64-lb-no-A_log-T70-ht", "bf16", 64, B=1, T=70, H=2, ht=True,
                 prologue="lb_no_A_log"),
        GradCase("grad-f32-k64-logspace-varlen-50,13-h0-ht", "f32", 64, seqlens=[50, 13], H=2, h0=True,
                 ht=True),
    ]


def decode_cases():
    cases = []
    for dt in ("f32", "bf16"):
        for kv in (64, 128):
            p = f"{dt}-k{kv}-decode"
            cases += [
                DecodeCase(f"{p}-N6-P16-H4", dt, kv, N=6, P=16, H=4),
                DecodeCase(f"{p}-gva-H2-HV8-vmajor-kimi-lb-i64", dt, kv, N=7, P=19, H=2, HV=8,
                           layout="v_major", prologue="kimi_lb", idx_dtype="i64"),
                DecodeCase(f"{p}-varlen-form-kimi-softplus-N33-P40-H1-HV2", dt, kv, N=33, P=40, H=1, HV=2,
                           prologue="kimi_softplus", g_dtype="f32", form="varlen"),
            ]
    # K = 96 and 256: the decode kernel keeps q, k and the gate in another
    # lane layout per state layout (4 keys per lane, K / 32 consecutive keys
    # per lane, or none to move at all; lowering/lanes/GpuDecodeRegisters.cpp).
    for kv in (96, 256):
        cases += [
            DecodeCase(f"f32-k{kv}-decode-keys-kimi-softplus-N5-P12-H2", "f32", kv, N=5, P=12, H=2,
                       prologue="kimi_softplus", g_dtype="f32"),
            DecodeCase(f"bf16-k{kv}-decode-keys-vmajor-kimi-lb-N5-P12-H2", "bf16", kv, N=5, P=12, H=2,
                       layout="v_major", prologue="kimi_lb"),
        ]
    cases += [
        DecodeCase("f32-k64-decode-lb-noAlog-vmajor-N4-P9", "f32", 64, N=4, P=9, H=3, HV=3, layout="v_major",
                   prologue="lb_no_A_log"),
        # bf16 state pools (the decode kernel reads and writes 8-byte rows).
        DecodeCase("bf16-k128-decode-bf16pool-vmajor-kimi-lb-N9-P20", "bf16", 128, N=9, P=20, H=2, HV=4,
                   layout="v_major", prologue="kimi_lb", pool_dtype="bf16"),
        DecodeCase("bf16-k64-decode-bf16pool-N5-P11-H3", "bf16", 64, N=5, P=11, H=3, pool_dtype="bf16"),
        # Several tokens per sequence (ssm_state_indices [N, T]; states kept
        # after each named token), and FLA's speculative form
        # (num_accepted_tokens: read after the last accepted token).
        DecodeCase("bf16-k128-decode-tokens3-vmajor-kimi-lb-N7-P40", "bf16", 128, N=7, P=40, H=2, HV=4,
                   layout="v_major", prologue="kimi_lb", tokens=3),
        DecodeCase("bf16-k128-decode-spec4-vmajor-kimi-lb-N6-P48", "bf16", 128, N=6, P=48, H=1, HV=2,
                   layout="v_major", prologue="kimi_lb", tokens=4, spec=True),
        DecodeCase("f32-k64-decode-tokens2-N5-P24-H2", "f32", 64, N=5, P=24, H=2, tokens=2),
        # vLLM's packed form (cu_seqlens, 1 .. T tokens per sequence).
        DecodeCase("bf16-k128-decode-ragged4-vmajor-kimi-lb-N7-P60", "bf16", 128, N=7, P=60, H=2, HV=4,
                   layout="v_major", prologue="kimi_lb", tokens=4, form="ragged"),
        DecodeCase("f32-k64-decode-ragged-spec3-N6-P40", "f32", 64, N=6, P=40, H=1, tokens=3, spec=True,
                   form="ragged"),
        # Read one slot, write another (read_state_indices): one sequence
        # skipped (read -1, its destination untouched), one whose new state
        # is not kept (destination -1); read slots stay bit-exact.
        DecodeCase("bf16-k128-decode-read-write-vmajor-kimi-lb-N9-P24", "bf16", 128, N=9, P=24, H=2, HV=4,
                   layout="v_major", prologue="kimi_lb", read_write=True),
        DecodeCase("f32-k64-decode-read-write-i64-N7-P20-H2", "f32", 64, N=7, P=20, H=2, idx_dtype="i64",
                   read_write=True),
    ]
    return cases


def window_cases():
    cases = []
    for dt in ("f32", "bf16"):
        for kv in (64, 128):
            p = f"{dt}-k{kv}-window"
            cases += [
                WindowCase(f"{p}-W1-B2-T100-H4", dt, kv, 1, B=2, T=100, HQ=4),
                WindowCase(f"{p}-W64-gqa-HQ8-HK2-T300", dt, kv, 64, B=2, T=300, HQ=8, HK=2),
                WindowCase(f"{p}-W4096-gtT-B1-T200-H2", dt, kv, 4096, B=1, T=200, HQ=2),
                WindowCase(f"{p}-W64-varlen-37,1,130,64-gqa-HQ4-HK1", dt, kv, 64, seqlens=[37, 1, 130, 64],
                           HQ=4, HK=1),
            ]
    cases += [
        WindowCase("bf16-k128-window-W64-varlen-i32-kda-grouping-HQ2-HV4", "bf16", 128, 64, seqlens=[100, 3, 70],
                   HQ=2, HK=2, HV=4, cu_dtype="i32"),
        WindowCase("f32-k64-window-W7-scale0.3-T50", "f32", 64, 7, B=3, T=50, HQ=2, scale=0.3),
        # The lane kernel's block walk: many key blocks with interior (unmasked) ones, windows that
        # are not multiples of the 64-key block, fp16, K != V, narrow heads, long varlen sequences.
        WindowCase("bf16-k128-window-W512-T1000-H2", "bf16", 128, 512, B=1, T=1000, HQ=2),
        WindowCase("bf16-k128-window-W200-T700-gqa-HQ4-HK2", "bf16", 128, 200, B=2, T=700, HQ=4, HK=2),
        WindowCase("f16-k128-window-W64-T300-H2", "f16", 128, 64, B=1, T=300, HQ=2),
        WindowCase("f16-k64-window-W4096-varlen-130,700,64-H2", "f16", 64, 4096, seqlens=[130, 700, 64],
                   HQ=2),
        WindowCase("bf16-k64-v128-window-W100-T257-H2", "bf16", 64, 100, B=2, T=257, HQ=2, V=128),
        WindowCase("bf16-k32-window-W17-T150-scale0.5", "bf16", 32, 17, B=1, T=150, HQ=2, scale=0.5),
        WindowCase("bf16-k128-window-W1-T129", "bf16", 128, 1, B=1, T=129, HQ=1),
        # Heads of 256 (sm_90a: wgmma with Q in shared memory too): K = V, K != V both ways, GQA,
        # varlen, fp16.
        WindowCase("bf16-k256-window-W200-T700-gqa-HQ4-HK2", "bf16", 256, 200, B=2, T=700, HQ=4, HK=2),
        WindowCase("f16-k256-v128-window-W64-varlen-100,3,270", "f16", 256, 64, seqlens=[100, 3, 270],
                   HQ=2, V=128),
        WindowCase("bf16-k64-v256-window-W512-T600-H2", "bf16", 64, 512, B=1, T=600, HQ=2, V=256),
        # Per-position (adaptive) windows: sizes 1 .. 2 W per token, dense and varlen, both index types.
        WindowCase("bf16-k128-window-per-position-W100-T400-gqa", "bf16", 128, 100, B=2, T=400, HQ=4, HK=2,
                   per_position="i32"),
        WindowCase("f16-k64-window-per-position-W300-varlen-90,500,7", "f16", 64, 300, seqlens=[90, 500, 7],
                   HQ=2, per_position="i64"),
        WindowCase("f32-k64-window-per-position-W20-T130", "f32", 64, 20, B=1, T=130, HQ=2, per_position="i64"),
        # Earlier keys: the queries the last T of S key rows (a chunk of a sequence whose earlier keys
        # are kept), S - T no multiple of the 64-key blocks; per position; K = 256 (wgmma's Q in shared
        # memory on sm_90a); a window past S (causal over every key).
        WindowCase("bf16-k128-window-W512-T300-S1000-earlier-keys", "bf16", 128, 512, B=2, T=300, HQ=2, S=1000),
        WindowCase("bf16-k64-window-per-position-W100-T130-S400-earlier-keys-gqa", "bf16", 64, 100, B=1, T=130,
                   HQ=4, HK=2, S=400, per_position="i32"),
        WindowCase("bf16-k256-window-W200-T200-S520-earlier-keys", "bf16", 256, 200, B=1, T=200, HQ=2, S=520),
        WindowCase("f16-k128-window-W4096-T70-S333-earlier-keys", "f16", 128, 4096, B=1, T=70, HQ=2, S=333),
    ]
    return cases


def hybrid_cases():
    """The layer entry (kda.hybrid_attention, issue 23): gated per head and per channel, summed,
    GVA, varlen with a long sequence among short ones, the window past T, no prologue."""
    return [
        HybridCase("bf16-k128-hybrid-gated-W64-T300-kimi", "bf16", 128, 64, "gated", B=2, T=300),
        HybridCase("bf16-k128-hybrid-sum-W512-T700-kimi", "bf16", 128, 512, "sum", B=1, T=700),
        HybridCase("bf16-k128-hybrid-gated-channel-W100-gva-H2-HV4", "bf16", 128, 100, "gated", B=1, T=260, H=2,
                   HV=4, z_form="channel"),
        HybridCase("bf16-k128-hybrid-gated-W64-varlen-500,3,40", "bf16", 128, 64, "gated", seqlens=[500, 3, 40]),
        HybridCase("bf16-k128-hybrid-gated-W4096-T200", "bf16", 128, 4096, "gated", B=1, T=200),
        HybridCase("f16-k64-hybrid-sum-W1-T129-logspace", "f16", 64, 1, "sum", B=1, T=129, kimi=False),
        HybridCase("bf16-k128-hybrid-gated-W64-T300-fused", "bf16", 128, 64, "gated", B=2, T=300,
                   schedule="fused"),
        HybridCase("bf16-k128-hybrid-gated-channel-W100-gva-fused", "bf16", 128, 100, "gated", B=1, T=260, H=2,
                   HV=4, z_form="channel", schedule="fused"),
        HybridCase("bf16-k128-hybrid-sum-W512-T700-overlap", "bf16", 128, 512, "sum", B=1, T=700,
                   schedule="overlap"),
        # The overlap schedule's progress across many publishes (every 16 chunks: 125 chunks a
        # sequence), two sequences, a state grid that stands alone on the chip (the window then
        # starts once every state program has).
        HybridCase("bf16-k128-hybrid-gated-W256-T2000-B2-overlap", "bf16", 128, 256, "gated", B=2, T=2000,
                   schedule="overlap"),
        # One long sequence in pipelined pieces (KDA_HYBRID_PIECES: the counts chunk_kda's policy gives), each
        # piece's window over earlier keys after its state pass: gated per head (4 pieces, T off
        # any block), summed with 8 pieces and a window past a piece.
        HybridCase("bf16-k128-hybrid-gated-W512-T8229-H2-pieces4", "bf16", 128, 512, "gated", B=1, T=8229,
                   H=2, pieces=4),
        HybridCase("bf16-k128-hybrid-sum-W4096-T16400-H1-pieces8", "bf16", 128, 4096, "sum", B=1, T=16400,
                   H=1, pieces=8),
    ]


def multi_scale_cases():
    """The multi-scale layer entry (kda.multi_scale_attention, issue 23): decay scales of one gate
    (one of them 0: no decay) summed, M gates mixed by z, varlen and GVA, fp32 and bf16."""
    return [
        MultiScaleCase("bf16-k128-multiscale-sum-decays-1,0.25,0-T300", "bf16", 128, "sum",
                       decay_scales=[1.0, 0.25, 0.0], B=2, T=300),
        MultiScaleCase("bf16-k128-multiscale-gated-M2-varlen-300,3,70-gva", "bf16", 128, "gated", M=2,
                       seqlens=[300, 3, 70], H=1, HV=2),
        MultiScaleCase("f32-k64-multiscale-gated-decays-1,0.5-T100", "f32", 64, "gated", decay_scales=[1.0, 0.5],
                       B=2, T=100),
        MultiScaleCase("f16-k64-multiscale-sum-M3-T129-no-l2norm", "f16", 64, "sum", M=3, B=1, T=129,
                       l2norm=False),
    ]


def sanitize_cases():
    return [
        Case("san-f32-k64-kda-T40-h0-ht", "f32", 64, B=2, T=40, H=1, h0=True, ht=True),
        Case("san-bf16-k128-kimi-lb-varlen-h0-ht", "bf16", 128, seqlens=[17, 1, 30], H=2, h0=True, ht=True,
             prologue="kimi_lb"),
        Case("san-bf16-k64-gva-vmajor-ht", "bf16", 64, B=1, T=33, H=1, HV=2, ht=True, layout="v_major"),
        Case("san-bf16-k128-kimi-lb-gva-T20-h0-ht", "bf16", 128, B=1, T=20, H=1, HV=2, h0=True, ht=True,
             prologue="kimi_lb"),
        Case("san-bf16-k128-kimi-lb-HV48-policy-vb32-T20-h0-ht", "bf16", 128, B=1, T=20, H=48, h0=True,
             ht=True, layout="v_major", prologue="kimi_lb"),
        Case("san-bf16-k128-kimi-lb-HV80-policy-vb128-T20-h0-ht", "bf16", 128, B=1, T=20,
             H=80, h0=True, ht=True, layout="v_major", prologue="kimi_lb"),
        Case("san-bf16-k128-kimi-lb-segments4-varlen-3,90,20-h0-ht-vmajor", "bf16", 128,
             seqlens=[3, 90, 20], H=1, h0=True, ht=True, layout="v_major", prologue="kimi_lb", segments=4),
        Case("san-bf16-k128-kimi-lb-pieces4-T8200-H1-h0-ht", "bf16", 128, B=1, T=8200, H=1, h0=True,
             ht=True, prologue="kimi_lb", pieces=4),
        Case("san-bf16-k128-kimi-lb-fla-h-varlen-h0-ht-vmajor", "bf16", 128, seqlens=[70, 1, 20], H=2,
             h0=True, ht=True, layout="v_major", prologue="kimi_lb", boundary="fla"),
        Case("san-f32-k64-boundary16-varlen-5,40", "f32", 64, seqlens=[5, 40], H=1, boundary=16),
        Case("san-bf16-k128-pool-bf16-boundary32-varlen-40,70-vmajor", "bf16", 128, seqlens=[40, 70], H=1,
             layout="v_major", boundary=32, pool="bf16"),
        DecodeCase("san-bf16-k128-decode-gva-vmajor-kimi-lb", "bf16", 128, N=4, P=7, H=1, HV=2,
                   layout="v_major", prologue="kimi_lb"),
        DecodeCase("san-bf16-k128-decode-read-write-vmajor-kimi-lb", "bf16", 128, N=5, P=12, H=1, HV=2,
                   layout="v_major", prologue="kimi_lb", read_write=True),
        DecodeCase("san-bf16-k128-decode-spec3-vmajor-kimi-lb", "bf16", 128, N=4, P=30, H=1, HV=2,
                   layout="v_major", prologue="kimi_lb", tokens=3, spec=True),
        GradCase("san-grad-bf16-k64-kimi-lb-varlen-20,1,35-h0-ht-gva", "bf16", 64, seqlens=[20, 1, 35], H=1,
                 HV=2, h0=True, ht=True, layout="v_major", prologue="kimi_lb"),
        # K = 128: the chunk grid's lane program; a sequence ending inside a chunk, one
        # past the others' chunks.
        GradCase("san-grad-bf16-k128-kimi-lb-varlen-20,37-h0-ht", "bf16", 128, seqlens=[20, 37], H=1,
                 h0=True, ht=True, layout="v_major", prologue="kimi_lb"),
        # The softplus and log-space gates' chunk programs (their pairs' adjoint staged in each
        # warp's exchange region, LaneTileBuilder::loopedApply).
        GradCase("san-grad-bf16-k128-kimi-softplus-varlen-20,37-h0-ht", "bf16", 128, seqlens=[20, 37], H=1,
                 h0=True, ht=True, layout="v_major", prologue="kimi_softplus"),
        GradCase("san-grad-bf16-k128-logspace-varlen-20,37-h0", "bf16", 128, seqlens=[20, 37], H=1,
                 h0=True),
        # The reverse scan on the gradient policy's wider V blocks.
        GradCase("san-grad-bf16-k128-kimi-lb-varlen-20,37-h0-ht-vblock64", "bf16", 128, seqlens=[20, 37], H=1,
                 h0=True, ht=True, layout="v_major", prologue="kimi_lb", grad_v_block=64),
        WindowCase("san-bf16-k64-window-W16-varlen-gqa", "bf16", 64, 16, seqlens=[20, 1, 45], HQ=2, HK=1),
        # The lane kernel's two shared stages, interior and edge blocks, a partial last block.
        WindowCase("san-bf16-k128-window-W100-T300-gqa", "bf16", 128, 100, B=1, T=300, HQ=2, HK=1),
        WindowCase("san-bf16-k256-window-W100-T200", "bf16", 256, 100, B=1, T=200, HQ=2),
        WindowCase("san-bf16-k128-window-W100-T150-S410-earlier-keys", "bf16", 128, 100, B=1, T=150, HQ=2, S=410),
        HybridCase("san-bf16-k128-hybrid-gated-W64-varlen-gva", "bf16", 128, 64, "gated", seqlens=[70, 3, 40],
                   H=1, HV=2),
        HybridCase("san-bf16-k128-hybrid-gated-W64-T600-overlap", "bf16", 128, 64, "gated", B=1, T=600, H=2,
                   schedule="overlap"),
        HybridCase("san-bf16-k128-hybrid-gated-W100-T8200-H1-pieces4", "bf16", 128, 100, "gated", B=1, T=8200,
                   H=1, pieces=4),
        MultiScaleCase("san-bf16-k128-multiscale-gated-M2-varlen-40,3,20-gva", "bf16", 128, "gated", M=2,
                       seqlens=[40, 3, 20], H=1, HV=2),
    ]


def unique_configs(cases):
    seen, out = set(), []
    for c in cases:
        for cfg in (c.configs() if hasattr(c, "configs") else [c.config()]):
            key = json.dumps(cfg, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append(cfg)
    return out


# ---------------------------------------------------------------------------
# Running (torch from here on)
# ---------------------------------------------------------------------------

def offsets(seqlens):
    """cu_seqlens of a varlen batch: [0, L0, L0 + L1, ...]."""
    cu = [0]
    for L in seqlens:
        cu.append(cu[-1] + L)
    return cu


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
        g = F.logsigmoid(randn(s["g"], 2.0)) * case.gate_scale  # log-space decay < 0, about -6 and less
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
        cu = offsets(case.seqlens)
        cu_t = torch.tensor(cu, dtype=torch.int64 if case.cu_dtype == "i64" else torch.int32)
        gpu["cu"], ref["cu"] = cu_t.cuda(), cu
    if case.pool:
        # A block table of distinct slots (a few negative) into a pool of random states.
        N, NB = case.N, case.table_width()
        P = N * NB + 3
        table = torch.randperm(P, generator=gen)[:N * NB].view(N, NB).to(torch.int32)
        table.view(-1)[::5] = -1
        tail = s["h0"][2:]
        pool = torch.randn((P, case.HV) + tuple(tail), generator=gen)
        pool = pool.to(getattr(torch, TORCH_DTYPES[case.pool]))
        gpu["table"], ref["table"] = table.cuda(), table.numpy()
        gpu["pool"], ref["pool0"] = pool.cuda(), pool.clone()
    return gpu, ref


def expected_program(role, dtype):
    """How a lane kernel of `role` is written for inputs of `dtype`: every lane kernel is an
    algorithm of passes/ run on lane tiles ("derived": the intra-chunk kernel since the nineteenth
    session, the state kernel since the eighteenth; the decode step and window attention from the
    start). A bundle of an older compiler reports "per_lane" and fails here: rebuild it."""
    return "derived"


def check_strategy(problems, metrics, expect, dtype=None):
    """Every kernel the last call launched was written as kda-gpu-select-strategy said (the
    manifest's kda.strategy, reported by kda.ops.last_launch): lanes for gated delta ops and
    decode steps, the suite's every configuration, and 16-bit window attention; tiles for fp32
    window attention. A kernel that silently fell back to the shared-memory tile lowering fails its case.
    With `dtype`, each lane kernel's program too (expected_program)."""
    st = getattr(kops.last_launch, "strategy", None)
    if not st:
        problems.append("kda.ops.last_launch reports no strategy")
        return
    # (The segments' combine kernel is a tile program by design: a few K x K products.)
    wrong = {n: s for n, s in st.items() if s.get("kind") != expect and s.get("kernel") != "combine"}
    if wrong:
        problems.append(f"strategy: expected {expect} for every kernel, got {wrong}")
        return
    metrics.append(expect)
    if dtype is None or expect != "lanes":
        return
    wrong = {n: s.get("program") for n, s in st.items()
             if s.get("kind") == "lanes"
             and s.get("program") != expected_program(s.get("kernel"), dtype)}
    if wrong:
        problems.append(f"strategy: programs {wrong}, expected "
                        f"{ {n: expected_program(s.get('kernel'), dtype) for n, s in st.items()} }")
    elif any(s.get("kernel") == "state" for s in st.values()):
        metrics.append("state " + expected_program("state", dtype))
    # KDA_EXPECT_STATE_INSTRUCTION: the lane kernels' matrix instruction
    # (wmma_emulated: bundles from kda-compile --emulate-wmma, gfx1100's
    # lane programs on this GPU; scripts/build-emulated-amd-bundles.sh).
    want = os.environ.get("KDA_EXPECT_STATE_INSTRUCTION")
    if want:
        # The state, intra and window kernels on the emulated unit.
        wrong = {n: s.get("instruction") for n, s in st.items()
                 if s.get("kernel") in ("state", "intra", "window") and s.get("kind") == "lanes"
                 and s.get("instruction") != want}
        if wrong:
            problems.append(f"strategy: state instructions {wrong}, expected {want}")
        else:
            metrics.append(" ".join(f"{s.get('kernel')} {s.get('instruction') or s.get('kind')}"
                                    for s in st.values()
                                    if s.get("kernel") in ("state", "intra", "window")))


def run_case(case, torch, oracle):
    import kda
    gpu, ref = make_inputs(case, torch)
    kw = case.kwargs()
    A_log, dt_bias = gpu.get("A_log"), gpu.get("dt_bias")
    with torch.inference_mode():
        if case.api == "recurrent":
            h0_before = gpu["h0"].clone() if case.h0 and not case.inplace else None
            extra = {"inplace_final_state": True} if case.inplace else {}
            o, ht = kda.fused_recurrent_kda(gpu["q"], gpu["k"], gpu["v"], gpu["g"], gpu["beta"],
                                            A_log=A_log, dt_bias=dt_bias, initial_state=gpu.get("h0"),
                                            cu_seqlens=gpu.get("cu"), **kw, **extra)
            if h0_before is not None and not torch.equal(h0_before, gpu["h0"]):
                return ["fused_recurrent_kda changed the caller's initial_state"], [], BARS[case.dtype]
            if case.inplace and ht is not gpu["h0"]:
                return ["inplace_final_state: the final state is not the initial_state tensor"], [], \
                    BARS[case.dtype]
            if not case.ht and ht is not None:
                return ["fused_recurrent_kda returned a final state it was not asked for"], [], BARS[case.dtype]
        else:
            extra = {}
            if A_log is not None:
                extra["A_log"] = A_log
            if dt_bias is not None:
                extra["dt_bias"] = dt_bias
            if case.pool:
                extra["boundary_state_indices"] = gpu["table"]
                extra["boundary_states"] = gpu["pool"]
            saved = os.environ.get("KDA_SEGMENTS")
            if case.segments:
                os.environ["KDA_SEGMENTS"] = str(case.segments)
            try:
                res = kda.chunk_kda(gpu["q"], gpu["k"], gpu["v"], gpu["g"], gpu["beta"],
                                    initial_state=gpu.get("h0"), cu_seqlens=gpu.get("cu"), **kw, **extra)
            finally:
                if case.segments:
                    if saved is None:
                        os.environ.pop("KDA_SEGMENTS", None)
                    else:
                        os.environ["KDA_SEGMENTS"] = saved
            o, ht = res[0], res[1]
            hb = res[2] if len(res) > 2 else None
            if (hb is None) != (not case.interval):
                return [f"chunk_kda returned {len(res)} values"], [], BARS[case.dtype]
        torch.cuda.synchronize()
    p = case.prologue
    expected = oracle.gated_delta(
        ref["q"], ref["k"], ref["v"], ref["g"], ref["beta"], initial_state=ref.get("h0"),
        cu_seqlens=ref.get("cu"), A_log=ref.get("A_log"), dt_bias=ref.get("dt_bias"),
        scale=kw["scale"], state_layout=case.layout, qk_l2norm=kw["use_qk_l2norm_in_kernel"],
        beta_activation=("sigmoid_neg_eigval" if case.neg_eigval else "sigmoid")
        if kw["use_beta_sigmoid_in_kernel"] else "none",
        gate_activation={"none": "none", "kimi_lb": "lower_bound", "lb_no_A_log": "lower_bound",
                         "kimi_softplus": "softplus"}[p],
        lower_bound=kw.get("lower_bound", -5.0), boundary_interval=case.interval)
    ref_o, ref_ht = expected[0], expected[1]
    problems, metrics = [], []
    bar = BARS[case.dtype]
    if case.pool:
        # Named slots of entries inside their sequence hold the oracle's state; every other slot
        # is the pool as it was, bit for bit.
        import numpy as np
        dense, table = expected[2], ref["table"]
        lengths = case.seqlens if case.seqlens is not None else [case.T] * case.B
        written, expect = [], []
        for n, L in enumerate(lengths):
            for j in range(table.shape[1]):
                if table[n, j] >= 0 and j * case.interval < L:
                    written.append(int(table[n, j]))
                    expect.append(dense[n, j])
        if hb is not gpu["pool"]:
            problems.append("chunk_kda did not return the pool it was given")
        _compare(torch, oracle, "pool", hb[torch.tensor(written, device=hb.device)], np.stack(expect), bar,
                 problems, metrics)
        keep = torch.ones(hb.shape[0], dtype=torch.bool)
        keep[written] = False
        if not torch.equal(hb.cpu()[keep], ref["pool0"][keep]):
            problems.append("pool slots the table does not name (or names past a sequence's end) changed")
    elif case.interval:
        ref_hb = expected[2]  # [N, NT, HV, ., .], zeros past a shorter sequence's end
        if case.boundary == "fla" and case.seqlens is not None:
            rows = [ref_hb[n, j] for n, L in enumerate(case.seqlens) for j in range(-(-L // 64))]
            import numpy as np
            ref_hb = np.stack(rows)[None]
        want_dtype = getattr(torch, TORCH_DTYPES[case.dtype if case.boundary == "fla" else "f32"])
        if hb.dtype != want_dtype:
            problems.append(f"h: dtype {hb.dtype}, expected {want_dtype}")
        _compare(torch, oracle, "h", hb, ref_hb, bar, problems, metrics)
        if not problems and (ref_hb == 0).any():
            # entries no sequence reaches are exact zeros, not stale memory
            import numpy as np
            stray = int((hb.double().cpu().numpy()[ref_hb == 0] != 0).sum())
            if stray:
                problems.append(f"h: {stray} elements past the sequences' ends are not zero")
    check_strategy(problems, metrics, "lanes", case.dtype)
    if case.chunk and case.chunk > 16:
        # chunk_size 32 / 64: every kernel says it runs the op's chunk as sub-chunk steps of 16
        st = getattr(kops.last_launch, "strategy", None) or {}
        steps = {n: (s.get("step"), s.get("tile_chunk")) for n, s in st.items()
                 if s.get("kernel") in ("intra", "state")}
        if not steps or any(v != (16, case.chunk) for v in steps.values()):
            problems.append(f"strategy: expected step 16 for chunk {case.chunk}, got {steps}")
        else:
            metrics.append(f"steps16x{case.chunk // 16}")
    if case.segments:
        # The segmented bundle ran: its tile has the segments, and a summary, a combine and a
        # state kernel were launched.
        tile = getattr(kops.last_launch, "bundle_tile", None) or {}
        kinds = sorted(s.get("kernel") for s in (getattr(kops.last_launch, "strategy", None) or {}).values())
        if tile.get("segments") != case.segments:
            problems.append(f"segments: the tile that ran is {tile}, expected segments={case.segments}")
        elif kinds != ["combine", "intra", "state", "state"]:
            problems.append(f"segments: kernels {kinds}")
        else:
            metrics.append(f"segments={case.segments}")
    if case.pieces:
        # The policy's pieces ran (a missing pieces bundle is an error, not one piece), at the
        # pieces' tile, the intra-chunk and state kernels on lanes.
        got = getattr(kops.last_launch, "pieces", None)
        tile = getattr(kops.last_launch, "bundle_tile", None) or {}
        if got != case.pieces:
            problems.append(f"pieces: {got} ran, the shape policy's {case.pieces} expected")
        elif tile.get("v_block") != kda.tune.PIECE_V_BLOCK:
            problems.append(f"pieces: the tile that ran is {tile}")
        else:
            metrics.append(f"pieces={got}")
    if "policy" in case.name:
        # The shape policy's tile must be the bundle that ran (kda.ops falls
        # back to the default tile, silently, where its bundle is missing).
        tile = getattr(kops.last_launch, "bundle_tile", None)
        if tile is None:
            problems.append(f"shape policy: the default tile ran (asked for "
                            f"{getattr(kops.last_launch, 'requested_tile', None)})")
        else:
            metrics.append(f"v_block={tile['v_block']}")
            # The derived state program runs with the tile's chunks in flight
            # (the strategy's stages, from --state-stages).
            want = tile.get("state_stages", 2)
            got = {n: s.get("stages") for n, s in (getattr(kops.last_launch, "strategy", None) or {}).items()
                   if s.get("kernel") == "state" and s.get("program") == "derived"}
            if any(v != want for v in got.values()):
                problems.append(f"strategy: state stages {got}, the tile asks for {want}")
            elif got:
                metrics.append(f"stages={want}")
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


def _to_torch_inputs(torch, x, dtypes):
    gpu, ref = {}, {}
    for n, t in x.items():
        r = t.to(getattr(torch, TORCH_DTYPES[dtypes[n]]))
        gpu[n] = r.cuda()
        ref[n] = r.to(torch.float64).numpy()
    return gpu, ref


def _compare(torch, oracle, name, out, r, bar, problems, metrics):
    """Relative RMSE of out (torch) against r (numpy float64); every element finite."""
    if tuple(out.shape) != tuple(r.shape):
        problems.append(f"{name}: shape {tuple(out.shape)}, expected {tuple(r.shape)}")
        return
    import numpy as np
    ref_bad = int((~np.isfinite(r)).sum())
    if ref_bad:
        # Inputs outside SPEC.md's domain (the float64 reference itself overflowed): the case
        # is wrong, not the kernel.
        problems.append(f"{name}: the oracle's reference has {ref_bad} non-finite elements (the case's "
                        "inputs are invalid)")
        return
    bad = int((~torch.isfinite(out.float())).sum())
    if bad:
        problems.append(f"{name}: {bad} of {out.numel()} elements not written or not finite")
        return
    err = oracle.relative_rmse(out.double().cpu().numpy(), r)
    metrics.append(f"{name}={err:.2e}")
    if not err <= bar:
        problems.append(f"{name}: relative RMSE {err:.3e} > {bar:g}")


def run_grad_case(case, torch, oracle):
    import kda
    import numpy as np
    gpu, ref = make_inputs(case, torch)
    kw = case.kwargs()
    names = [n for n in ("q", "k", "v", "g", "beta", "h0", "A_log", "dt_bias") if n in gpu]
    leaves = {n: gpu[n].detach().clone().requires_grad_(True) for n in names}
    gen = torch.Generator().manual_seed(7 + case.seed)
    s = case.shapes()
    do = torch.randn(s["v"], generator=gen, dtype=torch.float64)
    dht = torch.randn(s["h0"], generator=gen, dtype=torch.float64) if case.ht else None
    extra = {n: leaves[n] for n in ("A_log", "dt_bias") if n in leaves}
    o, ht = kda.chunk_kda(leaves["q"], leaves["k"], leaves["v"], leaves["g"], leaves["beta"],
                          initial_state=leaves.get("h0"), cu_seqlens=gpu.get("cu"), **kw, **extra)
    loss = (o.double() * do.cuda()).sum()
    if case.ht:
        loss = loss + (ht.double() * dht.cuda()).sum()
    loss.backward()
    torch.cuda.synchronize()
    # The oracle sees dO as the kernel does: rounded to o's dtype.
    do_seen = do.to(o.dtype).to(torch.float64)
    p = case.prologue
    want = oracle.gated_delta_grad(
        ref["q"], ref["k"], ref["v"], ref["g"], ref["beta"], ref.get("h0"), ref.get("cu"), ref.get("A_log"),
        ref.get("dt_bias"), do=do_seen.numpy(), dht=dht.numpy() if dht is not None else None,
        scale=kw["scale"], state_layout=case.layout, qk_l2norm=kw["use_qk_l2norm_in_kernel"],
        beta_activation="sigmoid" if p != "none" else "none",
        gate_activation={"none": "none", "kimi_lb": "lower_bound", "lb_no_A_log": "lower_bound",
                         "kimi_softplus": "softplus"}[p],
        lower_bound=-5.0)
    problems, metrics = [], []
    # How the gradient's step and chunk grids were written (both on lanes by default, every gate
    # form's; K = 64 at 8 warps takes the chunk grid's tiles, and a bundle built with
    # kda-compile --step-registers=false / --chunk-registers=false takes them too);
    # each case asserts what the default build gives it, or KDA_EXPECT_STEP / KDA_EXPECT_CHUNK
    # (lanes, tiles, or any) where the bundles were built otherwise.
    # (From the gradient's bundle: the backward runs in autograd's own thread, and
    # kda.ops.last_launch is per thread.)
    from kda import bundles as kbundles
    path = kbundles.find_bundle(case.configs()[-1], kops.chip_for_device(0))
    st = {}
    if path:
        with open(os.path.join(path, "manifest.json")) as f:
            st = {k["name"]: k.get("strategy") or {} for k in json.load(f).get("kernels", [])}
    chunk_lanes = case.K >= 128
    for kernel, env, default in (("step", "KDA_EXPECT_STEP", "lanes"),
                                 ("chunk", "KDA_EXPECT_CHUNK", "lanes" if chunk_lanes else "tiles")):
        kinds = [s.get("kind") for s in st.values() if s.get("kernel") == kernel]
        if kinds:
            metrics.append(f"{kernel} {kinds[0]}")
        expected = os.environ.get(env, default)
        if expected != "any" and kinds != [expected]:
            problems.append(f"strategy: the gradient's {kernel} kernel {kinds or 'absent'}, expected {expected}")
    grad_of = {"q": "dq", "k": "dk", "v": "dv", "g": "dg", "beta": "dbeta", "h0": "dh0", "A_log": "dA_log",
               "dt_bias": "ddt_bias"}
    worst = 0.0
    for n in names:
        leaf, gname = leaves[n], grad_of[n]
        bar = BARS["f32"] if case.dtype == "f32" else GRAD_BARS[gname]
        if leaf.grad is None:
            problems.append(f"no gradient for {n}")
            continue
        if leaf.grad.dtype != leaf.dtype or leaf.grad.shape != leaf.shape:
            problems.append(f"{gname}: {leaf.grad.dtype} {tuple(leaf.grad.shape)}, expected {leaf.dtype} "
                            f"{tuple(leaf.shape)}")
        err = oracle.relative_rmse(leaf.grad.double().cpu().numpy(),
                                   np.reshape(want[gname], tuple(leaf.shape)))
        worst = max(worst, err / bar)
        metrics.append(f"{gname}={err:.1e}")
        if not err <= bar:
            problems.append(f"{gname}: relative RMSE {err:.3e} against the oracle, bar {bar:g}")
    return problems, metrics, BARS[case.dtype] if case.dtype == "f32" else 8e-3


def run_decode_case(case, torch, oracle):
    import kda
    import numpy as np
    gen = torch.Generator().manual_seed(1000 + case.seed + zlib.crc32(case.name.encode()) % 100000)
    s = case.shapes()
    F = torch.nn.functional

    def randn(shape, scale=1.0):
        return torch.randn(shape, generator=gen, dtype=torch.float64) * scale

    p = case.prologue
    x = {"q": randn(s["q"]), "k": randn(s["k"]), "v": randn(s["v"])}
    if p == "none":
        x["q"], x["k"] = F.normalize(x["q"], dim=-1), F.normalize(x["k"], dim=-1)
        x["g"] = F.logsigmoid(randn(s["g"], 2.0))
        x["beta"] = torch.rand(s["beta"], generator=gen, dtype=torch.float64)
    else:
        x["g"], x["beta"] = randn(s["g"]), randn(s["beta"])
    x["pool"] = randn(s["h0"], 0.5)
    if p in ("kimi_lb", "kimi_softplus"):
        x["A_log"] = torch.log(1.0 + 15.0 * torch.rand(s["A_log"], generator=gen, dtype=torch.float64))
    if p != "none":
        x["dt_bias"] = randn(s["dt_bias"], 0.5)
    dtypes = {"q": case.dtype, "k": case.dtype, "v": case.dtype, "g": case.g_dtype, "beta": case.dtype,
              "pool": case.pool_dtype, "A_log": "f32", "dt_bias": "f32"}
    gpu, ref = _to_torch_inputs(torch, x, dtypes)
    idx_type = torch.int32 if case.idx_dtype == "i32" else torch.int64
    T = case.tokens
    if T > 1:
        # Several tokens per sequence: read indices[n][0], or with
        # num_accepted_tokens indices[n][accepted - 1] (FLA's form).
        rows = case.indices_2d()
        idx = [x for r in rows for x in r]
        idx_t = torch.tensor(rows, dtype=idx_type).cuda()
        if case.spec:
            acc = case.accepted()
            reads = [rows[n][acc[n] - 1] for n in range(case.Nseq)]
            kw_reads = {"num_accepted_tokens": torch.tensor(acc, dtype=torch.int32).cuda()}
        else:
            reads, kw_reads = [r[0] for r in rows], {}
        oracle_reads = reads
    else:
        idx = case.indices()
        idx_t = torch.tensor(idx, dtype=idx_type).cuda()
        reads = case.read_indices()
        if reads is not None:
            kw_reads = {"read_state_indices": torch.tensor(reads, dtype=idx_type).cuda()}
            oracle_reads = reads
        else:
            kw_reads, reads, oracle_reads = {}, idx, None
    cu = torch.arange(case.Nseq + 1, dtype=torch.int64).cuda() if case.form == "varlen" else None
    pool = gpu["pool"]
    pool_before = pool.clone()
    kw = case.kwargs()
    kw.pop("output_final_state")
    ins = {n: gpu[n] for n in ("q", "k", "v", "g", "beta")}
    if case.form == "ragged":
        # Pack the [N, T] inputs; the oracle sees the padding's states as not kept.
        lens = case.lengths()
        keep_tok = [(n, t) for n in range(case.Nseq) for t in range(lens[n])]
        ins = {n: torch.stack([x[a, b] for a, b in keep_tok]).unsqueeze(0) for n, x in ins.items()}
        cu = torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))], dtype=torch.int64).cuda()
        idx = [idx[n * T + t] if t < lens[n] else -1 for n in range(case.Nseq) for t in range(T)]
    with torch.inference_mode():
        o, pool_out = kda.fused_recurrent_kda(ins["q"], ins["k"], ins["v"], ins["g"], ins["beta"],
                                              A_log=gpu.get("A_log"), dt_bias=gpu.get("dt_bias"),
                                              initial_state=pool, cu_seqlens=cu, ssm_state_indices=idx_t,
                                              **kw_reads, **kw)
        torch.cuda.synchronize()
    if case.form == "ragged":
        # Unpack to [N, T]; the padding's rows are not compared.
        packed = o[0]
        o = torch.zeros(s["v"], dtype=o.dtype, device=o.device)
        for i, (a, b) in enumerate(keep_tok):
            o[a, b] = packed[i]
    N, H, HV, K, V = case.Nseq, case.H, case.HV, case.K, case.V
    lead = (N,) if T == 1 else (N, T)
    ref_o, ref_pool = oracle.decode_step(
        ref["q"].reshape(lead + (H, K)), ref["k"].reshape(lead + (H, K)), ref["v"].reshape(lead + (HV, V)),
        ref["g"].reshape(lead + (HV, K)), ref["beta"].reshape(lead + (HV,)), state_pool=ref["pool"],
        indices=idx,
        A_log=ref.get("A_log"), dt_bias=ref.get("dt_bias"), scale=kw["scale"], state_layout=case.layout,
        qk_l2norm=kw["use_qk_l2norm_in_kernel"],
        beta_activation="sigmoid" if kw["use_beta_sigmoid_in_kernel"] else "none",
        gate_activation={"none": "none", "kimi_lb": "lower_bound", "lb_no_A_log": "lower_bound",
                         "kimi_softplus": "softplus"}[p],
        lower_bound=kw.get("lower_bound", -5.0), read_indices=oracle_reads)
    problems, metrics = [], []
    bar = BARS[case.dtype]
    check_strategy(problems, metrics, "lanes", case.dtype)
    if pool_out is not pool:
        problems.append("the returned pool is not initial_state (the update must be in place)")
    if tuple(o.shape) != tuple(s["v"]):
        problems.append(f"o: shape {tuple(o.shape)}, expected {tuple(s['v'])}")
        return problems, metrics, bar
    o = o.reshape(lead + (HV, V))
    run = [n for n in range(N) if reads[n] >= 0]
    skipped = [n for n in range(N) if reads[n] < 0]
    named = [idx[n * T + t] for n in run for t in range(T) if idx[n * T + t] >= 0]
    unnamed = [i for i in range(case.P) if i not in named]
    if skipped:
        rows = o[skipped].float()
        if not bool((rows == 0).all()):
            problems.append(f"o: rows of skipped sequences {skipped} are not zero "
                            f"({int((rows != 0).sum())} elements nonzero or NaN)")
    if case.form == "ragged":
        lens = case.lengths()
        pairs = [(n, t) for n in run for t in range(lens[n])]
        got = torch.stack([o[a, b] for a, b in pairs])
        want = np.stack([ref_o[a, b] for a, b in pairs])
        _compare(torch, oracle, "o", got, want, bar, problems, metrics)
    else:
        _compare(torch, oracle, "o", o[run], ref_o[run], bar, problems, metrics)
    _compare(torch, oracle, "pool", pool[named], ref_pool[named], bar, problems, metrics)
    if unnamed:
        a = pool[unnamed].contiguous().view(torch.int32)
        b = pool_before[unnamed].contiguous().view(torch.int32)
        diff = int((a != b).sum())
        if diff:
            problems.append(f"pool: {diff} elements of the {len(unnamed)} slots not named changed "
                            f"(must be bit-exact)")
    # The oracle keeps unnamed slots too (a check of the oracle call itself).
    assert np.array_equal(ref_pool[unnamed], ref["pool"][unnamed])
    return problems, metrics, bar


def run_window_case(case, torch, oracle):
    import kda
    gen = torch.Generator().manual_seed(1000 + case.seed + zlib.crc32(case.name.encode()) % 100000)
    s = case.shapes()
    x = {n: torch.randn(s[n], generator=gen, dtype=torch.float64) for n in ("q", "k", "v")}
    gpu, ref = _to_torch_inputs(torch, x, {n: case.dtype for n in x})
    cu = offsets(case.seqlens) if case.seqlens is not None else None
    cu_t = None if cu is None else torch.tensor(
        cu, dtype=torch.int64 if case.cu_dtype == "i64" else torch.int32).cuda()
    sizes = sizes_t = None
    if case.per_position:
        sizes = torch.randint(1, 2 * case.window + 1, (case.T,), generator=gen)
        sizes_t = sizes.to(torch.int64 if case.per_position == "i64" else torch.int32).cuda()
    with torch.inference_mode():
        if sizes_t is None:
            o = kda.window_attention(gpu["q"], gpu["k"], gpu["v"], case.window, scale=case.scale,
                                     cu_seqlens=cu_t)
        else:
            o = kda.window_attention(gpu["q"], gpu["k"], gpu["v"], scale=case.scale, cu_seqlens=cu_t,
                                     window_sizes=sizes_t)
        torch.cuda.synchronize()
    ref_o = oracle.window_attention(ref["q"], ref["k"], ref["v"],
                                    window=case.window if sizes is None else 0,
                                    window_sizes=None if sizes is None else sizes.tolist(),
                                    cu_seqlens=cu, scale=case.scale)
    problems, metrics = [], []
    bar = BARS[case.dtype]
    # Lanes for 16-bit windows (mma.sync); fp32 keeps the tile lowering for its 1e-4 bar. AMD's
    # lanes (the emulated run, KDA_EXPECT_STATE_INSTRUCTION) take K and V up to 128 (no wgmma).
    amd_wide = bool(os.environ.get("KDA_EXPECT_STATE_INSTRUCTION")) and max(case.K, case.V) > 128
    check_strategy(problems, metrics, "tiles" if case.dtype == "f32" or amd_wide else "lanes",
                   case.dtype)
    if o.dtype != gpu["v"].dtype:
        problems.append(f"o: dtype {o.dtype}, expected v's {gpu['v'].dtype}")
    _compare(torch, oracle, "o", o, ref_o, bar, problems, metrics)
    return problems, metrics, bar


def run_hybrid_case(case, torch, oracle):
    import kda
    import numpy as np
    gen = torch.Generator().manual_seed(2000 + case.seed + zlib.crc32(case.name.encode()) % 100000)
    s = case.shapes()
    x = {n: torch.randn(s[n], generator=gen, dtype=torch.float64) for n in ("q", "k", "v", "g", "beta", "z")}
    dtypes = {n: case.dtype for n in x}
    if case.kimi:
        x["A_log"] = torch.log(1.0 + 15.0 * torch.rand(s["A_log"], generator=gen, dtype=torch.float64))
        x["dt_bias"] = 0.5 * torch.randn(s["dt_bias"], generator=gen, dtype=torch.float64)
        dtypes.update(A_log="f32", dt_bias="f32")
    else:
        # No prologue: unit rows of q and k (without the kernel's l2 norm, rows of norm
        # sqrt(K) make I - beta k k^T expand and the recurrence overflow, in the oracle
        # too), a log-space gate in fp32 (SPEC.md's g <= 0) and beta in (0, 1).
        F = torch.nn.functional
        x["q"], x["k"] = F.normalize(x["q"], dim=-1), F.normalize(x["k"], dim=-1)
        x["g"] = F.logsigmoid(x["g"])
        x["beta"] = torch.sigmoid(x["beta"])
        dtypes["g"] = "f32"
    gpu, ref = _to_torch_inputs(torch, x, dtypes)
    cu = offsets(case.seqlens) if case.seqlens is not None else None
    cu_t = None if cu is None else torch.tensor(cu, dtype=torch.int64).cuda()
    extra = dict(A_log=gpu["A_log"], dt_bias=gpu["dt_bias"]) if case.kimi else {}
    saved = os.environ.get("KDA_HYBRID_SCHEDULE")
    saved_pieces = os.environ.get("KDA_HYBRID_PIECES")
    if case.schedule:
        os.environ["KDA_HYBRID_SCHEDULE"] = case.schedule
    if case.pieces:
        os.environ["KDA_HYBRID_PIECES"] = str(case.pieces)
    try:
        with torch.inference_mode():
            o = kda.hybrid_attention(gpu["q"], gpu["k"], gpu["v"], gpu["g"], gpu["beta"],
                                     gpu["z"] if case.mix == "gated" else None, window=case.window, mix=case.mix,
                                     cu_seqlens=cu_t, **extra, **case.kwargs())
            torch.cuda.synchronize()
    finally:
        if saved is None:
            os.environ.pop("KDA_HYBRID_SCHEDULE", None)
        else:
            os.environ["KDA_HYBRID_SCHEDULE"] = saved
        if saved_pieces is None:
            os.environ.pop("KDA_HYBRID_PIECES", None)
        else:
            os.environ["KDA_HYBRID_PIECES"] = saved_pieces
    lin, _ = oracle.gated_delta(ref["q"], ref["k"], ref["v"], ref["g"], ref["beta"], cu_seqlens=cu,
                                A_log=ref.get("A_log"), dt_bias=ref.get("dt_bias"), qk_l2norm=case.kimi,
                                beta_activation="sigmoid" if case.kimi else "none",
                                gate_activation="lower_bound" if case.kimi else "none", lower_bound=-5.0)
    win = oracle.window_attention(ref["q"], ref["k"], ref["v"], window=case.window, cu_seqlens=cu)
    if case.mix == "sum":
        ref_o = lin + win
    else:
        z = ref["z"] if case.z_form == "channel" else ref["z"][..., None]
        sz = 1.0 / (1.0 + np.exp(-z))
        ref_o = sz * lin + (1.0 - sz) * win
    problems, metrics = [], []
    bar = BARS[case.dtype]
    # The layer's launches: the gated delta's and the window's on lanes; the mix in the window's
    # epilogue (kda-fuse-window-mix), after the state pass (fused) or beside it, waiting for its
    # progress (overlap).
    st = getattr(kops.last_launch, "strategy", {}) or {}
    kinds = [v.get("kind") for n, v in st.items() if v.get("kernel") in ("intra", "state", "window")]
    ran = [v.get("kernel", "?") for v in st.values()]
    metrics.append("launches=" + "+".join(ran))
    want = {"fused": ["intra", "state", "window"], "overlap": ["intra", "state", "window"]}
    if kinds != ["lanes"] * 3 or ran not in want.values() or (case.schedule and ran != want[case.schedule]):
        problems.append(f"the layer ran {st}, expected the gated delta's two lane kernels and the window's, "
                        f"the mix in the window or a kernel")
    # Pipelined pieces (each piece's window over earlier keys after its state pass) where the policy
    # gives them, one piece elsewhere.
    got = getattr(kops.last_launch, "pieces", 1)
    if got != (case.pieces or 1):
        problems.append(f"pieces: {got} ran, {case.pieces or 1} expected")
    if case.pieces:
        metrics.append(f"pieces={got}")
    _compare(torch, oracle, "o", o, ref_o, bar, problems, metrics)
    return problems, metrics, bar


def run_multi_scale_case(case, torch, oracle):
    import kda
    import numpy as np
    gen = torch.Generator().manual_seed(3000 + case.seed + zlib.crc32(case.name.encode()) % 100000)
    s = case.shapes()
    F = torch.nn.functional
    x = {n: torch.randn(s[n], generator=gen, dtype=torch.float64) for n in ("q", "k", "v", "beta", "z")}
    if not case.l2norm:
        # Unit rows without the kernel's l2 norm (rows of norm sqrt(K) make the recurrence
        # expand and overflow, in the oracle too).
        x["q"], x["k"] = F.normalize(x["q"], dim=-1), F.normalize(x["k"], dim=-1)
    ngates = 1 if case.decay_scales is not None else case.M
    for i in range(ngates):
        # Log-space decays (SPEC.md's g <= 0), slower for later gates.
        x[f"g{i}"] = F.logsigmoid(torch.randn(s["g"], generator=gen, dtype=torch.float64) + 2.0 * i)
    dtypes = {n: case.dtype for n in x}
    dtypes.update({f"g{i}": "f32" for i in range(ngates)})
    gpu, ref = _to_torch_inputs(torch, x, dtypes)
    cu = offsets(case.seqlens) if case.seqlens is not None else None
    cu_t = None if cu is None else torch.tensor(cu, dtype=torch.int64).cuda()
    gates = gpu["g0"] if case.decay_scales is not None else [gpu[f"g{i}"] for i in range(ngates)]
    with torch.inference_mode():
        o = kda.multi_scale_attention(gpu["q"], gpu["k"], gpu["v"], gates, gpu["beta"],
                                      gpu["z"] if case.mix == "gated" else None, decay_scales=case.decay_scales,
                                      mix=case.mix, cu_seqlens=cu_t, **case.kwargs())
        torch.cuda.synchronize()
    ref_o = 0.0
    for m in range(case.M):
        g = ref["g0"] * case.decay_scales[m] if case.decay_scales is not None else ref[f"g{m}"]
        o_m, _ = oracle.gated_delta(ref["q"], ref["k"], ref["v"], g, ref["beta"], cu_seqlens=cu,
                                    qk_l2norm=case.l2norm, beta_activation="sigmoid")
        if case.mix == "gated":
            o_m = o_m / (1.0 + np.exp(-ref["z"][..., m:m + 1]))
        ref_o = ref_o + o_m
    problems, metrics = [], []
    bar = BARS[case.dtype]
    # The layer's launches: per scale the gated delta's two lane kernels (the scaled gates' and the
    # mix's elementwise kernels beside them).
    st = getattr(kops.last_launch, "strategy", {}) or {}
    ran = [v.get("kernel", "?") for v in st.values()]
    metrics.append("launches=" + "+".join(ran))
    lanes = [v.get("kind") for v in st.values() if v.get("kernel") in ("intra", "state")]
    if lanes != ["lanes", "lanes"]:
        problems.append(f"the layer ran {st}, expected the gated delta's two lane kernels")
    _compare(torch, oracle, "o", o, ref_o, bar, problems, metrics)
    return problems, metrics, bar


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sanitize", action="store_true",
                    help="a few small cases, for compute-sanitizer memcheck / racecheck")
    ap.add_argument("--print-configs", action="store_true",
                    help="print the kernel configurations of the cases (JSON) and exit")
    ap.add_argument("-k", dest="filter", default="",
                    help="only cases whose name contains this (several joined by '|': any of them)")
    args = ap.parse_args()

    def matches(name):
        return any(f in name for f in args.filter.split("|"))

    cases = sanitize_cases() if args.sanitize else all_cases()
    if args.print_configs:
        cases = [c for c in all_cases() + sanitize_cases() if matches(c.name)]
        print(json.dumps(unique_configs(cases), indent=1, sort_keys=True))
        return 0
    cases = [c for c in cases if matches(c.name)]

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
            problems, metrics, bar = case.run(torch, oracle)
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
