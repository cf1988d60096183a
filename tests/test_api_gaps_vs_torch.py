"""Small gaps a PyTorch user hits, each against torch 2.13: the containers' operators (ModuleList +=, +, extend;
Sequential +, +=, *), state_dict's destination, prefix and keep_vars, cat and stack of an integer and a float
tensor, F.linear with a 1-d weight, `x ** y`'s error naming pow, the error classes of index_select, narrow and
max along an empty dim, and copy.deepcopy of a tensor that is not a leaf.
"""
import copy
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as MF
from minigrad import nn

from on_device import to_host

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch
TF = torch.nn.functional


def layers(lib):
    return [lib.Linear(2, 3), lib.ReLU(), lib.Linear(3, 2), lib.Tanh()]


def structure(m):
    """What a container holds, by name and layer type: [('0', 'Linear'), ...]."""
    return [(name, type(child).__name__) for name, child in m.named_children()]


def same_weights(m, t):
    """Copy torch's container's weights into minigrad's (same names), so that outputs compare."""
    m.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})


# ----------------------------------------------------------------------------- the containers' operators

CONTAINER_CALLS = {
    "ModuleList += list": lambda lib, a, b: _iadd(lib.ModuleList(a[:2]), a[2:]),
    "ModuleList += ModuleList": lambda lib, a, b: _iadd(lib.ModuleList(a[:2]), lib.ModuleList(a[2:])),
    "ModuleList + ModuleList": lambda lib, a, b: lib.ModuleList(a[:1]) + lib.ModuleList(a[1:]),
    "ModuleList + list": lambda lib, a, b: lib.ModuleList(a[:3]) + a[3:],
    "ModuleList.extend(Sequential)": lambda lib, a, b: lib.ModuleList(a[:1]).extend(lib.Sequential(*a[1:])),
    "Sequential + Sequential": lambda lib, a, b: lib.Sequential(*a[:2]) + lib.Sequential(*a[2:]),
    "Sequential += Sequential": lambda lib, a, b: _iadd(lib.Sequential(*a[:1]), lib.Sequential(*a[1:])),
    "Sequential * 2": lambda lib, a, b: lib.Sequential(*a[:2]) * 2,
    "2 * Sequential": lambda lib, a, b: 2 * lib.Sequential(*a[2:]),
    "Sequential *= 3": lambda lib, a, b: _imul(lib.Sequential(*a[2:3]), 3),
    "Sequential.extend(list), slice": lambda lib, a, b: lib.Sequential(*a[:1]).extend(a[1:])[1:],
}


def _iadd(m, other):
    m += other
    return m


def _imul(m, n):
    m *= n
    return m


@pytest.mark.parametrize("name", list(CONTAINER_CALLS))
def test_container_operators_as_pytorch(name):
    """Before: ModuleList's += and +, Sequential's +, += and * raised Python's 'unsupported operand'."""
    t = CONTAINER_CALLS[name](torch.nn, layers(torch.nn), None)
    m = CONTAINER_CALLS[name](nn, layers(nn), None)
    assert type(m).__name__ == type(t).__name__ and structure(m) == structure(t)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in t.named_parameters()]
    if "*" not in name and isinstance(t, torch.nn.Sequential) and isinstance(t[0], torch.nn.Linear):  # runs
        same_weights(m, t)
        x = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
        np.testing.assert_allclose(to_host(m(mg.tensor(x))), t(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_sequential_times_n_shares_the_layers_as_pytorch():
    for lib in (torch.nn, nn):
        block = lib.Linear(2, 2)
        twice = lib.Sequential(block) * 2
        assert twice[0] is twice[1] is block and len(list(twice.parameters())) == 2
    t, m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh()) * 3, nn.Sequential(nn.Linear(2, 2), nn.Tanh()) * 3
    same_weights(m, t)  # the block runs three times, its gradient summed over the three
    x = np.random.default_rng(3).standard_normal((4, 2))
    out_m, out_t = m(mg.tensor(x, dtype="float32")), t(torch.tensor(x, dtype=torch.float32))
    np.testing.assert_allclose(to_host(out_m), out_t.detach().numpy(), rtol=1e-5, atol=1e-6)
    out_m.sum().backward()
    out_t.sum().backward()
    np.testing.assert_allclose(to_host(m[0].weight.grad), t[0].weight.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call, error", [
    (lambda lib: lib.Sequential(lib.ReLU()) + [lib.Tanh()], ValueError),
    (lambda lib: _iadd(lib.Sequential(lib.ReLU()), lib.ModuleList([lib.Tanh()])), ValueError),
    (lambda lib: lib.Sequential(lib.ReLU()) * 0, ValueError),
    (lambda lib: lib.Sequential(lib.ReLU()) * 1.5, TypeError),
    (lambda lib: lib.ModuleList([lib.ReLU()]).extend(lib.Tanh()), TypeError),
])
def test_container_operators_refuse_as_pytorch(call, error):
    with pytest.raises(error):
        call(torch.nn)
    with pytest.raises(error, match=r"Sequential|ModuleList"):
        call(nn)


