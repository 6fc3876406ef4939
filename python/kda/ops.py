"""Drop-in replacements for flash-linear-attention's KDA entry points.

``chunk_kda`` and ``fused_recurrent_kda`` take the same arguments, in the same
order, with the same layouts and defaults as ``fla.ops.kda.chunk_kda`` /
``fla.ops.kda.fused_recurrent_kda``, and return ``(o, final_state)``. Each call
derives a kernel configuration from its arguments (head dims K and V, dtypes,
gate form and activation, beta sigmoid, l2 norm, state layout, which states
and whether cu_seqlens are present), finds the matching precompiled bundle
(see ``kda.bundles``), allocates the outputs and launches the kernel on the
current CUDA stream. Batch, length, head counts and the number of sequences
are dynamic in the bundle.

Forward only: there is no backward. Both functions compute the recurrence of
SPEC.md section 2 with a K x V fp32 state:
``fused_recurrent_kda`` without ``ssm_state_indices`` is the same function as
``chunk_kda`` (FLA's fused recurrent kernel is a token-by-token evaluation of
it), so it runs the same chunkwise ``kda.gated_delta`` kernel; the results
agree to rounding. With ``ssm_state_indices`` (a vLLM-style extension) it is a
``kda.decode_step`` on a state pool.
"""

from __future__ import annotations

import ctypes
import json
import math
import operator
import os
import threading
import warnings
from typing import Any, Dict, Optional, Tuple

from . import bundles as _bundles
from . import tune as _tune
from .runtime import KdaError, _Marshalled, _stream_handle, load_bundle

__all__ = ["chunk_kda", "fused_recurrent_kda", "window_attention", "hybrid_attention", "multi_scale_attention",
           "chunk_kda_config", "fused_recurrent_kda_config", "window_attention_config", "hybrid_attention_config",
           "multi_scale_attention_config",
           "chip_for_device"]

_DTYPE_NAMES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "int32": "i32", "int64": "i64",
    "f32": "f32", "f16": "f16", "bf16": "bf16", "i32": "i32", "i64": "i64",
}


def _dt(x: Any) -> str:
    name = str(getattr(x, "dtype", x))
    if name.startswith("torch."):
        name = name[len("torch."):]
    if name not in _DTYPE_NAMES:
        raise TypeError(f"dtype {name} is not supported by kda (float32, float16, bfloat16; "
                        f"int32/int64 for indices)")
    return _DTYPE_NAMES[name]


def _shape(x: Any) -> Tuple[int, ...]:
    return tuple(int(s) for s in x.shape)


def _numel(x: Any) -> int:
    n = 1
    for s in _shape(x):
        n *= s
    return n


# ---------------------------------------------------------------------------
# Configuration from FLA-style arguments (works on anything with .shape and
# .dtype, so tests and prebuild can derive configurations without torch)
# ---------------------------------------------------------------------------

def _check_inputs(q, k, v, g, beta, allow_neg_eigval, use_beta_sigmoid_in_kernel, api):
    """The shape checks chunk_kda and fused_recurrent_kda share (FLA's messages);
    returns B, T, H, K, HV, V."""
    if len(_shape(q)) != 4:
        raise ValueError(f"q: expected [B, T, H, K], got shape {list(_shape(q))}")
    B, T, H, K = _shape(q)
    if _shape(k) != _shape(q):
        raise ValueError(f"q and k must have the same shape, got q={list(_shape(q))} vs k={list(_shape(k))}")
    if len(_shape(v)) != 4 or _shape(v)[:2] != (B, T):
        raise ValueError(f"v: expected [B, T, HV, V] = [{B}, {T}, HV, V], got {list(_shape(v))}")
    HV, V = _shape(v)[2], _shape(v)[3]
    for name, size in (("H", H), ("K", K), ("HV", HV), ("V", V)):
        if size < 1:
            raise ValueError(f"{name} must be at least 1, got q={list(_shape(q))}, v={list(_shape(v))}")
    if HV % H:
        raise ValueError(f"For GVA, num_v_heads (HV={HV}) must be evenly divisible by num_qk_heads (H={H})")
    if g is None:
        raise ValueError(f"g is required: {api} takes channel-wise gates [B, T, HV, K]")
    if _shape(g) != (B, T, HV, K):
        raise ValueError(f"g must have shape [B, T, HV, K]={[B, T, HV, K]}, got {list(_shape(g))}")
    if beta is None:
        raise ValueError("beta is required")
    if _shape(beta) != (B, T, HV):
        if _shape(beta) == (B, T, HV, V):
            raise NotImplementedError("kda: head-wise vector beta [B, T, HV, V] is not supported "
                                      "(only [B, T, HV])")
        raise ValueError(f"beta must have shape [B, T, HV]={[B, T, HV]}, got {list(_shape(beta))}")
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise ValueError("`allow_neg_eigval=True` requires `use_beta_sigmoid_in_kernel=True`.")
    return B, T, H, K, HV, V


def chunk_kda_config(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                     use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                     use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, safe_gate=False,
                     lower_bound=None, state_v_first=False, cu_seqlens=None, A_log=None,
                     dt_bias=None, chunk_size=None, boundary_interval=None,
                     boundary_dtype="f32", boundary_indices_dtype=None,
                     return_intermediate_states=False) -> Dict[str, Any]:
    """The kda.gated_delta configuration chunk_kda would run for these arguments.

    return_intermediate_states (FLA's h) sets the boundary fields itself:
    every 64 tokens in k's dtype, written as a pool (one slot per sequence
    and chunk) with cu_seqlens.

    Also validates shapes as FLA does (ValueError with the offending argument).
    """
    B, T, H, K, HV, V = _check_inputs(q, k, v, g, beta, allow_neg_eigval,
                                      use_beta_sigmoid_in_kernel, "chunk_kda")
    if chunk_size is not None and chunk_size not in (16, 32, 64):
        raise ValueError(f"`chunk_size` must be 16, 32 or 64 for kda, got {chunk_size}.")

    state_tail = (V, K) if state_v_first else (K, V)
    if cu_seqlens is not None:
        if B != 1:
            raise ValueError(f"The batch size is expected to be 1 rather than {B} when using `cu_seqlens`."
                             f"Please flatten variable-length inputs before processing.")
        if len(_shape(cu_seqlens)) != 1 or _shape(cu_seqlens)[0] < 1:
            raise ValueError(f"cu_seqlens: expected [N+1], got shape {list(_shape(cu_seqlens))}")
        N = _shape(cu_seqlens)[0] - 1
    else:
        N = B
    if initial_state is not None:
        if _shape(initial_state) != (N, HV) + state_tail:
            if cu_seqlens is not None and _shape(initial_state)[0] != N:
                raise ValueError(
                    f"The number of initial states is expected to be equal to the number of input "
                    f"sequences, i.e., {N} rather than {_shape(initial_state)[0]}.")
            raise ValueError(f"initial_state: expected {'[N, HV, V, K]' if state_v_first else '[N, HV, K, V]'}"
                             f" = {[N, HV, *state_tail]}, got {list(_shape(initial_state))}")
        if _dt(initial_state) != "f32":
            raise ValueError("initial_state must be in float32.")

    gate_activation = "none"
    A_log_dtype = dt_bias_dtype = None
    lb = None
    # No log-space check (g <= 0, SPEC.md) on the values: it cost a reduction
    # and a host sync per call (0.3 ms at T = 8192, H = 32). No kernel assumes
    # the sign any more (decays are factored only where their exponents stay
    # finite, pairwise otherwise), so a positive gate gives the recurrence's
    # own growing state wherever that stays within f32, not a wrong o.
    if use_gate_in_kernel:
        if A_log is None and lower_bound is None:
            raise ValueError("`A_log` must be provided when `use_gate_in_kernel=True` and `lower_bound` is not set.")
        if safe_gate and lower_bound is None:
            raise ValueError("`lower_bound` must be specified when `safe_gate=True` and `use_gate_in_kernel=True`.")
        if lower_bound is not None:
            if not (-5 <= lower_bound < 0):
                raise ValueError(f"`lower_bound` must be in [-5, 0) for kda's lower-bound gate, got {lower_bound}.")
            gate_activation, lb = "lower_bound", float(lower_bound)
        else:
            gate_activation = "softplus"
        if A_log is not None:
            if _numel(A_log) != HV:
                raise ValueError(f"A_log: expected {HV} values (one per value head), got shape {list(_shape(A_log))}")
            A_log_dtype = _dt(A_log)
        if dt_bias is not None:
            if _numel(dt_bias) != HV * K:
                raise ValueError(f"dt_bias: expected [HV * K] = {HV * K} values, got shape {list(_shape(dt_bias))}")
            dt_bias_dtype = _dt(dt_bias)

    if return_intermediate_states:
        boundary_interval, boundary_dtype = FLA_CHUNK, _dt(k)
        boundary_indices_dtype = "i32" if cu_seqlens is not None else None
    return _bundles.gated_delta_config(
        K=K, V=V, qk_dtype=_dt(q), v_dtype=_dt(v),
        gate={"form": "channel", "dtype": _dt(g)},
        beta_dtype=_dt(beta),
        update="delta",
        qk_l2norm=bool(use_qk_l2norm_in_kernel),
        beta_activation=("sigmoid_neg_eigval" if allow_neg_eigval else "sigmoid")
        if use_beta_sigmoid_in_kernel else "none",
        gate_activation=gate_activation, lower_bound=lb,
        A_log_dtype=A_log_dtype, dt_bias_dtype=dt_bias_dtype,
        scale=scale,
        state_layout="v_major" if state_v_first else "k_major",
        initial_state_dtype="f32" if initial_state is not None else None,
        final_state_dtype="f32" if output_final_state else None,
        cu_seqlens_dtype=_dt(cu_seqlens) if cu_seqlens is not None else None,
        chunk=chunk_size, boundary_interval=boundary_interval, boundary_dtype=boundary_dtype,
        boundary_indices_dtype=boundary_indices_dtype)


