"""The ledger (mg.profile): bytes by category, FLOPs by phase and op, the timeline and the table.

What is checked, and against what:
  closed forms    minigrad/formulas.py, derived by hand: activation bytes and matmul FLOPs are equal (==)
  one buffer      a buffer saved twice, or viewed, counts once; a saved weight stays a parameter
  categories      parameters, optimizer, gradients, activations, transient against sums of nbytes
  the allocator   the ledger's peak against tracemalloc's (CPU) and CuPy's pool (GPU)
  no leaks        200 training steps: nothing grows but the timeline
  no effect       gradients with and without a profile are bit-identical
  no quiet lies   every op has a FLOP formula; an op without one raises under a profile
  the docs        docs/ledger.md's FLOP table equals ops.flops_table()

Parameters, gradients and optimizer state alive when a block starts count too (a feature, tested
below). So that what other tests left alive cannot change exact sums here, exact checks measure
from the block's 'start' event (the first of prof.timeline()), after a gc.collect().

Bugs found while writing these are kept as tests near the end.
"""
import contextlib
import gc
import importlib
import math
import os
import re
import tracemalloc

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import formulas, nn, ops, optim, profiler
from minigrad.gpt import GPT, CausalSelfAttention, GPTConfig
from minigrad.profiler import CATEGORIES, PHASES, format_bytes, format_flops
from minigrad.tensor import apply

tape = importlib.import_module("minigrad.tensor")  # the module: `minigrad.tensor` as an attribute is mg.tensor()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ON_CPU = mg.default_device() == "cpu"
cpu_only = pytest.mark.skipif(not ON_CPU, reason="tracemalloc sees NumPy's buffers only: a cpu check "
                                                 "(on cuda, test_cupy_pool_peak_matches_ledger is the check)")


@pytest.fixture(autouse=True)
def _collect():
    gc.collect()  # garbage from earlier tests would count as alive at 'start', then die mid-block
    yield  # (conftest checks that the test left no profile active)


# ----------------------------------------------------------------------------- helpers

def mlp(sizes, bias=True, device=None):
    """Linear -> Tanh for every layer (the model that formulas.mlp_* describe)."""
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b, bias=bias, device=device), nn.Tanh()]
    return nn.Sequential(*layers)


def nbytes(tensors):
    return sum(t.data.nbytes for t in tensors)


def at_start(prof, category=None):
    """Bytes the ledger found alive when the block began (its 'start' event)."""
    first = prof.timeline()[0]
    assert first["op"] == "start"
    return first["total"] if category is None else first[category]


def grown(prof, category=None):
    """Live bytes in `category` now, less what was alive at the start of the block."""
    return prof.current_bytes(category) - at_start(prof, category)


def t64(*shape, positive=False, requires_grad=True):
    a = np.random.rand(*shape) + 0.5 if positive else np.random.randn(*shape)
    return mg.tensor(a, dtype="float64", requires_grad=requires_grad)


# ----------------------------------------------------------------------------- 1. closed forms

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("input_requires_grad", [False, True])
def test_mlp_activations_and_matmul_flops_equal_closed_forms(dtype, input_requires_grad):
    sizes, batch = [16, 32, 32, 8], 5
    model = mlp(sizes).to(dtype)
    x = mg.randn(batch, sizes[0], dtype=dtype, requires_grad=input_requires_grad)
    itemsize = np.dtype(dtype).itemsize
    with mg.profile() as prof:
        out = model(x).sum()
        after_forward = grown(prof, "activations")
        out.backward()
    fwd, bwd = formulas.mlp_matmul_flops(batch, sizes, input_requires_grad=input_requires_grad)
    assert after_forward == formulas.mlp_saved_bytes(batch, sizes, itemsize)
    assert prof.peak_bytes("activations") - at_start(prof, "activations") == formulas.mlp_saved_bytes(
        batch, sizes, itemsize)
    assert prof.flops("forward", op="matmul") == fwd
    assert prof.flops("backward", op="matmul") == bwd
    # the first layer's dx is exactly what the input's requires_grad adds to backward
    first_layer = 2 * batch * sizes[0] * sizes[1]
    assert bwd == 2 * fwd - (0 if input_requires_grad else first_layer)
    assert (x.grad is not None) == input_requires_grad


@pytest.mark.parametrize("batch_shape", [(7,), (3, 4)], ids=["2d-input", "3d-input"])
@pytest.mark.parametrize("input_requires_grad", [False, True])
def test_linear_without_bias_matmul_flops(batch_shape, input_requires_grad):
    n_in, n_out = 6, 5
    lin = nn.Linear(n_in, n_out, bias=False)
    x = mg.randn(*batch_shape, n_in, requires_grad=input_requires_grad)
    with mg.profile() as prof:
        lin(x).sum().backward()
    n = math.prod(batch_shape)
    assert prof.flops("forward", op="matmul") == 2 * n * n_in * n_out
    assert prof.flops("forward", op="add") == 0  # no bias, no adds
    # dW always; dx only when the input needs it
    assert prof.flops("backward", op="matmul") == 2 * n * n_in * n_out * (2 if input_requires_grad else 1)
    assert prof.flops("forward", op="sum") == n * n_out - 1   # the loss
    assert prof.flops("backward", op="sum") == 0              # no bias to sum a gradient for
    assert prof.flops(op="linear") == 0                       # linear's FLOPs are reported as matmul


@pytest.mark.parametrize("B,T", [(2, 8), (3, 5)])
@pytest.mark.parametrize("n_head", [1, 4, 8])
def test_attention_matmul_flops_equal_closed_form(B, T, n_head):
    C = 32
    attn = CausalSelfAttention(GPTConfig(n_embd=C, n_head=n_head))
    x = mg.randn(B, T, C)
    with mg.profile() as prof:
        attn(x)
    assert prof.flops("forward", op="matmul") == formulas.attention_matmul_flops(B, T, C)
    assert prof.calls("forward", "linear") == 2 and prof.calls("forward", "matmul") == 2  # 2 projections, 2 products


@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)], ids=["both", "a", "b"])
def test_plain_matmul_flops(needs):
    m, k, n = 3, 4, 5
    a = mg.randn(m, k, requires_grad=needs[0])
    b = mg.randn(k, n, requires_grad=needs[1])
    with mg.profile() as prof:
        c = a @ b
        c.backward(mg.ones(m, n))
    assert prof.flops("forward", op="matmul") == 2 * m * k * n
    assert prof.flops("backward", op="matmul") == 2 * m * k * n * sum(needs)
    assert prof.flops() == 2 * m * k * n * (1 + sum(needs))  # nothing else ran
    assert prof.calls("forward", "matmul") == 1 and prof.calls("backward", "matmul") == 1


# ----------------------------------------------------------------------------- 2. one buffer, one category

