"""The array backend: the one module that decides between NumPy ('cpu'), CuPy ('cuda') and the
shape-only arrays of meta.py ('meta').

Everything above this layer (ops, the tape, nn) asks this module for an array module
(`xp`) instead of importing NumPy or CuPy itself, so the same ops run on all three. It also
holds the one opt-in setting of where host arrays' memory comes from (keep_freed_host_memory).

Read next: random.py, then special.py and ops.py, the differentiable ops written only in these primitives.
"""
import ctypes
import os

import numpy as np

from . import meta
from .meta import MetaArray, MetaError

try:  # CuPy is optional: `pip install minigrad[gpu]`
    import cupy as _cupy
    import cupyx as _cupyx
except Exception:  # ImportError, or a CUDA library that fails to load
    _cupy = _cupyx = None

DEVICES = ("cpu", "cuda", "meta")
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
    return _cupy if on_gpu(array) else meta if isinstance(array, MetaArray) else np


def device_of(array):
    return "cuda" if on_gpu(array) else "meta" if isinstance(array, MetaArray) else "cpu"


def is_meta(array):
    """True for an array of the 'meta' device: a shape and a dtype, no values."""
    return isinstance(array, MetaArray)


def as_array(x):
    """NumPy turns 0-d results into scalars (np.float32); the tape wants arrays."""
    return np.asarray(x) if isinstance(x, np.generic) else x


# NOTE [a broadcast scalar]: every step's backward makes the loss's implied gradient, a one-element array of
# ones, and broadcasts it back over what the loss summed. NumPy's ones_like and broadcast_to are Python around
# C (broadcast_to around an iterator object): on a small step they cost microseconds (bench/NOTES.md,
# 'per-op overhead'). For NumPy arrays these two make the same arrays with C calls only.
def ones_like(array):
    """xp.ones_like (C order: backward asks it for one element, whose order does not matter)."""
    if type(array) is np.ndarray:
        out = np.empty(array.shape, array.dtype)
        out.fill(1)
        return out
    return xp_of(array).ones_like(array)


def broadcast_to(array, shape):
    """xp.broadcast_to: a read-only view of `array` repeated to `shape`. One element of a NumPy array
    broadcasts by strides of zero, which the ndarray constructor makes directly: the same view (its base,
    strides, read-only) as NumPy's (NOTE [a broadcast scalar])."""
    if type(array) is np.ndarray and array.size == 1:
        out = np.ndarray(shape, array.dtype, array, 0, (0,) * len(shape))
        out.flags.writeable = False
        return out
    return xp_of(array).broadcast_to(array, shape)


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


def index_add(target, key, values):
    """target[key] += values, adding repeated indices up (np.add.at; cupyx.scatter_add)."""
    if is_meta(target):
        return  # no values to add
    if not on_gpu(target):
        np.add.at(target, key, values)
    else:
        _cupyx.scatter_add(target, key, values)


# NOTE [host memory between steps]: NumPy takes each array's memory from glibc's malloc. For blocks of a few
# hundred KiB and up, malloc hands memory back to the system when they are freed (munmap, or trimming the top
# of the heap) and asks for it again at the next step, which costs a page fault per 4 KiB page touched: about
# 10,700 faults (42 MiB) per step of the benchmark's 32 x 512 MLP, a fifth of its time (bench/NOTES.md).
# CuPy's memory pool keeps freed GPU memory for the next request; this asks malloc to do the same on the host,
# for the whole process, so it is opt-in: RSS stays at the step's peak instead of falling between steps.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def keep_freed_host_memory(mmap_threshold=64 * 2**20, trim_threshold=128 * 2**20):
    """Ask glibc's malloc to keep freed host memory for reuse (NOTE [host memory between steps]): blocks below
    `mmap_threshold` bytes come from the heap, and the heap's free top is returned to the system only above
    `trim_threshold`. The same as starting Python with MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ set.
    Returns True if malloc took both settings; False where the C library is not glibc (macOS, musl), which
    leaves the process as it was. Or set MINIGRAD_KEEP_HOST_MEMORY=1 before importing minigrad."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, int(mmap_threshold))) and bool(mallopt(M_TRIM_THRESHOLD, int(trim_threshold)))


if os.environ.get("MINIGRAD_KEEP_HOST_MEMORY", "") not in ("", "0"):
    keep_freed_host_memory()
