"""Checkpointing schedules: pure functions from a chain's numbers to a plan and its predicted cost.

A chain is n functions applied in turn, x_{i+1} = f_i(x_i), described by what each one keeps
when it runs normally (measure one with checkpoint.measure_chain, or write one by hand):

    input_bytes[i]   bytes of x_i (input_bytes[n]: the chain's output)
    saves_input[i]   does f_i save x_i for its backward? (a linear does: dW = g^T x)
    saves_output[i]  does f_i save x_{i+1}? (a tanh does: d tanh = 1 - y^2)
    other_bytes[i]   bytes of everything else it saves
    flops[i]         its forward FLOPs
    reruns[i]        what recomputing it costs (a Rerun; optional): without them, a recompute runs every
                     function of a segment again, whole

A plan cuts the chain into segments [(lo, hi), ...] and, as checkpoint_sequential does, runs
every segment but the last under mg.checkpoint: it keeps the inputs x_lo of those segments
and recomputes each one's insides in backward. predict() simulates what the engine then
holds, buffer by buffer, so that running the plan under mg.profile measures exactly the
predicted peak of activation bytes and recompute FLOPs. The recompute runs only what backward reads
(NOTE [recompute what backward reads], checkpoint/policies.py): a Rerun says, per function, what that leaves of it.

Read next: checkpoint/ (segment.py first; chains.py runs a plan and measures a chain).
"""
import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Rerun:
    """What a checkpoint's recompute runs of one function, which depends on who reads its output: each field
    is (FLOPs it runs again, does it read its input?), and `last` has a third: does the checkpoint keep its
    output? (It does when the function ends a checkpointed segment and its last op's backward reads its
    output: a tanh, not a linear.)"""
    last: tuple    # it ends a checkpointed segment: its output is the checkpoint's
    unread: tuple  # nothing recomputed after it reads its output
    read: tuple    # something recomputed after it reads its output


@dataclass
class Chain:
    input_bytes: list
    saves_input: list
    saves_output: list
    other_bytes: list
    flops: list
    reruns: list = None

    def __post_init__(self):
        n = len(self.flops)
        if not (len(self.input_bytes) == n + 1 and len(self.saves_input) == len(self.saves_output)
                == len(self.other_bytes) == n and (self.reruns is None or len(self.reruns) == n)):
            raise ValueError(f"Chain: for n = {n} functions, input_bytes needs n + 1 entries and the other "
                             f"lists n; got {len(self.input_bytes)}, {len(self.saves_input)}, "
                             f"{len(self.saves_output)}, {len(self.other_bytes)}"
                             + (f", {len(self.reruns)} reruns" if self.reruns is not None else ""))

    def __len__(self):
        return len(self.flops)

    @classmethod
    def uniform(cls, n, input_bytes, saves_input=True, saves_output=False, other_bytes=0, flops=1):
        return cls([input_bytes] * (n + 1), [saves_input] * n, [saves_output] * n, [other_bytes] * n, [flops] * n)


@dataclass
class Plan:
    segments: list                       # [(lo, hi), ...]: all but the last are checkpointed
    peak_bytes: int = 0                  # predicted peak of activation bytes over a training step
    recompute_flops: int = 0             # predicted forward FLOPs redone during backward
    keep: list = field(default_factory=list)      # the layer inputs kept: lo of each checkpointed segment
    children: dict = field(default_factory=dict)  # {k: Plan}: how checkpointed segment k is cut again
                                                  # when it is recomputed (nested checkpoints)


def _normal(chain, lo, hi):
    """{buffer: bytes} that running f_lo .. f_{hi-1} normally saves (x_i named by i; other by ('m', i))."""
    held = {}
    for i in range(lo, hi):
        if chain.saves_input[i]:
            held[i] = chain.input_bytes[i]
        if chain.saves_output[i]:
            held[i + 1] = chain.input_bytes[i + 1]
        if chain.other_bytes[i]:
            held[("m", i)] = chain.other_bytes[i]
    return held


def check_segments(segments, lo, hi, who="predict"):
    if not segments or segments[0][0] != lo or segments[-1][1] != hi or segments[-1][0] >= hi or any(
            a[1] != b[0] or a[0] >= a[1] for a, b in zip(segments, segments[1:])):
        raise ValueError(f"{who}: segments must cover {lo}..{hi} in order, without gaps or empty runs; "
                         f"got {segments}")


def predict(chain, segments, children=None):
    """The Plan for these segments (and nested cuts), with peak activation bytes and recompute FLOPs
    simulated buffer by buffer, as the engine will hold them."""
    check_segments(segments, 0, len(chain))
    children = children or {}
    peak, recompute = _simulate(chain, segments, children, {})
    return Plan(list(segments), peak, recompute, [lo for lo, _ in segments[:-1]], children)


def _rerun(chain, lo, hi):
    """(FLOPs, does the checkpoint keep x_hi?) of recomputing f_lo .. f_{hi-1}, the end of a checkpointed
    segment: last function first, each one running what is read of it (NOTE [recompute what backward reads])."""
    if chain.reruns is None:
        return sum(chain.flops[lo:hi]), False
    flops, read = 0, None
    for i in range(hi - 1, lo - 1, -1):
        r = chain.reruns[i]
        f, read = (r.last[:2] if i == hi - 1 else r.read if read else r.unread)
        flops += f
    return flops, chain.reruns[hi - 1].last[2]


