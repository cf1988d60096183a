"""Speed of minigrad against hand-written NumPy and PyTorch eager (when installed).

    python bench/bench.py            # full run
    python bench/bench.py --quick    # a smoke run (CI)
    python bench/bench.py --only c   # just the GPT step
    python bench/bench.py --only c --breakdown   # and where its time goes: mg.profile's table of one step
    python bench/bench.py --device cuda   # minigrad on CuPy, against the same math in CuPy and PyTorch CUDA
    make bench                       # installs PyTorch's CPU build if missing, writes out/bench.json and plots

(a) a 32-layer, 512-wide tanh MLP, forward + backward at batch 256, float32: big matmuls,
    where the engine should add almost nothing over the NumPy calls it makes;
(b) a 16x16 tanh MLP at batch 1: tiny tensors, where per-op Python overhead is everything.
'profiled' is minigrad inside `with mg.profile():` (one profile per step): the ledger's cost;
'sqrt-ckpt' is minigrad with checkpoint_sequential(model, 'sqrt', x): checkpointing's time cost;
in (a), 'sqrt-dots', 'sqrt-core' and 'sqrt-all' are the same under policy=dots_saveable,
save_anything_except_core_attention (in an MLP, which has no attention, it keeps every op) and
everything_saveable (mg.checkpoint_policies): what keeping rather than recomputing buys in time.
(c) a training step (forward, backward, AdamW) of the small GPT in minigrad/gpt.py against the
    same model, with the same weights, written in PyTorch.
(f) how cost grows: step time and peak activation memory against depth and against batch,
    plain and with sqrt(n) checkpointing (log-log in the plot).
Prints a table; --json and --plot write the results. --breakdown prints, for (c), mg.profile's table of one
minigrad step (the median of several, each profiled alone): self time by op and phase (NOTE [self time] in
minigrad/profiler.py), the breakdown in bench/NOTES.md.
Contenders run interleaved in one process; we report the median of per-round ratios.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np

import minigrad as mg
from minigrad import backend
from minigrad.checkpoint import measure_chain
from minigrad.schedules import sqrt_n

DEVICE = "cpu"  # set by --device; every tensor below is made on it (the default device)


def torch_device():
    """Where the PyTorch contenders run: the same kind of device as minigrad, or None (no torch columns)."""
    try:
        import torch
    except ImportError:
        return None
    if DEVICE == "cpu":
        return "cpu"
    return "cuda" if torch.cuda.is_available() else None


def to_torch(array, device):
    import torch
    return torch.from_numpy(backend.to_numpy(array)).to(device)


def sync():
    """GPU work is asynchronous: wait for it before reading the clock."""
    if DEVICE == "cuda":
        import cupy
        cupy.cuda.get_current_stream().synchronize()
        if torch_device() == "cuda":
            import torch
            torch.cuda.synchronize()


def minigrad_step(model, x):
    model.zero_grad()
    model(x).sum().backward()


def forward_only(model, x):
    model(x).sum()  # recorded, then dropped: the forward's share of a step


def profiled_step(model, x):
    with mg.profile():
        minigrad_step(model, x)


def sqrt_checkpointed_step(model, x, policy=None):
    model.zero_grad()
    mg.checkpoint_sequential(model, "sqrt", x, policy=policy).sum().backward()


# (a)'s sqrt(n) checkpointing under each policy but nothing_saveable ('sqrt-ckpt'): contender -> policy
POLICIES = {"sqrt-dots": "dots_saveable", "sqrt-core": "save_anything_except_core_attention",
            "sqrt-all": "everything_saveable"}


def numpy_step(params, x):
    """The same math by hand: forward keeps each layer's output, backward walks them back.

    With CuPy arrays the same code runs on the GPU (np.tanh and np.ones_like dispatch to CuPy)."""
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


def mlp(depth, width, batch):
    """(a)'s and (b)'s model, depth (Linear, Tanh) pairs in one Sequential, and its input batch: the same every call."""
    mg.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [mg.nn.Linear(width, width), mg.nn.Tanh()]
    return mg.nn.Sequential(*layers), mg.randn(batch, width)


def build(depth, width, batch, policies=False):
    model, x = mlp(depth, width, batch)
    layers = list(model)
    params = [(m.weight.data, m.bias.data) for m in layers[::2]]
    by_hand = "numpy" if DEVICE == "cpu" else "cupy"
    contenders = {"minigrad": lambda: minigrad_step(model, x), by_hand: lambda: numpy_step(params, x.data),
                  "profiled": lambda: profiled_step(model, x), "sqrt-ckpt": lambda: sqrt_checkpointed_step(model, x),
                  "forward": lambda: forward_only(model, x)}
    if policies:
        for k, name in POLICIES.items():
            policy = getattr(mg.checkpoint_policies, name)
            contenders[k] = lambda policy=policy: sqrt_checkpointed_step(model, x, policy)
    device = torch_device()
    if device is None:
        return contenders
    import torch
    tl = []
    for w, b in params:
        lin = torch.nn.Linear(width, width)
        with torch.no_grad():
            lin.weight.copy_(to_torch(w, "cpu")), lin.bias.copy_(to_torch(b, "cpu"))
        tl += [lin, torch.nn.Tanh()]
    tmodel, tx = torch.nn.Sequential(*tl).to(device), to_torch(x.data, device)
    contenders["torch"] = lambda: torch_step(tmodel, tx)
    return contenders


GPT_CFG = dict(vocab_size=64, block_size=64, n_layer=4, n_head=4, n_embd=128)


def build_gpt(batch, cfg=GPT_CFG, against_torch=True):
    """The GPT training step in minigrad and, with the same weights, in PyTorch (unless against_torch=False)."""
    from minigrad.gpt import GPT, GPTConfig
    mg.manual_seed(0)
    model = GPT(GPTConfig(**cfg))
    opt = mg.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = mg.randint(0, cfg["vocab_size"], (batch, cfg["block_size"])), mg.randint(0, cfg["vocab_size"],
                                                                                       (batch, cfg["block_size"]))

    def step():
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    contenders = {"minigrad": step}
    device = torch_device()
    if device is None or not against_torch:
        return contenders
    import torch
    tmodel = torch_gpt(cfg, model.state_dict()).to(device)
    topt = torch.optim.AdamW(tmodel.parameters(), lr=1e-4)
    tx, ty = to_torch(x.data, device), to_torch(y.data, device)
    with mg.no_grad(), torch.no_grad():  # the same model: the same loss before any step
        mine = model(x, y)[1].item()
        theirs = torch.nn.functional.cross_entropy(tmodel(tx).reshape(-1, cfg["vocab_size"]), ty.reshape(-1)).item()
    assert abs(mine - theirs) < 1e-4, f"the PyTorch GPT differs from minigrad's: loss {theirs} vs {mine}"

    def torch_step_gpt():
        logits = tmodel(tx)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg["vocab_size"]), ty.reshape(-1))
        topt.zero_grad(set_to_none=True)
        loss.backward()
        topt.step()
    contenders["torch"] = torch_step_gpt
    return contenders


def breakdown(step, steps=7):
    """mg.profile's table of the step whose profiled wall time is the median of `steps` (after a warm-up):
    where one step's time goes, op by op and phase by phase."""
    step()
    profiles = []
    for _ in range(steps):
        with mg.profile() as prof:
            step()
        profiles.append(prof)
    profiles.sort(key=lambda p: p.wall_seconds())
    prof = profiles[len(profiles) // 2]
    print(f"\n(c) the minigrad GPT step under mg.profile (the median of {steps} by wall time, "
          f"{', '.join(f'{p.wall_seconds() * 1e3:.1f}' for p in profiles)} ms):\n")
    print(prof.table())


def torch_gpt(cfg, state):
    """minigrad's GPT in PyTorch, same parameter names, loaded with minigrad's weights."""
    import math as _math
    import torch
    from torch import nn
    C, nh, T, V = cfg["n_embd"], cfg["n_head"], cfg["block_size"], cfg["vocab_size"]

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)

        def forward(self, x):
            B, T_, _ = x.shape
            q, k, v = (t.reshape(B, T_, nh, C // nh).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2))
            att = (q @ k.transpose(-2, -1)) * (1.0 / _math.sqrt(C // nh))
            mask = torch.ones(T_, T_, dtype=torch.bool, device=x.device).triu(1)
            att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
            return self.c_proj((att @ v).transpose(1, 2).reshape(B, T_, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc, self.gelu, self.c_proj = nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn, self.ln_2, self.mlp = nn.LayerNorm(C), Attention(), nn.LayerNorm(C), MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
            self.h = nn.ModuleList(Block() for _ in range(cfg["n_layer"]))
            self.ln_f, self.lm_head = nn.LayerNorm(C), nn.Linear(C, V, bias=False)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    model = GPT()
    model.load_state_dict({k: to_torch(v, "cpu") for k, v in state.items()})
    return model


def torch_note():
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed: no torch columns (`make bench` installs its CPU build)"
    if torch_device() is None:
        return f"PyTorch {torch.__version__} has no CUDA here: no torch columns"
    return f"PyTorch {torch.__version__} on {torch_device()}, {torch.get_num_threads()} CPU threads"


def timeit(fn, inner):
    sync()
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    sync()
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
    return times


def recompute_estimate(rows, times, depth, width, batch):
    """What sqrt(n) checkpointing must cost on this machine, from the forward's measured share of a step.

    checkpoint_sequential recomputes every segment but the last, less each one's last Linear and Tanh (NOTE
    [recompute what backward reads] in minigrad/checkpoint.py): schedules.sqrt_n predicts that fraction of
    the forward's FLOPs from the measured chain. So sqrt-ckpt / minigrad >= 1 + fraction * forward / step,
    give or take the checkpoint's bookkeeping and the clock's noise."""
    model, x = mlp(depth, width, batch)
    chain = measure_chain(list(model), x)
    fraction = sqrt_n(chain).recompute_flops / sum(chain.flops)
    estimate = statistics.median(1 + fraction * f / m for f, m in zip(times["forward"], times["minigrad"]))
    rows["sqrt-ckpt"]["recompute_estimate"] = estimate
    print(f"  sqrt-ckpt recomputes {fraction:.1%} of the forward's FLOPs (schedules.sqrt_n): 1 + {fraction:.3f} x "
          f"forward / step = {estimate:.3f} here")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, few rounds: checks that it runs")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    ap.add_argument("--plot", metavar="PATH", help="also plot each contender's time relative to minigrad (PNG)")
    ap.add_argument("--only", metavar="PARTS", default="abcf",
                    help="which parts to run, for example --only c or --only ab (default: abcf, all of them)")
    ap.add_argument("--breakdown", action="store_true",
                    help="with part (c): also print mg.profile's table (time by op and phase) of one minigrad step")
    ap.add_argument("--device", choices=["cpu", "cuda"], default=mg.default_device().split(":")[0],
                    help="where minigrad, the by-hand version and PyTorch run (default: $MINIGRAD_DEVICE, else cpu)")
    args = ap.parse_args()
    if set(args.only) - set("abcf"):
        ap.error(f"--only takes letters from 'abcf' (parts (a), (b), (c) and (f)), got {args.only!r}")
    global DEVICE
    DEVICE = args.device
    os.environ["MINIGRAD_DEVICE"] = DEVICE  # the default device: every tensor below is made there
    try:
        mg.tensor([0.0])
    except backend.DeviceError as e:
        ap.error(str(e))
    print(f"device: {DEVICE}; {torch_note()}")
    report, q = {}, args.quick  # --quick: tiny sizes and few rounds, the same parts
    tag = " (quick)" if q else ""
    if "a" in args.only:
        depth, width, batch = (4, 64, 16) if q else (32, 512, 256)
        name = f"(a) {depth}-layer {width}-wide tanh MLP, batch {batch}, float32, forward+backward{tag}"
        times = compare(name, build(depth, width, batch, policies=True), *((3, 2) if q else (15, 3)), report)
        recompute_estimate(report[name], times, depth, width, batch)
        for k, policy in POLICIES.items():
            report[name][k]["policy"] = policy
        print("  " + "; ".join(f"{k}: policy={v}" for k, v in POLICIES.items()) + " (sqrt-ckpt: nothing_saveable)")
    if "b" in args.only:
        compare(f"(b) 16x16 tanh MLP (2 layers), batch 1: per-op overhead{tag}", build(2, 16, 1),
                *((3, 20) if q else (15, 2000)), report)
    if "c" in args.only:
        cfg, batch = (dict(GPT_CFG, n_layer=1, block_size=16, n_embd=32), 2) if q else (GPT_CFG, 8)
        if args.breakdown:  # before PyTorch's steps, whose allocations change the allocator's (bench/NOTES.md)
            breakdown(build_gpt(batch, cfg, against_torch=False)["minigrad"], steps=3 if q else 7)
        compare(f"(c) GPT training step (AdamW), {cfg['n_layer']} layer{'s' * (cfg['n_layer'] > 1)}, {cfg['n_embd']} wide, {cfg['n_head']} "
                f"heads, batch {batch} x {cfg['block_size']} tokens, vocabulary {cfg['vocab_size']}{tag}",
                build_gpt(batch, cfg), *((3, 1) if q else (10, 2)), report)
    if "f" in args.only:
        if q:
            scaling(report, depths=[2, 4], batches=[4, 8], width=16, rounds=1)
        else:
            scaling(report, depths=[4, 8, 16, 32, 64], batches=[16, 32, 64, 128, 256], width=256)
    print("\ngoals (issue [bench]): (a) minigrad / numpy <= 1.05 and minigrad / torch <= 0.95; (b) minigrad / "
          "torch <= 0.7; profiled / minigrad <= 1.10; (issue [selective]) sqrt-ckpt / minigrad <= 1.20 (see "
          "bench/NOTES.md)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
        print(f"results: {args.json}")
    if args.plot:
        if set(args.only) & set("abc"):
            plot(report, args.plot)
            print(f"plot: {args.plot}")
        if "(f) scaling" in report:
            scaling_path = os.path.splitext(args.plot)[0] + "_scaling.png"
            plot_scaling(report["(f) scaling"], scaling_path)
            print(f"plot: {scaling_path}")


def scaling(report, depths, batches, width, rounds=3):
    """(f): one MLP step per size, plain and sqrt(n)-checkpointed: best-of-rounds time, peak activations."""
    rows = []
    for label, sizes in (("depth", [(d, batches[-1]) for d in depths]), ("batch", [(depths[-1], b) for b in batches])):
        for depth, batch in sizes:
            contenders = build(depth, width, batch)
            mg.manual_seed(0)
            model = mg.nn.Sequential(*[m for _ in range(depth) for m in (mg.nn.Linear(width, width), mg.nn.Tanh())])
            x = mg.randn(batch, width)
            for mode, step in (("plain", contenders["minigrad"]), ("sqrt", contenders["sqrt-ckpt"])):
                seconds = min(timeit(step, 1) for _ in range(rounds))
                with mg.profile() as prof:
                    out = model(x) if mode == "plain" else mg.checkpoint_sequential(model, "sqrt", x)
                    out.sum().backward()
                rows.append(dict(vary=label, depth=depth, batch=batch, mode=mode, seconds=seconds,
                                 peak_activation_bytes=prof.peak_bytes("activations")))
    print(f"\n(f) how cost grows, {width}-wide tanh MLPs")
    print(f"  {'vary':6}{'depth':>7}{'batch':>7}{'mode':>7}{'time':>11}{'peak activations':>19}")
    for r in rows:
        print(f"  {r['vary']:6}{r['depth']:>7}{r['batch']:>7}{r['mode']:>7}{r['seconds'] * 1e3:>8.1f} ms"
              f"{r['peak_activation_bytes'] / 2 ** 20:>15.2f} MiB")
    report["(f) scaling"] = rows


def plot_scaling(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator
    fig, axes = plt.subplots(2, 2, figsize=(9, 7))
    for col, vary in enumerate(("depth", "batch")):
        for mode in ("plain", "sqrt"):
            rs = [r for r in rows if r["vary"] == vary and r["mode"] == mode]
            xs = [r[vary] for r in rs]
            axes[0][col].loglog(xs, [r["seconds"] * 1e3 for r in rs], "o-", label=mode)
            axes[1][col].loglog(xs, [r["peak_activation_bytes"] / 2 ** 20 for r in rs], "o-", label=mode)
        axes[0][col].set_ylabel("step time (ms)")
        axes[1][col].set_ylabel("peak activation memory (MiB)")
        for ax in (axes[0][col], axes[1][col]):
            ax.set_xlabel(f"{vary} ({'Linear+Tanh pairs' if vary == 'depth' else 'rows'})")
            ax.minorticks_off()
            ax.set_xticks(xs, [str(v) for v in xs])
            ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))  # 1, 2, 5, 10, 20, ...: readable on log axes
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.grid(True, which="major", alpha=0.3)
            ax.legend()
    fig.suptitle("How a tanh MLP step grows, plain and with sqrt(n) checkpointing (log-log)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    timed = {k: v for k, v in report.items() if isinstance(v, dict)}
    fig, axes = plt.subplots(1, len(timed), figsize=(4.2 * len(timed), 3.8), squeeze=False)
    for ax, (name, rows) in zip(axes[0], timed.items()):
        names = list(rows)
        bars = ax.bar(names, [rows[k]["it_over_minigrad"] for k in names],
                      color=["tab:orange" if k == "minigrad" else "tab:blue" for k in names])
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
        ax.axhline(1, color="k", lw=0.8)
        ax.set_ylim(0, 1.15 * max(rows[k]["it_over_minigrad"] for k in names))
        ax.set_ylabel("time / minigrad's time (median ratio)")
        ax.set_title(name.split(",")[0][:40], fontsize=9)
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    fig.suptitle("Each contender's step time relative to minigrad's (above 1: slower than minigrad)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
