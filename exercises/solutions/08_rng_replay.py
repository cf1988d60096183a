"""Exercise 8, the reference (after lesson 7): replay minigrad's generator in the recompute of exercise 7's checkpoint
(mg.checkpoint does the same, with preserve_rng_state=True: Checkpoint.backward in minigrad/checkpoint/segment.py)."""
import minigrad as mg
from minigrad.grading import earlier
from minigrad.tensor import apply, keep_saved

seven = earlier(__file__, 7)  # your exercise 7, from this folder

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


class MyCheckpoint(seven.MyCheckpoint):
    """Exercise 7's record, with a replay: its backward (exercise 7's recompute, then the backward through it) runs
    from the generator's state before the forward. (The backward through the recompute draws nothing: a dropout's
    backward reads the mask it saved.)"""

    def forward(self, x, *params, out, module, replay):
        self.replay = replay
        return super().forward(x, *params, out=out, module=module)

    def backward(self, g):
        with self.replay:
            return super().backward(g)


def my_checkpoint(module, x):
    replay = RngReplay()  # before the segment draws its masks
    with keep_saved(False):
        y = module(x)
    return apply(MyCheckpoint, x, *module.parameters(), out=y.data, module=module, replay=replay)
