"""Optimizers and their learning-rate schedules, with torch.optim's names (`mg.optim.AdamW`,
`mg.optim.lr_scheduler.CosineAnnealingLR`; `from minigrad.optim.lr_scheduler import LambdaLR` as in PyTorch).

  optimizer.py     Optimizer (param groups, state_dict), SGD and AdamW with PyTorch's update rules
  adafactor.py     Adafactor, Hugging Face's (T5's defaults): a matrix's second moment kept as a row and a column
  adamw8bit.py     AdamW8bit, bitsandbytes': AdamW's moments in 8 bits, block-wise, on the dynamic code map
  lr_scheduler.py  torch.optim.lr_scheduler: StepLR, MultiStepLR, LambdaLR, LinearLR, CosineAnnealingLR, OneCycleLR,
                   SequentialLR, and Hugging Face's warmup schedules (get_cosine_schedule_with_warmup), each a
                   LambdaLR
"""
from ..names import not_offered
from .optimizer import SGD, AdamW, Optimizer, _cast, _check_flag, _check_number, _copied, _reported  # noqa: F401
from .adafactor import Adafactor
from .adamw8bit import AdamW8bit
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "AdamW", "Adafactor", "AdamW8bit", "lr_scheduler"]

_OTHERS = ("SGD (momentum, nesterov), AdamW, Adafactor and AdamW8bit; with weight_decay=0.0 AdamW is Adam "
           "(PyTorch's Adam decays only through weight_decay, 0 by default)")
_INSTEAD = {"Adam": "write AdamW(params, lr, betas, eps, weight_decay=0.0): with no weight decay AdamW is Adam, "
                    "update for update (PyTorch's Adam adds weight_decay to the gradient instead, L2, 0 by default)",
            "Adam8bit": "write AdamW8bit(params, lr, betas, eps, weight_decay=0.0): bitsandbytes' Adam8bit is its "
                        "AdamW8bit with no weight decay",
            "PagedAdamW8bit": "minigrad has no paged (CPU-spilling) optimizer state; AdamW8bit keeps its 8-bit "
                              "moments on the parameter's device",
            **{n: f"minigrad has {_OTHERS}" for n in ("RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
                                                       "LBFGS", "SparseAdam", "ASGD", "Rprop", "Muon")},
            "swa_utils": "minigrad has no weight averaging; keep a copy of model.state_dict() and average by hand"}


def __getattr__(name):
    raise not_offered(__name__, name, __all__, _INSTEAD)
