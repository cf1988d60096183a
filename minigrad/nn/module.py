"""Modules: objects that hold parameters and compute with them, with torch.nn's names.

A Module finds its parameters by walking its attributes: a Parameter is a parameter, another
Module is a child, a list of Modules is a list of children, and any other Tensor is a buffer
(BatchNorm's running statistics). It remembers that walk until some module's attribute is set or
deleted or a list of children changes (NOTE [unnamed walks]). Attributes whose names start with '_'
are private. PyTorch's add_module, register_parameter and register_buffer set such attributes by
name; register_buffer(..., persistent=False) also keeps that buffer out of state_dict. Setting an
attribute keeps PyTorch's rules of kind (NOTE [attribute kinds]): `lin.weight = some_tensor` is
refused, as in PyTorch, rather than turning the weight into a buffer that nothing trains.

Read next: layers.py (Linear, LayerNorm, ...), losses.py, utils.py (clip_grad_norm_), init.py, then optim/ (what
changes the parameters) and gpt.py (a model built from these).
"""
import inspect
import operator
import warnings
from collections import OrderedDict, namedtuple

from .. import backend
from ..backend.random import draw
from ..tensor import Tensor, check_cuda_device, parse_to_args, tensor, version_counter, zero_grads


_changes = 0  # attributes of modules set or deleted so far (NOTE [unnamed walks])


class Parameter(Tensor):
    """A tensor that a Module trains: requires grad by default."""
    __slots__ = ()
    _is_parameter = True  # mg.profile reads it: it does not import nn (NOTE [marks, not imports], profiler/ledger.py)

    def __init__(self, data, requires_grad=True):
        t = data if isinstance(data, Tensor) else tensor(data)
        self._data, self._requires_grad, self._grad, self._ctx, self._vc = t._data, False, None, None, None
        if t is data:  # its array itself, as torch's: a write to either is a write to both (as detach())
            version_counter(t).alias(t, self)  # NOTE [version counters]
        self.requires_grad_(requires_grad)
        self._set_data(self._data)  # so that an active profile counts it as a parameter

    def __deepcopy__(self, memo):
        """A new Parameter of a copy of the values, with the same requires_grad and no .grad, as PyTorch's: a model
        copied mid-accumulation (an EMA or evaluation copy) does not carry gradients an optimizer would step by."""
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.detach().clone(), self.requires_grad)
        return memo[id(self)]

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns, as PyTorch's: `missing, unexpected = model.load_state_dict(sd, strict=False)`."""
    __slots__ = ()

    def __repr__(self):
        return "<All keys matched successfully>" if self == ([], []) else super().__repr__()


def _is_module_list(value):
    """A list or tuple of modules held in one attribute: its modules are children (ModuleList, a plain list)."""
    return isinstance(value, (list, tuple)) and len(value) > 0 and all(isinstance(m, Module) for m in value)


def _kind_of(value):
    """What a value is when a module holds it (NOTE [attribute kinds]); None: a plain attribute."""
    if isinstance(value, Parameter):
        return "parameter"
    if isinstance(value, Module):
        return "module"
    return "buffer" if isinstance(value, Tensor) else None


def _uniform(shape, bound, device=None):
    """U(-bound, bound) from minigrad's generator, as float32."""
    host = draw("uniform", -bound, bound, size=shape, device=device).astype("float32")
    return Parameter(tensor(host, device=device))


