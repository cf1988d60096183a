"""Activation checkpointing (mg.checkpoint, mg.checkpoint_sequential): same gradients, less memory.

What is checked, and against what:
  bit-identical    gradients (np.array_equal, not allclose) against the same model run plainly: MLPs cut
                   into 1..n segments, one checkpoint, GPT blocks, float64, inputs that require grad,
                   tied weights, nesting, dropout, BatchNorm
  no input grad    parameters inside get gradients when no input requires grad (frozen embeddings)
  memory           mg.profile: peak activations lower (equal for segments=1), back to 0 after backward,
                   exactly the segments' inputs plus the last segment after forward; recompute FLOPs
                   exactly the forward FLOPs of the checkpointed segments
  randomness       dropout masks replay (preserve_rng_state), the stream after backward is unchanged
  state            BatchNorm's running statistics are updated once
  errors           determinism_check, bad arguments, closures, no_grad, retain_graph
  PyTorch          segment_bounds against torch's checkpoint_sequential (which functions it recomputes),
                   outputs and gradients against torch.utils.checkpoint in float64

Bugs found while writing these are kept as tests near the end.
"""
import math

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.checkpoint import is_recomputing
from minigrad.schedules import segment_bounds
from minigrad.gpt import GPT, GPTConfig



# ----------------------------------------------------------------------------- helpers

def make_mlp(n_layers, width=16, dtype="float32"):
    """[Linear, Tanh] * n_layers, as a flat list of functions."""
    layers = []
    for _ in range(n_layers):
        layers += [nn.Linear(width, width), nn.Tanh()]
    for m in layers:
        m.to(dtype)
    return layers


def params_of(*modules):
    seen, out = set(), []
    for m in modules:
        for p in m.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
    return out


def chain(functions, x):
    for f in functions:
        x = f(x)
    return x


def grads_of(tensors):
    out = []
    for t in tensors:
        assert t.grad is not None, "a tensor got no gradient"
        out.append(t.grad.numpy().copy())
    return out


def step(loss_fn, tensors):
    """Zero the grads of `tensors`, run loss_fn().backward(); returns (loss value, their grads)."""
    for t in tensors:
        t.grad = None
    loss = loss_fn()
    loss.backward()
    return loss.detach().numpy().copy(), grads_of(tensors)


def assert_bit_identical(got, want, what="gradient"):
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape and a.dtype == b.dtype, f"{what} {i}: {a.shape}/{a.dtype} != {b.shape}/{b.dtype}"
        assert np.array_equal(a, b), f"{what} {i} differs: max |diff| {np.abs(a - b).max()}"
    assert any(np.any(b != 0) for b in want), f"every {what} is zero: the comparison proves nothing"


def sq_loss(y):
    return (y * y).mean()


# ----------------------------------------------------------------------------- 1. bit-identical gradients

N_LAYERS = 11  # 22 functions: segments 3 -> 7, 7, 8; 4 -> 5, 5, 5, 7; 'sqrt' -> 5 segments (4, 4, 4, 4, 6)


