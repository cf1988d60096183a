"""mg.autograd.graph.saved_tensors_hooks and save_on_cpu (NOTE [saved tensors hooks], minigrad/autograd/graph.py),
against PyTorch's where it is installed: which tensors are packed, how often and in which order, nesting, a pack
hook that returns another object, hooks around a checkpoint, retain_graph, release; gradients bit for bit; the
ledger (NOTE [what a pack hook keeps], minigrad/profiler/ledger.py); and a checkpoint written with the hooks alone,
in the style of PyTorch's docs, whose gradients are the engine's checkpoint's bit for bit."""
import contextlib
import gc
import inspect
import weakref

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.autograd.graph import save_on_cpu, saved_tensors_hooks
from minigrad.tensor import OpMode, recomputing

# ----------------------------------------------------------------------------- the same programs in both libraries

# Each program is a list of steps; each step is one op on the tensors named so far (x, w: 3x3 leaves needing
# gradients, c: one that does not) and names its result. The log marks where each step begins, so the packs are
# compared step by step: within one op the order of its saved tensors is the op's own (minigrad's Mul saves (a, b),
# PyTorch's MulBackward0 (other, self)), across ops it is the order they ran in.
PROGRAMS = {
    "mul": [("y", lambda v: v["x"] * v["w"])],
    "mul by a constant": [("y", lambda v: v["x"] * v["c"])],
    "sin": [("y", lambda v: v["x"].sin())],
    "matmul": [("y", lambda v: v["x"] @ v["w"])],
    "exp (saves its output)": [("y", lambda v: v["x"].exp())],
    "tanh (saves its output)": [("y", lambda v: v["x"].tanh())],
    "relu": [("y", lambda v: v["x"].relu())],
    "sigmoid": [("y", lambda v: v["x"].sigmoid())],
    "a tensor saved twice": [("y", lambda v: v["x"] * v["x"])],
    "a chain": [("h", lambda v: v["x"] * v["w"]), ("t", lambda v: v["h"].tanh()), ("y", lambda v: v["t"] @ v["w"])],
}
STEPS = {"x": np.random.default_rng(0).standard_normal((3, 3)), "w": np.random.default_rng(1).standard_normal((3, 3)),
         "c": np.random.default_rng(2).standard_normal((3, 3))}


def host(t):
    return t.detach().cpu().numpy()


def _run(lib, program, hooks=True):
    """Run a program under logging hooks in minigrad (lib=mg) or PyTorch. Returns the packs of each step (sorted:
    (name, requires_grad) of each tensor packed), the unpacks in order (step, name), and the leaves' gradients. A
    tensor is named by identity with those the program made (an op's output once the step has named it), else
    'new' (an array of the op's own)."""
    v = {k: (mg.tensor(a, dtype="float64", requires_grad=k != "c") if lib is mg else
             lib.tensor(a, dtype=lib.float64, requires_grad=k != "c")) for k, a in STEPS.items()}
    packs, unpacks, step = [], [], [None]

    def name(t):
        return next((k for k, u in v.items() if u is t), "new")

    def pack(t):
        packs[-1].append(t)
        return step[0], t, t.detach()  # the tensor itself too, only to name it at unpack

    def unpack(p):
        unpacks.append((p[0], name(p[1])))
        return p[2]

    pair = (saved_tensors_hooks if lib is mg else lib.autograd.graph.saved_tensors_hooks)(pack, unpack)
    with pair if hooks else contextlib.nullcontext():
        for out, f in program:
            packs.append([])
            step[0] = out
            v[out] = f(v)
    packs = [sorted((name(t), bool(t.requires_grad)) for t in p) for p in packs]
    v["y"].sum().backward()
    grads = [v[k].grad for k in ("x", "w")]
    return packs, unpacks, [None if g is None else host(g) if lib is mg else g.numpy() for g in grads]


