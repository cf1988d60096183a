"""Learner mode: minigrad runs on the pieces of it that you wrote in the exercises.

    python -m minigrad lesson 1 --learner        # lesson 1's GPT trains on your tape walk, AdamW step, ...
    MINIGRAD_LEARNER_ENGINE=exercises python train.py   # any script (the folder of your exercise files)
    with mg.learner.use("exercises"): ...         # a block

Each piece you have written replaces the engine's own, and the later exercises and lessons run on it: your
elementwise backwards (exercise 1), unbroadcast (2), matmul backward (3), tape walk (4), softmax and log_softmax
(5), checkpoint (7, or 8 with the generator replayed), accumulation loop (11), AdamW step (12) and the loss
scaler's update rule (14). A piece counts as written when a tiny run of it (a probe, below) raises no
NotImplementedError: a stub leaves the engine's own in place (and so does a piece that builds on a stub: report()
names the one to write first). A piece whose probe fails otherwise, or gives another result than the engine's own
on the same inputs (NOTE [the probe checks the result]), is reported and left out: `python -m minigrad check N` says
what is wrong. At the end, `report()` says whose piece ran, and how often.

Where yours runs, the engine still does what your exercise did not ask for: a call your contract does not cover
goes to the engine's own (a tape walk with a given gradient or retain_graph, a graph with the engine's checkpoint
records in it or a leaf that stopped requiring grad or holds a .grad of another dtype (accumulate's float32 buffer
for a float16 weight), an AdamW with amsgrad or maximize, a checkpoint with options, an accumulation loop over
float16 parameters, whose gradients the engine's sums in float32), and so does a gradient the engine makes
otherwise than the exercise's formula (x ** 0's, 0 also at x = 0, where p * x ** (p - 1) is NaN; a norm's at 0),
and a 2-byte float (float16, bfloat16) in Pow, unbroadcast, matmul and softmax, which the engine computes in
float32 and rounds once, as PyTorch, and in AdamW, whose products the engine rounds to the parameter's dtype (the
exercises are float32 and float64). The engine's refusals stand around yours: your accumulation loop's loss_fn must
return the sum, as the engine's must. And where exercise 8 is not written, the engine replays the generator around
your exercise 7's recompute, as exercise 8 does: a dropout in the segment draws the forward's masks again, as
mg.checkpoint's does.

Around each record's backward that your tape walk calls, the engine does what its own walk does: it refuses a saved
array written in place since the forward, frees the saved arrays as soon as the record has run, and tells the
ledger. So mg.profile measures your walk as it measures the engine's: the same FLOPs, the same activation bytes
moment by moment. The gradients in flight are your walk's, and the ledger counts each for as long as your walk
holds it: the engine's walk drops a gradient as soon as its last user has run, and makes a leaf's .grad of the
gradient itself where no one else holds it (tensor/tape.py), so the 'transient' and 'gradients' bytes, and the
total's peak, may come out higher under yours (the reference copies every leaf's gradient). So too your checkpoint
(7, 8): it recomputes every op of the segment, and the input's gradient when the input needs none; the engine's
recomputes what backward reads: more 'recompute' and 'backward' FLOPs, counted as they ran. And the arrays that
NumPy makes inside your function the ledger cannot see (as it cannot see those inside one op): your AdamW step's
temporaries are not counted, where the engine's step reports its scratch arrays, so a step's 'transient' peak comes
out lower under yours.

With the references (exercises/solutions) in place, learner mode gives the engine's losses, parameters and
gradients bit for bit, but for two last-bit differences, each the order of the arithmetic: the engine's softmax
adds each row up through the BLAS (backend/rows.py, NOTE [along rows]), in another order than NumPy's sum, which
yours uses; and the engine's Pow takes x ** (p - 1) as PyTorch does where p - 1 is 3, -2 or -0.5 (x * x * x,
1 / (x * x), 1 / sqrt(x): ops/pointwise.py's power), where yours calls NumPy's power. CI checks all of it, on
generated programs too (tests/test_learner.py).

This module sits on top of everything. It changes no class of the engine: it puts each piece in the table the engine
reads (ops.LEARNED, NOTE [learner's pieces] in ops/base.py), and takes it out again when `use` ends; a piece returns
NotImplemented for a call its exercise does not cover, and the engine's own runs. That table is the seam it uses.
"""
import atexit
import contextlib
import importlib
import importlib.util
import os
import sys

