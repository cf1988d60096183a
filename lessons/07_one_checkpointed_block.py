"""Lesson 7: one checkpointed block, up close. What the recompute must get right, measured.

    python lessons/07_one_checkpointed_block.py            # about 2.9 s (make tour, 1 BLAS thread, 2 busy cores, 2026-12-01)
    python lessons/07_one_checkpointed_block.py --no-plot  # the numbers only

mg.checkpoint(block, x) runs `block` twice: once in the forward, keeping only x, and once more
in backward, keeping what its ops save this time. Its gradients are the plain run's, bit for
bit, only if the second run computes what the first one did. Four things decide that, each
measured here on a small block, each against the same block run plainly:

  1. randomness: dropout draws its mask from minigrad's generator. Without replaying the
     generator (preserve_rng_state=False) the recompute draws another mask, and backward
     differentiates a forward that never happened. We count the gradient entries that differ.
  2. state: BatchNorm1d updates its running statistics in every training forward. A recompute
     that does it again counts the batch twice. minigrad's BatchNorm skips the update while
     recomputing (nn.py, `is_recomputing()`); we take that guard out to see what it prevents.
  3. a frozen input: the block's input needs no gradient (it comes from a frozen embedding),
     its parameters do. The one checkpoint record still reaches them.
  4. nesting: a checkpoint inside a checkpoint. mg.profile measures the activation bytes and
     the recompute FLOPs, and its timeline shows the memory of the whole step (the plot).

This lesson recomputes whole blocks, as the checkpoint you build in exercise 7 does: it runs under
set_checkpoint_early_stop(False) (PyTorch's name). By default minigrad's recompute also skips the ops whose
results backward does not read, such as a block's last Linear and Tanh (lesson 11, NOTE [recompute what
backward reads] in minigrad/checkpoint/policies.py); the lesson prints what that default saves at the end.

Plot: out/07_checkpointed_block.png (activation memory over one step, event by event: plain,
one checkpoint, nested).
"""
# %%
import sys
import time
import warnings

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import minigrad as mg
from minigrad import nn
from minigrad.checkpoint import set_checkpoint_early_stop
from minigrad.profiler import CATEGORY_COLORS, PHASE_COLORS, format_bytes, format_flops
from minigrad.tensor import is_recomputing

from _lesson import command_line, finish, predict, reveal, save_plot

# %% settings
SEED = 0
BATCH, WIDTH = 16, 32          # parts 1-3: a small block
P_DROP = 0.5                   # part 1
BN_SHIFT = 3.0                 # part 2: the batch's features have mean about 3, so the running mean moves
NEST_PAIRS, NEST_WIDTH, NEST_BATCH = 8, 128, 64   # part 4: 8 Linear -> Tanh pairs, cut in halves
PLOTS = {"07_checkpointed_block.png": "activation memory over one step, event by event: plain, one "
                                      "checkpoint, nested checkpoints"}
EXERCISES = (7, 8)


def sq_loss(y):
    return (y * y).mean()


def grads(tensors):
    return [t.grad.numpy().copy() for t in tensors]


def zero(tensors):
    for t in tensors:
        t.grad = None


def same(a, b):
    return all(np.array_equal(u, v) for u, v in zip(a, b))


def pairs(n, width):
    layers = []
    for _ in range(n):
        layers += [nn.Linear(width, width), nn.Tanh()]
    return nn.Sequential(*layers)


# %% [markdown]
# ## 1. Randomness: the recompute must draw the forward's dropout mask

