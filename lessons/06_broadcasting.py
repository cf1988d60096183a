"""Lesson 6: broadcasting and the shapes of gradients.

    python lessons/06_broadcasting.py      # about 4 s (make tour, 1 BLAS thread, 2 busy cores, 2026-12-01)

`a + b` with a of shape (5, 4) and b of shape (4,) adds b to every row: NumPy broadcasts b, as
if it had been copied 5 times. Each copy touched the loss, so b's gradient is the SUM over the
copies of the gradient that arrives at each one ("unbroadcasting", ops.unbroadcast). Part 1
shows this on numbers and checks it against finite differences, next to two plausible wrong
answers (the mean over the copies, one copy alone). Part 2 runs the patterns of broadcasting
(a trailing dim, a size-1 dim, a missing leading dim, both sides, a scalar) and prints the
shapes the engine gives: a gradient always has its tensor's shape. Part 3 is the everyday case,
the bias of a Linear layer, copied once per row of the batch and per position of a sequence.
Part 4 shows the common mistake, a gradient of the wrong shape: the engine refuses it, and
NumPy, in a hand-written update, broadcasts it silently into a wrong parameter.
Plot: out/06_broadcasting.png (the gradient at each copy, and its sum, as heatmaps).
"""
# %%
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import minigrad as mg
from minigrad import ops
from minigrad.tensor import apply

from _lesson import command_line, finish, predict, reveal, save_plot

# %%
# settings
SEED = 0
ROWS, COLS = 5, 4             # a is (ROWS, COLS); b is broadcast over the rows (or the columns)
BATCH, SEQ, IN, OUT_F = 2, 3, 6, 4   # part 3: x (BATCH, SEQ, IN) into Linear(IN, OUT_F)
EPS = 1e-6                    # the step of the central differences (everything here is float64)
EXERCISES = (2, 3)  # python -m minigrad check N: the exercises this lesson prepares
PLOTS = {"06_broadcasting.png": "the gradient arriving at each broadcast copy, and its sum, as "
                                "heatmaps (engine, finite differences, the wrong mean)"}


# %% [markdown]
# ## Finite differences: the referee
#
# d loss / d t[k] is about (loss(t[k] + eps) - loss(t[k] - eps)) / (2 eps). In float64 with
# eps = 1e-6 this is good to about 1e-9: far finer than any mistake this lesson makes.

# %%
def finite_differences(loss_fn, t, eps=EPS):
    """Central differences of the scalar loss_fn() with respect to each element of tensor t."""
    flat = t.data.reshape(-1)  # a view: writing into it changes t in place
    out = np.zeros(flat.size)
    with mg.no_grad():
        for k in range(flat.size):
            keep = flat[k].item()
            flat[k] = keep + eps
            plus = loss_fn().item()
            flat[k] = keep - eps
            minus = loss_fn().item()
            flat[k] = keep
            out[k] = (plus - minus) / (2 * eps)
    return out.reshape(t.shape)


def randn(*shape, grad=True):
    return mg.randn(*shape, dtype="float64", requires_grad=grad)


# %% [markdown]
# ## Part 1: b's gradient is the sum over its copies
#
# out = a + b, and a squared error against targets y. The gradient that arrives at out, at row i,
# is the gradient that arrives at copy i of b (out.retain_grad() keeps it to look at).

