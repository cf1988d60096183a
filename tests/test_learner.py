"""Learner mode (minigrad/learner.py): the engine runs on the learner's exercise pieces where they are written.

What is checked, and against what:
  the references   with exercises/solutions plugged in, every piece runs, and a program that reaches all of them
                   (a GPT's training steps; an MLP with exp, log, pow, broadcasting matmuls, a checkpoint and
                   accumulation_step) ends with the engine's parameters bit for bit, once the engine's softmax sums
                   its rows in NumPy's order (backend/rows.py); with its BLAS row sums, within float32 rounding
  generated        seeded random programs of the ops exercises 1 to 5 cover, against the engine: float32 and
                   float64 bit for bit, with the ledger's FLOPs and activation bytes; float16 and bfloat16, where
                   the engine's own runs (it computes in float32 and rounds once); Pow's exponents one by one
  the stubs        exercises/ as shipped: every piece is a stub, nothing is swapped, the engine's own runs; a piece
                   written on a stub (8 on 7) falls back too, and the report names the one to write
  a broken piece   reported with its error and the check to run, and left out
  off again        use() puts back every function and method it swapped
  safety kept      the learner's walk refuses a saved array written in place, as the engine's does, and frees
                   the saved arrays after; a record a checkpoint's forward made gets the engine's error
  the ledger       the learner's walk is measured as the engine's (FLOPs, activations); the gradients it holds
                   count for as long as it holds them; an AdamW step's temporaries inside yours are not seen
  the engine's own what an exercise does not cover: AdamW's amsgrad and maximize, 2-byte parameters; an
                   accumulation loop's mean loss_fn (refused), float16 weights; a leaf that stopped requiring
                   grad or holds a float32 buffer; softmax's bad dims (refused); exercise 7's recompute replays
                   the generator (a dropout's masks)
  the command      python -m minigrad lesson 1 --learner FOLDER runs and says whose pieces ran
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad import learner, nn, ops
from minigrad.backend import rows
from minigrad.gpt import GPT, GPTConfig
from on_device import to_host

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
    scaler_rule = mg.amp.grad_scaler.amp_update_scale
    with learner.use(SOLUTIONS) as pieces:
        # the pieces sit in the table the engine reads (NOTE [learner's pieces]), and no class of the engine changes
        assert {"Softmax.forward", "Tensor.backward", "unbroadcast", "AdamW.step", "checkpoint",
                "amp_update_scale"} <= set(ops.LEARNED)
        assert (ops.Softmax, ops.LogSoftmax, ops.nn.Softmax, ops.Tanh.__dict__["backward"], ops.unbroadcast,
                ops.pointwise.unbroadcast, ops.Matmul.__dict__["backward"], mg.Tensor.__dict__["backward"],
                mg.checkpoint) == before[:9]
        assert mg.optim.AdamW.__dict__["step"] is before[10]
        assert mg.amp.grad_scaler.amp_update_scale is scaler_rule and mg.utils.checkpoint.checkpoint is mg.checkpoint
        assert all(p.yours for p in pieces if p.number != 7), learner.report(pieces)
    after = (ops.Softmax, ops.LogSoftmax, ops.nn.Softmax, ops.Tanh.__dict__["backward"], ops.unbroadcast,
             ops.pointwise.unbroadcast, ops.Matmul.__dict__["backward"], mg.Tensor.__dict__["backward"],
             mg.checkpoint, mg.accumulation_step, mg.optim.AdamW.__dict__["step"])
    assert after == before and not learner._active and not ops.LEARNED


def test_the_checkpoint_and_the_scalers_rule_are_yours_on_every_path_the_engine_has():
    """The engine's checkpoint and GradScaler.update ask the table (NOTE [learner's pieces]), so the learner's pieces
    run however a script reaches them: torch.utils.checkpoint's path too, which a function swapped into mg and
    minigrad.checkpoint never reached; a call the contract does not cover (an option) runs the engine's own."""
    from minigrad.utils.checkpoint import checkpoint as torch_style  # imported before use(), as a script does
    block = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    x = mg.randn(3, 4, requires_grad=True)
    with learner.use(SOLUTIONS) as pieces:
        mine = {p.number: p for p in pieces}
        seven = mine[8] if 8 in mine and mine[8].yours else mine[7]
        ran = seven.ran
        torch_style(block, x).sum().backward()
        mg.checkpoint(block, x).sum().backward()
        assert seven.ran == ran + 2, learner.report(pieces)
        fell = seven.fell_back
        mg.checkpoint(block, x, determinism_check="values").sum().backward()
        assert (seven.ran, seven.fell_back) == (ran + 2, fell + 1)
        scaler, ran14 = mg.amp.GradScaler(init_scale=4.0, growth_interval=1), mine[14].ran
        opt = mg.optim.SGD(block.parameters(), lr=0.1)
        scaler.scale(block(x).sum()).backward()
        scaler.step(opt)
        scaler.update()
        assert mine[14].ran == ran14 + 1 and scaler.get_scale() == 8.0
    assert not ops.LEARNED


