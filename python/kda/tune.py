"""Tile autotuning: the candidate space, shared-memory pruning, shape buckets
and the tuning database (tools/kda-tune drives them; kda.ops reads the
database). Nothing here needs torch or a GPU.

The **tile** of a gated_delta bundle is what kda-compile's flags choose:
``{"chunk", "sub_chunk", "v_block", "threads"}`` (chunk in {16, 32, 64},
v_block a multiple of 16 dividing V, threads per block in {128, 256}). The
best one depends on the shape (bench/RESULTS.md: small V blocks win where
programs are scarce, large ones where heads are many), so measurements are
kept per **shape bucket**: tokens per sequence T in power-of-two ranges
[2^k, 2^(k+1)) and sequences x value heads (N * HV, the programs the state
kernel has per V block) in power-of-two ranges too.

The **database** is one plain JSON file::

    {"format": "kda-tuning-db", "version": 1,
     "entries": {"<key>": {"config": {...}, "config_hash": "...", "source_hash": "<sha256>", "chip": "sm_90a",
                           "compiler_fingerprint": "kda-...", "bucket": "T4096-8191/NHV32-63",
                           "shapes": [{"T": 8192, "N": 1, "H": 32, "HV": 32}],
                           "candidates": [{"tile": {...}, "median_ms": 2.7, "times_ms": [...],
                                           "status": "ok", "measured": "<UTC time>", "device": "..."}],
                           "winner": {"tile": {...}, "median_ms": 2.7}}}}

keyed by (configuration hash, chip, compiler fingerprint, shape bucket); the
configuration hash is bundles.config_hash (it covers GENERATOR_VERSION and
the chip). ``source_hash`` is the SHA-256 of the module bundles.to_mlir
generates for the configuration: ``kda-compile --tuning-db=FILE
--tuning-shape=T,N,HV`` reads the same file and matches on it (kda-compile
sees modules, not configurations). Entries of another compiler fingerprint are kept (the database can
serve several builds) but never used for this one: a rebuilt compiler makes
other kernels, whose times say nothing about the new ones. The key is
readable on purpose (``<hash16>|<chip>|<fingerprint>|<bucket>``), so that a
person can grep a database.

Merging keeps every candidate's latest measurement (by tile) and recomputes
the winner: the fastest candidate whose output was checked correct. Times
from different runs are compared as they are (one machine type per chip is
assumed); ``kda-tune time`` measures all candidates of a shape in one run.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from . import bundles as _b
from . import chips as _chips

DB_FORMAT = "kda-tuning-db"
DB_VERSION = 1

# Shared memory one block may use (bytes): what kda-compile checks too
# (tools/kda-compile, sharedMemoryLimit). NVIDIA blocks opt in to more than
# the 48 KiB default; AMD's LDS is 64 KiB.
SMEM_LIMITS = {chip: _chips.shared_memory_per_block(chip) for chip in _chips.CHIPS}

CHUNKS = (16, 32, 64)
THREADS = (128, 256)
# NVIDIA's lane kernels run chunks of 32 and 64 (sub-chunks of 16) as
# sub-chunk steps of 16 (kda-tile-chunks' sub-chunk-steps): the same kernels
# as chunk 16, so a plan for those chips times chunk 16 only.
NVIDIA_CHIPS = _chips.NVIDIA_CHIPS


def default_chunks(chip: str) -> Tuple[int, ...]:
    """The chunks worth timing on `chip` (see NVIDIA_CHIPS)."""
    return (16,) if chip in NVIDIA_CHIPS else CHUNKS


def steps_form(cfg: Dict[str, Any], chip: str) -> Tuple[Dict[str, Any], Optional[int]]:
    """A gated_delta configuration that fixes a chunk of 32 or 64 with
    sub-chunks of 16 runs, on NVIDIA, the kernels of its chunk-0 form (as
    sub-chunk steps of 16): it takes that form's tiles (the database's and
    the shape policy's) with its own chunk stamped on them. Returns (the form
    to look tiles up for, the chunk to stamp) or (cfg, None)."""
    c = cfg.get("chunk")
    if (cfg.get("op") == "gated_delta" and c in (32, 64) and cfg.get("sub_chunk", SUB_CHUNK) == SUB_CHUNK
            and chip in NVIDIA_CHIPS):
        return dict(cfg, chunk=0), int(c)
    return cfg, None


def _stamp(tile: Optional[Dict[str, int]], chunk: Optional[int]) -> Optional[Dict[str, int]]:
    if tile is None or chunk is None:
        return tile
    return dict(tile, chunk=chunk, sub_chunk=SUB_CHUNK)
SUB_CHUNK = 16


# ---------------------------------------------------------------------------
# The candidate space
# ---------------------------------------------------------------------------

def v_blocks(V: int) -> List[int]:
    """The V blocks the GPU schedules take: multiples of 16 that divide V."""
    return [vb for vb in range(16, V + 1, 16) if V % vb == 0]


STATE_STAGES = (2, 3, 4, 5, 6, 7, 8)


def make_tile(chunk: int, v_block: int, threads: int, sub_chunk: int = SUB_CHUNK,
              state_stages: int = 2, segments: int = 1) -> Dict[str, int]:
    tile = {"chunk": int(chunk), "sub_chunk": min(int(sub_chunk), int(chunk)),
            "v_block": int(v_block), "threads": int(threads)}
    if int(state_stages) != 2:
        tile["state_stages"] = int(state_stages)
    if int(segments) != 1:
        tile["segments"] = int(segments)
    return tile


def enumerate_space(cfg: Dict[str, Any], chunks: Iterable[int] = CHUNKS,
                    vblocks: Optional[Iterable[int]] = None,
                    threads: Iterable[int] = THREADS,
                    stages: Iterable[int] = (2,)) -> List[Dict[str, int]]:
    """Every legal tile for a gated_delta configuration, restricted to the
    given chunks / V blocks / thread counts / state stages (chunks in flight
    in the state program's cp.async pipeline); illegal values given there
    are dropped, not an error, so a command line can narrow the space."""
    if cfg.get("op") != "gated_delta":
        raise ValueError(f"only gated_delta configurations are tuned, not {cfg.get('op')!r}")
    if cfg.get("chunk"):
        raise ValueError(f"the configuration fixes its chunk ({cfg['chunk']}): nothing to tune "
                         f"(tune its chunk 0 form)")
    legal_v = v_blocks(cfg["V"])
    vb = legal_v if vblocks is None else [v for v in vblocks if v in legal_v]
    out = []
    for c in chunks:
        if c not in CHUNKS:
            continue
        for v in vb:
            for t in threads:
                if t not in THREADS:
                    continue
                for s in stages:
                    if s in STATE_STAGES:
                        out.append(make_tile(c, v, t, state_stages=s))
    return out


def default_tile(chip: str, cfg: Optional[Dict[str, Any]] = None) -> Dict[str, int]:
    """The tile kda-compile uses without flags for cfg (GpuTarget's defaults,
    kda.chips' copy: C = 16, V blocks of 16, or of the chip's fp32 default
    for gated delta ops with fp32 q and k; 128 threads on every chip)."""
    d = _chips.default_tile(chip)
    f32 = bool(cfg) and cfg.get("op") == "gated_delta" and cfg.get("qk_dtype") == "f32"
    return make_tile(d["chunk"], d["v_block_f32"] if f32 else d["v_block"], 128)


def bundle_shared_memory(manifest: Dict[str, Any]) -> int:
    """The most shared memory one of the bundle's kernels needs (bytes):
    its dynamic shared memory, plus static LDS where the AMD backend
    reports it."""
    most = 0
    for k in manifest.get("kernels", []):
        smem = int(k.get("dynamic_shared_memory", 0))
        smem += int(k.get("resources", {}).get("group_segment_fixed_size", 0))
        most = max(most, smem)
    return most


def prune_reason(manifest: Dict[str, Any], chip: str) -> Optional[str]:
    """Why a compiled candidate cannot run on the chip, or None."""
    smem = bundle_shared_memory(manifest)
    limit = SMEM_LIMITS.get(chip)
    if limit is not None and smem > limit:
        return f"needs {smem} bytes of shared memory, {chip} gives a block {limit}"
    return None


# ---------------------------------------------------------------------------
# Shape buckets
# ---------------------------------------------------------------------------

def _pow2_range(x: int) -> Tuple[int, int]:
    x = max(1, int(x))
    lo = 1 << (x.bit_length() - 1)
    return lo, 2 * lo - 1


def shape_bucket(T: int, N: int, HV: int) -> str:
    """The bucket of a call: tokens per sequence T (for varlen batches the
    mean length) and sequences x value heads, each in a power-of-two range:
    ``T4096-8191/NHV32-63``."""
    t0, t1 = _pow2_range(T)
    p0, p1 = _pow2_range(int(N) * int(HV))
    return f"T{t0}-{t1}/NHV{p0}-{p1}"


# ---------------------------------------------------------------------------
# The database
# ---------------------------------------------------------------------------

def config_key(cfg: Dict[str, Any], chip: str) -> str:
    return _b.config_hash(cfg, chip)[:16]


def entry_key(cfg_hash16: str, chip: str, fingerprint: str, bucket: str) -> str:
    return f"{cfg_hash16}|{chip}|{fingerprint}|{bucket}"


def _tile_id(tile: Dict[str, int]) -> str:
    return json.dumps(_b.normalise_tile(tile), sort_keys=True)


def shape_id(shape: Dict[str, Any]) -> str:
    """A measured shape as text: ``T=8192,N=1,H=32,HV=32`` (and
    ``,lens=1300:547`` for a ragged batch)."""
    text = ",".join(f"{k}={shape[k]}" for k in ("T", "N", "H", "HV") if k in shape)
    if shape.get("lens"):
        text += ",lens=" + ":".join(str(x) for x in shape["lens"])
    return text


def shape_times(candidate: Dict[str, Any], ids: List[str]) -> Optional[List[float]]:
    """A candidate's median per shape (``ids``: shape_id of each), or None
    unless it was measured on all of them (an entry of one shape recorded
    before per-shape times: its median)."""
    by = candidate.get("by_shape")
    if not ids or not by:
        return [candidate["median_ms"]] if candidate.get("median_ms") is not None else None
    if any(by.get(i) is None for i in ids):
        return None
    return [by[i] for i in ids]


def baseline_times(candidates: List[Dict[str, Any]], ids: List[str],
                   baselines: Optional[Dict[str, Dict[str, int]]]) -> List[Optional[float]]:
    """Per shape (``ids``), the time of its baseline tile among
    ``candidates`` (None where that tile was not measured correct on it)."""
    out: List[Optional[float]] = []
    for i in ids:
        base = (baselines or {}).get(i)
        c = next((c for c in candidates if base is not None and c.get("status") == "ok"
                  and _tile_id(c["tile"]) == _tile_id(base)), None)
        out.append((c.get("by_shape") or {}).get(i) if c else None)
    return out


def _winner(candidates: List[Dict[str, Any]], shapes: Optional[List[Dict[str, Any]]] = None,
            baselines: Optional[Dict[str, Dict[str, int]]] = None) -> Optional[Dict[str, Any]]:
    """The fastest candidate over the entry's shapes (sum of their medians)
    among those measured correct on every one of them and, on each shape,
    no slower than that shape's baseline (the tile kda.ops would choose
    without a database: the shape policy's, or the chip default), so that a
    tuned tile never loses to the default on a measured shape. None when no
    candidate qualifies (shapes of one bucket whose baselines differ and no
    tile is as fast as each): lookups then keep the default."""
    ids = [shape_id(s) for s in shapes] if shapes else []

    def times(c):
        return shape_times(c, ids)

    ok = [c for c in candidates if c.get("status") == "ok" and times(c) is not None]
    if not ok:
        return None
    limits = baseline_times(ok, ids, baselines)
    fit = [c for c in ok if all(lim is None or t <= lim for t, lim in zip(times(c), limits))]
    if not fit:
        return None
    best = min(fit, key=lambda c: (sum(times(c)), _tile_id(c["tile"])))
    return {"tile": dict(best["tile"]), "median_ms": sum(times(best))}


class TuningDB:
    """The tuning database in memory; load / save / merge / export / import
    and lookup. Plain dicts inside (``entries``), as in the file."""

    def __init__(self, entries: Optional[Dict[str, Any]] = None):
        self.entries: Dict[str, Dict[str, Any]] = entries or {}

    # -- files ---------------------------------------------------------------
    @classmethod
    def load(cls, path: str, missing_ok: bool = True) -> "TuningDB":
        if missing_ok and not os.path.exists(path):
            return cls()
        try:
            with open(path) as f:
                data = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path}: not a kda tuning database (not valid JSON: {e})") from None
        if not isinstance(data, dict) or data.get("format") != DB_FORMAT:
            raise ValueError(f"{path}: not a kda tuning database (format {DB_FORMAT!r})")
        if data.get("version") != DB_VERSION:
            raise ValueError(f"{path}: tuning database version {data.get('version')!r}; "
                             f"this package reads version {DB_VERSION}")
        entries = data.get("entries")
        if not isinstance(entries, dict):
            raise ValueError(f"{path}: 'entries' must be an object")
        for key, e in entries.items():
            if not isinstance(e, dict):
                raise ValueError(f"{path}: entry {key!r} must be an object")
            for field in ("config", "config_hash", "chip", "compiler_fingerprint", "bucket", "candidates"):
                if field not in e:
                    raise ValueError(f"{path}: entry {key!r} lacks {field!r}")
            if not isinstance(e["candidates"], list) or not all(isinstance(c, dict) for c in e["candidates"]):
                raise ValueError(f"{path}: entry {key!r}: 'candidates' must be a list of objects")
            if e.get("winner") is not None and not (isinstance(e["winner"], dict)
                                                    and isinstance(e["winner"].get("tile"), dict)):
                raise ValueError(f"{path}: entry {key!r}: 'winner' must be an object with a 'tile'")
        return cls(entries)

    def to_json(self) -> Dict[str, Any]:
        return {"format": DB_FORMAT, "version": DB_VERSION, "entries": self.entries}

    def save(self, path: str) -> None:
        """Writes the file atomically (a temporary sibling renamed over it)."""
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-" + os.path.basename(path), dir=d)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(self.to_json(), f, indent=1, sort_keys=True)
                f.write("\n")
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    # -- updates -------------------------------------------------------------
    def add(self, cfg: Dict[str, Any], chip: str, fingerprint: str, shape: Dict[str, int],
            candidates: List[Dict[str, Any]], multiprocessors: Optional[int] = None) -> str:
        """Adds one shape's measurements (a list of {"tile", "status",
        "median_ms", ...}); returns the entry's key. ``multiprocessors`` (of
        the GPU that measured) names the shape's baseline, the shape
        policy's tile; without it the chip default is."""
        HV = shape.get("HV", shape.get("H", 1))
        bucket = shape_bucket(shape["T"], shape["N"], HV)
        h = config_key(cfg, chip)
        key = entry_key(h, chip, fingerprint, bucket)
        sid = shape_id(shape)
        cands = copy.deepcopy(candidates)
        for c in cands:
            c["by_shape"] = {sid: c.get("median_ms") if c.get("status") == "ok" else None}
            c["status_by_shape"] = {sid: c.get("status")}
        base = shape_policy_tile(cfg, chip, shape["N"], HV, multiprocessors or 0) or default_tile(chip, cfg)
        new = {"config": copy.deepcopy(cfg), "config_hash": h, "chip": chip,
               "compiler_fingerprint": fingerprint, "bucket": bucket,
               # What kda-compile --tuning-db matches: it sees the module, not cfg.
               "source_hash": hashlib.sha256(_b.to_mlir(cfg).encode()).hexdigest(),
               "shapes": [dict(shape)], "baselines": {sid: _b.normalise_tile(base)},
               "candidates": cands}
        self._merge_entry(key, new)
        return key

    def _merge_entry(self, key: str, new: Dict[str, Any]) -> None:
        old = self.entries.get(key)
        if old is None:
            self.entries[key] = copy.deepcopy(new)
            e = self.entries[key]
            e["winner"] = _winner(e["candidates"], e.get("shapes"), e.get("baselines"))
            return
        by_tile = {_tile_id(c["tile"]): c for c in old["candidates"]}
        for c in new["candidates"]:
            k = _tile_id(c["tile"])
            prev = by_tile.get(k)
            merged = copy.deepcopy(c)  # the latest measurement wins, shape by shape
            if prev is not None:
                merged["by_shape"] = dict(prev.get("by_shape") or {}, **(c.get("by_shape") or {}))
                merged["status_by_shape"] = dict(prev.get("status_by_shape") or {},
                                                 **(c.get("status_by_shape") or {}))
            statuses = list((merged.get("status_by_shape") or {}).values())
            if statuses:
                merged["status"] = "ok" if all(x == "ok" for x in statuses) else next(
                    x for x in statuses if x != "ok")
            by_tile[k] = merged
        old["candidates"] = [by_tile[k] for k in sorted(by_tile)]
        shapes = old.setdefault("shapes", [])
        for s in new.get("shapes", []):
            if s not in shapes:
                shapes.append(dict(s))
        old.setdefault("baselines", {}).update(new.get("baselines") or {})
        old["winner"] = _winner(old["candidates"], old["shapes"], old["baselines"])

    def merge(self, other: "TuningDB") -> "TuningDB":
        for key, e in other.entries.items():
            self._merge_entry(key, e)
        return self

    def select(self, chip: Optional[str] = None, fingerprint: Optional[str] = None) -> "TuningDB":
        """The entries of one chip and / or one compiler (a copy)."""
        return TuningDB({k: copy.deepcopy(e) for k, e in self.entries.items()
                         if (chip is None or e["chip"] == chip)
                         and (fingerprint is None or e["compiler_fingerprint"] == fingerprint)})

    def export(self, path: str, chip: Optional[str] = None, fingerprint: Optional[str] = None) -> int:
        """Writes the selected entries to path; returns how many."""
        sub = self.select(chip, fingerprint)
        sub.save(path)
        return len(sub.entries)

    def import_(self, path: str) -> int:
        """Merges another database file in; returns how many entries it had."""
        other = TuningDB.load(path, missing_ok=False)
        self.merge(other)
        return len(other.entries)

    # -- lookup --------------------------------------------------------------
    def lookup_entry(self, cfg: Dict[str, Any], chip: str, fingerprint: Optional[str],
                     T: int, N: int, HV: int) -> Optional[Dict[str, Any]]:
        """The entry for this call, or None. With a known fingerprint only
        that compiler's entries count; with an unknown one (no compiler on
        this machine: the bundles were prebuilt) an entry of any compiler
        does, the one measured last (its bundles are the ones found)."""
        h = config_key(cfg, chip)
        bucket = shape_bucket(T, N, HV)
        if fingerprint:
            e = self.entries.get(entry_key(h, chip, fingerprint, bucket))
            return e if e and e.get("winner") else None
        found = [e for e in self.entries.values()
                 if e["config_hash"] == h and e["chip"] == chip and e["bucket"] == bucket and e.get("winner")]
        if not found:
            return None
        return max(found, key=lambda e: max((c.get("measured", "") for c in e["candidates"]), default=""))

    def lookup(self, cfg: Dict[str, Any], chip: str, fingerprint: Optional[str],
               T: int, N: int, HV: int) -> Optional[Dict[str, int]]:
        """The tuned tile for this call (replacing the chip's default), or None."""
        e = self.lookup_entry(cfg, chip, fingerprint, T, N, HV)
        return dict(e["winner"]["tile"]) if e else None


