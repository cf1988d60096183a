"""mg.checkpoint against PyTorch's non-reentrant torch.utils.checkpoint: the same signature, the same semantics.

What is checked (issue 11), each in a way that can fail:
  signature       the options are keyword-only (an extra positional argument goes to the function), other keyword
                  arguments go to the function, use_reentrant None/False accepted and True refused saying why,
                  early_stop as PyTorch's (set_checkpoint_early_stop overrides it), PyTorch options minigrad lacks
                  refused by name, checkpoint_sequential's argument order
  outputs         tuples, lists, dicts, nests and namedtuples of tensors and other values; inputs returned as they
                  are; a gradient through every output, and only through those the loss uses (partial grads); one
                  recompute for all outputs; a tensor hidden in another object fails clearly
  inputs          non-tensor arguments, tensors in lists and in keyword arguments, the same tensor twice, an input
                  also captured by a closure (once a false 'backward a second time')
  bit-identical   gradients (np.array_equal) against the plain run, also for an input used twice inside and again
                  after the checkpoint (once 41 of 200 entries off by an ulp: the order of the sums), with a check
                  that the order of the sums matters for those very numbers
  nesting, retain_graph, RNG (dropout replays; preserve_rng_state=False with a draw warns)
  determinism     'default' compares the number and the shape, dtype and device of the arrays the recompute saves
  PyTorch         the same functions, written once for both libraries, through torch.utils.checkpoint
                  (use_reentrant=False) in float64: values, gradients, which gradients are None, which errors
"""
import collections
import inspect
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn



# ----------------------------------------------------------------------------- helpers

def grads_of(tensors):
    return [None if t.grad is None else t.grad.numpy().copy() for t in tensors]


def run(loss_fn, tensors):
    """Zero the grads of `tensors`, run loss_fn().backward(); their grads (None where none came)."""
    for t in tensors:
        t.grad = None
    loss_fn().backward()
    return grads_of(tensors)


def assert_same(got, want):
    """Bit-identical, and None exactly where the plain run has None."""
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        if b is None or a is None:
            assert a is None and b is None, f"gradient {i}: {'none' if a is None else 'one'} where the plain run " \
                                            f"has {'none' if b is None else 'one'}"
            continue
        assert a.dtype == b.dtype and a.shape == b.shape, f"gradient {i}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        assert np.array_equal(a, b), f"gradient {i}: {np.sum(a != b)} of {a.size} entries differ, by up to " \
                                     f"{np.max(np.abs(a - b)):.3g}"


def params_of(*modules):
    return [p for m in modules for p in m.parameters()]


def sq(y):
    return (y * y).mean()


# ----------------------------------------------------------------------------- 1. signature

def test_an_extra_positional_argument_goes_to_the_function():
    """checkpoint(f, x, flag) once made flag preserve_rng_state; as in PyTorch, it is f's second argument."""
    seen = []

    def f(x, flag):
        seen.append(flag)
        return x.exp() if flag is False else x.tanh()

    x = mg.randn(5, requires_grad=True)
    y = mg.checkpoint(f, x, False)
    y.sum().backward()
    assert seen == [False, False]  # the forward and the recompute
    assert np.array_equal(x.grad.numpy(), x.detach().exp().numpy())  # d exp = exp, exactly


def test_two_tensor_arguments_both_get_gradients():
    x, y = mg.randn(3, 4, requires_grad=True), mg.randn(3, 4, requires_grad=True)

    def f(a, b):
        return (a * b).tanh()

    want = run(lambda: sq(f(x, y)), [x, y])
    assert_same(run(lambda: sq(mg.checkpoint(f, x, y)), [x, y]), want)


def test_keyword_arguments_go_to_the_function_tensors_among_them_get_gradients():
    lin = nn.Linear(4, 4)
    x, w = mg.randn(2, 4, requires_grad=True), mg.randn(2, 4, requires_grad=True)
    tensors = [x, w] + params_of(lin)
    seen = []

    def f(x, *, scale, weight, name="plain"):
        seen.append(name)
        return lin(x * scale).tanh() * weight

    want = run(lambda: sq(f(x, scale=0.5, weight=w)), tensors)
    got = run(lambda: sq(mg.checkpoint(f, x, scale=0.5, weight=w, name="ckpt")), tensors)
    assert_same(got, want)
    assert seen == ["plain", "ckpt", "ckpt"]


@pytest.mark.parametrize("use_reentrant", [None, False])
def test_use_reentrant_none_or_false_is_accepted(use_reentrant):
    layers = [nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4)]
    x = mg.randn(2, 4, requires_grad=True)
    mg.checkpoint(layers[0], x, use_reentrant=use_reentrant).sum().backward()
    mg.checkpoint_sequential(layers, 2, x, use_reentrant).sum().backward()  # positional, as in PyTorch
    assert x.grad is not None


