"""A strict stand-in for CuPy 14 on NumPy, for running minigrad's 'cuda' code paths without a GPU.

Importable as `cupy` (and `cupyx`) only when tests/cupy_standin is on sys.path: `make test`'s second pass puts it
there (PYTHONPATH) with MINIGRAD_DEVICE=cuda. It copies CuPy where CuPy differs from NumPy at the host/device
boundary, so that code which works here has a good chance on a GPU and code which silently relies on NumPy fails:

- its arrays are not numpy.ndarray; `numpy.asarray(x)` (and so np.testing on them) raises CuPy's TypeError, and
  only `.get()` and `cupy.asnumpy` copy to the host;
- `np.*` on them dispatches through __array_ufunc__ / __array_function__ to the function of the same name here,
  and fails where CuPy has none; a NumPy array given to a ufunc or function here raises "Unsupported type";
- reductions and integer indexing give 0-d arrays, never NumPy scalars; there is no __index__;
- integer-array indices out of range wrap around instead of raising (CuPy's documented difference), in
  x[idx], x[idx] = v, take, put and ufunc.at; integer scalars are still checked;
- where an assignment's integer-array index repeats, the first write wins here (CuPy leaves it undefined; NumPy
  keeps the last), so code that relies on NumPy's order fails;
- ufunc.reduce / accumulate exist for add and multiply only, and ufunc.at for the ops and dtypes CuPy supports;
- a memory pool (get_default_memory_pool: used_bytes, total_bytes, free_all_blocks, ...) counts the arrays' memory
  as CuPy's does (rounded to 512 bytes, freed blocks kept for reuse), and calls cupy.cuda.MemoryHook's hooks;
- nothing that the real CuPy lacks: every name offered is in api.json, dumped from the real wheel
  (dump_api.py says how to refresh it; tests/test_cupy_standin.py checks it).

It copies nothing about speed, streams or kernels: a pass on the stand-in says the host/device boundary holds,
not that a GPU runs the code (README, Status).
"""
import builtins as _builtins
import functools as _functools
import json as _json
import os as _os
import sys as _sys
import warnings as _warnings
import weakref as _weakref

import numpy as _np

from . import cuda
from .cuda import _pool

__version__ = "14.2.0"  # the CuPy whose semantics and names (api.json) the stand-in copies
_STANDIN = True        # how a test tells the stand-in from the real CuPy

with open(_os.path.join(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))), "api.json")) as _f:
    _API = _json.load(_f)
_NAMES = _API["modules"]["cupy"]

_IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. "
             "Please use `.get()` to construct a NumPy array explicitly.")
_SCALARS = (bool, int, float, complex, _np.generic)


def _unsupported(x):
    raise TypeError(f"Unsupported type {type(x)}")


# ----------------------------------------------------------------------------- the host arrays behind the arrays

# NOTE [stand-in ownership]: each stand-in array holds a NumPy array (_a). The one that owns a NumPy buffer is
# registered by the id of that buffer's NumPy owner, and the pool counts its bytes from its birth to its death;
# a view's .base is that owner (CuPy, as NumPy, collapses the chain), so minigrad's backend.owner() and the
# ledger see one buffer per allocation, as on a GPU.
_owners = {}  # id(NumPy owner) -> weakref to the stand-in array that owns it


def _register(obj, a):
    key = id(a)
    ptr, size, mem_size = _pool.malloc(a)

    def died(ref, key=key):
        if _owners.get(key) is ref:
            del _owners[key]
        _pool.free(ptr, size, mem_size)
    _owners[key] = _weakref.ref(obj, died)


def _from(a):
    """The stand-in array for NumPy array a (a NumPy scalar becomes a 0-d array)."""
    if type(a) is not _np.ndarray:
        a = _np.asarray(a)
    o = a
    while type(o.base) is _np.ndarray:
        o = o.base
    ref = _owners.get(id(o))
    owner = ref() if ref is not None else None
    if owner is not None and owner._a is not o:
        owner = None  # an id used again after its array died
    if owner is not None and o is a:
        return owner  # the same buffer and layout: the same array (astype(copy=False) returns self)
    obj = ndarray.__new__(ndarray)
    obj._a = a
    if o is a:
        obj._owner = None
        _register(obj, a)
        return obj
    if owner is None:  # a view of a buffer no stand-in array owns yet (NumPy made it inside a call)
        owner = ndarray.__new__(ndarray)
        owner._a, owner._owner = o, None
        _register(owner, o)
    obj._owner = owner
    return obj


