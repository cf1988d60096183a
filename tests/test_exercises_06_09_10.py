"""Exercises 6, 9 and 10 against plausible wrong answers: each check fails, and its message says what
is wrong (which layer, which buffer, which moment, which schedule). Also: the checks' own
references (the moment-by-moment layout of exercise 9, the search over every schedule of exercise
10) agree with minigrad.schedules."""
import functools
import math
import os
import types

import pytest

from minigrad import grading, schedules

COURSE = grading.COURSE


def _load(kind, name):
    path = os.path.join(COURSE, kind, name + ".py") if kind else os.path.join(COURSE, name + ".py")
    return grading.load(path, f"test_{kind}_{name}")


def _failure(name, **replace):
    """The check's Failed for the reference with some functions replaced by wrong ones."""
    check = _load("checks", name)
    learner = types.SimpleNamespace(**{k: v for k, v in vars(_load("solutions", name)).items()
                                       if not k.startswith("__")})
    for k, v in replace.items():
        setattr(learner, k, v)
    with pytest.raises(grading.Failed) as e:
        check.check(learner)
    return e.value


def _fails(name, **replace):
    """The check's message and its detail (what `check N --explain` shows) for the reference with some functions
    replaced by wrong ones."""
    e = _failure(name, **replace)
    return f"{e}\n{e.detail}"


# ----------------------------------------------------------------------------- 6. the ledger by hand

LEDGER = "06_the_ledger_by_hand"


def test_06_counting_the_shared_buffer_twice_is_explained():
    msg = _fails(LEDGER, activation_bytes=lambda B, s, i=4: B * (sum(s[:-1]) + sum(s[1:])) * i)
    assert "Layer 1 matched. Layer 2, measured: Linear(16, 16) added 0 bytes" in msg, msg
    assert "one buffer, counted once" in msg, msg


def test_06_forgetting_the_data_batch_is_explained():
    msg = _fails(LEDGER, activation_bytes=lambda B, s, i=4: B * sum(s[1:]) * i)
    assert "The missing 128 bytes are the data batch (4 x 8)" in msg, msg


def test_06_elements_and_weights_are_explained():
    assert "count bytes, not elements" in _fails(LEDGER, activation_bytes=lambda B, s, i=4: B * sum(s))
    msg = _fails(LEDGER, activation_bytes=lambda B, s, i=4: (B * sum(s) + sum(a * b for a, b in zip(s, s[1:]))) * i)
    assert "still a parameter in the ledger" in msg, msg
    assert "this model is float64" in _fails(LEDGER, activation_bytes=lambda B, s, i=4: B * sum(s) * 4)


def test_06_a_backward_with_the_first_layers_dx_is_explained():
    def twice(B, s):
        f = sum(2 * B * a * b for a, b in zip(s, s[1:]))
        return f, 2 * f
    msg = _fails(LEDGER, matmul_flops=twice)
    assert "backward = 2048, but mg.profile measured 1024" in msg and "measured 1 product" in msg, msg
    assert "your count added 2 products" in msg and "nobody needs" in msg, msg


def test_06_a_forward_without_the_factor_2_is_explained():
    def half(B, s):
        f = sum(B * a * b for a, b in zip(s, s[1:]))
        return f, 2 * f - B * s[0] * s[1]
    assert "1/2 of a product of 2 x 4 x 8 x 16" in _fails(LEDGER, matmul_flops=half)
    assert "return a pair" in _fails(LEDGER, matmul_flops=lambda B, s: 2 * B * s[0] * s[1])


# ----------------------------------------------------------------------------- 9. the sqrt(n) plan

PLAN = "09_the_sqrt_n_plan"
solution9 = _load("solutions", PLAN)


