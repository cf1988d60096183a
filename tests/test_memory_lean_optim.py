"""The optimizers whose state differs from AdamW's: Adafactor (optim/adafactor.py) and AdamW8bit (optim/adamw8bit.py).

  Adafactor   against Hugging Face's formulas, written here again in float64 NumPy (transformers is not a
              dependency): parameters and state agree to 1e-12 relative; against torch.optim.Adafactor where
              PyTorch has it, in the settings where the two algorithms coincide (NOTE [two Adafactors])
  AdamW8bit   the code map is bitsandbytes' create_dynamic_map to the bit (written with torch, as bitsandbytes
              writes it); quantizing picks the nearest entry; the moments stay within the error bound
              accumulated step by step from the map's half-gap; a training run stays near float32 AdamW's
  both        the ledger counts exactly the arrays they hold, on 'cpu' and on 'meta' event by event;
              state_dict round trips; param groups; errors that say what to do
"""
import copy
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minigrad as mg
from minigrad import backend
import minigrad.functional as F
from minigrad.optim.adamw8bit import BLOCK_SIZE, create_dynamic_map, quantization_error_bound

from on_device import DEVICE, to_host

RTOL = 1e-12
SHAPES = [(6, 5), (5,), (2, 3, 4), (1, 7)]


def params64(seed=0, shapes=SHAPES, dtype="float64"):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    return arrays, [mg.nn.Parameter(mg.tensor(a, dtype=dtype)) for a in arrays]


def gradients(steps, seed=1, shapes=SHAPES):
    """Random gradients whose scale changes from step to step (so the second moments rise and fall)."""
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s) * (3.0 if t % 3 == 0 else 0.2) for s in shapes] for t in range(steps)]


def set_grads(params, grads):
    for p, g in zip(params, grads):
        p.grad = mg.tensor(g, dtype=p.dtype.name)


# ----------------------------------------------------------------------------- Adafactor: Hugging Face's formulas

def _rms(x):
    return np.linalg.norm(x) / math.sqrt(x.size)


def hf_adafactor(arrays, grads, lr=None, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, beta1=None,
                 weight_decay=0.0, scale_parameter=True, relative_step=True, warmup_init=False):
    """transformers.optimization.Adafactor.step in float64 NumPy, written from its source: _get_lr, _rms,
    _approx_sq_grad, and the order of its in-place updates. Returns the parameters after each step, the last
    state, and whether clipping changed some update."""
    ps = [a.copy() for a in arrays]
    states = [{} for _ in ps]
    after, clipped = [], False
    for grad_list in grads:
        for p, grad, state in zip(ps, grad_list, states):
            factored = grad.ndim >= 2
            if not state:
                state["step"] = 0
                if beta1 is not None:
                    state["exp_avg"] = np.zeros_like(grad)
                if factored:
                    state["exp_avg_sq_row"] = np.zeros(grad.shape[:-1])
                    state["exp_avg_sq_col"] = np.zeros(grad.shape[:-2] + grad.shape[-1:])
                else:
                    state["exp_avg_sq"] = np.zeros_like(grad)
            state["step"] += 1
            rms_p = _rms(p)
            rel_step_sz = lr
            if relative_step:
                min_step = 1e-6 * state["step"] if warmup_init else 1e-2
                rel_step_sz = min(min_step, 1.0 / math.sqrt(state["step"]))
            param_scale = max(eps[1], rms_p) if scale_parameter else 1.0
            step_lr = param_scale * rel_step_sz
            beta2t = 1.0 - math.pow(state["step"], decay_rate)
            update = grad ** 2 + eps[0]
            if factored:
                row, col = state["exp_avg_sq_row"], state["exp_avg_sq_col"]
                row[...] = row * beta2t + update.mean(axis=-1) * (1.0 - beta2t)
                col[...] = col * beta2t + update.mean(axis=-2) * (1.0 - beta2t)
                r_factor = (row / row.mean(axis=-1, keepdims=True)) ** -0.5
                c_factor = col ** -0.5
                update = r_factor[..., None] * c_factor[..., None, :] * grad
            else:
                v = state["exp_avg_sq"]
                v[...] = v * beta2t + update * (1.0 - beta2t)
                update = v ** -0.5 * grad
            divisor = max(_rms(update) / clip_threshold, 1.0)
            clipped |= divisor > 1.0
            update = update / divisor * step_lr
            if beta1 is not None:
                state["exp_avg"][...] = state["exp_avg"] * beta1 + update * (1 - beta1)
                update = state["exp_avg"]
            if weight_decay != 0:
                p -= p * (weight_decay * step_lr)
            p -= update
        after.append([p.copy() for p in ps])
    return after, states, clipped


