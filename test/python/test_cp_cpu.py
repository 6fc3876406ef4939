#!/usr/bin/env python3
"""Context parallelism simulated on the CPU (issue 27): P ranks' work in turn, through kda-run
(the CPU lowering) and kda.cp's partition, against one run over the whole batch. No torch, no
numpy: .npy files written and read here, the merge in float64 Python.

    test_cp_cpu.py --kda-run BIN --tmp DIR

Kimi's call at small sizes (K = V = 32, GVA: 1 q / k head, 2 value heads; l2 norm, lower-bound
gate and beta sigmoid in kernel, A_log and dt_bias), chunks of 16. Per case, with kda.cp.partition's
shares (rank r: tokens [r T / P, (r + 1) T / P), which need not be whole chunks):
  1. each rank whose last sequence goes on: that piece from a zero state (v as given; S_ext) and
     from the identity (v = 0; the K x K transition M), one kda-run of a batch of two copies;
  2. the gather: every rank's (S_ext, M);
  3. each rank's first sequence's initial state: S = M_j S + S_ext_j over the earlier ranks it
     spans, in float64 (kda.cp.merge's chain);
  4. each rank's tokens, varlen from those initial states.
The ranks' outputs, concatenated, must match the whole batch's run within SPEC's fp32 bar
(1e-4 relative RMSE; the whole run is itself checked against the float64 oracle, --check).
Prints one line per case and "ALL OK"; exits 1 on the first failure.
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import random
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from kda import cp  # noqa: E402  (pure Python: no torch)

H, HV, K, V = 1, 2, 32, 32
BAR = 1e-4


# ---------------------------------------------------------------------------
# .npy, flat lists in C order
# ---------------------------------------------------------------------------

def write_npy(path, shape, values, dtype="<f4"):
    header = repr({"descr": dtype, "fortran_order": False, "shape": tuple(shape)})
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    fmt = "f" if dtype == "<f4" else "i"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack(f"<{len(values)}{fmt}", *values))


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    major = data[6]
    if major == 1:
        n = struct.unpack("<H", data[8:10])[0]
        start = 10
    else:
        n = struct.unpack("<I", data[8:12])[0]
        start = 12
    hdr = ast.literal_eval(data[start:start + n].decode())
    shape = hdr["shape"]
    count = math.prod(shape)
    fmt = {"<f4": "f", "<f8": "d", "<i4": "i"}[hdr["descr"]]
    vals = struct.unpack(f"<{count}{fmt}", data[start + n:start + n + count * struct.calcsize(fmt)])
    return list(shape), list(vals)


# ---------------------------------------------------------------------------
# Functions for kda-run
# ---------------------------------------------------------------------------

def func(B, T, N, h0):
    """@f: Kimi's call on [B, T] tokens; N > 0: varlen with N sequences (B = 1); h0: initial
    states. Returns (o, final states)."""
    t = lambda *s: "tensor<" + "x".join(str(x) for x in s) + "xf32>"  # noqa: E731
    S = N if N else B
    args = [f"%q: {t(B, T, H, K)}", f"%k: {t(B, T, H, K)}", f"%v: {t(B, T, HV, V)}",
            f"%g: {t(B, T, HV, K)}", f"%b: {t(B, T, HV)}", f"%a: {t(HV)}", f"%d: {t(HV, K)}"]
    extra = ""
    if h0:
        args.append(f"%s0: {t(S, HV, K, V)}")
        extra += f" initial_state(%s0 : {t(S, HV, K, V)})"
    if N:
        args.append(f"%cu: tensor<{N + 1}xi32>")
        extra += f" cu_seqlens(%cu : tensor<{N + 1}xi32>)"
    o, st = t(B, T, HV, V), t(S, HV, K, V)
    return (f"func.func @f({', '.join(args)}) -> ({o}, {st}) {{\n"
            f"  %o, %s = kda.gated_delta delta %q, %k, %v gate(%g : {t(B, T, HV, K)}) beta(%b : {t(B, T, HV)})"
            f"{extra} A_log(%a : {t(HV)}) dt_bias(%d : {t(HV, K)}) {{qk_l2norm, beta_activation = "
            f"#kda<beta sigmoid>, gate_activation = #kda<gate lower_bound>, lower_bound = -5.0 : f64}} : "
            f"{t(B, T, H, K)}, {t(B, T, H, K)}, {t(B, T, HV, V)} -> {o} final_state {st}\n"
            f"  return %o, %s : {o}, {st}\n}}\n")


class Runner:
    def __init__(self, kda_run, tmp):
        self.kda_run, self.tmp, self.n = kda_run, tmp, 0

    def run(self, B, T, N, arrays, check=False):
        """arrays: name -> (shape, flat values[, dtype]) in argument order. Returns (o, final)."""
        self.n += 1
        d = os.path.join(self.tmp, f"run{self.n}")
        os.makedirs(d, exist_ok=True)
        src = os.path.join(d, "f.mlir")
        with open(src, "w") as f:
            f.write(func(B, T, N, "s0" in arrays))
        cmd = [self.kda_run, src, "--function=f", "--chunk=16", f"--output-dir={d}"]
        for i, (name, a) in enumerate(arrays.items()):
            path = os.path.join(d, f"{name}.npy")
            write_npy(path, a[0], a[1], a[2] if len(a) > 2 else "<f4")
            cmd.append(f"--input={i}={path}")
        if check:
            cmd.append("--check")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL: kda-run: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
            sys.exit(1)
        if check and "FAIL" in r.stdout:
            print(f"FAIL: the whole run is off the oracle:\n{r.stdout}")
            sys.exit(1)
        return read_npy(os.path.join(d, "out0.npy"))[1], read_npy(os.path.join(d, "out1.npy"))[1]


# ---------------------------------------------------------------------------
# The simulation
# ---------------------------------------------------------------------------

def rows(flat, T, width, a, b):
    """Tokens [a, b) of a [1, T, ...] tensor whose token rows hold `width` values."""
    return flat[a * width:b * width]


def simulate(runner, seqlens, P, seed):
    rnd = random.Random(seed)
    T = sum(seqlens)
    rn = lambda n, s=1.0: [rnd.gauss(0.0, s) for _ in range(n)]  # noqa: E731
    # Slow gates (raw values near -6: a decay of about exp(-0.01) per token), so that a rank's
    # start state carries the earlier ranks' tokens: dropping M_j S from the chain fails by 0.1.
    x = {"q": rn(T * H * K), "k": rn(T * H * K), "v": rn(T * HV * V),
         "g": [rnd.gauss(-6.0, 1.0) for _ in range(T * HV * K)], "b": rn(T * HV)}
    a_log = [math.log(rnd.random() + 1) for _ in range(HV)]
    dt = rn(HV * K, 0.5)
    width = {"q": H * K, "k": H * K, "v": HV * V, "g": HV * K, "b": HV}
    tail = {"q": [H, K], "k": [H, K], "v": [HV, V], "g": [HV, K], "b": [HV]}
    cu = [0]
    for s in seqlens:
        cu.append(cu[-1] + s)

    def arrays(B, Tn, pieces, extra=()):
        out = {n: ([B, Tn] + tail[n], pieces[n]) for n in ("q", "k", "v", "g", "b")}
        out["a"] = ([HV], a_log)
        out["d"] = ([HV, K], dt)
        for name, val in extra:
            out[name] = val
        return out

    # The whole batch, one run (checked against the float64 oracle).
    whole_o, _ = runner.run(1, T, len(seqlens), arrays(1, T, x, [("cu", ([len(cu)], cu, "<i4"))]), check=True)

    parts = [cp.partition(cu, P, r) for r in range(P)]
    # 1. summaries: [S_ext | M] per head, K-major, float lists [HV][K][V + K].
    summaries = []
    for r, p in enumerate(parts):
        if p.post_num_ranks == 0:
            summaries.append(None)
            continue
        a, b = p.rank_start + p.local_cu_seqlens[-2], p.rank_end
        n = b - a
        piece = {name: rows(x[name], T, width[name], a, b) * 2 for name in x}
        piece["v"] = rows(x["v"], T, width["v"], a, b) + [0.0] * (n * width["v"])
        # Initial states: zeros (S_ext), then the identity (M; K = V here).
        ident = []
        for h in range(HV):
            for i in range(K):
                ident += [1.0 if i == j else 0.0 for j in range(V)]
        h0 = [0.0] * (HV * K * V) + ident
        _, fin = runner.run(2, n, 0, arrays(2, n, piece, [("s0", ([2, HV, K, V], h0))]))
        per = HV * K * V
        s_ext, m = fin[:per], fin[per:]
        summaries.append([[[s_ext[(h * K + i) * V + j] for j in range(V)] +
                           [m[(h * K + i) * V + j] for j in range(K)] for i in range(K)] for h in range(HV)])

    # 3. + 4. each rank from its merged state.
    outs = []
    for r, p in enumerate(parts):
        N = len(p.local_cu_seqlens) - 1
        Tr = p.rank_end - p.rank_start
        h0 = [0.0] * (N * HV * K * V)
        if p.pre_num_ranks:
            for h in range(HV):
                S = None
                for j in range(r - p.pre_num_ranks, r):
                    sm = summaries[j][h]
                    if S is None:
                        S = [row[:V] for row in sm]
                    else:
                        S = [[sm[i][c] + sum(sm[i][V + kk] * S[kk][c] for kk in range(K)) for c in range(V)]
                             for i in range(K)]
                for i in range(K):
                    for c in range(V):
                        h0[(h * K + i) * V + c] = S[i][c]
        piece = {name: rows(x[name], T, width[name], p.rank_start, p.rank_end) for name in x}
        o, _ = runner.run(1, Tr, N, arrays(1, Tr, piece, [("s0", ([N, HV, K, V], h0)),
                                                          ("cu", ([N + 1], p.local_cu_seqlens, "<i4"))]))
        outs += o
    num = sum((u - w) ** 2 for u, w in zip(outs, whole_o))
    den = sum(w * w for w in whole_o)
    return math.sqrt(num / max(den, 1e-300)), parts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kda-run", required=True)
    ap.add_argument("--tmp", required=True)
    args = ap.parse_args()
    runner = Runner(args.kda_run, args.tmp)
    for seqlens, P in (([400], 2), ([400], 4), ([60, 37, 200, 3, 100], 4), ([150, 50], 5)):
        err, parts = simulate(runner, seqlens, P, seed=len(seqlens) * 10 + P)
        pre = [p.pre_num_ranks for p in parts]
        status = "ok  " if err <= BAR else "FAIL:"
        print(f"{status} cp on the CPU: sequences {seqlens} over {P} ranks (earlier ranks chained: {pre}): "
              f"o {err:.1e} from one run over the batch (bar {BAR:g})", flush=True)
        if err > BAR:
            sys.exit(1)
    print("ALL OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
