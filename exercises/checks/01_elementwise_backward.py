"""Checks of exercise 1: each op's gradient against central finite differences in float64, its output
against NumPy, and what it keeps: Exp and Tanh must keep only their output."""
import numpy as np

import minigrad as mg
from minigrad.grading import Failed, close, require, rng
from minigrad.tensor import apply
from minigrad.testing import GradcheckError, gradcheck

TITLE = "the backward of elementwise ops (exp, tanh, log, pow)"


def check(ex):
    r = rng(1)
    cases = [("Exp", ex.Exp, {}, r.standard_normal((3, 4)), np.exp),
             ("Tanh", ex.Tanh, {}, r.standard_normal((3, 4)) * 2, np.tanh),
             ("Log", ex.Log, {}, r.uniform(0.5, 3, (3, 4)), np.log),
             ("Pow", ex.Pow, {"exponent": 3}, r.standard_normal((3, 4)), lambda a: a ** 3),
             ("Pow", ex.Pow, {"exponent": -0.5}, r.uniform(0.5, 3, (2, 5)), lambda a: a ** -0.5)]
    for name, cls, attrs, data, reference in cases:
        x = mg.tensor(data, dtype="float64", requires_grad=True)
        y = apply(cls, x, **attrs)
        close(f"{name}.forward", y, reference(data))
        grads = y.grad_fn.backward(np.ones_like(data))
        require(isinstance(grads, tuple) and len(grads) == 1,
                f"{name}.backward must return a tuple with one gradient per input, e.g. (g * ...,); "
                f"got {type(grads).__name__}" + (f" of length {len(grads)}" if isinstance(grads, tuple) else ""))
        try:
            gradcheck(lambda t: apply(cls, t, **attrs), [x], name=f"{name}.backward{attrs or ''}")
        except GradcheckError as e:
            raise Failed(str(e)) from None
    for name, cls in (("Exp", ex.Exp), ("Tanh", ex.Tanh)):
        x = mg.tensor(r.standard_normal((64, 64)), dtype="float64", requires_grad=True)
        with mg.profile() as prof:
            y = apply(cls, x)
        kept = prof.peak_bytes("activations")
        require(kept == y.data.nbytes, f"{name} kept {kept} bytes for its backward; its output alone is "
                f"{y.data.nbytes} bytes: the derivative needs nothing else")