ADAFACTOR_CASES = {
    "defaults": dict(),
    "first_moment_weight_decay": dict(beta1=0.9, weight_decay=0.05),
    "fixed_lr_unscaled": dict(lr=3e-2, relative_step=False, scale_parameter=False),
    "fixed_lr_scaled_clipped": dict(lr=1e-2, relative_step=False, clip_threshold=0.3, decay_rate=-0.5),
    "warmup_init": dict(warmup_init=True, beta1=0.5, eps=(1e-20, 1e-2)),
}


@pytest.mark.parametrize("case", sorted(ADAFACTOR_CASES))
def test_adafactor_matches_hugging_faces_formulas_in_float64(case):
    kw = ADAFACTOR_CASES[case]
    arrays, ps = params64()
    grads = gradients(6)
    opt = mg.optim.Adafactor(ps, **kw)
    want, want_state, clipped = hf_adafactor(arrays, grads, **kw)
    worst = 0.0
    for step, (grad_list, expected) in enumerate(zip(grads, want)):
        set_grads(ps, grad_list)
        opt.step()
        for i, (p, e) in enumerate(zip(ps, expected)):
            got = to_host(p)
            np.testing.assert_allclose(got, e, rtol=RTOL, atol=0, err_msg=f"parameter {i} after step {step + 1}")
            worst = max(worst, float(np.max(np.abs(got - e) / np.abs(e))))
    assert worst < RTOL
    if case == "fixed_lr_scaled_clipped":
        assert clipped  # the case meant to clip does
    for p, ref in zip(ps, want_state):
        state = opt.state[p]
        assert set(state) == set(ref) and state["step"] == 6
        for name in set(ref) - {"step"}:
            np.testing.assert_allclose(to_host(state[name]), ref[name], rtol=RTOL, err_msg=name)
    # the reference is not vacuous: every parameter moved, by far more than the tolerance (warmup_init's steps
    # are 1e-6 t)
    assert all(np.max(np.abs(to_host(p) - a)) > 1e-8 for p, a in zip(ps, arrays))


def test_adafactor_keeps_a_row_and_a_column_for_a_matrix_and_everything_for_a_vector():
    _, ps = params64()
    opt = mg.optim.Adafactor(ps)
    set_grads(ps, gradients(1)[0])
    opt.step()
    shapes = {tuple(p.shape): {k: tuple(v.shape) for k, v in opt.state[p].items() if k != "step"} for p in ps}
    assert shapes == {(6, 5): {"exp_avg_sq_row": (6,), "exp_avg_sq_col": (5,)}, (5,): {"exp_avg_sq": (5,)},
                      (2, 3, 4): {"exp_avg_sq_row": (2, 3), "exp_avg_sq_col": (2, 4)},
                      (1, 7): {"exp_avg_sq_row": (1,), "exp_avg_sq_col": (7,)}}
    assert opt.state_bytes() == 8 * (6 + 5 + 5 + 2 * 3 + 2 * 4 + 1 + 7)  # float64


TORCH_SETTINGS = {  # (minigrad's Adafactor, torch.optim.Adafactor): NOTE [two Adafactors] says why these coincide
    "relative_step": (dict(), dict(lr=1e-2)),
    "fixed_lr": (dict(lr=1e-3, relative_step=False), dict(lr=1e-3)),
    "clipped": (dict(lr=5e-3, relative_step=False, clip_threshold=1.5, decay_rate=-0.6),   # clips (torch: d >= 1)
                dict(lr=5e-3, d=1.5, beta2_decay=-0.6)),
}


@pytest.mark.parametrize("setting", sorted(TORCH_SETTINGS))
def test_adafactor_matches_torch_optim_adafactor_where_they_coincide(setting):
    torch = pytest.importorskip("torch")
    if not hasattr(torch.optim, "Adafactor"):
        pytest.skip(f"torch {torch.__version__} has no torch.optim.Adafactor (PyTorch 2.5 added it)")
    mine, theirs = TORCH_SETTINGS[setting]
    arrays, ps = params64()
    ts = [torch.nn.Parameter(torch.tensor(a, dtype=torch.float64)) for a in arrays]
    opt, topt = mg.optim.Adafactor(ps, **mine), torch.optim.Adafactor(ts, **theirs)
    for step, grad_list in enumerate(gradients(10)):
        set_grads(ps, grad_list)
        for t, g in zip(ts, grad_list):
            t.grad = torch.tensor(g)
        opt.step()
        topt.step()
        for i, (p, t) in enumerate(zip(ps, ts)):
            np.testing.assert_allclose(to_host(p), t.detach().numpy(), rtol=1e-12, atol=0,
                                       err_msg=f"parameter {i} after step {step + 1}")
    assert all(np.max(np.abs(to_host(p) - a)) > 1e-4 for p, a in zip(ps, arrays))


