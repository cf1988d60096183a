"""Modules (parameters, state, train/eval, the layers) and optimizers, against hand-written NumPy."""
import math

import numpy as np
import pytest
from scipy import stats

import minigrad as mg
from minigrad import nn
from minigrad.gpt import GPT, GPTConfig

from on_device import DEVICE, to_host


def mlp():
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def tiny_gpt(**kw):
    cfg = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8)
    cfg.update(kw)
    return GPT(GPTConfig(**cfg)).to(mg.default_device())  # see test_devices.py: GPT init is host-only


# ----------------------------------------------------------------------------- parameters and names

def test_sequential_parameter_names_and_order():
    m = mlp()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias"]
    params = list(m.parameters())
    assert params[0] is m[0].weight and params[1] is m[0].bias
    assert params[2] is m[2].weight and params[3] is m[2].bias
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in params)


def test_gpt_parameter_names():
    model = tiny_gpt()
    names = [n for n, _ in model.named_parameters()]
    block = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
             "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
             "mlp.c_proj.weight", "mlp.c_proj.bias"]
    expected = (["wte.weight", "wpe.weight"] + [f"h.{i}.{b}" for i in range(2) for b in block]
                + ["ln_f.weight", "ln_f.bias", "lm_head.weight"])
    assert names == expected
    params = dict(model.named_parameters())
    assert params["h.0.attn.c_attn.weight"] is model.h[0].attn.c_attn.weight
    assert params["h.0.attn.c_attn.weight"].shape == (3 * 8, 8)
    assert params["h.1.mlp.c_fc.weight"].shape == (4 * 8, 8)
    C, V, T = 8, 11, 8
    per_block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C)
    assert model.num_parameters() == V * C + T * C + 2 * per_block + 2 * C + V * C


def test_shared_parameters_appear_once():
    lin = nn.Linear(3, 3)
    m = nn.Sequential(lin, nn.ReLU(), lin)
    assert [n for n, _ in m.named_parameters()] == ["0.weight", "0.bias"]
    assert len(list(m.parameters())) == 2

    class Tied(nn.Module):
        def __init__(self):
            self.emb = nn.Embedding(5, 3)
            self.head = nn.Linear(3, 5, bias=False)
            self.head.weight = self.emb.weight

    t = Tied()
    assert [n for n, _ in t.named_parameters()] == ["emb.weight"]
    assert len({id(p) for p in t.parameters()}) == len(list(t.parameters())) == 1


def test_private_attributes_and_plain_tensors_are_not_parameters():
    class M(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(mg.randn(2))
            self._hidden = nn.Parameter(mg.randn(2))
            self.buf = mg.zeros(2)

    m = M()
    assert [n for n, _ in m.named_parameters()] == ["w"]
    assert [n for n, _ in m.named_buffers()] == ["buf"]


# ----------------------------------------------------------------------------- zero_grad, train/eval, to

def _backward(m, x):
    m(x).sum().backward()


def test_zero_grad_set_to_none():
    m = mlp()
    _backward(m, mg.randn(5, 3))
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m.zero_grad(set_to_none=True)  # again: nothing to clear, no error
    assert all(p.grad is None for p in m.parameters())


def test_zero_grad_in_place():
    m = mlp()
    x = mg.randn(5, 3)
    _backward(m, x)
    bufs = [p.grad for p in m.parameters()]
    m.zero_grad(set_to_none=False)
    for p, b in zip(m.parameters(), bufs):
        assert p.grad is b
        assert not p.grad.numpy().any()
    _backward(m, x)
    first = [p.grad.numpy().copy() for p in m.parameters()]
    m.zero_grad(set_to_none=False)
    _backward(m, x)
    for p, f in zip(m.parameters(), first):
        np.testing.assert_array_equal(p.grad.numpy(), f)  # zeroed, not accumulated


def test_train_eval_recurse():
    model = tiny_gpt(dropout=0.1)
    assert all(m.training for m in model.modules())
    assert model.eval() is model
    assert not any(m.training for m in model.modules())
    assert not model.h[1].attn.attn_dropout.training
    model.train()
    assert all(m.training for m in model.modules())
    model.train(False)
    assert not any(m.training for m in model.modules())


def test_to_float64_changes_parameter_and_buffer_dtypes():
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 2))
    _backward(m, mg.randn(5, 3))
    grads = [to_host(p.grad) for p in m.parameters()]
    assert m.to("float64") is m
    assert all(p.dtype == np.float64 for p in m.parameters())
    # the gradients are cast with the parameters, as PyTorch's, so the next step still steps by them
    assert all(p.grad.dtype == np.float64 and (to_host(p.grad) == g).all() for p, g in zip(m.parameters(), grads))
    m.zero_grad()
    assert m[1].running_mean.dtype == np.float64 and m[1].running_var.dtype == np.float64
    assert m[1].num_batches_tracked.dtype == np.int64  # integers are not cast
    out = m(mg.randn(5, 3, dtype="float64"))
    assert out.dtype == np.float64
    out.sum().backward()
    assert all(p.grad.dtype == np.float64 for p in m.parameters())
    assert all(p.requires_grad for p in m.parameters())
    m.to(dtype="float32")
    assert all(p.dtype == np.float32 for p in m.parameters())


