#!/usr/bin/env python3
"""GPU tests of kda inside PyTorch: the custom ops, torch.compile, CUDA graphs and the drop-in layer.

    KDA_BUNDLE_PATH=BUNDLES KDA_RUNTIME_LIBRARY=.../libkda_runtime.so python3 test/gpu/test_torch.py [--fla DIR]

(test/gpu/run.sh BUNDLES runs it after test_gpu.py.) Parts, one line each:
  opcheck      torch.library.opcheck (schema, fake tensors) of torch.ops.kda.chunk_kda,
               fused_recurrent_kda, decode_kda and window_attention
  compile      torch.compile(fullgraph=True) of a function calling kda.chunk_kda (varlen, final
               state), kda.fused_recurrent_kda (decode on a pool) and kda.window_attention: no graph
               break, the same results as eager calls, bit for bit
  graph-decode a decode step on a state pool captured in a CUDA graph, replayed on new inputs
  graph-prefill a prefill call (initial and final states) captured and replayed
  pieces       pipelined pieces (KDA_PIECES): one dense sequence's kernels piece by piece, the state kernel on
               a high-priority stream; bit-exact against one piece, planned, in a CUDA graph
  grad         chunk_kda differentiable (the compiler's derived gradient, kda.gated_delta_grad):
               Kimi's call (gate, l2 norm and beta sigmoid in kernel, GVA, packed sequences, initial and
               final states) and FLA's default call (log-space gate, dense batch), bf16: every gradient
               against the float64 oracle's within FLA's bars (0.008 dq, dk, dv, dh0; 0.02 dg, dbeta,
               dA_log, ddt_bias); with FLA, its gradients of the same inputs are reported beside
  cp           context parallelism simulated in one process (kda.cp.simulate): P ranks' work in turn,
               their summaries stacked as the all-gather would; Kimi's call (gate, l2 norm, beta sigmoid
               in kernel, GVA, V-major states), one sequence over 2 and 4 ranks and a packed batch where
               only some sequences cross ranks, against the float64 oracle (5e-3) and against one
               chunk_kda call on the whole batch
  compile-model two KimiDeltaAttention layers under torch.compile(fullgraph=True): prefill (packed
               sequences) and a decode step with a cache, against eager (bit-exact with aot_eager;
               inductor's fusions round differently: relative RMSE <= 2e-3)
  layer-*      kda.layers.KimiDeltaAttention (bf16): the state dict of fla.layers.KimiDeltaAttention
               (flash-linear-attention, from --fla or the path) loads both ways; prefill with cu_seqlens
               and a cache, then decode steps with it, a dense batch, and a padded batch with an
               attention mask. Outputs and states against (1) the same layer with the float64 oracle
               as its kernels: SPEC's bf16 bar, 5e-3 (the kernels' error, through the layer);
               (2) FLA's layer: 1e-2 (two bf16 layers, each with its own rounding); (3) the layer's
               float64 twin: no further from it than FLA's layer is (10 % slack)
Without torch or a CUDA GPU: "SKIP: no CUDA GPU", exit 0. Without flash-linear-attention, the layer
parts say SKIP with the import error (the other parts still run).

    python3 test/gpu/test_torch.py --print-configs   # the kernel configurations the parts need
                                                    # (JSON; no torch needed)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)  # oracle.py (the float64 oracle, $KDA_ORACLE_LIBRARY)

import kda.ops as kops  # noqa: E402  (needs no torch at import)

# The layer's sizes: Kimi-Linear's head size, four heads.
HIDDEN, HEADS, HEAD_DIM, CONV = 512, 4, 128, 4
LAYER_BAR = 1e-2
KERNEL_BAR = 5e-3


class Meta:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


def configs():
    """Every kernel configuration the parts launch (derived as kda.ops derives them)."""
    K = V = HEAD_DIM
    H = HV = HEADS
    out = []

    def chunk(B, T, h0, ht, cu_dtype=None, v_major=True):
        q, g = Meta((B, T, H, K), "bf16"), Meta((B, T, HV, K), "bf16")
        v, beta = Meta((B, T, HV, V), "bf16"), Meta((B, T, HV), "bf16")
        st = Meta((2, HV, V, K) if v_major else (2, HV, K, V), "f32") if h0 else None
        cu = Meta((3,), cu_dtype) if cu_dtype else None
        return kops.chunk_kda_config(q, q, v, g, beta, initial_state=st, output_final_state=ht,
                                     use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                                     use_beta_sigmoid_in_kernel=True, state_v_first=v_major,
                                     cu_seqlens=cu, A_log=Meta((HV,), "f32"), dt_bias=Meta((HV * K,), "f32"))

    def cp_chunk(B, h0, ht, cu_dtype):
        Hq, Hv = CP_H, CP_HV
        q, g = Meta((B, 64, Hq, K), "bf16"), Meta((B, 64, Hv, K), "bf16")
        v, beta = Meta((B, 64, Hv, V), "bf16"), Meta((B, 64, Hv), "bf16")
        cu = Meta((3,), cu_dtype) if cu_dtype else None
        st = Meta((2 if cu else B, Hv, V, K), "f32") if h0 else None
        return kops.chunk_kda_config(q, q, v, g, beta, initial_state=st, output_final_state=ht,
                                     use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                                     use_beta_sigmoid_in_kernel=True, state_v_first=True,
                                     cu_seqlens=cu, A_log=Meta((Hv,), "f32"), dt_bias=Meta((Hv * K,), "f32"),
                                     lower_bound=-5.0)

    def decode(N, pool):
        q, g = Meta((N, 1, H, K), "bf16"), Meta((N, 1, HV, K), "bf16")
        v, beta = Meta((N, 1, HV, V), "bf16"), Meta((N, 1, HV), "bf16")
        kw = dict(A_log=Meta((HV,), "f32"), dt_bias=Meta((HV * K,), "f32"), use_qk_l2norm_in_kernel=True,
                  use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, state_v_first=True)
        if pool:
            return kops.fused_recurrent_kda_config(q, q, v, g, beta, initial_state=Meta((2 * N, HV, V, K), "f32"),
                                                   ssm_state_indices=Meta((N,), "i32"), **kw)
        return kops.fused_recurrent_kda_config(q, q, v, g, beta, initial_state=Meta((N, HV, V, K), "f32"),
                                               output_final_state=True, **kw)

    # grad: the forward keeping the states at the backward's chunk, and the
    # gradient kernel (kda.ops' autograd derives both the same way).
    from kda import bundles as kbundles
    for cfg in grad_forward_configs():
        out.append(cfg)
        out.append(kbundles.gated_delta_grad_config(cfg, d_final_state=cfg["final_state_dtype"] is not None,
                                                    chunk=kops.GRAD_CHUNK))
    # cp: each rank's summary (its last piece and copies of it from zeros and the identity's
    # columns: a dense batch with initial and final states, GVA) and its finish (its packed pieces
    # from the merged state: varlen with initial states, no final state).
    out += [cp_chunk(2, True, True, None), cp_chunk(1, True, False, "i32"), cp_chunk(1, False, False, "i32")]
    out += [chunk(1, 300, False, True, "i32"),   # layer: packed prefill filling a cache; compile
            chunk(1, 300, False, False, "i32"),  # layer: a padded batch, unpadded by its mask
            chunk(2, 100, False, False),         # layer: a dense batch without a cache
            chunk(2, 100, True, True),           # graph-prefill
            decode(3, pool=False),               # layer: decode steps with the cache
            decode(3, pool=True)]                # compile, graph-decode, opcheck
    q = Meta((2, 100, H, 64), "bf16")
    out.append(kops.window_attention_config(q, q, Meta((2, 100, H, 64), "bf16"), 32))
    # Per-position windows through the op's window_sizes argument (opcheck).
    out.append(kops.window_attention_config(q, q, Meta((2, 100, H, 64), "bf16"), None,
                                            window_sizes=Meta((100,), "i32")))
    # hybrid: the layer entry (gated per head, the Kimi prologue, W = 64), in both schedules
    # (kda.tune.hybrid_schedule's and KDA_HYBRID_SCHEDULE=overlap's).
    layer = kops.hybrid_attention_config(
        Meta((1, 1000, H, K), "bf16"), Meta((1, 1000, H, K), "bf16"), Meta((1, 1000, HV, V), "bf16"),
        Meta((1, 1000, HV, K), "bf16"), Meta((1, 1000, HV), "bf16"), Meta((1, 1000, HV), "bf16"), window=64,
        A_log=Meta((HV,), "f32"), dt_bias=Meta((HV * K,), "f32"), **HYBRID_GATE)
    out += [layer, dict(layer, schedule="overlap")]
    return out  # (kda.prebuild drops repeats)


GRAD_H, GRAD_HV, GRAD_K, GRAD_V = 2, 4, 64, 64  # GVA: two value heads per q / k head
CP_H, CP_HV = 2, 4                               # cp: GVA, K = V = 128 (HEAD_DIM)
GRAD_SEQLENS = (100, 37, 163)                    # Kimi's case: packed sequences
GRAD_DENSE = (2, 130)                            # FLA's default case: B, T


def grad_forward_configs():
    """The forward configurations of the grad part's two calls, with the
    states the backward reads (boundary_interval = kda.ops.GRAD_CHUNK)."""
    H, HV, K, V = GRAD_H, GRAD_HV, GRAD_K, GRAD_V
    T = sum(GRAD_SEQLENS)
    q, v = Meta((1, T, H, K), "bf16"), Meta((1, T, HV, V), "bf16")
    kimi = kops.chunk_kda_config(q, q, v, Meta((1, T, HV, K), "bf16"), Meta((1, T, HV), "bf16"),
                                 initial_state=Meta((3, HV, V, K), "f32"), output_final_state=True,
                                 use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                                 use_beta_sigmoid_in_kernel=True, state_v_first=True,
                                 cu_seqlens=Meta((4,), "i32"), A_log=Meta((HV,), "f32"),
                                 dt_bias=Meta((HV * K,), "f32"), lower_bound=-5.0,
                                 boundary_interval=kops.GRAD_CHUNK)
    B, T = GRAD_DENSE
    q, v = Meta((B, T, H, K), "bf16"), Meta((B, T, HV, V), "bf16")
    fla = kops.chunk_kda_config(q, q, v, Meta((B, T, HV, K), "f32"), Meta((B, T, HV), "bf16"),
                                boundary_interval=kops.GRAD_CHUNK)
    # kda.layers' training call: V-major states kept though the call has none
    # (the gradient must read them in that layout), the softplus gate.
    layer = kops.chunk_kda_config(q, q, v, Meta((B, T, HV, K), "bf16"), Meta((B, T, HV), "bf16"),
                                  use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                                  use_beta_sigmoid_in_kernel=True, state_v_first=True,
                                  A_log=Meta((HV,), "f32"), dt_bias=Meta((HV * K,), "f32"),
                                  boundary_interval=kops.GRAD_CHUNK)
    return [kimi, fla, layer]


def part_grad(torch, kda, fla_dir=""):
    """chunk_kda's gradients against the float64 oracle (and FLA's, where it imports)."""
    import numpy as np
    import oracle
    problems, info = [], []
    H, HV, K, V = GRAD_H, GRAD_HV, GRAD_K, GRAD_V
    gen = torch.Generator(device="cuda").manual_seed(24)
    r = lambda *s: torch.randn(*s, generator=gen, device="cuda")  # noqa: E731
    try:
        if fla_dir:
            sys.path.insert(0, fla_dir)
        from fla.ops.kda import chunk_kda as fla_chunk_kda
    except Exception:  # noqa: BLE001
        fla_chunk_kda = None
    bars = dict(dq=8e-3, dk=8e-3, dv=8e-3, dh0=8e-3, dg=2e-2, dbeta=2e-2, dA_log=2e-2, ddt_bias=2e-2)

    def check(label, leaves, names, out_grads, oracle_grads, fla_grads=None):
        worst = 0.0
        for name, leaf in zip(names, leaves):
            got = leaf.grad
            want = oracle_grads[name]
            if got is None:
                problems.append(f"{label}: no gradient for {name}")
                continue
            if got.dtype != leaf.dtype or tuple(got.shape) != tuple(leaf.shape):
                problems.append(f"{label}: {name} gradient {got.dtype} {tuple(got.shape)}, "
                                f"expected {leaf.dtype} {tuple(leaf.shape)}")
            err = oracle.relative_rmse(got.double().cpu().numpy(), np.reshape(want, tuple(got.shape)))
            worst = max(worst, err / bars[name])
            note = ""
            if fla_grads is not None and fla_grads.get(name) is not None:
                fe = oracle.relative_rmse(fla_grads[name].double().cpu().numpy(),
                                          np.reshape(want, tuple(got.shape)))
                note = f" (FLA {fe:.1e})"
            info.append(f"{label}.{name} {err:.1e}{note}")
            if not err <= bars[name]:
                problems.append(f"{label}: {name} relative RMSE {err:.3e} against the oracle, bar {bars[name]:g}")
        return worst

    # Kimi's call.
    T = sum(GRAD_SEQLENS)
    cu = torch.tensor([0] + list(np.cumsum(GRAD_SEQLENS)), dtype=torch.int32, device="cuda")
    x = dict(q=r(1, T, H, K).bfloat16(), k=r(1, T, H, K).bfloat16(), v=r(1, T, HV, V).bfloat16(),
             g=r(1, T, HV, K).bfloat16(), beta=r(1, T, HV).bfloat16(),
             h0=(r(3, HV, V, K) * 0.1), A_log=torch.log(torch.rand(HV, generator=gen, device="cuda") * 15 + 1),
             dt_bias=r(HV * K) * 0.5)
    leaves = {n: t.detach().clone().requires_grad_(True) for n, t in x.items()}
    do, dht = r(1, T, HV, V).bfloat16(), r(3, HV, V, K)
    kw = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
              state_v_first=True, lower_bound=-5.0)
    o, ht = kda.chunk_kda(leaves["q"], leaves["k"], leaves["v"], leaves["g"], leaves["beta"],
                          initial_state=leaves["h0"], output_final_state=True, cu_seqlens=cu,
                          A_log=leaves["A_log"], dt_bias=leaves["dt_bias"], **kw)
    ((o.float() * do.float()).sum() + (ht * dht).sum()).backward()
    npf = lambda t: t.detach().double().cpu().numpy()  # noqa: E731
    want = oracle.gated_delta_grad(
        npf(x["q"]), npf(x["k"]), npf(x["v"]), npf(x["g"]), npf(x["beta"]), npf(x["h0"]), cu.cpu().numpy(),
        npf(x["A_log"]), npf(x["dt_bias"]), do=npf(do), dht=npf(dht), state_layout="v_major",
        qk_l2norm=True, beta_activation="sigmoid", gate_activation="lower_bound", lower_bound=-5.0)
    fla_grads = None
    try:
      if fla_chunk_kda is not None:
        fl = {n: t.detach().clone().requires_grad_(True) for n, t in x.items()}
        fo, fht = fla_chunk_kda(fl["q"], fl["k"], fl["v"], fl["g"], fl["beta"], initial_state=fl["h0"],
                                output_final_state=True, cu_seqlens=cu.long(), A_log=fl["A_log"],
                                dt_bias=fl["dt_bias"], **kw)
        ((fo.float() * do.float()).sum() + (fht * dht).sum()).backward()
        fla_grads = {"dq": fl["q"].grad, "dk": fl["k"].grad, "dv": fl["v"].grad, "dg": fl["g"].grad,
                     "dbeta": fl["beta"].grad, "dh0": fl["h0"].grad, "dA_log": fl["A_log"].grad,
                     "ddt_bias": fl["dt_bias"].grad}
    except Exception as e:  # noqa: BLE001  (FLA's gradients are reported, not required)
        info.append(f"FLA kimi: {type(e).__name__}: {e}")
        fla_grads = None
    names = ["dq", "dk", "dv", "dg", "dbeta", "dh0", "dA_log", "ddt_bias"]
    check("kimi", [leaves[n] for n in ("q", "k", "v", "g", "beta", "h0", "A_log", "dt_bias")], names,
          None, want, fla_grads)
    strategy = kda.ops.last_launch.strategy
    info.append(f"strategy {strategy}")

    # FLA's default call: log-space gate in fp32, pre-normalised q and k,
    # beta after its sigmoid, a dense batch, no states.
    B, T = GRAD_DENSE
    q = torch.nn.functional.normalize(r(B, T, H, K), dim=-1).bfloat16()
    k = torch.nn.functional.normalize(r(B, T, H, K), dim=-1).bfloat16()
    y = dict(q=q, k=k, v=r(B, T, HV, V).bfloat16(),
             g=torch.nn.functional.logsigmoid(r(B, T, HV, K) + 3.0).float(),
             beta=torch.sigmoid(r(B, T, HV)).bfloat16())
    leaves = {n: t.detach().clone().requires_grad_(True) for n, t in y.items()}
    do = r(B, T, HV, V).bfloat16()
    o, _ = kda.chunk_kda(leaves["q"], leaves["k"], leaves["v"], leaves["g"], leaves["beta"])
    (o.float() * do.float()).sum().backward()
    want = oracle.gated_delta_grad(npf(y["q"]), npf(y["k"]), npf(y["v"]), npf(y["g"]), npf(y["beta"]),
                                   do=npf(do))
    fla_grads = None
    try:
      if fla_chunk_kda is not None:
        fl = {n: t.detach().clone().requires_grad_(True) for n, t in y.items()}
        fo, _ = fla_chunk_kda(fl["q"], fl["k"], fl["v"], fl["g"], fl["beta"])
        (fo.float() * do.float()).sum().backward()
        fla_grads = {"dq": fl["q"].grad, "dk": fl["k"].grad, "dv": fl["v"].grad, "dg": fl["g"].grad,
                     "dbeta": fl["beta"].grad}
    except Exception as e:  # noqa: BLE001
        info.append(f"FLA default: {type(e).__name__}: {e}")
        fla_grads = None
    check("fla-default", [leaves[n] for n in ("q", "k", "v", "g", "beta")],
          ["dq", "dk", "dv", "dg", "dbeta"], None, want, fla_grads)

    # kda.layers' training call: the softplus gate in kernel, state_v_first
    # without states, the same dense batch.
    z = dict(q=r(B, T, H, K).bfloat16(), k=r(B, T, H, K).bfloat16(), v=r(B, T, HV, V).bfloat16(),
             g=r(B, T, HV, K).bfloat16(), beta=r(B, T, HV).bfloat16(),
             A_log=torch.log(torch.rand(HV, generator=gen, device="cuda") * 15 + 1), dt_bias=r(HV * K) * 0.5)
    leaves = {n: t.detach().clone().requires_grad_(True) for n, t in z.items()}
    kw = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
              state_v_first=True)
    o, _ = kda.chunk_kda(leaves["q"], leaves["k"], leaves["v"], leaves["g"], leaves["beta"],
                         A_log=leaves["A_log"], dt_bias=leaves["dt_bias"], **kw)
    # The output gradient as a view 2 bytes into a buffer (not 16-byte
    # aligned, as the gradient's kernels read d_o): chunk_kda copies it.
    buf = torch.empty(do.numel() + 1, dtype=do.dtype, device="cuda")
    do_view = buf[1:].view(do.shape)
    do_view.copy_(do)
    if do_view.data_ptr() % 16 == 0:
        problems.append("layer: the misaligned d_o view is aligned after all (the case tests nothing)")
    o.backward(do_view)
    want = oracle.gated_delta_grad(npf(z["q"]), npf(z["k"]), npf(z["v"]), npf(z["g"]), npf(z["beta"]),
                                   None, None, npf(z["A_log"]), npf(z["dt_bias"]), do=npf(do),
                                   qk_l2norm=True, beta_activation="sigmoid", gate_activation="softplus")
    # FLA's on the same inputs, where it imports: its error against the oracle says how much of
    # kda's (dA_log near its bar since the thirty-eighth session) the inputs' conditioning explains.
    fla_grads = None
    try:
      if fla_chunk_kda is not None:
        fl = {n: t.detach().clone().requires_grad_(True) for n, t in z.items()}
        fo, _ = fla_chunk_kda(fl["q"], fl["k"], fl["v"], fl["g"], fl["beta"], A_log=fl["A_log"],
                              dt_bias=fl["dt_bias"], **kw)
        fo.backward(do)
        fla_grads = {"dq": fl["q"].grad, "dk": fl["k"].grad, "dv": fl["v"].grad, "dg": fl["g"].grad,
                     "dbeta": fl["beta"].grad, "dA_log": fl["A_log"].grad, "ddt_bias": fl["dt_bias"].grad}
    except Exception as e:  # noqa: BLE001
        info.append(f"FLA layer: {type(e).__name__}: {e}")
        fla_grads = None
    check("layer", [leaves[n] for n in ("q", "k", "v", "g", "beta", "A_log", "dt_bias")],
          ["dq", "dk", "dv", "dg", "dbeta", "dA_log", "ddt_bias"], None, want, fla_grads)
    return problems, "; ".join(info)


# ---------------------------------------------------------------------------

def rel_rmse(a, b):
    a, b = a.double(), b.double()
    return float(((a - b).norm() / b.norm().clamp_min(1e-30)).item())


def inputs(torch, B, T, seed, H=HEADS, K=HEAD_DIM, device="cuda"):
    gen = torch.Generator(device=device).manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, device=device)  # noqa: E731
    return dict(q=r(B, T, H, K).bfloat16(), k=r(B, T, H, K).bfloat16(), v=r(B, T, H, K).bfloat16(),
                g=r(B, T, H, K).bfloat16(), beta=r(B, T, H).bfloat16(),
                A_log=torch.log(torch.rand(H, generator=gen, device=device) * 15 + 1),
                dt_bias=r(H * K) * 0.5)


GATE = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
            state_v_first=True)
HYBRID_GATE = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True)


def part_opcheck(torch, kda):
    x = inputs(torch, 1, 300, 1)
    cu = torch.tensor([0, 120, 300], dtype=torch.int32, device="cuda")
    problems = []
    args = (x["q"], x["k"], x["v"], x["g"], x["beta"], x["A_log"], x["dt_bias"], None, None, True,
            True, True, True, False, None, True, cu, None, False)
    checks = ("test_schema", "test_faketensor")
    for name, op, a in (
            ("chunk_kda", torch.ops.kda.chunk_kda, args),
            ("fused_recurrent_kda", torch.ops.kda.fused_recurrent_kda, args[:-2])):
        try:
            torch.library.opcheck(op, a, test_utils=checks)
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
    d = inputs(torch, 3, 1, 2)
    pool = torch.randn(6, HEADS, HEAD_DIM, HEAD_DIM, device="cuda")
    idx = torch.tensor([4, 0, 2], dtype=torch.int32, device="cuda")
    try:
        torch.library.opcheck(torch.ops.kda.decode_kda,
                              (d["q"], d["k"], d["v"], d["g"], d["beta"], d["A_log"], d["dt_bias"], None, pool,
                               idx, None, None, True, True, True, False, None, True, None),
                              test_utils=checks)
    except Exception as e:  # noqa: BLE001
        problems.append(f"decode_kda: {type(e).__name__}: {str(e)[:300]}")
    w = inputs(torch, 2, 100, 3, K=64)
    try:
        torch.library.opcheck(torch.ops.kda.window_attention, (w["q"], w["k"], w["v"], 32, None, None),
                              test_utils=checks)
    except Exception as e:  # noqa: BLE001
        problems.append(f"window_attention: {type(e).__name__}: {str(e)[:300]}")
    # Per-position windows: the op with window_sizes (window 0), and sizes all
    # 32 give the one-window result.
    sizes = torch.full((100,), 32, dtype=torch.int32, device="cuda")
    try:
        torch.library.opcheck(torch.ops.kda.window_attention, (w["q"], w["k"], w["v"], 0, None, None, sizes),
                              test_utils=checks)
        o_pos = torch.ops.kda.window_attention(w["q"], w["k"], w["v"], 0, None, None, sizes)
        o_one = torch.ops.kda.window_attention(w["q"], w["k"], w["v"], 32, None, None)
        err = (o_pos.float() - o_one.float()).abs().max().item()
        if err > 1e-2:
            problems.append(f"window_attention window_sizes = 32 everywhere differs from window 32 by {err:.3g}")
    except Exception as e:  # noqa: BLE001
        problems.append(f"window_attention window_sizes: {type(e).__name__}: {str(e)[:300]}")
    return problems, "4 ops: schema, fake tensors (window_attention with and without window_sizes)"


def part_compile(torch, kda):
    import torch._dynamo

    def step(x, cu, d, pool, idx, w):
        o, ht = kda.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"],
                              dt_bias=x["dt_bias"], output_final_state=True, cu_seqlens=cu, **GATE)
        od, pool_out = kda.fused_recurrent_kda(d["q"], d["k"], d["v"], d["g"], d["beta"], d["A_log"],
                                               d["dt_bias"], initial_state=pool, ssm_state_indices=idx, **GATE)
        ow = kda.window_attention(w["q"], w["k"], w["v"], 32)
        return o.float() * 2.0, ht, od + 1, ow * 0.5, pool_out

    x = inputs(torch, 1, 300, 4)
    cu = torch.tensor([0, 120, 300], dtype=torch.int32, device="cuda")
    d = inputs(torch, 3, 1, 5)
    w = inputs(torch, 2, 100, 6, K=64)
    pool0 = torch.randn(6, HEADS, HEAD_DIM, HEAD_DIM, device="cuda")
    idx = torch.tensor([4, 0, 2], dtype=torch.int32, device="cuda")
    torch._dynamo.reset()
    counts = torch._dynamo.utils.counters
    counts.clear()
    compiled = torch.compile(step, fullgraph=True)
    pool_c = pool0.clone()
    with torch.no_grad():
        got = compiled(x, cu, d, pool_c, idx, w)
        pool_e = pool0.clone()
        ref = step(x, cu, d, pool_e, idx, w)
    problems = []
    names = ("o*2", "ht", "decode o+1", "window o/2", "pool")
    for n, a, b in zip(names, got, ref):
        if not torch.equal(a, b):
            problems.append(f"{n}: compiled differs from eager (max |d| {float((a.float() - b.float()).abs().max())})")
    if not torch.equal(pool_c, pool_e):
        problems.append("the compiled decode did not update the pool as the eager one")
    breaks = sum(counts["graph_break"].values())
    if breaks:
        problems.append(f"{breaks} graph breaks: {dict(counts['graph_break'])}")
    return problems, "fullgraph, bit-exact against eager"


def part_graph_decode(torch, kda):
    N, P = 3, 6
    static = inputs(torch, N, 1, 7)
    pool = torch.randn(P, HEADS, HEAD_DIM, HEAD_DIM, device="cuda")
    idx = torch.tensor([4, 0, 2], dtype=torch.int32, device="cuda")

    def call():
        o, _ = kda.fused_recurrent_kda(static["q"], static["k"], static["v"], static["g"], static["beta"],
                                       static["A_log"], static["dt_bias"], initial_state=pool,
                                       ssm_state_indices=idx, **GATE)
        return o

    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            call()  # warm-up: loads the bundle
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o_static = call()
        problems = []
        for step in range(3):
            new = inputs(torch, N, 1, 100 + step)
            for key in ("q", "k", "v", "g", "beta"):
                static[key].copy_(new[key])
            before = pool.clone()
            graph.replay()
            torch.cuda.synchronize()
            after = pool.clone()
            pool.copy_(before)
            o_ref, _ = kda.fused_recurrent_kda(new["q"], new["k"], new["v"], new["g"], new["beta"],
                                               static["A_log"], static["dt_bias"], initial_state=pool,
                                               ssm_state_indices=idx, **GATE)
            if not torch.equal(o_static, o_ref):
                problems.append(f"step {step}: replayed o differs from an eager call")
            if not torch.equal(after, pool):
                problems.append(f"step {step}: replayed pool differs from an eager call")
            pool.copy_(after)
    return problems, "3 replays, bit-exact"


def part_graph_prefill(torch, kda):
    B, T = 2, 100
    static = inputs(torch, B, T, 8)
    h0 = torch.randn(B, HEADS, HEAD_DIM, HEAD_DIM, device="cuda") * 0.1

    def call(x, h):
        return kda.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
                             initial_state=h, output_final_state=True, **GATE)

    problems = []
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            call(static, h0)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o_static, ht_static = call(static, h0)
        for step in range(2):
            new = inputs(torch, B, T, 200 + step)
            for key in ("q", "k", "v", "g", "beta"):
                static[key].copy_(new[key])
            h0.normal_().mul_(0.1)
            graph.replay()
            # the graph's A_log and dt_bias are the static ones (only the activations change)
            o_ref, ht_ref = call(dict(new, A_log=static["A_log"], dt_bias=static["dt_bias"]), h0)
            torch.cuda.synchronize()
            if not torch.equal(o_static, o_ref) or not torch.equal(ht_static, ht_ref):
                problems.append(f"replay {step}: differs from an eager call")
    return problems, "2 replays, bit-exact"


def with_env(name, value, fn):
    """fn() with the environment variable `name` set to `value`, restored after."""
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        return fn()
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


def part_pieces(torch, kda):
    """Pipelined pieces (kda.tune.shape_policy_pieces; KDA_PIECES=P sets the count): one dense sequence's
    intra-chunk kernel piece by piece on the caller's stream, the state kernel of each piece on a
    high-priority stream beside the next piece's. The outputs and final states must be those of one
    piece, bit for bit: with and without initial and final states, a length no piece count divides,
    more pieces asked for than the sequence has chunks, and the call captured in a CUDA graph and
    replayed on new inputs."""
    problems, seen = [], []

    def call(x, h, ht):
        return kda.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
                             initial_state=h, output_final_state=ht, **GATE)

    def with_pieces(p, fn):
        return with_env("KDA_PIECES", str(p), fn)

    def same(what, a, b):
        for name, x, y in (("o", a[0], b[0]), ("final state", a[1], b[1])):
            if (x is None) != (y is None) or (x is not None and not torch.equal(x, y)):
                err = (x.float() - y.float()).abs().max().item() if x is not None and y is not None else None
                problems.append(f"{what}: {name} differs from one piece's (max |diff| {err})")

    saved = os.environ.get("KDA_PIECES_GRAPH")
    os.environ["KDA_PIECES_GRAPH"] = "0"  # the eager schedule first; the graph form (the default) last
    saved_fast, kda.ops._Fast.use_pieces = kda.ops._Fast.use_pieces, True  # the fast path checked here
    try:
        return _pieces_checks(torch, kda, problems, seen, call, with_pieces, same)
    finally:
        kda.ops._Fast.use_pieces = saved_fast
        if saved is None:
            os.environ.pop("KDA_PIECES_GRAPH", None)
        else:
            os.environ["KDA_PIECES_GRAPH"] = saved


def _pieces_checks(torch, kda, problems, seen, call, with_pieces, same):
    with torch.no_grad():
        for T, pieces, states in ((1000, 4, True), (1000, 3, False), (70, 8, True)):
            x = inputs(torch, 1, T, 700 + T)
            h = torch.randn(1, HEADS, HEAD_DIM, HEAD_DIM, device="cuda") * 0.1 if states else None
            ref = with_pieces(1, lambda: call(x, h, states))
            got = with_pieces(pieces, lambda: call(x, h, states))
            seen.append(kda.ops.last_launch.pieces)
            again = with_pieces(pieces, lambda: call(x, h, states))  # the planned call
            fast = with_pieces(pieces, lambda: call(x, h, states))  # its fast path (kda.ops._Fast.of_pieces)
            torch.cuda.synchronize()
            same(f"T={T}, {pieces} pieces{'' if states else ', no states'}", ref, got)
            same(f"T={T}, {pieces} pieces, planned", ref, again)
            same(f"T={T}, {pieces} pieces, the fast path", ref, fast)
        # The planned call's prepared launches on other tensors of the same shape (new pointers).
        x = inputs(torch, 1, 1000, 790)
        h = torch.randn(1, HEADS, HEAD_DIM, HEAD_DIM, device="cuda") * 0.1
        ref = with_pieces(1, lambda: call(x, h, True))
        got = with_pieces(4, lambda: call(x, h, True))
        torch.cuda.synchronize()
        same("T=1000, 4 pieces, a planned call on new tensors", ref, got)
        runs = [p.pieces_run for p in kda.ops._chunk_plans.values() if p.pieces_run is not None]
        if not runs or any(r.run is None for r in runs):
            problems.append(f"pieces planned without the runtime's handle (kda_prepare_pieces): {len(runs)} runs")
        # Every planned pieces call of fp32 states (or none) took the fast path, one kda_launch_pieces.
        slow = [k for k, p in kda.ops._chunk_plans.items() if p.pieces_run is not None
                and (p.fast is None or p.fast.pieces != len(p.pieces_run.starts))]
        if slow:
            problems.append(f"{len(slow)} planned pieces calls without their fast path")
        # A CUDA graph of a pieces call, replayed on new inputs.
        x = inputs(torch, 1, 1000, 801)
        h = torch.randn(1, HEADS, HEAD_DIM, HEAD_DIM, device="cuda") * 0.1

        def capture():
            call(x, h, True)  # warm: the plan, the bundle, the side stream
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = call(x, h, True)
            return g, out

        def replayed(what, seed):
            """A 4-piece call captured in a CUDA graph, replayed on new inputs: one piece's result, bit for bit."""
            g, out = with_pieces(4, capture)
            fresh = inputs(torch, 1, 1000, seed)
            for n in x:
                x[n].copy_(fresh[n])
            g.replay()
            torch.cuda.synchronize()
            same(what, with_pieces(1, lambda: call(x, h, True)), out)
        replayed("CUDA graph of 4 pieces, replayed on new inputs", 802)
        # The runtime's pieces as one graph of their own (the default; KDA_PIECES_GRAPH=0 above is eager):
        # built at the first call, its nodes' pointers set anew on new tensors, and under a caller's capture
        # the eager launches.
        os.environ.pop("KDA_PIECES_GRAPH", None)
        for seed in (810, 811, 812):
            x = inputs(torch, 1, 1000, seed)
            ref = with_pieces(1, lambda: call(x, h, True))
            got = with_pieces(4, lambda: call(x, h, True))
            torch.cuda.synchronize()
            same(f"T=1000, 4 pieces as one graph (seed {seed})", ref, got)
        replayed("4 pieces as one graph, captured by the caller and replayed", 813)
    if seen != [4, 3, 5]:
        problems.append(f"last_launch.pieces: expected [4, 3, 5] (5: the chunks of T=70), got {seen}")
    return problems, f"pieces {seen}, bit-exact against one piece (eager and as one graph), CUDA graph replayed"


