"""Activation checkpointing: keep a segment's inputs, drop its insides, recompute them in backward.

    y = mg.checkpoint(block, x)                       # one segment
    y = mg.checkpoint_sequential(layers, 4, x)        # a chain cut into 4 segments (the last runs normally)

How it works (NOTE [checkpoint]): the forward runs `function` with recording on but keeping
nothing (tensor._keep_saved = False: each record's saved arrays are dropped at the choke point),
which tells us which tensors needing gradients it reached: its inputs and the parameters it
uses. One record replaces all of it: it saves only the inputs (and the RNG state). Its backward
re-runs `function` with recording on (FLOPs tagged 'recompute' in mg.profile), backpropagates
the incoming gradient through that fresh graph, which frees itself as it goes, and hands the
inputs' gradients on; the parameters get theirs directly. Because the recompute replays the
same ops on the same numbers, gradients are bit-identical to a plain run.

Read next: schedules.py, which decides where to cut a chain.
"""
import hashlib
import math
import numbers
from contextlib import contextmanager

from . import backend, ops
from . import tensor as _tape
from .random import get_rng_state, set_rng_state
from .tensor import Tensor, enable_grad


@contextmanager
def _flag(name, value):
    old = getattr(_tape, name)
    setattr(_tape, name, value)
    try:
        yield
    finally:
        setattr(_tape, name, old)


def is_recomputing():
    """True while a checkpoint recomputes its forward (BatchNorm skips its running statistics then)."""
    return _tape._recomputing


def _fingerprint(array):
    return hashlib.sha1(backend.to_numpy(array).tobytes()).hexdigest()


class Checkpoint(ops.Op):
    """The one record that stands for a checkpointed segment: it saves the segment's inputs only."""
    name = "checkpoint"

    def flops(self, inputs, out):
        return {}  # the segment's own ops counted their forward FLOPs as they ran

    def backward_flops(self, grad, input_grads):
        return {}  # and the recompute's ops count theirs

    def backward(self, g):
        # rebuild the inputs from the saved arrays: leaves, so that their gradients can be read off
        saved = iter(self.saved)
        args = [Tensor._from_array(next(saved), requires_grad=rg) if rg is not None else a
                for a, rg in zip(self.args, self.arg_requires_grad)]
        outer_rng = get_rng_state()
        if self.rng_state is not None:
            set_rng_state(self.rng_state)  # dropout draws the same masks again
        profiler = _tape.active_profiler()
        phase = profiler.phase if profiler is not None else None
        if profiler is not None:
            profiler.phase = "recompute"
        try:
            with enable_grad(), _flag("_recomputing", True), _flag("_keep_saved", True):
                out = self.function(*args)
        finally:
            if profiler is not None:
                profiler.phase = phase
            set_rng_state(outer_rng)
        self._check_determinism(out)
        _tape.backward(out, gradient=g)  # parameters inside get their .grad here, in the usual order
        grads = [None] * len(self.next)
        for k, edge in self.edge_of_arg.items():
            grads[edge] = args[k].grad._data if args[k].grad is not None else None
        return tuple(grads)

    def _check_determinism(self, out):
        if self.determinism_check == "none":
            return
        name = getattr(self.function, "__name__", type(self.function).__name__)
        if not isinstance(out, Tensor) or out.shape != self.out_shape or out.dtype != self.out_dtype:
            got = f"shape {out.shape}, dtype {out.dtype}" if isinstance(out, Tensor) else type(out).__name__
            raise RuntimeError(f"checkpoint: recomputing '{name}' in backward gave {got}, but the forward gave "
                               f"shape {self.out_shape}, dtype {self.out_dtype}. A checkpointed function must "
                               f"compute the same thing twice.")
        if self.fingerprint is not None and _fingerprint(out._data) != self.fingerprint:
            raise RuntimeError(f"checkpoint: recomputing '{name}' in backward gave different values than the "
                               f"forward (determinism_check='values'). Does it draw random numbers from "
                               f"something other than minigrad's generator (mg.manual_seed), or read state that "
                               f"changed in between?")


