"""The elementwise ops: binary (add, mul, pow, clamp, maximum, ...), unary (exp, sin, tanh, gelu, ...), casts,
copies and moves, and the selections by a mask (where, masked_fill). Each counts its FLOPs per element, by its
`flops_per_element` (NOTE [FLOP convention] in base.py).

Read next: shape.py, the reductions and the ops that reshape and index.
"""
import math
import operator

import numpy as np

from ..backend import (BFLOAT16, accumulator, device_of, empty_like, in_float32, is_float, made, masked_fill,
                       narrow, out_like, pooled, to_device, xp_of)
from ..backend.special import normal_cdf, sigmoid
from .base import LEARNED, Op, ShapeError, learned, refuse_bool, unbroadcast


# ----------------------------------------------------------------------------- elementwise, binary

# NOTE [a number beside 2-byte floats]: for a float16 or bfloat16 x, PyTorch's x * 0.1 and x / 10 compute in float32
# with the number as written (its kernels read the scalar's original value) and round once. NumPy rounds the number
# to x's dtype first: float16 holds 100,000 (or a GradScaler's 65,536) as inf and 1e-8 as 0, so x * 65536 was inf
# where PyTorch gives 32768 for x = 0.5, and x / 100000 was 0. Mul (either side) and Div (the divisor) take the
# number itself, `number=(its side, value)` (args.py's exact_number), beside its rounded copy (the input the tape
# and the ledger see), and compute through `pooled`: float32 arithmetic into the 2-byte output, a buffer at a time
# (backend/pool.py). PyTorch's add and sub round the number to x's dtype, as NumPy does; its 1 / x is
# x.reciprocal() * 1, which minigrad does not copy (one rounding, not two). A 0-d tensor of another dtype is such a
# number too (x * tensor(3.1) is x * 3.1 in PyTorch's CPU kernels; its tensor(3.1) * x rounds 3.1 to x's dtype
# first, where minigrad rounds once on either side, as for a Python number).

class Add(Op):
    """d(a + b) = (g, g), summed over broadcast dims."""
    name = "add"
    flops_per_element = (1, (0, 0))

    def forward(self, a, b):
        self.shapes = a.shape, b.shape
        return pooled(xp_of(a).add, a, b)  # a + b, from the pool (NOTE [host memory pool], backend/pool.py)

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
    takes_number = (0, 1)  # NOTE [a number beside 2-byte floats]: on either side

    def forward(self, a, b, number=None):
        na, nb = self.needs_input_grad
        self.shapes, self.number = (a.shape, b.shape), number
        self.save_for_backward(a if nb else None, b if na else None)
        return pooled(xp_of(a).multiply, a, b, number)

    def backward(self, g):
        a, b = self.saved
        sa, sb = self.shapes
        mul, (na, nb) = xp_of(g).multiply, _number_per_side(self.number)  # g * the number, for the other side
        return ((unbroadcast(pooled(mul, g, b, na), sa) if b is not None else None),
                (unbroadcast(pooled(mul, g, a, nb), sb) if a is not None else None))


def _number_per_side(number):
    """Mul's number (its side, value) as what each input's gradient multiplies g by in place of the other input:
    the number as written, for the other side's gradient; nothing for its own side, which is a 0-d tensor's where
    one is read as a number (NOTE [a number beside 2-byte floats]) and may need a gradient: g * the tensor."""
    n = number and (1, number[1])
    return (n, None) if number and number[0] == 1 else (None, n)


