"""torch.nn.init: the fillers, writing in place under no_grad and drawing from minigrad's generator
(mg.manual_seed), with PyTorch's formulas, defaults and errors: `nn.init.kaiming_uniform_(w, a=math.sqrt(5))`, or
`from minigrad.nn import init`.

    uniform_, normal_, trunc_normal_, constant_, zeros_, ones_    the values given
    xavier_uniform_, xavier_normal_    std = gain sqrt(2 / (fan_in + fan_out))       (Glorot and Bengio 2010)
    kaiming_uniform_, kaiming_normal_  std = gain / sqrt(fan), fan_in or fan_out     (He et al. 2015)
    calculate_gain                     the gain a nonlinearity needs, PyTorch's table

A weight (out_features, in_features) has fan_in = in_features, fan_out = out_features (times the receptive field,
for more dims, as PyTorch counts them). The numbers drawn are minigrad's generator's, not PyTorch's: the same
distribution, not the same values. minigrad has one generator, so `generator=` is refused.

Read next: utils.py.
"""
import math
import warnings

import numpy as np

from ..backend import is_meta
from ..backend.random import draw
from ..names import not_offered
from ..tensor import no_grad, tensor as _tensor

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def _no_generator(name, generator):
    if generator is not None:
        raise TypeError(f"nn.init.{name}: minigrad has one generator, seeded by mg.manual_seed (its state: "
                        f"mg.get_rng_state / mg.set_rng_state); leave generator=None")


def _fill(t, host):
    with no_grad():
        return t.copy_(_tensor(host, dtype=t.dtype, device=t.device))


def _empty(t, name):
    """PyTorch's no-op, with its warning, for a tensor with no elements."""
    if 0 in t.shape:
        warnings.warn(f"nn.init.{name}: Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    _no_generator("uniform_", generator)
    return _fill(tensor, draw("uniform", a, b, size=tensor.shape, device=tensor.device))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    _no_generator("normal_", generator)
    return _fill(tensor, draw("normal", mean, std, size=tensor.shape, device=tensor.device))


def _norm_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std^2) kept within [a, b] (a and b are values, not numbers of std, as in PyTorch), drawn as PyTorch
    2.13 draws it: NOTE [two ways to a truncated normal]."""
    _no_generator("trunc_normal_", generator)
    if a > b:  # PyTorch's uniform_ refuses it (a RuntimeError, from=a > to=b); a == b fills with a, as PyTorch's
        raise ValueError(f"nn.init.trunc_normal_: the bounds must have a <= b, got a={a}, b={b}")
    if std == 0:  # PyTorch's (b - mean) / std raises at once; a rejection loop would redraw `mean` forever
        raise ZeroDivisionError(f"nn.init.trunc_normal_: std=0 (float division by zero, as PyTorch's): N({mean}, 0) "
                                f"is the one value {mean}; to fill with it, use nn.init.constant_(tensor, {mean})")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may "
                      "be incorrect.", stacklevel=2)
    p = _norm_cdf((b - mean) / std) - _norm_cdf((a - mean) / std)
    if p > 0.3:  # most of N(mean, std^2) lies in [a, b]: draw it, and draw again what falls outside
        def proposal(size):
            return draw("normal", mean, std, size=size, device=tensor.device)

        def kept(x):
            return (x >= a) & (x <= b)
    else:  # uniform on [a, b], each kept with probability pdf(x) / pdf(the window's highest point)
        log_peak = -0.5 * ((max(a, min(mean, b)) - mean) / std) ** 2

        def proposal(size):
            return draw("uniform", a, b, size=size, device=tensor.device)

        def kept(x):
            return np.log(draw("uniform", size=x.shape)) <= -0.5 * ((x - mean) / std) ** 2 - log_peak
    values = proposal(tensor.shape)
    if not is_meta(values):
        rejected = ~kept(values)
        while rejected.any():
            values[rejected] = proposal(int(rejected.sum()))
            rejected[rejected] = ~kept(values[rejected])
    return _fill(tensor, values)


# NOTE [two ways to a truncated normal]: where [a, b] holds more than 30% of N(mean, std^2), a normal draw lands in
# it at least that often: values outside are drawn again until none is. Where it holds less (a far tail, a = 3.5,
# b = 5 with N(0, 1), holds 0.02%), that would take thousands of rounds, so PyTorch 2.13's _no_grad_trunc_normal_
# (torch/nn/init.py) draws uniformly on [a, b] and keeps x with probability exp(-(x - mean)^2 / 2 std^2) over its
# largest value on [a, b]: rejection sampling whose proposal is the window itself, exact, keeping 18% of the draws
# on [3.5, 5]. Both are PyTorch's choices, so the distributions are PyTorch's. (Its docstring's word, "redrawn",
# is the first way only.) A std of 0 would make the first way redraw `mean` forever: it raises, as PyTorch's does.


def constant_(tensor, val):
    with no_grad():
        return tensor.fill_(val)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def calculate_gain(nonlinearity, param=None):
    """The factor that keeps activations' variance through a layer: 1 (linear, sigmoid), 5/3 (tanh), sqrt(2)
    (relu), sqrt(2 / (1 + slope^2)) (leaky_relu, slope param, 0.01 by default), 3/4 (selu); PyTorch's table."""
    if nonlinearity in _LINEAR or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}: calculate_gain knows {', '.join(_LINEAR)}, sigmoid, "
                     f"tanh, relu, leaky_relu and selu")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError(f"Fan in and fan out can not be computed for tensor with fewer than 2 dimensions (got shape "
                         f"{tensor.shape}); a bias has no fan: initialize it with uniform_ or zeros_")
    receptive_field = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-bound, bound), bound = gain sqrt(6 / (fan_in + fan_out))."""
    if _empty(tensor, "xavier_uniform_"):
        return tensor
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2), std = gain sqrt(2 / (fan_in + fan_out))."""
    if _empty(tensor, "xavier_normal_"):
        return tensor
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound), bound = sqrt(3) gain / sqrt(fan), gain = calculate_gain(nonlinearity, a). nn.Linear's own
    init is kaiming_uniform_(w, a=math.sqrt(5)): bound 1 / sqrt(in_features)."""
    if _empty(tensor, "kaiming_uniform_"):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2), std = gain / sqrt(fan), gain = calculate_gain(nonlinearity, a)."""
    if _empty(tensor, "kaiming_normal_"):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "zeros_", "ones_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]

_INSTEAD = {n: "minigrad's nn.init has " + ", ".join(__all__) for n in
            ("orthogonal_", "sparse_", "dirac_", "eye_")}


def __getattr__(name):
    raise not_offered(__name__, name, __all__, _INSTEAD)