@pytest.mark.parametrize("segments", [1, 2, 3, 4, "sqrt", "n"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_checkpoint_sequential_mlp_gradients_are_bit_identical(segments, dtype):
    layers = make_mlp(N_LAYERS, dtype=dtype)
    segments = len(layers) if segments == "n" else segments
    params = params_of(*layers)
    x = mg.randn(8, 16, dtype=dtype)
    loss_p, want = step(lambda: sq_loss(chain(layers, x)), params)
    loss_c, got = step(lambda: sq_loss(mg.checkpoint_sequential(layers, segments, x)), params)
    assert np.array_equal(loss_c, loss_p)
    assert_bit_identical(got, want)


@pytest.mark.parametrize("segments", [2, 3, "n"])
def test_checkpoint_sequential_input_that_requires_grad(segments):
    layers = make_mlp(8, dtype="float64")
    segments = len(layers) if segments == "n" else segments
    x = mg.randn(8, 16, dtype="float64", requires_grad=True)
    tensors = params_of(*layers) + [x]
    _, want = step(lambda: sq_loss(chain(layers, x)), tensors)
    _, got = step(lambda: sq_loss(mg.checkpoint_sequential(layers, segments, x)), tensors)
    assert_bit_identical(got, want)


def test_checkpoint_sequential_accepts_a_sequential():
    model = nn.Sequential(*make_mlp(6))
    x = mg.randn(4, 16, requires_grad=True)
    tensors = list(model.parameters()) + [x]
    _, want = step(lambda: sq_loss(model(x)), tensors)
    _, got = step(lambda: sq_loss(mg.checkpoint_sequential(model, 3, x)), tensors)
    assert_bit_identical(got, want)


@pytest.mark.parametrize("input_requires_grad", [False, True])
def test_single_checkpoint_around_a_block(input_requires_grad):
    pre, block, post = nn.Linear(16, 16), nn.Sequential(*make_mlp(4)), nn.Linear(16, 3)
    x = mg.randn(8, 16, requires_grad=input_requires_grad)
    tensors = params_of(pre, block, post) + ([x] if input_requires_grad else [])

    def loss(ckpt):
        h = pre(x).tanh()
        h = mg.checkpoint(block, h) if ckpt else block(h)
        return sq_loss(post(h))

    loss_p, want = step(lambda: loss(False), tensors)
    loss_c, got = step(lambda: loss(True), tensors)
    assert np.array_equal(loss_c, loss_p)
    assert_bit_identical(got, want)


def test_checkpoint_output_is_a_new_record_that_replaces_the_segment():
    block = nn.Sequential(*make_mlp(3))
    x = mg.randn(4, 16, requires_grad=True)
    y = mg.checkpoint(block, x)
    assert y.grad_fn is not None and y.grad_fn.name == "checkpoint"
    # its edges: the input, then every parameter used inside (6 of them), and nothing of the insides
    assert y.grad_fn.next[0] is x
    assert {id(t) for t in y.grad_fn.next[1:]} == {id(p) for p in block.parameters()}
    # it keeps its input, and its output: the last op, a Tanh, reads its output in backward, and the recompute
    # hands it this one rather than running it again (NOTE [recompute what backward reads])
    assert len(y.grad_fn.saved) == 2 and y.grad_fn.saved[0] is x.data and y.grad_fn.saved[1] is y.data
    assert np.array_equal(y.detach().numpy(), block(x).detach().numpy())
    # ending on a Linear, whose backward reads only its input: the checkpoint keeps its input only
    z = mg.checkpoint(nn.Sequential(*make_mlp(3))[:-1], x)
    assert len(z.grad_fn.saved) == 1 and z.grad_fn.saved[0] is x.data


def test_residual_input_used_inside_and_outside_the_checkpoint():
    """An input used inside the checkpoint and again outside it: its gradient sums both, bit for bit."""
    block = nn.Sequential(*make_mlp(3))
    lin = nn.Linear(16, 16)
    x = mg.randn(8, 16, requires_grad=True)
    tensors = params_of(block, lin) + [x]

    def loss(ckpt):
        h = lin(x)
        h = h + (mg.checkpoint(block, h) if ckpt else block(h))  # h used inside and by the residual add
        return sq_loss(h * x)

    _, want = step(lambda: loss(False), tensors)
    _, got = step(lambda: loss(True), tensors)
    assert_bit_identical(got, want)


def test_tied_weights_across_segments():
    """The same Linear in several segments (and in the last one): its gradient sums all its uses, bit for bit."""
    shared = nn.Linear(16, 16)
    layers = [shared, nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), shared, nn.Tanh(), shared, nn.Tanh()]
    params = params_of(*layers)
    x = mg.randn(8, 16)
    _, want = step(lambda: sq_loss(chain(layers, x)), params)
    for segments in (2, 4, 8):
        _, got = step(lambda: sq_loss(mg.checkpoint_sequential(layers, segments, x)), params)
        assert_bit_identical(got, want)


def test_gradient_accumulation_over_micro_batches():
    """Two backwards into the same .grad (the second adds in place): bit-identical to the plain run."""
    layers = make_mlp(6)
    params = params_of(*layers)
    xs = [mg.randn(4, 16), mg.randn(4, 16)]

    def accumulate(forward):
        for p in params:
            p.grad = None
        for x in xs:
            sq_loss(forward(x)).backward()
        return grads_of(params)

    want = accumulate(lambda x: chain(layers, x))
    assert_bit_identical(accumulate(lambda x: mg.checkpoint_sequential(layers, 3, x)), want)
    assert_bit_identical(accumulate(lambda x: mg.checkpoint(lambda t: chain(layers, t), x)), want)


def test_several_tensor_and_non_tensor_arguments():
    lin = nn.Linear(16, 16)
    a = mg.randn(4, 16, requires_grad=True)
    b = mg.randn(4, 16)  # needs no gradient
    c = mg.randn(4, 16, requires_grad=True)

    def f(a, b, scale, c):
        return lin(a * scale + b).tanh() * c

    tensors = [a, c] + list(lin.parameters())
    _, want = step(lambda: sq_loss(f(a, b, 0.5, c)), tensors)
    _, got = step(lambda: sq_loss(mg.checkpoint(f, a, b, 0.5, c)), tensors)
    assert_bit_identical(got, want)
    assert b.grad is None


def test_the_same_tensor_passed_twice():
    lin = nn.Linear(16, 16)
    x = mg.randn(4, 16, requires_grad=True)

    def f(u, v):
        return lin(u).tanh() * v

    tensors = [x] + list(lin.parameters())
    _, want = step(lambda: sq_loss(f(x, x)), tensors)
    _, got = step(lambda: sq_loss(mg.checkpoint(f, x, x)), tensors)
    assert_bit_identical(got, want)


GPT_CFG = dict(vocab_size=11, block_size=8, n_layer=3, n_head=2, n_embd=16)


def gpt_loss(model, idx, targets, ckpt, x=None):
    """GPT's forward written out so that each Block can be checkpointed (model.drop skipped: p=0 here)."""
    B, T = idx.shape
    if x is None:
        x = model.wte(idx) + model.wpe(mg.arange(T))
    for block in model.h:
        x = mg.checkpoint(block, x) if ckpt else block(x)
    logits = model.lm_head(model.ln_f(x))
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpt_with_every_block_checkpointed(dtype):
    model = GPT(GPTConfig(**GPT_CFG)).to(dtype)
    idx, targets = mg.randint(0, 11, (2, 8)), mg.randint(0, 11, (2, 8))
    params = list(model.parameters())
    loss_p, want = step(lambda: gpt_loss(model, idx, targets, False), params)
    # the hand-written forward is the model's
    assert np.array_equal(loss_p, model(idx, targets)[1].detach().numpy())
    loss_c, got = step(lambda: gpt_loss(model, idx, targets, True), params)
    assert np.array_equal(loss_c, loss_p)
    assert_bit_identical(got, want)


def test_gpt_blocks_checkpointed_with_an_input_that_requires_grad():
    model = GPT(GPTConfig(**GPT_CFG)).to("float64")
    idx, targets = mg.randint(0, 11, (2, 8)), mg.randint(0, 11, (2, 8))
    x = mg.randn(2, 8, 16, dtype="float64", requires_grad=True)
    tensors = [p for p in model.parameters() if p is not model.wte.weight and p is not model.wpe.weight] + [x]
    _, want = step(lambda: gpt_loss(model, idx, targets, False, x=x), tensors)
    _, got = step(lambda: gpt_loss(model, idx, targets, True, x=x), tensors)
    assert_bit_identical(got, want)


def test_gpt_with_dropout_checkpointed():
    model = GPT(GPTConfig(**GPT_CFG, dropout=0.2))
    idx, targets = mg.randint(0, 11, (2, 8)), mg.randint(0, 11, (2, 8))
    params = list(model.parameters())
    mg.manual_seed(7)
    _, want = step(lambda: gpt_loss(model, idx, targets, False), params)
    after_plain = mg.rand(5).numpy()
    mg.manual_seed(7)
    _, got = step(lambda: gpt_loss(model, idx, targets, True), params)
    assert_bit_identical(got, want)
    assert np.array_equal(mg.rand(5).numpy(), after_plain)


def test_backward_under_no_grad_still_recomputes():
    block = nn.Sequential(*make_mlp(3))
    x = mg.randn(4, 16, requires_grad=True)
    tensors = list(block.parameters()) + [x]
    _, want = step(lambda: sq_loss(block(x)), tensors)
    for t in tensors:
        t.grad = None
    loss = sq_loss(mg.checkpoint(block, x))
    with mg.no_grad():  # PyTorch allows backward under no_grad; the recompute must record anyway
        loss.backward()
    assert_bit_identical(grads_of(tensors), want)


# ----------------------------------------------------------------------------- 2. no input requires grad

def test_parameters_get_gradients_when_the_input_comes_from_a_frozen_embedding():
    """The case that trips PyTorch's reentrant checkpoint: no input requires grad, the block's weights do."""
    emb = nn.Embedding(10, 16)
    emb.weight.requires_grad_(False)
    block = nn.Sequential(*make_mlp(3))
    head = nn.Linear(16, 4)
    idx = mg.randint(0, 10, (3, 5))
    params = params_of(block, head)

    def loss(ckpt):
        x = emb(idx)
        assert not x.requires_grad
        h = mg.checkpoint(block, x) if ckpt else block(x)
        return sq_loss(head(h))

    _, want = step(lambda: loss(False), params)
    _, got = step(lambda: loss(True), params)
    assert_bit_identical(got, want)
    assert emb.weight.grad is None


def test_parameters_get_gradients_when_the_input_is_plain_data():
    block = nn.Sequential(*make_mlp(3))
    x = mg.randn(4, 16)
    y = mg.checkpoint(block, x)
    assert y.requires_grad and y.grad_fn is not None
    params = list(block.parameters())
    _, want = step(lambda: sq_loss(block(x)), params)
    _, got = step(lambda: sq_loss(mg.checkpoint(block, x)), params)
    assert_bit_identical(got, want)


def test_gpt_with_frozen_embeddings_and_checkpointed_blocks():
    model = GPT(GPTConfig(**GPT_CFG))
    model.wte.weight.requires_grad_(False)
    model.wpe.weight.requires_grad_(False)
    idx, targets = mg.randint(0, 11, (2, 8)), mg.randint(0, 11, (2, 8))
    params = [p for p in model.parameters() if p.requires_grad]
    _, want = step(lambda: gpt_loss(model, idx, targets, False), params)
    _, got = step(lambda: gpt_loss(model, idx, targets, True), params)
    assert_bit_identical(got, want)


def test_a_function_that_reaches_no_gradient_returns_its_plain_output():
    x = mg.randn(4, 16)
    y = mg.checkpoint(lambda t: (t * 2).tanh(), x)
    assert not y.requires_grad and y.grad_fn is None
    assert np.array_equal(y.numpy(), (x * 2).tanh().numpy())


# ----------------------------------------------------------------------------- 3. memory and FLOPs

DEEP, WIDTH, BATCH = 16, 32, 64  # 32 functions


def profiled_step(layers, segments, x):
    """One forward and backward under mg.profile; returns the profile and the activations after forward."""
    with mg.profile() as prof:
        y = chain(layers, x) if segments is None else mg.checkpoint_sequential(layers, segments, x)
        loss = sq_loss(y)
        after_forward = prof.current_bytes("activations")
        loss.backward()
        del y, loss
        assert prof.current_bytes("activations") == 0, "activations left after backward"
    assert prof.current_bytes("activations") == 0
    return prof, after_forward


def test_memory_and_flops_of_checkpoint_sequential():
    layers = make_mlp(DEEP, WIDTH)
    n = len(layers)
    x = mg.randn(BATCH, WIDTH)
    one_output = BATCH * WIDTH * 4
    plain, plain_after_forward = profiled_step(layers, None, x)
    assert plain.flops("recompute") == 0
    # each Tanh's output (saved by it and by the next Linear: one buffer) and the input
    assert plain.peak_bytes("activations") == (DEEP + 1) * one_output

    for segments in (1, 2, 4, "sqrt", 8, n // 2, n):
        prof, after_forward = profiled_step(layers, segments, x)
        k = max(1, round(math.sqrt(n))) if segments == "sqrt" else segments
        bounds = segment_bounds(n, k)
        last_lo = bounds[-1][0]

        if k == 1:  # PyTorch's semantics: the last segment runs normally, so one segment is the plain run
            assert prof.peak_bytes("activations") == plain.peak_bytes("activations")
            assert after_forward == plain_after_forward
            assert prof.flops("recompute") == 0
        elif k == n // 2:  # (Linear, Tanh) pairs: each keeps its input, the same as the plain run keeps
            assert prof.peak_bytes("activations") == plain.peak_bytes("activations")
        elif k == n:
            # every function alone: the Checkpoint before each Tanh keeps the Linear's output, which the
            # plain run never keeps (Tanh saves its output): cutting too fine costs memory
            assert prof.peak_bytes("activations") > plain.peak_bytes("activations")
        else:
            assert prof.peak_bytes("activations") < plain.peak_bytes("activations"), segments
        if segments == "sqrt":  # Chen et al.: O(sqrt(n)) layer outputs
            assert prof.peak_bytes("activations") <= 2 * math.ceil(math.sqrt(n)) * one_output

        # after forward: the checkpointed segments' inputs, plus the last segment's own activations
        with mg.profile() as last:
            out = chain(layers[last_lo:], mg.randn(BATCH, WIDTH, requires_grad=True))  # held: its records live
            last_acts = last.current_bytes("activations")
            del out
        assert after_forward == (k - 1) * one_output + last_acts, segments
        # and that is the peak: recomputing a segment (no longer than the last) never holds more
        assert prof.peak_bytes("activations") == after_forward, segments

        # the recompute is one more forward of every checkpointed segment but its end (NOTE [recompute what
        # backward reads]): a last Tanh's output is the checkpoint's, which it keeps (the next segment's input
        # anyway), and the Linear before it has no reader left; a last Linear reads only its input
        rerun = [f for lo, hi in bounds[:-1] for f in layers[lo:hi - (2 if isinstance(layers[hi - 1], nn.Tanh) else 1)]]
        with mg.profile() as fwd:
            chain(rerun, x)
        assert prof.flops("recompute") == fwd.flops("forward"), segments
        assert prof.flops("recompute") < plain.flops("forward") or k == 1
        assert prof.calls("recompute", "linear") == sum(isinstance(f, nn.Linear) for f in rerun)
        if k in (n // 2, n):  # (Linear, Tanh) pairs, or each alone: nothing runs again
            assert prof.flops("recompute") == 0
        # nothing else changes: the forward and the backward do the same work as the plain run
        assert prof.flops("forward") == plain.flops("forward")
        assert prof.flops("backward") == plain.flops("backward")
        assert prof.calls("forward", "checkpoint") == k - 1


def test_one_checkpoint_keeps_only_its_input_and_output_in_forward():
    """Inside the checkpoint's forward nothing is saved, not even for a moment; the backward's recompute
    peaks at exactly what the plain run keeps, and runs all but the last Linear and Tanh again."""
    block = nn.Sequential(*make_mlp(DEEP, WIDTH))
    x = mg.randn(BATCH, WIDTH)
    g = mg.randn(BATCH, WIDTH)
    one_output = BATCH * WIDTH * 4
    with mg.profile() as plain:
        block(x).backward(g)
    with mg.profile() as tail:
        block[-2:](x)
    with mg.profile() as prof:
        y = mg.checkpoint(block, x)
        # x and y, saved by the checkpoint record: the last Tanh's backward reads y (NOTE [recompute what
        # backward reads])
        assert prof.peak_bytes("activations") == 2 * one_output
        assert prof.current_bytes("activations") == 2 * one_output
        y.backward(g)
        assert prof.current_bytes("activations") == 0
    assert plain.peak_bytes("activations") == (DEEP + 1) * one_output
    assert prof.peak_bytes("activations") == plain.peak_bytes("activations")  # x and y: one buffer each
    assert prof.flops("forward") == plain.flops("forward")
    assert prof.flops("recompute") == plain.flops("forward") - tail.flops("forward") > 0


def test_gpt_peak_activations_lower_with_checkpointed_blocks():
    model = GPT(GPTConfig(**dict(GPT_CFG, n_layer=3)))
    idx, targets = mg.randint(0, 11, (2, 8)), mg.randint(0, 11, (2, 8))
    peaks = {}
    for ckpt in (False, True):
        model.zero_grad()
        with mg.profile() as prof:
            gpt_loss(model, idx, targets, ckpt).backward()
            assert prof.current_bytes("activations") == 0
        peaks[ckpt] = prof.peak_bytes("activations")
        if ckpt:
            # c_attn, c_proj and c_fc per block; the MLP's c_proj runs once: only the residual add reads its
            # output, and an add's backward reads nothing (NOTE [recompute what backward reads])
            assert prof.calls("recompute", "linear") == 3 * 3
            assert prof.calls("forward", "linear") == 4 * 3 + 1  # and the LM head
    assert peaks[True] < peaks[False]


# ----------------------------------------------------------------------------- 4. dropout

def dropout_block():
    return nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.5), nn.Tanh(), nn.Linear(32, 16), nn.Dropout(0.5))


def dropout_run(block, x, tensors, ckpt, **kw):
    mg.manual_seed(123)
    _, g = step(lambda: sq_loss(mg.checkpoint(block, x, **kw) if ckpt else block(x)), tensors)
    return g, mg.rand(5).numpy()


def test_dropout_masks_replay_exactly():
    block = dropout_block()
    x = mg.randn(8, 16, requires_grad=True)
    tensors = list(block.parameters()) + [x]
    want, after_plain = dropout_run(block, x, tensors, False)
    got, after_ckpt = dropout_run(block, x, tensors, True)
    assert_bit_identical(got, want)
    # the stream after backward is where it is without checkpointing
    assert np.array_equal(after_ckpt, after_plain)
    # and the masks replayed are the same values: the 'values' check passes
    got, _ = dropout_run(block, x, tensors, True, determinism_check="values")
    assert_bit_identical(got, want)


def test_without_preserve_rng_state_the_masks_differ():
    block = dropout_block()
    x = mg.randn(8, 16, requires_grad=True)
    tensors = list(block.parameters()) + [x]
    want, after_plain = dropout_run(block, x, tensors, False)
    with pytest.warns(UserWarning, match="preserve_rng_state=False"):  # said when it happens
        got, after_ckpt = dropout_run(block, x, tensors, True, preserve_rng_state=False)
    assert any(not np.array_equal(a, b) for a, b in zip(got, want))
    assert np.array_equal(after_ckpt, after_plain)  # the outer stream is still restored
    with pytest.raises(RuntimeError, match="values"), pytest.warns(UserWarning):  # 'values' catches the new masks
        dropout_run(block, x, tensors, True, preserve_rng_state=False, determinism_check="values")


def test_dropout_in_every_segment_replays():
    layers = []
    for _ in range(6):
        layers += [nn.Linear(16, 16), nn.Dropout(0.3), nn.Tanh()]
    params = params_of(*layers)
    x = mg.randn(8, 16)

    def run(segments):
        mg.manual_seed(5)
        fn = (lambda: sq_loss(chain(layers, x))) if segments is None else \
            (lambda: sq_loss(mg.checkpoint_sequential(layers, segments, x)))
        _, g = step(fn, params)
        return g, mg.rand(3).numpy()

    want, after = run(None)
    for segments in (2, 3, len(layers)):
        got, after_c = run(segments)
        assert_bit_identical(got, want)
        assert np.array_equal(after_c, after)


# ----------------------------------------------------------------------------- 5. BatchNorm

def bn_model():
    mg.manual_seed(42)
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Tanh(), nn.Linear(16, 8), nn.BatchNorm1d(8))


