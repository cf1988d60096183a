"""Each op in float16 and bfloat16, forward and gradient, element by element against PyTorch's result and the float64
truth of the same 2-byte inputs and cotangent ([trust3]; the harness is tests/ulp.py). PyTorch's kernels compute a
2-byte result in float32 and round it once (STYLE.md, habit 22); a result rounded twice (a product rounded, then
its sum with a bias rounded again; a variance rounded, then its square root) shows as a smaller correctly rounded
share and often a bias in ulps, over many values, where one value looks fine.

For each op, each result (the output, each input's gradient) must have no element judged wrong, a correctly rounded
share no more than SHARE_SLACK below PyTorch's, and a bias no farther from zero than PyTorch's plus BIAS_SLACK.
Both slacks were set from measurement (run this file as a script to print the table, with more seeds).

Found by this sweep's first run (each fixed, each failing here without its fix): Linear with a bias rounded x @ W^T,
then the sum with the bias (bfloat16: 71% correctly rounded, PyTorch 100%, 1.1% judged wrong); std took the square
root of a rounded variance, bfloat16's norm rounded x * x (86% correctly rounded, PyTorch 100%); tanh's gradient
rounded three times (3% wrong); float16's x ** 3, x ** -2, x ** -0.5 rounded twice (74-77%); attention's backward
took D = rowsum(g * out) from the rounded output (3% of dq wrong). What it still finds is in XFAIL, with why.
"""
import sys

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F

from on_device import to_host
from ulp import DTYPES as NP_DTYPES, judge

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

# CuPy has no bfloat16 (README: half the bytes), so on 'cuda' only float16 runs
DTYPES = ["float16"] + (["bfloat16"] if mg.default_device() == "cpu" else [])
SHARE_SLACK = 0.02  # correctly rounded share below PyTorch's (rounded once, inside an op, differently: 1-1.5%)
BIAS_SLACK = 0.03   # ulps beyond PyTorch's bias, away from zero


def normal(shape):
    return lambda rng: rng.standard_normal(shape)


def uniform(shape, bound=0.18):  # nn.Linear(32, ...)'s weights and bias: U(-1/sqrt(32), 1/sqrt(32))
    return lambda rng: rng.uniform(-bound, bound, shape)


def positive(shape, lo=0.1, hi=4.0):
    return lambda rng: rng.uniform(lo, hi, shape)


