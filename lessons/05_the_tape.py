"""Lesson 5: the tape from scratch. What backward walks, what it saved, and when that is freed.

    python lessons/05_the_tape.py           # about 9 s (make tour, 1 BLAS thread, 2 busy cores, 2026-12-01)
    python lessons/05_the_tape.py --quick   # the deep chain 5,000 ops long instead of 50,000: about 2.9 s

Every op applied to a tensor that requires grad leaves a record on the tape: the op object itself,
reachable from its output as `t.grad_fn`. A record knows
    record.name    the op ('mul', 'tanh', ...)
    record.seq     its number: every record is newer than the records that made its inputs
    record.next    per input: the record that made it, the leaf tensor itself, or None (no gradient)
    record.saved   the arrays its backward will read: the activation memory
Part 1 builds one small expression, a neuron that uses its weight twice,
    loss = sum(tanh(w * x + b) * w)
prints its tape as a list, draws it (as micrograd's draw_dot does, here with matplotlib), and
puts gradients derived by hand beside the engine's. Part 2 follows the saved arrays through
backward: each record frees them the moment its own backward has run. Part 3 builds a chain far
deeper than Python's recursion limit and shows why the walk is a loop, not a recursion.
Plot: out/05_tape.png.
"""
# %%
import sys
import time

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import to_rgba
from matplotlib.patches import Circle, FancyBboxPatch

import minigrad as mg
from minigrad.profiler import CATEGORY_COLORS, PHASE_COLORS, format_bytes
from minigrad.tensor import records_since

from _lesson import command_line, finish, predict, reveal, save_plot

# %%
# settings
SEED = 0
N = 256                   # elements in w, x and b: 1 KiB each in float32
DEPTH = 50_000            # ops in the deep chain of part 3
QUICK_DEPTH = 5_000       # --quick: still five times Python's recursion limit
SHALLOW = 500             # a chain a recursive walk still manages
FACTOR = 1.00001          # the deep chain multiplies by this at every op
EXERCISES = (1, 4, 5)  # python -m minigrad check N: the exercises this lesson prepares
PARAMETERS, ACTIVATIONS = CATEGORY_COLORS["parameters"], CATEGORY_COLORS["activations"]  # leaves; what records keep
PLOTS = {"05_tape.png": "the recorded graph of a small expression, each record's saved bytes on it, "
                        "and the activation bytes rising in forward and draining in backward"}


# %% [markdown]
# ## Part 1: one expression, its tape as a list
#
# w and b require grad (a weight and a bias); x is data and does not. Everything is float32.
# The profile is open from the start, so the ledger sees every array the tape keeps.

# %%
def build():
    """The expression, under an open profile. Returns the named tensors and, per record, its bytes."""
    mg.manual_seed(SEED)
    w = mg.randn(N, requires_grad=True)
    x = mg.randn(N)                   # data: needs no gradient, so no edge of the tape leads to it
    b = mg.randn(N, requires_grad=True)
    z = w * x
    u = z + b
    h = u.tanh()
    e = h * w                         # w used a second time: its gradient comes along two paths
    loss = e.sum()
    named = dict(w=w, x=x, b=b, z=z, u=u, h=h, e=e, loss=loss)
    for t in (z, u, h, e):
        t.retain_grad()               # keep the gradients of the intermediates too, to compare them by hand
    return named


def describe(records, named, prof):
    """The tape as rows: seq, op, inputs, output, what each record saved, its bytes and the ledger's."""
    by_array = {id(t.data): k for k, t in named.items()}
    by_record = {t.grad_fn: k for k, t in named.items() if t.grad_fn is not None}
    rows = []
    for r in sorted(records, key=lambda r: r.seq):
        inputs = []
        for n in r.next:
            if n is None:
                inputs.append("None")
            elif isinstance(n, mg.Tensor):
                inputs.append(f"{by_array[id(n.data)]} (leaf)")
            else:
                inputs.append(f"#{n.seq} {n.name}")
        saved = [a for a in r.saved if a is not None]
        names = [by_array.get(id(a), "?") for a in saved]
        what = ", ".join(f"{k} {a.shape} {a.dtype}" for k, a in zip(names, saved)) or "nothing"
        rows.append(dict(seq=r.seq, op=r.name, inputs=", ".join(inputs), output=by_record[r], saved=what, names=names,
                         nbytes=sum(a.nbytes for a in saved), ledger=sum(prof.activations_kept([r]).values())))
    return rows


