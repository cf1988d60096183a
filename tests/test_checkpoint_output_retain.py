"""retain_grad() on the outputs of a checkpoint with several outputs, in generated programs (NOTE [retain_grad on a
checkpoint's output], checkpoint/segment.py): where one output is computed from another inside the function, the
other's .grad must hold what it gets inside as well as after, as a plain run's (and PyTorch's checkpoint's) does.
Each program builds values inside the function from its arguments and a weight, returns several of them, asks
retain_grad() of some outputs (outside, and of the tensors it returns inside), uses some after the checkpoint, and runs
one or two backwards (retain_graph): every retained .grad and every leaf's .grad must be the plain run's, bit for
bit."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigrad as mg
from minigrad.checkpoint import is_recomputing

N = 3
OPS = ("add", "mul", "tanh", "matmul", "scale", "sub")


def _apply(kind, a, b, w):
    return {"add": lambda: a + b, "mul": lambda: a * b, "tanh": lambda: a.tanh(), "matmul": lambda: a @ w,
            "scale": lambda: a * 0.75, "sub": lambda: a - b}[kind]()


programs = st.fixed_dictionaries({
    "steps": st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=7),
    "outs": st.lists(st.integers(0, 50), min_size=2, max_size=4),   # which values the function returns
    "retain": st.lists(st.booleans(), min_size=4, max_size=4),      # which outputs ask retain_grad()
    "inside": st.lists(st.booleans(), min_size=4, max_size=4),      # which the function asks it of, too
    "use": st.lists(st.integers(0, 3), min_size=1, max_size=4),     # which outputs the loss reads after
    "twice": st.booleans(),                                         # a second backward (retain_graph)
})


def _function(program, w, asked_inside):
    def f(x, y):
        values = [x, y]
        for kind, i, j in program["steps"]:
            values.append(_apply(kind, values[i % len(values)], values[j % len(values)], w))
        made = values[2:]
        picked = []
        for k in program["outs"]:  # distinct tensors made inside: what the checkpoint stands for
            t = made[k % len(made)]
            if all(t is not p for p in picked):
                picked.append(t)
        for t, ask in zip(picked, program["inside"]):
            if ask:
                t.retain_grad()
                if not is_recomputing():  # the forward's tensor, the one a plain run returns
                    asked_inside.append(t)
        return tuple(picked)
    return f


def _grads(program, checkpointed):
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal((N, N)), dtype="float64", requires_grad=True)
    y = mg.tensor(rng.standard_normal((N, N)), dtype="float64", requires_grad=True)
    w = mg.tensor(rng.standard_normal((N, N)), dtype="float64", requires_grad=True)
    asked_inside = []
    f = _function(program, w, asked_inside)
    outs = mg.checkpoint(f, x, y) if checkpointed else f(x, y)
    outs = outs if isinstance(outs, tuple) else (outs,)
    retained = [o for o, r in zip(outs, program["retain"]) if r]
    for o in retained:
        o.retain_grad()
    loss = sum(((outs[k % len(outs)] * (1.0 + 0.5 * n)) ** 2).sum() for n, k in enumerate(program["use"]))
    for _ in range(2 if program["twice"] else 1):
        loss.backward(retain_graph=program["twice"])
    return [None if t.grad is None else t.grad.numpy() for t in [x, y, w] + retained + asked_inside]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs)
def test_retained_outputs_of_a_checkpoint_get_the_plain_runs_gradients(program):
    plain, ckpt = _grads(program, False), _grads(program, True)
    assert len(plain) == len(ckpt)
    for p, c in zip(plain, ckpt):
        assert (p is None) == (c is None)
        if p is not None:
            assert p.dtype == c.dtype and np.array_equal(p, c), "not the plain run's gradient, bit for bit"


def test_an_in_place_write_after_retain_grad_moves_the_request_on():
    """PyTorch's rule: retain_grad() follows the tensor to the write's record; the output's old gradient goes nowhere."""
    def grads(checkpointed):
        x = mg.tensor([1.0, -2.0, 0.5], dtype="float64", requires_grad=True)

        def f(t):
            a = t * 2.0
            return a + t, a
        y1, y2 = mg.checkpoint(f, x) if checkpointed else f(x)
        y2.retain_grad()
        y2.mul_(3.0)
        ((y1 * 2.0).sum() + (y2 * 5.0).sum()).backward()
        return y2.grad.numpy(), x.grad.numpy()

    (g2, gx), (c2, cx) = grads(False), grads(True)
    assert np.array_equal(g2, np.full(3, 5.0)) and np.array_equal(c2, g2) and np.array_equal(cx, gx)


def test_a_tensor_the_function_retained_and_the_output_for_it_both_get_the_whole_gradient():
    """A plain run's y2 is the function's own tensor: asked inside and outside, one .grad, 5. The checkpoint's output
    stands for it: both tensors get 5 (the request from inside gave way to the output's: None, at first)."""
    def grads(checkpointed):
        inner = []
        x = mg.tensor([1.0, -2.0, 0.5], dtype="float64", requires_grad=True)

        def f(t):
            a = t * 2.0
            a.retain_grad()
            if not is_recomputing():
                inner.append(a)
            return a + t, a
        y1, y2 = mg.checkpoint(f, x) if checkpointed else f(x)
        y2.retain_grad()
        ((y1 * 2.0).sum() + (y2 * 3.0).sum()).backward()
        return inner[0].grad.numpy(), y2.grad.numpy()

    plain, ckpt = grads(False), grads(True)
    assert np.array_equal(plain[0], np.full(3, 5.0)) and np.array_equal(plain[1], plain[0])
    assert np.array_equal(ckpt[0], plain[0]) and np.array_equal(ckpt[1], plain[1])
    assert not np.shares_memory(ckpt[0], ckpt[1])  # two .grads, two buffers (NOTE [who owns a gradient])