def bn_state(model):
    return [b.numpy().copy() for b in model.buffers()]


def test_batchnorm_running_statistics_are_updated_once():
    plain, ckpt = bn_model(), bn_model()
    x = mg.randn(10, 8, requires_grad=True)
    _, want = step(lambda: sq_loss(plain(x)), list(plain.parameters()) + [x])
    seen = []
    inner = ckpt.forward

    def forward_noting_recompute(t):
        seen.append(is_recomputing())
        return inner(t)

    _, got = step(lambda: sq_loss(mg.checkpoint(forward_noting_recompute, x)), list(ckpt.parameters()) + [x])
    assert seen == [False, True]
    assert_bit_identical(got, want)
    want_state, got_state = bn_state(plain), bn_state(ckpt)
    assert len(got_state) == 6
    for a, b in zip(got_state, want_state):
        assert np.array_equal(a, b)
    assert int(ckpt[1].num_batches_tracked.item()) == 1


def test_batchnorm_in_checkpoint_sequential_and_nested():
    plain, ckpt, nested = bn_model(), bn_model(), bn_model()
    x = mg.randn(10, 8)
    _, want = step(lambda: sq_loss(plain(x)), list(plain.parameters()))
    _, got = step(lambda: sq_loss(mg.checkpoint_sequential(ckpt, 5, x)), list(ckpt.parameters()))
    assert_bit_identical(got, want)

    def outer(t):
        return nested[3](nested[2](mg.checkpoint(lambda u: nested[1](nested[0](u)), t)))

    _, got = step(lambda: sq_loss(nested[4](mg.checkpoint(outer, x))), list(nested.parameters()))
    assert_bit_identical(got, want)
    for m in (ckpt, nested):
        for a, b in zip(bn_state(m), bn_state(plain)):
            assert np.array_equal(a, b)


