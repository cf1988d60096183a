"""mg.autocast: mixed precision as torch.autocast does it. Inside the region, each op's floating inputs are cast
before it runs: the matrix products to a low precision (bfloat16 or float16), a few ops to float32, and an op that
takes one dtype to the widest of its inputs. The weights stay float32 (the "master" copy): the casts are ordinary
ops on the tape (ops.Cast), so the gradient comes back through them into each weight in float32.

This module holds the whole policy: the lists, the casts and the cache of cast weights. The seam it uses: its policy
is an op mode (NOTE [op modes], tensor/modes.py), the first on the stack inside the region, which casts each op's
inputs before the modes below and the op see them (NOTE [autocast asks first]); outside, it is not on the stack.

Read next: grad_scaler.py, the loss scaling that float16's gradients need.
"""
import numpy as np

from .. import backend, ops
from ..tensor import Autocast, Tensor, active_autocast, active_cache, apply, autocasting, normalize_dtype
from ..tensor.promotion import result_type

FLOAT16, FLOAT32, FLOAT64, BFLOAT16 = np.dtype("float16"), np.dtype("float32"), np.dtype("float64"), backend.BFLOAT16

# NOTE [autocast's lists]: PyTorch's own (aten/src/ATen/autocast_mode.cpp, the "autocast op reference" of torch.amp's
# docs), by minigrad's op names, and checked op by op against torch 2.13's CPU autocast in tests/test_amp.py:
#   low precision, both devices: mm, bmm, baddbmm, addmm, matmul, linear, scaled_dot_product_attention (and the
#       convolutions, which minigrad lacks). minigrad's products are matmul, linear and the fused 'sdpa'.
#   float32 on the CPU: the losses (cross_entropy, nll_loss, mse_loss, l1_loss, binary_cross_entropy_with_logits),
#       prod, and ops minigrad lacks (the linear algebra, fft, pooling, ...). NOT softmax, log_softmax, layer_norm,
#       exp, log, sum or gelu: on the CPU those run in their input's dtype (bfloat16 after a product), as torch's do.
#   float32 on CUDA: those losses and prod, and also softmax, log_softmax, layer_norm, exp, log, pow (x ** 2, and
#       x ** y and 2 ** x: pow_tensor), sum, cumsum, softplus (rsqrt, ... are absent here). GELU is in neither float32 list.
#       var and std are in neither: they give their input's dtype (computed in float32 inside, as PyTorch's).
#       Two of CUDA's float32 list that minigrad does not follow, as the policy is asked only as an op mode, about
#       ops (NOTE [autocast asks first]): norm (and F.normalize), a composition of Tensor's, gives float16 there
#       (computed in float32, NOTE [float16's squares]), and `2 / x`, which is PyTorch's x.reciprocal() * 2,
#       float16 (the same values).
#   everything else: the input's dtype, and where an op takes one dtype for all its inputs (an add of a float32
#       residual and a bfloat16 product, cat, where, ...), the widest of them, as PyTorch's type promotion does
#       there (float16 with bfloat16: float32; a 0-d tensor does not widen one with dims). minigrad never promotes
#       otherwise, so autocast casts explicitly.
# One choice of minigrad's own: PyTorch's CPU layer_norm kernel takes a bfloat16 input with float32 weight and bias
# and gives bfloat16; minigrad's op takes one dtype, so the weight and bias are cast to the input's dtype (the
# same output dtype; values within bfloat16's rounding of PyTorch's, which keeps the weights float32 inside).
# The losses are compositions in minigrad (functional.py): each asks with its name before its first op.
LOW_PRECISION = frozenset({"matmul", "linear", "sdpa"})
_LOSSES = {"cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy_with_logits", "prod"}
TO_FLOAT32 = {"cpu": frozenset(_LOSSES),
              "cuda": frozenset(_LOSSES | {"softmax", "log_softmax", "layer_norm", "exp", "log", "pow", "sum",
                                           "cumsum", "pow_tensor", "softplus"})}
TO_INPUT_DTYPE = {"cpu": frozenset({"layer_norm"}), "cuda": frozenset()}
# Older lists, for predicting a run of their day (plan.Software.gelu_float32, autocast_of): until PyTorch 1.9,
# CUDA's float32 list had GELU too; PR #59639 ("removed gelu from autocast fp32 list", June 2021, after 1.9's
# release branch) took it out, and from 1.10 GELU runs in float16. Our evidence is two versions of the file more
# than the PR's thread: an autocast_mode.cpp from before AutocastCPU lists `gelu` under CUDA's fp32; a 1.10-era one
# (AutocastCPU, and before GELU's `approximate` argument of 1.11) lists it under the CPU's fp32 only. Under it, the
# block's (B, T, 4h) GELU keeps a float32 input, and the next linear a float16 copy of its float32 output.
TO_FLOAT32_BEFORE = {"1.9": {"cpu": TO_FLOAT32["cpu"], "cuda": TO_FLOAT32["cuda"] | {"gelu"}}}
DEFAULT_DTYPE = {"cpu": BFLOAT16, "cuda": FLOAT16}  # torch.autocast's defaults


