"""torch.optim parity: parameter groups, frozen parameters, state_dict, amsgrad and maximize, errors.

The comparisons run the same float64 parameters and losses through minigrad and PyTorch for 5 steps and
ask for agreement to 1e-12 relative; they skip where PyTorch is not installed.
"""
import copy

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minigrad as mg
from minigrad import nn

from on_device import to_host

SHAPES = [(3, 4), (4,), (2, 3), (5,)]
FROZEN = 3        # index of the parameter that does not require grad
RTOL = 1e-12


def arrays(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in SHAPES]


def mg_params(frozen=(FROZEN,)):
    return [nn.Parameter(mg.tensor(a, dtype="float64"), requires_grad=i not in frozen) for i, a in enumerate(arrays())]


def th_params(torch, frozen=(FROZEN,)):
    return [torch.nn.Parameter(torch.tensor(a, dtype=torch.float64), requires_grad=i not in frozen)
            for i, a in enumerate(arrays())]


def loss_of(params, scale=1.0):
    """A loss every parameter enters (the frozen one too), with gradients that change from step to step."""
    return sum(((p - 0.5) ** 2 * (i + 1)).sum() + (p * p * p).sum() * 0.1 for i, p in enumerate(params)) * scale


def groups(ps, **first):
    """nanoGPT's split: decay for the matrices, none for the vectors; the second group has its own lr."""
    return [{"params": [ps[0], ps[2]], "weight_decay": 0.1, **first},
            {"params": [ps[1], ps[3]], "weight_decay": 0.0, "lr": 0.03}]


def run_both(make_mg, make_th, steps=5, between=None):
    """Step both optimizers `steps` times, comparing every parameter after each step; `between(opt, params,
    step)` runs on both before each step (a schedule writing group['lr'], add_param_group, ...)."""
    torch = pytest.importorskip("torch")
    ps_mg, ps_th = mg_params(), th_params(torch)
    opt_mg, opt_th = make_mg(ps_mg), make_th(ps_th)
    for step in range(steps):
        if between is not None:
            between(opt_mg, ps_mg, step)
            between(opt_th, ps_th, step)
        opt_mg.zero_grad()
        opt_th.zero_grad()
        scale = 10.0 if step % 2 == 0 else 1.0  # gradients shrink on odd steps: Adam's second moment falls
        loss_of(ps_mg, scale).backward()
        loss_of(ps_th, scale).backward()
        opt_mg.step()
        opt_th.step()
        for i, (a, b) in enumerate(zip(ps_mg, ps_th)):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=RTOL, atol=0,
                                       err_msg=f"parameter {i} after step {step + 1}")
    assert ps_mg[FROZEN].grad is None and ps_th[FROZEN].grad is None
    np.testing.assert_array_equal(ps_mg[FROZEN].detach().numpy(), arrays()[FROZEN])  # not even weight decay
    return opt_mg, opt_th


ADAMW_CASES = {
    "defaults": dict(),
    "amsgrad": dict(amsgrad=True),
    "maximize": dict(maximize=True),
    "amsgrad_maximize": dict(amsgrad=True, maximize=True, betas=(0.9, 0.9)),
    "betas_eps": dict(betas=(0.8, 0.95), eps=1e-6, amsgrad=True),
}


@pytest.mark.parametrize("case", sorted(ADAMW_CASES))
def test_adamw_groups_match_torch(case):
    torch = pytest.importorskip("torch")
    kw = ADAMW_CASES[case]
    opt_mg, opt_th = run_both(lambda ps: mg.optim.AdamW(groups(ps), lr=0.01, **kw),
                              lambda ps: torch.optim.AdamW(groups(ps), lr=0.01, **kw))
    # the state has PyTorch's names, in self.state[param], for the parameters that stepped only
    ps_th = [p for g in opt_th.param_groups for p in g["params"]]
    for p_mg, p_th in zip(opt_mg.params, ps_th):
        assert set(opt_mg.state.get(p_mg, {})) == set(opt_th.state.get(p_th, {}))
        for name, value in opt_mg.state.get(p_mg, {}).items():
            want = opt_th.state[p_th][name]
            if name == "step":
                assert value == want.item() == 5
            else:
                np.testing.assert_allclose(to_host(value), want.numpy(), rtol=RTOL, err_msg=name)


