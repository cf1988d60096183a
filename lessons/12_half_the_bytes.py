"""Lesson 12: half the bytes. Mixed precision (autocast, loss scaling) and the optimizer's share, by the ledger.

    python lessons/12_half_the_bytes.py            # about 12 s (make tour, 1 BLAS thread, 2 cores, 2026-12-02)
    python lessons/12_half_the_bytes.py --quick    # part 4's batch-4 rows only: about 4 s

Training in float32 keeps every number in 4 bytes. Mixed precision runs the matrix products in 2 (bfloat16 or
float16) and keeps the rest where precision matters: the weights stay float32 (the "master" copy, which the
optimizer updates), the losses run in float32, and each product reads a 2-byte copy of its weight. PyTorch calls
the switch torch.autocast; minigrad's is mg.autocast, with PyTorch's lists of which op runs in which dtype (NOTE
[autocast's lists] in minigrad/amp/autocast_mode.py).

Part 1: what autocast keeps in which dtype: a small GPT's forward and backward under mg.autocast("cpu") (bfloat16)
        against float32, by mg.profile's saved_bytes_by_dtype(); and the cache of cast weights (cast_weight_bytes()).
Part 2: loss scaling, seen failing and working: float16 autocast on a regression whose loss is small, without
        mg.amp.GradScaler (every gradient flushes to zero) and with it (float32 training's weights); then a scaler
        that starts too high, backs off and skips those steps.
Part 3: the optimizer's share: AdamW, Adafactor and AdamW8bit on the same GPT, the ledger's 'optimizer' category,
        in bytes and in bytes per parameter.
Part 4: the write-up's mixed-precision and optimizer rows (Hugging Face, bert-large-uncased on a V100), predicted
        on 'meta' by the planner and replayed through PyTorch's caching allocator (plan.reserved), next to what
        they measured.
Plot: out/12_half_the_bytes.png.
"""
# %%
import dataclasses
import inspect
import sys
import time
import warnings

import numpy as np

import minigrad as mg
import minigrad.functional as F
from minigrad import plan
from minigrad.gpt import GPT, GPTConfig
from minigrad.optim.adamw8bit import BLOCK_SIZE
from minigrad.profiler import CATEGORY_COLORS, format_bytes

from _lesson import command_line, finish, micro_batches, predict, reveal, save_plot

# %% settings
SEED = 0
CFG = dict(vocab_size=65, block_size=32, n_layer=2, n_head=4, n_embd=64)  # parts 1 and 3: lesson 1's small GPT
BATCH = 8
OPTIMIZERS = {"AdamW": lambda ps: mg.optim.AdamW(ps, lr=1e-3),
              "Adafactor": lambda ps: mg.optim.Adafactor(ps),  # Hugging Face's defaults: relative step, no beta1
              "AdamW8bit": lambda ps: mg.optim.AdamW8bit(ps, lr=1e-3)}
MIN_8BIT = inspect.signature(mg.optim.AdamW8bit).parameters["min_8bit_size"].default  # bitsandbytes' 4096
SCALER_STEPS, TOO_HIGH = 20, 2.0 ** 48
# Hugging Face's measurements (docs/will_it_fit.md, rows H1 and H4-H9, source S1): bert-large-uncased, seq 512, V100
# 16 GB, NVML after train() (MiB), and the CUDA context alone (H0). Quoted, not computed; H1 and H0 are lesson 9's.
MODEL, SEQ = "bert-large-uncased", 512
HF_CONTEXT_MIB = 1343
ACC = dict(batch_size=1, grad_accum=4, checkpointing="every", precision="fp16-mixed")
HF_ROWS = {  # run: (settings of plan.Setup, measured MiB)
    "H1 batch 4, fp32, AdamW": (dict(batch_size=4, precision="fp32", optimizer="adamw"), 14949),
    "H4 batch 4, fp16, AdamW": (dict(batch_size=4, precision="fp16-mixed", optimizer="adamw"), 13939),
    "H6 batch 4, fp32, Adafactor": (dict(batch_size=4, precision="fp32", optimizer="adafactor"), 12295),
    "H8 batch 4, fp32, 8-bit Adam": (dict(batch_size=4, precision="fp32", optimizer="adamw8bit"), 13085),
    f"H5 {micro_batches(4, 1)}, ckpt, fp16, AdamW": (dict(ACC, optimizer="adamw"), 7275),
    f"H7 {micro_batches(4, 1)}, ckpt, fp16, Adafactor": (dict(ACC, optimizer="adafactor"), 4847),
    f"H9 {micro_batches(4, 1)}, ckpt, fp16, 8-bit Adam": (dict(ACC, optimizer="adamw8bit"), 5363),
}
# The software of January 2022, as lesson 9 predicts the fp32 rows with
HF_SOFTWARE = plan.Software(zero_grad="zeros", softmax_keeps_input=True)
HF_SOFTWARE_FP16 = dataclasses.replace(HF_SOFTWARE, gelu_float32=True)  # PyTorch 1.9's CUDA autocast list
PLOTS = {"12_half_the_bytes.png": "what a small GPT's records save for backward by dtype under float32 and bfloat16 "
                                  "autocast, with the weights' cast copies (KiB); the loss scale of a float16 run "
                                  "that starts too high, step by step; the optimizer's bytes per parameter under "
                                  "AdamW, Adafactor and AdamW8bit"}
