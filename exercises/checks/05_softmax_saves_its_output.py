"""Checks of exercise 5: each forward against a stable float64 reference (also at x near +-1000), each
backward against central finite differences in float64 along several dims, and what each record
keeps, measured with mg.profile: the output's bytes, the output's own buffer, nothing beside."""
import numpy as np

import minigrad as mg
from minigrad import backend
from minigrad.grading import Failed, Question, close, require, rng
from minigrad.tensor import apply
from minigrad.testing import GradcheckError, gradcheck

TITLE = "softmax and log_softmax, whose backward keeps only their output"
LESSON = 5
HINTS = ("Two things to find before any code: a shift of x along dim that leaves softmax unchanged and makes every "
         "exp at most 1; and, for backward, the sum over i of g_i y_i (delta_ij - y_j), split into its delta part "
         "and the rest.",
         "Subtract the max along dim (keepdims=True, so that it broadcasts back). The softmax backward is "
         "y * (g - S(g * y)) and the log_softmax backward g - exp(y) * S(g), with S the sum along dim, keepdims=True. "
         "Save y itself (self.save_for_backward(y)), not a copy and not x.",
         "forward: self.dim = dim; z = x - x.max(axis=dim, keepdims=True); softmax: e = np.exp(z); y = e / e.sum(axis"
         "=dim, keepdims=True); log_softmax: y = z - np.log(np.exp(z).sum(axis=dim, keepdims=True)); then "
         "self.save_for_backward(y); return y. backward: (y,) = self.saved and the formula above, returned as (dx,).")
QUESTION = Question(96, wrong={192: "that keeps the input too; the backward needs the output alone",
                               100663296: "that is the bytes; the question asks for MiB (2^20 bytes)"})

CASES = [((3, 5), -1), ((4, 3), 0), ((2, 4, 3), 1)]


def _log_softmax(x, dim):
    z = x - x.max(axis=dim, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=dim, keepdims=True))


def _softmax(x, dim):
    return np.exp(_log_softmax(x, dim))


def _kept(name, x, y, prof):
    """What y's record keeps, against the output's bytes: a message, or None when it is the output alone."""
    record = y.grad_fn
    kept = prof.peak_bytes("activations")
    beside = [f"self.{k} ({v.nbytes} bytes)" for k, v in vars(record).items()
              if k != "saved" and backend.is_array(v) and v.size > 1]
    if beside:
        return (f"{name} keeps {', '.join(beside)} outside save_for_backward: the profiler saw {kept} bytes, but "
                f"that array lives as long as the record does, unseen by the ledger and never freed by backward. "
                f"Save y with self.save_for_backward(y) and read it back from self.saved")
    if kept == 0:
        return (f"{name} kept 0 bytes for its backward: call self.save_for_backward(y) in forward and read y back "
                f"from self.saved in backward")
    out, inp = prof.buffer_id(y.data), prof.buffer_id(x.data)
    saved = [a for a in record.saved if backend.is_array(a)]
    if kept == y.data.nbytes and prof.activations_kept([record]) == {out: y.data.nbytes}:
        return None
    what = {out: "the output y", inp: "the input x"}
    kinds = [what.get(prof.buffer_id(a), "an array that is not the output's own buffer") for a in saved]
    why = []
    if "the input x" in kinds:
        why.append(f"The output goes on to the next op, which often keeps it too (one buffer, counted once); x "
                   f"would live on for {name} alone")
    if "an array that is not the output's own buffer" in kinds:
        why.append("A copy of y, or anything computed from it (the sum), is another buffer: save y itself")
    parts = "; ".join(f"{k}, {a.nbytes} bytes" for k, a in zip(kinds, saved))
    return (f"{name} kept {kept} bytes for its backward ({parts}) "
            f"against {y.data.nbytes} bytes for the output alone, and the derivative needs nothing else: save y only. "
            + ". ".join(why))


def check(ex):
    r = rng(5)
    for name, cls, reference in (("Softmax", ex.Softmax, _softmax), ("LogSoftmax", ex.LogSoftmax, _log_softmax)):
        for shape, dim in CASES:
            data = r.standard_normal(shape)
            x = mg.tensor(data, requires_grad=True)
            y = apply(cls, x, dim=dim)
            where = f" (x of shape {shape}, dim={dim})"
            close(f"{name}.forward", y, reference(data, dim), where=where)
            grads = y.grad_fn.backward(backend.to_device(np.ones(shape), y.device))
            require(isinstance(grads, tuple) and len(grads) == 1,
                    f"{name}.backward must return a tuple with one gradient, (dx,); got {type(grads).__name__}"
                    + (f" of length {len(grads)}" if isinstance(grads, tuple) else ""))
            try:
                gradcheck(lambda t: apply(cls, t, dim=dim), [x], name=f"{name}.backward{where}")
            except GradcheckError as e:
                raise Failed(str(e)) from None
        data = np.concatenate([r.standard_normal((2, 6)) + 1000, r.standard_normal((2, 6)) - 1000])
        y = backend.to_numpy(apply(cls, mg.tensor(data), dim=-1).data)
        bad = ~np.isfinite(y)
        if bad.any():
            i = tuple(int(k) for k in np.argwhere(bad)[0])
            raise Failed(f"{name}.forward of x near {'+' if data[i] > 0 else '-'}1000: got {y[i]} at index {i}: "
                         f"exp(1000) overflows to inf and exp(-1000) is 0. Subtract the max along dim before exp "
                         f"(the shift cancels)")
        close(f"{name}.forward of x near +-1000", y, reference(data, -1))
        if name == "LogSoftmax":  # confident logits: softmax underflows to 0 where log_softmax is finite
            spread = np.array([[0.0, -1000.0, -50.0]])
            got = backend.to_numpy(apply(cls, mg.tensor(spread), dim=-1).data)
            if not np.all(np.isfinite(got)):
                raise Failed(f"LogSoftmax.forward of {spread.tolist()}: got {got.tolist()}; expected "
                             f"{_log_softmax(spread, -1).tolist()}. log(softmax(x)) underflows to log(0) = -inf "
                             f"where exp(x - max) is below 1e-308: compute (x - m) - log(sum(exp(x - m))) directly")
        x = mg.tensor(r.standard_normal((64, 64)), requires_grad=True)
        with mg.profile() as prof:
            y = apply(cls, x, dim=-1)
            wrong = _kept(name, x, y, prof)
        if wrong:
            raise Failed(wrong)