# ----------------------------------------------------------------------------- state_dict

def test_state_dict_roundtrip_gives_identical_outputs():
    mg.manual_seed(1)
    a = tiny_gpt()
    mg.manual_seed(2)
    b = tiny_gpt()
    idx = mg.randint(0, 11, (2, 8))
    assert not np.array_equal(a(idx).detach().numpy(), b(idx).detach().numpy())
    sd = a.state_dict()
    assert list(sd) == [n for n, _ in a.named_parameters()]
    assert all(mg.backend.is_array(v) and mg.backend.device_of(v) == DEVICE for v in sd.values())  # raw arrays
    assert b.load_state_dict(sd) == ([], [])  # PyTorch's (missing_keys, unexpected_keys)
    np.testing.assert_array_equal(a(idx).detach().numpy(), b(idx).detach().numpy())
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert na == nb and pa.data is not pb.data  # copied, not shared
        np.testing.assert_array_equal(to_host(pa.data), to_host(pb.data))


def test_state_dict_is_a_copy():
    m = mlp()
    sd = m.state_dict()
    sd["0.weight"][...] = 0.0
    assert m[0].weight.detach().numpy().any()
    m2 = mlp()
    m2.load_state_dict(m.state_dict())
    m[0].weight.data[...] = 7.0  # the loaded model does not alias the source either
    assert not (m2[0].weight.detach().numpy() == 7.0).any()


def test_state_dict_includes_buffers():
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    m(mg.randn(6, 3))  # updates the running stats
    sd = m.state_dict()
    assert set(sd) == {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                       "1.num_batches_tracked"}
    m2 = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    m2.load_state_dict(sd)
    np.testing.assert_array_equal(m2[1].running_mean.numpy(), m[1].running_mean.numpy())
    assert int(m2[1].num_batches_tracked.item()) == 1
    m.eval(), m2.eval()
    x = mg.randn(4, 3)
    np.testing.assert_array_equal(m(x).detach().numpy(), m2(x).detach().numpy())


def test_load_state_dict_strict_missing_and_unexpected_keys():
    m = mlp()
    sd = m.state_dict()
    del sd["2.bias"]
    with pytest.raises(RuntimeError, match=r"load_state_dict for Sequential: missing keys \['2.bias'\]"):
        mlp().load_state_dict(sd)
    sd = m.state_dict()
    sd["3.weight"] = np.zeros((2, 2), np.float32)
    with pytest.raises(RuntimeError, match=r"unexpected keys \['3.weight'\]"):
        mlp().load_state_dict(sd)
    # non-strict: loads what matches, ignores the rest
    m2 = mlp()
    del sd["0.bias"]
    missing, unexpected = m2.load_state_dict(sd, strict=False)  # PyTorch's pair, not the module (a Sequential
    assert (missing, unexpected) == (["0.bias"], ["3.weight"])  # unpacked into its first two layers, silently)
    np.testing.assert_array_equal(to_host(m2[0].weight.data), to_host(m[0].weight.data))
    assert repr(m2.load_state_dict(m.state_dict())) == "<All keys matched successfully>"


