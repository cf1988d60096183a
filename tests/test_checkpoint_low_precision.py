"""Checkpointing in float16 and bfloat16: gradients bit-identical to the plain run's.

The 2-byte ops compute in float32 a block of rows at a time (backend.in_float32, NOTE [2-byte rows]), add up in
float32 (NOTE [2-byte sums]), take a Python number beside a 2-byte tensor as written (NOTE [a number beside 2-byte
floats]), and mg.autocast casts inputs and caches its weight casts (NOTE [the weight-cast cache]). A recompute must
give the forward's numbers to the bit through all of that. Generated transformer-ish chains (linear, layer_norm,
GELU both ways, softmax, log_softmax, sdpa, residual blocks, dropout, numbers beside tensors, sums, means, cumsum)
run in float16 and bfloat16 tensors and in float32 under mg.autocast, cut into segments under mg.checkpoint with
every policy, nested, or under checkpoint_sequential, early stop on and off, determinism_check='values'; each is
compared with the plain run bit for bit: the output, every leaf's .grad, and the random generator's state after
backward. The ledger: the checkpointed run counts 'recompute' FLOPs (those of the segments' forwards, when it
recomputes everything), the same forward and backward FLOPs as the plain run, and, without a policy, its
activations peak no higher than the plain run's, but for each input a checkpoint keeps that the segment's first op
would not have kept (a policy may keep outputs the plain run frees: it may cost more).

The block of rows is made small (rows._BLOCK) so that every case spans several blocks; one case spans several at
the real size.
"""
import contextlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minigrad as mg
from minigrad import functional as F
from minigrad.backend import rows
from minigrad.checkpoint import set_checkpoint_early_stop
from on_device import to_host

DEVICE = mg.default_device()
B, T, H = 2, 5, 2
POLICIES = {"none": None, "dots": mg.checkpoint_policies.dots_saveable,
            "everything": mg.checkpoint_policies.everything_saveable,
            "core_attention": mg.checkpoint_policies.save_anything_except_core_attention}
# does each step's first op keep its input array for backward (so a checkpoint keeping it costs nothing more)?
# layer_norm keeps x-hat, not x
STEPS = {"linear": True, "ln": False, "gelu": True, "gelu_tanh": True, "softmax": False, "log_softmax": False,
         "attn": True, "mlp": False, "dropout": False, "number": False, "center": False, "sum_scale": True,
         "cumsum": False, "sigmoid": False}
CASTS_FIRST = {"linear", "attn"}  # under autocast these keep a float16 copy of their input, not the input
MODES = ["float16", "bfloat16", "autocast_float16", "autocast_bfloat16"]
RUNNABLE = [m for m in MODES if DEVICE != "cuda" or "bfloat16" not in m]  # CuPy has no bfloat16


def skip_unsupported(mode):
    if DEVICE == "cuda" and "bfloat16" in mode:
        pytest.skip("CuPy has no bfloat16")


def leaves(mode, D, seed=1):
    rng = np.random.default_rng(seed)
    dtype = "float32" if mode.startswith("autocast") else mode

    def t(shape, scale=1.0, shift=0.0):
        return mg.tensor(rng.standard_normal(shape) * scale + shift, dtype=dtype, requires_grad=True)
    x = t((B, T, D))
    params = {"w": [t((D, D), D ** -0.5) for _ in range(2)] if D <= 64 else [], "b": [t((D,), 0.1) for _ in range(2)],
              "g": [t((D,), 0.1, 1.0) for _ in range(2)], "beta": [t((D,), 0.1) for _ in range(2)]}
    return x, params


def make_step(kind, k, p):
    b, g, beta = p["b"][k], p["g"][k], p["beta"][k]

    def step(h):
        w = p["w"][k] if p["w"] else None  # none at the real block size's width (no linear there)
        D = h.shape[-1]
        if kind == "linear":
            return F.linear(h, w, b)
        if kind == "ln":
            return F.layer_norm(h, (D,), g, beta)
        if kind in ("gelu", "gelu_tanh"):
            return F.gelu(h, approximate="tanh" if kind == "gelu_tanh" else "none")
        if kind == "softmax":
            return F.softmax(h, -1) * 3.0
        if kind == "log_softmax":
            return F.log_softmax(h, -1)
        if kind == "attn":  # a residual attention block: q = h's heads, k and v through the weights
            heads = lambda t: t.reshape(B, T, H, D // H).transpose(1, 2)
            q, kk, v = heads(h), heads(F.linear(h, w)), heads(F.linear(h, p["w"][1 - k], b))
            a = F.scaled_dot_product_attention(q, kk, v, is_causal=bool(k), dropout_p=0.2 * k)
            return h + a.transpose(1, 2).reshape(B, T, D)
        if kind == "mlp":
            return h + F.linear(F.gelu(F.layer_norm(h, (D,), g, beta), approximate="tanh" if k else "none"), w, b)
        if kind == "dropout":
            return F.dropout(h, 0.3)
        if kind == "number":
            return (h * 0.1 + 3.3) / 2.7 - 1.1 if k else 0.7 - h * 1.3
        if kind == "center":
            return h - h.mean(-1, keepdim=True) + h.mean() * 0.3
        if kind == "sum_scale":
            return h * (h.sum(-1, keepdim=True) * 0.01).tanh() + h.sum() * 0.001
        if kind == "cumsum":
            return h.cumsum(-1) * 0.3
        if kind == "sigmoid":
            return F.sigmoid(h) * 2.0
        raise AssertionError(kind)
    step.__name__ = kind
    return step


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).tobytes(), a.dtype, a.shape


