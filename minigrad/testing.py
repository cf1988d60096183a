"""gradcheck: compare the tape's gradients with central finite differences, and explain a mismatch.

Run it in float64: in float32 the difference quotient itself is only good to about 1e-3.
"""
import numpy as np

from . import backend
from .tensor import Tensor, no_grad


class GradcheckError(AssertionError):
    pass


def gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-5, name=None, seed=0):
    """Check d fn(*inputs) / d input for every input that requires grad.

    fn returns a tensor of any shape; it is reduced to a scalar by a fixed random projection
    (sum(out * r)), so every output element takes part. Raises GradcheckError naming the
    function, the argument, the index, the expected derivative (central difference) and the
    one backward gave. Returns True when all agree.
    """
    name = name or getattr(fn, "__name__", "fn")
    for i, t in enumerate(inputs):
        if isinstance(t, Tensor) and t.requires_grad and t.dtype != np.float64:
            raise GradcheckError(f"gradcheck({name}): input {i} is {t.dtype}; use float64 "
                                 "(in lower precision the finite difference itself is not accurate)")
    out = fn(*inputs)
    r = np.random.default_rng(seed).standard_normal(out.shape)
    r_dev = backend.to_device(r.astype(out.dtype), out.device)

    def projected():
        with no_grad():
            return float((fn(*inputs).data * r_dev).sum())

    for t in inputs:
        if isinstance(t, Tensor):
            t.grad = None
    out.backward(gradient=Tensor._from_array(r_dev))

    for i, t in enumerate(inputs):
        if not (isinstance(t, Tensor) and t.requires_grad):
            continue
        got = np.zeros(t.shape) if t.grad is None else backend.to_numpy(t.grad.data)
        flat = t.data.reshape(-1)  # a view: writing into it perturbs the input in place
        for j in range(flat.size):
            orig = flat[j].item()
            flat[j] = orig + eps
            plus = projected()
            flat[j] = orig - eps
            minus = projected()
            flat[j] = orig
            expected = (plus - minus) / (2 * eps)
            index = np.unravel_index(j, t.shape) if t.shape else ()
            value = got[index]
            if not abs(value - expected) <= atol + rtol * abs(expected):
                raise GradcheckError(f"gradcheck({name}): wrong gradient for input {i} (shape {t.shape}) at index "
                                     f"{tuple(int(k) for k in index)}: expected d loss / d x = {expected:.8g} from "
                                     f"the central difference, got {value:.8g} from backward. (The loss is "
                                     f"sum(out * g) for a fixed random g, the gradient backward received: d loss / "
                                     f"d x is g times d out / d x, summed over the outputs that x touches.)")
    return True
