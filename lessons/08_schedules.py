"""Lesson 8: checkpointing schedules. Where to cut a chain, predicted and then measured.

    python lessons/08_schedules.py            # about 16 s (make tour, 1 BLAS thread, 2 busy cores, 2026-12-01)
    python lessons/08_schedules.py --quick    # shorter chains: about 4 s

Part 1 cuts a uniform chain (n Linear -> Tanh pairs) into k segments with
mg.checkpoint_sequential, for every k from 1 to n, and measures the peak activation bytes with
mg.profile. Theory: the k - 1 kept segment inputs plus one segment's n / k layer outputs, so
about n / k + k layer outputs, least at k = sqrt(n). Each measurement is also predicted, buffer
by buffer, by minigrad/schedules.py, and the lesson asserts that the two are equal.

Part 2 runs three schedules, each a family of plans, on two chains: revolve (Griewank and
Walther's binomial checkpointing, for every number of slots), sqrt(n) segments, and Chen et
al.'s budgeted greedy (for every useful budget). The chains: the uniform one of part 1, and a
non-uniform one whose costs are a real transformer's: a stack of GPT blocks (minigrad/gpt.py),
each cut into its two residual sublayers, measured with checkpoint.measure_chain. Every plan
runs under mg.profile, and its measured peak and recompute FLOPs equal the prediction
(asserted). Plot: out/08_schedules.png (the k sweep with the theory; memory against recompute).
"""
# %%
import dataclasses
import math
import sys
import time

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

import minigrad as mg
from minigrad import nn
from minigrad import schedules as S
from minigrad.checkpoint import checkpoint_segments, measure_chain
from minigrad.gpt import GPT, GPTConfig
from minigrad.profiler import format_bytes, format_flops

from _lesson import command_line, finish, predict, reveal, save_plot

# %% settings
SEED = 0
PAIRS, WIDTH, BATCH = 64, 64, 16                      # the uniform chain: 64 Linear(64, 64) -> Tanh pairs
GPT_CFG = dict(vocab_size=65, block_size=128, n_layer=8, n_head=4, n_embd=32)   # T = 128 > C = 32
GPT_BATCH = 2
MAX_SLOTS = 16                                        # revolve: 1 .. 16 slots (fewer than n)
QUICK = dict(pairs=16, n_layer=4)                     # --quick: shorter chains, the same widths
PLOTS = {"08_schedules.png": "peak memory against the number of segments k with the n/k + k theory; "
                             "memory against recompute for revolve, sqrt(n) and the budgeted greedy"}
EXERCISES = (9, 10)


def measure(functions, x, segments, children=None):
    """One forward and backward under mg.profile: (peak activation bytes, recompute FLOPs)."""
    with mg.profile() as prof:
        checkpoint_segments(functions, segments, x, children).sum().backward()
    return prof.peak_bytes("activations"), prof.flops("recompute")


def checked(functions, x, plan):
    """Run the plan and assert that mg.profile measures what schedules.predict said."""
    got = measure(functions, x, plan.segments, plan.children)
    assert got == (plan.peak_bytes, plan.recompute_flops), \
        f"plan {plan.segments}: predicted {plan.peak_bytes} B and {plan.recompute_flops} FLOPs, measured {got}"
    return plan


# %% [markdown]
# ## The two chains

# %%
def uniform_chain(pairs):
    mg.manual_seed(SEED)
    functions = [nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()) for _ in range(pairs)]
    return functions, mg.randn(BATCH, WIDTH)


def transformer_chain(n_layer):
    """A stack of GPT blocks, each cut into its two residual sublayers: x + attn(ln_1(x)), x + mlp(ln_2(x))."""
    mg.manual_seed(SEED)
    cfg = GPTConfig(**dict(GPT_CFG, n_layer=n_layer))
    model = GPT(cfg)
    functions = []
    for block in model.h:
        def attention(x, b=block):
            return x + b.attn(b.ln_1(x))

        def mlp(x, b=block):
            return x + b.mlp(b.ln_2(x))
        functions += [attention, mlp]
    return functions, mg.randn(GPT_BATCH, cfg.block_size, cfg.n_embd), cfg


def kept_by(chain, i):
    """Bytes function i keeps for backward when it runs normally (its input, its output, the rest)."""
    return (chain.saves_input[i] * chain.input_bytes[i] + chain.saves_output[i] * chain.input_bytes[i + 1]
            + chain.other_bytes[i])


