"""What a user passes to the Tensor's methods and the factories, checked and made into what ops read: a dtype,
.to()'s device and dtype, a new tensor's data, a number, a shape, an index key (t[key], t[key] = v), a bool mask,
an integer index (index_select, gather). Below tensor.py and methods.py, which both use them; a tensor among the
arguments is recognised as a `Variable` (tape.py), the protocol the Tensor keeps.
"""
import functools

import numpy as np

from .. import backend
from ..ops import ShapeError
from .promotion import kind, promote_types, result_type
from .tape import Variable, _values

# ----------------------------------------------------------------------------- dtypes

FLOAT_DTYPES = tuple(np.dtype(d) for d in ("float16", "float32", "float64")) + (backend.BFLOAT16,)  # NOTE [bfloat16]
DTYPES = FLOAT_DTYPES + tuple(np.dtype(d) for d in ("int8", "int16", "int32", "int64", "uint8", "bool"))


def check_float(op, t, also=""):
    """What PyTorch computes in floating point only (mean, var, softmax, layer_norm, gelu, the losses, ...) refuses an
    integer or bool tensor, as PyTorch does; exp, log, sin, ... make it float32 instead (Tensor._floating)."""
    if not backend.is_float(t.dtype):
        raise TypeError(f"{op}: needs a floating-point input, got {t.dtype} of shape {tuple(t.shape)}; convert it "
                        f"with .float() first{also}")


def check_device(op, *tensors):
    """Tensors that one op combines outside `apply` (which checks its inputs itself: tape.py), on one device: a
    comparison, an in-place write, a loss's targets. Otherwise the op would raise CuPy's words, or run silently."""
    devices = sorted({t.device for t in tensors if isinstance(t, Variable)})
    if len(devices) > 1:
        raise RuntimeError(f"{op}: inputs are on different devices ({' and '.join(devices)}); move them to one "
                           f"device with .to(device) first")


def normalize_dtype(dtype):
    """'float32', np.float32 or np.dtype('float32') -> np.dtype('float32'); refuses what minigrad lacks."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"unknown dtype {dtype!r}: minigrad knows {', '.join(d.name for d in DTYPES)}") from None
    if dt not in DTYPES:
        raise TypeError(f"dtype {dt.name} is not supported: minigrad knows {', '.join(d.name for d in DTYPES)}")
    return dt


def _is_dtype_name(name):
    try:
        return np.dtype(name) in DTYPES
    except TypeError:
        return False


def check_cuda_device(who, device):
    """.cuda(device)'s argument, for a tensor or a module: minigrad has one GPU device, 'cuda'."""
    if device is not None and str(device) not in ("0", "cuda", "cuda:0"):
        raise ValueError(f"{who}: minigrad has one GPU device, 'cuda'; got device={device!r}")


def parse_to_args(args, device=None, dtype=None):
    """.to()'s arguments: positional ones are a device if they name one, else a dtype. Normalized."""
    for a in args:
        if isinstance(a, str) and a.split(":")[0] in backend.DEVICES:
            device = a
        elif isinstance(a, str) and not _is_dtype_name(a):
            raise backend.DeviceError(f"to: unknown device {a!r}, and not a dtype either: devices are "
                                      f"{', '.join(backend.DEVICES)}; dtypes are {', '.join(d.name for d in DTYPES)}")
        else:
            dtype = a
    return (None if device is None else backend.normalize_device(device),
            None if dtype is None else normalize_dtype(dtype))


