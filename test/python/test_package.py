#!/usr/bin/env python3
"""CI test of the pure-Python parts of the kda package (python/kda): no GPU,
no torch, no numpy; python3 and the build's tools only.

    test_package.py --kda-opt BIN [--tmp DIR]                       # part "pure"
    test_package.py --bundles --kda-compile BIN --runtime LIB --tmp DIR
    test_package.py --entries --runtime LIB --fake-driver LIB [--tmp DIR]
    test_package.py --layer --kda-compile BIN --runtime LIB --fake-driver LIB [--tmp DIR]

Part "pure" (always): importing kda pulls in neither torch nor numpy; the
MLIR generated for many configurations (gated_delta, decode_step with dynamic
heads, window_attention) parses and verifies with kda-opt; the FLA-compatible
argument validation raises the documented ValueError / NotImplementedError
before touching torch; a missing bundle's BundleNotFoundError names the
kda-compile command, and a failing compiler's CompileError its output.

Part "bundles" (needs kda-compile, i.e. ptxas): compiles a decode_step, a
window_attention and a gated_delta bundle through the package's own cache
path, loads them with libkda_runtime.so through kda.runtime, and runs
kda_check_tensors on fake tensor descriptions (good ones, and bad shapes,
dtypes, strides, alignment), which needs no driver.

Part "entries" (needs only libkda_runtime.so and the unit tests' fake CUDA
driver, runtime/FakeDriver.cpp): a hand-written version 2 bundle whose entry
runs two kernels through a workspace; kda.runtime lists the entry where ops.py
looks for kernel names, checks and launches it by name (the fake driver
records the stream-ordered allocation, both launches in order and the free),
sizes its workspace, and launches it on a caller-owned workspace.

Part "layer" (needs kda-compile, libkda_runtime.so and the fake driver): a
hybrid layer's bundle (kda.ops.hybrid_attention's configuration) has the
layer's entry kda_hybrid, which the runtime loads and runs in one call: one
workspace, the gated delta rule's two kernels, the window's, the mix's.

Prints one line per check and "ALL OK"; exits 1 on the first failure.
"""

from __future__ import annotations

import argparse
import json
import shutil
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# --installed: the package as pip installed it (its own libkda_runtime.so),
# not the repository's python/ directory.
INSTALLED = "--installed" in sys.argv
if not INSTALLED:
    sys.path.insert(0, os.path.join(ROOT, "python"))

_checks = 0


def check(cond, what):
    global _checks
    if not cond:
        print(f"FAIL: {what}", flush=True)
        sys.exit(1)
    _checks += 1


def raises(exc, fn, *args, contains=(), what="", **kwargs):
    """fn(*args, **kwargs) must raise exc whose message contains every string in contains."""
    try:
        fn(*args, **kwargs)
    except exc as e:
        msg = str(e)
        for c in ([contains] if isinstance(contains, str) else contains):
            check(c in msg, f"{what}: message {msg!r} lacks {c!r}")
        print(f"ok   {what}: {type(e).__name__}: {msg.splitlines()[0][:110]}")
        return e
    except Exception as e:  # the wrong exception type
        check(False, f"{what}: expected {exc.__name__}, got {type(e).__name__}: {e}")
    check(False, f"{what}: expected {exc.__name__}, nothing raised")


class Meta:
    """What kda's validation reads from a tensor: .shape and .dtype."""

    def __init__(self, shape, dtype="bfloat16"):
        self.shape, self.dtype = tuple(shape), dtype


class Valued(Meta):
    """A description that also has values, as a tensor's .max() reads them."""

    def __init__(self, shape, largest, dtype="bfloat16"):
        super().__init__(shape, dtype)
        self.largest = largest

    def max(self):
        return self.largest


class FakeTensor(Meta):
    """A tensor description for kda_check_tensors: no memory behind it."""

    _next = 0x7f0000000000

    def __init__(self, shape, dtype, strides=None, ptr=None, device=0):
        super().__init__(shape, dtype)
        if strides is None:
            strides, acc = [], 1
            for s in reversed(self.shape):
                strides.insert(0, acc)
                acc *= max(s, 1)
        self._strides = tuple(strides)
        if ptr is None:
            FakeTensor._next += 1 << 20
            ptr = FakeTensor._next
        self._ptr, self.device = ptr, device

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._ptr


# ---------------------------------------------------------------------------
# Part "pure"
# ---------------------------------------------------------------------------

def configs():
    from kda import bundles as b
    out = []
    for dt in ("bf16", "f32", "f16"):
        for KV in (64, 128):
            out.append(b.gated_delta_config(K=KV, V=KV, qk_dtype=dt, v_dtype=dt,
                                            gate={"form": "channel", "dtype": dt}, beta_dtype=dt))
    out += [
        b.gated_delta_config(K=128, V=128, qk_dtype="bf16", v_dtype="bf16", gate={"form": "channel", "dtype": "f32"},
                             beta_dtype="bf16", qk_l2norm=True, beta_activation="sigmoid",
                             gate_activation="lower_bound", lower_bound=-5.0, A_log_dtype="f32",
                             dt_bias_dtype="f32", initial_state_dtype="f32", final_state_dtype="f32",
                             state_layout="v_major", cu_seqlens_dtype="i64", chunk=64),
        b.gated_delta_config(K=64, V=32, qk_dtype="f32", v_dtype="f32", gate={"form": "head", "dtype": "f32"},
                             beta_dtype="f32", gate_activation="softplus", A_log_dtype="f32", dt_bias_dtype="f32",
                             scale=0.3, final_state_dtype="f32", cu_seqlens_dtype="i32", chunk=16),
        b.gated_delta_config(K=64, V=64, qk_dtype="bf16", v_dtype="bf16", update="additive",
                             gate={"form": "channel", "dtype": "bf16"}),
        # chunk-boundary states (prefix caching): FLA's h in bf16, an fp32 interval with varlen
        b.gated_delta_config(K=128, V=128, qk_dtype="bf16", v_dtype="bf16", gate={"form": "channel", "dtype": "f32"},
                             beta_dtype="bf16", final_state_dtype="f32", boundary_interval=64,
                             boundary_dtype="bf16"),
        b.gated_delta_config(K=64, V=64, qk_dtype="bf16", v_dtype="bf16", gate={"form": "channel", "dtype": "bf16"},
                             beta_dtype="bf16", initial_state_dtype="f32", state_layout="v_major",
                             cu_seqlens_dtype="i32", boundary_interval=32),
        b.gated_delta_config(K=128, V=128, qk_dtype="bf16", v_dtype="bf16", gate={"form": "channel", "dtype": "f32"},
                             beta_dtype="bf16", state_layout="v_major", initial_state_dtype="f32",
                             cu_seqlens_dtype="i64", boundary_interval=64, boundary_dtype="bf16",
                             boundary_indices_dtype="i32"),
    ]
    # The derived gradient of gated_delta configurations (kda.ops' autograd):
    # Kimi's prologue with varlen and states, head-wise gates, fp32.
    for fwd in (out[6], out[7], out[10]):
        for dht in (False, True):
            out.append(b.gated_delta_grad_config(fwd, d_final_state=dht))
    out.append(b.gated_delta_grad_config(out[0]))
    for dt in ("bf16", "f32"):
        for KV in (64, 128):
            for layout in ("k_major", "v_major"):
                out.append(b.decode_step_config(K=KV, V=KV, qk_dtype=dt, v_dtype=dt,
                                                gate={"form": "channel", "dtype": dt}, beta_dtype=dt,
                                                state_layout=layout))
                out.append(b.decode_step_config(K=KV, V=KV, qk_dtype=dt, v_dtype=dt,
                                                gate={"form": "channel", "dtype": "f32"}, beta_dtype=dt,
                                                qk_l2norm=True, beta_activation="sigmoid",
                                                gate_activation="lower_bound", lower_bound=-5.0,
                                                A_log_dtype="f32", dt_bias_dtype="f32", state_layout=layout,
                                                indices_dtype="i64"))
    out.append(b.decode_step_config(K=64, V=64, qk_dtype="f32", v_dtype="f32", gate={"form": "head", "dtype": "f32"},
                                    beta_dtype="f32", gate_activation="softplus", A_log_dtype="f32",
                                    dt_bias_dtype="f32", scale=0.25))
    for dt in ("bf16", "f32"):
        for w, cu in ((1, None), (64, "i64"), (4096, "i32")):
            out.append(b.window_attention_config(K=128, V=128, qk_dtype=dt, v_dtype=dt, window=w,
                                                 cu_seqlens_dtype=cu))
    out.append(b.window_attention_config(K=64, V=32, qk_dtype="f16", v_dtype="f16", window=7, scale=0.3))
    # Per-position windows (window_sizes), dense and varlen.
    out.append(b.window_attention_config(K=64, V=64, qk_dtype="bf16", v_dtype="bf16", window=0,
                                         window_sizes_dtype="i32"))
    out.append(b.window_attention_config(K=128, V=128, qk_dtype="f16", v_dtype="f16", window=0,
                                         window_sizes_dtype="i64", cu_seqlens_dtype="i64"))
    # Earlier keys (k and v longer than q), per op and per position.
    out.append(b.window_attention_config(K=128, V=128, qk_dtype="bf16", v_dtype="bf16", window=512,
                                         earlier_keys=True))
    out.append(b.window_attention_config(K=64, V=64, qk_dtype="bf16", v_dtype="bf16", window=0,
                                         window_sizes_dtype="i32", earlier_keys=True))
    return out