import numpy as np

from . import backend, functional, nn, ops, optim
from .backend.random import get_rng_state, set_rng_state
from .ops import base as _base
from .tensor import Tensor, active_profiler, check_saved_versions, is_recomputing, release
from .tensor import tensor as _tensor_factory

# mg.accumulate is the function; this is the module of that name
_accumulate_module = importlib.import_module("minigrad.accumulate")

PIECES = {  # exercise number: what it gives the engine
    1: "elementwise backwards (exp, tanh, log, pow)",
    2: "unbroadcast",
    3: "matmul backward",
    4: "the tape walk (backward)",
    5: "softmax and log_softmax",
    7: "checkpoint (one segment)",
    8: "checkpoint with the generator replayed",
    11: "the accumulation loop",
    12: "the AdamW step",
    14: "the loss scaler's update rule (GradScaler.update)",
}


class Piece:
    """One exercise's part in the engine: whether it is yours, and how often yours ran."""

    def __init__(self, number, module):
        self.number, self.module, self.what = number, module, PIECES[number]
        self.state, self.ran, self.fell_back = "stub", 0, 0  # 'yours', 'stub', 'missing' or 'broken: ...'

    @property
    def yours(self):
        return self.state == "yours"


_active = []    # the Pieces of the use() now in force (one at a time)
_filled = []    # the names this use() put in ops.LEARNED, to take out again


def _load(folder, only=None):
    """Each exercise file NN_*.py in folder (of those numbered in `only`), loaded as a module: {NN: module}."""
    found = {}
    for name in sorted(os.listdir(folder)):
        if name[:2].isdigit() and name.endswith(".py") and int(name[:2]) in PIECES and \
                (only is None or int(name[:2]) in only):
            spec = importlib.util.spec_from_file_location(f"minigrad_learner_{name[:-3]}", os.path.join(folder, name))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            found[int(name[:2])] = module
    return found


def _fill(name, piece):
    """Put the learner's piece in the table the engine reads (NOTE [learner's pieces], ops/base.py)."""
    if name in ops.LEARNED:
        raise RuntimeError(f"learner mode: the engine's table holds a piece for {name!r} already")
    ops.LEARNED[name] = piece
    _filled.append(name)


# ----------------------------------------------------------------------------- the probes: is a piece written?

# NOTE [the probe checks the result]: a probe that only ran a piece let through one that runs but gives the wrong thing
# (an unbroadcast that hands the gradient back unchanged): it was reported as yours, and failed later, inside
# backward, with an error about a gradient's shape that named neither the exercise nor its check. So each probe also
# runs the engine's own on the same inputs and compares: the same shape, the same dtype, and the same values to
# float32 rounding (the engine adds some sums in another order: the module's docstring). A piece that differs is
# left out, as a broken one, and the report says what it gave, what the engine gives, and which check to run.
# Not the loss scaler's rule (14): its result is a scale, not an array that flows on, and a wrong rule is let run,
# for its scales to show what it does (tests/test_learner.py); its probe only asks for a number and a count.

class _Wrong(Exception):
    """A piece ran, but its result is not the engine's (NOTE [the probe checks the result])."""


def _same(what, got, want):
    """`got`, the piece's result for `what`, is the engine's `want` (arrays, or tensors)."""
    got, want = (t.detach().numpy() if isinstance(t, Tensor) else t for t in (got, want))
    if not isinstance(got, np.ndarray) and not np.isscalar(got):
        raise _Wrong(f"{what} gave {type(got).__name__}, not an array; the engine's gives an array of shape "
                     f"{np.shape(want)}")
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        raise _Wrong(f"{what} gave shape {got.shape} ({got.dtype}); the engine's gives shape {want.shape} "
                     f"({want.dtype})")
    if not np.allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True):
        at = np.unravel_index(np.argmax(np.abs(got.astype(np.float64) - want)), got.shape) if got.ndim else ()
        raise _Wrong(f"{what} gave {got[at]!r} at index {tuple(int(i) for i in at)}; the engine's gives {want[at]!r}")


