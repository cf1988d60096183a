"""The ledger of mg.profile: every byte the engine holds and every FLOP it computes while the block runs, from
what the tape reports to it (the hooks below, declared by tensor.Listener: NOTE [what the tape reports]).

Bytes are counted by category, one buffer in one category (NOTE [one buffer, one category]):
  parameters   the arrays of nn.Parameter tensors
  optimizer    optimizer state (momentum, Adam's moments, Adafactor's factors, AdamW8bit's codes and absmax)
  gradients    the .grad of leaves (and of tensors that retain_grad)
  activations  arrays that a record on the tape saved for its backward
  transient    everything else the engine made that is still alive: op outputs nobody saved,
               gradients in flight during backward, tensors made by factories (the data batch),
               module buffers (BatchNorm's running statistics), an optimizer step's temporaries
NOTE [what a profile counts]: what the block makes, it counts, through the tape's few doors
(an op's output, a record's saved arrays, a new tensor, a .grad set, an optimizer's step). Of
what was alive before the block, it counts what the block uses, as alive since the start: the
parameters that its ops read (and their .grad), and the optimizers that step in it (their
parameters, gradients and state); `profile(model, optimizer, ...)` counts those from the start
too. An unrelated model elsewhere in the process counts nothing. A graph recorded before the
block does not count (start the profile before the forward pass).

An op's own temporaries, made and freed before it returns (a 2-byte softmax's float32 copy, GELU's
Phi(x) in backward), count too: each op makes its big arrays through backend.made, which tells the
profile as each is made (on_new_array; NOTE [every array an op makes], backend/pool.py). What the
ledger cannot see: arrays of a row's size inside an op, NumPy's own buffers, and Python's objects;
tests compare the total against the allocator (tracemalloc, CuPy's pool) to bound them
(tests/test_ledger_vs_allocator.py op by op, tests/test_profiler.py whole steps).

FLOPs follow NOTE [FLOP convention] in ops/base.py, by phase ('forward', 'backward', 'recompute').

The ledger knows parameters, modules and optimizers by a mark their classes carry, not by importing nn and
optim (NOTE [marks, not imports]): the package sits between the tape and them.

Read next: report.py, which prints these counts and the clocks' times as tables.
"""
import weakref
from array import array

from .. import backend
from ..tensor import Tensor, is_recomputing
from .clocks import PHASES, _bookkeeping, _now

CATEGORIES = ("parameters", "optimizer", "gradients", "activations", "transient")
PARAMETERS, OPTIMIZER, GRADIENTS, ACTIVATIONS, TRANSIENT = range(5)


# NOTE [marks, not imports]: the ledger tells a Parameter from a tensor (its array counts as 'parameters', and an
# op that reads one brings it into the profile), and a Module or an Optimizer from anything else (it counts their
# parameters, buffers and state), without importing nn or optim, which sit above it: each of those classes says
# what it is with a class attribute, `_is_parameter = True` (nn.Parameter), `_is_module` (nn.Module),
# `_is_optimizer` (optim.Optimizer), as PyTorch flags a custom tensor made a Parameter with `_is_param`. The
# ledger reads it with getattr(x, "_is_parameter", False): a plain tensor's is False. on_inputs reads it for each
# input of every op; it costs what isinstance did (about 25 ns on CPython 3.11, a little less for a plain tensor).
def _check_scope(x):
    if not (getattr(x, "_is_module", False) or getattr(x, "_is_optimizer", False) or isinstance(x, Tensor)):
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


