"""The cases of issue [trust] one by one: each was a silently wrong gradient, or a missing error, before its fix.

- A mask built inside a checkpointed function from an intermediate's values (where, w * (w > 0), masked_fill,
  .item()): the recompute skipped the op that made the intermediate and the comparison read a placeholder
  (NOTE [reads outside the tape]).
- A write the tape does not record (under no_grad, through detach()) into the output of an op a policy keeps:
  the recompute handed back the written array and the function wrote it again (NOTE [writes the tape does not
  record]).
- expand()'s output did not share its base's version counter (NOTE [version counters]).
- retain_grad() then an in-place op: .grad was the gradient of the value before the write.
- A checkpoint with no tensor argument ran a third backward after retain_graph and a plain one.

Each is compared with the plain run bit for bit, and with PyTorch in float64 where PyTorch is installed.
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn

POLICIES = [None, mg.checkpoint_policies.dots_saveable, mg.checkpoint_policies.everything_saveable,
            mg.checkpoint_policies.save_anything_except_core_attention]
IDS = ["default", "dots_saveable", "everything_saveable", "except_core_attention"]


def setup():
    rng = np.random.default_rng(0)
    return rng.standard_normal((3, 4)), rng.standard_normal((4, 4)) * 0.7


def leaky_where(lib, w):
    return lib.where(w > 0, w, 0.01 * w)


def relu_mask(lib, w):
    return w * (w > 0)


def fill_small(lib, w):
    return w.masked_fill(w < 0.1, 0.0)


def scale_by_sign(lib, w):
    return w * (2.0 if w.sum().item() > 0 else 0.5)


MASKS = [leaky_where, relu_mask, fill_small, scale_by_sign]


def run_minigrad(fn, policy, ckpt):
    xv, wv = setup()
    x = mg.tensor(xv, dtype="float64", requires_grad=True)
    w = mg.tensor(wv, dtype="float64", requires_grad=True)

    def f(t):
        return fn(mg, t @ w)  # the intermediate the mask is made from comes from an op inside

    y = mg.checkpoint(f, x, policy=policy) if ckpt else f(x)
    (y * y).sum().backward()
    return x.grad.numpy(), w.grad.numpy()


@pytest.mark.parametrize("policy", POLICIES, ids=IDS)
@pytest.mark.parametrize("fn", MASKS, ids=lambda f: f.__name__)
def test_a_mask_from_an_intermediate_inside_a_checkpoint(fn, policy):
    want = run_minigrad(fn, policy, False)
    got = run_minigrad(fn, policy, True)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)
    assert all(np.any(w != 0) for w in want)


@pytest.mark.torch
@pytest.mark.parametrize("fn", MASKS, ids=lambda f: f.__name__)
def test_a_mask_from_an_intermediate_inside_a_checkpoint_against_torch(fn):
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint
    xv, wv = setup()
    x = torch.tensor(xv, requires_grad=True)
    w = torch.tensor(wv, requires_grad=True)
    y = checkpoint(lambda t: fn(torch, t @ w), x, use_reentrant=False)
    (y * y).sum().backward()
    for g, t in zip(run_minigrad(fn, None, True), (x, w)):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12, atol=1e-12)


def write_detached(lib, h):
    h.detach().mul_(2)
    return h


def write_under_no_grad(lib, h):
    with (mg.no_grad() if lib is mg else lib.no_grad()):
        h += 1
    return h


def write_a_row_through_a_view(lib, h):
    with (mg.no_grad() if lib is mg else lib.no_grad()):
        h[0] *= 3
    return h


WRITES = [write_detached, write_under_no_grad, write_a_row_through_a_view]


def run_writes(write, policy, ckpt):
    xv, wv = setup()
    x = mg.tensor(xv, dtype="float64", requires_grad=True)
    w = mg.tensor(wv, dtype="float64", requires_grad=True)

    def f(t):
        h = write(mg, t @ w)  # the matmul is what dots_saveable keeps: its output, written after it was made
        return (h @ w).tanh()

    y = mg.checkpoint(f, x, policy=policy) if ckpt else f(x)
    (y * y).sum().backward()
    return x.grad.numpy(), w.grad.numpy()


@pytest.mark.parametrize("policy", POLICIES, ids=IDS)
@pytest.mark.parametrize("write", WRITES, ids=lambda f: f.__name__)
def test_a_write_the_tape_does_not_record_counts_once(write, policy):
    want = run_writes(write, policy, False)
    got = run_writes(write, policy, True)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)


@pytest.mark.torch
@pytest.mark.parametrize("write", WRITES, ids=lambda f: f.__name__)
def test_a_write_the_tape_does_not_record_against_torch(write):
    torch = pytest.importorskip("torch")
    xv, wv = setup()
    x = torch.tensor(xv, requires_grad=True)
    w = torch.tensor(wv, requires_grad=True)
    y = (write(torch, x @ w) @ w).tanh()
    (y * y).sum().backward()
    for g, t in zip(run_writes(write, mg.checkpoint_policies.dots_saveable, True), (x, w)):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_a_write_after_the_checkpoint_into_an_output_it_hands_back_is_refused():
    """The recompute reads this output (the function read its values), so it would start from the new values."""
    w = mg.randn(4, 4, dtype="float64", requires_grad=True)
    x = mg.randn(3, 4, dtype="float64")

    def f(t):
        h = t @ w
        return h, h * (h > 0)  # the comparison reads h: the recompute needs it, as the forward made it

    h, other = mg.checkpoint(f, x, policy=mg.checkpoint_policies.everything_saveable)
    with mg.no_grad():
        h.add_(5)
    with pytest.raises(RuntimeError, match="modified in place"):
        ((h * h).sum() + other.sum()).backward()


def test_a_write_into_the_checkpoints_argument_inside_it_is_refused():
    x = mg.randn(3, 4, dtype="float64")
    w = mg.randn(4, 4, dtype="float64", requires_grad=True)

    def scales_its_input(t):
        with mg.no_grad():
            t.mul_(2)  # the recompute would double it again
        return t @ w

    with pytest.raises(RuntimeError, match="'scales_its_input' wrote in place into a tensor argument"):
        mg.checkpoint(scales_its_input, x)


@pytest.mark.parametrize("policy", POLICIES, ids=IDS)
def test_a_recorded_write_into_the_checkpoints_argument_inside_it_is_refused(policy):
    """The tape records x.add_(w) (w requires grad): x gets a new array and the write's record. The checkpoint took its
    argument after the function ran, so it kept the written values and pointed at the write's record: its recompute
    added w again, and w.grad was [20, 28, 36] where the plain run (and PyTorch, without the checkpoint) gives
    [8, 12, 16]; PyTorch's checkpoint refuses it (a saved tensor modified in place). Where the argument itself
    requires grad, the write was refused as a closure over a tensor from before the checkpoint, which it is not."""
    def adds_into_its_input(t):
        t.add_(w)
        return t * t

    w = mg.tensor(np.full(3, 0.5), requires_grad=True)
    plain = adds_into_its_input(mg.tensor(np.arange(6.0).reshape(2, 3)))
    plain.sum().backward()
    assert w.grad.tolist() == [8.0, 12.0, 16.0]
    for x in (mg.tensor(np.arange(6.0).reshape(2, 3)), mg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True) * 1):
        with pytest.raises(RuntimeError, match="'adds_into_its_input' wrote in place into a tensor argument .*'add'"):
            mg.checkpoint(adds_into_its_input, x, policy=policy)


def test_a_write_inside_after_an_op_read_it_is_refused_as_in_a_plain_run():
    """tanh keeps its output: written later inside the function, a plain backward refuses, and so does the
    checkpoint's, though its forward kept nothing."""
    w = mg.randn(4, 4, dtype="float64", requires_grad=True)

    def f(t):
        h = (t @ w).tanh()
        with mg.no_grad():
            h += 1
        return h @ w

    x = mg.randn(3, 4, dtype="float64")
    for run in (f, lambda t: mg.checkpoint(f, t)):
        with pytest.raises(RuntimeError, match="'tanh'.*modified in place"):
            run(x).sum().backward()


