"""The standard normal CDF that exact GELU needs, fast in float32, and the logistic sigmoid that Sigmoid, SiLU and
softplus's gradient compute without overflow: the special functions minigrad has.

NumPy has no erf. float64 uses SciPy's ndtr (exact to rounding: the gradient checks run in float64);
float32 and float16 use a fitted erfc, computed block by block so that its temporaries stay in the
CPU's cache; CuPy has ndtr as one fused kernel.

Read next: ops/, the differentiable ops (its pointwise.py's Gelu calls normal_cdf; Sigmoid, and nn.py's Silu and
Softplus, call sigmoid).
"""
import numpy as np
from scipy.special import ndtr as _host_ndtr  # imported now, not at the first GELU: an import inside a
                                              # profiled step would show up as megabytes in tracemalloc

from .device import is_meta, on_gpu, xp_of
from .pool import _lend, empty, empty_like, made

try:
    from cupyx.scipy.special import ndtr as _gpu_ndtr
except Exception:  # no CuPy (or no CUDA library): the GPU branch is never taken then
    _gpu_ndtr = None


# Numerical Recipes' Chebyshev fit of erfc (Press et al., 2nd ed., section 6.2, erfcc): for z >= 0,
# erfc(z) = t exp(-z^2 + P(t)) with t = 1 / (1 + z/2), fractional error below 1.2e-7 for every z.
_ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
           0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def normal_cdf(array):
    """Phi(x) = P(N(0, 1) <= x) = (1 + erf(x / sqrt 2)) / 2, elementwise, in the input's dtype.

    float64 on the CPU: SciPy's ndtr, exact to rounding (the gradient checks use it). float32 and
    float16 on the CPU: the erfc fit above in float32, within 2.4e-7 of the true value everywhere (an
    ulp or two). Computing Phi(-|x|) first keeps the left tail relatively accurate, where 1 + erf(x)
    cancels to zero. On the GPU: CuPy's ndtr, one fused kernel.
    """
    if is_meta(array):  # no values: the array the branches below make, laid out and counted as they make it
        if array.dtype == np.float64:
            return made(array.astype(array.dtype))
        return empty(array.shape, np.float32, array).astype(array.dtype, copy=False)
    if on_gpu(array):
        return made(_gpu_ndtr(array)).astype(array.dtype, copy=False)
    if array.dtype == np.float64:
        return made(_host_ndtr(array))
    # Block by block, as a fused GPU kernel would: each block's temporaries stay in the CPU's cache, and
    # only the output is a full-size array. On a GPT's (8, 64, 512) float32 activations this took 1.6 ms when
    # written, against 4.8 ms for the same code on the whole array at once and 4-5 ms for (1 + SciPy's erf) / 2;
    # 0.6 ms now. Blocks of 64k numbers rather than 32k: fewer NumPy calls, a GPT step about 0.5 ms faster
    # (bench/NOTES.md, sixth session), and a block's arrays of 256 KiB still fit the 1 MiB L2 of one core.
    # The output counts (NOTE [every array an op makes], pool.py), as CuPy's does; the two blocks do not: they are
    # this host's way to the same array, 512 KiB whatever the size (as NumPy's own buffers are), and 'meta', which
    # predicts a GPU as well as this host, makes only what both make. The pool lends them (NOTE [host memory pool]).
    x = np.ascontiguousarray(array, dtype=np.float32).reshape(-1)
    out = empty(array.shape, np.float32, array)
    flat = out.reshape(-1)
    n = min(_BLOCK, x.size)
    scratch = [_lend((n,), np.float32, array) for _ in range(2)]
    for i in range(0, x.size, _BLOCK):
        block = x[i:i + _BLOCK]
        _normal_cdf_block(block, flat[i:i + _BLOCK], *(s[:block.size] for s in scratch))
    return out.astype(array.dtype, copy=False)


def sigmoid(x):
    """1 / (1 + exp(-x)), elementwise in x's dtype, from exp(-|x|), which neither overflows nor cancels: 1 / (1 + e)
    where x >= 0, e / (1 + e) elsewhere. Each array named and in place (NOTE [every array an op makes], pool.py)."""
    xp = xp_of(x)
    e = xp.abs(x, out=empty_like(x))
    xp.negative(e, out=e)
    xp.exp(e, out=e)                     # e = exp(-|x|)
    d = xp.add(e, 1, out=empty_like(x))  # 1 + e
    xp.divide(e, d, out=e)               # e / (1 + e), for x < 0
    xp.reciprocal(d, out=d)              # 1 / (1 + e), for x >= 0
    positive = made(x >= 0)  # named: alive, and counted, while `where` makes the result
    return made(xp.where(positive, d, e))


_BLOCK = 1 << 16  # float32 numbers per block: 256 KiB per temporary


def _normal_cdf_block(x, out, q, z2):
    f = np.float32
    t = out                                     # t lives in out's block until q *= t, its last use
    np.abs(x, out=t)
    t *= f(0.5 / np.sqrt(2))
    t += f(1)
    np.reciprocal(t, out=t)                     # t = 1 / (1 + z/2) with z = |x| / sqrt 2
    np.multiply(t, f(_ERFC_P[-1]), out=q)
    for c in _ERFC_P[-2:0:-1]:                  # P(t) by Horner, in place
        q += f(c)
        q *= t
    q += f(_ERFC_P[0])
    np.square(x, out=z2)
    z2 *= f(0.5)
    q -= z2                                     # -z^2 + P(t)
    np.exp(q, out=q)
    q *= t
    q *= f(0.5)                                 # q = erfc(z) / 2 = Phi(-|x|)
    np.multiply(q, f(-2), out=out)
    out += f(1)
    out *= x >= 0                               # 1 - 2q where x >= 0, else 0 (np.where is 20x slower)
    out += q                                    # Phi(x): 1 - q where x >= 0, q elsewhere
