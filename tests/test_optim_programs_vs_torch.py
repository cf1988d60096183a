"""Generated training programs against torch.optim: the same float64 parameters, the same losses and the same
sequence of optimizer calls in minigrad and PyTorch, the parameters compared after every step (to 1e-12).

A program (SGD, AdamW, or AdamW8bit against torch's AdamW) is drawn from a seed: backward passes over a random
subset of the parameters (a parameter the loss skips has no .grad, and must be skipped as PyTorch skips it; without
zero_grad the gradients accumulate), step() and step(closure), zero_grad(set_to_none=True or False), add_param_group
mid-run, hyperparameters written into param_groups by hand, state_dict() saved and loaded into a fresh optimizer (its
layout compared with PyTorch's), clip_grad_norm_ and clip_grad_value_ (with inf and nan gradients,
error_if_nonfinite, norm_type inf). Then training loops with learning-rate schedulers (each of minigrad's, two
chained through group['lr'], SequentialLR, resumed from state dicts) and with GradScaler; last, one test for each
thing the programs found.
"""
import re
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.optim import lr_scheduler

from on_device import to_host

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

SHAPES = [(3, 4), (4,), (2, 3), (5,), (3,), (2,)]
FROZEN = 5          # requires_grad=False: never a gradient
RTOL, ATOL = 1e-12, 1e-14
TORCH_ONLY_KEYS = {"foreach", "capturable", "differentiable", "fused", "decoupled_weight_decay"}


class Twin:
    """The same parameters in both libraries, and the same loss on both."""

    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        arrays = [rng.standard_normal(s) for s in SHAPES]
        self.mg = [nn.Parameter(mg.tensor(a, dtype="float64"), requires_grad=i != FROZEN) for i, a in enumerate(arrays)]
        self.th = [torch.nn.Parameter(torch.tensor(a), requires_grad=i != FROZEN) for i, a in enumerate(arrays)]

    @staticmethod
    def _loss(lib, ps, used, data, scale):
        total = None
        for i in used:
            t, w = (lib.tensor(a, dtype="float64") if lib is mg else torch.tensor(a) for a in data[i])
            term = ((ps[i] - t) ** 2 * w).sum() + (ps[i].tanh() * t).sum()
            total = term if total is None else total + term
        return total * scale

    def backward(self, rng, scaler=None, side=None):
        """A loss over a random subset of the parameters (the frozen one may enter it too), scaled by 3, 1 or 0.3:
        gradients that change from step to step, and a curvature that keeps SGD's largest steps stable. Both
        sides, or one (side 0: minigrad's, 1: PyTorch's), whose loss is returned."""
        used = [i for i in range(len(SHAPES)) if rng.random() < 0.7]
        used = used if set(used) - {FROZEN} else used + [0]
        data = {i: (rng.standard_normal(SHAPES[i]), rng.uniform(0.5, 2.0, SHAPES[i])) for i in used}
        scale = float(rng.choice([1.0, 3.0, 0.3]))
        losses = []
        sides = ((mg, self.mg, scaler and scaler[0]), (torch, self.th, scaler and scaler[1]))
        for lib, ps, sc in sides if side is None else sides[side:side + 1]:
            loss = self._loss(lib, ps, used, data, scale)
            (sc.scale(loss) if sc is not None else loss).backward()
            losses.append(loss)
        return losses[0] if side is not None else used

    def check(self, what, finite=False):
        if finite:
            assert all(np.isfinite(to_host(p.detach())).all() for p in self.mg), f"a parameter diverged {what}"
        for i, (a, b) in enumerate(zip(self.mg, self.th)):
            np.testing.assert_allclose(to_host(a.detach()), b.detach().numpy(), rtol=RTOL, atol=ATOL,
                                       err_msg=f"parameter {i} {what}")
            assert (a.grad is None) == (b.grad is None), f"parameter {i}'s .grad {what}: {a.grad} vs {b.grad}"
            if a.grad is not None:
                np.testing.assert_allclose(to_host(a.grad), b.grad.numpy(), rtol=RTOL, atol=ATOL,
                                           err_msg=f"parameter {i}'s gradient {what}")

    def poison(self, rng):
        """One element of one gradient set to inf, -inf or nan, in both."""
        have = [i for i, p in enumerate(self.mg) if p.grad is not None]
        if not have:
            return
        i = int(rng.choice(have))
        k = int(rng.integers(self.th[i].numel()))
        bad = float(rng.choice([np.inf, -np.inf, np.nan]))
        g = to_host(self.mg[i].grad).copy()
        g.reshape(-1)[k] = bad
        self.mg[i].grad = mg.tensor(g, dtype="float64")
        with torch.no_grad():
            self.th[i].grad.view(-1)[k] = bad


