"""The 'meta' device: arrays with a shape, a dtype and a memory layout, and no data.

A MetaArray answers everything NumPy would say about an array except its values: its shape and
dtype, its bytes, whether it is a view and of what (`.base`), and its strides, so that a reshape
copies exactly when NumPy's would. NumPy hands its functions to it (`np.exp(m)`, `m + 1`,
`np.where(c, a, b)` call back here through NumPy's dispatch protocols, `__array_ufunc__` and
`__array_function__`), so the ops (ops/) run on it unchanged, and the ledger (profiler/)
counts the very bytes and FLOPs a real run would: a prediction of any model's memory at any size,
instantly. `torch.device('meta')` is the same idea in PyTorch.

What a meta array cannot do is anything that needs its values (`.item()`, `float(m)`, printing,
`.numpy()`, a boolean mask whose count of True decides a shape): those raise MetaError.

Read next: device.py, which makes 'meta' a device beside 'cpu' and 'cuda'.
"""
import math
import operator

import numpy as np

from .layout import (_broadcast, _c_strides, _k_strides, _matmul_shape, _matmul_strides, _new_shape,
                     _nocopy_strides)


class MetaError(RuntimeError):
    """Something that needs an array's values was asked of a 'meta' array, which has none."""


def _no_values(what):
    return MetaError(f"{what}: a 'meta' tensor has a shape and a dtype but no values. Meta tensors predict memory "
                     f"and FLOPs (python -m minigrad memory); to compute values, use device='cpu' or 'cuda'")


def _unknown_count(what):
    return MetaError(f"{what}: on a 'meta' array the number of True entries, and so the result's shape, is unknown; "
                     f"keep the shape fixed (mg.where(mask, x, 0), x * mask) or run it on 'cpu' or 'cuda'")


