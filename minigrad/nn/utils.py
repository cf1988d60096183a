"""torch.nn.utils' clip_grad_norm_ and clip_grad_value_, as a namespace (nn.utils); torch.nn.init is init.py.

Read next: init.py, then optim/, what changes the parameters.
"""
import math

import numpy as np

from .. import backend
from ..tensor import Tensor, no_grad, stack, tensor


def _norm_type(norm_type):
    """clip_grad_norm_'s norm_type as PyTorch reads it, float(norm_type) ('inf' and float('inf') alike), limited to
    the p that Tensor.norm takes."""
    try:
        p = float(norm_type)
    except (TypeError, ValueError) as e:
        raise type(e)(f"clip_grad_norm_: norm_type must be a number or a string of one ('inf', as in PyTorch), got "
                      f"{norm_type!r} of type {type(norm_type).__name__}") from None
    if not (p >= 0 or p == -math.inf):
        raise ValueError(f"clip_grad_norm_: norm_type {norm_type!r} is not supported: give 0, a number > 0, inf or "
                         f"-inf (float('inf') or 'inf'); minigrad's norm has no p < 0 or nan")
    return p


def _common_float(grads):
    """The dtype PyTorch's torch.stack promotes the gradients' norms to, so that of the total norm and the clip
    coefficient: the widest, float32 for float16 with bfloat16. The first gradient's dtype, as it was, took a model's
    float32 and float64 norms in float32 and scaled its float64 gradients by a coefficient rounded to float32."""
    widest = max((g.dtype for g in grads), key=lambda d: d.itemsize)
    mixed_2_byte = widest.itemsize == 2 and len({g.dtype for g in grads}) > 1
    return np.dtype(np.float32) if mixed_2_byte else widest


def _clip_coefficient(total, max_norm):
    """min(max_norm / (total + 1e-6), 1) as PyTorch computes it: in the norm's dtype (a 0-d array), the division as
    Tensor.__rtruediv__ does it, a reciprocal times max_norm. In float64 and rounded once it differed in the last bit
    of a third of the clipped float32 gradients."""
    xp, number = backend.xp_of(total), total.dtype.type
    return xp.minimum(xp.reciprocal(total + number(1e-6)) * number(max_norm), number(1.0))


class utils:
    """torch.nn.utils' clip_grad_norm_ and clip_grad_value_ (a namespace, as torch.nn.utils is a module: nothing to
    instantiate)."""

    @staticmethod
    def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
        """Scale the gradients in place so that their norm, all of them taken as one vector, is at most max_norm;
        returns that norm before clipping. As torch.nn.utils.clip_grad_norm_ (the 1e-6 included; norm_type a
        number, or 'inf'; foreach, a choice of PyTorch kernels, changes nothing here). On 'meta' the gradients are
        scaled by a stand-in (they have no norm to read), so that a step that clips runs there, as in PyTorch."""
        norm_type = _norm_type(norm_type)
        params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
        grads = [p.grad for p in params if p.grad is not None]
        if not grads:
            return tensor(0.0)
        with no_grad():
            norms = stack([g.norm(norm_type).to(_common_float(grads)) for g in grads])
            total = norms.norm(norm_type)
            if backend.is_meta(total._data):  # the same writes as a real step's, whatever the scale
                if error_if_nonfinite:
                    raise backend.MetaError("clip_grad_norm_: error_if_nonfinite=True reads the norm's value, which a "
                                            "'meta' tensor does not have (PyTorch's raises too); pass "
                                            "error_if_nonfinite=False on 'meta'")
                scale = 1.0
            else:
                norm = total.item()
                if error_if_nonfinite and not math.isfinite(norm):
                    raise RuntimeError(f"clip_grad_norm_: the total norm of the gradients is {norm}; pass "
                                       f"error_if_nonfinite=False to clip anyway")
                scale = float(_clip_coefficient(total._data, max_norm))
            for g in grads:
                g.mul_(scale)
        return total

    @staticmethod
    def clip_grad_value_(parameters, clip_value, foreach=None):
        """Clamp every gradient, in place, to [-clip_value, clip_value], as torch.nn.utils.clip_grad_value_: each
        element on its own (the direction changes, unlike clip_grad_norm_'s), nan stays nan, inf becomes the bound;
        foreach, a choice of PyTorch kernels, changes nothing here."""
        clip_value = float(clip_value)
        params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
        with no_grad():
            for p in params:
                if p.grad is not None:
                    p.grad.clamp_(-clip_value, clip_value)
