"""The memory tricks together: checkpointing (every policy, nested, checkpoint_sequential, dropout replayed) under
autocast (bfloat16, float16 with a GradScaler), gradient accumulation (micro_batch_size, steps, micro_batches with
masks and ignore_index, both normalize modes), train and eval, grad modes inside the checkpointed function, a weight
shared by several segments and in-place writes, on generated small models.

tests/test_checkpoint_programs.py and tests/test_checkpoint_more_programs.py generate programs for checkpointing alone;
tests/test_amp.py the scaler alone; tests/test_accumulate.py accumulation alone. Here each generated model runs its
training step twice, plainly and checkpointed, with the same switches, and the two agree bit for bit: the losses,
every gradient, the generator's state after, the scaler's scale and found_inf, the optimizer's state and weights after
its step, BatchNorm's running statistics; and the ledger counts the same forward and backward FLOPs and the same bytes
of parameters, gradients and optimizer state (NOTE [checkpoint]: the recompute's FLOPs are apart, under 'recompute').
Accumulated micro-batches give the full batch's gradient to float64's rounding.
"""
import contextlib

import numpy as np
import pytest
from hypothesis import assume, example, given, settings, strategies as st

import minigrad as mg
from minigrad import functional as F, nn
from minigrad.accumulate import micro_batch_slices
from minigrad.checkpoint import set_checkpoint_early_stop

from on_device import to_host
from test_checkpoint_programs import POLICIES, as_policy, assert_as_plain

DEVICE = mg.default_device()
N, D, C = 6, 4, 3  # batch, width, classes
LAYERS = ("linear", "gelu", "tanh", "dropout", "layer_norm", "batch_norm", "no_grad_scale", "enable_grad_inside",
          "inference_mode", "inplace", "view", "residual", "two_outputs", "int_output", "view_of_input", "write_input", "autocast_inside")


class Model(nn.Module):
    """A chain of generated layers over a few modules; a layer naming a module another layer names shares it."""

    def __init__(self, layers, dtype):
        super().__init__()
        self.lin = nn.ModuleList([nn.Linear(D, D) for _ in range(3)])
        self.ln = nn.LayerNorm(D)
        self.bn = nn.BatchNorm1d(D)
        self.drop = nn.Dropout(0.25)
        self.head = nn.Linear(D, C)
        self.to(dtype)
        self.layers = layers  # [(kind, which module)]

    def fns(self):
        return [self._fn(kind, k) for kind, k in self.layers]

    def _fn(self, kind, k):
        lin = self.lin[k % 3]

        def f(h):
            if kind == "linear":
                return lin(h)
            if kind == "gelu":
                return F.gelu(h, approximate="tanh" if k % 2 else "none")
            if kind == "tanh":
                return h.tanh()
            if kind == "dropout":
                return self.drop(h)
            if kind == "layer_norm":
                return self.ln(h)
            if kind == "batch_norm":
                return self.bn(h)
            if kind == "no_grad_scale":  # a constant read under no_grad: the same in the recompute
                with mg.no_grad():
                    s = h.abs().mean(1, keepdim=True) + 1
                return h / s
            if kind == "enable_grad_inside":
                with mg.no_grad():
                    with mg.enable_grad():
                        return lin(h).sigmoid() * h
            if kind == "inference_mode":
                with mg.inference_mode():
                    m = (h.detach() > 0).to(h.dtype)
                return h * m + 0.1 * h
            if kind == "inplace":  # recorded writes into a fresh tensor
                out = lin(h) * 1
                out.mul_(0.5)
                out.add_(h.to(out.dtype))  # in-place ops are not autocast: one dtype
                return out
            if kind == "view":
                return h.t().reshape(D, h.shape[0]).t() * 1.5
            if kind == "residual":
                return h + lin(h).tanh()
            if kind == "two_outputs":  # a tuple inside, one part used
                a, b = h.split([1, D - 1], dim=1)
                return mg.cat([b, a * 2], 1)
            if kind == "view_of_input":  # the function's result is a view of its argument
                return h[:, :]
            if kind == "write_input":  # a write into the argument: recorded where h or the bias requires grad
                if k == 0:
                    h.mul_(1.5)
                else:
                    h.add_(lin.bias.to(h.dtype))
                return h * 1
            if kind == "autocast_inside":  # a region of its own, on or off, whatever the caller's
                with mg.autocast(DEVICE, enabled=k != 1):
                    return lin(h.to(lin.weight.dtype) if k == 1 else h).to(h.dtype)
            if kind == "int_output":  # a value that needs no gradient, taken along
                idx = h.detach().argmax(1)
                return h + 0.01 * F.one_hot(idx, D).to(h.dtype)
            raise AssertionError(kind)
        f.__name__ = f"{kind}{k}"
        return f