SGD_CASES = {
    "maximize": dict(maximize=True),
    "maximize_momentum_weight_decay": dict(maximize=True, momentum=0.9, weight_decay=0.05),
    "maximize_nesterov": dict(maximize=True, momentum=0.8, nesterov=True, weight_decay=0.01),
    "momentum_dampening": dict(momentum=0.9, dampening=0.3),
}


@pytest.mark.parametrize("case", sorted(SGD_CASES))
def test_sgd_groups_match_torch(case):
    torch = pytest.importorskip("torch")
    kw = SGD_CASES[case]
    run_both(lambda ps: mg.optim.SGD(groups(ps), lr=0.02, **kw),
             lambda ps: torch.optim.SGD(groups(ps), lr=0.02, **kw))


@pytest.mark.parametrize("name", ["SGD", "AdamW"])
def test_a_schedule_writing_group_lr_takes_effect(name):
    torch = pytest.importorskip("torch")
    kw = dict(momentum=0.9) if name == "SGD" else dict(amsgrad=True)

    def warmup_then_decay(opt, params, step):  # as nanoGPT's get_lr, written into every group
        for i, g in enumerate(opt.param_groups):
            g["lr"] = 0.05 * (i + 1) * min(1.0, (step + 1) / 2) * 0.7 ** step

    run_both(lambda ps: getattr(mg.optim, name)(groups(ps), **kw),
             lambda ps: getattr(torch.optim, name)(groups(ps), **kw), between=warmup_then_decay)


def test_add_param_group_mid_training_matches_torch():
    torch = pytest.importorskip("torch")

    def later(opt, params, step):  # the second group joins at step 2 with its own hyperparameters
        if step == 2:
            opt.add_param_group({"params": [params[2], params[3]], "lr": 0.05, "weight_decay": 0.0})

    opt_mg, opt_th = run_both(lambda ps: mg.optim.AdamW(ps[:2], lr=0.01, amsgrad=True),
                              lambda ps: torch.optim.AdamW(ps[:2], lr=0.01, amsgrad=True), between=later)
    assert len(opt_mg.param_groups) == 2
    assert {k: v for k, v in opt_mg.param_groups[1].items() if k != "params"} == \
        {k: opt_th.param_groups[1][k] for k in opt_mg.param_groups[1] if k != "params"}


# ----------------------------------------------------------------------------- param_groups and state_dict layout

TORCH_ONLY_KEYS = {"foreach", "capturable", "differentiable", "fused", "decoupled_weight_decay"}  # implementation switches


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.1, momentum=0.9, maximize=True)),
                                     ("AdamW", dict(lr=0.01, amsgrad=True))])
def test_param_groups_and_state_dict_have_torchs_layout(name, kw):
    torch = pytest.importorskip("torch")
    ps_mg, ps_th = mg_params(), th_params(torch)
    opt_mg = getattr(mg.optim, name)(groups(ps_mg), **kw)
    opt_th = getattr(torch.optim, name)(groups(ps_th), **kw)
    for g_mg, g_th in zip(opt_mg.param_groups, opt_th.param_groups):
        assert set(g_mg) == set(g_th) - TORCH_ONLY_KEYS
        assert all(g_mg[k] == g_th[k] for k in g_mg if k != "params")
        assert [next(i for i, p in enumerate(ps_mg) if p is a) for a in g_mg["params"]] == \
            [next(i for i, p in enumerate(ps_th) if p is b) for b in g_th["params"]]
    for opt, ps in ((opt_mg, ps_mg), (opt_th, ps_th)):
        loss_of(ps).backward()
        opt.step()
    sd_mg, sd_th = opt_mg.state_dict(), opt_th.state_dict()
    assert set(sd_mg) == set(sd_th) == {"state", "param_groups"}
    assert [g["params"] for g in sd_mg["param_groups"]] == [g["params"] for g in sd_th["param_groups"]] == [[0, 1], [2, 3]]
    assert {i: set(s) for i, s in sd_mg["state"].items()} == {i: set(s) for i, s in sd_th["state"].items()}
    assert FROZEN not in sd_mg["state"]  # index 3 is ps[3], the frozen one: it never stepped