@pytest.mark.parametrize("program", PROGRAMS, ids=list(PROGRAMS))
def test_the_same_tensors_are_packed_and_unpacked_as_in_pytorch(program):
    torch = pytest.importorskip("torch")
    ours, theirs = _run(mg, PROGRAMS[program]), _run(torch, PROGRAMS[program])
    assert ours[0] == theirs[0], "packed, step by step"
    assert [s for s, _ in ours[1]] == [s for s, _ in theirs[1]], "unpacked: each record's arrays, newest record first"
    assert sorted(ours[1]) == sorted(theirs[1]), "unpacked: the same tensors"
    plain = _run(mg, PROGRAMS[program], hooks=False)[2]
    for a, b, p in zip(ours[2], theirs[2], plain):
        assert (a is None) == (b is None) == (p is None)
        if a is not None:
            np.testing.assert_array_equal(a, p)  # the hooks change nothing, bit for bit
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)  # and it is PyTorch's gradient


def test_a_saved_input_or_output_is_the_tensor_the_user_holds():
    x = mg.randn(3, requires_grad=True)
    seen = []
    with saved_tensors_hooks(lambda t: seen.append(t) or t.detach(), lambda t: t):
        y = x.sin()
        z = y.exp()
    assert seen[0] is x and seen[1] is z  # sin saves its input, exp its output: the tensors themselves
    assert x.requires_grad and seen[1].requires_grad and seen[1].grad_fn is z.grad_fn


def test_an_array_of_the_ops_own_comes_as_a_new_tensor():
    """LayerNorm keeps its rstd: pack sees it as a tensor that needs no gradient, as PyTorch's sees mean and rstd."""
    x = mg.randn(2, 4, requires_grad=True)
    seen = []
    with saved_tensors_hooks(lambda t: seen.append(t) or t, lambda t: t):
        y = mg.functional.layer_norm(x, (4,))
    own = [t for t in seen if t is not x and t is not y]
    assert own and all(isinstance(t, mg.Tensor) and not t.requires_grad and t.grad_fn is None for t in own)


def test_grad_mode_is_off_in_both_hooks_as_in_pytorch():
    x = mg.randn(3, requires_grad=True)
    modes = []

    def pack(t):
        modes.append(mg.is_grad_enabled())
        return t * 2  # an op inside the hook: not recorded, so not packed again

    with saved_tensors_hooks(pack, lambda t: modes.append(mg.is_grad_enabled()) or t / 2):
        y = (x * x).sum()
    y.backward()
    assert modes == [False] * 4
    np.testing.assert_allclose(host(x.grad), 2 * host(x))


def test_nothing_is_packed_where_nothing_is_recorded():
    x, c = mg.randn(3, requires_grad=True), mg.randn(3)
    log = []
    with saved_tensors_hooks(lambda t: log.append(t) or t, lambda t: t):
        with mg.no_grad():
            x * x
        c * c  # no input needs a gradient
        (x + c).sum()  # add and sum save nothing
    assert log == []


def test_the_innermost_pair_wins_and_the_outer_one_comes_back():
    x = mg.randn(3, requires_grad=True)
    log = []
    outer = saved_tensors_hooks(lambda t: log.append("outer") or t, lambda t: log.append("outer unpack") or t)
    inner = saved_tensors_hooks(lambda t: log.append("inner") or t, lambda t: log.append("inner unpack") or t)
    with outer:
        with inner:
            a = x * x
        b = x.sin()
    c = x.exp()
    assert log == ["inner", "inner", "outer"]
    (a + b + c).sum().backward()
    assert sorted(log[3:]) == ["inner unpack", "inner unpack", "outer unpack"]  # each record unpacks with its own


def test_nesting_is_pytorchs():
    torch = pytest.importorskip("torch")
    logs = []
    for lib, hooks in ((mg, saved_tensors_hooks), (torch, torch.autograd.graph.saved_tensors_hooks)):
        x = lib.ones(3, requires_grad=True)
        log = []
        with hooks(lambda t: log.append("outer") or t, lambda t: t):
            with hooks(lambda t: log.append("inner") or t, lambda t: t):
                x * x
                with hooks(lambda t: log.append("innermost") or t, lambda t: t):
                    x.sin()
                x.exp()
            x.cos()
        logs.append(log)
    assert logs[0] == logs[1] == ["inner", "inner", "innermost", "inner", "outer"]


