"""Lesson 9: Will it fit? Full-size models on the 'meta' device, from one step's bytes to a plan for a GPU.

    python lessons/09_will_it_fit.py            # about 33 s (make tour, 1 BLAS thread, 2 busy cores, 2026-12-01)
    python lessons/09_will_it_fit.py --quick    # skips gpt2-xl's plan: about 16 s

The lessons so far measured models of a hundred thousand parameters. The ones people fine-tune have
hundreds of millions, and the question behind every out-of-memory error is: how much will one training
step take, and which micro-batch, accumulation and checkpointing fit my GPU for the least compute?

minigrad answers by running the real step on the 'meta' device (minigrad/backend/meta.py): tensors with a shape
and a dtype and no data, on which every op runs and the ledger (mg.profile) counts exactly the bytes and
FLOPs a real run would, in about a second, at any size. tests/test_plan.py runs the same steps for real
where they fit in memory and checks the numbers are equal.

Part 1: bert-large-uncased's step by category, at a few batch sizes, with accumulation and checkpointing
        (the three runs of a widely read write-up: batch 4; 4 micro-batches of 1; that + checkpointing).
Part 2: where the activations go inside one of its 24 layers, op by op.
Part 3: the same three runs against what Hugging Face measured on a V100 (docs/will_it_fit.md).
Part 4: the planner: what fits a 16 GB GPU for bert-large, and an 80 GB one for gpt2-xl.
Plots: out/09_will_it_fit.png. The commands behind it: python -m minigrad memory / plan --help.
"""
# %%
import sys
import time

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

import minigrad as mg
from minigrad import models, plan
from minigrad.profiler import CATEGORY_COLORS
from minigrad.tensor import mark, records_since

from _lesson import command_line, finish, micro_batches, predict, reveal, save_plot

# %% settings
MODEL, SEQ = "bert-large-uncased", 512
BATCHES = (1, 2, 4, 8)
ACCUMULATED = micro_batches(4, 1)  # as every lesson writes it: how many micro-batches, then how big
RUNS = {"batch 4": dict(batch_size=4), ACCUMULATED: dict(batch_size=1, grad_accum=4),
        ACCUMULATED + " + checkpointing": dict(batch_size=1, grad_accum=4, checkpointing="every")}
# Hugging Face's measurements (docs/will_it_fit.md, source S1): bert-large-uncased, seq 512, fp32, AdamW, V100 16 GB,
# read with NVML after training (MiB), and the same process with only the CUDA context (H0). Quoted, not computed.
HF_MIB = dict(zip(RUNS, (14949, 8681, 6775)))
HF_CONTEXT_MIB = 1343
# The software of January 2022 (PyTorch 1.10 was current): the Trainer's model.zero_grad() zeroed the gradients in
# place (set_to_none=False before PyTorch 2.0), and softmax kept its input as well as its output (until 1.11).
HF_SOFTWARE = plan.Software(zero_grad="zeros", softmax_keeps_input=True)
PLOTS = {"09_will_it_fit.png": "one training step of bert-large by category (GiB) for each batch size and for "
                               "accumulation and checkpointing; the activations one layer keeps, op by op (MiB)"}
EXERCISES = (6, 13)
MiB, GiB = 2**20, 2**30


def part1():
    print(f"Part 1: one training step of {MODEL} at sequence length {SEQ} (AdamW, fp32), predicted on 'meta'.\n")
    rows = {f"batch {b}": plan.predict(plan.Setup(MODEL, b, SEQ)) for b in BATCHES}
    rows.update({name: plan.predict(plan.Setup(MODEL, seq_len=SEQ, **kw)) for name, kw in RUNS.items()
                 if name != "batch 4"})
    head = f"{'step':<38}" + "".join(f"{c:>13}" for c in plan.ORDER) + f"{'total':>10}{'FLOPs/sample':>14}"
    print(head + "\n" + "-" * len(head))
    for name, p in rows.items():
        print(f"{name:<38}" + "".join(f"{p.bytes[c] / GiB:>13.2f}" for c in plan.ORDER)
              + f"{p.bytes['total'] / GiB:>10.2f}{p.flops_per_sample:>14.3e}")
    print("(GiB at the moment the step's total peaks; the optimizer's state is AdamW's two moments, twice the "
          "parameters)\n")
    b1, b8 = rows["batch 1"], rows["batch 8"]
    per_sample = (b8.bytes["activations"] - b1.bytes["activations"]) / 7
    fixed = sum(b1.bytes[c] for c in ("parameters", "gradients", "optimizer"))
    acc, ckpt = rows[ACCUMULATED], rows[ACCUMULATED + " + checkpointing"]
    print(f"Each sequence adds {per_sample / GiB:.2f} GiB of activations; parameters, gradients and optimizer "
          f"state stay at {fixed / GiB:.2f} GiB whatever the batch. Accumulating 4 micro-batches of 1 instead of "
          f"one batch of 4 computes the same gradient in {acc.bytes['total'] / rows['batch 4'].bytes['total']:.0%} "
          f"of the memory, for the same FLOPs; checkpointing every layer takes it to "
          f"{ckpt.bytes['total'] / rows['batch 4'].bytes['total']:.0%} for {ckpt.overhead:.0%} more FLOPs (one "
          f"more forward of each layer).")
    if ckpt.bytes["activations"] == 0:  # NOTE [a step's temporaries], minigrad/optim/optimizer.py
        print(f"Checkpointed, the peak is no longer in backward but in the optimizer's step: every gradient, the "
              f"moments, and {ckpt.bytes['transient'] / GiB:.2f} GiB of AdamW's temporaries (its arithmetic's "
              f"arrays, two of the largest parameter's size) on top of the weights.")
    print()
    return rows