@pytest.mark.parametrize("setting", sorted(TORCH_SETTINGS) + sorted(ADAFACTOR_CASES))
def test_adafactor_steps_a_0d_parameter_as_torch_and_hugging_face_do(setting):
    """A 0-d parameter (a learned temperature, a scalar gain) raised in step (NumPy's sqrt of a 0-d array is a
    scalar, which out= refuses); torch.optim.Adafactor and Hugging Face's algorithm step it as a vector's one
    element. Now it steps, beside a vector, as both do (to 1e-12 in float64; Hugging Face's in each of its cases)."""
    torch = pytest.importorskip("torch")
    shapes = [(), (3,)]
    arrays, ps = params64(shapes=shapes)
    grads = gradients(6, shapes=shapes)
    want = None
    if setting in ADAFACTOR_CASES:
        mine = ADAFACTOR_CASES[setting]
        want = hf_adafactor(arrays, grads, **mine)[0]
    else:
        mine, theirs = TORCH_SETTINGS[setting]
        ts = [torch.nn.Parameter(torch.tensor(a, dtype=torch.float64)) for a in arrays]
        topt = torch.optim.Adafactor(ts, **theirs)
    opt = mg.optim.Adafactor(ps, **mine)
    for step, grad_list in enumerate(grads):
        set_grads(ps, grad_list)
        opt.step()
        if want is None:
            for t, g in zip(ts, grad_list):
                t.grad = torch.tensor(g)
            topt.step()
        expected = want[step] if want is not None else [t.detach().numpy() for t in ts]
        for i, (p, e) in enumerate(zip(ps, expected)):
            assert p.shape == shapes[i]
            np.testing.assert_allclose(to_host(p), e, rtol=RTOL, atol=0, err_msg=f"parameter {i}, step {step + 1}")
    assert abs(float(to_host(ps[0])) - float(arrays[0])) > 1e-8


def test_adafactor_and_torchs_differ_in_weight_decay_as_the_docstring_says():
    """Not vacuous: with weight decay the two differ (torch multiplies by lr, Hugging Face by the scaled step)."""
    torch = pytest.importorskip("torch")
    if not hasattr(torch.optim, "Adafactor"):
        pytest.skip(f"torch {torch.__version__} has no torch.optim.Adafactor")
    arrays, ps = params64()
    ts = [torch.nn.Parameter(torch.tensor(a, dtype=torch.float64)) for a in arrays]
    opt, topt = mg.optim.Adafactor(ps, weight_decay=0.1), torch.optim.Adafactor(ts, weight_decay=0.1)
    set_grads(ps, gradients(1)[0])
    for t, g in zip(ts, gradients(1)[0]):
        t.grad = torch.tensor(g)
    opt.step()
    topt.step()
    assert not np.allclose(to_host(ps[0]), ts[0].detach().numpy(), rtol=1e-6)


# ----------------------------------------------------------------------------- AdamW8bit: the code map

def test_the_code_maps_are_bitsandbytes_to_the_bit():
    torch = pytest.importorskip("torch")

    def bnb_create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
        """bitsandbytes.functional.create_dynamic_map, as bitsandbytes writes it (with torch)."""
        data = []
        non_sign_bits = total_bits - 1
        additional_items = 2 ** (non_sign_bits - max_exponent_bits) - 1
        for i in range(max_exponent_bits):
            fraction_items = int(2 ** (i + non_sign_bits - max_exponent_bits) + 1 if signed
                                 else 2 ** (i + non_sign_bits - max_exponent_bits + 1) + 1)
            boundaries = torch.linspace(0.1, 1, fraction_items, dtype=torch.float32)
            means = (boundaries[:-1] + boundaries[1:]) / 2.0
            data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
            if signed:
                data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        assert additional_items == 0
        data.append(0)
        data.append(1.0)
        assert len(data) == 2 ** total_bits
        data.sort()
        return torch.tensor(data, dtype=torch.float32)

    for signed in (True, False):
        np.testing.assert_array_equal(create_dynamic_map(signed), bnb_create_dynamic_map(signed).numpy())