def test_use_reentrant_true_is_refused_saying_minigrad_is_non_reentrant():
    lin, x = nn.Linear(4, 4), mg.randn(2, 4)
    with pytest.raises(ValueError, match=r"use_reentrant=True is not supported.*non-reentrant.*use_reentrant=False"):
        mg.checkpoint(lin, x, use_reentrant=True)
    with pytest.raises(ValueError, match=r"checkpoint_sequential: use_reentrant=True.*non-reentrant"):
        mg.checkpoint_sequential([lin, lin], 2, x, use_reentrant=True)
    with pytest.raises(TypeError, match="use_reentrant must be None, False or True"):
        mg.checkpoint(lin, x, use_reentrant="False")


@pytest.mark.parametrize("option,value", [("context_fn", lambda: None), ("debug", True)])
def test_pytorch_options_that_minigrad_lacks_are_refused_by_name(option, value):
    with pytest.raises(TypeError, match=f"does not implement PyTorch's {option}; remove the argument"):
        mg.checkpoint(nn.Linear(4, 4), mg.randn(2, 4), **{option: value})


def test_early_stop_is_an_argument_as_in_pytorch_and_set_checkpoint_early_stop_overrides_it():
    """torch.utils.checkpoint.checkpoint(..., early_stop=True) (PyTorch 2.13's signature): False recomputes every op,
    as `with set_checkpoint_early_stop(False):` does, and inside such a block the block decides. minigrad once
    refused the argument, saying that it always recomputed the whole function: by default it does not."""
    layers = [nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh()]
    block = nn.Sequential(*layers)
    x = mg.randn(4, 8, requires_grad=True)
    want = run(lambda: sq(block(x)), [x] + params_of(block))

    def linears_rerun(**kw):
        with mg.profile() as prof:
            got = run(lambda: sq(mg.checkpoint(block, x, use_reentrant=False, **kw)), [x] + params_of(block))
        assert_same(got, want)
        return prof.calls("recompute", "linear")

    assert linears_rerun() == linears_rerun(early_stop=True) == 1  # the last Tanh's output is kept: its Linear skips
    assert linears_rerun(early_stop=False) == 2
    with mg.utils.checkpoint.set_checkpoint_early_stop(False):
        assert linears_rerun(early_stop=True) == 2
    with mg.utils.checkpoint.set_checkpoint_early_stop(True):
        assert linears_rerun(early_stop=False) == 1
    torch = pytest.importorskip("torch")
    ours, theirs = (inspect.signature(f).parameters["early_stop"]
                    for f in (mg.checkpoint, torch.utils.checkpoint.checkpoint))
    assert ours.kind == theirs.kind == inspect.Parameter.KEYWORD_ONLY and ours.default is theirs.default is True


def test_checkpoint_sequential_with_segments_and_input_swapped_says_the_order():
    layers = [nn.Linear(4, 4) for _ in range(4)]
    x = mg.randn(2, 4)
    with pytest.raises(TypeError, match=r"segments comes second and the input third") as e:
        mg.checkpoint_sequential(layers, x, 2)
    assert "checkpoint_sequential(layers, 2, x)" in str(e.value) and "(2, 4)" in str(e.value)
    assert mg.checkpoint_sequential(layers, 2, x).shape == (2, 4)


def test_checkpoint_sequential_options_after_use_reentrant_are_keyword_only():
    layers = [nn.Linear(4, 4) for _ in range(4)]
    x = mg.randn(2, 4)
    with pytest.raises(TypeError):
        mg.checkpoint_sequential(layers, 2, x, False, False)
    y = mg.checkpoint_sequential(layers, 2, x, use_reentrant=False, preserve_rng_state=False, determinism_check="none")
    assert y.shape == (2, 4)


# ----------------------------------------------------------------------------- 2. outputs

def foo(t1, t2, scale, t3):
    """PyTorch's test of non-tensor inputs and outputs, written again: numbers, None, bools, strings and an input
    returned as it is, among two computed tensors."""
    t4 = (t1 + t2 * t3) * scale
    t5 = (t1 * t2 + t3) * scale
    return scale, t4, None, True, t5, "bar", t1


def foo_loss(out):
    return (out[1] * out[4]).sum() + out[6].sum()


def test_non_tensor_inputs_and_outputs_pass_through():
    t1, t2, t3 = mg.randn(10, requires_grad=True), mg.randn(10, requires_grad=True), mg.randn(10)
    want = run(lambda: foo_loss(foo(t1, t2, 2.0, t3)), [t1, t2, t3])
    out = mg.checkpoint(foo, t1, t2, 2.0, t3)
    assert out[0] == 2.0 and out[2] is None and out[3] is True and out[5] == "bar"
    assert out[6] is t1  # returned as it is: no record of the function's made it
    assert out[1].grad_fn.name == out[4].grad_fn.name == "checkpoint_output"
    assert_same(run(lambda: foo_loss(mg.checkpoint(foo, t1, t2, 2.0, t3)), [t1, t2, t3]), want)
    assert t3.grad is None


Pair = collections.namedtuple("Pair", "a b")


