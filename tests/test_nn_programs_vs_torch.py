"""Generated calls of the nn functions and optimizers, run in minigrad and in PyTorch (float64) side by side: hypothesis
draws the options and shapes that the single-case tests (test_torch_compare.py, test_ops_parity.py,
test_optim_parity.py) fix by hand, and every value and gradient must be PyTorch's.

  losses       cross_entropy (class indices or probabilities), nll_loss, mse_loss, l1_loss and
               binary_cross_entropy_with_logits with every option, (N, C, d1, ...) inputs, the options given by
               keyword or by position in PyTorch's order (size_average and reduce, PyTorch's legacy pair, included)
  layer_norm   over the last 1 ... all dims, with a weight, a bias, both or neither; embedding with padding_idx
  optimizers   SGD and AdamW with two param groups of their own options, a hyperparameter written between steps (as a
               schedule does), gradients that are None or zero, zero_grad(set_to_none) either way, and a state_dict
               saved and loaded into a new optimizer mid-run: every parameter after every step, to 1e-12
  attention    scaled_dot_product_attention with masks of every broadcastable shape (bool, or float that requires
               grad), is_causal with L != S, scale, broadcast batches; with dropout, against the eager composition
               in minigrad (PyTorch's stream is not minigrad's)

Found by them (each fixed, with the test that caught it): the losses took their options in another order than
PyTorch's (no size_average or reduce), so that F.cross_entropy(x, t, w, False), PyTorch's sum, ignored class 0;
cross_entropy ignored ignore_index with probability targets, where PyTorch refuses it; a weight or pos_weight that
grew binary_cross_entropy_with_logits' loss beyond the input's shape, a layer_norm weight or bias not of
normalized_shape, and an embedding weight not 2-d were taken (PyTorch refuses them); a float attn_mask of the scores'
full shape got its gradient times the scale (backward scaled dS in place after handing it to the mask unsummed).
Where PyTorch refuses a call, minigrad must refuse it too (same_or_refused).
"""
import inspect
import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import minigrad as mg
import minigrad.functional as F

from test_generated_programs_vs_torch import PROGRAMS, TF, check_close, host, leaf, torch  # (skips without torch)
from test_saved_like_pytorch import eager_attention

pytestmark = pytest.mark.torch
CHEAP = settings(PROGRAMS, max_examples=40)


def same_or_refused(mine, theirs):
    """(minigrad's result, PyTorch's), or (None, None) where PyTorch refuses the call: minigrad must refuse it too (a
    wrong shape, ignore_index with probabilities), not give a value PyTorch has none for."""
    try:
        out_t = theirs()
    except (RuntimeError, AssertionError):  # PyTorch asserts on F.embedding's padding_idx
        with pytest.raises((RuntimeError, ValueError)):  # minigrad's ShapeError is both
            mine()
        return None, None
    return mine(), out_t


# ----------------------------------------------------------------------------- losses

LOSSES = ("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy_with_logits")


@st.composite
def loss_calls(draw):
    """(name, input shape, target kind, options): every option the loss takes, its legacy pair included."""
    name = draw(st.sampled_from(LOSSES))
    classes = name in ("cross_entropy", "nll_loss")
    if classes:
        shape = draw(st.sampled_from([(draw(st.integers(1, 4)),), (draw(st.integers(1, 3)), draw(st.integers(1, 4))),
                                      tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(3, 4))))]))
    else:
        shape = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 3))))
    c = shape[0 if len(shape) == 1 else 1] if classes else None
    target = "probabilities" if name == "cross_entropy" and draw(st.booleans()) else "indices" if classes else "floats"
    options = {"size_average": draw(st.sampled_from([None, None, True, False])),
               "reduce": draw(st.sampled_from([None, None, True, False])),
               "reduction": draw(st.sampled_from(["mean", "sum", "none"]))}
    if classes:
        options["weight"] = draw(st.sampled_from([None, (c,)]))
        options["ignore_index"] = draw(st.sampled_from([-100, 0, c - 1]))
    if name == "cross_entropy":
        options["label_smoothing"] = draw(st.sampled_from([0.0, 0.2, 1.0]))
    if name == "binary_cross_entropy_with_logits":
        options["weight"] = draw(st.sampled_from([None, shape, shape[draw(st.integers(0, len(shape))):], (2,) + shape]))
        options["pos_weight"] = draw(st.sampled_from([None, shape[-1:], (2, 1)]))  # the last: the loss would grow
    return name, shape, target, options