def _array_of(data, dtype=None, device=None):
    """The array a new tensor holds: data (a list, number, NumPy/CuPy array or Tensor) copied onto device, as dtype
    (by default the data's; Python floats become float32, as in PyTorch). Tensor(...) and tensor() (factories.py)."""
    if isinstance(data, Variable):
        data = data._data
    device = backend.normalize_device(device)
    if isinstance(data, np.generic):  # a NumPy scalar keeps its dtype, as torch.tensor(np.float64(1.0)) does
        data = np.asarray(data)
    if backend.is_array(data):
        array = backend.to_device(data, device)
        dt = normalize_dtype(dtype) if dtype is not None else normalize_dtype(array.dtype)
        return array.astype(dt, copy=True)
    if isinstance(data, (list, tuple)) and _holds_tensor(data):  # torch.tensor([loss1, loss2]): their numbers
        dtypes = []
        data = _numbers(data, dtypes)
        dtype = dtype or functools.reduce(promote_types, dtypes)  # a float's dtype beside ints, as PyTorch
    try:
        host = np.asarray(data)
    except ValueError:  # NumPy's "inhomogeneous shape"
        raise ShapeError(f"tensor: the nested lists have different lengths, so they make no shape: {data!r:.60}") \
            from None
    if host.dtype == object:
        raise TypeError(f"tensor: cannot make a tensor from {type(data).__name__} {data!r:.60}")
    if dtype is None:  # Python floats become float32, as in PyTorch
        dtype = "float32" if host.dtype.kind == "f" else host.dtype
    return backend.to_device(host.astype(normalize_dtype(dtype)), device)


def _holds_tensor(data):
    return any(isinstance(x, Variable) or isinstance(x, (list, tuple)) and _holds_tensor(x) for x in data)


def _numbers(data, dtypes):
    """A nested list's one-element tensors as their numbers, as torch.tensor reads them; each element's dtype (a
    Python float's float32, an int's int64) added to `dtypes`."""
    if isinstance(data, (list, tuple)):
        return [_numbers(x, dtypes) for x in data]
    if isinstance(data, Variable):
        if data._data.size != 1:
            raise ValueError(f"tensor: only one element tensors can be converted to Python scalars (as PyTorch says), "
                             f"got one of shape {data._data.shape} in the list; mg.stack(tensors) joins tensors")
        dtypes.append(data._data.dtype)
        return _values(data, "tensor").item()
    dtypes.append(np.asarray(data).dtype if not isinstance(data, float) else np.dtype("float32"))
    return data


# ----------------------------------------------------------------------------- numbers, shapes, indices

def _is_number(x):
    return isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating))


def _compared(op, t, other):
    """A comparison's operands as arrays in torch.result_type's dtype (NOTE [type promotion], promotion.py): bfloat16
    beside float16 compared in float32, float16 beside a 0-d float64 in float16, a number beside floats rounded to
    their dtype (bfloat16 == 0.1 as PyTorch's). An integer number stays NumPy's, which compares it exactly."""
    x = _values(t, op)
    if not (isinstance(other, Variable) or _is_number(other)):
        return x, other
    target = result_type(op, (t, other), refuse=False)  # a bool result: no float64 memory to refuse
    if isinstance(other, Variable):
        other = _values(other, op).astype(target, copy=False)
    elif kind(target) == 2:
        other = _number_array(other, x, target)
    return x.astype(target, copy=False), other


def _number_array(x, like, dtype):
    """The number x as a 0-d array of this dtype on like's device: one too big for float16 is inf, without NumPy's
    overflow warning (PyTorch gives none; a mul or div that takes it as written never reads this copy)."""
    with np.errstate(over="ignore"):
        return backend.xp_of(like).asarray(x, dtype=dtype)


def exact_number(op_cls, a, b):
    """{'number': (side, value)} for a Python number, or a 0-d tensor of another dtype (whose value PyTorch's CPU
    kernels read as a number's), on a side where op_cls takes it as written, beside a float16 or bfloat16 tensor
    with dims (NOTE [a number beside 2-byte floats], ops/pointwise.py); else {}."""
    side = 1 if _read_as_number(b, a) else 0 if _read_as_number(a, b) else None
    if side in op_cls.takes_number and backend.accumulator((b if side == 0 else a).dtype) is not None:
        x = (a, b)[side]
        return {"number": (side, _values(x, op_cls.name).item() if isinstance(x, Variable) else x)}
    return {}


