"""The differentiable ops, on raw arrays: each op is one small class with its forward and its backward.

An op never sees a Tensor. `forward(*arrays, **attrs)` computes the output and calls
`self.save_for_backward(...)` for exactly the arrays its backward will need; `backward(grad)`
returns one gradient per input, or None for an input whose `needs_input_grad` is False
(the data batch, a frozen weight): that work is skipped, not done and thrown away.

An op instance is also the record the tape keeps (see tensor.py): its saved arrays are the
activation memory that checkpointing trades for compute.

Read next: tensor.py, which runs these ops, records them and walks them backwards.
"""
import copy
import math
import operator

import numpy as np

from ..backend import (POOL_MIN, broadcast_to, device_of, empty, empty_like, index_add, masked_fill, max_rows, mean_rows,
                       out_like, pooled, reduce_sum, reshape, sum_leading, sum_rows, to_device, xp_for, xp_of, zeros)
from ..random import generator, get_rng_state
from ..special import normal_cdf


# NOTE [FLOP convention]: a matrix product counts 2*m*n*k (one multiply and one add per term),
# reported under op 'matmul' whichever op issues it (matmul, linear). Every other op counts
# FLOPs per element, by its class's `flops_per_element = (forward, (backward per input, ...))`:
# `forward` per output element; `backward` per element of the incoming gradient, for each input
# whose gradient is computed (an input that needs no gradient costs nothing), plus one add per
# element summed away when that input was broadcast. Exp, log, tanh, erf and sqrt count as one
# FLOP each, as most counters do. Ops that only move data (reshape, index, cat, ...) count zero
# (None: any number of inputs, all zero). Reductions and the fused ops (linear, layer_norm, ...)
# override Op.flops/backward_flops next to their code. docs/ledger.md shows flops_table(); a test
# keeps the two equal.


class Op:
    """Base class of every op. Subclasses set `name` and define forward and backward."""
    name = "op"
    same_dtype = True      # the tape checks that every input has one dtype and device
    returns_view = False   # its output may be a view of an input (reshape, transpose, a slice)
    recomputes = False     # its backward makes again what it did not save (a checkpoint): it runs once, as one
    #                        that saved arrays (NOTE [memory drains], tensor.py)
    needs_input_grad = ()  # one bool per input, set by the tape before forward runs
    saved = ()             # what save_for_backward named, while the record keeps it
    # set by the tape (tensor.py) when the op is recorded:
    next = ()              # per input: the op that made it, the leaf tensor itself, or None (no grad)
    seq = 0                # creation order: the tape runs records newest first
    released = False       # True once backward has freed `saved` (unless retain_graph)
    versions = ()          # per kept array a tensor holds: (its version counter, count when kept, index, input)
    retained = None        # weakref to the output, when someone called retain_grad() on it
    saved_meta = ()        # (shape, dtype, device) of each array keep() dropped (inside a checkpoint's forward)

    def save_for_backward(self, *arrays):
        """Name exactly the arrays that backward will read. The tape's `keep` (tensor.py, NOTE [one
        choke point]) then decides whether the record keeps them, and counts them."""
        self.saved = arrays

    def forward(self, *arrays, **attrs):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, grad):
        raise NotImplementedError(f"{type(self).__name__}.backward")

    # FLOPs (NOTE [FLOP convention]); the profiler calls these, the engine never does
    def _table(self):
        row = getattr(self, "flops_per_element", NotImplemented)
        if row is NotImplemented:
            raise NotImplementedError(f"{self.name}: no FLOP formula; give {type(self).__name__} a "
                                      f"flops_per_element or override flops/backward_flops")
        return row or (0, ())

    def flops(self, inputs, out):
        """{op name: FLOPs} of this forward, from the input and output arrays."""
        return {self.name: self._table()[0] * out.size}

    def backward_flops(self, grad, input_grads):
        """{op name: FLOPs} of this backward: only the input gradients actually computed."""
        per_input = self._table()[1]
        n = sum(per * grad.size + max(grad.size - gi.size, 0)
                for per, gi in zip(per_input, input_grads) if gi is not None)
        return {self.name: n}


class ShapeError(ValueError, RuntimeError):
    """Shapes that do not fit: a ValueError, and a RuntimeError as PyTorch raises them, so that either
    `except` catches it."""


def flops_table():
    """{op name: flops_per_element} of every op counted per element (NOTE [FLOP convention]), with each
    variant an op switches to as its own row (GELU's tanh approximation as 'gelu_tanh', dropout with a float
    mask as 'dropout_float_mask'): the table docs/ledger.md shows."""
    table, stack = {}, [Op]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        for attr, row in vars(cls).items():  # flops_per_element, and variants such as flops_per_element_tanh
            if attr == "flops_per_element":
                table[cls.name] = row
            elif attr.startswith("flops_per_element_"):
                table[cls.name + attr[len("flops_per_element"):]] = row
    return table


def broadcast_shapes(*shapes):
    """The shape that NumPy broadcasting gives these shapes, or None when they do not broadcast."""
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        return None


def unbroadcast(grad, shape):
    """Sum `grad` down to `shape`: the backward of NumPy broadcasting."""
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and grad.shape[lead + i] != 1)
    return grad.sum(axis=axes).reshape(shape)


def rows(a):
    """a as a 2-d array of rows, every leading dim a batch dim (no call at all when it is 2-d already). The row
    count is spelled out for an empty array, whose -1 NumPy cannot infer when a row is empty too."""
    if a.ndim == 2:
        return a
    return a.reshape(-1, a.shape[-1]) if a.size else a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def matmul(a, b):
    """a @ b; a big result goes into an array from the pool (NOTE [host memory pool] in backend.py)."""
    if a.ndim < 2 or b.ndim < 2 or not a.shape[-1] or a.size // a.shape[-1] * b.shape[-1] * a.itemsize < POOL_MIN:
        return a @ b  # 1-d operands as NumPy's @; a small result (or k == 0: zeros) from malloc, no pool look-up
    shape = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
    return xp_of(a).matmul(a, b, out=empty(shape, a.dtype, a))


