"""Builds kda bundles ahead of time into the cache layout kda.ops reads.

    python3 -m kda.prebuild --chip sm_90a --out DIR            # the common set
    python3 -m kda.prebuild --chip sm_90a --out DIR --configs cfgs.json --set none
    python3 -m kda.prebuild --list                              # print the common set

Then, on the GPU machine: ``KDA_BUNDLE_PATH=DIR``.

The common set: K = V in {64, 128}; q/k/v in bf16, fp16 and fp32; for each,
  * plain KDA (precomputed g in the input dtype or fp32, beta in post-sigmoid space),
  * Kimi-Linear's prologue with the lower-bound gate (l2 norm, beta sigmoid,
    g = -5 * sigmoid(exp(A_log) * (g + dt_bias)), A_log/dt_bias fp32),
  * the same prologue with the softplus gate (-exp(A_log) * softplus(g + dt_bias)),
with no state, final state only, initial + final state (K-major), and the
two stateful variants in V-major layout (state_v_first); each with and
without int64 cu_seqlens. Configurations read from ``--configs`` (a JSON list
of configuration dicts, e.g. from ``test/gpu/test_gpu.py --print-configs``)
are added.

kda-compile is found as kda.ops finds it (``KDA_COMPILE``, PATH, the
repository's build/bin). Every failure is reported with kda-compile's message;
the exit status is 1 if any configuration failed. A bundle whose dynamic
shared memory exceeds what one block may opt in to on the chip is reported as
a warning (it will fail at launch with KDA_ERROR_LAUNCH_FAILED).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import time
from typing import Any, Dict, List

from . import bundles as _b
from . import chips as _chips
from . import tune as _tune

# Maximum dynamic shared memory one block may opt in to (bytes).
SMEM_OPTIN = {chip: _chips.shared_memory_per_block(chip) for chip in _chips.NVIDIA_CHIPS}


def common_configs() -> List[Dict[str, Any]]:
    out = []
    for kv in (64, 128):
        for x in ("bf16", "f16", "f32"):
            gates = []
            for gdt in sorted({x, "f32"}):
                gates.append(dict(gate={"form": "channel", "dtype": gdt}, beta_dtype=x))
            kimi = dict(gate={"form": "channel", "dtype": x}, beta_dtype=x, qk_l2norm=True,
                        beta_activation="sigmoid", A_log_dtype="f32", dt_bias_dtype="f32")
            gates.append(dict(kimi, gate_activation="lower_bound", lower_bound=-5.0))
            gates.append(dict(kimi, gate_activation="softplus"))
            states = [(None, None, "k_major"), (None, "f32", "k_major"), ("f32", "f32", "k_major"),
                      (None, "f32", "v_major"), ("f32", "f32", "v_major")]
            for g in gates:
                for h0, ht, layout in states:
                    for cu in (None, "i64"):
                        out.append(_b.gated_delta_config(
                            K=kv, V=kv, qk_dtype=x, v_dtype=x, initial_state_dtype=h0,
                            final_state_dtype=ht, state_layout=layout, cu_seqlens_dtype=cu, **g))
    return out


def _unique(cfgs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    seen, out = set(), []
    for c in cfgs:
        key = json.dumps(c, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def build(cfgs: List[Dict[str, Any]], chips: List[str], out_dir: str, jobs: int,
          compiler: str = None, verbose: bool = True, segments: List[int] = ()) -> Dict[str, Any]:
    os.makedirs(out_dir, exist_ok=True)
    # Each configuration's default bundle, and those of the tiles kda.ops
    # may choose for it: the shape policy's (kda.tune.policy_tiles) and the
    # tuning databases' winners (kda.tune.db_tiles).
    tasks = []
    for chip in chips:
        for c in cfgs:
            tiles = [None]
            for tile in (_tune.policy_tiles(c, chip) + _tune.db_tiles(c, chip)
                         + _tune.segment_tiles(c, chip, segments)):
                if tile not in tiles:
                    tiles.append(tile)
            tasks += [(c, chip, tile) for tile in tiles]
            # The pipelined pieces' bundle (kda.tune.shape_policy_pieces):
            # the configuration with fp32 initial and final states.
            if _tune.pieces_applies(c, chip):
                task = (_tune.pieces_config(c), chip, _tune.pieces_tile())
                if task not in tasks:
                    tasks.append(task)
            # A hybrid layer's in pieces (kda.tune.hybrid_pieces): its gated
            # delta part so, the window over earlier keys.
            if (c.get("op") == "hybrid" and not c.get("schedule")
                    and _tune.pieces_applies(c["gated_delta"], chip)):
                task = (_tune.hybrid_pieces_config(c), chip, _tune.pieces_tile())
                if task not in tasks:
                    tasks.append(task)
    results = []
    # Bundles are named after the compiler that builds them (the cache key).
    compiler = compiler or _b.find_compiler()
    fingerprint = _b.compiler_fingerprint(compiler) if compiler else None

    def one(task):
        cfg, chip, tile = task
        name = _b.bundle_name(cfg, chip, tile, fingerprint=fingerprint)
        existing = os.path.join(out_dir, name)
        t0 = time.time()
        if os.path.isfile(os.path.join(existing, "manifest.json")):
            status, path, err = "cached", existing, ""
        else:
            try:
                path = _b.compile_bundle(cfg, chip, out_root=out_dir, compiler=compiler, tile=tile)
                status, err = "built", ""
            except (_b.CompileError, _b.BundleNotFoundError, OSError) as e:
                status, path, err = "failed", None, str(e)
        entry = {"name": name, "chip": chip, "config": cfg, "tile": tile, "status": status,
                 "seconds": round(time.time() - t0, 2), "error": err}
        if path:
            with open(os.path.join(path, "manifest.json")) as f:
                m = json.load(f)
            smem = max(k.get("dynamic_shared_memory", 0) for k in m["kernels"])
            entry["dynamic_shared_memory"] = smem
            limit = SMEM_OPTIN.get(chip)
            if limit and smem > limit:
                entry["warning"] = (f"dynamic shared memory {smem} B exceeds the {limit} B a block may "
                                    f"opt in to on {chip}: launches will fail")
        return entry

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        for entry in ex.map(one, tasks):
            results.append(entry)
            if verbose:
                line = f"{entry['status']:7s} {entry['chip']:7s} {_b.describe(entry['config'])}"
                if entry["tile"]:
                    line += f"  tile={_b.normalise_tile(entry['tile'])}"
                if "dynamic_shared_memory" in entry:
                    line += f"  smem={entry['dynamic_shared_memory']}"
                print(line, flush=True)
                if entry.get("warning"):
                    print(f"        WARNING: {entry['warning']}", flush=True)
                if entry["error"]:
                    print("        " + entry["error"].replace("\n", "\n        ")[:4000], flush=True)
    report = {"out": os.path.abspath(out_dir), "chips": chips, "results": results,
              "compiler_fingerprint": fingerprint,
              "failed": sum(r["status"] == "failed" for r in results),
              "smem_warnings": sum(1 for r in results if r.get("warning"))}
    with open(os.path.join(out_dir, "prebuild-report.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
        f.write("\n")
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m kda.prebuild", description=__doc__.split("\n\n")[0])
    p.add_argument("--chip", action="append", choices=_b.CHIPS,
                   help="target chip (repeatable; default sm_90a)")
    p.add_argument("--out", help="bundle directory to fill (default: ~/.cache/kda/bundles)")
    p.add_argument("--set", choices=("common", "none"), default="common",
                   help="built-in configuration set (default common)")
    p.add_argument("--configs", action="append", default=[],
                   help="JSON file with a list of configurations to add (repeatable)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--list", action="store_true", help="print the configurations and exit")
    p.add_argument("--segments", default="",
                   help="comma-separated segment counts: also build the shape policy's tiles with "
                        "each (what KDA_SEGMENTS asks for; e.g. 4,8,16)")
    args = p.parse_args(argv)

    try:
        segments = [int(s) for s in args.segments.split(",") if s.strip()]
    except ValueError:
        print(f"--segments: expected comma-separated counts, got {args.segments!r}", file=sys.stderr)
        return 2
    if any(s < 1 or s > _tune.MAX_SEGMENTS for s in segments):
        print(f"--segments: counts are 1 to {_tune.MAX_SEGMENTS}, got {segments}", file=sys.stderr)
        return 2
    chips = args.chip or ["sm_90a"]
    cfgs = common_configs() if args.set == "common" else []
    for path in args.configs:
        with open(path) as f:
            for c in json.load(f):
                _b.validate(c)
                cfgs.append(c)
    cfgs = _unique(cfgs)
    if args.list:
        for c in cfgs:
            for chip in chips:
                print(f"{_b.bundle_name(c, chip)}  {_b.describe(c)}")
        return 0
    if not cfgs:
        print("nothing to build", file=sys.stderr)
        return 0
    compiler = _b.find_compiler()
    if compiler is None:
        print("kda-compile not found: set KDA_COMPILE or put it on PATH", file=sys.stderr)
        return 2
    out = args.out or _b.cache_dirs(with_prebuilt=False)[-1]
    print(f"building {len(cfgs)} configuration(s) x {len(chips)} chip(s) into {out} with {compiler}",
          flush=True)
    report = build(cfgs, chips, out, args.jobs, compiler=compiler, segments=segments)
    ok = len(report["results"]) - report["failed"]
    print(f"prebuild: {ok} ok, {report['failed']} failed, {report['smem_warnings']} over the shared-memory "
          f"limit; report in {os.path.join(out, 'prebuild-report.json')}")
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
