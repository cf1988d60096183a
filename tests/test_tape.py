"""The tape's semantics: recording, walking backwards, accumulating, releasing, and what is (not) kept.

Per-op gradient formulas are checked elsewhere (test_gradcheck_ops.py); here the ops are only
vehicles for the tape's behaviour.
"""
import sys
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import ops
from minigrad.backend import (broadcast_to, index_add, max_rows, mean_rows, ones_like, reduce_sum, sum_leading,
                              sum_rows)
from minigrad.tensor import Tensor


def _records(root):
    """Every record reachable from root's record (depth-first over op.next)."""
    seen, stack, out = set(), [root.grad_fn], []
    while stack:
        op = stack.pop()
        if op is None or id(op) in seen:
            continue
        seen.add(id(op))
        out.append(op)
        stack.extend(n for n in op.next if isinstance(n, ops.Op))
    return out


# ----------------------------------------------------------------------------- long chains

def test_chain_of_20000_muls_backpropagates_without_recursion():
    x0 = mg.tensor([0.5, -0.25, 2.0], dtype="float64", requires_grad=True)
    x = x0
    for _ in range(20_000):
        x = x * 1.0001
    loss = x.sum()
    assert len(_records(loss)) == 20_000 + 1  # one record per mul, plus the sum
    loss.backward()
    np.testing.assert_allclose(x0.grad.numpy(), np.full(3, 1.0001 ** 20_000), rtol=1e-9)


def test_chain_of_20000_tanh_matches_numpy_reference():
    x0 = mg.tensor([0.5, -1.5], dtype="float64", requires_grad=True)
    x = x0
    for _ in range(20_000):
        x = x.tanh()
    x.backward(gradient=mg.ones(2, dtype="float64"))
    v, g = np.array([0.5, -1.5]), np.ones(2)
    for _ in range(20_000):
        v = np.tanh(v)
        g = g * (1 - v * v)
    np.testing.assert_allclose(x.detach().numpy(), v, rtol=1e-12)
    np.testing.assert_allclose(x0.grad.numpy(), g, rtol=1e-9)


def test_dropping_a_long_unused_chain_does_not_crash():
    x = mg.tensor([0.5], requires_grad=True)
    for _ in range(20_000):
        x = x.tanh()
    del x  # deallocating 20,000 nested records must not overflow the C stack


# ----------------------------------------------------------------------------- accumulation

def test_gradients_accumulate_across_two_backward_calls():
    x = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = mg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    (x * w).sum().backward()
    first_x, first_w = x.grad.numpy().copy(), w.grad.numpy().copy()
    np.testing.assert_array_equal(first_x, [0.5, -1.0, 2.0])
    np.testing.assert_array_equal(first_w, [1.0, 2.0, 3.0])
    (x * w).sum().backward()  # a fresh forward: a new graph
    np.testing.assert_array_equal(x.grad.numpy(), 2 * first_x)
    np.testing.assert_array_equal(w.grad.numpy(), 2 * first_w)


def test_accumulation_adds_into_the_same_buffer():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    (x * 3.0).sum().backward()
    buf = x.grad
    (x * x).sum().backward()
    assert x.grad is buf  # added in place, not replaced
    assert not x.grad.requires_grad and x.grad.grad_fn is None
    np.testing.assert_array_equal(x.grad.numpy(), [3.0 + 2.0, 3.0 + 4.0])


def test_setting_grad_to_none_restarts_accumulation():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    (x * 3.0).sum().backward()
    x.grad = None
    (x * 5.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])


# ----------------------------------------------------------------------------- leaves, intermediates, retain_grad

def test_leaves_keep_grad_intermediates_do_not():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3.0
    y = (h * h).sum()
    y.backward()
    assert x.is_leaf and not h.is_leaf and not y.is_leaf
    np.testing.assert_allclose(x.grad.numpy(), 18 * np.array([1.0, 2.0]))
    assert h.grad is None
    assert y.grad is None


