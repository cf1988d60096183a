"""Where PyTorch habits used to meet silent wrong results (issue [parity]): each is now right, or an error.

  versions     a saved array written in place before backward is refused, naming the op
  in place     +=, add_, ..., fill_, copy_, clamp_, t[i] = v: PyTorch's rules, in float64 against
               finite differences and PyTorch
  numbers      division's backward in float32, cross_entropy with every target ignored, NumPy scalars
               on the left, type promotion
  shapes       bool masks, flatten, sum(dim=()), repeated dims, where's condition
  accumulate   padding ignored by default; a mean-reduced loss refused
"""
import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.testing import gradcheck

from on_device import host_only


def t64(*shape, requires_grad=True, positive=False):
    a = np.random.rand(*shape) + 0.5 if positive else np.random.randn(*shape)
    return mg.tensor(a, dtype="float64", requires_grad=requires_grad)


# ----------------------------------------------------------------------------- version counters

def test_weights_stepped_between_forward_and_backward_are_refused():
    """The issue's example: the gradient would be computed at the new weights."""
    w = mg.randn(3, requires_grad=True)
    loss = (w * w * 3).sum()
    with mg.no_grad():
        w -= 0.1 * mg.ones(3)
    with pytest.raises(RuntimeError, match=r"'mul' saved its input \d.*modified in place.*version 1.*version 0"):
        loss.backward()


def test_an_optimizer_step_between_forward_and_backward_is_refused():
    lin = nn.Linear(3, 2)
    x = mg.randn(4, 3, requires_grad=True)  # so linear saves the weight, for dx = g W
    opt = mg.optim.SGD(lin.parameters(), lr=0.1)
    lin(x).sum().backward()
    loss = lin(x).sum()
    opt.step()
    with pytest.raises(RuntimeError, match=r"'linear' saved its input 1 .*modified in place"):
        loss.backward()


def test_a_saved_output_written_through_a_view_is_refused():
    x = mg.randn(2, 3, requires_grad=True)
    y = x.exp()                      # exp saves its output
    view = y.detach().reshape(6)     # shares y's storage and version counter
    view += 1.0
    assert y._version == 1 and view._version == 1
    with pytest.raises(RuntimeError, match=r"'exp' saved its output"):
        y.sum().backward()


def test_writes_that_no_record_read_are_fine():
    x = mg.randn(3, requires_grad=True)
    buf = mg.zeros(3)
    loss = (x * 2).sum()          # mul by a constant saves nothing of x
    with mg.no_grad():
        x += 1.0
    buf += 5.0
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 2])
    assert buf._version == 1 and x._version == 1


# ----------------------------------------------------------------------------- in-place ops

def test_no_grad_sgd_loop_updates_the_parameters():
    """The issue's example: `p -= lr * p.grad` rebinds the name without in-place ops."""
    model = nn.Linear(3, 2)
    before = [p.detach().numpy().copy() for p in model.parameters()]
    F.mse_loss(model(mg.randn(4, 3)), mg.randn(4, 2)).backward()
    with mg.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
    for b, p in zip(before, model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), b - 0.1 * p.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("write", [lambda p: p.add_(1.0), lambda p: p.mul_(2.0), lambda p: p.zero_(),
                                   lambda p: p.fill_(3.0), lambda p: p.clamp_(-1, 1), lambda p: p.__setitem__(0, 1.0),
                                   lambda p: p.copy_(mg.zeros(2, 3)), lambda p: p.sub_(p.detach())])
def test_in_place_on_a_leaf_that_requires_grad_is_refused_outside_no_grad(write):
    p = nn.Parameter(mg.randn(2, 3))
    with pytest.raises(RuntimeError, match=r"leaf tensor that requires grad.*mg.no_grad"):
        write(p)
    with mg.no_grad():
        write(p)  # fine there, as in PyTorch
    assert p._version == 1 and p.is_leaf


