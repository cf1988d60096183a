"""Modules: objects that hold parameters and compute with them, with torch.nn's names.

A Module finds its parameters by walking its attributes: a Parameter is a parameter, another
Module is a child, a list of Modules is a list of children, and any other Tensor is a buffer
(BatchNorm's running statistics). Attributes whose names start with '_' are private.

Read next: optim.py (what changes the parameters), gpt.py (a model built from these).
"""
import math

from . import functional as F
from . import backend
from .random import generator
from .tensor import Tensor, is_recomputing, no_grad, ones, parse_to_args, tensor, zero_grads, zeros


class Parameter(Tensor):
    """A tensor that a Module trains: requires grad by default."""
    __slots__ = ()

    def __init__(self, data, requires_grad=True):
        t = data if isinstance(data, Tensor) else tensor(data)
        self._data, self._requires_grad, self._grad, self._ctx, self._vc = t._data, False, None, None, None
        self.requires_grad_(requires_grad)
        self._set_data(self._data)  # so that an active profile counts it as a parameter

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


def _uniform(shape, bound, device=None):
    """U(-bound, bound) from minigrad's generator, as float32."""
    host = generator().uniform(-bound, bound, size=shape).astype("float32")
    return Parameter(tensor(host, device=device))


class Module:
    """Base class: subclasses set attributes in __init__ and define forward()."""

    training = True

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    # --- walking the tree
    def named_children(self):
        for name, value in vars(self).items():
            if name.startswith("_"):
                continue
            if isinstance(value, Module):
                yield name, value
            elif isinstance(value, (list, tuple)) and value and all(isinstance(m, Module) for m in value):
                for i, m in enumerate(value):
                    yield f"{name}.{i}", m

    def children(self):
        return (m for _, m in self.named_children())

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return (m for _, m in self.named_modules())

    def _named_tensors(self, want_parameters):
        for mod_name, mod in self.named_modules():
            for name, value in vars(mod).items():
                if not name.startswith("_") and isinstance(value, Tensor) \
                        and isinstance(value, Parameter) == want_parameters:
                    yield (f"{mod_name}.{name}" if mod_name else name), value

    def named_parameters(self):
        """(name, Parameter) pairs in registration order, each parameter once."""
        seen = set()
        for name, p in self._named_tensors(True):
            if id(p) not in seen:
                seen.add(id(p))
                yield name, p

    def parameters(self):
        return (p for _, p in self.named_parameters())

    def named_buffers(self):
        return self._named_tensors(False)

    def buffers(self):
        return (b for _, b in self.named_buffers())

    # --- state
    def zero_grad(self, set_to_none=True):
        zero_grads(self.parameters(), set_to_none)

    def train(self, mode=True):
        for m in self.modules():
            m.training = mode
        return self

    def eval(self):
        return self.train(False)

    def to(self, *args, device=None, dtype=None):
        """Move (and/or cast, for floats) every parameter and buffer in place; returns self."""
        device, dtype = parse_to_args(args, device, dtype)
        if dtype is not None and dtype.kind != "f":
            raise TypeError(f"{type(self).__name__}.to: parameters must stay floating point, got dtype {dtype.name}; "
                            f"use 'float16', 'float32' or 'float64'")
        for t in list(self.parameters()) + list(self.buffers()):
            data = t._data
            if device is not None:
                data = backend.to_device(data, device)
            if dtype is not None and data.dtype.kind == "f":
                data = data.astype(dtype)
            t._set_data(data)
            if t.grad is not None:
                t.grad = None  # a gradient of the old device/dtype would not fit
        return self

    def state_dict(self):
        """{name: array copy} of parameters and buffers (NumPy/CuPy arrays, as they are)."""
        out = {name: p._data.copy() for name, p in self.named_parameters()}
        out.update({name: b._data.copy() for name, b in self.named_buffers()})
        return out

    def load_state_dict(self, state_dict, strict=True):
        own = dict(self.named_parameters())
        own.update(self.named_buffers())
        missing = sorted(set(own) - set(state_dict))
        unexpected = sorted(set(state_dict) - set(own))
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        for name, value in state_dict.items():
            if name not in own:
                continue
            t = own[name]
            array = value._data if isinstance(value, Tensor) else value
            array = backend.to_device(backend.to_numpy(array) if not backend.is_array(array) else array, t.device)
            if array.shape != t.shape:
                raise ValueError(f"load_state_dict: {name} has shape {t.shape} here but {array.shape} in the state dict")
            t._set_data(array.astype(t.dtype, copy=True))
        return self

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, child in self.named_children():
            lines.append(f"  ({name}): " + repr(child).replace("\n", "\n  "))
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"

    def extra_repr(self):
        return ""