def test_retain_grad_keeps_an_intermediate_gradient():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3.0
    h.retain_grad()
    y = (h * h).sum()
    y.retain_grad()
    y.backward()
    np.testing.assert_allclose(h.grad.numpy(), 2 * np.array([3.0, 6.0]))  # dy/dh = 2h
    np.testing.assert_allclose(y.grad.numpy(), 1.0)
    np.testing.assert_allclose(x.grad.numpy(), 18 * np.array([1.0, 2.0]))
    assert h.grad.shape == h.shape and h.grad.dtype == h.dtype


def test_retain_grad_on_an_intermediate_used_twice_gets_the_sum():
    x = mg.tensor([1.0, -2.0], requires_grad=True)
    h = x * 2.0
    h.retain_grad()
    (h * h + h).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.detach().numpy() + 1)
    np.testing.assert_allclose(x.grad.numpy(), 2 * (2 * h.detach().numpy() + 1))


def test_retain_grad_on_a_leaf_is_harmless():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    x.retain_grad()
    (x * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


# ----------------------------------------------------------------------------- releasing saved arrays

def test_saved_arrays_are_released_after_backward():
    x = mg.randn(4, requires_grad=True)
    h = x.exp()
    loss = (h * h).sum()
    recs = _records(loss)
    assert any(r.saved for r in recs)  # exp and mul saved something
    assert not any(r.released for r in recs)
    kept = {r: any(a is not None for a in r.saved) for r in recs}
    loss.backward()
    for r in recs:  # what kept arrays is released; a record that kept none (sum) could run again
        assert r.saved == () and r.released == kept[r], r.name
    assert [r.name for r in recs if r.released] == ["mul", "exp"]


def test_second_backward_through_a_released_graph_raises():
    x = mg.randn(3, requires_grad=True)
    loss = (x * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()


def test_second_backward_through_a_shared_released_subgraph_raises():
    x = mg.randn(3, requires_grad=True)
    h = x.exp()
    h.sum().backward()
    with pytest.raises(RuntimeError, match=r"(?s)second time.*retain_graph=True"):
        (h * 2.0).sum().backward()  # new records on top, but exp's saved output is gone


def test_retain_graph_allows_a_second_backward_that_doubles_the_grads():
    x = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = mg.tensor([2.0, -1.0, 0.5], requires_grad=True)
    loss = (x * w).exp().sum()
    loss.backward(retain_graph=True)
    gx, gw = x.grad.numpy().copy(), w.grad.numpy().copy()
    assert loss.grad_fn.saved != () or loss.grad_fn.name == "sum"
    assert not any(r.released for r in _records(loss))
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * gx, rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), 2 * gw, rtol=1e-6)
    e = np.exp(np.array([2.0, -2.0, 1.5]))
    np.testing.assert_allclose(gx, np.array([2.0, -1.0, 0.5]) * e, rtol=1e-6)
    # the second backward (no retain_graph) released everything that kept arrays
    assert all(r.saved == () for r in _records(loss))
    assert {r.name for r in _records(loss) if r.released} == {"mul", "exp"}


def test_saved_array_lives_until_backward_then_is_freed():
    x = mg.randn(1000, requires_grad=True)
    h = x.exp()  # exp saves its output
    loss = h.sum()
    arr = h.data
    del h
    base = sys.getrefcount(arr)
    loss.backward()
    assert sys.getrefcount(arr) == base - 1  # the record's reference is gone
    assert sys.getrefcount(arr) == 2  # only `arr` (and getrefcount's argument) hold it now


# ----------------------------------------------------------------------------- what is computed and saved

def test_no_gradient_for_inputs_that_do_not_require_grad():
    x = mg.randn(3, 4)
    w = mg.randn(4, 2, requires_grad=True)
    out = x @ w
    out.sum().backward()
    assert x.grad is None
    assert w.grad is not None and w.grad.shape == (4, 2)
    np.testing.assert_allclose(w.grad.numpy(), np.repeat(x.numpy().sum(0)[:, None], 2, axis=1), rtol=1e-6)


