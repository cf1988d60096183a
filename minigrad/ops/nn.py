"""The fused neural-net ops: softmax, log_softmax, softplus, silu, layer_norm, dropout (with the mask it draws) and
scaled dot-product attention. Each is one op, rather than a composition, for what it keeps for backward or for speed;
the reason sits beside each.

Read next: minigrad/tensor/modes.py, then tape.py and tensor.py: the tape, which runs these ops, records them
and walks them backwards.
"""
import copy
import math

import numpy as np

from ..backend import (accumulator, broadcast_to, device_of, empty_like, in_float32, made, max_rows, mean_rows, narrow,
                       pooled, reduce_sum, sum_leading, sum_rows, to_device, widen, xp_for, xp_of)
from ..backend.random import generator, get_rng_state
from ..backend.special import sigmoid
from .base import LEARNED, Op, keepdim_shape, learned, normalize_dim, unbroadcast


def _max(x, axis):
    """x.max(axis, keepdims=True); along rows (NOTE [along rows], backend/rows.py) when axis is the last one. Zeros
    for an empty x, whose softmax is empty (NumPy has no max of nothing)."""
    if not x.size:
        return xp_of(x).zeros(keepdim_shape(x.shape, axis), x.dtype)
    return max_rows(x) if axis == (x.ndim - 1,) else x.max(axis=axis, keepdims=True)


def _sum(x, axis):
    """x.sum(axis, keepdims=True); along rows (NOTE [along rows], backend/rows.py) when axis are the last ones."""
    if axis == tuple(range(x.ndim - len(axis), x.ndim)):
        return sum_rows(x, len(axis))
    return reduce_sum(x, axis, keepdims=True)


# NOTE [a 2-byte softmax]: softmax and log_softmax of float16 or bfloat16 run in float32 and are rounded once, as
# PyTorch's kernels: in the 2-byte dtype, x - max is rounded before exp, an error that exp turns into a relative one
# of the small probabilities (bfloat16: 8 units of their last place, PyTorch's half a unit). What the record saves
# stays in the 2-byte dtype (the ledger's bytes); the backward takes it and g up to float32 and rounds once too.
# Both run a block of rows at a time (backend.in_float32, NOTE [2-byte rows] in backend/rows.py): the float32
# copies of a block, not of the whole input (the attention's scores, a language model's logits).


class Softmax(Op):
    """y = exp(x - max) / sum; dx = y (g - sum(g y)) along dim. keep_input: also keep x, which backward never
    reads, to emulate PyTorch before 1.11, whose softmax backward took the input too (F.softmax)."""
    name = "softmax"
    flops_per_element = (5, (4,))  # max, -, exp, sum, /;  g*y, sum, y*s, -

    def forward(self, x, dim, keep_input=False):
        if LEARNED and (mine := learned("Softmax.forward", self, x, dim, keep_input)) is not NotImplemented:
            return mine  # NOTE [learner's pieces]
        self.axis = normalize_dim(self.name, dim, x.ndim, x.shape)
        y = in_float32(self._softmax, self.axis, x)  # NOTE [a 2-byte softmax]
        self.save_for_backward(*((y, x) if keep_input else (y,)))  # x: kept, never read (older software held it)
        return y

    def _softmax(self, x):
        y = xp_of(x).subtract(x, _max(x, self.axis), out=empty_like(x))
        xp_of(y).exp(y, out=y)
        return xp_of(y).divide(y, _sum(y, self.axis), out=y)

    def backward(self, g):
        if LEARNED and (mine := learned("Softmax.backward", self, g)) is not NotImplemented:  # NOTE [learner's pieces]
            return mine
        return (in_float32(self._grad, self.axis, self.saved[0], g),)

    def _grad(self, y, g):
        gx = xp_of(y).multiply(g, y, out=empty_like(y))
        xp_of(y).subtract(g, _sum(gx, self.axis), out=gx)
        return xp_of(y).multiply(gx, y, out=gx)  # y (g - sum(g y)), in the one array


