#!/usr/bin/env python3
"""CI test of autotuning (python/kda/tune.py, tools/kda-tune) and of the
compiler fingerprint in the bundle cache key (python/kda/bundles.py). No GPU.

    test_tune.py --tmp DIR                                              # part "unit"
    test_tune.py --flow --kda-tune BIN --kda-compile BIN --runtime LIB --tmp DIR

Part "unit" (python3 only; fake kda-compile scripts): the tile space and its
narrowing, shared-memory pruning from manifests, shape buckets, the tuning
database (add, merge, save / load, export / import, lookup, entries of
another compiler fingerprint ignored, unknown fingerprint), kda.ops' lookup
through KDA_TUNING_DB; bundles: the fingerprint is part of the bundle name,
a compiler with another fingerprint builds a new bundle instead of reusing
the old one, a tuned tile reaches kda-compile as flags, a compiler without
--fingerprint is refused, no compiler finds the newest bundle; kda-tune
compile prunes candidates kda-compile refuses or whose manifest exceeds the
chip.

Part "flow" (needs kda-compile, i.e. ptxas, and libkda_runtime.so): kda-tune
compile -> time --fake-timer -> pick on a tiny configuration with two real
candidates; the database's winner, lookup, and invalidation by fingerprint.

Prints one line per check and "ALL OK"; exits 1 on the first failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

from kda import bundles as B  # noqa: E402
from kda import tune as TU  # noqa: E402


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", flush=True)
        sys.exit(1)


def ok(what):
    print(f"ok   {what}", flush=True)


@contextlib.contextmanager
def restoring_env(name):
    """Environment variable `name` as it was once the block is left."""
    saved = os.environ.get(name)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


def check_refused(name, values, fn):
    """fn() raises a ValueError naming `name` with each of `values` in it."""
    for bad in values:
        os.environ[name] = bad
        try:
            fn()
            check(False, f"{name}={bad} was accepted")
        except ValueError as e:
            check(name in str(e), str(e))


# A kda-compile stand-in: prints its fingerprint, or writes a bundle whose
# manifest records it, the flags it got (argv.json) and a shared-memory size
# that grows with --chunk (so pruning has something to prune).
FAKE = r'''#!/usr/bin/env python3
import json, os, sys
FP = "@FP@"
if "--fingerprint" in sys.argv:
    print(FP)
    sys.exit(0)
args = sys.argv[1:]
out = args[args.index("-o") + 1]
flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
chunk = int(flags.get("chunk", "0") or 0) or 16
if chunk == 64 and os.environ.get("FAKE_REFUSE_64"):
    print("kda-compile: kda_gated_delta_kernel_intra needs 276480 bytes of shared memory; sm_90a gives a block 232448")
    sys.exit(1)
os.makedirs(out, exist_ok=True)
json.dump(sys.argv[1:], open(os.path.join(out, "argv.json"), "w"))
json.dump({"format": "kda-bundle", "version": 1, "compiler_fingerprint": FP,
           "kernels": [{"name": "kda_gated_delta_kernel", "dynamic_shared_memory": chunk * 4096}]},
          open(os.path.join(out, "manifest.json"), "w"))
'''


def fake_compiler(tmp, name, fp):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(FAKE.replace("@FP@", fp))
    os.chmod(path, 0o755)
    return path


def small_cfg(V=64, **kw):
    return B.gated_delta_config(K=64, V=V, qk_dtype="bf16", v_dtype="bf16",
                                gate={"form": "channel", "dtype": "f32"}, beta_dtype="bf16", **kw)


# ---------------------------------------------------------------------------
# Part "unit"
# ---------------------------------------------------------------------------

def part_unit(tmp):
    cfg = small_cfg(V=128)
    # --- the space -----------------------------------------------------------
    check(TU.v_blocks(128) == [16, 32, 64, 128], f"v_blocks(128) {TU.v_blocks(128)}")
    check(TU.v_blocks(96) == [16, 32, 48, 96], f"v_blocks(96) {TU.v_blocks(96)}")
    check(TU.v_blocks(8) == [], "v_blocks(8)")
    space = TU.enumerate_space(cfg)
    check(len(space) == 3 * 4 * 2, f"space size {len(space)}")
    check(all("state_prefetch" not in t for t in space), "no state prefetch choice (one state program)")
    check(all(t["sub_chunk"] == 16 for t in space), "sub_chunk 16")
    staged = TU.enumerate_space(cfg, chunks=[16], vblocks=[32], threads=[128], stages=[2, 3, 9])
    check(staged == [TU.make_tile(16, 32, 128), TU.make_tile(16, 32, 128, state_stages=3)],
          f"stages 2 and 3, 9 dropped: {staged}")
    check({t["chunk"] for t in space} == {16, 32, 64} and {t["threads"] for t in space} == {128, 256},
          "chunks and threads")
    # NVIDIA's lane kernels run chunks 32 and 64 as sub-chunk steps of 16: the same kernels.
    check(TU.default_chunks("sm_90a") == (16,) and TU.default_chunks("sm_80") == (16,)
          and TU.default_chunks("gfx942") == (16, 32, 64), "default chunks per chip")
    narrow = TU.enumerate_space(cfg, chunks=[16, 32, 8], vblocks=[16, 24, 256], threads=[128, 100],
                                stages=[2, 9])
    check(narrow == [TU.make_tile(16, 16, 128), TU.make_tile(32, 16, 128)], f"narrowed space {narrow}")
    for bad, what in ((small_cfg(chunk=32), "fixed chunk"),
                      (B.decode_step_config(K=64, V=64, qk_dtype="bf16", v_dtype="bf16"), "decode")):
        try:
            TU.enumerate_space(bad)
            check(False, f"enumerate_space accepted a {what} configuration")
        except ValueError:
            pass
    ok(f"tile space: {len(space)} candidates for V = 128, narrowed by flags, illegal values dropped")

    # --- pruning -------------------------------------------------------------
    m = {"kernels": [{"dynamic_shared_memory": 100 * 1024}, {"dynamic_shared_memory": 200 * 1024}]}
    check(TU.bundle_shared_memory(m) == 200 * 1024, "bundle smem is the largest kernel's")
    check(TU.prune_reason(m, "sm_90a") is None, "200 KB fits sm_90a (227 KB)")
    check("163" in str(TU.SMEM_LIMITS["sm_80"] // 1024) and TU.prune_reason(m, "sm_80"), "200 KB > sm_80")
    amd = {"kernels": [{"dynamic_shared_memory": 60 * 1024, "resources": {"group_segment_fixed_size": 8192}}]}
    check(TU.prune_reason(amd, "gfx942") and TU.prune_reason({"kernels": [{"dynamic_shared_memory": 60 * 1024}]},
                                                            "gfx942") is None,
          "AMD: static LDS counts towards the 64 KB")
    ok("pruning: sm_80 163 KB, sm_90a 227 KB, AMD 64 KB (dynamic + static LDS)")

    # --- buckets -------------------------------------------------------------
    check(TU.shape_bucket(8192, 1, 32) == "T8192-16383/NHV32-63", TU.shape_bucket(8192, 1, 32))
    check(TU.shape_bucket(8191, 2, 16) == "T4096-8191/NHV32-63", TU.shape_bucket(8191, 2, 16))
    check(TU.shape_bucket(1, 1, 1) == "T1-1/NHV1-1", TU.shape_bucket(1, 1, 1))
    check(TU.shape_bucket(5000, 8, 32) == TU.shape_bucket(4096, 16, 16), "same bucket")
    ok("shape buckets: powers of two of T and of N x HV")

    # --- the shape policy (kda.ops's default tile per shape) ----------------
    kimi = B.gated_delta_config(K=128, V=128, qk_dtype="bf16", v_dtype="bf16",
                                gate={"form": "channel", "dtype": "bf16"}, beta_dtype="bf16",
                                qk_l2norm=True, beta_activation="sigmoid",
                                gate_activation="lower_bound", lower_bound=-5.0,
                                A_log_dtype="f32", dt_bias_dtype="f32", initial_state_dtype="f32",
                                final_state_dtype="f32", state_layout="v_major")
    pol = lambda n, hv, sms=132: TU.shape_policy_tile(kimi, "sm_90a", n, hv, sms)  # noqa: E731
    vb32 = TU.make_tile(16, 32, 128, state_stages=3)
    vb128 = TU.make_tile(16, 128, 128)
    # The derived state program: V blocks of 32 with 3 chunks in flight while (sequence, head)
    # units x 4 blocks fit twice the multiprocessors, V blocks of 128 (2 in flight) past that.
    check(pol(1, 32) == vb32, f"H=32: {pol(1, 32)}")                            # 128 blocks
    check(pol(1, 64) == vb32, f"H=64: {pol(1, 64)}")                            # 256 blocks
    check(pol(1, 16) == vb32, f"T=131072 H=16: {pol(1, 16)}")
    check(pol(1, 96) == vb128, f"H=96: {pol(1, 96)}")                           # 96 blocks of 128
    check(pol(6, 64) == vb128 and pol(8, 32) == vb128, "many sequences: V blocks of 128")
    check(pol(1, 96, sms=264) == vb32, "twice the multiprocessors: V blocks of 32 again")
    check(TU.shape_policy_tile(kimi, "gfx942", 1, 64, 304) is None, "no policy for unmeasured chips")
    check(TU.shape_policy_tile(dict(kimi, qk_dtype="f32", v_dtype="f32"), "sm_90a", 1, 64, 132) is None,
          "fp32 kernels keep the default")
    check(TU.shape_policy_tile(kimi, "sm_90a", 1, 64, 0) is None, "unknown multiprocessor count")
    segs = [TU.make_tile(16, 128, 128, segments=p) for p in TU.SEGMENT_CHOICES]
    check(TU.policy_tiles(kimi, "sm_90a") == [vb32, vb128] + segs, TU.policy_tiles(kimi, "sm_90a"))
    check(TU.policy_tiles(kimi, "sm_80") == [], "policy tiles only where the policy applies")
    # A hybrid layer: the fused schedule's tiles are its gated delta part's; the overlap schedule
    # takes V blocks of 64; the schedule is fused unless KDA_HYBRID_SCHEDULE says otherwise.
    hyb = {"op": "hybrid", "gated_delta": kimi}
    check(TU.policy_tiles(hyb, "sm_90a") == TU.policy_tiles(kimi, "sm_90a"), "hybrid: the part's tiles")
    check(TU.policy_tiles(dict(hyb, schedule="overlap"), "sm_90a") == [TU.hybrid_overlap_tile()],
          "overlap: V blocks of 64")
    # A multi-scale layer: its recurrence's tiles without segments (the layer runs its scales on one
    # V block each, no segmented state pass), and no segment tiles of its own.
    ms = {"op": "multi_scale", "gated_delta": kimi}
    check(TU.policy_tiles(ms, "sm_90a") == [vb32, vb128], f"multi-scale: the part's tiles, no segments "
          f"{TU.policy_tiles(ms, 'sm_90a')}")
    check(TU.segment_tiles(ms, "sm_90a", [4, 8]) == [], "multi-scale: no segment tiles")
    saved = os.environ.pop("KDA_HYBRID_SCHEDULE", None)
    try:
        check(TU.hybrid_schedule("sm_90a", 1, 32, 128, 132) == "fused", "fused by default")
        os.environ["KDA_HYBRID_SCHEDULE"] = "overlap"
        check(TU.hybrid_schedule("sm_90a", 1, 32, 128, 132) == "overlap", "KDA_HYBRID_SCHEDULE=overlap")
        os.environ["KDA_HYBRID_SCHEDULE"] = "both"
        try:
            TU.hybrid_schedule("sm_90a", 1, 32, 128, 132)
            check(False, "KDA_HYBRID_SCHEDULE=both accepted")
        except ValueError as e:
            check("expected fused or overlap" in str(e), str(e))
    finally:
        os.environ.pop("KDA_HYBRID_SCHEDULE", None)
        if saved is not None:
            os.environ["KDA_HYBRID_SCHEDULE"] = saved
    # Chunk-boundary states: V blocks of BOUNDARY_V_BLOCK where the others take 128 (128 spills there).
    kimi_h = dict(kimi, boundary_interval=64)
    vbh = TU.make_tile(16, TU.BOUNDARY_V_BLOCK, 128)
    check(TU.BOUNDARY_V_BLOCK < 128, f"boundary V block {TU.BOUNDARY_V_BLOCK}")
    check(TU.shape_policy_tile(kimi_h, "sm_90a", 6, 64, 132) == vbh, "boundary states, many units")
    check(TU.shape_policy_tile(kimi_h, "sm_90a", 1, 32, 132) == vb32, "boundary states, few units")
    check(TU.policy_tiles(kimi_h, "sm_90a") == [vb32, vbh], TU.policy_tiles(kimi_h, "sm_90a"))
    # The gradient (chunk_kda's backward): its reverse scan takes V blocks of GRAD_WIDE_V_BLOCK where the
    # (sequence, head) units alone fill the multiprocessors, the chip's default (None) below that;
    # KDA_GRAD_V_BLOCK asks for one (0: the default), and prebuild builds both wide tiles.
    grad = B.gated_delta_grad_config(dict(kimi, boundary_interval=16), chunk=16)
    gwide = TU.make_tile(16, TU.GRAD_WIDE_V_BLOCK, 256)
    gpol = lambda n, hv, sms=132: TU.grad_policy_tile(grad, "sm_90a", n, hv, sms)  # noqa: E731
    check(gpol(8, 32) == gwide, f"fwdbwd 8 x 4096 H=32: {gpol(8, 32)}")
    check(gpol(1, 32) is None and gpol(4, 32) is None, "few units: the chip's V block")
    check(gpol(8, 32, sms=264) is None, "twice the multiprocessors: the chip's V block again")
    check(TU.grad_policy_tile(grad, "sm_80", 8, 32, 108) is None, "no gradient policy for unmeasured chips")
    check(TU.grad_policy_tile(grad, "sm_90a", 8, 32, 0) is None, "unknown multiprocessor count")
    check(TU.shape_policy_tile(grad, "sm_90a", 8, 32, 132) is None, "the forward's policy leaves gradients")
    check(TU.grad_policy_tile(kimi, "sm_90a", 8, 32, 132) is None, "the gradient's policy leaves forwards")
    check(TU.policy_tiles(grad, "sm_90a") == [gwide, TU.make_tile(16, 128, 256)], TU.policy_tiles(grad, "sm_90a"))
    check(B.tile_flags(gwide) == ["--chunk=16", "--sub-chunk=16", f"--v-block={TU.GRAD_WIDE_V_BLOCK}",
                                  "--block-threads=256"], B.tile_flags(gwide))
    os.environ["KDA_GRAD_V_BLOCK"] = "128"
    check(gpol(1, 32) == TU.make_tile(16, 128, 256), "KDA_GRAD_V_BLOCK=128")
    os.environ["KDA_GRAD_V_BLOCK"] = "0"
    check(gpol(8, 32) is None, "KDA_GRAD_V_BLOCK=0: the compiled default")
    for bad in ("48", "x"):
        os.environ["KDA_GRAD_V_BLOCK"] = bad
        try:
            gpol(8, 32)
            check(False, f"KDA_GRAD_V_BLOCK={bad} was accepted")
        except ValueError as e:
            check("KDA_GRAD_V_BLOCK" in str(e), str(e))
    del os.environ["KDA_GRAD_V_BLOCK"]
    ok("the gradient's shape policy: the reverse scan's V block by (sequence, head) units")
    # chunk_size=64 (or 32) with sub-chunks of 16 runs the chunk-0 form's kernels on NVIDIA (sub-chunk
    # steps of 16): the same tiles, with the op's chunk stamped on them; elsewhere it keeps its own.
    kimi64 = dict(kimi, chunk=64)
    check(TU.steps_form(kimi64, "sm_90a") == (dict(kimi, chunk=0), 64), "chunk 64's steps form")
    check(TU.steps_form(kimi64, "gfx942") == (kimi64, None), "AMD: no sub-chunk steps")
    check(TU.steps_form(dict(kimi64, sub_chunk=32), "sm_90a")[1] is None, "sub-chunks of 32: its own chunk")
    check(TU.shape_policy_tile(kimi64, "sm_90a", 1, 64, 132) == dict(vb32, chunk=64),
          TU.shape_policy_tile(kimi64, "sm_90a", 1, 64, 132))
    check(TU.policy_tiles(kimi64, "sm_90a") == [dict(vb32, chunk=64), dict(vb128, chunk=64)],
          TU.policy_tiles(kimi64, "sm_90a"))
    check(TU.shape_policy_tile(dict(kimi, chunk=32), "sm_90a", 1, 32, 132) == dict(vb32, chunk=32),
          "H=32 at chunk 32: V blocks of 32")
    # An older database's state_prefetch (the removed split-K state program's) loads, dropped.
    check(B.normalise_tile(dict(vb32, state_prefetch=0)) == vb32 and
          B.normalise_tile(dict(vb32, state_prefetch=1)) == vb32, "state_prefetch is dropped")
    check(not any("prefetch" in f for f in B.tile_flags(dict(vb32, state_prefetch=0))),
          B.tile_flags(dict(vb32, state_prefetch=0)))
    check(B.tile_flags(vb32)[-1] == "--state-stages=3" and
          not any(f.startswith("--state-stages") for f in B.tile_flags(vb128)), B.tile_flags(vb32))
    check(B.normalise_tile(dict(vb128, state_stages=2)) == vb128, "2 stages is the default")
    check(B.config_hash(kimi, "sm_90a", vb32) != B.config_hash(kimi, "sm_90a", TU.make_tile(16, 32, 128)),
          "stages are part of the bundle key")
    check(B.config_hash(kimi, "sm_90a", vb32) == B.config_hash(kimi, "sm_90a", dict(vb32, state_prefetch=0)),
          "state_prefetch is not part of the bundle key")
    try:
        B.normalise_tile(dict(vb32, warps=8))
        check(False, "an unknown tile key was accepted")
    except ValueError:
        pass
    # Segments: none from the policy yet; KDA_SEGMENTS sets the count, and the V block follows the
    # (sequence x segment, head) units; kda.prebuild --segments builds those tiles.
    seg8 = TU.make_tile(16, 128, 128, segments=8)
    seg4 = TU.make_tile(16, 32, 128, state_stages=3, segments=4)
    check(TU.segment_tiles(kimi, "sm_90a", [4, 8]) == [
        TU.make_tile(16, 32, 128, state_stages=3, segments=4), TU.make_tile(16, 128, 128, segments=4),
        TU.make_tile(16, 32, 128, state_stages=3, segments=8), seg8], TU.segment_tiles(kimi, "sm_90a", [4, 8]))
    check(TU.segment_tiles(kimi_h, "sm_90a", [8]) == [], "no segments with boundary states")
    check(TU.segment_tiles(kimi, "sm_80", [8]) == [], "segment tiles only where the policy applies")
    # The policy's segments (measured on the H100, fortieth session): where the programs without them
    # leave a quarter of the chip idle, the largest count whose units are half to twice the
    # multiprocessors, segments of 512 chunks or more; none where the length is unknown.
    spol = lambda n, hv, t, sms=132: TU.shape_policy_tile(kimi, "sm_90a", n, hv, sms, T=t)  # noqa: E731
    seg16 = TU.make_tile(16, 128, 128, segments=16)
    check(pol(1, 16) == vb32 and "segments" not in pol(1, 16), "no length: no segments")
    check(spol(1, 16, 131072) == seg16, f"T=131072 H=16: {spol(1, 16, 131072)}")
    check(spol(1, 16, 65536) == seg8, f"T=65536 H=16: {spol(1, 16, 65536)}")
    check(spol(1, 8, 262144) == seg16, f"T=262144 H=8: {spol(1, 8, 262144)}")
    check(spol(1, 16, 32768) == vb32, f"T=32768 H=16: segments of 512 chunks would be 4 (64 units): {spol(1, 16, 32768)}")
    check(spol(1, 32, 131072) == vb32, f"H=32 fills the chip (128 programs): {spol(1, 32, 131072)}")
    check(spol(2, 16, 131072) == vb32, "two sequences of H=16 fill it too")
    check(spol(1, 2, 1 << 20) == vb32, f"H=2: 16 segments are 32 units, under half the chip: {spol(1, 2, 1 << 20)}")
    check(spol(1, 16, 131072, sms=264) == seg16 and spol(1, 16, 131072, sms=64) == vb32,
          (spol(1, 16, 131072, sms=264), spol(1, 16, 131072, sms=64)))
    check(TU.shape_policy_tile(kimi_h, "sm_90a", 1, 16, 132, T=131072) == vb32, "boundary states: no segments")
    check(TU.shape_policy_tile(dict(kimi, chunk=64), "sm_90a", 1, 16, 132, T=131072) == dict(vb32, chunk=64),
          "sub-chunk steps: no segments from the policy")
    with restoring_env("KDA_SEGMENTS"):
        os.environ["KDA_SEGMENTS"] = "8"
        check(pol(1, 16) == seg8, f"KDA_SEGMENTS=8, H=16: 128 units, V blocks of 128: {pol(1, 16)}")
        check(TU.shape_policy_tile(kimi_h, "sm_90a", 1, 16, 132) == vb32, "boundary states: no segments")
        os.environ["KDA_SEGMENTS"] = "4"
        check(pol(1, 16) == seg4, f"KDA_SEGMENTS=4, H=16: 64 units, V blocks of 32: {pol(1, 16)}")
        check_refused("KDA_SEGMENTS", ("0", "65", "many"), lambda: pol(1, 16))
    check(B.tile_flags(seg8)[-1] == "--segments=8" and B.normalise_tile(dict(vb128, segments=1)) == vb128,
          B.tile_flags(seg8))
    check(B.config_hash(kimi, "sm_90a", seg8) != B.config_hash(kimi, "sm_90a", vb128),
          "segments are part of the bundle key")
    ok("shape policy: V blocks of 32 (3 stages) / 128 by (sequence, head) units per multiprocessor")
    # Pipelined pieces (forty-fourth session): one dense sequence whose state kernel at V blocks of 64
    # leaves half the chip or more, 8192 tokens or more, no segments; 4 pieces under 16384 tokens, 8 past.
    pp = lambda n, hv, t, sms=132, dense=True, c=kimi: TU.shape_policy_pieces(  # noqa: E731
        c, "sm_90a", n, hv, sms, t, dense)
    check(TU.PIECES_POLICY, "the policy chooses pieces")
    check(pp(1, 32, 32768) == 8 and pp(1, 32, 8192) == 4 and pp(1, 32, 16384) == 8,
          (pp(1, 32, 32768), pp(1, 32, 8192), pp(1, 32, 16384)))
    check(pp(1, 32, 4096) == 1, "short sequences: one piece")
    check(pp(2, 32, 32768) == 1 and pp(1, 32, 32768, dense=False) == 1, "batches and varlen: one piece")
    check(pp(1, 64, 32768) == 1, "H=64: the state kernel's 128 blocks take the chip")
    check(pp(1, 16, 131072) == 1, "T=131072 H=16 takes segments, not pieces")
    check(pp(1, 32, 32768, sms=64) == 1 and pp(1, 32, 32768, sms=0) == 1, "a small or unknown chip: none")
    check(pp(1, 32, 32768, c=kimi_h) == 1, "boundary states: one piece")
    check(TU.shape_policy_pieces(kimi, "sm_80", 1, 32, 132, 32768, True) == 1, "only where the policy applies")
    check(TU.pieces_config(kimi)["initial_state_dtype"] == "f32"
          and TU.pieces_config(kimi)["final_state_dtype"] == "f32", TU.pieces_config(kimi))
    check(TU.pieces_tile() == TU.make_tile(16, 64, 128, state_stages=3), TU.pieces_tile())
    check(B.tile_flags(TU.pieces_tile()) and B.normalise_tile(TU.pieces_tile()) == TU.pieces_tile(),
          "the pieces' tile is an ordinary bundle tile")
    with restoring_env("KDA_PIECES"):
        os.environ["KDA_PIECES"] = "2"
        check(pp(1, 32, 32768) == 2 and pp(1, 64, 4096) == 2, "KDA_PIECES=2 wherever pieces apply")
        check(pp(1, 32, 32, dense=True) == 2 and pp(1, 32, 16) == 1, "never more pieces than chunks")
        check(pp(2, 32, 32768) == 1 and pp(1, 32, 32768, c=kimi_h) == 1, "not where they do not apply")
        check_refused("KDA_PIECES", ("0", "65", "x"), lambda: pp(1, 32, 32768))
    TU.PIECES_POLICY = False
    check(pp(1, 32, 32768) == 1, "PIECES_POLICY off: one piece")
    TU.PIECES_POLICY = True
    ok("pipelined pieces: one dense sequence, 4 or 8 pieces by length, KDA_PIECES")
    # A hybrid layer's pieces (fifty-first session): chunk_kda's for its gated delta part, with the
    # fused schedule; KDA_HYBRID_PIECES to choose.
    layer = B.hybrid_config(gated_delta=dict(kimi, initial_state_dtype=None, final_state_dtype=None), window=512,
                            mix="sum")
    hp = lambda n, hv, t, dense=True, sched="fused": TU.hybrid_pieces(  # noqa: E731
        layer, "sm_90a", n, hv, 132, t, dense, sched)
    check(TU.HYBRID_PIECES_POLICY, "on (fifty-second session: 0.91 of one piece on the H100)")
    TU.HYBRID_PIECES_POLICY = False
    check(hp(1, 32, 8192) == 1 and hp(1, 32, 32768) == 1, "HYBRID_PIECES_POLICY off: one piece")
    TU.HYBRID_PIECES_POLICY = True
    check(hp(1, 32, 8192) == 4 and hp(1, 32, 32768) == 8, (hp(1, 32, 8192), hp(1, 32, 32768)))
    check(hp(1, 32, 4096) == 1 and hp(2, 32, 8192) == 1 and hp(1, 32, 8192, dense=False) == 1
          and hp(1, 64, 8192) == 1, "short, batched, varlen or wide layers: one piece")
    check(hp(1, 32, 8192, sched="overlap") == 1, "the overlap schedule: one piece")
    pc = TU.hybrid_pieces_config(layer)
    check(pc["schedule"] == "pieces" and pc["gated_delta"]["initial_state_dtype"] == "f32"
          and pc["gated_delta"]["final_state_dtype"] == "f32" and "schedule" not in layer, pc)
    B.validate(pc)
    with restoring_env("KDA_HYBRID_PIECES"):
        os.environ["KDA_HYBRID_PIECES"] = "3"
        check(hp(1, 64, 1000) == 3 and hp(1, 32, 16) == 1, "KDA_HYBRID_PIECES=3 (never more than chunks)")
        check(hp(1, 32, 8192, dense=False) == 1, "not for varlen")
        os.environ["KDA_HYBRID_PIECES"] = "1"
        check(hp(1, 32, 32768) == 1, "KDA_HYBRID_PIECES=1: none")
        check_refused("KDA_HYBRID_PIECES", ("0", "65", "x"), lambda: hp(1, 32, 8192))
    ok("hybrid pieces: chunk_kda's for the layer's gated delta part, KDA_HYBRID_PIECES")

    # --- the database --------------------------------------------------------
    fa, fb = "kda-aaaaaaaaaaaaaaaa-llvm22.1.0", "kda-bbbbbbbbbbbbbbbb-llvm22.1.0"
    t16, t32, t32w = TU.make_tile(16, 16, 128), TU.make_tile(32, 32, 128), TU.make_tile(16, 32, 256)
    shape = {"T": 8192, "N": 1, "H": 32, "HV": 32}
    db = TU.TuningDB()
    k1 = db.add(cfg, "sm_90a", fa, shape, [
        {"tile": t16, "status": "ok", "median_ms": 2.7, "measured": "2026-12-01T01:00:00Z"},
        {"tile": t32, "status": "ok", "median_ms": 2.5, "measured": "2026-12-01T01:00:00Z"},
        {"tile": t32w, "status": "wrong", "median_ms": None, "measured": "2026-12-01T01:00:00Z"}])
    check(db.entries[k1]["winner"]["tile"] == t32, "winner is the fastest correct candidate")
    check(db.lookup(cfg, "sm_90a", fa, 9000, 1, 32) == t32, "lookup in the bucket")
    check(db.lookup(cfg, "sm_90a", fa, 100, 1, 32) is None, "no entry for another bucket")
    check(db.lookup(cfg, "sm_80", fa, 8192, 1, 32) is None, "no entry for another chip")
    check(db.lookup(small_cfg(V=64), "sm_90a", fa, 8192, 1, 32) is None, "no entry for another configuration")
    check(db.lookup(cfg, "sm_90a", fb, 8192, 1, 32) is None, "another compiler fingerprint is ignored")
    check(db.lookup(cfg, "sm_90a", None, 8192, 1, 32) == t32, "unknown fingerprint: any compiler's entry")
    # merge: measurements are kept shape by shape (a newer one of a tile and shape replaces the
    # older); the winner must be measured on every shape of its bucket (sum of medians) and no
    # slower than each shape's baseline (here the chip default, t16)
    other = TU.TuningDB()
    other.add(cfg, "sm_90a", fa, {"T": 16000, "N": 1, "H": 32, "HV": 32}, [
        {"tile": t32, "status": "ok", "median_ms": 3.0, "measured": "2026-12-01T02:00:00Z"}])
    k2 = other.add(cfg, "sm_90a", fb, shape, [
        {"tile": t16, "status": "ok", "median_ms": 2.0, "measured": "2026-12-01T03:00:00Z"}])
    db.merge(other)
    e = db.entries[k1]
    check(e["winner"] == {"tile": t32, "median_ms": 5.5} and len(e["candidates"]) == 3
          and len(e["shapes"]) == 2, f"merged entry {e['winner']} {len(e['candidates'])} {e['shapes']}")
    db.add(cfg, "sm_90a", fa, {"T": 16000, "N": 1, "H": 32, "HV": 32}, [
        {"tile": t16, "status": "ok", "median_ms": 2.0, "measured": "2026-12-01T02:30:00Z"}])
    e = db.entries[k1]
    check(e["winner"] == {"tile": t16, "median_ms": 4.7}, f"t16 on both shapes wins: {e['winner']}")
    check(db.lookup(cfg, "sm_90a", fa, 8192, 1, 32) == t16, "merge recomputes the winner")
    # The never-slower rule: shapes of one bucket whose baselines (the shape policy's tiles on a
    # 132-multiprocessor chip: V blocks of 32 for 64 heads, 128 for 96) differ,
    # and no tile as fast as each baseline on its shape: no winner, the lookup keeps the default.
    pcfg = B.gated_delta_config(K=128, V=128, qk_dtype="bf16", v_dtype="bf16",
                                gate={"form": "channel", "dtype": "bf16"}, beta_dtype="bf16")
    vb32, vb128 = TU.make_tile(16, 32, 128, state_stages=3), TU.make_tile(16, 128, 128)
    pdb = TU.TuningDB()
    kp = pdb.add(pcfg, "sm_90a", fa, {"T": 8192, "N": 1, "H": 64, "HV": 64}, [
        {"tile": vb32, "status": "ok", "median_ms": 1.50}, {"tile": vb128, "status": "ok", "median_ms": 1.75}],
        multiprocessors=132)
    check(pdb.entries[kp]["winner"]["tile"] == vb32, "one shape: its baseline (the policy's tile) wins")
    pdb.add(pcfg, "sm_90a", fa, {"T": 8192, "N": 1, "H": 96, "HV": 96}, [
        {"tile": vb32, "status": "ok", "median_ms": 2.70}, {"tile": vb128, "status": "ok", "median_ms": 2.15}],
        multiprocessors=132)
    check(pdb.entries[kp]["baselines"] == {"T=8192,N=1,H=64,HV=64": vb32, "T=8192,N=1,H=96,HV=96": vb128}
          and pdb.entries[kp]["winner"] is None
          and pdb.lookup(pcfg, "sm_90a", fa, 8192, 1, 64) is None, f"no winner: {pdb.entries[kp]['winner']}")
    check(db.lookup(cfg, "sm_90a", fb, 8192, 1, 32) == t16 and k2 in db.entries, "compiler B's entry merged")
    check(db.lookup_entry(cfg, "sm_90a", None, 8192, 1, 32)["compiler_fingerprint"] == fb,
          "unknown fingerprint: the entry measured last")
    path = os.path.join(tmp, "db.json")
    db.save(path)
    again = TU.TuningDB.load(path)
    check(again.entries == db.entries, "save / load round trip")
    n = again.export(os.path.join(tmp, "db-b.json"), chip="sm_90a", fingerprint=fb)
    check(n == 1 and list(TU.TuningDB.load(os.path.join(tmp, "db-b.json")).entries) == [k2], "export one compiler")
    fresh = TU.TuningDB()
    check(fresh.import_(path) == 2 and fresh.entries == db.entries, "import")
    check(TU.TuningDB.load(os.path.join(tmp, "nope.json")).entries == {}, "a missing database is empty")
    with open(os.path.join(tmp, "bad.json"), "w") as f:
        json.dump({"format": "kda-tuning-db", "version": 9, "entries": {}}, f)
    try:
        TU.TuningDB.load(os.path.join(tmp, "bad.json"))
        check(False, "a version 9 database loaded")
    except ValueError as ex:
        check("version 9" in str(ex), str(ex))
    ok("tuning database: add, merge, save / load, export / import, lookup by bucket, chip, configuration; "
       "other fingerprints ignored")

    # --- fingerprints in the bundle cache key ------------------------------------
    env = dict(os.environ)
    try:
        for var in ("KDA_COMPILER_FINGERPRINT", "KDA_NO_COMPILE", "KDA_TUNING_DB"):
            os.environ.pop(var, None)
        cache = os.path.join(tmp, "cache")
        os.environ["KDA_BUNDLE_PATH"] = cache
        os.environ["KDA_CACHE_DIR"] = os.path.join(tmp, "cache-default")
        ca = fake_compiler(tmp, "kda-compile-a", fa)
        cb = fake_compiler(tmp, "kda-compile-b", fb)
        check(B.compiler_fingerprint(ca) == fa and B.compiler_fingerprint(cb) == fb, "fingerprints read")
        os.environ["KDA_COMPILE"] = ca
        check(B.current_fingerprint() == fa, "current fingerprint: KDA_COMPILE's")
        pa = B.get_bundle_dir(cfg, "sm_90a")
        check(os.path.basename(pa) == B.bundle_name(cfg, "sm_90a", fingerprint=fa)
              and B.fingerprint_tag(fa) in pa, f"bundle named after compiler A: {pa}")
        with open(os.path.join(pa, "config.json")) as f:
            check(json.load(f)["compiler_fingerprint"] == fa, "config.json records the fingerprint")
        check(B.get_bundle_dir(cfg, "sm_90a") == pa, "compiler A finds its bundle again")
        time.sleep(0.02)
        os.environ["KDA_COMPILE"] = cb
        pb = B.get_bundle_dir(cfg, "sm_90a")
        check(pb != pa and B.fingerprint_tag(fb) in pb, f"compiler B does not reuse A's bundle: {pb}")
        with open(os.path.join(pb, "manifest.json")) as f:
            check(json.load(f)["compiler_fingerprint"] == fb, "B's manifest")
        # The same path rewritten (a rebuilt compiler): asked again, new bundle.
        time.sleep(0.02)
        fc = "kda-cccccccccccccccc-llvm22.1.0"
        fake_compiler(tmp, "kda-compile-b", fc)
        pc = B.get_bundle_dir(cfg, "sm_90a")
        check(pc not in (pa, pb) and B.fingerprint_tag(fc) in pc, "a rebuilt compiler at the same path: new bundle")
        # No compiler here: the newest bundle of the configuration, whoever built it.
        os.environ["KDA_NO_COMPILE"] = "1"
        check(B.current_fingerprint() is None, "KDA_NO_COMPILE: unknown fingerprint")
        check(B.get_bundle_dir(cfg, "sm_90a") == pc, "unknown fingerprint: the newest bundle")
        os.environ["KDA_COMPILER_FINGERPRINT"] = fa
        check(B.get_bundle_dir(cfg, "sm_90a") == pa, "KDA_COMPILER_FINGERPRINT pins compiler A's bundle")
        del os.environ["KDA_COMPILER_FINGERPRINT"]
        # A directory kda.prebuild filled names its compiler: without a compiler here, that one's
        # bundles (and tuning entries) are used, not another compiler's newer ones.
        with open(os.path.join(cache, "prebuild-report.json"), "w") as f:
            json.dump({"compiler_fingerprint": fa, "results": []}, f)
        B._prebuilt.clear()
        check(B.current_fingerprint() == fa, "KDA_NO_COMPILE: the prebuild report's compiler")
        check(B.get_bundle_dir(cfg, "sm_90a") == pa, "the prebuild report pins compiler A's bundle")
        os.remove(os.path.join(cache, "prebuild-report.json"))
        B._prebuilt.clear()
        del os.environ["KDA_NO_COMPILE"]
        ok("fingerprint in the cache key: compilers A, B and a rebuilt B build three bundles; "
           "without a compiler the newest (or the pinned, or the prebuilt) one is used")

        # A tuned tile: its own bundle, built with kda-compile's flags.
        os.environ["KDA_COMPILE"] = ca
        tile = TU.make_tile(32, 32, 256)
        pt = B.get_bundle_dir(cfg, "sm_90a", tile=tile)
        check(pt != pa, "a tuned tile has its own bundle")
        with open(os.path.join(pt, "argv.json")) as f:
            argv = json.load(f)
        check(all(f in argv for f in ("--chunk=32", "--sub-chunk=16", "--v-block=32", "--block-threads=256")),
              f"tile flags {argv}")
        with open(os.path.join(pa, "argv.json")) as f:
            check(not any(a.startswith("--chunk") for a in json.load(f)), "default bundles get no tile flags")
        try:
            # a tile of another chunk than the configuration's own (its chunk and sub-chunk it
            # may carry: kda.tune.steps_form)
            B.compile_bundle(small_cfg(chunk=64), "sm_90a", tile=tile)
            check(False, "a tile for a configuration with another chunk was accepted")
        except ValueError:
            pass
        ok("tuned tile: own bundle, passed as --chunk/--sub-chunk/--v-block/--block-threads")

        # kda.ops' lookup: KDA_TUNING_DB, this compiler's entries only.
        tdb = TU.TuningDB()
        tdb.add(cfg, "sm_90a", fa, shape, [{"tile": tile, "status": "ok", "median_ms": 1.0}])
        tdb.save(os.path.join(tmp, "tuning.json"))
        os.environ["KDA_TUNING_DB"] = os.path.join(tmp, "tuning.json")
        check(TU.tuned_tile(cfg, "sm_90a", 8192, 1, 32) == tile, "tuned_tile with compiler A")
        check(TU.tuned_tile(small_cfg(V=128, chunk=16), "sm_90a", 8192, 1, 32) is None,
              "a caller's chunk is kept")
        os.environ["KDA_COMPILE"] = cb
        check(TU.tuned_tile(cfg, "sm_90a", 8192, 1, 32) is None, "tuned_tile: compiler B ignores A's entry")
        os.environ["KDA_TUNING_DB"] = ""
        os.environ["KDA_COMPILE"] = ca
        check(TU.tuned_tile(cfg, "sm_90a", 8192, 1, 32) is None, "KDA_TUNING_DB empty: tuning off")
        ok("kda.ops lookup (tune.tuned_tile): KDA_TUNING_DB, current compiler only")

        # Without KDA_TUNING_DB: the user's database, then the package's; the first with an entry
        # wins, and the package's serves what the user's lacks (kda.prebuild builds both's tiles).
        del os.environ["KDA_TUNING_DB"]
        saved_home, saved_packaged = os.environ.get("HOME"), TU.PACKAGED_DB
        try:
            os.environ["HOME"] = os.path.join(tmp, "home")
            os.makedirs(os.path.join(tmp, "home", ".cache", "kda"))
            user_db = os.path.join(tmp, "home", ".cache", "kda", "tuning.json")
            TU.PACKAGED_DB = os.path.join(tmp, "packaged.json")
            check(TU.db_paths() == [], f"no databases: {TU.db_paths()}")
            tdb.save(TU.PACKAGED_DB)
            check(TU.db_paths() == [TU.PACKAGED_DB] and TU.tuned_tile(cfg, "sm_90a", 8192, 1, 32) == tile,
                  "the package's database alone")
            other = TU.make_tile(32, 64, 256, state_stages=4)
            udb = TU.TuningDB()
            udb.add(cfg, "sm_90a", fa, dict(shape, T=100), [{"tile": other, "status": "ok", "median_ms": 1.0}])
            udb.save(user_db)
            check(TU.db_paths() == [user_db, TU.PACKAGED_DB], f"order {TU.db_paths()}")
            check(TU.tuned_tile(cfg, "sm_90a", 100, 1, 32) == other
                  and TU.tuned_tile(cfg, "sm_90a", 8192, 1, 32) == tile, "first database with an entry wins")
            check(TU.db_tiles(cfg, "sm_90a") == [B.normalise_tile(other), B.normalise_tile(tile)],
                  f"db_tiles {TU.db_tiles(cfg, 'sm_90a')}")
        finally:
            TU.PACKAGED_DB = saved_packaged
            if saved_home is None:
                os.environ.pop("HOME", None)
            else:
                os.environ["HOME"] = saved_home
            os.environ["KDA_TUNING_DB"] = ""
        ok("databases consulted: the user's, then the package's (first entry wins)")

        # Old compilers, and pruning in kda-tune compile.
        old = os.path.join(tmp, "kda-compile-old")
        with open(old, "w") as f:
            f.write("#!/bin/sh\necho 'kda-compile: Unknown command line argument --fingerprint' >&2\nexit 1\n")
        os.chmod(old, 0o755)
        try:
            B.compile_bundle(cfg, "sm_90a", out_root=os.path.join(tmp, "old"), compiler=old)
            check(False, "a compiler without --fingerprint was used")
        except B.CompileError as ex:
            check("--fingerprint" in str(ex) and "too old" in str(ex), str(ex))
        ok("a kda-compile without --fingerprint is refused (CompileError)")
    finally:
        os.environ.clear()
        os.environ.update(env)

    tool = os.path.join(ROOT, "tools", "kda-tune", "kda-tune")
    cfg_file = os.path.join(tmp, "cfg.json")
    with open(cfg_file, "w") as f:
        json.dump(small_cfg(V=64), f)
    plan = os.path.join(tmp, "plan-fake")
    # chunk 16: 64 KB (fits); chunk 32: 128 KB (manifest over sm_80's 163? no: fits);
    # chunk 64: refused by the "compiler" (shared memory) -> pruned. (NVIDIA plans time chunk 16
    # only unless --chunks says otherwise.)
    proc = subprocess.run([sys.executable, tool, "compile", "--chip", "sm_80", "--config", cfg_file,
                           "--chunks", "16,32,64",
                           "--kda-compile", ca, "--out", plan, "--threads", "128", "--v-blocks", "64",
                           "--shape", "T=64,N=1,H=2", "--jobs", "2"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, FAKE_REFUSE_64="1"))
    check(proc.returncode == 0, f"kda-tune compile with a fake compiler:\n{proc.stdout}")
    with open(os.path.join(plan, "plan.json")) as f:
        p = json.load(f)
    st = {(c["tile"]["chunk"], c["tile"]["v_block"]): c["status"] for c in p["configs"][0]["candidates"]}
    check(st == {(16, 16): "ok", (16, 64): "ok", (32, 64): "ok", (64, 64): "pruned"}, f"statuses {st}")
    check(p["compiler_fingerprint"] == fa, "plan records the fingerprint")
    # The manifest check: the same bundles on AMD (64 KB) prune chunk 32 (128 KB) and chunk 16 (64 KB fits).
    plan2 = os.path.join(tmp, "plan-amd")
    proc = subprocess.run([sys.executable, tool, "compile", "--chip", "gfx942", "--config", cfg_file,
                           "--kda-compile", ca, "--out", plan2, "--threads", "128", "--v-blocks", "64",
                           "--chunks", "16,32", "--shape", "T=64,N=1,H=2"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(os.path.join(plan2, "plan.json")) as f:
        p2 = json.load(f)
    st2 = {(c["tile"]["chunk"], c["tile"]["v_block"]): c["status"] for c in p2["configs"][0]["candidates"]}
    check(proc.returncode == 0 and st2 == {(16, 16): "ok", (16, 64): "ok", (32, 64): "pruned"},
          f"manifest pruning on gfx942: {st2}\n{proc.stdout}")
    ok("kda-tune compile prunes what kda-compile refuses and what the manifest says exceeds the chip")


# ---------------------------------------------------------------------------
# Part "flow"
# ---------------------------------------------------------------------------

def run(cmd, env=None, expect_fail=False):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if expect_fail:
        check(proc.returncode != 0, f"{' '.join(cmd)} succeeded:\n{proc.stdout}")
    else:
        check(proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}")
    return proc.stdout


def part_flow(kda_tune, kda_compile, runtime, tmp):
    env = dict(os.environ, KDA_RUNTIME_LIBRARY=runtime, KDA_COMPILE=kda_compile)
    env.pop("KDA_NO_COMPILE", None)
    fp = run([kda_compile, "--fingerprint"]).strip()
    check(fp == run([kda_compile, "--fingerprint"]).strip() and fp.startswith("kda-"), f"fingerprint {fp!r}")
    cfg = B.gated_delta_config(K=32, V=32, qk_dtype="f32", v_dtype="f32",
                               gate={"form": "head", "dtype": "f32"}, beta_dtype="f32")
    cfg_file = os.path.join(tmp, "tiny.json")
    with open(cfg_file, "w") as f:
        json.dump(cfg, f)
    plan = os.path.join(tmp, "plan")
    # V blocks of 32: the configuration is fp32, whose default V block is the
    # chip table's fp32 one (32, all of V here), kda-tune's reference tile.
    out = run([kda_tune, "compile", "--chip", "sm_90a", "--config", cfg_file, "--out", plan,
               "--chunks", "16,32", "--v-blocks", "32", "--threads", "128",
               "--jobs", "2", "--shape", "T=256,N=2,H=2", "--shape", "T=4096,N=1,H=4"], env)
    with open(os.path.join(plan, "plan.json")) as f:
        p = json.load(f)
    cands = p["configs"][0]["candidates"]
    check([c["status"] for c in cands] == ["ok", "ok"] and p["compiler_fingerprint"] == fp, out)
    for c in cands:
        with open(os.path.join(plan, c["bundle"], "manifest.json")) as f:
            m = json.load(f)
        check(m["compiler_fingerprint"] == fp, "the manifest records kda-compile's fingerprint")
        tiles = {k["tile"]["chunk"] for k in m["kernels"]}
        check(tiles == {c["tile"]["chunk"]}, f"bundle built with chunk {c['tile']['chunk']}: {tiles}")
    ok(f"kda-tune compile: 2 real candidates (chunk 16, 32) for {B.describe(cfg)}")
    out = run([kda_tune, "time", plan, "--fake-timer", "--check-bundles", "--reps", "5"], env)
    check(out.count(" ok ") == 4, f"4 fake measurements:\n{out}")
    ok("kda-tune time --fake-timer: every candidate loaded by libkda_runtime, 2 shapes x 2 candidates")
    db = os.path.join(tmp, "tuning.json")
    try:
        subprocess.run([kda_tune, "pick", plan, "--db", db], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env)
        check(False, "pick stored fake measurements without --allow-fake")
    except subprocess.CalledProcessError:
        pass
    out = run([kda_tune, "pick", plan, "--db", db, "--allow-fake"], env)
    print("\n".join("     | " + line for line in out.splitlines()))
    check("C=32 vb=32 thr=128" in out and "speedup" in out, "summary table names the winner")
    tdb = TU.TuningDB.load(db)
    check(len(tdb.entries) == 2, f"{len(tdb.entries)} entries")
    check(tdb.lookup(cfg, "sm_90a", fp, 256, 2, 2) == TU.make_tile(32, 32, 128), "winner: chunk 32 (fake timer)")
    check(tdb.lookup(cfg, "sm_90a", "kda-0000000000000000-llvm22.1.0", 256, 2, 2) is None,
          "another compiler's fingerprint finds nothing")
    # The package uses it: the tuned bundle is the plan's (same name, same compiler).
    saved = dict(os.environ)
    try:
        os.environ.update(KDA_TUNING_DB=db, KDA_COMPILE=kda_compile,
                          KDA_BUNDLE_PATH=os.path.join(plan, "bundles"), KDA_CACHE_DIR=os.path.join(tmp, "c"))
        tile = TU.tuned_tile(cfg, "sm_90a", 4096, 1, 4)
        check(tile == TU.make_tile(32, 32, 128), f"tuned_tile {tile}")
        path = B.find_bundle(cfg, "sm_90a", tile)
        check(path is not None and os.path.dirname(path) == os.path.join(plan, "bundles"),
              f"the plan's bundle is the cache's: {path}")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    # kda-compile reads the same database: the module's tile for a bucket.
    src = os.path.join(plan, cands[0]["bundle"], "source.mlir")
    out = run([kda_compile, src, "-o", os.path.join(tmp, "tuned"), "--chip=sm_90a", f"--tuning-db={db}",
               "--tuning-shape=300,2,2"], env)
    with open(os.path.join(tmp, "tuned", "manifest.json")) as f:
        chunks = {k["tile"]["chunk"] for k in json.load(f)["kernels"]}
    check("tuned tile for bucket T256-511/NHV4-7: chunk=32" in out and chunks == {32}, f"{out} {chunks}")
    out = run([kda_compile, src, "-o", os.path.join(tmp, "untuned"), "--chip=sm_90a", f"--tuning-db={db}",
               "--tuning-shape=20,2,2"], env)
    with open(os.path.join(tmp, "untuned", "manifest.json")) as f:
        chunks = {k["tile"]["chunk"] for k in json.load(f)["kernels"]}
    check("no tuned tile" in out and chunks == {16}, f"{out} {chunks}")
    with open(db) as f:
        other = json.load(f)
    for e in other["entries"].values():
        e["compiler_fingerprint"] = "kda-0000000000000000-llvm22.1.0"
    with open(os.path.join(tmp, "other.json"), "w") as f:
        json.dump(other, f)
    out = run([kda_compile, src, "-o", os.path.join(tmp, "other"), "--chip=sm_90a",
               f"--tuning-db={os.path.join(tmp, 'other.json')}", "--tuning-shape=300,2,2"], env)
    check("no tuned tile" in out, out)
    ok("kda-compile --tuning-db: the winner for the bucket, defaults elsewhere and for another compiler")
    out = run([kda_tune, "db", "show", "--db", db, "--fingerprint", fp], env)
    check(out.count("T") >= 2, out)
    ok("kda-tune pick: database winner chunk 32, lookup by the package, other fingerprints ignored")
    # The plot: a PNG (signature, IHDR of the size kda-tune reports, RGB), the winner's bar green.
    png = os.path.join(tmp, "tuning.png")
    out = run([kda_tune, "plot", "--db", db, "-o", png], env)
    import struct
    import zlib
    with open(png, "rb") as f:
        data = f.read()
    w, h, depth, kind = struct.unpack(">IIBB", data[16:26])
    check(data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and depth == 8 and kind == 2
          and f"{w} x {h} pixels" in out, f"plot: {out} {data[:26]!r}")
    idat = b""
    at = 8
    while at < len(data):
        n = struct.unpack(">I", data[at:at + 4])[0]
        if data[at + 4:at + 8] == b"IDAT":
            idat += data[at + 8:at + 8 + n]
        at += 12 + n
    raw = zlib.decompress(idat)
    check(len(raw) == h * (1 + 3 * w) and bytes((40, 160, 60)) * 4 in raw, "plot: pixels, a green (winner) bar")
    bad = run([kda_tune, "plot", "--db", db, "-o", png, "--chip", "gfx942"], env, expect_fail=True)
    check("no entries for chip gfx942" in bad, bad)
    ok("kda-tune plot: a PNG of every candidate per bucket, the winner marked")
    # rekey: the plan and its entries as another compiler's (a changed source,
    # the same code): every candidate compiles again to the same kernels, so
    # the entries carry over to this compiler; a plan whose bundle differs by
    # one byte keeps them for re-tuning.
    old_fp = "kda-00000000000000aa-llvm22.1.0"
    with open(os.path.join(plan, "plan.json")) as f:
        pj = json.load(f)
    pj["compiler_fingerprint"] = old_fp
    with open(os.path.join(plan, "plan.json"), "w") as f:
        json.dump(pj, f)
    old_db = TU.TuningDB({k.replace(f"|{fp}|", f"|{old_fp}|"): dict(v, compiler_fingerprint=old_fp)
                          for k, v in tdb.entries.items()})
    db_old = os.path.join(tmp, "tuning-old.json")
    old_db.save(db_old)
    out = run([kda_tune, "rekey", plan, "--db", db_old, "--jobs", "2"], env)
    carried = TU.TuningDB.load(db_old)
    check(all(e["compiler_fingerprint"] == k.split("|")[2] for k, e in carried.entries.items()),
          "an entry's fingerprint is its key's")
    check("2 entries carried" in out and len(carried.entries) == 4
          and carried.lookup(cfg, "sm_90a", fp, 256, 2, 2) == TU.make_tile(32, 32, 128), out)
    cubin = sorted(n for n in os.listdir(os.path.join(plan, cands[1]["bundle"])) if n.endswith(".cubin"))[0]
    with open(os.path.join(plan, cands[1]["bundle"], cubin), "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 1]))
    with open(os.path.join(plan, "plan.json")) as f:
        check(json.load(f)["compiler_fingerprint"] == fp, "the carried plan names this compiler")
    with open(os.path.join(plan, "plan.json"), "w") as f:
        json.dump(pj, f)
    old_db.save(db_old)
    bad = run([kda_tune, "rekey", plan, "--db", db_old, "--jobs", "2"], env, expect_fail=True)
    check("1 of 2 candidates changed" in bad and f"{cubin} differs" in bad
          and TU.TuningDB.load(db_old).lookup(cfg, "sm_90a", fp, 256, 2, 2) is None, bad)
    ok("kda-tune rekey: entries carried where the code is the same, left where one cubin differs")
    # --drop-changed: entries whose winner and baselines are the same code
    # carry without the changed candidate; one whose winner changed stays.
    with open(os.path.join(plan, "plan.json"), "w") as f:
        json.dump(pj, f)
    old_db.save(db_old)
    changed = TU._tile_id(cands[1]["tile"])
    used = {TU._tile_id(t) for e in old_db.entries.values()
            for t in [(e.get("winner") or {}).get("tile")] + list((e.get("baselines") or {}).values()) if t}
    part = run([kda_tune, "rekey", plan, "--db", db_old, "--jobs", "2", "--drop-changed"], env,
               expect_fail=changed in used)
    after = TU.TuningDB.load(db_old)
    if changed in used:
        check("1 of 2 candidates changed" in part and after.lookup(cfg, "sm_90a", fp, 256, 2, 2) is None, part)
    else:
        kept = [e for k, e in after.entries.items() if k.split("|")[2] == fp]
        check("1 changed and dropped" in part and kept
              and all(changed not in {TU._tile_id(c["tile"]) for c in e["candidates"]}
                      and e["dropped_candidates"] == [changed] for e in kept), part)
    ok("kda-tune rekey --drop-changed: a changed candidate dropped where the winner and baselines are not it")


def part_packaged(kda_tune, kda_compile, tmp):
    """The package's database (python/kda/tuning.json): well formed, covering
    bench/BENCH.md's configuration (kda-tune's presets kimi and kimi-varlen)
    on sm_90a in the buckets of its cases, every winner no slower than its
    shapes' baselines; and where it was tuned with this very compiler (the
    fingerprint is a hash of the compiler's sources), kda-compile
    --tuning-shape and kda.ops pick its tiles up with no database named."""
    src = open(kda_tune).read().replace("@KDA_PYTHON_DIR@", os.path.join(ROOT, "python"))
    kt = {"__file__": kda_tune, "__name__": "kda_tune_module"}
    exec(compile(src, kda_tune, "exec"), kt)
    db = TU.TuningDB.load(TU.PACKAGED_DB, missing_ok=False)
    kimi, varlen = kt["preset_configs"]("kimi")[0], kt["preset_configs"]("kimi-varlen")[0]
    want = {(TU.config_key(kimi, "sm_90a"), TU.shape_bucket(T, N, H))
            for T, N, H in ((8192, 1, 32), (8192, 1, 64), (8192, 1, 96), (32768, 1, 32), (4096, 8, 32))}
    want.add((TU.config_key(varlen, "sm_90a"), TU.shape_bucket(8192 // 6, 6, 64)))
    have = {(e["config_hash"], e["bucket"]) for e in db.entries.values() if e["chip"] == "sm_90a"}
    check(want <= have, f"the package's database lacks {sorted(want - have)}")
    fingerprints = {e["compiler_fingerprint"] for e in db.entries.values()}
    check(len(fingerprints) == 1, f"one compiler's entries, found {fingerprints}")
    for e in db.entries.values():
        w = e.get("winner")
        if not w:
            continue
        c = next(c for c in e["candidates"] if B.normalise_tile(c["tile"]) == B.normalise_tile(w["tile"]))
        for s in e["shapes"]:
            sid = TU.shape_id(s)
            base = next(b for b in e["candidates"]
                        if B.normalise_tile(b["tile"]) == B.normalise_tile(e["baselines"][sid]))
            check(c["by_shape"][sid] <= base["by_shape"][sid], f"{e['bucket']} {sid}: the winner is slower")
    ok(f"package database: {len(db.entries)} entries for BENCH.md's configuration on sm_90a, winners never slower")
    fp = B.compiler_fingerprint(kda_compile)
    (stored,) = fingerprints
    if stored != fp:
        # A compiler whose sources changed since the database was tuned: its entries are (rightly)
        # ignored. Re-tune on the GPU machine (bench/RESULTS.md, kda-tune section) to ship tiles again.
        print(f"note package database tuned with {stored}, this compiler is {fp}: re-tune to use it")
        return
    env = dict(os.environ, HOME=os.path.join(tmp, "nohome"))
    env.pop("KDA_TUNING_DB", None)
    mod = os.path.join(tmp, "kimi.mlir")
    with open(mod, "w") as f:
        f.write(B.to_mlir(kimi))
    e8 = next(e for e in db.entries.values()
              if e["config_hash"] == TU.config_key(kimi, "sm_90a") and e["bucket"] == TU.shape_bucket(4096, 8, 32))
    w = e8["winner"]["tile"]
    proc = subprocess.run([kda_compile, mod, "-o", os.path.join(tmp, "kimi-b"), "--chip=sm_90a",
                           "--tuning-shape=4096,8,32"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=env)
    expect = (f"tuned tile for bucket {TU.shape_bucket(4096, 8, 32)}: chunk={w['chunk']} sub_chunk={w['sub_chunk']} "
              f"v_block={w['v_block']} threads={w['threads']}")
    check(proc.returncode == 0 and expect in proc.stdout, f"kda-compile --tuning-shape:\n{proc.stdout}")
    saved = {k: os.environ.get(k) for k in ("HOME", "KDA_TUNING_DB", "KDA_COMPILE")}
    try:
        os.environ.update(HOME=env["HOME"], KDA_COMPILE=kda_compile)
        os.environ.pop("KDA_TUNING_DB", None)
        check(TU.tuned_tile(kimi, "sm_90a", 4096, 8, 32) == w, "kda.ops' lookup: the package's tile")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    ok("package database: kda-compile --tuning-shape and kda.ops use it with no database named")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--flow", action="store_true")
    ap.add_argument("--packaged", action="store_true")
    ap.add_argument("--kda-tune")
    ap.add_argument("--kda-compile")
    ap.add_argument("--runtime")
    args = ap.parse_args()
    tmp = os.path.abspath(args.tmp)
    os.makedirs(tmp, exist_ok=True)
    if args.packaged:
        part_packaged(os.path.abspath(args.kda_tune), os.path.abspath(args.kda_compile), tmp)
    elif args.flow:
        part_flow(os.path.abspath(args.kda_tune), os.path.abspath(args.kda_compile),
                  os.path.abspath(args.runtime), tmp)
    else:
        part_unit(tmp)
    print("ALL OK")


if __name__ == "__main__":
    main()
