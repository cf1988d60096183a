"""Lesson 3: activation checkpointing. Plan, predict, then measure.

    python lessons/03_checkpointing.py            # about 2 s on 2 cores (measured 2026-11-30)
    python lessons/03_checkpointing.py --quick    # smaller depths

Checkpointing keeps only some layer inputs in the forward pass and recomputes the rest during
backward. For a chain of n layers cut into sqrt(n) segments, activation memory grows like
sqrt(n) instead of n, for about one extra forward pass (Chen et al. 2016).

For MLPs of several depths we measure each layer (checkpoint.measure_chain), let
minigrad/schedules.py plan where to cut and predict the peak activation bytes and the
recompute FLOPs, then run the plan under mg.profile and print prediction and measurement side
by side. Plots: out/03_checkpointing.png (memory against depth, log-log; memory against
recompute for every way of cutting one chain into equal segments, and for the budgeted,
recursive and revolve schedules).
"""
import argparse
import math
import os
import time

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from tqdm import tqdm

import minigrad as mg
from minigrad import schedules as S
from minigrad.checkpoint import checkpoint_segments, measure_chain
from minigrad.profiler import format_bytes, format_flops

# settings
SEED = 0
DEPTHS = (16, 64, 256, 1024)    # Linear+Tanh pairs: the chain has 2 x depth functions
WIDTH, BATCH = 32, 8
TRADEOFF_DEPTH = 64
OUT = "out"


def mlp(depth):
    mg.manual_seed(SEED)
    layers = []
    for _ in range(depth):
        layers += [mg.nn.Linear(WIDTH, WIDTH), mg.nn.Tanh()]
    return list(mg.nn.Sequential(*layers))