def part1():
    print("Part 1: the tape of loss = sum(tanh(w * x + b) * w), w, x, b of shape "
          f"({N},) float32; w and b require grad\n")
    with mg.profile() as prof:
        named = build()
        records = records_since(named["loss"])
        rows = describe(records, named, prof)
        kept_before = prof.current_bytes("activations")
        print(f"{'seq':>4}  {'op':<5} {'inputs (record.next)':<22} {'output':<7}{'saved (record.saved)':<34}"
              f"{'bytes':>7}{'ledger':>8}")
        for row in rows:
            print(f"{row['seq']:>4}  {row['op']:<5} {row['inputs']:<22} {row['output']:<7}{row['saved']:<34}"
                  f"{row['nbytes']:>7}{row['ledger']:>8}")
        total = sum(row["nbytes"] for row in rows)
        everyone = [k for row in rows for k in row["names"]]
        shared = sorted({k for k in everyone if everyone.count(k) > 1})
        print(f"\n{len(records)} records; their saved arrays add up to {total} B, the ledger's activations are "
              f"{kept_before} B" + (f": {', '.join(shared)} kept by two records is one buffer, counted once"
                                    if shared else ""))
        print("(inputs: '#k op' is a record, 'name (leaf)' a leaf tensor, None an input that needs no gradient: x.\n"
              " mul #0 keeps x, not w: d(w * x)/dw needs x, and x needs no gradient, so w is not needed.\n"
              " add keeps nothing: its gradient is g, passed on. sum keeps only the shape to broadcast g back.)")

        # walked now, while the records still hold their saved arrays: the picture shows them
        picture = layout(named["loss"], named, {row["seq"]: row for row in rows})
        named["loss"].backward()
        after = prof.current_bytes("activations")
    return named, records, rows, kept_before, after, prof, picture


# %% [markdown]
# ## The gradients, derived by hand
#
# Backward runs the chain rule from the loss down, record by record:
#
#     loss = sum(e)          dL/de = 1
#     e = h * w              dL/dh = dL/de * w                and one part of dL/dw: dL/de * h
#     h = tanh(u)            dL/du = dL/dh * (1 - h^2)
#     u = z + b              dL/dz = dL/du,  dL/db = dL/du
#     z = w * x              the other part of dL/dw: dL/dz * x
#
# w reached the loss along two paths, so its gradient is the SUM of both: h + x * w * (1 - h^2).

# %%
def by_hand(named):
    w, x, h = (named[k].detach().numpy() for k in "wxh")
    de = np.ones_like(h)
    dh = de * w
    du = dh * (1 - h * h)
    dz = du
    db = du
    dw = de * h + dz * x                       # the two paths into w, added
    return dict(e=de, h=dh, u=du, z=dz, b=db, w=dw)


def compare(named):
    hand = by_hand(named)
    formulas = dict(e="1", h="w", u="w * (1 - h^2)", z="dL/du", b="dL/du", w="h + x * w * (1 - h^2)")
    print(f"\n{'gradient':<9}{'by hand':<26}{'max |hand - engine|':>20}")
    worst = 0.0
    for k in ("e", "h", "u", "z", "b", "w"):
        diff = float(np.abs(hand[k] - named[k].grad.numpy()).max())
        worst = max(worst, diff)
        print(f"{'dL/d' + k:<9}{formulas[k]:<26}{diff:>20.1e}")
    print("(the same float32 operations in the same order: the same bits)" if worst == 0 else
          f"(float32: differences at the level of rounding, {worst:.1e} at most: the same gradient)")
    return worst


# %% [markdown]
# ## Part 2: when the saved arrays are freed
#
# Each record's backward reads its saved arrays once. The engine drops them right after
# (`release` in minigrad/tensor/tape.py), so activation memory drains during backward as it rose in
# forward. A buffer two records keep (h) leaves the ledger only when the second lets go.

