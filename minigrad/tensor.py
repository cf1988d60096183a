"""The Tensor and the tape: how ops get recorded, and how backward walks them in reverse.

An op applied to tensors, with grad mode on and some input requiring grad, becomes a record:
the op instance (ops.py) with its saved arrays and an edge per input to the record that made
that input (or to the leaf tensor itself). Records point only at records and leaves, never at
intermediate tensors, so an intermediate's array lives only as long as the user holds it or an
op saved it: saved arrays are exactly the activation memory.

Follow one saved array: an op's forward names it (`save_for_backward`, ops.py); `apply` hands the
record to `keep`, the one choke point that keeps or drops it and tells the profiler; `_run_tape`
reads it in the op's backward and then `release` frees it.

Read next: functional.py (softmax, cross_entropy, ...), then nn.py and optim.py.
"""
import functools
import itertools
import math
import operator
import weakref

import numpy as np

from . import backend, ops
from .random import generator

# ----------------------------------------------------------------------------- the tape's switches

class _Switches:
    """Everything the tape's behaviour depends on, in one place. Only the context managers below set
    the first four; `backward` sets `taken`; each has a public query."""
    grad_enabled = True  # record ops (no_grad turns it off)
    keep_saved = True    # records keep what their ops saved (checkpoint's forward turns it off)
    recomputing = False  # a checkpoint is re-running its forward during backward
    profiler = None      # the active mg.profile: the tape reports to it
    taken = None         # the running backward's gradient arrays that someone owns (NOTE [who owns a gradient])


_on = _Switches()


class _Mode:
    """Sets one switch for a `with` block (or a decorated function) and restores it after, even on error."""
    switch = None

    def __init__(self, value):
        self.value, self.prev = value, []  # a stack: the same object may be entered again inside itself

    def __enter__(self):
        self.prev.append(getattr(_on, self.switch))
        setattr(_on, self.switch, self.value)
        return self

    def __exit__(self, *exc):
        setattr(_on, self.switch, self.prev.pop())

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_Mode):
    """Turn recording off: ops run, nothing is recorded or saved."""
    switch = "grad_enabled"

    def __init__(self):
        super().__init__(False)


class enable_grad(_Mode):
    """Turn recording back on inside a no_grad block."""
    switch = "grad_enabled"

    def __init__(self):
        super().__init__(True)


class keep_saved(_Mode):
    """keep_saved(False): records are made, but keep none of the arrays their ops saved. A checkpoint's
    forward runs this way: it learns which tensors the segment reaches and keeps nothing."""
    switch = "keep_saved"


class recomputing(_Mode):
    """A checkpoint re-running its forward during backward (the profiler counts its FLOPs as
    'recompute'; BatchNorm does not update its running statistics a second time)."""
    switch = "recomputing"

    def __init__(self):
        super().__init__(True)


class profiling(_Mode):
    """Report every op, saved array, gradient and new tensor to `profiler` (mg.profile enters this)."""
    switch = "profiler"


def is_grad_enabled():
    return _on.grad_enabled


def is_keeping_saved():
    return _on.keep_saved


def is_recomputing():
    return _on.recomputing


def active_profiler():
    return _on.profiler


# ----------------------------------------------------------------------------- dtypes

FLOAT_DTYPES = tuple(np.dtype(d) for d in ("float16", "float32", "float64"))
DTYPES = FLOAT_DTYPES + tuple(np.dtype(d) for d in ("int8", "int16", "int32", "int64", "uint8", "bool"))


