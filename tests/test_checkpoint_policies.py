"""Selective checkpointing: mg.checkpoint(..., policy=...) and mg.checkpoint_policies.

What is checked, and against what:
  bit-identical    gradients (np.array_equal) against the plain run for every policy and a policy of
                   one's own: MLPs cut by checkpoint_sequential (float32, float64), GPT blocks with dropout,
                   several outputs, an input used inside and after, an in-place write, nesting, retain_graph
  memory, FLOPs    mg.profile: nothing_saveable is the plain checkpoint event for event; everything_saveable
                   recomputes 0 FLOPs and keeps the plain run's activations plus the inputs; dots_saveable
                   recomputes exactly the non-matmul FLOPs and lies between the two in memory and FLOPs;
                   the core-attention split recomputes exactly attention's T x T part (4 B T^2 C + 8 B nh T^2)
  the README       its table of twelve GPT blocks under each policy, run again on 'meta', number for number
  the rule         which op shapes the core-attention policy recomputes
  errors           a recompute that runs other ops, a bad policy, the determinism checks kept
  PyTorch          gradients against torch's selective checkpointing with the same policy
"""

import importlib
import os
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, ops
from minigrad.checkpoint import DOTS, save_anything_except_core_attention
from minigrad.gpt import Block, GPTConfig
from minigrad.schedules import segment_bounds

P = mg.checkpoint_policies
POLICIES = ["nothing_saveable", "everything_saveable", "dots_saveable", "save_anything_except_core_attention",
            "own"]


def own_policy(op_name, input_shapes, output_shape):
    """A policy of one's own: keep the pointwise ops, recompute the products (the opposite of dots_saveable)."""
    return op_name in ("gelu", "tanh", "add", "softmax")


def policy_named(name):
    return own_policy if name == "own" else getattr(P, name)


def gelu_mlp(n_blocks, width=16, dtype="float32"):
    """[Linear(w, 4w), GELU, Linear(4w, w), Tanh] * n_blocks, flat: a transformer's MLP, expanded 4x."""
    layers = []
    for _ in range(n_blocks):
        layers += [nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width), nn.Tanh()]
    for m in layers:
        m.to(dtype)
    return layers


def params_of(modules):
    seen = {}
    for m in modules:
        for p in m.parameters():
            seen.setdefault(id(p), p)
    return list(seen.values())


def grads(loss_fn, tensors):
    for t in tensors:
        t.grad = None
    loss_fn().backward()
    return [t.grad.numpy().copy() for t in tensors]


def assert_bit_identical(got, want):
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and np.array_equal(a, b), f"gradient {i} differs: max |diff| {np.abs(a - b).max()}"
    assert any(np.any(b != 0) for b in want), "every gradient is zero: the comparison proves nothing"


def run_chain(layers, x):
    for f in layers:
        x = f(x)
    return x


# ----------------------------------------------------------------------------- GPT blocks

B, T, C, NH = 2, 16, 32, 4


def gpt_blocks(n, dropout=0.1, **kw):
    mg.manual_seed(0)
    cfg = GPTConfig(n_embd=C, n_head=NH, block_size=T, dropout=dropout, **kw)
    return [Block(cfg) for _ in range(n)]


def blocks_loss(blocks, x, policy="plain", seed=1):
    """Each block under its own checkpoint (Hugging Face's gradient_checkpointing), or plainly."""
    mg.manual_seed(seed)  # the same dropout masks in every run
    h = x
    for b in blocks:
        h = b(h) if policy == "plain" else mg.checkpoint(b, h, policy=policy)
    return (h * h).mean()


def profiled(loss_fn):
    with mg.profile() as prof:
        loss_fn().backward()
    return prof


# ----------------------------------------------------------------------------- 1. bit-identical gradients

@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mlp_gradients_are_bit_identical_for_every_policy(policy, dtype):
    layers = gelu_mlp(4, dtype=dtype)
    x = mg.randn(8, 16, dtype=dtype, requires_grad=True)
    tensors = params_of(layers) + [x]
    want = grads(lambda: (run_chain(layers, x) ** 2).mean(), tensors)
    got = grads(lambda: (mg.checkpoint_sequential(layers, 4, x, policy=policy_named(policy)) ** 2).mean(), tensors)
    assert_bit_identical(got, want)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_gpt_blocks_with_dropout_are_bit_identical_for_every_policy(policy, attn):
    blocks = gpt_blocks(3, attn_implementation=attn)
    x = mg.randn(B, T, C, requires_grad=True)
    tensors = params_of(blocks) + [x]
    want = grads(lambda: blocks_loss(blocks, x), tensors)
    got = grads(lambda: blocks_loss(blocks, x, policy_named(policy)), tensors)
    assert_bit_identical(got, want)