class LogSoftmax(Op):
    """y = x - logsumexp(x); dx = g - softmax(x) sum(g) along dim."""
    name = "log_softmax"
    flops_per_element = (5, (4,))  # max, -, exp, sum, -;  exp, sum, *, -

    def forward(self, x, dim):
        if LEARNED and (mine := learned("LogSoftmax.forward", self, x, dim)) is not NotImplemented:
            return mine  # NOTE [learner's pieces]
        self.axis = normalize_dim(self.name, dim, x.ndim, x.shape)
        y = in_float32(self._log_softmax, self.axis, x)  # NOTE [a 2-byte softmax]
        self.save_for_backward(y)
        return y

    def _log_softmax(self, x):
        xp = xp_of(x)
        y = xp.subtract(x, _max(x, self.axis), out=empty_like(x))  # NOTE [host memory pool]
        with np.errstate(divide="ignore"):  # along an empty dim: log 0, subtracted from no element
            y -= xp.log(_sum(xp.exp(y, out=empty_like(y)), self.axis))  # x - max - log sum exp
        return y

    def backward(self, g):
        if LEARNED and (mine := learned("LogSoftmax.backward", self, g)) is not NotImplemented:
            return mine  # NOTE [learner's pieces]
        return (in_float32(self._grad, self.axis, self.saved[0], g),)

    def _grad(self, y, g):
        xp = xp_of(y)
        gx = xp.exp(y, out=empty_like(y))
        gx *= _sum(g, self.axis)
        return xp.subtract(g, gx, out=gx)  # g - softmax(x) sum(g)


# NOTE [a stable softplus]: softplus(x) = log(1 + exp(x)), computed as written, loses what it computes at both ends.
# 1 + exp(x) rounds to 1 once exp(x) is below half an ulp of 1, so the result was 0 where the truth is exp(x):
# softplus(-20) in float32 (2.06e-9), softplus(-40) in float64 (4.25e-18); and exp overflows before the threshold
# (20) takes over in float16, whose exp(12) is inf: softplus(15) was inf. Each op rounded in a 2-byte dtype on top:
# bfloat16's softplus(-6) was 0 (0.00247), and a third of all values farther from the truth than PyTorch's.
# log1p(exp(-|x|)) + max(x, 0) neither cancels nor overflows (the form of PyTorch's log_sigmoid kernel; its
# softplus kernel's log1p(exp(x)) is the same where exp(x) does not overflow), and a 2-byte x runs in float32 and is
# rounded once (NOTE [a 2-byte GELU], pointwise.py). binary_cross_entropy_with_logits takes its softplus(-x) from
# here too. SiLU likewise: x * sigmoid(x) as two ops rounded sigmoid first (in bfloat16 a fifth of the outputs not
# correctly rounded, 3% of the gradients farther from the truth than PyTorch's), and kept both x and sigmoid(x);
# PyTorch's kernel computes in float32 and keeps x alone, as Silu does.


def softplus(x):
    """log(1 + exp(x)) as log1p(exp(-|x|)) + max(x, 0), in x's dtype, in arrays of its own (NOTE [a stable
    softplus])."""
    xp = xp_of(x)
    y = xp.abs(x, out=empty_like(x))
    xp.negative(y, out=y)
    xp.exp(y, out=y)
    xp.log1p(y, out=y)
    y += made(xp.maximum(x, 0))
    return y


class Softplus(Op):
    """y = log(1 + exp(beta x)) / beta, and x itself where beta x > threshold, as PyTorch's; dy = sigmoid(beta x)
    (1 above the threshold). Computed as log1p(exp(-|beta x|)) + max(beta x, 0) (NOTE [a stable softplus])."""
    name = "softplus"
    flops_per_element = (8, (7,))  # beta x, |.|, -, exp, log1p, max, +, / beta;  beta x, sigmoid (5), * g

    def forward(self, x, beta=1.0, threshold=20.0):
        self.beta, self.threshold = beta, threshold
        self.save_for_backward(x)  # the input, as PyTorch's softplus_backward takes
        return in_float32(self._softplus, (), x)  # NOTE [a stable softplus]

    def _softplus(self, x):
        bx = xp_of(x).multiply(x, self.beta, out=empty_like(x))  # each array named: NOTE [every array an op makes]
        above = made(bx > self.threshold)                         # (backend/pool.py)
        y = softplus(bx)
        if self.beta != 1:
            y /= self.beta
        return made(xp_of(x).where(above, x, y))

    def backward(self, g):
        return (in_float32(self._grad, (), self.saved[0], g),)

    def _grad(self, x, g):
        bx = xp_of(x).multiply(x, self.beta, out=empty_like(x))
        above = made(bx > self.threshold)
        d = sigmoid(bx)
        d *= g
        return made(xp_of(x).where(above, g, d))


