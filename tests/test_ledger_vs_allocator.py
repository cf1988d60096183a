"""The ledger's peak against the allocator's, op by op: every fused op (and the composed ones of the same family) in
float64, float32, float16 and bfloat16, on a few shapes, forward and backward. tests/test_profiler.py holds whole steps
to tracemalloc within 15%, where one op's missing temporaries hide among the rest; here each op stands alone, held to
the tolerance of the optimizers' steps there: 3% of the input's bytes and 128 KiB (NumPy's reduction buffers, the
tape's Python objects). A float32 copy of a 2-byte input that the ledger missed is 200% of it.

What each check found when it was written (NOTE [every array an op makes], backend/pool.py): the 2-byte softmax,
log_softmax, layer_norm, sigmoid, GELU and cumsum computed in float32 temporaries the ledger never saw (a float16
softmax peaked at 5x its input, the ledger said 1x); in every dtype, sigmoid's forward held 4 arrays beside its
output, log_softmax's its exp, GELU's backward Phi(x), layer_norm's backward three; and the tape counted an op's
input gradients only after it had freed the arrays they were made from (var's backward, NOTE in profiler/ledger.py's
on_backward), and never counted two gradients summed into one (a tensor used twice). The 2-byte softmax,
log_softmax, sigmoid, GELU and cumsum now also compute a block of rows at a time (NOTE [2-byte rows],
backend/rows.py): their float32 copies are a block's, not the whole input's.

And 'meta' (backend/meta.py) gives each program the same ledger as the host: events, peak, each buffer born and freed.
"""
import gc
import itertools
import tracemalloc

import pytest

import minigrad as mg
import minigrad.functional as F

from on_device import to_host  # noqa: F401 (the suite's convention; these checks read the ledger, not arrays)

ON_CPU = mg.default_device() == "cpu"
cpu_only = pytest.mark.skipif(not ON_CPU, reason="tracemalloc sees NumPy's buffers only: a cpu check (on cuda, "
                                                 "tests/test_profiler.py's test_cupy_pool_peak_matches_ledger)")