@pytest.mark.parametrize("policy", POLICIES)
def test_several_outputs_an_input_used_after_and_an_in_place_write(policy):
    lin1, lin2 = nn.Linear(8, 8), nn.Linear(8, 8)
    x = mg.randn(4, 8, requires_grad=True)
    tensors = params_of([lin1, lin2]) + [x]

    def f(t):
        h = lin1(t).tanh()
        h += 1  # recorded out of place (NOTE [in-place]); replayed as such
        return lin2(h) * t, h.sum(-1)

    def loss(ckpt):
        a, s = mg.checkpoint(f, x, policy=policy_named(policy)) if ckpt else f(x)
        return (a * x).sum() + (s * s).sum()

    assert_bit_identical(grads(lambda: loss(True), tensors), grads(lambda: loss(False), tensors))


@pytest.mark.parametrize("policy", ["everything_saveable", "dots_saveable"])
def test_nested_checkpoints_and_retain_graph(policy):
    layers = gelu_mlp(3, dtype="float64")
    x = mg.randn(4, 16, dtype="float64", requires_grad=True)
    tensors = params_of(layers) + [x]
    inner = lambda t: mg.checkpoint_sequential(layers[4:], 2, t, policy=policy_named(policy))

    def outer(t):
        return inner(run_chain(layers[:4], t))

    want = grads(lambda: (run_chain(layers, x) ** 2).sum(), tensors)
    assert_bit_identical(grads(lambda: (mg.checkpoint(outer, x, policy=policy_named(policy)) ** 2).sum(), tensors),
                         want)
    # a second backward through the same graph recomputes everything (the forward's records went to the first)
    for t in tensors:
        t.grad = None
    loss = (mg.checkpoint(outer, x, policy=policy_named(policy)) ** 2).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert_bit_identical([t.grad.numpy() for t in tensors], [w * 2 for w in want])


# ----------------------------------------------------------------------------- 2. memory and FLOPs, measured

def test_nothing_saveable_is_todays_checkpoint_event_for_event():
    layers = gelu_mlp(4)
    x = mg.randn(8, 16)
    never = lambda name, inputs, output: False  # a policy of one's own that saves nothing: the cache, empty
    runs = []
    for policy in (None, P.nothing_saveable, never):
        for p in params_of(layers):
            p.grad = None
        runs.append(profiled(lambda: (mg.checkpoint_sequential(layers, 4, x, policy=policy) ** 2).mean()))
    today = runs[0].timeline()
    assert runs[0].flops("recompute") > 0
    for prof in runs[1:]:
        assert prof.timeline() == today
        assert prof.flops("recompute") == runs[0].flops("recompute")


@pytest.mark.parametrize("segments", [2, 4])
def test_mlp_memory_and_recompute_for_each_policy(segments):
    layers = gelu_mlp(4)
    x = mg.randn(8, 16)  # needs no gradient, but the first linear keeps it all the same
    plain = profiled(lambda: (run_chain(layers, x) ** 2).mean())
    prof = {name: profiled(lambda p=policy_named(name): (mg.checkpoint_sequential(layers, segments, x, policy=p) ** 2)
                           .mean()) for name in POLICIES[:3]}
    act = {name: p.peak_bytes("activations") for name, p in prof.items()}
    recompute = {name: p.flops("recompute") for name, p in prof.items()}
    # everything_saveable: nothing runs again, and what is kept is the plain run's (each segment's input is
    # already kept by the linear that reads it)
    assert recompute["everything_saveable"] == 0 and prof["everything_saveable"].calls("recompute") == 0
    assert act["everything_saveable"] == plain.peak_bytes("activations")
    # dots_saveable: the products do not run again; every other op does, with the same FLOPs as today
    dots, nothing = prof["dots_saveable"], prof["nothing_saveable"]
    assert dots.calls("recompute", "linear") == 0 and dots.flops("recompute", "matmul") == 0
    # the bias adds of the Linears that nothing_saveable runs again: each checkpointed segment's but its last,
    # which only the Tanh after it reads (NOTE [recompute what backward reads])
    bounds = segment_bounds(len(layers), segments)[:-1]
    bias_adds = sum(8 * m.out_features for lo, hi in bounds for m in layers[lo:hi - 2] if isinstance(m, nn.Linear))
    assert recompute["dots_saveable"] == recompute["nothing_saveable"] - nothing.flops("recompute", "matmul") - bias_adds
    assert 0 < recompute["dots_saveable"] < recompute["nothing_saveable"]
    assert act["nothing_saveable"] < act["dots_saveable"] < act["everything_saveable"]


