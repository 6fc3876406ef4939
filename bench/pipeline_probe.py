"""Pipelined pieces: intra(piece i+1) on the main stream beside state(piece i) on a high-priority stream.

PROBE_BUNDLES="a=DIR,s=DIR": the intra kernel from a (the default tile), the state kernel from s (reserved
multiprocessors). PT tokens; PIECES (comma list). Checks every schedule's o and final state against intra, state
in one piece each (same kernels), then times each in a CUDA graph. The forty-fourth session's bundles
(bench/RESULTS.md): kda-compile of a bench bundle's source.mlir (BENCH.md's Kimi forward, h0 and ht) with
--state-stages=3 and --v-block=16 (a), --v-block=64 (d; dx: its state kernel's dynamic_shared_memory raised to
200 KiB in manifest.json), --v-block=32 --block-threads=64 (e: the shape policy's tile at T = 32768).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_kda as bk  # noqa: E402
from hybrid_probe import graph_ms as _graph_ms, workspaces  # noqa: E402
from kda import runtime as rt  # noqa: E402

T, H = int(os.environ.get("PT", 32768)), 32
CASE = bk.Case(f"fwd T={T} H={H}", "fwd", H, B=1, T=T)
IK, SK = "kda_gated_delta_kernel_intra", "kda_gated_delta_kernel_state"


def graph_ms(fn):
    """ms per replay of fn in a CUDA graph (hybrid_probe.graph_ms, 20 replays a run)."""
    return _graph_ms(fn, reps=20)


def main():
    variants = dict(x.split("=", 1) for x in os.environ["PROBE_BUNDLES"].split(","))
    bundles = {n: rt.load_bundle(p) for n, p in variants.items()}
    x = bk.make_set(CASE, torch, 3)
    ba = bundles["a"]
    e = next(iter(ba.entries.values()))
    ws = workspaces(e, {"B": 1, "T": T, "HV": H, "H": H})
    o = torch.empty_like(x["v"])
    h0 = x["h0"]
    pick = lambda b, k, t: {p["name"]: t[p["name"]] for p in b.tensor_params(k)}  # noqa: E731
    hi = torch.cuda.Stream(priority=-1)
    print(torch.cuda.get_device_name(), f"T={T} H={H}")

    def calls(sb, pieces):
        """The launches of a P-piece schedule: per piece, the intra and state argument dicts."""
        step = -(-T // pieces // 16) * 16
        states = [h0] + [torch.empty_like(h0) for _ in range(pieces)]
        out = []
        for i in range(pieces):
            a, z = i * step, min(T, (i + 1) * step)
            t = dict(q=x["q"][:, a:z], k=x["k"][:, a:z], v=x["v"][:, a:z], gate=x["g"][:, a:z],
                     beta=x["beta"][:, a:z], initial_state=states[i], A_log=x["A_log"],
                     dt_bias=x["dt_bias"].view(H, -1), o=o[:, a:z], final_state=states[i + 1])
            for n, w in ws.items():
                t[n] = w[:, a:z]
            out.append((pick(ba, IK, t), pick(sb, SK, t)))
        return out, states[-1]

    ref = None
    for sname in [n for n in bundles if n != "a"] + ["a"]:
        sb = bundles[sname]
        for pieces in [int(p) for p in os.environ.get("PIECES", "1,2,4,8").split(",")]:
            launches, final = calls(sb, pieces)

            def run():
                ev = []
                for ic, _ in launches:
                    ba.launch(IK, ic)
                    e_ = torch.cuda.Event()
                    e_.record()
                    ev.append(e_)
                with torch.cuda.stream(hi):
                    for (_, sc), e_ in zip(launches, ev):
                        hi.wait_event(e_)
                        sb.launch(SK, sc)
                torch.cuda.current_stream().wait_stream(hi)

            def run_seq():
                for ic, sc in launches:
                    ba.launch(IK, ic)
                    sb.launch(SK, sc)
            hi.wait_stream(torch.cuda.current_stream())
            run()
            torch.cuda.synchronize()
            got = (o.clone(), final.clone())
            if ref is None:
                run_seq()
                torch.cuda.synchronize()
                ref = (o.clone(), final.clone())
            same = torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
            err = max((got[0].float() - ref[0].float()).abs().max().item(),
                      (got[1] - ref[1]).abs().max().item())
            print(f"state {sname} pieces {pieces}: pipelined {graph_ms(run):.3f} ms, in order {graph_ms(run_seq):.3f} ms;"
                  f" equal to the first schedule's {same} (max diff {err:.1e})", flush=True)


if __name__ == "__main__":
    main()