# ----------------------------------------------------------------------------- what the record holds

class Box:
    """A packed object that a weak reference can follow."""

    def __init__(self, array):
        self.array = array


def test_a_pack_hook_may_return_any_object_and_unpack_gets_exactly_it():
    x, w = mg.randn(4, 3, requires_grad=True), mg.randn(3, 2, requires_grad=True)
    packed, given = [], []

    def pack(t):  # a tuple holding a NumPy copy: no tensor, no reference to t
        p = (t.shape, t.detach().numpy().copy())
        packed.append(p)
        return p

    def unpack(p):
        given.append(p)
        return mg.tensor(p[1], device=x.device)

    with saved_tensors_hooks(pack, unpack):
        loss = (x @ w).tanh().sum()
    loss.backward()
    assert len(packed) == 3 and all(a is b for a, b in zip(sorted(packed, key=id), sorted(given, key=id)))
    gx, gw = host(x.grad), host(w.grad)
    x.grad = w.grad = None
    (x @ w).tanh().sum().backward()
    np.testing.assert_array_equal(gx, host(x.grad))
    np.testing.assert_array_equal(gw, host(w.grad))


@pytest.mark.parametrize("lib_name", ["minigrad", "torch"])
def test_release_drops_the_packed_objects_after_backward(lib_name):
    lib = mg if lib_name == "minigrad" else pytest.importorskip("torch")
    hooks = saved_tensors_hooks if lib is mg else lib.autograd.graph.saved_tensors_hooks
    x = lib.ones(3, requires_grad=True)
    boxes = []

    def pack(t):
        b = Box(t.detach())
        boxes.append(weakref.ref(b))
        return b

    with hooks(pack, lambda b: b.array):
        y = (x * x).exp().sum()
    gc.collect()
    assert all(r() is not None for r in boxes) and len(boxes) == 3  # the records hold them
    y.backward()
    assert all(r() is None for r in boxes)  # dropped with the saved arrays, no collector needed


@pytest.mark.parametrize("lib_name", ["minigrad", "torch"])
def test_retain_graph_unpacks_again_on_the_second_backward(lib_name):
    lib = mg if lib_name == "minigrad" else pytest.importorskip("torch")
    hooks = saved_tensors_hooks if lib is mg else lib.autograd.graph.saved_tensors_hooks
    x = lib.ones(3, requires_grad=True)
    log = []
    with hooks(lambda t: log.append("pack") or t.detach(), lambda t: log.append("unpack") or t):
        y = (x * x).sum()
    y.backward(retain_graph=True)
    assert log == ["pack"] * 2 + ["unpack"] * 2
    y.backward()
    assert log == ["pack"] * 2 + ["unpack"] * 4
    assert x.grad.tolist() == [4.0, 4.0, 4.0]
    with pytest.raises(RuntimeError):
        y.backward()  # released: the packed objects too


def test_a_record_keeps_no_array_under_hooks_and_none_after_backward():
    x = mg.randn(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: t.detach(), lambda t: t):
        y = x.exp()
    record = y.grad_fn
    assert record.saved == () and record.packed is not None
    y.sum().backward()
    assert record.saved == () and record.packed is None


def test_version_counters_still_refuse_a_write_since_the_forward():
    """PyTorch leaves a pair's saved tensors to the hooks (and so computes this gradient at the new values); minigrad
    still refuses, since a pack that returns t.detach() shares t's storage (NOTE [saved tensors hooks])."""
    a = mg.randn(3, requires_grad=True)
    x = a * 1
    with saved_tensors_hooks(lambda t: t.detach(), lambda t: t):
        y = (x * x).sum()
    with mg.no_grad():
        x.add_(1)
    with pytest.raises(RuntimeError, match=r"'mul' saved its input 0 .* modified in place"):
        y.backward()