# ----------------------------------------------------------------------------- 6. nesting

def test_nested_checkpoints_are_bit_identical():
    a, b, c = (nn.Sequential(*make_mlp(2)) for _ in range(3))
    x = mg.randn(8, 16, requires_grad=True)
    tensors = params_of(a, b, c) + [x]

    def inner(h):
        return b(h)

    def outer(h):
        return c(mg.checkpoint(inner, a(h)))

    _, want = step(lambda: sq_loss(c(b(a(x)))), tensors)
    _, got = step(lambda: sq_loss(mg.checkpoint(outer, x)), tensors)
    assert_bit_identical(got, want)


def test_doubly_nested_checkpoints_with_dropout_are_bit_identical():
    a, b, c, d = (nn.Sequential(*make_mlp(1), nn.Dropout(0.25)) for _ in range(4))
    x = mg.randn(8, 16, requires_grad=True)
    tensors = params_of(a, b, c, d) + [x]

    def innermost(h):
        return c(h)

    def middle(h):
        return b(mg.checkpoint(innermost, h)) + h  # its input is also used outside the innermost

    def outer(h):
        return d(mg.checkpoint(middle, a(h)))

    def run(fn):
        mg.manual_seed(3)
        with mg.profile() as prof:
            _, g = step(fn, tensors)
        return g, mg.rand(4).numpy(), prof

    def plain():
        h = a(x)
        return sq_loss(d(b(c(h)) + h))

    want, after, _ = run(plain)
    got, after_c, prof = run(lambda: sq_loss(mg.checkpoint(outer, x)))
    assert_bit_identical(got, want)
    assert np.array_equal(after_c, after)
    # outer's recompute runs a, b, d and (middle's forward) c; middle's recompute runs b and c; innermost's, c
    assert prof.calls("recompute", "linear") == 4 + 2 + 1
    assert prof.calls("forward", "linear") == 4


