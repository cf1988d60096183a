"""PyTorch's everyday names on the Tensor, in mg.functional and in mg.nn (tensor/names.py, methods.py, functional.py,
nn/layers.py): each differentiable one gradchecked in float64 and compared with PyTorch (values and the gradient of
a random cotangent), the others' values compared with PyTorch's; and what a name minigrad does not offer says.
"""
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.ops import ShapeError
from minigrad.testing import gradcheck
from on_device import to_host

RTOL, ATOL = 1e-12, 1e-14


def torch_():
    return pytest.importorskip("torch")


def libs(lib):
    """(the library, its functional, its nn): the same expression runs in minigrad and in PyTorch."""
    if lib == "mg":
        return mg, F, nn
    torch = torch_()
    return torch, torch.nn.functional, torch.nn


def T(a, requires_grad=True):
    return mg.tensor(np.asarray(a, dtype=np.float64), dtype="float64", requires_grad=requires_grad)


def normal(shape, seed=0, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


def away(shape, seed=0):
    """|x| in [0.5, 1.5] with random signs: no kink at 0, no pole."""
    rng = np.random.default_rng(seed)
    return rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)


def distinct(shape, seed=0):
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    return (rng.permutation(n) * 0.25 - n * 0.125 + rng.uniform(0, 0.05, n)).reshape(shape)


# name -> (f(library, functional, nn, *inputs), written once for both, input arrays)
OPS = {
    "add": (lambda m, f, n, x, y: x.add(y), [normal((3, 4)), normal((4,), 1)]),
    "add-alpha": (lambda m, f, n, x, y: x.add(y, alpha=-2.5), [normal((3, 4)), normal((3, 1), 1)]),
    "sub-alpha": (lambda m, f, n, x, y: x.sub(y, alpha=0.5), [normal((3, 4)), normal((4,), 1)]),
    "mul": (lambda m, f, n, x, y: x.mul(y), [normal((3, 4)), normal((3, 4), 1)]),
    "div": (lambda m, f, n, x, y: x.div(y), [normal((3, 4)), away((3, 4), 1)]),
    "neg": (lambda m, f, n, x: x.neg(), [normal((3, 4))]),
    "matmul": (lambda m, f, n, x, w: x.matmul(w), [normal((2, 3, 4)), normal((4, 5), 1)]),
    "mm": (lambda m, f, n, x, w: x.mm(w), [normal((3, 4)), normal((4, 2), 1)]),
    "bmm": (lambda m, f, n, x, w: x.bmm(w), [normal((2, 3, 4)), normal((2, 4, 2), 1)]),
    "dot": (lambda m, f, n, x, y: x.dot(y), [normal((4,)), normal((4,), 1)]),
    "outer": (lambda m, f, n, x, y: x.outer(y), [normal((3,)), normal((4,), 1)]),
    "square": (lambda m, f, n, x: x.square(), [normal((3, 4))]),
    "rsqrt": (lambda m, f, n, x: x.rsqrt(), [np.abs(away((3, 4)))]),
    "reciprocal": (lambda m, f, n, x: x.reciprocal(), [away((3, 4))]),
    "sin": (lambda m, f, n, x: x.sin(), [normal((3, 4), scale=3)]),
    "cos": (lambda m, f, n, x: x.cos(), [normal((3, 4), scale=3)]),
    "clone": (lambda m, f, n, x: x.clone() * x, [normal((3, 4))]),
    "where": (lambda m, f, n, x, y: x.where(x > 0, y), [away((3, 4)), normal((4,), 1)]),
    "masked_fill_": (lambda m, f, n, x: (x * 2).masked_fill_(x < 0, 0.5), [away((3, 4))]),
    "view_as": (lambda m, f, n, x, y: x.view_as(y) * y, [normal((3, 4)), normal((2, 6), 1)]),
    "reshape_as": (lambda m, f, n, x, y: x.t().reshape_as(y) * y, [normal((3, 4)), normal((12,), 1)]),
    "t": (lambda m, f, n, x: x.t(), [normal((3, 4))]),
    "mT": (lambda m, f, n, x: x.mT, [normal((2, 3, 4))]),
    "sort": (lambda m, f, n, x: x.sort(dim=0, descending=True).values, [distinct((4, 3))]),
    "sort-last-dim": (lambda m, f, n, x: x.sort().values * m.arange(5.0, dtype=x.dtype), [distinct((2, 5))]),
    "narrow": (lambda m, f, n, x: x.narrow(1, -3, 2), [normal((3, 4))]),
    "unflatten": (lambda m, f, n, x: x.unflatten(1, (2, -1)), [normal((3, 4))]),
    "masked_select": (lambda m, f, n, x, y: x.masked_select(y > 0), [normal((3, 4)), normal((4,), 1)]),
    "silu": (lambda m, f, n, x: f.silu(x), [normal((3, 4), scale=3)]),
    "leaky_relu": (lambda m, f, n, x: f.leaky_relu(x, 0.2), [away((3, 4))]),
    "softplus": (lambda m, f, n, x: f.softplus(x), [normal((3, 4), scale=3)]),
    "softplus-beta-threshold": (lambda m, f, n, x: f.softplus(x, beta=2.0, threshold=5.0), [away((3, 4)) * 3.5]),
    "normalize": (lambda m, f, n, x: f.normalize(x), [normal((3, 4))]),
    "normalize-p1-dim0": (lambda m, f, n, x: f.normalize(x, p=1.0, dim=0), [away((3, 4))]),
    "SiLU": (lambda m, f, n, x: n.SiLU()(x), [normal((3, 4))]),
    "LeakyReLU": (lambda m, f, n, x: n.LeakyReLU()(x), [away((3, 4))]),
    "Softmax": (lambda m, f, n, x: n.Softmax(dim=0)(x), [normal((3, 4))]),
    "LogSoftmax": (lambda m, f, n, x: n.LogSoftmax(dim=-1)(x), [normal((3, 4))]),
    "Flatten": (lambda m, f, n, x: n.Flatten()(x), [normal((2, 3, 4))]),
    "Identity": (lambda m, f, n, x: n.Identity(7, bias=False)(x) * 2, [normal((3, 4))]),
}


