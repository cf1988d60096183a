"""What ops keep for backward: what today's PyTorch keeps, and the switches that emulate older software.

The ledger (mg.profile) predicts training memory, so each op must save what PyTorch's saves:
  dropout    a bool mask, 1 byte per element (PyTorch's native_dropout); mask_dtype='float32' keeps the 4-byte
             mask of older frameworks, with the same values and gradients
  softmax    its output; keep_input=True also keeps its input, as PyTorch's did before 1.11
  attention  F.scaled_dot_product_attention keeps q, k, v, the output and one log-sum-exp per query row, O(L),
             where the eager composition keeps the (L, S) probabilities; its backward recomputes them, and
             draws its dropout mask again without moving minigrad's generator
Exact bytes are measured from the block's start (the 'start' event), as in test_profiler.py.
"""
import gc
import math

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


# ----------------------------------------------------------------------------- attention

def eager_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """The composition PyTorch documents, in minigrad's ops: it keeps the (..., L, S) probabilities."""
    L, S = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    att = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        att = att.masked_fill(mg.ones(L, S, dtype="bool").triu(1), float("-inf"))
    if attn_mask is not None and attn_mask.dtype == np.bool_:
        att = att.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        att = att + attn_mask
    att = att.softmax(dim=-1)
    if dropout_p > 0:
        att = F.dropout(att, dropout_p)
    return att @ v


def qkv(B=2, H=3, L=5, S=7, E=4, Ev=6, dtype="float64", requires_grad=True):
    return (mg.randn(B, H, L, E, dtype=dtype, requires_grad=requires_grad),
            mg.randn(B, H, S, E, dtype=dtype, requires_grad=requires_grad),
            mg.randn(B, H, S, Ev, dtype=dtype, requires_grad=requires_grad))


CASES = {
    "plain": {},
    "causal": dict(is_causal=True),
    "causal-square": dict(is_causal=True, square=True),
    "bool-mask": dict(attn_mask="bool"),
    "float-mask": dict(attn_mask="float"),
    "scale": dict(scale=0.3),
    "dropout": dict(dropout_p=0.3),
    "dropout-causal": dict(dropout_p=0.5, is_causal=True),
    "dropout-float-mask": dict(dropout_p=0.2, attn_mask="float"),
}


def case_inputs(case):
    kw = dict(CASES[case])
    square = kw.pop("square", False)
    q, k, v = qkv(L=7 if square else 5)
    mask = kw.get("attn_mask")
    if mask == "bool":  # broadcast over the batch; every row keeps at least one key (else eager gives nan)
        m = np.random.rand(q.shape[-2], k.shape[-2]) < 0.6
        m[:, 0] = True
        kw["attn_mask"] = mg.tensor(m)
    elif mask == "float":
        kw["attn_mask"] = mg.randn(3, q.shape[-2], k.shape[-2], dtype="float64", requires_grad=True)
    return (q, k, v), kw


@pytest.mark.parametrize("case", list(CASES))
def test_fused_attention_equals_the_eager_composition(case):
    """The same values and gradients to 1e-12 in float64, dropout included: both draw the same mask."""
    (q, k, v), kw = case_inputs(case)
    leaves = [q, k, v] + ([kw["attn_mask"]] if kw.get("attn_mask") is not None and
                          kw["attn_mask"].requires_grad else [])
    results = []
    for fn in (F.scaled_dot_product_attention, eager_attention):
        for t in leaves:
            t.grad = None
        mg.manual_seed(11)
        out = fn(q, k, v, **kw)
        out.backward(mg.tensor(np.random.default_rng(1).standard_normal(out.shape), dtype="float64"))
        results.append([out.detach().numpy()] + [t.grad.numpy() for t in leaves])
    for name, a, b in zip(["output", "dq", "dk", "dv", "dmask"], *results):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12, err_msg=f"{case}: {name}")


