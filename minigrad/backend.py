"""The array backend: the one module that decides between NumPy ('cpu') and CuPy ('cuda').

Everything above this layer (ops, the tape, nn) asks this module for an array module
(`xp`) instead of importing NumPy or CuPy itself, so a third backend (a shape-only 'meta'
device that predicts memory without data) can join by adding a branch here.

Read next: ops.py, the differentiable ops written only in these primitives.
"""
import os

import numpy as np
from scipy.special import ndtr as _host_ndtr  # imported now, not at the first GELU: an import inside a
                                              # profiled step would show up as megabytes in tracemalloc

try:  # CuPy is optional: `pip install minigrad[gpu]`
    import cupy as _cupy
except Exception:  # ImportError, or a CUDA library that fails to load
    _cupy = None

DEVICES = ("cpu", "cuda")


class DeviceError(RuntimeError):
    """A device that is unknown or not available on this machine."""


def normalize_device(device):
    """'cpu', 'cuda', 'cuda:0' or None (the default device) -> 'cpu' or 'cuda'."""
    if device is None:
        device = default_device()
    name = str(device).split(":")[0]
    if name not in DEVICES:
        raise DeviceError(f"unknown device {device!r}: minigrad knows 'cpu' (NumPy) and 'cuda' (CuPy)")
    if name == "cuda":
        _require_cuda()
    return name


def default_device():
    """The device that new tensors get: $MINIGRAD_DEVICE, else 'cpu'."""
    return os.environ.get("MINIGRAD_DEVICE", "cpu") or "cpu"


def cuda_is_available():
    if _cupy is None:
        return False
    try:
        return _cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def _require_cuda():
    if _cupy is None:
        raise DeviceError("device 'cuda' needs CuPy, which is not installed: "
                          "`pip install minigrad[gpu]` (cupy-cuda12x), or use device='cpu'")
    if not cuda_is_available():
        raise DeviceError("device 'cuda' asked for, but CuPy finds no GPU on this machine; use device='cpu'")


def is_array(x):
    """True for a NumPy or CuPy ndarray (not a NumPy scalar, not a list)."""
    return isinstance(x, np.ndarray) or (_cupy is not None and isinstance(x, _cupy.ndarray))


def xp_for(device):
    """The array module for a (normalized) device name."""
    return np if device == "cpu" else _cupy


def _on_gpu(array):
    return _cupy is not None and isinstance(array, _cupy.ndarray)


def xp_of(array):
    """The array module that owns `array` (NumPy for NumPy arrays and scalars)."""
    return _cupy if _on_gpu(array) else np


def device_of(array):
    return "cuda" if _on_gpu(array) else "cpu"


def as_array(x):
    """NumPy turns 0-d results into scalars (np.float32); the tape wants arrays."""
    return np.asarray(x) if isinstance(x, np.generic) else x


def to_device(array, device):
    """Move an array to a device; returns it unchanged when it is already there."""
    if device_of(array) == device:
        return array
    if device == "cpu":
        return _cupy.asnumpy(array)
    return _cupy.asarray(array)


def to_numpy(array):
    return _cupy.asnumpy(array) if _on_gpu(array) else np.asarray(array)


# Numerical Recipes' Chebyshev fit of erfc (Press et al., 2nd ed., section 6.2, erfcc): for z >= 0,
# erfc(z) = t exp(-z^2 + P(t)) with t = 1 / (1 + z/2), fractional error below 1.2e-7 for every z.
_ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
           0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def normal_cdf(array):
    """Phi(x) = P(N(0, 1) <= x) = (1 + erf(x / sqrt 2)) / 2, elementwise, in the input's dtype.

    float64 on the CPU: SciPy's ndtr, exact to rounding (the gradient checks use it). float32 and
    float16 on the CPU: the erfc fit above in float32, within 2.4e-7 of the true value everywhere (an
    ulp or two). Computing Phi(-|x|) first keeps the left tail relatively accurate, where 1 + erf(x)
    cancels to zero. On the GPU: CuPy's ndtr, one fused kernel.
    """
    if _on_gpu(array):
        from cupyx.scipy.special import ndtr
        return ndtr(array).astype(array.dtype, copy=False)
    if array.dtype == np.float64:
        return _host_ndtr(array)
    # Block by block, as a fused GPU kernel would: each block's temporaries stay in the CPU's cache, and
    # only the output is a full-size array. On a GPT's (8, 64, 512) float32 activations this takes 1.6 ms,
    # against 4.8 ms for the same code on the whole array at once, and 4-5 ms for (1 + SciPy's erf) / 2.
    x = np.ascontiguousarray(array, dtype=np.float32).reshape(-1)
    out = np.empty_like(x)
    for i in range(0, x.size, _BLOCK):
        _normal_cdf_block(x[i:i + _BLOCK], out[i:i + _BLOCK])
    return out.reshape(array.shape).astype(array.dtype, copy=False)


_BLOCK = 1 << 15  # float32 numbers per block: 128 KiB per temporary


def _normal_cdf_block(x, out):
    f = np.float32
    t = np.abs(x)
    t *= f(0.5 / np.sqrt(2))
    t += f(1)
    np.reciprocal(t, out=t)                     # t = 1 / (1 + z/2) with z = |x| / sqrt 2
    q = t * f(_ERFC_P[-1])
    for c in _ERFC_P[-2:0:-1]:                  # P(t) by Horner, in place
        q += f(c)
        q *= t
    q += f(_ERFC_P[0])
    z2 = np.square(x)
    z2 *= f(0.5)
    q -= z2                                     # -z^2 + P(t)
    np.exp(q, out=q)
    q *= t
    q *= f(0.5)                                 # q = erfc(z) / 2 = Phi(-|x|)
    np.multiply(q, f(-2), out=out)
    out += f(1)
    out *= x >= 0                               # 1 - 2q where x >= 0, else 0 (np.where is 20x slower)
    out += q                                    # Phi(x): 1 - q where x >= 0, q elsewhere


def index_add(target, key, values):
    """target[key] += values, adding repeated indices up (np.add.at; cupyx.scatter_add)."""
    if not _on_gpu(target):
        np.add.at(target, key, values)
    else:
        import cupyx
        cupyx.scatter_add(target, key, values)
