"""Edge cases found by running minigrad and PyTorch (2.13, float64) side by side: each test fails on the code
before its fix, and compares with PyTorch where PyTorch runs it (skipped cleanly without torch).

  matmul       a zero-size dim (m, k or n, batched, 1-d, linear): zero gradients, not a ZeroDivisionError
  std / norm   a constant row (std 0) or a zero vector: gradient 0 as PyTorch's; on 'meta' and under every
               checkpoint policy too (one op whatever the values, NOTE [a root's gradient at zero] in ops/pointwise.py)
  chunk/split  of a size-0 dim: chunk(k) gives k empty pieces, as PyTorch
  clip_grad    norm_type 'inf' (a string) and what float() reads; clear errors otherwise; runs on 'meta'
  gelu tanh    |x| up to the largest float: x (or -0), and the gradient's limits (NOTE [GELU at large x])
  index        a tuple inside the key is a list (advanced indexing), values and gradients
  clamp        tensor min / max, broadcasting, gradients to x and to the bounds by PyTorch's rules, ties
  copy_        a source that does not broadcast: copy_'s own error in every grad mode
  sdpa         enable_gqa=True (grouped-query attention) against PyTorch; clear errors otherwise
  command      plan --memory 5e400GB: an argparse error, not an OverflowError traceback
  sign, round  a gradient of 0, as PyTorch's, also where one is the only path to the loss
  masked_fill  a 0-d tensor value: cast to the input's dtype, with a gradient; several values: a clear error
  index        a 0-d bool mask: a new dim of size 1 or 0, as a Python bool
  sdpa         an empty L, S or E: PyTorch's results and gradients
  var / std    n <= correction: PyTorch's warning
  from_numpy   a recorded in-place write: refused, not a silent end to the sharing
"""
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import ops, plan
from minigrad.checkpoint import dots_saveable, everything_saveable, set_checkpoint_early_stop
from minigrad.backend.meta import MetaError
from minigrad.ops import ShapeError
from minigrad.testing import gradcheck
from on_device import to_host

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RTOL = 1e-12


def torch_():
    return pytest.importorskip("torch")


def T(a, requires_grad=True):
    return mg.tensor(np.asarray(a, dtype=np.float64), dtype="float64", requires_grad=requires_grad)


def both(torch, *arrays):
    """The same float64 arrays as minigrad tensors and as torch tensors, each requiring grad."""
    return ([T(a) for a in arrays],
            [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in arrays])


def same(got, want, exact=True):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-14)


def grad_of(t, shape):
    return np.zeros(shape) if t.grad is None else t.grad.numpy()


def backward_both(out_mg, out_th, torch, seed=1):
    cot = np.random.default_rng(seed).standard_normal(out_mg.shape)
    out_mg.backward(mg.tensor(cot, dtype="float64"))
    out_th.backward(torch.tensor(cot))


# ----------------------------------------------------------------------------- 1. matmul with a zero-size dim

MATMUL_SHAPES = [((0, 3), (3, 4)), ((0, 3), (3, 0)), ((3, 0), (0, 4)), ((2, 0, 3), (3, 4)), ((2, 3, 0), (0, 4)),
                 ((2, 3, 4), (4, 0)), ((0, 2, 3), (3, 4)), ((2, 0, 3), (2, 3, 4)), ((2, 3, 0), (2, 0, 5)),
                 ((2, 3), (0, 3, 4)), ((3,), (2, 3, 0)), ((0,), (0,)), ((0,), (0, 4)), ((3, 0), (0,))]


@pytest.mark.torch
@pytest.mark.parametrize("sa, sb", MATMUL_SHAPES, ids=str)
def test_matmul_with_a_zero_size_dim_matches_torch(sa, sb):
    torch = torch_()
    rng = np.random.default_rng(0)
    (a, b), (ta, tb) = both(torch, rng.standard_normal(sa), rng.standard_normal(sb))
    out, tout = a @ b, ta @ tb
    same(out.detach().numpy(), tout.detach().numpy())  # zeros where k == 0, empty where m or n is
    (out.sum() * 1.0).backward()
    tout.sum().backward()
    same(a.grad.numpy(), ta.grad.numpy())
    same(b.grad.numpy(), tb.grad.numpy())


def test_matmul_of_an_empty_batch_gives_zero_gradients():
    w = T(np.ones((3, 4)))
    (mg.zeros(0, 3, dtype="float64") @ w).sum().backward()  # was a ZeroDivisionError in ops.matmul's pool check
    assert w.grad.shape == (3, 4) and not w.grad.numpy().any()


@pytest.mark.torch
@pytest.mark.parametrize("shape, dim", [((0, 3), 0), ((3, 0), -1), ((0, 0), 1), ((0,), 0), ((2, 0, 3), 1)], ids=str)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_along_or_beside_an_empty_dim_matches_torch(name, shape, dim):
    """Empty in, empty out, as PyTorch's (NumPy's max of nothing raised a ShapeError)."""
    torch = torch_()
    (x,), (tx,) = both(torch, np.zeros(shape))
    out, tout = getattr(x, name)(dim), getattr(tx, name)(dim)
    same(out.detach().numpy(), tout.detach().numpy())
    backward_both(out, tout, torch)
    same(x.grad.numpy(), tx.grad.numpy())