def test_the_code_maps_shape_and_their_error_bound():
    signed, unsigned = create_dynamic_map(True), create_dynamic_map(False)
    for code in (signed, unsigned):
        assert code.dtype == np.float32 and code.shape == (256,) and len(np.unique(code)) == 256
        assert np.all(np.diff(code) > 0) and 0.0 in code and code[-1] == 1.0
    assert signed[0] == np.float32(-(1 - 0.45 / 64)) and unsigned[0] == 0.0
    assert (np.sum(signed > 0), np.sum(signed < 0), np.sum(unsigned > 0)) == (128, 127, 255)
    # the half-gap of the top decade: 64 (signed) or 128 (unsigned) midpoints of [0.1, 1]
    assert quantization_error_bound(True) == pytest.approx(0.9 / 128, rel=1e-4)
    assert quantization_error_bound(False) == pytest.approx(0.9 / 256, rel=1e-4)  # float32 entries


def quantize_round_trip(values, signed):
    """values (one parameter's moment) -> quantized by a fresh AdamW8bit's code, dequantized, on the device."""
    from minigrad.optim.adamw8bit import _dequantize, _quantize
    xp = mg.backend.xp_for(DEVICE)
    code = mg.backend.to_device(create_dynamic_map(signed), DEVICE)
    n = values.size
    blocks = xp.zeros(-(-n // BLOCK_SIZE) * BLOCK_SIZE, np.float32)
    blocks[:n] = mg.backend.to_device(values.astype(np.float32), DEVICE)
    blocks = blocks.reshape(-1, BLOCK_SIZE)
    codes, absmax = xp.zeros(n, np.uint8), xp.zeros(blocks.shape[0], np.float32)
    _quantize(xp, blocks, code, codes, absmax, n)
    out = _dequantize(xp, codes, absmax, code, n).reshape(-1)[:n]
    return to_host(codes), to_host(absmax), to_host(out)


@pytest.mark.parametrize("signed", [True, False])
def test_quantizing_picks_the_nearest_code_within_the_bound(signed):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000) * np.exp(rng.uniform(-12, 2, 1000))  # many decades, as moments are
    x = x if signed else x * x
    codes, absmax, out = quantize_round_trip(x, signed)
    assert absmax.shape == (4,)  # 1000 elements: 3 blocks of 256 and one of 232
    np.testing.assert_array_equal(absmax, [np.abs(x[i:i + 256]).max().astype(np.float32) for i in range(0, 1000, 256)])
    code = create_dynamic_map(signed).astype(np.float64)
    scale = np.repeat(absmax, 256)[:1000].astype(np.float64)
    normalized = x.astype(np.float32).astype(np.float64) / scale
    nearest = np.abs(normalized[:, None] - code[None, :]).min(axis=1)
    chosen = np.abs(normalized - code[codes])
    np.testing.assert_allclose(chosen, nearest, atol=1e-7)  # the nearest entry (ties and float32 aside)
    error = np.abs(out - x)
    assert np.all(error <= quantization_error_bound(signed) * scale * (1 + 1e-5))
    assert np.all(error[np.abs(normalized) > 0.1] <= 0.0617 * np.abs(x[np.abs(normalized) > 0.1]))  # top decade
    assert error.max() > 0  # it is a quantization: something was lost


# ----------------------------------------------------------------------------- AdamW8bit: against float32 AdamW

def test_the_moments_stay_within_the_accumulated_bound_of_exact_float32_moments():
    """With the same gradients, the 8-bit moments m~ and exact float32 moments m differ by e_t = b e_{t-1} + q_t,
    |q_t| <= h absmax_t (h: the map's largest half-gap, absmax_t: the block's at step t): so |e_t| <= E_t with
    E_t = b E_{t-1} + h absmax_t, per block. Checked at each of 20 steps, for both moments."""
    rng = np.random.default_rng(0)
    shape, b1, b2 = (40, 130), 0.9, 0.999                       # 5200 elements: 8-bit, 21 blocks, the last short
    p = mg.nn.Parameter(mg.tensor(rng.standard_normal(shape), dtype="float32"))
    opt = mg.optim.AdamW8bit([p], lr=1e-3, betas=(b1, b2))
    m, v = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    bound1, bound2 = np.zeros(21), np.zeros(21)
    h1, h2 = quantization_error_bound(True), quantization_error_bound(False)
    per_block = lambda a: np.repeat(a, BLOCK_SIZE)[:5200].reshape(shape)  # noqa: E731
    worst = [0.0, 0.0]
    for step in range(20):
        g = (rng.standard_normal(shape) * np.exp(rng.uniform(-6, 0, shape))).astype(np.float32)
        p.grad = mg.tensor(g)
        opt.step()
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        state = opt.state[p]
        bound1 = b1 * bound1 + h1 * to_host(state["absmax1"])
        bound2 = b2 * bound2 + h2 * to_host(state["absmax2"])
        m8, v8 = (to_host(a) for a in opt.dequantized(p))
        for i, (got, exact, bound) in enumerate(((m8, m, bound1), (v8, v, bound2))):
            error = np.abs(got.astype(np.float64) - exact)
            allowed = per_block(bound) * (1 + 1e-4) + 1e-6 * np.abs(exact)  # float32 rounding on top
            assert np.all(error <= allowed), f"moment {i + 1}, step {step + 1}: {np.max(error / allowed):.3f}"
            worst[i] = max(worst[i], float(np.max(error / allowed)))
    assert state["step"] == 20 and state["state1"].dtype == np.uint8 and state["state1"].shape == shape
    assert all(0.01 < w <= 1 for w in worst), worst  # the bound is approached, not vacuous
    assert np.max(per_block(bound1)) < 0.1 * np.abs(m).max()  # ... and it is a useful bound


def small_mlp(seed=0, hidden=256):
    mg.manual_seed(seed)
    return mg.nn.Sequential(mg.nn.Linear(32, hidden), mg.nn.Tanh(), mg.nn.Linear(hidden, 10))


def train(make_opt, steps=20, hidden=256):
    model = small_mlp(hidden=hidden)
    x, y = mg.randn(64, 32), mg.randint(0, 10, (64,))
    start = [to_host(p).copy() for p in model.parameters()]
    opt = make_opt(model.parameters())
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return start, [to_host(p) for p in model.parameters()], losses, opt


def test_a_training_run_stays_near_float32_adamws():
    """20 steps of an MLP whose first weight (32 x 256 = 8192 elements) is 8-bit: every parameter ends within 5%
    (of how far it moved) of float32 AdamW's, and the loss within 2% (measured: 2.4% and 0.3%)."""
    start, want, want_losses, _ = train(lambda ps: mg.optim.AdamW(ps, lr=1e-2))
    _, got, losses, opt = train(lambda ps: mg.optim.AdamW8bit(ps, lr=1e-2))
    assert ["qmap1" in opt.state[p] for p in opt.params] == [True, False, False, False]
    for i, (s, w, g) in enumerate(zip(start, want, got)):
        moved, off = np.linalg.norm(w - s), np.linalg.norm(g - w)
        assert off <= 0.05 * moved, f"parameter {i}: {off / moved:.3f} of its displacement"
    assert np.linalg.norm(got[0] - want[0]) > 1e-3 * np.linalg.norm(want[0] - start[0])  # the 8 bits do show
    assert abs(losses[-1] - want_losses[-1]) <= 0.02 * want_losses[-1] and losses[-1] < 0.1 * losses[0]


def test_below_min_8bit_size_it_is_adamw_bit_for_bit():
    _, want, _, _ = train(lambda ps: mg.optim.AdamW(ps, lr=1e-2, weight_decay=0.1), steps=5)
    _, got, _, opt = train(lambda ps: mg.optim.AdamW8bit(ps, lr=1e-2, weight_decay=0.1, min_8bit_size=10 ** 6),
                           steps=5)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)
    assert all(set(s) == {"step", "state1", "state2"} for s in opt.state.values())



