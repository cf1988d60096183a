"""Activation checkpointing: keep a segment's inputs, drop its insides, recompute them in backward.

    y = mg.checkpoint(block, x)                       # one segment
    y = mg.checkpoint_sequential(layers, 4, x)        # a chain cut into 4 segments (the last runs normally)
    y = mg.checkpoint(block, x, policy=mg.checkpoint_policies.dots_saveable)  # keep the products, recompute the rest

How it works (NOTE [checkpoint]): the forward runs `function` with recording on but keeping
nothing (`keep_saved(False)`: the tape's choke point drops each record's saved arrays and notes
only their shapes, dtypes and devices), which tells us which tensors needing gradients it reached:
its inputs and the parameters it uses. One record, made by `apply` like any op's, replaces all of
it: it saves only the inputs (and the RNG state). Its backward re-runs `function` under
`recomputing()` (FLOPs tagged 'recompute' in mg.profile), keeping what it saves this time,
backpropagates the incoming gradients through that fresh graph, which frees itself as it goes,
and hands the inputs' gradients on; the parameters get theirs directly. The recompute replays
the same ops on the same numbers, and the gradients that leave it are added in the order a plain
run adds them (NOTE [checkpoint sums]), so gradients are bit-identical to a plain run.

Selective checkpointing (NOTE [selective checkpoint]): a policy picks, op by op, what the forward keeps
anyway; the recompute hands those ops' results back instead of running them. And with or without a policy,
the recompute runs only the ops whose results backward will read (NOTE [recompute what backward reads]).

The semantics are those of PyTorch's non-reentrant torch.utils.checkpoint (use_reentrant=False):
keyword arguments, non-tensor arguments and results, several outputs in tuples, lists and dicts,
gradients for the parameters used inside even when no input requires grad, nesting, retain_graph.

Read next: accumulate.py, the other trick.
"""
import contextlib
import functools
import hashlib
import math
import numbers
import types
import warnings
import weakref

from . import backend, ops
from .profiler import profile
from .backend.random import get_rng_state, set_rng_state
from .schedules import Chain, Rerun, check_segments, segment_bounds
from .tensor import (Tensor, apply, backward_within, caching, enable_grad, hand_over, is_grad_enabled,
                     is_keeping_saved, is_recomputing, keep_saved, mark, noting_reads, records_since, recomputing,
                     replaying)
from .tensor import _placeholders, _version_counter, _wrap  # NOTE [reads outside the tape], NOTE [version counters]

__all__ = ["checkpoint", "checkpoint_sequential", "checkpoint_segments", "checkpoint_policies", "measure_chain",
           "is_recomputing", "set_checkpoint_early_stop"]

DETERMINISM_CHECKS = ("default", "values", "none")
_NOT_IMPLEMENTED = ("context_fn", "debug", "early_stop")  # options of PyTorch's checkpoint that minigrad lacks
_early_stop = True  # set_checkpoint_early_stop's switch


@contextlib.contextmanager
def set_checkpoint_early_stop(enable):
    """`with set_checkpoint_early_stop(False):` checkpoints made inside recompute every op of their function in
    backward, not only what backward reads (NOTE [recompute what backward reads]). PyTorch's name: its early stop
    (on by default) ends a recompute once every saved tensor is back; minigrad's skips the same tail ops and
    also the last ops whose outputs the checkpoint keeps."""
    global _early_stop
    before, _early_stop = _early_stop, bool(enable)
    try:
        yield
    finally:
        _early_stop = before


def _fingerprint(array):
    return hashlib.sha1(backend.to_numpy(array).tobytes()).hexdigest()


def _meta(array):
    return array.shape, array.dtype, backend.device_of(array)


def _describe(meta):
    shape, dtype, device = meta
    return f"{dtype} {shape} on {device}"


def _map(fn, nest):
    """`nest` with fn applied to every value that is not a tuple, list or dict: checkpoint's arguments
    and results may be nests of these, as PyTorch's may."""
    if isinstance(nest, dict):
        return {k: _map(fn, v) for k, v in nest.items()}
    if isinstance(nest, (tuple, list)):
        items = [_map(fn, v) for v in nest]
        return type(nest)(*items) if hasattr(nest, "_fields") else type(nest)(items)  # a namedtuple too
    return fn(nest)


def _tensors(nest):
    """The distinct tensors in a nest, in order."""
    found = {}
    _map(lambda v: found.setdefault(id(v), v) if isinstance(v, Tensor) else None, nest)
    return list(found.values())


def _made_inside(result, start):
    """The distinct tensors of a function's result that its own records made (after `start`): what
    the checkpoint stands for. An input returned as it is, a tensor needing no gradient and any other
    value pass through unchanged."""
    return [t for t in _tensors(result) if t._ctx is not None and t._ctx.seq > start]


def _saved_by(records):
    """[(op name, (shape, dtype, device))] of every array these records keep (or kept, until keep()
    dropped it inside a checkpoint's forward), in the order they were made."""
    found = []
    for r in sorted(records, key=lambda r: r.seq):
        metas = r.saved_meta or tuple(_meta(a) for a in r.saved if backend.is_array(a))
        if isinstance(r, Checkpoint):  # its inputs; the outputs its policy remembers are none in a forward that
            metas = metas[:r.n_inputs]  # keeps nothing (a checkpoint inside another's forward)
        found.extend((r.name, m) for m in metas)
    return found


# ----------------------------------------------------------------------------- policies

