"""The clocks of mg.profile: each op's wall time by phase and name, as PyTorch's profiler reports it.

    prof.seconds("backward", op="matmul")                     # self time: less the ops inside, less the profiler
    prof.seconds("backward", op="checkpoint", inclusive=True)  # the ops inside included (its recompute)
    prof.wall_seconds(), prof.overhead_seconds()              # the block, and the profiler's own work in it

The tape starts an op's clock as the op begins and stops it as the op ends: start_clock and stop_clock, or
inline in the hooks that run for every op (on_inputs starts it, on_forward stops it: ledger.py). Each stopped
clock adds to two tables keyed by (phase, op name): the op's total time and its self time (NOTE [self time]).
The ledger's hooks time themselves as the profiler's overhead (_bookkeeping), so that no op's time holds them.

Read next: ledger.py, the bytes and FLOPs that the same hooks count.
"""
import functools
import time

from ..tensor import is_recomputing

PHASES = ("forward", "backward", "recompute")
TIMED_PHASES = PHASES + ("step",)  # time also counts optimizer steps, by optimizer (AdamW, SGD, ...)
_now = time.perf_counter_ns  # the clock (NOTE [self time]); a module global, one look-up fewer per read


# NOTE [self time]: an op's clock runs while the tape works on it: in its op mode (tensor.Listener.__op__), from the
# end of on_inputs to the start of on_forward (its forward, wrapping the output, `keep`); in `_run_tape`, for one
# record's turn (its version checks, its backward, the release of what it saved, and handing its gradients on: the
# sums into other records' gradients and into leaves' .grad); an optimizer's whole step. Its total (PyTorch's 'CPU
# total') includes the ops that ran inside it: a checkpoint's backward runs its segment's recompute and that recompute's
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


class _Clocks:
    """The clocks' part of mg.profile (profiler/__init__.py puts the parts together): the time tables, and the
    two running sums that make self time need no stack of running clocks (NOTE [self time])."""

    def __init__(self):
        self._self_ns = {}                 # (phase, op name) -> nanoseconds, less the ops inside (NOTE [self time])
        self._total_ns = {}                # (phase, op name) -> nanoseconds, the ops inside included
        self._ops_ns = 0                   # the self times of all ops so far (NOTE [self time])
        self._overhead_ns = 0              # the profiler's own bookkeeping while the block ran
        self._start_ns = None              # when the block began
        self._wall_ns = None               # the block's wall time, once it has ended
        self._spans = []                   # [((phase, op name), start ns, end ns)] of each stopped clock, in the
                                           # order they stopped: the trace's spans (NOTE [when, beside what])

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
        self._spans.append((key, start, end))
        total = end - start - (overhead - overhead_then)
        own = total - (self._ops_ns - ops)
        self._ops_ns += own
        self._total_ns[key] = self._total_ns.get(key, 0) + total
        self._self_ns[key] = self._self_ns.get(key, 0) + own

    # --- what a learner asks
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