def hybrid_call(kda, x):
    """The test hybrid layer (gated per head, the Kimi prologue, W = 64) on inputs x."""
    return kda.hybrid_attention(x["q"], x["k"], x["v"], x["g"], x["beta"], x["z"], window=64,
                                A_log=x["A_log"], dt_bias=x["dt_bias"], **HYBRID_GATE)


def hybrid_inputs(torch, seed):
    """One sequence of 1000 tokens of the hybrid layer's inputs, z per head."""
    x = inputs(torch, 1, 1000, seed)
    x["z"] = torch.randn(1, 1000, HEADS, generator=torch.Generator(device="cuda").manual_seed(seed),
                         device="cuda").bfloat16()
    return x


def hybrid_graph_replays(torch, call, reference, seed):
    """Captures call(x) on the hybrid inputs of `seed` in a CUDA graph (after a warm call), replays it
    on the inputs of seed + 1 copied into x, and says whether its output is reference(x) bit for bit."""
    x = hybrid_inputs(torch, seed)
    call(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = call(x)
    fresh = hybrid_inputs(torch, seed + 1)
    for n in x:
        x[n].copy_(fresh[n])
    g.replay()
    torch.cuda.synchronize()
    ref = reference(x)
    torch.cuda.synchronize()
    return torch.equal(ref, out)


def part_hybrid(torch, kda):
    """The hybrid layer's entry (kda.hybrid_attention) in the schedule kda.tune.hybrid_schedule gives
    this shape (the mix in the window's epilogue; KDA_HYBRID_SCHEDULE=overlap: the window beside the
    state pass, then the mix kernel): the entry's schedule gives the one-stream
    fallback's output (KDA_ENTRY_STREAMS=0) bit for bit, eagerly and captured in a CUDA graph replayed on
    new inputs (the side stream joins the caller's capture through the events)."""
    problems = []

    def call(x):
        return hybrid_call(kda, x)

    def one_stream(fn):
        return with_env("KDA_ENTRY_STREAMS", "0", fn)

    with torch.no_grad():
        for seed in (900, 901):
            x = hybrid_inputs(torch, seed)
            ref = one_stream(lambda: call(x))
            got = call(x)
            torch.cuda.synchronize()
            if not torch.equal(ref, got):
                problems.append(f"seed {seed}: the entry's schedule differs from one stream (max |diff| "
                                f"{(ref.float() - got.float()).abs().max().item()})")
        kinds = [v.get("kernel") for v in (kda.ops.last_launch.strategy or {}).values()]
        if kinds not in (["intra", "state", "window"], ["intra", "state", "window", "elementwise"]):
            problems.append(f"the layer's launches: {kinds}, expected intra, state, the window (with the mix, "
                            "or a mix kernel after)")
        if not hybrid_graph_replays(torch, call, lambda x: one_stream(lambda: call(x)), 902):
            problems.append("CUDA graph of the layer, replayed on new inputs: differs from an eager call")
    return problems, f"{'+'.join(kinds)}; bit-exact against one stream, CUDA graph replayed"


def part_hybrid_pieces(torch, kda):
    """The hybrid layer in pipelined pieces (kda.tune.hybrid_pieces; here KDA_HYBRID_PIECES=3 on
    T = 1000: pieces of 336, 336 and 328 tokens), each piece's window over earlier keys after its
    state pass: the runtime's graph gives its eager schedule's output (KDA_PIECES_GRAPH=0) bit for
    bit, a caller's CUDA graph replayed on new inputs gives an eager call's, and one piece (its
    state pass in other V blocks) agrees within SPEC's bf16 bar."""
    problems = []

    def call(x):
        return hybrid_call(kda, x)

    def pieces(fn):
        return with_env("KDA_HYBRID_PIECES", "3", fn)

    with torch.no_grad():
        x = hybrid_inputs(torch, 910)
        got = pieces(lambda: call(x))
        ran = getattr(kda.ops.last_launch, "pieces", 1)
        if ran != 3:
            problems.append(f"pieces: {ran} ran, 3 asked for")
        eager = with_env("KDA_PIECES_GRAPH", "0", lambda: pieces(lambda: call(x)))
        one = with_env("KDA_HYBRID_PIECES", "1", lambda: call(x))
        torch.cuda.synchronize()
        if not torch.equal(got, eager):
            problems.append(f"the pieces as one graph differ from their eager schedule (max |diff| "
                            f"{(got.float() - eager.float()).abs().max().item()})")
        rmse = ((got.float() - one.float()).norm() / one.float().norm()).item()
        if not rmse <= 5e-3:
            problems.append(f"pieces against one piece: relative RMSE {rmse:.3e} (bar 5e-3)")
        in_pieces = lambda x: pieces(lambda: call(x))  # noqa: E731
        if not hybrid_graph_replays(torch, in_pieces, in_pieces, 910):
            problems.append("CUDA graph of the layer in pieces, replayed on new inputs: differs from an eager call")
    return problems, f"3 pieces; graph = eager bit for bit; against one piece {rmse:.2e}; CUDA graph replayed"


def part_planned(torch, kda):
    """kda.ops' host path for repeated shapes (issue 22): the second call of a
    shape makes the plan's fast path, later calls take it. Their results must
    be bit-exact against unplanned calls of the same inputs, with two shapes
    interleaved on one stream without synchronizing (the kept workspace grows
    from the smaller to the larger and is reused by both), and on a second
    stream (its own workspace)."""
    shapes = [(2, 100), (1, 300)]  # the graph-prefill bundle (T and B are dynamic)
    sets = [(s, inputs(torch, *s, 400 + i), torch.randn(s[0], HEADS, HEAD_DIM, HEAD_DIM, device="cuda") * 0.1)
            for i, s in enumerate(shapes * 3)]

    def call(x, h):
        return kda.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
                             initial_state=h, output_final_state=True, **GATE)

    problems = []
    with torch.no_grad():
        refs = []
        for _, x, h in sets:
            kops._chunk_plans.clear()  # every reference call unplanned
            refs.append(call(x, h))
        kops._chunk_plans.clear()
        kops.release_workspaces()
        torch.cuda.synchronize()
        got = [call(x, h) for _, x, h in sets]  # per shape: unplanned, planned, fast
        got += [call(x, h) for _, x, h in sets]  # all fast
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            got_side = [call(x, h) for _, x, h in sets]
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        fast = [p for p in kops._chunk_plans.values() if p.fast is not None]
        if len(kops._chunk_plans) != 2 or len(fast) != 2:
            problems.append(f"expected 2 plans with fast paths, got {len(kops._chunk_plans)} plans, "
                            f"{len(fast)} fast")
        from kda.runtime import load_library
        if hasattr(load_library(), "kda_prepare") and any(p.fast.prepared is None for p in fast):
            problems.append("a fast path without a prepared launch (kda_prepare)")
        keys = sorted(kops._workspaces)
        if len(keys) != 2:
            problems.append(f"expected one kept workspace per stream (2), got {keys}")
        need = max(p.nbytes or 0 for p in kops._chunk_plans.values())
        small = [w.numel() for w in kops._workspaces.values() if w.numel() < need]
        if small:
            problems.append(f"a kept workspace is smaller than the largest call's {need} bytes: {small}")
        if kops.last_launch.strategy in (None, {}) or any(
                s.get("kind") != "lanes" for s in kops.last_launch.strategy.values()):
            problems.append(f"last_launch.strategy after a fast call: {kops.last_launch.strategy}")
        for i, (ref, a, b, c) in enumerate(zip(refs, got, got[len(sets):], got_side)):
            for what, out in (("interleaved", a), ("fast", b), ("side stream", c)):
                if not (torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])):
                    problems.append(f"call {i} ({sets[i][0]}), {what}: differs from the unplanned call")
        kops.release_workspaces()
        if kops._workspaces:
            problems.append("release_workspaces() kept some")
    return problems, f"{len(sets)} inputs x 3 ways, bit-exact against unplanned calls"


