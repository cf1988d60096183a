"""Making tensors: tensor(), from_numpy, zeros, ones, full, zeros_like, ones_like, randn, rand, randint, multinomial,
arange, and the functions of several tensors: cat, stack, where, maximum, minimum (PyTorch's names and signatures).
Each makes a new leaf from an array (tensor.py's `_new`, which the ledger counts) or applies one op.
"""
import warnings

import numpy as np

from .. import backend, ops
from ..backend.random import draw
from .args import DTYPES, _array_of, _shape, normalize_dtype
from .tensor import Tensor, _new, _where, apply

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


def _filled(fill, shape, dtype, device, requires_grad):
    device = backend.normalize_device(device)
    dt = normalize_dtype(dtype or "float32")
    return _new(backend.xp_for(device).full(_shape(shape), fill, dtype=dt), requires_grad)


def zeros(*shape, dtype=None, device=None, requires_grad=False):
    return _filled(0, shape, dtype, device, requires_grad)


def ones(*shape, dtype=None, device=None, requires_grad=False):
    return _filled(1, shape, dtype, device, requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """fill_value everywhere; without a dtype, fill_value's: bool, int64 for an int, float32 for a float (torch.full)."""
    if dtype is None and isinstance(fill_value, (bool, int, np.bool_, np.integer)):
        dtype = "bool" if isinstance(fill_value, (bool, np.bool_)) else "int64"
    return _filled(fill_value, size, dtype, device, requires_grad)


def zeros_like(input, *, dtype=None, requires_grad=False):
    return zeros(*input.shape, dtype=dtype or input.dtype, device=input.device, requires_grad=requires_grad)


def ones_like(input, *, dtype=None, requires_grad=False):
    return ones(*input.shape, dtype=dtype or input.dtype, device=input.device, requires_grad=requires_grad)


def _random(method, shape, dtype, device, requires_grad):
    dt = normalize_dtype(dtype or "float32")
    host = draw(method, size=_shape(shape), device=device).astype(dt, copy=False)
    return tensor(host, dtype=dt, device=device, requires_grad=requires_grad)


def randn(*shape, dtype=None, device=None, requires_grad=False):
    """Standard normal samples from minigrad's generator (mg.manual_seed)."""
    return _random("standard_normal", shape, dtype, device, requires_grad)


def rand(*shape, dtype=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1) from minigrad's generator."""
    return _random("random", shape, dtype, device, requires_grad)


def randint(low, high, size, *, dtype="int64", device=None):
    """Integers in [low, high) from minigrad's generator."""
    return tensor(draw("integers", low, high, size=_shape((size,)), device=device), dtype=dtype, device=device)


def multinomial(input, num_samples, replacement=False):
    """Indices drawn from the categories that input's last dim weighs (1-d, or one row per draw of a 2-d input;
    the weights need not sum to 1), from minigrad's generator, as torch.multinomial (Tensor.multinomial)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial: input must be a 1-d or 2-d float tensor of weights, got "
                        f"{getattr(input, 'dtype', type(input).__name__)} {getattr(input, 'shape', '')}")
    return input.multinomial(num_samples, replacement)


def arange(start, end=None, step=1, *, dtype=None, device=None):
    start, end = (0, start) if end is None else (start, end)
    device = backend.normalize_device(device)
    host = np.arange(start, end, step)
    return tensor(host, dtype=dtype or ("int64" if host.dtype.kind in "iu" else "float32"), device=device)


# ----------------------------------------------------------------------------- functions on several tensors

def cat(tensors, dim=0):
    """Concatenate along an existing dim."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty list of tensors")
    return apply(ops.Cat, *tensors, dim=dim)


def stack(tensors, dim=0):
    """Stack along a new dim."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty list of tensors")
    return apply(ops.Stack, *tensors, dim=dim)


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