def checkpoint(function, *args, preserve_rng_state=True, determinism_check="default"):
    """Run function(*args) keeping only its inputs; recompute its insides during backward.

    PyTorch's semantics (torch.utils.checkpoint.checkpoint, non-reentrant): parameters used inside
    get gradients even when no input requires grad. determinism_check: 'default' compares the
    recomputed output's shape and dtype with the forward's; 'values' also compares its bytes (a
    check PyTorch does not offer); 'none' skips both. Under no_grad it just runs the function.
    A tensor the function creates with requires_grad=True gets no .grad (the recompute makes a
    new one): pass such a tensor in as an argument.
    """
    if not callable(function):
        raise TypeError(f"checkpoint: the first argument must be a callable (a function or module), "
                        f"got {type(function).__name__}")
    if determinism_check not in ("default", "values", "none"):
        raise ValueError(f"checkpoint: determinism_check must be 'default', 'values' or 'none', "
                         f"got {determinism_check!r}")
    if not _tape.is_grad_enabled():
        return function(*args)
    rng_state = get_rng_state() if preserve_rng_state else None
    start = next(_tape._seq)
    with _flag("_keep_saved", False):
        out = function(*args)
    if not isinstance(out, Tensor):
        raise TypeError(f"checkpoint: the function must return one Tensor, got {type(out).__name__}")
    if not out.requires_grad or out._ctx is None or out._ctx.seq <= start:
        return out  # nothing to recompute: the function made no record (it returned an input as it is)

    # the edges of the one record: inputs that require grad, then every parameter reached inside
    edges, edge_of_arg = [], {}
    for k, a in enumerate(args):
        if isinstance(a, Tensor) and a.requires_grad:
            edge_of_arg[k] = len(edges)
            edges.append(a._ctx if a._ctx is not None else a)
    for leaf in _leaves_reached(out, start, args):
        edges.append(leaf)

    op = Checkpoint()
    op.function, op.rng_state = function, rng_state
    op.args = [None if isinstance(a, Tensor) else a for a in args]
    op.arg_requires_grad = [a.requires_grad if isinstance(a, Tensor) else None for a in args]
    op.edge_of_arg = edge_of_arg
    op.out_shape, op.out_dtype = out.shape, out.dtype
    op.determinism_check = determinism_check
    op.fingerprint = _fingerprint(out._data) if determinism_check == "values" else None
    op.needs_input_grad = tuple(True for _ in edges)
    op.save_for_backward(*(a._data for a in args if isinstance(a, Tensor)))  # the inputs: all it keeps
    if not _tape._keep_saved:  # nested inside another checkpoint's forward: keep nothing either
        op.saved = ()
    op.next, op.seq = tuple(edges), next(_tape._seq)
    result = Tensor._from_array(out._data, requires_grad=True)
    result._ctx = op
    profiler = _tape.active_profiler()
    if profiler is not None:
        profiler.on_forward(op, [a._data for a in args if isinstance(a, Tensor)], out._data, recorded=True)
    return result


def _leaves_reached(out, start, args):
    """Leaf tensors needing gradients that the segment's records (numbered after `start`) reach."""
    arg_ids = {id(a) for a in args if isinstance(a, Tensor)}
    arg_ctxs = {id(a._ctx) for a in args if isinstance(a, Tensor) and a._ctx is not None}
    leaves, seen, stack = {}, {id(out._ctx)}, [out._ctx]
    while stack:
        op = stack.pop()
        for nxt in op.next:
            if nxt is None or id(nxt) in seen:
                continue
            seen.add(id(nxt))
            if isinstance(nxt, Tensor):
                if id(nxt) not in arg_ids:
                    leaves[id(nxt)] = nxt
            elif nxt.seq > start:
                stack.append(nxt)
            elif id(nxt) not in arg_ctxs:
                raise RuntimeError("checkpoint: the function uses a tensor that requires grad, was computed "
                                   f"before it (by '{nxt.name}') and is not one of its arguments; pass it as an "
                                   "argument, so that its gradient can flow")
    return list(leaves.values())