def part_pure(kda_opt, tmp):
    import kda
    from kda import bundles as b
    from kda import ops
    check("torch" not in sys.modules and "numpy" not in sys.modules, "import kda pulls in torch or numpy")
    print("ok   import kda: no torch, no numpy")

    # Generated MLIR parses and verifies; decode and window modules keep every head count dynamic.
    cfgs = configs()
    names = set()
    for i, cfg in enumerate(cfgs):
        text = b.to_mlir(cfg)
        if cfg["op"] in ("decode_step", "window_attention"):
            sig = text.split("func.func", 1)[1].split("{", 1)[0]
            for arg in sig.split("%")[1:]:
                name, ty = arg.split(":", 1)
                if name in ("q", "k", "v", "g", "beta", "o_init", "state_pool"):
                    dims = ty.split("<", 1)[1].split(">", 1)[0].split("x")
                    heads = dims[2] if cfg["op"] == "window_attention" else dims[1]
                    check(heads == "?", f"{b.describe(cfg)}: %{name} has a static head count: {ty.strip()}")
        path = os.path.join(tmp, f"cfg{i}.mlir")
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.run([kda_opt, path, "-o", os.devnull], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        check(p.returncode == 0, f"kda-opt rejects the module of [{b.describe(cfg)}]:\n{text}\n{p.stdout}")
        names.add(b.bundle_name(cfg, "sm_90a"))
        # the configuration survives its JSON form
        check(b.load_config(b.dump_config(cfg)) == cfg, f"config JSON round trip: {cfg}")
    check(len(names) == len(cfgs), "two configurations share a bundle name")
    print(f"ok   kda-opt parses and verifies the modules of {len(cfgs)} configurations")

    # Decode bundles do not depend on head counts; the default scale has one spelling.
    bf = "bfloat16"

    def dec(H, HV, P=10, N=3, **kw):
        return ops.fused_recurrent_kda_config(
            Meta((N, 1, H, 128), bf), Meta((N, 1, H, 128), bf), Meta((N, 1, HV, 128), bf),
            Meta((N, 1, HV, 128), bf), Meta((N, 1, HV), bf), initial_state=Meta((P, HV, 128, 128), "float32"),
            ssm_state_indices=Meta((N,), "int32"), **kw)
    check(dec(1, 1) == dec(4, 16, P=100, N=7), "decode configurations differ by head count")
    check(dec(2, 2) == dec(2, 2, scale=128 ** -0.5), "the default scale makes a separate decode bundle")
    check(dec(2, 2) != dec(2, 2, scale=0.5), "a non-default scale shares the default's bundle")
    check("H" not in dec(2, 2) and "HV" not in dec(2, 2), "decode configuration holds head counts")
    w = ops.window_attention_config(Meta((2, 9, 8, 64)), Meta((2, 9, 2, 64)), Meta((2, 9, 2, 64)), 16)
    check(w == ops.window_attention_config(Meta((1, 3, 1, 64)), Meta((1, 3, 1, 64)), Meta((1, 3, 1, 64)), 16),
          "window configurations differ by batch, length or head count")
    print("ok   one decode / window bundle for every batch, length and head count")

    # FLA-compatible validation, through the public entry points (no torch needed to fail).
    B, T, H, HV, K, V = 2, 10, 2, 4, 64, 64
    q, v = Meta((B, T, H, K)), Meta((B, T, HV, V))
    g, beta = Meta((B, T, HV, K)), Meta((B, T, HV))
    raises(ValueError, kda.chunk_kda, q, q, Meta((B, T, 3, V)), Meta((B, T, 3, K)), Meta((B, T, 3)),
           contains="num_v_heads (HV=3) must be evenly divisible by num_qk_heads (H=2)", what="chunk_kda GVA")
    raises(ValueError, kda.chunk_kda, q, Meta((B, T, H, 32)), v, g, beta, contains="q and k must have the same shape",
           what="chunk_kda k shape")
    raises(ValueError, kda.chunk_kda, q, q, v, Meta((B, T, HV)), beta, contains="g must have shape [B, T, HV, K]",
           what="chunk_kda g shape")
    raises(NotImplementedError, kda.chunk_kda, q, q, v, g, Meta((B, T, HV, V)), contains="vector beta",
           what="chunk_kda vector beta")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, cu_seqlens=Meta((3,), "int64"),
           contains="The batch size is expected to be 1 rather than 2 when using `cu_seqlens`",
           what="chunk_kda cu_seqlens with B > 1")
    q1, v1, g1, b1 = Meta((1, T, H, K)), Meta((1, T, HV, V)), Meta((1, T, HV, K)), Meta((1, T, HV))
    raises(ValueError, kda.chunk_kda, q1, q1, v1, g1, b1, cu_seqlens=Meta((4,), "int64"),
           initial_state=Meta((2, HV, K, V), "float32"),
           contains="The number of initial states is expected to be equal to the number of input sequences, "
                    "i.e., 3 rather than 2", what="chunk_kda initial states vs cu_seqlens")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, initial_state=Meta((B, HV, K, V), "bfloat16"),
           contains="initial_state must be in float32", what="chunk_kda initial_state dtype")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, allow_neg_eigval=True,
           contains="`allow_neg_eigval=True` requires `use_beta_sigmoid_in_kernel=True`",
           what="chunk_kda allow_neg_eigval")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, use_gate_in_kernel=True,
           contains="`A_log` must be provided when `use_gate_in_kernel=True` and `lower_bound` is not set",
           what="chunk_kda gate without A_log")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, use_gate_in_kernel=True, safe_gate=True,
           A_log=Meta((HV,), "float32"),
           contains="`lower_bound` must be specified when `safe_gate=True` and `use_gate_in_kernel=True`",
           what="chunk_kda safe_gate")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, use_gate_in_kernel=True, lower_bound=-6.0,
           contains="`lower_bound` must be in [-5, 0)", what="chunk_kda lower_bound range")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, use_gate_in_kernel=True, A_log=Meta((H,), "float32"),
           contains="A_log: expected 4 values", what="chunk_kda A_log size")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, chunk_size=48, contains="`chunk_size` must be 16, 32 or 64",
           what="chunk_kda chunk_size")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, return_intermediate_states=True, boundary_interval=64,
           contains="not both", what="chunk_kda intermediate states and an interval")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, boundary_interval=0,
           contains="positive number of tokens", what="chunk_kda boundary_interval 0")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, boundary_interval=24,
           contains="boundary_interval 24 must be a multiple of the chunk 16", what="chunk_kda boundary_interval 24")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, boundary_interval=32, chunk_size=64,
           contains="boundary_interval 32 must be a multiple of the chunk 64", what="chunk_kda interval vs chunk")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, boundary_interval=64,
           boundary_state_indices=Meta((B, 3), "int32"), contains="go together", what="chunk_kda table without pool")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, boundary_state_indices=Meta((B, 3), "int32"),
           boundary_states=Meta((9, HV, K, V), "float32"), contains="needs a boundary_interval",
           what="chunk_kda table without interval")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, boundary_interval=64,
           boundary_state_indices=Meta((B + 1, 3), "int32"), boundary_states=Meta((9, HV, K, V), "float32"),
           contains="boundary_state_indices: expected [N, NB]", what="chunk_kda table rows")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, boundary_interval=64,
           boundary_state_indices=Meta((B, 3), "int32"), boundary_states=Meta((9, HV + 1, K, V), "float32"),
           contains="boundary_states: expected a pool", what="chunk_kda pool heads")
    pcfg = ops.chunk_kda_config(q, q, v, g, beta, boundary_interval=64, boundary_indices_dtype="i64")
    check(pcfg["boundary_indices_dtype"] == "i64" and "boundary_indices(" in b.to_mlir(pcfg),
          "pool-form configuration and module")
    bcfg = ops.chunk_kda_config(q, q, v, g, beta, boundary_interval=64, boundary_dtype="bf16")
    check(bcfg["boundary_interval"] == 64 and bcfg["boundary_dtype"] == "bf16"
          and "boundary_interval" not in ops.chunk_kda_config(q, q, v, g, beta),
          "boundary keys in the configuration only when asked for")
    print("ok   chunk_kda boundary states: configuration and errors")

    # The gradient's configuration (chunk_kda's autograd): it reads the
    # forward's kept states in their layout, so a state_v_first call without
    # states keeps v_major through its boundary states (a configuration
    # without states says k_major: the gradient would read V-major states as
    # K-major, a silent wrong answer at K = V).
    class M:
        def __init__(self, shape, dtype):
            self.shape, self.dtype = tuple(shape), dtype
    qm, bm = M((2, 64, 4, 128), "bf16"), M((2, 64, 4), "bf16")
    fwd = ops.chunk_kda_config(qm, qm, qm, qm, bm, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                               use_beta_sigmoid_in_kernel=True, state_v_first=True, A_log=M((4,), "f32"),
                               dt_bias=M((512,), "f32"), boundary_interval=ops.GRAD_CHUNK)
    opts = dict(scale=None, output_final_state=False, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                use_beta_sigmoid_in_kernel=True, allow_neg_eigval=False, safe_gate=False, lower_bound=None,
                state_v_first=True, cu_seqlens_cpu=None)
    grad = ops.chunk_kda_grad_config(qm, qm, qm, qm, bm, None, M((4,), "f32"), M((512,), "f32"), None, opts)
    check(fwd["state_layout"] == "v_major" and grad["state_layout"] == "v_major",
          f"gradient of a state_v_first call: layouts {fwd['state_layout']}, {grad['state_layout']}")
    check(grad == b.gated_delta_grad_config(fwd, chunk=ops.GRAD_CHUNK),
          "the autograd's gradient configuration is the one of the forward it keeps states with")
    check("states_interval = 16" in b.to_mlir(grad), "the gradient's module reads states every 16 tokens")
    raises(ValueError, b.gated_delta_grad_config, b.gated_delta_config(
        K=64, V=64, qk_dtype="bf16", v_dtype="bf16", update="additive", gate={"form": "channel", "dtype": "bf16"}),
        contains=("delta rule",), what="the additive rule's gradient")
    raises(ValueError, b.gated_delta_grad_config, b.decode_step_config(
        K=64, V=64, qk_dtype="bf16", v_dtype="bf16", gate={"form": "channel", "dtype": "bf16"}, beta_dtype="bf16"),
        contains=("gated_delta configuration",), what="a decode configuration's gradient")
    # Kept states in bf16 (KDA_GRAD_STATES=bf16): the forward writes them so and
    # the gradient reads them so; f32, the default, names no dtype (its
    # configurations keep their keys).
    check("chunk_states_dtype" not in grad, "f32 kept states add no key to the gradient's configuration")
    grad16 = ops.chunk_kda_grad_config(qm, qm, qm, qm, bm, None, M((4,), "f32"), M((512,), "f32"), None, opts,
                                       states_dtype="bf16")
    check(grad16.get("chunk_states_dtype") == "bf16" and "x128x128xbf16>" in b.to_mlir(grad16),
          "bf16 kept states: the gradient's module reads them as bf16")
    os.environ["KDA_GRAD_STATES"] = "f16"
    raises(ValueError, ops.grad_states_dtype, contains="KDA_GRAD_STATES", what="a kept-states dtype kda has not")
    del os.environ["KDA_GRAD_STATES"]
    print("ok   chunk_kda gradient: its configuration reads the forward's states in their layout and dtype")
    # The gradients of q, k, v, g and beta come in their inputs' dtypes (the
    # kernels convert on their stores: no cast after the call); the gate
    # parameters' and the state's in f32; grads_dtype="f32" takes f32 for all
    # and names no key (its configurations keep their hashes).
    mod = b.to_mlir(grad)
    head = mod[mod.index("-> ("):mod.index(") {")]
    check(grad.get("grads_dtype") == "input"
          and head.count("x128xbf16>") == 4 and head.count("tensor<?x?x?xbf16>") == 1
          and "tensor<?xf32>" in head and "tensor<?x128xf32>" in head,
          f"the gradient's results in the inputs' dtypes: {head}")
    grad32 = b.gated_delta_grad_config(fwd, chunk=ops.GRAD_CHUNK, grads_dtype="f32")
    mod32 = b.to_mlir(grad32)
    check("grads_dtype" not in grad32 and "bf16" not in mod32[mod32.index("-> ("):mod32.index(") {")],
          "grads_dtype='f32': every gradient f32, no key")
    raises(ValueError, b.gated_delta_grad_config, fwd, grads_dtype="f16", contains="grads_dtype",
           what="a gradient dtype policy kda has not")
    print("ok   chunk_kda gradient: the gradients of q, k, v, g and beta in their inputs' dtypes")
    raises(TypeError, kda.chunk_kda, q, q, v, g, beta, bogus=1, contains="bogus", what="chunk_kda unknown kwarg")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, boundary_dtype="bf16", contains="boundary_interval",
           what="chunk_kda boundary_dtype without boundary states")
    raises(ValueError, kda.chunk_kda, q, q, v, g, beta, boundary_interval=16, boundary_dtype="f16",
           contains="'f32' or 'bf16'", what="chunk_kda boundary_dtype kda does not keep")
    raises(ValueError, kda.Bundle, "bundles/a\0b", contains="contains a NUL character",
           what="bundle path with a NUL")
    # SPEC.md's log-space gates are <= 0; a positive one is computed as the recurrence says
    # (every kernel is exact for any finite gate), with no per-call check (a host sync).
    check(ops.chunk_kda_config(q, q, v, Valued((B, T, HV, K), 0.5), beta)["gate"]["form"] == "channel",
          "a positive log-space gate is not refused")
    check(ops.chunk_kda_config(q, q, v, Valued((B, T, HV, K), 3.0), beta, use_gate_in_kernel=True,
                               A_log=Meta((HV,), "float32"))["gate_activation"] == "softplus",
          "raw gates (use_gate_in_kernel) are held to the log-space rule")
    raises(ValueError, kda.chunk_kda, q, q, Meta((B, T, HV, 0)), g, beta, contains="V must be at least 1",
           what="chunk_kda V = 0")
    raises(ValueError, kda.chunk_kda, Meta((B, T, 0, K)), Meta((B, T, 0, K)), v, g, beta,
           contains="H must be at least 1", what="chunk_kda H = 0")
    raises(TypeError, kda.chunk_kda, Meta((B, T, H, K), "float64"), q, v, g, beta, contains="float64",
           what="chunk_kda dtype")
    raises(ValueError, kda.fused_recurrent_kda, q, q, v, g, beta, use_gate_in_kernel=True,
           contains="`A_log` must be provided", what="fused_recurrent_kda gate without A_log")
    raises(ValueError, kda.fused_recurrent_kda, q, q, v, g, beta, cu_seqlens=Meta((3,), "int64"),
           contains="The batch size is expected to be 1 rather than 2", what="fused_recurrent_kda cu_seqlens, B > 1")
    raises(ValueError, kda.fused_recurrent_kda, q, q, v, g, beta, num_accepted_tokens=Meta((2,), "int32"),
           contains="needs 2-D ssm_state_indices", what="fused_recurrent_kda num_accepted_tokens without indices")

    # Decode on a state pool (ssm_state_indices).
    N, P = 3, 8
    dq, dv, dg, db = Meta((N, 1, H, K)), Meta((N, 1, HV, V)), Meta((N, 1, HV, K)), Meta((N, 1, HV))
    pool, idx = Meta((P, HV, K, V), "float32"), Meta((N,), "int32")
    raises(ValueError, kda.fused_recurrent_kda, dq, dq, dv, dg, db, ssm_state_indices=idx,
           contains="pass the pool as initial_state", what="decode without a pool")
    # The decode step is one token of the recurrence, exact for any gate: no
    # log-space check there (it would cost a host sync per step).
    cfg = kda.ops.fused_recurrent_kda_config(dq, dq, dv, Valued((N, 1, HV, K), 1e-3), db, initial_state=pool,
                                             ssm_state_indices=idx)
    check(cfg["op"] == "decode_step", f"decode with a positive log-space gate: config {cfg}")
    # Read one slot, write another: the read slots' dtype is part of the
    # configuration (and only then: the in-place form hashes as before).
    rw = kda.ops.fused_recurrent_kda_config(dq, dq, dv, dg, db, initial_state=pool, ssm_state_indices=idx,
                                            read_state_indices=Meta((N,), "int64"))
    check(rw.get("read_indices_dtype") == "i64" and "read_indices_dtype" not in cfg,
          f"decode read_state_indices: configs {rw} / {cfg}")
    check("read_indices(%read_indices : tensor<?xi64>)" in kda.bundles.to_mlir(rw),
          "decode read_state_indices: the generated module names read_indices")
    raises(ValueError, kda.ops.fused_recurrent_kda_config, dq, dq, dv, dg, db, initial_state=pool,
           ssm_state_indices=idx, read_state_indices=Meta((N + 1,), "int32"),
           contains="read_state_indices: expected one slot per sequence", what="decode read_state_indices count")
    raises(ValueError, kda.fused_recurrent_kda, dq, dq, dv, dg, db, initial_state=pool,
           read_state_indices=idx, contains="it needs ssm_state_indices", what="read_state_indices alone")
    raises(ValueError, kda.fused_recurrent_kda, dq, dq, dv, dg, db, initial_state=pool,
           ssm_state_indices=Meta((N + 1,), "int32"), contains="ssm_state_indices: expected one index per token",
           what="decode indices count")
    raises(ValueError, kda.fused_recurrent_kda, Meta((N, 2, H, K)), Meta((N, 2, H, K)), Meta((N, 2, HV, V)),
           Meta((N, 2, HV, K)), Meta((N, 2, HV)), initial_state=pool, ssm_state_indices=Meta((2 * N,), "int32"),
           contains="several tokens per sequence take ssm_state_indices [N, T]", what="decode T > 1, 1-D indices")
    raises(ValueError, kda.fused_recurrent_kda, Meta((1, N, H, K)), Meta((1, N, H, K)), Meta((1, N, HV, V)),
           Meta((1, N, HV, K)), Meta((1, N, HV)), initial_state=pool, ssm_state_indices=idx,
           cu_seqlens=Meta((3,), "int64"), contains="cu_seqlens must have N + 1 = 4 entries",
           what="decode cu_seqlens count")
    raises(ValueError, kda.fused_recurrent_kda, dq, dq, Meta((N, 1, HV, 32)), dg, db,
           initial_state=Meta((P, HV, K, 32), "float32"), ssm_state_indices=idx, state_v_first=True,
           contains="[P, HV, V, K] = [P, 4, 32, 64], got [8, 4, 64, 32]", what="decode pool layout")
    raises(ValueError, kda.fused_recurrent_kda, dq, dq, dv, dg, db, initial_state=Meta((P, H, K, V), "float32"),
           ssm_state_indices=idx, contains="got [8, 2, 64, 64]", what="decode pool heads")
    raises(ValueError, kda.fused_recurrent_kda, dq, dq, Meta((N, 1, 3, V)), Meta((N, 1, 3, K)), Meta((N, 1, 3)),
           initial_state=Meta((P, 3, K, V), "float32"), ssm_state_indices=idx,
           contains="num_v_heads (HV=3) must be evenly divisible", what="decode GVA")
    raises(ValueError, kda.fused_recurrent_kda, dq, dq, dv, dg, db, initial_state=pool, ssm_state_indices=idx,
           use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, A_log=Meta((HV,), "float32"),
           dt_bias=Meta((HV,), "float32"), contains="dt_bias: expected [HV * K] = 256 values",
           what="decode dt_bias size")
    # Several tokens per sequence: q [N, T, H, K], indices [N, T].
    mq, mv, mg, mb = Meta((N, 2, H, K)), Meta((N, 2, HV, V)), Meta((N, 2, HV, K)), Meta((N, 2, HV))
    mcfg = ops.fused_recurrent_kda_config(mq, mq, mv, mg, mb, initial_state=pool,
                                          ssm_state_indices=Meta((N, 2), "int32"))
    check(mcfg.get("multi_token") is True, f"decode 2-D indices: config {mcfg}")
    check("tensor<?x?x?x64x" in kda.bundles.to_mlir(mcfg) and "indices(%indices : tensor<?x?xi32>)"
          in kda.bundles.to_mlir(mcfg), "decode 2-D indices: the generated module has rank-4 q, [N, T] indices")
    raises(ValueError, kda.fused_recurrent_kda, mq, mq, mv, mg, mb, initial_state=pool,
           ssm_state_indices=Meta((N, 3), "int32"), contains="expected [N, T] = [3, 2]", what="decode 2-D indices shape")
    # vLLM's packed form (cu_seqlens, up to T tokens per sequence) runs as the padded [N, T] step:
    # the same configuration; a cu_seqlens of the wrong length is named.
    rq, rv, rg, rb = Meta((1, 5, H, K)), Meta((1, 5, HV, V)), Meta((1, 5, HV, K)), Meta((1, 5, HV))
    check(ops.fused_recurrent_kda_config(rq, rq, rv, rg, rb, initial_state=pool, cu_seqlens=Meta((N + 1,), "int64"),
                                         ssm_state_indices=Meta((N, 2), "int32")) == mcfg,
          "decode 2-D indices with cu_seqlens: the [N, T] configuration")
    raises(ValueError, kda.fused_recurrent_kda, rq, rq, rv, rg, rb, initial_state=pool,
           cu_seqlens=Meta((N + 2,), "int64"), ssm_state_indices=Meta((N, 2), "int32"),
           contains="expected cu_seqlens of N + 1 = 4 entries", what="decode 2-D indices with cu_seqlens length")
    raises(ValueError, kda.fused_recurrent_kda, mq, mq, mv, mg, mb, initial_state=pool,
           ssm_state_indices=Meta((N, 2), "int32"), num_accepted_tokens=Meta((N + 1,), "int32"),
           contains="num_accepted_tokens: expected [N]", what="decode num_accepted_tokens shape")
    cfg = ops.fused_recurrent_kda_config(dq, dq, dv, dg, db, initial_state=pool, ssm_state_indices=idx,
                                         use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                                         use_qk_l2norm_in_kernel=True, lower_bound=-5.0,
                                         A_log=Meta((HV,), "float32"), dt_bias=Meta((HV * K,), "float32"))
    check(cfg["op"] == "decode_step" and cfg["gate_activation"] == "lower_bound" and cfg["qk_l2norm"]
          and cfg["A_log_dtype"] == "f32" and cfg["indices_dtype"] == "i32", f"Kimi decode configuration: {cfg}")
    print("ok   Kimi decode configuration")
    # FLA's decode call without a pool (q [N, 1, H, K], a dense [N, HV, ...] initial state): the
    # decode step on the N states as slots, not the chunked forward; keeping no final state, a
    # read-only step (read indices, writes kept nowhere); keeping it, the caller's states are the
    # read pool and the final states a fresh pool (no copy before the step). Two tokens, or no
    # state: chunked.
    h0 = Meta((N, HV, V, K), "float32")
    seq = ops.fused_recurrent_kda_config(dq, dq, dv, dg, db, initial_state=h0, output_final_state=True,
                                         state_v_first=True)
    ro = ops.fused_recurrent_kda_config(dq, dq, dv, dg, db, initial_state=h0, output_final_state=False,
                                        state_v_first=True)
    check(seq["op"] == "decode_step" and seq["indices_dtype"] == "i32" and seq.get("read_indices_dtype") is None
          and seq.get("read_pool") is True and ro.get("read_pool") is None
          and ro["op"] == "decode_step" and ro["read_indices_dtype"] == "i32", f"per-sequence decode: {seq} {ro}")
    check("read_pool(%read_pool" in b.to_mlir(seq) and "read_pool" not in b.to_mlir(ro),
          "the read pool is an operand of the per-sequence decode step")
    try:
        ops.fused_recurrent_kda_config(dq, dq, dv, dg, db, initial_state=h0, state_v_first=True,
                                       ssm_state_indices=Meta((N,), "int32"),
                                       read_pool=Meta((N, HV + 1, V, K), "float32"))
        check(False, "a read pool with other heads was accepted")
    except ValueError as e:
        check("read_pool: expected [PR, HV, V, K]" in str(e), str(e))
    raises(ValueError, kda.fused_recurrent_kda, dq, dq, dv, dg, db, initial_state=h0, output_final_state=True,
           state_v_first=True, read_pool=h0, contains="read_pool is a decode step's second pool",
           what="read_pool without ssm_state_indices")
    tq = Meta((N, 2, H, K), "bfloat16")
    check(ops.fused_recurrent_kda_config(tq, tq, Meta((N, 2, HV, V), "bfloat16"), Meta((N, 2, HV, K), "bfloat16"),
                                         Meta((N, 2, HV), "bfloat16"), initial_state=h0, output_final_state=True,
                                         state_v_first=True)["op"] == "gated_delta"
          and ops.fused_recurrent_kda_config(dq, dq, dv, dg, db, output_final_state=True)["op"] == "gated_delta",
          "two tokens, or no initial state: the chunked forward")
    print("ok   per-sequence decode (FLA's call, no pool): the decode step on the states as slots")

    # Window attention.
    wq, wk = Meta((B, T, 8, K)), Meta((B, T, 2, K))
    raises(ValueError, kda.window_attention, wq, Meta((B, T, 3, K)), Meta((B, T, 3, V)), 4,
           contains="must be a multiple of HK = 3", what="window GQA grouping")
    raises(ValueError, kda.window_attention, wq, wk, Meta((B, T, 3, V)), 4, contains="HO = max(HQ, HV) = 8",
           what="window HV grouping")
    raises(ValueError, kda.window_attention, wq, wk, wk, 0, contains="window: expected an integer >= 1",
           what="window 0")
    raises(ValueError, kda.window_attention, wq, wk, wk, 2.5, contains="window: expected an integer >= 1",
           what="window 2.5")
    raises(ValueError, kda.window_attention, wq, Meta((B, T - 1, 2, K)), wk, 4, contains="k: expected [B, T, HK, K]",
           what="window k length")
    raises(ValueError, kda.window_attention, wq, Meta((B, T, 2, K), "float32"), wk, 4,
           contains="q and k must have the same dtype", what="window q/k dtype")
    raises(ValueError, kda.window_attention, wq, wk, wk, 4, cu_seqlens=Meta((3,), "int64"),
           contains="The batch size is expected to be 1 rather than 2", what="window cu_seqlens, B > 1")
    raises(ValueError, kda.window_attention, wq, wk, wk, 4, scale=-1.0, contains="scale", what="window scale")
    raises(ValueError, kda.window_attention, wq, wk, wk, 4, window_sizes=Meta((T,), "int32"),
           contains="exactly one of them", what="window and window_sizes")
    raises(ValueError, kda.window_attention, wq, wk, wk, window_sizes=Meta((T + 1,), "int32"),
           contains=f"window_sizes: expected [T] = [{T}]", what="window_sizes length")
    raises(ValueError, kda.window_attention, wq, wk, wk, window_sizes=Meta((T,), "float32"),
           contains="window_sizes: expected int32 or int64", what="window_sizes dtype")
    raises(ValueError, kda.window_attention, wq, wk, wk, contains="window: expected an integer >= 1",
           what="neither window nor window_sizes")
    ws = ops.window_attention_config(wq, wk, wk, None, window_sizes=Meta((T,), "int64"))
    check(ws["window"] == 0 and ws["window_sizes_dtype"] == "i64", f"per-position window config: {ws}")
    check("window_sizes_dtype" not in ops.window_attention_config(wq, wk, wk, 4),
          "a per-op window's configuration has no window_sizes_dtype (its hash is unchanged)")
    print("ok   per-position windows: configuration and argument checks")

    # Earlier keys: k and v with S > T rows (the queries the last T of them).
    ek = ops.window_attention_config(Meta((2, 9, 4, 64)), Meta((2, 40, 2, 64)), Meta((2, 40, 2, 64)), 16)
    check(ek.get("earlier_keys") is True and "earlier_keys" in b.describe(ek)
          and "earlier_keys}" in b.to_mlir(ek) and "tensor<?x?x?x64xbf16>" in b.to_mlir(ek),
          f"earlier keys configuration: {ek}")
    check("earlier_keys" not in ops.window_attention_config(wq, wk, wk, 4),
          "k as long as q: no earlier_keys key (its hash is unchanged)")
    raises(ValueError, ops.window_attention_config, Meta((2, 9, 4, 64)), Meta((2, 8, 2, 64)),
           Meta((2, 8, 2, 64)), 16, contains="or S > T rows", what="fewer keys than queries")
    raises(ValueError, ops.window_attention_config, Meta((2, 9, 4, 64)), Meta((2, 40, 2, 64)),
           Meta((2, 39, 2, 64)), 16, contains="v: expected [B, S, HV, V] = [2, 40, HV, V]", what="v rows")
    raises(ValueError, ops.window_attention_config, Meta((1, 9, 4, 64)), Meta((1, 40, 2, 64)),
           Meta((1, 40, 2, 64)), 16, cu_seqlens=Meta((3,), "int64"), contains="take dense sequences",
           what="earlier keys with cu_seqlens")
    raises(ValueError, b.window_attention_config, K=64, V=64, qk_dtype="bf16", v_dtype="bf16", window=8,
           cu_seqlens_dtype="i64", earlier_keys=True, contains="takes dense sequences",
           what="earlier keys config with cu_seqlens")
    print("ok   earlier keys: configuration and argument checks")

    # Configuration validation (kda.bundles).
    raises(ValueError, b.decode_step_config, K=64, V=64, qk_dtype="bf16", v_dtype="bf16", gate_activation="softplus",
           contains="gate_activation needs a gate tensor", what="decode config without gate")
    raises(ValueError, b.window_attention_config, K=64, V=64, qk_dtype="bf16", v_dtype="bf16", window=0,
           contains="window", what="window config 0")
    raises(ValueError, b.window_attention_config, K=64, V=64, qk_dtype="bf16", v_dtype="bf16", window=8,
           window_sizes_dtype="i32", contains="expected 0 with per-position", what="window with window_sizes")
    raises(ValueError, b.window_attention_config, K=64, V=64, qk_dtype="bf16", v_dtype="bf16", window=0,
           window_sizes_dtype="f32", contains="window_sizes_dtype", what="window_sizes dtype in config")
    raises(ValueError, b.load_config, json.dumps({"op": "nope"}), contains="op: unknown", what="load_config op")

    # Context parallelism (kda.cp): each rank's share of a packed batch, pure Python. One sequence
    # over 4 ranks: every rank but the first takes state from all before it, every rank but the last
    # hands it on; a packed batch where only some sequences cross ranks.
    from kda import cp
    P = cp.partition
    one = [P([0, 1000], 4, r) for r in range(4)]
    check([(x.rank_start, x.rank_end, x.local_cu_seqlens) for x in one] ==
          [(0, 250, [0, 250]), (250, 500, [0, 250]), (500, 750, [0, 250]), (750, 1000, [0, 250])],
          f"one sequence over 4 ranks: {one}")
    check([(x.pre_num_ranks, x.post_num_ranks) for x in one] == [(0, 3), (1, 2), (2, 1), (3, 0)] and
          [(x.is_first_rank, x.is_last_rank) for x in one] ==
          [(True, False), (False, False), (False, False), (False, True)], f"one sequence: {one}")
    packed = [P([0, 300, 700, 1000, 1200], 4, r) for r in range(4)]
    check([x.local_cu_seqlens for x in packed] == [[0, 300], [0, 300], [0, 100, 300], [0, 100, 300]],
          f"packed: {packed}")
    check([(x.pre_num_ranks, x.post_num_ranks) for x in packed] == [(0, 0), (0, 1), (1, 1), (1, 0)],
          f"packed: only [300, 700) and [700, 1000) cross ranks: {packed}")
    # Empty sequences (repeated offsets) are no one's; a sequence ending on a rank's last token
    # hands nothing on.
    check(P([0, 0, 100, 100, 200], 2, 1).local_cu_seqlens == [0, 100] and
          P([0, 0, 100, 100, 200], 2, 0).post_num_ranks == 0, "empty sequences and aligned ends")
    raises(ValueError, P, [0, 1001], 4, 0, contains=["1001", "multiple of the world size (4)"],
           what="cp: tokens not a multiple of the ranks")
    raises(ValueError, P, [0, 50, 40], 2, 0, contains="must start at 0 and not decrease",
           what="cp: decreasing offsets")
    raises(ValueError, P, [0, 8], 2, 2, contains="rank 2 of a world of 2", what="cp: rank out of range")
    check("torch" not in sys.modules, "kda.cp pulls in torch at import")
    print("ok   context parallelism: each rank's share of a packed batch")

    # Missing bundle, no compiler allowed: the message gives the MLIR and the exact command.
    env = dict(os.environ)
    try:
        os.environ["KDA_BUNDLE_PATH"] = os.path.join(tmp, "empty-a") + ":" + os.path.join(tmp, "empty-b")
        os.environ["KDA_CACHE_DIR"] = os.path.join(tmp, "cache")
        os.environ["KDA_NO_COMPILE"] = "1"
        cfg = dec(2, 4)
        name = b.bundle_name(cfg, "sm_90a")
        e = raises(b.BundleNotFoundError, b.get_bundle_dir, cfg, "sm_90a",
                   contains=[f"kda-compile {name}.mlir -o <DIR>/{name} --chip=sm_90a", "KDA_BUNDLE_PATH=<DIR>",
                             "kda.decode_step", os.path.join(tmp, "empty-a", name), "python3 -m kda.prebuild"],
                   what="missing bundle")
        check(name.startswith("decode_step-k128-v128-bf16-") and name.endswith(".sm_90a"), f"bundle name {name}")
        # The module in the message is the one kda-compile would get.
        check(b.to_mlir(cfg) in str(e), "missing-bundle message lacks the module")

        # A failing compiler: CompileError with the command and its output; nothing left behind.
        fake = os.path.join(tmp, "fake-kda-compile")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho 'kda-compile: error: something specific' >&2\nexit 1\n")
        os.chmod(fake, 0o755)
        out = os.path.join(tmp, "fail-out")
        raises(b.CompileError, b.compile_bundle, cfg, "sm_90a", out_root=out, compiler=fake,
               contains=["kda-compile failed for [decode_step", "something specific", fake], what="compile error")
        check(os.listdir(out) == [], f"a failed compile left {os.listdir(out)}")
    finally:
        os.environ.clear()
        os.environ.update(env)


