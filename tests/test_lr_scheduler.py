"""mg.optim.lr_scheduler against torch.optim.lr_scheduler: the same learning rates to the last bit, step by step
(NOTE [chainable learning rates]), the same get_last_lr, last_epoch and state_dict, and a schedule resumed from its
state_dict goes on as the one never stopped; Hugging Face's warmup-then-cosine against its formula."""
import math
import warnings

import pytest

import minigrad as mg
from minigrad.optim import lr_scheduler

torch = None


def optimizers(kind="adamw"):
    """A minigrad optimizer and a torch one, each with two param groups of different learning rates."""
    global torch
    torch = pytest.importorskip("torch")
    mine = [mg.zeros(2, requires_grad=True), mg.zeros(3, requires_grad=True)]
    theirs = [torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)]
    groups = lambda ps: [{"params": [ps[0]], "lr": 0.1}, {"params": [ps[1]], "lr": 3e-4}]  # noqa: E731
    if kind == "sgd":
        return mg.optim.SGD(groups(mine), momentum=0.9), torch.optim.SGD(groups(theirs), momentum=0.9)
    return mg.optim.AdamW(groups(mine)), torch.optim.AdamW(groups(theirs))


def warmup_cosine(lib, opt):
    s = lib.optim.lr_scheduler
    return s.SequentialLR(opt, [s.LinearLR(opt, start_factor=0.01, total_iters=5), s.CosineAnnealingLR(opt, T_max=15)],
                          milestones=[5])


SCHEDULES = {
    "StepLR": lambda lib, opt: lib.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5),
    "LambdaLR": lambda lib, opt: lib.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.97 ** step),
    "LambdaLR per group": lambda lib, opt: lib.optim.lr_scheduler.LambdaLR(opt, [lambda s: 1 / (s + 1), lambda s: s]),
    "LinearLR": lambda lib, opt: lib.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=7),
    "LinearLR decay": lambda lib, opt: lib.optim.lr_scheduler.LinearLR(opt, 1.0, end_factor=0.1, total_iters=9),
    "CosineAnnealingLR": lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=1e-5),
    "warmup then cosine": warmup_cosine,
    "MultiStepLR": lambda lib, opt: lib.optim.lr_scheduler.MultiStepLR(opt, milestones=[3, 7, 7, 20], gamma=0.3),
    "OneCycleLR": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=[0.5, 1e-3], total_steps=30),
    "OneCycleLR three phases, linear": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=0.2, epochs=4, steps_per_epoch=9, pct_start=0.25, anneal_strategy="linear", three_phase=True,
        div_factor=10.0, final_div_factor=100.0),
}


def stepped(sched, opt, n):
    lrs = [sched.get_last_lr()]
    for _ in range(n):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
    return lrs


def comparable(state):
    """A scheduler's state dict with the parts that cannot be equal across libraries (a lambda's object) left out."""
    out = {k: v for k, v in state.items() if k not in ("lr_lambdas",)}
    if "_schedulers" in out:
        out["_schedulers"] = [comparable(s) for s in out["_schedulers"]]
    return out


@pytest.mark.parametrize("name", SCHEDULES)
def test_learning_rates_equal_pytorchs_bit_for_bit(name):
    mine, theirs = optimizers()
    s_mine, s_theirs = SCHEDULES[name](mg, mine), SCHEDULES[name](torch, theirs)
    ours, ref = stepped(s_mine, mine, 30), stepped(s_theirs, theirs, 30)
    assert ours == ref  # floats compared exactly: the same formulas in the same order
    assert [g["lr"] for g in mine.param_groups] == [g["lr"] for g in theirs.param_groups]
    assert [g["initial_lr"] for g in mine.param_groups] == [g["initial_lr"] for g in theirs.param_groups]
    if not name.startswith("OneCycleLR"):   # which sets initial_lr to max_lr / div_factor
        assert [g["initial_lr"] for g in mine.param_groups] == [0.1, 3e-4]
    assert s_mine.last_epoch == s_theirs.last_epoch == 30
    assert comparable(s_mine.state_dict()) == comparable(s_theirs.state_dict())


@pytest.mark.parametrize("name", SCHEDULES)
def test_a_schedule_resumed_from_its_state_dict_goes_on_as_if_never_stopped(name):
    mine, theirs = optimizers("sgd")
    first = SCHEDULES[name](mg, mine)
    stepped(first, mine, 8)
    saved_opt, saved = mine.state_dict(), first.state_dict()
    again, _ = optimizers("sgd")
    resumed = SCHEDULES[name](mg, again)   # PyTorch's order: the scheduler first (it steps once, writing lr) ...
    again.load_state_dict(saved_opt)       # ... then the optimizer's state (lr and initial_lr come back) ...
    resumed.load_state_dict(saved)         # ... and the scheduler's
    assert resumed.last_epoch == 8 and resumed.get_last_lr() == first.get_last_lr()
    assert stepped(resumed, again, 12) == stepped(first, mine, 12)


def test_resuming_with_last_epoch_needs_initial_lr_and_continues_the_closed_form():
    mine, theirs = optimizers()
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(mine, step_size=2, last_epoch=5)
    with pytest.raises(KeyError):
        torch.optim.lr_scheduler.StepLR(theirs, step_size=2, last_epoch=5)
    for opt in (mine, theirs):
        for g in opt.param_groups:
            g["initial_lr"] = g["lr"]
    a = lr_scheduler.CosineAnnealingLR(mine, T_max=10, last_epoch=3)
    b = torch.optim.lr_scheduler.CosineAnnealingLR(theirs, T_max=10, last_epoch=3)
    assert stepped(a, mine, 10) == stepped(b, theirs, 10)