# NOTE [selective checkpoint]: a policy decides, op by op, what a checkpoint keeps rather than recomputes:
# policy(op_name, input_shapes, output_shape) -> True keeps the op, as JAX's checkpoint policies (whose
# names these are) and PyTorch's selective activation checkpointing (torch.utils.checkpoint.
# create_selective_checkpoint_contexts). In the forward (OpCache.add, then tensor.keep), a kept op keeps
# what its backward reads, but its inputs: those come from the recompute, which makes them again or hands
# them back. An output is remembered (saved by the Checkpoint record) when the recompute will read it: an
# op that runs again reads it, or a kept op's backward does. In the recompute (OpCache.take, then
# tensor._replay) the same ops come in the same order, checked by name; a kept op does not run (no FLOPs):
# it returns the forward's output (or, when nothing reads it, a NaN placeholder of its shape) and its new
# record takes over what the forward's kept. The same arrays, so gradients are bit-identical.
# An op that records nothing (its inputs need no gradient: the causal mask's triu) always runs again, and
# a nested checkpoint's record is never kept: it recomputes its own insides. A cost of keeping it simple:
# remembered outputs are freed when the checkpoint's backward ends, with its inputs, not op by op. A value
# read outside the ops (w > 0, .item()) counts as a read (NOTE [reads outside the tape], tensor.py).
#
# NOTE [writes the tape does not record]: whatever the recompute hands back (a kept op's output, a remembered
# one) must be what the op made. A write under no_grad, through detach() or a view changes the array in place
# and the function runs it again in the recompute: handing back the written array would apply it twice. So in
# the forward, `before_write` copies the outputs that share the written memory, once, before the first such
# write (copy-on-write; writes inside checkpointed functions are rare), and `seal` remembers the copy instead.
# What cannot be repeated is refused: a write into the checkpoint's argument or a parameter inside the
# function (`check_unwritten`: the recompute would write it again), and a write after the forward into an
# output the recompute hands back (`take` checks its version, `watch`). The ops inside note the versions of
# what they read as in a plain run, though they keep nothing; the Checkpoint record checks them at the start
# of its backward, so a write that a plain run's backward refuses is refused here too.
#
# NOTE [recompute what backward reads]: with any policy, nothing_saveable too, the recompute runs an op again
# only if something needs what only running it makes. Backward needs of each op what it saved; an op whose
# saved arrays are all its inputs (a linear: x and W; a matmul; a dropout: its mask, drawn again by the
# caller) or nothing (an add, a view) can be replayed, its record rebuilt from the inputs, if nothing that
# runs again reads its output; an op that saved its output (tanh, exp, softmax) can be replayed if that
# output is one of the function's results, which the Checkpoint record then keeps (when the next segment
# keeps it as its input, as in a chain, that costs nothing). So `seal` decides last op first (`plan`): a
# chain of Linear and Tanh skips its last Linear and Tanh, a GPT block its MLP's c_proj, dropout and
# residual add. An op that keeps arrays of its own (LayerNorm's x-hat) runs again, and so does what it reads.
# The generator: an op that drew in its forward (sdpa's dropout notes rng_state) sets it, when replayed, to
# where the forward left it. set_checkpoint_early_stop(False) (PyTorch's name) and determinism_check='values'
# turn this off: every op runs again (the values check then compares a full recompute).

def nothing_saveable(op_name, input_shapes, output_shape):
    """Save nothing: recompute the whole function in backward (checkpoint's default)."""
    return False


def everything_saveable(op_name, input_shapes, output_shape):
    """Save every op: nothing runs again in backward; the memory is the plain run's, plus the inputs."""
    return True


DOTS = ("matmul", "linear")


def dots_saveable(op_name, input_shapes, output_shape):
    """Save the matrix products (ops 'matmul' and 'linear'), where the FLOPs are; recompute the cheap rest
    (pointwise ops, normalizations, softmax, dropout)."""
    return op_name in DOTS


SCORE_OPS = ("matmul", "mul", "div", "add", "sub", "masked_fill", "where", "softmax", "dropout")


def _scores(shape):
    """A (B, heads, T, T) array: attention scores or probabilities."""
    return len(shape) >= 4 and shape[-1] == shape[-2]


def save_anything_except_core_attention(op_name, input_shapes, output_shape):
    """Korthikanti et al. 2022's selective recomputation (Megatron-LM's "core attention"): save everything
    but the (B, heads, T, T) arrays, whose memory grows with T^2 for few FLOPs: q @ k^T, its scaling and
    mask, softmax, dropout, and the matmul with v that reads them.

    The rule, by op name and shapes: an op of attention's kinds (SCORE_OPS) whose output has at least 4
    dims with the last two equal, or a matmul with such an input, runs again. A (B, C, H, W) map with
    H == W would match too (minigrad has none); the fused scaled_dot_product_attention ('sdpa'), which keeps
    no T x T array, is always saved."""
    if op_name not in SCORE_OPS:
        return True
    return not (_scores(output_shape) or (op_name == "matmul" and any(_scores(s) for s in input_shapes)))


# mg.checkpoint_policies.dots_saveable, as jax.checkpoint_policies.dots_saveable
checkpoint_policies = types.SimpleNamespace(
    nothing_saveable=nothing_saveable, everything_saveable=everything_saveable, dots_saveable=dots_saveable,
    save_anything_except_core_attention=save_anything_except_core_attention)


class _Entry:
    """One op of a checkpoint's forward, in order."""
    __slots__ = ("name", "index", "record", "kept", "producers", "refill", "own_out", "extra", "n_saved", "out", "ref",
                 "meta", "slot", "flops", "rng_after", "vc", "snapshot", "watch")

    def __init__(self, name, index):
        self.name, self.index, self.record, self.kept, self.refill, self.own_out = name, index, None, False, (), None
        self.extra, self.producers = False, ()
        self.n_saved = self.out = self.ref = self.meta = self.slot = self.flops = self.rng_after = None
        self.vc = self.snapshot = self.watch = None  # NOTE [writes the tape does not record]