def test_output_saved_by_two_ops_counts_once():
    x = t64(3, 4)
    w = t64(3, 4)
    w2 = t64(3, 4)
    with mg.profile() as prof:
        y = x.tanh()            # tanh saves y
        z = y * w               # mul saves y (w needs grad) and w (y needs grad)
        z2 = y * w2             # and again: y, w2
        # by hand: y once, w, w2; nothing else is saved (x is not: tanh saves its output)
        assert grown(prof, "activations") == y.data.nbytes + w.data.nbytes + w2.data.nbytes
        (z + z2).sum().backward()
    assert grown(prof, "activations") == 0


def test_view_of_saved_array_adds_nothing():
    with mg.profile() as prof:
        x = t64(3, 4)
        w = t64(12)
        y = x.tanh()
        total, activations = prof.current_bytes(), prof.current_bytes("activations")
        v = y.reshape(12)                               # a view of y's buffer
        assert v.data.base is not None
        assert prof.current_bytes() == total            # the view is no new buffer
        z = v * w                                       # saves the view v (and w)
        assert prof.current_bytes("activations") - activations == w.data.nbytes
        assert grown(prof, "activations") == y.data.nbytes + w.data.nbytes
        assert prof.current_bytes() == total + z.data.nbytes  # w was counted already: only z is new
        z.sum().backward()
    assert grown(prof, "activations") == 0


def test_weight_saved_by_linear_stays_a_parameter():
    lin = nn.Linear(6, 4, bias=False)
    x = mg.randn(5, 6, requires_grad=True)   # so linear saves W too, for dx = g W
    for scope in ((lin,), ()):  # counted from the start, or found in use by the linear (as alive since the start)
        with mg.profile(*scope) as prof:
            params = prof.current_bytes("parameters")
            y = lin(x)
            assert y.grad_fn.saved[1] is lin.weight.data      # W really is saved
            assert grown(prof, "activations") == x.data.nbytes  # only x counts as an activation
            assert prof.current_bytes("parameters") == lin.weight.data.nbytes
            assert params == (lin.weight.data.nbytes if scope else 0)
            assert at_start(prof, "parameters") == lin.weight.data.nbytes  # W was alive at start: counted there
            assert prof.peak_bytes("activations") == x.data.nbytes         # ... and never as an activation
            y.sum().backward()


# ----------------------------------------------------------------------------- 3. categories

def test_parameters_of_a_model_built_inside_the_block():
    with mg.profile() as prof:
        model = mlp([10, 20, 30, 5])
        assert grown(prof, "parameters") == nbytes(model.parameters())
        gpt = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8))
        # GPT's init replaces arrays (p.data = ...): the old ones die, the new ones count
        assert grown(prof, "parameters") == nbytes(model.parameters()) + nbytes(gpt.parameters())
        del gpt
    assert grown(prof, "parameters") == nbytes(model.parameters())


def _trained_mlp_and_adamw():
    model = mlp([10, 20, 5])
    opt = optim.AdamW(model.parameters())
    model(mg.randn(4, 10)).sum().backward()
    opt.step()
    return model, opt


def test_modules_and_optimizers_given_count_from_the_start():
    model, opt = _trained_mlp_and_adamw()
    params = nbytes(model.parameters())
    with mg.profile(model, opt) as prof:
        assert prof.current_bytes("parameters") == params
        assert prof.current_bytes("gradients") == nbytes(p.grad for p in model.parameters()) == params
        assert prof.current_bytes("optimizer") == 2 * params
        assert prof.current_bytes() == 4 * params
        # ... and they leave the ledger when they die inside the block
        opt.zero_grad()
        assert prof.current_bytes("gradients") == 0
        del opt
        assert prof.current_bytes("optimizer") == 0
        del model
        assert prof.current_bytes("parameters") == 0
    assert prof.peak_bytes() == 4 * params
    with pytest.raises(TypeError, match="profile: counts modules, optimizers and tensors"):
        mg.profile("model")


def test_what_was_alive_counts_only_when_the_block_uses_it():
    model, opt = _trained_mlp_and_adamw()
    params = nbytes(model.parameters())
    unrelated = nn.Linear(1024, 1024)  # 4 MiB in a notebook's other cell: none of this block's business
    with mg.profile() as idle:
        pass
    assert idle.peak_bytes() == 0
    tiny = nn.Linear(4, 4)             # 80 bytes
    with mg.profile() as prof:
        tiny(mg.randn(2, 4))
    assert prof.peak_bytes("parameters") == nbytes(tiny.parameters()) == 80
    with mg.profile() as prof:         # steps the optimizer: its parameters, gradients and state were there all along
        opt.step()
    assert at_start(prof, "parameters") == params and at_start(prof, "optimizer") == 2 * params
    assert at_start(prof, "gradients") == params
    largest = max(p.data.nbytes for p in model.parameters())  # AdamW's two temporaries, for its largest parameter
    assert prof.peak_bytes() == 4 * params + 2 * largest and prof.bytes_at_peak()["optimizer"] == 2 * params
    assert all(e["total"] == 4 * params for e in prof.timeline())  # after each event, the temporaries are gone
    del unrelated


def test_parameters_found_in_use_count_as_alive_since_the_start():
    model, _ = _trained_mlp_and_adamw()
    model.zero_grad()
    x = mg.randn(4, 10)
    with mg.profile(model) as given:
        model(x).sum().backward()
    model.zero_grad()
    with mg.profile() as found:
        model(x).sum().backward()
    assert found.timeline() == given.timeline()
    assert found.peak_bytes() == given.peak_bytes() and found.bytes_at_peak() == given.bytes_at_peak()
    assert {c: found.peak_bytes(c) for c in CATEGORIES} == {c: given.peak_bytes(c) for c in CATEGORIES}


def test_every_gradient_set_counts_however_it_is_set():
    lin = nn.Linear(8, 8)
    with mg.profile() as prof:
        lin.weight.grad = mg.zeros(8, 8)  # by hand, as a user or a new feature might
        assert prof.current_bytes("gradients") == 8 * 8 * 4
    with pytest.raises(ValueError, match="grad: a gradient must be a float tensor of this tensor's shape"):
        lin.weight.grad = mg.zeros(4, 8)
    with pytest.raises(TypeError, match="grad: expected a Tensor"):
        lin.weight.grad = np.zeros((8, 8), np.float32)


def test_a_new_optimizer_cannot_bypass_the_ledger():
    class Lion(optim.Optimizer):  # keeps its state its own way: no _state_buffer, no hook
        def __init__(self, params, lr=1e-4):
            super().__init__(params, dict(lr=lr))

        def step(self):
            for p in self.params:
                st = self.state.setdefault(p, {})
                if "m" not in st:
                    st["m"] = mg.zeros_like(p)  # a Tensor, as PyTorch keeps state
                m = st["m"].data
                p.data = p.data - 1e-4 * np.sign(m + p.grad.data)
                m *= 0.9

    model = mlp([6, 5])
    opt = Lion(model.parameters())
    with mg.profile() as prof:
        model(mg.randn(3, 6)).sum().backward()
        opt.step()
    assert prof.current_bytes("optimizer") == nbytes(model.parameters())
    assert [e["op"] for e in prof.timeline()].count("optimizer_state") == 2


