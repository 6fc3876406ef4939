"""Drop-in layers: ``kda.layers.KimiDeltaAttention``.

The module has the parameter names and shapes of flash-linear-attention's
``fla.layers.KimiDeltaAttention`` (a state dict saved from FLA's layer loads
into it, and back), the same constructor arguments and the same forward
signature and results: ``(o, None, past_key_values)``. Prefill runs
``kda.chunk_kda`` (with ``cu_seqlens`` for packed sequences), decode with a
cache runs ``kda.fused_recurrent_kda`` (one token per sequence: kda's decode
step). The short convolutions and the gated output norm are PyTorch ops here.

The cache is FLA's: any object with ``len(cache)``, ``cache[layer_idx]`` (a
dict with ``recurrent_state`` and ``conv_state``) and ``cache.update(
layer_idx=..., recurrent_state=..., conv_state=..., offset=...)``, such as
FLA's ``fla.models.utils.Cache``; ``kda.layers.Cache`` is a minimal one for
use without FLA and transformers. The recurrent state is FLA's layout:
``[N, HV, V, K]`` fp32 (state_v_first); a convolution state is ``[N, D, W]``,
the last W inputs of each sequence.

Forward only: the kernels have no backward yet (training raises
NotImplementedError from the ops, under autograd).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn as nn
from torch.nn import functional as F

from . import ops as _ops


def _wide(t: torch.Tensor) -> torch.Tensor:
    """fp32 for 16-bit tensors (the arithmetic of FLA's kernels); float64 stays float64."""
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) else t


class Cache:
    """Per-layer decoding states, FLA's cache interface (no transformers)."""

    def __init__(self):
        self.states: List[Dict[str, Any]] = []
        self._seen_tokens = 0

    def __len__(self) -> int:
        return len(self.states)

    def __getitem__(self, layer_idx: int) -> Dict[str, Any]:
        return self.states[layer_idx]

    def update(self, recurrent_state=None, conv_state=None, layer_idx: int = 0, offset: int = 1, **kwargs):
        while len(self.states) <= layer_idx:
            self.states.append({"recurrent_state": None, "conv_state": None})
        state = self.states[layer_idx]
        if recurrent_state is not None:
            state["recurrent_state"] = recurrent_state
        if conv_state is not None:
            state["conv_state"] = conv_state
        if layer_idx == 0:
            self._seen_tokens += offset
        return state

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self._seen_tokens