# NOTE [what a pack hook keeps]: under saved_tensors_hooks (autograd/graph.py) a record holds what the pack hook
# returned, not the arrays (NOTE [saved tensors hooks], autograd/graph.py), and the ledger counts what it finds in it:
# an array, a tensor's array, and these inside tuples and lists, at any depth (save_on_cpu's (device, tensor)); any
# other object counts nothing, as Python's objects never do (a holder that keeps nothing, as a hook checkpoint's, is
# right so; one that hides arrays from the ledger is not seen). Each counts where it lives: as activations if it is on
# the device the op ran on (what a plain record would keep; a pack that returns the tensor itself keeps the same bytes),
# and in host memory, apart (prof.host_bytes()), if the op ran on the GPU and the array is on the host (save_on_cpu's
# copy), so that the peak of 'activations' on 'cuda' falls by what was offloaded. The arrays that unpack makes for a
# backward are that backward's, counted as any array made for it.
def _kept_by_pack(record):
    """([arrays on the op's device], [arrays on the host, for a GPU's op]) that a record's packed objects hold."""
    found = []
    stack = list(record.packed.objects)
    while stack:
        x = stack.pop()
        if isinstance(x, Tensor):
            x = x._data
        if backend.is_array(x):
            found.append(x)
        elif isinstance(x, (tuple, list)):
            stack.extend(x)
    gpu = any(meta is not None and meta[2] == "cuda" for meta in record.packed.metas)
    host = [a for a in found if gpu and backend.device_of(a) == "cpu"]
    return [a for a in found if not (gpu and backend.device_of(a) == "cpu")], host