# ---------------------------------------------------------------------------
# The layer against FLA's

def part_cp(torch, kda):
    """Context parallelism simulated in one process against the oracle and one whole call."""
    import numpy as np
    import oracle
    from kda import cp
    problems, info = [], []
    K = V = HEAD_DIM
    gen = torch.Generator(device="cuda").manual_seed(27)
    r = lambda *s: torch.randn(*s, generator=gen, device="cuda")  # noqa: E731
    kw = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
              lower_bound=-5.0)
    for label, seqlens, ranks in (("one sequence, 2 ranks", [4096], 2),
                                  ("one sequence, 4 ranks", [4096], 4),
                                  ("packed, some cross", [1000, 37, 2000, 963], 4)):
        T = sum(seqlens)
        x = dict(q=r(1, T, CP_H, K).bfloat16(), k=r(1, T, CP_H, K).bfloat16(), v=r(1, T, CP_HV, V).bfloat16(),
                 g=r(1, T, CP_HV, K).bfloat16(), beta=r(1, T, CP_HV).bfloat16(),
                 A_log=torch.log(torch.rand(CP_HV, generator=gen, device="cuda") * 15 + 1),
                 dt_bias=r(CP_HV * K) * 0.5)
        cu = torch.tensor([0] + list(np.cumsum(seqlens)), dtype=torch.int32, device="cuda")
        with torch.inference_mode():
            o_cp, ctxs = cp.simulate(x["q"], x["k"], x["v"], x["g"], x["beta"], cu.tolist(), ranks,
                                     A_log=x["A_log"], dt_bias=x["dt_bias"], state_v_first=True, **kw)
            o_one, _ = kda.chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], cu_seqlens=cu,
                                     A_log=x["A_log"], dt_bias=x["dt_bias"], state_v_first=True, **kw)
            torch.cuda.synchronize()
        npf = lambda t: t.double().cpu().numpy()  # noqa: E731
        want, _ = oracle.gated_delta(npf(x["q"]), npf(x["k"]), npf(x["v"]), npf(x["g"]), npf(x["beta"]),
                                     cu_seqlens=cu.cpu().numpy(), A_log=npf(x["A_log"]),
                                     dt_bias=npf(x["dt_bias"]), state_layout="v_major", qk_l2norm=True,
                                     beta_activation="sigmoid", gate_activation="lower_bound", lower_bound=-5.0)
        err = oracle.relative_rmse(npf(o_cp), np.reshape(want, tuple(o_cp.shape)))
        err_one = oracle.relative_rmse(npf(o_one), np.reshape(want, tuple(o_one.shape)))
        between = rel_rmse(o_cp, o_one)
        pre = [c.pre_num_ranks for c in ctxs]
        info.append(f"{label}: {err:.1e} (one call {err_one:.1e}; pre {pre})")
        if not err <= KERNEL_BAR:
            problems.append(f"{label}: o relative RMSE {err:.3e} against the oracle, bar {KERNEL_BAR:g}")
        if not between <= KERNEL_BAR:
            problems.append(f"{label}: o {between:.3e} from one chunk_kda call on the whole batch")
    # The public call: chunk_kda(cp_context=...) with the simulated gather of one rank's context.
    try:
        kda.chunk_kda(x["q"][:, :10], x["k"][:, :10], x["v"][:, :10], x["g"][:, :10], x["beta"][:, :10],
                      cp_context=ctxs[0], cu_seqlens=cu, **kw)
        problems.append("cp_context with cu_seqlens was accepted")
    except ValueError as e:
        if "cp_context.cu_seqlens" not in str(e):
            problems.append(f"cp_context with cu_seqlens: {e}")
    return problems, "; ".join(info)