# ----------------------------------------------------------------------------- drawing hyperparameters

def draw_hyper(rng, name, group=None):
    """Hyperparameters for SGD or AdamW; for a group (group: the constructor's), some of them only (the rest come
    from the constructor's). minigrad checks each group's nesterov (PyTorch only the constructor's): never drawn
    with momentum 0 or dampening."""
    if name == "SGD":
        kw = dict(lr=float(rng.choice([0.01, 0.05, 0.1])), momentum=float(rng.choice([0.0, 0.5, 0.9])),
                  weight_decay=float(rng.choice([0.0, 0.0, 0.05])), maximize=bool(rng.random() < 0.3))
        if kw["momentum"] and rng.random() < 0.4:
            kw["nesterov"] = True
        elif rng.random() < 0.5:
            kw["dampening"] = float(rng.choice([0.0, 0.3]))
    else:
        kw = dict(lr=float(rng.choice([1e-3, 0.01, 0.05])), weight_decay=float(rng.choice([0.0, 1e-2, 0.1])),
                  betas=tuple(float(b) for b in [(0.9, 0.999), (0.8, 0.95), (0.0, 0.99), (0.5, 0.5)][rng.integers(4)]),
                  eps=float(rng.choice([1e-8, 1e-6, 1e-3])), amsgrad=bool(rng.random() < 0.4),
                  maximize=bool(rng.random() < 0.3))
        if name == "AdamW8bit":   # bitsandbytes' has neither
            del kw["amsgrad"], kw["maximize"]
    if group is not None:
        kw = {k: kw[k] for k in sorted(kw) if rng.random() < 0.5}
        merged = {"nesterov": False, "dampening": 0.0, **group, **kw}
        if name == "SGD" and merged["nesterov"] and (merged["momentum"] <= 0 or merged["dampening"] != 0):
            kw["nesterov"] = False
    return kw


def draw_groups(rng, n_params):
    """The first n_params parameters split in order into one or two groups (the frozen one may be among them)."""
    cut = int(rng.integers(1, n_params)) if n_params > 1 and rng.random() < 0.5 else n_params
    return [list(range(cut))] + ([list(range(cut, n_params))] if cut < n_params else [])


def make(lib, ps, name, kw, layout):
    """minigrad's optimizer `name`, or PyTorch's; AdamW8bit's twin is PyTorch's AdamW: below min_8bit_size (4096
    elements, more than any parameter here) its moments are float32 and its step is AdamW's."""
    group_list = [{"params": [ps[i] for i in idx], **hyper} for idx, hyper in layout]
    return getattr(lib.optim, "AdamW" if lib is torch and name == "AdamW8bit" else name)(group_list, **kw)


def hand_edit(rng, name, opt_pair):
    """A hyperparameter written into one group of both optimizers, as a schedule or a person would."""
    gi = int(rng.integers(len(opt_pair[0].param_groups)))
    if name == "SGD":
        g = opt_pair[0].param_groups[gi]
        choices = [("lr", float(rng.choice([0.0, 0.02, 0.1]))), ("weight_decay", float(rng.choice([0.0, 0.1]))),
                   ("maximize", not g["maximize"])]
        if not g["nesterov"]:
            choices += [("momentum", float(rng.choice([0.0, 0.7]))), ("dampening", float(rng.choice([0.0, 0.5])))]
        if g["momentum"] > 0 and g["dampening"] == 0:
            choices.append(("nesterov", not g["nesterov"]))
    else:
        choices = [("lr", float(rng.choice([0.0, 0.003, 0.02]))), ("weight_decay", float(rng.choice([0.0, 0.2]))),
                   ("betas", tuple(float(b) for b in [(0.85, 0.99), (0.9, 0.999)][rng.integers(2)])),
                   ("eps", float(rng.choice([1e-8, 1e-4])))]
        if name == "AdamW":   # amsgrad turned on with state already there: PyTorch's step raises a KeyError
            choices += [("maximize", not opt_pair[0].param_groups[gi]["maximize"]), ("amsgrad", False)]
    key, value = choices[rng.integers(len(choices))]
    for opt in opt_pair:
        opt.param_groups[gi][key] = value


