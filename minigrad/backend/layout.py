"""NumPy's memory layout from shapes and strides alone, for the 'meta' device (meta.py): the strides of a new array
(C order, or the 'K' order of its inputs), the shapes that broadcasting and matmul make, and whether a reshape can be
a view. Each follows NumPy's own rule, named where it is; tests/test_meta.py compares them with NumPy's arrays.

Read next: meta.py, the array that uses them.
"""
import math
import operator

import numpy as np


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _strides_in_order(shape, itemsize, order):
    """Contiguous strides laid out with order[-1] the fastest-moving axis (NumPy's new arrays in 'K' order)."""
    strides, step = [0] * len(shape), itemsize
    for axis in reversed(order):
        strides[axis] = step
        step *= max(shape[axis], 1)
    return tuple(strides)


def _k_strides(arrays, shape, itemsize):
    """Strides of a new array that NumPy lays out in 'K' order: the axes sorted as the inputs' strides are
    (nditer's best axis ordering: a stable insertion sort, with C order winning ties and conflicts), so that
    np.exp(x.T) is laid out as x.T is. Dims of size 1 and broadcast dims (stride 0) do not vote. Remembered by the
    voters' shapes and strides (NOTE [meta's speed])."""
    voters = [a for a in arrays if getattr(a, "ndim", 0) and hasattr(a, "strides")]  # arrays, not numbers
    key = (tuple(shape), itemsize, *((a.shape, a.strides) for a in voters))
    found = _LAYOUTS.get(key)
    if found is None:
        if len(_LAYOUTS) >= 4096:  # a bound, not a policy: a model's step repeats a few hundred layouts
            _LAYOUTS.clear()
        found = _LAYOUTS[key] = _k_order(voters, shape, itemsize)
    return found


# NOTE [meta's speed]: a prediction is Python all the way down, and the meta array's share of it was the largest
# (the planner's search runs dozens: tests/test_plan.py's search of precisions and optimizers took 26 s of a CPU
# pass). Three things took most of that share: the insertion sort of _k_order on every new array (a model repeats
# its few hundred layouts step after step: remembered now, as _ufunc_dtypes remembers dtypes), np.broadcast_shapes
# (5 us a call, where nearly every call is of equal shapes or a scalar beside one: _broadcast), and generators
# where a list does. Measured: plan.search of gpt2 over 2 optimizers x 2 precisions (11 predictions) 2.02 s -> 1.49
# s of CPU; two predictions (gpt2 fp16-mixed with 8-bit AdamW, every block checkpointed; bert-base sqrt) 3,171M ->
# 2,691M instructions under valgrind's callgrind, beyond the import's (a shared 2-core machine's clock is too noisy
# to time 15% by).
_LAYOUTS = {}


def _k_order(arrays, shape, itemsize):
    """_k_strides itself, for the arrays that vote."""
    ndim = len(shape)
    votes = [[0] * (ndim - a.ndim) + [0 if n == 1 else s for n, s in zip(a.shape, a.strides)] for a in arrays]
    perm = list(range(ndim))[::-1]  # innermost first, as nditer keeps its axes
    for i0 in range(1, ndim):
        ipos, j0 = i0, perm[i0]
        for i1 in range(i0 - 1, -1, -1):
            j1 = perm[i1]
            ambiguous, swap = True, False
            for v in votes:
                if v[j0] != 0 and v[j1] != 0:
                    if abs(v[j1]) <= abs(v[j0]):
                        swap = False
                    elif ambiguous:
                        swap = True
                    ambiguous = False
            if not ambiguous:
                if swap:
                    ipos = i1
                else:
                    break
        if ipos != i0:
            perm.insert(ipos, perm.pop(i0))
    order = perm[::-1]  # outermost first
    return _strides_in_order(shape, itemsize, order)


def _broadcast(shapes):
    """np.broadcast_shapes(*shapes), with its two common cases first: shapes all alike, and scalars beside one
    shape (NOTE [meta's speed])."""
    shapes = [s for s in shapes if s]
    if not shapes:
        return ()
    first = shapes[0]
    for s in shapes:
        if s != first:
            return np.broadcast_shapes(*shapes)
    return tuple(first)


def _matmul_shape(a, b):
    """np.matmul's result shape: the last two dims multiply, the ones before broadcast; a 1-D operand is a vector."""
    if not a or not b:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    a2, b2 = (1,) + a if len(a) == 1 else a, b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature "
                         f"(n?,k),(k,m?)->(n?,m?) (size {b2[-2]} is different from {a2[-1]})")
    out = np.broadcast_shapes(a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _matmul_strides(arrays, shape, itemsize):
    """matmul's result: each matrix C-ordered, the batch dims in 'K' order of the operands' batch dims."""
    loops = len(shape) - 2
    if loops <= 0:
        return _c_strides(shape, itemsize)
    batch = [_Layout(a.shape[:-2], a.strides[:-2]) for a in arrays if a.ndim > 2]
    matrix = shape[-1] * shape[-2] * itemsize
    return _k_strides(batch, shape[:-2], matrix) + _c_strides(shape[-2:], itemsize)


class _Layout:
    """Just a shape and strides, for _k_strides."""
    def __init__(self, shape, strides):
        self.shape, self.strides, self.ndim = shape, strides, len(shape)


def _new_shape(shape, size, old):
    shape = [operator.index(n) for n in shape]
    if shape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    if -1 in shape:
        known = math.prod(n for n in shape if n != -1)
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape {tuple(shape)}")
        shape[shape.index(-1)] = size // known
    if math.prod(shape) != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {tuple(shape)}")
    return tuple(shape)


def _nocopy_strides(old_shape, old_strides, new_shape, itemsize):
    """The strides of a reshape that can be a view, or None when NumPy has to copy
    (numpy/core/src/multiarray/shape.c: _attempt_nocopy_reshape, C order)."""
    if math.prod(old_shape) <= 1:  # empty, or one element: any shape views it
        return _c_strides(new_shape, itemsize)
    olddims = [n for n in old_shape if n != 1]
    oldstrides = [s for n, s in zip(old_shape, old_strides) if n != 1]
    newstrides = [0] * len(new_shape)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(new_shape) and oi < len(olddims):
        np_, op_ = new_shape[ni], olddims[oi]
        while np_ != op_:
            if np_ < op_:
                np_ *= new_shape[nj]
                nj += 1
            else:
                op_ *= olddims[oj]
                oj += 1
        for ok in range(oi, oj - 1):  # the old axes merged here must be contiguous among themselves
            if oldstrides[ok] != olddims[ok + 1] * oldstrides[ok + 1]:
                return None
        newstrides[nj - 1] = oldstrides[oj - 1]
        for nk in range(nj - 1, ni, -1):
            newstrides[nk - 1] = newstrides[nk] * new_shape[nk]
        ni, nj, oi, oj = nj, nj + 1, oj, oj + 1
    last = newstrides[ni - 1] if ni >= 1 else itemsize
    for nk in range(ni, len(new_shape)):  # trailing dims of size 1
        newstrides[nk] = last
    return tuple(newstrides)
