"""mg.amp.GradScaler: loss scaling, as torch.amp.GradScaler does it, for the gradients of a float16 autocast region.

float16's smallest number is 6e-8 (2^-24, subnormal; 6e-5 normal): a gradient below it becomes 0 in a float16
backward, and the weights it belongs to stop learning. Scaling the loss by S (2^16 to begin with) scales every
gradient by S on the way back, above the flush; `unscale_` divides the float32 gradients by S before the step. A
scale too large overflows to inf: then the step is skipped and S halves; after `growth_interval` steps without an
inf it doubles. bfloat16 has float32's range and needs none of this (PyTorch's docs say so; it does no harm).

The scale is a float32 number and every rule is PyTorch's, so the scales and the skipped steps are PyTorch's to the
bit (tests/test_amp.py). Read next: nothing: this is a leaf of the floors.
"""
import numpy as np

from .. import backend, ops
from ..tensor import Tensor, mark_written

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


def amp_update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    """The scale's update rule, torch._amp_update_scale_ as a pure function: (new scale, new growth tracker).
    An inf or nan found: back off, and count again from 0. Else one more clean step; at growth_interval of them,
    grow (only if the grown scale is finite in float32) and count again. The scale is float32, computed as PyTorch's
    kernel computes it: the product in double, rounded once. (Exercise 14 asks for it; learner mode uses yours.)"""
    if found_inf:
        return np.float32(float(scale) * backoff_factor), 0
    if growth_tracker + 1 == growth_interval:
        with np.errstate(over="ignore"):  # beyond float32's range: inf, and the scale stays
            grown = np.float32(float(scale) * growth_factor)
        return (grown if np.isfinite(grown) else np.float32(scale)), 0
    return np.float32(scale), growth_tracker + 1


class GradScaler:
    """torch.amp.GradScaler(device, init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
    enabled=True); the loop it goes in:

        with mg.autocast('cuda'):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)        # optional: before clipping the gradients
        scaler.step(opt)            # skipped if a gradient holds inf or nan
        scaler.update()

    `device` is where the gradients are (minigrad keeps the scale as a number, so it only names them; None: the
    default device)."""

    def __init__(self, device=None, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not growth_factor > 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1.0 (PyTorch asserts it), got {growth_factor}")
        if not backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be < 1.0 (PyTorch asserts it), got {backoff_factor}")
        if not (isinstance(growth_interval, int) and growth_interval > 0):
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got {growth_interval!r}")
        self.device = backend.normalize_device(device)
        self._enabled = bool(enabled)
        self._init_scale, self._growth_factor, self._backoff_factor = init_scale, growth_factor, backoff_factor
        self._growth_interval = growth_interval
        self._scale = np.float32(init_scale)  # float32, as PyTorch's scale tensor: the same roundings
        self._growth_tracker = 0              # steps since the last inf or growth
        self._per_optimizer = {}              # id(optimizer) -> {"stage": ..., "found_inf": float}

    # --- the loop
    def scale(self, outputs):
        """outputs (a tensor, or a list or tuple of them) times the scale; outputs themselves when disabled."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            # PyTorch multiplies by its scale, a 0-d float32 tensor, whose dtype wins only against another 0-d
            # tensor: a float16 or bfloat16 loss (0-d) is scaled in float32 (a float16 loss of 2.0 times 2^16 is
            # 131072.0, not inf), a dimensioned output keeps its dtype. The gradient that reaches the loss is the
            # same either way: the float32 scale rounded once to the loss's dtype
            if outputs.ndim == 0 and backend.accumulator(outputs.dtype) is not None:
                outputs = outputs.float()
            return outputs * float(self._scale)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"GradScaler.scale: outputs must be a Tensor or a list or tuple of them, got "
                        f"{type(outputs).__name__}")

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale, in place, and note whether any holds inf or nan."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = np.float32(1.0 / float(self._scale))  # in float64, then float32, as PyTorch's reciprocal
        found = 0.0
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.dtype == np.float16:
                    raise ValueError("Attempting to unscale FP16 gradients. (GradScaler: keep the weights float32 and "
                                     "run the forward under mg.autocast; a model.half() has float16 gradients)")
                g = p.grad.data
                if not backend.is_meta(g) and not bool(backend.xp_of(g).isfinite(g).all()):
                    found = 1.0  # 'meta' gradients have no values: never inf
                # as PyTorch's kernel: the gradient times the float32 inv_scale, in float32 for a bfloat16 gradient,
                # rounded once to its dtype (1/3000 rounded to bfloat16 first made 3000 unscale to 1.0078)
                wide = backend.widen(g)
                wide *= inv_scale.astype(wide.dtype)
                if wide is not g:
                    g[...] = wide
                mark_written([p.grad])
        state["found_inf"], state["stage"] = found, _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) on unscaled gradients, unless one held inf or nan: then nothing (None)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale=None):
        """Halve the scale (backoff_factor) if a step found inf or nan, double it (growth_factor) after
        growth_interval clean steps; or set it to new_scale. Call once per iteration, after step."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = np.float32(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
        else:
            found = [s["found_inf"] for s in self._per_optimizer.values() if s["stage"] != _READY]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            args = (self._scale, self._growth_tracker, bool(sum(found)), self._growth_factor, self._backoff_factor,
                    self._growth_interval)
            new = ops.learned("amp_update_scale", *args) if ops.LEARNED else NotImplemented  # exercise 14's rule,
            # where you wrote it (NOTE [learner's pieces], ops/base.py)
            self._scale, self._growth_tracker = amp_update_scale(*args) if new is NotImplemented else new
        self._per_optimizer = {}

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": 0.0, "of": optimizer})

    # --- queries and settings, with PyTorch's names
    def get_scale(self):
        return float(self._scale) if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker ({} if disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        self._scale = np.float32(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._growth_tracker = int(state_dict["_growth_tracker"])