@pytest.mark.parametrize("shape", [(10 * BLOCK_SIZE + 17,), (37, 91)])
def test_a_chunk_at_a_time_gives_the_whole_parameters_step_bit_for_bit(shape, monkeypatch):
    """NOTE [a chunk at a time]: chunks of 3 blocks (the last block of the last chunk short) against one chunk."""
    from minigrad.optim import adamw8bit

    def run(chunk_blocks):
        monkeypatch.setattr(adamw8bit, "CHUNK_BLOCKS", chunk_blocks)
        mg.manual_seed(0)
        w = mg.nn.Parameter(mg.randn(*shape))
        opt = mg.optim.AdamW8bit([w], lr=1e-2, weight_decay=0.1, min_8bit_size=0)
        for step in range(3):
            w.grad = mg.randn(*shape) * (step + 1)
            opt.step()
        return to_host(w.data), {k: to_host(v) for k, v in opt.state[w].items() if backend.is_array(v)}

    (w3, s3), (w_all, s_all) = run(3), run(10 ** 6)
    np.testing.assert_array_equal(w3, w_all)
    assert s3.keys() == s_all.keys()
    for key in s3:
        np.testing.assert_array_equal(s3[key], s_all[key], err_msg=key)


# ----------------------------------------------------------------------------- the ledger counts them exactly

def profiled(make_opt, device, steps=2):
    mg.manual_seed(0)
    with mg.device(device):
        model = mg.nn.Sequential(mg.nn.Linear(64, 80), mg.nn.Tanh(), mg.nn.Linear(80, 10))
        x, y = mg.randn(8, 64), mg.randint(0, 10, (8,))
    opt = make_opt(model.parameters())
    with mg.profile(model, opt) as prof:
        for _ in range(steps):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return prof, opt


