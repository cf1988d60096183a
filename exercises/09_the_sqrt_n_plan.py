"""Exercise 9: the sqrt(n) plan. Cut a chain, then predict, byte by byte, what checkpointing it costs.

A chain is n functions applied in turn, x_{i+1} = f_i(x_i) (a Linear, a Tanh, a LayerNorm, ...).
minigrad.schedules.Chain describes one by what each function keeps when it runs normally:

    chain.input_bytes[i]   bytes of x_i, for i = 0 .. n (input_bytes[n] is the chain's output)
    chain.saves_input[i]   True if f_i saves x_i for its backward (a Linear does: dW = g^T x)
    chain.saves_output[i]  True if f_i saves x_{i+1} (a Tanh does: d tanh = 1 - y^2)
    chain.other_bytes[i]   bytes of everything else f_i saves (LayerNorm's normalized input, ...)
    chain.flops[i]         f_i's forward FLOPs;  len(chain) = n

1. sqrt_plan(chain): the segments [(lo, hi), ...] that checkpoint_sequential(functions, 'sqrt', x)
   cuts, as PyTorch's does: s = round(sqrt(n)) segments (at least 1) of n // s functions each, the
   last one taking what is left. n = 10: s = 3, [(0, 3), (3, 6), (6, 10)].

2. saved_by(chain, lo, hi): {buffer: bytes} of what running f_lo .. f_{hi-1} normally keeps. Name the
   buffers so that one array is one key: x_i is the key i (whether f_{i-1} saves it as its output or
   f_i as its input, it is one array: count it once), and what else f_i saves is the key ('other', i).
   A Linear -> Tanh pair (0, 2) keeps {0: bytes of x_0, 2: bytes of x_2}.

3. predict(chain, segments) -> (peak activation bytes, recompute FLOPs): what mg.profile will measure
   when checkpoint_segments(functions, segments, x) runs, then backward. Every segment but the last
   runs under mg.checkpoint; simulate what the engine holds, moment by moment, as a dict of buffers:

   - End of the forward. A checkpointed segment (lo, hi) keeps only its input x_lo (the checkpoint's
     record saves it) and nothing of its insides. The last segment runs normally and keeps
     saved_by(chain, lo, hi). Held: the kept inputs of all checkpointed segments and the last
     segment's saves. (The forward only adds, so this is the forward's peak.)
   - Backward, the last segment first: it frees its saves as its backward runs. Then each
     checkpointed segment k = (lo, hi), last first: it is recomputed, running normally again, so it
     holds saved_by(chain, lo, hi), and recompute FLOPs grow by flops[lo] + ... + flops[hi-1]. Meanwhile
     the kept inputs of segments k, k-1, ..., 0 are still held; those of the segments after k are
     gone, freed when their checkpoints' backward ran. Then its backward frees all of that.

   The peak is the largest total over these moments (len(segments) of them). Gradients in flight
   are not activations: leave them out. The last segment is never recomputed.

Check your numbers against measurement yourself, as the grader does:

    chain = measure_chain(functions, x)                  # from minigrad.checkpoint
    with mg.profile() as prof, set_checkpoint_early_stop(False):
        checkpoint_segments(functions, segments, x).sum().backward()
    prof.peak_bytes("activations"), prof.flops("recompute")

(set_checkpoint_early_stop(False) makes every op of a recomputed segment run again, the model above. By
default minigrad's recompute skips the ops whose results backward does not read, such as a segment's last
Linear and Tanh: NOTE [recompute what backward reads] in minigrad/checkpoint/policies.py, and chain.reruns.)

(minigrad/schedules.py holds the answer: segment_bounds, _normal, predict; read it after.)
Grade it:  python -m minigrad check 9
"""
import math

from minigrad.schedules import Chain  # noqa: F401  (what `chain` is)


def sqrt_plan(chain):
    raise NotImplementedError("Exercise 9 (sqrt_plan): s = max(1, round(math.sqrt(n))) segments of n // s "
                              "functions, the last one ending at n")


def saved_by(chain, lo, hi):
    raise NotImplementedError("Exercise 9 (saved_by): for i in range(lo, hi), add x_i if chain.saves_input[i], "
                              "x_{i+1} if chain.saves_output[i], ('other', i) if chain.other_bytes[i]")


def predict(chain, segments):
    raise NotImplementedError("Exercise 9 (predict): the peak over the end of the forward and each checkpointed "
                              "segment's recompute, last first; the recompute FLOPs of all but the last segment")
