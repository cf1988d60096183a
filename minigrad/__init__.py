"""minigrad: a small tape-based autograd engine over NumPy (CPU) or CuPy (GPU).

The reading path (about 1,200 lines; the README names it step by step): ops' base, one op of each kind, the
tape's modes and tape, the Tensor's face, and SGD.

The floors, each file importing only the ones above it (the README's table; a test checks both):
  backend/        the array layer, mg.backend
    layout.py       NumPy's memory layout from shapes and strides alone: strides, broadcasting, views
    meta.py         arrays with a shape and no data: the 'meta' device that predicts memory at any size
    device.py       NumPy, CuPy or meta, decided in one place
    pool.py         the host memory pool the ops' big arrays come from, and malloc's opt-in setting
    rows.py         fast paths on NumPy arrays: a broadcast scalar, sums along short rows, an embedding's rows
    random.py       minigrad's seeded generator, whose state can be saved and restored
    special.py      the normal CDF behind exact GELU
  ops/            each op's forward, backward and FLOPs on raw arrays
    base.py         Op and save_for_backward, the FLOP rule, shared helpers
    pointwise.py    elementwise ops
    shape.py        reductions, shapes and indexing
    linear.py       matmul and linear
    nn.py           softmax, layer_norm, dropout, attention
  tensor/         the tape and the Tensor
    modes.py        the switches, the Listener, version counters
    tape.py         keep (the choke point for saved arrays), release, backward
    promotion.py    type promotion: the dtype an op computes its operands in
    args.py         what a user passes, checked
    methods.py      composed methods and in-place writes
    names.py        PyTorch's other names for them, and what a name the Tensor lacks says
    tensor.py       apply and the Tensor's face
    factories.py    tensor(), zeros, randn, cat, where, ...
  profiler/       mg.profile: the ledger
    clocks.py       self time and phases
    ledger.py       bytes by category, FLOPs by phase
    report.py       tables and a timeline
    export.py       a Chrome trace (Perfetto) and an HTML memory timeline
    allocator.py    PyTorch's CUDA caching allocator, replayed: what a GPU would reserve for those bytes
  names.py        PyTorch's names: inference_mode, and the did-you-mean of a name minigrad does not have
  autograd/       torch.autograd's names, mg.autograd
    graph.py        saved_tensors_hooks (what a record keeps, and how it gets it back) and save_on_cpu
  functional.py   softmax, cross_entropy, nll_loss, layer_norm, ... (imported as mg.functional)
  nn/             modules with PyTorch's names
    module.py       Parameter, Module, Sequential, ModuleList, ModuleDict
    layers.py       Linear, LayerNorm, Embedding, BatchNorm1d, ...
    losses.py       CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCEWithLogitsLoss
    utils.py        clip_grad_norm_, clip_grad_value_
    init.py         nn.init: kaiming_*, xavier_*, trunc_normal_, ...
  optim/          optimizers and their learning-rate schedules
    optimizer.py    Optimizer, SGD and AdamW
    adafactor.py    Adafactor: factored second moments (Hugging Face's)
    adamw8bit.py    AdamW8bit: 8-bit block-wise moments (bitsandbytes')
    lr_scheduler.py StepLR, LambdaLR, LinearLR, CosineAnnealingLR, SequentialLR, warmup then cosine
  amp/            mixed precision: mg.autocast, mg.amp.GradScaler
    autocast_mode.py which op runs in which dtype, the casts, the cache of cast weights
    grad_scaler.py  loss scaling: scale, unscale_, step (skipped on inf), update
  schedules.py    where to cut a chain, and what it will cost (pure functions)
  checkpoint/     mg.checkpoint, mg.checkpoint_sequential: recompute instead of keeping
    policies.py     what to keep rather than recompute, and what the forward notes for the recompute
    segment.py      one checkpointed segment
    chains.py       chains of segments, measure_chain
  utils/          torch.utils' names
    checkpoint.py   mg.utils.checkpoint: torch.utils.checkpoint's path to checkpoint, checkpoint_sequential
  accumulate.py   mg.accumulate: micro-batches that add up to the full batch's gradient
  distributed.py  data parallel over MPI: gradients summed across processes, ZeRO stage 1 (import it)
  gpt.py          a small GPT, a character tokenizer and a tiny corpus
  bert.py         BERT with Hugging Face's classes and parameter names
  models.py       full-size models by their checkpoints' names, and their parameter counts
  plan.py         will it fit? a full-size model's training step on 'meta', and what fits a GPU
  formulas.py     closed forms that the ledger's measurements must equal
  testing.py      gradcheck: finite differences, explained
  grading.py      the exercises' grader (exercises/ beside the package)
  learner.py      learner mode: the engine on your own exercise pieces (lesson N --learner, MINIGRAD_LEARNER_ENGINE)
  curve.py        the curve command's work: checkpointing's memory against recompute, measured and predicted
  __main__.py     the command: python -m minigrad tour | lesson N [--learner] | check [N] | curve | memory | plan
"""
import numpy as _np

