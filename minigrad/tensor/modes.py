"""The tape's state: the switches its behaviour depends on, the op modes `apply` consults (NOTE [op modes]), the
listener it reports to, and the version counter of each tensor's storage. Nothing here records or runs an op; tape.py
and tensor.py read these.

Read next: tape.py, the records and the backward walk.
"""
import contextlib
import weakref

from .. import backend

# ----------------------------------------------------------------------------- the tape's switches

class _Switches:
    """Everything the tape's behaviour depends on, in one place. Only the context managers below set
    the first six; `backward` sets `taken`; each has a public query. Slots: every op reads several of them
    (NOTE [per-op overhead], tensor.py), and a slot is read faster than an attribute looked up in a dict."""
    __slots__ = ("grad_enabled", "recomputing", "profiler", "cache", "autocast", "saved_hooks", "taken", "modes",
                 "chain")

    def __init__(self):
        self.grad_enabled = True  # record ops (no_grad turns it off)
        self.recomputing = False  # a checkpoint is re-running its forward during backward
        self.profiler = None      # the active mg.profile: the tape reports to it
        self.cache = None         # a checkpoint's op cache, in its forward or its recompute: the tape asks it
        #                           (Cache below; a checkpoint enters `caching` to set it)
        self.autocast = None      # mg.autocast's policy: the tape asks it how to cast an op's inputs (Autocast below)
        self.saved_hooks = None   # the innermost pair of saved-tensor hooks: keep packs, _run_tape unpacks (the user's,
        #                           autograd/graph.py; keep_saved(False)'s, below: a checkpoint's forward)
        self.taken = None         # the running backward's gradient arrays that no leaf may take nor sum into
        #                           (NOTE [who owns a gradient], tape.py)
        self.modes = ()           # the op modes apply consults, in order (NOTE [op modes]); () for none
        self.chain = None         # how apply calls them: _chain's, until the stack changes


_on = _Switches()


class _Mode(contextlib.ContextDecorator):
    """Sets one switch for a `with` block (or a decorated function: ContextDecorator runs it inside the block) and
    restores it after, even on error."""
    switch = None

    def __init__(self, value):
        self.value, self.prev = value, []  # a stack: the same object may be entered again inside itself

    def __enter__(self):
        self.prev.append(getattr(_on, self.switch))
        setattr(_on, self.switch, self.value)
        if self.switch in _MODE_SWITCHES:
            _restack()
        return self

    def __exit__(self, *exc):
        setattr(_on, self.switch, self.prev.pop())
        if self.switch in _MODE_SWITCHES:
            _restack()


class OpMode:
    """NOTE [op modes]: a mode sees every op that `apply` runs while it is active, as PyTorch's TorchDispatchMode
    (torch.utils._python_dispatch) sees each aten op: `with mode:` pushes it on the stack and pops it after.
    apply asks the first mode of the stack, `mode.__op__(op_cls, inputs, attrs, run)`, and that is all apply knows
    of them; `run(op_cls, inputs, attrs, noted=None)` runs the rest of the stack and then the op itself, and returns
    the output tensor (as a TorchDispatchMode calls `func(*args, **kwargs)`). So a mode may run the op as it is (the
    default below), replace its inputs (autocast casts them), return a result without running it (a checkpoint's
    recompute hands back what its forward kept), or note it (the profiler). `noted(op, record, inputs, out, attrs)`,
    if a mode passes one, is called once the op has run, with the op instance and its record (the op, or None if it
    records nothing), before the record keeps what the op saved: where a mode sees the op itself (its FLOPs; what a
    checkpoint's policy keeps). A mode that returns without calling run runs no op, and no `noted` hears of it: the
    profiler stops that op's clock unrun.

    The order: the features have fixed places, as PyTorch's dispatch keys do (Autocast before the Python modes):
    autocast's policy first (it casts the inputs every mode below sees), then the profiler's listener, then the
    modes a user enters (the innermost `with` first, as PyTorch's), then a checkpoint's cache, nearest the op.
    Unlike TorchDispatchMode a mode is not popped while its __op__ runs: an op it applies (autocast's casts) passes
    the whole stack, as every op does. Without an active mode the stack is empty, and apply reads one slot."""
    casts_inputs = False  # it casts an op's floats itself (autocast): the Tensor's operators do not promote them first
    replaying = False     # it replays a forward's ops (a checkpoint's recompute): writes it repeats were checked then

    def __op__(self, op_cls, inputs, attrs, run):
        return run(op_cls, inputs, attrs)

    def __enter__(self):
        _entered.append(self)
        _restack()
        return self

    def __exit__(self, *exc):
        _entered.pop()  # `with` blocks end innermost first
        _restack()