def normalize_dims(op, dim, ndim, shape=None):
    """dim (None, (), int or tuple, possibly negative) -> a sorted tuple of axes, or a clear IndexError.
    None and () mean every dim, as in PyTorch's reductions."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not lo <= d <= hi:
            raise IndexError(f"{op}: dim {d!r} is out of range for a tensor of shape {shape} "
                             f"(expected an int in [{lo}, {hi}])")
    axes = [int(d) % ndim if ndim else 0 for d in dims]
    if len(set(axes)) != len(axes):
        raise IndexError(f"{op}: dim {tuple(dims)} names the same dim twice (tensor of shape {shape})")
    return tuple(sorted(axes)) if ndim else ()  # a 0-d tensor has no axes to reduce


def keepdim_shape(shape, axes):
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


# ----------------------------------------------------------------------------- elementwise, binary

class Add(Op):
    """d(a + b) = (g, g), summed over broadcast dims."""
    name = "add"
    flops_per_element = (1, (0, 0))

    def forward(self, a, b):
        self.shapes = a.shape, b.shape
        return pooled(xp_of(a).add, a, b)  # a + b, from the pool (NOTE [host memory pool] in backend.py)

    def backward(self, g):
        sa, sb = self.shapes
        na, nb = self.needs_input_grad
        return (unbroadcast(g, sa) if na else None), (unbroadcast(g, sb) if nb else None)


class Sub(Op):
    """d(a - b) = (g, -g)."""
    name = "sub"
    flops_per_element = (1, (0, 1))  # -g for b

    def forward(self, a, b):
        self.shapes = a.shape, b.shape
        return pooled(xp_of(a).subtract, a, b)

    def backward(self, g):
        sa, sb = self.shapes
        na, nb = self.needs_input_grad
        return (unbroadcast(g, sa) if na else None), (unbroadcast(-g, sb) if nb else None)


class Mul(Op):
    """d(a * b) = (g * b, g * a): each input is saved only if the other needs its gradient."""
    name = "mul"
    flops_per_element = (1, (1, 1))  # g * b, g * a

    def forward(self, a, b):
        na, nb = self.needs_input_grad
        self.shapes = a.shape, b.shape
        self.save_for_backward(a if nb else None, b if na else None)
        return pooled(xp_of(a).multiply, a, b)

    def backward(self, g):
        a, b = self.saved
        sa, sb = self.shapes
        mul = xp_of(g).multiply
        return ((unbroadcast(pooled(mul, g, b), sa) if b is not None else None),
                (unbroadcast(pooled(mul, g, a), sb) if a is not None else None))


class Div(Op):
    """d(a / b) = (g / b, -g * a / b^2), computed as -g * (a / b) / b: b * b alone under- or overflows
    in float32 for |b| below 1e-19 or above 1e19, where the quotient is still finite."""
    name = "div"
    flops_per_element = (1, (1, 3))  # g / b; -g * a / (b * b)

    def forward(self, a, b):
        nb = self.needs_input_grad[1]
        self.shapes = a.shape, b.shape
        self.save_for_backward(a if nb else None, b)
        return a / b

    def backward(self, g):
        a, b = self.saved
        sa, sb = self.shapes
        na, nb = self.needs_input_grad
        return ((unbroadcast(g / b, sa) if na else None),
                (unbroadcast(-g * (a / b / b), sb) if nb else None))


class Pow(Op):
    """d(x ** p) = p * x ** (p - 1), for a constant exponent p; with zero_at_zero, 0 where x = 0 (NOTE [a root's
    gradient at zero])."""
    name = "pow"
    flops_per_element = (1, (3,))  # g * p * x ** (p - 1)
    zero_at_zero = False

    def forward(self, x, exponent, zero_at_zero=False):
        self.exponent, self.zero_at_zero = exponent, zero_at_zero
        self.save_for_backward(x)
        return power(x, exponent)

    def backward(self, g):
        (x,) = self.saved
        p = self.exponent
        if p == 0:  # x ** 0 is constant; p * x ** -1 would give 0 * inf = nan at x = 0
            return (g * 0,)
        if not self.zero_at_zero:
            return (g * (p * power(x, p - 1)),)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (masked_fill(g * (p * power(x, p - 1)), x == 0, 0),)


# NOTE [a root's gradient at zero]: a norm is a root of a sum, sqrt(sum x^2) or (sum |x|^p) ** (1/p), and so is a
# std, sqrt(var); at a sum of 0 (a zero vector, a constant row) the root's derivative is infinite and the chain
# rule gives 0 * inf = nan. PyTorch's norm and std backward give 0 there; so do Sqrt and Pow with zero_at_zero,
# which norm and std (tensor.py, _root) set. A flag of the op rather than a where() chosen by looking at the
# values: the tape is the same whatever the values, so a checkpoint's recompute (whose inputs may be placeholders)
# records the ops its forward did, and 'meta' arrays, which have no values, run it too.


def power(x, p):
    """x ** p for a constant p, with PyTorch's special cases: x ** 3 is x * x * x, x ** -2 is 1 / (x * x), x ** -0.5
    is 1 / sqrt(x). NumPy squares, takes square roots and reciprocals itself, but for any other exponent it calls
    the C library's pow number by number, which in float32 is slow: x ** 3 on a GPT's (8, 64, 512) activations
    took 12 ms on this project's machine, x * x * x 0.04 ms."""
    if p == 3:
        return x * x * x
    if p == -2:
        return 1 / (x * x)
    if p == -0.5:
        return 1 / xp_of(x).sqrt(x)
    return x ** p


class PowTensor(Op):
    """d(a ** b) = (b a^(b-1), a^b log a), with PyTorch's zeros where b == 0 (for a) and where a == 0 and
    b >= 0 (for b), so that 0 ** t and t ** 0 have finite gradients."""
    name = "pow_tensor"
    flops_per_element = (1, (3, 2))  # b * a ** (b - 1); out * log a

    def forward(self, a, b):
        na, nb = self.needs_input_grad
        self.shapes = a.shape, b.shape
        xp = xp_of(a)
        with np.errstate(invalid="ignore", divide="ignore"):  # (-2) ** 0.5 is nan, 0 ** -1 is inf: as PyTorch
            out = xp.power(a, b)
        self.save_for_backward(a, b, out if nb else None)
        return out

    def backward(self, g):
        a, b, out = self.saved
        na, nb = self.needs_input_grad
        xp = xp_of(g)
        sa, sb = self.shapes
        ga = gb = None
        with np.errstate(invalid="ignore", divide="ignore"):
            if na:
                ga = unbroadcast(xp.where(b == 0, 0, g * b * xp.power(a, b - 1)).astype(g.dtype, copy=False), sa)
            if nb:
                gb = unbroadcast(xp.where((a == 0) & (b >= 0), 0, g * out * xp.log(a)).astype(g.dtype, copy=False), sb)
        return ga, gb