def fla_layer_class(fla_dir):
    if fla_dir:
        sys.path.insert(0, fla_dir)
    from fla.layers.kda import KimiDeltaAttention as FlaKDA
    return FlaKDA


class OracleOps:
    """kda.layers' kernel calls answered by the float64 oracle (test/oracle): the float64 layer
    (the same module in float64) that SPEC's bars are measured against."""

    def __init__(self, torch, oracle, like_kernels=False):
        # like_kernels: outputs in the kernels' dtypes (o in q's, states fp32), for the bf16 layer
        self.torch, self.oracle, self.like_kernels = torch, oracle, like_kernels

    def chunk_kda(self, q, k, v, g, beta, A_log=None, dt_bias=None, initial_state=None,
                  output_final_state=False, use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                  use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, lower_bound=None,
                  state_v_first=False, cu_seqlens=None, **unused):
        torch = self.torch
        n = lambda t: None if t is None else t.detach().double().cpu().numpy()  # noqa: E731
        o, ht = self.oracle.gated_delta(
            n(q), n(k), n(v), n(g), n(beta), initial_state=n(initial_state),
            cu_seqlens=None if cu_seqlens is None else cu_seqlens.cpu().numpy(),
            A_log=n(A_log) if use_gate_in_kernel else None, dt_bias=n(dt_bias) if use_gate_in_kernel else None,
            state_layout="v_major" if state_v_first else "k_major", qk_l2norm=use_qk_l2norm_in_kernel,
            beta_activation=("sigmoid_neg_eigval" if allow_neg_eigval else "sigmoid")
            if use_beta_sigmoid_in_kernel else "none",
            gate_activation=("softplus" if lower_bound is None else "lower_bound") if use_gate_in_kernel else "none",
            lower_bound=-5.0 if lower_bound is None else lower_bound)
        o = torch.from_numpy(o).to(q.device)
        ht = torch.from_numpy(ht).to(q.device) if output_final_state else None
        if self.like_kernels:
            o = o.to(q.dtype)
            ht = None if ht is None else ht.float()
        return o, ht

    fused_recurrent_kda = chunk_kda


