"""torch.optim.lr_scheduler's schedulers, with PyTorch's (2.x) formulas and semantics: StepLR, MultiStepLR, LambdaLR,
LinearLR, CosineAnnealingLR, OneCycleLR (which also cycles momentum), SequentialLR; and the warmup-then-decay schedules of Hugging Face (transformers.optimization's
get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup), each a LambdaLR.

    opt = mg.optim.AdamW(model.parameters(), lr=3e-4)
    sched = mg.optim.lr_scheduler.get_cosine_schedule_with_warmup(opt, num_warmup_steps=100, num_training_steps=2000)
    for step in range(2000):
        ...; opt.step(); sched.step()        # after the optimizer's step, once per step

As in PyTorch:
- making a scheduler sets each group's 'initial_lr' (where it is not set yet) and takes one step: last_epoch goes
  from -1 to 0 and each group's lr becomes the schedule's first value (for LinearLR, lr * start_factor);
- step() adds one to last_epoch and writes each group's "lr"; get_last_lr() is the list of those values;
- get_lr() is the chainable form: each value is made from the group's current lr (so that a change written to
  group["lr"] by hand, or by another scheduler, carries on); step(epoch), deprecated in PyTorch, sets last_epoch
  and uses the closed form (_get_closed_form_lr) where there is one, as SequentialLR does at a milestone;
- state_dict() is every attribute but the optimizer (LambdaLR keeps a lambda's state only for a callable object,
  SequentialLR its schedulers' state dicts), load_state_dict() puts them back; last_epoch=-1 starts afresh, a
  larger last_epoch resumes, and needs 'initial_lr' in every group (PyTorch's KeyError).

NOTE [chainable learning rates]: the recursive formulas are PyTorch's, operation for operation, so the learning
rates here are PyTorch's to the last bit, not only the closed form's values within rounding
(tests/test_lr_scheduler.py compares them step by step). PyTorch's warning when the first scheduler.step() comes
before any optimizer.step() is here too: PyTorch patches the optimizer's step to notice; minigrad's Optimizer
sets the same flag, `_opt_called`, in its own step (optimizer.py's _reported).

Read next: schedules.py, a schedule of another kind: where to cut a chain.
"""
import bisect
import collections
import functools
import math
import numbers
import types
import warnings

from ..names import not_offered
from .optimizer import Optimizer

STEP_ORDER_WARNING = (
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, you should call "
    "them in the opposite order: `optimizer.step()` before `lr_scheduler.step()`.  Failure to do this will result in "
    "PyTorch skipping the first value of the learning rate schedule. See more details at "
    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate")
EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where possible. Please use "
    "`scheduler.step()` to step the scheduler. During the deprecation, if epoch is different from None, the closed "
    "form is used instead of the new chainable form, where available (PyTorch's warning)")


