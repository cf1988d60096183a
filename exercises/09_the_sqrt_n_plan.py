"""Exercise 9 (after lesson 3): the sqrt(n) plan. Cut a chain, then predict, byte by byte, what checkpointing it costs.

A chain is n functions applied in turn, x_{i+1} = f_i(x_i) (a Linear, a Tanh, a LayerNorm, ...).
minigrad.schedules.Chain describes one by what each function keeps when it runs normally:

    chain.input_bytes[i]   bytes of x_i, for i = 0 .. n (input_bytes[n] is the chain's output)
    chain.saves_input[i]   True if f_i saves x_i for its backward (a Linear does: dW = g^T x)
    chain.saves_output[i]  True if f_i saves x_{i+1} (a Tanh does: d tanh = 1 - y^2)
    chain.other_bytes[i]   bytes of everything else f_i saves (LayerNorm's normalized input, ...)
    chain.flops[i]         f_i's forward FLOPs;  len(chain) = n

1. sqrt_plan(chain): the segments [(lo, hi), ...] that checkpoint_sequential(functions, 'sqrt', x)
   cuts, as PyTorch's does: about sqrt(n) segments (sqrt(n) rounded to the nearest whole number, and at
   least one), all of the same whole size but the last, which takes what is left. n = 10: [(0, 3),
   (3, 6), (6, 10)].

2. saved_by(chain, lo, hi): {buffer: bytes} of what running f_lo .. f_{hi-1} normally keeps. Name the
   buffers so that one array is one key: x_i is the key i (whether f_{i-1} saves it as its output or
   f_i as its input, it is one array: count it once), and what else f_i saves is the key ('other', i).
   A Linear -> Tanh pair (0, 2) keeps {0: bytes of x_0, 2: bytes of x_2}.

3. predict(chain, segments) -> (peak activation bytes, recompute FLOPs): what mg.profile will measure
   when checkpoint_segments(functions, segments, x) runs, then backward. What the engine does:

   - Every segment but the last runs under mg.checkpoint: its one record saves the segment's input,
     and nothing of its insides. The last segment runs normally.
   - Backward runs the records newest first, and each frees what it saved as soon as its own backward
     has run. A checkpoint's backward first runs its segment again, normally (that is the recompute),
     then backpropagates through it, freeing those saves as it goes.
   - Gradients in flight are not activations: leave them out.

   From these rules alone, find the moments at which the held bytes can peak, and what is held at
   each. Simulate them with dicts of buffers, as saved_by names them.

Check your numbers against measurement yourself, as the grader does:

    chain = measure_chain(functions, x)                  # from minigrad.checkpoint
    with mg.profile() as prof, set_checkpoint_early_stop(False):
        checkpoint_segments(functions, segments, x).sum().backward()
    prof.peak_bytes("activations"), prof.flops("recompute")

(set_checkpoint_early_stop(False) makes every op of a recomputed segment run again, the model above. By
default minigrad's recompute skips the ops whose results backward does not read: lesson 11.)

Graded: sqrt_plan against checkpoint_sequential's cut for n = 1 .. 40; saved_by and predict on seeded
random chains and plans; then your plan and prediction against mg.profile on real chains.

Explain (graded: set EXPLAIN, below, to a number). A chain of 10 functions of equal FLOPs, cut by
sqrt_plan: backward recomputes how many functions' forwards?

Grade it:  python -m minigrad check 9        (stuck? python -m minigrad check 9 --hint)
"""
import math  # noqa: F401

from minigrad.schedules import Chain  # noqa: F401  (what `chain` is)

EXPLAIN = None  # your answer to the question at the end of the docstring


def sqrt_plan(chain):
    raise NotImplementedError("Exercise 9 (sqrt_plan): not written yet")


def saved_by(chain, lo, hi):
    raise NotImplementedError("Exercise 9 (saved_by): not written yet")


def predict(chain, segments):
    raise NotImplementedError("Exercise 9 (predict): not written yet")
