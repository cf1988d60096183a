"""Schedules: plan, predict, then measure. On chains of real layers, running a plan under
mg.profile must measure exactly the predicted peak activation bytes and recompute FLOPs."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minigrad as mg
from minigrad import schedules as S
from minigrad.gpt import GPT, GPTConfig
from minigrad.checkpoint import checkpoint_segments, measure_chain


def mlp(depth, width=16, seed=0):
    mg.manual_seed(seed)
    layers = []
    for _ in range(depth):
        layers += [mg.nn.Linear(width, width), mg.nn.Tanh()]
    return list(mg.nn.Sequential(*layers))


def measure(functions, x, segments):
    with mg.profile() as prof:
        out = checkpoint_segments(functions, segments, x)
        out.sum().backward()
    assert prof.current_bytes("activations") == 0
    return prof.peak_bytes("activations"), prof.flops("recompute")


@pytest.fixture(scope="module")
def chain16():
    functions = mlp(8)
    x = mg.randn(4, 16)
    return functions, x, measure_chain(functions, x)


def test_measured_chain_of_an_mlp(chain16):
    functions, x, chain = chain16
    assert len(chain) == 16
    assert chain.saves_input == [True, False] * 8    # linear keeps x for dW
    assert chain.saves_output == [False, True] * 8   # tanh keeps y for 1 - y^2
    assert chain.other_bytes == [0] * 16             # a saved weight is a parameter, not an activation
    assert chain.input_bytes == [4 * 16 * 4] * 17
    assert chain.flops[0] == 2 * 4 * 16 * 16 + 4 * 16  # the matmul and the bias


@pytest.mark.parametrize("make", [
    S.no_checkpointing, S.sqrt_n, S.best_budgeted,
    lambda c: S.every_k(c, 1), lambda c: S.every_k(c, 3), lambda c: S.every_k(c, 4), lambda c: S.every_k(c, 16),
    lambda c: S.budgeted(c, 1000), lambda c: S.budgeted(c, 2500),
], ids=["none", "sqrt", "best_budgeted", "every1", "every3", "every4", "every16", "budget1000", "budget2500"])
def test_prediction_equals_measurement(chain16, make):
    functions, x, chain = chain16
    plan = make(chain)
    assert measure(functions, x, plan.segments) == (plan.peak_bytes, plan.recompute_flops)


@settings(max_examples=25, deadline=None)
@given(st.sets(st.integers(1, 15), max_size=8))
def test_any_plan_is_predicted_exactly(chain16, keep):
    functions, x, chain = chain16
    plan = S.predict(chain, S.bounds_of(len(chain), keep))
    assert measure(functions, x, plan.segments) == (plan.peak_bytes, plan.recompute_flops)


def test_gpt_blocks_are_predicted_exactly():
    cfg = GPTConfig(vocab_size=16, block_size=8, n_layer=4, n_head=2, n_embd=16)
    model = GPT(cfg).to(mg.default_device())
    x = model.wte(mg.randint(0, 16, (2, 8))).detach()
    blocks = list(model.h)
    chain = measure_chain(blocks, x)
    for plan in (S.no_checkpointing(chain), S.every_k(chain, 1), S.every_k(chain, 2), S.best_budgeted(chain)):
        assert measure(blocks, x, plan.segments) == (plan.peak_bytes, plan.recompute_flops)


def test_sqrt_n_memory_grows_like_sqrt_n():
    # a uniform linear chain of n functions each keeping its input: none keeps n + 0 inputs,
    # sqrt(n) segments keep about 2 sqrt(n)
    for n in (16, 64, 256, 1024):
        chain = S.Chain.uniform(n, input_bytes=1)
        assert S.no_checkpointing(chain).peak_bytes == n
        plan = S.sqrt_n(chain)
        assert plan.peak_bytes <= 2 * math.isqrt(n) + 2
        assert plan.recompute_flops <= n  # at most one extra forward pass
    slope = math.log(S.sqrt_n(S.Chain.uniform(1024, 1)).peak_bytes / S.sqrt_n(S.Chain.uniform(16, 1)).peak_bytes) \
        / math.log(1024 / 16)
    assert abs(slope - 0.5) < 0.05


def test_budgeted_keeps_each_segment_within_the_budget():
    chain = S.Chain.uniform(20, input_bytes=10)
    plan = S.budgeted(chain, 35)
    assert all((hi - lo) * 10 <= 35 for lo, hi in plan.segments)
    assert plan.keep == [0, 3, 6, 9, 12, 15]


def test_best_budgeted_is_no_worse_than_sqrt_n():
    for n in (9, 16, 30, 64):
        chain = S.Chain.uniform(n, input_bytes=4, saves_output=True)
        assert S.best_budgeted(chain).peak_bytes <= S.sqrt_n(chain).peak_bytes


def test_bad_plans_and_chains_are_refused():
    chain = S.Chain.uniform(4, 1)
    with pytest.raises(ValueError, match="cover"):
        S.predict(chain, [(0, 2), (3, 4)])
    with pytest.raises(ValueError, match="cover"):
        S.predict(chain, [(0, 2)])
    with pytest.raises(ValueError, match="k must be"):
        S.every_k(chain, 0)
    with pytest.raises(ValueError, match="n \\+ 1"):
        S.Chain([1, 1], [True], [False], [0], [1, 2])


def test_checkpointed_plans_keep_gradients_bit_identical(chain16):
    functions, x, chain = chain16
    params = [p for f in functions for p in getattr(f, "parameters", lambda: [])()]

    def grads(segments):
        for p in params:
            p.grad = None
        checkpoint_segments(functions, segments, x).sum().backward()
        return [p.grad.numpy().copy() for p in params]

    plain = grads([(0, len(chain))])
    for plan in (S.sqrt_n(chain), S.best_budgeted(chain), S.every_k(chain, 3)):
        assert all(np.array_equal(a, b) for a, b in zip(plain, grads(plan.segments)))


@pytest.mark.parametrize("make", [S.recursive, lambda c: S.recursive(c, base=3), lambda c: S.revolve(c, 1),
                                  lambda c: S.revolve(c, 2), lambda c: S.revolve(c, 3), lambda c: S.revolve(c, 5)],
                         ids=["recursive", "recursive-base3", "revolve1", "revolve2", "revolve3", "revolve5"])
def test_nested_plans_are_predicted_exactly(chain16, make):
    functions, x, chain = chain16
    plan = make(chain)
    with mg.profile() as prof:
        checkpoint_segments(functions, plan.segments, x, plan.children).sum().backward()
    assert (prof.peak_bytes("activations"), prof.flops("recompute")) == (plan.peak_bytes, plan.recompute_flops)


def _steps_by_brute_force(n, slots, memo={}):
    """Reverse n steps with `slots` stored states: try every first advance m (exhaustive)."""
    if n <= 1:
        return 0
    if slots < 1:
        return math.inf
    if (n, slots) not in memo:
        memo[n, slots] = min(m + _steps_by_brute_force(n - m, slots - 1) + _steps_by_brute_force(m, slots)
                             for m in range(1, n))
    return memo[n, slots]


@pytest.mark.parametrize("slots", [1, 2, 3, 4, 5])
def test_revolve_is_optimal_up_to_20_steps(slots):
    for n in range(1, 21):
        best = _steps_by_brute_force(n, slots)
        assert S.binomial_steps(n, slots) == best
        # on a uniform chain of one FLOP per step, revolve's recompute is exactly that optimum, and it
        # never keeps more than `slots` layer inputs plus the step being reversed
        plan = S.revolve(S.Chain.uniform(n, input_bytes=1), slots)
        assert plan.recompute_flops == best
        assert plan.peak_bytes <= min(slots, n - 1) + 1


def test_recursive_memory_grows_like_log_n():
    peaks = {n: S.recursive(S.Chain.uniform(n, 1)).peak_bytes for n in (16, 256, 4096)}
    assert peaks[256] - peaks[16] == peaks[4096] - peaks[256] == 4  # + 4 per 16x: logarithmic
    for n in (16, 256, 4096):
        assert S.recursive(S.Chain.uniform(n, 1)).recompute_flops <= n * math.log2(n)


def test_revolve_refuses_no_slots():
    with pytest.raises(ValueError, match="slots"):
        S.revolve(S.Chain.uniform(4, 1), 0)