DTYPE_COLORS = {"float32": "#8c564b", "bfloat16": "#e377c2", "int64": "#7f7f7f", "bool": "#bcbd22"}  # not categories
EXERCISES = (14,)
KiB, MiB = 2**10, 2**20


# %% [markdown]
# ## Part 1: what autocast keeps in which dtype

# %%
def part1():
    mg.manual_seed(SEED)
    model = GPT(GPTConfig(**CFG))
    x, y = mg.randint(0, CFG["vocab_size"], (BATCH, CFG["block_size"])), \
        mg.randint(0, CFG["vocab_size"], (BATCH, CFG["block_size"]))
    n = sum(p.numel() for p in model.parameters())
    runs = {}
    for name, on in (("float32", False), ("bfloat16 autocast", True)):
        model.zero_grad()
        with mg.profile(model) as prof:
            with mg.autocast("cpu", enabled=on):
                logits, loss = model(x, y)
            loss.backward()  # after the region, as PyTorch advises: backward goes back through the casts
        runs[name] = dict(by_dtype=prof.saved_bytes_by_dtype(), cast=prof.cast_weight_bytes(),
                          activations=prof.peak_bytes("activations"), logits=logits.dtype.name,
                          loss=loss.dtype.name, grads={p.grad.dtype.name for p in model.parameters()},
                          weights={p.dtype.name for p in model.parameters()})
    print(f"Part 1: a GPT of {n:,} parameters ({CFG['n_layer']} blocks, {CFG['n_embd']} wide), batch {BATCH} x "
          f"{CFG['block_size']} tokens, one forward and backward under mg.profile.\n")
    seen = {d for r in runs.values() for d in r["by_dtype"]}
    dtypes = [d for d in DTYPE_COLORS if d in seen] + sorted(seen - set(DTYPE_COLORS))
    print(f"{'run':<20}" + "".join(f"{d:>12}" for d in dtypes) + f"{'saved':>12}{'peak activations':>18}"
          f"{'cast weights':>14}")
    for name, r in runs.items():
        print(f"{name:<20}" + "".join(f"{format_bytes(r['by_dtype'].get(d, 0)):>12}" for d in dtypes)
              + f"{format_bytes(sum(r['by_dtype'].values())):>12}{format_bytes(r['activations']):>18}"
              f"{format_bytes(r['cast']):>14}")
    mixed, full = runs["bfloat16 autocast"], runs["float32"]
    cast_params = sum(p.numel() for name, p in model.named_parameters() if ".c_" in name or "lm_head" in name)
    assert mixed["cast"] == 2 * cast_params  # one 2-byte copy of each weight the products read, whatever the uses
    print("(saved: what the records kept for backward, summed over records as mg.profile's table does; peak "
          "activations: each buffer once, at the peak)\n")
    print(f"Under autocast the weights stay {', '.join(sorted(mixed['weights']))} and so do their gradients "
          f"({', '.join(sorted(mixed['grads']))}); the logits come out {mixed['logits']} (lm_head is a product) and "
          f"the loss {mixed['loss']} (cross_entropy is on the float32 list). The products keep bfloat16 copies of "
          f"what they read; the residual stream stays float32 (a float32 embedding plus a bfloat16 product is "
          f"float32, the widest), so the layer norms after it run in float32, as does the loss: the records save "
          f"{sum(mixed['by_dtype'].values()) / sum(full['by_dtype'].values()):.0%} of float32's bytes, not half.")
    print(f"The cast weights: each product's weight and bias is cast to bfloat16 once per region and cached (NOTE "
          f"[the weight-cast cache]): {format_bytes(mixed['cast'])}, 2 bytes for each of the {cast_params:,} "
          f"parameters that the products read ({2 * cast_params:,} B, asserted; the embeddings and layer norms are "
          f"not cast). "
          f"They are counted as activations while a matmul keeps them, and apart by cast_weight_bytes().\n")
    return runs


