"""Neural-network functions with torch.nn.functional's names and arguments (import as F).

Each is either one op from ops/ (linear, softmax, layer_norm, ...) or a short composition
of tensor ops (cross_entropy), so its backward comes from the tape.

Read next: nn.py, the modules that hold parameters and call these.
"""
import contextlib
import numbers
import warnings
import weakref

from . import backend, ops
from .names import not_offered
from .ops import ShapeError
from .tensor import Tensor, apply, autocast_inputs, check_device, check_float, normalize_dtype, where


def _check_tensor(x, op, name="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")


def _float_input(x, op):
    """A Tensor of a floating-point dtype, as PyTorch's activations, softmax, layer_norm and losses need."""
    _check_tensor(x, op)
    check_float(op, x)


def linear(input, weight, bias=None):
    """y = input @ weight.T + bias, with weight shaped (out_features, in_features); a 1-d weight (in_features,) gives
    one number per row, input @ weight, as PyTorch's (as one out_feature, its dim dropped)."""
    _check_tensor(input, "linear")
    if isinstance(weight, Tensor) and weight.ndim == 1:
        if bias is not None or input.ndim == 0 or input.shape[-1] != weight.shape[0]:
            raise ShapeError(f"linear: a 1-d weight of shape {weight.shape} takes an input whose last dim is "
                             f"{weight.shape[0]} and no bias (PyTorch's addmm refuses one), got input {input.shape}"
                             f"{'' if bias is None else ' and a bias'}; write F.linear(x, w) + b for a bias")
        return apply(ops.Linear, input, weight.unsqueeze(0)).squeeze(-1)
    if bias is None:
        return apply(ops.Linear, input, weight)
    return apply(ops.Linear, input, weight, bias)


def relu(input, inplace=False):
    refuse_inplace("relu", inplace)
    return input.relu()


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def gelu(input, approximate="none"):
    """x * Phi(x), exact ('none') or with the tanh approximation ('tanh')."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    _float_input(input, "gelu")
    return apply(ops.Gelu, input, approximate=approximate)


def refuse_inplace(name, inplace):
    """PyTorch's inplace=True, refused where minigrad's activation (or dropout) makes a new tensor."""
    if inplace:
        raise ValueError(f"{name}: inplace=True is not supported: minigrad's activations and dropout make a new "
                         f"tensor (its in-place writes are the Tensor's add_, mul_, ...); leave inplace=False")


def silu(input, inplace=False):
    """x * sigmoid(x) (swish): one op, computed in float32 for a 2-byte x and rounded once, keeping x alone, as
    PyTorch's (NOTE [a stable softplus] in ops/nn.py)."""
    refuse_inplace("silu", inplace)
    _float_input(input, "silu")
    return apply(ops.Silu, input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x; at 0 the gradient is negative_slope, as PyTorch's."""
    refuse_inplace("leaky_relu", inplace)
    _float_input(input, "leaky_relu")
    return where(input > 0, input, input * negative_slope)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold, as PyTorch's: one op, computed as
    log1p(exp(-|beta x|)) + max(beta x, 0), which neither cancels nor overflows, in float32 for a 2-byte x (NOTE [a
    stable softplus] in ops/nn.py)."""
    _float_input(input, "softplus")
    return apply(ops.Softplus, input, beta=beta, threshold=threshold)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(its p-norm along dim, eps), as PyTorch's: each row (dim=1) scaled to norm 1."""
    if out is not None:
        raise TypeError("normalize: out= is not supported; use the tensor it returns")
    _float_input(input, "normalize")
    ops.normalize_dims("normalize", dim, input.ndim, input.shape)  # a dim out of range names normalize
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)