# ----------------------------------------------------------------------------- around a checkpoint

def _chain(x, w):
    return (x * w).tanh() @ w


def test_hooks_around_a_checkpoint_see_its_inputs_only_as_pytorchs_do():
    """PyTorch's non-reentrant checkpoint packs the segment's records with its own pair, in the forward and in the
    recompute, so the user's pair sees only the inputs the checkpoint saves; minigrad's keeps nothing inside and
    recomputes with no pair (NOTE [saved tensors hooks])."""
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint
    logs, grads = [], []
    for lib, hooks, ckpt in ((mg, saved_tensors_hooks, mg.checkpoint),
                             (torch, torch.autograd.graph.saved_tensors_hooks,
                              lambda f, *a: torch_checkpoint(f, *a, use_reentrant=False))):
        x = lib.tensor(STEPS["x"], dtype=lib.float64, requires_grad=True)
        w = lib.tensor(STEPS["w"], dtype=lib.float64, requires_grad=True)
        names = {id(x): "x", id(w): "w"}
        log = []
        with hooks(lambda t: log.append(("pack", names.get(id(t), "other"))) or t.detach(),
                   lambda t: log.append(("unpack", names.get(id(t._base if lib is torch and t._base is not None
                                                                   else t), "?"))) or t):
            y = ckpt(_chain, x, w).sum()
            y.backward()  # the recompute runs inside the pair too
        logs.append([e[0] for e in log] + [e[1] for e in log if e[0] == "pack"])
        grads.append((x.grad.detach().cpu().numpy(), w.grad.detach().cpu().numpy()))
    assert logs[0] == logs[1] == ["pack", "pack", "unpack", "unpack", "x", "w"]
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("policy", [None, "dots_saveable"])
def test_a_pair_entered_inside_a_checkpointed_function_leaves_the_checkpoints_pair_on(policy):
    """The checkpoint's own pairs (keep_saved(False) in its forward, keep_saved(True) in its recompute) stay the
    innermost: a pair that the function enters packs nothing in either (NOTE [saved tensors hooks]); the gradients
    and the memory are those of the checkpoint without it. (In PyTorch the inner pair would win in the forward, and
    keep what the checkpoint drops.)"""
    log = []

    def block(x, w):
        with saved_tensors_hooks(lambda t: log.append("pack") or t, lambda t: log.append("unpack") or t):
            return _chain(x, w)

    results = []
    for function in (block, _chain):
        x = mg.tensor(STEPS["x"], dtype=mg.float64, requires_grad=True)
        w = mg.tensor(STEPS["w"], dtype=mg.float64, requires_grad=True)
        with mg.profile() as prof:
            y = mg.checkpoint(function, x, w, policy=policy and getattr(mg.checkpoint_policies, policy)).sum()
            y.backward()
        results.append((x.grad.numpy(), w.grad.numpy(), prof.peak_bytes("activations"), prof.peak_bytes()))
    assert log == []
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    x = mg.tensor(STEPS["x"], dtype=mg.float64, requires_grad=True)
    with saved_tensors_hooks(lambda t: log.append("pack") or t, lambda t: t):  # outside any checkpoint it packs
        _chain(x, x)
    assert log


@pytest.mark.parametrize("policy", [None, "dots_saveable"])
def test_a_checkpoint_under_hooks_gives_the_plain_gradients_bit_for_bit(policy):
    """Its record packs its inputs (and, with a policy, the outputs it remembers), and unpacks them in backward."""
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.LayerNorm(16), nn.Linear(16, 4))
    x = mg.randn(5, 8, requires_grad=True)
    model(x).square().sum().backward()
    plain = [host(p.grad) for p in model.parameters()] + [host(x.grad)]
    model.zero_grad()
    x.grad = None
    log = []
    with saved_tensors_hooks(lambda t: log.append("pack") or (t.detach(),), lambda p: log.append("unpack") or p[0]):
        loss = mg.checkpoint(model, x, policy=policy and getattr(mg.checkpoint_policies, policy)).square().sum()
        loss.backward()
    assert log.count("pack") == log.count("unpack") >= 2  # x, and square's input
    for a, b in zip(plain, [host(p.grad) for p in model.parameters()] + [host(x.grad)]):
        np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- a checkpoint built from the seam alone

