"""PyTorch's names for what the Tensor does already (x.add(y) is x + y, x.mm(w) is x @ w, x.t(), x.new_zeros(...),
x.nbytes), as a class the Tensor inherits, and what a name it lacks says: its `__getattr__` raises an AttributeError
that says what to use instead (`advice`: x.einsum, x.scatter_, x.register_hook, ...) or the nearest name it has
(`nearest`, the did-you-mean that minigrad/names.py gives a module's missing names too). Nothing here makes a
record: each is the Tensor's operators or methods under another name, reached through self (tensor.py sits above).

Read next: tensor.py.
"""
import copy
import difflib
import operator

from .. import backend
from ..ops import ShapeError
from .args import _array_of, _shape, check_sizes, normalize_dtype


def nearest(name, offered):
    """The names of `offered` nearest a missing `name`: the same but for case, else difflib's close matches."""
    lower = {}
    for n in offered:
        lower.setdefault(n.lower(), []).append(n)
    return lower.get(name.lower()) or difflib.get_close_matches(name, offered, n=3, cutoff=0.6) or \
        [n for low in difflib.get_close_matches(name.lower(), list(lower), n=3, cutoff=0.6) for n in lower[low]]


# PyTorch's Tensor attributes that minigrad does not offer, and what to write instead (minigrad/names.py's not_offered
# says the same of a module's names); any other missing name gets the nearest the Tensor has (Names.__getattr__)
_F = "it is a function, in PyTorch too: F.{}(x), after `import minigrad.functional as F`"
_FLOOR = ("for index arithmetic, compute on the values outside the tape, mg.tensor(x.numpy() // k, device=x.device) "
          "(an index needs no gradient)")