def test_dicts_lists_nests_and_namedtuples_come_back_with_the_checkpoints_tensors():
    lin = nn.Linear(4, 4)
    x = mg.randn(3, 4, requires_grad=True)
    tensors = [x] + params_of(lin)

    def f(x):
        h = lin(x)
        return {"h": h, "more": [h.tanh(), (h.exp(), 7)], "pair": Pair(h * 2, "s")}

    def loss(out):
        return (out["h"] * out["more"][0]).sum() + out["more"][1][0].mean() + out["pair"].a.sum()

    want = run(lambda: loss(f(x)), tensors)
    out = mg.checkpoint(f, x)
    assert isinstance(out["more"], list) and isinstance(out["more"][1], tuple) and out["more"][1][1] == 7
    assert type(out["pair"]) is Pair and out["pair"].b == "s"
    # NOTE [checkpoint outputs]: one record for the segment, keeping x; a record per output on it
    made = [out["h"], out["more"][0], out["more"][1][0], out["pair"].a]
    record = made[0].grad_fn.next[0]
    # (and the outputs whose ops' backward reads them, tanh's and exp's: NOTE [recompute what backward reads])
    assert record.name == "checkpoint" and len(record.saved) == 3 and record.saved[0] is x.data
    assert record.saved[1] is made[1].data and record.saved[2] is made[2].data
    assert all(t.grad_fn.name == "checkpoint_output" and t.grad_fn.next == (record,) for t in made)
    assert_same(run(lambda: loss(mg.checkpoint(f, x)), tensors), want)


def test_a_single_tensor_among_other_values_is_the_checkpoint_records_own_output():
    lin = nn.Linear(4, 4)
    x = mg.randn(3, 4)
    y, idx, label = mg.checkpoint(lambda x: (lin(x), lin(x).argmax(dim=1), "logits"), x)
    assert y.grad_fn.name == "checkpoint" and label == "logits"
    assert idx.dtype == mg.int64 and idx.grad_fn is None  # needs no gradient: passes through
    assert np.array_equal(idx.numpy(), lin(x).argmax(dim=1).numpy())


def test_a_function_of_no_tensors_just_runs():
    assert mg.checkpoint(lambda a, b: a + b, 1, 2) == 3
    x = mg.randn(3, requires_grad=True)
    a, b = mg.checkpoint(lambda t, u: (t, u), x, 5)  # PyTorch's partial-grad test: inputs returned as they are
    assert a is x and b == 5


@pytest.mark.parametrize("used", [0, 1])
def test_partial_grads_when_the_loss_uses_only_some_outputs(used):
    a, b = nn.Linear(4, 4), nn.Linear(4, 4)
    x = mg.randn(3, 4, requires_grad=True)
    tensors = [x] + params_of(a, b)

    def f(x):
        h = x.tanh()
        return a(h), b(h)

    want = run(lambda: sq(f(x)[used]), tensors)
    assert sum(g is None for g in want) == 2  # the other Linear's weight and bias
    with mg.profile() as prof:
        got = run(lambda: sq(mg.checkpoint(f, x)[used]), tensors)
        assert prof.current_bytes("activations") == 0
    assert_same(got, want)
    assert prof.calls("backward", "checkpoint_output") == 1  # only the used output's record ran


def test_one_recompute_for_all_outputs_whose_gradients_meet_as_in_the_plain_run():
    """Outputs that share their insides (h feeds all three, and is an output itself): one recompute, and the
    gradients of all outputs summed at h in the plain run's order."""
    lin = nn.Linear(8, 8)
    x = mg.randn(4, 8, requires_grad=True)
    tensors = [x] + params_of(lin)
    calls = [0]

    def f(x):
        calls[0] += 1
        h = lin(x).tanh()
        return h * h, h.exp(), h

    def loss(y):
        return y[0].sum() + y[1].mean() + (y[2] * y[2]).sum()

    want = run(lambda: loss(f(x)), tensors)
    calls[0] = 0
    with mg.profile() as prof:
        got = run(lambda: loss(mg.checkpoint(f, x)), tensors)
    assert_same(got, want)
    assert calls[0] == 2  # the forward, and one recompute for the three outputs
    # in which no op runs again (NOTE [recompute what backward reads]): h * h reads only h; exp's output and h,
    # tanh's, are outputs that the checkpoint keeps; and then nothing reads the Linear's output
    assert prof.flops("recompute") == 0 and prof.calls("recompute") == 0


def test_several_outputs_keep_only_the_inputs_and_what_backward_reads_until_backward():
    block = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16))
    x = mg.randn(8, 16)

    def f(x):
        h = block(x)
        return h.tanh(), h.exp(), {"h": h}

    with mg.profile() as prof:
        out = mg.checkpoint(f, x)
        # x, and the outputs of tanh and exp, whose backward reads them, saved by the checkpoint record; nothing else
        assert prof.peak_bytes("activations") == 3 * x.data.nbytes
        (out[0] * out[1] + out[2]["h"]).sum().backward()
        assert prof.current_bytes("activations") == 0
    assert prof.calls("forward", "checkpoint") == 1 and prof.calls("forward", "checkpoint_output") == 3
    # only the first Linear and the Tanh run again: the second Linear reads only the Tanh's output, and nothing
    # recomputed reads h (NOTE [recompute what backward reads])
    assert prof.calls("recompute") == prof.calls("recompute", "linear") + prof.calls("recompute", "tanh") == 2
    assert prof.calls("recompute", "linear") == 1