def _position(array, arrays, attrs):
    """Where `array` was handed to an op: its index among `arrays`, the name of the keyword argument, or None."""
    k = next((k for k, b in enumerate(arrays) if array is b), None)
    return k if k is not None else next((name for name, b in attrs.items() if array is b), None)


class OpCache:
    """What a checkpoint's forward notes for its recompute (NOTE [selective checkpoint], NOTE [recompute
    what backward reads]).

    The forward shows it every op (`add`, from tensor.apply) and tensor.keep asks it which records keep
    (`saves`); `seal` ends the forward: it decides which ops run again and gives the outputs to remember,
    which the Checkpoint record saves. The recompute takes the ops back in order (`take`): for an op that
    does not run again, the forward's record, its saved arrays with the inputs left to fill in, and the
    output to return."""

    def __init__(self, policy, who, count_flops=False, reads_only=True):
        self.policy, self.who, self.count_flops = policy, who, count_flops
        self.reads_only = reads_only  # False: every op the policy does not keep runs again (determinism 'values')
        self.entries = []     # one _Entry per op of the forward, in order
        self._out_of = {}     # id(output array) -> (weakref to it, its entry's index) (until seal)
        self._made = {}       # id(buffer) -> [(weakref to the buffer, entry)]: kept ops' outputs (until seal)
        self._chosen = set()  # ids of the records the policy keeps (until seal)
        self._read_out = set()  # entries whose outputs were read outside the ops (NOTE [reads outside the tape])
        self._written = {}      # id(version counter) -> it: tensors written outside the tape in the forward
        self.cursor, self.remembered, self._placeholders, self.diverged = 0, (), [], False
        self.checks = True  # its checkpoint checks the recompute (determinism_check is not 'none')

    # --- the forward
    def add(self, op, record, arrays, t, attrs):
        """`op` ran on `arrays` (and keyword arguments `attrs`) and gave tensor `t`; `record` is op if it records,
        else None."""
        name, out = op.name, t._data
        e = _Entry(name, len(self.entries))
        if self.count_flops:
            e.flops = sum(op.flops(arrays, out).values())
        e.producers = tuple(self._producer(a) for a in arrays)
        reads = arrays  # what the recompute may read: all its inputs, if it runs again
        if record is not None and name not in ("checkpoint", "checkpoint_output") and not any(out is a for a in arrays):
            saved = record.saved
            e.record, e.n_saved = record, len(saved)
            e.meta = (out.shape, out.dtype, backend.xp_of(out))  # for a placeholder, if it does not run again
            # where each saved array came from: an input (its index) or a keyword argument (its name: a dropout mask)
            e.refill = tuple((i, k) for i, a in enumerate(saved) if a is not None
                             for k in [_position(a, arrays, attrs)] if k is not None)
            e.own_out = next((i for i, a in enumerate(saved) if a is out), None)
            e.extra = len(e.refill) + (e.own_out is not None) < sum(a is not None for a in saved)
            if getattr(op, "rng_state", None) is not None:  # it drew from the generator (sdpa's dropout): a replay
                e.rng_after = get_rng_state()                 # moves the generator on as the forward did
            if self.policy is not nothing_saveable and self.policy(name, tuple(a.shape for a in arrays), out.shape):
                e.kept = True
                self._chosen.add(id(record))
                reads = [arrays[k] for _, k in e.refill if isinstance(k, int)]  # not run again: what backward reads
                buffer = backend.owner(out)
                self._made.setdefault(id(buffer), []).append((weakref.ref(buffer), e))
                e.ref = weakref.ref(out)  # weakly: an output nobody reads again may die as in a plain run
                e.vc = _version_counter(t)  # a write after the forward must not reach the recompute
        if self._made:  # a kept op's output may be among them (none without a policy)
            for a in reads:
                self._read(a)
        self._out_of[id(out)] = (weakref.ref(out), len(self.entries))
        self.entries.append(e)

    def _producer(self, array):
        """The index of the entry whose output `array` is, or None (an input, a parameter, a new array)."""
        hit = self._out_of.get(id(array))
        return hit[1] if hit is not None and hit[0]() is array else None

    def _read(self, array):
        """The recompute may read `array`: a kept op that made it (or the buffer it views) remembers it, until
        seal knows whether the reader runs again."""
        buffer = backend.owner(array)
        for ref, e in self._made.get(id(buffer), ()):
            if ref() is buffer and e.out is None and e.own_out is None:
                e.out = e.ref()  # still alive: it is being read. None: a dead view of a live buffer

    def read_outside(self, array):
        """Python code read `array`'s values outside the ops (NOTE [reads outside the tape]): the recompute must make
        it for real, to read it again."""
        i = self._producer(array)
        if i is not None:
            self._read_out.add(i)
        if self._made:
            self._read(array)

    def before_write(self, t):
        """Tensor t is about to be written in place outside the tape (NOTE [writes the tape does not record]): copy
        the outputs of this forward's ops that share its memory, as their ops made them, for the recompute."""
        self._written[id(_version_counter(t))] = t._vc
        buffer = backend.owner(t._data)
        for ref, i in self._out_of.values():
            out = ref()
            if i >= 0 and out is not None and self.entries[i].snapshot is None and backend.owner(out) is buffer:
                self.entries[i].snapshot = out.copy()

    def check_unwritten(self, who, inputs, leaves):
        """The forward wrote none of the checkpoint's inputs and parameters outside the tape: its recompute would
        write them again, and start from other values than the forward's."""
        for kind, tensors in (("argument", inputs), ("parameter (a leaf that requires grad)", leaves)):
            for t in tensors:
                if t._vc is not None and id(t._vc) in self._written:
                    raise RuntimeError(
                        f"checkpoint: '{who}' wrote in place into a tensor {kind} of shape {t.shape} ({t.dtype}) under "
                        f"no_grad or through .detach() or .data, which the tape does not record: its recompute in "
                        f"backward would run the write again, on values the forward already changed. Write into a copy "
                        f"inside the function (y = x.clone() is x * 1 here), or make the change before the checkpoint")

    def saves(self, record):
        """Does the policy keep this record (tensor.keep asks)?"""
        return id(record) in self._chosen

    def seal(self, outputs):
        """The forward is over, and `outputs` are the arrays of the function's results that its ops made.
        Decide which ops run again (NOTE [recompute what backward reads]); return the outputs that the
        recompute must be handed, for the Checkpoint record to save."""
        results = {self._producer(o._data): o for o in outputs}
        results.pop(None, None)
        runs, needed, _ = self.plan({i: o._data for i, o in results.items()}, self._read_out)
        for e, run, read in zip(self.entries, runs, needed):
            if run:
                e.record = e.out = e.vc = None
            elif not e.kept:
                o = results.get(e.index) if e.own_out is not None or read else None  # the Checkpoint keeps it
                e.out, e.vc = (o._data, _version_counter(o)) if o is not None else (None, None)
            elif not read and e.own_out is None:
                e.out = e.vc = None  # remembered while the forward ran, but no reader runs again after all
        remembered = []
        for e in self.entries:
            if e.snapshot is not None:  # written outside the tape after its op made it: hand back what the op made
                if e.out is not None or (e.kept and e.own_out is not None):
                    e.out = e.snapshot
                    e.vc = None  # a copy of its own: no one else can write it
                e.snapshot = None
            if e.out is not None:
                e.slot = len(remembered)
                remembered.append(e.out)
            if e.vc is not None:
                e.watch = (e.vc, e.vc.n)
            e.out = e.ref = e.vc = None
        self._out_of, self._made, self._chosen, self._read_out, self._written = {}, {}, set(), set(), {}
        return remembered

    def plan(self, results, read_after=()):
        """NOTE [recompute what backward reads], last op first. `results`: {entry index: array} of the outputs
        that the Checkpoint record can keep; `read_after`: entry indices whose outputs something after the
        function reads. Returns (runs again?, output read in the recompute?) per entry, and the set of entry
        indices (-1: the input, see `note_input`) whose outputs the recompute reads."""
        n = len(self.entries)
        needed = set(read_after)
        runs, read = [False] * n, [False] * n
        for i in range(n - 1, -1, -1):
            e = self.entries[i]
            read[i] = i in needed
            wants_out = e.own_out is not None or read[i]
            runs[i] = e.record is None or (not e.kept and (not self.reads_only or e.extra or
                                                           (wants_out and i not in results)))
            needed.update(p for p in (e.producers if runs[i] else [e.producers[k] for _, k in e.refill
                                                                   if isinstance(k, int)]) if p is not None)
        return runs, read, needed

    def note_input(self, array):
        """Let `plan` say whether the recompute reads `array` (as entry -1): measure_chain asks."""
        self._out_of[id(array)] = (weakref.ref(array), -1)

    # --- the recompute
    def start(self, remembered):
        self.cursor, self.remembered, self._placeholders, self.diverged = 0, remembered, [], False

    def take(self, name):
        """The recompute runs op `name`: None if it runs again; else (the forward's record, the arrays its new
        record saves, with None where its inputs go, [(position in them, input index)], the output to return)."""
        i, again = self.cursor, "A checkpointed function must compute the same thing twice."
        if self.diverged:
            return None
        if self.policy is nothing_saveable and (i >= len(self.entries) or self.entries[i].name != name):
            # no policy: run the rest again, and let the determinism check say what differs, in PyTorch's terms
            self.diverged = True
            return None
        if i >= len(self.entries):
            raise RuntimeError(f"checkpoint: recomputing '{self.who}' in backward ran more ops than its forward "
                               f"({len(self.entries)}); the next one is '{name}'. The recompute must run the same ops "
                               f"in the same order. {again}")
        e = self.entries[i]
        if e.name != name:
            raise RuntimeError(f"checkpoint: recomputing '{self.who}' in backward ran '{name}' as its op {i}, where "
                               f"the forward ran '{e.name}'. The recompute must run the same ops in the same order. "
                               f"{again}")
        self.cursor += 1
        if e.record is None:
            return None
        record, e.record = e.record, None
        if e.rng_after is not None:
            set_rng_state(e.rng_after)
        if e.watch is not None and e.watch[0].n != e.watch[1]:
            raise RuntimeError(f"checkpoint: recomputing '{self.who}' in backward hands back the output of '{name}' "
                               f"(its op {i}) as the forward made it, but it was modified in place after the forward "
                               f"(it is at version {e.watch[0].n}, it was at version {e.watch[1]}): the recompute "
                               f"would read the new values. Modify a copy instead (y = y * 2, not y.mul_(2)), or make "
                               f"the change after backward")
        if e.slot is not None:
            out = self.remembered[e.slot]
        elif e.kept and e.own_out is not None:
            out = record.saved[e.own_out]  # its record kept its output
        else:  # nothing in the recompute reads it: a placeholder, which no read may see (NOTE [reads outside the tape])
            shape, dtype, xp = e.meta
            out = xp.broadcast_to(xp.full((), float("nan"), dtype=dtype), shape)
            self._placeholders.append(out)
            _placeholders[id(out)] = (out, name, self)
        saved = list(record.saved) if e.kept else [None] * e.n_saved
        if e.own_out is not None:
            saved[e.own_out] = out
        return record, saved, e.refill, out

    def placeholder(self, array):
        """Is this one of the placeholders that `take` handed out?"""
        return any(array is p for p in self._placeholders)

    def close(self):
        """The recompute's forward has ended, or failed: its placeholders are no longer handed out."""
        for p in self._placeholders:
            _placeholders.pop(id(p), None)

    def finish(self):
        """The recompute is over: every op came back."""
        n, self.remembered = len(self.entries), ()
        if self.cursor != n and self.policy is not nothing_saveable:
            raise RuntimeError(f"checkpoint: recomputing '{self.who}' in backward ran {self.cursor} ops, its forward "
                               f"{n}. The recompute must run the same ops in the same order. A checkpointed function "
                               f"must compute the same thing twice.")


