"""Exercise 5 (after lesson 5): softmax and log_softmax, whose backward needs their output alone.

What a record keeps for its backward is activation memory (exercise 1: Exp and Tanh keep their
output). Softmax and log_softmax can do the same, and a transformer runs one softmax per attention
head per layer, so keeping the input as well would double that memory for nothing.

Along `dim`, with S(.) the sum along dim:

    softmax       y_i = exp(x_i) / S(exp(x))
    log_softmax   y_i = x_i - log S(exp(x))

As written, exp(1000) overflows to inf and exp(-1000) underflows to 0: find a shift of x along dim that
changes neither result and keeps every exp in range. And log_softmax is not log(softmax): where softmax
underflows to 0 its log is -inf, though the true value is finite.

Derive the backwards from the Jacobian, written with the output only:

    softmax       d y_i / d x_j = y_i (delta_ij - y_j)
    log_softmax   d y_i / d x_j = delta_ij - exp(y_j)

The gradient at x is g contracted with it: dx_j = sum over i of g_i d y_i / d x_j. Simplify that sum
until it is a few elementwise operations and one sum along dim, with nothing but g and y.

Write forward(x, dim) and backward(g) of both classes, on raw NumPy arrays (dim may be negative).
forward returns y and keeps what backward needs: the output through save_for_backward, the one door
the ledger counts, and dim (a number) on self. backward returns (dx,).

Graded: each forward against a stable float64 reference, also at x near +-1000 and on confident logits;
each backward against finite differences in float64 along several dims; and, with mg.profile, that
each record keeps the output's own buffer and nothing beside (not the input, not a copy, no array on
self outside save_for_backward).

Explain (graded: set EXPLAIN, below, to a number). Attention's softmax runs on scores of shape
(B, heads, T, T) = (8, 12, 512, 512) in float32. How many MiB does its record keep for backward?

Grade it:  python -m minigrad check 5        (stuck? python -m minigrad check 5 --hint)
"""
import numpy as np

from minigrad.ops import Op

EXPLAIN = None  # your answer to the question at the end of the docstring


class Softmax(Op):
    name = "softmax"
    flops_per_element = (5, (4,))  # the FLOPs per element of forward and of backward

    def forward(self, x, dim):
        raise NotImplementedError("Exercise 5 (Softmax.forward): not written yet")

    def backward(self, g):
        raise NotImplementedError("Exercise 5 (Softmax.backward): not written yet")


class LogSoftmax(Op):
    name = "log_softmax"
    flops_per_element = (5, (4,))  # the FLOPs per element of forward and of backward

    def forward(self, x, dim):
        raise NotImplementedError("Exercise 5 (LogSoftmax.forward): not written yet")

    def backward(self, g):
        raise NotImplementedError("Exercise 5 (LogSoftmax.backward): not written yet")
