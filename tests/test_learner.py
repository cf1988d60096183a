"""Learner mode (minigrad/learner.py): the engine runs on the learner's exercise pieces where they are written.

What is checked, and against what:
  the references   with exercises/solutions plugged in, every piece runs, and a program that reaches all of them
                   (a GPT's training steps; an MLP with exp, log, pow, broadcasting matmuls, a checkpoint and
                   accumulation_step) ends with the engine's parameters bit for bit, once the engine's softmax sums
                   its rows in NumPy's order (backend/rows.py); with its BLAS row sums, within float32 rounding
  the stubs        exercises/ as shipped: every piece is a stub, nothing is swapped, the engine's own runs
  a broken piece   reported with its error and the check to run, and left out
  off again        use() puts back every function and method it swapped
  safety kept      the learner's walk refuses a saved array written in place, as the engine's does, and frees
                   the saved arrays after
  the command      python -m minigrad lesson 1 --learner FOLDER runs and says whose pieces ran
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad import learner, nn, ops
from minigrad.backend import rows
from minigrad.gpt import GPT, GPTConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTIONS = os.path.join(ROOT, "exercises", "solutions")
STUBS = os.path.join(ROOT, "exercises")


def _gpt_steps(steps=3):
    mg.manual_seed(0)
    cfg = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)
    model = GPT(cfg)
    opt = mg.optim.AdamW(model.parameters(), lr=1e-2)
    idx = mg.randint(0, 11, (2, 8))
    losses = []
    for _ in range(steps):
        _, loss = model(idx, idx)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


class Net(nn.Module):
    """Reaches the pieces a GPT does not: exp, log, pow, a broadcast matmul, a checkpoint of a module."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(6, 6), nn.Tanh())
        self.w = nn.Parameter(mg.randn(1, 6, 4) * 0.3)  # broadcast over the batch of matrices

    def forward(self, x):
        h = mg.checkpoint(self.inner, x)
        h = (h.exp() + 1).log() ** 2
        return (h.reshape(2, -1, 6) @ self.w).reshape(-1, 4).log_softmax(dim=-1)


def _net_steps(steps=3):
    mg.manual_seed(1)
    model = Net()
    opt = mg.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = mg.randn(8, 6), mg.randint(0, 4, (8,))

    def loss_sum(out, target):
        return mg.functional.cross_entropy(out, target, reduction="sum")
    results = []
    for _ in range(steps):
        results.append(mg.accumulation_step(model, loss_sum, opt, x, y, micro_batch_size=4).loss)
    return results, [p.detach().numpy().copy() for p in model.parameters()]


@pytest.fixture
def numpy_row_sums(monkeypatch):
    """The engine's softmax sums rows as NumPy's sum does (the BLAS's row sums add in another order)."""
    monkeypatch.setattr(rows, "_ROW_MAX", 0)


@pytest.mark.parametrize("program", [_gpt_steps, _net_steps])
def test_the_references_give_the_engines_numbers_bit_for_bit(program, numpy_row_sums):
    plain = program()
    with learner.use(SOLUTIONS) as pieces:
        mine = program()
        ran = {p.number for p in pieces if p.ran}
    assert mine[0] == plain[0]
    assert all(np.array_equal(a, b) for a, b in zip(mine[1], plain[1]))
    expected = {2, 4, 5, 12, 3} if program is _gpt_steps else {1, 2, 3, 5, 8, 11, 12}
    assert expected <= ran, f"pieces that did not run: {expected - ran}"


def _gpt_gradients():
    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16))
    idx = mg.randint(0, 11, (2, 8))
    _, loss = model(idx, idx)
    loss.backward()
    return loss.item(), [p.grad.numpy().copy() for p in model.parameters()]


