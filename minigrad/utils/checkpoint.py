"""torch.utils.checkpoint's module path for minigrad's checkpointing (the checkpoint/ package), so that a PyTorch
script's `from torch.utils.checkpoint import checkpoint, checkpoint_sequential` becomes
`from minigrad.utils.checkpoint import checkpoint, checkpoint_sequential`: the same functions as mg.checkpoint and
mg.checkpoint_sequential, with PyTorch's signatures (non-reentrant: use_reentrant=True is refused, saying so).
"""
from ..checkpoint import checkpoint, checkpoint_sequential, set_checkpoint_early_stop
from ..names import not_offered

__all__ = ["checkpoint", "checkpoint_sequential", "set_checkpoint_early_stop"]

_SELECTIVE = ("minigrad's selective checkpointing is policy=: checkpoint(fn, x, policy=mg.checkpoint_policies."
              "dots_saveable) (JAX's policy names; README, 'Recompute only what is cheap')")
_INSTEAD = {"create_selective_checkpoint_contexts": _SELECTIVE, "CheckpointPolicy": _SELECTIVE,
            "noop_context_fn": "minigrad's checkpoint has no context_fn; policy= chooses what to keep"}


def __getattr__(name):
    raise not_offered(__name__, name, __all__, _INSTEAD)