# %%
def part1_rng():
    print("1. Dropout inside the checkpoint: replay the generator, or not\n")
    mg.manual_seed(SEED)
    lin1, drop, lin2 = nn.Linear(WIDTH, 2 * WIDTH), nn.Dropout(P_DROP), nn.Linear(2 * WIDTH, WIDTH)
    x = mg.randn(BATCH, WIDTH, requires_grad=True)
    tensors = list(lin1.parameters()) + list(lin2.parameters()) + [x]
    masks = []  # the dropout mask of every run of the block: (recomputing?, kept entries)

    def block(t):
        h = drop(lin1(t))
        masks.append((is_recomputing(), h.detach().numpy() != 0))  # a zero here is a dropped entry
        return lin2(h.tanh())

    def step(run):
        zero(tensors)
        masks.clear()
        mg.manual_seed(SEED + 1)  # the same stream for every run
        sq_loss(run()).backward()
        assert [recomputing for recomputing, _ in masks] in ([False], [False, True])  # plain; forward, recompute
        return grads(tensors), mg.rand(4).numpy(), [m for _, m in masks]

    want, after_plain, _ = step(lambda: block(x))
    results = {}
    for preserve in (True, False):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got, after, (fwd_mask, rec_mask) = step(lambda: mg.checkpoint(block, x, preserve_rng_state=preserve))
        results[preserve] = dict(got=got, after=after, mask_diff=float((fwd_mask != rec_mask).mean()),
                                 warning=str(caught[0].message) if caught else None)

    total = sum(g.size for g in want)
    print(f"block: Linear({WIDTH}, {2 * WIDTH}) -> Dropout({P_DROP}) -> Tanh -> Linear({2 * WIDTH}, {WIDTH}), "
          f"batch {BATCH}; {total} gradient entries (weights, biases and x)\n")
    print(f"{'preserve_rng_state':<20}{'mask entries that differ':>26}{'gradient entries that differ':>31}"
          f"{'max |diff|':>12}")
    for preserve, r in results.items():
        differ = sum(int((a != b).sum()) for a, b in zip(r["got"], want))
        worst = max(float(np.abs(a - b).max()) for a, b in zip(r["got"], want))
        r["differ"] = differ
        print(f"{str(preserve):<20}{r['mask_diff']:>25.1%} {differ:>17} of {total} ({differ / total:.0%})"
              f"{worst:>12.2e}")
    print(f"\n(two independent masks with p = {P_DROP} disagree on 2 p (1 - p) = {2 * P_DROP * (1 - P_DROP):.0%} of "
          f"their entries on average; every gradient that the mask touches then differs)")
    print(f"after backward the generator is where the plain run leaves it: "
          f"{all(np.array_equal(r['after'], after_plain) for r in results.values())} for both (the outer stream is "
          f"always restored; only the recompute's own draws differ)")
    print(f"with preserve_rng_state=False minigrad warns, in the forward:\n  {results[False]['warning']}")
    try:
        mg.manual_seed(SEED + 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = mg.checkpoint(block, x, preserve_rng_state=False, determinism_check="values")
        sq_loss(y).backward()
        caught_by_values = "no error"
    except RuntimeError as e:
        caught_by_values = str(e).split(" (")[0]
    print(f"and determinism_check='values' stops the backward:\n  {caught_by_values}\n")
    return results


# %% [markdown]
# ## 2. State: BatchNorm's running statistics, updated once

# %%
class NaiveBatchNorm1d(nn.BatchNorm1d):
    """BatchNorm1d without its guard: it updates the running statistics in the recompute too, as PyTorch's
    BatchNorm does under torch.utils.checkpoint (pytorch/pytorch issue 96136). A simulation: minigrad has
    no switch for this, so this subclass does, while recomputing, the update the guard skips."""

    def forward(self, x):
        y = super().forward(x)
        if self.training and is_recomputing():
            with mg.no_grad():
                mean = x.mean(dim=0, keepdim=True)
                xc = x - mean
                self._update_running_stats(mean, (xc * xc).mean(dim=0, keepdim=True), x.shape[0])
        return y


def bn_model(norm=nn.BatchNorm1d, momentum=0.1):
    mg.manual_seed(SEED)
    return nn.Sequential(nn.Linear(8, WIDTH), norm(WIDTH, momentum=momentum), nn.Tanh(), nn.Linear(WIDTH, 8))


def part2_batchnorm():
    print("2. BatchNorm1d inside the checkpoint: the running statistics\n")
    mg.manual_seed(SEED + 2)
    x = mg.randn(BATCH, 8) + BN_SHIFT
    momentum = bn_model()[1].momentum
    fixed = 1 - (1 - momentum) ** 0.5  # two updates with this momentum move as far as one with `momentum`
    runs = {"plain": (bn_model(), False),
            "mg.checkpoint": (bn_model(), True),
            "naive recompute": (bn_model(NaiveBatchNorm1d), True),
            f"naive, momentum {fixed:.4f}": (bn_model(NaiveBatchNorm1d, fixed), True)}
    rows = {}
    for name, (model, ckpt) in runs.items():
        params = list(model.parameters())
        zero(params)
        sq_loss(mg.checkpoint(model, x) if ckpt else model(x)).backward()
        bn = model[1]
        rows[name] = dict(grads=grads(params), mean=bn.running_mean.numpy().copy(),
                          var=bn.running_var.numpy().copy(), tracked=int(bn.num_batches_tracked.item()))
    plain = rows["plain"]
    print(f"Linear(8, {WIDTH}) -> BatchNorm1d({WIDTH}, momentum={momentum}) -> Tanh -> Linear({WIDTH}, 8), one "
          f"training step on a batch of {BATCH} whose features have mean about {BN_SHIFT}\n")
    print(f"{'':<26}{'num_batches_tracked':>20}{'running_mean':>14}{'max |diff| vs plain':>22}"
          f"{'running_var diff':>18}{'gradients':>12}")
    for name, r in rows.items():
        r["mean_diff"] = float(np.abs(r["mean"] - plain["mean"]).max())
        r["var_diff"] = float(np.abs(r["var"] - plain["var"]).max())
        print(f"{name:<26}{r['tracked']:>20}{float(r['mean'].mean()):>14.4f}{r['mean_diff']:>22.2e}"
              f"{r['var_diff']:>18.2e}{'identical' if same(r['grads'], plain['grads']) else 'DIFFER':>12}")
    naive = rows["naive recompute"]
    ratio = float(naive["mean"].mean() / plain["mean"].mean())
    print(f"\n(running_mean: the mean over the {WIDTH} features.) The naive recompute moved the running mean "
          f"{ratio:.3f}x as far as the plain run: two updates, 1 - (1 - m)^2 = {1 - (1 - momentum) ** 2:.3f} of the "
          f"way, instead of m = {momentum}. The gradients are still identical (training uses the batch's own "
          f"statistics), so a test that compares only gradients misses it; the model evaluates with the wrong "
          f"statistics. The usual workaround in PyTorch, momentum 1 - sqrt(1 - m) = {fixed:.4f}, gets the statistics "
          f"back up to rounding but still counts two batches. minigrad's fix: BatchNorm asks is_recomputing() and "
          f"updates once.\n")
    return rows


# %% [markdown]
# ## 3. A frozen input: no input needs a gradient, the parameters inside do

# %%
def part3_frozen():
    print("3. A frozen input: the checkpoint's input needs no gradient, its parameters do\n")
    mg.manual_seed(SEED)
    emb = nn.Embedding(10, WIDTH)
    emb.weight.requires_grad_(False)  # frozen: fine-tuning only the block
    block = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH))
    idx = mg.randint(0, 10, (BATCH,))
    params = list(block.parameters())

    x = emb(idx)
    zero(params)
    sq_loss(block(x)).backward()
    want = grads(params)

    zero(params)
    with mg.profile() as prof:
        x = emb(idx)
        y = mg.checkpoint(block, x)
        record = y.grad_fn
        edges = ["x" if e is None else "a parameter" if isinstance(e, mg.Tensor) else e.name for e in record.next]
        sq_loss(y).backward()
    got = grads(params)
    print(f"x = frozen_embedding(idx): x.requires_grad = {x.requires_grad}; y = mg.checkpoint(block, x): "
          f"y.requires_grad = {y.requires_grad}, y.grad_fn = '{record.name}'")
    print(f"the record's inputs: {len(edges)}: x (its edge is None: no gradient flows there) and "
          f"{edges.count('a parameter')} parameters, the leaves the forward reached inside the block")
    print(f"after backward: {sum(p.grad is not None for p in params)} of {len(params)} parameters have a gradient, "
          f"{'bit-identical to' if same(got, want) else 'DIFFERENT from'} the plain run's; "
          f"the embedding's .grad is {emb.weight.grad}; Linear recomputed {prof.calls('recompute', 'linear')} times")
    print("(PyTorch's reentrant checkpoint, use_reentrant=True, saw only its inputs: here it would warn that none "
          "requires grad and give the block no gradients. minigrad follows the non-reentrant one and refuses "
          "use_reentrant=True.)\n")
    return same(got, want)


