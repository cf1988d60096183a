"""Checks of exercise 8: a float64 MLP with nn.Dropout(0.5) inside the checkpointed segment and
another after it, run plainly and through my_checkpoint from the same seed. A spy beside the inner
dropout records each mask it draws (in the forward and in the recompute). Graded: every gradient
equals the plain run's bit for bit (when not, how many entries differ and how many entries of the
mask the recompute drew differently), and the generator after backward is where the plain run leaves
it (the next mg.rand(4) draws the same numbers). It extends the learner's exercise 7: that one is graded first, and the
output's record must be of the learner's MyCheckpoint from 07 (or of a class made from it)."""
import os
import types

import numpy as np

import minigrad as mg
from minigrad import nn
from minigrad.grading import Failed, Question, builds_on, require, rng

TITLE = "replay the generator: dropout draws the same mask in the recompute"
LESSON = 7
HINTS = ("Draw the program's draws on a line: the segment's forward, the dropout after it, the recompute, the next "
         "step. Where must the generator stand when the recompute starts, and where when it ends? Which of those two "
         "states exist yet when RngReplay() is made, and which when `with replay:` begins? And where, in your "
         "exercise 7, does the recompute run?",
         "Three states: the one before the forward (a snapshot, taken in __init__), the one the program has reached "
         "when backward recomputes (taken in __enter__, before anything is set), and back to that one in __exit__. "
         "The recompute runs from the snapshot. To reach it: a subclass of seven.MyCheckpoint whose forward also "
         "takes the replay (apply passes keywords through) and whose backward runs exercise 7's inside the replay.",
         "__init__: self.state = mg.get_rng_state(). __enter__: self.outer = mg.get_rng_state(); "
         "mg.set_rng_state(self.state); return self. __exit__: mg.set_rng_state(self.outer). class "
         "MyCheckpoint(seven.MyCheckpoint): forward(self, x, *params, out, module, replay) keeps self.replay and "
         "returns super().forward(x, *params, out=out, module=module); backward(self, g): with self.replay: return "
         "super().backward(g). my_checkpoint: replay = RngReplay() first, then exercise 7's three lines with "
         "replay=replay passed to apply.")
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


def yours_from_7(ex, record):
    """Is the record's class the learner's MyCheckpoint of exercise 7, or made from it (a method of it or of a class
    it derives from is written in 07_*.py beside the learner's file)?"""
    folder = os.path.dirname(os.path.abspath(ex.__file__))
    for cls in type(record).__mro__:
        for f in vars(cls).values():
            code = getattr(f, "__code__", None)
            if isinstance(f, types.FunctionType) and code is not None and \
                    os.path.dirname(os.path.abspath(code.co_filename)) == folder and \
                    os.path.basename(code.co_filename).startswith("07_"):
                return True
    return False


def check(ex):
    builds_on(ex, 7, "my_checkpoint")
    mg.manual_seed(0)
    spy = Spy(nn.Dropout(0.5))
    block = nn.Sequential(nn.Linear(D, H), nn.Tanh(), spy, nn.Linear(H, D)).to("float64")
    after = nn.Dropout(0.5)  # draws between the forward and the backward, as the rest of a program does
    r = rng(8)
    x = mg.tensor(r.standard_normal((B, D)), dtype="float64", requires_grad=True)
    w = mg.tensor(r.standard_normal((B, D)), dtype="float64")

    want, want_next, _, _ = step(lambda m, t: m(t), block, after, x, w)
    plain_mask = spy._masks.pop()
    records = []
    got, got_next, seeded, after_segment = step(lambda m, t: records.append(ex.my_checkpoint(m, t)) or records[-1],
                                                block, after, x, w)
    record = getattr(records[-1], "grad_fn", None)
    require(record is not None and yours_from_7(ex, record),
            f"my_checkpoint's output was made by '{getattr(record, 'name', None)}' "
            f"({type(record).__module__}.{type(record).__name__}), not by your exercise 7's MyCheckpoint: exercise 8 "
            f"extends your own checkpoint (seven.MyCheckpoint, or a class you make from it), it does not replace it")

    masks = spy._masks
    require(len(masks) == 2, f"the dropout in the segment ran {len(masks)} times, expected twice (in the forward "
            f"and in the recompute), as your exercise 7's checkpoint runs it: my_checkpoint must be that checkpoint, "
            f"its recompute replayed")
    forward_mask, recompute_mask = masks
    require(np.array_equal(forward_mask, plain_mask),
            "the checkpoint's forward drew another dropout mask than the plain run from the same seed: RngReplay() "
            "must only read the generator (mg.get_rng_state()), not move it")
    mask_diff = int((recompute_mask != forward_mask).sum())

    for name in want:
        g, gw = got[name], want[name]
        require(g is not None, f"{name} got no gradient, which your exercise 7's checkpoint gives it: the replay "
                               f"must wrap exercise 7's backward, not replace it")
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
        raise Failed(f"{head} The recompute drew the same mask, so something else differs from your exercise 7's "
                     f"checkpoint, which passes its check: the replay must wrap its backward and change nothing in it")

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