class MetaArray:
    """Shape, dtype and strides of an array that holds no data; `base` is the array it views, as in NumPy."""
    __slots__ = ("shape", "dtype", "strides", "base", "__weakref__")
    __array_priority__ = 100

    def __init__(self, shape, dtype, strides=None, base=None):
        self.shape = tuple(map(int, shape))
        if self.shape and min(self.shape) < 0:
            raise ValueError(f"negative dimensions are not allowed: {self.shape}")
        self.dtype = np.dtype(dtype)
        self.strides = _c_strides(self.shape, self.dtype.itemsize) if strides is None else tuple(strides)
        self.base = base

    # --- what NumPy says about an array, without its values
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)
    T = property(lambda self: self.transpose())
    device = "meta"

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self):
        return f"MetaArray(shape={self.shape}, dtype={self.dtype.name})"

    def _view(self, shape, strides, dtype=None):
        return MetaArray(shape, dtype or self.dtype, strides, self if self.base is None else self.base)

    def is_c_contiguous(self):
        """NumPy's flag: dims of size 1 may have any stride; an empty array is contiguous."""
        if self.size == 0:
            return True
        expect = self.itemsize
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1:
                if s != expect:
                    return False
                expect *= n
        return True

    # --- values: none
    def item(self, *args):
        raise _no_values("item")

    def tolist(self):
        raise _no_values("tolist")

    def tobytes(self):
        raise _no_values("tobytes")

    def __array__(self, dtype=None, copy=None):
        raise _no_values("converting to a NumPy array")

    def __bool__(self):
        raise _no_values("bool")

    def __float__(self):
        raise _no_values("float")

    def __int__(self):
        raise _no_values("int")

    def __index__(self):
        raise _no_values("using it as an index")

    def __iter__(self):
        raise _no_values("iterating over it")

    def nonzero(self):
        raise _unknown_count("nonzero (masked_select, a boolean mask)")

    # --- views
    def reshape(self, *shape, order="C"):
        shape = _new_shape(shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape, self.size,
                           self.shape)
        strides = _nocopy_strides(self.shape, self.strides, shape, self.itemsize)
        if strides is not None:
            return self._view(shape, strides)
        # NumPy copies into a new C-ordered array of the old shape and returns a view of it in the new one: the
        # result's .base is that copy, and a gradient made so is a view (NOTE [who owns a gradient], tensor.py)
        return MetaArray(self.shape, self.dtype)._view(shape, _c_strides(shape, self.itemsize))

    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        axes = tuple(range(self.ndim))[::-1] if not axes else tuple(a % self.ndim for a in axes)
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError(f"axes {axes} don't match array of {self.ndim} dims")
        return self._view([self.shape[a] for a in axes], [self.strides[a] for a in axes])

    def swapaxes(self, a, b):
        axes = list(range(self.ndim))
        axes[a], axes[b] = axes[b], axes[a]
        return self.transpose(axes)

    def squeeze(self, axis=None):
        axes = (tuple(i for i, n in enumerate(self.shape) if n == 1) if axis is None
                else tuple(a % self.ndim for a in (axis if isinstance(axis, tuple) else (axis,))))
        keep = [i for i in range(self.ndim) if i not in axes]
        return self._view([self.shape[i] for i in keep], [self.strides[i] for i in keep])

    def view(self, dtype=None):
        if dtype is not None and np.dtype(dtype).itemsize != self.itemsize:
            raise MetaError("view: a meta array can only be viewed as a dtype of the same size")
        return self._view(self.shape, self.strides, dtype)

    def __getitem__(self, key):
        return _index(self, key)

    def __setitem__(self, key, value):
        if _is_bool_array(key):  # a[mask] = v: which elements are written does not change any shape
            np.broadcast_shapes(key.shape, self.shape)
            return
        _index(self, key)  # the shapes must fit; there are no values to write

    # --- copies
    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        return MetaArray(self.shape, dtype, _k_strides([self], self.shape, np.dtype(dtype).itemsize))

    def copy(self, order="C"):
        return MetaArray(self.shape, self.dtype)

    def fill(self, value):
        pass

    # --- reductions
    def _reduce(self, axis, keepdims, dtype=None, out=None):
        axes = tuple(range(self.ndim)) if axis is None else tuple(
            a % self.ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
        shape = tuple(1 if i in axes else n for i, n in enumerate(self.shape))
        if out is not None:
            return out
        strides = _k_strides([self], shape, np.dtype(dtype).itemsize)
        if not keepdims:  # a new array either way (base None), laid out as NumPy lays it out
            shape = tuple(n for i, n in enumerate(shape) if i not in axes)
            strides = tuple(s for i, s in enumerate(strides) if i not in axes)
        return MetaArray(shape, dtype, strides)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return self._reduce(axis, keepdims, dtype or np.add.reduce(np.zeros(1, self.dtype)).dtype, out)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return self._reduce(axis, keepdims, dtype or np.multiply.reduce(np.zeros(1, self.dtype)).dtype, out)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return self._reduce(axis, keepdims, dtype or np.zeros(1, self.dtype).mean().dtype, out)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return self._reduce(axis, keepdims, dtype or np.zeros(1, self.dtype).var().dtype, out)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return self._reduce(axis, keepdims, dtype or np.zeros(1, self.dtype).std().dtype, out)

    def max(self, axis=None, out=None, keepdims=False, **kw):
        return self._reduce(axis, keepdims, self.dtype, out)

    min = max

    def argmax(self, axis=None, out=None, keepdims=False):
        if axis is None:
            return MetaArray((1,) * self.ndim if keepdims else (), np.intp)
        return self._reduce(axis, keepdims, np.intp, out)

    argmin = argmax

    def all(self, axis=None, out=None, keepdims=False, **kw):
        return self._reduce(axis, keepdims, np.bool_, out)

    any = all

    def cumsum(self, axis=None, dtype=None, out=None):
        shape = (self.size,) if axis is None else self.shape
        return MetaArray(shape, dtype or np.add.accumulate(np.zeros(1, self.dtype)).dtype)

    def cumprod(self, axis=None, dtype=None, out=None):
        shape = (self.size,) if axis is None else self.shape
        return MetaArray(shape, dtype or np.multiply.accumulate(np.zeros(1, self.dtype)).dtype)

    def argsort(self, axis=-1, kind=None, order=None):
        return MetaArray(self.shape, np.intp)

    def clip(self, a_min=None, a_max=None, out=None, **kw):
        return np.clip(self, a_min, a_max, out=out, **kw)

    # --- NumPy's protocols: every ufunc (np.exp, +, np.maximum, ...) and function (np.where, ...)
    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        if method == "at":  # np.add.at(target, index, values): in place, nothing to compute
            return None
        if method == "reduce":
            (x,) = inputs
            return MetaArray.sum(_meta(x), kwargs.get("axis", 0), kwargs.get("dtype"), None,
                                 kwargs.get("keepdims", False))
        if method != "__call__":
            raise MetaError(f"np.{ufunc.__name__}.{method} is not supported on 'meta' arrays")
        shapes = [x.shape if isinstance(x, MetaArray) else np.shape(x) for x in inputs]
        shape = _matmul_shape(*shapes) if ufunc is np.matmul else _broadcast(shapes)
        dtypes = _ufunc_dtypes(ufunc, inputs, kwargs.get("dtype"))
        if out is not None:
            outs = out if isinstance(out, tuple) else (out,)
            if len(outs) == 1:
                return outs[0]
            return outs
        arrays = [x for x in inputs if isinstance(x, (MetaArray, np.ndarray))]
        layout = _matmul_strides if ufunc is np.matmul else _k_strides
        results = tuple(MetaArray(shape, dt, layout(arrays, shape, dt.itemsize)) for dt in dtypes)
        return results[0] if len(results) == 1 else results

    def __array_function__(self, func, types, args, kwargs):
        handler = _FUNCTIONS.get(func.__name__)
        if handler is None:
            raise MetaError(f"np.{func.__name__} is not supported on 'meta' arrays (yet): minigrad's ops use a "
                            f"small set of NumPy functions, listed in meta._FUNCTIONS")
        return handler(*args, **kwargs)


def _binary(ufunc, reflected=False):
    if reflected:
        return lambda self, other: ufunc(other, self)
    return lambda self, other: ufunc(self, other)


def _inplace(ufunc):
    def apply(self, other):
        ufunc(self, other, out=(self,))  # checks that the shapes broadcast
        return self
    return apply


for _name, _ufunc in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", np.true_divide),
                      ("floordiv", np.floor_divide), ("mod", np.remainder), ("pow", np.power),
                      ("matmul", np.matmul), ("and", np.logical_and), ("or", np.logical_or), ("xor", np.bitwise_xor)]:
    setattr(MetaArray, f"__{_name}__", _binary(_ufunc))
    setattr(MetaArray, f"__r{_name}__", _binary(_ufunc, reflected=True))
    setattr(MetaArray, f"__i{_name}__", _inplace(_ufunc))