class Module:
    """Base class: subclasses set attributes in __init__ and define forward()."""

    training = True
    _is_module = True  # mg.profile reads it: it does not import nn (NOTE [marks, not imports], profiler/ledger.py)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    # --- walking the tree
    def _child_items(self, lists=None):
        """Every (name, child) in attribute order, a child held twice listed twice (what repr shows)."""
        for name, value in vars(self).items():
            if name.startswith("_"):
                continue
            if isinstance(value, Module):
                yield name, value
                continue
            if lists is not None and isinstance(value, list):
                lists.append((value, list(value)))  # NOTE [unnamed walks]
            if _is_module_list(value):
                for i, m in enumerate(value):
                    yield f"{name}.{i}", m

    def named_children(self):
        """(name, child) pairs; a child held under two names is yielded once, as in PyTorch."""
        seen = set()
        for name, m in self._child_items():
            if id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        return (m for _, m in self.named_children())

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(name, module) pairs, self first as '', then depth first; a shared module once (PyTorch's order)."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, child in self._child_items():
            yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self):
        return (m for _, m in self.named_modules())

    def _own_tensors(self, want_parameters):
        for name, value in vars(self).items():
            if not name.startswith("_") and isinstance(value, Tensor) \
                    and isinstance(value, Parameter) == want_parameters:
                yield name, value

    def _named_tensors(self, want_parameters, prefix, recurse, remove_duplicate):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_name, mod in modules:
            for name, value in mod._own_tensors(want_parameters):
                if id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield (f"{mod_name}.{name}" if mod_name else name), value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, Parameter) pairs in registration order, each parameter once (tied weights under their first name)."""
        return self._named_tensors(True, prefix, recurse, remove_duplicate)

    # NOTE [unnamed walks]: zero_grad walks the parameters every step, and through named_parameters its walk
    # cost more than a small layer's forward: a generator per module and per level of nesting, two passes over
    # each module's attributes, a dotted name per module and per parameter that no one reads. parameters() and
    # buffers() walk the same tree in the same order (each module once, its own tensors before its children's,
    # each tensor once) in one pass over each module's attributes, nameless, in about 60% of the time
    # (bench/NOTES.md, 'per-op overhead', has the numbers of bench (b)).
    #
    # And a module remembers the walk's result. Even nameless, the walk cost a tiny model's step (bench (b)) 7 us
    # of 52, every step, for a tree that does not change. The tree changes only when an attribute of some module is
    # set or deleted (a child, a parameter, train() setting `training`), which Module.__setattr__ and __delattr__
    # count in `_changes`, or when a list that holds children (a plain list of modules) is changed in place, which
    # no attribute sees: so the walk keeps a copy of every list it passed, and the result stands only while the
    # count is the same and each list still holds the same objects. PyTorch keeps its children and parameters in
    # registries (`_modules`, `_parameters`) for the same reason.
    def _remembered(self, key, walk):
        """walk(lists), remembered while the tree is unchanged: walk adds (the list, a copy) to `lists` for each
        list it passes."""
        walks = self.__dict__.get("_walks")  # here, not in __init__: subclasses need not call it
        if walks is None or walks["owner"] != id(self):  # copy.copy shared the original's: its own, then
            walks = self.__dict__["_walks"] = {"owner": id(self)}
        hit = walks.get(key)
        if hit is not None and hit[0] == _changes:
            for a, b in hit[1]:
                if len(a) != len(b) or not all(map(operator.is_, a, b)):
                    break  # a list changed in place: walk again
            else:
                return hit[2]
        lists = []
        walks[key] = hit = (_changes, lists, walk(lists))
        return hit[2]

    def _tensors(self, want_parameters, recurse):
        return self._remembered((want_parameters, recurse), lambda lists: self._walk(want_parameters, recurse, lists))

    def _walk(self, want_parameters, recurse, lists):
        found, seen, seen_modules, stack = [], set(), set(), [self]
        while stack:  # depth first with a list as a stack: children pushed in reverse come out in order
            mod = stack.pop()
            if mod in seen_modules:
                continue
            seen_modules.add(mod)
            children = []
            for name, value in vars(mod).items():
                if name.startswith("_"):
                    continue
                if isinstance(value, Tensor):
                    if isinstance(value, Parameter) == want_parameters and id(value) not in seen:
                        seen.add(id(value))
                        found.append(value)
                elif recurse and isinstance(value, Module):
                    children.append(value)
                elif isinstance(value, list):
                    lists.append((value, list(value)))  # it may hold children later, or no longer
                    if recurse and _is_module_list(value):
                        children += value
                elif recurse and isinstance(value, tuple) and _is_module_list(value):
                    children += value
            stack += reversed(children)
        return found

    # NOTE [attribute kinds]: PyTorch keeps parameters, buffers and children in three registries, and its
    # __setattr__ keeps a name in its registry: `lin.weight = lin.weight * 2` is refused (a Tensor is not a
    # Parameter) rather than turning the weight into a buffer that no optimizer sees; `seq[0] = 3` likewise.
    # Here the kind is the value's type, so the same rules read the old value: a Parameter may replace anything,
    # a Module anything but a parameter, a Tensor a buffer or a plain attribute. None empties a slot and keeps its
    # kind (remembered in `_empty`, as PyTorch keeps `_parameters['bias'] = None`; register_* with None, too).
    # A value of another kind than the old one goes to the end (PyTorch appends it to the new kind's registry, so
    # the order of named_parameters and state_dict is the same); one of the same kind keeps its place.
    def _kind(self, name):
        """'parameter', 'buffer', 'module' (also for a slot of that kind holding None), or None: plain or absent."""
        value = self.__dict__.get(name)
        if value is None:
            return self.__dict__.get("_empty", {}).get(name)
        return _kind_of(value)

    def __setattr__(self, name, value):
        global _changes
        _changes += 1  # NOTE [unnamed walks]
        if name.startswith("_") or name not in self.__dict__:  # private, or new: nothing to keep
            return object.__setattr__(self, name, value)
        old, new = self._kind(name), _kind_of(value)
        allowed = {"parameter": ("parameter",), "module": ("parameter", "module"),
                   "buffer": ("parameter", "module", "buffer")}.get(old)
        if value is not None and allowed and new not in allowed:
            wanted = {"parameter": "an nn.Parameter (wrap a tensor: nn.Parameter(t))", "module": "a Module",
                      "buffer": "a Tensor"}[old]
            raise TypeError(f"cannot assign {type(value).__name__} as {old} {name!r} of {type(self).__name__}: "
                            f"{wanted} or None expected, as in PyTorch; `del` the attribute first to make it "
                            f"something else")
        empty = self.__dict__.setdefault("_empty", {})  # here, not in __init__: subclasses need not call it
        if value is None:
            if old is not None:
                empty[name] = old
        else:
            empty.pop(name, None)
            if new != old:
                object.__delattr__(self, name)  # to the end, as in PyTorch's registry of the new kind
        if new in ("parameter", "module"):
            self.__dict__.get("_non_persistent", set()).discard(name)  # NOTE [non-persistent buffers]
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        global _changes
        _changes += 1
        object.__delattr__(self, name)
        self.__dict__.get("_empty", {}).pop(name, None)
        self.__dict__.get("_non_persistent", set()).discard(name)

    def parameters(self, recurse=True):
        return iter(self._tensors(True, recurse))

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, buffer) pairs: the tensors that are not Parameters (persistent or not)."""
        return self._named_tensors(False, prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        return iter(self._tensors(False, recurse))

    def get_submodule(self, target):
        """The module at a dotted path: model.get_submodule('h.0.attn'); '' is the model itself."""
        modules = dict(self.named_modules(remove_duplicate=False))
        if target in modules:
            return modules[target]
        parts = target.split(".")
        for i in range(len(parts)):
            path = ".".join(parts[:i + 1])
            if path not in modules and not any(name.startswith(path + ".") for name in modules):
                parent = modules.get(".".join(parts[:i]), self)
                where = f"{type(parent).__name__} at {'.'.join(parts[:i])!r}" if i else type(self).__name__
                value = getattr(parent, parts[i], None)
                if value is not None:
                    raise AttributeError(f"get_submodule({target!r}): {parts[i]!r} of {where} is a "
                                         f"{type(value).__name__}, not a module")
                children = [name for name, _ in parent._child_items()]
                raise AttributeError(f"get_submodule({target!r}): {where} has no submodule {parts[i]!r}; "
                                     f"its children are {children}")
        raise AttributeError(f"get_submodule({target!r}): {target!r} is a list of modules, not a module; "
                             f"add an index, as in {target + '.0'!r}")

    # --- registering by name, as PyTorch does (a plain attribute assignment does the same here)
    def _check_name(self, method, name, kind):
        if not isinstance(name, str):
            raise TypeError(f"{method}: the name must be a str, got {type(name).__name__}")
        if not name or "." in name:
            raise KeyError(f"{method}: the name must be non-empty and contain no '.', got {name!r}")
        if name.startswith("_"):
            raise KeyError(f"{method}: {name!r} starts with '_', which marks a private attribute here (never a "
                           f"parameter, buffer or child); choose a name without the leading '_'")
        if hasattr(self, name) and self._kind(name) != kind:  # PyTorch's rule (NOTE [attribute kinds])
            raise KeyError(f"{method}: attribute {name!r} already exists on {type(self).__name__}; choose another name")

    def add_module(self, name, module):
        """Register a child under `name` (as `self.name = module` does); None leaves an empty slot."""
        self._check_name("add_module", name, "module")
        if module is not None:
            _as_module(module, f"add_module({name!r}, ...): the module")
        self._register(name, module, "module")

    def _register(self, name, value, kind):
        setattr(self, name, value)
        if value is None:  # an empty slot of this kind (NOTE [attribute kinds])
            self.__dict__.setdefault("_empty", {})[name] = kind

    register_module = add_module

    def register_parameter(self, name, param):
        self._check_name("register_parameter", name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be an nn.Parameter or None, got "
                            f"{type(param).__name__}; wrap it: nn.Parameter(t)")
        self._register(name, param, "parameter")

    def register_buffer(self, name, tensor, persistent=True):
        """Hold a tensor that is state but not trained (a mask, running statistics): moved and cast by .to(),
        saved by state_dict() unless persistent=False."""
        self._check_name("register_buffer", name, "buffer")
        if isinstance(tensor, Parameter):
            raise TypeError(f"register_buffer: {name!r} is a Parameter, which the module would train; use "
                            f"register_parameter, or pass p.detach() for a buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: {name!r} must be a Tensor or None, got {type(tensor).__name__}; "
                            f"wrap it: mg.tensor(...)")
        self._register(name, tensor, "buffer")
        # NOTE [non-persistent buffers]: a buffer is any Tensor attribute; only this set says which to leave
        # out of state_dict. It is created on first use because subclasses need not call Module.__init__.
        non_persistent = self.__dict__.setdefault("_non_persistent", set())
        if persistent:
            non_persistent.discard(name)
        else:
            non_persistent.add(name)

    def apply(self, fn):
        """Call fn on every child (each applying it to its own children first), then on self; returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # --- state
    def zero_grad(self, set_to_none=True):
        zero_grads(self.parameters(), set_to_none)

    def requires_grad_(self, requires_grad=True):
        """Set requires_grad on every parameter (False freezes the module); returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError(f"{type(self).__name__}.train: training mode is expected to be boolean, got "
                             f"{mode!r}; write train(True), train(False) or eval()")
        for m in self.modules():
            m.training = mode
        return self

    def eval(self):
        return self.train(False)

    def to(self, *args, device=None, dtype=None):
        """Move (and/or cast, for floats) every parameter and buffer in place; returns self."""
        device, dtype = parse_to_args(args, device, dtype)
        if dtype is not None and not backend.is_float(dtype):
            raise TypeError(f"{type(self).__name__}.to: parameters must stay floating point, got dtype {dtype.name}; "
                            f"use 'float16', 'bfloat16', 'float32' or 'float64'")
        def moved(array):
            if device is not None:
                array = backend.to_device(array, device)
            if dtype is not None and backend.is_float(array.dtype) and array.dtype != dtype:
                array = array.astype(dtype)
            return array

        for t in list(self.parameters()) + list(self.buffers()):
            data = moved(t._data)
            if data is t._data:
                continue  # already there: its gradient is kept as it is, as in PyTorch
            t._set_data(data)
            if t.grad is not None:  # moved and cast with it, as PyTorch's: a gradient accumulated before
                t.grad = tensor(moved(t.grad._data))  # .double() is still there for the next step
        return self

    def cuda(self, device=None):
        """self.to('cuda'), as PyTorch's (a device index is refused: minigrad has one GPU device, 'cuda')."""
        check_cuda_device(f"{type(self).__name__}.cuda", device)
        return self.to("cuda")

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to("float32")

    def double(self):
        return self.to("float64")

    def half(self):
        return self.to("float16")

    def bfloat16(self):
        return self.to("bfloat16")

    def _state_tensors(self):
        """(name, tensor) for state_dict: module by module, its parameters then its persistent buffers (PyTorch's
        order); a tensor held under two names (tied weights) is listed under both, as PyTorch does."""
        for mod_name, mod in self.named_modules(remove_duplicate=False):
            skip = mod.__dict__.get("_non_persistent", ())
            own = list(mod._own_tensors(True)) + [(n, b) for n, b in mod._own_tensors(False) if n not in skip]
            for name, t in own:
                yield (f"{mod_name}.{name}" if mod_name else name), t

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """{prefix + name: array copy} of parameters and persistent buffers (NumPy/CuPy arrays, as they are), put into
        `destination` when given; keep_vars=True gives the tensors themselves, as PyTorch's (PyTorch's positional
        destination, prefix, keep_vars too, with its FutureWarning)."""
        if len(args) > 3:
            raise TypeError(f"state_dict: takes destination, prefix and keep_vars, got {len(args)} positional args")
        if args:
            warnings.warn("state_dict: positional args are being deprecated, use kwargs instead (as PyTorch says)",
                          FutureWarning, stacklevel=2)
            destination, prefix, keep_vars = (*args, *(destination, prefix, keep_vars)[len(args):])
        out = {} if destination is None else destination
        for name, t in self._state_tensors():
            out[prefix + name] = t if keep_vars else t._data.copy()
        return out

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies each array in, cast to the parameter's dtype and moved to its device (assign=True: holds the array
        itself, its dtype and device, as PyTorch's); all or nothing. Returns PyTorch's (missing_keys,
        unexpected_keys), and with strict=True raises PyTorch's RuntimeError if either is not empty."""
        own, where = dict(self._state_tensors()), f"load_state_dict for {type(self).__name__}"
        keys = IncompatibleKeys(sorted(set(own) - set(state_dict)), sorted(set(state_dict) - set(own)))
        if strict and (keys.missing_keys or keys.unexpected_keys):
            raise RuntimeError(f"{where}: missing keys {keys.missing_keys}, unexpected keys {keys.unexpected_keys}; "
                               f"strict=False loads the keys both have")
        arrays = {}
        for name, t in own.items():  # in the model's order, as PyTorch's: a tied weight gets its last name's value
            if name not in state_dict:
                continue
            value = state_dict[name]
            array = value._data if isinstance(value, Tensor) else value
            array = backend.to_numpy(array) if not backend.is_array(array) else array
            array = array if assign else backend.to_device(array, t.device)
            if array.shape != t.shape:  # checked for every key before any is written, unlike PyTorch
                raise RuntimeError(f"{where}: {name} has shape {t.shape} here but {array.shape} in the state dict")
            arrays[name] = array
        for name, array in arrays.items():
            own[name]._set_data(array if assign else array.astype(own[name].dtype, copy=True))
        return keys

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, child in self._child_items():
            lines.append(f"  ({name}): " + repr(child).replace("\n", "\n  "))
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"

    def extra_repr(self):
        return ""


def _as_module(obj, where):
    """obj if it is a Module; otherwise a TypeError saying what `where` got and what to write instead."""
    if isinstance(obj, Module):
        return obj
    if isinstance(obj, type) and issubclass(obj, Module):
        needs_args = any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                         for p in inspect.signature(obj).parameters.values())
        ours = obj.__module__.rpartition(".")[0] == __name__.rpartition(".")[0]  # one of minigrad.nn's layers
        call = ("nn." if ours else "") + obj.__name__ + ("(...)" if needs_args else "()")
        raise TypeError(f"{where} is the class {obj.__name__}, not a module; write {call}")
    if obj is None:  # PyTorch's containers keep None as an empty slot; here a slot holds a module
        raise TypeError(f"{where} is None, which PyTorch keeps as an empty slot but minigrad's containers refuse; "
                        f"leave it out, or put nn.Identity() where a layer must pass its input on")
    if callable(obj):
        raise TypeError(f"{where} is the function {getattr(obj, '__name__', repr(obj))}, not a module; write a "
                        f"Module whose forward calls it (or use an nn layer such as nn.ReLU())")
    raise TypeError(f"{where} is {obj!r} (type {type(obj).__name__}), not a module; pass layers such as "
                    f"nn.Linear(4, 16) or nn.Tanh()")


