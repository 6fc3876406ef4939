"""Kernel configurations, their MLIR, and the on-disk bundle cache.

A *configuration* is everything a compiled kda kernel fixes: the op
(``gated_delta``, ``decode_step`` or ``window_attention``), the head dims K and V, every tensor's
dtype, the gate form and activation, beta activation, l2 norm, scale, state
layout and which optional tensors are present. Batch, length, head counts,
number of sequences and pool size are dynamic (``?`` in the MLIR, symbols in
the manifest), so one bundle serves all of them.

A configuration is a plain dict (JSON-serialisable, canonical); its stable
hash (with the chip and, for tuned bundles, the tile) and the compiler's
fingerprint name the bundle directory::

    <cache dir>/<op>-k<K>-v<V>-<qk dtype>-<hash16>-<compiler12>.<chip>/
        manifest.json, *.cubin      (written by kda-compile)
        source.mlir, config.json    (written here, for provenance)

<compiler12> is a hash of ``kda-compile --fingerprint`` (a hash of the
executable and the LLVM it loads): a rebuilt or upgraded compiler looks for,
and builds, new bundles instead of reusing what the old one wrote. Where no
compiler is available (a GPU server fed by ``kda.prebuild``), the
fingerprint is ``$KDA_COMPILER_FINGERPRINT`` if set, else unknown, and then
any bundle of the configuration is accepted (the newest).

Cache directories: every entry of ``KDA_BUNDLE_PATH`` (colon separated), then
``~/.cache/kda/bundles`` (``KDA_CACHE_DIR`` overrides it). A missing bundle is
compiled into the first writable one of ``KDA_BUNDLE_PATH`` / the cache
directory when ``kda-compile`` is found (``KDA_COMPILE``, else on PATH, else in
the repository's ``build/bin``); otherwise ``BundleNotFoundError`` gives the
exact command to run.

Nothing here needs torch or a GPU.
"""

from __future__ import annotations

import copy
import glob
import hashlib
import json
import math
import os
import shutil
import subprocess
import tempfile
from typing import Any, Dict, List, Optional, Tuple

# Bumped whenever the generated MLIR for a configuration changes, so that old
# bundles are not picked up for a new meaning.
GENERATOR_VERSION = 3

DTYPES = ("f32", "f16", "bf16", "i32", "i64")
from .chips import CHIPS  # noqa: E402  (the package's one chip table)

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class BundleNotFoundError(RuntimeError):
    """No bundle for a configuration and no kda-compile to build one."""


class CompileError(RuntimeError):
    """kda-compile failed on a configuration."""


# ---------------------------------------------------------------------------
# Configurations
# ---------------------------------------------------------------------------

def default_chunk(K: int, V: int) -> int:
    """Chunk size used when the caller does not ask for one (kwarg chunk_size):
    0, "the target's default", which kda-compile picks per chip so that the
    tiles fit its shared memory (16 with V blocks of 16 on NVIDIA, whose
    blocks may opt in to 227 KiB on an H100/H200 and 163 KiB on an A100; 16
    with V blocks of 16 on AMD, whose LDS is 64 KiB). The op then carries no
    #kda.tile. prebuild warns about bundles over the limit.
    """
    return 0


def _recurrence_fields(update, K, V, qk_dtype, v_dtype, gate, beta_dtype, qk_l2norm,
                       beta_activation, gate_activation, lower_bound, A_log_dtype,
                       dt_bias_dtype, scale, state_layout) -> Dict[str, Any]:
    """The configuration fields a recurrence (gated_delta, decode_step) has:
    update rule, head dims, dtypes, prologue, scale and state layout."""
    return {
        "update": update,
        "K": int(K), "V": int(V),
        "qk_dtype": qk_dtype, "v_dtype": v_dtype,
        "gate": dict(gate) if gate else None,
        "beta_dtype": beta_dtype,
        "qk_l2norm": bool(qk_l2norm),
        "beta_activation": beta_activation,
        "gate_activation": gate_activation,
        "lower_bound": None if lower_bound is None else float(lower_bound),
        "A_log_dtype": A_log_dtype,
        "dt_bias_dtype": dt_bias_dtype,
        "scale": _normalise_scale(scale, K),
        "state_layout": state_layout,
    }


def gated_delta_config(*, K: int, V: int, qk_dtype: str, v_dtype: str,
                       gate: Optional[Dict[str, str]] = None,
                       beta_dtype: Optional[str] = None,
                       update: str = "delta",
                       qk_l2norm: bool = False,
                       beta_activation: str = "none",
                       gate_activation: str = "none",
                       lower_bound: Optional[float] = None,
                       A_log_dtype: Optional[str] = None,
                       dt_bias_dtype: Optional[str] = None,
                       scale: Optional[float] = None,
                       state_layout: str = "k_major",
                       initial_state_dtype: Optional[str] = None,
                       final_state_dtype: Optional[str] = None,
                       cu_seqlens_dtype: Optional[str] = None,
                       chunk: Optional[int] = None,
                       sub_chunk: Optional[int] = None,
                       boundary_interval: Optional[int] = None,
                       boundary_dtype: str = "f32",
                       boundary_indices_dtype: Optional[str] = None) -> Dict[str, Any]:
    """Canonical configuration of one ``kda.gated_delta`` kernel.

    gate: None, or {"form": "channel" | "head", "dtype": ...}.
    scale: None means the op's default 1/sqrt(K) (a value equal to it is
    normalised to None so that both spellings share one bundle).
    boundary_interval: also return the chunk-boundary states
    ``[N, NT, HV, K, V]`` (the state before every ``boundary_interval``
    tokens, in ``boundary_dtype``; NT is the caller's: ``ceil(T /
    interval)`` without varlen). boundary_indices_dtype: the boundary states
    go into the slots of a pool ``[S, HV, K, V]`` named by a table ``[N,
    NB]`` of that integer type instead. The keys are present only when set,
    so configurations without them hash as before.
    """
    cfg = {
        "op": "gated_delta",
        **_recurrence_fields(update, K, V, qk_dtype, v_dtype, gate, beta_dtype, qk_l2norm,
                             beta_activation, gate_activation, lower_bound, A_log_dtype,
                             dt_bias_dtype, scale, state_layout),
        "initial_state_dtype": initial_state_dtype,
        "final_state_dtype": final_state_dtype,
        "cu_seqlens_dtype": cu_seqlens_dtype,
        "chunk": int(chunk) if chunk else default_chunk(K, V),
        "sub_chunk": int(sub_chunk) if sub_chunk else 16,
    }
    if cfg["chunk"] and cfg["sub_chunk"] > cfg["chunk"]:
        cfg["sub_chunk"] = cfg["chunk"]
    if boundary_interval is not None:
        cfg["boundary_interval"] = int(boundary_interval)
        cfg["boundary_dtype"] = boundary_dtype
        if boundary_indices_dtype is not None:
            cfg["boundary_indices_dtype"] = boundary_indices_dtype
    elif boundary_indices_dtype is not None:
        raise ValueError("boundary_indices_dtype needs a boundary_interval")
    # The layout only means something when a state crosses the boundary.
    if initial_state_dtype is None and final_state_dtype is None and boundary_interval is None:
        cfg["state_layout"] = "k_major"
    validate(cfg)
    return cfg


# The gradient's V block (0: the target's default); see gated_delta_grad_config.
# KDA_GRAD_V_BLOCK overrides it (the GPU suite and the benchmarks measure
# other blocks with it; the configuration, and so the bundle, carries it).
GRAD_V_BLOCK = int(os.environ.get("KDA_GRAD_V_BLOCK") or 0)


