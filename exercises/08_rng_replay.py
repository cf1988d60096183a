"""Exercise 8: replay the dropout mask: the recompute must draw the random numbers the forward drew.

Dropout draws a fresh mask from minigrad's generator each time it runs, and a checkpoint runs its
segment twice: in the forward, and again in backward. If the recompute draws a new mask, backward
differentiates a forward that never happened. No error says so (every shape fits): the gradients
are just wrong. PyTorch's checkpoint and minigrad's (preserve_rng_state=True) replay the generator:

    state = mg.get_rng_state()      # 1. before the forward runs the segment: a snapshot (a copy)
    ...                             #    the forward draws the masks; the program goes on drawing
    outer = mg.get_rng_state()      # 2. in backward, just before the recompute: where it is now,
    mg.set_rng_state(state)         #    then rewind to the snapshot: the recompute draws the same masks
    ...recompute...
    mg.set_rng_state(outer)         # 3. after the recompute: put it back where step 2 found it

Step 3 matters as much as step 2. Between the forward and this backward the rest of the program drew
numbers too (here: another dropout, after the checkpoint). Left where the recompute ended, the
generator would hand out those numbers again, and everything drawn after backward (the next step's
masks, a shuffle) would differ from the plain run's. A checkpoint must leave no trace.

This file gives a working checkpoint (exercise 7's answer: do exercise 7 first) that uses an RngReplay:

    replay = RngReplay()                                       # in my_checkpoint, before the segment runs
    with replay, enable_grad(), recomputing(): y = ...         # in MyCheckpoint.backward

Write RngReplay's three methods: __init__ (step 1: keep the snapshot on self), __enter__ (step 2:
keep the outer state on self, then set the snapshot) and __exit__ (step 3). __exit__ runs even when
the recompute raises; returning None from it lets the error go on.

Graded on a float64 MLP with nn.Dropout(0.5) inside the segment and another after it: every gradient
equals the plain run's exactly (np.array_equal), and after backward the generator is where the plain
run leaves it (the next mg.rand draws the same numbers).

Grade it:  python -m minigrad check 8
"""
import minigrad as mg
from minigrad.ops import Op
from minigrad.tensor import apply, enable_grad, keep_saved, recomputing


class RngReplay:
    """Made before the forward: a snapshot of the generator. `with replay:` runs its block from that
    snapshot, then puts the generator back where the block found it."""

    def __init__(self):
        raise NotImplementedError("Exercise 8 (RngReplay.__init__): keep a snapshot of the generator, "
                                  "self.state = mg.get_rng_state()")

    def __enter__(self):
        raise NotImplementedError("Exercise 8 (RngReplay.__enter__): keep where the generator is now "
                                  "(self.outer = mg.get_rng_state()), then rewind it: mg.set_rng_state(self.state)")

    def __exit__(self, *exc):
        raise NotImplementedError("Exercise 8 (RngReplay.__exit__): put the generator back where __enter__ found "
                                  "it: mg.set_rng_state(self.outer)")


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