def test_an_expanded_view_shares_its_bases_version_counter():
    w = mg.randn(3, 4, dtype="float64", requires_grad=True)
    x = mg.randn(1, 4, dtype="float64")
    v = x.expand(3, 4)
    assert v._version == x._version == 0
    y = w * v  # saves the expanded view
    with mg.no_grad():
        x += 1
    assert v._version == 1
    with pytest.raises(RuntimeError, match="'mul' saved its input 1.*modified in place"):
        y.sum().backward()


@pytest.mark.torch
def test_an_expanded_view_written_through_its_base_raises_in_both():
    torch = pytest.importorskip("torch")
    w = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    x = torch.randn(1, 4, dtype=torch.float64)
    y = w * x.expand(3, 4)
    with torch.no_grad():
        x += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_a_recorded_write_into_the_base_of_an_expanded_view_is_refused():
    """PyTorch rebases the view; minigrad refuses in-place writes that grad mode records on a tensor with views,
    as it does for any view (before, the write went through and the view kept the old values)."""
    base = mg.randn(1, 4, dtype="float64") * 1
    view = base.expand(3, 4)
    with pytest.raises(RuntimeError, match="has views"):
        base += mg.randn(1, 4, dtype="float64", requires_grad=True)
    assert np.array_equal(view.numpy()[0], base.numpy()[0])


