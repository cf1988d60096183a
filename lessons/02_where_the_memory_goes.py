"""Lesson 2: where the memory of a training step goes, byte by byte.

    python lessons/02_where_the_memory_goes.py       # about 13 s (make tour, 1 BLAS thread, 2 busy cores, 2026-12-01)

An MLP trains for one warm-up step (that step makes AdamW's two moments), then one more step
runs under mg.profile(model, opt): a steady-state step, as every step after the first is. The
profile counts every buffer the engine holds, in five categories (parameters, optimizer state,
gradients, activations saved for backward, transient arrays), and every FLOP. We compare what
it measured with what a learner derives by hand (exercise 6; the formulas are in minigrad/formulas.py, for after).

Then the same step runs again with one line moved: opt.zero_grad() after the forward pass
instead of before it (as many training loops write it, lesson 1 among them). zero_grad() drops
the last step's gradients (set_to_none, as PyTorch); called late, they are still alive during
the whole forward pass, on top of the activations, and the peak rises by about their size.
Last, what the ledger does not decide: where freed bytes go. NumPy takes each array from the C library's
malloc, which gives large freed blocks back to the system, so the next step touches fresh pages again (page
faults). CuPy's memory pool keeps freed GPU memory for the next request; minigrad's ops take their big arrays
from a pool that does the same on the host (NOTE [host memory pool] in minigrad/backend/pool.py; MINIGRAD_HOST_POOL=0
turns it off), and MINIGRAD_KEEP_HOST_MEMORY=1 asks malloc itself to keep what is freed (opt-in: it is the whole
process's). Three fresh processes run the same steps of a small GPT, and count the page faults and the time per
step.
Plot: out/02_memory_timeline.png, the two steps event by event. The first step's profile is also written where
other tools open it: out/02_memory_timeline.html (prof.export_memory_timeline: the same stacked memory, the peak
marked, each op on hover; any browser) and out/02_step_trace.json (prof.export_chrome_trace: each op a span by
phase, memory as counters; Perfetto, https://ui.perfetto.dev, or chrome://tracing).
"""
# %%
import argparse
import json
import os
import resource
import subprocess
import sys
import time

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

import minigrad as mg
from minigrad import formulas
from minigrad.gpt import GPT, GPTConfig
from minigrad.profiler import CATEGORIES, CATEGORY_COLORS, format_bytes, format_flops

from _lesson import OUT, command_line, finish, predict, reveal, save_plot

# settings
SEED = 0
BATCH, WIDTH, DEPTH, IN = 256, 256, 8, 128
MiB = 2 ** 20
EXERCISES = (6,)  # python -m minigrad check N: the exercises this lesson prepares (the ledger, by hand)
PLOTS = {"02_memory_timeline.png": "one steady-state training step, event by event, with zero_grad before the "
                                   "forward and after it: the last step's gradients ride through the forward",
         "02_memory_timeline.html": "the first of those steps as a page for any browser: memory by category, "
                                    "the peak and what was alive at it, each op on hover",
         "02_step_trace.json": "the same step as a Chrome trace: each op a span by phase, memory by category as "
                               "counters; open it in Perfetto (ui.perfetto.dev) or chrome://tracing"}


def build():
    mg.manual_seed(SEED)
    sizes = [IN] + [WIDTH] * DEPTH
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [mg.nn.Linear(a, b), mg.nn.Tanh()]
    model = mg.nn.Sequential(*layers)
    return model, mg.optim.AdamW(model.parameters(), lr=1e-3), sizes


# %% [markdown]
# ## One steady-state step
# The warm-up step runs outside the profile. The profiled step counts the model and the optimizer
# from its start (`mg.profile(model, opt)`): their parameters, last step's gradients and AdamW's
# moments were alive before the step began. `zero_grad` and the end of the forward make no event of
# their own, so the timeline gets a sample of the ledger at each (`snapshot`); the optimizer's step has
# one in prof.timeline() ('AdamW.step'), and the sample after it, 'step', holds the same bytes.

# %%
def snapshot(prof, points, label):
    """Append the ledger as it is now, as one more point of the timeline."""
    points.append(dict(op=label, phase=label, **{c: prof.current_bytes(c) for c in CATEGORIES}))


