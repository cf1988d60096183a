"""Checkpointing random small programs: gradients bit-identical to the plain run's, or a clear error.

NOTE [reads outside the tape] (tensor/tape.py), NOTE [placeholders] and NOTE [writes the tape does not record]
(checkpoint/policies.py): a checkpoint's recompute skips the ops whose outputs backward does not read and hands
back what a policy kept, so anything the recompute does not run must never be visible outside the tape. The programs here are made to
break that: they read values between ops (comparisons, masks, where, masked_fill, boolean indexing, .item()
for control flow, max, norm), write in place inside and outside the tape (recorded, under no_grad, through
detach, through a view, into the checkpoint's argument, into its output after it returned), draw dropout masks,
and nest checkpoints, under every policy (and random ones), with early stop on and off and both determinism
checks. For each, the checkpointed run gives the plain run's gradients bit for bit, or, where the plain run
raises, raises too, or raises one of the documented errors for what a recompute cannot repeat (a write into
its argument, a write into its output after the forward). A recompute that lets Python read a placeholder
fails this: it either computes other gradients, or trips the placeholder guard, whose error is not allowed.
"""
import contextlib
import importlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minigrad as mg
from minigrad import functional as F
from minigrad.checkpoint import set_checkpoint_early_stop

tape = importlib.import_module("minigrad.tensor")  # the module (mg.tensor is the function)
selective = importlib.import_module("minigrad.checkpoint.policies")  # the module of NOTE [placeholders]

B, D = 3, 4
THRESHOLDS = (-0.5, 0.0, 0.3, 1.0)
POLICIES = {"none": None, "dots": mg.checkpoint_policies.dots_saveable,
            "everything": mg.checkpoint_policies.everything_saveable,
            "core_attention": mg.checkpoint_policies.save_anything_except_core_attention}
OPS = ("matmul", "tanh", "relu", "sigmoid", "exp", "add", "mul", "dropout", "view",
       "where", "mul_mask", "masked_fill", "bool_index", "item_branch", "max", "norm",
       "inplace", "setitem", "nograd_write", "detach_write", "view_write")
OP_NAMES = ("matmul", "tanh", "relu", "sigmoid", "exp", "add", "mul", "dropout", "where", "masked_fill", "index",
            "index_put", "transpose", "sum", "max", "cast")
# what a checkpoint may refuse where the plain run works: a recompute cannot repeat a write into its argument
# inside the function, nor start from an output written after the forward; and a checkpoint keeps its arguments
# for its recompute, so writing one before backward is refused even where the ops inside would not have saved it
ALLOWED = ("wrote in place into a tensor argument", "modified in place after the forward",
           "'checkpoint' saved its input", "'checkpoint' inside the checkpointed")


def step(sub=st.nothing()):
    plain = st.tuples(st.sampled_from(OPS), st.integers(0, 15), st.integers(0, 15), st.integers(0, 3), st.just(()))
    nested = st.tuples(st.just("nested"), st.integers(0, 15), st.just(0), st.integers(0, 4), sub)
    return plain | nested


programs = st.recursive(st.lists(step(), min_size=1, max_size=6),
                        lambda inner: st.lists(step(inner), min_size=1, max_size=6), max_leaves=12)
policies = st.one_of(st.sampled_from(sorted(POLICIES)), st.sets(st.sampled_from(OP_NAMES)).map(frozenset))


def as_policy(choice):
    if isinstance(choice, frozenset):  # keep the ops named, recompute the others: a mix
        return lambda op_name, input_shapes, output_shape: op_name in choice
    return POLICIES[choice]


