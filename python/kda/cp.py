"""Context parallelism: one long sequence (or a packed batch) split over the ranks of a
torch.distributed group, as ``chunk_kda(..., cp_context=...)``.

The gated delta rule is affine in its state: over a run of tokens, ``S_end = M S_start + S_ext``
(SPEC.md section 3), with ``M`` the run's K x K transition and ``S_ext`` its state from zero. The
packed tokens are split evenly over the ranks (FLA's ``fla.ops.cp`` convention: rank r holds tokens
[r T / P, (r + 1) T / P) of the packed batch, and its ``cu_seqlens`` are the local pieces of the
sequences it meets). Then, per call:

1. every rank whose last local sequence goes on to the next rank summarises that piece: its
   ``S_ext`` (the forward from a zero state) and its ``M`` (the forward with zero values from the
   identity's columns), in one call of the rank's own kernels over ceil(K / V) + 1 copies of it;
2. the ranks all-gather those summaries (``[HV, K, V + K]`` fp32 each, about 128 KiB per head at
   K = V = 128), over the group's backend (NCCL);
3. each rank whose first local sequence comes from earlier ranks chains their summaries into that
   sequence's true initial state: S = 0; for each earlier rank j in order, S = M_j S + S_ext_j
   (float64);
4. each rank runs the normal forward of its tokens from that state.

The kernels are kda's own bundles (``chunk_kda`` with initial and final states), so whatever the
chip runs for ``chunk_kda`` runs here. The compiler's ``segments`` (kda-tile-chunks) are the same
decomposition inside one GPU.

The context carries FLA's fields (``FLACPContext``: group, cu_seqlens, cu_seqlens_cpu,
pre_num_ranks, post_num_ranks, is_first_rank, is_last_rank), so a context FLA's
``build_cp_context`` made serves too. ``simulate`` runs every rank's work in one process, in turn,
the gather a stack of the summaries (tests, and a one-GPU check of a multi-GPU run).

As FLA: forward only; ``B == 1`` with the context's cu_seqlens (no ``cu_seqlens`` argument); no
``initial_state`` and no ``output_final_state``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence


@dataclass
class Partition:
    """Where rank `rank` of `world_size` sits in a packed batch (pure Python: no torch)."""
    rank_start: int          # first packed token of the rank
    rank_end: int            # one past its last
    local_cu_seqlens: List[int]  # the rank's pieces of sequences, local offsets
    pre_num_ranks: int       # earlier ranks its first local sequence starts on
    post_num_ranks: int      # later ranks its last local sequence goes on to
    is_first_rank: bool      # its first local sequence starts on it
    is_last_rank: bool       # its last local sequence ends on it


def partition(cu_seqlens: Sequence[int], world_size: int, rank: int) -> Partition:
    """Rank `rank`'s share of the packed batch with offsets `cu_seqlens` ([0, ..., T]): tokens
    [rank T / P, (rank + 1) T / P). T must be a multiple of the world size (FLA's rule: every rank
    the same number of tokens)."""
    cu = [int(x) for x in cu_seqlens]
    if len(cu) < 2 or cu[0] != 0 or any(b < a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"cp: cu_seqlens must start at 0 and not decrease, got {cu[:8]}"
                         f"{' ...' if len(cu) > 8 else ''}")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"cp: rank {rank} of a world of {world_size}")
    total = cu[-1]
    if total < world_size or total % world_size:
        raise ValueError(f"cp: the packed tokens ({total}) must be a positive multiple of the world size "
                         f"({world_size}): every rank holds the same number of tokens")
    part = total // world_size
    start, end = part * rank, part * (rank + 1)
    # The sequences (non-empty) that meet [start, end).
    seqs = [(a, b) for a, b in zip(cu, cu[1:]) if b > a and b > start and a < end]
    local = [0]
    for a, b in seqs:
        local.append(min(b, end) - start)
    first, last = seqs[0], seqs[-1]
    first_rank = first[0] // part
    last_rank = (last[1] - 1) // part
    return Partition(start, end, local, rank - first_rank, last_rank - rank,
                     first_rank == rank, last_rank == rank)


@dataclass
class CPContext:
    """What chunk_kda reads of a context-parallel call (FLA's FLACPContext fields, plus the rank,
    the world size, and an optional all-gather for simulations)."""
    group: Any = None
    cu_seqlens: Any = None       # the rank's local offsets, on the GPU (int32)
    cu_seqlens_cpu: Any = None   # the same on the CPU
    is_first_rank: Optional[bool] = None
    is_last_rank: Optional[bool] = None
    pre_num_ranks: Optional[int] = None
    post_num_ranks: Optional[int] = None
    rank: Optional[int] = None
    world_size: Optional[int] = None
    # all_gather(local [HV, K, V + K] fp32) -> [world_size, HV, K, V + K]; None: torch.distributed's
    # all_gather_into_tensor over `group`.
    all_gather: Optional[Callable[[Any], Any]] = None

    @property
    def num_seqs(self) -> int:
        return 0 if self.cu_seqlens_cpu is None else len(self.cu_seqlens_cpu) - 1


def build_cp_context(cu_seqlens, group=None, *, world_size: Optional[int] = None, rank: Optional[int] = None,
                     cu_seqlens_cpu=None, device=None, all_gather=None) -> CPContext:
    """The context of this rank for the packed batch with global offsets `cu_seqlens` (a tensor or
    a list; FLA's ``build_cp_context(cu_seqlens, group)``). Without a group, `world_size` and `rank`
    say which rank (simulations)."""
    import torch
    if group is not None:
        import torch.distributed as dist
        world_size = dist.get_world_size(group=group)
        rank = dist.get_rank(group=group)
    if world_size is None or rank is None:
        raise ValueError("cp: build_cp_context needs a process group, or world_size and rank")
    host = cu_seqlens_cpu if cu_seqlens_cpu is not None else cu_seqlens
    offsets = host.tolist() if hasattr(host, "tolist") else list(host)
    p = partition(offsets, world_size, rank)
    if device is None:
        device = cu_seqlens.device if hasattr(cu_seqlens, "device") else "cuda"
    local_cpu = torch.tensor(p.local_cu_seqlens, dtype=torch.int32)
    return CPContext(group=group, cu_seqlens=local_cpu.to(device, non_blocking=True), cu_seqlens_cpu=local_cpu,
                     is_first_rank=p.is_first_rank, is_last_rank=p.is_last_rank,
                     pre_num_ranks=p.pre_num_ranks, post_num_ranks=p.post_num_ranks,
                     rank=rank, world_size=world_size, all_gather=all_gather)


def _check(ctx, q, initial_state, output_final_state, cu_seqlens):
    for name in ("cu_seqlens", "pre_num_ranks", "post_num_ranks"):
        if getattr(ctx, name, None) is None:
            raise ValueError(f"kda.chunk_kda: cp_context.{name} is not set (build it with "
                             f"kda.cp.build_cp_context)")
    if cu_seqlens is not None:
        raise ValueError("kda.chunk_kda: with cp_context the sequences come from the context "
                         "(cp_context.cu_seqlens); do not pass cu_seqlens")
    if initial_state is not None or output_final_state:
        raise NotImplementedError("kda.chunk_kda: initial_state and output_final_state are not "
                                  "supported with cp_context (as in FLA)")
    if q.shape[0] != 1:
        raise ValueError(f"kda.chunk_kda: with cp_context the batch size is 1 (packed tokens), got {q.shape[0]}")
    local = _host_offsets(ctx)
    if local[-1] != q.shape[1]:
        raise ValueError(f"kda.chunk_kda: cp_context's local sequences hold {local[-1]} tokens, q holds "
                         f"{q.shape[1]}")


def _host_offsets(ctx) -> List[int]:
    cu = ctx.cu_seqlens_cpu if getattr(ctx, "cu_seqlens_cpu", None) is not None else ctx.cu_seqlens
    return [int(x) for x in (cu.tolist() if hasattr(cu, "tolist") else cu)]


def _state_k_major(s, state_v_first):
    return s.transpose(-1, -2) if state_v_first else s


def local_summary(q, k, v, g, beta, ctx, *, state_v_first=False, **kw):
    """Step 1: this rank's [HV, K, V + K] fp32 summary of its last local sequence's piece,
    [S_ext | M] (K-major), or zeros where that sequence ends on this rank."""
    import torch
    from kda import ops as kops
    HV, K, V = v.shape[2], q.shape[3], v.shape[3]
    out = torch.zeros(HV, K, V + K, dtype=torch.float32, device=q.device)
    if ctx.post_num_ranks == 0:
        return out
    local = _host_offsets(ctx)
    a, b = local[-2], local[-1]
    blocks = -(-K // V)  # identity columns per call: V at a time
    R = 1 + blocks
    qs, ks, gs, bs = (x[:, a:b].expand(R, b - a, *x.shape[2:]).contiguous() for x in (q, k, g, beta))
    vs = torch.zeros(R, b - a, HV, V, dtype=v.dtype, device=v.device)
    vs[0] = v[0, a:b]
    # Initial states: zeros (S_ext), then the identity's columns [j V, j V + V) (M).
    h0 = torch.zeros(R, HV, K, V, dtype=torch.float32, device=q.device)
    for j in range(blocks):
        cols = min(V, K - j * V)
        idx = torch.arange(cols, device=q.device)
        h0[1 + j, :, j * V + idx, idx] = 1.0
    if state_v_first:
        h0 = h0.transpose(-1, -2).contiguous()
    _, ht = kops.chunk_kda(qs, ks, vs, gs, bs, initial_state=h0, output_final_state=True,
                           state_v_first=state_v_first, **kw)
    ht = _state_k_major(ht, state_v_first)
    out[:, :, :V] = ht[0]
    out[:, :, V:] = torch.cat(list(ht[1:]), dim=-1)[:, :, :K]
    return out


def gather(local, ctx):
    """Step 2: every rank's summary, [world_size, HV, K, V + K]."""
    import torch
    # (FLA's contexts have no all_gather and no rank: torch.distributed's.)
    if getattr(ctx, "all_gather", None) is not None:
        return ctx.all_gather(local)
    import torch.distributed as dist
    world = dist.get_world_size(group=ctx.group)
    out = torch.empty((world,) + tuple(local.shape), dtype=local.dtype, device=local.device)
    dist.all_gather_into_tensor(out, local.contiguous(), group=ctx.group)
    return out


def merge(gathered, ctx, V: int):
    """Step 3: the initial state (K-major fp32 [HV, K, V]) of this rank's first local sequence:
    the earlier ranks' summaries chained in order, in float64; None where it starts here."""
    if ctx.pre_num_ranks == 0:
        return None
    rank = getattr(ctx, "rank", None)
    if rank is None:
        import torch.distributed as dist
        rank = dist.get_rank(group=ctx.group)
    S = None
    for j in range(rank - ctx.pre_num_ranks, rank):
        s_ext = gathered[j, :, :, :V].double()
        M = gathered[j, :, :, V:].double()
        S = s_ext if S is None else M @ S + s_ext
    return S.float()


def finish(q, k, v, g, beta, ctx, gathered, *, state_v_first=False, **kw):
    """Step 4: this rank's outputs, its first local sequence from the merged state."""
    import torch
    from kda import ops as kops
    start = merge(gathered, ctx, v.shape[3])
    h0 = None
    if start is not None:
        local = _host_offsets(ctx)
        HV, K, V = v.shape[2], q.shape[3], v.shape[3]
        h0 = torch.zeros(len(local) - 1, HV, K, V, dtype=torch.float32, device=q.device)
        h0[0] = start
        if state_v_first:
            h0 = h0.transpose(-1, -2).contiguous()
    o, _ = kops.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=False,
                          cu_seqlens=ctx.cu_seqlens, state_v_first=state_v_first, **kw)
    return o


