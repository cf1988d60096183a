"""Checks of exercise 11: the accumulation loop on a small float64 GPT with padded sequences whose
padding sits mostly in the last micro-batch. Graded: the model runs once per micro-batch, with the
micro-batches' sizes; .grad equals one backward of the full batch's mean loss (1e-12 relative) after
stale gradients; the returned loss equals the full batch's; and, measured with mg.profile, the peak
activation bytes of micro-batches of 1 and of 4 are those of one micro-batch at a time.

A wrong gradient is compared with the gradients of the usual mistakes (the mean of the micro-batch
means, the sum of those means, padding counted as tokens, no division, stale gradients kept), and
the message names the one it matches."""
import gc

import numpy as np

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.gpt import GPT, GPTConfig
from minigrad.grading import Failed, Question, require

TITLE = "the accumulation loop: micro-batches that add up to the full batch's gradient"
LESSON = 4
HINTS = ("Split the sum over the batch's tokens into sums over micro-batches. What is each micro-batch's share of the "
         "loss, and which number must it be divided by: one it can count alone, or one only the whole batch knows? "
         "And when must backward run so that one micro-batch's activations are gone before the next one's come?",
         "(1/N) sum over all tokens = sum over micro-batches of (1/N) x (that micro-batch's summed loss), with N the "
         "WHOLE batch's tokens, counted once before the loop (y != ignore_index). Zero the gradients first, then per "
         "micro-batch: its summed loss times 1/N, and backward at once. An empty micro-batch then adds 0 / N: nothing.",
         "total = int((y.numpy() != ignore_index).sum()); raise ValueError if it is 0; model.zero_grad(); for i in "
         "range(0, x.shape[0], micro_batch_size): summed = loss_sum_fn(model(x[i:i + m]), y[i:i + m]); (summed * (1.0 "
         "/ total)).backward(); loss_sum += summed.item(); return loss_sum / total.")
QUESTION = Question(48 / 9, tolerance=0.005, wrong={
    16: "that is 48 / 3, the weight against one micro-batch mean alone; the mean of means also divides by the 3 "
        "micro-batches: 1 / (3 x 3) against 1 / 48",
    1: "that is the weight in the full batch's mean, which weighs every token 1/48; the mean of means weighs a token "
       "of a micro-batch of c tokens 1 / (3 c)"})
EMPTY = [8, 8, 7, 8, 6, 8, 0, 0]    # rows 6 and 7 all padding: in micro-batches of 2, the last one holds no token

V, B, T = 13, 8, 8
LENGTHS = [8, 8, 7, 8, 6, 8, 1, 2]  # real tokens per row, the rest padding: rows 6 and 7 are nearly empty
STALE = 0.25                        # what .grad holds before the call: accumulate_step must zero it


class _Counted(nn.Module):
    """The GPT, noting the batch size of every forward."""

    def __init__(self, inner):
        self.inner = inner
        self._sizes = []

    def forward(self, idx):
        self._sizes.append(int(idx.shape[0]))
        return self.inner(idx)


def loss_sum(logits, targets):
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-100, reduction="sum")


def _setup(lengths=LENGTHS):
    mg.manual_seed(11)
    # .to(default device): GPT's init writes host arrays (as in tests/test_gpt.py)
    gpt = GPT(GPTConfig(vocab_size=V, block_size=T, n_layer=2, n_head=2, n_embd=16))
    model = _Counted(gpt.to(mg.default_device()).to("float64"))
    x = mg.randint(0, V, (B, T))
    y = mg.randint(0, V, (B, T)).numpy()
    for row, n in enumerate(lengths):
        y[row, n:] = -100
    return model, x, mg.tensor(y)


def _grads(model):
    return {name.removeprefix("inner."): p.grad.numpy().copy() if p.grad is not None else None
            for name, p in model.named_parameters()}


def _rel_error(got, want):
    """The worst over parameters of max|a - b| / max|b|, and where it is: (error, name, index)."""
    worst = (0.0, None, None)
    for name, b in want.items():
        a = got[name]
        if a is None:
            return np.inf, name, None
        d = np.abs(a - b)
        err = float(d.max() / np.abs(b).max())
        if err > worst[0]:
            worst = (err, name, tuple(int(i) for i in np.unravel_index(d.argmax(), d.shape)))
    return worst


def _reference_grads(model, x, y, m, scale_of):
    """zero_grad, then the loop with each micro-batch's summed loss times scale_of(its tokens, k)."""
    model.zero_grad()
    chunks = [(x[i:i + m], y[i:i + m]) for i in range(0, B, m)]
    for xb, yb in chunks:
        tokens = int((yb.numpy() != -100).sum())
        (loss_sum(model.inner(xb), yb) * scale_of(tokens, len(chunks))).backward()
    return _grads(model)


def _tokens_per_micro_batch(y, m):
    return [int((y.numpy()[i:i + m] != -100).sum()) for i in range(0, B, m)]


