"""More random checkpointed programs: the ops and uses that tests/test_checkpoint_programs.py does not generate.

That file's programs break the recompute with reads and writes outside the tape. These use the rest of the ops a
model is made of (split, chunk, unbind, topk, max with indices, gather, index_select, softmax, log_softmax,
layer_norm, gelu, cumsum, sdpa with dropout, embedding, linear, casts, views, recorded in-place writes, setitem and
copy_ of tensors that require grad), each step may ask retain_grad() of what it made, nested checkpoints take two
arguments, and the checkpointed function runs once, twice (two records, two recomputes) or is backpropagated twice
(retain_graph). The checkpointed run gives the plain run's gradients bit for bit, also those of the retained
tensors (NOTE [retain_grad inside a checkpoint], checkpoint/segment.py: they were None), or raises where the plain
run raises, or raises one of the errors documented for what a recompute cannot repeat.
"""
import contextlib
import importlib

import numpy as np
from hypothesis import given, settings, strategies as st

import minigrad as mg
from minigrad import functional as F
from minigrad.checkpoint import is_recomputing, set_checkpoint_early_stop

from on_device import to_host
from test_checkpoint_programs import POLICIES, as_policy, assert_as_plain  # the policies, and what may differ

tape = importlib.import_module("minigrad.tensor")  # the module (mg.tensor is the function)
selective = importlib.import_module("minigrad.checkpoint.policies")  # the module of NOTE [placeholders]

B, D = 3, 4
OPS = ("matmul", "tanh", "add", "mul", "dropout", "split", "chunk", "unbind", "topk", "max", "softmax",
       "log_softmax", "layer_norm", "gelu", "cumsum", "gather", "index_select", "pow", "sqrt", "clamp", "add_",
       "clamp_", "div_", "setitem", "copy_", "expand", "std", "sdpa", "embedding", "linear", "cast", "reshape",
       "slice", "flip", "maximum", "div", "tril", "stack", "where", "mse", "retain")
OP_NAMES = ("matmul", "tanh", "add", "mul", "dropout", "softmax", "layer_norm", "gelu", "cumsum", "index", "linear",
            "embedding", "sdpa", "cast", "pow", "sum", "max", "div", "exp")


def step(sub=st.nothing()):
    plain = st.tuples(st.sampled_from(OPS), st.integers(0, 15), st.integers(0, 15), st.integers(0, 3),
                      st.booleans(), st.just(()))
    nested = st.tuples(st.just("nested"), st.integers(0, 15), st.integers(0, 15), st.integers(0, 4), st.booleans(),
                       sub)
    return plain | nested


programs = st.recursive(st.lists(step(), min_size=1, max_size=7),
                        lambda inner: st.lists(step(inner), min_size=1, max_size=5), max_leaves=12)
policies = st.one_of(st.sampled_from(sorted(POLICIES)), st.sets(st.sampled_from(OP_NAMES)).map(frozenset))