def test_retain_grad_on_an_output_gets_the_plain_runs_gradient():
    x = mg.randn(3, 4, requires_grad=True)

    def f(x):
        h = x.tanh()
        return h * 3.0, h.exp()

    def grad_of_first(fn):
        y = fn(x)
        y[0].retain_grad()
        (y[0] * y[1]).sum().backward()
        return y[0].grad.numpy()

    assert np.array_equal(grad_of_first(lambda t: mg.checkpoint(f, t)), grad_of_first(f))


@pytest.mark.parametrize("used_after", [False, True])
def test_retain_grad_on_an_output_that_another_output_is_computed_from(used_after):
    """y2 = 2x and y1 = y2 + x: y2's gradient is y1's (2), plus its own (3) where the loss uses it, in a plain run and
    in PyTorch's checkpoint alike (NOTE [retain_grad on a checkpoint's output]; minigrad's gave None, or 3)."""
    x0 = mg.randn(3)

    def f(t):
        a = t + t
        return a + t, a

    def grads(fn):
        x = x0.detach().requires_grad_(True)
        y1, y2 = fn(x)
        y2.retain_grad()
        ((y1 * 2).sum() + ((y2 * 3).sum() if used_after else 0)).backward()
        return None if y2.grad is None else y2.grad.numpy()

    plain = grads(f)
    assert np.array_equal(plain, np.full(3, 5.0 if used_after else 2.0))
    assert np.array_equal(grads(lambda t: mg.checkpoint(f, t)), plain)


class Box:
    def __init__(self, t):
        self.t = t


def test_a_tensor_hidden_in_another_object_fails_clearly_at_backward():
    lin = nn.Linear(4, 4)
    out = mg.checkpoint(lambda x: Box(lin(x).tanh()), mg.randn(2, 4))
    assert isinstance(out, Box)  # returned as it is: checkpoint looks into tuples, lists and dicts only
    with pytest.raises(RuntimeError, match=r"'tanh' was recorded inside a checkpoint's forward.*tuples, lists"):
        out.t.sum().backward()


# ----------------------------------------------------------------------------- 3. inputs

def test_tensors_inside_a_list_argument_get_gradients():
    xs = [mg.randn(3, 4, requires_grad=True) for _ in range(3)]

    def f(parts, k, mode=None):
        assert k == 2 and mode is None
        return (parts[0] * parts[1]).tanh() + parts[2] * k

    want = run(lambda: sq(f(xs, 2)), xs)
    assert_same(run(lambda: sq(mg.checkpoint(f, xs, 2, mode=None)), xs), want)


def test_the_same_tensor_passed_twice_and_used_several_times_is_bit_identical():
    lin = nn.Linear(6, 6)
    a = mg.randn(5, 6, requires_grad=True)
    tensors = [a] + params_of(lin)

    def f(u, v):
        return (u * v).tanh() * u + lin(v) * v

    def loss(inside):
        h = lin(a)
        return sq(inside(h, h) + h * h)  # and used after the checkpoint too

    want = run(lambda: loss(f), tensors)
    assert_same(run(lambda: loss(lambda u, v: mg.checkpoint(f, u, v)), tensors), want)


@pytest.mark.parametrize("leaf", [False, True])
def test_an_input_also_captured_by_a_closure(leaf):
    """Once: a false 'backward a second time' error (the recompute's backward ran the input's own record, which
    the outer backward then met released). Now the recompute stops at the input's record, for both uses."""
    lin, inner = nn.Linear(6, 6), nn.Linear(6, 6)
    x = mg.randn(4, 6, requires_grad=True)
    tensors = [x] + params_of(lin, inner)

    def loss(ckpt):
        h = x if leaf else lin(x)

        def g(t):
            return inner(t).tanh() * h  # h captured, and passed as t

        y = mg.checkpoint(g, h) if ckpt else g(h)
        return sq(y + h)

    want = run(lambda: loss(False), tensors)
    assert_same(run(lambda: loss(True), tensors), want)


def test_a_closure_over_another_tensor_that_requires_grad_is_still_refused():
    """A non-input tensor computed before the checkpoint: the record would need its array to stand for it."""
    lin = nn.Linear(4, 4)
    h = lin(mg.randn(2, 4, requires_grad=True))
    with pytest.raises(RuntimeError, match=r"computed before it \(by 'linear'\).*pass it as an argument"):
        mg.checkpoint(lambda y: y.tanh() * h, mg.randn(2, 4))