@pytest.mark.parametrize("name", list(OPS))
def test_gradcheck(name):
    fn, arrays = OPS[name]
    assert gradcheck(lambda *xs: fn(*libs("mg"), *xs), [T(a) for a in arrays], name=name)


def matches_torch(fn, arrays):
    torch = torch_()
    xs_mg = [T(a) for a in arrays]
    xs_th = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out_mg, out_th = fn(*libs("mg"), *xs_mg), fn(*libs("torch"), *xs_th)
    assert out_mg.shape == tuple(out_th.shape) and out_mg.dtype.name == str(out_th.dtype).split(".")[1]
    np.testing.assert_allclose(to_host(out_mg), out_th.detach().numpy(), rtol=RTOL, atol=ATOL)
    cot = np.random.default_rng(1).standard_normal(out_mg.shape)
    out_mg.backward(mg.tensor(cot, dtype="float64"))
    out_th.backward(torch.tensor(cot))
    for i, (a, b) in enumerate(zip(xs_mg, xs_th)):
        want = np.zeros(a.shape) if b.grad is None else b.grad.numpy()
        got = np.zeros(a.shape) if a.grad is None else to_host(a.grad)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"input {i}")


@pytest.mark.torch
@pytest.mark.parametrize("name", list(OPS))
def test_matches_torch(name):
    matches_torch(*OPS[name])


@pytest.mark.torch
@pytest.mark.parametrize("name", ["silu", "leaky_relu", "softplus", "softplus-beta-threshold", "normalize"])
def test_activations_at_their_kinks_and_far_out_match_torch(name):
    """At 0 (leaky_relu's kink, softplus's and silu's middle), at the threshold, far beyond it (where a naive
    softplus overflows) and a zero row (normalize's eps): PyTorch's values and gradients."""
    x = np.array([[0.0, -0.0, 2.5, 5.0], [40.0, -40.0, 800.0, -800.0], [0.0, 0.0, 0.0, 0.0]])
    matches_torch(OPS[name][0], [x])


# ----------------------------------------------------------------------------- what is not differentiable