class Div(Op):
    """d(a / b) = (g / b, -g * a / b^2), computed as -g * (a / b) / b: b * b alone under- or overflows
    in float32 for |b| below 1e-19 or above 1e19, where the quotient is still finite."""
    name = "div"
    flops_per_element = (1, (1, 3))  # g / b; -g * a / (b * b)
    takes_number = (1,)  # the divisor

    def forward(self, a, b, number=None):
        nb = self.needs_input_grad[1]
        self.shapes, self.number = (a.shape, b.shape), number
        self.save_for_backward(a if nb else None, b)
        return a / b if number is None else pooled(xp_of(a).true_divide, a, b, number)

    def backward(self, g):
        a, b = self.saved
        sa, sb = self.shapes
        na, nb = self.needs_input_grad
        n, xp = self.number, xp_of(g)  # b is a number: g / b for a, and none for b
        ga = unbroadcast(pooled(xp.true_divide, g, b, n), sa) if na else None
        if not nb:
            return ga, None
        q = pooled(xp.true_divide, a, b)  # -g (a / b) / b, in one array made (NOTE [every array an op makes])
        for f, other in ((xp.true_divide, b), (xp.multiply, g)):
            f(q, other, out=q)
        return ga, unbroadcast(xp.negative(q, out=q), sb)


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
        if LEARNED and (mine := learned("Pow.backward", self, g)) is not NotImplemented:  # NOTE [learner's pieces]
            return mine
        (x,) = self.saved
        p = self.exponent
        if p == 0:  # x ** 0 is constant; p * x ** -1 would give 0 * inf = nan at x = 0
            return (g * 0,)
        with np.errstate(divide="ignore", invalid="ignore"):  # each array made: NOTE [every array an op makes]
            d = pooled(xp_of(g).multiply, g, self.times_p(made(power(x, p - 1))))
            return (masked_fill(d, made(x == 0), 0) if self.zero_at_zero else d,)

    def times_p(self, d):
        """p * d; beside a 2-byte d, as PyTorch: in float32 with p as written, rounded once (NOTE [a number beside
        2-byte floats]). ml_dtypes' bfloat16 times a Python float gave float32: a gradient of the wrong dtype."""
        if accumulator(d.dtype) is None:
            return made(self.exponent * d)
        return pooled(xp_of(d).multiply, None, d, (0, self.exponent))


# NOTE [a root's gradient at zero]: a norm is a root of a sum, sqrt(sum x^2) or (sum |x|^p) ** (1/p), and so is a
# std, sqrt(var); at a sum of 0 (a zero vector, a constant row) the root's derivative is infinite and the chain
# rule gives 0 * inf = nan. PyTorch's norm and std backward give 0 there; so do Sqrt and Pow with zero_at_zero,
# which norm and std (tensor/methods.py, _root) set. A flag of the op rather than a where() chosen by looking at the
# values: the tape is the same whatever the values, so a checkpoint's recompute (whose inputs may be placeholders)
# records the ops its forward did, and 'meta' arrays, which have no values, run it too.


def _cube(x):
    d = xp_of(x).multiply(x, x, out=empty_like(x))  # each in one array made (NOTE [every array an op makes])
    d *= x
    return d


def _inverse_square(x):
    d = xp_of(x).multiply(x, x, out=empty_like(x))
    return xp_of(x).divide(1, d, out=d)


def _inverse_root(x):
    d = xp_of(x).sqrt(x, out=empty_like(x))
    return xp_of(x).divide(1, d, out=d)


_SPECIAL_POWERS = {3: _cube, -2: _inverse_square, -0.5: _inverse_root}


def power(x, p):
    """x ** p for a constant p, with PyTorch's special cases: x ** 3 is x * x * x, x ** -2 is 1 / (x * x), x ** -0.5
    is 1 / sqrt(x). NumPy squares, takes square roots and reciprocals itself, but for any other exponent it calls
    the C library's pow number by number, which in float32 is slow: x ** 3 on a GPT's (8, 64, 512) activations
    took 12 ms on this project's machine, x * x * x 0.04 ms. A bfloat16 x to any other p gave float32 (ml_dtypes'
    power with a Python float): the result is rounded back to x's dtype, as PyTorch's (computed in float32). A
    2-byte x ** 3, ** -2, ** -0.5 is computed in float32 and rounded once, as PyTorch's: float16's x * x * x,
    rounded twice, was the correctly rounded cube for 76% of values (PyTorch's for all)."""
    if p in (3, -2, -0.5):
        return in_float32(_SPECIAL_POWERS[p], (), x)
    out = x ** p
    return out.astype(x.dtype, copy=False) if out.dtype != x.dtype and x.dtype == BFLOAT16 else out