# ----------------------------------------------------------------------------- 4. the order of the sums

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_input_used_twice_inside_and_again_after_is_bit_identical(dtype):
    """Issue 11, item 3: the plain run adds h's gradients one at a time, those from after the checkpoint first.
    Adding the two from inside first and then their sum (what the checkpoint once did) rounds otherwise; `h * 1.0`
    makes a plain run group them that way, which shows that these numbers are sensitive to the order."""
    lin, inner = nn.Linear(20, 20).to(dtype), nn.Linear(20, 20).to(dtype)
    x = mg.randn(10, 20, dtype=dtype, requires_grad=True)
    tensors = [x] + params_of(lin, inner)

    def f(h):
        return inner(h).tanh() * h  # h used twice inside

    def loss(inside):
        h = lin(x)
        return ((inside(h) + h * h) ** 2).sum()  # and twice after

    want = run(lambda: loss(f), tensors)
    regrouped = run(lambda: loss(lambda h: f(h * 1.0)), tensors)  # x 1.0 is exact; only the grouping changes
    assert not np.array_equal(regrouped[0], want[0]), "the order of the sums does not matter here: the test is vacuous"
    assert_same(run(lambda: loss(lambda h: mg.checkpoint(f, h)), tensors), want)


def test_parameters_used_inside_and_outside_are_bit_identical():
    shared = nn.Linear(8, 8)
    x = mg.randn(4, 8, requires_grad=True)
    tensors = [x] + params_of(shared)

    def f(h):
        return shared(shared(h).tanh()) * h

    def loss(inside):
        h = shared(x)
        return sq(shared(inside(h)) + h)

    want = run(lambda: loss(f), tensors)
    assert_same(run(lambda: loss(lambda h: mg.checkpoint(f, h)), tensors), want)


# ----------------------------------------------------------------------------- 5. nesting

def test_nested_checkpoints_with_several_outputs_and_inputs_used_at_every_level():
    a, b = nn.Linear(8, 8), nn.Linear(8, 8)
    x = mg.randn(4, 8, requires_grad=True)
    tensors = [x] + params_of(a, b)
    calls = collections.Counter()

    def make(ck):
        def inner(h):
            calls["inner"] += 1
            u = a(h)
            return u.tanh(), u * h          # h used twice inside

        def outer(h, scale):
            calls["outer"] += 1
            p, q = ck(inner, h)
            return {"y": b(p) * scale + q * h, "p": p}  # h used again after the inner checkpoint

        def loss():
            h = x.tanh()
            out = ck(outer, h, 0.5)
            return sq(out["y"]) + (out["p"] * h).sum()  # and after the outer one
        return loss

    want = run(make(lambda f, *args: f(*args)), tensors)
    calls.clear()
    got = run(make(mg.checkpoint), tensors)
    assert_same(got, want)
    # outer: forward and recompute; inner: forward, again in outer's recompute, then its own recompute
    assert calls == {"outer": 2, "inner": 3}


# ----------------------------------------------------------------------------- 6. retain_graph

def test_retain_graph_with_several_outputs():
    lin = nn.Linear(4, 4)
    x = mg.randn(3, 4, requires_grad=True)
    tensors = [x] + params_of(lin)

    def f(x):
        h = lin(x)
        return h.tanh(), h.exp()

    y0, y1 = mg.checkpoint(f, x)
    loss = (y0 * y1).sum()
    for t in tensors:
        t.grad = None
    loss.backward(retain_graph=True)
    once = grads_of(tensors)
    loss.backward()
    assert_same(grads_of(tensors), [2 * g for g in once])
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


def test_retain_graph_then_another_output_alone():
    """Two backwards through one checkpoint from different outputs: each recomputes, each adds what the plain
    run adds."""
    lin = nn.Linear(4, 4)
    x = mg.randn(3, 4, requires_grad=True)
    tensors = [x] + params_of(lin)

    def f(x):
        h = lin(x).tanh()
        return h * h, h.exp()

    def both(fn):
        for t in tensors:
            t.grad = None
        y0, y1 = fn(x)
        y0.sum().backward(retain_graph=True)
        y1.mean().backward()
        return grads_of(tensors)

    assert_same(both(lambda t: mg.checkpoint(f, t)), both(f))


# ----------------------------------------------------------------------------- 7. randomness

def test_dropout_before_and_inside_the_checkpoint_replays():
    """PyTorch's RNG test, written again: a dropout before the checkpoint and one inside; restoring the generator
    and running plainly gives the same gradient."""
    for _ in range(3):
        inp = mg.randn(2000, requires_grad=True)
        phase1, phase2 = nn.Dropout(), nn.Dropout()
        state = mg.get_rng_state()
        mg.checkpoint(phase2, phase1(inp)).sum().backward()
        with_checkpoint = inp.grad.numpy().copy()
        mg.set_rng_state(state)
        inp.grad = None
        phase2(phase1(inp)).sum().backward()
        assert np.array_equal(with_checkpoint, inp.grad.numpy())


