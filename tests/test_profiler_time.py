"""The ledger's clock (mg.profile's time: NOTE [self time] in profiler/clocks.py): what each op's time holds.

No test here asserts a speed: only how time is accounted for. Self times are never negative and add up,
with the profiler's own bookkeeping, to at most the block's wall time (so nothing is counted twice); an
op's time sits under the phase it ran in; an op that sleeps shows its sleep in its own row.
"""
import time

import pytest

import minigrad as mg
from minigrad import nn, ops, optim
from minigrad.profiler import TIMED_PHASES, format_seconds
from minigrad.tensor import apply

NAP = 0.1  # seconds that the slow op sleeps: far above any tiny op, even on a loaded machine


class Slow(ops.Op):
    """The identity, with a forward that sleeps NAP seconds: a known cost to find in the table."""
    name = "slow"
    counts_flops = False

    def forward(self, x):
        time.sleep(NAP)
        return x.copy()

    def backward(self, g):
        return (g,)


def slow(x):
    return apply(Slow, x)


def mlp(sizes):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.Tanh()]
    return nn.Sequential(*layers)


def timed(prof):
    """{(phase, op): (self seconds, total seconds)} of every op the profile timed."""
    return {key: (prof.seconds(*key), prof.seconds(*key, inclusive=True)) for key in prof._self_ns}


def check_accounts(prof):
    """Self times never negative, never above totals, and with the profiler's bookkeeping within the block."""
    for key, (own, total) in timed(prof).items():
        assert 0 <= own <= total, (key, own, total)
    assert prof.overhead_seconds() >= 0
    assert prof.seconds() + prof.overhead_seconds() <= prof.wall_seconds(), prof.table()


def test_a_training_step_is_timed_op_by_op_and_phase_by_phase():
    model = mlp([8, 32, 16])
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    x = mg.randn(3, 8)
    with mg.profile() as prof:
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    check_accounts(prof)
    ran = {key for key in prof._calls}
    assert {key for key in prof._self_ns if key[0] != "step"} == ran  # each op run is timed, in its phase
    assert {key for key in prof._self_ns if key[0] == "step"} == {("step", "AdamW")}
    for key, (own, total) in timed(prof).items():
        assert own == total, key  # nothing ran inside another op: self time is all of it
    assert prof.seconds("step", "AdamW") > 0
    assert prof.seconds() == pytest.approx(sum(prof.seconds(p) for p in TIMED_PHASES))
    with pytest.raises(ValueError, match="unknown phase"):
        prof.seconds("sideways")


def test_a_slow_op_shows_its_time_in_its_own_row_only():
    x = mg.randn(4, 4, requires_grad=True)
    with mg.profile() as prof:
        y = slow(x).tanh().sum()  # tanh and sum consume the slow op's output
        y.backward()
    check_accounts(prof)
    assert prof.seconds("forward", "slow") >= NAP
    for key in [("forward", "tanh"), ("forward", "sum"), ("backward", "slow"), ("backward", "tanh")]:
        assert prof.seconds(*key) < NAP, (key, prof.table())  # the nap is the slow op's forward's alone
    lines = prof.table().splitlines()
    times = lines[next(i for i, line in enumerate(lines) if line.startswith("self time")):]
    row = next(line for line in times if line.startswith("slow "))
    assert format_seconds(prof.seconds("forward", "slow")) in row


def test_a_checkpoints_recompute_is_timed_under_recompute_and_not_twice():
    x = mg.randn(4, 4, requires_grad=True)

    def segment(h):  # in backward, the first tanh runs again (its saved output is gone), so the slow op too;
        return slow(h).tanh().tanh()  # the last tanh is replayed (NOTE [recompute what backward reads])

    with mg.profile() as prof:
        y = mg.checkpoint(segment, x)
        y.sum().backward()
    check_accounts(prof)
    assert prof.calls("recompute", "slow") == 1
    assert prof.seconds("forward", "slow") >= NAP and prof.seconds("recompute", "slow") >= NAP
    assert {name for phase, name in prof._self_ns if phase == "recompute"} == {"slow", "tanh"}
    # the recompute and its backward run inside the checkpoint's backward: in its total, not in its self time.
    # Its total is its self time (which holds the replayed tanh's) and the self times of the ops inside it, exactly:
    # compared in nanoseconds, as sums of seconds (floats) round either way
    assert prof.calls("recompute", "tanh") == 1
    inside = sum(n for (phase, name), n in prof._self_ns.items()
                 if phase == "recompute" or (phase, name) in {("backward", "slow"), ("backward", "tanh")})
    assert prof._total_ns[("backward", "checkpoint")] == prof._self_ns[("backward", "checkpoint")] + inside
    total = prof.seconds("backward", "checkpoint", inclusive=True)
    assert total >= NAP


class Broken(Slow):
    name = "broken"

    def forward(self, x):
        raise ValueError("broken on purpose")


def test_an_op_that_fails_leaves_the_clocks_in_order():
    x = mg.randn(3, 4, requires_grad=True)
    with mg.profile() as prof:
        with pytest.raises(ValueError, match="broken"):
            apply(Broken, x)  # fails inside its forward: its clock never stops
        slow(x).sum().backward()
    check_accounts(prof)
    assert prof.seconds("forward", "slow") >= NAP
    assert {name for _, name in prof._self_ns} == {"slow", "sum"}


def test_the_table_has_a_time_row_per_op_and_can_leave_times_out():
    model = mlp([8, 16])
    x = mg.randn(3, 8)
    with mg.profile() as prof:
        model(x).sum().backward()
    text = prof.table()
    head = next(line for line in text.splitlines() if line.startswith("self time"))
    assert head.split()[2:] == list(TIMED_PHASES) + ["total", "share"]
    for name in ("linear", "tanh", "sum", "all ops", "not in ops"):
        assert any(line.startswith(name + " ") for line in text.splitlines()), f"{name} missing from\n{text}"
    without = prof.table(times=False)
    assert "self time" not in without
    assert text == without.replace("\n\nFLOPs", "\n\n" + "\n".join(prof._time_table()) + "\n\nFLOPs", 1)


def test_format_seconds_units():
    assert format_seconds(0) == "0 µs" and format_seconds(999e-6) == "999 µs"
    assert format_seconds(1.5e-3) == "1.50 ms" and format_seconds(2.25) == "2.25 s"