def one_hot(tensor, num_classes=-1):
    """(*, num_classes) int64: 1 at each index's class, 0 elsewhere, as PyTorch's; num_classes=-1 takes the largest
    index + 1. Made outside the tape: an index has no gradient."""
    _check_tensor(tensor, "one_hot")
    if tensor.dtype != "int64":
        raise TypeError(f"one_hot: the indices must be int64 (PyTorch's LongTensor), got {tensor.dtype}; convert "
                        f"them with .long()")
    idx = tensor.data
    if backend.is_meta(idx) and num_classes == -1:
        raise backend.MetaError("one_hot: num_classes=-1 takes the largest index + 1, and a 'meta' tensor's indices "
                                "have no values; give num_classes")
    if not backend.is_meta(idx):  # on 'meta' the indices' values are unknown
        lo, hi = (int(idx.min()), int(idx.max())) if idx.size else (0, -1)
        if num_classes == -1:
            if not idx.size:
                raise RuntimeError("one_hot: cannot infer the number of classes from an empty tensor; give num_classes")
            num_classes = hi + 1
        if lo < 0 or hi >= num_classes:
            raise RuntimeError(f"one_hot: class values must be in [0, num_classes={num_classes}), got [{lo}, {hi}]")
    xp = backend.xp_of(idx)
    return Tensor._from_array((idx[..., None] == xp.arange(num_classes)).astype("int64"))


def softmax(input, dim=None, *, dtype=None, keep_input=False):
    """exp(x) / sum(exp(x)) along dim, computed stably (the max is subtracted first). dtype converts the input first;
    dim=None takes PyTorch's old implicit dim, with its warning (_softmax_input).

    keep_input is minigrad's emulation switch (PyTorch has no such argument): the op then keeps its input for
    backward as well as its output, as PyTorch's softmax did before 1.11, so that mg.profile counts the
    memory that older software needed. Backward does not read it; values and gradients are the same.
    """
    input, dim = _softmax_input("softmax", input, dim, dtype)
    return apply(ops.Softmax, input, dim=dim, keep_input=keep_input)


def log_softmax(input, dim=None, *, dtype=None):
    """x - logsumexp(x) along dim, computed stably; dtype and dim=None as softmax's."""
    input, dim = _softmax_input("log_softmax", input, dim, dtype)
    return apply(ops.LogSoftmax, input, dim=dim)


def _softmax_input(name, input, dim, dtype):
    """(the input in dtype, the dim): dim=None is PyTorch's implicit choice, 0 for a 0-d, 1-d or 3-d input, else 1,
    with its warning (before, minigrad took one softmax over every element)."""
    _check_tensor(input, name)
    if dtype is not None:
        input = input.to(dtype)
    check_float(name, input, also=", or pass dtype=")
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
        warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                      f"as an argument. (PyTorch's warning; minigrad took dim={dim})", UserWarning, stacklevel=3)
    return input, dim


def legacy_reduction(name, size_average, reduce, reduction):
    """A loss's reduction, checked: size_average and reduce, PyTorch's arguments from before 0.4, decide it where
    either is given, as PyTorch reads them (_Reduction.legacy_get_string, with its warning): reduce=False is
    'none', size_average=False 'sum'. The losses take them in PyTorch's places, so that a positional call means
    what it means there."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else "mean" if size_average else "sum"
        warnings.warn(f"{name}: size_average and reduce args will be deprecated, please use "
                      f"reduction='{reduction}' instead (PyTorch's warning)", UserWarning, stacklevel=3)
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """-log softmax(input)[target], as torch's: logits (N, C) or (N, C, d1, ...) or (C,), with class indices
    (N,) or (N, d1, ...) or (), or class probabilities of the logits' shape.

    Targets equal to ignore_index (padding) add nothing and do not count in the mean. weight (C,) scales each
    class's loss, and the mean is then over the weights of the targets; label_smoothing mixes the target
    with the uniform distribution over the C classes. All as in PyTorch, size_average and reduce too
    (legacy_reduction).
    """
    _check_tensor(input, "cross_entropy")
    _check_tensor(target, "cross_entropy", "target")
    reduction = legacy_reduction("cross_entropy", size_average, reduce, reduction)
    input, target, weight = autocast_inputs("cross_entropy", input, target, weight)  # float32 under autocast
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    class_dim, weight = _check_classes("cross_entropy", input, target, weight)
    if backend.is_float(target.dtype) and target.shape == input.shape:
        if ignore_index != -100:  # PyTorch's RuntimeError, where ignoring it would silently count every item
            raise RuntimeError(f"cross_entropy: ignore_index={ignore_index} is not supported for class probabilities "
                               f"(float targets of the logits' shape {tuple(input.shape)}), as in PyTorch: nothing is "
                               f"an index there. Leave the items out (index the rows you keep), or pass class indices")
        return _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing, class_dim)
    _check_indices("cross_entropy", input, target, class_dim)
    return _picked("cross_entropy", log_softmax(input, dim=class_dim), target, weight, ignore_index, reduction,
                   label_smoothing)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-input[target]: cross_entropy's second half, on log-probabilities (log_softmax's output), as torch's:
    (N, C) or (N, C, d1, ...) or (C,) with class indices of the batch's shape; the other arguments as there."""
    _check_tensor(input, "nll_loss")
    _check_tensor(target, "nll_loss", "target")
    reduction = legacy_reduction("nll_loss", size_average, reduce, reduction)
    input, target, weight = autocast_inputs("nll_loss", input, target, weight)
    class_dim, weight = _check_classes("nll_loss", input, target, weight)
    _check_indices("nll_loss", input, target, class_dim)
    return _picked("nll_loss", input, target, weight, ignore_index, reduction, 0.0)


