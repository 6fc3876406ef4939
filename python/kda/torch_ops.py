"""kda's kernels as PyTorch custom ops (``torch.ops.kda.*``).

Imported by ``kda`` when torch is installed. Each op is registered with
``torch.library.custom_op`` and a fake (meta) implementation, so
``torch.compile(fullgraph=True)`` traces a model that calls ``kda.chunk_kda``,
``kda.fused_recurrent_kda`` or ``kda.window_attention`` without a graph break:
under compilation the public functions (kda.ops) hand their arguments to these
ops; eagerly they run directly (a custom op's dispatch costs tens of
microseconds a call).

    torch.ops.kda.chunk_kda            -> (o, final_state, h)
    torch.ops.kda.fused_recurrent_kda  -> (o, final_state)       dense states
    torch.ops.kda.decode_kda           -> o                      a state pool, updated in place
    torch.ops.kda.window_attention     -> o

A custom op returns tensors, never None: an output not asked for is an empty
fp32 tensor, and the public functions give None for it, as FLA does.

CUDA graphs: every launch goes to torch's current stream, workspaces come from
torch's caching allocator, and the hot paths do not synchronize with the host,
so a decode step or a prefill call captured in a graph replays (warm the call
up once before capturing: its first call loads the bundle). The host syncs
that remain: varlen calls asking for boundary states with an interval
(``boundary_interval`` with ``cu_seqlens``: the result's size is read from the
lengths unless ``cu_seqlens_cpu`` is given), and ``KimiDeltaAttention`` with an
attention mask (unpadding has a data-dependent size).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import ops as _ops

FLA_CHUNK = _ops.FLA_CHUNK


def _none_to_empty(x: Optional[Tensor], like: Tensor) -> Tensor:
    return x if x is not None else like.new_empty((0,), dtype=torch.float32)


def _empty_to_none(x: Tensor) -> Optional[Tensor]:
    return None if x.numel() == 0 and x.dim() == 1 else x


# ---------------------------------------------------------------------------
# chunk_kda
# ---------------------------------------------------------------------------

@torch.library.custom_op("kda::chunk_kda", mutates_args=())
def chunk_kda_op(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
                 A_log: Optional[Tensor], dt_bias: Optional[Tensor], scale: Optional[float],
                 initial_state: Optional[Tensor], output_final_state: bool,
                 use_qk_l2norm_in_kernel: bool, use_gate_in_kernel: bool,
                 use_beta_sigmoid_in_kernel: bool, allow_neg_eigval: bool,
                 lower_bound: Optional[float], state_v_first: bool, cu_seqlens: Optional[Tensor],
                 chunk_size: Optional[int], return_intermediate_states: bool
                 ) -> Tuple[Tensor, Tensor, Tensor]:
    res = _ops.chunk_kda(q, k, v, g, beta, scale=scale, initial_state=initial_state,
                         output_final_state=output_final_state,
                         use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                         use_gate_in_kernel=use_gate_in_kernel,
                         use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                         allow_neg_eigval=allow_neg_eigval, lower_bound=lower_bound,
                         state_v_first=state_v_first, cu_seqlens=cu_seqlens,
                         return_intermediate_states=return_intermediate_states,
                         A_log=A_log, dt_bias=dt_bias, chunk_size=chunk_size)
    o, ht = res[0], res[1]
    h = res[2] if len(res) > 2 else None
    return o, _none_to_empty(ht, q), _none_to_empty(h, q)


def _fake_o_ht(q, v, cu_seqlens, state_v_first, output_final_state):
    """o [B, T, HV, V] in q's dtype, and the final state (fp32, or empty) of a fake call."""
    B, T, _, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    N = B if cu_seqlens is None else cu_seqlens.shape[0] - 1
    tail = (V, K) if state_v_first else (K, V)
    ht = (q.new_empty((N, HV) + tail, dtype=torch.float32) if output_final_state
          else q.new_empty((0,), dtype=torch.float32))
    return q.new_empty((B, T, HV, V)), ht


