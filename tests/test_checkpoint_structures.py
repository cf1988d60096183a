"""Checkpointed functions of every shape: what tests/test_checkpoint_programs.py and test_checkpoint_more_programs.py
do not generate (their functions take one tensor that requires grad and return one or two tensors).

Generated here: arguments that are leaves, computed tensors, constants (requires_grad=False), the same tensor twice,
lists, dicts, ints, strings and None, also as keyword arguments; tensors taken by closure (a weight, a constant);
results in tuples, lists and dicts with other values, an argument returned as it is, a view of an argument, a
detached tensor, an output twice; losses that use some outputs, one twice, or none; no_grad, detach() and recorded
in-place writes on values made inside; a checkpoint inside the function; a second backward (retain_graph); every
policy, early stop on and off; checkpoint_sequential with every number of segments, a dropout and autocast inside or
outside. Each checkpointed run gives the plain run's gradients bit for bit (or an error the checkpoint documents),
and, in float64, PyTorch's torch.utils.checkpoint (use_reentrant=False) gives the same gradients, to rounding.

NOTE [what the recompute reads from outside] (checkpoint/policies.py): a tensor taken by closure and written in place
between the forward and backward, or inside the function (which the recompute runs again), was read by the recompute
at its new values: gradients silently not the plain run's (nor the forward's), as PyTorch's checkpoint gives too. Now
refused, naming the op and the fix, where the recompute reads the values; the named tests below failed before.
"""
import contextlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minigrad as mg
from minigrad import functional as F
from minigrad.checkpoint import is_recomputing, set_checkpoint_early_stop

from on_device import to_host
from test_checkpoint_programs import POLICIES, as_policy, assert_as_plain

B, D = 3, 4
ARGS = ("x", "h", "c", "same", "list", "dict", "int", "str", "none")
STEPS = ("matmul", "tanh", "mul", "add_const", "exp", "detach", "no_grad", "inplace", "setitem", "nested", "sigmoid")
OUTS = ("last", "first", "arg", "view_of_arg", "detached", "int", "none", "again", "const")
REFUSED = "from outside the function"