class _Indexed:
    """What Sequential and ModuleList share, as PyTorch's: `m[i] = layer` keeps the name at position i; `del m[i]`,
    pop and insert renumber the layers '0', '1', ... (PyTorch renumbers after a delete; an insert shifts them)."""

    def _slots(self):
        """(name, module or None) in order: PyTorch counts an emptied slot (`seq[0] = None`) in len and indexing."""
        return [(name, value) for name, value in vars(self).items()
                if not name.startswith("_") and self._kind(name) == "module"]

    def _names(self):
        return [name for name, _ in self._slots()]

    def __len__(self):
        return len(self._slots())

    def __iter__(self):
        return (m for _, m in self._slots())

    def _name_at(self, idx, what):
        names = self._names()
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise TypeError(f"{type(self).__name__}.{what}: the index must be an int, got {type(idx).__name__}")
        if not -len(names) <= idx < len(names):
            raise IndexError(f"{type(self).__name__}.{what}: index {idx} is out of range for {len(names)} modules")
        return names[idx]

    def _renumber(self, modules):
        for name in self._names():
            delattr(self, name)
        for i, m in enumerate(modules):
            self.add_module(str(i), m)  # None: an empty slot, kept

    def __setitem__(self, idx, module):
        setattr(self, self._name_at(idx, "__setitem__"), _as_module(module, f"{type(self).__name__}[{idx}] = ..."))

    def __delitem__(self, idx):
        modules = [m for _, m in self._slots()]
        if isinstance(idx, slice):
            del modules[idx]
        else:
            modules.pop(self._names().index(self._name_at(idx, "__delitem__")))
        self._renumber(modules)

    def pop(self, idx):
        module = self[idx]
        del self[idx]
        return module

    def insert(self, index, module):
        modules, n = [m for _, m in self._slots()], len(self)
        if not -n <= index <= n:
            raise IndexError(f"{type(self).__name__}.insert: index {index} is out of range for {n} modules")
        modules.insert(index, _as_module(module, f"{type(self).__name__}.insert: the module"))
        self._renumber(modules)
        return self if isinstance(self, Sequential) else None  # PyTorch's returns; its ModuleList.insert's is None

    def extend(self, modules):
        if not hasattr(modules, "__iter__"):  # one layer, as PyTorch's check
            raise TypeError(f"{type(self).__name__}.extend should be called with an iterable of modules, but got "
                            f"{type(modules).__name__}; to add one module, write append(module)")
        for m in modules:
            self.append(m)
        return self


