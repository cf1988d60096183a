"""Lesson 11: recompute only what is cheap. Checkpoint policies, measured to the byte and the FLOP.

    python lessons/11_selective_recomputation.py            # about 8 s (make tour, 1 BLAS thread, 2 busy cores, 2026-12-01)
    python lessons/11_selective_recomputation.py --quick    # fewer blocks: about 7 s

Checkpointing so far dropped everything inside a segment and recomputed it, all but the ops whose results
backward does not read (NOTE [recompute what backward reads] in minigrad/checkpoint/policies.py): the most memory saved,
for most of an extra forward pass. But a transformer block's ops are not alike. Its matrix products are most of the
FLOPs and keep arrays of (B, T, C) or (B, T, 4C); the ops on attention's scores (scale, mask, softmax, dropout)
cost few FLOPs and keep the (B, heads, T, T) arrays that grow with the square of the sequence. So keep the
expensive outputs, and recompute the cheap ones (Korthikanti et al. 2022, "Reducing Activation Recomputation in
Large Transformer Models"; JAX's checkpoint policies; PyTorch's selective activation checkpointing).

mg.checkpoint(block, x, policy=...) takes a policy: a function of (op name, input shapes, output shape) that says
which ops keep what their backward reads in the forward; in backward the recompute hands those ops' results back
instead of running them. Gradients stay bit-identical to the plain run for every policy (asserted below).

Part 1: a stack of GPT blocks, each under its own checkpoint, with each policy of mg.checkpoint_policies: the peak
        of activation memory and the FLOPs recomputed, measured with mg.profile, on one memory-versus-recompute plot.
Part 2: the selective split as the sequence grows, and what Korthikanti et al.'s formulas give for GPT-3.
Part 3: full size, on the 'meta' device (lesson 9): gpt2-xl's training step with every block checkpointed under
        each policy, from python -m minigrad memory --checkpointing --policy NAME.
Plot: out/11_selective_recomputation.png.
"""
# %%
import sys
import time

import numpy as np

import minigrad as mg
from minigrad import plan
from minigrad.gpt import Block, GPTConfig
from minigrad.profiler import CATEGORY_COLORS

from _lesson import command_line, finish, predict, reveal, save_plot

# %% settings
SEED = 0
CFG = dict(n_embd=64, n_head=4, dropout=0.1)
BATCH, T = 8, 64                  # T > C: attention's (B, heads, T, T) arrays outweigh the (B, T, C) ones
BLOCKS, QUICK_BLOCKS = 8, 4
POLICIES = ("nothing_saveable", "save_anything_except_core_attention", "dots_saveable", "everything_saveable")
PLOTS = {"11_selective_recomputation.png": "peak activation memory against recompute FLOPs for each checkpoint "
                                           "policy on a stack of GPT blocks, with no checkpointing for comparison"}
EXERCISES = (7,)
KiB, MiB = 2**10, 2**20


def run(blocks, x, policy):
    """One forward and backward of the stack under mg.profile: (peak activations, recompute FLOPs, forward FLOPs,
    the input's gradient)."""
    for b in blocks:
        b.zero_grad()
    x = x.detach().requires_grad_(True)
    with mg.profile() as prof:
        h = x
        for b in blocks:
            h = b(h) if policy is None else mg.checkpoint(b, h, policy=getattr(mg.checkpoint_policies, policy))
        h.sum().backward()
    grads = [x.grad.numpy()] + [p.grad.numpy() for b in blocks for p in b.parameters()]
    return prof.peak_bytes("activations"), prof.flops("recompute"), prof.flops("forward"), grads


