"""The Tensor's methods and minigrad's functions called with the arguments PyTorch users pass, against PyTorch (2.13,
float64 where it is a float): negative dims, tuples of dims, dim=None, keepdim, dtype=, correction and unbiased,
(values, indices) results, ties, integer and bool inputs (the result's dtype), 0-d and empty tensors, inputs that are
a transpose or a strided slice (not contiguous), and each call as a method, a function, with keywords or positionals.

Each call is one string, evaluated with `m` the library (minigrad or torch) and `x` the input, so that it is written
once for both. Both must give the same values, dtype and shape, and the same gradients for a random cotangent (where
differentiable), or both must raise. Where PyTorch raises and minigrad does not, the call must be one of minigrad's
documented extensions (EXTENSIONS: an integer input to mean, var, softmax, ... becomes float32; dim=None means every
dim); where minigrad raises and PyTorch does not, one of UNSUPPORTED, whose message must say what to do instead.

Found by these (each fixed in the op's own code; each row of FOUND failed before its fix):
  one dim      a tuple, a list or None given where PyTorch takes one int (cumsum, softmax, log_softmax, topk, sort,
               gather, index_select, split, chunk, unbind, narrow, unflatten, flatten, unsqueeze, transpose, cat,
               stack) was read as its first dim, or as every dim, silently: now PyTorch's TypeError (argmax and
               argmin handed it to NumPy, whose TypeError did not name the op)
  permute      a dim out of range (permute(0, 3) of a 2-d tensor) wrapped around silently: now an IndexError
  sort         of a 0-d tensor along dim 1 or -2: an IndexError, as PyTorch's
  uint8        sum, prod and cumsum of uint8 gave uint64 (NumPy's), and cumsum of a 0-d int32 or bool kept its dtype:
               int64, as PyTorch's, for every integer and bool input
  empty        flatten and unflatten of a tensor with a 0-size dim raised (reshape's -1 is ambiguous there)
  F.softmax    dim=None computed one softmax over every element; PyTorch takes its implicit dim (with its warning)
  max(other)   x.max(y) and x.min(y) with a tensor y are maximum and minimum, as in PyTorch (was a TypeError)
  masked_*     masked_fill of an integer tensor with a float (PyTorch casts it), masked_select of a 0-d tensor
  pow          an integer tensor to negative integer powers (2 ** t, t ** t): PyTorch's integers (0, or +-1 for a
               base of +-1), not NumPy's error under the label ShapeError
  var, std     correction == n: the gradient is PyTorch's +-inf (its closed form, 2 (x - mean) / (n - correction)),
               not nan; the mean's gradient is exactly zero, so var now leaves it out
  dtype=       sum, mean, prod, cumsum, softmax, log_softmax (and F.softmax, F.log_softmax) take PyTorch's dtype=
  keywords     permute(dims=), repeat(repeats=), expand(size=), reshape(shape=), where(condition, other=) (was y=),
               split(split_size=) (was split_size_or_sections=, torch.split's name, not Tensor.split's)
  any, all     take dim (an int, a tuple; () reduces nothing, as PyTorch's) and keepdim (were TypeErrors)
  nan          sign(nan) was nan (NumPy's), PyTorch's is 0, and so abs's gradient at nan; relu's gradient at nan is g,
               as PyTorch's (it was 0); sign() of a bool tensor raised
  sort, topk   descending (largest): a nan and an inf in one row came inf first (the key -x tied them), where nan is
               the largest, as PyTorch's
  low floats   bfloat16 added up in bfloat16 (NumPy's loop for ml_dtypes): a sum of 1000 numbers near 1 was 512, a
               softmax over them off by 2x, a bias's gradient over 1000 rows 256; float16 and bfloat16 sums, means,
               cumsums and broadcast gradients now add up in float32 and round once, as PyTorch's kernels
"""
import math
import re
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from on_device import to_host

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")]

RTOL, ATOL = 1e-12, 1e-13
_RNG = np.random.default_rng(0)
ARRAYS = {
    "3d": _RNG.standard_normal((2, 3, 4)),
    "ties": np.array([[[1.0, 3, 3, 0], [2, 2, 1, 2], [0, 0, 0, 0]], [[-1, 4, 4, 4], [1, 1, 1, 1], [2, -2, 2, -2]]]),
    "0d": np.array(1.5),
    "empty": np.zeros((0, 3)),
    "1d": _RNG.standard_normal(5),
    "nan": np.array([[1.0, np.nan, -3.0, 0.0], [np.inf, -1.0, -np.inf, np.nan]]),
}
# how the input reaches the call: as made, or as a view that is not contiguous (its gradient reaches the base)
VIEWS = {"": lambda t: t, "T": lambda t: t.transpose(0, -1) if t.ndim else t, "slice": lambda t: t[..., ::2]}
INTEGER = ("int64", "int32", "uint8", "bool")

