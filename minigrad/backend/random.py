"""minigrad's own random number generator: one seeded stream for init, randn and dropout.

Its state can be read and restored (`get_rng_state` / `set_rng_state`, PyTorch's names), which
is what lets checkpointing replay a dropout mask exactly when it recomputes a segment.
Numbers are drawn on the host with NumPy and moved to the device, so a seed gives the same
numbers on 'cpu' and 'cuda'. On 'meta' nothing is drawn (`draw`).

Read next: special.py, then ops/.
"""

import numpy as np

from .device import normalize_device, xp_for

_generator = np.random.Generator(np.random.PCG64(0))


def manual_seed(seed):
    """Reseed the generator (as torch.manual_seed: an int in [-2**63, 2**64); a negative one counts down from
    2**64 - 1, as there; the stream is NumPy's, not PyTorch's)."""
    global _generator
    try:
        seed = int(seed)
    except (TypeError, ValueError) as e:  # PyTorch's ValueError for int('a'), TypeError for None
        raise type(e)(f"manual_seed: seed must be an int, got {seed!r}") from None
    if not -2 ** 63 <= seed < 2 ** 64:
        raise ValueError(f"manual_seed: seed must be in [-2**63, 2**64 - 1], as in PyTorch, got {seed}")
    _generator = np.random.Generator(np.random.PCG64(seed if seed >= 0 else 0xffff_ffff_ffff_ffff + seed))


# NOTE [a state is already a copy]: NumPy's bit generator builds a new dict of Python ints each time its `state` is
# read, and its setter copies the numbers out of the dict it is given and keeps no reference to it. So a read is a
# snapshot, and a dict passed in may be changed after, with no copy of our own (copy.deepcopy's were 9,816 of the
# 71,397 Python opcodes of a checkpointed chain's step, which reads and sets the state twice per segment:
# bench/NOTES.md).
# tests/test_nn_optim.py checks both halves on the NumPy it runs with.
def get_rng_state():
    """A snapshot of the generator's state, to pass to set_rng_state later (NOTE [a state is already a copy])."""
    return _generator.bit_generator.state


def set_rng_state(new_state):
    """Put the generator back at a state that get_rng_state gave (NOTE [a state is already a copy])."""
    _generator.bit_generator.state = new_state


def generator():
    """The NumPy Generator behind minigrad's random functions."""
    return _generator


def draw(method, *args, size, device=None, **kwargs):
    """generator().<method>(*args, size=size, **kwargs), drawn on the host for a tensor on `device`. On 'meta'
    nothing is drawn, as a meta tensor has no values: an array of the size and of the dtype the draw would have
    stands in, and the stream does not move."""
    if normalize_device(device) == "meta":
        dtype = getattr(np.random.default_rng(0), method)(*args, size=1, **kwargs).dtype
        return xp_for("meta").empty(size, dtype)
    return getattr(_generator, method)(*args, size=size, **kwargs)


def draw_categories(weights, num_samples, replacement):
    """torch.multinomial's sampling, on the host: for each row of the 2-d float64 array `weights` (its categories'
    weights, which need not sum to 1), num_samples category indices, as an int array of shape (rows, num_samples).
    Tensor.multinomial reads the tensor's weights and makes the result a tensor."""
    w = weights
    if not np.isfinite(w).all() or (w < 0).any() or (w.sum(axis=1) <= 0).any():
        raise ValueError("multinomial: the weights must be finite, non-negative, and not all zero in a row")
    if not replacement and num_samples > int((w > 0).sum(axis=1).min()):
        raise ValueError(f"multinomial: cannot draw {num_samples} samples without replacement from a row with only "
                         f"{int((w > 0).sum(axis=1).min())} non-zero weights; pass replacement=True")
    if replacement:  # the first category whose running total of weight exceeds a uniform draw times the total
        cdf = w.cumsum(axis=1)
        u = _generator.random((w.shape[0], num_samples)) * cdf[:, -1:]
        last = w.shape[1] - 1 - np.argmax(w[:, ::-1] > 0, axis=1)  # if rounding puts u at the total itself
        return np.minimum((cdf[:, None, :] <= u[:, :, None]).sum(axis=2), last[:, None])
    # exponential races: E / w is exponential with rate w; the first num_samples to finish, in order
    with np.errstate(divide="ignore"):
        finish = _generator.standard_exponential(w.shape) / w
    return np.argsort(finish, axis=1, kind="stable")[:, :num_samples]
