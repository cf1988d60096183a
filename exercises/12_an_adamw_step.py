"""Exercise 12: one AdamW step, on raw NumPy arrays.

Adam keeps two running averages per parameter, both arrays of the parameter's shape, starting at 0:
m, of the gradient (momentum), and v, of the squared gradient (a per-element scale). It moves each
element by about lr in the direction of m, divided by the typical size of the gradient sqrt(v): a
step that does not depend on how large the gradient is. AdamW (Loshchilov and Hutter, "Decoupled
Weight Decay Regularization") adds weight decay to the WEIGHTS, not to the gradient. At step t
(1, 2, 3, ...), for each parameter p with gradient g, in this order:

    p *= 1 - lr * weight_decay                  # decoupled weight decay, before the update
    m  = b1 * m + (1 - b1) * g
    v  = b2 * v + (1 - b2) * g * g
    m_hat = m / (1 - b1 ** t)                   # bias correction: m and v started at 0, so early on
    v_hat = v / (1 - b2 ** t)                   #   they are too small by exactly these factors
    p -= lr * m_hat / (sqrt(v_hat) + eps)       # eps OUTSIDE the square root

This is torch.optim.AdamW's rule, and mg.optim.AdamW's, which the check compares with (both write the
last three lines as p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps): the same numbers).
Three mistakes are common, and the check recognises each:
  - adding weight_decay * p to the gradient instead (Adam with an L2 penalty, torch.optim.Adam's
    weight_decay): the decay then goes through m and v and is divided by sqrt(v_hat), so weights with
    large gradients are barely decayed;
  - no bias correction: at step 1 the update is then (1 - b1) / sqrt(1 - b2) = 3.16 times too big;
  - eps inside the square root, sqrt(v_hat + eps): a different, much larger floor for small gradients.

Write adamw_step(params, grads, state, lr, betas, eps, weight_decay, step):

    params   list of NumPy arrays, the parameters: update each IN PLACE (p *= ..., p -= ...), as
             optimizer.step() does: the model holds these very arrays, so `p = p - ...` changes nothing
    grads    list of NumPy arrays, one per parameter, same shapes (read only)
    state    list of dicts, one per parameter: {"exp_avg": m, "exp_avg_sq": v} (PyTorch's names),
             zeros before step 1 (init_state below makes them); keep m and v there between calls,
             updating the arrays in place (m *= b1; m += ...) or storing the new ones back
    betas    the pair (b1, b2);  step: t, 1 on the first call
    returns  nothing

The check runs 5 steps of your function and of mg.optim.AdamW on the same float64 parameters and
gradients, twice (with and without weight decay), and compares them to 1e-12.
Grade it:  python -m minigrad check 12
"""
import math

import numpy as np


def init_state(params):
    """Adam's state before step 1: m and v, zeros shaped like each parameter."""
    return [{"exp_avg": np.zeros_like(p), "exp_avg_sq": np.zeros_like(p)} for p in params]


def adamw_step(params, grads, state, lr, betas, eps, weight_decay, step):
    raise NotImplementedError("Exercise 12 (adamw_step): for each p, g, s: decay p in place by 1 - lr * weight_decay, "
                              "update s['exp_avg'] and s['exp_avg_sq'], then p -= lr * m_hat / (sqrt(v_hat) + eps) "
                              "with m_hat = m / (1 - b1 ** step), v_hat = v / (1 - b2 ** step)")
