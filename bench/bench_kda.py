#!/usr/bin/env python3
"""kda against flash-linear-attention (FLA), side by side in one process on the GPU.

The cases and the configuration are ../shared/BENCH.md's (H200, bf16, K = V = 128,
forward only): q/k L2 norm, beta sigmoid and the gate activation inside the
kernel, lower-bound gate -5 (safe_gate, A_log fp32 [H], dt_bias fp32 [H * K]),
fp32 initial and final state, V-major state (state_v_first).

  forward  FLA ``chunk_kda`` against ``kda.chunk_kda`` on the same tensors:
           T=8192 with H=32/64/96, T=8192 as 6 sequences (cu_seqlens) with H=64,
           T=32768 with H=32, and 8 x 4096 (batch B=8) with H=32.
  decode   one token per sequence on a state pool of P = 2N slots, N = 64/256/1024
           sequences x 32 heads, distinct random slots (int32 ssm_state_indices),
           pool updated in place: FLA's ``fused_recurrent_kda_fwd(...,
           ssm_state_indices=idx, inplace_final_state=True)`` (the vLLM form; FLA's
           public ``fused_recurrent_kda`` does not pass ssm_state_indices on) against
           ``kda.fused_recurrent_kda(..., initial_state=pool, ssm_state_indices=idx)``.
  decode-seq  the per-sequence form without a pool: both ``fused_recurrent_kda``
           with q [N, 1, H, K], initial_state [N, H, V, K], output_final_state.

Method (BENCH.md, METHOD.md): every case first checks ours against FLA on fresh
random inputs (never zeros), with kda's outputs poisoned with NaN before the
launch; relative RMSE of o and of the final state / updated pool slots is
printed (and untouched pool slots must stay bit-identical). Then each side is
timed with CUDA events around every call after a warm-up, FLA and kda
alternating over ``--passes`` passes (odd passes in reverse order), median over
all calls; inputs rotate over several sets so that one set plus its outputs
never sits in L2. A second number
(``b2b``, in the JSON) is the mean of back-to-back calls between one pair of
events (throughput without per-call event gaps).

Floor (BENCH.md): max(bytes / 4.25 TB/s, flops / 802 TFLOP/s); forward bytes =
q, k, v, g, o in bf16 + beta (1.28 KB per token per head at K = V = 128; the
states are left out, as in BENCH.md), flops = 2 (5 C^2 K + 3 C K V) per chunk
per head with C = 64 (chunks counted per sequence). Decode bytes = the fp32
state read and written once + q, k, v, g, beta, o (as BENCH.md's decode floor).
"floor/x" is floor / time (1.0 = at the floor).

    bench/run.sh BUNDLES_DIR FLA_DIR [args]          # on the GPU machine
    python3 bench/bench_kda.py --print-configs       # kda kernel configurations (JSON; no torch)
    python3 bench/bench_kda.py --list                # case names
Options: --cases SUBSTR[,SUBSTR] (substring filter), --quick, --reps, --warmup,
--passes, --json PATH, --no-fla, --no-kda, --chunk (kda chunk size),
--strict (skip timing a case whose check fails), --kda-variant NAME=DIR (also time kda
with another bundle build, e.g. another compiler's, in the same process and passes; its
rows are "kda@NAME" in the JSON, each checked against FLA as the default is:
"kda@NAME_check", marked (!) in the table on a problem). Each fwd row records ``kda_tile``: the tile kda's bundle
was built with (None: the compiled default; kda.tune.shape_policy_tile or a tuning database
chose otherwise).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import math
import os
import re
import statistics
import sys
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

import kda.ops as kops  # noqa: E402  (needs no torch at import)

HBM_BYTES_PER_S = 4.25e12   # BENCH.md: device-to-device copy, bytes read + written
PEAK_FLOPS = 802e12         # BENCH.md: bf16 8192^3 matmul
FLOOR_CHUNK = 64            # C in BENCH.md's flop count
KV = 128
LOWER_BOUND = -5.0
BF16 = 2
# kda's gradients against FLA's (each ~2e-3..5e-3 off the float64 oracle's, bench/RESULTS.md,
# twenty-second session; FLA's own bar for dg and dbeta)
GRAD_CHECK_BAR = 2e-2
CHECK_BAR = 1e-2            # relative RMSE ours vs FLA (both bf16 outputs; each ~1e-3..5e-3 off exact)
VARLEN6 = [1300, 547, 2048, 963, 271, 3063]
# Issue 22's serving prefill batch: 32 sequences, 31,960 tokens.
VARLEN32 = [256, 1792, 512, 1024, 384, 2048, 768, 640, 1536, 300, 900, 1200, 450, 1900, 700, 1100,
            260, 1650, 820, 980, 1400, 530, 1750, 610, 1300, 350, 2000, 880, 1150, 470, 1580, 720]

# FLA-compatible keyword arguments shared by both libraries (BENCH.md's configuration).
PROLOGUE = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                use_beta_sigmoid_in_kernel=True, lower_bound=LOWER_BOUND, state_v_first=True)


def prologue(case):
    """The FLA-compatible keyword arguments of a prefill case's variant (both libraries get them)."""
    if case.variant == "softplus":
        kw = dict(PROLOGUE, safe_gate=False)
        del kw["lower_bound"]
        return kw
    if case.variant == "logspace":
        return dict(use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                    use_beta_sigmoid_in_kernel=False, state_v_first=True)
    return dict(PROLOGUE, safe_gate=True)


# The multi-scale cases' decays: scale m decays with MULTISCALE_DECAYS[m] * g.
MULTISCALE_DECAYS = (1.0, 0.25)
MULTISCALE_M = len(MULTISCALE_DECAYS)
MULTISCALE_PROLOGUE = dict(use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True)


def hybrid_prologue():
    """kda.hybrid_attention's keyword arguments for BENCH.md's prologue (no states: no layout)."""
    return {k: v for k, v in PROLOGUE.items() if k != "state_v_first"}


def input_dtype(case):
    return {"fp16": "f16", "fp32": "f32"}.get(case.variant, "bf16")


