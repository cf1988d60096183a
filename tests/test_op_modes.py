"""NOTE [op modes] (minigrad/tensor/modes.py): the stack of modes that apply consults, against PyTorch's
TorchDispatchMode where it has the same idea: a mode sees each op, may run it, replace its inputs, return a result
without running it, or note it; modes nest, the innermost first; autocast casts before any mode sees an op."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import ops
from minigrad.tensor import OpMode, active_modes, keep_saved

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402


class Log(OpMode):
    """Notes (its name, the op's name, its input dtypes) and runs the op."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def __op__(self, op_cls, inputs, attrs, run):
        self.log.append((self.name, op_cls.name, tuple(t.dtype.name for t in inputs)))
        return run(op_cls, inputs, attrs)


class TorchLog(TorchDispatchMode):
    def __init__(self, name, log):
        super().__init__()
        self.name, self.log = name, log

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.log.append((self.name, func.overloadpacket.__name__,
                         tuple(str(a.dtype).split(".")[1] for a in args if isinstance(a, torch.Tensor))))
        return func(*args, **(kwargs or {}))


def test_modes_nest_innermost_first_as_pytorchs():
    log, tlog = [], []
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    mx, tx = mg.tensor(x), torch.tensor(x)
    with Log("outer", log), Log("inner", log):
        assert [m.name for m in active_modes()] == ["inner", "outer"]
        y = mx.tanh()
    with TorchLog("outer", tlog), TorchLog("inner", tlog):
        ty = tx.tanh()
    assert [(who, name) for who, name, _ in log] == [(who, name) for who, name, _ in tlog] == \
        [("inner", "tanh"), ("outer", "tanh")]
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    assert active_modes() == ()


def test_a_mode_replaces_inputs_or_returns_a_result_without_running_the_op():
    class Doubled(OpMode):
        def __op__(self, op_cls, inputs, attrs, run):
            return run(op_cls, tuple(t * 2 for t in inputs) if op_cls.name == "tanh" else inputs, attrs)

    class TorchDoubled(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.tanh.default:
                args = (args[0] * 2,)
            return func(*args, **(kwargs or {}))

    x = np.linspace(-1, 1, 6, dtype=np.float32)
    with Doubled():
        y = mg.tensor(x).tanh()
    with TorchDoubled():
        ty = torch.tensor(x).tanh()
    np.testing.assert_array_equal(y.numpy(), ty.numpy())

    ran = []
    cached = mg.zeros(6)

    class Cached(OpMode):
        def __op__(self, op_cls, inputs, attrs, run):
            if op_cls.name == "exp":
                return cached
            return run(op_cls, inputs, attrs, lambda op, record, inputs, out, attrs: ran.append(op.name))

    with Cached():
        z = mg.tensor(x).tanh().exp()
    assert z is cached and ran == ["tanh"]  # exp did not run: no noted heard of it


def test_noted_sees_the_op_before_its_record_keeps_anything():
    seen = []

    class Saved(OpMode):
        def __op__(self, op_cls, inputs, attrs, run):
            return run(op_cls, inputs, attrs, lambda op, record, inputs, out, attrs: seen.append(
                (op.name, record is op, len(op.saved))))

    w = mg.randn(4, 4, requires_grad=True)
    with Saved(), keep_saved(False):  # keep drops what tanh saved; noted is called before
        y = (mg.randn(2, 4) @ w).tanh()
    assert seen == [("matmul", True, 2), ("tanh", True, 1)] and y.grad_fn.saved == ()
    with Saved(), mg.no_grad():
        mg.randn(2, 4).tanh()
    assert seen[-1][:2] == ("tanh", False)  # not recording: no record


@pytest.mark.parametrize("outside", [True, False])
def test_autocast_casts_before_every_mode_whichever_is_entered_first(outside):
    """PyTorch's Autocast dispatch key runs before the Python modes: a TorchDispatchMode sees the casts and then the
    product in bfloat16, whether it is entered inside the autocast region or around it. minigrad's stack the same."""
    x, w = np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)
    log, tlog = [], []
    mx, mw = mg.tensor(x), mg.tensor(w, requires_grad=True)
    low = "bfloat16" if mx.device == "cpu" else "float16"  # autocast's default on the device ('cuda': the stand-in)
    t_ctx = [torch.autocast("cpu"), TorchLog("m", tlog)]
    m_ctx = [mg.autocast(mx.device), Log("m", log)]
    if outside:
        t_ctx.reverse(), m_ctx.reverse()
    tx, tw = torch.tensor(x), torch.tensor(w, requires_grad=True)
    with t_ctx[0], t_ctx[1]:
        torch.nn.functional.linear(tx, tw)
    with m_ctx[0], m_ctx[1]:
        mg.nn.functional.linear(mx, mw)
    assert [dt for _, name, dt in tlog if name in ("mm", "linear", "addmm", "t")][-1][:1] == ("bfloat16",)
    assert [name for _, name, _ in log] == ["cast", "cast", "linear"]
    assert log[-1][2] == (low, low)
    assert sum(name == "_to_copy" for _, name, _ in tlog) == 2


def test_the_stack_is_restored_on_error_and_empty_without_modes():
    assert active_modes() == ()
    with pytest.raises(ZeroDivisionError):
        with Log("a", []):
            with mg.autocast("cpu"):
                assert type(active_modes()[0]).__name__ == "_Policy" and active_modes()[1].name == "a"
                1 / 0
    assert active_modes() == ()


def test_apply_with_no_mode_is_the_record_and_nothing_else():
    """NOTE [op modes]: apply's plain path names no feature (autocast, the profiler, a checkpoint's cache, its
    placeholders): each is a mode on the stack, and apply asks only whether the stack is empty."""
    import ast
    import importlib
    import inspect
    trees = [ast.parse(inspect.getsource(importlib.import_module(f"minigrad.tensor.{m}"))) for m in ("tensor", "modes")]
    defs = {n.name: n for tree in trees for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name in ("apply", "_chain", "_level", "_run"):
        fn = defs[name]
        words = {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)} | \
            {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
        assert not words & {"autocast", "profiler", "cache", "_placeholders", "_check_real"}, (name, words)
    apply_def = defs["apply"]
    assert apply_def.end_lineno - apply_def.lineno + 1 <= 20
    assert mg.tensor([1.0]).exp().grad_fn is None and isinstance(ops.Exp(), ops.Op)


def test_a_user_mode_beside_autocast_the_profiler_and_a_checkpoint_changes_no_gradient():
    """A mode that only runs ops sits between the profiler and a checkpoint's cache (NOTE [op modes]): the same
    gradients, bit for bit, and the same FLOPs, with it as without it; it sees the recompute's replayed ops too."""
    def step(mode):
        mg.manual_seed(0)
        model = mg.nn.Sequential(mg.nn.Linear(8, 8), mg.nn.Tanh(), mg.nn.Linear(8, 8))
        x = mg.randn(4, 8)
        with mg.profile() as prof:
            with mg.autocast("cpu"):
                if mode is not None:
                    mode.__enter__()
                y = mg.checkpoint(model, x, policy=mg.checkpoint_policies.dots_saveable)
            y.float().sum().backward()
            if mode is not None:
                mode.__exit__(None, None, None)
        return [p.grad.numpy() for p in model.parameters()], prof.flops("forward"), prof.flops("recompute")

    log = []
    with_mode, without = step(Log("m", log)), step(None)
    for a, b in zip(with_mode[0], without[0]):
        np.testing.assert_array_equal(a, b)
    assert with_mode[1:] == without[1:]
    names = [name for _, name, _ in log]
    assert names.count("linear") == 4 and "checkpoint" in names  # the forward's two, the recompute's two


class CastsToFloat32(OpMode):
    """A mode that says it casts an op's floats itself (OpMode.casts_inputs), as autocast's policy does: it notes the
    dtypes it is handed and runs the op on float32 copies."""
    casts_inputs = True

    def __init__(self, log):
        self.log = log

    def __op__(self, op_cls, inputs, attrs, run):
        self.log.append((op_cls.name, tuple(t.dtype.name for t in inputs)))
        if op_cls.name == "cast":
            return run(op_cls, inputs, attrs)
        return run(op_cls, tuple(t.to("float32") if t.dtype.name == "float16" else t for t in inputs), attrs)


def test_a_mode_that_casts_inputs_itself_is_handed_mixed_floats_unpromoted():
    """The Tensor's operators and cat promote mixed floats first, unless a mode says it casts them itself: then it is
    handed them as they are (the face asks the mode, and names no feature: NOTE [op modes])."""
    a, b = mg.ones(3, dtype="float16"), mg.ones(3)
    log = []
    with CastsToFloat32(log):
        s, c = a + b, mg.cat([a, b])
    assert ("add", ("float16", "float32")) in log and ("cat", ("float16", "float32")) in log
    assert s.dtype.name == c.dtype.name == "float32" and s.tolist() == [2.0] * 3
    plain = []
    with Log("plain", plain):  # casts_inputs is False: promoted before the mode sees the op, a cast of its own
        a + b
    assert plain == [("plain", "cast", ("float16",)), ("plain", "add", ("float32", "float32"))]