def test_step_with_an_epoch_warns_and_uses_the_closed_form_as_pytorch():
    mine, theirs = optimizers()
    a, b = lr_scheduler.StepLR(mine, step_size=3, gamma=0.5), torch.optim.lr_scheduler.StepLR(theirs, 3, gamma=0.5)
    mine.step(), theirs.step()
    with pytest.warns(UserWarning, match="epoch parameter"):
        a.step(7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.step(7)
    assert a.get_last_lr() == b.get_last_lr() == [0.1 * 0.25, 3e-4 * 0.25]
    with pytest.warns(UserWarning, match="get_last_lr"):
        a.get_lr()


def test_hugging_faces_cosine_with_warmup_follows_its_formula():
    opt, _ = optimizers()
    sched = lr_scheduler.get_cosine_schedule_with_warmup(opt, num_warmup_steps=4, num_training_steps=20)
    lrs = [lr[0] for lr in stepped(sched, opt, 24)]

    def hf(step):  # transformers.optimization._get_cosine_schedule_with_warmup_lr_lambda, num_cycles 0.5
        if step < 4:
            return step / 4
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * (step - 4) / 16)))

    assert lrs == [0.1 * hf(s) for s in range(25)]
    assert lrs[0] == 0.0 and lrs[4] == 0.1 and lrs[20] == pytest.approx(0.0, abs=1e-18) and max(lrs) == 0.1
    assert sched.state_dict()["lr_lambdas"] == [{}, {}]  # a partial: a callable object, saved as PyTorch saves it
    linear = lr_scheduler.get_linear_schedule_with_warmup(optimizers()[0], 2, 10)
    assert [lr[0] for lr in stepped(linear, linear.optimizer, 10)] == \
        [0.1 * f for f in (0, 0.5, 1, 7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8, 0)]


def test_bad_arguments_are_refused_naming_them():
    opt, _ = optimizers()
    with pytest.raises(TypeError, match="is not an Optimizer"):
        lr_scheduler.StepLR([mg.zeros(2)], step_size=2)
    with pytest.raises(ValueError, match="step_size"):
        lr_scheduler.StepLR(opt, step_size=0)
    with pytest.raises(ValueError, match="T_max"):
        lr_scheduler.CosineAnnealingLR(opt, T_max=0)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        lr_scheduler.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="number of milestone"):
        lr_scheduler.SequentialLR(opt, [lr_scheduler.StepLR(opt, 2)], milestones=[3])
    with pytest.raises(AttributeError, match="LambdaLR"):
        lr_scheduler.CyclicLR
    with pytest.raises(AttributeError, match="did you mean 'CosineAnnealingLR'"):
        mg.optim.lr_scheduler.CosineAnealingLR


@pytest.mark.parametrize("kind", ["adamw", "sgd"])
def test_one_cycle_cycles_momentum_as_pytorch_does(kind):
    """OneCycleLR moves SGD's momentum, or AdamW's beta1, against the learning rate: the same values, bit for bit."""
    mine, theirs = optimizers(kind)
    s_mine = mg.optim.lr_scheduler.OneCycleLR(mine, max_lr=0.3, total_steps=12, base_momentum=0.8)
    s_theirs = torch.optim.lr_scheduler.OneCycleLR(theirs, max_lr=0.3, total_steps=12, base_momentum=0.8)
    key = "betas" if kind == "adamw" else "momentum"
    seen = set()
    for _ in range(12):
        assert [g[key] for g in mine.param_groups] == [tuple(g[key]) if kind == "adamw" else g[key]
                                                       for g in theirs.param_groups]
        seen.add(mine.param_groups[0][key] if kind == "sgd" else mine.param_groups[0][key][0])
        mine.step(), theirs.step(), s_mine.step(), s_theirs.step()
    assert len(seen) > 5   # it moved
    with pytest.raises(ValueError, match="tried to step 13 times"):
        mine.step()
        s_mine.step()


def test_one_cycle_refuses_what_pytorch_refuses():
    mine, _ = optimizers()
    with pytest.raises(ValueError, match="total_steps OR"):
        mg.optim.lr_scheduler.OneCycleLR(mine, max_lr=0.1)
    with pytest.raises(ValueError, match="pct_start"):
        mg.optim.lr_scheduler.OneCycleLR(mine, max_lr=0.1, total_steps=10, pct_start=1)
    with pytest.raises(ValueError, match="2 param groups"):
        mg.optim.lr_scheduler.OneCycleLR(mine, max_lr=[0.1], total_steps=10)


def test_scheduler_step_before_optimizer_step_warns_as_pytorch_does():
    """PyTorch's warning (its issue 20124): the schedule's first value is skipped. Only the first step is checked."""
    for lib in (mg, pytest.importorskip("torch")):
        p = lib.zeros(2, requires_grad=True)
        opt = lib.optim.SGD([p], lr=0.1)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=2)
        with pytest.warns(UserWarning, match=r"Detected call of `lr_scheduler.step\(\)` before `optimizer.step\(\)`"):
            sched.step()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sched.step()                     # only the first one warns
        opt2 = lib.optim.SGD([p], lr=0.1)
        sched2 = lib.optim.lr_scheduler.StepLR(opt2, step_size=2)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            opt2.step()
            sched2.step()                    # the right order: no warning