# ----------------------------------------------------------------------------- 7. determinism_check

def noisy_block_factory():
    lin = nn.Linear(4, 4)

    def noisy_block(x):
        # noise from NumPy's global generator, which checkpointing cannot replay
        return (lin(x) + mg.tensor(np.random.randn(3, 4).astype("float32")).to(x.dtype)).tanh()

    return lin, noisy_block


def test_values_check_names_a_function_that_draws_from_numpy():
    lin, noisy_block = noisy_block_factory()
    x = mg.randn(3, 4, requires_grad=True)
    y = mg.checkpoint(noisy_block, x, determinism_check="values")
    with pytest.raises(RuntimeError, match=r"noisy_block.*different values"):
        y.sum().backward()


def test_default_check_does_not_see_values_that_changed():
    """Documented limit: 'default' compares shape and dtype only, so a function that draws from NumPy's
    global generator recomputes something else and no error says so (as in PyTorch)."""
    lin, noisy_block = noisy_block_factory()
    x = mg.randn(3, 4, requires_grad=True)
    mg.checkpoint(noisy_block, x).sum().backward()  # no error
    assert lin.weight.grad is not None and x.grad is not None


def test_none_check_skips_the_values_check():
    lin, noisy_block = noisy_block_factory()
    x = mg.randn(3, 4, requires_grad=True)
    mg.checkpoint(noisy_block, x, determinism_check="none").sum().backward()
    assert lin.weight.grad is not None