def test_graph_recorded_before_the_block_is_not_counted():
    # profiler/ledger.py: "a graph recorded before the block does not [count] (start the profile before the
    # forward pass)". Its backward inside the block must then release nothing it never counted.
    model = mlp([10, 20, 5])
    loss = model(mg.randn(4, 10)).sum()
    with mg.profile() as prof:
        assert grown(prof, "activations") == 0
        loss.backward()
        assert grown(prof, "gradients") == nbytes(model.parameters())
    assert grown(prof, "activations") == 0
    assert all(e[c] >= 0 for e in prof.timeline() for c in CATEGORIES)
    assert prof.flops("backward", "matmul") == formulas.mlp_matmul_flops(4, [10, 20, 5])[1]


def test_gradients_after_backward_and_zero_grad():
    model = mlp([8, 16, 4])
    x = mg.randn(3, 8)
    with mg.profile() as prof:
        model(x).sum().backward()
        assert grown(prof, "gradients") == nbytes(p.grad for p in model.parameters())
        assert grown(prof, "gradients") == nbytes(model.parameters())
        model(x).sum().backward()  # accumulates in place: no new gradient bytes
        assert grown(prof, "gradients") == nbytes(model.parameters())
        model.zero_grad()          # set_to_none: the arrays die
        assert grown(prof, "gradients") == 0
    assert prof.peak_bytes("gradients") - at_start(prof, "gradients") == nbytes(model.parameters())


@pytest.mark.parametrize("make,factor", [
    (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), 1),
    (lambda ps: optim.AdamW(ps, lr=0.1), 2),
    (lambda ps: optim.SGD(ps, lr=0.1), 0),
], ids=["sgd-momentum", "adamw", "sgd-plain"])
def test_optimizer_state_bytes(make, factor):
    model = mlp([8, 16, 4])
    opt = make(model.parameters())
    x = mg.randn(3, 8)
    with mg.profile() as prof:
        model(x).sum().backward()
        assert grown(prof, "optimizer") == 0      # state is made on the first step
        opt.step()
        assert grown(prof, "optimizer") == factor * nbytes(model.parameters())
        assert grown(prof, "optimizer") == opt.state_bytes()
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()                                # the second step makes nothing new
        assert grown(prof, "optimizer") == factor * nbytes(model.parameters())


def test_activations_drain_and_transient_during_forward():
    model = mlp([8, 16, 16, 4])
    x = mg.randn(3, 8)
    with mg.profile() as prof:
        loss = model(x).sum()
        assert grown(prof, "activations") > 0
        loss.backward()
        assert grown(prof, "activations") == 0
    assert prof.peak_bytes("transient") > at_start(prof, "transient")
    forward = [e for e in prof.timeline() if e["phase"] == "forward"]
    assert max(e["transient"] for e in forward) > at_start(prof, "transient")


def test_no_grad_forward_holds_only_its_output():
    model = mlp([8, 16, 16, 4])
    x = mg.randn(3, 8)
    with mg.profile() as prof:
        with mg.no_grad():
            y = model(x)
        assert grown(prof, "activations") == 0               # nothing recorded, nothing saved
        assert grown(prof, "transient") == y.data.nbytes     # the intermediates died; y is alive
        assert prof.peak_bytes("activations") == at_start(prof, "activations")


def test_dropped_graph_releases_its_activations():
    model = mlp([8, 16, 16, 4])
    x = mg.randn(3, 8)
    with mg.profile() as prof:
        out = model(x)
        assert grown(prof, "activations") == formulas.mlp_saved_bytes(3, [8, 16, 16, 4])
        del out                  # no backward: the records die, and with them the saved arrays
        assert grown(prof, "activations") == 0
        assert grown(prof, "transient") == 0


def test_totals_are_sums_of_categories():
    model = mlp([8, 16, 4])
    opt = optim.AdamW(model.parameters())
    x = mg.randn(3, 8)
    with mg.profile() as prof:
        loss = model(x).sum()
        assert prof.current_bytes() == sum(prof.current_bytes(c) for c in CATEGORIES)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert prof.current_bytes() == prof.current_bytes(None) == sum(prof.current_bytes(c) for c in CATEGORIES)
    assert prof.current_bytes() == prof.timeline()[-1]["total"]
    peaks = [prof.peak_bytes(c) for c in CATEGORIES]
    assert max(peaks) <= prof.peak_bytes() == prof.peak_bytes(None) <= sum(peaks)
    assert prof.peak_bytes() >= max(e["total"] for e in prof.timeline())
    for c in CATEGORIES:
        assert prof.peak_bytes(c) >= max(e[c] for e in prof.timeline())
    assert prof.flops() == sum(prof.flops(p) for p in PHASES)
    assert prof.flops("recompute") == 0  # no checkpointing here


def test_unknown_category_or_phase_raises_naming_the_valid_ones():
    with mg.profile() as prof:
        pass
    for method in (prof.peak_bytes, prof.current_bytes):
        with pytest.raises(ValueError) as e:
            method("weights")
        assert "weights" in str(e.value) and all(c in str(e.value) for c in CATEGORIES)
    with pytest.raises(ValueError) as e:
        prof.flops("sideways")
    assert "sideways" in str(e.value) and all(p in str(e.value) for p in PHASES)


# ----------------------------------------------------------------------------- 4. the allocator (tracemalloc)

@contextlib.contextmanager
def traced():
    """tracemalloc's peak and current, from the start of the block, in bytes (results filled on exit)."""
    was_tracing = tracemalloc.is_tracing()
    gc.collect()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    result = {}
    try:
        yield result
    finally:
        current, peak = tracemalloc.get_traced_memory()
        result.update(peak=peak - base, current=current - base)
        if not was_tracing:
            tracemalloc.stop()


def _mlp_setup():
    model = mlp([256] * 7)                      # 6 layers, 256 wide
    x = mg.randn(64, 256)
    return model, optim.AdamW(model.parameters(), lr=1e-3), lambda: model(x).sum()


def _gpt_setup():
    model = GPT(GPTConfig(vocab_size=64, block_size=64, n_layer=2, n_head=4, n_embd=128))
    idx, targets = mg.randint(0, 64, (8, 64)), mg.randint(0, 64, (8, 64))
    return model, optim.AdamW(model.parameters(), lr=1e-3), lambda: model(idx, targets)[1]


@cpu_only
@pytest.mark.parametrize("setup", [_mlp_setup, _gpt_setup], ids=["mlp", "gpt"])
def test_peak_agrees_with_tracemalloc(setup):
    with traced() as allocator:
        with mg.profile() as prof:
            model, opt, loss_fn = setup()       # built inside: its bytes are in both counts
            for _ in range(2):
                loss = loss_fn()
                opt.zero_grad()
                loss.backward()
                opt.step()
    ledger = prof.peak_bytes() - at_start(prof)  # tracemalloc sees only what was allocated after it started
    ratio = ledger / allocator["peak"]
    assert abs(1 - ratio) <= 0.15, (f"ledger peak {format_bytes(ledger)}, tracemalloc peak "
                                    f"{format_bytes(allocator['peak'])}, ratio {ratio:.3f}\n{prof.table()}")
    # the model and the optimizer alone are a large, exactly known part of that peak
    assert ledger >= 4 * nbytes(model.parameters())  # parameters, two moments, gradients