class _Holder:
    """What the forward's records hold: nothing, until the recompute fills it."""
    tensor = None


def hook_checkpoint(function, *args):
    """Non-reentrant checkpointing in the style of PyTorch's docs and torch/utils/checkpoint.py (_checkpoint_hook,
    _recomputation_hook), written only with saved_tensors_hooks: the forward's pack returns an empty holder and
    keeps nothing; the first unpack runs the function again on the same inputs under a pair of its own, whose k-th
    pack fills the k-th holder; every unpack then hands back its holder's tensor."""
    holders = []

    def pack(t):
        holder = _Holder()
        holders.append(weakref.ref(holder))  # weak: a holder the graph dropped is not filled
        return holder

    def recompute():
        counter = iter(range(len(holders)))

        def fill(t):
            holder = holders[next(counter)]()
            if holder is not None:
                holder.tensor = t.detach()

        def never(_):
            raise AssertionError("the recompute's records are never run")

        inputs = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, mg.Tensor) else a for a in args]
        with mg.enable_grad(), saved_tensors_hooks(fill, never):
            function(*inputs)

    def unpack(holder):
        if holder.tensor is None:
            recompute()
        return holder.tensor

    with saved_tensors_hooks(pack, unpack):
        return function(*args)


def test_a_checkpoint_written_with_hooks_gives_the_engines_checkpoint_gradients_bit_for_bit():
    def grads(run):
        mg.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 32), nn.Tanh(),
                              nn.Linear(32, 3))
        x = mg.randn(6, 8, requires_grad=True)
        with mg.profile() as prof:
            out = run(model, x)
            kept = prof.current_bytes("activations")  # after the forward: what the records keep
            mg.functional.cross_entropy(out, mg.tensor([0, 1, 2, 0, 1, 2], device=x.device)).backward()
        return [host(p.grad) for p in model.parameters()] + [host(x.grad)], kept

    plain, plain_kept = grads(lambda m, x: m(x))
    engine, _ = grads(lambda m, x: mg.checkpoint(m, x))
    hooked, hooked_kept = grads(lambda m, x: hook_checkpoint(m, x))
    for p, a, b in zip(plain, engine, hooked):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(p, b)
    assert plain_kept > 0 and hooked_kept == 0  # the holders keep nothing (NOTE [what a pack hook keeps])


class _Slot:
    """What a forward record holds under frugal_checkpoint: a tensor, at once where the forward's lives on anyway
    (an argument, a parameter), at the checkpoint's exit (an output), or when its recompute fills it."""
    tensor = None


class _Stop(Exception):
    pass


class _StopWhenFilled(OpMode):
    """The recompute's op mode: before each op, stop if every slot is filled (the op before ran and was counted
    whole: a stop raised from a pack hook would cut that op short)."""

    def __init__(self, filled):
        self.filled = filled

    def __op__(self, op_cls, inputs, attrs, run):
        if self.filled():
            raise _Stop
        return run(op_cls, inputs, attrs)


