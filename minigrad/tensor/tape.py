"""The tape: the records ops leave, what they keep for backward, and the walk that runs them in reverse.

An op applied to tensors, with grad mode on and some input requiring grad, becomes a record: the op instance
(an ops.Op) with its saved arrays and an edge per input to the record that made that input (or to the leaf
tensor itself). Records point only at records and leaves, never at intermediate tensors, so an intermediate's
array lives only as long as the user holds it or an op saved it: saved arrays are exactly the activation memory.

Follow one saved array: an op's forward names it (`Op.save_for_backward`); `apply` (tensor.py) hands the record
to `keep`, the one choke point, which keeps it (or hands it to the pack of a pair of saved-tensor hooks: the
user's, or a checkpoint's that keeps nothing) and tells the profiler; `_run_tape` reads it in the op's backward
(unpacked first, if it was packed) and then `release` frees it. Follow one gradient: `backward` starts it at the root, `_run_tape` hands each
record's input gradients on to the records that made its inputs, and a leaf sums its own into .grad
(`Tensor._accumulate`, tensor.py). This file does not import the Tensor: it reads a tensor through the few
fields that `Variable` lists, and tells a leaf its gradient by calling its `_accumulate`.

Read next: tensor.py, the Tensor and `apply`, the one place a record is made.
"""
import heapq
import itertools

from .. import backend
from ..ops import Op, ShapeError
from .modes import _on, _Version, _written_since


class Variable:
    """What the tape reads of a tensor: the protocol it is written against (as minitorch's autodiff is; PyTorch's
    autograd.Variable became its Tensor). The Tensor (tensor.py) inherits this class, so the files below tensor.py,
    which cannot import it, ask isinstance(x, Variable) for "is x a tensor".

      _data           its array
      _requires_grad  whether gradients flow into it
      _ctx            the record (an ops.Op) that made it, or None for a leaf
      _vc             its storage's version counter, None until one is needed (NOTE [version counters])
      _accumulate     how a leaf is told its gradient (below)"""
    __slots__ = ()

    def _accumulate(self, g, taken, shared):
        """Sum gradient array g into .grad. `shared`: someone else may read g again during this backward; `taken`:
        the arrays that a leaf must neither take nor sum into in place (NOTE [who owns a gradient], below)."""
        raise NotImplementedError


# ----------------------------------------------------------------------------- the records

_seq = itertools.count()  # records are numbered as they are made (NOTE [the tape])


def record(op, inputs, out):
    """Make `op`, which ran on `inputs` and gave tensor `out`, out's record: an edge per input to the record that
    made it (or to the leaf itself, or None where no gradient flows), its place in the order, and what it keeps."""
    op.next = tuple([i._ctx if i._ctx is not None else (i if i._requires_grad else None) for i in inputs])
    op.seq = next(_seq)
    out._ctx = op
    keep(op, inputs, out)


def keep(record, inputs, out):
    """NOTE [one choke point]: every array a record keeps for its backward passes through here.

    The op's forward named what its backward will read (ops.Op.save_for_backward); this notes the
    version of each saved array that a tensor holds (NOTE [version counters]), hands the arrays to
    the innermost pair of saved-tensor hooks, if one is on (the record then holds what it packs:
    a user's pair, or keep_saved(False)'s, which keeps nothing, inside a checkpoint's forward), and
    tells the profiler, which counts what the record keeps as activation memory until `release`."""
    if not record.saved:
        return
    versions = []
    i = -1  # counted by hand, not enumerate (NOTE [per-op overhead], tensor.py: apply), as k below
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
        record.versions = versions  # inside a checkpoint's forward too: its record checks them (checkpoint)
    if _on.saved_hooks is not None:  # NOTE [saved tensors hooks] (autograd/graph.py): the innermost pair's pack says
        record.saved, record.packed = _on.saved_hooks.pack(record, inputs, out)  # what stays arrays, what is packed
    if _on.profiler is not None:
        _on.profiler.on_save(record)


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
    record.released = bool(record.saved) or record.runs_once  # a record that kept nothing can run again
    record.saved = ()


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
            if isinstance(n, Op):
                stack.append(n)
    return found