class Case:
    """kind: "fwd" (prefill), "decode" (one token per sequence on a state pool),
    "decode-mtp" (T tokens per sequence on a pool, the state after every token
    kept in its own slot: speculative decoding / MTP) or "decode-seq" (per
    sequence states). boundary: prefill also returns FLA's intermediate states
    h (return_intermediate_states: every 64 tokens, bf16), as a serving
    engine's prefix cache asks. variant (prefill): "lb" (BENCH.md's configuration),
    "softplus" (Kimi-Linear's in-kernel gate without lower_bound), "logspace"
    (FLA's default call: g = logsigmoid(x) in fp32, q and k normalised and beta
    after its sigmoid beforehand, no in-kernel prologue), "fp16" (BENCH.md's
    configuration in fp16), "fp32" (in fp32: 3xTF32 products, SPEC's 1e-4 bar), "chunk64" (kda asked for chunk_size=64, FLA's own) or "chunk32";
    decode-seq: "inplace" (kda's final state written over its initial state). "fwdbwd":
    training, forward plus backward (issue 24): q, k, v, the raw gate, beta, A_log and dt_bias
    require grad, no initial or final state; one call is chunk_kda, then torch.autograd.grad of
    the output against the same random d_o (FLA's call and kda's alike). "window":
    sliding-window softmax attention over `window` positions, ``kda.window_attention``
    against FLA's ``parallel_attn(..., window_size=W)``, bf16 (variant "fp16": fp16), k and v
    with HK heads (GQA where HK < H)."""

    def __init__(self, name, kind, H, B=1, T=None, seqlens=None, N=None, boundary=False, tokens=1,
                 variant="lb", window=None, HK=None, dim=None):
        self.name, self.kind, self.H = name, kind, H
        # Head dimension K = V: BENCH.md's 128 unless a window case names another.
        self.dim = dim or KV
        self.variant = variant
        self.window, self.HK = window, HK or H
        self.B, self.T, self.seqlens, self.N = B, T, seqlens, N
        self.boundary = boundary
        if seqlens is not None:
            self.B, self.T = 1, sum(seqlens)
        if kind not in ("fwd", "window", "fwdbwd", "hybrid", "multiscale"):
            self.B, self.T = N, tokens

    @property
    def pool_slots(self):
        """Pool size of the decode cases: twice the slots they write."""
        return 2 * self.N * (self.T if self.kind == "decode-mtp" else 1)

    @property
    def nseq(self):
        return len(self.seqlens) if self.seqlens is not None else self.B

    def lengths(self):
        return list(self.seqlens) if self.seqlens is not None else [self.T] * self.B

    def floor(self):
        """(floor ms, bytes, flops) by BENCH.md's formula."""
        H, K, V = self.H, self.dim, self.dim
        if self.kind == "window":
            # q, k, v, o once; 2 (K + V) flops per (query, key) pair the window holds
            tokens = sum(self.lengths())
            nbytes = tokens * (H * (K + V) + self.HK * (K + V)) * BF16
            W = self.window
            pairs = sum(min(L, W) * (min(L, W) + 1) // 2 + max(L - W, 0) * W for L in self.lengths())
            flops = 2 * pairs * (K + V) * H
            return max(nbytes / HBM_BYTES_PER_S, flops / PEAK_FLOPS) * 1e3, nbytes, flops
        if self.kind == "hybrid":
            # The prefill's bytes (and z) and products, plus the window's products.
            tokens = sum(self.lengths())
            nbytes = tokens * H * ((3 * K + 2 * V) * BF16 + 2 * BF16)
            chunks = sum(-(-L // FLOOR_CHUNK) for L in self.lengths())
            C, W = FLOOR_CHUNK, self.window
            pairs = sum(min(L, W) * (min(L, W) + 1) // 2 + max(L - W, 0) * W for L in self.lengths())
            flops = 2 * (5 * C * C * K + 3 * C * K * V) * chunks * H + 2 * pairs * (K + V) * H
            return max(nbytes / HBM_BYTES_PER_S, flops / PEAK_FLOPS) * 1e3, nbytes, flops
        if self.kind == "multiscale":
            # Each scale's prefill (its own fp32 log-space gate read; q, k, v and beta once per
            # scale), z read, o written once.
            tokens = sum(self.lengths())
            nbytes = tokens * H * MULTISCALE_M * ((2 * K + V) * BF16 + K * 4 + BF16 + BF16) \
                + tokens * H * V * BF16
            chunks = sum(-(-L // FLOOR_CHUNK) for L in self.lengths())
            C = FLOOR_CHUNK
            flops = MULTISCALE_M * 2 * (5 * C * C * K + 3 * C * K * V) * chunks * H
            return max(nbytes / HBM_BYTES_PER_S, flops / PEAK_FLOPS) * 1e3, nbytes, flops
        if self.kind == "fwdbwd":
            # forward: q, k, v, gate, beta read, o written; backward: those and d_o read, their
            # gradients written (bf16); products: the forward's and twice them.
            tokens = sum(self.lengths())
            row = (3 * K + 2 * V) * BF16 + BF16
            nbytes = tokens * H * (row + (row + V * BF16) + row)
            chunks = sum(-(-L // FLOOR_CHUNK) for L in self.lengths())
            C = FLOOR_CHUNK
            flops = 3 * 2 * (5 * C * C * K + 3 * C * K * V) * chunks * H
            return max(nbytes / HBM_BYTES_PER_S, flops / PEAK_FLOPS) * 1e3, nbytes, flops
        if self.kind == "fwd":
            tokens = sum(self.lengths())
            nbytes = tokens * H * ((3 * K + 2 * V) * BF16 + BF16)
            chunks = sum(-(-L // FLOOR_CHUNK) for L in self.lengths())
            C = FLOOR_CHUNK
            flops = 2 * (5 * C * C * K + 3 * C * K * V) * chunks * H
            if self.boundary:  # h: one bf16 state per 64 tokens of each sequence
                nbytes += chunks * H * K * V * BF16
        elif self.kind == "decode-mtp":
            # the state read once and written after every token, T tokens of inputs
            N, T = self.N, self.T
            nbytes = N * H * K * V * 4 * (1 + T) + N * T * H * ((3 * K + 2 * V) * BF16 + BF16)
            flops = N * T * H * 8 * K * V
        else:
            N = self.N
            nbytes = 2 * N * H * K * V * 4 + N * H * ((3 * K + 2 * V) * BF16 + BF16)
            flops = N * H * 8 * K * V  # decay, k^T S, rank-1 update, q^T S: negligible
        t = max(nbytes / HBM_BYTES_PER_S, flops / PEAK_FLOPS) * 1e3
        return t, nbytes, flops


def all_cases():
    cases = [
        Case("fwd T=8192 H=32", "fwd", 32, B=1, T=8192),
        Case("fwd T=8192 H=64", "fwd", 64, B=1, T=8192),
        Case("fwd T=8192 H=96", "fwd", 96, B=1, T=8192),
        Case("fwd varlen6 T=8192 H=64", "fwd", 64, seqlens=VARLEN6),
        Case("fwd T=32768 H=32", "fwd", 32, B=1, T=32768),
        Case("fwd 8x4096 H=32", "fwd", 32, B=8, T=4096),
        # Issue 22's shapes: a short sequence (the host path), a very long one, and a serving prefill
        # batch of 32 sequences.
        Case("fwd T=1024 H=32", "fwd", 32, B=1, T=1024),
        Case("fwd T=131072 H=16", "fwd", 16, B=1, T=131072),
        # Long single sequences around it (sequence-parallel segments: the shape policy's choice by
        # tokens and (sequence, head) units).
        Case("fwd T=65536 H=16", "fwd", 16, B=1, T=65536),
        Case("fwd T=131072 H=32", "fwd", 32, B=1, T=131072),
        Case("fwd T=262144 H=8", "fwd", 8, B=1, T=262144),
        # One dense sequence taking the pipelined pieces (kda.tune.shape_policy_pieces) beside
        # BENCH.md's T=8192 and T=32768: 8 pieces, and a state pass of 32 blocks.
        Case("fwd T=16384 H=32", "fwd", 32, B=1, T=16384),
        Case("fwd T=32768 H=16", "fwd", 16, B=1, T=32768),
        Case("fwd softplus T=131072 H=16", "fwd", 16, B=1, T=131072, variant="softplus"),
        Case("fwd varlen32 H=32", "fwd", 32, seqlens=VARLEN32),
        Case("fwd-h T=8192 H=32", "fwd", 32, B=1, T=8192, boundary=True),
        Case("fwd-h varlen6 T=8192 H=64", "fwd", 64, seqlens=VARLEN6, boundary=True),
        Case("fwd-h 8x4096 H=32", "fwd", 32, B=8, T=4096, boundary=True),
        # Every gate form, dtype and chunk a user calls (issue 21): each against FLA's same call.
        Case("fwd softplus T=8192 H=32", "fwd", 32, B=1, T=8192, variant="softplus"),
        Case("fwd softplus 8x4096 H=32", "fwd", 32, B=8, T=4096, variant="softplus"),
        Case("fwd logspace T=8192 H=32", "fwd", 32, B=1, T=8192, variant="logspace"),
        Case("fwd logspace 8x4096 H=32", "fwd", 32, B=8, T=4096, variant="logspace"),
        Case("fwd fp16 T=8192 H=32", "fwd", 32, B=1, T=8192, variant="fp16"),
        Case("fwd fp32 T=8192 H=32", "fwd", 32, B=1, T=8192, variant="fp32"),
        Case("fwd fp32 8x4096 H=32", "fwd", 32, B=8, T=4096, variant="fp32"),
        Case("fwd fp32 T=8192 H=96", "fwd", 96, B=1, T=8192, variant="fp32"),
        Case("fwd chunk64 T=8192 H=32", "fwd", 32, B=1, T=8192, variant="chunk64"),
        Case("fwd chunk64 8x4096 H=32", "fwd", 32, B=8, T=4096, variant="chunk64"),
        Case("fwd chunk32 T=8192 H=32", "fwd", 32, B=1, T=8192, variant="chunk32"),
    ]
    # Training (issue 24): forward plus backward of the Kimi-prologue call, and its softplus
    # neighbour.
    cases += [
        Case("fwdbwd T=8192 H=32", "fwdbwd", 32, B=1, T=8192),
        Case("fwdbwd 8x4096 H=32", "fwdbwd", 32, B=8, T=4096),
        Case("fwdbwd softplus T=8192 H=32", "fwdbwd", 32, B=1, T=8192, variant="softplus"),
        # Their neighbours: Kimi-Linear's gate over a batch, FLA's default log-space call (no in-kernel
        # prologue: q, k, v, g and beta differentiated).
        Case("fwdbwd softplus 8x4096 H=32", "fwdbwd", 32, B=8, T=4096, variant="softplus"),
        Case("fwdbwd logspace T=8192 H=32", "fwdbwd", 32, B=1, T=8192, variant="logspace"),
    ]
    for N in (64, 256, 1024):
        cases.append(Case(f"decode pool N={N} H=32", "decode", 32, N=N))
    for N in (64, 256):
        cases.append(Case(f"decode-mtp pool N={N} T=4 H=32", "decode-mtp", 32, N=N, tokens=4))
    for N in (64, 256, 1024):
        cases.append(Case(f"decode-seq N={N} H=32", "decode-seq", 32, N=N))
    for N in (256, 1024):
        # kda with inplace_final_state (kda.layers' decode: the cache's state updated, no copy); FLA's
        # public call as its layer makes it (a new final state)
        cases.append(Case(f"decode-seq inplace N={N} H=32", "decode-seq", 32, N=N, variant="inplace"))
    # Sliding-window attention (issue 23) against FLA's parallel_attn, and its neighbours.
    for W in (512, 4096):
        cases.append(Case(f"window T=8192 H=32 W={W}", "window", 32, B=1, T=8192, window=W))
    cases += [
        Case("window fp16 T=8192 H=32 W=512", "window", 32, B=1, T=8192, window=512, variant="fp16"),
        Case("window gqa T=8192 H=32 HK=8 W=512", "window", 32, B=1, T=8192, window=512, HK=8),
        Case("window varlen6 H=32 W=1024", "window", 32, seqlens=VARLEN6, window=1024),
        Case("window 8x4096 H=32 W=4096", "window", 32, B=8, T=4096, window=4096),
        # Heads of 256 (Gemma's local attention layers): wgmma with Q in shared memory too.
        Case("window d256 T=8192 H=16 W=512", "window", 16, B=1, T=8192, window=512, dim=256),
        # The hybrid layer (issue 23): kda.hybrid_attention (one call: the layer entry) against FLA's
        # chunk_kda + parallel_attn + the mix, and against the separate parts, each the faster of
        # kda's and FLA's (ratio_fused_over_separate).
        Case("hybrid gated T=8192 H=32 W=512", "hybrid", 32, B=1, T=8192, window=512),
        Case("hybrid sum T=8192 H=32 W=512", "hybrid", 32, B=1, T=8192, window=512, variant="sum"),
        # Its neighbours (the layer in pipelined pieces, kda.tune.hybrid_pieces): a longer sequence,
        # a wider window, fewer heads (a state pass of a quarter of the chip).
        Case("hybrid gated T=32768 H=32 W=512", "hybrid", 32, B=1, T=32768, window=512),
        Case("hybrid gated T=8192 H=32 W=4096", "hybrid", 32, B=1, T=8192, window=4096),
        Case("hybrid gated T=16384 H=16 W=512", "hybrid", 16, B=1, T=16384, window=512),
        # The multi-scale layer (issue 23): kda.multi_scale_attention (one call: the layer entry, two
        # scales of one log-space gate, MULTISCALE_DECAYS, mixed by z) against FLA's chunk_kda per
        # scale + the mix in torch, and against kda's own separate calls.
        Case("multiscale gated T=8192 H=32 M=2", "multiscale", 32, B=1, T=8192),
        Case("multiscale gated 8x4096 H=32 M=2", "multiscale", 32, B=8, T=4096),
    ]
    return cases


def select(cases, spec):
    if not spec:
        return cases
    subs = [s.strip() for s in spec.split(",") if s.strip()]
    return [c for c in cases if any(s in c.name for s in subs)]


# ---------------------------------------------------------------------------
# kda configurations (derived by kda.ops itself, without torch)
# ---------------------------------------------------------------------------

class Meta:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


def kda_config(case, chunk=None):
    """The case's kernel configuration, or a list of them (fwdbwd: the forward keeping its states,
    and the gradient)."""
    H, K, V, B, T = case.H, case.dim, case.dim, case.B, case.T
    dt = input_dtype(case)
    q = Meta((B, T, H, K), dt)
    v = Meta((B, T, H, V), dt)
    g = Meta((B, T, H, K), "f32" if case.variant == "logspace" else dt)
    beta = Meta((B, T, H), dt)
    A_log, dt_bias = Meta((H,), "f32"), Meta((H * K,), "f32")
    if case.kind == "window":
        kv = Meta((B, T, case.HK, K), dt)
        cu = Meta((case.nseq + 1,), "i64") if case.seqlens is not None else None
        return kops.window_attention_config(q, kv, kv, case.window, cu_seqlens=cu)
    if case.kind == "hybrid":
        # The layer, and its parts as the separate calls run them.
        z = Meta((B, T, H), dt) if case.variant != "sum" else None
        layer = kops.hybrid_attention_config(q, q, v, g, beta, z, window=case.window, A_log=A_log,
                                             dt_bias=dt_bias, **hybrid_prologue())
        part = kops.chunk_kda_config(q, q, v, g, beta, A_log=A_log, dt_bias=dt_bias, **PROLOGUE)
        # Both schedules (kda.tune.hybrid_schedule picks one per shape; KDA_HYBRID_SCHEDULE forces it).
        return [layer, dict(layer, schedule="overlap"), part, kops.window_attention_config(q, q, v, case.window)]
    if case.kind == "multiscale":
        gl = Meta((B, T, H, K), "f32")
        layer = kops.multi_scale_attention_config(q, q, v, gl, beta, Meta((B, T, H, MULTISCALE_M), dt),
                                                  decay_scales=list(MULTISCALE_DECAYS), **MULTISCALE_PROLOGUE)
        part = kops.chunk_kda_config(q, q, v, gl, beta, **MULTISCALE_PROLOGUE)
        return [layer, part]
    if case.kind == "fwdbwd":
        kw = prologue(case)
        opts = dict(scale=None, output_final_state=False, allow_neg_eigval=False,
                    safe_gate=kw.pop("safe_gate", False), lower_bound=kw.pop("lower_bound", None),
                    cu_seqlens_cpu=None, **kw)
        if case.variant == "logspace":
            A_log = dt_bias = None
        gp = {} if A_log is None else dict(A_log=A_log, dt_bias=dt_bias)
        fwd = kops.chunk_kda_config(q, q, v, g, beta, boundary_interval=kops.GRAD_CHUNK,
                                    boundary_dtype=kops.grad_states_dtype(), **gp, **prologue(case))
        grad = kops.chunk_kda_grad_config(q, q, v, g, beta, None, A_log, dt_bias, None, opts)
        return [fwd, grad]
    if case.kind == "fwd":
        cu = Meta((case.nseq + 1,), "i64") if case.seqlens is not None else None
        h0 = Meta((case.nseq, H, V, K), "f32")
        extra = dict(return_intermediate_states=True) if case.boundary else {}
        if case.variant != "logspace":
            extra.update(A_log=A_log, dt_bias=dt_bias)
        if case.variant in ("chunk32", "chunk64"):
            chunk = int(case.variant[5:])
        return kops.chunk_kda_config(q, q, v, g, beta, initial_state=h0, output_final_state=True,
                                     cu_seqlens=cu, chunk_size=chunk, **prologue(case), **extra)
    if case.kind in ("decode", "decode-mtp"):
        pool = Meta((case.pool_slots, H, V, K), "f32")
        idx = Meta((case.N, case.T) if case.kind == "decode-mtp" else (case.N,), "i32")
        return kops.fused_recurrent_kda_config(q, q, v, g, beta, A_log=A_log, dt_bias=dt_bias,
                                               initial_state=pool, ssm_state_indices=idx, **PROLOGUE)
    h0 = Meta((case.N, H, V, K), "f32")
    if case.variant == "inplace":
        # inplace_final_state: the decode step on the caller's states as a
        # pool of N slots, updated in place.
        return kops.fused_recurrent_kda_config(q, q, v, g, beta, A_log=A_log, dt_bias=dt_bias,
                                               initial_state=h0, ssm_state_indices=Meta((case.N,), "i32"),
                                               **PROLOGUE)
    return kops.fused_recurrent_kda_config(q, q, v, g, beta, A_log=A_log, dt_bias=dt_bias,
                                           initial_state=h0, output_final_state=True, **PROLOGUE)


def unique_configs(cases, chunk=None):
    seen, out = set(), []
    for c in cases:
        cfgs = kda_config(c, chunk)
        for cfg in (cfgs if isinstance(cfgs, list) else [cfgs]):
            key = json.dumps(cfg, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append(cfg)
    return out


# ---------------------------------------------------------------------------
# FLA import
# ---------------------------------------------------------------------------

def import_fla(mode):
    """Returns (chunk_kda, fused_recurrent_kda, fused_recurrent_kda_fwd or None, info).

    mode "light" (default) registers the packages ``fla`` and ``fla.ops`` as bare
    packages (their ``__init__`` not run) and imports ``fla.ops.kda`` only: FLA's
    top-level ``__init__`` imports fla.layers / fla.models (transformers) and
    ``fla.ops.__init__`` every op family, none of which KDA needs. "full" is the
    plain ``from fla.ops.kda import ...``. "auto" tries light, then full.
    """
    info = {"mode": mode}
    if mode in ("light", "auto"):
        try:
            spec = importlib.util.find_spec("fla")
            if spec is None or not spec.submodule_search_locations:
                raise ImportError("package fla not found on sys.path (PYTHONPATH must hold FLA_DIR)")
            pkg_dir = list(spec.submodule_search_locations)[0]
            if "fla" not in sys.modules:
                m = types.ModuleType("fla")
                m.__path__ = [pkg_dir]
                m.__file__ = os.path.join(pkg_dir, "__init__.py")
                m.__version__ = _fla_version(pkg_dir)
                m.__package__ = "fla"
                sys.modules["fla"] = m
                ops = types.ModuleType("fla.ops")
                ops.__path__ = [os.path.join(pkg_dir, "ops")]
                ops.__file__ = os.path.join(pkg_dir, "ops", "__init__.py")
                ops.__package__ = "fla.ops"
                sys.modules["fla.ops"] = ops
                m.ops = ops
            info["mode"] = "light"
            return _import_fla_kda(info)
        except Exception as e:  # noqa: BLE001
            if mode == "light":
                raise
            info["light_error"] = f"{type(e).__name__}: {e}"
            for name in [n for n in sys.modules if n == "fla" or n.startswith("fla.")]:
                del sys.modules[name]
    info["mode"] = "full"
    return _import_fla_kda(info)


def _fla_version(pkg_dir):
    try:
        with open(os.path.join(pkg_dir, "__init__.py")) as f:
            m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", f.read())
        return m.group(1) if m else "0"
    except OSError:
        return "0"


def _import_fla_kda(info):
    from fla.ops.kda import chunk_kda, fused_recurrent_kda
    fwd = None
    try:
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd as fwd
        try:
            params = inspect.signature(fwd).parameters
        except (TypeError, ValueError):
            params = None  # cannot tell: try it
        if params is not None and "ssm_state_indices" not in params:
            info["pool"] = "fused_recurrent_kda_fwd has no ssm_state_indices"
            fwd = None
    except ImportError as e:
        info["pool"] = f"no fused_recurrent_kda_fwd: {e}"
    import fla
    pkg_dir = os.path.dirname(os.path.abspath(fla.__path__[0]))
    info["path"] = fla.__path__[0]
    info["version"] = getattr(fla, "__version__", "?")
    for cand in (os.path.join(pkg_dir, "FLA_COMMIT"), os.path.join(fla.__path__[0], "FLA_COMMIT")):
        if os.path.isfile(cand):
            with open(cand) as f:
                info["commit"] = f.read().strip()
            break
    return chunk_kda, fused_recurrent_kda, fwd, info


# ---------------------------------------------------------------------------
# Inputs, checks, timing (torch from here on)
# ---------------------------------------------------------------------------

def make_set(case, torch, seed):
    """One input set on the GPU: raw gate and beta logits (the kernels apply the prologue)."""
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(seed)
    H, K, V, B, T = case.H, case.dim, case.dim, case.B, case.T
    # The inputs' type (the variant's), before randn binds it as its default: bound after, the
    # fp16 cases ran on bf16 tensors until the fifteenth session.
    bf = {"fp16": torch.float16, "fp32": torch.float32}.get(case.variant, torch.bfloat16)

    def randn(shape, scale=1.0, dtype=bf):
        return (torch.randn(shape, generator=gen, device=dev, dtype=torch.float32) * scale).to(dtype)

    if case.kind == "window":
        x = dict(q=randn((B, T, H, K)), k=randn((B, T, case.HK, K)), v=randn((B, T, case.HK, V)))
        if case.seqlens is not None:
            cu = [0]
            for L in case.seqlens:
                cu.append(cu[-1] + L)
            x["cu"] = torch.tensor(cu, dtype=torch.int64, device=dev)
        return x
    x = dict(q=randn((B, T, H, K)), k=randn((B, T, H, K)), v=randn((B, T, H, V)),
             g=randn((B, T, H, K)), beta=randn((B, T, H)))
    if case.variant == "logspace":
        # FLA's default call: the prologue done beforehand (its layer's own steps).
        F = torch.nn.functional
        for n in ("q", "k"):
            x[n] = F.normalize(x[n].float(), dim=-1).to(bf)
        x["g"] = F.logsigmoid(randn((B, T, H, K), 1.0, torch.float32))
        x["beta"] = torch.sigmoid(x["beta"].float()).to(bf)
    x["A_log"] = torch.log(1.0 + 15.0 * torch.rand((H,), generator=gen, device=dev))
    x["dt_bias"] = randn((H * K,), 0.5, torch.float32)
    if case.kind == "hybrid":
        x["z"] = randn((B, T, H))
    if case.kind == "multiscale":
        x["g"] = torch.nn.functional.logsigmoid(randn((B, T, H, K), 1.0, torch.float32))
        x["z"] = randn((B, T, H, MULTISCALE_M))
    if case.kind == "fwdbwd":
        x["do"] = randn((B, T, H, V))
        for n in grad_leaves(case):
            x[n].requires_grad_(True)
    if case.kind == "fwd":
        x["h0"] = randn((case.nseq, H, V, K), 0.5, torch.float32)
        if case.seqlens is not None:
            cu = [0]
            for L in case.seqlens:
                cu.append(cu[-1] + L)
            x["cu_cpu"] = torch.tensor(cu, dtype=torch.int64)
            x["cu"] = x["cu_cpu"].to(dev)
    elif case.kind == "decode":
        P = case.pool_slots
        x["idx"] = torch.randperm(P, generator=gen, device=dev)[:case.N].to(torch.int32)
    elif case.kind == "decode-mtp":
        # distinct slots for every (sequence, token); each sequence starts from its token-0 slot
        P = case.pool_slots
        x["idx"] = torch.randperm(P, generator=gen, device=dev)[:case.N * T].to(torch.int32).view(case.N, T)
    elif case.kind not in ("fwdbwd", "hybrid", "multiscale"):  # (training calls and layers: no state)
        x["h0"] = randn((case.N, H, V, K), 0.5, torch.float32)
    return x


# The inputs a training call differentiates (fwdbwd), in the order both libraries' grads come.
GRAD_LEAVES = ("q", "k", "v", "g", "beta", "A_log", "dt_bias")


def grad_leaves(case):
    """GRAD_LEAVES but A_log and dt_bias where the case's call takes no in-kernel gate."""
    return GRAD_LEAVES[:5] if case.variant == "logspace" else GRAD_LEAVES


def gate_params(case, x):
    """A_log and dt_bias as the case's call takes them (none for the log-space call)."""
    return {} if case.variant == "logspace" else dict(A_log=x["A_log"], dt_bias=x["dt_bias"])


def set_bytes(x):
    return sum(t.numel() * t.element_size() for n, t in x.items() if n != "cu_cpu")


def rel_rmse(torch, out, ref):
    a, b = out.double(), ref.double()
    den = torch.sqrt(torch.mean(b * b)).item()
    num = torch.sqrt(torch.mean((a - b) ** 2)).item()
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


class Runner:
    """Callables for one case: fla(i) / ours(i) run input set i."""

    def __init__(self, case, torch, fla, kda_mod, sets, chunk):
        self.case, self.torch, self.fla, self.kda, self.sets = case, torch, fla, kda_mod, sets
        self.chunk = chunk
        self.flashkda = None
        self.pool_fla = self.pool_kda = None
        if case.kind in ("decode", "decode-mtp"):
            gen = torch.Generator(device="cuda").manual_seed(7)
            P, H = case.pool_slots, case.H
            pool = (torch.randn((P, H, KV, KV), generator=gen, device="cuda") * 0.5)
            self.pool0 = pool
            self.pool_fla = pool.clone()
            self.pool_kda = pool.clone()

    def fla_call(self, i, pool=None):
        x, c = self.sets[i], self.case
        chunk_kda, frk, frk_fwd = self.fla
        if c.kind == "window":
            from fla.ops.attn.parallel import parallel_attn
            return parallel_attn(x["q"], x["k"], x["v"], scale=c.dim ** -0.5, window_size=c.window,
                                 cu_seqlens=x.get("cu"))
        if c.kind == "fwdbwd":
            o, _ = chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], **gate_params(c, x), **prologue(c))
            return self._grads(o, x)
        if c.kind == "hybrid":
            return self.mix(self.part_fla_kda(i), self.part_fla_window(i), i)
        if c.kind == "multiscale":
            return self.multi_mix([chunk_kda(x["q"], x["k"], x["v"], x["g"] * m if m != 1.0 else x["g"], x["beta"],
                                             **MULTISCALE_PROLOGUE)[0] for m in MULTISCALE_DECAYS], i)
        if c.kind == "fwd":
            extra = {"return_intermediate_states": True} if c.boundary else {}
            if c.variant != "logspace":
                extra.update(A_log=x["A_log"], dt_bias=x["dt_bias"])
            return chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"],
                             output_final_state=True, cu_seqlens=x.get("cu"),
                             cu_seqlens_cpu=x.get("cu_cpu"), **prologue(c), **extra)
        if c.kind in ("decode", "decode-mtp"):
            pool = self.pool_fla if pool is None else pool
            return frk_fwd(q=x["q"], k=x["k"], v=x["v"], g=x["g"], beta=x["beta"], A_log=x["A_log"],
                           dt_bias=x["dt_bias"], scale=KV ** -0.5, initial_state=pool,
                           inplace_final_state=True, ssm_state_indices=x["idx"], **PROLOGUE)
        return frk(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
                   initial_state=x["h0"], output_final_state=True, **PROLOGUE)

    # The hybrid's parts, each as its library runs it alone (no states).
    def part_fla_kda(self, i):
        x = self.sets[i]
        return self.fla[0](x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
                           **PROLOGUE, safe_gate=True)[0]

    def part_kda_kda(self, i):
        x = self.sets[i]
        return self.kda.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"],
                                  dt_bias=x["dt_bias"], **PROLOGUE, safe_gate=True)[0]

    def part_fla_window(self, i):
        from fla.ops.attn.parallel import parallel_attn
        x, c = self.sets[i], self.case
        return parallel_attn(x["q"], x["k"], x["v"], scale=c.dim ** -0.5, window_size=c.window)

    def part_kda_window(self, i):
        x, c = self.sets[i], self.case
        return self.kda.window_attention(x["q"], x["k"], x["v"], c.window)

    def mix(self, lin, win, i):
        """The hybrid's mix in torch, as few kernels as torch takes: sigmoid(z) lin + (1 - sigmoid(z))
        win as one lerp after the sigmoid of the [B, T, H] gate, or the sum."""
        if self.case.variant == "sum":
            return lin + win
        return self.torch.lerp(win, lin, self.torch.sigmoid(self.sets[i]["z"])[..., None])

    def part_mix(self, i):
        """The mix alone, on outputs computed once per set (kept by the runner)."""
        outs = self.__dict__.setdefault("_mix_inputs", {})
        if i not in outs:
            outs[i] = (self.part_kda_kda(i), self.part_kda_window(i))
        return self.mix(*outs[i], i)

    def multi_mix(self, outs, i):
        """The multi-scale mix in torch: sum_m sigmoid(z[..., m]) o_m."""
        s = self.torch.sigmoid(self.sets[i]["z"].float())
        o = outs[0].float() * s[..., 0:1]
        for m in range(1, len(outs)):
            o = o + outs[m].float() * s[..., m:m + 1]
        return o.to(outs[0].dtype)

    def kda_separate(self, i):
        if self.case.kind == "multiscale":
            # kda's own calls, one a scale (the scaled gate in torch), then the torch mix.
            x = self.sets[i]
            return self.multi_mix([self.kda.chunk_kda(x["q"], x["k"], x["v"], x["g"] * m if m != 1.0 else x["g"],
                                                      x["beta"], **MULTISCALE_PROLOGUE)[0]
                                   for m in MULTISCALE_DECAYS], i)
        return self._kda_separate_hybrid(i)

    def _kda_separate_hybrid(self, i):
        """kda's own parts, one after another: chunk_kda, window_attention, the torch mix."""
        return self.mix(self.part_kda_kda(i), self.part_kda_window(i), i)

    def flashkda_call(self, i):
        """FlashKDA's fwd on the same inputs (lower-bound gate, bf16, K = V = 128): outputs
        allocated per call, as FLA's and kda's are."""
        x, c = self.sets[i], self.case
        torch = self.torch
        o = torch.empty_like(x["v"])
        ht = torch.empty_like(x["h0"])
        self.flashkda.fwd(x["q"], x["k"], x["v"], x["g"], x["beta"], c.dim ** -0.5, o, x["A_log"],
                          x["dt_bias"].view(c.H, c.dim), LOWER_BOUND, initial_state=x["h0"],
                          final_state=ht, cu_seqlens=x.get("cu"))
        return o, ht

    def _grads(self, o, x):
        """(o, the leaves' gradients) of one training call: d_o is the set's."""
        leaves = [x[n] for n in grad_leaves(self.case)]
        return (o.detach(),) + tuple(self.torch.autograd.grad(o, leaves, x["do"]))

    def kda_call(self, i, pool=None):
        x, c = self.sets[i], self.case
        if c.kind == "fwdbwd":
            o, _ = self.kda.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], **gate_params(c, x),
                                      **prologue(c))
            return self._grads(o, x)
        if c.kind == "window":
            return self.kda.window_attention(x["q"], x["k"], x["v"], c.window, cu_seqlens=x.get("cu"))
        if c.kind == "multiscale":
            return self.kda.multi_scale_attention(x["q"], x["k"], x["v"], x["g"], x["beta"], x["z"],
                                                  decay_scales=list(MULTISCALE_DECAYS), **MULTISCALE_PROLOGUE)
        if c.kind == "hybrid":
            return self.kda.hybrid_attention(x["q"], x["k"], x["v"], x["g"], x["beta"],
                                             None if c.variant == "sum" else x["z"], window=c.window,
                                             A_log=x["A_log"], dt_bias=x["dt_bias"], **hybrid_prologue())
        if c.kind == "fwd":
            extra = {"chunk_size": self.chunk} if self.chunk else {}
            if c.variant in ("chunk32", "chunk64"):
                extra["chunk_size"] = int(c.variant[5:])
            if c.boundary:
                extra["return_intermediate_states"] = True
            if c.variant != "logspace":
                extra.update(A_log=x["A_log"], dt_bias=x["dt_bias"])
            return self.kda.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"],
                                      output_final_state=True, cu_seqlens=x.get("cu"),
                                      cu_seqlens_cpu=x.get("cu_cpu"), **prologue(c), **extra)
        if c.kind in ("decode", "decode-mtp"):
            pool = self.pool_kda if pool is None else pool
            return self.kda.fused_recurrent_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], x["A_log"],
                                                x["dt_bias"], initial_state=pool,
                                                ssm_state_indices=x["idx"], **PROLOGUE)
        if c.variant == "inplace":
            # the state this runner owns for set i, updated in place call after call
            owned = self.__dict__.setdefault("_inplace_h", {})
            if i not in owned:  # (not setdefault: its default would be cloned at every call)
                owned[i] = x["h0"].clone()
            h = owned[i]
            return self.kda.fused_recurrent_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], x["A_log"],
                                                x["dt_bias"], initial_state=h, output_final_state=True,
                                                inplace_final_state=True, **PROLOGUE)
        return self.kda.fused_recurrent_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], x["A_log"],
                                            x["dt_bias"], initial_state=x["h0"], output_final_state=True,
                                            **PROLOGUE)

    def check(self):
        """Ours against FLA on set 0 (fresh pools for decode); kda outputs poisoned with NaN."""
        torch, c = self.torch, self.case
        kops_mod = sys.modules["kda.ops"]
        orig = kops_mod._alloc
        kops_mod._alloc = lambda shape, dtype, device: torch.full(shape, float("nan"), dtype=dtype,
                                                                   device=device)
        try:
            h_f = h_k = None
            s_f = s_k = None
            if c.kind in ("window", "hybrid", "multiscale"):
                o_f, o_k = self.fla_call(0), self.kda_call(0)
            elif c.kind == "fwdbwd":
                r_f, r_k = self.fla_call(0), self.kda_call(0)
                o_f, o_k = r_f[0], r_k[0]
            elif c.kind in ("decode", "decode-mtp"):
                pf, pk = self.pool0.clone(), self.pool0.clone()
                o_f, _ = self.fla_call(0, pool=pf)
                o_k, _ = self.kda_call(0, pool=pk)
            elif c.boundary:
                o_f, s_f, h_f = self.fla_call(0)
                o_k, s_k, h_k = self.kda_call(0)
            else:
                o_f, s_f = self.fla_call(0)
                self.__dict__.get("_inplace_h", {}).pop(0, None)  # inplace: from set 0's own h0
                o_k, s_k = self.kda_call(0)
                if c.variant == "inplace":
                    s_k = s_k.clone()
                    self.__dict__["_inplace_h"].pop(0, None)
            torch.cuda.synchronize()
        finally:
            kops_mod._alloc = orig
        res = {"o_shape_ok": tuple(o_k.shape) == tuple(o_f.shape)}
        if not res["o_shape_ok"]:
            res["problem"] = f"o shape {tuple(o_k.shape)} vs FLA {tuple(o_f.shape)}"
            return res
        res["o_nonfinite"] = int((~torch.isfinite(o_k.float())).sum())
        res["o_rel_rmse"] = rel_rmse(torch, o_k, o_f)
        if self.flashkda is not None:
            o_x, s_x = self.flashkda_call(0)
            torch.cuda.synchronize()
            res["flashkda_o_rel_rmse"] = rel_rmse(torch, o_x, o_f)
            res["flashkda_state_rel_rmse"] = rel_rmse(torch, s_x, s_f)
        if c.kind in ("decode", "decode-mtp"):
            idx = self.sets[0]["idx"].long().flatten()
            res["state_rel_rmse"] = rel_rmse(torch, pk[idx], pf[idx])
            res["state_nonfinite"] = int((~torch.isfinite(pk[idx])).sum())
            mask = torch.ones(pk.shape[0], dtype=torch.bool, device=pk.device)
            mask[idx] = False
            res["untouched_slots_equal"] = bool(torch.equal(pk[mask], self.pool0[mask]))
            res["fla_untouched_slots_equal"] = bool(torch.equal(pf[mask], self.pool0[mask]))
            del pf, pk
        elif c.kind == "window":
            res["state_nonfinite"] = 0
        elif c.kind in ("hybrid", "multiscale"):
            res["state_nonfinite"] = 0
            # kda's separate parts too: the fused layer and they compute the same.
            res["kda_separate_o_rel_rmse"] = rel_rmse(torch, self.kda_separate(0), o_f)
        elif c.kind == "fwdbwd":
            res["state_nonfinite"] = 0
            for n, a, b in zip(grad_leaves(c), r_k[1:], r_f[1:]):
                if a is None or tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
                    res["problem"] = (f"d{n}: {None if a is None else (tuple(a.shape), a.dtype)} vs FLA "
                                      f"{(tuple(b.shape), b.dtype)}")
                    return res
                res[f"d{n}_rel_rmse"] = rel_rmse(torch, a, b)
                res["state_nonfinite"] += int((~torch.isfinite(a.float())).sum())
        else:
            if s_k is None or tuple(s_k.shape) != tuple(s_f.shape):
                res["problem"] = f"final state {None if s_k is None else tuple(s_k.shape)} vs FLA {tuple(s_f.shape)}"
                return res
            res["state_rel_rmse"] = rel_rmse(torch, s_k, s_f)
            res["state_nonfinite"] = int((~torch.isfinite(s_k)).sum())
            if c.boundary:
                if h_k is None or tuple(h_k.shape) != tuple(h_f.shape) or h_k.dtype != h_f.dtype:
                    res["problem"] = (f"h {None if h_k is None else (tuple(h_k.shape), h_k.dtype)} vs FLA "
                                      f"{(tuple(h_f.shape), h_f.dtype)}")
                    return res
                res["h_rel_rmse"] = rel_rmse(torch, h_k, h_f)
                res["state_nonfinite"] += int((~torch.isfinite(h_k.float())).sum())
        problems = []
        if res["o_nonfinite"] or res["state_nonfinite"]:
            problems.append(f"{res['o_nonfinite']} o / {res['state_nonfinite']} state elements not "
                            f"written or not finite")
        for key in ("o_rel_rmse", "state_rel_rmse", "h_rel_rmse", "flashkda_o_rel_rmse",
                    "flashkda_state_rel_rmse", "kda_separate_o_rel_rmse"):
            if key in res and not res[key] <= CHECK_BAR:
                problems.append(f"{key} {res[key]:.3e} > {CHECK_BAR:g}")
        for n in GRAD_LEAVES:
            key = f"d{n}_rel_rmse"
            if key in res and not res[key] <= GRAD_CHECK_BAR:
                problems.append(f"{key} {res[key]:.3e} > {GRAD_CHECK_BAR:g}")
        if c.kind in ("decode", "decode-mtp") and not res["untouched_slots_equal"]:
            problems.append("kda changed pool slots that no sequence names")
        if problems:
            res["problem"] = "; ".join(problems)
        return res