# %%
def part1():
    print(f"Part 1: out = a + b, a of shape ({ROWS}, {COLS}), b of shape ({COLS},): b is copied to each of the "
          f"{ROWS} rows\n")
    mg.manual_seed(SEED)
    a, b, y = randn(ROWS, COLS), randn(COLS), randn(ROWS, COLS, grad=False)

    def loss_fn():
        out = a + b
        return ((out - y) ** 2).mean(), out

    loss, out = loss_fn()
    out.retain_grad()
    loss.backward()
    arriving = out.grad.numpy()                     # (ROWS, COLS): one row per copy of b
    fd = finite_differences(lambda: loss_fn()[0], b)
    engine = b.grad.numpy()
    candidates = {"sum over the copies": arriving.sum(axis=0), "mean over the copies": arriving.mean(axis=0),
                  "copy 0 alone": arriving[0]}
    print(f"{'':<22}" + "".join(f"{'b[' + str(j) + ']':>11}" for j in range(COLS)) + f"{'max |x - fd|':>14}")
    print(f"{'finite differences':<22}" + "".join(f"{v:>11.6f}" for v in fd))
    print(f"{'engine: b.grad':<22}" + "".join(f"{v:>11.6f}" for v in engine) + f"{np.abs(engine - fd).max():>14.1e}")
    errors = {}
    for name, cand in candidates.items():
        errors[name] = float(np.abs(cand - fd).max())
        print(f"{name:<22}" + "".join(f"{v:>11.6f}" for v in cand) + f"{errors[name]:>14.1e}")
    print(f"(b.grad equals the sum over the {ROWS} copies; the mean is {ROWS} times too small, one copy misses "
          f"the other {ROWS - 1})")
    return dict(arriving=arriving, engine=engine, fd=fd, errors=errors)


def part1_columns():
    """The same with b of shape (ROWS, 1): copied along the columns, summed over them, the dim kept."""
    mg.manual_seed(SEED + 1)
    a, b, y = randn(ROWS, COLS), randn(ROWS, 1), randn(ROWS, COLS, grad=False)

    def loss_fn():
        out = a + b
        return ((out - y) ** 2).mean(), out

    loss, out = loss_fn()
    out.retain_grad()
    loss.backward()
    fd = finite_differences(lambda: loss_fn()[0], b)
    engine = b.grad.numpy()
    print(f"\nb of shape ({ROWS}, 1) is copied along the {COLS} columns: b.grad has shape {b.grad.shape}, equals "
          f"out.grad.sum(axis=1, keepdims=True) to {np.abs(engine - out.grad.numpy().sum(1, keepdims=True)).max():.1e}"
          f" and the finite differences to {np.abs(engine - fd).max():.1e}")
    return dict(arriving=out.grad.numpy(), engine=engine, fd=fd)


# %% [markdown]
# ## Part 2: the patterns, and the shapes the engine gives
#
# Shapes are compared from the right; a missing dim counts as size 1; a size-1 dim is copied.
# The gradient of an input sums over the dims it was copied along: the leading dims it lacks
# (dropped) and its size-1 dims (kept, with size 1). It always comes back in the input's shape.

# %%
CASES = [("add", (ROWS, COLS), (COLS,)), ("add", (ROWS, COLS), (ROWS, 1)), ("add", (2, ROWS, COLS), (ROWS, 1)),
         ("add", (ROWS, 1), (1, COLS)), ("add", (2, ROWS, COLS), ()), ("mul", (ROWS, COLS), (COLS,))]


def summed_dims(shape, out_shape):
    """The dims of out_shape that an input of `shape` was copied along (what unbroadcast sums over)."""
    lead = len(out_shape) - len(shape)
    return tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and out_shape[lead + i] != 1)


def part2():
    print("\nPart 2: each pattern of broadcasting; every gradient checked against finite differences\n")
    print(f"{'op':<5}{'a':<11}{'b':<9}{'out':<11}{'a.grad':<11}{'b.grad':<9}{'b summed over dims':<20}"
          f"{'max |grad - fd|':>15}")
    rows = []
    for k, (op, sa, sb) in enumerate(CASES):
        mg.manual_seed(SEED + 10 + k)
        a, b = randn(*sa), randn(*sb)
        w = mg.randn(*np.broadcast_shapes(sa, sb), dtype="float64")  # weights: every output element counts

        def loss_fn():
            return ((a + b if op == "add" else a * b).tanh() * w).sum()

        loss_fn().backward()
        err = max(float(np.abs(t.grad.numpy() - finite_differences(loss_fn, t)).max()) for t in (a, b))
        out_shape = np.broadcast_shapes(sa, sb)
        dims = summed_dims(sb, out_shape)
        rows.append(dict(op=op, a=sa, b=sb, out=out_shape, ga=a.grad.shape, gb=b.grad.shape, err=err))
        print(f"{op:<5}{str(sa):<11}{str(sb):<9}{str(out_shape):<11}{str(a.grad.shape):<11}{str(b.grad.shape):<9}"
              f"{str(dims):<20}{err:>15.1e}")
    same = all(r["ga"] == r["a"] and r["gb"] == r["b"] for r in rows)
    print(f"every gradient has its tensor's shape: {same}")
    return rows


