"""The Tensor's face: `apply`, the one place a record is made, and the Tensor class a PyTorch user knows (its
storage, properties and conversions, backward and detach, .to(), the operators and the methods that are one op
each), with type promotion and `_accumulate`, where a leaf sums its gradient into .grad.

Follow one saved array: an op's forward names it (Op.save_for_backward); `apply` below makes the record and hands
it to `record` and `keep` (tape.py), which keeps or drops it; backward's walk (`_run_tape`, tape.py) reads it in the op's backward
and `release` frees it. Follow one gradient: Tensor.backward -> `backward` (tape.py) -> each record's backward, in
reverse -> Tensor._accumulate of each leaf.

Read next, on the reading path: optim/optimizer.py's SGD, where the gradient meets the weights. Beside the path:
methods.py (the methods composed of these, and the in-place writes), names.py (PyTorch's other names),
factories.py (tensor(), zeros, randn, cat, where, ...), then functional.py, nn/ and optim/.
"""
import operator
import weakref

import numpy as np

from .. import backend, ops
from ..ops import ShapeError
from .modes import _chain, _on, _share_version, version_counter
from .tape import Variable, _check_same_device_and_dtype, _values, backward, record
from .args import FLOAT_DTYPES, _array_of, _bool_array, _index_key, _is_number, _shape, check_cuda_device, parse_to_args
from .args import _number_array, dim_alias, exact_number
from . import promotion
from .promotion import result_type
from .methods import Comparisons, Composed, InPlace
from .names import Names

# ----------------------------------------------------------------------------- apply: the one place a record is made

# NOTE [per-op overhead]: apply runs once per op and _run_tape's loop once per record, so on small arrays their
# Python is most of a step's time (bench (b), bench/NOTES.md 'per-op overhead'). So these two build lists, not
# generators, over an op's one to three inputs (a generator costs more to start than such a list to build), and
# keep's and the tape's loops count their index by hand: enumerate and zip make an iterator object and a tuple
# per item, 2.7% of a tiny model's step in instructions.
def apply(op_cls, *inputs, **attrs):
    """Run one op on tensors and, when recording, keep it on the tape as the output's record."""
    if _on.modes:  # NOTE [op modes] (modes.py): the first mode sees the op, and runs the rest of the stack
        first, run = _on.chain or _chain(_run)
        return first(op_cls, inputs, attrs, run)
    return _run(op_cls, inputs, attrs)


def _run(op_cls, inputs, attrs, noted=None):
    """The op itself, and its record: what apply does with no mode active. `noted` hears of the op before its
    record keeps anything (NOTE [op modes])."""
    op = op_cls()
    arrays = [t._data for t in inputs]
    if len(arrays) > 1 and op.same_dtype:
        _check_same_device_and_dtype(op_cls.name, arrays)
    needs = tuple([t._requires_grad for t in inputs])  # NOTE [per-op overhead]
    recording = _on.grad_enabled and True in needs
    op.needs_input_grad = needs if recording else (False,) * len(inputs)
    try:
        out = op.forward(*arrays, **attrs)
    except (ValueError, IndexError, TypeError) as e:
        raise _explain(op_cls.name, e, arrays) from None
    if out.ndim == 0:  # NumPy makes 0-d results scalars (np.float32): arrays, as CuPy's and meta's (_zero_d)
        out = _zero_d(op, out)
    if recording and out.dtype.kind in "biu":  # integer and bool results have no gradient (a cast to int64)
        recording = False
    t = Tensor.__new__(Tensor)  # wrap(out, recording), written out: every op makes one (NOTE [per-op overhead])
    t._data, t._requires_grad, t._grad, t._ctx, t._vc = out, recording, None, None, None
    if op.returns_view and out.base is not None:  # a view of its input shares the input's version counter
        _share_version(t, inputs)
    if noted is not None:  # NOTE [op modes]: before keep(), which a checkpoint's policy decides
        noted(op, op if recording else None, inputs, t, attrs)
    if recording:
        record(op, inputs, t)
    return t


