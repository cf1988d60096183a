"""Checks of exercise 7: a float64 MLP run plainly and through my_checkpoint, both under mg.profile.
The output must be one MyCheckpoint record; after the forward it may keep x's bytes of activations
and no more; the gradients of x and of every parameter must equal the plain run's bit for bit; and
backward must recompute the segment exactly once (FLOPs counted as 'recompute'). The checkpointed run's
backward is the learner's own tape walk once exercise 4's is written (minigrad/learner.py): the engine the learner
builds, one piece on the other."""
import contextlib
import os

import numpy as np

import minigrad as mg
from minigrad import learner, nn
from minigrad.grading import Failed, Question, require, rng
from minigrad.tensor import Listener, profiling

TITLE = "checkpoint one segment: keep x, recompute the insides in backward"
LESSON = 7
HINTS = ("Three questions: in the forward, how do you run the module so that its ops still record but keep nothing? "
         "What does MyCheckpoint's backward need in order to run the module again, and on what, so that a fresh "
         "graph ends at a fresh leaf? And who gives the parameters their gradients?",
         "Forward: let the segment's ops record but keep nothing (keep_saved(False)), then make the one record with "
         "apply: x and the parameters as its tensor inputs, the output array and the module as keywords. Backward: "
         "wrap the saved x as a new leaf that requires grad, run the module on it marked as a recompute, and run "
         "backward from its output with g: that gives the parameters their .grad. Return the new leaf's gradient for "
         "x and None for each parameter.",
         "forward: self.module, self.n_params = module, len(params); self.save_for_backward(x); return out. backward: "
         "x_again = mg.tensor(self.saved[0], requires_grad=True); with enable_grad(), recomputing(): y = self.module("
         "x_again); y.backward(g); return (x_again.grad.data,) + (None,) * self.n_params.")
QUESTION = Question("b", wrong={
    "a": "the forward keeps x alone, but backward runs the segment again, keeping what its ops save, and holds all "
         "of it while its backward runs: the same insides as the plain run's, at about the same peak. The saving comes "
         "with many segments, recomputed one at a time (mg.checkpoint_sequential)",
    "c": "the insides are held twice at no moment: the forward's were never kept, and the recompute's are freed as "
         "its backward runs"})

B, D, H = 8, 16, 32


def make_block():
    mg.manual_seed(7)
    return nn.Sequential(nn.Linear(D, H), nn.Tanh(), nn.Linear(H, H), nn.Tanh(), nn.Linear(H, D)).to("float64")


def loss_of(y, w):
    return (y * w).sum()  # a gradient g = w that differs everywhere, so that every entry is tested


def zero_grads(block, x):
    x.grad = None
    for p in block.parameters():
        p.grad = None


def grads_of(block, x):
    return {"x": x.grad, **{name: p.grad for name, p in block.named_parameters()}}


def compare(name, got, want):
    if got is None:
        hint = ("backward must return x's gradient first: the .grad of the fresh leaf you ran the module on"
                if name == "x" else "the parameters get it when you call y.backward(g) on the recomputed output")
        raise Failed(f"{name} got no gradient: {hint}")
    got, want = got.data, want.data
    if got.shape != want.shape:
        raise Failed(f"{name}'s gradient has shape {got.shape}, expected {want.shape}")
    if np.array_equal(got, want):
        return
    bad = got != want
    i = tuple(int(k) for k in np.argwhere(bad)[0])
    why = ("A checkpoint runs the same ops on the same numbers, so its gradients are bit-identical to the plain "
           "run's: recompute module on a copy of the saved x and backpropagate exactly g (y.backward(g)).")
    if np.array_equal(got, 2 * want):
        why = ("It is exactly twice the plain run's: it was added twice. The parameters get their .grad in the "
               "recompute's y.backward(g); backward must return None for them.")
    raise Failed(f"{name}'s gradient differs from the plain run's in {int(bad.sum())} of {bad.size} entries; at "
                 f"index {i} expected {float(want[i])!r}, got {float(got[i])!r}. {why}")