_entered = []  # the OpModes entered with `with`, outermost first
_MODE_SWITCHES = frozenset({"autocast", "profiler", "cache"})  # the switches whose value is a feature's mode


def _restack():
    """Put the active modes in apply's order (NOTE [op modes]), as a mode is entered or left."""
    _on.modes = tuple([m for m in (_on.autocast, _on.profiler, *reversed(_entered), _on.cache) if m is not None])
    _on.chain = None


def _chain(plain):
    """(the first mode's __op__, the `run` it is handed), built once for each stack: each `run` calls the next mode's
    __op__, and the last one is `plain`, the op and its record (tensor.py: _run). NOTE [per-op overhead], tensor.py:
    a mode costs an op one call, of its __op__, and no closure made per op unless a mode above passed a `noted`."""
    run = plain
    for mode in reversed(_on.modes[1:]):
        run = _level(mode.__op__, run)
    _on.chain = (_on.modes[0].__op__, run)
    return _on.chain


def _level(op, below):
    def run(op_cls, inputs, attrs, noted=None):
        if noted is None:
            return op(op_cls, inputs, attrs, below)
        return op(op_cls, inputs, attrs, lambda op_cls, inputs, attrs, also=None:  # tell both the op that runs
                  below(op_cls, inputs, attrs, noted if also is None else _both(noted, also)))
    return run


def _both(first, second):
    """Two modes' `noted`, each told of the op."""
    return lambda *ran: (first(*ran), second(*ran))


def active_modes():
    """The op modes apply consults now, in order (NOTE [op modes]), as torch's _get_current_dispatch_mode_stack()
    (innermost last there; first here: the order they see an op in)."""
    return _on.modes


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


class recomputing(_Mode):
    """A checkpoint re-running its forward during backward (the profiler counts its FLOPs as
    'recompute'; BatchNorm does not update its running statistics a second time)."""
    switch = "recomputing"

    def __init__(self):
        super().__init__(True)


class profiling(_Mode):
    """Report every op, saved array, gradient and new tensor to `listener`, a Listener (mg.profile enters this); and
    every array the ops make, through backend.made (NOTE [every array an op makes], backend/pool.py)."""
    switch = "profiler"

    def __enter__(self):
        super().__enter__()
        backend.pool.report_new_arrays_to(self.value.on_new_array)

    def __exit__(self, *exc):
        super().__exit__(*exc)
        backend.pool.report_new_arrays_to(None if _on.profiler is None else _on.profiler.on_new_array)


class autocasting(_Mode):
    """Let `policy` (an Autocast, below) cast every op's inputs, or None: no op's (mg.autocast enters this; a
    checkpoint's recompute enters its forward's policy again, so that it casts as the forward did)."""
    switch = "autocast"


class packing(_Mode):
    """Let `hooks` (a saved_tensors_hooks, autograd/graph.py, which enters this) pack what every record keeps and
    unpack it for backward, or None: no hooks. One pair at a time: entered inside another, the innermost wins, as
    PyTorch's (NOTE [saved tensors hooks], autograd/graph.py)."""
    switch = "saved_hooks"


class caching(_Mode):
    """Let `cache` (a Cache, below: a checkpoint's OpCache, checkpoint/policies.py) answer the tape's questions while a
    checkpoint's function runs (its forward, or, after cache.start, its recompute), or None: no cache. It is the last
    op mode, nearest the op (NOTE [op modes]), as PyTorch's selective checkpoint enters its caching and cached
    TorchDispatchModes around the function; inside another checkpoint's function, the inner cache is the one asked."""
    switch = "cache"


