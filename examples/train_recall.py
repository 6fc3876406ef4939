#!/usr/bin/env python3
"""Two KimiDeltaAttention layers learn multi-query associative recall, with kda and with FLA.

Issue 24's training check: the same model (kda.layers.KimiDeltaAttention and
fla.layers.KimiDeltaAttention share their state dict) from the same initial
weights and the same batches, trained with AdamW under bf16 autocast. kda's
layer runs kda.chunk_kda forward and its derived gradient (kda.gated_delta_grad)
backward; FLA's its Triton kernels. The task (MQAR): a sequence of P key-value
pairs, then the P keys again in another order; at each repeated key the model
predicts its value. Loss and accuracy on those positions only.

    KDA_BUNDLE_PATH=... python3 examples/train_recall.py --fla DIR --json out.json [--plot out.png]
    python3 examples/train_recall.py --print-configs   # the kernel configurations it needs (no torch)

It also times one layer call's forward + backward (chunk_kda with the layer's
options) against FLA's at larger shapes (--time), in the same process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import kda.ops as kops  # noqa: E402  (no torch at import)
from kda import bundles as kbundles  # noqa: E402

HIDDEN, HEADS, HEAD_DIM = 256, 2, 128
PAIRS, KEYS, VALUES = 32, 128, 128
VOCAB = KEYS + VALUES
TIMED = (("T=8192 H=32", 1, 8192, 32), ("8x4096 H=32", 8, 4096, 32))


class Meta:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


def layer_config(B, T, H, boundary=False):
    """The chunk_kda configuration kda.layers' training call makes (bf16 under autocast)."""
    q = Meta((B, T, H, HEAD_DIM), "bf16")
    return kops.chunk_kda_config(q, q, q, q, Meta((B, T, H), "bf16"), use_qk_l2norm_in_kernel=True,
                                 use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, state_v_first=True,
                                 A_log=Meta((H,), "f32"), dt_bias=Meta((H * HEAD_DIM,), "f32"),
                                 boundary_interval=kops.GRAD_CHUNK if boundary else None)


def configs():
    fwd = layer_config(64, 3 * PAIRS, HEADS, boundary=True)
    return [layer_config(64, 3 * PAIRS, HEADS), fwd,
            kbundles.gated_delta_grad_config(fwd, chunk=kops.GRAD_CHUNK)]


def batch(torch, gen, size, device):
    """[size, 3P] tokens, targets (-100 where no prediction is asked)."""
    keys = torch.stack([torch.randperm(KEYS, generator=gen)[:PAIRS] for _ in range(size)])
    values = torch.randint(KEYS, VOCAB, (size, PAIRS), generator=gen)
    order = torch.stack([torch.randperm(PAIRS, generator=gen) for _ in range(size)])
    pairs = torch.stack([keys, values], dim=2).reshape(size, 2 * PAIRS)
    queries = torch.gather(keys, 1, order)
    tokens = torch.cat([pairs, queries], dim=1)
    targets = torch.full_like(tokens, -100)
    targets[:, 2 * PAIRS:] = torch.gather(values, 1, order)
    return tokens.to(device), targets.to(device)


def make_model(torch, Layer):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(HIDDEN), nn.LayerNorm(HIDDEN)
            self.attn = Layer(hidden_size=HIDDEN, num_heads=HEADS, head_dim=HEAD_DIM, layer_idx=i)
            self.mlp = nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(), nn.Linear(4 * HIDDEN, HIDDEN))

        def forward(self, x):
            x = x + self.attn(self.norm1(x))[0]
            return x + self.mlp(self.norm2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, HIDDEN)
            self.blocks = nn.ModuleList([Block(0), Block(1)])
            self.norm = nn.LayerNorm(HIDDEN)
            self.head = nn.Linear(HIDDEN, VOCAB)

        def forward(self, tokens):
            x = self.embed(tokens)
            for b in self.blocks:
                x = b(x)
            return self.head(self.norm(x))

    return Model()


def train(torch, model, steps, seed, batch_size, lr):
    device = "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed)
    losses, accs = [], []
    t0 = time.time()
    for step in range(steps):
        tokens, targets = batch(torch, gen, batch_size, device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1),
                                                 ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        mask = targets >= 0
        acc = (logits.argmax(-1)[mask] == targets[mask]).float().mean()
        losses.append(float(loss))
        accs.append(float(acc))
    torch.cuda.synchronize()
    # Held-out accuracy (eval mode: the plain forward).
    model.eval()
    gen = torch.Generator().manual_seed(seed + 999)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        tokens, targets = batch(torch, gen, 512, device)
        logits = model(tokens)
    mask = targets >= 0
    test_acc = float((logits.argmax(-1)[mask] == targets[mask]).float().mean())
    model.train()
    return {"loss": losses, "train_acc": accs, "test_acc": test_acc, "seconds": time.time() - t0}