# ---------------------------------------------------------------------------
# The shape policy: the default tile for a call's shape
# ---------------------------------------------------------------------------
#
# The chunk-parallel state kernel runs one block per (sequence, value head,
# V block) for the whole sequence, so its time is (waves of blocks) x (chunk
# steps) x (the time of one step), and a step is latency. The derived state
# program (16-bit inputs) gives each warp 16 V rows per 32 of the block's V
# block (at most 4 warps) and all of K, with every chunk's workspaces staged
# once per block: V blocks of 32 (2 warps) have the shortest step, V blocks
# of 128 (4 warps, 32 rows each) read each chunk once per head instead of 4
# times and win once there are more blocks than the chip runs at once.
# Measured on the H200 (bench/RESULTS.md, 2026-12-02, 13th session), K = V =
# 128, C = 16: V blocks of 32 are fastest at 16 to 64 (sequence, head)
# "units" (T = 131072 H = 16 to T = 8192 H = 64), V blocks of 128 from 96
# units on (H = 96, 8 x 4096, varlen batches); 16 and 64 are never best. On
# S multiprocessors:
#   units x 4 <= 2 S  -> V blocks of 32, 3 chunks in flight
#   more              -> V blocks of 128, 2 chunks in flight
# Chunks in flight (state_stages, the cp.async stages of the derived state
# program): with few blocks a step is the latency of its own loads plus its
# products, and a third stage hides more of the first behind the second:
# 12 % off T = 1024 to 131072 at 16 to 32 units (bench/RESULTS.md,
# fourteenth session). With V blocks of 128 the blocks fill the chip, and
# the extra shared memory costs residency (3 stages: 5 % slower at 8 x 4096).
# 4 stages at V blocks of 32 came out twice as slow in the state kernel
# (ncu: ptxas serialised the W S chain; 3 and 6 did not), so the count is
# measured, not derived.
# A tuning database entry (kda-tune) overrides it. Other chips and shapes
# keep the compiled default until they are measured.
#
# Chunk-boundary states (boundary_interval, FLA's h, a prefix cache's pool):
# the state kernel also stores the state at every interval, and at V blocks
# of 128 that spills 144 to 302 bytes (ptxas -v; 254 registers and no spill
# at 64). Where the policy would take 128 such calls take BOUNDARY_V_BLOCK
# (measured against 128 in the same run: bench/RESULTS.md, 21st session).
BOUNDARY_V_BLOCK = 64

