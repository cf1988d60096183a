"""Exercise 1, the reference: the backward of elementwise ops.

An op in minigrad is a small class (see minigrad/ops/pointwise.py). Its forward(*arrays) computes the output
from raw NumPy arrays and calls self.save_for_backward(...) with exactly what backward will need.
Its backward(g) receives g, the gradient of the loss with respect to the op's output (an array of
the output's shape), reads what forward saved from self.saved, and returns a tuple with one
gradient per input. For an elementwise op that is the chain rule, element by element:

    d loss / d x  =  g * d out / d x

The forwards are written. Write each backward:

    d exp(x)  / dx = exp(x)             (Exp saved its output y = exp(x): reuse it)
    d tanh(x) / dx = 1 - tanh(x)^2      (Tanh saved its output y = tanh(x))
    d log(x)  / dx = 1 / x              (Log saved its input x)
    d x^p     / dx = p * x^(p - 1)      (Pow saved its input x; the constant p is self.exponent)

Each must return a tuple, even for one input: `return (g * something,)`.
Grade it:  python -m minigrad check 1
"""
import numpy as np

from minigrad.ops import Op


class Exp(Op):
    name = "exp"
    flops_per_element = (1, (1,))

    def forward(self, x):
        y = np.exp(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        return (g * self.saved[0],)


class Tanh(Op):
    name = "tanh"
    flops_per_element = (1, (3,))

    def forward(self, x):
        y = np.tanh(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        (y,) = self.saved
        return (g * (1 - y * y),)


class Log(Op):
    name = "log"
    flops_per_element = (1, (1,))

    def forward(self, x):
        self.save_for_backward(x)
        return np.log(x)

    def backward(self, g):
        return (g / self.saved[0],)


class Pow(Op):
    name = "pow"
    flops_per_element = (1, (3,))

    def forward(self, x, exponent):
        self.exponent = exponent
        self.save_for_backward(x)
        return x ** exponent

    def backward(self, g):
        (x,) = self.saved
        p = self.exponent
        return (g * (p * x ** (p - 1)),)