# %% [markdown]
# ## 4. Nesting: a checkpoint inside a checkpoint

# %%
def part4_nesting():
    print(f"4. Nesting: a block of {NEST_PAIRS} Linear({NEST_WIDTH}, {NEST_WIDTH}) -> Tanh pairs, batch "
          f"{NEST_BATCH}, cut into halves A and B\n")
    mg.manual_seed(SEED)
    block = pairs(NEST_PAIRS, NEST_WIDTH)
    layers = list(block)
    half_a, half_b = nn.Sequential(*layers[:NEST_PAIRS]), nn.Sequential(*layers[NEST_PAIRS:])
    x = mg.randn(NEST_BATCH, NEST_WIDTH)
    params = list(block.parameters())

    def outer(h):
        return half_b(mg.checkpoint(half_a, h))  # the inner checkpoint runs again in outer's recompute

    ways = {"plain": lambda: block(x),
            "one checkpoint": lambda: mg.checkpoint(block, x),
            "two in a row": lambda: mg.checkpoint(half_b, mg.checkpoint(half_a, x)),
            "nested": lambda: mg.checkpoint(outer, x)}
    rows = {}
    for name, way in ways.items():
        zero(params)
        with mg.profile() as prof:
            loss = way().sum()  # a sum keeps nothing for backward: what is held is the block's
            after_forward = prof.current_bytes("activations")
            loss.backward()
            del loss
        rows[name] = dict(peak=prof.peak_bytes("activations"), after_forward=after_forward,
                          recompute=prof.flops("recompute"), forward=prof.flops("forward"),
                          linear=prof.calls("recompute", "linear"), grads=grads(params),
                          timeline=prof.timeline())
    one_output = NEST_BATCH * NEST_WIDTH * 4
    plain = rows["plain"]
    print(f"one layer output: {format_bytes(one_output)}; the plain run peaks at {format_bytes(plain['peak'])}")
    guess = predict("the whole block under one checkpoint, recomputed whole in backward: the step's peak of "
                    "activations", "KiB")
    reveal(guess, rows["one checkpoint"]["peak"] / 1024, "KiB")
    print(f"{'':<16}{'held after forward':>20}{'peak activations':>18}{'recompute':>12}{'forward passes':>16}"
          f"{'Linears rerun':>15}{'gradients':>12}")
    for name, r in rows.items():
        print(f"{name:<16}{format_bytes(r['after_forward']):>20}{format_bytes(r['peak']):>18}"
              f"{format_flops(r['recompute']):>12}{r['recompute'] / r['forward']:>16.2f}{r['linear']:>15}"
              f"{'identical' if same(r['grads'], plain['grads']) else 'DIFFER':>12}")
    nested = rows["nested"]
    print(f"\nOne checkpoint keeps only x through the forward ({rows['one checkpoint']['after_forward'] // one_output} "
          f"layer output, against {plain['after_forward'] // one_output}), but its recompute rebuilds the whole block, "
          f"so the step peaks as high as the plain run. "
          f"Nested, the outer recompute runs A under its own checkpoint and keeps only B's insides; then A's "
          f"recompute keeps A's: the peak falls to {nested['peak'] / plain['peak']:.0%} of the plain run's, for "
          f"{nested['recompute'] / nested['forward']:.2f} forward passes of recompute (A runs three times, B twice). "
          f"Two checkpoints in a row reach the same peak with one pass, but hold "
          f"{rows['two in a row']['after_forward'] // one_output} layer outputs after the forward instead of "
          f"{nested['after_forward'] // one_output}: in a deep model, where each block's inputs wait through the "
          f"whole forward, that is the difference (lesson 8 plans where to cut).\n")
    return rows


