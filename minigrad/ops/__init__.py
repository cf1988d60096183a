"""The differentiable ops, on raw arrays (being split into files by kind: for now all in pointwise.py)."""
from .pointwise import *  # noqa: F401,F403
from .pointwise import ShapeError  # noqa: F401
