"""Exercise 3: the backward of a batched matmul.

`a @ b` multiplies the last two dims as matrices, and broadcasts the dims before them (the batch
dims) as NumPy broadcasts any elementwise op:

    a (m, k)        @ b (k, n)     -> out (m, n)
    a (B, m, k)     @ b (B, k, n)  -> out (B, m, n)         one product per batch entry
    a (2, 1, m, k)  @ b (5, k, n)  -> out (2, 5, m, n)      batch dims (2, 1) and (5,) broadcast to (2, 5)

For one pair of matrices, with g = d loss / d out of out's shape (m, n):

    d loss / d a = g @ b^T      (m, n) @ (n, k) -> (m, k)
    d loss / d b = a^T @ g      (k, m) @ (m, n) -> (k, n)

With batch dims the same two formulas hold for every batch entry, and `@` on stacks of matrices does
exactly that, provided "transpose" swaps only the LAST TWO dims: x.swapaxes(-1, -2). (x.T reverses
every dim: right for a matrix, wrong for a stack of them.)

What comes out has the broadcast batch dims: for a (2, 1, m, k) above, g @ b^T is (2, 5, m, k). The
one matrix a[i, 0] was used by the 5 products out[i, 0], ..., out[i, 4], so its gradient is the sum of
those 5: sum over the broadcast batch dims, which is unbroadcast from exercise 2 (minigrad.ops has the
same function, imported below). Likewise b (5, k, n) was used by out[0, j] and out[1, j].

Write matmul_backward(g, a, b) -> (ga, gb) on raw NumPy arrays, for a and b with at least 2 dims: ga
of a's shape and dtype, gb of b's. (NumPy also takes 1-d a or b, as a row or a column; that case is
not graded. minigrad/ops/linear.py's Matmul handles it: read it after.)

Grade it:  python -m minigrad check 3
"""
import numpy as np

from minigrad.ops import unbroadcast


def matmul_backward(g, a, b):
    raise NotImplementedError("Exercise 3 (matmul_backward): per matrix ga = g @ b^T and gb = a^T @ g, with the "
                              "last two dims swapped by .swapaxes(-1, -2); then unbroadcast each to its input's shape")