class Silu(Op):
    """silu(x) = x sigmoid(x); d silu = s (1 + x (1 - s)), s = sigmoid(x), from x alone (NOTE [a stable
    softplus])."""
    name = "silu"
    flops_per_element = (6, (10,))  # sigmoid (|x|, -, exp, +, /), * x;  sigmoid, 1 - s, * x, + 1, * s, * g

    def forward(self, x):
        self.save_for_backward(x)
        return in_float32(self._silu, (), x)

    @staticmethod
    def _silu(x):
        y = sigmoid(x)
        y *= x
        return y

    def backward(self, g):
        return (in_float32(self._grad, (), self.saved[0], g),)

    @staticmethod
    def _grad(x, g):
        s = sigmoid(x)
        d = xp_of(x).subtract(1, s, out=empty_like(x))
        d *= x
        d += 1
        d *= s
        d *= g
        return d


class BinaryCrossEntropyWithLogits(Op):
    """loss = w ((1 - y) softplus(x) + pw y softplus(-x)), which is -w [pw y log sigmoid(x) + (1 - y) log(1 -
    sigmoid(x))]: two terms >= 0 (y in [0, 1]) that never cancel. dx = w ((1 - y) sigmoid(x) - pw y sigmoid(-x)),
    dy = -w x (given pw: w (pw softplus(-x) - softplus(x))), as PyTorch's backward; the weight w and pos_weight pw,
    optional inputs after x and y, get none (functional.py detaches them)."""
    name = "binary_cross_entropy_with_logits"
    flops_per_element = (17, (17, 3))  # -x, 2 softplus (6 each), 1 - y, *, pw y, *, +, * w; 2 sigmoid (5 each),
    #                                    1 - y, *, -x, y *, * pw, -, * g, * w; dy: -x, * g, * w

    def forward(self, x, y, *weights, has_weight=False):
        self.has_weight = has_weight
        self.save_for_backward(x, y, *weights)  # inputs all: nothing new is kept
        return self._run(self._loss, (x, y), weights)  # NOTE [a stable softplus]

    def _run(self, f, arrays, weights):
        """f(*arrays, w, pw) (None for one not given), in float32 for 2-byte arrays: w and pw broadcast to the first
        array's shape, so that in_float32 takes the same rows of each."""
        n = len(arrays)

        def call(*wide):
            ws = list(wide[n:])
            w = ws.pop(0) if self.has_weight else None
            return f(*wide[:n], w, ws[0] if ws else None)
        return in_float32(call, (), *arrays, *(broadcast_to(a, arrays[0].shape) for a in weights))

    @staticmethod
    def _loss(x, y, w, pw):
        xp = xp_of(x)
        loss, t = softplus(x), xp.subtract(1, y, out=empty_like(x))
        loss *= t                                  # (1 - y) softplus(x)
        xp.negative(x, out=t)
        other = softplus(t)
        other *= y if pw is None else xp.multiply(y, pw, out=t)  # pw y softplus(-x)
        loss += other
        return loss if w is None else xp.multiply(loss, w, out=loss)

    def backward(self, g):
        x, y, *weights = self.saved
        nx, ny = self.needs_input_grad[:2]
        grads = [self._run(f, (g, x, y), weights) if need else None for f, need in ((self._dx, nx), (self._dy, ny))]
        return (*grads, *(None for _ in weights))

    @staticmethod
    def _dx(g, x, y, w, pw):
        xp = xp_of(x)
        d, t = sigmoid(x), xp.subtract(1, y, out=empty_like(x))
        d *= t                                 # (1 - y) sigmoid(x)
        other = sigmoid(xp.negative(x, out=t))
        other *= y if pw is None else xp.multiply(y, pw, out=t)
        d -= other                             # - pw y sigmoid(-x)
        d *= g
        return d if w is None else xp.multiply(d, w, out=d)

    @staticmethod
    def _dy(g, x, y, w, pw):
        xp = xp_of(x)
        if pw is None:
            d = xp.negative(x, out=empty_like(x))
        else:
            d = softplus(xp.negative(x, out=empty_like(x)))
            d *= pw
            d -= softplus(x)
        d *= g
        return d if w is None else xp.multiply(d, w, out=d)