def test_param_groups_fill_in_every_hyperparameter():
    ps = mg_params()
    opt = mg.optim.AdamW([{"params": ps[:2], "lr": 0.5}, {"params": ps[2:], "betas": (0.8, 0.9)}],
                         lr=0.01, weight_decay=0.1, amsgrad=True)
    assert opt.param_groups[0] == dict(params=ps[:2], lr=0.5, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1,
                                       amsgrad=True, maximize=False)
    assert opt.param_groups[1] == dict(params=ps[2:], lr=0.01, betas=(0.8, 0.9), eps=1e-8, weight_decay=0.1,
                                       amsgrad=True, maximize=False)
    assert opt.defaults["lr"] == 0.01
    assert opt.params == ps
    one = mg.optim.SGD([{"params": ps[0]}])  # a single tensor as a group's params, as PyTorch allows
    assert len(one.param_groups[0]["params"]) == 1 and one.param_groups[0]["params"][0] is ps[0]


def mlp64():
    mg.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).to(dtype="float64")
    model[0].bias.requires_grad_(False)  # a frozen parameter in the middle of the list
    return model


def train(model, opt, steps, seed):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = mg.tensor(rng.standard_normal((5, 4)), dtype=model[0].weight.dtype)
        opt.zero_grad()
        (model(x) ** 2).mean().backward()
        opt.step()


def decay_groups(model):
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    return [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]


@pytest.mark.parametrize("make", [lambda gs: mg.optim.AdamW(gs, lr=0.01, amsgrad=True),
                                  lambda gs: mg.optim.SGD(gs, lr=0.05, momentum=0.9, nesterov=True),
                                  lambda gs: mg.optim.AdamW(gs, lr=0.01, maximize=True)],
                         ids=["adamw-amsgrad", "sgd-nesterov", "adamw-maximize"])
def test_state_dict_round_trip_is_bit_identical(make):
    model = mlp64()
    opt = make(decay_groups(model))
    train(model, opt, 3, seed=0)
    opt.param_groups[1]["lr"] = 0.002  # as a schedule would: the saved lr wins over the constructor's
    saved = opt.state_dict()
    kept = copy.deepcopy(saved)

    twin = mlp64()
    twin.load_state_dict(model.state_dict())
    twin_opt = make(decay_groups(twin))
    twin_opt.load_state_dict(saved)
    assert twin_opt.param_groups[1]["lr"] == 0.002
    assert all(a is b for a, b in zip(twin_opt.params, [p for g in decay_groups(twin) for p in g["params"]]))

    train(model, opt, 3, seed=1)
    train(twin, twin_opt, 3, seed=1)
    for (name, a), b in zip(model.named_parameters(), twin.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=name)
    # the loaded state is the twin's own: not the original's, not the saved dict's
    for k, s in saved["state"].items():
        assert all(np.array_equal(v, kept["state"][k][name]) for name, v in s.items())
    for (p, s), (q, t) in zip(opt.state.items(), twin_opt.state.items()):
        for k in s:
            if hasattr(s[k], "shape"):
                assert s[k] is not t[k] and np.array_equal(s[k], t[k])


def test_state_dict_is_a_snapshot_and_load_casts_to_the_parameters_dtype():
    model = mlp64()
    opt = mg.optim.AdamW(model.parameters(), lr=0.01)
    train(model, opt, 1, seed=0)
    saved = opt.state_dict()
    before = saved["state"][0]["exp_avg"].copy()
    train(model, opt, 1, seed=1)
    np.testing.assert_array_equal(to_host(saved["state"][0]["exp_avg"]), to_host(before))
    assert saved["state"][0]["step"] == 1

    model32 = mlp64().to(dtype="float32")
    opt32 = mg.optim.AdamW(model32.parameters())
    opt32.load_state_dict(saved)
    assert all(a.dtype == np.float32 for s in opt32.state.values() for a in s.values() if hasattr(a, "dtype"))
    train(model32, opt32, 1, seed=1)  # and it steps


