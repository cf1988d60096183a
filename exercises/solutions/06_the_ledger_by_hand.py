"""Exercise 6, the reference (after lesson 2): the ledger by hand (minigrad/formulas.py has the same two functions)."""

EXPLAIN = 524288  # the first layer's dx = g W now happens: 2 * 32 * 64 * 128


def activation_bytes(batch, sizes, itemsize=4):
    # linear i saves its input (B x sizes[i]); tanh i saves its output (B x sizes[i+1]), which is
    # linear i+1's input: one buffer. So: the data batch and every layer's output, once each.
    return batch * sum(sizes) * itemsize


def matmul_flops(batch, sizes):
    per_layer = [2 * batch * a * b for a, b in zip(sizes[:-1], sizes[1:])]
    forward = sum(per_layer)
    # dW and dx per layer, less the first layer's dx: the data batch needs no gradient
    return forward, 2 * forward - per_layer[0]
