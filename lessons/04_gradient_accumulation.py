"""Lesson 4: gradient accumulation. A big batch's gradient at a small batch's memory.

    python lessons/04_gradient_accumulation.py          # about 7 s (make tour, 1 BLAS thread, 2 busy cores, 2026-12-01)
    python lessons/04_gradient_accumulation.py --quick  # a smaller GPT in part 1, timed once: about 3 s

Part 1 replays, on the small GPT, the shape of the experiment in Hugging Face's guide "Efficient
Training on a Single GPU" (transformers documentation, 2022: docs/source/en/perf_train_gpu_one.mdx,
https://huggingface.co/docs/transformers/v4.21.0/perf_train_gpu_one), which fine-tuned
bert-large-uncased (sequences of 512 tokens) with the Trainer on a 16 GB V100 three ways:

    per_device_train_batch_size=4                          8.86 samples/s   14949 MB
    batch 1, gradient_accumulation_steps=4                 7.75 samples/s    8681 MB
    the same plus gradient_checkpointing=True              5.99 samples/s    6775 MB

(their numbers, quoted from the guide, not measured here: "GPU memory occupied" as nvidia-smi
shows it, the CUDA context's 1.3 GB included; against the first row, memory 0.58 and 0.45 of it,
speed 0.87 and 0.68). Less memory each time, and slower each time. Here the same three, plus
2 micro-batches of 4, on a batch of 8 (every lesson writes it so: 2 backward passes of 4 rows each;
the number of micro-batches is mg.accumulate's `steps`): peak bytes by category with mg.profile,
samples per second with a clock, and the gradient compared with the full batch's, every number measured.
Part 2 shows why each micro-batch's summed loss must be divided by the whole batch's token
count, not averaged per micro-batch (the bug fixed in Hugging Face transformers in late 2024).
Part 3 shows why mg.accumulate gives float16 parameters float32 gradient buffers: it runs
mg.accumulate itself, against a plain loop of backward() that adds into a float16 .grad.
Plot: out/04_accumulation.png.
"""
# %%
import sys
import time

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

import minigrad as mg
import minigrad.functional as F
from minigrad.accumulate import micro_batch_slices
from minigrad.gpt import GPT, GPTConfig
from minigrad.profiler import CATEGORIES, CATEGORY_COLORS, format_bytes

from _lesson import command_line, finish, micro_batches, predict, reveal, save_plot

# settings
SEED = 0
BATCH, VOCAB = 8, 32
CFG = dict(vocab_size=VOCAB, block_size=64, n_layer=4, n_head=4, n_embd=128)
REPEATS = 3
QUICK_CFG = dict(CFG, block_size=32, n_layer=2, n_embd=64)  # --quick: part 1's GPT, timed once
ROWS, DIM = 64, 64       # part 3: a batch of 64 rows through a 64 x 64 float16 linear layer
EXERCISES = (11,)  # python -m minigrad check N: the exercises this lesson prepares
PLOTS = {"04_accumulation.png": "memory at the peak of one GPT step, by category, for batch 8, 2 micro-batches of "
                                "4, 8 of 1 and 8 of 1 with checkpointing; and the error of float16 gradients summed "
                                "in a float16 or a float32 buffer"}


def loss_sum(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), reduction="sum")


def grads_of(model):
    return [p.grad.data.copy() for p in model.parameters()]


def rel_error(a, b):
    return max(float(np.abs(x - y).max() / np.abs(y).max()) for x, y in zip(a, b))


# %% [markdown]
# ## Part 1: batch 8, accumulated, and checkpointed

# %%
def part1(cfg=CFG, repeats=REPEATS):
    print(f"Part 1: one optimizer step on a batch of {BATCH} sequences of {cfg['block_size']} tokens "
          f"(GPT: {cfg['n_layer']} blocks, {cfg['n_embd']} wide)\n")
    x = mg.randint(0, VOCAB, (BATCH, cfg["block_size"]))
    y = mg.randint(0, VOCAB, (BATCH, cfg["block_size"]))
    runs = {"batch 8": (8, False), micro_batches(2, 4): (4, False), micro_batches(8, 1): (1, False),
            micro_batches(8, 1) + " + checkpointing": (1, True)}
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
    base = results["batch 8"]
    print(f"{'':<36}{'peak total':>12}{'activations':>13}{'gradients':>11}{'samples/s':>11}{'grad vs batch 8':>17}"
          f"{'memory, speed vs batch 8':>26}")
    for name, r in results.items():
        print(f"{name:<36}{format_bytes(r['total']):>12}{format_bytes(r['peaks']['activations']):>13}"
              f"{format_bytes(r['peaks']['gradients']):>11}{r['speed']:>11.1f}{r['error']:>17.1e}"
              f"{r['total'] / base['total']:>14.2f}{r['speed'] / base['speed']:>12.2f}")
    print("(peak total is the peak of all categories together, not the sum of the columns; relative "
          "gradient differences at float32 rounding level mean: the same gradient; compare the last two "
          "columns with the guide's ratios in this file's docstring)")
    return results


# %% [markdown]
# ## Part 2: divide by the whole batch's tokens

# %%
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


# %% [markdown]
# ## Part 3: float16 gradients, summed
# The loss is a linear probe, sum(out * g), whose gradient with respect to W is exactly g^T x (Linear
# computes x W^T), so the exact answer is known: g^T x / items, computed in float64 from the same
# float16 numbers. mg.accumulate divides every micro-batch's summed loss by the batch's items (every
# element of g), so the plain loop does the same multiplication before each backward.