POLICY_CHIPS = ("sm_90a",)


def _policy_applies(cfg: Dict[str, Any], chip: str) -> bool:
    return (chip in POLICY_CHIPS and cfg.get("op") == "gated_delta" and not cfg.get("chunk")
            and cfg.get("K") == 128 and cfg.get("V") == 128
            and cfg.get("qk_dtype") in ("bf16", "f16") and cfg.get("update", "delta") == "delta")


# Segments (kda-tile-chunks' `segments`: each sequence's chunks split into P
# runs; a summary kernel gives each its transition and offset, a combine
# kernel scans them, and the state kernel runs the P runs side by side). The
# summary does twice a state pass's columns (V and the K of the transition)
# and the state pass runs again, so segments pay only where the state kernel
# leaves the chip idle: few (sequence, head) units and long sequences.
# Measured on the H100 (bench/RESULTS.md, fortieth session; FLA 10.44, 5.29,
# 13.39 and 11.27 ms), none / 4 / 8 / 16 segments:
#   T = 131072 H = 16           6.57 / 6.41 / 5.19 / 5.02
#   T = 65536 H = 16            3.30 / 3.21 / 2.61 / 2.73
#   T = 262144 H = 8           10.86 / 6.76 / 7.16 / 5.17
#   softplus T = 131072 H = 16  6.85 / 6.56 / 5.65 / 5.14
# (the twenty-eighth session's first build, on the H200: T = 32768 H = 32,
# whose 128 programs fill the chip already, 16 to 52 % slower with
# segments). The policy takes segments only where the call's programs
# without them (units x V blocks) leave a quarter of the multiprocessors idle,
# then the largest count whose (sequence x segment, head) units are between
# half and twice the multiprocessors, each segment SEGMENT_MIN_CHUNKS chunks
# or more: the fastest of the four columns in every row above. Calls with
# boundary states take none (refused with segments), and so do calls whose
# length is not known to the policy. KDA_SEGMENTS=P (1: none) sets the count
# for every call; kda.prebuild builds the policy's segment tiles (V blocks of
# 128: units x P past half the chip) with its others, and --segments any
# count's.
SEGMENT_CHOICES = (4, 8, 16)
SEGMENT_MIN_CHUNKS = 512  # chunks of 16 tokens a segment at least
SEGMENT_IDLE = 0.75  # programs without segments below this x multiprocessors
MAX_SEGMENTS = 64  # kda-tile-chunks' limit (passes/Passes.h, kMaxSegments)


