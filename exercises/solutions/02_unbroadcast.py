"""Exercise 2, the reference: unbroadcasting (minigrad/ops/base.py has the same function)."""


def unbroadcast(grad, shape):
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and grad.shape[lead + i] != 1)
    return grad.sum(axis=axes).reshape(shape)
