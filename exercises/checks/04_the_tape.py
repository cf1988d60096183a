"""Checks of exercise 4: the learner's backward against minigrad's own in float64, on an x used three
times, a diamond whose paths differ in length, one array handed to two inputs, and a 2-layer MLP;
that it walks the records itself (mg.profile sees no backward of the engine's), adds up across two
calls, and walks a chain of 100,000 ops without recursion, in a time that grows like the chain (a chain
of 20,000 first measures it: a walk that grows with the square stops there, with both times)."""
import sys
import time

import numpy as np

import minigrad as mg
import minigrad.functional as F
from minigrad import backend
from minigrad.grading import Failed, Question, close, require, rng

TITLE = "the tape walk: backward() over the records, without recursion"
LESSON = 5
HINTS = ("Three questions, in order: which records does root depend on (how do you find them all without calling "
         "yourself)? In what order may they run, so that each has every gradient it will get before it runs? And "
         "what does each hand on, to whom?",
         "Collect the records reachable from root.grad_fn through .next with a list used as a stack and a set of the "
         "records seen. A record is newer than the records that made its inputs, so newest first (by .seq, sorted "
         "once) runs each after all its users. Keep a dict {record: gradient so far}, start it with np.ones_like(root."
         "data) for root.grad_fn, and add what each backward hands on (out of place: a = a + b).",
         "for record in sorted(records, key=lambda r: r.seq, reverse=True): g = grads.pop(record, None) (skip it if "
         "None); for nxt, gi in zip(record.next, record.backward(g)): skip None; a record (isinstance(nxt, Op)) gets "
         "grads[nxt] = grads[nxt] + gi if it has one, else gi; a leaf gets nxt.grad = mg.tensor(gi if nxt.grad is None "
         "else nxt.grad.data + gi, dtype=nxt.dtype).")
QUESTION = Question(2, wrong={1: "h is used twice: by mul directly, and by exp (then tanh, then mul): a gradient arrives "
                                 "along each path, and the record that made h runs only after both"})


def fan_out(x):
    return (x * x + x.exp()).sum()


def diamond(x):
    h = x.tanh()
    return (h.exp().tanh() * h).sum()


def shared(x, y):
    a, e = x.tanh(), y.exp()
    t = a * 3.0
    s = a + e  # Add hands one array to tanh's record and exp's; (a * 3)'s backward adds into tanh's before exp runs
    return (s * t).sum()


def mlp(w1, b1, w2, b2, *, data):
    x, target = data
    h = (x @ w1.T + b1).tanh()
    return F.cross_entropy(h @ w2.T + b2, target)


def _cases():
    r = rng(4)
    data = (mg.tensor(r.standard_normal((8, 4))), mg.tensor(r.integers(0, 3, 8)))
    return [("x used 3 times, (x * x + x.exp()).sum()", fan_out, {"x": r.standard_normal((3, 4))}),
            ("a diamond, h = x.tanh(); (h.exp().tanh() * h).sum(): h gets a gradient from each of its two users: sum "
             "them, and run h only after both", diamond,
             {"x": r.standard_normal((3, 4))}),
            ("one array handed to two inputs: a, e = x.tanh(), y.exp(); (a + e) * (a * 3) summed (Add gives the "
             "same g to a's record and to e's: add gradients out of place)", shared,
             {"x": r.standard_normal((2, 3)), "y": r.standard_normal((2, 3))}),
            ("a 2-layer MLP, cross_entropy(tanh(x @ w1.T + b1) @ w2.T + b2)", lambda *p: mlp(*p, data=data),
             {"w1": r.standard_normal((16, 4)) * 0.5, "b1": r.standard_normal(16) * 0.1,
              "w2": r.standard_normal((3, 16)) * 0.5, "b2": r.standard_normal(3) * 0.1})]


def _leaves(arrays):
    return {name: mg.tensor(a, requires_grad=True) for name, a in arrays.items()}


def _backward(ex, root, case):
    """The learner's backward, with sys.getrecursionlimit() as it is (1,000 by default)."""
    limit = sys.getrecursionlimit()
    try:
        ex.backward(root)
    except RecursionError:
        raise Failed(f"{case}: RecursionError. Your backward calls itself once per record, and Python stops at "
                     f"sys.getrecursionlimit() = {limit:,} nested calls: walk with a list as an explicit stack "
                     f"(stack.append(...), stack.pop()) instead") from None
    if sys.getrecursionlimit() != limit:
        moved = sys.getrecursionlimit()
        sys.setrecursionlimit(limit)
        raise Failed(f"{case}: your backward moved the recursion limit (sys.setrecursionlimit, from {limit:,} to "
                     f"{moved:,}): that only moves the wall, and past some depth the interpreter itself crashes. "
                     f"Walk with a list as an explicit stack instead")