class PowTensor(Op):
    """d(a ** b) = (b a^(b-1), a^b log a), with PyTorch's zeros where b == 0 (for a) and where a == 0 and
    b >= 0 (for b), so that 0 ** t and t ** 0 have finite gradients."""
    name = "pow_tensor"
    flops_per_element = (1, (3, 2))  # b * a ** (b - 1); out * log a

    def forward(self, a, b):
        na, nb = self.needs_input_grad
        self.shapes = a.shape, b.shape
        xp = xp_of(a)
        if a.dtype == bool:  # NumPy's bool ** bool is int8, PyTorch's pow has no bool kernel
            raise TypeError("pow: not implemented for bool tensors (as in PyTorch); convert them with .long() first")
        if a.dtype.kind in "iu":  # integers to negative powers: PyTorch's 1 for 1, +-1 for -1, else 0 (NumPy refuses)
            out = xp.where(b < 0, xp.where(a == 1, 1, 0) + xp.where(a == -1, xp.where(b % 2 == 0, 1, -1), 0),
                           xp.power(a, xp.where(b < 0, 0, b))).astype(a.dtype, copy=False)
        else:
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
        # each array made, in place where it can be, in the same order ((g b) a^(b-1)): NOTE [every array an op makes]
        with np.errstate(invalid="ignore", divide="ignore"):
            if na:
                d = pooled(xp.multiply, g, b)
                d *= made(xp.power(a, made(b - 1)))
                ga = unbroadcast(narrow(made(xp.where(made(b == 0), 0, d)), g.dtype), sa)
            if nb:
                d = pooled(xp.multiply, g, out)
                d *= made(xp.log(a))
                zero = made(made(a == 0) & made(b >= 0))  # a and b may broadcast either way
                gb = unbroadcast(narrow(made(xp.where(zero, 0, d)), g.dtype), sb)
        return ga, gb


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
        if lo is None and hi is None:
            return x.copy()
        return xp.clip(x, lo, hi).astype(x.dtype, copy=False)  # bfloat16 with Python bounds clips in float32

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
        if hi is None:  # each array made, and named while the next is made: NOTE [every array an op makes]
            masks, out = [made(x >= lo), made(x < lo)], made(xp.maximum(x, lo))
        elif lo is None:
            masks, out = [made(x <= hi), made(x > hi)], made(xp.minimum(x, hi))
        else:
            masks = [made(made(x >= lo) & made(x <= hi)), made(made(x < lo) & made(lo < hi))]
            masks.append(made(made(x > hi) | made(hi < lo)))
            out = made(xp.minimum(made(xp.maximum(x, lo)), hi))
        out = made(xp.where(masks[0], x, out))  # at a tie (0 and -0) NumPy gives the bound: x's sign
        self.save_for_backward(*[m if need else None for m, need in zip(masks, self.needs_input_grad)])
        return out

    def backward(self, g):
        return tuple(None if m is None else unbroadcast(pooled(xp_of(g).multiply, g, m), shape)
                     for m, shape in zip(self.saved, self.shapes))


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
        share = narrow(made(xp.where(made(a == b), 0.5, made(self.wins(a, b)))), g.dtype)  # a's share of g; each
        # array made (NOTE [every array an op makes])
        sa, sb = self.shapes
        ga = unbroadcast(pooled(xp.multiply, g, share), sa) if na else None
        return ga, (unbroadcast(pooled(xp.multiply, g, xp.subtract(1, share, out=share)), sb) if nb else None)


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
        refuse_bool("neg", x, instead="to invert a mask write ~mask; for numbers convert it with .long() first")
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
        if LEARNED and (mine := learned("Exp.backward", self, g)) is not NotImplemented:  # NOTE [learner's pieces]
            return mine
        return (g * self.saved[0],)


class Log(Op):
    """d log(x) = 1 / x."""
    name = "log"
    flops_per_element = (1, (1,))

    def forward(self, x):
        self.save_for_backward(x)
        return xp_of(x).log(x)

    def backward(self, g):
        if LEARNED and (mine := learned("Log.backward", self, g)) is not NotImplemented:  # NOTE [learner's pieces]
            return mine
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


class Sin(Op):
    """d sin(x) = cos(x)."""
    name = "sin"
    flops_per_element = (1, (2,))  # g * cos(x)

    def forward(self, x):
        self.save_for_backward(x)
        return xp_of(x).sin(x)

    def backward(self, g):
        d = xp_of(g).cos(self.saved[0], out=empty_like(g))  # made, and in place: NOTE [every array an op makes]
        d *= g
        return (d,)


class Cos(Op):
    """d cos(x) = -sin(x)."""
    name = "cos"
    flops_per_element = (1, (3,))  # g * -sin(x)

    def forward(self, x):
        self.save_for_backward(x)
        return xp_of(x).cos(x)

    def backward(self, g):
        d = xp_of(g).sin(self.saved[0], out=empty_like(g))
        xp_of(g).negative(d, out=d)
        d *= g
        return (d,)