def gated_delta_grad_config(forward: Dict[str, Any], *, d_final_state: bool = False,
                            chunk: int = 16, grads_dtype: str = "input") -> Dict[str, Any]:
    """Canonical configuration of the ``kda.gated_delta_grad`` kernel of a
    ``gated_delta`` configuration: the forward's operands and prologue, the
    output gradient (v's dtype), the final state's gradient (f32) when
    ``d_final_state``, and the forward's chunk-boundary states at ``chunk``
    tokens (f32), which the backward reads instead of recomputing (issue 24:
    the split FLA makes). ``grads_dtype="input"`` (the default): the gradients
    of q, k, v, the gate and beta in their inputs' dtypes, converted by the
    kernels that write them (what autograd returns: no cast kernel after the
    call; the key is present only where one of those inputs is 16-bit);
    ``"f32"``: every gradient f32. The state's and the gate parameters'
    gradients are f32 either way.
    """
    if forward.get("op") != "gated_delta":
        raise ValueError(f"gated_delta_grad_config: expected a gated_delta configuration, "
                         f"got {forward.get('op')!r}")
    cfg = {"op": "gated_delta_grad"}
    for key in ("update", "K", "V", "qk_dtype", "v_dtype", "gate", "beta_dtype", "qk_l2norm",
                "beta_activation", "gate_activation", "lower_bound", "A_log_dtype",
                "dt_bias_dtype", "scale", "state_layout", "initial_state_dtype",
                "cu_seqlens_dtype"):
        cfg[key] = copy.deepcopy(forward[key])
    cfg["d_final_state_dtype"] = "f32" if d_final_state else None
    # The kept states' dtype, the forward's boundary dtype (named only when
    # not f32: the f32 configurations keep their keys).
    if forward.get("boundary_dtype", "f32") != "f32":
        cfg["chunk_states_dtype"] = forward["boundary_dtype"]
    if grads_dtype not in ("input", "f32"):
        raise ValueError(f"gated_delta_grad_config: grads_dtype: expected 'input' or 'f32', "
                         f"got {grads_dtype!r}")
    inputs = [cfg["qk_dtype"], cfg["v_dtype"], cfg["gate"]["dtype"] if cfg["gate"] else "f32",
              cfg["beta_dtype"] or "f32"]
    if grads_dtype == "input" and any(d != "f32" for d in inputs):
        cfg["grads_dtype"] = "input"
    cfg["chunk"] = int(chunk)
    cfg["sub_chunk"] = min(16, int(chunk))
    # Columns of V per program: the chip table's gradient V block (32 on
    # NVIDIA, with 256 threads; lowering/Chips.h), unless GRAD_V_BLOCK
    # (KDA_GRAD_V_BLOCK) names one: measurements of other blocks.
    if GRAD_V_BLOCK and cfg["V"] % GRAD_V_BLOCK == 0 and cfg["V"] > GRAD_V_BLOCK:
        cfg["v_block"] = GRAD_V_BLOCK
    validate(cfg)
    return cfg


def decode_step_config(*, K: int, V: int, qk_dtype: str, v_dtype: str,
                       gate: Optional[Dict[str, str]] = None,
                       beta_dtype: Optional[str] = None,
                       update: str = "delta",
                       qk_l2norm: bool = False,
                       beta_activation: str = "none",
                       gate_activation: str = "none",
                       lower_bound: Optional[float] = None,
                       A_log_dtype: Optional[str] = None,
                       dt_bias_dtype: Optional[str] = None,
                       scale: Optional[float] = None,
                       state_layout: str = "k_major",
                       state_dtype: str = "f32",
                       indices_dtype: str = "i32",
                       read_indices_dtype: Optional[str] = None,
                       multi_token: bool = False,
                       read_pool: bool = False) -> Dict[str, Any]:
    """Canonical configuration of one ``kda.decode_step`` kernel (state pool).

    Like gated_delta, everything but K and V is dynamic: N (sequences), H,
    HV (heads) and P (pool slots) are symbols of the bundle's manifest.
    ``read_indices_dtype``: the step reads slot ``read_indices[n]`` and
    writes ``indices[n]`` (the key is present only then, so configurations
    without it hash as before). ``multi_token``: T tokens per sequence (q
    ``[N, T, H, K]``, indices ``[N, T]``; likewise present only when set).
    ``read_pool``: start states come from a second pool of the same dtype and
    layout (``read_pool``, P_r slots; a per-sequence decode reads the
    caller's states so, with no copy); present only when set.
    """
    cfg = {
        "op": "decode_step",
        **_recurrence_fields(update, K, V, qk_dtype, v_dtype, gate, beta_dtype, qk_l2norm,
                             beta_activation, gate_activation, lower_bound, A_log_dtype,
                             dt_bias_dtype, scale, state_layout),
        "state_dtype": state_dtype,
        "indices_dtype": indices_dtype,
    }
    if read_indices_dtype is not None:
        cfg["read_indices_dtype"] = read_indices_dtype
    if multi_token:
        cfg["multi_token"] = True
    if read_pool:
        cfg["read_pool"] = True
    validate(cfg)
    return cfg


def window_attention_config(*, K: int, V: int, qk_dtype: str, v_dtype: str, window: int,
                            scale: Optional[float] = None,
                            cu_seqlens_dtype: Optional[str] = None,
                            window_sizes_dtype: Optional[str] = None,
                            earlier_keys: bool = False) -> Dict[str, Any]:
    """Canonical configuration of one ``kda.window_attention`` kernel.

    The window W is the op's attribute, so it is part of the configuration;
    B, T and the head counts HQ, HK, HV, HO are dynamic. Per-position
    windows (the op's ``window_sizes`` tensor [T], int32 / int64) are
    ``window = 0`` with ``window_sizes_dtype`` (a key only such
    configurations have, so that the others hash as before). ``earlier_keys``
    (the op's attribute, a key only where true): k and v hold S >= T rows of
    which the queries are the last T (dense sequences only).
    """
    cfg = {
        "op": "window_attention",
        "K": int(K), "V": int(V),
        "qk_dtype": qk_dtype, "v_dtype": v_dtype,
        "window": window,
        "scale": _normalise_scale(scale, K),
        "cu_seqlens_dtype": cu_seqlens_dtype,
    }
    if window_sizes_dtype is not None:
        cfg["window_sizes_dtype"] = window_sizes_dtype
    if earlier_keys:
        cfg["earlier_keys"] = True
    validate(cfg)
    return cfg


def _layer_head(op: str, gated_delta: Dict[str, Any], mix: str) -> Dict[str, Any]:
    """The fields every layer configuration (hybrid, multi_scale) starts
    with: its op, its gated delta part's head dims and dtypes, the mix and
    the part itself (a copy)."""
    gd = dict(gated_delta)
    return {"op": op, "K": gd["K"], "V": gd["V"], "qk_dtype": gd["qk_dtype"], "v_dtype": gd["v_dtype"],
            "mix": mix, "gated_delta": gd}


def hybrid_config(*, gated_delta: Dict[str, Any], window: int, mix: str,
                  window_scale: Optional[float] = None,
                  z: Optional[Dict[str, str]] = None,
                  schedule: str = "fused") -> Dict[str, Any]:
    """Canonical configuration of one hybrid layer: a ``kda.gated_delta``
    (``gated_delta``, its own configuration) and a ``kda.window_attention``
    of window ``window`` over the same q, k, v (and cu_seqlens), combined by
    ``kda.hybrid``: ``mix`` "sum" (o = o_linear + o_window) or "gated"
    (o = sigmoid(z) o_linear + (1 - sigmoid(z)) o_window, with ``z`` =
    {"form": "head" ([B, T, HV]) or "channel" ([B, T, HV, V]), "dtype"}).
    The bundle holds the branches' kernels and one entry for the layer
    (kda-gpu-layer-entry) that runs them behind one call. ``schedule``
    "fused": the mix in the window kernel's epilogue, after the state pass
    (kda-fuse-window-mix); "overlap": the same window beside the state pass
    (the state pass on the side stream, a multiprocessor a block, publishing
    its progress, which the window waits for on NVIDIA; "pieces": the
    layer as pipelined pieces of one sequence (kda_prepare_pieces): the
    gated delta part with fp32 states between pieces (``gated_delta`` takes
    them: kda.tune.pieces_config) and the window over earlier keys, its k
    and v the layer's ``window_k`` and ``window_v`` (the caller's k and v
    again), each piece's window after its state pass. The configuration
    says so only for "overlap" and "pieces")."""
    cfg = {
        **_layer_head("hybrid", gated_delta, mix),
        "window": window,
        "window_scale": _normalise_scale(window_scale, gated_delta["K"]),
        "z": dict(z) if z is not None else None,
    }
    if schedule != "fused":
        cfg["schedule"] = schedule
    validate(cfg)
    return cfg


def multi_scale_config(*, gated_delta: Dict[str, Any], scales: int, mix: str,
                       decay_scales: Optional[List[float]] = None,
                       z_dtype: Optional[str] = None) -> Dict[str, Any]:
    """Canonical configuration of one multi-scale layer (``kda.multi_scale``,
    SPEC.md section 5): ``scales`` recurrences of the gated delta rule
    ``gated_delta`` (its own configuration: the gate form and dtype, beta,
    the prologue) over the same q, k, v and beta, each with its own gate:
    ``decay_scales`` [c_1, .., c_M] (scale m decays with c_m * g, one gate
    tensor) or, without them, M gate tensors of the gated delta's form.
    ``mix`` "sum" (o = sum_m o_m) or "gated" (o = sum_m sigmoid(z[..., m])
    o_m, z [B, T, HV, M] in ``z_dtype``). The bundle holds the recurrence's
    kernels, the mix's (and the scaled gates') and one entry for the layer
    (kda-gpu-layer-entry)."""
    cfg = {
        **_layer_head("multi_scale", gated_delta, mix),
        "scales": scales,
        "decay_scales": [float(c) for c in decay_scales] if decay_scales is not None else None,
        "z_dtype": z_dtype,
    }
    validate(cfg)
    return cfg