# ---------------------------------------------------------------------------
# Part "bundles"
# ---------------------------------------------------------------------------

def part_bundles(kda_compile, runtime, tmp):
    from kda import bundles as b
    from kda import ops
    from kda.runtime import Bundle, KdaError
    os.environ["KDA_RUNTIME_LIBRARY"] = runtime
    os.environ["KDA_COMPILE"] = kda_compile
    cache = os.path.join(tmp, "bundles")
    os.environ["KDA_BUNDLE_PATH"] = cache
    os.environ["KDA_CACHE_DIR"] = os.path.join(tmp, "cache")
    os.environ.pop("KDA_NO_COMPILE", None)

    def F(shape, dtype, **kw):
        return FakeTensor(shape, dtype, **kw)

    def bad(bundle, kernel, tensors, contains, what):
        e = raises(KdaError, bundle.check, kernel, tensors, contains=contains, what=what)
        check(e.status == "KDA_ERROR_BAD_TENSOR", f"{what}: status {e.status}")

    # --- decode step, Kimi prologue, V-major pool, dynamic heads -------------
    N, P, H, HV, K = 3, 10, 2, 4, 128
    bf, f32 = "bfloat16", "float32"
    cfg = ops.fused_recurrent_kda_config(
        Meta((N, 1, H, K), bf), Meta((N, 1, H, K), bf), Meta((N, 1, HV, K), bf), Meta((N, 1, HV, K), f32),
        Meta((N, 1, HV), bf), A_log=Meta((HV,), f32), dt_bias=Meta((HV * K,), f32),
        initial_state=Meta((P, HV, K, K), f32), ssm_state_indices=Meta((N,), "int64"), state_v_first=True,
        use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, lower_bound=-5.0)
    path = b.get_bundle_dir(cfg, "sm_90a")
    check(os.path.dirname(path) == cache and os.path.basename(path) == b.bundle_name(cfg, "sm_90a"),
          f"bundle built at {path}")
    for f in ("manifest.json", "source.mlir", "config.json"):
        check(os.path.isfile(os.path.join(path, f)), f"{path} lacks {f}")
    check(b.get_bundle_dir(cfg, "sm_90a") == path, "the built bundle is not found again")
    print(f"ok   decode bundle built by kda-compile: {os.path.basename(path)}")
    bundle = Bundle(path)
    check(bundle.chip == "sm_90a", f"chip {bundle.chip}")
    kernel = [n for n in bundle.kernels if n.startswith("kda_decode_step")]
    check(len(kernel) == 1, f"kernels {list(bundle.kernels)}")
    kernel = kernel[0]
    pnames = [p["name"] for p in bundle.tensor_params(kernel)]
    check(pnames == ["q", "k", "v", "gate", "beta", "A_log", "dt_bias", "indices", "o_init", "state_pool"],
          f"decode tensor params {pnames} (kda.ops._run_decode supplies these names)")

    def dec_tensors(H=H, HV=HV, N=N, P=P, **over):
        t = {"q": F((N, H, K), bf), "k": F((N, H, K), bf), "v": F((N, HV, K), bf), "gate": F((N, HV, K), f32),
             "beta": F((N, HV), bf), "A_log": F((HV,), f32), "dt_bias": F((HV, K), f32),
             "indices": F((N,), "int64"), "o_init": F((N, HV, K), bf), "state_pool": F((P, HV, K, K), f32)}
        t.update(over)
        return t
    for h, hv, n, p in ((H, HV, N, P), (1, 1, 1, 1), (4, 32, 64, 1000), (8, 8, 5, 6)):
        bundle.check(kernel, dec_tensors(H=h, HV=hv, N=n, P=p))
        bundle.check(kernel, [dec_tensors(H=h, HV=hv, N=n, P=p)[x] for x in pnames])
    print("ok   kda_check_tensors accepts decode tensors for H/HV = 2/4, 1/1, 4/32, 8/8 (one bundle)")
    bad(bundle, kernel, dec_tensors(k=F((N, H + 1, K), bf)), ["('k')", "H"], "decode k heads")
    bad(bundle, kernel, dec_tensors(v=F((N, HV, 64), bf)), ["('v')", "128"], "decode v head dim")
    bad(bundle, kernel, dec_tensors(state_pool=F((P, HV + 1, K, K), f32)), ["state_pool", "HV"],
        "decode pool heads")
    bad(bundle, kernel, dec_tensors(indices=F((N + 1,), "int64")), ["indices"], "decode indices count")
    bad(bundle, kernel, dec_tensors(indices=F((N,), "int32")), ["indices"], "decode indices dtype")
    bad(bundle, kernel, dec_tensors(o_init=F((N, HV, K), f32)), ["o_init"], "decode o dtype")
    bad(bundle, kernel, dec_tensors(q=F((N, H, K), bf, strides=(H * K, 1, H))), ["q"], "decode q strides")
    bad(bundle, kernel, dec_tensors(q=F((N, H, K), bf, ptr=0x7f0000000001)), ["q"], "decode q alignment")
    bad(bundle, kernel, dec_tensors(gate=F((N, HV, K), f32, device=1)), ["gate"], "decode device mix")
    raises(KdaError, bundle.check, kernel, [dec_tensors()[x] for x in pnames[:-1]], contains="takes 10 tensors",
           what="decode tensor count")

    # --- window attention, varlen ---------------------------------------------
    wcfg = ops.window_attention_config(Meta((1, 50, 8, 64), bf), Meta((1, 50, 2, 64), bf), Meta((1, 50, 2, 64), bf),
                                       64, cu_seqlens=Meta((4,), "int32"))
    wpath = b.get_bundle_dir(wcfg, "sm_90a")
    wb = Bundle(wpath)
    wk = [n for n in wb.kernels if n.startswith("kda_window_attention")][0]
    wnames = [p["name"] for p in wb.tensor_params(wk)]
    check(wnames == ["q", "k", "v", "cu_seqlens", "o"], f"window tensor params {wnames}")

    def win(T=50, HQ=8, HK=2, HV=2, N=3, **over):
        HO = max(HQ, HV)
        t = {"q": F((1, T, HQ, 64), bf), "k": F((1, T, HK, 64), bf), "v": F((1, T, HV, 64), bf),
             "cu_seqlens": F((N + 1,), "int32"), "o": F((1, T, HO, 64), bf)}
        t.update(over)
        return t
    for args in ({}, dict(T=1, HQ=1, HK=1, HV=1, N=1), dict(T=4096, HQ=2, HK=2, HV=4, N=9)):
        wb.check(wk, win(**args))
    print(f"ok   window bundle {os.path.basename(wpath)}: kda_check_tensors accepts GQA / KDA grouping shapes")
    bad(wb, wk, win(o=F((1, 50, 8, 64), bf, ptr=None), v=F((1, 49, 2, 64), bf)), ["('v')", "T"], "window v length")
    bad(wb, wk, win(q=F((2, 50, 8, 64), bf)), ["('q')"], "window B = 2 with cu_seqlens")
    bad(wb, wk, win(cu_seqlens=F((4,), "int64")), ["cu_seqlens"], "window cu_seqlens dtype")
    bad(wb, wk, win(o=F((1, 50, 8, 32), bf)), ["('o')"], "window o head dim")

    # --- gated_delta through chunk_kda's configuration --------------------------
    gcfg = ops.chunk_kda_config(Meta((1, 40, 2, 64), bf), Meta((1, 40, 2, 64), bf), Meta((1, 40, 4, 64), bf),
                                Meta((1, 40, 4, 64), f32), Meta((1, 40, 4), bf),
                                initial_state=Meta((2, 4, 64, 64), f32), output_final_state=True,
                                cu_seqlens=Meta((3,), "int64"), chunk_size=16)
    gb = Bundle(b.get_bundle_dir(gcfg, "sm_90a"))
    gk = [n for n in gb.kernels if n.startswith("kda_gated_delta")][0]
    gnames = [p["name"] for p in gb.tensor_params(gk)]
    check(set(gnames) <= {"q", "k", "v", "gate", "beta", "initial_state", "cu_seqlens", "A_log", "dt_bias", "o",
                          "final_state"}, f"gated_delta tensor params {gnames} (kda.ops supplies these names)")

    def gd(T=40, H=2, HV=4, N=2, **over):
        t = {"q": F((1, T, H, 64), bf), "k": F((1, T, H, 64), bf), "v": F((1, T, HV, 64), bf),
             "gate": F((1, T, HV, 64), f32), "beta": F((1, T, HV), bf), "initial_state": F((N, HV, 64, 64), f32),
             "cu_seqlens": F((N + 1,), "int64"), "o": F((1, T, HV, 64), bf), "final_state": F((N, HV, 64, 64), f32)}
        t.update(over)
        return {n: t[n] for n in gnames}
    gb.check(gk, gd())
    gb.check(gk, gd(T=1000, H=1, HV=16, N=7))
    bad(gb, gk, gd(final_state=F((3, 4, 64, 64), f32)), ["final_state"], "gated_delta final_state count")
    print("ok   gated_delta bundle: kda_check_tensors good and bad shapes")

    # A tile chosen for a shape (shape policy, tuning database) without a bundle, where nothing may be
    # compiled: the default bundle runs, and a warning says so once (not a silent slower kernel).
    import warnings
    os.environ["KDA_NO_COMPILE"] = "1"
    try:
        tile = {"chunk": 16, "sub_chunk": 16, "v_block": 32, "threads": 128, "state_stages": 5}
        for attempt in range(2):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                _, _, used = ops._bundle_for(gcfg, "sm_90a", tile)
            said = [str(w.message) for w in caught if "has no bundle here" in str(w.message)]
            check(used is None, f"a tile without a bundle reported as used: {used}")
            check(len(said) == (1 if attempt == 0 else 0),
                  f"missing tile bundle, call {attempt}: {len(said)} warnings (expected one, then none)")
            if said:
                check("kda.prebuild" in said[0] and "v_block" in said[0],
                      f"the warning names neither the tile nor the command: {said[0][:300]}")
    finally:
        os.environ.pop("KDA_NO_COMPILE", None)
    print("ok   a chosen tile without a bundle: the default runs, one warning names the tile and the command")


