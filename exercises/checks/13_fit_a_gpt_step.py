"""Checks of exercise 13: the learner's planner, built on their exercises 6 and 9 (graded first), against mg.profile.

step_peak on a few steps of two tiny GPTs (two micro-batches or more), each within 2% of the peak mg.profile measures
for the step run for real; a miss is named where it matches a part of the step (the gradients, AdamW's moments, an
array of the logits' size, of an MLP's hidden layer or of the residual stream), with the measured peak by category.
plan on three (GPT, batch, budget) cases whose budgets lie at least 2% from every peak that decides them
(tests/test_exercises_13.py measures that): the chosen step, run for real under mg.profile, within the budget; the
next larger micro-batch over it, even with every block but the last checkpointed; and at the chosen micro-batch every
cut that recomputes fewer blocks over it. Both functions must
predict: while they run, a backward pass is refused."""
import contextlib
import dataclasses
import numbers

import minigrad as mg
from minigrad import functional as F
from minigrad import plan as engine_plan
from minigrad.checkpoint import set_checkpoint_early_stop
from minigrad.gpt import GPT, GPTConfig
from minigrad.grading import Failed, Question, builds_on, require
from minigrad.tensor import Tensor

TITLE = "fit a GPT step under a byte budget with your own planner"
LESSON = 9
HINTS = ("Run the step once under mg.profile and print prof.bytes_at_peak(): which categories stay the same whatever "
         "the micro-batch, and which grow with it? Of what grows, your exercise 9 predicts the blocks: what is left, "
         "and at which moment does the peak come? It can come inside an op, between two of prof.timeline()'s events "
         "(prof.export_memory_timeline(path) marks it: 'peak, between ... and ...'): compare bytes_at_peak() with the "
         "events around it, and try a step with a larger vocabulary too.",
         "The peak holds four arrays of every parameter's size (the parameters, their gradients, AdamW's two "
         "moments), the logits the loop holds, and the blocks' saves at one of a few moments, with what backward "
         "holds there: in the head's backward, ln_f's and lm_head's saves, the log-probabilities (exercise 6 counts a "
         "layer whose next op keeps its output), the gradient log_softmax's backward reads and the one it makes; in "
         "the GELU backward of a segment's last block, the gradient GELU reads, the one it makes and Phi(x) (where "
         "c_proj's backward has freed the GELU output it kept), and the residual stream's gradient. The blocks: as "
         "the forward ends, or as a checkpointed segment is recomputed (its checkpoint holds its output's gradient "
         "too). Count each moment, take the largest. plan: micro-batches from the largest; at each, every cut of "
         "the blocks, least recompute first.",
         "With tokens = m * block_size and float32 (4 bytes): logits = 4 * tokens * vocab_size, hidden = 16 * tokens "
         "* n_embd, stream = 4 * tokens * n_embd; end = the blocks' bytes as the forward ends, r = as a checkpointed "
         "segment's backward runs (sum them as your nine.predict does, with nine.saved_by, on the chain from "
         "measure_chain on models.blocks_and_input of a 'meta' GPT at micro-batch m). The peak: 16 * (number of "
         "parameters) + logits + the largest of end + six.activation_bytes(tokens, [n_embd, vocab_size]) + 4 * "
         "tokens * (n_embd + 1) + 2 * logits (the head), end + 2 * hidden + stream (the last block's GELU), and "
         "r + 2 * hidden + 2 * stream for each recomputed segment. plan: for m among the divisors of the batch, "
         "largest first, the cuts of n blocks are the 2^(n-1) choices of where to end a segment; return the first m "
         "with a fit, and its fit of least recompute.")
QUESTION = Question(6, wrong={
    3: "that is one micro-batch's recompute; the optimizer step runs the batch in two micro-batches of 4, and each "
       "recomputes its checkpointed blocks",
    8: "the last block runs plainly (its segment is the last, never checkpointed): three blocks are recomputed in each "
       "micro-batch",
    4: "the last block is never recomputed, and there are two micro-batches"})

# Two tiny GPTs (lesson 1's vocabulary of 65 characters, four blocks); CONFIG's attention and head are the larger
CONFIG = GPTConfig(vocab_size=65, block_size=64, n_layer=4, n_head=2, n_embd=32)
WIDE = GPTConfig(vocab_size=65, block_size=32, n_layer=4, n_head=4, n_embd=32)
EVERY = [(0, 1), (1, 2), (2, 3), (3, 4)]
PEAKS = [(CONFIG, 8, 2, [(0, 4)]), (CONFIG, 8, 2, EVERY), (CONFIG, 8, 4, [(0, 2), (2, 4)]),
         (WIDE, 12, 3, [(0, 1), (1, 4)])]  # (config, batch, micro-batch, segments): step_peak against mg.profile