def _simulate(chain, segments, children, held):
    """(peak bytes, recompute FLOPs) of running `segments` while the buffers `held` are alive."""
    kept = {lo: chain.input_bytes[lo] for lo, _ in segments[:-1]}
    reruns = [_rerun(chain, (children[k].segments[-1][0] if k in children else lo), hi)
              for k, (lo, hi) in enumerate(segments[:-1])]
    # a checkpoint that keeps its output (for its last function's backward) holds it until its own backward
    kept.update({hi: chain.input_bytes[hi] for (_, hi), (_, keeps) in zip(segments, reruns) if keeps})
    # end of forward: the kept inputs, plus everything the last segment saved running normally
    peak = sum({**held, **kept, **_normal(chain, *segments[-1])}.values())
    recompute = 0
    # backward: each checkpointed segment, last first, is recomputed while the kept inputs of it and
    # of the segments before it are still held (its own input is the same buffer it recomputes from; an
    # output it kept goes to its recompute's records, as if made again); a nested cut runs its own forward
    # and backward inside that recompute: its checkpointed segments run whole, its last as this one's end
    for k in range(len(segments) - 2, -1, -1):
        lo, hi = segments[k]
        held_k = {**held, **{i: b for i, b in kept.items() if i <= lo}}
        child = children.get(k)
        if child is None:
            p, r, whole = sum({**held_k, **_normal(chain, lo, hi)}.values()), 0, 0
        else:
            check_segments(child.segments, lo, hi)
            p, r = _simulate(chain, child.segments, child.children, held_k)
            whole = sum(chain.flops[lo:child.segments[-1][0]])
        peak = max(peak, p)
        recompute += whole + reruns[k][0] + r
    return peak, recompute


def segment_bounds(n, segments):
    """[(lo, hi), ...]: n functions cut into `segments` runs, as PyTorch's checkpoint_sequential cuts
    them (size n // segments, the last one taking what is left)."""
    size = n // segments
    bounds = [(i * size, (i + 1) * size) for i in range(segments - 1)]
    return bounds + [((segments - 1) * size, n)]


def bounds_of(n, keep):
    """Segments starting at 0 and at each kept layer input."""
    starts = sorted({0, *keep})
    return [(a, b) for a, b in zip(starts, starts[1:] + [n])]


def no_checkpointing(chain):
    """One segment, run normally: every activation is kept."""
    return predict(chain, [(0, len(chain))])


def every_k(chain, k):
    """Segments of k functions (the last takes what is left)."""
    n = len(chain)
    if not 1 <= k <= n:
        raise ValueError(f"every_k: k must be from 1 to {n}, got {k}")
    return predict(chain, bounds_of(n, range(k, n, k)))


def sqrt_n(chain):
    """round(sqrt(n)) segments cut as checkpoint_sequential(..., 'sqrt') cuts them (Chen et al. 2016)."""
    n = len(chain)
    return predict(chain, segment_bounds(n, max(1, round(math.sqrt(n)))))


def budgeted(chain, budget):
    """Chen et al.'s greedy (2016, Algorithm 1 without its search): walk the chain adding up what each
    function saves, and keep a layer input (start a new segment) when the running total would pass
    `budget` bytes."""
    n, keep, running = len(chain), [], 0
    for i in range(n):
        cost = sum(_normal(chain, i, i + 1).values())
        if running and running + cost > budget:
            keep.append(i)
            running = 0
        running += cost
    return predict(chain, bounds_of(n, keep))


def best_budgeted(chain):
    """budgeted() over every useful budget, keeping the plan with the least predicted peak."""
    costs = [sum(_normal(chain, i, i + 1).values()) for i in range(len(chain))]
    budgets = sorted({sum(costs[i:j]) for i in range(len(costs)) for j in range(i + 1, len(costs) + 1)})
    return min((budgeted(chain, b) for b in budgets), key=lambda p: (p.peak_bytes, p.recompute_flops))


def _sub_plan(segments, children):
    return Plan(segments=segments, keep=[lo for lo, _ in segments[:-1]], children=children)


def recursive(chain, base=1):
    """Halve, checkpoint the first half (cut again the same way when it is recomputed), go on with the
    second: O(log n) kept inputs for O(n log n) recompute (Chen et al. 2016, section 4.2)."""
    def cut(lo, hi):
        segments, children = [], {}
        while hi - lo > base:
            mid = lo + (hi - lo) // 2
            if mid - lo > base:
                children[len(segments)] = _sub_plan(*cut(lo, mid))
            segments.append((lo, mid))
            lo = mid
        segments.append((lo, hi))
        return segments, children
    return predict(chain, *cut(0, len(chain)))


def binomial_steps(n, slots):
    """Forward steps that reversing a chain of n steps needs with `slots` stored states, at best
    (Griewank and Walther's binomial bound): r n - C(slots + r, slots + 1), with r the least integer
    such that C(slots + r, slots) >= n. math.inf when it cannot be done (no slot, n > 1)."""
    if n <= 1:
        return 0
    if slots < 1:
        return math.inf
    r = 0
    while math.comb(slots + r, slots) < n:
        r += 1
    return r * n - math.comb(slots + r, slots + 1)


def revolve(chain, slots):
    """Optimal binomial checkpointing (Griewank and Walther's revolve) with `slots` kept layer inputs
    at once: advance m steps, keep that input, reverse the rest with one slot fewer, then the first
    m steps with all of them again; m chosen so that the steps add up to binomial_steps()."""
    n = len(chain)
    if not isinstance(slots, int) or slots < 1:
        raise ValueError(f"revolve: slots must be an int >= 1, got {slots!r}")

    def cut(lo, hi, s):
        segments, children = [], {}
        while hi - lo > 1:
            n = hi - lo
            m = min(range(1, n), key=lambda m: m + binomial_steps(n - m, s - 1) + binomial_steps(m, s))
            if m > 1:
                children[len(segments)] = _sub_plan(*cut(lo, lo + m, s))
            segments.append((lo, lo + m))
            lo, s = lo + m, s - 1
        segments.append((lo, hi))
        return segments, children
    return predict(chain, *cut(0, n, slots))