# PyTorch raises, minigrad computes: (pattern of the call, dtypes), what minigrad documents instead
EXTENSIONS = [
    (r"\.(mean|var|std|softmax|log_softmax|norm|logsumexp)\(|F\.(softmax|log_softmax|normalize)\(", INTEGER),  # float32
    (r"\.(arg(max|min)|topk|round|abs)\(|x \*\* x", ("bool",)),  # NumPy's, of a bool array
    (r"dtype=m\.int64", ("float64",)),                            # to an integer type: no gradient, not PyTorch's error
    (r"\.view\(", None),                                           # view is reshape: any strides (tensor.py)
    (r"F\.layer_norm", None),                                      # normalized_shape (): each element its own group
    (r"\.(max|min|prod|logsumexp)\((dim=)?None|\.(max|min|prod|mean|sum)\(keepdim", None),  # None: every dim
    (r"\.logsumexp\(\(\)", None),                                  # (): every dim, as sum's (PyTorch fails inside)
    (r"\[.*::-1", None),                                           # a negative step: NumPy's view
]
# minigrad raises, PyTorch computes: (pattern of the call, what minigrad's message must say)
UNSUPPORTED = [
    (r"\.mT", r"mT: needs at least 2 dims"),                       # PyTorch's 0-d .mT: deprecated there
    (r"\.gather\(", r"gather: index must have as many dims as the input"),  # PyTorch's 0-d input with a 1-d index
]


def _match(table, call, dtype):
    return next((what for pattern, what in table if re.search(pattern, call)
                 and (what is None or isinstance(what, str) or dtype in what)), False) is not False


def _leaves(array, dtype):
    a = array if dtype.startswith("float") else (array * 2).astype(dtype)
    grad = dtype == "float64"
    return (mg.tensor(a, dtype=dtype, requires_grad=grad),
            torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=grad))


def _eval(call, lib, x):
    return eval(call, {"m": lib, "F": F if lib is mg else TF, "math": math}, {"x": x})  # noqa: S307


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def check(call, array, dtype="float64", view=""):
    """call on minigrad and on torch: the same results and gradients, or both raise (EXTENSIONS, UNSUPPORTED)."""
    (leaf_m, leaf_t), results = _leaves(array, dtype), []
    for lib, leaf in ((mg, leaf_m), (torch, leaf_t)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                results.append(_eval(call, lib, VIEWS[view](leaf)))
        except Exception as e:  # noqa: BLE001 each library's own errors
            results.append(e)
    got, want = results
    where = f"{call} on {dtype} {array.shape}{' ' + view if view else ''}"
    if isinstance(want, Exception):
        assert isinstance(got, Exception) or _match(EXTENSIONS, call, dtype), \
            f"{where}: PyTorch raises {type(want).__name__}: {want}; minigrad gives {got!r:.300}"
        return
    if isinstance(got, Exception):
        message = next((m for p, m in UNSUPPORTED if re.search(p, call)), None)
        assert message is not None and re.search(message, str(got)), f"{where}: minigrad raises {got!r}, PyTorch: {want!r:.300}"
        return
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want), f"{where}: {len(got)} results, PyTorch {len(want)}"
    cotangents = []
    for i, (g, w) in enumerate(zip(got, want)):
        if not isinstance(w, torch.Tensor):
            assert g == w, f"{where}: result {i} is {g!r}, PyTorch's {w!r}"
            continue
        assert g.shape == tuple(w.shape) and g.dtype.name == str(w.dtype).split(".")[1], \
            f"{where}: result {i} is {g.dtype} {g.shape}, PyTorch's {w.dtype} {tuple(w.shape)}"
        tol = (RTOL, ATOL) if g.dtype != "float32" else (1e-6, 1e-6)  # float32: the same math, not the same order
        np.testing.assert_allclose(to_host(g).astype("float64"), w.detach().numpy().astype("float64"), rtol=tol[0],
                                   atol=tol[1], equal_nan=True, err_msg=f"{where}: result {i}")
        if w.requires_grad:
            assert g.requires_grad, f"{where}: result {i} does not require grad, PyTorch's does"
            cotangents.append((g, w, np.random.default_rng(i).standard_normal(g.shape)))
    if not cotangents:
        return
    sum(((g * mg.tensor(c, dtype=g.dtype)).sum().double() for g, w, c in cotangents), start=0).backward()
    sum((w * torch.tensor(c, dtype=w.dtype)).sum().double() for g, w, c in cotangents).backward()
    g_m = np.zeros(array.shape) if leaf_m.grad is None else to_host(leaf_m.grad)
    g_t = np.zeros(array.shape) if leaf_t.grad is None else leaf_t.grad.numpy()
    tol = (RTOL, ATOL) if all(g.dtype == "float64" for g, w, c in cotangents) else (1e-6, 1e-6)
    np.testing.assert_allclose(g_m, g_t, rtol=tol[0], atol=tol[1], equal_nan=True, err_msg=f"{where}: the gradient")


