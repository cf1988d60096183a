"""Checks of exercise 2: unbroadcast against the sum over the broadcast copies, on shapes that
broadcast in every way (leading dims, size-1 dims, both, none, 0-d)."""
import numpy as np

from minigrad.grading import Failed, Question, close, rng

TITLE = "unbroadcasting: a gradient summed down to its input's shape"
LESSON = 6
HINTS = ("Line the two shapes up from the right, as broadcasting does. Which of grad's dims are copies of something "
         "in `shape`, and what happens to the gradients of copies of one element?",
         "Two kinds of copies: the leading dims that `shape` lacks (grad.ndim - len(shape) of them), and the dims "
         "where `shape` has size 1 but grad does not. Sum over both kinds at once: the first kind disappears, the "
         "second stays with size 1. Return grad itself, untouched, when the shapes are already equal.",
         "lead = grad.ndim - len(shape); axes = the dims 0 .. lead - 1, plus lead + i for each i where shape[i] == 1 "
         "and grad.shape[lead + i] != 1; then grad.sum(axis=axes).reshape(shape).")
QUESTION = Question(4, wrong={1: "that is one copy's gradient, or their mean; every one of the 4 copies of b[0] "
                                 "touched the loss, and their gradients add up",
                              0.25: "that is the mean over the copies; their gradients add up",
                              12: "that sums over every element; b[0] has only the 4 copies in its own column"})

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