def chunk_kda_cp(q, k, v, g, beta, cp_context, *, initial_state=None, output_final_state=False,
                 cu_seqlens=None, state_v_first=False, **kw):
    """chunk_kda(..., cp_context=ctx): steps 1 to 4 on this rank. Returns (o, None)."""
    _check(cp_context, q, initial_state, output_final_state, cu_seqlens)
    local = local_summary(q, k, v, g, beta, cp_context, state_v_first=state_v_first, **kw)
    gathered = gather(local, cp_context)
    return finish(q, k, v, g, beta, cp_context, gathered, state_v_first=state_v_first, **kw), None


def simulate(q, k, v, g, beta, cu_seqlens, world_size: int, *, state_v_first=False, **kw):
    """Every rank's work in one process, in turn: the packed batch (B = 1, global offsets
    `cu_seqlens`) split over `world_size` simulated ranks, their summaries stacked as the
    all-gather would, each rank finished from its merged state. Returns the packed outputs
    (what one process without CP returns) and the contexts."""
    import torch
    offsets = cu_seqlens.tolist() if hasattr(cu_seqlens, "tolist") else list(cu_seqlens)
    ctxs = [build_cp_context(offsets, world_size=world_size, rank=r, device=q.device)
            for r in range(world_size)]
    part = offsets[-1] // world_size
    pieces = [[x[:, r * part:(r + 1) * part] for x in (q, k, v, g, beta)] for r in range(world_size)]
    for ctx, p in zip(ctxs, pieces):
        _check(ctx, p[0], None, False, None)
    summaries = torch.stack([local_summary(*p, ctx, state_v_first=state_v_first, **kw)
                             for p, ctx in zip(pieces, ctxs)])
    outs = [finish(*p, ctx, summaries, state_v_first=state_v_first, **kw) for p, ctx in zip(pieces, ctxs)]
    return torch.cat(outs, dim=1), ctxs
