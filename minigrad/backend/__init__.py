"""The array backend: the one place that decides between NumPy ('cpu'), CuPy ('cuda') and the shape-only
arrays of meta.py ('meta').

Everything above this layer (ops, the tape, nn) asks it for an array module (`xp`) instead of importing NumPy
or CuPy itself, so the same ops run on all three. device.py is that choice:
the devices and the default one, `xp_of` and `xp_for` (the array module of an array, of a device), and moving
arrays between devices. The other files of the package build on it, one idea each:

  pool.py     where the ops' host arrays come from: a pool that reuses them between steps (`empty`, NOTE [host
              memory pool]), and one opt-in setting of glibc's malloc for everything else (keep_freed_host_memory)
  rows.py     fast paths on NumPy arrays for what a step does many times: the loss's broadcast gradient,
              sums and maxima along short rows through the BLAS, an embedding's gradient rows; and `put`, an
              assignment whose repeated indices follow one rule on every device
  random.py   minigrad's seeded generator, whose state can be saved and restored
  special.py  the normal CDF that exact GELU needs, fast in float32; a sigmoid that neither overflows nor cancels

and one file lies beneath it, imported by device.py and importing nothing of minigrad:

  meta.py     the 'meta' device's arrays: a shape, a dtype and strides, no data

This file gathers them: `backend.xp_of` is `device.xp_of` and `backend.empty` is `pool.empty`, the same
functions, so the layers above ask one module for every array primitive.

Read next: device.py, pool.py and rows.py, then random.py, special.py and ops.py, the differentiable ops written only in
these primitives.
"""
from . import meta
from .device import (BFLOAT16, DEVICES, DeviceError, MetaArray, MetaError, _cupy, _cupyx, as_array, cuda_is_available,
                     default_device, device, device_of, is_array, is_float, is_meta, normalize_device, on_gpu, owner,
                     stable_argsort, to_device, to_numpy, xp_for, xp_of)
from .pool import (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, POOL_MIN, empty, empty_cache, empty_like, host_pool, is_view,
                   keep_freed_host_memory, made, masked_fill, memory_reserved, out_like, pooled, reshape, zeros)
from .rows import (accumulator, broadcast_to, in_float32, index_add, max_rows, mean_rows, narrow, ones_like, put,
                   reduce_sum, sum_leading, sum_rows, widen, written_last)

# what the layers above use, as backend.X
__all__ = ["meta", "BFLOAT16", "DEVICES", "DeviceError", "MetaArray", "MetaError", "_cupy", "_cupyx", "as_array", "cuda_is_available",
           "default_device", "device", "device_of", "is_array", "is_float", "is_meta", "normalize_device", "on_gpu", "owner",
           "stable_argsort", "to_device", "to_numpy", "xp_for", "xp_of", "M_MMAP_THRESHOLD", "M_TRIM_THRESHOLD",
           "POOL_MIN", "empty", "empty_cache", "empty_like", "host_pool", "is_view", "keep_freed_host_memory",
           "made", "masked_fill", "memory_reserved", "out_like", "pooled", "reshape", "zeros", "accumulator",
           "broadcast_to", "in_float32", "index_add", "max_rows", "mean_rows", "narrow", "ones_like", "put",
           "reduce_sum", "sum_leading", "sum_rows", "widen", "written_last"]