STEPS = {  # every branch of each optimizer's arithmetic (NOTE [a step's temporaries], optim/optimizer.py)
    "SGD": lambda ps: optim.SGD(ps, lr=0.1),
    "SGD momentum, weight decay": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
    "SGD nesterov, maximize": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, maximize=True),
    "AdamW": lambda ps: optim.AdamW(ps, lr=1e-3),
    "AdamW amsgrad, maximize": lambda ps: optim.AdamW(ps, lr=1e-3, amsgrad=True, maximize=True),
    "Adafactor": lambda ps: optim.Adafactor(ps),
    "Adafactor beta1, weight decay": lambda ps: optim.Adafactor(ps, lr=1e-3, relative_step=False, beta1=0.9,
                                                                weight_decay=0.01),
    "AdamW8bit": lambda ps: optim.AdamW8bit(ps, lr=1e-3),
}


@cpu_only
@pytest.mark.parametrize("name, dtype", [(name, "float32") for name in sorted(STEPS)] +
                         [(name, "float16") for name in ("Adafactor", "AdamW8bit")])  # these two step in float32
def test_a_steps_temporaries_are_counted_as_tracemalloc_sees_them(name, dtype):
    """The bytes a step holds beyond what was there before it (the state it makes on its first step, and the
    temporaries of its arithmetic), the ledger's against tracemalloc's, within 3% of the largest parameter and
    128 KiB (NumPy's reduction buffers and the state's Python objects): one parameter-sized temporary the ledger
    missed is 100% of it (a float16 parameter's upcast copy, 200%)."""
    mg.manual_seed(0)
    params = [mg.nn.Parameter(mg.randn(*shape).to(dtype)) for shape in [(600, 2200), (2200,), (2, 300, 2200)]]
    opt = STEPS[name](params)
    largest = max(p.data.nbytes for p in params)
    for step in (1, 2):
        for p in params:
            p.grad = (mg.randn(*p.shape) * 1e-2).to(dtype)
        with traced() as allocator:
            with mg.profile(opt) as prof:
                opt.step()
        ledger = prof.peak_bytes() - at_start(prof)
        assert abs(ledger - allocator["peak"]) <= 0.03 * largest + 2 ** 17, \
            f"{name}, step {step}: the ledger's peak {ledger / largest:.3f}, tracemalloc's {allocator['peak'] / largest:.3f} " \
            f"times the largest parameter's bytes"


# ----------------------------------------------------------------------------- 5. no leaks

@cpu_only
def test_no_leaks_over_200_steps():
    model = mlp([8, 16, 16, 4])
    opt = optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    x, y = mg.randn(4, 8), mg.randn(4, 4)
    ledger_files = os.path.join(os.path.dirname(profiler.__file__), "*")  # the package minigrad/profiler/
    others = [tracemalloc.Filter(False, ledger_files), tracemalloc.Filter(False, tracemalloc.__file__)]
    mine = [tracemalloc.Filter(True, ledger_files)]
    marks = {}
    with traced():
        with mg.profile() as prof:
            activations = at_start(prof, "activations")
            for step in range(1, 201):
                loss = ((model(x) - y) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                assert prof.current_bytes("activations") == activations, f"step {step}"
                opt.step()
                if step in (20, 21, 200):
                    gc.collect()  # also empties CPython's free lists, which tracemalloc counts as in use
                    snap = tracemalloc.take_snapshot()
                    engine = sum(t.size for t in snap.filter_traces(others).traces)
                    ledger = sum(t.size for t in snap.filter_traces(mine).traces)
                    del snap
                    marks[step] = dict(engine=engine, ledger_own=ledger, buffers=len(prof._buffers),
                                       refs=len(prof._refs), records=len(prof._records),
                                       events=len(prof._events), bytes=prof.current_bytes())
    a, b = marks[20], marks[200]
    assert b["engine"] - a["engine"] <= 64 * 1024, (a, b)  # minigrad, NumPy and this test: flat
    assert b["bytes"] == a["bytes"]                       # the ledger's own count: flat
    # the profiler's bookkeeping: one entry per live buffer / weak reference / unreleased record
    assert b["buffers"] <= a["buffers"] and b["refs"] <= a["refs"] and b["records"] <= a["records"]
    assert b["records"] == 0
    # ... except the timeline, which by design keeps one event per op: it grows linearly, no more
    per_step = marks[21]["events"] - a["events"]
    assert per_step > 0 and b["events"] - a["events"] == 180 * per_step
    grew = b["ledger_own"] - a["ledger_own"]
    assert grew <= 512 * (b["events"] - a["events"]), f"minigrad/profiler/ grew {grew} B for {180 * per_step} events"


# ----------------------------------------------------------------------------- 6. no effect on results

def _grads(params):
    return [p.grad.numpy().copy() for p in params]


def test_profile_does_not_change_mlp_gradients():
    model = mlp([5, 7, 7, 3])
    x = mg.randn(4, 5, requires_grad=True)
    model(x).sum().backward()
    plain, plain_x = _grads(model.parameters()), x.grad.numpy().copy()
    model.zero_grad()
    x.grad = None
    with mg.profile():
        model(x).sum().backward()
    for a, b in zip(plain, _grads(model.parameters())):
        assert np.array_equal(a, b)
    assert np.array_equal(plain_x, x.grad.numpy())


def test_profile_does_not_change_gpt_loss_or_gradients():
    model = GPT(GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=16, dropout=0.1))
    idx, targets = mg.randint(0, 16, (3, 8)), mg.randint(0, 16, (3, 8))

    def step():
        mg.manual_seed(123)  # the same dropout masks: the profile must not draw random numbers
        _, loss = model(idx, targets)
        model.zero_grad()
        loss.backward()
        return loss.item(), _grads(model.parameters())

    loss_plain, plain = step()
    with mg.profile():
        loss_profiled, profiled = step()
    assert loss_plain == loss_profiled
    for a, b in zip(plain, profiled):
        assert np.array_equal(a, b)


# ----------------------------------------------------------------------------- 7. no quiet lies: FLOP formulas