# %% [markdown]
# ## Part 2: loss scaling, failing and working

# %%
def regression(steps, scaler=None, autocast=True):
    """A float16-autocast regression whose loss is small (1e-7 of an MSE, as tests/test_amp.py runs it): its
    gradients at the products, about 1e-8, are below float16's smallest number (6e-8). Returns the first step's
    gradients, the weights after `steps` AdamW steps, and the scale after each step."""
    mg.manual_seed(SEED)
    model = mg.nn.Sequential(mg.nn.Linear(16, 32), mg.nn.Tanh(), mg.nn.Linear(32, 1))
    opt = mg.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    x, y = mg.randn(64, 16), mg.randn(64, 1)
    first, scales = None, []
    for _ in range(steps):
        with mg.autocast("cpu", dtype=mg.float16, enabled=autocast):
            loss = F.mse_loss(model(x), y) * 1e-7
        opt.zero_grad()
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            with warnings.catch_warnings():  # a scale too large overflows float16 on purpose: NumPy says so
                warnings.simplefilter("ignore", RuntimeWarning)
                scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        if first is None:
            first = [p.grad.numpy().copy() for p in model.parameters()]
    return first, [p.detach().numpy().copy() for p in model.parameters()], scales


def part2():
    print(f"Part 2: float16 autocast (mg.autocast('cpu', dtype=mg.float16)) on a small regression whose loss is 1e-7 "
          f"of an MSE, {SCALER_STEPS} AdamW steps of lr 1e-2, against the same run in float32.\n")
    ref_grads, ref_w, _ = regression(SCALER_STEPS, autocast=False)
    _, start, _ = regression(0)
    zero_grads, stuck, _ = regression(SCALER_STEPS)
    grads, weights, scales = regression(SCALER_STEPS, mg.amp.GradScaler("cpu"))
    zeros = sum(int((g == 0).sum()) for g in zero_grads) / sum(g.size for g in zero_grads)
    moved = max(float(np.abs(a - b).max()) for a, b in zip(stuck, start))
    grad_err = max(float(np.linalg.norm(g - r) / np.linalg.norm(r)) for g, r in zip(grads, ref_grads))
    w_err = max(float(np.abs(a - b).max()) for a, b in zip(weights, ref_w))
    ref_moved = max(float(np.abs(a - b).max()) for a, b in zip(ref_w, start))
    print(f"{'run':<32}{'zero gradients':>16}{'grad vs float32':>17}{'weights vs float32':>20}")
    stuck_err = max(float(np.abs(a - b).max()) for a, b in zip(stuck, ref_w))
    print(f"{'float16, no scaler':<32}{zeros:>16.0%}{'':>17}{stuck_err:>20.1e}")
    scaled_zeros = sum(int((g == 0).sum()) for g in grads) / sum(g.size for g in grads)
    print(f"{'float16, GradScaler':<32}{scaled_zeros:>16.0%}{grad_err:>17.1e}{w_err:>20.1e}")
    print(f"\nWithout a scaler {zeros:.0%} of the gradients are 0: the float32 loss's gradient, {2e-7 / 64:.1e} times "
          f"each output's error (1e-7 x 2 (out - y) / 64), is cast back to float16 at the last product, below "
          f"float16's smallest number ({float(np.finfo(np.float16).smallest_subnormal):.1e}), and flushed; the "
          f"weights moved {moved:g} in {SCALER_STEPS} steps. With "
          f"GradScaler the loss is multiplied by {scales[0]:g} (2^16) before backward and the float32 gradients "
          f"divided by it before the step: the gradients are float32's within {grad_err:.1e} (float16's rounding), "
          f"and after {SCALER_STEPS} steps, which moved the float32 weights by up to {ref_moved:.2f}, the weights "
          f"are within {w_err:.1e}.")
    scaler = mg.amp.GradScaler("cpu", init_scale=TOO_HIGH, growth_interval=4)
    _, _, high = regression(SCALER_STEPS, scaler)
    trail = [TOO_HIGH] + high
    skipped = sum(b < a for a, b in zip(trail, trail[1:]))
    print(f"\nA scaler that starts too high (2^{np.log2(TOO_HIGH):.0f}, growth_interval 4): the scaled gradients "
          f"overflow float16 ({float(np.finfo(np.float16).max):,.0f} at most) to inf, so step() skips the step and "
          f"update() halves the scale. "
          f"log2 of the scale after each step: {' '.join(f'{np.log2(s):.0f}' for s in high)}. {skipped} steps "
          f"skipped; after 4 clean steps in a row it doubles and tries again. That rule, PyTorch's "
          f"_amp_update_scale_, is exercise 14's first half.\n")
    return dict(zeros=zeros, grad_err=grad_err, w_err=w_err, high=high)


