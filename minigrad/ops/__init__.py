"""The differentiable ops, on raw arrays: each op is one small class with its forward, its backward and its FLOP
count side by side. An op never sees a Tensor; an op instance is also the record the tape keeps (tensor.py).

The files, in reading order (base.py imports nothing of minigrad's; each kind imports base.py and the layer
below, the backend package (its random.py, special.py), never another kind):

  base.py       Op, the class every op is (save_for_backward, needs_input_grad, the FLOP rule: NOTE [FLOP
                convention]); ShapeError and IndexShapeError; the helpers ops of several kinds share (unbroadcast,
                normalize_dims, keepdim_shape, broadcast_shapes); flops_table, what docs/ledger.md shows; LEARNED and
                learned, the table of the learner's pieces the engine reads (NOTE [learner's pieces])
  pointwise.py  elementwise ops: Add, Sub, Mul, Div, Pow (and power), PowTensor, Clamp, ClampTensor, Maximum,
                Minimum, Neg; Exp, Log, Sqrt, Sin, Cos, Tanh, Sigmoid, Abs, Sign, Round, Relu,
                Gelu; Cast, Clone, ToDevice;
                Where, MaskedFill
  shape.py      reductions: Sum, Mean, Max, Min, Prod, Cumsum; shapes and indexing: Reshape, Transpose, Permute,
                Expand, Flip, Index, IndexPut, Cat, Stack, Tri
  linear.py     the matrix products: Matmul and Linear, and the two helpers only they use (rows, and matmul from
                the host pool). A file of their own rather than pointwise.py or nn.py: Linear is x @ W^T + b
                fused into one record (its batch folded into one GEMM), and both count their FLOPs under
                'matmul', 2 m n k, where nearly all of a model's FLOPs are: side by side, that rule reads once
  nn.py         the fused neural-net ops: Softmax, LogSoftmax, Softplus, Silu, BinaryCrossEntropyWithLogits,
                LayerNorm, Dropout (draw_keep draws its mask), ScaledDotProductAttention (NOTE [fused attention])

Everything is re-exported here, so `ops.Add` and `from minigrad.ops import Op, unbroadcast` name the same
objects as before the split. (cross_entropy and embedding have no op of their own: functional.py composes them.)

Read first: base.py, then one op of each kind (Add, Sum, Linear, Softmax); then tensor.py, which runs them.
"""
from .base import (LEARNED, IndexShapeError, Op, ShapeError, broadcast_shapes, flops_table, keepdim_shape, learned,
                   normalize_dim, normalize_dims, refuse_bool, unbroadcast)
from .pointwise import (Abs, Add, Cast, Clamp, ClampTensor, Clone, Cos, Div, Exp, Gelu, Log, MaskedFill, Maximum,
                        Minimum, Mul, Neg, Pow, PowTensor, Relu, Round, Sigmoid, Sign, Sin, Sqrt, Sub, Tanh, ToDevice,
                        Where, power)
from .shape import (Cat, Cumsum, Expand, Flip, Index, IndexPut, Max, Mean, Min, Permute, Prod, Reshape, Stack, Sum,
                    Transpose, Tri)
from .linear import Linear, Matmul, matmul, rows
from .nn import (BinaryCrossEntropyWithLogits, Dropout, LayerNorm, LogSoftmax, ScaledDotProductAttention, Silu, Softmax,
                 Softplus, draw_keep)

__all__ = ["IndexShapeError", "Op", "ShapeError", "broadcast_shapes", "flops_table", "keepdim_shape", "normalize_dim",
           "normalize_dims", "refuse_bool", "unbroadcast", "LEARNED", "learned",
           "Abs", "Add", "Cast", "Clamp", "ClampTensor", "Clone", "Cos", "Div", "Exp", "Gelu", "Log", "MaskedFill",
           "Maximum", "Minimum", "Mul", "Neg", "Pow", "PowTensor", "Relu", "Round", "Sigmoid", "Sign", "Sin", "Sqrt",
           "Sub", "Tanh", "ToDevice", "Where", "power",
           "Cat", "Cumsum", "Expand", "Flip", "Index", "IndexPut", "Max", "Mean", "Min", "Permute", "Prod", "Reshape",
           "Stack", "Sum", "Transpose", "Tri",
           "Linear", "Matmul", "matmul", "rows",
           "BinaryCrossEntropyWithLogits", "Dropout", "LayerNorm", "LogSoftmax", "ScaledDotProductAttention", "Silu",
           "Softmax", "Softplus", "draw_keep"]
