"""Finite-difference gradient checks (float64) of every differentiable op in minigrad.

Each test builds float64 inputs that require grad and calls minigrad.testing.gradcheck, which
compares backward's gradient with central differences element by element. Shapes (broadcasting
pairs, size-1 dims, 0-d scalars) are drawn by hypothesis; values come from a seeded NumPy
generator so that they can be kept away from kinks (relu at 0), poles (1/x near 0) and ties (max).
"""
import re

import numpy as np
import pytest
import hypothesis.extra.numpy as hnp
from hypothesis import HealthCheck, given, settings, strategies as st

import minigrad as mg
import minigrad.functional as F
from minigrad import ops
from minigrad.gpt import CausalSelfAttention, GPTConfig
from minigrad.testing import GradcheckError, gradcheck

# conftest's autouse seeding fixture is function-scoped; it only reseeds, so sharing it is harmless
FAST = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3)      # includes 0-d and size-1 dims
PAIRS = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=3)
SEEDS = st.integers(0, 2 ** 16)


def T(a, requires_grad=True):
    """A float64 minigrad tensor (copied) that requires grad."""
    return mg.tensor(np.asarray(a, dtype=np.float64), dtype="float64", requires_grad=requires_grad)


def normal(rng, shape):
    return rng.standard_normal(shape)


def positive(rng, shape, low=0.5, high=2.0):
    return rng.uniform(low, high, size=shape)


def away_from_zero(rng, shape, low=0.5, high=2.0):
    """Values with |x| in [low, high] and a random sign: no pole, no kink."""
    return rng.uniform(low, high, size=shape) * rng.choice([-1.0, 1.0], size=shape)


def distinct(rng, shape):
    """Tie-free values (all elements differ by >= 0.25), so max is differentiable everywhere."""
    n = int(np.prod(shape, dtype=np.int64))
    return (rng.permutation(n) * 0.25 - n * 0.125 + rng.uniform(0, 0.05, size=n)).reshape(shape)


def dims_for(draw, ndim):
    """A dim argument for a reduction over a tensor of ndim dims: None, an int (maybe negative) or a tuple."""
    if ndim == 0:
        return None
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    axes = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(a - ndim if draw(st.booleans()) else a for a in axes)   # mix positive and negative


# ----------------------------------------------------------------------------- elementwise binary

BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}


@FAST
@given(shapes=PAIRS, op=st.sampled_from(sorted(BINARY)), seed=SEEDS)
def test_binary_broadcasting(shapes, op, seed):
    rng = np.random.default_rng(seed)
    sa, sb = shapes.input_shapes
    a = T(normal(rng, sa))
    b = T(away_from_zero(rng, sb) if op == "div" else normal(rng, sb))
    out = BINARY[op](a, b)
    assert out.shape == shapes.result_shape
    assert gradcheck(BINARY[op], [a, b], name=f"{op}{sa}{sb}")


@FAST
@given(shapes=PAIRS, op=st.sampled_from(sorted(BINARY)), which=st.sampled_from([0, 1]), seed=SEEDS)
def test_binary_only_one_input_requires_grad(shapes, op, which, seed):
    rng = np.random.default_rng(seed)
    sa, sb = shapes.input_shapes
    a = T(normal(rng, sa), requires_grad=which == 0)
    b = T(away_from_zero(rng, sb) if op == "div" else normal(rng, sb), requires_grad=which == 1)
    assert gradcheck(BINARY[op], [a, b], name=f"{op}{sa}{sb}")
    assert (a.grad is None) == (which == 1) and (b.grad is None) == (which == 0)


SCALAR_OPS = {
    "x+s": lambda x, s: x + s, "s+x": lambda x, s: s + x,
    "x-s": lambda x, s: x - s, "s-x": lambda x, s: s - x,
    "x*s": lambda x, s: x * s, "s*x": lambda x, s: s * x,
    "x/s": lambda x, s: x / s, "s/x": lambda x, s: s / x,
}


@FAST
@given(shape=SHAPES, op=st.sampled_from(sorted(SCALAR_OPS)), s=st.sampled_from([2.5, -1.5, 3, -2]), seed=SEEDS)
def test_binary_with_python_scalar(shape, op, s, seed):
    rng = np.random.default_rng(seed)
    x = T(away_from_zero(rng, shape))
    fn = SCALAR_OPS[op]
    np.testing.assert_allclose(fn(x, s).detach().numpy(), fn(x.detach().numpy(), s), rtol=1e-14)
    assert gradcheck(lambda x: fn(x, s), [x], name=f"{op} s={s}")


def test_same_tensor_on_both_sides():
    x = T(np.random.default_rng(1).uniform(0.5, 2, (2, 3)))
    for op in ("add", "sub", "mul", "div"):
        assert gradcheck(lambda x: BINARY[op](x, x), [x], name=f"x {op} x")


# ----------------------------------------------------------------------------- pow, neg, unary

@FAST
@given(shape=SHAPES, p=st.sampled_from([2, 0.5, -1, 3, 1.5, -0.5, 1]), seed=SEEDS)
def test_pow_scalar_exponent(shape, p, seed):
    rng = np.random.default_rng(seed)
    # fractional exponents need positive inputs; integer ones take either sign (away from 0 for p < 0)
    x = T(positive(rng, shape) if isinstance(p, float) else away_from_zero(rng, shape))
    np.testing.assert_allclose((x ** p).detach().numpy(), x.detach().numpy() ** p, rtol=1e-14)
    assert gradcheck(lambda x: x ** p, [x], name=f"pow p={p}")
    assert gradcheck(lambda x: x.pow(p), [x], name=f"Tensor.pow p={p}")


