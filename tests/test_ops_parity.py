"""The API of a real training script (issue [parity]): the ops, functions and helpers that nanoGPT, minGPT
and PyTorch's tutorials use, each against finite differences in float64 and against PyTorch.

  ops          one table of expressions, written once for both libraries: every one gradchecked in float64,
               and compared with PyTorch (values and the gradient of a random cotangent) to 1e-12
  semantics    max(dim)/min(dim)/topk's (values, indices); gradients at ties (maximum, max, amax) and at
               zeros (prod, norm); var's arguments; views and copies (split vs flip, expand refuses writes)
  functional   cross_entropy with (N, C, d1, ...) logits, class weights, label smoothing and probability
               targets; embedding's padding_idx
  helpers      @mg.no_grad bare, mg.multinomial, nn.utils.clip_grad_norm_, nn.init
  FLOPs        a composed op counts exactly its primitives' FLOPs
"""
import math

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.testing import gradcheck

RTOL, ATOL = 1e-12, 1e-14


def torch_():
    return pytest.importorskip("torch")


def T(a, requires_grad=True):
    return mg.tensor(np.asarray(a, dtype=np.float64), dtype="float64", requires_grad=requires_grad)


def distinct(shape, seed=0):
    """Tie-free values, at least 0.2 apart: max, topk and maximum are differentiable everywhere."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    return (rng.permutation(n) * 0.25 - n * 0.125 + rng.uniform(0, 0.05, n)).reshape(shape)


def normal(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def away(shape, seed=0):
    """|x| in [0.5, 1.5] with random signs: no kink of abs, no zero of a product."""
    rng = np.random.default_rng(seed)
    return rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)


def with_zeros(shape, zeros, seed=0):
    a = away(shape, seed)
    a.reshape(-1)[list(zeros)] = 0.0
    return a


def idx(lib, values):
    return lib.tensor(values)  # an int64 tensor in both libraries


# name -> (f(lib, *inputs) written once for minigrad and torch, input arrays). Tuples of outputs are cat'ed.
OPS = {
    "amax-dims": (lambda m, x: x.amax(dim=(0, 2)), [distinct((2, 3, 4))]),
    "amin-keepdim": (lambda m, x: x.amin(dim=-1, keepdim=True), [distinct((2, 3, 4))]),
    "max-all": (lambda m, x: x.max(), [distinct((3, 4))]),
    "min-all": (lambda m, x: x.min(), [distinct((3, 4))]),
    "max-dim-values": (lambda m, x: x.max(dim=1).values, [distinct((3, 4))]),
    "min-dim-keepdim": (lambda m, x: x.min(0, keepdim=True).values, [distinct((3, 4))]),
    "prod-all": (lambda m, x: x.prod(), [away((3, 4))]),
    "prod-dim": (lambda m, x: x.prod(dim=1), [away((2, 3, 4))]),
    "prod-keepdim": (lambda m, x: x.prod(0, keepdim=True), [away((3, 4))]),
    "prod-one-zero": (lambda m, x: x.prod(dim=1), [with_zeros((3, 4), [1, 6])]),
    "prod-two-zeros": (lambda m, x: x.prod(dim=1), [with_zeros((3, 4), [4, 6])]),
    "prod-all-one-zero": (lambda m, x: x.prod(), [with_zeros((3, 4), [5])]),
    "cumsum": (lambda m, x: x.cumsum(dim=1), [normal((2, 3, 4))]),
    "cumsum-neg-dim": (lambda m, x: x.cumsum(-3), [normal((2, 3, 4))]),
    "var": (lambda m, x: x.var(), [normal((3, 4))]),
    "var-dim-biased": (lambda m, x: x.var(dim=1, unbiased=False), [normal((3, 4))]),
    "var-correction": (lambda m, x: x.var(dim=(0, 2), correction=2, keepdim=True), [normal((2, 3, 4))]),
    "std": (lambda m, x: x.std(dim=0), [normal((3, 4))]),
    "logsumexp": (lambda m, x: x.logsumexp(dim=1), [normal((3, 4)) * 10]),
    "logsumexp-dims": (lambda m, x: x.logsumexp(dim=(0, 2), keepdim=True), [normal((2, 3, 4))]),
    "norm": (lambda m, x: x.norm(), [normal((3, 4))]),
    "norm-dim": (lambda m, x: x.norm(dim=1, keepdim=True), [normal((3, 4))]),
    "norm-p1": (lambda m, x: x.norm(p=1, dim=0), [away((3, 4))]),
    "norm-p3": (lambda m, x: x.norm(3, dim=-1), [away((3, 4))]),
    "norm-inf": (lambda m, x: x.norm(float("inf"), dim=1), [distinct((3, 4))]),
    "norm--inf": (lambda m, x: x.norm(float("-inf")), [distinct((3, 4))]),
    "maximum": (lambda m, a, b: m.maximum(a, b), [distinct((3, 4)), distinct((3, 4), seed=1) + 0.1]),
    "maximum-broadcast": (lambda m, a, b: a.maximum(b), [distinct((3, 4)), distinct((4,), seed=1) + 0.1]),
    "minimum-broadcast": (lambda m, a, b: m.minimum(a, b), [distinct((2, 1, 4)), distinct((3, 1), seed=1) + 0.1]),
    "unsqueeze": (lambda m, x: x.unsqueeze(1).unsqueeze(-1), [normal((3, 4))]),
    "squeeze": (lambda m, x: x.squeeze(), [normal((1, 3, 1, 4))]),
    "squeeze-dims": (lambda m, x: x.squeeze((0, 1)).squeeze(-1), [normal((1, 3, 1, 4, 1))]),
    "expand": (lambda m, x: x.expand(2, 3, -1, 4), [normal((3, 1, 4))]),
    "expand_as": (lambda m, x, y: x.expand_as(y) * y, [normal((3, 1)), normal((2, 3, 4))]),
    "repeat": (lambda m, x: x.repeat(2, 1, 3), [normal((3, 4))]),
    "flip": (lambda m, x: x.flip(0, 2) * m.arange(4.0, dtype=x.dtype), [normal((2, 3, 4))]),
    "flip-list": (lambda m, x: x.flip([1]) * m.arange(4.0, dtype=x.dtype), [normal((3, 4))]),
    "split": (lambda m, x: m.cat(x.split(3, dim=1)[::-1], 1), [normal((2, 7))]),
    "split-sizes": (lambda m, x: m.cat([p * (i + 1) for i, p in enumerate(x.split([1, 0, 2], 0))]), [normal((3, 2))]),
    "chunk": (lambda m, x: m.cat([p * (i + 1) for i, p in enumerate(x.chunk(3, dim=-1))], 1), [normal((2, 7))]),
    "unbind": (lambda m, x: m.stack([p * (i + 1) for i, p in enumerate(x.unbind(1))]), [normal((2, 3, 4))]),
    "contiguous": (lambda m, x: x.transpose(0, 1).contiguous().view(-1), [normal((3, 4))]),
    "gather": (lambda m, x: x.gather(1, idx(m, [[0, 0, 2], [3, 1, 1], [2, 2, 2]])), [normal((3, 4))]),
    "gather-dim0": (lambda m, x: x.gather(0, idx(m, [[2, 0, 1, 1], [0, 0, 2, 1]])), [normal((3, 4))]),
    "index_select": (lambda m, x: x.index_select(2, idx(m, [3, 0, 3])), [normal((2, 3, 4))]),
    "topk": (lambda m, x: x.topk(2).values, [distinct((3, 5))]),
    "topk-smallest": (lambda m, x: x.topk(3, dim=0, largest=False).values, [distinct((4, 3))]),
}


@pytest.mark.parametrize("name", list(OPS))
def test_gradcheck(name):
    fn, arrays = OPS[name]
    assert gradcheck(lambda *xs: fn(mg, *xs), [T(a) for a in arrays], name=name)


@pytest.mark.torch
@pytest.mark.parametrize("name", list(OPS))
def test_matches_torch(name):
    torch = torch_()
    fn, arrays = OPS[name]
    xs_mg = [T(a) for a in arrays]
    xs_th = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out_mg, out_th = fn(mg, *xs_mg), fn(torch, *xs_th)
    assert out_mg.shape == tuple(out_th.shape)
    np.testing.assert_allclose(out_mg.detach().numpy(), out_th.detach().numpy(), rtol=RTOL, atol=ATOL)
    cot = np.random.default_rng(1).standard_normal(out_mg.shape)
    out_mg.backward(mg.tensor(cot, dtype="float64"))
    out_th.backward(torch.tensor(cot))
    for i, (a, b) in enumerate(zip(xs_mg, xs_th)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=RTOL, atol=ATOL, err_msg=f"input {i}")


# ----------------------------------------------------------------------------- semantics PyTorch users rely on

def test_max_and_min_along_a_dim_return_values_and_indices():
    x = T([[1.0, 7.0, 3.0], [4.0, 0.0, 6.0]])
    out = x.max(1)
    assert type(out).__name__ == "max" and out._fields == ("values", "indices")
    values, indices = out  # the tutorials' `_, predicted = torch.max(outputs, 1)`
    assert values.tolist() == [7.0, 6.0] and indices.tolist() == [1, 2] and indices.dtype == np.int64
    assert x.min(dim=0).indices.tolist() == [0, 1, 0]
    assert x.argmin(1).tolist() == [0, 1] and x.argmin().item() == 4
    assert x.max(1, keepdim=True).indices.shape == (2, 1)
    with pytest.raises(TypeError, match=r"max: dim must be one int, got \(0, 1\); amax\(dim=...\) takes several dims"):
        x.max(dim=(0, 1))


def test_max_along_a_dim_of_a_0d_tensor():
    values, indices = T(2.5).max(0)
    assert values.shape == () and values.item() == 2.5 and indices.item() == 0


@pytest.mark.torch
def test_gradients_at_ties_follow_torch():
    """max(dim) gives the whole gradient to the index it returns; max(), amax and maximum share it."""
    torch = torch_()
    a = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    b = np.array([[1.0, 5.0, 3.0], [2.0, 1.0, 0.0]])
    cases = [lambda m, x, y: x.max(1).values, lambda m, x, y: x.min(dim=0).values, lambda m, x, y: x.max(),
             lambda m, x, y: x.amax(1), lambda m, x, y: x.amin(0), lambda m, x, y: m.maximum(x, y),
             lambda m, x, y: m.minimum(x, y), lambda m, x, y: x.topk(1).values]
    for k, fn in enumerate(cases):
        xs_mg, xs_th = [T(a), T(b)], [torch.tensor(v, requires_grad=True) for v in (a, b)]
        fn(mg, *xs_mg).sum().backward()
        fn(torch, *xs_th).sum().backward()
        for got, want in zip(xs_mg, xs_th):
            expected = np.zeros_like(a) if want.grad is None else want.grad.numpy()
            actual = np.zeros_like(a) if got.grad is None else got.grad.numpy()
            np.testing.assert_array_equal(actual, expected, err_msg=f"case {k}")


@pytest.mark.torch
def test_norm_and_prod_at_zero_follow_torch():
    torch = torch_()
    for p in (2, 3, 1, "fro"):
        x, xt = T(np.zeros((2, 3))), torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
        x.norm(p, dim=1).sum().backward()  # sqrt(0) has an infinite derivative: 0, as PyTorch, not nan
        xt.norm(p, dim=1).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())
    mixed = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, -2.0]])
    x, xt = T(mixed), torch.tensor(mixed, requires_grad=True)
    x.norm(dim=1).sum().backward()
    xt.norm(dim=1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=RTOL)
    zeros = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 1.0]])   # one zero: only it gets a gradient; two: none
    x, xt = T(zeros), torch.tensor(zeros, requires_grad=True)
    x.prod(1).sum().backward()
    xt.prod(1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())
    assert x.grad.tolist() == [[6.0, 0.0, 0.0], [0.0, 0.0, 0.0]]


@pytest.mark.torch
def test_var_std_arguments_follow_torch():
    torch = torch_()
    a = normal((3, 4))
    x, xt = T(a, requires_grad=False), torch.tensor(a)
    for args, kwargs in [((), {}), ((False,), {}), ((1,), {}), ((1, False, True), {}), ((0,), {"keepdim": True}),
                         ((), {"correction": 0}), (((0, 1),), {"correction": 3}), ((1,), {"unbiased": True})]:
        for op in ("var", "std"):
            np.testing.assert_allclose(getattr(x, op)(*args, **kwargs).numpy(),
                                       getattr(xt, op)(*args, **kwargs).numpy(), rtol=RTOL, err_msg=f"{op}{args}")
    assert math.isnan(T([1.0]).var().item())             # one element, n - 1 = 0: nan, as in PyTorch
    assert T([1.0]).var(correction=0).item() == 0.0
    with pytest.raises(TypeError, match="var: give unbiased or correction, not both"):
        x.var(unbiased=False, correction=0)


@pytest.mark.torch
def test_logsumexp_is_stable_and_handles_infinities_like_torch():
    torch = torch_()
    a = np.array([[1000.0, 1000.0, -1000.0], [-math.inf, -math.inf, -math.inf], [math.inf, 0.0, 1.0]])
    for dim in (1, 0, (0, 1)):
        got = T(a, requires_grad=False).logsumexp(dim).numpy()
        want = torch.tensor(a).logsumexp(dim).numpy()
        np.testing.assert_allclose(got, want, rtol=RTOL)
    assert T(np.zeros((2, 0)), requires_grad=False).logsumexp(1).tolist() == [-math.inf, -math.inf]


@pytest.mark.torch
def test_topk_indices_and_order_follow_torch():
    torch = torch_()
    a = np.array([[1.0, 3.0, 4.0, 2.0, -1.0], [0.5, np.nan, 2.0, 2.5, 7.0]])
    for k, largest in ((2, True), (3, False), (5, True), (0, True)):
        got = T(a, requires_grad=False).topk(k, largest=largest)
        want = torch.tensor(a).topk(k, largest=largest)
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    assert type(got).__name__ == "topk"
    ties = T([2.0, 1.0, 2.0, 1.0], requires_grad=False)  # PyTorch leaves the order of ties open; here: lower first
    assert ties.topk(3).indices.tolist() == [0, 2, 1] and ties.topk(3, largest=False).indices.tolist() == [1, 3, 0]
    with pytest.raises(ValueError, match=r"topk: k=6 is out of range for dim -1 of size 5"):
        T(a).topk(6)


@pytest.mark.torch
def test_shape_ops_match_torch_shapes_and_dtypes():
    torch = torch_()
    a = np.arange(12).reshape(1, 3, 1, 4)
    x, xt = mg.tensor(a), torch.tensor(a)
    for fn in (lambda t: t.squeeze(), lambda t: t.squeeze(0), lambda t: t.squeeze(1), lambda t: t.squeeze((0, 2)),
               lambda t: t.unsqueeze(0), lambda t: t.unsqueeze(-1), lambda t: t.unsqueeze(2), lambda t: t.flip(()),
               lambda t: t.expand(2, -1, 5, -1), lambda t: t.expand((2, 1, 3, 1, 4)), lambda t: t.repeat(1, 1, 2, 1, 3),
               lambda t: t.flip(dims=(1, 3)), lambda t: t.cumsum(3), lambda t: t.prod(1), lambda t: t.amax(),
               lambda t, m: t.index_select(3, m.tensor([0, 0])), lambda t, m: m.cat(t.split([1, 3], 3)[::-1], 3)):
        two = fn.__code__.co_argcount == 2
        got, want = (fn(x, mg), fn(xt, torch)) if two else (fn(x), fn(xt))
        assert got.shape == tuple(want.shape) and got.dtype.name == str(want.dtype).replace("torch.", "")
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    for n in (2, 3, 4, 5):
        assert [p.shape for p in x.chunk(n, dim=3)] == [tuple(p.shape) for p in xt.chunk(n, dim=3)]
        assert [p.shape for p in x.split(n, dim=-1)] == [tuple(p.shape) for p in xt.split(n, dim=-1)]
    assert [p.shape for p in x.unbind(1)] == [tuple(p.shape) for p in xt.unbind(1)]


def test_views_and_copies_as_in_torch():
    """split, chunk, unbind and expand are views of the tensor; flip and repeat are copies."""
    x = mg.arange(6.0).reshape(2, 3)
    with mg.no_grad():
        x.split(1)[1].add_(10)
        x.unbind(1)[0].mul_(-1)
        f = x.flip(0)
        f += 100
        r = x.repeat(2, 1)
        r += 1000
    assert x.tolist() == [[-0.0, 1.0, 2.0], [-13.0, 14.0, 15.0]]
    assert x.contiguous() is x
    e = mg.ones(2, 1).expand(2, 3)
    with pytest.raises(RuntimeError, match=r"\+=: this tensor is an expand\(\)ed view.*cannot be written in place"):
        e += 1
    with pytest.raises(RuntimeError, match=r"fill_: this tensor is an expand\(\)ed view"):
        e.fill_(0)


def test_shape_op_errors_say_what_to_do():
    x = mg.randn(3, 1)
    with pytest.raises(ValueError, match=r"expand: dim 0 of shape \(3, 1\) has size 3, which cannot become 4: "
                                         r"only size-1 dims expand; repeat\(\) copies data"):
        x.expand(4, 5)
    with pytest.raises(ValueError, match=r"expand: 1 sizes \(5,\) for a tensor of 2 dims"):
        x.expand(5)
    with pytest.raises(ValueError, match=r"expand: -1 .* names a new leading dim"):
        x.expand(-1, 3, 1)
    with pytest.raises(ValueError, match=r"repeat: 1 repeat counts \(2,\) for a tensor of 2 dims"):
        x.repeat(2)
    with pytest.raises(ValueError, match=r"split: sizes \[1, 1\] add up to 2, but dim 0 of shape \(3, 1\) has size 3"):
        x.split([1, 1])
    with pytest.raises(IndexError, match=r"unbind: a 0-d tensor has no dim"):
        mg.tensor(1.0).unbind()
    with pytest.raises(IndexError, match=r"unsqueeze: dim 3 is out of range"):
        x.unsqueeze(3)
    with pytest.raises(IndexError, match=r"gather: index out of range: the indices span \[0, 3\], but dim 0 of shape "
                                         r"\(3, 1\) has 3 entries \(0 to 2\)"):
        x.gather(0, mg.tensor([[0], [3]]))
    with pytest.raises(IndexError, match=r"index_select: index out of range: the indices span \[-1, -1\]"):
        x.index_select(0, mg.tensor([-1]))
    with pytest.raises(TypeError, match=r"gather: the index must be an integer tensor, got float32"):
        x.gather(0, mg.tensor([[0.0]]))
    with pytest.raises(ValueError, match=r"gather: index must have as many dims as the input"):
        x.gather(0, mg.tensor([0]))
    with pytest.raises(ValueError, match=r"gather: index of shape \(1, 2\) is larger than the input's shape"):
        x.gather(0, mg.tensor([[0, 0]]))
    with pytest.raises(TypeError, match=r"prod: dim must be one int or None"):
        x.prod(dim=(0, 1))
    with pytest.raises(ValueError, match=r"norm: p must be 'fro', 0, a number > 0, inf or -inf, got 'nuc'"):
        x.norm("nuc")


def test_norm_p0_counts_nonzeros_and_integer_inputs_are_refused_as_in_torch():
    assert mg.tensor([0.0, 2.0, -1.0]).norm(0).item() == 2.0
    n = mg.tensor([3, 4]).float().norm()
    assert n.dtype == np.float32 and n.item() == 5.0
    assert mg.tensor([1, 2, 3]).float().var().item() == 1.0
    for reduce in (lambda t: t.norm(), lambda t: t.var()):  # integers were made float32 once; PyTorch refuses them
        with pytest.raises(TypeError, match=r"(norm|var): needs a floating-point input, got int64.*\.float\(\)"):
            reduce(mg.tensor([3, 4]))


# ----------------------------------------------------------------------------- functional

def ce_case(logits_shape, seed=0):
    """Logits and class targets of any (N, C, d1, ...) shape, every third target ignored."""
    rng = np.random.default_rng(seed)
    c = logits_shape[1] if len(logits_shape) > 1 else logits_shape[0]
    target_shape = logits_shape[:1] + logits_shape[2:] if len(logits_shape) > 1 else ()
    t = rng.integers(0, c, target_shape)
    if t.ndim:
        t.reshape(-1)[::3] = -100
    return rng.standard_normal(logits_shape), t, rng.uniform(0.5, 2.0, c)


CE_SHAPES = [(5, 4), (3, 4, 2, 5), (2, 3, 6), (4,)]


@pytest.mark.torch
@pytest.mark.parametrize("shape", CE_SHAPES, ids=str)
@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_torch(shape, weighted, label_smoothing, reduction):
    torch = torch_()
    import torch.nn.functional as TF
    z, t, w = ce_case(shape)
    a, b = T(z), torch.tensor(z, requires_grad=True)
    kw = dict(reduction=reduction, label_smoothing=label_smoothing)
    got = F.cross_entropy(a, mg.tensor(t), weight=T(w, False) if weighted else None, **kw)
    want = TF.cross_entropy(b, torch.tensor(t), weight=torch.tensor(w) if weighted else None, **kw)
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=RTOL, atol=ATOL)
    cot = np.random.default_rng(1).standard_normal(got.shape)
    got.backward(mg.tensor(cot, dtype="float64"))
    want.backward(torch.tensor(cot))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.torch
@pytest.mark.parametrize("shape", [(5, 4), (3, 4, 2, 5), (4,)], ids=str)
@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.3])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_probability_targets_matches_torch(shape, weighted, label_smoothing, reduction):
    torch = torch_()
    import torch.nn.functional as TF
    z, _, w = ce_case(shape)
    class_dim = 0 if len(shape) == 1 else 1
    p = np.random.default_rng(2).dirichlet(np.ones(shape[class_dim]), size=shape[:class_dim] + shape[class_dim + 1:])
    p = np.moveaxis(p, -1, class_dim)
    a, b = T(z), torch.tensor(z, requires_grad=True)
    pa, pb = T(p), torch.tensor(p, requires_grad=True)  # the targets' gradient too
    kw = dict(reduction=reduction, label_smoothing=label_smoothing)
    got = F.cross_entropy(a, pa, weight=T(w, False) if weighted else None, **kw)
    want = TF.cross_entropy(b, pb, weight=torch.tensor(w) if weighted else None, **kw)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=RTOL, atol=ATOL)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(pa.grad.numpy(), pb.grad.numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4)], ids=str)
def test_cross_entropy_gradcheck_weighted_smoothed(shape):
    z, t, w = ce_case(shape)
    target, weight = mg.tensor(t), T(w, False)
    assert gradcheck(lambda z: F.cross_entropy(z, target, weight=weight, label_smoothing=0.1), [T(z)])
    assert gradcheck(lambda z: F.cross_entropy(z, target, reduction="none", label_smoothing=0.25), [T(z)])
    p = np.random.default_rng(3).uniform(0, 1, shape)
    assert gradcheck(lambda z, p: F.cross_entropy(z, p, weight=weight, label_smoothing=0.1), [T(z), T(p)])


@pytest.mark.torch
def test_cross_entropy_when_the_targets_weigh_nothing():
    torch = torch_()
    import torch.nn.functional as TF
    z, t = normal((3, 4)), np.array([1, -100, 1])
    w = np.array([1.0, 0.0, 1.0, 1.0])  # the only class targeted weighs 0: 0 / 0, nan as in PyTorch
    a = T(z)
    loss = F.cross_entropy(a, mg.tensor(t), weight=T(w, False), label_smoothing=0.1)
    want = TF.cross_entropy(torch.tensor(z), torch.tensor(t), weight=torch.tensor(w), label_smoothing=0.1)
    assert math.isnan(loss.item()) and math.isnan(want.item())
    loss.backward()
    assert np.array_equal(a.grad.numpy(), np.zeros((3, 4)))  # zero, not nan


def test_cross_entropy_errors_name_the_shapes():
    z = mg.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"cross_entropy: got logits and targets of shapes \(2, 3, 4\) and \(2, 3\): "
                                         r"class indices must have shape \(2, 4\) \(the logits' without the class "
                                         r"dim, 1\), probabilities the logits' shape. Classes in the last dim"):
        F.cross_entropy(z, mg.zeros(2, 3, dtype="int64"))
    with pytest.raises(ValueError, match=r"cross_entropy: weight must be a float32 tensor of shape \(3,\), one per "
                                         r"class, got float32 \(4,\)"):
        F.cross_entropy(z, mg.zeros(2, 4, dtype="int64"), weight=mg.ones(4))
    with pytest.raises(TypeError, match=r"cross_entropy: probability targets must have the logits' dtype float32, "
                                        r"got float64; convert them with .to\('float32'\)"):
        F.cross_entropy(z, mg.zeros(2, 3, 4, dtype="float64"))
    with pytest.raises(TypeError, match=r"cross_entropy: targets of the batch's shape must be class indices"):
        F.cross_entropy(z, mg.zeros(2, 4))
    with pytest.raises(ValueError, match=r"cross_entropy: label_smoothing must be in \[0, 1\], got 1.5"):
        F.cross_entropy(z, mg.zeros(2, 4, dtype="int64"), label_smoothing=1.5)
    with pytest.raises(IndexError, match=r"cross_entropy: target 3 is out of range for 3 classes"):
        F.cross_entropy(z, mg.full((2, 4), 3, dtype="int64"))


@pytest.mark.torch
@pytest.mark.parametrize("padding_idx", [0, 2, -1])
def test_embedding_padding_row_gets_no_gradient(padding_idx):
    torch = torch_()
    import torch.nn.functional as TF
    w = normal((5, 3))
    ids = np.array([[0, 2, 4, 2], [1, 4, 0, 3]])
    a, b = T(w), torch.tensor(w, requires_grad=True)
    got = F.embedding(mg.tensor(ids), a, padding_idx=padding_idx)
    want = TF.embedding(torch.tensor(ids), b, padding_idx=padding_idx)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())  # the row itself is returned
    cot = normal(got.shape, seed=1)
    got.backward(mg.tensor(cot, dtype="float64"))
    want.backward(torch.tensor(cot))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=RTOL)
    assert not a.grad.numpy()[padding_idx].any()
    # finite differences see the padding row's values flow out: check the other rows' gradients only
    pad = padding_idx % 5
    others, row = T(np.delete(w, pad, axis=0)), T(w[pad:pad + 1], requires_grad=False)
    table = lambda others: mg.cat([others[:pad], row, others[pad:]])  # noqa: E731
    assert gradcheck(lambda others: F.embedding(mg.tensor(ids), table(others), padding_idx=padding_idx), [others])


def test_nn_embedding_padding_idx_starts_at_zero_and_stays_there():
    emb = nn.Embedding(6, 4, padding_idx=-2)
    assert emb.padding_idx == 4 and not emb.weight.data[4].any() and emb.weight.data[3].any()
    assert "padding_idx=4" in repr(emb)
    opt = mg.optim.SGD(emb.parameters(), lr=1.0)
    emb(mg.tensor([[4, 1, 4]])).sum().backward()
    opt.step()
    assert not emb.weight.data[4].any()
    with pytest.raises(ValueError, match=r"Embedding: padding_idx 6 is out of range for 6 embeddings"):
        nn.Embedding(6, 4, padding_idx=6)
    with pytest.raises(ValueError, match=r"embedding: padding_idx -6 is out of range for 5 embeddings"):
        F.embedding(mg.tensor([0]), mg.randn(5, 2), padding_idx=-6)


# ----------------------------------------------------------------------------- helpers

def test_no_grad_decorates_with_or_without_parentheses():
    x = mg.randn(3, requires_grad=True)

    @mg.no_grad
    def bare(t):
        """Doubles."""
        return t * 2

    @mg.no_grad()
    def called(t):
        return t * 2

    @mg.enable_grad
    def back_on(t):
        return t * 2

    assert not bare(x).requires_grad and not called(x).requires_grad
    assert bare.__name__ == "bare" and bare.__doc__ == "Doubles."
    with mg.no_grad():
        assert back_on(x).requires_grad
    assert mg.is_grad_enabled()
    with pytest.raises(TypeError, match=r"no_grad: takes no arguments, got 3; write `with mg.no_grad\(\):`"):
        mg.no_grad(3)


def test_multinomial_draws_by_weight_from_minigrad_generator():
    w = mg.tensor([[1.0, 0.0, 3.0, 4.0], [0.0, 5.0, 0.0, 5.0]])  # weights need not sum to 1
    mg.manual_seed(1)
    draws = mg.multinomial(w, 20000, replacement=True)
    assert draws.shape == (2, 20000) and draws.dtype == np.int64
    freq = np.stack([np.bincount(row, minlength=4) for row in draws.numpy()]) / 20000
    np.testing.assert_allclose(freq, w.numpy() / w.numpy().sum(1, keepdims=True), atol=0.015)
    mg.manual_seed(1)
    assert np.array_equal(mg.multinomial(w, 20000, replacement=True).numpy(), draws.numpy())  # seeded

    firsts = np.array([w[0].multinomial(1).item() for _ in range(4000)])  # nanoGPT's sampling: one draw
    np.testing.assert_allclose(np.bincount(firsts, minlength=4) / 4000, [0.125, 0, 0.375, 0.5], atol=0.03)
    no_repeat = mg.multinomial(w[0], 3).numpy()
    assert sorted(no_repeat) == [0, 2, 3]
    with pytest.raises(ValueError, match="cannot draw 3 samples without replacement from a row with only 2 non-zero"):
        mg.multinomial(w, 3)
    with pytest.raises(ValueError, match="weights must be finite, non-negative"):
        mg.multinomial(mg.tensor([1.0, -1.0]), 1)


@pytest.mark.torch
@pytest.mark.parametrize("norm_type", [2.0, 1, 3.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    torch = torch_()
    shapes = [(3, 4), (4,), (2, 2, 2)]
    grads = [normal(s, seed=i) for i, s in enumerate(shapes)]
    ps = [T(np.zeros(s)) for s in shapes] + [T(np.zeros(2))]   # the last has no gradient: skipped
    qs = [torch.zeros(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    for p, q, g in zip(ps, qs, grads):
        p.grad, q.grad = T(g, False), torch.tensor(g)
    total = nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type)
    want = torch.nn.utils.clip_grad_norm_(qs, max_norm, norm_type=norm_type)
    np.testing.assert_allclose(total.item(), want.item(), rtol=RTOL)
    for p, q in zip(ps, qs):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=RTOL)
    assert ps[-1].grad is None


def test_clip_grad_norm_refuses_a_nonfinite_norm_when_asked():
    p = T(np.zeros(2))
    p.grad = T([math.inf, 1.0], False)
    with pytest.raises(RuntimeError, match="clip_grad_norm_: the total norm of the gradients is inf"):
        nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    assert nn.utils.clip_grad_norm_([], 1.0).item() == 0.0


def test_nn_init_fills_in_place_from_minigrad_generator():
    lin = nn.Linear(200, 300)
    w = lin.weight
    mg.manual_seed(3)
    assert nn.init.normal_(w, mean=0.5, std=0.02) is w
    assert abs(w.data.mean() - 0.5) < 1e-3 and abs(w.data.std() - 0.02) < 1e-3 and w.dtype == np.float32
    first = w.data.copy()
    mg.manual_seed(3)
    nn.init.normal_(w, mean=0.5, std=0.02)
    assert np.array_equal(w.data, first)
    nn.init.uniform_(w, -0.1, 0.2)
    assert w.data.min() >= -0.1 and w.data.max() < 0.2 and w.data.std() > 0.05
    nn.init.zeros_(lin.bias)
    assert not lin.bias.data.any()
    nn.init.ones_(lin.bias)
    nn.init.constant_(w, 0.25)
    assert (lin.bias.data == 1).all() and (w.data == 0.25).all() and w.requires_grad and w.is_leaf


# ----------------------------------------------------------------------------- FLOPs

def test_composed_ops_count_exactly_their_primitives():
    x = T(normal((3, 4)))
    with mg.profile() as prof:
        x.var(dim=1)           # mean (12), sub (12), mul (12), sum (12 - 3), div (3)
    assert {op: prof.flops("forward", op=op) for op in ("mean", "sub", "mul", "sum", "div")} == \
        {"mean": 12, "sub": 12, "mul": 12, "sum": 9, "div": 3}
    assert prof.flops("forward") == 48
    with mg.profile() as prof:
        x.norm(dim=1).sum().backward()   # mul, sum, sqrt, then the loss's sum
    assert prof.flops("forward") == 12 + 9 + 3 + 2
    assert prof.flops("backward", op="sqrt") == 2 * 3 and prof.flops("backward", op="mul") == 2 * 12
