"""Where the ops' host arrays come from: a pool that lends them again between steps instead of asking malloc
(`empty` and the functions after it, NOTE [host memory pool]), and one opt-in setting of glibc's malloc for
everything else (keep_freed_host_memory, NOTE [host memory between steps]). Arrays on 'cuda' and 'meta' come
from their own array module (CuPy keeps a pool of its own, which memory_reserved and empty_cache read and free on
'cuda').

Read next: rows.py.
"""
import ctypes
import math
import os
import tracemalloc
import weakref

import numpy as np

from .device import _cupy, normalize_device, xp_of


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
# How it works: the pool keeps every block it made, by size in bytes, and lends one as an array of the shape and
# dtype asked for (a new array object whose .base is the block). Keyed by size rather than by shape, a block serves
# every shape of its size, so the pool holds less beside what is in use (bench/NOTES.md measures it). Every view
# made from the lent array (a transpose, a reshape, a slice, a view of a view) holds that array as its .base (NOTE
# [a lent array owns its views]), so the lent array lives until nothing can read or write the block any more; the
# pool keeps a weak reference to it beside the block, and a block whose lent array is dead is free (no count of
# references, which had to be calibrated to the Python version's own). The lent array dies as any array does, so
# the ledger (profiler/ledger.py), which follows each array's life, sees nothing different. Small arrays (below
# POOL_MIN bytes), and every array while tracemalloc traces (the tests that hold the ledger against the real
# allocator), come from NumPy as usual; so does everything once the pool holds _POOL_LIMIT bytes. What the pool
# holds stays the process's until empty_cache(): the process keeps about its peak between steps.
POOL_MIN = 1 << 16      # bytes: smaller arrays come from malloc's free lists, which do not fault
_POOL_LIMIT = 1 << 30   # bytes the pool may hold at most, in use or free
_pool = {}              # size in bytes -> [weak reference to the array lent last, block (a bytearray)] per block
_blocks = set()         # their ids
_pool_bytes = 0
_pool_on = os.environ.get("MINIGRAD_HOST_POOL", "1") != "0"


def _dead():
    """A weak reference's answer for an array that died: a block not lent yet is free."""
    return None




# NOTE [every array an op makes]: the ledger (profiler/ledger.py) sees what the tape hands it, each op's output, what
# a record saves, each gradient, as the op returns. An op's own temporaries, made and dropped inside it, it would not
# see: a float16 softmax's float32 copy of its input (NOTE [2-byte sums], rows.py), GELU's Phi(x) in backward,
# sigmoid's exp(-|x|). The real peak is higher than the ledger's by them, and they are the ops' widest arrays. So
# every array this module and `widen`/`narrow` (rows.py) make is told to the active profile as it is made (`made`),
# on every device alike, so that 'meta' makes and tells the same ones: the profile counts each as transient from
# that moment until it dies (an output, or an array a record saves, is the same buffer: counted once). The ops make
# their big arrays here, and name each temporary, so that it is still alive, and counted, when the next is made, as
# an optimizer's step does (NOTE [a step's temporaries], optim/optimizer.py). What is left out: arrays of a row's
# size (a softmax's row maxima), NumPy's own buffers, and blocks of a fixed size that one device's way to a result
# needs and another's does not (special.py's normal CDF on the host), which tests/test_ledger_vs_allocator.py
# bounds. The ops sit below the tape, so the tape's `profiling` (tensor/modes.py) registers the profile's hook here
# (report_new_arrays_to) while one is active.
_report = None  # the active profile's on_new_array, or None


def report_new_arrays_to(hook):
    """From now on `made` tells hook(array, False) of every array it sees; None: no one. The tape's `profiling`
    (tensor/modes.py) registers the active profile's on_new_array here as it starts, and takes it back as it ends."""
    global _report
    _report = hook


def made(array):
    """array, just made by an op (a temporary, or its output), told to the active profile (NOTE [every array an op
    makes]): counted from now until it dies. Returns array; NumPy's 0-d result, a scalar, as a 0-d array (as the tape
    makes an op's output), which the profile can follow, as 'meta' and CuPy make one."""
    array = np.asarray(array) if isinstance(array, np.generic) else array  # as_array, inline: a call less an op
    if _report is not None:
        _report(array, False)
    return array


def empty(shape, dtype, like):
    """A new uninitialised array of this shape and dtype on `like`'s device; on the host, lent from the pool
    (NOTE [host memory pool]). The ops' big outputs and gradients come from here; the profile counts it from now
    (NOTE [every array an op makes])."""
    return made(_lend(shape, dtype, like))


def _lend(shape, dtype, like):
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
    for entry in blocks:
        if entry[0]() is None:  # its lent array died, and every view of it with it: the block is free
            break
    else:
        if _pool_bytes + nbytes > _POOL_LIMIT:
            return np.empty(shape, dtype)  # not pooled: malloc's, as without the pool
        entry = [_dead, bytearray(nbytes)]  # NOTE [a lent array owns its views]
        blocks.append(entry)
        _blocks.add(id(entry[1]))
        _pool_bytes += nbytes
    array = _lent_as(entry[1], shape, dtype)
    entry[0] = weakref.ref(array)
    return array


def _lent_as(block, shape, dtype):
    """The block as an array of this shape and dtype that owns its views as a new array does (NOTE [a lent
    array owns its views]): its .base is the block, a bytearray, which NumPy's views do not look through."""
    return np.ndarray(shape, dtype, block)