def core_attention_flops(n_blocks):
    """Forward FLOPs of attention's T x T part, per formulas.attention_matmul_flops and ops.flops_table():
    q k^T and att v, 2 B T T C each; then per (B, nh, T, T) element: the scale's mul 1, masked_fill 0,
    softmax 5, dropout 2."""
    return n_blocks * (4 * B * T * T * C + 8 * B * NH * T * T)


def non_dot_flops(n_blocks):
    """Forward FLOPs of a GPT block's ops that are not products: per (B, T, C) element, two layer norms 7
    each, GELU 5 on 4C, two dropouts 2 each, two residual adds 1 each (40); per (B, nh, T, T) element the
    8 above. Linear's bias adds count as 'add' under the linear, saved with it."""
    return n_blocks * (40 * B * T * C + 8 * B * NH * T * T)


def test_gpt_blocks_memory_and_recompute_for_each_policy():
    n = 4
    blocks = gpt_blocks(n)
    x = mg.randn(B, T, C, requires_grad=True)
    plain = profiled(lambda: blocks_loss(blocks, x))
    prof = {name: profiled(lambda p=P.__dict__[name]: blocks_loss(blocks, x, p)) for name in POLICIES[:4]}
    act = {name: p.peak_bytes("activations") for name, p in prof.items()}
    recompute = {name: p.flops("recompute") for name, p in prof.items()}
    # nothing_saveable recomputes every forward FLOP of the blocks but each block's last three ops: the residual
    # add reads nothing in backward, the dropout before it only its mask (drawn again), and so the MLP's c_proj
    # has no reader left (NOTE [recompute what backward reads])
    with mg.profile() as forward:
        blocks_loss(blocks, x)
    loss_flops = 2 * B * T * C  # (h * h).mean(): a mul and a sum per element
    tail = 2 * B * T * 4 * C * C + B * T * C + 2 * B * T * C + B * T * C  # c_proj and its bias, dropout, add
    assert recompute["nothing_saveable"] == forward.flops("forward") - loss_flops - n * tail
    # everything_saveable: no FLOP again (the causal mask's triu records nothing and runs again: 0 FLOPs);
    # the plain run's activations plus each block's input, less the scalar 1/sqrt(hs) that the scaling's
    # mul keeps in the plain run: made by no op, the recompute makes it again (NOTE [selective checkpoint])
    every = prof["everything_saveable"]
    # what runs again is the causal mask's triu (it records nothing) and views of kept arrays, which cost nothing
    # and are made again so that they view the recompute's arrays (NOTE [writes the tape does not record])
    views = {cls.name for cls in vars(ops).values() if isinstance(cls, type) and getattr(cls, "returns_view", False)}
    ran = {op for (phase, op), count in every._calls.items() if phase == "recompute" and count}
    assert recompute["everything_saveable"] == 0 and every.calls("recompute", "tri") == n and ran - {"tri"} <= views
    assert ran - {"tri"}, "the GPT's views of its kept arrays (the heads' split) run again"
    assert act["everything_saveable"] == plain.peak_bytes("activations") + n * x.data.nbytes - n * 4
    # dots_saveable: exactly the FLOPs that are not matrix products run again, but each block's last dropout
    # and residual add, which nothing reads again
    assert recompute["dots_saveable"] == non_dot_flops(n) - n * (2 + 1) * B * T * C
    assert prof["dots_saveable"].calls("recompute", "matmul") == prof["dots_saveable"].calls("recompute", "linear") == 0
    # Korthikanti et al.'s split: exactly attention's T x T part runs again, nothing else
    core = prof["save_anything_except_core_attention"]
    # (but att @ v: the projection's input, its output transposed and copied, is kept, so nothing reads it again:
    # NOTE [recompute what backward reads])
    assert recompute["save_anything_except_core_attention"] == core_attention_flops(n) - n * 2 * B * T * T * C
    assert {op: core.calls("recompute", op) for op in ("matmul", "mul", "masked_fill", "softmax", "dropout", "linear",
                                                        "layer_norm", "gelu")} == \
        dict(matmul=n, mul=n, masked_fill=n, softmax=n, dropout=n, linear=0, layer_norm=0, gelu=0)
    # the orderings
    assert 0 == recompute["everything_saveable"] < recompute["dots_saveable"] < recompute["nothing_saveable"]
    assert recompute["save_anything_except_core_attention"] < recompute["nothing_saveable"] / 10
    assert act["nothing_saveable"] < act["dots_saveable"] < act["everything_saveable"]
    assert act["nothing_saveable"] < act["save_anything_except_core_attention"] < act["everything_saveable"]