class Tanh(Op):
    """d tanh(x) = 1 - tanh(x)^2."""
    name = "tanh"
    flops_per_element = (1, (3,))  # g * (1 - y * y)

    def forward(self, x):
        y = xp_of(x).tanh(x, out=out_like(x))  # NOTE [host memory pool] (backend/pool.py)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        if LEARNED and (mine := learned("Tanh.backward", self, g)) is not NotImplemented:  # NOTE [learner's pieces]
            return mine
        return (in_float32(self._grad, (), self.saved[0], g),)  # a 2-byte y: in float32, rounded once (as Sigmoid)

    @staticmethod
    def _grad(y, g):  # g (1 - y^2) in one array (empty_like, not out_like: a 0-d product without out= is a scalar)
        d = xp_of(y).multiply(y, y, out=empty_like(y))
        return xp_of(y).multiply(xp_of(y).subtract(1, d, out=d), g, out=d)


class Sigmoid(Op):
    """d sigmoid(x) = s (1 - s); computed from exp(-|x|), which neither overflows nor cancels."""
    name = "sigmoid"
    flops_per_element = (5, (3,))  # |x|, -, exp, +, /;  g * y * (1 - y)

    def forward(self, x):
        y = in_float32(sigmoid, (), x)  # a 2-byte x: in float32, a block at a time (NOTE [a 2-byte GELU])
        self.save_for_backward(y)
        return y

    def backward(self, g):
        return (in_float32(self._grad, (), self.saved[0], g),)

    @staticmethod
    def _grad(y, g):
        xp = xp_of(y)
        d = xp.multiply(g, y, out=empty_like(y))
        d *= xp.subtract(1, y, out=empty_like(y))  # g y (1 - y)
        return d


def sign(x):
    """-1, 0 or 1, with PyTorch's 0 at nan (NumPy's sign is nan there), and bools as they are (NumPy has no sign of
    bools; PyTorch's is x): Sign's values, Abs's gradient."""
    if x.dtype == bool:
        return made(x.copy())
    s = made(xp_of(x).sign(x))  # each named and made: NOTE [every array an op makes] (backend/pool.py)
    number = s == s if is_float(s.dtype) else None  # bfloat16 too, whose kind is 'V
    return s if number is None else made(xp_of(x).where(made(number), s, s.dtype.type(0)))


class Abs(Op):
    """d |x| = sign(x) (0 at 0 and at nan, as in PyTorch)."""
    name = "abs"
    flops_per_element = (1, (2,))  # sign, *

    def forward(self, x):
        refuse_bool("abs", x)
        self.save_for_backward(x)
        return xp_of(x).abs(x)

    def backward(self, g):
        return (pooled(xp_of(g).multiply, g, sign(self.saved[0])),)


class Sign(Op):
    """d sign(x) = 0 (a step function: PyTorch's gradient is 0 everywhere, at the steps too)."""
    name = "sign"
    flops_per_element = (1, (0,))  # a zero gradient computes nothing

    def forward(self, x):
        return sign(x)

    def backward(self, g):
        return (xp_of(g).zeros_like(g),)


class Round(Op):
    """d round(x) = 0, as sign (PyTorch's); to the nearest, even at a half, at `decimals` places."""
    name = "round"
    flops_per_element = (1, (0,))

    def forward(self, x, decimals=0):
        return xp_of(x).round(x, decimals)

    def backward(self, g):
        return (xp_of(g).zeros_like(g),)