def frugal_checkpoint(function, *args):
    """hook_checkpoint, recomputing only what backward reads, as the engine's checkpoint does (NOTE [recompute what
    backward reads], checkpoint/policies.py), still written with the seams alone: saved_tensors_hooks, an OpMode
    and `recomputing` (which tags the FLOPs). A slot whose tensor lives on anyway (an argument, a parameter, one of
    the function's outputs) is filled at the checkpoint's exit, never recomputed. In the recompute the k-th pack
    fills slot k and every later slot that packed the same tensor in the forward, and the recompute stops before
    the first op after every slot is filled: an op whose output no record saved and no later op needs runs once."""
    slots, group, first = [], [], {}  # weakrefs to the slots in pack order; the first slot of each one's tensor
    args_by_id = {id(a): a for a in args if isinstance(a, mg.Tensor)}

    def pack(t):
        s, k = _Slot(), len(slots)
        seen = first.get(id(t))
        group.append(seen[1] if seen is not None and seen[0]() is t else k)
        if group[-1] == k:
            first[id(t)] = (weakref.ref(t), k)
        if args_by_id.get(id(t)) is t or (t.is_leaf and t.requires_grad):
            s.tensor = t
        s.forward = weakref.ref(t)  # to find the function's outputs at its exit
        slots.append(weakref.ref(s))
        return s

    def filled():
        return all(r() is None or r().tensor is not None for r in slots)

    def recompute():
        counter = iter(range(len(slots)))

        def fill(t):
            j = next(counter)
            for i in range(j, len(slots)):
                s = slots[i]()
                if s is not None and s.tensor is None and group[i] == group[j]:
                    s.tensor = t.detach()

        def never(_):
            raise AssertionError("the recompute's records are never run")

        inputs = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, mg.Tensor) else a for a in args]
        try:
            with mg.enable_grad(), recomputing(), saved_tensors_hooks(fill, never), _StopWhenFilled(filled):
                function(*inputs)
        except _Stop:
            pass

    def unpack(s):
        if s.tensor is None:
            recompute()
        return s.tensor

    with saved_tensors_hooks(pack, unpack):
        out = function(*args)
    outs = {id(o): o for o in (out if isinstance(out, tuple) else (out,))}
    for r in slots:  # at the exit: a slot whose forward tensor is an output the caller holds is filled with it
        s = r()
        if s is not None and s.tensor is None and outs.get(id(s.forward())) is s.forward():
            s.tensor = s.forward()
    return out


@pytest.mark.parametrize("segments", [2, 4, 8])
def test_a_frugal_hook_checkpoint_recomputes_what_the_engines_does_bit_for_bit(segments):
    """frugal_checkpoint against mg.checkpoint over the same segments of a (Linear, Tanh) chain: the same gradients to
    the bit, and the same recompute FLOPs, which a hook checkpoint that reruns each whole segment exceeds (the issue
    [seams]'s premise: the seams are enough for minigrad's checkpoint, skipping included)."""
    mg.manual_seed(0)
    layers = [m for _ in range(8) for m in (nn.Linear(32, 32), nn.Tanh())]
    x = mg.randn(16, 32, requires_grad=True)
    size = len(layers) // segments

    def segment(i):
        return lambda h: nn.Sequential(*layers[i * size:(i + 1) * size])(h)

    def step(ckpt):
        for p in [x] + [p for m in layers for p in m.parameters()]:
            p.grad = None
        with mg.profile() as prof:
            h = x
            for i in range(segments):
                h = ckpt(segment(i), h) if ckpt is not None and i < segments - 1 else segment(i)(h)
            h.sum().backward()
        return [host(x.grad)] + [host(p.grad) for m in layers for p in m.parameters()], prof.flops("recompute")

    plain, none = step(None)
    engine, engine_flops = step(mg.checkpoint)
    frugal, frugal_flops = step(frugal_checkpoint)
    whole, whole_flops = step(lambda f, h: _recomputed(hook_checkpoint, f, h))
    for p, a, b in zip(plain, engine, frugal):
        np.testing.assert_array_equal(a, p)
        np.testing.assert_array_equal(b, p)
    # a whole rerun also runs each segment's tail (its last Linear and Tanh) again, for nothing: with (Linear, Tanh)
    # segments, nothing else, so the engine and the frugal hooks recompute nothing there
    assert none == 0 and frugal_flops == engine_flops < whole_flops
    assert (engine_flops > 0) == (segments < 8)