@pytest.mark.torch
@pytest.mark.parametrize("sx, sw", [((0, 3), (4, 3)), ((2, 0, 3), (4, 3)), ((2, 3, 0), (4, 0)), ((2, 5, 3), (0, 3))],
                         ids=str)
def test_linear_with_a_zero_size_dim_matches_torch(sx, sw):
    torch = torch_()
    rng = np.random.default_rng(0)
    (x, w, b), (tx, tw, tb) = both(torch, rng.standard_normal(sx), rng.standard_normal(sw),
                                   rng.standard_normal(sw[0]))
    out, tout = F.linear(x, w, b), torch.nn.functional.linear(tx, tw, tb)
    same(out.detach().numpy(), tout.detach().numpy())
    out.sum().backward()
    tout.sum().backward()
    for got, want in ((x, tx), (w, tw), (b, tb)):
        same(got.grad.numpy(), want.grad.numpy())


# ----------------------------------------------------------------------------- 2. std at 0, norm at a zero vector

CONSTANT_ROWS = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 3.0, 5.0], [-2.0, -2.0, -2.0, -2.0]])
STD_ARGS = [dict(), dict(dim=1), dict(dim=0), dict(dim=1, unbiased=False), dict(dim=1, keepdim=True),
            dict(dim=(0, 1)), dict(dim=1, correction=0)]


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", STD_ARGS, ids=str)
def test_std_of_a_constant_row_has_a_zero_gradient_as_in_torch(kwargs):
    torch = torch_()
    (x,), (tx,) = both(torch, CONSTANT_ROWS)
    out, tout = x.std(**kwargs), tx.std(**kwargs)
    same(out.detach().numpy(), tout.detach().numpy(), exact=False)
    backward_both(out, tout, torch)
    assert not np.isnan(x.grad.numpy()).any()  # was nan in each constant row
    same(x.grad.numpy(), tx.grad.numpy(), exact=False)


def test_std_is_the_square_root_of_var_to_the_bit():
    a = np.random.default_rng(3).standard_normal((5, 7)).astype(np.float32)
    a[1] = 0.25  # a constant row
    x = mg.tensor(a, requires_grad=True)
    for kwargs in STD_ARGS:
        np.testing.assert_array_equal(x.std(**kwargs).detach().numpy(), np.sqrt(x.var(**kwargs).detach().numpy()))


def test_std_and_norm_record_the_same_ops_whatever_the_values():
    """One op for the root, zeros or not, and on 'meta': a plan made on 'meta' counts what the real run does."""
    def ops_of(device, values):
        x = mg.tensor(values, device=device, requires_grad=True)
        with mg.profile() as prof:
            (x.std(1).sum() + x.norm(dim=1).sum() + x.norm(3, dim=1).sum()).backward()
        return {op: prof.calls("forward", op) for op in ("sqrt", "pow", "where")}
    zeros = np.zeros((3, 4), np.float32)
    want = ops_of("cpu", np.arange(12, dtype=np.float32).reshape(3, 4) ** 2)
    assert want["where"] == 0
    assert ops_of("cpu", zeros) == want == ops_of("meta", zeros)


def test_std_and_norm_run_forward_and_backward_on_meta():
    x = mg.zeros(3, 4, device="meta", requires_grad=True)
    for fn, shape in ((lambda x: x.std(1), (3,)), (lambda x: x.std(), ()), (lambda x: x.norm(3), ()),
                      (lambda x: x.norm(dim=1, keepdim=True), (3, 1)), (lambda x: x.norm(0.5, dim=0), (4,))):
        out = fn(x)  # norm(2) and norm(3) read the root's zeros before: a MetaError
        assert (out.shape, out.dtype, out.device) == (shape, np.float32, "meta")
        out.sum().backward()
        assert (x.grad.shape, x.grad.dtype, x.grad.device) == ((3, 4), np.float32, "meta")
        x.grad = None


@pytest.mark.torch
def test_norm_on_meta_for_every_p_and_real_results_unchanged():
    torch = torch_()
    for p in ("fro", 2, 3, 0.5, 1.5, 1, math.inf, -math.inf, 0):
        out = mg.zeros(2, 5, device="meta").norm(p, dim=1)
        assert (out.shape, out.dtype, out.device) == ((2,), np.float32, "meta"), p
    mixed = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, -2.0]])  # a zero row, a zero element: gradient 0 there, as PyTorch's
    for p in ("fro", 2, 3, 1.5, 0.5, 0.25):  # (p < 1 gave nan at every zero element)
        (x,), (tx,) = both(torch, mixed)
        out, tout = x.norm(p, dim=1), tx.norm(p, dim=1)
        same(out.detach().numpy(), tout.detach().numpy(), exact=False)
        backward_both(out, tout, torch)
        same(x.grad.numpy(), tx.grad.numpy(), exact=False)


