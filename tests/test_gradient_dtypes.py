"""Every op's backward hands each input a gradient of that input's dtype and shape, in every float dtype: a class
of silent drift no value test sees. A float32 gradient handed to a bfloat16 tensor's record is more precise than
PyTorch's (which rounds at every op) but it is not what PyTorch computes, it doubles the gradient bytes the ledger
counts, and the next backward then mixes dtypes. Found by this test's first draft: Pow's backward with an exponent
that is not an integer gave float32 for a bfloat16 input (ml_dtypes' bfloat16 times a Python float is float32),
so `(x.tanh() ** 2.5).sum()`'s gradient went through tanh's backward in float32. Inputs of mixed dtypes too
(catalogue entry mixed_dtypes): each gets its gradient in its own dtype through type promotion's casts.

How: every Op subclass's forward and backward are wrapped for the test (forward notes its array inputs' dtype and
shape; backward checks what it returns against them); a catalogue calls each op (through the Tensor method or
function a user writes) in float64, float32, float16 and bfloat16 (no bfloat16 on 'cuda': CuPy has none), and a
last test checks that the catalogue reached every Op subclass there is, so that a new op must join it.
"""
import functools

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad.ops.base import Op

DTYPES = ["float64", "float32", "float16"] + (["bfloat16"] if mg.default_device() == "cpu" else [])


def op_classes():
    seen, todo = set(), [Op]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return seen


REACHED = set()  # the op classes whose backward ran, for test_the_catalogue_reaches_every_op
PROBLEMS = []


@pytest.fixture
def checked(monkeypatch):
    """Wrap every Op subclass that defines forward/backward; collect dtype/shape mismatches in PROBLEMS."""
    PROBLEMS.clear()
    for cls in op_classes():
        if "forward" in vars(cls):
            monkeypatch.setattr(cls, "forward", _noting(vars(cls)["forward"]))
        if "backward" in vars(cls):
            monkeypatch.setattr(cls, "backward", _checking(vars(cls)["backward"]))
    yield PROBLEMS


def _noting(forward):
    @functools.wraps(forward)
    def wrapper(self, *arrays, **attrs):
        self._inputs_seen = [(a.shape, a.dtype) if hasattr(a, "dtype") and hasattr(a, "shape") else None
                             for a in arrays]
        return forward(self, *arrays, **attrs)
    return wrapper


def _checking(backward):
    @functools.wraps(backward)
    def wrapper(self, g):
        grads = backward(self, g)
        REACHED.add(type(self))
        seen = getattr(self, "_inputs_seen", None)
        if seen is None or type(grads) is not tuple:
            return grads
        for i, (gi, inp) in enumerate(zip(grads, seen)):
            if gi is None or inp is None or not hasattr(gi, "dtype"):  # a checkpoint's list or {slot: grad}
                continue
            shape, dtype = inp
            if tuple(gi.shape) != tuple(shape) or gi.dtype != dtype:
                PROBLEMS.append(f"{type(self).__name__} ('{self.name}'): input {i} is {np.dtype(dtype).name} "
                                f"{tuple(shape)}, its gradient {np.dtype(gi.dtype).name} {tuple(gi.shape)}")
        return grads
    return wrapper


def _x(shape, dtype, seed=0, positive=False):
    rng = np.random.default_rng(seed)
    v = rng.uniform(0.5, 1.5, shape) if positive else rng.standard_normal(shape)
    return mg.tensor(v, dtype=dtype, requires_grad=True)