def test_09_a_different_cut_is_explained():
    def ceil_cut(chain):
        n = len(chain)
        size = -(-n // max(1, round(math.sqrt(n))))
        return [(lo, min(lo + size, n)) for lo in range(0, n, size)]
    msg = _fails(PLAN, sqrt_plan=ceil_cut)
    assert "n = 3 functions: got [(0, 2), (2, 3)], expected [(0, 1), (1, 3)]" in msg, msg


def test_09_a_buffer_named_per_record_is_explained():
    def per_record(chain, lo, hi):
        held = {}
        for i in range(lo, hi):
            if chain.saves_input[i]:
                held["in", i] = chain.input_bytes[i]
            if chain.saves_output[i]:
                held["out", i] = chain.input_bytes[i + 1]
        return held
    msg = _fails(PLAN, saved_by=per_record)
    assert "is missing" in msg and "One array is one key" in msg, msg


def _kept_and_saved(chain, segments, union, drop_later):
    kept = {lo: chain.input_bytes[lo] for lo, _ in segments[:-1]}

    def total(held, saves):
        return sum({**held, **saves}.values()) if union else sum(held.values()) + sum(saves.values())
    peak, recompute = total(kept, solution9.saved_by(chain, *segments[-1])), 0
    for lo, hi in reversed(segments[:-1]):
        held = {i: b for i, b in kept.items() if i <= lo or not drop_later}
        peak = max(peak, total(held, solution9.saved_by(chain, lo, hi)))
        recompute += sum(chain.flops[lo:hi])
    return peak, recompute


def test_09_counting_a_kept_input_twice_is_explained():
    e = _failure(PLAN, predict=lambda c, s: _kept_and_saved(c, s, union=False, drop_later=True))
    assert "peak 140 bytes, expected 93." in str(e), str(e)
    assert "The peak comes at the end of the forward" in e.detail, e.detail
    assert "at the end of the forward: x_0 56 + x_2 12 + ('other', 2) 25 = 93 bytes" in e.detail, e.detail


def test_09_the_moment_by_moment_layout_is_only_in_the_detail():
    """The layout of every moment is the simulation itself: it comes with --explain (or the same failure twice)."""
    e = _failure(PLAN, predict=lambda c, s: _kept_and_saved(c, s, union=False, drop_later=True))
    assert "moment by moment" not in str(e) and "= 93 bytes" not in str(e), str(e)
    assert "moment by moment" in e.detail


def test_09_holding_every_kept_input_during_every_recompute_is_explained():
    msg = _fails(PLAN, predict=lambda c, s: _kept_and_saved(c, s, union=True, drop_later=False))
    assert "The peak comes while (6, 7) is recomputed" in msg and "freed once its checkpoint's backward" in msg, msg


def test_09_recomputing_the_last_segment_is_explained():
    def plus_last(chain, segments):
        peak, recompute = solution9.predict(chain, segments)
        return peak, recompute + sum(chain.flops[segments[-1][0]:segments[-1][1]])
    assert "it runs normally and is never recomputed" in _fails(PLAN, predict=plus_last)


def test_09_a_prediction_the_engine_does_not_measure_is_explained():
    check = _load("checks", PLAN)
    wrong = types.SimpleNamespace(sqrt_plan=solution9.sqrt_plan,
                                  predict=lambda c, s: (solution9.predict(c, s)[0] + 1, solution9.predict(c, s)[1]))
    with pytest.raises(grading.Failed) as e:
        check._check_measured(wrong)
    assert "On the real chain [Linear(12, 20), Tanh, LayerNorm" in str(e.value), str(e.value)
    assert "run by checkpoint_segments under mg.profile measured peak activations" in str(e.value)


def test_09_the_checks_layout_peaks_where_schedules_predict_does():
    check = _load("checks", PLAN)
    r = grading.rng(0)
    for _ in range(200):
        chain = check._random_chain(r)
        segments = check._random_segments(r, len(chain))
        peak = max(sum(held.values()) for _, held in check._moments(chain, segments))
        assert peak == schedules.predict(chain, segments).peak_bytes


# ----------------------------------------------------------------------------- 10. optimal checkpointing

OPTIMAL = "10_optimal_checkpointing"


def _recursion(base_n1=0, no_slots=math.inf, memo=True, swap=False):
    def opt(n, s):
        if n <= 1:
            return base_n1
        if s < 1:
            return no_slots
        if swap:
            return min(m + opt(n - m, s) + opt(m, s - 1) for m in range(1, n))
        return min(m + opt(n - m, s - 1) + opt(m, s) for m in range(1, n))
    if memo:
        opt = functools.lru_cache(maxsize=None)(opt)
    return opt


def test_10_the_search_over_every_schedule_is_the_closed_form():
    check = _load("checks", OPTIMAL)
    for slots in range(0, 4):
        for n in range(1, 10):
            assert check._best_schedule(n, slots)[0] == schedules.binomial_steps(n, slots)


def test_10_no_memo_is_too_slow_and_says_so():
    assert "Memoize it" in _fails(OPTIMAL, optimal_steps=_recursion(memo=False))


def test_10_wrong_recursions_are_shown_the_best_schedule():
    e = _failure(OPTIMAL, optimal_steps=_recursion(swap=True))
    assert "optimal_steps(3, 1) = 2" in str(e) and "takes 3 forward steps" in str(e), str(e)
    assert "advance to x_2" not in str(e), "the best schedule is the detail's, not the message's"
    assert "takes 3 forward steps (none takes fewer): advance to x_2 (2), reverse 3, restore x_0, advance to x_1 " \
        "(1), reverse 2, restore x_0, reverse 1" in e.detail, e.detail
    assert "return math.inf" in _fails(OPTIMAL, optimal_steps=_recursion(no_slots=0))
    assert "optimal_steps(1, 0) = 1" in _fails(OPTIMAL, optimal_steps=_recursion(base_n1=1))


def test_10_the_closed_form_stays_out_of_the_messages():
    right = _load("solutions", OPTIMAL).optimal_steps
    wrong = _failure(OPTIMAL, optimal_steps=lambda n, s: right(n, s) + (10 <= n <= 60))  # right on the searched n <= 9
    assert "optimal_steps(10, 1) = 46, expected 45" in str(wrong), str(wrong)
    assert "C(" not in str(wrong) + wrong.detail and "at most 9 times" in wrong.detail, str(wrong) + wrong.detail


def test_10_the_closed_form_is_refused():
    msg = _fails(OPTIMAL, optimal_steps=lambda n, s: schedules.binomial_steps(n, s),
                 binomial_steps=schedules.binomial_steps)
    assert "uses schedules.binomial_steps" in msg, msg
