"""Gradient accumulation: the gradient of a large batch at the memory of a small one.

    opt.zero_grad()
    result = accumulate(model, loss_fn, x, y, micro_batch_size=2, ignore_index=-100)
    opt.step()                           # or all three at once: accumulation_step(model, loss_fn, opt, ...)

The batch runs in micro-batches, forward and backward each; .grad adds up across them (the tape
accumulates in place, NOTE [gradient accumulation] in tensor/tensor.py), so only one micro-batch's
activations are alive at a time while the gradient buffers stay the same size.

NOTE [normalising by items]: loss_fn returns the SUM of its micro-batch's per-item losses
(reduction='sum'), and the helper divides every micro-batch by the number of items in the
whole batch: tokens that are not padding, for a language model. That gives exactly the
full-batch mean. Averaging each micro-batch over its own items and then averaging those
means weights an item in a short micro-batch more than one in a long one: the bug popular
trainers shipped until late 2024 (Hugging Face transformers PRs #34191 and #34198).
normalize='mean_of_means' does that, so that lessons can show the difference (a micro-batch with no
item has no mean: it is left out of the average, where those trainers got NaN).

NOTE [a causal LM's loss shifts its labels]: a language model's loss scores the logits at position t
against the label at t + 1, comparing logits[:, :-1] with labels[:, 1:] (or, as transformers'
ForCausalLMLoss, padding the labels with one ignore_index at the end and dropping the first), so the
first label of each row is never a target: the loss averages over the non-padding labels of
labels[..., 1:], and counting all the labels would divide by too many (33 for the loss's 29 in 4 rows,
a gradient 12% too small), which the check below refuses. loss_shifts_labels=True counts
labels[..., 1:] instead, as Hugging Face's Trainer has since transformers 5 (_get_num_items_in_batch,
for a model whose loss is ForCausalLMLoss). The count comes from the labels, not from what the loss
reports: every micro-batch is divided by the whole batch's count before its backward, and the loss
reports its count only after its forward, so taking it from there would mean running every forward
first (every micro-batch's activations alive at once, what accumulating avoids) or rescaling .grad
after (and with it any gradient already there). The loss's report still checks the count.

NOTE [BatchNorm does not accumulate]: in training mode BatchNorm1d normalises with the statistics
of the batch it sees, here one micro-batch, so k micro-batches do not give the full batch's
gradient (and its running statistics get k updates of noisier estimates). What people do: use
a normalisation that does not look across the batch (LayerNorm, as transformers do); keep
BatchNorm in eval mode (frozen statistics) when fine-tuning; or make micro-batches big enough
that their statistics are good (ghost batch norm does this on purpose). accumulate warns when a
BatchNorm1d normalised two micro-batches or more by their own statistics; tests/test_accumulate.py
measures the difference.

Read next: distributed.py, the same sum across processes; gpt.py, the model the lessons train with both tricks;
lessons/04_gradient_accumulation.py.
"""
import math
import numbers
import warnings
from dataclasses import dataclass

from . import backend, nn, ops
from .functional import loss_items, said_of
from .tensor import Tensor


@dataclass
class AccumulationResult:
    loss: float              # the batch's mean loss per item (as one full-batch forward would give); with
                             # total_items, this batch's share of the whole batch's mean
    items: int               # items the mean is over (non-padding tokens, unmasked elements, rows; a float
                             # mask's sum, a float)
    micro_batches: int
    grad_dtype: str          # the dtype gradients were accumulated in