class keep_saved(packing):
    """keep_saved(False): records are made, but keep none of the arrays their ops saved. A checkpoint's forward runs
    this way: it learns which tensors the segment reaches and keeps nothing. keep_saved(True): records keep their
    arrays as they are, whatever pair is on outside (a checkpoint's recompute, whose records run and are freed at
    once). Each is a pair of saved-tensor hooks (NOTE [saved tensors hooks], autograd/graph.py) that stays the
    innermost: a pair entered inside it (by the checkpointed function) leaves it on. `cache`, a checkpoint's OpCache,
    may keep some records' arrays anyway (its policy picked them: NOTE [selective checkpoint], checkpoint/policies.py)."""

    def __init__(self, keep, cache=None):
        super().__init__(_KEEPING_ALL if keep else KeepingNothing(cache))


class _KeepingAll:
    """The saved-tensor hooks of keep_saved(True): the record keeps its arrays as they are."""
    stays_innermost = True

    def pack(self, record, inputs, out):
        return record.saved, None


_KEEPING_ALL = _KeepingAll()


class KeepingNothing:
    """The saved-tensor hooks of keep_saved(False). `pack`, asked by keep, returns what the record keeps as arrays
    (nothing, or what `cache.keeps` picked) and what it holds packed: a _Dropped, each array's (shape, dtype, device)
    and no array, whose `unpack` refuses, naming the fix."""
    stays_innermost = True

    def __init__(self, cache=None):
        self.cache = cache

    def pack(self, record, inputs, out):
        kept = None if self.cache is None else self.cache.keeps(record, inputs)
        metas = tuple([(a.shape, a.dtype, backend.device_of(a)) if backend.is_array(a) else None for a in record.saved])
        return (() if kept is None else kept), _Dropped(metas)


class _Dropped:
    """What a record made inside keep_saved(False) holds packed: no array (`objects`, for the ledger, is empty) and
    each saved array's (shape, dtype, device), None where the op saved None (`metas`): a checkpoint's recompute must
    save the same (determinism_check)."""
    __slots__ = ("metas",)
    objects = ()

    def __init__(self, metas):
        self.metas = metas

    def unpack(self, op):
        if any(m is not None for m in self.metas):
            raise RuntimeError(f"backward: '{op}' was recorded inside a checkpoint's forward, which keeps nothing for "
                               f"backward. A checkpointed function must return its tensors as they are or in tuples, "
                               f"lists and dicts (checkpoint does not look inside other objects)")
        return ()


class Listener(OpMode):
    """NOTE [what the tape reports]: every report the tape (and the optimizer and the collectives) makes to the
    listener of `with profiling(listener):`, in one place: each does nothing here, and mg.profile (profiler)
    overrides them to keep its ledger of bytes, FLOPs and time. The listener is also an op mode (NOTE [op modes]),
    after autocast's: its __op__ below makes the per-op reports. Where each is called (__op__ below; _set_grad and
    _new in tensor.py; keep, hand_over, _run_tape and release in tape.py), in the order of a step:

      __op__        on_inputs (it also starts the op's clock) ... on_forward; stop_clock for an op a
                    checkpoint's recompute replays without running it
      keep          on_save: a record keeps its saved arrays (activation memory)
      hand_over     on_hand_over: a checkpoint gives the outputs it kept to its recompute's records
      _run_tape     start_clock, on_backward (before release), stop_clock: a record's backward ran
      release       on_release: a record frees its saved arrays
      _set_grad     on_grad: a .grad comes into being
      _new          on_new_tensor: a tensor that is no op's output (factories, comparisons, .data = ...)
      optim/        on_step (before and after an optimizer's step), start_clock and stop_clock around it; and
      made          on_new_array: an array an op or a step makes (a temporary, new state), as it is made
      distributed   on_communication: bytes sent and received by a collective

    Only while a listener is active is it on the stack and read by the tape: without one, none of this runs."""

    def __op__(self, op_cls, inputs, attrs, run):
        """An op's reports: its inputs, then, once it ran and its record kept what it saved, the op; its clock runs
        from one to the other (NOTE [self time], profiler), the modes below included (a checkpoint's cache)."""
        profiler, ran = self, []
        clock = profiler.on_inputs(inputs)
        t = run(op_cls, inputs, attrs, lambda op, record, inputs, out, attrs: ran.append((op, inputs)))
        if not ran:  # a mode below returned it unrun (a checkpoint's recompute): its time is the checkpoint's
            profiler.stop_clock(clock)
        else:
            profiler.on_forward(ran[0][0], ran[0][1], t._data, clock)  # stops it first
        return t

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

    def on_backward(self, op, grad, input_grads, releasing):
        """op's backward turned grad into input_grads (one per input, None where none); releasing: release is next."""

    def on_grad(self, array):
        """array became a tensor's .grad."""

    def on_new_tensor(self, t):
        """t was made around an array, or given a new one, outside any op."""

    def on_step(self, optimizer, done):
        """optimizer's step is about to run (done False) or has run (done True)."""

    def on_new_array(self, array, state):
        """An op or an optimizer's step made array: new state (state True), or a temporary, or an op's output."""

    def on_communication(self, op, sent, received, clock=None):
        """A collective op sent and received these many bytes; clock: start_clock's, taken as it began."""