OPS = {  # name -> f(x, weight, bias): one op, or one composed method, on x
    "softmax": lambda x, w, b: x.softmax(-1),
    "log_softmax": lambda x, w, b: x.log_softmax(-1),
    "layer_norm": lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b),
    "sigmoid": lambda x, w, b: x.sigmoid(),
    "gelu": lambda x, w, b: F.gelu(x),
    "gelu_tanh": lambda x, w, b: F.gelu(x, approximate="tanh"),
    "gelu_tanh_huge": lambda x, w, b: F.gelu(x * 1e30, approximate="tanh"),  # x^3 overflows: NOTE [GELU at large x]
    "softplus": lambda x, w, b: F.softplus(x, beta=2.0),
    "silu": lambda x, w, b: F.silu(x),
    "bce_logits": lambda x, w, b: F.binary_cross_entropy_with_logits(x, x.detach().sigmoid(), w, reduction="none",
                                                                      pos_weight=b),
    "var": lambda x, w, b: x.var(-1),
    "std": lambda x, w, b: x.std(-1),
    "norm": lambda x, w, b: x.norm(dim=-1),
    "cumsum": lambda x, w, b: x.cumsum(-1),
    "mean": lambda x, w, b: x.mean(-1),
    "used_twice": lambda x, w, b: (lambda y: y * 2 + y * 3)(x.tanh()),  # y's two gradients, summed in the tape
    "exp_tanh": lambda x, w, b: x.exp().tanh(),  # exp's gradient (NumPy's own array) is made before exp's output dies
    # backwards that hand the leaf a view of an array the host pool lent (NOTE [a lent array owns its views],
    # backend/pool.py): of tanh's gradient, or of a product's made inside the backward, which dies as it returns
    "flip": lambda x, w, b: x.flip(-1).tanh(),
    "transpose": lambda x, w, b: x.transpose(-1, -2).tanh(),
    "unsqueeze": lambda x, w, b: x.unsqueeze(0).tanh(),
    "matvec": lambda x, w, b: x @ w,  # (g[:, None] @ w[None]).reshape(x's shape)
    "linear": lambda x, w, b: F.linear(x, w.unsqueeze(0).expand(64, -1)),  # 3-d x: (g @ W).reshape(x's shape)
    "cumsum_0": lambda x, w, b: x.cumsum(0),
    # pointwise ops whose backward made masks and sign arrays unseen (each made through backend.made now)
    "relu": lambda x, w, b: x.relu(),
    "abs": lambda x, w, b: x.abs(),
    "sin": lambda x, w, b: x.sin(),
    "cos": lambda x, w, b: x.cos(),
    "div": lambda x, w, b: x / w,
    "mul_w": lambda x, w, b: x * w,
    "where": lambda x, w, b: mg.where(x > 0, x, w),
    "masked_fill": lambda x, w, b: x.masked_fill(x > 1, 0.0),
    "maximum": lambda x, w, b: x.maximum(w),
    "clamp": lambda x, w, b: x.clamp(-1, 1),
    "pow": lambda x, w, b: x ** 3,
    "sqrt": lambda x, w, b: (x * x).sqrt(),
    "log": lambda x, w, b: (x * x).log(),
    "pow_tensor": lambda x, w, b: (x * x) ** w,
    "clamp_tensor": lambda x, w, b: x.clamp(w, b),
    "cross_entropy": lambda x, w, b: (lambda r: F.cross_entropy(r, (r[:, 0] > 0).long(), reduction="none"))(
        x.reshape(-1, x.shape[-1])),
    "gather_rows": lambda x, w, b: x[mg.arange(0, x.shape[0], 2, device=x.device)],
    "cat": lambda x, w, b: mg.cat([x, x], -1),
    "dropout": lambda x, w, b: F.dropout(x, 0.5),  # its mask was drawn from float64s of the input's shape (2x float32)
}
# What NumPy makes inside one call, on the host only, that no op can name (not fixed yet; the ledger, and 'meta',
# follow what CUDA would make): ml_dtypes' bfloat16 @ computes on float32 copies of both operands (2-2.8x the
# input), its bfloat16 clip (clamp's forward, 2x) and power (1x) too; float16 summed in float32 down a long axis
# (x / w's gradient for w) takes a casting buffer of 139 KB, above the 128 KiB allowed for NumPy's buffers.
NUMPY_INSIDE = {("matvec", "bfloat16"), ("linear", "bfloat16"), ("clamp", "bfloat16"), ("pow", "bfloat16"),
                ("div", "float16")}
# Not counted yet: an integer-array index's backward on the host (_add_rows' sorted copy, reduceat's sums, the += of
# a fancy index: 1.5x the gradient), which CUDA's add.at and 'meta' do not make, so 'meta' cannot predict it.
NOT_YET = {"gather_rows"}
# where the host takes another way by the values (NOTE [GELU at large x]): its arrays differ, its peak may not
BY_VALUES = {"gelu_tanh_huge"}
DTYPES = ["float64", "float32", "float16", "bfloat16"]
SHAPES = [(256, 512), (64, 4096), (4, 32, 1024)]  # rows through the BLAS, long rows through NumPy, three dims


def program(name, shape, dtype, device):
    """The op's input, weight and bias (made before the block) and the gradient to send back."""
    mg.manual_seed(0)
    with mg.device(device):
        x = mg.randn(*shape).to(dtype).requires_grad_()
        w, b = (mg.nn.Parameter(mg.randn(shape[-1]).to(dtype)) for _ in range(2))
    return x, w, b


def live_after(lifetimes):
    """Bytes alive after each birth and death of prof.buffer_lifetimes(), in order."""
    live, now, after = {}, 0, []
    for key, nbytes in lifetimes:
        now += -live.pop(key) if nbytes is None else nbytes
        if nbytes is not None:
            live[key] = nbytes
        after.append(now)
    return after


