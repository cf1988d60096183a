"""Exercise 1, the reference (after lesson 5): the backward of elementwise ops (minigrad/ops/pointwise.py has
the engine's, with their FLOP counts)."""
import numpy as np

from minigrad.ops import Op

EXPLAIN = 4000  # exp keeps its output y; log keeps its input, the same y: one buffer of 1,000 x 4 bytes

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
