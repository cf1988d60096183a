"""Generated calls of the nn functions and optimizers, run in minigrad and in PyTorch (float64) side by side: hypothesis
draws the options and shapes that the single-case tests (test_torch_compare.py, test_ops_parity.py,
test_optim_parity.py) fix by hand, and every value and gradient must be PyTorch's.

  attention    scaled_dot_product_attention with masks of every broadcastable shape (bool, or float that requires
               grad), is_causal with L != S, scale, broadcast batches; with dropout, against the eager composition
               in minigrad (PyTorch's stream is not minigrad's)

Found by them (each fixed, with the test that caught it): a float attn_mask of the scores' full shape got its
gradient times the scale (backward scaled dS in place after handing it to the mask unsummed).
"""
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import minigrad as mg
import minigrad.functional as F

from test_generated_programs_vs_torch import PROGRAMS, check_close, leaf, torch, TF  # noqa: F401  (skips without torch)
from test_saved_like_pytorch import eager_attention

pytestmark = pytest.mark.torch
CHEAP = settings(PROGRAMS, max_examples=40)


# ----------------------------------------------------------------------------- attention

@st.composite
def attention(draw):
    """(q, k, v shapes, mask kind, mask shape, keyword arguments): k and v may broadcast against q's batch, and the
    mask has the scores' full shape (nothing summed away in its gradient) or any shape that broadcasts to it."""
    batch = draw(st.lists(st.integers(1, 3), max_size=2).map(tuple))
    L, S, E, Ev = (draw(st.integers(1, 4)) for _ in range(4))
    kv = tuple(draw(st.sampled_from([1, n])) for n in batch)
    kind = draw(st.sampled_from(["none", "causal", "bool", "float", "float"]))
    full = batch + (L, S)
    cut = draw(st.integers(0, len(full)))
    mask_shape = draw(st.sampled_from([full, tuple(draw(st.sampled_from([1, n])) for n in full[cut:])]))
    kw = {"is_causal": True} if kind == "causal" else {}
    scale = draw(st.sampled_from([None, None, 0.3, 2.0]))
    if scale is not None:
        kw["scale"] = scale
    return (batch + (L, E), kv + (S, E), kv + (S, Ev)), kind, mask_shape, kw


def attention_inputs(case, seed):
    (sq, sk, sv), kind, mask_shape, kw = case
    rng = np.random.default_rng(seed)
    pairs = [leaf(rng.standard_normal(s)) for s in (sq, sk, sv)]
    mask = None
    if kind == "bool":
        m = np.array(rng.random(mask_shape) < 0.6)
        if m.ndim:
            m[..., 0] = True  # every query attends to a key (the eager composition's softmax would be nan)
        else:
            m = np.array(True)
        mask = leaf(m.astype(np.float64), requires_grad=False)
        mask.m, mask.t = mask.m.bool(), mask.t.bool()
    elif kind == "float":
        mask = leaf(rng.standard_normal(mask_shape))
    return pairs, mask, kw


@CHEAP
@example(case=(((2, 3, 4), (2, 5, 4), (2, 5, 4)), "float", (2, 3, 5), {}), seed=0)  # the scores' full shape
@given(case=attention(), seed=st.integers(0, 2 ** 16))
def test_attention_matches_torch(case, seed):
    pairs, mask, kw = attention_inputs(case, seed)
    leaves = pairs + ([mask] if mask is not None and mask.t.requires_grad else [])
    extra = lambda p: {} if mask is None else {"attn_mask": getattr(mask, p)}  # noqa: E731
    out_m = F.scaled_dot_product_attention(*(p.m for p in pairs), **extra("m"), **kw)
    out_t = TF.scaled_dot_product_attention(*(p.t for p in pairs), **extra("t"), **kw)
    check_close(out_m, out_t, "the output")
    cotangent = np.random.default_rng(seed + 1).standard_normal(out_t.shape)
    out_m.backward(mg.tensor(cotangent, dtype="float64"))
    out_t.backward(torch.tensor(cotangent))
    for name, p in zip(["query", "key", "value", "attn_mask"], leaves):
        check_close(p.m.grad, p.t.grad, f"the gradient of {name}")


@CHEAP
@given(case=attention(), p=st.sampled_from([0.2, 0.5]), seed=st.integers(0, 2 ** 16))
def test_attention_with_dropout_is_the_eager_composition(case, p, seed):
    """Fused and eager draw the same dropout mask from one seed when their scores have one shape: v's batch is then
    no larger than q's and k's."""
    (sq, sk, _), kind, mask_shape, kw = case
    case = ((sq, sk, sk[:-1] + (case[0][2][-1],)),) + case[1:]
    pairs, mask, kw = attention_inputs(case, seed)
    leaves = [x.m for x in pairs] + ([mask.m] if mask is not None and mask.m.requires_grad else [])
    kw = dict(kw, dropout_p=p, **({} if mask is None else {"attn_mask": mask.m}))
    cotangent = mg.tensor(np.random.default_rng(seed + 1).standard_normal(pairs[0].shape[:-1] + pairs[2].shape[-1:]),
                          dtype="float64")
    results = []
    for fn in (F.scaled_dot_product_attention, eager_attention):
        for t in leaves:
            t.grad = None
        mg.manual_seed(seed)
        out = fn(*(x.m for x in pairs), **kw)
        out.backward(cotangent.expand(*out.shape))
        results.append([out] + [t.grad for t in leaves])
    for name, fused, eager in zip(["output", "query", "key", "value", "attn_mask"], *results):
        check_close(fused, eager, f"{name} with dropout")