class Sequential(_Indexed, Module):
    """Modules applied one after another; indexable and iterable.

    Sequential(a, b) names its layers '0', '1'; Sequential(OrderedDict(...)) takes the names given. A slice
    keeps the original names, as PyTorch's does: model[2:][0] is layer 2, and its weight is '2.weight'.
    """

    def __init__(self, *args):
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            items = [(name, m, f"Sequential: entry {name!r}") for name, m in args[0].items()]
        else:
            for i, a in enumerate(args):
                if isinstance(a, dict):
                    raise TypeError(f"Sequential: argument {i} is a dict, not a module; to name the layers pass "
                                    f"one collections.OrderedDict, as in PyTorch")
            items = [(str(i), m, f"Sequential: argument {i}") for i, m in enumerate(args)]
        for name, m, where in items:
            self.add_module(name, _as_module(m, where))

    def forward(self, input):
        children = self._remembered("children", lambda lists: [child for _, child in self._child_items(lists)])
        for m in children:  # remembered, not walked every step (NOTE [unnamed walks])
            input = m(input)
        return input

    def append(self, module):
        self.add_module(str(len(self)), _as_module(module, "Sequential.append: the argument"))
        return self

    def _sequential(self, other, op):
        if not isinstance(other, Sequential):  # PyTorch's ValueError, and its words
            raise ValueError(f"Sequential {op}: add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given; wrap the layers: nn.Sequential(*layers)")
        return other

    def __add__(self, other):
        """A new Sequential of self's layers then other's (the same modules, renumbered), as PyTorch's."""
        return Sequential(*self, *self._sequential(other, "+"))

    def __iadd__(self, other):
        return self.extend(self._sequential(other, "+="))

    def __mul__(self, other):
        """The layers repeated `other` times: the same modules (their weights shared), as PyTorch's."""
        if isinstance(other, bool) or not isinstance(other, int):
            raise TypeError(f"Sequential * {type(other).__name__}: unsupported operand; multiply by an int > 0")
        if other <= 0:
            raise ValueError(f"Sequential * {other}: non-positive multiplication factor, as PyTorch refuses; "
                             f"multiply by an int > 0")
        return Sequential(*(list(self) * other))

    __rmul__ = __mul__

    def __imul__(self, other):
        return self.extend(list(self * other)[len(self):])

    def __getitem__(self, idx):
        items = self._slots()
        if isinstance(idx, slice):
            return type(self)(OrderedDict(items[idx]))
        return items[idx][1]


