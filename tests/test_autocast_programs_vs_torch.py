"""Generated programs under mg.autocast against the same programs under torch.autocast (torch 2.13, CPU).

tests/test_amp.py checks the lists one call at a time; here hypothesis draws chains of ops (the products, attention,
layer_norm, softmax, GELU, the pointwise ops, reductions, cumsum, var, norm, arithmetic between a float32 residual
and a low-precision product and with Python numbers, cat/stack/where of mixed dtypes, reshapes and slices,
embedding, dropout in eval, the losses) over float32 weights that require grad and an input that is already in the
low precision, with nested autocast(enabled=False) regions and the region exited mid-program. Each op's output
dtype must be PyTorch's exactly (the dtype is what the ledger counts), each op's values within the low precision's
rounding of what PyTorch's op gives for the same inputs (minigrad's inputs, handed to torch: no drift carried
along the chain), the final values and the leaves' gradients within rounding carried through the chain, and the
gradients' dtypes exactly. The same program on 'meta' gives the real run's ledger event by event.

Where a region is off (enabled=False, or after the region), the program casts the operands to float32 itself, as
PyTorch's docs advise: minigrad never promotes dtypes outside autocast (README, "Half the bytes").

Deliberate differences (README, "Half the bytes"), kept and allowed for here:
  * a weight used several times in a region is cast once and each use's gradient summed in float32 (PyTorch sums
    them in the low precision first): the gradients agree within the low precision's rounding, not to the bit;
  * layer_norm casts its weight and bias to the input's dtype (PyTorch's CPU kernel keeps them float32 inside):
    the same output dtype, values within rounding;
  * in-place ops are not autocast (none are drawn here).

On 'cuda' (the stand-in pass) autocast is float16 and follows CUDA's lists; torch here has CPU autocast only, so
torch's side applies CUDA's float32 list (PyTorch's docs, "CUDA Ops that can autocast to float32") by hand.

Found by these programs (each silently wrong, now fixed, with a test of its own below): bfloat16 ** 0.5 was
float32; a 2-byte layer_norm of rows far from zero was 32 units of bfloat16 off (its mean rounded before x - mean);
a float32 0-d weight widened a bfloat16 product to float32 (PyTorch: a tensor with dims decides); the 2-byte tanh
GELU gave -0.0 for -0.00105, sigmoid, softmax and log_softmax were several units off (rounded step by step, not
once); float16 var and norm overflowed to inf past 65,504 inside; on CUDA's lists var and std were float32 and
x ** y, 2 ** x and 2 / x float16 (PyTorch: the reverse), norm squared in float16; and 'meta' predicted another
ledger than the CPU's where a reshape copied (NumPy returns a view of the copy) or a 0-d weight got a gradient.
"""
import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import minigrad as mg
import minigrad.functional as F

from on_device import DEVICE, to_host

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore::RuntimeWarning")]
TF = torch.nn.functional

LOWS = ["bfloat16", "float16"] if DEVICE == "cpu" else ["float16"]  # CuPy has no bfloat16 (autocast_mode.py)
EPS = {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10, "float32": 2.0 ** -23}
# PyTorch's docs, "CUDA Ops that can autocast to float32", the ones drawn here (torch's CPU autocast stands in for
# CUDA's on torch's side: these run in float32 by hand there); not norm, normalize and reciprocal (2 / x), which
# minigrad leaves in the input's dtype (NOTE [autocast's lists]; test_on_cuda_the_float32_list_is_pytorchs_...)
CUDA_FLOAT32 = {"softmax", "log_softmax", "layer_norm", "exp", "log", "pow", "sum", "cumsum", "cross_entropy",
                "mse_loss", "nll_loss", "l1_loss", "binary_cross_entropy_with_logits", "softplus", "logsumexp"}
N, D, V = 4, 8, 10
NUMBERS = [0.5, 3.0, 0.1, -1.7]


class Lib:
    """One library's side of a run: torch or minigrad, and whether torch's side must apply CUDA's float32 list."""

    def __init__(self, name, cuda_lists=False):
        self.name, self.cuda_lists, self.on = name, cuda_lists, False
        self.M, self.Fn = (mg, F) if name == "mg" else (torch, TF)

    def f32(self, name, *ts):
        """The operands as an op in CUDA's float32 list sees them (torch's side, on the stand-in pass only)."""
        if self.cuda_lists and self.name == "torch" and self.on and name in CUDA_FLOAT32:
            return tuple(t.float() if t.is_floating_point() else t for t in ts)
        return ts


