"""Optimizers with torch.optim's names, defaults and update rules: Optimizer, SGD and AdamW.

As in PyTorch, an optimizer holds `param_groups`: a list of dicts, each with its 'params' and every
hyperparameter (the constructor's values fill in what a group leaves out), so that
`AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}])` works
and a schedule can write `group["lr"]` between steps. A parameter whose .grad is None (frozen, or
unused by the loss) is skipped. `state_dict()` / `load_state_dict()` use PyTorch's layout.

Optimizer state (momentum buffers, Adam's moments) lives in `self.state[param]`, as PyTorch keeps
it, made by `_state_buffer` as arrays shaped like the parameter: the optimizer's share of training
memory (Adafactor and AdamW8bit keep arrays of other shapes and dtypes: adafactor.py, adamw8bit.py). Every
subclass's step() is wrapped (`__init_subclass__`) so that an active mg.profile
sees the optimizer before and after each step: no subclass can forget to tell the ledger.

A step computes on raw arrays, outside the tape, so the ledger sees its temporaries only where the step says so:
NOTE [a step's temporaries].

Read next: profiler/ledger.py, the ledger that counts what these hold.
"""
import copy
import functools
import inspect
import math
import numbers

import numpy as np

from .. import backend
from ..ops import LEARNED, learned
from ..tensor import Tensor, active_profiler, enable_grad, mark_written, zero_grads


