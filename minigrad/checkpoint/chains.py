"""Checkpointing chains of functions: a chain cut into segments, each but the last under mg.checkpoint.

    y = mg.checkpoint_sequential(layers, 4, x)            # 4 segments, cut as PyTorch's; the last runs normally
    y = checkpoint_segments(layers, plan.segments, x, plan.children)  # a schedules.Plan's segments
    chain = measure_chain(layers, x)                      # the numbers a schedules plan is made from

checkpoint_blocks runs a model's transformer blocks (gpt.py, bert.py) with each listed segment of them
checkpointed. measure_chain runs each function once and reads from mg.profile what it saves and what a
recompute of it runs (NOTE [recompute what backward reads], policies.py), for schedules.py to predict
a plan's peak and recompute FLOPs.

Read next: accumulate.py, the other trick.
"""
import functools
import math
import numbers

from ..profiler import profile
from ..schedules import Chain, Rerun, check_segments, segment_bounds
from ..tensor import Tensor, mark, records_since, watching_reads
from .policies import OpCache, caching, nothing_saveable
from .segment import _check_options, _check_policy, checkpoint


def checkpoint_sequential(functions, segments, input, use_reentrant=None, *, preserve_rng_state=True,
                          determinism_check="default", policy=None):
    """Run a chain of functions in `segments` segments; all but the last are checkpointed.

    As torch.utils.checkpoint.checkpoint_sequential (functions, then segments, then input; use_reentrant
    None or False): the last segment runs normally, since its activations are needed right away by
    backward. segments='sqrt' picks round(sqrt(n)), the split of Chen et al. (2016) that needs O(sqrt(n))
    activation memory. preserve_rng_state, determinism_check and policy go to each checkpoint.
    """
    _check_options("checkpoint_sequential", use_reentrant, determinism_check)
    _check_policy("checkpoint_sequential", policy)
    if isinstance(segments, Tensor):
        raise TypeError(f"checkpoint_sequential(functions, segments, input): got a Tensor of shape {segments.shape} "
                        f"as segments and {type(input).__name__} as input; the number of segments comes second and "
                        f"the input third, as in PyTorch: checkpoint_sequential(layers, 2, x)")
    functions = list(functions)
    n = len(functions)
    if n == 0:
        raise ValueError("checkpoint_sequential: got no functions")
    if isinstance(segments, str) and segments == "sqrt":
        segments = max(1, round(math.sqrt(n)))
    if isinstance(segments, numbers.Integral) and not isinstance(segments, bool):
        segments = int(segments)
    if not isinstance(segments, int) or isinstance(segments, bool) or not 1 <= segments <= n:
        raise ValueError(f"checkpoint_sequential: segments must be an int from 1 to the number of functions "
                         f"({n}), or 'sqrt'; got {segments!r}")
    bounds = segment_bounds(n, segments)
    x = input
    for i, (lo, hi) in enumerate(bounds):
        run = _run_chain(functions[lo:hi])
        if i < len(bounds) - 1:
            x = checkpoint(run, x, preserve_rng_state=preserve_rng_state, determinism_check=determinism_check,
                           policy=policy)
        else:
            x = run(x)
    return x


def _run_chain(functions):
    def run(x):
        for f in functions:
            x = f(x)
        return x
    run.__name__ = "segment(" + ", ".join(getattr(f, "__name__", type(f).__name__) for f in functions) + ")"
    return run


def checkpoint_segments(functions, segments, input, children=None, **kwargs):
    """Run a chain cut into explicit segments [(lo, hi), ...], all but the last checkpointed, as a
    schedules.Plan says (pass plan.segments, plan.children). children[k], a Plan, cuts checkpointed
    segment k again when it is recomputed: nested checkpoints (recursive, revolve)."""
    functions = list(functions)
    check_segments(segments, 0, len(functions), "checkpoint_segments")
    return _run_segments(functions, segments, children or {}, input, kwargs)


def _run_segments(functions, segments, children, x, kwargs):
    for k, (lo, hi) in enumerate(segments):
        if k == len(segments) - 1:
            return _run_chain(functions[lo:hi])(x)
        child = children.get(k)
        if child is None:
            run = _run_chain(functions[lo:hi])
        else:
            def run(t, child=child):
                return _run_segments(functions, child.segments, child.children, t, kwargs)
            run.__name__ = f"segment({lo}..{hi}, cut again)"
        x = checkpoint(run, x, **kwargs)


def checkpoint_blocks(blocks, x, segments, *args, policy=None):
    """x through blocks in turn (block(x, *args)), the model's way of checkpointing its transformer blocks:
    segments False: plainly; True: every block under its own checkpoint (Hugging Face's gradient_checkpointing);
    a list [(lo, hi), ...]: each listed segment of blocks under one checkpoint, the others plainly.
    policy: what each checkpoint keeps rather than recomputes (NOTE [selective checkpoint], policies.py); None
    recomputes all."""
    if segments is True:
        segments = [(i, i + 1) for i in range(len(blocks))]
    ends = dict(segments or ())
    i = 0
    while i < len(blocks):
        if i in ends:
            x = checkpoint(functools.partial(_run_blocks, blocks[i:ends[i]]), x, *args, policy=policy)
            i = ends[i]
        else:
            x = blocks[i](x, *args)
            i += 1
    return x


def _run_blocks(blocks, x, *args):
    for block in blocks:
        x = block(x, *args)
    return x


def measure_chain(functions, input):
    """A schedules.Chain for these functions, measured by running each once on `input` (a forward
    with recording on, under mg.profile): its input's bytes, whether it saves its input or output,
    what else it saves, its forward FLOPs, and what a recompute runs of it (a schedules.Rerun, from the
    same rule as the checkpoint's, NOTE [recompute what backward reads] in policies.py)."""
    sizes, saves_in, saves_out, other, flops, reruns = [], [], [], [], [], []
    x = input
    with profile() as prof:
        for f in functions:
            start, flops_before = mark(), prof.flops("forward")
            cache = OpCache(nothing_saveable, getattr(f, "__name__", type(f).__name__), count_flops=True)
            cache.note_input(x._data)
            with caching(cache), watching_reads(cache):
                y = f(x)
            kept = prof.activations_kept(records_since(y, start))  # a saved weight stays a parameter
            sizes.append(x._data.nbytes)
            saves_in.append(kept.pop(prof.buffer_id(x._data), None) is not None)
            saves_out.append(kept.pop(prof.buffer_id(y._data), None) is not None)
            other.append(sum(kept.values()))
            flops.append(prof.flops("forward") - flops_before)
            reruns.append(_rerun_of(cache, y._data))
            x = y
    sizes.append(x._data.nbytes)
    return Chain(sizes, saves_in, saves_out, other, flops, reruns)


def _rerun_of(cache, out):
    """The Rerun of one function whose ops `cache` noted and whose output is `out`."""
    last = cache._producer(out)
    results = {} if last in (None, -1) else {last: out}

    def cost(results, read_after):
        runs, read, needed = cache.plan(results, set(read_after) | cache._read_out)  # reads outside the ops too
        flops = sum(e.flops for e, run in zip(cache.entries, runs) if run)
        keeps = last in results and not runs[last] and (cache.entries[last].own_out is not None or read[last])
        return flops, -1 in needed, keeps

    read_after = () if last in (None, -1) else (last,)
    return Rerun(last=cost(results, ()), unread=cost({}, ())[:2], read=cost({}, read_after)[:2])
