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


def compare(name, contenders, rounds, inner):
    for fn in contenders.values():  # warm up
        fn()
    times = {k: [] for k in contenders}
    for _ in range(rounds):
        for k, fn in contenders.items():
            times[k].append(timeit(fn, inner))
    print(f"\n{name}")
    for k, ts in times.items():
        ratio = statistics.median(a / b for a, b in zip(times["minigrad"], ts))
        print(f"  {k:9s} median {statistics.median(ts) * 1e3:9.3f} ms   minigrad/{k} = {ratio:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, few rounds: checks that it runs")
    args = ap.parse_args()
    if args.quick:
        compare("(a) 4-layer 64-wide tanh MLP, batch 16 (quick)", build(4, 64, 16), rounds=3, inner=2)
        compare("(b) 16x16 MLP, batch 1 (quick)", build(2, 16, 1), rounds=3, inner=20)
        return
    compare("(a) 32-layer 512-wide tanh MLP, batch 256, float32, forward+backward", build(32, 512, 256),
            rounds=15, inner=3)
    compare("(b) 16x16 tanh MLP (2 layers), batch 1: per-op overhead", build(2, 16, 1), rounds=15, inner=2000)


if __name__ == "__main__":
    main()
