"""NOTE [recompute what backward reads] (checkpoint/policies.py): a checkpoint's recompute runs an op again only
when backward, or an op that runs again, reads something that only running it makes.

What is checked: which ops run again (by name and count, under mg.profile) for chains that end on each kind
of op; gradients bit-identical to the plain run's throughout (float64 too); what the checkpoint keeps; the
generator moved on by a replayed op that drew (sdpa's dropout) so that later dropouts draw the forward's masks;
determinism_check='values' running every op again; and measure_chain's Rerun for each function.
"""
import importlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minigrad as mg
from minigrad import functional as F
from minigrad import nn
from minigrad import schedules as S
from minigrad.checkpoint import checkpoint_segments, measure_chain, set_checkpoint_early_stop
from minigrad.gpt import Block, GPTConfig
from minigrad.schedules import Rerun

from test_checkpoint_policies import assert_bit_identical, grads, params_of


def reruns(fn, x):
    """{op name: calls} that the checkpoint's recompute ran, and the gradients against the plain run's."""
    tensors = [x] + [p for p in getattr(fn, "parameters", lambda: [])()]

    def loss(ckpt):
        mg.manual_seed(7)  # the same dropout masks in both runs
        return ((mg.checkpoint(fn, x) if ckpt else fn(x)) ** 2).sum()

    want = grads(lambda: loss(False), tensors)
    with mg.profile() as prof:
        got = grads(lambda: loss(True), tensors)
    assert_bit_identical(got, want)
    return {op: n for (phase, op), n in prof._calls.items() if phase == "recompute"}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_what_runs_again_depends_on_the_last_ops(dtype):
    mg.manual_seed(0)
    L = lambda: nn.Linear(8, 8).to(dtype)  # noqa: E731
    x = mg.randn(4, 8, dtype=dtype, requires_grad=True)
    # ends on a Tanh: it reads its output, which the checkpoint keeps; the Linear before it has no reader left
    assert reruns(nn.Sequential(L(), nn.Tanh(), L(), nn.Tanh()), x) == {"linear": 1, "tanh": 1}
    # ends on a Linear: it reads only its input, so the Tanh before it runs again, and all before that
    assert reruns(nn.Sequential(L(), nn.Tanh(), L()), x) == {"linear": 1, "tanh": 1}
    # ends on a LayerNorm, which keeps arrays of its own (x-hat, 1/std): everything runs again
    assert reruns(nn.Sequential(L(), nn.Tanh(), L(), nn.LayerNorm(8).to(dtype)), x) == \
        {"linear": 2, "tanh": 1, "layer_norm": 1}
    # (Linear, Tanh) alone: nothing runs again
    assert reruns(nn.Sequential(L(), nn.Tanh()), x) == {}


def test_a_residual_block_skips_its_tail():
    mg.manual_seed(0)
    lin1, lin2 = nn.Linear(8, 8), nn.Linear(8, 8)

    def block(t):  # x + W2 dropout(gelu(W1 x)): the add reads nothing, the dropout only its mask
        return t + F.dropout(lin2(F.gelu(lin1(t))), 0.5)

    block.parameters = lambda: params_of([lin1, lin2])
    x = mg.randn(4, 8, requires_grad=True)
    assert reruns(block, x) == {"linear": 1, "gelu": 1}


def test_a_replayed_op_that_drew_moves_the_generator_on():
    """A policy that keeps sdpa (which draws its dropout mask inside the op) but not the dropouts after it:
    in the recompute sdpa does not run, and the dropouts after it must still draw the forward's masks."""
    cfg = GPTConfig(n_embd=16, n_head=2, block_size=8, dropout=0.2, attn_implementation="sdpa")
    mg.manual_seed(0)
    blocks = [Block(cfg) for _ in range(2)]
    x = mg.randn(2, 8, 16, requires_grad=True)
    tensors = params_of(blocks) + [x]

    def run(t):
        for b in blocks:
            t = b(t)
        return t

    def loss(ckpt):
        mg.manual_seed(1)
        out = mg.checkpoint(run, x, policy=lambda op, *_: op == "sdpa") if ckpt else run(x)
        return (out * out).mean()

    want = grads(lambda: loss(False), tensors)
    with mg.profile() as prof:
        got = grads(lambda: loss(True), tensors)
    assert prof.calls("recompute", "sdpa") == 0 and prof.calls("recompute", "dropout") > 0
    assert_bit_identical(got, want)