# NOTE [the weight-cast cache]: a weight used by several ops in one region (a tied embedding and head, a module
# called twice, micro-batches accumulated inside one region) is cast once, as PyTorch's autocast caches the casts of
# leaves that require grad (cached_casts): one copy, kept until the outermost region ends, when the cache is
# cleared. The copy is an op's output like any other, so mg.profile counts it: as activations while a record keeps
# it for backward (the matmul that reads it), as transient while only the cache holds it; prof.cast_weight_bytes()
# gives its share. Each use is still a record of its own, a Cast of the float32 weight that hands back the cached
# array (no work, no new bytes): so every use's gradient comes back to the weight in float32 and the weight sums
# them there. That is where minigrad differs from PyTorch, whose uses share one cast record and sum their
# gradients in the low precision first: minigrad's sum is float32's, within the low precision's rounding of
# PyTorch's. It is what makes checkpointing exact: a checkpointed function's uses are records from the weight, a
# leaf, whether the copy was made before the checkpoint, inside it, or again in its recompute (the copy is
# the same bits each time), so the recompute's gradients are the plain run's to the bit. A recompute after the
# region (backward belongs after it) is a region of its own (cast_region, as PyTorch's recompute enters
# torch.autocast again): a weight used twice inside is cast once there too. Casting once per use held a second
# copy beside the first, so the checkpointed run's activations peaked above the plain run's by that copy
# (tests/test_checkpoint_low_precision.py). A weight written in place (its version moved) is cast again.
_cache = {}     # id(weight) -> (weight, its version when cast, the dtype, the cast array)
_nesting = [0]  # how many autocast regions are open, enabled or not


class _Policy(Autocast):
    """The answers to the tape's question (NOTE [autocast asks first]) for one device and one low dtype."""

    def __init__(self, device_type, dtype, cache_enabled, to_float32=TO_FLOAT32):
        self.device, self.dtype, self.cache_enabled = device_type, dtype, cache_enabled
        self.to_float32, self.to_input = to_float32[device_type], TO_INPUT_DTYPE[device_type]

    def __repr__(self):
        return f"autocast policy ({self.device}, {self.dtype.name})"

    def inputs(self, name, inputs, same_dtype=True):
        if name in LOW_PRECISION:
            return self._cast(inputs, self.dtype, cached=self.cache_enabled)
        if name in self.to_float32:
            return self._cast(inputs, FLOAT32)
        if name in self.to_input and backend.is_float(inputs[0].dtype):
            return inputs[:1] + self._cast(inputs[1:], inputs[0].dtype, cached=self.cache_enabled, promote=True)
        if same_dtype and len(inputs) > 1:
            widest = _widest(inputs)
            if widest is not None:
                return self._cast(inputs, widest, promote=True)
        return inputs

    def _cast(self, inputs, dtype, cached=False, promote=False):
        out = None
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor) or t.dtype == dtype or not backend.is_float(t.dtype):
                continue
            # float64 is never autocast (as PyTorch's eligibility rule), nor a tensor of another device ('meta'
            # stands for any: it predicts the run it mirrors); type promotion (promote) casts whatever differs
            if not promote and (t.dtype == FLOAT64 or t.device not in (self.device, "meta")):
                continue
            if t.device == "cuda" and dtype == BFLOAT16:
                raise RuntimeError(_NO_CUDA_BFLOAT16)
            if out is None:
                out = list(inputs)
            out[i] = self._cached(t, dtype) if cached else t.to(dtype)
        return inputs if out is None else tuple(out)

    def _cached(self, t, dtype):
        """t cast to dtype, through the cache where it applies (NOTE [the weight-cast cache])."""
        if not (t.requires_grad and t.is_leaf and _nesting[0]):  # a weight, inside a region (not a recompute after)
            return t.to(dtype)
        hit = _cache.get(id(t))
        if hit is not None and hit[0] is t and hit[1] == t._version and hit[2] == dtype:
            return apply(ops.Cast, t, dtype=dtype, cached=hit[3])
        copy = t.to(dtype)
        cache = active_cache()
        if cache is None or not cache.placeholder(copy._data):  # a recompute that skipped this cast (no op it runs
            # reads it) hands out a placeholder: not one for a later use to read (NOTE [placeholders], checkpoint/
            # policies.py); that use casts again
            _cache[id(t)] = (t, t._version, dtype, copy._data)  # holding t: its id cannot be reused while cached
        return copy