class Relu(Op):
    """d relu(x) = 1 where x > 0 (and at nan, as PyTorch's), else 0 (the output tells which)."""
    name = "relu"
    flops_per_element = (1, (2,))  # compare, *

    def forward(self, x):
        refuse_bool("relu", x)
        y = xp_of(x).maximum(x, 0)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        return (pooled(xp_of(g).multiply, g, made(self.saved[0] != 0)),)  # the output is >= 0, or nan


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
        return in_float32(self._gelu, (), x)  # a 2-byte x: in float32, a block at a time (NOTE [a 2-byte GELU])

    def _gelu(self, x):
        if self.approximate == "tanh":
            y = self._tanh_of_inner(x)
            y += 1
            y *= 0.5  # halved before x multiplies (NOTE [GELU at large x])
        else:
            y = normal_cdf(x)  # Phi(x) = (1 + erf(x / sqrt 2)) / 2: see special.normal_cdf
        y *= x  # x Phi(x), or 0.5 x (1 + tanh(K (x + 0.044715 x^3))), in place (NOTE [host memory pool])
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

    def _tanh_grad(self, xp, x, g):
        try:
            with np.errstate(over="raise", invalid="raise"):
                return self._tanh_backward(x, g)
        except FloatingPointError:  # NOTE [GELU at large x]
            pass  # out of the handler first: its traceback holds the first try's arrays, alive through a second
        with np.errstate(all="ignore"):
            grad = self._tanh_backward(x, g)
            finite = made(xp.isfinite(x))  # each mask made (NOTE [every array an op makes]); the rest in place
            for side, limit in ((made(x > 20), 1), (made(x < -20), 0)):  # (x > 0) * g where x is finite, |x| > 20
                side &= finite
                xp.multiply(g, limit, out=grad, where=side)
            return grad

    # NOTE [a 2-byte GELU]: the tanh approximation of a float16 or bfloat16 x runs in float32 and is rounded once,
    # as PyTorch's kernels compute it: in the 2-byte dtype, 1 + tanh(...) cancels to 0 where tanh rounds to -1
    # (bfloat16 from x = -3.4 on: GELU gave -0.0, PyTorch -0.00105), and float16's x^3 overflows from |x| = 40.
    # The exact GELU too: its backward, Phi(x) + x phi(x), cancels near x = -0.75 (bfloat16: 238 units of the
    # gradient's last place off there, PyTorch's half a unit). Sigmoid too: its roundings in the 2-byte dtype put it
    # up to 1.6 units of bfloat16's last place (float16's: 1.8) off the true value; PyTorch's and now minigrad's are
    # within half a unit. All three run a block at a time (backend.in_float32, NOTE [2-byte rows] in backend/rows.py):
    # the float32 copies of a block, not of the whole (B, T, 4h) activation.
    def backward(self, g):
        (x,) = self.saved
        return (in_float32(lambda x, g: self._grad(xp_of(x), x, g), (), x, g),)  # NOTE [a 2-byte GELU]

    def _grad(self, xp, x, g):
        if self.approximate == "tanh":
            return self._tanh_grad(xp, x, g)
        grad = xp.square(x, out=empty_like(x))  # in place from here: GELU's activations are a GPT's widest
                                                # (out=: NumPy would return a 0-d result as a scalar)
        grad *= -0.5
        xp.exp(grad, out=grad)
        grad *= x
        grad *= 1 / math.sqrt(2 * math.pi)  # x phi(x)
        grad += normal_cdf(x)
        grad *= g
        return grad


class Cast(Op):
    """x.to(dtype); the gradient goes back in the input's dtype. `cached`: x cast already (autocast's copy of a
    weight, NOTE [the weight-cast cache] in amp/autocast_mode.py), handed back: each use is a record of its own."""
    name = "cast"
    flops_per_element = (0, (0,))

    def forward(self, x, dtype, cached=None):
        self.in_dtype = x.dtype
        return x.astype(dtype) if cached is None else cached

    def backward(self, g):
        return (g.astype(self.in_dtype),)


class Clone(Op):
    """x.clone(): a new array of the same values, which the ledger counts as any op's output; the gradient passes
    through unchanged. Its own op, not x * 1 or x + 0: those would count FLOPs, save a constant and promote a bool."""
    name = "clone"
    flops_per_element = (0, (0,))

    def forward(self, x):
        return x.copy()

    def backward(self, g):
        return (g,)


class ToDevice(Op):
    """x.to(device); the gradient goes back to the input's device."""
    name = "to_device"
    flops_per_element = (0, (0,))

    def forward(self, x, device):
        self.in_device = device_of(x)
        return to_device(x, device)

    def backward(self, g):
        return (to_device(g, self.in_device),)


# ----------------------------------------------------------------------------- elementwise, by a mask

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
        ga = unbroadcast(pooled(xp_of(g).multiply, g, cond), sa) if na else None
        return ga, (unbroadcast(pooled(xp_of(g).multiply, g, made(~cond)), sb) if nb else None)


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
        return (pooled(xp_of(g).multiply, g, made(~self.saved[0])),)