class IndexPut(Op):
    """x[key] = v as an op: y is x with v written at key; dx = g with zeros at key, dv = g[key] summed to
    v's shape. (At an integer index repeated in key, NumPy keeps the last write; dv counts each.)"""
    name = "index_put"
    flops_per_element = (0, (0, 0))

    def forward(self, x, v, key):
        self.v_shape = v.shape
        self.arrays_at = [i for i, k in enumerate(key) if not (k is None or k is Ellipsis or isinstance(k, (int, slice)))]
        self.key = tuple(None if i in self.arrays_at else k for i, k in enumerate(key))
        self.save_for_backward(*(key[i] for i in self.arrays_at))
        y = x.copy()
        try:
            y[key] = v
        except (IndexError, ValueError) as e:
            raise type(e)(f"index_put: {e} (tensor of shape {x.shape}, value of shape {v.shape})") from None
        return y

    def backward(self, g):
        key = list(self.key)
        for i, arr in zip(self.arrays_at, self.saved):
            key[i] = arr
        key = tuple(key)
        na, nv = self.needs_input_grad
        gx = gv = None
        if na:
            gx = g.copy()
            gx[key] = 0
        if nv:
            gv = unbroadcast(g[key], self.v_shape)
            self.summed = g[key].size - gv.size  # adds where v was broadcast over the indexed part
        return gx, gv

    def backward_flops(self, grad, input_grads):
        return {self.name: getattr(self, "summed", 0)}


class Clamp(Op):
    """clamp(x, lo, hi); dx = g where lo <= x <= hi, else 0 (as PyTorch: the bounds pass the gradient)."""
    name = "clamp"
    flops_per_element = (2, (2,))  # max, min; compare, *

    def forward(self, x, lo=None, hi=None):
        xp = xp_of(x)
        keep = xp.ones(x.shape, dtype=bool)
        if lo is not None:
            keep &= x >= lo
        if hi is not None:
            keep &= x <= hi
        self.save_for_backward(keep)
        return xp.clip(x, lo, hi) if (lo is not None or hi is not None) else x.copy()

    def backward(self, g):
        return (g * self.saved[0],)


class ClampTensor(Op):
    """clamp(x, lo, hi) with tensor bounds (broadcasting; `sides` names the bounds given, after x), by PyTorch's rules:
    the value is min(max(x, lo), hi) (x itself at a tie); dx = g where lo <= x <= hi (a tie is x's), dlo = g where
    x < lo < hi, dhi = g where x > hi or hi < lo (then hi wins). Nobody's where a value is nan, nor where x < lo == hi
    (PyTorch's clamp_backward and clamp_backward_min_max give nothing there either)."""
    name = "clamp_tensor"
    flops_per_element = (2, (2, 2, 2))  # max, min; per input: compare, * g

    def forward(self, x, *bounds, sides):
        xp = xp_of(x)
        given = dict(zip(sides, bounds))
        lo, hi = given.get("lo"), given.get("hi")
        self.shapes = (x.shape,) + tuple(b.shape for b in bounds)
        if hi is None:
            masks, out = [x >= lo, x < lo], xp.maximum(x, lo)
        elif lo is None:
            masks, out = [x <= hi, x > hi], xp.minimum(x, hi)
        else:
            masks = [(x >= lo) & (x <= hi), (x < lo) & (lo < hi), (x > hi) | (hi < lo)]
            out = xp.minimum(xp.maximum(x, lo), hi)
        out = xp.where(masks[0], x, out)  # NumPy's maximum gives its second argument at a tie (0 and -0): x's sign
        self.save_for_backward(*[m if need else None for m, need in zip(masks, self.needs_input_grad)])
        return out

    def backward(self, g):
        return tuple(None if m is None else unbroadcast(g * m, shape) for m, shape in zip(self.saved, self.shapes))


class Maximum(Op):
    """maximum(a, b) elementwise; g goes to the larger, split in half at ties (as PyTorch). Its own op: a
    where() gives a tie's whole gradient to one side."""
    name = "maximum"
    flops_per_element = (1, (4, 4))  # max; per input: compare, tie, select, * g
    pick, wins = "maximum", staticmethod(operator.gt)

    def forward(self, a, b):
        self.shapes = a.shape, b.shape
        self.save_for_backward(a, b)
        return getattr(xp_of(a), self.pick)(a, b)

    def backward(self, g):
        a, b = self.saved
        na, nb = self.needs_input_grad
        xp = xp_of(g)
        share = xp.where(a == b, 0.5, self.wins(a, b)).astype(g.dtype, copy=False)  # a's share of g
        sa, sb = self.shapes
        return ((unbroadcast(g * share, sa) if na else None),
                (unbroadcast(g * (1 - share), sb) if nb else None))


class Minimum(Maximum):
    """minimum(a, b) elementwise; g goes to the smaller, split in half at ties."""
    name = "minimum"
    flops_per_element = Maximum.flops_per_element
    pick, wins = "minimum", staticmethod(operator.lt)


class Neg(Op):
    """d(-x) = -g."""
    name = "neg"
    flops_per_element = (1, (1,))

    def forward(self, x):
        return -x

    def backward(self, g):
        return (-g,)


# ----------------------------------------------------------------------------- elementwise, unary

