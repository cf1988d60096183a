"""Checks of exercise 10: optimal_steps against a search over every schedule of the reversal game
(Dijkstra over stored slots, the state at hand and the steps left, n <= 9), against the closed form
schedules.binomial_steps (n <= 60, slots <= 5), against the recompute FLOPs mg.profile measures
when revolve's plan runs on a chain of identical layers, and for speed (n = 200, slots = 10, memoized)."""
import heapq
import math
import time
import types

import minigrad as mg
from minigrad import schedules
from minigrad.checkpoint import checkpoint_segments, measure_chain, set_checkpoint_early_stop
from minigrad.grading import Failed, Question, require

TITLE = "optimal checkpointing: the fewest forward steps to reverse n steps with s slots (revolve's recursion)"
LESSON = 8
HINTS = ("An optimal schedule starts by advancing from x_0 to some x_m (1 <= m < n) and storing it. After that, "
         "two jobs are left, one after the other: which steps does each reverse, from which state, and how many "
         "slots does each have, given that x_0 must stay stored until the end?",
         "Call opt(k, t) the cost of k steps from their first state, with t slots. Advancing m costs m; then the last "
         "k - m steps are reversed from x_m while x_0 holds one slot (t - 1 left); then the first m steps from x_0 "
         "again, with all t slots. Take the best m. opt(k, t) = 0 for k <= 1, and math.inf for t = 0, k > 1. Compute "
         "each (k, t) pair once.",
         "@functools.lru_cache(maxsize=None) on optimal_steps(n, slots): return 0 if n <= 1; math.inf if slots < 1; "
         "else min(m + optimal_steps(n - m, slots - 1) + optimal_steps(m, slots) for m in range(1, n)).")
QUESTION = Question(15, wrong={16: "x_15 never needs a slot: it is at hand when step 16 is reversed, and each "
                                   "state after that comes from a slot",
                               1: "one slot costs n(n - 1)/2 = 120 advances for 16 steps"})


def _best_schedule(n, slots):
    """(fewest advances, [moves]) over every schedule of the game, by Dijkstra; (math.inf, None) if none."""
    start = (frozenset([0]) if slots else frozenset(), 0, n)  # (stored states, state at hand, steps left)
    dist, parent, heap, tie = {start: 0}, {start: None}, [(0, 0, start)], 1
    while heap:
        d, _, state = heapq.heappop(heap)
        if d > dist[state]:
            continue
        stored, at, left = state
        if left == 0:
            moves = []
            while parent[state] is not None:
                state, move = parent[state]
                moves.append(move)
            return d, moves[::-1]
        nexts = []
        if at < left - 1:
            nexts.append(((stored, at + 1, left), 1, ("advance", at + 1)))
        if at == left - 1:
            nexts.append(((stored, at, left - 1), 0, ("reverse", left)))
        if at not in stored and len(stored) < slots:
            nexts.append(((stored | {at}, at, left), 0, ("store", at)))
        for q in stored:
            if q != at:
                nexts.append(((stored, q, left), 0, ("restore", q)))
            nexts.append(((stored - {q}, at, left), 0, ("free", q)))
        for nxt, cost, move in nexts:
            if d + cost < dist.get(nxt, math.inf):
                dist[nxt], parent[nxt] = d + cost, (state, move)
                heapq.heappush(heap, (d + cost, tie, nxt))
                tie += 1
    return math.inf, None


def _describe(moves):
    """The moves in words, with runs of advances joined and frees left out."""
    words, at = [], 0
    for i, (kind, k) in enumerate(moves):
        if kind == "advance":
            if i + 1 < len(moves) and moves[i + 1][0] == "advance":
                continue
            words.append(f"advance to x_{k} ({k - at})")
            at = k
        elif kind == "reverse":
            words.append(f"reverse {k}")
        elif kind == "store":
            words.append(f"store x_{k}")
        elif kind == "restore":
            words.append(f"restore x_{k}")
            at = k
    return ", ".join(words)


def _call(ex, n, slots):
    try:
        return ex.optimal_steps(n, slots)
    except RecursionError:
        raise Failed(f"optimal_steps({n}, {slots}) recursed deeper than Python allows: fill a table bottom-up "
                     f"(for t = 1 .. slots, for k = 2 .. n), or recurse with m from 1 up so that the small pairs "
                     f"are memoized first") from None


def _same(got, expected):
    if expected == math.inf:
        return got == math.inf
    return isinstance(got, (int, float)) and not isinstance(got, bool) and got == expected


