"""The Tensor and the tape: how ops get recorded, and how backward walks them in reverse.

An op applied to tensors, with grad mode on and some input requiring grad, becomes a record:
the op instance (ops.py) with its saved arrays and an edge per input to the record that made
that input (or to the leaf tensor itself). Records point only at records and leaves, never at
intermediate tensors, so an intermediate's array lives only as long as the user holds it or an
op saved it: saved arrays are exactly the activation memory.

Follow one saved array: an op's forward names it (`save_for_backward`, ops.py); `apply` hands the
record to `keep`, the one choke point that keeps or drops it and tells the profiler; `_run_tape`
reads it in the op's backward and then `release` frees it.

Read next: functional.py (softmax, cross_entropy, ...), then nn.py and optim.py.
"""
import collections
import functools
import heapq
import itertools
import math
import operator
import sys
import weakref

import numpy as np

from .. import backend, ops
from ..ops import ShapeError
from ..random import draw, generator

# ----------------------------------------------------------------------------- the tape's switches

class _Switches:
    """Everything the tape's behaviour depends on, in one place. Only the context managers below set
    the first six; `backward` sets `taken`; each has a public query. Slots: every op reads several of them
    (NOTE [per-op overhead]), and a slot is read faster than an attribute looked up in a dict."""
    __slots__ = ("grad_enabled", "keep_saved", "recomputing", "profiler", "caching", "replaying", "taken")

    def __init__(self):
        self.grad_enabled = True  # record ops (no_grad turns it off)
        self.keep_saved = True    # records keep what their ops saved (checkpoint's forward turns it off)
        self.recomputing = False  # a checkpoint is re-running its forward during backward
        self.profiler = None      # the active mg.profile: the tape reports to it
        self.caching = None       # a selective checkpoint's forward: the cache whose policy picks ops that keep
        self.replaying = None     # its recompute: the cache that hands those ops' results back
        #                           (NOTE [selective checkpoint])
        self.taken = None         # the running backward's gradient arrays that someone owns
        #                           (NOTE [who owns a gradient])


_on = _Switches()


class _Mode:
    """Sets one switch for a `with` block (or a decorated function) and restores it after, even on error."""
    switch = None

    def __init__(self, value):
        self.value, self.prev = value, []  # a stack: the same object may be entered again inside itself

    def __enter__(self):
        self.prev.append(getattr(_on, self.switch))
        setattr(_on, self.switch, self.value)
        return self

    def __exit__(self, *exc):
        setattr(_on, self.switch, self.prev.pop())

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


class _GradMode(_Mode):
    """no_grad and enable_grad take no value, so, as in PyTorch, they decorate a function with or without
    parentheses: `@mg.no_grad()` and `@mg.no_grad` alike."""
    switch = "grad_enabled"

    def __new__(cls, fn=None):
        if fn is None:
            return super().__new__(cls)
        if not callable(fn):
            raise TypeError(f"{cls.__name__}: takes no arguments, got {fn!r}; write `with mg.{cls.__name__}():`, "
                            f"`@mg.{cls.__name__}()` or `@mg.{cls.__name__}`")
        return cls()(fn)  # @mg.no_grad, bare: Python passed the function itself


class no_grad(_GradMode):
    """Turn recording off: ops run, nothing is recorded or saved."""

    def __init__(self):
        super().__init__(False)


class enable_grad(_GradMode):
    """Turn recording back on inside a no_grad block."""

    def __init__(self):
        super().__init__(True)


class keep_saved(_Mode):
    """keep_saved(False): records are made, but keep none of the arrays their ops saved. A checkpoint's
    forward runs this way: it learns which tensors the segment reaches and keeps nothing."""
    switch = "keep_saved"


class recomputing(_Mode):
    """A checkpoint re-running its forward during backward (the profiler counts its FLOPs as
    'recompute'; BatchNorm does not update its running statistics a second time)."""
    switch = "recomputing"

    def __init__(self):
        super().__init__(True)


class profiling(_Mode):
    """Report every op, saved array, gradient and new tensor to `listener`, a Listener (mg.profile enters this)."""
    switch = "profiler"


class Listener:
    """NOTE [what the tape reports]: every report the tape (and the optimizer and the collectives) makes to the
    listener of `with profiling(listener):`, in one place: each does nothing here, and mg.profile (profiler.py)
    overrides them to keep its ledger of bytes, FLOPs and time. Where each is called, in the order of a step:

      apply         on_inputs (it also starts the op's clock) ... on_forward; stop_clock for an op a
                    checkpoint's recompute replays without running it
      keep          on_save: a record keeps its saved arrays (activation memory)
      hand_over     on_hand_over: a checkpoint gives the outputs it kept to its recompute's records
      _run_tape     start_clock, on_backward, stop_clock: a record's backward ran
      release       on_release: a record frees its saved arrays
      _set_grad     on_grad: a .grad comes into being
      _new          on_new_tensor: a tensor that is no op's output (factories, comparisons, .data = ...)
      optim.py      on_step (before and after an optimizer's step), start_clock and stop_clock around it
      distributed   on_communication: bytes sent and received by a collective

    The tape reads `_on.profiler` once per op and calls only when a listener is active: without one, none of
    this runs."""

    def on_inputs(self, inputs):
        """An op is about to run on these tensors; returns the clock that on_forward stops."""

    def start_clock(self):
        """Returns a clock for stop_clock."""

    def stop_clock(self, clock, op=None, phase=None):
        """The time since start_clock belongs to op (a name) in phase ('forward', 'backward', 'step', ...)."""

    def on_forward(self, op, inputs, out, clock):
        """op ran on inputs and made the array out (op is a record if it recorded); stops its clock."""

    def on_save(self, record):
        """record keeps record.saved for its backward (through keep, the one choke point)."""

    def on_hand_over(self, record, arrays):
        """record (a checkpoint) gives these saved arrays to its recompute's records before its backward."""

    def on_release(self, record):
        """record's saved arrays are about to be dropped: its backward ran (they are still there)."""

    def on_backward(self, op, grad, input_grads):
        """op's backward turned grad into input_grads (one per input, None where none)."""

    def on_grad(self, array):
        """array became a tensor's .grad."""

    def on_new_tensor(self, t):
        """t was made around an array, or given a new one, outside any op."""

    def on_step(self, optimizer, done):
        """optimizer's step is about to run (done False) or has run (done True)."""

    def on_communication(self, op, sent, received):
        """A collective op sent and received these many bytes."""


class caching(_Mode):
    """caching(cache): a selective checkpoint's forward (checkpoint.OpCache, or None for none). Each op is
    shown to the cache, and a record that its policy saves keeps what its backward reads even inside
    keep_saved(False) (NOTE [selective checkpoint])."""
    switch = "caching"


class replaying(_Mode):
    """replaying(cache): a selective checkpoint's recompute. An op that the cache's policy saved in the
    forward is not run again: it returns the forward's result and reuses what its record kept."""
    switch = "replaying"


def is_grad_enabled():
    return _on.grad_enabled


def is_keeping_saved():
    return _on.keep_saved


def is_recomputing():
    return _on.recomputing


def active_profiler():
    return _on.profiler


def active_cache():
    """The selective checkpoint cache that the current forward fills (caching) or the recompute replays."""
    return _on.caching if _on.caching is not None else _on.replaying


# ----------------------------------------------------------------------------- dtypes

FLOAT_DTYPES = tuple(np.dtype(d) for d in ("float16", "float32", "float64"))
DTYPES = FLOAT_DTYPES + tuple(np.dtype(d) for d in ("int8", "int16", "int32", "int64", "uint8", "bool"))


def normalize_dtype(dtype):
    """'float32', np.float32 or np.dtype('float32') -> np.dtype('float32'); refuses what minigrad lacks."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"unknown dtype {dtype!r}: minigrad knows {', '.join(d.name for d in DTYPES)}") from None
    if dt not in DTYPES:
        raise TypeError(f"dtype {dt.name} is not supported: minigrad knows {', '.join(d.name for d in DTYPES)}")
    return dt


# ----------------------------------------------------------------------------- the tape

_seq = itertools.count()


# NOTE [per-op overhead]: apply runs once per op and _run_tape's loop once per record, so on small arrays their
# Python is most of a step's time (bench (b), bench/NOTES.md 'per-op overhead'). So these two build lists, not
# generators, over an op's one to three inputs (a generator costs more to start than such a list to build), and
# keep's and the tape's loops count their index by hand: enumerate and zip make an iterator object and a tuple
# per item, 2.7% of a tiny model's step in instructions.
def apply(op_cls, *inputs, **attrs):
    """Run one op on tensors and, when recording, keep it on the tape as the output's record."""
    op = op_cls()
    arrays = [t._data for t in inputs]
    if len(arrays) > 1 and op.same_dtype:
        _check_same_device_and_dtype(op_cls.name, arrays)
    needs = tuple([t._requires_grad for t in inputs])  # NOTE [per-op overhead]
    record = _on.grad_enabled and True in needs
    if _on.profiler is not None:
        clock = _on.profiler.on_inputs(inputs)  # and starts the op's clock: NOTE [self time] (profiler.py)
    op.needs_input_grad = needs if record else (False,) * len(inputs)
    if _on.replaying is not None:
        hit = _on.replaying.take(op_cls.name)  # None: this op runs again
        if hit is not None:
            t = _replay(op_cls, inputs, attrs, *hit)
            if _on.profiler is not None:
                _on.profiler.stop_clock(clock)  # not run: its time is the checkpoint's that replays it
            return t
    if _placeholders:  # NOTE [reads outside the tape]: an op that runs reads its inputs
        for a in arrays:
            _check_real(a, op_cls.name, op=True)
    try:
        out = op.forward(*arrays, **attrs)
    except (ValueError, IndexError, TypeError) as e:
        raise _explain(op_cls.name, e, arrays) from None
    if isinstance(out, np.generic):
        out = np.asarray(out)
    if record and out.dtype.kind != "f":  # integer and bool results have no gradient (a cast to int64)
        record = False
    t = Tensor.__new__(Tensor)  # _wrap(out, record), written out: every op makes one (NOTE [per-op overhead])
    t._data, t._requires_grad, t._grad, t._ctx, t._vc = out, record, None, None, None
    if op.returns_view and out.base is not None:  # a view of its input shares the input's version counter
        _share_version(t, inputs)
    if _on.caching is not None:
        _on.caching.add(op, op if record else None, arrays, t, attrs)  # before keep(): its policy decides
    if record:
        op.next = tuple([i._ctx if i._ctx is not None else (i if i._requires_grad else None) for i in inputs])
        op.seq = next(_seq)
        t._ctx = op
        keep(op, inputs, t)
    if _on.profiler is not None:
        _on.profiler.on_forward(op, inputs, out, clock)  # stops it first
    return t


