"""Type promotion: the one dtype an op computes its operands in, PyTorch's rule (torch.result_type) with one
exception, as pure functions of the operands' dtypes and of whether each is a tensor with dims, a 0-d tensor or a
Python number (NOTE [type promotion]). tensor.py's `_operands` casts two operands to it; cat and stack
(factories.py), the comparisons and the in-place writes (methods.py) ask it too.

Read next: tensor.py's `_operands`, which casts to `result_type`.
"""
import numpy as np

from .. import backend

FLOAT32, FLOAT64, INT64, BOOL = np.dtype("float32"), np.dtype("float64"), np.dtype("int64"), np.dtype(bool)
_TO = {"float16": "half", "bfloat16": "bfloat16", "float32": "float"}  # the method that converts to each


# NOTE [type promotion]: PyTorch's rules, but one. A dtype has a kind, bool < integer < float, and each operand a
# standing, tensor with dims > 0-d tensor > Python number. An operand of a higher kind always counts; within the
# highest kind the operands of the highest standing decide, so a 0-d tensor or a number never widens a tensor with
# dims of its kind (bfloat16 * tensor(3.0) is bfloat16, int8 + 1000 is int8), but float beats integer (an int
# tensor + 0.5 is float32, a Python float's dtype being the default, float32). Two dtypes of one standing take the
# wider (float16 with bfloat16: float32; uint8 with int8: int16). Integers divided become float32. The one
# exception: a float16, bfloat16 or float32 tensor with dims beside a float64 tensor with dims, where PyTorch
# computes both in float64 (and, out of place, makes a float64 result), is an error naming the two: a stray float64
# would double a model's memory unseen, and minigrad is about seeing memory. A comparison, whose result is bool,
# compares them as PyTorch does; under autocast, which casts an op's floats itself (amp/), the pair is its business.
# An in-place write computes as its out-of-place op, then casts into the tensor where torch.can_cast allows it (a
# float result never into an integer tensor: PyTorch's error too).

def kind(dtype):
    """0 for bool, 1 for an integer dtype, 2 for a floating one (bfloat16 included)."""
    return 0 if dtype == BOOL else 2 if backend.is_float(dtype) else 1


def promote_types(a, b):
    """torch.promote_types(a, b) (None is no dtype): the higher kind's; within floats the wider, float16 with
    bfloat16 float32; within integers NumPy's, which is PyTorch's (uint8 with int8 is int16)."""
    if a is None or b is None or a == b:
        return b if a is None else a
    if kind(a) != kind(b):
        return a if kind(a) > kind(b) else b
    if kind(a) == 2:
        return FLOAT32 if a.itemsize == b.itemsize else a if a.itemsize > b.itemsize else b
    return np.result_type(a, b)


def can_cast(source, target):
    """torch.can_cast: an in-place write may narrow within a kind (float64 into float32), never go down a kind."""
    return kind(source) <= kind(target)


def _number_dtype(x):
    return BOOL if isinstance(x, (bool, np.bool_)) else INT64 if isinstance(x, (int, np.integer)) else FLOAT32


def result_type(op, operands, all_dims=False, refuse=True):
    """The dtype `op` computes `operands` in (tensors and Python numbers), by NOTE [type promotion]: each standing's
    dtypes promoted, then the standings combined as torch.result_type does. all_dims: every tensor counts as one
    with dims (cat and stack join 0-d tensors as 1-d ones, as PyTorch's stack does). refuse=False: float64 beside
    a narrower float is promoted, not refused."""
    by_standing = [None, None, None]  # Python numbers, 0-d tensors, tensors with dims
    for x in operands:
        standing = 0 if not hasattr(x, "dtype") else 2 if all_dims or x.ndim else 1
        by_standing[standing] = promote_types(by_standing[standing], x.dtype if standing else _number_dtype(x))
    if refuse and by_standing[2] == FLOAT64:
        _refuse_float64(op, [x for x in operands if hasattr(x, "dtype") and (all_dims or x.ndim)])
    return _combine(by_standing[2], _combine(by_standing[1], by_standing[0]))


def _combine(higher, lower):
    """PyTorch's combine_categories: the higher standing's dtype, unless the lower is of a higher kind."""
    if higher is None or lower is None:
        return lower if higher is None else higher
    return promote_types(higher, lower) if kind(lower) > kind(higher) else higher


def _refuse_float64(op, tensors):
    narrow = sorted({t.dtype.name for t in tensors if backend.is_float(t.dtype) and t.dtype != FLOAT64})
    if narrow:
        shapes = " and ".join(str(tuple(t.shape)) for t in tensors if backend.is_float(t.dtype))
        raise TypeError(f"{op}: inputs have different dtypes ({narrow[0]} and float64), of shapes {shapes}; minigrad "
                        f"does not promote {narrow[0]} to float64 silently, as PyTorch would (a stray float64 doubles "
                        f"memory unseen): convert one first, .double() on the {narrow[0]} one or .{_TO[narrow[0]]}() "
                        f"on the float64 one")