def _engine_op(cls, *arrays, g, **attrs):
    """The engine's op `cls` on arrays: its backward's first gradient for g (its forward's output as well)."""
    op = cls()
    op.needs_input_grad = (True,) * len(arrays)
    out = op.forward(*arrays, **attrs)
    return out, op.backward(g)


def _probe(piece):
    """Run the piece once on tiny inputs, and the engine's own on the same (NOTE [the probe checks the result]).
    NotImplementedError: a stub. Anything else, or a result that is not the engine's: broken (check N says why)."""
    m, x = piece.module, np.array([[0.5, 1.5, 2.0], [1.0, 0.25, 3.0]], dtype=np.float32)
    g = np.array([[1.0, -2.0, 0.5], [3.0, 1.5, -1.0]], dtype=np.float32)  # not all ones: a wrong sum shows
    state = get_rng_state()
    try:
        if piece.number == 1:
            for cls, attrs in ((m.Exp, {}), (m.Tanh, {}), (m.Log, {}), (m.Pow, {"exponent": 3})):
                op = cls()
                op.needs_input_grad = (True,)
                op.forward(x, **attrs)
                _same(f"{cls.__name__}.backward", op.backward(g)[0],
                      _engine_op(getattr(ops, cls.__name__), x, g=g, **attrs)[1][0])
        elif piece.number == 2:
            for grad, shape in ((np.arange(12, dtype=np.float32).reshape(2, 2, 3), (1, 3)), (g, (3,)), (g, (2, 1)),
                                (g, (2, 3))):
                _same(f"unbroadcast(a gradient of shape {grad.shape}, {shape})", m.unbroadcast(grad.copy(), shape),
                      _base.unbroadcast(grad, shape))
        elif piece.number == 3:
            a, b, gy = x.reshape(1, 2, 3) * [[[1.0]], [[-0.5]]], x.T.copy()[:, :2] * 0.5, np.ones((2, 2, 2), np.float32)
            a, gy = a.astype(np.float32), gy * [[1.0, -1.0]]
            want = _engine_op(ops.Matmul, a, b, g=gy.astype(np.float32))[1]
            for k, (got, w) in enumerate(zip(m.matmul_backward(gy.astype(np.float32), a, b), want)):
                _same(f"matmul_backward(g, a, b)'s gradient of {'ab'[k]} (a {a.shape}, b {b.shape})", got, w)
        elif piece.number == 4:
            leaf = _tensor_factory(x, requires_grad=True)
            m.backward((leaf * leaf).sum())
            _same("backward((x * x).sum()): x.grad", leaf.grad, 2 * x)
        elif piece.number == 5:
            for cls in (m.Softmax, m.LogSoftmax):
                op = cls()
                op.needs_input_grad = (True,)
                y = op.forward(x, dim=-1)
                engine_y, engine_g = _engine_op(getattr(ops, cls.__name__), x, g=g, dim=-1)
                _same(f"{cls.__name__}.forward", y, engine_y)
                _same(f"{cls.__name__}.backward", op.backward(g)[0], engine_g[0])
        elif piece.number in (7, 8):
            lin, mine = nn.Linear(3, 2), _tensor_factory(x, requires_grad=True)
            (m.my_checkpoint(lin, mine) * _tensor_factory(g[:, :2])).sum().backward()
            got = [mine.grad] + [p.grad for p in lin.parameters()]
            lin.zero_grad()
            plain = _tensor_factory(x, requires_grad=True)
            (lin(plain) * _tensor_factory(g[:, :2])).sum().backward()
            for what, a, b in zip(("the input's", "the weight's", "the bias's"), got, [plain.grad] +
                                  [p.grad for p in lin.parameters()]):
                _same(f"my_checkpoint(Linear(3, 2), x): {what} gradient", a, b)
        elif piece.number == 11:
            model, target = nn.Linear(3, 2), _tensor_factory(g[:, :2])
            m.accumulate_step(model, lambda out, y: ((out - y) ** 2).sum(), _tensor_factory(x), target, 1)
            got = [p.grad for p in model.parameters()]
            model.zero_grad()
            (((model(_tensor_factory(x)) - target) ** 2).sum() * (1.0 / target.numel())).backward()
            for what, a, p in zip(("weight", "bias"), got, model.parameters()):
                _same(f"accumulate_step(Linear(3, 2), ...) in micro-batches of 1: the {what}'s gradient", a, p.grad)
        elif piece.number == 12:
            p, engine = [x.copy()], _tensor_factory(x.copy(), requires_grad=True)
            m.adamw_step(p, [g.copy()], m.init_state(p), 1e-3, (0.9, 0.999), 1e-8, 0.01, 1)
            engine.grad = _tensor_factory(g)
            optim.AdamW([engine], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01).step()
            _same("adamw_step (step 1, weight_decay 0.01): the parameter", p[0], engine)
        elif piece.number == 14:  # a number and a count, whatever their values: a wrong rule runs, and shows
            scale, tracker = m.update_scale(np.float32(2.0 ** 16), 0, False, 2.0, 0.5, 2000)
            float(scale), int(tracker)  # a TypeError or ValueError if they are not
    except NotImplementedError as e:
        return _stub(piece, e)
    except _Wrong as e:
        return (f"broken: exercise {piece.number}'s {e}: backward would go wrong later, far from it "
                f"(python -m minigrad check {piece.number})")
    except Exception as e:  # noqa: BLE001 a learner's bug, of any kind: reported, and the engine's own runs
        return f"broken: {type(e).__name__}: {str(e)[:120]} (python -m minigrad check {piece.number})"
    finally:
        set_rng_state(state)
    return "yours"