class ModuleList(_Indexed, Module):
    """A list of modules, registered as '0', '1', ... ; a slice is a new ModuleList numbered from 0 (as PyTorch)."""

    def __init__(self, modules=None):
        if isinstance(modules, Module):
            raise TypeError(f"ModuleList: expected an iterable of modules, got one {type(modules).__name__}; "
                            f"write ModuleList([module])")
        for m in modules or ():
            self.append(m)

    def append(self, module):
        n = len(self)
        self.add_module(str(n), _as_module(module, f"ModuleList: item {n}"))
        return self

    def __getitem__(self, idx):
        items = [m for _, m in self._slots()]
        return ModuleList(items[idx]) if isinstance(idx, slice) else items[idx]

    def __add__(self, other):
        """A new ModuleList of self's modules then other's (any iterable of modules), as PyTorch's."""
        return ModuleList([*self, *other])

    def __iadd__(self, modules):
        return self.extend(modules)


class ModuleDict(Module):
    """Modules by name (nanoGPT's `transformer = nn.ModuleDict(dict(wte=..., h=...))`): d['wte'] is d.wte."""

    def __init__(self, modules=None):
        if modules is not None:
            self.update(modules)

    def update(self, modules):
        for name, m in (modules.items() if hasattr(modules, "items") else modules):
            self[name] = m

    def __setitem__(self, name, module):
        self.add_module(name, _as_module(module, f"ModuleDict: entry {name!r}"))

    def __getitem__(self, name):
        return dict(self._child_items())[name]

    def __delitem__(self, name):
        if name not in self:
            raise KeyError(name)
        delattr(self, name)

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def clear(self):
        for name in self.keys():
            delattr(self, name)

    def __contains__(self, name):
        return name in dict(self._child_items())

    def __len__(self):
        return sum(1 for _ in self._child_items())

    def __iter__(self):
        return (name for name, _ in self._child_items())

    def keys(self):
        return [name for name, _ in self._child_items()]

    def values(self):
        return [m for _, m in self._child_items()]

    def items(self):
        return list(self._child_items())