@pytest.mark.parametrize("write", ["mul_", "add_", "setitem"])
def test_retain_grad_follows_the_tensor_through_an_in_place_op(write):
    rng = np.random.default_rng(0)
    a = mg.tensor(rng.standard_normal(5), dtype="float64", requires_grad=True)
    y = a * 2
    y.retain_grad()
    if write == "mul_":
        y.mul_(3)
    elif write == "add_":
        y.add_(a)
    else:
        y[1] = a[0]
    (y * y).sum().backward()
    assert np.array_equal(y.grad.numpy(), 2 * y.detach().numpy())  # d(sum y^2)/dy at the written y
    torch = pytest.importorskip("torch")
    ta = torch.tensor(rng.standard_normal(5) * 0 + a.detach().numpy(), requires_grad=True)
    ty = ta * 2
    ty.retain_grad()
    if write == "mul_":
        ty.mul_(3)
    elif write == "add_":
        ty.add_(ta)
    else:
        ty[1] = ta[0]
    (ty * ty).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-14)
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-14)


def test_a_checkpoint_of_parameters_only_refuses_a_third_backward():
    lin = nn.Linear(4, 4)
    y = mg.checkpoint(lambda: lin.weight.tanh().sum())
    y.backward(retain_graph=True)
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


VIEWS = {
    "reshape": lambda t: t.reshape(4, 3), "view": lambda t: t.view(12), "flatten": lambda t: t.flatten(),
    "transpose": lambda t: t.transpose(0, 1), "permute": lambda t: t.permute(1, 0), "T": lambda t: t.T,
    "unsqueeze": lambda t: t.unsqueeze(0), "squeeze": lambda t: t.unsqueeze(1).squeeze(1),
    "expand": lambda t: t[:1].expand(5, 4), "expand_as": lambda t: t[:1].expand_as(mg.zeros(2, 4)),
    "slice": lambda t: t[1:], "row": lambda t: t[0], "ellipsis": lambda t: t[..., 1], "split": lambda t: t.split(2)[1],
    "chunk": lambda t: t.chunk(2, 1)[0], "unbind": lambda t: t.unbind(1)[2], "contiguous": lambda t: t.contiguous(),
    "detach": lambda t: t.detach(), "to_same": lambda t: t.to("float64"), "repeat": lambda t: t.repeat(1, 1),
    "flip": lambda t: t.flip(0), "index_select": lambda t: t.index_select(0, mg.tensor([0, 2])),
}


@pytest.mark.parametrize("make", list(VIEWS.values()), ids=list(VIEWS))
def test_every_view_shares_its_bases_version_counter(make):
    """Any result that shares memory with its input sees the input's in-place writes in its version (and so a record
    that saved it refuses to run after one); a copy does not."""
    x = mg.randn(3, 4, dtype="float64")
    out = make(x)
    shares = np.shares_memory(out._data, x._data)
    with mg.no_grad():
        x.add_(1)
    assert out._version == (1 if shares else 0), f"shares memory: {shares}, version {out._version}"
