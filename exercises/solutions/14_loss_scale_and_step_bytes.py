"""Exercise 14, the reference (after lesson 12): the loss scaler's update rule (GradScaler.update in
minigrad/amp/grad_scaler.py, PyTorch's _amp_update_scale_) and a mixed-precision AdamW step's bytes."""
import math

import numpy as np

EXPLAIN = 18  # 4 (float32 weights) + 4 (float32 gradients) + 8 (AdamW's two float32 moments) + 2 (the float16 copy)

PRODUCTS = {"linear"}  # on the CPU, autocast's low-precision list: matmul, linear, sdpa


def update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    if found_inf:
        return np.float32(float(scale) * backoff_factor), 0
    growth_tracker += 1
    if growth_tracker == growth_interval:
        grown = np.float32(float(scale) * growth_factor)
        if np.isfinite(grown):
            scale = grown
        growth_tracker = 0
    return np.float32(scale), growth_tracker


def step_bytes(params, low_dtype):
    elements = sum(math.prod(shape) for shape, _ in params)
    cast = 0
    if low_dtype is not None:
        low = np.dtype(low_dtype).itemsize if low_dtype != "bfloat16" else 2  # NumPy has no bfloat16 of its own
        cast = sum(math.prod(shape) * low for shape, uses in params if PRODUCTS & set(uses))  # once, however many uses
    return {"parameters": 4 * elements, "gradients": 4 * elements, "optimizer": 2 * 4 * elements,
            "cast_weights": cast}