def part1(n):
    mg.manual_seed(SEED)
    cfg = GPTConfig(block_size=T, **CFG)
    blocks = [Block(cfg) for _ in range(n)]
    x = mg.randn(BATCH, T, cfg.n_embd)
    rows = {}
    for policy in (None,) + POLICIES:
        mg.manual_seed(SEED + 1)  # the same dropout masks for every run
        rows[policy or "no checkpointing"] = run(blocks, x, policy)
    plain = rows["no checkpointing"]
    for name, (_, _, _, grads) in rows.items():
        assert all(np.array_equal(a, b) for a, b in zip(grads, plain[3])), f"{name}: gradients differ"
    print(f"Part 1: {n} GPT blocks (C = {cfg.n_embd}, {cfg.n_head} heads, dropout {cfg.dropout}), batch {BATCH} x {T} "
          f"tokens, each block under its own checkpoint. Gradients: bit-identical to the plain run for every policy "
          f"(asserted).\n")
    forward = plain[2]
    print(f"{'policy':<40}{'peak activations':>18}{'of plain':>10}{'recompute':>14}{'of a forward':>14}")
    for name, (peak, recompute, _, _) in rows.items():
        print(f"{name:<40}{peak / MiB:>14.2f} MiB{peak / plain[0]:>10.0%}{recompute / 1e6:>10.1f} MFLOP"
              f"{recompute / forward:>14.1%}")
    core = rows["save_anything_except_core_attention"]
    dots = rows["dots_saveable"]
    nothing = rows["nothing_saveable"]
    print(f"\nnothing_saveable is plain checkpointing: the least memory, for {nothing[1] / forward:.1%} of a forward "
          f"recomputed, not all of it: the recompute runs only what backward reads (NOTE [recompute what backward "
          f"reads] in minigrad/checkpoint/policies.py), and nothing reads the output of a block's MLP projection again (its "
          f"dropout reads only its mask, the residual add nothing). dots_saveable keeps the products' outputs and recomputes {dots[1] / forward:.1%} of a forward for {dots[0] / plain[0]:.0%} "
          f"of the plain run's activations. The Korthikanti split keeps everything but attention's (B, heads, T, T) "
          f"arrays: {core[1] / forward:.1%} of a forward recomputed, for {core[0] / plain[0]:.0%} of the memory. "
          f"everything_saveable recomputes nothing and keeps a little more than the plain run: the blocks' inputs, "
          f"which the checkpoints keep.\n")
    return rows


def part2():
    """The two selective policies as the sequence grows: attention's arrays grow with T^2, the rest with T."""
    print("Part 2: the selective policies as the sequence grows (2 blocks, batch 4): activations kept, as a share of "
          "the plain run's, and FLOPs recomputed, as a share of a forward.\n")
    print(f"{'T':>6}{'T/C':>6}{'dots_saveable':>26}{'except core attention':>30}")
    sweep = []
    for t in (32, 64, 128, 256):
        mg.manual_seed(SEED)
        cfg = GPTConfig(block_size=t, **CFG)
        blocks = [Block(cfg) for _ in range(2)]
        x = mg.randn(4, t, cfg.n_embd)
        plain = run(blocks, x, None)
        shares = []
        for policy in ("dots_saveable", "save_anything_except_core_attention"):
            peak, recompute, _, _ = run(blocks, x, policy)
            shares.append((peak / plain[0], recompute / plain[2]))
        sweep.append((t, shares))
        print(f"{t:>6}{t / cfg.n_embd:>6.1f}" + "".join(f"{m:>14.0%} mem {r:>5.1%} re" for m, r in shares))
    # Korthikanti et al.'s per-layer counts (16-bit activations, 1-byte masks): attention's (T, T) arrays take
    # 5 a T / C of the s b h (34 + 5 a T / C) bytes; recomputing them costs QK^T and AV, 4 T^2 C FLOPs against the
    # layer's 24 T C^2 + 4 T^2 C, about T / 6C
    a, t, c = 96, 2048, 12288  # GPT-3 175B
    kept = 5 * a * t / c / (34 + 5 * a * t / c)
    cost = 4 * t * t * c / (24 * t * c * c + 4 * t * t * c)
    print(f"\nBoth columns of the split grow with T: attention's arrays are about (heads x T) / C of a layer's "
          f"activations against the rest, and recomputing them costs about T / 6C of its FLOPs. Here C = "
          f"{CFG['n_embd']} is small, so at T = 256 the split already recomputes {sweep[-1][1][1][1]:.0%} of a forward. "
          f"In GPT-3 (96 heads, T = 2048, C = 12288) the same formulas give {kept:.0%} of a layer's activations for "
          f"{cost:.1%} of its FLOPs: why the split became standard for large models. dots_saveable barely moves: "
          f"it keeps every product's output, and the (T, T) products are among them.\n")
    return sweep