def _stub(piece, error):
    """'stub', or, where the NotImplementedError came from another exercise's file (exercise 8 builds on exercise
    7's record), which one: the piece itself may be written."""
    tb, mine = error.__traceback__, os.path.abspath(piece.module.__file__)
    while tb.tb_next is not None:
        tb = tb.tb_next
    raised_in = os.path.abspath(tb.tb_frame.f_code.co_filename)
    name = os.path.basename(raised_in)
    if raised_in != mine and os.path.dirname(raised_in) == os.path.dirname(mine) and name[:2].isdigit():
        return f"stub: it builds on exercise {int(name[:2])}, not written yet: python -m minigrad check {int(name[:2])}"
    return "stub"


# ----------------------------------------------------------------------------- each piece, plugged in

def _two_bytes(array):
    """A 2-byte float (float16, bfloat16): the engine computes its sums, products and softmax in float32 and rounds
    once, as PyTorch (NOTE [2-byte sums], backend/rows.py); the exercises are written and graded in float32 and
    float64, so there the engine's own runs."""
    return backend.accumulator(array.dtype) is not None


def _plug_elementwise(piece):
    for name in ("Exp", "Tanh", "Log", "Pow"):
        mine = getattr(piece.module, name).backward

        def backward(self, g, _mine=mine, name=name):
            # the engine's own where its gradient is not the formula's: norm's and std's 0 at 0 (zero_at_zero), and
            # x ** 0's, 0 everywhere (the formula's 0 * x ** -1 is NaN at 0); and where a bfloat16 x ** p with a
            # Python float p gives float32 (the engine rounds it back): a 2-byte Pow, computed as the engine does;
            # and a 2-byte Tanh, whose g (1 - y^2) the engine computes in float32 and rounds once (the formula in
            # 2 bytes rounds three times)
            if getattr(self, "zero_at_zero", False) or getattr(self, "exponent", 1) == 0 or \
                    (name in ("Pow", "Tanh") and _two_bytes(self.saved[0])):
                piece.fell_back += 1
                return NotImplemented
            piece.ran += 1
            return tuple(_mine(self, g))
        _fill(f"{name}.backward", backward)


def _plug_unbroadcast(piece):
    mine = piece.module.unbroadcast

    def unbroadcast(grad, shape):
        if _two_bytes(grad):
            piece.fell_back += 1
            return NotImplemented
        piece.ran += 1
        return mine(grad, tuple(shape))
    _fill("unbroadcast", unbroadcast)