# %% [markdown]
# ## Part 3: the bias of a Linear layer
#
# y = x @ W.T + bias: the bias, of shape (out_features,), is added to every row of the batch and,
# for a sequence, to every position. Its gradient sums over all those copies (ops.Linear does the
# sum itself: `g2.sum(axis=0)` over the folded batch and sequence dims).

# %%
def part3():
    print(f"\nPart 3: the bias of Linear({IN}, {OUT_F}) on x of shape ({BATCH}, {SEQ}, {IN})\n")
    mg.manual_seed(SEED)
    layer = mg.nn.Linear(IN, OUT_F).to("float64")
    x = mg.randn(BATCH, SEQ, IN, dtype="float64")

    def loss_fn():
        y = layer(x)
        return (y.tanh() ** 2).mean(), y

    loss, y = loss_fn()
    y.retain_grad()
    loss.backward()
    bias = layer.bias
    summed = y.grad.numpy().sum(axis=(0, 1))
    fd = finite_differences(lambda: loss_fn()[0], bias)
    print(f"y has shape {y.shape}: the bias was copied {BATCH} x {SEQ} = {BATCH * SEQ} times")
    print(f"bias.grad shape {bias.grad.shape}, weight.grad shape {layer.weight.grad.shape} "
          f"(each its parameter's shape)")
    print(f"bias.grad - y.grad.sum(axis=(0, 1)): {np.abs(bias.grad.numpy() - summed).max():.1e}; "
          f"bias.grad - finite differences: {np.abs(bias.grad.numpy() - fd).max():.1e}")
    return dict(arriving=y.grad.numpy().reshape(-1, OUT_F), engine=bias.grad.numpy(), fd=fd)


# %% [markdown]
# ## Part 4: the common mistake, a gradient of the wrong shape
#
# A hand-written backward that returns the incoming gradient for b without summing it hands back
# an array of out's shape. The engine refuses it where it would become b.grad. In plain NumPy
# nothing refuses: a gradient summed without keepdims, (5,) instead of (5, 1), broadcasts in
# the update `b -= lr * g` into a (5, 5) "parameter", and training goes on, wrong.

# %%
class AddThatForgetsToSum(ops.Add):
    """Add, with the mistake: b's gradient is g itself, of out's shape, not summed to b's."""
    name = "add_forgetful"

    def backward(self, g):
        return g, g


def part4():
    print("\nPart 4: a gradient of the wrong shape\n")
    mg.manual_seed(SEED)
    a, b = randn(ROWS, COLS), randn(COLS)
    try:
        apply(AddThatForgetsToSum, a, b).sum().backward()   # apply: what every Tensor method calls
        refused = None
        print("the engine took a wrong-shaped gradient: UNEXPECTED")
    except ValueError as err:  # minigrad's ShapeError is a ValueError (and a RuntimeError, as PyTorch's)
        refused = str(err)
        print(f"a backward that forgets to sum: {type(err).__name__}: {refused}")
    b_np = np.random.default_rng(SEED).standard_normal((ROWS, 1))
    g = np.random.default_rng(SEED + 1).standard_normal((ROWS, COLS))
    wrong = g.sum(axis=1)                      # (ROWS,): the size-1 dim dropped
    right = g.sum(axis=1, keepdims=True)       # (ROWS, 1)
    guess = predict(f"in NumPy, b of shape ({ROWS}, 1) minus 0.1 * g.sum(axis=1), a gradient summed without "
                    f"keepdims, of shape ({ROWS},): how many numbers does the updated b hold?", "numbers")
    reveal(guess, (b_np - 0.1 * wrong).size, "numbers")
    print(f"NumPy, b of shape {b_np.shape}: b - 0.1 * g.sum(axis=1) has shape {(b_np - 0.1 * wrong).shape} "
          f"(no error); with keepdims=True: {(b_np - 0.1 * right).shape}")
    mg.manual_seed(SEED)
    p = mg.nn.Parameter(mg.randn(ROWS, 1, dtype="float64"))
    (p * mg.randn(ROWS, COLS, dtype="float64")).sum().backward()
    before = tuple(p.shape)
    with mg.no_grad():
        p -= 0.1 * p.grad
    print(f"minigrad: p of shape {before}, p.grad of shape {tuple(p.grad.shape)}; after p -= 0.1 * p.grad: "
          f"{tuple(p.shape)}")
    return refused