def run(program, mode, cuts, how, early_stop, D, profiled=False):
    """program: [(kind, k)]; cuts: [(lo, hi, policy name or None for plain)], covering it in order (how='checkpoint');
    how='sequential': cuts is the number of segments for checkpoint_sequential; how='plain': no checkpoint.
    Returns (output, {leaf: grad}, rng state after backward, profile or None)."""
    x, p = leaves(mode, D)
    steps = [make_step(kind, k, p) for kind, k in program]
    mg.manual_seed(3)
    amp = mg.autocast(DEVICE, dtype=getattr(mg, mode.split("_")[1])) if mode.startswith("autocast") \
        else contextlib.nullcontext()
    prof = mg.profile() if profiled else contextlib.nullcontext()
    check = "values" if early_stop == "values" else "default"  # 'values' compares the outputs' bytes, recomputes all
    with prof, set_checkpoint_early_stop(bool(early_stop)):
        with amp:
            h = first = x * 1.5  # used inside the first segment and after the last (NOTE [checkpoint sums])
            if how == "plain":
                for s in steps:
                    h = s(h)
            elif how == "sequential":
                h = mg.checkpoint_sequential(steps, cuts, h)
            else:
                for lo, hi, policy in cuts:
                    def segment(t, fs=steps[lo:hi]):
                        for f in fs:
                            t = f(t)
                        return t
                    if policy == "nested":  # each step under a checkpoint of its own inside the segment's
                        fs = [lambda t, f=f: mg.checkpoint(f, t, policy=POLICIES["dots"]) for f in steps[lo:hi]]
                        h = mg.checkpoint(lambda t, fs=fs, run=segment: run(t, fs), h,  # bound now: runs in backward
                                          determinism_check=check)
                    else:
                        h = segment(h) if policy == "plain" else \
                            mg.checkpoint(segment, h, policy=POLICIES[policy], determinism_check=check)
            h = h + first * 0.5
            loss = h.float().square().mean()
        loss.backward()
    names = ["x"] + [f"{n}{i}" for n in p for i in range(len(p[n]))]
    tensors = [x] + [t for n in p for t in p[n]]
    grads = {n: None if t.grad is None else bits(to_host(t.grad)) for n, t in zip(names, tensors)}
    return bits(to_host(h)), grads, mg.get_rng_state(), prof if profiled else None


def segment_flops(program, mode, cuts, D):
    """The forward FLOPs of each checkpointed segment, run alone."""
    x, p = leaves(mode, D)
    steps = [make_step(kind, k, p) for kind, k in program]
    mg.manual_seed(3)
    total, h = 0, x * 1.5
    with mg.autocast(DEVICE, dtype=getattr(mg, mode.split("_")[1])) if mode.startswith("autocast") \
            else contextlib.nullcontext():
        for lo, hi, policy in cuts:
            with mg.profile() as prof:
                for s in steps[lo:hi]:
                    h = s(h)
            total += prof.flops("forward") * (2 if policy == "nested" else 1) if policy != "plain" else 0
    return total


def assert_same(got, want):
    out, grads, rng, _ = got
    w_out, w_grads, w_rng, _ = want
    assert out == w_out, "the output differs"
    for name in w_grads:
        assert (grads[name] is None) == (w_grads[name] is None), name
        assert grads[name] == w_grads[name], f"the gradient of {name} differs from the plain run's"
    assert rng == w_rng, "the random generator's state after backward differs"