def test_load_state_dict_errors():
    model = mlp64()
    two = mg.optim.AdamW(decay_groups(model))
    train(model, two, 1, seed=0)
    one = mg.optim.AdamW(model.parameters())
    with pytest.raises(ValueError, match=r"AdamW.load_state_dict: the state dict has 2 param groups, this optimizer 1"):
        one.load_state_dict(two.state_dict())
    other = mg.optim.AdamW([{"params": list(model.parameters())[:1]}, {"params": list(model.parameters())[1:]}])
    with pytest.raises(ValueError, match=r"param group 0 has 1 parameters here but 2 in the state dict"):
        other.load_state_dict(two.state_dict())
    wider = nn.Sequential(nn.Linear(4, 9), nn.Tanh(), nn.Linear(9, 3)).to(dtype="float64")
    wider[0].bias.requires_grad_(False)
    with pytest.raises(ValueError, match=r"state 'exp_avg' of parameter 0 has shape \(8, 4\) but the parameter "
                                         r"has shape \(9, 4\); was this state saved for another model\?"):
        mg.optim.AdamW(decay_groups(wider)).load_state_dict(two.state_dict())
    with pytest.raises(ValueError, match=r"expected \{'state': ..., 'param_groups': ...\}.*got \['exp_avg'\]"):
        one.load_state_dict({"exp_avg": 0})
    assert one.state == {} and one.param_groups[0]["weight_decay"] == 1e-2  # a failed load changes nothing


# ----------------------------------------------------------------------------- frozen and repeated parameters

@pytest.mark.parametrize("name", ["SGD", "AdamW"])
def test_frozen_parameters_are_accepted_and_skipped(name):
    ps = mg_params()
    opt = getattr(mg.optim, name)(groups(ps), lr=0.1, momentum=0.9) if name == "SGD" else \
        mg.optim.AdamW(groups(ps), lr=0.1)
    loss_of(ps).backward()
    opt.step()
    assert ps[FROZEN].grad is None and ps[FROZEN] not in opt.state
    np.testing.assert_array_equal(ps[FROZEN].detach().numpy(), arrays()[FROZEN])
    assert all(p in opt.state for i, p in enumerate(ps) if i != FROZEN)


def test_zero_grad_over_groups_with_a_frozen_parameter():
    ps = mg_params()
    opt = mg.optim.AdamW(groups(ps))
    loss_of(ps).backward()
    bufs = [p.grad for p in ps]
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is b for p, b in zip(ps, bufs)) and ps[FROZEN].grad is None
    assert not any(p.grad.detach().numpy().any() for i, p in enumerate(ps) if i != FROZEN)
    opt.zero_grad()
    assert all(p.grad is None for p in ps)


def test_amsgrad_state_is_counted_by_the_profiler():
    ps = mg_params()
    opt = mg.optim.AdamW(groups(ps), amsgrad=True)
    with mg.profile() as prof:
        loss_of(ps).backward()
        opt.step()
    trainable = sum(p.detach().numpy().nbytes for i, p in enumerate(ps) if i != FROZEN)
    assert prof.current_bytes("optimizer") == opt.state_bytes() == 3 * trainable


def test_a_parameter_appears_once():
    p, q = mg_params()[:2]
    with pytest.raises(ValueError, match=r"AdamW: param group 0: a parameter of shape \(3, 4\) is already in "
                                         r"this group; each parameter must appear once"):
        mg.optim.AdamW([p, q, p])
    with pytest.raises(ValueError, match=r"SGD: param group 1: a parameter of shape \(4,\) is already in param group 0"):
        mg.optim.SGD([{"params": [p, q]}, {"params": [q]}])
    opt = mg.optim.SGD([p])
    with pytest.raises(ValueError, match=r"SGD: param group 1: .* already in param group 0"):
        opt.add_param_group({"params": [q, p]})
    assert len(opt.param_groups) == 1  # the refused group was not added