def time_calls(torch, fn, nsets, warmup, reps):
    for i in range(warmup):
        fn(i % nsets)
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for i, (s, e) in enumerate(ev):
        s.record()
        fn(i % nsets)
        e.record()
    torch.cuda.synchronize()
    per_call = [s.elapsed_time(e) for s, e in ev]
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for i in range(reps):
        fn(i % nsets)
    e.record()
    torch.cuda.synchronize()
    return per_call, s.elapsed_time(e) / reps


def host_time(torch, fn, nsets, calls=20):
    """Host time per call: the wall time of issuing `calls` calls after a
    synchronization, divided by `calls` (few enough that the launch queue never
    fills, so no call waits for the GPU), the median of 3 such runs."""
    runs = []
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(calls):
            fn(i % nsets)
        runs.append((time.perf_counter() - t0) * 1e3 / calls)
    torch.cuda.synchronize()
    return statistics.median(runs)


def flashkda_takes(case, args):
    """FlashKDA's fwd computes BENCH.md's configuration only: bf16, K = V = 128, the lower-bound
    gate with l2 norm and beta sigmoid in the kernel, chunk 16, no boundary states."""
    return (case.kind == "fwd" and case.variant == "lb" and not case.boundary and case.dim == 128
            and not args.chunk)


def import_flashkda(path):
    """flash_kda from PATH (a FlashKDA checkout built in place: `FLASH_KDA_CUDA_ARCHS=90a python3
    setup.py build_ext --inplace`), or from sys.path when PATH is empty."""
    if path:
        sys.path.insert(0, os.path.abspath(path))
    import flash_kda
    return flash_kda


