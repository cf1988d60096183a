"""Reductions (sum, mean, max, min, prod, cumsum), and the ops that reshape, move and index data (reshape,
transpose, expand, index, index_put, cat, stack, tri, ...). The reductions count their own FLOPs next to their
code; an op that only moves data counts zero (NOTE [FLOP convention] in base.py).

Read next: linear.py, the matrix products.
"""
import math
import numbers

from ..backend import (as_array, broadcast_to, in_float32, index_add, made, put, reduce_sum, reshape, widen,
                       written_last, xp_of, zeros)
from .base import IndexShapeError, Op, ShapeError, keepdim_shape, normalize_dim, normalize_dims, unbroadcast


# ----------------------------------------------------------------------------- reductions

class Sum(Op):
    """d sum(x) = g, broadcast back over the summed dims."""
    name = "sum"

    def forward(self, x, dim=None, keepdim=False):
        self.shape = x.shape
        self.axes = normalize_dims(self.name, dim, x.ndim, x.shape)
        self.keepdim = keepdim
        return reduce_sum(x, self.axes, keepdim, "int64" if x.dtype.kind in "biu" else None)  # PyTorch: int64

    def backward(self, g):
        if not self.keepdim and g.size != 1:  # one element (a loss) broadcasts as it is (NOTE [a broadcast scalar])
            g = g.reshape(keepdim_shape(self.shape, self.axes))
        return (broadcast_to(g, self.shape),)

    def flops(self, inputs, out):
        return {self.name: inputs[0].size - out.size}  # n - 1 adds for each sum of n

    def backward_flops(self, grad, input_grads):
        return {self.name: 0}  # a broadcast copies


class Mean(Sum):
    """d mean(x) = g / n, broadcast back over the averaged dims."""
    name = "mean"

    def forward(self, x, dim=None, keepdim=False):
        self.shape, self.keepdim = x.shape, keepdim
        self.axes = normalize_dims(self.name, dim, x.ndim, x.shape)
        self.count = math.prod(x.shape[a] for a in self.axes)
        out = reduce_sum(x, self.axes, keepdim, wide=True)  # a 2-byte float: divided in float32 (NOTE [2-byte sums])
        out = out / self.count if self.count else out * math.nan
        return out.astype(x.dtype, copy=False)

    def backward(self, g):
        gw = widen(g)  # float16 holds a count over 65,504 as inf (NOTE [2-byte sums])
        return super().backward(g / self.count if gw is g else (gw / self.count).astype(g.dtype))

    def flops(self, inputs, out):
        return {self.name: inputs[0].size}  # the adds, then one divide per result

    def backward_flops(self, grad, input_grads):
        return {self.name: grad.size}  # g / n, then a broadcast


class Max(Op):
    """d max(x) = g at the maximum; ties share it equally (as torch.amax)."""
    name = "max"

    def forward(self, x, dim=None, keepdim=False):
        self.axes = normalize_dims(self.name, dim, x.ndim, x.shape)
        if any(x.shape[a] == 0 for a in self.axes) or (x.size == 0 and not self.axes):
            raise (IndexShapeError if dim is not None else ShapeError)(  # PyTorch's classes
                f"{self.name}: the input of shape {x.shape} has no element along dims {self.axes}; the {self.name} of "
                f"nothing is undefined")
        self.keepdim = keepdim
        out = as_array(getattr(x, self.name)(axis=self.axes, keepdims=True))  # of a 0-d x NumPy gives a scalar
        self.save_for_backward(x, out)
        return out if keepdim else out.reshape([n for i, n in enumerate(x.shape) if i not in self.axes])

    def backward(self, g):
        x, out = self.saved
        mask = x == out
        count = mask.sum(axis=self.axes, keepdims=True).astype(g.dtype)
        return (mask * (g.reshape(out.shape) / count),)

    def flops(self, inputs, out):
        return {self.name: inputs[0].size - out.size}  # comparisons

    def backward_flops(self, grad, input_grads):
        return {self.name: 3 * input_grads[0].size + grad.size}  # ==, count ties, *; g / count


class Min(Max):
    """d min(x) = g at the minimum; ties share it equally (as torch.amin). Max's mirror: -max(-x) would
    copy x twice and wrap around for unsigned integers."""
    name = "min"