def test_what_params_can_be():
    p = mg_params()[0]
    with pytest.raises(TypeError, match=r"AdamW: params must be an iterable .* got one Tensor of shape \(3, 4\); "
                                        r"pass \[tensor\] or model.parameters\(\)"):
        mg.optim.AdamW(p)
    with pytest.raises(TypeError, match=r"SGD: params must be an ordered iterable .* got a set"):
        mg.optim.SGD({p})
    with pytest.raises(TypeError, match=r"SGD: params must be a list .* got one dict; wrap it in a list"):
        mg.optim.SGD({"params": [p]})
    with pytest.raises(TypeError, match=r"SGD: param group 0: 'params' must be ordered \(a list\), not a set"):
        mg.optim.SGD([{"params": {p}}])
    with pytest.raises(TypeError, match=r"AdamW: params must be tensors or param groups, got the module Sequential; "
                                        r"pass model.parameters\(\)"):
        mg.optim.AdamW(mlp64())
    with pytest.raises(TypeError, match=r"AdamW: param group 0: can only optimize tensors, got ndarray"):
        mg.optim.AdamW([np.zeros(3)])
    with pytest.raises(TypeError, match=r"AdamW: param group 1: expected a dict .* got Parameter"):
        mg.optim.AdamW([{"params": [p]}, mg_params()[1]])
    with pytest.raises(ValueError, match=r"AdamW: param group 0: has no 'params'"):
        mg.optim.AdamW([{"lr": 0.1}])
    with pytest.raises(ValueError, match=r"SGD: param group 0: can't optimize a tensor of shape \(3, 4\) made by "
                                         r"\w+; optimize the leaf tensors"):
        mg.optim.SGD([p * 2])


# ----------------------------------------------------------------------------- hyperparameters

@pytest.mark.parametrize("make,error,match", [
    (lambda ps: mg.optim.AdamW(ps, lr="0.1"), TypeError,
     r"AdamW: lr must be a number, got '0.1' \(str\); convert it first, e.g. lr=float\('0.1'\)"),
    (lambda ps: mg.optim.SGD(ps, lr="1e-3"), TypeError, r"SGD: lr must be a number, got '1e-3' \(str\)"),
    (lambda ps: mg.optim.SGD(ps, lr=None), TypeError, r"SGD: lr must be a number, got None \(NoneType\)"),
    (lambda ps: mg.optim.AdamW(ps, lr=float("nan")), ValueError, r"AdamW: lr must be >= 0, got nan"),
    (lambda ps: mg.optim.AdamW(ps, betas=(0.9,)), ValueError, r"AdamW: betas must be a pair \(beta1, beta2\), got \(0.9,\)"),
    (lambda ps: mg.optim.AdamW(ps, betas=0.9), ValueError, r"AdamW: betas must be a pair .* got 0.9"),
    (lambda ps: mg.optim.AdamW(ps, betas=(0.9, 1.0)), ValueError, r"AdamW: betas\[1\] must be in \[0, 1\), got 1.0"),
    (lambda ps: mg.optim.AdamW(ps, betas=(-0.1, 0.9)), ValueError, r"AdamW: betas\[0\] must be >= 0, got -0.1"),
    (lambda ps: mg.optim.AdamW(ps, eps=-1e-8), ValueError, r"AdamW: eps must be >= 0, got -1e-08"),
    (lambda ps: mg.optim.AdamW(ps, weight_decay=-0.1), ValueError, r"AdamW: weight_decay must be >= 0, got -0.1"),
    (lambda ps: mg.optim.AdamW(ps, amsgrad="yes"), TypeError, r"AdamW: amsgrad must be True or False, got 'yes'"),
    (lambda ps: mg.optim.SGD(ps, maximize=None), TypeError, r"SGD: maximize must be True or False, got None"),
    (lambda ps: mg.optim.SGD(ps, momentum=-0.9), ValueError, r"SGD: momentum must be >= 0, got -0.9"),
    (lambda ps: mg.optim.SGD(ps, momentum=0.9, dampening=0.1, nesterov=True), ValueError,
     r"SGD: nesterov needs momentum > 0 and dampening = 0, got momentum=0.9, dampening=0.1"),
    (lambda ps: mg.optim.AdamW([{"params": ps[:1]}, {"params": ps[1:], "lr": -1.0}]), ValueError,
     r"AdamW: param group 1: lr must be >= 0, got -1.0"),
    (lambda ps: mg.optim.AdamW([{"params": ps, "betas": (0.9, 0.99, 0.999)}]), ValueError,
     r"AdamW: param group 0: betas must be a pair"),
    (lambda ps: mg.optim.SGD(ps).add_param_group({"params": [mg_params()[0]], "momentum": "0.9"}), TypeError,
     r"SGD: param group 1: momentum must be a number, got '0.9' \(str\)"),
], ids=["lr-str", "sgd-lr-str", "lr-none", "lr-nan", "betas-short", "betas-number", "beta2-one", "beta1-negative",
        "eps", "weight-decay", "amsgrad", "maximize", "momentum", "nesterov", "group-lr", "group-betas",
        "added-group"])