def _op_classes():
    out, stack = [], list(ops.Op.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls.__module__.startswith("minigrad"):  # not the made-up ops of this file
            out.append(cls)
        stack.extend(cls.__subclasses__())
    return out


def test_every_op_has_a_flop_formula():
    classes = _op_classes()
    assert len(classes) >= 30
    missing = []
    for cls in classes:
        in_table = cls.name in ops.flops_table()
        overrides = cls.flops is not ops.Op.flops and cls.backward_flops is not ops.Op.backward_flops
        if not (in_table or overrides or not cls.counts_flops):
            missing.append(cls.__name__)
    assert not missing, f"ops without a FLOP formula: {missing}"


def test_an_op_that_counts_no_flops_says_so_and_reports_none():
    """counts_flops = False (a checkpoint's record: its segment's ops count theirs): no row at all, not a row of 0s,
    while its calls still count; and it is no row of the per-element table either."""
    class Tie(ops.Op):
        name = "tie"
        counts_flops = False

        def forward(self, x):
            return x.copy()

        def backward(self, g):
            return (g,)

    x = mg.randn(3, requires_grad=True)
    with mg.profile() as prof:
        apply(Tie, x).sum().backward()
    assert prof.calls("forward", "tie") == prof.calls("backward", "tie") == 1
    assert {name for _, name in prof._flops} == {"sum"}
    assert "tie" not in ops.flops_table()


def test_an_op_without_a_formula_raises_under_a_profile():
    class Frobnicate(ops.Op):
        name = "frobnicate"

        def forward(self, x):
            return x * 2

        def backward(self, g):
            return (g * 2,)

    x = mg.randn(3, requires_grad=True)
    y = apply(Frobnicate, x)        # without a profile the engine never asks for FLOPs
    y.sum().backward()
    with pytest.raises(NotImplementedError, match="frobnicate"):
        with mg.profile():
            apply(Frobnicate, x)
    assert tape.active_profiler() is None


def _case_inputs():
    return dict(a=t64(3, 4), b=t64(3, 4), const=t64(3, 4, requires_grad=False), pos=t64(3, 4, positive=True),
                row=t64(4), cube=t64(2, 3, 4), w=t64(5, 4), bias=t64(5), lnw=t64(4), lnb=t64(4))


def _index_put(a, row, rows=1):
    out = a * 1.0  # a non-leaf: written in place, recorded as one index_put
    out[rows] = row
    return out


def _mask(shape, p=0.5):
    return mg.tensor(np.random.rand(*shape) < p)


# name -> (ops.flops_table() row or None, function of the inputs above, the inputs it uses)
OP_CASES = {
    "add": ("add", lambda a, b: a + b, "a b"),
    "add-broadcast": ("add", lambda a, row: a + row, "a row"),
    "sub": ("sub", lambda a, b: a - b, "a b"),
    "sub-broadcast": ("sub", lambda a, row: a - row, "a row"),
    "mul": ("mul", lambda a, b: a * b, "a b"),
    "mul-one-input-needs-grad": ("mul", lambda a, const: a * const, "a const"),
    "div": ("div", lambda a, pos: a / pos, "a pos"),
    "pow": ("pow", lambda pos: pos ** 3, "pos"),
    "neg": ("neg", lambda a: -a, "a"),
    "pow_tensor": ("pow_tensor", lambda pos, b: pos ** b, "pos b"),
    "index_put": (None, lambda a, row: _index_put(a, row), "a row"),
    "index_put-broadcast": (None, lambda a, row: _index_put(a, row, rows=[0, 2]), "a row"),
    "clamp": ("clamp", lambda a: a.clamp(-0.5, 0.5), "a"),
    "clamp_tensor": ("clamp_tensor", lambda a, row, b: a.clamp(row, b), "a row b"),
    "exp": ("exp", lambda a: a.exp(), "a"),
    "log": ("log", lambda pos: pos.log(), "pos"),
    "sqrt": ("sqrt", lambda pos: pos.sqrt(), "pos"),
    "tanh": ("tanh", lambda a: a.tanh(), "a"),
    "sin": ("sin", lambda a: a.sin(), "a"),
    "cos": ("cos", lambda a: a.cos(), "a"),
    "sigmoid": ("sigmoid", lambda a: a.sigmoid(), "a"),
    "abs": ("abs", lambda a: a.abs(), "a"),
    "sign": ("sign", lambda a: a.sign(), "a"),
    "round": ("round", lambda a: a.round(decimals=1), "a"),
    "relu": ("relu", lambda a: a.relu(), "a"),
    "gelu": ("gelu", lambda a: F.gelu(a), "a"),
    "gelu-tanh": ("gelu_tanh", lambda a: F.gelu(a, approximate="tanh"), "a"),
    "softplus": ("softplus", lambda a: F.softplus(a, beta=2.0, threshold=1.0), "a"),
    "silu": ("silu", lambda a: F.silu(a), "a"),
    "binary_cross_entropy_with_logits": ("binary_cross_entropy_with_logits",
                                         lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="none"), "a b"),
    "cast": ("cast", lambda a: a.to("float32"), "a"),
    "clone": ("clone", lambda a: a.clone(), "a"),
    "to_device": ("to_device", lambda a: apply(ops.ToDevice, a, device=a.device), "a"),  # same device: no-op
    "sum": (None, lambda cube: cube.sum(dim=1), "cube"),
    "mean": (None, lambda cube: cube.mean(dim=(0, 2)), "cube"),
    "max": (None, lambda cube: cube.amax(dim=-1), "cube"),
    "min": (None, lambda cube: cube.amin(dim=-1), "cube"),
    "prod": (None, lambda cube: cube.prod(dim=1), "cube"),
    "cumsum": (None, lambda cube: cube.cumsum(dim=1), "cube"),
    "maximum": ("maximum", lambda a, b: a.maximum(b), "a b"),
    "maximum-broadcast": ("maximum", lambda a, row: mg.maximum(a, row), "a row"),
    "minimum": ("minimum", lambda a, const: a.minimum(const), "a const"),
    "expand": ("expand", lambda row: row.expand(3, 4), "row"),
    "flip": ("flip", lambda a: a.flip(0, 1), "a"),
    "matmul": (None, lambda a, w: a @ w.T, "a w"),
    "linear": (None, lambda a, w, bias: F.linear(a, w, bias), "a w bias"),
    "reshape": ("reshape", lambda a: a.reshape(2, 6), "a"),
    "transpose": ("transpose", lambda a: a.transpose(0, 1), "a"),
    "permute": ("permute", lambda cube: cube.permute(2, 0, 1), "cube"),
    "index-basic": ("index", lambda a: a[1:, ::2], "a"),
    "index-array": ("index", lambda a: a[[0, 2, 0]], "a"),
    "cat": ("cat", lambda a, b: mg.cat([a, b], dim=1), "a b"),
    "stack": ("stack", lambda a, b: mg.stack([a, b], dim=0), "a b"),
    "where": ("where", lambda a, b: mg.where(_mask((3, 4)), a, b), "a b"),
    "masked_fill": ("masked_fill", lambda a: a.masked_fill(_mask((3, 4)), 0.0), "a"),
    "tri": ("tri", lambda a: a.tril(), "a"),
    "softmax": ("softmax", lambda a: a.softmax(dim=-1), "a"),
    "log_softmax": ("log_softmax", lambda a: a.log_softmax(dim=-1), "a"),
    "layer_norm": (None, lambda a, lnw, lnb: F.layer_norm(a, (4,), lnw, lnb), "a lnw lnb"),
    "dropout": ("dropout", lambda a: F.dropout(a, 0.5, training=True), "a"),
    "dropout-float-mask": ("dropout_float_mask", lambda a: F.dropout(a, 0.5, mask_dtype="float64"), "a"),
    "sdpa": (None, lambda a, w: F.scaled_dot_product_attention(a, w, w), "a w"),
    "sdpa-causal-dropout": (None, lambda a, w: F.scaled_dot_product_attention(a, w, w, dropout_p=0.5, is_causal=True),
                            "a w"),
    # the tanh runs again, the scaling after it (which reads nothing in backward) does not (NOTE [recompute what
    # backward reads])
    "checkpoint": (None, lambda a: mg.checkpoint(lambda t: t.tanh() * 2.0, a), "a"),
    # two outputs: a record per output on the checkpoint's (NOTE [checkpoint outputs]), multiplied
    "checkpoint_output": (None, lambda a: (lambda y: y[0] * y[1])(mg.checkpoint(lambda t: (t.tanh() * 2.0,
                                                                                            t.exp() * 3.0), a)), "a"),
}


