"""Lesson 4: gradient accumulation. A big batch's gradient at a small batch's memory.

    python lessons/04_gradient_accumulation.py          # about 2 s on 2 cores (measured 2026-11-30)
    python lessons/04_gradient_accumulation.py --quick  # a smaller GPT in part 1, timed once

Part 1 replays, on the small GPT, the shape of a well-known write-up that fine-tuned BERT-large
three ways: batch 8 at once; 8 micro-batches of 1 with gradient accumulation (much less
memory, somewhat slower); and that plus gradient checkpointing (less memory again, slower
again). Every number is measured here: peak bytes by category with mg.profile, samples per
second with a clock, and the gradient compared with the full batch's.
Part 2 shows why each micro-batch's summed loss must be divided by the whole batch's token
count, not averaged per micro-batch (the bug fixed in Hugging Face transformers in late 2024).
Part 3 shows why float16 gradients are accumulated into a float32 buffer.
Plot: out/04_accumulation.png.
"""
import argparse
import os
import time

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import minigrad as mg
import minigrad.functional as F
from minigrad.gpt import GPT, GPTConfig
from minigrad.profiler import CATEGORIES, format_bytes

# settings
SEED = 0
BATCH, VOCAB = 8, 32
CFG = dict(vocab_size=VOCAB, block_size=64, n_layer=4, n_head=4, n_embd=128)
REPEATS = 3
QUICK_CFG = dict(CFG, block_size=32, n_layer=2, n_embd=64)  # --quick: part 1's GPT, timed once
OUT = "out"


def loss_sum(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), reduction="sum")


def grads_of(model):
    return [p.grad.data.copy() for p in model.parameters()]


def rel_error(a, b):
    return max(float(np.abs(x - y).max() / np.abs(y).max()) for x, y in zip(a, b))


def part1(cfg=CFG, repeats=REPEATS):
    print(f"Part 1: one optimizer step on a batch of {BATCH} sequences of {cfg['block_size']} tokens "
          f"(GPT: {cfg['n_layer']} blocks, {cfg['n_embd']} wide)\n")
    x = mg.randint(0, VOCAB, (BATCH, cfg["block_size"]))
    y = mg.randint(0, VOCAB, (BATCH, cfg["block_size"]))
    runs = {"batch 8": (8, False), "2 x 4 accumulated": (4, False), "8 x 1 accumulated": (1, False),
            "8 x 1 + checkpointing": (1, True)}
    results, reference = {}, None
    for name, (micro, ckpt) in runs.items():
        mg.manual_seed(SEED)
        model = GPT(GPTConfig(**cfg, gradient_checkpointing=ckpt))
        opt = mg.optim.AdamW(model.parameters(), lr=0.0)  # lr 0: every step sees the same weights
        mg.accumulation_step(model, loss_sum, opt, x, y, micro_batch_size=micro)  # makes AdamW's state
        with mg.profile() as prof:  # a steady-state step: parameters, optimizer state, gradients, activations
            mg.accumulation_step(model, loss_sum, opt, x, y, micro_batch_size=micro)
        grads = grads_of(model)  # after the step: .grad still holds the accumulated gradient
        reference = reference or grads
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            mg.accumulation_step(model, loss_sum, opt, x, y, micro_batch_size=micro)
            times.append(time.perf_counter() - t0)
        results[name] = dict(peaks={c: prof.peak_bytes(c) for c in CATEGORIES}, total=prof.peak_bytes(),
                             at_peak=prof.bytes_at_peak(),
                             speed=BATCH / min(times), error=rel_error(grads, reference))
    print(f"{'':<24}{'peak total':>12}{'activations':>13}{'gradients':>11}{'samples/s':>11}{'grad vs batch 8':>17}")
    for name, r in results.items():
        print(f"{name:<24}{format_bytes(r['total']):>12}{format_bytes(r['peaks']['activations']):>13}"
              f"{format_bytes(r['peaks']['gradients']):>11}{r['speed']:>11.1f}{r['error']:>17.1e}")
    print("(peak total is the peak of all categories together, not the sum of the columns; relative "
          "gradient differences at float32 rounding level mean: the same gradient)")
    return results


