"""torch.utils' names that a training script reaches for: `mg.utils.checkpoint`, the module, with checkpoint and
checkpoint_sequential (`from minigrad.utils.checkpoint import checkpoint`, as from torch.utils.checkpoint).

  checkpoint.py   torch.utils.checkpoint's path to mg.checkpoint, mg.checkpoint_sequential, set_checkpoint_early_stop
"""
from ..names import not_offered
from . import checkpoint

__all__ = ["checkpoint"]

_INSTEAD = {"data": "minigrad has no DataLoader or Dataset: draw a batch by indexing tensors, x[idx] with idx = "
                    "mg.randint(0, n, (batch_size,)), as minigrad.gpt.get_batch does",
            "tensorboard": "minigrad writes no TensorBoard logs: print the numbers, or plot them with matplotlib",
            "hooks": "minigrad's tape reports to a Listener (mg.profile is one); see minigrad.tensor.Listener"}


def __getattr__(name):
    raise not_offered(__name__, name, __all__, _INSTEAD)
