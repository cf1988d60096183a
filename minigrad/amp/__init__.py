"""Mixed precision, with torch.amp's names: `mg.autocast` (also `mg.amp.autocast`) and `mg.amp.GradScaler`.

  autocast_mode.py  autocast: the lists of which op runs in which dtype, the casts, the cache of cast weights
  grad_scaler.py    GradScaler: loss scaling for float16 gradients, skipping a step whose gradients hold inf or nan

A capability on top of the tape, not inside it: the tape asks autocast's policy one question per op inside a region
(NOTE [autocast asks first], tensor/modes.py) and none outside.
"""
from .autocast_mode import autocast, autocast_of, cached_casts, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler

__all__ = ["autocast", "autocast_of", "GradScaler", "is_autocast_enabled", "get_autocast_dtype", "cached_casts"]