def part2():
    """Run one layer's forward on 'meta' and split what its records keep, op by op, each buffer counted once
    (in the first op that keeps it)."""
    batch = 4
    mg.manual_seed(0)
    model = models.build(MODEL, device="meta")
    x = models.example_batch(MODEL, batch, SEQ, device="meta")
    blocks, h = models.blocks_and_input(model, x)
    with mg.profile() as prof:
        start = mark()
        out = blocks[0](h)
        seen, parts = set(), []
        for r in sorted(records_since(out, start), key=lambda r: r.seq):
            kept = prof.activations_kept([r])
            new = [a for a in r.saved if mg.backend.is_array(a) and prof.buffer_id(a) in kept
                   and prof.buffer_id(a) not in seen]
            seen.update(prof.buffer_id(a) for a in new)
            parts.append((r.name, sum(kept[prof.buffer_id(a)] for a in new), [mg.backend.owner(a) for a in new]))
    total = sum(n for _, n, _ in parts)
    print(f"Part 2: what one of the 24 layers keeps for backward, batch {batch} x {SEQ}: {total / MiB:.0f} MiB, "
          f"op by op in the order they ran (each buffer once, under the first op that keeps it):\n")
    for name, n, arrays in parts:
        if n >= MiB:
            shapes = ", ".join(f"{a.shape} {a.dtype.name}" for a in arrays)
            print(f"  {name:<12}{n / MiB:>8.1f} MiB   {shapes}")
    cfg = models.config(MODEL)
    T, C, H = SEQ, cfg.hidden_size, cfg.num_attention_heads
    square = sum(n for _, n, arrays in parts if any(a.shape[-2:] == (T, T) for a in arrays))
    print(f"\nThe attention scores are {H} x {T} x {T} numbers per sequence against {T} x {C} for a hidden state: the "
          f"arrays of shape (B, heads, T, T) are {square / total:.0%} of the layer's activations. That is why "
          f"fused attention (PyTorch's scaled_dot_product_attention, FlashAttention), which recomputes them in "
          f"backward, saves so much at long sequences.\n")
    return parts


def part3(rows):
    print("Part 3: against the world. Hugging Face fine-tuned bert-large-uncased on a V100 with these three runs "
          "(January 2022) and read the GPU's memory with NVML (MiB, the CUDA context included). minigrad predicts "
          "with the software of that day: gradients zeroed in place (they stay allocated through the next forward) "
          "and a softmax that kept its input too (PyTorch 1.10), and adds the CUDA context they measured alone "
          f"({HF_CONTEXT_MIB} MiB):\n")
    print(f"{'run':<38}{'measured':>10}{'predicted':>11}{'+ context':>11}{'pred - meas':>12}")
    predicted = {}
    for name, kw in RUNS.items():
        p = plan.predict(plan.Setup(MODEL, seq_len=SEQ, software=HF_SOFTWARE, **kw))
        predicted[name] = p.bytes["total"] / MiB
        full = predicted[name] + HF_CONTEXT_MIB
        print(f"{name:<38}{HF_MIB[name]:>10,}{predicted[name]:>11,.0f}{full:>11,.0f}{full - HF_MIB[name]:>+12,.0f}")
    today = {name: rows[name].bytes["total"] / MiB for name in RUNS}  # part 1 ran them with today's software
    names = list(RUNS)
    print(f"\n{'what it saves':<36}{'measured':>10}{'predicted':>11}")
    for a, b, what in ((names[0], names[1], "accumulation (batch 4 -> 4 of 1)"),
                       (names[1], names[2], "checkpointing (every layer)")):
        print(f"{what:<36}{HF_MIB[a] - HF_MIB[b]:>10,}{predicted[a] - predicted[b]:>11,.0f}")
    print(f"\nWith today's PyTorch (gradients set to None, softmax keeping only its output) the same runs would "
          f"hold {', '.join(f'{today[n]:,.0f}' for n in names)} MiB of tensors instead of "
          f"{', '.join(f'{predicted[n]:,.0f}' for n in names)}: "
          f"python -m minigrad memory --help lists the switches.")
    print("\nThe rest is what a real GPU holds beyond the tensors: the caching allocator keeps freed blocks "
          "reserved and rounds each allocation up, cuBLAS keeps workspaces, and fragmentation leaves gaps; "
          "differences of two runs cancel most of it. docs/will_it_fit.md explains each row.")
    alloc, _ = plan.reserved(plan.Setup(MODEL, seq_len=SEQ, software=HF_SOFTWARE, **RUNS[names[0]]))
    kept = alloc.max_memory_reserved() / MiB
    print(f"The allocator's share can be predicted too: replayed through its rules (profiler/allocator.py; "
          f"`memory --reserved`), the first run's buffers need {kept:,.0f} MiB of segments for a peak of "
          f"{alloc.max_memory_allocated() / MiB:,.0f} MiB allocated; with the context, {kept + HF_CONTEXT_MIB:,.0f} "
          f"MiB against the {HF_MIB[names[0]]:,} measured. Lesson 12 does it for every row.\n")
    return predicted


