"""torch.autograd.graph's seam for what the tape keeps: saved_tensors_hooks and save_on_cpu, PyTorch's names.

    with mg.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        loss = model(x).sum()   # each array an op saves goes to pack_hook(tensor); the record holds what it returns
    loss.backward()             # unpack_hook(what pack returned) gives it back, just before the op's backward

    with mg.autograd.graph.save_on_cpu():   # on 'cuda', what the ops save waits in host memory
        loss = model(x).sum()

The tape calls the innermost pair in two places, keep (pack) and _run_tape (unpack), in tensor/tape.py; this file
declares the pairs, enters them (tensor.packing) and says what they do (NOTE [saved tensors hooks]). What a pair keeps,
the ledger counts where it lives (NOTE [what a pack hook keeps], profiler/ledger.py).

Read next: functional.py; checkpoint/, which keeps nothing in its forward and recomputes, the other way to trade.
"""
from .. import backend
from ..tensor import Tensor, active_saved_tensors_hooks, no_grad, packing, wrap

__all__ = ["saved_tensors_hooks", "save_on_cpu"]


# NOTE [saved tensors hooks]: PyTorch's seam for what a record keeps. Inside `with saved_tensors_hooks(pack_hook,
# unpack_hook):` the tape's keep (tensor/tape.py) hands the arrays an op saved to `pack` below, which gives each to
# pack_hook as a tensor: the one the user holds where it is an input or the output (pack sees x itself, as PyTorch's
# does), else a new tensor around it (an array of the op's own: a mask, LayerNorm's rstd). The record holds what
# pack_hook returns (in record.packed, a _Packed, with the unpack hook and each array's shape, dtype and device) and no
# array; just before the record's backward, the tape's _run_tape calls unpack_hook once per saved array, in the order
# they were saved, and each time a backward runs (retain_graph: again); a backward that frees the graph drops what pack
# returned as it unpacks, and release the arrays after the op's backward. Both hooks run under no_grad, as PyTorch's do.
# Nothing is packed where a record keeps nothing (no_grad, no input needing a gradient). A checkpoint's forward packs
# with a pair of its own, innermost, whose pack keeps no array (keep_saved(False), tensor/modes.py), so the user's pair
# outside never sees those records, as with PyTorch's non-reentrant checkpoint; its recompute packs with another,
# whose pack keeps every array as it is (keep_saved(True)): those records are run and freed at once, as PyTorch's
# recompute packs under a pair of its own. Both stay innermost: a pair that the checkpointed function enters leaves
# them on (in PyTorch it would win in the forward and keep what the checkpoint drops, and minigrad's checkpoint
# recomputes the function anyway: the memory it saves would be lost twice over). The tape calls any pair the same way:
# `pack(record, inputs, out)` returns (the arrays the record still keeps as they are, what it holds packed, or None);
# the packed object's `unpack(op name)` gives the arrays back. The Checkpoint
# record keeps the segment's inputs, which the user's pair packs, as PyTorch's packs the inputs its checkpoint saves
# (and the outputs a selective policy remembers, which PyTorch keeps in its caching mode's storage instead). Unlike
# PyTorch, which leaves a pair's saved tensors to the hooks, backward still checks the version counters (NOTE [version
# counters], tensor/modes.py): a pack hook that returns the tensor or t.detach() (PyTorch's docs' example) shares its
# storage, and a write in between would change the gradient silently.
class saved_tensors_hooks:
    """Context manager: inside it, every array an op saves for backward goes to pack_hook(tensor) and the record
    holds what pack_hook returns instead; when backward needs it, unpack_hook(that object) must return a tensor with
    the original's values, shape, dtype and device. PyTorch's semantics (torch.autograd.graph.saved_tensors_hooks,
    NOTE [saved tensors hooks]): nested, only the innermost pair runs. As PyTorch warns: a pack hook that returns its
    input itself keeps an output's tensor alive as long as its record (return t.detach())."""

    def __init__(self, pack_hook, unpack_hook):
        for name, hook in (("pack_hook", pack_hook), ("unpack_hook", unpack_hook)):
            if not callable(hook):
                raise TypeError(f"saved_tensors_hooks: {name} must be a callable, got {type(hook).__name__} "
                                f"({hook!r}); write saved_tensors_hooks(pack_hook, unpack_hook) with two functions, "
                                f"e.g. pack_hook=lambda t: t.detach(), unpack_hook=lambda t: t")
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook
        self._entered = []  # a stack: the same pair may be entered again inside itself

    def __enter__(self):
        on = active_saved_tensors_hooks()  # inside a checkpoint's function, its pair stays on (NOTE [saved tensors hooks])
        self._entered.append(packing(on if getattr(on, "stays_innermost", False) else self))
        self._entered[-1].__enter__()

    def __exit__(self, *exc):
        self._entered.pop().__exit__(*exc)

    def pack(self, record, inputs, out):
        """What `record` keeps instead of the arrays its op saved (tensor/tape.py's keep asks): no array, and a
        _Packed."""
        packed, metas = [], []
        with no_grad():
            for a in record.saved:
                if not backend.is_array(a):  # None: an array its backward will not need
                    packed.append(a)
                    metas.append(None)
                    continue
                t = out if a is out._data else next((x for x in inputs if x._data is a), None)
                packed.append(self.pack_hook(wrap(a) if t is None else t))
                metas.append((a.shape, a.dtype, backend.device_of(a)))
        return (), _Packed(self.unpack_hook, tuple(packed), tuple(metas))