@pytest.mark.torch
def test_load_state_dict_returns_and_raises_as_pytorchs():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.Linear(3, 2), torch.nn.Linear(3, 2)
    for strict in (True, False):
        for sd in ({"weight": np.zeros((2, 3), np.float32)}, {"weight": np.zeros((2, 3), np.float32), "bias": 0, "x": 0},
                   {"weight": np.zeros((2, 3), np.float32), "bias": np.zeros(2, np.float32)}):
            raised = []
            for module, wrap in ((ours, lambda a: a), (theirs, lambda a: torch.as_tensor(a))):
                try:
                    got = module.load_state_dict({k: wrap(v) for k, v in sd.items()}, strict=strict)
                    raised.append((tuple(got), repr(got) == "<All keys matched successfully>"))
                except RuntimeError:
                    raised.append(RuntimeError)
            assert raised[0] == raised[1], (strict, list(sd))


def test_load_state_dict_wrong_shape():
    sd = mlp().state_dict()
    sd["2.weight"] = np.zeros((3, 4), np.float32)
    sd["0.weight"] = sd["0.weight"] + 1
    model = mlp()
    before = to_host(model[0].weight.data).copy()
    with pytest.raises(RuntimeError, match=r"2\.weight has shape \(2, 4\) here but \(3, 4\)"):  # PyTorch's class
        model.load_state_dict(sd)
    np.testing.assert_array_equal(to_host(model[0].weight.data), before)  # all or nothing: no key was written


def test_load_state_dict_keeps_the_models_dtype():
    m = mlp().to("float64")
    m.load_state_dict(mlp().state_dict())  # float32 arrays into a float64 model
    assert all(p.dtype == np.float64 for p in m.parameters())


# ----------------------------------------------------------------------------- Sequential

def test_sequential_indexing_len_iteration():
    l0, act, l2 = nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)
    m = nn.Sequential(l0, act, l2)
    assert len(m) == 3
    assert m[0] is l0 and m[1] is act and m[2] is l2 and m[-1] is l2
    assert list(m) == [l0, act, l2]
    tail = m[1:]
    assert isinstance(tail, nn.Sequential) and len(tail) == 2 and tail[0] is act and tail[1] is l2
    x = mg.randn(5, 3)
    np.testing.assert_array_equal(m(x).detach().numpy(), l2(act(l0(x))).detach().numpy())
    np.testing.assert_array_equal(tail(l0(x)).detach().numpy(), m(x).detach().numpy())


# ----------------------------------------------------------------------------- Linear, Embedding

def test_linear_shapes_and_forward():
    lin = nn.Linear(5, 3)
    assert lin.weight.shape == (3, 5) and lin.bias.shape == (3,)
    assert lin.weight.dtype == np.float32
    x = mg.randn(4, 5)
    np.testing.assert_allclose(lin(x).detach().numpy(),
                               x.numpy() @ lin.weight.detach().numpy().T + lin.bias.detach().numpy(), rtol=1e-6)
    x3 = mg.randn(2, 4, 5)
    assert lin(x3).shape == (2, 4, 3)
    assert nn.Linear(5, 3, bias=False).bias is None
    assert [n for n, _ in nn.Linear(5, 3, bias=False).named_parameters()] == ["weight"]


def test_linear_default_init_is_uniform_within_bound():
    fan_in = 64
    lin = nn.Linear(fan_in, 256)
    bound = 1 / math.sqrt(fan_in)
    w = lin.weight.detach().numpy().ravel().astype(np.float64)
    b = lin.bias.detach().numpy().astype(np.float64)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.99 * bound  # fills the range
    assert abs(w.mean()) < 0.02 * bound
    assert abs(w.var() - bound ** 2 / 3) < 0.05 * bound ** 2 / 3
    assert stats.kstest(w, stats.uniform(loc=-bound, scale=2 * bound).cdf).pvalue > 1e-3
    assert stats.kstest(b, stats.uniform(loc=-bound, scale=2 * bound).cdf).pvalue > 1e-3


def test_linear_init_is_deterministic_under_manual_seed():
    mg.manual_seed(7)
    a = nn.Linear(4, 4)
    mg.manual_seed(7)
    b = nn.Linear(4, 4)
    np.testing.assert_array_equal(to_host(a.weight.data), to_host(b.weight.data))


def test_embedding():
    emb = nn.Embedding(50, 16)
    assert emb.weight.shape == (50, 16) and emb.weight.requires_grad
    w = emb.weight.detach().numpy()
    assert abs(w.mean()) < 0.05 and abs(w.std() - 1) < 0.05  # N(0, 1), as in PyTorch
    idx = mg.tensor([[3, 7, 3], [0, 49, 3]])
    out = emb(idx)
    assert out.shape == (2, 3, 16)
    np.testing.assert_array_equal(out.detach().numpy(), w[idx.numpy()])
    out.sum().backward()
    counts = np.zeros(50)
    np.add.at(counts, idx.numpy().ravel(), 1)
    np.testing.assert_array_equal(emb.weight.grad.numpy(), np.repeat(counts[:, None], 16, axis=1))