# ---------------------------------------------------------------------------
# Part "entries"
# ---------------------------------------------------------------------------

def _fake_cubin(entry):
    """A cubin header for sm_90 (ELF ABI version 8) and the entry's name, as
    runtime/RuntimeTest.cpp's cubin() writes it for the fake driver."""
    image = bytearray(64)
    image[0:4] = b"\x7fELF"
    image[4], image[5], image[6], image[7], image[8] = 2, 1, 1, 51, 8
    image[18:20] = (190).to_bytes(2, "little")
    image[48:52] = ((90 << 8) | 0x6000004).to_bytes(4, "little")
    image += b"\0" + entry.encode() + b"\0"
    image[40:48] = len(image).to_bytes(8, "little")
    return bytes(image)


def part_entries(runtime, fake_driver, tmp):
    import ctypes
    os.environ["KDA_RUNTIME_LIBRARY"] = runtime
    os.environ["KDA_CUDA_LIBRARY"] = fake_driver
    from kda.runtime import Bundle, KdaError
    fake = ctypes.CDLL(fake_driver)  # the very instance the runtime dlopens
    fake.kda_fake_events.restype = ctypes.c_char_p
    fake.kda_fake_add_allocation.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]

    def events():
        return fake.kda_fake_events().decode()

    bf = "bfloat16"
    qkv = {"kind": "tensor", "dtype": "bf16", "shape": ["B", "T", "H", 128], "alignment": 16}
    w = {"kind": "tensor", "dtype": "f32", "shape": ["B", "T", "H", 64]}
    manifest = {
        "format": "kda-bundle", "version": 2, "target": {"vendor": "nvidia", "chip": "sm_90a"},
        "source_hash": "ab" * 32,
        "kernels": [
            {"name": "kda_gated_delta_kernel_intra", "binary": "intra.sm_90a.cubin", "entry": "intra_entry",
             "params": [dict(qkv, name="q"), dict(qkv, name="k"), dict(w, name="w"), {"name": "T", "kind": "dim"}],
             "grid": ["B", "H", 1], "block": [128, 1, 1],
             "strategy": {"kernel": "intra", "kind": "lanes"}},
            {"name": "kda_gated_delta_kernel_state", "binary": "state.sm_90a.cubin", "entry": "state_entry",
             "params": [dict(qkv, name="q"), dict(w, name="w"), dict(qkv, name="o"), {"name": "H", "kind": "dim"}],
             "grid": ["T", 1, 1], "block": [64, 1, 1],
             "strategy": {"kernel": "state", "kind": "tiles", "reason": "V block 8"}},
        ],
        "entries": [{
            "name": "kda_gated_delta_kernel",
            "params": [dict(qkv, name="q"), dict(qkv, name="k"), dict(qkv, name="o")],
            "workspaces": [{"name": "ws0", "dtype": "f32", "shape": ["B", "T", "H", 64]}],
            "launches": [{"kernel": "kda_gated_delta_kernel_intra", "args": ["q", "k", "ws0"]},
                         {"kernel": "kda_gated_delta_kernel_state", "args": ["q", "ws0", "o"]}],
        }],
    }
    path = os.path.join(tmp, "entries.kda")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    for name, entry in (("intra", "intra_entry"), ("state", "state_entry")):
        with open(os.path.join(path, f"{name}.sm_90a.cubin"), "wb") as f:
            f.write(_fake_cubin(entry))

    bundle = Bundle(path)
    name = "kda_gated_delta_kernel"
    check(list(bundle.entries) == [name], f"entries {list(bundle.entries)}")
    # Where ops.py looks for the op's kernel: the entry, not the kernels it runs.
    found = [n for n in bundle.kernels if n.startswith("kda_gated_delta")]
    check(found == [name], f"kernels {list(bundle.kernels)}")
    check(sorted(bundle.all_kernels) == [name + "_intra", name + "_state"], f"all {list(bundle.all_kernels)}")
    check([p["name"] for p in bundle.tensor_params(name)] == ["q", "k", "o"], "entry params")
    print("ok   version 2 bundle lists entry kda_gated_delta_kernel where kernels are looked up")
    # The strategy of each kernel an entry runs, in launch order (what kda.ops.last_launch reports).
    st = bundle.strategies(name)
    check(list(st) == [name + "_intra", name + "_state"]
          and st[name + "_intra"] == {"kernel": "intra", "kind": "lanes"}
          and st[name + "_state"] == {"kernel": "state", "kind": "tiles", "reason": "V block 8"},
          f"strategies {st}")
    # The runtime checks the field like every other: an unknown kind is a corrupt bundle.
    bad_path = os.path.join(tmp, "bad-strategy.kda")
    shutil.copytree(path, bad_path)
    bad_manifest = json.loads(json.dumps(manifest))
    bad_manifest["kernels"][1]["strategy"]["kind"] = "fast"
    with open(os.path.join(bad_path, "manifest.json"), "w") as f:
        json.dump(bad_manifest, f)
    e = raises(KdaError, Bundle, bad_path, contains='kernels[1].strategy.kind: unknown kind "fast" '
               "(expected lanes or tiles)", what="bad strategy kind")
    check(e.status == "KDA_ERROR_CORRUPT_BUNDLE", e.status)
    print("ok   entry strategies: lanes / tiles per kernel, in launch order; an unknown kind is refused")

    B, T, H = 2, 3, 4
    ts = {n: FakeTensor((B, T, H, 128), bf) for n in ("q", "k", "o")}
    for t in ts.values():
        fake.kda_fake_add_allocation(t.data_ptr(), B * T * H * 128 * 2, 0, 2)
    bundle.check(name, ts)
    ws = bundle.workspace_bytes(name, ts)
    check(ws == B * T * H * 64 * 4, f"workspace bytes {ws}")
    bundle.launch(name, ts, stream=0x5700)
    check(events() == f"alloc:{ws} launch:intra_entry launch:state_entry free", f"events {events()!r}")
    print(f"ok   entry launched by name: {events()}")
    e = raises(KdaError, bundle.launch, name, [ts["q"], ts["k"]], contains="entry 'kda_gated_delta_kernel' takes 3",
               what="entry tensor count")
    bad = dict(ts, k=FakeTensor((B, T + 1, H, 128), bf))
    e = raises(KdaError, bundle.check, name, bad, contains="tensor 1 ('k') dimension 1 (symbol T) is 4",
               what="entry bad shape")
    check(e.status == "KDA_ERROR_BAD_TENSOR", e.status)

    mem = FakeTensor((ws,), "int32")
    fake.kda_fake_add_allocation(mem.data_ptr(), ws, 0, 2)
    before = events()
    bundle.launch(name, ts, stream=0x5700, workspace=(mem.data_ptr(), ws))
    check(events() == before + " launch:intra_entry launch:state_entry", f"events {events()!r}")
    e = raises(KdaError, bundle.launch, name, ts, workspace=(mem.data_ptr(), ws - 1),
               contains=f"needs {ws} bytes of workspace", what="caller workspace too small")
    check(e.status == "KDA_ERROR_INVALID_ARGUMENT", e.status)
    print("ok   entry launched on a caller-owned workspace")

    # The planned path's launch (kda.ops: torch tensors only) vouches for its pointers: kda_launch_trusted
    # skips the driver's pointer query and nothing else. Pointers the fake driver does not know are refused
    # by the checked launch and taken by the trusted one.
    from kda.runtime import _Marshalled

    class Workspace:
        def data_ptr(self):
            return mem.data_ptr()

        def numel(self):
            return ws

        def element_size(self):
            return 1
    unknown = {n: FakeTensor((B, T, H, 128), bf) for n in ("q", "k", "o")}
    m = _Marshalled(bundle._order(name, unknown))
    raises(KdaError, bundle.launch_marshalled, name.encode(), m, 0, workspace=Workspace(),
           contains="is not memory the CUDA driver knows", what="checked launch of unknown pointers")
    before = events()
    bundle.launch_marshalled(name.encode(), m, 0, workspace=Workspace(), trusted=True)
    check(events() == before + " launch:intra_entry launch:state_entry", f"trusted launch events {events()!r}")
    bad = _Marshalled(bundle._order(name, dict(unknown, k=FakeTensor((B, T + 1, H, 128), bf))))
    raises(KdaError, bundle.launch_marshalled, name.encode(), bad, 0, workspace=Workspace(), trusted=True,
           contains="tensor 1 ('k') dimension 1 (symbol T) is 4", what="trusted launch, bad shape")
    print("ok   trusted launch: no pointer query, every other check")
    bundle.close()
    _part_pieces(fake, events, tmp)


