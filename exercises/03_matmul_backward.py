"""Exercise 3 (after lesson 6): the backward of a batched matmul.

`a @ b` multiplies the last two dims as matrices, and broadcasts the dims before them (the batch
dims) as NumPy broadcasts any elementwise op:

    a (m, k)        @ b (k, n)     -> out (m, n)
    a (B, m, k)     @ b (B, k, n)  -> out (B, m, n)         one product per batch entry
    a (2, 1, m, k)  @ b (5, k, n)  -> out (2, 5, m, n)      batch dims (2, 1) and (5,) broadcast to (2, 5)

Derive the two gradients for one pair of matrices first, from one element: out[i, j] is the sum over
l of a[i, l] * b[l, j]. Which elements of out does a[i, l] touch, and with what factor? Write the sum
that gives d loss / d a[i, l] from g = d loss / d out, and read it as a matrix product; the same for b.
Check the shapes: the gradient of a is (m, k), of b is (k, n).

With batch dims the per-matrix rule holds for every batch entry, and `@` on stacks of matrices applies
it to each. What comes out has the BROADCAST batch dims: in the third line above, a[i, 0] was used by
5 products, and its gradient gathers all 5 (exercise 2; minigrad.ops has its unbroadcast, imported below).

Write matmul_backward(g, a, b) -> (ga, gb) on raw NumPy arrays, for a and b with at least 2 dims: ga of
a's shape and dtype, gb of b's. (NumPy also takes a 1-d a or b; that case is not graded.)

Graded: against minigrad's Matmul in float64 on plain, batched and broadcast shapes (which element,
expected, got; a shape error with the case that caused it); float32 in gives float32 out.

Explain (graded: set EXPLAIN, below, to a number). For 2-d a and b that both need a gradient, the
backward's matrix products cost how many times the forward's FLOPs?

Grade it:  python -m minigrad check 3        (stuck? python -m minigrad check 3 --hint)
"""
import numpy as np

from minigrad.ops import unbroadcast

EXPLAIN = None  # your answer to the question at the end of the docstring


def matmul_backward(g, a, b):
    raise NotImplementedError("Exercise 3 (matmul_backward): the gradients of a and b are not written yet")
