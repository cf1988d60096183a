"""Adafactor (Shazeer and Stern, 2018) as Hugging Face transformers has it: the optimizer whose second moment of a
matrix is two vectors, a row and a column average, instead of a matrix.

AdamW keeps two arrays shaped like each parameter: 8 bytes per float32 parameter. Adafactor keeps, for a parameter
of shape (..., n, m), a running average of the squared gradient's rows (..., n) and of its columns (..., m), and
rebuilds the full estimate from them at each step (V ~ row col^T / mean(row), the best rank-1 fit in the
I-divergence the paper chooses). For bert-large's 1024 x 4096 matrices that is 5,120 floats where AdamW keeps
8.4 million. A vector (a bias, a LayerNorm's weight) keeps its full second moment; with beta1 set, a first moment
shaped like the parameter comes back, and with it half of AdamW's bytes.

NOTE [two Adafactors]: this is `transformers.optimization.Adafactor` (T5's defaults: no lr, a relative step
min(1e-2, 1/sqrt(t)) scaled by the parameter's RMS; update clipping at RMS 1; beta2_t = 1 - t^-0.8), the one the
Hugging Face write-up that minigrad's planner reproduces ran with `optim="adafactor"`. PyTorch 2.5 added
torch.optim.Adafactor, with another signature (lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
weight_decay, foreach, maximize) and the same algorithm up to three details: its lr plays the part of
min_step, always relative (torch's lr=1e-2 is this relative_step=True; torch's lr=x is this lr=x, relative_step=False
while x <= 1/sqrt(t)); its eps1 (machine epsilon by default) clamps the estimate from below where this adds
eps[0]=1e-30 to the squared gradient; its weight decay multiplies by lr, this one by the scaled step size. There
is no first moment in torch's. tests/test_memory_lean_optim.py runs both on the same gradients in float64.

Hugging Face's state also holds "RMS", the parameter's RMS, a 0-d tensor recomputed at every step before it is
read: minigrad does not keep it, so the state is exactly the arrays above (and the step count). As Hugging Face's,
a float16 or bfloat16 parameter and its gradient are upcast: the state is float32, and the parameter is written
back once per step.

Read next: adamw8bit.py, the other way to shrink the optimizer's share: keep AdamW's two moments, in 8 bits.
"""
import math

from .. import backend
from .optimizer import (Optimizer, _cast, _check_flag, _check_number, _float32_math, _in_dtype, _scratch,
                        _transient)


def _rms(xp, x):
    """Root mean square, as a 0-d array (no value leaves the device: the same code runs on 'meta')."""
    return xp.sqrt(xp.mean(_transient(x * x)))


def _approx_sq_grad(xp, row, col):
    """V ~ row col^T / mean(row), returned as its inverse square root (Hugging Face's _approx_sq_grad). What a
    row's or a column's size is made on the way is not counted (NOTE [a step's temporaries]), their product is."""
    r_factor = (1.0 / xp.sqrt(row / row.mean(axis=-1, keepdims=True)))[..., None]
    c_factor = (1.0 / xp.sqrt(col))[..., None, :]
    return _transient(r_factor * c_factor)