def test_bad_hyperparameters_name_the_optimizer_and_argument(make, error, match):
    with pytest.raises(error, match=match):
        make(mg_params()[:3])


def test_loaded_hyperparameters_are_checked():
    model = mlp64()
    opt = mg.optim.AdamW(model.parameters())
    saved = opt.state_dict()
    saved["param_groups"][0]["eps"] = -1.0
    with pytest.raises(ValueError, match=r"AdamW.load_state_dict: param group 0: eps must be >= 0, got -1.0"):
        opt.load_state_dict(saved)
    assert opt.param_groups[0]["eps"] == 1e-8


# ----------------------------------------------------------------------------- clip_grad_norm_'s scaling

def torch_clip_coefficient(total, max_norm):
    """torch.nn.utils.clip_grad_norm_'s factor from the total norm, as PyTorch computes it: in the norm's dtype,
    max_norm / (total + 1e-6) as Tensor.__rtruediv__ does it (reciprocal, then times max_norm), clamped at 1."""
    t = np.asarray(total)
    return np.minimum(np.reciprocal(t + t.dtype.type(1e-6)) * t.dtype.type(max_norm), t.dtype.type(1.0))


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(["float32", "float64"]), sizes=st.lists(st.integers(1, 12), min_size=1, max_size=4),
       log_scale=st.floats(-3, 3), log_max=st.floats(-2, 2), norm_type=st.sampled_from([2.0, 1.0, "inf"]),
       seed=st.integers(0, 2 ** 16))