def _zero_d(op, out):
    """A 0-d op's output, and what it saved, as arrays: NumPy gives a 0-d result as a scalar (np.float32, np.bool_),
    which the ledger does not count and no version counter follows (CuPy and meta give arrays); a saved output too."""
    array = backend.as_array(out)
    op.save_for_backward(*[array if a is out else backend.as_array(a) for a in op.saved])  # before keep() sees them
    return array


def _explain(name, e, arrays):
    """NumPy's error from inside an op, restated with the name the user wrote (x ** y: pow), shapes, dtype, device."""
    name = {"pow_tensor": "pow", "clamp_tensor": "clamp"}.get(name, name)
    if str(e).startswith(name):
        return e
    if "broadcast" in str(e) and len(arrays) == 2:
        return ShapeError(f"{name}: shapes {arrays[0].shape} and {arrays[1].shape} do not broadcast: "
                          f"compared from the right, each pair of dims must be equal or one of them 1. "
                          f"Reshape one of them (e.g. .reshape(...) to add a size-1 dim) first")
    shapes = ", ".join(str(a.shape) for a in arrays)
    # NumPy's ValueErrors inside an op are shape problems; not NumPy's own subclasses, which name NumPy's internals
    kind = IndexError if isinstance(e, IndexError) else ShapeError if isinstance(e, ValueError) else TypeError
    return kind(f"{name}: {e} (input shapes {shapes}, dtype {arrays[0].dtype}, device {backend.device_of(arrays[0])})")


# ----------------------------------------------------------------------------- new tensors

def wrap(array, requires_grad=False):
    """A tensor around an array that exists already, told to no listener (NOTE [an old array, a new tensor],
    profiler/ledger.py): an op's output, a saved array, a gradient. The ledger counts the array where the tape
    reported it, and a second tensor around it is no new memory, as in PyTorch a tensor on an existing storage
    allocates nothing. A checkpoint's recompute wraps the forward's arrays so, and saved-tensor hooks hand arrays to
    their pack and unpack hooks so (autograd/graph.py). An array new to the ledger goes through _new, which tells it."""
    t = Tensor.__new__(Tensor)
    t._data, t._requires_grad, t._grad, t._ctx, t._vc = array, requires_grad, None, None, None
    return t


def _new(array, requires_grad=False):
    """A new leaf that is not an op's output (factories, comparisons, constants): the ledger counts it."""
    t = wrap(array)
    if requires_grad:
        t.requires_grad_(True)
    if _on.profiler is not None:
        _on.profiler.on_new_tensor(t)
    return t


# ----------------------------------------------------------------------------- type promotion