@pytest.mark.parametrize("policy", [None, everything_saveable, dots_saveable], ids=["none", "everything", "dots"])
@pytest.mark.parametrize("early_stop", [True, False], ids=["early-stop", "full-recompute"])
def test_std_and_norm_at_zero_under_checkpointing_match_the_plain_run(policy, early_stop):
    """everything_saveable raised 'the recompute ran sqrt where the forward ran where' before: the root chose its
    ops by looking at values that the recompute has only as placeholders."""
    w0 = np.random.default_rng(0).standard_normal((4, 4))
    fns = [lambda x, w: (x.std(1, keepdim=True) * x).tanh() @ w,
           lambda x, w: ((x - x.mean(1, keepdim=True)).norm(dim=1, keepdim=True) * x).tanh() @ w,
           lambda x, w: ((x - x.mean(1, keepdim=True)).norm(3, dim=1, keepdim=True) + x).exp() @ w]
    for fn in fns:
        def grads(ckpt):
            x, w = T(CONSTANT_ROWS), T(w0)
            out = mg.checkpoint(fn, x, w, policy=policy) if ckpt else fn(x, w)
            (out * out).sum().backward()
            return x.grad.numpy(), w.grad.numpy()
        want = grads(False)
        set_checkpoint_early_stop(early_stop)
        try:
            got = grads(True)
        finally:
            set_checkpoint_early_stop(True)
        assert not np.isnan(want[0]).any()
        for g, w_ in zip(got, want):
            np.testing.assert_array_equal(g, w_)


# ----------------------------------------------------------------------------- 3. chunk and split of size 0

@pytest.mark.torch
def test_chunk_and_split_of_every_size_match_torch():
    torch = torch_()
    for n in range(7):
        x, tx = mg.zeros(n, 2), torch.zeros(n, 2)
        for k in range(1, 8):
            assert [p.shape for p in x.chunk(k)] == [tuple(p.shape) for p in tx.chunk(k)], (n, k)
            assert [p.shape for p in x.split(k)] == [tuple(p.shape) for p in tx.split(k)], (n, k)
        assert [p.shape for p in x.T.chunk(3, dim=1)] == [tuple(p.shape) for p in tx.T.chunk(3, dim=1)]
    assert [p.shape for p in mg.zeros(0, 2).split(0)] == [(0, 2)]  # PyTorch allows 0 for an empty dim only


def test_chunk_of_an_empty_dim_gives_that_many_pieces_and_split_refuses_what_torch_refuses():
    pieces = mg.zeros(2, 0, 3).chunk(4, dim=1)
    assert len(pieces) == 4 and all(p.shape == (2, 0, 3) for p in pieces)
    with pytest.raises(ValueError, match=r"split: split_size must be positive \(0 only for a dim of size 0\), got 0 "
                                         r"for dim 0 of shape \(3, 2\)"):
        mg.zeros(3, 2).split(0)
    with pytest.raises(ValueError, match=r"split: split_size must be positive .*got -1"):
        mg.zeros(0, 2).split(-1)


# ----------------------------------------------------------------------------- 4. clip_grad_norm_'s norm_type

def _with_grads(lib, grads):
    """Parameters of minigrad or torch (float64) whose .grad are these."""
    params = []
    for g in grads:
        p = lib.zeros(*np.shape(g), dtype=lib.float64, requires_grad=True)
        p.grad = lib.tensor(np.asarray(g, dtype=np.float64), dtype=lib.float64)
        params.append(p)
    return params


@pytest.mark.torch
@pytest.mark.parametrize("norm_type", ["inf", "-inf", "Infinity", float("inf"), -math.inf, 3, "2", 0.5, 0, True, 2.0],
                         ids=repr)
def test_clip_grad_norm_reads_norm_type_as_torch(norm_type):
    torch = torch_()
    grads = [[3.0, -4.0, 0.5], [[1.0, -2.0], [0.0, 6.0]]]
    ps, qs = _with_grads(mg, grads), _with_grads(torch, grads)
    total = mg.nn.utils.clip_grad_norm_(ps, 1.0, norm_type=norm_type)  # 'inf' was a ValueError
    want = torch.nn.utils.clip_grad_norm_(qs, 1.0, norm_type=norm_type)
    np.testing.assert_allclose(total.item(), want.item(), rtol=RTOL)
    for p, q in zip(ps, qs):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=RTOL)


def test_clip_grad_norm_says_which_norm_types_it_takes():
    ps = _with_grads(mg, [[3.0, 4.0]])
    with pytest.raises(ValueError, match=r"clip_grad_norm_: norm_type must be a number or a string of one \('inf', "
                                         r"as in PyTorch\), got 'fro' of type str"):
        mg.nn.utils.clip_grad_norm_(ps, 1.0, norm_type="fro")
    with pytest.raises(TypeError, match=r"clip_grad_norm_: norm_type must be a number .*got None of type NoneType"):
        mg.nn.utils.clip_grad_norm_(ps, 1.0, norm_type=None)
    for p in (-1, "nan"):
        with pytest.raises(ValueError, match=rf"clip_grad_norm_: norm_type {p!r} is not supported: give 0, a number "
                                             rf"> 0, inf or -inf"):
            mg.nn.utils.clip_grad_norm_(ps, 1.0, norm_type=p)
    assert ps[0].grad.tolist() == [3.0, 4.0]  # untouched


