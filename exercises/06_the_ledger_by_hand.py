"""Exercise 6: the ledger by hand. Predict what an MLP step keeps and computes, from its shapes alone.

The model: L layers, each Linear(sizes[i], sizes[i + 1]) followed by Tanh, so sizes = [in, h1, ...,
out] has L + 1 entries. The data batch x, of shape (B, sizes[0]), needs no gradient. One step is
`model(x).sum().backward()`, measured by mg.profile:

    with mg.profile() as prof:
        model(x).sum().backward()
    prof.peak_bytes("activations")          # bytes that records saved for their backward, at the peak
    prof.flops("forward", op="matmul")      # matrix-product FLOPs of the forward
    prof.flops("backward", op="matmul")     # ... and of the backward

What each op saves for its backward (minigrad/ops/; docs/ledger.md):

    Linear  y = x W^T + b    dW = g^T x needs x: it saves its input x (B x in). dx = g W needs W,
                             but W is a parameter: the ledger counts it under 'parameters', never
                             as an activation. It saves x even when x needs no gradient.
    Tanh    y = tanh(a)      d tanh = 1 - y^2 needs y: it saves its output y (B x out).

The ledger counts BUFFERS, as the memory allocator sees them: one array saved by two records is
held once and counted once. Look at where one layer's Tanh output goes next before you add it up.
The peak comes at the end of the forward: backward only frees saved arrays. An array of B x n
elements of a dtype of `itemsize` bytes (4 for float32, 8 for float64) is B * n * itemsize bytes.

FLOPs: a matrix product (m x k) @ (k x n) costs 2 m k n (a multiply and an add per term). Linear's
forward is one product (B x in) @ (in x out). Its backward makes dW = g^T x, a product of the same
cost, and dx = g W, another one, but only when its input needs a gradient; the data batch does
not. The bias and the tanh count under other ops, not 'matmul'.

Write activation_bytes(batch, sizes, itemsize) and matmul_flops(batch, sizes) -> (forward, backward).
Derive them first; minigrad/formulas.py holds the answer (mlp_saved_bytes, mlp_matmul_flops).

Grade it:  python -m minigrad check 6
"""


def activation_bytes(batch, sizes, itemsize=4):
    """Peak activation bytes of one step of the MLP: the bytes its records save for backward."""
    raise NotImplementedError("Exercise 6 (activation_bytes): add up, in bytes, the arrays that each Linear and "
                              "each Tanh save; an array saved by two records is one buffer, counted once")


def matmul_flops(batch, sizes):
    """(forward, backward) matrix-product FLOPs of one step of the MLP."""
    raise NotImplementedError("Exercise 6 (matmul_flops): 2 * B * in * out per Linear in forward; in backward, "
                              "dW and dx cost as much each, but nobody computes dx for the data batch")