def part2():
    print("\nPart 2: dividing by the whole batch's tokens, or averaging per micro-batch\n")
    mg.manual_seed(SEED)
    model = GPT(GPTConfig(**{**CFG, "n_layer": 1, "n_embd": 32})).to("float64")
    x = mg.randint(0, VOCAB, (BATCH, 16))
    y = mg.randint(0, VOCAB, (BATCH, 16)).numpy()
    lengths = [16, 2, 9, 1, 16, 4, 12, 3]  # real sequences differ in length; the rest is padding
    for row, n in enumerate(lengths):
        y[row, n:] = -100
    y = mg.tensor(y)
    model.zero_grad()
    F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1), ignore_index=-100).backward()
    full = grads_of(model)
    print(f"sequence lengths {lengths}: {sum(lengths)} tokens")
    print(f"{'micro-batches':>14}{'by the batch tokens':>22}{'mean of means':>16}")
    for k in (1, 2, 4, 8):
        errs = []
        for normalize in ("items", "mean_of_means"):
            model.zero_grad()
            mg.accumulate(model, loss_sum, x, y, steps=k, ignore_index=-100, normalize=normalize)
            errs.append(rel_error(grads_of(model), full))
        print(f"{k:>14}{errs[0]:>22.1e}{errs[1]:>16.1e}")
    print("(relative gradient error against the full batch: per-micro-batch means weight a token of a "
          "short sequence more than one of a long sequence)")


def part3():
    print("\nPart 3: adding up float16 gradients\n")
    mg.manual_seed(SEED)
    w = mg.nn.Parameter(mg.randn(64, 64, dtype="float16") * 0.1)
    ks, e16, e32 = [1, 2, 4, 8, 16, 32, 64], [], []
    for k in ks:
        xs = [mg.randn(16, 64, dtype="float16") for _ in range(k)]
        gs = [mg.randn(16, 64, dtype="float16") * (1.0 / k) for _ in range(k)]
        # the exact sum, in float64, of the very float16 micro-batch gradients that get added up
        exact = sum(xi.numpy().astype("float64").T @ gi.numpy().astype("float64") for xi, gi in zip(xs, gs))
        for buffer, errs in (("float16", e16), ("float32", e32)):
            w.grad = None if buffer == "float16" else mg.zeros(64, 64, dtype="float32")  # what accumulate() does
            for xi, gi in zip(xs, gs):
                (xi @ w).backward(gi)  # dW = x^T g, computed in float16, added into w.grad
            got = w.grad.numpy().astype("float64")
            errs.append(float(np.abs(got - exact).max() / np.abs(exact).max()))
    print(f"{'k':>4}{'float16 buffer':>16}{'float32 buffer':>16}   (error of the sum against its exact value)")
    for k, a, b in zip(ks, e16, e32):
        print(f"{k:>4}{a:>16.1e}{b:>16.1e}")
    return ks, e16, e32


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help=f"part 1 on a smaller GPT ({QUICK_CFG['n_layer']} blocks, {QUICK_CFG['n_embd']} wide, "
                         f"{QUICK_CFG['block_size']} tokens) and speed timed once instead of best of {REPEATS}")
    ap.add_argument("--no-plot", action="store_true", help="skip writing out/04_accumulation.png")
    args = ap.parse_args()
    results = part1(QUICK_CFG, 1) if args.quick else part1()
    part2()
    ks, e16, e32 = part3()
    if args.no_plot:
        return
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = list(results)
    bottom = np.zeros(len(names))
    for c in CATEGORIES:
        vals = np.array([results[n]["at_peak"][c] / 2 ** 20 for n in names])
        a1.bar(names, vals, bottom=bottom, label=c)
        bottom += vals
    a1.set_ylabel("memory at the peak, by category (MiB)")
    a1.set_title("One step of the GPT, batch 8")
    a1.tick_params(axis="x", labelrotation=15, labelsize=8)
    a1.legend(fontsize=8)
    a2.loglog(ks, e16, "o-", label="float16 buffer")
    a2.loglog(ks, e32, "s-", label="float32 buffer (what accumulate does)")
    a2.set_xlabel("micro-batches accumulated (k)")
    a2.set_ylabel("relative error against float64")
    a2.set_title("Accumulating float16 gradients")
    a2.legend()
    fig.tight_layout()
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "04_accumulation.png")
    fig.savefig(path, dpi=120)
    print(f"\nplot: {path}")


if __name__ == "__main__":
    main()