MetaArray.__and__ = _binary(np.bitwise_and)
MetaArray.__rand__ = _binary(np.bitwise_and, True)
MetaArray.__or__ = _binary(np.bitwise_or)
MetaArray.__ror__ = _binary(np.bitwise_or, True)
for _name, _ufunc in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal),
                      ("eq", np.equal), ("ne", np.not_equal)]:
    setattr(MetaArray, f"__{_name}__", _binary(_ufunc))
MetaArray.__neg__ = lambda self: np.negative(self)
MetaArray.__pos__ = lambda self: np.positive(self)
MetaArray.__abs__ = lambda self: np.absolute(self)
MetaArray.__invert__ = lambda self: np.invert(self)
MetaArray.__hash__ = object.__hash__


def _meta(x):
    if isinstance(x, MetaArray):
        return x
    raise MetaError(f"mixing a 'meta' array with {type(x).__name__}: move everything to device='meta' first")


def _ufunc_dtypes(ufunc, inputs, dtype=None):
    """The result dtypes, from NumPy itself: the ufunc on one-element stand-ins (Python numbers stay as they are,
    so NumPy's rules for them apply). Remembered by the inputs' dtypes (a Python number by its type: NumPy 2
    types them by kind, not value)."""
    key = (ufunc, dtype, *[x.dtype if hasattr(x, "dtype") else type(x) for x in inputs])
    found = _DTYPES.get(key)
    if found is None:
        found = _DTYPES[key] = _ufunc_dtypes_of(ufunc, inputs, dtype)
    return found


_DTYPES = {}


def _ufunc_dtypes_of(ufunc, inputs, dtype):
    shape = (1, 1) if ufunc is np.matmul else ()  # matmul wants matrices
    stand_ins = [np.ones(shape, x.dtype) if isinstance(x, (MetaArray, np.ndarray)) else x for x in inputs]
    with np.errstate(all="ignore"):
        result = ufunc(*stand_ins, **({"dtype": dtype} if dtype is not None else {}))
    return tuple(np.asarray(r).dtype for r in (result if isinstance(result, tuple) else (result,)))


