"""Exercise 5: softmax and log_softmax, whose backward needs their output alone.

What a record keeps for its backward is activation memory (exercise 1: Exp and Tanh keep their
output). Softmax and log_softmax can do the same, and a transformer runs one softmax per attention
head per layer, so keeping the input as well would double that memory for nothing.

Along `dim`, with s = sum over dim (keepdims=True, so that it broadcasts back):

    softmax       y = exp(x - m) / s(exp(x - m))      m = max of x along dim, subtracted so that exp
                                                      never overflows (exp(1000) is inf; the
                                                      shift cancels in the quotient)
    log_softmax   y = (x - m) - log s(exp(x - m))

Their derivatives, written with the output y only:

    softmax       dy_i/dx_j = y_i (delta_ij - y_j)    so   dx = y * (g - s(g * y))
    log_softmax   dy_i/dx_j = delta_ij - exp(y_j)     so   dx = g - exp(y) * s(g)

(softmax(x) = exp(log_softmax(x)): log_softmax recovers it from its own output.)

Write forward(x, dim) and backward(g) of both classes, on raw NumPy arrays: forward computes y, keeps
dim for backward (self.dim = dim), calls self.save_for_backward(y) with the output alone, and returns
y; backward reads it back from self.saved and returns (dx,). Use x.max(axis=dim, keepdims=True),
np.exp, np.log and .sum(axis=dim, keepdims=True); dim may be negative.

The check measures what each keeps with mg.profile: the output's bytes, and the output itself (not the
input, not a copy, and no array stored on self beside save_for_backward, the one door that counts; a number such as
self.dim is fine).

Grade it:  python -m minigrad check 5
"""
import numpy as np

from minigrad.ops import Op


class Softmax(Op):
    name = "softmax"
    flops_per_element = (5, (4,))  # max, -, exp, sum, /;  g*y, sum, -, * y

    def forward(self, x, dim):
        raise NotImplementedError("Exercise 5 (Softmax.forward): exp of x minus its max along dim (keepdims=True), "
                                  "divided by its sum along dim; set self.dim = dim, save y alone, return y")

    def backward(self, g):
        raise NotImplementedError("Exercise 5 (Softmax.backward): (y,) = self.saved; dx = y * (g - sum of g * y along "
                                  "self.dim, keepdims=True); return (dx,)")


class LogSoftmax(Op):
    name = "log_softmax"
    flops_per_element = (5, (4,))  # max, -, exp, sum, log and -;  exp, sum, *, -

    def forward(self, x, dim):
        raise NotImplementedError("Exercise 5 (LogSoftmax.forward): z = x minus its max along dim (keepdims=True), "
                                  "y = z - log of the sum of exp(z) along dim; set self.dim, save y alone, return y")

    def backward(self, g):
        raise NotImplementedError("Exercise 5 (LogSoftmax.backward): (y,) = self.saved; dx = g - exp(y) * (sum of g "
                                  "along self.dim, keepdims=True); return (dx,)")