def run(program, x, weights, ckpt, policies_inside):
    """The program on x: each step makes a new tensor from earlier ones, or writes one in place."""
    pool = [x]
    for kind, i, j, c, sub in program:
        a, b = pool[i % len(pool)], pool[j % len(pool)]
        thr = THRESHOLDS[c]
        if kind == "matmul":
            out = a @ weights[c % len(weights)]
        elif kind in ("tanh", "relu", "sigmoid"):
            out = getattr(a, kind)()
        elif kind == "exp":
            out = (a * 0.5).exp()
        elif kind == "add":
            out = a + b
        elif kind == "mul":
            out = a * b
        elif kind == "dropout":
            out = F.dropout(a, 0.4)
        elif kind == "view":
            out = a.transpose(0, 1).transpose(0, 1)
        elif kind == "where":
            out = mg.where(b > thr, a, 0.01 * a)
        elif kind == "mul_mask":
            out = a * (b > thr)
        elif kind == "masked_fill":
            out = a.masked_fill(b < thr, 0.5)
        elif kind == "bool_index":
            out = a * b[b > thr].sum()
        elif kind == "item_branch":
            out = a * 2.0 if b.sum().item() > thr else a.tanh()
        elif kind == "max":
            out = a * b.max(1, keepdim=True)[0]
        elif kind == "norm":
            out = a / (b.norm() + 1)
        elif kind == "inplace":  # recorded: the tensor takes the new record, its old array stays with its readers
            if a is x:
                a = pool[i % len(pool)] = a * 1
            a.mul_(1.5)
            continue
        elif kind == "setitem":
            out = a * 1
            out[0] = b[1]
        elif kind == "nograd_write":
            with mg.no_grad():
                a.add_(0.25 * (c + 1))
            continue
        elif kind == "detach_write":
            a.detach().mul_(1.25)
            continue
        elif kind == "view_write":
            with mg.no_grad():
                a[c % B] *= 0.5
            continue
        elif kind == "nested":
            def inner(t, sub=sub):
                return run(sub, t, weights, ckpt, policies_inside)[0]
            if ckpt:
                out = mg.checkpoint(inner, a, policy=as_policy(policies_inside[c % len(policies_inside)]))
            else:
                out = inner(a)
        pool.append(out)
    return pool[-1], pool[(len(pool) - 1) // 2]


def gradients(program, ckpt, policy, inner_policies, early_stop, check, two_outputs, post_write, amp=False):
    """The gradients of x and the weights (fresh copies each run), or the exception the run raised. amp: float32
    under mg.autocast (the forward; backward after it), whose products run in the low precision."""
    rng = np.random.default_rng(1)
    dtype = "float32" if amp else "float64"
    x = mg.tensor(rng.standard_normal((B, D)), dtype=dtype, requires_grad=True)
    weights = [mg.tensor(rng.standard_normal((D, D)) * 0.5, dtype=dtype, requires_grad=True) for _ in range(2)]
    mg.manual_seed(3)  # the same dropout masks in both runs

    def function(t):
        out, other = run(program, t, weights, ckpt, inner_policies)
        return (out, other) if two_outputs else out

    try:
        with set_checkpoint_early_stop(early_stop) if ckpt else contextlib.nullcontext():
            with mg.autocast(mg.default_device()) if amp else contextlib.nullcontext():
                if ckpt:
                    result = mg.checkpoint(function, x, policy=as_policy(policy), determinism_check=check)
                else:
                    result = function(x)
                out, other = result if two_outputs else (result, x)
                if post_write == "no_grad":
                    with mg.no_grad():
                        out.mul_(2)
                elif post_write == "detach":
                    other.detach().add_(1)
                loss = (out * out).sum() + (other * x).sum()
            if not loss.requires_grad:
                return "no grad"
            loss.backward()  # after the autocast region, as it belongs
    except (RuntimeError, ValueError, IndexError) as e:
        return e
    finally:
        assert not tape._watchers and not selective._placeholders, "a checkpoint left its read guards set"
    return [t.grad.numpy().copy() if t.grad is not None else None for t in [x] + weights]


@settings(max_examples=250, deadline=None)
@given(program=programs, policy=policies, inner=st.lists(policies, min_size=1, max_size=2),
       early_stop=st.booleans(), check=st.sampled_from(["default", "values"]), two_outputs=st.booleans(),
       post_write=st.sampled_from([None, None, "no_grad", "detach"]))
def test_a_checkpointed_program_gives_the_plain_gradients_or_a_clear_error(program, policy, inner, early_stop, check,
                                                                            two_outputs, post_write):
    compare(program, policy, (inner, early_stop, check, two_outputs, post_write))


@settings(max_examples=60, deadline=None)
@given(program=programs, policy=policies, inner=st.lists(policies, min_size=1, max_size=2),
       early_stop=st.booleans(), check=st.sampled_from(["default", "values"]), two_outputs=st.booleans(),
       post_write=st.sampled_from([None, None, "no_grad", "detach"]))
def test_under_autocast_too(program, policy, inner, early_stop, check, two_outputs, post_write):
    """The same programs in float32 under mg.autocast: the recompute casts as the forward did (it enters the
    forward's autocast policy, and a weight's uses are records from the weight: NOTE [the weight-cast cache])."""
    compare(program, policy, (inner, early_stop, check, two_outputs, post_write), amp=True)


def compare(program, policy, args, amp=False):
    assert_as_plain(gradients(program, True, policy, *args, amp=amp), gradients(program, False, None, *args, amp=amp))


def assert_as_plain(got, want, names="x, w0, w1, ..."):
    """The checkpointed run's gradients (or error) against the plain run's: the same bit for bit, or both raise,
    or the checkpointed one raises one of the ALLOWED errors (tests/test_checkpoint_more_programs.py uses it too)."""
    if isinstance(want, Exception):
        assert isinstance(got, Exception), f"the plain run raised ({want}), the checkpointed one did not"
        return
    if isinstance(got, Exception):
        assert isinstance(got, RuntimeError) and any(s in str(got) for s in ALLOWED), f"unexpected error: {got!r}"
        return
    if isinstance(want, str):
        assert got == want
        return
    assert len(got) == len(want), "the runs gave different numbers of gradients"
    for k, (g, w) in enumerate(zip(got, want)):
        assert (g is None) == (w is None), f"gradient {k}: one run gave none ({names})"
        if w is not None:
            assert g.dtype == w.dtype and np.array_equal(g, w, equal_nan=True), \
                f"gradient {k} differs: max |diff| {np.nanmax(np.abs(g - w))}"


def test_the_programs_reach_the_cases_they_are_for():
    """The generator is not idle: a program with every kind of read and write, checkpointed under every policy
    with early stop, gives the plain gradients (and they are not all zero)."""
    program = [("matmul", 0, 0, 0, ()), ("add", 1, 1, 0, ()), ("nograd_write", 2, 0, 0, ()),
               ("where", 2, 2, 1, ()), ("matmul", 3, 0, 1, ()), ("item_branch", 4, 4, 1, ()),
               ("mul_mask", 5, 2, 2, ()), ("add", 6, 6, 0, ()), ("detach_write", 7, 0, 0, ()), ("view", 7, 0, 0, ()),
               ("view_write", 8, 0, 1, ()), ("masked_fill", 8, 5, 1, ()),
               ("nested", 9, 0, 0, [("matmul", 0, 0, 0, ()), ("bool_index", 1, 1, 1, ()), ("tanh", 2, 0, 0, ())])]
    want = gradients(program, False, None, ["dots"], True, "default", True, None)
    assert isinstance(want, list) and any(np.any(w != 0) for w in want)
    for policy in list(POLICIES) + [frozenset({"matmul", "where"})]:
        got = gradients(program, True, policy, ["everything", "none"], True, "default", True, None)
        assert isinstance(got, list), got
        for g, w in zip(got, want):
            assert np.array_equal(g, w)
    # under autocast the products run in bfloat16 (or float16), so the gradients are not float32's, and the
    # checkpointed runs give the plain autocast run's, to the bit
    want = gradients(program, False, None, ["dots"], True, "default", True, None, amp=True)
    assert isinstance(want, list) and all(w.dtype == np.float32 for w in want)
    assert any(not np.allclose(w, v, rtol=1e-6, atol=0) for w, v in zip(
        want, [a.astype(np.float32) for a in gradients(program, False, None, ["dots"], True, "default", True, None)]))
    for policy in list(POLICIES) + [frozenset({"matmul", "where"})]:
        got = gradients(program, True, policy, ["everything", "none"], True, "default", True, None, amp=True)
        assert isinstance(got, list), got
        for g, w in zip(got, want):
            assert np.array_equal(g, w)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_read_the_recompute_would_not_make_again_raises_not_a_placeholder(policy):
    """A function that reads a value in its recompute that its forward did not read: the read sees no
    placeholder; it raises, naming the op and the fix."""
    calls = [0]
    w = mg.randn(4, 4, dtype="float64", requires_grad=True)

    def sneaky(t):
        calls[0] += 1
        h = t @ w
        if calls[0] > 1:  # only in the recompute, and with no op: the ops run are the forward's
            h.tolist()
        return h + 1.0  # an add reads nothing in backward: nothing needs the matmul's output

    x = mg.randn(3, 4, dtype="float64")
    y = mg.checkpoint(sneaky, x, policy=POLICIES[policy])
    with pytest.raises(RuntimeError, match="did not run 'matmul'.*set_checkpoint_early_stop") as e:
        (y * y).sum().backward()
    assert "sneaky" in str(e.value)
    assert not selective._placeholders
