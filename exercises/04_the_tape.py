"""Exercise 4: the tape walk, backward() itself.

Every op applied to a tensor that requires grad leaves a record on the tape: the op instance itself
(a minigrad.ops.Op, as in exercise 1), reachable from its output as `out.grad_fn`. A record has

    record.backward(g)  one gradient per input (None for an input that needs none), as in exercise 1
    record.next         per input: the record that made that input, or the leaf Tensor itself (x made
                        with requires_grad=True, a weight), or None (an input that needs no gradient)
    record.seq          its creation number: larger than that of every record that made its inputs

backward(root) walks this graph from root.grad_fn down to the leaves:

    1. Collect the records reachable from root.grad_fn by following .next (a record, not a leaf or None).
    2. Order them so that each record runs only after EVERY record that uses its output has run, and so
       has handed it its share of the gradient. Newest first (sorted by .seq, descending) is such an
       order: a record is always newer than the records that made its inputs.
    3. Start with g = np.ones_like(root.data) for the root's record (d root / d root = 1; root is a
       scalar). Run each record's backward(g) and hand each input's gradient on, through record.next:
       to a record, ADD it to what that record has received so far (an h used by two ops gets two
       gradients: fan-out); to a leaf, add it into leaf.grad.

    h = x.tanh(); root = (h.exp().tanh() * h).sum()

    x --[tanh]--> h --[exp]--> . --[tanh]--> . --+
                  |                              +--[mul]--> . --[sum]--> root
                  +------------------------------+

    The record that made h (the first tanh) gets a gradient along each path, and may run only after
    both have arrived: after mul, exp and the second tanh.

Three traps, each graded:
  - No recursion. A chain of 100,000 ops is 100,000 nested calls, and Python stops at 1,000
    (sys.getrecursionlimit()). Walk with a list as an explicit stack.
  - Add out of place (total = total + gi, not total += gi): an op may hand one array to two inputs (Add
    gives g to both), and Sum hands a read-only broadcast view.
  - Records are dict keys and set members by identity; tensors are not (their == is elementwise). You
    never need a leaf as a key: add into leaf.grad at once.

A leaf's gradient: `leaf.grad = mg.tensor(gi, dtype=leaf.dtype)` the first time (a copy, in the leaf's
dtype), else
`leaf.grad = mg.tensor(leaf.grad.data + gi, dtype=leaf.dtype)`. Calling backward twice adds up, as in
PyTorch: gradient accumulation stands on it.

minigrad's own walk is _run_tape in minigrad/tensor/tape.py (read it after): it also frees each record's
saved arrays as soon as it has run, and knows checkpoints; you need neither. Calling root.backward()
here does not count: the check sees it.

Grade it:  python -m minigrad check 4
"""
import numpy as np

import minigrad as mg
from minigrad.ops import Op


def backward(root):
    raise NotImplementedError("Exercise 4 (backward): collect the records from root.grad_fn with a list as a stack "
                              "(follow record.next; isinstance(n, Op)), sort them by .seq newest first, then run "
                              "record.backward(g) and hand each gradient on")