def values(seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((B, D)), rng.standard_normal((D, D)) * 0.5, rng.standard_normal((B, D))


class Lib:
    """The few names the programs use, for minigrad (checkpointed or not) and for PyTorch."""

    def __init__(self, kind, policy=None):
        self.kind, self.policy = kind, policy
        if kind == "torch":
            import torch
            from torch.utils.checkpoint import checkpoint
            self.m, self.no_grad, self.is_tensor = torch, torch.no_grad, torch.is_tensor
            self.ck = lambda f, *a, **k: checkpoint(f, *a, use_reentrant=False, **k)
            self.tensor = lambda v, rg=False: torch.tensor(v, dtype=torch.float64, requires_grad=rg)
        else:
            self.m, self.no_grad, self.is_tensor = mg, mg.no_grad, lambda v: isinstance(v, mg.Tensor)
            self.ck = (lambda f, *a, **k: mg.checkpoint(f, *a, policy=policy, **k)) if kind == "ck" else \
                (lambda f, *a, **k: f(*a, **k))
            self.tensor = lambda v, rg=False: mg.tensor(v, dtype="float64", requires_grad=rg)


def build(spec, lib, x, w, c):
    """The program's arguments and function: `spec` = (args, kwargs, steps, outs)."""
    arg_kinds, kw_kinds, steps, outs = spec
    h = x * 1.5

    def make(kind, made):
        if kind == "same":
            return next((a for a in reversed(made) if lib.is_tensor(a)), x)
        return {"x": x, "h": h, "c": c, "list": [h, c, 2], "dict": {"t": x, "n": 0.5, "s": "s"}, "int": 3,
                "str": "s", "none": None}[kind]

    args = []
    for kind in arg_kinds:
        args.append(make(kind, args))
    kwargs = {f"k{i}": make(kind, args) for i, kind in enumerate(kw_kinds)}

    def tensors_in(v):
        if isinstance(v, dict):
            return [t for u in v.values() for t in tensors_in(u)]
        if isinstance(v, (list, tuple)):
            return [t for u in v for t in tensors_in(u)]
        return [v] if lib.is_tensor(v) else []

    def function(*a, **k):
        pool = tensors_in((a, k)) or [c]
        first = pool[0]
        for n, (kind, i, j) in enumerate(steps):
            p, q = pool[i % len(pool)], pool[j % len(pool)]
            if kind == "matmul":
                out = p @ w
            elif kind in ("tanh", "exp", "sigmoid"):
                out = getattr(p * 0.5, kind)()
            elif kind == "mul":
                out = p * q
            elif kind == "add_const":
                out = p + c  # a constant taken by closure
            elif kind == "write_c":  # the constant taken by closure, written in place: the recompute writes again
                with lib.no_grad():
                    c.mul_(1.5)
                out = (p * c).tanh()
            elif kind == "detach":
                out = p * q.detach()
            elif kind == "no_grad":
                with lib.no_grad():
                    s = (q * q).sum() + 1
                out = p / s
            elif kind == "inplace":  # recorded writes into a value made inside
                out = p * 1
                out.mul_(0.5)
                out.add_(q)
            elif kind == "setitem":
                out = p * 1
                out[0] = q[1] * 2
            else:  # nested: a checkpoint inside, of two arguments, one a keyword
                out = lib.ck(lambda u, v=None: (u @ w + c).tanh() * v, p, v=q)  # c by closure too
            pool.append(out)
        last, ints = pool[-1], 7
        result = []
        for kind in outs:
            result.append({"last": last, "first": first, "arg": pool[0], "view_of_arg": pool[0].transpose(0, 1),
                           "detached": last.detach() * 2, "int": ints, "none": None, "again": last,
                           "const": c}[kind])
        return {"out": tuple(result[:2]), "rest": result[2:], "n": len(result)} if len(result) > 2 else \
            tuple(result) if len(result) == 2 else result[0]

    return function, args, kwargs


def loss_of(result, lib, used):
    """A loss from the result's tensors: `used` picks them (by position, several times if repeated)."""
    flat = []

    def walk(v):
        if isinstance(v, dict):
            for u in v.values():
                walk(u)
        elif isinstance(v, (list, tuple)):
            for u in v:
                walk(u)
        elif lib.is_tensor(v) and v.dtype == lib.m.float64:
            flat.append(v)

    walk(result)
    terms = [flat[k % len(flat)] for k in used] if flat else []
    loss = None
    for k, t in enumerate(terms):
        term = (t * t).sum() * (k + 1) if t.dim() == 2 and t.shape[0] == B else (t.sin()).sum()
        loss = term if loss is None else loss + term
    return loss


def gradients(spec, kind, policy="none", used=(0,), twice=False, early_stop=True, write=False):
    xv, wv, cv = values()
    lib = Lib(kind, as_policy(policy) if kind == "ck" else None)
    x, w, c = lib.tensor(xv, True), lib.tensor(wv, True), lib.tensor(cv)
    try:
        with set_checkpoint_early_stop(early_stop):
            function, args, kwargs = build(spec, lib, x, w, c)
            loss = loss_of(lib.ck(function, *args, **kwargs), lib, used)
            if loss is None or not loss.requires_grad:
                return "no grad"
            if write:  # between the forward and backward, as an update of a frozen tensor would
                with lib.no_grad():
                    c.add_(0.5)
            loss.backward(retain_graph=twice)
            if twice:
                if write:
                    with lib.no_grad():
                        c.add_(0.5)
                loss.backward()
    except (RuntimeError, ValueError) as e:
        return e
    return [None if t.grad is None else (to_host(t.grad) if kind != "torch" else t.grad.numpy()).copy()
            for t in (x, w)]


def shapes(steps):
    return st.tuples(st.lists(st.sampled_from(ARGS), min_size=1, max_size=3),
                     st.lists(st.sampled_from(ARGS), max_size=2),
                     st.lists(st.tuples(st.sampled_from(steps), st.integers(0, 7), st.integers(0, 7)), min_size=1,
                              max_size=4),
                     st.lists(st.sampled_from(OUTS), min_size=1, max_size=4).map(
                         lambda outs: outs if set(outs) & {"last", "first", "arg", "view_of_arg"} else ["last"] + outs))


specs = shapes(STEPS)
used_ = st.lists(st.integers(0, 5), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(spec=specs, policy=st.sampled_from(sorted(POLICIES)), used=used_, twice=st.booleans(),
       early_stop=st.booleans())
def test_a_checkpointed_function_of_any_shape_gives_the_plain_gradients(spec, policy, used, twice, early_stop):
    want = gradients(spec, "plain", used=used, twice=twice)
    assert_as_plain(gradients(spec, "ck", policy, used, twice, early_stop), want, names="x, w")


@settings(max_examples=40, deadline=None)
@given(spec=shapes(STEPS + ("write_c",) * 3), policy=st.sampled_from(sorted(POLICIES)), used=used_,
       twice=st.booleans(), early_stop=st.booleans(), write=st.booleans())
def test_a_tensor_from_outside_written_gives_the_plain_gradients_or_is_refused(spec, policy, used, twice, early_stop,
                                                                              write):
    """The constant taken by closure written inside the function and between the forward and the backwards: the
    plain run's gradients, or a refusal (NOTE [what the recompute reads from outside]; or the version check of what
    an op inside read, which a checkpoint makes for every op, also those the loss does not reach); never other
    gradients."""
    want = gradients(spec, "plain", used=used, twice=twice, write=write)
    got = gradients(spec, "ck", policy, used, twice, early_stop, write)
    if not (isinstance(got, RuntimeError) and any(s in str(got) for s in (REFUSED, "inside the checkpointed"))
            and not isinstance(want, Exception)):
        assert_as_plain(got, want, names="x, w")


@pytest.mark.torch
@settings(max_examples=15, deadline=None)
@given(spec=specs, used=used_, twice=st.booleans())
def test_a_checkpointed_function_of_any_shape_against_torch(spec, used, twice):
    pytest.importorskip("torch")
    got, want = gradients(spec, "ck", used=used, twice=twice), gradients(spec, "torch", used=used, twice=twice)
    if isinstance(want, Exception):
        assert isinstance(got, Exception), f"PyTorch raised ({want}), minigrad did not"
        return
    if isinstance(got, Exception):  # minigrad refuses more (a write into an argument); never a plain-run gradient
        assert isinstance(got, RuntimeError), got
        return
    assert got == want if isinstance(want, str) else all(
        (g is None) == (v is None) and (g is None or np.allclose(g, v, rtol=1e-10, atol=1e-12))
        for g, v in zip(got, want)), (got, want)


# ----------------------------------------------------------------------------- chains, dropout and autocast

def chain(w, kind):
    fns = [lambda a: a @ w, lambda a: a.tanh(), lambda a: F.dropout(a, 0.3), lambda a: a @ w.T, lambda a: a.exp() * 0.1,
           lambda a: (a * a).sigmoid()]
    if kind == "autocast_inside":
        def amp(a):
            with mg.autocast(mg.default_device()):
                return (a @ w).float()
        fns[3] = amp
    return fns


@pytest.mark.parametrize("segments", [1, 2, 3, 4, 6, "sqrt"])
@pytest.mark.parametrize("kind", ["plain", "autocast_outside", "autocast_inside"])
def test_checkpoint_sequential_with_every_segment_count_dropout_and_autocast(segments, kind):
    """Bit for bit the plain chain, and the generator left where the plain run leaves it."""
    xv, wv, _ = values(2)
    got = []
    for ckpt in (False, True):
        x, w = mg.tensor(xv, dtype="float32", requires_grad=True), mg.tensor(wv, dtype="float32", requires_grad=True)
        mg.manual_seed(5)
        fns = chain(w, kind)
        with mg.autocast(mg.default_device()) if kind == "autocast_outside" else contextlib.nullcontext():
            if ckpt:
                y = mg.checkpoint_sequential(fns, segments, x, policy=POLICIES["dots"] if segments == 2 else None)
            else:
                y = x
                for f in fns:
                    y = f(y)
            loss = (y.float() ** 2).sum()
        loss.backward()
        got.append([to_host(x.grad), to_host(w.grad), mg.get_rng_state()])
    for a, b in zip(*got[:1], *got[1:]):
        assert (a == b) if isinstance(a, (tuple, int)) else np.array_equal(a, b)
    assert got[0][2] == got[1][2]


# ----------------------------------------------------------------------------- NOTE [what the recompute reads ...]

def closure_program(kind, ck, policy):
    """x and w (leaves), and a constant c taken by closure (or a parameter, or a tensor made from c) that is written
    in place where the program says; returns the gradients of x and w."""
    xv, wv, cv = values(3)
    x, w = mg.tensor(xv, requires_grad=True), mg.tensor(wv, requires_grad=True)
    c = mg.tensor(cv)
    k = c * 2  # a non-leaf constant
    run = (lambda f, *a: mg.checkpoint(f, *a, policy=POLICIES[policy])) if ck else (lambda f, *a: f(*a))

    def write(t):
        with mg.no_grad():
            t.add_(1.0)

    def f(a):
        if kind == "written inside, before the read":
            write(c)
        if kind == "written through detach() inside":
            c.detach().mul_(2)
        if kind == "written through a view inside":
            with mg.no_grad():
                c[0] += 1
        if kind == "given another array inside (.data = ...)":
            c.data = c.data + 1  # no version counted: the array is another
        if kind == "a parameter read by an add, written after":
            h = (a + w[0]).tanh()
        elif kind == "a mask read outside the ops, written after":
            h = (a * (c > 0)).tanh()
        elif kind == "a non-leaf constant, written after":
            h = (a + k).tanh()
        elif kind == "read by a nested checkpoint, written after":
            h = mg.checkpoint(lambda u: (u + c).tanh(), a * 1) if ck else (a * 1 + c).tanh()
        else:
            h = (a + c).tanh()
        if kind == "written inside, after the read":
            write(c)
        # the tanh runs again in the recompute: its output is read by the matmul (by the mul, where w is written)
        return h * 3 if kind == "a parameter read by an add, written after" else h @ w

    y = run(f, x)
    if kind == "retain_graph, written between the backwards":
        (y * y).sum().backward(retain_graph=True)
        write(c)
        (y * y).sum().backward()
        return [to_host(x.grad), to_host(w.grad)]
    if kind == "a parameter read by an add, written after":
        with mg.no_grad():
            w[0] += 1  # as an optimizer's step would, before backward
    elif kind == "a non-leaf constant, written after":
        write(k)
    elif kind == "given another array after (.data = ...)":
        c.data = c.data * 2 + 1
    elif "written after" in kind:
        write(c)
    (y * y).sum().backward()
    return [to_host(x.grad), to_host(w.grad)]


CLOSURE_CASES = ["a constant, written after", "a non-leaf constant, written after",
                 "a parameter read by an add, written after", "a mask read outside the ops, written after",
                 "read by a nested checkpoint, written after", "retain_graph, written between the backwards",
                 "written inside, after the read", "written inside, before the read", "written through detach() inside",
                 "written through a view inside", "given another array after (.data = ...)",
                 "given another array inside (.data = ...)"]


@pytest.mark.parametrize("policy", ["none", "dots"])
@pytest.mark.parametrize("kind", CLOSURE_CASES)
def test_a_tensor_from_outside_written_before_the_recompute_reads_it_is_refused(kind, policy):
    """Each gave gradients that were not the plain run's (by up to 10, silently; PyTorch's checkpoint gives the same
    wrong ones): the recompute read the tensor's new values."""
    plain = closure_program(kind, False, policy)
    assert all(np.all(np.isfinite(g)) for g in plain)  # the plain run works: its records keep what they read
    with pytest.raises(RuntimeError, match=REFUSED) as e:
        closure_program(kind, True, policy)
    assert "recomputing 'f' in backward" in str(e.value) and "is_recomputing()" in str(e.value)


def test_what_the_recompute_does_not_read_may_change_and_what_is_made_inside_is_made_again():
    """Not refused where the recompute does not read the values (the add is replayed, not run: its output is the
    tanh's input, and the tanh's output is the checkpoint's), nor a tensor made inside and written after a read
    (the recompute makes a new one); with early stop off the add runs again, and the write is refused."""
    xv, wv, cv = values(4)

    def grads(ck, early_stop=True):
        x, c = mg.tensor(xv, requires_grad=True), mg.tensor(cv)

        def f(a):
            m = mg.ones(B, D, dtype="float64")
            h = a + m  # the add keeps nothing: the plain run's backward does not mind the write
            with mg.no_grad():
                m.mul_(3)  # made inside, read, then written: made again in the recompute
            return (h + c).tanh()

        with set_checkpoint_early_stop(early_stop):
            y = mg.checkpoint(f, x) if ck else f(x)
        with mg.no_grad():
            c.add_(1)
        (y * y).sum().backward()
        return [to_host(x.grad)]

    want = grads(False)
    assert np.array_equal(grads(True)[0], want[0])
    with pytest.raises(RuntimeError, match=REFUSED):
        grads(True, early_stop=False)


def test_batchnorm_skipping_its_write_in_the_recompute_is_not_refused():
    """The fix the error names: BatchNorm writes its running statistics in the forward only (is_recomputing())."""
    xv, _, _ = values(5)
    buf = mg.zeros(D, dtype="float64")

    def f(a):
        if not is_recomputing():
            with mg.no_grad():
                buf.add_(a.detach().mean(0))
        return (a * buf + a).tanh()

    x = mg.tensor(xv, requires_grad=True)
    (mg.checkpoint(f, x) ** 2).sum().backward()
    x2 = mg.tensor(xv, requires_grad=True)
    buf2 = buf * 1
    ((x2 * buf2 + x2).tanh() ** 2).sum().backward()
    assert np.array_equal(to_host(x.grad), to_host(x2.grad))
