"""Exercise 6 (after lesson 2): the ledger by hand. Predict what an MLP step keeps and computes, from its shapes alone.

The model: L layers, each Linear(sizes[i], sizes[i + 1]) followed by Tanh, so sizes = [in, h1, ...,
out] has L + 1 entries. The data batch x, of shape (B, sizes[0]), needs no gradient. One step is
`model(x).sum().backward()`, measured by mg.profile:

    with mg.profile() as prof:
        model(x).sum().backward()
    prof.peak_bytes("activations")          # bytes that records saved for their backward, at the peak
    prof.flops("forward", op="matmul")      # matrix-product FLOPs of the forward
    prof.flops("backward", op="matmul")     # ... and of the backward

What each op saves for its backward (minigrad/ops/; docs/ledger.md):

    Linear  y = x W^T + b    saves its input x (its weight gradient needs it), even when x itself needs
                             no gradient. W is read too, but W is a parameter: the ledger counts it under
                             'parameters', never as an activation.
    Tanh    y = tanh(a)      saves its output y (its derivative is written with y).

The ledger counts BUFFERS, as the memory allocator sees them: an array is counted once, however many
records hold it. Backward only frees what records saved.

FLOPs: a matrix product (m x k) @ (k x n) costs 2 m k n (a multiply and an add per term). Linear's
forward is one product. Its backward computes the gradients that someone needs, one product for each:
which are they, what does each cost, and which of them does the first layer skip? The bias and the
tanh count under other ops, not 'matmul'.

Derive both counts on paper for sizes = [in, h, out] first, then in general, then write them:
activation_bytes(batch, sizes, itemsize) (4 bytes per element for float32, 8 for float64) and
matmul_flops(batch, sizes) -> (forward, backward), both whole numbers.

Graded: against what mg.profile measures on MLPs of seeded random depths, widths, batches and dtypes,
layer by layer, so that a failure names the first layer you miscounted and what it measured.

Explain (graded: set EXPLAIN, below, to a number). The same step, B = 32, sizes = [64, 128, 10], but
now the data batch x requires grad. By how many FLOPs does prof.flops("backward", op="matmul") grow?

Grade it:  python -m minigrad check 6        (stuck? python -m minigrad check 6 --hint)
"""

EXPLAIN = None  # your answer to the question at the end of the docstring


def activation_bytes(batch, sizes, itemsize=4):
    """Peak activation bytes of one step of the MLP: the bytes its records save for backward."""
    raise NotImplementedError("Exercise 6 (activation_bytes): the count of saved bytes is not written yet")


def matmul_flops(batch, sizes):
    """(forward, backward) matrix-product FLOPs of one step of the MLP."""
    raise NotImplementedError("Exercise 6 (matmul_flops): the forward and backward FLOP counts are not written yet")