# cube (2, 3, 4); a (3, 4); w (5, 4); bias (5,); the loss .sum() adds its own 'sum' FLOPs (n - 1)
EXACT_FLOPS = {
    "sum": {("forward", "sum"): (24 - 6) + (6 - 1), ("backward", "sum"): 0},
    "mean": {("forward", "mean"): 24, ("backward", "mean"): 3},
    "max": {("forward", "max"): 24 - 6, ("backward", "max"): 3 * 24 + 6},
    "min": {("forward", "min"): 24 - 6, ("backward", "min"): 3 * 24 + 6},
    "prod": {("forward", "prod"): 24 - 8, ("backward", "prod"): 4 * 24},   # 8 products of 3
    "cumsum": {("forward", "cumsum"): 24 - 8, ("backward", "cumsum"): 24 - 8},  # 8 rows of 3: 2 adds each
    "matmul": {("forward", "matmul"): 2 * 3 * 4 * 5, ("backward", "matmul"): 2 * (2 * 3 * 4 * 5)},
    "linear": {("forward", "matmul"): 2 * 3 * 4 * 5, ("forward", "add"): 15, ("forward", "linear"): 0,
               ("backward", "matmul"): 2 * (2 * 3 * 4 * 5), ("backward", "sum"): 15 - 5},
    "layer_norm": {("forward", "layer_norm"): 7 * 12, ("backward", "layer_norm"): (8 + 2 + 1) * 12},
    # the written row's gradient is gathered from g: no adds, unless the value was broadcast over 2 rows
    "index_put": {("forward", "index_put"): 0, ("backward", "index_put"): 0, ("backward", "mul"): 12},
    "index_put-broadcast": {("forward", "index_put"): 0, ("backward", "index_put"): 4},
    # q = a (L=3, E=4), k = v = w (S=5, Ev=4): n = 15 scores (NOTE [fused attention] in ops/nn.py). Backward
    # recomputes the scores (2 n E), then dv, dP (2 n Ev each), dq, dk (2 n E each); per score 3 for P again
    # and 5 for D = rowsum(P dP) and dS, 2 per dropout applied
    "sdpa": {("forward", "matmul"): 2 * 15 * (4 + 4), ("forward", "sdpa"): 6 * 15 + 2 * 3,
             ("backward", "matmul"): 2 * 15 * 4 + 2 * (2 * 15 * 4) + 2 * (2 * 15 * 4),
             ("backward", "sdpa"): 3 * 15 + 5 * 15},
    "sdpa-causal-dropout": {("forward", "matmul"): 2 * 15 * (4 + 4), ("forward", "sdpa"): (6 + 2) * 15 + 2 * 3,
                            ("backward", "matmul"): 2 * 15 * 4 + 2 * (2 * 15 * 4) + 2 * (2 * 15 * 4),
                            ("backward", "sdpa"): (3 + 2) * 15 + (5 + 2) * 15},
    # the checkpoint record counts nothing itself: its tanh runs in forward, again in recompute, then backward
    "checkpoint": {("forward", "checkpoint"): 0, ("forward", "tanh"): 12, ("recompute", "tanh"): 12,
                   ("backward", "tanh"): 3 * 12, ("backward", "checkpoint"): 0, ("forward", "mul"): 12,
                   ("recompute", "mul"): 0},
    "checkpoint_output": {("forward", "checkpoint_output"): 0, ("backward", "checkpoint_output"): 0,
                          ("forward", "checkpoint"): 0, ("backward", "checkpoint"): 0,
                          ("forward", "tanh"): 12, ("recompute", "tanh"): 12, ("backward", "tanh"): 3 * 12,
                          ("forward", "exp"): 12, ("recompute", "exp"): 12, ("backward", "exp"): 12,
                          ("recompute", "mul"): 0},
}


def _op_name(case):
    return {"gelu-tanh": "gelu"}.get(case, case.split("-")[0])


def test_every_op_class_has_a_case_below():
    assert {cls.name for cls in _op_classes()} == {_op_name(c) for c in OP_CASES}


@pytest.mark.parametrize("case", list(OP_CASES))
def test_every_op_runs_forward_and_backward_under_a_profile(case):
    row, fn, names = OP_CASES[case]
    name = _op_name(case)
    inputs = _case_inputs()
    args = [inputs[n] for n in names.split()]
    with mg.profile() as prof:
        out = fn(*args)
        out.sum().backward()
    calls = {"sum": 2, "checkpoint_output": 2}.get(name, 1)   # the loss is a sum too; two outputs, two records
    assert prof.calls("forward", name) == calls
    assert prof.calls("backward", name) == calls
    assert grown(prof, "activations") == 0
    if row is None:  # the ops with their own formulas (ops/), worked out by hand for these shapes
        for (phase, op), n in EXACT_FLOPS[case].items():
            assert prof.flops(phase, op=op) == n, (phase, op)
        return
    # ops ruled by the table: forward per output element; backward per element of the incoming
    # gradient for each input that needs one, plus an add per element summed away by broadcasting
    fwd, per_input = ops.flops_table()[row] or (0, ())
    n = out.data.size
    expected = sum(per * n + max(n - x.data.size, 0) for per, x in zip(per_input, args) if x.requires_grad)
    if case == "index-array":
        expected = n  # the scatter-add adds each incoming element once (Index.backward_flops)
    assert prof.flops("forward", op=name) == fwd * n
    assert prof.flops("backward", op=name) == expected


# ----------------------------------------------------------------------------- 8. the docs' FLOP table