INPLACE = {
    "add_": (lambda a, b: a.add_(b), lambda a, b: a.add_(b)),
    "add_alpha": (lambda a, b: a.add_(b, alpha=-0.5), lambda a, b: a.add_(b, alpha=-0.5)),
    "sub_": (lambda a, b: a.sub_(b), lambda a, b: a.sub_(b)),
    "mul_": (lambda a, b: a.mul_(b), lambda a, b: a.mul_(b)),
    "div_": (lambda a, b: a.div_(b.exp()), lambda a, b: a.div_(b.exp())),
    "+=": (lambda a, b: a.__iadd__(b * 2), lambda a, b: a.__iadd__(b * 2)),
    "*=": (lambda a, b: a.__imul__(b), lambda a, b: a.__imul__(b)),
    "fill_": (lambda a, b: a.fill_(2.0), lambda a, b: a.fill_(2.0)),
    "copy_": (lambda a, b: a.copy_(b[0]), lambda a, b: a.copy_(b[0])),
    "clamp_": (lambda a, b: a.clamp_(-0.3, 0.4), lambda a, b: a.clamp_(-0.3, 0.4)),
    "setitem": (lambda a, b: a.__setitem__((slice(None), 1), b[:, 2] * 3),
                lambda a, b: a.__setitem__((slice(None), 1), b[:, 2] * 3)),
    "setitem-mask": (lambda a, b: a.__setitem__(a.detach() > 0, 0.0),  # the detached copy is gone by then
                     lambda a, b: a.__setitem__(a.detach() > 0, 0.0)),
}


@pytest.mark.parametrize("case", list(INPLACE))
def test_recorded_in_place_on_an_intermediate_has_the_right_gradient(case):
    """A non-leaf written in place while recording: gradients by finite differences in float64."""
    write, _ = INPLACE[case]

    def fn(x, w):
        h = (x * w).tanh()      # tanh saves its output: the write must not change it
        write(h, w)
        return h * x

    assert gradcheck(fn, [t64(3, 4), t64(3, 4)], name=case)