# ----------------------------------------------------------------------------- the walk

def backward(root, gradient=None, retain_graph=False):
    """Backpropagate from tensor `root` into every leaf that requires grad, starting from the array `gradient`
    (Tensor.backward, which hands a Tensor's array)."""
    if not root._requires_grad:
        raise RuntimeError("backward: this tensor does not require grad and has no record on the tape. "
                           "Did you create the weights with requires_grad=True, or compute it under no_grad()?")
    if gradient is None:
        if root._data.size != 1:
            raise RuntimeError(f"backward: a gradient can be implied only for a scalar output, but this tensor has "
                               f"shape {root.shape}. Reduce it first (.sum() or .mean()), or pass gradient= a "
                               f"tensor of shape {root.shape}")
        g = backend.ones_like(root._data)  # NOTE [a broadcast scalar] (backend)
    else:
        if not backend.is_array(gradient):
            raise TypeError(f"backward: gradient must be a Tensor of the output's shape {root.shape}, got "
                            f"{type(gradient).__name__}; for example gradient=mg.full({root.shape}, {gradient!r}, "
                            f"dtype='{root.dtype.name}')")
        g = gradient
        if g.shape != root.shape:
            raise ShapeError(f"backward: gradient of shape {g.shape} does not match the output's shape {root.shape}")
        _check_same_device_and_dtype("backward", [root._data, g])
    outer = _on.taken  # a backward inside a backward (checkpoint's recompute) shares the outer's
    _on.taken = taken = outer if outer is not None else {}
    lent = _lend(taken, [g])  # NOTE [who owns a gradient]: the caller's g is the caller's
    try:
        if root._ctx is None:
            root._accumulate(g, taken, True)
        else:
            _run_tape([root], [g], retain_graph, taken)
    finally:
        _give_back(taken, lent)
        _on.taken = outer


def backward_from(roots, gradients):
    """Backpropagate from several tensors at once, each from its gradient array, as torch.autograd.backward(tensors,
    grad_tensors) does: a checkpoint's recompute (checkpoint, NOTE [checkpoint sums]) runs inside a backward that goes
    on, and shares its `taken` (NOTE [who owns a gradient])."""
    outer = _on.taken
    _on.taken = taken = outer if outer is not None else {}
    lent = _lend(taken, gradients)
    try:
        _run_tape(roots, gradients, False, taken)
    finally:
        _give_back(taken, lent)
        _on.taken = outer


def _lend(taken, gradients):
    """Note the gradients a backward starts from as held by its caller (NOTE [who owns a gradient]), and the array
    that owns a view's memory, which may be a .grad; returns those that were not noted yet."""
    lent = []
    for g in gradients:  # one array may come twice (Add hands one gradient to two outputs): noted, lent, once
        for a in (g, backend.owner(g)) if g.base is not None else (g,):
            if id(a) not in taken:
                taken[id(a)] = a
                lent.append(a)
    return lent


def _give_back(taken, lent):
    """When that backward ends: `taken` holds its arrays no longer (a checkpoint's recompute runs inside a
    backward that goes on, and its gradients should die when their last user drops them)."""
    for g in lent:
        del taken[id(g)]