BNB_NAMES = {"state1": "exp_avg", "state2": "exp_avg_sq"}   # bitsandbytes' names of AdamW's moments


def compare_state_dicts(sd_mg, sd_th):
    """minigrad's optimizer state_dict has PyTorch's layout: the same numbering, group keys and state, value for value
    (PyTorch's step is a 0-d tensor, minigrad's a number); AdamW8bit's with bitsandbytes' names and min_8bit_size."""
    if "min_8bit_size" in sd_mg["param_groups"][0]:
        sd_mg = {"state": {i: {BNB_NAMES.get(k, k): v for k, v in s.items()} for i, s in sd_mg["state"].items()},
                 "param_groups": [{k: v for k, v in g.items() if k != "min_8bit_size"} for g in sd_mg["param_groups"]]}
        sd_th = {"state": sd_th["state"],
                 "param_groups": [{k: v for k, v in g.items() if k not in ("amsgrad", "maximize")}
                                  for g in sd_th["param_groups"]]}
    assert set(sd_mg) == set(sd_th) == {"state", "param_groups"}
    assert len(sd_mg["param_groups"]) == len(sd_th["param_groups"])
    for g_mg, g_th in zip(sd_mg["param_groups"], sd_th["param_groups"]):
        assert set(g_mg) == set(g_th) - TORCH_ONLY_KEYS, (set(g_mg), set(g_th))
        for k in g_mg:
            want = tuple(g_th[k]) if k == "betas" else g_th[k]
            assert g_mg[k] == want, (k, g_mg[k], g_th[k])
    assert sorted(sd_mg["state"]) == sorted(sd_th["state"])
    for i, s in sd_mg["state"].items():
        t = sd_th["state"][i]
        assert set(s) == set(t), (i, set(s), set(t))
        for k, v in s.items():
            if k == "step":
                assert v == t[k].item(), (i, v, t[k])
            else:
                np.testing.assert_allclose(to_host(v), t[k].numpy(), rtol=RTOL, atol=ATOL, err_msg=f"state {i} {k}")


# ----------------------------------------------------------------------------- optimizer programs

def run_program(name, seed, n_ops=30):
    rng = np.random.default_rng(seed)
    twin = Twin(seed)
    n_first = int(rng.integers(2, len(SHAPES) + 1))
    kw = draw_hyper(rng, name)
    layout = [(idx, draw_hyper(rng, name, group=kw) if rng.random() < 0.5 else {})
              for idx in draw_groups(rng, n_first)]
    opts = [make(mg, twin.mg, name, kw, layout), make(torch, twin.th, name, kw, layout)]
    added = n_first
    for op in range(n_ops):
        what = f"after op {op} of program {name}/{seed}"
        r = rng.random()
        if r < 0.3:
            twin.backward(rng)
        elif r < 0.5:
            for opt in opts:
                opt.step()
        elif r < 0.55:   # step(closure): the closure zeroes, computes the loss and its gradients
            state = rng.bit_generator.state
            losses = []
            for opt, side in zip(opts, (0, 1)):
                def closure(opt=opt, side=side):
                    opt.zero_grad()
                    rng.bit_generator.state = state     # the same draws on both sides
                    return twin.backward(rng, side=side)
                losses.append(opt.step(closure))
            np.testing.assert_allclose(to_host(losses[0]), losses[1].detach().numpy(), rtol=RTOL)
        elif r < 0.65:
            set_to_none = bool(rng.random() < 0.5)
            for opt in opts:
                opt.zero_grad(set_to_none=set_to_none)
        elif r < 0.72 and added < len(SHAPES):
            take = list(range(added, added + int(rng.integers(1, len(SHAPES) - added + 1))))
            hyper = draw_hyper(rng, name, group=kw)
            for opt, ps in zip(opts, (twin.mg, twin.th)):
                opt.add_param_group({"params": [ps[i] for i in take], **hyper})
            layout.append((take, hyper))
            added = take[-1] + 1
        elif r < 0.82:
            hand_edit(rng, name, opts)
        elif r < 0.9:
            compare_state_dicts(opts[0].state_dict(), opts[1].state_dict())
            saved = opts[0].state_dict()
            fresh = make(mg, twin.mg, name, kw, [(idx, {}) for idx, _ in layout])
            fresh.load_state_dict(saved)
            opts[0] = fresh
            saved_th = opts[1].state_dict()
            fresh_th = make(torch, twin.th, name, kw, [(idx, {}) for idx, _ in layout])
            fresh_th.load_state_dict(saved_th)
            opts[1] = fresh_th
        else:
            clip(rng, twin)
        twin.check(what)
    compare_state_dicts(opts[0].state_dict(), opts[1].state_dict())
    twin.check("at the end", finite=True)