# the model: weight (80, 64) = 5120 elements, bias 80, weight (10, 80) = 800, bias 10
HAND_COUNTED = {
    "Adafactor": (lambda ps: mg.optim.Adafactor(ps), 4 * ((80 + 64) + 80 + (10 + 80) + 10)),
    "Adafactor_beta1": (lambda ps: mg.optim.Adafactor(ps, beta1=0.9),
                        4 * ((80 + 64) + 80 + (10 + 80) + 10) + 4 * (5120 + 80 + 800 + 10)),
    # 8-bit for the 5120-element weight only: 2 uint8 codes per element, 2 float32 absmax per block of 256 (20
    # blocks), the two 256-entry float32 maps once; the rest is AdamW's 2 float32 per element
    "AdamW8bit": (lambda ps: mg.optim.AdamW8bit(ps), 2 * 5120 + 2 * 4 * 20 + 2 * 4 * 256 + 8 * (80 + 800 + 10)),
    "AdamW8bit_all": (lambda ps: mg.optim.AdamW8bit(ps, min_8bit_size=0),
                      2 * (5120 + 80 + 800 + 10) + 2 * 4 * (20 + 1 + 4 + 1) + 2 * 4 * 256),
    "AdamW": (lambda ps: mg.optim.AdamW(ps), 8 * (5120 + 80 + 800 + 10)),
}


@pytest.mark.parametrize("name", sorted(HAND_COUNTED))
def test_the_ledger_counts_the_optimizers_arrays_exactly(name):
    make, hand = HAND_COUNTED[name]
    prof, opt = profiled(make, DEVICE)
    assert prof.current_bytes("optimizer") == prof.peak_bytes("optimizer") == opt.state_bytes() == hand
    if name.startswith("AdamW8bit"):
        maps = {id(s["qmap1"]) for s in opt.state.values() if "qmap1" in s}
        assert len(maps) == 1  # one shared map, counted once


@pytest.mark.parametrize("name", sorted(HAND_COUNTED))
def test_meta_gives_the_real_runs_ledger_event_by_event(name):
    make, hand = HAND_COUNTED[name]
    (real, _), (meta, meta_opt) = profiled(make, "cpu"), profiled(make, "meta")
    assert meta.timeline() == real.timeline()
    assert meta.bytes_at_peak() == real.bytes_at_peak()
    assert meta.table(times=False) == real.table(times=False)
    assert meta.current_bytes("optimizer") == hand and all(p.device == "meta" for p in meta_opt.params)