def test_rpow_python_base():
    x = T([[-1.0, 0.3, 2.0]])
    np.testing.assert_allclose((2.0 ** x).detach().numpy(), 2.0 ** np.array([[-1.0, 0.3, 2.0]]), rtol=1e-14)
    assert gradcheck(lambda x: 2.0 ** x, [x], name="rpow")


UNARY = {
    "neg": (lambda x: -x, normal),
    "exp": (lambda x: x.exp(), normal),
    "log": (lambda x: x.log(), positive),
    "sqrt": (lambda x: x.sqrt(), positive),
    "tanh": (lambda x: x.tanh(), normal),
    "sigmoid": (lambda x: x.sigmoid(), normal),
    "relu": (lambda x: x.relu(), away_from_zero),   # no input near the kink at 0
    "F.relu": (F.relu, away_from_zero),
    "F.tanh": (F.tanh, normal),
    "F.sigmoid": (F.sigmoid, normal),
    "abs": (lambda x: x.abs(), away_from_zero),
}


@FAST
@given(shape=SHAPES, name=st.sampled_from(sorted(UNARY)), seed=SEEDS)
def test_unary(shape, name, seed):
    fn, draw = UNARY[name]
    x = T(draw(np.random.default_rng(seed), shape))
    assert gradcheck(fn, [x], name=name)


def test_relu_zero_gradient_for_negative_inputs():
    x = T([-2.0, -0.5, 0.5, 2.0])
    x.relu().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 1, 1])


def test_sigmoid_large_inputs_finite():
    x = T([-800.0, -30.0, 0.0, 30.0, 800.0])
    y = x.sigmoid()
    y.sum().backward()
    assert np.isfinite(y.detach().numpy()).all() and np.isfinite(x.grad.numpy()).all()
    x2 = T([-4.0, -1.0, 0.0, 1.0, 4.0])
    assert gradcheck(lambda x: x.sigmoid(), [x2], name="sigmoid")


# ----------------------------------------------------------------------------- matmul

MATMUL_CASES = [
    ((3, 4), (4, 2)),            # 2-d
    ((2, 3, 4), (2, 4, 5)),      # batched 3-d
    ((2, 2, 3, 4), (2, 2, 4, 1)),  # batched 4-d
    ((2, 1, 3, 4), (5, 4, 2)),   # broadcasting batch dims
    ((1, 3, 4), (2, 4, 2)),      # size-1 batch dim broadcast
    ((2, 3, 4), (4, 5)),         # batch @ 2-d (one GEMM for the weight's gradient)
    ((3, 4), (2, 4, 5)),         # 2-d @ batch
    ((4,), (4, 3)),              # 1-d @ 2-d
    ((3, 4), (4,)),              # 2-d @ 1-d
    ((4,), (4,)),                # 1-d @ 1-d (dot)
    ((4,), (2, 4, 3)),           # 1-d @ batch
    ((2, 3, 4), (4,)),           # batch @ 1-d
    ((1, 1), (1, 1)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_CASES, ids=[f"{a}@{b}" for a, b in MATMUL_CASES])
@pytest.mark.parametrize("needs", ["both", "a", "b"])
def test_matmul(sa, sb, needs):
    rng = np.random.default_rng(0)
    a = T(normal(rng, sa), requires_grad=needs in ("both", "a"))
    b = T(normal(rng, sb), requires_grad=needs in ("both", "b"))
    out = a @ b
    np.testing.assert_allclose(out.detach().numpy(), np.matmul(a.detach().numpy(), b.detach().numpy()), rtol=1e-13)
    assert gradcheck(lambda a, b: a @ b, [a, b], name=f"matmul {sa}@{sb}")


@FAST
@given(shapes=hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=2, min_side=1, max_side=3),
       seed=SEEDS)
def test_matmul_hypothesis(shapes, seed):
    rng = np.random.default_rng(seed)
    sa, sb = shapes.input_shapes
    a, b = T(normal(rng, sa)), T(normal(rng, sb))
    assert (a @ b).shape == shapes.result_shape
    assert gradcheck(lambda a, b: a @ b, [a, b], name=f"matmul {sa}@{sb}")


# ----------------------------------------------------------------------------- reductions

@FAST
@given(shape=SHAPES, op=st.sampled_from(["sum", "mean"]), keepdim=st.booleans(), seed=SEEDS, data=st.data())
def test_sum_mean(shape, op, keepdim, seed, data):
    dim = dims_for(data.draw, len(shape))
    x = T(normal(np.random.default_rng(seed), shape))
    expected = getattr(np, op)(x.detach().numpy(), axis=dim, keepdims=keepdim)
    got = getattr(x, op)(dim=dim, keepdim=keepdim)
    assert got.shape == np.shape(expected)
    np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-13)
    assert gradcheck(lambda x: getattr(x, op)(dim=dim, keepdim=keepdim), [x], name=f"{op} dim={dim} keepdim={keepdim}")


@FAST
@given(shape=SHAPES, keepdim=st.booleans(), seed=SEEDS, data=st.data())
def test_max(shape, keepdim, seed, data):
    dim = dims_for(data.draw, len(shape))
    x = T(distinct(np.random.default_rng(seed), shape))
    expected = np.max(x.detach().numpy(), axis=dim, keepdims=keepdim)
    got = x.amax(dim=dim, keepdim=keepdim)           # amax: any dims, values only (max(dim) adds indices)
    assert got.shape == np.shape(expected)
    np.testing.assert_array_equal(got.detach().numpy(), expected)
    assert gradcheck(lambda x: x.amax(dim=dim, keepdim=keepdim), [x], name=f"amax dim={dim} keepdim={keepdim}")


