"""Lesson 3: activation checkpointing. Plan, predict, then measure.

    python lessons/03_checkpointing.py            # about 11 s (make tour, 1 BLAS thread, 2 busy cores, 2026-12-01)
    python lessons/03_checkpointing.py --quick    # depths 16 and 64, a chain of 64 functions: about 4 s

Checkpointing keeps only some layer inputs in the forward pass and recomputes the rest during
backward. For a chain of n layers cut into sqrt(n) segments, activation memory grows like
sqrt(n) instead of n, for about one extra forward pass (Chen et al. 2016).

How a prediction is made: checkpoint.measure_chain runs the chain's functions once, plainly,
under mg.profile, and records per function its input's bytes, whether it saves its input or its
output, what else it saves, and its FLOPs. minigrad/schedules.py takes only those numbers, plans
where to cut, and simulates the plan buffer by buffer. Then the whole plan runs forward and
backward under mg.profile, and the lesson checks that the measured peak of activation bytes and
the recompute FLOPs equal the predicted ones, for every plan it shows.

Part 1: MLPs of several depths, no checkpointing against sqrt(n) segments.
Part 2: one chain cut into segments of s functions for every s from 1 to n (k = n / s of them,
rounded up: k counts segments, as in checkpoint_sequential, lesson 8 and `python -m minigrad curve`),
and by the budgeted, recursive and revolve schedules: memory against recompute, the plans no other plan beats on both (the
Pareto front), and the plans that cost more than they save.
Plot: out/03_checkpointing.png.
"""
# %%
import math
import sys
import time

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
from tqdm import tqdm

import minigrad as mg
from minigrad import schedules as S
from minigrad.checkpoint import checkpoint_segments, measure_chain
from minigrad.profiler import format_bytes, format_flops

from _lesson import command_line, finish, predict, reveal, save_plot

# settings
SEED = 0
DEPTHS = (16, 64, 256, 1024)    # Linear+Tanh pairs: the chain has 2 x depth functions
WIDTH, BATCH = 32, 8
TRADEOFF_DEPTH = 64             # part 2's chain: 2 x 64 = 128 functions
REVOLVE_SLOTS = (2, 3, 4, 6, 8, 12)
QUICK_DEPTHS, QUICK_TRADEOFF_DEPTH = DEPTHS[:2], 32
NONE_COLOR, SQRT_COLOR = "k", "tab:blue"  # one colour per plan in both panels
EXERCISES = (9,)  # python -m minigrad check N: the exercises this lesson prepares
PLOTS = {"03_checkpointing.png": "peak activation memory against depth (log-log, measured), and against recompute "
                                 "for every way to cut one chain, with the Pareto front"}


def mlp(depth):
    mg.manual_seed(SEED)
    layers = []
    for _ in range(depth):
        layers += [mg.nn.Linear(WIDTH, WIDTH), mg.nn.Tanh()]
    return list(mg.nn.Sequential(*layers))


def run(functions, x, plan):
    """Run a plan forward and backward under mg.profile, check it against its prediction, and return
    (peak activation bytes, recompute FLOPs, forward FLOPs, seconds), all measured."""
    t0 = time.perf_counter()
    with mg.profile() as prof:
        checkpoint_segments(functions, plan.segments, x, plan.children).sum().backward()
    seconds = time.perf_counter() - t0
    measured = (prof.peak_bytes("activations"), prof.flops("recompute"))
    assert measured == (plan.peak_bytes, plan.recompute_flops), \
        f"prediction {plan.peak_bytes, plan.recompute_flops} and measurement {measured} differ for {plan.segments}"
    return measured + (prof.flops("forward"), seconds)


# %% [markdown]
# ## Part 1: memory against depth
# For each depth: measure the chain per function, predict two plans (one segment, i.e. no
# checkpointing; and sqrt(n) segments), run each, and print prediction beside measurement.