def _wrap(r):
    t = type(r)
    if t is _np.ndarray or isinstance(r, _np.generic):
        return _from(r)
    if t is tuple or t is list:
        return t(_wrap(x) for x in r)
    return r


def _unwrap(x):
    """Arguments for NumPy: the stand-in's arrays as their NumPy arrays; a NumPy array is refused, as CuPy
    refuses host arrays (lists and tuples are searched, as concatenate's)."""
    t = type(x)
    if t is ndarray:
        return x._a
    if t is _np.ndarray:
        _unsupported(x)
    if t is list or t is tuple:
        return t(_unwrap(v) for v in x)
    return x


def _unwrap_kw(kwargs):
    return {k: _unwrap(v) for k, v in kwargs.items()} if kwargs else kwargs


def _kernel_arg(x):
    """An argument of a ufunc (a kernel): an array here, or a Python or NumPy scalar; anything else, a NumPy
    array or a list included, is "Unsupported type" (CuPy's _preprocess_args)."""
    if type(x) is ndarray:
        return x._a
    if isinstance(x, _SCALARS):
        return x
    _unsupported(x)


# ----------------------------------------------------------------------------- indices

def _index_parts(shape, key):
    """key for NumPy, with integer arrays (from lists, NumPy arrays or arrays here) wrapped into range as CuPy
    wraps them; returns (key, has_integer_arrays)."""
    parts = list(key) if type(key) is tuple else [key]
    arrays = False
    for i, k in enumerate(parts):
        if k is None or k is Ellipsis or type(k) is slice or isinstance(k, (int, _np.integer)) and not isinstance(
                k, (bool, _np.bool_)):
            continue
        if type(k) is ndarray:
            k = k._a
        elif isinstance(k, (list, tuple, _np.ndarray)):  # host indices are copied over, as CuPy copies them
            empty = not isinstance(k, _np.ndarray) and not len(k)
            k = _np.asarray(k)
            if empty:
                k = k.astype(_np.int32)
        elif isinstance(k, (bool, _np.bool_)):
            k = _np.asarray(k)
        else:
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or "
                             "boolean arrays are valid indices")
        if k.dtype.kind not in "biu":
            raise IndexError(f"arrays used as indices must be of integer or boolean type. (actual: {k.dtype.type})")
        arrays = arrays or k.dtype.kind != "b"
        parts[i] = k
    if not arrays:
        return tuple(parts), False
    # the axis each integer array indexes: wrap it into that axis's range
    used = sum(0 if p is None or p is Ellipsis else p.ndim if isinstance(p, _np.ndarray) and p.dtype == bool
               else 1 for p in parts)
    axis = 0
    for i, p in enumerate(parts):
        if p is None:
            continue
        if p is Ellipsis:
            axis += len(shape) - used
        elif isinstance(p, _np.ndarray) and p.dtype == bool:
            axis += p.ndim
        else:
            if isinstance(p, _np.ndarray) and axis < len(shape):
                n = shape[axis]
                if n == 0 and p.size:
                    raise IndexError("cannot do a non-empty take from an empty axes.")
                if n and p.size and (p.min() < -n or p.max() >= n):
                    parts[i] = p % n  # out of range: CuPy wraps around
            axis += 1
    return tuple(parts), True


def _first_write_wins(target, key, value):
    """target[key] = value where key has integer arrays: where an index repeats, the first write stays (CuPy's
    order is undefined; NumPy's is the last)."""
    positions = _np.arange(target.size).reshape(target.shape)[key]
    v = _np.asarray(value, dtype=target.dtype)
    extra = v.ndim - positions.ndim
    if extra > 0 and all(d == 1 for d in v.shape[:extra]):  # leading ones, as NumPy's assignment allows
        v = v.reshape(v.shape[extra:])
    v = _np.broadcast_to(v, positions.shape)
    flat = positions.reshape(-1)[::-1]
    target[_np.unravel_index(flat, target.shape)] = v.reshape(-1)[::-1]


# ----------------------------------------------------------------------------- the array

def _binary(name, reflected=False):
    def op(self, other):
        if type(other) is not ndarray and not isinstance(other, (_np.ndarray,) + _SCALARS):
            return NotImplemented
        f = _lookup(name)
        return f(other, self) if reflected else f(self, other)
    op.__name__ = name
    return op


