"""mg.profile, the ledger: every byte the engine holds, every FLOP it computes and the time each op takes, while a
block runs.

    with mg.profile() as prof:                 # or mg.profile(model, opt): count those from the start
        loss = model(x).sum(); loss.backward(); opt.step()
    print(prof.table())
    prof.peak_bytes("activations"), prof.flops("backward", op="matmul"), prof.timeline()
    prof.export_chrome_trace("out/step.json"), prof.export_memory_timeline("out/step.html")   # to look at

`profile` is one object made of three parts, one file each; each file imports only the ones above it:
  clocks.py   time: each op's self time by phase, less the ops that ran inside it and the profiler's own
              bookkeeping (NOTE [self time]); prof.seconds("backward", op="matmul")
  ledger.py   bytes by category (parameters, optimizer, gradients, activations, transient: NOTE [one buffer,
              one category], [what a profile counts]) and FLOPs by phase, counted in the hooks that the tape
              calls (tensor.Listener: on_save, on_release, ...; the per-op ones, on_inputs and on_forward, from
              the Listener's op mode, NOTE [op modes]); prof.peak_bytes(), prof.flops(), prof.calls()
  report.py   what prints them: prof.table(), prof.timeline(), format_bytes, format_flops, format_seconds; the
              colours every plot draws the categories and phases in (CATEGORY_COLORS, PHASE_COLORS)
  export.py   what opens elsewhere: prof.export_chrome_trace() for Perfetto and chrome://tracing (ops as spans by
              phase, memory by category as counters, collectives), prof.export_memory_timeline(), one HTML page
  allocator.py  what a GPU would reserve for those bytes: PyTorch's caching allocator replayed over the buffers'
              births and deaths; prof.caching_allocator().max_memory_reserved()
This file puts the parts together and opens and closes the block. The package sits above the tape, which reports
to it, and below nn and optim, which it counts without importing them (NOTE [marks, not imports], ledger.py).
The seams it uses: the profile is a tensor.Listener, entered by `profiling`: an op mode (NOTE [op modes]) for each
op's inputs, clock and FLOPs, and the listener the tape reports its saved arrays, releases and gradients to (NOTE
[what the tape reports]); the arrays ops make come through backend.pool.report_new_arrays_to.

Read next: clocks.py, ledger.py, report.py, export.py; then schedules.py and checkpoint/, which trade these bytes for
recompute FLOPs.
"""
from ..tensor import Listener, active_profiler, profiling
from .clocks import PHASES, TIMED_PHASES, _Clocks, _now
from .ledger import ACTIVATIONS, CATEGORIES, GRADIENTS, OPTIMIZER, PARAMETERS, TRANSIENT, _Ledger
from .report import CATEGORY_COLORS, PHASE_COLORS, _Reports, format_bytes, format_flops, format_seconds
from .export import _Exports
from .allocator import CachingAllocator, replay

__all__ = ["profile", "CachingAllocator", "CATEGORIES", "PHASES", "TIMED_PHASES", "CATEGORY_COLORS", "PHASE_COLORS", "format_bytes",
           "format_flops", "format_seconds",
           "PARAMETERS", "OPTIMIZER", "GRADIENTS", "ACTIVATIONS", "TRANSIENT"]  # the last: indices into CATEGORIES


class profile(_Ledger, _Clocks, _Reports, _Exports, Listener):
    """Context manager that records bytes by category, FLOPs and time by phase and op (see the package's doc).

    Its parts come before Listener, so that their hooks replace the no-op ones it declares (NOTE [what the tape
    reports], tensor.py). They share one object: the ledger's hooks add their own time to the clocks' sums."""

    def __init__(self, *scope):
        _Ledger.__init__(self, scope)      # bytes, FLOPs and events (ledger.py)
        _Clocks.__init__(self)             # time (clocks.py)
        self._mode = profiling(self)       # the tape reports to this profile while the block runs
        self._open = False

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

    def caching_allocator(self):
        """PyTorch's CUDA caching allocator after the block's buffers were born and freed in it, in their order
        (allocator.py): .max_memory_reserved() is what it would have taken from the GPU, .max_memory_allocated()
        the ledger's peak with each buffer rounded up to 512 bytes. Counted from the block's start: build the model
        inside the block to replay a whole run."""
        return replay(self.buffer_lifetimes())