def _run_tape(roots, gradients, retain_graph, taken):
    # NOTE [the tape]: run the records newest first. Records are numbered as they are made and every input is
    # made before the ops that use it, so a record's number is above those of the records that made its inputs:
    # always taking the newest record that has a gradient waiting runs each record after every record that
    # consumes its output. A heap of those records, by number (PyTorch's engine orders its ready queue by
    # sequence number the same way), finds it; a record that no gradient reaches is never visited. No
    # recursion, so a chain of any length works. A record's edges and its retain_grad() request are read after its
    # backward, which may change them (a checkpoint's record does: NOTE [checkpoint sums], checkpoint/segment.py).
    grads = {t._ctx: g for t, g in zip(roots, gradients)}  # gradients in flight, by the record that made the tensor
    shared = set()  # the records in `grads` whose gradient someone else may read too (NOTE [who owns a gradient])
    waiting = [(-op.seq, op) for op in grads if op is not None]
    heapq.heapify(waiting)
    profiler = _on.profiler  # read once (NOTE [per-op overhead], tensor.py): a profile is a `with` block, so one that a
    # record's backward enters (a checkpoint's recompute) has ended when it returns
    while waiting:
        op = heapq.heappop(waiting)[1]
        g = grads.pop(op)
        g_shared = op in shared
        if profiler is not None:
            clock = profiler.start_clock()  # NOTE [self time] (profiler): until its gradients are handed on
        if op.released:
            raise RuntimeError(f"backward: trying to backward through the graph a second time: the arrays that "
                               f"'{op.name}' saved were freed by the first backward. Pass retain_graph=True to "
                               f"the first backward if you need a second one, or run the forward again.")
        if not op.saved and op.packed is not None:  # NOTE [saved tensors hooks] (autograd/graph.py): the arrays
            op.saved = op.packed.unpack(op.name)  # back, by the pair's unpack
            if not retain_graph:
                op.packed = None  # the last backward that reads them has them: what pack returned goes now
        for vc, n, i, k in op.versions:  # NOTE [version counters]
            if vc.n != n:
                raise _written_since(op, vc.n, n, i, k)
        input_grads = op.backward(g)
        if op.retained is not None:  # a tensor that asked retain_grad(), if it is still alive; asked after the
            kept = op.retained()     # backward, which may pass the request on (a checkpoint's output, NOTE there)
            if kept is not None:
                kept._accumulate(g, taken, True)  # shared: this record read g, and may hand it on
        if profiler is not None:  # before release: the gradients were made while the saved arrays lived (a peak)
            input_grads = tuple(backend.as_array(gi) for gi in input_grads)  # NumPy's 0-d result is a scalar
            profiler.on_backward(op, g, input_grads, not retain_graph)
        if not retain_graph:
            release(op)
        elif op.packed is not None:
            op.saved = ()  # what pack returned stays, for the next backward to unpack again; these arrays go
        twice = _read_twice(g, g_shared, input_grads) if g_shared or len(input_grads) > 1 else None
        j = -1
        for nxt in op.next:  # with input_grads[j]: not zip (NOTE [per-op overhead]); an op returns one per input
            j += 1
            gi = input_grads[j]
            if nxt is None or gi is None:
                continue
            gi_shared = twice is not None and id(gi) in twice
            if not isinstance(nxt, Op):  # a leaf: it sums its gradient into .grad (Tensor._accumulate)
                nxt._accumulate(gi, taken, gi_shared)
            elif nxt in grads:  # two uses of one tensor: their gradients summed into an array from the pool
                grads[nxt] = backend.pooled(backend.xp_of(gi).add, grads[nxt], gi)
                shared.discard(nxt)  # a new array, the record's alone
            else:
                grads[nxt] = gi
                if gi_shared:
                    shared.add(nxt)
                heapq.heappush(waiting, (-nxt.seq, nxt))
        if profiler is not None:
            profiler.stop_clock(clock, op.name, "backward")
        input_grads = gi = twice = None  # handed on: not held through the next record's backward (a
        # checkpoint's recompute runs in it: a gradient summed away would stay alive)


