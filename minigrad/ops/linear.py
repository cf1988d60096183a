"""The matrix products: Matmul (a @ b) and Linear (x @ W^T + b), with the two helpers they share, `rows` and the
pooled `matmul`. Nearly all of a model's FLOPs are here, and both count them under 'matmul' (NOTE [FLOP
convention] in base.py).

Read next: nn.py, the fused neural-net ops.
"""
import math

import numpy as np

from ..backend import BFLOAT16, POOL_MIN, accumulator, empty, made, narrow, sum_leading, widen, xp_of
from .base import LEARNED, Op, ShapeError, learned, refuse_bool, unbroadcast


def rows(a):
    """a as a 2-d array of rows, every leading dim a batch dim (no call at all when it is 2-d already). The row
    count is spelled out for an empty array, whose -1 NumPy cannot infer when a row is empty too."""
    if a.ndim == 2:
        return a
    return a.reshape(-1, a.shape[-1]) if a.size else a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def matmul(a, b):
    """a @ b; a big result goes into an array from the pool (NOTE [host memory pool], backend/pool.py)."""
    if a.ndim < 2 or b.ndim < 2 or not a.shape[-1] or a.size // a.shape[-1] * b.shape[-1] * a.itemsize < POOL_MIN:
        out = a @ b  # 1-d operands as NumPy's @; a small result (or k == 0: zeros) from malloc, no pool look-up
        # bfloat16's @ gives float32 (NOTE [bfloat16]); `is`, not ==: NumPy's dtype == costs 600 instructions, 0.8% of
        # a tiny MLP's step (callgrind), and NumPy's builtin dtypes are single objects (astype covers any other)
        return out if out.dtype is a.dtype else out.astype(a.dtype, copy=False)
    shape = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
    return xp_of(a).matmul(a, b, out=empty(shape, a.dtype, a))


# NOTE [a bias, rounded once]: PyTorch's linear in float16 or bfloat16 is one addmm: x @ W^T is summed in float32, the
# bias is added to that float32 sum, and the result is rounded once. Rounding the product to the 2-byte dtype and
# then its sum with the bias again put 29% of the outputs of a bfloat16 Linear(32, 48) one ulp off and, where the
# bias cancels the product, 124 ulps off (-0.0078125, PyTorch -0.0040283, exact -0.0040336). So with a bias, a 2-byte
# product stays in float32 until the bias is in: bfloat16's @ gives float32 already (NOTE [bfloat16]); float16's
# rounds to float16 (NumPy, cuBLAS), so its operands are widened first. The float32 product, twice the output's
# bytes, and float16's widened copies are made and counted (NOTE [every array an op makes]).
def product_in_float32(a, b):
    """a @ b of 2-byte a and b, in float32, not rounded (NOTE [a bias, rounded once])."""
    if a.dtype == BFLOAT16:
        return made(a @ b)
    return matmul(widen(a), widen(b))


class Matmul(Op):
    """d(a @ b) = (g @ b^T, a^T @ g), summed over broadcast batch dims; 1-d inputs as in NumPy."""
    name = "matmul"

    def forward(self, a, b):
        refuse_bool("matmul", a, b)
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
        if LEARNED and (mine := learned("Matmul.backward", self, g)) is not NotImplemented:  # NOTE [learner's pieces]
            return mine
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
        return {"matmul": 2 * out.size * inputs[0].shape[-1]}  # 2 m n k (times the batch); a dot's 0-d out: size 1

    def backward_flops(self, grad, input_grads):
        k = self.shapes[0][-1]
        return {"matmul": sum(2 * grad.size * k for gi in input_grads if gi is not None)}  # 0 for an empty m or n


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
        wide = bias is not None and x.dtype.itemsize == 2 and accumulator(x.dtype) is not None  # NOTE [a bias, rounded once]
        y = (product_in_float32 if wide else matmul)(rows(x), weight.T)
        if x.ndim != 2:
            y = y.reshape(*x.shape[:-1], weight.shape[0])
        if bias is not None:
            y += bias  # y is a fresh array: adding in place saves one output-sized temporary
        return narrow(y, x.dtype) if wide else y

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
        counts = {"matmul": 2 * math.prod(x.shape[:-1]) * w.shape[0] * w.shape[1]}  # 2 N in out (in = 0 too)
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