def micro_batch_slices(batch_size, micro_batch_size=None, steps=None):
    """slices of range(batch_size): micro-batches of micro_batch_size (the last may be smaller), or
    `steps` micro-batches as even as can be."""
    if (micro_batch_size is None) == (steps is None):
        raise ValueError("accumulate: give exactly one of micro_batch_size and steps")
    if micro_batch_size is not None:
        if not _is_int(micro_batch_size) or not 1 <= micro_batch_size <= batch_size:
            raise ValueError(f"accumulate: micro_batch_size must be an int from 1 to the batch size "
                             f"({batch_size}), got {micro_batch_size!r}")
        m = int(micro_batch_size)
        return [slice(i, min(i + m, batch_size)) for i in range(0, batch_size, m)]
    if not _is_int(steps) or not 1 <= steps <= batch_size:
        raise ValueError(f"accumulate: steps must be an int from 1 to the batch size ({batch_size}), got {steps!r}")
    steps = int(steps)
    bounds = [batch_size * i // steps for i in range(steps + 1)]
    return [slice(a, b) for a, b in zip(bounds, bounds[1:])]


def _is_int(n):
    return isinstance(n, numbers.Integral) and not isinstance(n, bool)


def count_items(target, ignore_index=None, mask=None, loss_shifts_labels=False):
    """How many items a batch's loss averages over: mask's True entries (a float mask: its sum, the weights
    a weighted mean divides by), integer targets != ignore_index, or every element of the targets. With
    loss_shifts_labels, of target[..., 1:] (and mask[..., 1:]) only: NOTE [a causal LM's loss shifts its labels]."""
    t = target.data if isinstance(target, Tensor) else target
    if loss_shifts_labels:
        if len(t.shape) < 2:
            raise ValueError(f"accumulate: loss_shifts_labels counts target[..., 1:], each sequence but its first "
                             f"label, so the targets need a sequence dimension, (batch, seq) or more; a micro-batch's "
                             f"targets have shape {tuple(t.shape)}")
        if backend.is_meta(t):
            return int(math.prod(t.shape[:-1]) * max(t.shape[-1] - 1, 0))
        t = t[..., 1:]
    if backend.is_meta(t):  # no values on 'meta': every target counts, as F.cross_entropy assumes there
        return int(t.size)
    if mask is not None:  # True/False, or weights (a float mask): a weighted mean divides by their sum
        m = backend.to_numpy(mask.data if isinstance(mask, Tensor) else mask)
        m = m[..., 1:] if loss_shifts_labels else m
        return int(m.sum()) if m.dtype.kind in "biu" else float(m.sum())
    if ignore_index is not None and t.dtype.kind in "iu":  # class indices; a float target (a regression's) of
        return int((backend.to_numpy(t) != ignore_index).sum())  # -100.0 is a value, as in F.cross_entropy
    return int(t.size)


def accumulate(model, loss_fn, inputs=None, targets=None, *, micro_batch_size=None, steps=None,
               micro_batches=None, ignore_index=-100, mask=None, normalize="items", total_items=None,
               loss_shifts_labels=False, _counted=False):
    """Forward and backward over micro-batches, leaving the full batch's gradient in .grad.

    loss_fn(output, target) (or loss_fn(output, target, mask) when a mask is given) returns the
    summed loss of one micro-batch. Split `inputs`/`targets` (and `mask`) along dim 0 by
    micro_batch_size or steps, or pass `micro_batches`, any iterable of (inputs, targets) or
    (inputs, targets, mask). Adds into .grad: call optimizer.zero_grad() before (or use
    accumulation_step). Parameters in float16 or bfloat16 get float32 gradient buffers (2-byte
    additions lose low bits as k grows); result.grad_dtype says which. Targets equal to ignore_index (-100 by
    default, as F.cross_entropy) are padding and do not count as items; pass ignore_index=None to count
    every target (ignore_index applies to integer targets only: a float target of -100.0 is a value). A loss_fn
    that returns a mean (F.cross_entropy as it is, reduction='mean') is refused: its gradient would come out too
    small by the number of micro-batches. So is one that returns a minigrad loss summed over other items than
    those counted (NOTE [a loss says what it averages], functional.py): cross_entropy over class probabilities
    (one item per row, not per element), or with class weights (its mean divides by their sum), or ignoring
    another index; pass total_items (the whole batch's count, as the loss's mean would divide by) for those.
    loss_shifts_labels=True: loss_fn is a causal language model's, which scores position t against target t + 1
    (logits[:, :-1] against targets[:, 1:], or transformers' ForCausalLMLoss), so the count is over targets[..., 1:]
    (and mask[..., 1:]), as Hugging Face's Trainer counts num_items_in_batch for such a loss (NOTE [a causal LM's
    loss shifts its labels]); the loss's own count still checks it.
    In float16 the loss itself is scaled in float16: for very large sums or item counts use float32.
    accumulate takes no mg.amp.GradScaler: under a float16 autocast, write the loop,
    scaler.scale(summed / items).backward() per micro-batch, then scaler.step(optimizer) and scaler.update()
    once (tests/test_compose_programs.py runs it checkpointed). total_items: the count to divide by when this
    batch is one process's share of a bigger one (distributed.py passes the count over all of them), or when
    the items are not the targets' elements; by default, this batch's own count (then checked, as above).
    """
    if normalize not in ("items", "mean_of_means"):
        raise ValueError(f"accumulate: normalize must be 'items' or 'mean_of_means', got {normalize!r}")
    if micro_batches is None:
        if inputs is None or targets is None:
            raise ValueError("accumulate: pass inputs and targets, or micro_batches")
        n = inputs.shape[0]
        if targets.shape[0] != n or (mask is not None and mask.shape[0] != n):
            raise ValueError(f"accumulate: inputs, targets (and mask) must have the same batch size, got "
                             f"{inputs.shape}, {targets.shape}" + (f", {mask.shape}" if mask is not None else ""))
        micro_batches = [(inputs[s], targets[s]) + ((mask[s],) if mask is not None else ())
                         for s in micro_batch_slices(n, micro_batch_size, steps)]
    else:
        if micro_batch_size is not None or steps is not None:
            raise ValueError("accumulate: micro_batches already says how to split; drop micro_batch_size/steps")
        if inputs is not None or targets is not None or mask is not None:
            raise ValueError("accumulate: with micro_batches, put inputs, targets and masks inside them as "
                             "(inputs, targets) or (inputs, targets, mask); drop inputs/targets/mask")
        micro_batches = [tuple(mb) for mb in micro_batches]
        if not micro_batches:
            raise ValueError("accumulate: micro_batches is empty")

    counts = [count_items(mb[1], ignore_index, mb[2] if len(mb) > 2 else None, loss_shifts_labels)
              for mb in micro_batches]
    total = sum(counts) if total_items is None else total_items
    if total_items is not None and normalize != "items":
        raise ValueError("accumulate: total_items goes with normalize='items' (the count of the whole batch)")
    if total == 0:
        raise ValueError("accumulate: the batch has no item to learn from (every target is ignore_index "
                         "or masked out)")
    params = [p for p in model.parameters() if p.requires_grad]
    half = _half(params)
    _master_gradients(half)
    grad_dtype = "float32" if half else (params[0].dtype.name if params else "none")

    means = sum(1 for count in counts if count)  # mean_of_means: a micro-batch with no item has no mean to average
    batch_norms = _batch_statistics(model)
    loss_sum = 0.0
    for mb, count in zip(micro_batches, counts):
        if count == 0 and normalize == "mean_of_means":
            continue
        output = model(mb[0])
        with loss_items() as said:  # what the loss says it sums over (NOTE [a loss says what it averages])
            summed = loss_fn(output, *mb[1:])
        _check_summed(summed, count, mb[1], total_items is None or _counted, shifted=None if loss_shifts_labels
                      else lambda: count_items(mb[1], ignore_index, mb[2] if len(mb) > 2 else None, True),
                      said=said)
        # NOTE [normalising by items]: divide by the whole batch's count, not this micro-batch's
        scale = 1.0 / total if normalize == "items" else 1.0 / (count * means)
        (summed * scale).backward()
        _master_gradients(half)
        loss_sum += float("nan") if backend.is_meta(summed.data) else summed.item()  # 'meta': no value to add
        output = summed = None  # not held through the next micro-batch's forward (a GPT's logits, its largest array)
    _warn_batch_statistics(batch_norms)
    return AccumulationResult(loss_sum / total, total, len(micro_batches), grad_dtype)


def _check_summed(loss, count, target, compare_items=True, shifted=None, said=()):
    """Refuse a loss_fn that averaged its micro-batch: its last op divides by the micro-batch's item count
    (F.cross_entropy's mean) or takes a mean over that many elements (F.mse_loss's), or a minigrad loss says
    it is a mean. And (compare_items) one that says it sums over other items than `count` (NOTE [a loss says
    what it averages], functional.py: `said`, the list of the loss_items() block loss_fn ran in); shifted() is
    the count over target[..., 1:], named when it is the loss's."""
    if not isinstance(loss, Tensor) or loss.numel() != 1:
        raise TypeError(f"accumulate: loss_fn must return a one-element Tensor (the summed loss of the "
                        f"micro-batch), got {type(loss).__name__}" + (f" of shape {loss.shape}" if isinstance(
                            loss, Tensor) else ""))
    record = loss.grad_fn
    averaged = False
    if backend.is_meta(loss.data):
        return  # a meta tensor has no values to look at
    if record is not None and record.name == "div" and record.saved and record.saved[1] is not None:
        divisor = backend.to_numpy(record.saved[1])
        averaged = divisor.size == 1 and float(divisor) in (count, getattr(target, "numel", lambda: -1)())
    elif record is not None and record.name == "mean":  # a summed loss never ends in a mean over many
        averaged = math.prod(record.shape[a] for a in record.axes) > 1
    name, reduction, items = said_of(loss, said)  # NOTE [a loss says what it averages]
    if reduction == "sum" and compare_items and items != count:
        if shifted is not None and len(getattr(target, "shape", ())) > 1 and items == shifted():
            raise ValueError(f"accumulate: loss_fn's {name}(reduction='sum') adds up {items:g} items, but accumulate "
                             f"counted {count} in the micro-batch's targets {tuple(target.shape)}: {items:g} is "
                             f"the count of targets[..., 1:], so loss_fn shifts its labels (a causal language "
                             f"model's loss: position t predicts target t + 1, as transformers' ForCausalLMLoss). "
                             f"Pass loss_shifts_labels=True to count targets[..., 1:] as it does (NOTE [a causal "
                             f"LM's loss shifts its labels], accumulate.py)")
        raise ValueError(f"accumulate: loss_fn's {name}(reduction='sum') adds up {items:g} items, but accumulate "
                         f"counted {count} in the micro-batch's targets {tuple(getattr(target, 'shape', ()))} "
                         f"(every element but those equal to ignore_index or masked out) and would divide by the "
                         f"wrong count. Class probabilities count one item per row, and a weighted cross_entropy's "
                         f"mean divides by its targets' class weights: pass total_items=the whole batch's count as "
                         f"the loss counts it (rows; weight[targets].sum()); and give accumulate the ignore_index "
                         f"that loss_fn ignores")
    if averaged or reduction == "mean":
        what = f"{name}(reduction='mean')" if reduction == "mean" else f"its last op is '{record.name}' by {count}"
        raise ValueError(f"accumulate: loss_fn returned a mean over its micro-batch ({what}); it must return the "
                         f"SUM (reduction='sum'): accumulate divides every micro-batch by the item count of the whole "
                         f"batch (NOTE [normalising by items])")


def _batch_statistics(model):
    """[(name, module, its num_batches_tracked now)] of the BatchNorm layers that normalise by the batch they see."""
    found = []
    for name, m in getattr(model, "named_modules", lambda: [])():
        if isinstance(m, nn.BatchNorm1d) and (m.training or not m.track_running_stats):
            seen = m.num_batches_tracked if m.track_running_stats else None
            found.append((name, m, None if seen is None or backend.is_meta(seen.data) else int(seen.item())))
    return found


def _warn_batch_statistics(batch_norms):
    """NOTE [BatchNorm does not accumulate], said where it applies: a layer that normalised two micro-batches or more
    by their own statistics (its count of batches moved by that much; without running statistics, any such layer)."""
    for name, m, before in batch_norms:
        runs = None if before is None else int(m.num_batches_tracked.item()) - before
        if runs is None or runs > 1:
            how = "train mode" if m.track_running_stats else "no running statistics"
            warnings.warn(f"accumulate: BatchNorm1d (model.{name}) normalised {runs or 'each of the'} micro-batches "
                          f"by each one's own statistics ({how}), so the accumulated gradient is not the full "
                          f"batch's (NOTE [BatchNorm does not accumulate], accumulate.py). For the full batch's, put "
                          f"the layer in eval mode (frozen statistics), use LayerNorm, or one micro-batch; if "
                          f"micro-batches big enough for good statistics are what you want (ghost batch norm), "
                          f"silence this warning", UserWarning, stacklevel=3)
            return


def _half(params):
    return [p for p in params if p.dtype.name in ("float16", "bfloat16")]


def _master_gradients(half):
    """float16 and bfloat16 parameters' .grad in float32: an existing 2-byte one is converted (exactly) before the
    first backward and after each, so the tape adds each further micro-batch's 2-byte gradient into float32
    (Tensor._accumulate adds in place). bfloat16 needs it most: its 8 bits of precision lost 2% of the sum over 64
    micro-batches (float16: 0.2%). A parameter that no backward reaches keeps no .grad, as after a plain backward,
    so that the optimizer skips it (a buffer of zeros made AdamW's weight decay move it)."""
    for p in half:
        if p.grad is not None and p.grad.dtype.name != "float32":
            p.grad = Tensor._from_array(p.grad.data.astype("float32"))


def accumulation_step(model, loss_fn, optimizer, inputs=None, targets=None, **kwargs):
    """optimizer.zero_grad(), accumulate(...), optimizer.step(): one step on the whole batch."""
    if ops.LEARNED:  # the learner's accumulation loop, where it is written (NOTE [learner's pieces], ops/base.py)
        mine = ops.learned("accumulation_step", model, loss_fn, optimizer, inputs, targets, **kwargs)
        if mine is not NotImplemented:
            return mine
    optimizer.zero_grad()
    result = accumulate(model, loss_fn, inputs, targets, **kwargs)
    optimizer.step()
    return result