def clip(rng, twin):
    """clip_grad_norm_ or clip_grad_value_ on both, sometimes after an inf or nan was put in a gradient (then the
    gradients are dropped afterwards, in both, so that the program goes on with finite parameters)."""
    poisoned = rng.random() < 0.3
    if poisoned:
        twin.poison(rng)
    params = [twin.mg, twin.th]
    if rng.random() < 0.7:
        max_norm = float(rng.choice([0.1, 1.0, 100.0]))
        norm_type = [2.0, 1.0, float("inf"), "inf", 3.0][rng.integers(5)]
        strict = bool(rng.random() < 0.4)
        results = []
        for lib, ps in zip((mg, torch), params):
            try:
                results.append(lib.nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type,
                                                            error_if_nonfinite=strict))
            except RuntimeError as e:
                results.append(e)
        raised = [isinstance(x, RuntimeError) for x in results]
        assert raised[0] == raised[1], results
        if not raised[0]:
            np.testing.assert_allclose(to_host(results[0]), results[1].numpy(), rtol=RTOL, atol=ATOL)
    elif any(p.grad is not None for p in twin.th):  # PyTorch 2.13's raises an internal error on no gradients at all
        value = float(rng.choice([0.01, 0.5, 3.0]))
        mg.nn.utils.clip_grad_value_(twin.mg, value)
        torch.nn.utils.clip_grad_value_(twin.th, value)
    twin.check("after clipping")
    if poisoned:
        for ps in params:
            for p in ps:
                p.grad = None


PROGRAMS = [("SGD", s) for s in range(12)] + [("AdamW", s) for s in range(12)] + [("AdamW8bit", s) for s in range(6)]


@pytest.mark.parametrize("name,seed", PROGRAMS, ids=[f"{n}-{s}" for n, s in PROGRAMS])
def test_an_optimizer_program_trains_as_pytorchs(name, seed):
    run_program(name, seed)


# ----------------------------------------------------------------------------- schedulers in a training loop

def _hf_cosine(step, warmup=3, total=20):
    """Hugging Face's cosine with warmup, as a plain function both LambdaLRs take."""
    return lr_scheduler._cosine_with_warmup(step, num_warmup_steps=warmup, num_training_steps=total, num_cycles=0.5)


