"""Exercise 13 (after lesson 9): fit a GPT's training step under a byte budget, with a planner of your own.

Lesson 9's planner answers "which micro-batch, accumulation and checkpointing fit my GPU?" by running every
candidate step on the 'meta' device. Yours predicts them instead, from what you built: your exercise 9's
predict(chain, segments) for the transformer blocks, and your exercise 6's way of counting what a layer keeps.
Both are loaded below from this folder (`six`, `nine`), and graded first.

The step, exactly as the grader runs it, for a GPTConfig `config`, an optimizer batch of `batch_size`
sequences of config.block_size tokens, a micro-batch size m and segments [(lo, hi), ...] of the blocks
(as in exercise 9: they cut blocks 0 .. n_layer in order, and all but the last are checkpointed):

    def loss_sum(logits, targets):              # a micro-batch's summed loss (exercise 11)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")

    model = GPT(dataclasses.replace(config, gradient_checkpointing=segments[:-1]))
    opt = mg.optim.AdamW(model.parameters(), lr=1e-3)
    idx = mg.randint(0, config.vocab_size, (batch_size, config.block_size))     # and targets, the same way
    mg.accumulation_step(model, loss_sum, opt, idx, targets, micro_batch_size=m)  # once before: AdamW's state
    with mg.profile(model, opt) as prof, set_checkpoint_early_stop(False):
        mg.accumulation_step(model, loss_sum, opt, idx, targets, micro_batch_size=m)
    prof.peak_bytes()                           # the number that must fit: every category, at its worst moment

(GPT and GPTConfig from minigrad.gpt, F is minigrad.functional, set_checkpoint_early_stop from
minigrad.checkpoint: with it off, a recompute runs all of a segment again, as exercise 9 assumes.)

Tools: GPT(config, device="meta") builds the model with shapes and no data, in milliseconds.
models.blocks_and_input(model, {"idx": idx}) (minigrad.models) gives its blocks and what the first block
reads; measure_chain(blocks, x) (minigrad.checkpoint) gives their schedules.Chain, measured on x.

The blocks are not all of the step. Find out what else its peak holds, and when, by measuring steps with
mg.profile (prof.bytes_at_peak(), prof.timeline(); the peak can come inside an op, between two of the
timeline's events, and prof.export_memory_timeline(path) marks where), and account for each part in your
count: where the peak can come at more than one moment, count each. Your two functions must predict: while
they run, the grader refuses any backward pass.

1. step_peak(config, batch_size, micro_batch_size, segments) -> the bytes prof.peak_bytes() will measure.
2. plan(config, batch_size, budget) -> (micro_batch_size, segments): the best step that fits `budget`
   bytes. Best: first the fewest accumulation steps (micro-batches divide the batch), then, at that
   micro-batch, the least recompute (as your predict counts it). Of plans equal in both, any that fits.

Graded: step_peak within 2% of mg.profile's measurement, on steps of two tiny GPTs with two micro-batches
or more (with one micro-batch, the gradients come into being only as backward runs, so the peak can be
lower than a count that holds them all; a planner may count them all there). Then plan on three cases of
GPT, batch and budget: the step it picks, run for real under mg.profile, must fit the budget; the next
larger micro-batch must not fit, even with every block but the last checkpointed; and at the micro-batch
it picks, every cut that recomputes fewer blocks must not fit. All three are measured, not predicted.

Explain (graded: set EXPLAIN, below, to a number). GPTConfig(vocab_size=65, block_size=64, n_layer=4,
n_head=2, n_embd=32), batch 8, a budget of 2,300,000 bytes: in the step your plan picks, how many block
forwards does backward recompute, over the whole optimizer step?

Grade it:  python -m minigrad check 13        (stuck? python -m minigrad check 13 --hint)
"""
import itertools  # noqa: F401

import minigrad as mg  # noqa: F401
from minigrad import models  # noqa: F401
from minigrad.checkpoint import measure_chain  # noqa: F401
from minigrad.gpt import GPT  # noqa: F401
from minigrad.grading import earlier

six, nine = earlier(__file__, 6), earlier(__file__, 9)  # your exercises 6 and 9, from this folder

EXPLAIN = None  # your answer to the question at the end of the docstring


def step_peak(config, batch_size, micro_batch_size, segments):
    raise NotImplementedError("Exercise 13 (step_peak): the count of the step's peak is not written yet")


def plan(config, batch_size, budget):
    raise NotImplementedError("Exercise 13 (plan): the search for the best step that fits is not written yet")