@pytest.mark.parametrize("dropout_p", [0.0, 0.25])
@pytest.mark.parametrize("dtype, itemsize", [("float32", 4), ("float64", 8)])
def test_fused_attention_keeps_o_of_l_per_row_not_l_times_s(dropout_p, dtype, itemsize):
    B, H, L, S, E = 2, 2, 48, 64, 8
    q, k, v = (mg.randn(B, H, n, E, dtype=dtype, requires_grad=True) for n in (L, S, S))
    kept = {}
    for name, fn in (("fused", F.scaled_dot_product_attention), ("eager", eager_attention)):
        with mg.profile() as prof:
            out = fn(q, k, v, dropout_p=dropout_p, is_causal=True)
            kept[name] = grown(prof)
            out.sum().backward()
        assert grown(prof) == 0, name  # backward freed everything
        del out
    inputs = (B * H * (L + S + S) * E) * itemsize
    lse = B * H * L * itemsize                       # one log-sum-exp per query row
    assert kept["fused"] == inputs + B * H * L * E * itemsize + lse  # q, k, v, the output, lse: no mask
    # the eager composition keeps the probabilities (and, with dropout, the dropped ones and a 1-byte mask)
    assert kept["eager"] >= inputs + B * H * L * S * itemsize


def test_fused_attention_keeps_a_float32_log_sum_exp_for_float16():
    q, k, v = qkv(B=1, H=2, L=4, S=6, E=8, Ev=8, dtype="float16")
    out = F.scaled_dot_product_attention(q, k, v)
    lse = out.grad_fn.saved[-1]
    assert out.dtype == np.float16 and lse.dtype == np.float32 and lse.shape == (1, 2, 4)
    out.float().sum().backward()
    assert q.grad.dtype == np.float16
    q64, k64, v64 = (t.detach().double() for t in (q, k, v))
    want = F.scaled_dot_product_attention(q64, k64, v64).numpy()
    np.testing.assert_allclose(out.detach().numpy().astype(np.float64), want, atol=2e-3)


def test_fused_attention_backward_does_not_move_the_generator():
    q, k, v = qkv()
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    state = mg.get_rng_state()
    out.sum().backward(retain_graph=True)
    assert mg.get_rng_state() == state
    first = q.grad.numpy().copy()
    q.grad = None
    out.sum().backward()  # the same mask again, from the state the forward kept
    np.testing.assert_array_equal(q.grad.numpy(), first)
    assert mg.get_rng_state() == state


def test_fused_attention_with_dropout_under_checkpoint_is_bit_identical():
    q, k, v = qkv()
    lin = nn.Linear(6, 6).to("float64")

    def block(q, k, v):
        return lin(F.scaled_dot_product_attention(q, k, v, dropout_p=0.4, is_causal=True))

    grads = []
    for ckpt in (False, True):
        for t in (q, k, v, lin.weight, lin.bias):
            t.grad = None
        mg.manual_seed(3)
        out = mg.checkpoint(block, q, k, v) if ckpt else block(q, k, v)
        out.sum().backward()
        grads.append([t.grad.numpy() for t in (q, k, v, lin.weight, lin.bias)] + [mg.get_rng_state()])
    for a, b in zip(grads[0][:-1], grads[1][:-1]):
        np.testing.assert_array_equal(a, b)
    assert grads[0][-1] == grads[1][-1]  # the generator ends where the plain run leaves it


def test_a_query_that_may_attend_to_nothing_gets_zeros():
    q, k, v = qkv(B=1, H=1, L=3, S=4)
    mask = np.ones((3, 4), dtype=bool)
    mask[1] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mg.tensor(mask))
    out.sum().backward()
    assert np.isfinite(out.detach().numpy()).all() and np.isfinite(q.grad.numpy()).all()
    np.testing.assert_array_equal(out.detach().numpy()[0, 0, 1], 0)
    np.testing.assert_array_equal(q.grad.numpy()[0, 0, 1], 0)


def test_fused_attention_flops_follow_the_documented_formula():
    B, H, L, S, E, Ev = 2, 3, 5, 7, 4, 6
    q, k, v = qkv(B, H, L, S, E, Ev)
    with mg.profile() as prof:
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).sum().backward()
    n = B * H * L * S
    assert prof.flops("forward", op="matmul") == 2 * n * (E + Ev)
    assert prof.flops("forward", op="sdpa") == (6 + 2) * n + 2 * B * H * L
    # the scores again, then dv, dP, dq, dk: the recompute counts in backward, as a fused kernel's does; per score 3
    # for P again and 5 for D = rowsum(P dP) and dS (docs/ledger.md), 2 per dropout applied to each
    assert prof.flops("backward", op="matmul") == 2 * n * E + 2 * (2 * n * Ev) + 2 * (2 * n * E)
    assert prof.flops("backward", op="sdpa") == (3 + 2) * n + (5 + 2) * n
    assert prof.flops("recompute") == 0
