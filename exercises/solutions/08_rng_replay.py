"""Exercise 8, the reference (after lesson 7): replay minigrad's generator in the recompute (mg.checkpoint does the
same, with preserve_rng_state=True: Checkpoint.backward in minigrad/checkpoint/segment.py)."""
import minigrad as mg
from minigrad.ops import Op
from minigrad.tensor import apply, enable_grad, keep_saved, recomputing

EXPLAIN = "c"  # the recompute ends where the forward's draws ended: where the dropout after the checkpoint began


class RngReplay:
    """Made before the forward: a snapshot of the generator. `with replay:` runs its block from that
    snapshot, then puts the generator back where the block found it."""

    def __init__(self):
        self.state = mg.get_rng_state()

    def __enter__(self):
        self.outer = mg.get_rng_state()
        mg.set_rng_state(self.state)
        return self

    def __exit__(self, *exc):
        mg.set_rng_state(self.outer)


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