README_TABLE = re.compile(r"^\| (no checkpointing|`(\w+)`) \| ([\d.]+) MiB \| (0|([\d.]+) M \(([\d.]+)%\)) \|$", re.M)


def test_the_readmes_table_of_policies_is_what_the_profile_measures():
    """README, "Recompute only what is cheap": its table of twelve GPT blocks, run again on 'meta' (the same bytes and
    FLOPs as a real run, NOTE in backend/meta.py; 0.7 s where the real run takes 2.4)."""
    readme = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")).read()
    setting = re.search(r"Twelve of the small GPT's blocks \(C = (\d+), (\d+) heads, B = (\d+), T = (\d+), dropout "
                        r"([\d.]+)\), each under its own\ncheckpoint, `h.sum\(\).backward\(\)`", readme)
    rows = README_TABLE.findall(readme)
    assert setting and [r[1] or r[0] for r in rows] == ["no checkpointing", "nothing_saveable", "dots_saveable",
                                                         "save_anything_except_core_attention", "everything_saveable"]
    c, heads, batch, t, dropout = (float(g) if "." in g else int(g) for g in setting.groups())
    with mg.device("meta"):
        mg.manual_seed(0)
        blocks = [Block(GPTConfig(n_embd=c, n_head=heads, block_size=t, dropout=dropout)) for _ in range(12)]
        x = mg.randn(batch, t, c, requires_grad=True)
        for label, name, mib, recompute, mflops, share in rows:
            with mg.profile() as prof:
                h = x
                for b in blocks:
                    h = b(h) if not name else mg.checkpoint(b, h, policy=getattr(P, name))
                h.sum().backward()
            measured = prof.flops("recompute")
            assert f"{prof.peak_bytes('activations') / 2**20:.2f}" == mib, (label, prof.peak_bytes("activations"))
            if recompute == "0":
                assert measured == 0, label
            else:
                assert (f"{measured / 1e6:.1f}", f"{100 * measured / prof.flops('forward'):.1f}") == (mflops, share), \
                    (label, measured, prof.flops("forward"))


def test_saved_records_are_released_during_backward():
    """What a policy keeps drains in backward: nothing is left once it is over."""
    blocks = gpt_blocks(2)
    x = mg.randn(B, T, C, requires_grad=True)
    for name in POLICIES:
        prof = profiled(lambda: blocks_loss(blocks, x, policy_named(name)))
        assert prof.current_bytes("activations") == 0, name


# ----------------------------------------------------------------------------- 3. the policies

def test_the_policies_are_exported_under_jax_names():
    assert mg.checkpoint_policies is P
    assert sorted(vars(P)) == sorted(POLICIES[:4])
    assert DOTS == ("matmul", "linear")
    shapes = ((2, 8, 16), (16, 16))
    assert not P.nothing_saveable("linear", shapes, (2, 8, 16))
    assert P.everything_saveable("softmax", shapes, (2, 8, 16))
    assert P.dots_saveable("linear", shapes, (2, 8, 16)) and P.dots_saveable("matmul", shapes, (2, 8, 16))
    assert not P.dots_saveable("gelu", ((2, 8, 16),), (2, 8, 16))


@pytest.mark.parametrize("op, inputs, output, saved", [
    ("matmul", ((2, 4, 16, 8), (2, 4, 8, 16)), (2, 4, 16, 16), False),  # q @ k^T: the scores
    ("mul", ((2, 4, 16, 16), ()), (2, 4, 16, 16), False),               # scaled
    ("masked_fill", ((2, 4, 16, 16),), (2, 4, 16, 16), False),
    ("softmax", ((2, 4, 16, 16),), (2, 4, 16, 16), False),
    ("dropout", ((2, 4, 16, 16),), (2, 4, 16, 16), False),
    ("matmul", ((2, 4, 16, 16), (2, 4, 16, 8)), (2, 4, 16, 8), False),   # att @ v reads them
    ("linear", ((2, 16, 32), (32, 32)), (2, 16, 32), True),              # a square weight is no score
    ("matmul", ((16, 16), (16, 16)), (16, 16), True),                    # nor a 2-d square product
    ("add", ((2, 16, 32), (2, 16, 32)), (2, 16, 32), True),
    ("transpose", ((2, 16, 4, 8),), (2, 4, 16, 8), True),
    ("sdpa", ((2, 4, 16, 16),) * 3, (2, 4, 16, 16), True),              # the fused op keeps no T x T array
])
def test_the_core_attention_rule(op, inputs, output, saved):
    assert save_anything_except_core_attention(op, inputs, output) is saved


