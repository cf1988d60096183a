"""Exercise 8 (after lesson 7): replay the dropout mask: the recompute must draw the random numbers the forward drew.

Dropout draws a fresh mask from minigrad's generator each time it runs, and a checkpoint runs its
segment twice: in the forward, and again in backward. If the recompute draws a new mask, backward
differentiates a forward that never happened. No error says so (every shape fits): the gradients
are just wrong. PyTorch's checkpoint and minigrad's (preserve_rng_state=True) replay the generator.

A checkpoint must also leave no trace: between the forward and this backward the rest of the program
drew numbers too (here: another dropout, after the checkpoint), and everything drawn after backward
(the next step's masks, a shuffle) must be what the plain run draws.

The generator's state can be read and set: mg.get_rng_state() returns a copy of it, and
mg.set_rng_state(state) makes it the generator's. Work out, on a timeline of the program's draws
(the segment's forward, the dropout after it, the recompute, the next step), which state the
generator must be in at the start of the recompute, and which at its end.

This file gives a working checkpoint (exercise 7's answer: do exercise 7 first) that uses an RngReplay:

    replay = RngReplay()                                       # in my_checkpoint, before the segment runs
    with replay, enable_grad(), recomputing(): y = ...         # in MyCheckpoint.backward

Write RngReplay's three methods: __init__ (runs before the forward's draws), __enter__ (just before
the recompute) and __exit__ (just after it: it runs even when the recompute raises, and returning None
from it lets the error go on).

Graded on a float64 MLP with nn.Dropout(0.5) inside the segment and another after it: the forward draws
what the plain run draws; every gradient equals the plain run's exactly (np.array_equal), with the
number of mask entries the recompute drew differently when not; and after backward the generator is
where the plain run leaves it (the next mg.rand draws the same numbers).

Explain (graded: set EXPLAIN, below, to 'a', 'b' or 'c'). Suppose __exit__ did nothing. After backward,
the next mg.rand(4) would draw
    (a) the numbers the plain run draws there
    (b) the numbers the segment's dropout drew in the forward
    (c) the numbers the dropout after the checkpoint already drew

Grade it:  python -m minigrad check 8        (stuck? python -m minigrad check 8 --hint)
"""
import minigrad as mg
from minigrad.ops import Op
from minigrad.tensor import apply, enable_grad, keep_saved, recomputing

EXPLAIN = None  # your answer to the question at the end of the docstring


class RngReplay:
    """Made before the segment's forward; `with replay:` wraps its recompute in backward."""

    def __init__(self):
        raise NotImplementedError("Exercise 8 (RngReplay.__init__): not written yet")

    def __enter__(self):
        raise NotImplementedError("Exercise 8 (RngReplay.__enter__): not written yet")

    def __exit__(self, *exc):
        raise NotImplementedError("Exercise 8 (RngReplay.__exit__): not written yet")


# ----------------------------------------------------------------------------- given: exercise 7's checkpoint

class MyCheckpoint(Op):
    name = "my_checkpoint"

    def forward(self, x, *params, out, module, replay):
        self.module, self.n_params, self.replay = module, len(params), replay
        self.save_for_backward(x)
        return out

    def flops(self, inputs, out):
        return {}

    def backward_flops(self, grad, input_grads):
        return {}

    def backward(self, g):
        (x,) = self.saved
        x_again = mg.tensor(x, requires_grad=True)
        with self.replay, enable_grad(), recomputing():
            y = self.module(x_again)
        y.backward(g)
        return (x_again.grad.data,) + (None,) * self.n_params


def my_checkpoint(module, x):
    replay = RngReplay()  # before the segment draws its masks
    with keep_saved(False):
        y = module(x)
    return apply(MyCheckpoint, x, *module.parameters(), out=y.data, module=module, replay=replay)