def test_preserve_rng_state_false_warns_when_the_generator_was_drawn():
    lin, drop = nn.Linear(8, 8), nn.Dropout(0.5)
    x = mg.randn(4, 8, requires_grad=True)

    def noisy(t):
        return drop(lin(t))

    with pytest.warns(UserWarning, match=r"'noisy' drew from minigrad's random generator.*preserve_rng_state=False"):
        y = mg.checkpoint(noisy, x, preserve_rng_state=False)
    y.sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning without a draw, nor with the state preserved
        mg.checkpoint(lin, x, preserve_rng_state=False).sum().backward()
        mg.checkpoint(noisy, x).sum().backward()
        drop.eval()
        mg.checkpoint(noisy, x, preserve_rng_state=False).sum().backward()


# ----------------------------------------------------------------------------- 8. determinism_check

def changes_on_recompute(first, then):
    calls = [0]

    def fn(x):
        calls[0] += 1
        return (first if calls[0] == 1 else then)(x)
    return fn


def saves_3(x):
    return x.tanh().exp().tanh()  # each saves its output


def saves_2(x):
    return x.tanh().exp()


def test_default_check_counts_the_arrays_the_recompute_saves():
    x = mg.randn(5, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"'fn' in backward saved 2 arrays for backward, but the forward saved 3"):
        mg.checkpoint(changes_on_recompute(saves_3, saves_2), x).sum().backward()
    # more arrays: refused where the recompute runs to its end, as PyTorch's; with early stop (the default) it ends
    # once the forward's ops are back, and that is no error (test_with_early_stop_a_recompute_that_saves_more_...)
    with pytest.raises(RuntimeError, match=r"saved 3 arrays for backward, but the forward saved 2"):
        mg.checkpoint(changes_on_recompute(saves_2, saves_3), x, early_stop=False).sum().backward()
    with pytest.raises(RuntimeError, match=r"saved 3 arrays for backward, but the forward saved 2"):
        with mg.utils.checkpoint.set_checkpoint_early_stop(False):
            y = mg.checkpoint(changes_on_recompute(saves_2, saves_3), x)
        y.sum().backward()
    # 'none' skips it: the backward runs through what the recompute made
    mg.checkpoint(changes_on_recompute(saves_3, saves_2), x, determinism_check="none").sum().backward()


@pytest.mark.parametrize("policy", [None, mg.checkpoint_policies.everything_saveable],
                         ids=["no-policy", "everything_saveable"])
def test_with_early_stop_a_recompute_that_saves_more_stops_and_gives_the_forwards_gradients(policy):
    """NOTE [early stop]: a recompute that runs on past the forward's ops (here one more tanh, saving one more array)
    ends once the forward's ops are back, as PyTorch's ends once every saved tensor is back: the extra op does not run
    (no FLOPs), nothing is refused, and the gradients are the forward's, bit for bit; also in a second backward
    (retain_graph), which recomputes again. Once: "saved 3 arrays for backward, but the forward saved 2" (and "ran more
    ops than its forward" with a policy)."""
    x = mg.randn(5, requires_grad=True, dtype="float64")
    saves_2(x).sum().backward()
    want, x.grad = x.grad.numpy().copy(), None
    with mg.profile() as plain:
        mg.checkpoint(saves_2, x, policy=policy).sum().backward()
    assert np.array_equal(x.grad.numpy(), want)
    x.grad = None
    with mg.profile() as prof:
        y = mg.checkpoint(changes_on_recompute(saves_2, saves_3), x, policy=policy)
        y.sum().backward(retain_graph=True)
    assert np.array_equal(x.grad.numpy(), want)
    assert prof.flops("recompute") == plain.flops("recompute")  # the extra tanh did not run
    y.sum().backward()
    assert np.array_equal(x.grad.numpy(), 2 * want)


def test_default_check_compares_each_saved_arrays_dtype_and_shape():
    x = mg.randn(3, 4, requires_grad=True)
    c = mg.randn(3, 4)
    # same output, same number of saved arrays; the first saved array is float64 in the recompute
    dev = x.device
    f = changes_on_recompute(lambda t: t.tanh() * t, lambda t: (t.double().tanh() * t.double()).float())
    with pytest.raises(RuntimeError, match=rf"array 0 for backward, float64 \(3, 4\) on {dev} \(by 'tanh'\), but "
                                           rf"the forward saved float32 \(3, 4\) on {dev} \(by 'tanh'\)"):
        mg.checkpoint(f, x).sum().backward()
    # the same output shape, but mul saved a constant of another shape
    f = changes_on_recompute(lambda t: (t * c).sum(dim=1), lambda t: (t * c[:1]).sum(dim=1))
    with pytest.raises(RuntimeError, match=rf"float32 \(1, 4\) on {dev} \(by 'mul'\).*float32 \(3, 4\) on {dev}"):
        mg.checkpoint(f, x).sum().backward()
    f = changes_on_recompute(lambda t: (t * c).sum(dim=1), lambda t: (t * c[:1]).sum(dim=1))
    mg.checkpoint(f, x, determinism_check="none").sum().backward()  # and 'none' does not look