from . import amp, autograd, functional, nn, optim, utils
from .amp import autocast, get_autocast_dtype, is_autocast_enabled
from .accumulate import accumulate, accumulation_step
from .checkpoint import checkpoint, checkpoint_policies, checkpoint_sequential
from .profiler import profile
from .backend import cuda_is_available, default_device, device
from .backend import BFLOAT16 as bfloat16  # NOTE [bfloat16] (backend/device.py): ml_dtypes' bfloat16, a NumPy dtype
from .backend.random import get_rng_state, manual_seed, set_rng_state
from .names import inference_mode, is_inference_mode_enabled, not_offered
from .tensor import from_numpy
from .tensor import (Tensor, arange, cat, empty, empty_like, enable_grad, eye, full, full_like, is_grad_enabled,
                     maximum, minimum, multinomial, no_grad, ones, ones_like, rand, rand_like, randint, randn,
                     randn_like, stack, tensor, where, zeros, zeros_like)

float16, float32, float64 = _np.dtype("float16"), _np.dtype("float32"), _np.dtype("float64")
int32, int64, bool_ = _np.dtype("int32"), _np.dtype("int64"), _np.dtype("bool")

__version__ = "0.1.0"
__all__ = ["Tensor", "tensor", "zeros", "ones", "full", "zeros_like", "ones_like", "randn", "rand", "randint",
           "empty", "empty_like", "eye", "full_like", "rand_like", "randn_like",
           "arange", "cat", "stack", "where", "maximum", "minimum", "multinomial", "no_grad", "enable_grad",
           "is_grad_enabled", "manual_seed",
           "get_rng_state", "set_rng_state", "cuda_is_available", "default_device", "device", "functional", "nn", "optim",
           "float16", "bfloat16", "float32", "float64", "int32", "int64", "bool_", "profile", "checkpoint", "checkpoint_sequential", "accumulate", "accumulation_step",
           "checkpoint_policies", "from_numpy", "inference_mode", "is_inference_mode_enabled", "utils", "amp", "autocast",
           "is_autocast_enabled", "get_autocast_dtype", "autograd"]

_INSTEAD = {"compile": "minigrad has no compiler: call the model itself", "jit": "minigrad has no compiler (no jit)",
            "save": "save model.state_dict() (NumPy arrays) with numpy.savez or pickle; load_state_dict takes it back",
            "load": "load the arrays you saved (numpy.load or pickle) and pass them to model.load_state_dict",
            "Generator": "minigrad has one generator: mg.manual_seed, mg.get_rng_state and mg.set_rng_state",
            "cuda": "mg.cuda_is_available() is torch.cuda.is_available(); t.cuda() or t.to('cuda') moves a tensor",
            "set_grad_enabled": "use `with mg.no_grad():` (or mg.enable_grad() inside one)",
            "as_tensor": "mg.tensor(data) copies; mg.from_numpy(array) shares the NumPy array's memory",
            "long": "the dtype is mg.int64", "bool": "the dtype is mg.bool_", "int": "the dtype is mg.int32",
            "float": "the dtype is mg.float32", "double": "the dtype is mg.float64", "half": "the dtype is mg.float16",
            "Size": "a shape is a plain tuple"}


def __getattr__(name):
    """A name PyTorch has at the top and minigrad in a namespace (mg.CrossEntropyLoss: mg.nn's) says where it is;
    any other, what the nearest is (names.py)."""
    for place, module in (("mg.nn", nn), ("mg.optim", optim), ("mg.functional", functional), ("mg.nn.init", nn.init),
                          ("mg.optim.lr_scheduler", optim.lr_scheduler), ("mg.utils", utils)):
        if name in module.__all__:
            raise AttributeError(f"module 'minigrad' has no attribute {name!r}; it is {place}.{name}")
        if name in module._INSTEAD:
            raise AttributeError(f"module 'minigrad' has no attribute {name!r}, nor has {place}: {module._INSTEAD[name]}")
    raise not_offered(__name__, name, __all__, _INSTEAD, package_dir=__path__[0])

from . import learner  # noqa: E402 on top of everything: MINIGRAD_LEARNER_ENGINE=folder runs the engine on your exercises
learner._from_environment()
