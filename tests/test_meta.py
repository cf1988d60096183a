"""The 'meta' device: arrays with a shape and no data, on which the ledger counts what a real run would.

The claim is exact: the same model, step and seed on 'meta' and on 'cpu' give the same timeline of
bytes by category, event by event, and the same FLOPs by phase. That rests on meta arrays copying
exactly when NumPy copies (a reshape of a transposed array, say), which the first tests check against
NumPy itself.
"""
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minigrad as mg
from minigrad import backend, models
from minigrad.gpt import GPT, GPTConfig
from minigrad.backend.meta import MetaArray, MetaError


# ----------------------------------------------------------------------------- layout, as NumPy's

@st.composite
def views(draw):
    """The same chain of view operations applied to a NumPy array and to a meta array."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    a, m = np.zeros(shape, np.float32), MetaArray(shape, np.float32)
    for step in draw(st.lists(st.sampled_from(["T", "perm", "slice", "step", "newaxis"]), max_size=3)):
        if step == "T":
            a, m = a.T, m.T
        elif step == "perm":
            p = draw(st.permutations(range(a.ndim)))
            a, m = a.transpose(p), m.transpose(p)
        elif step == "newaxis":
            a, m = a[None], m[None]
        else:
            d = draw(st.integers(0, a.ndim - 1))
            key = (slice(None),) * d + ((slice(draw(st.integers(0, a.shape[d] - 1)), None)) if step == "slice"
                                        else slice(None, None, 2),)
            a, m = a[key], m[key]
    return a, m


def same_layout(a, m):
    assert (m.shape, m.dtype) == (a.shape, a.dtype)
    if a.size > 1:  # NumPy ignores the strides of dims of size 1
        assert [s for n, s in zip(m.shape, m.strides) if n != 1] == [s for n, s in zip(a.shape, a.strides) if n != 1]
    assert m.is_c_contiguous() == a.flags.c_contiguous


@settings(max_examples=300, deadline=None)
@given(views(), views(), st.data())
def test_results_are_laid_out_as_numpy_lays_them_out(x, y, data):
    (a, m), (b, mb) = x, y
    same_layout(a, m)
    same_layout(np.exp(a), np.exp(m))
    same_layout(a.astype(np.float64), m.astype(np.float64))
    same_layout(a * 2.0, m * 2.0)
    if a.shape == b.shape:
        same_layout(a + b, m + mb)
        same_layout(np.where(a > 0, a, b), np.where(m > 0, m, mb))
    axis = data.draw(st.integers(0, a.ndim - 1))
    same_layout(a.sum(axis=axis, keepdims=True), m.sum(axis=axis, keepdims=True))
    same_layout(a.max(axis=axis), m.max(axis=axis))
    if a.ndim >= 2:
        same_layout(a @ a.swapaxes(-1, -2), m @ m.swapaxes(-1, -2))


@settings(max_examples=300, deadline=None)
@given(views(), st.data())
def test_a_reshape_copies_exactly_when_numpys_does(x, data):
    a, m = x
    new = list(data.draw(st.permutations(a.shape)))
    if len(new) > 1 and data.draw(st.booleans()):
        new = [new[0] * new[1]] + new[2:]
    r, rm = a.reshape(new), m.reshape(new)
    same_layout(r, rm)
    is_view = rm.base is not None and rm.base is (m.base if m.base is not None else m)
    assert is_view == np.shares_memory(r, a)


def test_shapes_and_dtypes_follow_numpy():
    m = MetaArray((4, 3), "float32")
    assert (m @ MetaArray((3,), "float32")).shape == (4,)
    assert (MetaArray((2, 1, 4, 3), "float32") @ MetaArray((5, 3, 7), "float32")).shape == (2, 5, 4, 7)
    assert (m * 2.5).dtype == np.float32                    # a Python number does not widen float32
    assert (m + MetaArray((3,), "float64")).dtype == np.float64
    assert (m > 0).dtype == np.bool_ and m.sum().shape == () and m.argmax(axis=1).dtype == np.intp
    assert m[MetaArray((2, 5), "int64")].shape == (2, 5, 3)          # an embedding's gather
    assert m[MetaArray((6,), "int64"), MetaArray((6,), "int64")].shape == (6,)
    assert m[1:, None, ::2].shape == (3, 1, 2)
    assert np.concatenate([m, m], axis=1).shape == (4, 6)
    assert m.nbytes == 48 and m.T.base is m
    one = MetaArray((1, 1), "float32").T
    assert one.reshape(()).base is one.base and one.reshape(1, 1, 1).is_c_contiguous()  # one element: always a view


# ----------------------------------------------------------------------------- the ledger: meta equals real

def step(device, checkpointing=False, dropout=0.0, steps=2, accumulate=False):
    """Two training steps of the small GPT made on `device`, under mg.profile."""
    mg.manual_seed(0)
    with mg.device(device):
        model = GPT(GPTConfig(dropout=dropout, gradient_checkpointing=checkpointing))
        opt = mg.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = mg.randint(0, 65, (4, 32)), mg.randint(0, 65, (4, 32))
    with mg.profile(model, opt) as prof:
        for _ in range(steps):
            if accumulate:
                mg.accumulation_step(model, lambda out, t: mg.functional.cross_entropy(
                    out.reshape(-1, 65), t.reshape(-1), reduction="sum"), opt, x, y, steps=2)
            else:
                _, loss = model(x, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
    return prof


@pytest.mark.parametrize("checkpointing", [False, True])
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_meta_gives_the_real_runs_ledger_event_by_event(checkpointing, dropout):
    real, meta = step("cpu", checkpointing, dropout), step("meta", checkpointing, dropout)
    assert meta.timeline() == real.timeline()
    assert meta.bytes_at_peak() == real.bytes_at_peak()
    for phase in ("forward", "backward", "recompute"):
        assert meta.flops(phase) == real.flops(phase)
    assert meta.table(times=False) == real.table(times=False)  # times differ from run to run


def test_meta_gives_the_real_ledger_with_accumulation():
    real, meta = step("cpu", accumulate=True, steps=1), step("meta", accumulate=True, steps=1)
    assert meta.timeline() == real.timeline()
    assert meta.flops() == real.flops() > 0


def test_a_meta_model_takes_no_memory():
    tracemalloc.start()
    with mg.device("meta"):
        model = GPT(GPTConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768))
        x = mg.randint(0, 50257, (8, 1024))
    with mg.profile(model) as prof:
        model(x, x)[1].backward()
    used = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    params = sum(p.numel() for p in model.parameters())
    assert params > 120_000_000
    assert prof.peak_bytes("parameters") == 4 * params
    assert prof.peak_bytes() > 8e9        # what a real step would hold ...
    assert used < 50e6                    # ... counted in a few megabytes of Python objects


# ----------------------------------------------------------------------------- what needs values says so

def test_what_needs_values_says_so():
    with mg.device("meta"):
        t = mg.randn(3, 4)
        assert t.device == "meta" and repr(t.data) == "MetaArray(shape=(3, 4), dtype=float32)"
        for what in (t.sum().item, t.numpy, lambda: float(t.sum()), lambda: t.to("cpu"),
                     lambda: t[t > 0], lambda: mg.multinomial(t.softmax(-1), 1)):
            with pytest.raises(MetaError, match="meta"):
                what()
    with pytest.raises(backend.DeviceError, match="'meta'"):
        mg.tensor([1.0], device="metal")


def test_a_meta_tensor_prints_as_pytorchs_does():
    """repr(torch.empty(2, 3, device='meta', requires_grad=True)) is "tensor(..., device='meta', size=(2, 3),
    requires_grad=True)": printing a model's tensor on meta is no error. It once raised MetaError naming numpy()."""
    with mg.device("meta"):
        w = mg.randn(2, 3, requires_grad=True)
        assert repr(w) == str(w) == f"{w}" == "tensor(..., device='meta', size=(2, 3), requires_grad=True)"
        assert repr(w * 2) == "tensor(..., device='meta', size=(2, 3), grad_fn=<mul>)"
        assert repr(mg.zeros(4, dtype=mg.float64)) == "tensor(..., dtype=float64, device='meta', size=(4,))"


def test_a_device_block_sets_the_default_and_ends():
    with mg.device("meta") as d:
        assert mg.default_device() == "meta" and str(d) == "meta"
        assert mg.nn.Linear(3, 2).weight.device == "meta"
        assert mg.zeros(2).device == "meta" and mg.ones(2, device="cpu").device == "cpu"
    assert mg.zeros(2).device == backend.default_device() != "meta"


def test_meta_draws_nothing():
    mg.manual_seed(0)
    state = mg.get_rng_state()
    with mg.device("meta"):
        mg.randn(1000, 1000)
        mg.functional.dropout(mg.ones(1000, 1000), 0.5)
    assert mg.get_rng_state() == state


@pytest.mark.parametrize("name", ["bert-base-uncased", "bert-large-uncased", "gpt2", "gpt2-medium", "gpt2-large",
                                  "gpt2-xl"])
def test_every_full_size_model_built_on_meta_has_its_published_parameter_count(name):
    model = models.build(name, device="meta")
    assert models.count_parameters(model) == models.spec(name).parameters
    assert all(p.device == "meta" for p in model.parameters())