class LayerNorm(Op):
    """y = (x - mean) / sqrt(var + eps) * w + b over the last dims; saves x_hat and 1/std."""
    name = "layer_norm"

    def forward(self, x, *weight_bias, ndim=1, eps=1e-5, has_weight=True):
        xp = xp_of(x)
        weight = weight_bias[0] if has_weight and weight_bias else None
        bias = weight_bias[-1] if len(weight_bias) > has_weight else None
        self.axes = tuple(range(x.ndim - ndim, x.ndim))
        xw = widen(x)  # NOTE [a 2-byte layer_norm]
        # NOTE [host memory pool] (backend/pool.py): x-hat and y are new arrays from the pool, the rest in place
        xhat = xp.subtract(xw, mean_rows(xw, len(self.axes)), out=empty_like(xw))
        var = mean_rows(xp.square(xhat, out=empty_like(xw)), len(self.axes))
        rstd = 1 / xp.sqrt(var + eps)
        xhat *= rstd
        self.has_weight = weight is not None
        saved = narrow(xhat, x.dtype)
        self.save_for_backward(saved, narrow(rstd, x.dtype), weight)
        if weight is None:
            return saved if bias is None else narrow(pooled(xp.add, xhat, bias), x.dtype)
        y = xp.multiply(xhat, weight, out=empty_like(xw))
        if bias is not None:
            y += bias
        return narrow(y, x.dtype)

    # NOTE [a 2-byte layer_norm]: float16 and bfloat16 are normalized in float32 and rounded once, as PyTorch's
    # kernels do: a row's mean rounded to 2 bytes before x - mean is off by up to half its last place, which the
    # division by the row's spread scales up (a bfloat16 row of mean 3 and spread 0.03 was 32 units of bfloat16's
    # precision off). What the record saves stays in the input's dtype (x-hat, 1/std: the ledger's bytes, as
    # before); the backward takes them and g up to float32, and rounds the gradients once.
    def backward(self, g):
        acc = accumulator(g.dtype)
        if acc is None:
            return self._backward(g, *self.saved)
        up = (lambda a: None if a is None else widen(a))
        return tuple(None if d is None else narrow(d, g.dtype) for d in self._backward(*map(up, (g, *self.saved))))

    def _backward(self, g, xhat, rstd, w):
        needs = self.needs_input_grad
        grads = [None]
        xp, t = xp_of(g), empty_like(xhat)  # NOTE [host memory pool] (backend/pool.py)
        if needs[0]:  # rstd (gxhat - mean(gxhat) - xhat mean(gxhat xhat)), with gxhat = g w
            gxhat = pooled(xp.multiply, g, w) if w is not None else g
            m = mean_rows(xp.multiply(gxhat, xhat, out=t), len(self.axes))
            xp.multiply(xhat, m, out=t)
            gx = xp.subtract(gxhat, mean_rows(gxhat, len(self.axes)), out=empty_like(t))
            gx -= t
            gx *= rstd
            grads[0] = gx
        if self.has_weight:
            grads.append(sum_leading(xp.multiply(g, xhat, out=t), len(self.axes)) if needs[1] else None)
        if len(needs) > len(grads):  # a bias was given
            grads.append(sum_leading(g, len(self.axes)) if needs[-1] else None)
        return tuple(grads)

    def flops(self, inputs, out):
        return {self.name: 7 * out.size}  # mean, -, square, mean, * rstd, * w, + b (per-row sqrt ignored)

    def backward_flops(self, grad, input_grads):
        n = grad.size
        per_input = (8, 2, 1)  # x: g*w, two means, two products, two subtractions, * rstd; w: g*xhat, sum; b: sum
        kinds = (0,) + ((1,) if self.has_weight else ()) + (2,)
        return {self.name: sum(per_input[k] * n for k, gi in zip(kinds, input_grads) if gi is not None)}