def checkpoint_sequential(functions, segments, input, preserve_rng_state=True, determinism_check="default"):
    """Run a chain of functions in `segments` segments; all but the last are checkpointed.

    As torch.utils.checkpoint.checkpoint_sequential: the last segment runs normally, since its
    activations are needed right away by backward. segments='sqrt' picks round(sqrt(n)), the
    split of Chen et al. (2016) that needs O(sqrt(n)) activation memory.
    """
    functions = list(functions)
    n = len(functions)
    if n == 0:
        raise ValueError("checkpoint_sequential: got no functions")
    if segments == "sqrt":
        segments = max(1, round(math.sqrt(n)))
    if isinstance(segments, numbers.Integral) and not isinstance(segments, bool):
        segments = int(segments)
    if not isinstance(segments, int) or isinstance(segments, bool) or not 1 <= segments <= n:
        raise ValueError(f"checkpoint_sequential: segments must be an int from 1 to the number of functions "
                         f"({n}), or 'sqrt'; got {segments!r}")
    bounds = segment_bounds(n, segments)
    x = input
    for i, (lo, hi) in enumerate(bounds):
        run = _run_chain(functions[lo:hi])
        if i < len(bounds) - 1:
            x = checkpoint(run, x, preserve_rng_state=preserve_rng_state, determinism_check=determinism_check)
        else:
            x = run(x)
    return x


def segment_bounds(n, segments):
    """[(lo, hi), ...]: n functions cut into `segments` runs, as PyTorch cuts them (size n // segments,
    the last one taking what is left)."""
    size = n // segments
    bounds = [(i * size, (i + 1) * size) for i in range(segments - 1)]
    return bounds + [((segments - 1) * size, n)]


def _run_chain(functions):
    def run(x):
        for f in functions:
            x = f(x)
        return x
    run.__name__ = "segment(" + ", ".join(getattr(f, "__name__", type(f).__name__) for f in functions) + ")"
    return run


def checkpoint_segments(functions, segments, input, children=None, **kwargs):
    """Run a chain cut into explicit segments [(lo, hi), ...], all but the last checkpointed, as a
    schedules.Plan says (pass plan.segments, plan.children). children[k], a Plan, cuts checkpointed
    segment k again when it is recomputed: nested checkpoints (recursive, revolve)."""
    from .schedules import check_segments
    functions = list(functions)
    check_segments(segments, 0, len(functions), "checkpoint_segments")
    return _run_segments(functions, segments, children or {}, input, kwargs)


def _run_segments(functions, segments, children, x, kwargs):
    for k, (lo, hi) in enumerate(segments):
        if k == len(segments) - 1:
            return _run_chain(functions[lo:hi])(x)
        child = children.get(k)
        if child is None:
            run = _run_chain(functions[lo:hi])
        else:
            def run(t, child=child):
                return _run_segments(functions, child.segments, child.children, t, kwargs)
            run.__name__ = f"segment({lo}..{hi}, cut again)"
        x = checkpoint(run, x, **kwargs)


def measure_chain(functions, input):
    """A schedules.Chain for these functions, measured by running each once on `input` (a forward
    with recording on, under mg.profile): its input's bytes, whether it saves its input or output,
    what else it saves, its forward FLOPs."""
    from .profiler import ACTIVATIONS, _owner, profile
    from .schedules import Chain
    sizes, saves_in, saves_out, other, flops = [], [], [], [], []
    x = input
    with profile() as prof:
        for f in functions:
            start, flops_before = next(_tape._seq), prof.flops("forward")
            y = f(x)
            owners = {}  # the activation buffers its records saved (a saved weight stays a parameter)
            for op in _records_since(y, start):
                for a in op.saved:
                    if backend.is_array(a) and prof._buffers[id(_owner(a))][2] == ACTIVATIONS:
                        owners[id(_owner(a))] = _owner(a).nbytes
            x_id, y_id = id(_owner(x._data)), id(_owner(y._data))
            sizes.append(x._data.nbytes)
            saves_in.append(owners.pop(x_id, None) is not None)
            saves_out.append(owners.pop(y_id, None) is not None)
            other.append(sum(owners.values()))
            flops.append(prof.flops("forward") - flops_before)
            x = y
    sizes.append(x._data.nbytes)
    return Chain(sizes, saves_in, saves_out, other, flops)


def _records_since(out, start):
    """The records made after `start` that `out` depends on."""
    found, stack = [], [out._ctx] if out._ctx is not None else []
    seen = set()
    while stack:
        op = stack.pop()
        if id(op) in seen or op.seq <= start:
            continue
        seen.add(id(op))
        found.append(op)
        stack.extend(n for n in op.next if isinstance(n, ops.Op))
    return found