class Exp(Op):
    """d exp(x) = exp(x): the output is saved, not the input."""
    name = "exp"
    flops_per_element = (1, (1,))

    def forward(self, x):
        y = xp_of(x).exp(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        return (g * self.saved[0],)


class Log(Op):
    """d log(x) = 1 / x."""
    name = "log"
    flops_per_element = (1, (1,))

    def forward(self, x):
        self.save_for_backward(x)
        return xp_of(x).log(x)

    def backward(self, g):
        return (g / self.saved[0],)


class Sqrt(Op):
    """d sqrt(x) = 1 / (2 sqrt(x)); with zero_at_zero, 0 where x = 0 (NOTE [a root's gradient at zero])."""
    name = "sqrt"
    flops_per_element = (1, (2,))  # g / (2 y)
    zero_at_zero = False

    def forward(self, x, zero_at_zero=False):
        y = xp_of(x).sqrt(x)
        self.zero_at_zero = zero_at_zero
        self.save_for_backward(y)
        return y

    def backward(self, g):
        (y,) = self.saved
        if not self.zero_at_zero:
            return (g / (2 * y),)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (masked_fill(g / (2 * y), y == 0, 0),)


class Tanh(Op):
    """d tanh(x) = 1 - tanh(x)^2."""
    name = "tanh"
    flops_per_element = (1, (3,))  # g * (1 - y * y)

    def forward(self, x):
        y = xp_of(x).tanh(x, out=out_like(x))  # NOTE [host memory pool] (backend.py)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        (y,) = self.saved
        xp = xp_of(y)
        d = xp.multiply(y, y, out=empty_like(y))  # not out_like: a 0-d product without out= is a scalar
        xp.subtract(1, d, out=d)
        d *= g  # g (1 - y^2), in the one array
        return (d,)


class Sigmoid(Op):
    """d sigmoid(x) = s (1 - s); computed from exp(-|x|), which neither overflows nor cancels."""
    name = "sigmoid"
    flops_per_element = (5, (3,))  # |x|, -, exp, +, /;  g * y * (1 - y)

    def forward(self, x):
        xp = xp_of(x)
        e = xp.exp(-xp.abs(x))
        y = xp.where(x >= 0, 1 / (1 + e), e / (1 + e))
        self.save_for_backward(y)
        return y

    def backward(self, g):
        (y,) = self.saved
        return (g * y * (1 - y),)


class Abs(Op):
    """d |x| = sign(x) (0 at 0, as in PyTorch)."""
    name = "abs"
    flops_per_element = (1, (2,))  # sign, *

    def forward(self, x):
        self.save_for_backward(x)
        return xp_of(x).abs(x)

    def backward(self, g):
        return (g * xp_of(g).sign(self.saved[0]),)


class Relu(Op):
    """d relu(x) = 1 where x > 0, else 0 (the output tells which)."""
    name = "relu"
    flops_per_element = (1, (2,))  # compare, *

    def forward(self, x):
        y = xp_of(x).maximum(x, 0)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        return (g * (self.saved[0] > 0),)


# NOTE [GELU at large x]: GELU's tanh approximation computes x^3, which overflows far below the largest float
# (|x| > 5.6e102 in float64, 7e12 in float32), where tanh is long saturated at +-1 and the exact value is x (or -0),
# as PyTorch gives. The forward halves 1 + tanh before x multiplies it, so that 2 x never overflows (x near the
# largest float): halving is exact, so the bits are the same as 0.5 * (x * (1 + t)) for every input that did not
# overflow, at no cost. The backward's x^3 term, though, becomes inf * 0 = nan there (PyTorch's too, but only once
# x^2 overflows, |x| > 1.3e154). Rather than another pass over every gradient to look for that, the backward runs
# with NumPy's overflow and invalid checks raising (the processor's flags, read after each ufunc: about 2 us a
# call); on the rare input that trips them it runs again and puts the limits, 1 for x > 20 and 0 for x < -20
# (tanh is exactly +-1 there in every float dtype), where x is finite. CuPy has no such flags: on the GPU the
# backward stays nan there.
class Gelu(Op):
    """gelu(x) = x Phi(x); d gelu = Phi(x) + x phi(x) (or the derivative of the tanh approximation)."""
    name = "gelu"
    flops_per_element = (5, (11,))  # exact: x/sqrt2, erf, +1, *0.5, *x; cdf, pdf, x*pdf, +, *g
    flops_per_element_tanh = (8, (18,))  # the tanh approximation
    K = math.sqrt(2 / math.pi)

    def forward(self, x, approximate="none"):
        self.approximate = approximate
        self.save_for_backward(x)
        if approximate == "tanh":
            self.flops_per_element = self.flops_per_element_tanh
            y = self._tanh_of_inner(x)
            y += 1
            y *= 0.5  # halved before x multiplies (NOTE [GELU at large x])
            y *= x  # 0.5 x (1 + tanh(K (x + 0.044715 x^3))), in place (NOTE [host memory pool])
            return y
        y = normal_cdf(x)  # Phi(x) = (1 + erf(x / sqrt 2)) / 2: see special.normal_cdf
        y *= x
        return y

    def _tanh_of_inner(self, x):
        """tanh(K (x + 0.044715 x^3)), in an array of its own."""
        t = xp_of(x).square(x, out=empty_like(x))
        t *= x
        t *= 0.044715
        t += x
        t *= self.K
        return xp_of(x).tanh(t, out=t)

    def _tanh_backward(self, x, g):
        """g (0.5 (1 + t) + 0.5 x (1 - t^2) K (1 + 3 0.044715 x^2)), t the tanh above, in arrays of its own."""
        xp = xp_of(x)
        t = self._tanh_of_inner(x)
        d = xp.square(x, out=empty_like(x))
        d *= 3 * 0.044715
        d += 1
        d *= self.K
        d *= x
        d *= 0.5
        u = xp.square(t, out=empty_like(x))
        xp.subtract(1, u, out=u)
        d *= u
        t += 1
        t *= 0.5
        t += d
        t *= g
        return t

    def backward(self, g):
        (x,) = self.saved
        xp = xp_of(x)
        if self.approximate == "tanh":
            try:
                with np.errstate(over="raise", invalid="raise"):
                    return (self._tanh_backward(x, g),)
            except FloatingPointError:  # NOTE [GELU at large x]
                with np.errstate(all="ignore"):
                    grad = self._tanh_backward(x, g)
                    saturated = xp.isfinite(x) & (xp.abs(x) > 20)
                    return (xp.where(saturated, (x > 0) * g, grad).astype(grad.dtype, copy=False),)
        grad = xp.square(x, out=empty_like(x))  # in place from here: GELU's activations are a GPT's widest
                                                # (out=: NumPy would return a 0-d result as a scalar)
        grad *= -0.5
        xp.exp(grad, out=grad)
        grad *= x
        grad *= 1 / math.sqrt(2 * math.pi)  # x phi(x)
        grad += normal_cdf(x)
        grad *= g
        return (grad,)


class Cast(Op):
    """x.to(dtype); the gradient goes back in the input's dtype."""
    name = "cast"
    flops_per_element = (0, (0,))

    def forward(self, x, dtype):
        self.in_dtype = x.dtype
        return x.astype(dtype)

    def backward(self, g):
        return (g.astype(self.in_dtype),)


class ToDevice(Op):
    """x.to(device); the gradient goes back to the input's device."""
    name = "to_device"
    flops_per_element = (0, (0,))

    def forward(self, x, device):
        self.in_device = device_of(x)
        return to_device(x, device)

    def backward(self, g):
        return (to_device(g, self.in_device),)


# ----------------------------------------------------------------------------- reductions

class Sum(Op):
    """d sum(x) = g, broadcast back over the summed dims."""
    name = "sum"

    def forward(self, x, dim=None, keepdim=False):
        self.shape = x.shape
        self.axes = normalize_dims(self.name, dim, x.ndim, x.shape)
        self.keepdim = keepdim
        return reduce_sum(x, self.axes, keepdim)

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
        out = super().forward(x, dim, keepdim)
        self.count = math.prod(x.shape[a] for a in self.axes)
        return out / self.count if self.count else out * math.nan

    def backward(self, g):
        return super().backward(g / self.count)

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
            raise ShapeError(f"{self.name}: the input of shape {x.shape} has no element along dims {self.axes}; "
                             f"the {self.name} of nothing is undefined")
        self.keepdim = keepdim
        out = getattr(x, self.name)(axis=self.axes, keepdims=True)
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
        return x.prod(axis=self.axis, keepdims=keepdim)

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
        axes = normalize_dims(self.name, dim, x.ndim, x.shape)
        self.axis = axes[0] if axes else None
        return x.copy() if self.axis is None else xp_of(x).cumsum(x, axis=self.axis)

    def backward(self, g):
        if self.axis is None:
            return (g,)
        xp = xp_of(g)
        return (xp.flip(xp.cumsum(xp.flip(g, self.axis), axis=self.axis), self.axis),)

    def _adds(self, a):
        return 0 if self.axis is None or a.size == 0 else a.size - a.size // a.shape[self.axis]  # n - 1 per row

    def flops(self, inputs, out):
        return {self.name: self._adds(out)}

    def backward_flops(self, grad, input_grads):
        return {self.name: self._adds(grad)}


# ----------------------------------------------------------------------------- matrix products

class Matmul(Op):
    """d(a @ b) = (g @ b^T, a^T @ g), summed over broadcast batch dims; 1-d inputs as in NumPy."""
    name = "matmul"

    def forward(self, a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise ShapeError(f"matmul: both arguments need at least 1 dimension, got shapes {a.shape} and {b.shape}; "
                             "use * to multiply by a scalar")
        k_a, k_b = a.shape[-1], b.shape[-2] if b.ndim > 1 else b.shape[0]
        if k_a != k_b:
            raise ShapeError(f"matmul: shapes {a.shape} @ {b.shape} do not match: the last dim of the first ({k_a}) "
                             f"must equal the {'second-to-last' if b.ndim > 1 else 'only'} dim of the second ({k_b})")
        na, nb = self.needs_input_grad
        self.shapes = a.shape, b.shape
        self.save_for_backward(a if nb else None, b if na else None)
        return matmul(a, b)

    def backward(self, g):
        a, b = self.saved
        sa, sb = self.shapes
        if len(sa) == 1 and len(sb) == 1:  # dot product: g is a scalar
            return (g * b if b is not None else None), (g * a if a is not None else None)
        if len(sa) == 1:
            g = g[..., None, :]
            sa2, a = (1,) + sa, (a[None, :] if a is not None else None)
        else:
            sa2 = sa
        if len(sb) == 1:
            g = g[..., None]
            sb2, b = sb + (1,), (b[:, None] if b is not None else None)
        else:
            sb2 = sb
        ga = gb = None
        if b is not None:
            ga = unbroadcast(matmul(g, b.swapaxes(-1, -2)), sa2).reshape(sa)
        if a is not None:
            if len(sb2) == 2 and a.ndim > 2:  # (..., m, k) @ (k, n): fold the batch into m, one GEMM
                gb = matmul(rows(a).T, rows(g))
            else:
                gb = unbroadcast(matmul(a.swapaxes(-1, -2), g), sb2)
            gb = gb.reshape(sb)
        return ga, gb

    def flops(self, inputs, out):
        return {"matmul": 2 * max(out.size, 1) * inputs[0].shape[-1]}  # 2 m n k (times the batch)

    def backward_flops(self, grad, input_grads):
        k = self.shapes[0][-1]
        return {"matmul": sum(2 * max(grad.size, 1) * k for gi in input_grads if gi is not None)}


class Linear(Op):
    """y = x @ W^T + b with W shaped (out, in); dx = g @ W, dW = g^T x, db = sum of g."""
    name = "linear"

    def forward(self, x, weight, bias=None):
        if weight.ndim != 2 or x.ndim == 0 or x.shape[-1] != weight.shape[1]:
            raise ShapeError(f"linear: input of shape {x.shape} does not fit weight of shape {weight.shape}: "
                             f"the input's last dim must equal weight.shape[1] (in_features)")
        if bias is not None and bias.shape != (weight.shape[0],):
            raise ShapeError(f"linear: bias of shape {bias.shape} does not fit weight of shape {weight.shape}: "
                             f"expected ({weight.shape[0]},)")
        nx, nw = self.needs_input_grad[:2]
        self.save_for_backward(x if nw else None, weight if nx else None)
        # Every leading dim is a batch dim: fold them into rows, so that BLAS sees one big GEMM. NumPy would
        # otherwise run one small GEMM per batch entry (measured 1.5-2x slower on (8, 64, 128) inputs).
        y = matmul(rows(x), weight.T)
        if x.ndim != 2:
            y = y.reshape(*x.shape[:-1], weight.shape[0])
        if bias is not None:
            y += bias  # y is a fresh array: adding in place saves one output-sized temporary
        return y

    def backward(self, g):
        x, w = self.saved
        g2 = rows(g)  # (N, out), as in forward
        gx = gw = None
        if w is not None:
            gx = matmul(g2, w)
            if g.ndim != 2:
                gx = gx.reshape(*g.shape[:-1], w.shape[1])
        if x is not None:
            gw = matmul(g2.T, rows(x))
        if len(self.needs_input_grad) == 3:
            return gx, gw, (sum_leading(g2) if self.needs_input_grad[2] else None)
        return gx, gw

    def flops(self, inputs, out):
        x, w = inputs[:2]
        counts = {"matmul": 2 * (x.size // x.shape[-1]) * w.shape[0] * w.shape[1]}  # 2 N in out
        if len(inputs) == 3:
            counts["add"] = out.size  # the bias
        return counts

    def backward_flops(self, grad, input_grads):
        gx, gw = input_grads[:2]
        k = next((a.shape[-1] for a in (gw, gx) if a is not None), 0)  # in_features
        counts = {"matmul": sum(2 * grad.size * k for gi in (gx, gw) if gi is not None)}  # 2 N out in each
        if len(input_grads) == 3 and input_grads[2] is not None:
            counts["sum"] = grad.size - input_grads[2].size  # the bias gradient sums over N
        return counts


# ----------------------------------------------------------------------------- shape and indexing

class Reshape(Op):
    """d reshape(x) = reshape(g) back to x's shape."""
    name = "reshape"
    flops_per_element = (0, (0,))
    returns_view = True

    def forward(self, x, shape):
        self.in_shape = x.shape
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
            for d in (dim0, dim1):
                normalize_dims(self.name, d, 0, x.shape)  # only checks the dims
            self.dims = ()
            return x
        d0, d1 = (normalize_dims(self.name, d, x.ndim, x.shape)[0] for d in (dim0, dim1))
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
        if sorted(d % max(x.ndim, 1) for d in dims) != list(range(x.ndim)):
            raise ShapeError(f"permute: dims {tuple(dims)} are not a permutation of the {x.ndim} dims "
                             f"of a tensor of shape {x.shape}")
        self.dims = tuple(d % x.ndim for d in dims)
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


def _is_basic_index(key):
    return all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in key)


class Index(Op):
    """d x[key] = g scattered back into zeros; repeated integer indices add up."""
    name = "index"
    flops_per_element = (0, (0,))  # gather; with integer arrays its backward adds (see Index)
    returns_view = True

    def forward(self, x, key):
        self.shape, self.dtype = x.shape, x.dtype
        self.basic = _is_basic_index(key)
        # index arrays (token ids, targets) are kept for backward, so they pass the choke point too
        self.arrays_at = [i for i, k in enumerate(key) if not (k is None or k is Ellipsis or isinstance(k, (int, slice)))]
        self.key = tuple(None if i in self.arrays_at else k for i, k in enumerate(key))
        self.save_for_backward(*(key[i] for i in self.arrays_at))
        try:
            return x[key]
        except IndexError as e:
            raise IndexError(f"index: {e} (tensor of shape {x.shape})") from None

    def backward(self, g):
        key = list(self.key)
        for i, arr in zip(self.arrays_at, self.saved):
            key[i] = arr
        key = tuple(key)
        gx = zeros(self.shape, g.dtype, g)
        if self.basic:
            gx[key] = g
        else:
            index_add(gx, key, g)
        return (gx,)

    def backward_flops(self, grad, input_grads):
        return {self.name: 0 if self.basic else grad.size}  # a scatter-add adds each element once


class Cat(Op):
    """d cat(xs, dim) = the matching slices of g."""
    name = "cat"
    flops_per_element = None  # any number of inputs: all zero

    def forward(self, *xs, dim=0):
        self.dim = normalize_dims(self.name, dim, xs[0].ndim, xs[0].shape)[0]
        self.sizes = [x.shape[self.dim] for x in xs]
        try:
            return xp_of(xs[0]).concatenate(xs, axis=self.dim)
        except ValueError:
            raise ShapeError(f"cat: shapes {[x.shape for x in xs]} must match except in dim {dim}") from None

    def backward(self, g):
        out, start = [], 0
        for size, need in zip(self.sizes, self.needs_input_grad):
            index = (slice(None),) * self.dim + (slice(start, start + size),)
            out.append(g[index] if need else None)
            start += size
        return tuple(out)


class Stack(Op):
    """d stack(xs, dim) = g indexed along dim."""
    name = "stack"
    flops_per_element = None

    def forward(self, *xs, dim=0):
        self.dim = normalize_dims(self.name, dim, xs[0].ndim + 1, xs[0].shape)[0]
        if any(x.shape != xs[0].shape for x in xs):
            raise ShapeError(f"stack: every tensor must have the same shape, got {[x.shape for x in xs]}")
        return xp_of(xs[0]).stack(xs, axis=self.dim)

    def backward(self, g):
        return tuple((g[(slice(None),) * self.dim + (i,)] if need else None)
                     for i, need in enumerate(self.needs_input_grad))


class Where(Op):
    """where(cond, a, b): g flows to a where cond holds, to b elsewhere."""
    name = "where"
    flops_per_element = (0, (1, 1))  # a select is free; its gradient is masked

    def forward(self, a, b, cond):
        self.shapes = a.shape, b.shape
        self.save_for_backward(cond)
        return xp_of(a).where(cond, a, b)

    def backward(self, g):
        (cond,) = self.saved
        na, nb = self.needs_input_grad
        sa, sb = self.shapes
        return ((unbroadcast(g * cond, sa) if na else None),
                (unbroadcast(g * ~cond, sb) if nb else None))


class MaskedFill(Op):
    """x.masked_fill(mask, value): no gradient flows where the mask is set."""
    name = "masked_fill"
    flops_per_element = (0, (1,))

    def forward(self, x, mask, value):
        try:
            fits = np.broadcast_shapes(mask.shape, x.shape) == x.shape  # shapes only: any backend
        except ValueError:
            fits = False
        if not fits:
            raise ShapeError(f"masked_fill: mask of shape {mask.shape} does not broadcast to the input's "
                             f"shape {x.shape}")
        self.save_for_backward(mask)
        return masked_fill(x, mask, value)

    def backward(self, g):
        return (pooled(xp_of(g).multiply, g, ~self.saved[0]),)


class Tri(Op):
    """tril/triu: keep a triangle of the last two dims; the gradient keeps the same triangle."""
    name = "tri"
    flops_per_element = (0, (0,))

    def forward(self, x, diagonal=0, upper=False):
        if x.ndim < 2:
            raise ShapeError(f"{'triu' if upper else 'tril'}: needs at least 2 dims, got shape {x.shape}")
        self.diagonal, self.upper = diagonal, upper
        return self._apply(x)

    def _apply(self, x):
        xp = xp_of(x)
        return xp.triu(x, self.diagonal) if self.upper else xp.tril(x, self.diagonal)

    def backward(self, g):
        return (self._apply(g),)


# ----------------------------------------------------------------------------- nn building blocks

def _max(x, axis):
    """x.max(axis, keepdims=True); along rows (NOTE [along rows] in backend.py) when axis is the last one."""
    return max_rows(x) if axis == (x.ndim - 1,) else x.max(axis=axis, keepdims=True)


def _sum(x, axis):
    """x.sum(axis, keepdims=True); along rows (NOTE [along rows] in backend.py) when axis are the last ones."""
    if axis == tuple(range(x.ndim - len(axis), x.ndim)):
        return sum_rows(x, len(axis))
    return reduce_sum(x, axis, keepdims=True)


class Softmax(Op):
    """y = exp(x - max) / sum; dx = y (g - sum(g y)) along dim. keep_input: also keep x, which backward never
    reads, to emulate PyTorch before 1.11, whose softmax backward took the input too (F.softmax)."""
    name = "softmax"
    flops_per_element = (5, (4,))  # max, -, exp, sum, /;  g*y, sum, y*s, -

    def forward(self, x, dim, keep_input=False):
        xp = xp_of(x)
        self.axis = normalize_dims(self.name, dim, x.ndim, x.shape)
        y = xp.subtract(x, _max(x, self.axis), out=empty_like(x))
        xp.exp(y, out=y)
        y /= _sum(y, self.axis)
        if keep_input:
            self.save_for_backward(y, x)  # kept, never read: the memory older software held
        else:
            self.save_for_backward(y)
        return y

    def backward(self, g):
        y = self.saved[0]
        xp = xp_of(y)
        gx = xp.multiply(g, y, out=empty_like(y))
        xp.subtract(g, _sum(gx, self.axis), out=gx)
        gx *= y  # y (g - sum(g y)), in the one array
        return (gx,)


class LogSoftmax(Op):
    """y = x - logsumexp(x); dx = g - softmax(x) sum(g) along dim."""
    name = "log_softmax"
    flops_per_element = (5, (4,))  # max, -, exp, sum, -;  exp, sum, *, -

    def forward(self, x, dim):
        xp = xp_of(x)
        self.axis = normalize_dims(self.name, dim, x.ndim, x.shape)
        y = xp.subtract(x, _max(x, self.axis), out=empty_like(x))  # NOTE [host memory pool]
        y -= xp.log(_sum(xp.exp(y, out=empty_like(y)), self.axis))  # x - max - log sum exp
        self.save_for_backward(y)
        return y

    def backward(self, g):
        (y,) = self.saved
        xp = xp_of(y)
        gx = xp.exp(y, out=empty_like(y))
        gx *= _sum(g, self.axis)
        return (xp.subtract(g, gx, out=gx),)  # g - softmax(x) sum(g)


class LayerNorm(Op):
    """y = (x - mean) / sqrt(var + eps) * w + b over the last dims; saves x_hat and 1/std."""
    name = "layer_norm"

    def forward(self, x, *weight_bias, ndim=1, eps=1e-5, has_weight=True):
        xp = xp_of(x)
        weight = weight_bias[0] if has_weight and weight_bias else None
        bias = weight_bias[-1] if len(weight_bias) > has_weight else None
        self.axes = tuple(range(x.ndim - ndim, x.ndim))
        # NOTE [host memory pool] (backend.py): x-hat and y are new arrays from the pool, the rest in place
        xhat = xp.subtract(x, mean_rows(x, len(self.axes)), out=empty_like(x))
        var = mean_rows(xp.square(xhat, out=empty_like(x)), len(self.axes))
        rstd = 1 / xp.sqrt(var + eps)
        xhat *= rstd
        self.has_weight = weight is not None
        self.save_for_backward(xhat, rstd, weight)
        if weight is None:
            return xhat if bias is None else pooled(xp.add, xhat, bias)
        y = xp.multiply(xhat, weight, out=empty_like(x))
        if bias is not None:
            y += bias
        return y

    def backward(self, g):
        xhat, rstd, w = self.saved
        needs = self.needs_input_grad
        grads = [None]
        xp, t = xp_of(g), empty_like(xhat)  # NOTE [host memory pool] (backend.py)
        if needs[0]:  # rstd (gxhat - mean(gxhat) - xhat mean(gxhat xhat)), with gxhat = g w
            gxhat = pooled(xp.multiply, g, w) if w is not None else g
            m = mean_rows(xp.multiply(gxhat, xhat, out=t), len(self.axes))
            xp.multiply(xhat, m, out=t)
            gx = xp.subtract(gxhat, mean_rows(gxhat, len(self.axes)), out=empty_like(t))
            gx -= t
            gx *= rstd
            grads[0] = gx
        if self.has_weight:
            grads.append(sum_leading(xp.multiply(g, xhat, out=t), len(self.axes)) if needs[1] else None)
        if len(needs) > len(grads):  # a bias was given
            grads.append(sum_leading(g, len(self.axes)) if needs[-1] else None)
        return tuple(grads)

    def flops(self, inputs, out):
        return {self.name: 7 * out.size}  # mean, -, square, mean, * rstd, * w, + b (per-row sqrt ignored)

    def backward_flops(self, grad, input_grads):
        n = grad.size
        per_input = (8, 2, 1)  # x: g*w, two means, two products, two subtractions, * rstd; w: g*xhat, sum; b: sum
        kinds = (0,) + ((1,) if self.has_weight else ()) + (2,)
        return {self.name: sum(per_input[k] * n for k, gi in zip(kinds, input_grads) if gi is not None)}


class Dropout(Op):
    """y = x * mask * scale and dx = g * mask * scale, scale = 1/(1-p), with a bool mask drawn by the caller
    (draw_keep): 1 byte per element saved, as PyTorch's native_dropout keeps. A float mask (F.dropout's
    mask_dtype, to emulate frameworks that kept one) has the scale folded in: y = x * mask, dx = g * mask."""
    name = "dropout"
    flops_per_element = (2, (2,))             # x * mask, * scale;  g * mask, * scale
    flops_per_element_float_mask = (1, (1,))  # x * mask;  g * mask

    def forward(self, x, mask, p=0.5):
        if mask.dtype != bool:
            self.flops_per_element = self.flops_per_element_float_mask
        self.scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
        self.save_for_backward(mask)
        return self._apply(x, mask)

    def backward(self, g):
        return (self._apply(g, self.saved[0]),)

    def _apply(self, a, mask):
        if mask.dtype != bool:
            return (a * mask).astype(a.dtype, copy=False)  # a mask of another dtype must not promote the result
        out = a * mask
        out *= out.dtype.type(self.scale)  # in place: a fresh array, and one temporary fewer
        return out


def draw_keep(shape, p, device, rng=None):
    """Which elements dropout keeps (each with probability 1 - p), as a bool array on `device`. Drawn on the
    host from minigrad's generator (or `rng`, a private copy of it): the same seed gives the same mask on
    cpu and cuda, in F.dropout and inside scaled_dot_product_attention alike."""
    if device == "meta":  # shapes only: nothing is drawn, and the stream stays where it is
        return xp_for(device).empty(shape, dtype=bool)
    keep = (generator() if rng is None else rng).random(shape) >= p
    return to_device(keep, device)


def _private_generator(state):
    """A generator of its own, at `state`: what it draws leaves minigrad's stream where it is."""
    rng = copy.deepcopy(generator())
    rng.bit_generator.state = state
    return rng


# NOTE [fused attention]: an eager attention (q @ k^T * scale, mask, softmax, dropout, @ v) keeps the
# (..., L, S) probabilities (and the dropout mask) for backward: O(L * S) per head, the largest activation of
# a transformer at long sequences. Fused kernels (FlashAttention, memory-efficient attention) keep q, k, v,
# the output and one log-sum-exp per query row, O(L), and recompute the scores in backward:
# P = exp(scores - lse) needs no second max or sum. Their dropout mask is not kept either: backward draws
# it again from the generator state the forward started from. This op does the same on whole arrays; its
# (..., L, S) temporaries live only inside forward and inside backward (a real kernel tiles them away), so
# the ledger sees O(L) per row, what PyTorch keeps. Its backward, as FlashAttention-2's:
#   dv = P_d^T g     dP_d = g v^T     dP = dP_d * dropout     D = rowsum(g * out) = rowsum(P * dP)
#   dS = P * (dP - D)     dq = dS k * scale     dk = dS^T q * scale     d attn_mask = dS (a float mask)
# FLOPs, with B the broadcast batch (every leading dim) and n = B L S scores:
#   forward   matmul 2 B L S E (q k^T) + 2 B L S Ev (P v); per score 6 (* scale, max, -, exp, sum, /),
#             +1 with a float mask (an add; a bool mask or is_causal selects, which counts 0, as `where`),
#             +2 with dropout (* keep, * 1/(1-p)); per row 2 (log, +) for the log-sum-exp
#   backward  matmul: the scores again 2 B L S E, then dv 2 B L S Ev, dP 2 B L S Ev, dq 2 B L S E and
#             dk 2 B L S E, each only when needed; per score 3 to recompute P (* scale, - lse, exp; +1 with
#             a float mask), 2 per dropout applied (to P for dv, to dP), 3 for dS (-, *, * scale); per
#             (row, Ev) 2 for D; and the adds of summing a broadcast input's gradient back to its shape.
# The recompute runs inside backward, as a fused kernel's does: it counts in phase 'backward'.
class ScaledDotProductAttention(Op):
    """out = dropout(softmax(q k^T * scale + mask)) v, fused (NOTE [fused attention]): keeps q, k, v, out and
    each row's log-sum-exp; backward recomputes the probabilities P = exp(q k^T * scale + mask - lse)."""
    name = "sdpa"
    same_dtype = False  # a bool attn_mask goes with float q, k, v: F.scaled_dot_product_attention checks them

    def forward(self, q, k, v, *attn_mask, dropout_p=0.0, is_causal=False, scale=None):
        mask = attn_mask[0] if attn_mask else None
        L, S = q.shape[-2], k.shape[-2]
        self.batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        self.dims = L, S, q.shape[-1], v.shape[-1]  # L, S, E, Ev
        self.scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
        self.p, self.is_causal = dropout_p, is_causal
        self.float_mask = mask is not None and mask.dtype != bool
        # float16 accumulates in float32, as PyTorch's kernels do; the log-sum-exp is kept in float32 too
        self.acc = np.dtype("float32") if q.dtype == np.float16 else q.dtype
        self.rng_state = get_rng_state() if dropout_p > 0 else None  # before the draw: backward's replay
        s = self._scores(q, k, mask)                                    # (..., L, S)
        xp = xp_of(s)
        m = s.max(axis=-1, keepdims=True)
        m[m == -np.inf] = 0  # a row that attends to nothing: exp(-inf - 0) = 0, where -inf - -inf would be nan
        s -= m
        P = xp.exp(s, out=s)  # in place: one (..., L, S) array at a time
        total = P.sum(axis=-1, keepdims=True)
        attends = total > 0
        total[~attends] = 1  # ... and its output is 0, as PyTorch's
        P /= total
        # +inf where a row attends to nothing: backward's exp(scores - lse) is then exp(-inf) = 0 too
        lse = xp.where(attends, m + xp.log(total), np.inf)[..., 0]      # (..., L)
        if dropout_p > 0:
            P = self._dropout(P, draw_keep(P.shape, dropout_p, device_of(P)))
        out = (P @ self._full(v)).astype(q.dtype, copy=False)           # (..., L, Ev)
        self.save_for_backward(q, k, v, mask, out, lse)
        return out

    def backward(self, g):
        q, k, v, mask, out, lse = self.saved
        nq, nk, nv = self.needs_input_grad[:3]
        nm = len(self.needs_input_grad) == 4 and self.needs_input_grad[3]
        Q, K, V, g = self._full(q), self._full(k), self._full(v), g.astype(self.acc, copy=False)
        xp = xp_of(g)
        s = self._scores(q, k, mask)
        s -= lse[..., None]
        P = xp.exp(s, out=s)  # the probabilities again, from the kept log-sum-exp
        keep = None
        if self.p > 0:  # the forward's mask, drawn again from a private copy of the generator's state then
            keep = draw_keep(P.shape, self.p, device_of(P), _private_generator(self.rng_state))
        dq = dk = dv = dmask = None
        if nv:
            dv = (self._dropout(P, keep) if keep is not None else P).swapaxes(-1, -2) @ g
        if nq or nk or nm:
            dP = g @ V.swapaxes(-1, -2)
            if keep is not None:
                dP = self._dropout(dP, keep)
            dP -= (g * out.astype(self.acc, copy=False)).sum(axis=-1, keepdims=True)  # - D
            dS = P * dP
            if nm:
                dmask = unbroadcast(dS, mask.shape).astype(mask.dtype, copy=False)
            dS *= self.scale
            dq = dS @ K if nq else None
            dk = dS.swapaxes(-1, -2) @ Q if nk else None
        grads = [None if d is None else unbroadcast(d, a.shape).astype(a.dtype, copy=False)
                 for d, a in ((dq, q), (dk, k), (dv, v))]
        return (*grads, dmask) if mask is not None else tuple(grads)

    def _full(self, a):
        """a broadcast to the batch (a view), in the accumulation dtype."""
        return xp_of(a).broadcast_to(a, self.batch + a.shape[-2:]).astype(self.acc, copy=False)

    def _scores(self, q, k, mask):
        """q k^T * scale, then the mask: -inf where a query may not attend, or a float mask added."""
        xp = xp_of(q)
        s = self._full(q) @ self._full(k).swapaxes(-1, -2)
        s *= self.scale
        if self.is_causal:
            L, S = s.shape[-2:]
            s = xp.where(xp.tri(L, S, dtype=bool), s, -np.inf)  # query i attends to keys 0..i (top-left, as PyTorch)
        if mask is not None and mask.dtype == bool:
            s = xp.where(mask, s, -np.inf)
        elif mask is not None:
            s += mask
        return s

    def _dropout(self, a, keep):
        out = a * keep
        out *= 0.0 if self.p == 1 else 1.0 / (1.0 - self.p)
        return out

    def _sizes(self):
        L, S, E, Ev = self.dims
        B = math.prod(self.batch)
        return B, L, S, E, Ev

    def flops(self, inputs, out):
        B, L, S, E, Ev = self._sizes()
        per_score = 6 + self.float_mask + 2 * (self.p > 0)
        return {"matmul": 2 * B * L * S * (E + Ev), self.name: per_score * B * L * S + 2 * B * L}

    def backward_flops(self, grad, input_grads):
        B, L, S, E, Ev = self._sizes()
        n = B * L * S
        dq, dk, dv = input_grads[:3]
        need_ds = dq is not None or dk is not None or (len(input_grads) == 4 and input_grads[3] is not None)
        matmul = 2 * n * E                                                           # the scores again
        matmul += 2 * n * Ev * ((dv is not None) + need_ds)                          # dv, dP
        matmul += 2 * n * E * ((dq is not None) + (dk is not None))                  # dq, dk
        drop = 2 * (self.p > 0)
        elementwise = n * (3 + self.float_mask + drop * (dv is not None))
        if need_ds:
            elementwise += n * (3 + drop) + 2 * B * L * Ev
        full = (B * L * E, B * S * E, B * S * Ev, n)  # each gradient's size before summing a broadcast away
        elementwise += sum(f - gi.size for f, gi in zip(full, input_grads) if gi is not None)
        return {"matmul": matmul, self.name: elementwise}
