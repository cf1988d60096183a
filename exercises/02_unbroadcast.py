"""Exercise 2 (after lesson 6): unbroadcasting, the backward of NumPy's broadcasting.

`a + b` with a of shape (4, 3) and b of shape (3,) adds b to every row: NumPy broadcasts b, as if it
were copied 4 times. Each copy of b[j] touched the loss, so the gradient of b[j] gathers what arrived
at every one of its copies. Broadcasting lines shapes up from the right, and makes copies in two ways:
a dim that one side lacks on the left, and a dim where one side has size 1.

Before you write anything, work out by hand, for a gradient of shape (2, 4, 3) arriving at a tensor of
shape (4, 1): which of the gradient's dims are copies, and which shape comes out at each step.

Write unbroadcast(grad, shape): `grad` (a NumPy array) is the gradient at the broadcast result; return
the gradient of the tensor that had `shape`: an array of exactly that shape. When nothing was broadcast
(the shapes are equal), give back the very array you were given: no copy, no work. Every op with two
inputs runs this in its backward (Add in minigrad/ops/pointwise.py).

Graded: against the definition (each element gathers its copies' gradients) on shapes that broadcast in
every way: leading dims, size-1 dims, both, none, and a 0-d shape (); and that equal shapes cost nothing.

Explain (graded: set EXPLAIN, below, to a number). a has shape (4, 3), b has shape (3,), both require
grad, and loss = (a + b).sum(). What is b.grad[0]?

Grade it:  python -m minigrad check 2        (stuck? python -m minigrad check 2 --hint)
"""

EXPLAIN = None  # your answer to the question at the end of the docstring


def unbroadcast(grad, shape):
    raise NotImplementedError("Exercise 2 (unbroadcast): the gradient summed down to `shape` is not written yet")
