"""Exercise 1: the backward of elementwise ops.

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

Each must return a tuple with one gradient per array input, even for one: `return (g * something,)`.
Pow's exponent is a Python number kept on self, not an input: Pow.backward returns a 1-tuple too.
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
        raise NotImplementedError("Exercise 1 (Exp.backward): the derivative of exp is exp itself, which forward saved")


class Tanh(Op):
    name = "tanh"
    flops_per_element = (1, (3,))

    def forward(self, x):
        y = np.tanh(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        raise NotImplementedError("Exercise 1 (Tanh.backward): the derivative is 1 - y * y, with y = self.saved[0]")


class Log(Op):
    name = "log"
    flops_per_element = (1, (1,))

    def forward(self, x):
        self.save_for_backward(x)
        return np.log(x)

    def backward(self, g):
        raise NotImplementedError("Exercise 1 (Log.backward): the derivative is 1 / x, with x = self.saved[0]")


class Pow(Op):
    name = "pow"
    flops_per_element = (1, (3,))

    def forward(self, x, exponent):
        self.exponent = exponent
        self.save_for_backward(x)
        return x ** exponent

    def backward(self, g):
        raise NotImplementedError("Exercise 1 (Pow.backward): the derivative is p * x ** (p - 1), "
                                  "with p = self.exponent and x = self.saved[0]")
