"""Exercise 4, the reference (after lesson 5): the tape walk (minigrad/tensor/tape.py's _run_tape is this, plus freeing saved arrays)."""
import numpy as np

import minigrad as mg
from minigrad.ops import Op

EXPLAIN = 2  # one from mul (h itself), one through exp and the second tanh


def backward(root):
    # 1. the records the root depends on: an explicit stack, so a chain of any length works
    records, seen, stack = [], set(), [root.grad_fn]
    while stack:
        record = stack.pop()
        if record in seen:
            continue
        seen.add(record)
        records.append(record)
        stack.extend(n for n in record.next if isinstance(n, Op))
    # 2. newest first: a record runs after every record that used its output
    records.sort(key=lambda r: r.seq, reverse=True)
    # 3. run them, summing the gradients that meet at a record; leaves accumulate into .grad
    grads = {root.grad_fn: np.ones_like(root.data)}
    for record in records:
        g = grads.pop(record, None)
        if g is None:  # nothing reached it (its users passed None)
            continue
        for nxt, gi in zip(record.next, record.backward(g)):
            if nxt is None or gi is None:
                continue
            if isinstance(nxt, Op):
                grads[nxt] = grads[nxt] + gi if nxt in grads else gi
            else:
                total = gi if nxt.grad is None else nxt.grad.data + gi
                nxt.grad = mg.tensor(total, dtype=nxt.dtype)  # a copy, in the leaf's dtype