VALUES = {
    "eq": lambda m, x, y: x.eq(y), "ne": lambda m, x, y: x.ne(y), "lt": lambda m, x, y: x.lt(y),
    "le": lambda m, x, y: x.le(0.5), "gt": lambda m, x, y: x.gt(y), "ge": lambda m, x, y: x.ge(y),
    "isnan": lambda m, x, y: (x / y).isnan(), "isinf": lambda m, x, y: (x / y).isinf(),
    "isfinite": lambda m, x, y: (x / y).isfinite(), "sign": lambda m, x, y: x.sign(),
    "round": lambda m, x, y: (x * 2).round(), "round-decimals": lambda m, x, y: (x * 100).round(decimals=-1),
    "argsort": lambda m, x, y: x.argsort(dim=0, descending=True), "argsort-last": lambda m, x, y: x.argsort(),
    "sort-indices": lambda m, x, y: x.sort(1).indices, "int": lambda m, x, y: (x * 3).int(),
    "bool": lambda m, x, y: x.bool(), "type_as": lambda m, x, y: x.type_as(x.int()),
    "new_zeros": lambda m, x, y: x.new_zeros(2, 3), "new_ones": lambda m, x, y: x.new_ones((2,), dtype=m.int64),
    "new_full": lambda m, x, y: x.new_full((2, 2), 7.5), "new_empty": lambda m, x, y: x.new_empty(0, 3),
    "new_tensor": lambda m, x, y: x.new_tensor([1, 2, 3]),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(VALUES))
def test_values_match_torch(name):
    torch = torch_()
    a = np.array([[0.0, 1.5, -2.0, 0.5], [0.25, 0.0, -0.75, 3.0], [1.0, 1.0, -1.0, 0.0]])
    b = np.array([[0.0, 1.5, 0.0, 1.0], [2.0, 0.0, -0.75, 3.0], [-1.0, 1.0, 0.0, 2.0]])
    with np.errstate(divide="ignore", invalid="ignore"):  # x / 0 on purpose: inf and nan
        ours = VALUES[name](mg, T(a, False), T(b, False))
    theirs = VALUES[name](torch, torch.tensor(a), torch.tensor(b))
    assert ours.dtype.name == str(theirs.dtype).split(".")[1] and not ours.requires_grad
    np.testing.assert_array_equal(to_host(ours), theirs.numpy())


@pytest.mark.torch
def test_sizes_equal_and_allclose_match_torch():
    torch = torch_()
    for dtype in ("float16", "float32", "int64", "bool"):
        ours, theirs = mg.zeros(3, 4, dtype=dtype), torch.zeros(3, 4, dtype=getattr(torch, dtype))
        assert (ours.nbytes, ours.itemsize, ours.element_size()) == \
            (theirs.nbytes, theirs.itemsize, theirs.element_size())
    x = mg.tensor([1.0, 2.0, float("nan")])
    assert x.equal(x.clone()) is False and x[:2].equal(x[:2] * 1) is True and not x[:2].equal(x[:1])
    assert x.allclose(x + 1e-9) is False and x.allclose(x + 1e-9, equal_nan=True) is True
    assert x[:2].allclose(x[:2] + 1e-3, rtol=1e-2) is True
    tx = torch.tensor([1.0, 2.0, float("nan")])
    assert tx.equal(tx.clone()) is False and tx.allclose(tx + 1e-9, equal_nan=True) is True


def test_new_tensors_take_this_ones_dtype_and_device_and_a_gradient_flag():
    x = mg.randn(2, dtype="float64")
    for t in (x.new_zeros(3), x.new_ones([3]), x.new_full((3,), 1.5), x.new_empty(3), x.new_tensor([1, 2, 3])):
        assert t.shape == (3,) and t.dtype == mg.float64 and t.device == x.device and not t.requires_grad
    assert x.new_zeros(2, requires_grad=True).requires_grad and x.new_tensor([1], dtype="int32").dtype == mg.int32
    assert x.new_tensor(np.arange(3)).dtype == mg.float64  # as torch's: this tensor's dtype, not the data's


def test_one_hot_is_torchs_and_says_what_is_wrong():
    got = F.one_hot(mg.tensor([[0, 2], [1, 0]]))
    assert got.dtype == mg.int64 and got.shape == (2, 2, 3)
    np.testing.assert_array_equal(to_host(got), np.eye(3, dtype=np.int64)[[[0, 2], [1, 0]]])
    assert F.one_hot(mg.tensor([1]), num_classes=4).tolist() == [[0, 1, 0, 0]]
    with pytest.raises(TypeError, match=r"int64.*\.long\(\)"):
        F.one_hot(mg.tensor([1.0]))
    with pytest.raises(RuntimeError, match=r"class values must be in \[0, num_classes=2\), got \[0, 3\]"):
        F.one_hot(mg.tensor([0, 3]), 2)
    with pytest.raises(RuntimeError, match="give num_classes"):
        F.one_hot(mg.tensor(np.zeros(0, dtype=np.int64)))
    torch = torch_()
    np.testing.assert_array_equal(to_host(got), torch.nn.functional.one_hot(torch.tensor([[0, 2], [1, 0]])).numpy())


