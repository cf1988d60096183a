"""The `curve` command's work: checkpointing's memory against its recompute, for one model, measured and predicted.

    python -m minigrad curve             an MLP: a table and out/curve.png
    python -m minigrad curve --gpt       the GPT's blocks

The model's chain of functions (an MLP's Linear and Tanh layers, or the GPT's blocks) is measured once per function
(checkpoint.measure_chain); then, for k = 1 .. n segments, schedules.py predicts the peak of activation bytes and the
FLOPs recomputed in backward, and the plan runs forward and backward under mg.profile, which measures both. The two
must agree to the byte and the FLOP; the table marks the Pareto front and the plot draws it.

Read next: __main__.py, which parses the command line and calls `curve(args)`.
"""
import math
import os
import sys

from . import nn, schedules
from .backend.random import manual_seed
from .checkpoint import checkpoint_segments, measure_chain
from .gpt import GPT, GPTConfig
from .profiler import format_bytes, format_flops, profile
from .tensor import randn

CURVE_ALL_K = 64          # chains up to this long get every k; longer ones a sample spread evenly on a log scale
CURVE_MAX_BYTES = 2 ** 31  # refuse a model that would hold more than about this
CURVE_OUT = os.path.join("out", "curve.png")


def _chain_model(args):
    """(functions, input, description, the bytes it will hold, about) for the MLP or the GPT's blocks."""
    manual_seed(0)
    if args.gpt:
        d, w, b, t, h = args.depth or 8, args.width, args.batch or 4, args.context, args.heads
        about = 4 * d * (12 * w * w + b * t * (34 * w + 5 * h * t))  # weights, and a block's activations (float32)
        if about > CURVE_MAX_BYTES:
            return None, None, None, about
        model = GPT(GPTConfig(vocab_size=64, block_size=t, n_layer=d, n_head=h, n_embd=w))
        return (list(model.h), randn(b, t, w),
                f"the GPT's {d} blocks ({h} heads, {w} wide), batch {b} x {t} tokens, float32", about)
    d, w, b = args.depth or 16, args.width, args.batch or 32
    about = 4 * d * (w * w + w + 2 * b * w)
    if about > CURVE_MAX_BYTES:
        return None, None, None, about
    layers = []
    for _ in range(d):
        layers += [nn.Linear(w, w), nn.Tanh()]
    return (list(nn.Sequential(*layers)), randn(b, w),
            f"an MLP of {d} Linear({w}, {w}) -> Tanh pairs ({2 * d} functions), batch {b}, float32", about)


def curve_ks(n):
    """k = 1 .. n segments: all of them for a short chain; else ~48 spread evenly on a log scale, and sqrt(n)."""
    if n <= CURVE_ALL_K:
        return list(range(1, n + 1))
    return sorted({max(1, round(n ** (i / 47))) for i in range(48)} | {round(math.sqrt(n)), n})


def curve(args):
    out, replaced = _curve_path(args.out)
    if not args.no_plot and os.path.splitext(out)[1].lower() not in (".png", ".svg", ".pdf"):
        print(f"curve: --out {out!r}: the plot is written as .png, .svg or .pdf; name the file so",
              file=sys.stderr)
        return 2
    if args.gpt and args.width % args.heads:
        print(f"curve: --width {args.width} must be divisible by --heads {args.heads} (each head gets width / heads "
              f"features)", file=sys.stderr)
        return 2
    functions, x, what, about = _chain_model(args)
    if functions is None:
        print(f"curve: this model would hold about {format_bytes(about)}; make --depth, --width or --batch "
              f"smaller", file=sys.stderr)
        return 2
    chain = measure_chain(functions, x)  # one plain forward, per function: what it saves and its FLOPs
    n, forward = len(chain), sum(chain.flops)
    ks = curve_ks(n)
    rows = []
    for k in ks:
        plan = schedules.predict(chain, schedules.segment_bounds(n, k))
        for f in functions:
            f.zero_grad()
        with profile() as prof:
            checkpoint_segments(functions, plan.segments, x).sum().backward()
        rows.append((k, plan, prof.peak_bytes("activations"), prof.flops("recompute")))

    front, best = set(), None  # the Pareto front: no other k keeps less for no more recompute
    for k, plan, peak, recompute in sorted(rows, key=lambda r: (r[3], r[2])):
        if best is None or peak < best:
            front.add(k)
            best = peak
    sqrt_k = max(1, round(math.sqrt(n)))
    print(f"Checkpointing {what}: a chain of n = {n} functions, cut into k segments as "
          f"checkpoint_sequential(functions, k, x) cuts it (the last segment runs normally; k = 1 is no "
          f"checkpointing).")
    print("predicted: schedules.predict from one plain forward measured per function (checkpoint.measure_chain); "
          "measured: the plan run forward and backward under mg.profile.")
    if len(ks) < n:
        print(f"(k: {len(ks)} values of 1 .. {n}, spread evenly on a log scale)")
    print(f"\n{'k':>5}{'size':>6}{'peak activations':>30}{'recompute FLOPs':>30}{'forward':>10}")
    print(f"{'':>11}{'predicted':>15}{'measured':>15}{'predicted':>15}{'measured':>15}{'passes':>10}")
    bad = []
    for k, plan, peak, recompute in rows:
        note = ("  front" if k in front else "") + ("  sqrt(n)" if k == sqrt_k else "") + \
               ("  no checkpointing" if k == 1 else "")
        if (peak, recompute) != (plan.peak_bytes, plan.recompute_flops):
            bad.append(k)
            note += "  MEASURED != PREDICTED"
        print(f"{k:>5}{plan.segments[0][1] - plan.segments[0][0]:>6}{format_bytes(plan.peak_bytes):>15}"
              f"{format_bytes(peak):>15}{format_flops(plan.recompute_flops):>15}{format_flops(recompute):>15}"
              f"{recompute / forward:>10.2f}{note}")
    print(f"\nk: segments, as everywhere in the course (lessons 3 and 8). "
          f"size: functions per segment, n // k; the last segment takes what is left and runs normally, so where "
          f"n // k drops, the last segment and the peak grow. front: no other k keeps fewer bytes for no more "
          f"recompute. One forward pass of the chain is {format_flops(forward)} FLOPs.")
    if bad:
        print(f"curve: measurement and prediction differ for k = {bad}: a bug in schedules.py or the engine; "
              f"please report it", file=sys.stderr)
    else:
        print(f"measured = predicted for all {len(rows)} values of k.")
    if not args.no_plot:
        if _plot_curve(rows, front, sqrt_k, n, forward, what, out):
            return 2
        if replaced:
            print(f"({replaced})")
    return 1 if bad else 0