def profiled_step(zero_grad_first):
    """Warm up one step, then profile the next; zero_grad before the forward, or after it."""
    model, opt, sizes = build()
    x = mg.randn(BATCH, IN)                         # the data batch: needs no gradient
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()                                      # the warm-up step: AdamW makes its moments here

    points = []
    with mg.profile(model, opt) as prof:
        snapshot(prof, points, "start")
        if zero_grad_first:
            opt.zero_grad()
            snapshot(prof, points, "zero_grad")
        n0 = len(prof.timeline())
        loss = model(x).sum()
        points += prof.timeline()[n0:]
        snapshot(prof, points, "forward done")
        if not zero_grad_first:
            opt.zero_grad()                         # only now are last step's gradients dropped
            snapshot(prof, points, "zero_grad")
        n0 = len(prof.timeline())
        loss.backward()
        points += prof.timeline()[n0:]
        snapshot(prof, points, "backward done")
        opt.step()
        snapshot(prof, points, "step")
    return prof, points, model, sizes


# %% [markdown]
# ## Between steps: what the allocator does with freed bytes

# %%
STEPS = 12


GPT_CFG = dict(vocab_size=64, block_size=64, n_layer=4, n_head=4, n_embd=128)  # the benchmark's (c), batch 8


def steps_alone():
    """--steps-alone: STEPS steady training steps of a small GPT (its arrays of a few hundred KiB to a few MiB are
    where malloc's choices show; this lesson's MLP is too regular) in this process; print page faults and
    milliseconds per step."""
    mg.manual_seed(SEED)
    model = GPT(GPTConfig(**GPT_CFG))
    opt = mg.optim.AdamW(model.parameters(), lr=1e-4)
    idx, targets = (mg.randint(0, GPT_CFG["vocab_size"], (8, GPT_CFG["block_size"])) for _ in range(2))
    step = lambda: (opt.zero_grad(), model(idx, targets)[1].backward(), opt.step())  # noqa: E731
    step(), step()
    faults, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
    for _ in range(STEPS):
        step()
    print(json.dumps(dict(faults=(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / STEPS,
                          ms=(time.perf_counter() - t0) / STEPS * 1e3)))


WAYS = {  # how each process gets its host memory: the settings it starts with
    "no pool, malloc as it comes": {"MINIGRAD_HOST_POOL": "0"},
    "minigrad's pool (the default)": {},
    "no pool, malloc keeps memory": {"MINIGRAD_HOST_POOL": "0", "MINIGRAD_KEEP_HOST_MEMORY": "1"},
}


def between_steps():
    """The same steps in three fresh processes: without the pool, with it, and with malloc keeping freed memory."""
    runs = {}
    for label, settings in WAYS.items():
        env = {k: v for k, v in os.environ.items() if k not in ("MINIGRAD_HOST_POOL", "MINIGRAD_KEEP_HOST_MEMORY")}
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--steps-alone"], env={**env, **settings},
                           capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(r.stderr)
        runs[label] = json.loads(r.stdout.splitlines()[-1])
    print(f"\nBetween steps: a small GPT's training step ({GPT_CFG['n_layer']} layers, {GPT_CFG['n_embd']} wide, batch 8 x "
          f"{GPT_CFG['block_size']} tokens), {STEPS} times in a fresh process (page faults from getrusage):")
    for label, run in runs.items():
        print(f"  {label:<32}{run['faults']:>7.0f} page faults per step ({format_bytes(run['faults'] * 4096)} of "
              f"fresh pages)  {run['ms']:.1f} ms per step")
    print("The ledger counts what the engine holds; freed bytes go back to malloc, which returns large blocks to "
          "the system and faults them in again at the next step. CuPy's pool keeps them on the GPU, minigrad's "
          "host pool keeps the ops' big arrays (what it holds, lent or free: mg.backend.memory_reserved(); "
          "mg.backend.empty_cache() gives the free ones back), and malloc can be asked to keep everything (NOTE "
          "[host memory between steps] in minigrad/backend/pool.py; where glibc is not the C library, that setting "
          "does nothing). Either way the process holds about its peak between steps.")


def at(points, label):
    return next(p for p in points if p["op"] == label)


def when(points, prof):
    """In which phase of the step the total peaked: the first point that holds exactly the peak's bytes."""
    peak = prof.bytes_at_peak()
    hit = next((p for p in points if all(p[c] == peak[c] for c in CATEGORIES)), None)
    if hit is None:  # it peaked inside an op (its temporaries: NOTE [every array an op makes]): which one
        op, phase = prof.peak_event() or ("the end", "end")
        return f"during the {phase}, inside '{op}'" if phase in ("forward", "backward") else f"inside {op}"
    return f"during the {hit['phase']}" if hit["phase"] in ("forward", "backward") else f"at '{hit['op']}'"


# %%
def main(argv=None):
    ap = command_line(__doc__, no_plot="write nothing to out/ (the plot, the page, the trace)")
    ap.add_argument("--steps-alone", action="store_true", help=argparse.SUPPRESS)  # between_steps' worker
    args = ap.parse_args(argv)
    if args.steps_alone:
        return steps_alone()

    prof, points, model, sizes = profiled_step(zero_grad_first=True)
    print(f"An MLP of {DEPTH} Linear -> Tanh layers, sizes {IN} -> {WIDTH} ... -> {WIDTH}, batch {BATCH}, float32.")
    guess = predict("the activations the tape holds at the end of the forward. Each Linear saves its input, each Tanh "
                    "its output, and an array saved twice counts once", "MiB")
    print("\nOne steady-state step (the second), zero_grad first:\n")
    print(prof.table())

    params = sum(p.numel() * 4 for p in model.parameters())
    start, fwd, bwd, end = (at(points, k) for k in ("start", "forward done", "backward done", "step"))
    hand = formulas.mlp_saved_bytes(BATCH, sizes, itemsize=4)
    reveal(guess, fwd["activations"] / MiB, "MiB")
    print(f"\nactivations after forward: measured {format_bytes(fwd['activations'])}; by hand (the formula is "
          f"exercise 6's to derive) {format_bytes(hand)}  ({'equal' if hand == fwd['activations'] else 'DIFFERENT'})")
    print(f"activations after backward: {format_bytes(bwd['activations'])} (every record freed its saved arrays "
          f"as soon as its backward had run)")
    print(f"parameters: {format_bytes(params)} by hand; gradients after backward: {format_bytes(bwd['gradients'])} "
          f"({'equal: one float per parameter' if bwd['gradients'] == params else 'DIFFERENT'})")
    print(f"optimizer state: AdamW keeps two moments, {format_bytes(2 * params)} by hand; measured "
          f"{format_bytes(start['optimizer'])} at the start of the step and {format_bytes(end['optimizer'])} after "
          f"it: " + ("made in the warm-up step; this step made none" if start["optimizer"] == end["optimizer"] else
                   f"this step made {format_bytes(end['optimizer'] - start['optimizer'])}"))
    f_hand, b_hand = formulas.mlp_matmul_flops(BATCH, sizes)
    print(f"matmul FLOPs: forward {format_flops(prof.flops('forward', 'matmul'))} (by hand {format_flops(f_hand)}), "
          f"backward {format_flops(prof.flops('backward', 'matmul'))} (by hand {format_flops(b_hand)}; why backward "
          f"is not simply twice the forward is exercise 6's to find)")

    # the same step with zero_grad() after the forward pass
    late, late_points, _, _ = profiled_step(zero_grad_first=False)
    print()
    for name, p, pts in (("before", prof, points), ("after ", late, late_points)):
        held = p.bytes_at_peak()
        print(f"zero_grad {name} the forward: peak {format_bytes(p.peak_bytes())}, {when(pts, p)} "
              f"(at that moment: gradients {format_bytes(held['gradients'])}, activations "
              f"{format_bytes(held['activations'])})")
    print(f"zero_grad late costs {format_bytes(late.peak_bytes() - prof.peak_bytes())} more at the peak: at the end "
          f"of its forward, last step's gradients ({format_bytes(at(late_points, 'forward done')['gradients'])}) "
          f"are still alive beside the activations ({format_bytes(at(late_points, 'forward done')['activations'])})")

    between_steps()
    if not args.no_plot:
        plot([(points, prof, "opt.zero_grad() first: the forward runs without gradients"),
              (late_points, late, "opt.zero_grad() after the forward: last step's gradients ride through it")])
        export(prof)
    finish(EXERCISES)


# %% [markdown]
# ## The plot: the two steps, event by event

# %%
def plot(steps):
    fig, axes = plt.subplots(2, 1, figsize=(10, 7.5), sharex=True, sharey=True)
    for ax, (points, prof, title) in zip(axes, steps):
        drawn = points + points[-1:]  # the last level, drawn one event wide
        ax.stackplot(range(len(drawn)), *[[p[c] / MiB for p in drawn] for c in CATEGORIES], labels=CATEGORIES,
                     colors=[CATEGORY_COLORS[c] for c in CATEGORIES], alpha=0.85, step="post")  # a level holds
                                                                                                # until the next event
        peak = prof.peak_bytes() / MiB
        ax.axhline(peak, color="k", lw=0.8, ls="--")
        ax.text(0.3, peak, f"peak {peak:.1f} MiB", va="bottom", fontsize=9)
        for phase in ("forward", "backward"):  # name each run of op events above it
            idx = [i for i, p in enumerate(points) if p["phase"] == phase]
            ax.text((idx[0] + idx[-1]) / 2, peak * 1.04, phase, ha="center", va="bottom", fontsize=9)
        for i, p in enumerate(points):
            if p["op"] in ("zero_grad", "forward done", "backward done", "step"):
                ax.axvline(i, color="k", lw=0.6, ls=":")
                ax.text(i - 0.15, 0.1, p["op"], rotation=90, ha="right", va="bottom", fontsize=8)
        ax.set_ylabel("live memory (MiB)")
        ax.set_title(title, fontsize=10)
    axes[0].set_ylim(0, max(s[1].peak_bytes() for s in steps) / MiB * 1.2)
    axes[0].legend(loc="upper left", fontsize=8, ncol=5)
    axes[1].set_xlabel("event: one op's forward or backward, or a moment sampled (zero_grad, step)")
    fig.suptitle(f"A steady-state training step of the MLP (batch {BATCH}), as mg.profile saw it:\n"
                 "activations ramp up in forward and drain in backward while the gradients fill", fontsize=11)
    print(f"\nplot: {save_plot(fig, '02_memory_timeline.png')}")


# %% [markdown]
# ## The same step in the tools people already use
# PyTorch's profiler exports a profile twice over, and so does mg.profile, with the same names: a page that draws
# the memory timeline (export_memory_timeline) and a trace of every op in time (export_chrome_trace, Chrome's Trace
# Event Format). The page needs nothing but a browser; the trace opens in Perfetto or chrome://tracing, where the
# ops of forward, backward and the optimizer's step lie on tracks of their own under the memory counters.

# %%
def export(prof):
    os.makedirs(OUT, exist_ok=True)
    page = prof.export_memory_timeline(os.path.join(OUT, "02_memory_timeline.html"),
                                       title=f"Lesson 2: one steady-state step of the MLP (batch {BATCH}), zero_grad "
                                             f"first, as mg.profile saw it")
    trace = prof.export_chrome_trace(os.path.join(OUT, "02_step_trace.json"))
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    spans = sum(e["ph"] == "X" for e in events)
    samples = sum(e["ph"] == "C" for e in events)
    print(f"memory timeline: {page} ({samples} points, the peak of {format_bytes(prof.peak_bytes())} marked; open it "
          f"in any browser and hover over the chart for each op)")
    print(f"trace: {trace} ({spans} spans: {prof.calls()} op runs and AdamW's step; {samples} memory samples); "
          f"open it in Perfetto, https://ui.perfetto.dev (Open trace file), or chrome://tracing (Load)")


# %%
if __name__ == "__main__":
    main([] if "ipykernel" in sys.modules else None)  # in a notebook, the kernel's arguments are not the lesson's