# ----------------------------------------------------------------------------- Dropout

def test_dropout_train_zeros_about_p_and_scales():
    p = 0.3
    d = nn.Dropout(p)
    x = mg.ones(200, 500)
    y = d(x).numpy()
    frac = (y == 0).mean()
    assert abs(frac - p) < 0.01
    np.testing.assert_allclose(y[y != 0], 1 / (1 - p), rtol=1e-6)
    assert abs(y.mean() - 1) < 0.02  # the expectation is kept


def test_dropout_backward_uses_the_same_mask():
    x = mg.randn(50, 40, requires_grad=True)
    y = nn.Dropout(0.5)(x)
    y.sum().backward()
    mask = y.detach().numpy() / x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), mask, rtol=1e-6)
    assert set(np.unique(np.round(x.grad.numpy(), 5))) <= {0.0, 2.0}


def test_dropout_deterministic_under_manual_seed():
    x = mg.ones(30, 30)
    mg.manual_seed(123)
    a = nn.Dropout(0.5)(x).numpy()
    mg.manual_seed(123)
    b = nn.Dropout(0.5)(x).numpy()
    mg.manual_seed(124)
    c = nn.Dropout(0.5)(x).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_rng_state_replays_the_same_mask():
    x = mg.ones(30, 30)
    d = nn.Dropout(0.4)
    d(x)  # advance the generator somewhat
    state = mg.get_rng_state()
    a = d(x).numpy()
    b = d(x).numpy()
    assert not np.array_equal(a, b)
    mg.set_rng_state(state)
    np.testing.assert_array_equal(d(x).numpy(), a)
    np.testing.assert_array_equal(d(x).numpy(), b)
    mg.set_rng_state(state)  # the state can be restored more than once
    np.testing.assert_array_equal(d(x).numpy(), a)


def test_a_state_is_a_snapshot_both_ways():
    """NOTE [a state is already a copy] (backend/random.py): no copy of our own, so NumPy must give one. Changing the
    dict get_rng_state gave, or the dict set_rng_state was given, must not move the generator."""
    mg.manual_seed(5)
    state = mg.get_rng_state()
    first = mg.rand(4).numpy()
    state["state"]["state"] += 1  # the snapshot changed after it was taken
    mg.set_rng_state(mg.get_rng_state())  # reading and setting again: the generator is where it was
    second = mg.rand(4).numpy()
    mg.manual_seed(5)
    given = mg.get_rng_state()
    mg.set_rng_state(given)
    given["state"]["state"] += 1  # the dict passed in changed after it was set
    np.testing.assert_array_equal(mg.rand(4).numpy(), first)
    np.testing.assert_array_equal(mg.rand(4).numpy(), second)
    assert mg.get_rng_state() is not mg.get_rng_state()


def test_dropout_eval_is_identity():
    d = nn.Dropout(0.5).eval()
    x = mg.randn(10, 10, requires_grad=True)
    y = d(x)
    np.testing.assert_array_equal(y.detach().numpy(), x.detach().numpy())
    state = mg.get_rng_state()
    d(x)
    assert mg.get_rng_state() == state  # eval draws no random numbers


def test_dropout_p0_and_p1():
    x = mg.randn(10, 10)
    np.testing.assert_array_equal(nn.Dropout(0.0)(x).numpy(), x.numpy())
    assert not nn.Dropout(1.0)(x).numpy().any()


# ----------------------------------------------------------------------------- BatchNorm1d, LayerNorm

def _bn_ref(x, mean, var, w, b, eps=1e-5):
    return (x - mean) / np.sqrt(var + eps) * w + b