def test_max_ties_share_gradient_equally():
    # documented: ties share the gradient equally, as torch.amax does (and torch.max() over all elements)
    x = T([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 0.0]])
    x.amax(dim=1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3, 0]], rtol=1e-15)
    y = T([2.0, 2.0])
    y.max().backward()
    np.testing.assert_allclose(y.grad.numpy(), [0.5, 0.5])


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "softmax", "log_softmax"])
def test_reduction_over_dim_of_0d_tensor(op):
    # torch.tensor(2.).sum(dim=0) == 2 (likewise amax, mean, softmax, log_softmax with dim=0 or -1)
    x = T(2.0)
    for dim in (0, -1):
        out = getattr(x, op)(dim=dim)
        assert out.shape == ()
        assert gradcheck(lambda x: getattr(x, op)(dim=dim), [x], name=f"{op} 0-d dim={dim}")


# ----------------------------------------------------------------------------- shape ops

SHAPE_OPS = [
    ("reshape", (2, 3, 4), lambda x: x.reshape(4, 6)),
    ("reshape_tuple", (2, 3, 4), lambda x: x.reshape((6, -1))),
    ("reshape_to_0d", (1, 1), lambda x: x.reshape(())),
    ("reshape_from_0d", (), lambda x: x.reshape(1, 1)),
    ("view", (2, 3, 4), lambda x: x.view(-1)),
    ("view_noncontiguous", (2, 3, 4), lambda x: x.transpose(0, 2).view(4, 6)),
    ("flatten", (2, 3, 4), lambda x: x.flatten()),
    ("flatten_1", (2, 3, 4), lambda x: x.flatten(1)),
    ("flatten_0_1", (2, 3, 4), lambda x: x.flatten(0, 1)),
    ("flatten_neg", (2, 3, 4), lambda x: x.flatten(-2, -1)),
    ("flatten_0d", (), lambda x: x.flatten()),
    ("transpose", (2, 3, 4), lambda x: x.transpose(0, 2)),
    ("transpose_neg", (2, 3, 4), lambda x: x.transpose(-1, -2)),
    ("transpose_mixed", (2, 3, 4), lambda x: x.transpose(-3, 1)),
    ("transpose_same", (2, 3), lambda x: x.transpose(1, -1)),
    ("permute", (2, 3, 4), lambda x: x.permute(2, 0, 1)),
    ("permute_tuple", (2, 3, 4), lambda x: x.permute((1, 2, 0))),
    ("permute_neg", (2, 3, 4), lambda x: x.permute(-1, 0, -2)),
    ("T_2d", (2, 3), lambda x: x.T),
    ("T_1d", (3,), lambda x: x.T),
    ("T_3d", (2, 3, 4), lambda x: x.T),
    ("T_0d", (), lambda x: x.T),
]


@pytest.mark.parametrize("name,shape,fn", SHAPE_OPS, ids=[c[0] for c in SHAPE_OPS])
def test_shape_ops(name, shape, fn):
    x = T(normal(np.random.default_rng(0), shape))
    # the values must be the NumPy equivalents
    ref = {"T_2d": lambda a: a.T, "T_3d": lambda a: a.transpose(2, 1, 0),
           "permute_neg": lambda a: a.transpose(2, 0, 1), "transpose_mixed": lambda a: a.swapaxes(0, 1)}
    if name in ref:
        np.testing.assert_array_equal(fn(x).detach().numpy(), ref[name](x.detach().numpy()))
    assert gradcheck(fn, [x], name=name)


# ----------------------------------------------------------------------------- indexing

X34 = (3, 4)
INDEX_CASES = [
    ("int", X34, lambda x: x[1]),
    ("neg_int", X34, lambda x: x[-1]),
    ("two_ints", X34, lambda x: x[1, 2]),
    ("neg_two_ints", X34, lambda x: x[-2, -1]),
    ("np_integer", X34, lambda x: x[np.int64(2)]),
    ("slice", X34, lambda x: x[:, 1:3]),
    ("slice_neg", X34, lambda x: x[-2:, :-1]),
    ("slice_step", X34, lambda x: x[::2, 1::2]),
    ("slice_neg_step", X34, lambda x: x[::-1, ::-2]),
    ("int_and_slice", X34, lambda x: x[1, 1:]),
    ("int_array_repeated", X34, lambda x: x[[0, 0, 2, 0]]),
    ("int_array_2d", X34, lambda x: x[np.array([[0, 1], [1, 1]])]),
    ("int_array_neg", X34, lambda x: x[[-1, 0, -1]]),
    ("int_array_dim1", X34, lambda x: x[:, [2, 2, 0]]),
    ("two_int_arrays", X34, lambda x: x[[0, 1, 0], [1, 1, 1]]),
    ("int_tensor", X34, lambda x: x[mg.tensor([2, 0, 2])]),
    ("int_tensor_0d", X34, lambda x: x[mg.tensor(1)]),
    ("bool_mask_full", X34, lambda x: x[np.array([[True, False, True, False],
                                                  [False, False, True, True],
                                                  [True, True, True, False]])]),
    ("bool_mask_rows", X34, lambda x: x[np.array([True, False, True])]),
    ("bool_mask_dim1", X34, lambda x: x[:, np.array([False, True, True, False])]),
    ("bool_mask_tensor", X34, lambda x: x[x.detach() > 0]),
    ("none", X34, lambda x: x[None]),
    ("none_middle", X34, lambda x: x[:, None, 1:]),
    ("ellipsis", (2, 3, 4), lambda x: x[..., 1]),
    ("ellipsis_none", (2, 3, 4), lambda x: x[0, ..., None]),
    ("ellipsis_array", (2, 3, 4), lambda x: x[..., [3, 3, 0]]),
    ("arrays_split_by_slice", (2, 3, 4), lambda x: x[[0, 1, 1], :, [1, 0, 1]]),
    ("array_then_slice", (2, 3, 4), lambda x: x[[1, 1], 1:]),
    ("empty_slice", X34, lambda x: x[2:2]),
    ("empty_slice_cat", X34, lambda x: mg.cat([x[1:1], x[:2]], dim=0)),
    ("empty_int_array", X34, lambda x: x[np.array([], dtype=np.int64)]),
    ("int_0d_result", (3,), lambda x: x[1]),
]