def check(ex):
    block = make_block()
    r = rng(7)
    x = mg.tensor(r.standard_normal((B, D)), dtype="float64", requires_grad=True)
    w = mg.tensor(r.standard_normal((B, D)), dtype="float64")

    zero_grads(block, x)  # the plain run: what the checkpoint must reproduce
    with mg.profile() as plain:
        y0 = block(x)
        plain_kept, segment_flops = plain.peak_bytes("activations"), plain.flops("forward")
        loss_of(y0, w).backward()
    want = grads_of(block, x)

    zero_grads(block, x)
    check_records(ex, block, x)
    # on the learner's tape walk (exercise 4, in the same folder) where it is written; else on the engine's
    yours = contextlib.nullcontext() if learner._active else learner.use(os.path.dirname(ex.__file__), only={4})
    with yours, mg.profile() as prof:
        y = ex.my_checkpoint(block, x)
        kept = prof.peak_bytes("activations")
        check_forward(ex, y, y0, x, kept, plain_kept)
        loss_of(y, w).backward()
    got = grads_of(block, x)

    # gradients: bit-identical
    for name in want:
        compare(name, got[name], want[name])

    # a backward called under no_grad (as a loop that only evaluates, then steps, may do) still recomputes a graph
    zero_grads(block, x)
    loss = loss_of(ex.my_checkpoint(block, x), w)
    try:
        with mg.no_grad():
            loss.backward()
    except RuntimeError as e:
        raise Failed(f"a backward called inside `with mg.no_grad():` failed in your recompute ({e}). The plain run's "
                     f"backward works there: the recompute must record its ops whatever grad mode its caller is in "
                     f"(switch it on for the recompute, as the engine's checkpoint does)") from None
    for name, g in grads_of(block, x).items():
        compare(name, g, want[name])

    # FLOPs: the segment ran once in forward, once more in backward, and its backward is the plain one
    recomputed = prof.flops("recompute")
    if recomputed != segment_flops:
        if recomputed == 0:
            why = ("no FLOPs were counted as recompute: run the module again in backward inside "
                   "`with enable_grad(), recomputing():`")
        else:
            why = f"that is {recomputed / segment_flops:.2f} forwards of the segment: recompute it exactly once"
        raise Failed(f"backward recomputed {recomputed} FLOPs; one forward of the segment is {segment_flops} FLOPs: "
                     f"{why}")
    for phase in ("forward", "backward"):
        require(prof.flops(phase) == plain.flops(phase),
                f"the checkpointed step counted {prof.flops(phase)} {phase} FLOPs, the plain run {plain.flops(phase)}: "
                f"the {phase} pass should run each op of the segment exactly once, as the plain run does")


class _Records(Listener):
    """Counts the ops that run and the records they make (a recorded op has a creation number, seq)."""

    def __init__(self):
        self.ran, self.made = 0, 0

    def on_forward(self, op, inputs, out, clock):
        self.ran += 1
        self.made += op.seq > 0


def check_records(ex, block, x):
    """The segment's ops must make their records in the forward (keeping nothing): no_grad() makes none."""
    listener = _Records()
    with profiling(listener):
        y = ex.my_checkpoint(block, x)
    segment = listener.ran - 1  # every op that ran but the checkpoint's own
    if segment > 0 and listener.made <= 1 and isinstance(getattr(y, "grad_fn", None), ex.MyCheckpoint):
        raise Failed(
            f"my_checkpoint's forward ran the segment's {segment} ops without making a single record: under "
            f"no_grad(), no record is made at all, so nothing of the segment is on the tape to backward through. "
            f"Here the numbers come out right only because my_checkpoint is handed module.parameters(); "
            f"mg.checkpoint takes any function and learns from those records which tensors needing gradients the "
            f"segment reached (the parameters a closure captured, a tied weight). Under no_grad it would find none, "
            f"and when x needs no gradient, nothing would reach the parameters (PyTorch's reentrant checkpoint, which "
            f"runs its forward under no_grad, warns 'None of the inputs have requires_grad=True' for that). Nor is "
            f"no_grad a dry run: BatchNorm's running statistics and minigrad's generator move in that forward all the "
            f"same (the recompute must then not move them again: recomputing(), and exercise 8). The switch that "
            f"records and keeps nothing is keep_saved(False)")


def check_forward(ex, y, y0, x, kept, plain_kept):
    """Right after the forward: one MyCheckpoint record, the module's output, x's bytes kept and no more."""
    require(isinstance(y, mg.Tensor), f"my_checkpoint returned {type(y).__name__}, expected a Tensor")
    record = y.grad_fn
    require(isinstance(record, ex.MyCheckpoint),
            f"my_checkpoint's output was made by '{getattr(record, 'name', None)}', not by MyCheckpoint: return "
            f"apply(MyCheckpoint, x, *module.parameters(), out=y.data, module=module), so that one record "
            f"stands for the whole segment")
    require(np.array_equal(y.data, y0.data),
            "my_checkpoint's output differs from module(x): MyCheckpoint.forward must return `out` as it is")
    if kept == x.data.nbytes:  # x's bytes, and no other activation: but the ledger counts parameters elsewhere
        extra = [a for a in record.saved if a is not x.data]
        require(not extra, f"MyCheckpoint.forward saved {len(extra)} arrays besides x (shapes "
                f"{', '.join(str(getattr(a, 'shape', type(a).__name__)) for a in extra)}): the parameters live in the "
                f"module anyway, and the segment's insides are recomputed; the record saves x alone")
        return
    head = (f"my_checkpoint kept {kept} bytes of activations after the forward; the input x alone is "
            f"{x.data.nbytes} bytes")
    if kept >= plain_kept:
        why = (f"That is what a plain run of the block keeps ({plain_kept} bytes): the segment's records kept what "
               f"their ops saved. Run module(x) under `with keep_saved(False):`")
    elif kept > x.data.nbytes:
        shapes = ", ".join(str(getattr(a, "shape", type(a).__name__)) for a in record.saved)
        why = (f"That is {kept - x.data.nbytes} bytes more than x: MyCheckpoint.forward saved arrays of shapes "
               f"[{shapes}]; it should save x only, the rest is recomputed")
    else:
        why = "Backward needs x to recompute the segment: MyCheckpoint.forward must call self.save_for_backward(x)"
    raise Failed(f"{head}. {why}")