def test_batchnorm1d_train_uses_batch_stats_and_updates_running_stats():
    bn = nn.BatchNorm1d(3)
    w, b = np.array([1.5, 0.5, -1.0], np.float32), np.array([0.1, -0.2, 0.3], np.float32)
    bn.weight.data = mg.tensor(w).data  # on the default device
    bn.bias.data = mg.tensor(b).data
    x1 = (np.random.default_rng(1).standard_normal((8, 3)) * [1.0, 2.0, 3.0] + [0.5, -1.0, 2.0]).astype(np.float32)
    x2 = (np.random.default_rng(2).standard_normal((8, 3)) * 2 + 1).astype(np.float32)
    y1 = bn(mg.tensor(x1)).detach().numpy()
    np.testing.assert_allclose(y1, _bn_ref(x1, x1.mean(0), x1.var(0), w, b), rtol=1e-4, atol=1e-5)
    rm = 0.9 * np.zeros(3) + 0.1 * x1.mean(0)
    rv = 0.9 * np.ones(3) + 0.1 * x1.var(0, ddof=1)  # unbiased
    np.testing.assert_allclose(bn.running_mean.numpy(), rm, rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(), rv, rtol=1e-5)
    bn(mg.tensor(x2))
    rm = 0.9 * rm + 0.1 * x2.mean(0)
    rv = 0.9 * rv + 0.1 * x2.var(0, ddof=1)
    np.testing.assert_allclose(bn.running_mean.numpy(), rm, rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(), rv, rtol=1e-5)
    assert int(bn.num_batches_tracked.item()) == 2
    assert bn.running_mean.dtype == np.float32 and not bn.running_mean.requires_grad

    bn.eval()
    x3 = np.random.default_rng(3).standard_normal((5, 3)).astype(np.float32)
    y3 = bn(mg.tensor(x3)).detach().numpy()
    np.testing.assert_allclose(y3, _bn_ref(x3, rm, rv, w, b), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.running_mean.numpy(), rm, rtol=1e-5)  # eval does not update
    assert int(bn.num_batches_tracked.item()) == 2
    # eval with a single example works (no batch statistics needed)
    assert bn(mg.tensor(x3[:1])).shape == (1, 3)


def test_batchnorm1d_three_dims():
    bn = nn.BatchNorm1d(2)
    x = (np.random.default_rng(4).standard_normal((4, 2, 5)) * 3 + 1).astype(np.float32)
    y = bn(mg.tensor(x)).detach().numpy()
    mean, var = x.mean((0, 2), keepdims=True), x.var((0, 2), keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * x.transpose(1, 0, 2).reshape(2, -1).var(1, ddof=1),
                               rtol=1e-5)


def test_batchnorm1d_gradient_flows_in_train_and_eval():
    bn = nn.BatchNorm1d(3)
    x = mg.randn(6, 3, requires_grad=True)
    (bn(x) * mg.randn(6, 3)).sum().backward()
    assert x.grad.shape == (6, 3) and bn.weight.grad.shape == (3,)
    bn.eval()
    x2 = mg.randn(6, 3, requires_grad=True)
    bn(x2).sum().backward()
    np.testing.assert_allclose(x2.grad.numpy(), np.broadcast_to(1 / np.sqrt(bn.running_var.numpy() + 1e-5), (6, 3)),
                               rtol=1e-5)


def test_batchnorm1d_bad_shape():
    with pytest.raises(ValueError, match=r"BatchNorm1d:.*\(N, 3\).*\(4, 2\)"):
        nn.BatchNorm1d(3)(mg.randn(4, 2))
    with pytest.raises(ValueError, match=r"more than 1 value per channel"):
        nn.BatchNorm1d(3)(mg.randn(1, 3))


def test_layernorm_normalizes_last_dim():
    ln = nn.LayerNorm(64)
    assert ln.weight.shape == (64,) and ln.bias.shape == (64,)
    x = mg.randn(4, 5, 64) * 5.0 + 3.0
    y = ln(x).detach().numpy().astype(np.float64)
    np.testing.assert_allclose(y.mean(-1), 0, atol=1e-5)
    np.testing.assert_allclose(y.var(-1), 1, atol=1e-3)
    ln.weight.data = mg.full((64,), 2.0).data
    ln.bias.data = mg.full((64,), -1.0).data
    y = ln(x).detach().numpy().astype(np.float64)
    np.testing.assert_allclose(y.mean(-1), -1, atol=1e-5)
    np.testing.assert_allclose(y.var(-1), 4, atol=4e-3)


# ----------------------------------------------------------------------------- SGD

def _param(values, dtype="float64"):
    return nn.Parameter(mg.tensor(values, dtype=dtype))


def _set_grad(p, g):
    """Make p.grad == g via a real backward: loss = sum(p * g)."""
    (p * mg.tensor(g, dtype=p.dtype.name)).sum().backward()


