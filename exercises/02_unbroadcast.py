"""Exercise 2: unbroadcasting, the backward of NumPy's broadcasting.

`a + b` with a of shape (4, 3) and b of shape (3,) adds b to every row: NumPy *broadcasts* b, as if
it were copied 4 times. Each copy of b[j] touched the loss, so b's gradient is the SUM of the
incoming gradient over the copies. The same holds for a size-1 dim: b of shape (4, 1) is copied
along dim 1, so its gradient sums over dim 1 and keeps that dim, with size 1.

Broadcasting compares shapes from the right:

    grad (2, 4, 3)   ->  shape (4, 1):  sum over dim 0 (a leading dim b does not have),
                                        then over grad's dim 2 (b's dim 1, where b has size 1),
                                        keeping it with size 1.

Write unbroadcast(grad, shape): sum `grad` down to `shape` (return grad itself when the shapes
already match). Every op with two inputs uses this in its backward (see Add in minigrad/ops/pointwise.py).
Useful: grad.sum(axis=tuple_of_axes, keepdims=...), .reshape(shape).

Grade it:  python -m minigrad check 2
"""


def unbroadcast(grad, shape):
    raise NotImplementedError("Exercise 2 (unbroadcast): sum grad over its leading dims that shape lacks, and "
                              "over the dims where shape has size 1 (keepdims), so that the result has `shape`")