class _Packed:
    """What a record holds under saved_tensors_hooks: what pack_hook returned for each saved array (`objects`), the
    unpack hook to get it back, and each array's (shape, dtype, device), None where the op saved None (`metas`)."""
    __slots__ = ("unpack_hook", "objects", "metas")

    def __init__(self, unpack_hook, objects, metas):
        self.unpack_hook, self.objects, self.metas = unpack_hook, objects, metas

    def unpack(self, op):
        """The saved arrays again, for op's backward (tensor/tape.py's _run_tape asks): unpack_hook on each object."""
        arrays = []
        with no_grad():
            for p, meta in zip(self.objects, self.metas):
                if meta is None:
                    arrays.append(p)
                    continue
                t = self.unpack_hook(p)
                if not isinstance(t, Tensor):
                    raise TypeError(f"backward: the unpack hook of saved_tensors_hooks returned {type(t).__name__} "
                                    f"for an array that '{op}' saved; it must return a Tensor (the one pack_hook was "
                                    f"given, or one with its values: {_described(meta)})")
                a = t._data
                if (a.shape, a.dtype, backend.device_of(a)) != meta:
                    raise RuntimeError(f"backward: the unpack hook of saved_tensors_hooks returned a tensor of "
                                       f"{_described((a.shape, a.dtype, backend.device_of(a)))} for an array that "
                                       f"'{op}' saved as {_described(meta)}; unpack_hook(pack_hook(t)) must give t's "
                                       f"values back, in its shape, dtype and device")
                arrays.append(a)
        return tuple(arrays)


def _described(meta):
    shape, dtype, device = meta
    return f"shape {shape}, {dtype.name} on {device}"


# NOTE [save_on_cpu]: PyTorch's pack returns (tensor.device, tensor.cpu()) and its unpack tensor.to(device): on 'cuda'
# each saved array waits in host memory from the forward to its op's backward, and a GPU holds only the one being used;
# on the CPU, .cpu() is the tensor itself, so nothing moves and nothing is saved (its docs: "If the graph was already on
# CPU, no tensor copy is performed"). minigrad's does the same with the arrays (a 'meta' array, which has no values,
# stays as it is too). The copies are made by the array layer, not by ops, so they are not on the tape, as PyTorch's are
# not (its hooks run under no_grad): the host copy is counted by the ledger as host bytes while the record holds it; the
# GPU copy that unpack makes, as an array made for its op's backward (backend.made). pin_memory: NumPy has no pinned
# memory and minigrad no streams, so it changes nothing here.
class save_on_cpu(saved_tensors_hooks):
    """Context manager: the tensors that ops save for backward are kept in host memory and copied back to the GPU
    for their op's backward (on the CPU nothing moves), as torch.autograd.graph.save_on_cpu. Trades a copy each
    way for GPU memory: gradients are bit-identical (NOTE [save_on_cpu])."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        if device_type != "cuda":
            raise ValueError(f"save_on_cpu: device_type must be 'cuda', the one GPU device minigrad has, got "
                             f"{device_type!r}")

        def pack_to_cpu(tensor):
            device = tensor.device
            if device != "cuda":
                return device, tensor
            return device, wrap(backend.to_device(tensor._data, "cpu"))

        def unpack_from_cpu(packed):
            device, tensor = packed
            if tensor.device == device:
                return tensor
            return wrap(backend.made(backend.to_device(tensor._data, device)))

        super().__init__(pack_to_cpu, unpack_from_cpu)
        self.pin_memory = pin_memory