def normalize_dtype(dtype):
    """'float32', np.float32 or np.dtype('float32') -> np.dtype('float32'); refuses what minigrad lacks."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"unknown dtype {dtype!r}: minigrad knows {', '.join(d.name for d in DTYPES)}") from None
    if dt not in DTYPES:
        raise TypeError(f"dtype {dt.name} is not supported: minigrad knows {', '.join(d.name for d in DTYPES)}")
    return dt


# ----------------------------------------------------------------------------- the tape

_seq = itertools.count()


def apply(op_cls, *inputs, **attrs):
    """Run one op on tensors and, when recording, keep it on the tape as the output's record."""
    op = op_cls()
    arrays = [t._data for t in inputs]
    if len(arrays) > 1 and op.same_dtype:
        _check_same_device_and_dtype(op_cls.name, arrays)
    record = _on.grad_enabled and any(t._requires_grad for t in inputs)
    if _on.profiler is not None:
        _on.profiler.on_inputs(inputs)
    op.needs_input_grad = tuple(t._requires_grad for t in inputs) if record else (False,) * len(inputs)
    try:
        out = op.forward(*arrays, **attrs)
    except (ValueError, IndexError, TypeError) as e:
        raise _explain(op_cls.name, e, arrays) from None
    if isinstance(out, np.generic):
        out = np.asarray(out)
    if record and out.dtype.kind != "f":  # integer and bool results have no gradient (a cast to int64)
        record = False
    t = _wrap(out, record)
    if record:
        op.next = tuple(i._ctx if i._ctx is not None else (i if i._requires_grad else None) for i in inputs)
        op.seq = next(_seq)
        t._ctx = op
        keep(op)
    if _on.profiler is not None:
        _on.profiler.on_forward(op, inputs, out)
    return t


def keep(record):
    """NOTE [one choke point]: every array a record keeps for its backward passes through here.

    The op's forward named what its backward will read (ops.Op.save_for_backward); this decides
    whether the record keeps it (not inside a checkpoint's forward, which recomputes it later)
    and tells the profiler, which counts it as activation memory until `release`."""
    if not _on.keep_saved:
        # what it would have kept, by metadata only: a checkpoint's recompute must keep the same
        record.saved_meta = tuple((a.shape, a.dtype, backend.device_of(a)) for a in record.saved if backend.is_array(a))
        record.saved = ()
    elif _on.profiler is not None and record.saved:
        _on.profiler.on_save(record)


def release(record):
    """NOTE [memory drains]: drop a record's saved arrays once its backward has run, so that activation
    memory falls during backward as it rose during forward."""
    if _on.profiler is not None:
        _on.profiler.on_release(record)  # first: while the arrays still exist
    record.saved = ()
    record.released = True


def _explain(name, e, arrays):
    """NumPy's error from inside an op, restated with the op's name, shapes, dtype and device."""
    if str(e).startswith(name):
        return e
    if "broadcast" in str(e) and len(arrays) == 2:
        return ValueError(f"{name}: shapes {arrays[0].shape} and {arrays[1].shape} do not broadcast: "
                          f"compared from the right, each pair of dims must be equal or one of them 1. "
                          f"Reshape one of them (e.g. .reshape(...) to add a size-1 dim) first")
    shapes = ", ".join(str(a.shape) for a in arrays)
    kind = next(k for k in (IndexError, ValueError, TypeError) if isinstance(e, k))  # not NumPy's subclasses
    return kind(f"{name}: {e} (input shapes {shapes}, dtype {arrays[0].dtype}, device {backend.device_of(arrays[0])})")


def _check_same_device_and_dtype(name, arrays):
    first = arrays[0]
    for a in arrays[1:]:
        if type(a) is not type(first):
            devices = sorted({backend.device_of(x) for x in arrays})
            raise RuntimeError(f"{name}: inputs are on different devices ({' and '.join(devices)}); "
                               f"move them to one device with .to(device) first")
        if a.dtype != first.dtype:
            dtypes = sorted({x.dtype.name for x in arrays})
            raise TypeError(f"{name}: inputs have different dtypes ({' and '.join(dtypes)}); minigrad does not "
                            f"promote silently: convert one with .to('{first.dtype.name}') first")


def mark():
    """A number below every record made from now on: records_since(out, mark()) finds what came after."""
    return next(_seq)


