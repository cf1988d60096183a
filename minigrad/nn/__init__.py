"""Modules with torch.nn's names (`from minigrad import nn`; `nn.Linear`, `nn.utils.clip_grad_norm_`, `nn.init`).

  module.py   Parameter, Module (its walk of parameters and children, state_dict, train/eval, ...), Sequential,
              ModuleList, ModuleDict
  layers.py   Linear, ReLU, Tanh, Sigmoid, GELU, Dropout, LayerNorm, Embedding, BatchNorm1d
  utils.py    nn.utils.clip_grad_norm_ and nn.init's fillers
"""
from .module import Module, ModuleDict, ModuleList, Parameter, Sequential
from .layers import GELU, BatchNorm1d, Dropout, Embedding, LayerNorm, Linear, ReLU, Sigmoid, Tanh
from .utils import init, utils

__all__ = ["Parameter", "Module", "Sequential", "ModuleList", "ModuleDict", "Linear", "ReLU", "Tanh", "Sigmoid", "GELU",
           "Dropout", "LayerNorm", "Embedding", "BatchNorm1d", "utils", "init"]
