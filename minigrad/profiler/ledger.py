"""The ledger: every byte the engine holds and every FLOP it computes, while a block runs.

    with mg.profile() as prof:                 # or mg.profile(model, opt): count those from the start
        loss = model(x).sum(); loss.backward(); opt.step()
    print(prof.table())
    prof.peak_bytes("activations"), prof.flops("backward", op="matmul"), prof.timeline()

Bytes are counted by category, one buffer in one category (NOTE [one buffer, one category]):
  parameters   the arrays of nn.Parameter tensors
  optimizer    optimizer state (momentum, Adam's moments)
  gradients    the .grad of leaves (and of tensors that retain_grad)
  activations  arrays that a record on the tape saved for its backward
  transient    everything else the engine made that is still alive: op outputs nobody saved,
               gradients in flight during backward, tensors made by factories (the data batch),
               module buffers (BatchNorm's running statistics)
NOTE [what a profile counts]: what the block makes, it counts, through the tape's few doors
(an op's output, a record's saved arrays, a new tensor, a .grad set, an optimizer's step). Of
what was alive before the block, it counts what the block uses, as alive since the start: the
parameters that its ops read (and their .grad), and the optimizers that step in it (their
parameters, gradients and state); `profile(model, optimizer, ...)` counts those from the start
too. An unrelated model elsewhere in the process counts nothing. A graph recorded before the
block does not count (start the profile before the forward pass).

What the ledger cannot see: temporaries that NumPy makes inside one op and frees before it
returns, and Python's own objects; tests compare the total against the allocator (tracemalloc,
CuPy's pool) to bound them.

FLOPs follow NOTE [FLOP convention] in ops.py, by phase ('forward', 'backward', 'recompute').

Time: each op's wall time by phase, as PyTorch's profiler reports it: self time, less the ops that ran
inside it and less the profiler's own bookkeeping (NOTE [self time]); prof.seconds("backward", op="matmul").

Read next: schedules.py and checkpoint.py, which trade these bytes for recompute FLOPs.
"""
import functools
import time
import weakref

from .. import backend, nn, optim
from ..tensor import Listener, Tensor, active_profiler, is_recomputing, profiling

CATEGORIES = ("parameters", "optimizer", "gradients", "activations", "transient")
PARAMETERS, OPTIMIZER, GRADIENTS, ACTIVATIONS, TRANSIENT = range(5)
PHASES = ("forward", "backward", "recompute")
TIMED_PHASES = PHASES + ("step",)  # time also counts optimizer steps, by optimizer (AdamW, SGD, ...)
_now = time.perf_counter_ns  # the clock (NOTE [self time]); a module global, one look-up fewer per read


def format_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def format_flops(n):
    for unit in ("", "k", "M", "G", "T"):
        if abs(n) < 1000 or unit == "T":
            return f"{n:.0f}" if unit == "" else f"{n:.2f} {unit}"
        n /= 1000


def format_seconds(s):
    if abs(s) < 1e-3:
        return f"{s * 1e6:.0f} µs"
    return f"{s * 1e3:.2f} ms" if abs(s) < 1 else f"{s:.2f} s"


def _check_scope(x):
    if not isinstance(x, (nn.Module, optim.Optimizer, Tensor)):
        raise TypeError(f"profile: counts modules, optimizers and tensors from the start of the block; got "
                        f"{type(x).__name__}")
    return x


def _state_arrays(optimizer):
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, Tensor):
                value = value._data
            if backend.is_array(value):
                yield value