def test_matmul_saves_only_what_the_needed_gradients_use():
    x = mg.randn(3, 4)
    w = mg.randn(4, 2, requires_grad=True)
    out = x @ w
    assert out.grad_fn.needs_input_grad == (False, True)
    a, b = out.grad_fn.saved
    assert a is x.data  # dW = x^T g needs x
    assert b is None  # dx is not needed, so w is not kept
    assert out.grad_fn.next[0] is None and out.grad_fn.next[1] is w

    x2 = mg.randn(3, 4, requires_grad=True)
    w2 = mg.randn(4, 2)
    a, b = (x2 @ w2).grad_fn.saved
    assert a is None and b is w2.data


def test_linear_saves_only_the_needed_array():
    x = mg.randn(5, 4)
    w = mg.randn(3, 4, requires_grad=True)
    b = mg.randn(3, requires_grad=True)
    out = F.linear(x, w, b)
    assert out.grad_fn.needs_input_grad == (False, True, True)
    sx, sw = out.grad_fn.saved
    assert sx is x.data and sw is None
    out.sum().backward()
    assert x.grad is None
    np.testing.assert_allclose(w.grad.numpy(), np.ones((5, 3)).T @ x.numpy(), rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), np.full(3, 5.0))

    x2 = mg.randn(5, 4, requires_grad=True)
    w2 = mg.randn(3, 4)
    out2 = F.linear(x2, w2)
    sx, sw = out2.grad_fn.saved
    assert sx is None and sw is w2.data
    out2.sum().backward()
    assert w2.grad is None
    np.testing.assert_allclose(x2.grad.numpy(), np.ones((5, 3)) @ w2.numpy(), rtol=1e-6)


def test_mul_by_constant_saves_no_copy_of_the_input():
    x = mg.randn(3, requires_grad=True)
    c = mg.randn(3)
    out = x * c
    sa, sb = out.grad_fn.saved
    assert sa is None and sb is c.data


def test_nothing_is_recorded_when_no_input_requires_grad():
    a, b = mg.randn(3), mg.randn(3)
    out = (a * b).exp()
    assert out.grad_fn is None and not out.requires_grad and out.is_leaf


# ----------------------------------------------------------------------------- grad mode

def test_no_grad_records_nothing():
    x = mg.randn(3, requires_grad=True)
    with mg.no_grad():
        assert not mg.is_grad_enabled()
        y = (x * 2.0).exp()
    assert mg.is_grad_enabled()
    assert y.grad_fn is None and not y.requires_grad
    with pytest.raises(RuntimeError):
        y.sum().backward()
    assert x.grad is None


def test_no_grad_as_a_decorator():
    x = mg.randn(3, requires_grad=True)

    @mg.no_grad()
    def f(t):
        assert not mg.is_grad_enabled()
        return t * 2.0

    y = f(x)
    assert y.grad_fn is None and not y.requires_grad
    assert mg.is_grad_enabled()
    z = x * 2.0
    assert z.requires_grad and z.grad_fn is not None


def test_no_grad_and_enable_grad_nest():
    x = mg.randn(3, requires_grad=True)
    with mg.no_grad():
        a = x * 2.0
        with mg.enable_grad():
            assert mg.is_grad_enabled()
            b = x * 2.0
            with mg.no_grad():
                c = x * 2.0
            assert mg.is_grad_enabled()
        assert not mg.is_grad_enabled()
        d = x * 2.0
    assert mg.is_grad_enabled()
    assert not a.requires_grad and b.requires_grad and not c.requires_grad and not d.requires_grad
    b.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_enable_grad_as_a_decorator_inside_no_grad():
    x = mg.randn(3, requires_grad=True)

    @mg.enable_grad()
    def f(t):
        return t * 3.0

    with mg.no_grad():
        y = f(x)
        assert not mg.is_grad_enabled()
    assert y.requires_grad and y.grad_fn is not None


def test_no_grad_decorator_keeps_the_functions_name_and_docstring():
    @mg.no_grad()
    def sample(n):
        """Draw n samples."""
        return n

    assert sample.__wrapped__.__name__ == "sample"
    assert sample.__name__ == "sample"
    assert sample.__doc__ == "Draw n samples."


def test_grad_mode_is_restored_after_an_exception():
    with pytest.raises(ZeroDivisionError):
        with mg.no_grad():
            1 / 0
    assert mg.is_grad_enabled()


# ----------------------------------------------------------------------------- detach, requires_grad_