def test_adafactor_is_the_lean_one():
    """bert-large-like matrices: Adafactor keeps a row and a column, AdamW8bit a quarter of AdamW's bytes."""
    with mg.device("meta"):
        w = [mg.nn.Parameter(mg.zeros(1024, 4096)), mg.nn.Parameter(mg.zeros(4096))]
    counts = {}
    for name, make in (("AdamW", mg.optim.AdamW), ("Adafactor", mg.optim.Adafactor), ("AdamW8bit", mg.optim.AdamW8bit)):
        opt = make(w)
        for p in w:
            p.grad = mg.zeros(*p.shape, device="meta")
        opt.step()
        counts[name] = opt.state_bytes()
        for p in w:
            p.grad = None
    n = 1024 * 4096 + 4096
    assert counts == {"AdamW": 8 * n, "Adafactor": 4 * (1024 + 4096 + 4096),
                      "AdamW8bit": 2 * 1024 * 4096 + 8 * 1024 * 4096 // 256 + 2048 + 2 * 4096 + 8 * 4096 // 256}


# ----------------------------------------------------------------------------- state_dict, groups, errors

@pytest.mark.parametrize("make", [lambda ps: mg.optim.Adafactor(ps, beta1=0.9, weight_decay=0.01),
                                  lambda ps: mg.optim.AdamW8bit(ps, lr=1e-2, min_8bit_size=20)],
                         ids=["Adafactor", "AdamW8bit"])
def test_state_dict_round_trip_continues_the_same_run(make):
    _, ps = params64(shapes=[(6, 5), (5,), (3, 4, 5)], dtype="float32")
    grads = gradients(5, shapes=[(6, 5), (5,), (3, 4, 5)])
    opt = make(ps)
    for g in grads[:3]:
        set_grads(ps, g)
        opt.step()
    saved = opt.state_dict()
    twins = [mg.nn.Parameter(mg.tensor(to_host(p))) for p in ps]
    other = make(twins)
    other.load_state_dict(copy.deepcopy(saved))
    for g in grads[3:]:
        set_grads(ps, g)
        set_grads(twins, g)
        opt.step()
        other.step()
    for p, q in zip(ps, twins):
        np.testing.assert_array_equal(to_host(q), to_host(p))
    assert other.state_bytes() == opt.state_bytes()
    # the saved dict is a copy: stepping on did not change it
    assert saved["state"][0]["step"] == 3
    if "qmap1" in opt.state[ps[0]]:
        assert other.state[twins[0]]["qmap1"] is other.state[twins[2]]["qmap1"]  # shared again after loading
    bad = copy.deepcopy(saved)
    key = next(k for k in bad["state"][0] if k not in ("step", "qmap1", "qmap2"))
    bad["state"][0][key] = bad["state"][0][key][:1]
    with pytest.raises(ValueError, match=r"has shape \(1, 5\) but .*\(6, 5\); was this state saved for another"):
        make(twins).load_state_dict(bad)


def test_param_groups_take_their_own_settings():
    _, ps = params64()
    opt = mg.optim.Adafactor([{"params": ps[:2]}, {"params": ps[2:], "beta1": 0.9, "weight_decay": 0.1}])
    set_grads(ps, gradients(1)[0])
    opt.step()
    assert ["exp_avg" in opt.state[p] for p in ps] == [False, False, True, True]
    p8 = [mg.nn.Parameter(mg.zeros(100)), mg.nn.Parameter(mg.zeros(100))]
    opt8 = mg.optim.AdamW8bit([{"params": p8[:1]}, {"params": p8[1:], "min_8bit_size": 50}])
    for p in p8:
        p.grad = mg.ones(100)
    opt8.step()
    assert ["qmap1" in opt8.state[p] for p in p8] == [False, True]
    assert opt8.state[p8[1]]["absmax1"].shape == (1,)


def test_errors_that_say_what_to_do():
    p = [mg.nn.Parameter(mg.zeros(3))]
    with pytest.raises(ValueError, match=r"Cannot combine manual `lr` and `relative_step=True`.*relative_step=False"):
        mg.optim.Adafactor(p, lr=1e-3)
    with pytest.raises(ValueError, match="warmup_init=True` requires `relative_step=True"):
        mg.optim.Adafactor(p, lr=1e-3, relative_step=False, warmup_init=True)
    with pytest.raises(ValueError, match="relative_step=False needs an lr"):
        mg.optim.Adafactor(p, relative_step=False)
    with pytest.raises(TypeError, match=r"lr must be a number.*float\('0.1'\)"):
        mg.optim.Adafactor(p, lr="0.1", relative_step=False)
    with pytest.raises(ValueError, match="decay_rate must be <= 0"):
        mg.optim.Adafactor(p, decay_rate=0.8)
    with pytest.raises(ValueError, match=r"beta1 must be in \[0, 1\)"):
        mg.optim.Adafactor(p, beta1=1.0)
    with pytest.raises(ValueError, match="eps must be a pair"):
        mg.optim.Adafactor(p, eps=1e-30)
    with pytest.raises(ValueError, match="clip_threshold must be > 0"):
        mg.optim.Adafactor(p, clip_threshold=0.0)
    with pytest.raises(ValueError, match="param group 1: relative_step=False needs an lr"):
        mg.optim.Adafactor([{"params": p}, {"params": [mg.nn.Parameter(mg.zeros(2))], "relative_step": False}])
    with pytest.raises(ValueError, match=r"param group 1: lr=0.001 with relative_step=True would be ignored.*give the "
                                         r"group relative_step=False"):  # it was, and a schedule's lr with it
        mg.optim.Adafactor([{"params": p}, {"params": [mg.nn.Parameter(mg.zeros(2))], "lr": 1e-3}])
    fixed = mg.optim.Adafactor(p, lr=1e-3, relative_step=False)
    saved = fixed.state_dict()
    saved["param_groups"][0]["relative_step"] = True
    with pytest.raises(ValueError, match=r"load_state_dict: param group 0: lr=0.001 with relative_step=True"):
        fixed.load_state_dict(saved)
    with pytest.raises(ValueError, match="lr must be >= 0"):
        mg.optim.AdamW8bit(p, lr=-1.0)
    with pytest.raises(ValueError, match=r"betas\[1\] must be in \[0, 1\)"):
        mg.optim.AdamW8bit(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="amsgrad is not supported.*AdamW\\(amsgrad=True\\)"):
        mg.optim.AdamW8bit(p, amsgrad=True)
    with pytest.raises(TypeError, match="min_8bit_size must be a whole number"):
        mg.optim.AdamW8bit(p, min_8bit_size=4096.0)


def test_the_names_point_to_them():
    assert {"Adafactor", "AdamW8bit"} <= set(mg.optim.__all__) and "Adafactor" not in mg.optim._INSTEAD
    with pytest.raises(AttributeError, match="AdamW8bit"):
        mg.optim.Adam8bit
    with pytest.raises(AttributeError, match="did you mean 'Adafactor'"):
        mg.optim.AdaFactor
    with pytest.raises(AttributeError, match="it is mg.optim.Adafactor"):
        mg.Adafactor


def test_a_schedule_drives_a_fixed_lr_and_refuses_the_relative_step():
    p = mg.nn.Parameter(mg.zeros(3))
    with pytest.raises(ValueError, match=r"lr=None, nothing to schedule: Adafactor.*relative_step=False"):
        mg.optim.lr_scheduler.LambdaLR(mg.optim.Adafactor([p]), lambda step: 1.0)
    opt = mg.optim.Adafactor([p], lr=0.1, relative_step=False, scale_parameter=False)
    sched = mg.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(2):  # a constant gradient: each update is exactly -lr (g / sqrt(g^2 + 1e-30), RMS 1)
        p.grad = mg.ones(3)
        opt.step()
        sched.step()
    np.testing.assert_allclose(to_host(p), [-0.15] * 3, rtol=1e-6)


# ----------------------------------------------------------------------------- float16 and bfloat16 parameters

LOW_PRECISION = {
    "Adafactor": lambda ps, wd: mg.optim.Adafactor(ps, weight_decay=wd),
    "Adafactor_beta1_fixed_lr": lambda ps, wd: mg.optim.Adafactor(ps, lr=1e-2, relative_step=False, beta1=0.9,
                                                                  weight_decay=wd),
    "AdamW8bit": lambda ps, wd: mg.optim.AdamW8bit(ps, lr=1e-2, weight_decay=wd),            # 64 elements: 32-bit
    "AdamW8bit_quantized": lambda ps, wd: mg.optim.AdamW8bit(ps, lr=1e-2, weight_decay=wd, min_8bit_size=1),
}


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(sorted(LOW_PRECISION)), dtype=st.sampled_from(["float16", "bfloat16"]),
       shape=st.sampled_from([(8, 8), (64,), (2, 4, 8)]), scale=st.sampled_from([1.0, 1e-2, 1e-4, 1e-6]),
       wd=st.sampled_from([0.0, 0.1]), seed=st.integers(0, 2 ** 16))