# NOTE [self time]: an op's clock runs while the tape works on it: in `apply`, from the end of on_inputs to the
# start of on_forward (its forward, wrapping the output, `keep`); in `_run_tape`, for one record's turn (its
# version checks, its backward, the release of what it saved, and handing its gradients on: the sums into other
# records' gradients and into leaves' .grad); an optimizer's whole step. Its total (PyTorch's 'CPU total')
# includes the ops that ran inside it: a checkpoint's backward runs its segment's recompute and that recompute's
# backward. Its self time (PyTorch's 'Self CPU') leaves them out. Neither counts the profiler's own bookkeeping:
# each hook the tape calls times itself, as the profiler's overhead (_bookkeeping; inline in the hooks that run
# for every op, where the wrapper's call would cost more than the two reads of the clock). So the self times of
# all ops and the overhead add up to at most the block's wall time; the rest is Python between the ops (the
# user's code, Tensor methods before they apply an op, backward() sorting the tape). Reading the clock costs a
# fraction of a microsecond per op, part of which stays in the ops' times.
# No stack of running clocks: the profile keeps two running sums, the self time of every op that has stopped
# and the bookkeeping so far, and a clock is the time and those two sums when it started. When it stops, what
# the bookkeeping sum grew by is the bookkeeping inside it, and what the self-time sum grew by is the ops that
# ran inside it, at every depth (their self times add up to their totals). A clock that an error left running
# is never stopped and changes nothing: its time stays in the op around it. A hook inside a hook (a weak
# reference's callback) needs no flag either: the outer one sets the bookkeeping sum to what it was when it
# began plus its own time, which holds the inner one's.
def _bookkeeping(hook):
    """A hook of the tape, timed as the profiler's overhead: out of the time of the op that is running."""
    @functools.wraps(hook)
    def timed(self, *args, **kwargs):
        start, before = _now(), self._overhead_ns
        try:
            return hook(self, *args, **kwargs)
        finally:
            self._overhead_ns = before + _now() - start
    return timed


