"""What the tests share to run on any device (MINIGRAD_DEVICE=cuda runs the suite on CuPy, or on the CuPy stand-in
in tests/cupy_standin): `to_host` for assertions, and `host_only` for what is the host's by nature.

NumPy's assertions read their arguments through numpy.asarray, which a CuPy array refuses (CuPy's TypeError):
compare to_host(x) instead of x.data, a gradient's array or an optimizer's state.
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import backend

DEVICE = mg.default_device()


def to_host(x):
    """x as NumPy, for an assertion: a Tensor's values, an array of any device copied to the host, and the same for
    each element of a list, tuple or dict (a state_dict)."""
    if isinstance(x, mg.Tensor):
        return x.detach().numpy()
    if backend.is_array(x):
        return backend.to_numpy(x)
    if isinstance(x, dict):
        return {k: to_host(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(to_host(v) for v in x)
    return np.asarray(x) if isinstance(x, np.generic) else x


def host_only(reason):
    """Mark a test that checks the host itself (NumPy's arrays, the host pool, page faults, a NumPy column): it
    skips on 'cuda', saying why (tests/conftest.py)."""
    return pytest.mark.host_only(reason)