def test_a_broken_piece_is_reported_and_left_out(tmp_path):
    (tmp_path / "02_unbroadcast.py").write_text("def unbroadcast(grad, shape):\n    return grad.sum(axis=5)\n")
    with learner.use(str(tmp_path)) as pieces:
        two = next(p for p in pieces if p.number == 2)
        assert two.state.startswith("broken:") and "check 2" in two.state
        assert ops.unbroadcast is ops.base.unbroadcast  # the engine's own
        assert next(p for p in pieces if p.number == 4).state == "missing"


WRONG_PIECES = {  # a piece that runs but gives something else than the engine's: (file, source, what the report says)
    "unbroadcast unchanged": ("02_unbroadcast.py", "def unbroadcast(grad, shape):\n    return grad\n",
                              r"exercise 2's unbroadcast\(a gradient of shape \(2, 2, 3\), \(1, 3\)\) gave shape "
                              r"\(2, 2, 3\) \(float32\); the engine's gives shape \(1, 3\) \(float32\)"),
    "unbroadcast averaged": ("02_unbroadcast.py", "def unbroadcast(grad, shape):\n    lead = grad.ndim - len(shape)\n"
                             "    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 "
                             "and grad.shape[lead + i] != 1)\n    return grad.mean(axis=axes).reshape(shape)\n",
                             r"exercise 2's unbroadcast\(.*\) gave .* at index .*; the engine's gives"),
    "matmul without unbroadcast": ("03_matmul_backward.py", "import numpy as np\ndef matmul_backward(g, a, b):\n"
                                   "    return g @ np.swapaxes(b, -1, -2), np.swapaxes(a, -1, -2) @ g\n",
                                   r"exercise 3's matmul_backward\(g, a, b\)'s gradient of b .* gave shape "
                                   r"\(2, 3, 2\)"),
    "tanh's backward wrong": ("01_elementwise_backward.py",
                              open(os.path.join(SOLUTIONS, "01_elementwise_backward.py")).read().replace(
                                  "(g * (1 - y * y),)", "(g * (1 - y),)"),
                              r"exercise 1's Tanh.backward gave .*; the engine's gives"),
}


@pytest.mark.parametrize("case", list(WRONG_PIECES))
def test_a_piece_that_gives_another_result_than_the_engines_is_refused_by_its_probe(tmp_path, case):
    """NOTE [the probe checks the result] (learner.py): once, an unbroadcast that gave the gradient back unchanged
    passed the probe (which ran it and looked at nothing), was reported as yours, and failed later inside backward:
    "a gradient must be ... shape (3,); got (4, 3)", naming neither exercise 2 nor `check 2`. Now the probe compares
    its result with the engine's: the piece is refused, the report names the exercise, what it gave, what the engine
    gives and the check to run, and the engine's own runs."""
    name, source, says = WRONG_PIECES[case]
    n = int(name[:2])
    (tmp_path / name).write_text(source)
    with learner.use(str(tmp_path)) as pieces:
        piece = next(p for p in pieces if p.number == n)
        assert piece.state.startswith("broken: ") and f"(python -m minigrad check {n})" in piece.state, piece.state
        assert re.search(says, piece.state), piece.state
        assert f"exercise {n:2d} {piece.what}: the engine's own (broken: exercise {n}'s" in learner.report(pieces)
        a, b = mg.randn(4, 3, requires_grad=True), mg.randn(3, requires_grad=True)
        ((a + b).tanh() @ mg.randn(3, 2)).sum().backward()  # the engine's own pieces: no error
        assert b.grad.shape == (3,) and piece.ran == 0


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
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")  # it runs in tmp_path: a relative PYTHONPATH (the stand-in's,
    # run by hand) would name another folder there, so its entries are made absolute, as tests/mpi_harness.py does
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)
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