def keep(record, inputs, out):
    """NOTE [one choke point]: every array a record keeps for its backward passes through here.

    The op's forward named what its backward will read (ops.Op.save_for_backward); this decides
    whether the record keeps it (not inside a checkpoint's forward, which recomputes it later),
    notes the version of each kept array that a tensor holds (NOTE [version counters]), and tells
    the profiler, which counts it as activation memory until `release`."""
    if not record.saved:
        return
    versions = []
    i = -1  # counted by hand, not enumerate (NOTE [per-op overhead]), as k below
    for a in record.saved:
        i += 1
        if a is None:
            continue
        if a is out._data:
            k, t = -1, out  # -1: the record's output
        else:
            k = -1
            for t in inputs:
                k += 1
                if t._data is a:
                    break
            else:
                continue  # an array of the op's own (LayerNorm's rstd, a dropout mask): no tensor can write it
        vc = t._vc
        if vc is None:
            vc = t._vc = _Version()
        versions.append((vc, vc.n, i, k))
    if versions:
        record.versions = versions  # inside a checkpoint's forward too: its record checks them (checkpoint.py)
    if not _on.keep_saved:
        # what it would have kept, by metadata only: a checkpoint's recompute must keep the same
        record.saved_meta = tuple((a.shape, a.dtype, backend.device_of(a)) for a in record.saved if backend.is_array(a))
        if _on.caching is None or not _on.caching.saves(record):
            record.saved = ()
            return
        # NOTE [selective checkpoint] (checkpoint.py): its policy keeps this op. It keeps what its backward
        # reads but its inputs, which the recompute hands it again (made again, or remembered)
        record.saved = tuple(None if any(a is t._data for t in inputs) else a for a in record.saved)
    if _on.profiler is not None:
        _on.profiler.on_save(record)


# The recompute's half of NOTE [selective checkpoint] and NOTE [recompute what backward reads] (checkpoint.py):
# an op that does not run again becomes a new record, a copy of the forward's op (its attributes: dim, the GELU
# variant, ...) whose saved arrays are what the forward's record kept (if the policy kept it), with the inputs it
# saved taken from this run. The forward's record hands its arrays over and is released: no moment counts them
# twice or not at all. No FLOPs: the op did not run.
_TAPE_FIELDS = ("saved", "next", "seq", "released", "versions", "retained", "saved_meta")


def _replay(op_cls, inputs, attrs, forward, saved, refill, out):
    """The record of an op that a checkpoint's recompute does not run again."""
    op = op_cls()
    vars(op).update({k: v for k, v in vars(forward).items() if k not in _TAPE_FIELDS})
    t = _wrap(out, True)
    op.next = tuple(i._ctx if i._ctx is not None else (i if i._requires_grad else None) for i in inputs)
    op.seq = next(_seq)
    t._ctx = op
    for i, k in refill:  # the inputs it saved (by index), or keyword arguments (by name): this run's
        saved[i] = inputs[k]._data if isinstance(k, int) else attrs[k]
        if _placeholders:
            _check_real(saved[i], op_cls.name)
    op.save_for_backward(*saved)
    keep(op, inputs, t)
    release(forward)
    return t


def hand_over(record, first):
    """NOTE [one choke point]: a record gives up its saved arrays but the `first` ones before its backward runs,
    and returns them: a checkpoint hands the outputs it kept to the records of its recompute, which keep them as
    long as they need them. The profiler stops counting them for this record."""
    given = record.saved[first:]
    if _on.profiler is not None:
        _on.profiler.on_hand_over(record, given)
    record.saved = record.saved[:first]
    return given


def release(record):
    """NOTE [memory drains]: drop a record's saved arrays once its backward has run, so that activation
    memory falls during backward as it rose during forward."""
    if _on.profiler is not None:
        _on.profiler.on_release(record)  # first: while the arrays still exist
    record.released = bool(record.saved) or record.recomputes  # a record that kept nothing can run again
    record.saved = ()


# NOTE [version counters]: a record reads its saved arrays during backward, maybe long after the
# forward; if one was written in place in between (an optimizer step, `x += 1`), the gradient would
# be computed at the new values, silently. So every tensor's storage has a counter of in-place writes,
# shared by the tensors that alias it (views, detach()); `keep` notes each kept array's count, and
# backward refuses to run a record whose arrays have been written since, naming the op and the array.
class _Version:
    n = 0           # writes so far
    aliases = None  # weak references to the tensors that share the storage, once one does

    def alias(self, src, t):
        """t shares src's storage (a view, a detach()): it shares this counter."""
        t._vc = self
        if self.aliases is None:
            self.aliases = [weakref.ref(src)]
        elif len(self.aliases) > 8:
            self.aliases = [r for r in self.aliases if r() is not None]
        self.aliases.append(weakref.ref(t))

    def shared(self, t):
        """Does a tensor other than t share the storage now?"""
        return self.aliases is not None and any(r() is not None and r() is not t for r in self.aliases)


def _version_counter(t):
    if t._vc is None:
        t._vc = _Version()
    return t._vc


def _share_version(view, inputs):
    base = backend.owner(view._data)
    src = next((t for t in inputs if backend.owner(t._data) is base), None)
    if src is not None:
        _version_counter(src).alias(src, view)


def mark_written(tensors):
    """Tell the tape that these tensors' arrays were written in place by code outside it (an optimizer's
    step writes p's array directly): a record that saved one refuses to run backward."""
    for t in tensors:
        _version_counter(t).n += 1


def _written_since(record, now, n, i, k):
    """The error for a record whose saved array i (its input k, or its output when k is -1) was written in place
    since the forward: it is at version `now`, it was saved at version n."""
    what, a = f"its input {k}" if k >= 0 else "its output", record.saved[i]
    return RuntimeError(f"backward: '{record.name}' saved {what} (shape {a.shape}, {a.dtype.name}) for its backward, "
                        f"and it was modified in place after the forward (it is at version {now}, it was "
                        f"saved at version {n}): the gradient would be computed at the new values. Modify a "
                        f"copy instead (x = x + 1, not x += 1), or run the forward again after the change "
                        f"(an optimizer step belongs after backward).")


def _explain(name, e, arrays):
    """NumPy's error from inside an op, restated with the op's name, shapes, dtype and device."""
    if str(e).startswith(name):
        return e
    if "broadcast" in str(e) and len(arrays) == 2:
        return ShapeError(f"{name}: shapes {arrays[0].shape} and {arrays[1].shape} do not broadcast: "
                          f"compared from the right, each pair of dims must be equal or one of them 1. "
                          f"Reshape one of them (e.g. .reshape(...) to add a size-1 dim) first")
    shapes = ", ".join(str(a.shape) for a in arrays)
    # NumPy's ValueErrors inside an op are shape problems; not NumPy's own subclasses, which name NumPy's internals
    kind = IndexError if isinstance(e, IndexError) else ShapeError if isinstance(e, ValueError) else TypeError
    return kind(f"{name}: {e} (input shapes {shapes}, dtype {arrays[0].dtype}, device {backend.device_of(arrays[0])})")


def _check_same_device_and_dtype(name, arrays):
    first = arrays[0]
    for a in arrays[1:]:
        if type(a) is not type(first):
            devices = sorted({backend.device_of(x) for x in arrays})
            raise RuntimeError(f"{name}: inputs are on different devices ({' and '.join(devices)}); "
                               f"move them to one device with .to(device) first")
        if a.dtype != first.dtype:
            dtypes = sorted({x.dtype.name for x in arrays})
            raise TypeError(f"{name}: inputs have different dtypes ({' and '.join(dtypes)}); minigrad does not "
                            f"promote silently: convert one with .to('{first.dtype.name}') first")


# NOTE [reads outside the tape]: the tape sees what ops read, but Python code also reads values outside any op: a
# comparison (w > 0, for a mask), .item(), .numpy(), an index's values, an in-place write the tape does not record.
# A checkpoint's recompute skips the ops whose outputs backward does not read (NOTE [recompute what backward
# reads], checkpoint.py) and hands out a NaN placeholder for each; such a read must never see one. So every read
# outside the ops goes through `_values`: in a checkpoint's forward it tells the checkpoints running (`_noting`,
# innermost last) that this array is read, and their recompute makes it for real; in a recompute, if the array is
# a placeholder after all (the function read something else the second time), it raises, naming the op and the
# fix. `_placeholders` holds what the recomputes running now handed out without running, by id; `apply` refuses to
# run an op on one. Both are empty outside checkpoints: two falsy checks per read.
_noting = []
_placeholders = {}


def _values(t, who):
    """t's array, for a read outside the ops by `who` (NOTE [reads outside the tape])."""
    a = t._data
    for cache in _noting:
        cache.read_outside(a)
    if _placeholders:
        _check_real(a, who)
    return a


def _before_write(t, who):
    """t's array is about to be written in place by code the tape does not record: a read of the old values, and
    the checkpoints running copy what their recompute must hand back as the op made it (NOTE [reads outside the
    tape], NOTE [selective checkpoint])."""
    a = _values(t, who)
    for cache in _noting:
        cache.before_write(t)
    return a


def _check_real(a, who, op=False):
    hit = _placeholders.get(id(a))
    if hit is not None and hit[0] is a:
        cache = hit[2]
        if op and cache.diverged and cache.checks:
            return  # it ran other ops than its forward: its determinism check says what changed (checkpoint.py)
        if cache.diverged:
            raise RuntimeError(f"{who}: a checkpoint's recompute of '{cache.who}' in backward ran other ops than its "
                               f"forward, and this reads the output of '{hit[1]}', which it did not run: a "
                               f"checkpointed function must compute the same thing twice (determinism_check='none' "
                               f"skips the check that says what changed)")
        raise RuntimeError(f"{who}: a checkpoint's recompute of '{cache.who}' did not run '{hit[1]}' (backward does not "
                           f"need its output) and this reads that output's values: the function read values outside "
                           f"minigrad's ops that its forward did not read (its reads must be the same both times). "
                           f"Read them the same way in both runs, or recompute every op: wrap the checkpoint in "
                           f"`with mg.set_checkpoint_early_stop(False):`")


