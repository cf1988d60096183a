"""Speed of minigrad against hand-written NumPy, PyTorch eager and JAX jit (each where installed).

    python bench/bench.py            # full run
    python bench/bench.py --quick    # a smoke run (CI)
    python bench/bench.py --only c   # just the GPT step
    python bench/bench.py --only c --breakdown   # and where its time goes: mg.profile's table of one step
                                                 # (and torch.profiler's of PyTorch's step, beside it)
    python bench/bench.py --only c --gelu tanh   # the GPT with GPT-2's tanh GELU, in every engine
    python bench/bench.py --in-one-process   # also the old figure: every engine interleaved in this process
    python bench/bench.py --device cuda   # minigrad on CuPy, against the same math in CuPy and PyTorch CUDA
    make bench                       # installs PyTorch's CPU build and JAX if missing, writes out/bench.json and plots

(a) a 32-layer, 512-wide tanh MLP, forward + backward at batch 256, float32: big matmuls,
    where the engine should add almost nothing over the NumPy calls it makes;
(b) a 16x16 tanh MLP at batch 1: tiny tensors, where per-op Python overhead is everything.
'profiled' is minigrad inside `with mg.profile():` (one profile per step): the ledger's cost;
'sqrt-ckpt' is minigrad with checkpoint_sequential(model, 'sqrt', x): checkpointing's time cost;
in (a), 'sqrt-dots', 'sqrt-core' and 'sqrt-all' are the same under policy=dots_saveable,
save_anything_except_core_attention (in an MLP, which has no attention, it keeps every op) and
everything_saveable (mg.checkpoint_policies): what keeping rather than recomputing buys in time.
(c) a training step (forward, backward, AdamW) of the small GPT in minigrad/gpt.py against the
    same model, with the same weights, written in PyTorch and in JAX.
(f) how cost grows: step time and peak activation memory against depth and against batch,
    plain and with sqrt(n) checkpointing (log-log in the plot).
Prints a table; --json and --plot write the results.

Each engine is timed alone, in its own fresh Python process (this script, run with --worker):
minigrad, the NumPy by hand, PyTorch and JAX. Engines in one process share glibc's malloc, whose
mmap and trim thresholds adapt to what the process has allocated and freed so far: minigrad alone
took thousands of page faults per GPT step and none after PyTorch had run in the same process
(issue [speed]); they also share the cores between their thread pools (NumPy's OpenBLAS and
PyTorch's OpenMP). So a figure from one process depends on the neighbours and on their order.
Each worker warms up, times rounds of several steps and reports its median (and best) and its
minor page faults per step (getrusage). The engines' processes alternate, round after round, so
that a slow moment of this 2-core machine hits each of them; ratios between engines are medians of
per-round ratios of the processes' medians. minigrad's own variants (profiled, sqrt-ckpt, the
policies, forward) are the same engine and run interleaved in minigrad's process, their ratios per
round within it. --in-one-process adds the old figure, every engine interleaved in this one
process, as a labelled secondary table. bench/NOTES.md (2026-11-30) has how far the two differ.
--breakdown prints, for (c), mg.profile's table of one minigrad step (the median of several, each
profiled alone, in this process before any other engine's): self time by op and phase (NOTE [self
time] in minigrad/profiler/clocks.py), the breakdown in bench/NOTES.md; and, where PyTorch is installed,
torch.profiler's table of PyTorch's step (in a process of its own), to set the two side by side.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from importlib import util

import numpy as np

import minigrad as mg
from minigrad import backend
from minigrad.checkpoint import measure_chain
from minigrad.schedules import sqrt_n

DEVICE = "cpu"  # set by --device; every tensor below is made on it (the default device)

# NOTE [one engine per process]
# Each engine is timed in a fresh process of its own, because engines that share a process share its
# allocator: glibc's malloc raises its mmap threshold (and its trim threshold with it) each time a large
# block that was mmapped is freed, so after PyTorch has run, minigrad's temporaries of a few hundred KiB
# to a few MiB come from the heap instead of fresh mmaps, and minigrad's step loses its page faults.
# Which engine ran first then decides part of what the others measure. Every worker builds its weights
# with minigrad's initialisation (the same weights everywhere, and the same allocator history before the
# timing starts) and is then timed on its own steps only. The faults per step printed beside each time
# show what the allocator did.
ENGINES = ("minigrad", "no-pool", "kept-mem", "by-hand", "torch", "jax")
# 'no-pool' is minigrad's plain step with its host pool off (MINIGRAD_HOST_POOL=0, NOTE [host memory pool]):
# what the pool buys. 'kept-mem' is minigrad's plain step in a process that asked malloc to keep freed memory
# too (backend.keep_freed_host_memory, opt-in: NOTE [host memory between steps]): what the page faults that
# remain cost.
NO_POOL, KEPT = "no-pool", "kept-mem"
OURS = ("minigrad", NO_POOL, KEPT)  # minigrad, in the three processes that time its plain step


def by_hand_name():
    return "numpy" if DEVICE == "cpu" else "cupy"


def sync():
    """GPU work is asynchronous: wait for it before reading the clock (JAX's steps wait themselves)."""
    if DEVICE == "cuda":
        import cupy
        cupy.cuda.get_current_stream().synchronize()
        if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
            sys.modules["torch"].cuda.synchronize()


# --- the contenders: one step of each engine -------------------------------------------------------------

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


def torch_device():
    """Where the PyTorch contenders run: the same kind of device as minigrad, or None (no torch columns)."""
    try:
        import torch
    except ImportError:
        return None
    if DEVICE == "cpu":
        return "cpu"
    return "cuda" if torch.cuda.is_available() else None


def jax_device():
    """Where the JAX contenders run: a device of the same kind as minigrad's, or None (no jax columns)."""
    try:
        import jax
    except ImportError:
        return None
    kind = "cpu" if DEVICE == "cpu" else "gpu"
    try:
        return jax.devices(kind)[0]
    except RuntimeError:  # no backend of that kind
        return None


def to_torch(array, device):
    import torch
    return torch.from_numpy(backend.to_numpy(array)).to(device)


def to_jax(array, device):
    import jax
    return jax.device_put(backend.to_numpy(array), device)


def mlp_contenders(engine, depth, width, batch, policies=False):
    """(a)'s and (b)'s steps for one engine: {name: step}, or None where the engine is missing here."""
    model, x = mlp(depth, width, batch)
    params = [(m.weight.data, m.bias.data) for m in list(model)[::2]]
    if engine == "minigrad":
        steps = {"minigrad": lambda: minigrad_step(model, x), "profiled": lambda: profiled_step(model, x),
                 "sqrt-ckpt": lambda: sqrt_checkpointed_step(model, x), "forward": lambda: forward_only(model, x)}
        if policies:
            for k, name in POLICIES.items():
                policy = getattr(mg.checkpoint_policies, name)
                steps[k] = lambda policy=policy: sqrt_checkpointed_step(model, x, policy)
        return steps
    if engine == "by-hand":
        return {by_hand_name(): lambda: numpy_step(params, x.data)}
    if engine == "torch":
        device = torch_device()
        if device is None:
            return None
        import torch
        tl = []
        for w, b in params:
            lin = torch.nn.Linear(width, width)
            with torch.no_grad():
                lin.weight.copy_(to_torch(w, "cpu")), lin.bias.copy_(to_torch(b, "cpu"))
            tl += [lin, torch.nn.Tanh()]
        tmodel, tx = torch.nn.Sequential(*tl).to(device), to_torch(x.data, device)
        return {"torch": lambda: torch_step(tmodel, tx)}
    device = jax_device()
    if device is None:
        return None
    import jax
    import jax.numpy as jnp

    def loss(ps, xs):
        h = xs
        for w, b in ps:
            h = jnp.tanh(h @ w.T + b)
        return h.sum()
    grad = jax.jit(jax.grad(loss))  # forward and backward, compiled once (in the warm-up)
    jparams, jx = [(to_jax(w, device), to_jax(b, device)) for w, b in params], to_jax(x.data, device)
    return {"jax": lambda: jax.block_until_ready(grad(jparams, jx))}


GPT_CFG = dict(vocab_size=64, block_size=64, n_layer=4, n_head=4, n_embd=128)
GELU = "none"  # (c)'s activation in every engine: --gelu


def gpt_contenders(engine, batch, cfg=GPT_CFG):
    """(c): one engine's GPT training step, with minigrad's weights and batch, and its loss before any step.

    Returns ({name: step}, loss), or (None, None) where the engine is missing here; the caller checks
    that every engine starts from the same loss (the same model)."""
    from minigrad.gpt import GPT, GPTConfig
    mg.manual_seed(0)
    model = GPT(GPTConfig(**cfg))
    V = cfg["vocab_size"]
    x, y = mg.randint(0, V, (batch, cfg["block_size"])), mg.randint(0, V, (batch, cfg["block_size"]))
    if engine == "minigrad":
        opt = mg.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            _, loss = model(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with mg.no_grad():
            return {"minigrad": step}, model(x, y)[1].item()
    if engine == "torch":
        device = torch_device()
        if device is None:
            return None, None
        import torch
        tmodel = torch_gpt(cfg, model.state_dict()).to(device)
        topt = torch.optim.AdamW(tmodel.parameters(), lr=1e-4)
        tx, ty = to_torch(x.data, device), to_torch(y.data, device)

        def torch_loss():
            return torch.nn.functional.cross_entropy(tmodel(tx).reshape(-1, V), ty.reshape(-1))

        def torch_step_gpt():
            loss = torch_loss()
            topt.zero_grad(set_to_none=True)
            loss.backward()
            topt.step()
        with torch.no_grad():
            return {"torch": torch_step_gpt}, torch_loss().item()
    device = jax_device()
    if device is None:
        return None, None
    return jax_gpt(cfg, model.state_dict(), x.data, y.data, device)


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


TORCH_PROFILE = "torch-profile"  # a worker that profiles PyTorch's (c) step instead of timing it (--breakdown)


def torch_breakdown(cfg, batch, steps=10):
    """PyTorch's own breakdown of its (c) step, in its own process: torch.profiler's self CPU time per aten op, per
    step, over `steps` steps after a warm-up. {op: seconds per step}, or None without PyTorch."""
    contenders, _ = gpt_contenders("torch", batch, cfg)
    if contenders is None:
        return None
    from torch.profiler import ProfilerActivity, profile
    step = contenders["torch"]
    for _ in range(3):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    return {e.key: e.self_cpu_time_total / 1e6 / steps for e in prof.key_averages() if e.self_cpu_time_total > 0}


def print_torch_breakdown(times, rows=12):
    total = sum(times.values())
    print(f"\n(c) PyTorch's own breakdown of its step (torch.profiler, its own process, self CPU time per step; "
          f"{total * 1e3:.2f} ms in all ops, the profiler's cost included):\n")
    print(f"{'op':<36}{'self time':>12}{'share':>8}")
    print("-" * 56)
    for name, t in sorted(times.items(), key=lambda kv: -kv[1])[:rows]:
        print(f"{name[:35]:<36}{t * 1e3:>9.2f} ms{t / total:>8.1%}")
    print("(its linear layers are mm and addmm, the attention's matmuls bmm; AdamW is the Optimizer.step row and its "
          "per-parameter ops: mul_, lerp_, sqrt, addcdiv_, ...)")


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
            self.c_fc, self.c_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
            self.gelu = nn.GELU(approximate=cfg.get("gelu_approximate", "none"))

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


def jax_gpt(cfg, state, idx, targets, device):
    """minigrad's GPT training step as one jax.jit: the loss, jax.grad of it and AdamW (PyTorch's defaults,
    lr 1e-4, as the other engines use) compiled together, the parameters updated in donated buffers.

    Returns ({"jax": step}, the loss before any step)."""
    import jax
    import jax.numpy as jnp
    C, nh, n_layer = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    hs = C // nh

    def layer_norm(x, p, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    def linear(x, p, name):
        return x @ p[name + ".weight"].T + p[name + ".bias"]

    def attention(x, p, name):
        B, T, _ = x.shape
        q, k, v = (t.reshape(B, T, nh, hs).transpose(0, 2, 1, 3) for t in jnp.split(linear(x, p, name + ".c_attn"), 3, -1))
        att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / hs ** 0.5)                  # (B, nh, T, T)
        att = jax.nn.softmax(jnp.where(jnp.triu(jnp.ones((T, T), bool), 1), -jnp.inf, att), axis=-1)
        return linear((att @ v).transpose(0, 2, 1, 3).reshape(B, T, C), p, name + ".c_proj")

    def loss_fn(p, idx, targets):
        x = p["wte.weight"][idx] + p["wpe.weight"][:idx.shape[1]]
        for i in range(n_layer):
            h = f"h.{i}."
            x = x + attention(layer_norm(x, p, h + "ln_1"), p, h + "attn")
            m = jax.nn.gelu(linear(layer_norm(x, p, h + "ln_2"), p, h + "mlp.c_fc"), approximate=cfg.get("gelu_approximate") == "tanh")
            x = x + linear(m, p, h + "mlp.c_proj")
        logits = layer_norm(x, p, "ln_f") @ p["lm_head.weight"].T                 # (B, T, V)
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(logp, targets[..., None], axis=-1).mean()

    def step(p, m, v, t, idx, targets, lr=1e-4, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-2):
        g = jax.grad(loss_fn)(p, idx, targets)
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        p = jax.tree_util.tree_map(lambda p, m, v: p * (1 - lr * weight_decay)
                                   - lr * (m / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + eps), p, m, v)
        return p, m, v

    compiled = jax.jit(step, donate_argnums=(0, 1, 2))
    p = {k: to_jax(a, device) for k, a in state.items()}
    s = dict(p=p, m={k: jnp.zeros_like(a) for k, a in p.items()}, v={k: jnp.zeros_like(a) for k, a in p.items()}, t=0)
    jidx, jtargets = to_jax(idx, device), to_jax(targets, device)

    def jax_step():
        s["t"] += 1
        s["p"], s["m"], s["v"] = compiled(s["p"], s["m"], s["v"], jnp.float32(s["t"]), jidx, jtargets)
        jax.block_until_ready(s["p"])
    return {"jax": jax_step}, float(jax.jit(loss_fn)(p, jidx, jtargets))


# --- timing -----------------------------------------------------------------------------------------------

def timeit(fn, inner):
    """Seconds per step and minor page faults per step over inner steps."""
    sync()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    sync()
    seconds = (time.perf_counter() - t0) / inner
    return seconds, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / inner


def interleave(contenders, rounds, inner):
    """Warm up, then rounds of inner steps of each contender in turn: {name: ([seconds], faults per step)}."""
    for fn in contenders.values():  # warm up (JAX compiles here)
        fn()
    times, faults = {k: [] for k in contenders}, {k: [] for k in contenders}
    for _ in range(rounds):  # interleaved, so that a slow moment of the machine hits every contender
        for k, fn in contenders.items():
            seconds, per_step = timeit(fn, inner)
            times[k].append(seconds)
            faults[k].append(per_step)
    return {k: (times[k], statistics.median(faults[k])) for k in contenders}


def sizes(part, quick):
    """Each part's sizes, and its rounds: (config, process rounds, rounds per process, steps per round)."""
    if part == "a":
        return ((4, 64, 16), 1, 3, 2) if quick else ((32, 512, 256), 5, 3, 3)
    if part == "b":
        return ((2, 16, 1), 1, 3, 20) if quick else ((2, 16, 1), 5, 3, 2000)
    cfg, batch = (dict(GPT_CFG, n_layer=1, block_size=16, n_embd=32), 2) if quick else (GPT_CFG, 8)
    if GELU != "none":
        cfg = dict(cfg, gelu_approximate=GELU)
    return ((cfg, batch), 1, 3, 1) if quick else ((cfg, batch), 7, 3, 2)


def contenders_of(part, engine, quick):
    """{name: step} of one engine for one part, and (c)'s loss before any step; ({} or None, None) if none."""
    config = sizes(part, quick)[0]
    if engine == KEPT:  # minigrad's plain step alone, malloc asked to keep what is freed before anything is made
        if not backend.keep_freed_host_memory():
            return None, None
        contenders, loss = contenders_of(part, "minigrad", quick)
        return {KEPT: contenders["minigrad"]}, loss
    if engine == NO_POOL:  # minigrad's plain step alone; spawn() started this process with MINIGRAD_HOST_POOL=0
        contenders, loss = contenders_of(part, "minigrad", quick)
        return {NO_POOL: contenders["minigrad"]}, loss
    if part == "c":
        return gpt_contenders(engine, config[1], config[0])
    return mlp_contenders(engine, *config, policies=part == "a"), None


def engine_note(engine):
    """Which version of the engine runs, and on how many threads (printed by the worker's parent)."""
    if engine == "torch":
        import torch
        return f"PyTorch {torch.__version__} on {torch_device()}, {torch.get_num_threads()} threads"
    if engine == "jax":
        import jax
        return f"JAX {jax.__version__} jit on {jax_device()}"
    if engine == "by-hand":
        return f"NumPy {np.__version__}" + (" (CuPy's arrays)" if DEVICE == "cuda" else "")
    if engine == KEPT:
        return f"{KEPT}: minigrad with malloc keeping freed host memory (backend.keep_freed_host_memory)"
    if engine == NO_POOL:
        return f"{NO_POOL}: minigrad with its host pool off (MINIGRAD_HOST_POOL=0)"
    return f"minigrad on {DEVICE}"


def worker(part, engine, quick):
    """One engine alone in this process: its steps for one part, timed; the result as one JSON line on stdout."""
    if engine == TORCH_PROFILE:
        cfg, batch = sizes("c", quick)[0]
        times = torch_breakdown(cfg, batch, steps=2 if quick else 10)
        print(json.dumps(dict(missing=True) if times is None else dict(times=times)))
        return
    contenders, loss = contenders_of(part, engine, quick)
    if not contenders:
        print(json.dumps(dict(missing=True)))
        return
    _, _, rounds, inner = sizes(part, quick)
    result = interleave(contenders, rounds, inner)
    print(json.dumps(dict(note=engine_note(engine), loss=loss,
                          contenders={k: dict(times_s=t, faults_per_step=f) for k, (t, f) in result.items()})))


def spawn(part, engine, quick):
    """Run worker(part, engine) in a fresh process of this interpreter; its JSON result."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", part, engine, "--device", DEVICE, "--gelu", GELU]
    # no-pool: the pool off for the whole process, from import on, rather than a `with` around each timed step
    env = dict(os.environ, MINIGRAD_HOST_POOL="0") if engine == NO_POOL else None
    r = subprocess.run(command + ["--quick"] * quick, capture_output=True, text=True, env=env)
    if r.returncode:
        raise SystemExit(f"bench: the {engine} worker for part ({part}) failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def engines_for(part):
    """The engines that can run this part here: each is looked for, not imported (its worker imports it)."""
    wanted = [e for e in ENGINES if part != "c" or e != "by-hand"]  # nobody wrote the GPT's backward by hand
    return [e for e in wanted if e in OURS + ("by-hand",) or util.find_spec(e) is not None]


def missing_note():
    notes = [f"{name} is not installed: no {name} columns ({how})"
             for name, how in (("torch", "`make torch` installs its CPU build"), ("jax", "`make jax` installs it"))
             if util.find_spec(name) is None]
    return "; ".join(notes)


def compare(name, part, quick, report):
    """Time each engine alone, processes alternating round by round; print and store the table. Returns the
    minigrad process's times per contender, every round's, for the estimates that pair them.

    'best' is the fastest round of all: other work on the machine only ever slows a step down, so when it
    comes in bursts longer than a process (as it does on a shared 2-core machine), the best times say more
    than medians whose rounds it hit unevenly."""
    _, process_rounds, _, _ = sizes(part, quick)
    engines, runs, notes, losses = engines_for(part), {}, {}, {}
    for r in range(process_rounds):
        order = engines[r % len(engines):] + engines[:r % len(engines)]  # no engine always follows the same one
        for engine in order:
            if engine in notes and notes[engine] is None:
                continue
            result = spawn(part, engine, quick)
            if result.get("missing"):
                notes[engine] = None
                continue
            notes[engine], losses[engine] = result["note"], result["loss"]
            for k, row in result["contenders"].items():
                runs.setdefault(k, dict(engine=engine, rounds=[]))["rounds"].append(row)
    if part == "c":
        for engine, loss in losses.items():  # the same model in every engine: the same loss before any step
            assert abs(loss - losses["minigrad"]) < 1e-4, \
                f"the {engine} GPT differs from minigrad's: loss {loss} vs {losses['minigrad']}"
    mine = runs["minigrad"]["rounds"]
    rows = {}
    for k, run in runs.items():
        theirs = run["rounds"]
        if run["engine"] == "minigrad":  # the same process: per-round ratios of its own rounds
            pairs = [(a, b) for m, t in zip(mine, theirs) for a, b in zip(m["times_s"], t["times_s"])]
        else:  # across processes: ratios of the processes' medians, per process round
            pairs = [(statistics.median(m["times_s"]), statistics.median(t["times_s"])) for m, t in zip(mine, theirs)]
        every = [t for row in theirs for t in row["times_s"]]
        rows[k] = dict(median_s=statistics.median(every), best_s=min(every),
                       minigrad_over_it=statistics.median(a / b for a, b in pairs),
                       it_over_minigrad=statistics.median(b / a for a, b in pairs),
                       faults_per_step=statistics.median(row["faults_per_step"] for row in theirs),
                       process="minigrad's" if run["engine"] == "minigrad" else "its own")
    report[name] = rows
    print(f"\n{name}")
    print("  " + "; ".join(n for n in notes.values() if n))
    print(f"  {'':10}{'median':>12}{'best':>12}{'minigrad / it':>16}{'it / minigrad':>16}{'faults / step':>15}   process")
    for k, row in rows.items():
        print(f"  {k:10}{row['median_s'] * 1e3:>9.3f} ms{row['best_s'] * 1e3:>9.3f} ms{row['minigrad_over_it']:>16.3f}"
              f"{row['it_over_minigrad']:>16.3f}{row['faults_per_step']:>15.1f}   {row['process']}")
    return {k: [t for row in run["rounds"] for t in row["times_s"]] for k, run in runs.items()
            if run["engine"] == "minigrad"}


def compare_in_one_process(name, part, quick, report):
    """The old figure, for comparison only: every engine's contenders interleaved in this one process, so
    that they share its allocator (NOTE [one engine per process]). Adds a column to the table of compare()."""
    _, _, rounds, inner = sizes(part, quick)
    contenders = {}
    for engine in engines_for(part):
        if engine not in (KEPT, NO_POOL):  # their settings are the whole process's: each runs only alone
            contenders.update(contenders_of(part, engine, quick)[0] or {})
    result = interleave(contenders, rounds, inner)
    mine = result["minigrad"][0]
    print("  in one process, for comparison (every engine interleaved here, sharing one allocator and the cores' threads):")
    print(f"  {'':10}{'median':>12}{'best':>12}{'minigrad / it':>16}{'faults / step':>15}")
    for k, (times, faults) in result.items():
        ratio = statistics.median(a / b for a, b in zip(mine, times))
        report[name][k]["in_one_process"] = dict(median_s=statistics.median(times), best_s=min(times),
                                                 minigrad_over_it=ratio, faults_per_step=faults)
        print(f"  {k:10}{statistics.median(times) * 1e3:>9.3f} ms{min(times) * 1e3:>9.3f} ms{ratio:>16.3f}{faults:>15.1f}")


def recompute_estimate(rows, times, depth, width, batch):
    """What sqrt(n) checkpointing must cost on this machine, from the forward's measured share of a step.

    checkpoint_sequential recomputes every segment but the last, less each one's last Linear and Tanh (NOTE
    [recompute what backward reads] in minigrad/checkpoint/policies.py): schedules.sqrt_n predicts that fraction of
    the forward's FLOPs from the measured chain. So sqrt-ckpt / minigrad >= 1 + fraction * forward / step,
    give or take the checkpoint's bookkeeping and the clock's noise."""
    model, x = mlp(depth, width, batch)
    chain = measure_chain(list(model), x)
    fraction = sqrt_n(chain).recompute_flops / sum(chain.flops)
    estimate = statistics.median(1 + fraction * f / m for f, m in zip(times["forward"], times["minigrad"]))
    rows["sqrt-ckpt"]["recompute_estimate"] = estimate
    print(f"  sqrt-ckpt recomputes {fraction:.1%} of the forward's FLOPs (schedules.sqrt_n): 1 + {fraction:.3f} x "
          f"forward / step = {estimate:.3f} here")


def set_threads(n):
    """Every engine's thread pools, through the settings each library reads when it starts: NumPy's OpenBLAS,
    PyTorch's OpenMP (and MKL) pool, JAX's XLA CPU client. Workers are fresh processes, so they inherit them."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(n)
    xla = f"--xla_cpu_multi_thread_eigen={'false' if n == 1 else 'true'} intra_op_parallelism_threads={n}"
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + xla).strip()