# %% [markdown]
# ## Part 3: the optimizer's share

# %%
def part3():
    cfg = dict(CFG, n_embd=128)  # wider, so that most matrices have 4096 elements or more (AdamW8bit's threshold)
    print(f"Part 3: the optimizer's state on a GPT {cfg['n_embd']} wide ({cfg['n_layer']} blocks), measured by "
          f"mg.profile's 'optimizer' category after a second step (the state exists from the first).\n")
    x, y = mg.randint(0, cfg["vocab_size"], (BATCH, cfg["block_size"])), \
        mg.randint(0, cfg["vocab_size"], (BATCH, cfg["block_size"]))
    rows = {}
    for name, make in OPTIMIZERS.items():
        mg.manual_seed(SEED)
        model = GPT(GPTConfig(**cfg))
        opt = make(list(model.parameters()))
        for _ in range(2):
            with mg.profile(model, opt) as prof:
                opt.zero_grad()
                _, loss = model(x, y)
                loss.backward()
                opt.step()
        n = sum(p.numel() for p in model.parameters())
        rows[name] = dict(n=n, optimizer=prof.peak_bytes("optimizer"), parameters=prof.peak_bytes("parameters"),
                          total=prof.peak_bytes())
    print(f"{'optimizer':<12}{'parameters':>12}{'optimizer state':>17}{'bytes/param':>13}{'peak total':>12}")
    for name, r in rows.items():
        print(f"{name:<12}{format_bytes(r['parameters']):>12}{format_bytes(r['optimizer']):>17}"
              f"{r['optimizer'] / r['n']:>13.2f}{format_bytes(r['total']):>12}")
    small = sum(p.numel() for p in GPT(GPTConfig(**cfg)).parameters() if p.numel() < MIN_8BIT)
    print(f"\nAdamW keeps two float32 moments shaped like each parameter: 8 bytes each. Adafactor keeps, per "
          f"matrix, a row and a column average of the squared gradient (and no first moment by Hugging Face's "
          f"default): {rows['Adafactor']['optimizer'] / rows['Adafactor']['n']:.2f} bytes per parameter here. "
          f"AdamW8bit keeps the two moments in one byte each plus a float32 maximum per block of {BLOCK_SIZE} "
          f"({2 + 2 * 4 / BLOCK_SIZE:.2f} bytes), but parameters under {MIN_8BIT:,} elements (the biases and layer "
          f"norms: {small:,} here) keep float32 moments, "
          f"and the two 1 KiB code maps are shared: {rows['AdamW8bit']['optimizer'] / rows['AdamW8bit']['n']:.2f}.\n")
    return rows


# %% [markdown]
# ## Part 4: the write-up's table, predicted

# %%
def part4(quick):
    print(f"Part 4: Hugging Face's mixed-precision and optimizer rows ({MODEL}, seq {SEQ}, V100 16 GB, January "
          f"2022; docs/will_it_fit.md), predicted on 'meta' with that day's software. NVML counted what PyTorch's "
          f"caching allocator had reserved, plus the CUDA context ({HF_CONTEXT_MIB} MiB): so each run is replayed "
          f"from the model's first byte through the allocator's rules (plan.reserved), as lesson 9 does for the "
          f"fp32 rows. The fp16 rows use PyTorch 1.9's autocast list, GELU in float32 (the write-up does not say "
          f"its version; docs/will_it_fit.md says why 1.9).")
    print(f"\n{'run':<48}{'measured':>10}{'peak':>9}{'reserved':>10}{'+ context':>11}{'pred - meas':>12}")
    found = {}
    for name, (kw, measured) in HF_ROWS.items():
        if quick and kw.get("grad_accum", 1) > 1:
            continue
        software = HF_SOFTWARE_FP16 if kw["precision"] == "fp16-mixed" else HF_SOFTWARE
        alloc, _ = plan.reserved(plan.Setup(MODEL, seq_len=SEQ, software=software, **kw))
        peak, found[name] = alloc.max_memory_allocated() / MiB, alloc.max_memory_reserved() / MiB
        full = found[name] + HF_CONTEXT_MIB
        print(f"{name:<48}{measured:>10,}{peak:>9,.0f}{found[name]:>10,.0f}{full:>11,.0f}{full - measured:>+12,.0f}")
    print("(peak: the most bytes allocated at once; reserved: the allocator's segments, peak plus the fragmentation "
          "of freed blocks it keeps)")
    base = "H1 batch 4, fp32, AdamW"
    print(f"\n{'what it saves at batch 4':<48}{'measured':>10}{'predicted':>11}")
    for name in found:
        if name != base and name.split()[1] == "batch":
            print(f"{name[3:]:<48}{HF_ROWS[base][1] - HF_ROWS[name][1]:>10,}{found[base] - found[name]:>11,.0f}")
    print("\n(docs/will_it_fit.md says, row by row, what the GPU holds beyond the tensors.)\n")
    return found


