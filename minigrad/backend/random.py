"""minigrad's own random number generator: one seeded stream for init, randn and dropout.

Its state can be read and restored (`get_rng_state` / `set_rng_state`, PyTorch's names), which
is what lets checkpointing replay a dropout mask exactly when it recomputes a segment.
Numbers are drawn on the host with NumPy and moved to the device, so a seed gives the same
numbers on 'cpu' and 'cuda'. On 'meta' nothing is drawn (`draw`).

Read next: special.py, then ops/.
"""
import copy

import numpy as np

from .device import normalize_device, xp_for

_generator = np.random.Generator(np.random.PCG64(0))


def manual_seed(seed):
    """Reseed the generator (as torch.manual_seed)."""
    global _generator
    _generator = np.random.Generator(np.random.PCG64(int(seed)))


def get_rng_state():
    """A snapshot of the generator's state, to pass to set_rng_state later."""
    return copy.deepcopy(_generator.bit_generator.state)


def set_rng_state(state):
    _generator.bit_generator.state = copy.deepcopy(state)


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