class Dropout(Op):
    """y = x * mask * scale and dx = g * mask * scale, scale = 1/(1-p), with a bool mask drawn by the caller
    (draw_keep): 1 byte per element saved, as PyTorch's native_dropout keeps. A float mask (F.dropout's
    mask_dtype, to emulate frameworks that kept one) has the scale folded in: y = x * mask, dx = g * mask."""
    name = "dropout"
    flops_per_element = (2, (2,))             # x * mask, * scale;  g * mask, * scale
    flops_per_element_float_mask = (1, (1,))  # x * mask;  g * mask

    def forward(self, x, mask, p=0.5):
        if mask.dtype != bool:
            self.flops_per_element = self.flops_per_element_float_mask
        self.scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
        self.save_for_backward(mask)
        return self._apply(x, mask)

    def backward(self, g):
        return (self._apply(g, self.saved[0]),)

    def _apply(self, a, mask):
        if mask.dtype != bool:
            return (a * mask).astype(a.dtype, copy=False)  # a mask of another dtype must not promote the result
        out = a * mask
        out *= out.dtype.type(self.scale)  # in place: a fresh array, and one temporary fewer
        return out


def draw_keep(shape, p, device, rng=None):
    """Which elements dropout keeps (each with probability 1 - p), as a bool array on `device`. Drawn on the
    host from minigrad's generator (or `rng`, a private copy of it): the same seed gives the same mask on
    cpu and cuda, in F.dropout and inside scaled_dot_product_attention alike."""
    if device == "meta":  # shapes only: nothing is drawn, and the stream stays where it is
        return xp_for(device).empty(shape, dtype=bool)
    rng, keep = generator() if rng is None else rng, np.empty(shape, bool)
    flat = keep.reshape(-1)  # drawn 8192 numbers at a time: the same stream as one draw of them all, without its
    for i in range(0, flat.size, 8192):  # float64s (8 bytes an element, no GPU's; 2x a float32 input, unseen)
        np.greater_equal(rng.random(min(8192, flat.size - i)), p, out=flat[i:i + 8192])
    return to_device(keep, device)


def _private_generator(state):
    """A generator of its own, at `state`: what it draws leaves minigrad's stream where it is."""
    rng = copy.deepcopy(generator())
    rng.bit_generator.state = state
    return rng


