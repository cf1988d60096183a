"""AdamW with 8-bit moments, as bitsandbytes' `bnb.optim.AdamW8bit` keeps them (Dettmers et al., "8-bit Optimizers
via Block-wise Quantization", 2022): the same update as AdamW, with each moment stored in one byte per element.

NOTE [block-wise dynamic quantization]: a moment is cut into blocks of 256 elements (flattened, the last block
shorter). Each block keeps its absolute maximum in float32 and, per element, a uint8 code: the index of the
nearest value, to x / absmax, in a table of 256 numbers in [-1, 1] (the "code map"). The table is bitsandbytes'
dynamic tree (create_dynamic_map below): a decimal exponent 10^-6 ... 10^0 and a linear fraction whose bits
shrink as the exponent grows, so that the small values of a moment keep their relative precision. The first
moment (signed) uses the signed map (128 entries above 0, 127 below); the second (never negative) the unsigned
one, whose 255 non-zero entries are all positive: twice the resolution. A step dequantizes each block (code map[code] * absmax), updates the moments in
float32 exactly as AdamW does, takes the update from those float32 moments, and requantizes them (a new absmax
per block, then the nearest codes): no error from the quantization enters the step in which it is made, only the
later ones. Per element, 2 bytes where AdamW keeps 8, plus 8 bytes of absmax per block of 256, plus the two
1 KiB code maps, shared by every parameter.

The error this costs: an element x of a block with maximum A is stored within half the gap between the two map
entries around x / A, times A. The largest half-gap of the signed map is 0.9 / 128 = 0.00703 (its top decade
[0.1, 1] has 64 entries, and its most negative entry is -(1 - 0.45/64)); of the unsigned map 0.9 / 256. So a
block's elements are each within 0.7% (signed) and 0.35% (unsigned) of the block's absmax; an element of the top
decade (|x| > A / 10) within 6.2% (3.3%) of itself, near the maximum within 0.35% (0.18%); an element below
2.75e-7 A (1.6e-7 A unsigned) becomes 0. `quantization_error_bound()` gives
these numbers from the maps themselves, and tests/test_memory_lean_optim.py checks the moments against exact
float32 ones run alongside, within the bound accumulated step by step.

Parameters with fewer than min_8bit_size elements (4096, bitsandbytes' default: biases, LayerNorms) keep full
precision moments, named as bitsandbytes names them (state1, state2), and step exactly as mg.optim.AdamW does. A
float16 or bfloat16 parameter steps as bitsandbytes' kernels step it: upcast, with float32 moments, written back
once (where mg.optim.AdamW, as PyTorch's, keeps float16 moments, whose eps underflows to 0).

Two details differ from bitsandbytes' CUDA kernel: the weight decay comes first, as in PyTorch's AdamW (the kernel
multiplies by 1 - lr wd after the update: a difference of lr wd times the update, second order), and a value
exactly halfway between two map entries takes the lower one (the kernel's dQuantize may round such ties up).

Read next: lr_scheduler.py, the learning rates every optimizer here takes.
"""
import math

import numpy as np

from .. import backend
from .optimizer import Optimizer, _adam_update, _cast, _check_adam, _float32_math, _in_dtype, _transient

BLOCK_SIZE = 256
CHUNK_BLOCKS = 4096  # NOTE [a chunk at a time]: the blocks a step dequantizes, updates and requantizes at once