class noting_reads:
    """`with noting_reads(cache):` a checkpoint's forward: reads outside the ops are told to the cache
    (NOTE [reads outside the tape])."""

    def __init__(self, cache):
        self.cache = cache

    def __enter__(self):
        if self.cache is not None:
            _noting.append(self.cache)

    def __exit__(self, *exc):
        if self.cache is not None:
            _noting.remove(self.cache)


def mark():
    """A number below every record made from now on: records_since(out, mark()) finds what came after."""
    return next(_seq)


def records_since(out, start=-1):
    """The records that tensor `out` (or each tensor of a list) depends on, made after `start` (all by default)."""
    found, seen = [], set()
    stack = [t._ctx for t in (out if isinstance(out, (list, tuple)) else [out]) if t._ctx is not None]
    while stack:
        op = stack.pop()
        if op in seen or op.seq <= start:
            continue
        seen.add(op)
        found.append(op)
        for n in op.next:
            if n is not None and not isinstance(n, Tensor):
                stack.append(n)
    return found


def backward(root, gradient=None, retain_graph=False):
    """Backpropagate from `root` into every leaf that requires grad (Tensor.backward)."""
    if not root._requires_grad:
        raise RuntimeError("backward: this tensor does not require grad and has no record on the tape. "
                           "Did you create the weights with requires_grad=True, or compute it under no_grad()?")
    if gradient is None:
        if root._data.size != 1:
            raise RuntimeError(f"backward: a gradient can be implied only for a scalar output, but this tensor has "
                               f"shape {root.shape}. Reduce it first (.sum() or .mean()), or pass gradient= a "
                               f"tensor of shape {root.shape}")
        g = backend.ones_like(root._data)  # NOTE [a broadcast scalar] (backend.py)
    else:
        if not isinstance(gradient, Tensor) and not backend.is_array(gradient):
            raise TypeError(f"backward: gradient must be a Tensor of the output's shape {root.shape}, got "
                            f"{type(gradient).__name__}; for example gradient=mg.full({root.shape}, {gradient!r})")
        g = gradient._data if isinstance(gradient, Tensor) else gradient
        if g.shape != root.shape:
            raise ShapeError(f"backward: gradient of shape {g.shape} does not match the output's shape {root.shape}")
        _check_same_device_and_dtype("backward", [root._data, g])
    # NOTE [who owns a gradient]: `taken`, the arrays that a .grad or someone else already holds, g first
    outer = _on.taken  # a backward inside a backward (checkpoint's recompute) shares the outer's
    if outer is None:
        _on.taken = taken = {id(g): g}
        lent = ()
    else:
        taken, lent = outer, _lend(outer, [g])
    try:
        if root._ctx is None:
            _accumulate(root, g, taken)
        else:
            _run_tape([root], [g], retain_graph, taken)
    finally:
        _give_back(taken, lent)
        _on.taken = outer


def backward_within(roots, gradients, start):
    """Backpropagate from several tensors at once through the records made after `start` only: a
    checkpoint's recompute (checkpoint.py, NOTE [checkpoint sums]). Leaves get their .grad as usual; a
    record made before `start` does not run: its gradients come back unsummed, {record: [gradient, ...]}
    in the order they were made, for the checkpoint to hand on."""
    outer = _on.taken  # a checkpoint's record runs inside a backward: share its set
    _on.taken = taken = outer if outer is not None else {}
    lent = _lend(taken, gradients)  # NOTE [who owns a gradient]
    leaving = {}
    try:
        _run_tape(roots, gradients, False, taken, start, leaving)
    finally:
        _give_back(taken, lent)
        _on.taken = outer
    return leaving


def _lend(taken, gradients):
    """Note the gradients a backward starts from as held by its caller (NOTE [who owns a gradient]); returns
    those that were not noted yet."""
    lent = []
    for g in gradients:  # one array may come twice (Add hands one gradient to two outputs): noted, lent, once
        if id(g) not in taken:
            taken[id(g)] = g
            lent.append(g)
    return lent


def _give_back(taken, lent):
    """When that backward ends: `taken` holds its arrays no longer (a checkpoint's recompute runs inside a
    backward that goes on, and its gradients should die when their last user drops them)."""
    for g in lent:
        del taken[id(g)]


def _run_tape(roots, gradients, retain_graph, taken, start=-1, leaving=None):
    # NOTE [the tape]: run the records newest first. Records are numbered as they are made and every input is
    # made before the ops that use it, so a record's number is above those of the records that made its inputs:
    # always taking the newest record that has a gradient waiting runs each record after every record that
    # consumes its output. A heap of those records, by number (PyTorch's engine orders its ready queue by
    # sequence number the same way), finds it; a record that no gradient reaches is never visited. No
    # recursion, so a chain of any length works.
    grads = {t._ctx: g for t, g in zip(roots, gradients)}  # gradients in flight, by the record that made the tensor
    waiting = [(-op.seq, op) for op in grads if op is not None and op.seq > start]
    heapq.heapify(waiting)
    profiler = _on.profiler  # read once (NOTE [per-op overhead]): a profile is a `with` block, so one that a
    # record's backward enters (a checkpoint's recompute) has ended when it returns
    while waiting:
        op = heapq.heappop(waiting)[1]
        g = grads.pop(op)
        if profiler is not None:
            clock = profiler.start_clock()  # NOTE [self time] (profiler.py): until its gradients are handed on
        if op.released:
            raise RuntimeError(f"backward: trying to backward through the graph a second time: the arrays that "
                               f"'{op.name}' saved were freed by the first backward. Pass retain_graph=True to "
                               f"the first backward if you need a second one, or run the forward again.")
        if op.saved_meta and not op.saved:
            raise RuntimeError(f"backward: '{op.name}' was recorded inside a checkpoint's forward, which keeps "
                               f"nothing for backward. A checkpointed function must return its tensors as they "
                               f"are or in tuples, lists and dicts (checkpoint does not look inside other objects)")
        for vc, n, i, k in op.versions:  # NOTE [version counters]
            if vc.n != n:
                raise _written_since(op, vc.n, n, i, k)
        if op.retained is not None:  # a tensor that asked retain_grad(), if it is still alive
            kept = op.retained()
            if kept is not None:
                _accumulate(kept, g, taken)
        input_grads = op.backward(g)
        if not retain_graph:
            release(op)
        if profiler is not None:
            # NumPy hands back a 0-d result as a scalar: made an array here, the ledger counts the one the tape holds
            input_grads = tuple(backend.as_array(gi) for gi in input_grads)
            profiler.on_backward(op, g, input_grads)
        j = -1
        for nxt in op.next:  # with input_grads[j]: not zip (NOTE [per-op overhead]); an op returns one per input
            j += 1
            gi = input_grads[j]
            if nxt is None or gi is None:
                continue
            for part in (gi if type(gi) is list else (gi,)):  # a checkpoint's list: one by one (NOTE [checkpoint sums])
                if isinstance(nxt, Tensor):
                    _accumulate(nxt, part, taken)
                elif nxt.seq <= start:  # made before the checkpoint's segment: its record hands these on
                    leaving.setdefault(nxt, []).append(part)
                elif nxt in grads:  # two uses of one tensor: their gradients summed into an array from the pool
                    grads[nxt] = backend.pooled(backend.xp_of(part).add, grads[nxt], part)
                else:
                    grads[nxt] = part
                    heapq.heappush(waiting, (-nxt.seq, nxt))
        if profiler is not None:
            profiler.stop_clock(clock, op.name, "backward")


def _accumulate(t, g, taken):
    """Add g into t.grad. The first time, take g itself unless it is a view or already taken."""
    # NOTE [who owns a gradient]: an op may hand one array to several inputs (Add gives g to
    # both), and an array that becomes a leaf's .grad may still be waiting in `grads` for
    # another record. So a .grad is taken without a copy only when no one else has it, and a
    # .grad taken during this backward is added to in place only once no one else holds its
    # array any more (its reference count, as PyTorch's AccumulateGrad checks use_count(): a
    # tied weight's second gradient then needs no second buffer); a .grad that this leaf owns
    # alone (from an earlier backward) is added to in place. `taken` is {id(array): array}: it holds
    # those arrays until the backward ends (they are alive then anyway, in a .grad or with whoever
    # passed them), so that no id in it is reused by a new array meanwhile. Not weak references:
    # this runs for every leaf of every step, and a weakref cost more than the rest of the check.
    if not t._requires_grad:  # requires_grad_(False) after the graph was built: PyTorch skips it too
        return
    if isinstance(g, np.generic):  # NumPy hands back a 0-d result as a scalar
        g = np.asarray(g)
    if g.dtype != t._data.dtype:
        g = g.astype(t._data.dtype)
    if t._grad is None:
        if g.shape != t._data.shape:
            raise ShapeError(f"backward: a tensor of shape {t.shape} got a gradient of shape {g.shape}: an op's "
                             f"backward returned the wrong shape (it did not sum over broadcast dims, or reshape)")
        if (g.base is not None and backend.is_view(g)) or id(g) in taken:
            g = g.copy()
        taken[id(g)] = g
        _set_grad(t, _wrap(g))  # what the grad setter does after its checks, which this gradient passes by now
    elif id(t._grad._data) in taken and sys.getrefcount(t._grad._data) > 3:  # 3: t._grad's, taken's, the call's
        t.grad = _wrap(t._grad._data + g)
    else:
        # NOTE [gradient accumulation]: a second backward adds into the same buffer in place,
        # so k micro-batches need one gradient buffer, not k.
        t._grad._data += g


def _set_grad(t, grad):
    """The one way a .grad comes into being (the grad setter, after its checks, and _accumulate)."""
    if grad is not None and _on.profiler is not None:
        _on.profiler.on_grad(grad._data)
    t._grad = grad


