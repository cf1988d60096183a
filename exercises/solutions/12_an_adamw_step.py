"""Exercise 12, the reference (after lesson 1): one AdamW step on NumPy arrays (AdamW.step in minigrad/optim.py)."""
import math

import numpy as np

EXPLAIN = 3.16  # (1 - b1) / sqrt(1 - b2) = 0.1 / sqrt(0.001)


def init_state(params):
    """Adam's state before step 1: m and v, zeros shaped like each parameter."""
    return [{"exp_avg": np.zeros_like(p), "exp_avg_sq": np.zeros_like(p)} for p in params]


def adamw_step(params, grads, state, lr, betas, eps, weight_decay, step):
    b1, b2 = betas
    bias1, bias2 = 1 - b1 ** step, 1 - b2 ** step
    for p, g, s in zip(params, grads, state):
        m, v = s["exp_avg"], s["exp_avg_sq"]
        p *= 1 - lr * weight_decay  # decoupled: the decay never enters m or v
        m *= b1
        m += (1 - b1) * g
        v *= b2
        v += (1 - b2) * g * g
        p -= (lr / bias1) * m / (np.sqrt(v) / math.sqrt(bias2) + eps)