# ----------------------------------------------------------------------------- generated programs

def _program(seed, dtype, exponents=(2, 3, 1.5, -2, -0.5)):
    """A seeded random program of the ops the exercises cover (exp, tanh, log, pow, broadcasting adds and products,
    matmuls of matrices, batches and a broadcast batch, softmax and log_softmax, a tensor used twice), run under
    mg.profile: [loss, each leaf's gradient] as arrays, and what the ledger counted."""
    r = np.random.default_rng(seed)
    plan = [(int(r.integers(0, 9)), int(r.integers(0, 1000))) for _ in range(int(r.integers(3, 8)))]
    mg.manual_seed(seed)
    x, w, b, wb = (mg.randn(*shape, dtype=dtype, requires_grad=True) for shape in ((2, 3, 4), (4, 4), (1, 4), (1, 4, 4)))
    with mg.profile() as prof:
        h = x
        for k, c in plan:
            if k == 0:
                h = h.exp() * 0.5
            elif k == 1:
                h = h.tanh()
            elif k == 2:
                h = (h * h + 1).log()
            elif k == 3:
                h = (h.abs() + 0.5) ** exponents[c % len(exponents)]
            elif k == 4:
                h = h + b if c % 2 else h * b
            elif k == 5:
                h = h @ (w, wb, w.expand(2, 4, 4) * 1)[c % 3]
            elif k == 6:
                h = h.softmax(dim=(-1, 1)[c % 2])
            elif k == 7:
                h = h.log_softmax(dim=-1)
            else:
                h = h * h.tanh() + h
        loss = (h * h).sum() if c % 2 else h.mean()
        loss.backward()
    arrays = [to_host(loss)] + [to_host(t.grad) for t in (x, w, b, wb)]
    ledger = ({phase: prof.flops(phase) for phase in ("forward", "backward")}, prof.peak_bytes("activations"),
              [(row["op"], row["phase"], row["activations"]) for row in prof.timeline()])
    return arrays, ledger


def _bitwise(mine, plain):
    return all(a is b if a is None or b is None else a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
               for a, b in zip(mine, plain))  # (None: a leaf the program did not use)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_generated_programs_give_the_engines_gradients_and_ledger_bit_for_bit(dtype, numpy_row_sums):
    """Every piece the programs reach (1 to 5) is the reference's: the loss and the gradients bit for bit, the FLOPs
    by phase and the activation bytes moment by moment as the engine's."""
    for seed in range(8):
        plain = _program(seed, dtype)
        with learner.use(SOLUTIONS, only={1, 2, 3, 4, 5}) as pieces:
            mine = _program(seed, dtype)
            assert all(p.ran for p in pieces if p.number in (2, 4)), learner.report(pieces)
        assert _bitwise(mine[0], plain[0]), f"seed {seed}"
        assert mine[1] == plain[1], f"seed {seed}"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_two_byte_float_runs_the_engines_own_pow_unbroadcast_matmul_and_softmax(dtype, numpy_row_sums):
    """The engine computes a 2-byte float's sums, products and softmax in float32 and rounds once (as PyTorch); the
    references, in the dtype itself, gave other numbers (and bfloat16's matmul and power a float32 gradient)."""
    for seed in range(8):
        with np.errstate(over="ignore", invalid="ignore"):  # float16's range ends at 65504: two seeds reach inf
            plain = _program(seed, dtype, exponents=(2, 3, -2))
            with learner.use(SOLUTIONS, only={1, 2, 3, 5}) as pieces:
                mine = _program(seed, dtype, exponents=(2, 3, -2))
        assert _bitwise(mine[0], plain[0]), f"seed {seed}"
        assert any(p.fell_back for p in pieces if p.number == 2), learner.report(pieces)

    def power():  # a bfloat16 x ** 1.5: the reference's gradient was float32's x ** 0.5, the engine's rounds it first
        x = mg.tensor(np.linspace(0.5, 3, 40, dtype=np.float32), dtype=dtype, requires_grad=True)
        ((x ** 1.5) ** 1.5).sum().backward()  # (the engine's outer Pow hands the inner a float32 gradient)
        return [to_host(x.grad)]
    plain = power()
    with learner.use(SOLUTIONS, only={1}) as pieces:
        assert _bitwise(power(), plain) and pieces[0].fell_back == 2
        x = mg.randn(5, dtype=dtype, requires_grad=True)  # exp, log: the reference's, as the engine's, in any dtype;
        x.exp().tanh().sum().backward()  # a 2-byte tanh's g (1 - y^2): the engine's, in float32 and rounded once
        assert (pieces[0].ran, pieces[0].fell_back) == (1, 3)