# NOTE [a lent array owns its views]: a view's .base is the array that owns its memory (NumPy follows a view of a
# view down to it), and the lent array stands for the new array NumPy, CuPy and 'meta' would make: so it, not the
# block, must be that owner. Lent as block.view(dtype).reshape(shape), it was not: its views' base was the block.
# Two things read that: the ledger follows a buffer until the array object it was made as dies (its views keep that
# object alive), and a reshape's view outlived the lent array, so the host's ledger let the buffer die and be born
# again where 'meta' kept it; and is_view, which then had to count the block's references, called a view that
# alone used its block no view, so that a leaf took it as its .grad where 'meta' copied it (a Linear's or a
# matrix-vector product's gradient for a leaf, (gx @ w).reshape(x's shape): 512 KiB more on 'meta').
# So a block is a bytearray: NumPy's walk from a view to its owner stops at the first base that is no array, and a
# view of a bytearray is the one object NumPy's ndarray() keeps as .base (a memoryview it looks through, to an array)
# (tests/test_ledger_vs_allocator.py, tests/test_host_pool.py).


def empty_like(array):
    """empty(array.shape, array.dtype, array), with a short way out for small arrays (the per-op cost that a tiny
    model sees)."""
    if not isinstance(array, np.ndarray):
        return made(xp_of(array).empty(array.shape, array.dtype))
    if array.nbytes < POOL_MIN:
        return made(np.empty(array.shape, array.dtype))
    return empty(array.shape, array.dtype, array)


def out_like(array):
    """For a ufunc's out=: an array like `array` lent by the pool, or None (the ufunc makes its own result, as
    without out=) where the pool would not lend one anyway: a small array, or one not on the host."""
    if not isinstance(array, np.ndarray) or array.nbytes < POOL_MIN:
        return None
    return empty(array.shape, array.dtype, array)


def is_view(array):
    """Does `array` use memory that another array owns (a slice, a transpose, a reshape)? An array the host pool
    lent is not a view, though it has a base (the pool's block): as a new array is not (NOTE [a lent array owns its
    views]). The same program then copies the same gradients on every device."""
    base = array.base
    return base is not None and not (type(base) is bytearray and id(base) in _blocks)


def pooled(ufunc, a, b, number=None):
    """ufunc(a, b) (np.multiply, ...), its result lent by the pool when it is big (NOTE [host memory pool]). With
    `number` (i, value), operand i is that Python number, beside a 2-byte float: computed in float32 and rounded once
    into the 2-byte dtype, a buffer at a time (NOTE [a number beside 2-byte floats], ops/pointwise.py)."""
    if number is not None:
        x = b if number[0] == 0 else a
        operands = (number[1], x) if number[0] == 0 else (x, number[1])
        return ufunc(*operands, out=empty(x.shape, x.dtype, x), dtype=np.float32, casting="unsafe")
    if not isinstance(a, np.ndarray) or (a.nbytes < POOL_MIN and b.nbytes < POOL_MIN):
        return made(ufunc(a, b))
    return ufunc(a, b, out=empty(np.broadcast_shapes(a.shape, b.shape), np.result_type(a, b), a))


def masked_fill(x, mask, value):
    """A copy of x with `value` where mask (broadcast to x) is set; on the host from the pool, and without
    np.where, which is several times slower than two copies here."""
    if not isinstance(x, np.ndarray):
        return made(xp_of(x).where(mask, x.dtype.type(value), x))
    out = empty_like(x)
    np.copyto(out, x)
    np.copyto(out, value, where=mask, casting="unsafe")  # a float into an integer tensor: truncated, as PyTorch's
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
    copy = _lend(array.shape, array.dtype, array)  # not told: the copy NumPy makes on the other devices is not
    copy[...] = array                               # either, and an op's output is counted as the op returns
    return copy.reshape(shape)  # the elements in the same (C) order as array.reshape's copy


def zeros(shape, dtype, like):
    """empty(), filled with zeros."""
    a = empty(shape, dtype, like)
    a.fill(0)
    return a


def memory_reserved(device=None):
    """Bytes the device's pool holds, lent or free (torch.cuda.memory_reserved): on 'cpu' the host pool's; on
    'cuda' CuPy's memory pool's (its total_bytes); 'meta' holds none. The default device's by default."""
    device = normalize_device(device)
    if device == "cuda":
        return _cupy.get_default_memory_pool().total_bytes()
    return _pool_bytes if device == "cpu" else 0


def empty_cache(device=None):
    """Give the device's free pooled blocks back (torch.cuda.empty_cache): on 'cpu' the host pool's to malloc; on
    'cuda' CuPy's pool's to the GPU (free_all_blocks). The default device's by default."""
    global _pool_bytes
    device = normalize_device(device)
    if device == "cuda":
        _cupy.get_default_memory_pool().free_all_blocks()
    if device != "cpu":
        return
    for key, blocks in list(_pool.items()):
        used = []
        for entry in blocks:  # as in _lend: a block whose lent array is dead is free
            if entry[0]() is not None:
                used.append(entry)
            else:
                _blocks.discard(id(entry[1]))
        blocks[:] = used
        if not blocks:
            del _pool[key]
    _pool_bytes = sum(len(block) for blocks in _pool.values() for _, block in blocks)


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