def _check_classes(name, input, target, weight):
    """(the class dim, the class weights detached): the checks that cross_entropy and nll_loss share."""
    check_float(name, input)
    check_device(name, input, target, weight)  # targets on another device would index the logits' rows unseen
    if input.ndim == 0:
        what = "logits" if name == "cross_entropy" else "log-probabilities"
        raise ShapeError(f"{name}: the {what} must have a class dim: (C,), (N, C) or (N, C, d1, ...)")
    class_dim = 0 if input.ndim == 1 else 1
    c = input.shape[class_dim]
    if weight is not None:
        _check_tensor(weight, name, "weight")
        if weight.shape != (c,) or weight.dtype != input.dtype:
            raise ShapeError(f"{name}: weight must be a {input.dtype} tensor of shape ({c},), one per class, "
                             f"got {weight.dtype} {weight.shape}")
        weight = weight.detach()  # as PyTorch, which has no gradient for the class weights
    return class_dim, weight


def _check_indices(name, input, target, class_dim):
    batch_shape = input.shape[:class_dim] + input.shape[class_dim + 1:]
    if target.shape != batch_shape:
        what = "logits" if name == "cross_entropy" else "log-probabilities"
        probabilities = ", probabilities the logits' shape" if name == "cross_entropy" else ""
        raise ShapeError(f"{name}: got {what} and targets of shapes {input.shape} and {target.shape}: class "
                         f"indices must have shape {batch_shape} (the {what}' without the class dim, "
                         f"{'0' if class_dim == 0 else '1'}){probabilities}. Classes in the last dim "
                         f"(B, T, C)? Flatten with .reshape(-1, C) and the targets with .reshape(-1)")
    if target.dtype.kind not in "iu":
        also = ", or give probabilities of the logits' shape" if name == "cross_entropy" else ""
        raise TypeError(f"{name}: targets of the batch's shape must be class indices (an integer tensor), "
                        f"got {target.dtype}; convert them with .long(){also}")


