"""Selective checkpointing: what a checkpoint keeps rather than recomputes, and what its recompute runs again.

    y = mg.checkpoint(block, x, policy=mg.checkpoint_policies.dots_saveable)

The policies (nothing_saveable, the default; everything_saveable; dots_saveable;
save_anything_except_core_attention) decide op by op (NOTE [selective checkpoint]). OpCache is what a
checkpoint's forward (segment.py) notes for its recompute: the ops in order, which of them the policy keeps,
the writes the tape does not record (NOTE [writes the tape does not record]) and which ops need not run again
because backward never reads what only running them makes (NOTE [recompute what backward reads]); the
recompute takes the ops back from it in the same order. The seam it uses: while `caching(cache)` is on, the cache
is the last op mode (NOTE [op modes], tensor/modes.py), which sees each op before it runs (`replayed`) and, through
its `noted`, after it ran and before its record keeps anything (`ran`); keep asks it one more question (`keeps`):
tensor.Cache's (NOTE [the cache asks, the tape answers]). It answers with the tape's own functions (record, keep,
release).

Read next: chains.py, checkpointing a chain of functions.
"""
import types
import weakref

from .. import backend
from ..backend.random import get_rng_state, set_rng_state
from ..tensor import Cache, caching, record, release, version_counter, wrap


# NOTE [selective checkpoint]: a policy decides, op by op, what a checkpoint keeps rather than recomputes:
# policy(op_name, input_shapes, output_shape) -> True keeps the op, as JAX's checkpoint policies (whose
# names these are) and PyTorch's selective activation checkpointing (torch.utils.checkpoint.
# create_selective_checkpoint_contexts). In the forward (OpCache.ran, then OpCache.keeps), a kept op keeps
# what its backward reads, but its inputs: those come from the recompute, which makes them again or hands
# them back. An output is remembered (saved by the Checkpoint record) when the recompute will read it: an
# op that runs again reads it, or a kept op's backward does. In the recompute (OpCache.replayed: take, then
# _replay) the same ops come in the same order, checked by name; a kept op does not run (no FLOPs):
# it returns the forward's output (or, when nothing reads it, a NaN placeholder of its shape) and its new
# record takes over what the forward's kept. The same arrays, so gradients are bit-identical.
# An op that records nothing (its inputs need no gradient: the causal mask's triu) always runs again, and
# a nested checkpoint's record is never kept: it recomputes its own insides. A cost of keeping it simple:
# remembered outputs are freed when the checkpoint's backward ends, with its inputs, not op by op. A value
# read outside the ops (w > 0, .item()) counts as a read (NOTE [reads outside the tape], tensor/tape.py).
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
#
# NOTE [early stop]: PyTorch's early stop ends a recompute as soon as it has saved as many tensors as the forward did:
# backward has all it reads then, and whatever the function would do after is not run. Here the recompute's own
# records are what backward runs, from the outputs of the ops that made the forward's results; so the recompute is
# over once the forward's ops have all come back, the same ones in the same order (`replayed` counts them). If the
# function goes on (it branched on something that changed, and runs more ops after them), the next op raises
# StopRecompute out of it, and the Checkpoint record backpropagates from what the ops that made the forward's
# results made this time (`twins`): the forward's gradients, and no error for the ops it did not run, as PyTorch's.
# A recompute that ran other ops than the forward's, or fewer, runs to its end and is compared (determinism_check).
# With early stop off (set_checkpoint_early_stop(False)) every recompute runs to its end, and the determinism check
# refuses what it saved beyond the forward's arrays, as PyTorch's does. A second backward (retain_graph) stops alike.
#
# NOTE [what the recompute reads from outside]: the recompute reads the tensors the function takes from outside (by
# closure: a mask, a frozen weight; a parameter) as they are then, not as the forward read them. A write in between
# (after the forward, or inside the function, which the recompute runs again) would change the recomputed values,
# and a plain run, whose records read the arrays of the forward, does not see it. So the forward notes every read of
# a tensor that no op of the function made (an op's input, `saw_op`; a read outside the ops, `read_outside`), in
# order, with its version counter, version and memory (the array that owns it); the recompute makes the same reads
# in the same order (`reread`), and one of the same tensor (its counter; a view made inside shares it) at another
# version, or in other memory (`.data = ...`, which counts no version), is refused where it reads the values: an op
# that runs again, the inputs a replayed op saves, a read outside the ops. A tensor made inside is made again, with
# another counter: never refused.
# A nested checkpoint's ops, in the outer's forward and the outer's recompute, are the outer's reads too.
#
# NOTE [placeholders]: a recompute skips the ops whose outputs backward does not read (NOTE [recompute what backward
# reads]) and hands out a NaN placeholder for each; no read may see one. A function's reads outside the ops are the
# same both times (its forward told its cache each one, `read_outside`, as a watcher of NOTE [reads outside the
# tape], tensor/tape.py), so the recompute makes for real what they read; but if the function reads something else
# the second time, it must fail, naming the op and the fix. `_placeholders` holds what the recomputes running now
# handed out without running, by id; `refusing_placeholders`, a watcher on during every recompute, refuses a read
# outside the ops of one, and the cache, an op mode, an op that would run on one. Empty outside recomputes.
_placeholders = {}


