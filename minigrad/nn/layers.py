"""The layers: Linear, Identity, Flatten, the activations, Softmax, Dropout, LayerNorm, Embedding, BatchNorm1d, each a
Module over functional's ops, with torch.nn's names, arguments and initialization.

Read next: losses.py.
"""
import math
import warnings

from .. import functional as F
from .. import backend
from ..backend.random import draw
from ..tensor import check_sizes, is_recomputing, no_grad, normalize_dtype, ones, tensor, zeros
from .module import Module, Parameter, _uniform


def _made_in(module, dtype):
    """PyTorch's factory keyword dtype=: the layer's float parameters and buffers in that dtype (drawn as float32
    first); an integer dtype is refused, as PyTorch refuses it (its parameters could not require grad)."""
    if dtype is not None and not backend.is_float(normalize_dtype(dtype)):
        raise TypeError(f"{type(module).__name__}(dtype={normalize_dtype(dtype).name}): parameters must be floating "
                        f"point, to require grad (PyTorch refuses it too); give 'float32', 'float64', 'bfloat16', ...")
    if dtype is not None:
        module.to(dtype=dtype)


class Linear(Module):
    """y = x @ weight.T + bias; weight (out_features, in_features), PyTorch's default init."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        self.in_features, self.out_features = check_sizes("Linear", (in_features, out_features))  # ints >= 0
        bound = 1 / math.sqrt(in_features) if in_features else 0
        # PyTorch's kaiming_uniform_(a=sqrt(5)) reduces to U(-1/sqrt(in), 1/sqrt(in)); so does its bias
        self.weight = _uniform((out_features, in_features), bound, device)
        self.register_parameter("bias", _uniform((out_features,), bound, device) if bias else None)
        _made_in(self, dtype)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Identity(Module):
    """forward returns its input; any arguments are taken and ignored, as PyTorch's."""

    def __init__(self, *args, **kwargs):
        pass

    def forward(self, input):
        return input


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class ReLU(Module):
    def __init__(self, inplace=False):
        F.refuse_inplace("ReLU", inplace)
        self.inplace = inplace

    def forward(self, input):
        return input.relu()


class Tanh(Module):
    def forward(self, input):
        return input.tanh()


class Sigmoid(Module):
    def forward(self, input):
        return input.sigmoid()


class GELU(Module):
    def __init__(self, approximate="none"):
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, self.approximate)


class SiLU(Module):
    def __init__(self, inplace=False):
        F.refuse_inplace("SiLU", inplace)
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        F.refuse_inplace("LeakyReLU", inplace)
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class Softmax(Module):
    """F.softmax along dim. dim=None takes PyTorch's old implicit choice, with its warning: 0 for a 0-d, 1-d or 3-d
    input, else 1."""

    def __init__(self, dim=None):
        self.dim = dim

    def _dim(self, input):
        if self.dim is not None:
            return self.dim
        dim = 0 if input.ndim in (0, 1, 3) else 1
        warnings.warn(f"Implicit dimension choice for {type(self).__name__.lower()} has been deprecated. Change the "
                      f"call to include dim={dim} as an argument (PyTorch's warning)", UserWarning, stacklevel=3)
        return dim

    def forward(self, input):
        return F.softmax(input, self._dim(input))

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """F.log_softmax along dim (dim=None as Softmax's)."""

    def forward(self, input):
        return F.log_softmax(input, self._dim(input))


class Dropout(Module):
    """F.dropout while training. mask_dtype (minigrad's extension; see F.dropout): None keeps a 1-byte mask, as
    PyTorch does; a float dtype name keeps the mask older frameworks kept, to emulate their memory."""

    def __init__(self, p=0.5, inplace=False, *, mask_dtype=None):
        if not isinstance(p, (int, float)):
            raise TypeError(f"Dropout: p must be a number, a probability in [0, 1], got {p!r}")
        if not 0 <= p <= 1:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p}")
        F.refuse_inplace("Dropout", inplace)
        F.dropout_mask_dtype(mask_dtype)  # refused here, not at the first forward
        self.p, self.inplace, self.mask_dtype = p, inplace, mask_dtype

    def forward(self, input):
        return F.dropout(input, self.p, self.training, mask_dtype=self.mask_dtype)

    def extra_repr(self):
        return f"p={self.p}" + (f", mask_dtype={self.mask_dtype!r}" if self.mask_dtype is not None else "")