def _picked(name, logp, target, weight, ignore_index, reduction, label_smoothing):
    """-logp[target] per item, weighted, smoothed and reduced as PyTorch's cross_entropy and nll_loss."""
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral):  # 0.5 would ignore nothing
        raise TypeError(f"{name}: ignore_index must be an int (a class index), got {ignore_index!r}")
    c = logp.shape[0 if logp.ndim == 1 else 1]
    if logp.ndim != 2:  # classes last, then one row per item: (N, d1, ..., C) -> (M, C)
        logp = logp.reshape(1, c) if logp.ndim == 1 else logp.permute(0, *range(2, logp.ndim), 1).reshape(-1, c)
    t = target.data.reshape(-1)
    n = t.shape[0]
    valid = t != ignore_index
    out_of_range = valid & ((t < 0) | (t >= c))
    if not backend.is_meta(t) and bool(out_of_range.any()):  # on 'meta' the targets' values are unknown
        bad = backend.to_numpy(t[out_of_range])[0]
        raise IndexError(f"{name}: target {bad} is out of range for {c} classes "
                         f"(and is not ignore_index={ignore_index})")
    xp = backend.xp_of(t)
    safe = xp.where(valid, t, 0)
    losses = -logp[xp.arange(n), safe]  # (M,)
    count = n if backend.is_meta(t) else int(valid.sum())  # 'meta' (no values): every target counts
    if weight is not None or count < n:  # each item's weight: its class's (or 1), and 0 if ignored
        item_weight = valid.astype(logp.dtype) if weight is None else weight.data[safe] * valid
        losses = losses * Tensor._from_array(item_weight)
    if label_smoothing:
        # the uniform part: the mean over classes of -log p, weighted by class as in PyTorch
        spread = -(logp if weight is None else logp * weight).sum(dim=1) * Tensor._from_array(valid.astype(logp.dtype))
        losses = losses * (1 - label_smoothing) + spread * (label_smoothing / c)
    if reduction == "none":
        return losses.reshape(target.shape)
    total = losses.sum()
    # PyTorch's weighted mean: over the weights' sum, a 0-d array (what `total / float(...)` would make; 'meta' has
    # no value to take)
    denominator = count if weight is None else backend.as_array(item_weight.sum())
    if reduction == "sum":
        return _says_items(total, name, reduction, denominator)
    if not backend.is_meta(t) and float(denominator) == 0:  # every target ignored (or weighing 0): the loss is nan,
        total = total * 0 + Tensor._from_array(xp.asarray(float("nan"), dtype=logp.dtype))  # as in PyTorch, grad 0
        return _says_items(total, name, reduction, 0)
    return _says_items(total / (denominator if weight is None else Tensor._from_array(denominator)), name, reduction,
                       denominator)


def _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing, class_dim):
    """cross_entropy with a probability for each class: -sum over classes of weight * target * log p; the mean is
    over the items (not over the weights)."""
    if target.dtype != input.dtype:
        raise TypeError(f"cross_entropy: probability targets must have the logits' dtype {input.dtype}, got "
                        f"{target.dtype}; convert them with .to('{input.dtype}')")
    c = input.shape[class_dim]
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / c
    products = log_softmax(input, dim=class_dim) * target
    if weight is not None:
        products = products * weight.reshape((c,) + (1,) * (input.ndim - class_dim - 1))
    losses = -products.sum(dim=class_dim)
    return _reduced(losses, reduction, "cross_entropy")  # one item per row (per position), not per class


def _reduced(losses, reduction, name):
    out = losses.mean() if reduction == "mean" else losses.sum() if reduction == "sum" else losses
    return _says_items(out, name, reduction, losses.numel())


# NOTE [a loss says what it averages]: a reduced loss says (name, reduction, items), items being what the mean divides
# by (or would: the items a sum adds up; the class weights' sum for a weighted cross_entropy), to whoever asks for it
# with `loss_items()`: mg.accumulate opens one around each call of its loss_fn and compares what the loss it got back
# said with the items it counted in the targets, so that a mean, or a sum over other items than it counted (rows of
# class probabilities, weights), is refused instead of silently scaled wrong. Hugging Face's Trainer passes its count
# the other way, num_items_in_batch into the model's loss; here the loss_fn is the user's, which passes nothing on,
# so the loss says its count to the caller. It used to leave the count on the loss's record, a loss function's
# note on the tape's object for accumulate.py to read back (#40 [seams]); now it goes, explicitly, to whoever opened
# the block, and nothing is left on the tape.
_asking = []  # the lists of the loss_items() blocks open now, innermost last


@contextlib.contextmanager
def loss_items():
    """with F.loss_items() as said: each reduced loss made in the block appends (weakref to the loss, name,
    reduction, items) to `said`, for the innermost block only (NOTE [a loss says what it averages])."""
    said = []
    _asking.append(said)
    try:
        yield said
    finally:
        _asking.pop()


