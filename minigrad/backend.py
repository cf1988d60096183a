"""The array backend: the one module that decides between NumPy ('cpu'), CuPy ('cuda') and the
shape-only arrays of meta.py ('meta').

Everything above this layer (ops, the tape, nn) asks this module for an array module
(`xp`) instead of importing NumPy or CuPy itself, so the same ops run on all three. It also
holds where the ops' host arrays come from: a pool that reuses them between steps (`empty`, NOTE [host memory
pool]), and one opt-in setting of glibc's malloc for everything else (keep_freed_host_memory).

Read next: random.py, then special.py and ops/, the differentiable ops written only in these primitives.
"""
import ctypes
import math
import os
import sys
import tracemalloc

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


# NOTE [a broadcast scalar]: every step's backward makes the loss's implied gradient, a one-element array of
# ones, and broadcasts it back over what the loss summed. NumPy's ones_like and broadcast_to are Python around
# C (broadcast_to around an iterator object): on a small step they cost microseconds (bench/NOTES.md,
# 'per-op overhead'). For NumPy arrays these two make the same arrays with C calls only.
def ones_like(array):
    """xp.ones_like (C order: backward asks it for one element, whose order does not matter)."""
    if type(array) is np.ndarray:
        if not array.ndim:
            return np.array(1, array.dtype)  # a scalar loss's gradient: the cheapest of all
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
        out.setflags(write=False)  # not out.flags.writeable = ...: a flags object made for one write costs more
        return out
    return xp_of(array).broadcast_to(array, shape)


def reduce_sum(array, axis, keepdims=False):
    """array.sum(axis=axis, keepdims=keepdims). For a NumPy array, np.add.reduce: the C call that ndarray.sum reaches
    through a Python wrapper (NOTE [a broadcast scalar]: on small arrays the wrapper is a good part of the cost)."""
    if type(array) is np.ndarray:
        return np.add.reduce(array, axis, keepdims=keepdims)
    return array.sum(axis=axis, keepdims=keepdims)


# NOTE [along rows]: LayerNorm, softmax and log_softmax reduce over the last axis of every row, forward and
# backward. NumPy runs a reduction's inner loop once per row, and on short rows that loop's start is most of the
# cost: summing the (8, 4, 64, 64) attention scores over their last axis takes 43 us on this project's 2-core
# machine, their maximum 120 us (np.maximum checks for NaN as it goes); the same sums through the BLAS, as a
# matrix-vector product with a vector of ones, take 7 us, and np.argmax's one pass plus a gather of the maxima
# 30 us. Both give exact NumPy semantics where it matters: the maximum is an element of the row (the first NaN
# if there is one, as np.max gives NaN), and a sum adds the same numbers in another order (the BLAS's, fixed for
# a given shape, so a checkpoint's recompute gives the same bits). Rows longer than _ROW_MAX go to NumPy, whose
# pairwise sum loses less to rounding over many numbers and whose per-row start no longer matters. The same holds
# for the sums over rows that a bias's gradient takes (sum_leading).
_ROW_MAX = 1024
_ones = {}  # (length, dtype) -> a read-only vector of ones


def _blas_ready(array):
    """A C-contiguous NumPy array of float32 or float64: one the BLAS takes as a matrix without a copy."""
    return type(array) is np.ndarray and array.dtype.char in "fd" and array.flags.c_contiguous


def _rows(array, ndim):
    """array as a C-contiguous (rows, k) matrix of a BLAS dtype, or None where the fast paths do not apply."""
    if not _blas_ready(array):
        return None
    k = math.prod(array.shape[array.ndim - ndim:])
    return array.reshape(-1, k) if 0 < k <= _ROW_MAX and array.size else None


def _ones_of(n, dtype):
    ones = _ones.get((n, dtype.char))
    if ones is None:
        ones = _ones[n, dtype.char] = np.ones(n, dtype)
        ones.setflags(write=False)
    return ones


def _row_sums(rows, shape, ndim):
    """The sums of a (rows, k) matrix from _rows, shaped as the keepdims sum of an array of this shape."""
    return np.matmul(rows, _ones_of(rows.shape[1], rows.dtype)).reshape(shape[:len(shape) - ndim] + (1,) * ndim)


def sum_rows(array, ndim=1):
    """array.sum over its last `ndim` axes, keepdims=True (NOTE [along rows])."""
    rows = _rows(array, ndim)
    if rows is None:
        return reduce_sum(array, tuple(range(array.ndim - ndim, array.ndim)), keepdims=True)
    return _row_sums(rows, array.shape, ndim)