# %%
def part2(named, records, rows, kept_before, after, prof):
    print("\nPart 2: the saved arrays through backward (newest record first)\n")
    events = [e for e in prof.timeline() if e["phase"] == "backward"]
    print(f"activations before backward: {kept_before} B")
    waiting = sorted(rows, key=lambda row: row["seq"], reverse=True)  # the order backward runs them in
    for i, (e, row) in enumerate(zip(events, waiting)):
        still = {k: f"#{r['seq']} {r['op']}" for r in waiting[i + 1:] for k in r["names"]}
        note = (f"released {', '.join(row['names'])}" if row["names"] else "kept nothing") + "".join(
            f"; {k} stays: {still[k]} keeps it too" for k in row["names"] if k in still)
        print(f"  after #{row['seq']} {e['op']:<5} backward: {e['activations']:>5} B   ({note})")
    still = [r for r in records if r.saved]
    print(f"after backward: {len(still)} of {len(records)} records keep anything (record.saved == () for "
          f"{len(records) - len(still)}); the ledger's activations: {after} B")
    try:
        named["loss"].backward()
        print("a second backward ran: UNEXPECTED")
    except RuntimeError as err:
        print(f"a second backward: RuntimeError: {str(err).split('. ')[0]}.")

    with mg.profile() as prof2:
        again = build()
        again["loss"].backward(retain_graph=True)
        kept = prof2.current_bytes("activations")
        first = again["w"].grad.numpy().copy()
        again["loss"].backward()
        freed = prof2.current_bytes("activations")
    doubled = float(np.abs(again["w"].grad.numpy() - 2 * first).max())
    print(f"with backward(retain_graph=True) the records keep their arrays ({kept} B after it), so a second "
          f"backward can run;\nit frees them ({freed} B), and w.grad is now twice the first (max |w.grad - 2 x first| "
          f"= {doubled:.1e}, float32 rounding): backward adds into .grad")
    return events


# %% [markdown]
# ## Part 3: why the walk is a loop
#
# micrograd finds the order of its backward with a recursive depth-first search. Python allows
# sys.getrecursionlimit() nested calls; a chain of ops is as deep as it is long. minigrad
# runs the records newest first, by seq: a record is always newer than the records that made
# its inputs. records_since collects them with a list as a stack (exercise 4 is a walk of your own);
# backward itself keeps the records that have a gradient waiting in a heap by seq, as PyTorch's
# engine does, and always runs the newest: the same order, without a second pass.
# Raising the limit (sys.setrecursionlimit) moves the wall rather than removing it: the depth
# must be known in advance, every frame costs memory, and where the recursion passes through C
# code (or on Python before 3.11) a deep one overflows the C stack and crashes the process
# instead of raising. A list used as a stack has no such limit.

# %%
def recursive_order(record, order, seen):
    """micrograd's build_topo, over minigrad's records."""
    if record not in seen:
        seen.add(record)
        for n in record.next:
            if n is not None and not isinstance(n, mg.Tensor):
                recursive_order(n, order, seen)
        order.append(record)
    return order


def chain(n):
    x = mg.ones(1, dtype="float64", requires_grad=True)
    y = x
    for _ in range(n):
        y = y * FACTOR
    return x, y


def part3(depth):
    print(f"\nPart 3: a chain of {depth:,} ops, y = x * {FACTOR} * {FACTOR} * ... (float64)\n")
    print(f"Python's recursion limit: sys.getrecursionlimit() = {sys.getrecursionlimit()}")
    _, y = chain(SHALLOW)
    print(f"a recursive walk of a {SHALLOW}-op chain: orders {len(recursive_order(y.grad_fn, [], set()))} records")
    with mg.profile() as prof:
        x, y = chain(depth)
        kept = prof.current_bytes("activations")
        try:
            recursive_order(y.grad_fn, [], set())
            recursion = "finished"
        except RecursionError as err:
            recursion = f"RecursionError ({err})"
        print(f"a recursive walk of the {depth:,}-op chain: {recursion}")
        t0 = time.perf_counter()
        y.backward()
        seconds = time.perf_counter() - t0
        left = prof.current_bytes("activations")
    print(f"minigrad's iterative walk: {prof.calls('backward'):,} records run backward in {seconds:.2f} s "
          f"(profiled)")
    print(f"dy/dx: engine {x.grad.item():.12f}, by hand {FACTOR}^{depth} = {FACTOR ** depth:.12f}")
    print(f"saved for backward: {format_bytes(kept)} ({kept // depth} B per record: each mul keeps its constant, "
          f"the 0-d float64 {FACTOR}); after backward: {left} B")
    return recursion


