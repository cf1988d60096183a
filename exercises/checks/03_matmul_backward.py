"""Checks of exercise 3: matmul_backward against minigrad's own Matmul in float64 (itself checked against
finite differences in tests/test_gradcheck_ops.py), on plain, batched and broadcast shapes; a shape
that kept the broadcast batch dims is explained; float32 in gives float32 out."""
import os
import traceback

import numpy as np

import minigrad as mg
from minigrad import backend
from minigrad.grading import Failed, Question, close, require, rng

TITLE = "the backward of a batched matmul, summed over broadcast batch dims"
LESSON = 6
HINTS = ("Forget the batch dims first: for 2-d a (m, k) and b (k, n), write d loss / d a[i, l] as a sum over the "
         "elements of out that a[i, l] touches. Then look at the shapes: which product of g (m, n) with a or b has "
         "shape (m, k)?",
         "Per matrix, ga = g @ b^T and gb = a^T @ g. On stacks, transpose only the last two dims (x.swapaxes(-1, -2)); "
         "x.T reverses every dim, right for a matrix and wrong for a stack. Then the products have the broadcast "
         "batch dims: sum them down to each input's shape.",
         "ga = g @ b.swapaxes(-1, -2); gb = a.swapaxes(-1, -2) @ g; return unbroadcast(ga, a.shape), "
         "unbroadcast(gb, b.shape).")
QUESTION = Question(2, wrong={1: "backward makes two products, one per input's gradient, each as large as the forward's",
                              3: "that counts the forward too: backward alone makes two products of the forward's size"})

CASES = [("2-d", (3, 4), (4, 5)),
         ("3-d, the same batch", (2, 3, 4), (2, 4, 5)),
         ("broadcast batch dims", (2, 1, 3, 4), (5, 4, 2)),
         ("a without batch dims", (3, 4), (6, 4, 2)),
         ("b without batch dims", (2, 3, 4), (4, 5)),
         ("a size-1 batch dim in b", (3, 2, 4), (1, 4, 5))]


def _engine(g, a, b):
    """The expected gradients, from minigrad's Matmul."""
    ta, tb = mg.tensor(a, requires_grad=True), mg.tensor(b, requires_grad=True)
    (ta @ tb).backward(gradient=mg.tensor(g))
    return backend.to_numpy(ta.grad.data), backend.to_numpy(tb.grad.data)


def _shape(name, got, want, other, out_shape):
    if got.shape == want:
        return
    if got.shape == out_shape[:-2] + want[-2:]:
        raise Failed(f"{name} has shape {got.shape}, with the broadcast batch dims of out {out_shape}, but its input "
                     f"is {want}: sum the gradient over the batch dims that were broadcast (unbroadcast(..., {want}))")
    raise Failed(f"{name} has shape {got.shape}, expected its input's shape {want} (the other input is {other}): "
                 f"work out, for one pair of matrices, which product of g with the other input has that shape",
                 "Per matrix ga = g @ b^T and gb = a^T @ g; transpose the last two dims only (.swapaxes(-1, -2); "
                 ".T reverses every dim)")


def _call(ex, g, a, b, where):
    """The learner's function; a NumPy shape error comes back with the case and the learner's line."""
    try:
        return ex.matmul_backward(g, a, b)
    except ValueError as e:
        lines = [f.lineno for f in traceback.extract_tb(e.__traceback__)
                 if os.path.abspath(f.filename) == os.path.abspath(ex.__file__)]
        raise Failed(f"matmul_backward{where} raised ValueError{f' at line {lines[-1]}' if lines else ''}: {e}. "
                     f"Shapes per matrix: g (m, n) @ b^T (n, k), a^T (k, m) @ g (m, n); transpose the last two dims "
                     f"only (.swapaxes(-1, -2); .T reverses every dim: the same for a matrix, wrong for a "
                     f"stack)") from None


def check(ex):
    r = rng(3)
    for case, sa, sb in CASES:
        a, b = r.standard_normal(sa), r.standard_normal(sb)
        out_shape = np.matmul(a, b).shape
        g = r.standard_normal(out_shape)
        where = f" ({case}: a {sa} @ b {sb} -> out {out_shape})"
        grads = _call(ex, g, a, b, where)
        require(isinstance(grads, tuple) and len(grads) == 2,
                f"matmul_backward must return a tuple (ga, gb); got {type(grads).__name__}"
                + (f" of length {len(grads)}" if isinstance(grads, tuple) else ""))
        expected = _engine(g, a, b)
        for name, got, want, shape, other in (("ga", grads[0], expected[0], sa, sb),
                                              ("gb", grads[1], expected[1], sb, sa)):
            require(got is not None, f"{name} is None{where}: return an array of shape {shape}")
            _shape(name + where, np.asarray(got), shape, other, out_shape)
            close(name, got, want, rtol=1e-10, where=where)
    a, b = r.standard_normal((2, 3, 4)).astype(np.float32), r.standard_normal((4, 5)).astype(np.float32)
    ga, gb = _call(ex, np.ones((2, 3, 5), np.float32), a, b, " (float32: a (2, 3, 4) @ b (4, 5))")
    for name, got in (("ga", ga), ("gb", gb)):
        require(np.asarray(got).dtype == np.float32,
                f"{name} is {np.asarray(got).dtype} for float32 inputs: a gradient has its input's dtype (a float64 "
                f"gradient doubles its memory); something made a float64 array (np.zeros without dtype=?)")