@pytest.mark.parametrize("p", [0, 2, 3, 1.5, -2, -0.5, 4, -1, 0.5])
def test_pow_gives_the_engines_gradient(p):
    """x ** 0's gradient is 0, also at x = 0 (the engine's and PyTorch's), where the formula p * x ** (p - 1) is
    0 * inf = NaN: the engine's own. Where the engine takes x ** (p - 1) as PyTorch does, by products and a square
    root (p - 1 = 3, -2, -0.5), the reference's NumPy power may differ in the last bit: the docstring says so."""
    x_host = np.concatenate([[0.0] if p == 0 else [], np.linspace(0.5, 3, 40)]).astype(np.float32)

    def gradient():
        x = mg.tensor(x_host, requires_grad=True)
        (x ** p).sum().backward()
        return to_host(x.grad)
    plain = gradient()
    with learner.use(SOLUTIONS, only={1}) as pieces:
        mine = gradient()
        assert pieces[0].ran + pieces[0].fell_back == 1
    if p in (4, -1, 0.5):
        np.testing.assert_array_max_ulp(mine, plain, maxulp=1)
    else:
        assert np.array_equal(mine, plain), (mine, plain)


def test_the_ledger_counts_the_gradients_your_walk_holds(tmp_path):
    """The engine frees saved arrays and tells the ledger around each record your walk runs (the same activations
    as the engine's), but the gradients in flight are your walk's: a walk that holds every gradient to the end
    shows them in 'transient' (the docstring: the total's peak may come out higher under yours)."""
    def profiled():
        mg.manual_seed(0)
        x = mg.randn(64, 64, requires_grad=True)
        with mg.profile() as prof:
            h = x
            for _ in range(6):
                h = h.tanh()
            h.sum().backward()
        return prof.peak_bytes("transient"), prof.peak_bytes("activations"), to_host(x.grad)
    plain = profiled()
    with learner.use(SOLUTIONS, only={4}):
        mine = profiled()
    hoarding = open(os.path.join(SOLUTIONS, "04_the_tape.py")).read().replace(
        "        for nxt, gi in zip(record.next, record.backward(g)):",
        "        held.append(g)\n        for nxt, gi in zip(record.next, record.backward(g)):").replace(
        "    for record in records:", "    held = []\n    for record in records:")
    assert "held.append" in hoarding
    (tmp_path / "04_the_tape.py").write_text(hoarding)
    with learner.use(str(tmp_path), only={4}) as pieces:
        hoarded = profiled()
        assert pieces[0].ran == 1
    assert mine[1] == hoarded[1] == plain[1]  # activations: as the engine's walk frees them
    assert np.array_equal(mine[2], plain[2]) and np.array_equal(hoarded[2], plain[2])
    # six gradients held at once, where the engine's walk holds at most its gradient in, the one out and the
    # temporaries of one tanh backward (the ledger counts those as they are made: NOTE [every array an op makes])
    assert hoarded[0] >= 6 * 64 * 64 * 4 > plain[0]


