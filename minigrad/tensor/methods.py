"""The Tensor's methods that are composed of its others, and its in-place writes: two classes that the Tensor
(tensor.py) inherits. Nothing here makes a record itself: a method applies its op through `self._apply` (tensor.py's
`apply`) or calls the Tensor's one-op methods (self.mean(), self * x, self.reshape(...)), and makes a new leaf with
`self._new`; they are the Tensor's hooks, as this file sits below tensor.py and cannot import it.

  Composed     var, std, logsumexp, norm, amax, amin, topk, max/min along a dim, clamp by tensors, flatten, unsqueeze,
               squeeze, repeat, split, chunk, unbind, index_select, gather, multinomial
  Comparisons  <, <=, >, >=, ==, !=, ~, any, all, argmax, argmin: not differentiable, read outside the tape
  InPlace      NOTE [in-place]: add_, sub_, mul_, div_ (and +=, ...), fill_, zero_, copy_, clamp_, t[key] = value
"""
import collections
import itertools
import math
import operator
import warnings
import weakref

import numpy as np

from .. import backend, ops
from ..ops import IndexShapeError, ShapeError
from ..backend.random import draw_categories
from .modes import _on, version_counter
from .tape import Variable, _before_write, _values
from .args import _compared, check_device, check_float, check_sizes, dim_alias, exact_number
from .args import _array_of, _bool_array, _check_in_range, _index_key, _integer_index, _is_number

# (values, indices), as torch.return_types: `values, indices = x.max(1)` and `x.max(1).values` both work
_VALUES_INDICES = {name: collections.namedtuple(name, ["values", "indices"]) for name in ("max", "min", "topk", "sort")}


def _check_int(op, name, value):
    """An argument that counts (topk's k, chunk's chunks, split's sizes, narrow's start, ...): an int, as PyTorch's."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an int, got {value!r} of type {type(value).__name__}")


def _root(s, p):
    """s ** (1/p) of a floating s, with a zero gradient where s == 0 (where d sqrt(s) is infinite and 0 * inf
    would be nan), as PyTorch's norm and std: one op whatever the values (NOTE [a root's gradient at zero], in ops),
    so it runs on 'meta' and records the same ops in a checkpoint's recompute."""
    if p == 2:
        return s._apply(ops.Sqrt, s, zero_at_zero=True)
    return s._apply(ops.Pow, s, exponent=1 / p, zero_at_zero=True)


