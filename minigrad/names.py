"""PyTorch's names, where minigrad has the thing under another name or not at all.

`inference_mode` is `no_grad` by PyTorch's other name (with `is_inference_mode_enabled`), and `not_offered` is what a missing name says: each of
`mg`, `mg.nn`, `mg.optim`, `mg.functional` (and `nn.init`, `optim.lr_scheduler`, `mg.utils`) ends with a module
`__getattr__` that raises it, naming the nearest name there is (difflib, as the command's model names do) or what
to use instead, from a table beside that module's names, so that `nn.Conv2d` says why there is none. A Tensor's
missing attribute says the same, from the table beside its other names (tensor/names.py, whose `nearest` is the
did-you-mean of both): `x.einsum` says how to write it.

Read next: functional.py.
"""
import contextlib
import os

from .tensor import Tensor, enable_grad, no_grad
from .tensor.names import advice as tensor_advice, nearest


class inference_mode(contextlib.ContextDecorator):
    """torch.inference_mode(mode=True): no recording inside, as no_grad (a context manager or a decorator, with
    or without parentheses); inference_mode(False) records again inside, as enable_grad (PyTorch's too).
    PyTorch's inference tensors, which refuse to enter autograd later, have no counterpart: a tensor made here is
    a plain tensor that does not require grad."""

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):
            return cls()(mode)  # @mg.inference_mode, bare: Python passed the function itself
        return super().__new__(cls)

    def __init__(self, mode=True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode: mode must be True or False, got {mode!r}")
        self.mode, self._guards = mode, []  # a stack: the same object may be entered again inside itself

    _depth = 0  # inference_mode(True) blocks open now, reset by an inner inference_mode(False)

    def __enter__(self):
        # PyTorch's InferenceMode(enabled) sets grad mode to `not enabled`: inference_mode(False) records again,
        # even inside no_grad, and is_inference_mode_enabled() is False inside it
        guard = no_grad() if self.mode else enable_grad()
        guard.__enter__()
        self._guards.append((guard, inference_mode._depth))
        inference_mode._depth = inference_mode._depth + 1 if self.mode else 0
        return self

    def __exit__(self, *exc):
        guard, inference_mode._depth = self._guards.pop()
        guard.__exit__(*exc)


def is_inference_mode_enabled():
    """torch.is_inference_mode_enabled(): True inside an inference_mode() block (and not only inside no_grad)."""
    return inference_mode._depth > 0


def not_offered(module, name, offered, instead=None, package_dir=None):
    """The AttributeError for `module.name`, a name PyTorch has (or a typo): it says what to use instead where
    `instead` (a dict, name -> advice) knows, else the nearest of `offered` (case aside, then difflib), or a
    Tensor method of that name, or a submodule of package_dir that is not imported yet. The caller raises it."""
    msg = f"module {module!r} has no attribute {name!r}"
    if name.startswith("__"):  # Python's and tools' probes (__wrapped__, __array__, ...): no advice, no cost
        return AttributeError(msg)
    offered = sorted(set(offered))
    if instead and name in instead:
        return AttributeError(f"{msg}: {instead[name]}")
    if package_dir and os.path.exists(os.path.join(package_dir, name + ".py")):
        return AttributeError(f"{msg} yet: it is a module the package does not load on import; "
                              f"write `import {module}.{name}` first")
    if name.lower() not in {n.lower() for n in offered} and not name.startswith("_") and \
            callable(getattr(Tensor, name, None)):
        return AttributeError(f"{msg}; minigrad has it as a Tensor method: x.{name}(...)")
    said = tensor_advice(name) if module == "minigrad" else None  # torch.einsum(...), torch.roll(x, ...): as x.einsum
    if said is not None:
        return AttributeError(f"{msg}, nor has a Tensor: {said}")
    close = nearest(name, offered)
    if close:
        return AttributeError(f"{msg}; did you mean {' or '.join(repr(n) for n in close)}?")
    return AttributeError(f"{msg}, and nothing close; it has: {', '.join(n for n in offered if not n.startswith('_'))}")