def _operands(a, b, op, true_division=False, into=None):
    """The two operands of a binary op (a Tensor and a Tensor or number, either side) as tensors of one
    dtype, torch.result_type's but for one refusal (NOTE [type promotion], promotion.py); `into`: the tensor an
    in-place op writes, which that dtype must cast into, as torch.can_cast."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a._data.dtype == b._data.dtype \
            and (a._data.dtype.kind not in "biu" or not true_division):
        return a, b  # the common case, first
    for x in (a, b):
        if not isinstance(x, Tensor) and not _is_number(x):
            hint = "; p.data is the raw array: write p -= ... under mg.no_grad()" if backend.is_array(x) else ""
            raise TypeError(f"{op}: expected a Tensor or a Python number, got {type(x).__name__}; "
                            f"wrap arrays with mg.tensor(...){hint}")
    like = a if isinstance(a, Tensor) else b
    floats = {x.dtype for x in (a, b) if isinstance(x, Tensor) and backend.is_float(x.dtype)}
    if len(floats) > 1 and any([m.casts_inputs for m in _on.modes]):  # a mode casts them itself (autocast), by one rule
        return a, b
    target = result_type(op, (a, b))
    if true_division and promotion.kind(target) < 2:
        target = promotion.FLOAT32  # PyTorch's default float dtype
    if into is not None and not promotion.can_cast(target, into.dtype):  # a float into an int tensor, an int into bool
        raise RuntimeError(f"{op}: the result would be {target.name}, but this tensor is {into.dtype.name}: an "
                           f"in-place op cannot change the dtype's kind; write x = x ... or convert first")
    return tuple(x.to(target) if isinstance(x, Tensor) else _new(_number_array(x, like._data, target)) for x in (a, b))


def _one_dtype(op, tensors):
    """cat's and stack's tensors in one dtype, torch.result_type's, 0-d ones joined as 1-d ones, as PyTorch's stack
    joins them (NOTE [type promotion], promotion.py); mixed floats pass where a mode casts them, as in _operands."""
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) == 1 or any([m.casts_inputs for m in _on.modes]) and sum(backend.is_float(d) for d in dtypes) > 1:
        return list(tensors)
    target = result_type(op, tensors, all_dims=True)
    return [t if t.dtype == target else t.to(target) for t in tensors]


_NUMPY_OPERATORS = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul, "true_divide": operator.truediv,
                    "divide": operator.truediv, "power": operator.pow, "matmul": operator.matmul, "less": operator.lt,
                    "less_equal": operator.le, "greater": operator.gt, "greater_equal": operator.ge,
                    "equal": operator.eq, "not_equal": operator.ne}


def _where(condition, input, other):
    """mg.where (factories.py), here for the in-place writes (fill_, copy_) too: one ops.Where of the values in one
    dtype by NOTE [type promotion]."""
    if not isinstance(condition, Tensor):  # an array or a list: on the values' device, as masked_fill's mask
        like = next((x.device for x in (input, other) if isinstance(x, Tensor)), None)
        condition = _new(_array_of(condition, device=like))
    if not isinstance(input, Tensor) and not isinstance(other, Tensor) and _is_number(input):
        input = _new(_array_of(input, device=condition.device))  # two numbers: float32 or int64, as PyTorch
    a, b = _operands(input, other, "where")
    cond = _bool_array(condition, a, "where")
    try:
        np.broadcast_shapes(cond.shape, a.shape, b.shape)
    except ValueError:
        raise ShapeError(f"where: the condition's shape {cond.shape} does not broadcast with the values' shapes "
                         f"{a.shape} and {b.shape}") from None
    return apply(ops.Where, a, b, cond=cond)


# ----------------------------------------------------------------------------- the Tensor

class Tensor(Composed, Comparisons, InPlace, Names, Variable):
    """An n-dimensional array that can record the ops applied to it, for backward. methods.py has its composed methods,
    comparisons and in-place writes, names.py PyTorch's other names; Variable (tape.py) names what the tape reads."""
    __slots__ = ("_data", "_requires_grad", "_grad", "_ctx", "_vc", "__weakref__")

    # what methods.py, which sits below this file, reaches through self: this file's functions, unchanged
    _apply = staticmethod(apply)
    _new = staticmethod(_new)
    _operands = staticmethod(_operands)
    _where = staticmethod(_where)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy hands a NumPy scalar's arithmetic with a Tensor to the Tensor: np.float64(0.5) * t is
        0.5 * t, a Tensor, not an object array of tensors."""
        if "out" in kwargs:
            raise TypeError(f"{ufunc.__name__}: a NumPy array cannot be updated in place with a Tensor; "
                            f"p.data is the raw array: write p -= ... under mg.no_grad(), or use the other "
                            f"tensor's .data")
        op = _NUMPY_OPERATORS.get(ufunc.__name__)
        if method != "__call__" or op is None or any(backend.is_array(x) for x in inputs):
            raise TypeError(f"{ufunc.__name__}: NumPy functions and arrays do not take minigrad tensors; use the "
                            f"tensor's own methods, or wrap the array with mg.tensor(...)")
        return op(*(x.item() if isinstance(x, np.generic) else x for x in inputs))

    def __init__(self, data, requires_grad=False, dtype=None, device=None):
        t = _new(_array_of(data, dtype, device), requires_grad)  # as tensor(...): the ledger sees t
        self._data, self._requires_grad, self._grad, self._ctx, self._vc = t._data, t._requires_grad, None, None, None

    @property
    def grad(self):
        """The gradient that backward accumulated here (a leaf's, or a tensor's that called retain_grad())."""
        return self._grad

    @grad.setter
    def grad(self, value):
        # a user's `p.grad = ...` is checked here; it and backward's gradients then come into being through
        # _set_grad, so the ledger sees every one (NOTE [what a profile counts], profiler)
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"grad: expected a Tensor or None, got {type(value).__name__}")
            if value._data.shape != self._data.shape or type(value._data) is not type(self._data) \
                    or not backend.is_float(value._data.dtype):
                raise ShapeError(f"grad: a gradient must be a float tensor of this tensor's shape {self.shape} on "
                                 f"{self.device}; got {value.dtype.name} {value.shape} on {value.device}")
        _set_grad(self, value)

    def _accumulate(self, g, taken, shared):
        """Add gradient array g into .grad: how the tape tells a leaf its gradient (tape.Variable). The first time,
        take g itself unless someone else may write it or read it again; later, add in place into a .grad that
        this leaf owns alone (NOTE [who owns a gradient], tape.py: the tape says `shared`, and `taken` is who else
        holds what)."""
        if not self._requires_grad:  # requires_grad_(False) after the graph was built: PyTorch skips it too
            return
        if isinstance(g, np.generic):  # NumPy hands back a 0-d result as a scalar
            g = np.asarray(g)
        if g.dtype != self._data.dtype:
            g, shared = g.astype(self._data.dtype), False  # a new array, this leaf's alone
        if self._grad is None:
            if g.shape != self._data.shape:
                raise ShapeError(f"backward: a tensor of shape {self.shape} got a gradient of shape {g.shape}: an "
                                 f"op's backward returned the wrong shape (it did not sum over broadcast dims, or "
                                 f"reshape)")
            if id(g) in taken or (g.base is not None and backend.is_view(g)):
                g = g.copy()  # a .grad or the caller has it, or its memory is another array's: a copy, ours alone
            elif shared:
                taken[id(g)] = g  # read again by someone else: no sum goes into it in place during this backward
            _set_grad(self, wrap(g))  # what the grad setter does after its checks, which this gradient passes by now
        elif id(self._grad._data) not in taken:
            # NOTE [gradient accumulation]: a second backward adds into the same buffer in place,
            # so k micro-batches need one gradient buffer, not k.
            self._grad._data += g
        else:
            self.grad = wrap(backend.as_array(self._grad._data + g))  # NumPy's 0-d sum is a scalar

    @staticmethod
    def _from_array(array, requires_grad=False):
        """Wrap an existing NumPy/CuPy array without copying (for minigrad's own code)."""
        return _new(backend.as_array(array), requires_grad)

    # --- what it holds
    @property
    def data(self):
        """The underlying NumPy or CuPy array. May be replaced by another of the same shape."""
        return _values(self, "data")

    @data.setter
    def data(self, array):
        if isinstance(array, Tensor):
            array = array._data
        if getattr(array, "shape", None) != self._data.shape:
            raise ShapeError(f"data: the new array must have this tensor's shape {self.shape}, "
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
        return backend.to_numpy(_values(self, "numpy"))

    def item(self):
        if self._data.size != 1:
            raise ShapeError(f"item: only a one-element tensor converts to a Python number, this one has shape "
                             f"{self.shape}; reduce it first (.sum(), .mean()) or index one element")
        return _values(self, "item").reshape(()).item()

    def tolist(self):
        return backend.to_numpy(_values(self, "tolist")).tolist()

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
        meta = self.device == "meta"  # no values to show: PyTorch's "tensor(..., device='meta', size=(2, 3))"
        body = "..." if meta else np.array2string(backend.to_numpy(_values(self, "repr")), separator=", ",
                                                  precision=4, threshold=50, prefix="tensor(")
        extras = [f"dtype={self.dtype.name}"] if self.dtype.name not in ("float32", "int64", "bool") else []
        if self.device != "cpu":
            extras.append(f"device='{self.device}'" + (f", size={self.shape}" if meta else ""))
        if self._ctx is not None:
            extras.append(f"grad_fn=<{self._ctx.name}>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body] + extras) + ")"

    # --- the tape
    def backward(self, gradient=None, retain_graph=False):
        """Add d(self)/d(leaf) into every leaf's .grad (accumulating, as in PyTorch)."""
        if ops.LEARNED and ops.learned("Tensor.backward", self, gradient, retain_graph) is not NotImplemented:
            return  # the learner's tape walk ran (NOTE [learner's pieces], ops/base.py)
        backward(self, gradient._data if isinstance(gradient, Tensor) else gradient, retain_graph)  # tape.py

    def detach(self):
        """The same data, cut from the tape (an in-place write to either shows in both, as in PyTorch)."""
        out = wrap(self._data)
        version_counter(self).alias(self, out)
        return out

    @property
    def _version(self):
        """How many times this tensor's storage was written in place (PyTorch's t._version)."""
        return 0 if self._vc is None else self._vc.n

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

    def cuda(self, device=None, non_blocking=False):
        """self.to('cuda'), as torch's (non_blocking changes nothing here; minigrad has one GPU device, 'cuda')."""
        check_cuda_device("cuda", device)
        return self.to("cuda")

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to("float32")

    def double(self):
        return self.to("float64")

    def half(self):
        return self.to("float16")

    def bfloat16(self):
        return self.to(backend.BFLOAT16)

    def long(self):
        return self.to("int64")

    # --- arithmetic (NOTE [type promotion], promotion.py)
    def _binary(self, op_cls, other, name, reflected=False):
        if op_cls is ops.Sub and bool in (self._data.dtype, getattr(other, "dtype", type(other))):  # as PyTorch
            raise TypeError("sub: subtracting a bool (tensor) is not supported, as in PyTorch; to invert a mask "
                            "write ~mask; for numbers convert it with .long() first")
        a, b = (other, self) if reflected else (self, other)  # exact_number: NOTE [a number beside 2-byte floats]
        number = exact_number(op_cls, a, b) if op_cls.takes_number else {}
        return apply(op_cls, *_operands(a, b, name, true_division=op_cls is ops.Div), **number)

    def __add__(self, other):
        return self._binary(ops.Add, other, "add")

    def __radd__(self, other):
        return self._binary(ops.Add, other, "add", reflected=True)

    def __sub__(self, other):
        return self._binary(ops.Sub, other, "sub")

    def __rsub__(self, other):
        return self._binary(ops.Sub, other, "sub", reflected=True)

    def __mul__(self, other):
        return self._binary(ops.Mul, other, "mul")

    def __rmul__(self, other):
        return self._binary(ops.Mul, other, "mul", reflected=True)

    def __truediv__(self, other):
        return self._binary(ops.Div, other, "div")

    def __rtruediv__(self, other):
        return self._binary(ops.Div, other, "div", reflected=True)

    def __neg__(self):
        return apply(ops.Neg, self)

    def __pow__(self, exponent):
        return self.pow(exponent)

    def __rpow__(self, base):
        return self._binary(ops.PowTensor, base, "pow", reflected=True)

    def __matmul__(self, other):
        if not isinstance(other, Tensor):
            raise TypeError(f"matmul: expected a Tensor, got {type(other).__name__}")
        return apply(ops.Matmul, self, other)

    def pow(self, exponent):
        """x ** p: a constant number p (its own op: saves x only), or a tensor (saves both)."""
        if isinstance(exponent, Tensor):
            return self._binary(ops.PowTensor, exponent, "pow")
        if not _is_number(exponent) or isinstance(exponent, (bool, np.bool_)):
            raise TypeError(f"pow: the exponent must be a number or a Tensor, got {type(exponent).__name__}"
                            + ("; for x ** True write x ** 1" if isinstance(exponent, (bool, np.bool_)) else ""))
        base = self if backend.is_float(self.dtype) or (isinstance(exponent, (int, np.integer)) and exponent >= 0) \
            else self.float()
        base = base.to("int64") if base.dtype == bool else base  # bool ** 2: int64, as bool + 2 (NOTE [type promotion])
        return apply(ops.Pow, base, exponent=exponent)

    def exp(self):
        return apply(ops.Exp, self._floating())

    def log(self):
        return apply(ops.Log, self._floating())

    def sqrt(self):
        return apply(ops.Sqrt, self._floating())

    def tanh(self):
        return apply(ops.Tanh, self._floating())

    def sigmoid(self):
        return apply(ops.Sigmoid, self._floating())

    def relu(self):
        return apply(ops.Relu, self)

    def abs(self):
        return apply(ops.Abs, self)

    def clamp(self, min=None, max=None):
        """Values below min become min, above max become max; the gradient passes where neither applies. min and max
        may be tensors (broadcasting), as in PyTorch: each then gets the gradient where it was chosen
        (ops.ClampTensor has the rules, ties included). Bounds promote an integer tensor (NOTE [type promotion])."""
        if min is None and max is None:
            raise ValueError("clamp: give min, max or both")
        if isinstance(min, Tensor) or isinstance(max, Tensor) or self._data.dtype.kind in "biu":
            return self._clamp_by_tensors(min, max)
        return apply(ops.Clamp, self, lo=min, hi=max)

    clip = clamp

    # --- reductions
    @dim_alias
    def sum(self, dim=None, keepdim=False):
        return apply(ops.Sum, self, dim=dim, keepdim=keepdim)

    @dim_alias
    def mean(self, dim=None, keepdim=False):
        return apply(ops.Mean, self._floating("mean"), dim=dim, keepdim=keepdim)

    @dim_alias
    def max(self, dim=None, keepdim=False):
        """Of all elements: the largest (ties share the gradient). Along one dim: (values, indices), as
        torch.max(dim), and the gradient goes to the index returned. amax gives the values alone."""
        return apply(ops.Max, self, keepdim=keepdim) if dim is None else self._along("max", ops.Max, dim, keepdim)

    @dim_alias
    def min(self, dim=None, keepdim=False):
        """Of all elements: the smallest (ties share the gradient). Along one dim: (values, indices)."""
        return apply(ops.Min, self, keepdim=keepdim) if dim is None else self._along("min", ops.Min, dim, keepdim)

    @dim_alias
    def prod(self, dim=None, keepdim=False):
        """The product of all elements, or along one dim (an int, as torch.prod)."""
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, (int, np.integer))):
            raise TypeError(f"prod: dim must be one int or None, got {dim!r}")
        return apply(ops.Prod, self, dim=dim, keepdim=keepdim)

    @dim_alias
    def cumsum(self, dim):
        """Running sums along dim: out[i] = x[0] + ... + x[i]."""
        return apply(ops.Cumsum, self, dim=dim)

    def maximum(self, other):
        """The larger of two tensors, elementwise (broadcasting); at a tie each gets half the gradient."""
        return self._binary(ops.Maximum, other, "maximum")

    def minimum(self, other):
        """The smaller of two tensors, elementwise (broadcasting); at a tie each gets half the gradient."""
        return self._binary(ops.Minimum, other, "minimum")

    @dim_alias
    def softmax(self, dim):
        return apply(ops.Softmax, self._floating("softmax"), dim=dim)

    @dim_alias
    def log_softmax(self, dim):
        return apply(ops.LogSoftmax, self._floating("log_softmax"), dim=dim)

    # --- shape
    def contiguous(self):
        """This tensor itself: minigrad's ops (view included) take arrays of any strides, and NumPy copies
        where it must, so nothing needs to be made contiguous first. Unlike torch, never a copy."""
        return self

    def reshape(self, *args, shape=None):
        shape = _shape(args) if shape is None else tuple(shape)  # reshape(2, 3), reshape((2, 3)) or shape=(2, 3)
        return apply(ops.Reshape, self, shape=shape)

    def view(self, *args, size=None):  # NOTE: unlike torch.view this also takes non-contiguous tensors (NumPy copies)
        return self.reshape(*args, shape=size)

    def transpose(self, dim0, dim1):
        return apply(ops.Transpose, self, dim0=dim0, dim1=dim1)

    def permute(self, *args, dims=None):
        dims = _shape(args) if dims is None else tuple(dims)  # permute(2, 0, 1), permute((2, 0, 1)) or dims=(2, 0, 1)
        return apply(ops.Permute, self, dims=dims)

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    def expand(self, *sizes, size=None):
        """A view with size-1 dims (and new leading dims) repeated to sizes, without copying; -1 keeps a dim.
        Its elements share memory, so it cannot be written in place."""
        sizes = _shape(sizes) if size is None else tuple(size)
        lead = len(sizes) - self.ndim
        if lead < 0:
            raise ShapeError(f"expand: {len(sizes)} sizes {sizes} for a tensor of {self.ndim} dims {self.shape}; "
                             f"give at least one size per dim")
        shape = list(sizes)
        for i, n in enumerate(sizes):
            old = self.shape[i - lead] if i >= lead else None
            if n == -1 and old is None:
                raise ShapeError(f"expand: -1 (keep the size) in sizes {sizes} names a new leading dim, which has "
                                 f"no size to keep")
            shape[i] = old if n == -1 else n
            if old is not None and old not in (1, shape[i]):
                raise ShapeError(f"expand: dim {i - lead} of shape {self.shape} has size {old}, which cannot become "
                                 f"{shape[i]}: only size-1 dims expand; repeat() copies data")
        return apply(ops.Expand, self, shape=tuple(shape))

    def expand_as(self, other):
        return self.expand(other.shape)

    def flip(self, *args, dims=None):
        """Reversed along dims (an int, several, or a list), as a copy (as torch.flip)."""
        dims = args if dims is None else dims
        if isinstance(dims, (int, np.integer)):
            dims = (dims,)
        elif len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = dims[0]
        return apply(ops.Flip, self, dims=tuple(dims))

    def __getitem__(self, key):
        return apply(ops.Index, self, key=_index_key(key, self))

    def masked_fill(self, mask, value):
        """value where mask is set: a number, or a 0-d tensor (in this dtype; its gradient sums where mask is set)."""
        mask = _bool_array(mask, self, "masked_fill")
        if not isinstance(value, Tensor):
            return apply(ops.MaskedFill, self, mask=mask, value=value)
        if value.ndim != 0:
            raise ShapeError(f"masked_fill: value must be a number or a 0-d tensor, got a tensor of shape "
                             f"{value.shape}; for a value of several elements write mg.where(mask, value, x)")
        if ops.broadcast_shapes(mask.shape, self.shape) != self.shape:
            raise ShapeError(f"masked_fill: mask of shape {mask.shape} does not broadcast to the input's shape "
                             f"{self.shape}")
        return _where(mask, value.to(self.device, self.dtype), self)

    def tril(self, diagonal=0):
        return apply(ops.Tri, self, diagonal=diagonal, upper=False)

    def triu(self, diagonal=0):
        return apply(ops.Tri, self, diagonal=diagonal, upper=True)


# ----------------------------------------------------------------------------- where a .grad comes from

def _set_grad(t, grad):
    """The one way a .grad comes into being (the grad setter, after its checks, and _accumulate)."""
    if grad is not None and _on.profiler is not None:
        _on.profiler.on_grad(grad._data)
    t._grad = grad