class ShortConvolution(nn.Conv1d):
    """Causal depthwise convolution over time with SiLU, FLA's ``ShortConvolution``
    (an ``nn.Conv1d``: ``weight [D, 1, W]``, optional ``bias [D]``).

    ``y_t = act(sum_i weight[:, i] * x_{t - W + 1 + i} + bias)`` within each sequence;
    the state (``cache``) holds the last W inputs of each sequence, ``[N, D, W]``.
    """

    def __init__(self, hidden_size: int, kernel_size: int, bias: bool = False,
                 activation: Optional[str] = "silu", device=None, dtype=None, **kwargs):
        super().__init__(hidden_size, hidden_size, kernel_size, groups=hidden_size, bias=bias,
                         padding=kernel_size - 1, device=device, dtype=dtype)
        if activation not in (None, "silu", "swish"):
            raise ValueError(f"ShortConvolution: activation {activation!r} is not supported (silu, swish)")
        self.hidden_size = hidden_size
        self.activation = activation

    def _act(self, y):
        return F.silu(y) if self.activation is not None else y

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None,
                mask: Optional[torch.Tensor] = None, cache: Optional[torch.Tensor] = None,
                output_final_state: bool = False, cu_seqlens: Optional[torch.Tensor] = None,
                **kwargs) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        B, T, D = x.shape
        W = self.kernel_size[0]
        N = B if cu_seqlens is None else cu_seqlens.shape[0] - 1
        if mask is not None:
            if cu_seqlens is not None:
                raise ValueError("`mask` and `cu_seqlens` cannot be provided at the same time")
            x = x * mask.unsqueeze(-1)
        if B * T == N:
            return self.step(x, residual, cache, output_final_state, cu_seqlens)
        w = _wide(self.weight[:, 0, :])  # [D, W]
        xf = _wide(x)
        if cu_seqlens is None:
            hist = (cache[..., 1:].to(xf.dtype) if cache is not None
                    else xf.new_zeros(B, D, W - 1))
            full = torch.cat([hist, xf.transpose(1, 2)], dim=-1)  # [B, D, W - 1 + T]
            y = F.conv1d(full, w.unsqueeze(1), self.bias.to(xf.dtype) if self.bias is not None else None,
                         groups=D).transpose(1, 2)
            final = None
            if output_final_state:
                prev = cache.to(xf.dtype) if cache is not None else xf.new_zeros(B, D, W)
                final = torch.cat([prev, xf.transpose(1, 2)], dim=-1)[..., -W:]
        else:
            y, final = self._varlen(xf[0], w, cache, cu_seqlens, output_final_state)
            y = y.unsqueeze(0)
        y = self._act(y).to(x.dtype)
        if residual is not None:
            y = y + residual
        if final is None:
            return y, None
        if cache is not None:  # FLA updates a given cache in place
            cache.copy_(final)
            return y, cache
        return y, final.to(x.dtype)

    def _varlen(self, xs, w, cache, cu_seqlens, output_final_state):
        """Packed sequences [total, D]: every tap reads within its own sequence
        (or the sequence's cache); no host sync."""
        total, D = xs.shape
        W = w.shape[1]
        cu = cu_seqlens.to(device=xs.device, dtype=torch.int64)
        N = cu.shape[0] - 1
        lengths = cu[1:] - cu[:-1]
        seq = torch.repeat_interleave(torch.arange(N, device=xs.device), lengths, output_size=total)
        pos = torch.arange(total, device=xs.device) - cu[:-1][seq]
        y = xs.new_zeros(total, D)
        if self.bias is not None:
            y = y + self.bias.to(xs.dtype)
        for i in range(W):
            s = W - 1 - i  # tap i reads x_{t - s}
            shifted = torch.cat([xs.new_zeros(s, D), xs[:total - s]], dim=0) if s else xs
            inside = (pos >= s).unsqueeze(1)
            if cache is not None and s:
                col = (W + pos - s).clamp(0, W - 1)
                before = cache.to(xs.dtype)[seq, :, col]  # [total, D]
                val = torch.where(inside, shifted, before)
            else:
                val = torch.where(inside, shifted, xs.new_zeros(()))
            y = y + val * w[:, i]
        final = None
        if output_final_state:
            j = torch.arange(W, device=xs.device)
            p = lengths.unsqueeze(1) + j  # index into [cache (W) ; sequence (L)]
            from_x = p >= W
            xi = (cu[1:].unsqueeze(1) - W + j).clamp(min=0)  # [N, W]
            xv = xs[xi]  # [N, W, D]
            if cache is not None:
                cv = cache.to(xs.dtype).transpose(1, 2)[torch.arange(N, device=xs.device).unsqueeze(1),
                                                   p.clamp(max=W - 1)]
            else:
                cv = xs.new_zeros(N, W, D)
            final = torch.where(from_x.unsqueeze(-1), xv, cv).transpose(1, 2).contiguous()
        return y, final

    def step(self, x, residual, cache, output_final_state=False, cu_seqlens=None):
        """One token per sequence: the cache shifts by one and takes x (in place)."""
        shape = x.shape
        N, D, W = x.shape[0] * x.shape[1], x.shape[2], self.kernel_size[0]
        xt = x.reshape(N, D)
        if cache is None:
            cache = x.new_zeros(N, D, W)
        cache.copy_(torch.cat([cache[..., 1:], xt.unsqueeze(-1).to(cache.dtype)], dim=-1))
        y = (_wide(cache) * _wide(self.weight[:, 0, :])).sum(-1)
        if self.bias is not None:
            y = y + _wide(self.bias)
        y = self._act(y).to(x.dtype).reshape(shape)
        if residual is not None:
            y = y + residual
        return y, (cache if output_final_state else None)


