"""Checks of exercise 9: sqrt_plan against checkpoint_sequential's cut, saved_by and predict against
schedules.predict on seeded random chains, then the learner's plan and prediction against what
mg.profile measures when checkpoint_segments runs it on real chains (peak activation bytes, recompute
FLOPs). A failure lays out, moment by moment, what the engine holds."""
import dataclasses
import math

import minigrad as mg
from minigrad import schedules
from minigrad.checkpoint import checkpoint_segments, measure_chain, set_checkpoint_early_stop
from minigrad.grading import Failed, Question, require, rng

TITLE = "the sqrt(n) plan: cut a chain, predict its peak activation bytes and recompute FLOPs"
LESSON = 3
HINTS = ("The held bytes only grow in the forward and only shrink during a record's backward, except while a "
         "checkpoint recomputes its segment. So the peak is at one of a few moments: which? For each, list what is "
         "held: which kept inputs, which saves.",
         "The moments are the end of the forward, and each checkpointed segment's recompute, last segment first. At "
         "the end of the forward: every checkpointed segment's input, plus saved_by the last segment. While segment "
         "(lo, hi) is recomputed: saved_by(lo, hi) plus the kept inputs of the segments not yet run backward (those "
         "that start at lo or before). Put them in one dict, so that one buffer counts once.",
         "kept = {lo: chain.input_bytes[lo] for lo, _ in segments[:-1]}; peak = sum({**kept, **saved_by(chain, "
         "*segments[-1])}.values()); then for (lo, hi) in reversed(segments[:-1]): peak = max(peak, sum({**{i: b for "
         "i, b in kept.items() if i <= lo}, **saved_by(chain, lo, hi)}.values())) and recompute += sum(chain.flops["
         "lo:hi]).")
QUESTION = Question(6, wrong={10: "the last segment runs normally and is never recomputed: (0, 3) and (3, 6) are",
                              4: "the segments are (0, 3), (3, 6) and (6, 10): the last, of 4, is the one never "
                                 "recomputed"})


def _random_chain(r):
    n = int(r.integers(1, 13))
    return schedules.Chain([int(b) for b in r.integers(1, 100, n + 1)], [bool(v) for v in r.random(n) < 0.6],
                           [bool(v) for v in r.random(n) < 0.5],
                           [int(b) if v < 0.3 else 0 for b, v in zip(r.integers(1, 60, n), r.random(n))],
                           [int(f) for f in r.integers(1, 100, n)])


def _random_segments(r, n):
    cuts = sorted({int(c) for c in r.integers(1, n, int(r.integers(0, n)))}) if n > 1 else []
    starts = [0] + cuts
    return [(a, b) for a, b in zip(starts, starts[1:] + [n])]


def _saved_by(chain, lo, hi):
    """{buffer: (bytes, why)}: the reference's saves, each with the reason it is held."""
    held = {}
    for i in range(lo, hi):
        if chain.saves_input[i]:
            held.setdefault(i, (chain.input_bytes[i], f"f_{i} saves its input"))
        if chain.saves_output[i]:
            held.setdefault(i + 1, (chain.input_bytes[i + 1], f"f_{i} saves its output"))
        if chain.other_bytes[i]:
            held[("other", i)] = (chain.other_bytes[i], f"f_{i}'s other saves")
    return held


def _name(key):
    return f"x_{key}" if isinstance(key, int) else f"{key!r}"


def _moments(chain, segments):
    """[(moment, {buffer: bytes})]: what the engine holds at the end of the forward and during each
    checkpointed segment's recompute (the peak of activations is the largest total)."""
    kept = {lo: chain.input_bytes[lo] for lo, _ in segments[:-1]}
    last = {k: b for k, (b, _) in _saved_by(chain, *segments[-1]).items()}
    moments = [("at the end of the forward", {**kept, **last})]
    for lo, hi in reversed(segments[:-1]):
        inside = {k: b for k, (b, _) in _saved_by(chain, lo, hi).items()}
        moments.append((f"while ({lo}, {hi}) is recomputed", {**{i: b for i, b in kept.items() if i <= lo}, **inside}))
    return moments


def _layout(chain, segments):
    lines = []
    for moment, held in _moments(chain, segments):
        parts = " + ".join(f"{_name(k)} {b}" for k, b in held.items()) or "nothing"
        lines.append(f"  {moment}: {parts} = {sum(held.values())} bytes")
    return "\n".join(lines)


def _check_sqrt_plan(ex):
    for n in range(1, 41):
        got = ex.sqrt_plan(schedules.Chain.uniform(n, 1))
        s = max(1, round(math.sqrt(n)))
        expected = schedules.segment_bounds(n, s)
        if got is None or [tuple(seg) for seg in got] != expected:
            raise Failed(f"sqrt_plan on a chain of n = {n} functions: got {got}, expected {expected} (round(sqrt({n})) "
                         f"= {s} segments of {n} // {s} = {n // s} function{'s' if n // s != 1 else ''} each, the last one "
                         f"taking what is left, as checkpoint_sequential cuts them)")