# %% [markdown]
# ## Part 1: k segments, theory n/k + k

# %%
def part1(functions, x, quick=False):
    n = len(functions)
    chain = measure_chain(functions, x)
    one = chain.input_bytes[0]  # one layer output
    assert all(b == one for b in chain.input_bytes) and all(chain.saves_input) and all(chain.saves_output)
    print(f"Part 1: a uniform chain of n = {n} functions, each Linear({WIDTH}, {WIDTH}) -> Tanh, batch {BATCH}: each "
          f"keeps its input and its output (one layer output: {format_bytes(one)}), so a plain run keeps n + 1 = "
          f"{n + 1} of them.")
    guess = predict(f"cut into the best number of segments k, how many layer outputs does the step hold at its peak "
                    f"(against {n + 1} plain)?", "layer outputs", quick=quick)
    print()
    rows = []
    for k in range(1, n + 1):
        with mg.profile() as prof:
            mg.checkpoint_sequential(functions, k, x).sum().backward()
        peak, recompute = prof.peak_bytes("activations"), prof.flops("recompute")
        plan = S.predict(chain, S.segment_bounds(n, k))
        assert (peak, recompute) == (plan.peak_bytes, plan.recompute_flops), \
            f"k = {k}: prediction and measurement differ"
        rows.append(dict(k=k, peak=peak, recompute=recompute / sum(chain.flops), theory=(n / k + k) * one,
                         last=plan.segments[-1][1] - plan.segments[-1][0]))
    print(f"{'k':>4}{'segment sizes':>16}{'measured (= predicted)':>24}{'theory (n/k + k) x one':>25}"
          f"{'recompute (forward passes)':>28}")
    best = min(rows, key=lambda r: r["peak"])
    for r in rows:
        if n % r["k"] == 0 or r is best or r["k"] == round(math.sqrt(n)):
            sizes = f"{n // r['k']}" + (f" .. {r['last']}" if r["last"] != n // r["k"] else "")
            print(f"{r['k']:>4}{sizes:>16}{format_bytes(r['peak']):>24}{format_bytes(r['theory']):>25}"
                  f"{r['recompute']:>28.3f}")
    reveal(guess, best["peak"] / one, "layer outputs")
    off = [r["k"] for r in rows if r["peak"] != r["theory"]]
    back = [r["k"] for r in rows if r["k"] > 1 and r["peak"] == rows[0]["peak"]]
    print(f"\nall {n} values of k run; measured = predicted for each. The least peak: k = {best['k']} "
          f"(sqrt(n) = {math.sqrt(n):g}), {format_bytes(best['peak'])} = {best['peak'] / one:g} layer outputs "
          f"(2 sqrt(n) = {2 * math.sqrt(n):g}), against {n + 1} plain. Measurement and theory agree exactly where "
          f"k divides n; at the other {len(off)} values of k the last segment takes what is left (segments of n // k, "
          f"as PyTorch's checkpoint_sequential cuts them), and the peak sits above the curve. For k = {back[0]} .. "
          f"{back[-1]} every segment but the last has one function and the last one, run plainly, has n - k + 1 "
          f"of them: the peak is the plain run's again. The recompute is the checkpointed segments' forward but each "
          f"one's last pair, whose results backward does not read again (NOTE [recompute what backward reads] in "
          f"minigrad/checkpoint/policies.py): (k - 1)(n/k - 1)/n of a pass where k divides n, against 1 - 1/k for whole "
          f"segments.\n")
    return dict(rows=rows, one=one, n=n)


# %% [markdown]
# ## Part 2: revolve, sqrt(n) and the budgeted greedy, on a uniform and a transformer chain

# %%
def schedules_on(name, functions, x):
    """Every plan of the three schedules, run and checked."""
    chain = measure_chain(functions, x)
    n, forward = len(chain), sum(chain.flops)
    plain = checked(functions, x, S.no_checkpointing(chain))
    budgets = sorted({sum(kept_by(chain, i) for i in range(a, b)) for a in range(n) for b in range(a + 1, n + 1)})
    budgeted = {}
    for budget in budgets:  # many budgets give the same cut: run each plan once
        plan = S.budgeted(chain, budget)
        budgeted.setdefault(tuple(plan.segments), plan)
    slots = range(1, min(n, MAX_SLOTS + 1))
    families = {"revolve": [S.revolve(chain, s) for s in slots],
                "sqrt(n)": [S.sqrt_n(chain)],
                "budgeted": list(budgeted.values())}
    t0 = time.perf_counter()
    runs = 1
    for plans in families.values():
        for plan in plans:
            checked(functions, x, plan)
            runs += 1
    seconds = time.perf_counter() - t0
    best = S.best_budgeted(chain)  # the budgeted plan with the least peak: one of those just run
    assert tuple(best.segments) in budgeted
    return dict(name=name, chain=chain, n=n, forward=forward, plain=plain.peak_bytes, families=families, best=best,
                runs=runs, seconds=seconds)


def point(study, plan):
    return plan.recompute_flops / study["forward"], plan.peak_bytes / study["plain"]


def report(study, extra=()):
    fam = study["families"]
    sqrt_plan, best, revolves = fam["sqrt(n)"][0], study["best"], fam["revolve"]
    print(f"{study['name']}: n = {study['n']} functions, no checkpointing peaks at {format_bytes(study['plain'])}; "
          f"{study['runs']} plans run in {study['seconds']:.1f} s, every one measured = predicted")
    print(f"  {'plan':<58}{'top-level segments':>20}{'peak':>12}{'of plain':>10}{'recompute (passes)':>20}")
    shown = [("sqrt(n) segments", sqrt_plan), ("budgeted greedy, least peak", best)]
    shown += [(f"revolve, {s} slot{'s' if s > 1 else ''}", revolves[s - 1]) for s in (1, 2, 4) if s <= len(revolves)]
    at_sqrt = [p for p in revolves if p.peak_bytes <= sqrt_plan.peak_bytes]
    cheapest = min(at_sqrt, key=lambda p: p.recompute_flops) if at_sqrt else None
    if cheapest is not None:
        slots = revolves.index(cheapest) + 1
        shown.append((f"revolve, least recompute within sqrt(n)'s peak ({slots} slots)", cheapest))
    shown += extra
    for label, plan in shown:
        passes, frac = point(study, plan)
        print(f"  {label:<58}{len(plan.segments):>20}{format_bytes(plan.peak_bytes):>12}{frac:>10.1%}{passes:>20.3f}")
    return cheapest


# %%
def plot(p1, studies):
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12.5, 4.8))
    kib, n, one = 1024, p1["n"], p1["one"]
    fine = [1 + i * (n - 1) / 400 for i in range(401)]
    a1.plot(fine, [(n / k + k) * one / kib for k in fine], "-", color="tab:gray", lw=2,
            label="theory: (n/k + k) layer outputs")
    for divides, style, label in ((True, dict(color="tab:blue"), "measured, k divides n"),
                                  (False, dict(color="tab:blue", mfc="none"), "measured, k does not: the last "
                                                                              "segment takes the rest")):
        chosen = [r for r in p1["rows"] if (n % r["k"] == 0) == divides]
        a1.plot([r["k"] for r in chosen], [r["peak"] / kib for r in chosen], "o", ms=4.5, label=label, **style)
    a1.axvline(math.sqrt(n), color="k", ls=":", lw=0.8)
    a1.text(math.sqrt(n) * 1.04, 0.97, f"k = sqrt(n) = {math.sqrt(n):g}", fontsize=9, va="top",
            transform=a1.get_xaxis_transform())
    if n > 4:
        a1.annotate("k > n/2: segments of one function,\nthe last one holds n - k + 1",
                    xy=(0.75 * n, (n + 1) * one / kib),
                    xytext=(n, 0.75 * (n + 1) * one / kib), fontsize=8, ha="right",
                    arrowprops=dict(arrowstyle="->", lw=0.8))
    a1.set_xscale("log", base=2)
    a1.xaxis.set_major_locator(FixedLocator([2 ** i for i in range(int(math.log2(n)) + 1)]))
    a1.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    a1.xaxis.set_minor_locator(NullLocator())
    a1.set_xlabel("k, the number of segments (log scale)")
    a1.set_ylabel("peak activation memory (KiB)")
    a1.set_title(f"k segments of a chain of n = {n} Linear+Tanh pairs", fontsize=10)
    a1.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.1, 0.91),
              title="peak measured by mg.profile (= predicted)", title_fontsize=8)

    colors = {"uniform": "tab:blue", "transformer": "tab:red"}
    for study in studies:
        c = colors[study["kind"]]
        fam = study["families"]
        xs, ys = zip(*[point(study, p) for p in fam["revolve"]])
        a2.plot(xs, [y * 100 for y in ys], "^-", color=c, ms=4, lw=1)
        a2.annotate("1 slot", (xs[0], ys[0] * 100), xytext=(0, -12), textcoords="offset points", ha="center",
                    fontsize=8, color=c)
        a2.annotate(f"{len(xs)} slots", (xs[-1], ys[-1] * 100), xytext=(6, 4), textcoords="offset points",
                    ha="left", fontsize=8, color=c)
        xs, ys = zip(*[point(study, p) for p in fam["budgeted"]])
        a2.plot(xs, [y * 100 for y in ys], "o", color=c, ms=6, mfc="none")
        x, y = point(study, fam["sqrt(n)"][0])  # a hollow square, large, and the star small on top: both show
        a2.plot([x], [y * 100], "s", color=c, ms=15, mfc="none", mew=1.8, zorder=4)
        x, y = point(study, study["best"])
        a2.plot([x], [y * 100], "*", color=c, ms=9, mec="k", mew=0.5, zorder=5)
    a2.set_xscale("log")
    a2.set_yscale("log")
    ticks = [0.5, 1, 2, 5, 10, 20, 50]
    a2.xaxis.set_major_locator(FixedLocator(ticks))
    a2.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    a2.xaxis.set_minor_locator(NullLocator())
    a2.yaxis.set_major_locator(FixedLocator([5, 10, 20, 50, 100]))
    a2.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}%"))
    a2.yaxis.set_minor_locator(NullLocator())
    a2.set_xlabel("recompute (forward passes of the chain, log scale)")
    a2.set_ylabel("peak activation memory (% of no checkpointing, log scale)")
    a2.set_title("Memory against recompute, every plan measured (= predicted)", fontsize=10)
    handles = [plt.Line2D([], [], color="k", marker="^", ms=4, lw=1,
                          label=f"revolve, 1 .. min(n - 1, {MAX_SLOTS}) slots"),
               plt.Line2D([], [], color="k", marker="s", ms=11, mfc="none", mew=1.8, lw=0, label="sqrt(n) segments"),
               plt.Line2D([], [], color="k", marker="o", mfc="none", ms=6, lw=0, label="budgeted greedy, each budget"),
               plt.Line2D([], [], color="k", marker="*", ms=9, lw=0, label="budgeted greedy, least peak")]
    handles += [plt.Line2D([], [], color=colors[s["kind"]], lw=6, label=s["label"]) for s in studies]
    a2.legend(handles=handles, fontsize=7.5, loc="upper right")
    print(f"plot: {save_plot(fig, '08_schedules.png')}\n")