def test_a_policy_sees_each_op_with_its_shapes():
    seen = []

    def spy(op_name, input_shapes, output_shape):
        seen.append((op_name, input_shapes, output_shape))
        return op_name == "linear"

    lin = nn.Linear(8, 4)
    x = mg.randn(3, 8)
    mg.checkpoint(lambda t: lin(t).tanh(), x, policy=spy).sum().backward()
    assert seen == [("linear", ((3, 8), (4, 8), (4,)), (3, 4)), ("tanh", ((3, 4),), (3, 4))]  # asked once, in forward


# ----------------------------------------------------------------------------- 4. errors and checks

def test_a_recompute_that_runs_other_ops_is_refused():
    lin = nn.Linear(8, 8)
    calls = []

    def moody(t):
        calls.append(1)
        h = lin(t)
        return h.tanh() if len(calls) == 1 else h.sigmoid()  # another op the second time

    x = mg.randn(4, 8)
    for check in ("default", "none"):  # the order is checked always: the replay depends on it
        calls.clear()
        y = mg.checkpoint(moody, x, policy=P.dots_saveable, determinism_check=check)
        with pytest.raises(RuntimeError, match=r"recomputing 'moody' in backward ran 'sigmoid' as its op 1, where the "
                                               r"forward ran 'tanh'.*same ops in the same order"):
            y.sum().backward()


def test_a_recompute_that_stops_early_is_refused():
    lin = nn.Linear(8, 8)
    calls = []

    def shorter(t):
        calls.append(1)
        h = lin(t)
        return h.tanh().exp() if len(calls) == 1 else h.exp()

    y = mg.checkpoint(shorter, mg.randn(4, 8), policy=P.everything_saveable, determinism_check="none")
    with pytest.raises(RuntimeError, match="ran 'exp' as its op 1, where the forward ran 'tanh'"):
        y.sum().backward()


def test_values_check_compares_what_is_recomputed_and_trusts_what_is_replayed():
    lin = nn.Linear(8, 8)
    x = mg.randn(4, 8)
    # everything replayed: the outputs are the forward's by construction, and the check passes
    mg.checkpoint(lambda t: lin(t).tanh(), x, policy=P.everything_saveable,
                  determinism_check="values").sum().backward()
    shift = [0.0]

    def drifting(t):
        return (lin(t) + shift[0]).tanh()

    y = mg.checkpoint(drifting, x, policy=P.dots_saveable, determinism_check="values")
    shift[0] = 1.0  # changes what the recomputed add and tanh give
    with pytest.raises(RuntimeError, match="gave different values than the forward"):
        y.sum().backward()


@pytest.mark.parametrize("bad", ["dots_saveable", 3])
def test_a_policy_must_be_a_function(bad):
    with pytest.raises(TypeError, match="policy must be None or a function policy") as e:
        mg.checkpoint(lambda t: t.tanh(), mg.randn(2, requires_grad=True), policy=bad)
    assert "mg.checkpoint_policies" in str(e.value)
    if bad == "dots_saveable":
        assert "(mg.checkpoint_policies.dots_saveable)" in str(e.value)
    with pytest.raises(TypeError, match="checkpoint_sequential: policy"):
        mg.checkpoint_sequential([nn.Tanh()], 1, mg.randn(2), policy=bad)


def test_context_fn_points_to_policy():
    with pytest.raises(TypeError, match="pass policy="):
        mg.checkpoint(lambda t: t.tanh(), mg.randn(2, requires_grad=True), context_fn=None)


# ----------------------------------------------------------------------------- 5. PyTorch