def _plug_matmul(piece):
    mine = piece.module.matmul_backward

    def backward(self, g):
        a, b = self.saved
        # the engine's own where one input needs no gradient, a vector, or a batch of matrices times one matrix:
        # there the engine folds the batch into one GEMM for b's gradient (ops/linear.py), which adds in another
        # order than a sum of the batch's products does; and a 2-byte float (bfloat16's @ gives float32)
        if a is None or b is None or a.ndim < 2 or b.ndim < 2 or (b.ndim == 2 and a.ndim > 2) or _two_bytes(g):
            piece.fell_back += 1
            return NotImplemented
        piece.ran += 1
        ga, gb = mine(g, a, b)
        na, nb = self.needs_input_grad
        return (ga if na else None, gb if nb else None)
    _fill("Matmul.backward", backward)


def _records(root):
    """The records root depends on, or None where the learner's walk does not apply (NOTE below)."""
    found, stack, seen = [], [root._ctx], set()
    while stack:
        r = stack.pop()
        if id(r) in seen:
            continue
        seen.add(id(r))
        if r.released or r.runs_once or r.retained is not None or r.name in ("checkpoint", "checkpoint_output") \
                or r.packed is not None:  # made in a checkpoint's forward (keep_saved(False)'s pair), or
            return None  # under saved-tensor hooks (which the engine's walk unpacks): the engine's walk says what to do
        found.append(r)
        for n in r.next:
            if isinstance(n, ops.Op):
                stack.append(n)
            elif n is not None and (not n._requires_grad or (n._grad is not None and n._grad.dtype != n.dtype)):
                # a leaf that stopped requiring grad after the forward (the engine's walk skips it, as PyTorch's), or
                # whose .grad is a buffer of another dtype (accumulate's float32 for a float16 weight, which the
                # engine adds into): the exercise's contract gives every leaf a .grad in its own dtype
                return None
    return found


def _plug_tape(piece):
    mine = piece.module.backward

    def backward(self, gradient=None, retain_graph=False):
        # The learner's walk takes a scalar root and nothing else (exercise 4's contract); the engine's own takes
        # the rest, and a graph with records the exercise does not know (a checkpoint's, one already run, a
        # retain_grad).
        records = None
        if gradient is None and not retain_graph and self._ctx is not None and self._data.size == 1 \
                and not is_recomputing():
            records = _records(self)
        if records is None:
            piece.fell_back += 1
            return NotImplemented
        piece.ran += 1
        profiler = active_profiler()
        for r in records:  # each record's backward, as the engine's walk runs it (below)
            r.backward = _as_the_engine_runs_it(r, profiler)
        try:
            mine(self)
        finally:
            for r in records:
                del r.backward  # the op's own again
                if not r.released:
                    release(r)  # no gradient reached it: freed all the same, as the engine's walk frees the tape
    _fill("Tensor.backward", backward)


def _as_the_engine_runs_it(record, profiler):
    """record.backward, with what the engine's walk (tensor/tape.py, _run_tape) does around it: refuse a saved array
    written in place since the forward (NOTE [version counters]), free the saved arrays as soon as it has run (NOTE
    [memory drains]), and tell the ledger (NOTE [what the tape reports]). So your walk is measured as the engine's."""
    run = type(record).backward

    def backward(g):
        clock = profiler.start_clock() if profiler is not None else None
        check_saved_versions(record)  # NOTE [version counters]: the check the engine's walk makes first
        input_grads = tuple(run(record, g))
        if profiler is not None:  # before release, as the engine's walk (the gradients and the saved arrays: a peak)
            input_grads = tuple(backend.as_array(gi) for gi in input_grads)
            profiler.on_backward(record, g, input_grads, True)
        release(record)
        if profiler is not None:
            profiler.stop_clock(clock, record.name, "backward")
        return input_grads
    return backward


def _plug_softmax(piece):
    for name in ("Softmax", "LogSoftmax"):
        mine = getattr(piece.module, name)

        def forward(self, x, dim, keep_input=False, _mine=mine.forward):
            self.yours = not keep_input and not _two_bytes(x)  # keep_input (the older software's memory), or a
            # 2-byte x, which the engine's softmax computes in float32 and rounds once: the engine's own
            if not self.yours:
                piece.fell_back += 1
                return NotImplemented
            _base.normalize_dim(self.name, dim, x.ndim, x.shape)  # the engine's refusals: a dim out of range, a tuple
            piece.ran += 1
            return _mine(self, x, dim)

        def backward(self, g, _mine=mine.backward):
            return tuple(_mine(self, g)) if self.yours else NotImplemented
        _fill(f"{name}.forward", forward)
        _fill(f"{name}.backward", backward)