def test_detach_shares_data_but_cuts_the_tape():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3.0
    d = h.detach()
    assert d.data is h.data  # same array, no copy
    assert d.grad_fn is None and not d.requires_grad and d.is_leaf
    d.data[0] = 100.0
    assert h.data[0] == 100.0  # shared
    w = mg.tensor([1.0, 1.0], requires_grad=True)
    (d * w + h).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])  # only through h, not through d
    np.testing.assert_array_equal(w.grad.numpy(), [100.0, 6.0])
    assert d.grad is None


def test_requires_grad_():
    x = mg.tensor([1.0, 2.0])
    assert not x.requires_grad
    assert x.requires_grad_() is x
    assert x.requires_grad and x.is_leaf
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    x.requires_grad_(False)
    assert not x.requires_grad
    assert (x * x).grad_fn is None
    x.requires_grad = True
    assert x.requires_grad


def test_requires_grad_false_on_an_op_output_is_refused():
    x = mg.randn(2, requires_grad=True)
    h = x * 2.0
    with pytest.raises(RuntimeError, match="detach"):
        h.requires_grad_(False)


# ----------------------------------------------------------------------------- graph shapes

def test_tensor_used_twice_gets_the_summed_gradient():
    x = mg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, -4.0, 6.0])
    x.grad = None
    (x + x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    x.grad = None
    ((x + x) * 3.0).sum().backward()  # the upstream gradient is a fresh array, not the implied ones
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0, 6.0])


def test_diamond_graph():
    x = mg.tensor([0.5, -1.0], requires_grad=True)
    a = x * 2.0
    b = x.exp()
    c = a * b  # both paths meet here
    c.sum().backward()
    xn = np.array([0.5, -1.0])
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(xn) + 2 * xn * np.exp(xn), rtol=1e-6)


def test_diamond_through_an_intermediate_used_by_two_ops():
    x = mg.tensor([0.3, 0.7], dtype="float64", requires_grad=True)
    h = x.tanh()
    y = (h * 2.0 + h.exp()).sum()
    y.backward()
    t = np.tanh([0.3, 0.7])
    np.testing.assert_allclose(x.grad.numpy(), (2 + np.exp(t)) * (1 - t * t), rtol=1e-12)


def test_leaf_used_directly_and_through_two_branches():
    # the Add hands one gradient array to the leaf x and to u's record; x then receives v's
    # contribution before u's record has used that array, which must not change under it
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    u = x * 3.0
    v = x * 5.0
    out = ((x + u) * 2.0 + v).sum()  # d/dx = (1 + 3) * 2 + 5 = 13
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [13.0, 13.0])


def test_leaf_used_directly_and_through_two_branches_twice_with_retain_graph():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    u = x * 3.0
    v = x * 5.0
    out = ((x + u) * 2.0 + v).sum()
    out.backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad.numpy(), [13.0, 13.0])
    out.backward()  # the second pass adds into the .grad the first pass left
    np.testing.assert_array_equal(x.grad.numpy(), [26.0, 26.0])


def test_residual_style_graph_with_a_leaf():
    # h = x + f(x), the pattern of a residual stream whose input is a leaf; x also feeds another op
    x = mg.tensor([0.2, -0.4], dtype="float64", requires_grad=True)
    w = mg.tensor([1.5, 0.5], dtype="float64", requires_grad=True)
    u = x.tanh()
    v = x * w
    h = x + u
    out = (h * 3.0 + v).sum()
    out.backward()
    xn, wn = np.array([0.2, -0.4]), np.array([1.5, 0.5])
    t = np.tanh(xn)
    np.testing.assert_allclose(x.grad.numpy(), 3 * (1 + (1 - t * t)) + wn, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), xn, rtol=1e-12)


def test_backward_with_explicit_gradient_for_non_scalar_output():
    x = mg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x * x
    g = mg.tensor([[1.0, 0.0], [0.5, -1.0]])
    y.backward(gradient=g)
    np.testing.assert_array_equal(x.grad.numpy(), 2 * x.detach().numpy() * g.numpy())
    assert g.numpy().tolist() == [[1.0, 0.0], [0.5, -1.0]]  # the given gradient is not modified