def float64_layer(torch, kda, layer, exact=True):
    """layer's float64 twin (exact): the same weights (bf16 values, exact in float64) and the oracle
    for its kernels. exact=False: the bf16 layer itself with the oracle for its kernels (their outputs
    rounded as the kernels round them): what it gives apart from the layer is the kernels' error alone,
    the error SPEC's bars are about."""
    import copy
    import oracle
    twin = copy.deepcopy(layer).double() if exact else layer
    ops = OracleOps(torch, oracle, like_kernels=not exact)

    def run(*args, **kwargs):
        saved = kda.layers._ops
        kda.layers._ops = ops
        try:
            return twin(*args, **kwargs)
        finally:
            kda.layers._ops = saved
    return run


def copy_cache(kda, cache, dtype=None):
    """A copy of a cache (in `dtype`: float64 for the float64 layer)."""
    out = kda.layers.Cache()
    conv = lambda c: c.clone() if dtype is None else c.to(dtype)  # noqa: E731
    for i, st in enumerate(cache.states):
        out.update(recurrent_state=conv(st["recurrent_state"]),
                   conv_state=None if st["conv_state"] is None else tuple(conv(c) for c in st["conv_state"]),
                   layer_idx=i, offset=0)
    return out


def make_layers(torch, kda, FlaKDA, seed):
    torch.manual_seed(seed)
    ref = FlaKDA(hidden_size=HIDDEN, head_dim=HEAD_DIM, num_heads=HEADS, layer_idx=0).cuda()
    mine = kda.layers.KimiDeltaAttention(hidden_size=HIDDEN, head_dim=HEAD_DIM, num_heads=HEADS,
                                         layer_idx=0).cuda()
    with torch.no_grad():  # FLA initialises the norm to ones and g_proj's bias to zeros: make them count
        for p in ref.parameters():
            if p.dim() == 1 and p.numel() == HEAD_DIM:
                p.uniform_(0.5, 1.5)
    mine.load_state_dict(ref.state_dict(), strict=True)
    ref, mine = ref.bfloat16().eval(), mine.bfloat16().eval()
    # both keep A_log and dt_bias in the module's dtype; kda hands them to its kernels in fp32
    return ref, mine


