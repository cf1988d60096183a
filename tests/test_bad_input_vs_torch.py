"""Bad input, run in minigrad and in PyTorch (2.13, CPU) side by side: where PyTorch raises, minigrad raises too, never
returns, and its message starts with the name of the op the user called and names the offending shape, dtype or
dim. tests/test_errors.py checks more of what each message says; this file checks the pairing with PyTorch, over a
table of ops x bad inputs and, for dims out of range, shapes that do not broadcast and non-float inputs, over
generated ones. A second device is 'meta' beside the default one, so that both passes of the suite (CPU and the
CuPy stand-in) pair those cases with PyTorch too.

Exception classes: a dim or an index out of range is an IndexError, as in PyTorch; shapes that do not fit are
minigrad's ShapeError (a ValueError and a RuntimeError, so PyTorch's `except RuntimeError` catches it); a wrong dtype
is a TypeError where PyTorch raises RuntimeError or NotImplementedError (minigrad's convention, tests/test_errors.py).
Where minigrad differs from PyTorch on purpose, ACCEPTED and REFUSED say why, one line each.

Each case of the table failed before its fix (it returned, or raised NumPy's words, or named another op), except
those marked `# held`, which were right already and stay in the table as its neighbours' controls.
"""
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minigrad as mg
import minigrad.functional as MF
from minigrad.ops import ShapeError

torch = pytest.importorskip("torch")
TF = torch.nn.functional
pytestmark = [pytest.mark.torch,  # the warnings PyTorch (and log 0) give on the way to the result compared
              pytest.mark.filterwarnings("ignore:Using a target size", "ignore:optimizer contains a parameter group",
                                         "ignore:divide by zero encountered in log")]


class Lib:
    """One library's way to say a call: L.m (mg or torch), L.F (its functional), L.nn, L.optim; L.t(data, dtype) and
    L.r(*shape, dtype=...) make the same tensors in both (minigrad's on its default device, PyTorch's on the CPU)."""

    def __init__(self, is_torch):
        self.is_torch = is_torch
        self.m, self.F = (torch, TF) if is_torch else (mg, MF)
        self.nn, self.optim = self.m.nn, self.m.optim

    def dt(self, name):
        return getattr(torch, name) if self.is_torch else name

    def t(self, data, dtype=None, requires_grad=False):
        return self.m.tensor(data, dtype=None if dtype is None else self.dt(dtype), requires_grad=requires_grad)

    def r(self, *shape, dtype="float32", requires_grad=False):
        """Fixed values of any shape: halves in [-1, 1] for floats, 0 to 2 for integers, alternating for bool."""
        k = np.arange(math.prod(shape)).reshape(shape)
        values = k % 2 == 0 if dtype == "bool" else k % 3 if "int" in dtype else (k % 5 - 2) * 0.5
        return self.t(values.astype(dtype), dtype, requires_grad)  # an array: an empty one keeps its shape


TORCH, MG = Lib(True), Lib(False)


def run_both(call):
    """(PyTorch's exception or None, minigrad's exception or None, minigrad's result)."""
    try:
        call(TORCH)
        theirs = None
    except Exception as e:  # noqa: BLE001 - any exception is PyTorch's refusal
        theirs = e
    try:
        return theirs, None, call(MG)
    except Exception as e:  # noqa: BLE001
        return theirs, e, None


def refused_by_both(call, op, mention, kind):
    theirs, mine, result = run_both(call)
    assert theirs is not None, "PyTorch accepts this: not a bad input (or the case is written wrong)"
    assert mine is not None, f"minigrad returned {result!r} where PyTorch raised {type(theirs).__name__}: {theirs}"
    assert isinstance(mine, kind), f"{type(mine).__name__} (wanted {kind.__name__}): {mine}"
    for same in (IndexError, TypeError):  # PyTorch's classes for a range and an argument's type: minigrad's too
        if isinstance(theirs, same):
            assert isinstance(mine, same), f"PyTorch raised {type(theirs).__name__}, minigrad {type(mine).__name__}"
    msg = str(mine)
    assert msg.startswith(f"{op}:"), f"the message does not start with the op the user called, {op!r}: {msg}"
    assert re.search(mention, msg), f"the message does not mention {mention!r}: {msg}"


F32, S23 = r"float32", r"\(2, 3\)"


