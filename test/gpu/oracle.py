"""float64 oracle (test/oracle/Oracle.cpp) from Python, through liboracle.so.

    import oracle
    o, ht = oracle.gated_delta(q, k, v, g, beta, initial_state=h0, qk_l2norm=True, ...)
    o, pool = oracle.decode_step(q, k, v, g, beta, state_pool=pool, indices=idx, ...)
    o = oracle.window_attention(q, k, v, window=64, cu_seqlens=cu, ...)

Inputs are numpy arrays (any float dtype, converted to float64) or None;
outputs are float64 numpy arrays. Bad arguments raise OracleError with the
oracle's message (which names the argument). The library is
``$KDA_ORACLE_LIBRARY``, else ``liboracle.so`` next to this file; build it
from the repository root with

    g++ -std=c++17 -O2 -shared -fPIC -I. test/oracle/Oracle.cpp test/oracle/OracleC.cpp -o liboracle.so

The low-level ``run_gated_delta`` / ``run_decode_step`` / ``run_window_attention`` take and return flat
``array('d')`` buffers with shapes, so they work without numpy.
"""

from __future__ import annotations

import array
import ctypes
import math
import os
from typing import Any, List, Optional, Sequence, Tuple

__all__ = ["OracleError", "gated_delta", "gated_delta_grad", "decode_step", "window_attention", "relative_rmse",
           "load",
           "run_gated_delta", "run_decode_step", "run_window_attention"]


class OracleError(ValueError):
    pass


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.POINTER(ctypes.c_double)),
                ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64))]


class _Options(ctypes.Structure):
    _fields_ = [("update", ctypes.c_int32),
                ("has_scale", ctypes.c_int32),
                ("scale", ctypes.c_double),
                ("state_layout", ctypes.c_int32),
                ("qk_l2norm", ctypes.c_int32),
                ("beta_activation", ctypes.c_int32),
                ("gate_activation", ctypes.c_int32),
                ("lower_bound", ctypes.c_double),
                ("boundary_interval", ctypes.c_int64)]


_UPDATE = {"delta": 0, "additive": 1}
_LAYOUT = {"k_major": 0, "v_major": 1}
_BETA = {"none": 0, "sigmoid": 1, "sigmoid_neg_eigval": 2}
_GATE = {"none": 0, "softplus": 1, "lower_bound": 2}

_lib = None


def load(path: Optional[str] = None):
    global _lib
    if _lib is not None and path is None:
        return _lib
    path = path or os.environ.get("KDA_ORACLE_LIBRARY") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "liboracle.so")
    if not os.path.isfile(path):
        raise OracleError(f"{path} not found: build it with `g++ -std=c++17 -O2 -shared -fPIC -I. "
                          f"test/oracle/Oracle.cpp test/oracle/OracleC.cpp -o liboracle.so` and set "
                          f"KDA_ORACLE_LIBRARY")
    lib = ctypes.CDLL(path)
    P = ctypes.POINTER
    lib.kda_oracle_gated_delta.argtypes = (
        [_Tensor] * 6 + [P(ctypes.c_int64), ctypes.c_int64] + [_Tensor] * 2 + [P(_Options)]
        + [P(ctypes.c_double), ctypes.c_int64, P(ctypes.c_int64)] * 3)
    lib.kda_oracle_gated_delta.restype = ctypes.c_char_p
    lib.kda_oracle_decode_step.argtypes = (
        [_Tensor] * 6 + [P(ctypes.c_int64), ctypes.c_int64] + [_Tensor] * 2 + [P(_Options)]
        + [P(ctypes.c_double), ctypes.c_int64, P(ctypes.c_int64)] * 2)
    lib.kda_oracle_decode_step.restype = ctypes.c_char_p
    lib.kda_oracle_decode_step_rw.argtypes = (
        [_Tensor] * 6 + [P(ctypes.c_int64), ctypes.c_int64] * 2 + [_Tensor] * 2 + [P(_Options)]
        + [P(ctypes.c_double), ctypes.c_int64, P(ctypes.c_int64)] * 2)
    lib.kda_oracle_decode_step_rw.restype = ctypes.c_char_p
    lib.kda_oracle_window_attention.argtypes = (
        [_Tensor] * 3 + [ctypes.c_int64, P(ctypes.c_int64), ctypes.c_int64, P(ctypes.c_int64), ctypes.c_int64,
                         ctypes.c_int32, ctypes.c_double, P(ctypes.c_double), ctypes.c_int64, P(ctypes.c_int64)])
    lib.kda_oracle_window_attention.restype = ctypes.c_char_p
    lib.kda_oracle_gated_delta_grad.argtypes = (
        [_Tensor] * 6 + [P(ctypes.c_int64), ctypes.c_int64] + [_Tensor] * 2 + [P(_Options)]
        + [_Tensor] * 2 + [P(_Buffer)])
    lib.kda_oracle_gated_delta_grad.restype = ctypes.c_char_p
    _lib = lib
    return lib


