"""minigrad: a small tape-based autograd engine over NumPy (CPU) or CuPy (GPU).

Reading order, each module importing only the ones above it (the README's table; a test checks both):
  meta.py        arrays with a shape and no data: the 'meta' device that predicts memory at any size
  backend.py     the array library: NumPy, CuPy or meta, decided in one place
  random.py      minigrad's seeded generator, whose state can be saved and restored
  special.py     the normal CDF behind exact GELU
  ops.py         each op's forward, backward and FLOPs on raw arrays
  tensor/        the Tensor and the tape: its switches, the records and backward, the Tensor's face
  functional.py  softmax, cross_entropy, layer_norm, ... (imported as mg.functional)
  nn.py, optim.py   modules and optimizers with PyTorch's names
  profiler.py    mg.profile: bytes by category, FLOPs by phase, a timeline
  schedules.py   where to cut a chain, and what it will cost (pure functions)
  checkpoint.py  mg.checkpoint, mg.checkpoint_sequential: recompute instead of keeping
  accumulate.py  mg.accumulate: micro-batches that add up to the full batch's gradient
  distributed.py data parallel over MPI: gradients summed across processes, ZeRO stage 1 (import it)
  gpt.py         a small GPT, a character tokenizer and a tiny corpus
  bert.py        BERT with Hugging Face's classes and parameter names
  models.py      full-size models by their checkpoints' names, and their parameter counts
  plan.py        will it fit? a full-size model's training step on 'meta', and what fits a GPU
  formulas.py    closed forms that the ledger's measurements must equal
  testing.py     gradcheck: finite differences, explained
  grading.py     the exercises' grader (exercises/ beside the package)
  __main__.py    the command: python -m minigrad tour | lesson N | check [N]
"""
import numpy as _np

from . import functional, nn, optim
from .accumulate import accumulate, accumulation_step
from .checkpoint import checkpoint, checkpoint_policies, checkpoint_sequential
from .profiler import profile
from .backend import cuda_is_available, default_device, device
from .random import get_rng_state, manual_seed, set_rng_state
from .tensor import (Tensor, arange, cat, enable_grad, full, is_grad_enabled, maximum, minimum, multinomial, no_grad,
                     ones, ones_like, rand, randint, randn, stack, tensor, where, zeros, zeros_like)

float16, float32, float64 = _np.dtype("float16"), _np.dtype("float32"), _np.dtype("float64")
int32, int64, bool_ = _np.dtype("int32"), _np.dtype("int64"), _np.dtype("bool")

__version__ = "0.1.0"
__all__ = ["Tensor", "tensor", "zeros", "ones", "full", "zeros_like", "ones_like", "randn", "rand", "randint",
           "arange", "cat", "stack", "where", "maximum", "minimum", "multinomial", "no_grad", "enable_grad",
           "is_grad_enabled", "manual_seed",
           "get_rng_state", "set_rng_state", "cuda_is_available", "default_device", "device", "functional", "nn", "optim",
           "float16", "float32", "float64", "int32", "int64", "bool_", "profile", "checkpoint", "checkpoint_sequential", "accumulate", "accumulation_step",
           "checkpoint_policies"]