# %%
def against_depth(depths):
    print(f"MLPs of Linear({WIDTH}, {WIDTH}) -> Tanh pairs, batch {BATCH}, float32; a chain of n = 2 x depth "
          f"functions.\npredicted: from the per-function numbers of one plain forward (measure_chain); "
          f"measured: the plan run under mg.profile.\n")
    print(f"{'depth':>6}{'plan':>7}{'segments':>10}{'predicted':>12}{'measured':>12}"
          f"{'recompute (pred / meas)':>28}{'of a forward':>14}")
    rows = {}
    for depth in tqdm(depths, desc="depths", disable=None, leave=False):
        functions, x = mlp(depth), mg.randn(BATCH, WIDTH)
        chain = measure_chain(functions, x)
        for name, plan in (("none", S.no_checkpointing(chain)), ("sqrt", S.sqrt_n(chain))):
            peak, recompute, forward, _ = run(functions, x, plan)
            rows[depth, name] = peak
            both = format_flops(plan.recompute_flops) + " / " + format_flops(recompute)
            tqdm.write(f"{depth:>6}{name:>7}{len(plan.segments):>10}{format_bytes(plan.peak_bytes):>12}"
                       f"{format_bytes(peak):>12}{both:>28}{recompute / forward:>14.2f}")
    lo, hi = depths[0], depths[-1]
    slope = {name: math.log(rows[hi, name] / rows[lo, name]) / math.log(hi / lo) for name in ("none", "sqrt")}
    print(f"\nlog-log slope of peak activation memory against depth, {lo} to {hi}: "
          f"no checkpointing {slope['none']:.2f}, sqrt(n) segments {slope['sqrt']:.2f} (theory: 1 and 0.5)")
    print(f"at depth {hi}: {format_bytes(rows[hi, 'none'])} -> {format_bytes(rows[hi, 'sqrt'])}, "
          f"{rows[hi, 'none'] / rows[hi, 'sqrt']:.1f}x less activation memory")
    return rows, slope


# %% [markdown]
# ## Part 2: one chain, every way to cut it
# `every_k(chain, s)` cuts it into segments of s functions (the last takes what is left), so k = ceil(n / s)
# segments: s = n is one segment, no checkpointing. k counts segments everywhere in the course, s their size.
# Each plan runs under the profiler; its measured memory and recompute must equal the prediction.
# (`python -m minigrad curve` draws this curve for a model you choose.)

# %%
def pareto(points):
    """The points (recompute, memory, name, plan) that no other point beats on both: fewest forward passes first."""
    front = []
    for p in sorted(points, key=lambda p: (p[0], p[1])):
        if not front or p[1] < front[-1][1]:
            front.append(p)
    return front