def _part_pieces(fake, events, tmp):
    """kda.runtime's Pieces (kda_prepare_pieces / kda_launch_pieces) through ctypes, against the fake driver:
    one sequence's entry as two pieces, each piece's chunk-parallel kernel on the caller's stream, its state pass
    on the side stream after an event, the states passed along in the caller's workspace."""
    from kda.runtime import Bundle, KdaError, _Marshalled
    qkv = {"kind": "tensor", "dtype": "bf16", "shape": [1, "T", "H", 128], "alignment": 16}
    st = {"kind": "tensor", "dtype": "f32", "shape": ["H", 4, 4]}
    w = {"kind": "tensor", "dtype": "f32", "shape": [1, "T", "H", 8]}
    kernel = lambda name, entry, params, grid: {  # noqa: E731
        "name": name, "binary": f"{entry}.sm_90a.cubin", "entry": entry, "params": params, "grid": grid,
        "block": [128, 1, 1]}
    manifest = {
        "format": "kda-bundle", "version": 2, "target": {"vendor": "nvidia", "chip": "sm_90a"},
        "source_hash": "cd" * 32,
        "kernels": [
            kernel("kda_p_intra", "intra_entry", [dict(qkv, name="q"), dict(st, name="initial_state"),
                                                  dict(w, name="ws0")], ["T", "H", 1]),
            kernel("kda_p_state", "state_entry", [dict(qkv, name="q"), dict(st, name="initial_state"),
                                                  dict(w, name="ws0"), dict(qkv, name="o"),
                                                  dict(st, name="final_state")], ["H", 1, 1]),
        ],
        "entries": [{
            "name": "kda_p",
            "params": [dict(qkv, name="q"), dict(st, name="initial_state"), dict(qkv, name="o"),
                       dict(st, name="final_state")],
            "workspaces": [{"name": "ws0", "dtype": "f32", "shape": [1, "T", "H", 8]}],
            "launches": [{"kernel": "kda_p_intra", "args": ["q", "initial_state", "ws0"]},
                         {"kernel": "kda_p_state", "args": ["q", "initial_state", "ws0", "o", "final_state"]}],
        }],
    }
    path = os.path.join(tmp, "pieces.kda")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    for entry in ("intra_entry", "state_entry"):
        with open(os.path.join(path, f"{entry}.sm_90a.cubin"), "wb") as f:
            f.write(_fake_cubin(entry))
    bundle = Bundle(path)
    fake.kda_fake_reset()  # a fresh event log (the side stream is made below, after it)
    T, H = 40, 2
    ts = [FakeTensor((1, T, H, 128), "bfloat16"), FakeTensor((H, 4, 4), "float32"),
          FakeTensor((1, T, H, 128), "bfloat16"), FakeTensor((H, 4, 4), "float32")]
    # The eager schedule (KDA_PIECES_GRAPH=0); the graph form, the default where the driver has graphs, below.
    saved = os.environ.get("KDA_PIECES_GRAPH")
    os.environ["KDA_PIECES_GRAPH"] = "0"
    try:
        pieces = bundle.prepare_pieces(b"kda_p", _Marshalled(ts), [0, 24])
    finally:
        if saved is None:
            os.environ.pop("KDA_PIECES_GRAPH", None)
        else:
            os.environ["KDA_PIECES_GRAPH"] = saved
    # ws0 for 24 and 16 tokens (1536, 1024 bytes), then one state of 128 bytes at a multiple of 256.
    check(pieces.pieces == 2 and pieces.workspace_bytes == 2816, f"pieces {pieces.pieces}, "
          f"workspace {pieces.workspace_bytes}")
    check(events() == "stream:s1/-5", f"events {events()!r}")
    pieces.launch(0x10000000, pieces.workspace_bytes, 0x5700)
    check(events() == "stream:s1/-5 launch:intra_entry record:e1@caller wait:s1@e1 launch:state_entry "
          "launch:intra_entry record:e2@caller wait:s1@e2 launch:state_entry record:e3@s1 wait:caller@e3",
          f"events {events()!r}")
    print(f"ok   pieces: {events()}")
    raises(KdaError, pieces.launch, 0x10000000, pieces.workspace_bytes - 1, 0x5700,
           contains="need 2816 bytes of workspace", what="pieces workspace too small")
    raises(KdaError, bundle.prepare_pieces, b"kda_p", _Marshalled(ts), [0, 40],
           contains="piece 1 starts at token 40", what="pieces past T")
    print("ok   pieces refused: a workspace too small, a piece past the tokens")
    del pieces
    # The default: one graph built at the first launch (its nodes at the side stream's priority), then
    # launched on the caller's stream; the fake driver replays its nodes in order.
    fake.kda_fake_reset()
    graph = bundle.prepare_pieces(b"kda_p", _Marshalled(ts), [0, 24])
    graph.launch(0x10000000, graph.workspace_bytes, 0x5700)
    got = events()
    check("graph-launch" in got and got.endswith("graph-launch launch:intra_entry launch:state_entry "
                                                  "launch:intra_entry launch:state_entry")
          and "record:" not in got, f"events {got!r}")
    print(f"ok   pieces as one graph: {got}")
    del graph
    bundle.close()