@chunk_kda_op.register_fake
def _chunk_kda_fake(q, k, v, g, beta, A_log, dt_bias, scale, initial_state, output_final_state,
                    use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel,
                    allow_neg_eigval, lower_bound, state_v_first, cu_seqlens, chunk_size,
                    return_intermediate_states):
    o, ht = _fake_o_ht(q, v, cu_seqlens, state_v_first, output_final_state)
    B, T, _, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    tail = (V, K) if state_v_first else (K, V)
    if not return_intermediate_states:
        h = q.new_empty((0,), dtype=torch.float32)
    elif cu_seqlens is None:
        h = k.new_empty((B, (T + FLA_CHUNK - 1) // FLA_CHUNK, HV) + tail)
    else:
        # sum over sequences of ceil(T_n / 64): known from the lengths only
        h = k.new_empty((1, torch.library.get_ctx().new_dynamic_size(), HV) + tail)
    return o, ht, h


def chunk_kda_traced(q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel,
                     use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound,
                     state_v_first, cu_seqlens, return_intermediate_states, kwargs):
    """kda.chunk_kda under torch.compile: the same arguments, through the custom op."""
    kwargs = dict(kwargs)
    A_log = kwargs.pop("A_log", None)
    dt_bias = kwargs.pop("dt_bias", None)
    chunk_size = kwargs.pop("chunk_size", None)
    if kwargs:
        raise NotImplementedError(f"kda.chunk_kda under torch.compile: {sorted(kwargs)} are eager-only "
                                  f"(boundary intervals and pools: call it outside the compiled region)")
    if not use_gate_in_kernel:
        A_log = dt_bias = None
    o, ht, h = torch.ops.kda.chunk_kda(q, k, v, g, beta, A_log, dt_bias, scale, initial_state,
                                       output_final_state, use_qk_l2norm_in_kernel, use_gate_in_kernel,
                                       use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound,
                                       state_v_first, cu_seqlens, chunk_size, return_intermediate_states)
    ht = ht if output_final_state else None
    if return_intermediate_states:
        return o, ht, h
    return o, ht


# ---------------------------------------------------------------------------
# fused_recurrent_kda: dense states, and decode on a state pool
# ---------------------------------------------------------------------------

@torch.library.custom_op("kda::fused_recurrent_kda", mutates_args=())
def fused_recurrent_kda_op(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
                           A_log: Optional[Tensor], dt_bias: Optional[Tensor], scale: Optional[float],
                           initial_state: Optional[Tensor], output_final_state: bool,
                           use_qk_l2norm_in_kernel: bool, use_gate_in_kernel: bool,
                           use_beta_sigmoid_in_kernel: bool, allow_neg_eigval: bool,
                           lower_bound: Optional[float], state_v_first: bool,
                           cu_seqlens: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    o, ht = _ops.fused_recurrent_kda(q, k, v, g, beta, A_log, dt_bias, scale=scale,
                                     initial_state=initial_state, output_final_state=output_final_state,
                                     use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                                     use_gate_in_kernel=use_gate_in_kernel,
                                     use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                                     allow_neg_eigval=allow_neg_eigval, lower_bound=lower_bound,
                                     state_v_first=state_v_first, cu_seqlens=cu_seqlens)
    return o, _none_to_empty(ht, q)


@fused_recurrent_kda_op.register_fake
def _fused_recurrent_kda_fake(q, k, v, g, beta, A_log, dt_bias, scale, initial_state, output_final_state,
                              use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel,
                              allow_neg_eigval, lower_bound, state_v_first, cu_seqlens):
    return _fake_o_ht(q, v, cu_seqlens, state_v_first, output_final_state)


@torch.library.custom_op("kda::decode_kda", mutates_args=("state_pool",))
def decode_kda_op(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
                  A_log: Optional[Tensor], dt_bias: Optional[Tensor], scale: Optional[float],
                  state_pool: Tensor, ssm_state_indices: Tensor, read_state_indices: Optional[Tensor],
                  num_accepted_tokens: Optional[Tensor], use_qk_l2norm_in_kernel: bool,
                  use_gate_in_kernel: bool, use_beta_sigmoid_in_kernel: bool, allow_neg_eigval: bool,
                  lower_bound: Optional[float], state_v_first: bool, cu_seqlens: Optional[Tensor]) -> Tensor:
    extra = {}
    if read_state_indices is not None:
        extra["read_state_indices"] = read_state_indices
    if num_accepted_tokens is not None:
        extra["num_accepted_tokens"] = num_accepted_tokens
    o, _ = _ops.fused_recurrent_kda(q, k, v, g, beta, A_log, dt_bias, scale=scale, initial_state=state_pool,
                                    use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                                    use_gate_in_kernel=use_gate_in_kernel,
                                    use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                                    allow_neg_eigval=allow_neg_eigval, lower_bound=lower_bound,
                                    state_v_first=state_v_first, cu_seqlens=cu_seqlens,
                                    ssm_state_indices=ssm_state_indices, **extra)
    return o


@decode_kda_op.register_fake
def _decode_kda_fake(q, k, v, g, beta, A_log, dt_bias, scale, state_pool, ssm_state_indices,
                     read_state_indices, num_accepted_tokens, use_qk_l2norm_in_kernel, use_gate_in_kernel,
                     use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound, state_v_first, cu_seqlens):
    B, T = q.shape[0], q.shape[1]
    return q.new_empty((B, T, v.shape[2], v.shape[3]))


def fused_recurrent_kda_traced(q, k, v, g, beta, A_log, dt_bias, scale, initial_state, output_final_state,
                               use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel,
                               allow_neg_eigval, lower_bound, state_v_first, cu_seqlens, kwargs):
    """kda.fused_recurrent_kda under torch.compile, through the custom ops."""
    kwargs = dict(kwargs)
    indices = kwargs.pop("ssm_state_indices", None)
    read = kwargs.pop("read_state_indices", None)
    accepted = kwargs.pop("num_accepted_tokens", None)
    inplace = bool(kwargs.pop("inplace_final_state", False))
    if kwargs:
        raise TypeError(f"kda.fused_recurrent_kda: unknown keyword arguments {sorted(kwargs)}")
    if not use_gate_in_kernel:
        A_log = dt_bias = None
    flags = (use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
             lower_bound, state_v_first, cu_seqlens)
    if indices is None and inplace and initial_state is not None and cu_seqlens is None and q.shape[1] == 1:
        # one token per sequence over the caller's states: the decode step on them as slots 0 .. N - 1
        indices = torch.arange(q.shape[0], dtype=torch.int32, device=q.device)
    if indices is not None:
        o = torch.ops.kda.decode_kda(q, k, v, g, beta, A_log, dt_bias, scale, initial_state, indices, read,
                                     accepted, *flags)
        return o, initial_state
    o, ht = torch.ops.kda.fused_recurrent_kda(q, k, v, g, beta, A_log, dt_bias, scale, initial_state,
                                              output_final_state, *flags)
    if inplace:
        initial_state.copy_(ht)
        return o, initial_state
    return o, (ht if output_final_state else None)


# ---------------------------------------------------------------------------
# window_attention
# ---------------------------------------------------------------------------

@torch.library.custom_op("kda::window_attention", mutates_args=())
def window_attention_op(q: Tensor, k: Tensor, v: Tensor, window: int, scale: Optional[float],
                        cu_seqlens: Optional[Tensor], window_sizes: Optional[Tensor] = None) -> Tensor:
    # window 0 with window_sizes: per-position windows (a schema has no int | None).
    return _ops.window_attention(q, k, v, window if window_sizes is None else None, scale=scale,
                                 cu_seqlens=cu_seqlens, window_sizes=window_sizes)


@window_attention_op.register_fake
def _window_attention_fake(q, k, v, window, scale, cu_seqlens, window_sizes=None):
    B, T, HQ, _ = q.shape
    return v.new_empty((B, T, max(HQ, v.shape[2]), v.shape[3]))


def window_attention_traced(q, k, v, window, scale, cu_seqlens, window_sizes=None):
    return torch.ops.kda.window_attention(q, k, v, 0 if window is None else window, scale, cu_seqlens,
                                          window_sizes)


__all__ = ["chunk_kda_op", "fused_recurrent_kda_op", "decode_kda_op", "window_attention_op"]