class _Ledger:
    """The ledger's part of mg.profile (profiler/__init__.py puts the parts together): its hooks count what the
    tape reports; its queries answer what a learner asks. The hooks time themselves with the clocks' sums
    (_overhead_ns; NOTE [self time], clocks.py)."""

    def __init__(self, scope):
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
        self._saved_dtypes = {}            # dtype name -> bytes saved for backward (summed over calls)
        self._cast_weights = {}            # id(owner) -> bytes of a parameter's cast copy while it lives (autocast)
        self._cast_now = self._cast_peak = 0
        self._host = {}                    # id(owner) -> [nbytes, holders] of host buffers that GPU records keep
        self._host_now = self._host_peak = 0  # (NOTE [what a pack hook keeps])
        self._events = []                  # [op name, phase, bytes per category after it]
        self._event_ns = []                # when each event was taken (NOTE [when, beside what])
        self._lifetimes = array("q")       # key, bytes as each buffer is born; key, -1 as it dies: the order a
                                           # GPU's allocator would see them (prof.caching_allocator()); 16 bytes
                                           # an entry, where a list of tuples took about 120
        self._peak_event = 0               # how many events there were when the total peaked: the next event
                                           # holds the peak, unless a buffer died before it was taken
        self._step_from = 0                # how many events there were as the last optimizer step began
        self._traffic = {}                 # collective's name -> [bytes sent, bytes received] by this process
        self._comms = []                   # [(collective's name, start ns, end ns, bytes sent, bytes received)]
        self._used = {}                    # id -> weakref of each parameter, module, optimizer counted (NOTE [what
                                           # a profile counts]); by id, as tensors' == is elementwise
        self._scope = [_check_scope(x) for x in scope]

    def _use(self, x, since_start=True):
        """Count a module, optimizer or parameter that the block uses and that was alive before it:
        its parameters, their gradients and (for an optimizer) its state, each buffer the ledger did
        not know yet. since_start: as alive from the start (found in use mid-block)."""
        if self._counted(x):
            return
        self._used[id(x)] = weakref.ref(x)
        if getattr(x, "_is_module", False):
            for p in x.parameters():
                self._use(p, since_start)
            for b in x.buffers():
                self._hold_new(b._data, TRANSIENT, since_start)
        elif getattr(x, "_is_optimizer", False):
            for p in x.params:
                self._use(p, since_start)
            for state in _state_arrays(x):
                self._hold_new(state, OPTIMIZER, since_start)
        else:  # a tensor
            self._hold_new(x._data, PARAMETERS if getattr(x, "_is_parameter", False) else TRANSIENT, since_start)
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
            self._lifetimes.extend((key, nbytes))
        else:
            current[old] -= nbytes
        if new is None:
            self._total -= nbytes
            self._lifetimes.extend((key, -1))
            del self._buffers[key]
            if key in self._cast_weights:
                self._cast_now -= self._cast_weights.pop(key)
            return
        entry[2] = new
        current[new] += nbytes
        if current[new] > self._peak[new]:
            self._peak[new] = current[new]
        if self._total > self._peak_total:  # only a new buffer can raise it: a move between categories keeps it
            self._peak_total = self._total
            self._at_peak = tuple(current)
            self._peak_event = len(self._events)

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
        their buffers' keys, and the arrays."""
        if record.saved or record.packed is None:  # the common case first: one read (NOTE [per-op overhead], tensor)
            arrays, host = [a for a in record.saved if backend.is_array(a)], ()
        else:
            arrays, host = _kept_by_pack(record)
            host = [self._hold_host(a) for a in host]
        keys = [self._add(a, ACTIVATIONS) for a in arrays]
        ref = weakref.ref(record, self._on_record_death)
        self._refs[id(ref)] = (ref, (id(record), keys, host))
        self._records[id(record)] = ref
        return keys, arrays

    def _drop_saved(self, ref):
        """A record's saved arrays no longer count: it released them, or it died (`ref` is its weak reference)."""
        _, (record_id, keys, host) = self._refs.pop(id(ref), (None, (None, (), ())))
        self._records.pop(record_id, None)
        for key in keys:
            self._remove(key, ACTIVATIONS)
        for key in host:
            entry = self._host[key]
            entry[1] -= 1
            if not entry[1]:
                self._host_now -= entry[0]
                del self._host[key]

    def _hold_host(self, array):
        """NOTE [what a pack hook keeps]: a buffer in host memory that a GPU's record keeps (save_on_cpu's copy),
        counted apart from the device's categories while records hold it; returns its key."""
        owner = backend.owner(array)
        entry = self._host.get(id(owner))
        if entry is None:
            entry = self._host[id(owner)] = [owner.nbytes, 0]
            self._host_now += owner.nbytes
            self._host_peak = max(self._host_peak, self._host_now)
        entry[1] += 1
        return id(owner)

    _on_record_death = _bookkeeping(_drop_saved)  # the weak reference's callback

    def _count(self, phase, op, flops):
        """One call of `op` in `phase`, and its {op name: FLOPs}."""
        key = (phase, op.name)
        self._calls[key] = self._calls.get(key, 0) + 1
        for name, n in flops.items():
            key = (phase, name)
            self._flops[key] = self._flops.get(key, 0) + n

    # NOTE [when, beside what]: an event says what was alive after an op; when it was taken is kept beside the
    # events, in lists of their own (_event_ns, one time per event; the clocks' _spans, each op's start and end;
    # _comms, each collective's), never in them: a step on 'meta' and the same step for real make the same events
    # (tests/test_meta.py compares them) at different times. The hooks that run for every op pass the time they
    # read already (on_forward, on_backward), so the times cost no read of the clock there: a list append per
    # event and per op (measured in the README's "Measuring a step"). export.py turns them into a trace.
    def _event(self, op, phase, ns=None):
        self._events.append((op, phase, list(self._current)))
        self._event_ns.append(_now() if ns is None else ns)

    # --- what the tape (tensor.py) reports while this profile is active; each hook's time is the profiler's.
    # Those that run for every op time themselves inline, as _bookkeeping would (NOTE [self time], clocks.py);
    # on_inputs starts the op's clock with its last read, and on_forward stops it with its first
    def on_save(self, record):
        """A record keeps its saved arrays (tensor.keep): activations until on_release."""
        start, overhead = _now(), self._overhead_ns
        keys, arrays = self._hold_saved(record)
        buffers, dtypes = self._buffers, self._saved_dtypes  # what activations_kept([record]) counts: its buffers
        kept, seen = 0, set()                                # that are activations, each once; and by dtype
        for key, a in zip(keys, arrays):
            entry = buffers[key]
            if entry[2] == ACTIVATIONS and key not in seen:
                seen.add(key)
                kept += entry[0]
                dtypes[a.dtype.name] = dtypes.get(a.dtype.name, 0) + entry[0]
        self._saved[record.name] = self._saved.get(record.name, 0) + kept
        self._overhead_ns = overhead + _now() - start

    @_bookkeeping
    def on_hand_over(self, record, arrays):
        """A record gave up some of its saved arrays before its backward (a checkpoint hands the outputs it kept
        to the records of its recompute, which keep them as long as they need them): no longer counted for it."""
        ref = self._records.get(id(record))
        if ref is None:
            return
        _, (_, keys, _) = self._refs[id(ref)]  # as _hold_saved stored them
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
            if getattr(t, "_is_parameter", False) and not self._counted(t):
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
        if op.name == "cast" and getattr(inputs[0], "_is_parameter", False):  # a weight's copy (autocast)
            self._note_cast_weight(out)
        self._event(op.name, phase, start)
        self._overhead_ns = overhead + _now() - start

    def _note_cast_weight(self, out):
        """NOTE [the weight-cast cache] (amp/autocast_mode.py): out is a parameter's cast copy, counted by the
        category its holders give it, and here too, apart, while it lives."""
        owner = backend.owner(out)
        if id(owner) not in self._cast_weights:
            self._cast_weights[id(owner)] = owner.nbytes
            self._cast_now += owner.nbytes
            self._cast_peak = max(self._cast_peak, self._cast_now)

    def on_release(self, record):
        """The tape is about to drop record.saved (tensor.release): before the arrays can die, while
        each buffer's id is still its own."""
        start, overhead = _now(), self._overhead_ns
        ref = self._records.pop(id(record), None)
        if ref is not None:
            self._drop_saved(ref)
        self._overhead_ns = overhead + _now() - start

    def on_backward(self, op, grad, input_grads, releasing=False):
        """After op.backward ran, before the tape releases its record (releasing: it will, now). The gradients were
        made while the saved arrays they were made from lived, and the peak holds both: they are counted first,
        then the saved arrays no longer count (on_release's work, done here, where the event after the op can see
        it: on_release then finds nothing left to do)."""
        start, overhead = _now(), self._overhead_ns
        self._count("backward", op, op.backward_flops(grad, input_grads))
        for gi in input_grads:
            gi = backend.as_array(gi)
            if backend.is_array(gi):  # not None (a NumPy scalar too); held again, an array adds no bytes
                self._hold(gi, TRANSIENT)
        ref = self._records.pop(id(op), None) if releasing else None
        if ref is not None:
            self._drop_saved(ref)
        self._event(op.name, "backward", start)
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
        (so a checkpoint's recompute wraps its saved inputs with tensor.wrap, which reports nothing: they are
        the forward's arrays, also when the forward ran before the block)."""
        if getattr(t, "_is_parameter", False):
            self._hold(t._data, PARAMETERS)
        elif id(backend.owner(t._data)) not in self._buffers:
            self._hold(t._data, TRANSIENT)

    @_bookkeeping
    def on_step(self, optimizer, done):
        """Before (done=False) and after (done=True) optimizer.step() (optim.Optimizer wraps every step):
        before, what it holds was alive all along; after, the state it made is new."""
        if not done:
            self._use(optimizer)
            self._step_from = len(self._events)
            return
        for s in _state_arrays(optimizer):  # what the step did not report as it made it (on_new_array)
            if self._hold_new(s, OPTIMIZER, since_start=False):
                self._event("optimizer_state", "step")
        if len(self._events) == self._step_from:  # a steady step makes no state, and still has its place
            self._event(f"{type(optimizer).__name__}.step", "step")

    def on_new_array(self, array, state):
        """An op made an array (backend.made, NOTE [every array an op makes]) or an optimizer's step did
        (optim/optimizer.py, NOTE [a step's temporaries]): its new state, counted from now, or a temporary (or an
        op's output, before the op returns), transient while it lives; so a peak holds the temporaries made
        inside an op or a step, and a step's the state it made as well as the temporaries it makes after. Timed
        inline, as the hooks that run for every op are (NOTE [self time], clocks.py)."""
        start, overhead = _now(), self._overhead_ns
        if not state:
            if backend.is_array(array):  # NumPy hands a 0-d result back as a scalar: no buffer of its own to follow
                self._hold(array, TRANSIENT)
        elif self._hold_new(array, OPTIMIZER, since_start=False):
            self._event("optimizer_state", "step")
        self._overhead_ns = overhead + _now() - start

    @_bookkeeping
    def on_communication(self, op, sent, received, clock=None):
        """A collective ran (distributed.py): the bytes this process sent to and received from the others; `clock`,
        from start_clock as it began, dates it (NOTE [when, beside what])."""
        end = _now()
        self._comms.append((op, end if clock is None else clock[0], end, sent, received))
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
            for a in (record.saved if record.saved or record.packed is None else _kept_by_pack(record)[0]):
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

    def peak_event(self):
        """(op, phase) of the first event at or after the total's peak: the op in which, or at whose end, the total
        peaked (inside it: an op's temporaries, NOTE [every array an op makes]); None if no event came after it."""
        k = self._peak_event
        return tuple(self._events[k][:2]) if k < len(self._events) else None

    def current_bytes(self, category=None):
        """Live bytes in `category` now (at the end of the block, once it has ended)."""
        c = self._category(category)
        return sum(self._current) if c is None else self._current[c]

    def buffer_lifetimes(self, since=0):
        """[(key, bytes) as a buffer is born, (key, None) as it dies], in the order they came, from the `since`-th on:
        what a GPU's allocator would be asked (prof.caching_allocator() replays them; a key is an id, reused after
        its buffer's death)."""
        flat = self._lifetimes[2 * since:]
        return [(key, None if nbytes < 0 else nbytes) for key, nbytes in zip(flat[::2], flat[1::2])]

    def saved_bytes_by_dtype(self):
        """{dtype name: bytes} that records saved for backward in the block, summed over them as the table's
        'saved' column sums them by op (each buffer once per record, a weight a record keeps not counted: it is a
        parameter): under mg.autocast, what the products keep in bfloat16 or float16 and the rest in float32."""
        return dict(self._saved_dtypes)

    def cast_weight_bytes(self, peak=True):
        """Bytes of the parameters' cast copies alive at their peak in the block (or now, peak=False): mg.autocast's
        weights cast to the low precision, once per region (NOTE [the weight-cast cache], amp/autocast_mode.py).
        They are counted in the categories too: as activations while a record keeps them (the matmul that reads
        them), as transient while only autocast's cache holds them."""
        return self._cast_peak if peak else self._cast_now

    def host_bytes(self, peak=True):
        """Bytes in host memory that records of ops run on the GPU keep for backward, at their peak in the block (or
        now, peak=False): what a pack hook moved there, as save_on_cpu does (NOTE [what a pack hook keeps]). They are
        in no category, which count the device's memory; on the CPU, saved arrays are the device's, and count as
        activations wherever a pack hook keeps them."""
        return self._host_peak if peak else self._host_now

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

    def communicated(self, direction="sent", op=None):
        """Bytes this process sent ('sent') to or received ('received') from the other processes in collectives
        (all_reduce, all_gather, broadcast: distributed.py), for one op or all."""
        if direction not in ("sent", "received"):
            raise ValueError(f"profile: direction must be 'sent' or 'received', got {direction!r}")
        i = 0 if direction == "sent" else 1
        return sum(t[i] for name, t in self._traffic.items() if op is None or name == op)
