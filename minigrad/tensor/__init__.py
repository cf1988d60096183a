"""The Tensor and the tape (moved whole to tensor/tensor.py, re-exported here; split by idea in the next commit)."""
from .tensor import (DTYPES, FLOAT_DTYPES, Listener, Tensor, active_cache, active_profiler, apply, arange, backward,
                     backward_within, caching, cat, enable_grad, full, hand_over, is_grad_enabled, is_keeping_saved,
                     is_recomputing, keep, keep_saved, mark, mark_written, maximum, minimum, multinomial, no_grad,
                     normalize_dtype, noting_reads, ones, ones_like, parse_to_args, profiling, rand, randint, randn,
                     recomputing, records_since, release, replaying, stack, where, zero_grads, zeros, zeros_like)
from .tensor import _noting, _on, _placeholders, _version_counter, _wrap  # noqa: F401 checkpoint.py and the tests
from .tensor import tensor  # last: the function, not the submodule of the same name