def part_installed():
    """The package pip installed (scripts/build-wheel.sh, pip install): it is
    not the repository's, and it finds its own runtime with no environment
    variable naming one."""
    import kda
    import kda.runtime
    pkg = os.path.dirname(os.path.abspath(kda.__file__))
    check(not pkg.startswith(os.path.join(ROOT, "python")), f"kda imported from the repository ({pkg})")
    check("KDA_RUNTIME_LIBRARY" not in os.environ, "KDA_RUNTIME_LIBRARY is set")
    lib = kda.runtime.library_path()
    check(lib == os.path.join(pkg, "libkda_runtime.so"), f"runtime found at {lib}, not in {pkg}")
    kda.runtime.load_library()
    check(kda.runtime.library_path() == lib, "a different runtime was loaded")
    print(f"ok   installed package {kda.__version__} at {pkg} loads its own libkda_runtime.so", flush=True)
    # Bundles the wheel carries (scripts/build-wheel.sh DIST BUNDLES): searched
    # last, their prebuild report names the compiler, never written to.
    import kda.bundles as kb
    prebuilt = os.path.join(pkg, "prebuilt")
    if os.path.isdir(prebuilt):
        check(kb.cache_dirs()[-1] == prebuilt, f"prebuilt bundles not searched: {kb.cache_dirs()}")
        check(prebuilt not in kb.cache_dirs(with_prebuilt=False), "prebuilt bundles writable")
        check(kb._writable_cache_dir() != prebuilt, "compiled bundles would go into the package")
        print(f"ok   the wheel's bundles are searched last (compiler {kb.prebuilt_fingerprint()})", flush=True)
    return lib