def parse_flop_table(markdown):
    """The `| op | forward | backward per input |` table -> {op: (forward, (backward, ...)) or None}."""
    lines = markdown.splitlines()
    header = next((i for i, line in enumerate(lines)
                   if re.fullmatch(r"\|\s*op\s*\|\s*forward\s*\|\s*backward per input\s*\|.*", line.strip())), None)
    assert header is not None, "no `| op | forward | backward per input |` table"
    assert re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[header + 1].strip()), "no separator row under the header"
    table = {}
    for line in lines[header + 2:]:
        line = line.strip()
        if not line.startswith("|"):
            break
        cells = [c.strip().strip("`").strip() for c in line.strip("|").split("|")]
        op, forward, backward = cells[:3]
        assert op not in table, f"{op} appears twice"
        if forward == "-" and backward == "-":
            table[op] = None
        else:
            table[op] = (int(forward), tuple(int(b) for b in backward.split(",")))
    return table


def test_flop_table_parser():
    sample = ("text\n\n| op | forward | backward per input |\n| --- | --- | --- |\n"
              "| add | 1 | 0, 0 |\n| `pow` | 1 | 3 |\n| cat | - | - |\n\nafter\n| x | 1 | 2 |\n")
    assert parse_flop_table(sample) == {"add": (1, (0, 0)), "pow": (1, (3,)), "cat": None}


def test_docs_flop_table_matches_ops():
    path = os.path.join(ROOT, "docs", "ledger.md")
    with open(path, encoding="utf-8") as f:
        documented = parse_flop_table(f.read())
    assert documented == ops.flops_table()


# ----------------------------------------------------------------------------- 9. timeline

def test_timeline_forward_ramp_and_backward_drain():
    model = mlp([8, 16, 16, 4])
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = mg.randn(3, 8)
    with mg.profile() as prof:
        loss = model(x).sum()
        loss.backward()
        opt.step()
    tl = prof.timeline()
    assert isinstance(tl, list) and all(isinstance(e, dict) for e in tl)
    keys = {"index", "op", "phase", "total"} | set(CATEGORIES)
    assert all(set(e) == keys for e in tl)
    assert [e["index"] for e in tl] == list(range(len(tl)))
    assert all(e["total"] == sum(e[c] for c in CATEGORIES) for e in tl)
    assert tl[0]["op"] == "start" and tl[-1]["op"] == "end"

    work = [e for e in tl if e["phase"] in ("forward", "backward")]
    phases = [e["phase"] for e in work]
    n_fwd = phases.count("forward")
    assert phases == ["forward"] * n_fwd + ["backward"] * (len(phases) - n_fwd)  # forward..., backward...
    assert n_fwd == prof.calls("forward") and len(phases) - n_fwd == prof.calls("backward")
    assert [e["op"] for e in work[:n_fwd]] == ["linear", "tanh"] * 3 + ["sum"]
    assert [e["op"] for e in work[n_fwd:]] == ["sum"] + ["tanh", "linear"] * 3

    base = at_start(prof, "activations")
    ramp = [e["activations"] for e in work[:n_fwd]]
    drain = [e["activations"] for e in work[n_fwd:]]
    assert ramp == sorted(ramp) and ramp[-1] - base == formulas.mlp_saved_bytes(3, [8, 16, 16, 4])
    assert max(ramp) == prof.peak_bytes("activations")
    assert drain == sorted(drain, reverse=True) and drain[-1] == base and drain[0] == ramp[-1]
    # optimizer state appears after backward, as the step makes it
    steps = [e for e in tl if e["op"] == "optimizer_state"]
    assert len(steps) == len(list(model.parameters())) and all(s["index"] > work[-1]["index"] for s in steps)
    assert steps[-1]["optimizer"] - at_start(prof, "optimizer") == nbytes(model.parameters())

    # a steady step makes no state: it still has its place on the timeline, one event after its backward
    opt.zero_grad()
    with mg.profile(model, opt) as prof:
        model(x).sum().backward()
        opt.step()
    tl = prof.timeline()
    steps = [e for e in tl if e["phase"] == "step"]
    assert [e["op"] for e in steps] == ["SGD.step"] and steps[0]["index"] == tl[-2]["index"]
    assert steps[0]["optimizer"] == nbytes(model.parameters())  # the momentum, alive all along


# ----------------------------------------------------------------------------- 10. table

def test_table_names_every_op_and_category_with_units():
    model = mlp([8, 32, 16])  # 3.2 KiB of parameters
    x = mg.randn(3, 8)
    with mg.profile() as prof:
        model(x).sum().backward()
    text = prof.table()
    assert isinstance(text, str)
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    used = {name for (_, name) in prof._flops} | {name for (_, name) in prof._calls}
    assert used == {"linear", "tanh", "sum", "matmul", "add"}
    for name in used | set(CATEGORIES) | {"total"}:
        assert name in rows, f"{name} missing from\n{text}"
    flops_head = next(line for line in text.splitlines() if line.startswith("FLOPs"))
    assert flops_head.split()[1:] == list(PHASES)
    for c in CATEGORIES:
        peak, now = format_bytes(prof.peak_bytes(c)), format_bytes(prof.current_bytes(c))
        assert rows[c].split()[1:] == peak.split() + now.split()
    assert re.search(r"\d+\.\d KiB", rows["parameters"])
    assert format_flops(prof.flops("forward", "matmul")) in rows["matmul"]


def test_format_bytes_and_flops_units():
    assert format_bytes(0) == "0 B" and format_bytes(1023) == "1023 B"
    assert format_bytes(1024) == "1.0 KiB" and format_bytes(1536) == "1.5 KiB"
    assert format_bytes(5 * 1024 ** 2) == "5.0 MiB" and format_bytes(3 * 1024 ** 3) == "3.0 GiB"
    assert format_bytes(2048 * 1024 ** 3) == "2048.0 GiB"
    assert format_flops(999) == "999" and format_flops(1500) == "1.50 k"
    assert format_flops(2.5e9) == "2.50 G" and format_flops(7e15) == "7000.00 T"


# ----------------------------------------------------------------------------- 11. the block

def test_nested_profiles_raise_and_leave_the_outer_active():
    with mg.profile() as outer:
        with pytest.raises(RuntimeError, match="nest"):
            with mg.profile():
                pass
        assert tape.active_profiler() is outer
        mg.randn(3)  # still recording into the outer
    assert tape.active_profiler() is None


def test_profiler_is_cleared_after_the_block_even_when_it_raises():
    with mg.profile():
        assert tape.active_profiler() is not None
    assert tape.active_profiler() is None
    with pytest.raises(ZeroDivisionError):
        with mg.profile():
            1 / 0
    assert tape.active_profiler() is None
    with pytest.raises(ValueError):  # an engine error inside the block
        with mg.profile():
            mg.randn(2, 3) @ mg.randn(4, 5)
    assert tape.active_profiler() is None
    with mg.profile():  # and a new one can start
        pass


# ----------------------------------------------------------------------------- bugs found once, kept as tests

def test_comparison_results_are_counted():
    x = mg.randn(100, 10)
    with mg.profile() as prof:
        before = prof.current_bytes()
        mask = x > 0                                   # a new 1000-byte bool array the engine made
        assert prof.current_bytes() - before == mask.data.nbytes