def shape_shifter_factory():
    lin = nn.Linear(4, 4)
    calls = [0]

    def shape_shifter(x):
        calls[0] += 1
        y = lin(x)
        # the recompute runs another op (a slice) where the forward ran tanh: an op that runs only after the forward's
        # ops would not be reached (NOTE [early stop]; test_a_recompute_that_runs_on_past_the_forward_stops_there)
        return y.tanh() if calls[0] == 1 else y[:2].tanh()

    return shape_shifter, calls


def test_default_check_names_the_function_and_both_shapes():
    shape_shifter, calls = shape_shifter_factory()
    x = mg.randn(3, 4)
    y = mg.checkpoint(shape_shifter, x)
    with pytest.raises(RuntimeError) as e:
        y.sum().backward()
    msg = str(e.value)
    assert "shape_shifter" in msg and "(2, 4)" in msg and "(3, 4)" in msg
    assert calls[0] == 2


def test_a_recompute_that_runs_on_past_the_forward_stops_there():
    """NOTE [early stop]: the forward returns lin(x); the recompute goes on to slice it. With early stop it ends once
    the forward's ops are back, before the slice, and the gradients are the forward's, bit for bit (PyTorch's, whose
    early stop ends the recompute once the tensors saved are back, gives no error either). Without, the recompute runs
    to its end and the shape check (minigrad's; PyTorch compares the saved tensors only) names both shapes. Once this
    raised in both."""
    lin = nn.Linear(4, 4)
    x = mg.randn(3, 4, requires_grad=True)
    tensors = [x] + params_of(lin)
    sq_loss(lin(x)).backward()
    want = grads_of(tensors)
    for t in tensors:
        t.grad = None

    calls = [0]

    def runs_on(t):
        calls[0] += 1
        y = lin(t)
        return y if calls[0] % 2 else y[:2]  # each checkpoint's forward, then the slice in its recompute

    sq_loss(mg.checkpoint(runs_on, x)).backward()
    assert_bit_identical(grads_of(tensors), want)
    with pytest.raises(RuntimeError, match=r"'runs_on' in backward gave its output as shape \(2, 4\).*\(3, 4\)"):
        sq_loss(mg.checkpoint(runs_on, x, early_stop=False)).backward()


def test_none_check_skips_the_shape_check_too():
    shape_shifter, _ = shape_shifter_factory()
    y = mg.checkpoint(shape_shifter, mg.randn(3, 4), determinism_check="none")
    # not checkpoint's shape check: the recompute's slice reads the Linear's output, which it did not run
    with pytest.raises(RuntimeError, match="ran other ops than its forward.*'linear'"):
        y.sum().backward()


@pytest.mark.parametrize("bad", ["strict", None, True, "Values"])
def test_invalid_determinism_check(bad):
    with pytest.raises(ValueError, match="determinism_check"):
        mg.checkpoint(nn.Linear(4, 4), mg.randn(2, 4), determinism_check=bad)
    with pytest.raises(ValueError, match="determinism_check"):
        mg.checkpoint_sequential(make_mlp(2, 4), 2, mg.randn(2, 4), determinism_check=bad)


def test_state_is_restored_after_a_failed_recompute():
    shape_shifter, _ = shape_shifter_factory()
    with mg.profile() as prof:
        y = mg.checkpoint(shape_shifter, mg.randn(3, 4))
        rng_before_backward = mg.get_rng_state()
        with pytest.raises(RuntimeError, match="shape_shifter"):
            y.sum().backward()
        assert prof.phase == "forward" and not is_recomputing()
    drawn = mg.rand(3).numpy()
    mg.set_rng_state(rng_before_backward)
    assert np.array_equal(drawn, mg.rand(3).numpy())  # the generator is back where it was
    # and a plain backward works afterwards (the autouse fixture checks the tape's flags too)
    lin = nn.Linear(4, 4)
    sq_loss(lin(mg.randn(2, 4))).backward()
    assert lin.weight.grad is not None


# ----------------------------------------------------------------------------- 8. bad input

@pytest.mark.parametrize("not_callable", [None, 3, "linear", mg.randn(2)])
def test_checkpoint_needs_a_callable(not_callable):
    with pytest.raises(TypeError, match="callable"):
        mg.checkpoint(not_callable, mg.randn(2, 4))


@pytest.mark.parametrize("segments", [0, -1, "n+1", 2.5, "foo", None])
def test_checkpoint_sequential_segments_out_of_range(segments):
    layers = make_mlp(3, 4)
    segments = len(layers) + 1 if segments == "n+1" else segments
    with pytest.raises(ValueError, match=r"from 1 to the number of functions \(6\)"):
        mg.checkpoint_sequential(layers, segments, mg.randn(2, 4))


def test_checkpoint_sequential_needs_functions():
    with pytest.raises(ValueError, match="no functions"):
        mg.checkpoint_sequential([], 1, mg.randn(2, 4))
    with pytest.raises(ValueError, match="no functions"):
        mg.checkpoint_sequential(iter(()), "sqrt", mg.randn(2, 4))


