"""Exercise 3, the reference (after lesson 6): the backward of a batched matmul (minigrad/ops/linear.py's Matmul also takes 1-d inputs)."""
from minigrad.ops import unbroadcast

EXPLAIN = 2  # two products of the forward's size, g @ b^T and a^T @ g


def matmul_backward(g, a, b):
    ga = g @ b.swapaxes(-1, -2)  # (..., m, n) @ (..., n, k): the broadcast batch dims, then (m, k)
    gb = a.swapaxes(-1, -2) @ g  # (..., k, m) @ (..., m, n)
    return unbroadcast(ga, a.shape), unbroadcast(gb, b.shape)