# name -> (operands drawn from the pool, f(lib, leaves, *operands)) giving an (N, D) tensor (or a loss: "loss")
def _sdpa(L, w, a, b, c, causal):
    q, k, v = (t.reshape(N, 2, D // 2).transpose(0, 1) for t in (a, b, c))
    return L.Fn.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(0, 1).reshape(N, D)


OPS = {
    "linear":       (1, lambda L, w, a: L.Fn.linear(a, w["W1"], w["b1"])),
    "matmul":       (1, lambda L, w, a: a @ w["W2"]),
    "matmul3":      (3, lambda L, w, a, b, c: (a @ b.transpose(0, 1)) @ c),
    "sdpa":         (3, lambda L, w, a, b, c: _sdpa(L, w, a, b, c, False)),
    "sdpa_causal":  (3, lambda L, w, a, b, c: _sdpa(L, w, a, b, c, True)),
    "layer_norm":   (1, lambda L, w, a: L.Fn.layer_norm(*L.f32("layer_norm", a), (D,), w["ln_w"], w["ln_b"])),
    "softmax":      (1, lambda L, w, a: L.Fn.softmax(*L.f32("softmax", a), -1)),
    "log_softmax":  (1, lambda L, w, a: L.Fn.log_softmax(*L.f32("log_softmax", a), -1)),
    "gelu":         (1, lambda L, w, a: L.Fn.gelu(a)),
    "gelu_tanh":    (1, lambda L, w, a: L.Fn.gelu(a, approximate="tanh")),
    "relu":         (1, lambda L, w, a: a.relu()),
    "tanh":         (1, lambda L, w, a: a.tanh()),
    "exp":          (1, lambda L, w, a: L.f32("exp", a.tanh())[0].exp()),
    "log":          (1, lambda L, w, a: L.f32("log", a.abs() + 1)[0].log()),
    "pow":          (1, lambda L, w, a: L.f32("pow", a)[0] ** 2),
    "sqrt_pow":     (1, lambda L, w, a: L.f32("pow", a.abs() + 1)[0] ** 0.5),
    "pow_2.5":      (1, lambda L, w, a: L.f32("pow", a.abs() + 0.5)[0] ** 2.5),
    "norm3":        (1, lambda L, w, a: a / (L.f32("norm", a)[0].norm(p=3, dim=-1, keepdim=True) + 1)),
    "std":          (1, lambda L, w, a: a / (a.std(0, keepdim=True) + 1)),
    "center":       (1, lambda L, w, a: a - a.mean(-1, keepdim=True)),
    "center0":      (1, lambda L, w, a: a - a.mean(0, keepdim=True)),
    "sum":          (1, lambda L, w, a: a + L.f32("sum", a)[0].sum(-1, keepdim=True) * 0.25),
    "sum0":         (2, lambda L, w, a, b: b * L.f32("sum", a)[0].sum(0, keepdim=True)),
    "cumsum":       (1, lambda L, w, a: L.f32("cumsum", a)[0].cumsum(-1)),
    "cumsum0":      (1, lambda L, w, a: L.f32("cumsum", a)[0].cumsum(0)),
    "var":          (1, lambda L, w, a: a / (a.var(-1, keepdim=True) + 1)),
    "norm":         (1, lambda L, w, a: a / (L.f32("norm", a)[0].norm(dim=-1, keepdim=True) + 1)),
    "add":          (2, lambda L, w, a, b: a + b),
    "sub":          (2, lambda L, w, a, b: a - b),
    "mul":          (2, lambda L, w, a, b: a * b),
    "div":          (2, lambda L, w, a, b: a / (b * b + 1)),
    "cat":          (2, lambda L, w, a, b: L.M.cat([a[:2], b[2:]], 0)),
    "stack":        (2, lambda L, w, a, b: L.M.stack([a, b], 0).mean(0)),
    "where":        (2, lambda L, w, a, b: L.M.where(a > b, a, b)),
    "reshape":      (1, lambda L, w, a: a.reshape(D, N).transpose(0, 1) * 1.0),
    "slice":        (1, lambda L, w, a: L.M.cat([a[:, D // 2:], a[:, :D // 2]], 1)),
    "dropout_eval": (1, lambda L, w, a: L.Fn.dropout(a, 0.5, training=False)),
    "embedding":    (0, lambda L, w: L.Fn.embedding(w["idx"], w["E"])),
    "scale0d":      (1, lambda L, w, a: a * w["s"]),  # a float32 0-d weight (a logit scale) beside a 2-byte tensor
    "mean0d":       (2, lambda L, w, a, b: a - b.mean()),  # a 0-d tensor of another dtype
    "sigmoid":      (1, lambda L, w, a: a.sigmoid()),
    "silu":         (1, lambda L, w, a: L.Fn.silu(a)),
    "softplus":     (1, lambda L, w, a: L.Fn.softplus(*L.f32("softplus", a))),
    "sqrt":         (1, lambda L, w, a: (a.abs() + 0.25).sqrt()),
    "clamp":        (1, lambda L, w, a: a.clamp(-0.5, 1.0)),
    "masked_fill":  (2, lambda L, w, a, b: a.masked_fill(b > 0, 0.25)),
    "maximum":      (2, lambda L, w, a, b: L.M.maximum(a, b)),
    "amax":         (2, lambda L, w, a, b: b - a.amax(-1, keepdim=True)),
    "logsumexp":    (1, lambda L, w, a: a - L.f32("logsumexp", a)[0].logsumexp(-1, keepdim=True)),
    "normalize":    (1, lambda L, w, a: L.Fn.normalize(*L.f32("normalize", a), dim=-1)),
    "sdpa_mask":    (3, lambda L, w, a, b, c: L.Fn.scaled_dot_product_attention(
        *(t.reshape(N, 2, D // 2).transpose(0, 1) for t in (a, b, c)), attn_mask=w["mask"]).transpose(0, 1)
        .reshape(N, D)),
    "cross_entropy": (1, lambda L, w, a: L.Fn.cross_entropy(*L.f32("cross_entropy", a), w["t"])),
    "nll_loss":     (1, lambda L, w, a: L.Fn.nll_loss(*L.f32("nll_loss", L.Fn.log_softmax(
        *L.f32("log_softmax", a), -1)), w["t"])),
    "l1_loss":      (2, lambda L, w, a, b: L.Fn.l1_loss(*L.f32("l1_loss", a, b))),
    "bce_logits":   (2, lambda L, w, a, b: L.Fn.binary_cross_entropy_with_logits(
        *L.f32("binary_cross_entropy_with_logits", a, b.sigmoid()))),
    "mse_loss":     (2, lambda L, w, a, b: L.Fn.mse_loss(*L.f32("mse_loss", a, b))),
}
for _i, _c in enumerate(NUMBERS):  # a Python number beside a tensor, each side
    OPS[f"mul_{_c}"] = (1, lambda L, w, a, c=_c: a * c)
    OPS[f"rsub_{_c}"] = (1, lambda L, w, a, c=_c: c - a)
    OPS[f"div_{_c}"] = (1, lambda L, w, a, c=_c: a / c)
    OPS[f"add_{_c}"] = (1, lambda L, w, a, c=_c: a + c)
OPS["rdiv"] = (1, lambda L, w, a: 3.0 / L.f32("reciprocal", a * a + 1)[0])  # PyTorch's: reciprocal, then * 3
OPS["rpow"] = (1, lambda L, w, a: 2.0 ** L.f32("pow", a.tanh())[0])
OPS["pow_tensor"] = (2, lambda L, w, a, b: _pow(*L.f32("pow", a.abs() + 1, b.tanh())))


def _pow(a, b):
    return a ** b
PRODUCTS = {"linear", "matmul", "matmul3", "sdpa", "sdpa_causal", "sdpa_mask"}
LOSSES = {"cross_entropy", "mse_loss", "nll_loss", "l1_loss", "bce_logits"}


def leaves(lib, low, seed, device):
    """The leaves, the same values in both libraries: float32 weights and input requiring grad, an input already in
    the low precision (requiring grad too), integer indices and targets."""
    rng = np.random.default_rng(seed)
    arrays = {"W1": (D, D), "b1": (D,), "W2": (D, D), "ln_w": (D,), "ln_b": (D,), "E": (V, D), "x": (N, D),
              "xl": (N, D), "s": ()}
    arrays = {k: np.asarray(rng.standard_normal(s) / (np.sqrt(D) if k in ("W1", "W2") else 1), np.float32)
              for k, s in arrays.items()}
    arrays["ln_w"] += 1
    idx, t = rng.integers(0, V, N), rng.integers(0, D, N)
    mask = np.where(rng.random((N, N)) < 0.3, -3.0, 0.0).astype(np.float32)  # an additive float mask
    if lib == "mg":  # the weights are Parameters (the ledger counts their cast copies), the inputs tensors
        w = {k: (mg.nn.Parameter if k not in ("x", "xl") else lambda t: t)(mg.tensor(a, device=device))
             for k, a in arrays.items()}
        w["xl"] = w["xl"].to(low)
        for v in w.values():
            v.requires_grad_(True)
        w["idx"], w["t"], w["mask"] = (mg.tensor(v, device=device) for v in (idx, t, mask))
    else:
        dt = torch.float64 if lib == "float64" else torch.float32
        w = {k: torch.tensor(a, dtype=dt) for k, a in arrays.items()}
        if lib != "float64":
            w["xl"] = w["xl"].to(getattr(torch, low))
        for v in w.values():
            v.requires_grad_(True)
        w["idx"], w["t"], w["mask"] = torch.tensor(idx), torch.tensor(t), torch.tensor(mask, dtype=dt)
    return w


@st.composite
def programs(draw):
    """A list of (op, operand picks, mode): mode 'on' (in the region), 'off' (a nested enabled=False region, one
    per maximal run of 'off' steps) or 'after' (the region exited)."""
    n = draw(st.integers(3, 10))
    names = draw(st.lists(st.sampled_from(sorted(OPS)), min_size=n, max_size=n))
    picks = [draw(st.lists(st.integers(0, 10 ** 6), min_size=3, max_size=3)) for _ in range(n)]
    exit_at = draw(st.one_of(st.none(), st.integers(1, n)))
    off = draw(st.lists(st.booleans(), min_size=n, max_size=n)) if draw(st.booleans()) else [False] * n
    modes = ["after" if exit_at is not None and i >= exit_at else "off" if off[i] else "on" for i in range(n)]
    return list(zip(names, picks, modes))


def run(program, lib, low, seed, device=None, record=None, w=None):
    """Run the program in one library ('mg', 'torch', or 'float64': torch without autocast, the exact reference);
    returns (the ops' outputs, the loss, the leaves). record(name, inputs, out, mode) sees each op as it runs."""
    name = "mg" if lib == "mg" else "torch"
    cuda_lists = (device or DEVICE) == "cuda" or (device == "meta" and DEVICE == "cuda")
    L = Lib(name, cuda_lists)
    w = w or leaves(lib, low, seed, device or DEVICE)
    kind = "cuda" if cuda_lists else "cpu"
    region = (lambda on: mg.autocast(kind, dtype=getattr(mg, low), enabled=on)) if name == "mg" else \
        (lambda on: torch.autocast("cpu", dtype=getattr(torch, low), enabled=on))
    if lib == "float64":
        region = lambda on: contextlib.nullcontext()  # noqa: E731
    pool, outs, losses = [w["x"], w["xl"]], [], []
    outer = contextlib.ExitStack()
    outer.enter_context(region(True))
    inner, was = None, "on"
    try:
        for op, picks, mode in program:
            if mode != was:  # the nested region opens or closes, or the outer one ends
                if inner is not None:
                    inner.close()
                    inner = None
                if mode == "off":
                    inner = contextlib.ExitStack()
                    inner.enter_context(region(False))
                if mode == "after":
                    outer.close()
                was = mode
            L.on = mode == "on" and lib != "float64"
            arity, f = OPS[op]
            args = [pool[-1 - p % len(pool)] for p in picks[:arity]]
            if mode != "on" and lib != "float64":  # autocast off: the program casts, as PyTorch advises
                args = [a.float() for a in args]
            out = f(L, w, *args)
            if record is not None:
                record(op, args, out, L.on)
            outs.append((op, out))
            (losses if op in LOSSES else pool).append(out)
        L.on = was == "on" and lib != "float64"
        last = pool[-1] if was == "on" or lib == "float64" else pool[-1].float()
        final = OPS["cross_entropy"][1](L, w, last)
        outs.append(("final cross_entropy", final))
        loss = final
        for term in losses:  # float32 (their ops are in the float32 list) or cast by the program
            loss = loss + (term if was == "on" or lib == "float64" else term.float())
    finally:
        if inner is not None:
            inner.close()
        outer.close()
    loss.backward()  # after the region, as PyTorch advises
    return outs, loss, w


def host(t):
    return (to_host(t.detach().float()) if isinstance(t, mg.Tensor) else t.detach().double().numpy()).astype(np.float64)


def tname(t):
    return t.dtype.name if isinstance(t, mg.Tensor) else str(t.dtype).replace("torch.", "")


def apart(a, b, dtype):
    """|a - b| in units of the dtype's spacing at b's largest magnitude."""
    scale = max(float(np.abs(b).max()) if b.size else 0.0, 2.0 ** -10)
    return float(np.abs(a - b).max() / (EPS[dtype] * scale)) if b.size else 0.0


SETTINGS = settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("low", LOWS)
@SETTINGS
@given(program=programs(), seed=st.integers(0, 2 ** 16))
def test_a_programs_dtypes_values_and_gradients_are_torchs(low, program, seed):
    # each op, on the same inputs: minigrad's inputs handed to torch's op under the same autocast state
    local = []

    def record(op, args, out, on):
        local.append((op, [host(a) if isinstance(a, mg.Tensor) else a for a in args],
                      [tname(a) for a in args], on, out))

    ours, loss, w = run(program, "mg", low, seed, record=record)
    theirs, tloss, tw = run(program, "torch", low, seed)
    exact, xloss, xw = run(program, "float64", low, seed)
    assert [(op, tname(t)) for op, t in ours] == [(op, tname(t)) for op, t in theirs], program
    # each op alone, within a few ulps of the dtype it ran in
    tL = Lib("torch", DEVICE == "cuda")
    tw_plain, tw64 = leaves("torch", low, seed, "cpu"), leaves("float64", low, seed, "cpu")
    for op, args, dtypes, on, out in local:
        targs = [torch.tensor(a).to(getattr(torch, d)) for a, d in zip(args, dtypes)]
        tL.on = on
        with torch.autocast("cpu", dtype=getattr(torch, low), enabled=on), torch.no_grad():
            ref = OPS[op][1](tL, tw_plain, *targs)
        with torch.no_grad():  # the op in float64 on the same values: the exact result of what each side got
            exact_op = OPS[op][1](Lib("torch"), tw64, *[t.double() for t in targs])
        assert tname(ref) == tname(out), (op, program)
        # in units of the low precision where anything in the op is in it (a 2-byte input, a product, a loss of a
        # 2-byte log_softmax: rounded inside, though the output is float32), else of the output's dtype
        rounded = on and op in PRODUCTS or any(d != "float32" for d in dtypes + [tname(out)])
        close(host(out), host(ref), host(exact_op), low if rounded else tname(out), op, program, tol=8)
    # the chain's values and the gradients: rounding carried along, or no farther from float64's than torch's
    for (op, a), (_, b), (_, x) in zip(ours, theirs, exact):
        close(host(a), host(b), host(x), low, op, program)
    for k in ("W1", "b1", "W2", "ln_w", "ln_b", "E", "x", "xl", "s"):
        g, tg, xg = w[k].grad, tw[k].grad, xw[k].grad
        assert (g is None) == (tg is None), (k, program)
        if g is None:
            continue
        assert tname(g) == tname(tg) == ("float32" if k != "xl" else low), (k, program)
        close(host(g), host(tg), host(xg), low, f"grad of {k}", program)


@pytest.mark.parametrize("low", LOWS)
@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(program=programs(), seed=st.integers(0, 2 ** 16))
def test_a_program_on_meta_gives_the_real_ledger_event_by_event(low, program, seed):
    """As tests/test_amp.py's GPT step: 'meta' follows the policy of the device it stands for, so the same program
    on meta tensors records the same casts, copies and dtypes, and its ledger is the real run's."""
    def ledger(device):
        w = leaves("mg", low, seed, device)
        with mg.profile(*w.values()) as prof:
            run(program, "mg", low, seed, device=device, w=w)
        return prof

    real, meta = ledger(DEVICE), ledger("meta")
    assert meta.timeline() == real.timeline(), program
    assert meta.bytes_at_peak() == real.bytes_at_peak()
    assert meta.saved_bytes_by_dtype() == real.saved_bytes_by_dtype()
    assert meta.cast_weight_bytes() == real.cast_weight_bytes()
    for phase in ("forward", "backward"):
        assert meta.flops(phase) == real.flops(phase)


def close(ours, theirs, exact, low, what, program, tol=16):
    assert ours.shape == theirs.shape
    if not np.isfinite(theirs).all():
        if np.isfinite(exact).all() and np.isfinite(ours).all():  # PyTorch's overflowed, the exact did not (float16
            assert apart(ours, exact, low) <= 4 * tol, (what, program)  # norm(p=3)'s backward): minigrad's is near it
        else:  # an overflow of the program itself (exp of a large value): minigrad's must match
            assert np.array_equal(np.isfinite(ours), np.isfinite(theirs)), (what, program)
        return
    off, ours_off, theirs_off = apart(ours, theirs, low), apart(ours, exact, low), apart(theirs, exact, low)
    assert off <= tol or ours_off <= 2 * theirs_off + tol, (what, off, ours_off, theirs_off, program)


@pytest.mark.parametrize("exponent", [0.5, 1 / 3, 2.5, -1.5])
def test_a_bfloat16_to_a_fractional_power_stays_bfloat16(exponent):
    """Found by the programs above: bfloat16 ** 0.5 (and any exponent but the ones ops.power special-cases) was
    float32, in and out of autocast, and so was norm(p=3) of bfloat16 (NumPy's power of an ml_dtypes bfloat16 array
    and a Python float gives float32): a float32 output where PyTorch's is bfloat16, twice the bytes in the ledger.
    The value is PyTorch's: computed in float32 and rounded once to bfloat16."""
    if DEVICE != "cpu":
        pytest.skip("CuPy has no bfloat16")
    a = np.array([0.5, 1.0, 2.0, 3.0, 7.5], dtype=np.float32)
    x, tx = mg.tensor(a).to(mg.bfloat16).requires_grad_(True), torch.tensor(a).bfloat16().requires_grad_(True)
    y, ty = x ** exponent, tx ** exponent
    assert y.dtype == mg.bfloat16 and np.array_equal(host(y), host(ty))
    y.sum().backward()
    ty.sum().backward()
    assert x.grad.dtype == mg.bfloat16 and apart(host(x.grad), host(tx.grad), "bfloat16") <= 1
    assert x.norm(p=3).dtype == mg.bfloat16 and apart(host(x.norm(p=3)), host(tx.norm(p=3)), "bfloat16") <= 1
    with mg.device("meta"):  # 'meta' predicts the dtype, so the bytes
        assert (mg.ones(3).to(mg.bfloat16) ** exponent).dtype == mg.bfloat16


@pytest.mark.parametrize("low", LOWS)
def test_a_2_byte_layer_norm_of_rows_far_from_zero_is_torchs(low):
    """Found by the programs above (3 / (x * x + 1), then layer_norm, under autocast): a row whose mean is far
    larger than its spread lost it all. The mean was rounded to the 2-byte dtype before x - mean, an error of up to
    half a unit of the mean's last place, which the row's spread then scales up (bfloat16, mean 3, spread 0.03: 32
    units of bfloat16's precision off PyTorch's, which computes in float32 and rounds once). Now in float32 inside,
    forward and backward, rounded once; the saved x-hat and 1/std stay in the input's dtype (the ledger's bytes)."""
    rng = np.random.default_rng(0)
    a = (3 + 0.03 * rng.standard_normal((6, 64))).astype(np.float32)
    w, b = (1 + rng.standard_normal(64)).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    g = rng.standard_normal((6, 64)).astype(np.float32)
    got, want, exact = [], [], []
    for lib, out in (("mg", got), ("torch", want), ("float64", exact)):
        M = mg if lib == "mg" else torch
        dt = getattr(M, low) if lib != "float64" else torch.float64
        x, wt, bt, gt = (M.tensor(v).to(dt) for v in (a, w, b, g))
        if lib != "float64":  # the same 2-byte values: the exact result of those
            x, wt, bt, gt = (v.to(M.float32).to(dt) for v in (x, wt, bt, gt))
        else:
            x, wt, bt, gt = (v.to(getattr(torch, low)).double() for v in (x, wt, bt, gt))
        for v in (x, wt, bt):
            v.requires_grad_(True)
        y = (F if lib == "mg" else TF).layer_norm(x, (64,), wt, bt)
        y.backward(gt)
        out += [host(y), host(x.grad), host(wt.grad), host(bt.grad)]
        if lib == "mg":
            assert y.dtype == x.grad.dtype == getattr(mg, low)
    for what, o, t, e in zip(("y", "x.grad", "w.grad", "b.grad"), got, want, exact):
        close(o, t, e, low, what, None, tol=4)


def test_on_cuda_the_float32_list_is_pytorchs_documented_one():
    """Found by the programs above on the stand-in (CUDA's lists: PyTorch's docs, "CUDA Ops that can autocast to
    float32", which torch here cannot run): var and std gave float32 (the sum inside them is in CUDA's float32
    list; PyTorch's var is in no list: float16), x ** y and 2 ** x gave float16 (pow's Tensor forms are in the
    list: float32), and norm was float32 but squared its input in float16 first (its value 201 float32 units off).
    Left as documented differences (NOTE [autocast's lists]: only apply asks the policy, test_structure): norm (and
    F.normalize) give float16 where PyTorch's give float32, now with float32's values inside; 2 / x float16 (PyTorch:
    x.reciprocal() * 2, float32)."""
    if DEVICE != "cuda":
        pytest.skip("CUDA's lists apply to 'cuda' tensors (MINIGRAD_DEVICE=cuda: the GPU or the CuPy stand-in)")
    rng = np.random.default_rng(0)
    a = (rng.random((4, 64)) + 0.5).astype(np.float32)
    x = mg.tensor(a, device="cuda").to(mg.float16)
    exact = torch.tensor(a).half().double()
    with mg.autocast("cuda"):
        assert x.var(-1).dtype == x.std(-1).dtype == x.var().dtype == mg.float16
        assert (x ** x).dtype == (2 ** x).dtype == mg.float32 and (x / 2).dtype == mg.float16
        n = x.norm(dim=-1)
        assert n.dtype == F.normalize(x).dtype == (2 / x).dtype == mg.float16  # PyTorch's: float32 (see above)
    assert apart(host(n), exact.norm(dim=-1).numpy(), "float16") <= 0.5  # rounded once from float32's


def test_a_reshape_that_copies_is_a_view_of_the_copy_on_meta_as_in_numpy():
    """Found by the ledger test above (program: h = x_low + x_low; h2 = h + x (a float32 leaf); attention on
    (h2, h, h) split into heads): NumPy's reshape of an array it cannot view (a transposed gradient) copies into a
    new C-ordered array of the old shape and returns a view of that copy (its .base); 'meta' returned the copy
    itself, base None. So a leaf handed such a gradient took it as its .grad on 'meta' and copied it on the CPU
    (a view may be someone else's memory: NOTE [who owns a gradient]), and the ledger's transient bytes differed
    by the gradient's size for an op (a float32 (4, 8): 128 bytes at the Cast's backward)."""
    a = np.zeros((2, 4, 4), np.float32).transpose(1, 0, 2)
    with mg.device("meta"):
        m = mg.zeros(2, 4, 4)._data.transpose(1, 0, 2)
    for x in (a, m):
        r = x.reshape(4, 8)
        assert r.base is not None and r.base.shape == (4, 2, 4) and r.base.base is None
        assert r.strides == (32, 4) and r.base.strides == (32, 16, 4)
    program = [("add", [0, 0, 0], "on"), ("add", [0, 68, 0], "on"), ("sdpa", [0, 1, 1], "on")]
    test_a_program_on_meta_gives_the_real_ledger_event_by_event.hypothesis.inner_test(LOWS[-1], program, 0)


@pytest.mark.parametrize("low", LOWS)
def test_a_0d_tensor_does_not_widen_a_tensor_with_dims(low):
    """Found by the programs above (a * s, s a float32 0-d weight such as CLIP's logit scale, a a 2-byte product):
    PyTorch's type promotion lets a tensor with dims decide the dtype over a 0-d one of the same kind (float), so
    the product stays 2-byte; minigrad's autocast promoted to float32, the whole output in 4 bytes. Only where
    every float input is 0-d do they decide (float32 then)."""
    rng = np.random.default_rng(0)
    a, s = rng.standard_normal((4, 8)).astype(np.float32), np.float32(1.7)
    x, xf = mg.tensor(a, device=DEVICE).to(low), mg.tensor(a, device=DEVICE)
    ts = mg.nn.Parameter(mg.tensor(s, device=DEVICE))
    tx, tts, txf = torch.tensor(a).to(getattr(torch, low)), torch.tensor(s).requires_grad_(True), torch.tensor(a)
    x.requires_grad_(True)
    tx.requires_grad_(True)
    with mg.autocast(DEVICE, dtype=getattr(mg, low)), torch.autocast("cpu", dtype=getattr(torch, low)):
        pairs = {"x * s": (x * ts, tx * tts), "s + x": (ts + x, tts + tx),
                 "x.sum() * s": (x.sum() * ts, tx.sum() * tts),
                 "where": (mg.where(x > 0, x, ts), torch.where(tx > 0, tx, tts)),
                 "xf * x.mean()": (xf * x.mean(), txf * tx.mean())}
        for what, (m, t) in pairs.items():
            assert tname(m) == tname(t), what
            close(host(m), host(t), host(t), low, what, None, tol=2)
        loss, tloss = (x * ts).float().sum(), (tx * tts).float().sum()
    loss.backward()
    tloss.backward()
    assert tname(ts.grad) == "float32" and tname(x.grad) == low
    close(host(ts.grad), host(tts.grad), host(tts.grad), low, "s.grad", None, tol=4)
    close(host(x.grad), host(tx.grad), host(tx.grad), low, "x.grad", None, tol=2)


@pytest.mark.parametrize("low", LOWS)
@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_a_2_byte_gelu_is_torchs_to_an_ulp(low, approximate):
    """Found by the programs above (x - 1.7, doubled, then GELU's tanh approximation): computed in the 2-byte dtype,
    1 + tanh(...) cancelled to 0 where tanh rounds to -1 (bfloat16 GELU(-3.36) was -0.0, PyTorch's -0.00105; float16
    a third off at -3.3) and float16's x^3 overflowed. The exact GELU's backward, Phi(x) + x phi(x), cancelled near
    x = -0.75 (bfloat16: 238 units of the gradient's last place off there). Now in float32, rounded once, as PyTorch:
    within an ulp of each value, forward and backward (beyond x = -5, where float32 itself cancels, within 2^-18)."""
    a = np.linspace(-12, 12, 4001).astype(np.float32)
    x, tx = mg.tensor(a, device=DEVICE).to(low).requires_grad_(True), torch.tensor(a).to(getattr(torch, low))
    tx.requires_grad_(True)
    y, ty = F.gelu(x, approximate=approximate), TF.gelu(tx, approximate=approximate)
    y.backward(mg.ones_like(y))
    ty.backward(torch.ones_like(ty))
    assert y.dtype == x.grad.dtype == getattr(mg, low)
    for ours, theirs in ((host(y), host(ty)), (host(x.grad), host(tx.grad))):
        ulp = EPS[low] * np.abs(theirs) + 2.0 ** -18  # the far tail: float32's own 1 + tanh, 1 - tanh^2 cancel
        assert np.all(np.abs(ours - theirs) <= ulp), np.max(np.abs(ours - theirs) / ulp)


def test_a_0d_weights_gradient_on_meta_is_the_real_ones_at_the_peak():
    """Found by the ledger test above (a * s, s a 0-d float32 weight): the sum of every element of a gradient was
    NumPy's scalar, whose reshape(()) is itself; on 'meta' a 0-d array, whose reshape(()) is a view, which the weight
    copied before taking it as its .grad: the same timeline, but the peak's make-up differed (4 bytes transient
    first). unbroadcast (ops/base.py) hands a 0-d sum back as it is now, on both."""
    def step(device):
        x = mg.tensor(np.ones((4, 8), np.float32), device=device).requires_grad_(True)
        s = mg.nn.Parameter(mg.tensor(np.float32(2), device=device))
        with mg.profile(x, s) as prof:
            y = x * s
            (y + y).sum().backward()
        return prof

    real, meta = step(DEVICE), step("meta")
    assert meta.timeline() == real.timeline() and meta.bytes_at_peak() == real.bytes_at_peak()


@pytest.mark.parametrize("low", LOWS)
def test_a_2_byte_sigmoid_is_rounded_once(low):
    """Found by the programs above (binary_cross_entropy_with_logits(h, h.sigmoid()), its loss 900 float32 units
    off PyTorch's in float16): sigmoid computed step by step in the 2-byte dtype was up to 1.6 (bfloat16) and 1.8
    (float16) units of its last place off the true value; PyTorch computes in float32 and rounds once (half a
    unit), as minigrad now does (NOTE [a 2-byte GELU], ops/pointwise.py); the gradient within a unit of PyTorch's."""
    a = np.linspace(-8, 8, 2001).astype(np.float32)
    x, tx = mg.tensor(a, device=DEVICE).to(low).requires_grad_(True), torch.tensor(a).to(getattr(torch, low))
    tx.requires_grad_(True)
    y, ty = x.sigmoid(), tx.sigmoid()
    y.backward(mg.ones_like(y))
    ty.backward(torch.ones_like(ty))
    exact = tx.detach().double().sigmoid().numpy()
    unit = EPS[low] * 2.0 ** np.floor(np.log2(exact))  # the spacing of the dtype's numbers at each value
    assert np.all(np.abs(host(y) - exact) <= 0.5001 * unit)
    assert np.all(np.abs(host(x.grad) - host(tx.grad)) <= EPS[low] * np.abs(host(tx.grad)))


@pytest.mark.parametrize("low", LOWS)
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_a_2_byte_softmax_is_rounded_once(low, fn):
    """Found by the programs above (nll_loss of a float16 log_softmax, 1378 float32 units off the exact loss where
    PyTorch's was 412): softmax computed in the 2-byte dtype rounded x - max before exp, up to 8 units of the last
    place off in its small probabilities (bfloat16; PyTorch: half a unit), and log_softmax up to 55 near 0. Now in
    float32, rounded once (NOTE [a 2-byte softmax], ops/nn.py): every value within half a unit of the exact one (for
    log_softmax nearer than PyTorch's, which rounds max + log sum first), the gradient within a unit of PyTorch's."""
    rng = np.random.default_rng(0)
    a, g = (rng.standard_normal((500, 8)) * 2).astype(np.float32), rng.standard_normal((500, 8)).astype(np.float32)
    x, tx = mg.tensor(a, device=DEVICE).to(low).requires_grad_(True), torch.tensor(a).to(getattr(torch, low))
    tx.requires_grad_(True)
    y, ty = getattr(F, fn)(x, -1), getattr(TF, fn)(tx, -1)
    y.backward(mg.tensor(g, device=DEVICE).to(low))
    ty.backward(torch.tensor(g).to(getattr(torch, low)))
    exact = getattr(TF, fn)(tx.detach().double(), -1).numpy()
    unit = EPS[low] * 2.0 ** np.floor(np.log2(np.maximum(np.abs(exact), 2.0 ** -14)))
    assert np.all(np.abs(host(y) - exact) <= 0.5001 * unit)
    assert apart(host(x.grad), host(tx.grad), low) <= 1


def test_2_byte_var_std_and_norm_do_not_overflow_nor_lose_the_spread():
    """Found by the programs above (a float16 product of magnitude 100, then x / (x.norm(dim=-1) + 1)): squared and
    summed in float16, a norm of eight 100s was inf (the sum of squares, 80,000, past float16's 65,504) and x / inf
    was 0, where PyTorch's norm is 282.8; a var of spread 40 likewise; a bfloat16 var of rows of mean 3 and spread
    0.01 was far off (the mean rounded to bfloat16 first). Now in float32, rounded once (NOTE [float16's squares],
    tensor/methods.py)."""
    rng = np.random.default_rng(0)
    a = np.concatenate([(rng.standard_normal((3, 8)) * 40), np.full((1, 8), 100.0)]).astype(np.float32)
    x, tx = mg.tensor(a, device=DEVICE).half().requires_grad_(True), torch.tensor(a).half().requires_grad_(True)
    _var_std_norm_are_torchs(x, tx, "float16")
    if DEVICE == "cpu":  # a bfloat16 var of a row far from zero: its mean was rounded before x - mean
        b = (3 + 0.01 * rng.standard_normal((4, 64))).astype(np.float32)
        x, tx = mg.tensor(b).bfloat16().requires_grad_(True), torch.tensor(b).bfloat16().requires_grad_(True)
        _var_std_norm_are_torchs(x, tx, "bfloat16")


def _var_std_norm_are_torchs(x, tx, low):
    for f in (lambda x: x.var(-1), lambda x: x.std(0), lambda x: x.norm(dim=-1), lambda x: x.norm(p=3),
              lambda x: x.var()):
        y, ty = f(x), f(tx)
        x64 = tx.detach().double().requires_grad_(True)  # the exact results of the same 2-byte values
        y64 = f(x64)
        y64.sum().backward()
        assert y.dtype == x.dtype and np.isfinite(host(y)).all()
        close(host(y), host(ty), host(y64), low, "value", None, tol=1)
        y.sum().backward()
        ty.sum().backward()
        assert x.grad.dtype == x.dtype
        close(host(x.grad), host(tx.grad), host(x64.grad), low, "grad", None, tol=2)
        x.grad = tx.grad = None