class Halving:
    """An lr_lambda with state (a callable object): its __dict__ goes into LambdaLR's state_dict, in both."""

    def __init__(self):
        self.calls = 0

    def __call__(self, step):
        self.calls += 1
        return 0.5 ** (step // 4)


def schedulers(lib, opt, kind):
    """The schedulers of a program, as a list stepped in order each iteration (two: chained through group['lr'])."""
    s = lib.optim.lr_scheduler
    return {
        "StepLR": lambda: [s.StepLR(opt, step_size=3, gamma=0.5)],
        "MultiStepLR": lambda: [s.MultiStepLR(opt, milestones=[2, 5, 5, 9], gamma=0.3)],
        "LambdaLR": lambda: [s.LambdaLR(opt, lambda step: 0.9 ** step)],
        "LambdaLR per group": lambda: [s.LambdaLR(opt, [lambda e: 1 / (e + 1), Halving()])],
        "LambdaLR Hugging Face": lambda: [s.LambdaLR(opt, _hf_cosine)],
        "LinearLR": lambda: [s.LinearLR(opt, start_factor=0.2, total_iters=6)],
        "CosineAnnealingLR": lambda: [s.CosineAnnealingLR(opt, T_max=5, eta_min=1e-4)],
        "OneCycleLR": lambda: [s.OneCycleLR(opt, max_lr=[0.1, 0.05], total_steps=40, pct_start=0.25)],
        "SequentialLR": lambda: [s.SequentialLR(opt, [s.LinearLR(opt, 0.1, total_iters=4),
                                                      s.CosineAnnealingLR(opt, T_max=6),
                                                      s.StepLR(opt, step_size=2, gamma=0.7)], milestones=[4, 9])],
        "chained LinearLR and StepLR": lambda: [s.LinearLR(opt, 0.5, total_iters=5), s.StepLR(opt, 3, gamma=0.5)],
        "chained cosine and MultiStepLR": lambda: [s.CosineAnnealingLR(opt, T_max=7),
                                                   s.MultiStepLR(opt, milestones=[3, 8], gamma=0.5)],
    }[kind]()


def _scheduler_state(state):
    """A scheduler's state dict without what cannot be equal across libraries (a lambda), nested ones too."""
    out = {k: v for k, v in state.items() if k != "lr_lambdas"}
    if "_schedulers" in out:
        out["_schedulers"] = [_scheduler_state(s) for s in out["_schedulers"]]
    if "lr_lambdas" in state:
        out["saved lambdas"] = [x if x is None else dict(x) for x in state["lr_lambdas"]]
    return out


def run_scheduled(kind, name, seed, iterations=30):
    rng = np.random.default_rng(seed)
    twin = Twin(seed)
    kw = dict(lr=0.05, momentum=0.9) if name == "SGD" else dict(lr=0.01, amsgrad=bool(seed % 2))
    layout = [([0, 1, 2], {}), ([3, 4, 5], {"lr": 0.02})]
    opts = [make(mg, twin.mg, name, kw, layout), make(torch, twin.th, name, kw, layout)]
    scheds = [schedulers(mg, opts[0], kind), schedulers(torch, opts[1], kind)]
    for it in range(iterations):
        what = f"at iteration {it} of {kind}/{name}/{seed}"
        for opt in opts:
            opt.zero_grad(set_to_none=bool(it % 2))
        twin.backward(rng)
        for opt in opts:
            opt.step()
        for pair in zip(*scheds):
            for sch in pair:
                sch.step()
        twin.check(what)
        for a, b in zip(*scheds):
            assert a.get_last_lr() == b.get_last_lr(), what
            assert a.last_epoch == b.last_epoch, what
            assert _scheduler_state(a.state_dict()) == _scheduler_state(b.state_dict()), what
        for key in ("lr", "initial_lr", "momentum", "betas"):
            theirs = [g.get(key) for g in opts[1].param_groups]
            assert [g.get(key) for g in opts[0].param_groups] == \
                [tuple(v) if key == "betas" and v is not None else v for v in theirs], (key, what)
        r = rng.random()
        if r < 0.15 and not kind.startswith("OneCycle"):   # by hand: a chainable schedule goes on from it
            for opt in opts:
                opt.param_groups[0]["lr"] *= 0.5
        elif r < 0.3:   # resumed: a fresh optimizer and scheduler, then their state dicts (PyTorch's order)
            new_opts = [make(mg, twin.mg, name, kw, layout), make(torch, twin.th, name, kw, layout)]
            new_scheds = [schedulers(mg, new_opts[0], kind), schedulers(torch, new_opts[1], kind)]
            for old_o, new_o, old_s, new_s in zip(opts, new_opts, scheds, new_scheds):
                new_o.load_state_dict(old_o.state_dict())
                for a, b in zip(old_s, new_s):
                    b.load_state_dict(a.state_dict())
            opts, scheds = new_opts, new_scheds
    twin.check("at the end", finite=True)


SCHEDULED = [(k, n, s) for s, k in enumerate(["StepLR", "MultiStepLR", "LambdaLR", "LambdaLR per group",
                                             "LambdaLR Hugging Face", "LinearLR", "CosineAnnealingLR", "OneCycleLR",
                                             "SequentialLR", "chained LinearLR and StepLR",
                                             "chained cosine and MultiStepLR"])
             for n in ("SGD", "AdamW")]


@pytest.mark.parametrize("kind,name,seed", SCHEDULED, ids=[f"{k}-{n}" for k, n, _ in SCHEDULED])
def test_a_scheduled_training_loop_runs_as_pytorchs(kind, name, seed):
    run_scheduled(kind, name, seed)


# ----------------------------------------------------------------------------- GradScaler with the optimizer

@pytest.mark.parametrize("name,seed", [("SGD", 0), ("AdamW", 1), ("SGD", 2), ("AdamW", 3)])
def test_a_loop_with_grad_scaler_steps_and_skips_as_pytorchs(name, seed):
    """scaler.scale(loss).backward(), sometimes an inf or nan in a gradient, sometimes unscale_ and clipping, then
    scaler.step and scaler.update: the same steps taken and skipped, the same scale, the same parameters."""
    rng = np.random.default_rng(seed)
    twin = Twin(seed)
    kw = draw_hyper(rng, name)
    layout = [(idx, {}) for idx in draw_groups(rng, len(SHAPES))]
    opts = [make(mg, twin.mg, name, kw, layout), make(torch, twin.th, name, kw, layout)]
    skw = dict(init_scale=2.0 ** 6, growth_factor=4.0, backoff_factor=0.25, growth_interval=3)
    scalers = [mg.amp.GradScaler(**skw), torch.amp.GradScaler("cpu", **skw)]
    for it in range(16):
        what = f"at iteration {it} of {name}/{seed}"
        set_to_none = bool(rng.random() < 0.5)
        for opt in opts:
            opt.zero_grad(set_to_none=set_to_none)
        twin.backward(rng, scaler=scalers)
        if rng.random() < 0.25:
            twin.poison(rng)
        if rng.random() < 0.5:
            for sc, opt in zip(scalers, opts):
                sc.unscale_(opt)
            twin.check(what + ", unscaled")
            max_norm = float(rng.choice([0.5, 5.0]))
            totals = [mg.nn.utils.clip_grad_norm_(twin.mg, max_norm), torch.nn.utils.clip_grad_norm_(twin.th, max_norm)]
            np.testing.assert_allclose(to_host(totals[0]), totals[1].numpy(), rtol=RTOL, err_msg=what)
        for sc, opt in zip(scalers, opts):
            sc.step(opt)
            sc.update()
        assert scalers[0].get_scale() == scalers[1].get_scale(), what
        assert scalers[0].state_dict() == scalers[1].state_dict(), what
        twin.check(what)
        if it == 7:   # resumed from their state dicts: fresh scalers with other settings take the saved ones
            fresh = [mg.amp.GradScaler(init_scale=1.0, growth_interval=50),
                     torch.amp.GradScaler("cpu", init_scale=1.0, growth_interval=50)]
            for old, new in zip(scalers, fresh):
                new.load_state_dict(old.state_dict())
            scalers = fresh
    twin.check("at the end", finite=True)


# ----------------------------------------------------------------------------- what the programs found

@pytest.mark.parametrize("clip_value", [0.5, 2, 1e-3])
def test_clip_grad_value_clamps_as_pytorchs(clip_value):
    """torch.nn.utils.clip_grad_value_ was missing (an AttributeError with nothing to say): each element clamped to
    [-clip_value, clip_value], inf to the bound, nan kept, a parameter without a gradient skipped, one tensor taken
    alone; the same gradients as PyTorch's, bit for bit."""
    g = np.array([[3.0, -3.0, 0.25, np.inf], [-np.inf, np.nan, -0.4, 1e-3]])
    mine = [nn.Parameter(mg.zeros(2, 4, dtype="float64")), nn.Parameter(mg.zeros(3, dtype="float64"))]
    theirs = [torch.nn.Parameter(torch.zeros(2, 4, dtype=torch.float64)), torch.nn.Parameter(torch.zeros(3))]
    mine[0].grad, theirs[0].grad = mg.tensor(g, dtype="float64"), torch.tensor(g)
    assert mg.nn.utils.clip_grad_value_(mine, clip_value) is None
    torch.nn.utils.clip_grad_value_(theirs, clip_value)
    np.testing.assert_array_equal(to_host(mine[0].grad), theirs[0].grad.numpy())
    assert mine[1].grad is None
    one, their_one = nn.Parameter(mg.zeros(4, dtype="float64")), torch.nn.Parameter(torch.zeros(4, dtype=torch.float64))
    one.grad, their_one.grad = mg.tensor(g[0], dtype="float64"), torch.tensor(g[0])
    mg.nn.utils.clip_grad_value_(one, clip_value)
    torch.nn.utils.clip_grad_value_(their_one, clip_value)
    np.testing.assert_array_equal(to_host(one.grad), their_one.grad.numpy())


def _schedule_then_add_a_group(lib, make, steps=10, at=3, epoch=None):
    """The learning rates of a loop whose optimizer gets a third param group after `at` steps, or the step where it
    raised, and the error."""
    ps = [lib.zeros(2, requires_grad=True), lib.zeros(3, requires_grad=True), lib.zeros(1, requires_grad=True)]
    opt = lib.optim.SGD([{"params": [ps[0]], "lr": 0.1}, {"params": [ps[1]], "lr": 0.01}], momentum=0.9)
    sched, lrs = make(lib.optim.lr_scheduler, opt), []
    for i in range(steps):
        opt.step()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # step(epoch)'s deprecation
                sched.step() if epoch is None else sched.step(epoch + i)
        except ValueError as e:
            return i, e
        if i == at:
            opt.add_param_group({"params": [ps[2]], "lr": 0.5})
        lrs.append([g["lr"] for g in opt.param_groups])
    return lrs, None


ADDED_GROUP = {
    "LambdaLR": (lambda s, o: s.LambdaLR(o, lambda e: 0.9 ** e), None),
    "CosineAnnealingLR": (lambda s, o: s.CosineAnnealingLR(o, T_max=5), None),
    "StepLR step(epoch)": (lambda s, o: s.StepLR(o, 2, gamma=0.5), 1),
    "SequentialLR at its milestone": (lambda s, o: s.SequentialLR(o, [s.StepLR(o, 2), s.LinearLR(o, 0.5)], [7]), None),
    "StepLR": (lambda s, o: s.StepLR(o, 2, gamma=0.5), None),
    "LinearLR": (lambda s, o: s.LinearLR(o, 0.5, total_iters=6), None),
    "MultiStepLR": (lambda s, o: s.MultiStepLR(o, [2, 6]), None),
}


@pytest.mark.parametrize("name", ADDED_GROUP)
def test_a_group_added_after_the_scheduler_raises_where_pytorchs_does(name):
    """A param group added after the scheduler was made has no base lr in it. PyTorch's schedulers that read base_lrs
    (LambdaLR, CosineAnnealingLR's restarts, any closed form) raise a ValueError (a strict zip); minigrad's wrote the
    rates they had to the first groups and left the new one as it was: LambdaLR never scheduled it, and
    CosineAnnealingLR left it at 0.0, its value at T_max, for good. The chainable ones schedule it in both."""
    make, epoch = ADDED_GROUP[name]
    ours, error = _schedule_then_add_a_group(mg, make, epoch=epoch)
    theirs, their_error = _schedule_then_add_a_group(torch, make, epoch=epoch)
    assert (error is None) == (their_error is None), (ours, error, theirs, their_error)
    assert ours == theirs   # the same rates, or the same step raising
    if error is not None:
        assert re.search(r"\w+LR: .*3 param groups.* made for 2.*add_param_group", str(error)), str(error)


@pytest.mark.parametrize("first", ["float32", "float64"])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, "inf"])
def test_clip_grad_norm_of_float32_and_float64_gradients_is_taken_in_float64(first, norm_type):
    """PyTorch stacks the gradients' norms with type promotion: float32 and float64 gradients have a float64 total
    norm and clip coefficient. minigrad's took the first gradient's dtype: with a float32 gradient first, the total
    and the coefficient were rounded to float32, and the float64 gradients were scaled 1e-8 off, silently."""
    g = {"float32": np.array([0.1, -0.7]), "float64": np.array([0.3, 1.9, -2.3])}
    order = [first, "float64" if first == "float32" else "float32"]
    mine = [nn.Parameter(mg.zeros(len(g[d]), dtype=d)) for d in order]
    theirs = [torch.nn.Parameter(torch.zeros(len(g[d]), dtype=getattr(torch, d))) for d in order]
    for p, q, d in zip(mine, theirs, order):
        p.grad, q.grad = mg.tensor(g[d], dtype=d), torch.tensor(g[d], dtype=getattr(torch, d))
    total = mg.nn.utils.clip_grad_norm_(mine, 0.5, norm_type)
    want = torch.nn.utils.clip_grad_norm_(theirs, 0.5, norm_type)
    assert total.dtype == np.float64 and want.dtype == torch.float64
    np.testing.assert_allclose(to_host(total), want.numpy(), rtol=1e-15)
    for p, q in zip(mine, theirs):
        assert p.grad.dtype == q.grad.numpy().dtype
        np.testing.assert_allclose(to_host(p.grad), q.grad.numpy(), rtol=1e-15 if p.grad.dtype == np.float64 else 1e-7)