class LayerNorm(Module):
    """Normalize over the last dims, then scale (weight, ones) and shift (bias, zeros)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        self.normalized_shape = check_sizes("LayerNorm", (normalized_shape,))  # an int or a tuple of ints >= 0
        self.eps = eps
        self.register_parameter("weight", Parameter(ones(*self.normalized_shape, device=device))
                                if elementwise_affine else None)
        self.register_parameter("bias", Parameter(zeros(*self.normalized_shape, device=device))
                                if elementwise_affine and bias else None)
        _made_in(self, dtype)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class Embedding(Module):
    """A table of num_embeddings vectors of size embedding_dim, initialised N(0, 1); the row at padding_idx
    (if given) starts at zeros and gets no gradient."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        # PyTorch's parameters in PyTorch's places (device is its 10th, as there), so that a positional call means
        # what it means in PyTorch; those minigrad does not implement are refused when set
        for name, value, instead in (
                ("max_norm", max_norm, "minigrad does not renormalize the rows it looks up; leave max_norm=None"),
                ("scale_grad_by_freq", scale_grad_by_freq, "minigrad does not scale the rows' gradients by their "
                                                           "frequency in the batch; leave scale_grad_by_freq=False"),
                ("sparse", sparse, "minigrad's gradients are dense arrays; leave sparse=False"),
                ("_weight", _weight, "assign emb.weight = nn.Parameter(tensor) after making the Embedding"),
                ("_freeze", _freeze, "set emb.weight.requires_grad_(False) after making the Embedding")):
            if value is not None and value is not False:
                raise NotImplementedError(f"nn.Embedding: {name}={value!r} is not supported: {instead}")
        self.num_embeddings, self.embedding_dim = check_sizes("Embedding", (num_embeddings, embedding_dim))  # ints >= 0
        host = draw("standard_normal", size=(num_embeddings, embedding_dim), device=device).astype("float32")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} is out of range for {num_embeddings} "
                                 f"embeddings")
            padding_idx %= num_embeddings
            host[padding_idx] = 0
        self.padding_idx = padding_idx
        self.weight = Parameter(tensor(host, device=device))
        _made_in(self, dtype)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class BatchNorm1d(Module):
    """Normalize each feature over the batch (N, C) or (N, C, L).

    In training it uses the batch's statistics and updates running_mean and running_var
    (unbiased) with `momentum`, or with momentum=None to the average over all batches seen;
    in eval it uses the running statistics.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None):
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.register_parameter("weight", Parameter(ones(num_features, device=device)) if affine else None)
        self.register_parameter("bias", Parameter(zeros(num_features, device=device)) if affine else None)
        self.track_running_stats = track_running_stats
        if track_running_stats:
            self.running_mean = zeros(num_features, device=device)
            self.running_var = ones(num_features, device=device)
            self.num_batches_tracked = tensor(0, dtype="int64", device=device)
        else:  # empty buffer slots, as PyTorch's (NOTE [attribute kinds] in module.py)
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        _made_in(self, dtype)

    def forward(self, input):
        if input.ndim not in (2, 3) or input.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm1d: expected input of shape (N, {self.num_features}) or "
                             f"(N, {self.num_features}, L), got {input.shape}")
        dims = (0,) if input.ndim == 2 else (0, 2)
        shape = (1, -1) if input.ndim == 2 else (1, -1, 1)
        if self.training or not self.track_running_stats:
            n = input.numel() // self.num_features
            if n <= 1:
                raise ValueError(f"BatchNorm1d: expected more than 1 value per channel when training, got "
                                 f"input of shape {input.shape}")
            mean = input.mean(dim=dims, keepdim=True)
            xc = input - mean
            var = (xc * xc).mean(dim=dims, keepdim=True)
            if self.training and self.track_running_stats and not is_recomputing():
                self._update_running_stats(mean, var, n)  # once per batch, not again when checkpointing recomputes
        else:
            mean = self.running_mean.reshape(shape)
            xc = input - mean
            var = self.running_var.reshape(shape)
        y = xc / (var + self.eps).sqrt()
        if self.weight is not None:
            y = y * self.weight.reshape(shape) + self.bias.reshape(shape)
        return y

    def _update_running_stats(self, mean, var, n):
        with no_grad():
            self.num_batches_tracked._set_data(backend.as_array(self.num_batches_tracked._data + 1))  # 0-d + 1 is a scalar
            # momentum=None: the plain average of all batches so far, the k-th weighted 1/k (PyTorch's rule)
            k = self.num_batches_tracked._data  # on 'meta' no count to read, and the same writes whatever m is
            m = self.momentum if self.momentum is not None else 1.0 if backend.is_meta(k) else 1.0 / float(k)
            self.running_mean._set_data((1 - m) * self.running_mean._data + m * mean._data.reshape(-1))
            unbiased = var._data.reshape(-1) * (n / (n - 1))
            self.running_var._set_data((1 - m) * self.running_var._data + m * unbiased)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"