# NOTE [fused attention]: an eager attention (q @ k^T * scale, mask, softmax, dropout, @ v) keeps the
# (..., L, S) probabilities (and the dropout mask) for backward: O(L * S) per head, the largest activation of
# a transformer at long sequences. Fused kernels (FlashAttention, memory-efficient attention) keep q, k, v,
# the output and one log-sum-exp per query row, O(L), and recompute the scores in backward:
# P = exp(scores - lse) needs no second max or sum. Their dropout mask is not kept either: backward draws
# it again from the generator state the forward started from. This op does the same on whole arrays; its
# (..., L, S) temporaries live only inside forward and inside backward (a real kernel tiles them away), so
# the ledger sees O(L) per row, what PyTorch keeps. Its backward, as FlashAttention-2's:
#   dv = P_d^T g     dP_d = g v^T     dP = dP_d * dropout     D = rowsum(P * dP) (= rowsum(g * out))
#   dS = P * (dP - D)     dq = dS k * scale     dk = dS^T q * scale     d attn_mask = dS (a float mask)
# FLOPs, with B the broadcast batch (every leading dim) and n = B L S scores:
#   forward   matmul 2 B L S E (q k^T) + 2 B L S Ev (P v); per score 6 (* scale, max, -, exp, sum, /),
#             +1 with a float mask (an add; a bool mask or is_causal selects, which counts 0, as `where`),
#             +2 with dropout (* keep, * 1/(1-p)); per row 2 (log, +) for the log-sum-exp
#   backward  matmul: the scores again 2 B L S E, then dv 2 B L S Ev, dP 2 B L S Ev, dq 2 B L S E and
#             dk 2 B L S E, each only when needed; per score 3 to recompute P (* scale, - lse, exp; +1 with
#             a float mask), 2 per dropout applied (to P for dv, to dP), 5 for D and dS (*, sum, -, *, * scale);
#             and the adds of summing a broadcast input's gradient back to its shape. D is rowsum(P * dP), from
#             the float32 P, not rowsum(g * out): a 2-byte out, rounded, made D's error dS's, whose dP - D
#             cancels (bfloat16's dq 3.4% wrong, PyTorch's 0%); out is kept all the same, as PyTorch's kernel keeps it.
# The recompute runs inside backward, as a fused kernel's does: it counts in phase 'backward'.
class ScaledDotProductAttention(Op):
    """out = dropout(softmax(q k^T * scale + mask)) v, fused (NOTE [fused attention]): keeps q, k, v, out and
    each row's log-sum-exp; backward recomputes the probabilities P = exp(q k^T * scale + mask - lse)."""
    name = "sdpa"
    same_dtype = False  # a bool attn_mask goes with float q, k, v: F.scaled_dot_product_attention checks them

    def forward(self, q, k, v, *attn_mask, dropout_p=0.0, is_causal=False, scale=None):
        mask = attn_mask[0] if attn_mask else None
        L, S = q.shape[-2], k.shape[-2]
        self.batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        self.dims = L, S, q.shape[-1], v.shape[-1]  # L, S, E, Ev
        # E = 0: every score is an empty sum, 0, whatever the scale; 1, not 1/sqrt(0), keeps 0 * scale from being nan
        self.scale = 1 / math.sqrt(q.shape[-1] or 1) if scale is None else scale
        self.p, self.is_causal = dropout_p, is_causal
        self.float_mask = mask is not None and mask.dtype != bool
        # float16 accumulates in float32, as PyTorch's kernels do; the log-sum-exp is kept in float32 too
        acc = accumulator(q.dtype)  # float16, bfloat16: float32 (NOTE [2-byte sums])
        self.acc = q.dtype if acc is None else acc
        self.rng_state = get_rng_state() if dropout_p > 0 else None  # before the draw: backward's replay
        s = self._scores(q, k, mask)                                    # (..., L, S)
        xp = xp_of(s)
        m = s.max(axis=-1, keepdims=True) if S else xp.full(s.shape[:-1] + (1,), -np.inf, s.dtype)  # S = 0: no key
        m[m == -np.inf] = 0  # a row that attends to nothing: exp(-inf - 0) = 0, where -inf - -inf would be nan
        s -= m
        P = xp.exp(s, out=s)  # in place: one (..., L, S) array at a time
        total = P.sum(axis=-1, keepdims=True)
        attends = total > 0
        total[~attends] = 1  # ... and its output is 0, as PyTorch's
        P /= total
        # +inf where a row attends to nothing: backward's exp(scores - lse) is then exp(-inf) = 0 too
        lse = xp.where(attends, m + xp.log(total), np.inf)[..., 0]      # (..., L)
        if dropout_p > 0:
            P = self._dropout(P, draw_keep(P.shape, dropout_p, device_of(P)))
        out = (P @ self._full(v)).astype(q.dtype, copy=False)           # (..., L, Ev)
        self.save_for_backward(q, k, v, mask, out, lse)
        return out

    def backward(self, g):
        q, k, v, mask, _, lse = self.saved  # the output: kept, not read (NOTE [fused attention])
        nq, nk, nv = self.needs_input_grad[:3]
        nm = len(self.needs_input_grad) == 4 and self.needs_input_grad[3]
        Q, K, V, g = self._full(q), self._full(k), self._full(v), g.astype(self.acc, copy=False)
        xp = xp_of(g)
        s = self._scores(q, k, mask)
        s -= lse[..., None]
        P = xp.exp(s, out=s)  # the probabilities again, from the kept log-sum-exp
        keep = None
        if self.p > 0:  # the forward's mask, drawn again from a private copy of the generator's state then
            keep = draw_keep(P.shape, self.p, device_of(P), _private_generator(self.rng_state))
        dq = dk = dv = dmask = None
        if nv:
            dv = (self._dropout(P, keep) if keep is not None else P).swapaxes(-1, -2) @ g
        if nq or nk or nm:
            dP = g @ V.swapaxes(-1, -2)
            if keep is not None:
                dP = self._dropout(dP, keep)
            dS = P * dP  # D = rowsum(P dP), in float32: rowsum(g out) read the output rounded to 2 bytes
            dP -= dS.sum(axis=-1, keepdims=True)
            xp.multiply(P, dP, out=dS)  # P (dP - D), into the one array
            if nm:  # a copy: a mask of the scores' full shape sums nothing away, and dS is scaled in place below
                dmask = unbroadcast(dS, mask.shape).astype(mask.dtype, copy=True)
            dS *= self.scale
            dq = dS @ K if nq else None
            dk = dS.swapaxes(-1, -2) @ Q if nk else None
        grads = [None if d is None else unbroadcast(d, a.shape).astype(a.dtype, copy=False)
                 for d, a in ((dq, q), (dk, k), (dv, v))]
        return (*grads, dmask) if mask is not None else tuple(grads)

    def _full(self, a):
        """a broadcast to the batch (a view), in the accumulation dtype."""
        return xp_of(a).broadcast_to(a, self.batch + a.shape[-2:]).astype(self.acc, copy=False)

    def _scores(self, q, k, mask):
        """q k^T * scale, then the mask: -inf where a query may not attend, or a float mask added."""
        xp = xp_of(q)
        s = self._full(q) @ self._full(k).swapaxes(-1, -2)
        s *= self.scale
        if self.is_causal:
            L, S = s.shape[-2:]
            s = xp.where(xp.tri(L, S, dtype=bool), s, -np.inf)  # query i attends to keys 0..i (top-left, as PyTorch)
        if mask is not None and mask.dtype == bool:
            s = xp.where(mask, s, -np.inf)
        elif mask is not None:
            s += mask
        return s

    def _dropout(self, a, keep):
        out = a * keep
        out *= 0.0 if self.p == 1 else 1.0 / (1.0 - self.p)
        return out

    def _sizes(self):
        L, S, E, Ev = self.dims
        B = math.prod(self.batch)
        return B, L, S, E, Ev

    def flops(self, inputs, out):
        B, L, S, E, Ev = self._sizes()
        per_score = 6 + self.float_mask + 2 * (self.p > 0)
        return {"matmul": 2 * B * L * S * (E + Ev), self.name: per_score * B * L * S + 2 * B * L}

    def backward_flops(self, grad, input_grads):
        B, L, S, E, Ev = self._sizes()
        n = B * L * S
        dq, dk, dv = input_grads[:3]
        need_ds = dq is not None or dk is not None or (len(input_grads) == 4 and input_grads[3] is not None)
        matmul = 2 * n * E                                                           # the scores again
        matmul += 2 * n * Ev * ((dv is not None) + need_ds)                          # dv, dP
        matmul += 2 * n * E * ((dq is not None) + (dk is not None))                  # dq, dk
        drop = 2 * (self.p > 0)
        elementwise = n * (3 + self.float_mask + drop * (dv is not None))
        if need_ds:
            elementwise += n * (5 + drop)
        full = (B * L * E, B * S * E, B * S * Ev, n)  # each gradient's size before summing a broadcast away
        elementwise += sum(f - gi.size for f, gi in zip(full, input_grads) if gi is not None)
        return {"matmul": matmul, self.name: elementwise}