def run(functions, x, segments, children=None):
    """One forward and backward under mg.profile: (peak activation bytes, recompute FLOPs, forward FLOPs, s)."""
    t0 = time.perf_counter()
    with mg.profile() as prof:
        checkpoint_segments(functions, segments, x, children).sum().backward()
    return prof.peak_bytes("activations"), prof.flops("recompute"), prof.flops("forward"), time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="depths 16 and 64 only")
    ap.add_argument("--no-plot", action="store_true", help="skip writing out/03_checkpointing.png")
    args = ap.parse_args()
    depths = DEPTHS[:2] if args.quick else DEPTHS

    print(f"MLPs of Linear({WIDTH}, {WIDTH}) -> Tanh pairs, batch {BATCH}, float32; "
          f"a chain of n = 2 x depth functions.\n")
    print(f"{'depth':>6}{'plan':>7}{'segments':>10}{'predicted':>12}{'measured':>12}"
          f"{'recompute (pred / meas)':>28}{'of a forward':>14}")
    rows = {}
    for depth in tqdm(depths, desc="depths", disable=None, leave=False):
        functions, x = mlp(depth), mg.randn(BATCH, WIDTH)
        chain = measure_chain(functions, x)
        for name, plan in (("none", S.no_checkpointing(chain)), ("sqrt", S.sqrt_n(chain))):
            peak, recompute, forward, _ = run(functions, x, plan.segments)
            rows[depth, name] = peak
            tqdm.write(f"{depth:>6}{name:>7}{len(plan.segments):>10}{format_bytes(plan.peak_bytes):>12}"
                       f"{format_bytes(peak):>12}{format_flops(plan.recompute_flops) + ' / ' + format_flops(recompute):>28}"
                       f"{recompute / forward:>14.2f}")
            assert (peak, recompute) == (plan.peak_bytes, plan.recompute_flops), "prediction and measurement differ"

    lo, hi = depths[0], depths[-1]
    slope = {name: math.log(rows[hi, name] / rows[lo, name]) / math.log(hi / lo) for name in ("none", "sqrt")}
    print(f"\nlog-log slope of peak activation memory against depth, {lo} to {hi}: "
          f"no checkpointing {slope['none']:.2f}, sqrt(n) segments {slope['sqrt']:.2f} (theory: 1 and 0.5)")
    print(f"at depth {hi}: {format_bytes(rows[hi, 'none'])} -> {format_bytes(rows[hi, 'sqrt'])}, "
          f"{rows[hi, 'none'] / rows[hi, 'sqrt']:.1f}x less activation memory")

    # one chain, every way of cutting it into equal segments: the memory / recompute trade-off
    functions, x = mlp(TRADEOFF_DEPTH), mg.randn(BATCH, WIDTH)
    chain = measure_chain(functions, x)
    plans = [S.every_k(chain, k) for k in range(1, len(chain) + 1)]
    best, sqrt_plan, rec = S.best_budgeted(chain), S.sqrt_n(chain), S.recursive(chain)
    revolves = [S.revolve(chain, slots) for slots in (2, 3, 4, 6, 8, 12)]
    forward = sum(chain.flops)
    print(f"\nchain of {len(chain)} functions, predicted (recompute in forward passes; the memory of each plan "
          f"is checked by running it):")
    for name, plan in [("sqrt(n) segments", sqrt_plan), ("best equal cut", min(plans, key=lambda p: p.peak_bytes)),
                       ("Chen's budgeted greedy", best), ("recursive halving", rec)] + \
            [(f"revolve, {s} slots", p) for s, p in zip((2, 3, 4, 6, 8, 12), revolves)]:
        peak, recompute, _, _ = run(functions, x, plan.segments, plan.children)
        assert (peak, recompute) == (plan.peak_bytes, plan.recompute_flops), "prediction and measurement differ"
        print(f"  {name:<24}{format_bytes(plan.peak_bytes):>12}{plan.recompute_flops / forward:>8.2f} forward passes")
    plain_s = min(run(functions, x, [(0, len(chain))])[3] for _ in range(3))
    sqrt_s = min(run(functions, x, sqrt_plan.segments)[3] for _ in range(3))
    print(f"time of one step (best of 3, under the profiler): plain {plain_s * 1e3:.1f} ms, "
          f"sqrt(n) {sqrt_s * 1e3:.1f} ms ({sqrt_s / plain_s:.2f}x; tensors this small measure per-op "
          f"overhead more than arithmetic: bench/bench.py times a 512-wide MLP)")

    if not args.no_plot:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
        for name, label in (("none", "no checkpointing"), ("sqrt", "sqrt(n) segments")):
            a1.loglog(depths, [rows[d, name] / 1024 for d in depths], "o-", label=f"{label} (slope {slope[name]:.2f})")
        a1.set_xlabel("depth (Linear+Tanh pairs)")
        a1.set_ylabel("peak activation memory (KiB)")
        a1.set_title("Memory against depth, measured")
        a1.legend()
        a2.scatter([p.recompute_flops / forward for p in plans], [p.peak_bytes / 1024 for p in plans], s=10,
                   label="segments of k functions, k = 1 .. n")
        a2.plot([sqrt_plan.recompute_flops / forward], [sqrt_plan.peak_bytes / 1024], "s", label="sqrt(n)")
        a2.plot([best.recompute_flops / forward], [best.peak_bytes / 1024], "*", ms=12, label="budgeted greedy")
        a2.plot([rec.recompute_flops / forward], [rec.peak_bytes / 1024], "D", label="recursive halving")
        a2.plot([p.recompute_flops / forward for p in revolves], [p.peak_bytes / 1024 for p in revolves], "^-",
                label="revolve (2 .. 12 slots)")
        a2.set_xlabel("recompute (forward passes)")
        a2.set_ylabel("peak activation memory (KiB)")
        a2.set_title(f"Memory against compute, chain of {len(chain)} functions")
        a2.legend()
        fig.tight_layout()
        os.makedirs(OUT, exist_ok=True)
        path = os.path.join(OUT, "03_checkpointing.png")
        fig.savefig(path, dpi=120)
        print(f"\nplot: {path}")


if __name__ == "__main__":
    main()
