"""Making tensors: tensor(), from_numpy, zeros, ones, full, empty, eye, the _like's (zeros, ones, full, empty, rand,
randn), randn, rand, randint, multinomial, arange, and the functions of several tensors: cat, stack, where, maximum,
minimum (PyTorch's names and signatures).
Each makes a new leaf from an array (tensor.py's `_new`, which the ledger counts) or applies one op.
"""
import math
import warnings

import numpy as np

from .. import backend, ops
from ..backend.random import draw
from ..ops import ShapeError
from .args import DTYPES, _array_of, _is_number, check_sizes, normalize_dtype
from .tensor import Tensor, _new, _one_dtype, _where, apply

# ----------------------------------------------------------------------------- making tensors

def tensor(data, *, requires_grad=False, dtype=None, device=None):
    """A new tensor from a list, number, NumPy/CuPy array or Tensor (copied), as torch.tensor (whose other
    parameters are keyword-only too)."""
    return _new(_array_of(data, dtype, device), requires_grad)


def from_numpy(ndarray):
    """A CPU tensor over the NumPy array itself, as torch.from_numpy: no copy, so a write to either shows in the
    other (its dtype kept: a float64 array makes a float64 tensor). A write through NumPy is not seen by the tape's
    version counters (as in PyTorch): do not change an array while a backward may still read it. An in-place write
    that grad mode records (t.add_(w), w requiring grad) is refused, where PyTorch writes into the array."""
    if not isinstance(ndarray, np.ndarray):
        hint = "; mg.tensor(...) copies a list, a number or a CuPy array" if not isinstance(ndarray, Tensor) else \
            "; it is a Tensor already"
        raise TypeError(f"from_numpy: expected np.ndarray (got {type(ndarray).__name__}){hint}")
    if ndarray.dtype not in DTYPES or not ndarray.dtype.isnative:
        raise TypeError(f"from_numpy: can't convert np.ndarray of type {ndarray.dtype}: minigrad knows "
                        f"{', '.join(d.name for d in DTYPES)} (in the machine's byte order); convert it first, "
                        f"e.g. array.astype('float32')")
    if any(s < 0 for s in ndarray.strides):
        raise ValueError("from_numpy: at least one stride in the given numpy array is negative (a reversed view, "
                         "as a[::-1]), which minigrad's ops do not take without a copy; pass array.copy(), as "
                         "PyTorch asks")
    if not ndarray.flags.writeable:
        warnings.warn("from_numpy: the given NumPy array is not writable; the tensor shares it, so an in-place "
                      "write to the tensor will fail (PyTorch warns too). array.copy() makes one that is",
                      UserWarning, stacklevel=2)
    # a view of the array: a write the tape records gives a tensor a new array (NOTE [in-place]), which would end
    # the sharing unseen, and InPlace._write refuses that on a view with an error that says what to do instead
    return _new(ndarray.view())


def _filled(op, fill, shape, dtype, device, requires_grad):
    device = backend.normalize_device(device)
    dt = normalize_dtype(dtype or "float32")
    return _new(backend.xp_for(device).full(check_sizes(op, shape), fill, dtype=dt), requires_grad)


def zeros(*shape, dtype=None, device=None, requires_grad=False):
    return _filled("zeros", 0, shape, dtype, device, requires_grad)


def ones(*shape, dtype=None, device=None, requires_grad=False):
    return _filled("ones", 1, shape, dtype, device, requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """fill_value everywhere; without a dtype, fill_value's: bool, int64 for an int, float32 for a float (torch.full)."""
    if dtype is None and isinstance(fill_value, (bool, int, np.bool_, np.integer)):
        dtype = "bool" if isinstance(fill_value, (bool, np.bool_)) else "int64"
    if not _is_number(fill_value):
        raise TypeError(f"full: fill_value must be a number, got {type(fill_value).__name__}")
    return _filled("full", fill_value, size, dtype, device, requires_grad)


def _like(op, t):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(t).__name__}; mg.tensor(...) makes one")
    return t


