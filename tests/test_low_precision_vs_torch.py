"""float16 and bfloat16 against PyTorch (CPU), the ops that add many numbers up: sums, means, cumsums, the norms
and variances built on them, softmax, log_softmax, layer_norm, cross_entropy, and the sums that backward takes
(a bias's gradient, a broadcast's). PyTorch adds 2-byte floats up in float32 and rounds once; minigrad does too
(NOTE [2-byte sums], minigrad/backend/rows.py). Both libraries start from the same 2-byte inputs and cotangent;
their results must agree to a few units of the 2-byte dtype's precision (relative to the result's largest value:
rounding inside a fused op may differ by an ulp), or minigrad's must be nearer the float64 result of the same
inputs than PyTorch's is (logsumexp's gradient: PyTorch's is exp(x - out) of its output rounded to the 2-byte
dtype, 4.3 ulps from the float64 gradient here; minigrad's, from the float32 sums, 0.5).

Found by this test's first draft (each silently wrong, and now fixed): in bfloat16, 1,000 copies of 0.1 summed
to 32 (PyTorch: 100), the mean of 100,000 ones was 0.0026, softmax rows summed to 2.4, layer_norm and
cross_entropy were off by 30% and 10%; in float16, the mean of 100,000 elements was nan (the count, 100,000, is
inf in float16) and its gradient 0, and a cumsum of 4,096 elements was 9% off.
"""
import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F

from on_device import to_host

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

# CuPy has no bfloat16 (README: half the bytes), so on 'cuda' only float16 runs
DTYPES = ["float16"] + (["bfloat16"] if mg.default_device() == "cpu" else [])
EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}  # the spacing of the dtype's numbers at 1
TOL = 4  # in units of EPS, relative to the largest value of a result

# name -> (f(x, t, lib), shape): x is the 2-byte input (requires grad), t an int64 target of x.shape[0] classes
CASES = {
    "sum":           (lambda x, t, L: x.sum(), (1000,)),
    "sum_dim":       (lambda x, t, L: x.sum(1), (3, 4096)),
    "sum_dim0":      (lambda x, t, L: x.sum(0), (4096, 3)),
    "mean":          (lambda x, t, L: x.mean(), (100_000,)),
    "mean_dim":      (lambda x, t, L: x.mean(-1, keepdim=True), (2, 70_000)),
    "cumsum":        (lambda x, t, L: x.cumsum(-1), (2, 4096)),
    "var":           (lambda x, t, L: x.var(-1), (3, 4096)),
    "std":           (lambda x, t, L: x.std(0), (4096, 2)),
    "norm":          (lambda x, t, L: x.norm(), (20_000,)),
    "logsumexp":     (lambda x, t, L: x.logsumexp(-1), (3, 4096)),
    "softmax":       (lambda x, t, L: x.softmax(-1), (3, 4096)),
    "log_softmax":   (lambda x, t, L: x.log_softmax(-1), (3, 4096)),
    "layer_norm":    (lambda x, t, L: L.layer_norm(x, (4096,)), (3, 4096)),
    "cross_entropy": (lambda x, t, L: L.cross_entropy(x, t), (8, 2048)),
    "broadcast_add": (lambda x, t, L: x[:1] + x, (2048, 16)),  # x[:1]'s gradient sums 2,048 rows
    "linear":        (lambda x, t, L: L.linear(x[:, :8], x[:4, :8], x[0, 8:12]), (2048, 16)),  # the bias's: too
}


def run(name, dtype, seed, lib):
    f, shape = CASES[name]
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) + 0.5).astype(np.float32)  # an offset: sums grow, as a loss's terms do
    target = rng.integers(0, shape[-1], shape[0])
    if lib in ("torch", "float64"):  # float64: PyTorch in float64 from the same 2-byte input and cotangent
        tdt = getattr(torch, dtype)
        xt = torch.tensor(x).to(tdt)
        xt = (xt.double() if lib == "float64" else xt).requires_grad_(True)
        out = f(xt, torch.tensor(target), torch.nn.functional)
        cot = torch.tensor(rng.standard_normal(out.shape).astype(np.float32)).to(tdt).to(out.dtype)
        out.backward(cot)
        return out.detach().double().numpy(), xt.grad.double().numpy()
    xm = mg.tensor(x).to(dtype).requires_grad_(True)
    out = f(xm, mg.tensor(target), F)
    cot = mg.tensor(rng.standard_normal(out.shape).astype(np.float32)).to(dtype)
    out.backward(cot)
    return to_host(out.detach().float()).astype(np.float64), to_host(xm.grad.float()).astype(np.float64)


def ulps(a, b, dtype):
    """The largest difference of a and b in units of the dtype's spacing at b's largest value."""
    assert a.shape == b.shape
    scale = max(float(np.abs(b).max()), 2.0 ** -14) if b.size else 1.0
    return float(np.abs(a - b).max() / (EPS[dtype] * scale)) if b.size else 0.0


