"""Exercise 14 (after lesson 12): a loss scaler's update rule, and the bytes of a mixed-precision step by hand.

Part 1, the rule. float16 flushes numbers below about 6e-8 to zero, so a float16 backward loses the small
gradients. GradScaler multiplies the loss by a scale S before backward (every gradient is S times larger on the
way back) and divides the float32 gradients by S before the optimizer's step. S is chosen as it goes: too large,
and some gradient overflows to inf or becomes nan; then that step is skipped and S must shrink. Too small, and
small gradients flush again; so after enough steps in a row without trouble, S grows. Lesson 12 showed a scaler
that started too high find its level that way.

Write update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval), the rule that
GradScaler.update applies once per iteration (PyTorch's torch._amp_update_scale_), as a pure function:

    scale           the scale now: a float32 number (np.float32), as PyTorch keeps it in a float32 tensor
    growth_tracker  how many clean steps (no inf, no nan) have been counted since the scale last changed
    found_inf       whether this iteration's gradients held an inf or a nan
    growth_factor   > 1, what the scale is multiplied by when it grows;  backoff_factor: < 1, when it backs off
    growth_interval how many clean steps in a row make it grow
    returns         (the new scale, as an np.float32; the new growth tracker, an int)

A scale that would grow beyond float32's range is not grown: a scale of inf would make every gradient inf.

Part 2, the bytes. Under mg.autocast the model's weights stay float32 and so do their gradients; AdamW's state is
per parameter; and the products read 2-byte copies of their weights, which autocast casts once per region and
caches (NOTE [the weight-cast cache] in minigrad/amp/autocast_mode.py). Lesson 12 measured all of these.

Write step_bytes(params, low_dtype) for one training step of a model: its forward under
mg.autocast("cpu", dtype=low_dtype) (or, with low_dtype None, no autocast at all: float32 throughout), backward
after the region, then one mg.optim.AdamW step.

    params      one (shape, uses) per parameter, in the model's order: shape a tuple, uses a tuple of the names of
                the ops that read it in the forward, each use once: "embedding", "layer_norm", "linear"
                (this model's layer_norm reads the embedding's output, which is float32)
    low_dtype   "bfloat16", "float16" or None
    returns     {"parameters": bytes, "gradients": bytes, "optimizer": bytes, "cast_weights": bytes}

Graded: your bytes against mg.profile's measurement of that step (the peak of the categories 'parameters',
'gradients' and 'optimizer', and cast_weight_bytes()) on models of two sizes, in float32, bfloat16 and float16; and
your scales and trackers against mg.amp.GradScaler's on runs with injected infs and nans, a factor of 1 interval,
and a scale at the edge of float32. A wrong answer is compared with the usual mistakes, and the message names the
one it matches.

Explain (graded: set EXPLAIN, below, to a number). Hugging Face's guide counts mixed precision with AdamW at 18
bytes per parameter before activations, the ZeRO paper at 16. Under minigrad's autocast, with every parameter read
by a product (and so cast to float16) and the copies alive, how many bytes per parameter do the weights, their
gradients, AdamW's state and the copies take together?

Grade it:  python -m minigrad check 14        (stuck? python -m minigrad check 14 --hint)
"""
import numpy as np  # the scale is a NumPy float32

EXPLAIN = None  # your answer to the question at the end of the docstring


def update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    raise NotImplementedError("Exercise 14 (update_scale): the scaler's rule is not written yet")


def step_bytes(params, low_dtype):
    raise NotImplementedError("Exercise 14 (step_bytes): the step's bytes are not counted yet")