def test_clip_grad_norm_scales_by_torchs_factor_bit_for_bit(dtype, sizes, log_scale, log_max, norm_type, seed):
    """After accumulation, clipping: each gradient is multiplied by PyTorch's factor, computed as PyTorch computes
    it in the norm's dtype (one float64 division rounded to float32 gave another last bit in a third of the cases)."""
    rng = np.random.default_rng(seed)
    grads = [(rng.standard_normal(n) * 10 ** log_scale).astype(dtype) for n in sizes]
    ps = [nn.Parameter(mg.tensor(np.zeros(n), dtype=dtype)) for n in sizes]
    for p, g in zip(ps, grads):
        p.grad = mg.tensor(g)
    max_norm = 10 ** log_max
    total = nn.utils.clip_grad_norm_(ps, max_norm, norm_type)
    coef = torch_clip_coefficient(to_host(total), max_norm)
    for p, g in zip(ps, grads):
        np.testing.assert_array_equal(to_host(p.grad), g * coef)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clip_grad_norm_gives_torchs_gradients_where_the_norms_agree(dtype):
    """One gradient of one element: its norm is exact in both, so the clipped gradients must agree to the bit."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    for _ in range(200):
        g = (rng.standard_normal(1) * 10 ** rng.uniform(-3, 3)).astype(dtype)
        max_norm = float(10 ** rng.uniform(-2, 2))
        p, q = nn.Parameter(mg.tensor(np.zeros(1), dtype=dtype)), torch.nn.Parameter(torch.zeros(1, dtype=getattr(
            torch, dtype)))
        p.grad, q.grad = mg.tensor(g), torch.tensor(g)
        total, want = nn.utils.clip_grad_norm_([p], max_norm), torch.nn.utils.clip_grad_norm_([q], max_norm)
        assert to_host(total) == want.numpy()
        np.testing.assert_array_equal(to_host(p.grad), q.grad.numpy())


@pytest.mark.parametrize("name", ["SGD", "AdamW"])
def test_step_takes_a_closure_as_pytorchs(name):
    """PyTorch's step(closure): the closure runs first, in grad mode (even under no_grad), computes the loss and its
    gradients, and step returns that loss. It was a TypeError ('takes 1 positional argument')."""
    torch = pytest.importorskip("torch")
    kw = {"lr": 0.1, "momentum": 0.9} if name == "SGD" else {"lr": 0.1}
    ps_mg, ps_th = mg_params(), th_params(torch)
    opt_mg, opt_th = getattr(mg.optim, name)(ps_mg, **kw), getattr(torch.optim, name)(ps_th, **kw)

    def closure_of(opt, ps):
        def closure():
            opt.zero_grad()
            loss = loss_of(ps)
            loss.backward()
            return loss
        return closure
    for _ in range(3):
        with mg.no_grad(), torch.no_grad():
            got, want = opt_mg.step(closure_of(opt_mg, ps_mg)), opt_th.step(closure_of(opt_th, ps_th))
        assert isinstance(got, mg.Tensor) and float(got.item()) == pytest.approx(want.item(), rel=RTOL)
        for a, b in zip(ps_mg, ps_th):
            np.testing.assert_allclose(to_host(a.detach()), b.detach().numpy(), rtol=RTOL, atol=1e-15)
    assert opt_mg.step() is None and opt_th.step() is None


# ----------------------------------------------------------------------------- [trust3]: 2-byte parameters

LOW_PRECISION_CASES = {
    "SGD": dict(lr=0.1), "SGD weight decay": dict(lr=0.1, weight_decay=0.05),
    "SGD momentum": dict(lr=0.1, momentum=0.9), "SGD dampening": dict(lr=0.1, momentum=0.9, dampening=0.3),
    "SGD nesterov": dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05),
    "SGD maximize": dict(lr=0.1, momentum=0.5, maximize=True),
    "AdamW": dict(lr=0.01), "AdamW weight decay": dict(lr=0.01, weight_decay=0.1),
    "AdamW amsgrad": dict(lr=0.01, amsgrad=True), "AdamW maximize": dict(lr=0.01, maximize=True, betas=(0.8, 0.95)),
    "AdamW beta1 0.3": dict(lr=0.003, betas=(0.3, 0.9), eps=1e-3),  # lerp's other branch (weight >= 0.5)
}


@pytest.mark.torch
@pytest.mark.parametrize("scaler", [False, True], ids=["", "GradScaler"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("case", sorted(LOW_PRECISION_CASES))
def test_a_2_byte_parameter_steps_as_pytorchs_for_loop_bit_for_bit(case, dtype, scaler):
    """SGD and AdamW stepped a float16 or bfloat16 parameter with NumPy's 2-byte arithmetic: every product and sum
    rounded on the way, and lr, momentum, 1 - lr wd rounded to the dtype first (AdamW's 1 - 0.01 * 0.1 became 1.0 in
    bfloat16: no decay). After 5 steps of 4,000 elements, 60 to 600 of them differed from PyTorch's (bfloat16 SGD:
    60 after one step; nesterov: 597 after five). PyTorch's kernels compute each operation in float32 and round once
    (NOTE [a 2-byte step rounds as PyTorch's]): now the parameters and the state are PyTorch's bit for bit, NaNs
    included (float16 AdamW's eps, 1e-8, is 0 in float16, as in PyTorch's), and so through GradScaler's
    unscale_ and step for bfloat16 gradients (PyTorch refuses to unscale float16 ones)."""
    torch = pytest.importorskip("torch")
    if scaler and dtype == "float16":
        pytest.skip("GradScaler refuses float16 gradients, as PyTorch's does")
    name, kw = case.split()[0], LOW_PRECISION_CASES[case]
    rng = np.random.default_rng(0)
    n = 4000
    w0 = rng.standard_normal(n).astype(np.float32)
    ours = nn.Parameter(mg.tensor(w0).to(dtype))
    theirs = torch.nn.Parameter(torch.tensor(w0).to(getattr(torch, dtype)))
    opt, t_opt = getattr(mg.optim, name)([ours], **kw), getattr(torch.optim, name)([theirs], **kw)
    amp = (mg.amp.GradScaler("cpu", init_scale=3000.0), torch.amp.GradScaler("cpu", init_scale=3000.0)) \
        if scaler else None
    for step in range(5):
        g = (rng.standard_normal(n) * 10 ** rng.uniform(-3, 0, n)).astype(np.float32) * (3000.0 if scaler else 1.0)
        ours.grad, theirs.grad = mg.tensor(g).to(dtype), torch.tensor(g).to(getattr(torch, dtype))
        with np.errstate(divide="ignore", invalid="ignore"):  # float16 AdamW's 0 / 0, as PyTorch's
            if scaler:
                amp[1].scale(torch.ones(()))
                amp[0].step(opt), amp[1].step(t_opt)
                amp[0].update(), amp[1].update()
            else:
                opt.step(), t_opt.step()
        np.testing.assert_array_equal(to_host(ours).astype(np.float32), theirs.detach().float().numpy(),
                                      err_msg=f"parameter after step {step + 1}")
        for key, value in opt.state.get(ours, {}).items():
            if key != "step":
                np.testing.assert_array_equal(to_host(value).astype(np.float32),
                                              t_opt.state[theirs][key].float().numpy(), err_msg=key)
    assert np.nanmax(np.abs(to_host(ours).astype(np.float32) - w0)) > 1e-3


@pytest.mark.torch
@pytest.mark.parametrize("case", ["SGD nesterov", "AdamW amsgrad"])
def test_a_large_2_byte_parameter_steps_a_block_at_a_time(case):
    """The 2-byte step computes in float32 a block of rows at a time (optimizer.py's _blocks): the numbers are still
    PyTorch's bit for bit across the blocks' edges, and the step's float32 copies hold a block, not the parameter: its
    transient peak for three blocks' rows is one block's. Stepped whole, a float16 BERT-large's SGD step held three
    float32 copies of its word embeddings (375 MB, more than its backward's peak: docs/will_it_fit.md's K2 and K6
    then peaked in the step), and the peak here was 3x one block's."""
    torch = pytest.importorskip("torch")
    name, kw = case.split()[0], LOW_PRECISION_CASES[case]

    def steps(rows):
        rng = np.random.default_rng(1)
        # 512 columns: a block is 128 rows. A multiple of 32 elements: PyTorch's CPU kernel runs the last n % 32
        # through its scalar tail, which rounds alpha * grad to bfloat16 before the sum (measured: 1 of 150,000
        # elements then differs, and minigrad's, rounded once, is the nearer to the exact sum)
        w0 = rng.standard_normal((rows, 512)).astype(np.float32)
        ours = nn.Parameter(mg.tensor(w0).to("bfloat16"))
        theirs = torch.nn.Parameter(torch.tensor(w0).to(torch.bfloat16))
        opt, t_opt = getattr(mg.optim, name)([ours], **kw), getattr(torch.optim, name)([theirs], **kw)
        for step in range(2):
            g = (rng.standard_normal(w0.shape) * 0.1).astype(np.float32)
            ours.grad, theirs.grad = mg.tensor(g).to("bfloat16"), torch.tensor(g).to(torch.bfloat16)
            with mg.profile() as prof:
                opt.step()
            t_opt.step()
            np.testing.assert_array_equal(to_host(ours).astype(np.float32), theirs.detach().float().numpy())
        return prof.peak_bytes("transient")

    assert steps(3 * 128) == steps(128)