def loss_arguments(name, shape, target, options, seed):
    """The input Pair, the target Pair and the options (a shape becomes a Pair of that shape, not requiring grad)."""
    rng = np.random.default_rng(seed)
    x = leaf(rng.standard_normal(shape) * 2)
    if target == "indices":
        c = shape[0 if len(shape) == 1 else 1]
        t = rng.integers(0, c, shape[:1] + shape[2:] if len(shape) > 1 else ())
        if t.ndim:
            t.reshape(-1)[::3] = options["ignore_index"]  # some ignored, where ignore_index is a class or not
        y = leaf(t, requires_grad=False)
        y.m, y.t = y.m.long(), y.t.long()
    else:  # probabilities (cross_entropy's along the class dim) or [0, 1] targets, with a gradient of their own
        y = leaf(rng.dirichlet(np.ones(shape[1 if len(shape) > 1 else 0]), size=shape[:1] + shape[2:]).reshape(
            shape[:1] + shape[2:] + shape[1:2]).transpose(0, -1, *range(1, len(shape) - 1)) if target ==
            "probabilities" and len(shape) > 1 else rng.dirichlet(np.ones(shape[0])) if target == "probabilities"
            else rng.uniform(0, 1, shape))
    made = {k: leaf(rng.uniform(0.2, 2.0, v), requires_grad=False) if k in ("weight", "pos_weight") and v is not None
            else v for k, v in options.items()}
    return x, y, made


@CHEAP
@example(call=("cross_entropy", (4, 3), "indices", dict(size_average=False, reduce=None, reduction="mean",
                                                        weight=(3,), ignore_index=-100, label_smoothing=0.0)),
         positional=2, seed=0)  # PyTorch's sum, where the options came in another order: class 0 was ignored
@example(call=("cross_entropy", (2, 3), "probabilities", dict(size_average=None, reduce=None, reduction="mean",
                                                              weight=None, ignore_index=0, label_smoothing=0.0)),
         positional=0, seed=0)  # PyTorch refuses ignore_index with probabilities; minigrad ignored it
@given(call=loss_calls(), positional=st.integers(0, 8), seed=st.integers(0, 2 ** 16))
def test_losses_match_torch(call, positional, seed):
    """The first `positional` options go by position, in the order of PyTorch's signature, the rest by keyword."""
    name, shape, target, options = call
    x, y, made = loss_arguments(name, shape, target, options, seed)
    order = [p for p in inspect.signature(getattr(TF, name)).parameters if p in made]
    legacy = options["size_average"] is not None or options["reduce"] is not None
    def call(lib, fn):
        value = lambda k: getattr(made[k], lib) if hasattr(made[k], lib) else made[k]  # noqa: E731
        args = [value(k) for k in order[:positional]]
        kwargs = {k: value(k) for k in order[positional:]}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fn(getattr(x, lib), getattr(y, lib), *args, **kwargs)
        assert any("size_average and reduce" in str(w.message) for w in caught) == legacy, lib
        return out

    out_m, out_t = same_or_refused(lambda: call("m", getattr(F, name)), lambda: call("t", getattr(TF, name)))
    if out_t is None:
        return
    check_close(out_m, out_t, f"{name}'s value")
    cotangent = np.random.default_rng(seed + 1).standard_normal(out_t.shape)
    out_m.backward(mg.tensor(cotangent, dtype="float64"))
    out_t.backward(torch.tensor(cotangent))
    check_close(x.m.grad, x.t.grad, f"{name}'s gradient of the input")
    if y.t.requires_grad:
        check_close(y.m.grad, y.t.grad, f"{name}'s gradient of the target")


