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

This exercise extends your exercise 7 (do it first): `seven`, below, is your own file
07_checkpoint_one_segment.py, loaded from this folder. Write two things:

1. RngReplay, a context manager: RngReplay() is made before the segment's forward draws anything;
   `with replay:` wraps the recompute. Its three methods: __init__ (runs before the forward's draws),
   __enter__ (just before the recompute) and __exit__ (just after it: it runs even when the recompute
   raises, and returning None from it lets the error go on).
2. my_checkpoint(module, x): your exercise 7's checkpoint, with its recompute run inside `with replay:`.
   Its output's record must still be your exercise 7's: an instance of seven.MyCheckpoint, or of a class
   you make from it. How the replay reaches the recompute is yours to design; change nothing in 07.

Graded on a float64 MLP with nn.Dropout(0.5) inside the segment and another after it: the forward draws
what the plain run draws; every gradient equals the plain run's exactly (np.array_equal), with the
number of mask entries the recompute drew differently when not; and after backward the generator is
where the plain run leaves it (the next mg.rand draws the same numbers). Exercise 7 is graded first.

Explain (graded: set EXPLAIN, below, to 'a', 'b' or 'c'). Suppose __exit__ did nothing. After backward,
the next mg.rand(4) would draw
    (a) the numbers the plain run draws there
    (b) the numbers the segment's dropout drew in the forward
    (c) the numbers the dropout after the checkpoint already drew

Grade it:  python -m minigrad check 8        (stuck? python -m minigrad check 8 --hint)
"""
import minigrad as mg  # noqa: F401  (with the names below, everything your two pieces need)
from minigrad.grading import earlier
from minigrad.tensor import apply, keep_saved  # noqa: F401

seven = earlier(__file__, 7)  # your exercise 7, from this folder

EXPLAIN = None  # your answer to the question at the end of the docstring


class RngReplay:
    """Made before the segment's forward; `with replay:` wraps its recompute in backward."""

    def __init__(self):
        raise NotImplementedError("Exercise 8 (RngReplay.__init__): not written yet")

    def __enter__(self):
        raise NotImplementedError("Exercise 8 (RngReplay.__enter__): not written yet")

    def __exit__(self, *exc):
        raise NotImplementedError("Exercise 8 (RngReplay.__exit__): not written yet")


def my_checkpoint(module, x):
    raise NotImplementedError("Exercise 8 (my_checkpoint): exercise 7's checkpoint, replayed, is not written yet")