@pytest.mark.parametrize("case", list(INPLACE))
def test_in_place_matches_pytorch(case):
    """On x * w, whose output no record saved (PyTorch refuses the write into tanh's saved output that the
    test above makes; minigrad gets it right: NOTE [in-place])."""
    torch = pytest.importorskip("torch")
    mine, theirs = INPLACE[case]
    xa, wa = np.random.randn(3, 4), np.random.randn(3, 4)
    x, w = mg.tensor(xa, dtype="float64", requires_grad=True), mg.tensor(wa, dtype="float64", requires_grad=True)
    tx, tw = torch.tensor(xa, requires_grad=True), torch.tensor(wa, requires_grad=True)
    h = x * w
    mine(h, w)
    th = tx * tw
    theirs(th, tw)
    (h * x).sum().backward()
    (th * tx).sum().backward()
    np.testing.assert_allclose(h.detach().numpy(), th.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_in_place_writes_through_views_and_detach_without_recording():
    x = mg.zeros(2, 3)
    row = x[1]
    row += 1.0                      # a view: the write shows in x, as in PyTorch
    alias = x.detach()
    alias.mul_(3.0)
    x[0, 2] = 7.0
    np.testing.assert_array_equal(x.numpy(), [[0, 0, 7], [3, 3, 3]])
    assert x._version == row._version == alias._version == 3


def test_an_element_picked_by_integers_is_a_view_as_in_pytorch():
    """x[1, 0], x[2] of a 1-d x, unbind's pieces of one: every dim taken by an int gives a 0-d view, as in PyTorch
    (and CuPy), not NumPy's scalar, a copy: writes through it reach x, writes to x show in it, and a saved
    array written so is refused rather than silently used at its old values (or the write silently lost)."""
    x = mg.zeros(2, 3)
    b = mg.zeros(3)
    with mg.no_grad():
        x[1, 0].fill_(5.0)
        b[-1].add_(2.0)
        b.unbind(0)[0].copy_(mg.tensor(7.0))
        e = x[0, 2]
        x.add_(1.0)
    assert x.tolist() == [[1, 1, 1], [6, 1, 1]] and b.tolist() == [7, 0, 2] and e.item() == 1.0
    assert e._version == x._version == 2

    w = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = w.exp()                      # exp saves its output
    with mg.no_grad():
        y[0].zero_()
    with pytest.raises(RuntimeError, match=r"'exp' saved its output"):
        y.sum().backward()
    h = w * 1.0
    with pytest.raises(RuntimeError, match=r"add_: in place on a view"):
        h[0].add_(1.0)               # recorded: refused as any view's write, never a write into a copy
    x = mg.tensor(5.0, requires_grad=True) * 1.0
    assert x[()]._version == x._version == 0 and x[...].shape == x[()].shape == ()


def test_a_0d_transpose_is_a_view_that_shares_the_version_counter():
    """transpose of a 0-d tensor handed back its input's very array, with a version counter of its own: a write
    through it changed an array that mul had saved, unseen, and the gradient came from the new value."""
    w, w2 = mg.tensor(1.0, requires_grad=True), mg.tensor(3.0, requires_grad=True)
    y = w * 2
    z = y * w2                       # mul saves y, for w2's gradient
    t = y.transpose(0, -1)
    with mg.no_grad():
        t.add_(10.0)
    assert y.item() == 12.0 and t._version == y._version == 1
    with pytest.raises(RuntimeError, match=r"'mul' saved its input 0"):
        z.backward()


def test_a_parameter_made_of_a_tensor_shares_its_version_counter():
    """nn.Parameter(t) holds t's very array, as in PyTorch; its version counter must be t's too, else an update
    of the parameter (an optimizer's step) changes an array that a record saved through t, unseen."""
    x, a = mg.tensor([1.0, 2.0]), mg.tensor([3.0, 4.0], requires_grad=True)
    y = (x * a).sum()                # mul saves x, for a's gradient
    p = nn.Parameter(x)
    with mg.no_grad():
        p.add_(10.0)
    assert x.tolist() == [11.0, 12.0] and x._version == p._version == 1
    with pytest.raises(RuntimeError, match=r"'mul' saved its input 0"):
        y.backward()
    with pytest.raises(RuntimeError, match=r"in place on a view, or on a tensor that has views"):
        x.mul_(a)                    # recorded: x would get a new array, and p keep the old one


def test_recorded_in_place_on_a_view_or_a_tensor_with_views_is_refused_clearly():
    h = mg.randn(2, 3, requires_grad=True) * 1.0
    with pytest.raises(RuntimeError, match=r"add_: in place on a view.*y = y"):
        h[0].add_(1.0)
    row = h[1]
    with pytest.raises(RuntimeError, match=r"mul_: in place on a view, or on a tensor that has views"):
        h.mul_(2.0)
    del row
    h.mul_(2.0)  # no view left: fine


def test_an_empty_tensor_is_not_an_expanded_view():
    """NumPy gives an empty array zero strides: that is no sign of an expand(), and writing nothing is fine, as in
    PyTorch (fill_ raised 'an expand()ed view')."""
    x = mg.zeros(3, 0)
    x.fill_(1.0)
    x += 1.0
    h = mg.zeros(3, 0, requires_grad=True) * 1.0
    h.add_(mg.ones(3, 0, requires_grad=True))
    assert x.shape == h.shape == (3, 0) and x._version == 2


def test_in_place_cannot_change_dtype_or_shape():
    i = mg.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match=r"\+=: the result would be float32, but this tensor is int64"):
        i += 0.5
    x = mg.zeros(3)
    with pytest.raises(RuntimeError, match=r"add_: the other operand's shape \(2, 3\) does not broadcast"):
        x.add_(mg.ones(2, 3))
    with pytest.raises(TypeError, match=r"setitem: the value must be a Tensor or a number"):
        x[0] = "a"


