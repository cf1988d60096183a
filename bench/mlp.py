"""Speed of minigrad against hand-written NumPy (and PyTorch eager, when installed) on two MLPs.

    python bench/mlp.py            # full run
    python bench/mlp.py --quick    # a smoke run (CI)

(a) a 32-layer, 512-wide tanh MLP, forward + backward at batch 256, float32: big matmuls,
    where the engine should add almost nothing over the NumPy calls it makes;
(b) a 16x16 tanh MLP at batch 1: tiny tensors, where per-op Python overhead is everything.
'profiled' is minigrad inside `with mg.profile():` (one profile per step): the ledger's cost;
'sqrt-ckpt' is minigrad with checkpoint_sequential(model, 'sqrt', x): checkpointing's time cost.
Contenders run interleaved in one process; we report the median of per-round ratios.
"""
import argparse
import json
import statistics
import time

import numpy as np

import minigrad as mg


def minigrad_step(model, x):
    model.zero_grad()
    model(x).sum().backward()


def profiled_step(model, x):
    with mg.profile():
        minigrad_step(model, x)


def sqrt_checkpointed_step(model, x):
    model.zero_grad()
    mg.checkpoint_sequential(model, "sqrt", x).sum().backward()


def numpy_step(params, x):
    """The same math by hand: forward keeps each layer's output, backward walks them back."""
    hs = [x]
    for w, b in params:
        hs.append(np.tanh(hs[-1] @ w.T + b))
    g = np.ones_like(hs[-1])
    grads = []
    for i in range(len(params) - 1, -1, -1):
        w, _ = params[i]
        gz = g * (1 - hs[i + 1] * hs[i + 1])
        grads.append((gz.T @ hs[i], gz.sum(axis=0)))
        if i:  # the input batch needs no gradient
            g = gz @ w
    return grads


def torch_step(model, x):
    model.zero_grad(set_to_none=True)
    model(x).sum().backward()


def build(depth, width, batch):
    mg.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [mg.nn.Linear(width, width), mg.nn.Tanh()]
    model = mg.nn.Sequential(*layers)
    x = mg.randn(batch, width)
    params = [(m.weight.data, m.bias.data) for m in layers[::2]]
    contenders = {"minigrad": lambda: minigrad_step(model, x), "numpy": lambda: numpy_step(params, x.data),
                  "profiled": lambda: profiled_step(model, x), "sqrt-ckpt": lambda: sqrt_checkpointed_step(model, x)}
    try:
        import torch
        tl = []
        for w, b in params:
            lin = torch.nn.Linear(width, width)
            with torch.no_grad():
                lin.weight.copy_(torch.from_numpy(w)), lin.bias.copy_(torch.from_numpy(b))
            tl += [lin, torch.nn.Tanh()]
        tmodel, tx = torch.nn.Sequential(*tl), torch.from_numpy(x.data)
        contenders["torch"] = lambda: torch_step(tmodel, tx)
    except ImportError:
        pass
    return contenders


def timeit(fn, inner):
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def compare(name, contenders, rounds, inner, report):
    for fn in contenders.values():  # warm up
        fn()
    times = {k: [] for k in contenders}
    for _ in range(rounds):  # interleaved, so that a slow moment of the machine hits every contender
        for k, fn in contenders.items():
            times[k].append(timeit(fn, inner))
    print(f"\n{name}")
    print(f"  {'':10}{'median':>12}{'minigrad / it':>16}{'it / minigrad':>16}   (medians of per-round ratios)")
    rows = {}
    for k, ts in times.items():
        mine = statistics.median(a / b for a, b in zip(times["minigrad"], ts))
        theirs = statistics.median(b / a for a, b in zip(times["minigrad"], ts))
        rows[k] = dict(median_s=statistics.median(ts), minigrad_over_it=mine, it_over_minigrad=theirs)
        print(f"  {k:10}{statistics.median(ts) * 1e3:>9.3f} ms{mine:>16.3f}{theirs:>16.3f}")
    report[name] = rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, few rounds: checks that it runs")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    args = ap.parse_args()
    report = {}
    if args.quick:
        compare("(a) 4-layer 64-wide tanh MLP, batch 16 (quick)", build(4, 64, 16), 3, 2, report)
        compare("(b) 16x16 MLP, batch 1 (quick)", build(2, 16, 1), 3, 20, report)
    else:
        compare("(a) 32-layer 512-wide tanh MLP, batch 256, float32, forward+backward", build(32, 512, 256),
                15, 3, report)
        compare("(b) 16x16 tanh MLP (2 layers), batch 1: per-op overhead", build(2, 16, 1), 15, 2000, report)
    print("\ngoals (issue [bench]): (a) minigrad / numpy <= 1.05 and minigrad / torch <= 0.95; (b) minigrad / "
          "torch <= 0.7; profiled / minigrad <= 1.10; sqrt-ckpt / minigrad <= 1.25 (see bench/NOTES.md)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
        print(f"results: {args.json}")


if __name__ == "__main__":
    main()
