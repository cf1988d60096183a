"""Activation checkpointing: keep a segment's inputs, drop its insides, recompute them in backward.

    y = mg.checkpoint(block, x)                       # one segment
    y = mg.checkpoint_sequential(layers, 4, x)        # a chain cut into 4 segments (the last runs normally)

How it works (NOTE [checkpoint]): the forward runs `function` with recording on but keeping
nothing (`keep_saved(False)`: the tape's choke point drops each record's saved arrays), which
tells us which tensors needing gradients it reached: its inputs and the parameters it uses.
One record, made by `apply` like any op's, replaces all of it: it saves only the inputs (and
the RNG state). Its backward re-runs `function` under `recomputing()` (FLOPs tagged
'recompute' in mg.profile), keeping what it saves this time, backpropagates
the incoming gradient through that fresh graph, which frees itself as it goes, and hands the
inputs' gradients on; the parameters get theirs directly. Because the recompute replays the
same ops on the same numbers, gradients are bit-identical to a plain run.

Read next: accumulate.py, the other trick.
"""
import hashlib
import math
import numbers

from . import backend, ops
from .profiler import profile
from .random import get_rng_state, set_rng_state
from .schedules import Chain, check_segments, segment_bounds
from .tensor import (Tensor, apply, enable_grad, is_grad_enabled, keep_saved, mark, records_since, recomputing,
                     is_recomputing)

__all__ = ["checkpoint", "checkpoint_sequential", "checkpoint_segments", "measure_chain", "is_recomputing"]


def _fingerprint(array):
    return hashlib.sha1(backend.to_numpy(array).tobytes()).hexdigest()


class Checkpoint(ops.Op):
    """The one record that stands for a checkpointed segment: it saves the segment's tensor inputs only.

    Its inputs are the segment's tensor arguments, then every leaf needing a gradient that the segment
    reached (its parameters): edges that make the output require grad. Its forward does no work: the
    segment already ran (keeping nothing), and its output is this record's output."""
    name = "checkpoint"
    same_dtype = False  # token ids and float weights go in together

    def forward(self, *arrays, out, function, args, n_args, rng_state, determinism_check):
        self.function, self.args, self.rng_state = function, args, rng_state
        self.determinism_check = determinism_check
        self.out_shape, self.out_dtype = out.shape, out.dtype
        self.fingerprint = _fingerprint(out) if determinism_check == "values" else None
        self.save_for_backward(*arrays[:n_args])  # the inputs: all it keeps
        return out

    def flops(self, inputs, out):
        return {}  # the segment's own ops counted their forward FLOPs as they ran

    def backward_flops(self, grad, input_grads):
        return {}  # and the recompute's ops count theirs

    def backward(self, g):
        # the inputs again, as leaves, so that their gradients can be read off
        saved = iter(self.saved)
        requires = iter(self.needs_input_grad)
        args = [Tensor._from_array(next(saved), requires_grad=next(requires)) if a is None else a
                for a in self.args]
        outer_rng = get_rng_state()
        if self.rng_state is not None:
            set_rng_state(self.rng_state)  # dropout draws the same masks again
        try:
            with enable_grad(), keep_saved(True), recomputing():
                out = self.function(*args)
        finally:
            set_rng_state(outer_rng)
        self._check_determinism(out)
        out.backward(g)  # parameters inside get their .grad here, in the usual order
        grads = [(a.grad._data if a.grad is not None else None) for a in args if isinstance(a, Tensor)]
        return tuple(grads) + (None,) * (len(self.next) - len(grads))  # the leaves got theirs directly

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
    if not is_grad_enabled():
        return function(*args)
    rng_state = get_rng_state() if preserve_rng_state else None
    start = mark()
    with keep_saved(False):  # NOTE [checkpoint]: the segment's records are made, but keep nothing
        out = function(*args)
    if not isinstance(out, Tensor):
        raise TypeError(f"checkpoint: the function must return one Tensor, got {type(out).__name__}")
    if not out.requires_grad or out._ctx is None or out._ctx.seq <= start:
        return out  # nothing to recompute: the function made no record (it returned an input as it is)
    tensors = [a for a in args if isinstance(a, Tensor)]
    return apply(Checkpoint, *tensors, *_leaves_reached(out, start, tensors), out=out._data, function=function,
                 args=[None if isinstance(a, Tensor) else a for a in args], n_args=len(tensors),
                 rng_state=rng_state, determinism_check=determinism_check)


def _leaves_reached(out, start, args):
    """Leaf tensors needing gradients that the segment's records (made after `start`) reach."""
    arg_ids = {id(a) for a in args}
    arg_ctxs = {id(a._ctx) for a in args if a._ctx is not None}
    leaves = {}
    for op in records_since(out, start):
        for nxt in op.next:
            if isinstance(nxt, Tensor):
                if id(nxt) not in arg_ids:
                    leaves[id(nxt)] = nxt
            elif nxt is not None and nxt.seq <= start and id(nxt) not in arg_ctxs:
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
    sizes, saves_in, saves_out, other, flops = [], [], [], [], []
    x = input
    with profile() as prof:
        for f in functions:
            start, flops_before = mark(), prof.flops("forward")
            y = f(x)
            kept = prof.activations_kept(records_since(y, start))  # a saved weight stays a parameter
            sizes.append(x._data.nbytes)
            saves_in.append(kept.pop(prof.buffer_id(x._data), None) is not None)
            saves_out.append(kept.pop(prof.buffer_id(y._data), None) is not None)
            other.append(sum(kept.values()))
            flops.append(prof.flops("forward") - flops_before)
            x = y
    sizes.append(x._data.nbytes)
    return Chain(sizes, saves_in, saves_out, other, flops)