# ----------------------------------------------------------------------------- layer_norm and embedding

@CHEAP
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple), data=st.data(), seed=st.integers(0, 99))
def test_layer_norm_matches_torch(shape, data, seed):
    """Over the last 1 ... all dims, with a weight, a bias, both or neither; or a weight or bias of another shape
    than normalized_shape, which both refuse (a broadcast one gave a value, then an error in backward)."""
    normalized = shape[len(shape) - data.draw(st.integers(1, len(shape))):]
    given_as = data.draw(st.sampled_from([tuple, list]))  # PyTorch's F.layer_norm takes no int (its nn.LayerNorm does)
    params = {k: normalized for k in data.draw(st.sampled_from([(), ("weight",), ("bias",), ("weight", "bias")]))}
    if params and data.draw(st.booleans()):
        params[data.draw(st.sampled_from(sorted(params)))] = data.draw(st.sampled_from([(1,), (1,) + normalized,
                                                                                         normalized[1:]]))
    eps = data.draw(st.sampled_from([1e-5, 0.5]))
    rng = np.random.default_rng(seed)
    x = leaf(rng.standard_normal(shape))
    ps = {k: leaf(rng.standard_normal(v)) for k, v in params.items()}
    out_m, out_t = same_or_refused(
        lambda: F.layer_norm(x.m, given_as(normalized), **{k: p.m for k, p in ps.items()}, eps=eps),
        lambda: TF.layer_norm(x.t, given_as(normalized), **{k: p.t for k, p in ps.items()}, eps=eps))
    if out_t is None:
        return
    check_close(out_m, out_t, "layer_norm's value")
    cotangent = rng.standard_normal(shape)
    out_m.backward(mg.tensor(cotangent, dtype="float64"))
    out_t.backward(torch.tensor(cotangent))
    for name, p in [("input", x)] + sorted(ps.items()):
        check_close(p.m.grad, p.t.grad, f"layer_norm's gradient of {name}")


@CHEAP
@given(n=st.integers(1, 5), weight_shape=st.sampled_from(["2-d", "2-d", "1-d", "3-d"]),
       index_shape=st.lists(st.integers(0, 3), max_size=3).map(tuple), padding=st.integers(-6, 5),
       seed=st.integers(0, 99))
def test_embedding_matches_torch(n, weight_shape, index_shape, padding, seed):
    """padding_idx negative, positive or None (out of range: both refuse); a weight that is not 2-d: both refuse."""
    rng = np.random.default_rng(seed)
    w = leaf(rng.standard_normal({"2-d": (n, 3), "1-d": (n,), "3-d": (n, 2, 2)}[weight_shape]))
    i = leaf(rng.integers(0, n, index_shape), requires_grad=False)
    i.m, i.t = i.m.long(), i.t.long()
    pad = None if padding == 5 else padding
    out_m, out_t = same_or_refused(lambda: F.embedding(i.m, w.m, padding_idx=pad),
                                   lambda: TF.embedding(i.t, w.t, padding_idx=pad))
    if out_t is None:
        return
    check_close(out_m, out_t, "embedding's value")
    cotangent = rng.standard_normal(out_t.shape)
    out_m.backward(mg.tensor(cotangent, dtype="float64"))
    out_t.backward(torch.tensor(cotangent))
    check_close(w.m.grad, w.t.grad, "embedding's gradient")


# ----------------------------------------------------------------------------- optimizers

SHAPES = [(3, 2), (4,), (2, 2), (1,)]
SGD_OPTIONS = {"momentum": [0.0, 0.9], "dampening": [0.0, 0.3], "nesterov": [False, True], "weight_decay": [0.0, 0.1],
               "maximize": [False, True], "lr": [0.0, 0.1]}
ADAMW_OPTIONS = {"betas": [(0.9, 0.999), (0.5, 0.9), (0.0, 0.0)], "eps": [1e-8, 1e-3], "weight_decay": [0.0, 1.0],
                 "amsgrad": [False, True], "maximize": [False, True], "lr": [0.0, 0.1]}