def records_since(out, start=-1):
    """The records that tensor `out` (or each tensor of a list) depends on, made after `start` (all by default)."""
    found, seen = [], set()
    stack = [t._ctx for t in (out if isinstance(out, (list, tuple)) else [out]) if t._ctx is not None]
    while stack:
        op = stack.pop()
        if op in seen or op.seq <= start:
            continue
        seen.add(op)
        found.append(op)
        stack.extend(n for n in op.next if isinstance(n, ops.Op))
    return found


def backward(root, gradient=None, retain_graph=False):
    """Backpropagate from `root` into every leaf that requires grad (Tensor.backward)."""
    if not root._requires_grad:
        raise RuntimeError("backward: this tensor does not require grad and has no record on the tape. "
                           "Did you create the weights with requires_grad=True, or compute it under no_grad()?")
    if gradient is None:
        if root._data.size != 1:
            raise RuntimeError(f"backward: a gradient can be implied only for a scalar output, but this tensor has "
                               f"shape {root.shape}. Reduce it first (.sum() or .mean()), or pass gradient= a "
                               f"tensor of shape {root.shape}")
        g = backend.xp_of(root._data).ones_like(root._data)
    else:
        g = gradient._data if isinstance(gradient, Tensor) else gradient
        if g.shape != root.shape:
            raise ValueError(f"backward: gradient of shape {g.shape} does not match the output's shape {root.shape}")
        _check_same_device_and_dtype("backward", [root._data, g])
    outer = _on.taken  # a backward inside a backward (checkpoint's recompute) shares the outer's set
    _on.taken = taken = outer if outer is not None else set()
    taken.add(id(g))  # NOTE [who owns a gradient]: arrays that a .grad or someone else already holds
    try:
        if root._ctx is None:
            _accumulate(root, g, taken)
        else:
            _run_tape([root], [g], retain_graph, taken)
    finally:
        _on.taken = outer


def backward_within(roots, gradients, start):
    """Backpropagate from several tensors at once through the records made after `start` only: a
    checkpoint's recompute (checkpoint.py, NOTE [checkpoint sums]). Leaves get their .grad as usual; a
    record made before `start` does not run: its gradients come back unsummed, {record: [gradient, ...]}
    in the order they were made, for the checkpoint to hand on."""
    outer = _on.taken  # a checkpoint's record runs inside a backward: share its set
    _on.taken = taken = outer if outer is not None else set()
    taken.update(id(g) for g in gradients)  # NOTE [who owns a gradient]
    leaving = {}
    try:
        _run_tape(roots, gradients, False, taken, start, leaving)
    finally:
        _on.taken = outer
    return leaving


def _run_tape(roots, gradients, retain_graph, taken, start=-1, leaving=None):
    # NOTE [the tape]: collect the records that the roots depend on, then run them newest first.
    # Records are numbered as they are made and every input is made before the ops that use it,
    # so sorting by number, newest first, is a valid order: each record runs after every record
    # that consumes its output. No recursion, so a chain of any length works.
    records = records_since(roots, start)
    records.sort(key=operator.attrgetter("seq"), reverse=True)

    grads = {t._ctx: g for t, g in zip(roots, gradients)}  # gradients in flight, by the record that made the tensor
    for op in records:
        g = grads.pop(op, None)
        if g is None:
            continue
        if op.released:
            raise RuntimeError(f"backward: trying to backward through the graph a second time: the arrays that "
                               f"'{op.name}' saved were freed by the first backward. Pass retain_graph=True to "
                               f"the first backward if you need a second one, or run the forward again.")
        if op.saved_meta and not op.saved:
            raise RuntimeError(f"backward: '{op.name}' was recorded inside a checkpoint's forward, which keeps "
                               f"nothing for backward. A checkpointed function must return its tensors as they "
                               f"are or in tuples, lists and dicts (checkpoint does not look inside other objects)")
        kept = op.retained() if op.retained is not None else None  # a tensor that asked retain_grad()
        if kept is not None:
            _accumulate(kept, g, taken)
        input_grads = op.backward(g)
        if not retain_graph:
            release(op)
        if _on.profiler is not None:
            _on.profiler.on_backward(op, g, input_grads)
        for nxt, gi in zip(op.next, input_grads):
            if nxt is None or gi is None:
                continue
            parts = gi if isinstance(gi, list) else (gi,)  # a checkpoint's list: one by one (NOTE [checkpoint sums])
            if isinstance(nxt, Tensor):
                for part in parts:
                    _accumulate(nxt, part, taken)
            elif nxt.seq <= start:  # made before the checkpoint's segment: its record hands these on
                leaving.setdefault(nxt, []).extend(parts)
            else:
                for part in parts:
                    grads[nxt] = grads[nxt] + part if nxt in grads else part