def load():
    """The 1, 5 and 15 minute load averages: on a 2-core machine, above 1 means another job competes for the cores."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, few rounds, one process per engine: checks that it runs")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    ap.add_argument("--plot", metavar="PATH", help="also plot each contender's time relative to minigrad (PNG)")
    ap.add_argument("--only", metavar="PARTS", default="abcf",
                    help="which parts to run, for example --only c or --only ab (default: abcf, all of them)")
    ap.add_argument("--breakdown", action="store_true",
                    help="with part (c): also print mg.profile's table (time by op and phase) of one minigrad step, "
                         "and torch.profiler's of PyTorch's step where PyTorch is installed")
    ap.add_argument("--in-one-process", action="store_true",
                    help="also time every engine interleaved in this one process, the old figure (a secondary table)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default=mg.default_device().split(":")[0],
                    help="where minigrad, the by-hand version, PyTorch and JAX run (default: $MINIGRAD_DEVICE, else cpu)")
    ap.add_argument("--threads", type=int, metavar="N",
                    help="give every engine N threads (OpenBLAS, PyTorch's OpenMP pool, JAX's Eigen pool), to compare "
                         "engines on equal cores; default: each library's own choice. Each engine's own process only: "
                         "--in-one-process's table keeps this process's threads")
    ap.add_argument("--gelu", choices=["none", "tanh"], default="none",
                    help="(c)'s GELU in every engine: 'none', exact (erf), nanoGPT's nn.GELU() (default); 'tanh', GPT-2's "
                         "approximation. NumPy has no vectorised erf: the exact one is where minigrad's step loses most")
    ap.add_argument("--worker", nargs=2, metavar=("PART", "ENGINE"),
                    help="internal: time one engine (" + ", ".join(ENGINES) + ") for one part alone, print JSON")
    args = ap.parse_args()
    if set(args.only) - set("abcf"):
        ap.error(f"--only takes letters from 'abcf' (parts (a), (b), (c) and (f)), got {args.only!r}")
    global DEVICE, GELU
    DEVICE, GELU = args.device, args.gelu
    os.environ["MINIGRAD_DEVICE"] = DEVICE  # the default device: every tensor below is made there
    try:
        mg.tensor([0.0])
    except backend.DeviceError as e:
        ap.error(str(e))
    if args.threads is not None:
        if args.threads < 1:
            ap.error(f"--threads takes a number of threads >= 1, got {args.threads}")
        set_threads(args.threads)  # before any worker starts: each inherits the settings
    if args.worker:
        return worker(*args.worker, args.quick)
    threads = f"; {args.threads} thread(s) per engine (--threads)" if args.threads else ""
    print(f"device: {DEVICE}; each engine timed alone in its own process{threads}" + (f"; {missing_note()}" * bool(missing_note())))
    print(f"load average at the start: {load()} (this machine's other work slows every contender; compare ratios)")
    report, q = {}, args.quick  # --quick: tiny sizes and few rounds, the same parts
    tag = " (quick)" if q else ""
    names = {"a": "(a) {}-layer {}-wide tanh MLP, batch {}, float32, forward+backward",
             "b": "(b) 16x16 tanh MLP (2 layers), batch 1: per-op overhead",
             "c": "(c) GPT training step (AdamW), {layers}, {n_embd} wide, {n_head} heads, batch {batch} x {block_size} "
                  "tokens, vocabulary {vocab_size}, GELU " + ("exact (erf)" if args.gelu == "none" else "tanh (GPT-2's)")}
    for part in "abc":
        if part not in args.only:
            continue
        config = sizes(part, q)[0]
        if part == "c":
            cfg, batch = config
            name = names["c"].format(layers=f"{cfg['n_layer']} layer" + "s" * (cfg["n_layer"] > 1), batch=batch, **cfg)
        else:
            name = names[part].format(*config)
        if part == "c" and args.breakdown:  # minigrad alone in this process: no other engine has run here
            breakdown(gpt_contenders("minigrad", batch, cfg)[0]["minigrad"], steps=3 if q else 7)
            if DEVICE == "cpu" and util.find_spec("torch") is not None:
                result = spawn("c", TORCH_PROFILE, q)  # PyTorch alone in its own process, as every engine is timed
                if "times" in result:
                    print_torch_breakdown(result["times"])
        times = compare(name + tag, part, q, report)
        if args.in_one_process:
            compare_in_one_process(name + tag, part, q, report)
        if part == "a":
            recompute_estimate(report[name + tag], times, *config)
            for k, policy in POLICIES.items():
                report[name + tag][k]["policy"] = policy
            print("  " + "; ".join(f"{k}: policy={v}" for k, v in POLICIES.items()) + " (sqrt-ckpt: nothing_saveable)")
    if "f" in args.only:
        if q:
            scaling(report, depths=[2, 4], batches=[4, 8], width=16, rounds=1)
        else:
            scaling(report, depths=[4, 8, 16, 32, 64], batches=[16, 32, 64, 128, 256], width=256)
    print(f"\nload average at the end: {load()}")
    print("goals, each engine alone: (issue [speed]) (a) minigrad / torch <= 1.0, (b) minigrad / torch <= 0.7, (c) "
          "minigrad / torch <= 1.0; (issue [bench]) (a) minigrad / numpy <= 1.05, profiled / minigrad <= 1.10; (issue "
          "[selective]) sqrt-ckpt / minigrad <= 1.20 (see bench/NOTES.md for which are met, on which machine)")
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
            contenders = mlp_contenders("minigrad", depth, width, batch)
            mg.manual_seed(0)
            model = mg.nn.Sequential(*[m for _ in range(depth) for m in (mg.nn.Linear(width, width), mg.nn.Tanh())])
            x = mg.randn(batch, width)
            for mode, step in (("plain", contenders["minigrad"]), ("sqrt", contenders["sqrt-ckpt"])):
                seconds = min(timeit(step, 1)[0] for _ in range(rounds))
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