def test_a_low_precision_parameter_steps_as_its_float32_copy_rounded_once(name, dtype, shape, scale, wd, seed):
    """Hugging Face's Adafactor upcasts a float16 or bfloat16 parameter and its gradient to float32, steps with
    float32 state and copies the result back; bitsandbytes' kernels load both as float and keep float32 state. So a
    low-precision parameter ends each step as its float32 twin would, rounded once. Computed in float16 instead,
    a gradient of 1e-4 squared (1e-8) and eps (1e-30, 1e-8) underflow to 0: Adafactor's 0 / 0 and AdamW's m / 0
    made the whole parameter NaN."""
    rng = np.random.default_rng(seed)
    start = rng.standard_normal(shape).astype(np.float32)
    low = mg.nn.Parameter(mg.tensor(start, dtype=dtype))
    twin = mg.nn.Parameter(mg.tensor(to_host(low).astype(np.float32)))  # the same values, in float32
    opt, ref = LOW_PRECISION[name]([low], wd), LOW_PRECISION[name]([twin], wd)
    for _ in range(3):
        g = mg.tensor((rng.standard_normal(shape) * scale).astype(np.float32), dtype=dtype)
        low.grad, twin.grad = g, g.float()
        opt.step()
        ref.step()
        with mg.no_grad():
            twin.copy_(twin.to(dtype).float())  # rounded once, as the step writes the low-precision parameter
        np.testing.assert_array_equal(to_host(low).astype(np.float32), to_host(twin))
    assert np.all(np.isfinite(to_host(low).astype(np.float32)))
    for key, value in opt.state[low].items():  # the state is float32 (or uint8 codes), the twin's to the bit
        if backend.is_array(value):
            assert value.dtype == ref.state[twin][key].dtype and value.dtype != np.dtype(dtype), key
            np.testing.assert_array_equal(to_host(value), to_host(ref.state[twin][key]), err_msg=key)
    other = LOW_PRECISION[name]([mg.nn.Parameter(mg.tensor(start, dtype=dtype))], wd)
    other.load_state_dict(opt.state_dict())  # loading keeps the float32 state float32
    assert all(v.dtype == ref.state[twin][k].dtype for k, v in other.state[other.params[0]].items()
               if backend.is_array(v))