# ----------------------------------------------------------------------------- 7. clip_grad_norm_ on 'meta'

@pytest.mark.parametrize("norm_type", [2.0, "inf", 3, 1])
def test_clip_grad_norm_runs_on_meta(norm_type):
    with mg.device("meta"):
        model = mg.nn.Sequential(mg.nn.Linear(4, 8), mg.nn.Tanh(), mg.nn.Linear(8, 3))
    model(mg.zeros(2, 4, device="meta")).sum().backward()
    total = mg.nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm_type=norm_type)  # a MetaError before
    assert (total.shape, total.dtype, total.device) == ((), np.float32, "meta")
    assert all(p.grad.device == "meta" and p.grad.shape == p.shape for p in model.parameters())
    with pytest.raises(MetaError, match=r"clip_grad_norm_: error_if_nonfinite=True reads the norm's value"):
        mg.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)


def test_clip_grad_norm_writes_the_same_bytes_on_meta_as_on_cpu():
    def step(device):
        mg.manual_seed(0)
        with mg.device(device):
            model = mg.nn.Sequential(mg.nn.Linear(16, 32), mg.nn.Tanh(), mg.nn.Linear(32, 4))
        x = mg.zeros(8, 16, device=device)
        with mg.profile(model) as prof:
            model(x).sum().backward()
            mg.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        return prof.peak_bytes(), prof.flops()
    assert step("meta") == step("cpu")


# ----------------------------------------------------------------------------- 5. GELU's tanh approximation at large x

LARGE = [1e308, -1e308, 1.7e308, 9e307, 1e200, -1e200, 1e154, -1e154, 1e103, -1e103, 5e102, 1e102, 1e20, 30.0,
         -30.0, 10.0, -10.0, 0.0, -0.0, 1e-310]