def _reported(step):
    """step(), bracketed by the active profile's on_step (NOTE [what a profile counts], profiler/ledger.py) and timed
    by it (NOTE [self time]), and followed by a version bump of every parameter it may have written (NOTE
    [version counters], tensor/modes.py). With a closure, PyTorch's step(closure): it runs first, in grad mode (it
    zeroes the gradients, computes the loss and calls backward), and its loss is what step returns."""
    @functools.wraps(step)
    def wrapper(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        profiler = active_profiler()
        if profiler is not None:
            profiler.on_step(self, done=False)
            clock = profiler.start_clock()
        step(self)
        if profiler is not None:
            profiler.stop_clock(clock, type(self).__name__, "step")
            profiler.on_step(self, done=True)
        mark_written(p for p in self.params if p.grad is not None)
        self._opt_called = True  # PyTorch's flag: lr_scheduler warns when its first step comes before this one
        return loss
    wrapper.__signature__ = inspect.signature(wrapper, follow_wrapped=False)  # step(closure=None), as PyTorch's
    return wrapper


# --- checks of hyperparameters, shared by the optimizers; `where` names the optimizer (and the group)

def _check_number(where, name, value, low=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        hint = f"; convert it first, e.g. {name}=float({value!r})" if isinstance(value, str) else ""
        raise TypeError(f"{where}: {name} must be a number, got {value!r} ({type(value).__name__}){hint}")
    if low is not None and not value >= low:  # `not >=` also refuses NaN
        raise ValueError(f"{where}: {name} must be >= {low}, got {value}")


def _check_flag(where, name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{where}: {name} must be True or False, got {value!r} ({type(value).__name__})")


class Optimizer:
    _is_optimizer = True  # mg.profile reads it, not importing optim (NOTE [marks, not imports], profiler/ledger.py)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in vars(cls):
            cls.step = _reported(cls.step)

    def __init__(self, params, defaults):
        name = type(self).__name__
        if isinstance(params, Tensor):
            raise TypeError(f"{name}: params must be an iterable of tensors or of dicts (param groups), got one "
                            f"Tensor of shape {params.shape}; pass [tensor] or model.parameters()")
        if isinstance(params, (set, frozenset)):
            raise TypeError(f"{name}: params must be an ordered iterable (a list or model.parameters()), got a "
                            f"{type(params).__name__}; a set's order changes between runs, which breaks state_dict")
        if isinstance(params, dict):
            raise TypeError(f"{name}: params must be a list of tensors or of param groups, got one dict; "
                            "wrap it in a list: [{'params': ..., 'lr': ...}]")
        if callable(getattr(params, "parameters", None)):
            raise TypeError(f"{name}: params must be tensors or param groups, got the module "
                            f"{type(params).__name__}; pass model.parameters()")
        self.defaults = dict(defaults)
        self._check_hyperparameters(self.defaults, name)
        self.state = {}  # parameter -> {name: array}, made on the first step (as in PyTorch)
        self.param_groups = []
        groups = list(params)
        if not groups:
            raise ValueError(f"{name}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def _check_hyperparameters(self, group, where):
        """Raise a TypeError or ValueError naming `where` and the argument; each optimizer says what it needs.
        Run on the constructor's values, on every group added and on every group loaded (PyTorch checks only
        the constructor's), so that a bad value fails here rather than as a NumPy error inside step()."""

    def add_param_group(self, param_group):
        """Add a group {'params': [...], 'lr': ..., ...}; what it leaves out comes from the constructor's values."""
        where = f"{type(self).__name__}: param group {len(self.param_groups)}"
        if not isinstance(param_group, dict):
            raise TypeError(f"{where}: expected a dict such as {{'params': [...], 'lr': 0.1}}, got "
                            f"{type(param_group).__name__} (a list of groups must hold only dicts)")
        if "params" not in param_group:
            raise ValueError(f"{where}: has no 'params'; write {{'params': [...], ...}}")
        params = param_group["params"]
        if isinstance(params, (set, frozenset)):
            raise TypeError(f"{where}: 'params' must be ordered (a list), not a set: a set's order changes "
                            "between runs, which breaks state_dict")
        params = [params] if isinstance(params, Tensor) else list(params)
        owner = {id(p): i for i, g in enumerate(self.param_groups) for p in g["params"]}
        for p in params:
            if not isinstance(p, Tensor):
                hint = "; pass model.parameters(), not the model" if hasattr(p, "parameters") else ""
                raise TypeError(f"{where}: can only optimize tensors, got {type(p).__name__}{hint}")
            if not p.is_leaf:
                raise ValueError(f"{where}: can't optimize a tensor of shape {p.shape} made by "
                                 f"{p.grad_fn.name}; optimize the leaf tensors it was computed from")
            # PyTorch only warns about a repeat within one group (an error to come); it would step twice.
            if id(p) in owner:
                where_else = "this group" if owner[id(p)] == len(self.param_groups) else f"param group {owner[id(p)]}"
                raise ValueError(f"{where}: a parameter of shape {p.shape} is already in {where_else}; "
                                 "each parameter must appear once, in one group")
            owner[id(p)] = len(self.param_groups)
        group = {**param_group, "params": params}
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self._check_hyperparameters(group, where)
        self.param_groups.append(group)

    @property
    def params(self):
        """Every parameter of every group, in order (minigrad's shorthand; PyTorch has only param_groups)."""
        return [p for group in self.param_groups for p in group["params"]]

    def _params_with_grad(self, group, low_precision):
        """The group's parameters that have a gradient (a frozen or unused one has none): the float16 and bfloat16
        ones, or the others, which steps compute differently (NOTE [a 2-byte step rounds as PyTorch's])."""
        return [p for p in group["params"] if p.grad is not None and _low_precision(p) == low_precision]

    def zero_grad(self, set_to_none=True):
        zero_grads(self.params, set_to_none)

    def _state_buffer(self, p, name):
        """A zero array shaped like parameter p, kept as optimizer state."""
        state = self.state.setdefault(p, {})
        if name not in state:
            state[name] = _transient(backend.xp_of(p._data).zeros_like(p._data), state=True)
        return state[name]

    def state_bytes(self):
        """Bytes of the arrays in self.state, each buffer once (an 8-bit optimizer's code maps are shared), as the
        ledger counts them."""
        owners = {id(o): o for s in self.state.values() for a in s.values() if backend.is_array(a)
                  for o in (backend.owner(a),)}
        return sum(o.nbytes for o in owners.values())

    def state_dict(self):
        """PyTorch's layout: {'state': {index: {name: value}}, 'param_groups': [{..., 'params': [index, ...]}]},
        parameters numbered in group order. Arrays are copies (as Module.state_dict's are here)."""
        index = {}
        groups = []
        for group in self.param_groups:
            packed = copy.deepcopy({k: v for k, v in group.items() if k != "params"})
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: {k: _copied(v) for k, v in s.items()} for p, s in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Take the state and hyperparameters saved by state_dict(), matched to this optimizer's parameters by
        position: the groups must hold as many parameters, of the same shapes, as when it was saved.
        Arrays are copied, cast to their parameter's dtype and moved to its device."""
        name = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict) or set(state_dict) != {"state", "param_groups"}:
            got = sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__
            raise ValueError(f"{name}: expected {{'state': ..., 'param_groups': ...}} as state_dict() returns, got {got}")
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups):
            raise ValueError(f"{name}: the state dict has {len(saved)} param groups, this optimizer "
                             f"{len(self.param_groups)}; build it with the same groups as the one saved")
        for i, (group, s) in enumerate(zip(self.param_groups, saved)):
            if len(group["params"]) != len(s["params"]):
                raise ValueError(f"{name}: param group {i} has {len(group['params'])} parameters here but "
                                 f"{len(s['params'])} in the state dict")
        by_index = {k: p for g, s in zip(self.param_groups, saved) for k, p in zip(s["params"], g["params"])}
        state = {}
        for k, values in state_dict["state"].items():
            if k not in by_index:
                raise ValueError(f"{name}: the state dict has state for parameter {k!r}, which no param group lists")
            state[by_index[k]] = {key: self._loaded(key, v, by_index[k], f"{name}: state {key!r} of parameter {k}")
                                  for key, v in values.items()}
        groups = []
        for i, (group, s) in enumerate(zip(self.param_groups, saved)):
            new = {**copy.deepcopy({k: v for k, v in s.items() if k != "params"}), "params": group["params"]}
            for key, value in self.defaults.items():
                new.setdefault(key, value)
            self._check_hyperparameters(new, f"{name}: param group {i}")
            groups.append(new)
        self.state, self.param_groups = state, groups  # only once everything checked out

    def _loaded(self, key, value, p, what):
        """A saved state value for parameter p, as load_state_dict takes it: an optimizer whose state is not
        shaped like its parameter (Adafactor's factors, 8-bit blocks) says here what shape and dtype it wants."""
        return _cast(value, p, what)

    def step(self):
        raise NotImplementedError


def _copied(value):
    return value.copy() if backend.is_array(value) else copy.deepcopy(value)


def _float32_math(p):
    """The dtype of parameter p's float state and arithmetic in Adafactor and AdamW8bit: float32 for a float16 or
    bfloat16 parameter, which is upcast, stepped and written back once, as Hugging Face's Adafactor and
    bitsandbytes' kernels do (in float16, 1e-4 squared and eps underflow to 0, and 0 / 0 made the parameter NaN);
    else p's own. PyTorch's SGD and AdamW step in the parameter's dtype, and so do minigrad's."""
    dtype = p._data.dtype
    return np.dtype(np.float32) if backend.is_float(dtype) and dtype.itemsize < 4 else dtype


def _in_dtype(array, dtype):
    """array itself if it is of dtype, else a counted copy in dtype (NOTE [a step's temporaries])."""
    return array if array.dtype == dtype else _transient(array.astype(dtype))


def _gradient(p, maximize):
    """Parameter p's gradient as SGD and AdamW step with it (negated for maximize): a .grad narrower than p (minigrad
    takes one, e.g. accumulate's float32 master gradients of float16 weights; PyTorch refuses it) upcast to p's dtype,
    a counted copy, so that a float64 parameter steps in float64 (its float32 gradient made Adam's scratch arrays,
    sqrt(v) and the update float32, 3e-8 off); a wider one, as those master gradients, is kept."""
    g, dtype = p.grad._data, p._data.dtype
    if g.dtype != dtype and g.dtype.itemsize <= dtype.itemsize:
        g = _in_dtype(g, dtype if g.dtype.itemsize < dtype.itemsize else np.dtype(np.float32))  # float16 + bfloat16
    return _transient(-g) if maximize else g


def _cast(value, p, what, shape=None, dtype=None, float_dtype=None):
    """A saved state value for parameter p: an array becomes a copy on p's device, of `shape` (p's by default) and
    of `dtype` (by default float_dtype, or p's, if it is a float array, else its own)."""
    if not backend.is_array(value):
        return copy.deepcopy(value)
    wanted = p.shape if shape is None else tuple(shape)
    if value.shape != wanted:
        expected = "the parameter has shape" if shape is None else f"{wanted} was expected for a parameter of shape"
        raise ValueError(f"{what} has shape {value.shape} but {expected} {p.shape}; "
                         "was this state saved for another model?")
    array = backend.to_device(value, p.device)
    return array.astype(dtype or ((float_dtype or p.dtype) if backend.is_float(array.dtype) else array.dtype),
                        copy=True)


def _check_adam(group, where):
    """Adam's hyperparameters in a group: lr, eps and weight_decay >= 0, betas a pair in [0, 1) (AdamW, AdamW8bit)."""
    for key in ("lr", "eps", "weight_decay"):
        _check_number(where, key, group[key], low=0)
    betas = group["betas"]
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"{where}: betas must be a pair (beta1, beta2), got {betas!r}")
    for i, beta in enumerate(betas):
        _check_number(where, f"betas[{i}]", beta, low=0)
        if not beta < 1:
            raise ValueError(f"{where}: betas[{i}] must be in [0, 1), got {beta}")


# NOTE [a step's temporaries]: NumPy (or CuPy) makes a new array for each operation that has no out=, and a
# step's arithmetic on a parameter-sized array makes parameter-sized temporaries: AdamW holds two at once, so its
# step peaks at its state, the parameters, their gradients and twice the largest parameter. The ledger counts
# them, as transient, because each one is made by _scratch (an empty array from the pool) or passed through
# _transient (the result of one operation) as it is made: one operation each, since `a + b * c` would hold
# b * c unseen while the sum is made, and a temporary that the next operation reads is named, so that it is
# still alive (and counted) when that operation's result is. tests/test_profiler.py holds each optimizer's step
# to tracemalloc's peak.
def _scratch(like):
    """A temporary array shaped like `like`, of its dtype, from the pool, counted by the ledger."""
    return _transient(backend.empty_like(like))


def _transient(array, state=False):
    """array, the result of one operation of a step, counted by the active profile as transient while it lives;
    with state=True, new optimizer state, counted as such from now rather than once the step is over."""
    profiler = active_profiler()
    if profiler is not None:
        profiler.on_new_array(array, state)
    return array


def _adam_update(g, m, v, b1, b2, eps, step_size, sqrt_bias2, v_max=None):
    """Adam's moments m and v moved in place by the gradient g, and the update (lr / bias1) m / denom returned in a
    scratch array: PyTorch's arithmetic in its order, shared by AdamW and AdamW8bit. The scratch arrays come from
    the pool (NOTE [host memory pool] in backend/pool.py); with v_max (amsgrad), the largest v so far divides."""
    xp, tmp, update = backend.xp_of(v), _scratch(g), _scratch(g)
    m *= b1
    m += xp.multiply(g, 1 - b1, out=tmp)              # m = b1 m + (1 - b1) g
    v *= b2
    xp.multiply(g, 1 - b2, out=tmp)
    tmp *= g
    v += tmp                                          # v = b2 v + (1 - b2) g g
    if v_max is not None:
        xp.maximum(v_max, v, out=v_max)
        v = v_max
    denom = xp.sqrt(v, out=tmp)
    denom /= sqrt_bias2
    denom += eps                                      # denom = sqrt(v) / sqrt(bias2) + eps
    xp.multiply(m, step_size, out=update)
    update /= denom
    return update                                     # p -= (lr / bias1) m / denom


# NOTE [a 2-byte step rounds as PyTorch's]: PyTorch's SGD and AdamW step a float16 or bfloat16 parameter in its own
# dtype, with its state in that dtype too, and each of their tensor operations (mul_, add_, lerp_, addcmul_, sqrt,
# addcdiv_) is one CPU kernel that computes in float32 and rounds once to the 2-byte dtype. NumPy on 2-byte arrays
# rounds every product and sum on the way, and rounds each Python number to the 2-byte dtype first, which the kernels
# do only for add's alpha and an added number (mul_, lerp_, addcmul_, addcdiv_ and a division take it in float32;
# lerp_ and addcmul_ end in a fused multiply-add, computed here in float64, which holds the product of two float32
# numbers exactly: each rule measured bit for bit against torch 2.13's kernels on 2,000,000 values). So SGD and AdamW
# step a 2-byte parameter through float32 copies, one PyTorch operation at a time, each rounded once (_rounded) where
# PyTorch's tensor keeps its result: the for-loop's numbers, bit for bit (tests/test_optim_parity.py). Before, after
# 5 steps of 4,000 bfloat16 elements, 60 to 600 of them differed from PyTorch's (AdamW's weight decay factor
# 1 - lr wd = 0.999 became 1.0 in bfloat16: no decay at all). The float32 copies are a block's at a time (_blocks),
# never a whole parameter's.
def _low_precision(p):
    return backend.accumulator(p._data.dtype) is not None


def _wide(array):
    """A float32 copy of a 2-byte array (or of a float32 one), counted (NOTE [a step's temporaries])."""
    return _transient(array.astype(np.float32))


def _rounded(x, dtype):
    """float32 x rounded once to dtype, in place (it keeps float32 storage): where a PyTorch operation ends."""
    x[...] = _transient(x.astype(dtype))
    return x


def _alpha(value, dtype):
    """A number as PyTorch's add takes it (alpha=, or the number added) for a 2-byte tensor: rounded to its dtype."""
    return np.float32(np.asarray(np.float32(value)).astype(dtype))


_BLOCK = 1 << 16  # elements per block: 256 KiB a float32 copy (as backend/rows.py's in_float32)


def _blocks(array):
    """Index expressions that cut `array` into blocks of whole rows of about _BLOCK elements: a 2-byte step computes
    in float32 one block at a time, so that its float32 copies hold a block, not a whole parameter (PyTorch's kernels
    keep none: a float16 BERT-large's SGD step held 375 MB of them, three copies of the word embeddings, more than its
    backward's peak), the numbers the same, element by element."""
    if array.ndim == 0 or array.size <= _BLOCK:
        return [...]
    step = max(1, _BLOCK * array.shape[0] // array.size)
    return [slice(start, start + step) for start in range(0, array.shape[0], step)]


def _sgd_low_precision(opt, p, group):
    """SGD's for-loop step (torch.optim.sgd._single_tensor_sgd) of a 2-byte parameter, for optimizer opt, a block at
    a time: NOTE [a 2-byte step rounds as PyTorch's]."""
    first = group["momentum"] and "momentum_buffer" not in opt.state.get(p, {})
    buf = opt._state_buffer(p, "momentum_buffer") if group["momentum"] else None
    g = _gradient(p, group["maximize"])
    for rows in _blocks(p._data):
        _sgd_block(p._data[rows], g[rows], None if buf is None else buf[rows], first, group)


def _sgd_block(w2, g, buf, first, group):
    """One block of _sgd_low_precision: parameter w2, gradient g, momentum buffer buf (None without momentum)."""
    lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
    weight_decay, nesterov, dtype = group["weight_decay"], group["nesterov"], w2.dtype
    g = _wide(g)
    if weight_decay:
        decayed = _wide(w2)
        decayed *= _alpha(weight_decay, dtype)
        g = _rounded(decayed + g, dtype)                     # grad.add(param, alpha=weight_decay)
    if momentum:
        if first:
            buf[...] = g                                     # clone
            b = g
        else:
            b = _rounded(_wide(buf) * np.float32(momentum), dtype)  # buf.mul_(momentum)
            b += _transient(g * _alpha(1 - dampening, dtype))
            buf[...] = _rounded(b, dtype)                    # .add_(grad, alpha=1 - dampening)
        if nesterov:
            ahead = _transient(b * _alpha(momentum, dtype))
            ahead += g
            g = _rounded(ahead, dtype)                       # grad.add(buf, alpha=momentum)
        else:
            g = b
    w = _wide(w2)
    w += _transient(g * _alpha(-lr, dtype))
    w2[...] = _rounded(w, dtype)                             # param.add_(grad, alpha=-lr)


def _adamw_low_precision(p, g, m, v, v_max, *numbers):
    """AdamW's for-loop step (torch.optim.adam._single_tensor_adam, decoupled) of a 2-byte parameter, with 2-byte
    moments m, v (and v_max, amsgrad's), a block at a time (_blocks): NOTE [a 2-byte step rounds as PyTorch's]."""
    for rows in _blocks(p._data):
        _adamw_block(p._data[rows], g[rows], m[rows], v[rows], None if v_max is None else v_max[rows], *numbers)


def _adamw_block(w2, g, m, v, v_max, lr, b1, b2, eps, weight_decay, step):
    """One block of _adamw_low_precision: parameter w2."""
    dtype, xp = w2.dtype, backend.xp_of(v)
    w = _wide(w2)
    w *= np.float32(1 - lr * weight_decay)
    _rounded(w, dtype)                                       # param.mul_(1 - lr * weight_decay)
    g, m32 = _wide(g), _wide(m)
    # exp_avg.lerp_(grad, 1 - beta1): PyTorch's kernel, a fused multiply-add (float64 holds the product exactly)
    weight = np.float32(1 - b1)
    diff = _transient(g - m32)
    if abs(weight) < 0.5:
        lerp = _transient(_transient(diff.astype(np.float64) * float(weight)) + m32)
    else:
        lerp = _transient(_transient(diff.astype(np.float64) * -float(np.float32(1) - weight)) + g)
    m[...] = _rounded(_transient(lerp.astype(np.float32)), dtype)
    v32 = _rounded(_wide(v) * np.float32(b2), dtype)         # exp_avg_sq.mul_(beta2)
    # .addcmul_(grad, grad, value=1 - beta2): v + ((1 - beta2) g) g, the last product and the sum one fused step
    square = _transient(_transient(g * np.float32(1 - b2)).astype(np.float64))
    square *= g
    square += v32
    v[...] = _rounded(_transient(square.astype(np.float32)), dtype)
    if v_max is not None:
        xp.maximum(v_max, v, out=v_max)
        v = v_max
    denom = _rounded(xp.sqrt(_wide(v)), dtype)               # sqrt
    denom /= np.float32((1 - b2 ** step) ** 0.5)
    _rounded(denom, dtype)                                   # / bias_correction2 ** 0.5
    denom += _alpha(eps, dtype)
    _rounded(denom, dtype)                                   # .add_(eps)
    update = _transient(_wide(m) * np.float32(-(lr / (1 - b1 ** step))))
    update /= denom
    w += update
    w2[...] = _rounded(w, dtype)                             # param.addcdiv_(exp_avg, denom, value=-step_size)


# NOTE [PyTorch's implementation switches]: torch.optim's foreach=, fused=, differentiable= and capturable= choose how
# a step runs; scripts pass them, so minigrad takes each at the values that give its own step's numbers and refuses,
# by name, the values that would promise other numbers or other behaviour:
#   foreach (None, True or False): PyTorch's multi-tensor step does the for-loop's operations in the same order; on
#     CPU its results are the for-loop's bit for bit (measured: SGD and AdamW, float32 and bfloat16, 3 steps of 1,000
#     elements). minigrad's step is that for-loop, so every value is taken and changes nothing.
#   fused=True: one kernel per step, which rounds its own way (after 3 steps of 1,000 elements, AdamW's float32
#     parameters differ from the for-loop's in 72 elements, bfloat16's in 473; SGD's bfloat16 in 980: the kernel
#     computes in float32 and rounds once). Taking it would give the for-loop's numbers under the fused name: refused.
#   differentiable=True: autograd records the step, to differentiate through the update. minigrad's step runs on
#     raw arrays outside the tape: refused, rather than a step that silently records nothing.
#   capturable=True (AdamW): the step count kept on the device, for CUDA graph capture, which minigrad has not
#     (PyTorch refuses it on CPU): refused.
# None of them is kept in param_groups, where PyTorch keeps them (tests/test_optim_parity.py's TORCH_ONLY_KEYS).
def _implementation_switches(name, foreach, fused, differentiable, capturable=False):
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")  # PyTorch's check, and its words
    for key, value in (("foreach", foreach), ("fused", fused)):
        if value is not None:
            _check_flag(name, key, value)
    _check_flag(name, "differentiable", differentiable)
    _check_flag(name, "capturable", capturable)
    why = {"fused": "PyTorch's fused kernel rounds its own way (in bfloat16 it computes in float32 and rounds once), "
                    "and minigrad's step is the for-loop's; leave fused=None (foreach=True is taken: the same numbers)",
           "differentiable": "minigrad's step runs outside the tape, so nothing could differentiate through the "
                             "update; leave differentiable=False",
           "capturable": "it is for CUDA graph capture, which minigrad has not (PyTorch refuses it on CPU); leave "
                         "capturable=False"}
    for key, value in (("fused", fused), ("differentiable", differentiable), ("capturable", capturable)):
        if value:
            raise NotImplementedError(f"{name}: {key}=True is not supported: {why[key]} "
                                      f"(NOTE [PyTorch's implementation switches])")


class SGD(Optimizer):
    """p -= lr * (g + weight_decay * p), with optional (PyTorch-style) momentum; maximize ascends."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        _implementation_switches("SGD", foreach, fused, differentiable)
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))

    def _check_hyperparameters(self, group, where):
        for key in ("lr", "momentum", "weight_decay"):
            _check_number(where, key, group[key], low=0)
        _check_number(where, "dampening", group["dampening"])
        _check_flag(where, "nesterov", group["nesterov"])
        _check_flag(where, "maximize", group["maximize"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError(f"{where}: nesterov needs momentum > 0 and dampening = 0, got "
                             f"momentum={group['momentum']}, dampening={group['dampening']}")

    def step(self):
        for group in self.param_groups:
            for p in self._params_with_grad(group, low_precision=True):
                _sgd_low_precision(self, p, group)
            lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
            weight_decay, nesterov = group["weight_decay"], group["nesterov"]
            for p in self._params_with_grad(group, low_precision=False):
                # one operation at a time, each temporary counted (NOTE [a step's temporaries])
                d = _gradient(p, group["maximize"])
                if weight_decay:
                    decayed = _transient(weight_decay * p._data)
                    decayed += d                                 # d = g + weight_decay p
                    d = decayed
                if momentum:
                    first = "momentum_buffer" not in self.state.get(p, {})
                    buf = self._state_buffer(p, "momentum_buffer")
                    if first:
                        buf[...] = d
                    else:
                        buf *= momentum
                        buf += _transient((1 - dampening) * d)   # buf = momentum buf + (1 - dampening) d
                    if nesterov:
                        ahead = _transient(momentum * buf)
                        ahead += d                               # d = d + momentum buf
                        d = ahead
                    else:
                        d = buf
                p._data -= _transient(lr * d)


class AdamW(Optimizer):
    """Adam with decoupled weight decay (Loshchilov and Hutter), PyTorch's defaults; amsgrad divides by the
    largest second moment seen so far (Reddi et al.), maximize ascends."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        _implementation_switches("AdamW", foreach, fused, differentiable, capturable)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    def _check_hyperparameters(self, group, where):
        _check_adam(group, where)
        _check_flag(where, "amsgrad", group["amsgrad"])
        _check_flag(where, "maximize", group["maximize"])

    def step(self):
        if LEARNED and learned("AdamW.step", self) is not NotImplemented:  # NOTE [learner's pieces], ops/base.py
            return
        for group in self.param_groups:
            lr, (b1, b2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = _gradient(p, group["maximize"])
                m = self._state_buffer(p, "exp_avg")
                v = self._state_buffer(p, "exp_avg_sq")
                if m.dtype != p._data.dtype:  # PyTorch's raises too; float32 moments would step a float64 model
                    raise RuntimeError(
                        f"AdamW.step: the moments of a parameter of shape {p.shape} are {m.dtype.name} but the "
                        f"parameter is {p.dtype.name} (a .to(dtype) after the optimizer's first step?); make the "
                        f"optimizer after .to(), or cast its state: opt.load_state_dict(opt.state_dict()) casts the "
                        f"state to the parameters' dtypes")
                state = self.state[p]
                state["step"] = t = state.get("step", 0) + 1  # per parameter, as in PyTorch
                bias1, bias2 = 1 - b1 ** t, 1 - b2 ** t
                # in place, with two scratch arrays from the pool (NOTE [host memory pool] in backend/pool.py), the same
                # arithmetic in the same order as the formulas on the right
                v_max = self._state_buffer(p, "max_exp_avg_sq") if group["amsgrad"] else None
                if _low_precision(p):
                    _adamw_low_precision(p, g, m, v, v_max, lr, b1, b2, eps, weight_decay, t)
                    continue
                p._data *= 1 - lr * weight_decay
                p._data -= _adam_update(g, m, v, b1, b2, eps, lr / bias1, math.sqrt(bias2), v_max)