def run(name, shape, dtype, device, trace=False):
    """The op's forward, then its backward, under mg.profile (and tracemalloc with trace): each phase's peak above
    what was alive as it began, by the ledger and by tracemalloc (None without trace), and the profile."""
    x, w, b = program(name, shape, dtype, device)
    gc.collect()
    if trace:
        tracemalloc.start()
    try:
        with mg.profile(x, w, b) as prof:
            base = [tracemalloc.get_traced_memory()[0]] if trace else None
            y = OPS[name](x, w, b)
            forward = tracemalloc.get_traced_memory()[1] - base[0] if trace else None
            made = len(prof.buffer_lifetimes())
            g = mg.ones(*y.shape, dtype=y.dtype, device=device)
            born = len(prof.buffer_lifetimes())
            if trace:
                tracemalloc.reset_peak()
                base.append(tracemalloc.get_traced_memory()[0])
            y.backward(g)
            backward = tracemalloc.get_traced_memory()[1] - base[1] if trace else None
            del y, g
    finally:
        if trace:
            tracemalloc.stop()
    after = live_after(prof.buffer_lifetimes())  # x, w, b first: the profile counts them from its start
    start = prof.timeline()[0]["total"]
    ledger = (max(after[:made]) - start, max(after[born:], default=after[born - 1]) - after[born - 1])
    return ledger, (forward, backward), prof, x.data.nbytes


# The one thing the ledger leaves out on purpose (backend/special.py): exact GELU's normal CDF on the host computes
# 65,536 numbers at a time in two float32 blocks and a mask of its own, whatever the size, where CuPy's kernel makes
# none; 'meta' predicts both, so it makes neither, and neither does the ledger.
HOST_BLOCKS = 2 * 4 * 2 ** 16 + 2 ** 16


@cpu_only
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(OPS))
def test_an_ops_peak_is_the_allocators(name, dtype):
    if (name, dtype) in NUMPY_INSIDE or name in NOT_YET:
        pytest.xfail("arrays NumPy makes inside one call, on the host only (NUMPY_INSIDE), or not counted yet")
    blocks = HOST_BLOCKS if name == "gelu" and dtype != "float64" else 0  # float64: SciPy's ndtr, no blocks
    for shape in SHAPES:
        ledger, traced, _, largest = run(name, shape, dtype, "cpu", trace=True)
        for phase, mine, real in zip(("forward", "backward"), ledger, traced):
            assert -blocks <= mine - real + 0.03 * largest + 2 ** 17 and mine - real <= 0.03 * largest + 2 ** 17, (
                f"{name} {shape} {dtype} {phase}: the ledger's peak is {mine / largest:.2f}, tracemalloc's "
                f"{real / largest:.2f} times the input's {largest} bytes")


def _renumbered(lifetimes):
    """buffer_lifetimes() with each key replaced by the order its buffer was born in: ids differ between runs."""
    names, out, born = {}, [], itertools.count()
    for key, nbytes in lifetimes:
        if nbytes is not None:
            names[key] = next(born)
        out.append((names[key], nbytes))
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(OPS))
def test_meta_gives_the_hosts_ledger(name, dtype):
    """'meta' makes and counts the arrays the host makes (backend.made), so its prediction is the host's ledger, to
    the byte: events, the peak and what it is made of, and every buffer's birth and death in order."""
    for shape in SHAPES[:1] + SHAPES[2:]:
        real, meta = run(name, shape, dtype, "cpu"), run(name, shape, dtype, "meta")
        assert meta[0] == real[0], f"{name} {shape} {dtype}: peaks (forward, backward) {meta[0]} on meta, {real[0]}"
        if name in BY_VALUES:  # the host's way depends on the values, which 'meta' has not: the same peak, no more
            continue
        for i, (r, m) in enumerate(itertools.zip_longest(real[2].timeline(), meta[2].timeline())):
            assert r == m, f"{name} {shape} {dtype}: event {i} is {m} on meta, {r} on the host"
        assert meta[2].bytes_at_peak() == real[2].bytes_at_peak()
        assert _renumbered(meta[2].buffer_lifetimes()) == _renumbered(real[2].buffer_lifetimes())