CASES = [(CONFIG, 8, 1_880_000), (CONFIG, 8, 2_870_000), (WIDE, 12, 1_620_000)]  # (config, batch, budget): plan
TOLERANCE = 0.02


def loss_sum(logits, targets):
    """The summed cross-entropy of a micro-batch's next tokens, as mg.accumulation_step wants it."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")


_measured = {}  # the steps run so far in this process (the same step measures the same bytes): key -> measure's pair


def measure(config, batch_size, micro_batch_size, segments):
    """The step, run for real: (mg.profile's peak of all bytes, its bytes by category at that moment)."""
    key = (repr(config), batch_size, micro_batch_size, tuple(map(tuple, segments)))
    if key not in _measured:
        mg.manual_seed(13)
        model = GPT(dataclasses.replace(config, gradient_checkpointing=[tuple(s) for s in segments[:-1]]))
        opt = mg.optim.AdamW(model.parameters(), lr=1e-3)
        idx = mg.randint(0, config.vocab_size, (batch_size, config.block_size))
        targets = mg.randint(0, config.vocab_size, (batch_size, config.block_size))
        engine_plan._warm_up(model, opt, set_to_none=True)  # AdamW's state exists, as after a first step
        with mg.profile(model, opt) as prof, set_checkpoint_early_stop(False):
            mg.accumulation_step(model, loss_sum, opt, idx, targets, micro_batch_size=micro_batch_size)
        _measured[key] = prof.peak_bytes(), prof.bytes_at_peak()
    return _measured[key]


@contextlib.contextmanager
def predicting(who):
    """While the learner's function runs, a backward pass is refused: a planner predicts the step, it does not try it."""
    walk = Tensor.__dict__["backward"]

    def refused(self, *args, **kwargs):
        raise Failed(f"{who} ran a backward pass: a planner predicts the step, it does not run it. Build the GPT (on "
                     f"'meta': fast) and measure its blocks' chain with measure_chain, a forward; count the rest "
                     f"(find out what it is with mg.profile while you write the count, not inside it)")
    Tensor.backward = refused
    try:
        yield
    finally:
        Tensor.backward = walk


def describe(config, batch_size, m, segments):
    return (f"GPTConfig(vocab_size={config.vocab_size}, block_size={config.block_size}, n_layer={config.n_layer}, "
            f"n_head={config.n_head}, n_embd={config.n_embd}), batch {batch_size}, micro-batch {m}, segments "
            f"{[tuple(s) for s in segments]}")


def parameters(config):
    return sum(p.numel() for p in GPT(config, device="meta").parameters())


def why(missed, measured, config, m):
    """A name for the bytes a count missed (or added), where they match a part of the step."""
    P, tokens = parameters(config), m * config.block_size
    logits = tokens * config.vocab_size * 4
    parts = [(4 * P, "one array the size of all the parameters (4 bytes each): their gradients, or one of AdamW's two "
                     "moments"),
             (8 * P, "two arrays the size of all the parameters: AdamW's two moments (exp_avg, exp_avg_sq), kept "
                     "from one step to the next"),
             (12 * P, "three arrays the size of all the parameters: the gradients and AdamW's two moments"),
             (16 * P, "four arrays the size of all the parameters: the parameters themselves, their gradients and "
                      "AdamW's two moments")]
    parts += [(k * logits, f"{k} array{'s' if k > 1 else ''} of the logits' size ({tokens} tokens x "
                           f"{config.vocab_size} = {tokens * config.vocab_size} floats): the logits the loop holds "
                           f"until the micro-batch's backward ends; in the head's backward, the log-probabilities "
                           f"log_softmax keeps, the gradient it reads and the one it makes") for k in (1, 2, 3)]
    hidden, stream = tokens * 4 * config.n_embd * 4, tokens * config.n_embd * 4
    parts += [(k * hidden, f"{k} array{'s' if k > 1 else ''} of an MLP's hidden size ({tokens} tokens x "
                           f"{4 * config.n_embd} = {tokens * 4 * config.n_embd} floats): a block's GELU backward holds "
                           f"the gradient it reads, the one it makes and Phi(x) at once, where c_proj's backward has "
                           f"freed one, the GELU output it kept") for k in (1, 2, 3)]
    parts += [(stream, f"one array of the residual stream ({tokens} tokens x {config.n_embd} floats): its "
                       f"gradient, which waits at a block's input as the block's backward runs, and, in a recomputed "
                       f"segment, the gradient of the segment's output, which its checkpoint holds")]
    near = min(parts, key=lambda p: abs(abs(missed) - p[0]))
    if abs(abs(missed) - near[0]) <= TOLERANCE * measured:
        return f" That is about {near[1]}" + (" (counted where nothing holds it, or twice)." if missed < 0 else ".")
    return ""


def by_category(at_peak):
    return ", ".join(f"{c} {n:,}" for c, n in at_peak.items())


def check_peak(ex, config, batch_size, m, segments):
    with predicting("step_peak"):
        got = ex.step_peak(config, batch_size, m, [tuple(s) for s in segments])
    require(isinstance(got, numbers.Real) and not isinstance(got, bool),
            f"step_peak returned {got!r}; it returns a number of bytes")
    measured, at_peak = measure(config, batch_size, m, segments)
    missed = measured - got
    if abs(missed) <= TOLERANCE * measured:
        return got
    raise Failed(f"step_peak({describe(config, batch_size, m, segments)}) = {got:,.0f} bytes; mg.profile measured "
                 f"{measured:,} ({by_category(at_peak)}): your count is {'short' if missed > 0 else 'over'} by "
                 f"{abs(missed):,.0f} bytes, {abs(missed) / measured:.1%} (within {TOLERANCE:.0%} passes)."
                 + why(missed, measured, config, m))


def valid(config, batch_size, chosen):
    require(isinstance(chosen, (tuple, list)) and len(chosen) == 2,
            f"plan returned {chosen!r}; it returns a pair (micro_batch_size, segments)")
    m, segments = chosen
    require(isinstance(m, numbers.Integral) and not isinstance(m, bool) and 1 <= m <= batch_size
            and batch_size % m == 0, f"plan returned micro-batch {m!r}; it must divide the batch of {batch_size}, "
            f"so that every micro-batch has the same size")
    n = config.n_layer
    try:
        segments = [(int(lo), int(hi)) for lo, hi in segments]
    except (TypeError, ValueError):
        raise Failed(f"plan returned segments {segments!r}; they are [(lo, hi), ...], as in exercise 9") from None
    ends = [0] + [hi for _, hi in segments]
    require(segments and all(lo == end and lo < hi for (lo, hi), end in zip(segments, ends)) and ends[-1] == n,
            f"plan returned segments {segments}; they must cut the {n} blocks 0 .. {n} in order, each block in one "
            f"segment: [(0, a), (a, b), ..., (z, {n})]")
    return int(m), segments


def recomputed(segments):
    """Blocks recomputed per micro-batch: every block but the last segment's (the blocks cost the same)."""
    return segments[-1][0]


def check_plan(ex, config, batch_size, budget):
    with predicting("plan"):
        chosen = ex.plan(config, batch_size, budget)
    m, segments = valid(config, batch_size, chosen)
    where = f"plan(GPTConfig(...n_layer={config.n_layer}...), batch {batch_size}, budget {budget:,} bytes)"

    def yours(m2, s2):
        try:
            with predicting("step_peak"):
                return f" Your step_peak says {ex.step_peak(config, batch_size, m2, s2):,.0f} for it."
        except Exception:  # noqa: BLE001 its own check names what is wrong with it
            return ""
    measured, at_peak = measure(config, batch_size, m, segments)
    if measured > budget:
        raise Failed(f"{where} chose micro-batch {m} and segments {segments}: run for real, mg.profile measured a peak "
                     f"of {measured:,} bytes ({by_category(at_peak)}), over the budget by {measured - budget:,}."
                     + yours(m, segments))
    larger = [d for d in range(m + 1, batch_size + 1) if batch_size % d == 0]
    if larger:
        every = [(i, i + 1) for i in range(config.n_layer)]
        other, _ = measure(config, batch_size, larger[0], every)
        if other <= budget:
            raise Failed(f"{where} chose micro-batch {m} ({batch_size // m} accumulation steps), but micro-batch "
                         f"{larger[0]} fits too: with every block but the last checkpointed, {every}, mg.profile "
                         f"measured {other:,} bytes, within the budget. Fewer accumulation steps come first."
                         + yours(larger[0], every))
    for s2 in ex_cuts(config.n_layer):
        if recomputed(s2) < recomputed(segments):
            other, _ = measure(config, batch_size, m, s2)
            if other <= budget:
                raise Failed(f"{where} chose micro-batch {m} with segments {segments}, which recompute "
                             f"{recomputed(segments)} blocks per micro-batch; segments {s2} recompute "
                             f"{recomputed(s2)} and fit too: mg.profile measured {other:,} bytes, within the budget. "
                             f"At the same micro-batch, the least recompute comes first." + yours(m, s2))


def ex_cuts(n):
    """Every cut of n blocks into segments in order (the grader's own)."""
    for mask in range(2 ** (n - 1)):
        bounds = [0] + [i + 1 for i in range(n - 1) if mask >> i & 1] + [n]
        yield list(zip(bounds, bounds[1:]))


def check(ex):
    builds_on(ex, 6, "plan")
    builds_on(ex, 9, "plan")
    for config, batch_size, m, segments in PEAKS:
        check_peak(ex, config, batch_size, m, segments)
    for config, batch_size, budget in CASES:
        check_plan(ex, config, batch_size, budget)