def test_a_piece_that_builds_on_a_stub_falls_back_and_says_which(tmp_path):
    """Exercise 8 written on exercise 7's stub: the engine's checkpoint runs, and report() names exercise 7; the
    pieces written run (here 2), the stubs fall back, and the results are the engine's."""
    for name in os.listdir(STUBS):
        if name[:2].isdigit():
            src = SOLUTIONS if name[:2] in ("02", "08") else STUBS
            (tmp_path / name).write_text(open(os.path.join(src, name)).read())
    plain = _net_steps(1)
    with learner.use(str(tmp_path)) as pieces:
        mine = _net_steps(1)
        text = learner.report(pieces)
    state = {p.number: p.state for p in pieces}
    assert state[8].startswith("stub: it builds on exercise 7") and "check 7" in state[8], text
    assert state[2] == "yours" and state[7] == "stub" and state[4] == "stub", text
    assert "exercise  8 checkpoint with the generator replayed: the engine's own (stub: it builds on exercise 7" in text
    assert "exercise  4 the tape walk (backward): the engine's own (stub)" in text
    assert mine[0] == plain[0] and all(np.array_equal(a, b) for a, b in zip(mine[1], plain[1]))


def test_a_record_made_in_a_checkpoints_forward_gets_the_engines_error():
    """A checkpointed function that hides its output in an object of its own: the record behind it kept nothing.
    The engine's walk says so and what to do; the learner's walk, handed it, failed on an empty unpacking."""
    class Box:
        def __init__(self, t):
            self.t = t
    with learner.use(SOLUTIONS, only={4}):
        x = mg.randn(3, requires_grad=True)
        box = mg.checkpoint(lambda x: Box(x.tanh() * 2), x)
        with pytest.raises(RuntimeError, match="recorded inside a checkpoint's forward"):
            (box.t * 1).sum().backward()


def _accumulated(loss_fn, dtype="float32"):
    mg.manual_seed(0)
    model = nn.Linear(6, 5).to(dtype)
    opt = mg.optim.SGD(model.parameters(), lr=0.1)
    x, y = mg.randn(8, 6, dtype=dtype), mg.randint(0, 5, (8,))
    result = mg.accumulation_step(model, loss_fn, opt, x, y, micro_batch_size=4)
    return result, [to_host(p) for p in model.parameters()], [p.grad.dtype.name for p in model.parameters()]


def test_the_learners_accumulation_loop_keeps_the_engines_refusal_and_float16_buffers():
    """A loss_fn that averages its micro-batch: the engine refuses it (its gradient would come out too small by the
    number of micro-batches); under the reference's loop it trained, silently, at half the gradient. float16
    parameters: the engine sums their gradients in float32 buffers; the reference's loop, in float16."""
    def mean(out, target):
        return mg.functional.cross_entropy(out, target)

    def summed(out, target):
        return mg.functional.cross_entropy(out.float(), target, reduction="sum")
    plain = _accumulated(summed, "float16")
    with learner.use(SOLUTIONS, only={11}) as pieces:
        with pytest.raises(ValueError, match="returned a mean over its micro-batch"):
            _accumulated(mean)
        mine = _accumulated(summed, "float16")
        text = learner.report(pieces)
    assert mine[0] == plain[0] and mine[2] == plain[2] == ["float32", "float32"]
    assert all(np.array_equal(a, b) for a, b in zip(mine[1], plain[1]))
    assert text.endswith("(the engine's own 1 times, for what the exercise does not cover)"), text


def _adamw_steps(dtype="float32", **options):
    """Four AdamW steps on two groups (one parameter skips a step: its own count), under mg.profile."""
    mg.manual_seed(0)
    a, b = nn.Parameter(mg.randn(16, 8, dtype=dtype)), nn.Parameter(mg.randn(3, dtype=dtype))
    opt = mg.optim.AdamW([{"params": [a]}, {"params": [b], "lr": 3e-3, "betas": (0.8, 0.99), "eps": 1e-6}],
                         lr=1e-2, weight_decay=0.01, **options)
    with mg.profile() as prof:
        for i in range(4):
            opt.zero_grad()
            a.grad = mg.randn(*a.shape, dtype=dtype)
            if i != 1:
                b.grad = mg.randn(3, dtype=dtype)
            opt.step()
    return [to_host(a), to_host(b)], [(row["op"], row["optimizer"]) for row in prof.timeline()], prof


@pytest.mark.parametrize("dtype, options", [("float32", {"amsgrad": True}), ("float32", {"maximize": True}),
                                            ("bfloat16", {}), ("float32", {})])