class _Desc:
    """A shape and dtype standing for a tensor (configuration only)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


def _per_sequence_decode(q, cu_seqlens, ssm_state_indices, initial_state) -> bool:
    """Whether fused_recurrent_kda runs one token per sequence on a dense state
    (FLA's decode call: q [N, 1, H, K], initial_state [N, HV, ...], no pool):
    that is the decode step on a pool of the N states, slots 0 .. N - 1
    (GpuDecodeRegisters: the state streamed once), not the chunked forward
    (two kernels and a 16-row chunk for one token: 2.5 to 2.9 times FLA's
    time, bench/RESULTS.md). Without a state there is nothing to stream:
    the chunked forward (zero initial state) serves it."""
    return (ssm_state_indices is None and cu_seqlens is None and initial_state is not None
            and len(_shape(q)) == 4 and _shape(q)[1] == 1 and len(_shape(initial_state)) == 4
            and _shape(initial_state)[0] == _shape(q)[0])


_READ_POOL_WITHOUT_SLOTS = ("read_pool is a decode step's second pool (the start states): it needs "
                            "ssm_state_indices (the slots of initial_state the new states go to)")


def _decode_slots(N, output_final_state):
    """The decode step's slot arguments for a per-sequence decode: sequence n
    reads slot n of the caller's states (keeping the final state, as the
    step's read pool) and writes slot n of the fresh final states; without
    a final state it reads the caller's state and keeps nothing."""
    if output_final_state:
        return _Desc((N,), "i32"), None
    return _Desc((N,), "i32"), _Desc((N,), "i32")


def fused_recurrent_kda_config(q, k, v, g, beta, A_log=None, dt_bias=None, scale=None,
                               initial_state=None, output_final_state=False,
                               use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                               use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                               lower_bound=None, state_v_first=False, cu_seqlens=None,
                               ssm_state_indices=None, read_state_indices=None,
                               read_pool=None) -> Dict[str, Any]:
    """The configuration fused_recurrent_kda would run (gated_delta, or
    decode_step with ssm_state_indices; ``read_pool``: the start states come
    from that pool instead of initial_state's)."""
    if use_gate_in_kernel and lower_bound is None and A_log is None:
        # FLA's kernel would use exp(1) as the factor; kda's softplus form has
        # no such default, so ask for A_log like chunk_kda does.
        raise ValueError("`A_log` must be provided when `use_gate_in_kernel=True` and `lower_bound` is not set.")
    if _per_sequence_decode(q, cu_seqlens, ssm_state_indices, initial_state):
        ssm_state_indices, read_state_indices = _decode_slots(_shape(q)[0], output_final_state)
        if output_final_state:
            # The caller's states are read where they are; the final states
            # go to a fresh pool of N slots (fused_recurrent_kda).
            read_pool = initial_state
    if read_pool is not None and ssm_state_indices is None:
        raise ValueError(_READ_POOL_WITHOUT_SLOTS)
    if ssm_state_indices is None:
        return chunk_kda_config(q, k, v, g, beta, scale=scale, initial_state=initial_state,
                                output_final_state=output_final_state,
                                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                                use_gate_in_kernel=use_gate_in_kernel,
                                use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                                allow_neg_eigval=allow_neg_eigval, lower_bound=lower_bound,
                                state_v_first=state_v_first, cu_seqlens=cu_seqlens,
                                A_log=A_log, dt_bias=dt_bias)
    B, T, H, K, HV, V = _check_inputs(q, k, v, g, beta, allow_neg_eigval,
                                      use_beta_sigmoid_in_kernel, "fused_recurrent_kda")
    if initial_state is None:
        raise ValueError("ssm_state_indices names slots of a state pool: pass the pool as initial_state "
                         "([P, HV, K, V], or [P, HV, V, K] with state_v_first)")
    multi = len(_shape(ssm_state_indices)) == 2
    if multi:
        # Several tokens per sequence (speculative decoding, multi-token
        # prediction): q [N, T, H, K], ssm_state_indices [N, T], the state
        # after token t kept in slot ssm_state_indices[n, t].
        if cu_seqlens is not None:
            # vLLM's form: q [1, total, H, K] packed, sequence n's tokens at
            # cu_seqlens[n] ..; it runs as [N, T] padded (fused_recurrent_kda).
            if B != 1:
                raise ValueError(f"The batch size is expected to be 1 rather than {B} when using `cu_seqlens`.")
            if len(_shape(cu_seqlens)) != 1 or _shape(cu_seqlens)[0] != _shape(ssm_state_indices)[0] + 1:
                raise ValueError(f"ssm_state_indices [N, T] with cu_seqlens: expected cu_seqlens of N + 1 = "
                                 f"{_shape(ssm_state_indices)[0] + 1} entries, got shape "
                                 f"{list(_shape(cu_seqlens))}")
            B, T = _shape(ssm_state_indices)
            cu_seqlens = None
        if _shape(ssm_state_indices) != (B, T):
            raise ValueError(f"ssm_state_indices: expected [N, T] = [{B}, {T}] (q's batch and tokens), "
                             f"got {list(_shape(ssm_state_indices))}")
        N = B
    elif len(_shape(ssm_state_indices)) != 1:
        raise ValueError(f"ssm_state_indices: expected [N] or [N, T], got shape {list(_shape(ssm_state_indices))}")
    else:
        N = B * T
    if not multi and _shape(ssm_state_indices)[0] != N:
        raise ValueError(f"ssm_state_indices: expected one index per token ({N} = B * T), "
                         f"got {_shape(ssm_state_indices)[0]}")
    if read_state_indices is not None and _shape(read_state_indices) != (N,):
        raise ValueError(f"read_state_indices: expected one slot per sequence, shape [{N}], "
                         f"got {list(_shape(read_state_indices))}")
    if cu_seqlens is not None and _shape(cu_seqlens) != (N + 1,):
        raise ValueError(f"decode with ssm_state_indices: every sequence has one token, so cu_seqlens must "
                         f"have N + 1 = {N + 1} entries, got shape {list(_shape(cu_seqlens))}")
    if cu_seqlens is None and T != 1 and not multi:
        raise ValueError(f"decode with ssm_state_indices [N]: expected one token per sequence (T = 1), got "
                         f"T = {T} (several tokens per sequence take ssm_state_indices [N, T])")
    tail = (V, K) if state_v_first else (K, V)
    pool_shape = _shape(initial_state)
    if len(pool_shape) != 4 or pool_shape[1:] != (HV,) + tail:
        raise ValueError(f"initial_state (the state pool): expected "
                         f"{'[P, HV, V, K]' if state_v_first else '[P, HV, K, V]'} = [P, {HV}, {tail[0]}, "
                         f"{tail[1]}], got {list(pool_shape)}")
    if read_pool is not None:
        if len(_shape(read_pool)) != 4 or _shape(read_pool)[1:] != (HV,) + tail:
            raise ValueError(f"read_pool: expected {'[PR, HV, V, K]' if state_v_first else '[PR, HV, K, V]'} = "
                             f"[PR, {HV}, {tail[0]}, {tail[1]}], got {list(_shape(read_pool))}")
        if _dt(read_pool) != _dt(initial_state):
            raise ValueError(f"read_pool: expected the state pool's dtype {_dt(initial_state)}, "
                             f"got {_dt(read_pool)}")
    gate_activation, lb = "none", None
    A_log_dtype = dt_bias_dtype = None
    # No log-space check (g <= 0) here either (chunk_kda_config says why).
    if use_gate_in_kernel:
        if lower_bound is not None:
            if not (-5 <= lower_bound < 0):
                raise ValueError(f"`lower_bound` must be in [-5, 0) for kda's lower-bound gate, got {lower_bound}.")
            gate_activation, lb = "lower_bound", float(lower_bound)
        else:
            gate_activation = "softplus"
        if A_log is not None:
            if _numel(A_log) != HV:
                raise ValueError(f"A_log: expected {HV} values (one per value head), got shape {list(_shape(A_log))}")
            A_log_dtype = _dt(A_log)
        if dt_bias is not None:
            if _numel(dt_bias) != HV * K:
                raise ValueError(f"dt_bias: expected [HV * K] = {HV * K} values, got shape {list(_shape(dt_bias))}")
            dt_bias_dtype = _dt(dt_bias)
    return _bundles.decode_step_config(
        K=K, V=V, qk_dtype=_dt(q), v_dtype=_dt(v),
        gate={"form": "channel", "dtype": _dt(g)}, beta_dtype=_dt(beta),
        qk_l2norm=bool(use_qk_l2norm_in_kernel),
        beta_activation=("sigmoid_neg_eigval" if allow_neg_eigval else "sigmoid")
        if use_beta_sigmoid_in_kernel else "none",
        gate_activation=gate_activation, lower_bound=lb,
        A_log_dtype=A_log_dtype, dt_bias_dtype=dt_bias_dtype,
        scale=scale, state_layout="v_major" if state_v_first else "k_major",
        state_dtype=_dt(initial_state), indices_dtype=_dt(ssm_state_indices),
        read_indices_dtype=_dt(read_state_indices) if read_state_indices is not None else None,
        multi_token=multi, read_pool=read_pool is not None)


def window_attention_config(q, k, v, window, scale=None, cu_seqlens=None,
                            window_sizes=None) -> Dict[str, Any]:
    """The kda.window_attention configuration window_attention would run for
    these arguments; validates shapes (ValueError naming the argument)."""
    if len(_shape(q)) != 4:
        raise ValueError(f"q: expected [B, T, HQ, K], got shape {list(_shape(q))}")
    B, T, HQ, K = _shape(q)
    # Earlier keys: k and v may hold S > T rows, the queries being the last
    # T of them (dense sequences only).
    S = _shape(k)[1] if len(_shape(k)) == 4 else T
    if S != T and cu_seqlens is not None:
        raise ValueError(f"k: expected [B, T, HK, K] = [{B}, {T}, HK, {K}] with cu_seqlens (earlier keys, "
                         f"S > T rows, take dense sequences), got {list(_shape(k))}")
    if len(_shape(k)) != 4 or _shape(k)[0] != B or S < T or _shape(k)[3] != K:
        raise ValueError(f"k: expected [B, T, HK, K] = [{B}, {T}, HK, {K}] (or S > T rows: the queries the "
                         f"last T of them), got {list(_shape(k))}")
    if len(_shape(v)) != 4 or _shape(v)[:2] != (B, S):
        raise ValueError(f"v: expected [B, S, HV, V] = [{B}, {S}, HV, V] (k's rows), got {list(_shape(v))}")
    HK, HV, V = _shape(k)[2], _shape(v)[2], _shape(v)[3]
    HO = max(HQ, HV)
    for name, h in (("HQ", HQ), ("HK", HK), ("HV", HV)):
        if h < 1 or HO % h:
            raise ValueError(f"head grouping: the output has HO = max(HQ, HV) = {HO} heads, which must be a "
                             f"multiple of {name} = {h} (q has HQ = {HQ}, k HK = {HK}, v HV = {HV})")
    if _dt(q) != _dt(k):
        raise ValueError(f"q and k must have the same dtype, got {_dt(q)} and {_dt(k)}")
    if window_sizes is not None:
        # Per-position windows: one size per token (of the flattened tokens
        # with cu_seqlens), each >= 1; exactly one of window / window_sizes.
        if window is not None:
            raise ValueError("window and window_sizes: expected exactly one of them, got both")
        if _shape(window_sizes) != (T,):
            raise ValueError(f"window_sizes: expected [T] = [{T}], got shape {list(_shape(window_sizes))}")
        if _dt(window_sizes) not in ("i32", "i64"):
            raise ValueError(f"window_sizes: expected int32 or int64, got {_dt(window_sizes)}")
        window = 0
    else:
        try:
            if isinstance(window, bool) or window is None:
                raise TypeError
            window = operator.index(window)
        except TypeError:
            raise ValueError(f"window: expected an integer >= 1, got {window!r}") from None
        if window < 1:
            raise ValueError(f"window: expected an integer >= 1, got {window}")
    if scale is not None and not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale: expected a finite positive number, got {scale!r}")
    if cu_seqlens is not None:
        if B != 1:
            raise ValueError(f"The batch size is expected to be 1 rather than {B} when using `cu_seqlens`."
                             f"Please flatten variable-length inputs before processing.")
        if len(_shape(cu_seqlens)) != 1 or _shape(cu_seqlens)[0] < 1:
            raise ValueError(f"cu_seqlens: expected [N+1], got shape {list(_shape(cu_seqlens))}")
    return _bundles.window_attention_config(
        K=K, V=V, qk_dtype=_dt(q), v_dtype=_dt(v), window=int(window), scale=scale,
        cu_seqlens_dtype=_dt(cu_seqlens) if cu_seqlens is not None else None,
        window_sizes_dtype=_dt(window_sizes) if window_sizes is not None else None,
        earlier_keys=S != T)


def _layer_mix(mix, z, z_shape: str) -> str:
    """A layer's mix (hybrid, multi-scale): "gated" where z is given and mix
    is not, else "sum"; a gated mix needs z (of `z_shape`), a sum takes none."""
    if mix is None:
        mix = "gated" if z is not None else "sum"
    if mix not in ("sum", "gated"):
        raise ValueError(f"mix: expected 'sum' or 'gated', got {mix!r}")
    if mix == "gated" and z is None:
        raise ValueError(f"z: the gated mix needs z, {z_shape}")
    if mix == "sum" and z is not None:
        raise ValueError("z: the sum mix takes no z (pass mix='gated')")
    return mix


def hybrid_attention_config(q, k, v, g, beta, z=None, *, window, mix=None, scale=None,
                            window_scale=None, A_log=None, dt_bias=None, cu_seqlens=None,
                            use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                            use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                            lower_bound=None, chunk_size=None) -> Dict[str, Any]:
    """The hybrid layer's configuration hybrid_attention would run (its
    gated delta part is chunk_kda_config's, with chunk_kda's checks and
    messages); ValueError naming the argument."""
    gd = chunk_kda_config(q, k, v, g, beta, scale=scale, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                          use_gate_in_kernel=use_gate_in_kernel,
                          use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                          allow_neg_eigval=allow_neg_eigval, lower_bound=lower_bound, cu_seqlens=cu_seqlens,
                          A_log=A_log, dt_bias=dt_bias, chunk_size=chunk_size)
    # The window over the same q, k, v: its own checks (heads, window).
    window_attention_config(q, k, v, window, scale=window_scale, cu_seqlens=cu_seqlens)
    B, T, H, K = _shape(q)
    HV, V = _shape(v)[2], _shape(v)[3]
    mix = _layer_mix(mix, z, "[B, T, HV] or [B, T, HV, V]")
    zdesc = None
    if mix == "gated":
        if _shape(z) == (B, T, HV):
            form = "head"
        elif _shape(z) == (B, T, HV, V):
            form = "channel"
        else:
            raise ValueError(f"z: expected [B, T, HV] = {[B, T, HV]} or [B, T, HV, V] = {[B, T, HV, V]}, "
                             f"got {list(_shape(z))}")
        zdesc = {"form": form, "dtype": _dt(z)}
    return _bundles.hybrid_config(gated_delta=gd, window=operator.index(window), mix=mix,
                                  window_scale=window_scale, z=zdesc)


def multi_scale_attention_config(q, k, v, g, beta, z=None, *, decay_scales=None, mix=None, scale=None,
                                 cu_seqlens=None, use_qk_l2norm_in_kernel=False,
                                 use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                                 chunk_size=None) -> Dict[str, Any]:
    """The multi-scale layer's configuration multi_scale_attention would run:
    g one gate with decay_scales, or a list of M gates of one shape and dtype;
    each scale's recurrence is chunk_kda_config's with that gate (its checks
    and messages). ValueError naming the argument."""
    gates = [g] if not isinstance(g, (list, tuple)) else list(g)
    if not gates:
        raise ValueError("g: expected a gate tensor, or a list of one gate per scale")
    if decay_scales is not None:
        if len(gates) != 1:
            raise ValueError(f"g: decay_scales scale one gate; got {len(gates)} gates")
        decay_scales = [float(c) for c in decay_scales]
        if not decay_scales:
            raise ValueError("decay_scales: expected at least one scale")
        m = len(decay_scales)
    else:
        m = len(gates)
        first = (_shape(gates[0]), _dt(gates[0]))
        for i, x in enumerate(gates[1:], 1):
            if (_shape(x), _dt(x)) != first:
                raise ValueError(f"g[{i}]: expected the shape and dtype of g[0], {list(first[0])} {first[1]}, "
                                 f"got {list(_shape(x))} {_dt(x)}")
    gd = chunk_kda_config(q, k, v, gates[0], beta, scale=scale, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                          use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                          allow_neg_eigval=allow_neg_eigval, cu_seqlens=cu_seqlens, chunk_size=chunk_size)
    B, T, H, K = _shape(q)
    HV = _shape(v)[2]
    mix = _layer_mix(mix, z, f"[B, T, HV, M] = {[B, T, HV, m]}")
    z_dtype = None
    if mix == "gated":
        if _shape(z) != (B, T, HV, m):
            raise ValueError(f"z: expected [B, T, HV, M] = {[B, T, HV, m]}, got {list(_shape(z))}")
        z_dtype = _dt(z)
    return _bundles.multi_scale_config(gated_delta=gd, scales=m, mix=mix, decay_scales=decay_scales,
                                       z_dtype=z_dtype)


# ---------------------------------------------------------------------------
# Device, bundles, launch
# ---------------------------------------------------------------------------

def chip_for_device(device=None) -> str:
    """The bundle chip for a GPU device: ``$KDA_CHIP`` if set; on NVIDIA
    (CUDA builds of PyTorch) sm_90a for compute capability 9.0 and sm_80 for
    8.x; on AMD (ROCm builds, whose tensors are also "cuda" tensors) the gfx
    name the device reports, if kda-compile targets it (kda/chips.py). The
    bundle's target then selects the runtime's CUDA or HIP driver."""
    env = os.environ.get("KDA_CHIP")
    if env:
        return env
    import torch
    if getattr(torch.version, "hip", None):
        arch = torch.cuda.get_device_properties(device).gcnArchName.split(":")[0]
        from .chips import amd_chips
        if arch in amd_chips():
            return arch
        raise KdaError("KDA_ERROR_WRONG_ARCHITECTURE",
                       f"device {device} is {arch}; kda bundles are built for "
                       f"{', '.join(amd_chips())}. Set KDA_CHIP to override.", "chip_for_device")
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) == (9, 0):
        return "sm_90a"
    if major == 8:
        return "sm_80"
    raise KdaError("KDA_ERROR_WRONG_ARCHITECTURE",
                   f"device {device} has compute capability {major}.{minor}; kda bundles are built for "
                   f"sm_80 (8.x) and sm_90a (9.0). Set KDA_CHIP to override.", "chip_for_device")