def _index(a, key):
    """a[key]: basic indexing (ints, slices, None, ...) is a view; integer arrays make a copy, in NumPy's order."""
    key = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in key):
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        used = sum(1 for k in key if k is not None and k is not Ellipsis and not _is_bool_array(k)) + \
            sum(k.ndim for k in key if _is_bool_array(k))
        key = key[:i] + (slice(None),) * (a.ndim - used) + key[i + 1:]
    for k in key:
        if _is_bool_array(k):
            if isinstance(k, MetaArray):
                raise _unknown_count("indexing with a boolean mask")
    advanced = [i for i, k in enumerate(key) if isinstance(k, (MetaArray, np.ndarray, list))]
    shape, strides, dim, adv_dims = [], [], 0, []
    for i, k in enumerate(key):
        if k is None:
            shape.append(1)
            strides.append(0)
            continue
        if dim >= a.ndim:
            raise IndexError(f"too many indices for array: array is {a.ndim}-dimensional")
        n, s = a.shape[dim], a.strides[dim]
        if i in advanced:
            adv_dims.append(np.shape(k) if not isinstance(k, MetaArray) else k.shape)
            shape.append(None)
            strides.append(None)
        elif isinstance(k, slice):
            start, stop, step = k.indices(n)
            shape.append(len(range(start, stop, step)))
            strides.append(s * step)
        else:
            k = operator.index(k)
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {dim} with size {n}")
        dim += 1
    shape += a.shape[dim:]
    strides += a.strides[dim:]
    if not advanced:
        return a._view(shape, strides)
    index_shape = list(np.broadcast_shapes(*adv_dims))
    slots = [i for i, n in enumerate(shape) if n is None]
    rest = [n for n in shape if n is not None]
    together = slots == list(range(slots[0], slots[0] + len(slots)))
    if together:
        out = rest[:slots[0]] + index_shape + rest[slots[0]:]
    else:
        out = index_shape + rest
    return MetaArray(out, a.dtype)


def _is_bool_array(k):
    return isinstance(k, (MetaArray, np.ndarray)) and k.dtype == np.bool_


# --- the NumPy functions minigrad's ops call, by name (NumPy's __array_function__ protocol sends them here)