def _widest(inputs):
    """The dtype that PyTorch's type promotion gives these tensors' floats, if they differ; else None (NOTE [type
    promotion], tensor/promotion.py). As PyTorch's, a tensor with dims decides over a 0-d one of the same kind: a
    2-byte product times a float32 0-d weight (a logit scale) stays 2-byte; only where every float input is 0-d do
    they decide. Under autocast float64 beside a narrower float is promoted, not refused (autocast's own casts are
    the point of the region)."""
    floats = [t for t in inputs if isinstance(t, Tensor) and backend.is_float(t.dtype)]
    return result_type("autocast", floats, refuse=False) if len({t.dtype for t in floats}) > 1 else None


def _low_dtype(device_type, dtype):
    """The dtype an autocast region casts the products to, checked."""
    if dtype is None:
        return DEFAULT_DTYPE[device_type]
    dt = normalize_dtype(dtype)
    if dt not in (FLOAT16, BFLOAT16):
        raise ValueError(f"autocast: dtype must be mg.bfloat16 or mg.float16 (the precision the matrix products run "
                         f"in; the weights stay float32), got {dt.name}")
    if device_type == "cuda" and dt == BFLOAT16 and backend.default_device() != "meta":
        raise RuntimeError(_NO_CUDA_BFLOAT16)
    return dt


# bfloat16 under the CUDA lists is refused where CuPy would run it; on 'meta' (a prediction of a GPU that has it, an
# A100's) it is allowed: construct the region under `with mg.device('meta')`, and a 'cuda' tensor in it is refused
_NO_CUDA_BFLOAT16 = (
    "autocast: bfloat16 on 'cuda' is not supported by minigrad: CuPy's bfloat16 (through ml_dtypes, CuPy 14) is "
    "experimental and cupyx.scipy.special, behind exact GELU, lacks it. Please switch dtype to float16: "
    "mg.autocast('cuda', dtype=mg.float16) (the default on 'cuda'), with mg.amp.GradScaler for its gradients (on "
    "'meta', to predict a GPU's bfloat16 step, construct it under `with mg.device('meta')`)")


class cast_region(autocasting):
    """autocasting(policy) as a region of the weight-cast cache (NOTE [the weight-cast cache]): mg.autocast, and a
    checkpoint's recompute, which enters its forward's policy again after the forward's region has ended."""

    def __enter__(self):
        _nesting[0] += 1
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        _nesting[0] -= 1
        if not _nesting[0]:
            _cache.clear()  # the outermost region ended: the copies go (as torch.clear_autocast_cache)


class autocast(cast_region):
    """`with mg.autocast('cpu'):` (or `@mg.autocast('cpu')` on a function): torch.autocast(device_type, dtype=None,
    enabled=True, cache_enabled=True). The ops inside cast their inputs by NOTE [autocast's lists]: the matrix
    products run in `dtype` (bfloat16 by default on 'cpu', float16 on 'cuda', as PyTorch), the losses (and on
    'cuda' softmax, layer_norm, sums, exp, log) in float32, the rest in their inputs' dtype. enabled=False turns
    autocast off inside an enabled region. Casts of the weights are cached until the outermost region ends (NOTE
    [the weight-cast cache]); cache_enabled=False casts every use. Run backward and the optimizer's step after the
    region, as PyTorch advises: backward goes through the casts recorded in it."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=True):
        if device_type not in ("cpu", "cuda"):
            hint = ": 'meta' tensors follow the device they mirror's policy, mg.autocast('cpu') or ('cuda')" \
                if device_type == "meta" else ""
            raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}{hint}")
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: enabled must be True or False, got {enabled!r}")
        self.device, self.fast_dtype = device_type, _low_dtype(device_type, dtype)
        super().__init__(_Policy(device_type, self.fast_dtype, cache_enabled) if enabled else None)



def autocast_of(version, device_type, dtype=None):
    """mg.autocast with an older PyTorch's lists (TO_FLOAT32_BEFORE: '1.9'), for the planner's prediction of a run
    made with it; PyTorch itself has no such switch."""
    if version not in TO_FLOAT32_BEFORE:
        raise ValueError(f"autocast_of: the lists of PyTorch {version!r} are not kept; known: "
                         f"{', '.join(TO_FLOAT32_BEFORE)} (and mg.autocast, today's)")
    region = autocast(device_type, dtype)
    region.value = _Policy(device_type, region.fast_dtype, True, TO_FLOAT32_BEFORE[version])
    return region


def is_autocast_enabled(device_type=None):
    """Whether the code runs in an enabled autocast region (of device_type, if given), as torch.is_autocast_enabled."""
    policy = active_autocast()
    return policy is not None and (device_type is None or policy.device == device_type)


def get_autocast_dtype(device_type):
    """The low dtype of the autocast region the code runs in, or the device's default (torch.get_autocast_dtype)."""
    policy = active_autocast()
    return policy.dtype if policy is not None and policy.device == device_type else DEFAULT_DTYPE[device_type]


def cached_casts():
    """How many weight casts the cache holds now (NOTE [the weight-cast cache]): 0 outside every region."""
    return len(_cache)