N = (64, 64)  # a pointwise op's values: 4,096 of them
# name -> (f(*inputs, lib, F-or-torch.nn.functional), input makers (each rng -> float64 values))
CASES = {
    "add":         (lambda a, b, L: a + b, [normal(N), normal(N)]),
    "sub":         (lambda a, b, L: a - b, [normal(N), normal(N)]),
    "mul":         (lambda a, b, L: a * b, [normal(N), normal(N)]),
    "div":         (lambda a, b, L: a / b, [normal(N), positive(N)]),
    "mul_number":  (lambda a, L: a * 0.1, [normal(N)]),
    "div_number":  (lambda a, L: a / 3.0, [normal(N)]),
    "pow_2":       (lambda a, L: a ** 2, [normal(N)]),
    "pow_3":       (lambda a, L: a ** 3, [normal(N)]),
    "pow_-2":      (lambda a, L: a ** -2, [positive(N)]),
    "pow_-0.5":    (lambda a, L: a ** -0.5, [positive(N)]),
    "pow_4":       (lambda a, L: a ** 4, [normal(N)]),
    "pow_1.5":     (lambda a, L: a ** 1.5, [positive(N)]),
    "pow_tensor":  (lambda a, b, L: a ** b, [positive(N), normal(N)]),
    "maximum":     (lambda a, b, L: a.maximum(b), [normal(N), normal(N)]),
    "clamp":       (lambda a, L: a.clamp(-0.5, 0.5), [normal(N)]),
    "neg":         (lambda a, L: -a, [normal(N)]),
    "abs":         (lambda a, L: a.abs(), [normal(N)]),
    "exp":         (lambda a, L: a.exp(), [normal(N)]),
    "log":         (lambda a, L: a.log(), [positive(N)]),
    "sqrt":        (lambda a, L: a.sqrt(), [positive(N)]),
    "sin":         (lambda a, L: a.sin(), [normal(N)]),
    "cos":         (lambda a, L: a.cos(), [normal(N)]),
    "tanh":        (lambda a, L: a.tanh(), [normal(N)]),
    "sigmoid":     (lambda a, L: a.sigmoid(), [normal(N)]),
    "relu":        (lambda a, L: a.relu(), [normal(N)]),
    "gelu":        (lambda a, L: L.gelu(a), [normal(N)]),
    "gelu_tanh":   (lambda a, L: L.gelu(a, approximate="tanh"), [normal(N)]),
    "where":       (lambda a, b, L: a.where(a > 0, b), [normal(N), normal(N)]),
    "sum":         (lambda a, L: a.sum(-1), [normal((64, 256))]),
    "mean":        (lambda a, L: a.mean(0), [normal((256, 64))]),
    "prod":        (lambda a, L: a.prod(-1), [positive((1024, 4), 0.5, 2.0)]),
    "cumsum":      (lambda a, L: a.cumsum(-1), [normal((32, 128))]),
    "amax":        (lambda a, L: a.amax(-1), [normal((256, 16))]),
    "var":         (lambda a, L: a.var(-1), [normal((2048, 16))]),
    "std":         (lambda a, L: a.std(-1), [normal((2048, 16))]),
    "norm":        (lambda a, L: a.norm(dim=-1), [normal((2048, 16))]),
    "logsumexp":   (lambda a, L: a.logsumexp(-1), [normal((2048, 16))]),
    "matmul":      (lambda a, b, L: a @ b, [normal((64, 32)), normal((32, 48))]),
    "linear":      (lambda x, w, L: L.linear(x, w), [normal((64, 32)), uniform((48, 32))]),
    "linear_bias": (lambda x, w, b, L: L.linear(x, w, b), [normal((64, 32)), uniform((48, 32)), uniform((48,))]),
    "softmax":     (lambda a, L: L.softmax(a, -1), [normal((256, 16))]),
    "log_softmax": (lambda a, L: L.log_softmax(a, -1), [normal((256, 16))]),
    "layer_norm":  (lambda a, w, b, L: L.layer_norm(a, (16,), w, b), [normal((256, 16)), positive((16,), .5, 1.5),
                                                                       normal((16,))]),
    "sdpa":        (lambda q, k, v, L: L.scaled_dot_product_attention(q, k, v), [normal((4, 16, 8))] * 3),
}


# What the sweep still finds, not fixed yet (strict: a fix that makes one pass removes it here).
_LSE = ("its gradient goes through exp, sum, log and + max, each rounded; the fix, computing it in float32 as var "
        "does, waits for tensor/methods.py, at its 700-line budget, to be split")
_LOG_SOFTMAX = ("both libraries compute the gradient in float32 from the saved output rounded to 2 bytes; minigrad's "
                "forward is the more accurate (100% correctly rounded, PyTorch 84%), so it saves another y, and "
                "0.2-0.3% of gradients land 1.5-2.4 ulps off where PyTorch's are 1.3-1.6: no rounding in between")
_LAYER_NORM = ("backward reads x-hat and 1/std saved rounded to 2 bytes (PyTorch saves x and a float32 mean and "
               "1/std): 1.7-1.8% of the input's gradient wrong; saving what PyTorch saves changes the ledger's bytes")
XFAIL = {("logsumexp", "float16"): _LSE, ("logsumexp", "bfloat16"): _LSE,
         ("log_softmax", "float16"): _LOG_SOFTMAX, ("log_softmax", "bfloat16"): _LOG_SOFTMAX,
         ("layer_norm", "float16"): _LAYER_NORM, ("layer_norm", "bfloat16"): _LAYER_NORM}


def run(name, dtype, seed, lib):
    """(output, *gradients of each input) of CASES[name] in `lib`: 'minigrad', 'torch' (in `dtype`) or 'float64'
    (PyTorch in float64 from the same 2-byte inputs and cotangent), each as float64 NumPy."""
    f, makers = CASES[name]
    rng = np.random.default_rng(seed)
    inputs = [np.asarray(make(rng), np.float32).astype(NP_DTYPES[dtype]).astype(np.float32) for make in makers]
    if lib == "minigrad":
        xs = [mg.tensor(x).to(dtype).requires_grad_(True) for x in inputs]
        out = f(*xs, F)
        cot = mg.tensor(rng.standard_normal(out.shape).astype(np.float32)).to(dtype)
        out.backward(cot)
        return [to_host(t.detach().float()).astype(np.float64) for t in [out] + [x.grad for x in xs]]
    tdt = torch.float64 if lib == "float64" else getattr(torch, dtype)
    xs = [torch.tensor(x).to(tdt).requires_grad_(True) for x in inputs]
    out = f(*xs, torch.nn.functional)
    cot = torch.tensor(rng.standard_normal(out.shape).astype(np.float32)).to(getattr(torch, dtype)).to(tdt)
    out.backward(cot)
    return [t.detach().double().numpy() for t in [out] + [x.grad for x in xs]]


