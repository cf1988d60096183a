"""The device choice: NumPy ('cpu'), CuPy ('cuda') or meta arrays ('meta'), decided in one place.

The devices and the default one (`with mg.device(...)`), `xp_of` and `xp_for` (the array module of an array, of
a device), and moving arrays between devices. Everything above asks for an array module (`xp`) here instead of
importing NumPy or CuPy itself, so the same ops run on all three.

Read next: pool.py, where the ops' host arrays come from, and rows.py.
"""
import os

import ml_dtypes
import numpy as np

from . import meta
from .meta import MetaArray, MetaError

try:  # CuPy is optional: `pip install minigrad[gpu]`
    import cupy as _cupy
    import cupyx as _cupyx
except Exception:  # ImportError, or a CUDA library that fails to load
    _cupy = _cupyx = None

DEVICES = ("cpu", "cuda", "meta")
# NOTE [bfloat16]: NumPy has no bfloat16; ml_dtypes (JAX's dtype library) adds it as a NumPy dtype, whose kind is
# 'V', not 'f': so "is it floating?" is asked here (is_float), or as kind not in 'biu' where an op is hot. NumPy's
# ufuncs run on it (ml_dtypes registers loops; a bfloat16 product is computed in float32 and rounded, so it is not
# faster on a CPU); CuPy 14 lacks it where minigrad needs it (cupyx.scipy.special, for GELU): autocast on 'cuda'
# uses float16 (amp/autocast_mode.py).
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

_default = []  # the devices of the `with device(...)` blocks we are in, innermost last


class DeviceError(RuntimeError):
    """A device that is unknown or not available on this machine."""


def normalize_device(device):
    """'cpu', 'cuda', 'cuda:0', 'meta', a device, or None (the default device) -> 'cpu', 'cuda' or 'meta'."""
    if device is None:
        device = default_device()
    name = str(device).split(":")[0]
    if name not in DEVICES:
        raise DeviceError(f"unknown device {device!r}: minigrad knows 'cpu' (NumPy), 'cuda' (CuPy) "
                          f"and 'meta' (shapes only, to predict memory)")
    if name == "cuda":
        _require_cuda()
    return name


def default_device():
    """The device that new tensors get: the innermost `with device(...)`, else $MINIGRAD_DEVICE, else 'cpu'."""
    return _default[-1] if _default else os.environ.get("MINIGRAD_DEVICE", "cpu") or "cpu"


class device:
    """A device; `with mg.device('meta'):` makes it the default for the tensors made inside the block (parameters
    of the modules built there, too), as `with torch.device('meta'):` does."""

    def __init__(self, name):
        self.type = normalize_device(name)

    def __str__(self):
        return self.type

    def __repr__(self):
        return f"device(type='{self.type}')"

    def __enter__(self):
        _default.append(self.type)
        return self

    def __exit__(self, *exc):
        _default.pop()


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


def is_float(dtype):
    """A floating dtype, bfloat16 included (NOTE [bfloat16])."""
    return dtype.kind == "f" or dtype == BFLOAT16


def is_array(x):
    """True for a NumPy, CuPy or meta array (not a NumPy scalar, not a list)."""
    return isinstance(x, (np.ndarray, MetaArray)) or (_cupy is not None and isinstance(x, _cupy.ndarray))


def owner(array):
    """The array that owns the memory behind `array`: a view's base, followed to the end."""
    while is_array(array.base):
        array = array.base
    return array


def xp_for(device):
    """The array module for a (normalized) device name."""
    return np if device == "cpu" else meta if device == "meta" else _cupy


def on_gpu(array):
    """True for a CuPy array."""
    return _cupy is not None and isinstance(array, _cupy.ndarray)


def xp_of(array):
    """The array module that owns `array` (NumPy for NumPy arrays and scalars)."""
    if type(array) is np.ndarray:  # the common case first: every op asks, a tiny model's step some 30 times
        return np
    return _cupy if on_gpu(array) else meta if isinstance(array, MetaArray) else np


def device_of(array):
    return "cuda" if on_gpu(array) else "meta" if isinstance(array, MetaArray) else "cpu"


def is_meta(array):
    """True for an array of the 'meta' device: a shape and a dtype, no values."""
    return isinstance(array, MetaArray)


def as_array(x):
    """NumPy turns 0-d results into scalars (np.float32); the tape wants arrays."""
    return np.asarray(x) if isinstance(x, np.generic) else x


def to_device(array, device):
    """Move an array to a device; returns it unchanged when it is already there."""
    if device_of(array) == device:
        return array
    if device == "meta":  # the shape and dtype travel, the values do not
        return MetaArray(array.shape, array.dtype)
    if is_meta(array):
        raise MetaError(f"to('{device}'): a 'meta' tensor has no values to move; make the tensor on '{device}' "
                        f"instead (a model: build it again there, or load a state_dict into it)")
    if device == "cpu":
        return _cupy.asnumpy(array)
    return _cupy.asarray(array)


def to_numpy(array):
    if is_meta(array):
        raise MetaError("numpy(): a 'meta' tensor has a shape and a dtype but no values")
    return _cupy.asnumpy(array) if on_gpu(array) else np.asarray(array)


def stable_argsort(array, axis):
    """Indices that sort array along axis, equal elements kept in order (CuPy always sorts stably, and its
    older versions take no `kind`)."""
    return array.argsort(axis=axis) if not isinstance(array, np.ndarray) else np.argsort(array, axis=axis, kind="stable")