# %%
def phase_runs(timeline):
    """[(phase, first event, last event + 1)]: the runs of consecutive events of one phase."""
    runs, start = [], 0
    for i in range(1, len(timeline) + 1):
        if i == len(timeline) or timeline[i]["phase"] != timeline[start]["phase"]:
            runs.append((timeline[start]["phase"], start, i))
            start = i
    return runs


def plot(rows):
    kib = 1024
    shown = ["plain", "one checkpoint", "nested"]
    colors = PHASE_COLORS
    notes = {"plain": {"forward": ["forward: each layer keeps its output"]},
             "one checkpoint": {"forward": ["forward: keeps only x"], "recompute": ["the block again, kept"]},
             "nested": {"forward": ["forward: keeps only x"],
                        "recompute": ["A (kept: nothing), then B (kept)", "A again, kept"]}}
    longest = max(len(rows[n]["timeline"]) for n in shown)
    top = max(rows[n]["peak"] for n in shown) / kib
    fig, axes = plt.subplots(len(shown), 1, figsize=(9, 7), sharex=True, sharey=True)
    for ax, name in zip(axes, shown):
        tl = rows[name]["timeline"]
        ys = np.array([e["activations"] for e in tl] + [0]) / kib
        xs = np.arange(len(ys))  # event i holds ys[i] from i to i + 1
        seen = {}
        for phase, a, b in phase_runs(tl):
            if phase in colors:
                ax.axvspan(a, b, color=colors[phase], alpha=0.2, lw=0, label=f"{phase} ops")
                k = seen[phase] = seen.get(phase, -1) + 1
                texts = notes[name].get(phase, [])
                if k < len(texts):
                    ax.text((a + b) / 2, top * 1.22, texts[k], ha="center", va="top", fontsize=8)
        ax.plot(xs, ys, color=CATEGORY_COLORS["activations"], lw=1.6, drawstyle="steps-post")
        ax.axhline(rows["plain"]["peak"] / kib, color="k", ls=":", lw=0.8)
        r = rows[name]
        ax.set_title(f"{name}: peak {format_bytes(r['peak'])}, recompute {r['recompute'] / r['forward']:.2f} "
                     f"forward passes", fontsize=10, loc="left")
        ax.set_ylabel("activations (KiB)")
        ax.set_xlim(0, longest)
        ax.set_ylim(0, top * 1.27)
    axes[0].text(longest * 0.995, rows["plain"]["peak"] / kib, "plain peak", ha="right", va="top", fontsize=8)
    handles, labels = axes[1].get_legend_handles_labels()
    unique = dict(zip(labels, handles))  # one entry per phase
    axes[0].legend(unique.values(), unique.keys(), loc="lower right", fontsize=8, title="shaded: events of",
                   title_fontsize=8)
    axes[-1].set_xlabel("event in one training step (one op run: forward, recompute or backward)")
    fig.suptitle(f"Activation memory over one step of {NEST_PAIRS} Linear+Tanh pairs, as mg.profile's timeline "
                 f"saw it\nearly stop off (set_checkpoint_early_stop(False)): each recompute reruns its whole "
                 f"block", fontsize=10)
    print(f"plot: {save_plot(fig, '07_checkpointed_block.png')}\n")