def on_meta(t):
    """t on 'meta': another device than the default one, in both libraries, on every pass of the suite."""
    return t.to("meta")


def needs_float(dtype):
    """What the message says of an integer or bool tensor where a float one is needed: the dtype, and what to do."""
    return rf"needs a floating-point input, got {dtype} of shape .*\.float\(\)"


I64 = needs_float("int64")

# (id, call, op named first, what the message must mention (a regex), exception class)
CASES = [
    # an integer or bool tensor where PyTorch computes in floating point only (it returned a float32 result)
    ("mean of ints", lambda L: L.r(2, 3, dtype="int64").mean(), "mean", I64, TypeError),
    ("mean of bools", lambda L: L.r(2, 3, dtype="bool").mean(dim=0), "mean", needs_float("bool"), TypeError),
    ("var of ints", lambda L: L.r(2, 3, dtype="int64").var(), "var", I64, TypeError),
    ("std of ints", lambda L: L.r(2, 3, dtype="int32").std(dim=1), "std", needs_float("int32"), TypeError),
    ("norm of ints", lambda L: L.r(2, 3, dtype="int64").norm(), "norm", I64, TypeError),
    ("softmax of ints", lambda L: L.r(2, 3, dtype="int64").softmax(-1), "softmax", I64, TypeError),
    ("F.softmax of bools", lambda L: L.F.softmax(L.r(2, 3, dtype="bool"), dim=-1), "softmax", needs_float("bool"),
     TypeError),
    ("log_softmax of ints", lambda L: L.r(2, 3, dtype="int64").log_softmax(0), "log_softmax", I64, TypeError),
    ("F.normalize of ints", lambda L: L.F.normalize(L.r(2, 3, dtype="int64")), "normalize", I64, TypeError),
    ("gelu of ints", lambda L: L.F.gelu(L.r(3, dtype="int64")), "gelu", I64, TypeError),
    ("silu of ints", lambda L: L.F.silu(L.r(3, dtype="int64")), "silu", I64, TypeError),
    ("softplus of ints", lambda L: L.F.softplus(L.r(3, dtype="int64")), "softplus", I64, TypeError),
    ("leaky_relu of ints", lambda L: L.F.leaky_relu(L.r(3, dtype="int64")), "leaky_relu", I64, TypeError),
    ("mse_loss of ints", lambda L: L.F.mse_loss(L.r(2, 3, dtype="int64"), L.r(2, 3, dtype="int64")), "mse_loss", I64,
     TypeError),
    ("l1_loss mean of ints", lambda L: L.F.l1_loss(L.r(3, dtype="int64"), L.r(3, dtype="int64")), "l1_loss", I64,
     TypeError),
    ("nll_loss of int log-probabilities", lambda L: L.F.nll_loss(L.r(2, 3, dtype="int64"), L.t([0, 1])), "nll_loss",
     I64, TypeError),
    # (these raised NumPy's casting message, naming the op inside: log_softmax, or the wrong advice, .to('int64'))
    ("cross_entropy of int logits", lambda L: L.F.cross_entropy(L.r(2, 3, dtype="int64"), L.t([0, 1])),
     "cross_entropy", I64, TypeError),
    ("layer_norm of ints", lambda L: L.F.layer_norm(L.r(2, 3, dtype="int64"), (3,)), "layer_norm", I64, TypeError),
    ("bce of int logits", lambda L: L.F.binary_cross_entropy_with_logits(L.r(2, 3, dtype="int64"), L.r(2, 3)),
     "binary_cross_entropy_with_logits", I64, TypeError),
    ("randn of int64", lambda L: L.m.randn(3, dtype=L.dt("int64")), "randn", "int64.*randint", TypeError),
    ("rand of int64", lambda L: L.m.rand(2, 2, dtype=L.dt("int64")), "rand", "int64.*randint", TypeError),
    ("linear of an int input", lambda L: L.nn.Linear(3, 2)(L.r(2, 3, dtype="int64")), "linear", r"\.to\('float32'\)",
     TypeError),
    # a bool tensor where PyTorch refuses it (it returned, or raised NumPy's words about bitwise_xor)
    ("bool - number", lambda L: L.r(3, dtype="bool") - 1, "sub", "bool.*~mask", TypeError),
    ("number - bool", lambda L: 1 - L.r(3, dtype="bool"), "sub", "bool.*~mask", TypeError),
    ("bool - bool", lambda L: L.r(3, dtype="bool") - L.r(3, dtype="bool"), "sub", "~mask", TypeError),
    ("float - bool", lambda L: L.r(3) - L.r(3, dtype="bool"), "sub", "bool", TypeError),
    ("float - True", lambda L: L.r(3) - True, "sub", "bool", TypeError),
    ("-bool", lambda L: -L.r(3, dtype="bool"), "neg", "bool.*~mask", TypeError),
    ("abs of bools", lambda L: L.r(3, dtype="bool").abs(), "abs", "bool", TypeError),
    ("relu of bools", lambda L: L.F.relu(L.r(3, dtype="bool")), "relu", "bool", TypeError),
    ("bool @ bool", lambda L: L.r(2, 3, dtype="bool") @ L.r(3, 2, dtype="bool"), "matmul", "bool", TypeError),
    ("add with alpha=True", lambda L: L.r(3).add(L.r(3), alpha=True), "add", "alpha", TypeError),
    # dims: out of range (wrapped or ignored before), not an int (NumPy's words), or named by another op
    ("sort of a 0-d tensor along dim 1", lambda L: L.r().sort(dim=1), "sort", "dim 1", IndexError),
    ("topk of a 0-d tensor along dim 2", lambda L: L.r().topk(1, dim=2), "topk", "dim 2", IndexError),
    ("gather of a 0-d tensor along dim 3", lambda L: L.r().gather(3, L.t(0)), "gather", "dim 3", IndexError),
    ("argmax along dim 2", lambda L: L.r(2, 3).argmax(dim=2), "argmax", "dim 2.*" + S23, IndexError),
    ("argmin along dim -3", lambda L: L.r(2, 3).argmin(-3), "argmin", "dim -3", IndexError),
    ("argmax of nothing", lambda L: L.r(0).argmax(), "argmax", r"\(0,\)", IndexError),
    ("argmax along an empty dim", lambda L: L.r(0, 3).argmax(0), "argmax", r"\(0, 3\).*dim 0", IndexError),
    ("amax along dim 2", lambda L: L.r(2, 3).amax(dim=2), "amax", "dim 2", IndexError),
    ("amin along dim 5", lambda L: L.r(2, 3).amin(5), "amin", "dim 5", IndexError),
    ("argsort along dim 2", lambda L: L.r(2, 3).argsort(dim=2), "argsort", "dim 2", IndexError),
    ("norm along dim 2", lambda L: L.r(2, 3).norm(dim=2), "norm", "dim 2", IndexError),
    ("F.normalize along dim 2", lambda L: L.F.normalize(L.r(2, 3), dim=2), "normalize", "dim 2", IndexError),
    ("sum along dim 1.0", lambda L: L.r(2, 3).sum(dim=1.0), "sum", r"1\.0", TypeError),
    ("mean along dim 'a'", lambda L: L.r(2, 3).mean(dim="a"), "mean", "'a'", TypeError),
    ("softmax along dim 2", lambda L: L.r(2, 3).softmax(dim=2), "softmax", "dim 2.*" + S23, IndexError),  # held
    ("permute(0, 5) of a 2-d tensor", lambda L: L.r(2, 3).permute(0, 5), "permute", r"\(0, 5\)", IndexError),
    # counts that are not ints, or out of range (multinomial(-1) drew one sample, tril(0.5) was tril(0))
    ("topk(1.5)", lambda L: L.r(5).topk(1.5), "topk", "k must be an int.*1.5", TypeError),
    ("chunk(1.5)", lambda L: L.r(5).chunk(1.5), "chunk", "1.5", TypeError),
    ("split(1.5)", lambda L: L.r(5).split(1.5), "split", "1.5", TypeError),
    ("split into sizes [5, -1]", lambda L: L.r(4).split([5, -1]), "split", r">= 0.*\[5, -1\]", ShapeError),
    ("narrow from 1.5", lambda L: L.r(5).narrow(0, 1.5, 2), "narrow", "start.*1.5", TypeError),
    ("multinomial of -1 samples", lambda L: L.m.multinomial(L.t([0.5, 0.5]), -1), "multinomial", "-1", ValueError),
    ("multinomial of 0 samples", lambda L: L.t([0.5, 0.5]).multinomial(0), "multinomial", "0", ValueError),
    ("tril(0.5)", lambda L: L.r(3, 3).tril(0.5), "tril", "0.5", TypeError),
    ("cross_entropy with ignore_index=0.5",
     lambda L: L.F.cross_entropy(L.r(2, 3), L.t([0, 1]), ignore_index=0.5), "cross_entropy", "0.5", TypeError),
    ("reshape('a')", lambda L: L.r(6).reshape("a"), "reshape", "'a'", TypeError),
    ("t < 'a'", lambda L: L.r(3) < "a", "lt", "str", TypeError),
    ("F.dropout with p='a'", lambda L: L.F.dropout(L.r(3), "a"), "dropout", "'a'", TypeError),
    ("nn.Dropout('a')", lambda L: L.nn.Dropout("a"), "Dropout", "'a'", TypeError),
    ("manual_seed('a')", lambda L: L.m.manual_seed("a"), "manual_seed", "'a'", ValueError),
    # sizes: negative, not ints, or two -1 (NumPy read any negative size as -1; repeat(2, -1) tiled once)
    ("reshape to (-2, 3)", lambda L: L.r(2, 3).reshape(-2, 3), "reshape", r"\(-2, 3\)", ShapeError),
    ("view(-1, -1)", lambda L: L.r(2, 3).view(-1, -1), "reshape", r"\(-1, -1\)", ShapeError),  # held
    ("repeat with a negative count", lambda L: L.r(2, 3).repeat(2, -1), "repeat", "-1", ShapeError),
    ("repeat with a float count", lambda L: L.r(2, 3).repeat(2.0, 1), "repeat", "float", TypeError),
    ("repeat with too few counts", lambda L: L.r(2, 3).repeat(2), "repeat", S23, ShapeError),  # held
    ("expand to a smaller size", lambda L: L.r(2, 3).expand(2, 1), "expand", S23, ShapeError),  # held
    ("unflatten into sizes that do not fit", lambda L: L.r(2, 6).unflatten(1, (4, 2)), "unflatten", r"\(4, 2\)",
     ShapeError),
    ("zeros of a negative size", lambda L: L.m.zeros(-1, 3), "zeros", "-1", ShapeError),
    ("ones of a float size", lambda L: L.m.ones(2.5), "ones", "2.5", TypeError),
    ("full of a negative size", lambda L: L.m.full((-1,), 1.0), "full", "-1", ShapeError),
    ("full of a string", lambda L: L.m.full((2,), "a"), "full", "str", TypeError),
    ("randn of a negative size", lambda L: L.m.randn(-1), "randn", "-1", ShapeError),
    ("randint of a negative size", lambda L: L.m.randint(0, 2, (-3,)), "randint", "-3", ShapeError),
    ("randint with low >= high", lambda L: L.m.randint(5, 2, (3,)), "randint", "low=5", ValueError),
    ("arange with step 0", lambda L: L.m.arange(0, 5, 0), "arange", "step 0", ValueError),
    ("arange against its step's sign", lambda L: L.m.arange(0, 5, -1), "arange", "step -1", ValueError),
    ("arange to infinity", lambda L: L.m.arange(0, math.inf), "arange", "inf", ValueError),
    ("Linear with a negative size", lambda L: L.nn.Linear(-1, 2), "Linear", "-1", ShapeError),
    ("Linear with a float size", lambda L: L.nn.Linear(2.5, 2), "Linear", "2.5", TypeError),
    ("Embedding with a negative size", lambda L: L.nn.Embedding(-1, 2), "Embedding", "-1", ShapeError),
    ("a ragged nested list", lambda L: L.m.tensor([[1, 2], [3]]), "tensor", "different lengths", ShapeError),
    # lists of tensors: one tensor (cat joined its rows), something else (an AttributeError), a 0-d tensor
    ("cat of one tensor", lambda L: L.m.cat(L.r(2, 3)), "cat", S23, TypeError),
    ("stack of one tensor", lambda L: L.m.stack(L.r(2, 3)), "stack", S23, TypeError),
    ("cat of a list among tensors", lambda L: L.m.cat([L.r(2), [1.0]]), "cat", "list at position 1", TypeError),
    ("cat of 0-d tensors", lambda L: L.m.cat([L.r(), L.r()]), "cat", "0-d", ShapeError),
    ("ones_like of a list", lambda L: L.m.ones_like([1, 2]), "ones_like", "list", TypeError),
    # shapes that do not broadcast (NumPy's "operands could not be broadcast together")
    ("== of shapes that do not broadcast", lambda L: L.r(3) == L.r(4), "eq", r"\(3,\).*\(4,\)", ShapeError),
    ("< of shapes that do not broadcast", lambda L: L.r(2, 3) < L.r(2), "lt", S23, ShapeError),
    ("allclose of shapes that do not broadcast", lambda L: L.r(3).allclose(L.r(4)), "allclose", r"\(4,\)",
     ShapeError),
    ("mse_loss of shapes that do not broadcast", lambda L: L.F.mse_loss(L.r(2, 3), L.r(4)), "mse_loss",
     r"\(2, 3\).*\(4,\)", ShapeError),
    ("l1_loss of shapes that do not broadcast", lambda L: L.F.l1_loss(L.r(2, 3), L.r(3, 2)), "l1_loss",
     r"\(3, 2\)", ShapeError),
    ("t[0] = value of another length", lambda L: L.r(2, 3).__setitem__(0, L.r(4)), "setitem", r"\(4,\)", ShapeError),
    ("fill_ with a 1-d tensor", lambda L: L.r(3).fill_(L.r(3)), "fill_", r"\(3,\)", ShapeError),
    ("item of an empty tensor", lambda L: L.r(0).item(), "item", r"\(0,\)", ShapeError),
    # in place: a float into an integer tensor (NumPy's casting message, or its UFuncTypeError)
    ("clamp_ of ints by floats", lambda L: L.r(3, dtype="int64").clamp_(0.5, 1.5), "clamp_", "int64", RuntimeError),
    # two devices: 'meta' beside the default device, where PyTorch refuses the pair too (the loss's targets on another
    # device were read unseen; the others named the op inside, sub or clamp_tensor, or raised CuPy's words)
    ("cross_entropy with targets on another device", lambda L: L.F.cross_entropy(L.r(2, 3), on_meta(L.t([0, 1]))),
     "cross_entropy", "different devices.*meta", RuntimeError),
    ("nll_loss with targets on another device", lambda L: L.F.nll_loss(L.r(2, 3), on_meta(L.t([0, 1]))),
     "nll_loss", "different devices.*meta", RuntimeError),
    ("cross_entropy with class weights on another device",
     lambda L: L.F.cross_entropy(L.r(2, 3), L.t([0, 1]), weight=on_meta(L.r(3))), "cross_entropy", "meta",
     RuntimeError),
    ("mse_loss with a target on another device", lambda L: L.F.mse_loss(L.r(3), on_meta(L.r(3))), "mse_loss", "meta",
     RuntimeError),
    ("l1_loss with a target on another device", lambda L: L.F.l1_loss(L.r(3), on_meta(L.r(3))), "l1_loss", "meta",
     RuntimeError),
    ("bce with a target on another device",
     lambda L: L.F.binary_cross_entropy_with_logits(L.r(3), on_meta(L.r(3))), "binary_cross_entropy_with_logits",
     "meta", RuntimeError),
    ("== with a tensor on another device", lambda L: L.r(3) == on_meta(L.r(3)), "eq", "meta", RuntimeError),
    ("allclose with a tensor on another device", lambda L: L.r(3).allclose(on_meta(L.r(3))), "allclose", "meta",
     RuntimeError),
    ("clamp by a bound on another device", lambda L: L.r(3).clamp(min=on_meta(L.r(3))), "clamp", "meta", RuntimeError),
    ("add of tensors on two devices", lambda L: L.r(3) + on_meta(L.r(3)), "add", "meta", RuntimeError),  # held
    # and what was right already, beside them
    ("cross_entropy of float class indices", lambda L: L.F.cross_entropy(L.r(2, 3), L.t([0.0, 1.0])),  # held
     "cross_entropy", F32, TypeError),
    ("cross_entropy of (N, 1) targets", lambda L: L.F.cross_entropy(L.r(2, 3), L.t([[0], [1]])),  # held
     "cross_entropy", r"\(2, 1\)", ShapeError),
    ("index by a float tensor", lambda L: L.r(2, 3)[L.t([0.0, 1.0])], "index", F32, IndexError),  # held
    ("where of mismatched shapes", lambda L: L.m.where(L.r(3, dtype="bool"), L.r(3), L.r(4)), "where",  # held
     r"\(4,\)", ShapeError),
    ("masked_fill with a mask of another shape", lambda L: L.r(2, 3).masked_fill(L.r(3, 2, dtype="bool"), 0.0),
     "masked_fill", r"\(3, 2\)", ShapeError),  # held
    ("SGD of a non-leaf", lambda L: L.optim.SGD([L.r(3, requires_grad=True) * 2], lr=0.1), "SGD", "leaf",  # held
     ValueError),
]


