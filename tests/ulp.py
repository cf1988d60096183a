"""Units in the last place, for judging a 2-byte result (float16, bfloat16) element by element against PyTorch's
result and the float64 truth of the same 2-byte inputs ([trust3]).

A value is right when it is within 2 ulps of PyTorch's, or within 1 ulp of the truth, or no farther from the truth
than PyTorch's. Beyond that, over many values, a result rounded once from a wider computation is correctly rounded
(the truth rounded to the dtype) in nearly every element and has no bias: its mean signed error, in ulps of the
truth, is near 0. A result rounded twice (a product rounded, then the sum with a bias rounded again) shows both: a
smaller correctly rounded share and, often, a bias. `judge` measures the three; the tests set the bounds.
"""
import numpy as np
import ml_dtypes

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
MANTISSA = {"float16": 10, "bfloat16": 7}      # stored fraction bits
MIN_EXP = {"float16": -14, "bfloat16": -126}   # the exponent of the smallest normal number


def ulp_of(truth, dtype):
    """The spacing of `dtype`'s numbers at each value of `truth` (float64), subnormals included."""
    t = np.abs(np.asarray(truth, np.float64))
    e = np.floor(np.log2(np.where(t > 0, t, 1.0)))
    return 2.0 ** (np.maximum(e, MIN_EXP[dtype]) - MANTISSA[dtype])


def ulps_apart(a, b, dtype):
    """How many representable `dtype` numbers lie between a and b (both of that dtype), element by element."""
    def key(x):
        i = np.asarray(x, DTYPES[dtype]).view(np.int16).astype(np.int32)
        return np.where(i < 0, -(i & 0x7FFF), i)
    return np.abs(key(a) - key(b))


def judge(got, theirs, truth, dtype):
    """(share of elements judged wrong, correctly rounded share, bias) of `got`
    (minigrad's, in `dtype`) against `theirs` (PyTorch's, in `dtype`) and `truth` (float64). The bias is the mean
    error in ulps of the truth, signed away from zero (-0.1: results a tenth of an ulp too small in magnitude, on
    average); a result rounded once to nearest has a bias near 0. Results equal to PyTorch's count as right; the
    correctly rounded share and the bias are over the finite truths only."""
    got = np.asarray(got, DTYPES[dtype]).ravel()
    theirs = np.asarray(theirs, DTYPES[dtype]).ravel()
    truth = np.asarray(truth, np.float64).ravel()
    g, t = got.astype(np.float64), theirs.astype(np.float64)
    finite = np.isfinite(truth) & (np.abs(truth) < float(ml_dtypes.finfo(DTYPES[dtype]).max))
    u = ulp_of(truth, dtype)
    with np.errstate(invalid="ignore"):
        err, their_err = np.abs(g - truth), np.abs(t - truth)
        right = ((got == theirs) | (np.isnan(g) & np.isnan(t)) | (ulps_apart(got, theirs, dtype) <= 2)
                 | (err <= u) | (err <= their_err))
        rounded = np.asarray(truth, DTYPES[dtype]).astype(np.float64)
        correct = (g == rounded)[finite].mean() if finite.any() else 1.0
        bias = ((g - truth) * np.sign(truth) / u)[finite].mean() if finite.any() else 0.0
    return float(1.0 - right.mean()), float(correct), float(bias)