def summarize(passes):
    allc = [t for p in passes for t in p[0]]
    return {"median_ms": statistics.median(allc), "min_ms": min(allc),
            "pass_medians_ms": [statistics.median(p[0]) for p in passes],
            "b2b_mean_ms": [p[1] for p in passes], "calls": len(allc)}


def run_case(case, torch, fla, kda_mod, args, l2_bytes):
    floor_ms, nbytes, flops = case.floor()
    row = {"case": case.name, "kind": case.kind, "H": case.H, "B": case.B, "T": case.T,
           "seqlens": case.lengths() if case.kind in ("fwd", "fwdbwd") else None, "N": case.N,
           "floor_ms": floor_ms, "floor_bytes": nbytes, "floor_flops": flops}
    if case.kind in ("decode", "decode-mtp") and fla is not None and fla[2] is None:
        row["fla_note"] = "FLA has no state-pool fused_recurrent_kda_fwd: FLA not timed for this case"
    # Enough sets that one pass over them is at least 3x L2 (one set of these cases already is).
    x0 = make_set(case, torch, args.seed)
    per_set = set_bytes(x0) + (case.N * case.H * KV * KV * 4 * (1 + case.T)
                               if case.kind in ("decode", "decode-mtp") else 0)
    nsets = args.sets or max(2, min(8, math.ceil(3 * l2_bytes / max(per_set, 1))))
    sets = [x0] + [make_set(case, torch, args.seed + 1000 * j) for j in range(1, nsets)]
    row["input_sets"], row["set_bytes"] = nsets, per_set
    fla_fns = fla[:3] if fla is not None else None
    r = Runner(case, torch, fla_fns, kda_mod, sets, args.chunk)
    if flashkda_takes(case, args) and getattr(args, "flashkda_mod", None) is not None:
        r.flashkda = args.flashkda_mod
    use_fla = fla is not None and not (case.kind in ("decode", "decode-mtp") and fla[2] is None)
    use_kda = kda_mod is not None
    # Check first (needs both sides).
    if use_fla and use_kda:
        try:
            row["check"] = r.check()
        except Exception as e:  # noqa: BLE001
            row["check"] = {"problem": f"{type(e).__name__}: {e}"}
            if args.traceback:
                row["check"]["traceback"] = traceback.format_exc()
            _sync(torch, row)
    else:
        row["check"] = {"problem": "not checked (only one side available)"}
    if use_kda and case.kind in ("fwd", "hybrid"):
        # The tile kda's bundle was built with: None is the compiled default
        # (kda.tune.shape_policy_tile, or a tuning database, chose no other);
        # and the pipelined pieces it ran (1: none).
        try:
            r.kda_call(0)
            _sync(torch, row)
            row["kda_tile"] = getattr(kops.last_launch, "bundle_tile", None)
            row["kda_pieces"] = getattr(kops.last_launch, "pieces", 1)
        except Exception as e:  # noqa: BLE001 (reported by the timing below)
            row["kda_tile_error"] = f"{type(e).__name__}: {e}"
    chk = row["check"]
    print(f"  check: " + (", ".join(f"{k}={_fmt(v)}" for k, v in chk.items() if k != "traceback")),
          flush=True)
    if chk.get("traceback"):
        print("    " + chk["traceback"].replace("\n", "\n    "), flush=True)
    # Each variant's outputs (and gradients) against FLA too: a variant's timing means
    # nothing if its kernels compute something else ("kda@NAME_check" in the row).
    if use_fla and use_kda:
        for vname, _ in args.kda_variant:
            name = f"kda@{vname}"
            try:
                with _bundles_of(name, args):
                    vchk = r.check()
            except Exception as e:  # noqa: BLE001
                vchk = {"problem": f"{type(e).__name__}: {e}"}
            _sync(torch, row)
            row[f"{name}_check"] = vchk
            print(f"  {name} check: " + ", ".join(f"{k}={_fmt(v)}" for k, v in vchk.items()),
                  flush=True)
    ok = "problem" not in chk
    if args.strict and not ok:
        row["skipped"] = "check failed (--strict)"
        return row
    sides = []
    if use_fla:
        sides.append(("fla", r.fla_call))
    if r.flashkda is not None:
        sides.append(("flashkda", r.flashkda_call))
    if use_kda:
        sides.append(("kda", r.kda_call))
        for vname, vdir in args.kda_variant:
            sides.append((f"kda@{vname}", r.kda_call))
        if args.untuned and case.kind == "fwd":
            sides.append(("kda@untuned", r.kda_call))
    if case.kind == "hybrid" and use_kda:
        # The separate parts, timed like the sides (ratio_fused_over_separate below).
        sides.append(("part_kda_kda", r.part_kda_kda))
        sides.append(("part_kda_window", r.part_kda_window))
        sides.append(("part_mix", r.part_mix))
        sides.append(("kda_separate", r.kda_separate))
        if use_fla:
            sides.append(("part_fla_kda", r.part_fla_kda))
            sides.append(("part_fla_window", r.part_fla_window))
    if case.kind == "multiscale" and use_kda:
        sides.append(("kda_separate", r.kda_separate))
    passes = {name: [] for name, _ in sides}
    host = {}
    failed = {}
    for p in range(args.passes):
        # Odd passes time the sides in reverse order: a side's position in a pass matters (at
        # 8 x 4096 the side timed right after another kda side read 4 to 8 % slower with
        # byte-identical kernels, bench/RESULTS.md, twentieth session), so with two or more
        # passes every side takes every position alike.
        for name, fn in (sides if p % 2 == 0 else sides[::-1]):
            if name in failed:
                continue
            try:
                with _bundles_of(name, args):
                    if name.startswith("kda@") and f"{name}_tile" not in row:
                        fn(0)
                        _sync(torch, row)
                        row[f"{name}_tile"] = getattr(kops.last_launch, "bundle_tile", None)
                    passes[name].append(time_calls(torch, fn, nsets, args.warmup, args.reps))
                    if name not in host:
                        host[name] = host_time(torch, fn, nsets)
            except Exception as e:  # noqa: BLE001
                failed[name] = f"{type(e).__name__}: {e}"
                if args.traceback:
                    failed[name] += "\n" + traceback.format_exc()
                _sync(torch, row)
    for name, _ in sides:
        if passes[name]:
            row[name] = summarize(passes[name])
            row[name]["floor_fraction"] = floor_ms / row[name]["median_ms"]
            if name in host:
                row[name]["host_ms"] = host[name]
        if name in failed:
            row[name + "_error"] = failed[name]
            print(f"  {name}: {failed[name]}", flush=True)
    if "fla" in row and "kda" in row:
        row["ratio_kda_over_fla"] = row["kda"]["median_ms"] / row["fla"]["median_ms"]
    if "flashkda" in row and "kda" in row:
        row["ratio_kda_over_flashkda"] = row["kda"]["median_ms"] / row["flashkda"]["median_ms"]
    if case.kind == "multiscale" and "kda" in row and "kda_separate" in row:
        # The layer against the scales run as separate calls (the faster of kda's and FLA's,
        # each with the scaled gates and the mix in torch).
        sep = min(row[n]["median_ms"] for n in ("kda_separate", "fla") if n in row)
        row["separate_ms"] = sep
        row["ratio_fused_over_separate"] = row["kda"]["median_ms"] / sep
        print(f"  fused / separate: {row['ratio_fused_over_separate']:.3f} (separate {sep:.4f} ms)", flush=True)
    if case.kind == "hybrid" and "kda" in row:
        # Issue 23's bar: the fused layer against the separate parts, each the faster of kda's and
        # FLA's (FLA's where it was timed), the mix as torch runs it.
        def best(part):
            times = [row[f"part_{lib}_{part}"]["median_ms"] for lib in ("kda", "fla")
                     if f"part_{lib}_{part}" in row]
            return min(times) if times else None
        parts = {"kda": best("kda"), "window": best("window"),
                 "mix": row["part_mix"]["median_ms"] if "part_mix" in row else None}
        if None not in parts.values():
            row["separate_ms"] = sum(parts.values())
            row["separate_parts_ms"] = parts
            row["ratio_fused_over_separate"] = row["kda"]["median_ms"] / row["separate_ms"]
            print(f"  fused / separate: {row['ratio_fused_over_separate']:.3f} (separate "
                  f"{row['separate_ms']:.4f} ms: " + ", ".join(f"{k} {v:.4f}" for k, v in parts.items()) + ")",
                  flush=True)
    for name, _ in sides:
        if name.startswith("kda@") and name in row and "fla" in row:
            row[name]["ratio_over_fla"] = row[name]["median_ms"] / row["fla"]["median_ms"]
    for name, _ in sides:
        if name in row:
            s = row[name]
            host_s = f"; host {s['host_ms']:.4f} ms/call" if "host_ms" in s else ""
            print(f"  {name}: median {s['median_ms']:.4f} ms{host_s} (passes "
                  f"{', '.join(f'{t:.4f}' for t in s['pass_medians_ms'])}; b2b "
                  f"{', '.join(f'{t:.4f}' for t in s['b2b_mean_ms'])}; min {s['min_ms']:.4f})", flush=True)
    del r, sets, x0
    return row


