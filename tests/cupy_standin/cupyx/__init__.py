"""cupyx for the CuPy stand-in (tests/cupy_standin/cupy): scatter_add and scipy.special."""
import warnings as _warnings

import cupy as _cupy

from . import scipy  # noqa: F401


def scatter_add(a, slices, value):
    """a[slices] += value, repeated indices adding up (CuPy 14: through the deprecated ndarray.scatter_add)."""
    a.scatter_add(slices, value)


def scatter_max(a, slices, value):
    _warnings.warn("`ndarray.scatter_max` is deprecated Please use `_cupy.maximum.at` instead.", DeprecationWarning)
    _cupy.maximum.at(a, slices, value)


def scatter_min(a, slices, value):
    _warnings.warn("`ndarray.scatter_min` is deprecated Please use `_cupy.minimum.at` instead.", DeprecationWarning)
    _cupy.minimum.at(a, slices, value)