class _Input:
    """Where the i-th tensor input sat among the arguments: the record keeps its array, not the tensor."""

    def __init__(self, i):
        self.i = i


# NOTE [checkpoint outputs]: with one tensor output (what a Tensor-returning function gives), the
# Checkpoint record's output is that tensor. With several, its output is an empty array that ties
# them together, and each tensor output is the output of a small CheckpointOutput record on it,
# which hands its gradient back as {slot: gradient}. The tape adds gradients with `+`, which for
# these merges the slots, and runs the Checkpoint record once, after every consumer of every output:
# it gets all the outputs' gradients together (none for an output nobody used) and backpropagates
# them through one recompute, as the plain run does, where the gradients of several outputs meet at
# shared records before going on. A record per output, each recomputing, would do the work twice and
# sum in another order.


class _OutputGrads(dict):
    """{slot: gradient} of a checkpoint record with several outputs (NOTE [checkpoint outputs])."""

    def __add__(self, other):
        return _OutputGrads({**self, **other})  # one CheckpointOutput per slot: no slot comes twice


class Checkpoint(ops.Op):
    """The one record that stands for a checkpointed segment: it saves the segment's tensor inputs only.

    Its inputs are the segment's tensor arguments, then every leaf needing a gradient that the segment
    reached (its parameters): edges that make the outputs require grad. Its forward does no work: the
    segment already ran (keeping nothing), and its output is the segment's output (NOTE [checkpoint
    outputs] for several)."""
    name = "checkpoint"
    same_dtype = False  # token ids and float weights go in together
    recomputes = True   # with no tensor argument it saves nothing, but a second backward must still be refused

    def forward(self, *arrays, out, function, nest, n_inputs, rng_state, determinism_check, outputs, saved, cache,
                remembered, inside_versions):
        self.function, self.nest, self.rng_state, self.n_inputs = function, nest, rng_state, n_inputs
        self.inside_versions = inside_versions  # NOTE [writes the tape does not record]
        self.determinism_check = determinism_check
        self.outputs_meta = [_meta(o) for o in outputs]
        self.fingerprints = [_fingerprint(o) for o in outputs] if determinism_check == "values" else None
        self.forward_saved = saved  # what the segment's records saved, by metadata (None: not checked)
        self.cache = cache  # with a policy: what the recompute takes back (NOTE [selective checkpoint])
        self.save_for_backward(*arrays[:n_inputs], *remembered)  # the inputs, and outputs the policy remembers
        return out

    def flops(self, inputs, out):
        return {}  # the segment's own ops counted their forward FLOPs as they ran

    def backward_flops(self, grad, input_grads):
        return {}  # and the recompute's ops count theirs

    def backward(self, g):
        for record, vc, n, k in self.inside_versions:  # what the segment's ops read in the forward is unchanged
            if vc.n != n:
                what = f"its input {k}" if k >= 0 else "its output"
                raise RuntimeError(f"backward: '{record}' inside the checkpointed '{self._name()}' read {what} in the "
                                   f"forward, and it was modified in place after (it is at version {vc.n}, it was "
                                   f"read at version {n}): the recompute would run on the new values, and a plain "
                                   f"run's backward refuses this too. Modify a copy instead (x = x + 1, not x += 1), "
                                   f"or run the forward again after the change (an optimizer step belongs after "
                                   f"backward).")
        grads = g if isinstance(g, _OutputGrads) else {0: g}
        inputs = [_stand_in(node, array) for node, array in zip(self.next, self.saved[:self.n_inputs])]
        # the forward's records are taken back once; a second backward (retain_graph) recomputes everything
        cache, self.cache = self.cache, None
        if cache is not None:
            # the outputs it kept go to the recompute's records, which keep them only as long as they need them
            cache.start(hand_over(self, self.n_inputs))
            cache.checks = self.determinism_check != "none"
        outer_rng = get_rng_state()
        if self.rng_state is not None:
            set_rng_state(self.rng_state)  # dropout draws the same masks again
        try:
            with enable_grad(), keep_saved(True), recomputing(), caching(None), replaying(cache):
                start = mark()
                args, kwargs = _map(lambda v: inputs[v.i] if isinstance(v, _Input) else v, self.nest)
                outputs = _made_inside(self.function(*args, **kwargs), start)
        finally:
            set_rng_state(outer_rng)
            if cache is not None:
                cache.close()
        if cache is not None:
            cache.finish()
        self._check_determinism(outputs, start, cache)
        slots = sorted(grads)
        roots, gradients = [outputs[i] for i in slots], [grads[i] for i in slots]
        for r, gr in zip(roots, gradients):
            if r.shape != gr.shape:
                raise ValueError(f"checkpoint: the gradient of shape {gr.shape} does not match the shape {r.shape} "
                                 f"that recomputing '{self._name()}' gave; it computed something else in backward")
        # NOTE [checkpoint sums]: a plain run adds the gradients for a tensor one at a time, in the order
        # the tape makes them. For a tensor from before the segment (an input) the order is: those from
        # ops after the segment, then those from inside it, then those from before it. Summing the inside
        # ones first and handing on their sum (as a fresh leaf standing for the input once did) rounds
        # otherwise when an input is used twice inside and again after: (a + b) + c is not a + (b + c). So the
        # recompute's backward stops at the records made before it and returns their gradients unsummed,
        # and this record hands each input's list on: the tape adds them one by one, as the plain run.
        # Leaves (parameters) get theirs directly: every other use of a leaf is before or after the
        # segment, so adding into .grad as the recompute goes keeps the plain order too.
        leaving = backward_within(roots, gradients, start)
        input_grads = tuple(leaving.pop(node, None) if isinstance(node, ops.Op) else None for node in self.next)
        if leaving:
            raise RuntimeError(f"checkpoint: recomputing '{self._name()}' in backward reached a tensor from before "
                               f"the checkpoint that the forward did not ({', '.join(r.name for r in leaving)}'s "
                               f"output). A checkpointed function must compute the same thing twice.")
        return input_grads

    def _name(self):
        return getattr(self.function, "__name__", type(self.function).__name__)

    def _check_determinism(self, outputs, start, cache=None):
        name = self._name()
        again = "A checkpointed function must compute the same thing twice."
        if len(outputs) != len(self.outputs_meta):  # checked always: gradients could not be matched to outputs
            raise RuntimeError(f"checkpoint: recomputing '{name}' in backward gave {len(outputs)} tensor outputs "
                               f"that need gradients, but the forward gave {len(self.outputs_meta)}. {again}")
        if self.determinism_check == "none":
            return
        for i, (o, want) in enumerate(zip(outputs, self.outputs_meta)):
            if _meta(o._data) != want:
                which = f"output {i}" if len(outputs) > 1 else "its output"
                raise RuntimeError(f"checkpoint: recomputing '{name}' in backward gave {which} as shape {o.shape}, "
                                   f"dtype {o.dtype} on {o.device}, but the forward gave shape {want[0]}, dtype "
                                   f"{want[1]} on {want[2]}. {again}")
        got, want = _saved_by(records_since(outputs, start)), self.forward_saved
        if len(got) != len(want):
            raise RuntimeError(f"checkpoint: recomputing '{name}' in backward saved {len(got)} arrays for backward, "
                               f"but the forward saved {len(want)} (the determinism check compares them, as "
                               f"PyTorch's does). Does it branch on something that changed in between? {again}")
        for k, ((op_got, m_got), (op_want, m_want)) in enumerate(zip(got, want)):
            if (op_got, m_got) != (op_want, m_want):
                raise RuntimeError(f"checkpoint: recomputing '{name}' in backward saved, as its array {k} for "
                                   f"backward, {_describe(m_got)} (by '{op_got}'), but the forward saved "
                                   f"{_describe(m_want)} (by '{op_want}'). {again}")
        # an output that a selective checkpoint handed back as a placeholder is the forward's by construction
        fresh = [(o, f) for o, f in zip(outputs, self.fingerprints or ())
                 if cache is None or not cache.placeholder(o._data)]
        if any(_fingerprint(o._data) != f for o, f in fresh):
            raise RuntimeError(f"checkpoint: recomputing '{name}' in backward gave different values than the "
                               f"forward (determinism_check='values'). Does it draw random numbers from "
                               f"something other than minigrad's generator (mg.manual_seed), or read state that "
                               f"changed in between?")


