"""Exercise 2, the reference (after lesson 6): unbroadcasting (minigrad/ops/base.py has the same function)."""

EXPLAIN = 4  # b[0] was copied into 4 rows; each copy got a gradient of 1, and they add up


def unbroadcast(grad, shape):
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and grad.shape[lead + i] != 1)
    return grad.sum(axis=axes).reshape(shape)
