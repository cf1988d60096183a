"""Exercise 11: the accumulation loop. A big batch's gradient at a small batch's memory.

A batch of B sequences does not fit in memory, but its gradient is a sum over its tokens, so it can
be computed a piece at a time: split the batch into micro-batches of `micro_batch_size` rows, run
forward AND backward on each in turn, and let .grad add up (every backward adds into .grad; nothing
sets it back to zero but zero_grad). Each backward frees its micro-batch's activations (the tape
drops what a record saved as soon as its backward has run), so only one micro-batch's activations
are alive at a time: summing the micro-batches' losses and calling backward once would keep them all.

The loss of a language model is the mean over the batch's N tokens that are not padding (targets
equal to ignore_index do not count). That mean is a sum over micro-batches:

    loss = (1/N) sum_i l_i = sum_mb [ (1/N) * sum_{i in mb} l_i ]      N: the WHOLE batch's tokens

so each micro-batch's SUMMED loss is divided by N, counted once over the whole batch before the loop.
Not by its own token count: averaging each micro-batch and then averaging those means,

    (1/k) sum_mb [ (1/N_mb) * sum_{i in mb} l_i ],

weights a token in a micro-batch with few tokens (short sequences, much padding) more than one in a
full micro-batch. That was the bug fixed in Hugging Face transformers in late 2024 (PRs #34191 and
#34198); NOTE [normalising by items] in minigrad/accumulate.py has the story.

Write accumulate_step(model, loss_sum_fn, x, y, micro_batch_size, ignore_index=-100):

    x: token ids, a Tensor (B, T); y: targets, a Tensor (B, T), equal to ignore_index at padding
    loss_sum_fn(logits, targets) returns the SUM of the per-token losses of one micro-batch (a 0-d
        Tensor; it skips the padding itself: F.cross_entropy(..., ignore_index=-100, reduction="sum"))
    micro-batches: rows x[i:i + micro_batch_size], y[i:i + micro_batch_size] for i = 0, m, 2m, ...
        (the last one may be shorter: 8 rows in micro-batches of 3 are 3, 3 and 2 rows)

It zeroes the gradients first (model.zero_grad()), leaves exactly the full batch's gradient in
.grad, and returns the full batch's mean loss per token as a Python float. It does not step an
optimizer: the caller does, as mg.accumulation_step does (zero_grad, the loop, optimizer.step()).
Useful: y.numpy() (a NumPy array), loss.backward(), loss.item(), loss * (1.0 / n).

The check compares your .grad, in float64, with one backward of the full batch's mean loss, and
measures with mg.profile that micro-batches of 1 keep fewer activations than micro-batches of 4.
Grade it:  python -m minigrad check 11
"""


def accumulate_step(model, loss_sum_fn, x, y, micro_batch_size, ignore_index=-100):
    raise NotImplementedError("Exercise 11 (accumulate_step): model.zero_grad(); n = the number of targets "
                              "!= ignore_index in the WHOLE y; then for each micro-batch "
                              "(loss_sum_fn(model(xb), yb) * (1.0 / n)).backward(); return the summed "
                              "losses' .item() / n")