def test_default_check_still_compares_the_outputs_and_their_number():
    x = mg.randn(3, 4, requires_grad=True)
    f = changes_on_recompute(lambda t: (t.tanh(), t.exp()), lambda t: (t.tanh(),))
    y = mg.checkpoint(f, x)
    with pytest.raises(RuntimeError, match=r"gave 1 tensor outputs that need gradients, but the forward gave 2"):
        (y[0] * y[1]).sum().backward()
    f = changes_on_recompute(lambda t: (t.tanh(), t.exp()), lambda t: (t.tanh(), t[:2].exp()))
    y = mg.checkpoint(f, x)
    with pytest.raises(RuntimeError, match=r"gave output 1 as shape \(2, 4\).*forward gave shape \(3, 4\)"):
        (y[0] * y[1]).sum().backward()


def test_values_check_is_the_stronger_option():
    """Same shapes, other numbers (noise from NumPy's generator, which checkpointing cannot replay): 'default'
    passes, as PyTorch's does; 'values' names the function."""
    def noisy(t):
        return t.tanh() + mg.tensor(np.random.randn(*t.shape).astype("float32")).to(t.dtype)

    x = mg.randn(3, 4, requires_grad=True)
    mg.checkpoint(noisy, x).sum().backward()
    with pytest.raises(RuntimeError, match=r"'noisy' in backward gave different values"):
        mg.checkpoint(noisy, x, determinism_check="values").sum().backward()


# ----------------------------------------------------------------------------- 9. against PyTorch

def both_libraries(arrays, requires_grad):
    """[(name, checkpoint, tensors)] for minigrad and PyTorch, float64 tensors made from the same arrays."""
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    def t_checkpoint(fn, *args, **kwargs):
        return torch_checkpoint(fn, *args, use_reentrant=False, **kwargs)

    mg_tensors = [mg.tensor(a, dtype="float64", requires_grad=r) for a, r in zip(arrays, requires_grad)]
    th_tensors = [torch.tensor(a, dtype=torch.float64, requires_grad=r) for a, r in zip(arrays, requires_grad)]
    return [("minigrad", mg.checkpoint, mg_tensors), ("torch", t_checkpoint, th_tensors)]


def value(t):
    return t.detach().numpy()


def compare(results):
    """results: {library: [array or None, ...]}; minigrad's equal PyTorch's to 1e-10, None in the same places."""
    got, want = results["minigrad"], results["torch"]
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert (a is None) == (b is None), f"result {i}: minigrad {'None' if a is None else 'a value'}, " \
                                           f"PyTorch {'None' if b is None else 'a value'}"
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=f"result {i}")


def random_arrays(*shapes):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s) for s in shapes]


@pytest.mark.torch
def test_against_torch_several_outputs_keyword_and_non_tensor_arguments():
    def f(a, b, scale, c, *, w, tag):
        h = (a @ w).tanh()
        return {"y": h * b + c, "z": [h.exp() * scale, tag], "a": a}

    results = {}
    for lib, ck, (a, b, c, w) in both_libraries(random_arrays((4, 5), (4, 5), (4, 5), (5, 5)),
                                                [True, True, False, True]):
        out = ck(f, a, b, 0.5, c, w=w, tag="t")
        assert out["z"][1] == "t" and out["a"] is a
        loss = (out["y"] * out["y"]).sum() + out["z"][0].mean() + out["a"].sum()
        loss.backward()
        results[lib] = [value(out["y"]), value(out["z"][0]), value(loss)] + \
            [None if t.grad is None else value(t.grad) for t in (a, b, c, w)]
    compare(results)


@pytest.mark.torch
@pytest.mark.parametrize("used", [0, 1])
def test_against_torch_partial_grads(used):
    def f(a, b, w):
        return (a @ w).tanh(), (b @ w).exp()

    results = {}
    for lib, ck, tensors in both_libraries(random_arrays((3, 4), (3, 4), (4, 4)), [True, True, True]):
        out = ck(f, *tensors)
        (out[used] * out[used]).sum().backward()
        results[lib] = [None if t.grad is None else value(t.grad) for t in tensors]
    compare(results)
    assert sum(g is None for g in results["minigrad"]) == 1


@pytest.mark.torch
def test_against_torch_nested_checkpoints():
    def run_with(ck, x, w1, w2):
        def inner(h, w):
            u = h @ w
            return u.tanh(), u * h

        def outer(h, w1, w2):
            p, q = ck(inner, h, w1)
            return (p @ w2) * 0.5 + q * h, p

        h = x.tanh()
        y, p = ck(outer, h, w1, w2)
        return (y * y).sum() + (p * h).sum()

    results = {}
    for lib, ck, tensors in both_libraries(random_arrays((4, 6), (6, 6), (6, 6)), [True, True, True]):
        loss = run_with(ck, *tensors)
        loss.backward()
        results[lib] = [value(loss)] + [value(t.grad) for t in tensors]
    compare(results)


@pytest.mark.torch
def test_against_torch_retain_graph_twice():
    results = {}
    for lib, ck, (x, w) in both_libraries(random_arrays((3, 4), (4, 4)), [True, True]):
        y0, y1 = ck(lambda x, w: ((x @ w).tanh(), (x @ w).exp()), x, w)
        loss = (y0 * y1).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        results[lib] = [value(x.grad), value(w.grad)]
    compare(results)


