"""cupyx.scipy for the CuPy stand-in: special only."""
from . import special  # noqa: F401