class CheckpointOutput(ops.Op):
    """One of several tensor outputs of a checkpoint: its gradient goes back as {slot: gradient}
    (NOTE [checkpoint outputs])."""
    name = "checkpoint_output"

    def forward(self, token, *, out, slot):
        self.slot = slot
        return out

    def flops(self, inputs, out):
        return {}

    def backward_flops(self, grad, input_grads):
        return {}

    def backward(self, g):
        return (_OutputGrads({self.slot: g}),)


def _stand_in(node, array):
    """An input again, for the recompute: a leaf that needs a gradient is itself (as in PyTorch, which
    re-runs the function on the same arguments); any other is its saved array, pointing at the record
    that made it, so that the recomputed segment has the forward's edges, also to the same tensor
    captured by a closure."""
    if isinstance(node, Tensor):
        return node
    # _wrap, not a new tensor's door (_new): the array is the forward's, which the ledger counted where it was made
    # if that was in the profile, and must not count as new if it was not (NOTE [an old array, a new tensor])
    t = _wrap(array, node is not None)
    t._ctx = node
    return t


def _check_options(who, use_reentrant, determinism_check):
    if use_reentrant is not None and not isinstance(use_reentrant, bool):
        raise TypeError(f"{who}: use_reentrant must be None, False or True, got {use_reentrant!r}")
    if use_reentrant:
        raise ValueError(f"{who}: use_reentrant=True is not supported: minigrad implements only the non-reentrant "
                         f"variant (PyTorch's use_reentrant=False, the one PyTorch recommends) and follows its "
                         f"semantics. Pass use_reentrant=False, or leave it out.")
    if determinism_check not in DETERMINISM_CHECKS:
        raise ValueError(f"{who}: determinism_check must be 'default', 'values' or 'none', got {determinism_check!r}")