@pytest.mark.parametrize("name,shape,fn", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_indexing(name, shape, fn):
    x = T(normal(np.random.default_rng(3), shape))
    fn_np = {"int_tensor": lambda a: a[[2, 0, 2]], "int_tensor_0d": lambda a: a[1],
             "bool_mask_tensor": lambda a: a[a > 0],
             "empty_slice_cat": lambda a: a[:2]}.get(name, fn)
    np.testing.assert_array_equal(fn(x).detach().numpy(), fn_np(x.detach().numpy()))
    assert gradcheck(fn, [x], name=name)


def test_index_repeated_indices_add_up():
    x = T([1.0, 2.0, 3.0])
    x[[0, 0, 0, 2]].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 0.0, 1.0])


def test_empty_slice_gradient_is_zero():
    x = T(np.ones((3, 4)))
    (x[2:2].sum() + x[0, 0] * 2).backward()
    expected = np.zeros((3, 4))
    expected[0, 0] = 2
    np.testing.assert_array_equal(x.grad.numpy(), expected)


# ----------------------------------------------------------------------------- cat, stack

@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_cat(dim):
    rng = np.random.default_rng(0)
    sizes = [1, 2, 3]
    shapes = [tuple(s if d == dim % 2 else 2 for d in range(2)) for s in sizes]
    xs = [T(normal(rng, s)) for s in shapes]
    out = mg.cat(xs, dim=dim)
    np.testing.assert_array_equal(out.detach().numpy(), np.concatenate([x.detach().numpy() for x in xs], axis=dim))
    assert gradcheck(lambda *xs: mg.cat(xs, dim=dim), xs, name=f"cat dim={dim}")


def test_cat_some_inputs_without_grad_and_3d():
    rng = np.random.default_rng(1)
    a, b, c = T(normal(rng, (2, 1, 3))), T(normal(rng, (2, 2, 3)), requires_grad=False), T(normal(rng, (2, 3, 3)))
    assert gradcheck(lambda a, b, c: mg.cat([a, b, c], dim=1), [a, b, c], name="cat 3-d")
    assert b.grad is None


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_stack(dim):
    rng = np.random.default_rng(0)
    xs = [T(normal(rng, (2, 3))) for _ in range(3)]
    out = mg.stack(xs, dim=dim)
    np.testing.assert_array_equal(out.detach().numpy(), np.stack([x.detach().numpy() for x in xs], axis=dim))
    assert gradcheck(lambda *xs: mg.stack(xs, dim=dim), xs, name=f"stack dim={dim}")


def test_stack_0d():
    xs = [T(v) for v in (1.0, -2.0, 0.5)]
    assert mg.stack(xs).shape == (3,)
    assert gradcheck(lambda *xs: mg.stack(xs) * mg.tensor([1.0, 2.0, 3.0], dtype="float64"), xs, name="stack 0-d")


# ----------------------------------------------------------------------------- where, masked_fill, tril/triu

@FAST
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, min_side=1, max_side=3),
       seed=SEEDS)
def test_where_broadcasting(shapes, seed):
    rng = np.random.default_rng(seed)
    sc, sa, sb = shapes.input_shapes
    cond = rng.random(sc) < 0.5
    a, b = T(normal(rng, sa)), T(normal(rng, sb))
    out = mg.where(mg.tensor(cond), a, b)
    np.testing.assert_array_equal(out.detach().numpy(), np.where(cond, a.detach().numpy(), b.detach().numpy()))
    assert gradcheck(lambda a, b: mg.where(mg.tensor(cond), a, b), [a, b], name=f"where {sc} {sa} {sb}")


def test_where_with_python_scalars():
    rng = np.random.default_rng(0)
    x = T(normal(rng, (3, 4)))
    cond = x.detach() > 0
    assert gradcheck(lambda x: mg.where(cond, x, 0.0), [x], name="where x, 0")
    assert gradcheck(lambda x: mg.where(cond, -1.5, x * 2), [x], name="where -1.5, 2x")