# %% [markdown]
# ## The picture
#
# Boxes are records (op, seq, the bytes the ledger counts for what it saved), circles are
# leaves, grey dots are None edges (an input that needs no gradient). Columns are depth: a
# record sits one column right of its deepest input. Below: the activation bytes over the step.

# %%
def layout(root, named, rows):
    """Nodes and edges of the recorded graph, walked from root (iteratively, as the engine does)."""
    leaf_name = {id(t): k for k, t in named.items() if t.grad_fn is None}
    out_name = {t.grad_fn: k for k, t in named.items() if t.grad_fn is not None}
    records = sorted(records_since(root), key=lambda r: r.seq)
    depth, nodes, edges = {}, [], []
    for r in records:  # oldest first: every input's depth is known before its user's
        ins = []
        for i, n in enumerate(r.next):
            key = ("none", r.seq, i) if n is None else ("leaf", id(n)) if isinstance(n, mg.Tensor) else ("rec", n.seq)
            if key not in depth:
                depth[key] = 0
                label = "None" if n is None else leaf_name.get(id(n), "leaf")
                nodes.append(dict(key=key, kind=key[0], label=label))
            ins.append(key)
            edges.append((key, ("rec", r.seq)))
        depth[("rec", r.seq)] = 1 + max(depth[k] for k in ins)
        nodes.append(dict(key=("rec", r.seq), kind="rec", label=f"{r.name}  #{r.seq}",
                          sub=f"saves {', '.join(rows[r.seq]['names']) or 'nothing'}: "
                              f"{format_bytes(rows[r.seq]['ledger'])}", out=out_name.get(r, "")))
    for nd in nodes:  # a leaf or None sits just left of its first user, not far back in column 0
        if nd["kind"] != "rec":
            users = [depth[b] for a, b in edges if a == nd["key"]]
            depth[nd["key"]] = min(users) - 1
    return dict(nodes=nodes, edges=edges, depth=depth)