def compare(problems, what, got, want, bar=LAYER_BAR):
    if got is None or want is None:
        if (got is None) != (want is None):
            problems.append(f"{what}: {'missing' if got is None else 'unexpected'}")
        return 0.0
    if tuple(got.shape) != tuple(want.shape):
        problems.append(f"{what}: shape {list(got.shape)}, FLA's {list(want.shape)}")
        return float("inf")
    e = rel_rmse(got.float(), want.float())
    if not (e <= bar):
        problems.append(f"{what}: relative RMSE {e:.2e} > {bar}")
    return e


def part_layer_state_dict(torch, kda, FlaKDA):
    ref, mine = make_layers(torch, kda, FlaKDA, 0)
    problems = []
    a, b = ref.state_dict(), mine.state_dict()
    if sorted(a) != sorted(b):
        problems.append(f"parameter names differ: FLA only {sorted(set(a) - set(b))}, kda only {sorted(set(b) - set(a))}")
    for n in a:
        if n in b and tuple(a[n].shape) != tuple(b[n].shape):
            problems.append(f"{n}: FLA {list(a[n].shape)}, kda {list(b[n].shape)}")
    try:
        ref.load_state_dict(mine.state_dict(), strict=True)
    except Exception as e:  # noqa: BLE001
        problems.append(f"FLA's layer does not load kda's state dict: {e}")
    return problems, f"{len(a)} tensors, both ways"