class Sequential(Module):
    """Modules applied one after another; indexable and iterable."""

    def __init__(self, *modules):
        self._list = list(modules)
        for i, m in enumerate(modules):
            setattr(self, str(i), m)  # registered as '0', '1', ... so names match PyTorch's

    def forward(self, x):
        for m in self._list:
            x = m(x)
        return x

    def __getitem__(self, i):
        return Sequential(*self._list[i]) if isinstance(i, slice) else self._list[i]

    def __len__(self):
        return len(self._list)

    def __iter__(self):
        return iter(self._list)


class ModuleList(Module):
    """A list of modules, registered as '0', '1', ... ."""

    def __init__(self, modules=()):
        self._list = []
        for m in modules:
            self.append(m)

    def append(self, module):
        setattr(self, str(len(self._list)), module)
        self._list.append(module)

    def __getitem__(self, i):
        return self._list[i]

    def __len__(self):
        return len(self._list)

    def __iter__(self):
        return iter(self._list)


class Linear(Module):
    """y = x @ weight.T + bias; weight (out_features, in_features), PyTorch's default init."""

    def __init__(self, in_features, out_features, bias=True, device=None):
        self.in_features, self.out_features = in_features, out_features
        bound = 1 / math.sqrt(in_features) if in_features else 0
        # PyTorch's kaiming_uniform_(a=sqrt(5)) reduces to U(-1/sqrt(in), 1/sqrt(in)); so does its bias
        self.weight = _uniform((out_features, in_features), bound, device)
        self.bias = _uniform((out_features,), bound, device) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class ReLU(Module):
    def forward(self, x):
        return x.relu()


class Tanh(Module):
    def forward(self, x):
        return x.tanh()


class Sigmoid(Module):
    def forward(self, x):
        return x.sigmoid()


class GELU(Module):
    def __init__(self, approximate="none"):
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)


class Dropout(Module):
    def __init__(self, p=0.5):
        if not 0 <= p <= 1:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class LayerNorm(Module):
    """Normalize over the last dims, then scale (weight, ones) and shift (bias, zeros)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None):
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = Parameter(ones(*self.normalized_shape, device=device)) if elementwise_affine else None
        self.bias = Parameter(zeros(*self.normalized_shape, device=device)) if elementwise_affine and bias else None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class Embedding(Module):
    """A table of num_embeddings vectors of size embedding_dim, initialised N(0, 1)."""

    def __init__(self, num_embeddings, embedding_dim, device=None):
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        host = generator().standard_normal((num_embeddings, embedding_dim)).astype("float32")
        self.weight = Parameter(tensor(host, device=device))

    def forward(self, input):
        return F.embedding(input, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class BatchNorm1d(Module):
    """Normalize each feature over the batch (N, C) or (N, C, L).

    In training it uses the batch's statistics and updates running_mean and running_var
    (unbiased) with `momentum`; in eval it uses the running statistics.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None):
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.weight = Parameter(ones(num_features, device=device)) if affine else None
        self.bias = Parameter(zeros(num_features, device=device)) if affine else None
        self.track_running_stats = track_running_stats
        if track_running_stats:
            self.running_mean = zeros(num_features, device=device)
            self.running_var = ones(num_features, device=device)
            self.num_batches_tracked = tensor(0, dtype="int64", device=device)

    def forward(self, x):
        if x.ndim not in (2, 3) or x.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm1d: expected input of shape (N, {self.num_features}) or "
                             f"(N, {self.num_features}, L), got {x.shape}")
        dims = (0,) if x.ndim == 2 else (0, 2)
        shape = (1, -1) if x.ndim == 2 else (1, -1, 1)
        if self.training or not self.track_running_stats:
            n = x.numel() // self.num_features
            if n <= 1:
                raise ValueError(f"BatchNorm1d: expected more than 1 value per channel when training, got "
                                 f"input of shape {x.shape}")
            mean = x.mean(dim=dims, keepdim=True)
            xc = x - mean
            var = (xc * xc).mean(dim=dims, keepdim=True)
            if self.training and self.track_running_stats and not is_recomputing():
                self._update_running_stats(mean, var, n)  # once per batch, not again when checkpointing recomputes
        else:
            mean = self.running_mean.reshape(shape)
            xc = x - mean
            var = self.running_var.reshape(shape)
        y = xc / (var + self.eps).sqrt()
        if self.weight is not None:
            y = y * self.weight.reshape(shape) + self.bias.reshape(shape)
        return y

    def _update_running_stats(self, mean, var, n):
        m = self.momentum
        with no_grad():
            self.running_mean._set_data((1 - m) * self.running_mean._data + m * mean._data.reshape(-1))
            unbiased = var._data.reshape(-1) * (n / (n - 1))
            self.running_var._set_data((1 - m) * self.running_var._data + m * unbiased)
            self.num_batches_tracked._set_data(self.num_batches_tracked._data + 1)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


__all__ = ["Parameter", "Module", "Sequential", "ModuleList", "Linear", "ReLU", "Tanh", "Sigmoid", "GELU",
           "Dropout", "LayerNorm", "Embedding", "BatchNorm1d"]
