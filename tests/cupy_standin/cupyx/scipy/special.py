"""cupyx.scipy.special for the CuPy stand-in: SciPy's ufuncs of the same names, as cupy.ufuncs (arrays of the
stand-in or scalars in, arrays of the stand-in out), the names limited to the real module's (api.json)."""
import numpy as _np
import scipy.special as _scipy_special

import cupy as _cupy

_NAMES = _cupy._API["modules"]["cupyx.scipy.special"]


def __getattr__(name):
    np_ufunc = getattr(_scipy_special, name, None) if _NAMES.get(name) == "ufunc" else None
    if not isinstance(np_ufunc, _np.ufunc):
        raise AttributeError(f"module 'cupyx.scipy.special' has no attribute {name!r} (the CuPy stand-in offers "
                             f"SciPy's ufuncs that the real module has)")
    value = _cupy.ufunc(np_ufunc, name, prefix="cupyx_scipy_special_")
    globals()[name] = value
    return value