@pytest.mark.parametrize("mask_shape", [(3, 4), (4,), (3, 1), ()])
@pytest.mark.parametrize("value", [0.0, -3.5, 100.0])
def test_masked_fill(mask_shape, value):
    rng = np.random.default_rng(0)
    x = T(normal(rng, (3, 4)))
    mask = rng.random(mask_shape) < 0.5
    out = x.masked_fill(mg.tensor(mask), value)
    np.testing.assert_array_equal(out.detach().numpy(), np.where(mask, value, x.detach().numpy()))
    assert gradcheck(lambda x: x.masked_fill(mg.tensor(mask), value), [x], name=f"masked_fill {mask_shape}")


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("diagonal", [-1, 0, 1, 2])
@pytest.mark.parametrize("shape", [(3, 4), (2, 4, 3)])
def test_tril_triu(upper, diagonal, shape):
    x = T(normal(np.random.default_rng(0), shape))
    fn = (lambda x: x.triu(diagonal)) if upper else (lambda x: x.tril(diagonal))
    ref = (np.triu if upper else np.tril)(x.detach().numpy(), diagonal)
    np.testing.assert_array_equal(fn(x).detach().numpy(), ref)
    assert gradcheck(fn, [x], name=f"{'triu' if upper else 'tril'}({diagonal}) {shape}")


# ----------------------------------------------------------------------------- casts

def test_to_float64_is_identity_on_float64():
    x = T([[1.0, -2.0]])
    assert x.to("float64") is x
    assert gradcheck(lambda x: x.to("float64") * 3, [x], name="to float64")


def test_cast_round_trip_gradient():
    # float64 -> float32 -> float64: the finite difference is only as good as float32, so a coarse eps
    x = T([[0.5, -1.25, 2.0], [3.0, -0.75, 1.5]])
    assert gradcheck(lambda x: x.to("float32").to("float64") * 2.0, [x], eps=1e-2, atol=1e-4, rtol=1e-4,
                     name="cast round trip")
    assert gradcheck(lambda x: x.double() * x, [x], name="double")


def test_cast_gradient_has_input_dtype():
    x = mg.tensor([1.0, 2.0, -3.0], dtype="float32", requires_grad=True)
    y = x.to("float64")
    assert y.dtype == np.float64
    (y * y).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.numpy(), np.array([2.0, 4.0, -6.0], dtype=np.float32))


# ----------------------------------------------------------------------------- functional

@pytest.mark.parametrize("in_shape", [(4,), (3, 4), (2, 3, 4)], ids=["1d", "2d", "3d"])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(in_shape, bias):
    rng = np.random.default_rng(0)
    x, w = T(normal(rng, in_shape)), T(normal(rng, (5, 4)))
    inputs = [x, w] + ([T(normal(rng, (5,)))] if bias else [])
    out = F.linear(*inputs)
    ref = x.detach().numpy() @ w.detach().numpy().T + (inputs[2].detach().numpy() if bias else 0)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-13)
    assert gradcheck(F.linear, inputs, name=f"linear {in_shape} bias={bias}")


def test_linear_frozen_weight_and_data_input():
    rng = np.random.default_rng(0)
    x, w, b = T(normal(rng, (3, 4)), requires_grad=False), T(normal(rng, (5, 4))), T(normal(rng, (5,)), False)
    assert gradcheck(F.linear, [x, w, b], name="linear dW only")
    assert x.grad is None and b.grad is None
    x2, w2 = T(normal(rng, (3, 4))), T(normal(rng, (5, 4)), requires_grad=False)
    assert gradcheck(F.linear, [x2, w2], name="linear dx only")


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax, lambda x, dim: x.softmax(dim),
                                lambda x, dim: x.log_softmax(dim)],
                         ids=["F.softmax", "F.log_softmax", "Tensor.softmax", "Tensor.log_softmax"])
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 4), 0), ((3, 4), 1), ((3, 4), -1),
                                       ((2, 3, 4), 1), ((2, 3, 4), -3), ((2, 3, 4), -1), ((1, 1), 1)])
def test_softmax_log_softmax(fn, shape, dim):
    x = T(normal(np.random.default_rng(0), shape) * 3)
    assert gradcheck(lambda x: fn(x, dim=dim), [x], name=f"softmax-like dim={dim} {shape}")


def test_softmax_values_and_shift_invariance():
    x = T([[1.0, 2.0, 3.0], [1000.0, 1001.0, 1002.0]])
    y = F.softmax(x, dim=1).detach().numpy()
    np.testing.assert_allclose(y[0], y[1], rtol=1e-14)
    np.testing.assert_allclose(y.sum(1), 1, rtol=1e-14)
    np.testing.assert_allclose(F.log_softmax(x, 1).detach().numpy(), np.log(y), rtol=1e-13)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index,targets", [(-100, [0, 2, -100, 1, 2]), (2, [0, 2, 3, 1, 2]),
                                                  (-100, [3, 0, 1, 1, 2])])
def test_cross_entropy(reduction, ignore_index, targets):
    rng = np.random.default_rng(0)
    logits = T(normal(rng, (5, 4)) * 2)
    target = mg.tensor(targets)
    assert gradcheck(lambda z: F.cross_entropy(z, target, ignore_index=ignore_index, reduction=reduction),
                     [logits], name=f"cross_entropy {reduction} ignore={ignore_index}")
    # ignored rows get no gradient
    logits.grad = None
    F.cross_entropy(logits, target, ignore_index=ignore_index, reduction=reduction).sum().backward()
    ignored = np.array(targets) == ignore_index
    assert (logits.grad.numpy()[ignored] == 0).all()