def test_the_learners_adamw_gives_the_engines_steps(dtype, options):
    """amsgrad and maximize: the engine's own step (it crashed: the fallback looked for a __wrapped__ that
    optim._reported deletes). bfloat16: the engine's own (the reference's (1 - b1) * g is float32 in NumPy, the
    engine's rounds to bfloat16: other parameters). The optimizer's bytes, event by event, as the engine's. A step's
    temporaries made inside your function the ledger cannot see (the engine's step reports its scratch arrays):
    'transient' peaks lower under yours, as the docstring says."""
    plain = _adamw_steps(dtype, **options)
    with learner.use(SOLUTIONS, only={12}) as pieces:
        mine = _adamw_steps(dtype, **options)
    assert all(np.array_equal(x, y) for x, y in zip(mine[0], plain[0]))
    assert mine[1] == plain[1]
    assert (pieces[0].ran, pieces[0].fell_back) == ((4, 0) if dtype == "float32" and not options else (0, 4))
    if pieces[0].ran:
        assert mine[2].peak_bytes("transient") < plain[2].peak_bytes("transient")


def test_exercise_sevens_checkpoint_recomputes_a_dropout_with_the_forwards_masks():
    """Exercise 7's checkpoint (8 not written) of a segment with a dropout: its recompute drew other masks than the
    forward, and the gradients came out wrong without a word (by up to 4 on this one). The engine now replays the
    generator around it (exercise 8's part), as mg.checkpoint does."""
    def gradients():
        mg.manual_seed(0)
        segment = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5), nn.Linear(6, 6))
        x = mg.randn(4, 6, requires_grad=True)
        y = mg.checkpoint(segment, x)
        (y * mg.randn(4, 6)).sum().backward()  # a draw after the checkpoint: the replay puts the generator back
        return [to_host(p.grad) for p in segment.parameters()] + [to_host(x.grad)]
    plain = gradients()
    with learner.use(SOLUTIONS, only={7}) as pieces:
        mine = gradients()
        assert pieces[0].ran == 1
    assert all(np.array_equal(a, b) for a, b in zip(mine, plain))


def test_a_leaf_that_stopped_requiring_grad_gets_no_gradient_from_the_learners_walk():
    """x.requires_grad_(False) after the forward: the engine's walk, as PyTorch's, gives x no .grad; the learner's
    walk, handed the graph, gave it one."""
    with learner.use(SOLUTIONS, only={4}):
        w, x = mg.randn(3, requires_grad=True), mg.randn(3, requires_grad=True)
        y = (w * x).sum()
        x.requires_grad_(False)
        y.backward()
        assert x.grad is None and np.array_equal(to_host(w.grad), to_host(x))


def test_the_learners_walk_leaves_the_float32_buffers_of_float16_weights_to_the_engine():
    """accumulate gives float16 weights float32 .grad buffers, which the engine's walk adds into; the reference's walk
    (a .grad in the leaf's dtype, its contract) made them float16 again: other weights, and grad_dtype 'float32'
    said of float16 gradients."""
    def summed(out, target):
        return mg.functional.cross_entropy(out.float(), target, reduction="sum")
    plain = _accumulated(summed, "float16")
    with learner.use(SOLUTIONS, only={4}):
        mine = _accumulated(summed, "float16")
    assert mine[2] == plain[2] == ["float32", "float32"] and mine[0] == plain[0]
    assert all(np.array_equal(a, b) for a, b in zip(mine[1], plain[1]))


@pytest.mark.parametrize("dim", [(1,), True, 5])
def test_the_learners_softmax_keeps_the_engines_refusals_of_a_dim(dim):
    """softmax(dim=(1,)) ran under the reference (NumPy takes a tuple of axes) where the engine and PyTorch refuse
    it; a bool or a dim out of range got NumPy's words, without the op's name, the shape or the range."""
    x = mg.randn(2, 3)
    with pytest.raises((TypeError, IndexError)) as plain:
        x.softmax(dim)
    with learner.use(SOLUTIONS, only={5}):
        with pytest.raises(type(plain.value)) as mine:
            x.softmax(dim)
    assert str(mine.value) == str(plain.value)