def _recomputed(checkpoint, function, *args):
    """checkpoint(function, *args) with its function's reruns tagged as a recompute's FLOPs (hook_checkpoint's are
    not: it tags nothing), for the comparison above."""
    calls = []

    def tagged(*a):
        calls.append(1)
        if len(calls) == 1:
            return function(*a)
        with recomputing():
            return function(*a)
    return checkpoint(tagged, *args)


# ----------------------------------------------------------------------------- save_on_cpu

def _mlp_step(hooks=None):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))
    x = mg.randn(8, 16)
    with mg.profile() as prof:
        if hooks is None:
            loss = model(x).square().mean()
        else:
            with hooks:
                loss = model(x).square().mean()
        records = [r for r in _records(loss)]
        saved = sum(a.nbytes for r in records for a in (r.saved or ()) if a is not None)
        loss.backward()
    return [host(p.grad) for p in model.parameters()], prof, saved, records


def _records(t):
    from minigrad.tensor import records_since
    return records_since(t)


def test_save_on_cpu_gives_the_plain_gradients_bit_for_bit_and_the_ledger_sees_where_they_wait():
    plain, plain_prof, plain_saved, _ = _mlp_step()
    offloaded, prof, _, records = _mlp_step(save_on_cpu())
    for a, b in zip(plain, offloaded):
        np.testing.assert_array_equal(a, b)
    assert all(r.packed is None for r in records)  # released
    if mg.default_device() == "cuda":  # the stand-in (or a GPU): every saved array waited in host memory
        assert prof.peak_bytes("activations") == 0 < plain_prof.peak_bytes("activations")
        assert prof.host_bytes() == plain_saved  # a copy per record: a weight saved by its linear too, as PyTorch's
        assert prof.host_bytes(peak=False) == 0
    else:  # on the CPU nothing moves: the ledger is the plain run's
        assert prof.host_bytes() == 0
        assert prof.peak_bytes("activations") == plain_prof.peak_bytes("activations")
        assert prof.peak_bytes() == plain_prof.peak_bytes()


def test_save_on_cpu_moves_only_gpu_arrays_and_keeps_the_rest_as_it_is():
    x = mg.randn(3, requires_grad=True)
    hooks = save_on_cpu()
    device, kept = hooks.pack_hook(x)
    assert device == x.device
    if x.device == "cpu":
        assert kept is x  # as PyTorch's: tensor.cpu() is the tensor itself
    else:
        assert kept.device == "cpu" and np.array_equal(kept.numpy(), host(x))
    back = hooks.unpack_hook((device, kept))
    assert back.device == x.device and np.array_equal(host(back), host(x))
    with mg.device("meta"):
        m = mg.randn(3)
    device, kept = hooks.pack_hook(m)
    assert device == "meta" and kept is m


def test_save_on_cpu_has_pytorchs_signature():
    torch = pytest.importorskip("torch")
    ours, theirs = inspect.signature(save_on_cpu), inspect.signature(torch.autograd.graph.save_on_cpu)
    assert list(ours.parameters) == list(theirs.parameters) == ["pin_memory", "device_type"]
    assert [p.default for p in ours.parameters.values()] == [p.default for p in theirs.parameters.values()]
    assert list(inspect.signature(saved_tensors_hooks).parameters) == \
        list(inspect.signature(torch.autograd.graph.saved_tensors_hooks).parameters)


def test_a_pack_hook_that_copies_to_numpy_is_counted_where_the_copy_lives():
    """NOTE [what a pack hook keeps]: the ledger finds arrays inside what pack returns."""
    def run(hooks):
        x = mg.randn(64, requires_grad=True)
        with mg.profile() as prof:
            with hooks:
                y = x.sin().sum()
            y.backward()
        return prof

    plain = run(saved_tensors_hooks(lambda t: t, lambda t: t))
    copied = run(saved_tensors_hooks(lambda t: ("copy", [t.detach().numpy().copy()]),
                                     lambda p: mg.tensor(p[1][0], device=mg.default_device())))
    if mg.default_device() == "cuda":
        assert copied.peak_bytes("activations") == 0 and copied.host_bytes() == 64 * 4
    else:
        assert copied.peak_bytes("activations") == plain.peak_bytes("activations") == 64 * 4
        assert copied.host_bytes() == 0