@pytest.mark.parametrize("call,op,mention,kind", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_where_pytorch_raises_minigrad_raises_naming_the_op(call, op, mention, kind):
    refused_by_both(call, op, mention, kind)


def test_an_in_place_write_from_another_device_names_the_write():
    """(Not paired: PyTorch's 'meta' lets x.add_(meta) through; from a CUDA tensor into a CPU one it refuses.)"""
    for write in (lambda x, y: x.add_(y), lambda x, y: x.mul_(y), lambda x, y: x.__iadd__(y)):
        with pytest.raises(RuntimeError, match=r"^(add_|mul_|\+=): inputs are on different devices \(\w+ and \w+\)"):
            write(mg.ones(3), mg.ones(3, device="meta"))


@pytest.mark.skipif(mg.default_device() == "cpu", reason="needs a default device other than the CPU (the stand-in pass)")
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_class_indices_on_the_cpu_for_logits_on_the_gpu_are_refused(loss):
    """They were read from the host unseen (the loss came out right on the stand-in, where NumPy indexes with them)."""
    with pytest.raises(RuntimeError, match=rf"^{loss}: inputs are on different devices \(cpu and cuda\)"):
        getattr(MF, loss)(mg.randn(2, 3), mg.tensor([0, 1], device="cpu"))


def test_a_negative_seed_is_taken_as_pytorch_takes_it():
    """manual_seed(-1) raised NumPy's 'expected non-negative integer'; PyTorch counts it down from 2**64 - 1."""
    torch.manual_seed(-1)
    draws = []
    for _ in range(2):
        mg.manual_seed(-1)
        draws.append(mg.rand(3).tolist())
    assert draws[0] == draws[1]
    mg.manual_seed(2 ** 64 - 2)  # the same seed, as PyTorch maps it
    assert mg.rand(3).tolist() == draws[0]


# ----------------------------------------------------------------------------- generated: dims out of range

# (name, call(L, t, dim), how many dims the call's dim ranges over beyond the tensor's)
DIM_METHODS = [
    ("sum", lambda L, t, d: t.sum(dim=d), 0), ("mean", lambda L, t, d: t.mean(dim=d), 0),
    ("var", lambda L, t, d: t.var(dim=d), 0), ("std", lambda L, t, d: t.std(dim=d), 0),
    ("norm", lambda L, t, d: t.norm(dim=d), 0), ("logsumexp", lambda L, t, d: t.logsumexp(d), 0),
    ("softmax", lambda L, t, d: t.softmax(d), 0), ("log_softmax", lambda L, t, d: t.log_softmax(d), 0),
    ("cumsum", lambda L, t, d: t.cumsum(d), 0), ("prod", lambda L, t, d: t.prod(d), 0),
    ("amax", lambda L, t, d: t.amax(d), 0), ("amin", lambda L, t, d: t.amin(d), 0),
    ("max", lambda L, t, d: t.max(d), 0), ("min", lambda L, t, d: t.min(d), 0),
    ("argmax", lambda L, t, d: t.argmax(d), 0), ("argmin", lambda L, t, d: t.argmin(d), 0),
    ("sort", lambda L, t, d: t.sort(d), 0), ("argsort", lambda L, t, d: t.argsort(d), 0),
    ("topk", lambda L, t, d: t.topk(1, d), 0), ("flip", lambda L, t, d: t.flip(d), 0),
    ("squeeze", lambda L, t, d: t.squeeze(d), 0), ("unsqueeze", lambda L, t, d: t.unsqueeze(d), 1),
    ("transpose", lambda L, t, d: t.transpose(d, 0), 0), ("flatten", lambda L, t, d: t.flatten(d), 0),
    ("split", lambda L, t, d: t.split(1, d), 0), ("chunk", lambda L, t, d: t.chunk(1, d), 0),
    ("unbind", lambda L, t, d: t.unbind(d), 0), ("narrow", lambda L, t, d: t.narrow(d, 0, 1), 0),
    ("index_select", lambda L, t, d: t.index_select(d, L.t([0])), 0),
    ("gather", lambda L, t, d: t.gather(d, L.t(np.zeros((1,) * t.ndim, dtype=np.int64).tolist())), 0),
    ("cat", lambda L, t, d: L.m.cat([t, t], d), 0), ("stack", lambda L, t, d: L.m.stack([t, t], d), 1),
    ("softmax", lambda L, t, d: L.F.softmax(t, d), 0), ("log_softmax", lambda L, t, d: L.F.log_softmax(t, d), 0),
    ("normalize", lambda L, t, d: L.F.normalize(t, dim=d), 0),
]


@settings(max_examples=60, deadline=None)
@given(method=st.sampled_from(DIM_METHODS), shape=st.lists(st.integers(1, 3), min_size=0, max_size=3),
       beyond=st.integers(0, 2), below=st.booleans())
def test_a_dim_out_of_range_is_an_index_error_naming_the_method_and_dim(method, shape, beyond, below):
    name, call, extra = method
    n = max(len(shape) + extra, 1)  # a 0-d tensor's dims are 0 and -1, as one dim's
    dim = -n - 1 - beyond if below else n + beyond
    skip = {"index_select", "split", "chunk", "unbind", "narrow", "cat", "flatten", "transpose"}
    if not shape and name in skip:
        return  # ops on a 0-d tensor that PyTorch and minigrad refuse for another reason first
    refused_by_both(lambda L: call(L, L.r(*shape), dim), name, rf"dim.*{dim}", IndexError)


# ----------------------------------------------------------------------------- generated: shapes that do not broadcast

BINARY = [
    ("add", lambda L, a, b: a + b), ("sub", lambda L, a, b: a - b), ("mul", lambda L, a, b: a * b),
    ("div", lambda L, a, b: a / b), ("maximum", lambda L, a, b: L.m.maximum(a, b)),
    ("minimum", lambda L, a, b: a.minimum(b)), ("eq", lambda L, a, b: a == b), ("ge", lambda L, a, b: a >= b),
    ("where", lambda L, a, b: L.m.where(a > 0, a, b)), ("allclose", lambda L, a, b: a.allclose(b)),
    ("clamp", lambda L, a, b: a.clamp(min=b)), ("mse_loss", lambda L, a, b: L.F.mse_loss(a, b)),
    ("l1_loss", lambda L, a, b: L.F.l1_loss(a, b)), ("masked_fill", lambda L, a, b: a.masked_fill(b > 0, 0.0)),
    ("copy_", lambda L, a, b: a.copy_(b)), ("add_", lambda L, a, b: a.add_(b)),
]


@settings(max_examples=40, deadline=None)
@given(op=st.sampled_from(BINARY), shape=st.lists(st.integers(2, 3), min_size=1, max_size=3), data=st.data())
def test_shapes_that_do_not_broadcast_name_the_op_and_both_shapes(op, shape, data):
    name, call = op
    other = list(shape)
    k = data.draw(st.integers(0, len(shape) - 1))
    other[k] = {2: 3, 3: 2}[shape[k]]  # a size that is neither equal nor 1
    other = other[data.draw(st.integers(0, k)):]  # and maybe fewer dims, from the left
    a, b = (tuple(s) for s in (shape, other))
    refused_by_both(lambda L: call(L, L.r(*a), L.r(*b)), name, rf"\({b[0]},", RuntimeError)


# ----------------------------------------------------------------------------- generated: non-float inputs

FLOAT_ONLY = [
    ("mean", lambda L, t: t.mean()), ("var", lambda L, t: t.var()), ("std", lambda L, t: t.std()),
    ("norm", lambda L, t: t.norm()), ("softmax", lambda L, t: t.softmax(-1)),
    ("log_softmax", lambda L, t: t.log_softmax(-1)), ("softmax", lambda L, t: L.F.softmax(t, -1)),
    ("log_softmax", lambda L, t: L.F.log_softmax(t, -1)), ("layer_norm", lambda L, t: L.F.layer_norm(t, t.shape[-1:])),
    ("gelu", lambda L, t: L.F.gelu(t)), ("silu", lambda L, t: L.F.silu(t)), ("softplus", lambda L, t: L.F.softplus(t)),
    ("leaky_relu", lambda L, t: L.F.leaky_relu(t)), ("normalize", lambda L, t: L.F.normalize(t, dim=-1)),
    ("mse_loss", lambda L, t: L.F.mse_loss(t, t)), ("nll_loss", lambda L, t: L.F.nll_loss(t, L.t([0, 1]))),
    ("cross_entropy", lambda L, t: L.F.cross_entropy(t, L.t([0, 1]))),
    ("binary_cross_entropy_with_logits", lambda L, t: L.F.binary_cross_entropy_with_logits(t, L.r(2, 3))),
]


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("name,call", FLOAT_ONLY, ids=[f"{n}-{i}" for i, (n, _) in enumerate(FLOAT_ONLY)])
def test_an_op_pytorch_runs_on_floats_only_refuses_integers_and_bools(name, call, dtype):
    refused_by_both(lambda L: call(L, L.r(2, 3, dtype=dtype)), name, needs_float(dtype), TypeError)


@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_exp_log_sin_still_make_integers_float32_as_pytorch(dtype):
    """The other side of the rule above: where PyTorch makes an integer or bool tensor float32, so does minigrad."""
    for name in ("exp", "log", "sqrt", "tanh", "sigmoid", "sin", "cos"):
        mine, theirs = (getattr(L.r(2, 3, dtype=dtype), name)() for L in (MG, TORCH))
        assert mine.dtype == np.float32 and theirs.dtype == torch.float32, name
    assert MG.r(2, 3, dtype=dtype).logsumexp(1).dtype == np.float32


# ----------------------------------------------------------------------------- deliberate differences

# PyTorch raises; minigrad computes, on purpose: (id, call, reason)
ACCEPTED = [
    ("where with a list condition", lambda L: L.m.where([True, False], L.r(2), L.r(2)),
     "a condition that is not a tensor is a mask on the values' device, as masked_fill's mask"),
    ("cross_entropy with int32 targets", lambda L: L.F.cross_entropy(L.r(2, 3), L.t([0, 1], "int32")),
     "class indices of any integer dtype are read the same; PyTorch asks for int64 or uint8"),
    ("an integer tensor to a negative int power", lambda L: L.t([2, 4]) ** -1,
     "integers to a negative power become float32 (1 / x), where PyTorch refuses"),
    ("a float64 .grad on a float32 tensor", lambda L: setattr(L.r(3, requires_grad=True), "grad",
                                                           L.r(3, dtype="float64")),
     "a .grad of another float dtype is allowed: mg.accumulate keeps float32 gradients for float16 parameters"),
]


@pytest.mark.parametrize("call,reason", [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_what_minigrad_accepts_on_purpose(call, reason):
    theirs, mine, _ = run_both(call)
    assert theirs is not None and mine is None, reason


# PyTorch computes; minigrad refuses, on purpose: (id, call, op, reason)
REFUSED = [
    ("stack of float32 and float64", lambda L: L.m.stack([L.r(2), L.r(2, dtype="float64")]), "stack",
     "float32 with float64 is refused (README: a stray float64 doubles memory unseen)"),
    ("masked_fill with a mask larger than the input", lambda L: L.r(3).masked_fill(L.r(2, 3, dtype="bool"), 0.0),
     "masked_fill", "the output keeps the input's shape; PyTorch broadcasts it up to the mask's"),
    ("indexing by a list of floats", lambda L: L.r(2, 3)[[0.0, 1.0]], "index",
     "an index is an integer or bool tensor, as a tensor index is in PyTorch"),
    ("an optimizer given one parameter twice", lambda L: L.optim.SGD([L.r(3, requires_grad=True)] * 2, lr=0.1),
     "SGD", "each parameter once, in one group: PyTorch warns that this will become an error"),
]


@pytest.mark.parametrize("call,op,reason", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_what_minigrad_refuses_on_purpose(call, op, reason):
    theirs, mine, _ = run_both(call)
    assert theirs is None and mine is not None and str(mine).startswith(f"{op}:"), (reason, mine)
