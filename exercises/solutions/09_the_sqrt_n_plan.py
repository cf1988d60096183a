"""Exercise 9, the reference (after lesson 3): the sqrt(n) plan and its prediction (minigrad/schedules.py does the
same, with nested cuts too: segment_bounds, _normal, predict)."""
import math

EXPLAIN = 6  # segments (0, 3), (3, 6), (6, 10): the first two are recomputed, the last never is


def sqrt_plan(chain):
    n = len(chain)
    s = max(1, round(math.sqrt(n)))
    size = n // s
    return [(i * size, (i + 1) * size) for i in range(s - 1)] + [((s - 1) * size, n)]


def saved_by(chain, lo, hi):
    held = {}
    for i in range(lo, hi):
        if chain.saves_input[i]:
            held[i] = chain.input_bytes[i]
        if chain.saves_output[i]:
            held[i + 1] = chain.input_bytes[i + 1]
        if chain.other_bytes[i]:
            held[("other", i)] = chain.other_bytes[i]
    return held


def predict(chain, segments):
    kept = {lo: chain.input_bytes[lo] for lo, _ in segments[:-1]}
    peak = sum({**kept, **saved_by(chain, *segments[-1])}.values())  # end of the forward
    recompute = 0
    for lo, hi in reversed(segments[:-1]):  # backward: each checkpointed segment, last first
        still_kept = {i: b for i, b in kept.items() if i <= lo}
        peak = max(peak, sum({**still_kept, **saved_by(chain, lo, hi)}.values()))
        recompute += sum(chain.flops[lo:hi])
    return peak, recompute