def _gelu_tanh(values, dtype):
    x = mg.tensor(np.asarray(values, dtype=dtype), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the forward's x^3 overflows (harmlessly: tanh saturates)
        out = F.gelu(x, approximate="tanh")
        out.backward(mg.ones(*out.shape, dtype=dtype))
    return out.detach().numpy(), x.grad.numpy()


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gelu_tanh_at_large_x_matches_torch(dtype):
    torch = torch_()
    if mg.default_device() == "cuda":
        pytest.skip("CuPy has no floating-point flags: the backward stays nan at huge |x| (NOTE [GELU at large x])")
    with np.errstate(over="ignore"):
        values = np.asarray(LARGE, dtype=dtype)  # float32: the largest ones are inf, and dropped
    values = values[np.isfinite(values)]
    out, grad = _gelu_tanh(values, dtype)
    tx = torch.tensor(values, requires_grad=True)
    tout = torch.nn.functional.gelu(tx, approximate="tanh")
    tout.backward(torch.ones_like(tout))
    np.testing.assert_array_equal(out, tout.detach().numpy())  # 1e308 was inf
    assert np.array_equal(np.signbit(out), np.signbit(tout.detach().numpy()))  # -0 for large negative x
    tgrad = tx.grad.numpy()
    finite = np.isfinite(tgrad)
    np.testing.assert_array_equal(grad[finite], tgrad[finite])  # minigrad's was nan from |x| > 1.2e103 (f64)
    # where PyTorch's own backward overflows (x^2 > the largest float) it gives nan; the gradient's limit is 1 for
    # large positive x and 0 for large negative x, which minigrad gives
    np.testing.assert_array_equal(grad[~finite], (values[~finite] > 0).astype(dtype))


def test_gelu_tanh_at_infinities_and_nan_as_torch_gives():
    out, grad = _gelu_tanh([math.inf, -math.inf, math.nan], "float64")
    assert out[0] == math.inf and np.isnan(out[1:]).all() and np.isnan(grad).all()  # PyTorch: the same


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gelu_tanh_is_bit_identical_for_ordinary_inputs(dtype):
    """The old forward, 0.5 (x (1 + t)), and the backward written out, step by step as before the fix."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(4000) * s for s in (1, 4, 1e-3, 1e-30)]).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    t = ops.Gelu()._tanh_of_inner(x)  # tanh(K (x + 0.044715 x^3)), unchanged
    want = t + 1
    want *= x
    want *= 0.5
    op = ops.Gelu()
    got = op.forward(x, approximate="tanh")
    np.testing.assert_array_equal(got, want)
    d = x * x
    d *= 3 * 0.044715
    d += 1
    d *= ops.Gelu.K
    d *= x
    d *= 0.5
    u = 1 - t * t
    d *= u
    want_grad = (t + 1) * 0.5
    want_grad += d
    want_grad *= g
    np.testing.assert_array_equal(op.backward(g)[0], want_grad)


# ----------------------------------------------------------------------------- 6. a tuple inside an index

KEYS = [((0,),), ((1, 0),), ((0, 1), (2, 0)), (0, (1, 2)), ((1, 1), slice(None), (3, 0)),
        (slice(None), ((0, 1), (2, 2))), (((0, 1), (1, 0)),), (Ellipsis, (3, 3, 0)), ((True, False),),
        ([0, 1], (2, 0)), ((),), ([],), (None, (1,)), ((1, 1, 0),)]


@pytest.mark.torch
@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_a_tuple_inside_the_key_indexes_as_a_list_as_in_torch(key):
    torch = torch_()
    a = np.random.default_rng(0).standard_normal((2, 3, 4))
    (x,), (tx,) = both(torch, a)
    out, tout = x[key], tx[key]  # ((0,),) was refused: "unsupported index (0,) of type tuple"
    same(out.detach().numpy(), tout.detach().numpy())
    backward_both(out, tout, torch)
    same(x.grad.numpy(), tx.grad.numpy())  # repeated indices add up


def test_a_tuple_inside_the_key_writes_as_a_list():
    x = mg.zeros(2, 3)
    x[0, (2, 0)] = 5.0
    x[((1,),)] = 1.0
    assert x.tolist() == [[5.0, 0.0, 5.0], [1.0, 1.0, 1.0]]


# ----------------------------------------------------------------------------- 8. clamp with tensor bounds

NAN = math.nan
CLAMP_CASES = [
    ([0.0, 1.0, 2.0, 3.0, 4.0, NAN], [1.0] * 6, [3.0] * 6),       # below, at min, inside, at max, above, nan
    ([0.0, 1.0, 2.0, 3.0, 4.0], [2.0] * 5, [2.0] * 5),            # min == max: x < min gives nobody the gradient
    ([0.0, 1.0, 2.0, 3.0, 4.0], [3.0] * 5, [1.0] * 5),            # min > max: max wins
    ([0.0, 1.0, 2.0], [NAN, 1.0, 1.0], [3.0, NAN, 3.0]),          # a nan bound: nan, no gradient
    ([0.0, 1.0, 2.0, 3.0], [1.0] * 4, None),
    ([0.0, 1.0, 2.0, 3.0], None, [2.0] * 4),
    ([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], [1.0], [[2.0], [4.0]]),  # broadcast bounds: their gradients summed
    ([0.0, 5.0], [[1.0, 2.0], [3.0, 4.0], [6.0, 0.0]], None),      # a bound bigger than x: the result is its shape
    ([-0.0, 0.0, -0.0, 0.0], [0.0, -0.0, 0.0, -0.0], [0.0, -0.0, -0.0, 0.0]),  # a tie keeps x's zero
]


@pytest.mark.torch
@pytest.mark.parametrize("x, lo, hi", CLAMP_CASES, ids=[str(i) for i in range(len(CLAMP_CASES))])
def test_clamp_with_tensor_bounds_matches_torch_values_and_gradients(x, lo, hi):
    torch = torch_()
    xs, ts = both(torch, *[v for v in (x, lo, hi) if v is not None])
    ml, tl = (None, None) if lo is None else (xs[1], ts[1])
    mh, th = (None, None) if hi is None else (xs[-1], ts[-1])
    out, tout = xs[0].clamp(min=ml, max=mh), torch.clamp(ts[0], min=tl, max=th)  # a TypeError before
    got, want = out.detach().numpy(), tout.detach().numpy()
    same(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    backward_both(out, tout, torch)
    for m, t in zip(xs, ts):
        same(grad_of(m, t.shape), t.grad.numpy())


def test_clamp_with_tensor_bounds_gradchecks():
    rng = np.random.default_rng(0)
    x = rng.permutation(24).reshape(4, 6) * 0.5 - 6.0 + 0.1  # no ties with the bounds below
    lo = T(np.full((1, 6), -2.0) + rng.uniform(0, 0.05, (1, 6)))
    hi = T(np.full((4, 1), 2.0) + rng.uniform(0, 0.05, (4, 1)))
    assert gradcheck(lambda x, lo, hi: x.clamp(lo, hi), [T(x), lo, hi], name="clamp_tensor")
    assert gradcheck(lambda x, lo: x.clamp(min=lo), [T(x), lo], name="clamp_tensor-min")
    assert gradcheck(lambda x, hi: x.clamp(max=hi), [T(x), hi], name="clamp_tensor-max")
    assert gradcheck(lambda x, hi: x.clamp(-1.0, hi), [T(x), hi], name="clamp_tensor-number-min")


def test_clamp_in_place_with_tensor_bounds_and_its_errors():
    x = mg.tensor([0.0, 5.0, 2.0])
    x.clamp_(min=mg.tensor([1.0, 2.0, 3.0]), max=mg.tensor(4.0))
    assert x.tolist() == [1.0, 4.0, 3.0]
    lo = mg.tensor([1.0, 1.0, 1.0], requires_grad=True)
    y = mg.tensor([0.0, 5.0, 2.0], requires_grad=True) * 1.0
    y.clamp_(min=lo)  # recorded: the bound gets its gradient
    y.sum().backward()
    assert y.tolist() == [1.0, 5.0, 2.0] and lo.grad.tolist() == [1.0, 0.0, 0.0]
    with pytest.raises(RuntimeError, match=r"clamp_: the result is float32 of shape \(2, 3\), but this tensor is "
                                           r"float32 of shape \(3,\)"):
        mg.zeros(3).clamp_(min=mg.zeros(2, 3))
    with pytest.raises(ValueError, match=r"clamp: the input's shape \(3,\) and the bounds' \(min \(4,\)\) do not "
                                         r"broadcast"):
        mg.zeros(3).clamp(min=mg.zeros(4))
    with pytest.raises(TypeError, match=r"clamp: inputs have different dtypes \(float32 and float64\)"):
        mg.zeros(3).clamp(max=mg.zeros(3, dtype="float64"))


def test_clamp_with_tensor_bounds_on_meta():
    x = mg.zeros(3, 4, device="meta", requires_grad=True)
    hi = mg.zeros(4, device="meta", requires_grad=True)
    out = x.clamp(max=hi)
    out.sum().backward()
    assert (out.shape, out.device, x.grad.shape, hi.grad.shape) == ((3, 4), "meta", (3, 4), (4,))


# ----------------------------------------------------------------------------- 9. copy_ from a source that does not fit

@pytest.mark.parametrize("mode", ["plain", "non-leaf", "source-requires-grad", "no_grad"])
def test_copy_from_a_source_that_does_not_broadcast_names_copy(mode):
    y = mg.randn(3, requires_grad=mode == "non-leaf")
    if mode == "non-leaf":
        y = y * 2
    src = mg.randn(4, requires_grad=mode == "source-requires-grad")
    with pytest.raises(ValueError, match=r"^copy_: the source's shape \(4,\) does not broadcast to this tensor's "
                                         r"shape \(3,\); reshape the source"):  # was "where: the condition's shape"
        if mode == "no_grad":
            with mg.no_grad():
                y.copy_(src)
        else:
            y.copy_(src)
    with pytest.raises(ValueError, match=r"^copy_: the source's shape \(3, 1\) does not broadcast to this tensor's "
                                         r"shape \(2, 3\)"):
        mg.zeros(2, 3).copy_(mg.zeros(3, 1))
    z = mg.zeros(2, 3)
    assert z.copy_(mg.tensor([1.0, 2.0, 3.0])).tolist() == [[1.0, 2.0, 3.0]] * 2  # broadcasting still copies


# ----------------------------------------------------------------------------- 10. grouped-query attention

GQA = [((2, 4, 5, 8), (2, 2, 6, 8), (2, 1, 6, 3), {}), ((4, 5, 8), (2, 5, 8), (2, 5, 8), dict(is_causal=True)),
       ((2, 4, 5, 8), (1, 2, 5, 8), (1, 2, 5, 8), {}), ((1, 4, 5, 8), (1, 4, 5, 8), (1, 4, 5, 8), {}),
       ((2, 6, 3, 4), (2, 3, 3, 4), (2, 2, 3, 4), dict(attn_mask=True))]


@pytest.mark.torch
@pytest.mark.parametrize("sq, sk, sv, kwargs", GQA, ids=[str(i) for i in range(len(GQA))])
def test_sdpa_with_enable_gqa_matches_torch(sq, sk, sv, kwargs):
    torch = torch_()
    rng = np.random.default_rng(0)
    ms, ts = both(torch, *(rng.standard_normal(s) for s in (sq, sk, sv)))
    kw_mg, kw_th = dict(kwargs), dict(kwargs)
    if kwargs.get("attn_mask"):
        mask = rng.standard_normal((sq[-2], sk[-2])) > -0.5
        kw_mg["attn_mask"], kw_th["attn_mask"] = mg.tensor(mask), torch.tensor(mask)
    out = F.scaled_dot_product_attention(*ms, enable_gqa=True, **kw_mg)  # a batch-dims error before
    tout = torch.nn.functional.scaled_dot_product_attention(*ts, enable_gqa=True, **kw_th)
    same(out.detach().numpy(), tout.detach().numpy(), exact=False)
    backward_both(out, tout, torch)
    for m, t in zip(ms, ts):
        same(m.grad.numpy(), t.grad.numpy(), exact=False)


def test_sdpa_with_enable_gqa_gradchecks():
    rng = np.random.default_rng(1)
    q, k, v = (T(rng.standard_normal(s)) for s in ((1, 4, 3, 2), (1, 2, 3, 2), (1, 1, 3, 2)))
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), [q, k, v], name="gqa")


def test_sdpa_heads_that_do_not_group_say_so():
    name = "scaled_dot_product_attention"
    q = mg.randn(1, 4, 5, 8)
    with pytest.raises(ValueError, match=rf"^{name}: enable_gqa=True: the heads \(dim -3\) of key \(3\) and value "
                                         rf"\(3\) must each divide the query's \(4\)"):
        F.scaled_dot_product_attention(q, mg.randn(1, 3, 5, 8), mg.randn(1, 3, 5, 8), enable_gqa=True)
    with pytest.raises(ValueError, match=rf"^{name}: the leading \(batch\) dims of .* do not broadcast.* pass "
                                         rf"enable_gqa=True"):
        F.scaled_dot_product_attention(q, mg.randn(1, 2, 5, 8), mg.randn(1, 2, 5, 8))
    with pytest.raises(ValueError, match=rf"^{name}: the leading \(batch\) dims of .* one of them 1$"):
        F.scaled_dot_product_attention(q, mg.randn(1, 3, 5, 8), mg.randn(1, 3, 5, 8))  # no hint: 3 does not divide 4


# ----------------------------------------------------------------------------- 11. plan --memory too large

def test_a_budget_too_large_for_a_float_is_a_value_error():
    for text in ("5e400GB", "1e999", "1e300GB"):
        with pytest.raises(ValueError, match=rf"memory '{text}' is too large to be a number of bytes.*24GiB"):
            plan.parse_bytes(text)
    assert plan.parse_bytes("1e300") == int(1e300)


@pytest.mark.parametrize("memory", ["5e400GB", "1e999"])
def test_plan_with_a_budget_too_large_is_an_argparse_error(memory):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "minigrad", "plan", "--model", "gpt2", "--memory", memory,
                        "--batch-size", "2", "--seq-len", "8", "--quiet"], cwd=ROOT, capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "usage:" in r.stderr
    assert f"error: argument --memory: memory '{memory}' is too large to be a number of bytes" in r.stderr


# ----------------------------------------------------------------------------- 12. sign and round: a zero gradient

@pytest.mark.torch
@pytest.mark.parametrize("method, kwargs", [("sign", {}), ("round", {}), ("round", {"decimals": 1})])
def test_sign_and_round_give_a_zero_gradient_as_torch(method, kwargs):
    """The only path from the leaf to the loss: zeros, as PyTorch (before: backward's 'does not require grad')."""
    torch = torch_()
    a = np.array([1.26, -2.5, 0.0, 0.5, 3.0])
    (x,), (tx,) = both(torch, a)
    y, ty = getattr(x, method)(**kwargs), getattr(tx, method)(**kwargs)
    assert y.requires_grad and ty.requires_grad
    same(to_host(y), ty.detach().numpy())
    backward_both(y, ty, torch)
    same(to_host(x.grad), tx.grad.numpy())
    (x,), (tx,) = both(torch, a)  # beside another path: still the other path's gradient, sign's adding 0
    (getattr(x, method)(**kwargs) * x).sum().backward()
    (getattr(tx, method)(**kwargs) * tx).sum().backward()
    same(to_host(x.grad), tx.grad.numpy())


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sign_and_abs_gradient_are_0_at_nan_in_2_byte_floats_as_torch(dtype):
    """sign(nan) is 0, and so abs's gradient there, as PyTorch's: NumPy's sign gives nan, which sign() replaced only
    where the dtype's kind was 'f'; ml_dtypes' bfloat16 is kind 'V', so bfloat16 kept nan (found with the ledger's
    sweep of sign's arrays)."""
    torch = torch_()
    a = [float("nan"), -2.0, 0.0, 3.0]
    x = mg.tensor(a).to(dtype).requires_grad_()
    tx = torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=True)
    x.abs().sum().backward()
    tx.abs().sum().backward()
    same(to_host(x.grad.float()), tx.grad.float().numpy())
    same(to_host(x.detach().sign().float()), tx.detach().sign().float().numpy())


# ----------------------------------------------------------------------------- 13. masked_fill with a 0-d tensor value

@pytest.mark.torch
@pytest.mark.parametrize("inplace", [False, True], ids=["masked_fill", "masked_fill_"])
def test_masked_fill_with_a_0d_tensor_value_matches_torch(inplace):
    """The value's dtype is cast to the input's, and its gradient is the sum where the mask is set, as PyTorch's
    (before: NumPy's "Cannot cast scalar from dtype('O')")."""
    torch = torch_()
    rng = np.random.default_rng(0)
    a, mask = rng.standard_normal((3, 4)), rng.random(4) < 0.5
    (x,), (tx,) = both(torch, a)
    v = mg.tensor(2.5, dtype="float32", requires_grad=True)  # a float32 value into a float64 input: float64
    tv = torch.tensor(2.5, dtype=torch.float32, requires_grad=True)
    if inplace:
        y, ty = (x * 1).masked_fill_(mg.tensor(mask), v), (tx * 1).masked_fill_(torch.tensor(mask), tv)
    else:
        y, ty = x.masked_fill(mg.tensor(mask), v), tx.masked_fill(torch.tensor(mask), tv)
    assert y.dtype == "float64" and ty.dtype == torch.float64
    same(to_host(y), ty.detach().numpy())
    backward_both(y, ty, torch)
    same(to_host(x.grad), tx.grad.numpy(), exact=False)
    same(to_host(v.grad), tv.grad.numpy(), exact=False)


def test_masked_fill_with_a_tensor_of_several_values_says_what_to_write():
    x = mg.zeros(2, 3)
    with pytest.raises(ShapeError, match=r"masked_fill: value must be a number or a 0-d tensor, got a tensor of "
                                         r"shape \(3,\); .*mg.where\(mask, value, x\)"):
        x.masked_fill(mg.tensor([True, False, True]), mg.ones(3))
    with pytest.raises(ShapeError, match=r"masked_fill: mask of shape \(2,\) does not broadcast"):
        x.masked_fill(mg.tensor([True, False]), mg.tensor(1.0))


# ----------------------------------------------------------------------------- 14. a 0-d bool mask as an index

@pytest.mark.torch
@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("where", ["alone", "after", "before", "ellipsis"])
def test_a_0d_bool_mask_index_matches_torch(flag, where):
    """x[mg.tensor(True)] is x with a new dim of size 1 (0 for False), as a Python bool, as PyTorch's (before: NumPy's
    "Calling nonzero on 0d arrays"); values and gradients, and t[mask] = v."""
    torch = torch_()
    keys = {"alone": lambda m: m, "after": lambda m: (1, m), "before": lambda m: (m, slice(0, 2)),
            "ellipsis": lambda m: (Ellipsis, m, 0)}[where]
    (x,), (tx,) = both(torch, np.arange(12.0).reshape(3, 4))
    y, ty = x[keys(mg.tensor(flag))], tx[keys(torch.tensor(flag))]
    same(to_host(y), ty.detach().numpy())
    backward_both(y, ty, torch)
    same(to_host(x.grad), tx.grad.numpy())
    z, tz = mg.zeros(3, 4), torch.zeros(3, 4)
    z[keys(mg.tensor(flag))] = 5.0
    tz[keys(torch.tensor(flag))] = 5.0
    same(to_host(z), tz.numpy())


# ----------------------------------------------------------------------------- 15. sdpa with an empty L, S or E

SDPA_EMPTY = [((2, 0, 4), (2, 3, 4), (2, 3, 4)), ((2, 3, 0), (2, 5, 0), (2, 5, 4)), ((2, 3, 4), (2, 0, 4), (2, 0, 5)),
              ((2, 3, 4), (2, 5, 4), (2, 5, 0)), ((0, 3, 4), (0, 5, 4), (0, 5, 4))]


@pytest.mark.torch
@pytest.mark.parametrize("sq, sk, sv", SDPA_EMPTY, ids=str)
@pytest.mark.parametrize("is_causal", [False, True])
def test_sdpa_with_an_empty_dim_matches_torch(sq, sk, sv, is_causal):
    """Empty L or Ev: an empty result; S = 0: zeros (no key to attend to); E = 0: every score 0, so the mean of the
    values: as PyTorch's, values and gradients (before: ZeroDivisionError for E = 0, NumPy's max of nothing for S = 0)."""
    torch = torch_()
    rng = np.random.default_rng(0)
    (q, k, v), (tq, tk, tv) = both(torch, *(rng.standard_normal(s) for s in (sq, sk, sv)))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=is_causal)
    same(to_host(out), tout.detach().numpy(), exact=False)
    backward_both(out, tout, torch)
    for t, tt in ((q, tq), (k, tk), (v, tv)):
        same(to_host(t.grad), tt.grad.numpy(), exact=False)