# --- flat buffers -----------------------------------------------------------

def _prod(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


class _Buffer(ctypes.Structure):
    _fields_ = [("data", ctypes.POINTER(ctypes.c_double)), ("capacity", ctypes.c_int64)]


class _Keep:
    def __init__(self):
        self.objs: List[Any] = []


def _tensor(keep: _Keep, flat: Optional[array.array], shape: Optional[Sequence[int]]) -> _Tensor:
    t = _Tensor()
    if flat is None:
        t.rank = 0
        return t
    shape = [int(s) for s in shape]
    if len(flat) != _prod(shape):
        raise OracleError(f"buffer of {len(flat)} elements for shape {shape}")
    sh = (ctypes.c_int64 * len(shape))(*shape)
    keep.objs += [flat, sh]
    t.rank = len(shape)
    t.shape = sh
    if len(flat):
        buf = (ctypes.c_double * len(flat)).from_buffer(flat)
        keep.objs.append(buf)
        t.data = ctypes.cast(buf, ctypes.POINTER(ctypes.c_double))
    return t


def _options(update, scale, state_layout, qk_l2norm, beta_activation, gate_activation,
             lower_bound, boundary_interval) -> _Options:
    try:
        return _Options(_UPDATE[update], scale is not None, float(scale or 0.0), _LAYOUT[state_layout],
                        bool(qk_l2norm), _BETA[beta_activation], _GATE[gate_activation],
                        float(lower_bound), int(boundary_interval))
    except KeyError as e:
        raise OracleError(f"unknown option value {e}") from None


def _out(n: int):
    buf = array.array("d", bytes(8 * n))
    return buf, ((ctypes.c_double * n).from_buffer(buf) if n else None)


def run_gated_delta(q, q_shape, k, k_shape, v, v_shape, g=None, g_shape=None, beta=None,
                    beta_shape=None, initial_state=None, initial_state_shape=None,
                    cu_seqlens: Optional[Sequence[int]] = None, A_log=None, A_log_shape=None,
                    dt_bias=None, dt_bias_shape=None, *, update="delta", scale=None,
                    state_layout="k_major", qk_l2norm=False, beta_activation="none",
                    gate_activation="none", lower_bound=-5.0, boundary_interval=0):
    """Flat array('d') in/out: returns [(o, o_shape), (final, shape), (boundary, shape) or None]."""
    lib = load()
    keep = _Keep()
    B, T = q_shape[0], q_shape[1]
    K = q_shape[3]
    HV, V = v_shape[2], v_shape[3]
    lengths = ([cu_seqlens[i + 1] - cu_seqlens[i] for i in range(len(cu_seqlens) - 1)]
               if cu_seqlens is not None else [T] * B)
    N = len(lengths)
    o_shape = [B, T, HV, V]
    f_shape = [N, HV, K, V] if state_layout == "k_major" else [N, HV, V, K]
    o_buf, o_ptr = _out(_prod(o_shape))
    f_buf, f_ptr = _out(_prod(f_shape))
    b_shape, b_buf, b_ptr = None, None, None
    if boundary_interval > 0:
        NT = -(-max(lengths + [0]) // boundary_interval)
        b_shape = [N, NT] + f_shape[1:]
        b_buf, b_ptr = _out(_prod(b_shape))
    cu = None
    if cu_seqlens is not None:
        cu = (ctypes.c_int64 * len(cu_seqlens))(*[int(c) for c in cu_seqlens])
    opts = _options(update, scale, state_layout, qk_l2norm, beta_activation, gate_activation,
                    lower_bound, boundary_interval)
    shapes = [(ctypes.c_int64 * 5)() for _ in range(3)]
    err = lib.kda_oracle_gated_delta(
        _tensor(keep, q, q_shape), _tensor(keep, k, k_shape), _tensor(keep, v, v_shape),
        _tensor(keep, g, g_shape), _tensor(keep, beta, beta_shape),
        _tensor(keep, initial_state, initial_state_shape),
        cu, len(cu_seqlens) if cu_seqlens is not None else 0,
        _tensor(keep, A_log, A_log_shape), _tensor(keep, dt_bias, dt_bias_shape), ctypes.byref(opts),
        o_ptr, len(o_buf), shapes[0], f_ptr, len(f_buf), shapes[1],
        b_ptr, len(b_buf) if b_buf is not None else 0, shapes[2])
    if err is not None:
        raise OracleError(err.decode())
    return [(o_buf, o_shape), (f_buf, f_shape), (b_buf, b_shape) if b_buf is not None else None]


def run_decode_step(q, q_shape, k, k_shape, v, v_shape, g=None, g_shape=None, beta=None,
                    beta_shape=None, state_pool=None, state_pool_shape=None,
                    indices: Sequence[int] = (), A_log=None, A_log_shape=None, dt_bias=None,
                    dt_bias_shape=None, *, update="delta", scale=None, state_layout="k_major",
                    qk_l2norm=False, beta_activation="none", gate_activation="none",
                    lower_bound=-5.0, read_indices: Optional[Sequence[int]] = None):
    lib = load()
    keep = _Keep()
    o_shape = [int(d) for d in v_shape]  # [N, HV, V] or [N, T, HV, V]
    o_buf, o_ptr = _out(_prod(o_shape))
    p_buf, p_ptr = _out(_prod(state_pool_shape))
    idx = (ctypes.c_int64 * max(len(indices), 1))(*[int(i) for i in indices])
    opts = _options(update, scale, state_layout, qk_l2norm, beta_activation, gate_activation,
                    lower_bound, 0)
    shapes = [(ctypes.c_int64 * 4)() for _ in range(2)]
    reads = [int(i) for i in read_indices] if read_indices is not None else []
    ridx = (ctypes.c_int64 * max(len(reads), 1))(*reads)
    err = lib.kda_oracle_decode_step_rw(
        _tensor(keep, q, q_shape), _tensor(keep, k, k_shape), _tensor(keep, v, v_shape),
        _tensor(keep, g, g_shape), _tensor(keep, beta, beta_shape),
        _tensor(keep, state_pool, state_pool_shape), idx, len(indices), ridx, len(reads),
        _tensor(keep, A_log, A_log_shape), _tensor(keep, dt_bias, dt_bias_shape), ctypes.byref(opts),
        o_ptr, len(o_buf), shapes[0], p_ptr, len(p_buf), shapes[1])
    if err is not None:
        raise OracleError(err.decode())
    return [(o_buf, o_shape), (p_buf, list(state_pool_shape))]


def run_window_attention(q, q_shape, k, k_shape, v, v_shape, *, window: int = 0,
                         window_sizes: Optional[Sequence[int]] = None,
                         cu_seqlens: Optional[Sequence[int]] = None, scale=None):
    """Flat array('d') in/out: returns (o, o_shape) with o [B, T, max(HQ, HV), V]."""
    lib = load()
    keep = _Keep()
    B, T = q_shape[0], q_shape[1]
    HO = max(q_shape[2], v_shape[2])
    o_shape = [B, T, HO, v_shape[3]]
    o_buf, o_ptr = _out(_prod(o_shape))
    ws = None
    if window_sizes is not None:
        ws = (ctypes.c_int64 * max(len(window_sizes), 1))(*[int(w) for w in window_sizes])
    cu = None
    if cu_seqlens is not None:
        cu = (ctypes.c_int64 * max(len(cu_seqlens), 1))(*[int(c) for c in cu_seqlens])
    shape = (ctypes.c_int64 * 4)()
    err = lib.kda_oracle_window_attention(
        _tensor(keep, q, q_shape), _tensor(keep, k, k_shape), _tensor(keep, v, v_shape), int(window),
        ws, len(window_sizes) if window_sizes is not None else 0,
        cu, len(cu_seqlens) if cu_seqlens is not None else 0,
        scale is not None, float(scale or 0.0), o_ptr, len(o_buf), shape)
    if err is not None:
        raise OracleError(err.decode())
    return o_buf, list(shape)


# --- numpy API --------------------------------------------------------------

def _np_in(x):
    import numpy as np
    if x is None:
        return None, None
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float64))
    return array.array("d", a.tobytes()), list(a.shape)


