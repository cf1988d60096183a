"""Exercise 4 (after lesson 5): the tape walk, backward() itself.

Every op applied to a tensor that requires grad leaves a record on the tape: the op instance itself
(a minigrad.ops.Op, as in exercise 1), reachable from its output as `out.grad_fn`. A record has

    record.backward(g)  one gradient per input (None for an input that needs none), as in exercise 1
    record.next         per input: the record that made that input, or the leaf Tensor itself (x made
                        with requires_grad=True, a weight), or None (an input that needs no gradient)
    record.seq          its creation number: larger than that of every record that made its inputs

Write backward(root): from a scalar root that requires grad, give every leaf the root reaches its
gradient d root / d leaf in leaf.grad, as root.backward() does, walking the records yourself.

Think it through on this graph before you write a line:

    h = x.tanh(); root = (h.exp().tanh() * h).sum()

    x --[tanh]--> h --[exp]--> . --[tanh]--> . --+
                  |                              +--[mul]--> . --[sum]--> root
                  +------------------------------+

What does the record that made h need before its own backward may run? In which order, then, may the
records run, and how do you find that order on any graph, cheaply? What gradient starts the walk?

The contract for a leaf: leaf.grad is a Tensor in the leaf's dtype, holding an array of its own (not
one an op handed on, which another input may share). A second backward adds into it, as in PyTorch:
gradient accumulation (exercise 11) stands on that.

Graded, against minigrad's own backward in float64: an x used three times, the diamond above, one
array handed to two inputs, a 2-layer MLP; that you walk the records yourself (root.backward() inside
does not count: the check sees it); that two calls add up; and a chain of 100,000 ops, in a time that
grows like the chain. Three traps lie there, and the check names each one it meets:
  - Python allows sys.getrecursionlimit() (1,000) nested calls, and a chain is as deep as it is long.
  - An op may hand one array to two inputs (Add gives g to both), and Sum hands a read-only view: an
    array you did not make is not yours to write into.
  - Tensors compare elementwise (== makes a tensor), so they are no good as dict keys; records are
    compared by identity, and are.
(minigrad's own walk, which also frees each record's saved arrays as it goes, is in minigrad/tensor/tape.py:
read it after.)

Explain (graded: set EXPLAIN, below, to a number). In the diamond above, how many gradient arrays
arrive at the record that made h, before it runs?

Grade it:  python -m minigrad check 4        (stuck? python -m minigrad check 4 --hint)
"""
import numpy as np  # noqa: F401

import minigrad as mg  # noqa: F401
from minigrad.ops import Op  # noqa: F401  (isinstance(n, Op): a record, not a leaf)

EXPLAIN = None  # your answer to the question at the end of the docstring


def backward(root):
    raise NotImplementedError("Exercise 4 (backward): the walk from root.grad_fn down to the leaves is not written yet")