def test_with_the_blas_row_sums_the_references_agree_to_rounding():
    """(AdamW's steps would amplify a last-bit difference in a gradient near 0 to a step of lr: compare one
    backward's gradients, and the losses of a few steps.)"""
    plain, plain_steps = _gpt_gradients(), _gpt_steps()
    with learner.use(SOLUTIONS):
        mine, mine_steps = _gpt_gradients(), _gpt_steps()
    np.testing.assert_allclose(mine[0], plain[0], rtol=1e-6)
    np.testing.assert_allclose(mine_steps[0], plain_steps[0], rtol=1e-5)
    for a, b in zip(mine[1], plain[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7 * np.abs(b).max())


def test_the_stubs_leave_the_engine_as_it_is():
    engine = (ops.Softmax, mg.Tensor.__dict__["backward"], mg.optim.AdamW.__dict__["step"], mg.checkpoint)
    with learner.use(STUBS) as pieces:
        assert {p.state for p in pieces} == {"stub"}, learner.report(pieces)
        assert (ops.Softmax, mg.Tensor.__dict__["backward"], mg.optim.AdamW.__dict__["step"], mg.checkpoint) == engine
        assert "the engine's own (stub)" in learner.report(pieces)


def test_use_puts_back_everything_it_swapped():
    before = (ops.Softmax, ops.LogSoftmax, ops.nn.Softmax, ops.Tanh.__dict__["backward"], ops.unbroadcast,
              ops.pointwise.unbroadcast, ops.Matmul.__dict__["backward"], mg.Tensor.__dict__["backward"],
              mg.checkpoint, mg.accumulation_step, mg.optim.AdamW.__dict__["step"])
    with learner.use(SOLUTIONS):
        assert ops.Softmax is not before[0] and mg.Tensor.__dict__["backward"] is not before[7]
    after = (ops.Softmax, ops.LogSoftmax, ops.nn.Softmax, ops.Tanh.__dict__["backward"], ops.unbroadcast,
             ops.pointwise.unbroadcast, ops.Matmul.__dict__["backward"], mg.Tensor.__dict__["backward"],
             mg.checkpoint, mg.accumulation_step, mg.optim.AdamW.__dict__["step"])
    assert after == before and not learner._swapped and not learner._active


def test_a_broken_piece_is_reported_and_left_out(tmp_path):
    (tmp_path / "02_unbroadcast.py").write_text("def unbroadcast(grad, shape):\n    return grad.sum(axis=5)\n")
    with learner.use(str(tmp_path)) as pieces:
        two = next(p for p in pieces if p.number == 2)
        assert two.state.startswith("broken:") and "check 2" in two.state
        assert ops.unbroadcast is ops.base.unbroadcast  # the engine's own
        assert next(p for p in pieces if p.number == 4).state == "missing"


def test_the_learners_walk_refuses_a_saved_array_written_in_place_and_frees_what_was_saved():
    with learner.use(SOLUTIONS) as pieces:
        x = mg.randn(3, requires_grad=True)
        h = x * 2
        y = h.tanh()
        with mg.no_grad():
            y.add_(1)  # tanh saved y for its backward
        with pytest.raises(RuntimeError, match="modified in place"):
            y.sum().backward()
        h = x.tanh()
        root = (h * h).sum()
        walks = next(p for p in pieces if p.number == 4).ran
        root.backward()
        assert next(p for p in pieces if p.number == 4).ran == walks + 1
        assert root._ctx.saved == () and h._ctx.saved == ()  # released after the walk


def test_the_command_runs_a_lesson_on_the_learners_pieces(tmp_path):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "minigrad", "lesson", "1", "--learner", SOLUTIONS, "--quick"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "exercise  4 the tape walk (backward): yours, ran 40 times" in r.stderr
    assert "exercise 12 the AdamW step: yours, ran 40 times" in r.stderr


def test_the_ledger_measures_the_learners_walk_as_the_engines():
    """Around each record's backward the learner's walk calls, the engine reports to the ledger and frees the saved
    arrays at once, as its own walk does: the same FLOPs by phase, the same activation bytes moment by moment."""
    def profiled():
        mg.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16))
        idx = mg.randint(0, 11, (2, 8))
        with mg.profile() as prof:
            _, loss = model(idx, idx)
            loss.backward()
        return prof
    plain = profiled()
    with learner.use(SOLUTIONS, only={4}) as pieces:
        mine = profiled()
        assert pieces[0].ran == 1
    for phase in ("forward", "backward"):
        assert mine.flops(phase) == plain.flops(phase) > 0
    assert mine.peak_bytes("activations") == plain.peak_bytes("activations") > 0
    def activations(prof):  # (the gradients in flight differ: your walk holds them its own way)
        return [(row["op"], row["phase"], row["activations"]) for row in prof.timeline()]
    assert activations(mine) == activations(plain)


def _scaler_scales():
    """GradScaler on a run with injected infs: the scales and trackers after each update."""
    w = nn.Parameter(mg.tensor(np.ones(3, dtype=np.float32)))
    opt = mg.optim.SGD([w], lr=0.1)
    scaler = mg.amp.GradScaler(init_scale=2.0 ** 10, growth_factor=3.0, backoff_factor=0.25, growth_interval=2)
    trail = []
    for i in range(12):
        g = np.full(3, 0.5, dtype=np.float32)
        if i in (1, 2, 7):
            g[0] = np.inf
        w.grad = mg.tensor(g * scaler.get_scale(), device=w.device)
        scaler.step(opt)
        scaler.update()
        trail.append((scaler.get_scale(), scaler.state_dict()["_growth_tracker"]))
    return trail


def test_the_learners_scaler_rule_runs_inside_gradscaler_update(tmp_path):
    """Exercise 14's update_scale replaces GradScaler.update's rule: the reference gives the engine's scales; a
    rule that never backs off is the one that runs (the scale goes on growing through the infs)."""
    plain = _scaler_scales()
    assert len({s for s, _ in plain}) > 3  # it backed off and grew
    with learner.use(SOLUTIONS, only={14}) as pieces:
        assert _scaler_scales() == plain and pieces[0].ran == 12, learner.report(pieces)
    assert _scaler_scales() == plain  # put back
    wrong = open(os.path.join(SOLUTIONS, "14_loss_scale_and_step_bytes.py")).read().replace(
        "    if found_inf:\n        return", "    if False:\n        return")
    (tmp_path / "14_loss_scale_and_step_bytes.py").write_text(wrong)
    with learner.use(str(tmp_path), only={14}):
        assert _scaler_scales() != plain