_multiprocessor_counts: Dict[Any, int] = {}


def _multiprocessors(device) -> int:
    """The device's multiprocessor count (cached; 0 if unknown)."""
    key = str(device)
    n = _multiprocessor_counts.get(key)
    if n is None:
        try:
            import torch
            n = int(torch.cuda.get_device_properties(device).multi_processor_count)
        except Exception:  # noqa: BLE001 (no torch / no device: no policy)
            n = 0
        _multiprocessor_counts[key] = n
    return n


# (configuration, chip, tile) -> (bundle, kernel name, the tile its bundle
# was built with: None for the default, also where a tuned tile fell back).
_resolved: Dict[Tuple[str, str, str], Tuple[Any, str, Optional[Dict[str, int]]]] = {}
_resolved_lock = threading.Lock()


def _bundle_for(cfg: Dict[str, Any], chip: str, tile: Optional[Dict[str, int]] = None):
    key = (json.dumps(cfg, sort_keys=True), chip, json.dumps(tile, sort_keys=True))
    hit = _resolved.get(key)
    if hit is not None:
        return hit
    with _resolved_lock:
        hit = _resolved.get(key)
        if hit is not None:
            return hit
        path, used_tile = None, None
        if tile is not None:
            # A tuned tile (kda.tune) whose bundle is neither cached nor
            # buildable here: the chip's default tile still computes the same.
            try:
                path = _bundles.get_bundle_dir(cfg, chip, tile=tile)
                used_tile = _bundles.normalise_tile(tile)
            except _bundles.BundleNotFoundError as e:
                # Said once per configuration and tile (this look-up is
                # cached): the call is right, but may be slower than it
                # would be with the tile chosen for its shape.
                warnings.warn(f"kda: the tile {_bundles.normalise_tile(tile)} chosen for this call's shape has no "
                              f"bundle here, so the default tile runs (the same results, maybe slower); build "
                              f"it as the message below says:\n{e}", stacklevel=4)
                path = None
            except _bundles.CompileError as e:
                warnings.warn(f"kda: the tuned tile {tile} did not compile; using the default tile:\n{e}")
                path = None
        if path is None:
            path = _bundles.get_bundle_dir(cfg, chip)
        bundle = load_bundle(path)
        prefix = "kda_" + cfg["op"]
        names = [n for n in bundle.kernels if n.startswith(prefix)] or list(bundle.kernels)
        if len(names) != 1:
            raise KdaError("KDA_ERROR_CORRUPT_BUNDLE",
                           f"{path}: expected one {prefix} kernel, found {list(bundle.kernels)}", "kda.ops")
        hit = (bundle, names[0], used_tile)
        _resolved[key] = hit
        return hit


# The bundle directory, the tile and the kernels' strategies the last launch
# used (per thread), for benchmarks and tests that report what a shape got: a
# tile whose bundle is missing falls back to the default bundle (bundle_tile
# None); strategy maps each kernel launched to {"kernel", "kind": "lanes" |
# "tiles", "reason"} (the manifest's, kda-gpu-select-strategy's decision);
# pieces the pipelined pieces of a call (1: none).
last_launch = threading.local()


def _record_launch(bundle, kernel, tile, used_tile):
    last_launch.bundle = bundle.path
    last_launch.requested_tile = tile
    last_launch.bundle_tile = used_tile
    last_launch.strategy = bundle.strategies(kernel)
    last_launch.pieces = 1


def _launch(cfg, chip, named: Dict[str, Any], tile: Optional[Dict[str, int]] = None):
    bundle, kernel, used_tile = _bundle_for(cfg, chip, tile)
    _record_launch(bundle, kernel, tile, used_tile)
    params = bundle.tensor_params(kernel)
    missing = [p["name"] for p in params if p["name"] not in named or named[p["name"]] is None]
    if missing:
        raise KdaError("KDA_ERROR_CORRUPT_BUNDLE",
                       f"{bundle.path}: kernel {kernel} takes tensors {[p['name'] for p in params]}, "
                       f"but the call has nothing for {missing}", "kda.ops")
    tensors = [named[p["name"]] for p in params]
    # An entry's workspaces (the chunk-parallel schedule's intra-chunk
    # results) from torch's caching allocator: the runtime's stream-ordered
    # allocations go back to the driver at every synchronization (a caller
    # that synchronizes after each call pays the mapping again each time);
    # torch keeps them, and the stream order makes reuse safe.
    nbytes = bundle.workspace_bytes(kernel, tensors)
    if nbytes:
        import torch
        workspace = torch.empty(nbytes, dtype=torch.uint8, device=tensors[0].device)
        bundle.launch(kernel, tensors, workspace=workspace)
    else:
        bundle.launch(kernel, tensors)


def _launch_pieces(cfg, chip, named: Dict[str, Any], pieces: int, plan=None):
    """One dense sequence as `pieces` pipelined pieces (kda.tune's
    shape_policy_pieces), launched by the runtime (kda_prepare_pieces /
    kda_launch_pieces, docs/pipelining.md): the entry's intra-chunk kernel
    over each piece's tokens in turn on the current stream, and its state
    kernel over piece i, from piece i - 1's final state, on the driver's
    high-priority stream once piece i's intra-chunk kernel is done, so that
    it runs beside piece i + 1's. The bundle is cfg's with fp32 initial and
    final states (kda.tune.pieces_config) at the pieces' tile; outputs are the
    one-piece run's, bit for bit. A planned call keeps its _Pieces on the
    plan: later calls only store pointers and launch."""
    run = plan.pieces_run if plan is not None else None
    if run is None or run.pieces != pieces:
        run = _Pieces(cfg, chip, named, pieces)
        if plan is not None:
            plan.pieces_run = run
    run(named)