class profile(Listener):
    """Context manager that records bytes by category, FLOPs and time by phase and op (see module doc)."""

    def __init__(self, *scope):
        # NOTE [one buffer, one category]: each buffer (the array that owns the memory, so a view
        # adds nothing) keeps a count of holders per category; its bytes go to the first category,
        # in CATEGORIES order, with a holder. A tanh output saved by tanh and by the next linear is
        # one buffer with two activation holders: counted once. A weight saved for backward is
        # still a parameter.
        self._buffers = {}                 # id(owner) -> [nbytes, holders per category, category or None]
        self._current = [0] * len(CATEGORIES)
        self._total = 0                    # sum(self._current)
        self._peak = [0] * len(CATEGORIES)
        self._peak_total = 0
        self._at_peak = (0,) * len(CATEGORIES)  # the categories when the total peaked
        self._refs = {}                    # id(weakref to a holder) -> (the weakref, what to release when it dies)
        self._records = {}                 # id(record) -> its weakref, while its saved arrays count
        self._flops = {}                   # (phase, op name) -> FLOPs
        self._calls = {}                   # (phase, op name) -> calls
        self._saved = {}                   # op name -> bytes saved for backward (summed over calls)
        self._events = []                  # [op name, phase, bytes per category after it]
        self._self_ns = {}                 # (phase, op name) -> nanoseconds, less the ops inside (NOTE [self time])
        self._total_ns = {}                # (phase, op name) -> nanoseconds, the ops inside included
        self._ops_ns = 0                   # the self times of all ops so far (NOTE [self time])
        self._overhead_ns = 0              # the profiler's own bookkeeping while the block ran
        self._start_ns = None              # when the block began
        self._wall_ns = None               # the block's wall time, once it has ended
        self._traffic = {}                 # collective's name -> [bytes sent, bytes received] by this process
        self._used = {}                    # id -> weakref of each parameter, module, optimizer counted (NOTE [what
                                           # a profile counts]); by id, as tensors' == is elementwise
        self._scope = [_check_scope(x) for x in scope]
        self._mode = profiling(self)       # the tape reports to this profile while the block runs
        self._open = False

    # --- the block
    def __enter__(self):
        if active_profiler() is not None:
            raise RuntimeError("profile: another profile is already active; nesting is not supported")
        if self._events:
            raise RuntimeError("profile: this profile has already run; make a new mg.profile() for each block")
        self._open = True
        scope, self._scope = self._scope, ()  # no reference kept: what dies in the block leaves the ledger
        for x in scope:
            self._use(x, since_start=False)
        self._event("start", "start")
        self._mode.__enter__()
        self._start_ns = _now()
        return self

    def __exit__(self, *exc):
        self._wall_ns = _now() - self._start_ns
        self._mode.__exit__(*exc)
        self._event("end", "end")
        self._open = False
        self._refs.clear()  # weakrefs dropped: nothing calls back into a closed profile
        self._records.clear()

    def _use(self, x, since_start=True):
        """Count a module, optimizer or parameter that the block uses and that was alive before it:
        its parameters, their gradients and (for an optimizer) its state, each buffer the ledger did
        not know yet. since_start: as alive from the start (found in use mid-block)."""
        if self._counted(x):
            return
        self._used[id(x)] = weakref.ref(x)
        if isinstance(x, nn.Module):
            for p in x.parameters():
                self._use(p, since_start)
            for b in x.buffers():
                self._hold_new(b._data, TRANSIENT, since_start)
        elif isinstance(x, optim.Optimizer):
            for p in x.params:
                self._use(p, since_start)
            for array in _state_arrays(x):
                self._hold_new(array, OPTIMIZER, since_start)
        else:  # a tensor
            self._hold_new(x._data, PARAMETERS if isinstance(x, nn.Parameter) else TRANSIENT, since_start)
            if x.grad is not None:
                self._hold_new(x.grad._data, GRADIENTS, since_start)

    def _counted(self, x):
        ref = self._used.get(id(x))
        return ref is not None and ref() is x  # not a dead object whose id x reuses

    def _hold_new(self, array, category, since_start):
        """Hold a buffer in `category` unless it is held there already (True if it was not). since_start,
        for a buffer the ledger did not know: it was alive all along, so every moment so far (each event,
        each peak) had its bytes too."""
        owner = backend.owner(array)
        entry = self._buffers.get(id(owner))
        if entry is not None and entry[1][category]:
            return False
        if since_start and entry is None:
            n = owner.nbytes
            self._peak[category] += n
            self._peak_total += n
            at_peak = list(self._at_peak)
            at_peak[category] += n
            self._at_peak = tuple(at_peak)
            for event in self._events:
                event[2][category] += n
        self._hold(array, category)
        return True

    # --- bookkeeping
    def _add(self, array, category):
        owner = backend.owner(array)
        key = id(owner)
        entry = self._buffers.get(key)
        if entry is None:
            entry = self._buffers[key] = [owner.nbytes, [0] * len(CATEGORIES), None]
        entry[1][category] += 1
        if entry[2] is None or category < entry[2]:  # else its category stays: a holder in it or before it
            self._move(key, entry, category)
        return key

    def _remove(self, key, category):
        entry = self._buffers.get(key)
        if entry is None:
            return
        holders = entry[1]
        holders[category] -= 1
        if category == entry[2] and not holders[category]:  # its category lost its last holder: the next one's
            self._move(key, entry, next((c for c in range(category + 1, len(CATEGORIES)) if holders[c]), None))

    def _move(self, key, entry, new):
        """Move a buffer's bytes to category `new`, its first with a holder now (NOTE [one buffer, one category]);
        None: it has none left, and is forgotten."""
        nbytes, _, old = entry
        current = self._current
        if old is None:
            self._total += nbytes
        else:
            current[old] -= nbytes
        if new is None:
            self._total -= nbytes
            del self._buffers[key]
            return
        entry[2] = new
        current[new] += nbytes
        if current[new] > self._peak[new]:
            self._peak[new] = current[new]
        if self._total > self._peak_total:  # only a new buffer can raise it: a move between categories keeps it
            self._peak_total = self._total
            self._at_peak = tuple(current)

    def _hold(self, array, category):
        """Count `array` in `category` for as long as the array object lives."""
        key = self._add(array, category)
        ref = weakref.ref(array, self._on_death)  # arrays are unhashable: the dict is keyed by the ref's id
        self._refs[id(ref)] = (ref, (key, category))

    def _on_death(self, ref):
        """The weak reference's callback: an array that _hold counted died (timed inline, as the hooks that run
        for every op are)."""
        start, overhead = _now(), self._overhead_ns
        _, held = self._refs.pop(id(ref), (None, None))
        if held is not None:
            self._remove(*held)
        self._overhead_ns = overhead + _now() - start

    def _hold_saved(self, record):
        """Count a record's saved arrays as activations until its backward releases them (or it dies); returns
        their buffers' keys."""
        keys = [self._add(a, ACTIVATIONS) for a in record.saved if backend.is_array(a)]
        ref = weakref.ref(record, self._on_record_death)
        self._refs[id(ref)] = (ref, (id(record), keys))
        self._records[id(record)] = ref
        return keys

    def _drop_saved(self, ref):
        """A record's saved arrays no longer count: it released them, or it died (`ref` is its weak reference)."""
        _, (record_id, keys) = self._refs.pop(id(ref), (None, (None, ())))
        self._records.pop(record_id, None)
        for key in keys:
            self._remove(key, ACTIVATIONS)

    _on_record_death = _bookkeeping(_drop_saved)  # the weak reference's callback

    def _count(self, phase, op, flops):
        """One call of `op` in `phase`, and its {op name: FLOPs}."""
        key = (phase, op.name)
        self._calls[key] = self._calls.get(key, 0) + 1
        for name, n in flops.items():
            key = (phase, name)
            self._flops[key] = self._flops.get(key, 0) + n

    def _event(self, op, phase):
        self._events.append((op, phase, list(self._current)))

    @property
    def phase(self):
        """'recompute' while a checkpoint re-runs its forward (tensor.recomputing), else 'forward'."""
        return "recompute" if is_recomputing() else "forward"

    # --- the clocks (NOTE [self time]): the tape starts one as an op begins and stops it as the op ends
    def start_clock(self):
        """Start timing an op; returns the clock, for stop_clock: when, and the running sums then."""
        return _now(), self._ops_ns, self._overhead_ns

    def stop_clock(self, clock, op=None, phase=None):
        """Stop the clock of `op` (its name) in `phase` (None: 'forward' or 'recompute', as now) and count its time.
        op=None: count it for no op, so that it stays in the time of the op around it (a checkpoint's recompute
        that replays an op rather than run it)."""
        if op is None:
            return
        end, overhead = _now(), self._overhead_ns
        self._stopped(clock, end, overhead, (phase or self.phase, op))
        self._overhead_ns = overhead + _now() - end  # counting it is bookkeeping too

    def _stopped(self, clock, end, overhead, key):
        """Count the time of the op `key` (phase, name) whose clock stopped at `end`, the bookkeeping sum then
        being `overhead`: its total, less the bookkeeping inside it, and its self time, less the ops inside it."""
        start, ops, overhead_then = clock
        total = end - start - (overhead - overhead_then)
        own = total - (self._ops_ns - ops)
        self._ops_ns += own
        self._total_ns[key] = self._total_ns.get(key, 0) + total
        self._self_ns[key] = self._self_ns.get(key, 0) + own

    # --- what the tape (tensor.py) reports while this profile is active; each hook's time is the profiler's.
    # Those that run for every op time themselves inline, as _bookkeeping would (NOTE [self time]); on_inputs
    # starts the op's clock with its last read, and on_forward stops it with its first
    def on_save(self, record):
        """A record keeps its saved arrays (tensor.keep): activations until on_release."""
        start, overhead = _now(), self._overhead_ns
        keys = self._hold_saved(record)
        buffers = self._buffers  # what activations_kept([record]) counts: its buffers that are activations, each once
        kept = sum(buffers[key][0] for key in set(keys) if buffers[key][2] == ACTIVATIONS)
        self._saved[record.name] = self._saved.get(record.name, 0) + kept
        self._overhead_ns = overhead + _now() - start

    @_bookkeeping
    def on_hand_over(self, record, arrays):
        """A record gave up some of its saved arrays before its backward (a checkpoint hands the outputs it kept
        to the records of its recompute, which keep them as long as they need them): no longer counted for it."""
        ref = self._records.get(id(record))
        if ref is None:
            return
        _, (_, keys) = self._refs[id(ref)]  # as _hold_saved stored them
        for a in arrays:
            key = id(backend.owner(a))
            if key in keys:
                keys.remove(key)
                self._remove(key, ACTIVATIONS)

    def on_inputs(self, inputs):
        """Before an op runs: the parameters it reads are in use (NOTE [what a profile counts]). Returns the op's
        clock, started as this bookkeeping ends, for on_forward (or stop_clock) to stop."""
        start, overhead = _now(), self._overhead_ns
        for t in inputs:
            if isinstance(t, nn.Parameter) and not self._counted(t):
                self._use(t)
        end = _now()
        self._overhead_ns = overhead = overhead + end - start
        return end, self._ops_ns, overhead

    def on_forward(self, op, inputs, out, clock):
        """After op ran (and its record, if any, kept what it saved): stops its clock, then counts it."""
        start, overhead = _now(), self._overhead_ns
        phase = "recompute" if is_recomputing() else "forward"  # self.phase, without the property's call
        self._stopped(clock, start, overhead, (phase, op.name))
        self._count(phase, op, op.flops([t._data for t in inputs], out))
        self._hold(out, TRANSIENT)
        self._event(op.name, phase)
        self._overhead_ns = overhead + _now() - start

    def on_release(self, record):
        """The tape is about to drop record.saved (tensor.release): before the arrays can die, while
        each buffer's id is still its own."""
        start, overhead = _now(), self._overhead_ns
        ref = self._records.pop(id(record), None)
        if ref is not None:
            self._drop_saved(ref)
        self._overhead_ns = overhead + _now() - start

    def on_backward(self, op, grad, input_grads):
        """After op.backward ran (and its record was released, unless retain_graph)."""
        start, overhead = _now(), self._overhead_ns
        self._count("backward", op, op.backward_flops(grad, input_grads))
        for gi in input_grads:
            gi = backend.as_array(gi)
            if backend.is_array(gi):  # a checkpoint's lists and {slot: array} hold arrays counted as they were made
                self._hold(gi, TRANSIENT)
        self._event(op.name, "backward")
        self._overhead_ns = overhead + _now() - start

    def on_grad(self, array):
        """A .grad was set (Tensor.grad's setter)."""
        start, overhead = _now(), self._overhead_ns
        self._hold(array, GRADIENTS)
        self._overhead_ns = overhead + _now() - start

    @_bookkeeping
    def on_new_tensor(self, t):
        """A tensor was made around an array (tensor._new), or given one (_set_data). NOTE [an old array, a new
        tensor]: a tensor is not a buffer. An array the ledger knows already is counted where it is (an op's
        output, a record's saved array, a parameter), so wrapping it again adds no transient holder: one would
        hold its bytes for as long as the array lives, also after the holder that counted it let go. A
        checkpoint's recompute re-wraps its saved inputs so: the batch, alive before the block, would have stayed
        'transient' after the step. A Parameter still holds its array as a parameter (nn.Parameter re-counts a
        tensor it takes so). An array the ledger never saw it cannot date: wrapped in the block, it counts as new
        (so a checkpoint's recompute wraps its saved inputs with tensor._wrap, which reports nothing: they are
        the forward's arrays, also when the forward ran before the block)."""
        if isinstance(t, nn.Parameter):
            self._hold(t._data, PARAMETERS)
        elif id(backend.owner(t._data)) not in self._buffers:
            self._hold(t._data, TRANSIENT)

    @_bookkeeping
    def on_step(self, optimizer, done):
        """Before (done=False) and after (done=True) optimizer.step() (optim.Optimizer wraps every step):
        before, what it holds was alive all along; after, the state it made is new."""
        if not done:
            self._use(optimizer)
            return
        for array in _state_arrays(optimizer):
            if self._hold_new(array, OPTIMIZER, since_start=False):
                self._event("optimizer_state", "step")

    @_bookkeeping
    def on_communication(self, op, sent, received):
        """A collective ran (distributed.py): the bytes this process sent to and received from the others."""
        traffic = self._traffic.setdefault(op, [0, 0])
        traffic[0] += sent
        traffic[1] += received

    # --- what a learner asks
    @staticmethod
    def buffer_id(array):
        """The identity of the buffer behind `array`: a view and the array it views share one."""
        return id(backend.owner(array))

    def activations_kept(self, records):
        """{buffer id: bytes} of the buffers these records keep that count as activations (a weight a
        record keeps is still a parameter), each buffer once."""
        kept = {}
        for record in records:
            for a in record.saved:
                if backend.is_array(a):
                    entry = self._buffers.get(id(backend.owner(a)))
                    if entry is not None and entry[2] == ACTIVATIONS:
                        kept[id(backend.owner(a))] = entry[0]
        return kept

    def _category(self, category):
        if category is None:
            return None
        if category not in CATEGORIES:
            raise ValueError(f"profile: unknown category {category!r}; the categories are {', '.join(CATEGORIES)}")
        return CATEGORIES.index(category)

    def peak_bytes(self, category=None):
        """The peak of live bytes in `category` during the block (of the total, with None)."""
        c = self._category(category)
        return self._peak_total if c is None else self._peak[c]

    def bytes_at_peak(self):
        """{category: bytes} at the moment the total peaked: what the peak is made of."""
        return dict(zip(CATEGORIES, self._at_peak))

    def current_bytes(self, category=None):
        """Live bytes in `category` now (at the end of the block, once it has ended)."""
        c = self._category(category)
        return sum(self._current) if c is None else self._current[c]

    def flops(self, phase=None, op=None):
        """FLOPs counted in `phase` ('forward', 'backward', 'recompute') for `op` (e.g. 'matmul'); None = all."""
        if phase is not None and phase not in PHASES:
            raise ValueError(f"profile: unknown phase {phase!r}; the phases are {', '.join(PHASES)}")
        return sum(n for (ph, name), n in self._flops.items()
                   if (phase is None or ph == phase) and (op is None or name == op))

    def calls(self, phase=None, op=None):
        """How many times `op` ran in `phase`; None = all."""
        if phase is not None and phase not in PHASES:
            raise ValueError(f"profile: unknown phase {phase!r}; the phases are {', '.join(PHASES)}")
        return sum(n for (ph, name), n in self._calls.items()
                   if (phase is None or ph == phase) and (op is None or name == op))

    def seconds(self, phase=None, op=None, inclusive=False):
        """Wall time in seconds that `op` (an op's name, or an optimizer's: 'AdamW') took in `phase` ('forward',
        'backward', 'recompute', 'step'); None = all. Self time, as PyTorch's 'Self CPU': less the ops that ran
        inside it and the profiler's bookkeeping (NOTE [self time]); inclusive=True: with the ops inside it
        ('CPU total'; summed over ops, a nested op then counts twice)."""
        if phase is not None and phase not in TIMED_PHASES:
            raise ValueError(f"profile: unknown phase {phase!r}; time is kept for {', '.join(TIMED_PHASES)}")
        times = self._total_ns if inclusive else self._self_ns
        return sum(n for (ph, name), n in times.items()
                   if (phase is None or ph == phase) and (op is None or name == op)) / 1e9

    def wall_seconds(self):
        """The block's wall time in seconds (so far, while it runs; 0 before), the profiler's bookkeeping included."""
        if self._start_ns is None:
            return 0.0
        ns = self._wall_ns if self._wall_ns is not None else _now() - self._start_ns
        return ns / 1e9

    def overhead_seconds(self):
        """The profiler's own bookkeeping during the block, in seconds: the time it adds to the block."""
        return self._overhead_ns / 1e9

    def communicated(self, direction="sent", op=None):
        """Bytes this process sent ('sent') to or received ('received') from the other processes in collectives
        (all_reduce, all_gather, broadcast: distributed.py), for one op or all."""
        if direction not in ("sent", "received"):
            raise ValueError(f"profile: direction must be 'sent' or 'received', got {direction!r}")
        i = 0 if direction == "sent" else 1
        return sum(t[i] for name, t in self._traffic.items() if op is None or name == op)

    def timeline(self):
        """The events in order: [{'index', 'op', 'phase', bytes per category after it, 'total'}, ...].

        One event per op run (phase 'forward', 'backward' or 'recompute'), one per optimizer state
        buffer made (phase 'step'), and 'start' and 'end'. It grows by one event per op for as long
        as the profile is open.
        """
        return [dict(index=i, op=op, phase=phase, **dict(zip(CATEGORIES, current)), total=sum(current))
                for i, (op, phase, current) in enumerate(self._events)]

    def table(self, times=True):
        """Small tables: ops (calls, bytes saved), their self time by phase (time=False leaves it out: it differs
        from run to run), FLOPs by kind and phase, bytes by category, and bytes sent by collective if any."""
        ops_run = sorted({name for _, name in self._calls})
        head = f"{'op':<13}{'forward':>9}{'backward':>10}{'recompute':>11}{'saved':>12}"
        lines = [head, "-" * len(head)]
        for name in ops_run:
            lines.append(f"{name:<13}" + "".join(f"{self.calls(p, name):>{w}}" for p, w in zip(PHASES, (9, 10, 11)))
                         + f"{format_bytes(self._saved.get(name, 0)):>12}")
        lines.append("(calls per phase; saved: bytes the op kept for backward, summed over its calls: a buffer "
                     "that two ops save shows in both rows)")
        if times:
            lines += [""] + self._time_table()
        kinds = sorted({name for _, name in self._flops})
        head = f"{'FLOPs':<13}" + "".join(f"{p:>14}" for p in PHASES)
        lines += ["", head, "-" * len(head)]
        for name in kinds + ["total"]:
            op = None if name == "total" else name
            lines.append(f"{name:<13}" + "".join(f"{format_flops(self.flops(p, op)):>14}" for p in PHASES))
        lines.append("(matrix products count under 'matmul' whichever op made them; see docs/ledger.md)")
        lines += ["", f"{'bytes':<13}{'peak':>12}{'now':>12}", "-" * 37]
        for c in CATEGORIES:
            lines.append(f"{c:<13}{format_bytes(self.peak_bytes(c)):>12}{format_bytes(self.current_bytes(c)):>12}")
        lines.append(f"{'total':<13}{format_bytes(self.peak_bytes()):>12}{format_bytes(self.current_bytes()):>12}")
        if self._traffic:
            lines += ["", f"{'collective':<26}{'sent':>12}{'received':>12}", "-" * 50]
            for name, (sent, received) in sorted(self._traffic.items()):
                lines.append(f"{name:<26}{format_bytes(sent):>12}{format_bytes(received):>12}")
        return "\n".join(lines)

    def _time_table(self):
        """Self time by op and phase, slowest op first; shares of the block's time less the profiler's."""
        block = self.wall_seconds() - self.overhead_seconds()  # what the block takes without a profile, roughly
        names = sorted({name for _, name in self._self_ns}, key=lambda name: -self.seconds(op=name))
        head = f"{'self time':<13}" + "".join(f"{p:>11}" for p in TIMED_PHASES) + f"{'total':>11}{'share':>8}"
        lines = [head, "-" * len(head)]

        def row(label, cells, total):
            share = f"{total / block:.1%}" if block > 0 else "-"
            return f"{label:<13}" + "".join(f"{c:>11}" for c in cells) + f"{format_seconds(total):>11}{share:>8}"
        for name in names:
            lines.append(row(name, [format_seconds(self.seconds(p, name)) if (p, name) in self._self_ns else "-"
                                    for p in TIMED_PHASES], self.seconds(op=name)))
        ran = {p for p, _ in self._self_ns}
        lines.append(row("all ops", [format_seconds(self.seconds(p)) if p in ran else "-" for p in TIMED_PHASES],
                         self.seconds()))
        lines.append(row("not in ops", [""] * len(TIMED_PHASES), block - self.seconds()))
        lines.append("(self time: an op's wall time less the ops that ran inside it (a checkpoint's recompute) and "
                     "the profiler's bookkeeping; not in ops: Python between them)")
        lines.append(f"(share: of the block's {format_seconds(self.wall_seconds())} less the profiler's own "
                     f"bookkeeping, {format_seconds(self.overhead_seconds())}: {format_seconds(block)})")
        return lines