def test_cross_entropy_values():
    z = np.array([[2.0, 0.5, -1.0], [0.0, 0.0, 3.0], [1.0, 1.0, 1.0]])
    t = np.array([0, 2, -100])
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    per = -logp[np.arange(3), np.where(t >= 0, t, 0)] * (t >= 0)
    for red, ref in (("none", per), ("sum", per.sum()), ("mean", per.sum() / 2)):
        got = F.cross_entropy(T(z), mg.tensor(t), reduction=red).detach().numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-13)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    x = T(np.linspace(-4, 4, 17) + 0.013)
    assert gradcheck(lambda x: F.gelu(x, approximate=approximate), [x], name=f"gelu {approximate}")
    x3 = T(normal(np.random.default_rng(0), (2, 3, 2)))
    assert gradcheck(lambda x: mg.nn.GELU(approximate)(x), [x3], name=f"nn.GELU {approximate}")
    assert gradcheck(lambda x: F.gelu(x, approximate=approximate), [T(0.7)], name=f"gelu {approximate}, 0-d")



@pytest.mark.parametrize("beta, threshold", [(1.0, 20.0), (2.0, 3.0), (0.5, -1.0)])
def test_softplus_and_silu(beta, threshold):
    """Softplus and Silu are ops with their own backward (NOTE [a stable softplus], ops/nn.py): sigmoid(beta x) below
    the threshold, 1 above it (no input on it: the kink), and s (1 + x (1 - s)); in float64, tails included."""
    x = T(np.concatenate([np.linspace(-6, 6, 13) + 0.013, [-40.0, -25.5, 25.5, 40.0]]))
    assert gradcheck(lambda x: F.softplus(x, beta, threshold), [x], name=f"softplus beta={beta} thr={threshold}")
    assert gradcheck(F.silu, [x], name="silu")
    assert gradcheck(lambda x: F.softplus(x, beta, threshold), [T(0.7)], name="softplus, 0-d")


@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_with_logits(weighted):
    """The fused op's gradients for the logits and the targets (PyTorch's: w ((1 - y) s(x) - pw y s(-x)) and -w x, or
    w (pw softplus(-x) - softplus(x))), with weight and pos_weight broadcast from (3,) and (2, 1)."""
    rng = np.random.default_rng(0)
    x = T(rng.standard_normal((2, 3)) * 4)
    y = T(rng.uniform(0.05, 0.95, (2, 3)))
    extra = dict(weight=T(rng.uniform(0.5, 2, 3), False), pos_weight=T(rng.uniform(0.5, 3, (2, 1)), False))
    f = lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none", **(extra if weighted else {}))
    assert gradcheck(f, [x, y], name=f"binary_cross_entropy_with_logits weighted={weighted}")

def test_normal_cdf_in_float32_is_within_an_ulp_or_two_of_float64():
    """GELU's Phi in float32 is a fitted erfc, computed block by block (special.normal_cdf); float64 is SciPy's."""
    from scipy.special import ndtr
    from minigrad.backend.special import _BLOCK, normal_cdf
    x = np.linspace(-12, 12, 3 * _BLOCK + 7, dtype=np.float32)        # several blocks and a ragged end
    exact = ndtr(x.astype(np.float64))
    got = normal_cdf(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    assert np.abs(got - exact).max() < 2.4e-7                          # as README and normal_cdf say (an ulp: 1.2e-7)
    assert (np.abs(got - exact) / exact).max() < 3e-5                  # even at Phi(-12) = 1.8e-33
    assert np.array_equal(normal_cdf(x[::3]), got[::3])                # a strided view
    assert normal_cdf(x.astype(np.float16)).dtype == np.float16
    np.testing.assert_array_equal(normal_cdf(np.array([-np.inf, np.inf, 0.0, np.nan], np.float32)),
                                  [0.0, 1.0, 0.5, np.nan])
    assert np.array_equal(normal_cdf(x.astype(np.float64)), ndtr(x.astype(np.float64)))


@pytest.mark.parametrize("normalized_shape", [(4,), (3, 4), 4], ids=["1dim", "2dims", "int"])
@pytest.mark.parametrize("affine", ["none", "weight", "bias", "both"])
def test_layer_norm(normalized_shape, affine):
    rng = np.random.default_rng(0)
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    x = T(normal(rng, (2, 3, 4)))
    w = T(normal(rng, ns)) if affine in ("weight", "both") else None
    b = T(normal(rng, ns)) if affine in ("bias", "both") else None

    def fn(x, *params):
        return F.layer_norm(x, normalized_shape, weight=w, bias=b)

    inputs = [x] + [p for p in (w, b) if p is not None]
    out = fn(*inputs).detach().numpy()
    xn = x.detach().numpy()
    axes = tuple(range(xn.ndim - len(ns), xn.ndim))
    ref = (xn - xn.mean(axes, keepdims=True)) / np.sqrt(xn.var(axes, keepdims=True) + 1e-5)
    ref = ref * (w.detach().numpy() if w is not None else 1) + (b.detach().numpy() if b is not None else 0)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-14)
    assert gradcheck(fn, inputs, name=f"layer_norm {normalized_shape} {affine}")


def test_layer_norm_module():
    rng = np.random.default_rng(1)
    ln = mg.nn.LayerNorm(4).to("float64")
    ln.weight.data = T(normal(rng, (4,)), False)  # on the default device
    ln.bias.data = T(normal(rng, (4,)), False)  # on the default device
    x = T(normal(rng, (3, 4)))
    assert gradcheck(lambda x, w, b: ln(x), [x, ln.weight, ln.bias], name="nn.LayerNorm")