def test_clone_is_its_own_op_a_new_array_the_ledger_counts():
    """A copy, not a view; its record saves nothing and counts no FLOPs; the ledger counts its bytes, as any op's
    output; and its gradient passes through unchanged."""
    x = T(normal((3, 4)))
    with mg.profile() as prof:
        before = prof.current_bytes()
        y = x.clone()
        assert prof.current_bytes() - before == x.nbytes == 96
    assert y.grad_fn.name == "clone" and y.grad_fn.saved == () and prof.flops("forward", op="clone") == 0
    assert not np.shares_memory(y.data, x.data) if x.device == "cpu" else True
    y.backward(mg.ones(3, 4, dtype="float64"))
    np.testing.assert_array_equal(to_host(x.grad), np.ones((3, 4)))
    b = mg.tensor([True, False]).clone()
    assert b.dtype == mg.bool_ and b.tolist() == [True, False]  # x + 0 would have made it int64


def test_in_place_masked_fill_writes_the_array_without_a_record():
    x = mg.zeros(2, 3)
    data = x.data
    assert x.masked_fill_(mg.tensor([True, False, True]), 2.0) is x and x._version == 1
    assert to_host(x).tolist() == [[2.0, 0.0, 2.0]] * 2 and x.data is data
    with pytest.raises(ShapeError, match=r"mask of shape \(4,\) does not broadcast to this tensor's shape \(2, 3\)"):
        x.masked_fill_(mg.zeros(4, dtype="bool"), 1.0)