class _Replayed(nn.Module):
    """The module that exercise 7's checkpoint gets: its first call (the forward) notes the generator's state, and each
    later one (a recompute) runs from that state and puts the generator back. Exercise 8's replay, which exercise 7
    does not ask for: without it a dropout in the segment draws other masks in the recompute than in the forward,
    and the gradients come out wrong without a word (mg.checkpoint replays, as PyTorch's, preserve_rng_state=True)."""

    def __init__(self, module):
        super().__init__()
        self.module, self.state = module, None  # module.parameters(), in their order, are the segment's

    def forward(self, x):
        if self.state is None:
            self.state = get_rng_state()
            return self.module(x)
        outer = get_rng_state()
        set_rng_state(self.state)
        try:
            return self.module(x)
        finally:
            set_rng_state(outer)


def _plug_checkpoint(piece):
    mine = piece.module.my_checkpoint

    def checkpoint(function, args, plain):
        # exercises 7 and 8: one module on one tensor; an option, several arguments, a function: the engine's own
        # (segment.checkpoint asks; `plain`: no option but use_reentrant, and no keyword argument for the function)
        if not (plain and isinstance(function, nn.Module) and len(args) == 1 and isinstance(args[0], Tensor)
                and not is_recomputing()):
            piece.fell_back += 1
            return NotImplemented
        piece.ran += 1
        return mine(_Replayed(function) if piece.number == 7 else function, args[0])
    _fill("checkpoint", checkpoint)


def _plug_accumulation(piece):
    mine = piece.module.accumulate_step

    def accumulation_step(model, loss_fn, optimizer, inputs=None, targets=None, **kwargs):
        # exercise 11: micro-batches of a size, padding by ignore_index, the optimizer of the model's parameters;
        # not float16 parameters, whose gradients the engine's sums in float32 buffers (accumulate.py)
        mine_too = (inputs is not None and targets is not None and "micro_batch_size" in kwargs
                    and not kwargs.keys() - {"micro_batch_size", "ignore_index"}
                    and {id(p) for g in optimizer.param_groups for p in g["params"]} ==
                    {id(p) for p in model.parameters()}
                    and all(p.dtype.name != "float16" for p in model.parameters()))
        if not mine_too:
            piece.fell_back += 1
            return NotImplemented
        piece.ran += 1
        size, ignore = kwargs["micro_batch_size"], kwargs.get("ignore_index", -100)
        acc = _accumulate_module  # the result as the engine's accumulate reports it, counted by its own helpers

        def summed(output, target):  # the engine's refusal of a loss_fn that averaged its micro-batch (its gradient
            with functional.loss_items() as said:  # would come out too small by the number of micro-batches)
                loss = loss_fn(output, target)
            acc._check_summed(loss, acc.count_items(target, ignore), target, said=said)
            return loss
        loss = mine(model, summed, inputs, targets, size, ignore)
        optimizer.step()
        return acc.AccumulationResult(loss=float(loss), items=acc.count_items(targets, ignore),
                                      micro_batches=len(acc.micro_batch_slices(inputs.shape[0], size)),
                                      grad_dtype=str(next(iter(model.parameters())).dtype))
    _fill("accumulation_step", accumulation_step)


def _plug_adamw(piece):
    # AdamW.step asks the table from inside the wrapper every optimizer's step has (optimizer.py's _reported), so
    # the ledger hears the step once, whoever's runs
    mine, init = piece.module.adamw_step, piece.module.init_state

    def step(self):
        # amsgrad, maximize, or a 2-byte parameter (NumPy's bfloat16 times a Python float is float32: your products
        # would round otherwise than the engine's, which rounds each to the parameter's dtype): the engine's own
        if any(g["amsgrad"] or g["maximize"] or any(_two_bytes(p._data) for p in g["params"])
               for g in self.param_groups):
            piece.fell_back += 1
            return NotImplemented
        piece.ran += 1
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            for p, fresh in zip(params, init([p._data for p in params])):
                self.state.setdefault(p, {}).setdefault("exp_avg", fresh["exp_avg"])
                self.state[p].setdefault("exp_avg_sq", fresh["exp_avg_sq"])
            by_step = {}  # each parameter counts its own steps, as in PyTorch: those at the same count go together
            for p in params:
                self.state[p]["step"] = self.state[p].get("step", 0) + 1
                by_step.setdefault(self.state[p]["step"], []).append(p)
            for t, ps in by_step.items():
                mine([p._data for p in ps], [p.grad._data for p in ps], [self.state[p] for p in ps], group["lr"],
                     group["betas"], group["eps"], group["weight_decay"], t)
    _fill("AdamW.step", step)