def _read_as_number(x, other):
    return _is_number(x) or (isinstance(x, Variable) and x.ndim == 0 and isinstance(other, Variable) and other.ndim > 0
                             and x.dtype not in (other.dtype, np.dtype(bool)) and x.device != "meta")


def _shape(shape):
    """Sizes, or one tuple or list of them (reshape(2, 3) or reshape((2, 3))), as a tuple."""
    return tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)


def check_sizes(op, shape):
    """The sizes of something new, given as PyTorch's factories take them (zeros(2, 3) or zeros((2, 3))), as a tuple,
    each checked to be an int >= 0 as PyTorch checks them: a new tensor's shape (zeros, eye, new_full, ...), repeat's
    counts, a layer's dims (nn.Linear's features, nn.LayerNorm(8) or nn.LayerNorm((4, 8))). A refusal is a TypeError
    or a ShapeError that names `op`."""
    shape = _shape(shape)
    for n in shape:
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"{op}: sizes must be ints, got {n!r} of type {type(n).__name__} in {shape}")
        if n < 0:
            raise ShapeError(f"{op}: sizes must be >= 0, got {n} in {shape}")
    return shape


def _index_key(key, t):
    """A tensor index -> a tuple of ints, slices, None, Ellipsis and integer arrays on t's device, every integer
    checked against its dimension (_check_bounds)."""
    key = key if isinstance(key, tuple) else (key,)
    out, raw = [], []
    for k in key:
        if isinstance(k, (np.integer, np.bool_)):  # a NumPy scalar is a number, not a host array
            k = k.item()
        if isinstance(k, Variable):
            k = _values(k, "index")
        elif isinstance(k, (list, tuple, np.ndarray)):  # a tuple inside the key is a list, as in PyTorch and NumPy
            a = np.asarray(k)
            if not a.size and not isinstance(k, np.ndarray):
                a = a.astype(np.int64)  # [] or (): no index (as PyTorch and NumPy index), not float64's nothing
            k = backend.to_device(a, t.device)
        if getattr(k, "ndim", None) == 0 and k.dtype == bool:  # a 0-d mask is a bool: a new dim of size 1 or 0
            k = bool(k)
        raw.append(k)
        if hasattr(k, "dtype"):
            if k.dtype == bool:
                _check_mask_fits(raw, key[len(raw):], t)
                out.extend(k.nonzero())  # a mask is the integer arrays of its True positions
                continue
            if k.dtype.kind not in "iu":
                raise IndexError(f"index: tensors used as indices must be integer or bool, got {k.dtype}")
            if backend.device_of(k) != t.device:
                raise RuntimeError(f"index: the index is on {backend.device_of(k)} but the tensor is on {t.device}")
        elif not (k is None or k is Ellipsis or isinstance(k, (int, slice))):
            raise IndexError(f"index: unsupported index {k!r} of type {type(k).__name__}")
        out.append(k)
    _check_bounds(out, t.shape)
    return tuple(out)


def _check_bounds(key, shape):
    """Every integer and integer array of an index key within its dimension, on every device, with PyTorch's
    IndexError: CuPy wraps an integer array's indices that are out of range around instead of raising (its
    documented difference from NumPy), so on a GPU x[idx] would read, and x[idx] = v write, other rows unseen."""
    taken = sum(k is not None and k is not Ellipsis and not isinstance(k, bool) for k in key)
    dim = 0
    for k in key:
        if k is Ellipsis:
            dim += len(shape) - taken
            continue
        if k is None or isinstance(k, bool) or dim >= len(shape):  # (bool: a new axis, as None; too many
            continue                                                # indices: the op's own IndexError says so)
        n = shape[dim]
        if isinstance(k, int):
            bad = k if not -n <= k < n else None
        elif isinstance(k, slice) or not k.size or backend.is_meta(k):  # a meta index has no values to check
            bad = None
        else:
            lo, hi = int(k.min()), int(k.max())
            bad = lo if lo < -n else hi if hi >= n else None
        if bad is not None:
            raise IndexError(f"index: index {bad} is out of bounds for dimension {dim} with size {n} (tensor of "
                             f"shape {tuple(shape)})")
        dim += 1