@pytest.mark.parametrize("call", [
    lambda lib: lib.Sequential(lib.ReLU(), None),
    lambda lib: lib.ModuleList([lib.ReLU(), None]),
    lambda lib: lib.ModuleList([lib.ReLU()]).append(None),
    lambda lib: lib.ModuleDict({"a": None}),
])
def test_a_none_entry_pytorch_keeps_is_refused_with_what_to_write(call):
    """PyTorch keeps None as an empty slot (and a Sequential's forward then fails on it); minigrad refuses at once."""
    assert len(call(torch.nn)) in (1, 2)
    with pytest.raises(TypeError, match=r"None, which PyTorch keeps as an empty slot.*nn\.Identity\(\)"):
        call(nn)


# ----------------------------------------------------------------------------- state_dict's arguments

def test_state_dict_prefix_keep_vars_and_destination_as_pytorch():
    """Before: state_dict() took no arguments (TypeError for each)."""
    def model(lib):
        m = lib.Sequential(lib.Linear(2, 3), lib.LayerNorm(3))
        m.register_buffer("step", (torch if lib is torch.nn else mg).zeros(1))
        return m

    t, m = model(torch.nn), model(nn)
    assert list(m.state_dict(prefix="enc.")) == list(t.state_dict(prefix="enc.")) \
        == ["enc.step", "enc.0.weight", "enc.0.bias", "enc.1.weight", "enc.1.bias"]
    kept = m.state_dict(keep_vars=True)
    assert all(kept[k] is v for k, v in list(m.named_parameters()) + list(m.named_buffers()))
    assert kept["0.weight"].requires_grad and isinstance(kept["0.weight"], nn.Parameter)
    dest_t, dest_m = {"other": 1}, {"other": 1}
    assert t.state_dict(destination=dest_t) is dest_t and m.state_dict(destination=dest_m) is dest_m
    assert list(dest_m) == list(dest_t)
    copied = m.state_dict()  # still copies of the arrays by default
    copied["0.weight"][...] = 0
    assert np.abs(to_host(m[0].weight)).sum() > 0
    with warnings.catch_warnings(record=True) as w_t:
        warnings.simplefilter("always")
        keys_t = list(t.state_dict(None, "p."))
    with warnings.catch_warnings(record=True) as w_m:
        warnings.simplefilter("always")
        keys_m = list(m.state_dict(None, "p."))
    assert keys_m == keys_t and {w.category for w in w_m} == {w.category for w in w_t} == {FutureWarning}
    m.load_state_dict(kept)  # the tensors themselves load back


# ----------------------------------------------------------------------------- cat and stack of mixed dtypes

MIXED = [("int64", "float32"), ("float32", "int64"), ("bool", "float32"), ("int32", "int64"), ("bool", "int64"),
         ("uint8", "int8"), ("int64", "float64"), ("bool", "uint8")]