def _inplace(name):
    def op(self, other):
        _lookup(name)(self, other, out=self)
        return self
    return op


def _method(name):
    np_method = getattr(_np.ndarray, name)

    def method(self, *args, **kwargs):
        return _wrap(np_method(self._a, *_unwrap(args), **_unwrap_kw(kwargs)))
    method.__name__ = name
    return method


class _Flags:
    def __init__(self, a):
        self.c_contiguous, self.f_contiguous = a._a.flags.c_contiguous, a._a.flags.f_contiguous
        self.owndata = a._owner is None

    def __getitem__(self, name):
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous, "OWNDATA": self.owndata}[name]


class ndarray:
    """cupy.ndarray: an array 'on the GPU' (its values in a NumPy array that only .get() hands out)."""
    __slots__ = ("_a", "_owner", "__weakref__")
    __array_priority__ = 100
    __hash__ = None

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        if memptr is not None or strides is not None:
            raise NotImplementedError("the CuPy stand-in makes new arrays only (no memptr, no strides)")
        self._a = _np.empty(shape, dtype, order=order)
        self._owner = None
        _register(self, self._a)

    # -- the boundary
    def __array__(self, dtype=None, copy=None):
        raise TypeError(_IMPLICIT)

    def get(self, stream=None, order="C", out=None, blocking=True):
        if out is not None:
            out[...] = self._a
            return out
        return _np.array(self._a, order=order, copy=True)

    def set(self, arr, stream=None):
        if not isinstance(arr, _np.ndarray):
            raise TypeError(f"Only _np.ndarray can be set to cupy.ndarray, got {type(arr)}")
        if arr.shape != self.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self.shape}, new shape: {arr.shape}")
        self._a[...] = arr

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inout = inputs
        if "out" in kwargs:
            out = kwargs["out"]
            if len(out) != 1:
                raise ValueError("The 'out' parameter must have exactly one array value")
            inout += out
            kwargs["out"] = out[0]
        if method not in ("__call__", "outer", "at", "reduce", "accumulate", "reduceat"):
            return NotImplemented
        import cupyx.scipy.special
        name = ufunc.__name__
        try:
            func = _lookup(name) or getattr(cupyx.scipy.special, name)
            if method != "__call__":
                func = getattr(func, method)
        except AttributeError:
            return NotImplemented
        for x in inout:
            if not isinstance(x, (ndarray, _np.ndarray) + _SCALARS):
                return NotImplemented
        return func(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        try:
            module = _functools.reduce(getattr, func.__module__.split(".")[1:], _module())
            mine = getattr(module, func.__name__)
        except AttributeError:
            return NotImplemented
        if mine is func:
            return NotImplemented
        if not all(issubclass(t, (ndarray, _np.ndarray)) for t in types):
            return NotImplemented
        return mine(*args, **kwargs)

    # -- what it is
    shape = property(lambda self: self._a.shape)

    @shape.setter
    def shape(self, value):
        self._a.shape = value

    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    base = property(lambda self: self._owner)
    flags = property(lambda self: _Flags(self))
    device = property(lambda self: cuda.Device(0))
    T = property(lambda self: _from(self._a.T))
    mT = property(lambda self: _from(self._a.mT))

    @property
    def data(self):
        return cuda.MemoryPointer(self._a.__array_interface__["data"][0], self._a.nbytes)

    @property
    def real(self):
        return _from(self._a.real)

    @property
    def imag(self):
        return _from(self._a.imag)

    # -- to Python
    def __len__(self):
        if not self._a.ndim:
            raise TypeError("len() of unsized object")
        return len(self._a)

    def __iter__(self):
        if not self._a.ndim:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self._a)))

    def __bool__(self):
        if self._a.size == 0:
            _warnings.warn("The truth value of an empty array is ambiguous. Returning False, but in future this will "
                          "result in an error. Use `array.size > 0` to check that an array is not empty.",
                          DeprecationWarning)
            return False
        if self._a.size == 1:
            return bool(self.get())
        raise ValueError("The truth value of an array with more than one element is ambiguous. Use a.any() or "
                         "a.all()")

    def __int__(self):
        return int(self.get())

    def __float__(self):
        return float(self.get())

    def __complex__(self):
        return complex(self.get())

    def __repr__(self):
        return repr(self.get())

    def __str__(self):
        return str(self.get())

    def __format__(self, spec):
        return format(self.get(), spec)

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        return array, (self.get(),)

    def item(self, *args):
        return self._a.item(*args)

    def tolist(self):
        return self._a.tolist()

    def tobytes(self, order="C"):
        return self._a.tobytes(order)

    # -- indexing
    def __getitem__(self, key):
        key, arrays = _index_parts(self._a.shape, key)
        if not arrays and not any(k is Ellipsis for k in key):
            key = key + (Ellipsis,)  # an integer gives a 0-d view, as in CuPy, not a NumPy scalar
        return _from(self._a[key])

    def __setitem__(self, key, value):
        key, arrays = _index_parts(self._a.shape, key)
        if type(value) is ndarray:
            value = value._a
        elif isinstance(value, _np.ndarray):
            value = _np.array(value)  # a host array is copied over (CuPy does it too)
        if arrays:
            _first_write_wins(self._a, key, value)
        else:
            self._a[key] = value

    def take(self, indices, axis=None, out=None):
        if type(indices) is not ndarray and not isinstance(indices, (int, _np.integer)):
            indices = array(indices)
        return take(self, indices, axis=axis, out=out)

    def put(self, indices, values, mode="wrap"):
        return put(self, indices, values, mode)

    def scatter_add(self, slices, value):
        _warnings.warn("`ndarray.scatter_add` is deprecated. Please use `cupy.add.at` instead.", DeprecationWarning)
        add.at(self, slices, value)

    # -- the methods NumPy's arrays have, on the values here
    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        if not copy and _np.dtype(dtype) == self._a.dtype:
            return self
        return _from(self._a.astype(dtype, order=order, copy=True))

    def argsort(self, axis=-1, kind=None):
        return _from(_np.argsort(self._a, axis=axis, kind="stable"))  # CuPy always sorts stably

    def sort(self, axis=-1, kind=None):
        self._a.sort(axis=axis, kind="stable")

    def dot(self, b, out=None):
        return dot(self, b, out=out)

    for _name in ("all", "any", "argmax", "argmin", "argpartition", "choose", "clip", "compress", "conj", "conjugate",
                  "copy", "cumprod", "cumsum", "diagonal", "fill", "flatten", "max", "mean", "min", "nonzero",
                  "partition", "prod", "ravel", "repeat", "reshape", "round", "searchsorted", "squeeze", "std",
                  "sum", "swapaxes", "trace", "transpose", "var", "view"):
        locals()[_name] = _method(_name)

    # -- operators, through this module's ufuncs (as CuPy's go through its own)
    for _name, _uf in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("truediv", "true_divide"),
                       ("floordiv", "floor_divide"), ("mod", "remainder"), ("pow", "power"),
                       ("matmul", "matmul"), ("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "bitwise_xor"),
                       ("lshift", "left_shift"), ("rshift", "right_shift")):
        locals()[f"__{_name}__"] = _binary(_uf)
        locals()[f"__r{_name}__"] = _binary(_uf, reflected=True)
        if _name != "matmul":
            locals()[f"__i{_name}__"] = _inplace(_uf)
    for _name, _uf in (("eq", "equal"), ("ne", "not_equal"), ("lt", "less"), ("le", "less_equal"),
                       ("gt", "greater"), ("ge", "greater_equal")):
        locals()[f"__{_name}__"] = _binary(_uf)
    del _name, _uf

    def __divmod__(self, other):
        return _lookup("divmod")(self, other)

    def __neg__(self):
        return negative(self)

    def __pos__(self):
        return positive(self)

    def __abs__(self):
        return absolute(self)

    def __invert__(self):
        return invert(self)