def measure(problems, errs, what, got, kernels, exact=None, fla=None, fla_exact=None):
    """kda's bf16 layer output against: the same layer with the oracle as its kernels (SPEC's bf16
    bar: the kernels' error through the layer), FLA's layer (1e-2: two bf16 layers), and the float64
    twin (no worse than FLA's layer is from it, with 10 % slack)."""
    errs["kernels"].append(compare(problems, f"{what} (kda's kernels vs the oracle, in the layer)", got, kernels,
                                   bar=KERNEL_BAR))
    if fla is not None:
        errs["fla"].append(compare(problems, f"{what} (kda vs FLA)", got, fla))
    if exact is not None:
        e = compare([], "", got, exact, bar=1)
        errs["exact"].append(e)
        if fla_exact is not None:
            f = compare([], "", fla_exact, exact, bar=1)
            errs["fla_exact"].append(f)
            if e > 1.1 * f:
                problems.append(f"{what}: kda's layer is {e:.2e} from the float64 twin, FLA's {f:.2e}")


def summary(errs):
    out = f"kernels vs oracle {max(errs['kernels']):.1e}"
    if errs["fla"]:
        out += f", vs FLA {max(errs['fla']):.1e}"
    if errs["exact"]:
        out += f", vs float64 {max(errs['exact']):.1e}"
    if errs["fla_exact"]:
        out += f" (FLA's {max(errs['fla_exact']):.1e})"
    return out


def new_errs():
    return {"kernels": [], "fla": [], "exact": [], "fla_exact": []}


def part_layer_varlen_decode(torch, kda, FlaKDA):
    """Prefill (two packed sequences) filling a cache, then three decode steps with it."""
    ref, mine = make_layers(torch, kda, FlaKDA, 1)
    exact = float64_layer(torch, kda, mine)
    oracle_kernels = float64_layer(torch, kda, mine, exact=False)
    problems, errs = [], new_errs()
    cu = torch.tensor([0, 120, 300], dtype=torch.int32, device="cuda")
    x = torch.randn(1, 300, HIDDEN, device="cuda").bfloat16()
    caches = {n: kda.layers.Cache() for n in ("fla", "kda", "oracle", "exact")}
    with torch.no_grad():
        o_ref, _, _ = ref(x, past_key_values=caches["fla"], use_cache=True, cu_seqlens=cu)
        o_mine, _, _ = mine(x, past_key_values=caches["kda"], use_cache=True, cu_seqlens=cu)
        o_orc, _, _ = oracle_kernels(x, past_key_values=caches["oracle"], use_cache=True, cu_seqlens=cu)
        o_64, _, _ = exact(x.double(), past_key_values=caches["exact"], use_cache=True, cu_seqlens=cu)
        measure(problems, errs, "prefill o", o_mine, o_orc, o_64, o_ref, o_ref.double())
        state = lambda n: caches[n][0]["recurrent_state"]  # noqa: E731
        measure(problems, errs, "prefill state", state("kda"), state("oracle"), fla=state("fla"))
        for i, (a, b) in enumerate(zip(caches["kda"][0]["conv_state"], caches["fla"][0]["conv_state"])):
            compare(problems, f"prefill conv state {'qkv'[i]} (kda vs FLA)", a, b, bar=1e-6)
        for step in range(3):
            xs = torch.randn(2, 1, HIDDEN, device="cuda").bfloat16()
            # the oracle layers decode from kda's own cache: one step's error, not the sum
            caches["oracle"] = copy_cache(kda, caches["kda"])
            caches["exact"] = copy_cache(kda, caches["kda"], torch.float64)
            o_64, _, _ = exact(xs.double(), past_key_values=caches["exact"], use_cache=True)
            o_orc, _, _ = oracle_kernels(xs, past_key_values=caches["oracle"], use_cache=True)
            o_ref, _, _ = ref(xs, past_key_values=caches["fla"], use_cache=True)
            o_mine, _, _ = mine(xs, past_key_values=caches["kda"], use_cache=True)
            measure(problems, errs, f"decode {step} o", o_mine, o_orc, fla=o_ref)
            measure(problems, errs, f"decode {step} state", state("kda"), state("oracle"))
    return problems, "prefill 120+180 tokens, 3 decode steps: " + summary(errs)