# ----------------------------------------------------------------------------- 16. var / std with n <= correction

@pytest.mark.torch
@pytest.mark.parametrize("method", ["var", "std"])
@pytest.mark.parametrize("n, correction", [(1, 1), (2, 2), (2, 3), (3, 1)])
def test_var_and_std_with_no_degrees_of_freedom_warn_as_torch(method, n, correction):
    """n <= correction: inf or nan, and PyTorch's UserWarning word for word (before: no warning); n > correction:
    none. (The gradient there is nan or inf in both, not compared.)"""
    torch = torch_()
    a = np.random.default_rng(0).standard_normal((4, n))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        y = getattr(T(a), method)(dim=1, correction=correction)
    with warnings.catch_warnings(record=True) as want:
        warnings.simplefilter("always")
        ty = getattr(torch.tensor(a), method)(dim=1, correction=correction)
    same(to_host(y), ty.numpy(), exact=False)
    assert [str(w.message) for w in got] == [str(w.message).split(" (Triggered internally")[0] for w in want]
    assert all(w.category is UserWarning and w.filename == __file__ for w in got)


# ----------------------------------------------------------------------------- 17. a recorded write into from_numpy

def test_a_recorded_in_place_write_into_a_from_numpy_tensor_is_refused():
    """PyTorch writes into the array; minigrad's recorded write gives the tensor a new array (NOTE [in-place]), which
    ended the sharing unseen (before: `a` kept its old values). Refused now, naming what to do; unrecorded writes
    still go into the array."""
    a = np.zeros(3)
    t, w = mg.from_numpy(a), mg.ones(3, dtype="float64", device="cpu", requires_grad=True)
    with pytest.raises(RuntimeError, match=r"add_: in place on a view.*from_numpy tensor.*mg.no_grad\(\)"):
        t.add_(w)
    with pytest.raises(RuntimeError, match=r"copy_: in place on a view.*from_numpy"):
        t.copy_(w)
    with pytest.raises(RuntimeError, match=r"in place on a view.*from_numpy"):
        t[0] = w[1]
    assert not t.requires_grad and t.grad_fn is None
    with mg.no_grad():
        t.add_(w)
    t[1] = 5.0
    np.testing.assert_array_equal(a, [1.0, 5.0, 1.0])
