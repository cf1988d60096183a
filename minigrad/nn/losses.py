"""The loss modules, torch.nn's: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCEWithLogitsLoss, each the functional
of the same name (functional.py) with its arguments held, and the class weights as buffers (so that .to() moves
them), as PyTorch's.

    criterion = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=-100)
    loss = criterion(logits, targets)

size_average and reduce, PyTorch's arguments from before 0.4, are read as PyTorch reads them (with its warning):
reduce=False is reduction='none', size_average=False is 'sum'.

Read next: utils.py.
"""
from .. import functional as F
from ..tensor import Tensor
from .module import Module

def _weights(module, name, **tensors):
    for key, value in tensors.items():
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"{name}: {key} must be a Tensor (or None), got {type(value).__name__}; wrap it: "
                            f"{key}=mg.tensor([...])")
        module.register_buffer(key, value)


class _Loss(Module):
    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class CrossEntropyLoss(_Loss):
    """F.cross_entropy: logits (N, C) or (N, C, d1, ...) against class indices or probabilities."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        self.reduction = F.legacy_reduction("CrossEntropyLoss", size_average, reduce, reduction)
        _weights(self, "CrossEntropyLoss", weight=weight)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    """F.nll_loss: log-probabilities (log_softmax's output) against class indices."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        self.reduction = F.legacy_reduction("NLLLoss", size_average, reduce, reduction)
        _weights(self, "NLLLoss", weight=weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(_Loss):
    """F.mse_loss: (input - target)^2, reduced."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        self.reduction = F.legacy_reduction("MSELoss", size_average, reduce, reduction)

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """F.l1_loss: |input - target|, reduced."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        self.reduction = F.legacy_reduction("L1Loss", size_average, reduce, reduction)

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """F.binary_cross_entropy_with_logits: a sigmoid and binary cross-entropy in one, from the logits, stably;
    weight scales each element, pos_weight (broadcast along the last dim) the positive targets."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        self.reduction = F.legacy_reduction("BCEWithLogitsLoss", size_average, reduce, reduction)
        _weights(self, "BCEWithLogitsLoss", weight=weight, pos_weight=pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, weight=self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)
