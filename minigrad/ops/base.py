"""What every op shares: the Op base class, ShapeError, and the shape helpers ops of several kinds use.

An op never sees a Tensor. `forward(*arrays, **attrs)` computes the output and calls
`self.save_for_backward(...)` for exactly the arrays its backward will need; `backward(grad)`
returns one gradient per input, or None for an input whose `needs_input_grad` is False
(the data batch, a frozen weight): that work is skipped, not done and thrown away.

An op instance is also the record the tape keeps (see tensor/tape.py): its saved arrays are the
activation memory that checkpointing trades for compute. Its FLOPs follow NOTE [FLOP convention] below.

Read next: pointwise.py, the elementwise ops (on the reading path: Mul, then Tanh).
"""
import numpy as np

from ..backend import reduce_sum


# NOTE [FLOP convention]: a matrix product counts 2*m*n*k (one multiply and one add per term),
# reported under op 'matmul' whichever op issues it (matmul, linear). Every other op counts
# FLOPs per element, by its class's `flops_per_element = (forward, (backward per input, ...))`:
# `forward` per output element; `backward` per element of the incoming gradient, for each input
# whose gradient is computed (an input that needs no gradient costs nothing), plus one add per
# element summed away when that input was broadcast. Exp, log, tanh, erf and sqrt count as one
# FLOP each, as most counters do. Ops that only move data (reshape, index, cat, ...) count zero
# (None: any number of inputs, all zero). Reductions and the fused ops (linear, layer_norm, ...)
# override Op.flops/backward_flops next to their code. docs/ledger.md shows flops_table(); a test
# keeps the two equal. tests/test_flops_vs_torch.py checks the 'matmul' counts against PyTorch's FlopCounterMode.


# NOTE [learner's pieces]: learner mode (learner.py) runs the engine on the pieces a learner wrote in the exercises.
# The engine reads them from this table, as JAX's engine reads a primitive's rules from its tables
# (ad.primitive_jvps[p]): each place a piece may stand in (Exp's, Tanh's, Log's, Pow's and Matmul's backward,
# unbroadcast, Softmax and LogSoftmax, the tape walk, AdamW's step, the accumulation loop, the checkpoint, the loss
# scaler's rule) asks `learned` first while the table holds anything. learner.use fills the table and empties it
# again; no class or module of the engine changes. A piece returns NotImplemented for a call its exercise does not
# cover, and the engine's own runs on. With learner mode off the table is empty, and each place pays one test of a
# dict's truth.
LEARNED = {}  # name ('Tanh.backward', 'unbroadcast', ...) -> the learner's piece


def learned(name, *args, **kwargs):
    """The learner's piece `name` on these arguments (NOTE [learner's pieces]), or NotImplemented: the engine's own."""
    piece = LEARNED.get(name)
    return NotImplemented if piece is None else piece(*args, **kwargs)


class Op:
    """Base class of every op. Subclasses set `name` and define forward and backward."""
    name = "op"
    same_dtype = True      # the tape checks that every input has one dtype and device
    returns_view = False   # its output may be a view of an input (reshape, transpose, a slice)
    takes_number = ()      # the sides where, beside a 2-byte float, it takes a Python number as written (NOTE [a
    #                        number beside 2-byte floats], pointwise.py)
    runs_once = False      # its backward runs once, as one that saved arrays does (NOTE [memory drains],
    #                        tensor/tape.py), even where it saved none: a checkpoint's makes again what it did not save
    needs_input_grad = ()  # one bool per input, set by the tape before forward runs
    saved = ()             # what save_for_backward named, while the record keeps it
    # set by the tape (tensor/tape.py) when the op is recorded:
    next = ()              # per input: the op that made it, the leaf tensor itself, or None (no grad)
    seq = 0                # creation order: the tape runs records newest first
    released = False       # True once backward has freed `saved` (unless retain_graph)
    versions = ()          # per kept array a tensor holds: (its version counter, count when kept, index, input)
    retained = None        # weakref to the output, when someone called retain_grad() on it
    packed = None          # under a pair of saved-tensor hooks, what its pack returned (NOTE [saved tensors hooks]):
    #                        the user's (autograd/graph.py), or keep_saved(False)'s inside a checkpoint's forward

    def save_for_backward(self, *arrays):
        """Name exactly the arrays that backward will read. The tape's `keep` (tensor/tape.py, NOTE [one
        choke point]) then decides whether the record keeps them, and counts them."""
        self.saved = arrays

    def forward(self, *arrays, **attrs):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, grad):
        raise NotImplementedError(f"{type(self).__name__}.backward")

    # FLOPs (NOTE [FLOP convention]); the profiler calls these, the engine never does
    counts_flops = True  # False: no arithmetic of its own, so no FLOPs reported, not even a row of zeros (a
    #                      checkpoint's record, whose segment's ops count theirs)

    def _table(self):
        row = getattr(self, "flops_per_element", NotImplemented)
        if row is NotImplemented:
            raise NotImplementedError(f"{self.name}: no FLOP formula; give {type(self).__name__} a "
                                      f"flops_per_element or override flops/backward_flops")
        return row or (0, ())

    def flops(self, inputs, out):
        """{op name: FLOPs} of this forward, from the input and output arrays."""
        if not self.counts_flops:
            return {}
        return {self.name: self._table()[0] * out.size}

    def backward_flops(self, grad, input_grads):
        """{op name: FLOPs} of this backward: only the input gradients actually computed."""
        if not self.counts_flops:
            return {}
        per_input = self._table()[1]
        n = sum(per * grad.size + max(grad.size - gi.size, 0)
                for per, gi in zip(per_input, input_grads) if gi is not None)
        return {self.name: n}


