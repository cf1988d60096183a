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


def outside(model, config, micro_batch_size, item=4):
    """What the step holds beyond the blocks when its peak comes (the head's backward, or a block's recompute)."""
    fixed = 4 * item * sum(p.numel() for p in model.parameters())  # parameters, gradients, AdamW's two moments
    tokens, C, V = micro_batch_size * config.block_size, config.n_embd, config.vocab_size
    head = six.activation_bytes(tokens, [C, V], item)  # lm_head keeps its input, log_softmax its output (as a tanh)
    head += tokens * (C + 1) * item   # ln_f keeps its normalized input and one statistic per row
    head += 2 * tokens * V * item     # the logits, which the loop holds, and the gradient backward starts from
    return fixed + head


def step_peak(config, batch_size, micro_batch_size, segments):
    model, chain = blocks_chain(config, micro_batch_size)
    return outside(model, config, micro_batch_size) + nine.predict(chain, segments)[0]


def cuts(n):
    """Every way to cut blocks 0 .. n into segments in order: 2^(n-1) of them."""
    for ends in itertools.product((False, True), repeat=n - 1):
        bounds = [0] + [i + 1 for i, end in enumerate(ends) if end] + [n]
        yield list(zip(bounds, bounds[1:]))


def plan(config, batch_size, budget):
    for m in sorted((d for d in range(1, batch_size + 1) if batch_size % d == 0), reverse=True):  # fewest steps first
        model, chain = blocks_chain(config, m)
        rest = outside(model, config, m)
        fits = []
        for segments in cuts(config.n_layer):
            peak, recompute = nine.predict(chain, segments)
            if rest + peak <= budget:
                fits.append((recompute, peak, segments))
        if fits:
            return m, min(fits)[2]  # the least recompute; of those, the lowest peak
    raise ValueError(f"plan: nothing fits {budget:,} bytes, not even micro-batches of 1 with every block checkpointed")