class Composed:
    """Methods built from the Tensor's one-op methods (tensor.py), or one op after checks that read the arguments
    or the values (topk's order, max's index, gather's key): none has a backward of its own, each gets its gradient
    from the ops it applies (STYLE.md, 'compose before you fuse'). multinomial samples: no gradient."""
    __slots__ = ()

    def _floating(self, op=None):
        """Integer and bool tensors become float32 for exp, log, sin, ... (as in PyTorch); an op named here, which
        PyTorch computes on floats only (mean, var, softmax, ...), refuses them instead, as PyTorch does."""
        if self._data.dtype.kind not in "biu":
            return self
        if op:
            check_float(op, self)
        return self.to("float32")

    # NOTE [float16's squares]: a float16 var, std or norm runs in float32 and is rounded once, as PyTorch's: in
    # float16, a square overflows from 256 and a sum of squares from 65,504 (rounded back to float16 before the
    # division or the root), so the var of values of spread 40 or the norm of eight 100s was inf where PyTorch's is
    # finite. A bfloat16 var too: its mean, rounded to bfloat16 before x - mean, put rows of mean 3 and spread 0.01
    # 21% off (and under CUDA's lists for mixed precision its float32 sum made var float32). std and bfloat16's norm
    # take their root in float32 too, rounding once: a rounded variance's root left 14% of bfloat16 stds an ulp off,
    # and a bfloat16 norm's rounded squares 15% of the norms of 8 values (PyTorch's none).
    @dim_alias
    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        """The variance over dim (every element by default): the sum of squared deviations from the mean
        divided by n - correction, n - 1 by default (Bessel's correction); unbiased=False or correction=0
        divides by n. As torch.var, including its old form x.var(False)."""
        return self._var("var", dim, unbiased, keepdim, correction)

    def _var(self, name, dim, unbiased, keepdim, correction):
        if isinstance(dim, bool):  # torch's var(unbiased) overload
            dim, unbiased = None, dim
        if unbiased is not None and correction is not None:
            raise TypeError(f"{name}: give unbiased or correction, not both (unbiased=False is correction=0)")
        if correction is None:
            correction = 0 if unbiased is False else 1
        x = self._floating(name)
        if x.dtype.itemsize == 2:  # NOTE [float16's squares]
            return x.float()._var(name, dim, unbiased, keepdim, correction).to(x.dtype)
        n = math.prod(x.shape[a] for a in ops.normalize_dims(name, dim, x.ndim, x.shape))
        if n <= correction:  # PyTorch's warning, word for word
            warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                          f"reduction factor (input numel divided by output numel).", UserWarning, stacklevel=4)
        # the mean's own gradient, sum(x - mean) / n, is zero: PyTorch's closed form 2 (x - mean) g / (n - correction)
        # leaves it out, and so does this (with it, n == correction gave nan: +inf and -inf summed through the mean)
        deviation = x - x.detach().mean(dim, keepdim=True)
        squares = (deviation * deviation).sum(dim, keepdim)
        with np.errstate(divide="ignore", invalid="ignore"):  # n <= correction: inf or nan, as in PyTorch
            var = squares / max(n - correction, 0)
        return _root(var, 2) if name == "std" else var  # a 2-byte std's root in float32 too (NOTE [float16's squares])

    @dim_alias
    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        """The square root of var(...), with the same arguments. Where the std is 0 (a constant row) the gradient
        is 0, as in PyTorch, not the nan that d sqrt(v) at v = 0 would give (_root, as norm's)."""
        return self._var("std", dim, unbiased, keepdim, correction)

    @dim_alias
    def logsumexp(self, dim, keepdim=False):
        """log(sum(exp(x))) over dim, computed stably: the max m is taken out, log(sum(exp(x - m))) + m."""
        x = self._floating()
        axes = ops.normalize_dims("logsumexp", dim, x.ndim, x.shape)
        xp = backend.xp_of(x._data)
        if all(x.shape[a] for a in axes):
            m = _values(x, "logsumexp").max(axis=axes, keepdims=True)
            m = xp.where(xp.isfinite(m), m, 0)  # every x -inf (or an inf): x - m would be nan
        else:  # an empty dim: the sum is 0 and the result -inf
            m = xp.zeros(ops.keepdim_shape(x.shape, axes), dtype=x.dtype)
        with np.errstate(over="ignore", divide="ignore"):  # an inf in x, an empty dim: inf and -inf, as in PyTorch
            out = (x - self._from_array(m)).exp().sum(dim, keepdim).log()
        return out + self._from_array(m if keepdim else m.reshape(out.shape))

    def norm(self, p="fro", dim=None, keepdim=False):
        """The p-norm over dim (every element by default), as torch.norm: 'fro' or 2 (the square root of the
        sum of squares), 1, inf, -inf, 0 (the count of non-zeros) or any other p > 0. At a zero vector the
        gradient is 0, as in PyTorch, not the nan that d sqrt(s) at s = 0 would give."""
        x = self._floating("norm")
        ops.normalize_dims("norm", dim, x.ndim, x.shape)  # a dim out of range names norm, not the sum inside
        if x.dtype.itemsize == 2:  # NOTE [float16's squares]
            return x.float().norm(p, dim, keepdim).to(x.dtype)
        if p in ("fro", 2):
            return _root((x * x).sum(dim, keepdim), 2)
        if p == 1:
            return x.abs().sum(dim, keepdim)
        if p == math.inf:
            return x.abs().amax(dim, keepdim)
        if p == -math.inf:
            return x.abs().amin(dim, keepdim)
        if p == 0:
            return (x != 0).to(x.dtype).sum(dim, keepdim)
        if _is_number(p) and not isinstance(p, (bool, np.bool_)) and p > 0:
            # |x| ** p with p < 1 has an infinite derivative at 0 too: 0 there, as PyTorch's (ops.Pow's zero_at_zero)
            return _root(self._apply(ops.Pow, x.abs(), exponent=p, zero_at_zero=True).sum(dim, keepdim), p)
        raise ValueError(f"norm: p must be 'fro', 0, a number > 0, inf or -inf, got {p!r} ('nuc' and p < 0 are "
                         f"not supported)")

    @dim_alias
    def amax(self, dim=None, keepdim=False):
        """The largest values over dim (an int or a tuple; every dim by default); ties share the gradient."""
        ops.normalize_dims("amax", dim, self.ndim, self.shape)  # a dim out of range names amax, not its op, max
        return self._apply(ops.Max, self, dim=dim, keepdim=keepdim)

    @dim_alias
    def amin(self, dim=None, keepdim=False):
        """The smallest values over dim; ties share the gradient."""
        ops.normalize_dims("amin", dim, self.ndim, self.shape)
        return self._apply(ops.Min, self, dim=dim, keepdim=keepdim)

    def topk(self, k, dim=-1, largest=True, sorted=True):
        """The k largest (or smallest) values along dim and their indices, as torch.topk; the values carry the
        gradient back to where they came from. Always in order (sorted=False allows any order, so this one
        too); equal values keep the lower index first; nan counts as the largest."""
        axes = ops.normalize_dim("topk", dim, self.ndim, self.shape)
        if self.ndim == 0:
            ops.normalize_dims("topk", dim, 0, self.shape)  # a 0-d tensor's dim: 0 or -1 (IndexError)
            values, indices = self.reshape(1).topk(k, 0, largest, sorted)
            return _VALUES_INDICES["topk"](values.reshape(()), indices.reshape(()))
        d = axes[0]
        _check_int("topk", "k", k)
        if not 0 <= k <= self.shape[d]:
            raise ShapeError(f"topk: k={k} is out of range for dim {dim} of size {self.shape[d]} (shape {self.shape})")
        a = _values(self, "topk")
        xp = backend.xp_of(a)
        if largest:  # the ascending order of the reversed values, reversed: equal ones keep the lower index first, and
            # nan (which argsort puts last) comes first, before inf, as PyTorch's (a key -x ties nan with inf)
            order = (a.shape[d] - 1) - xp.flip(backend.stable_argsort(xp.flip(a, d), axis=d), d)
        else:
            order = backend.stable_argsort(a, axis=d)  # nan last
        indices = self._new(order[(slice(None),) * d + (slice(0, k),)])
        return _VALUES_INDICES["topk"](self.gather(d, indices), indices)

    def _along(self, name, op_cls, dim, keepdim):
        if isinstance(dim, Variable):  # x.max(y), as torch's: the elementwise maximum (ties share the gradient)
            return self.maximum(dim) if name == "max" else self.minimum(dim)
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"{name}: dim must be one int, got {dim!r}; a{name}(dim=...) takes several dims "
                            f"(and returns the values only)")
        d = ops.normalize_dims(name, dim, self.ndim, self.shape)
        if d and self.shape[d[0]] == 0:
            return self._apply(op_cls, self, dim=dim)  # raises: the max of nothing
        a = _values(self, name)
        arg = a.argmax if name == "max" else a.argmin
        index = self._new(backend.as_array(arg(axis=d[0], keepdims=True)) if d else
                     backend.xp_of(self._data).zeros((), dtype="int64"))
        values = self.gather(dim, index)
        if not keepdim and d:
            values, index = values.squeeze(dim), index.squeeze(dim)
        return _VALUES_INDICES[name](values, index)

    def flatten(self, start_dim=0, end_dim=-1):
        """Merge dims start_dim..end_dim into one (a 0-d tensor becomes 1-d)."""
        n = max(self.ndim, 1)
        s, e = (ops.normalize_dim("flatten", d, n, self.shape, name)[0] for d, name in ((start_dim, "start_dim"),
                                                                                        (end_dim, "end_dim")))
        if s > e:
            raise IndexError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for a tensor of shape "
                             f"{self.shape}")
        if self.ndim == 0:
            return self.reshape(1)
        # the merged size itself, not -1, which reshape cannot infer beside a 0-size dim
        return self.reshape(self.shape[:s] + (math.prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

    def unsqueeze(self, dim):
        """A new dim of size 1 at dim (a negative dim counts from the end of the result)."""
        d = ops.normalize_dim("unsqueeze", dim, self.ndim + 1, self.shape)[0]
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def squeeze(self, dim=None):
        """Drop the dims of size 1: all of them, or those of dim (an int or a tuple); a named dim whose size
        is not 1 stays, as in PyTorch."""
        if dim is None:
            axes = range(self.ndim)
        else:
            named = not (isinstance(dim, (tuple, list)) and not dim)  # squeeze(()) names no dim
            axes = ops.normalize_dims("squeeze", dim, self.ndim, self.shape) if named else ()
        return self.reshape(tuple(n for i, n in enumerate(self.shape) if not (i in axes and n == 1)))

    def repeat(self, *sizes, repeats=None):
        """Tile the data sizes[i] times along dim i (new leading dims for extra sizes), copying, as torch.repeat."""
        sizes = check_sizes("repeat", sizes) if repeats is None else check_sizes("repeat", tuple(repeats))
        if len(sizes) < self.ndim:
            raise ShapeError(f"repeat: {len(sizes)} repeat counts {sizes} for a tensor of {self.ndim} dims "
                             f"{self.shape}; give one per dim at least")
        shape = (1,) * (len(sizes) - self.ndim) + self.shape
        # each dim gets a new dim in front of it, of its repeat count: (r0, s0, r1, s1, ...), read row by row
        spread = self.reshape([m for n in shape for m in (1, n)])
        tiled = spread.expand([m for r, n in zip(sizes, shape) for m in (r, n)])
        return tiled.reshape([r * n for r, n in zip(sizes, shape)])

    def _dim(self, op, dim):
        if self.ndim == 0:
            raise IndexError(f"{op}: a 0-d tensor has no dim to {op} along; reshape(1) it first")
        return ops.normalize_dim(op, dim, self.ndim, self.shape)[0]

    def _slice(self, d, index):
        return self._apply(ops.Index, self, key=(slice(None),) * d + (index,))

    def split(self, split_size, dim=0):
        """Pieces along dim: of split_size each (the last one smaller if it must be), or of the sizes listed.
        Views of this tensor, as in PyTorch (whose Tensor.split names it split_size, torch.split
        split_size_or_sections)."""
        d = self._dim("split", dim)
        n = self.shape[d]
        if not isinstance(split_size, (list, tuple)):
            _check_int("split", "split_size", split_size)
            size = int(split_size)
            if size < 0 or (size == 0 and n):  # as PyTorch: 0 only splits a dim of size 0 (into one piece)
                raise ShapeError(f"split: split_size must be positive (0 only for a dim of size 0), got {size} for "
                                 f"dim {dim} of shape {self.shape}")
            sizes = [min(size, n - start) for start in range(0, n, size)] if n else [0]
        else:
            sizes = list(split_size)
            for k in sizes:
                _check_int("split", "each size", k)
                if k < 0:
                    raise ShapeError(f"split: sizes must be >= 0, got {sizes}")
            if sum(sizes) != n:
                raise ShapeError(f"split: sizes {sizes} add up to {sum(sizes)}, but dim {dim} of shape {self.shape} "
                                 f"has size {n}")
        starts = itertools.accumulate([0] + sizes)
        return tuple(self._slice(d, slice(start, start + k)) for start, k in zip(starts, sizes))

    def chunk(self, chunks, dim=0):
        """Split into `chunks` pieces of equal size along dim (the last one smaller, and fewer pieces when the
        size does not allow that many, as torch.chunk)."""
        _check_int("chunk", "chunks", chunks)
        if chunks <= 0:
            raise ShapeError(f"chunk: chunks must be positive, got {chunks}")
        n = self.shape[self._dim("chunk", dim)]
        if not n:  # as torch.chunk: `chunks` empty pieces (split(0) would give one)
            return self.split([0] * chunks, dim)
        return self.split(-(-n // chunks), dim)

    def unbind(self, dim=0):
        """The slices along dim, that dim removed: a tuple of views."""
        d = self._dim("unbind", dim)
        return tuple(self._slice(d, i) for i in range(self.shape[d]))

    def index_select(self, dim, index):
        """The entries at 1-d integer index along dim (repeats allowed; their gradients add up)."""
        d = self._dim("index_select", dim)
        idx = _integer_index("index_select", index, self)
        if idx.ndim > 1:
            raise IndexShapeError(f"index_select: index must be 1-d, got shape {idx.shape}")
        _check_in_range("index_select", idx, self.shape[d], f"dim {dim} of shape {self.shape}")
        return self._slice(d, idx.reshape(-1))

    def gather(self, dim, index):
        """out[i][j][k] = self[index[i][j][k]][j][k] for dim=0, and likewise for any dim, as torch.gather: index
        has as many dims as this tensor, and no dim larger except along dim. Repeats add their gradients."""
        idx = _integer_index("gather", index, self)
        if idx.ndim != self.ndim:
            raise ShapeError(f"gather: index must have as many dims as the input, got index shape {idx.shape} for "
                             f"input shape {self.shape}")
        axes = ops.normalize_dim("gather", dim, self.ndim, self.shape)
        if self.ndim == 0:
            ops.normalize_dims("gather", dim, 0, self.shape)  # a 0-d tensor's dim: 0 or -1 (IndexError)
            return self.reshape(1).gather(0, self._new(idx.reshape(1))).reshape(())
        d = axes[0]
        if any(m > n for k, (m, n) in enumerate(zip(idx.shape, self.shape)) if k != d):
            raise ShapeError(f"gather: index of shape {idx.shape} is larger than the input's shape {self.shape} in a "
                             f"dim other than dim {dim}")
        _check_in_range("gather", idx, self.shape[d], f"dim {dim} of shape {self.shape}")
        # index along dim, and along every other dim its own position: one integer array per dim, broadcast
        xp = backend.xp_of(idx)
        key = tuple(idx if k == d else xp.arange(m).reshape((m,) + (1,) * (idx.ndim - k - 1))
                    for k, m in enumerate(idx.shape))
        return self._apply(ops.Index, self, key=key)

    def multinomial(self, num_samples, replacement=False):
        """Indices drawn from the categories that the last dim weighs (1-d, or one row per draw of a 2-d tensor; the
        weights need not sum to 1), from minigrad's generator, as torch.multinomial (random.draw_categories)."""
        if self.ndim not in (1, 2) or not backend.is_float(self.dtype):
            raise TypeError(f"multinomial: input must be a 1-d or 2-d float tensor of weights, got {self.dtype} "
                            f"{self.shape}")
        _check_int("multinomial", "num_samples", num_samples)
        if num_samples <= 0:  # as PyTorch: -1 drew one sample, 0 none
            raise ValueError(f"multinomial: num_samples must be positive, got {num_samples}")
        w = backend.to_numpy(_values(self, "multinomial")).astype("float64").reshape(-1, self.shape[-1])
        picks = draw_categories(w, num_samples, replacement)
        return self._new(_array_of(picks.reshape(self.shape[:-1] + (num_samples,)), "int64", self.device))

    def sort(self, dim=-1, descending=False, *, stable=False):
        """(values, indices) along dim, ascending (or descending), as torch.sort: topk of every element, so always
        stable (equal values keep their order) and nan sorts as the largest; the values carry the gradient."""
        axes = ops.normalize_dim("sort", dim, self.ndim, self.shape)
        n = self.shape[axes[0]] if self.ndim else 1
        return _VALUES_INDICES["sort"](*self.topk(n, dim, largest=descending))

    def argsort(self, dim=-1, descending=False, *, stable=False):
        ops.normalize_dim("argsort", dim, self.ndim, self.shape)  # a dim out of range names argsort, not sort
        return self.detach().sort(dim, descending).indices

    def narrow(self, dim, start, length):
        """The `length` entries from `start` along dim: a view, as torch.narrow."""
        d = self._dim("narrow", dim)
        n = self.shape[d]
        _check_int("narrow", "start", start)
        _check_int("narrow", "length", length)
        start = start + n if start < 0 else start
        if not 0 <= start <= start + length <= n:
            raise IndexShapeError(f"narrow: start {start} and length {length} fall outside dim {dim} of size {n} "
                             f"(shape {self.shape})")
        return self._slice(d, slice(start, start + length))

    def unflatten(self, dim, sizes):
        """Split dim into several of `sizes` (one of them may be -1), as torch.unflatten."""
        d = self._dim("unflatten", dim)
        sizes = tuple(sizes)
        known = math.prod(n for n in sizes if n != -1)
        if sizes.count(-1) == 1 and known:  # -1 from this dim's size: reshape's, from all, is ambiguous when it is 0
            sizes = tuple(self.shape[d] // known if n == -1 else n for n in sizes)
        try:
            return self.reshape(self.shape[:d] + sizes + self.shape[d + 1:])
        except ShapeError:
            raise ShapeError(f"unflatten: sizes {sizes} do not split dim {dim} of size {self.shape[d]} (shape "
                             f"{self.shape}): their product must be {self.shape[d]}, with at most one -1") from None

    def masked_select(self, mask):
        """The elements where mask (bool, broadcast with this tensor) is True, as a 1-d copy."""
        m = _bool_array(mask, self, "masked_select")
        shape = ops.broadcast_shapes(self.shape, m.shape)
        if shape is None:
            raise ShapeError(f"masked_select: mask of shape {m.shape} does not broadcast with the shape {self.shape}")
        if not shape:  # both 0-d: NumPy has no nonzero() of a 0-d array
            return self.reshape(1).masked_select(self._new(m.reshape(1)))
        return self._apply(ops.Index, self.expand(shape), key=backend.xp_of(m).broadcast_to(m, shape).nonzero())

    def sin(self):
        return self._apply(ops.Sin, self._floating())

    def cos(self):
        return self._apply(ops.Cos, self._floating())

    def clone(self, *, memory_format=None):
        """A copy in a new array, whose gradient flows back to this tensor (its own op, so the ledger counts it)."""
        return self._apply(ops.Clone, self)

    def _clamp_by_tensors(self, lo, hi):
        """self.clamp(lo, hi) where a bound is a tensor (a number beside it is a constant one): self and the bounds in
        one dtype by NOTE [type promotion], their shapes broadcast, one ops.ClampTensor."""
        check_device("clamp", self, lo, hi)  # (apply's check would name the op, clamp_tensor)
        x, sides, bounds = self, [], []
        for side, b in (("lo", lo), ("hi", hi)):
            if b is not None:
                x, b = self._operands(x, b, "clamp")
                sides.append(side)
                bounds.append(b)
        bounds = [b if b.dtype == x.dtype else b.to(x.dtype) for b in bounds]  # a max that promoted x promotes min too
        if ops.broadcast_shapes(x.shape, *(b.shape for b in bounds)) is None:
            given = ", ".join(f"{'min' if side == 'lo' else 'max'} {b.shape}" for side, b in zip(sides, bounds))
            raise ShapeError(f"clamp: the input's shape {x.shape} and the bounds' ({given}) do not broadcast: compared "
                             f"from the right, each pair of dims must be equal or one of them 1")
        return self._apply(ops.ClampTensor, x, *bounds, sides=tuple(sides))


class Comparisons:
    """Not differentiable: comparisons (bool tensors), any, all, argmax, argmin. Each reads the values outside the
    tape (NOTE [reads outside the tape], tape.py) and returns a new leaf. (sign and round, here too, are ops: their
    gradient is 0, as PyTorch's.)"""
    __slots__ = ()

    def _compare(self, other, fn, identity=False):
        if identity and not (isinstance(other, Variable) or _is_number(other) or backend.is_array(other)):
            return NotImplemented  # x == None (or a str, a list): Python's identity, False, as PyTorch's
        check_device(fn.__name__, self, other)
        mine, other = _compared(fn.__name__, self, other)  # in one dtype, as PyTorch's (NOTE [type promotion])
        try:
            return self._new(backend.as_array(fn(mine, other)))
        except ValueError:  # NumPy's "operands could not be broadcast together"
            raise ShapeError(f"{fn.__name__}: shapes {self.shape} and {getattr(other, 'shape', ())} do not broadcast: "
                             f"compared from the right, each pair of dims must be equal or one of them 1") from None
        except TypeError:  # NumPy's "ufunc 'less' did not contain a loop with signature matching types"
            raise TypeError(f"{fn.__name__}: cannot compare a tensor with {type(other).__name__} {other!r:.40}; "
                            f"compare with a number or a Tensor") from None

    def __lt__(self, other):
        return self._compare(other, operator.lt)

    def __le__(self, other):
        return self._compare(other, operator.le)

    def __gt__(self, other):
        return self._compare(other, operator.gt)

    def __ge__(self, other):
        return self._compare(other, operator.ge)

    def __eq__(self, other):
        return self._compare(other, operator.eq, identity=True)

    def __ne__(self, other):
        return self._compare(other, operator.ne, identity=True)

    lt, le, gt, ge = __lt__, __le__, __gt__, __ge__  # eq and ne: names.py's (no identity there)

    def __invert__(self):
        return self._new(~_values(self, "invert"))

    def _read(self, name):
        """The array module's function `name` of the values, read outside the tape, as a new leaf."""
        return self._new(backend.as_array(getattr(backend.xp_of(self._data), name)(_values(self, name))))

    def isnan(self):
        return self._read("isnan")

    def isinf(self):
        return self._read("isinf")

    def isfinite(self):
        return self._read("isfinite")

    def sign(self):
        """-1, 0 or 1, with a gradient of 0 everywhere, as PyTorch's (so x.sign() * x still gets the gradient of |x|
        through its other factor, and x.grad is zeros, not None, where sign is the only path)."""
        return self._apply(ops.Sign, self)

    def round(self, *, decimals=0):
        """To the nearest (even at a half, as PyTorch) at `decimals` places; a gradient of 0, as sign."""
        return self._apply(ops.Round, self, decimals=decimals)

    def equal(self, other):
        """True if other has this shape and the same values (a Python bool, as torch.equal)."""
        return self.shape == other.shape and bool((self == other).all())

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """|self - other| <= atol + rtol * |other| everywhere (a Python bool), as torch.allclose."""
        check_device("allclose", self, other)
        if ops.broadcast_shapes(self.shape, other.shape) is None:
            raise ShapeError(f"allclose: shapes {self.shape} and {other.shape} do not broadcast: compared from the "
                             f"right, each pair of dims must be equal or one of them 1")
        xp = backend.xp_of(self._data)
        return bool(xp.allclose(_values(self, "allclose"), _values(other, "allclose"), rtol, atol, equal_nan))

    __hash__ = object.__hash__  # tensors are dict keys by identity (optimizer state)

    @dim_alias
    def any(self, dim=None, keepdim=False):
        """True where any element over dim (an int or a tuple; every dim by default; () none, as torch.any's) is
        nonzero, as torch.any."""
        return self._new(backend.as_array(_values(self, "any").any(axis=self._axes("any", dim), keepdims=keepdim)))

    def _axes(self, name, dim):
        return () if isinstance(dim, (tuple, list)) and not dim else ops.normalize_dims(name, dim, self.ndim, self.shape)

    @dim_alias
    def all(self, dim=None, keepdim=False):
        """True where every element over dim is nonzero, as torch.all."""
        return self._new(backend.as_array(_values(self, "all").all(axis=self._axes("all", dim), keepdims=keepdim)))

    @dim_alias
    def argmax(self, dim=None, keepdim=False):
        """The index of the largest along dim (one int), or in the flattened tensor (dim=None); the first at a tie."""
        return self._arg("argmax", dim, keepdim)

    @dim_alias
    def argmin(self, dim=None, keepdim=False):
        return self._arg("argmin", dim, keepdim)

    def _arg(self, name, dim, keepdim):
        """The index of the largest (smallest) value of the flattened tensor, or along dim (one int), with PyTorch's
        IndexError for a dim out of range, or with no element to pick from."""
        axes = None if dim is None else ops.normalize_dim(name, dim, self.ndim, self.shape) or None  # one int (0-d: none)
        dim = axes and axes[0]
        if (self.shape[dim] if dim is not None else self._data.size) == 0:
            where_ = "" if dim is None else f" along dim {dim}"
            raise IndexError(f"{name}: the tensor of shape {self.shape} has no element{where_} to pick from")
        a = _values(self, name)
        return self._new(backend.as_array(getattr(a, name)(axis=dim, keepdims=keepdim)))


_UFUNCS = {ops.Add: "add", ops.Sub: "subtract", ops.Mul: "multiply", ops.Div: "divide"}  # the in-place writes


class InPlace:
    """The in-place writes, by PyTorch's rules (NOTE [in-place], at _write): with nothing to record, the values go
    into this tensor's array; recorded, this tensor becomes the output of the same op run out of place."""
    __slots__ = ()

    def _write(self, name, functional, others=(), numpy_write=None):
        """Write the values `functional()` computes into this tensor, by PyTorch's rules.

        NOTE [in-place]: with nothing to record (grad mode off, as in an optimizer's update, or no
        tensor involved requires grad), the values are written into this tensor's array, which every
        view and detach() of it shares, and its version goes up (NOTE [version counters]). With
        something to record, a leaf that requires grad is refused (its .grad would stop matching its
        values); any other tensor takes the values and the record of the same op run out of place,
        and keeps its old array for the records that saved it, so no gradient goes wrong. That last
        case would break aliasing, so minigrad refuses it on a view or a tensor that has views."""
        recording = _on.grad_enabled and (self._requires_grad or any(
            isinstance(o, Variable) and o._requires_grad for o in others))
        if recording and self._ctx is None and self._requires_grad:
            raise RuntimeError(f"{name}: this is a leaf tensor that requires grad (a parameter, or made with "
                               f"requires_grad=True), and grad mode is on: an in-place change would not be part of "
                               f"any gradient. Update it under `with mg.no_grad():` (as an optimizer does), or write "
                               f"x = x ... to make a new tensor")
        # a selective checkpoint's recompute repeats writes that passed these checks on the forward's arrays, and
        # may write into a placeholder, which looks like an expanded view (NOTE [selective checkpoint])
        replay = any([m.replaying for m in _on.modes])
        shared = any(step == 0 and n > 1 for step, n in zip(self._data.strides, self.shape))
        if not replay and shared and self._data.size:  # NumPy gives an empty array zero strides: no expand()
            raise RuntimeError(f"{name}: this tensor is an expand()ed view, in which several elements share one "
                               f"memory location, so it cannot be written in place; write to a copy (x = x * 1), "
                               f"or to the tensor it expands")
        aliased = backend.is_view(self._data) or (self._vc is not None and self._vc.shared(self))
        if recording and not replay and aliased:
            raise RuntimeError(f"{name}: in place on a view, or on a tensor that has views or detached copies, while "
                               f"grad mode records it (a from_numpy tensor is a view of its array): minigrad does not "
                               f"support that; write y = y ... instead, or do it under mg.no_grad()")
        if not recording:  # the write reads the old values, and the other operands' (NOTE [reads outside the tape])
            for o in others:
                if isinstance(o, Variable):
                    _values(o, name)
            _before_write(self, name)
        if not recording and numpy_write is not None:
            try:
                numpy_write(self._data)
            except TypeError as e:  # NumPy's casting rule: a float value into an integer tensor
                raise TypeError(f"{name}: {e} (this tensor is {self.dtype.name} of shape {self.shape})") from None
            version_counter(self).n += 1
            return self
        new = functional()
        if new.shape != self.shape or new.dtype != self.dtype:
            raise RuntimeError(f"{name}: the result is {new.dtype.name} of shape {new.shape}, but this tensor is "
                               f"{self.dtype.name} of shape {self.shape}: an in-place op cannot change either; "
                               f"write x = x ... for a new tensor")
        if recording:
            old = self._ctx
            # it takes the new array's version counter too (fresh, or one a checkpoint's cache already watches)
            self._data, self._ctx, self._requires_grad, self._vc = new._data, new._ctx, new._requires_grad, new._vc
            if old is not None and old.retained is not None and old.retained() is self:
                old.retained, new._ctx.retained = None, weakref.ref(self)  # retain_grad() follows the tensor, as in PyTorch
        else:
            self._data[...] = new._data
            version_counter(self).n += 1
        return self

    def _arith_(self, name, op_cls, other, alpha=1):
        if alpha != 1:
            other = other * alpha
        a, b = self._operands(self, other, name, true_division=op_cls is ops.Div, into=self)
        number = exact_number(op_cls, self, other)  # NOTE [a number beside 2-byte floats] (ops/pointwise.py)
        check_device(name, a, b)

        def numpy_write(array):
            try:
                fits = np.broadcast_shapes(b.shape, array.shape) == array.shape
            except ValueError:
                fits = False
            if not fits:
                raise RuntimeError(f"{name}: the other operand's shape {b.shape} does not broadcast to this "
                                   f"tensor's shape {self.shape}")
            ufunc = getattr(backend.xp_of(array), _UFUNCS[op_cls])
            if number:  # in float32, into the 2-byte array
                ufunc(array, number["number"][1], out=array, dtype=np.float32, casting="unsafe")
            else:
                ufunc(array, b._data, out=array)
        return self._write(name, lambda: self._apply(op_cls, a, b, **number).to(self.dtype),  # computed wider, rounded
                           (other,), numpy_write if a.dtype == self.dtype else None)  # once into this dtype

    def add_(self, other, *, alpha=1):
        return self._arith_("add_", ops.Add, other, alpha)

    def sub_(self, other, *, alpha=1):
        return self._arith_("sub_", ops.Sub, other, alpha)

    def mul_(self, other):
        return self._arith_("mul_", ops.Mul, other)

    def div_(self, other):
        return self._arith_("div_", ops.Div, other)

    def __iadd__(self, other):
        return self._arith_("+=", ops.Add, other)

    def __isub__(self, other):
        return self._arith_("-=", ops.Sub, other)

    def __imul__(self, other):
        return self._arith_("*=", ops.Mul, other)

    def __itruediv__(self, other):
        return self._arith_("/=", ops.Div, other)

    def fill_(self, value):
        if isinstance(value, Variable) and value.ndim:  # as PyTorch; where() would write one value per element
            raise ShapeError(f"fill_: value must be a number or a 0-d tensor, got a tensor of shape {value.shape}; "
                             f"copy_ writes a tensor of several values")

        def numpy_write(array):
            array[...] = value._data if isinstance(value, Variable) else value
        everywhere = backend.xp_of(self._data).ones(self.shape, dtype=bool)
        return self._write("fill_", lambda: self._where(everywhere, value, self), (value,), numpy_write)

    def zero_(self):
        return self.fill_(0)

    def copy_(self, src):
        """Copy src's values in (broadcast to this shape, converted to this dtype and device)."""
        if not isinstance(src, Variable):
            raise TypeError(f"copy_: expected a Tensor, got {type(src).__name__}")
        # checked here, the same in every grad mode (recorded, the write is a where(), whose error names the wrong op)
        if ops.broadcast_shapes(src.shape, self.shape) != self.shape:
            raise ShapeError(f"copy_: the source's shape {src.shape} does not broadcast to this tensor's shape "
                             f"{self.shape}; reshape the source (src.reshape{self.shape} when it has as many elements) "
                             f"or copy into a tensor of the source's shape")
        src = src.to(self.device, self.dtype)

        def numpy_write(array):
            array[...] = src._data
        everywhere = backend.xp_of(self._data).ones(self.shape, dtype=bool)
        return self._write("copy_", lambda: self._where(everywhere, src, self), (src,), numpy_write)

    def masked_fill_(self, mask, value):
        m = _bool_array(mask, self, "masked_fill_")
        if ops.broadcast_shapes(m.shape, self.shape) != self.shape:
            raise ShapeError(f"masked_fill_: mask of shape {m.shape} does not broadcast to this tensor's shape "
                             f"{self.shape}")
        if isinstance(value, Variable):  # a 0-d tensor: masked_fill checks it
            return self._write("masked_fill_", lambda: self.masked_fill(mask, value), (value,))

        def numpy_write(array):
            array[...] = backend.masked_fill(array, m, value)
        return self._write("masked_fill_", lambda: self.masked_fill(mask, value), (), numpy_write)

    def clamp_(self, min=None, max=None):
        bounds = tuple(b for b in (min, max) if isinstance(b, Variable))
        if bounds:  # computed out of place, then written in: _write checks that the shape and dtype stay
            return self._write("clamp_", lambda: self.clamp(min, max), bounds)

        def numpy_write(array):
            backend.xp_of(array).clip(array, min, max, out=array)
        promotes = self.dtype.kind in "biu" and any(isinstance(b, (float, np.floating)) for b in (min, max))
        return self._write("clamp_", lambda: self.clamp(min, max), (), None if promotes else numpy_write)

    def __setitem__(self, key, value):
        """t[key] = value, as in PyTorch (value converted to this tensor's dtype). Where key names an element twice,
        the last write wins, on every device (PyTorch and CuPy leave it undefined: NOTE [repeated indices])."""
        key = _index_key(key, self)
        if isinstance(value, Variable):
            value = value.to(self.dtype) if value.dtype != self.dtype else value
        elif _is_number(value):
            value = self._new(backend.xp_of(self._data).asarray(value, dtype=self.dtype))
        else:
            raise TypeError(f"setitem: the value must be a Tensor or a number, got {type(value).__name__}")

        def numpy_write(array):
            try:
                backend.put(array, key, value._data)  # a repeated index: the last write wins (NOTE [repeated indices])
            except (IndexError, ValueError) as e:  # a ValueError: shapes that do not broadcast, RuntimeError's too
                kind = IndexError if isinstance(e, IndexError) else ShapeError
                raise kind(f"setitem: {e} (tensor of shape {self.shape}, value of shape {value.shape})") from None
        return self._write("setitem", lambda: self._apply(ops.IndexPut, self, value, key=key), (value,), numpy_write)