def test_chained_scheduler_is_refused_saying_how_to_chain_and_that_way_gives_pytorchs_rates():
    """minigrad has no ChainedScheduler: its error says to call each scheduler's step() in turn (it said only 'LambdaLR
    makes any schedule'), and that loop gives torch's ChainedScheduler's learning rates, bit for bit."""
    with pytest.raises(AttributeError, match=r"ChainedScheduler.*step\(\) of each scheduler in turn"):
        lr_scheduler.ChainedScheduler
    ours, theirs = Twin(0), Twin(0)
    mine = mg.optim.SGD([{"params": ours.mg[:3]}, {"params": ours.mg[3:], "lr": 0.3}], lr=0.1, momentum=0.9)
    ref = torch.optim.SGD([{"params": theirs.th[:3]}, {"params": theirs.th[3:], "lr": 0.3}], lr=0.1, momentum=0.9)
    in_turn = [lr_scheduler.LinearLR(mine, 0.5, total_iters=4), lr_scheduler.CosineAnnealingLR(mine, T_max=6),
               lr_scheduler.MultiStepLR(mine, [3, 7], gamma=0.5)]
    t = torch.optim.lr_scheduler
    chained = t.ChainedScheduler([t.LinearLR(ref, 0.5, total_iters=4), t.CosineAnnealingLR(ref, T_max=6),
                                  t.MultiStepLR(ref, [3, 7], gamma=0.5)])
    assert in_turn[-1].get_last_lr() == chained.get_last_lr()
    for _ in range(14):
        mine.step(), ref.step()
        for s in in_turn:
            s.step()
        chained.step()
        assert in_turn[-1].get_last_lr() == chained.get_last_lr()