@st.composite
def optimizer_runs(draw):
    """(kind, constructor options, the two groups' options, which parameters each group holds, the steps); a step is
    (hyperparameter written or None, set_to_none, the parameters that get a gradient, reload the state_dict first)."""
    kind = draw(st.sampled_from(["SGD", "AdamW"]))
    table = SGD_OPTIONS if kind == "SGD" else ADAMW_OPTIONS
    options = st.fixed_dictionaries({k: st.sampled_from([None] + v) for k, v in table.items()}).map(
        lambda d: {k: v for k, v in d.items() if v is not None})  # each option left out, or one of its values
    top, groups = draw(options), [draw(options), draw(options)]
    if kind == "SGD":  # nesterov needs momentum > 0 and dampening 0: where a group would not have them, it is off
        for g in groups:
            both = {**top, **g}
            if both.get("nesterov") and (not both.get("momentum") or both.get("dampening")):
                g["nesterov"] = False
        top["nesterov"] = top.get("nesterov", False) and bool(top.get("momentum")) and not top.get("dampening")
    cut = draw(st.integers(1, len(SHAPES) - 1))
    order = draw(st.permutations(range(len(SHAPES))))
    step = st.tuples(st.one_of(st.none(), st.tuples(st.integers(0, 1), st.sampled_from(["lr", "beta1"]),
                                                    st.floats(0.01, 0.2))),  # momentum > 0: nesterov may be on
                     st.booleans(), st.sets(st.integers(0, len(SHAPES) - 1)), st.booleans())
    return kind, top, groups, (order[:cut], order[cut:]), draw(st.lists(step, min_size=2, max_size=5))


@CHEAP
@given(run=optimizer_runs(), seed=st.integers(0, 99))
def test_optimizers_match_torch(run, seed):
    kind, top, options, (first, second), steps = run
    rng = np.random.default_rng(seed)
    ps = [leaf(rng.standard_normal(s)) for s in SHAPES]
    lib = {"m": mg.optim, "t": torch.optim}

    def make(side):
        groups = [{"params": [getattr(ps[i], side) for i in ids], **o} for ids, o in zip((first, second), options)]
        return getattr(lib[side], kind)(groups, **top)

    opt = {side: make(side) for side in "mt"}
    for n, (write, set_to_none, used, reload) in enumerate(steps):
        if reload:  # PyTorch's order: a new optimizer, then the saved state (its hyperparameters too)
            saved = {side: opt[side].state_dict() for side in "mt"}
            opt = {side: make(side) for side in "mt"}
            for side in "mt":
                opt[side].load_state_dict(saved[side])
        if write is not None:  # as a schedule does between steps (OneCycleLR moves beta1)
            group, key, value = write
            for side in "mt":
                g = opt[side].param_groups[group]
                if key == "lr":
                    g["lr"] = value
                elif kind == "AdamW":
                    g["betas"] = (value * 4, g["betas"][1])
                else:
                    g["momentum"] = value * 4
        for side in "mt":
            opt[side].zero_grad(set_to_none=set_to_none)
        weights = [rng.standard_normal(s) * (10.0 if n % 2 else 1.0) for s in SHAPES]  # Adam's v falls, then
        for side, lib_ in (("m", mg), ("t", torch)):
            w = [lib_.tensor(a) for a in weights]
            loss = sum(((getattr(ps[i], side) - 0.3) ** 2 * w[i] + getattr(ps[i], side) ** 3 * 0.1).sum()
                       for i in sorted(used))
            if used:
                loss.backward()
            opt[side].step()
        for i, p in enumerate(ps):
            np.testing.assert_allclose(host(p.m), host(p.t), rtol=1e-12, atol=1e-15,
                                       err_msg=f"{kind}: parameter {i} after step {n + 1}")


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
    cut = draw(st.integers(0, len(full) - 2))  # at least (L, S): PyTorch's bool masks of fewer dims raise, some of them
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