def _np_out(pair):
    import numpy as np
    if pair is None:
        return None
    buf, shape = pair
    return np.frombuffer(buf, dtype=np.float64).reshape(shape).copy()


def gated_delta(q, k, v, g=None, beta=None, initial_state=None, cu_seqlens=None, A_log=None,
                dt_bias=None, *, update="delta", scale=None, state_layout="k_major", qk_l2norm=False,
                beta_activation="none", gate_activation="none", lower_bound=-5.0,
                boundary_interval=0):
    """kda.gated_delta in float64. Returns (o, final_state) (plus boundary_states
    when boundary_interval > 0). dt_bias may be [HV * K]; it is reshaped to [HV, K]
    for channel-wise gates."""
    import numpy as np
    if dt_bias is not None and g is not None and np.ndim(g) == 4 and np.ndim(dt_bias) == 1:
        dt_bias = np.reshape(dt_bias, (np.shape(g)[2], np.shape(g)[3]))
    args = [_np_in(x) for x in (q, k, v, g, beta, initial_state, A_log, dt_bias)]
    cu = None if cu_seqlens is None else [int(c) for c in np.asarray(cu_seqlens).reshape(-1)]
    res = run_gated_delta(args[0][0], args[0][1], args[1][0], args[1][1], args[2][0], args[2][1],
                          args[3][0], args[3][1], args[4][0], args[4][1], args[5][0], args[5][1],
                          cu, args[6][0], args[6][1], args[7][0], args[7][1], update=update,
                          scale=scale, state_layout=state_layout, qk_l2norm=qk_l2norm,
                          beta_activation=beta_activation, gate_activation=gate_activation,
                          lower_bound=lower_bound, boundary_interval=boundary_interval)
    out = (_np_out(res[0]), _np_out(res[1]))
    return out + (_np_out(res[2]),) if boundary_interval > 0 else out


