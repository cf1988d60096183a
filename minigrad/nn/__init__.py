"""Modules with torch.nn's names (`from minigrad import nn`; `nn.Linear`, `nn.CrossEntropyLoss`,
`nn.utils.clip_grad_norm_`, `nn.init.kaiming_uniform_`; `nn.functional` is mg.functional).

  module.py   Parameter, Module (its walk of parameters and children, state_dict, train/eval, ...), Sequential,
              ModuleList, ModuleDict
  layers.py   Linear, Identity, Flatten, ReLU, Tanh, Sigmoid, GELU, SiLU, LeakyReLU, Softmax, LogSoftmax, Dropout,
              LayerNorm, Embedding, BatchNorm1d
  losses.py   CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCEWithLogitsLoss
  utils.py    nn.utils.clip_grad_norm_
  init.py     nn.init: kaiming_*, xavier_*, trunc_normal_, normal_, uniform_, constant_, ..., calculate_gain
"""
import sys

from .. import functional
from ..names import not_offered
from .module import Module, ModuleDict, ModuleList, Parameter, Sequential
from .layers import (GELU, BatchNorm1d, Dropout, Embedding, Flatten, Identity, LayerNorm, LeakyReLU, Linear,
                     LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh)
from .losses import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .utils import utils
from . import init

__all__ = ["Parameter", "Module", "Sequential", "ModuleList", "ModuleDict", "Linear", "Identity", "Flatten", "ReLU",
           "Tanh", "Sigmoid", "GELU", "SiLU", "LeakyReLU", "Softmax", "LogSoftmax", "Dropout", "LayerNorm", "Embedding",
           "BatchNorm1d", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss", "utils", "init", "functional"]

# `import minigrad.nn.functional as F`, PyTorch's line, finds mg.functional (there is no file nn/functional.py)
sys.modules[__name__ + ".functional"] = functional

_NO_CONV = "minigrad has no convolutions or pooling: its models are MLPs and transformers (nn.Linear, attention)"
_COMPOSE = "write it as a Module whose forward composes tensor ops (as nn.GELU's calls F.gelu)"
_INSTEAD = {**{n: _NO_CONV for n in ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "MaxPool1d", "MaxPool2d",
                                      "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm2d", "Upsample")},
            **{n: "minigrad has no recurrent layers; its sequence models are transformers (minigrad.gpt, minigrad.bert)"
               for n in ("RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell")},
            "MultiheadAttention": "use F.scaled_dot_product_attention, or minigrad.gpt.CausalSelfAttention (import "
                                  "minigrad.gpt)",
            **{n: "use minigrad.gpt.Block (GPT-2's) or minigrad.bert.BertLayer (import minigrad.gpt, minigrad.bert)"
               for n in ("Transformer", "TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder")},
            **{n: _COMPOSE for n in ("ELU", "Mish")}, "Softplus": _COMPOSE + ": F.softplus(x, beta, threshold)",
            "RMSNorm": _COMPOSE + ": x * (x.pow(2).mean(-1, keepdim=True) + eps).rsqrt() * weight, with weight an "
                                  "nn.Parameter of ones",
            "BCELoss": "use nn.BCEWithLogitsLoss on the logits (the sigmoid inside, stable), as PyTorch advises",
            **{n: "minigrad has CrossEntropyLoss, NLLLoss, MSELoss, L1Loss and BCEWithLogitsLoss; " + _COMPOSE
               for n in ("KLDivLoss", "SmoothL1Loss", "HuberLoss", "CosineEmbeddingLoss", "MarginRankingLoss")},
            **{n: "minigrad's data parallel is minigrad.distributed.DistributedDataParallel, over MPI (import "
                  "minigrad.distributed)" for n in ("DataParallel", "parallel")},
            "ParameterList": "use nn.ModuleList of modules that hold the parameters, or a list attribute",
            "ParameterDict": "use nn.ModuleDict of modules that hold the parameters"}


def __getattr__(name):
    raise not_offered(__name__, name, __all__, _INSTEAD)