def check_everywhere(call, dtypes=("float64",), arrays=("3d", "ties", "0d", "empty"), views=("", "T")):
    for name in arrays:
        for dtype in dtypes:
            for view in views:
                if view and ARRAYS[name].ndim < 2:
                    continue
                check(call, ARRAYS[name], dtype, view)


# ----------------------------------------------------------------------------- reductions, every way of naming dims

DIMS = [None, 0, -1, -3, (0, -1), [1], (), 3]
FLOAT_REDUCTIONS = ["sum", "mean", "amax", "amin", "logsumexp", "var", "std", "norm", "any", "all"]


def _reduction_calls():
    calls = []
    for op in FLOAT_REDUCTIONS + ["prod", "max", "min", "argmax", "argmin", "cumsum", "softmax", "log_softmax"]:
        one = op in ("prod", "max", "min", "argmax", "argmin", "cumsum", "softmax", "log_softmax")
        for dim in DIMS:
            if one and isinstance(dim, (tuple, list)):
                continue  # a tuple where PyTorch takes one int: test_one_dim_refuses_what_pytorch_refuses
            if op in ("var", "std") and dim == ():
                continue  # PyTorch's gradient of var(dim=()) is inf: test_var_over_no_dims_is_over_every_dim
            if op in ("cumsum", "softmax", "log_softmax"):
                calls += [f"x.{op}({dim!r})", f"x.{op}(dim={dim!r})"]
                continue
            args = "2, " if op == "norm" else ""
            calls += [f"x.{op}({args}{dim!r})", f"x.{op}({args}dim={dim!r}, keepdim=True)"]
            if op != "norm" and isinstance(dim, int):
                calls.append(f"x.{op}({dim!r}, True)")
    return calls


REDUCTION_DTYPES = {"sum": INTEGER, "prod": INTEGER, "amax": INTEGER, "amin": INTEGER, "max": INTEGER, "min": INTEGER,
                    "cumsum": INTEGER, "argmax": ("int64", "uint8"), "argmin": ("int32",), "mean": ("int64",),
                    "var": ("bool",), "softmax": ("int32",), "any": ("bool", "int64"), "all": ("bool", "int32")}


@pytest.mark.parametrize("call", _reduction_calls())
def test_a_reduction_with_every_way_of_naming_its_dims(call):
    op = call[2:].split("(")[0]
    check_everywhere(call, arrays=("3d",), views=("", "T"))
    check_everywhere(call, arrays=("ties", "0d", "empty"), views=("",))
    empty = ("empty",) if op != "softmax" else ()  # PyTorch's integer softmax of nothing is an integer (no kernel runs)
    check_everywhere(call, REDUCTION_DTYPES.get(op, ()), arrays=("ties", "0d") + empty, views=("",))