@pytest.mark.parametrize("fn", ["cat", "stack"])
@pytest.mark.parametrize("first, second", MIXED)
def test_cat_and_stack_promote_as_pytorch(fn, first, second):
    """Before: TypeError 'inputs have different dtypes'; torch gives torch.result_type's dtype, and the float
    input's gradient."""
    values = np.array([[1, 0, 3], [2, 1, 0]])
    def run(lib, dtype, grad):
        return lib.tensor(values.astype(dtype), dtype=getattr(torch, dtype) if lib is torch else dtype,
                          requires_grad=grad)
    grads = [d.startswith("float") for d in (first, second)]
    tm = [run(mg, d, g) for d, g in zip((first, second), grads)]
    tt = [run(torch, d, g) for d, g in zip((first, second), grads)]
    out_m, out_t = getattr(mg, fn)(tm, dim=1), getattr(torch, fn)(tt, dim=1)
    assert out_m.dtype.name == str(out_t.dtype).replace("torch.", "") == str(torch.result_type(*tt)).split(".")[1]
    np.testing.assert_array_equal(to_host(out_m), out_t.detach().numpy())
    if any(grads):
        weight = np.arange(out_t.numel(), dtype=np.float64).reshape(out_t.shape) + 1
        (out_m * mg.tensor(weight, dtype=out_m.dtype)).sum().backward()
        (out_t * torch.tensor(weight, dtype=out_t.dtype)).sum().backward()
        for a, b, g in zip(tm, tt, grads):
            if g:
                np.testing.assert_array_equal(to_host(a.grad), b.grad.numpy())


def test_cat_of_float32_and_float64_is_still_refused():
    """NOTE [type promotion]: float32 beside float64 is an error in minigrad (PyTorch gives float64)."""
    with pytest.raises(TypeError, match=r"cat: inputs have different dtypes \(float32 and float64\)"):
        mg.cat([mg.zeros(2), mg.zeros(2, dtype="float64")])


# ----------------------------------------------------------------------------- F.linear with a 1-d weight