P0 = np.array([1.0, -2.0, 0.5])
G0 = np.array([0.3, -0.1, 2.0])
G1 = np.array([-1.0, 0.4, 0.25])


def _run(opt_cls, grads, dtype="float64", **kw):
    p = _param(P0, dtype)
    opt = opt_cls([p], **kw)
    for g in grads:
        opt.zero_grad()
        _set_grad(p, g)
        opt.step()
    return p, opt


def test_sgd_plain():
    p, _ = _run(mg.optim.SGD, [G0], lr=0.1)
    np.testing.assert_allclose(to_host(p.data), P0 - 0.1 * G0, rtol=1e-12)
    p, _ = _run(mg.optim.SGD, [G0, G1], lr=0.1)
    np.testing.assert_allclose(to_host(p.data), P0 - 0.1 * G0 - 0.1 * G1, rtol=1e-12)


def test_sgd_momentum_two_steps():
    lr, mom = 0.1, 0.9
    p, opt = _run(mg.optim.SGD, [G0], lr=lr, momentum=mom)
    buf = G0.copy()  # first step: buf = g
    np.testing.assert_allclose(to_host(p.data), P0 - lr * buf, rtol=1e-12)
    p, opt = _run(mg.optim.SGD, [G0, G1], lr=lr, momentum=mom)
    p1 = P0 - lr * G0
    buf = mom * G0 + G1
    np.testing.assert_allclose(to_host(p.data), p1 - lr * buf, rtol=1e-12)
    np.testing.assert_allclose(to_host(opt.state[p]["momentum_buffer"]), buf, rtol=1e-12)


def test_sgd_momentum_dampening():
    lr, mom, damp = 0.05, 0.8, 0.3
    p, _ = _run(mg.optim.SGD, [G0, G1], lr=lr, momentum=mom, dampening=damp)
    buf = G0.copy()  # no dampening on the first step (PyTorch)
    p1 = P0 - lr * buf
    buf = mom * buf + (1 - damp) * G1
    np.testing.assert_allclose(to_host(p.data), p1 - lr * buf, rtol=1e-12)


def test_sgd_weight_decay():
    lr, wd = 0.1, 0.01
    p, _ = _run(mg.optim.SGD, [G0, G1], lr=lr, weight_decay=wd)
    p1 = P0 - lr * (G0 + wd * P0)
    p2 = p1 - lr * (G1 + wd * p1)
    np.testing.assert_allclose(to_host(p.data), p2, rtol=1e-12)


def test_sgd_momentum_and_weight_decay():
    lr, mom, wd = 0.1, 0.9, 0.05
    p, _ = _run(mg.optim.SGD, [G0, G1], lr=lr, momentum=mom, weight_decay=wd)
    d0 = G0 + wd * P0
    buf = d0
    p1 = P0 - lr * buf
    d1 = G1 + wd * p1
    buf = mom * buf + d1
    np.testing.assert_allclose(to_host(p.data), p1 - lr * buf, rtol=1e-12)


def test_sgd_nesterov():
    lr, mom = 0.1, 0.9
    p, _ = _run(mg.optim.SGD, [G0, G1], lr=lr, momentum=mom, nesterov=True)
    buf = G0
    p1 = P0 - lr * (G0 + mom * buf)
    buf = mom * buf + G1
    np.testing.assert_allclose(to_host(p.data), p1 - lr * (G1 + mom * buf), rtol=1e-12)


def test_sgd_step_does_not_modify_the_gradient():
    p = _param(P0)
    opt = mg.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.1)
    _set_grad(p, G0)
    opt.step()
    np.testing.assert_array_equal(p.grad.numpy(), G0)
    opt.step()  # the same gradient again: the buffer is not the gradient
    np.testing.assert_array_equal(p.grad.numpy(), G0)


# ----------------------------------------------------------------------------- AdamW

def _adamw_ref(p, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, wd=1e-2):
    p = p.astype(np.float64).copy()
    m, v = np.zeros_like(p), np.zeros_like(p)
    b1, b2 = betas
    for t, g in enumerate(grads, start=1):
        p *= 1 - lr * wd  # decoupled decay
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat = m / (1 - b1 ** t)
        vhat = v / (1 - b2 ** t)
        p -= lr * mhat / (np.sqrt(vhat) + eps)
    return p, m, v