def _accumulate(t, g, taken):
    """Add g into t.grad. The first time, take g itself unless it is a view or already taken."""
    # NOTE [who owns a gradient]: an op may hand one array to several inputs (Add gives g to
    # both), and an array that becomes a leaf's .grad may still be waiting in `grads` for
    # another record. So a .grad is taken without a copy only when no one else has it, and a
    # .grad taken during this backward is added to out of place; only a .grad that this leaf
    # owns alone (from an earlier backward) is added to in place.
    g = backend.as_array(g)
    if g.dtype != t._data.dtype:
        g = g.astype(t._data.dtype)
    if t.grad is None:
        if g.base is not None or id(g) in taken:
            g = g.copy()
        taken.add(id(g))
        t.grad = _wrap(g)
    elif id(t.grad._data) in taken:
        t.grad = _wrap(t.grad._data + g)
    else:
        # NOTE [gradient accumulation]: a second backward adds into the same buffer in place,
        # so k micro-batches need one gradient buffer, not k.
        t.grad._data += g


def zero_grads(params, set_to_none=True):
    """Module.zero_grad and Optimizer.zero_grad: drop each .grad, or fill it with zeros in place."""
    for p in params:
        if set_to_none or p.grad is None:
            p.grad = None
        else:
            p.grad._data[...] = 0


# ----------------------------------------------------------------------------- the Tensor

def _wrap(array, requires_grad=False):
    t = Tensor.__new__(Tensor)
    t._data, t._requires_grad, t._grad, t._ctx = array, requires_grad, None, None
    return t