# %%
def plot(runs, scaling, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4.6))
    names = list(runs)
    bottom = [0.0] * len(names)
    for dt, colour in DTYPE_COLORS.items():
        values = [runs[n]["by_dtype"].get(dt, 0) / KiB for n in names]
        a1.bar(range(len(names)), values, bottom=bottom, label=f"saved in {dt}", color=colour, width=0.5)
        bottom = [b + v for b, v in zip(bottom, values)]
    a1.bar([i + 0.45 for i in range(len(names))], [runs[n]["cast"] / KiB for n in names], width=0.3,
           color=CATEGORY_COLORS["parameters"], hatch="//", edgecolor="k", label="weights' cast copies")
    a1.set_xticks(range(len(names)), names)
    a1.set_ylabel("bytes the records saved for backward (KiB)")
    a1.set_title(f"a GPT, {CFG['n_layer']} blocks x {CFG['n_embd']}, batch {BATCH} x {CFG['block_size']}",
                 fontsize=10)
    a1.legend(fontsize=8)
    a1.grid(True, axis="y", alpha=0.3)
    high = [TOO_HIGH] + scaling["high"]
    a2.step(range(len(high)), np.log2(high), where="post", color="k")
    skipped = [i + 1 for i, (a, b) in enumerate(zip(high, high[1:])) if b < a]
    a2.plot(skipped, np.log2([high[i] for i in skipped]), "x", color=CATEGORY_COLORS["transient"], ms=9,
            label="step skipped (a gradient was inf)")
    a2.set_xlabel("optimizer step")
    a2.set_ylabel("log2 of the loss scale")
    a2.set_title("GradScaler from 2^48, growth_interval 4 (float16)", fontsize=10)
    a2.legend(fontsize=8)
    a2.grid(True, alpha=0.3)
    opts = list(rows)
    per = [rows[o]["optimizer"] / rows[o]["n"] for o in opts]
    a3.bar(opts, per, color=CATEGORY_COLORS["optimizer"])
    for i, v in enumerate(per):
        a3.annotate(f"{v:.2f}", (i, v), ha="center", va="bottom", fontsize=9)
    a3.set_ylabel("optimizer state (bytes per parameter)")
    a3.set_title(f"the optimizer's share, {rows[opts[0]]['n']:,} parameters (mg.profile)", fontsize=10)
    a3.grid(True, axis="y", alpha=0.3)
    print(f"plot: {save_plot(fig, '12_half_the_bytes.png')}")


def main(argv=None):
    ap = command_line(__doc__, quick="part 4's batch-4 rows only (the accumulated, checkpointed rows take longest)",
                      no_plot="print only")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    guess = predict("a small GPT's forward and backward under bfloat16 autocast: the bytes its records save for "
                    "backward, as a share of the float32 run's", "%", quick=args.quick)
    with mg.device("cpu"):  # parts 1-3 on the CPU, whatever MINIGRAD_DEVICE says: mg.autocast("cpu") is bfloat16's
        runs = part1()
        reveal(guess, 100 * sum(runs["bfloat16 autocast"]["by_dtype"].values())
               / sum(runs["float32"]["by_dtype"].values()), "%")
        scaling = part2()
        rows = part3()
    part4(args.quick)
    if not args.no_plot:
        plot(runs, scaling, rows)
    finish(EXERCISES, t0)


# %%
if __name__ == "__main__":
    main([] if "ipykernel" in sys.modules else None)  # in a notebook: the defaults