def _walk(ex, root, case):
    """The learner's backward, under a profile: the engine's walk reports each record it runs."""
    with mg.profile() as prof:
        _backward(ex, root, case)
    require(prof.calls("backward") == 0,
            f"{case}: your backward ran minigrad's own walk ({prof.calls('backward')} records ran through the "
            f"engine's tape: root.backward() or minigrad.tensor.backward). Walk the records yourself: call "
            f"record.backward(g) on each")


def _leaf_grad(name, leaf, case):
    require(leaf.grad is not None, f"{case}: {name}.grad is None after your backward: record.next leads down to the "
            f"leaves (a Tensor there, not a record), and a leaf's .grad is a Tensor in its dtype")
    require(leaf.grad.dtype == leaf.dtype,
            f"{case}: {name}.grad is {leaf.grad.dtype}, but {name} is {leaf.dtype}: a gradient has its leaf's dtype. "
            f"Make it with mg.tensor(gradient, dtype=leaf.dtype), from the array itself (Python numbers and lists "
            f"become float32, PyTorch's default)")


def _chain(n):
    """-(-(...(-x))): n records in a row, each one's input made by the one before."""
    x = mg.tensor(np.array(1.0), requires_grad=True)
    y = x
    for _ in range(n):
        y = -y
    return x, y


def check(ex):
    for case, fn, arrays in _cases():
        expected = _leaves(arrays)
        fn(*expected.values()).backward()
        got = _leaves(arrays)
        _walk(ex, fn(*got.values()), case)
        for name, t in got.items():
            _leaf_grad(name, t, case)
            close(f"{name}.grad", t.grad, backend.to_numpy(expected[name].grad.data), where=f" ({case})")
        if fn is fan_out:  # a second backward adds into .grad, as PyTorch's does
            _walk(ex, fn(*got.values()), case)
            close("x.grad after two backward calls", got["x"].grad, 2 * backend.to_numpy(expected["x"].grad.data),
                  where=": each call must ADD to what leaf.grad already holds, as in PyTorch, where gradient "
                        "accumulation stands on it")
    # Add hands one gradient array to both its inputs: two leaves that take it as it is share one .grad array, and
    # a second backward that adds into one adds into both
    x, y = (mg.tensor(np.ones(3), dtype="float64", requires_grad=True) for _ in range(2))
    case = "x and y, two leaves fed by one add: ((x + y) * 2).sum(), backward twice"
    for _ in range(2):
        _walk(ex, ((x + y) * 2).sum(), case)
    _leaf_grad("x", x, case)
    require(not np.shares_memory(x.grad.data, y.grad.data),
            f"{case}: x.grad and y.grad share one array: Add handed the same gradient to both, and each leaf must "
            f"own its .grad (a copy), or the second call adds into both at once")
    for name, leaf in (("x", x), ("y", y)):
        close(f"{name}.grad after two backward calls", leaf.grad, np.full(3, 4.0), where=f" ({case})")
    # the chains on 'cpu' whatever the default device: they time the walk, and on a GPU each op's kernel launches
    # would hide a walk that grows with n^2 (the default inside the block, for the tensors a backward makes too)
    with mg.device("cpu"):
        for n in (20_000, 100_000):
            x, y = _chain(n)
            case = f"a chain of {n:,} ops, -(-(...(-x)))"
            start = time.perf_counter()
            _backward(ex, y, case)
            seconds = time.perf_counter() - start
            _leaf_grad("x", x, case)
            require(x.grad.item() == 1.0, f"{case}: x.grad should be 1.0, got {x.grad.item()}")
            if n == 20_000 and seconds > 0.3:  # before the 100,000: a walk that grows with n^2 would take minutes
                y = _chain(n)[1]
                start = time.perf_counter()
                y.backward()
                own = time.perf_counter() - start
                require(seconds < 10 * own,
                        f"your backward took {seconds:.2f} s on a chain of {n:,} ops, minigrad's own {own:.2f} s: for "
                        f"each record something scans all the others (`r in a_list`, list.index, list.pop(0), a sort "
                        f"inside the loop), so 5 times the records take 25 times as long ({25 * seconds:.0f} s for the "
                        f"100,000 that come next). Keep what you have seen in a set or a dict, and sort once")