def test_explicit_gradient_is_not_aliased_into_grad():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    g = mg.tensor([3.0, 4.0])
    (x + 0.0).backward(gradient=g)
    (x + 0.0).backward(gradient=g)  # accumulation must not write into g
    np.testing.assert_array_equal(g.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 8.0])


def test_backward_on_a_leaf_with_gradient():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    g = mg.tensor([0.5, 0.25])
    x.backward(gradient=g)
    np.testing.assert_array_equal(x.grad.numpy(), [0.5, 0.25])
    assert x.grad.data is not g.data


def test_backward_on_a_scalar_leaf():
    x = mg.tensor(3.0, requires_grad=True)
    x.backward()
    assert x.grad.shape == () and x.grad.item() == 1.0


def test_records_point_only_at_records_leaves_or_none():
    x = mg.randn(3, 4, requires_grad=True)
    c = mg.randn(3, 4)  # a constant: no edge
    w = mg.randn(4, 2, requires_grad=True)
    h = (x * c).tanh()
    out = (h @ w).relu().sum()
    for rec in _records(out):
        assert isinstance(rec, ops.Op)
        for n in rec.next:
            assert n is None or isinstance(n, ops.Op) or (isinstance(n, Tensor) and n.is_leaf and n.requires_grad), n
    leaves = {id(n) for rec in _records(out) for n in rec.next if isinstance(n, Tensor)}
    assert leaves == {id(x), id(w)}
    assert id(h) not in leaves


def test_intermediate_array_is_freed_when_the_user_drops_its_tensor():
    x = mg.randn(1000, requires_grad=True)
    h = x * 2.0  # mul by a constant saves only the constant, not x
    y = h.tanh()  # tanh saves its output, not its input h
    loss = y.sum()
    arr = h.data
    assert all(s is not arr for rec in _records(loss) for s in rec.saved)
    del h
    assert sys.getrefcount(arr) == 2  # nothing but `arr` (and getrefcount's argument) holds it
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - y.detach().numpy() ** 2), rtol=1e-5)


def test_two_leaves_with_the_same_upstream_gradient_do_not_share_grad():
    for build in (lambda a, b: (a + b).sum(),
                  lambda a, b: ((a + b) * 2.0).sum(),
                  lambda a, b: (a - b).sum()):
        a = mg.tensor([1.0, 2.0], requires_grad=True)
        b = mg.tensor([3.0, 4.0], requires_grad=True)
        build(a, b).backward()
        before = b.grad.numpy().copy()
        assert a.grad.data is not b.grad.data
        a.grad.data[...] = 123.0
        np.testing.assert_array_equal(b.grad.numpy(), before)


def test_two_leaves_with_an_explicit_gradient_do_not_share_grad():
    a = mg.tensor([1.0, 2.0], requires_grad=True)
    b = mg.tensor([3.0, 4.0], requires_grad=True)
    g = mg.tensor([1.0, -1.0])
    (a + b).backward(gradient=g)
    a.grad.data[...] = 0.0
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, -1.0])
    np.testing.assert_array_equal(g.numpy(), [1.0, -1.0])


def test_a_checkpoints_recompute_stops_holding_its_gradients_when_it_ends(monkeypatch):
    """NOTE [who owns a gradient]: a backward's `taken` holds arrays (no weak references). A checkpoint's recompute
    runs inside the outer backward and notes the gradients it starts from; when it returns it must drop them, or
    they would live until the whole backward ends (the peak the ledger measures would grow)."""
    import importlib
    tape, ckpt = importlib.import_module("minigrad.tensor"), importlib.import_module("minigrad.checkpoint.segment")
    seen = []

    def watched(roots, gradients):
        before = dict(tape._on.taken)
        tape.backward_from(roots, gradients)
        seen.append((all(id(g) not in tape._on.taken or id(g) in before for g in gradients), len(gradients)))
    monkeypatch.setattr(ckpt, "backward_from", watched)
    x = mg.randn(3, 4, requires_grad=True, dtype="float64")
    w = mg.randn(4, 4, requires_grad=True, dtype="float64")
    y = mg.checkpoint(lambda a: (a @ w).tanh() @ w, x)
    (y * y).sum().backward()
    assert seen and all(ok and n for ok, n in seen)
    x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
    (((x2 @ w2).tanh() @ w2) ** 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), x2.grad.numpy())  # and the gradients are the plain ones
    np.testing.assert_array_equal(w.grad.numpy(), w2.grad.numpy())