class ShapeError(ValueError, RuntimeError):
    """Shapes that do not fit: a ValueError, and a RuntimeError as PyTorch raises them, so that either
    `except` catches it."""


class IndexShapeError(ShapeError, IndexError):
    """A ShapeError where PyTorch raises an IndexError (a 2-d index to index_select, a max along an empty dim) or
    minigrad did (narrow past the end, PyTorch's RuntimeError): `except IndexError` catches it too."""


def flops_table():
    """{op name: flops_per_element} of every op counted per element (NOTE [FLOP convention]), with each
    variant an op switches to as its own row (GELU's tanh approximation as 'gelu_tanh', dropout with a float
    mask as 'dropout_float_mask'): the table docs/ledger.md shows."""
    table, stack = {}, [Op]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        for attr, row in vars(cls).items():  # flops_per_element, and variants such as flops_per_element_tanh
            if attr == "flops_per_element":
                table[cls.name] = row
            elif attr.startswith("flops_per_element_"):
                table[cls.name + attr[len("flops_per_element"):]] = row
    return table


def refuse_bool(op, *arrays, instead="convert it with .long() or .float() first"):
    """PyTorch's ops that refuse a bool tensor (neg, abs, relu, matmul; subtraction: tensor.py's _binary) refuse it
    here too, where NumPy would compute something (abs of a bool, a logical matmul) or raise its own message."""
    if any(a.dtype == bool for a in arrays):
        raise TypeError(f"{op}: a bool tensor is not supported, as in PyTorch; {instead}")


def broadcast_shapes(*shapes):
    """The shape that NumPy broadcasting gives these shapes, or None when they do not broadcast."""
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        return None


def unbroadcast(grad, shape):
    """Sum `grad` down to `shape`: the backward of NumPy broadcasting."""
    if LEARNED and (mine := learned("unbroadcast", grad, shape)) is not NotImplemented:  # NOTE [learner's pieces]
        return mine
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and grad.shape[lead + i] != 1)
    out = reduce_sum(grad, axes)  # a 2-byte float adds up in float32 (NOTE [2-byte sums])
    return out.reshape(shape) if shape else out  # a 0-d sum as it is: NumPy's scalar, not a view of it on 'meta'


def normalize_dims(op, dim, ndim, shape=None):
    """dim (None, (), int or tuple, possibly negative) -> a sorted tuple of axes, or a clear IndexError.
    None and () mean every dim, as in PyTorch's reductions."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return tuple(range(ndim))
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{op}: dim must be an int or a tuple of ints, got {dim!r} (tensor of shape {shape})")
        if not lo <= d <= hi:
            raise IndexError(f"{op}: dim {d!r} is out of range for a tensor of shape {shape} "
                             f"(expected an int in [{lo}, {hi}])")
    axes = [int(d) % ndim if ndim else 0 for d in dims]
    if len(set(axes)) != len(axes):
        raise IndexError(f"{op}: dim {tuple(dims)} names the same dim twice (tensor of shape {shape})")
    return tuple(sorted(axes)) if ndim else ()  # a 0-d tensor has no axes to reduce


def normalize_dim(op, dim, ndim, shape=None, name="dim"):
    """One dim (an int, possibly negative), as normalize_dims gives it: where PyTorch takes one int (cumsum, softmax,
    cat, topk, split, ...), a tuple, a list or None is its TypeError, not a first dim or every dim read silently."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}: argument '{name}' must be one int, got {dim!r} (tensor of shape {shape}); this "
                        f"op works along one dim at a time")
    return normalize_dims(op, dim, ndim, shape)


def keepdim_shape(shape, axes):
    return tuple(1 if i in axes else n for i, n in enumerate(shape))