def _check_policy(who, policy):
    if policy is not None and not callable(policy):
        named = isinstance(policy, str) and hasattr(checkpoint_policies, policy)
        hint = f" (mg.checkpoint_policies.{policy})" if named else ""
        raise TypeError(f"{who}: policy must be None or a function policy(op_name, input_shapes, output_shape) -> "
                        f"bool, got {policy!r}{hint}; the ready ones are in mg.checkpoint_policies: "
                        f"{', '.join(vars(checkpoint_policies))}")


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, determinism_check="default", policy=None,
               **kwargs):
    """Run function(*args, **kwargs) keeping only its tensor inputs; recompute its insides during backward.

    PyTorch's signature and semantics (torch.utils.checkpoint.checkpoint, non-reentrant): the options are
    keyword-only and every other keyword argument goes to `function`. use_reentrant: None or False (True
    is refused: minigrad has only the non-reentrant variant). The arguments and the result may be
    tensors, other values, and tuples, lists and dicts of them: the result comes back with each tensor
    that the function's ops made replaced by the checkpoint's (gradients flow through every one of them,
    also when the loss uses only some); other values, and inputs returned as they are, pass through.
    Parameters used inside get gradients even when no input requires grad. Gradients are bit-identical
    to the plain run's (NOTE [checkpoint sums]).

    preserve_rng_state: replay minigrad's generator in the recompute, so dropout draws the same masks;
    with False a function that draws from it gets a warning, as its gradients would not be the forward's.
    determinism_check: 'default' compares, in backward, the recomputed outputs' shapes, dtypes and devices
    and the number and the metadata (shape, dtype, device) of every array the recompute saves for backward
    with the forward's, as PyTorch's does; 'values' also compares the outputs' bytes (a check PyTorch does
    not offer); 'none' skips them. Under no_grad it just runs the function. A tensor the function creates
    with requires_grad=True gets no .grad (the recompute makes a new one), and a tensor requiring grad that
    was computed before the checkpoint must be an argument, not only captured by a closure.

    policy: which ops to keep rather than recompute (NOTE [selective checkpoint]), a function
    policy(op_name, input_shapes, output_shape) -> bool, such as those in mg.checkpoint_policies:
    nothing_saveable (None, the default: recompute everything), dots_saveable, everything_saveable,
    save_anything_except_core_attention. PyTorch's selective checkpointing passes its policy through
    context_fn=create_selective_checkpoint_contexts(policy_fn); JAX's, as this, through policy=.
    """
    _check_options("checkpoint", use_reentrant, determinism_check)
    _check_policy("checkpoint", policy)
    if not callable(function):
        raise TypeError(f"checkpoint: the first argument must be a callable (a function or module), "
                        f"got {type(function).__name__}")
    lacking = [k for k in _NOT_IMPLEMENTED if k in kwargs]
    if lacking:
        raise TypeError(f"checkpoint: minigrad does not implement PyTorch's {', '.join(lacking)} (it always "
                        f"recomputes the whole function, as early_stop=False); remove the argument"
                        + ("; for selective checkpointing pass policy=, e.g. policy=mg.checkpoint_policies."
                           "dots_saveable" if "context_fn" in lacking else ""))
    if not is_grad_enabled():
        return function(*args, **kwargs)
    # inside another checkpoint's forward, which keeps nothing, nothing is noted: that one recomputes this whole
    # and determinism_check='values' (or early stop off) runs every op that the policy does not keep again
    reads_only = _early_stop and determinism_check != "values"
    who = getattr(function, "__name__", type(function).__name__)
    # without a policy and with reads_only off every op runs again, but the cache still sees the forward's writes
    cache = OpCache(policy or nothing_saveable, who, reads_only=reads_only) if is_keeping_saved() else None
    rng_state = get_rng_state()
    start = mark()
    # NOTE [checkpoint]: the segment's records are made, but keep nothing (but what a policy saves)
    with keep_saved(False), caching(cache), replaying(None), noting_reads(cache):
        result = function(*args, **kwargs)
    outputs = _made_inside(result, start)
    if not outputs:
        return result  # nothing to recompute: no record of the function's needs a gradient
    if not preserve_rng_state and get_rng_state() != rng_state:
        warnings.warn(f"checkpoint: '{who}' drew from minigrad's random generator (dropout?) but "
                      f"preserve_rng_state=False, so its recompute in backward draws other numbers and its "
                      f"gradients are not those of this forward. Leave preserve_rng_state=True.", stacklevel=2)
    inputs = _tensors((args, kwargs))
    index = {id(t): i for i, t in enumerate(inputs)}
    records = records_since(outputs, start)
    leaves = _leaves_reached(records, start, inputs)
    if cache is not None:
        cache.check_unwritten(who, inputs, leaves)
    remembered = cache.seal(outputs) if cache is not None else []
    attrs = dict(function=function, nest=_map(lambda v: _Input(index[id(v)]) if isinstance(v, Tensor) else v,
                                              (args, kwargs)),
                 n_inputs=len(inputs), rng_state=rng_state if preserve_rng_state else None,
                 determinism_check=determinism_check, outputs=[o._data for o in outputs],
                 saved=_saved_by(records) if determinism_check != "none" else None, cache=cache, remembered=remembered,
                 inside_versions=[(r.name, vc, n, k) for r in records for vc, n, _, k in r.versions] +
                 [v for r in records if isinstance(r, Checkpoint) for v in r.inside_versions])  # nested: theirs too
    if len(outputs) == 1:
        made = [apply(Checkpoint, *inputs, *leaves, out=outputs[0]._data, **attrs)]
    else:  # NOTE [checkpoint outputs]
        token = backend.xp_of(outputs[0]._data).empty((0,), dtype=outputs[0].dtype)
        record = apply(Checkpoint, *inputs, *leaves, out=token, **attrs)
        made = [apply(CheckpointOutput, record, out=o._data, slot=i) for i, o in enumerate(outputs)]
    for o, m in zip(outputs, made):  # the tensor the caller gets is the output: a write to it is a write to it
        if m._vc is None:
            m._vc = _version_counter(o)
    replace = {id(o): m for o, m in zip(outputs, made)}
    return _map(lambda v: replace.get(id(v), v) if isinstance(v, Tensor) else v, result)


