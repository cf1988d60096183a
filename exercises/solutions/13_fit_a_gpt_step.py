"""Exercise 13, the reference (after lesson 9): fit a GPT step under a byte budget with your own planner (minigrad/plan.py
searches by running each candidate step on 'meta'; this one predicts them, from exercises 6 and 9)."""
import itertools

import minigrad as mg
from minigrad import models
from minigrad.checkpoint import measure_chain
from minigrad.gpt import GPT
from minigrad.grading import earlier

six, nine = earlier(__file__, 6), earlier(__file__, 9)  # your exercises 6 and 9, from this folder

EXPLAIN = 6  # micro-batches of 4, every block but the last checkpointed: 3 blocks recomputed, in each of 2 micro-batches


def blocks_chain(config, micro_batch_size):
    """The GPT on 'meta' (shapes, no data) and its blocks' chain, measured at the micro-batch (a forward only)."""
    model = GPT(config, device="meta")
    idx = mg.zeros(micro_batch_size, config.block_size, dtype="int64", device="meta")
    with mg.no_grad():
        blocks, x = models.blocks_and_input(model, {"idx": idx})
    return model, measure_chain(blocks, x)


def blocks_at(chain, segments):
    """The blocks' saved bytes at the moments a peak can come: as the forward ends (the checkpoints' inputs and the
    last segment's saves), and as each checkpointed segment's backward runs (its recompute's saves, and the inputs
    of the segments before it): exercise 9's predict takes the largest, here each is wanted apart."""
    kept = {lo: chain.input_bytes[lo] for lo, _ in segments[:-1]}
    end = sum({**kept, **nine.saved_by(chain, *segments[-1])}.values())
    recomputes = [sum({**{i: b for i, b in kept.items() if i <= lo}, **nine.saved_by(chain, lo, hi)}.values())
                  for lo, hi in segments[:-1]]
    return end, recomputes


def moments(model, config, micro_batch_size, chain, segments, item=4):
    """What the step holds beyond the parameters, their gradients and AdamW's moments, at each moment its peak can
    come: the head's backward (log_softmax's), and the GELU backward of the last block that backward runs in a
    segment (of the last segment, and of each checkpointed segment, recomputed)."""
    tokens, C, V = micro_batch_size * config.block_size, config.n_embd, config.vocab_size
    logits = tokens * V * item     # the logits, which the loop holds until the micro-batch's backward ends
    stream = tokens * C * item     # one array of the residual stream: its gradient, as backward reaches a block
    hidden = tokens * 4 * C * item  # one array of an MLP's hidden layer (GELU's input, or its output)
    head = six.activation_bytes(tokens, [C, V], item)  # lm_head keeps its input, log_softmax its output (as a tanh)
    head += tokens * (C + 1) * item  # ln_f keeps its normalized input and one statistic per row
    head += 2 * logits               # the gradient log_softmax's backward reads, and the one it makes
    # GELU's backward holds the gradient it reads, the one it makes and Phi(x), three arrays of the hidden size,
    # where c_proj's backward has just freed the GELU output it kept (one): two more than the blocks' saves
    gelu = 2 * hidden + stream     # and the residual stream's gradient, which the block's input waits to add to
    end, recomputes = blocks_at(chain, segments)
    return ([logits + end + head, logits + end + gelu]  # a recomputed segment's checkpoint holds its output's
            + [logits + r + gelu + stream for r in recomputes])  # gradient too: one more array of the stream


def step_peak(config, batch_size, micro_batch_size, segments):
    model, chain = blocks_chain(config, micro_batch_size)
    fixed = 16 * sum(p.numel() for p in model.parameters())  # parameters, gradients, AdamW's two moments (float32)
    return fixed + max(moments(model, config, micro_batch_size, chain, segments))


def cuts(n):
    """Every way to cut blocks 0 .. n into segments in order: 2^(n-1) of them."""
    for ends in itertools.product((False, True), repeat=n - 1):
        bounds = [0] + [i + 1 for i, end in enumerate(ends) if end] + [n]
        yield list(zip(bounds, bounds[1:]))


def plan(config, batch_size, budget):
    for m in sorted((d for d in range(1, batch_size + 1) if batch_size % d == 0), reverse=True):  # fewest steps first
        model, chain = blocks_chain(config, m)
        fixed = 16 * sum(p.numel() for p in model.parameters())
        fits = []
        for segments in cuts(config.n_layer):
            peak = fixed + max(moments(model, config, m, chain, segments))
            if peak <= budget:
                fits.append((nine.predict(chain, segments)[1], peak, len(segments), segments))
        if fits:
            return m, min(fits)[3]  # the least recompute; of those, the lowest peak, then the fewest checkpoints
    raise ValueError(f"plan: nothing fits {budget:,} bytes, not even micro-batches of 1 with every block checkpointed")