def _check_mask_fits(before, after, t):
    """A bool mask must match the dims it indexes (NumPy and PyTorch raise IndexError; its integer
    positions alone would quietly pick other elements)."""
    probe = backend.xp_of(t._data).broadcast_to(backend.xp_of(t._data).zeros((), dtype=bool), t.shape)
    key = tuple(before) + tuple(k._data if isinstance(k, Variable) else k for k in after)
    try:
        probe[key]  # a zero-stride view: NumPy checks the shapes at almost no cost
    except IndexError as e:
        raise IndexError(f"index: {e} (tensor of shape {t.shape}, mask of shape {before[-1].shape})") from None


def _bool_array(mask, like, op):
    m = _values(mask, op) if isinstance(mask, Variable) else backend.to_device(np.asarray(mask), like.device)
    if m.dtype != bool:
        raise TypeError(f"{op}: the mask must be a bool tensor, got {m.dtype}; compare to make one (t > 0)")
    if backend.device_of(m) != like.device:
        raise RuntimeError(f"{op}: the mask is on {backend.device_of(m)} but the tensor is on {like.device}")
    return m


def _integer_index(op, index, like):
    """An index (Tensor, list or array) as an integer array on like's device."""
    a = _values(index, op) if isinstance(index, Variable) else backend.to_device(np.asarray(index), like.device)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{op}: the index must be an integer tensor, got {a.dtype}")
    if backend.device_of(a) != like.device:
        raise RuntimeError(f"{op}: the index is on {backend.device_of(a)} but the tensor is on {like.device}")
    return a


def _check_in_range(op, index, n, where_):
    if index.size and not backend.is_meta(index):  # a meta index has no values to check
        lo, hi = int(index.min()), int(index.max())
        if lo < 0 or hi >= n:
            raise IndexError(f"{op}: index out of range: the indices span [{lo}, {hi}], but {where_} has {n} "
                             f"entries (0 to {n - 1})")


# ----------------------------------------------------------------------------- NumPy's names in reductions

# the reductions that take PyTorch's dtype=: the input is converted to it first (differentiably), as there
_TAKE_DTYPE = {"sum": None, "prod": None, "cumsum": None, "mean": "float", "softmax": "float", "log_softmax": "float"}


def dim_alias(method):
    """A reduction that also takes NumPy's names, as PyTorch's do: axis= for dim=, keepdims= for keepdim=
    (x.argmax(axis=1), x.sum(axis=0, keepdims=True)); both names at once is a TypeError, as in PyTorch. And PyTorch's
    dtype= where it has one (_TAKE_DTYPE: x.sum(dtype=torch.float64), x.softmax(-1, dtype=...), the input converted
    first; one that needs a float refuses another dtype, as PyTorch's)."""
    name_ = method.__name__
    takes_dtype = name_ in _TAKE_DTYPE

    @functools.wraps(method)
    def reduction(self, *args, **kwargs):
        for alias, name in (("axis", "dim"), ("keepdims", "keepdim")):
            if alias in kwargs:
                if name in kwargs:
                    raise TypeError(f"{name_}: got both {name}= and its alias {alias}=; give one")
                kwargs[name] = kwargs.pop(alias)
        dtype = kwargs.pop("dtype", None) if takes_dtype else None
        if takes_dtype and name_ in ("softmax", "log_softmax") and len(args) == 2:  # softmax(dim, dtype), as torch's
            args, dtype = args[:1], args[1]
        if dtype is not None:
            dtype = normalize_dtype(dtype)
            if _TAKE_DTYPE[name_] == "float" and not backend.is_float(dtype):
                raise TypeError(f"{name_}: dtype must be a float dtype, got {dtype.name} (as in PyTorch)")
            self = self.to(dtype)
        return method(self, *args, **kwargs)
    return reduction
