"""Optimizers with torch.optim's names, defaults and update rules: SGD and AdamW.

Optimizer state (momentum buffers, Adam's moments) lives in `self.state[param]`, as PyTorch keeps
it, made by `_state_buffer` as arrays shaped like the parameter: the optimizer's share of training
memory. Every subclass's step() is wrapped (`__init_subclass__`) so that an active mg.profile
sees the optimizer before and after each step: no subclass can forget to tell the ledger.

Read next: profiler.py, the ledger that counts what these hold.
"""
import functools
import math

from . import backend
from .tensor import active_profiler, zero_grads


def _reported(step):
    """step(), bracketed by the active profile's on_step (NOTE [what a profile counts], profiler.py)."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        profiler = active_profiler()
        if profiler is None:
            return step(self, *args, **kwargs)
        profiler.on_step(self, done=False)
        out = step(self, *args, **kwargs)
        profiler.on_step(self, done=True)
        return out
    return wrapper


class Optimizer:
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in vars(cls):
            cls.step = _reported(cls.step)

    def __init__(self, params, defaults):
        self.params = list(params)
        if not self.params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        for p in self.params:
            if not p.requires_grad:
                raise ValueError(f"{type(self).__name__}: a parameter of shape {p.shape} does not require grad; "
                                 "pass only trainable parameters")
        self.defaults = defaults
        self.state = {}  # parameter -> {name: array}, made on the first step (as in PyTorch)

    def zero_grad(self, set_to_none=True):
        zero_grads(self.params, set_to_none)

    def _state_buffer(self, p, name):
        """A zero array shaped like parameter p, kept as optimizer state."""
        state = self.state.setdefault(p, {})
        if name not in state:
            state[name] = backend.xp_of(p._data).zeros_like(p._data)
        return state[name]

    def state_bytes(self):
        return sum(a.nbytes for s in self.state.values() for a in s.values() if hasattr(a, "nbytes"))

    def step(self):
        raise NotImplementedError


class SGD(Optimizer):
    """p -= lr * (g + weight_decay * p), with optional (PyTorch-style) momentum."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: lr, momentum and weight_decay must be >= 0, got {lr}, {momentum}, {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening = 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay, self.nesterov = weight_decay, nesterov

    def step(self):
        for p in self.params:
            if p.grad is None:
                continue
            d = p.grad._data
            if self.weight_decay:
                d = d + self.weight_decay * p._data
            if self.momentum:
                first = p not in self.state
                buf = self._state_buffer(p, "momentum_buffer")
                if first:
                    buf[...] = d
                else:
                    buf *= self.momentum
                    buf += (1 - self.dampening) * d
                d = d + self.momentum * buf if self.nesterov else buf
            p._data -= self.lr * d


class AdamW(Optimizer):
    """Adam with decoupled weight decay (Loshchilov and Hutter), PyTorch's defaults."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"AdamW: need lr, eps, weight_decay >= 0 and betas in [0, 1), got "
                             f"lr={lr}, betas={betas}, eps={eps}, weight_decay={weight_decay}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay

    def step(self):
        b1, b2 = self.betas
        for p in self.params:
            if p.grad is None:
                continue
            g = p.grad._data
            m = self._state_buffer(p, "exp_avg")
            v = self._state_buffer(p, "exp_avg_sq")
            state = self.state[p]
            state["step"] = t = state.get("step", 0) + 1  # per parameter, as in PyTorch
            bias1, bias2 = 1 - b1 ** t, 1 - b2 ** t
            p._data *= 1 - self.lr * self.weight_decay
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            denom = backend.xp_of(v).sqrt(v) / math.sqrt(bias2) + self.eps
            p._data -= (self.lr / bias1) * m / denom