class FusedRMSNormGated(nn.Module):
    """``x / rms(x) * weight * act(g)`` over the last dimension, in fp32, FLA's
    ``FusedRMSNormGated`` (activation sigmoid, swish or silu)."""

    def __init__(self, hidden_size: int, elementwise_affine: bool = True, eps: float = 1e-5,
                 activation: str = "swish", device=None, dtype=None):
        super().__init__()
        if activation not in ("swish", "silu", "sigmoid"):
            raise ValueError(f"Unsupported activation: {activation}")
        self.hidden_size, self.eps, self.activation = hidden_size, eps, activation
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.register_parameter("bias", None)

    def forward(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        xf, gf = _wide(x), _wide(g)
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.weight is not None:
            y = y * _wide(self.weight)
        y = y * (torch.sigmoid(gf) if self.activation == "sigmoid" else gf * torch.sigmoid(gf))
        return y.to(x.dtype)


def _unpad(hidden_states, attention_mask):
    """[B, T, ...] with a 0/1 mask -> ([1, total, ...], indices, cu_seqlens int32).
    The number of tokens kept is data-dependent: this synchronizes."""
    seqlens = attention_mask.sum(-1, dtype=torch.int32)
    indices = torch.nonzero(attention_mask.flatten(), as_tuple=False).flatten()
    cu_seqlens = F.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return flat[indices].unsqueeze(0), indices, cu_seqlens


def _repad(hidden_states, indices, batch_size, q_len):
    out = hidden_states.new_zeros(batch_size * q_len, *hidden_states.shape[2:])
    out[indices] = hidden_states.squeeze(0)
    return out.reshape(batch_size, q_len, *hidden_states.shape[2:])


class KimiDeltaAttention(nn.Module):
    """Kimi Delta Attention, ``fla.layers.KimiDeltaAttention``'s drop-in (see the
    module's docstring). Parameters, by name: ``q_proj``, ``k_proj``, ``v_proj``,
    ``q_conv1d``, ``k_conv1d``, ``v_conv1d`` (with ``use_short_conv``), ``f_proj``
    (two linears: hidden -> head_v_dim -> HV * K), ``b_proj``, ``A_log [HV]``,
    ``dt_bias [HV * K]``, ``g_proj`` (hidden -> head_v_dim -> value_dim, bias),
    ``o_norm`` and ``o_proj``.

    The gate is Kimi-Linear's softplus form, ``-exp(A_log) * softplus(f + dt_bias)``,
    or the lower-bound form with ``lower_bound`` set; q and k are l2-normalised
    and beta is ``sigmoid(b)`` (``2 * sigmoid`` with ``allow_neg_eigval``), all
    inside kda's kernels. A_log and dt_bias go to the kernels in fp32 whatever
    the module's dtype.
    """

    def __init__(self, hidden_size: int = 2048, expand_v: float = 1, head_dim: int = 128,
                 num_heads: int = 16, num_v_heads: Optional[int] = None, mode: str = "chunk",
                 use_short_conv: bool = True, allow_neg_eigval: bool = False, safe_gate: bool = False,
                 lower_bound: Optional[float] = None, conv_size: int = 4, conv_bias: bool = False,
                 layer_idx: Optional[int] = None, norm_eps: float = 1e-5, **kwargs):
        super().__init__()
        if mode not in ("chunk", "fused_recurrent"):
            raise ValueError(f"Not supported mode `{mode}`.")
        self.mode = mode
        self.allow_neg_eigval, self.safe_gate, self.lower_bound = allow_neg_eigval, safe_gate, lower_bound
        self.hidden_size, self.expand_v = hidden_size, expand_v
        self.use_short_conv, self.conv_size, self.conv_bias = use_short_conv, conv_size, conv_bias
        self.head_dim, self.num_heads = head_dim, num_heads
        self.num_v_heads = num_v_heads if num_v_heads is not None else num_heads
        self.head_k_dim = head_dim
        self.head_v_dim = int(head_dim * expand_v)
        self.key_dim = num_heads * self.head_k_dim
        self.value_dim = int(self.num_v_heads * self.head_v_dim)
        self.layer_idx = layer_idx
        if not math.isclose(head_dim * expand_v, self.head_v_dim, rel_tol=1e-5):
            raise ValueError(f"expand_v={expand_v} does not give an integer head_v_dim with head_dim={head_dim}")
        if self.num_v_heads % num_heads != 0:
            raise ValueError(f"num_v_heads={self.num_v_heads} must be divisible by num_heads={num_heads}.")

        self.q_proj = nn.Linear(hidden_size, self.key_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, self.key_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, self.value_dim, bias=False)
        if use_short_conv:
            self.q_conv1d = ShortConvolution(self.key_dim, conv_size, bias=conv_bias, activation="silu")
            self.k_conv1d = ShortConvolution(self.key_dim, conv_size, bias=conv_bias, activation="silu")
            self.v_conv1d = ShortConvolution(self.value_dim, conv_size, bias=conv_bias, activation="silu")
        self.gate_dim = self.num_v_heads * self.head_k_dim
        self.f_proj = nn.Sequential(nn.Linear(hidden_size, self.head_v_dim, bias=False),
                                    nn.Linear(self.head_v_dim, self.gate_dim, bias=False))
        self.b_proj = nn.Linear(hidden_size, self.num_v_heads, bias=False)
        if safe_gate:
            self.A_log = nn.Parameter(torch.zeros(self.num_v_heads, dtype=torch.float32))
        else:
            self.A_log = nn.Parameter(torch.log(torch.empty(self.num_v_heads, dtype=torch.float32).uniform_(1, 16)))
        self.A_log._no_weight_decay = True
        dt = torch.exp(torch.rand(self.gate_dim, dtype=torch.float32) * (math.log(0.1) - math.log(0.001))
                       + math.log(0.001)).clamp(min=1e-4)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))
        self.dt_bias._no_weight_decay = True
        self.g_proj = nn.Sequential(nn.Linear(hidden_size, self.head_v_dim, bias=False),
                                    nn.Linear(self.head_v_dim, self.value_dim, bias=True))
        self.o_norm = FusedRMSNormGated(self.head_v_dim, activation="sigmoid", eps=norm_eps)
        self.o_proj = nn.Linear(self.value_dim, hidden_size, bias=False)

    def _heads(self, x, d):
        return x.reshape(*x.shape[:-1], x.shape[-1] // d, d)

    def forward(self, hidden_states: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                past_key_values: Any = None, use_cache: Optional[bool] = False,
                output_attentions: Optional[bool] = False, **kwargs):
        if attention_mask is not None and attention_mask.dim() != 2:
            raise ValueError("attention_mask: expected a 0-1 matrix [batch_size, seq_len] for padding "
                             f"(0: padding), got shape {list(attention_mask.shape)}")
        batch_size, q_len, _ = hidden_states.shape
        last_state = None
        if past_key_values is not None:
            if self.layer_idx is None:
                raise ValueError("KimiDeltaAttention: a cache needs the layer's layer_idx")
            if len(past_key_values) > self.layer_idx:
                last_state = past_key_values[self.layer_idx]

        cu_seqlens = kwargs.get("cu_seqlens")
        indices = None
        if cu_seqlens is None and attention_mask is not None:
            hidden_states, indices, cu_seqlens = _unpad(hidden_states, attention_mask)

        conv_q = conv_k = conv_v = None
        if self.use_short_conv:
            if last_state is not None and last_state.get("conv_state") is not None:
                conv_q, conv_k, conv_v = last_state["conv_state"]
            q, conv_q = self.q_conv1d(self.q_proj(hidden_states), cache=conv_q, output_final_state=use_cache,
                                      cu_seqlens=cu_seqlens)
            k, conv_k = self.k_conv1d(self.k_proj(hidden_states), cache=conv_k, output_final_state=use_cache,
                                      cu_seqlens=cu_seqlens)
            v, conv_v = self.v_conv1d(self.v_proj(hidden_states), cache=conv_v, output_final_state=use_cache,
                                      cu_seqlens=cu_seqlens)
        else:
            q = F.silu(self.q_proj(hidden_states))
            k = F.silu(self.k_proj(hidden_states))
            v = F.silu(self.v_proj(hidden_states))
        g = self._heads(self.f_proj(hidden_states), self.head_k_dim)
        beta = self.b_proj(hidden_states)
        q, k = self._heads(q, self.head_k_dim), self._heads(k, self.head_k_dim)
        v = self._heads(v, self.head_v_dim)

        recurrent_state = last_state["recurrent_state"] if last_state is not None else None
        options = dict(A_log=self.A_log.float(), dt_bias=self.dt_bias.float(), initial_state=recurrent_state,
                       output_final_state=bool(use_cache), use_qk_l2norm_in_kernel=True,
                       use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                       allow_neg_eigval=self.allow_neg_eigval, lower_bound=self.lower_bound,
                       state_v_first=True, cu_seqlens=cu_seqlens)
        # FLA takes its recurrent kernel for short inference calls; kda's
        # fused_recurrent_kda runs the decode step for one token per sequence
        # and the chunked kernel otherwise, the same results either way.
        decode = q_len <= 64 and not self.training
        if decode:
            # The cache owns its state: a decode step updates it in place (as FLA's layer
            # updates its convolution states), no copy of the states per step.
            inplace = bool(use_cache) and recurrent_state is not None and recurrent_state.dtype == torch.float32
            o, recurrent_state = _ops.fused_recurrent_kda(q, k, v, g, beta, inplace_final_state=inplace, **options)
        else:
            o, recurrent_state = _ops.chunk_kda(q, k, v, g, beta, safe_gate=self.safe_gate, **options)

        if past_key_values is not None:
            past_key_values.update(recurrent_state=recurrent_state,
                                   conv_state=(conv_q, conv_k, conv_v) if self.use_short_conv else None,
                                   layer_idx=self.layer_idx, offset=q_len)
        gate = self._heads(self.g_proj(hidden_states), self.head_v_dim)
        o = self.o_norm(o, gate)
        o = self.o_proj(o.reshape(*o.shape[:-2], -1))
        if indices is not None:
            o = _repad(o, indices, batch_size, q_len)
        return o, None, past_key_values