class Prod(Op):
    """d prod(x) = g * (the product of the others), from the products to the left and to the right of each
    element: out / x would divide by zero. Its own op: no composition gives that gradient at zeros."""
    name = "prod"

    def forward(self, x, dim=None, keepdim=False):
        self.shape, self.keepdim = x.shape, keepdim
        axes = normalize_dims(self.name, dim, x.ndim, x.shape) if dim is not None else ()
        self.axis = axes[0] if axes else None  # None: every element (also a 0-d x's one dim)
        self.save_for_backward(x)
        return x.prod(axis=self.axis, keepdims=keepdim, dtype="int64" if x.dtype.kind in "biu" else None)  # as Sum

    def backward(self, g):
        (x,) = self.saved
        xp = xp_of(x)
        a = x.reshape(-1) if self.axis is None else xp.moveaxis(x, self.axis, -1)  # reduced dim last
        before = xp.cumprod(a, axis=-1)
        after = xp.flip(xp.cumprod(xp.flip(a, -1), axis=-1), -1)
        others = xp.ones_like(a)
        others[..., 1:] = before[..., :-1]  # the product of everything to the left ...
        others[..., :-1] *= after[..., 1:]  # ... times everything to the right
        if self.axis is None:
            return (others.reshape(self.shape) * g.reshape(()),)
        if not self.keepdim:
            g = xp.expand_dims(g, self.axis)
        return (xp.moveaxis(others, -1, self.axis) * g,)

    def flops(self, inputs, out):
        return {self.name: inputs[0].size - out.size}  # n - 1 multiplies for each product of n

    def backward_flops(self, grad, input_grads):
        return {self.name: 4 * input_grads[0].size}  # two running products, their product, * g


class Cumsum(Op):
    """d cumsum(x) = the cumsum of g taken from the end, along the same dim. Its own op: composed, it would be
    a matmul with an n x n triangle of ones."""
    name = "cumsum"

    def forward(self, x, dim):
        axes = normalize_dim(self.name, dim, x.ndim, x.shape)
        self.axis = axes[0] if axes else None
        if self.axis is None:  # a 0-d x: itself (int64 for every integer and bool input, as PyTorch's)
            return x.astype("int64" if x.dtype.kind in "biu" else x.dtype)
        return self._cumsum(x, self.axis)

    @staticmethod
    def _cumsum(a, axis):
        """Running sums in int64 for integers and bools (PyTorch's dtype), in float32 for float16 and bfloat16, rounded
        once each (NOTE [2-byte sums]), a block of rows at a time (NOTE [2-byte rows], backend/rows.py). Each runs on a
        copy in that dtype, the one cumsum's dtype= would make unseen; the profile counts it (NOTE [every array an op
        makes], backend/pool.py)."""
        if a.dtype.kind not in "biu" or a.dtype == "int64":
            return in_float32(lambda w: made(xp_of(w).cumsum(w, axis=axis)), (axis,), a)
        wide = made(a.astype("int64"))
        return made(xp_of(a).cumsum(wide, axis=axis))

    def backward(self, g):
        if self.axis is None:
            return (g,)
        xp = xp_of(g)
        return (xp.flip(self._cumsum(xp.flip(g, self.axis), self.axis), self.axis),)

    def _adds(self, a):
        return 0 if self.axis is None or a.size == 0 else a.size - a.size // a.shape[self.axis]  # n - 1 per row

    def flops(self, inputs, out):
        return {self.name: self._adds(out)}

    def backward_flops(self, grad, input_grads):
        return {self.name: self._adds(grad)}


# ----------------------------------------------------------------------------- shape and indexing

class Reshape(Op):
    """d reshape(x) = reshape(g) back to x's shape."""
    name = "reshape"
    flops_per_element = (0, (0,))
    returns_view = True

    def forward(self, x, shape):
        self.in_shape = x.shape
        try:  # (min and count: this runs for every reshape)
            bad = len(shape) > 0 and (min(shape) < -1 or shape.count(-1) > 1)  # NumPy takes any negative for -1
        except TypeError:
            raise TypeError(f"reshape: sizes must be ints, got {tuple(shape)}") from None
        if bad:
            raise ShapeError(f"reshape: invalid shape {tuple(shape)} for a tensor of shape {x.shape}: sizes are >= 0, "
                             f"and at most one is -1 (the size that makes the element count fit)")
        try:
            return reshape(x, shape)
        except ValueError:
            raise ShapeError(f"reshape: cannot reshape a tensor of shape {x.shape} ({x.size} elements) "
                             f"to {tuple(shape)}") from None

    def backward(self, g):
        return (reshape(g, self.in_shape),)