MORE_REDUCTIONS = [
    "x.var(0, False)", "x.var(-1, True, True)", "x.var(False)", "x.var(correction=0)", "x.var(-1, correction=2)",
    "x.var(dim=(0, -1), unbiased=False, keepdim=True)", "x.std(-1, keepdim=True, correction=0.5)", "x.std(unbiased=False)",
    "x.std((0, 1), False, True)", "x.norm(1, -1)", "x.norm(p=3, dim=(0, -1), keepdim=True)", "x.norm(math.inf)",
    "x.norm(-math.inf, 0)", "x.norm(p='fro')", "x.logsumexp(-1, keepdim=True)", "x.sum(axis=-1, keepdims=True)",
    "x.max(dim=1).values", "x.max(dim=1).indices", "x.min(-1, keepdim=True)[1]", "x.max(-1, True).values",
    "x.argmax()", "x.argmax(keepdim=True)", "x.argmin(-1, True)", "x.sum(dtype=m.float64)", "x.sum(-1, dtype=m.int64)",
    "x.sum((0, -1), True, dtype=m.float32)", "x.mean(dtype=m.float64)", "x.mean(0, keepdim=True, dtype=m.float32)",
    "x.prod(-1, dtype=m.float64)", "x.cumsum(0, dtype=m.float64)", "x.cumsum(-1, dtype=m.int64)",
    "x.softmax(-1, dtype=m.float64)", "x.log_softmax(0, m.float64)", "x.softmax(dim=-1, dtype=m.float32)",
    "x.max(x.flip(-1))", "x.min(x.flip(0))", "m.maximum(x, x.flip(-1))", "x.minimum(x.flip(0))",
]


@pytest.mark.parametrize("call", MORE_REDUCTIONS)
def test_the_other_arguments_of_reductions(call):
    check_everywhere(call, ("float64", "int64", "bool"), views=("", "T", "slice"))


# ----------------------------------------------------------------------------- one dim, where PyTorch takes one int

ONE_DIM = ["x.cumsum({})", "x.softmax({})", "x.log_softmax(dim={})", "F.softmax(x, {})", "F.log_softmax(x, dim={})",
           "x.topk(1, {})", "x.sort({})", "x.sort(dim={}, descending=True)", "x.argsort({})",
           "x.gather({}, m.zeros(1, 1, 1, dtype=m.int64))", "x.index_select({}, m.tensor([0]))", "x.split(1, {})",
           "x.split([1, 1], {})", "x.chunk(2, {})", "x.unbind({})", "x.narrow({}, 0, 1)", "x.unflatten({}, (1, -1))",
           "x.flatten({})", "x.flatten(0, {})", "x.unsqueeze({})", "x.transpose({}, 0)", "x.transpose(0, {})",
           "m.cat([x, x], {})", "m.stack([x, x], dim={})", "x.max({})", "x.min({}, True)", "x.prod({})",
           "x.permute(0, 1, {})", "x.permute({}, 0, 1)", "x.argmax({})", "x.argmin(dim={}, keepdim=True)"]


@pytest.mark.parametrize("dim", [(0,), (0, 1), [1], None, True, 1.0, 3, -4])
@pytest.mark.parametrize("call", ONE_DIM)
def test_one_dim_refuses_what_pytorch_refuses(call, dim):
    """A tuple, a list or None where PyTorch takes one int is PyTorch's TypeError (minigrad read a tuple as its first
    dim, None as dim 0 or every dim); a dim out of range its IndexError. Both raise, or both compute the same."""
    call = call.format(repr(dim))
    x_m, x_t = _leaves(ARRAYS["3d"], "float64")
    errors = []
    for lib, x in ((mg, x_m), (torch, x_t)):
        try:
            _eval(call, lib, x)
            errors.append(None)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    got, want = errors
    if want is None or _match(EXTENSIONS, call, "float64"):
        check(call, ARRAYS["3d"])
        return
    assert got is not None, f"{call}: PyTorch raises {type(want).__name__}: {want}; minigrad computes"
    kind = next((k for k in (TypeError, IndexError) if isinstance(want, k)), Exception)
    assert isinstance(got, kind), f"{call}: minigrad raises {got!r}, PyTorch {type(want).__name__}: {want}"
    if kind is TypeError:
        assert re.search(r"must be (one )?int", str(got)), f"{call}: {got}"


# ----------------------------------------------------------------------------- shape, index and mask methods