# NOTE [who owns a gradient]: a leaf takes its first gradient array as its .grad without a copy, and sums later ones
# into it in place, as PyTorch's AccumulateGrad steals and adds: one buffer per parameter however often it is used.
# That is safe only while no one else can read the array, which the tape knows from whom it handed it to (no count
# of references). An op's backward returns arrays it made, its g, or views of them (never an array it saved), so an
# array is its receiver's alone unless it is `shared`: one hand-out gives it, or it and a view of it, to two places
# (Add gives g to both inputs); or it is a record's g that was shared (a pass-through keeps the mark, which waits
# with the record in _run_tape's `shared` until a sum makes a new array); or a retained tensor took it. `taken`
# ({id: array}, one per outermost backward) holds what no leaf may take nor sum into: what a caller lent (and a lent
# view's owner), and each .grad that took a shared array, until the backward ends. A leaf copies a view or an array
# in `taken`; takes any other, noting it if shared; sums in place into a .grad not in `taken`, else into a new array.
# A checkpoint's recompute collects the gradients of its inputs unmarked (a leaf of its own that keeps the parts): its
# record hands them on as one hand-out, which marks them again (those given twice).
def _read_twice(g, g_shared, input_grads):
    """The ids of the arrays in a record's hand-out that someone else may read again, or None (NOTE [who owns a
    gradient]): one given twice, or beside its view; g, if shared."""
    if not g_shared:  # first the common case, cheaply (NOTE [per-op overhead], tensor.py): no array given twice
        seen = []
        for gi in input_grads:
            if gi is not None:
                base = gi.base  # a view's owner; the pool's block, a bytearray, is no array's (backend.is_view)
                o = id(gi if base is None or type(base) is bytearray else backend.owner(gi))
                if o in seen:
                    break
                seen.append(o)
        else:
            return None
    parts = [gi for gi in input_grads if gi is not None]
    owners = [id(backend.owner(p)) if backend.is_array(p) else id(p) for p in parts]
    twice = {o for o in owners if owners.count(o) > 1}
    if g_shared:
        twice.update(id(p) for p in parts if p is g or not backend.is_array(p))
    return twice or None


def zero_grads(params, set_to_none=True):
    """Module.zero_grad and Optimizer.zero_grad: drop each .grad, or fill it with zeros in place."""
    for p in params:
        if set_to_none or p._grad is None:
            p._grad = None  # directly: the grad setter checks and reports only a gradient that comes (NOTE [per-op overhead])
        else:
            p._grad._data[...] = 0


def _check_same_device_and_dtype(name, arrays):
    first = arrays[0]
    for a in arrays[1:]:
        if type(a) is not type(first):
            devices = sorted({backend.device_of(x) for x in arrays})
            raise RuntimeError(f"{name}: inputs are on different devices ({' and '.join(devices)}); "
                               f"move them to one device with .to(device) first")
        if a.dtype != first.dtype:
            dtypes = sorted({x.dtype.name for x in arrays})
            to = next((x.dtype.name for x in arrays if backend.is_float(x.dtype)), first.dtype.name)  # int: to a float
            raise TypeError(f"{name}: inputs have different dtypes ({' and '.join(dtypes)}); minigrad does not "
                            f"promote silently: convert one with .to('{to}') first")


# ----------------------------------------------------------------------------- reads outside the tape

# NOTE [reads outside the tape]: the tape sees what ops read, but Python code also reads values outside any op: a
# comparison (w > 0, for a mask), .item(), .numpy(), an index's values, an in-place write the tape does not record.
# Every such read goes through `_values`, and every such write through `_before_write`, which tell the watchers on
# now (`watching_reads`, innermost last) first: a checkpoint's forward must know what its function reads outside the
# ops, and its recompute must not hand such a read a value it did not compute (checkpoint/policies.py). A watcher
# has `read_outside(array, tensor, who)` and `before_write(tensor)`; with none on (outside checkpoints) a read costs
# one empty loop.
_watchers = []


def _values(t, who):
    """t's array, for a read outside the ops by `who` (NOTE [reads outside the tape])."""
    a = t._data
    for w in _watchers:
        w.read_outside(a, t, who)
    return a


def _before_write(t, who):
    """t's array is about to be written in place by code the tape does not record: a read of the old values, then
    the watchers are told of the write (NOTE [reads outside the tape])."""
    a = _values(t, who)
    for w in _watchers:
        w.before_write(t)
    return a


class watching_reads:
    """`with watching_reads(watcher):` the reads and writes outside the ops are told to `watcher` (None: to none)
    as well (NOTE [reads outside the tape])."""

    def __init__(self, watcher):
        self.watcher = watcher

    def __enter__(self):
        if self.watcher is not None:
            _watchers.append(self.watcher)

    def __exit__(self, *exc):
        if self.watcher is not None:
            _watchers.remove(self.watcher)
