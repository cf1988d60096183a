"""Who owns a gradient (NOTE [who owns a gradient], tensor/tape.py): generated programs against PyTorch.

A leaf takes its first gradient array without a copy and sums later ones into it in place, when the tape can tell
that no one else will read that array; a wrong answer would be a silent wrong gradient, the worst bug this engine
can have. So random programs make every way an array is handed to more than one place: Add gives one array to both
inputs (a tied leaf, w + w, too), pass-throughs (x + 1.5, a reshape, a transpose) hand a record's own gradient on,
cat's backward hands views of one array to two inputs, retain_grad() keeps a record's gradient, checkpoints hand
their recompute's gradients back (one output or two), and leaves are used many times. Each runs several backward
calls: fresh micro-batches that accumulate, a second backward through a graph kept with retain_graph, a caller's
`gradient=` array, zero_grad between (to None or to zeros), and a user holding a .grad between calls. After every
call each .grad must be PyTorch's (float64 both), no two .grads may share memory, and the caller's array, the leaves'
values and a .grad the user held (unless it is still the leaf's .grad) must be as they were.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

import minigrad as mg
from minigrad import ops
from minigrad.tensor import apply

try:  # the comparisons need PyTorch; the two hand-written tests at the end do not, and run without it
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed (make torch): nothing to compare with")

N = 3        # every value is N x N
LEAVES = 4   # leaves of N x N, and one bias of N
KINDS = ("add", "sub", "mul", "matmul", "tanh", "T", "reshape", "add_const", "mul_const", "bias", "sum_keep",
         "cat_halves", "twin", "leaf", "retain")

plain = st.tuples(st.sampled_from(KINDS), st.integers(0, 63), st.integers(0, 63))


def checkpointed(inner):
    """A checkpoint over a few steps, of one input or two, giving one output or two."""
    return st.tuples(st.just("checkpoint"), st.integers(0, 63), st.integers(0, 63), st.booleans(),
                     st.lists(inner, min_size=1, max_size=4))


steps = st.lists(plain | checkpointed(plain | checkpointed(plain)), min_size=1, max_size=10)
calls = st.lists(st.tuples(st.sampled_from(("fresh", "fresh", "again")), st.booleans(), st.booleans(),
                           st.sampled_from(("keep", "hold", "zero_none", "zero_fill"))), min_size=1, max_size=4)


class Twin(ops.Op):
    """a + b.T, whose backward hands on its g and a view of it, (g, g.T): an op may (NOTE [who owns a gradient])."""
    name = "twin"

    def forward(self, a, b):
        return a + b.T

    def backward(self, g):
        return g, g.T


class Engine:
    """The same program in minigrad or PyTorch: the few calls that differ."""

    def __init__(self, lib):
        self.lib = lib

    def tensor(self, array, requires_grad=False):
        if self.lib == "mg":
            return mg.tensor(array, dtype="float64", requires_grad=requires_grad)
        return torch.tensor(array, dtype=torch.float64, requires_grad=requires_grad)

    def twin(self, a, b):
        return apply(Twin, a, b) if self.lib == "mg" else a + b.T

    def cat(self, tensors):
        return (mg if self.lib == "mg" else torch).cat(tensors, 0)

    def checkpoint(self, function, *args):
        if self.lib == "mg":
            return mg.checkpoint(function, *args)
        return function(*args)  # PyTorch's plain run: the same gradients

    def numpy(self, t):
        return t.numpy() if self.lib == "mg" else t.detach().numpy()


def pick(values, i):
    """An operand: a leaf (or a checkpoint's argument) one time in three, so that leaves are used many times."""
    return values[i % min(LEAVES, len(values))] if i >= 42 else values[i % len(values)]


def run(engine, program, values, bias, retained, inside=False):
    """Apply the steps to the list `values` (appending each result); note the tensors that retain_grad()."""
    for step in program:
        kind, i, j = step[:3]
        a, b = pick(values, i), pick(values, j)
        if kind == "checkpoint":
            two_in, body = step[3], step[4]

            def function(*args, body=body, two_out=(i + j) % 2 == 1):
                local = list(args)
                run(engine, body, local, bias, retained, inside=True)
                return (local[-1], local[-2]) if two_out and len(local) > 1 else local[-1]
            out = engine.checkpoint(function, *((a, b) if two_in else (a,)))
            values.extend(out if isinstance(out, tuple) else (out,))
            continue
        if kind == "retain":
            a = values[-1] if i % 2 else a  # often the newest value, which the next step may hand on
            # retain_grad inside a checkpoint is its own subject (test_checkpoint); on its outputs it is here (where one
            # output is computed from another, NOTE [retain_grad on a checkpoint's output], found here)
            if not inside and not a.is_leaf:
                a.retain_grad()  # a second request on one tensor is allowed (PyTorch's too)
                if all(a is not r for r in retained):  # listed once: its .grad twice would "share memory" with itself
                    retained.append(a)
            continue
        values.append({
            "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "matmul": lambda: a @ b,
            "tanh": lambda: a.tanh(), "T": lambda: a.T, "reshape": lambda: a.reshape(N * N).reshape(N, N),
            "add_const": lambda: a + 1.5, "mul_const": lambda: a * 0.5, "bias": lambda: a + bias,
            "sum_keep": lambda: a.sum(0, keepdim=True) + b,
            "cat_halves": lambda: (lambda c: c[:N] * 0.75 + c[N:])(engine.cat([a, b])),
            "twin": lambda: engine.twin(a, b),
            "leaf": lambda: values[i % min(LEAVES, len(values))],  # a leaf (an argument) again: used and used
        }[kind]())


class Run:
    """One engine's leaves and its current graph."""

    def __init__(self, lib, leaf_arrays, bias_array):
        self.engine = Engine(lib)
        self.leaves = [self.engine.tensor(x, True) for x in leaf_arrays]
        self.bias = self.engine.tensor(bias_array, True)
        self.root = self.retained = None

    def forward(self, program):
        """Run the program; returns how many values it made (the leaves among them)."""
        self.values, self.retained = list(self.leaves), []
        run(self.engine, program, self.values, self.bias, self.retained)
        return len(self.values)

    def loss(self, weights):
        """The sum of value * weight over the values that have a weight: the root, N x N."""
        root = None
        for v, w in zip(self.values, weights):
            if w is None:
                continue
            term = v * self.engine.tensor(w)
            root = term if root is None else root + term
        self.root = root

    def backward(self, retain_graph, gradient):
        if gradient is None:
            self.root.sum().backward(retain_graph=retain_graph)
        else:  # minigrad's is the caller's tensor itself; PyTorch's a tensor of the same values
            self.root.backward(gradient=self.engine.tensor(gradient) if self.engine.lib == "torch" else gradient,
                               retain_graph=retain_graph)

    def grads(self):
        """Every gradient to compare: the leaves', the bias's, the retained tensors'."""
        return [t.grad for t in self.leaves + [self.bias] + self.retained]

    def zero_grad(self, set_to_none):
        for t in self.leaves + [self.bias]:
            if set_to_none:
                t.grad = None
            elif t.grad is not None:
                if self.engine.lib == "mg":
                    mg.optim.SGD([t], lr=0.1).zero_grad(set_to_none=False)
                else:
                    t.grad.zero_()


def check_against_torch(program, schedule, seed, in_loss=None):
    """Run program and schedule in both engines and compare after each backward call. in_loss: the values that make
    the loss (by index: the leaves first, then one per step), or None for a few drawn at random."""
    rng = np.random.default_rng(seed)
    leaf_arrays = [rng.uniform(-1, 1, (N, N)) for _ in range(LEAVES)]
    bias_array = rng.uniform(-1, 1, N)
    ours, theirs = Run("mg", leaf_arrays, bias_array), Run("torch", leaf_arrays, bias_array)
    kept = False  # the last graph was kept (retain_graph): "again" may backward through it once more
    held = None   # (leaf index, the .grad tensor the user holds, its values then)
    for k, (kind, retain_graph, with_gradient, between) in enumerate(schedule):
        if kind == "again" and not kept:
            kind = "fresh"
        if kind == "fresh":
            n_values = ours.forward(program)
            assert theirs.forward(program) == n_values
            # a few values make the loss, the last always: a leaf left out gets its first gradient from the program
            weights = [rng.uniform(-1, 1, (N, N)) if rng.random() < (0.15 if v < LEAVES else 0.35) else None
                       for v in range(n_values - 1)]
            weights.append(rng.uniform(-1, 1, (N, N)))
            if in_loss is not None:
                weights = [w if v in in_loss else None for v, w in enumerate(weights)]
            ours.loss(weights)
            theirs.loss(weights)
        gradient = mg.tensor(rng.uniform(-1, 1, (N, N)), dtype="float64") if with_gradient else None
        before = None if gradient is None else gradient.numpy().copy()
        ours.backward(retain_graph, gradient)
        theirs.backward(retain_graph, None if gradient is None else before)
        kept = retain_graph
        where = f"after backward call {k} ({kind}, retain_graph={retain_graph}, gradient={with_gradient})"
        for n, (g, want) in enumerate(zip(ours.grads(), theirs.grads())):
            assert (g is None) == (want is None), f"{where}: gradient {n} is {g} where PyTorch's is {want}"
            if g is not None:
                np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=1e-9, atol=1e-12,
                                           err_msg=f"{where}: gradient {n} (leaves, bias, then retained tensors)")
        arrays = [g.data for g in ours.grads() if g is not None]
        for x in range(len(arrays)):
            for y in range(x):
                assert not np.shares_memory(arrays[x], arrays[y]), f"{where}: two .grads share memory"
        if gradient is not None:
            np.testing.assert_array_equal(gradient.numpy(), before, err_msg=f"{where}: the caller's gradient changed")
        for t, x in zip(ours.leaves, leaf_arrays):
            np.testing.assert_array_equal(t.detach().numpy(), x, err_msg=f"{where}: a leaf's value changed")
        if held is not None:
            i, tensor, values = held
            if tensor is not ours.leaves[i].grad:  # no longer its .grad: what the user holds must not move
                np.testing.assert_array_equal(tensor.numpy(), values, err_msg=f"{where}: a .grad the user held "
                                                                             f"changed after it was replaced")
        held = None
        if between == "hold":
            i = k % LEAVES
            if ours.leaves[i].grad is not None:
                held = (i, ours.leaves[i].grad, ours.leaves[i].grad.numpy().copy())
        elif between in ("zero_none", "zero_fill"):
            ours.zero_grad(between == "zero_none")
            theirs.zero_grad(between == "zero_none")