# %%
def main(argv=None):
    ap = command_line(__doc__, quick=f"a uniform chain of {QUICK['pairs']} pairs instead of {PAIRS}, and "
                                     f"{QUICK['n_layer']} GPT blocks instead of {GPT_CFG['n_layer']} (the same widths "
                                     f"and sequence length)",
                      no_plot="skip writing out/08_schedules.png")
    args = ap.parse_args(argv)
    pairs_n = QUICK["pairs"] if args.quick else PAIRS
    n_layer = QUICK["n_layer"] if args.quick else GPT_CFG["n_layer"]
    t0 = time.perf_counter()

    functions, x = uniform_chain(pairs_n)
    p1 = part1(functions, x, args.quick)

    print("Part 2: revolve, sqrt(n) and the budgeted greedy, on two chains\n")
    uniform = schedules_on(f"uniform chain ({pairs_n} Linear+Tanh pairs)", functions, x)
    uniform.update(kind="uniform", label=f"uniform: {pairs_n} Linear+Tanh pairs")
    tfunctions, tx, cfg = transformer_chain(n_layer)
    transformer = schedules_on(f"transformer chain ({n_layer} GPT blocks, 2 sublayers each)", tfunctions, tx)
    transformer.update(kind="transformer", label=f"transformer: {n_layer} GPT blocks, 2 sublayers each")
    chain = transformer["chain"]
    print(f"The transformer chain: {n_layer} GPT blocks (batch {GPT_BATCH}, T = {cfg.block_size} tokens, C = "
          f"{cfg.n_embd}, {cfg.n_head} heads), each cut into its two residual sublayers, as measure_chain saw them:")
    for i, what in ((0, "attention sublayer  x + attn(ln_1(x))"), (1, "MLP sublayer        x + mlp(ln_2(x)) ")):
        print(f"  {what}: input {format_bytes(chain.input_bytes[i])}, keeps {format_bytes(kept_by(chain, i))} "
              f"inside, {format_flops(chain.flops[i])}FLOP forward")
    print("  (why not finer, ln | attention | ln | MLP? A chain hands one tensor from link to link, and the residual "
          "add still needs the sublayer's input after the attention: inside a sublayer there is no one tensor to cut "
          "at.)\n")

    # what GPT(gradient_checkpointing=True) does: one segment per block (it checkpoints the last block too)
    per_block = checked(tfunctions, tx, S.every_k(chain, 2))
    for study, extra in ((uniform, ()), (transformer, [("one segment per block (2 sublayers)", per_block)])):
        study["cheapest_at_sqrt"] = report(study, extra)
        print()
    u, t = uniform, transformer
    u_rev, u_sqrt = u["families"]["revolve"], u["families"]["sqrt(n)"][0]
    # the theory counts whole forward steps: schedules.predict on the chain without its Reruns counts the same way
    whole = dataclasses.replace(u["chain"], reruns=None)
    assert all(S.revolve(whole, s).recompute_flops == S.binomial_steps(u["n"], s) * whole.flops[0]
               for s in range(1, len(u_rev) + 1))
    ran = sum(p.recompute_flops for p in u_rev) / sum(S.revolve(whole, s).recompute_flops for s in range(1, len(u_rev) + 1))
    below = [name for name, plans in u["families"].items() if any(p.peak_bytes < u_sqrt.peak_bytes for p in plans)]
    one_slot, at_sqrt = point(u, u_rev[0]), point(u, u["cheapest_at_sqrt"])
    print(f"Uniform: revolve's recompute, counted in whole steps, is binomial_steps(n, slots) for every slot count "
          f"(asserted); the engine ran {ran:.0%} of those FLOPs, as it does not run a recomputed segment's last pair "
          f"again (its Tanh's output is kept, and only that Tanh reads its Linear's: NOTE [recompute what backward "
          f"reads] in minigrad/checkpoint/policies.py). Of the plans run, {' and '.join(below) or 'none'} went below sqrt(n)'s peak: down to "
          f"{one_slot[1]:.1%} of the plain peak, at {one_slot[0]:.1f} forward passes, with one slot. Within "
          f"sqrt(n)'s peak revolve costs {at_sqrt[0]:.2f} passes against sqrt(n)'s {point(u, u_sqrt)[0]:.2f}: "
          f"revolve is optimal where memory is the stored states and each step is reversed alone; here a "
          f"recomputed segment also holds its insides while it is reversed, and equal segments use that well.")
    t_best, t_sqrt = t["best"], t["families"]["sqrt(n)"][0]
    print(f"Transformer: a sublayer keeps {kept_by(chain, 0) / chain.input_bytes[0]:.0f}x (attention) and "
          f"{kept_by(chain, 1) / chain.input_bytes[0]:.0f}x (MLP) its input's bytes, so keeping inputs is cheap and "
          f"insides are dear. The budgeted greedy finds that: its least peak cuts {len(t_best.segments)} segments "
          f"and reaches {point(t, t_best)[1]:.1%} of the plain peak at {point(t, t_best)[0]:.2f} passes, against "
          f"sqrt(n)'s {len(t_sqrt.segments)} segments at {point(t, t_sqrt)[1]:.1%}. One segment per block, the cut of "
          f"gradient_checkpointing=True in minigrad's GPT (and of most libraries), comes close: "
          f"{point(t, per_block)[1]:.1%} at {point(t, per_block)[0]:.2f} passes. Revolve saves a little more "
          f"memory ({point(t, t['families']['revolve'][0])[1]:.1%} with one slot) for many more passes.\n")

    if not args.no_plot:
        plot(p1, [uniform, transformer])
    finish(EXERCISES, t0)


# %%
if __name__ == "__main__":
    main([] if "ipykernel" in sys.modules else None)  # in a notebook: the defaults