SHAPE_CALLS = [
    "x.squeeze()", "x.squeeze(-1)", "x.squeeze((0, -1))", "x.squeeze(dim=(-3,))", "x.squeeze(())", "x.unsqueeze(-1)",
    "x.unsqueeze(0)", "x.unsqueeze(dim=-2)", "x.expand(2, *x.shape)", "x.expand(-1, *x.shape[1:])",
    "x.expand((3,) + x.shape)", "x.repeat(2, *[1] * x.ndim)", "x.repeat([1] * x.ndim)", "x.repeat(0, *[2] * x.ndim)",
    "x.permute(tuple(reversed(range(x.ndim))))", "x.permute(*range(x.ndim)) if x.ndim else x",
    "x.permute(tuple(range(-x.ndim, 0)))",
    "x.permute(dims=tuple(reversed(range(x.ndim))))", "x.transpose(-1, 0)", "x.mT", "x.T", "x.t()",
    "x.flatten()", "x.flatten(1)", "x.flatten(-2, -1)", "x.flatten(start_dim=0, end_dim=-2)",
    "x.unflatten(-1, (-1, 1))", "x.unflatten(0, (1, x.shape[0]))", "x.flip(-1, 0)", "x.flip([0, -1])",
    "x.flip(dims=(-1,))", "x.flip(())", "x.reshape(-1, 1)", "x.reshape(x.shape[-1], -1)", "x.view(-1)",
    "x.narrow(-1, -2, 2)", "x.narrow(0, 0, 0)", "x.narrow(dim=0, start=1, length=1)", "x.split(2, -1)",
    "x.split([1, 2], 1)", "x.split(split_size=1, dim=0)", "x.chunk(3, -1)", "x.chunk(chunks=2, dim=0)",
    "x.unbind(-1)", "x.unbind(dim=0)", "x.contiguous()", "x.clone()", "x.reshape_as(x.T)", "x.expand_as(x)",
    "m.cat([x, x], -1)", "m.cat((x, x * 2), dim=0)", "m.stack([x, x], -1)", "m.stack((x, x), dim=0)",
    "x.tril(-1)", "x.triu(diagonal=1)", "x.topk(2)", "x.topk(2, 0, False)", "x.topk(k=1, dim=-1, largest=True, sorted=True)",
    "x.sort(stable=True)", "x.sort(dim=0, descending=True, stable=True)", "x.sort(stable=True, dim=-1)",
    "x.argsort(stable=True)", "x.argsort(dim=0, descending=True, stable=True)", "x.sort(0, True)", "x.sort(-1)",
    "x.argsort(-1, True)", "x.argsort()",
]


@pytest.mark.parametrize("call", SHAPE_CALLS)
def test_a_shape_method_with_every_kind_of_argument(call):
    if "topk" in call or "sort(" in call and "stable" not in call:  # PyTorch leaves the order of ties open
        check_everywhere(call, arrays=("3d", "0d", "empty", "1d"), views=("", "T", "slice"))
    else:
        check_everywhere(call, ("float64", "int64", "bool"), arrays=("3d", "ties", "0d", "empty", "1d"),
                         views=("", "T", "slice"))


INDEX_CALLS = [
    "x.gather(-1, m.zeros(x.shape[:-1] + (2,), dtype=m.int64))", "x.gather(0, m.ones((1,) + x.shape[1:], dtype=m.int64))",
    "x.index_select(-1, m.tensor([0, 0, 1]))", "x.index_select(0, m.tensor(1))", "x.index_select(dim=0, index=m.tensor([1]))",
    "x.masked_fill(x > 0, 2.0)", "x.masked_fill(x > 0, -2.5)", "x.masked_fill(mask=x < 0, value=1)",
    "x.masked_fill(x > 0, m.tensor(2))", "x.masked_select(x > 0)", "x.masked_select(mask=x < 1)",
    "m.where(x > 0, x, 0.5)", "m.where(x > 0, 1.0, x)", "m.where(x > 0, x, x * 2)", "x.where(x > 0, -x)",
    "x.clamp(-0.5)", "x.clamp(max=0.5)", "x.clamp(min=-1, max=2)", "x.clip(-0.1, 0.1)", "x.clamp(x.flip(-1))",
    "x[..., 0]", "x[None, ..., 1:]", "x[..., [0, 0]]", "x[x > 0]", "x.where(x > 0, 0)",
    "2 ** x", "x ** 2", "(-1) ** x", "x ** x", "x.pow(2)", "x.abs()", "x.sign()", "x.round()", "-x", "x.square()",
]


@pytest.mark.parametrize("call", INDEX_CALLS)
def test_an_index_mask_or_elementwise_method(call):
    check_everywhere(call, ("float64", "int64", "int32", "bool"), arrays=("3d", "ties", "0d", "1d"), views=("", "slice"))


# ----------------------------------------------------------------------------- functional, as functions and keywords