def time_fwdbwd(torch, fn, args, reps=10, warmup=3):
    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*args)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def timing(torch, fla_chunk_kda):
    """One layer call's chunk_kda forward + backward (the layer's options), kda against FLA."""
    rows = []
    for name, B, T, H in TIMED:
        gen = torch.Generator(device="cuda").manual_seed(7)
        r = lambda *s: torch.randn(*s, generator=gen, device="cuda")  # noqa: E731
        x = dict(q=r(B, T, H, HEAD_DIM).bfloat16(), k=r(B, T, H, HEAD_DIM).bfloat16(),
                 v=r(B, T, H, HEAD_DIM).bfloat16(), g=r(B, T, H, HEAD_DIM).bfloat16(), beta=r(B, T, H).bfloat16(),
                 A_log=torch.log(torch.rand(H, generator=gen, device="cuda") * 15 + 1), dt_bias=r(H * HEAD_DIM))
        do = r(B, T, H, HEAD_DIM).bfloat16()
        kw = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                  state_v_first=True)
        leaves = {n: t.requires_grad_(True) for n, t in x.items()}

        def step(f):
            for t in leaves.values():
                t.grad = None
            o, _ = f(leaves["q"], leaves["k"], leaves["v"], leaves["g"], leaves["beta"], A_log=leaves["A_log"],
                     dt_bias=leaves["dt_bias"], **kw)
            o.backward(do)

        row = {"case": f"fwdbwd {name}"}
        for side, f in (("kda", kops.chunk_kda), ("fla", fla_chunk_kda)):
            if f is None:
                continue
            try:
                row[side] = {"median_ms": time_fwdbwd(torch, step, (f,))}
                with torch.no_grad():
                    row[side]["fwd_ms"] = time_fwdbwd(torch, lambda: f(x["q"], x["k"], x["v"], x["g"], x["beta"],
                                                                      A_log=x["A_log"], dt_bias=x["dt_bias"],
                                                                      **kw), ())
            except Exception as e:  # noqa: BLE001
                row[side + "_error"] = f"{type(e).__name__}: {e}"
        if "kda" in row and "fla" in row:
            row["ratio_kda_over_fla"] = row["kda"]["median_ms"] / row["fla"]["median_ms"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--print-configs", action="store_true")
    ap.add_argument("--fla", default=os.environ.get("KDA_FLA_DIR", ""))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default="")
    ap.add_argument("--plot", default="")
    ap.add_argument("--time", action="store_true", help="also time fwd + bwd at " +
                    ", ".join(t[0] for t in TIMED))
    ap.add_argument("--plot-from", default="", help="only plot an earlier run's --json file to --plot")
    args = ap.parse_args()
    if args.plot_from:
        with open(args.plot_from) as fh:
            plot(json.load(fh), args.plot)
        return 0
    if args.print_configs:
        out = configs()
        if args.time:
            for _, B, T, H in TIMED:
                fwd = layer_config(B, T, H, boundary=True)
                out += [layer_config(B, T, H), fwd, kbundles.gated_delta_grad_config(fwd, chunk=kops.GRAD_CHUNK)]
        print(json.dumps(out, indent=1, sort_keys=True))
        return 0
    import torch
    import kda.layers
    if args.fla:
        sys.path.insert(0, args.fla)
    from fla.layers import KimiDeltaAttention as FlaLayer
    from fla.ops.kda import chunk_kda as fla_chunk_kda

    torch.manual_seed(args.seed)
    kda_model = make_model(torch, kda.layers.KimiDeltaAttention).cuda()
    fla_model = make_model(torch, FlaLayer).cuda()
    fla_model.load_state_dict(kda_model.state_dict())  # the same initial weights
    result = {"task": f"MQAR: {PAIRS} pairs, {KEYS} keys, {VALUES} values, T = {3 * PAIRS}",
              "model": f"2 x KimiDeltaAttention(hidden {HIDDEN}, {HEADS} heads of {HEAD_DIM}) + MLP",
              "steps": args.steps, "batch": args.batch, "lr": args.lr, "seed": args.seed,
              "device": torch.cuda.get_device_name(0)}
    for name, model in (("kda", kda_model), ("fla", fla_model)):
        result[name] = train(torch, model, args.steps, args.seed, args.batch, args.lr)
        r = result[name]
        print(f"{name}: loss {r['loss'][0]:.3f} -> {sum(r['loss'][-10:]) / 10:.4f} (last 10), train acc "
              f"{sum(r['train_acc'][-10:]) / 10:.3f}, test acc {r['test_acc']:.3f}, {r['seconds']:.1f} s",
              flush=True)
    k, f = result["kda"]["loss"], result["fla"]["loss"]
    result["max_abs_loss_difference"] = max(abs(a - b) for a, b in zip(k, f))
    result["mean_abs_loss_difference_last_50"] = sum(abs(a - b) for a, b in zip(k[-50:], f[-50:])) / 50
    print(f"loss curves: max |kda - fla| {result['max_abs_loss_difference']:.4f}, mean over the last 50 steps "
          f"{result['mean_abs_loss_difference_last_50']:.4f}", flush=True)
    if args.json:  # written now too: the timing below may not finish
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    if args.time:
        result["timing"] = timing(torch, fla_chunk_kda)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    if args.plot:
        plot(result, args.plot)
    return 0


def plot(result, path):
    """The two loss curves (and test accuracies) as a PNG."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"no plot: {e}")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(result["kda"]["loss"], label=f"kda (test acc {result['kda']['test_acc']:.3f})")
    ax.plot(result["fla"]["loss"], label=f"FLA (test acc {result['fla']['test_acc']:.3f})", alpha=0.8,
            linestyle="--")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (query positions)")
    ax.set_yscale("log")
    ax.set_title(f"{result['task']}; {result['device']}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