def run_chain(fns, h, how, policy, inner_policy):
    """The chain on h: plainly, or checkpointed as `how` says."""
    if how == "plain":
        for f in fns:
            h = f(h)
        return h
    if how == "sequential":
        return mg.checkpoint_sequential(fns, min(2, len(fns)), h, policy=policy)
    if how == "each":
        for f in fns:
            h = mg.checkpoint(f, h, policy=policy)
        return h
    if how == "nested":  # the first half inside a checkpoint of its own, inside one of the whole chain
        half = max(1, len(fns) // 2)

        def inner(t):
            for f in fns[:half]:
                t = f(t)
            return t

        def outer(t):
            t = mg.checkpoint(inner, t, policy=inner_policy)
            for f in fns[half:]:
                t = f(t)
            return t, {"rows": t.shape[0]}  # a tuple, with a value that is no tensor
        return mg.checkpoint(outer, h, policy=policy)[0]
    raise AssertionError(how)


def batch(dtype, pad, device):
    rng = np.random.default_rng(5)
    y = rng.integers(0, C, N)
    if pad:
        y[[1, 4]] = -100
    return (mg.tensor(rng.standard_normal((N, D)), dtype=dtype, device=device), mg.tensor(y, device=device),
            int((y != -100).sum()))


class Net(nn.Module):
    """The model as mg.accumulate calls it: the chain (plain or checkpointed), then the head."""

    def __init__(self, model, how, policy, inner_policy):
        super().__init__()
        self.model, self.how, self.policy, self.inner_policy = model, how, policy, inner_policy
        self.fns = model.fns()

    def forward(self, xb):
        return self.model.head(run_chain(self.fns, xb, self.how, self.policy, self.inner_policy))


def ce_sum(out, target, mask=None):
    losses = F.cross_entropy(out, target, reduction="none")
    return (losses if mask is None else mg.where(mask, losses, 0.0)).sum()


def train_step(layers, how, policy, inner_policy, amp, accum, train, early_stop, extra=None, dtype="float32",
               device=DEVICE, padding=True):
    """One training step: the loss(es), every gradient, the generator after, the scaler, the optimizer's state and
    weights after its step, BatchNorm's statistics and the ledger's counts; or the error the run raised.
    accum: None (the whole batch), (k, how) k micro-batches through a loop of scaler.scale(loss).backward(), or
    ("accumulate", split, normalize) through mg.accumulate. extra: "overflow" (a scale float16 overflows: the step is
    skipped), "toggle" (train mode flips after the first backward), "retain" (backward twice, retain_graph).
    On 'meta' only the ledger's counts and timeline come back (there are no values). padding: two targets are
    ignore_index."""
    mg.manual_seed(0)
    model = Model(layers, dtype).to(device)
    model.train(train)
    net = Net(model, how, policy, inner_policy)
    opt = mg.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = mg.amp.GradScaler(init_scale=2.0 ** (30 if extra == "overflow" else 8), enabled=amp == "float16")
    x, y, total = batch(dtype, padding, device)
    host = (lambda a: None) if device == "meta" else (lambda a: to_host(a).copy())  # a copy: the ledger's own dies
    mask = y != -100

    def region():
        kind = "cpu" if device == "meta" and DEVICE == "cpu" else DEVICE  # meta follows the device it stands for
        return mg.autocast(kind, dtype=getattr(mg, amp)) if amp else contextlib.nullcontext()

    def backward(loss):
        scaler.scale(loss).backward(retain_graph=extra == "retain")
        if extra == "retain":
            scaler.scale(loss).backward()
        if extra == "toggle":
            model.train(not train)

    mg.manual_seed(7)
    losses = []
    try:
        with mg.profile(model, opt) as prof, set_checkpoint_early_stop(early_stop):
            opt.zero_grad()
            if accum is None:
                with region():
                    loss = F.cross_entropy(net(x), y)
                backward(loss)
                losses.append(host(loss))
            elif accum[0] == "accumulate":
                _, split, normalize = accum
                with region():
                    if split == "micro_batches":  # uneven, with masks: (inputs, targets, mask)
                        mbs = [(x[:1], y[:1], mask[:1]), (x[1:4], y[1:4], mask[1:4]), (x[4:], y[4:], mask[4:])]
                        result = mg.accumulate(net, ce_sum, micro_batches=mbs, normalize=normalize)
                    else:
                        result = mg.accumulate(net, ce_sum, x, y, normalize=normalize, **{split: 4 if split ==
                                                                                          "micro_batch_size" else 3})
                losses.append(np.float64(result.loss))
            else:
                k = accum[0]
                for s in micro_batch_slices(N, steps=k):
                    with region():
                        loss = F.cross_entropy(net(x[s]), y[s], reduction="sum") / total
                    backward(loss)
                    losses.append(host(loss))
            grads = [None if p.grad is None else to_host(p.grad).copy() for p in model.parameters()] \
                if device != "meta" else None  # a copy: unscale_ writes into .grad
            scaler.step(opt)
            found_inf = [s["found_inf"] for s in scaler._per_optimizer.values()]
            scaler.update()
    except (RuntimeError, ValueError) as e:
        return e
    counts = dict(flops=(prof.flops("forward"), prof.flops("backward")),
                  bytes=[prof.peak_bytes(c) for c in ("parameters", "gradients", "optimizer")],
                  timeline=prof.timeline(), recompute=prof.flops("recompute"))  # these two: for meta's twin
    if device == "meta":
        return counts
    state = [to_host(v) for p in model.parameters() for v in opt.state.get(p, {}).values()
             if mg.backend.is_array(getattr(v, "_data", v))]
    return dict(counts, losses=losses, grads=grads, rng=mg.get_rng_state(), scale=scaler.get_scale(),
                found_inf=found_inf, weights=[to_host(p) for p in model.parameters()], state=state,
                stats=[to_host(model.bn.running_mean), to_host(model.bn.running_var)])


def assert_same(got, want):
    if isinstance(want, Exception) or isinstance(got, Exception):
        assert_as_plain(got, want)
        return
    for key in set(want) - {"timeline", "recompute"}:  # the checkpointed run's differ, as they should
        a, b = got[key], want[key]
        if key in ("losses", "grads", "weights", "state", "stats"):
            assert len(a) == len(b), key
            for i, (u, v) in enumerate(zip(a, b)):
                assert (u is None) == (v is None), f"{key} {i}: one run gave none"
                if v is not None:
                    assert u.dtype == v.dtype and np.array_equal(u, v, equal_nan=True), \
                        f"{key} {i} differs: max |diff| {np.nanmax(np.abs(u.astype('float64') - v.astype('float64')))}"
        else:
            assert a == b, f"{key}: {a} checkpointed, {b} plain"


layer = st.tuples(st.sampled_from(LAYERS), st.integers(0, 2))
policies = st.one_of(st.sampled_from(sorted(POLICIES)),
                     st.sets(st.sampled_from(("linear", "matmul", "gelu", "tanh", "dropout", "layer_norm", "mul",
                                              "add", "cast"))).map(frozenset))


def low_dtype(amp, accum):
    """The autocast dtype drawn, where the run can take it: mg.accumulate takes no GradScaler (float16 needs one),
    and on 'cuda' bfloat16 is refused (README, "Half the bytes"): float16 there, with the scaler."""
    if accum is not None and accum[0] == "accumulate" and amp is not None:
        return None if DEVICE == "cuda" else "bfloat16"
    return "float16" if DEVICE == "cuda" and amp == "bfloat16" else amp


accums = st.one_of(st.none(), st.tuples(st.integers(2, 3), st.just("loop")),
                  st.tuples(st.just("accumulate"), st.sampled_from(["micro_batch_size", "steps", "micro_batches"]),
                            st.sampled_from(["items", "mean_of_means"])))


@settings(max_examples=int(__import__("os").environ.get("COMPOSE_EXAMPLES", 80)), deadline=None)
@given(layers=st.lists(layer, min_size=1, max_size=6), how=st.sampled_from(["sequential", "each", "nested"]),
       policy=policies, inner=policies, amp=st.sampled_from([None, "bfloat16", "float16"]), accum=accums,
       train=st.booleans(), early_stop=st.booleans(), extra=st.sampled_from([None, "overflow", "toggle", "retain"]))
# found by it: a recompute under autocast, entering the weight-cast cache again, cached the placeholder of a cast it
# skipped (the first use of linear0, whose linear the policy keeps); the second use, which runs, read it and raised
@example(layers=[("linear", 0)] * 4, how="sequential", policy=frozenset({"linear"}), inner="core_attention",
         amp="bfloat16", accum=None, train=False, early_stop=True, extra=None)
def test_a_checkpointed_training_step_is_the_plain_one_bit_for_bit(layers, how, policy, inner, amp, accum, train,
                                                                    early_stop, extra):
    args = (as_policy(policy), as_policy(inner), low_dtype(amp, accum), accum, train, early_stop, extra)
    want = train_step(layers, "plain", *args)
    got = train_step(layers, how, *args)
    assert_same(got, want)


@settings(max_examples=int(__import__("os").environ.get("COMPOSE_EXAMPLES", 50)), deadline=None)
@given(layers=st.lists(layer, min_size=1, max_size=6), how=st.sampled_from(["plain", "sequential", "each", "nested"]),
       policy=policies, inner=policies, amp=st.sampled_from([None, "bfloat16", "float16"]), accum=accums,
       train=st.booleans(), early_stop=st.booleans(), extra=st.sampled_from([None, "toggle", "retain"]))
def test_a_composed_step_on_meta_is_the_real_one_event_by_event(layers, how, policy, inner, amp, accum, train,
                                                                early_stop, extra):
    """The 'meta' device predicts the same steps without computing: the ledger's timeline (every event's bytes by
    category), its peak and the FLOPs of each phase are the real run's."""
    args = (layers, how, as_policy(policy), as_policy(inner), low_dtype(amp, accum), accum, train, early_stop, extra)
    # no target is ignore_index: on meta F.cross_entropy counts every target (docs/ledger.md, 'The meta device')
    real, meta = train_step(*args, padding=False), train_step(*args, device="meta", padding=False)
    if isinstance(real, Exception):
        assert isinstance(meta, Exception), f"the real run raised ({real}), the meta run did not"
        return
    assert not isinstance(meta, Exception), f"the meta run raised: {meta!r}"
    assume(not any(real["found_inf"]))  # a float16 overflow skips the real step; meta has no values: never inf
    for i, (r, m) in enumerate(zip(real["timeline"], meta["timeline"])):
        assert r == m, f"event {i}: {m} on meta, {r} for real"
    assert len(real["timeline"]) == len(meta["timeline"])
    assert (meta["flops"], meta["recompute"], meta["bytes"]) == (real["flops"], real["recompute"], real["bytes"])


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_weight_shared_by_a_plain_and_a_checkpointed_segment_needs_one_gradient_buffer(policy):
    """NOTE [who owns a gradient]: a tied weight's second gradient is added into its first in place. A checkpoint's
    recompute adds it inside its record's backward, and the tape's walk still held the gradients of the record before
    (the plain segment's, which became the weight's .grad), so the sum went into a second buffer: 160 bytes of
    gradients at the peak for the plain run's 80."""
    def peak(ckpt):
        mg.manual_seed(0)
        lin = nn.Linear(D, D).to(DEVICE)
        x = mg.randn(N, D)
        with mg.profile(lin) as prof:
            h = mg.checkpoint_sequential([lin, lin], 2, x, policy=POLICIES[policy]) if ckpt else lin(lin(x))
            h.sum().backward()
        return prof.peak_bytes("gradients"), to_host(lin.weight.grad)

    (plain, want), (got, grad) = peak(False), peak(True)
    assert plain == got == (D * D + D) * 4
    assert np.array_equal(grad, want)


@settings(max_examples=int(__import__("os").environ.get("COMPOSE_EXAMPLES", 30)), deadline=None)
@given(layers=st.lists(layer.filter(lambda l: l[0] not in ("dropout", "batch_norm", "write_input")), min_size=1,
                      max_size=5),
       how=st.sampled_from(["plain", "sequential", "each", "nested"]), policy=policies,
       split=st.sampled_from(["micro_batch_size", "steps", "micro_batches"]), train=st.booleans())
def test_accumulated_micro_batches_give_the_full_batchs_gradient_also_checkpointed(layers, how, policy, split, train):
    """mg.accumulate over a checkpointed model (padding, masks, an uneven split): the full batch's gradient, in
    float64 to its rounding (NOTE [normalising by items], accumulate.py)."""
    args = (layers, how, as_policy(policy), None, None)
    full = train_step(*args, None, train, True, dtype="float64")
    acc = train_step(*args, ("accumulate", split, "items"), train, True, dtype="float64")
    assert not isinstance(full, Exception) and not isinstance(acc, Exception), (full, acc)
    assert np.allclose(acc["losses"][0], full["losses"][0], rtol=1e-12, atol=0)
    for a, b in zip(acc["grads"], full["grads"]):
        assert (a is None) == (b is None)
        if b is not None:
            assert np.abs(a - b).max() <= 1e-12 * max(np.abs(b).max(), 1e-300), np.abs(a - b).max()