@pytest.mark.parametrize("mask_dtype", [None, "float64"])  # the 1-byte mask, and the old one with the scale in it
@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 1.0])
def test_dropout_fixed_seed(p, mask_dtype):
    x = T(normal(np.random.default_rng(0), (4, 5)))

    def fn(x):
        mg.manual_seed(1234)
        return F.dropout(x, p=p, training=True, mask_dtype=mask_dtype)

    # reseeding makes every evaluation draw the same mask ...
    a, b = fn(x).detach().numpy(), fn(x).detach().numpy()
    np.testing.assert_array_equal(a, b)
    # ... which is what makes finite differences meaningful
    assert gradcheck(fn, [x], name=f"dropout p={p}")
    xn = x.detach().numpy()
    if p == 0.0:
        np.testing.assert_array_equal(a, xn)
    elif p == 1.0:
        np.testing.assert_array_equal(a, 0 * xn)
    else:
        kept = a != 0
        assert kept.any() and (~kept).any()
        np.testing.assert_allclose(a[kept], xn[kept] / (1 - p), rtol=1e-14)
        x.grad = None
        fn(x).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), kept / (1 - p), rtol=1e-14)


def test_dropout_without_seed_differs_and_eval_is_identity():
    x = T(np.ones((8, 8)))
    mg.manual_seed(0)
    a = F.dropout(x, 0.5).detach().numpy()
    b = F.dropout(x, 0.5).detach().numpy()
    assert not np.array_equal(a, b)  # a fresh mask per call
    assert F.dropout(x, 0.5, training=False) is x
    drop = mg.nn.Dropout(0.5).eval()
    assert drop(x) is x


@pytest.mark.parametrize("keep_input", [False, True])
def test_softmax_keep_input(keep_input):
    x = T(normal(np.random.default_rng(2), (3, 5)))
    assert gradcheck(lambda x: F.softmax(x, -1, keep_input=keep_input), [x], name=f"softmax keep_input={keep_input}")


# scaled_dot_product_attention: (batch shapes of q, k, v), L, S, E, Ev and keyword arguments. The masks are
# made below: 'bool' (one row masked entirely: its output and gradient are 0), 'float' (which requires grad).
SDPA_CASES = {
    "plain": (((2,), (2,), (2,)), 3, 4, 2, 3, {}),
    "causal-L<S": (((1, 2), (1, 2), (1, 2)), 3, 5, 2, 2, dict(is_causal=True)),
    "causal-L>S": (((2,), (2,), (2,)), 4, 3, 3, 2, dict(is_causal=True)),
    "bool-mask": (((2,), (2,), (2,)), 3, 4, 2, 2, dict(attn_mask="bool")),
    "float-mask": (((2,), (2,), (2,)), 3, 4, 2, 2, dict(attn_mask="float")),
    "broadcast": (((2, 1), (3,), (1, 3)), 2, 3, 2, 2, dict(scale=0.7)),
    "no-batch": (((), (), ()), 3, 4, 2, 3, {}),
    "dropout": (((2,), (2,), (2,)), 3, 4, 2, 3, dict(dropout_p=0.4)),
    "dropout-causal-float-mask": (((2,), (2,), (2,)), 3, 3, 2, 2, dict(dropout_p=0.3, attn_mask="float")),
}


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_scaled_dot_product_attention(case):
    (bq, bk, bv), L, S, E, Ev, kw = SDPA_CASES[case]
    rng = np.random.default_rng(3)
    q, k, v = T(normal(rng, bq + (L, E))), T(normal(rng, bk + (S, E))), T(normal(rng, bv + (S, Ev)))
    inputs, kw = [q, k, v], dict(kw)
    if kw.get("attn_mask") == "bool":
        mask = rng.random((L, S)) < 0.6
        mask[:, 0], mask[1] = True, False
        kw["attn_mask"] = mg.tensor(mask)
    elif kw.get("attn_mask") == "float":
        inputs.append(T(normal(rng, (L, S))))

    def fn(q, k, v, *mask):
        mg.manual_seed(99)  # the same dropout mask at every evaluation
        return F.scaled_dot_product_attention(q, k, v, **dict(kw, **({"attn_mask": mask[0]} if mask else {})))

    assert gradcheck(fn, inputs, name=f"scaled_dot_product_attention {case}")


def test_embedding_repeated_indices():
    rng = np.random.default_rng(0)
    w = T(normal(rng, (5, 3)))
    idx = mg.tensor([[0, 2, 0], [4, 0, 2]])
    out = F.embedding(idx, w)
    assert out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out.detach().numpy(), w.detach().numpy()[idx.numpy()])
    assert gradcheck(lambda w: F.embedding(idx, w), [w], name="embedding")
    w.grad = None
    F.embedding(idx, w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy()[:, 0], [3, 0, 2, 0, 1])  # row 0 used three times


def test_embedding_module():
    emb = mg.nn.Embedding(6, 2).to("float64")
    idx = mg.tensor([1, 1, 5, 0, 1])
    assert gradcheck(lambda w: emb(idx), [emb.weight], name="nn.Embedding")


@pytest.mark.parametrize("shape", [(4, 3), (3, 3, 2)], ids=["2d", "3d"])
@pytest.mark.parametrize("affine", [True, False])
def test_batchnorm1d_training(shape, affine):
    rng = np.random.default_rng(0)
    bn = mg.nn.BatchNorm1d(3, affine=affine).to("float64")
    assert bn.training
    params = []
    if affine:
        bn.weight.data = T(normal(rng, (3,)), False)  # on the default device
        bn.bias.data = T(normal(rng, (3,)), False)  # on the default device
        params = [bn.weight, bn.bias]
    x = T(normal(rng, shape))
    out = bn(x).detach().numpy()
    xn = x.detach().numpy()
    axes = (0,) if len(shape) == 2 else (0, 2)
    ref = (xn - xn.mean(axes, keepdims=True)) / np.sqrt(xn.var(axes, keepdims=True) + 1e-5)
    if affine:
        s = (1, 3) if len(shape) == 2 else (1, 3, 1)
        ref = ref * bn.weight.detach().numpy().reshape(s) + bn.bias.detach().numpy().reshape(s)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-14)
    assert gradcheck(lambda x, *p: bn(x), [x] + params, name=f"BatchNorm1d {shape}")