# ---------------------------------------------------------------------------
# Part "layer"
# ---------------------------------------------------------------------------

def device_tensors(fake, shapes, fp32=()):
    """FakeTensors of these shapes (bf16, fp32 where named in `fp32`), each
    registered with the fake driver as device memory of its size."""
    ts = {}
    for n, shape in shapes.items():
        t = ts[n] = FakeTensor(shape, "float32" if n in fp32 else "bfloat16")
        nbytes = 4 if n in fp32 else 2
        for d in shape:
            nbytes *= d
        fake.kda_fake_add_allocation(t.data_ptr(), nbytes, 0, 2)
    return ts


def part_layer(kda_compile, runtime, fake_driver, tmp):
    """A hybrid layer (kda.ops.hybrid_attention's configuration: the Kimi
    prologue, GVA, a gated per-head mix) compiled by kda-compile through the
    package's cache, loaded with libkda_runtime.so against the fake CUDA
    driver: the bundle lists the layer's entry kda_hybrid (kda-gpu-layer-entry)
    beside the gated delta rule's, the runtime accepts its launches (the
    window kernel's symbols mapped to the layer's), and one call allocates
    one workspace, launches the three kernels in order (the mix is the
    window's epilogue: kda-fuse-window-mix) and frees it."""
    import ctypes
    from kda import bundles as b
    from kda import ops
    from kda.runtime import Bundle, KdaError
    os.environ["KDA_RUNTIME_LIBRARY"] = runtime
    os.environ["KDA_CUDA_LIBRARY"] = fake_driver
    os.environ["KDA_COMPILE"] = kda_compile
    os.environ["KDA_BUNDLE_PATH"] = os.path.join(tmp, "bundles")
    os.environ["KDA_CACHE_DIR"] = os.path.join(tmp, "cache")
    os.environ.pop("KDA_NO_COMPILE", None)
    fake = ctypes.CDLL(fake_driver)
    fake.kda_fake_events.restype = ctypes.c_char_p
    fake.kda_fake_add_allocation.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]

    B, T, H, HV, K = 2, 100, 2, 4, 128
    bf, f32 = "bfloat16", "float32"
    args = dict(q=Meta((B, T, H, K), bf), k=Meta((B, T, H, K), bf), v=Meta((B, T, HV, K), bf),
                g=Meta((B, T, HV, K), bf), beta=Meta((B, T, HV), bf))
    kimi = dict(A_log=Meta((HV,), f32), dt_bias=Meta((HV * K,), f32), use_qk_l2norm_in_kernel=True,
                use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, lower_bound=-5.0)
    cfg = ops.hybrid_attention_config(*args.values(), Meta((B, T, HV), bf), window=64, **kimi)
    check(cfg["op"] == "hybrid" and cfg["mix"] == "gated" and cfg["z"] == {"form": "head", "dtype": "bf16"},
          f"config {b.describe(cfg)}")
    check(ops.hybrid_attention_config(*args.values(), window=64, **kimi)["mix"] == "sum", "default mix")
    raises(ValueError, ops.hybrid_attention_config, *args.values(), Meta((B, T, H + 1), bf), window=64, **kimi,
           contains="z: expected [B, T, HV]", what="z of the wrong heads")
    raises(ValueError, ops.hybrid_attention_config, *args.values(), Meta((B, T, HV), bf), window=0, **kimi,
           contains="window: expected an integer >= 1", what="window 0")
    raises(ValueError, b.hybrid_config, gated_delta=dict(cfg["gated_delta"], final_state_dtype="f32"),
           window=64, mix="sum", contains="a hybrid layer takes no states", what="hybrid with a state")
    # The layer in pipelined pieces (kda.tune.hybrid_pieces): fp32 states, the window over earlier keys.
    from kda import tune as _tune
    pc = _tune.hybrid_pieces_config(cfg)
    text = b.to_mlir(pc)
    check(pc["schedule"] == "pieces" and " pieces " in b.describe(pc) and "earlier_keys" in text
          and 'kda.name = "final_state"' in text and "%window_k" in text, f"pieces config {b.describe(pc)}")
    raises(ValueError, b.hybrid_config, gated_delta=dict(cfg["gated_delta"], initial_state_dtype="bf16",
                                                          final_state_dtype="f32"),
           window=64, mix="sum", schedule="pieces", contains="a hybrid layer takes no states",
           what="hybrid pieces with bf16 states")
    raises(ValueError, b.hybrid_config, gated_delta=cfg["gated_delta"], window=64, mix="sum", schedule="pieces",
           contains="passes fp32 states between the pieces", what="hybrid pieces without states")
    print(f"ok   hybrid configuration: {b.describe(cfg)}")

    path = b.get_bundle_dir(cfg, "sm_90a")
    bundle = Bundle(path)
    check(sorted(bundle.entries) == ["kda_gated_delta_kernel", "kda_hybrid"], f"entries {list(bundle.entries)}")
    names = [p["name"] for p in bundle.tensor_params("kda_hybrid")]
    check(names == ["q", "k", "v", "gate", "beta", "A_log", "dt_bias", "z", "o"], f"layer params {names}")
    st = bundle.strategies("kda_hybrid")
    check(list(st) == ["kda_gated_delta_kernel_intra", "kda_gated_delta_kernel_state",
                       "kda_window_attention_kernel"], f"layer launches {list(st)}")
    check([st[n]["kind"] for n in list(st)[:3]] == ["lanes"] * 3, f"strategies {st}")
    window_launch = bundle.entries["kda_hybrid"]["launches"][2]
    check(window_launch.get("symbols") == {"HQ": "H", "HK": "H", "HO": "HV"},
          f"window launch symbols {window_launch.get('symbols')}")
    print(f"ok   layer entry kda_hybrid: {' '.join(list(st))}")

    shapes = dict(q=(B, T, H, K), k=(B, T, H, K), v=(B, T, HV, K), gate=(B, T, HV, K), beta=(B, T, HV),
                  A_log=(HV,), dt_bias=(HV, K), z=(B, T, HV), o=(B, T, HV, K))
    ts = device_tensors(fake, shapes, ("A_log", "dt_bias"))
    bundle.check("kda_hybrid", ts)
    ws = bundle.workspace_bytes("kda_hybrid", ts)
    gd_ws = bundle.workspace_bytes("kda_gated_delta_kernel", {n: ts[n] for n in names if n != "z"})
    # The layer's: the gated delta's own workspaces and its output, which the window reads
    # (its mix_linear); the window writes the layer's output.
    check(ws >= gd_ws + B * T * HV * K * 2, f"layer workspace {ws} bytes (gated delta alone {gd_ws})")
    window_args = bundle.entries["kda_hybrid"]["launches"][2]["args"]
    check(window_args == ["q", "k", "v", "c0_o", "z", "o"], f"window launch args {window_args}")
    # One stream: the window reads the state pass's output, so nothing runs beside another launch
    # (kda-gpu-layer-entry gives the side stream only to independent calls).
    launches = bundle.entries["kda_hybrid"]["launches"]
    sched = [l.get("stream", 0) for l in launches]
    check(sched == [0, 0, 0], f"layer streams {sched}")
    bundle.launch("kda_hybrid", ts, stream=0x5700)
    ev = fake.kda_fake_events().decode()
    want = (f"alloc:{ws} launch:kda_gated_delta_kernel_intra launch:kda_gated_delta_kernel_state "
            "launch:kda_window_attention_kernel free")
    check(ev.endswith(want), f"events {ev!r}, expected to end with {want!r}")
    print(f"ok   layer launched in one call: {want}")
    bad = dict(ts, z=FakeTensor((B, T, H), bf))
    raises(KdaError, bundle.check, "kda_hybrid", bad, contains="('z') dimension 2 (symbol HV) is 2",
           what="layer z of the wrong heads")
    print("ok   layer's tensors checked like an entry's")
    bundle.close()

    # The layer in pipelined pieces (its bundle at the pieces' tile, as kda.ops takes it for one long
    # sequence): kda_prepare_pieces over kda_hybrid accepts the three launches, and one call runs
    # each piece's chunk pair, then its window (over earlier keys: S = the piece's end), as one graph
    # whose window nodes follow their piece's state node only.
    from kda.runtime import _Marshalled
    pb = Bundle(b.get_bundle_dir(pc, "sm_90a", tile=_tune.pieces_tile()))
    pnames = [p["name"] for p in pb.tensor_params("kda_hybrid")]
    check(pnames == ["q", "k", "v", "gate", "beta", "initial_state", "A_log", "dt_bias", "z", "window_k",
                     "window_v", "o", "final_state"], f"pieces layer params {pnames}")
    T1 = 100
    shapes = dict(q=(1, T1, H, K), k=(1, T1, H, K), v=(1, T1, HV, K), gate=(1, T1, HV, K), beta=(1, T1, HV),
                  initial_state=(1, HV, K, K), A_log=(HV,), dt_bias=(HV, K), z=(1, T1, HV),
                  window_k=(1, T1, H, K), window_v=(1, T1, HV, K), o=(1, T1, HV, K), final_state=(1, HV, K, K))
    ts = device_tensors(fake, shapes, ("initial_state", "A_log", "dt_bias", "final_state"))
    run = pb.prepare_pieces(b"kda_hybrid", _Marshalled([ts[n] for n in pnames]), [0, 48, 80])
    check(run is not None and run.pieces == 3, "kda_prepare_pieces over the layer entry")
    for j, n in enumerate(pnames):
        run.data[j] = ts[n].data_ptr()
    mem = FakeTensor((run.workspace_bytes,), "int32")
    fake.kda_fake_add_allocation(mem.data_ptr(), run.workspace_bytes, 0, 2)
    before = fake.kda_fake_events().decode()
    run.launch(mem.data_ptr(), run.workspace_bytes, 0x5700)
    ev = fake.kda_fake_events().decode()[len(before):]
    nodes = [e for e in ev.split() if e.startswith("node:")]
    want = ["node:kda_gated_delta_kernel_intra/0", "node:kda_gated_delta_kernel_state/1",
            "node:kda_window_attention_kernel/1"] + ["node:kda_gated_delta_kernel_intra/1",
                                                     "node:kda_gated_delta_kernel_state/2",
                                                     "node:kda_window_attention_kernel/1"] * 2
    check(nodes == want and ev.count("launch:kda_window_attention_kernel") == 3, f"pieces events {ev!r}")
    short = dict(ts, window_k=FakeTensor((1, T1 - 1, H, K), bf), window_v=FakeTensor((1, T1 - 1, HV, K), bf))
    for n, h in (("window_k", H), ("window_v", HV)):
        fake.kda_fake_add_allocation(short[n].data_ptr(), (T1 - 1) * h * K * 2, 0, 2)
    raises(KdaError, pb.prepare_pieces, b"kda_hybrid", _Marshalled([short[n] for n in pnames]), [0, 48, 80],
           contains="(S, earlier keys) is 99, expected at least T = 100", what="pieces keys shorter than T")
    del run
    pb.close()
    print("ok   layer in pipelined pieces: each piece's window after its state pass (one graph)")
    fake.kda_fake_reset()  # its event log is full

    # A multi-scale layer (kda.ops.multi_scale_attention's configuration: two log-space gates,
    # mixed by z [B, T, HV, 2]): one entry kda_multi_scale whose mix reads z itself (no slice
    # of it), each scale's gated delta launched in turn, the first state pass beside the second
    # scale's intra-chunk kernel.
    g32 = Meta((B, T, HV, K), f32)
    ms_args = [args["q"], args["k"], args["v"], [g32, g32], args["beta"], Meta((B, T, HV, 2), bf)]
    cfg = ops.multi_scale_attention_config(*ms_args, use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True)
    check(cfg["op"] == "multi_scale" and cfg["mix"] == "gated" and cfg["scales"] == 2 and cfg["z_dtype"] == "bf16",
          f"config {b.describe(cfg)}")
    raises(ValueError, ops.multi_scale_attention_config, *ms_args[:5], Meta((B, T, HV, 3), bf),
           contains="z: expected [B, T, HV, M] = [2, 100, 4, 2]", what="multi-scale z of the wrong scales")
    raises(ValueError, ops.multi_scale_attention_config, *ms_args[:3], [g32, g32], ms_args[4],
           decay_scales=[1.0, 0.5], contains="decay_scales scale one gate", what="decay scales of two gates")
    raises(ValueError, ops.multi_scale_attention_config, *ms_args[:3], [g32, Meta((B, T, HV, K), bf)],
           ms_args[4], contains="g[1]: expected the shape and dtype of g[0]", what="gates of two dtypes")
    raises(ValueError, b.multi_scale_config, gated_delta=dict(cfg["gated_delta"], gate_activation="softplus"),
           scales=2, mix="sum", contains="log-space decays", what="multi-scale with a gate activation")
    print(f"ok   multi-scale configuration: {b.describe(cfg)}")
    bundle = Bundle(b.get_bundle_dir(cfg, "sm_90a"))
    check(sorted(bundle.entries) == ["kda_gated_delta_kernel", "kda_multi_scale"], f"entries {list(bundle.entries)}")
    names = [p["name"] for p in bundle.tensor_params("kda_multi_scale")]
    check(names == ["q", "k", "v", "g0", "g1", "beta", "z", "o"], f"multi-scale params {names}")
    launches = bundle.entries["kda_multi_scale"]["launches"]
    kernels = [l["kernel"] for l in launches]
    check(kernels == ["kda_gated_delta_kernel_intra", "kda_gated_delta_kernel_state"] * 2
          + ["kda_elementwise_kernel"], f"multi-scale launches {kernels}")
    check(launches[-1]["args"] == ["c0_o", "c1_o", "z", "z", "o"], f"mix args {launches[-1]['args']}")
    check([l.get("stream", 0) for l in launches] == [0, 1, 0, 0, 0], f"multi-scale streams {launches}")
    shapes = dict(q=(B, T, H, K), k=(B, T, H, K), v=(B, T, HV, K), g0=(B, T, HV, K), g1=(B, T, HV, K),
                  beta=(B, T, HV), z=(B, T, HV, 2), o=(B, T, HV, K))
    ts = device_tensors(fake, shapes, ("g0", "g1"))
    bundle.check("kda_multi_scale", ts)
    bundle.launch("kda_multi_scale", ts, stream=0x5700)
    ev = fake.kda_fake_events().decode()
    ran = [e for e in ev.split() if e.startswith("launch:")][-5:]
    check(ran == ["launch:" + k for k in kernels], f"events {ev!r}")
    raises(KdaError, bundle.check, "kda_multi_scale", dict(ts, z=FakeTensor((B, T, HV, 3), bf)),
           contains="('z') dimension 3", what="multi-scale z of three scales")
    print(f"ok   multi-scale layer launched in one call: {' '.join(ran)}")
    bundle.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--installed", action="store_true",
                    help="test the pip-installed package (its own runtime; part entries with it)")
    ap.add_argument("--kda-opt", help="kda-opt binary (part pure)")
    ap.add_argument("--bundles", action="store_true", help="run part bundles instead")
    ap.add_argument("--kda-compile", help="kda-compile binary (part bundles)")
    ap.add_argument("--runtime", help="libkda_runtime.so (part bundles)")
    ap.add_argument("--entries", action="store_true", help="run part entries instead")
    ap.add_argument("--fake-driver", help="libkda-fake-driver.so (parts entries, layer)")
    ap.add_argument("--layer", action="store_true",
                    help="run part layer instead (needs --kda-compile, --runtime, --fake-driver)")
    ap.add_argument("--tmp", help="scratch directory (default: a fresh temporary one)")
    args = ap.parse_args()
    tmp = args.tmp or tempfile.mkdtemp(prefix="kda-package-test-")
    os.makedirs(tmp, exist_ok=True)
    if args.installed:
        if not (args.kda_opt and args.fake_driver):
            ap.error("--installed needs --kda-opt and --fake-driver")
        lib = part_installed()
        for sub in ("pure", "entries"):
            os.makedirs(os.path.join(tmp, sub), exist_ok=True)
        part_pure(os.path.abspath(args.kda_opt), os.path.join(tmp, "pure"))
        part_entries(lib, os.path.abspath(args.fake_driver), os.path.join(tmp, "entries"))
    elif args.layer:
        if not (args.kda_compile and args.runtime and args.fake_driver):
            ap.error("--layer needs --kda-compile, --runtime and --fake-driver")
        part_layer(os.path.abspath(args.kda_compile), os.path.abspath(args.runtime),
                   os.path.abspath(args.fake_driver), tmp)
    elif args.entries:
        if not (args.runtime and args.fake_driver):
            ap.error("--entries needs --runtime and --fake-driver")
        part_entries(os.path.abspath(args.runtime), os.path.abspath(args.fake_driver), tmp)
    elif args.bundles:
        if not (args.kda_compile and args.runtime):
            ap.error("--bundles needs --kda-compile and --runtime")
        part_bundles(os.path.abspath(args.kda_compile), os.path.abspath(args.runtime), tmp)
    else:
        if not args.kda_opt:
            ap.error("--kda-opt is required")
        part_pure(os.path.abspath(args.kda_opt), tmp)
    check("torch" not in sys.modules and "numpy" not in sys.modules, "the test imported torch or numpy")
    print(f"ALL OK ({_checks} checks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