@pytest.mark.parametrize("name,kw", [("AdamW", dict(lr=0.01)), ("AdamW", dict(lr=0.01, amsgrad=True, maximize=True)),
                                     ("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.2)),
                                     ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True))],
                         ids=["AdamW", "AdamW-amsgrad-maximize", "SGD", "SGD-momentum-dampening",
                              "SGD-nesterov-maximize"])
@pytest.mark.parametrize("grad_dtype", ["float32", "float16"])
def test_a_narrower_gradient_steps_a_float64_parameter_in_float64(name, kw, grad_dtype):
    """minigrad takes a .grad of another dtype than its parameter (accumulate's float32 master gradients of float16
    weights; PyTorch refuses the assignment). A float64 parameter with a float32 or float16 gradient was stepped
    with float32 (float16) arithmetic: AdamW's scratch arrays took the gradient's dtype, so its second moment's
    square root and its update were rounded to float32 (3e-8 off; 1e-4 with a float16 gradient), and SGD's lr * g
    and (1 - dampening) g too. The gradient is now upcast first: PyTorch's step on the same values in float64."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5))
    p, q = nn.Parameter(mg.tensor(a, dtype="float64")), torch.nn.Parameter(torch.tensor(a))
    mine, theirs = getattr(mg.optim, name)([p], **kw), getattr(torch.optim, name)([q], **kw)
    for step in range(4):
        g = rng.standard_normal((4, 5)).astype(grad_dtype)
        p.grad, q.grad = mg.tensor(g, dtype=grad_dtype), torch.tensor(g.astype(np.float64))
        mine.step(), theirs.step()
        assert p.grad.dtype == np.dtype(grad_dtype)    # the gradient itself is left as it was
        np.testing.assert_allclose(to_host(p.detach()), q.detach().numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=f"after step {step + 1}")


def test_adamw_refuses_moments_of_another_dtype_than_its_parameter_as_pytorchs_does():
    """model.to(float64) after AdamW's first step: PyTorch's AdamW raises (its lerp_ of float32 moments by a float64
    gradient); minigrad's went on silently with float32 moments for the float64 model. It now raises, saying what to
    do; doing it (load_state_dict casts the state to the parameters' dtype) steps as PyTorch's does after the same."""
    def first_step(lib):
        lib.manual_seed(0)
        model = lib.nn.Linear(3, 2)
        opt = lib.optim.AdamW(model.parameters(), lr=0.1)
        model(lib.ones(4, 3)).sum().backward()
        opt.step()
        opt.zero_grad()
        model.to(dtype=lib.float64)
        model(lib.ones(4, 3, dtype=lib.float64)).sum().backward()
        return model, opt
    model, opt = first_step(mg)
    twin, their_opt = first_step(torch)
    with pytest.raises(RuntimeError):
        their_opt.step()
    with pytest.raises(RuntimeError, match=r"AdamW.step: the moments of a parameter of shape \(2, 3\) are float32 but "
                                           r"the parameter is float64.*opt.load_state_dict\(opt.state_dict\(\)\)"):
        opt.step()
    for o in (opt, their_opt):
        o.load_state_dict(o.state_dict())
    before = to_host(model.weight.detach()).copy()
    opt.step(), their_opt.step()
    assert all(v.dtype == np.float64 for s in opt.state.values() for v in s.values() if hasattr(v, "dtype"))
    assert {v.dtype for s in their_opt.state.values() for k, v in s.items() if k != "step"} == {torch.float64}
    assert not np.array_equal(to_host(model.weight.detach()), before)   # it stepped
