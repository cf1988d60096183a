"""Checks of exercise 2: unbroadcast against the sum over the broadcast copies, on shapes that
broadcast in every way (leading dims, size-1 dims, both, none, 0-d)."""
import numpy as np

from minigrad.grading import Failed, close, rng

TITLE = "unbroadcasting: a gradient summed down to its input's shape"

CASES = [((4, 3), (3,)), ((4, 3), (4, 1)), ((2, 4, 3), (4, 1)), ((2, 4, 3), (1, 4, 3)), ((2, 4, 3), ()),
         ((5,), (1,)), ((3, 1, 5), (3, 1, 5)), ((2, 3, 4, 5), (3, 1, 1)), ((6, 2), (1, 1))]


def check(ex):
    r = rng(2)
    for out_shape, shape in CASES:
        grad = r.standard_normal(out_shape)
        # the reference, by definition: each element of the input got every copy's gradient
        index = np.arange(int(np.prod(shape, dtype=int))).reshape(shape)
        copies = np.broadcast_to(index, out_shape).reshape(-1)
        expected = np.bincount(copies, weights=grad.reshape(-1), minlength=index.size).reshape(shape)
        got = ex.unbroadcast(grad, shape)
        if got is None:
            raise Failed(f"unbroadcast(grad of shape {out_shape}, {shape}) returned None: return the summed array")
        close(f"unbroadcast(grad of shape {out_shape}, shape {shape})", got, expected, rtol=1e-10)
    same = r.standard_normal((3, 4))
    if ex.unbroadcast(same, (3, 4)) is not same:
        raise Failed("unbroadcast(grad, grad.shape) should return grad itself: no copy, no work, when nothing "
                     "was broadcast")