def measure(name, dtype, seeds=(0,)):
    """[(what, ours, theirs)] with ours and theirs judge()'s (wrong share, correctly rounded share, bias) over the
    seeds' values, for the output and each input's gradient."""
    runs = [[run(name, dtype, s, lib) for lib in ("minigrad", "torch", "float64")] for s in seeds]
    rows = []
    for i in range(len(runs[0][0])):
        got, theirs, truth = (np.concatenate([r[k][i].ravel() for r in runs]) for k in range(3))
        rows.append(("output" if i == 0 else f"grad {i - 1}", judge(got, theirs, truth, dtype),
                     judge(theirs, theirs, truth, dtype)))
    return rows


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CASES))
def test_each_op_rounds_once_as_pytorchs(name, dtype, request):
    if (name, dtype) in XFAIL:
        request.applymarker(pytest.mark.xfail(reason=XFAIL[name, dtype], strict=True))
    for what, (wrong, share, bias), (_, their_share, their_bias) in measure(name, dtype):
        where = f"{name} {dtype}, {what}"
        assert wrong == 0, f"{where}: {wrong:.2%} of the elements are wrong (more than 2 ulps from PyTorch's, " \
                           f"more than 1 from the float64 truth, and farther from it than PyTorch's)"
        assert share >= their_share - SHARE_SLACK, (f"{where}: {share:.1%} correctly rounded, PyTorch {their_share:.1%}"
                                                    f": a rounding in between? (compute in float32, round once)")
        assert abs(bias) <= abs(their_bias) + BIAS_SLACK, (f"{where}: biased by {bias:+.3f} ulp, PyTorch by "
                                                           f"{their_bias:+.3f}: a rounding in between?")


@pytest.mark.skipif(mg.default_device() != "cpu", reason="bfloat16 is the CPU's autocast dtype; CuPy has none")
@pytest.mark.parametrize("how", ["autocast", "bfloat16()"])
def test_a_linear_layer_in_bfloat16_rounds_once(how):
    """[trust3]'s case: Linear(32, 48) on a (64, 32) input, under autocast('cpu') and after .bfloat16(): 71% of
    the outputs were correctly rounded (PyTorch 100%), and where the bias cancelled the product one was 124 ulps off
    (-0.0078125, PyTorch -0.0040283, exact -0.0040336)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    layer = mg.nn.Linear(32, 48)
    w, b = (to_host(p.detach()) for p in (layer.weight, layer.bias))
    if how == "autocast":
        with mg.autocast("cpu"):
            got = layer(mg.tensor(x))
    else:
        got = layer.bfloat16()(mg.tensor(x).bfloat16())
    xt, wt, bt = (torch.tensor(a).bfloat16() for a in (x, w, b))
    theirs = torch.nn.functional.linear(xt, wt, bt)
    truth = xt.double() @ wt.double().T + bt.double()
    assert got.dtype == mg.bfloat16
    wrong, share, bias = judge(to_host(got.float()), theirs.float().numpy(), truth.numpy(), "bfloat16")
    assert (wrong, share) == (0, 1), f"{wrong:.1%} wrong, {share:.1%} correctly rounded (PyTorch: 100%)"


if __name__ == "__main__":  # the table, over more values: python tests/test_ops_ulp_vs_torch.py [seeds] [names...]
    seeds = tuple(range(int(sys.argv[1]) if len(sys.argv) > 1 else 4))
    for dtype in DTYPES:
        for name in sys.argv[2:] or CASES:
            for what, ours, theirs in measure(name, dtype, seeds):
                flag = "" if (ours[0] == 0 and ours[1] >= theirs[1] - SHARE_SLACK
                              and abs(ours[2]) <= abs(theirs[2]) + BIAS_SLACK) else "  <-- FAILS"
                print(f"{dtype:9} {name:12} {what:7} wrong {ours[0]:.4f}  share {ours[1]:.4f} (torch {theirs[1]:.4f})"
                      f"  bias {ours[2]:+.4f} (torch {theirs[2]:+.4f}){flag}")