def said_of(loss, said):
    """(name, reduction, items) that `loss` said in a loss_items() block's list `said`, or (None, None, None): a
    loss that is not a reduced minigrad loss (a sum of two, a loss of the user's own) says nothing."""
    return next(((name, reduction, items) for ref, name, reduction, items in said if ref() is loss),
                (None, None, None))


def _says_items(loss, name, reduction, items):
    """NOTE [a loss says what it averages]: tell the innermost loss_items() block what this loss reduces over."""
    if _asking and reduction != "none" and loss.grad_fn is not None and not backend.is_meta(loss.data):
        _asking[-1].append((weakref.ref(loss), name, reduction, float(items)))
    return loss


def _check_pair(name, input, target, refuse=False):
    """Two tensors of one shape; else PyTorch's warning (mse_loss, l1_loss: they broadcast, rarely as meant) or its
    ValueError (binary_cross_entropy_with_logits)."""
    _check_tensor(input, name)
    _check_tensor(target, name, "target")
    check_device(name, input, target)
    if input.shape != target.shape:
        if refuse:
            raise ValueError(f"{name}: target size {target.shape} must be the same as input size {input.shape}")
        if ops.broadcast_shapes(input.shape, target.shape) is None:  # (else the error would name sub, inside)
            raise ShapeError(f"{name}: input of shape {input.shape} and target of shape {target.shape} do not "
                             f"broadcast; give the target the input's shape")
        warnings.warn(f"{name}: using a target size {target.shape} that is different to the input size "
                      f"{input.shape}. This will likely lead to incorrect results due to broadcasting. Please ensure "
                      f"they have the same size (PyTorch's warning)", UserWarning, stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean (or sum) of (input - target)^2."""
    _check_pair("mse_loss", input, target)
    reduction = legacy_reduction("mse_loss", size_average, reduce, reduction)
    input, target = autocast_inputs("mse_loss", input, target)
    check_float("mse_loss", input if backend.is_float(input.dtype) else target)  # PyTorch's: one of them at least
    return _reduced((input - target) ** 2, reduction, "mse_loss")


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean (or sum) of |input - target|, as torch's (the gradient at 0 is 0, as PyTorch's sign)."""
    _check_pair("l1_loss", input, target)
    reduction = legacy_reduction("l1_loss", size_average, reduce, reduction)
    input, target = autocast_inputs("l1_loss", input, target)
    if reduction == "mean":  # PyTorch's: one of them at least, for the mean
        check_float("l1_loss", input if backend.is_float(input.dtype) else target)
    return _reduced((input - target).abs(), reduction, "l1_loss")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """-[pos_weight y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))] per element, times weight, computed from the
    logits x stably as (1 - y) softplus(x) + pos_weight y softplus(-x): one op, in float32 for a 2-byte x, rounded
    once (NOTE [a stable softplus] in ops/nn.py)."""
    _check_pair("binary_cross_entropy_with_logits", input, target, refuse=True)
    reduction = legacy_reduction("binary_cross_entropy_with_logits", size_average, reduce, reduction)
    input, target, weight, pos_weight = autocast_inputs("binary_cross_entropy_with_logits", input, target, weight,
                                                        pos_weight)
    check_float("binary_cross_entropy_with_logits", input)
    if target.dtype != input.dtype:
        raise TypeError(f"binary_cross_entropy_with_logits: targets must be floats of the input's dtype "
                        f"{input.dtype} (probabilities in [0, 1]), got {target.dtype}; convert with "
                        f".to('{input.dtype}')")
    for name, w in (("weight", weight), ("pos_weight", pos_weight)):  # PyTorch's loss keeps the input's shape
        if w is not None and ops.broadcast_shapes(w.shape, input.shape) != input.shape:
            raise ShapeError(f"binary_cross_entropy_with_logits: {name} of shape {w.shape} does not broadcast to the "
                             f"input's shape {input.shape}: the loss would take another shape, which PyTorch refuses; "
                             f"give it the input's shape or one that broadcasts to it (pos_weight: one per class, "
                             f"the last dim)")
    weights = tuple(w.detach() for w in (weight, pos_weight) if w is not None)  # as PyTorch: no gradient for them
    losses = apply(ops.BinaryCrossEntropyWithLogits, input, target, *weights, has_weight=weight is not None)
    return _reduced(losses, reduction, "binary_cross_entropy_with_logits")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the last len(normalized_shape) dims to mean 0 and variance 1, then scale and shift."""
    _float_input(input, "layer_norm")
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if input.shape[input.ndim - len(normalized_shape):] != normalized_shape:
        raise ShapeError(f"layer_norm: normalized_shape {normalized_shape} does not match the last dims of "
                         f"the input's shape {input.shape}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and p.shape != normalized_shape:  # broadcasting would give each row another shape of loss
            raise ShapeError(f"layer_norm: {name} of shape {p.shape} must have the normalized_shape "
                             f"{normalized_shape}, one value per normalized element, as in PyTorch")
    params = tuple(p for p in (weight, bias) if p is not None)
    return apply(ops.LayerNorm, input, *params, ndim=len(normalized_shape), eps=eps,
                 has_weight=weight is not None)


def dropout(input, p=0.5, training=True, inplace=False, *, mask_dtype=None):
    """Zero each element with probability p and scale the rest by 1/(1-p), using minigrad's generator.

    The op keeps a bool mask for backward, 1 byte per element, and applies the scale in forward and backward,
    as PyTorch's native_dropout does. mask_dtype is minigrad's extension (PyTorch has no such argument), to
    emulate the memory of frameworks that kept a mask of the input's dtype (4 bytes per element in float32):
    None or 'bool' keeps the 1-byte mask; a float dtype name ('float32', ...) keeps a mask in that dtype,
    with the scale folded in, as minigrad did before. The values and gradients are the same either way.
    """
    if not isinstance(p, (int, float)):
        raise TypeError(f"dropout: p must be a number, a probability in [0, 1], got {p!r}")
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: p must be a probability in [0, 1], got {p}")
    refuse_inplace("dropout", inplace)
    mask_dtype = dropout_mask_dtype(mask_dtype)
    if not training or p == 0:
        return input
    check_float("dropout", input)
    keep = ops.draw_keep(input.shape, p, input.device)
    if mask_dtype != "bool":  # the older 4-byte mask: keep / (1 - p) in mask_dtype
        scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
        keep = (keep * scale).astype(mask_dtype)
    return apply(ops.Dropout, input, mask=keep, p=p)


def dropout_mask_dtype(mask_dtype):
    """None, 'bool' or a float dtype (a name, np.float32, ...) -> its name, or an error that lists the choices."""
    if mask_dtype is None:
        return "bool"
    try:
        dt = normalize_dtype(mask_dtype)
    except TypeError:
        dt = None
    if dt is None or dt.kind not in "bf":
        raise TypeError(f"dropout: mask_dtype must be None or 'bool' (a 1-byte mask, as PyTorch keeps) or a float "
                        f"dtype ('float16', 'float32', 'float64': the mask older frameworks kept, with the scale "
                        f"folded in), got {mask_dtype!r}")
    return dt.name


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                                 enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value, as PyTorch's: query (..., L, E), key (..., S, E) and value
    (..., S, Ev) give (..., L, Ev); the leading dims broadcast; scale defaults to 1/sqrt(E).

    attn_mask (broadcastable to (..., L, S)): bool, True where a query may attend (PyTorch's meaning, the
    inverse of nn.MultiheadAttention's key_padding_mask), or a float of the query's dtype added to the scores
    (it gets a gradient if it requires one). is_causal: query i attends to keys 0..i. A query that may attend
    to nothing gets zeros, as in PyTorch. dropout_p drops attention weights whenever it is > 0: pass 0.0 in
    eval mode, as in PyTorch. enable_gqa=True: grouped-query attention, key and value with fewer heads (dim -3)
    than query, a divisor of its count, each head repeated for its group of queries (_repeat_heads).

    One fused op, as FlashAttention (NOTE [fused attention] in ops/nn.py): it keeps query, key, value, the output
    and one log-sum-exp per query row, not the (..., L, S) probabilities that the eager composition
    (q @ k^T * scale, mask, softmax, dropout, @ v) keeps; backward recomputes them, and draws the dropout
    mask again from the generator state the forward started from.
    """
    name = "scaled_dot_product_attention"
    query, key, value, attn_mask = autocast_inputs("sdpa", query, key, value, attn_mask)  # before the dtype checks
    for arg, t in (("query", query), ("key", key), ("value", value)):
        _check_tensor(t, name, arg)
        if t.ndim < 2:
            raise ShapeError(f"{name}: {arg} must have at least 2 dims, (..., L or S, E), got shape {t.shape}")
    shapes = f"query {query.shape}, key {key.shape}, value {value.shape}"
    if not backend.is_float(query.dtype) or key.dtype != query.dtype or value.dtype != query.dtype:
        raise TypeError(f"{name}: query, key and value must share one floating-point dtype, got {query.dtype}, "
                        f"{key.dtype} and {value.dtype}; convert them with .to('float32') (or another float dtype)")
    if len({query.device, key.device, value.device}) > 1:
        raise RuntimeError(f"{name}: query, key and value are on devices {query.device}, {key.device} and "
                           f"{value.device}; move them to one device with .to(device) first")
    if key.shape[-1] != query.shape[-1]:
        raise ShapeError(f"{name}: got {shapes}; expected query (..., L, E), key (..., S, E), value (..., S, Ev): "
                         f"key's last dim ({key.shape[-1]}) must equal query's (E = {query.shape[-1]})")
    if value.shape[-2] != key.shape[-2]:
        raise ShapeError(f"{name}: got {shapes}; expected query (..., L, E), key (..., S, E), value (..., S, Ev): "
                         f"value's second-to-last dim ({value.shape[-2]}) must equal key's (S = {key.shape[-2]})")
    if enable_gqa:
        key, value = _repeat_heads(name, shapes, query, key, value)
    batch = ops.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    if batch is None:
        gqa = (min(query.ndim, key.ndim, value.ndim) > 2 and key.shape[-3] and value.shape[-3] and
               query.shape[-3] % key.shape[-3] == 0 and query.shape[-3] % value.shape[-3] == 0)
        raise ShapeError(f"{name}: the leading (batch) dims of {shapes} do not broadcast: compared from the "
                         f"right, each pair must be equal or one of them 1" +
                         ("; for grouped-query attention (key and value with fewer heads, dim -3, than query) pass "
                          "enable_gqa=True" if gqa else ""))
    if not 0 <= dropout_p <= 1:
        raise ValueError(f"{name}: dropout_p must be a probability in [0, 1], got {dropout_p}")
    masks = ()
    if attn_mask is not None:
        _check_tensor(attn_mask, name, "attn_mask")
        if is_causal:
            raise ValueError(f"{name}: give attn_mask or is_causal=True, not both (as PyTorch); for a causal "
                             f"mask combined with another, pass attn_mask=causal & other")
        scores = batch + (query.shape[-2], key.shape[-2])
        if ops.broadcast_shapes(attn_mask.shape, scores) != scores:
            raise ShapeError(f"{name}: attn_mask of shape {attn_mask.shape} does not broadcast to the scores' "
                             f"shape {scores} (..., L, S), with {shapes}")
        if attn_mask.dtype != "bool" and attn_mask.dtype != query.dtype:
            raise TypeError(f"{name}: attn_mask must be bool (True: may attend) or a float of the query's dtype "
                            f"{query.dtype} (added to the scores), got {attn_mask.dtype}; convert it with "
                            f".to('{query.dtype}') or .bool()")
        if attn_mask.device != query.device:
            raise RuntimeError(f"{name}: attn_mask is on {attn_mask.device}, query on {query.device}; move it "
                               f"with .to('{query.device}')")
        masks = (attn_mask,)
    return apply(ops.ScaledDotProductAttention, query, key, value, *masks, dropout_p=dropout_p,
                 is_causal=is_causal, scale=scale)


def _repeat_heads(name, shapes, query, key, value):
    """enable_gqa=True: key and value, with Hk and Hv heads (dim -3) dividing the query's Hq, each head repeated
    Hq // Hk (Hq // Hv) times in place, as PyTorch's repeat_interleave along dim -3: (..., Hk, S, E) -> (..., Hq, S,
    E). The repeats are copies (the fused op keeps them, as PyTorch's math backend does); their gradients add up."""
    if min(query.ndim, key.ndim, value.ndim) < 3:
        raise ShapeError(f"{name}: enable_gqa=True needs a heads dim, (..., H, L or S, E), in query, key and value; "
                         f"got {shapes}")
    hq = query.shape[-3]
    if not key.shape[-3] or not value.shape[-3] or hq % key.shape[-3] or hq % value.shape[-3]:
        raise ShapeError(f"{name}: enable_gqa=True: the heads (dim -3) of key ({key.shape[-3]}) and value "
                         f"({value.shape[-3]}) must each divide the query's ({hq}); got {shapes}")

    def repeat(t):
        *lead, h, n, e = t.shape
        if h == hq:
            return t
        return t.reshape(*lead, h, 1, n, e).expand(*lead, h, hq // h, n, e).reshape(*lead, hq, n, e)
    return repeat(key), repeat(value)


def embedding(input, weight, padding_idx=None):
    """Rows of weight (num_embeddings, embedding_dim) picked by integer indices of any shape. The row at
    padding_idx is returned as it is but gets no gradient (as in PyTorch)."""
    _check_tensor(input, "embedding")
    if input.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be an integer tensor, got {input.dtype}")
    check_device("embedding", input, weight)
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-D, (num_embeddings, embedding_dim), got shape {weight.shape}, "
                         f"as in PyTorch; a table of numbers is weight.reshape(-1, 1)")
    n = weight.shape[0]
    idx = input.data
    lo, hi = (int(idx.min()), int(idx.max())) if idx.size and not backend.is_meta(idx) else (0, 0)  # meta: unknown
    if idx.size and (lo < 0 or hi >= n):
        raise IndexError(f"embedding: index out of range: indices span [{lo}, {hi}] but there are {n} embeddings")
    rows = weight[input]
    if padding_idx is None:
        return rows
    if not -n <= padding_idx < n:
        raise ValueError(f"embedding: padding_idx {padding_idx} is out of range for {n} embeddings")
    learn = Tensor._from_array((idx != padding_idx % n)[..., None])
    return where(learn, rows, rows.detach())  # the same values; no gradient flows through the detached side


__all__ = ["linear", "relu", "tanh", "sigmoid", "gelu", "silu", "leaky_relu", "softplus", "normalize", "one_hot",
           "softmax", "log_softmax", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy_with_logits",
           "layer_norm", "dropout", "scaled_dot_product_attention", "embedding"]

_NO_CONV = "minigrad has no convolutions or pooling: its models are MLPs and transformers (nn.Linear, attention)"
_INSTEAD = {**{n: _NO_CONV for n in ("conv1d", "conv2d", "conv3d", "conv_transpose2d", "max_pool1d", "max_pool2d",
                                      "avg_pool2d", "adaptive_avg_pool2d", "unfold", "fold", "interpolate")},
            "pad": "write it with mg.cat: mg.cat([x, x.new_zeros(*x.shape[:-1], n)], dim=-1) pads the last dim by n",
            "binary_cross_entropy": "use binary_cross_entropy_with_logits on the logits (sigmoid inside, stable), as "
                                    "PyTorch advises",
            "elu": "compose it: mg.where(x > 0, x, alpha * (x.clamp(max=0).exp() - 1)) (the clamp: an exp that "
                   "overflows in the branch not taken would make its gradient nan)",
            "cosine_similarity": "compose it: (F.normalize(x1, dim=1) * F.normalize(x2, dim=1)).sum(1)",
            "kl_div": "compose it: (target * (target.log() - input)).sum() / N, for input log-probabilities of N "
                      "rows (PyTorch's reduction='batchmean')",
            **{n: "compose it from tensor ops (abs, clamp, where), as l1_loss and mse_loss are"
               for n in ("smooth_l1_loss", "huber_loss")}}


def __getattr__(name):
    raise not_offered(__name__, name, __all__, _INSTEAD)