def test_a_checkpoint_whose_outputs_get_one_gradient_array():
    """Add hands one gradient array to both of its inputs: here, both outputs of one checkpoint. Its recompute
    starts from that array twice, notes it once and gives it back once."""
    x = mg.randn(3, 4, requires_grad=True, dtype="float64")
    a, b = mg.checkpoint(lambda t: (t.tanh(), t * 2.0), x)
    (a + b).sum().backward()
    x2 = x.detach().requires_grad_()
    (x2.tanh() + x2 * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), x2.grad.numpy())


def test_grad_of_a_broadcast_leaf_has_the_leafs_shape():
    x = mg.randn(4, 3)
    b = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    c = mg.tensor([[0.5], [1.0], [1.5], [2.0]], requires_grad=True)
    s = mg.tensor(2.0, requires_grad=True)
    row = mg.randn(1, 3, requires_grad=True)
    out = ((x + b) * c * s + row).sum()
    out.backward()
    assert b.grad.shape == (3,) and c.grad.shape == (4, 1) and s.grad.shape == () and row.grad.shape == (1, 3)
    xn = x.numpy()
    np.testing.assert_allclose(b.grad.numpy(), np.full(3, (0.5 + 1.0 + 1.5 + 2.0) * 2.0), rtol=1e-6)
    np.testing.assert_allclose(c.grad.numpy(), ((xn + [1.0, 2.0, 3.0]) * 2.0).sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(s.grad.numpy(), ((xn + [1.0, 2.0, 3.0]) * c.detach().numpy()).sum(), rtol=1e-5)
    np.testing.assert_array_equal(row.grad.numpy(), np.full((1, 3), 4.0))


def test_a_losss_implied_gradient_and_its_broadcast_are_numpys_made_directly():
    """NOTE [a broadcast scalar] (backend/rows.py): the same arrays as np.ones_like's and np.broadcast_to's."""
    for array in (np.zeros((), np.float32), np.zeros((1, 1)), np.zeros((2, 3), np.float16)):
        ones = ones_like(array)
        assert ones.shape == array.shape and ones.dtype == array.dtype and ones.base is None
        assert ones.flags.writeable and ones.flags.c_contiguous and (ones == 1).all()
    for array, shape in [(np.array(2.5, np.float32), (3, 4)), (np.ones((1, 1)), (2, 5)), (np.ones(1), (0, 2)),
                         (np.arange(3.0), (2, 3))]:
        ours, numpys = broadcast_to(array, shape), np.broadcast_to(array, shape)
        assert ours.shape == numpys.shape and ours.strides == numpys.strides and ours.dtype == numpys.dtype
        assert ours.base is array and not ours.flags.writeable
        np.testing.assert_array_equal(ours, numpys)
    x = mg.randn(3, 4, requires_grad=True)
    x.mean().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 4), 1 / 12, np.float32))
    assert x.grad.numpy().flags.writeable and x.grad.numpy().base is None  # .grad owns a copy, not the view


def test_reduce_sum_is_ndarray_sum():
    """backend.reduce_sum calls np.add.reduce where ndarray.sum goes through a Python wrapper: the same results,
    values, dtypes (small integers and bools summed as int64) and shapes, and a scalar for a full reduction."""
    for array in (np.arange(12, dtype=np.float32).reshape(3, 4) / 7, np.arange(6, dtype=np.int8).reshape(2, 3),
                  np.array([[True, False, True]]), np.ones((2, 0, 3), np.float16)):
        for axis in (0, (0, 1), tuple(range(array.ndim))):
            for keepdims in (False, True):
                ours, numpys = reduce_sum(array, axis, keepdims), array.sum(axis=axis, keepdims=keepdims)
                assert type(ours) is type(numpys) and ours.dtype == numpys.dtype and np.shape(ours) == np.shape(numpys)
                np.testing.assert_array_equal(ours, numpys)
    meta = mg.zeros(3, 4, device="meta").data
    assert reduce_sum(meta, (0,), True).shape == (1, 4) and reduce_sum(meta, (0, 1)).shape == ()