def _no_closed_form(ex):
    """The learner's code must not call the closed form or revolve: the exercise is the recursion."""
    names, seen = set(), set()

    def walk(code):
        names.update(code.co_names)
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                walk(c)
    for value in vars(ex).values():
        f = getattr(value, "__wrapped__", value)
        if isinstance(f, types.FunctionType) and id(f) not in seen:
            seen.add(id(f))
            walk(f.__code__)
    used = sorted(names & {"binomial_steps", "revolve"})
    require(not used and schedules not in vars(ex).values(),
            f"optimal_steps uses schedules.{used[0] if used else 'binomial_steps'}: that is the answer in closed "
            f"form; write the recursion (each (n, slots) pair once)")


def _check_against_search(ex):
    for slots in range(0, 4):
        for n in range(1, 10):
            best, moves = _best_schedule(n, slots)
            got = _call(ex, n, slots)
            if not _same(got, best):
                if best == math.inf:
                    raise Failed(f"optimal_steps({n}, {slots}) = {got!r}, but no schedule can reverse {n} steps with "
                                 f"{slots} slots (once x_0 is left behind it is lost): return math.inf")
                raise Failed(f"optimal_steps({n}, {slots}) = {got!r}, but the best schedule, found by searching every "
                             f"schedule, takes {best} forward steps: play it by hand, with {slots} slot"
                             f"{'s' if slots != 1 else ''}",
                             f"The best schedule takes {best} forward steps (none takes fewer): {_describe(moves)}."
                             if moves else "")


def _check_against_closed_form(ex):
    for slots in range(1, 6):
        for n in list(range(10, 31)) + list(range(31, 61, 4)):
            expected = schedules.binomial_steps(n, slots)
            got = _call(ex, n, slots)
            if not _same(got, expected):
                r = next(r for r in range(n + 1) if math.comb(slots + r, slots) >= n)
                raise Failed(f"optimal_steps({n}, {slots}) = {got!r}, expected {expected} (the closed form of Griewank "
                             f"and Walther; the search over every schedule, for n <= 9, agreed with you)",
                             f"With {slots} slots, the best schedule advances each of the {n} steps at most {r} times.")


def _check_speed(ex):
    t0 = time.perf_counter()
    _call(ex, 16, 3)
    first = time.perf_counter() - t0
    require(first < 0.05, f"optimal_steps(16, 3) took {first:.2f} s: the recursion recomputes the same (n, slots) "
                          f"pairs again and again (exponential time). Memoize it (functools.lru_cache) or fill a table, "
                          f"so that each pair is computed once")
    t0 = time.perf_counter()
    got = _call(ex, 200, 10)
    took = time.perf_counter() - t0
    expected = schedules.binomial_steps(200, 10)
    require(_same(got, expected), f"optimal_steps(200, 10) = {got!r}, expected {expected}")
    require(took < 0.5, f"optimal_steps(200, 10) took {took:.2f} s, more than 0.5 s: each (n, slots) pair should be "
                        f"computed once, in O(n) for its min over m (O(n^2 slots) in all)")


def _check_measured(ex):
    """On a chain of identical Linear -> Tanh blocks, revolve's plan recomputes optimal_steps blocks."""
    n = 12
    mg.manual_seed(10)
    blocks = [mg.nn.Sequential(mg.nn.Linear(8, 8), mg.nn.Tanh()) for _ in range(n)]
    x = mg.randn(4, 8)
    chain = measure_chain(blocks, x)
    per_block = chain.flops[0]
    for slots in (2, 3):
        plan = schedules.revolve(chain, slots)
        # Griewank and Walther count whole forward steps: early stop off, so that each recomputed block runs whole
        # (by default the engine skips what backward does not read: NOTE [recompute what backward reads])
        with mg.profile() as prof, set_checkpoint_early_stop(False):
            checkpoint_segments(blocks, plan.segments, x, plan.children).sum().backward()
        measured = prof.flops("recompute")
        got = _call(ex, n, slots)
        require(_same(got, measured // per_block),
                f"revolve's plan with {slots} slots on {n} identical Linear(8, 8) -> Tanh blocks (batch 4), run by "
                f"checkpoint_segments under mg.profile, recomputed {measured} FLOPs: {measured // per_block} block "
                f"forwards of {per_block} FLOPs each. optimal_steps({n}, {slots}) = {got!r}")


def check(ex):
    _no_closed_form(ex)
    _check_against_search(ex)
    _check_speed(ex)
    _check_against_closed_form(ex)
    _check_measured(ex)