# ----------------------------------------------------------------------------- errors that teach

def test_hooks_that_are_not_callables_are_refused_as_in_pytorch():
    with pytest.raises(TypeError, match=r"saved_tensors_hooks: pack_hook must be a callable, got int"):
        with saved_tensors_hooks(3, lambda t: t):
            pass
    with pytest.raises(TypeError, match=r"unpack_hook must be a callable, got str"):
        saved_tensors_hooks(lambda t: t, "t")
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        with torch.autograd.graph.saved_tensors_hooks(3, 4):
            pass


def test_an_unpack_hook_that_returns_no_tensor_is_named():
    x = mg.randn(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: t.detach(), lambda t: 3):
        y = x.sin().sum()
    with pytest.raises(TypeError, match=r"unpack hook of saved_tensors_hooks returned int for an array that 'sin' "
                                        r"saved; it must return a Tensor"):
        y.backward()
    torch = pytest.importorskip("torch")  # PyTorch's TypeError too
    tx = torch.ones(3, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), lambda t: 3):
        ty = tx.sin().sum()
    with pytest.raises(TypeError, match="expected to be a Tensor"):
        ty.backward()


def test_an_unpack_hook_that_returns_another_shape_is_named():
    x = mg.randn(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: t.detach(), lambda t: t[:2]):
        y = x.sin().sum()
    with pytest.raises(RuntimeError, match=r"returned a tensor of shape \(2,\), float32 on \w+ for an array that "
                                           r"'sin' saved as shape \(3,\), float32"):
        y.backward()


def test_save_on_cpu_knows_one_gpu_device_type():
    with pytest.raises(ValueError, match="device_type must be 'cuda'"):
        save_on_cpu(device_type="xpu")


def test_mg_autograd_says_what_it_has():
    assert mg.autograd.graph.save_on_cpu is save_on_cpu
    with pytest.raises(AttributeError, match=r"'autograd'.*loss\.backward\(\) and read each input's \.grad"):
        mg.autograd.grad  # noqa: B018


def test_learner_mode_leaves_a_graph_under_hooks_to_the_engines_walk():
    """The learner's tape walk (exercise 4) knows nothing of saved-tensor hooks: a graph recorded under a pair goes to
    the engine's walk, which unpacks, as a checkpoint's does."""
    import os
    from minigrad import learner
    solutions = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "exercises", "solutions")
    x = mg.randn(4, 3, requires_grad=True)
    (x.tanh() * x).sum().backward()
    plain, x.grad = host(x.grad), None
    log = []
    with learner.use(solutions, only={4}) as pieces:
        with saved_tensors_hooks(lambda t: log.append("pack") or t.detach(), lambda t: log.append("unpack") or t):
            y = (x.tanh() * x).sum()
        y.backward()
        assert pieces[0].fell_back == 1 and pieces[0].ran == 0
    assert log == ["pack"] * 3 + ["unpack"] * 3
    np.testing.assert_array_equal(host(x.grad), plain)


def test_the_readmes_save_on_cpu_example_does_what_it_says(capsys):
    import os
    import re
    readme = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")).read()
    block = re.search(r"### The seam underneath: saved-tensor hooks.*?```python\n(.*?)```", readme, re.S).group(1)
    assert len(block.strip().splitlines()) == 5
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    x = mg.randn(8, 16)
    exec(compile(block, "README.md", "exec"), {"mg": mg, "model": model, "x": x})
    host_bytes, activations = map(int, capsys.readouterr().out.split())
    if mg.default_device() == "cuda":
        assert host_bytes > 0 and activations == 0
    else:
        assert host_bytes == 0 and activations > 0