def _like(a, dtype=None, shape=None, **kw):
    a = _meta(a)
    dt = np.dtype(dtype) if dtype is not None else a.dtype
    shape = a.shape if shape is None else tuple(np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
    return MetaArray(shape, dt, _k_strides([a], shape, dt.itemsize) if shape == a.shape else None)


def _where(condition, x=None, y=None):
    if x is None:
        raise MetaError("np.where(condition) with one argument: the number of True entries, and so the shape, is "
                        "unknown on 'meta'")
    shape = np.broadcast_shapes(*(np.shape(v) if not isinstance(v, MetaArray) else v.shape for v in (condition, x, y)))
    dtype = np.result_type(*(v.dtype if isinstance(v, (MetaArray, np.ndarray)) else v for v in (x, y)))
    arrays = [v for v in (condition, x, y) if isinstance(v, (MetaArray, np.ndarray))]
    return MetaArray(shape, dtype, _k_strides(arrays, shape, dtype.itemsize))


def _moveaxis(a, source, destination):
    a = _meta(a)
    src = [s % a.ndim for s in np.atleast_1d(source)]
    dst = [d % a.ndim for d in np.atleast_1d(destination)]
    order = [n for n in range(a.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return a.transpose(order)


def _expand_dims(a, axis):
    a = _meta(a)
    axes = axis if isinstance(axis, tuple) else (axis,)
    ndim = a.ndim + len(axes)
    axes = sorted(x % ndim for x in axes)
    shape, strides, it = [], [], iter(zip(a.shape, a.strides))
    for i in range(ndim):
        if i in axes:
            shape.append(1)
            strides.append(0)
        else:
            n, s = next(it)
            shape.append(n)
            strides.append(s)
    return a._view(shape, strides)


def _flip(m, axis=None):
    m = _meta(m)
    axes = range(m.ndim) if axis is None else [x % m.ndim for x in np.atleast_1d(axis)]
    return m._view(m.shape, [-s if i in axes else s for i, s in enumerate(m.strides)])


def _broadcast_to(array, shape, subok=False):
    array = _meta(array)
    shape = tuple(shape)
    lead = len(shape) - array.ndim
    strides = [0] * lead + [0 if n == 1 and m != 1 else s for n, m, s in
                            zip(array.shape, shape[lead:], array.strides)]
    np.broadcast_shapes(array.shape, shape)
    return array._view(shape, strides)


def _concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    arrays = [_meta(a) for a in arrays]
    if axis is None:
        return MetaArray((sum(a.size for a in arrays),), dtype or np.result_type(*[a.dtype for a in arrays]))
    axis = axis % arrays[0].ndim
    shape = list(arrays[0].shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    return MetaArray(shape, dtype or np.result_type(*[a.dtype for a in arrays]))


def _stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    arrays = [_meta(a) for a in arrays]
    shape = list(arrays[0].shape)
    shape.insert(axis % (len(shape) + 1), len(arrays))
    return MetaArray(shape, dtype or np.result_type(*[a.dtype for a in arrays]))


def _triangle(m, k=0):
    m = _meta(m)
    return MetaArray(m.shape, m.dtype)


def _ascontiguousarray(a, dtype=None, **kw):
    a = _meta(a)
    if a.is_c_contiguous() and (dtype is None or np.dtype(dtype) == a.dtype):
        return a if a.ndim else a.reshape(1)
    return MetaArray(a.shape if a.ndim else (1,), dtype or a.dtype)


def _searchsorted(a, v, side="left", sorter=None):
    """np.searchsorted: an index for each of v's elements (an 8-bit optimizer's nearest code, optim/adamw8bit.py)."""
    _meta(a)
    return MetaArray(np.shape(v) if not isinstance(v, MetaArray) else v.shape, np.intp)


def _round(a, decimals=0, out=None):
    """np.round: a new array of a's shape and dtype, laid out as a ufunc's result (Round, ops/pointwise.py)."""
    a = _meta(a)
    return out if out is not None else MetaArray(a.shape, a.dtype, _k_strides([a], a.shape, a.itemsize))


def _count_unknown(*args, **kwargs):
    raise _unknown_count("np.nonzero, np.argwhere, np.flatnonzero")


def _result_type(*args):
    return np.result_type(*(a.dtype if isinstance(a, MetaArray) else a for a in args))


def _method(name):
    return lambda a, *args, **kw: getattr(_meta(a), name)(*args, **kw)


_FUNCTIONS = {
    "where": _where, "moveaxis": _moveaxis, "expand_dims": _expand_dims, "flip": _flip, "broadcast_to": _broadcast_to,
    "concatenate": _concatenate, "stack": _stack, "triu": _triangle, "tril": _triangle,
    "ascontiguousarray": _ascontiguousarray, "result_type": _result_type, "searchsorted": _searchsorted,
    "round": _round, "around": _round, "nonzero": _count_unknown, "argwhere": _count_unknown,
    "flatnonzero": _count_unknown,
    "ones_like": _like, "zeros_like": _like, "empty_like": _like, "full_like": lambda a, fill_value, dtype=None, **kw:
    _like(a, dtype, **kw),
    "clip": lambda a, a_min=None, a_max=None, out=None, **kw: _clip(a, a_min, a_max, out),
    "shape": lambda a: a.shape, "ndim": lambda a: a.ndim, "size": lambda a, axis=None: a.size,
    **{name: _method(name) for name in ("reshape", "transpose", "swapaxes", "squeeze", "sum", "mean", "max", "min",
                                        "amax", "amin", "prod", "var", "std", "argmax", "argmin", "all", "any",
                                        "cumsum", "cumprod", "copy", "argsort")},
}
_FUNCTIONS["amax"], _FUNCTIONS["amin"] = _method("max"), _method("min")


def _clip(a, a_min, a_max, out=None):
    if out is not None:
        return out
    bounds = [b for b in (a_min, a_max) if b is not None]
    return np.maximum(a, bounds[0]) if len(bounds) == 1 else np.minimum(np.maximum(a, bounds[0]), bounds[1])


# --- making meta arrays: the array module that backend.xp_for('meta') returns for the functions that take no array

def empty(shape, dtype=float, order="C"):
    return MetaArray(shape if isinstance(shape, (tuple, list)) else (shape,), dtype)


def zeros(shape, dtype=float, order="C"):
    return empty(shape, dtype)


ones = zeros


def full(shape, fill_value, dtype=None, order="C"):
    return empty(shape, dtype if dtype is not None else np.asarray(fill_value).dtype)


def arange(start, stop=None, step=1, dtype=None):
    n = len(range(*(start, stop, step) if stop is not None else (0, start, step)))
    return MetaArray((n,), dtype or np.arange(1).dtype)


def asarray(a, dtype=None):
    if isinstance(a, MetaArray):
        return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
    a = np.asarray(a, dtype=dtype)
    return MetaArray(a.shape, a.dtype)


def eye(n, m=None, k=0, dtype=float):
    return MetaArray((n, n if m is None else m), dtype)


def tri(n, m=None, k=0, dtype=float):
    return MetaArray((n, n if m is None else m), dtype)


def __getattr__(name):  # everything else (np.exp, np.where, np.inf, np.float32, ...) is NumPy's, which dispatches here
    return getattr(np, name)