@host_only("NumPy's in-place operators ask the Tensor (__array_ufunc__); CuPy's never do: on 'cuda' CuPy raises its own "
           "'Unsupported type' before minigrad sees the Tensor")
def test_raw_array_plus_tensor_says_what_to_write():
    p = nn.Parameter(mg.randn(3))
    p.grad = mg.ones(3)
    with pytest.raises(TypeError, match=r"p.data is the raw array: write p -= \.\.\. under mg.no_grad"):
        p.data += -0.1 * p.grad


def test_requires_grad_false_after_the_graph_is_built_gets_no_grad():
    w = mg.randn(3, requires_grad=True)
    loss = (w * 2).sum()
    w.requires_grad_(False)
    loss.backward()
    assert w.grad is None


def test_a_second_backward_through_ops_that_saved_nothing_is_allowed():
    x = mg.randn(3, requires_grad=True)
    y = (x + 1).sum()
    y.backward()
    y.backward()  # add and sum keep nothing: PyTorch allows this too
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 2])


# ----------------------------------------------------------------------------- numbers

def test_division_backward_stays_finite_in_float32():
    """The issue's example: p / p.sum() with logits near -60 gave -inf gradients (b * b underflows)."""
    logits = mg.tensor(np.random.uniform(-62, -58, 5).astype(np.float32), requires_grad=True)
    w = mg.randn(5)
    p = logits.exp()
    (p / p.sum() * w).sum().backward()
    g = logits.grad.numpy()
    assert np.all(np.isfinite(g))
    x = logits.detach().numpy().astype(np.float64)
    s = np.exp(x - x.max()) / np.exp(x - x.max()).sum()  # the softmax's gradient: s * (w - s . w)
    exact = s * (w.numpy() - (s * w.numpy()).sum())
    np.testing.assert_allclose(g, exact, rtol=1e-4, atol=1e-6)


def test_cross_entropy_with_every_target_ignored_is_nan_with_zero_gradient():
    x = mg.randn(4, 5, requires_grad=True)
    loss = F.cross_entropy(x, mg.full((4,), -100, dtype="int64"))
    loss.backward()
    assert np.isnan(loss.item()) and np.array_equal(x.grad.numpy(), np.zeros((4, 5), np.float32))


@pytest.mark.parametrize("scalar", [np.float64(0.5), np.float32(0.5), np.int64(2), 1 / np.sqrt(4.0)])
def test_numpy_scalars_on_the_left_give_tensors(scalar):
    t = mg.randn(3)
    for out in (scalar * t, scalar + t, scalar - t, scalar / (t.abs() + 1)):
        assert isinstance(out, mg.Tensor) and out.dtype == np.float32 and out.shape == (3,)


def test_type_promotion_follows_pytorch():
    torch = pytest.importorskip("torch")
    cases = [lambda m: m.tensor([1.0, -2.0]) * (m.tensor([1.0, -2.0]) < 0), lambda m: m.tensor([1, 2]) + 0.5,
             lambda m: m.arange(3).exp(), lambda m: m.tensor([1, 2]) / m.tensor([2, 4]),
             lambda m: m.tensor([True, False]) + 1, lambda m: m.tensor([1, 2]) * m.tensor([1, 0], dtype=m.int32),
             lambda m: m.tensor([1, 2]).float() * m.tensor([True, False]), lambda m: m.tensor([True, False]).sin(),
             lambda m: 2 ** m.arange(3), lambda m: m.tensor([1, 2]) ** 2,
             # a float bound makes an integer tensor float32 (it was truncated: [1, 2, 3].clamp(min=1.5) gave 1 first)
             lambda m: m.tensor([1, 2, 3]).clamp(min=1.5), lambda m: m.tensor([1, 2, 3]).clamp(0.5, 2),
             lambda m: m.tensor([1, 2, 3], dtype=m.int32).clamp(0, 2), lambda m: m.tensor([True, False]).clamp(max=2),
             lambda m: m.tensor([True, False]).clamp(min=0.5),
             # full's dtype follows its value (it was float32 always: full((2,), -100) made float targets)
             lambda m: m.full((2,), -100), lambda m: m.full((2,), True), lambda m: m.full((2,), 1.5)]
    for k, case in enumerate(cases):
        mine, theirs = case(mg), case(torch)  # (the mean of integers, refused by both: test_bad_input_vs_torch.py)
        assert mine.dtype.name == str(theirs.dtype).replace("torch.", ""), k
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-6)