_variant_caches = {}


def _variant_arg(s):
    """NAME=DIR[,VAR=VALUE...] -> (NAME, DIR); the pairs go to _variant_env."""
    if "=" not in s:
        raise argparse.ArgumentTypeError("expected NAME=DIR[,VAR=VALUE...]")
    name, rest = s.split("=", 1)
    parts = rest.split(",")
    env = {}
    for p in parts[1:]:
        if "=" not in p:
            raise argparse.ArgumentTypeError(f"{s}: expected VAR=VALUE after the directory, got {p!r}")
        k, v = p.split("=", 1)
        env[k] = v
    _variant_env[name] = env
    return (name, parts[0])


# Environment variables per variant name (--kda-variant NAME=DIR,VAR=VALUE).
_variant_env = {}


class _bundles_of:
    """While timing side `name` = "kda@VARIANT": kda's bundles come from that
    variant's directory (--kda-variant VARIANT=DIR), with their own resolved
    bundle cache, so variants of the compiler run in the same process as FLA
    and the default build. Other sides: no change."""

    def __init__(self, name, args):
        self.dir = dict(args.kda_variant).get(name[4:]) if name.startswith("kda@") else None
        self.env = _variant_env.get(name[4:], {}) if self.dir is not None else {}
        self.untuned = name == "kda@untuned"
        self.name = name

    def __enter__(self):
        if self.untuned:
            # The same bundles without any tuning database: the shape policy's tiles.
            self.saved_db = os.environ.get("KDA_TUNING_DB")
            os.environ["KDA_TUNING_DB"] = ""
            return self
        if self.dir is None:
            return self
        self.saved = (os.environ.get("KDA_BUNDLE_PATH"), kops._resolved)
        self.saved_env = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        os.environ["KDA_BUNDLE_PATH"] = self.dir
        kops._resolved = _variant_caches.setdefault(self.name, {})
        return self

    def __exit__(self, *exc):
        if self.untuned:
            if self.saved_db is None:
                os.environ.pop("KDA_TUNING_DB", None)
            else:
                os.environ["KDA_TUNING_DB"] = self.saved_db
            return False
        if self.dir is None:
            return False
        path, kops._resolved = self.saved
        for k, v in self.saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if path is None:
            os.environ.pop("KDA_BUNDLE_PATH", None)
        else:
            os.environ["KDA_BUNDLE_PATH"] = path
        return False


