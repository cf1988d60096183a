"""What ops keep for backward: what today's PyTorch keeps, and the switches that emulate older software.

The ledger (mg.profile) predicts training memory, so each op must save what PyTorch's saves:
  dropout    a bool mask, 1 byte per element (PyTorch's native_dropout); mask_dtype='float32' keeps the 4-byte
             mask of older frameworks, with the same values and gradients
  softmax    its output; keep_input=True also keeps its input, as PyTorch's did before 1.11
Exact bytes are measured from the block's start (the 'start' event), as in test_profiler.py.
"""
import gc

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn


@pytest.fixture(autouse=True)
def _collect():
    gc.collect()  # garbage from earlier tests would count as alive at 'start', then die mid-block
    yield


def grown(prof, category="activations"):
    """Live bytes in `category` now, less what was alive at the start of the block."""
    return prof.current_bytes(category) - prof.timeline()[0][category]


# ----------------------------------------------------------------------------- dropout

@pytest.mark.parametrize("mask_dtype, itemsize", [(None, 1), ("bool", 1), ("float16", 2), ("float32", 4),
                                                  ("float64", 8), (np.float32, 4)])
def test_dropout_keeps_a_one_byte_mask_unless_told_otherwise(mask_dtype, itemsize):
    x = mg.randn(64, 48, requires_grad=True)  # float32
    with mg.profile() as prof:
        y = F.dropout(x, 0.1, mask_dtype=mask_dtype)
        after_forward = grown(prof)
        y.sum().backward()
    assert after_forward == 64 * 48 * itemsize
    assert grown(prof) == 0  # backward freed the mask
    assert prof.flops("forward", op="dropout") == 64 * 48 * (2 if itemsize == 1 else 1)  # * mask, * scale


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p", [0.1, 0.5, 1.0])
def test_the_old_mask_gives_bit_identical_values_and_gradients(dtype, p):
    x = mg.randn(30, 20, dtype=dtype, requires_grad=True)
    g = mg.randn(30, 20, dtype=dtype)
    results = []
    for mask_dtype in (None, dtype):
        mg.manual_seed(7)
        y = F.dropout(x, p, mask_dtype=mask_dtype)
        x.grad = None
        y.backward(g)
        results.append((y.detach().numpy(), x.grad.numpy()))
    (y1, g1), (y2, g2) = results
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(g1, g2)
    assert y1.dtype == y2.dtype == np.dtype(dtype)


def test_dropout_saves_a_bool_mask_and_scales_in_forward_and_backward():
    x = mg.ones(50, 40, requires_grad=True)
    y = F.dropout(x, 0.2)
    (mask,) = y.grad_fn.saved
    assert mask.dtype == np.bool_ and mask.shape == (50, 40)
    np.testing.assert_allclose(y.detach().numpy(), mg.tensor(mask).numpy() / 0.8, rtol=1e-7)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())  # the same mask and scale


def test_a_mask_of_another_dtype_does_not_promote_the_output():
    x = mg.randn(8, 8, requires_grad=True)  # float32, with a float64 mask
    y = F.dropout(x, 0.5, mask_dtype="float64")
    y.sum().backward()
    assert y.dtype == x.grad.dtype == np.float32


def test_nn_dropout_passes_mask_dtype():
    x = mg.randn(16, 16, requires_grad=True)
    drop = nn.Dropout(0.5, mask_dtype="float32")
    assert repr(drop) == "Dropout(p=0.5, mask_dtype='float32')" and repr(nn.Dropout(0.5)) == "Dropout(p=0.5)"
    with mg.profile() as prof:
        y = drop(x)
        assert grown(prof) == 16 * 16 * 4
    assert drop.eval()(x) is x
    del y


# ----------------------------------------------------------------------------- softmax

@pytest.mark.parametrize("keep_input", [False, True])
def test_softmax_keeps_its_output_and_with_keep_input_its_input_too(keep_input):
    x = mg.randn(32, 10, requires_grad=True)
    with mg.profile() as prof:
        h = x * 2  # made in the block: its bytes are the input's
        before = grown(prof)
        y = F.softmax(h, dim=-1, keep_input=keep_input)
        kept = grown(prof) - before
        y.sum().backward()
    assert kept == 32 * 10 * 4 * (2 if keep_input else 1)
    assert grown(prof) == 0


def test_softmax_keep_input_changes_no_value_or_gradient():
    x = mg.randn(6, 9, dtype="float64", requires_grad=True)
    g = mg.randn(6, 9, dtype="float64")
    out = []
    for keep_input in (False, True):
        x.grad = None
        y = F.softmax(x, 1, keep_input=keep_input)
        y.backward(g)
        out.append((y.detach().numpy(), x.grad.numpy()))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])


def test_softmax_keep_input_refuses_an_in_place_write_to_the_input_as_old_pytorch_did():
    x = mg.randn(4, 5, requires_grad=True)
    h = x * 1
    y = F.softmax(h, -1, keep_input=True)
    with mg.no_grad():
        h += 1
    with pytest.raises(RuntimeError, match=r"softmax"):
        y.sum().backward()