def _linspace(start, stop, steps):
    """torch.linspace(start, stop, steps, dtype=torch.float32) to the bit, as bitsandbytes builds its map with it: a
    float32 step; start + step i (one rounding, as a fused multiply-add) for the first half, stop - step (steps-1-i)
    for the second. NumPy's linspace, computed in float64, differs in the last bit of some entries."""
    first, last, i = np.float32(start), np.float32(stop), np.arange(steps)
    step = np.float64((last - first) / np.float32(steps - 1))
    values = np.where(i < steps // 2, np.float64(first) + step * i, np.float64(last) - step * (steps - 1 - i))
    return values.astype(np.float32)


def create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
    """bitsandbytes.functional.create_dynamic_map, in NumPy float32: 256 sorted values in [-1, 1] (signed) or
    [0, 1]. For each exponent i = 0 ... 6, the midpoints of 2^i (signed; 2^(i+1) unsigned) equal intervals of
    [0.1, 1], times 10^(i - 6), with both signs where signed; then 0 and 1."""
    data = []
    non_sign_bits = total_bits - 1
    additional_items = 2 ** (non_sign_bits - max_exponent_bits) - 1
    for i in range(max_exponent_bits):
        fraction_items = 2 ** (i + non_sign_bits - max_exponent_bits) + 1 if signed else \
            2 ** (i + non_sign_bits - max_exponent_bits + 1) + 1
        boundaries = _linspace(0.1, 1, fraction_items)
        means = (boundaries[:-1] + boundaries[1:]) / np.float32(2.0)
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        if signed:
            data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    if additional_items > 0:
        boundaries = _linspace(0.1, 1, additional_items + 1)
        means = (boundaries[:-1] + boundaries[1:]) / np.float32(2.0)
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        if signed:
            data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    data += [0.0, 1.0]
    data += [0.0] * (2 ** total_bits - len(data))
    return np.sort(np.array(data, dtype=np.float32))


def quantization_error_bound(signed=True):
    """The largest |dequantized - x| / absmax over x / absmax in [-1, 1] ([0, 1] unsigned) with nearest rounding:
    half the widest gap between neighbouring entries, or the distance from an end of the range to the map's."""
    code = create_dynamic_map(signed).astype(np.float64)
    low = -1.0 if signed else 0.0
    return float(max(np.max(np.diff(code)) / 2, code[0] - low, 1.0 - code[-1]))


def _blocks(n):
    return -(-n // BLOCK_SIZE)


def _dequantize(xp, codes, absmax, code_map, n):
    """The moment as float32 blocks (blocks, 256), the last one padded with zeros: code_map[code] * absmax."""
    values = _transient(xp.zeros(_blocks(n) * BLOCK_SIZE, np.float32))
    values[:n] = _transient(code_map[codes.reshape(-1)])  # each temporary counted: NOTE [a step's temporaries]
    values = values.reshape(-1, BLOCK_SIZE)
    values *= absmax[:, None]
    return values


def _quantize(xp, values, code_map, codes, absmax, n):
    """Write float32 blocks into their codes and absmax, in place: the nearest map entry to each x / absmax."""
    absmax[...] = _transient(xp.abs(values)).max(axis=1)
    scale = xp.where(absmax > 0, absmax, 1.0)  # an all-zero block has absmax 0 and stays all zero
    normalized = _transient(values / scale[:, None]).reshape(-1)[:n]
    midpoints = (code_map[1:] + code_map[:-1]) / 2
    nearest = _transient(xp.searchsorted(midpoints, normalized))  # int64, alive (and counted) while it is cast
    codes[...] = _transient(nearest.astype(np.uint8)).reshape(codes.shape)


class AdamW8bit(Optimizer):
    """bitsandbytes' AdamW8bit: AdamW (PyTorch's update, defaults and weight decay) with block-wise 8-bit moments
    (NOTE [block-wise dynamic quantization]) for parameters of min_8bit_size elements or more."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 optim_bits=32, args=None, min_8bit_size=4096, percentile_clipping=100, block_wise=True,
                 is_paged=False):
        if amsgrad is not False:
            raise ValueError("AdamW8bit: amsgrad is not supported (bitsandbytes' 8-bit Adam has none: the running "
                             "maximum would need a third moment); use mg.optim.AdamW(amsgrad=True)")
        # bitsandbytes' other arguments, taken at the values that give this step (NOTE [PyTorch's implementation
        # switches], optimizer.py, for the same choice): its AdamW8bit keeps 8-bit state whatever optim_bits says
        others = {"optim_bits": (optim_bits, 32, "the state is 8-bit whatever it says; bitsandbytes' AdamW8bit "
                                              "ignores it (newer versions require 32)"),
                  "args": (args, None, "bitsandbytes' override object is not read here; pass the values themselves"),
                  "percentile_clipping": (percentile_clipping, 100, "it clips each gradient at a percentile of the "
                                                                    "last 100 gradient norms, which minigrad does not"),
                  "block_wise": (block_wise, True, "minigrad quantizes block-wise only (NOTE [block-wise dynamic "
                                                   "quantization])"),
                  "is_paged": (is_paged, False, "minigrad has no paged (CPU-spilling) optimizer state")}
        for key, (value, taken, why) in others.items():
            if value != taken:
                raise NotImplementedError(f"AdamW8bit: {key}={value!r} is not supported: {why}; leave {key}={taken!r}")
        self._maps = {}  # device -> (signed, unsigned) code maps, one pair shared by every parameter
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      min_8bit_size=min_8bit_size))

    def _check_hyperparameters(self, group, where):
        _check_adam(group, where)
        size = group["min_8bit_size"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise TypeError(f"{where}: min_8bit_size must be a whole number of elements >= 0, got {size!r}")

    def code_maps(self, device):
        """The signed and the unsigned code map on `device` (float32, 256 each), made once per device."""
        if device not in self._maps:
            self._maps[device] = tuple(backend.to_device(create_dynamic_map(signed), device)
                                       for signed in (True, False))
        return self._maps[device]

    def _quantized(self, p, group):
        return p.numel() >= group["min_8bit_size"]

    def _init_state(self, p, group):
        xp, n = backend.xp_of(p._data), p.numel()
        if not self._quantized(p, group):
            dtype = _float32_math(p)
            return {"step": 0, "state1": xp.zeros(p.shape, dtype), "state2": xp.zeros(p.shape, dtype)}
        signed, unsigned = self.code_maps(p.device)
        return {"step": 0, "state1": xp.zeros(p.shape, np.uint8), "qmap1": signed,
                "absmax1": xp.zeros(_blocks(n), np.float32), "state2": xp.zeros(p.shape, np.uint8),
                "qmap2": unsigned, "absmax2": xp.zeros(_blocks(n), np.float32)}

    def _loaded(self, key, value, p, what):
        if key in ("qmap1", "qmap2"):  # constants: share this optimizer's, rather than one copy per parameter
            _cast(value, p, what, (256,), np.float32)
            return self.code_maps(p.device)[0 if key == "qmap1" else 1]
        if key.startswith("absmax"):
            return _cast(value, p, what, (_blocks(p.numel()),), np.float32)
        return _cast(value, p, what, float_dtype=_float32_math(p))

    def dequantized(self, p):
        """Parameter p's two moments as float32 arrays shaped like p (what the next step starts from)."""
        state = self.state[p]
        if "qmap1" not in state:
            return state["state1"], state["state2"]
        xp, n = backend.xp_of(p._data), p.numel()
        return tuple(_dequantize(xp, state[f"state{i}"], state[f"absmax{i}"], state[f"qmap{i}"], n)
                     .reshape(-1)[:n].reshape(p.shape) for i in (1, 2))

    def step(self):
        for group in self.param_groups:
            lr, (b1, b2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p not in self.state:
                    self.state[p] = self._init_state(p, group)
                    for value in self.state[p].values():  # counted as it is made, before the step's temporaries
                        if backend.is_array(value):
                            _transient(value, state=True)
                state = self.state[p]
                state["step"] = t = state["step"] + 1
                bias1, bias2 = 1 - b1 ** t, 1 - b2 ** t
                # a float16 or bfloat16 parameter steps in float32, written back once at the end (_float32_math)
                dtype = _float32_math(p)
                g, w = _in_dtype(p.grad._data, dtype), _in_dtype(p._data, dtype)
                xp = backend.xp_of(w)
                w *= 1 - lr * weight_decay
                if "qmap1" not in state:  # full precision, in place, as AdamW.step
                    w -= _adam_update(g, state["state1"], state["state2"], b1, b2, eps, lr / bias1, math.sqrt(bias2))
                else:
                    flat, grad = w.reshape(-1), g.reshape(-1)  # views where contiguous, as a parameter is
                    for start in range(0, p.numel(), CHUNK_BLOCKS * BLOCK_SIZE):
                        self._step_chunk(state, grad, flat, start, b1, b2, eps, lr / bias1, bias2)
                    if backend.owner(flat) is not backend.owner(w):  # reshape copied: write the copy back
                        w[...] = flat.reshape(w.shape)
                if w is not p._data:
                    p._data[...] = w

    # NOTE [a chunk at a time]: the step's float32 moments, padded gradient, Adam's two scratch arrays, the
    # requantization's int64 indices: 7.25 times the parameter's float32 bytes, if a step made them for a whole
    # parameter at once (its temporaries: NOTE [a step's temporaries], optimizer.py), where bitsandbytes' fused
    # kernel makes none. Blocks are independent (each has its own absmax, and Adam is elementwise), so the step
    # goes CHUNK_BLOCKS blocks (4 MiB of float32) at a time: the same numbers bit for bit, and at most 29 MiB of
    # temporaries; a smaller chunk costs the 'meta' planner more Python per step than it saves.
    @staticmethod
    def _step_chunk(state, g, w, start, b1, b2, eps, step_size, bias2):
        """Adam on the elements start ... start + CHUNK_BLOCKS * BLOCK_SIZE of a quantized parameter (flat g, w)."""
        xp, end = backend.xp_of(w), min(start + CHUNK_BLOCKS * BLOCK_SIZE, w.size)
        n, blocks = end - start, slice(start // BLOCK_SIZE, _blocks(end))
        codes = {i: state[f"state{i}"].reshape(-1)[start:end] for i in (1, 2)}
        m, v = (_dequantize(xp, codes[i], state[f"absmax{i}"][blocks], state[f"qmap{i}"], n) for i in (1, 2))
        grad = _transient(xp.zeros(m.size, np.float32))
        grad[:n] = g[start:end]
        update = _adam_update(grad.reshape(m.shape), m, v, b1, b2, eps, step_size, math.sqrt(bias2))
        w[start:end] -= update.reshape(-1)[:n]
        _quantize(xp, m, state["qmap1"], codes[1], state["absmax1"][blocks], n)
        _quantize(xp, v, state["qmap2"], codes[2], state["absmax2"][blocks], n)