class Transpose(Op):
    """d transpose(x, i, j) = transpose(g, i, j)."""
    name = "transpose"
    flops_per_element = (0, (0,))
    returns_view = True

    def forward(self, x, dim0, dim1):
        if x.ndim == 0:
            for d, name in ((dim0, "dim0"), (dim1, "dim1")):
                normalize_dim(self.name, d, 0, x.shape, name)  # only checks the dims
            self.dims = ()
            return x[...]  # a view, which shares x's version counter (x itself would not)
        d0, d1 = (normalize_dim(self.name, d, x.ndim, x.shape, name)[0] for d, name in ((dim0, "dim0"), (dim1, "dim1")))
        self.dims = d0, d1
        return x.swapaxes(d0, d1)

    def backward(self, g):
        return (g.swapaxes(*self.dims) if self.dims else g,)


class Permute(Op):
    """d permute(x, dims) = permute(g, inverse of dims)."""
    name = "permute"
    flops_per_element = (0, (0,))
    returns_view = True

    def forward(self, x, dims):
        try:  # each an int in range, as PyTorch's (d % ndim would wrap it: permute(0, 5) of a 2-d tensor ran)
            axes = [normalize_dim(self.name, d, x.ndim, x.shape)[:1] for d in dims]
        except IndexError:
            raise IndexError(f"permute: dims {tuple(dims)} name a dim out of range for a tensor of shape {x.shape} "
                             f"(expected ints in [{-max(x.ndim, 1)}, {max(x.ndim, 1) - 1}])") from None
        if sorted(a[0] for a in axes if a) != list(range(x.ndim)) or len(dims) != x.ndim:
            raise ShapeError(f"permute: dims {tuple(dims)} are not a permutation of the {x.ndim} dims "
                             f"of a tensor of shape {x.shape}")
        self.dims = tuple(a[0] for a in axes)
        return x.transpose(self.dims)

    def backward(self, g):
        inverse = [0] * len(self.dims)
        for i, d in enumerate(self.dims):
            inverse[d] = i
        return (g.transpose(inverse),)


class Expand(Op):
    """expand(x, shape): a broadcast view, no copy (as teenygrad's Expand); d = g summed back to x's shape."""
    name = "expand"
    flops_per_element = (0, (0,))  # the sums of the backward count as broadcasting's adds
    returns_view = True            # so it shares its input's version counter (NOTE [version counters])

    def forward(self, x, shape):
        self.in_shape = x.shape
        return xp_of(x).broadcast_to(x, shape)

    def backward(self, g):
        return (unbroadcast(g, self.in_shape),)


class Flip(Op):
    """flip(x, dims): reversed along dims, as a copy; d = flip(g). Its own op (teenygrad's Flip): a reversed
    slice is a view, and torch.flip's result shares no memory, so writes to it must not reach x."""
    name = "flip"
    flops_per_element = (0, (0,))

    def forward(self, x, dims):
        self.axes = normalize_dims(self.name, dims, x.ndim, x.shape) if dims else ()  # flip(()) flips nothing
        return xp_of(x).flip(x, self.axes).copy() if self.axes else x.copy()

    def backward(self, g):
        return (xp_of(g).flip(g, self.axes) if self.axes else g,)


def split_key(key):
    """An index key -> (the key with None where its arrays were, where they were, the arrays). The arrays (token
    ids, targets) are what Index and IndexPut keep for backward, so they pass the choke point too; None, Ellipsis,
    ints and slices stay in the key. No arrays: a basic index, a view."""
    at = [i for i, k in enumerate(key) if not (k is None or k is Ellipsis or isinstance(k, (int, slice)))]
    return tuple(None if i in at else k for i, k in enumerate(key)), at, [key[i] for i in at]


def join_key(rest, at, arrays):
    """split_key undone: the (kept) arrays back in their places."""
    key = list(rest)
    for i, arr in zip(at, arrays):
        key[i] = arr
    return tuple(key)


class Index(Op):
    """d x[key] = g scattered back into zeros; repeated integer indices add up."""
    name = "index"
    flops_per_element = (0, (0,))  # gather; with integer arrays its backward adds (see Index)
    returns_view = True

    def forward(self, x, key):
        self.shape, self.dtype = x.shape, x.dtype
        self.key, self.arrays_at, arrays = split_key(key)
        self.basic = not arrays
        if self.basic and Ellipsis not in key:  # NumPy's x[1, 0] is a scalar, a copy; x[1, 0, ...] a 0-d view, as
            key = self.key = key + (Ellipsis,)  # torch's and CuPy's, through which writes reach x
        self.save_for_backward(*arrays)
        try:
            return x[key]
        except IndexError as e:
            raise IndexError(f"index: {e} (tensor of shape {x.shape})") from None

    def backward(self, g):
        key = join_key(self.key, self.arrays_at, self.saved)
        gx = zeros(self.shape, g.dtype, g)
        if self.basic:
            gx[key] = g
        else:
            index_add(gx, key, g)
        return (gx,)

    def backward_flops(self, grad, input_grads):
        return {self.name: 0 if self.basic else grad.size}  # a scatter-add adds each element once