def zero_grads(params, set_to_none=True):
    """Module.zero_grad and Optimizer.zero_grad: drop each .grad, or fill it with zeros in place."""
    for p in params:
        if set_to_none or p._grad is None:
            p._grad = None  # directly: the grad setter checks and reports only a gradient that comes (NOTE [per-op overhead])
        else:
            p._grad._data[...] = 0


# ----------------------------------------------------------------------------- the Tensor

def _wrap(array, requires_grad=False):
    t = Tensor.__new__(Tensor)
    t._data, t._requires_grad, t._grad, t._ctx, t._vc = array, requires_grad, None, None, None
    return t


def _is_number(x):
    return isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating))


def _operands(a, b, op, true_division=False):
    """The two operands of a binary op (a Tensor and a Tensor or number, either side) as tensors of one
    dtype, by NOTE [type promotion]."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a._data.dtype == b._data.dtype \
            and (a._data.dtype.kind == "f" or not true_division):
        return a, b  # the common case, first
    for x in (a, b):
        if not isinstance(x, Tensor) and not _is_number(x):
            hint = "; p.data is the raw array: write p -= ... under mg.no_grad()" if backend.is_array(x) else ""
            raise TypeError(f"{op}: expected a Tensor or a Python number, got {type(x).__name__}; "
                            f"wrap arrays with mg.tensor(...){hint}")
    like = a if isinstance(a, Tensor) else b
    dtypes = [x.dtype for x in (a, b) if isinstance(x, Tensor)]
    floats = sorted({d.name for d in dtypes if d.kind == "f"})
    if len(floats) > 1:
        raise TypeError(f"{op}: inputs have different dtypes ({' and '.join(floats)}); minigrad does not "
                        f"promote float32 to float64 silently: convert one with .to('{like.dtype.name}') first")
    if floats:
        target = np.dtype(floats[0])
    elif true_division or any(isinstance(x, (float, np.floating)) for x in (a, b)):
        target = np.dtype("float32")  # PyTorch's default float dtype
    elif len(dtypes) == 2:
        target = np.result_type(*dtypes)
    elif like.dtype == bool and isinstance(a if a is not like else b, (int, np.integer)) \
            and not isinstance(a if a is not like else b, (bool, np.bool_)):
        target = np.dtype("int64")
    else:
        target = like.dtype
    return tuple(x.to(target) if isinstance(x, Tensor) else _new(backend.xp_of(like._data).asarray(x, dtype=target))
                 for x in (a, b))


_NUMPY_OPERATORS = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul, "true_divide": operator.truediv,
                    "divide": operator.truediv, "power": operator.pow, "matmul": operator.matmul, "less": operator.lt,
                    "less_equal": operator.le, "greater": operator.gt, "greater_equal": operator.ge,
                    "equal": operator.eq, "not_equal": operator.ne}
_UFUNCS = {ops.Add: "add", ops.Sub: "subtract", ops.Mul: "multiply", ops.Div: "divide"}  # the in-place writes


# NOTE [type promotion]: PyTorch's rules, but one. A number takes the tensor's dtype, except a float
# next to an integer or bool tensor: both become float32 (the default float dtype), as do integers
# divided. An integer or bool tensor next to a float tensor takes the float's dtype; two integer or
# bool tensors take the wider. float32 next to float64 is an error, not float64 as in PyTorch: a stray
# float64 would double a model's memory unseen, and minigrad is about seeing memory.
def _lift(x, like, op):
    """A number next to a tensor becomes a 0-d tensor of the tensor's dtype and device."""
    return _operands(like, x, op)[1]