def _int_env(name: str, what: str, valid: Callable[[int], bool], expected: str) -> Optional[int]:
    """The integer environment variable `name` (None where unset or empty),
    or a ValueError naming it, what it takes and what it got."""
    env = os.environ.get(name)
    if not env:
        return None
    try:
        value = int(env)
    except ValueError:
        raise ValueError(f"{name}: expected {what}, got {env!r}")
    if not valid(value):
        raise ValueError(f"{name}: expected {expected}, got {value}")
    return value


# A hybrid layer's state pass: in the overlap schedule (hybrid_schedule) on
# the side stream beside the window, in V blocks of 64 (hybrid_overlap_tile:
# four warps a program on multiprocessors of their own, as the pieces'
# overlap measured best, docs/pipelining.md). KDA_HYBRID_V_BLOCK asks for
# another V block in either schedule, to measure.
HYBRID_V_BLOCKS = (16, 32, 64, 128)


def hybrid_overlap_tile() -> Dict[str, int]:
    return make_tile(16, 64, 128, state_stages=3)


def hybrid_schedule(chip: str, N: int, HV: int, V: int, multiprocessors: int) -> str:
    """How a hybrid layer runs (kda.bundles.hybrid_config's ``schedule``): "fused" (the mix in
    the window kernel's epilogue, after the state pass) or "overlap" (since the forty-eighth
    session: the same fused window beside the gated delta's state pass in V blocks of 64,
    whose programs hold a multiprocessor each where they fill at most half the chip and
    publish their progress, which the window waits for before it reads the rows it mixes;
    runtime/BUNDLE.md, "Progress"). Measured on the H100 (bench/RESULTS.md, forty-seventh
    session, hybrid gated T=8192 H=32 W=512): fused 0.86 ms; the overlap's earlier form (a mix
    kernel after the window) 0.87 to 0.91 ms; the progress form 1.73 ms (forty-ninth session)
    and 1.11 with the window's programs in the order the state pass's rows come (fiftieth: the
    window on the multiprocessors the state pass leaves outlasts it, and the state pass slows
    beside it). So fused, everywhere; KDA_HYBRID_SCHEDULE=fused|overlap decides instead."""
    forced = os.environ.get("KDA_HYBRID_SCHEDULE")
    if forced:
        if forced not in ("fused", "overlap"):
            raise ValueError(f"KDA_HYBRID_SCHEDULE: expected fused or overlap, got {forced!r}")
        return forced
    return "fused"