_INSTEAD = {
    "einsum": "minigrad has no einsum: write it with @, transpose or permute, reshape and sum "
              "('bij,bjk->bik' is a @ b)",
    **{n: "minigrad has no scatter: write into a copy by index, y = x.clone(); y[index] = src; the gradients of "
          "gather, index_select and x[index] scatter-add for you"
       for n in ("scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "index_add", "index_add_")},
    **{n: "a tensor's memory is its array, x.data (NumPy's or CuPy's): x.data.strides counts bytes (PyTorch's "
          "stride() counts elements), x.data.flags says if it is contiguous; minigrad's ops take any strides, so "
          "x.contiguous() is x itself" for n in
       ("stride", "is_contiguous", "data_ptr", "storage", "untyped_storage", "storage_offset")},
    "register_hook": "the tape has no hooks: call y.retain_grad() before backward and read y.grad after it",
    "type": "x.dtype names the dtype; x.to(dtype) converts (or x.float(), x.double(), x.long(), x.int(), x.bool())",
    "astype": "x.to(dtype), as PyTorch writes NumPy's astype", "copy": "x.clone() copies, as NumPy's x.copy()",
    "detach_": "write x = x.detach(): minigrad does not cut a tensor from the tape in place",
    "log1p": "compose it: (1 + x).log(), which loses digits where |x| < 1e-8 (PyTorch's log1p does not)",
    "expm1": "compose it: x.exp() - 1, which loses digits where |x| < 1e-8 (PyTorch's expm1 does not)",
    "erf": "minigrad has erf only inside exact GELU (F.gelu, backend/special.py), not as an op",
    "nan_to_num": "write mg.where(x.isnan(), 0.0, x) (and x.isinf() for the infinities)",
    "roll": "cut and join: mg.cat([x[-shift:], x[:-shift]]) rolls dim 0 by shift (0 < shift < its size)",
    **{n: "x.permute(...) moves dims (x.permute(0, 2, 1) moves dim 1 last); x.transpose(i, j) swaps two"
       for n in ("movedim", "moveaxis", "swapaxes", "swapdims")},
    "tile": "x.tile(reps) is x.repeat(*reps) with reps padded by leading 1s to x.ndim, as PyTorch's tile",
    "repeat_interleave": "x.unsqueeze(d + 1).expand(..., r, ...).flatten(d, d + 1) repeats each entry of dim d r times",
    "take_along_dim": "x.gather(dim, index) (index with x's number of dims)",
    "median": "write it with sort: x.sort(d).values.narrow(d, (n - 1) // 2, 1), n = x.shape[d], is PyTorch's median "
              "along d (the lower of the two middle values)",
    "cumprod": "minigrad has no cumprod; for positive x, x.log().cumsum(d).exp()",
    **{n: "minigrad has no floor division or remainder (x // y, x % y): " + _FLOOR
       for n in ("floor_divide", "floor_divide_", "remainder", "remainder_", "fmod", "fmod_")},

    **{n: _F.format(n) for n in ("softplus", "silu", "leaky_relu", "gelu", "normalize", "one_hot")},
}


def advice(name):
    """What to write instead of `name`, a PyTorch Tensor attribute that minigrad does not offer (x.einsum, x.scatter_,
    x.register_hook, ...), or None where it has no advice: what a Tensor's missing attribute says (Names.__getattr__),
    and mg's too (minigrad/names.py), since PyTorch has most of these as torch functions as well (torch.einsum)."""
    return _INSTEAD.get(name)


def _alpha(op, alpha, t):
    if isinstance(alpha, bool) and t.dtype != bool:  # as PyTorch: True would be read as 1 unseen
        raise TypeError(f"{op}: alpha={alpha} is a bool, which only a bool tensor takes; give a number (1 or 0)")
    return alpha


class Names:
    """PyTorch's method names for the Tensor's operators and methods, new tensors like this one, its sizes in bytes,
    copy.deepcopy's rule, and what a name it lacks says: // and % (_floor), and any other (__getattr__)."""
    __slots__ = ()
    # the ledger reads x._is_parameter for each input of every op (NOTE [marks, not imports], profiler/ledger.py):
    # found here, a plain tensor's False costs a lookup; missing, it would cost __getattr__'s raise, 30 times more
    _is_parameter = False

    def add(self, other, *, alpha=1):
        """self + alpha * other, as torch.add."""
        return self + (other if _alpha("add", alpha, self) == 1 else other * alpha)

    def sub(self, other, *, alpha=1):
        """self - alpha * other, as torch.sub."""
        return self - (other if _alpha("sub", alpha, self) == 1 else other * alpha)

    def mul(self, other):
        return self * other

    def div(self, other, *, rounding_mode=None):
        if rounding_mode is not None:
            raise ValueError(f"div: rounding_mode={rounding_mode!r} is not supported: minigrad's division is true "
                             f"division; for indices, divide the integer arrays outside the tape (x.data // k)")
        return self / other

    def eq(self, other):
        return self._compared("eq", other, operator.eq)

    def ne(self, other):
        return self._compared("ne", other, operator.ne)

    def _compared(self, name, other, fn):
        """x.eq(y), x.ne(y): as == and != (methods.py), but None, a str or a list is PyTorch's TypeError, not the
        False of Python's identity that the operators fall back to."""
        out = self._compare(other, fn, identity=True)
        if out is NotImplemented:
            raise TypeError(f"{name}: expected a Tensor or a number to compare with, got {type(other).__name__}; "
                            f"x == y compares a tensor with None by identity (False), as in PyTorch")
        return out

    def neg(self):
        return -self

    def matmul(self, other):
        return self @ other

    def _two(self, name, other, ndim, what):
        if self.ndim != ndim or getattr(other, "ndim", None) != ndim:
            raise ShapeError(f"{name}: needs two {ndim}-d tensors ({what}), got shapes {self.shape} and "
                             f"{getattr(other, 'shape', type(other).__name__)}; x @ y (matmul) broadcasts any dims")
        return other

    def mm(self, mat2):
        return self @ self._two("mm", mat2, 2, "matrices")

    def bmm(self, mat2):
        return self @ self._two("bmm", mat2, 3, "batches of matrices")

    def dot(self, other):
        return self @ self._two("dot", other, 1, "vectors")

    def outer(self, vec2):
        """self[i] * vec2[j], as torch.outer."""
        return self.reshape(-1, 1) * self._two("outer", vec2, 1, "vectors").reshape(1, -1)

    def square(self):
        return self ** 2

    def rsqrt(self):
        """1 / sqrt(x), as x ** -0.5 (one op, which saves x)."""
        return self.pow(-0.5)

    def reciprocal(self):
        """1 / x, as x ** -1 (one op, which saves x)."""
        return self.pow(-1)

    def where(self, condition, other):
        """mg.where(condition, self, other)."""
        return self._where(condition, self, other)

    def view_as(self, other):
        return self.view(other.shape)

    def reshape_as(self, other):
        return self.reshape(other.shape)

    def type_as(self, other):
        return self.to(other.dtype)

    def int(self):
        return self.to("int32")

    def bool(self):
        return self.to("bool")

    def t(self):
        """The transpose of a matrix; a 0-d or 1-d tensor as it is, as torch.t."""
        if self.ndim > 2:
            raise ShapeError(f"t: expects a tensor with <= 2 dims, got shape {self.shape}; for the last two dims of "
                             f"a batch write x.mT (or x.transpose(-2, -1))")
        return self.transpose(0, 1) if self.ndim == 2 else self

    @property
    def mT(self):
        """The last two dims swapped (a batch of matrices transposed), as torch's x.mT."""
        if self.ndim < 2:
            raise ShapeError(f"mT: needs at least 2 dims (a matrix or a batch of them), got shape {self.shape}")
        return self.transpose(-2, -1)

    # --- new tensors like this one (its dtype and device unless given) and what this one holds
    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
        device = self.device if device is None else backend.normalize_device(device)
        dtype = self.dtype if dtype is None else normalize_dtype(dtype)
        return self._new(backend.xp_for(device).full(check_sizes("new_full", (size,)), fill_value, dtype=dtype),
                         requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        return self.new_full(_shape(size), 0, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return self.new_full(_shape(size), 1, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        """As torch's, but zeros rather than whatever the memory held, so that nothing reads garbage."""
        return self.new_zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
        return self._new(_array_of(data, dtype or self.dtype, device or self.device), requires_grad)

    def element_size(self):
        return self._data.dtype.itemsize

    @property
    def itemsize(self):
        return self._data.dtype.itemsize

    @property
    def nbytes(self):
        return self._data.size * self._data.dtype.itemsize

    def nelement(self):
        return self._data.size

    def is_floating_point(self):
        return backend.is_float(self._data.dtype)

    @property
    def is_cuda(self):
        return self.device == "cuda"

    def _floor(self, other):
        """x // y, x % y and their reflected and in-place forms (PyTorch's floor_divide and remainder), which minigrad
        lacks: what to write instead, not Python's 'unsupported operand type(s)'."""
        raise TypeError(f"// and %: minigrad has no floor division or remainder on tensors (here {self.dtype.name} "
                        f"of shape {self.shape}); {_FLOOR}")

    __floordiv__ = __rfloordiv__ = __ifloordiv__ = __mod__ = __rmod__ = __imod__ = _floor

    def __deepcopy__(self, memo):
        """copy.deepcopy, as PyTorch's: a leaf is copied (its .grad too); a tensor an op made while recording is
        refused, as PyTorch's non-leaf, rather than copied with the graph behind it."""
        if self._ctx is not None:
            raise RuntimeError(f"deepcopy: only Tensors created explicitly by the user (graph leaves) support the "
                               f"deepcopy protocol, as in PyTorch; this {self.dtype} tensor of shape {self.shape} was "
                               f"made by {self._ctx.name}. Deepcopy x.detach() (the values), or the leaves it came "
                               f"from")
        new = memo[id(self)] = object.__new__(type(self))
        for slot in ("_data", "_requires_grad", "_grad", "_ctx", "_vc"):
            setattr(new, slot, copy.deepcopy(getattr(self, slot), memo))
        return new

    def __getattr__(self, name):
        """Only for a name the Tensor lacks (a PyTorch method minigrad does not offer, or a typo): an AttributeError
        that says what to use instead (_INSTEAD), or the nearest name it has."""
        msg = f"'Tensor' object has no attribute {name!r}"
        if name.startswith("_"):  # Python's and minigrad's own probes (__array__, _is_module): no advice
            raise AttributeError(msg)
        if hasattr(type(self), name):  # a property that raised AttributeError itself: let its own error through
            return object.__getattribute__(self, name)
        if name in _INSTEAD:
            raise AttributeError(f"{msg}: {_INSTEAD[name]}")
        if name.endswith("_") and callable(getattr(type(self), name[:-1], None)):
            raise AttributeError(f"{msg}: minigrad has no in-place {name[:-1]}; write x = x.{name[:-1]}(...) (its "
                                 f"in-place writes are add_, sub_, mul_, div_, fill_, zero_, copy_, clamp_, "
                                 f"masked_fill_ and t[key] = value)")
        close = nearest(name, [n for n in dir(type(self)) if not n.startswith("_")])
        raise AttributeError(msg + (f"; did you mean {' or '.join(repr(n) for n in close)}?" if close else ""))
