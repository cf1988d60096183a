"""Checks of exercise 1: each op's gradient against central finite differences in float64, its output
against NumPy, and what it keeps: Exp and Tanh must keep only their output."""
import numpy as np

import minigrad as mg
from minigrad import backend
from minigrad.grading import Failed, Question, close, require, rng
from minigrad.tensor import apply
from minigrad.testing import GradcheckError, gradcheck

TITLE = "the backward of elementwise ops (exp, tanh, log, pow)"
LESSON = 5
HINTS = ("Each backward is one line: the incoming g times the op's derivative, element by element. First ask, for "
         "each op, which array forward saved: its input x, or its output y?",
         "Write each derivative in terms of the saved array: the derivative of exp(x) is exp(x) itself, the saved "
         "output; the derivative of tanh(x) is 1 - tanh(x)^2, and tanh(x) is the saved output; log and pow saved x. "
         "Return a 1-tuple: (gradient,).",
         "Exp: return (g * self.saved[0],). Tanh: (y,) = self.saved; return (g * (1 - y * y),). Log: divide g by the "
         "saved x. Pow: (x,) = self.saved and p = self.exponent; the derivative is p * x ** (p - 1).")
QUESTION = Question(4000, wrong={8000: "exp keeps its output y and log keeps its input, which is that same y: one "
                                       "array, saved by two records, is one buffer, and the ledger counts it once"})


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
        grads = y.grad_fn.backward(backend.to_device(np.ones_like(data), y.device))  # on the learner's device
        require(not (name == "Pow" and isinstance(grads, tuple) and len(grads) == 2),
                "Pow.backward returned 2 gradients: the exponent is a Python number kept on self (self.exponent), "
                "not an input of the record, so it gets no gradient: return a 1-tuple, x's")
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