def _check_saved_by(ex, r):
    for _ in range(30):
        chain = _random_chain(r)
        lo = int(r.integers(0, len(chain)))
        hi = int(r.integers(lo + 1, len(chain) + 1))
        got = ex.saved_by(chain, lo, hi)
        expected = _saved_by(chain, lo, hi)
        call = f"saved_by(chain, {lo}, {hi}) with chain = {chain}"
        require(isinstance(got, dict), f"{call} returned {type(got).__name__}: return a dict {{buffer: bytes}}")
        for key, (nbytes, why) in expected.items():
            require(key in got, f"{call}: {_name(key)} is missing ({why}: {nbytes} bytes, key {key!r}); got {got}. "
                                f"One array is one key: x_i is the int i, f_i's other saves ('other', i)")
            require(got[key] == nbytes, f"{call}: {_name(key)} should be {nbytes} bytes ({why}), got {got[key]}")
        extra = [k for k in got if k not in expected]
        require(not extra, f"{call}: {', '.join(map(repr, extra))} should not be there: no function from {lo} to "
                           f"{hi - 1} saves it (expected {{{', '.join(f'{k!r}: {b}' for k, (b, _) in expected.items())}}})")


def _as_pair(got, call):
    require(isinstance(got, (tuple, list)) and len(got) == 2,
            f"{call} returned {got!r}: return a pair (peak activation bytes, recompute FLOPs)")
    return tuple(got)


def _explain(chain, segments, got, expected, what):
    """A message for a peak or recompute that differs: every moment of the reference, laid out."""
    call = f"predict(chain, {segments})"
    if got[1] != expected[1]:
        last = sum(chain.flops[segments[-1][0]:segments[-1][1]])
        hint = (f" The difference is the last segment's FLOPs ({last}): it runs normally and is never recomputed."
                if got[1] - expected[1] == last else "")
        return (f"{call} with chain = {chain}: recompute FLOPs {got[1]}, {what} {expected[1]}." + hint,
                "Each checkpointed segment's forward runs once more in backward ("
                + " + ".join(f"({lo}, {hi}): {sum(chain.flops[lo:hi])}" for lo, hi in segments[:-1]) + ").")
    moments = _moments(chain, segments)
    at = max(moments, key=lambda m: sum(m[1].values()))[0]
    return (f"{call} with chain = {chain}: peak {got[0]} bytes, {what} {expected[0]}. Which moment of the step "
            f"holds the most, and what is alive then?",
            f"The peak comes {at}. What the engine holds, moment by moment (x_i: the chain's i-th activation, one "
            f"buffer however many records save it):\n{_layout(chain, segments)}\nA segment's kept input is freed "
            f"once its checkpoint's backward has run; the last segment is never recomputed.")


def _check_predict(ex, r):
    for _ in range(40):
        chain = _random_chain(r)
        n = len(chain)
        for segments in (_random_segments(r, n), schedules.segment_bounds(n, max(1, round(math.sqrt(n))))):
            plan = schedules.predict(chain, segments)
            expected = (plan.peak_bytes, plan.recompute_flops)
            got = _as_pair(ex.predict(chain, segments), f"predict(chain, {segments})")
            if got != expected:
                raise Failed(*_explain(chain, segments, got, expected, "expected"))


def _mixed_chain():
    mg.manual_seed(9)
    nn = mg.nn
    return ([nn.Linear(12, 20), nn.Tanh(), nn.LayerNorm(20), nn.Linear(20, 8), nn.GELU(), nn.Linear(8, 16),
             nn.ReLU(), nn.Linear(16, 24), nn.Tanh(), nn.Linear(24, 12), nn.Tanh()], mg.randn(5, 12))


def _mlp_chain():
    mg.manual_seed(9)
    functions = []
    for _ in range(10):
        functions += [mg.nn.Linear(16, 16), mg.nn.Tanh()]
    return functions, mg.randn(4, 16)


def _describe(functions):
    return "[" + ", ".join(type(f).__name__ + (f"({f.in_features}, {f.out_features})" if hasattr(f, "in_features")
                                               else "") for f in functions) + "]"


def _check_measured(ex):
    for functions, x in (_mixed_chain(), _mlp_chain()):
        # the whole-segment model this exercise builds: no Reruns, and the engine's early stop off, so that every
        # op of a checkpointed segment runs again (NOTE [recompute what backward reads] is for after)
        chain = dataclasses.replace(measure_chain(functions, x), reruns=None)
        n = len(chain)
        plans = [("sqrt_plan(chain)", [tuple(s) for s in ex.sqrt_plan(chain)]),
                 ("a plan", [(0, 2), (2, 5), (5, n)]), ("a plan", [(i, i + 1) for i in range(n)])]
        for label, segments in plans:
            with mg.profile() as prof, set_checkpoint_early_stop(False):
                checkpoint_segments(functions, segments, x).sum().backward()
            measured = (prof.peak_bytes("activations"), prof.flops("recompute"))
            got = _as_pair(ex.predict(chain, segments), f"predict(chain, {segments})")
            if got != measured:
                events = prof.timeline()
                peak_at = next(e for e in events if e["activations"] == measured[0])
                message, detail = _explain(chain, segments, got, measured, "measured")
                raise Failed(f"On the real chain {_describe(functions)} (batch {x.shape[0]}, float32), {label} "
                             f"{segments} run by checkpoint_segments under mg.profile measured peak activations "
                             f"{measured[0]} bytes (reached in {peak_at['phase']}, at op '{peak_at['op']}') and "
                             f"{measured[1]} recompute FLOPs; predict says {got[0]} and {got[1]}.\n" + message, detail)


def check(ex):
    r = rng(9)
    _check_sqrt_plan(ex)
    _check_saved_by(ex, r)
    _check_predict(ex, r)
    _check_measured(ex)