class IndexPut(Op):
    """x[key] = v as an op: y is x with v written at key; dx = g with zeros at key, dv = g[key] summed to v's
    shape. Where key names a place twice, the last write wins on every device, and the elements of v that it
    overwrote get no gradient (NOTE [repeated indices], backend/rows.py)."""
    name = "index_put"
    flops_per_element = (0, (0, 0))

    def forward(self, x, v, key):
        self.v_shape, self.x_shape = v.shape, x.shape
        self.key, self.arrays_at, arrays = split_key(key)
        self.save_for_backward(*arrays)
        y = x.copy()
        try:
            put(y, key, v)
        except (IndexError, ValueError) as e:
            raise type(e)(f"index_put: {e} (tensor of shape {x.shape}, value of shape {v.shape})") from None
        return y

    def backward(self, g):
        key = join_key(self.key, self.arrays_at, self.saved)
        na, nv = self.needs_input_grad
        gx = gv = None
        if na:
            gx = g.copy()
            gx[key] = 0
        if nv:
            gk = g[key]
            found = written_last(self.x_shape, key, g)
            if found is not None:
                gk = gk * found[1]  # an overwritten element of v changed nothing
            gv = unbroadcast(gk, self.v_shape)
            self.summed = gk.size - gv.size  # adds where v was broadcast over the indexed part
        return gx, gv

    def backward_flops(self, grad, input_grads):
        return {self.name: getattr(self, "summed", 0)}


class Cat(Op):
    """d cat(xs, dim) = the matching slices of g. A 1-d empty input (torch.tensor([]), a loop's start) is skipped
    beside others, as PyTorch's legacy rule: its gradient is empty too."""
    name = "cat"
    flops_per_element = None  # any number of inputs: all zero

    def forward(self, *xs, dim=0):
        for i, x in enumerate(xs):
            if x.ndim == 0:  # as PyTorch
                raise ShapeError(f"cat: the 0-d tensor at position {i} cannot be concatenated: it has no dim to join "
                                 f"along; mg.stack joins 0-d tensors, or reshape(1) them first")
        kept = [x for x in xs if x.shape != (0,)] or xs[:1]
        self.dim = normalize_dim(self.name, dim, kept[0].ndim, kept[0].shape)[0]
        self.sizes = [x.shape[self.dim] if x.shape != (0,) else None for x in xs]  # None: skipped
        try:
            return xp_of(xs[0]).concatenate(kept, axis=self.dim)
        except ValueError:
            raise ShapeError(f"cat: shapes {[x.shape for x in xs]} must match except in dim {dim}") from None

    def backward(self, g):
        out, start = [], 0
        for size, need in zip(self.sizes, self.needs_input_grad):
            index = (slice(None),) * self.dim + (slice(start, start + (size or 0)),)
            out.append(None if not need else g[index] if size is not None else xp_of(g).zeros((0,), g.dtype))
            start += size or 0
        return tuple(out)


class Stack(Op):
    """d stack(xs, dim) = g indexed along dim."""
    name = "stack"
    flops_per_element = None

    def forward(self, *xs, dim=0):
        self.dim = normalize_dim(self.name, dim, xs[0].ndim + 1, xs[0].shape)[0]
        if any(x.shape != xs[0].shape for x in xs):
            raise ShapeError(f"stack: every tensor must have the same shape, got {[x.shape for x in xs]}")
        return xp_of(xs[0]).stack(xs, axis=self.dim)

    def backward(self, g):
        return tuple((g[(slice(None),) * self.dim + (i,)] if need else None)
                     for i, need in enumerate(self.needs_input_grad))


class Tri(Op):
    """tril/triu: keep a triangle of the last two dims; the gradient keeps the same triangle."""
    name = "tri"
    flops_per_element = (0, (0,))

    def forward(self, x, diagonal=0, upper=False):
        if x.ndim < 2:
            raise ShapeError(f"{'triu' if upper else 'tril'}: needs at least 2 dims, got shape {x.shape}")
        if isinstance(diagonal, bool) or not isinstance(diagonal, numbers.Integral):  # as PyTorch; NumPy floors
            raise TypeError(f"{'triu' if upper else 'tril'}: diagonal must be an int, got {diagonal!r}")
        self.diagonal, self.upper = diagonal, upper
        return self._apply(x)

    def _apply(self, x):
        xp = xp_of(x)
        return xp.triu(x, self.diagonal) if self.upper else xp.tril(x, self.diagonal)

    def backward(self, g):
        return (self._apply(g),)