def _module():
    return _sys.modules[__name__]


# ----------------------------------------------------------------------------- ufuncs

# ufunc.at: the ops and dtypes CuPy's scatter kernels support (cupy/_core/_routines_indexing.pyx)
_I32 = (_np.int32, _np.uint32)
_AT = {"add": (_np.int32, _np.int64, _np.float16, _np.float32, _np.float64, _np.uint32, _np.uint64),
       "subtract": _I32,
       "maximum": (_np.int32, _np.int64, _np.float32, _np.float64, _np.uint32, _np.uint64),
       "minimum": (_np.int32, _np.int64, _np.float32, _np.float64, _np.uint32, _np.uint64),
       "bitwise_and": (_np.int32, _np.int64, _np.uint32, _np.uint64),
       "bitwise_or": (_np.int32, _np.int64, _np.uint32, _np.uint64),
       "bitwise_xor": (_np.int32, _np.int64, _np.uint32, _np.uint64)}


class ufunc:
    """cupy.ufunc: a NumPy ufunc whose arguments must be arrays here or scalars."""

    def __init__(self, np_ufunc, name=None, prefix="cupy_"):
        self._np = np_ufunc
        self.name = self.__name__ = prefix + (name or np_ufunc.__name__)
        self.nin, self.nout, self.nargs = np_ufunc.nin, np_ufunc.nout, np_ufunc.nargs
        self.types = np_ufunc.types
        self._scatter_op = (name or np_ufunc.__name__) if (name or np_ufunc.__name__) in _AT else None

    def __repr__(self):
        return f"<ufunc '{self.name}'>"

    def __call__(self, *args, out=None, **kwargs):
        args = [_kernel_arg(a) for a in args]
        if "where" in kwargs:
            kwargs["where"] = _kernel_arg(kwargs["where"])
        if out is not None:
            if type(out) is not ndarray:
                raise TypeError(f"Output arguments must be cupy.ndarray, got {type(out)}")
            self._np(*args, out=out._a, **kwargs)
            return out
        return _wrap(self._np(*args, **kwargs))

    def at(self, a, indices, b=None):
        if self._scatter_op is None:
            raise NotImplementedError(f"`{self.name}.at` is not supported yet")
        if type(a) is not ndarray:
            raise TypeError(f"Argument 'a' has incorrect type (expected cupy.ndarray, got {type(a).__name__})")
        v = b._a if type(b) is ndarray else _np.asarray(b, dtype=a.dtype)
        v = v.astype(a.dtype, copy=False)
        if not issubclass(v.dtype.type, _AT[self._scatter_op]):
            names = ", ".join(_np.dtype(t).name for t in _AT[self._scatter_op])
            raise TypeError(f"cupy.{self._scatter_op}.at only supports {names} as data type")
        key, _ = _index_parts(a.shape, indices)
        self._np.at(a._a, key, v)

    def reduce(self, array, axis=0, dtype=None, out=None, keepdims=False):
        if self._np is _np.add:
            return array.sum(axis, dtype=dtype, out=out, keepdims=keepdims)
        if self._np is _np.multiply:
            return array.prod(axis, dtype=dtype, out=out, keepdims=keepdims)
        raise NotImplementedError(f"`{self.name}.reduce` is not supported yet")

    def accumulate(self, array, axis=0, dtype=None, out=None):
        if self._np is _np.add:
            return array.cumsum(axis, dtype=dtype, out=out)
        if self._np is _np.multiply:
            return array.cumprod(axis, dtype=dtype, out=out)
        raise NotImplementedError(f"`{self.name}.accumulate` is not supported yet")

    def reduceat(self, array, indices, axis=0, dtype=None, out=None):
        if self._np is not _np.add:
            raise NotImplementedError(f"`{self.name}.reduceat` is not supported yet")
        return _wrap(_np.add.reduceat(_kernel_arg(array), _unwrap(indices), axis=axis, dtype=dtype))

    def outer(self, A, B, **kwargs):
        return self(array(A).reshape(A.shape + (1,) * B.ndim), array(B).reshape((1,) * A.ndim + B.shape), **kwargs)