def test_the_values_check_runs_every_op_again():
    mg.manual_seed(0)
    block = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh())
    x = mg.randn(4, 8)
    with mg.profile() as prof:
        mg.checkpoint(block, x, determinism_check="values").sum().backward()
    assert prof.calls("recompute", "linear") == 2 and prof.calls("recompute", "tanh") == 2


def test_measure_chain_says_what_a_recompute_runs_of_each_function():
    mg.manual_seed(0)
    functions = [nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.LayerNorm(8)]
    chain = measure_chain(functions, mg.randn(4, 8))
    lin = chain.flops[0]
    assert chain.reruns[0] == Rerun(last=(0, True, False), unread=(0, True), read=(lin, True))  # reads x for dW
    assert chain.reruns[1] == Rerun(last=(0, False, True), unread=(chain.flops[1], True), read=(chain.flops[1], True))
    assert chain.reruns[3].last == (chain.flops[3], True, False)  # a LayerNorm keeps arrays of its own: it runs
    assert all(np.isscalar(f) for r in chain.reruns for f in (r.last[0], r.unread[0], r.read[0]))


def test_early_stop_off_recomputes_every_op_and_is_restored():
    ckpt_module = importlib.import_module("minigrad.checkpoint.segment")  # the switch lives there
    mg.manual_seed(0)
    block = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh())
    x = mg.randn(4, 8)
    with pytest.raises(ZeroDivisionError), set_checkpoint_early_stop(False):
        with mg.profile() as prof:
            mg.checkpoint(block, x).sum().backward()
        assert prof.calls("recompute", "linear") == 2 and prof.calls("recompute", "tanh") == 2
        1 / 0
    assert ckpt_module._early_stop is True  # restored, even after an error
    with mg.profile() as prof:
        mg.checkpoint(block, x).sum().backward()
    assert prof.calls("recompute", "linear") == prof.calls("recompute", "tanh") == 1


class Residual(nn.Module):
    """x + W x: the add reads nothing in backward, so the Linear inside need not run again at a segment's end."""

    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x):
        return x + self.lin(x)


def mixed_chain():
    mg.manual_seed(5)
    return [nn.Linear(12, 16), nn.Tanh(), Residual(16), nn.LayerNorm(16), nn.Linear(16, 16), nn.GELU(),
            nn.Dropout(0.3), nn.Linear(16, 8), Residual(8), nn.ReLU(), nn.Linear(8, 8), nn.Sigmoid(), Residual(8)]


@settings(max_examples=30, deadline=None)
@given(st.sets(st.integers(1, 12), max_size=6), st.booleans())
def test_any_plan_on_a_mixed_chain_is_predicted_exactly(keep, nested):
    """Every kind of end (a Linear, a Tanh, a residual add, a LayerNorm, a dropout, ...) and every cut: the
    schedule's prediction from measure_chain's Reruns is what mg.profile measures."""
    functions, x = mixed_chain(), mg.randn(5, 12)
    chain = measure_chain(functions, x)
    segments = S.bounds_of(len(chain), keep)
    children = {}
    if nested:  # cut the longest checkpointed segment again, once, in halves
        k, (lo, hi) = max(enumerate(segments[:-1]), key=lambda s: s[1][1] - s[1][0], default=(None, (0, 0)))
        if k is not None and hi - lo >= 2:
            mid = (lo + hi) // 2
            children = {k: S.Plan([(lo, mid), (mid, hi)], keep=[lo])}
    plan = S.predict(chain, segments, children)
    mg.manual_seed(9)
    with mg.profile() as prof:
        checkpoint_segments(functions, segments, x, plan.children).sum().backward()
    assert (prof.peak_bytes("activations"), prof.flops("recompute")) == (plan.peak_bytes, plan.recompute_flops)