def _diagnose(model, x, y, m, got, full, name, index):
    """Which usual mistake the learner's gradient matches, as a sentence (or a generic one)."""
    n, counts = sum(LENGTHS), _tokens_per_micro_batch(y, m)
    mean_of_means = _reference_grads(model, x, y, m, lambda c, k: 1.0 / (c * k))
    weights = ", ".join(f"{n / (c * len(counts)):.2f}" for c in counts)
    stale = {k: v + STALE for k, v in full.items()}
    mistakes = [
        (mean_of_means,
         f"it matches the MEAN OF THE MICRO-BATCH MEANS: each micro-batch's loss averaged over its own tokens "
         f"({counts}), then the {len(counts)} means averaged. A token then weighs 1/({len(counts)} x its "
         f"micro-batch's tokens) instead of 1/{n}: {weights} times what it should in these micro-batches, so the "
         f"few tokens of the short last micro-batch count far too much. This is the bug fixed in Hugging Face "
         f"transformers in late 2024. Divide each micro-batch's SUMMED loss by the {n} tokens of the whole "
         f"batch, counted once before the loop"),
        (_reference_grads(model, x, y, m, lambda c, k: 1.0 / c),
         f"it matches the SUM of the micro-batch means (each micro-batch divided by its own tokens, {counts}): "
         f"too big by about the number of micro-batches ({len(counts)}), and with the weights of the mean of "
         f"means. Divide each micro-batch's summed loss by the {n} tokens of the whole batch"),
        (_reference_grads(model, x, y, m, lambda c, k: 1.0 / (B * T)),
         f"it matches dividing by all {B * T} targets, padding included: {B * T - n} of them equal "
         f"ignore_index and are not tokens. Count only y != ignore_index: {n}"),
        (_reference_grads(model, x, y, m, lambda c, k: 1.0 / k),
         f"it matches dividing each micro-batch's summed loss by the number of micro-batches ({len(counts)}): "
         f"the mean is over the {n} tokens of the whole batch, so divide by {n}"),
        (_reference_grads(model, x, y, m, lambda c, k: 1.0),
         f"it matches the SUMMED loss with no division: {n} times too big. Divide each micro-batch's summed "
         f"loss by the {n} tokens of the whole batch"),
        (stale,
         f"it is the right gradient plus the {STALE} that .grad held before the call: backward adds into "
         f".grad, so accumulate_step must zero the gradients first (model.zero_grad())"),
    ]
    for grads, sentence in mistakes:
        if _rel_error(got, grads)[0] < 1e-9:
            return sentence
    if index is None:
        return f"{name} has no gradient (.grad is None): was backward called on every micro-batch?"
    return (f"the worst is {name} at index {index}: expected {float(full[name][index])!r}, "
            f"got {float(got[name][index])!r}. "
            f"(It matches none of the usual mistakes: the mean of the micro-batch means, padding counted, "
            f"no division, stale gradients)")


def _run(ex, model, x, y, m, full, full_loss):
    """Call the learner's loop with stale gradients in .grad, profiled; grade calls, gradient and loss."""
    for p in model.parameters():
        p.grad = mg.full(p.shape, STALE, dtype="float64")
    model._sizes = []
    gc.collect()
    with mg.profile() as prof:
        got_loss = ex.accumulate_step(model, loss_sum, x, y, m, ignore_index=-100)
    sizes = [min(m, B - i) for i in range(0, B, m)]
    require(model._sizes == sizes,
            f"accumulate_step(micro_batch_size={m}) on {B} rows ran the model on batches of {model._sizes}; "
            f"it should run it once per micro-batch, on {sizes} rows (the last micro-batch may be shorter)")
    got = _grads(model)
    err, name, index = _rel_error(got, full)
    if not err <= 1e-12:
        raise Failed(f"accumulate_step(micro_batch_size={m}): the gradient differs from one backward of the full "
                     f"batch's mean loss by {err:.1e} (relative, 1e-12 allowed): "
                     + _diagnose(model, x, y, m, got, full, name, index))
    require(got_loss is not None, f"accumulate_step(micro_batch_size={m}) returned None: return the full batch's "
            f"mean loss per token as a float ({full_loss!r} here): the micro-batches' summed losses (.item()) "
            f"added up, divided by the {sum(LENGTHS)} tokens")
    value = float(got_loss.item() if hasattr(got_loss, "item") else got_loss)
    if not abs(value - full_loss) <= 1e-12 * abs(full_loss):
        counts = _tokens_per_micro_batch(y, m)
        hint = ""
        sums = [loss_sum(model.inner(x[i:i + m]), y[i:i + m]).item() for i in range(0, B, m)]
        if abs(value - np.mean([s / c for s, c in zip(sums, counts)])) <= 1e-9 * abs(full_loss):
            hint = (f": that is the mean of the micro-batch means (tokens {counts}), which weights the tokens "
                    f"of the short micro-batch too much")
        raise Failed(f"accumulate_step(micro_batch_size={m}) returned the loss {value!r}, expected {full_loss!r}, "
                     f"the full batch's mean per token{hint}. Add up the summed losses (.item()) and divide "
                     f"by the {sum(LENGTHS)} tokens once")
    return prof.peak_bytes("activations")