def _check_real(a, who, op=False):
    hit = _placeholders.get(id(a))
    if hit is not None and hit[0] is a:
        cache = hit[2]
        if op and cache.diverged and cache.checks:
            return  # it ran other ops than its forward: its determinism check says what changed (checkpoint)
        if cache.diverged:
            raise RuntimeError(f"{who}: a checkpoint's recompute of '{cache.who}' in backward ran other ops than its "
                               f"forward, and this reads the output of '{hit[1]}', which it did not run: a "
                               f"checkpointed function must compute the same thing twice (determinism_check='none' "
                               f"skips the check that says what changed)")
        raise RuntimeError(f"{who}: a checkpoint's recompute of '{cache.who}' did not run '{hit[1]}' (backward does not "
                           f"need its output) and this reads that output's values: the function read values outside "
                           f"minigrad's ops that its forward did not read (its reads must be the same both times). "
                           f"Read them the same way in both runs, or recompute every op: `from minigrad.checkpoint import "
                           f"set_checkpoint_early_stop` and wrap the checkpoint in "
                           f"`with set_checkpoint_early_stop(False):`")


class _RefusingPlaceholders:
    """The watcher of reads outside the ops that is on during every recompute (NOTE [placeholders])."""

    def read_outside(self, array, t, who):
        if _placeholders:
            _check_real(array, who)

    def before_write(self, t):
        pass


refusing_placeholders = _RefusingPlaceholders()


def nothing_saveable(op_name, input_shapes, output_shape):
    """Save nothing: recompute the whole function in backward (checkpoint's default)."""
    return False


def everything_saveable(op_name, input_shapes, output_shape):
    """Save every op: nothing that computes runs again in backward (views of what it keeps are made again, for
    nothing); the memory is the plain run's, plus the inputs."""
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
                 "meta", "slot", "flops", "rng_after", "vc", "snapshot", "watch", "view")

    def __init__(self, name, index):
        self.name, self.index, self.record, self.kept, self.refill, self.own_out = name, index, None, False, (), None
        self.extra, self.producers = False, ()
        self.n_saved = self.out = self.ref = self.meta = self.slot = self.flops = self.rng_after = None
        self.vc = self.snapshot = self.watch = None  # NOTE [writes the tape does not record]
        self.view = False  # its output is a view of an input: made again from it, never handed back


def _position(array, arrays, attrs):
    """Where `array` was handed to an op: its index among `arrays`, the name of the keyword argument, or None."""
    for k, b in enumerate(arrays):  # loops, not generators: asked for every array an op of a checkpoint saves
        if array is b:
            return k
    for name, b in attrs.items():
        if array is b:
            return name
    return None


class _CheckpointCache(Cache):
    """A checkpoint's cache as an op mode (NOTE [op modes]): Cache's, and an op that runs reads its inputs, which
    must not be placeholders that a recompute running now handed out (NOTE [placeholders])."""

    def __op__(self, op_cls, inputs, attrs, run):
        t = self.replayed(op_cls, inputs, attrs)
        if t is not None:
            return t
        if _placeholders:
            for x in inputs:
                _check_real(x._data, op_cls.name, op=True)
        return run(op_cls, inputs, attrs, self.ran)