@pytest.mark.torch
def test_against_torch_an_input_also_captured_by_a_closure():
    results = {}
    for lib, ck, (x, w0, w) in both_libraries(random_arrays((3, 4), (4, 4), (4, 4)), [True, True, True]):
        h = x @ w0

        def g(t):
            return (t @ w).tanh() * h

        y = ck(g, h)
        loss = ((y + h) * (y + h)).sum()
        loss.backward()
        results[lib] = [value(loss)] + [value(t.grad) for t in (x, w0, w)]
    compare(results)


@pytest.mark.torch
def test_against_torch_both_detect_a_recompute_that_saves_fewer_arrays():
    for lib, ck, (x,) in both_libraries(random_arrays((5,)), [True]):
        with pytest.raises(RuntimeError, match="saved"):  # PyTorch: "A different number of tensors was saved"
            ck(changes_on_recompute(saves_3, saves_2), x).sum().backward()


@pytest.mark.torch
def test_against_torch_a_recompute_that_saves_more_is_refused_only_without_early_stop():
    """PyTorch's test_checkpoint_detects_non_determinism (test/test_autograd.py), its parts on the number of saved
    tensors, written again for both libraries: fewer saved is refused; more saved is refused without early stop
    ("trying to save more tensors during recomputation"), and with early stop is not, "the results would be correct
    anyway": the gradients are those of the forward's function. minigrad once refused the last (NOTE [early stop])."""
    torch_set_early_stop = pytest.importorskip("torch").utils.checkpoint.set_checkpoint_early_stop

    def save_3_tensors(x):
        out = x.sin().exp()
        out = out.sin()
        return out

    def save_2_tensors(x):
        return x.sin().exp()

    results = {}
    for lib, ck, (a,) in both_libraries(random_arrays((3,)), [True]):
        set_early_stop = torch_set_early_stop if lib == "torch" else mg.utils.checkpoint.set_checkpoint_early_stop
        with pytest.raises(RuntimeError, match="saved"):  # PyTorch: "A different number of tensors was saved"
            ck(changes_on_recompute(save_3_tensors, save_2_tensors), a).sum().backward()
        with set_early_stop(False):
            with pytest.raises(RuntimeError, match="save"):  # PyTorch: "trying to save more tensors during ..."
                ck(changes_on_recompute(save_2_tensors, save_3_tensors), a).sum().backward()
        a.grad = None
        ck(changes_on_recompute(save_2_tensors, save_3_tensors), a).sum().backward()
        results[lib] = [value(a.grad)]
    compare(results)


@pytest.mark.torch
def test_against_torch_backwards_through_the_outputs_of_the_non_tensor_inputs_outputs_test():
    """PyTorch's test_checkpoint_non_tensor_inputs_outputs (test/test_utils.py), its backwards: through res[1] and
    res[4] with retain_graph=True, through res[6] (t1, an input returned as it is) without, then through res[6] again.
    That test runs use_reentrant=True, where res[6] is an output of the checkpoint's node, which the third backward
    frees: the fourth raises "Trying to backward through the graph a second time". minigrad is the non-reentrant
    variant (use_reentrant=True is refused), where res[6] is t1 itself, as in PyTorch's (checked here): the fourth
    backward runs through no checkpoint and raises in neither. Then the plain run's gradients, as the test checks."""
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    def foo(t1, t2, scale, t3):
        t4 = t1 + t2 * t3
        t5 = t1 * t2 + t3
        t4 *= scale
        t5 *= scale
        return scale, t4, None, True, t5, "bar", t1

    def backwards(res):
        said = []
        for k, keep in ((1, True), (4, True), (6, False), (6, False)):
            try:
                res[k].sum().backward(retain_graph=keep)
                said.append("ran")
            except RuntimeError as e:
                said.append("second time" if "second time" in str(e) else str(e))
        return said

    results = {}
    arrays = [a.ravel() for a in random_arrays((10,), (10,), (10,))]
    for lib, ck, (t1, t2, t3) in both_libraries(arrays, [True, True, False]):
        res = ck(foo, t1, t2, 3, t3)
        assert res[6] is t1 and res[0] == 3 and res[2] is None and res[3] is True and res[5] == "bar"
        assert backwards(res) == ["ran"] * 4
        results[lib] = [value(t1.grad), value(t2.grad)]
        t1.grad = t2.grad = None
        res = foo(t1, t2, 3, t3)
        (res[1].sum() + res[4].sum() + 2 * res[6].sum()).backward()  # res[6] twice, as above
        results[lib] += [value(t1.grad), value(t2.grad)]
    compare(results)
    np.testing.assert_allclose(results["minigrad"][0], results["minigrad"][2], rtol=1e-12)
    t1, t2, t3 = (torch.tensor(a, requires_grad=r) for a, r in zip(arrays, (True, True, False)))
    assert backwards(torch_checkpoint(foo, t1, t2, 3, t3, use_reentrant=True))[3] == "second time"