@needs_torch
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, calls, st.integers(0, 2**16))
@example([("add", 0, 0), ("retain", 1, 0), ("retain", 1, 0)], [("fresh", False, False, "keep")], 0)  # retained twice
def test_every_gradient_is_pytorchs_however_arrays_are_handed_on(program, schedule, seed):
    check_against_torch(program, schedule, seed)


# Each way an array reaches two places, once by hand (values 0-3 are the leaves, then one per step, in order): leaf 0
# takes an array that a record will read later, and gets a second gradient before that record runs. Each of them
# fails when the rule forgets its case (a leaf sums in place into a .grad it took shared, the mark is not passed
# on through a pass-through, a retained tensor's g is not marked, a view beside its array is not seen).
ONCE = {
    "Add gives one array to a leaf and a record":
        ([("mul_const", 0, 0), ("tanh", 0, 0), ("add", 4, 0)], {5, 6}),
    "a pass-through hands on a shared array":
        ([("mul_const", 0, 0), ("tanh", 0, 0), ("add_const", 0, 0), ("add", 4, 6)], {5, 7}),
    "a retained tensor's gradient, handed on":
        ([("add_const", 0, 0), ("retain", 4, 0), ("mul_const", 4, 0)], {4, 5}),
    "an array and a view of it, to a leaf and a record":
        ([("mul_const", 1, 0), ("tanh", 0, 0), ("twin", 0, 4)], {5, 6}),
    "w + w, and the same array to a record":
        ([("mul_const", 0, 0), ("add", 0, 0), ("add", 5, 4)], {6}),
}