def _sync(torch, row):
    try:
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        row["cuda_context_error"] = f"{type(e).__name__}: {e}"


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.3e}"
    return str(v)


def table(rows):
    def ms(r, side):
        if side in r:
            return f"{r[side]['median_ms']:.3f}"
        if r.get(side + "_error"):
            return "error"
        return "n/a"

    lines = ["| case | FLA ms | FlashKDA ms | kda ms | kda/FLA | kda/FlashKDA | host ms/call (kda, FLA) | "
             "floor ms | floor/kda | floor/FLA | o rel RMSE | state rel RMSE |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        chk = r.get("check", {})
        ratio = f"{r['ratio_kda_over_fla']:.2f}" if "ratio_kda_over_fla" in r else "-"
        ratio_x = f"{r['ratio_kda_over_flashkda']:.2f}" if "ratio_kda_over_flashkda" in r else "-"
        fk = f"{r['kda']['floor_fraction']:.3f}" if "kda" in r else "-"
        ff = f"{r['fla']['floor_fraction']:.3f}" if "fla" in r else "-"
        hosts = ", ".join(f"{r[side]['host_ms']:.3f}" if "host_ms" in r.get(side, {}) else "-"
                          for side in ("kda", "fla"))
        orm = f"{chk['o_rel_rmse']:.1e}" if "o_rel_rmse" in chk else "-"
        srm = f"{chk['state_rel_rmse']:.1e}" if "state_rel_rmse" in chk else "-"
        if "problem" in chk:
            srm += " (!)"
        lines.append(f"| {r['case']} | {ms(r, 'fla')} | {ms(r, 'flashkda')} | {ms(r, 'kda')} | {ratio} | "
                     f"{ratio_x} | {hosts} | {r['floor_ms']:.3f} | {fk} | {ff} | {orm} | {srm} |")
    variants = sorted({k for r in rows for k in r if k.startswith("kda@") and not k.endswith("_tile")
                       and not k.endswith("_error") and not k.endswith("_check")})
    if variants:
        lines += ["", "| case | " + " | ".join(f"{v} ms (/FLA)" for v in variants) + " |",
                  "|---|" + "---|" * len(variants)]
        for r in rows:
            # (!) where the variant's own check against FLA found a problem.
            cells = [f"{r[v]['median_ms']:.3f} ({r[v].get('ratio_over_fla', float('nan')):.2f})"
                     + (" (!)" if "problem" in r.get(f"{v}_check", {}) else "")
                     if v in r else "-" for v in variants]
            lines.append(f"| {r['case']} | " + " | ".join(cells) + " |")
    hybrids = [r for r in rows if "separate_parts_ms" in r]
    if hybrids:
        # Issue 23: the fused layer against the separate parts, each the faster of kda's and FLA's.
        lines += ["", "| case | kda fused ms | separate ms (KDA part, window, mix) | fused / separate | "
                      "kda's own parts ms |", "|---|---|---|---|---|"]
        for r in hybrids:
            p = r["separate_parts_ms"]
            own = f"{r['kda_separate']['median_ms']:.3f}" if "kda_separate" in r else "-"
            lines.append(f"| {r['case']} | {r['kda']['median_ms']:.3f} | {r['separate_ms']:.3f} ({p['kda']:.3f}, "
                         f"{p['window']:.3f}, {p['mix']:.3f}) | {r['ratio_fused_over_separate']:.2f} | {own} |")
    multi = [r for r in rows if "ratio_fused_over_separate" in r and "separate_parts_ms" not in r]
    if multi:
        lines += ["", "| case | kda layer ms | kda separate calls ms | FLA ms | layer / faster separate |",
                  "|---|---|---|---|---|"]
        for r in multi:
            lines.append(f"| {r['case']} | {ms(r, 'kda')} | {ms(r, 'kda_separate')} | {ms(r, 'fla')} | "
                         f"{r['ratio_fused_over_separate']:.2f} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--print-configs", action="store_true",
                    help="print the kda kernel configurations the selected cases need (JSON) and exit")
    ap.add_argument("--list", action="store_true", help="print the case names and floors and exit")
    ap.add_argument("--cases", default="", help="comma-separated substrings; run cases whose name has one")
    ap.add_argument("--quick", action="store_true", help="warm-up 3, 20 timed calls, 1 pass")
    ap.add_argument("--reps", type=int, default=None, help="timed calls per pass and side (default 100)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed calls before each pass (default 10)")
    ap.add_argument("--passes", type=int, default=None, help="alternating FLA/kda passes (default 2)")
    ap.add_argument("--sets", type=int, default=0, help="input sets to rotate (default: enough for 3x L2, >= 2)")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--chunk", type=int, default=None, help="kda chunk size (16/32/64; default kda's)")
    ap.add_argument("--json", default=None, help="write all results to this path")
    ap.add_argument("--no-fla", action="store_true", help="time kda only")
    ap.add_argument("--untuned", action="store_true",
                    help="also time kda without a tuning database (KDA_TUNING_DB empty: the shape "
                         "policy's tiles), in the same process and passes as the tuned default")
    ap.add_argument("--kda-variant", action="append", default=[], metavar="NAME=DIR[,VAR=VALUE...]",
                    type=_variant_arg,
                    help="also time kda with the bundles in DIR (another compiler build or tile "
                         "set), in the same process and passes (repeatable); VAR=VALUE pairs are "
                         "environment variables set while the variant runs (e.g. KDA_SEGMENTS=8)")
    ap.add_argument("--no-kda", action="store_true", help="time FLA only")
    ap.add_argument("--flashkda", default=None, metavar="DIR",
                    help="also time FlashKDA (flash_kda built in place in DIR; '' : from sys.path) on "
                         "the cases it computes (BENCH.md's configuration), in the same passes")
    ap.add_argument("--fla-import", choices=("auto", "light", "full"), default="auto",
                    help="how to import FLA (see import_fla; default auto: light, then full)")
    ap.add_argument("--strict", action="store_true", help="do not time a case whose check failed")
    ap.add_argument("--traceback", action="store_true", help="print tracebacks of errors")
    args = ap.parse_args(argv)
    args.reps = args.reps or (20 if args.quick else 100)
    args.warmup = args.warmup if args.warmup is not None else (3 if args.quick else 10)
    args.passes = args.passes or (1 if args.quick else 2)

    cases = select(all_cases(), args.cases)
    if args.print_configs:
        print(json.dumps(unique_configs(cases, args.chunk), indent=1, sort_keys=True))
        return 0
    if args.list:
        for c in cases:
            f, b, fl = c.floor()
            print(f"{c.name:28s} floor {f:.3f} ms ({b / 1e6:.1f} MB, {fl / 1e9:.1f} GFLOP)")
        return 0
    if not cases:
        print(f"no case matches --cases {args.cases!r}", file=sys.stderr)
        return 2

    try:
        import torch
    except ImportError:
        print("SKIP: torch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("SKIP: no CUDA GPU")
        return 0
    import triton  # noqa: F401  (FLA needs it; report its version)

    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 0) or 60 * 2 ** 20
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "device": torch.cuda.get_device_name(0),
            "capability": ".".join(map(str, torch.cuda.get_device_capability(0))),
            "sms": props.multi_processor_count, "l2_bytes": l2, "torch": torch.__version__,
            "triton": triton.__version__, "argv": sys.argv[1:],
            "reps": args.reps, "warmup": args.warmup, "passes": args.passes,
            "env": {k: os.environ.get(k) for k in ("KDA_BUNDLE_PATH", "KDA_RUNTIME_LIBRARY", "KDA_NO_COMPILE",
                                                   "FLA_FLASH_KDA", "FLA_TILELANG",
                                                   "FLA_DISABLE_BACKEND_DISPATCH")}}
    fla = None
    if not args.no_fla:
        try:
            fla = import_fla(args.fla_import)
            meta["fla"] = fla[3]
        except Exception as e:  # noqa: BLE001
            meta["fla_error"] = f"{type(e).__name__}: {e}"
            print(f"FLA import failed: {meta['fla_error']}", flush=True)
            if args.traceback:
                traceback.print_exc()
    args.flashkda_mod = None
    if args.flashkda is not None:
        try:
            args.flashkda_mod = import_flashkda(args.flashkda)
            meta["flashkda"] = os.path.dirname(os.path.abspath(args.flashkda_mod.__file__))
        except Exception as e:  # noqa: BLE001
            meta["flashkda_error"] = f"{type(e).__name__}: {e}"
            print(f"FlashKDA import failed: {meta['flashkda_error']}", flush=True)
    kda_mod = None
    if not args.no_kda:
        import kda as kda_mod
        meta["kda_chip"] = kops.chip_for_device(0)
        meta["kda_runtime"] = kda_mod.runtime.library_path()
    print(f"device: {meta['device']} (cc {meta['capability']}, {meta['sms']} SMs, L2 {l2 / 2 ** 20:.0f} MiB); "
          f"torch {meta['torch']}, triton {meta['triton']}; FLA "
          f"{json.dumps(meta.get('fla', meta.get('fla_error', 'off')))}; kda chip {meta.get('kda_chip')}, "
          f"runtime {meta.get('kda_runtime')}", flush=True)
    print(f"timing: CUDA events per call, warm-up {args.warmup}, {args.reps} calls x {args.passes} passes "
          f"per side (FLA, kda alternating), median", flush=True)

    rows = []
    t_start = time.time()
    with torch.inference_mode():
        for case in cases:
            print(f"== {case.name}", flush=True)
            t0 = time.time()
            try:
                # Training cases need autograd: their inputs are made and called outside
                # inference mode.
                with torch.inference_mode(case.kind != "fwdbwd"):
                    row = run_case(case, torch, fla, kda_mod, args, l2)
            except Exception as e:  # noqa: BLE001
                row = {"case": case.name, "kind": case.kind, "floor_ms": case.floor()[0],
                       "error": f"{type(e).__name__}: {e}"}
                print(f"  error: {row['error']}", flush=True)
                if args.traceback:
                    traceback.print_exc()
                _sync(torch, row)
            row["seconds"] = round(time.time() - t0, 1)
            rows.append(row)
            torch.cuda.empty_cache()
            if args.json:  # keep what we have if a later case dies
                _write_json(args.json, meta, rows)
    meta["seconds"] = round(time.time() - t_start, 1)
    if args.json:
        _write_json(args.json, meta, rows)
    print()
    print(f"{meta['device']}, {meta['date']}; bf16, K=V={KV}, l2norm + beta sigmoid + lower-bound gate "
          f"{LOWER_BOUND:g} in kernel, fp32 h0/ht V-major; median of {args.reps * args.passes} calls; "
          f"floor = max(bytes/4.25 TB/s, flops/802 TFLOP/s); floor/x = floor / time")
    print(table(rows))
    bad = [r["case"] for r in rows if "problem" in r.get("check", {}) or "error" in r]
    if bad:
        print("check problems or errors: " + ", ".join(bad))
    return 1 if bad else 0


def _write_json(path, meta, rows):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1, sort_keys=True, default=str)
        f.write("\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