def _check_positive(where, name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{where}: {name} must be a number > 0, got {value!r}")


class LRScheduler:
    """The base class: a subclass gives get_lr() (and, where it has one, _get_closed_form_lr())."""
    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: {type(optimizer).__name__} is not an Optimizer; pass the "
                            f"optimizer whose learning rates it schedules (mg.optim.AdamW(...), mg.optim.SGD(...))")
        self.optimizer = optimizer
        for i, group in enumerate(optimizer.param_groups):
            if group.get("lr") is None:  # Adafactor's relative step: it makes its own learning rate each step
                raise ValueError(f"{type(self).__name__}: param_groups[{i}] has lr=None, nothing to schedule: "
                                 f"{type(optimizer).__name__} computes its own step (relative_step=True); pass "
                                 "relative_step=False and an lr to schedule it")
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming a "
                                   f"scheduler with last_epoch={last_epoch} >= 0: load the optimizer's state_dict "
                                   f"first (it holds 'initial_lr'), or start afresh with last_epoch=-1")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self):
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def get_last_lr(self):
        """The learning rates the last step() wrote, one per param group."""
        return self._last_lr

    def get_lr(self):
        raise NotImplementedError

    def _warn_outside_step(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=3)

    def step(self, epoch=None):
        # PyTorch's warning (its issue 20124): the first step() after making the scheduler comes before any
        # optimizer.step() (Optimizer's step sets _opt_called, as PyTorch's patched step does): the schedule's
        # first learning rate is then skipped
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn(STEP_ORDER_WARNING, UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                values = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        self._check_groups(len(values))
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _check_groups(self, n):
        """Raise where n values (learning rates, or base_lrs) do not match the param groups one to one: a group added
        since the scheduler was made has no base lr. PyTorch's strict zip raises there; a plain zip left such a group
        unscheduled (or stuck at 0.0, CosineAnnealingLR's rate at T_max), with no word."""
        groups = len(self.optimizer.param_groups)
        if n != groups:
            raise ValueError(f"{type(self).__name__}: {n} learning rates for the optimizer's {groups} param groups: "
                             f"the scheduler was made for {len(self.base_lrs)} (one initial_lr each, its base_lrs) "
                             f"and a group added by add_param_group since has none; add every group before making "
                             f"the scheduler, or make a new one after adding it (PyTorch raises a ValueError here too)")

    def _current(self):
        return [group["lr"] for group in self.optimizer.param_groups]


_LRScheduler = LRScheduler  # PyTorch's old name


class LambdaLR(LRScheduler):
    """lr = initial lr * lr_lambda(last_epoch): one function for every group, or a list of one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        if not isinstance(lr_lambda, (list, tuple)):
            if not callable(lr_lambda):
                raise TypeError(f"LambdaLR: lr_lambda must be a function of the step (or a list of one per param "
                                f"group), got {type(lr_lambda).__name__}")
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        else:
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch)

    def state_dict(self):
        """As PyTorch's: a lambda or plain function is not saved (None), a callable object's __dict__ is."""
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        lr_lambdas = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for fn, saved in zip(self.lr_lambdas, lr_lambdas):
            if saved is not None:
                fn.__dict__.update(saved)

    def get_lr(self):
        self._warn_outside_step()
        return [base_lr * lmbda(self.last_epoch) for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class StepLR(LRScheduler):
    """lr *= gamma every step_size steps."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        if isinstance(step_size, bool) or not isinstance(step_size, numbers.Integral) or step_size < 1:
            raise ValueError(f"StepLR: step_size must be a whole number >= 1 (steps between decays), got {step_size!r}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr *= gamma at each milestone step (gamma**n at a milestone listed n times)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        milestones = list(milestones)
        if any(isinstance(m, bool) or not isinstance(m, numbers.Integral) for m in milestones):
            raise ValueError(f"MultiStepLR: milestones must be whole step numbers, got {milestones!r}")
        self.milestones, self.gamma = collections.Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self.last_epoch not in self.milestones:
            return self._current()
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch] for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect.bisect_right(milestones, self.last_epoch) for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """lr = initial lr * a factor going linearly from start_factor to end_factor over total_iters steps (a warmup
    when start_factor < end_factor), then staying there."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        _check_positive("LinearLR", "total_iters", total_iters)
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        change = self.end_factor - self.start_factor
        return [group["lr"] * (1.0 + change / (self.total_iters * self.start_factor + (self.last_epoch - 1) * change))
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor)
                           * min(self.total_iters, self.last_epoch) / self.total_iters) for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (initial lr - eta_min) (1 + cos(pi t / T_max)) / 2, by PyTorch's recursion (NOTE [chainable
    learning rates]); past T_max it rises again, as PyTorch's does (it has no restarts: SGDR's cosine without them)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        _check_positive("CosineAnnealingLR", "T_max", T_max)
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_outside_step()
        if self._is_initial:
            return self._current()
        if self._step_count == 1 and self.last_epoch > 0 or (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            self._check_groups(len(self.base_lrs))  # both zip base_lrs with the groups, strictly in PyTorch
        if self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                    for base_lr in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [group["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, self.optimizer.param_groups)]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max)) * (group["lr"] - self.eta_min)
                + self.eta_min for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith and Topin 2017, fastai's two phases; three_phase=True for the paper's): the lr
    rises from max_lr/div_factor to max_lr over pct_start of total_steps, then anneals to initial_lr/final_div_factor;
    momentum (SGD's momentum, AdamW's beta1) moves the other way, between max_momentum and base_momentum. It is set
    each step, not chained; step() once per batch. Stepping past total_steps raises, as in PyTorch."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"OneCycleLR: {type(optimizer).__name__} is not an Optimizer")
        if total_steps is not None:
            if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"OneCycleLR: expected positive integer total_steps, but got {total_steps!r}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            for name, value in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
                if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                    raise ValueError(f"OneCycleLR: expected positive integer {name}, but got {value!r}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("OneCycleLR: you must define either total_steps OR (epochs AND steps_per_epoch)")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: expected float between 0 and 1 pct_start, but got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', got {anneal_strategy!r}")
        phase = lambda end, lr_from, lr_to, m_from, m_to: {  # noqa: E731  PyTorch's _schedule_phases, by name
            "end_step": end, "start_lr": lr_from, "end_lr": lr_to, "start_momentum": m_from, "end_momentum": m_to}
        up = float(pct_start * self.total_steps) - 1   # the step where the lr peaks
        self._schedule_phases = ([phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                                  phase(float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr",
                                        "base_momentum", "max_momentum"),
                                  phase(self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
                                 if three_phase else
                                 [phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                                  phase(self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")])
        self._anneal_func_type, self.cycle_momentum = anneal_strategy, cycle_momentum
        groups = optimizer.param_groups
        if last_epoch == -1:
            for group, peak in zip(groups, _per_group("max_lr", optimizer, max_lr)):
                group["initial_lr"] = peak / div_factor
                group["max_lr"] = peak
                group["min_lr"] = group["initial_lr"] / final_div_factor
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("OneCycleLR: optimizer must support momentum or beta1 with `cycle_momentum` option "
                                 "enabled (pass cycle_momentum=False)")
            self.use_beta1 = "betas" in optimizer.defaults
            if last_epoch == -1:
                for group, high, low in zip(groups, _per_group("max_momentum", optimizer, max_momentum),
                                            _per_group("base_momentum", optimizer, base_momentum)):
                    self._set_momentum(group, high)
                    group["max_momentum"], group["base_momentum"] = high, low
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        self._warn_outside_step()
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times. The specified number of total steps is "
                             f"{self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[phase["start_momentum"]],
                                                               group[phase["end_momentum"]], pct))
                    break
                start = end
        return lrs


def _per_group(name, optimizer, value):
    """A value per param group: a list or tuple of one per group, or one value for all (PyTorch's _format_param)."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"OneCycleLR: {name} has {len(value)} values; the optimizer has {n} param groups")
        return list(value)
    return [value] * n


class SequentialLR(LRScheduler):
    """schedulers[0] until milestones[0], then schedulers[1] (started from its closed form at 0), ...: a warmup then
    a decay is SequentialLR(opt, [LinearLR(opt, 0.01, total_iters=w), CosineAnnealingLR(opt, T_max=n - w)], [w])."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler, but got no scheduler.")
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(f"SequentialLR at index {i} should have `optimizer` as its attribute.")
            if s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR expects all schedulers to belong to the same optimizer, but got "
                                 f"scheduler {type(s).__name__} at index {i} with another optimizer")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                             f"number of milestones to be equal to {len(milestones)}")
        self._schedulers, self._milestones = schedulers, milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:  # the schedulers' own first steps undone
            group["lr"] = group["initial_lr"]
        self._undo(self)
        first = self._schedulers[bisect.bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def _undo(self, scheduler):
        if hasattr(scheduler, "_schedulers"):
            for s in scheduler._schedulers:
                self._undo(s)
        elif hasattr(scheduler, "last_epoch"):
            scheduler.last_epoch -= 1

    def step(self):
        self.last_epoch += 1
        i = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        schedulers = state.pop("_schedulers")
        self.__dict__.update(state)
        for s, saved in zip(self._schedulers, schedulers):
            s.load_state_dict(saved)


# --- Hugging Face's warmup schedules (transformers.optimization), each a LambdaLR of a partial (which saves)

def _cosine_with_warmup(current_step, *, num_warmup_steps, num_training_steps, num_cycles):
    if current_step < num_warmup_steps:
        return float(current_step) / float(max(1, num_warmup_steps))
    progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))


def _linear_with_warmup(current_step, *, num_warmup_steps, num_training_steps):
    if current_step < num_warmup_steps:
        return float(current_step) / float(max(1, num_warmup_steps))
    return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=0.5, last_epoch=-1):
    """From 0 up to the optimizer's lr linearly over num_warmup_steps, then down along a cosine to 0 at
    num_training_steps (num_cycles=0.5: half a period), as Hugging Face's function of the same name."""
    return LambdaLR(optimizer, functools.partial(_cosine_with_warmup, num_warmup_steps=num_warmup_steps,
                                                 num_training_steps=num_training_steps, num_cycles=num_cycles),
                    last_epoch)


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    """From 0 up to the optimizer's lr linearly over num_warmup_steps, then linearly down to 0 at
    num_training_steps, as Hugging Face's function of the same name."""
    return LambdaLR(optimizer, functools.partial(_linear_with_warmup, num_warmup_steps=num_warmup_steps,
                                                 num_training_steps=num_training_steps), last_epoch)


__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "LinearLR", "CosineAnnealingLR", "OneCycleLR",
           "SequentialLR",
           "get_cosine_schedule_with_warmup", "get_linear_schedule_with_warmup"]

_INSTEAD = {n: "minigrad offers StepLR, MultiStepLR, LambdaLR, LinearLR, CosineAnnealingLR, OneCycleLR and "
               "SequentialLR; LambdaLR(opt, lambda step: factor) makes any schedule of the step" for n in
            ("ConstantLR", "ExponentialLR", "PolynomialLR", "CyclicLR",
             "CosineAnnealingWarmRestarts", "MultiplicativeLR")}
_INSTEAD["ChainedScheduler"] = ("call step() of each scheduler in turn, after optimizer.step(): each one's chainable "
                                "form goes on from the group['lr'] the one before wrote, which is all "
                                "ChainedScheduler.step() does; the last one's get_last_lr() is ChainedScheduler's")
_INSTEAD["ReduceLROnPlateau"] = ("minigrad has no scheduler that reads the loss; write group['lr'] *= factor in "
                                 "your loop when the validation loss stops falling")


def __getattr__(name):
    raise not_offered(__name__, name, __all__, _INSTEAD)
