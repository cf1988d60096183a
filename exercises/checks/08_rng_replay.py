"""Checks of exercise 8: a float64 MLP with nn.Dropout(0.5) inside the checkpointed segment and
another after it, run plainly and through my_checkpoint from the same seed. A spy beside the inner
dropout records each mask it draws (in the forward and in the recompute). Graded: every gradient
equals the plain run's bit for bit (when not, how many entries differ and how many entries of the
mask the recompute drew differently), and the generator after backward is where the plain run leaves
it (the next mg.rand(4) draws the same numbers)."""
import numpy as np

import minigrad as mg
from minigrad import nn
from minigrad.grading import Failed, Question, require, rng

TITLE = "replay the generator: dropout draws the same mask in the recompute"
LESSON = 7
HINTS = ("Draw the program's draws on a line: the segment's forward, the dropout after it, the recompute, the next "
         "step. Where must the generator stand when the recompute starts, and where when it ends? Which of those two "
         "states exist yet when RngReplay() is made, and which when `with replay:` begins?",
         "Three states: the one before the forward (a snapshot, taken in __init__), the one the program has reached "
         "when backward recomputes (taken in __enter__, before anything is set), and back to that one in __exit__. "
         "The recompute runs from the snapshot.",
         "__init__: self.state = mg.get_rng_state(). __enter__: self.outer = mg.get_rng_state(); "
         "mg.set_rng_state(self.state); return self. __exit__: mg.set_rng_state(self.outer).")
QUESTION = Question("c", wrong={
    "a": "the recompute moved the generator: it ran from the snapshot and ended where the segment's forward had "
         "ended, which is where the dropout after the checkpoint began; only __exit__ can put it back",
    "b": "that would be a generator left at the snapshot itself; the recompute drew the segment's numbers again "
         "and moved on to where the dropout after the checkpoint began"})

B, D, H, SEED = 8, 16, 32, 8


class Spy(nn.Module):
    """Runs `inner` (a Dropout) and records the mask it drew: where its output is not zero (its input
    comes from a tanh, so it is never exactly zero)."""

    def __init__(self, inner):
        self.inner = inner
        self._masks = []

    def forward(self, x):
        out = self.inner(x)
        self._masks.append(out.data != 0)
        return out


def draws_from(state, n=4):
    """The next n numbers of mg.rand from `state`, leaving the generator where it was."""
    here = mg.get_rng_state()
    mg.set_rng_state(state)
    try:
        return mg.rand(n).data.copy()
    finally:
        mg.set_rng_state(here)


def fmt(numbers):
    return "[" + ", ".join(f"{float(v):.4f}" for v in numbers) + "]"


def step(forward, block, after, x, w):
    """From SEED: forward(block, x), the dropout after it, a loss, backward, then the next draw.
    (the gradients by name, the next draw, the state after the seed, the state after the forward)"""
    x.grad = None
    for p in block.parameters():
        p.grad = None
    mg.manual_seed(SEED)
    seeded = mg.get_rng_state()
    y = forward(block, x)
    after_segment = mg.get_rng_state()
    ((after(y) * w).sum()).backward()
    grads = {"x": x.grad, **{name: p.grad for name, p in block.named_parameters()}}
    return grads, mg.rand(4).data.copy(), seeded, after_segment


def check(ex):
    mg.manual_seed(0)
    spy = Spy(nn.Dropout(0.5))
    block = nn.Sequential(nn.Linear(D, H), nn.Tanh(), spy, nn.Linear(H, D)).to("float64")
    after = nn.Dropout(0.5)  # draws between the forward and the backward, as the rest of a program does
    r = rng(8)
    x = mg.tensor(r.standard_normal((B, D)), dtype="float64", requires_grad=True)
    w = mg.tensor(r.standard_normal((B, D)), dtype="float64")

    want, want_next, _, _ = step(lambda m, t: m(t), block, after, x, w)
    plain_mask = spy._masks.pop()
    got, got_next, seeded, after_segment = step(ex.my_checkpoint, block, after, x, w)

    masks = spy._masks
    require(len(masks) == 2, f"the dropout in the segment ran {len(masks)} times, expected twice (in the forward "
            f"and in the recompute): the given MyCheckpoint and my_checkpoint should be left as they are")
    forward_mask, recompute_mask = masks
    require(np.array_equal(forward_mask, plain_mask),
            "the checkpoint's forward drew another dropout mask than the plain run from the same seed: RngReplay() "
            "must only read the generator (mg.get_rng_state()), not move it")
    mask_diff = int((recompute_mask != forward_mask).sum())

    for name in want:
        g, gw = got[name], want[name]
        require(g is not None, f"{name} got no gradient: the given checkpoint should be left as it is")
        if np.array_equal(g.data, gw.data):
            continue
        bad = g.data != gw.data
        i = tuple(int(k) for k in np.argwhere(bad)[0])
        head = (f"{name}'s gradient differs from the plain run's in {int(bad.sum())} of {bad.size} entries "
                f"(at index {i} expected {float(gw.data[i])!r}, got {float(g.data[i])!r}).")
        if mask_diff:
            raise Failed(f"{head} The dropout inside the segment drew another mask when backward recomputed it: "
                         f"{mask_diff} of {forward_mask.size} entries differ from the forward's mask, so backward "
                         f"differentiated a forward that never happened. Where did the generator stand when the "
                         f"forward began, and where when the recompute began?",
                         "RngReplay() must take a snapshot (mg.get_rng_state()) when it is made, before the forward, "
                         "and __enter__ must set the generator to it (mg.set_rng_state), so that the recompute draws "
                         "the same numbers.")
        raise Failed(f"{head} The recompute drew the same mask, so something else differs: leave the given "
                     f"checkpoint as it is")

    if not np.array_equal(got_next, want_next):
        if np.array_equal(got_next, draws_from(after_segment)):
            why = ("it was left where the recompute ended: the numbers the dropout after the checkpoint already "
                   "drew come again. __exit__ must set the state that __enter__ found (self.outer)")
        elif np.array_equal(got_next, draws_from(seeded)):
            why = ("it was left at the snapshot, so the segment's masks come again. __exit__ must set the state "
                   "that __enter__ found (self.outer), not the snapshot")
        else:
            why = "__enter__ must keep the state it finds (self.outer) and __exit__ must set it again"
        raise Failed(f"after backward the generator is not where the plain run leaves it: the next mg.rand(4) "
                     f"gives {fmt(got_next)}, after the plain run {fmt(want_next)}; "
                     f"{why}. A checkpoint must leave no trace in the program's random stream.")