class _GUFunc:
    """cupy.matmul: a generalized ufunc (not a cupy.ufunc)."""

    def __init__(self, np_func):
        self._np, self.__name__ = np_func, np_func.__name__

    def __call__(self, a, b, out=None, **kwargs):
        if type(a) is not ndarray or type(b) is not ndarray:
            _unsupported(b if type(a) is ndarray else a)
        if out is not None:
            self._np(a._a, b._a, out=out._a, **kwargs)
            return out
        return _wrap(self._np(a._a, b._a, **kwargs))


# ----------------------------------------------------------------------------- functions

# functions that copy host data over (the only ones that take a NumPy array)
def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False):
    if type(obj) is ndarray:
        a = _np.array(obj._a, dtype=dtype, copy=copy, order=order, ndmin=ndmin)
        return obj if a is obj._a else _from(a)
    host = _np.array(_host_values(obj), dtype=dtype, order=order, ndmin=ndmin)
    if host.dtype == object:
        raise ValueError("Unsupported dtype object")
    return _from(host)


def _host_values(obj):
    if isinstance(obj, (list, tuple)):
        return type(obj)(_host_values(v) for v in obj)
    if type(obj) is ndarray:
        return obj.get()  # a list of arrays here: copied element by element, as CuPy does
    return obj