def test_gradients_match_torch_selective_checkpointing():
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    layers = gelu_mlp(2, width=8, dtype="float64")
    x = mg.randn(4, 8, dtype="float64", requires_grad=True)
    tensors = params_of(layers) + [x]
    got = grads(lambda: (mg.checkpoint(run_chain, layers, x, policy=P.dots_saveable) ** 2).sum(), tensors)

    tt = [torch.tensor(t.detach().numpy(), requires_grad=True) for t in tensors]
    weights, tx = tt[:-1], tt[-1]
    mm = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in mm else CheckpointPolicy.PREFER_RECOMPUTE

    def f(h):
        for i in range(0, len(weights), 4):
            h = torch.nn.functional.gelu(torch.nn.functional.linear(h, weights[i], weights[i + 1]))
            h = torch.tanh(torch.nn.functional.linear(h, weights[i + 2], weights[i + 3]))
        return h

    out = checkpoint(f, tx, use_reentrant=False, context_fn=lambda: create_selective_checkpoint_contexts(policy))
    (out ** 2).sum().backward()
    for a, b in zip(got, tt):
        np.testing.assert_allclose(a, b.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_on_meta_the_same_bytes_and_flops_as_on_cpu():
    """A policy needs no values: on the 'meta' device a step counts what the real one does, byte for byte."""
    got = {}
    for device in ("cpu", "meta"):
        with mg.device(device):
            blocks = gpt_blocks(2)
            x = mg.randn(B, T, C, requires_grad=True)
        for name in POLICIES[:4]:
            prof = profiled(lambda: blocks_loss(blocks, x, P.__dict__[name]))
            got[device, name] = prof.timeline(), prof.flops("recompute")
    for name in POLICIES[:4]:
        assert got["meta", name] == got["cpu", name], name


def test_the_cache_switch_is_a_context_manager_with_a_query():
    from minigrad.checkpoint.policies import caching
    from minigrad.tensor import active_cache
    assert active_cache() is None
    seen = []
    with pytest.raises(ZeroDivisionError):
        with caching("outer"):
            with caching("inner"):
                seen.append(active_cache())
            seen.append(active_cache())
            1 / 0
    assert seen == ["inner", "outer"] and active_cache() is None
    lin = nn.Linear(4, 4)
    mg.checkpoint(lambda t: (seen.append(active_cache()), lin(t))[1], mg.randn(2, 4), policy=P.dots_saveable).sum()
    assert type(seen[-1]).__name__ == "OpCache" and active_cache() is None


def test_the_cache_answers_what_the_tape_asks_and_nothing_else():
    """NOTE [the cache asks, the tape answers]: the tape calls a checkpoint's cache only through tensor.Cache's
    questions, and its defaults are what the tape does without one. One the tape asks through the switch (keep's
    pack), two the cache's op mode asks, around each op (NOTE [op modes]); `replaying`, which the in-place writes
    read, every op mode declares (OpMode.replaying), and the Tensor's face asks the active modes, not the cache."""
    import ast
    import inspect
    import textwrap
    from minigrad.checkpoint.policies import OpCache
    from minigrad.tensor import Cache
    asked = set()
    for name in ("modes", "tape", "args", "methods", "tensor", "factories"):
        module = importlib.import_module(f"minigrad.tensor.{name}")
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "cache":
                asked.add(node.attr)  # _on.cache.<question>
    assert asked == {"keeps"}
    write = inspect.getsource(importlib.import_module("minigrad.tensor.methods").InPlace._write)
    assert "m.replaying for m in _on.modes" in write and "replaying" in vars(importlib.import_module(
        "minigrad.tensor.modes").OpMode)
    asked.add("replaying")
    for cls in (Cache, *OpCache.__mro__[:OpCache.__mro__.index(Cache)]):
        if "__op__" in vars(cls):
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__op__)))
            mode_asks = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                         and isinstance(n.value, ast.Name) and n.value.id == "self"}
            assert mode_asks == {"replayed", "ran"}, (cls, mode_asks)
            asked |= mode_asks
    assert asked == {"replayed", "ran", "keeps", "replaying"}
    assert all(hasattr(Cache, name) for name in asked) and all(hasattr(OpCache, name) for name in asked)
    c = Cache()
    assert c.replayed(None, (), {}) is None and c.keeps(None, ()) is None and c.replaying is False
    # a checkpoint with a cache that answers as the default does gives a plain run's gradients
    lin = nn.Linear(4, 4)
    x = mg.randn(3, 4, requires_grad=True)
    from minigrad.checkpoint.policies import caching
    with caching(Cache()):
        lin(x).tanh().sum().backward()
    g = x.grad.numpy().copy()
    x.grad = None
    lin(x).tanh().sum().backward()
    assert (x.grad.numpy() == g).all()
