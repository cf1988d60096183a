"""Neural-network functions with torch.nn.functional's names and arguments (import as F).

Each is either one op from ops.py (linear, softmax, layer_norm, ...) or a short composition
of tensor ops (cross_entropy), so its backward comes from the tape.

Read next: nn.py, the modules that hold parameters and call these.
"""
from . import backend, ops
from .random import generator
from .tensor import Tensor, apply


def _check_tensor(x, op, name="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")


def linear(input, weight, bias=None):
    """y = input @ weight.T + bias, with weight shaped (out_features, in_features)."""
    _check_tensor(input, "linear")
    return apply(ops.Linear, input, weight, *(() if bias is None else (bias,)))


def relu(input):
    return input.relu()


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def gelu(input, approximate="none"):
    """x * Phi(x), exact ('none') or with the tanh approximation ('tanh')."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return apply(ops.Gelu, input, approximate=approximate)


def softmax(input, dim):
    """exp(x) / sum(exp(x)) along dim, computed stably (the max is subtracted first)."""
    return apply(ops.Softmax, input, dim=dim)


def log_softmax(input, dim):
    """x - logsumexp(x) along dim, computed stably."""
    return apply(ops.LogSoftmax, input, dim=dim)


def cross_entropy(input, target, ignore_index=-100, reduction="mean"):
    """Mean (or sum, or per-item) of -log softmax(input)[target], for logits (N, C) and targets (N,).

    Targets equal to ignore_index (padding) add nothing and do not count in the mean.
    """
    _check_tensor(input, "cross_entropy")
    _check_tensor(target, "cross_entropy", "target")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if input.ndim != 2 or target.shape != input.shape[:1]:
        raise ValueError(f"cross_entropy: expected logits of shape (N, C) and targets of shape (N,), got "
                         f"{input.shape} and {target.shape}; flatten a sequence with .reshape(-1, C) and "
                         f".reshape(-1) first")
    if target.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: targets must be class indices (an integer tensor), got {target.dtype}")
    t = target.data
    n, c = input.shape
    valid = t != ignore_index
    out_of_range = valid & ((t < 0) | (t >= c))
    if bool(out_of_range.any()):
        bad = backend.to_numpy(t[out_of_range])[0]
        raise IndexError(f"cross_entropy: target {bad} is out of range for {c} classes "
                         f"(and is not ignore_index={ignore_index})")
    xp = backend.xp_of(t)
    losses = -log_softmax(input, dim=1)[xp.arange(n), xp.where(valid, t, 0)]  # (N,)
    count = int(valid.sum())
    if count < n:  # ignored items: their loss (and so their gradient) is zero
        losses = losses * Tensor._from_array(valid.astype(input.dtype))
    if reduction == "none":
        return losses
    total = losses.sum()
    if reduction == "sum":
        return total
    if count == 0:  # every target ignored: the loss is nan, as in PyTorch, and the gradient zero (not nan)
        return total + Tensor._from_array(backend.xp_of(t).asarray(float("nan"), dtype=input.dtype))
    return total / count


def mse_loss(input, target, reduction="mean"):
    """Mean (or sum) of (input - target)^2."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"mse_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    d = (input - target) ** 2
    return d.mean() if reduction == "mean" else d.sum() if reduction == "sum" else d


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the last len(normalized_shape) dims to mean 0 and variance 1, then scale and shift."""
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if input.shape[input.ndim - len(normalized_shape):] != normalized_shape:
        raise ValueError(f"layer_norm: normalized_shape {normalized_shape} does not match the last dims of "
                         f"the input's shape {input.shape}")
    params = tuple(p for p in (weight, bias) if p is not None)
    return apply(ops.LayerNorm, input, *params, ndim=len(normalized_shape), eps=eps,
                 has_weight=weight is not None)


def dropout(input, p=0.5, training=True):
    """Zero each element with probability p and scale the rest by 1/(1-p), using minigrad's generator."""
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: p must be a probability in [0, 1], got {p}")
    if not training or p == 0:
        return input
    keep = generator().random(input.shape) >= p  # drawn on the host: same masks on cpu and cuda
    scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
    mask = backend.to_device((keep * scale).astype(input.dtype), input.device)
    return apply(ops.Dropout, input, mask=mask)


def embedding(input, weight):
    """Rows of weight (num_embeddings, embedding_dim) picked by integer indices of any shape."""
    _check_tensor(input, "embedding")
    if input.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be an integer tensor, got {input.dtype}")
    n = weight.shape[0]
    idx = input.data
    lo, hi = (int(idx.min()), int(idx.max())) if idx.size else (0, 0)
    if idx.size and (lo < 0 or hi >= n):
        raise IndexError(f"embedding: index out of range: indices span [{lo}, {hi}] but there are {n} embeddings")
    return weight[input]


__all__ = ["linear", "relu", "tanh", "sigmoid", "gelu", "softmax", "log_softmax", "cross_entropy", "mse_loss",
           "layer_norm", "dropout", "embedding"]