def asarray(a, dtype=None, order=None, *, blocking=False):
    return array(a, dtype=dtype, copy=None, order=order or "K")


def asanyarray(a, dtype=None, order=None):
    return asarray(a, dtype, order)


def ascontiguousarray(a, dtype=None):
    if type(a) is ndarray:
        return _from(_np.ascontiguousarray(a._a, dtype=dtype))
    return asarray(a, dtype, order="C")


def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    if type(a) is ndarray:
        return a.get(stream=stream, order=order, out=out, blocking=blocking)
    host = _np.asarray(a, order=order)
    if out is not None:
        out[...] = host
        return out
    return host


def get_array_module(*args):
    return _module() if any(type(a) is ndarray for a in args) else _np


def get_default_memory_pool():
    return _pool.default


def get_default_pinned_memory_pool():
    return _pool.pinned


def take(a, indices, axis=None, out=None):
    """a.take(indices, axis): indices out of range wrap around, as everywhere in CuPy."""
    idx = indices._a if type(indices) is ndarray else _np.asarray(indices)
    n = a.size if axis is None else a.shape[axis]
    r = _np.take(_kernel_arg(a), idx, axis=axis, mode="wrap" if n else "raise")
    if out is not None:
        out._a[...] = r
        return out
    return _wrap(r)


def put(a, ind, v, mode="wrap"):
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError("clipmode not understood")
    _np.put(_kernel_arg(a), _unwrap(ind), _unwrap(v), mode="wrap" if mode == "raise" else mode)


def argsort(a, axis=-1, kind=None):
    return a.argsort(axis=axis, kind=kind)


def _function(name, np_func):
    def f(*args, **kwargs):
        out = kwargs.get("out")
        r = np_func(*_unwrap(args), **_unwrap_kw(kwargs))
        return out if type(out) is ndarray else _wrap(r)
    f.__name__ = f.__qualname__ = name
    f.__module__ = __name__
    return f


_OWN = {"ndarray", "ufunc", "array", "asarray", "asanyarray", "ascontiguousarray", "asnumpy", "get_array_module",
        "get_default_memory_pool", "get_default_pinned_memory_pool", "take", "put", "argsort", "cuda", "matmul"}
matmul = _GUFunc(_np.matmul)


def _make(name):
    """cupy.<name> from NumPy's of the same name, as the real CuPy's kind of object (api.json)."""
    kind = _NAMES.get(name)
    np_obj = getattr(_np, name, None)
    if kind is None or np_obj is None:
        return None
    if kind == "numpy":
        return np_obj
    if kind == "ufunc" and isinstance(np_obj, _np.ufunc):
        return ufunc(np_obj, name)
    if kind == "function" and callable(np_obj):
        return _function(name, np_obj)
    return None


_made = {}  # name -> what _make gave (None: nothing)


def _lookup(name):
    """cupy.<name>: the stand-in's own, or made from NumPy's (and kept)."""
    if name in _OWN:
        return globals()[name]
    if name not in _made:
        _made[name] = _make(name)
    return _made[name]


# The ufuncs and NumPy's own objects are made now, and set as this module's globals (fast to reach) unless their
# name is a builtin's (bool, abs, round, max, ...), which this module's code must still see as the builtin: those
# come from __getattr__.
for _n, _k in _NAMES.items():
    if _k in ("ufunc", "numpy") and _n not in _OWN and _lookup(_n) is not None and not hasattr(_builtins, _n):
        globals()[_n] = _made[_n]
del _n, _k
newaxis = None


def __getattr__(name):
    value = _lookup(name) if not name.startswith("__") else None
    if value is None:
        raise AttributeError(f"module 'cupy' has no attribute {name!r} (the CuPy stand-in offers only what the real "
                             f"CuPy {__version__} has and NumPy can do: tests/cupy_standin/api.json)")
    return value


def __dir__():
    return sorted(set(n for n in globals() if not n.startswith("_")) | set(n for n in _NAMES if _lookup(n) is not None))