def run(program, pool, w, ckpt, inner_policies, retained):
    """The program on the tensors in pool; `retained` collects, in the forward only, what asked retain_grad()."""
    idx = mg.tensor(np.array([[0, 2, 1, 3], [3, 3, 0, 1], [1, 0, 2, 2]]), dtype="int64")
    rows = mg.tensor(np.array([2, 0, 0]), dtype="int64")
    pool = list(pool)
    for kind, i, j, c, retain, sub in program:
        a, b, W = pool[i % len(pool)], pool[j % len(pool)], w[c % len(w)]
        if kind == "matmul":
            out = a @ W
        elif kind == "tanh":
            out = a.tanh()
        elif kind == "add":
            out = a + b
        elif kind == "mul":
            out = a * b
        elif kind == "dropout":
            out = F.dropout(a, 0.3)
        elif kind == "split":
            p, q = a.split([1, 3], dim=1)
            out = mg.cat([q, p * 2], 1)
        elif kind == "chunk":
            p, q = a.chunk(2, dim=1)
            out = mg.cat([q.tanh(), p], 1)
        elif kind == "unbind":
            r = a.unbind(0)
            out = mg.stack([r[2], r[0] * r[1], r[1]], 0)
        elif kind == "topk":
            out = b * a.topk(2, dim=1)[0].sum(1, keepdim=True)
        elif kind == "max":
            v, k = a.max(1)
            out = b * v.unsqueeze(1) + a.gather(1, k.unsqueeze(1))
        elif kind == "softmax":
            out = a.softmax(-1)
        elif kind == "log_softmax":
            out = a.log_softmax(-1)
        elif kind == "layer_norm":
            out = F.layer_norm(a, (D,), W[0], W[1])
        elif kind == "gelu":
            out = F.gelu(a, approximate="tanh" if c % 2 else "none")
        elif kind == "cumsum":
            out = a.cumsum(1)
        elif kind == "gather":
            out = a.gather(1, idx)
        elif kind == "index_select":
            out = a.index_select(0, rows)
        elif kind == "pow":
            out = a ** 2 if c % 2 else a.pow(3)
        elif kind == "sqrt":
            out = (a * a + 1).sqrt()
        elif kind == "clamp":
            out = a.clamp(-0.5, 0.5)
        elif kind in ("add_", "clamp_", "div_"):  # recorded writes into a fresh tensor
            out = a * 1
            if kind == "add_":
                out.add_(b)
            elif kind == "clamp_":
                out.clamp_(-0.7, 0.7)
            else:
                out.div_(b * b + 1)
        elif kind == "setitem":
            out = a * 1
            out[:, 0] = b[:, 1] * 2
        elif kind == "copy_":
            out = a * 1
            out.copy_(b.flip(0))
        elif kind == "expand":
            out = a[:, :1].expand(B, D) * b
        elif kind == "std":
            out = (a - a.mean(1, keepdim=True)) / (a.std(1, keepdim=True) + 1)
        elif kind == "sdpa":
            q, k = a.reshape(1, 1, B, D), b.reshape(1, 1, B, D)
            out = F.scaled_dot_product_attention(q, k, q, dropout_p=0.2 if c % 2 else 0.0,
                                                 is_causal=c >= 2).reshape(B, D)
        elif kind == "embedding":
            out = F.embedding(idx, W)[:, 0, :] * a
        elif kind == "linear":
            out = F.linear(a, W, W[c % D])
        elif kind == "cast":
            out = a.float().double() if a.dtype == mg.float64 else a.double().float()
        elif kind == "reshape":
            out = a.reshape(D, B).T.reshape(B, D)
        elif kind == "slice":  # a view, also of the checkpoint's argument
            out = a[:, :]
        elif kind == "flip":
            out = a.flip(1)
        elif kind == "maximum":
            out = mg.maximum(a, b)
        elif kind == "div":
            out = a / (b * b + 1)
        elif kind == "tril":
            out = a.tril()
        elif kind == "stack":
            out = mg.stack([a, b], 0).sum(0)
        elif kind == "where":
            out = mg.where(b > 0, a, b)
        elif kind == "mse":
            out = a * F.mse_loss(a, b)
        elif kind == "retain":  # ask again of a tensor made earlier, perhaps before the checkpoint
            out = a
        elif kind == "nested":
            def inner(t, u, sub=sub):
                return run(sub, [t, u], w, ckpt, inner_policies, retained)[0]
            policy = as_policy(inner_policies[c % len(inner_policies)])
            out = mg.checkpoint(inner, a, b, policy=policy) if ckpt else inner(a, b)
        if retain and out.grad_fn is not None:
            out.retain_grad()
            if not is_recomputing():
                retained.append(out)
        pool.append(out)
    return pool[-1], pool[(len(pool) - 1) // 2]


def gradients(program, ckpt, policy, inner_policies, early_stop, check, two_outputs, amp, how):
    """The gradients of x, the weights and the retained tensors, or the exception the run raised."""
    rng = np.random.default_rng(1)
    dtype = "float32" if amp else "float64"
    x = mg.tensor(rng.standard_normal((B, D)), dtype=dtype, requires_grad=True)
    w = [mg.tensor(rng.standard_normal((D, D)) * 0.5, dtype=dtype, requires_grad=True) for _ in range(2)]
    retained = []
    mg.manual_seed(3)  # the same dropout masks in both runs

    def function(t):
        out, other = run(program, [t], w, ckpt, inner_policies, retained)
        return (out, other) if two_outputs else out

    def call(t):
        if ckpt:
            return mg.checkpoint(function, t, policy=as_policy(policy), determinism_check=check)
        return function(t)

    try:
        with set_checkpoint_early_stop(early_stop) if ckpt else contextlib.nullcontext():
            with mg.autocast(mg.default_device()) if amp else contextlib.nullcontext():
                result = call(x)
                out, other = result if two_outputs else (result, x)
                loss = (out * out).sum() + (other * x).sum()
                if how == "twice":  # a second record of the same function, recomputed on its own
                    again = call(x * 0.5)
                    loss = loss + ((again[0] if two_outputs else again) * out).sum()
            if not loss.requires_grad:
                return "no grad"
            if how == "retain_graph":
                loss.backward(retain_graph=True)
            loss.backward()
    except (RuntimeError, ValueError, IndexError) as e:
        return e
    finally:
        assert not tape._watchers and not selective._placeholders, "a checkpoint left its read guards set"
    return [None if t.grad is None else to_host(t.grad).copy() for t in [x] + w + retained]


@settings(max_examples=120, deadline=None)
@given(program=programs, policy=policies, inner=st.lists(policies, min_size=1, max_size=2),
       early_stop=st.booleans(), check=st.sampled_from(["default", "values", "none"]), two_outputs=st.booleans(),
       amp=st.booleans(), how=st.sampled_from([None, "twice", "retain_graph"]))
def test_more_checkpointed_programs_give_the_plain_gradients_or_a_clear_error(program, policy, inner, early_stop,
                                                                              check, two_outputs, amp, how):
    args = (inner, early_stop, check, two_outputs, amp, how)
    assert_as_plain(gradients(program, True, policy, *args), gradients(program, False, None, *args),
                    names="x, w0, w1, retained...")


def test_retain_grad_inside_checkpoints_nested_and_after_they_return():
    """The cases the generator is for, named: retain_grad() inside a checkpointed function, on its argument (the
    recompute's stand-in took the argument's record over), inside a nested one, and on an inner tensor after the
    checkpoint returned; each .grad is the plain run's (each was None)."""
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((3, 4)), rng.standard_normal((4, 4))

    def grads(ckpt, policy=None):
        x = mg.tensor(xv, requires_grad=True)
        w = mg.tensor(wv, requires_grad=True)
        held = []

        def inner(t):
            t.retain_grad()  # the argument, made by the outer function
            h = (t @ w).tanh()
            h.retain_grad()
            held.extend([] if is_recomputing() else [t, h])
            return h * h

        def outer(t):
            t.retain_grad()  # the argument, made before the checkpoint
            g = t.sigmoid()
            held.extend([] if is_recomputing() else [t, g])  # g.retain_grad() comes after the checkpoint returns
            return (mg.checkpoint(inner, g, policy=policy) if ckpt else inner(g)) @ w

        a = x * 2
        y = mg.checkpoint(outer, a, policy=policy) if ckpt else outer(a)
        held[1].retain_grad()
        (y * y).sum().backward()
        assert len(held) == 4 and held[0] is a
        return [to_host(t.grad) for t in [x, w] + held]

    want = grads(False)
    for policy in POLICIES.values():
        got = grads(True, policy)
        for g, v in zip(got, want):
            assert np.array_equal(g, v)


def test_what_a_nested_checkpoints_ops_read_is_made_for_real_in_the_outer_recompute():
    """A checkpoint inside another's forward runs its ops unseen by the outer's cache (it recomputes them itself).
    When it made no record (it returned its argument, or only values needing no gradient), or its ops read a
    tensor from the outer by closure, the outer did not know they read the outer's values: its recompute handed
    out a placeholder there, and the plain-run program was refused ("did not run 'matmul'")."""
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((3, 4)), rng.standard_normal((4, 4))
    keeps_matmul = mg.checkpoint_policies.dots_saveable

    def grads(ckpt, kind):
        x = mg.tensor(xv, requires_grad=True)
        w = mg.tensor(wv, requires_grad=True)

        def outer(t):
            h = t @ w
            s = h.detach()

            def inner(u):
                m = u @ w if kind == "no record" else u * s  # reads h's values, by argument or by closure
                return (u, m.detach()) if kind == "no record" else m

            inside = mg.checkpoint(inner, h, policy=keeps_matmul) if ckpt else inner(h)
            return inside[0] if kind == "no record" else inside

        y = mg.checkpoint(outer, x, policy=keeps_matmul) if ckpt else outer(x)
        (y * y).sum().backward()
        return [to_host(t.grad) for t in (x, w)]

    for kind in ("no record", "closure"):
        for g, v in zip(grads(True, kind), grads(False, kind)):
            assert np.array_equal(g, v)