# name -> f(dtype) giving a tensor to backward from; each calls one op or a few, as a user writes them
CATALOGUE = {
    "add_sub_mul_div": lambda d: (_x((3, 4), d) + _x((4,), d, 1)) * _x((3, 1), d, 2) / _x((4,), d, 3, True) - 1.5,
    "numbers": lambda d: 2.5 * _x((3, 4), d) / 0.3 + 0.1,
    "pow": lambda d: sum(_x((3, 4), d, 0, True).tanh() ** p for p in (2.5, 1.5, 0.5, -0.5, -1.5, 3, 2, 1 / 3, 0)),
    "pow_tensor": lambda d: _x((3, 4), d, 0, True) ** _x((4,), d, 1) + 2 ** _x((4,), d, 2),
    "unary": lambda d: sum(f(_x((3, 4), d)) for f in (
        lambda x: x.exp(), lambda x: (x.abs() + 0.5).log(), lambda x: x.tanh(), lambda x: x.sigmoid(),
        lambda x: x.relu(), F.gelu, lambda x: F.gelu(x, approximate="tanh"), lambda x: x.sin(), lambda x: x.cos(),
        lambda x: (x.abs() + 0.5).sqrt(), lambda x: -x, lambda x: x.abs(), lambda x: x.sign() * x,
        lambda x: x.round() + x, lambda x: x.clamp(-0.5, 0.5), lambda x: x.clone(), F.silu,
        lambda x: F.softplus(x, beta=2.0, threshold=1.0))),
    "clamp_tensor": lambda d: _x((3, 4), d).clamp(_x((4,), d, 1), _x((3, 1), d, 2) + 2),
    "maximum_minimum_where": lambda d: (mg.maximum(_x((3, 4), d), _x((4,), d, 1))
                                        + mg.minimum(_x((3, 1), d, 2), _x((3, 4), d, 3))
                                        + mg.where(_x((3, 4), d, 4).detach() > 0, _x((3, 4), d, 5), _x((4,), d, 6))),
    "masked_fill": lambda d: _x((3, 4), d).masked_fill(_x((4,), d, 1).detach() > 0, 2.0),
    "reductions": lambda d: (_x((3, 4), d).sum(0) + _x((3, 4), d, 1).mean(0) + _x((3, 4), d, 2).max(0).values
                             + _x((3, 4), d, 3).min(0).values + _x((3, 4), d, 4, True).prod(0) + _x((3, 4), d, 10).max()
                             + _x((3, 4), d, 11).amax(0) + _x((3, 4), d, 12).amin(0)
                             + _x((3, 4), d, 5).cumsum(0)[-1] + _x((3, 4), d, 6).var(0) + _x((3, 4), d, 7).std(0)
                             + _x((3, 4), d, 8).norm(dim=0) + _x((3, 4), d, 9).logsumexp(0)),
    "shapes": lambda d: (_x((3, 4), d).reshape(4, 3).transpose(0, 1) + _x((4, 3), d, 1).permute(1, 0)
                         + _x((3, 1), d, 2).expand(3, 4).flip(0) + mg.cat([_x((1, 4), d, 3), _x((2, 4), d, 4)])
                         + mg.stack([_x((4,), d, 5)] * 3) + _x((3, 4), d, 6).tril() + _x((3, 4), d, 7).triu(1)),
    "index": lambda d: _x((5, 4), d)[mg.tensor([0, 2, 2, 4, 1])][:3] + _x((3, 4), d, 1)[:, [1, 1, 0, 3]],
    "index_put": lambda d: _index_put(d),
    "mixed_dtypes": lambda d: _mixed(d),
    "nn": lambda d: (F.softmax(_x((3, 4), d), -1) + F.log_softmax(_x((3, 4), d, 1), -1)
                     + F.layer_norm(_x((3, 4), d, 2), (4,), _x((4,), d, 3), _x((4,), d, 4))
                     + F.dropout(_x((3, 4), d, 5), 0.5, training=True)),
    "linear_matmul": lambda d: F.linear(_x((3, 5), d), _x((4, 5), d, 1), _x((4,), d, 2))
                               + _x((3, 2), d, 3) @ _x((2, 4), d, 4) + (_x((2, 3, 2), d, 5) @ _x((2, 4), d, 6))[0],
    "sdpa": lambda d: F.scaled_dot_product_attention(_x((1, 2, 3, 4), d), _x((1, 2, 3, 4), d, 1),
                                                     _x((1, 2, 3, 4), d, 2), is_causal=True)[0, 0],
    "cast": lambda d: _x((3, 4), d).to("float32").to(d) + _x((3, 4), d, 1).double().to(d),
    "losses": lambda d: (F.cross_entropy(_x((3, 4), d), mg.tensor([0, 3, 1])) + F.mse_loss(_x((3, 4), d, 1),
                         _x((3, 4), d, 2)) + F.binary_cross_entropy_with_logits(_x((3, 4), d, 3),
                                                                               _x((3, 4), d, 4).sigmoid())
                        + F.binary_cross_entropy_with_logits(_x((3, 4), d, 5), _x((3, 4), d, 6).sigmoid(),
                                                             _x((4,), d, 7).detach(), pos_weight=_x((3, 1), d, 8,
                                                                                                    True).detach())),
}