def _curve_path(out):
    """(where the plot goes, what to say about a file already there). The default, out/curve.png, is never
    overwritten: a later run writes out/curve-2.png, -3, ...; a path given with --out is replaced, saying so."""
    if out is not None:
        return out, f"it replaced the {out} that was there" if os.path.exists(out) else None
    base, ext = os.path.splitext(CURVE_OUT)
    path, i = CURVE_OUT, 1
    while os.path.exists(path):
        i += 1
        path = f"{base}-{i}{ext}"
    return path, (f"{CURVE_OUT} is an earlier run's, kept: this one is {path} (--out PATH names the file)"
                  if i > 1 else None)


def _plot_curve(rows, front, sqrt_k, n, forward, what, path):
    import matplotlib  # here, not at the top: the engine and the other commands never load matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    unit, scale = ("MiB", 2 ** 20) if max(r[2] for r in rows) >= 2 ** 20 else ("KiB", 2 ** 10)
    ks = [r[0] for r in rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.6))
    a1.plot(ks, [r[1].peak_bytes / scale for r in rows], "o", color="0.5", mfc="none", ms=8, label="predicted")
    a1.plot(ks, [r[2] / scale for r in rows], ".", color="k", label="measured")
    a1.axvline(sqrt_k, color="tab:blue", ls=":", label=f"sqrt(n): k = {sqrt_k}")  # sqrt(n) blue, as in lesson 3
    a1.set_xscale("log")
    ticks = range(1, n + 1) if n <= 8 else sorted({2 ** e for e in range(n.bit_length())} | {n})
    a1.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    a1.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    a1.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    a1.set_ylim(0, max(r[2] for r in rows) / scale * 1.1)
    a1.set_xlabel("segments k (log scale; k = 1: no checkpointing)")
    a1.set_ylabel(f"peak activation memory ({unit})")
    a1.set_title("Memory against the number of segments")
    a1.grid(True, alpha=0.3)
    a1.legend()
    on_front = sorted((r for r in rows if r[0] in front), key=lambda r: r[3])
    least = min(rows, key=lambda r: (r[2], r[3]))
    a2.plot([r[3] / forward for r in rows], [r[2] / scale for r in rows], ".", color="0.5", ms=8,
            label="measured, one per k")
    a2.step([r[3] / forward for r in on_front], [r[2] / scale for r in on_front], where="post", color="k", lw=1,
            label="Pareto front")
    for k, marker, color, label in ((sqrt_k, "s", "tab:blue", f"sqrt(n): k = {sqrt_k}"),
                                    (least[0], "*", "tab:orange", f"least memory: k = {least[0]}")):
        r = next(r for r in rows if r[0] == k)
        a2.plot([r[3] / forward], [r[2] / scale], marker, color=color, mfc="none", ms=12, mew=1.5, label=label)
    labels, top_x, top_y = [], max(r[3] for r in rows) / forward or 1, max(r[2] for r in rows) / scale
    for k, _, peak, recompute in rows:  # one label for the k that land within 3% of each other
        if k in (1, n) or (k in front and len(front) <= 8):
            x, y = recompute / forward, peak / scale
            near = next((lab for lab in labels if abs(lab[0] - x) < 0.03 * top_x and abs(lab[1] - y) < 0.03 * top_y),
                        None)
            if near is None:
                labels.append([x, y, str(k)])
            else:
                near[2] += f", {k}"
    for x, y, names in labels:
        a2.annotate("k=" + names, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=8)
    a2.set_xlim(-0.03, max(r[3] for r in rows) / forward * 1.1 + 0.03)
    a2.set_ylim(0, max(r[2] for r in rows) / scale * 1.1)
    a2.set_xlabel("recompute in backward (forward passes of the chain)")
    a2.set_ylabel(f"peak activation memory ({unit})")
    a2.set_title("Memory against recompute")
    a2.grid(True, alpha=0.3)
    a2.legend()
    fig.suptitle(f"Checkpointing {what}", fontsize=10)
    fig.tight_layout()
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fig.savefig(path, dpi=120)
    except OSError as e:
        print(f"curve: could not write the plot to {path}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"plot: {path}")
    return 0