def early_stop_note():
    """What the default recompute (early stop on) runs of part 4's block, against the whole block."""
    block = pairs(8, 128)
    x = mg.randn(64, 128)
    runs = {}
    for early in (False, True):
        with set_checkpoint_early_stop(early), mg.profile() as prof:
            sq_loss(mg.checkpoint(block, x)).backward()
        runs[early] = prof
    print(f"With minigrad's default, early stop on, one checkpoint of part 4's block recomputes "
          f"{format_flops(runs[True].flops('recompute'))}FLOP ({runs[True].calls('recompute', 'linear')} Linears) "
          f"instead of {format_flops(runs[False].flops('recompute'))}FLOP "
          f"({runs[False].calls('recompute', 'linear')}): its last Tanh's output is the checkpoint's, which it keeps, "
          f"and then nothing reads its last Linear's output (lesson 11).\n")


# %%
def main(argv=None):
    ap = command_line(__doc__, no_plot="skip writing out/07_checkpointed_block.png")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with set_checkpoint_early_stop(False):  # whole blocks run again, as in exercise 7
        part1_rng()
        part2_batchnorm()
        part3_frozen()
        rows = part4_nesting()
    early_stop_note()
    if not args.no_plot:
        plot(rows)
    finish(EXERCISES, t0)


# %%
if __name__ == "__main__":
    main([] if "ipykernel" in sys.modules else None)  # in a notebook: the defaults