def _mixed(d):
    """d beside every other float dtype (NOTE [type promotion], tensor/promotion.py): a 0-d tensor, which does not
    widen d's tensor with dims; a tensor with dims, promoted with it (bfloat16 + float16: float32) and cast back
    (float64 beside a narrower float with dims is refused); in where; and an integer tensor. Each leaf's gradient
    comes back through the casts in its own dtype."""
    out, cond = _x((3, 4), d), mg.tensor([True, False, True, False])
    for k, other in enumerate(o for o in DTYPES if o != d):
        out = out * _x((), other, k + 1) + mg.where(cond, _x((4,), d, k + 5), _x((), other, k + 9))
        if "float64" not in (d, other):
            out = (out + _x((4,), other, k + 13)).to(d)
    return out - mg.tensor([1, 2, 3, 4])


def _index_put(d):
    base = _x((5, 4), d) * 1.0
    base[mg.tensor([0, 3])] = _x((2, 4), d, 1)
    base[1:3, 2] = _x((2,), d, 2)
    return base


def run(name, dtype):
    with np.errstate(all="ignore"):
        out = CATALOGUE[name](dtype)
        assert str(out.dtype) == dtype, f"{name} in {dtype} gave {out.dtype}"
        (out * 1.0).sum().backward()


def run_checkpoints(dtype):
    x, w = _x((3, 4), dtype), _x((4, 4), dtype, 1)
    mg.checkpoint(lambda a: (a @ w).sigmoid() ** 1.5, x).sum().backward()
    two = mg.checkpoint(lambda a: ((a @ w).exp(), a.sigmoid() ** 2.5), x)  # two outputs: CheckpointOutput records
    (two[0] * two[1]).sum().backward()
    assert x.grad.dtype == x.dtype and w.grad.dtype == w.dtype


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_every_gradient_has_its_inputs_dtype_and_shape(checked, name, dtype):
    run(name, dtype)
    assert not checked, f"{name} in {dtype}:\n  " + "\n  ".join(checked)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_checkpoint_hands_on_its_inputs_dtypes(checked, dtype):
    run_checkpoints(dtype)
    assert not checked, "\n".join(checked)


NOT_IN_CATALOGUE = {"ToDevice"}  # needs two devices


def test_the_catalogue_reaches_every_op(checked):
    """Every Op subclass with a backward of its own is checked above: a new op must join CATALOGUE."""
    REACHED.clear()
    for name in CATALOGUE:
        run(name, "float32")
    run_checkpoints("float32")
    engine = {cls.__name__ for cls in op_classes() if "backward" in vars(cls)  # not a test's own op, nor
              and cls.__module__.startswith("minigrad.") and cls.__module__ != "minigrad.learner"}  # learner's swaps
    missing = engine - {c.__name__ for c in REACHED}
    assert missing == NOT_IN_CATALOGUE, f"ops no test above ran the backward of: {sorted(missing - NOT_IN_CATALOGUE)}"