@pytest.mark.parametrize("result", ["tuple", "list", "array", "number"])
def test_function_may_return_tensors_in_containers_and_other_values(result):
    """Once refused ("must return one Tensor"); PyTorch's non-reentrant checkpoint returns whatever the function
    returns, so minigrad does too: tensors in tuples and lists get the checkpoint's records, other values pass."""
    lin = nn.Linear(4, 4)
    x = mg.randn(2, 4)

    def f(x):
        y = lin(x)
        return {"tuple": (y, y), "list": [y], "array": y.detach().numpy(), "number": 1.0}[result]

    out = mg.checkpoint(f, x)
    if result == "tuple":
        assert type(out) is tuple and out[0] is out[1] and out[0].grad_fn.name == "checkpoint"
    elif result == "list":
        assert type(out) is list and out[0].grad_fn.name == "checkpoint"
    elif result == "array":
        assert np.array_equal(out, lin(x).detach().numpy())
    else:
        assert out == 1.0


def test_closure_over_a_tensor_that_requires_grad_is_refused():
    lin = nn.Linear(4, 4)
    x = mg.randn(2, 4, requires_grad=True)
    h = lin(x)  # computed before the checkpoint, requires grad

    def uses_h(y):
        return y.tanh() * h

    with pytest.raises(RuntimeError, match=r"pass it as an argument") as e:
        mg.checkpoint(uses_h, mg.randn(2, 4))
    assert "'linear'" in str(e.value)
    # passed as an argument instead, it works and the gradient flows to lin and x
    y = mg.checkpoint(lambda y, h: y.tanh() * h, mg.randn(2, 4), h)
    y.sum().backward()
    assert x.grad is not None and lin.weight.grad is not None


def test_a_recompute_that_reaches_a_tensor_the_forward_did_not_is_refused():
    """The recompute's edges to tensors from before the checkpoint go to its own leaves, one per argument (NOTE
    [checkpoint sums]); one that reads another such tensor (here by closure, on a flag the forward did not see set)
    has none: refused, naming the op, and no gradient reaches the other tensor's record."""
    lin = nn.Linear(4, 4)
    a, b = lin(mg.randn(2, 4)), lin(mg.randn(2, 4))  # computed before the checkpoint, both require grad
    swap = []

    def f(t):
        return t.tanh() * (b if swap else t)

    y = mg.checkpoint(f, a, determinism_check="none")
    swap.append(True)
    with pytest.raises(RuntimeError, match=r"reached a tensor from before the checkpoint that the forward did not "
                                           r"\(read by 'mul'\)"):
        y.sum().backward()


def test_under_no_grad_checkpoint_just_runs_the_function():
    block = nn.Sequential(*make_mlp(3))
    x = mg.randn(4, 16, requires_grad=True)
    calls = []

    def f(t):
        calls.append(1)
        return block(t)

    with mg.no_grad():
        y = mg.checkpoint(f, x)
        z = mg.checkpoint_sequential(list(block), 3, x)
        want = block(x)
    assert calls == [1]
    for out in (y, z):
        assert out.grad_fn is None and not out.requires_grad
        assert np.array_equal(out.numpy(), want.numpy())
    assert np.array_equal(y.numpy(), block(x).detach().numpy())


# ----------------------------------------------------------------------------- 9. retain_graph

def test_retain_graph_allows_a_second_backward_and_grads_double_exactly():
    block = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.3), nn.Tanh(), nn.Linear(16, 16))
    x = mg.randn(4, 16, requires_grad=True)
    tensors = list(block.parameters()) + [x]
    calls = [0]

    def f(t):
        calls[0] += 1
        return block(t)

    loss = sq_loss(mg.checkpoint(f, x))
    loss.backward(retain_graph=True)
    once = grads_of(tensors)
    assert calls[0] == 2
    loss.backward()
    assert calls[0] == 3  # recomputed again
    assert_bit_identical(grads_of(tensors), [2 * g for g in once])
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


def test_second_backward_through_a_released_checkpoint_raises():
    block = nn.Sequential(*make_mlp(2))
    x = mg.randn(4, 16, requires_grad=True)
    y = mg.checkpoint(block, x)  # the checkpoint record is the root
    g = mg.ones(4, 16)
    y.backward(g)
    with pytest.raises(RuntimeError, match=r"second time.*'checkpoint'"):
        y.backward(g)


# ----------------------------------------------------------------------------- 10. segment_bounds

@pytest.mark.parametrize("n,k,expected", [
    (1, 1, [(0, 1)]),
    (6, 1, [(0, 6)]),
    (6, 2, [(0, 3), (3, 6)]),
    (7, 3, [(0, 2), (2, 4), (4, 7)]),
    (10, 4, [(0, 2), (2, 4), (4, 6), (6, 10)]),
    (5, 5, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]),
    (22, 3, [(0, 7), (7, 14), (14, 22)]),
])
def test_segment_bounds(n, k, expected):
    assert segment_bounds(n, k) == expected