def zeros_like(input, *, dtype=None, requires_grad=False):
    t = _like("zeros_like", input)
    return zeros(*t.shape, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def ones_like(input, *, dtype=None, requires_grad=False):
    t = _like("ones_like", input)
    return ones(*t.shape, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    """fill_value everywhere, in input's shape, and its dtype and device unless given (torch.full_like)."""
    t = _like("full_like", input)
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    """A new tensor to write into, as torch.empty: zeros here (PyTorch's holds whatever the memory held)."""
    return _filled("empty", 0, size, dtype, device, requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad=False):
    """empty() in input's shape, dtype and device unless given (zeros here, as empty's)."""
    t = _like("empty_like", input)
    return empty(*t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """The n x m (n x n) matrix of ones on the diagonal, float32 unless given (torch.eye)."""
    n, m = check_sizes("eye", (n, n if m is None else m))
    array = backend.xp_for(backend.normalize_device(device)).eye(n, m, dtype=normalize_dtype(dtype or "float32"))
    return _new(array, requires_grad)


def _random(op, method, shape, dtype, device, requires_grad):
    dt = normalize_dtype(dtype or "float32")
    if not backend.is_float(dt):  # PyTorch's too: the draws would be truncated to integers
        raise TypeError(f"{op}: dtype must be a floating-point dtype, got {dt.name}; mg.randint draws integers")
    host = draw(method, size=check_sizes(op, shape), device=device).astype(dt, copy=False)
    return tensor(host, dtype=dt, device=device, requires_grad=requires_grad)


def randn(*shape, dtype=None, device=None, requires_grad=False):
    """Standard normal samples from minigrad's generator (mg.manual_seed)."""
    return _random("randn", "standard_normal", shape, dtype, device, requires_grad)


def rand(*shape, dtype=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1) from minigrad's generator."""
    return _random("rand", "random", shape, dtype, device, requires_grad)


def rand_like(input, *, dtype=None, device=None, requires_grad=False):
    """rand() in input's shape, dtype and device unless given (a float dtype: an integer input needs dtype=)."""
    t = _like("rand_like", input)
    return _random("rand_like", "random", t.shape, dtype or t.dtype, device or t.device, requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad=False):
    """randn() in input's shape, dtype and device unless given."""
    t = _like("randn_like", input)
    return _random("randn_like", "standard_normal", t.shape, dtype or t.dtype, device or t.device, requires_grad)


def randint(low, high, size=None, *, dtype="int64", device=None):
    """Integers in [low, high) from minigrad's generator; randint(high, size) draws from [0, high), as PyTorch's."""
    if size is None:  # PyTorch's other overload: randint(high, size)
        low, high, size = 0, low, high
    if not low < high:  # as PyTorch, whatever the size
        raise ValueError(f"randint: low must be less than high, got low={low} and high={high}")
    size = check_sizes("randint", (size,))
    return tensor(draw("integers", low, high, size=size, device=device), dtype=dtype, device=device)


def multinomial(input, num_samples, replacement=False):
    """Indices drawn from the categories that input's last dim weighs (1-d, or one row per draw of a 2-d input;
    the weights need not sum to 1), from minigrad's generator, as torch.multinomial (Tensor.multinomial)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial: input must be a 1-d or 2-d float tensor of weights, got "
                        f"{getattr(input, 'dtype', type(input).__name__)} {getattr(input, 'shape', '')}")
    return input.multinomial(num_samples, replacement)


def arange(start, end=None, step=1, *, dtype=None, device=None):
    start, end = (0, start) if end is None else (start, end)
    start, end, step = (_number_of("arange", x) for x in (start, end, step))  # a 0-d tensor: its number, as PyTorch
    if step == 0 or not all(math.isfinite(x) for x in (start, end, step)) or (end - start) * step < 0:
        raise ValueError(f"arange: cannot go from {start} to {end} by step {step}: the bounds must be finite, the step "
                         f"non-zero and of the sign of end - start, as in PyTorch")
    device = backend.normalize_device(device)
    host = np.arange(start, end, step)
    return tensor(host, dtype=dtype or ("int64" if host.dtype.kind in "iu" else "float32"), device=device)


def _number_of(op, x):
    """A 0-d tensor's number (an int for an integer or bool tensor, so that arange(mg.tensor(3)) is int64, as
    PyTorch's); a number as it is; anything else refused."""
    if isinstance(x, Tensor):
        if x.ndim != 0:
            raise TypeError(f"{op}: expected a number or a 0-d tensor, got a tensor of shape {x.shape}")
        return int(x.item()) if x.dtype.kind in "biu" else x.item()
    return x


# ----------------------------------------------------------------------------- functions on several tensors

def _tensors(op, tensors):
    """cat's and stack's sequence of tensors, as a list in one dtype (tensor.py's _one_dtype), or PyTorch's error:
    iterating over one tensor would join its rows."""
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}: expected a list or tuple of tensors, got {type(tensors).__name__}"
                        + (f" of shape {tensors.shape}; wrap it in a list: mg.{op}([t, ...])"
                           if isinstance(tensors, Tensor) else ""))
    if not tensors:
        raise ShapeError(f"{op}: expected a non-empty list of tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected a list of tensors, got {type(t).__name__} at position {i}; wrap it "
                            f"with mg.tensor(...)")
    return _one_dtype(op, tensors)


def cat(tensors, dim=0):
    """Concatenate along an existing dim; the tensors' dtypes promote as an op's operands (NOTE [type promotion],
    promotion.py)."""
    return apply(ops.Cat, *_tensors("cat", tensors), dim=dim)


def stack(tensors, dim=0):
    """Stack along a new dim; the tensors' dtypes promote as cat's."""
    return apply(ops.Stack, *_tensors("stack", tensors), dim=dim)


def maximum(input, other):
    """The larger of two tensors, elementwise; at a tie each gets half the gradient (as torch.maximum)."""
    return input.maximum(other)


def minimum(input, other):
    """The smaller of two tensors, elementwise; at a tie each gets half the gradient."""
    return input.minimum(other)


def where(condition, input, other):
    """Elementwise: input where condition holds, other elsewhere (as torch.where); numbers allowed. (Its body is
    tensor.py's _where, which the in-place writes use too.)"""
    return _where(condition, input, other)