# %% [markdown]
# ## The picture
#
# Each row of the figure: the gradient arriving at every copy (left), what the engine put in
# b.grad (middle: the sum over the copies) and the finite differences (right).

# %%
def heatmap(ax, values, title, fig, xlabel="", ylabel="", xticks=None, yticks=None):
    m = float(np.abs(values).max()) or 1.0
    im = ax.imshow(values, cmap="RdBu_r", vmin=-m, vmax=m, aspect="equal")
    for (i, j), v in np.ndenumerate(values):
        ax.text(j, i, f"{v:.3f}", ha="center", va="center", fontsize=8, color="white" if abs(v) > 0.6 * m else "k")
    ax.set_xticks(range(values.shape[1]), xticks or range(values.shape[1]), fontsize=8)
    ax.set_yticks(range(values.shape[0]), yticks or range(values.shape[0]), fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    fig.colorbar(im, ax=ax, shrink=0.7, pad=0.03).set_label("gradient (d loss / d element)", fontsize=7)


def plot(rows_case, cols_case, linear_case):
    fig, axes = plt.subplots(3, 2, figsize=(11, 10.5), gridspec_kw=dict(width_ratios=[1.5, 1]))
    heatmap(axes[0, 0], rows_case["arriving"], f"out = a + b with b of shape ({COLS},):\nthe gradient arriving at "
            f"each of b's {ROWS} copies (out.grad)", fig, "column j of out", "row i of out = copy i of b")
    heatmap(axes[0, 1], np.stack([rows_case["engine"], rows_case["fd"], rows_case["arriving"].mean(axis=0)]),
            "summed down the rows: b.grad, shape (4,)", fig, "element j of b",
            yticks=["engine b.grad", "finite diff.", "mean (wrong)"])
    heatmap(axes[1, 0], cols_case["arriving"], f"out = a + b with b of shape ({ROWS}, 1):\nthe gradient arriving at "
            f"each of b's {COLS} copies", fig, "column j of out = copy j of b", "row i of out")
    heatmap(axes[1, 1], np.concatenate([cols_case["engine"], cols_case["fd"][:, :1]], axis=1),
            f"summed along the columns: b.grad,\nshape ({ROWS}, 1), the size-1 dim kept", fig,
            xticks=["engine\nb.grad", "finite\ndiff."], ylabel="element i of b")
    n = BATCH * SEQ
    heatmap(axes[2, 0], linear_case["arriving"].T, f"Linear({IN}, {OUT_F}) on x of shape ({BATCH}, {SEQ}, {IN}): "
            f"the gradient\nat y, whose {n} positions are the bias's {n} copies", fig,
            f"position of y (batch x sequence, {BATCH} x {SEQ} flattened)", "output feature")
    heatmap(axes[2, 1], np.stack([linear_case["engine"], linear_case["fd"]], axis=1),
            f"summed over the {n} positions:\nbias.grad, shape ({OUT_F},)", fig,
            xticks=["engine\nbias.grad", "finite\ndiff."], ylabel="output feature")
    fig.suptitle("Broadcasting copies a tensor; its gradient is the sum of the gradients at its copies\n"
                 "(float64; each panel has its own colour scale, and the numbers are the gradients)", fontsize=11)
    print(f"\nplot: {save_plot(fig, '06_broadcasting.png', dpi=110)}")


# %%
def main(argv=None):
    ap = command_line(__doc__, no_plot="skip writing out/06_broadcasting.png")
    args = ap.parse_args(argv)

    rows_case = part1()
    cols_case = part1_columns()
    part2()
    linear_case = part3()
    part4()
    if not args.no_plot:
        plot(rows_case, cols_case, linear_case)
    finish(EXERCISES)


# %%
if __name__ == "__main__":
    main([] if "ipykernel" in sys.modules else None)  # in a notebook, the kernel's arguments are not the lesson's