def close(ours, theirs, exact, dtype, what):
    apart, ours_off, theirs_off = ulps(ours, theirs, dtype), ulps(ours, exact, dtype), ulps(theirs, exact, dtype)
    assert apart <= TOL or ours_off <= theirs_off, (f"{what}: {apart:.1f} ulps of the largest value from PyTorch's "
                                                    f"(at most {TOL}), {ours_off:.1f} from float64's (PyTorch's "
                                                    f"{theirs_off:.1f})")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CASES))
def test_2_byte_floats_add_up_as_pytorchs_do(name, dtype):
    for seed in (0, 1):
        (out, grad), (tout, tgrad), (xout, xgrad) = (run(name, dtype, seed, lib) for lib in ("minigrad", "torch",
                                                                                                "float64"))
        close(out, tout, xout, dtype, f"{name} {dtype}: the result")
        close(grad, tgrad, xgrad, dtype, f"{name} {dtype}: the gradient")


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_2_byte_sum_is_the_float32_sum_rounded_once(dtype):
    """The rule itself, bit for bit: 0.1 added 1,000 times (bfloat16's own loop stopped at 32), and a mean whose
    count float16 cannot hold (100,000: inf)."""
    x = mg.full((1000,), 0.1, dtype=dtype)
    exact = np.float32(to_host(x.float())[0]) * np.float32(1000)
    assert to_host(x.sum().float()) == to_host(mg.tensor(exact).to(dtype).float())
    y = mg.ones(100_000, dtype=dtype, requires_grad=True)
    m = y.mean()
    m.backward()
    assert to_host(m.float()) == 1.0
    assert to_host(y.grad.float())[0] == to_host(mg.tensor(np.float32(1e-5)).to(dtype).float())


def test_meta_reduces_2_byte_floats_into_the_same_ledger():
    """The float32 sums are inside the ops: 'meta' and a real run record the same outputs, in the 2-byte dtype."""
    def step(device):
        with mg.device(device):
            x = mg.ones(64, 300, dtype=DTYPES[-1], requires_grad=True)
        with mg.profile() as prof:
            y = x.mean(-1).sum() + x.cumsum(0).mean() + x.softmax(-1).sum()
            y.backward()
        return prof, y
    (real, y), (meta, ym) = step(mg.default_device()), step("meta")
    assert meta.timeline() == real.timeline() and y.dtype == ym.dtype == np.dtype(mg.__dict__[DTYPES[-1]])


# ----------------------------------------------------------------------------- a number beside 2-byte floats

NUMBERS = [100_000, 65536.0, 1 / 3, 0.1, 3, 1e-8, -2.5e4, 7e4, 1.001]
WRITES = {  # name -> f(x, number): each as a PyTorch user writes it, with PyTorch's rounding of the number
    "x * n": lambda x, n: x * n, "n * x": lambda x, n: n * x, "x / n": lambda x, n: x / n,
    "x + n": lambda x, n: x + n, "x - n": lambda x, n: x - n, "n - x": lambda x, n: n - x,
    "(x * 1).mul_(n)": lambda x, n: (x * 1).mul_(n), "(x * 1).div_(n)": lambda x, n: (x * 1).div_(n),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("write", list(WRITES))
def test_a_number_beside_2_byte_floats_is_pytorchs_bit_for_bit(write, dtype):
    """NOTE [a number beside 2-byte floats] (minigrad/ops/pointwise.py): PyTorch multiplies and divides by the number
    as written, in float32, and rounds once; it adds and subtracts the number rounded to the tensor's dtype. Found:
    x * 65536 (a GradScaler's scale) was inf in float16 for x = 0.5 (PyTorch: 32768), x / 100000 was 0."""
    values = np.array([1e-4, -0.3, 0.5, 2.0, -7.0, 0.0], np.float32)
    f = WRITES[write]
    for n in NUMBERS:
        x, tx = mg.tensor(values).to(dtype).requires_grad_(True), torch.tensor(values).to(getattr(torch, dtype))
        tx.requires_grad_(True)
        g = np.linspace(-3, 3, values.size).astype(np.float32)
        out, tout = f(x, n), f(tx, n)
        out.backward(mg.tensor(g).to(dtype))
        tout.backward(torch.tensor(g).to(tx.dtype))
        for ours, theirs, what in ((out.detach(), tout.detach(), "value"), (x.grad, tx.grad, "gradient")):
            np.testing.assert_array_equal(to_host(ours.float()), theirs.float().numpy(), err_msg=f"{write}, n={n}: {what}")
        with mg.no_grad(), torch.no_grad():  # the write that grad mode does not record
            y, ty = mg.tensor(values).to(dtype), torch.tensor(values).to(tx.dtype)
            if "_(" in write:
                getattr(y, write[8:12])(n), getattr(ty, write[8:12])(n)
                np.testing.assert_array_equal(to_host(y.float()), ty.float().numpy(), err_msg=f"{write}, n={n}")