FUNCTIONAL_CALLS = [
    "F.softmax(x, -1)", "F.softmax(x, dim=0)", "F.softmax(x, dim=-1, dtype=m.float64)", "F.softmax(x)",
    "F.softmax(x, None)", "F.log_softmax(x, 1)", "F.log_softmax(x, dim=-1, dtype=m.float32)", "F.log_softmax(x)",
    "F.normalize(x)", "F.normalize(x, dim=-1)", "F.normalize(x, p=1, dim=0)", "F.normalize(x, 2.0, (0, -1))",
    "F.relu(x)", "F.gelu(x, approximate='tanh')", "F.silu(x)", "F.leaky_relu(x, 0.2)", "F.softplus(x, beta=2)",
    "F.layer_norm(x, x.shape[-1:])", "F.mse_loss(x, x.flip(-1), reduction='sum')", "F.l1_loss(x, x * 0.5)",
]


@pytest.mark.parametrize("call", FUNCTIONAL_CALLS)
def test_a_functional_called_as_pytorch_users_call_it(call):
    check_everywhere(call, arrays=("3d", "0d", "1d", "empty"), views=("", "T", "slice"))


NAN_CALLS = ["x.sign()", "x.abs()", "x.relu()", "F.relu(x)", "x.norm(1, -1)", "x.abs().sum()", "x.amax(-1)",
             "x.sum(-1)", "x.softmax(-1)", "x.logsumexp(0)", "x.sort(dim=-1, descending=True, stable=True)", "x.cumsum(-1)",
             "x.sort(dim=0, stable=True)", "x.argsort(dim=-1, descending=True, stable=True)", "x.topk(1)",
             "x.clamp(-1, 1)", "x.where(x > 0, 0.0)", "x.masked_fill(x.isnan(), 0.0)", "x.max(-1)", "x.argmin(0)"]


@pytest.mark.parametrize("call", NAN_CALLS)
def test_nan_and_infinities_as_pytorch(call):
    """sign(nan) is 0 and so is the gradient of |x| there (NumPy's sign gives nan); relu passes the gradient at nan.
    (Not yet: x.max() of all elements gives nan's gradient to every element where PyTorch's shares it among the nans,
    as amax, which is PyTorch's amax's; maximum at a nan; norm(inf) along a row with a nan.)"""
    check(call, ARRAYS["nan"])


KEYWORD_CALLS = [  # every argument by PyTorch's keyword
    "x.sum(dim=1)", "x.topk(k=2, dim=1, largest=True, sorted=True)", "x.gather(dim=1, index=m.zeros(2, 1, 4, dtype=m.int64))",
    "x.index_select(dim=0, index=m.tensor([1]))", "x.masked_fill(mask=x > 0, value=1.0)", "x.narrow(dim=1, start=0, length=2)",
    "x.unflatten(dim=1, sizes=(3, 1))", "x.repeat(repeats=(1, 2, 1))", "x.expand(size=(2, 2, 3, 4))",
    "x.flatten(start_dim=1, end_dim=2)", "x.transpose(dim0=0, dim1=1)", "x.squeeze(dim=0)", "x.unsqueeze(dim=0)",
    "x.chunk(chunks=2, dim=1)", "x.split(split_size=2, dim=1)", "x.clamp(min=0.0, max=1.0)", "x.pow(exponent=2)",
    "x.var(dim=1, unbiased=False, keepdim=True)", "x.std(dim=1, correction=0)", "x.norm(p=2, dim=1, keepdim=True)",
    "x.where(condition=x > 0, other=x * 2)", "x.maximum(other=x * 2)", "x.to(dtype=m.float32)", "x.add(other=x, alpha=2)",
    "x.sub(other=x, alpha=2)", "x.div(other=x + 3)", "x.masked_select(mask=x > 0)", "x.tril(diagonal=1)",
    "x.reshape(shape=(6, 4))", "x.flip(dims=(0,))", "x.logsumexp(dim=1, keepdim=True)", "x.max(dim=1, keepdim=True)",
    "x.argmax(dim=1, keepdim=True)", "x.prod(dim=1, keepdim=True)", "x.unbind(dim=1)", "x.expand_as(other=x)",
    "x.type_as(other=x)", "x.reshape_as(other=x)", "x.matmul(other=x.mT)", "x.bmm(mat2=x.mT)", "x.round(decimals=1)",
    "x.new_full(size=(2,), fill_value=1.0)", "x.new_tensor(data=[1.0])", "x.size(dim=1)",
    "m.cat(tensors=[x, x], dim=1)", "m.stack(tensors=[x, x], dim=1)", "m.where(condition=x > 0, input=x, other=x * 2)",
    "m.maximum(input=x, other=x)", "F.softmax(input=x, dim=1)", "F.normalize(input=x, p=2.0, dim=1, eps=1e-6)",
    "F.gelu(input=x, approximate='tanh')", "F.leaky_relu(input=x, negative_slope=0.2)",
    "F.softplus(input=x, beta=2.0, threshold=10.0)", "F.layer_norm(input=x, normalized_shape=(4,), eps=1e-3)",
    "F.mse_loss(input=x, target=x * 0, reduction='sum')", "F.log_softmax(input=x, dim=-1)",
    "F.dropout(input=x, p=0.0, training=True)", "F.linear(input=x, weight=x[0], bias=x[0, :, 0])",
]