def _plug_scaler(piece):
    mine = piece.module.update_scale

    def amp_update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
        # exercise 14's contract is the engine's: the same arguments, (float32 scale, tracker) back
        piece.ran += 1
        new_scale, tracker = mine(np.float32(scale), int(growth_tracker), bool(found_inf), growth_factor,
                                  backoff_factor, growth_interval)
        return np.float32(new_scale), int(tracker)
    _fill("amp_update_scale", amp_update_scale)


_PLUGS = {1: _plug_elementwise, 2: _plug_unbroadcast, 3: _plug_matmul, 4: _plug_tape, 5: _plug_softmax,
          7: _plug_checkpoint, 8: _plug_checkpoint, 11: _plug_accumulation, 12: _plug_adamw, 14: _plug_scaler}


# ----------------------------------------------------------------------------- turning it on and off

def enable(folder="exercises", only=None):
    """Plug in every piece of the learner's exercises in `folder` that is written (or those of them numbered in
    `only`); returns the Pieces."""
    if _active:
        raise RuntimeError("learner mode is already on; mg.learner.disable() first")
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"learner mode: no folder {folder!r} with your exercise files (01_...py to 14_...py); "
                                f"run from the repository's root, or name the folder (MINIGRAD_LEARNER_ENGINE=path)")
    pieces = {n: Piece(n, m) for n, m in _load(folder, only).items()}
    for n in PIECES:
        if n not in pieces and (only is None or n in only):
            pieces[n] = Piece(n, None)
            pieces[n].state = "missing"
    for n in sorted(pieces):
        if pieces[n].module is not None:
            pieces[n].state = _probe(pieces[n])
    # exercise 8's checkpoint is exercise 7's with the generator replayed: it takes over
    if 8 in pieces and 7 in pieces and pieces[8].yours:
        pieces[7].state = "replaced by exercise 8"
    for n in sorted(pieces):
        if pieces[n].yours:
            _PLUGS[n](pieces[n])
    _active.extend(pieces[n] for n in sorted(pieces))
    return list(_active)


def disable():
    """Take the learner's pieces out of the engine's table."""
    while _filled:
        del ops.LEARNED[_filled.pop()]
    _active.clear()


@contextlib.contextmanager
def use(folder="exercises", only=None):
    """with mg.learner.use(folder): the block runs on the learner's pieces (enable, then disable)."""
    pieces = enable(folder, only)
    try:
        yield pieces
    finally:
        disable()


def report(pieces=None):
    """Whose piece ran, and how often: one line per exercise."""
    lines = ["learner mode: the engine ran on your pieces where they are written"]
    for p in pieces or _active:
        if p.yours:
            lines.append(f"  exercise {p.number:2d} {p.what}: yours, ran {p.ran} times" +
                         (f" (the engine's own {p.fell_back} times, for what the exercise does not cover)"
                          if p.fell_back else ""))
        else:
            lines.append(f"  exercise {p.number:2d} {p.what}: the engine's own ({p.state})")
    return "\n".join(lines)


def _from_environment():
    """MINIGRAD_LEARNER_ENGINE=folder (or 1, for ./exercises): on from import on, with the report at exit."""
    folder = os.environ.get("MINIGRAD_LEARNER_ENGINE", "")
    if folder in ("", "0"):
        return
    enable("exercises" if folder == "1" else folder)
    atexit.register(_report_at_exit)


def _report_at_exit():
    if any(p.ran or p.fell_back for p in _active):  # a process that ran nothing (a helper process) says nothing
        print(report(), file=sys.stderr)