def test_softmax_modules_without_dim_warn_and_pick_pytorchs_dim():
    x = mg.randn(2, 3)
    with pytest.warns(UserWarning, match="dim=1"):
        y = nn.Softmax()(x)
    np.testing.assert_allclose(to_host(y), to_host(x.softmax(1)), rtol=1e-6)
    with pytest.warns(UserWarning, match="dim=0"):
        nn.LogSoftmax()(mg.randn(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.Softmax(dim=-1)(x)
    assert repr(nn.Softmax(1)) == "Softmax(dim=1)" and repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    assert repr(nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)" and repr(nn.Identity()) == "Identity()"


# ----------------------------------------------------------------------------- errors that teach

def test_shape_errors_say_what_to_write():
    x = mg.randn(2, 3, 4)
    with pytest.raises(ShapeError, match=r"mm: needs two 2-d tensors.*x @ y \(matmul\) broadcasts"):
        x.mm(mg.randn(4, 2))
    with pytest.raises(ShapeError, match=r"t: expects a tensor with <= 2 dims.*x\.mT"):
        x.t()
    with pytest.raises(ShapeError, match="mT: needs at least 2 dims"):
        mg.randn(3).mT  # a property's own error, not the AttributeError of a missing name
    with pytest.raises(IndexError, match="narrow: start 3 and length 2 fall outside dim 2 of size 4"):
        x.narrow(2, 3, 2)
    with pytest.raises(ValueError, match="rounding_mode='floor' is not supported"):
        x.div(2, rounding_mode="floor")
    for call in (lambda: F.silu(x, inplace=True), lambda: nn.LeakyReLU(inplace=True), lambda: nn.ReLU(inplace=True),
                 lambda: F.relu(x, True), lambda: nn.Dropout(0.1, True), lambda: F.dropout(x, 0.1, True, True)):
        with pytest.raises(ValueError, match="inplace=True is not supported"):
            call()


@pytest.mark.parametrize("name, says", [
    ("einsum", "'bij,bjk->bik' is a @ b"),
    ("scatter_", "y = x.clone(); y[index] = src"),
    ("scatter_add", "y[index] = src"),
    ("stride", "x.data.strides"),
    ("is_contiguous", "x.contiguous() is x itself"),
    ("data_ptr", "its array, x.data"),
    ("register_hook", "retain_grad()"),
    ("type", "x.to(dtype)"),
    ("detach_", "x = x.detach()"),
    ("log1p", "(1 + x).log()"),
    ("erf", "F.gelu"),
    ("nan_to_num", "mg.where(x.isnan(), 0.0, x)"),
    ("roll", "mg.cat([x[-shift:], x[:-shift]])"),
    ("softplus", "F.softplus(x)"),
    ("silu", "F.silu(x)"),
    ("exp_", "no in-place exp; write x = x.exp(...)"),
    ("sqrt_", "no in-place sqrt"),
    ("matmull", "did you mean 'matmul'"),
    ("Reshape", "did you mean 'reshape'"),
])
def test_a_missing_tensor_attribute_says_what_to_use_instead(name, says):
    x = mg.randn(2, 2)
    with pytest.raises(AttributeError) as e:
        getattr(x, name)
    assert says in str(e.value) and f"'Tensor' object has no attribute {name!r}" in str(e.value)
    assert not hasattr(x, name) and not hasattr(nn.Parameter(x), name)


def test_probes_and_private_names_get_a_plain_attribute_error():
    x = mg.randn(2)
    for name in ("__array_interface__", "__cuda_array_interface__", "_is_module", "nothing_like_it_at_all"):
        with pytest.raises(AttributeError) as e:
            getattr(x, name)
        assert str(e.value) == f"'Tensor' object has no attribute {name!r}"
    assert getattr(x, "_is_module", False) is False and x._is_parameter is False and nn.Parameter(x)._is_parameter


@pytest.mark.parametrize("where, name, says", [
    (F, "elu", "x.clamp(max=0).exp() - 1"),
    (F, "pad", "x.new_zeros("),
    (F, "cosine_similarity", "F.normalize(x1, dim=1)"),
    (F, "kl_div", "reduction='batchmean'"),
    (nn, "RMSNorm", ".rsqrt() * weight"),
    (nn, "Softplus", "F.softplus(x, beta, threshold)"),
    (nn, "MultiheadAttention", "F.scaled_dot_product_attention"),
    (mg, "matmul", "Tensor method: x.matmul"),
    (mg, "int", "mg.int32"),
    (mg, "silu", "it is mg.functional.silu"),
])
def test_a_missing_module_name_says_what_to_use_instead(where, name, says):
    with pytest.raises(AttributeError) as e:
        getattr(where, name)
    assert says in str(e.value)


@pytest.mark.torch
def test_the_advice_computes_what_pytorch_computes():
    """What the messages above tell a learner to write gives PyTorch's values (a promise in the docs is a test)."""
    torch = torch_()
    tf = torch.nn.functional
    a, b = normal((3, 4)) * 3, normal((3, 4), 1)
    x, y, tx, ty = T(a, False), T(b, False), torch.tensor(a), torch.tensor(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        holes = x / T([0.0, 1.0, 0.0, 2.0], False) * T([0.0, 1.0, 1.0, 1.0], False)  # nan, inf, -inf
    shift, eps, alpha = 1, 1e-6, 1.5
    cases = [
        (mg.where(x > 0, x, alpha * (x.clamp(max=0).exp() - 1)), tf.elu(tx, alpha)),
        ((F.normalize(x, dim=1) * F.normalize(y, dim=1)).sum(1), tf.cosine_similarity(tx, ty, dim=1)),
        (x * (x.pow(2).mean(-1, keepdim=True) + eps).rsqrt() * mg.ones(4, dtype="float64"),
         tf.rms_norm(tx, (4,), eps=eps)),
        (mg.cat([x, x.new_zeros(*x.shape[:-1], 2)], dim=-1), tf.pad(tx, (0, 2))),
        (mg.cat([x[-shift:], x[:-shift]]), tx.roll(shift, 0)),
        (x.unsqueeze(0) @ y.t().unsqueeze(0), torch.einsum("bij,bjk->bik", tx.unsqueeze(0), ty.t().unsqueeze(0))),
        ((1 + x.abs()).log(), tx.abs().log1p()),
        ((y.softmax(1) * (y.softmax(1).log() - x.log_softmax(1))).sum() / 3,
         tf.kl_div(tx.log_softmax(1), ty.softmax(1), reduction="batchmean")),
        (mg.where(holes.isnan(), 0.0, holes), torch.tensor(to_host(holes)).nan_to_num(posinf=float("inf"),
                                                                                      neginf=float("-inf"))),
    ]
    for i, (ours, theirs) in enumerate(cases):
        np.testing.assert_allclose(to_host(ours), theirs.numpy(), rtol=1e-12, atol=1e-14, err_msg=f"case {i}")