class Cache(OpMode):
    """NOTE [the cache asks, the tape answers]: every question the tape asks a checkpoint's op cache, in one place.
    While a checkpoint runs its function (its forward, or its recompute in backward), `_on.cache` is its cache
    (checkpoint/policies.py: OpCache, which overrides these; `caching` above sets the switch), and the cache is the
    last op mode, nearest the op (NOTE [op modes]). Each default here is what the tape does with no cache:

      replayed(op_cls, inputs, attrs)   __op__, before an op runs: a tensor to return without running it (the
                                        recompute hands back what the forward kept), or None: it runs
      ran(op, record, inputs, out, attrs)   __op__'s `noted`, after it ran and before its record keeps anything:
                                        the forward notes each op, its inputs, its output and its record (None if
                                        it does not record), and its policy picks what keep keeps
      keeps(record, inputs)             keep_saved(False, cache)'s pack hook: the arrays this record keeps anyway
                                        (its policy picked it), or None: it keeps nothing, as without a cache
      replaying                         whether this is the recompute (in-place writes repeat the forward's)
      placeholder(array)                whether the recompute handed `array` out for an op it did not run (NOTE
                                        [placeholders], checkpoint/policies.py): autocast's weight-cast cache asks

    Everything else goes the other way: the cache calls the tape (record, keep, hand_over, release, watching_reads)."""

    def __op__(self, op_cls, inputs, attrs, run):
        t = self.replayed(op_cls, inputs, attrs)
        return t if t is not None else run(op_cls, inputs, attrs, self.ran)

    def replayed(self, op_cls, inputs, attrs):
        return None

    def ran(self, op, record, inputs, out, attrs):
        pass

    def keeps(self, record, inputs):
        return None

    def placeholder(self, array):
        return False


class Autocast(OpMode):
    """NOTE [autocast asks first]: the one question an autocast policy answers, in one place. Inside
    `with mg.autocast(...)`, `_on.autocast` is its policy (amp/autocast_mode.py, which overrides `inputs`;
    `autocasting` sets the switch), and the policy is the first op mode (NOTE [op modes]): it sees each op before
    any other mode, and runs it on what it answers; outside, it is not on the stack and asks nothing:

      inputs(name, inputs, same_dtype)   the tensors op `name` runs on, cast as the policy's lists say (to the low
                                         precision, to float32, or each float to the widest of them where the op
                                         takes one dtype: same_dtype), or `inputs` themselves. A composed function
                                         that PyTorch casts as a whole (cross_entropy, mse_loss, ...) asks the
                                         same, through autocast_inputs

    A cast is an ordinary op (ops.Cast, by Tensor.to), recorded on the tape, and it passes the whole stack (this
    mode too, which lets it be: a cast has one input): the gradient goes back through it into a float32 weight, in
    float32, and the modes below (the profiler, a checkpoint's cache) see it as any op. Outside a region autocast
    costs apply nothing (before it was a mode, it was one slot's read, about 14 ns per op on CPython 3.11)."""
    casts_inputs = True  # by the policy's lists: the Tensor's operators hand it floats of two dtypes as they are

    def __op__(self, op_cls, inputs, attrs, run):
        return run(op_cls, self.inputs(op_cls.name, inputs, op_cls.same_dtype), attrs)

    def inputs(self, name, inputs, same_dtype=True):
        return inputs


