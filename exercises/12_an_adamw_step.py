"""Exercise 12 (after lesson 1): one AdamW step, on raw NumPy arrays: the optimizer lesson 1 trains with.

Adam keeps two running averages per parameter, both arrays of the parameter's shape, starting at 0:
m, of the gradient (momentum), and v, of the squared gradient (a per-element scale). It moves each
element by about lr in the direction of m, divided by the typical size of the gradient, the square
root of v: a step whose size does not depend on how large the gradient is. AdamW (Loshchilov and
Hutter, "Decoupled Weight Decay Regularization") decays the WEIGHTS directly, apart from the gradient.

The rule at step t = 1, 2, 3, ..., for each parameter θ with gradient g, in this order (β1, β2 = betas,
λ = weight_decay, ε = eps):

    θ  <-  θ · (1 − lr·λ)                      decoupled weight decay, before the update
    m  <-  β1·m + (1 − β1)·g
    v  <-  β2·v + (1 − β2)·g²
    m̂  =  m / (1 − β1^t)                       bias correction: m and v started at 0, so early on
    v̂  =  v / (1 − β2^t)                         they are too small by exactly these factors
    θ  <-  θ − lr · m̂ / (√v̂ + ε)               ε outside the square root

This is torch.optim.AdamW's rule, and mg.optim.AdamW's, which the check compares with (both write the
last three lines as one, with the bias corrections folded into lr and into √v: the same numbers).

Write adamw_step(params, grads, state, lr, betas, eps, weight_decay, step):

    params   list of NumPy arrays, the parameters: update each IN PLACE, as optimizer.step() does: the
             model holds these very arrays, so a new array bound to a local name changes nothing
    grads    list of NumPy arrays, one per parameter, same shapes (read only)
    state    list of dicts, one per parameter: {"exp_avg": m, "exp_avg_sq": v} (PyTorch's names),
             zeros before step 1 (init_state below makes them); keep m and v there between calls
    betas    the pair (β1, β2);  step: t, 1 on the first call
    returns  nothing

Graded: 5 steps of your function and of mg.optim.AdamW on the same float64 parameters and gradients,
twice (with and without weight decay, other betas and eps), compared to 1e-12 after every step, with
the state; the gradients left as they were; the parameters changed in place. A wrong step is compared
with the usual mistakes (decay through the gradient, Adam's L2; no bias correction; ε inside the root;
...), and the message names the one it matches.

Explain (graded: set EXPLAIN, below, to a number, to two decimals). At step 1, with betas (0.9, 0.999)
and no weight decay, Adam WITHOUT bias correction moves each parameter by how many times what AdamW
moves it (ε too small to matter)?

Grade it:  python -m minigrad check 12        (stuck? python -m minigrad check 12 --hint)
"""
import math

import numpy as np

EXPLAIN = None  # your answer to the question at the end of the docstring


def init_state(params):
    """Adam's state before step 1: m and v, zeros shaped like each parameter."""
    return [{"exp_avg": np.zeros_like(p), "exp_avg_sq": np.zeros_like(p)} for p in params]


def adamw_step(params, grads, state, lr, betas, eps, weight_decay, step):
    raise NotImplementedError("Exercise 12 (adamw_step): the step is not written yet")