@pytest.mark.parametrize("shape", [(7, 5), (2, 3, 64), (40, 3), (50, 2, 3), (4, 1), (3, 0), (0, 4), (2, 2, 2000), (5,)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64])
def test_reductions_along_rows_give_numpys_results(shape, dtype):
    """NOTE [along rows] (backend/rows.py): sums through the BLAS, maxima by argmax and a gather, for short rows of
    float32/float64; NumPy's own reductions elsewhere. Same shapes and dtypes as NumPy's keepdims results, the same
    maxima exactly (NaN and -inf rows included) and the same sums to rounding; a strided array takes NumPy's way.
    sum_leading, a bias's gradient, sums over the rows instead. float16 adds up in float32, as PyTorch does (NOTE
    [2-byte sums]): its sums are NumPy's float32 sums, rounded to float16 once."""
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(shape) * 10).astype(dtype)
    if a.size and a.dtype.kind == "f":
        a.reshape(-1)[::3] = -np.inf
        a.reshape(-1)[1] = np.nan if a.size > 3 else a.reshape(-1)[1]
    for arr in (a, a[..., ::2] if a.ndim > 1 else a[::2]):
        ndims = (1, 2) if arr.ndim > 1 else (1,)
        for nd in ndims:
            axes = tuple(range(arr.ndim - nd, arr.ndim))
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # the mean of an empty row, as NumPy warns
                wide = arr.astype(np.float32) if arr.dtype == np.float16 else arr  # NOTE [2-byte sums]
                s, want = sum_rows(arr, nd), wide.sum(axis=axes, keepdims=True).astype(arr.dtype)
                assert s.shape == want.shape and s.dtype == want.dtype
                np.testing.assert_allclose(s, want, rtol=1e-5 if arr.dtype == np.float32 else 1e-3, atol=1e-4)
                lead = tuple(range(arr.ndim - nd))
                s, want = sum_leading(arr, nd), wide.sum(axis=lead).astype(arr.dtype)  # a bias's gradient: it
                assert s.shape == want.shape and s.dtype == want.dtype and s.base is None  # owns its memory (.grad)
                np.testing.assert_allclose(s, want, rtol=1e-5 if arr.dtype == np.float32 else 1e-3, atol=1e-4)
                if arr.dtype.kind == "f":
                    m, want = mean_rows(arr, nd), wide.mean(axis=axes, keepdims=True).astype(arr.dtype)
                    assert m.shape == want.shape and m.dtype == want.dtype
                    np.testing.assert_allclose(m, want, rtol=1e-5 if arr.dtype != np.float16 else 1e-3, atol=1e-4)
        if arr.shape[-1]:
            m, want = max_rows(arr), arr.max(axis=-1, keepdims=True)
            assert m.shape == want.shape and m.dtype == want.dtype
            np.testing.assert_array_equal(m, want)


@pytest.mark.parametrize("seed", range(20))
def test_index_add_of_rows_matches_np_add_at(seed):
    """An embedding's backward: repeated (and negative) row indices add up, as with np.add.at (_add_rows in
    backend/rows.py sorts the rows and sums each one's values with np.add.reduceat)."""
    rng = np.random.default_rng(seed)
    n, row = int(rng.integers(1, 9)), tuple(rng.integers(1, 4, rng.integers(0, 3)))
    idx = rng.integers(-n, n, tuple(rng.integers(1, 6, rng.integers(1, 3))))
    values = rng.standard_normal(idx.shape + row)
    want, got = rng.standard_normal((n,) + row), None
    got = want.copy()
    np.add.at(want, (idx,), values)
    index_add(got, (idx,), values)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_grad_dtype_matches_the_leaf():
    x = mg.randn(3, dtype="float64", requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.dtype == np.float64
    y = mg.randn(3, requires_grad=True)
    (y * y).sum().backward()
    assert y.grad.dtype == np.float32