def test_dropped_graphs_do_not_grow_the_bookkeeping():
    model = mlp([8, 16, 16, 4])
    x = mg.randn(4, 8)
    with mg.profile() as prof:
        for _ in range(50):
            model(x).sum()  # a forward whose graph is dropped: an eval loss computed without no_grad()
        assert len(prof._refs) <= 16 and len(prof._buffers) <= 16  # these stay flat (tested above too)
        assert len(prof._records) == 0                            # ... this grows by one per dropped record


def test_reentering_a_profile_is_refused():
    prof = mg.profile()
    with prof:
        a = mg.randn(1000)
    del a
    gc.collect()
    with pytest.raises(RuntimeError, match="already run"):  # a used profile refuses to be re-entered
        with prof:
            pass


# ----------------------------------------------------------------------------- 12. the GPU allocator (CuPy's pool)

@pytest.mark.cuda
@pytest.mark.skipif(not mg.cuda_is_available(), reason="needs CuPy and a GPU (CI has none)")
def test_cupy_pool_peak_matches_ledger():
    import cupy

    class PoolPeak(cupy.cuda.MemoryHook):
        """Bytes taken from the pool, both as asked for (size) and as rounded up to 512 (mem_size)."""
        name = "minigrad_test_pool_peak"

        def __init__(self):
            self.live = {}                       # pointer -> (size, mem_size)
            self.asked = self.rounded = 0
            self.peak_asked = self.peak_rounded = 0

        def malloc_postprocess(self, **kw):
            if not kw.get("mem_ptr"):
                return
            self.live[kw["mem_ptr"]] = (kw["size"], kw["mem_size"])
            self.asked += kw["size"]
            self.rounded += kw["mem_size"]
            self.peak_asked = max(self.peak_asked, self.asked)
            self.peak_rounded = max(self.peak_rounded, self.rounded)

        def free_postprocess(self, **kw):
            size, mem_size = self.live.pop(kw["mem_ptr"], (kw["mem_size"], kw["mem_size"]))
            self.asked -= size
            self.rounded -= mem_size

    pool = cupy.get_default_memory_pool()
    cupy.cuda.Device().synchronize()
    gc.collect()
    used_before = pool.used_bytes()
    hook = PoolPeak()
    with hook:
        with mg.profile() as prof:
            model = mlp([256] * 7, device="cuda")
            x = mg.randn(64, 256, device="cuda")
            opt = optim.AdamW(model.parameters(), lr=1e-3)
            for _ in range(2):
                loss = model(x).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
        cupy.cuda.Device().synchronize()
    ledger = prof.peak_bytes() - at_start(prof)
    # the ledger counts nbytes; the pool hands out multiples of 512: compare with the sizes asked for,
    # and check the rounded count is only the rounding above it
    ratio = ledger / hook.peak_asked
    assert abs(1 - ratio) <= 0.05, (ledger, hook.peak_asked, hook.peak_rounded)
    assert hook.peak_asked <= hook.peak_rounded
    assert pool.used_bytes() - used_before >= 4 * nbytes(model.parameters())  # params, moments, grads: alive


def test_bytes_at_peak_add_up_to_the_peak():
    model = mlp([8, 32, 16])
    x = mg.randn(3, 8)
    with mg.profile() as prof:
        model(x).sum().backward()
    at_peak = prof.bytes_at_peak()
    assert set(at_peak) == set(CATEGORIES)
    assert sum(at_peak.values()) == prof.peak_bytes()
    assert all(at_peak[c] <= prof.peak_bytes(c) for c in CATEGORIES)


@pytest.mark.parametrize("how", ["plain", "checkpoint", "checkpoint_sequential"])
def test_a_checkpointed_step_on_a_batch_made_before_the_block_ends_where_it_began(how):
    # Found: the recompute re-wrapped its saved input, the batch made before the block, as a new tensor, which
    # the ledger counted as transient for as long as the batch lived: 32 x 64 x 4 = 8192 bytes above the start
    # after the step, though nothing new was alive. A plain step ended at its start exactly; now every one does.
    model = mlp([64, 64, 64, 64])
    opt = optim.SGD(model.parameters(), lr=0.1)
    x = mg.randn(32, 64)
    forward = {"plain": model, "checkpoint": lambda x: mg.checkpoint(model, x),
               "checkpoint_sequential": lambda x: mg.checkpoint_sequential(model, 2, x)}[how]
    for step in range(2):
        with mg.profile(model, opt) as prof:
            forward(x).sum().backward()
            opt.step()
            opt.zero_grad()
        assert grown(prof) == 0, (how, step, {c: grown(prof, c) for c in CATEGORIES})
        assert prof.peak_bytes("activations") >= x.data.nbytes  # the batch counted while saved, as before


def test_a_tensor_around_an_array_the_ledger_knows_adds_no_bytes():
    # NOTE [an old array, a new tensor] (profiler/ledger.py): the class of the bug above, whoever wraps the array
    w = mg.randn(64, 16, requires_grad=True)
    x = mg.randn(32, 64)                 # from before the block, so counted only while a record saves it
    with mg.profile() as prof:
        out = x @ w                      # matmul saves x for w's gradient: an activation
        before = {c: prof.current_bytes(c) for c in CATEGORIES}
        again = mg.Tensor._from_array(x.data)  # wrapped again, as a recompute or a user's code might
        assert {c: prof.current_bytes(c) for c in CATEGORIES} == before
        out.sum().backward()             # releases x: nothing holds it in the ledger any longer
        del out
        w.grad = None
        assert grown(prof) == 0, {c: grown(prof, c) for c in CATEGORIES}
    assert again.data is x.data
    with mg.profile() as prof:           # an array made in the block counts as long as it lives, wrapped or not
        y = mg.randn(8, 8)
        alias = mg.Tensor._from_array(y.data)
        del y
        assert grown(prof) == 8 * 8 * 4
        del alias
        assert grown(prof) == 0


def test_a_checkpoint_recorded_before_the_profile_began_ends_where_it_began():
    # the recompute's stand-in for the saved batch is the forward's array: not new to a profile that began later
    model = mlp([64, 64, 64, 64])
    x = mg.randn(32, 64)
    for how in (lambda x: mg.checkpoint(model, x), lambda x: mg.checkpoint_sequential(model, 2, x)):
        loss = how(x).sum()
        with mg.profile(model) as prof:
            loss.backward()
            del loss
            model.zero_grad()
        assert grown(prof) == 0, {c: grown(prof, c) for c in CATEGORIES}


def test_batchnorm_in_training_under_a_profile():
    # num_batches_tracked + 1 was a NumPy scalar, which the ledger cannot hold (no weak reference): a TypeError
    bn = nn.BatchNorm1d(4)
    with mg.profile(bn) as prof:
        bn(mg.randn(8, 4)).sum().backward()
    assert int(bn.num_batches_tracked.item()) == 1
    assert prof.peak_bytes("activations") > 0