GRAD_NAMES = ("dq", "dk", "dv", "dg", "dbeta", "dh0", "dA_log", "ddt_bias")


def gated_delta_grad(q, k, v, g=None, beta=None, initial_state=None, cu_seqlens=None, A_log=None,
                     dt_bias=None, *, do, dht=None, update="delta", scale=None, state_layout="k_major",
                     qk_l2norm=False, beta_activation="none", gate_activation="none", lower_bound=-5.0):
    """The float64 gradient of gated_delta for L = sum(do * o) + sum(dht * final_state):
    a dict of dq, dk, dv, dg, dbeta, dh0, dA_log, ddt_bias (None where the input is absent),
    each the shape of its input. The oracle differentiates the token recurrence itself
    (Oracle.h's gatedDeltaGrad, checked against finite differences in OracleTest.cpp)."""
    import numpy as np
    dt_shape = None
    if dt_bias is not None and g is not None and np.ndim(g) == 4 and np.ndim(dt_bias) == 1:
        dt_shape = np.shape(dt_bias)
        dt_bias = np.reshape(dt_bias, (np.shape(g)[2], np.shape(g)[3]))
    inputs = (q, k, v, g, beta, initial_state, A_log, dt_bias)
    args = [_np_in(x) for x in inputs + (do, dht)]
    lib = load()
    keep = _Keep()
    cu = None
    if cu_seqlens is not None:
        cu_list = [int(c) for c in np.asarray(cu_seqlens).reshape(-1)]
        cu = (ctypes.c_int64 * len(cu_list))(*cu_list)
    opts = _options(update, scale, state_layout, qk_l2norm, beta_activation, gate_activation,
                    lower_bound, 0)
    # Gradient buffers in the order of GRAD_NAMES: q, k, v, g, beta, h0, A_log, dt_bias.
    order = (0, 1, 2, 3, 4, 5, 6, 7)
    bufs = (_Buffer * 8)()
    outs = {}
    for slot, i in enumerate(order):
        flat, shape = args[i]
        if flat is None:
            outs[GRAD_NAMES[slot]] = None
            continue
        buf, ptr = _out(_prod(shape))
        bufs[slot].data = ctypes.cast(ptr, ctypes.POINTER(ctypes.c_double)) if ptr else None
        bufs[slot].capacity = len(buf)
        outs[GRAD_NAMES[slot]] = (buf, shape)
    err = lib.kda_oracle_gated_delta_grad(
        _tensor(keep, *args[0]), _tensor(keep, *args[1]), _tensor(keep, *args[2]),
        _tensor(keep, *args[3]), _tensor(keep, *args[4]), _tensor(keep, *args[5]),
        cu, len(cu) if cu is not None else 0, _tensor(keep, *args[6]), _tensor(keep, *args[7]),
        ctypes.byref(opts), _tensor(keep, *args[8]), _tensor(keep, *args[9]), bufs)
    if err is not None:
        raise OracleError(err.decode())
    res = {n: _np_out(v) for n, v in outs.items()}
    if dt_shape is not None and res["ddt_bias"] is not None:
        res["ddt_bias"] = res["ddt_bias"].reshape(dt_shape)
    return res