def _lift(x, like, op):
    """A Python number next to a tensor becomes a 0-d array of the tensor's dtype and device."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float)):
        if isinstance(x, float) and like._data.dtype.kind != "f":
            raise TypeError(f"{op}: a Python float with a {like.dtype.name} tensor; convert the tensor with "
                            f".float() first (minigrad does not promote silently)")
        return _new(backend.xp_of(like._data).asarray(x, dtype=like._data.dtype))
    raise TypeError(f"{op}: expected a Tensor or a Python number, got {type(x).__name__}; "
                    f"wrap arrays with mg.tensor(...)")


class Tensor:
    """An n-dimensional array that can record the ops applied to it, for backward."""
    __slots__ = ("_data", "_requires_grad", "_grad", "_ctx", "__weakref__")

    def __init__(self, data, requires_grad=False, dtype=None, device=None):
        t = tensor(data, requires_grad=requires_grad, dtype=dtype, device=device)
        self._data, self._requires_grad, self._grad, self._ctx = t._data, t._requires_grad, None, None

    @property
    def grad(self):
        """The gradient that backward accumulated here (a leaf's, or a tensor's that called retain_grad())."""
        return self._grad

    @grad.setter
    def grad(self, value):
        # the one way a gradient comes into being: backward, accumulate and a user's `p.grad = ...` all
        # pass here, so the ledger sees every one (NOTE [what a profile counts], profiler.py)
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"grad: expected a Tensor or None, got {type(value).__name__}")
            if value.shape != self.shape or value.device != self.device or value.dtype.kind != "f":
                raise ValueError(f"grad: a gradient must be a float tensor of this tensor's shape {self.shape} on "
                                 f"{self.device}; got {value.dtype.name} {value.shape} on {value.device}")
            if _on.profiler is not None:
                _on.profiler.on_grad(value._data)
        self._grad = value

    @staticmethod
    def _from_array(array, requires_grad=False):
        """Wrap an existing NumPy/CuPy array without copying (for minigrad's own code)."""
        return _new(array, requires_grad)

    # --- what it holds
    @property
    def data(self):
        """The underlying NumPy or CuPy array. May be replaced by another of the same shape."""
        return self._data

    @data.setter
    def data(self, array):
        if isinstance(array, Tensor):
            array = array._data
        if getattr(array, "shape", None) != self._data.shape:
            raise ValueError(f"data: the new array must have this tensor's shape {self.shape}, "
                             f"got {getattr(array, 'shape', type(array).__name__)}")
        if self._requires_grad and array.dtype not in FLOAT_DTYPES:
            raise TypeError(f"data: a tensor that requires grad needs a float array, got {array.dtype}")
        if backend.device_of(array) != self.device:
            raise RuntimeError(f"data: the new array is on {backend.device_of(array)} but this tensor is on "
                               f"{self.device}; move the array first (mg.tensor(array, device='{self.device}').data)")
        self._set_data(array)

    def _set_data(self, array):
        """Replace the array (no checks): the one way minigrad's own code does it, so the ledger sees it."""
        self._data = array
        if _on.profiler is not None:
            _on.profiler.on_new_tensor(self)

    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        if requires_grad and self._data.dtype not in FLOAT_DTYPES:
            raise TypeError(f"requires_grad: only float tensors can require gradients, this one is "
                            f"{self._data.dtype.name}; convert it with .float() first")
        if not requires_grad and self._ctx is not None:
            raise RuntimeError("requires_grad_: an op's output always requires grad; use .detach() instead")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def shape(self):
        return self._data.shape

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def device(self):
        return backend.device_of(self._data)

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def is_leaf(self):
        return self._ctx is None

    @property
    def grad_fn(self):
        """The record (op) that made this tensor, or None for a leaf."""
        return self._ctx

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self):
        return self._data.size

    def dim(self):
        return self._data.ndim

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def numpy(self):
        """The data as a NumPy array (copied from the GPU when on 'cuda')."""
        if self._requires_grad:
            raise RuntimeError("numpy: this tensor requires grad; call .detach().numpy() "
                               "(as in PyTorch) so that no one writes into the recorded array by mistake")
        return backend.to_numpy(self._data)

    def item(self):
        if self._data.size != 1:
            raise ValueError(f"item: only a one-element tensor converts to a Python number, this one has shape "
                             f"{self.shape}; reduce it first (.sum(), .mean()) or index one element")
        return self._data.reshape(()).item()

    def tolist(self):
        return backend.to_numpy(self._data).tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(f"the truth value of a tensor of shape {self.shape} is ambiguous; use .any() or .all()")
        return bool(self.item())

    def __format__(self, spec):
        return format(self.item(), spec) if self._data.size == 1 and spec else object.__format__(self, spec)

    def __repr__(self):
        body = np.array2string(backend.to_numpy(self._data), separator=", ", precision=4, threshold=50,
                               prefix="tensor(")
        extras = [f"dtype={self.dtype.name}"] if self.dtype.name not in ("float32", "int64", "bool") else []
        if self.device != "cpu":
            extras.append(f"device='{self.device}'")
        if self._ctx is not None:
            extras.append(f"grad_fn=<{self._ctx.name}>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body] + extras) + ")"

    # --- the tape
    def backward(self, gradient=None, retain_graph=False):
        """Add d(self)/d(leaf) into every leaf's .grad (accumulating, as in PyTorch)."""
        backward(self, gradient, retain_graph)

    def detach(self):
        """The same data, cut from the tape."""
        return _wrap(self._data)

    def retain_grad(self):
        """Keep .grad on this intermediate tensor too (leaves always keep theirs)."""
        if self._ctx is not None:
            self._ctx.retained = weakref.ref(self)

    def to(self, *args, device=None, dtype=None):
        """t.to('cuda'), t.to('float64'), t.to(device=..., dtype=...): differentiable; self if nothing changes."""
        device, dtype = parse_to_args(args, device, dtype)
        out = self
        if dtype is not None and dtype != self.dtype:
            out = apply(ops.Cast, out, dtype=dtype)
        if device is not None and device != self.device:
            out = apply(ops.ToDevice, out, device=device)
        return out

    def float(self):
        return self.to("float32")

    def double(self):
        return self.to("float64")

    def half(self):
        return self.to("float16")

    def long(self):
        return self.to("int64")

    # --- arithmetic
    def __add__(self, other):
        return apply(ops.Add, self, _lift(other, self, "add"))

    def __radd__(self, other):
        return apply(ops.Add, _lift(other, self, "add"), self)

    def __sub__(self, other):
        return apply(ops.Sub, self, _lift(other, self, "sub"))

    def __rsub__(self, other):
        return apply(ops.Sub, _lift(other, self, "sub"), self)

    def __mul__(self, other):
        return apply(ops.Mul, self, _lift(other, self, "mul"))

    def __rmul__(self, other):
        return apply(ops.Mul, _lift(other, self, "mul"), self)

    def __truediv__(self, other):
        return apply(ops.Div, self, _lift(other, self, "div"))

    def __rtruediv__(self, other):
        return apply(ops.Div, _lift(other, self, "div"), self)

    def __neg__(self):
        return apply(ops.Neg, self)

    def __pow__(self, exponent):
        return self.pow(exponent)

    def __rpow__(self, base):
        return (self * math.log(base)).exp()

    def __matmul__(self, other):
        if not isinstance(other, Tensor):
            raise TypeError(f"matmul: expected a Tensor, got {type(other).__name__}")
        return apply(ops.Matmul, self, other)

    def pow(self, exponent):
        """x ** p for a constant Python number p."""
        if not isinstance(exponent, (int, float)) or isinstance(exponent, bool):
            raise TypeError(f"pow: the exponent must be a Python number, got {type(exponent).__name__}; "
                            "for a tensor exponent write (b * a.log()).exp()")
        return apply(ops.Pow, self, exponent=exponent)

    def exp(self):
        return apply(ops.Exp, self)

    def log(self):
        return apply(ops.Log, self)

    def sqrt(self):
        return apply(ops.Sqrt, self)

    def tanh(self):
        return apply(ops.Tanh, self)

    def sigmoid(self):
        return apply(ops.Sigmoid, self)

    def relu(self):
        return apply(ops.Relu, self)

    def abs(self):
        return apply(ops.Abs, self)

    # --- comparisons: not differentiable, they return bool tensors
    def _compare(self, other, fn):
        other = other._data if isinstance(other, Tensor) else other
        return _new(backend.as_array(fn(self._data, other)))

    def __lt__(self, other):
        return self._compare(other, operator.lt)

    def __le__(self, other):
        return self._compare(other, operator.le)

    def __gt__(self, other):
        return self._compare(other, operator.gt)

    def __ge__(self, other):
        return self._compare(other, operator.ge)

    def __eq__(self, other):
        return self._compare(other, operator.eq)

    def __ne__(self, other):
        return self._compare(other, operator.ne)

    def __invert__(self):
        return _new(~self._data)

    __hash__ = object.__hash__  # tensors are dict keys by identity (optimizer state)

    def any(self):
        return _new(backend.as_array(self._data.any()))

    def all(self):
        return _new(backend.as_array(self._data.all()))

    def argmax(self, dim=None, keepdim=False):
        return _new(backend.as_array(self._data.argmax(axis=dim, keepdims=keepdim)))

    # --- reductions
    def sum(self, dim=None, keepdim=False):
        return apply(ops.Sum, self, dim=dim, keepdim=keepdim)

    def mean(self, dim=None, keepdim=False):
        return apply(ops.Mean, self, dim=dim, keepdim=keepdim)

    def max(self, dim=None, keepdim=False):
        """The maximum values (over all elements, or along dim). Unlike torch.max(dim), no indices."""
        return apply(ops.Max, self, dim=dim, keepdim=keepdim)

    def softmax(self, dim):
        return apply(ops.Softmax, self, dim=dim)

    def log_softmax(self, dim):
        return apply(ops.LogSoftmax, self, dim=dim)

    # --- shape
    def reshape(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return apply(ops.Reshape, self, shape=shape)

    view = reshape  # NOTE: unlike torch.view this also accepts non-contiguous tensors (NumPy copies)

    def flatten(self, start_dim=0, end_dim=-1):
        if self.ndim == 0:
            return self.reshape(1)
        s, e = start_dim % self.ndim, end_dim % self.ndim
        return self.reshape(self.shape[:s] + (-1,) + self.shape[e + 1:])

    def transpose(self, dim0, dim1):
        return apply(ops.Transpose, self, dim0=dim0, dim1=dim1)

    def permute(self, *dims):
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        return apply(ops.Permute, self, dims=dims)

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    def __getitem__(self, key):
        return apply(ops.Index, self, key=_index_key(key, self))

    def masked_fill(self, mask, value):
        return apply(ops.MaskedFill, self, mask=_bool_array(mask, self, "masked_fill"), value=value)

    def tril(self, diagonal=0):
        return apply(ops.Tri, self, diagonal=diagonal, upper=False)

    def triu(self, diagonal=0):
        return apply(ops.Tri, self, diagonal=diagonal, upper=True)


def _is_dtype_name(name):
    try:
        return np.dtype(name) in DTYPES
    except TypeError:
        return False


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


def _index_key(key, t):
    """A tensor index -> a tuple of ints, slices, None, Ellipsis and integer arrays on t's device."""
    key = key if isinstance(key, tuple) else (key,)
    out = []
    for k in key:
        if isinstance(k, Tensor):
            k = k._data
        elif isinstance(k, (list, np.ndarray)):
            k = backend.to_device(np.asarray(k), t.device)
        if hasattr(k, "dtype"):
            if k.dtype == bool:
                out.extend(k.nonzero())  # a mask is the integer arrays of its True positions
                continue
            if k.dtype.kind not in "iu":
                raise IndexError(f"index: tensors used as indices must be integer or bool, got {k.dtype}")
            if backend.device_of(k) != t.device:
                raise RuntimeError(f"index: the index is on {backend.device_of(k)} but the tensor is on {t.device}")
        elif not (k is None or k is Ellipsis or isinstance(k, (int, slice, np.integer))):
            raise IndexError(f"index: unsupported index {k!r} of type {type(k).__name__}")
        out.append(int(k) if isinstance(k, np.integer) else k)
    return tuple(out)


def _bool_array(mask, like, op):
    m = mask._data if isinstance(mask, Tensor) else backend.to_device(np.asarray(mask), like.device)
    if m.dtype != bool:
        raise TypeError(f"{op}: the mask must be a bool tensor, got {m.dtype}; compare to make one (t > 0)")
    if backend.device_of(m) != like.device:
        raise RuntimeError(f"{op}: the mask is on {backend.device_of(m)} but the tensor is on {like.device}")
    return m


# ----------------------------------------------------------------------------- making tensors

def tensor(data, requires_grad=False, dtype=None, device=None):
    """A new tensor from a list, number, NumPy/CuPy array or Tensor (copied), as torch.tensor."""
    if isinstance(data, Tensor):
        data = data._data
    device = backend.normalize_device(device)
    if backend.is_array(data):
        array = backend.to_device(data, device)
        dt = normalize_dtype(dtype) if dtype is not None else normalize_dtype(array.dtype)
        array = array.astype(dt, copy=True)
    else:
        host = np.asarray(data)
        if host.dtype == object:
            raise TypeError(f"tensor: cannot make a tensor from {type(data).__name__} {data!r:.60}")
        if dtype is None:  # Python floats become float32, as in PyTorch
            dtype = "float32" if host.dtype.kind == "f" else host.dtype
        array = backend.to_device(host.astype(normalize_dtype(dtype)), device)
    return _new(array, requires_grad)


def _new(array, requires_grad=False):
    """A new leaf that is not an op's output (factories, comparisons, constants): the ledger counts it."""
    t = _wrap(array)
    if requires_grad:
        t.requires_grad_(True)
    if _on.profiler is not None:
        _on.profiler.on_new_tensor(t)
    return t


def _shape(shape):
    return tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)