def part_layer_dense(torch, kda, FlaKDA):
    ref, mine = make_layers(torch, kda, FlaKDA, 2)
    problems, errs = [], new_errs()
    x = torch.randn(2, 100, HIDDEN, device="cuda").bfloat16()
    with torch.no_grad():
        o_ref, _, _ = ref(x)
        o_mine, _, _ = mine(x)
        o_orc, _, _ = float64_layer(torch, kda, mine, exact=False)(x)
        o_64, _, _ = float64_layer(torch, kda, mine)(x.double())
    measure(problems, errs, "o", o_mine, o_orc, o_64, o_ref, o_ref.double())
    return problems, "2 x 100 tokens: " + summary(errs)


def part_layer_mask(torch, kda, FlaKDA):
    ref, mine = make_layers(torch, kda, FlaKDA, 3)
    problems, errs = [], new_errs()
    x = torch.randn(2, 150, HIDDEN, device="cuda").bfloat16()
    mask = torch.ones(2, 150, dtype=torch.int64, device="cuda")
    mask[0, :40] = 0  # left padding
    with torch.no_grad():
        o_ref, _, _ = ref(x, attention_mask=mask)
        o_mine, _, _ = mine(x, attention_mask=mask)
        o_orc, _, _ = float64_layer(torch, kda, mine, exact=False)(x, attention_mask=mask)
    keep = mask.bool()
    measure(problems, errs, "o kept", o_mine[keep], o_orc[keep], fla=o_ref[keep])
    if not torch.equal(o_mine[~keep], torch.zeros_like(o_mine[~keep])):
        problems.append("padding positions are not zero")
    return problems, "110 + 150 tokens, left padding: " + summary(errs)


def two_layer_model(torch, kda, seed):
    torch.manual_seed(seed)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(
                kda.layers.KimiDeltaAttention(hidden_size=HIDDEN, head_dim=HEAD_DIM, num_heads=HEADS, layer_idx=i)
                for i in range(2))

        def forward(self, x, cu_seqlens=None, past_key_values=None, use_cache=False):
            for layer in self.layers:
                x = x + layer(x, cu_seqlens=cu_seqlens, past_key_values=past_key_values, use_cache=use_cache)[0]
            return x

    return Model().cuda().bfloat16().eval()


def part_compile_model(torch, kda):
    """torch.compile(fullgraph=True) of two KimiDeltaAttention layers: packed prefill, and a decode step
    with a cache; the outputs against eager."""
    import copy
    import torch._dynamo
    model = two_layer_model(torch, kda, 4)
    problems, notes = [], []
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    cu = torch.tensor([0, 120, 300], dtype=torch.int32, device="cuda")
    x = torch.randn(1, 300, HIDDEN, device="cuda").bfloat16()
    with torch.no_grad():
        for backend in ("aot_eager", "inductor"):
            torch._dynamo.reset()
            compiled = torch.compile(model, fullgraph=True, backend=backend)
            got, want = compiled(x, cu_seqlens=cu), model(x, cu_seqlens=cu)
            if backend == "aot_eager":
                if not torch.equal(got, want):
                    problems.append("aot_eager prefill differs from eager")
            else:
                e = rel_rmse(got.float(), want.float())
                notes.append(f"inductor prefill rel RMSE {e:.1e}")
                if e > 2e-3:
                    problems.append(f"inductor prefill: rel RMSE {e:.1e} against eager")
        # decode with a cache: prefill eagerly, then one step compiled and one eager from copies
        cache = kda.layers.Cache()
        model(x, cu_seqlens=cu, past_key_values=cache, use_cache=True)
        xs = torch.randn(2, 1, HIDDEN, device="cuda").bfloat16()
        c1, c2 = copy.deepcopy(cache), copy.deepcopy(cache)
        torch._dynamo.reset()
        step = torch.compile(model, fullgraph=True, backend="aot_eager")
        got = step(xs, past_key_values=c1, use_cache=True)
        want = model(xs, past_key_values=c2, use_cache=True)
        if not torch.equal(got, want):
            problems.append("compiled decode step (aot_eager) differs from eager")
        for i in range(2):
            if not torch.equal(c1[i]["recurrent_state"], c2[i]["recurrent_state"]):
                problems.append(f"compiled decode step: layer {i}'s state differs from eager")
    breaks = sum(counters["graph_break"].values())
    if breaks:
        problems.append(f"{breaks} graph breaks: {dict(counters['graph_break'])}")
    return problems, "two layers, fullgraph: prefill bit-exact (aot_eager), " + ", ".join(notes) + \
        "; decode step with a cache bit-exact"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--print-configs", action="store_true")
    ap.add_argument("--fla", default=os.environ.get("KDA_FLA_DIR", ""),
                    help="a directory holding flash-linear-attention's fla package (default: KDA_FLA_DIR, "
                         "then the path)")
    ap.add_argument("-k", dest="filter", default="")
    args = ap.parse_args()
    if args.print_configs:
        print(json.dumps(configs(), indent=1, sort_keys=True))
        return 0
    try:
        import torch
    except ImportError:
        print("SKIP: no CUDA GPU (torch is not installed)")
        return 0
    if not torch.cuda.is_available():
        print("SKIP: no CUDA GPU")
        return 0
    import kda
    import kda.layers  # noqa: F401
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}; custom ops registered: "
          f"{kda.ops._traced is not None}", flush=True)
    parts = [("opcheck", part_opcheck), ("compile", part_compile), ("graph-decode", part_graph_decode),
             ("graph-prefill", part_graph_prefill), ("planned", part_planned), ("pieces", part_pieces),
             ("hybrid", part_hybrid), ("hybrid-pieces", part_hybrid_pieces),
             ("compile-model", part_compile_model), ("cp", part_cp),
             ("grad", lambda torch, kda: part_grad(torch, kda, args.fla))]
    layer_parts = [("layer-state-dict", part_layer_state_dict), ("layer-varlen-decode", part_layer_varlen_decode),
                   ("layer-dense", part_layer_dense), ("layer-mask", part_layer_mask)]
    failed = passed = skipped = 0
    try:
        FlaKDA = fla_layer_class(args.fla)
        fla_error = None
    except Exception as e:  # noqa: BLE001
        FlaKDA, fla_error = None, f"{type(e).__name__}: {e}"
    for name, fn in parts + layer_parts:
        if args.filter not in name:
            continue
        if name.startswith("layer") and FlaKDA is None:
            print(f"SKIP {name:22s} flash-linear-attention's layer does not import: {fla_error}")
            skipped += 1
            continue
        t0 = time.time()
        try:
            problems, info = fn(torch, kda, FlaKDA) if name.startswith("layer") else fn(torch, kda)
        except Exception as e:  # noqa: BLE001
            problems, info = [f"{type(e).__name__}: {e}" + (
                "\n" + traceback.format_exc() if os.environ.get("KDA_TEST_TRACEBACK") else "")], ""
        status = "PASS" if not problems else "FAIL"
        print(f"{status} {name:22s} {info} ({time.time() - t0:.1f}s)" +
              "".join(f"\n    {p}" for p in problems), flush=True)
        passed += not problems
        failed += bool(problems)
    print(f"summary: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