def sum_leading(array, ndim=1):
    """array summed over every axis but its last `ndim`: a bias's gradient. Through the BLAS as ones @ rows, for the
    same reason as sum_rows (on (512, 128) 3 us against np.add.reduce's 12); both add row after row."""
    lead = array.ndim - ndim
    if lead == 1 and array.shape[0] == 1:  # one row (a batch of one): the sum is the row, as np.add.reduce gives it
        return array.reshape(array.shape[1:]).copy()
    if array.size < 16 * array.shape[-1] or not array.size or not _blas_ready(array):  # few rows (cheapest check
        return reduce_sum(array, tuple(range(lead)))  # first: a tiny layer's backward pays for every check), or not
    shape = array.shape[lead:]                        # a BLAS array
    rows, out = array.reshape(-1, math.prod(shape)), np.empty(shape, array.dtype)
    np.matmul(_ones_of(rows.shape[0], array.dtype), rows, out=out.reshape(-1))
    return out  # not a view (of a reshaped result): a gradient that owns its memory goes to .grad as it is


def mean_rows(array, ndim=1):
    """array.mean over its last `ndim` axes, keepdims=True (NOTE [along rows]): the sum, divided by the count."""
    rows = _rows(array, ndim)
    if rows is None:  # (np.mean also adds float16 up in float32)
        return array.mean(axis=tuple(range(array.ndim - ndim, array.ndim)), keepdims=True)
    s = _row_sums(rows, array.shape, ndim)
    s /= rows.shape[1]
    return s


def max_rows(array):
    """array.max over its last axis, keepdims=True (NOTE [along rows])."""
    rows = _rows(array, 1)
    if rows is None:
        return array.max(axis=-1, keepdims=True)
    n, k = rows.shape
    at = np.argmax(rows, axis=1)
    at += np.arange(0, n * k, k, dtype=at.dtype)  # flat positions of the maxima
    return rows.reshape(-1)[at].reshape(array.shape[:-1] + (1,))


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
        (rows,) = key if len(key) == 1 else (None,)
        if (isinstance(rows, np.ndarray) and rows.dtype.kind in "iu" and rows.size > 1 and target.flags.c_contiguous
                and values.shape == rows.shape + target.shape[1:]):
            _add_rows(target, rows.reshape(-1), values)
        else:
            np.add.at(target, key, values)
    else:
        _cupyx.scatter_add(target, key, values)


def _add_rows(target, rows, values):
    """target[rows] += values, repeated rows adding up: an embedding's backward. np.add.at takes its elements one by
    one (430 us for a GPT's (8, 64) tokens into a (64, 128) table, bench/NOTES.md); sorted by row, each row's
    values are one segment, and np.add.reduceat sums the segments in C (80 us). The values of a row add up in the
    order they came (the sort is stable), though not in np.add.at's grouping, so the last bits can differ from it."""
    values = values.reshape(rows.size, -1)
    if rows.min() < 0:  # -1 and n - 1 are one row: one segment
        rows = rows + target.shape[0] * (rows < 0)
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    target.reshape(target.shape[0], -1)[ordered[starts]] += np.add.reduceat(values[order], starts, axis=0)


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


# NOTE [host memory pool]: the ops take their big outputs and gradients from `empty`, which reuses memory that
# nothing uses any more instead of asking malloc again, as CuPy's memory pool reuses GPU memory (and PyTorch's
# caching allocator on CUDA). Without it, malloc gives each freed block of a few hundred KiB back to the system
# and the next step touches fresh pages: a page fault per 4 KiB, up to a fifth of a step's time (bench/NOTES.md).
# How it works: the pool keeps every block it made, by size in bytes, and lends a view of one in the shape and
# dtype asked for (a new array object whose .base is the block). Keyed by size rather than by shape, a block
# serves every shape of its size, so the pool holds less beside what is in use (bench/NOTES.md measures it). A
# view holds its base, and so does every view made from it (a transpose, a reshape, a slice): a block whose only
# references are the pool's is free, and is never lent while anything can still read or write it
# (sys.getrefcount, as _accumulate in tensor.py counts who holds a gradient). The lent array dies as any array
# does, so the ledger (profiler.py), which follows each array's life, sees nothing different. Small arrays (below
# POOL_MIN bytes), and every array while tracemalloc traces (the tests that hold the ledger against the real
# allocator), come from NumPy as usual; so does everything once the pool holds _POOL_LIMIT bytes. What the pool
# holds stays the process's until empty_cache(): the process keeps about its peak between steps.
POOL_MIN = 1 << 16      # bytes: smaller arrays come from malloc's free lists, which do not fault
_POOL_LIMIT = 1 << 30   # bytes the pool may hold at most, in use or free
_pool = {}              # size in bytes -> the blocks (uint8 arrays) of that size
_blocks = set()         # their ids
_pool_bytes = 0
_pool_on = os.environ.get("MINIGRAD_HOST_POOL", "1") != "0"


def _refs(array):
    return sys.getrefcount(array)


def _base_refs(array):
    return sys.getrefcount(array.base)


def _calibrate():
    """References the checks below see for a free block and for a block with exactly one view lent: counted
    by the same code as the checks, so they hold whatever the Python version adds for the calls themselves."""
    blocks = [np.empty(0)]
    for block in blocks:
        free = _refs(block)
    del block
    return free, _base_refs(blocks[0].view())


_FREE, _ONE_VIEW = _calibrate()