class NestedReads(_CheckpointCache):
    """The cache of a checkpoint whose forward runs inside another's forward, which keeps nothing: that one
    recomputes this one whole, so its ops are not noted and keep nothing (the defaults). But what they read may be
    the outer's values (its argument; a tensor taken by closure; with no record made, nothing else tells), and the
    outer's recompute must make those for real: each is told to the outer as a read outside its ops."""

    def __init__(self, outer):
        self.outer = outer

    def ran(self, op, record, inputs, t, attrs):
        for x in inputs:
            self.read_outside(x._data)
        self.saw_op(inputs, op.name)

    def read_outside(self, array):
        self.outer.read_outside(array)

    def saw_op(self, inputs, name):
        self.outer.saw_op(inputs, name)


class StopRecompute(Exception):
    """Raised out of a checkpoint's function in its recompute once the forward's ops have all come back (NOTE
    [early stop]). An Exception, as PyTorch's _StopRecomputationError: a bare `except Exception` inside the function
    would swallow it, and the next op raises it again."""


class OpCache(_CheckpointCache):
    """What a checkpoint's forward notes for its recompute (NOTE [selective checkpoint], NOTE [recompute
    what backward reads]).

    The forward shows it every op (`ran`, from its op mode) and tensor.keep asks which records keep anyway
    (`keeps`); `seal` ends the forward: it decides which ops run again and gives the outputs to remember,
    which the Checkpoint record saves. The recompute (`start`) asks for the ops back in order (`replayed`):
    an op that does not run again becomes a new record, made from the forward's, and its output is returned."""

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
        self.reads, self._k, self.outer = [], 0, None  # NOTE [what the recompute reads from outside]
        self.forward_ops, self.ends, self.twins, self._n, self._same = None, {}, [], 0, True  # NOTE [early stop]

    # --- the forward
    def ran(self, op, record, inputs, t, attrs):
        """`op` ran on `inputs` (and keyword arguments `attrs`) and gave tensor `t`; `record` is op if it records,
        else None. The recompute's ops are not noted: they come back (`replayed`)."""
        if self.replaying:
            self._twin(self._n - 1, t)
            return
        name, out, arrays = op.name, t._data, [x._data for x in inputs]
        e = _Entry(name, len(self.entries))
        if self.count_flops:
            e.flops = sum(op.flops(arrays, out).values())
        e.producers = tuple([self._producer(a) for a in arrays])
        self.saw_op(inputs, name, e.producers)
        reads = arrays  # what the recompute may read: all its inputs, if it runs again
        if record is not None and name not in ("checkpoint", "checkpoint_output") and not any([out is a for a in arrays]):
            saved = record.saved
            e.record, e.n_saved = record, len(saved)
            e.meta = (out.shape, out.dtype, backend.xp_of(out))  # for a placeholder, if it does not run again
            # where each saved array came from: an input (its index) or a keyword argument (its name: a dropout mask)
            e.refill = tuple([(i, k) for i, a in enumerate(saved) if a is not None
                              for k in [_position(a, arrays, attrs)] if k is not None])
            e.own_out = next((i for i, a in enumerate(saved) if a is out), None)
            e.extra = len(e.refill) + (e.own_out is not None) < sum([a is not None for a in saved])
            if getattr(op, "rng_state", None) is not None:  # it drew from the generator (sdpa's dropout): a replay
                e.rng_after = get_rng_state()                 # moves the generator on as the forward did
            # a view (reshape, transpose, a slice) costs nothing to make again, and made again it views the
            # recompute's input, as in the forward: a write into one reaches the other (NOTE [writes the tape does
            # not record]). So it is never kept nor remembered: it runs again whenever its output is read
            e.view = op.returns_view and out.base is not None and any(
                backend.owner(a) is backend.owner(out) for a in arrays)
            if not e.view and self.policy is not nothing_saveable and \
                    self.policy(name, tuple(a.shape for a in arrays), out.shape):
                e.kept = True
                self._chosen.add(id(record))
                reads = [arrays[k] for _, k in e.refill if isinstance(k, int)]  # not run again: what backward reads
                buffer = backend.owner(out)
                self._made.setdefault(id(buffer), []).append((weakref.ref(buffer), e))
                e.ref = weakref.ref(out)  # weakly: an output nobody reads again may die as in a plain run
                e.vc = version_counter(t)  # a write after the forward must not reach the recompute
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

    def read_outside(self, array, t=None, who=None):
        """Python code read `array`'s values (tensor t's) outside the ops (NOTE [reads outside the tape]): the
        recompute must make it for real, to read it again; and read it as the forward did (`saw`)."""
        i = self._producer(array)
        if t is not None:
            self.saw(t, who, i is None)
        if i is not None:
            self._read_out.add(i)
        if self._made:
            self._read(array)

    def saw_op(self, inputs, name, producers=None):
        """Op `name` of this function, or of a checkpoint inside its forward, read `inputs` (NOTE [what the recompute
        reads from outside]); inside an outer checkpoint's recompute, the outer's recompute reads them too."""
        for x, p in zip(inputs, producers or [self._producer(x._data) for x in inputs]):
            self.saw(x, name, p is None)
        if self.outer is not None and self.outer.replaying:
            self.outer.reread(inputs, name)

    def saw(self, t, who, outside=True):
        """A read of tensor t: the forward notes it, the recompute checks it (NOTE [what the recompute reads from
        outside])."""
        if self.replaying:
            return self.reread([t], who)
        self.reads.append((version_counter(t), t._vc.n, id(backend.owner(t._data))) if outside else None)

    def reread(self, inputs, who, real=None):
        """The recompute's `who` reads `inputs` (real: the indices whose values it reads; None: all): each as the
        forward's read in the same place did, if the same tensor."""
        for k, t in enumerate(inputs):
            i, self._k = self._k, self._k + 1
            want = self.reads[i] if i < len(self.reads) else None
            if want is not None and t._vc is want[0] and (want[0].n, id(backend.owner(t._data))) != want[1:] and \
                    (real is None or k in real):
                how = f"at version {want[0].n}, it was read at version {want[1]}" if want[0].n != want[1] else \
                    "given another array, .data = ..."
                raise RuntimeError(
                    f"checkpoint: recomputing '{self.who}' in backward, '{who}' reads a tensor of shape {t.shape} "
                    f"({t.dtype}) from outside the function (taken by closure, or a parameter) that was modified in "
                    f"place since the forward read it ({how}): "
                    f"the recompute would compute with other values than the forward, and the gradients would be "
                    f"wrong (a plain run's records keep what they read). Modify it after backward (an optimizer step "
                    f"belongs after backward), or before the checkpoint; a write inside the function runs again in the "
                    f"recompute: write into a copy (c = c * 1), or skip it when minigrad.checkpoint.is_recomputing() "
                    f"(as BatchNorm does with its running statistics)")

    def before_write(self, t):
        """Tensor t is about to be written in place outside the tape (NOTE [writes the tape does not record]): copy
        the outputs of this forward's ops that share its memory, as their ops made them, for the recompute."""
        vc = version_counter(t)
        self._written[id(vc)] = vc
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
                        f"no_grad or through .detach() or a view, which the tape does not record: its recompute in "
                        f"backward would run the write again, on values the forward already changed. Write into a copy "
                        f"inside the function (y = x * 1, then write y), or make the change before the checkpoint")

    def keeps(self, record, inputs):
        """What this record keeps inside the forward, which keeps nothing (tensor.keep asks): None, unless the
        policy keeps it. Then what its backward reads but its inputs, which the recompute hands it again (made
        again, or remembered)."""
        if id(record) not in self._chosen:
            return None
        return tuple([None if any([a is t._data for t in inputs]) else a for a in record.saved])

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
                e.out, e.vc = (o._data, version_counter(o)) if o is not None else (None, None)
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

    def ends_of(self, outputs):
        """NOTE [early stop]: (the names of the forward's ops, {index of the op that made each of `outputs`: its
        place}), for the recompute to stop after; None where that is not known: the recompute then runs to its end."""
        at = [self._producer(o._data) for o in outputs]
        names = tuple(e.name for e in self.entries)
        return None if None in at or len(set(at)) < len(at) else (names, {i: k for k, i in enumerate(at)})

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
                                                           (wants_out and (i not in results or e.view))))
            needed.update(p for p in (e.producers if runs[i] else [e.producers[k] for _, k in e.refill
                                                                   if isinstance(k, int)]) if p is not None)
        return runs, read, needed

    def note_input(self, array):
        """Let `plan` say whether the recompute reads `array` (as entry -1): measure_chain asks."""
        self._out_of[id(array)] = (weakref.ref(array), -1)

    # --- the recompute
    def start(self, remembered, reads=(), stop=None):
        """The recompute begins; `stop`: ends_of's answer in the forward, to stop after (NOTE [early stop]), or None."""
        self.cursor, self.remembered, self._placeholders, self.diverged = 0, remembered, [], False
        self.reads, self._k, self.replaying = reads, 0, True
        self.forward_ops, self.ends = stop if stop is not None else (None, {})
        self.twins, self._n, self._same = [None] * len(self.ends), 0, True

    def replayed(self, op_cls, inputs, attrs):
        """The recompute runs op_cls on inputs (its op mode asks): None if it runs again; else the new record's
        output tensor, the op not run."""
        if not self.replaying:
            return None
        if self.forward_ops is not None:  # NOTE [early stop]
            if self._same and self._n == len(self.forward_ops):
                raise StopRecompute  # the forward's ops have all come back
            self._same = self._same and self._n < len(self.forward_ops) and self.forward_ops[self._n] == op_cls.name
        self._n += 1
        hit = self.take(op_cls.name)
        self.reread(inputs, op_cls.name, None if hit is None else {k for _, k in hit[2] if isinstance(k, int)})
        return None if hit is None else self._twin(self._n - 1, _replay(op_cls, inputs, attrs, *hit))

    def _twin(self, i, t):
        """The recompute's op i made t: one of the function's results, if the forward's op i made one."""
        k = self.ends.get(i)
        if k is not None:
            self.twins[k] = t
        return t

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
        else:  # nothing in the recompute reads it: a placeholder, which no read may see (NOTE [placeholders])
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
        self.replaying = False
        for p in self._placeholders:
            _placeholders.pop(id(p), None)

    def finish(self):
        """The recompute is over: every op came back."""
        n, self.remembered = len(self.entries), ()
        if self.cursor != n and self.policy is not nothing_saveable:
            raise RuntimeError(f"checkpoint: recomputing '{self.who}' in backward ran {self.cursor} ops, its forward "
                               f"{n}. The recompute must run the same ops in the same order. A checkpointed function "
                               f"must compute the same thing twice.")


# The recompute's half of NOTE [selective checkpoint] and NOTE [recompute what backward reads]: an op that does not
# run again becomes a new record, a copy of the forward's op (its attributes: dim, the GELU variant, ...) whose
# saved arrays are what the forward's record kept (if the policy kept it), with the inputs it saved taken from this
# run. The forward's record hands its arrays over and is released: no moment counts them twice or not at all. No
# FLOPs: the op did not run.
_TAPE_FIELDS = ("saved", "next", "seq", "released", "versions", "retained", "packed")


def _replay(op_cls, inputs, attrs, forward, saved, refill, out):
    """The record of an op that a checkpoint's recompute does not run again, and its output tensor."""
    op = op_cls()
    vars(op).update({k: v for k, v in vars(forward).items() if k not in _TAPE_FIELDS})
    t = wrap(out, True)
    for i, k in refill:  # the inputs it saved (by index), or keyword arguments (by name): this run's
        saved[i] = inputs[k]._data if isinstance(k, int) else attrs[k]
        if _placeholders:
            _check_real(saved[i], op_cls.name)
    op.save_for_backward(*saved)
    record(op, inputs, t)
    release(forward)
    return t