def _helper_peak(model, x, y, m):
    """Peak activation bytes of mg.accumulate at micro-batch m: one micro-batch at a time."""
    model.zero_grad()
    gc.collect()
    with mg.profile() as prof:
        mg.accumulate(model.inner, loss_sum, x, y, micro_batch_size=m)
    return prof.peak_bytes("activations")


def check(ex):
    rng_state = mg.get_rng_state()  # the check seeds minigrad's generator; give the caller's back
    try:
        _check(ex)
    finally:
        mg.set_rng_state(rng_state)


def _check_padding_extremes(ex):
    """An all-padding micro-batch adds nothing (no nan, no error); an all-padding batch raises ValueError."""
    model, x, y = _setup(EMPTY)
    model.zero_grad()
    full_mean = F.cross_entropy(model.inner(x).reshape(-1, V), y.reshape(-1), ignore_index=-100)
    full_mean.backward()
    full, full_loss = _grads(model), full_mean.item()
    model._sizes = []
    call = "accumulate_step(micro_batch_size=2) on a batch whose last micro-batch (rows 6 and 7) is all padding"
    try:
        got_loss = ex.accumulate_step(model, loss_sum, x, y, 2, ignore_index=-100)
    except (ZeroDivisionError, FloatingPointError) as e:
        raise Failed(f"{call} raised {type(e).__name__}: {e}. That micro-batch holds no token: its summed loss is 0 "
                     f"and it adds nothing, but a division by its own token count divides by zero. The divisor is "
                     f"the whole batch's token count ({sum(EMPTY)}), the same for every micro-batch") from None
    require(model._sizes in ([2, 2, 2, 2], [2, 2, 2]),
            f"{call} ran the model on batches of {model._sizes}: once per micro-batch, [2, 2, 2, 2] (or [2, 2, 2], "
            f"skipping the empty one)")
    got = _grads(model)
    if any(g is not None and not np.isfinite(g).all() for g in got.values()):
        raise Failed(f"{call}: the gradient holds nan or inf. That micro-batch holds no token, so its mean over its "
                     f"own tokens is 0 / 0 = nan, which then spreads through every .grad. Divide each micro-batch's "
                     f"summed loss by the whole batch's token count ({sum(EMPTY)}) instead: the empty one adds 0")
    err, name, index = _rel_error(got, full)
    require(err <= 1e-12, f"{call}: the gradient differs from one backward of the full batch's mean loss by {err:.1e} "
            f"(relative; at {name} {index}): an empty micro-batch must add nothing")
    value = float(got_loss.item() if hasattr(got_loss, "item") else got_loss) if got_loss is not None else None
    require(value is not None and abs(value - full_loss) <= 1e-12 * abs(full_loss),
            f"{call} returned the loss {value!r}, expected {full_loss!r}: the empty micro-batch adds 0 to the sum "
            f"and nothing to the token count")

    none = mg.tensor(np.full((B, T), -100))
    model._sizes = []
    call = "accumulate_step on a batch whose every target is padding"
    try:
        result = ex.accumulate_step(model, loss_sum, x, none, 4, ignore_index=-100)
    except ValueError:
        require(not model._sizes, f"{call} raised ValueError, but only after running the model on {model._sizes} "
                                  f"rows: count the tokens first, and raise before any work")
        return
    except ZeroDivisionError:
        result = "ZeroDivisionError"
    raise Failed(f"{call} gave {result!r}: there is no token, so there is no mean to take. Raise ValueError (as "
                 f"mg.accumulate does), before running the model, rather than return 0 or nan or divide by zero")


def _check(ex):
    model, x, y = _setup()
    model.zero_grad()
    full_mean = F.cross_entropy(model.inner(x).reshape(-1, V), y.reshape(-1), ignore_index=-100)
    full_mean.backward()
    full, full_loss = _grads(model), full_mean.item()

    _run(ex, model, x, y, 3, full, full_loss)  # uneven: 3, 3, 2 rows with 23, 22 and 3 tokens
    peaks = {m: _run(ex, model, x, y, m, full, full_loss) for m in (1, 4)}

    helper = {m: _helper_peak(model, x, y, m) for m in (1, 4, B)}
    for m in (1, 4):
        if peaks[m] > 1.25 * helper[m]:
            raise Failed(
                f"memory: with micro_batch_size={m} your loop's activations peaked at {peaks[m]:,} bytes "
                f"(with 1: {peaks[1]:,}, with 4: {peaks[4]:,}); one micro-batch of {m} at a time needs "
                f"{helper[m]:,} (mg.accumulate, measured), and the whole batch of {B} at once {helper[B]:,}. "
                + ("The activations did not shrink with the micro-batch: every micro-batch's graph was alive at "
                   "once, as when the losses are added up and backward runs once at the end. "
                   if peaks[1] * 2 > peaks[4] else "")
                + "Call backward on each micro-batch's loss inside the loop: that frees its activations before "
                  "the next micro-batch runs")
    require(peaks[1] * 2 <= peaks[4],
            f"memory: activations peaked at {peaks[1]:,} bytes with micro_batch_size=1 and {peaks[4]:,} with 4: "
            f"micro-batches 4 times smaller should keep about 4 times fewer activations")
    _check_padding_extremes(ex)