def _normalise_scale(scale: Optional[float], K: int) -> Optional[float]:
    if scale is None:
        return None
    scale = float(scale)
    if scale == float(K) ** -0.5 or scale == 1.0 / math.sqrt(K):
        return None
    return scale


def _validate_layer_part(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """A layer's (hybrid, multi_scale) gated delta part, validated, with the
    layer's K, V and dtypes its own; returns it."""
    gd = cfg.get("gated_delta")
    if not isinstance(gd, dict) or gd.get("op") != "gated_delta":
        raise ValueError("gated_delta: expected a gated_delta configuration")
    validate(gd)
    for key in ("K", "V", "qk_dtype", "v_dtype"):
        if cfg.get(key) != gd[key]:
            raise ValueError(f"{key}: expected the gated delta's {gd[key]!r}, got {cfg.get(key)!r}")
    return gd


def validate(cfg: Dict[str, Any]) -> None:
    """Raises ValueError for a configuration the kda ops cannot express."""
    def dtype(name, allowed=("f32", "f16", "bf16"), optional=True):
        value = cfg.get(name)
        if value is None and optional:
            return
        if value not in allowed:
            raise ValueError(f"{name}: expected one of {allowed}, got {value!r}")

    if cfg.get("op") not in ("gated_delta", "gated_delta_grad", "decode_step", "window_attention",
                             "hybrid", "multi_scale"):
        raise ValueError(f"op: unknown {cfg.get('op')!r}")
    if cfg["op"] == "multi_scale":
        gd = _validate_layer_part(cfg)
        # kda.multi_scale has no gate activation (its gates are log-space decays) and the layer
        # entry's outputs are o alone.
        for key in ("initial_state_dtype", "final_state_dtype", "boundary_interval", "A_log_dtype",
                    "dt_bias_dtype"):
            if gd.get(key):
                raise ValueError(f"gated_delta.{key}: a multi-scale layer takes none (its gates are "
                                 "log-space decays, given as they are; no states in or out yet)")
        if gd.get("gate_activation", "none") != "none" or gd.get("lower_bound") is not None:
            raise ValueError("gated_delta.gate_activation: a multi-scale layer's gates are log-space decays "
                             "(apply the gate's activation first)")
        if not gd.get("gate"):
            raise ValueError("gated_delta.gate: a multi-scale layer decays each scale by its gate")
        m = cfg.get("scales")
        if not isinstance(m, int) or isinstance(m, bool) or m < 1:
            raise ValueError(f"scales: expected an integer >= 1, got {m!r}")
        c = cfg.get("decay_scales")
        if c is not None and (not isinstance(c, list) or len(c) != m
                              or not all(isinstance(x, float) and math.isfinite(x) and x >= 0 for x in c)):
            raise ValueError(f"decay_scales: expected {m} finite non-negative numbers, got {c!r}")
        if cfg.get("mix") not in ("sum", "gated"):
            raise ValueError(f"mix: expected sum or gated, got {cfg.get('mix')!r}")
        if cfg["mix"] == "gated":
            dtype("z_dtype", optional=False)
        elif cfg.get("z_dtype") is not None:
            raise ValueError("z_dtype: the sum mix takes no z")
        return
    if cfg["op"] == "hybrid":
        gd = _validate_layer_part(cfg)
        # The layer entry's outputs are o alone, but for the pieces schedule's
        # fp32 states passed between pieces.
        pieces = cfg.get("schedule") == "pieces"
        for key in ("initial_state_dtype", "final_state_dtype", "boundary_interval"):
            if gd.get(key) and not (pieces and key != "boundary_interval" and gd[key] == "f32"):
                raise ValueError(f"gated_delta.{key}: a hybrid layer takes no states yet "
                                 "(run chunk_kda and window_attention for states)")
        if pieces and (gd.get("initial_state_dtype") != "f32" or gd.get("final_state_dtype") != "f32"
                       or gd.get("cu_seqlens_dtype") is not None):
            raise ValueError("schedule 'pieces': the gated delta part passes fp32 states between the pieces "
                             "of one dense sequence (kda.tune.pieces_config)")
        w = cfg.get("window")
        if not isinstance(w, int) or isinstance(w, bool) or w < 1:
            raise ValueError(f"window: expected an integer >= 1, got {w!r}")
        if cfg.get("mix") not in ("sum", "gated"):
            raise ValueError(f"mix: expected sum or gated, got {cfg.get('mix')!r}")
        if cfg.get("schedule", "overlap") not in ("overlap", "pieces"):
            raise ValueError(f"schedule: expected 'overlap', 'pieces' or no key (fused), "
                             f"got {cfg.get('schedule')!r}")
        z = cfg.get("z")
        if cfg["mix"] == "gated":
            if not isinstance(z, dict) or z.get("form") not in ("head", "channel") or \
                    z.get("dtype") not in ("f32", "f16", "bf16"):
                raise ValueError(f"z: the gated mix needs {{'form': 'head' | 'channel', 'dtype'}}, got {z!r}")
        elif z is not None:
            raise ValueError("z: the sum mix takes no gate")
        return
    for d in ("K", "V"):
        if not isinstance(cfg.get(d), int) or isinstance(cfg.get(d), bool) or cfg[d] <= 0:
            raise ValueError(f"{d}: expected a positive integer, got {cfg.get(d)!r}")
    if cfg["op"] == "window_attention":
        dtype("qk_dtype", optional=False)
        dtype("v_dtype", optional=False)
        w = cfg.get("window")
        if "window_sizes_dtype" in cfg:
            dtype("window_sizes_dtype", allowed=("i32", "i64"), optional=False)
            if w != 0 or isinstance(w, bool):
                raise ValueError(f"window: expected 0 with per-position window sizes, got {w!r}")
        elif not isinstance(w, int) or isinstance(w, bool) or w < 1:
            raise ValueError(f"window: expected an integer >= 1, got {w!r}")
        dtype("cu_seqlens_dtype", allowed=("i32", "i64"))
        if "earlier_keys" in cfg:
            if cfg["earlier_keys"] is not True:
                raise ValueError(f"earlier_keys: expected true (or no key), got {cfg['earlier_keys']!r}")
            if cfg["cu_seqlens_dtype"] is not None:
                raise ValueError("earlier_keys: takes dense sequences, not cu_seqlens")
        return
    if cfg["update"] not in ("delta", "additive"):
        raise ValueError(f"update: expected delta or additive, got {cfg['update']!r}")
    dtype("qk_dtype", optional=False)
    dtype("v_dtype", optional=False)
    if cfg["gate"] is not None:
        if cfg["gate"].get("form") not in ("channel", "head"):
            raise ValueError(f"gate.form: expected channel or head, got {cfg['gate'].get('form')!r}")
        if cfg["gate"].get("dtype") not in ("f32", "f16", "bf16"):
            raise ValueError(f"gate.dtype: expected f32, f16 or bf16, got {cfg['gate'].get('dtype')!r}")
    dtype("beta_dtype")
    dtype("A_log_dtype")
    dtype("dt_bias_dtype")
    if cfg["beta_activation"] not in ("none", "sigmoid", "sigmoid_neg_eigval"):
        raise ValueError(f"beta_activation: unknown {cfg['beta_activation']!r}")
    if cfg["beta_activation"] != "none" and cfg["beta_dtype"] is None:
        raise ValueError("beta_activation needs a beta tensor")
    if cfg["gate_activation"] not in ("none", "softplus", "lower_bound"):
        raise ValueError(f"gate_activation: unknown {cfg['gate_activation']!r}")
    if cfg["gate_activation"] != "none" and cfg["gate"] is None:
        raise ValueError("gate_activation needs a gate tensor")
    if cfg["gate_activation"] == "none" and (cfg["A_log_dtype"] or cfg["dt_bias_dtype"]):
        raise ValueError("A_log / dt_bias are only used with a gate activation")
    if cfg["gate_activation"] == "lower_bound":
        lb = cfg["lower_bound"]
        if lb is None or not (-5.0 <= lb < 0.0):
            raise ValueError(f"lower_bound: the lower-bound gate needs a value in [-5, 0), got {lb!r}")
    elif cfg["lower_bound"] is not None:
        raise ValueError("lower_bound is only used with the lower_bound gate activation")
    if cfg["update"] == "additive" and cfg["beta_dtype"] is not None:
        raise ValueError("the additive update takes no beta")
    if cfg["state_layout"] not in ("k_major", "v_major"):
        raise ValueError(f"state_layout: expected k_major or v_major, got {cfg['state_layout']!r}")
    if cfg["op"] == "gated_delta_grad":
        # What kda.gated_delta_grad's verifier takes (the derived gradient).
        if cfg["update"] != "delta":
            raise ValueError("gated_delta_grad: the gradient is derived for the delta rule only")
        if cfg["gate"] is None:
            raise ValueError("gated_delta_grad: the gradient is derived for gated recurrences only")
        dtype("initial_state_dtype", allowed=("f32", "bf16"))
        dtype("d_final_state_dtype", allowed=("f32", "bf16"))
        dtype("chunk_states_dtype", allowed=("f32", "bf16"))
        dtype("cu_seqlens_dtype", allowed=("i32", "i64"))
        if cfg.get("grads_dtype") not in (None, "input"):
            raise ValueError(f"grads_dtype: expected 'input' or absent (f32), got {cfg['grads_dtype']!r}")
        if cfg["chunk"] not in (16, 32, 64):
            raise ValueError(f"chunk: expected 16, 32 or 64, got {cfg['chunk']}")
        if cfg["sub_chunk"] <= 0 or cfg["chunk"] % cfg["sub_chunk"]:
            raise ValueError(f"sub_chunk {cfg['sub_chunk']} must divide chunk {cfg['chunk']}")
        return
    if cfg["op"] == "gated_delta":
        dtype("initial_state_dtype")
        dtype("final_state_dtype")
        dtype("cu_seqlens_dtype", allowed=("i32", "i64"))
        if cfg["chunk"] not in (0, 16, 32, 64):
            raise ValueError(f"chunk: expected 16, 32 or 64, got {cfg['chunk']}")
        if cfg["sub_chunk"] <= 0 or (cfg["chunk"] and cfg["chunk"] % cfg["sub_chunk"]):
            raise ValueError(f"sub_chunk {cfg['sub_chunk']} must divide chunk {cfg['chunk']}")
        if "boundary_interval" in cfg:
            bi = cfg["boundary_interval"]
            if not isinstance(bi, int) or isinstance(bi, bool) or bi <= 0:
                raise ValueError(f"boundary_interval: expected a positive number of tokens, got {bi!r}")
            c = cfg["chunk"] or 16  # the targets' default chunk
            if bi % c:
                raise ValueError(f"boundary_interval {bi} must be a multiple of the chunk {c} "
                                 "(boundary states are taken where chunks start)")
            dtype("boundary_dtype", optional=False)
            dtype("boundary_indices_dtype", allowed=("i32", "i64"))
    else:
        dtype("state_dtype", optional=False)
        dtype("indices_dtype", allowed=("i32", "i64"), optional=False)
        dtype("read_indices_dtype", allowed=("i32", "i64"))
        if cfg.get("read_pool") not in (None, True):
            raise ValueError(f"read_pool: expected true (or absent), got {cfg['read_pool']!r}")


TILE_KEYS = ("chunk", "sub_chunk", "v_block", "threads")
# Optional tile keys, kept only where they differ from kda-compile's default
# (so tiles without them hash as before): state_stages N is
# --state-stages=N (chunks in flight in the state program's cp.async
# pipeline, 2 to 8); segments P is --segments=P (sequence-parallel segments
# of each sequence: summary, combine and segmented state kernels).
OPTIONAL_TILE_KEYS = {"state_stages": 2, "segments": 1}
# Keys of older tuning databases whose choice no kernel has any more (the
# split-K state program's prefetch, removed in the eighteenth session): read
# and dropped, so a database that has them still loads.
OBSOLETE_TILE_KEYS = ("state_prefetch",)


def normalise_tile(tile: Optional[Dict[str, int]]) -> Optional[Dict[str, int]]:
    """A tuned tile as kda-compile's flags take it (chunk, sub_chunk,
    v_block, block threads, optionally state_stages and segments), or None for the
    chip's defaults."""
    if tile is None:
        return None
    out = {k: int(tile[k]) for k in TILE_KEYS if k in tile}
    if set(out) != set(TILE_KEYS):
        raise ValueError(f"tile: expected the keys {TILE_KEYS}, got {sorted(tile)}")
    unknown = set(tile) - set(TILE_KEYS) - set(OPTIONAL_TILE_KEYS) - set(OBSOLETE_TILE_KEYS)
    if unknown:
        raise ValueError(f"tile: unknown keys {sorted(unknown)} (known: {TILE_KEYS} and "
                         f"{tuple(OPTIONAL_TILE_KEYS)})")
    for k, default in OPTIONAL_TILE_KEYS.items():
        if k in tile and int(tile[k]) != default:
            out[k] = int(tile[k])
    return out


def config_hash(cfg: Dict[str, Any], chip: str, tile: Optional[Dict[str, int]] = None) -> str:
    what = {"generator": GENERATOR_VERSION, "chip": chip, "config": cfg}
    if tile is not None:  # absent for default tiles: their hash is unchanged
        what["tile"] = normalise_tile(tile)
    blob = json.dumps(what, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


# bundle_name's default: the fingerprint of the compiler this process would use.
CURRENT = object()


def fingerprint_tag(fingerprint: str) -> str:
    """The short form of a compiler fingerprint used in directory names."""
    return hashlib.sha256(fingerprint.encode()).hexdigest()[:12]


def bundle_stem(cfg: Dict[str, Any], chip: str, tile: Optional[Dict[str, int]] = None) -> str:
    return (f"{cfg['op']}-k{cfg['K']}-v{cfg['V']}-{cfg['qk_dtype']}-"
            f"{config_hash(cfg, chip, tile)[:16]}")


def bundle_name(cfg: Dict[str, Any], chip: str, tile: Optional[Dict[str, int]] = None,
                fingerprint: Any = CURRENT) -> str:
    """The bundle directory's name. The compiler fingerprint is part of it
    (the cache key); with an unknown fingerprint (no compiler here) the name
    has none, which is also what a bundle built by hand is called."""
    if fingerprint is CURRENT:
        fingerprint = current_fingerprint()
    stem = bundle_stem(cfg, chip, tile)
    if fingerprint:
        return f"{stem}-{fingerprint_tag(fingerprint)}.{chip}"
    return f"{stem}.{chip}"


def describe(cfg: Dict[str, Any]) -> str:
    """A short human-readable summary of a configuration."""
    if cfg["op"] == "hybrid":
        mix = cfg["mix"] + (f":{cfg['z']['form']}:{cfg['z']['dtype']}" if cfg["z"] else "")
        scale = f" window_scale={cfg['window_scale']:g}" if cfg["window_scale"] is not None else ""
        sched = f" {cfg['schedule']}" if cfg.get("schedule") in ("overlap", "pieces") else ""
        return f"hybrid {mix}{sched} window={cfg['window']}{scale} of [{describe(cfg['gated_delta'])}]"
    if cfg["op"] == "multi_scale":
        mix = cfg["mix"] + (f":{cfg['z_dtype']}" if cfg["mix"] == "gated" else "")
        scales = (f"decay_scales={','.join(f'{c:g}' for c in cfg['decay_scales'])}"
                  if cfg["decay_scales"] is not None else "gates")
        return f"multi_scale {mix} M={cfg['scales']} {scales} of [{describe(cfg['gated_delta'])}]"
    if cfg["op"] == "window_attention":
        window = (f"window=per-position:{cfg['window_sizes_dtype']}" if "window_sizes_dtype" in cfg
                  else f"window={cfg['window']}")
        parts = [cfg["op"], f"K={cfg['K']}", f"V={cfg['V']}", f"qk={cfg['qk_dtype']}",
                 f"v={cfg['v_dtype']}", window]
        if cfg["scale"] is not None:
            parts.append(f"scale={cfg['scale']:g}")
        if cfg["cu_seqlens_dtype"]:
            parts.append(f"varlen={cfg['cu_seqlens_dtype']}")
        if cfg.get("earlier_keys"):
            parts.append("earlier_keys")
        return " ".join(parts)
    parts = [cfg["op"], cfg["update"], f"K={cfg['K']}", f"V={cfg['V']}",
             f"qk={cfg['qk_dtype']}", f"v={cfg['v_dtype']}"]
    if cfg["gate"]:
        parts.append(f"gate={cfg['gate']['form']}:{cfg['gate']['dtype']}")
    if cfg["beta_dtype"]:
        parts.append(f"beta={cfg['beta_dtype']}")
    if cfg["qk_l2norm"]:
        parts.append("l2norm")
    if cfg["beta_activation"] != "none":
        parts.append(f"beta_act={cfg['beta_activation']}")
    if cfg["gate_activation"] != "none":
        ga = cfg["gate_activation"]
        if ga == "lower_bound":
            ga += f"({cfg['lower_bound']:g})"
        parts.append(f"gate_act={ga}")
        if cfg["A_log_dtype"]:
            parts.append("A_log")
        if cfg["dt_bias_dtype"]:
            parts.append("dt_bias")
    if cfg["scale"] is not None:
        parts.append(f"scale={cfg['scale']:g}")
    if cfg["op"] == "gated_delta_grad":
        if cfg["initial_state_dtype"]:
            parts.append(f"h0={cfg['initial_state_dtype']}")
        if cfg["d_final_state_dtype"]:
            parts.append(f"dht={cfg['d_final_state_dtype']}")
        if cfg.get("chunk_states_dtype"):
            parts.append(f"states={cfg['chunk_states_dtype']}")
        if cfg.get("grads_dtype"):
            parts.append(f"grads={cfg['grads_dtype']}")
        parts.append(cfg["state_layout"])
        if cfg["cu_seqlens_dtype"]:
            parts.append(f"varlen={cfg['cu_seqlens_dtype']}")
        parts.append(f"chunk={cfg['chunk']}")
        if cfg.get("v_block"):
            parts.append(f"v_block={cfg['v_block']}")
    elif cfg["op"] == "gated_delta":
        if cfg["initial_state_dtype"]:
            parts.append(f"h0={cfg['initial_state_dtype']}")
        if cfg["final_state_dtype"]:
            parts.append(f"ht={cfg['final_state_dtype']}")
        if cfg["initial_state_dtype"] or cfg["final_state_dtype"]:
            parts.append(cfg["state_layout"])
        if cfg["cu_seqlens_dtype"]:
            parts.append(f"varlen={cfg['cu_seqlens_dtype']}")
        if cfg.get("boundary_interval"):
            parts.append(f"boundary={cfg['boundary_interval']}:{cfg['boundary_dtype']}:{cfg['state_layout']}")
            if cfg.get("boundary_indices_dtype"):
                parts.append(f"boundary_slots={cfg['boundary_indices_dtype']}")
        parts.append(f"chunk={cfg['chunk'] or 'default'}")
    else:
        parts.append(f"pool={cfg['state_dtype']}:{cfg['state_layout']}")
        parts.append(f"indices={cfg['indices_dtype']}")
        if cfg.get("read_indices_dtype"):
            parts.append(f"read_indices={cfg['read_indices_dtype']}")
        if cfg.get("multi_token"):
            parts.append("tokens=T")
        if cfg.get("read_pool"):
            parts.append("read_pool")
    return " ".join(parts)


# ---------------------------------------------------------------------------
# MLIR
# ---------------------------------------------------------------------------

def _tensor(dims: List[Any], dtype: str) -> str:
    return "tensor<" + "x".join("?" if d is None else str(d) for d in dims) + "x" + dtype + ">"


def _f64(x: float) -> str:
    # MLIR float literals need a '.'; %.17e round-trips every double.
    return "%.17e" % x


def _prologue_attrs(cfg: Dict[str, Any]) -> List[str]:
    attrs = []
    if cfg["qk_l2norm"]:
        attrs.append("qk_l2norm")
    if cfg["beta_activation"] != "none":
        attrs.append(f"beta_activation = #kda<beta {cfg['beta_activation']}>")
    if cfg["gate_activation"] != "none":
        attrs.append(f"gate_activation = #kda<gate {cfg['gate_activation']}>")
    if cfg["lower_bound"] is not None:
        attrs.append(f"lower_bound = {_f64(cfg['lower_bound'])} : f64")
    if cfg["scale"] is not None:
        attrs.append(f"scale = {_f64(cfg['scale'])} : f64")
    if cfg["state_layout"] != "k_major":
        attrs.append(f"state_layout = #kda<layout {cfg['state_layout']}>")
    return attrs


def to_mlir(cfg: Dict[str, Any]) -> str:
    """The module (one function, one kda op) kda-compile turns into the bundle."""
    validate(cfg)
    if cfg["op"] == "gated_delta":
        return _gated_delta_mlir(cfg)
    if cfg["op"] == "gated_delta_grad":
        return _gated_delta_grad_mlir(cfg)
    if cfg["op"] == "window_attention":
        return _window_attention_mlir(cfg)
    if cfg["op"] == "hybrid":
        return _hybrid_mlir(cfg)
    if cfg["op"] == "multi_scale":
        return _multi_scale_mlir(cfg)
    return _decode_step_mlir(cfg)


def _recurrence_operands(cfg: Dict[str, Any], B) -> List[Tuple[str, str, List[Any], str]]:
    """The optional operands kda.gated_delta and its gradient share, in op
    order: (argument name, keyword, dims, dtype) for gate, beta,
    initial_state, cu_seqlens, A_log and dt_bias where present."""
    K, V = cfg["K"], cfg["V"]
    state_tail = [K, V] if cfg["state_layout"] == "k_major" else [V, K]
    out = []
    if cfg["gate"]:
        dims = [B, None, None, K] if cfg["gate"]["form"] == "channel" else [B, None, None]
        out.append(("g", "gate", dims, cfg["gate"]["dtype"]))
    if cfg["beta_dtype"]:
        out.append(("beta", "beta", [B, None, None], cfg["beta_dtype"]))
    if cfg["initial_state_dtype"]:
        out.append(("h0", "initial_state", [None, None] + state_tail, cfg["initial_state_dtype"]))
    if cfg["cu_seqlens_dtype"] is not None:
        out.append(("cu_seqlens", "cu_seqlens", [None], cfg["cu_seqlens_dtype"]))
    if cfg["A_log_dtype"]:
        out.append(("A_log", "A_log", [None], cfg["A_log_dtype"]))
    if cfg["dt_bias_dtype"]:
        dims = [None, K] if cfg["gate"]["form"] == "channel" else [None]
        out.append(("dt_bias", "dt_bias", dims, cfg["dt_bias_dtype"]))
    return out


def _gated_delta_mlir(cfg: Dict[str, Any]) -> str:
    K, V = cfg["K"], cfg["V"]
    varlen = cfg["cu_seqlens_dtype"] is not None
    B = 1 if varlen else None  # cu_seqlens requires B = 1
    state_tail = [K, V] if cfg["state_layout"] == "k_major" else [V, K]
    tq = _tensor([B, None, None, K], cfg["qk_dtype"])
    tv = _tensor([B, None, None, V], cfg["v_dtype"])
    args, operands, results = [], [], []
    args += [f"%q: {tq}", f"%k: {tq}", f"%v: {tv}"]
    for name, keyword, dims, dtype in _recurrence_operands(cfg, B):
        t = _tensor(dims, dtype)
        args.append(f"%{name}: {t}")
        operands.append(f"{keyword}(%{name} : {t})")
    pool_form = bool(cfg.get("boundary_indices_dtype"))
    if pool_form:
        tbt = _tensor([None, None], cfg["boundary_indices_dtype"])
        args.append(f"%boundary_indices: {tbt}")
        operands.append(f"boundary_indices(%boundary_indices : {tbt})")
    attrs = _prologue_attrs(cfg)
    if cfg["chunk"]:
        attrs.append(f"tile = #kda.tile<chunk = {cfg['chunk']}, sub_chunk = {cfg['sub_chunk']}>")
    results.append(("%o", tv))
    result_types = f"-> {tv}"
    if cfg["final_state_dtype"]:
        tsf = _tensor([None, None] + state_tail, cfg["final_state_dtype"])
        results.append(("%ht", tsf))
        result_types += f" final_state {tsf}"
    if cfg.get("boundary_interval"):
        attrs.append(f"boundary_interval = {cfg['boundary_interval']} : i64")
        tbs = _tensor(([None, None] if pool_form else [None, None, None]) + state_tail,
                      cfg["boundary_dtype"])
        results.append(("%hb", tbs))
        result_types += f" boundary_states {tbs}"
    names = ", ".join(r[0] for r in results)
    types = ", ".join(r[1] for r in results)
    op = (f"  {names} = kda.gated_delta {cfg['update']} %q, %k, %v"
          + "".join(" " + o for o in operands)
          + " {" + ", ".join(attrs) + "}"
          + f" : {tq}, {tq}, {tv} {result_types}")
    return (f"// kda configuration: {describe(cfg)}\n"
            f"func.func @kda_gated_delta({', '.join(args)}) -> ({types}) {{\n"
            f"{op}\n"
            f"  return {names} : {types}\n"
            "}\n")


def _gated_delta_grad_mlir(cfg: Dict[str, Any]) -> str:
    K, V = cfg["K"], cfg["V"]
    varlen = cfg["cu_seqlens_dtype"] is not None
    B = 1 if varlen else None
    state_tail = [K, V] if cfg["state_layout"] == "k_major" else [V, K]
    f32 = lambda dims: _tensor(dims, "f32")  # noqa: E731
    tq = _tensor([B, None, None, K], cfg["qk_dtype"])
    tv = _tensor([B, None, None, V], cfg["v_dtype"])
    args = [f"%q: {tq}", f"%k: {tq}", f"%v: {tv}", f"%d_o: {tv}"]
    # The gradients of q, k, v, the gate and beta in their inputs' dtypes
    # with grads_dtype "input", else f32 (the others always f32).
    own = cfg.get("grads_dtype") == "input"
    grad = lambda dims, dtype: _tensor(dims, dtype if own else "f32")  # noqa: E731
    operands, results = [], [("%d_q", grad([B, None, None, K], cfg["qk_dtype"])),
                             ("%d_k", grad([B, None, None, K], cfg["qk_dtype"])),
                             ("%d_v", grad([B, None, None, V], cfg["v_dtype"]))]
    tails = []
    # Every input the forward reads has its gradient (cu_seqlens none).
    grad_names = {"gate": ("%d_gate", "d_gate"), "beta": ("%d_beta", "d_beta"),
                  "initial_state": ("%d_h0", "d_initial_state"), "A_log": ("%d_A_log", "d_A_log"),
                  "dt_bias": ("%d_dt_bias", "d_dt_bias")}
    for name, keyword, dims, dtype in _recurrence_operands(cfg, B):
        t = _tensor(dims, dtype)
        args.append(f"%{name}: {t}")
        operands.append(f"{keyword}(%{name} : {t})")
        if keyword in grad_names:
            tails.append(grad_names[keyword]
                         + (grad(dims, dtype) if keyword in ("gate", "beta") else f32(dims),))
    if cfg["d_final_state_dtype"]:
        tdh = _tensor([None, None] + state_tail, cfg["d_final_state_dtype"])
        args.append(f"%d_ht: {tdh}")
        operands.append(f"d_final_state(%d_ht : {tdh})")
    tcs = _tensor([None, None, None] + state_tail, cfg.get("chunk_states_dtype") or "f32")
    args.append(f"%chunk_states: {tcs}")
    operands.append(f"chunk_states(%chunk_states : {tcs})")
    attrs = _prologue_attrs(cfg)
    attrs.append(f"states_interval = {cfg['chunk']} : i64")
    vb = f", v_block = {cfg['v_block']}" if cfg.get("v_block") else ""
    attrs.append(f"tile = #kda.tile<chunk = {cfg['chunk']}, sub_chunk = {cfg['sub_chunk']}{vb}>")
    results += [(name, t) for name, _, t in tails]
    names = ", ".join(r[0] for r in results)
    types = ", ".join(r[1] for r in results)
    result_types = (f"-> {results[0][1]}, {results[1][1]}, {results[2][1]}"
                    + "".join(f" {kw} {t}" for _, kw, t in tails))
    op = (f"  {names} = kda.gated_delta_grad {cfg['update']} %q, %k, %v, %d_o"
          + "".join(" " + o for o in operands)
          + " {" + ", ".join(attrs) + "}"
          + f" : {tq}, {tq}, {tv}, {tv} {result_types}")
    return (f"// kda configuration: {describe(cfg)}\n"
            f"func.func @kda_gated_delta_grad({', '.join(args)}) -> ({types}) {{\n"
            f"{op}\n"
            f"  return {names} : {types}\n"
            "}\n")


def _decode_step_mlir(cfg: Dict[str, Any]) -> str:
    K, V = cfg["K"], cfg["V"]
    H = HV = None  # dynamic head counts
    state_tail = [K, V] if cfg["state_layout"] == "k_major" else [V, K]
    lead = [None, None] if cfg.get("multi_token") else [None]  # (N) or (N, T)
    tq = _tensor(lead + [H, K], cfg["qk_dtype"])
    tv = _tensor(lead + [HV, V], cfg["v_dtype"])
    args, operands = [f"%q: {tq}", f"%k: {tq}", f"%v: {tv}"], []
    if cfg["gate"]:
        dims = lead + ([HV, K] if cfg["gate"]["form"] == "channel" else [HV])
        tg = _tensor(dims, cfg["gate"]["dtype"])
        args.append(f"%g: {tg}")
        operands.append(f"gate(%g : {tg})")
    if cfg["beta_dtype"]:
        tb = _tensor(lead + [HV], cfg["beta_dtype"])
        args.append(f"%beta: {tb}")
        operands.append(f"beta(%beta : {tb})")
    if cfg["A_log_dtype"]:
        ta = _tensor([HV], cfg["A_log_dtype"])
        args.append(f"%A_log: {ta}")
        operands.append(f"A_log(%A_log : {ta})")
    if cfg["dt_bias_dtype"]:
        dims = [HV, K] if cfg["gate"]["form"] == "channel" else [HV]
        td = _tensor(dims, cfg["dt_bias_dtype"])
        args.append(f"%dt_bias: {td}")
        operands.append(f"dt_bias(%dt_bias : {td})")
    ti = _tensor(lead, cfg["indices_dtype"])
    tp = _tensor([None, HV] + state_tail, cfg["state_dtype"])
    args.append(f"%indices: {ti}")
    operands.append(f"indices(%indices : {ti})")
    if cfg.get("read_indices_dtype"):
        tr = _tensor([None], cfg["read_indices_dtype"])
        args.append(f"%read_indices: {tr}")
        operands.append(f"read_indices(%read_indices : {tr})")
    if cfg.get("read_pool"):
        args.append(f"%read_pool: {tp}")
        operands.append(f"read_pool(%read_pool : {tp})")
    args += [f"%o_init: {tv}", f"%state_pool: {tp}"]
    operands.append(f"outs(%o_init, %state_pool : {tv}, {tp})")
    attrs = _prologue_attrs(cfg)
    attr_text = (" {" + ", ".join(attrs) + "}") if attrs else ""
    op = (f"  %o, %new_state_pool = kda.decode_step {cfg['update']} %q, %k, %v"
          + "".join(" " + o for o in operands) + attr_text
          + f" : {tq}, {tq}, {tv}")
    return (f"// kda configuration: {describe(cfg)}\n"
            f"func.func @kda_decode_step({', '.join(args)}) -> ({tv}, {tp}) {{\n"
            f"{op}\n"
            f"  return %o, %new_state_pool : {tv}, {tp}\n"
            "}\n")


def _window_attention_mlir(cfg: Dict[str, Any]) -> str:
    K, V = cfg["K"], cfg["V"]
    varlen = cfg["cu_seqlens_dtype"] is not None
    B = 1 if varlen else None  # cu_seqlens requires B = 1
    tq = _tensor([B, None, None, K], cfg["qk_dtype"])
    tv = _tensor([B, None, None, V], cfg["v_dtype"])
    args = [f"%q: {tq}", f"%k: {tq}", f"%v: {tv}"]
    operands = []
    attrs = []
    if "window_sizes_dtype" in cfg:
        tws = _tensor([None], cfg["window_sizes_dtype"])
        args.append(f"%window_sizes: {tws}")
        operands.append(f"window_sizes(%window_sizes : {tws})")
    else:
        attrs.append(f"window = {cfg['window']} : i64")
    if varlen:
        tcu = _tensor([None], cfg["cu_seqlens_dtype"])
        args.append(f"%cu_seqlens: {tcu}")
        operands.append(f"cu_seqlens(%cu_seqlens : {tcu})")
    if cfg["scale"] is not None:
        attrs.append(f"scale = {_f64(cfg['scale'])} : f64")
    if cfg.get("earlier_keys"):
        attrs.append("earlier_keys")
    op = (f"  %o = kda.window_attention %q, %k, %v" + "".join(" " + o for o in operands)
          + (" {" + ", ".join(attrs) + "}" if attrs else "") + f" : {tq}, {tq}, {tv} -> {tv}")
    return (f"// kda configuration: {describe(cfg)}\n"
            f"func.func @kda_window_attention({', '.join(args)}) -> {tv} {{\n"
            f"{op}\n"
            f"  return %o : {tv}\n"
            "}\n")


def _hybrid_mlir(cfg: Dict[str, Any]) -> str:
    """One function: the gated delta rule and the window over the same q, k,
    v, then kda.hybrid. kda-compile writes the three kernels' bundle plus the
    layer's entry ``kda_hybrid`` (kda-gpu-layer-entry): its parameters are
    this function's arguments, in order, then o."""
    gd = cfg["gated_delta"]
    K, V = gd["K"], gd["V"]
    varlen = gd["cu_seqlens_dtype"] is not None
    B = 1 if varlen else None
    tq = _tensor([B, None, None, K], gd["qk_dtype"])
    tv = _tensor([B, None, None, V], gd["v_dtype"])
    args = [f"%q: {tq}", f"%k: {tq}", f"%v: {tv}"]
    operands, window_operands = [], []
    for name, keyword, dims, dtype in _recurrence_operands(gd, B):
        t = _tensor(dims, dtype)
        args.append(f"%{name}: {t}")
        operands.append(f"{keyword}(%{name} : {t})")
        if keyword == "cu_seqlens":
            window_operands.append(f"cu_seqlens(%{name} : {t})")
    attrs = _prologue_attrs(gd)
    if gd["chunk"]:
        attrs.append(f"tile = #kda.tile<chunk = {gd['chunk']}, sub_chunk = {gd['sub_chunk']}>")
    window_attrs = [f"window = {cfg['window']} : i64"]
    if cfg["window_scale"] is not None:
        window_attrs.append(f"scale = {_f64(cfg['window_scale'])} : f64")
    mix = ""
    if cfg["mix"] == "gated":
        tz = _tensor([B, None, None] + ([V] if cfg["z"]["form"] == "channel" else []), cfg["z"]["dtype"])
        args.append(f"%z: {tz} {{kda.name = \"z\"}}")
        mix = f" gate(%z : {tz})"
    # The pieces schedule: the window over earlier keys of its own k and v
    # (the layer's window_k, window_v: each piece's from row 0), the gated
    # delta part's final state a second result.
    pieces = cfg.get("schedule") == "pieces"
    wk, wv = "%k", "%v"
    if pieces:
        args += [f"%window_k: {tq} {{kda.name = \"window_k\"}}", f"%window_v: {tv} {{kda.name = \"window_v\"}}"]
        wk, wv = "%window_k", "%window_v"
        window_attrs.append("earlier_keys")
    lin, result, results, returned = "%lin", f"-> {tv}", tv, "%o"
    if gd["final_state_dtype"]:
        state_tail = [K, V] if gd["state_layout"] == "k_major" else [V, K]
        tsf = _tensor([None, None] + state_tail, gd["final_state_dtype"])
        lin, result = "%lin, %ht", f"-> {tv} final_state {tsf}"
        results = f"({tv} {{kda.name = \"o\"}}, {tsf} {{kda.name = \"final_state\"}})"
        returned = f"%o, %ht : {tv}, {tsf}"
    else:
        returned = f"%o : {tv}"
    return (f"// kda configuration: {describe(cfg)}\n"
            f"func.func @kda_hybrid({', '.join(args)}) -> {results} {{\n"
            f"  {lin} = kda.gated_delta {gd['update']} %q, %k, %v" + "".join(" " + o for o in operands)
            + " {" + ", ".join(attrs) + "}" + f" : {tq}, {tq}, {tv} {result}\n"
            f"  %win = kda.window_attention %q, {wk}, {wv}" + "".join(" " + o for o in window_operands)
            + " {" + ", ".join(window_attrs) + "}" + f" : {tq}, {tq}, {tv} -> {tv}\n"
            f"  %o = kda.hybrid {cfg['mix']} %lin, %win{mix}"
            + (" {overlap}" if cfg.get("schedule") == "overlap" else "") + f" : {tv}, {tv} -> {tv}\n"
            f"  return {returned}\n"
            "}\n")


def _multi_scale_mlir(cfg: Dict[str, Any]) -> str:
    """One function: kda.multi_scale over q, k, v, its gates (one with
    decay_scales, else one a scale: g0, g1, ...), beta and z. kda-compile
    writes the kernels (the gated delta's two, the scaled gates', the mix)
    and the layer's entry ``kda_multi_scale`` (kda-gpu-layer-entry): its
    parameters are this function's arguments, in order, then o."""
    gd = cfg["gated_delta"]
    K, V = gd["K"], gd["V"]
    varlen = gd["cu_seqlens_dtype"] is not None
    B = 1 if varlen else None
    tq = _tensor([B, None, None, K], gd["qk_dtype"])
    tv = _tensor([B, None, None, V], gd["v_dtype"])
    tg = _tensor([B, None, None] + ([K] if gd["gate"]["form"] == "channel" else []), gd["gate"]["dtype"])
    args = [f"%q: {tq}", f"%k: {tq}", f"%v: {tv}"]
    m = cfg["scales"]
    gates = ["g"] if cfg["decay_scales"] is not None else [f"g{i}" for i in range(m)]
    for g in gates:
        args.append(f"%{g}: {tg} {{kda.name = \"{g}\"}}")
    operands = [f"gates({', '.join('%' + g for g in gates)} : {', '.join([tg] * len(gates))})"]
    if gd["beta_dtype"]:
        tb = _tensor([B, None, None], gd["beta_dtype"])
        args.append(f"%beta: {tb}")
        operands.append(f"beta(%beta : {tb})")
    if varlen:
        tc = _tensor([None], gd["cu_seqlens_dtype"])
        args.append(f"%cu_seqlens: {tc}")
        operands.append(f"cu_seqlens(%cu_seqlens : {tc})")
    if cfg["mix"] == "gated":
        tz = _tensor([B, None, None, m], cfg["z_dtype"])
        args.append(f"%z: {tz} {{kda.name = \"z\"}}")
        operands.append(f"z(%z : {tz})")
    attrs = _prologue_attrs(gd)
    if cfg["decay_scales"] is not None:
        attrs.append(f"decay_scales = [{', '.join(_f64(c) for c in cfg['decay_scales'])}]")
    if gd["chunk"]:
        attrs.append(f"tile = #kda.tile<chunk = {gd['chunk']}, sub_chunk = {gd['sub_chunk']}>")
    return (f"// kda configuration: {describe(cfg)}\n"
            f"func.func @kda_multi_scale({', '.join(args)}) -> {tv} {{\n"
            f"  %o = kda.multi_scale {gd['update']} {cfg['mix']} %q, %k, %v " + " ".join(operands)
            + " {" + ", ".join(attrs) + "}" + f" : {tq}, {tq}, {tv} -> {tv}\n"
            f"  return %o : {tv}\n"
            "}\n")


# ---------------------------------------------------------------------------
# Cache and compilation
# ---------------------------------------------------------------------------

# Bundles a wheel ships (scripts/build-wheel.sh BUNDLES): searched last and
# never written (compiled bundles go to the first writable cache directory).
PREBUILT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prebuilt")


def cache_dirs(with_prebuilt: bool = True) -> List[str]:
    """Directories searched for bundles, in order: ``KDA_BUNDLE_PATH``'s, the
    user cache, then the package's own ``prebuilt/`` where a wheel has one."""
    dirs = [d for d in os.environ.get("KDA_BUNDLE_PATH", "").split(":") if d]
    default = os.environ.get("KDA_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "kda", "bundles")
    dirs.append(default)
    if with_prebuilt and os.path.isdir(PREBUILT_DIR):
        dirs.append(PREBUILT_DIR)
    return dirs


def find_bundle(cfg: Dict[str, Any], chip: str, tile: Optional[Dict[str, int]] = None,
                fingerprint: Any = CURRENT) -> Optional[str]:
    """The cached bundle for cfg (and tile) on chip built by the compiler
    with this fingerprint; with an unknown fingerprint (no compiler here),
    the newest bundle of cfg by any compiler."""
    if fingerprint is CURRENT:
        fingerprint = current_fingerprint()
    if fingerprint:
        name = bundle_name(cfg, chip, tile, fingerprint)
        for d in cache_dirs():
            path = os.path.join(d, name)
            if os.path.isfile(os.path.join(path, "manifest.json")):
                return path
        return None
    stem = bundle_stem(cfg, chip, tile)
    for d in cache_dirs():
        found = []
        for pattern in (f"{stem}.{chip}", f"{stem}-*.{chip}"):
            for path in glob.glob(os.path.join(glob.escape(d), pattern)):
                manifest = os.path.join(path, "manifest.json")
                if os.path.isfile(manifest):
                    found.append((os.path.getmtime(manifest), path))
        if found:
            return max(found)[1]
    return None


_fingerprints: Dict[Any, str] = {}


def compiler_fingerprint(compiler: str, timeout: float = 60.0) -> str:
    """What ``compiler --fingerprint`` prints, cached per executable (path,
    size and modification time: a rebuilt compiler is asked again).
    Raises CompileError if it cannot say (a kda-compile older than the
    option, or not kda-compile at all)."""
    try:
        st = os.stat(compiler)
        key = (os.path.realpath(compiler), st.st_size, st.st_mtime_ns)
    except OSError:
        key = (compiler,)
    hit = _fingerprints.get(key)
    if hit:
        return hit
    cmd = [compiler, "--fingerprint"]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
    except OSError as e:
        raise CompileError(f"cannot run {' '.join(cmd)}: {e}") from e
    text = proc.stdout.strip()
    if proc.returncode != 0 or not text or len(text.splitlines()) != 1:
        raise CompileError(f"{' '.join(cmd)} did not print a fingerprint (a kda-compile without "
                           f"--fingerprint is too old for this package):\n{text}")
    _fingerprints[key] = text
    return text


def current_fingerprint() -> Optional[str]:
    """The fingerprint bundles are looked up with: ``$KDA_COMPILER_FINGERPRINT``
    if set; else, unless KDA_NO_COMPILE is set, that of the kda-compile
    find_compiler() finds; else that of the compiler which prebuilt the
    first bundle directory with a kda.prebuild report (its
    prebuild-report.json), so that a machine without a compiler uses that
    compiler's tuning entries and bundles only; else None (unknown)."""
    env = os.environ.get("KDA_COMPILER_FINGERPRINT")
    if env:
        return env
    compiler = None if _no_compile() else find_compiler()
    if compiler is not None:
        try:
            return compiler_fingerprint(compiler)
        except CompileError:
            return None
    return prebuilt_fingerprint()


_prebuilt: Dict[Tuple[str, ...], Optional[str]] = {}


def prebuilt_fingerprint() -> Optional[str]:
    """The compiler fingerprint kda.prebuild recorded in the first bundle
    directory (cache_dirs()) that holds its report, or None; read once per
    list of directories (kda.ops asks on every call)."""
    dirs = tuple(cache_dirs())
    if dirs in _prebuilt:
        return _prebuilt[dirs]
    found = None
    for d in dirs:
        try:
            with open(os.path.join(d, "prebuild-report.json")) as f:
                fp = json.load(f).get("compiler_fingerprint")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(fp, str) and fp:
            found = fp
            break
    _prebuilt[dirs] = found
    return found


def _no_compile() -> bool:
    return os.environ.get("KDA_NO_COMPILE", "") in ("1", "true", "yes")


def find_compiler() -> Optional[str]:
    env = os.environ.get("KDA_COMPILE")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else shutil.which(env)
    found = shutil.which("kda-compile")
    if found:
        return found
    repo = os.path.join(_REPO_ROOT, "build", "bin", "kda-compile")
    if os.path.isfile(repo) and os.access(repo, os.X_OK):
        return repo
    return None


def _writable_cache_dir() -> str:
    for d in cache_dirs(with_prebuilt=False):
        try:
            os.makedirs(d, exist_ok=True)
        except OSError:
            continue
        if os.access(d, os.W_OK):
            return d
    raise BundleNotFoundError("no writable bundle directory in KDA_BUNDLE_PATH or ~/.cache/kda/bundles")


def tile_flags(tile: Optional[Dict[str, int]]) -> List[str]:
    """kda-compile's options for a tuned tile (none for the defaults)."""
    if tile is None:
        return []
    t = normalise_tile(tile)
    flags = [f"--chunk={t['chunk']}", f"--sub-chunk={t['sub_chunk']}", f"--v-block={t['v_block']}",
             f"--block-threads={t['threads']}"]
    if t.get("state_stages", 2) != 2:
        flags.append(f"--state-stages={t['state_stages']}")
    if t.get("segments", 1) != 1:
        flags.append(f"--segments={t['segments']}")
    return flags


def compile_bundle(cfg: Dict[str, Any], chip: str, out_root: Optional[str] = None,
                   compiler: Optional[str] = None, timeout: float = 600.0,
                   tile: Optional[Dict[str, int]] = None) -> str:
    """Compiles cfg for chip into out_root/<bundle_name> and returns its path.

    tile: a tuned tile (kda.tune) for a configuration whose chunk is 0 (the
    target's default), or whose chunk and sub-chunk are the tile's (the
    op's #kda.tile keeps them; V block, threads and state stages come from the
    flags), given to kda-compile as flags.

    The bundle is written to a temporary sibling directory and renamed into
    place, so concurrent processes never see a half-written bundle.
    """
    compiler = compiler or find_compiler()
    if compiler is None:
        raise BundleNotFoundError("kda-compile not found (set KDA_COMPILE or put it on PATH)")
    # A hybrid layer's tile is its gated delta part's (the window's tiles are its own strategy's).
    tiled = cfg["gated_delta"] if cfg.get("op") in ("hybrid", "multi_scale") else cfg
    if tile is not None and (tiled.get("op") not in ("gated_delta", "gated_delta_grad") or (
            tiled.get("chunk") and (normalise_tile(tile)["chunk"], normalise_tile(tile)["sub_chunk"])
            != (tiled["chunk"], tiled.get("sub_chunk", tiled["chunk"])))):
        raise ValueError("a tuned tile applies to gated_delta configurations with chunk 0, or with the "
                         "tile's own chunk and sub-chunk (kda.tune.steps_form), and to gradients "
                         "(kda.tune.grad_policy_tile) with their own chunk")
    out_root = out_root or _writable_cache_dir()
    os.makedirs(out_root, exist_ok=True)
    try:
        fingerprint = compiler_fingerprint(compiler)
    except CompileError as e:
        raise CompileError(f"kda-compile failed for [{describe(cfg)}] on {chip}: {e}") from e
    final = os.path.join(out_root, bundle_name(cfg, chip, tile, fingerprint))
    if os.path.isfile(os.path.join(final, "manifest.json")):
        return final
    tmp = tempfile.mkdtemp(prefix=".tmp-" + os.path.basename(final) + "-", dir=out_root)
    try:
        src = os.path.join(tmp, "source.mlir")
        with open(src, "w") as f:
            f.write(to_mlir(cfg))
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump({"generator": GENERATOR_VERSION, "chip": chip, "config": cfg,
                       "tile": normalise_tile(tile), "compiler_fingerprint": fingerprint}, f,
                      indent=1, sort_keys=True)
            f.write("\n")
        cmd = [compiler, src, "-o", tmp, f"--chip={chip}"] + tile_flags(tile)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)
        if proc.returncode != 0:
            raise CompileError(f"kda-compile failed for [{describe(cfg)}] on {chip}:\n"
                               f"  {' '.join(cmd)}\n{proc.stdout.strip()}")
        try:
            os.rename(tmp, final)
        except OSError:
            # Someone else finished first.
            if not os.path.isfile(os.path.join(final, "manifest.json")):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def get_bundle_dir(cfg: Dict[str, Any], chip: str, build: bool = True,
                   tile: Optional[Dict[str, int]] = None) -> str:
    """The bundle directory for cfg (and a tuned tile) on chip: found in
    the cache for the current compiler, or built."""
    fingerprint = current_fingerprint()
    found = find_bundle(cfg, chip, tile, fingerprint)
    if found:
        return found
    if build and not _no_compile():
        if find_compiler() is not None:
            return compile_bundle(cfg, chip, tile=tile)
    name = bundle_name(cfg, chip, tile, fingerprint)
    dirs = cache_dirs()
    raise BundleNotFoundError(
        f"no kda bundle for [{describe(cfg)}] on {chip}.\n"
        f"Searched: {', '.join(os.path.join(d, name) for d in dirs)}.\n"
        f"kda-compile is not available here or KDA_NO_COMPILE is set (set KDA_COMPILE or put it on PATH to build it "
        f"automatically). To build it on a machine that has kda-compile, save this module as "
        f"{name}.mlir:\n\n{to_mlir(cfg)}\nand run\n\n"
        f"  kda-compile {name}.mlir -o <DIR>/{name} --chip={chip}"
        f"{''.join(' ' + f for f in tile_flags(tile))}\n\n"
        f"(or `python3 -m kda.prebuild --chip {chip} --out <DIR>` for the common configurations), "
        f"then copy <DIR> here and set KDA_BUNDLE_PATH=<DIR>.")


def dump_config(cfg: Dict[str, Any]) -> str:
    return json.dumps(cfg, sort_keys=True)


def load_config(text: str) -> Dict[str, Any]:
    cfg = json.loads(text)
    validate(cfg)
    return copy.deepcopy(cfg)