def decode_step(q, k, v, g=None, beta=None, *, state_pool, indices, A_log=None, dt_bias=None,
                update="delta", scale=None, state_layout="k_major", qk_l2norm=False,
                beta_activation="none", gate_activation="none", lower_bound=-5.0, read_indices=None):
    """kda.decode_step in float64. Returns (o [N, HV, V], new_pool). With
    read_indices, sequence n reads slot read_indices[n] and writes indices[n]."""
    import numpy as np
    # A channel-wise gate has q's rank ([N(, T), HV, K]): dt_bias [HV * K]
    # is its [HV, K].
    if dt_bias is not None and g is not None and np.ndim(g) == np.ndim(q) and np.ndim(dt_bias) == 1:
        dt_bias = np.reshape(dt_bias, (np.shape(g)[-2], np.shape(g)[-1]))
    args = [_np_in(x) for x in (q, k, v, g, beta, state_pool, A_log, dt_bias)]
    idx = [int(i) for i in np.asarray(indices).reshape(-1)]
    res = run_decode_step(args[0][0], args[0][1], args[1][0], args[1][1], args[2][0], args[2][1],
                          args[3][0], args[3][1], args[4][0], args[4][1], args[5][0], args[5][1],
                          idx, args[6][0], args[6][1], args[7][0], args[7][1], update=update,
                          scale=scale, state_layout=state_layout, qk_l2norm=qk_l2norm,
                          beta_activation=beta_activation, gate_activation=gate_activation,
                          lower_bound=lower_bound,
                          read_indices=None if read_indices is None
                          else [int(i) for i in np.asarray(read_indices).reshape(-1)])
    return _np_out(res[0]), _np_out(res[1])


def window_attention(q, k, v, *, window=0, window_sizes=None, cu_seqlens=None, scale=None):
    """kda.window_attention in float64. Returns o [B, T, max(HQ, HV), V]."""
    import numpy as np
    args = [_np_in(x) for x in (q, k, v)]
    ws = None if window_sizes is None else [int(w) for w in np.asarray(window_sizes).reshape(-1)]
    cu = None if cu_seqlens is None else [int(c) for c in np.asarray(cu_seqlens).reshape(-1)]
    res = run_window_attention(args[0][0], args[0][1], args[1][0], args[1][1], args[2][0], args[2][1],
                               window=window, window_sizes=ws, cu_seqlens=cu, scale=scale)
    return _np_out(res)


def relative_rmse(out, ref) -> float:
    """||out - ref||_2 / ||ref||_2 (SPEC.md section 6); inf for a size mismatch,
    nan if anything is not finite; absolute RMS error when ref is all zero."""
    import numpy as np
    out = np.asarray(out, dtype=np.float64).reshape(-1)
    ref = np.asarray(ref, dtype=np.float64).reshape(-1)
    if out.shape != ref.shape:
        return math.inf
    if not (np.all(np.isfinite(out)) and np.all(np.isfinite(ref))):
        return math.nan
    num = float(np.sqrt(np.sum((out - ref) ** 2)))
    den = float(np.sqrt(np.sum(ref ** 2)))
    if den == 0.0:
        return num / math.sqrt(max(out.size, 1))
    return num / den