def empty(shape, dtype, like):
    """A new uninitialised array of this shape and dtype on `like`'s device; on the host, lent from the pool
    (NOTE [host memory pool]). The ops' big outputs and gradients come from here."""
    if not isinstance(like, np.ndarray):
        return xp_of(like).empty(shape, dtype)
    global _pool_bytes
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < POOL_MIN or not _pool_on or tracemalloc.is_tracing():
        return np.empty(shape, dtype)
    blocks = _pool.get(nbytes)
    if blocks is None:
        blocks = _pool[nbytes] = []
    for block in blocks:
        if _refs(block) <= _FREE:  # the list and this loop: nothing else holds it
            return block.view(dtype).reshape(shape)
    if _pool_bytes + nbytes > _POOL_LIMIT:
        return np.empty(shape, dtype)  # not pooled: malloc's, as without the pool
    block = np.empty(nbytes, np.uint8)
    blocks.append(block)
    _blocks.add(id(block))
    _pool_bytes += nbytes
    return block.view(dtype).reshape(shape)


def empty_like(array):
    """empty(array.shape, array.dtype, array), with a short way out for small arrays (the per-op cost that a tiny
    model sees)."""
    if not isinstance(array, np.ndarray):
        return xp_of(array).empty(array.shape, array.dtype)
    if array.nbytes < POOL_MIN:
        return np.empty(array.shape, array.dtype)
    return empty(array.shape, array.dtype, array)


def out_like(array):
    """For a ufunc's out=: an array like `array` lent by the pool, or None (the ufunc makes its own result, as
    without out=) where the pool would not lend one anyway: a small array, or one not on the host."""
    if not isinstance(array, np.ndarray) or array.nbytes < POOL_MIN:
        return None
    return empty(array.shape, array.dtype, array)


def is_view(array):
    """Does `array` use memory that another array owns or shares (a slice, a transpose, an array with views)?
    An array lent by the pool is not a view while it alone uses its block (NOTE [host memory pool])."""
    if array.base is None:
        return False
    # (the base is never bound to a local name here: that would be one more reference)
    return id(array.base) not in _blocks or _base_refs(array) > _ONE_VIEW


def pooled(ufunc, a, b):
    """ufunc(a, b) (np.multiply, ...), its result lent by the pool when it is big (NOTE [host memory pool])."""
    if not isinstance(a, np.ndarray) or (a.nbytes < POOL_MIN and b.nbytes < POOL_MIN):
        return ufunc(a, b)
    return ufunc(a, b, out=empty(np.broadcast_shapes(a.shape, b.shape), np.result_type(a, b), a))


def masked_fill(x, mask, value):
    """A copy of x with `value` where mask (broadcast to x) is set; on the host from the pool, and without
    np.where, which is several times slower than two copies here."""
    if not isinstance(x, np.ndarray):
        return xp_of(x).where(mask, x.dtype.type(value), x)
    out = empty_like(x)
    np.copyto(out, x)
    np.copyto(out, value, where=mask)
    return out


def reshape(array, shape):
    """array.reshape(shape): a view where one exists; where NumPy must copy (a transposed array), the copy comes
    from the pool (NOTE [host memory pool])."""
    if not isinstance(array, np.ndarray) or array.nbytes < POOL_MIN or array.flags.c_contiguous or not _pool_on:
        return array.reshape(shape)
    try:
        return array.reshape(shape, copy=False)  # NumPy >= 2.1: a ValueError where it would have to copy
    except TypeError:                            # an older NumPy: it copies as it likes
        return array.reshape(shape)
    except ValueError:
        pass
    copy = empty_like(array)
    copy[...] = array
    return copy.reshape(shape)  # the elements in the same (C) order as array.reshape's copy


def zeros(shape, dtype, like):
    """empty(), filled with zeros."""
    a = empty(shape, dtype, like)
    a.fill(0)
    return a


def memory_reserved():
    """Bytes of host memory the pool holds, lent or free (torch.cuda.memory_reserved, for the host)."""
    return _pool_bytes


def empty_cache():
    """Give the pool's free blocks back to malloc (torch.cuda.empty_cache, for the host)."""
    global _pool_bytes
    for key, blocks in list(_pool.items()):
        used = []
        for block in blocks:  # as in empty(): the list and this loop hold a free block
            if _refs(block) > _FREE:
                used.append(block)
            else:
                _blocks.discard(id(block))
        blocks[:] = used
        if not blocks:
            del _pool[key]
    _pool_bytes = sum(b.nbytes for blocks in _pool.values() for b in blocks)


class host_pool:
    """with host_pool(False): the ops take host arrays straight from NumPy (malloc), as without the pool; or
    MINIGRAD_HOST_POOL=0 for a whole run. To see what the pool saves (lesson 2, bench.py)."""

    def __init__(self, enabled):
        self.enabled, self.prev = enabled, []

    def __enter__(self):
        global _pool_on
        self.prev.append(_pool_on)
        _pool_on = self.enabled

    def __exit__(self, *exc):
        global _pool_on
        _pool_on = self.prev.pop()