class _Pieces:
    """A pieces schedule for one shape: the bundle's entry, each piece's first
    token (whole chunks a piece) and the runtime's handle, prepared at the
    first call."""

    def __init__(self, cfg, chip, named, pieces, pcfg=None):
        self.pieces = pieces
        # chunk_kda's configuration with fp32 states, or a layer's in pieces
        # (hybrid_attention: its gated delta part has them).
        pcfg = pcfg or _tune.pieces_config(cfg)
        self.tile = tile = _tune.pieces_tile()
        self.bundle, self.entry, self.used_tile = bundle, entry, _ = _bundle_for(pcfg, chip, tile)
        self.entry_params = [p["name"] for p in bundle.entries[entry]["params"]]
        q, v = named["q"], named["v"]
        B, T, _, K = q.shape
        HV, V = v.shape[2], v.shape[3]
        self.device = q.device
        gd = pcfg.get("gated_delta", pcfg)
        tail = (K, V) if gd["state_layout"] == "k_major" else (V, K)
        self.state_shape = (B, HV) + tail
        self.zeros = None  # the first piece's state where the call has none (kept: the kernels only read it)
        self.scratch = None  # the last piece's state where the call wants none
        chunks = -(-T // 16)
        step = -(-chunks // pieces) * 16  # whole chunks a piece
        self.starts = list(range(0, T, step))[:pieces]
        self.run = None  # the runtime's Pieces, prepared at the first call

    def __call__(self, named):
        import torch
        _record_launch(self.bundle, self.entry, self.tile, self.used_tile)
        last_launch.pieces = len(self.starts)
        device = self.device
        first = named.get("initial_state")
        if first is None:
            if self.zeros is None:
                self.zeros = torch.zeros(self.state_shape, dtype=torch.float32, device=device)
            first = self.zeros
        elif first.dtype != torch.float32:
            first = first.float()  # the pieces' bundle reads fp32 states (as FLA's kernel loads them)
        last = named.get("final_state")
        if last is None:
            # Kept: only the kernels write it (the fast path's pointer too).
            if self.scratch is None:
                self.scratch = torch.empty(self.state_shape, dtype=torch.float32, device=device)
            last = self.scratch
        tensors = [first if n == "initial_state" else last if n == "final_state" else named[n]
                   for n in self.entry_params]
        if self.run is None:
            self.run = self.bundle.prepare_pieces(self.entry.encode(), _Marshalled(tensors), self.starts)
            if self.run is None:
                from kda.runtime import library_path
                raise KdaError("KDA_ERROR_INVALID_ARGUMENT",
                               f"pipelined pieces (KDA_PIECES={self.pieces}) need kda_prepare_pieces, which the "
                               f"runtime library {library_path()} predates", "kda.ops")
        run = self.run
        for j, t in enumerate(tensors):
            run.data[j] = t.data_ptr()
        ws = torch.empty(run.workspace_bytes, dtype=torch.uint8, device=device)
        run.launch(ws.data_ptr(), run.workspace_bytes, torch.cuda.current_stream(device).cuda_stream or None)


def _alloc(shape, dtype, device):
    """Allocates an output (tests replace it to poison outputs with NaN)."""
    return _torch().empty(shape, dtype=dtype, device=device)


def _check_no_grad(*tensors):
    import torch
    if torch.is_grad_enabled() and any(t is not None and getattr(t, "requires_grad", False) for t in tensors):
        raise NotImplementedError("kda kernels are forward only (no backward): call them under "
                                  "torch.no_grad() / torch.inference_mode(), or detach the inputs")


def _contig(x):
    return None if x is None else x.contiguous()


# ---------------------------------------------------------------------------
# torch.compile: kda/__init__.py, where torch is installed, registers the
# custom ops (kda/torch_ops.py) and sets these two. While torch.compile
# traces a call, the public functions below hand it to the custom ops (a
# node of the graph with a fake implementation); eagerly they run directly.
# ---------------------------------------------------------------------------

def _compiling() -> bool:
    return False


_traced = None  # kda.torch_ops once registered


# ---------------------------------------------------------------------------
# FLA API
# ---------------------------------------------------------------------------

def chunk_kda(
    q,
    k,
    v,
    g,
    beta,
    scale: float | None = None,
    initial_state=None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False,
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    safe_gate: bool = False,
    lower_bound: float | None = None,
    disable_recompute: bool = False,
    return_intermediate_states: bool = False,
    state_v_first: bool = False,
    cu_seqlens=None,
    cu_seqlens_cpu=None,
    cp_context=None,
    **kwargs,
):
    r"""Chunkwise KDA, argument-compatible with ``fla.ops.kda.chunk_kda``.

    Args (as FLA):
        q, k: ``[B, T, H, K]``; v: ``[B, T, HV, V]`` (GVA when HV > H).
        g: ``[B, T, HV, K]`` log-space decay, or the raw gate with
            ``use_gate_in_kernel=True``: ``-exp(A_log) * softplus(g + dt_bias)``,
            or ``lower_bound * sigmoid(exp(A_log) * (g + dt_bias))`` when
            ``lower_bound`` is set (``lower_bound * sigmoid(g + dt_bias)``
            without ``A_log``); ``A_log`` ``[HV]`` and ``dt_bias``
            ``[HV * K]`` are passed as keyword arguments, as in FLA.
        beta: ``[B, T, HV]``; logits with ``use_beta_sigmoid_in_kernel``
            (``2 * sigmoid`` with ``allow_neg_eigval``).
        scale: default ``1 / sqrt(K)``.
        initial_state: fp32 ``[N, HV, K, V]`` (``[N, HV, V, K]`` with
            ``state_v_first``).
        output_final_state: also return the final fp32 state.
        use_qk_l2norm_in_kernel: l2-normalise q and k over K (eps 1e-6).
        cu_seqlens: ``[N + 1]`` int32/int64 offsets with B = 1.
        safe_gate: accepted (an implementation choice in FLA; kda keeps every
            exponent <= 0 anyway); requires ``lower_bound`` with the gate in
            kernel, as in FLA.
        disable_recompute, cu_seqlens_cpu: accepted and ignored (they concern
            FLA's backward pass and host-side chunk indexing).
        chunk_size (kwarg): kda's chunk (16, 32 or 64); default by head size.

        return_intermediate_states: also return FLA's ``h``, the state
            before every 64 tokens (FLA's chunk), in k's dtype: ``[B, NT, HV,
            K, V]`` (``[..., V, K]`` with ``state_v_first``), NT = ceil(T /
            64); with cu_seqlens B = 1 and NT is the sum over sequences of
            ceil(T_n / 64), sequence by sequence (FLA's flattened layout).

    Extension: ``boundary_interval=L`` (kwarg, a multiple of the chunk)
    returns the fp32 chunk-boundary states of ``kda.gated_delta`` as the
    third value: ``[N, NT, HV, K, V]``, the state before tokens 0, L, 2L, ...
    of each sequence, NT = ceil(T / L) (with cu_seqlens: the longest
    sequence's; entries past a shorter sequence's end are zero). A serving
    engine's prefix-cache block size is such an interval. ``boundary_dtype=
    "bf16"`` keeps them in bf16 (rounded from the fp32 state).
    With ``boundary_state_indices=table`` (``[N, NB]`` int32/int64, a block
    table) and ``boundary_states=pool`` (``[S, HV, K, V]``, fp32 or bf16)
    as well, the kernel writes boundary j of sequence n straight into slot
    ``table[n, j]`` of the pool (negative: not kept; j * L past the
    sequence's end: not written) and leaves every other slot untouched; the
    pool is returned as the third value.

    Gradients: where an input requires grad (and grad mode is on), the call
    is differentiable (``torch.autograd.Function``): the forward also keeps
    the fp32 state before every 16 tokens, and the backward runs the
    compiler's derived gradient (``kda.gated_delta_grad``), giving FLA's
    gradients (dq, dk, dv, dg, dbeta, dh0, and dA_log, ddt_bias with the gate
    in kernel) in the inputs' dtypes. Not with boundary states or
    ``return_intermediate_states``.

    cp_context: context parallelism (``kda.cp``; FLA's ``fla.ops.cp`` contexts serve too): this
        rank's share of a packed batch split over a torch.distributed group; the earlier ranks'
        summaries (transition and state from zero) are all-gathered and chained into its first
        sequence's initial state. Forward only; B = 1, the sequences from the context, no
        initial_state or output_final_state (as FLA). Not under torch.compile.

    Returns:
        ``(o, final_state)``: o ``[B, T, HV, V]`` in q's dtype (FLA returns
        ``o.type_as(q)``), final_state fp32 or None; ``(o, final_state, h)``
        with ``return_intermediate_states`` or ``boundary_interval``.

    Under ``torch.compile`` the call is the custom op ``torch.ops.kda.chunk_kda``
    (no graph break); boundary intervals and pools stay eager-only there.
    """
    if _compiling() and _traced is not None:
        if cp_context is not None:
            raise NotImplementedError("kda.chunk_kda: context parallelism (cp_context) is not supported")
        return _traced.chunk_kda_traced(q, k, v, g, beta, scale, initial_state, output_final_state,
                                        use_qk_l2norm_in_kernel, use_gate_in_kernel,
                                        use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound,
                                        state_v_first, cu_seqlens, return_intermediate_states, kwargs)
    if "transpose_state_layout" in kwargs:
        if state_v_first:
            raise ValueError("Cannot pass both `state_v_first` and the deprecated `transpose_state_layout`.")
        warnings.warn("`transpose_state_layout` is deprecated and renamed to `state_v_first`.",
                      DeprecationWarning, stacklevel=2)
        state_v_first = kwargs.pop("transpose_state_layout")
    boundary_interval = kwargs.pop("boundary_interval", None)
    if return_intermediate_states and boundary_interval is not None:
        raise ValueError("kda.chunk_kda: pass return_intermediate_states (FLA's h, every 64 tokens) "
                         "or boundary_interval, not both")
    if boundary_interval is not None and (not isinstance(boundary_interval, int)
                                          or isinstance(boundary_interval, bool)
                                          or boundary_interval <= 0):
        raise ValueError(f"kda.chunk_kda: boundary_interval must be a positive number of tokens, "
                         f"got {boundary_interval!r}")
    boundary_dtype = kwargs.pop("boundary_dtype", None)
    if boundary_dtype is not None and boundary_interval is None:
        raise ValueError("kda.chunk_kda: boundary_dtype goes with a boundary_interval (the states it keeps)")
    if boundary_dtype not in (None, "f32", "bf16"):
        raise ValueError(f"kda.chunk_kda: boundary_dtype: expected 'f32' or 'bf16', got {boundary_dtype!r}")
    table = kwargs.pop("boundary_state_indices", None)
    pool = kwargs.pop("boundary_states", None)
    if pool is not None and boundary_dtype is not None:
        raise ValueError("kda.chunk_kda: boundary_dtype is the pool's dtype with boundary_states; pass one")
    if (table is None) != (pool is None):
        raise ValueError("kda.chunk_kda: boundary_state_indices (the slots) and boundary_states "
                         "(the pool they name) go together")
    if table is not None and boundary_interval is None:
        raise ValueError("kda.chunk_kda: boundary_state_indices needs a boundary_interval")
    fla_h = bool(return_intermediate_states)
    A_log = kwargs.pop("A_log", None) if use_gate_in_kernel else None
    dt_bias = kwargs.pop("dt_bias", None) if use_gate_in_kernel else None
    kwargs.pop("A_log", None)
    kwargs.pop("dt_bias", None)
    chunk_size = kwargs.pop("chunk_size", None)
    if kwargs:
        raise TypeError(f"kda.chunk_kda: unknown keyword arguments {sorted(kwargs)}")
    if cp_context is not None:
        # Context parallelism (kda.cp): this rank's tokens, from the state
        # the earlier ranks' summaries give its first sequence.
        if boundary_interval is not None or table is not None or fla_h:
            raise NotImplementedError("kda.chunk_kda: chunk-boundary states (boundary_interval, "
                                      "return_intermediate_states) are not supported with cp_context")
        if _wants_gradient(q, k, v, g, beta, initial_state, A_log, dt_bias):
            raise NotImplementedError("kda.chunk_kda: cp_context is forward only (no gradients yet); "
                                      "detach the inputs or run under torch.no_grad()")
        from kda import cp as _cp
        extra = {"chunk_size": chunk_size} if chunk_size is not None else {}
        if A_log is not None:
            extra["A_log"] = A_log
        if dt_bias is not None:
            extra["dt_bias"] = dt_bias
        return _cp.chunk_kda_cp(q, k, v, g, beta, cp_context, initial_state=initial_state,
                                output_final_state=output_final_state, cu_seqlens=cu_seqlens,
                                state_v_first=state_v_first, scale=scale,
                                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                                use_gate_in_kernel=use_gate_in_kernel,
                                use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                                allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate,
                                lower_bound=lower_bound, **extra)

    if _wants_gradient(q, k, v, g, beta, initial_state, A_log, dt_bias):
        if boundary_interval is not None or table is not None or fla_h:
            raise NotImplementedError("kda.chunk_kda: gradients through chunk-boundary states "
                                      "(boundary_interval, return_intermediate_states) are not "
                                      "supported; detach the inputs or drop those options")
        return _chunk_kda_autograd(q, k, v, g, beta, initial_state, A_log, dt_bias, cu_seqlens, dict(
            scale=scale, output_final_state=output_final_state,
            use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_gate_in_kernel=use_gate_in_kernel,
            use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
            safe_gate=safe_gate, lower_bound=lower_bound, state_v_first=state_v_first,
            cu_seqlens_cpu=cu_seqlens_cpu))

    # A call whose configuration follows from shapes, dtypes, strides,
    # devices and options alone (no boundary states: their counts read
    # cu_seqlens' values) keeps a plan per all of them, as decode does: a
    # repeated call skips the argument checks, the bundle look-up and the
    # tensor marshalling it already did (_Plan).
    plan = key = None
    if boundary_interval is None and table is None and not fla_h:
        key = (_tensor_key(q), _tensor_key(k), _tensor_key(v), _tensor_key(g), _tensor_key(beta),
               _tensor_key(initial_state), _tensor_key(cu_seqlens), _tensor_key(A_log),
               _tensor_key(dt_bias), scale, output_final_state, use_qk_l2norm_in_kernel,
               use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, safe_gate, lower_bound,
               state_v_first, chunk_size, _plan_env())
        plan = _chunk_plans.get(key)
    if plan is not None:
        if plan.fast is not None:
            return _run_fast(plan, plan.fast, q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias)
        return _run_gated_delta(plan.cfg, q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias,
                                cu_seqlens_cpu=cu_seqlens_cpu, plan=plan)
    cfg = chunk_kda_config(q, k, v, g, beta, scale=scale, initial_state=initial_state,
                           output_final_state=output_final_state,
                           use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                           use_gate_in_kernel=use_gate_in_kernel,
                           use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                           allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate,
                           lower_bound=lower_bound, state_v_first=state_v_first,
                           cu_seqlens=cu_seqlens, A_log=A_log, dt_bias=dt_bias,
                           chunk_size=chunk_size, boundary_interval=boundary_interval,
                           boundary_dtype=_dt(pool) if pool is not None else boundary_dtype or "f32",
                           boundary_indices_dtype=_dt(table) if table is not None else None,
                           return_intermediate_states=fla_h)
    if table is not None:
        _check_boundary_pool(cfg, q, v, cu_seqlens, table, pool)
    if key is not None:
        plan = _Plan(cfg)
    result = _run_gated_delta(cfg, q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias,
                              cu_seqlens_cpu=cu_seqlens_cpu, fla_h=fla_h, table=table, pool=pool, plan=plan)
    if key is not None:
        if len(_chunk_plans) >= 256:
            _chunk_plans.clear()
        _chunk_plans[key] = plan
    return result


# ---------------------------------------------------------------------------
# Autograd: chunk_kda's backward, the compiler's derived gradient
# (kda.gated_delta_grad, issue 24)
# ---------------------------------------------------------------------------

# The backward's chunk: the forward keeps the state before every GRAD_CHUNK
# tokens (its chunk-boundary states, fp32), and the gradient kernel reads
# them instead of recomputing them (FLA's split: the state pass reruns, the
# intra-chunk quantities are recomputed per chunk).
GRAD_CHUNK = 16


def grad_states_dtype() -> str:
    """The kept states' dtype: f32, or bf16 (KDA_GRAD_STATES=bf16: half the
    bytes the forward writes and the gradient's step grid reads; a strategy
    choice measured in bench/RESULTS.md). Read at each call."""
    dtype = os.environ.get("KDA_GRAD_STATES") or "f32"
    if dtype not in ("f32", "bf16"):
        raise ValueError(f"KDA_GRAD_STATES: expected f32 or bf16, got {dtype!r}")
    return dtype


def _wants_gradient(*tensors) -> bool:
    if _compiling() or not any(t is not None and getattr(t, "requires_grad", False) for t in tensors):
        return False  # (torch is not imported for tensors that are not torch's)
    return _torch().is_grad_enabled()


_autograd_class = None


def _chunk_kda_function():
    """The torch.autograd.Function behind a differentiable chunk_kda call
    (made on first use: torch is imported lazily)."""
    global _autograd_class
    if _autograd_class is not None:
        return _autograd_class
    torch = _torch()

    class ChunkKDAFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, g, beta, initial_state, A_log, dt_bias, cu_seqlens, opts):
            # Under autograd.Function.forward gradients are off: this is the
            # plain forward, with the states the backward reads.
            o, ht, states = chunk_kda(
                q, k, v, g, beta, scale=opts["scale"], initial_state=initial_state,
                output_final_state=opts["output_final_state"],
                use_qk_l2norm_in_kernel=opts["use_qk_l2norm_in_kernel"],
                use_gate_in_kernel=opts["use_gate_in_kernel"],
                use_beta_sigmoid_in_kernel=opts["use_beta_sigmoid_in_kernel"],
                allow_neg_eigval=opts["allow_neg_eigval"], safe_gate=opts["safe_gate"],
                lower_bound=opts["lower_bound"], state_v_first=opts["state_v_first"],
                cu_seqlens=cu_seqlens, cu_seqlens_cpu=opts["cu_seqlens_cpu"],
                A_log=A_log, dt_bias=dt_bias, boundary_interval=GRAD_CHUNK,
                boundary_dtype=grad_states_dtype())
            ctx.save_for_backward(q, k, v, g, beta, initial_state, A_log, dt_bias, cu_seqlens, states)
            ctx.opts = opts
            ctx.set_materialize_grads(False)
            return o, ht

        @staticmethod
        def backward(ctx, do, dht):
            grads = _chunk_kda_backward(ctx.opts, *ctx.saved_tensors, do, dht)
            return grads + (None, None)

    _autograd_class = ChunkKDAFunction
    return ChunkKDAFunction


def _chunk_kda_autograd(q, k, v, g, beta, initial_state, A_log, dt_bias, cu_seqlens, opts):
    o, ht = _chunk_kda_function().apply(q, k, v, g, beta, initial_state, A_log, dt_bias,
                                        cu_seqlens, opts)
    return o, ht


def chunk_kda_grad_config(q, k, v, g, beta, initial_state, A_log, dt_bias, cu_seqlens, opts,
                          d_final_state=False, states_dtype=None):
    """The kda.gated_delta_grad configuration of a differentiable chunk_kda
    call (``opts``: its options, as _chunk_kda_autograd gets them). It is
    derived from the forward's configuration *with* its kept states, whose
    layout is the one the gradient reads them in (a configuration without
    states says k_major whatever state_v_first says). ``states_dtype``: the
    kept states' (default: grad_states_dtype())."""
    states_dtype = states_dtype or grad_states_dtype()
    cfg = chunk_kda_config(q, k, v, g, beta, scale=opts["scale"], initial_state=initial_state,
                           output_final_state=opts["output_final_state"],
                           use_qk_l2norm_in_kernel=opts["use_qk_l2norm_in_kernel"],
                           use_gate_in_kernel=opts["use_gate_in_kernel"],
                           use_beta_sigmoid_in_kernel=opts["use_beta_sigmoid_in_kernel"],
                           allow_neg_eigval=opts["allow_neg_eigval"], safe_gate=opts["safe_gate"],
                           lower_bound=opts["lower_bound"], state_v_first=opts["state_v_first"],
                           cu_seqlens=cu_seqlens, A_log=A_log, dt_bias=dt_bias,
                           boundary_interval=GRAD_CHUNK, boundary_dtype=states_dtype)
    return _bundles.gated_delta_grad_config(cfg, d_final_state=d_final_state, chunk=GRAD_CHUNK)


def _chunk_kda_backward(opts, q, k, v, g, beta, initial_state, A_log, dt_bias, cu_seqlens, states,
                        do, dht):
    """Gradients of chunk_kda's inputs (q, k, v, g, beta, initial_state,
    A_log, dt_bias; None where absent) by the kda.gated_delta_grad kernel,
    in each input's dtype and shape."""
    torch = _torch()
    gcfg = chunk_kda_grad_config(q, k, v, g, beta, initial_state, A_log, dt_bias, cu_seqlens, opts,
                                 d_final_state=dht is not None,
                                 states_dtype={torch.float32: "f32", torch.bfloat16: "bf16"}[states.dtype])
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    dev = q.device
    if do is None:
        do = torch.zeros(B, T, HV, V, dtype=v.dtype, device=dev)
    do = do.to(v.dtype).contiguous()
    if do.data_ptr() % 16:
        # Autograd's output gradient may be a view at any element offset; the
        # gradient's kernels copy its rows 16 bytes at a time (the manifest
        # says so, and the runtime refuses a misaligned tensor): an aligned copy.
        do = do.clone()
    named = {"q": q.contiguous(), "k": k.contiguous(), "v": v.contiguous(),
             "d_o": do, "gate": _contig(g), "beta": _contig(beta),
             "initial_state": _contig(initial_state), "cu_seqlens": _contig(cu_seqlens),
             "A_log": A_log.reshape(HV).contiguous() if A_log is not None else None,
             "chunk_states": states.contiguous(),
             "d_final_state": dht.float().contiguous() if dht is not None else None}
    if dt_bias is not None:
        channel = g is not None and g.dim() == 4
        named["dt_bias"] = dt_bias.reshape((HV, K) if channel else (HV,)).contiguous()
    f32 = torch.float32
    # The gradients of q, k, v, g and beta come in their inputs' dtypes
    # (grads_dtype "input": the kernels convert on their stores, no cast
    # after the call); the others in f32, cast below where the input is not.
    own = gcfg.get("grads_dtype") == "input"
    mine = lambda like: like.dtype if own else f32  # noqa: E731
    named["d_q"] = torch.empty(B, T, H, K, dtype=mine(q), device=dev)
    named["d_k"] = torch.empty(B, T, H, K, dtype=mine(k), device=dev)
    named["d_v"] = torch.empty(B, T, HV, V, dtype=mine(v), device=dev)
    if g is not None:
        named["d_gate"] = torch.empty(g.shape, dtype=mine(g), device=dev)
    if beta is not None:
        named["d_beta"] = torch.empty(beta.shape, dtype=mine(beta), device=dev)
    if initial_state is not None:
        named["d_initial_state"] = torch.empty(initial_state.shape, dtype=f32, device=dev)
    if A_log is not None:
        named["d_A_log"] = torch.empty(HV, dtype=f32, device=dev)
    if dt_bias is not None:
        named["d_dt_bias"] = torch.empty(named["dt_bias"].shape, dtype=f32, device=dev)
    chip = chip_for_device(dev)
    # The reverse scan's V block by how many (sequence, head) programs the
    # chip holds (kda.tune.grad_policy_tile).
    N = B if cu_seqlens is None else cu_seqlens.shape[0] - 1
    tile = _tune.grad_policy_tile(gcfg, chip, N, HV, _multiprocessors(dev))
    with torch.cuda.device(dev):
        _launch(gcfg, chip, named, tile)

    def back(name, like):
        if like is None:
            return None
        return named[name].reshape(like.shape).to(like.dtype)
    return (back("d_q", q), back("d_k", k), back("d_v", v), back("d_gate", g), back("d_beta", beta),
            back("d_initial_state", initial_state), back("d_A_log", A_log), back("d_dt_bias", dt_bias))


def _check_boundary_pool(cfg, q, v, cu_seqlens, table, pool):
    """Shapes and dtypes of a block table and the pool it names (ValueError)."""
    N = _shape(q)[0] if cu_seqlens is None else _shape(cu_seqlens)[0] - 1
    HV, K, V = _shape(v)[2], _shape(q)[3], _shape(v)[3]
    tail = (K, V) if cfg["state_layout"] == "k_major" else (V, K)
    ts, ps = _shape(table), _shape(pool)
    if len(ts) != 2 or ts[0] != N:
        raise ValueError(f"boundary_state_indices: expected [N, NB] with N = {N}, got {list(ts)}")
    if _dt(table) not in ("i32", "i64"):
        raise ValueError(f"boundary_state_indices: expected int32 or int64, got {_dt(table)}")
    if len(ps) != 4 or tuple(ps[1:]) != (HV,) + tail:
        raise ValueError(f"boundary_states: expected a pool [S, {HV}, {tail[0]}, {tail[1]}], "
                         f"got {list(ps)}")
    if _dt(pool) not in ("f32", "bf16"):
        raise ValueError(f"boundary_states: expected a float32 or bfloat16 pool, got {_dt(pool)}")


# FLA's chunk size: return_intermediate_states keeps the state before every
# FLA_CHUNK tokens.
FLA_CHUNK = 64


def _sequence_lengths(cu_seqlens, cu_seqlens_cpu):
    """Host copy of the sequence lengths (cu_seqlens_cpu when given: no sync)."""
    src = cu_seqlens_cpu if cu_seqlens_cpu is not None else cu_seqlens
    offsets = [int(x) for x in src.tolist()]
    return [b - a for a, b in zip(offsets, offsets[1:])]


def _run_gated_delta(cfg, q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias,
                     cu_seqlens_cpu=None, fla_h=False, table=None, pool=None, plan=None):
    import torch
    _check_no_grad(q, k, v, g, beta, initial_state, A_log, dt_bias)
    if q.device.type != "cuda":
        raise ValueError(f"kda: inputs must be CUDA tensors, q is on {q.device}")
    if plan is not None and plan.chip is not None:
        chip = plan.chip
    else:
        chip = chip_for_device(q.device)
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    N = B if cu_seqlens is None else cu_seqlens.shape[0] - 1
    given = (q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias)
    q, k, v, g, beta = (_contig(x) for x in (q, k, v, g, beta))
    if cu_seqlens is not None and cu_seqlens.device != q.device:
        cu_seqlens = cu_seqlens.to(q.device)
    named = {"q": q, "k": k, "v": v, "gate": g, "beta": beta,
             "initial_state": _contig(initial_state), "cu_seqlens": _contig(cu_seqlens),
             "A_log": A_log.reshape(HV).contiguous() if A_log is not None else None,
             "dt_bias": dt_bias.reshape(HV, K).contiguous() if dt_bias is not None else None}
    o = _alloc((B, T, HV, V), v.dtype, q.device)
    named["o"] = o
    final_state = None
    if cfg["final_state_dtype"]:
        tail = (K, V) if cfg["state_layout"] == "k_major" else (V, K)
        final_state = _alloc((N, HV) + tail, torch.float32, q.device)
        named["final_state"] = final_state
    boundary = None
    interval = cfg.get("boundary_interval")
    if interval:
        tail = (K, V) if cfg["state_layout"] == "k_major" else (V, K)
        bdtype = {"f32": torch.float32, "bf16": torch.bfloat16,
                  "f16": torch.float16}[cfg["boundary_dtype"]]
        if pool is not None:
            # The caller's pool, updated in place (slots it names only).
            if pool.device != q.device or not pool.is_contiguous():
                raise ValueError("boundary_states: the pool must be a contiguous tensor on q's device")
            boundary = pool
            named["boundary_indices"] = _contig(table.to(q.device))
        elif cu_seqlens is None:
            boundary = _alloc((N, -(-T // interval), HV) + tail, bdtype, q.device)
        else:
            lengths = _sequence_lengths(cu_seqlens, cu_seqlens_cpu)
            counts = [-(-n // interval) for n in lengths]
            if fla_h:
                # FLA's varlen h, [1, sum_n ceil(T_n / 64), ...]: a pool with
                # one slot per (sequence, chunk), sequence after sequence. The
                # table is made on the device from cu_seqlens (a host-made one
                # would be a pageable copy, which synchronizes the stream).
                NB = max(counts + [1])
                c = cu_seqlens.to(torch.int64)
                per_seq = torch.div(c[1:] - c[:-1] + (interval - 1), interval,
                                    rounding_mode="floor")
                first = torch.cumsum(per_seq, 0) - per_seq
                j = torch.arange(NB, device=q.device, dtype=torch.int64)
                named["boundary_indices"] = torch.where(
                    j[None, :] < per_seq[:, None], first[:, None] + j[None, :],
                    torch.full((), -1, dtype=torch.int64, device=q.device)).to(torch.int32)
                boundary = _alloc((sum(counts), HV) + tail, bdtype, q.device)
            else:
                boundary = _alloc((N, max(counts + [0]), HV) + tail, bdtype, q.device)
        named["boundary_states"] = boundary
    # The tuning database's tile for this shape bucket (kda.tune), if any;
    # else the shape policy's (kda.tune.shape_policy_tile: V blocks by how
    # many (sequence, head) programs the chip holds at once).
    if plan is not None and plan.chip is not None and plan.pieces > 1:
        with torch.cuda.device(q.device):
            _launch_pieces(cfg, chip, named, plan.pieces, plan)
        if plan.fast is None and o.dtype == q.dtype:
            plan.fast = _Fast.of_pieces(plan, given, named, o, final_state)
    elif plan is not None and plan.chip is not None:
        _launch_planned(plan, named, _device_index(q.device))
        if plan.fast is None and o.dtype == q.dtype:
            plan.fast = _Fast.of(plan, given, named, o, final_state)
    else:
        T_seq = T if cu_seqlens is None else max(1, (B * T) // max(1, N))
        tile = _tune.tuned_tile(cfg, chip, T_seq, N, HV)
        pieces = 1
        if tile is None:
            sms = _multiprocessors(q.device)
            tile = _tune.shape_policy_tile(cfg, chip, N, HV, sms, T=T_seq)
            pieces = _tune.shape_policy_pieces(cfg, chip, N, HV, sms, T, dense=cu_seqlens is None)
        if tile is not None and interval and interval % tile["chunk"]:
            tile = None  # the bundle's own chunk divides the interval (validated)
        with torch.cuda.device(q.device):
            if pieces > 1:
                _launch_pieces(cfg, chip, named, pieces, plan)
            else:
                _launch(cfg, chip, named, tile)
        if plan is not None:
            # Only a call that launched makes a plan (the tile and bundle are
            # the ones it used).
            plan.chip, plan.tile, plan.pieces = chip, tile, pieces
    if o.dtype != q.dtype:
        o = o.to(q.dtype)
    if boundary is None:
        return o, final_state
    if fla_h and cu_seqlens is not None:
        boundary = boundary.unsqueeze(0)
    return o, final_state, boundary


def fused_recurrent_kda(
    q,
    k,
    v,
    g,
    beta,
    A_log=None,
    dt_bias=None,
    scale: float | None = None,
    initial_state=None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False,
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    lower_bound: float | None = None,
    state_v_first: bool = False,
    cu_seqlens=None,
    **kwargs,
):
    r"""KDA recurrence, argument-compatible with ``fla.ops.kda.fused_recurrent_kda``.

    Same arguments and layouts as FLA (``A_log`` ``[HV]``, ``dt_bias``
    ``[HV * K]`` are positional here, as in FLA). FLA evaluates the
    recurrence token by token; the result is the same function as
    ``chunk_kda``, so kda runs its chunkwise ``kda.gated_delta`` kernel (a
    bundle holds no chunk-size-1 kernel). Outputs agree to rounding, not
    bit for bit. A non-fp32 ``initial_state`` is converted to fp32, as FLA's
    kernel loads it.

    Extension (vLLM-style decode on a state pool): ``ssm_state_indices=[N]``
    (int32/int64, negative = skip) makes ``initial_state`` a pool
    ``[P, HV, K, V]`` updated in place, one token per sequence (q ``[N, 1, H,
    K]``, or ``[1, N, H, K]`` with ``cu_seqlens = arange(N + 1)``); returns
    ``(o, initial_state)``. This runs ``kda.decode_step``. With
    ``read_state_indices=[N]`` as well, sequence ``n`` reads slot
    ``read_state_indices[n]`` (negative: skipped) and writes
    ``ssm_state_indices[n]`` (negative: the new state is not kept), so a
    speculative step never clobbers the state it starts from; no sequence may
    read a slot another one writes. With ``read_pool`` (a second pool of the
    pool's dtype and layout, ``[PR, HV, ...]``) the start states come from it
    (slot ``read_state_indices[n]``, else ``ssm_state_indices[n]``) and the
    new ones go to ``initial_state``'s slots: FLA's per-sequence decode runs
    so (the caller's states read once, the final ones written once).
    Several tokens per sequence (speculative decoding, multi-token
    prediction): q ``[N, T, H, K]`` with ``ssm_state_indices=[N, T]``: sequence
    ``n`` starts from slot ``ssm_state_indices[n, 0]`` (or, with FLA's
    ``num_accepted_tokens=[N]``, ``ssm_state_indices[n, accepted - 1]``;
    or ``read_state_indices[n]``), and its state after token ``t`` is kept in
    slot ``ssm_state_indices[n, t]`` (negative: not kept); o ``[N, T, HV, V]``.
    vLLM's packed form works too: q ``[1, total, H, K]`` with ``cu_seqlens``
    ``[N + 1]`` (sequence n's T_n <= T tokens) and ``ssm_state_indices [N,
    T]``; o ``[1, total, HV, V]``.

    Returns:
        ``(o, final_state)``: o ``[B, T, HV, V]``, final_state fp32 or None.

    ``inplace_final_state=True`` (FLA's kernel-level flag; needs ``initial_state``
    fp32 and contiguous, and ``output_final_state``): the final state is written
    over ``initial_state``, which is returned as the final state. For one token
    per sequence that is the decode step on the caller's states, with no copy
    (``kda.layers.KimiDeltaAttention`` decodes so, its cache owning the state).

    Under ``torch.compile`` the call is ``torch.ops.kda.fused_recurrent_kda``
    (dense states) or ``torch.ops.kda.decode_kda`` (a pool, updated in place).
    """
    if _compiling() and _traced is not None:
        return _traced.fused_recurrent_kda_traced(q, k, v, g, beta, A_log, dt_bias, scale, initial_state,
                                                  output_final_state, use_qk_l2norm_in_kernel,
                                                  use_gate_in_kernel, use_beta_sigmoid_in_kernel,
                                                  allow_neg_eigval, lower_bound, state_v_first, cu_seqlens,
                                                  kwargs)
    if "transpose_state_layout" in kwargs:
        if state_v_first:
            raise ValueError("Cannot pass both `state_v_first` and the deprecated `transpose_state_layout`.")
        warnings.warn("`transpose_state_layout` is deprecated and renamed to `state_v_first`.",
                      DeprecationWarning, stacklevel=2)
        state_v_first = kwargs.pop("transpose_state_layout")
    ssm_state_indices = kwargs.pop("ssm_state_indices", None)
    read_state_indices = kwargs.pop("read_state_indices", None)
    # kda's extension: the decode step's start states come from this pool
    # (slot read_state_indices[n], else ssm_state_indices[n]) instead of
    # initial_state's, which only receives the new states.
    read_pool = kwargs.pop("read_pool", None)
    if read_pool is not None and ssm_state_indices is None:
        raise ValueError(_READ_POOL_WITHOUT_SLOTS)
    if read_state_indices is not None and ssm_state_indices is None:
        raise ValueError("read_state_indices names the slots a decode step reads: it needs "
                         "ssm_state_indices (the slots it writes)")
    num_accepted = kwargs.pop("num_accepted_tokens", None)
    if num_accepted is not None:
        # FLA's speculative form: sequence n starts from the state kept after
        # its last accepted token, slot ssm_state_indices[n, accepted - 1].
        if ssm_state_indices is None or len(_shape(ssm_state_indices)) != 2:
            raise ValueError("num_accepted_tokens needs 2-D ssm_state_indices [N, T]")
        if read_state_indices is not None:
            raise ValueError("pass num_accepted_tokens or read_state_indices, not both")
        if _shape(num_accepted) != (_shape(ssm_state_indices)[0],):
            raise ValueError(f"num_accepted_tokens: expected [N] = [{_shape(ssm_state_indices)[0]}], "
                             f"got {list(_shape(num_accepted))}")
        import torch
        col = (num_accepted.to(device=ssm_state_indices.device, dtype=torch.int64) - 1).clamp(
            0, _shape(ssm_state_indices)[1] - 1)
        read_state_indices = torch.gather(ssm_state_indices, 1, col.unsqueeze(1)).squeeze(1).contiguous()
    inplace = bool(kwargs.pop("inplace_final_state", False))
    if kwargs:
        raise TypeError(f"kda.fused_recurrent_kda: unknown keyword arguments {sorted(kwargs)}")
    if inplace and ssm_state_indices is None:
        # FLA's inplace_final_state: the final state is written over the
        # initial one, which comes back as the final state (no new tensor,
        # and for one token per sequence no copy either).
        if initial_state is None or not output_final_state:
            raise ValueError("inplace_final_state writes the final state over initial_state: it needs "
                             "initial_state and output_final_state=True")
        if _dt(initial_state) != "f32" or not initial_state.is_contiguous() or initial_state.device != q.device:
            raise ValueError("inplace_final_state: initial_state must be a contiguous float32 tensor on q's "
                             "device (it is updated in place)")
    if cu_seqlens is not None:
        if q.shape[0] != 1:
            raise ValueError(f"The batch size is expected to be 1 rather than {q.shape[0]} when using `cu_seqlens`."
                             f"Please flatten variable-length inputs before processing.")
        if ssm_state_indices is None and initial_state is not None and initial_state.shape[0] != len(cu_seqlens) - 1:
            raise ValueError(
                f"The number of initial states is expected to be equal to the number of input sequences, "
                f"i.e., {len(cu_seqlens) - 1} rather than {initial_state.shape[0]}.")
    if ssm_state_indices is None and initial_state is not None and _dt(initial_state) != "f32":
        initial_state = initial_state.float()
    if _per_sequence_decode(q, cu_seqlens, ssm_state_indices, initial_state):
        # FLA's decode call on the decode step (_per_sequence_decode says why):
        # the states are a pool of N slots. Keeping the final state, the
        # caller's states are the step's read pool and the final ones a fresh
        # pool (the caller's stay as they were, as FLA leaves them);
        # otherwise the step reads the caller's states and keeps none.
        import torch
        N = q.shape[0]
        slots = _arange_slots(N, q.device)
        options = dict(use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_gate_in_kernel=use_gate_in_kernel,
                       use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                       allow_neg_eigval=allow_neg_eigval, lower_bound=lower_bound, state_v_first=state_v_first)
        if output_final_state:
            if inplace:
                return fused_recurrent_kda(q, k, v, g, beta, A_log, dt_bias, scale=scale,
                                           initial_state=initial_state, ssm_state_indices=slots, **options)
            # The step reads the caller's states (read_pool) and writes the
            # final ones into a fresh pool: each state read once and written
            # once, the caller's left as they were (as FLA leaves them).
            states = initial_state.contiguous()
            return fused_recurrent_kda(q, k, v, g, beta, A_log, dt_bias, scale=scale,
                                       initial_state=torch.empty_like(states), ssm_state_indices=slots,
                                       read_pool=states, **options)
        keep_none = torch.full((N,), -1, dtype=torch.int32, device=q.device)
        o, _ = fused_recurrent_kda(q, k, v, g, beta, A_log, dt_bias, scale=scale,
                                   initial_state=initial_state.contiguous(), ssm_state_indices=keep_none,
                                   read_state_indices=slots, **options)
        return o, None
    if (cu_seqlens is not None and ssm_state_indices is not None
            and len(_shape(ssm_state_indices)) == 2):
        return _ragged_multi_token(q, k, v, g, beta, A_log, dt_bias, scale, initial_state, cu_seqlens,
                                   ssm_state_indices, read_state_indices,
                                   dict(use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                                        use_gate_in_kernel=use_gate_in_kernel,
                                        use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                                        allow_neg_eigval=allow_neg_eigval, lower_bound=lower_bound,
                                        state_v_first=state_v_first))
    plan = key = None
    if ssm_state_indices is not None:
        # A serving engine calls decode once per layer and token with the
        # same shapes: the configuration (and the bundle it resolves to) is
        # kept per everything it is derived from, so a repeated call skips
        # the argument checks it already passed (they depend on shapes,
        # dtypes, devices, strides and options only; the bundle path and
        # chip from the environment are part of the key, as they choose the
        # bundle).
        key = (_tensor_key(q), _tensor_key(k), _tensor_key(v), _tensor_key(g), _tensor_key(beta),
               _tensor_key(A_log), _tensor_key(dt_bias), _tensor_key(initial_state),
               _tensor_key(ssm_state_indices), _tensor_key(read_state_indices), _tensor_key(read_pool),
               _tensor_key(cu_seqlens),
               scale, output_final_state,
               use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
               lower_bound, state_v_first, _plan_env())
        plan = _decode_plans.get(key)
    if plan is not None:
        cfg = plan.cfg
    else:
        cfg = fused_recurrent_kda_config(q, k, v, g, beta, A_log=A_log, dt_bias=dt_bias, scale=scale,
                                         initial_state=initial_state, output_final_state=output_final_state,
                                         use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                                         use_gate_in_kernel=use_gate_in_kernel,
                                         use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                                         allow_neg_eigval=allow_neg_eigval, lower_bound=lower_bound,
                                         state_v_first=state_v_first, cu_seqlens=cu_seqlens,
                                         ssm_state_indices=ssm_state_indices,
                                         read_state_indices=read_state_indices, read_pool=read_pool)
    if not use_gate_in_kernel:
        A_log = dt_bias = None
    if ssm_state_indices is None:
        o, ht = _run_gated_delta(cfg, q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias)
        if inplace:
            initial_state.copy_(ht)
            ht = initial_state
        return o, ht
    if plan is None:
        plan = _Plan(cfg)
    result = _run_decode(plan, q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias, ssm_state_indices,
                         read_state_indices, read_pool)
    if len(_decode_plans) >= 256:
        _decode_plans.clear()
    _decode_plans[key] = plan
    return result


_slots_cache: Dict[Any, Any] = {}


def _arange_slots(N, device):
    """arange(N) as int32 on the device, kept per (N, device): a decode step
    per token and layer would otherwise allocate and fill it every call."""
    key = (N, str(device))
    t = _slots_cache.get(key)
    if t is None:
        import torch
        t = torch.arange(N, dtype=torch.int32, device=device)
        if len(_slots_cache) >= 64:
            _slots_cache.clear()
        _slots_cache[key] = t
    return t


def _ragged_multi_token(q, k, v, g, beta, A_log, dt_bias, scale, pool, cu_seqlens, indices,
                        read_indices, options):
    """Several tokens per sequence in vLLM's packed form (q [1, total, H, K],
    cu_seqlens [N + 1], indices [N, T], sequence n's T_n <= T tokens at
    cu_seqlens[n] ..) as the [N, T] multi-token step: each sequence padded to
    T tokens, the padding's states not kept (its indices -1) and its outputs
    dropped. States after the padding are never kept, so the sequence's own
    are exact. All on the device (no host sync); T_n > T is not checked (the
    tokens past T are dropped)."""
    fused_recurrent_kda_config(q, k, v, g, beta, A_log=A_log, dt_bias=dt_bias, scale=scale,
                               initial_state=pool, cu_seqlens=cu_seqlens, ssm_state_indices=indices,
                               read_state_indices=read_indices, **options)  # validates shapes
    import torch
    N, T = _shape(indices)
    total = q.shape[1]
    dev = q.device
    cu = cu_seqlens.to(device=dev, dtype=torch.int64)
    t = torch.arange(T, device=dev, dtype=torch.int64)
    pos = cu[:-1, None] + t[None, :]                      # [N, T] token positions
    valid = t[None, :] < (cu[1:] - cu[:-1])[:, None]
    src = torch.where(valid, pos, torch.zeros((), dtype=torch.int64, device=dev)).flatten()

    def padded(x):
        return x[0].index_select(0, src).reshape((N, T) + tuple(x.shape[2:]))

    slots = torch.where(valid, indices.to(dev),
                        torch.full((), -1, dtype=indices.dtype, device=dev)).contiguous()
    o_pad, pool = fused_recurrent_kda(padded(q), padded(k), padded(v), padded(g), padded(beta), A_log,
                                      dt_bias, scale=scale, initial_state=pool, ssm_state_indices=slots,
                                      read_state_indices=read_indices, **options)
    # Back to the packed layout: padding goes to a spare last row.
    dst = torch.where(valid, pos, torch.full((), total, dtype=torch.int64, device=dev)).flatten()
    o = torch.empty((total + 1,) + tuple(o_pad.shape[2:]), dtype=o_pad.dtype, device=dev)
    o.index_copy_(0, dst, o_pad.reshape((N * T,) + tuple(o_pad.shape[2:])))
    return o[:total].unsqueeze(0), pool


class _Plan:
    """A chunk_kda or decode configuration and, after its first launch, the
    chip, the tile, the bundle, the workspace size and the marshalled tensor
    array (whose data pointers each call rebinds); for chunk_kda, after its
    first planned launch, the few steps left of a call (_Fast)."""

    __slots__ = ("cfg", "chip", "tile", "resolved", "names", "nbytes", "marshalled", "lock", "fast",
                 "pieces", "pieces_run")

    def __init__(self, cfg):
        self.cfg, self.chip, self.tile, self.resolved = cfg, None, None, None
        self.pieces = 1  # pipelined pieces (_launch_pieces), chosen at the first launch
        self.pieces_run = None  # their runtime handle (_Pieces)
        self.names = self.nbytes = self.marshalled = self.fast = None
        self.lock = threading.Lock()  # one marshalled array: rebind and launch together


# The tensors of a chunk_kda call as _Fast numbers them: the arguments, then
# the two outputs.
_FAST_SOURCES = ("q", "k", "v", "gate", "beta", "initial_state", "cu_seqlens", "A_log", "dt_bias",
                 "o", "final_state")


class _Fast:
    """A planned chunk_kda call reduced to what changes between its calls:
    two fresh outputs, the data pointers and the stream (issue 22's host path:
    a 27-layer model pays it at every layer). Made after a planned launch,
    only where the caller's tensors went to the kernel as they were (already
    contiguous, cu_seqlens on q's device, A_log and dt_bias reshaped in
    place): the plan's key fixes shapes, strides, dtypes and devices, so
    every later call of the plan is the same."""

    __slots__ = ("device", "index", "o_shape", "o_dtype", "fs_shape", "slots", "bundle", "kernel", "array",
                 "count", "strategy", "requested_tile", "bundle_tile", "prepared", "launch", "handle", "data",
                 "raw_stream", "nbytes", "pieces")

    # Whether new fast paths launch through kda_prepare's handle (where the
    # runtime library has it) or kda_launch_trusted (bench/host_path.py
    # measures both in one process).
    use_prepared = True
    # Whether planned pieces calls take a fast path (of_pieces): one
    # kda_launch_pieces through the handle the planned call prepared
    # (test_torch.py's part `pieces` checks every planned pieces call takes
    # it, bit-exact; H100, forty-ninth session: host time a call 0.039 ms at
    # T = 8192 H = 32 against the planned path's 0.098). KDA_PIECES_FAST=0
    # keeps them on the planned path (read when a plan is made; bench_kda.py's
    # variants time both in one process).
    use_pieces = True

    @classmethod
    def of(cls, plan, given, named, o, final_state):
        from .runtime import _KdaTensor
        if plan.marshalled is None or plan.resolved is None:
            return None
        if not cls._as_passed(given, named, o):
            return None  # a copy or a move made it: later calls must make theirs
        m, kernel = plan.marshalled
        f = cls()
        f.device, f.index = o.device, _device_index(o.device)
        f.o_shape, f.o_dtype = tuple(o.shape), o.dtype
        f.fs_shape = tuple(final_state.shape) if final_state is not None else None
        try:
            sources = [_FAST_SOURCES.index(n) for n in plan.names]
        except ValueError:
            return None  # a tensor this path does not make
        bundle = plan.resolved[0]
        # A prepared launch (kda_prepare): the runtime's checks, look-ups and
        # argument packing done once; each call passes the data pointers.
        f.prepared = None
        if cls.use_prepared:
            try:
                f.prepared = bundle.prepare(kernel, m)
            except KdaError:
                f.prepared = None  # kda_launch_trusted, as before
        if f.prepared is not None:
            p = f.prepared
            f.launch, f.handle, f.data = p.call, p.handle, p.data_address
            from . import runtime as _rt
            f.raw_stream = _rt._raw_stream or (lambda d: _stream_handle(None, d) or 0)
            # Each pointer of the handle's data array, as a ctypes view made
            # once: rebinding is then one store per tensor.
            f.slots = tuple((ctypes.c_uint64.from_address(p.data_address + 8 * i), src)
                            for i, src in enumerate(sources))
        else:
            # The data field of each kda_tensor of the marshalled array.
            base = ctypes.addressof(m.array)
            size, offset = ctypes.sizeof(_KdaTensor), _KdaTensor.data.offset
            f.slots = tuple((ctypes.c_uint64.from_address(base + i * size + offset), src)
                            for i, src in enumerate(sources))
        f.bundle, f.kernel, f.array, f.count = bundle, kernel, m, m.count
        f.strategy = plan.resolved[0].strategies(plan.resolved[1])
        f.requested_tile, f.bundle_tile = plan.tile, plan.resolved[2]
        f.nbytes, f.pieces = plan.nbytes, 1
        return f

    @classmethod
    def of_pieces(cls, plan, given, named, o, final_state):
        """The fast path of a planned pieces call (its _Pieces on the plan,
        prepared by the launch just made): the same per-call work as one
        piece's, one kda_launch_pieces. The first piece's zeros and the last
        piece's scratch state (where the call has none) stay in the handle's
        pointers; an initial state of another dtype than fp32 (converted each
        call) keeps the planned path."""
        run = plan.pieces_run
        if not cls.use_pieces or os.environ.get("KDA_PIECES_FAST") == "0" or run is None or run.run is None or not cls._as_passed(given, named, o):
            return None
        init = named.get("initial_state")
        if init is not None and init.dtype != _torch().float32:
            return None
        p = run.run
        slots = []
        for i, name in enumerate(run.entry_params):
            if (name == "initial_state" and init is None) or (name == "final_state" and final_state is None):
                continue  # the kept zeros / scratch, already in the handle's pointers
            if name not in _FAST_SOURCES:
                return None
            slots.append((ctypes.c_uint64.from_address(p.data_address + 8 * i), _FAST_SOURCES.index(name)))
        f = cls()
        f.device, f.index = o.device, _device_index(o.device)
        f.o_shape, f.o_dtype = tuple(o.shape), o.dtype
        f.fs_shape = tuple(final_state.shape) if final_state is not None else None
        f.prepared, f.launch, f.handle, f.data = p, p.call, p.handle, p.data_address
        from . import runtime as _rt
        f.raw_stream = _rt._raw_stream or (lambda d: _stream_handle(None, d) or 0)
        f.slots = tuple(slots)
        f.bundle, f.kernel, f.array, f.count = run.bundle, run.entry, None, p.count
        f.strategy = run.bundle.strategies(run.entry)
        f.requested_tile, f.bundle_tile = run.tile, run.used_tile
        f.nbytes, f.pieces = p.workspace_bytes, len(run.starts)
        return f

    @staticmethod
    def _as_passed(given, named, o):
        """Whether every tensor the caller gave went to the kernels as it was
        (contiguous, on o's device, not copied or moved)."""
        for x, name in zip(given, _FAST_SOURCES):
            passed = named.get(name)
            if (x is None) != (passed is None):
                return False
            if x is not None and (not x.is_contiguous() or x.data_ptr() != passed.data_ptr()
                                  or x.device != o.device):
                return False
        return True


# Workspaces kept per (device index, stream handle) for planned calls: an
# entry's workspace (the chunk-parallel schedule's intra-chunk results) is
# dead when its launches end, and launches on one stream run in order, so
# every call on that stream can reuse one buffer (grown to the largest call).
# release_workspaces() gives them back. Calls captured into a CUDA graph get
# fresh ones (the graph's private pool keeps them), since a kept buffer that
# later grew would free memory a graph still names. Only workspaces up to
# KEEP_WORKSPACE_BYTES are kept: a kept buffer is memory the caller's other
# work cannot reuse between calls (T = 8192 x 32 heads needs 486 MB, a
# serving batch of 32,000 tokens 1.9 GB), and keeping one saves about 1 to 3
# us of torch.empty (bench/host_path.py), which matters only on short calls,
# whose workspaces are small (T = 1024 x 32 heads: 61 MB).
KEEP_WORKSPACE_BYTES = 64 << 20
_workspaces: Dict[Tuple[int, int], Any] = {}


def release_workspaces() -> None:
    """Drops the workspaces kda.ops keeps per device and stream (torch's
    caching allocator keeps the memory until torch.cuda.empty_cache())."""
    _workspaces.clear()


def _workspace(device, index, stream, nbytes):
    torch = _torch()
    if (nbytes > KEEP_WORKSPACE_BYTES or index != torch.cuda.current_device()
            or torch.cuda.is_current_stream_capturing()):
        return torch.empty(nbytes, dtype=torch.uint8, device=device)
    key = (index, stream)
    w = _workspaces.get(key)
    if w is None or w.numel() < nbytes:
        _workspaces.pop(key, None)  # freed before the larger one is made
        w = torch.empty(nbytes, dtype=torch.uint8, device=device)
        _workspaces[key] = w
    return w


_torch_module = None


def _torch():
    """torch, imported once (an import statement inside a function costs a
    module look-up per call, and _run_fast's whole budget is microseconds)."""
    global _torch_module
    if _torch_module is None:
        import torch
        _torch_module = torch
    return _torch_module


_cuda_state = None  # (current device, is the current stream capturing): torch._C's own functions


def _cuda_queries():
    global _cuda_state
    torch = _torch()
    device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
    capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or \
        torch.cuda.is_current_stream_capturing
    _cuda_state = (device, capturing)
    return _cuda_state


def _run_fast(plan, f, q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias):
    """A planned call on its fast path: two fresh outputs, the data pointers
    stored into the prepared launch's array, the kept workspace, one
    kda_launch_prepared call (issue 22: microseconds per call)."""
    if f.prepared is None:
        return _run_fast_trusted(plan, f, q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias)
    torch = _torch()
    if torch.is_grad_enabled():
        _check_no_grad(q, k, v, g, beta, initial_state, A_log, dt_bias)
    o = _alloc(f.o_shape, f.o_dtype, f.device)
    final_state = _alloc(f.fs_shape, torch.float32, f.device) if f.fs_shape is not None else None
    sources = (q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias, o, final_state)
    index = f.index
    stream = f.raw_stream(index)
    nbytes = f.nbytes
    workspace = None
    if nbytes:
        # _workspace's rule: kept per (device, stream) up to
        # KEEP_WORKSPACE_BYTES, fresh under CUDA-graph capture (the graph's
        # pool keeps it) or when another device is current.
        current, capturing = _cuda_state or _cuda_queries()
        if nbytes > KEEP_WORKSPACE_BYTES or current() != index or capturing():
            workspace = torch.empty(nbytes, dtype=torch.uint8, device=f.device)
        else:
            key = (index, stream)
            workspace = _workspaces.get(key)
            if workspace is None or workspace.numel() < nbytes:
                _workspaces.pop(key, None)  # freed before the larger one is made
                workspace = torch.empty(nbytes, dtype=torch.uint8, device=f.device)
                _workspaces[key] = workspace
    with plan.lock:
        for slot, src in f.slots:
            slot.value = sources[src].data_ptr()
        status = f.launch(f.handle, f.data, f.count, workspace.data_ptr() if workspace is not None else None,
                          nbytes or 0, stream)
    if status:
        f.prepared.fail(status)
    last_launch.bundle = f.bundle.path
    last_launch.requested_tile = f.requested_tile
    last_launch.bundle_tile = f.bundle_tile
    last_launch.strategy = f.strategy
    last_launch.pieces = f.pieces
    return o, final_state


def _run_fast_trusted(plan, f, q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias):
    """_run_fast through kda_launch_trusted: runtime libraries without
    kda_prepare (and bench/host_path.py's 'before')."""
    torch = _torch()
    if torch.is_grad_enabled():
        _check_no_grad(q, k, v, g, beta, initial_state, A_log, dt_bias)
    o = _alloc(f.o_shape, f.o_dtype, f.device)
    final_state = _alloc(f.fs_shape, torch.float32, f.device) if f.fs_shape is not None else None
    sources = (q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias, o, final_state)
    stream = _stream_handle(None, f.index) or 0
    nbytes = plan.nbytes
    workspace = _workspace(f.device, f.index, stream, nbytes) if nbytes else None
    with plan.lock:
        for slot, src in f.slots:
            slot.value = sources[src].data_ptr()
        f.bundle.launch_prepared(f.kernel, f.array, stream, workspace, nbytes)
    last_launch.bundle = f.bundle.path
    last_launch.requested_tile = f.requested_tile
    last_launch.bundle_tile = f.bundle_tile
    last_launch.strategy = f.strategy
    last_launch.pieces = 1
    return o, final_state


def _launch_planned(plan, named, device):
    """_launch for a planned call on CUDA device index `device`: the bundle
    and tile of the plan; the plan's key fixes every shape, stride, dtype and
    device (the inputs are made contiguous, the outputs are fresh), so the
    tensor array is marshalled once and only its data pointers change."""
    import torch
    if plan.resolved is None:
        plan.resolved = _bundle_for(plan.cfg, plan.chip, plan.tile)
        bundle, kernel, _ = plan.resolved
        plan.names = [p["name"] for p in bundle.tensor_params(kernel)]
    bundle, kernel, used_tile = plan.resolved
    _record_launch(bundle, kernel, plan.tile, used_tile)
    tensors = [named.get(n) for n in plan.names]
    if any(t is None for t in tensors):
        return _launch(plan.cfg, plan.chip, named, plan.tile)  # names what is missing
    if plan.nbytes is None:
        plan.nbytes = bundle.workspace_bytes(kernel, tensors)
    workspace = (torch.empty(plan.nbytes, dtype=torch.uint8, device=tensors[0].device)
                 if plan.nbytes else None)
    with plan.lock:
        if plan.marshalled is None:
            plan.marshalled = (_Marshalled(bundle._order(kernel, tensors)), kernel.encode())
        else:
            plan.marshalled[0].rebind(tensors)
        m, name = plan.marshalled
        # The plan's tensors are torch CUDA tensors (its key fixed their
        # devices), so the runtime need not ask the driver about each pointer.
        if device == torch.cuda.current_device():
            bundle.launch_marshalled(name, m, device, workspace=workspace, trusted=True)
        else:
            with torch.cuda.device(device):
                bundle.launch_marshalled(name, m, device, workspace=workspace, trusted=True)


_chunk_plans: Dict[Any, _Plan] = {}
_decode_plans: Dict[Any, _Plan] = {}


def _device_index(device):
    """The CUDA device index of a torch device ('cuda' alone: the current one)."""
    if device.index is not None:
        return device.index
    import torch
    return torch.cuda.current_device()


def _tensor_key(t):
    if t is None:
        return None
    try:
        # get_device(): the CUDA index, or -1 off the GPU (an int, where
        # t.device builds a torch.device object: a microsecond a tensor).
        return (t.shape, t.dtype, t.get_device(), t.stride())
    except (AttributeError, TypeError):  # shape-and-dtype descriptions
        return (tuple(t.shape), str(getattr(t, "dtype", None)))


# The environment variables a plan depends on, read straight from the bytes
# mapping behind os.environ where CPython has one (a plan key reads them on
# every call; os.environ.get encodes and decodes each).
_ENV_NAMES = ("KDA_CHIP", "KDA_BUNDLE_PATH", "KDA_TUNING_DB", "KDA_SEGMENTS", "KDA_PIECES", "KDA_PIECES_GRAPH",
              "KDA_PIECES_FAST")
_env_data = getattr(os, "environ", None)
_env_data = getattr(_env_data, "_data", None) if os.name == "posix" else None
_ENV_KEYS = tuple(n.encode() for n in _ENV_NAMES)


def _plan_env():
    if isinstance(_env_data, dict):
        get = _env_data.get
        return (get(_ENV_KEYS[0]), get(_ENV_KEYS[1]), get(_ENV_KEYS[2]), get(_ENV_KEYS[3]),
                get(_ENV_KEYS[4]), get(_ENV_KEYS[5]), get(_ENV_KEYS[6]))
    return tuple(os.environ.get(n) for n in _ENV_NAMES)


def _run_decode(plan, q, k, v, g, beta, pool, cu_seqlens, A_log, dt_bias, indices, read_indices=None,
                read_pool=None):
    _check_no_grad(q, k, v, g, beta, A_log, dt_bias)
    cfg = plan.cfg
    if plan.chip is None:
        plan.chip = chip_for_device(q.device)
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    # One token per sequence: rows of [N, ...]; several: [N, T, ...].
    lead = (B, T) if cfg.get("multi_token") else (B * T,)
    if q.device.type != "cuda":
        raise ValueError(f"kda: inputs must be CUDA tensors, q is on {q.device}")
    if pool.device != q.device:
        raise ValueError(f"the state pool (initial_state) must be on {q.device} (it is updated in place), "
                         f"it is on {pool.device}")
    if not pool.is_contiguous():
        raise ValueError("the state pool (initial_state) must be contiguous: it is updated in place")
    if read_pool is not None and (read_pool.device != q.device or not read_pool.is_contiguous()):
        raise ValueError(f"read_pool must be a contiguous tensor on {q.device}")
    o = _alloc(lead + (HV, V), v.dtype, q.device)
    named = {"q": q.reshape(lead + (H, K)).contiguous(), "k": k.reshape(lead + (H, K)).contiguous(),
             "v": v.reshape(lead + (HV, V)).contiguous(), "gate": g.reshape(lead + (HV, K)).contiguous(),
             "beta": beta.reshape(lead + (HV,)).contiguous(),
             "A_log": A_log.reshape(HV).contiguous() if A_log is not None else None,
             "dt_bias": dt_bias.reshape(HV, K).contiguous() if dt_bias is not None else None,
             "indices": indices.to(q.device).contiguous(),
             "read_indices": read_indices.to(q.device).contiguous() if read_indices is not None else None,
             "read_pool": read_pool,
             "o_init": o, "o": o, "state_pool": pool, "new_state_pool": pool}
    _launch_planned(plan, named, _device_index(q.device))
    return o.reshape(B, T, HV, V).to(q.dtype), pool


# ---------------------------------------------------------------------------
# Sliding-window attention
# ---------------------------------------------------------------------------

def window_attention(q, k, v, window: int | None = None, scale: float | None = None, cu_seqlens=None, *,
                     window_sizes=None):
    r"""Causal sliding-window softmax attention (``kda.window_attention``).

    Token ``t`` attends to ``max(start, t - window + 1) .. t`` of its own
    sequence with ``softmax(scale * q k^T) v`` (SPEC.md section 5).

    Args:
        q: ``[B, T, HQ, K]``; k: ``[B, T, HK, K]`` (q's dtype);
            v: ``[B, T, HV, V]`` (FLA's layout). k and v may hold S > T rows
            (dense sequences): the queries are then the last T of them, query
            row ``t`` at key row ``t + S - T`` (a chunk of a sequence whose
            earlier keys are kept: a chunked prefill). The output has
            ``HO = max(HQ, HV)`` heads; each of HQ, HK, HV must divide HO and
            output head ``h`` reads q head ``h / (HO / HQ)``, k head
            ``h / (HO / HK)``, v head ``h / (HO / HV)`` (GQA: HQ > HK = HV).
        window: W >= 1 positions, the current one included (a window >= T is
            full causal attention). Part of the bundle.
        window_sizes: instead of ``window``, one window per position (the
            adaptive window): ``[T]`` int32/int64, each >= 1 (with
            cu_seqlens, T is every sequence's tokens; a size < 1 leaves its
            row NaN: the values are not checked on the host, which would
            synchronize).
        scale: default ``1 / sqrt(K)`` (a non-default scale is a separate bundle).
        cu_seqlens: ``[N + 1]`` int32/int64 offsets with B = 1; no token
            attends across a sequence boundary.

    Returns:
        o ``[B, T, HO, V]`` in v's dtype. Forward only. Under ``torch.compile``:
        ``torch.ops.kda.window_attention``.
    """
    if _compiling() and _traced is not None:
        return _traced.window_attention_traced(q, k, v, window, scale, cu_seqlens, window_sizes)
    cfg = window_attention_config(q, k, v, window, scale=scale, cu_seqlens=cu_seqlens,
                                  window_sizes=window_sizes)
    import torch
    _check_no_grad(q, k, v)
    if q.device.type != "cuda":
        raise ValueError(f"kda: inputs must be CUDA tensors, q is on {q.device}")
    chip = chip_for_device(q.device)
    B, T, HQ, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    HO = max(HQ, HV)
    q, k, v = (_contig(x) for x in (q, k, v))
    if cu_seqlens is not None and cu_seqlens.device != q.device:
        cu_seqlens = cu_seqlens.to(q.device)
    if window_sizes is not None and window_sizes.device != q.device:
        window_sizes = window_sizes.to(q.device)
    o = _alloc((B, T, HO, V), v.dtype, q.device)
    named = {"q": q, "k": k, "v": v, "cu_seqlens": _contig(cu_seqlens),
             "window_sizes": _contig(window_sizes), "o": o}
    with torch.cuda.device(q.device):
        _launch(cfg, chip, named)
    return o


def hybrid_attention(q, k, v, g, beta, z=None, *, window: int, mix: str | None = None,
                     scale: float | None = None, window_scale: float | None = None, A_log=None, dt_bias=None,
                     cu_seqlens=None, use_qk_l2norm_in_kernel: bool = False, use_gate_in_kernel: bool = False,
                     use_beta_sigmoid_in_kernel: bool = False, allow_neg_eigval: bool = False,
                     lower_bound: float | None = None, chunk_size: int | None = None):
    r"""A hybrid layer in one call: KDA and a sliding window over the same q, k, v, mixed.

    ``o = o_kda + o_window`` (``mix="sum"``) or
    ``o = sigmoid(z) * o_kda + (1 - sigmoid(z)) * o_window`` (``mix="gated"``,
    the default when ``z`` is given), where ``o_kda`` is
    ``chunk_kda(q, k, v, g, beta, scale, ...)[0]`` with the same keyword
    arguments (the in-kernel prologue: l2 norm, gate activation, beta
    sigmoid; cu_seqlens; GVA) and ``o_window`` is
    ``window_attention(q, k, v, window, window_scale, cu_seqlens)`` (SPEC.md
    section 5: the window reads q and k as given, not l2-normalised).

    One bundle holds the layer (``kda.hybrid``): the gated delta rule's two
    kernels, then the window kernel with the mix in its epilogue
    (kda-fuse-window-mix), run by the runtime as one entry (``kda_hybrid``,
    kda-gpu-layer-entry) with one workspace (``KDA_HYBRID_SCHEDULE=overlap``:
    the window beside the state pass, waiting for its progress; kda.tune.hybrid_schedule).
    One long dense sequence can run as pipelined pieces (``KDA_HYBRID_PIECES=P``;
    kda.tune.hybrid_pieces, whose shape policy stays off until measured on a
    GPU): each piece's window, over the keys before it too, after its piece's
    state pass and beside the next pieces' (the runtime's kda_prepare_pieces).
    No states in or out (run chunk_kda and window_attention for those).
    Forward only.

    Args:
        z: ``[B, T, HV]`` (per head) or ``[B, T, HV, V]`` (per channel).
        window: W >= 1 positions, the current one included.
        window_scale: the window's softmax scale (default ``1 / sqrt(K)``).

    Returns:
        o ``[B, T, HV, V]`` in v's dtype.
    """
    import torch
    _check_no_grad(q, k, v, g, beta, z, A_log, dt_bias)
    # A call of a shape, dtypes, device and options seen before takes the plan of the first: its
    # configuration (checked then), bundle, tile and workspace size.
    key = (tuple(None if t is None else (tuple(t.shape), t.dtype, t.device)
                 for t in (q, k, v, g, beta, z, A_log, dt_bias, cu_seqlens)),
           window, mix, scale, window_scale, use_qk_l2norm_in_kernel, use_gate_in_kernel,
           use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound, chunk_size, _plan_env(),
           os.environ.get("KDA_HYBRID_V_BLOCK"), os.environ.get("KDA_HYBRID_SCHEDULE"),
           os.environ.get("KDA_HYBRID_PIECES"))
    plan = _hybrid_plans.get(key)
    if plan is None:
        cfg = hybrid_attention_config(q, k, v, g, beta, z, window=window, mix=mix, scale=scale,
                                      window_scale=window_scale, A_log=A_log, dt_bias=dt_bias,
                                      cu_seqlens=cu_seqlens, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                                      use_gate_in_kernel=use_gate_in_kernel,
                                      use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                                      allow_neg_eigval=allow_neg_eigval, lower_bound=lower_bound,
                                      chunk_size=chunk_size)
    if q.device.type != "cuda":
        raise ValueError(f"kda: inputs must be CUDA tensors, q is on {q.device}")
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if cu_seqlens is not None and cu_seqlens.device != q.device:
        cu_seqlens = cu_seqlens.to(q.device)
    named = {"q": _contig(q), "k": _contig(k), "v": _contig(v), "gate": _contig(g), "beta": _contig(beta),
             "cu_seqlens": _contig(cu_seqlens), "z": _contig(z),
             "A_log": A_log.reshape(HV).contiguous() if A_log is not None else None,
             "dt_bias": dt_bias.reshape(HV, K).contiguous() if dt_bias is not None else None}
    o = _alloc((B, T, HV, V), v.dtype, q.device)
    named["o"] = o
    if plan is None:
        chip = chip_for_device(q.device)
        # The gated delta part's tiles as chunk_kda would choose them for this
        # shape (the shape policy: V blocks by how many programs fill the chip).
        N = B if cu_seqlens is None else cu_seqlens.shape[0] - 1
        T_seq = T if cu_seqlens is None else max(1, (B * T) // max(1, N))
        # The schedule (tune.hybrid_schedule): the window beside the state pass where the state
        # pass in V blocks of 64 leaves half the chip to it, else the mix in the window's epilogue.
        # (KDA_HYBRID_V_BLOCK: another V block for the layer's state pass, to measure.)
        sms = _multiprocessors(q.device)
        schedule = _tune.hybrid_schedule(chip, N, HV, V, sms)
        # Pipelined pieces where chunk_kda would take them for this shape (one dense sequence):
        # each piece's window after its state pass, beside the next pieces' (tune.hybrid_pieces).
        pieces = _tune.hybrid_pieces(cfg, chip, N, HV, sms, T_seq, cu_seqlens is None, schedule)
        if pieces > 1:
            pcfg = _tune.hybrid_pieces_config(cfg)
            _bundles.validate(pcfg)
            plan = _hybrid_plans[key] = _Pieces(cfg, chip, named, pieces, pcfg=pcfg)
    if isinstance(plan, _Pieces):
        named["window_k"], named["window_v"] = named["k"], named["v"]
        with torch.cuda.device(q.device):
            plan(named)
        return o
    if plan is None:
        if schedule == "overlap":
            cfg = dict(cfg, schedule="overlap")
            _bundles.validate(cfg)
            tile = _tune.hybrid_tile_override() or _tune.hybrid_overlap_tile()
        else:
            tile = _tune.hybrid_tile_override() or _tune.shape_policy_tile(
                cfg["gated_delta"], chip, N, HV, sms, T=T_seq)
        bundle, kernel, used_tile = _bundle_for(cfg, chip, tile)
        names = [p["name"] for p in bundle.tensor_params(kernel)]
        plan = _hybrid_plans[key] = (bundle, kernel, tile, used_tile, names,
                                     bundle.workspace_bytes(kernel, [named[n] for n in names]))
    _launch_layer(torch, plan, named, q.device)
    return o


def _launch_layer(torch, plan, named, device):
    """A layer entry's launch (hybrid_attention's, multi_scale_attention's): its parameters by name from
    `named`, a fresh workspace of the plan's size (the caching allocator keeps it between calls)."""
    bundle, kernel, tile, used_tile, names, nbytes = plan
    _record_launch(bundle, kernel, tile, used_tile)
    tensors = [named[n] for n in names]
    with torch.cuda.device(device):
        if nbytes:
            bundle.launch(kernel, tensors, workspace=torch.empty(nbytes, dtype=torch.uint8, device=device))
        else:
            bundle.launch(kernel, tensors)


def multi_scale_attention(q, k, v, g, beta, z=None, *, decay_scales=None, mix: str | None = None,
                          scale: float | None = None, cu_seqlens=None, use_qk_l2norm_in_kernel: bool = False,
                          use_beta_sigmoid_in_kernel: bool = False, allow_neg_eigval: bool = False,
                          chunk_size: int | None = None):
    r"""A multi-scale layer in one call: M gated delta recurrences over the same q, k, v and beta,
    each decaying with its own gate, combined (SPEC.md section 5, ``kda.multi_scale``).

    ``o = sum_m o_m`` (``mix="sum"``) or ``o = sum_m sigmoid(z[..., m]) * o_m`` (``mix="gated"``,
    the default when ``z`` is given), where ``o_m`` is ``chunk_kda(q, k, v, g_m, beta, scale, ...)[0]``
    with the same keyword arguments (l2 norm and beta sigmoid in the kernel; cu_seqlens; GVA).

    The gates are log-space decays as ``chunk_kda`` takes them without ``use_gate_in_kernel``
    (``[B, T, HV, K]`` per channel or ``[B, T, HV]`` per head): either ``g`` with
    ``decay_scales=[c_1, .., c_M]`` (scale m decays with ``c_m * g``) or ``g`` a list of M gates.
    One bundle holds the layer: the recurrence's two kernels (run once a scale), the scaled gates'
    and the mix's, behind one runtime call (``kda_multi_scale``, kda-gpu-layer-entry) with one
    workspace; the first scale's state pass runs on a side stream beside the next scale's
    intra-chunk kernel. No states in or out. Forward only.

    Returns:
        o ``[B, T, HV, V]`` in v's dtype.
    """
    import torch
    gates = [g] if not isinstance(g, (list, tuple)) else list(g)
    _check_no_grad(q, k, v, beta, z, *gates)
    key = (tuple(None if t is None else (tuple(t.shape), t.dtype, t.device)
                 for t in (q, k, v, beta, z, cu_seqlens, *gates)),
           None if decay_scales is None else tuple(float(c) for c in decay_scales), mix, scale,
           use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, chunk_size, _plan_env())
    plan = _multi_scale_plans.get(key)
    if plan is None:
        cfg = multi_scale_attention_config(q, k, v, gates if len(gates) > 1 else gates[0], beta, z,
                                           decay_scales=decay_scales, mix=mix, scale=scale,
                                           cu_seqlens=cu_seqlens,
                                           use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                                           use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                                           allow_neg_eigval=allow_neg_eigval, chunk_size=chunk_size)
    if q.device.type != "cuda":
        raise ValueError(f"kda: inputs must be CUDA tensors, q is on {q.device}")
    B, T = q.shape[0], q.shape[1]
    HV, V = v.shape[2], v.shape[3]
    if cu_seqlens is not None and cu_seqlens.device != q.device:
        cu_seqlens = cu_seqlens.to(q.device)
    named = {"q": _contig(q), "k": _contig(k), "v": _contig(v), "beta": _contig(beta),
             "cu_seqlens": _contig(cu_seqlens), "z": _contig(z)}
    if decay_scales is not None:
        named["g"] = _contig(gates[0])
    else:
        named.update({f"g{i}": _contig(x) for i, x in enumerate(gates)})
    o = _alloc((B, T, HV, V), v.dtype, q.device)
    named["o"] = o
    if plan is None:
        chip = chip_for_device(q.device)
        # Each scale's recurrence takes the tile chunk_kda's shape policy gives it.
        N = B if cu_seqlens is None else cu_seqlens.shape[0] - 1
        T_seq = T if cu_seqlens is None else max(1, (B * T) // max(1, N))
        tile = _tune.shape_policy_tile(cfg["gated_delta"], chip, N, HV, _multiprocessors(q.device), T=T_seq)
        if tile is not None and tile.get("segments"):
            tile = None  # (no segments in the layer: policy_tiles builds none for it)
        bundle, kernel, used_tile = _bundle_for(cfg, chip, tile)
        names = [p["name"] for p in bundle.tensor_params(kernel)]
        missing = [n for n in names if named.get(n) is None]
        if missing:
            raise KdaError("KDA_ERROR_CORRUPT_BUNDLE", f"{bundle.path}: entry {kernel} takes {missing}, which "
                           f"this call does not make (parameters {names})", "kda.multi_scale_attention")
        plan = _multi_scale_plans[key] = (bundle, kernel, tile, used_tile, names,
                                          bundle.workspace_bytes(kernel, [named[n] for n in names]))
    _launch_layer(torch, plan, named, q.device)
    return o


# multi_scale_attention's plans: as hybrid_attention's.
_multi_scale_plans: Dict[Any, Any] = {}


# hybrid_attention's plans: the call's shapes, dtypes, devices and options -> (bundle, entry, tile, the tile
# its bundle has, the entry's parameter names, workspace bytes).
_hybrid_plans: Dict[Any, Any] = {}