class Tensor:
    """An n-dimensional array that can record the ops applied to it, for backward."""
    __slots__ = ("_data", "_requires_grad", "_grad", "_ctx", "_vc", "__weakref__")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy hands a NumPy scalar's arithmetic with a Tensor to the Tensor: np.float64(0.5) * t is
        0.5 * t, a Tensor, not an object array of tensors."""
        if "out" in kwargs:
            raise TypeError(f"{ufunc.__name__}: a NumPy array cannot be updated in place with a Tensor; "
                            f"p.data is the raw array: write p -= ... under mg.no_grad(), or use the other "
                            f"tensor's .data")
        op = _NUMPY_OPERATORS.get(ufunc.__name__)
        if method != "__call__" or op is None or any(backend.is_array(x) for x in inputs):
            raise TypeError(f"{ufunc.__name__}: NumPy functions and arrays do not take minigrad tensors; use the "
                            f"tensor's own methods, or wrap the array with mg.tensor(...)")
        return op(*(x.item() if isinstance(x, np.generic) else x for x in inputs))

    def __init__(self, data, requires_grad=False, dtype=None, device=None):
        t = tensor(data, requires_grad=requires_grad, dtype=dtype, device=device)
        self._data, self._requires_grad, self._grad, self._ctx, self._vc = t._data, t._requires_grad, None, None, None

    @property
    def grad(self):
        """The gradient that backward accumulated here (a leaf's, or a tensor's that called retain_grad())."""
        return self._grad

    @grad.setter
    def grad(self, value):
        # a user's `p.grad = ...` is checked here; it and backward's gradients then come into being through
        # _set_grad, so the ledger sees every one (NOTE [what a profile counts], profiler.py)
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"grad: expected a Tensor or None, got {type(value).__name__}")
            if value._data.shape != self._data.shape or type(value._data) is not type(self._data) \
                    or value._data.dtype.kind != "f":
                raise ShapeError(f"grad: a gradient must be a float tensor of this tensor's shape {self.shape} on "
                                 f"{self.device}; got {value.dtype.name} {value.shape} on {value.device}")
        _set_grad(self, value)

    @staticmethod
    def _from_array(array, requires_grad=False):
        """Wrap an existing NumPy/CuPy array without copying (for minigrad's own code)."""
        return _new(backend.as_array(array), requires_grad)

    # --- what it holds
    @property
    def data(self):
        """The underlying NumPy or CuPy array. May be replaced by another of the same shape."""
        return _values(self, "data")

    @data.setter
    def data(self, array):
        if isinstance(array, Tensor):
            array = array._data
        if getattr(array, "shape", None) != self._data.shape:
            raise ShapeError(f"data: the new array must have this tensor's shape {self.shape}, "
                             f"got {getattr(array, 'shape', type(array).__name__)}")
        if self._requires_grad and array.dtype not in FLOAT_DTYPES:
            raise TypeError(f"data: a tensor that requires grad needs a float array, got {array.dtype}")
        if backend.device_of(array) != self.device:
            raise RuntimeError(f"data: the new array is on {backend.device_of(array)} but this tensor is on "
                               f"{self.device}; move the array first (mg.tensor(array, device='{self.device}').data)")
        self._set_data(array)

    def _set_data(self, array):
        """Replace the array (no checks): the one way minigrad's own code does it, so the ledger sees it."""
        self._data = array
        if _on.profiler is not None:
            _on.profiler.on_new_tensor(self)

    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        if requires_grad and self._data.dtype not in FLOAT_DTYPES:
            raise TypeError(f"requires_grad: only float tensors can require gradients, this one is "
                            f"{self._data.dtype.name}; convert it with .float() first")
        if not requires_grad and self._ctx is not None:
            raise RuntimeError("requires_grad_: an op's output always requires grad; use .detach() instead")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def shape(self):
        return self._data.shape

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def device(self):
        return backend.device_of(self._data)

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def is_leaf(self):
        return self._ctx is None

    @property
    def grad_fn(self):
        """The record (op) that made this tensor, or None for a leaf."""
        return self._ctx

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self):
        return self._data.size

    def dim(self):
        return self._data.ndim

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def numpy(self):
        """The data as a NumPy array (copied from the GPU when on 'cuda')."""
        if self._requires_grad:
            raise RuntimeError("numpy: this tensor requires grad; call .detach().numpy() "
                               "(as in PyTorch) so that no one writes into the recorded array by mistake")
        return backend.to_numpy(_values(self, "numpy"))

    def item(self):
        if self._data.size != 1:
            raise ValueError(f"item: only a one-element tensor converts to a Python number, this one has shape "
                             f"{self.shape}; reduce it first (.sum(), .mean()) or index one element")
        return _values(self, "item").reshape(()).item()

    def tolist(self):
        return backend.to_numpy(_values(self, "tolist")).tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(f"the truth value of a tensor of shape {self.shape} is ambiguous; use .any() or .all()")
        return bool(self.item())

    def __format__(self, spec):
        return format(self.item(), spec) if self._data.size == 1 and spec else object.__format__(self, spec)

    def __repr__(self):
        body = np.array2string(backend.to_numpy(_values(self, "repr")), separator=", ", precision=4, threshold=50,
                               prefix="tensor(")
        extras = [f"dtype={self.dtype.name}"] if self.dtype.name not in ("float32", "int64", "bool") else []
        if self.device != "cpu":
            extras.append(f"device='{self.device}'")
        if self._ctx is not None:
            extras.append(f"grad_fn=<{self._ctx.name}>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body] + extras) + ")"

    # --- the tape
    def backward(self, gradient=None, retain_graph=False):
        """Add d(self)/d(leaf) into every leaf's .grad (accumulating, as in PyTorch)."""
        backward(self, gradient, retain_graph)

    def detach(self):
        """The same data, cut from the tape (an in-place write to either shows in both, as in PyTorch)."""
        out = _wrap(self._data)
        _version_counter(self).alias(self, out)
        return out

    @property
    def _version(self):
        """How many times this tensor's storage was written in place (PyTorch's t._version)."""
        return 0 if self._vc is None else self._vc.n

    def retain_grad(self):
        """Keep .grad on this intermediate tensor too (leaves always keep theirs)."""
        if self._ctx is not None:
            self._ctx.retained = weakref.ref(self)

    def to(self, *args, device=None, dtype=None):
        """t.to('cuda'), t.to('float64'), t.to(device=..., dtype=...): differentiable; self if nothing changes."""
        device, dtype = parse_to_args(args, device, dtype)
        out = self
        if dtype is not None and dtype != self.dtype:
            out = apply(ops.Cast, out, dtype=dtype)
        if device is not None and device != self.device:
            out = apply(ops.ToDevice, out, device=device)
        return out

    def float(self):
        return self.to("float32")

    def double(self):
        return self.to("float64")

    def half(self):
        return self.to("float16")

    def long(self):
        return self.to("int64")

    # --- arithmetic (NOTE [type promotion])
    def _binary(self, op_cls, other, name, reflected=False):
        a, b = (other, self) if reflected else (self, other)
        return apply(op_cls, *_operands(a, b, name, true_division=op_cls is ops.Div))

    def __add__(self, other):
        return self._binary(ops.Add, other, "add")

    def __radd__(self, other):
        return self._binary(ops.Add, other, "add", reflected=True)

    def __sub__(self, other):
        return self._binary(ops.Sub, other, "sub")

    def __rsub__(self, other):
        return self._binary(ops.Sub, other, "sub", reflected=True)

    def __mul__(self, other):
        return self._binary(ops.Mul, other, "mul")

    def __rmul__(self, other):
        return self._binary(ops.Mul, other, "mul", reflected=True)

    def __truediv__(self, other):
        return self._binary(ops.Div, other, "div")

    def __rtruediv__(self, other):
        return self._binary(ops.Div, other, "div", reflected=True)

    def __neg__(self):
        return apply(ops.Neg, self)

    def __pow__(self, exponent):
        return self.pow(exponent)

    def __rpow__(self, base):
        return self._binary(ops.PowTensor, base, "pow", reflected=True)

    def __matmul__(self, other):
        if not isinstance(other, Tensor):
            raise TypeError(f"matmul: expected a Tensor, got {type(other).__name__}")
        return apply(ops.Matmul, self, other)

    def pow(self, exponent):
        """x ** p: a constant number p (its own op: saves x only), or a tensor (saves both)."""
        if isinstance(exponent, Tensor):
            return self._binary(ops.PowTensor, exponent, "pow")
        if not _is_number(exponent) or isinstance(exponent, (bool, np.bool_)):
            raise TypeError(f"pow: the exponent must be a number or a Tensor, got {type(exponent).__name__}")
        base = self if self.dtype.kind == "f" or (isinstance(exponent, (int, np.integer)) and exponent >= 0) \
            else self.float()
        return apply(ops.Pow, base, exponent=exponent)

    def _floating(self):
        """Integer and bool tensors become float32 for exp, log, ... (as in PyTorch)."""
        return self if self._data.dtype.kind == "f" else self.to("float32")

    def exp(self):
        return apply(ops.Exp, self._floating())

    def log(self):
        return apply(ops.Log, self._floating())

    def sqrt(self):
        return apply(ops.Sqrt, self._floating())

    def tanh(self):
        return apply(ops.Tanh, self._floating())

    def sigmoid(self):
        return apply(ops.Sigmoid, self._floating())

    def relu(self):
        return apply(ops.Relu, self)

    def abs(self):
        return apply(ops.Abs, self)

    # --- in place (NOTE [in-place])
    def _write(self, name, functional, others=(), numpy_write=None):
        """Write the values `functional()` computes into this tensor, by PyTorch's rules.

        NOTE [in-place]: with nothing to record (grad mode off, as in an optimizer's update, or no
        tensor involved requires grad), the values are written into this tensor's array, which every
        view and detach() of it shares, and its version goes up (NOTE [version counters]). With
        something to record, a leaf that requires grad is refused (its .grad would stop matching its
        values); any other tensor takes the values and the record of the same op run out of place,
        and keeps its old array for the records that saved it, so no gradient goes wrong. That last
        case would break aliasing, so minigrad refuses it on a view or a tensor that has views."""
        recording = _on.grad_enabled and (self._requires_grad or any(
            isinstance(o, Tensor) and o._requires_grad for o in others))
        if recording and self._ctx is None and self._requires_grad:
            raise RuntimeError(f"{name}: this is a leaf tensor that requires grad (a parameter, or made with "
                               f"requires_grad=True), and grad mode is on: an in-place change would not be part of "
                               f"any gradient. Update it under `with mg.no_grad():` (as an optimizer does), or write "
                               f"x = x ... to make a new tensor")
        # a selective checkpoint's recompute repeats writes that passed these checks on the forward's arrays, and
        # may write into a placeholder, which looks like an expanded view (NOTE [selective checkpoint])
        replay = _on.replaying is not None
        if not replay and any(step == 0 and n > 1 for step, n in zip(self._data.strides, self.shape)):
            raise RuntimeError(f"{name}: this tensor is an expand()ed view, in which several elements share one "
                               f"memory location, so it cannot be written in place; write to a copy (x = x * 1), "
                               f"or to the tensor it expands")
        aliased = backend.is_view(self._data) or (self._vc is not None and self._vc.shared(self))
        if recording and not replay and aliased:
            raise RuntimeError(f"{name}: in place on a view, or on a tensor that has views or detached copies, while "
                               f"grad mode records it: minigrad does not support that; write y = y ... instead, or "
                               f"do it under mg.no_grad()")
        if not recording:  # the write reads the old values, and the other operands' (NOTE [reads outside the tape])
            for o in others:
                if isinstance(o, Tensor):
                    _values(o, name)
            _before_write(self, name)
        if not recording and numpy_write is not None:
            numpy_write(self._data)
            _version_counter(self).n += 1
            return self
        new = functional()
        if new.shape != self.shape or new.dtype != self.dtype:
            raise RuntimeError(f"{name}: the result is {new.dtype.name} of shape {new.shape}, but this tensor is "
                               f"{self.dtype.name} of shape {self.shape}: an in-place op cannot change either; "
                               f"write x = x ... for a new tensor")
        if recording:
            old = self._ctx
            self._data, self._ctx, self._requires_grad, self._vc = new._data, new._ctx, new._requires_grad, None
            if old is not None and old.retained is not None and old.retained() is self:
                old.retained, new._ctx.retained = None, weakref.ref(self)  # retain_grad() follows the tensor, as in PyTorch
        else:
            self._data[...] = new._data
            _version_counter(self).n += 1
        return self

    def _arith_(self, name, op_cls, other, alpha=1):
        if alpha != 1:
            other = other * alpha
        a, b = _operands(self, other, name, true_division=op_cls is ops.Div)
        if a.dtype != self.dtype:
            raise RuntimeError(f"{name}: the result would be {a.dtype.name}, but this tensor is {self.dtype.name}: "
                               f"an in-place op cannot change the dtype; write x = x ... or convert first")

        def numpy_write(array):
            try:
                fits = np.broadcast_shapes(b.shape, array.shape) == array.shape
            except ValueError:
                fits = False
            if not fits:
                raise RuntimeError(f"{name}: the other operand's shape {b.shape} does not broadcast to this "
                                   f"tensor's shape {self.shape}")
            getattr(backend.xp_of(array), _UFUNCS[op_cls])(array, b._data, out=array)
        return self._write(name, lambda: apply(op_cls, a, b), (other,), numpy_write)

    def add_(self, other, alpha=1):
        return self._arith_("add_", ops.Add, other, alpha)

    def sub_(self, other, alpha=1):
        return self._arith_("sub_", ops.Sub, other, alpha)

    def mul_(self, other):
        return self._arith_("mul_", ops.Mul, other)

    def div_(self, other):
        return self._arith_("div_", ops.Div, other)

    def __iadd__(self, other):
        return self._arith_("+=", ops.Add, other)

    def __isub__(self, other):
        return self._arith_("-=", ops.Sub, other)

    def __imul__(self, other):
        return self._arith_("*=", ops.Mul, other)

    def __itruediv__(self, other):
        return self._arith_("/=", ops.Div, other)

    def fill_(self, value):
        def numpy_write(array):
            array[...] = value._data if isinstance(value, Tensor) else value
        everywhere = backend.xp_of(self._data).ones(self.shape, dtype=bool)
        return self._write("fill_", lambda: where(everywhere, value, self), (value,), numpy_write)

    def zero_(self):
        return self.fill_(0)

    def copy_(self, src):
        """Copy src's values in (broadcast to this shape, converted to this dtype and device)."""
        if not isinstance(src, Tensor):
            raise TypeError(f"copy_: expected a Tensor, got {type(src).__name__}")
        # checked here, the same in every grad mode (recorded, the write is a where(), whose error names the wrong op)
        if ops.broadcast_shapes(src.shape, self.shape) != self.shape:
            raise ShapeError(f"copy_: the source's shape {src.shape} does not broadcast to this tensor's shape "
                             f"{self.shape}; reshape the source (src.reshape{self.shape} when it has as many elements) "
                             f"or copy into a tensor of the source's shape")
        src = src.to(self.device, self.dtype)

        def numpy_write(array):
            array[...] = src._data
        everywhere = backend.xp_of(self._data).ones(self.shape, dtype=bool)
        return self._write("copy_", lambda: where(everywhere, src, self), (src,), numpy_write)

    def clamp(self, min=None, max=None):
        """Values below min become min, above max become max; the gradient passes where neither applies. min and max
        may be tensors (broadcasting), as in PyTorch: each then gets the gradient where it was chosen
        (ops.ClampTensor has the rules, ties included)."""
        if min is None and max is None:
            raise ValueError("clamp: give min, max or both")
        if isinstance(min, Tensor) or isinstance(max, Tensor):
            return _clamp_by_tensors(self, min, max)
        return apply(ops.Clamp, self, lo=min, hi=max)

    clip = clamp

    def clamp_(self, min=None, max=None):
        bounds = tuple(b for b in (min, max) if isinstance(b, Tensor))
        if bounds:  # computed out of place, then written in: _write checks that the shape and dtype stay
            return self._write("clamp_", lambda: self.clamp(min, max), bounds)

        def numpy_write(array):
            backend.xp_of(array).clip(array, min, max, out=array)
        return self._write("clamp_", lambda: self.clamp(min, max), (), numpy_write)

    def __setitem__(self, key, value):
        """t[key] = value, as in PyTorch (value converted to this tensor's dtype)."""
        key = _index_key(key, self)
        if isinstance(value, Tensor):
            value = value.to(self.dtype) if value.dtype != self.dtype else value
        elif _is_number(value):
            value = _new(backend.xp_of(self._data).asarray(value, dtype=self.dtype))
        else:
            raise TypeError(f"setitem: the value must be a Tensor or a number, got {type(value).__name__}")

        def numpy_write(array):
            try:
                array[key] = value._data
            except (IndexError, ValueError) as e:
                raise type(e)(f"setitem: {e} (tensor of shape {self.shape}, value of shape {value.shape})") from None
        return self._write("setitem", lambda: apply(ops.IndexPut, self, value, key=key), (value,), numpy_write)

    # --- comparisons: not differentiable, they return bool tensors
    def _compare(self, other, fn):
        other = _values(other, fn.__name__) if isinstance(other, Tensor) else other
        return _new(backend.as_array(fn(_values(self, fn.__name__), other)))

    def __lt__(self, other):
        return self._compare(other, operator.lt)

    def __le__(self, other):
        return self._compare(other, operator.le)

    def __gt__(self, other):
        return self._compare(other, operator.gt)

    def __ge__(self, other):
        return self._compare(other, operator.ge)

    def __eq__(self, other):
        return self._compare(other, operator.eq)

    def __ne__(self, other):
        return self._compare(other, operator.ne)

    def __invert__(self):
        return _new(~_values(self, "invert"))

    __hash__ = object.__hash__  # tensors are dict keys by identity (optimizer state)

    def any(self):
        return _new(backend.as_array(_values(self, "any").any()))

    def all(self):
        return _new(backend.as_array(_values(self, "all").all()))

    def argmax(self, dim=None, keepdim=False):
        return _new(backend.as_array(_values(self, "argmax").argmax(axis=dim, keepdims=keepdim)))

    def argmin(self, dim=None, keepdim=False):
        return _new(backend.as_array(_values(self, "argmin").argmin(axis=dim, keepdims=keepdim)))

    # --- reductions
    def sum(self, dim=None, keepdim=False):
        return apply(ops.Sum, self, dim=dim, keepdim=keepdim)

    def mean(self, dim=None, keepdim=False):
        return apply(ops.Mean, self._floating(), dim=dim, keepdim=keepdim)

    def max(self, dim=None, keepdim=False):
        """Of all elements: the largest (ties share the gradient). Along one dim: (values, indices), as
        torch.max(dim), and the gradient goes to the index returned. amax gives the values alone."""
        return apply(ops.Max, self, keepdim=keepdim) if dim is None else self._along("max", ops.Max, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        """Of all elements: the smallest (ties share the gradient). Along one dim: (values, indices)."""
        return apply(ops.Min, self, keepdim=keepdim) if dim is None else self._along("min", ops.Min, dim, keepdim)

    def _along(self, name, op_cls, dim, keepdim):
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"{name}: dim must be one int, got {dim!r}; a{name}(dim=...) takes several dims "
                            f"(and returns the values only)")
        d = ops.normalize_dims(name, dim, self.ndim, self.shape)
        if d and self.shape[d[0]] == 0:
            return apply(op_cls, self, dim=dim)  # raises: the max of nothing
        a = _values(self, name)
        arg = a.argmax if name == "max" else a.argmin
        index = _new(backend.as_array(arg(axis=d[0], keepdims=True)) if d else
                     backend.xp_of(self._data).zeros((), dtype="int64"))
        values = self.gather(dim, index)
        if not keepdim and d:
            values, index = values.squeeze(dim), index.squeeze(dim)
        return _VALUES_INDICES[name](values, index)

    def amax(self, dim=None, keepdim=False):
        """The largest values over dim (an int or a tuple; every dim by default); ties share the gradient."""
        return apply(ops.Max, self, dim=dim, keepdim=keepdim)

    def amin(self, dim=None, keepdim=False):
        """The smallest values over dim; ties share the gradient."""
        return apply(ops.Min, self, dim=dim, keepdim=keepdim)

    def prod(self, dim=None, keepdim=False):
        """The product of all elements, or along one dim (an int, as torch.prod)."""
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, (int, np.integer))):
            raise TypeError(f"prod: dim must be one int or None, got {dim!r}")
        return apply(ops.Prod, self, dim=dim, keepdim=keepdim)

    def cumsum(self, dim):
        """Running sums along dim: out[i] = x[0] + ... + x[i]."""
        return apply(ops.Cumsum, self, dim=dim)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        """The variance over dim (every element by default): the sum of squared deviations from the mean
        divided by n - correction, n - 1 by default (Bessel's correction); unbiased=False or correction=0
        divides by n. As torch.var, including its old form x.var(False)."""
        if isinstance(dim, bool):  # torch's var(unbiased) overload
            dim, unbiased = None, dim
        if unbiased is not None and correction is not None:
            raise TypeError("var: give unbiased or correction, not both (unbiased=False is correction=0)")
        if correction is None:
            correction = 0 if unbiased is False else 1
        x = self._floating()
        n = math.prod(x.shape[a] for a in ops.normalize_dims("var", dim, x.ndim, x.shape))
        deviation = x - x.mean(dim, keepdim=True)
        squares = (deviation * deviation).sum(dim, keepdim)
        with np.errstate(divide="ignore", invalid="ignore"):  # n <= correction: inf or nan, as in PyTorch
            return squares / max(n - correction, 0)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        """The square root of var(...), with the same arguments. Where the std is 0 (a constant row) the gradient
        is 0, as in PyTorch, not the nan that d sqrt(v) at v = 0 would give (_root, as norm's)."""
        return _root(self.var(dim, unbiased, keepdim, correction=correction), 2)

    def logsumexp(self, dim, keepdim=False):
        """log(sum(exp(x))) over dim, computed stably: the max m is taken out, log(sum(exp(x - m))) + m."""
        x = self._floating()
        axes = ops.normalize_dims("logsumexp", dim, x.ndim, x.shape)
        xp = backend.xp_of(x._data)
        if all(x.shape[a] for a in axes):
            m = _values(x, "logsumexp").max(axis=axes, keepdims=True)
            m = xp.where(xp.isfinite(m), m, 0)  # every x -inf (or an inf): x - m would be nan
        else:  # an empty dim: the sum is 0 and the result -inf
            m = xp.zeros(ops.keepdim_shape(x.shape, axes), dtype=x.dtype)
        with np.errstate(over="ignore", divide="ignore"):  # an inf in x, an empty dim: inf and -inf, as in PyTorch
            out = (x - Tensor._from_array(m)).exp().sum(dim, keepdim).log()
        return out + Tensor._from_array(m if keepdim else m.reshape(out.shape))

    def norm(self, p="fro", dim=None, keepdim=False):
        """The p-norm over dim (every element by default), as torch.norm: 'fro' or 2 (the square root of the
        sum of squares), 1, inf, -inf, 0 (the count of non-zeros) or any other p > 0. At a zero vector the
        gradient is 0, as in PyTorch, not the nan that d sqrt(s) at s = 0 would give."""
        x = self._floating()
        if p in ("fro", 2):
            return _root((x * x).sum(dim, keepdim), 2)
        if p == 1:
            return x.abs().sum(dim, keepdim)
        if p == math.inf:
            return x.abs().amax(dim, keepdim)
        if p == -math.inf:
            return x.abs().amin(dim, keepdim)
        if p == 0:
            return (x != 0).to(x.dtype).sum(dim, keepdim)
        if _is_number(p) and not isinstance(p, (bool, np.bool_)) and p > 0:
            # |x| ** p with p < 1 has an infinite derivative at 0 too: 0 there, as PyTorch's (ops.Pow's zero_at_zero)
            return _root(apply(ops.Pow, x.abs(), exponent=p, zero_at_zero=True).sum(dim, keepdim), p)
        raise ValueError(f"norm: p must be 'fro', 0, a number > 0, inf or -inf, got {p!r} ('nuc' and p < 0 are "
                         f"not supported)")

    def maximum(self, other):
        """The larger of two tensors, elementwise (broadcasting); at a tie each gets half the gradient."""
        return self._binary(ops.Maximum, other, "maximum")

    def minimum(self, other):
        """The smaller of two tensors, elementwise (broadcasting); at a tie each gets half the gradient."""
        return self._binary(ops.Minimum, other, "minimum")

    def topk(self, k, dim=-1, largest=True, sorted=True):
        """The k largest (or smallest) values along dim and their indices, as torch.topk; the values carry the
        gradient back to where they came from. Always in order (sorted=False allows any order, so this one
        too); equal values keep the lower index first; nan counts as the largest."""
        if self.ndim == 0:
            values, indices = self.reshape(1).topk(k, 0, largest, sorted)
            return _VALUES_INDICES["topk"](values.reshape(()), indices.reshape(()))
        d = ops.normalize_dims("topk", dim, self.ndim, self.shape)[0]
        if not 0 <= k <= self.shape[d]:
            raise ValueError(f"topk: k={k} is out of range for dim {dim} of size {self.shape[d]} (shape {self.shape})")
        a = _values(self, "topk")
        xp = backend.xp_of(a)
        if a.dtype.kind == "f":
            key = xp.where(xp.isnan(a), -xp.inf, -a) if largest else a  # argsort puts nan last
        else:
            key = -a.astype("int64") if largest else a
        order = backend.stable_argsort(key, axis=d)
        indices = _new(order[(slice(None),) * d + (slice(0, k),)])
        return _VALUES_INDICES["topk"](self.gather(d, indices), indices)

    def softmax(self, dim):
        return apply(ops.Softmax, self._floating(), dim=dim)

    def log_softmax(self, dim):
        return apply(ops.LogSoftmax, self._floating(), dim=dim)

    # --- shape
    def contiguous(self):
        """This tensor itself: minigrad's ops (view included) take arrays of any strides, and NumPy copies
        where it must, so nothing needs to be made contiguous first. Unlike torch, never a copy."""
        return self

    def reshape(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return apply(ops.Reshape, self, shape=shape)

    view = reshape  # NOTE: unlike torch.view this also accepts non-contiguous tensors (NumPy copies)

    def flatten(self, start_dim=0, end_dim=-1):
        """Merge dims start_dim..end_dim into one (a 0-d tensor becomes 1-d)."""
        n = max(self.ndim, 1)
        s, e = (ops.normalize_dims("flatten", d, n, self.shape)[0] for d in (start_dim, end_dim))
        if s > e:
            raise IndexError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for a tensor of shape "
                             f"{self.shape}")
        if self.ndim == 0:
            return self.reshape(1)
        return self.reshape(self.shape[:s] + (-1,) + self.shape[e + 1:])

    def transpose(self, dim0, dim1):
        return apply(ops.Transpose, self, dim0=dim0, dim1=dim1)

    def permute(self, *dims):
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        return apply(ops.Permute, self, dims=dims)

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    def unsqueeze(self, dim):
        """A new dim of size 1 at dim (a negative dim counts from the end of the result)."""
        d = ops.normalize_dims("unsqueeze", dim, self.ndim + 1, self.shape)[0]
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def squeeze(self, dim=None):
        """Drop the dims of size 1: all of them, or those of dim (an int or a tuple); a named dim whose size
        is not 1 stays, as in PyTorch."""
        if dim is None:
            axes = range(self.ndim)
        else:
            named = not (isinstance(dim, (tuple, list)) and not dim)  # squeeze(()) names no dim
            axes = ops.normalize_dims("squeeze", dim, self.ndim, self.shape) if named else ()
        return self.reshape(tuple(n for i, n in enumerate(self.shape) if not (i in axes and n == 1)))

    def expand(self, *sizes):
        """A view with size-1 dims (and new leading dims) repeated to sizes, without copying; -1 keeps a dim.
        Its elements share memory, so it cannot be written in place."""
        sizes = _shape(sizes)
        lead = len(sizes) - self.ndim
        if lead < 0:
            raise ShapeError(f"expand: {len(sizes)} sizes {sizes} for a tensor of {self.ndim} dims {self.shape}; "
                             f"give at least one size per dim")
        shape = list(sizes)
        for i, n in enumerate(sizes):
            old = self.shape[i - lead] if i >= lead else None
            if n == -1 and old is None:
                raise ShapeError(f"expand: -1 (keep the size) in sizes {sizes} names a new leading dim, which has "
                                 f"no size to keep")
            shape[i] = old if n == -1 else n
            if old is not None and old not in (1, shape[i]):
                raise ShapeError(f"expand: dim {i - lead} of shape {self.shape} has size {old}, which cannot become "
                                 f"{shape[i]}: only size-1 dims expand; repeat() copies data")
        return apply(ops.Expand, self, shape=tuple(shape))

    def expand_as(self, other):
        return self.expand(other.shape)

    def repeat(self, *sizes):
        """Tile the data sizes[i] times along dim i (new leading dims for extra sizes), copying, as torch.repeat."""
        sizes = _shape(sizes)
        if len(sizes) < self.ndim:
            raise ShapeError(f"repeat: {len(sizes)} repeat counts {sizes} for a tensor of {self.ndim} dims "
                             f"{self.shape}; give one per dim at least")
        shape = (1,) * (len(sizes) - self.ndim) + self.shape
        # each dim gets a new dim in front of it, of its repeat count: (r0, s0, r1, s1, ...), read row by row
        spread = self.reshape([m for n in shape for m in (1, n)])
        tiled = spread.expand([m for r, n in zip(sizes, shape) for m in (r, n)])
        return tiled.reshape([r * n for r, n in zip(sizes, shape)])

    def flip(self, *args, dims=None):
        """Reversed along dims (an int, several, or a list), as a copy (as torch.flip)."""
        dims = args if dims is None else dims
        if isinstance(dims, (int, np.integer)):
            dims = (dims,)
        elif len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = dims[0]
        return apply(ops.Flip, self, dims=tuple(dims))

    def _dim(self, op, dim):
        if self.ndim == 0:
            raise IndexError(f"{op}: a 0-d tensor has no dim to {op} along; reshape(1) it first")
        return ops.normalize_dims(op, dim, self.ndim, self.shape)[0]

    def _slice(self, d, index):
        return apply(ops.Index, self, key=(slice(None),) * d + (index,))

    def split(self, split_size_or_sections, dim=0):
        """Pieces along dim: of split_size each (the last one smaller if it must be), or of the sizes listed.
        Views of this tensor, as in PyTorch."""
        d = self._dim("split", dim)
        n = self.shape[d]
        if isinstance(split_size_or_sections, (int, np.integer)):
            size = int(split_size_or_sections)
            if size < 0 or (size == 0 and n):  # as PyTorch: 0 only splits a dim of size 0 (into one piece)
                raise ValueError(f"split: split_size must be positive (0 only for a dim of size 0), got {size} for "
                                 f"dim {dim} of shape {self.shape}")
            sizes = [min(size, n - start) for start in range(0, n, size)] if n else [0]
        else:
            sizes = [int(k) for k in split_size_or_sections]
            if sum(sizes) != n or any(k < 0 for k in sizes):
                raise ShapeError(f"split: sizes {sizes} add up to {sum(sizes)}, but dim {dim} of shape {self.shape} "
                                 f"has size {n}")
        starts = itertools.accumulate([0] + sizes)
        return tuple(self._slice(d, slice(start, start + k)) for start, k in zip(starts, sizes))

    def chunk(self, chunks, dim=0):
        """Split into `chunks` pieces of equal size along dim (the last one smaller, and fewer pieces when the
        size does not allow that many, as torch.chunk)."""
        if chunks <= 0:
            raise ValueError(f"chunk: chunks must be positive, got {chunks}")
        n = self.shape[self._dim("chunk", dim)]
        if not n:  # as torch.chunk: `chunks` empty pieces (split(0) would give one)
            return self.split([0] * chunks, dim)
        return self.split(-(-n // chunks), dim)

    def unbind(self, dim=0):
        """The slices along dim, that dim removed: a tuple of views."""
        d = self._dim("unbind", dim)
        return tuple(self._slice(d, i) for i in range(self.shape[d]))

    def index_select(self, dim, index):
        """The entries at 1-d integer index along dim (repeats allowed; their gradients add up)."""
        d = self._dim("index_select", dim)
        idx = _integer_index("index_select", index, self)
        if idx.ndim > 1:
            raise ShapeError(f"index_select: index must be 1-d, got shape {idx.shape}")
        _check_in_range("index_select", idx, self.shape[d], f"dim {dim} of shape {self.shape}")
        return self._slice(d, idx.reshape(-1))

    def gather(self, dim, index):
        """out[i][j][k] = self[index[i][j][k]][j][k] for dim=0, and likewise for any dim, as torch.gather: index
        has as many dims as this tensor, and no dim larger except along dim. Repeats add their gradients."""
        idx = _integer_index("gather", index, self)
        if idx.ndim != self.ndim:
            raise ShapeError(f"gather: index must have as many dims as the input, got index shape {idx.shape} for "
                             f"input shape {self.shape}")
        if self.ndim == 0:
            return self.reshape(1).gather(0, _new(idx.reshape(1))).reshape(())
        d = ops.normalize_dims("gather", dim, self.ndim, self.shape)[0]
        if any(m > n for k, (m, n) in enumerate(zip(idx.shape, self.shape)) if k != d):
            raise ShapeError(f"gather: index of shape {idx.shape} is larger than the input's shape {self.shape} in a "
                             f"dim other than dim {dim}")
        _check_in_range("gather", idx, self.shape[d], f"dim {dim} of shape {self.shape}")
        # index along dim, and along every other dim its own position: one integer array per dim, broadcast
        xp = backend.xp_of(idx)
        key = tuple(idx if k == d else xp.arange(m).reshape((m,) + (1,) * (idx.ndim - k - 1))
                    for k, m in enumerate(idx.shape))
        return apply(ops.Index, self, key=key)

    def multinomial(self, num_samples, replacement=False):
        return multinomial(self, num_samples, replacement)

    def __getitem__(self, key):
        return apply(ops.Index, self, key=_index_key(key, self))

    def masked_fill(self, mask, value):
        return apply(ops.MaskedFill, self, mask=_bool_array(mask, self, "masked_fill"), value=value)

    def tril(self, diagonal=0):
        return apply(ops.Tri, self, diagonal=diagonal, upper=False)

    def triu(self, diagonal=0):
        return apply(ops.Tri, self, diagonal=diagonal, upper=True)


def _is_dtype_name(name):
    try:
        return np.dtype(name) in DTYPES
    except TypeError:
        return False


def parse_to_args(args, device=None, dtype=None):
    """.to()'s arguments: positional ones are a device if they name one, else a dtype. Normalized."""
    for a in args:
        if isinstance(a, str) and a.split(":")[0] in backend.DEVICES:
            device = a
        elif isinstance(a, str) and not _is_dtype_name(a):
            raise backend.DeviceError(f"to: unknown device {a!r}, and not a dtype either: devices are "
                                      f"{', '.join(backend.DEVICES)}; dtypes are {', '.join(d.name for d in DTYPES)}")
        else:
            dtype = a
    return (None if device is None else backend.normalize_device(device),
            None if dtype is None else normalize_dtype(dtype))


def _index_key(key, t):
    """A tensor index -> a tuple of ints, slices, None, Ellipsis and integer arrays on t's device."""
    key = key if isinstance(key, tuple) else (key,)
    out, raw = [], []
    for k in key:
        if isinstance(k, Tensor):
            k = _values(k, "index")
        elif isinstance(k, (list, tuple, np.ndarray)):  # a tuple inside the key is a list, as in PyTorch and NumPy
            a = np.asarray(k)
            if not a.size and not isinstance(k, np.ndarray):
                a = a.astype(np.int64)  # [] or (): no index (as PyTorch and NumPy index), not float64's nothing
            k = backend.to_device(a, t.device)
        raw.append(k)
        if hasattr(k, "dtype"):
            if k.dtype == bool:
                _check_mask_fits(raw, key[len(raw):], t)
                out.extend(k.nonzero())  # a mask is the integer arrays of its True positions
                continue
            if k.dtype.kind not in "iu":
                raise IndexError(f"index: tensors used as indices must be integer or bool, got {k.dtype}")
            if backend.device_of(k) != t.device:
                raise RuntimeError(f"index: the index is on {backend.device_of(k)} but the tensor is on {t.device}")
        elif not (k is None or k is Ellipsis or isinstance(k, (int, slice, np.integer))):
            raise IndexError(f"index: unsupported index {k!r} of type {type(k).__name__}")
        out.append(int(k) if isinstance(k, np.integer) else k)
    return tuple(out)


def _check_mask_fits(before, after, t):
    """A bool mask must match the dims it indexes (NumPy and PyTorch raise IndexError; its integer
    positions alone would quietly pick other elements)."""
    probe = backend.xp_of(t._data).broadcast_to(backend.xp_of(t._data).zeros((), dtype=bool), t.shape)
    key = tuple(before) + tuple(k._data if isinstance(k, Tensor) else k for k in after)
    try:
        probe[key]  # a zero-stride view: NumPy checks the shapes at almost no cost
    except IndexError as e:
        raise IndexError(f"index: {e} (tensor of shape {t.shape}, mask of shape {before[-1].shape})") from None


def _bool_array(mask, like, op):
    m = _values(mask, op) if isinstance(mask, Tensor) else backend.to_device(np.asarray(mask), like.device)
    if m.dtype != bool:
        raise TypeError(f"{op}: the mask must be a bool tensor, got {m.dtype}; compare to make one (t > 0)")
    if backend.device_of(m) != like.device:
        raise RuntimeError(f"{op}: the mask is on {backend.device_of(m)} but the tensor is on {like.device}")
    return m


def _integer_index(op, index, like):
    """An index (Tensor, list or array) as an integer array on like's device."""
    a = _values(index, op) if isinstance(index, Tensor) else backend.to_device(np.asarray(index), like.device)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{op}: the index must be an integer tensor, got {a.dtype}")
    if backend.device_of(a) != like.device:
        raise RuntimeError(f"{op}: the index is on {backend.device_of(a)} but the tensor is on {like.device}")
    return a


def _check_in_range(op, index, n, where_):
    if index.size and not backend.is_meta(index):  # a meta index has no values to check
        lo, hi = int(index.min()), int(index.max())
        if lo < 0 or hi >= n:
            raise IndexError(f"{op}: index out of range: the indices span [{lo}, {hi}], but {where_} has {n} "
                             f"entries (0 to {n - 1})")


def _root(s, p):
    """s ** (1/p) of a floating s, with a zero gradient where s == 0 (where d sqrt(s) is infinite and 0 * inf
    would be nan), as PyTorch's norm and std: one op whatever the values (NOTE [a root's gradient at zero], ops.py),
    so it runs on 'meta' and records the same ops in a checkpoint's recompute."""
    if p == 2:
        return apply(ops.Sqrt, s, zero_at_zero=True)
    return apply(ops.Pow, s, exponent=1 / p, zero_at_zero=True)


def _clamp_by_tensors(x, lo, hi):
    """x.clamp(lo, hi) where a bound is a tensor (a number beside it is a constant one): x and the bounds in one
    dtype by NOTE [type promotion], their shapes broadcast, one ops.ClampTensor."""
    sides, bounds = [], []
    for side, b in (("lo", lo), ("hi", hi)):
        if b is not None:
            x, b = _operands(x, b, "clamp")
            sides.append(side)
            bounds.append(b)
    bounds = [b if b.dtype == x.dtype else b.to(x.dtype) for b in bounds]  # a max that promoted x promotes min too
    if ops.broadcast_shapes(x.shape, *(b.shape for b in bounds)) is None:
        given = ", ".join(f"{'min' if side == 'lo' else 'max'} {b.shape}" for side, b in zip(sides, bounds))
        raise ShapeError(f"clamp: the input's shape {x.shape} and the bounds' ({given}) do not broadcast: compared "
                         f"from the right, each pair of dims must be equal or one of them 1")
    return apply(ops.ClampTensor, x, *bounds, sides=tuple(sides))


# (values, indices), as torch.return_types: `values, indices = x.max(1)` and `x.max(1).values` both work
_VALUES_INDICES = {name: collections.namedtuple(name, ["values", "indices"]) for name in ("max", "min", "topk")}


# ----------------------------------------------------------------------------- making tensors

def tensor(data, requires_grad=False, dtype=None, device=None):
    """A new tensor from a list, number, NumPy/CuPy array or Tensor (copied), as torch.tensor."""
    if isinstance(data, Tensor):
        data = data._data
    device = backend.normalize_device(device)
    if isinstance(data, np.generic):  # a NumPy scalar keeps its dtype, as torch.tensor(np.float64(1.0)) does
        data = np.asarray(data)
    if backend.is_array(data):
        array = backend.to_device(data, device)
        dt = normalize_dtype(dtype) if dtype is not None else normalize_dtype(array.dtype)
        array = array.astype(dt, copy=True)
    else:
        host = np.asarray(data)
        if host.dtype == object:
            raise TypeError(f"tensor: cannot make a tensor from {type(data).__name__} {data!r:.60}")
        if dtype is None:  # Python floats become float32, as in PyTorch
            dtype = "float32" if host.dtype.kind == "f" else host.dtype
        array = backend.to_device(host.astype(normalize_dtype(dtype)), device)
    return _new(array, requires_grad)


def _new(array, requires_grad=False):
    """A new leaf that is not an op's output (factories, comparisons, constants): the ledger counts it."""
    t = _wrap(array)
    if requires_grad:
        t.requires_grad_(True)
    if _on.profiler is not None:
        _on.profiler.on_new_tensor(t)
    return t


def _shape(shape):
    return tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)


def _filled(fill, shape, dtype, device, requires_grad):
    device = backend.normalize_device(device)
    dt = normalize_dtype(dtype or "float32")
    return _new(backend.xp_for(device).full(_shape(shape), fill, dtype=dt), requires_grad)


def zeros(*shape, dtype=None, device=None, requires_grad=False):
    return _filled(0, shape, dtype, device, requires_grad)


def ones(*shape, dtype=None, device=None, requires_grad=False):
    return _filled(1, shape, dtype, device, requires_grad)


def full(shape, fill_value, dtype=None, device=None, requires_grad=False):
    return _filled(fill_value, shape, dtype, device, requires_grad)


def zeros_like(t, dtype=None, requires_grad=False):
    return zeros(*t.shape, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def ones_like(t, dtype=None, requires_grad=False):
    return ones(*t.shape, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def _random(method, shape, dtype, device, requires_grad):
    dt = normalize_dtype(dtype or "float32")
    host = draw(method, size=_shape(shape), device=device).astype(dt, copy=False)
    return tensor(host, dtype=dt, device=device, requires_grad=requires_grad)


def randn(*shape, dtype=None, device=None, requires_grad=False):
    """Standard normal samples from minigrad's generator (mg.manual_seed)."""
    return _random("standard_normal", shape, dtype, device, requires_grad)


def rand(*shape, dtype=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1) from minigrad's generator."""
    return _random("random", shape, dtype, device, requires_grad)


def randint(low, high, size, dtype="int64", device=None):
    """Integers in [low, high) from minigrad's generator."""
    return tensor(draw("integers", low, high, size=_shape((size,)), device=device), dtype=dtype, device=device)


def multinomial(input, num_samples, replacement=False):
    """Indices drawn from the categories that input's last dim weighs (1-d, or one row per draw of a 2-d input;
    the weights need not sum to 1), from minigrad's generator, as torch.multinomial."""
    if not isinstance(input, Tensor) or input.ndim not in (1, 2) or input.dtype.kind != "f":
        raise TypeError(f"multinomial: input must be a 1-d or 2-d float tensor of weights, got "
                        f"{getattr(input, 'dtype', type(input).__name__)} {getattr(input, 'shape', '')}")
    w = backend.to_numpy(_values(input, "multinomial")).astype("float64").reshape(-1, input.shape[-1])
    if not np.isfinite(w).all() or (w < 0).any() or (w.sum(axis=1) <= 0).any():
        raise ValueError("multinomial: the weights must be finite, non-negative, and not all zero in a row")
    if not replacement and num_samples > int((w > 0).sum(axis=1).min()):
        raise ValueError(f"multinomial: cannot draw {num_samples} samples without replacement from a row with only "
                         f"{int((w > 0).sum(axis=1).min())} non-zero weights; pass replacement=True")
    if replacement:  # the first category whose running total of weight exceeds a uniform draw times the total
        cdf = w.cumsum(axis=1)
        u = generator().random((w.shape[0], num_samples)) * cdf[:, -1:]
        last = w.shape[1] - 1 - np.argmax(w[:, ::-1] > 0, axis=1)  # if rounding puts u at the total itself
        picks = np.minimum((cdf[:, None, :] <= u[:, :, None]).sum(axis=2), last[:, None])
    else:  # exponential races: E / w is exponential with rate w; the first num_samples to finish, in order
        with np.errstate(divide="ignore"):
            finish = generator().standard_exponential(w.shape) / w
        picks = np.argsort(finish, axis=1, kind="stable")[:, :num_samples]
    return tensor(picks.reshape(input.shape[:-1] + (num_samples,)), dtype="int64", device=input.device)


def arange(start, end=None, step=1, dtype=None, device=None):
    start, end = (0, start) if end is None else (start, end)
    device = backend.normalize_device(device)
    host = np.arange(start, end, step)
    return tensor(host, dtype=dtype or ("int64" if host.dtype.kind in "iu" else "float32"), device=device)


# ----------------------------------------------------------------------------- functions on several tensors

def cat(tensors, dim=0):
    """Concatenate along an existing dim."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty list of tensors")
    return apply(ops.Cat, *tensors, dim=dim)


def stack(tensors, dim=0):
    """Stack along a new dim."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty list of tensors")
    return apply(ops.Stack, *tensors, dim=dim)


def maximum(input, other):
    """The larger of two tensors, elementwise; at a tie each gets half the gradient (as torch.maximum)."""
    return input.maximum(other)


def minimum(input, other):
    """The smaller of two tensors, elementwise; at a tie each gets half the gradient."""
    return input.minimum(other)


def where(condition, input, other):
    """Elementwise: input where condition holds, other elsewhere (as torch.where); numbers allowed."""
    if not isinstance(condition, Tensor):
        condition = tensor(condition)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor) and _is_number(input):
        input = tensor(input, device=condition.device)  # two numbers: float32 or int64, as PyTorch
    a, b = _operands(input, other, "where")
    cond = _bool_array(condition, a, "where")
    try:
        np.broadcast_shapes(cond.shape, a.shape, b.shape)
    except ValueError:
        raise ShapeError(f"where: the condition's shape {cond.shape} does not broadcast with the values' shapes "
                         f"{a.shape} and {b.shape}") from None
    return apply(ops.Where, a, b, cond=cond)