def part4(quick):
    cases = [(MODEL, "16GB", 32, SEQ)] + ([] if quick else [("gpt2-xl", "80GB", 64, 1024)])
    print("Part 4: the planner. For an optimizer batch, it tries micro-batches that divide it under each "
          "checkpointing strategy, on 'meta', and ranks what fits by FLOPs per sample:")
    for name, memory, batch, seq in cases:
        budget = plan.parse_bytes(memory)
        fits, tried = plan.search(name, budget, batch, seq)
        print(f"\n{name}, batch {batch} x {seq}, {memory} ({budget / GiB:.1f} GiB): {len(tried)} steps run on 'meta'")
        for i, p in enumerate(fits, 1):
            s = p.setup
            print(f"  {i}. {micro_batches(s.grad_accum, s.batch_size) + ',':<23} checkpointing "
                  f"{s.checkpointing:<7} {p.bytes['total'] / GiB:6.2f} GiB, {p.flops_per_sample:.3e} FLOPs per "
                  f"sample ({p.overhead:.0%} recompute)")
    print(f"\nThe same from the command line: python -m minigrad plan --model {cases[0][0]} --memory {cases[0][1]} "
          f"--batch-size {cases[0][2]} --seq-len {cases[0][3]}")
    print("It runs every step it ranks. Exercise 13 asks for a planner that predicts them instead: your exercise 9 "
          "for the blocks, and a count of its own for everything else the step holds at its peak, until it picks "
          "what mg.profile then measures within the budget.\n")


def plot(rows, parts):
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [1.3, 1]})
    names = list(rows)
    bottom = [0.0] * len(names)
    for c in plan.ORDER:
        values = [rows[n].bytes[c] / GiB for n in names]
        a1.bar(range(len(names)), values, bottom=bottom, label=c, color=CATEGORY_COLORS[c])
        bottom = [b + v for b, v in zip(bottom, values)]
    a1.set_xticks(range(len(names)), [n.replace(" + ", "\n+ ").replace(" of ", "\nof ") for n in names], fontsize=8)
    a1.set_ylabel("memory at the step's peak (GiB)")
    a1.set_title(f"{MODEL}, seq {SEQ}, AdamW fp32: one training step", fontsize=10)
    a1.legend(fontsize=8)
    a1.grid(True, axis="y", alpha=0.3)
    T = SEQ
    shown = [(f"#{i} {name}", n / MiB, any(a.shape[-2:] == (T, T) for a in arrays))
             for i, (name, n, arrays) in enumerate(parts) if n >= MiB]
    red = CATEGORY_COLORS["activations"]
    labelled = set()
    for y, (_, v, square) in enumerate(shown):  # the (B, heads, T, T) arrays: hatched, the same category's colour
        label = f"keeps a (B, heads, T, T) array, T = {T}" if square else "keeps (B, T, C) or (B, T, 4C) arrays"
        a2.barh(y, v, color=red, hatch="///" if square else None, edgecolor="k" if square else red, lw=0.8,
                label=None if label in labelled else label)
        labelled.add(label)
    a2.set_yticks(range(len(shown)), [s for s, _, _ in shown], fontsize=8)
    a2.invert_yaxis()
    a2.set_xlabel("activations kept for backward (MiB)")
    a2.set_ylabel(f"#: the op's place among the layer's {len(parts)} ops, in the order they ran", fontsize=8)
    a2.set_title("one layer, batch 4: each op that keeps 1 MiB or more", fontsize=10)
    a2.legend(fontsize=8, loc="lower right")
    a2.grid(True, axis="x", alpha=0.3)
    print(f"plot: {save_plot(fig, '09_will_it_fit.png')}")


def main(argv=None):
    ap = command_line(__doc__, quick="skip gpt2-xl's plan", no_plot="print only")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    n = models.parameter_count(MODEL)
    guess = predict(f"{MODEL} has {n:,} parameters. Accumulating, all their gradients are alive at the step's peak: "
                    f"in float32 with AdamW, what do the parameters, the gradients and the optimizer's state take "
                    f"together?", "GiB")
    rows = part1()
    reveal(guess, sum(rows[ACCUMULATED].bytes[c] for c in ("parameters", "gradients", "optimizer")) / GiB, "GiB")
    parts = part2()
    part3(rows)
    part4(args.quick)
    if not args.no_plot:
        plot(rows, parts)
    finish(EXERCISES, t0)


# %%
if __name__ == "__main__":
    main([] if "ipykernel" in sys.modules else None)  # in a notebook: the defaults
