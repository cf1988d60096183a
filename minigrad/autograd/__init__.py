"""torch.autograd's names that minigrad has: `mg.autograd.graph`, with saved_tensors_hooks and save_on_cpu
(`from minigrad.autograd.graph import save_on_cpu`, as from torch.autograd.graph).

  graph.py      saved_tensors_hooks, the pair of hooks the tape calls for what a record keeps, and save_on_cpu
"""
from ..names import not_offered
from . import graph

__all__ = ["graph"]

_GRAD = ("minigrad's 'autograd' holds only graph (saved_tensors_hooks, save_on_cpu): call loss.backward() and read "
         "each input's .grad (what torch.autograd.grad(loss, x) returns; zero the .grad first)")
_INSTEAD = {"grad": _GRAD, "backward": _GRAD, "Function": "minigrad's ops are classes with forward and backward on "
            "arrays (minigrad.ops.Op), run by minigrad.tensor.apply"}


def __getattr__(name):
    raise not_offered(__name__, name, __all__, _INSTEAD)