@needs_torch
@pytest.mark.parametrize("case", sorted(ONCE))
def test_each_way_an_array_is_shared(case):
    program, in_loss = ONCE[case]
    for seed in range(3):
        for schedule in ([("fresh", False, False, "keep")], [("fresh", True, False, "hold"), ("again", False, True,
                                                                                               "keep")]):
            check_against_torch(program, schedule, seed, in_loss)


def test_a_tied_weights_second_gradient_is_summed_in_place():
    """The figure the rule keeps (NOTE [who owns a gradient]): a weight used twice, each use's gradient an array its
    op made, needs one gradient buffer: the second sum goes into the first."""
    w = mg.randn(4, 4, requires_grad=True, dtype="float64")
    x = mg.randn(2, 4, dtype="float64")
    h = x @ w
    out = (h @ w).sum()
    out.backward()
    first = w.grad
    (x @ w).tanh().sum().backward()
    assert w.grad is first  # accumulated in place across backward calls too


def test_an_array_handed_to_a_leaf_and_a_record_is_not_summed_into_in_place():
    """Add gives one array to leaf w and to the record of w * 3: w takes it as its .grad, and its second gradient,
    from the product, must go into a new array while the product's record may still read the first."""
    w = mg.tensor([1.0, 2.0], requires_grad=True, dtype="float64")
    v = w * 3.0
    (w + v).sum().backward()  # w gets g, then 3 * g through the product
    np.testing.assert_array_equal(w.grad.numpy(), [4.0, 4.0])
    w.grad = None
    (w + w).sum().backward()  # one array to the same leaf twice
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0])