@pytest.mark.parametrize("shape", [(2,), (3, 2), (2, 4, 2)])
def test_linear_with_a_1d_weight_as_pytorch(shape):
    """Before: ShapeError 'does not fit weight of shape (2,)'; PyTorch gives input @ weight, one number per row."""
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    xm, wm = mg.tensor(x, requires_grad=True), mg.tensor(w, requires_grad=True)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    out_m, out_t = MF.linear(xm, wm), TF.linear(xt, wt)
    assert out_m.shape == tuple(out_t.shape)
    np.testing.assert_allclose(to_host(out_m), out_t.detach().numpy(), rtol=1e-6, atol=1e-6)
    g = rng.standard_normal(out_m.shape).astype(np.float32)
    out_m.backward(mg.tensor(g))
    out_t.backward(torch.tensor(g))
    np.testing.assert_allclose(to_host(xm.grad), xt.grad.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(to_host(wm.grad), wt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_linear_with_a_1d_weight_refuses_what_pytorch_refuses():
    x, w = mg.ones(3, 2), mg.ones(2)
    with pytest.raises(RuntimeError):
        TF.linear(torch.ones(3, 2), torch.ones(2), torch.ones(1))
    with pytest.raises(RuntimeError, match=r"linear: a 1-d weight of shape \(2,\).*no bias.*F\.linear\(x, w\) \+ b"):
        MF.linear(x, w, mg.ones(1))
    with pytest.raises(RuntimeError):
        TF.linear(torch.ones(3, 3), torch.ones(2))
    with pytest.raises(RuntimeError, match=r"linear: a 1-d weight of shape \(2,\).*got input \(3, 3\)"):
        MF.linear(mg.ones(3, 3), w)


# ----------------------------------------------------------------------------- error classes a PyTorch user catches

ERRORS = {  # PyTorch's class must catch minigrad's error (minigrad's ShapeError is a ValueError and a RuntimeError)
    "index_select with a 2-d index": lambda L: L.ones(2, 2).index_select(0, L.tensor([[0, 1]])),  # was ShapeError
    "narrow past the end": lambda L: L.ones(2, 2).narrow(0, 1, 5),                                # was IndexError
    "narrow with a negative length": lambda L: L.ones(2, 2).narrow(0, 1, -1),                     # was IndexError
    "max along an empty dim": lambda L: L.zeros(0, 3).max(0),                                     # was ShapeError
    "min along an empty dim": lambda L: L.zeros(0, 3).min(dim=0),                                 # was ShapeError
    "amax along an empty dim": lambda L: L.zeros(0, 3).amax(0),                                   # was ShapeError
    "max of nothing": lambda L: L.zeros(0, 3).max(),
    "argmax along an empty dim": lambda L: L.zeros(0, 3).argmax(0),
    "flatten with a bad dim": lambda L: L.ones(2, 2).flatten(0, 5),
    "narrow with a bad dim": lambda L: L.ones(2, 2).narrow(5, 0, 1),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_caught_by_pytorchs_class(name):
    with pytest.raises(Exception) as want:
        ERRORS[name](torch)
    with pytest.raises(type(want.value), match=name.split()[0].lstrip("a")) as got:  # amax's op is max
        ERRORS[name](mg)
    assert type(want.value) in (IndexError, RuntimeError) and isinstance(got.value, (ValueError, IndexError))


@pytest.mark.parametrize("call", [lambda L: L.ones(2) ** L.ones(3), lambda L: L.ones(2).pow(L.ones(1, 3)),
                                  lambda L: 2 ** L.ones(2) ** L.ones(3, 1, 4)])
def test_pow_of_two_tensors_that_do_not_broadcast_names_pow(call):
    """Before: the error named the op, 'pow_tensor: shapes ...', which no user writes."""
    with pytest.raises(RuntimeError):
        call(torch)
    with pytest.raises(RuntimeError, match=r"^pow: shapes \(.*\) and \(.*\) do not broadcast") as got:
        call(mg)
    assert "pow_tensor" not in str(got.value)


# ----------------------------------------------------------------------------- copy.deepcopy

def test_deepcopy_of_a_non_leaf_is_refused_as_pytorch():
    """Before: minigrad copied the tensor with its record and the graph behind it (a backward through the copy
    reached copies of the leaves, whose gradients nobody reads); PyTorch refuses."""
    for lib in (torch, mg):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the user"
                           if lib is torch else r"only Tensors created explicitly by the user.*made by mul.*detach"):
            copy.deepcopy(x * 2)
        with pytest.raises(RuntimeError):
            copy.deepcopy({"h": [x.tanh()]})  # inside a container too


def test_deepcopy_of_leaves_as_pytorch():
    """A leaf is copied with its values, requires_grad and .grad; a no_grad result and a detached tensor are leaves."""
    def run(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward()
        with lib.no_grad():
            y = x * 3
        out = [copy.deepcopy(t) for t in (x, y, (x * 2).detach())]
        return [(t.is_leaf, t.requires_grad, t.tolist(), None if t.grad is None else t.grad.tolist()) for t in out], \
            out[0], x
    got, c_m, x_m = run(mg)
    want, c_t, x_t = run(torch)
    assert got == want
    c_m.grad.zero_()  # the copy's gradient is its own
    assert x_m.grad.tolist() == [2.0, 4.0]


# ----------------------------------------------------------------------------- the layers' dtype=

@pytest.mark.parametrize("make", [lambda lib, dt: lib.Linear(2, 3, dtype=dt),
                                  lambda lib, dt: lib.Linear(2, 3, False, None, dt),
                                  lambda lib, dt: lib.LayerNorm(3, dtype=dt),
                                  lambda lib, dt: lib.Embedding(4, 2, dtype=dt),
                                  lambda lib, dt: lib.BatchNorm1d(3, dtype=dt)])
def test_layers_take_pytorchs_dtype_keyword(make):
    """Before: TypeError 'unexpected keyword argument dtype' (PyTorch's factory keyword, beside device)."""
    t, m = make(torch.nn, torch.float64), make(nn, "float64")
    kinds = lambda mod: [(n, str(x.dtype).replace("torch.", "")) for n, x in  # noqa: E731
                         list(mod.named_parameters()) + list(mod.named_buffers())]
    assert kinds(m) == kinds(t) and ("weight", "float64") in kinds(m)
    x = np.random.default_rng(2).standard_normal((4, 3 if not isinstance(t, torch.nn.Linear) else 2))
    if isinstance(t, torch.nn.Embedding):
        x = np.array([0, 3, 1])
    same_weights(m, t)
    np.testing.assert_allclose(to_host(m(mg.tensor(x))), t(torch.tensor(x)).detach().numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError):
        make(torch.nn, torch.int64)
    with pytest.raises(TypeError, match=r"\(dtype=int64\): parameters must be floating point"):
        make(nn, "int64")


# ----------------------------------------------------------------------------- mg.tensor of a list of tensors

TENSOR_LISTS = {  # lib, dtype name -> the data; each of PyTorch's dtypes read from the elements
    "0-d floats": lambda L, d: [L.tensor(1.0), L.tensor(2.5)],
    "0-d ints": lambda L, d: [L.tensor(1), L.tensor(2)],
    "a float tensor and an int": lambda L, d: [L.tensor(1.5), 2],
    "an int tensor and a float": lambda L, d: [L.tensor(1), 2.5],
    "float64 beside float32": lambda L, d: [L.tensor(1.0, dtype=d("float64")), L.tensor(2.0)],
    "float64 beside a Python float": lambda L, d: [L.tensor(1.0, dtype=d("float64")), 2.0],
    "float16 beside bfloat16": lambda L, d: [L.tensor(1.0, dtype=d("bfloat16")), L.tensor(1.0, dtype=d("float16"))],
    "bool beside int": lambda L, d: [L.tensor(True), L.tensor(2)],
    "nested, one element each": lambda L, d: [[L.tensor([1.0])], (L.tensor(3.0),)],
    "a loss that requires grad": lambda L, d: [(L.tensor(1.5, requires_grad=True) * 2), L.tensor(0.25)],
}


@pytest.mark.parametrize("name", list(TENSOR_LISTS))
def test_tensor_of_a_list_of_tensors_as_pytorch(name):
    """Before: TypeError 'cannot make a tensor from list [tensor(1.), ...]' (torch.tensor(losses) is common)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's: 'To copy construct from a tensor, ...'
        t = torch.tensor(TENSOR_LISTS[name](torch, lambda n: getattr(torch, n)))
    m = mg.tensor(TENSOR_LISTS[name](mg, lambda n: n))
    assert (m.dtype.name, m.shape, m.requires_grad, m.is_leaf) == \
        (str(t.dtype).split(".")[1], tuple(t.shape), t.requires_grad, t.is_leaf)
    np.testing.assert_array_equal(to_host(m).astype(np.float64), t.double().numpy())


def test_tensor_of_a_list_holding_a_tensor_of_several_elements_is_refused():
    with pytest.raises(ValueError, match="only one element tensors"):
        torch.tensor([torch.ones(2), torch.ones(2)])
    with pytest.raises(ValueError, match=r"only one element tensors.*shape \(2,\).*mg\.stack"):
        mg.tensor([mg.ones(2), mg.ones(2)])


# ----------------------------------------------------------------------------- the factories PyTorch users call

FACTORIES = {  # lib, dtype-by-name -> a tensor; the deterministic ones compare values too
    "full_like": lambda L, d: L.full_like(L.tensor([[1.0, 2.0, 3.0]]), 7),
    "full_like of ints with 2.5": lambda L, d: L.full_like(L.tensor([1, 2]), 2.5),
    "full_like with dtype": lambda L, d: L.full_like(L.tensor([1, 2]), 2.5, dtype=d("float64")),
    "eye": lambda L, d: L.eye(3),
    "eye n, m of int64": lambda L, d: L.eye(2, 3, dtype=d("int64")),
    "empty": lambda L, d: L.empty(2, 3),
    "empty of a tuple": lambda L, d: L.empty((2, 3), dtype=d("int64")),
    "empty_like": lambda L, d: L.empty_like(L.tensor([1, 2])),
    "rand_like": lambda L, d: L.rand_like(L.ones(2, 3, dtype=d("float64"))),
    "randn_like requiring grad": lambda L, d: L.randn_like(L.ones(4), requires_grad=True),
    "randn_like with dtype": lambda L, d: L.randn_like(L.ones(4), dtype=d("float64")),
}


@pytest.mark.parametrize("name", list(FACTORIES))
def test_factories_as_pytorch(name):
    """Before: AttributeError "module 'minigrad' has no attribute ..." (full_like, empty, empty_like, eye, rand_like,
    randn_like)."""
    t = FACTORIES[name](torch, lambda n: getattr(torch, n))
    m = FACTORIES[name](mg, lambda n: n)
    assert (m.shape, m.dtype.name, m.requires_grad) == (tuple(t.shape), str(t.dtype).split(".")[1], t.requires_grad)
    if "rand" in name:
        assert np.all(np.isfinite(to_host(m))) and (name != "rand_like" or np.all((0 <= to_host(m)) & (to_host(m) < 1)))
    elif "empty" not in name:  # PyTorch's empty holds whatever its memory held; minigrad's zeros
        np.testing.assert_array_equal(to_host(m), t.numpy())


def test_like_factories_refuse_what_pytorch_refuses():
    with pytest.raises(NotImplementedError):
        torch.rand_like(torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="rand_like: dtype must be a floating-point dtype, got int64"):
        mg.rand_like(mg.tensor([1, 2]))
    with pytest.raises(RuntimeError):
        torch.full_like(torch.tensor([1, 2]), 1, requires_grad=True)
    with pytest.raises(TypeError, match="only float tensors can require gradients"):
        mg.full_like(mg.tensor([1, 2]), 1, requires_grad=True)


# ----------------------------------------------------------------------------- // and %, which minigrad lacks

@pytest.mark.parametrize("call", [lambda x: x // 2, lambda x: x % 3, lambda x: 7 // x, lambda x: 7 % x,
                                  lambda x: x // x, lambda x: _ifloordiv(x)])
def test_floor_division_and_remainder_say_what_to_write(call):
    """PyTorch computes them; minigrad has no such op. Before: Python's bare 'unsupported operand type(s) for //'."""
    assert call(torch.tensor([7, -7])) is not None
    with pytest.raises(TypeError, match=r"// and %: minigrad has no floor division.*int64 of shape \(2,\).*"
                                        r"mg\.tensor\(x\.numpy\(\) // k"):
        call(mg.tensor([7, -7]))


def _ifloordiv(x):
    x //= 2
    return x


# ----------------------------------------------------------------------------- arange of 0-d tensors

@pytest.mark.parametrize("args", [("3",), ("3.0",), (0, "3"), ("1", 5, "2"), ("0.5", 2), ("int32 3",), ("True",)])
def test_arange_of_0d_tensors_as_pytorch(args):
    """Before: mg.arange(mg.tensor(3)) was float32 [0., 1., 2.] where PyTorch's is int64 [0, 1, 2] (silently)."""
    def make(lib, a):
        if not isinstance(a, str):
            return a
        if a.startswith("int32"):
            return lib.tensor(3, dtype=torch.int32 if lib is torch else "int32")
        return lib.tensor(eval(a))  # noqa: S307 '3', '3.0', 'True'
    t = torch.arange(*(make(torch, a) for a in args))
    m = mg.arange(*(make(mg, a) for a in args))
    assert m.dtype.name == str(t.dtype).split(".")[1] and to_host(m).tolist() == t.tolist()


def test_arange_of_a_tensor_with_dims_is_refused_as_pytorch():
    with pytest.raises(TypeError):
        torch.arange(torch.tensor([3]))
    with pytest.raises(TypeError, match=r"arange: expected a number or a 0-d tensor, got a tensor of shape \(1,\)"):
        mg.arange(mg.tensor([3]))


# ----------------------------------------------------------------------------- small names PyTorch code calls

def test_small_names_as_pytorch():
    """Before: AttributeError (x.nelement, x.is_floating_point, x.is_cuda, model.bfloat16) and TypeError
    (randint(high, size), PyTorch's other overload)."""
    for lib in (torch, mg):
        x, i = lib.ones(2, 3), lib.tensor([1, 2])
        assert (x.nelement(), x.is_floating_point(), i.is_floating_point(), x.is_cuda) == \
            (6, True, False, str(x.device).startswith("cuda"))
        model = lib.nn.Linear(2, 2).bfloat16()
        assert str(model.weight.dtype).endswith("bfloat16") and str(model.bias.dtype).endswith("bfloat16")
        lib.manual_seed(0)
        draws = lib.randint(3, (50,))
        assert tuple(draws.shape) == (50,) and str(draws.dtype).endswith("int64")
        assert set(to_host(draws).tolist() if lib is mg else draws.tolist()) == {0, 1, 2}


# ----------------------------------------------------------------------------- cat's legacy empty tensor

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_skips_an_empty_1d_tensor_as_pytorch(dim):
    """`out = torch.tensor([])`, then `out = torch.cat([out, x])` in a loop: PyTorch skips the (0,) tensor beside
    others (dtype promotion still sees it); minigrad raised a ShapeError (dim 0) or 'tuple index out of range'."""
    def run(lib):
        e = lib.tensor([], requires_grad=True)
        x = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
        out = lib.cat([e, x, e], dim=dim) if dim == 0 else lib.cat([x, e], dim=dim)
        (out * lib.arange(out.numel()).reshape(out.shape)).sum().backward()
        return tuple(out.shape), to_host(out) if lib is mg else out.detach().numpy(), e.grad, x.grad
    (shape_m, out_m, eg_m, xg_m), (shape_t, out_t, eg_t, xg_t) = run(mg), run(torch)
    assert shape_m == shape_t
    np.testing.assert_array_equal(out_m, out_t)
    np.testing.assert_array_equal(to_host(xg_m), xg_t.numpy())
    assert to_host(eg_m).shape == tuple(eg_t.shape) == (0,)
    assert mg.cat([mg.tensor([]), mg.tensor([1, 2])]).dtype == np.float32  # as torch's: the empty float32 counts
    assert mg.cat([mg.tensor([]), mg.tensor([])]).shape == (0,)


# ----------------------------------------------------------------------------- == None, == a list

def test_equality_with_what_is_not_a_tensor_or_number_is_identity_as_pytorch():
    """`if mask != None:` and `[None, t].index(t)`: PyTorch's == and != with None, a str, a list or an object fall back
    to Python's identity (False, True). Before: minigrad compared elementwise (tensor([False, False]), then 'ambiguous'
    in an if; x == [1.0, 2.0] was tensor([True, True]) where PyTorch's is False)."""
    for lib in (torch, mg):
        x = lib.tensor([1.0, 2.0])
        assert (x == None) is False and (x != None) is True  # noqa: E711 what users write
        assert (x == [1.0, 2.0]) is False and (x == (1.0, 2.0)) is False and (x == "a") is False
        assert [None, "a", x].index(x) == 2
        assert (x == 1).tolist() == [True, False] and (x == x.new_tensor([1.0, 3.0])).tolist() == [True, False]
        if str(x.device) == "cpu":  # a host array beside a GPU tensor is refused (a device of its own)
            assert (x == np.array([1.0, 3.0])).tolist() == [True, False]
        assert x.eq(x).tolist() == [True, True] and x.ne(2).tolist() == [True, False]
        with pytest.raises(TypeError):
            x.eq(None)
        with pytest.raises(TypeError):
            x < None  # noqa: B015


def test_load_state_dict_assign_as_pytorch():
    """Before: TypeError 'unexpected keyword argument assign'. assign=True holds the state dict's values themselves
    (their dtype; a write to one shows in the other), keeping requires_grad; assign=False copies and casts."""
    for lib in (torch.nn, nn):
        L = torch if lib is torch.nn else mg
        model = lib.Linear(2, 3)
        sd = {"weight": L.ones(3, 2, dtype=L.float64), "bias": L.zeros(3, dtype=L.float64)}
        model.load_state_dict(sd, assign=False)
        assert str(model.weight.dtype).endswith("float32")
        model.load_state_dict(sd, assign=True)
        assert str(model.weight.dtype).endswith("float64") and model.weight.requires_grad
        with L.no_grad():
            sd["weight"][0, 0] = 5.0
        assert float(model.weight[0, 0]) == 5.0


def test_autograd_namespace_says_what_to_write():
    """Before: "module 'minigrad' has no attribute 'autograd'; did you mean 'no_grad' or 'autocast'?"."""
    with pytest.raises(AttributeError, match=r"'autograd'.*loss\.backward\(\) and read each input's \.grad"):
        mg.autograd.grad  # noqa: B018