@pytest.mark.parametrize("call", KEYWORD_CALLS)
def test_every_argument_by_its_pytorch_keyword(call):
    """Before: x.where(condition, other=) (minigrad's was y=), x.repeat(repeats=), x.expand(size=), x.reshape(shape=)
    and x.split(split_size=) were TypeErrors."""
    check(call, ARRAYS["3d"])


@pytest.mark.parametrize("name, instead, torch_call", [
    ("median", "x.sort(1).values.narrow(1, (x.shape[1] - 1) // 2, 1).squeeze(1)", "x.median(1).values"),
    ("tile", "x.repeat(1, 1, 2)", "x.tile((2,))"), ("movedim", "x.permute(0, 2, 1)", "x.movedim(1, -1)"),
    ("take_along_dim", "x.gather(1, m.zeros(2, 1, 4, dtype=m.int64))",
     "x.take_along_dim(m.zeros(2, 1, 4, dtype=m.int64), 1)"),
    ("repeat_interleave", "x.unsqueeze(2).expand(2, 3, 2, 4).flatten(1, 2)", "x.repeat_interleave(2, 1)"),
])
def test_a_method_minigrad_lacks_says_what_gives_pytorchs_values(name, instead, torch_call):
    """movedim and tile were answered "did you mean 'dim'?" and "'tril' or 'le'?"; each message now names what to
    write, and what it names gives PyTorch's values and gradients."""
    for where in (mg.zeros(1), mg):  # x.median and torch.median's mg.median
        with pytest.raises(AttributeError, match=re.escape(instead.split("(")[0][2:]) if "." in instead else name):
            getattr(where, name)
    x_m, x_t = _leaves(ARRAYS["3d"], "float64")
    got, want = _eval(instead, mg, x_m), _eval(torch_call, torch, x_t)
    np.testing.assert_allclose(to_host(got), want.detach().numpy(), rtol=RTOL)
    cot = np.random.default_rng(0).standard_normal(got.shape)
    (got * mg.tensor(cot)).sum().backward()
    (want * torch.tensor(cot)).sum().backward()
    np.testing.assert_allclose(to_host(x_m.grad), x_t.grad.numpy(), rtol=RTOL)


LOW = ("float16", "bfloat16") if mg.default_device() == "cpu" else ("float16",)  # CuPy refuses bfloat16
LOW_CALLS = ["x.sum(-1)", "x.sum()", "x.mean(-1)", "x.mean()", "x.softmax(-1)", "x.log_softmax(-1)", "x.cumsum(-1)",
             "x.var(-1)", "x.std()", "x.logsumexp(-1)", "x.norm(dim=-1)", "F.layer_norm(x, (1000,))", "F.normalize(x)",
             "(x.reshape(3000, 1) * x[0, :2]).sum(1)"]


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("call", LOW_CALLS)
def test_float16_and_bfloat16_add_up_in_float32(call, dtype):
    """NOTE [2-byte sums] (backend/rows.py): NumPy added bfloat16 up in bfloat16, which stops a running sum of numbers
    near 1 between 256 and 512 (the sum of a row of 1000 was 512, PyTorch's 996; a softmax over it was off by 2x; a bias's
    gradient over 1000 rows 256); float16 pairwise, closer. Now both in float32, rounded once, as PyTorch's kernels:
    the same values and gradients within two roundings of the dtype."""
    a = np.random.default_rng(0).standard_normal((3, 1000)) * 0.1 + 1
    x_t = torch.tensor(a).to(getattr(torch, dtype)).requires_grad_()
    x_m = mg.tensor(x_t.detach().float().numpy()).to(dtype).requires_grad_()
    got, want = _eval(call, mg, x_m), _eval(call, torch, x_t)
    assert got.dtype == (mg.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)) and got.shape == tuple(want.shape)
    rtol = 2 * float(torch.finfo(getattr(torch, dtype)).eps)
    scale = float(want.detach().abs().max())  # softmax's small values: relative to the largest
    np.testing.assert_allclose(to_host(got.float()), want.detach().float().numpy(), rtol=rtol, atol=rtol * scale)
    cot = np.random.default_rng(1).standard_normal(got.shape)
    (got.float() * mg.tensor(cot, dtype="float32")).sum().backward()
    (want.float() * torch.tensor(cot, dtype=torch.float32)).sum().backward()
    g_t = x_t.grad.float().numpy()
    np.testing.assert_allclose(to_host(x_m.grad.float()), g_t, rtol=4 * rtol, atol=4 * rtol * np.abs(g_t).max())