def tradeoff(depth):
    functions, x = mlp(depth), mg.randn(BATCH, WIDTH)
    chain = measure_chain(functions, x)
    n, forward = len(chain), sum(chain.flops)
    equal = {s: S.every_k(chain, s) for s in range(1, n + 1)}  # segments of s functions
    named = {"sqrt(n) segments": S.sqrt_n(chain), "Chen's budgeted greedy": S.best_budgeted(chain),
             "recursive halving": S.recursive(chain)}
    named.update({f"revolve, {s} slots": S.revolve(chain, s) for s in REVOLVE_SLOTS})
    for plan in tqdm(list(equal.values()) + list(named.values()), desc="plans", disable=None, leave=False):
        run(functions, x, plan)  # asserts that measured == predicted
    print(f"\nPart 2: one chain of n = {n} functions ({depth} pairs); each of the {len(equal) + len(named)} plans "
          f"below ran under mg.profile and measured exactly its predicted memory and recompute.")

    none, ones = equal[n], equal[1]
    unit = chain.input_bytes[0]
    print(f"\nno checkpointing (s = n, one segment): {format_bytes(none.peak_bytes)} = {none.peak_bytes // unit} layer inputs of "
          f"{format_bytes(unit)}: a Linear saves its input and a Tanh its output, which is the next Linear's input, "
          f"one buffer for both; the Linear outputs (the Tanh inputs) are never kept.")
    print(f"segments of s = 1 function (k = n segments): {format_bytes(ones.peak_bytes)} = {ones.peak_bytes // unit} layer inputs, "
          f"MORE than no checkpointing, for {ones.recompute_flops / forward:.2f} forward passes of recompute: a "
          f"checkpointed segment keeps its input whatever its function would save, so every Linear output is kept "
          f"too, and a segment of one function has nothing inside it to forget.")
    far = [k for k in range(n // 2, n) if equal[k].peak_bytes >= none.peak_bytes / 2]
    if far:
        print(f"s = {far[0]} .. {far[-1]}: k = 2 segments, the first recomputed in backward (all but the ops whose "
              f"results backward does not read again: NOTE [recompute what backward reads]) while it keeps "
              f"everything it saves: {equal[far[0]].recompute_flops / forward:.2f} to "
              f"{equal[far[-1]].recompute_flops / forward:.2f} forward passes to save at most "
              f"{format_bytes(none.peak_bytes - equal[far[0]].peak_bytes)}.")

    points = [(p.recompute_flops / forward, p.peak_bytes, f"segments of {k} (k = {len(p.segments)})", p)
              for k, p in equal.items()]
    points += [(p.recompute_flops / forward, p.peak_bytes, name, p) for name, p in named.items()]
    front = pareto(points)
    print(f"\nthe Pareto front: the {len(front)} plans (of {len(points)}) that no other plan beats on both memory and "
          f"recompute")
    print(f"  {'plan':<26}{'peak activations':>18}{'recompute (forward passes)':>28}")
    for r, b, name, _ in front:
        print(f"  {name:<26}{format_bytes(b):>18}{r:>28.2f}")
    cheap, tight = front[-2], front[-1]
    print(f"the last step, {cheap[2]} -> {tight[2]}: {tight[0] - cheap[0]:.2f} more forward passes for "
          f"{format_bytes(cheap[1] - tight[1])} less")

    sqrt_plan = named["sqrt(n) segments"]
    plain_s = min(run(functions, x, none)[3] for _ in range(3))
    sqrt_s = min(run(functions, x, sqrt_plan)[3] for _ in range(3))
    print(f"time of one step (best of 3, under the profiler): plain {plain_s * 1e3:.1f} ms, "
          f"sqrt(n) {sqrt_s * 1e3:.1f} ms ({sqrt_s / plain_s:.2f}x; tensors this small measure per-op "
          f"overhead more than arithmetic: bench/bench.py times a 512-wide MLP)")
    return dict(n=n, forward=forward, equal=equal, named=named, front=front)


# %% [markdown]
# ## The plot

# %%
def log2_y(ax, values):
    """A log y axis with a tick at each power of two the values span, labelled in plain numbers."""
    lo, hi = math.floor(math.log2(min(values))), math.ceil(math.log2(max(values)))
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(FixedLocator([2.0 ** e for e in range(lo, hi + 1)]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_ylim(2.0 ** lo / 1.2, 2.0 ** hi * 1.2)


def plot(depths, rows, slope, t):
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(15, 5.6), width_ratios=(1, 1.25))
    for name, label, color in (("none", "no checkpointing", NONE_COLOR), ("sqrt", "sqrt(n) segments", SQRT_COLOR)):
        a1.loglog(depths, [rows[d, name] / 1024 for d in depths], "o-", color=color,
                  label=f"{label} (slope {slope[name]:.2f})")
    a1.xaxis.set_major_locator(FixedLocator(depths))
    a1.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    a1.xaxis.set_minor_locator(NullLocator())
    log2_y(a1, [v / 1024 for v in rows.values()])
    a1.set_xlabel("depth (Linear+Tanh pairs, log scale)")
    a1.set_ylabel("peak activation memory (KiB, log scale)")
    a1.set_title("Memory against depth, measured")
    a1.grid(True, alpha=0.3)
    a1.legend()

    n, forward, equal, named = t["n"], t["forward"], t["equal"], t["named"]
    x_of = lambda p: p.recompute_flops / forward  # noqa: E731
    y_of = lambda p: p.peak_bytes / 1024          # noqa: E731
    sq, best = named["sqrt(n) segments"], named["Chen's budgeted greedy"]
    revolves = [p for name, p in named.items() if name.startswith("revolve")]
    front = t["front"]

    def draw(ax, labels):
        ax.scatter([x_of(p) for p in equal.values()], [y_of(p) for p in equal.values()], s=14, color="0.6",
                   label=f"segments of s functions, s = 1 .. {n}\n(k = n / s segments, rounded up)", zorder=2)
        ax.step([p[0] for p in front], [p[1] / 1024 for p in front], where="post", color="k", lw=1, zorder=1,
                label="Pareto front (no plan beats these on both)")
        ax.plot([x_of(p) for p in revolves], [y_of(p) for p in revolves], "^", color="tab:red", ms=7, zorder=3,
                label=f"revolve, {REVOLVE_SLOTS[0]} .. {REVOLVE_SLOTS[-1]} slots")
        ax.plot([x_of(named["recursive halving"])], [y_of(named["recursive halving"])], "D", color="tab:green",
                ms=7, zorder=3, label="recursive halving")
        ax.plot([x_of(sq)], [y_of(sq)], "s", mfc="none", mec=SQRT_COLOR, mew=2, ms=14, zorder=4,
                label=f"sqrt(n) segments (k = {len(sq.segments)})")
        ax.plot([x_of(best)], [y_of(best)], "*", color="tab:orange", ms=9, mec="k", mew=0.4, zorder=5,
                label="Chen's budgeted greedy, least peak")
        for size in labels:  # the grey points the zoom shows apart: their segments, k
            ax.annotate(f"k={len(equal[size].segments)}", (x_of(equal[size]), y_of(equal[size])), xytext=(4, -3),
                        textcoords="offset points", fontsize=7, color="0.35", va="top")

    draw(a2, [])
    (r0, b0, _, _), (r1, b1, last, worst) = front[-2:]
    notes = [(equal[n], "s = n (k = 1): no checkpointing", (0.25, 1.3)),
             (equal[1], f"s = 1 (k = {n}): keeps every layer input,\nmore than no checkpointing", (0.6, 1.0)),
             (equal[n - 1], f"s = {n // 2} .. {n - 1} (k = 2): the first\nsegment recomputed whole:\nlittle saved",
              (1.2, 0.62)),
             (worst, f"{last}: {r1:.1f} forward passes,\n{r1 - r0:.1f} more for the last "
                     f"{format_bytes(b0 - b1)}", (r1 * 0.6, 0.75))]
    for p, text, (x, fy) in notes:  # text at recompute x, at fy times the point's memory
        a2.annotate(text, (x_of(p), y_of(p)), xytext=(x, y_of(p) * fy), fontsize=8, va="center",
                    arrowprops=dict(arrowstyle="->", lw=0.6, color="0.3", shrinkB=6))
    log2_y(a2, [y_of(p) for p in list(equal.values()) + list(named.values())])
    a2.set_xlabel("recompute in backward (forward passes of the whole chain)")
    a2.set_ylabel("peak activation memory (KiB, log scale)")
    a2.set_title(f"Memory against recompute, one chain of {n} functions, measured")
    a2.grid(True, alpha=0.3)
    a2.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # outside: the annotations fill the inside

    # the zoom: where sqrt(n), the greedy and the grey points of middling k pile up
    crowd = [p for p in list(equal.values()) + [sq, best] if y_of(p) <= 1.5 * y_of(sq) and 0.5 <= x_of(p) <= 1.2]
    zoom = a2.inset_axes([0.52, 0.39, 0.46, 0.49])
    on_front = {id(p[3]) for p in front}
    draw(zoom, [size for size, p in equal.items() if p in crowd and id(p) in on_front])
    x0, x1 = min(map(x_of, crowd)), max(map(x_of, crowd))
    y0, y1 = min(map(y_of, crowd)), max(map(y_of, crowd))
    zoom.set_xlim(x0 - 0.06 * (x1 - x0) - 0.01, x1 + 0.2 * (x1 - x0) + 0.01)
    zoom.set_ylim(y0 - 0.08 * (y1 - y0), y1 + 0.08 * (y1 - y0))
    zoom.tick_params(labelsize=7)
    zoom.set_title("zoom (linear axes); k: segments, for the plans on the front", fontsize=7)
    zoom.grid(True, alpha=0.3)
    a2.indicate_inset_zoom(zoom, edgecolor="0.4")
    print(f"\nplot: {save_plot(fig, '03_checkpointing.png')}")


# %%
def main(argv=None):
    ap = command_line(__doc__, quick=f"depths {' and '.join(map(str, QUICK_DEPTHS))} only, and part 2 on a chain "
                                     f"of {2 * QUICK_TRADEOFF_DEPTH} functions instead of {2 * TRADEOFF_DEPTH}",
                      no_plot="skip writing out/03_checkpointing.png")
    args = ap.parse_args(argv)
    depths = QUICK_DEPTHS if args.quick else DEPTHS
    guess = predict(f"at depth {depths[-1]} (n = {2 * depths[-1]} functions), how many times less activation memory "
                    f"does checkpointing with sqrt(n) segments keep at its peak than no checkpointing?", "times",
                    quick=args.quick)
    rows, slope = against_depth(depths)
    reveal(guess, rows[depths[-1], "none"] / rows[depths[-1], "sqrt"], "times")
    t = tradeoff(QUICK_TRADEOFF_DEPTH if args.quick else TRADEOFF_DEPTH)
    if not args.no_plot:
        plot(depths, rows, slope, t)
    finish(EXERCISES)


# %%
if __name__ == "__main__":
    main([] if "ipykernel" in sys.modules else None)  # in a notebook, the kernel's arguments are not the lesson's