def _filled(fill, shape, dtype, device, requires_grad):
    device = backend.normalize_device(device)
    dt = normalize_dtype(dtype or "float32")
    return _new(backend.xp_for(device).full(_shape(shape), fill, dtype=dt), requires_grad)


def zeros(*shape, dtype=None, device=None, requires_grad=False):
    return _filled(0, shape, dtype, device, requires_grad)


def ones(*shape, dtype=None, device=None, requires_grad=False):
    return _filled(1, shape, dtype, device, requires_grad)


def full(shape, fill_value, dtype=None, device=None, requires_grad=False):
    return _filled(fill_value, shape, dtype, device, requires_grad)


def zeros_like(t, dtype=None, requires_grad=False):
    return zeros(*t.shape, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def ones_like(t, dtype=None, requires_grad=False):
    return ones(*t.shape, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def _random(draw, shape, dtype, device, requires_grad):
    dt = normalize_dtype(dtype or "float32")
    host = draw(_shape(shape)).astype(dt, copy=False)
    return tensor(host, dtype=dt, device=device, requires_grad=requires_grad)


def randn(*shape, dtype=None, device=None, requires_grad=False):
    """Standard normal samples from minigrad's generator (mg.manual_seed)."""
    return _random(generator().standard_normal, shape, dtype, device, requires_grad)


def rand(*shape, dtype=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1) from minigrad's generator."""
    return _random(generator().random, shape, dtype, device, requires_grad)


def randint(low, high, size, dtype="int64", device=None):
    """Integers in [low, high) from minigrad's generator."""
    return tensor(generator().integers(low, high, size=_shape((size,))), dtype=dtype, device=device)


def arange(start, end=None, step=1, dtype=None, device=None):
    start, end = (0, start) if end is None else (start, end)
    device = backend.normalize_device(device)
    host = np.arange(start, end, step)
    return tensor(host, dtype=dtype or ("int64" if host.dtype.kind in "iu" else "float32"), device=device)


# ----------------------------------------------------------------------------- functions on several tensors

def cat(tensors, dim=0):
    """Concatenate along an existing dim."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty list of tensors")
    return apply(ops.Cat, *tensors, dim=dim)


def stack(tensors, dim=0):
    """Stack along a new dim."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty list of tensors")
    return apply(ops.Stack, *tensors, dim=dim)


def where(condition, input, other):
    """Elementwise: input where condition holds, other elsewhere (as torch.where)."""
    like = input if isinstance(input, Tensor) else other
    if not isinstance(like, Tensor):
        raise TypeError("where: at least one of input and other must be a Tensor")
    return apply(ops.Where, _lift(input, like, "where"), _lift(other, like, "where"),
                 cond=_bool_array(condition, like, "where"))