# ----------------------------------------------------------------------------- what these found, by name

FOUND = [  # (call, the array, its dtype): each failed before its fix
    ("x.cumsum((0, 1))", "3d", "float64"), ("x.softmax(None)", "3d", "float64"), ("x.topk(1, (0,))", "3d", "float64"),
    ("m.cat([x, x], None)", "3d", "float64"), ("x.sort(1)", "0d", "float64"), ("x.permute(3, 1, 2)", "3d", "float64"),
    ("x.permute(0, 1, -4)", "3d", "float64"), ("x.split(split_size=2)", "3d", "float64"), ("x.sign()", "ties", "bool"),
    ("x.sum()", "3d", "uint8"), ("x.prod(0)", "ties", "uint8"), ("x.cumsum(-1)", "3d", "uint8"),
    ("x.cumsum(0)", "0d", "int32"), ("x.cumsum(0)", "0d", "bool"), ("x.flatten(1)", "empty", "float64"),
    ("x.unflatten(1, (1, -1))", "empty", "float64"), ("F.softmax(x, None)", "3d", "float64"),
    ("x.max(x.flip(-1))", "ties", "float64"), ("x.masked_fill(x > 0, 2.5)", "ties", "int64"),
    ("x.masked_select(x > 0)", "0d", "float64"), ("2 ** x", "ties", "int64"), ("x ** x", "ties", "int32"),
    ("x.var(-1, correction=4)", "3d", "float64"), ("x.var((0, 1), correction=6)", "3d", "float64"),
    ("x.sum(dtype=m.float64)", "3d", "int64"), ("x.softmax(-1, dtype=m.float64)", "3d", "int64"),
    ("x.permute(dims=(1, 0, 2))", "3d", "float64"), ("x.sign()", "nan", "float64"), ("x.abs()", "nan", "float64"),
    ("x.relu()", "nan", "float64"), ("x.sort(dim=-1, descending=True, stable=True)", "nan", "float64"),
    ("x.topk(2)", "nan", "float64"),
]


@pytest.mark.parametrize("call, array, dtype", FOUND, ids=[f"{c}-{a}-{d}" for c, a, d in FOUND])
def test_what_these_found(call, array, dtype):
    check(call, ARRAYS[array], dtype)  # where PyTorch raises (a tuple for one dim), minigrad must too


def test_var_with_correction_n_has_pytorchs_infinite_gradient():
    """n == correction: var is inf (or nan for a constant row) and its gradient 2 (x - mean) g / 0, +-inf, as
    PyTorch's closed form gives (minigrad's composition gave nan: the mean's path summed +inf and -inf)."""
    a = np.array([[1.0, 3.0], [2.0, 2.0]])
    x_m, x_t = _leaves(a, "float64")
    x_m.var(1, correction=2).sum().backward()
    x_t.var(1, correction=2).sum().backward()
    assert to_host(x_m.grad)[0].tolist() == [-math.inf, math.inf] == x_t.grad[0].tolist()
    assert np.isnan(to_host(x_m.grad)[1]).all() and np.isnan(x_t.grad[1].numpy()).all()


def test_var_over_no_dims_is_over_every_dim():
    """dim=() reduces every dim, as sum's; PyTorch's var(dim=()) agrees in value, but its backward reads () as no dim
    (n = 1, a gradient of 2 (x - mean) / 0 = +-inf): minigrad's gradient is var()'s, which PyTorch's var() gives."""
    for method in ("var", "std"):
        x_m, x_t = _leaves(ARRAYS["3d"], "float64")
        getattr(x_m, method)(()).backward()
        getattr(x_t, method)().backward()
        assert getattr(x_m, method)(()).item() == pytest.approx(getattr(x_t, method)(()).item(), rel=RTOL)
        np.testing.assert_allclose(to_host(x_m.grad), x_t.grad.numpy(), rtol=RTOL, atol=ATOL)