def draw(picture, events, records):
    nodes, edges, depth = picture["nodes"], picture["edges"], picture["depth"]
    columns = {}
    for nd in nodes:
        columns.setdefault(depth[nd["key"]], []).append(nd)
    pos = {}
    for d, col in columns.items():
        col.sort(key=lambda nd: (nd["kind"] != "rec", nd["kind"] == "none"))  # records on the main line
        for i, nd in enumerate(col):
            pos[nd["key"]] = (d * 2.4, -1.6 * i)
    half = dict(rec=(0.9, 0.5), leaf=(0.42, 0.42), none=(0.28, 0.28))  # half width and height of each kind
    kind = {nd["key"]: nd["kind"] for nd in nodes}
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(12, 7.5), gridspec_kw=dict(height_ratios=[1.4, 1]))
    for a, b in edges:
        (x0, y0), (x1, y1) = pos[a], pos[b]
        if x1 - x0 > 2.5 and y0 == y1:  # an edge that skips columns on the main line: over the boxes
            start, end, style = (x0, y0 + half[kind[a]][1]), (x1, y1 + half[kind[b]][1]), "arc3,rad=-0.2"
        else:
            start, end, style = (x0 + half[kind[a]][0], y0), (x1 - half[kind[b]][0], y1), "arc3,rad=0"
        ax.annotate("", xy=end, xytext=start,
                    arrowprops=dict(arrowstyle="-|>", color="0.3", lw=1.2, connectionstyle=style, shrinkA=0, shrinkB=0))
    for nd in nodes:
        x, y = pos[nd["key"]]
        if nd["kind"] == "rec":
            ax.add_patch(FancyBboxPatch((x - 0.85, y - 0.45), 1.7, 0.9, boxstyle="round,pad=0.05",
                                        fc=to_rgba(ACTIVATIONS, 0.12), ec=ACTIVATIONS, lw=1.5))  # what it saves
            ax.text(x, y + 0.16, nd["label"], ha="center", va="center", fontsize=10, weight="bold")
            ax.text(x, y - 0.18, nd["sub"], ha="center", va="center", fontsize=9)
            ax.text(x, y - 0.58, f"makes {nd['out']}", ha="center", va="top", fontsize=8, color="0.35")
        elif nd["kind"] == "leaf":
            ax.add_patch(Circle((x, y), 0.42, fc=to_rgba(PARAMETERS, 0.15), ec=PARAMETERS, lw=1.5))  # w, b
            ax.text(x, y, nd["label"], ha="center", va="center", fontsize=11, weight="bold")
            ax.text(x, y - 0.5, "leaf, requires grad", ha="center", va="top", fontsize=7, color="0.35")
        else:
            ax.add_patch(Circle((x, y), 0.28, fc="0.92", ec="0.5", lw=1, ls="--"))
            ax.text(x, y, "None", ha="center", va="center", fontsize=7, color="0.3")
            ax.text(x, y - 0.36, "x: data, no grad", ha="center", va="top", fontsize=7, color="0.35")
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    ax.set_xlim(min(xs) - 1.0, max(xs) + 1.0)
    ax.set_ylim(min(ys) - 0.9, max(ys) + 1.6)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("The tape of loss = sum(tanh(w * x + b) * w): each box is a record (op, seq, bytes it saved for "
                 "backward),\ncircles are leaves; an arrow runs from an input to the record that uses it "
                 "(record.next points back along it)", fontsize=10)

    # one bar per event: the activation bytes after it. Forward runs the records oldest first, backward newest
    # first, so the events name them in that order.
    order = sorted(records, key=lambda r: r.seq)
    steps = [e for e in events if e["phase"] in ("forward", "backward")]
    names = [f"{r.name} #{r.seq}" for r in order] + [f"{r.name} #{r.seq}" for r in reversed(order)]
    assert [e["op"] for e in steps] == [n.split()[0] for n in names], "the events are not the records in order"
    for phase, lo, hi in (("forward", -0.5, len(order) - 0.5), ("backward", len(order) - 0.5, len(steps) - 0.5)):
        ax2.axvspan(lo, hi, color=PHASE_COLORS[phase], alpha=0.15, lw=0, label=f"{phase}: after the {phase} of")
    for i, e in enumerate(steps):
        ax2.bar(i, e["activations"] / 1024, color=ACTIVATIONS, width=0.7,
                label="activations (saved for backward)" if i == 0 else None)
        ax2.text(i, e["activations"] / 1024, format_bytes(e["activations"]), ha="center", va="bottom", fontsize=8)
    ax2.set_xticks(range(len(steps)), names, fontsize=8)
    ax2.axvline(len(order) - 0.5, color="k", ls=":", lw=0.8)
    ax2.set_xlabel("event: one record's forward, then (right of the dotted line) its backward, in the order they ran")
    ax2.set_ylabel("activations saved for backward (KiB)")
    ax2.set_title("Activation bytes as mg.profile counted them: they rise in forward and drain in backward, "
                  "as each record frees its saved arrays", fontsize=10)
    ax2.legend(loc="upper left", fontsize=8)
    ax2.set_ylim(0, max(e["activations"] for e in steps) / 1024 * 1.25)
    print(f"\nplot: {save_plot(fig, '05_tape.png')}")


# %%
def main(argv=None):
    ap = command_line(__doc__, quick=f"the deep chain of part 3 {QUICK_DEPTH:,} ops long instead of {DEPTH:,} "
                                     f"(still deeper than the recursion limit)",
                      no_plot="skip writing out/05_tape.png")
    args = ap.parse_args(argv)

    guess = predict(f"w, x and b hold {N} float32 numbers each ({format_bytes(4 * N)}). After the forward of "
                    f"loss = sum(tanh(w * x + b) * w), how much does the tape keep for backward?", "KiB",
                    quick=args.quick)
    named, records, rows, kept_before, after, prof, picture = part1()
    reveal(guess, kept_before / 1024, "KiB")
    compare(named)
    part2(named, records, rows, kept_before, after, prof)
    part3(QUICK_DEPTH if args.quick else DEPTH)
    if not args.no_plot:
        draw(picture, prof.timeline(), records)
    finish(EXERCISES)


# %%
if __name__ == "__main__":
    main([] if "ipykernel" in sys.modules else None)  # in a notebook, the kernel's arguments are not the lesson's