def test_segment_bounds_cover_every_function_once():
    for n in range(1, 30):
        for k in range(1, n + 1):
            b = segment_bounds(n, k)
            assert len(b) == k and b[0][0] == 0 and b[-1][1] == n
            assert all(lo < hi for lo, hi in b) and all(b[i][1] == b[i + 1][0] for i in range(k - 1))
            assert all(hi - lo == n // k for lo, hi in b[:-1])


def recompute_log(run):
    """run(logged, log) wraps each function i as logged(i, f), runs forward and backward and returns how
    many calls the forward made; from the log: the forward's calls, and the runs of consecutive indices that
    the backward recomputed (one per checkpointed segment, newest first)."""
    log = []

    def logged(i, f):
        def g(x):
            log.append(i)
            return f(x)
        g.__name__ = f"f{i}"
        return g

    n_forward = run(logged, log)
    backward = log[n_forward:]
    segments, cur = [], []
    for i in backward:  # each recompute calls one segment's functions in order; segments go newest first
        if cur and i != cur[-1] + 1:
            segments.append(cur)
            cur = []
        cur.append(i)
    if cur:
        segments.append(cur)
    return log[:n_forward], segments


@pytest.mark.parametrize("n,k", [(6, 2), (7, 3), (10, 4), (9, 9), (5, 1), (13, 5)])
def test_minigrad_recomputes_the_segments_of_segment_bounds(n, k):
    def run(logged, log):
        layers = [nn.Linear(4, 4) for _ in range(n)]
        mg.checkpoint_sequential([logged(i, f) for i, f in enumerate(layers)], k, mg.randn(2, 4)).sum().backward()
        return n

    forward, segments = recompute_log(run)
    assert forward == list(range(n))
    bounds = segment_bounds(n, k)
    assert [(s[0], s[-1] + 1) for s in reversed(segments)] == bounds[:-1]


@pytest.mark.torch
@pytest.mark.parametrize("n,k", [(6, 2), (7, 3), (10, 4), (9, 9), (5, 1), (13, 5)])
def test_segment_bounds_match_torch_checkpoint_sequential(n, k):
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint_sequential, set_checkpoint_early_stop

    def run(logged, log):
        torch.manual_seed(0)
        layers = [torch.nn.Linear(4, 4).double() for _ in range(n)]
        with set_checkpoint_early_stop(False):  # recompute whole segments, so that every call shows
            out = checkpoint_sequential([logged(i, f) for i, f in enumerate(layers)], k,
                                        torch.randn(2, 4, dtype=torch.float64), use_reentrant=False)
            out.sum().backward()
        return n

    forward, segments = recompute_log(run)
    assert forward == list(range(n))
    assert [(s[0], s[-1] + 1) for s in reversed(segments)] == segment_bounds(n, k)[:-1]


# ----------------------------------------------------------------------------- 11. against PyTorch

@pytest.mark.torch
@pytest.mark.parametrize("segments", [1, 2, 3, 8])
def test_against_torch_checkpoint_sequential(segments):
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint_sequential

    layers = make_mlp(4, 8, dtype="float64")
    t_layers = []
    for m in layers:
        if isinstance(m, nn.Linear):
            t = torch.nn.Linear(8, 8).double()
            with torch.no_grad():
                t.weight.copy_(torch.from_numpy(m.weight.detach().numpy()))
                t.bias.copy_(torch.from_numpy(m.bias.detach().numpy()))
            t_layers.append(t)
        else:
            t_layers.append(torch.nn.Tanh())
    t_model = torch.nn.Sequential(*t_layers)

    x_np = np.random.default_rng(1).standard_normal((5, 8))
    x = mg.tensor(x_np, dtype="float64", requires_grad=True)
    tx = torch.tensor(x_np, dtype=torch.float64, requires_grad=True)
    y = mg.checkpoint_sequential(layers, segments, x)
    ty = checkpoint_sequential(t_model, segments, tx, use_reentrant=False)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    sq_loss(y).backward()
    (ty * ty).mean().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    mg_params = params_of(*layers)
    t_params = list(t_model.parameters())
    assert len(mg_params) == len(t_params)
    for p, tp in zip(mg_params, t_params):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- bugs found once, kept as tests

# a checkpointed function that returns one of its arguments unchanged (an identity, Dropout(p=0) or
# Dropout in eval mode as its own segment) once failed: the walk for parameters started at a record
# made before the checkpoint, or at none


def test_checkpoint_of_an_identity_on_a_leaf():
    x = mg.randn(4, 3, requires_grad=True)
    y = mg.checkpoint(lambda t: t, x)
    (y * y).sum().backward()
    assert np.array_equal(x.grad.numpy(), 2 * x.detach().numpy())


def test_checkpoint_of_an_identity_on_a_computed_tensor():
    a = mg.randn(4, 3, requires_grad=True)
    h = (a * 2) * 3
    y = mg.checkpoint(lambda t: t, h)
    y.sum().backward()
    assert np.array_equal(a.grad.numpy(), np.full((4, 3), 6, dtype=np.float32))


def test_checkpoint_sequential_with_a_dropout_in_eval_mode_as_its_own_segment():
    layers = [nn.Linear(8, 8), nn.Tanh(), nn.Dropout(0.5), nn.Linear(8, 8)]
    for m in layers:
        m.eval()
    params = params_of(*layers)
    x = mg.randn(4, 8)
    _, want = step(lambda: sq_loss(chain(layers, x)), params)
    _, got = step(lambda: sq_loss(mg.checkpoint_sequential(layers, len(layers), x)), params)
    assert_bit_identical(got, want)


def test_checkpoint_segments_refuses_gaps():
    from minigrad.checkpoint import checkpoint_segments
    layers = [nn.Linear(4, 4) for _ in range(6)]
    with pytest.raises(ValueError, match="without gaps"):
        checkpoint_segments(layers, [(0, 2), (3, 6)], mg.randn(2, 4))


def test_numpy_integer_segments_are_accepted_and_bools_refused():
    layers = [nn.Linear(4, 4) for _ in range(4)]
    x = mg.randn(2, 4)
    assert mg.checkpoint_sequential(layers, np.int64(2), x).shape == (2, 4)
    with pytest.raises(ValueError, match="segments"):
        mg.checkpoint_sequential(layers, True, x)