def _leaves_reached(records, start, inputs):
    """Leaf tensors needing gradients that the segment's records (made after `start`) reach."""
    input_ids = {id(t) for t in inputs}
    input_ctxs = {id(t._ctx) for t in inputs if t._ctx is not None}
    leaves = {}
    for op in records:
        for nxt in op.next:
            if isinstance(nxt, Tensor):
                if id(nxt) not in input_ids:
                    leaves[id(nxt)] = nxt
            elif nxt is not None and nxt.seq <= start and id(nxt) not in input_ctxs:
                raise RuntimeError("checkpoint: the function uses a tensor that requires grad, was computed "
                                   f"before it (by '{nxt.name}') and is not one of its arguments; pass it as an "
                                   "argument, so that its gradient can flow")
    return list(leaves.values())


def checkpoint_sequential(functions, segments, input, use_reentrant=None, *, preserve_rng_state=True,
                          determinism_check="default", policy=None):
    """Run a chain of functions in `segments` segments; all but the last are checkpointed.

    As torch.utils.checkpoint.checkpoint_sequential (functions, then segments, then input; use_reentrant
    None or False): the last segment runs normally, since its activations are needed right away by
    backward. segments='sqrt' picks round(sqrt(n)), the split of Chen et al. (2016) that needs O(sqrt(n))
    activation memory. preserve_rng_state, determinism_check and policy go to each checkpoint.
    """
    _check_options("checkpoint_sequential", use_reentrant, determinism_check)
    _check_policy("checkpoint_sequential", policy)
    if isinstance(segments, Tensor):
        raise TypeError(f"checkpoint_sequential(functions, segments, input): got a Tensor of shape {segments.shape} "
                        f"as segments and {type(input).__name__} as input; the number of segments comes second and "
                        f"the input third, as in PyTorch: checkpoint_sequential(layers, 2, x)")
    functions = list(functions)
    n = len(functions)
    if n == 0:
        raise ValueError("checkpoint_sequential: got no functions")
    if isinstance(segments, str) and segments == "sqrt":
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
            x = checkpoint(run, x, preserve_rng_state=preserve_rng_state, determinism_check=determinism_check,
                           policy=policy)
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