class Adafactor(Optimizer):
    """transformers' Adafactor, with its defaults and arguments (NOTE [two Adafactors]).

    lr: a fixed step (needs relative_step=False); None with relative_step=True, the default, gives
        min(1e-2, 1/sqrt(t)) (min(1e-6 t, 1/sqrt(t)) with warmup_init).
    eps: (eps1, eps2): eps1 is added to the squared gradient, eps2 is the least RMS a parameter's scale takes.
    clip_threshold: the update is divided by max(1, RMS(update) / clip_threshold).
    decay_rate: beta2_t = 1 - t^decay_rate.
    beta1: None keeps no first moment (the memory-lean default); a number keeps one, as Adam's.
    weight_decay: p -= weight_decay * step_size * p, with the step size as scaled.
    scale_parameter: the step is multiplied by max(eps2, RMS(p)), so that it is relative to the parameter's size.
    """

    def __init__(self, params, lr=None, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, beta1=None,
                 weight_decay=0.0, scale_parameter=True, relative_step=True, warmup_init=False):
        if lr is not None and relative_step:  # Hugging Face's check, with its words, before anything else
            raise ValueError(f"Adafactor: Cannot combine manual `lr` and `relative_step=True` options: with "
                             f"relative_step=True the step is min(1e-2, 1/sqrt(t)) and lr={lr!r} would be ignored; "
                             "pass relative_step=False (and scale_parameter=False for a plain step size) to use lr")
        if warmup_init and not relative_step:
            raise ValueError("Adafactor: `warmup_init=True` requires `relative_step=True` (the warm-up is of the "
                             "relative step, min(1e-6 t, 1/sqrt(t)))")
        super().__init__(params, dict(lr=lr, eps=eps, clip_threshold=clip_threshold, decay_rate=decay_rate,
                                      beta1=beta1, weight_decay=weight_decay, scale_parameter=scale_parameter,
                                      relative_step=relative_step, warmup_init=warmup_init))

    def _check_hyperparameters(self, group, where):
        for key in ("scale_parameter", "relative_step", "warmup_init"):
            _check_flag(where, key, group[key])
        if group["lr"] is None:
            if not group["relative_step"]:
                raise ValueError(f"{where}: relative_step=False needs an lr, got lr=None; pass e.g. lr=1e-3, or "
                                 "relative_step=True for T5's min(1e-2, 1/sqrt(t))")
        else:
            _check_number(where, "lr", group["lr"], low=0)
            if group["relative_step"]:  # the constructor refuses the pair; a group's lr would be ignored unseen
                raise ValueError(f"{where}: lr={group['lr']!r} with relative_step=True would be ignored: the step is "
                                 "min(1e-2, 1/sqrt(t)) (Hugging Face's Adafactor ignores a group's lr silently); "
                                 "give the group relative_step=False to use its lr, or leave lr out")
        if group["warmup_init"] and not group["relative_step"]:
            raise ValueError(f"{where}: warmup_init=True requires relative_step=True")
        eps = group["eps"]
        if not isinstance(eps, (tuple, list)) or len(eps) != 2:
            raise ValueError(f"{where}: eps must be a pair (eps1, eps2) such as (1e-30, 1e-3), got {eps!r}")
        for i, e in enumerate(eps):
            _check_number(where, f"eps[{i}]", e, low=0)
        _check_number(where, "clip_threshold", group["clip_threshold"], low=0)
        if not group["clip_threshold"] > 0:
            raise ValueError(f"{where}: clip_threshold must be > 0 (the update is divided by RMS / clip_threshold)")
        _check_number(where, "decay_rate", group["decay_rate"])
        if not group["decay_rate"] <= 0:
            raise ValueError(f"{where}: decay_rate must be <= 0 (beta2_t = 1 - t^decay_rate must lie in [0, 1)), "
                             f"got {group['decay_rate']}; T5's is -0.8")
        if group["beta1"] is not None:
            _check_number(where, "beta1", group["beta1"], low=0)
            if not group["beta1"] < 1:
                raise ValueError(f"{where}: beta1 must be in [0, 1) or None, got {group['beta1']}")
        _check_number(where, "weight_decay", group["weight_decay"], low=0)

    @staticmethod
    def _get_lr(xp, group, step, p):
        """Hugging Face's _get_lr: the relative (or given) step, times max(eps2, RMS(p)) if scale_parameter."""
        rel_step_sz = group["lr"]
        if group["relative_step"]:
            min_step = 1e-6 * step if group["warmup_init"] else 1e-2
            rel_step_sz = min(min_step, 1.0 / math.sqrt(step))
        if group["scale_parameter"]:
            return xp.maximum(group["eps"][1], _rms(xp, p)) * rel_step_sz
        return rel_step_sz

    @staticmethod
    def _shapes(p):
        """{state name: shape} of parameter p's arrays (the first moment's is added where beta1 is set)."""
        shape = tuple(p.shape)
        if len(shape) >= 2:
            return {"exp_avg_sq_row": shape[:-1], "exp_avg_sq_col": shape[:-2] + shape[-1:]}
        return {"exp_avg_sq": shape}

    def _loaded(self, key, value, p, what):
        shapes = {**self._shapes(p), "exp_avg": tuple(p.shape)}
        return _cast(value, p, what, shapes.get(key), float_dtype=_float32_math(p))

    def step(self):
        for group in self.param_groups:
            eps1 = group["eps"][0]
            beta1, clip, weight_decay = group["beta1"], group["clip_threshold"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                # a float16 or bfloat16 parameter steps in float32, written back once at the end (_float32_math)
                dtype = _float32_math(p)
                g, w = _in_dtype(p.grad._data, dtype), _in_dtype(p._data, dtype)
                xp = backend.xp_of(g)
                state = self.state.setdefault(p, {})
                if not state:  # the first step makes the state, as Hugging Face's does
                    state["step"] = 0
                    if beta1 is not None:
                        state["exp_avg"] = _transient(xp.zeros_like(g), state=True)
                    for name, shape in self._shapes(p).items():
                        state[name] = _transient(xp.zeros(shape, g.dtype), state=True)
                state["step"] = t = state["step"] + 1
                lr = self._get_lr(xp, group, t, w)
                beta2t = 1.0 - t ** group["decay_rate"]
                # one operation at a time, each parameter-sized temporary counted (NOTE [a step's temporaries])
                update = _transient(g * g)
                update += eps1                                   # update = g g + eps1
                if "exp_avg_sq_row" in state:
                    row, col = state["exp_avg_sq_row"], state["exp_avg_sq_col"]
                    row *= beta2t
                    row += (1.0 - beta2t) * update.mean(axis=-1)
                    col *= beta2t
                    col += (1.0 - beta2t) * update.mean(axis=-2)
                    update = _approx_sq_grad(xp, row, col)       # 1 / sqrt(V), V ~ row col^T / mean(row)
                    update *= g
                else:
                    v = state["exp_avg_sq"]
                    v *= beta2t
                    v += _transient((1.0 - beta2t) * update)
                    # into an array of the pool: for a 0-d parameter a ufunc gives a NumPy scalar, which out= refuses
                    update = xp.sqrt(v, out=_scratch(g))
                    xp.divide(g, update, out=update)             # update = g / sqrt(v)
                # clipping and scaling by 0-d arrays, not Python numbers: no value leaves the device (or 'meta')
                update /= xp.maximum(_rms(xp, update) / clip, 1.0)
                update *= lr
                if beta1 is not None:
                    m = state["exp_avg"]
                    m *= beta1
                    m += _transient((1 - beta1) * update)
                    update = m
                if weight_decay != 0:
                    w -= _transient(w * (weight_decay * lr))
                w -= update
                if w is not p._data:
                    p._data[...] = w
