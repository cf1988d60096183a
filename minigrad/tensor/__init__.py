"""The Tensor and the tape: how ops get recorded, and how backward walks them in reverse.

The reading path, to follow one saved array and one gradient:

  modes.py      the switches the tape's behaviour depends on (no_grad, keep_saved, recomputing, profiling,
                autocasting, packing, caching) and their queries; OpMode, the stack of modes apply consults (NOTE
                [op modes]); the Listener, every report the tape makes (NOTE [what the tape reports]); Cache, every
                question it asks a checkpoint (NOTE [the cache asks, the tape answers]); Autocast, the mode mg.autocast
                is (NOTE [autocast asks first]); the version counters of tensors' storage and the check backward makes
                with them (NOTE [version counters]: version_counter, check_saved_versions)
  tape.py       the records and the walk: record, keep, the one choke point for saved arrays (NOTE [one choke point]),
                the saved-tensor hooks it calls (pack in keep, unpack in _run_tape: NOTE [saved tensors hooks],
                autograd/graph.py),
                hand_over, release (NOTE [memory drains]); backward and _run_tape (NOTE [the tape]); who owns a
                gradient array during a backward (NOTE [who owns a gradient]); the reads outside the tape (NOTE
                [reads outside the tape]).
                It reads a tensor only through `Variable`, the protocol the Tensor keeps
  tensor.py     the Tensor's face: apply, the one place a record is made (NOTE [per-op overhead]); the Tensor's
                storage, properties, conversions, operators and one-op methods; _operands, which casts two operands to
                their promoted dtype; _accumulate, where
                a leaf takes or sums its gradient (NOTE [gradient accumulation])
  and in ops:   Op.save_for_backward (what a record keeps), then one op of each kind: Add, Sum, Linear, Softmax

Then, beside the path:

  promotion.py  type promotion: the dtype an op computes its operands in, PyTorch's rule but for one refusal
                (NOTE [type promotion])
  args.py       what a user passes, checked: dtypes, .to()'s arguments, a new tensor's data and sizes, index keys,
                masks
  methods.py    the methods composed of others (var, norm, topk, split, gather, ...), the comparisons, and the
                in-place writes (NOTE [in-place]), as classes the Tensor inherits
  names.py      PyTorch's other names for them (x.add, x.mm, x.t(), x.new_zeros, x.nbytes, ...), and what a name
                the Tensor lacks says (x.einsum: how to write it; a typo: the nearest name)
  factories.py  tensor(), zeros, ones, randn, arange, ..., cat, stack, where, maximum, minimum

Imports go one way: modes.py, tape.py, promotion.py, args.py, methods.py, names.py, tensor.py, factories.py, each
importing only files before it. Every name is re-exported here, so `from minigrad.tensor import apply, no_grad,
records_since` works as it did when this was one file. (`minigrad.tensor` as an attribute is mg.tensor, the function; as is this
package's `tensor` attribute: importlib.import_module("minigrad.tensor") is the package.)

Read next: functional.py (softmax, cross_entropy, ...), then nn/ and optim/.
"""
from .modes import (Autocast, Cache, Listener, OpMode, active_autocast, active_cache, active_modes, active_profiler,
                    active_saved_tensors_hooks, autocast_inputs, autocasting, caching, check_saved_versions,
                    enable_grad, is_grad_enabled, is_keeping_saved, is_recomputing, keep_saved,
                    mark_written, no_grad, packing, profiling, recomputing, version_counter)
from .tape import (Variable, backward, backward_from, hand_over, keep, mark, record, records_since,
                   release, watching_reads, zero_grads)
from .args import (DTYPES, FLOAT_DTYPES, check_cuda_device, check_device, check_float, check_sizes, normalize_dtype,
                   parse_to_args)
from .tensor import Tensor, apply, wrap
from .factories import from_numpy
from .factories import (arange, cat, empty, empty_like, eye, full, full_like, maximum, minimum, multinomial, ones,
                        ones_like, rand, rand_like, randint, randn, randn_like, stack, tensor, where, zeros, zeros_like)

__all__ = ["Tensor", "apply", "tensor", "from_numpy", "zeros", "ones", "full", "zeros_like", "ones_like", "randn", "rand", "randint",
           "empty", "empty_like", "eye", "full_like", "rand_like", "randn_like", "multinomial", "arange", "cat",
           "stack", "where", "maximum", "minimum",
           "no_grad", "enable_grad", "keep_saved", "recomputing", "profiling", "autocasting", "packing", "caching",
           "OpMode",
           "active_modes", "Listener", "Cache",
           "Autocast", "is_grad_enabled", "is_keeping_saved", "is_recomputing", "active_profiler", "active_cache",
           "active_autocast", "active_saved_tensors_hooks", "autocast_inputs", "mark_written",
           "version_counter", "check_saved_versions",
           "Variable", "record", "keep", "hand_over", "release", "mark", "records_since", "backward", "backward_from",
           "zero_grads", "watching_reads", "DTYPES", "FLOAT_DTYPES", "check_cuda_device", "check_device", "check_float",
           "check_sizes", "normalize_dtype", "parse_to_args", "wrap"]

# The tape's private parts that the tests read, named here so that each is seen: the switches themselves (_on), and
# the watchers of reads outside the tape, of which a test asks that none is left on (NOTE [reads outside the tape]).
from .modes import _on  # noqa: E402,F401
from .tape import _watchers  # noqa: E402,F401