# %%
def probe(out, g):
    """A summed loss whose gradient with respect to out is g."""
    return (out * g).sum()


def part3():
    print("\nPart 3: adding up float16 gradients\n")
    mg.manual_seed(SEED)
    model = mg.nn.Linear(DIM, DIM, bias=False).half()
    x, g = mg.randn(ROWS, DIM, dtype="float16"), mg.randn(ROWS, DIM, dtype="float16")
    items = ROWS * DIM
    exact = g.numpy().astype("float64").T @ x.numpy().astype("float64") / items

    def error():
        got = model.weight.grad.numpy().astype("float64")
        return float(np.abs(got - exact).max() / np.abs(exact).max())

    ks, e16, e32 = [1, 2, 4, 8, 16, 32, 64], [], []
    for k in ks:
        model.zero_grad()
        for s in micro_batch_slices(ROWS, steps=k):                 # the plain loop: .grad is float16
            (probe(model(x[s]), g[s]) * (1.0 / items)).backward()
        assert model.weight.grad.dtype.name == "float16"
        e16.append(error())
        model.zero_grad()
        result = mg.accumulate(model, probe, x, g, steps=k, ignore_index=None)  # every element of g counts
        assert result.grad_dtype == model.weight.grad.dtype.name == "float32"
        e32.append(error())
    print(f"a batch of {ROWS} rows in `steps` micro-batches through Linear({DIM}, {DIM}) in float16; the error of W's summed "
          f"gradient against its exact value (float64), relative to its largest entry")
    print(f"{'steps':>5}{'plain loop, float16 .grad':>28}{'mg.accumulate, float32 .grad':>31}")
    for k, a, b in zip(ks, e16, e32):
        print(f"{k:>5}{a:>28.1e}{b:>31.1e}")
    print(f"(each micro-batch's gradient is rounded to float16 either way, the floor both share; adding them up in "
          f"float16 rounds once more per micro-batch: {e16[-1] / e16[0]:.1f}x the error at {ks[-1]} steps)")
    return ks, e16, e32


# %% [markdown]
# ## The plot

# %%
def plot(results, ks, e16, e32):
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = list(results)
    bottom = np.zeros(len(names))
    for c in CATEGORIES:
        vals = np.array([results[n]["at_peak"][c] / 2 ** 20 for n in names])
        a1.bar(range(len(names)), vals, bottom=bottom, label=c, color=CATEGORY_COLORS[c])
        bottom += vals
    for i, n in enumerate(names):
        a1.text(i, bottom[i], f"{results[n]['total'] / 2 ** 20:.1f} MiB", ha="center", va="bottom", fontsize=8)
    a1.set_ylim(0, bottom.max() * 1.1)
    a1.set_ylabel("memory at the peak, by category (MiB)")
    a1.set_title(f"One step of the GPT, batch {BATCH} (labels: the peak total)")
    a1.set_xticks(range(len(names)), [n.replace(" of", "\nof").replace(" + ", "\n+ ") for n in names], fontsize=8)
    a1.legend(fontsize=8)
    green = CATEGORY_COLORS["gradients"]  # both are gradients: one colour, two line styles
    a2.loglog(ks, e16, "o--", color=green, mfc="none", label="plain loop of backward(): float16 .grad")
    a2.loglog(ks, e32, "s-", color=green, label="mg.accumulate: float32 .grad")
    a2.xaxis.set_major_locator(FixedLocator(ks))
    a2.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    a2.xaxis.set_minor_locator(NullLocator())
    a2.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0e}"))
    a2.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:.0e}" if f"{v:.0e}"[0] in "2468" else ""))
    a2.set_xlabel(f"steps: the batch of {ROWS} rows as that many micro-batches (log scale)")
    a2.set_ylabel("error of the summed gradient (relative, log scale)")
    a2.set_title("Summing float16 gradients over many micro-batches")
    a2.grid(True, which="both", alpha=0.3)
    a2.legend()
    print(f"\nplot: {save_plot(fig, '04_accumulation.png')}")


# %%
def main(argv=None):
    ap = command_line(__doc__, quick=f"part 1 on a smaller GPT ({QUICK_CFG['n_layer']} blocks, {QUICK_CFG['n_embd']} "
                                     f"wide, {QUICK_CFG['block_size']} tokens) and speed timed once instead of best "
                                     f"of {REPEATS}",
                      no_plot="skip writing out/04_accumulation.png")
    args = ap.parse_args(argv)
    guess = predict(f"{micro_batches(BATCH, 1)} instead of one batch of {BATCH}: the step's peak total as a share of "
                    f"batch {BATCH}'s (the parameters, AdamW's moments and the gradients stay)", "%", quick=args.quick)
    results = part1(QUICK_CFG, 1) if args.quick else part1()
    reveal(guess, 100 * results[micro_batches(BATCH, 1)]["total"] / results["batch 8"]["total"], "%")
    part2()
    ks, e16, e32 = part3()
    if not args.no_plot:
        plot(results, ks, e16, e32)
    finish(EXERCISES)


# %%
if __name__ == "__main__":
    main([] if "ipykernel" in sys.modules else None)  # in a notebook, the kernel's arguments are not the lesson's