def test_float32_with_float64_stays_an_error():
    with pytest.raises(TypeError, match=r"add:.*float32 and float64.*does not promote"):
        mg.randn(2) + mg.randn(2, dtype="float64")


def test_pow_with_tensor_exponents_and_numbers_on_the_left():
    assert gradcheck(lambda a, b: a ** b, [t64(3, 4, positive=True), t64(3, 4)], name="a ** b")
    assert gradcheck(lambda b: 2.5 ** b, [t64(3, 4)], name="2.5 ** b")
    z = mg.tensor([0.0, 1.0, 2.0], dtype="float64", requires_grad=True)
    y = 0.0 ** z                                   # PyTorch: [1, 0, 0], gradient 0 (not nan)
    y.sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), [1, 0, 0])
    np.testing.assert_array_equal(z.grad.numpy(), [0, 0, 0])
    np.testing.assert_array_equal(((-2.0) ** mg.tensor([2.0, 3.0])).numpy(), [4, -8])


def test_pow_matches_pytorch_at_zero_and_negative_bases():
    torch = pytest.importorskip("torch")
    a = np.array([0.0, 0.0, 2.0, -2.0, 3.0])
    b = np.array([0.0, 2.0, 0.0, 2.0, -1.0])
    x, y = mg.tensor(a, dtype="float64", requires_grad=True), mg.tensor(b, dtype="float64", requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (x ** y).sum().backward()
    (tx ** ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-12)


def test_clamp_gradient_matches_pytorch_at_the_bounds():
    torch = pytest.importorskip("torch")
    a = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    x, tx = mg.tensor(a, dtype="float64", requires_grad=True), torch.tensor(a, requires_grad=True)
    x.clamp(-1, 1).sum().backward()
    tx.clamp(-1, 1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    assert gradcheck(lambda t: t.clamp(min=-0.5), [t64(3, 4)], name="clamp")


# ----------------------------------------------------------------------------- shapes

def test_a_bool_mask_of_the_wrong_shape_is_an_index_error():
    t = mg.randn(3, 4)
    with pytest.raises(IndexError, match=r"index: boolean index did not match.*mask of shape \(2,\)"):
        t[mg.tensor([True, False])]
    with pytest.raises(IndexError, match=r"mask of shape \(3,\)"):
        t[:, mg.tensor([True, False, True])]
    assert t[:, mg.tensor([True, False, True, False])].shape == (3, 2)


@pytest.mark.parametrize("dims", [(5,), (2, 1), (0, 3), (-4, 0)])
def test_flatten_refuses_invalid_dims(dims):
    with pytest.raises(IndexError, match=r"flatten"):
        mg.randn(2, 3, 4).flatten(*dims)


def test_flatten_valid_dims_match_pytorch_shapes():
    t = mg.randn(2, 3, 4)
    assert t.flatten().shape == (24,) and t.flatten(1).shape == (2, 12) and t.flatten(0, 1).shape == (6, 4)
    assert t.flatten(-2, -1).shape == (2, 12) and mg.tensor(3.0).flatten().shape == (1,)


def test_reductions_over_no_dims_reduce_all_and_repeated_dims_are_refused():
    t = mg.randn(2, 3)
    assert t.sum(dim=()).shape == () and np.isclose(t.sum(dim=()).item(), t.numpy().sum(), rtol=1e-6)
    with pytest.raises(IndexError, match=r"sum: dim \(1, -1\) names the same dim twice"):
        t.sum(dim=(1, -1))


def test_where_blames_the_condition_and_takes_numbers():
    x = mg.randn(3, 4)
    with pytest.raises(ValueError, match=r"where: the condition's shape \(2,\) does not broadcast"):
        mg.where(mg.tensor([True, False]), x, 0.0)
    out = mg.where(x > 0, 1.0, 0.0)
    assert out.dtype == np.float32 and np.array_equal(out.numpy(), (x.numpy() > 0).astype(np.float32))


def test_max_over_a_non_empty_dim_of_an_empty_tensor():
    assert mg.zeros(0, 3).max(dim=1).values.shape == (0,)
    with pytest.raises(ValueError, match=r"max: the input of shape \(0, 3\) has no element along dims \(0,\)"):
        mg.zeros(0, 3).max(dim=0)


def test_backward_with_a_number_as_gradient_says_what_to_write():
    x = mg.randn(3, requires_grad=True)
    with pytest.raises(TypeError, match=r"backward: gradient must be a Tensor of the output's shape \(3,\)") as info:
        (x * 2).backward(gradient=2)
    hint = str(info.value).split("gradient=")[-1]
    (x * 2).backward(gradient=eval(hint, {"mg": mg}))  # the hint runs as written: float32, as the output, not int64
    assert x.grad.tolist() == [4.0, 4.0, 4.0]


# ----------------------------------------------------------------------------- accumulation

def test_accumulate_ignores_padding_by_default_as_cross_entropy_does():
    model = nn.Linear(4, 3)
    x, y = mg.randn(6, 4), mg.tensor([0, 1, -100, 2, -100, 1])
    result = mg.accumulate(model, lambda o, t: F.cross_entropy(o, t, reduction="sum"), x, y, steps=3)
    assert result.items == 4
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    for a, p in zip(grads, model.parameters()):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("loss_fn", [lambda o, t: F.cross_entropy(o, t),
                                     lambda o, t: F.mse_loss(o, mg.zeros(*o.shape)),
                                     lambda o, t: ((o - 1) ** 2).mean()], ids=["ce-mean", "mse-mean", "mean"])
def test_accumulate_refuses_a_mean_reduced_loss(loss_fn):
    model = nn.Linear(4, 3)
    x, y = mg.randn(8, 4), mg.randint(0, 3, (8,))
    with pytest.raises(ValueError, match=r"accumulate: loss_fn returned a mean.*reduction='sum'"):
        mg.accumulate(model, loss_fn, x, y, steps=2)


@pytest.mark.parametrize("bad", [lambda: mg.randn(2, 3) @ mg.randn(4, 5), lambda: mg.randn(2, 3) + mg.randn(4),
                                 lambda: mg.randn(6).reshape(4), lambda: mg.cat([mg.randn(2, 3), mg.randn(2, 4)]),
                                 lambda: F.linear(mg.randn(2, 3), mg.randn(4, 5))])
def test_shape_errors_are_value_errors_and_runtime_errors_as_in_pytorch(bad):
    for kind in (ValueError, RuntimeError):
        with pytest.raises(kind):
            bad()


def test_numpy_scalars_keep_their_dtype_as_in_pytorch():
    assert mg.tensor(np.float64(1.0)).dtype == np.float64 and mg.tensor(np.float32(1.0)).dtype == np.float32
    assert mg.tensor(1.0).dtype == np.float32 and mg.tensor(np.int32(3)).dtype == np.int32
    assert mg.Tensor._from_array(-np.array(1.0)).data.shape == ()  # a 0-d result NumPy made a scalar: an array again
