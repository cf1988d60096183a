"""Exercise 11 (after lesson 4): the accumulation loop. A big batch's gradient at a small batch's memory.

A batch of B sequences does not fit in memory, but its gradient is a sum over its tokens, so it can
be computed a piece at a time: split the batch into micro-batches of `micro_batch_size` rows, and let
.grad add up (every backward adds into .grad; nothing sets it back to zero but zero_grad). The tape
drops what a record saved as soon as its backward has run, so when you call backward decides how many
micro-batches' activations are alive at once: the check measures it.

The loss of a language model is the mean over the batch's N tokens that are not padding (targets
equal to ignore_index do not count):

    loss = (1/N) sum_i l_i          over the N tokens i of the WHOLE batch

Rewrite this sum as a sum over micro-batches, and see what each micro-batch must contribute so that
the gradients add up to exactly the full batch's. Beware the tempting alternative, averaging each
micro-batch over its own tokens and then averaging those means: it is a different loss, and it was a
real bug in Hugging Face transformers until late 2024 (PRs #34191 and #34198; NOTE [normalising by
items] in minigrad/accumulate.py has the story). The check recognises it, and says by how much it
misweighs each micro-batch's tokens.

Write accumulate_step(model, loss_sum_fn, x, y, micro_batch_size, ignore_index=-100):

    x: token ids, a Tensor (B, T); y: targets, a Tensor (B, T), equal to ignore_index at padding
    loss_sum_fn(logits, targets) returns the SUM of the per-token losses of one micro-batch (a 0-d
        Tensor; it skips the padding itself: F.cross_entropy(..., ignore_index=-100, reduction="sum"))
    micro-batches: rows x[i:i + micro_batch_size], y[i:i + micro_batch_size] for i = 0, m, 2m, ...
        (the last one may be shorter: 8 rows in micro-batches of 3 are 3, 3 and 2 rows)

It starts from zero gradients (whatever .grad held before), leaves exactly the full batch's gradient
in .grad, and returns the full batch's mean loss per token as a Python float. It does not step an
optimizer: the caller does, as mg.accumulation_step does. Padding, at its extremes:
  - a micro-batch whose every target is padding holds no token: it adds nothing to the loss nor to
    the gradient, and it must not make anything nan or raise. Running it or skipping it are both fine.
  - a batch whose every target is padding has no mean: raise ValueError, before running the model.
Useful: y.numpy() (a NumPy array), loss.backward(), loss.item().

Graded, on a small float64 GPT with padded sequences (some micro-batches nearly empty, one empty):
.grad against one backward of the full batch's mean loss (the usual mistakes are named), the loss you
return, the model run once per micro-batch, the two extremes above, and with mg.profile that
micro-batches of 1 keep fewer activations than micro-batches of 4.

Explain (graded: set EXPLAIN, below, to a number, to two decimals). A batch of 48 tokens is split into
micro-batches of 23, 22 and 3 tokens. Under the mean of the micro-batch means, a token of the third
micro-batch weighs how many times what it weighs in the full batch's mean?

Grade it:  python -m minigrad check 11        (stuck? python -m minigrad check 11 --hint)
"""

EXPLAIN = None  # your answer to the question at the end of the docstring


def accumulate_step(model, loss_sum_fn, x, y, micro_batch_size, ignore_index=-100):
    raise NotImplementedError("Exercise 11 (accumulate_step): the loop over micro-batches is not written yet")