# Whether hybrid layers take pipelined pieces by the shape (hybrid_pieces). On since the
# fifty-second session (H100, bench/RESULTS.md): `hybrid gated T=8192 H=32 W=512` 0.782 ms
# in 4 pieces and 0.790 in 8 against 0.856 in one (0.91), the windows of the earlier pieces
# running beside the later state passes. KDA_HYBRID_PIECES=P asks for P (1: none).
HYBRID_PIECES_POLICY = True


def hybrid_pieces(cfg: Dict[str, Any], chip: str, N: int, HV: int, multiprocessors: int,
                  T: Optional[int], dense: bool, schedule: str) -> int:
    """How many pipelined pieces a hybrid layer's call takes (1: none): with
    HYBRID_PIECES_POLICY, those chunk_kda's gated delta part would take for the shape
    (shape_policy_pieces: one dense sequence whose state pass leaves half the chip), with the
    fused schedule; each piece's window (over earlier keys, the mix in its epilogue) then runs
    after its piece's state pass, beside the later pieces' (kda.bundles.hybrid_config's
    "pieces", docs/pipelining.md). KDA_HYBRID_PIECES=P takes P pieces (1: none)."""
    forced = _int_env("KDA_HYBRID_PIECES", "a hybrid layer's pieces (1: none)", lambda p: 1 <= p <= 64,
                      "1 to 64")
    if schedule != "fused" or not dense or int(N) != 1 or not T:
        return 1
    gd = cfg["gated_delta"]
    if forced is not None:
        return min(forced, max(1, -(-int(T) // SUB_CHUNK))) if pieces_applies(gd, chip) else 1
    if not HYBRID_PIECES_POLICY:
        return 1
    return shape_policy_pieces(gd, chip, N, HV, multiprocessors, T, dense)


def hybrid_tile_override() -> Optional[Dict[str, int]]:
    vb = _int_env("KDA_HYBRID_V_BLOCK", "a V block for a hybrid layer's state pass",
                  lambda v: v in HYBRID_V_BLOCKS, f"one of {HYBRID_V_BLOCKS}")
    if vb is None:
        return None
    return make_tile(16, vb, 128, state_stages=3 if vb in (32, 64) else 2)


def _segments_override() -> Optional[int]:
    return _int_env("KDA_SEGMENTS", "a segment count (1: none)", lambda p: 1 <= p <= MAX_SEGMENTS,
                    f"1 to {MAX_SEGMENTS}")


# Pipelined pieces (a launch schedule of the same two kernels, not a kernel of
# its own): the state pass is affine in the state and both kernels take any
# token range, so one long sequence splits into P pieces of whole chunks; the
# intra-chunk kernel of each piece runs in turn on the caller's stream, and the
# state kernel of piece i (from piece i - 1's final state) on a high-priority
# stream as soon as piece i's intra-chunk kernel is done: state pass i runs
# beside intra-chunk piece i + 1 on the multiprocessors it leaves. The state
# kernel takes V blocks of 64 (four warps, two blocks a head): fewer programs
# than the intra-chunk grid's, first in line. Outputs and states are
# bit-identical to one piece. Measured on the H100 (bench/RESULTS.md,
# forty-fourth session; the kernels launched by name, each schedule in a CUDA
# graph), ms, 1 / 2 / 4 / 8 / 16 pieces (the shape policy's one-piece tile in
# parentheses):
#   T = 32768 H = 32   2.332 / 2.040 / 1.902 / 1.866 / 1.878   (2.179)
#   T = 8192 H = 32    0.587 / 0.529 / 0.501 / 0.521 / 0.583   (0.547)
# Only for one dense sequence (B = 1, no cu_seqlens) whose state kernel leaves
# half the chip or more to the intra-chunk grid, without segments (which split
# the sequential chain itself: the longer sequences) or boundary states.
# KDA_PIECES=P takes P pieces wherever they apply (1: none), to measure.
# The runtime launches them in one C call (kda_prepare_pieces), as one CUDA
# graph of its own (eager launches reach the GPU too late to overlap). Through
# chunk_kda on the H100 (bench/RESULTS.md, forty-eighth session), ms, one
# piece / 4 / 8 pieces:
#   T = 32768 H = 32   2.164 / 1.926 / 1.866
#   T = 8192 H = 32    0.551 / 0.507 / 0.521
# PIECES_POLICY = False keeps one piece (tests switch it).
PIECES_POLICY = True
PIECE_V_BLOCK = 64
PIECE_MIN_TOKENS = 8192
MAX_PIECES = 64


def _pieces_override() -> Optional[int]:
    return _int_env("KDA_PIECES", "a piece count (1: none)", lambda p: 1 <= p <= MAX_PIECES,
                    f"1 to {MAX_PIECES}")


def pieces_applies(cfg: Dict[str, Any], chip: str) -> bool:
    """Whether cfg's calls may run as pipelined pieces on chip (the shape
    decides how many: shape_policy_pieces)."""
    return (_policy_applies(cfg, chip) and not cfg.get("boundary_interval")
            and not cfg.get("cu_seqlens_dtype") and not cfg.get("return_intermediate_states"))


def pieces_config(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """The configuration a pieces schedule launches: cfg with an fp32 initial
    and final state (every piece but the first starts from the one before)."""
    return dict(cfg, initial_state_dtype="f32", final_state_dtype="f32")


def hybrid_pieces_config(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """A hybrid layer's configuration in pieces: its gated delta part with fp32 states between
    the pieces, the window over earlier keys (kda.bundles.hybrid_config's "pieces")."""
    return dict(cfg, gated_delta=pieces_config(cfg["gated_delta"]), schedule="pieces")


def pieces_tile() -> Dict[str, int]:
    """The tile of a pieces schedule's bundle (its state kernel's V blocks)."""
    return make_tile(16, PIECE_V_BLOCK, 128, state_stages=3)


def shape_policy_pieces(cfg: Dict[str, Any], chip: str, N: int, HV: int, multiprocessors: int,
                        T: Optional[int], dense: bool) -> int:
    """How many pipelined pieces a call of N sequences x HV value heads of T
    tokens takes (1: none). `dense`: no cu_seqlens."""
    if not pieces_applies(cfg, chip) or not dense or int(N) != 1 or not T:
        return 1
    override = _pieces_override()
    if override is not None:
        return min(override, max(1, -(-int(T) // SUB_CHUNK)))
    if not PIECES_POLICY or multiprocessors <= 0 or int(T) < PIECE_MIN_TOKENS:
        return 1
    if _policy_segments(N, HV, multiprocessors, T) > 1:
        return 1
    blocks = max(1, int(HV)) * max(1, int(cfg.get("V", 128)) // PIECE_V_BLOCK)
    if 2 * blocks > multiprocessors:
        return 1
    return 4 if int(T) < 2 * PIECE_MIN_TOKENS else 8


# The gradient (kda.gated_delta_grad, chunk_kda's backward): its reverse scan
# runs programs over (sequence, value head, V block), sequential over the
# chunks, each copying every chunk's W, Gamma Q and decayed k rows ([16, 128]
# f32 each) through L2: it is L2-bound (Nsight Compute, bench/RESULTS.md,
# thirty-fifth session). The chip's V block (32 on sm_90a) fills the chip
# where there are few (sequence, head) units; where there are many, wider
# blocks copy those rows fewer times and still fill it. Only the reverse scan
# changes with the tile (the step, chunk and intra grids take the chip's
# gradient settings whatever the V block). Measured on the H100 (thirty-ninth
# session): see GRAD_WIDE_UNITS. KDA_GRAD_V_BLOCK=N takes V blocks of N
# (0: the compiled default) for every call, to measure.
GRAD_WIDE_V_BLOCK = 64
GRAD_WIDE_UNITS = 1.0  # units >= this x multiprocessors -> GRAD_WIDE_V_BLOCK


def _grad_policy_applies(cfg: Dict[str, Any], chip: str) -> bool:
    return (chip in POLICY_CHIPS and cfg.get("op") == "gated_delta_grad" and cfg.get("chunk") == SUB_CHUNK
            and cfg.get("K") == 128 and cfg.get("V") == 128 and cfg.get("qk_dtype") in ("bf16", "f16"))


def _grad_tile(chip: str, v_block: int) -> Dict[str, int]:
    threads = int(_chips.default_tile(chip)["threads_gradient"])
    return make_tile(SUB_CHUNK, v_block, threads)


def _grad_v_block_override(V: int) -> Optional[int]:
    return _int_env("KDA_GRAD_V_BLOCK", "a V block (0: the compiled default)",
                    lambda vb: vb == 0 or vb in v_blocks(V), f"0 or one of {v_blocks(V)}")


def grad_policy_tile(cfg: Dict[str, Any], chip: str, N: int, HV: int,
                     multiprocessors: int) -> Optional[Dict[str, int]]:
    """The tile of a gradient call of N sequences x HV value heads on a chip
    with that many multiprocessors, or None for the compiled default."""
    if not _grad_policy_applies(cfg, chip) or multiprocessors <= 0:
        return None
    vb = _grad_v_block_override(int(cfg["V"]))
    if vb is None:
        units = max(1, int(N)) * max(1, int(HV))
        vb = GRAD_WIDE_V_BLOCK if units >= GRAD_WIDE_UNITS * multiprocessors else 0
    return _grad_tile(chip, vb) if vb else None


def grad_policy_tiles(cfg: Dict[str, Any], chip: str) -> List[Dict[str, int]]:
    """The tiles grad_policy_tile may choose, or KDA_GRAD_V_BLOCK ask for,
    besides the default (what kda.prebuild builds next to it)."""
    if not _grad_policy_applies(cfg, chip):
        return []
    return [_grad_tile(chip, vb) for vb in (64, 128)]


def policy_tiles(cfg: Dict[str, Any], chip: str) -> List[Dict[str, int]]:
    """Every tile shape_policy_tile may choose for cfg on chip besides the
    default (what kda.prebuild builds next to the default bundle). A hybrid
    layer's are its gated delta part's (kda.ops.hybrid_attention asks the
    policy for that part)."""
    if cfg.get("op") == "hybrid":
        # The overlap schedule takes V blocks of 64 (hybrid_overlap_tile); the fused one the
        # gated delta's own policy.
        if cfg.get("schedule") == "overlap":
            # (and KDA_HYBRID_V_BLOCK's, where it is set: built to measure)
            extra = hybrid_tile_override()
            return [hybrid_overlap_tile()] + ([extra] if extra and extra != hybrid_overlap_tile() else [])
        return policy_tiles(cfg["gated_delta"], chip)
    if cfg.get("op") == "multi_scale":
        # Its recurrences' tiles: kda.ops.multi_scale_attention asks the policy for them, without
        # segments (the layer runs its scales one after another on one V block).
        return [t for t in policy_tiles(cfg["gated_delta"], chip) if not t.get("segments")]
    if _grad_policy_applies(cfg, chip):
        return grad_policy_tiles(cfg, chip)
    cfg, chunk = steps_form(cfg, chip)
    if not _policy_applies(cfg, chip):
        return []
    wide = BOUNDARY_V_BLOCK if cfg.get("boundary_interval") else 128
    tiles = [_stamp(make_tile(16, 32, 128, state_stages=3), chunk),
             _stamp(make_tile(16, wide, 128), chunk)]
    if not chunk:
        # The policy's segments (_policy_segments): units x P past half the
        # chip, so V blocks of 128 (none with boundary states).
        tiles += [t for t in segment_tiles(cfg, chip, SEGMENT_CHOICES) if t["v_block"] == 128]
    return tiles


def segment_tiles(cfg: Dict[str, Any], chip: str, counts: Iterable[int]) -> List[Dict[str, int]]:
    """The shape policy's tiles with each of `counts` segments (what
    KDA_SEGMENTS may ask for; kda.prebuild --segments builds them)."""
    if cfg.get("op") == "hybrid":
        return segment_tiles(cfg["gated_delta"], chip, counts)
    if cfg.get("op") == "multi_scale":
        return []
    cfg, chunk = steps_form(cfg, chip)
    if not _policy_applies(cfg, chip) or cfg.get("boundary_interval"):
        return []
    return [_stamp(make_tile(16, vb, 128, state_stages=3 if vb == 32 else 2, segments=p), chunk)
            for p in counts if p > 1 for vb in (32, 128)]


def shape_policy_tile(cfg: Dict[str, Any], chip: str, N: int, HV: int,
                      multiprocessors: int, T: Optional[int] = None) -> Optional[Dict[str, int]]:
    """The tile for a call of N sequences x HV value heads (of T tokens
    each, where known) on a chip with that many multiprocessors, or None
    for the compiled default (V blocks of 16)."""
    cfg, chunk = steps_form(cfg, chip)
    if not _policy_applies(cfg, chip) or multiprocessors <= 0:
        return None
    boundary = bool(cfg.get("boundary_interval"))
    # (Segments measured at chunk 16 only: sub-chunk steps take them from
    # KDA_SEGMENTS alone.)
    segments = 1 if boundary else _policy_segments(N, HV, multiprocessors, None if chunk else T)
    return _stamp(_policy_tile(N * segments, HV, multiprocessors, boundary, segments), chunk)


def _policy_segments(N: int, HV: int, multiprocessors: int, T: Optional[int]) -> int:
    override = _segments_override()
    if override is not None:
        return override
    if not T or multiprocessors <= 0:
        return 1
    units = max(1, int(N)) * max(1, int(HV))
    # The policy applies at V = 128: V blocks of 32 are four programs a unit.
    programs = units * (128 // _policy_tile(N, HV, multiprocessors)["v_block"])
    if programs >= SEGMENT_IDLE * multiprocessors:
        return 1
    best = 1
    for p in SEGMENT_CHOICES:
        if (multiprocessors <= 2 * units * p <= 4 * multiprocessors
                and int(T) >= SUB_CHUNK * SEGMENT_MIN_CHUNKS * p):
            best = p
    return best


def _policy_tile(N: int, HV: int, multiprocessors: int, boundary: bool = False,
                 segments: int = 1) -> Optional[Dict[str, int]]:
    units = max(1, int(N)) * max(1, int(HV))
    if units * 4 <= 2 * multiprocessors:
        return make_tile(16, 32, 128, state_stages=3, segments=segments)
    return make_tile(16, BOUNDARY_V_BLOCK if boundary else 128, 128, segments=segments)


# ---------------------------------------------------------------------------
# What kda.ops asks
# ---------------------------------------------------------------------------

_cache: Dict[str, Tuple[Any, TuningDB]] = {}
_cache_lock = threading.Lock()


# The database shipped with the package (tuned on the GPU machine for the
# configurations bench/BENCH.md measures; kda-tune pick --db writes it).
PACKAGED_DB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tuning.json")


def db_paths() -> List[str]:
    """The databases a lookup consults, first match wins: ``$KDA_TUNING_DB``
    alone when set (empty: tuning off); else ~/.cache/kda/tuning.json (if
    it exists), then the package's own (kda/tuning.json). Entries of another
    compiler are ignored either way, so the package's database serves only
    builds of the sources it was tuned with."""
    env = os.environ.get("KDA_TUNING_DB")
    if env is not None:
        return [env] if env else []
    out = []
    user = os.path.join(os.path.expanduser("~"), ".cache", "kda", "tuning.json")
    if os.path.isfile(user):
        out.append(user)
    if os.path.isfile(PACKAGED_DB):
        out.append(PACKAGED_DB)
    return out


def _loaded(path: str) -> TuningDB:
    try:
        st = os.stat(path)
        stamp = (st.st_size, st.st_mtime_ns)
    except OSError:
        return TuningDB()
    with _cache_lock:
        hit = _cache.get(path)
        if hit and hit[0] == stamp:
            return hit[1]
        db = TuningDB.load(path)
        _cache[path] = (stamp, db)
        return db


def tuned_tile(cfg: Dict[str, Any], chip: str, T: int, N: int, HV: int) -> Optional[Dict[str, int]]:
    """The database's tile for a call of cfg (a gated_delta configuration
    with chunk 0, the target's default; a caller-chosen chunk is kept), or
    None: then the chip's default tile is used. A chunk run as sub-chunk
    steps takes its chunk-0 form's tile (steps_form)."""
    cfg, chunk = steps_form(cfg, chip)
    if cfg.get("op") != "gated_delta" or cfg.get("chunk"):
        return None
    paths = db_paths()
    if not paths:
        return None
    fingerprint = _b.current_fingerprint()
    for path in paths:
        tile = _loaded(path).lookup(cfg, chip, fingerprint, T, N, HV)
        if tile is not None:
            return _stamp(tile, chunk)
    return None


def db_tiles(cfg: Dict[str, Any], chip: str) -> List[Dict[str, int]]:
    """Every winning tile the databases hold for cfg on chip (any bucket;
    this compiler's entries where its fingerprint is known): what
    kda.prebuild builds next to the default bundle."""
    cfg, chunk = steps_form(cfg, chip)
    if cfg.get("op") != "gated_delta" or cfg.get("chunk"):
        return []
    h = config_key(cfg, chip)
    fingerprint = _b.current_fingerprint()
    out: List[Dict[str, int]] = []
    for path in db_paths():
        for e in _loaded(path).entries.values():
            if (e.get("config_hash") != h or e.get("chip") != chip or not e.get("winner")
                    or (fingerprint and e.get("compiler_fingerprint") != fingerprint)):
                continue
            tile = _stamp(_b.normalise_tile(e["winner"]["tile"]), chunk)
            if tile not in out:
                out.append(tile)
    return out