def test_batchnorm1d_eval_gradient():
    rng = np.random.default_rng(0)
    bn = mg.nn.BatchNorm1d(3).to("float64")
    bn(T(normal(rng, (5, 3)), requires_grad=False))
    bn.eval()
    x = T(normal(rng, (4, 3)))
    assert gradcheck(lambda x, w, b: bn(x), [x, bn.weight, bn.bias], name="BatchNorm1d eval")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction):
    rng = np.random.default_rng(0)
    a, b = T(normal(rng, (3, 4))), T(normal(rng, (3, 4)))
    out = F.mse_loss(a, b, reduction=reduction).detach().numpy()
    d = (a.detach().numpy() - b.detach().numpy()) ** 2
    np.testing.assert_allclose(out, {"mean": d.mean(), "sum": d.sum(), "none": d}[reduction], rtol=1e-14)
    assert gradcheck(lambda a, b: F.mse_loss(a, b, reduction=reduction), [a, b], name=f"mse_loss {reduction}")


# ----------------------------------------------------------------------------- compositions (the tape)

def test_composite_mlp_and_attention():
    rng = np.random.default_rng(0)
    x, w1, b1, w2 = T(normal(rng, (3, 4))), T(normal(rng, (5, 4))), T(normal(rng, (5,))), T(normal(rng, (2, 5)))
    assert gradcheck(lambda x, w1, b1, w2: F.linear(F.gelu(F.linear(x, w1, b1)), w2).tanh().sum(),
                     [x, w1, b1, w2], name="mlp")
    cfg = GPTConfig(n_embd=4, n_head=2, block_size=3)
    attn = CausalSelfAttention(cfg).to("float64")
    xa = T(normal(rng, (1, 3, 4)))
    params = list(attn.parameters())
    assert gradcheck(lambda x, *p: attn(x), [xa] + params, name="CausalSelfAttention")


def test_fan_out_accumulates():
    x = T([0.5, -1.0, 2.0])
    assert gradcheck(lambda x: x * x.exp() + x.tanh() * x - x / 3, [x], name="fan-out")


def test_leaf_grad_aliasing_a_pending_gradient():
    rng = np.random.default_rng(0)
    a, c = T(normal(rng, (2,))), T(normal(rng, (2,)))
    # w = a + h gives the very same gradient array to a (a leaf) and to h (pending); then a's second
    # use (z = a * 5) adds into a.grad in place before h's record runs
    def fn(a, c):
        h = c * 3      # oldest record: runs last in backward
        z = a * 5      # a's second use, recorded between h and w
        w = a + h      # backward gives one array to a.grad and to h's pending gradient
        return w * z

    assert gradcheck(fn, [a, c], name="leaf aliasing")


def test_a_0d_leaf_used_twice_sums_its_gradients():
    """A scalar parameter used twice, whose first gradient array is still another record's: its .grad is summed out of
    place, and NumPy's 0-d sum is a scalar, which must still become a 0-d .grad (it raised a ShapeError)."""
    w = T(0.7)
    assert gradcheck(lambda w: (w * 3 + w).tanh(), [w], name="0-d fan-out")
    (w * 3 + w).tanh().backward()
    assert w.grad.shape == () and type(w.grad.data) is type(w.data)


# ----------------------------------------------------------------------------- gradcheck itself

def test_gradcheck_catches_wrong_gradient(monkeypatch):
    right = ops.Tanh.backward
    monkeypatch.setattr(ops.Tanh, "backward", lambda self, g: tuple(2 * gi for gi in right(self, g)))
    x = T([[0.3, -0.7], [1.1, 0.2]])
    with pytest.raises(GradcheckError) as info:
        gradcheck(lambda x: x.tanh(), [x], name="tanh_doubled")
    msg = str(info.value)
    assert "tanh_doubled" in msg and "input 0" in msg and "index (0, 0)" in msg
    m = re.search(r"expected d loss / d x = (\S+) from the central difference, got (\S+) from backward", msg)
    assert m, msg
    expected, got = float(m.group(1)), float(m.group(2))
    # projected with a fixed random vector r: expected = r00 * (1 - tanh^2), got twice that
    assert got == pytest.approx(2 * expected, rel=1e-6)
    assert expected == pytest.approx(np.random.default_rng(0).standard_normal((2, 2))[0, 0] * (1 - np.tanh(0.3) ** 2),
                                     rel=1e-6)
    monkeypatch.undo()
    assert gradcheck(lambda x: x.tanh(), [x], name="tanh")


def test_gradcheck_catches_missing_gradient(monkeypatch):
    monkeypatch.setattr(ops.Mul, "backward", lambda self, g: (None, None))
    a, b = T([1.0, 2.0]), T([3.0, 4.0])
    with pytest.raises(GradcheckError, match="expected d loss / d x = .* got 0 from backward"):
        gradcheck(lambda a, b: a * b, [a, b], name="mul_dropped")


def test_gradcheck_refuses_float32():
    x = mg.tensor([1.0, 2.0], dtype="float32", requires_grad=True)
    with pytest.raises(GradcheckError, match="float64"):
        gradcheck(lambda x: x * 2, [x])
