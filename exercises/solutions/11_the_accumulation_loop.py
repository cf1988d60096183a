"""Exercise 11, the reference (after lesson 4): the accumulation loop (minigrad/accumulate.py has the full helper)."""

EXPLAIN = 5.33  # 1 / (3 micro-batches x 3 tokens) against 1 / 48: 48 / 9


def accumulate_step(model, loss_sum_fn, x, y, micro_batch_size, ignore_index=-100):
    total = int((y.numpy() != ignore_index).sum())  # the WHOLE batch's tokens, counted once, up front
    if total == 0:
        raise ValueError("accumulate_step: the batch has no token to learn from (every target is ignore_index)")
    model.zero_grad()
    loss_sum = 0.0
    for i in range(0, x.shape[0], micro_batch_size):
        summed = loss_sum_fn(model(x[i:i + micro_batch_size]), y[i:i + micro_batch_size])
        (summed * (1.0 / total)).backward()  # frees this micro-batch's activations before the next one
        loss_sum += summed.item()
    return loss_sum / total