def check(program, mode, cuts, early_stop, D=8, ledger=True):
    skip_unsupported(mode)
    want = run(program, mode, None, "plain", True, D, profiled=ledger)
    got = run(program, mode, cuts, "checkpoint", early_stop, D, profiled=ledger)
    assert_same(got, want)
    if not ledger:
        return
    plain, prof = want[3], got[3]
    assert prof.flops("forward") == plain.flops("forward")
    assert prof.flops("backward") == plain.flops("backward")
    recomputable = segment_flops(program, mode, cuts, D)
    if early_stop in (False, "values") and all(pol in ("none", "plain") for _, _, pol in cuts):
        assert prof.flops("recompute") == recomputable
    else:
        assert 0 <= prof.flops("recompute") <= recomputable
    # a checkpoint keeps its input: no extra bytes where the segment's first op keeps that very array anyway, at most
    # the input's bytes where it does not (a policy that keeps more than the plain run saves may cost more)
    keeps = {k for k, v in STEPS.items() if v} - (CASTS_FIRST if mode.startswith("autocast") else set())
    if all(pol in ("plain", "none") for _, _, pol in cuts):
        extra = sum(B * T * D * (4 if mode.startswith("autocast") else 2)
                    for lo, _, pol in cuts if pol == "none" and program[lo][0] not in keeps)
        assert prof.peak_bytes("activations") <= plain.peak_bytes("activations") + extra


@st.composite
def cases(draw):
    program = draw(st.lists(st.tuples(st.sampled_from(sorted(STEPS)), st.integers(0, 1)), min_size=1, max_size=7))
    n = len(program)
    bounds = sorted(draw(st.sets(st.integers(1, n - 1), max_size=3))) if n > 1 else []
    edges = [0] + bounds + [n]
    cuts = [(lo, hi, draw(st.sampled_from(["plain", "nested"] + sorted(POLICIES)))) for lo, hi in zip(edges, edges[1:])]
    return program, cuts


@contextlib.contextmanager
def small_blocks():
    """Every 2-byte softmax, GELU, ... here spans several blocks of rows."""
    before, rows._BLOCK = rows._BLOCK, 16
    try:
        yield
    finally:
        rows._BLOCK = before


@settings(max_examples=300, deadline=None)
@given(case=cases(), mode=st.sampled_from(RUNNABLE), early_stop=st.sampled_from([True, False, "values"]))
def test_checkpointed_low_precision_programs_are_bit_identical(case, mode, early_stop):
    program, cuts = case
    with small_blocks():
        check(program, mode, cuts, early_stop)


@settings(max_examples=100, deadline=None)
@given(program=st.lists(st.tuples(st.sampled_from(sorted(STEPS)), st.integers(0, 1)), min_size=2, max_size=6),
       segments=st.integers(1, 4), mode=st.sampled_from(RUNNABLE), early_stop=st.booleans())
def test_checkpoint_sequential_low_precision_is_bit_identical(program, segments, mode, early_stop):
    skip_unsupported(mode)
    with small_blocks():
        want = run(program, mode, None, "plain", True, 8)
        assert_same(run(program, mode, min(segments, len(program)), "sequential", early_stop, 8), want)


@pytest.mark.parametrize("mode", MODES)
def test_a_chain_spanning_several_real_row_blocks(mode):
    """At the real block size: softmax and GELU inputs of 2 x 5 x 8192 numbers, more than one block of 65,536."""
    D = 8192
    assert B * T * D > rows._BLOCK
    program = [("ln", 0), ("softmax", 0), ("gelu", 0), ("number", 1), ("log_softmax", 0), ("gelu_tanh", 1),
               ("cumsum", 0), ("sigmoid", 0), ("center", 0), ("dropout", 0)]
    for policy in POLICIES:
        check(program, mode, [(0, 4, policy), (4, 10, policy)], early_stop=False, D=D, ledger=False)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_recompute_casts_a_weight_used_twice_once(dtype):
    """Under mg.autocast, the recompute (after the region, in backward) is a region of the weight-cast cache as the
    forward was: a weight used twice is cast once. Cast per use, the recompute held a second low-precision copy of
    it: the peak of activations was the plain run's plus the kept input plus that copy (9,728 B plain, 18,944 B
    checkpointed here, for 1,024 B of input), not the plain run's plus the kept input (10,752 B)."""
    skip_unsupported(dtype)
    rng = np.random.default_rng(0)
    w = mg.tensor(rng.standard_normal((64, 64)), dtype="float32", requires_grad=True)
    x_values = rng.standard_normal((4, 64))

    def twice(t):
        return F.linear(F.linear(t, w).tanh(), w).tanh()
    runs = []
    for ckpt in (False, True):
        x = mg.tensor(x_values, dtype="float32", requires_grad=True)
        w.grad = None
        with mg.profile() as prof:
            with mg.autocast(DEVICE, dtype=getattr(mg, dtype)):
                h = mg.checkpoint(twice, x) if ckpt else twice(x)
                loss = h.float().sum()
            loss.backward()
        runs.append((prof, bits(to_host(w.grad)), bits(to_host(x.grad))))
    (plain, *want), (prof, *got) = runs
    assert got == want
    assert prof.calls("recompute", op="cast") == 3  # x's and w's twice (a record each; the second takes the copy)
    assert prof.peak_bytes("activations") <= plain.peak_bytes("activations") + 4 * 64 * 4  # + x, kept
    assert mg.amp.cached_casts() == 0  # the recompute's region ended: its copies went
