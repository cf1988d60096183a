"""Fast paths on NumPy arrays for what a step does many times, each beside the measurement that earned it: the
loss's broadcast gradient (NOTE [a broadcast scalar]), sums and maxima along short rows through the BLAS (NOTE
[along rows]), and an embedding's gradient, row by row (index_add). CuPy and meta arrays go to their own array
module. Beside index_add, its twin for assignment: `put`, target[key] = values with one rule for an index that
repeats, on every device (NOTE [repeated indices]).

Read next: random.py.
"""
import math

import numpy as np

from .device import BFLOAT16, is_array, is_meta, on_gpu, xp_of
from .pool import made

# NOTE [2-byte sums]: float16 keeps 11 significant bits and bfloat16 8. Added up one after another in their own
# dtype, a sum stops growing once each term is below half the spacing of the total: 1,000 copies of 0.1 made 32
# in bfloat16 (ml_dtypes adds element by element), and a float16 mean of 100,000 elements divided by a count that
# float16 holds as inf. PyTorch's kernels add 2-byte floats up in float32 and round once, at the end; so do these
# (reduce_sum, mean_rows, and the ops' means and cumsums), through NumPy's and CuPy's dtype=, which casts a buffer
# at a time: for 10^7 bfloat16 elements 33 KB of peak and 3 ms, against 63 ms in bfloat16's own loop.
_F32 = np.dtype("float32")


def accumulator(dtype):
    """float32 for a 2-byte float (float16, bfloat16), which PyTorch adds up in float32 (NOTE [2-byte sums])."""
    return _F32 if dtype.itemsize == 2 and (dtype.kind == "f" or dtype == BFLOAT16) else None  # is_float's test


def widen(array):
    """array in float32 if it is a 2-byte float, else array itself: what an op that computes a 2-byte input in
    float32 and rounds once, as PyTorch's kernels do, computes on (widen(x) is x: nothing to round back). The
    copy is twice the input's bytes: the profile counts it (NOTE [every array an op makes], pool.py)."""
    acc = accumulator(array.dtype)
    return array if acc is None else made(array.astype(acc))


def narrow(array, dtype):
    """array rounded to `dtype` once, widen's way back (array itself if it has that dtype), counted as made."""
    return array if array.dtype == dtype else made(array.astype(dtype))


# NOTE [2-byte rows]: a 2-byte softmax computed on widen's float32 copy of the whole input holds three times the
# input's bytes beside it (the copy, the float32 result, the rounded output): for GPT-2 XL's loss at batch 4 in
# float16, 2.3 GiB of float32 logits that PyTorch's fused kernel, computing in float32 registers, never makes; a
# prediction on 'meta' held them as its peak. So in_float32 computes a block of whole rows at a time, each block's
# float32 copies 256 KiB, and rounds each block into the one 2-byte result. A row is the same numbers in the same
# order either way (tests/test_low_precision_vs_torch.py holds the results to PyTorch's).
_BLOCK = 1 << 16  # float32 numbers per block: 256 KiB an array


def in_float32(fn, axes, *arrays):
    """fn(*arrays): fn reduces along `axes` (a tuple) and returns one array shaped as the first. A 2-byte float is
    computed in float32 and rounded once, a block of rows at a time (NOTE [2-byte rows]); others as they are."""
    first = arrays[0]
    if first.dtype.itemsize != 2 or accumulator(first.dtype) is None:  # float32 and float64 ask no more (a call each)
        return fn(*arrays)
    split = next((i for i, n in enumerate(first.shape) if i not in axes and n > 1), None)  # an axis fn does not reduce
    if split is None or first.size <= _BLOCK:
        return narrow(fn(*map(widen, arrays)), first.dtype)
    # not lent by the host pool, as astype's result was not (a lent one would do as well since NOTE [a lent array
    # owns its views], pool.py: a gradient flipped back, cumsum's, is a view of it on every device)
    out, step = made(xp_of(first).empty(first.shape, first.dtype)), max(1, _BLOCK * first.shape[split] // first.size)
    for start in range(0, first.shape[split], step):
        rows = (slice(None),) * split + (slice(start, start + step),)
        out[rows] = fn(*(widen(a[rows]) for a in arrays))  # rounded once, as astype rounds
    return out


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


def reduce_sum(array, axis, keepdims=False, dtype=None, wide=False):
    """array.sum(axis=axis, keepdims=keepdims, dtype=dtype). For a NumPy array, np.add.reduce: the C call that
    ndarray.sum reaches through a Python wrapper (NOTE [a broadcast scalar]: on small arrays the wrapper is a good part
    of the cost). Without a dtype, a 2-byte float adds up in float32, rounded back to its dtype unless `wide` (NOTE
    [2-byte sums])."""
    acc = accumulator(array.dtype) if dtype is None else None
    if type(array) is np.ndarray:
        out = np.add.reduce(array, axis, dtype if acc is None else acc, keepdims=keepdims)
    else:
        out = array.sum(axis=axis, dtype=dtype if acc is None else acc, keepdims=keepdims)
    return out if acc is None or wide else out.astype(array.dtype)


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
    if rows is None:  # a 2-byte float: added up and divided in float32, then rounded (NOTE [2-byte sums])
        acc = accumulator(array.dtype)
        out = array.mean(axis=tuple(range(array.ndim - ndim, array.ndim)), dtype=acc, keepdims=True)
        return out if acc is None else out.astype(array.dtype)
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


def index_add(target, key, values):
    """target[key] += values, adding repeated indices up (np.add.at; on CuPy its add.at, CuPy 14's name for it)."""
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
        xp_of(target).add.at(target, key, values)


# NOTE [repeated indices]: in target[key] = values, an integer array in key may name one place twice. NumPy
# writes in order, so the last write stays, though its documentation does not promise it; CuPy writes in
# parallel and says that which one stays is undefined; PyTorch's index_put_ leaves it undefined too. minigrad
# makes it a rule, the same on every device: the last write wins (last in the C order of target[key]'s elements).
# `written_last` finds those writes: each element's place in target (an arange of target's size, indexed as
# target is: a temporary of target's size, the price of one rule for any key), and the last time each place
# occurs. Only those are written, so no place is written twice and the order of the writes no longer matters.
# IndexPut's backward reads the same mask: an overwritten element of values gets no gradient.
def written_last(shape, key, like):
    """For target[key] = values with target of this shape: (places, mask), where places[i] is the flat place in
    target of target[key]'s element i and mask marks the last write to each place; None where key holds no
    integer array, so that no place can be written twice (NOTE [repeated indices])."""
    if is_meta(like) or not any(is_array(k) for k in key):
        return None
    xp = xp_of(like)
    places = xp.arange(math.prod(shape)).reshape(shape)[key]
    flat = places.reshape(-1)
    _, first = xp.unique(flat[::-1], return_index=True)  # the first time each place occurs, counted from the end
    mask = xp.zeros(flat.size, dtype=bool)
    mask[flat.size - 1 - first] = True
    return places, mask.reshape(places.shape)


def put(target, key, values):
    """target[key] = values, where an index repeats the last write winning, on every device (NOTE [repeated
    indices])."""
    found = written_last(target.shape, key, target)
    if found is None:
        target[key] = values
        return
    places, mask = found
    xp = xp_of(target)
    extra = values.ndim - places.ndim
    if extra > 0 and all(d == 1 for d in values.shape[:extra]):  # leading ones, as NumPy's assignment allows
        values = values.reshape(values.shape[extra:])
    values = xp.broadcast_to(values, places.shape)
    target[xp.unravel_index(places[mask], target.shape)] = values[mask]


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