@pytest.mark.parametrize("kw", [dict(), dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
                                dict(lr=0.003, weight_decay=0.0)])
def test_adamw_matches_reference(kw):
    grads = [G0, G1, 0.5 * G0 - G1]
    p, opt = _run(mg.optim.AdamW, grads, **kw)
    ref_kw = dict(lr=kw.get("lr", 1e-3), betas=kw.get("betas", (0.9, 0.999)), eps=kw.get("eps", 1e-8),
                  wd=kw.get("weight_decay", 1e-2))
    want, m, v = _adamw_ref(P0, grads, **ref_kw)
    np.testing.assert_allclose(to_host(p.data), want, rtol=1e-12, atol=1e-15)
    st = opt.state[p]
    assert st["step"] == 3
    np.testing.assert_allclose(to_host(st["exp_avg"]), m, rtol=1e-12)
    np.testing.assert_allclose(to_host(st["exp_avg_sq"]), v, rtol=1e-12)


def test_adamw_first_step_moves_each_element_by_about_lr():
    p, _ = _run(mg.optim.AdamW, [G0], lr=0.01, weight_decay=0.0)
    np.testing.assert_allclose(to_host(p.data), P0 - 0.01 * np.sign(G0), rtol=1e-6)


def test_adamw_float32():
    grads = [G0, G1]
    p, _ = _run(mg.optim.AdamW, grads, dtype="float32", lr=0.01)
    want, _, _ = _adamw_ref(P0.astype(np.float32), [g.astype(np.float32) for g in grads], lr=0.01)
    assert p.dtype == np.float32
    np.testing.assert_allclose(to_host(p.data), want, rtol=1e-5)


# ----------------------------------------------------------------------------- shared optimizer behaviour

@pytest.mark.parametrize("opt_cls", [mg.optim.SGD, mg.optim.AdamW])
def test_optimizer_zero_grad(opt_cls):
    m = mlp()
    opt = opt_cls(m.parameters(), lr=0.1)
    _backward(m, mg.randn(4, 3))
    bufs = [p.grad for p in m.parameters()]
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is b and not b.numpy().any() for p, b in zip(m.parameters(), bufs))
    opt.zero_grad()
    assert all(p.grad is None for p in m.parameters())


@pytest.mark.parametrize("opt_cls,kw", [(mg.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.1)),
                                        (mg.optim.AdamW, dict(lr=0.1, weight_decay=0.1))])
def test_parameter_without_grad_is_skipped(opt_cls, kw):
    used, unused = _param(P0), _param(P0 * 2)
    opt = opt_cls([used, unused], **kw)
    _set_grad(used, G0)
    opt.step()
    opt.step()
    assert unused.grad is None
    np.testing.assert_array_equal(to_host(unused.data), P0 * 2)  # not even weight decay
    assert unused not in opt.state
    assert not np.array_equal(to_host(used.data), P0)


@pytest.mark.parametrize("opt_cls,kw", [(mg.optim.SGD, dict(lr=0.1)),
                                        (mg.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
                                        (mg.optim.AdamW, dict(lr=0.1))])
def test_float64_parameters_stay_float64(opt_cls, kw):
    p, opt = _run(opt_cls, [G0, G1, G0], dtype="float64", **kw)
    assert p.dtype == np.float64 and p.data.dtype == np.float64
    assert all(a.dtype == np.float64 for a in opt.state.get(p, {}).values() if hasattr(a, "dtype"))
    q, _ = _run(opt_cls, [G0, G1, G0], dtype="float32", **kw)
    assert q.dtype == np.float32


def test_optimizer_updates_in_place_so_the_model_sees_it():
    m = mlp()
    w = m[0].weight
    arr = w.data
    opt = mg.optim.SGD(m.parameters(), lr=0.5)
    _backward(m, mg.randn(4, 3))
    before = arr.copy()
    opt.step()
    assert m[0].weight is w and w.data is arr  # same Parameter, same buffer
    assert not np.array_equal(arr, before)


def test_training_an_mlp_reduces_the_loss():
    x = mg.randn(64, 3)
    y = (x.numpy() @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)
    target = mg.tensor(np.tanh(y))
    m = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = mg.optim.AdamW(m.parameters(), lr=0.02, weight_decay=0.0)
    losses = []
    for _ in range(150):
        loss = mg.functional.mse_loss(m(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]
