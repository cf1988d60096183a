"""Lesson 2: where the memory of a training step goes, byte by byte.

    python lessons/02_where_the_memory_goes.py

One training step of an MLP runs under mg.profile(), which counts every buffer the engine
holds, in five categories (parameters, optimizer state, gradients, activations saved for
backward, transient arrays) and every FLOP. We compare what it measured with what a learner
derives by hand (minigrad/formulas.py, docs/ledger.md), then plot memory over the step: the
forward ramp, as each layer saves its activations, and the backward drain, as each record's
saved arrays are freed the moment its backward has run. Plot: out/02_memory_timeline.png.
"""
import argparse
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

import minigrad as mg
from minigrad import formulas
from minigrad.profiler import CATEGORIES, format_bytes, format_flops

# settings
SEED = 0
BATCH, WIDTH, DEPTH, IN = 64, 256, 8, 128
OUT = "out"
MiB = 2 ** 20


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-plot", action="store_true", help="skip writing out/02_memory_timeline.png")
    args = ap.parse_args()
    mg.manual_seed(SEED)
    sizes = [IN] + [WIDTH] * DEPTH

    with mg.profile() as prof:
        layers = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [mg.nn.Linear(a, b), mg.nn.Tanh()]
        model = mg.nn.Sequential(*layers)
        opt = mg.optim.AdamW(model.parameters(), lr=1e-3)
        x = mg.randn(BATCH, IN)                       # the data batch: needs no gradient
        loss = model(x).sum()
        after_forward = prof.current_bytes("activations")
        opt.zero_grad()
        loss.backward()
        after_backward = prof.current_bytes("activations")
        opt.step()

    print(f"An MLP of {DEPTH} Linear -> Tanh layers, sizes {IN} -> {WIDTH} ... -> {WIDTH}, batch {BATCH}, float32.\n")
    print(prof.table())

    hand = formulas.mlp_saved_bytes(BATCH, sizes, itemsize=4)
    print(f"\nactivations after forward: measured {format_bytes(after_forward)}; by hand B x (in + widths) x 4 bytes "
          f"= {BATCH} x {sum(sizes)} x 4 = {format_bytes(hand)}  ({'equal' if hand == after_forward else 'DIFFERENT'})")
    print(f"activations after backward: {format_bytes(after_backward)} (every record freed its saved arrays)")
    params = sum(p.numel() * 4 for p in model.parameters())
    print(f"parameters {format_bytes(params)} by hand; gradients the same; AdamW keeps two moments: "
          f"{format_bytes(2 * params)}, measured {format_bytes(prof.peak_bytes('optimizer'))}")
    fwd, bwd = formulas.mlp_matmul_flops(BATCH, sizes)
    print(f"matmul FLOPs: forward {format_flops(prof.flops('forward', 'matmul'))} (by hand {format_flops(fwd)}), "
          f"backward {format_flops(prof.flops('backward', 'matmul'))} (by hand 2x forward less the first layer's dx: "
          f"{format_flops(bwd)})")

    if not args.no_plot:
        tl = [e for e in prof.timeline() if e["phase"] in ("forward", "backward", "step")]
        xs = range(len(tl))
        fig, ax = plt.subplots(figsize=(9, 4.5))
        ax.stackplot(xs, *[[e[c] / MiB for e in tl] for c in CATEGORIES], labels=CATEGORIES, alpha=0.85)
        first_bwd = next(i for i, e in enumerate(tl) if e["phase"] == "backward")
        first_step = next(i for i, e in enumerate(tl) if e["phase"] == "step")
        for i, label in ((0, "forward"), (first_bwd, "backward"), (first_step, "optimizer step")):
            ax.axvline(i, color="k", lw=0.6, ls=":")
            ax.text(i + 0.5, ax.get_ylim()[1] * 0.95, label, va="top", fontsize=9)
        ax.set_xlabel("event (one op's forward or backward, or an optimizer buffer made)")
        ax.set_ylabel("live memory (MiB)")
        ax.set_title("One training step, as mg.profile saw it: the forward ramp and the backward drain")
        ax.legend(loc="center left", fontsize=8)
        fig.tight_layout()
        os.makedirs(OUT, exist_ok=True)
        path = os.path.join(OUT, "02_memory_timeline.png")
        fig.savefig(path, dpi=120)
        print(f"\nplot: {path}")


if __name__ == "__main__":
    main()