def is_grad_enabled():
    return _on.grad_enabled


def is_keeping_saved():
    """False inside keep_saved(False) (a checkpoint's forward): records keep nothing."""
    return type(_on.saved_hooks) is not KeepingNothing


def is_recomputing():
    return _on.recomputing


def active_profiler():
    return _on.profiler


def active_autocast():
    """The policy of the autocast region the code runs in (mg.autocast), or None."""
    return _on.autocast


def autocast_inputs(name, *inputs):
    """The tensors that a composed function `name` (cross_entropy, ...) runs on: as autocast's policy casts them
    (None and numbers pass as they are), or the inputs themselves outside autocast."""
    return inputs if _on.autocast is None else _on.autocast.inputs(name, inputs)


def active_saved_tensors_hooks():
    """The innermost saved_tensors_hooks (mg.autograd.graph) the code runs in, or None."""
    return _on.saved_hooks


def active_cache():
    """The op cache of the checkpoint whose function is running (its forward or its recompute), or None."""
    return _on.cache


# ----------------------------------------------------------------------------- version counters

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


def version_counter(t):
    """The counter of in-place writes to t's storage (NOTE [version counters]), made on first asking: one object
    shared by every tensor that aliases that storage (its views, detach(), a Parameter made of it), as PyTorch's
    VariableVersion is shared, whose count PyTorch shows as t._version (`version_counter(t).n == t._version` here
    too). Code that keeps a tensor's values for later, as `keep` does for backward and a checkpoint does for its
    recompute, notes the counter and its count `.n`: the same counter at another count later means the storage was
    written in place since. `version_counter(t).alias(t, other)` makes `other`, a new tensor around t's array,
    share it (nn.Parameter(t) does, as PyTorch's Parameter shares its tensor's storage and version)."""
    if t._vc is None:
        t._vc = _Version()
    return t._vc


def _share_version(view, inputs):
    base = backend.owner(view._data)
    src = next((t for t in inputs if backend.owner(t._data) is base), None)
    if src is not None:
        version_counter(src).alias(src, view)


def mark_written(tensors):
    """Tell the tape that these tensors' arrays were written in place by code outside it (an optimizer's
    step writes p's array directly): a record that saved one refuses to run backward."""
    for t in tensors:
        version_counter(t).n += 1


def check_saved_versions(record):
    """Refuse to run record's backward if an array it saved was written in place since its forward (NOTE [version
    counters]): PyTorch's "one of the variables needed for gradient computation has been modified by an inplace
    operation", raised as its autograd unpacks a saved tensor. The engine's walk makes this check before each
    record's backward (inline, tape.py: _run_tape); a walk of one's own makes it too (learner.py)."""
    for vc, n, i, k in record.versions:
        if vc.n != n:
            raise _written_since(record, vc.n, n, i, k)


def _written_since(record, now, n, i, k):
    """The error for a record whose saved array i (its input k, or its output when k is -1) was written in place
    since the forward: it is at version `now`, it was saved at version n."""
    what, a = f"its input {k}" if k >= 0 else "its output", record.saved[i]
    return RuntimeError(f"backward: '{record.name}' saved {what} (shape {a.shape}, {a.dtype.name}) for its backward, "
                        f"and it was modified in place after the forward (it is at version {now}, it was "
                        f"saved at version {n}): the gradient would be computed at the new values. Modify a "
                        f"copy instead (x = x + 1, not x += 1), or run the forward again after the change "
                        f"(an optimizer step belongs after backward).")
