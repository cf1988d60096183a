"""Optimizers and their learning-rate schedules, with torch.optim's names (`mg.optim.AdamW`,
`mg.optim.lr_scheduler.CosineAnnealingLR`; `from minigrad.optim.lr_scheduler import LambdaLR` as in PyTorch).

  optimizer.py     Optimizer (param groups, state_dict), SGD and AdamW with PyTorch's update rules
  lr_scheduler.py  torch.optim.lr_scheduler: StepLR, MultiStepLR, LambdaLR, LinearLR, CosineAnnealingLR, OneCycleLR,
                   SequentialLR, and
                   Hugging Face's warmup schedules (get_cosine_schedule_with_warmup), each a LambdaLR
"""
from ..names import not_offered
from .optimizer import SGD, AdamW, Optimizer, _cast, _check_flag, _check_number, _copied, _reported  # noqa: F401
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "AdamW", "lr_scheduler"]

_OTHERS = ("SGD (momentum, nesterov) and AdamW; with weight_decay=0.0 AdamW is Adam (PyTorch's Adam decays only "
           "through weight_decay, 0 by default)")
_INSTEAD = {"Adam": "write AdamW(params, lr, betas, eps, weight_decay=0.0): with no weight decay AdamW is Adam, "
                    "update for update (PyTorch's Adam adds weight_decay to the gradient instead, L2, 0 by default)",
            **{n: f"minigrad has {_OTHERS}" for n in ("RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
                                                       "LBFGS", "SparseAdam", "ASGD", "Rprop", "Adafactor", "Muon")},
            "swa_utils": "minigrad has no weight averaging; keep a copy of model.state_dict() and average by hand"}


def __getattr__(name):
    raise not_offered(__name__, name, __all__, _INSTEAD)