def checkpoint_blocks(blocks, x, segments, *args, policy=None):
    """x through blocks in turn (block(x, *args)), the model's way of checkpointing its transformer blocks:
    segments False: plainly; True: every block under its own checkpoint (Hugging Face's gradient_checkpointing);
    a list [(lo, hi), ...]: each listed segment of blocks under one checkpoint, the others plainly.
    policy: what each checkpoint keeps rather than recomputes (NOTE [selective checkpoint]); None recomputes all."""
    if segments is True:
        segments = [(i, i + 1) for i in range(len(blocks))]
    ends = dict(segments or ())
    i = 0
    while i < len(blocks):
        if i in ends:
            x = checkpoint(functools.partial(_run_blocks, blocks[i:ends[i]]), x, *args, policy=policy)
            i = ends[i]
        else:
            x = blocks[i](x, *args)
            i += 1
    return x


def _run_blocks(blocks, x, *args):
    for block in blocks:
        x = block(x, *args)
    return x


def measure_chain(functions, input):
    """A schedules.Chain for these functions, measured by running each once on `input` (a forward
    with recording on, under mg.profile): its input's bytes, whether it saves its input or output,
    what else it saves, its forward FLOPs, and what a recompute runs of it (a schedules.Rerun, from the
    same rule as the checkpoint's, NOTE [recompute what backward reads])."""
    sizes, saves_in, saves_out, other, flops, reruns = [], [], [], [], [], []
    x = input
    with profile() as prof:
        for f in functions:
            start, flops_before = mark(), prof.flops("forward")
            cache = OpCache(nothing_saveable, getattr(f, "__name__", type(f).__name__), count_flops=True)
            cache.note_input(x._data)
            with caching(cache), noting_reads(cache):
                y = f(x)
            kept = prof.activations_kept(records_since(y, start))  # a saved weight stays a parameter
            sizes.append(x._data.nbytes)
            saves_in.append(kept.pop(prof.buffer_id(x._data), None) is not None)
            saves_out.append(kept.pop(prof.buffer_id(y._data), None) is not None)
            other.append(sum(kept.values()))
            flops.append(prof.flops("forward") - flops_before)
            reruns.append(_rerun_of(cache, y._data))
            x = y
    sizes.append(x._data.nbytes)
    return Chain(sizes, saves_in, saves_out, other, flops, reruns)


def _rerun_of(cache, out):
    """The Rerun of one function whose ops `cache` noted and whose output is `out`."""
    last = cache._producer(out)
    results = {} if last in (None, -1) else {last: out}

    def cost(results, read_after):
        runs, read, needed = cache.plan(results, set(read_after) | cache._read_out)  # reads outside the ops too
        flops = sum(e.flops for e, run in zip(cache.entries, runs) if run)
        keeps = last in results and not runs[last] and (cache.entries[last].own_out is not None or read[last])
        return flops, -1 in needed, keeps

    read_after = () if last in (None, -1) else (last,)
    return Rerun(last=cost(results, ()), unread=cost({}, ())[:2], read=cost({}, read_after)[:2])