def part3():
    name, batch, seq = "gpt2-xl", 4, 1024
    print(f"Part 3: {name}, batch {batch} x {seq} tokens, AdamW, fp32, on 'meta': one training step with every block "
          f"checkpointed, under each policy (GiB at the step's peak; recompute as a share of forward + backward).\n")
    print(f"{'checkpointing':<52}{'activations':>12}{'total':>8}{'recompute':>11}")
    rows = [("none", "nothing_saveable")] + [("every", p) for p in POLICIES]
    results = {}
    for how, policy in rows:
        p = plan.predict(plan.Setup(name, batch, seq, checkpointing=how, policy=policy))
        label = "no checkpointing" if how == "none" else f"every block, {policy}"
        results[label] = p
        print(f"{label:<52}{p.bytes['activations'] / 2**30:>12.2f}{p.bytes['total'] / 2**30:>8.2f}{p.overhead:>11.1%}")
    plain, full = results["no checkpointing"], results["every block, nothing_saveable"]
    split = results["every block, save_anything_except_core_attention"]
    saved = (plain.bytes["total"] - split.bytes["total"]) / (plain.bytes["total"] - full.bytes["total"])
    print(f"\nThe split keeps {saved:.0%} of full recompute's saving of the total for {split.overhead:.1%} extra FLOPs "
          f"instead of {full.overhead:.1%}. The same from the command line: python -m minigrad memory --model {name} "
          f"--batch-size {batch} --seq-len {seq} --checkpointing --policy save_anything_except_core_attention; "
          f"docs/will_it_fit.md compares these with the paper's formulas.\n")


def plot(rows, n):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    forward = rows["no checkpointing"][2]
    xs = {name: recompute / forward for name, (_, recompute, _, _) in rows.items()}
    ys = {name: peak / MiB for name, (peak, _, _, _) in rows.items()}
    for name in rows:  # one colour: every point is the same category, activations, under another policy
        plain = name == "no checkpointing"
        ax.plot(xs[name], ys[name], "s" if plain else "o", ms=9, color="k" if plain else CATEGORY_COLORS["activations"])
        ax.annotate(name, (xs[name], ys[name]), xytext=(7, 3), textcoords="offset points", fontsize=8,
                    va="top" if name == "no checkpointing" else "bottom")
    ax.set_xlabel("FLOPs recomputed in backward (forward passes of the stack)")
    ax.set_ylabel("peak activation memory (MiB)")
    span = max(xs.values())
    ax.set_xlim(-0.04 * span, span * 1.45)  # room on the right for the names
    ax.set_ylim(0, max(ys.values()) * 1.12)
    cfg = GPTConfig(block_size=T, **CFG)
    ax.set_title(f"Checkpoint policies on {n} GPT blocks, each under its own checkpoint\n(C = {cfg.n_embd}, "
                 f"{cfg.n_head} heads, dropout {cfg.dropout}, batch {BATCH} x {T} tokens, float32; measured by "
                 f"mg.profile)", fontsize=10)
    ax.grid(True, alpha=0.3)
    print(f"plot: {save_plot(fig, '11_selective_recomputation.png')}")


def main(argv=None):
    ap = command_line(__doc__, quick=f"{QUICK_BLOCKS} blocks instead of {BLOCKS}", no_plot="print only")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    guess = predict("each GPT block under its own checkpoint, keeping nothing (nothing_saveable, plain checkpointing): "
                    "how much of a forward pass does backward recompute?", "forward passes", quick=args.quick)
    rows = part1(QUICK_BLOCKS if args.quick else BLOCKS)
    reveal(guess, rows["nothing_saveable"][1] / rows["no checkpointing"][2], "forward passes")
    part2()
    part3()
    if not args.no_plot:
        plot(rows, QUICK_BLOCKS if args.quick else BLOCKS)
    finish(EXERCISES, t0)


# %%
if __name__ == "__main__":
    main([] if "ipykernel" in sys.modules else None)  # in a notebook: the defaults
