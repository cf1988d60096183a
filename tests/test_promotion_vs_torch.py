"""Type promotion against PyTorch's, every pair (issue #39 [trust3]): for each two of minigrad's dtypes and each
standing of the two operands (a tensor with dims, a 0-d tensor, a Python bool, int or float on either side), each
op's result dtype and values are torch's (torch 2.13, CPU), but for the one refusal the README states (NOTE [type
promotion], minigrad/tensor/promotion.py): a float16, bfloat16 or float32 tensor with dims beside a float64 tensor
with dims, in an op that makes a float result (arithmetic, maximum, minimum, pow, where, cat, stack and the
in-place forms), is a TypeError that names the two dtypes and says what to call. Comparisons compare such a pair as
PyTorch does (a bool result doubles no memory); in-place ops write where torch.can_cast allows, and raise where
PyTorch raises; cat and stack count every tensor as one with dims (PyTorch's stack joins 0-d ones as 1-d).

Before (main at 1b00c41), 835 of these 7,300 cases differed from torch: every pair of two different float dtypes
raised "does not promote float32 to float64" (bfloat16 + float16, bfloat16 * tensor(3.0), float16 / tensor(2.0,
float64), where(c, bfloat16, float32), cat([bfloat16, float16]), ...), and so did stack([tensor(1.0),
tensor(2.0, float64)]) with another message; a 0-d integer tensor widened an integer tensor with dims (uint8 +
tensor(1, int8) was int16, int8 + tensor(2) int64; torch: uint8, int8), and the in-place forms of those raised
(uint8 += tensor(1, int8), bfloat16 += float16); bool ** bool was int8 (torch: not implemented for bool).
Comparisons gave torch's dtype, but float16 < tensor(0.1, float64) compared in float64 and bfloat16 == 0.1 with 0.1
not rounded to bfloat16 (test_the_issue_s_cases). The table runs in about 2 s.
"""
import os

import numpy as np
import pytest

import minigrad as mg

from on_device import to_host

torch = pytest.importorskip("torch")

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
if mg.default_device() == "cuda":  # CuPy has no bfloat16 (NOTE [bfloat16], backend/device.py)
    NAMES.remove("bfloat16")
FLOATS = {"float16", "bfloat16", "float32", "float64"}
ULP = {"float16": 2 ** -10, "bfloat16": 2 ** -7, "float32": 2 ** -23, "float64": 2 ** -52}  # relative, at most
LEFT, RIGHT = [1, 0, 3], [2, 1, 3]  # nonnegative (uint8) and small (int8 ** int8); 0-d ones take the first
TENSORS = [(d, s) for d in NAMES for s in ("dims", "0-d")]
NUMBERS = [(None, v) for v in (True, 2, 2.5)]  # a Python bool, int and float, as (no dtype, the number)


def make(lib, spec, values):
    dtype, standing = spec
    if dtype is None:
        return standing
    data = [bool(v) for v in values] if dtype == "bool" else values
    return lib.tensor(data if standing == "dims" else data[0], dtype=getattr(torch, dtype) if lib is torch else dtype)


def cond(lib):
    return lib.tensor([True, False, True])


OPS = {  # name -> (f(lib, a, b), takes numbers)
    "add": (lambda lib, a, b: a + b, True), "sub": (lambda lib, a, b: a - b, True),
    "mul": (lambda lib, a, b: a * b, True), "div": (lambda lib, a, b: a / b, True),
    "pow": (lambda lib, a, b: a ** b, True), "lt": (lambda lib, a, b: a < b, True),
    "eq": (lambda lib, a, b: a == b, True), "maximum": (lambda lib, a, b: lib.maximum(a, b), False),
    "minimum": (lambda lib, a, b: lib.minimum(a, b), False),
    "where": (lambda lib, a, b: lib.where(cond(lib), a, b), True),
}
IN_PLACE = {"add_": lambda a, b: a.add_(b), "mul_": lambda a, b: a.mul_(b), "div_": lambda a, b: a.div_(b),
            "+=": lambda a, b: a.__iadd__(b)}
JOINS = {"cat": lambda lib, a, b: lib.cat([a, b]), "stack": lambda lib, a, b: lib.stack([a, b])}


def refused(op, specs):
    """The README's one refusal: float64 beside another float, both tensors with dims (in cat and stack every
    tensor counts as one with dims); comparisons excepted."""
    if op in ("lt", "eq"):
        return None
    floats = {d for d, s in specs if d in FLOATS and (s == "dims" or op in JOINS)}
    return sorted(floats - {"float64"})[0] if "float64" in floats and len(floats) > 1 else None


def run(fn, *args):
    try:
        with np.errstate(all="ignore"):
            return fn(*args)
    except Exception as e:  # noqa: BLE001 (an error is an outcome to compare)
        return e


def host(t):
    return t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()


def compare(op, specs, mine, theirs):
    """What is wrong with minigrad's outcome of one case, or None."""
    case = f"{op}({', '.join(repr(s) if d is None else d if s == 'dims' else f'0-d {d}' for d, s in specs)})"
    narrow = refused(op, specs)
    if narrow:
        if not isinstance(mine, TypeError) or f"({narrow} and float64)" not in str(mine) \
                or ".double()" not in str(mine):
            return f"{case}: expected the refusal naming {narrow} and float64, got {mine!r:.120}"
        return None
    if isinstance(theirs, Exception):
        return None if isinstance(mine, Exception) else f"{case}: torch raises {theirs!r:.80}, minigrad gives " \
                                                         f"{mine.dtype}"
    if isinstance(mine, TypeError) and "x ** True write x ** 1" in str(mine):
        return None  # minigrad's refusal by name of a bool exponent (test_generated_programs_vs_torch.py)
    if isinstance(mine, Exception):
        return f"{case}: torch gives {theirs.dtype}, minigrad raises {mine!r:.120}"
    want = str(theirs.dtype).replace("torch.", "")
    if mine.dtype.name != want:
        return f"{case}: minigrad gives {mine.dtype.name}, torch {want}"
    got, expected = np.asarray(to_host(mine)).astype(np.float64), host(theirs).astype(np.float64)
    # 2.5 / t: PyTorch's is t.reciprocal() * 2.5, two roundings; minigrad's one (NOTE [a number beside 2-byte
    # floats], ops/pointwise.py), so within one rounding of torch's
    rtol = ULP[want] if op == "div" and specs[0][0] is None else 0
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=rtol, atol=0, equal_nan=True):
        return f"{case}: values {got.tolist()}, torch {expected.tolist()}"
    return None


def cases(op):
    """Every pair of operands op takes, each as (left spec, right spec)."""
    if op in JOINS:
        return [(a, b) for a in TENSORS for b in TENSORS if op == "stack" or "0-d" not in (a[1], b[1])]
    pairs = [(a, b) for a in TENSORS for b in TENSORS]
    if op in IN_PLACE or OPS[op][1]:
        pairs += [(a, n) for a in TENSORS for n in NUMBERS]
    if op not in IN_PLACE and OPS[op][1]:
        pairs += [(n, a) for a in TENSORS for n in NUMBERS]  # a number on the left: 2.5 - t, 2 ** t, where(c, 2, t)
    return pairs


def table(op):
    wrong = []
    for specs in cases(op):
        if op in IN_PLACE:
            results = [run(lambda: IN_PLACE[op](make(lib, specs[0], LEFT), make(lib, specs[1], RIGHT)))
                       for lib in (mg, torch)]
        else:
            fn = JOINS[op] if op in JOINS else OPS[op][0]
            results = [run(fn, lib, make(lib, specs[0], LEFT), make(lib, specs[1], RIGHT)) for lib in (mg, torch)]
        problem = compare(op, specs, *results)
        if problem:
            wrong.append(problem)
    return wrong


@pytest.mark.parametrize("op", list(OPS) + list(IN_PLACE) + list(JOINS))
def test_each_pair_promotes_as_pytorch_but_the_one_refusal(op):
    wrong = table(op)
    assert not wrong, f"{len(wrong)} of {len(cases(op))} cases differ from torch:\n" + "\n".join(wrong[:25])


def test_the_issue_s_cases():
    """The cases issue #39 names, as its reader would write them, with torch's dtype and values."""
    b, h = mg.tensor([1.5, 2.0], dtype="bfloat16"), mg.tensor([0.25, 3.0], dtype="float16")
    assert (b + h).dtype == np.float32 and (b + h).tolist() == [1.75, 5.0]
    assert (b * mg.tensor(3.0)).dtype == mg.bfloat16 and (b * mg.tensor(3.0)).tolist() == [4.5, 6.0]
    assert (h / mg.tensor(2.0, dtype="float64")).dtype == np.float16
    assert mg.where(mg.tensor([True, False]), b, mg.tensor([7.0, 8.0])).tolist() == [1.5, 8.0]
    assert mg.cat([b, h]).dtype == np.float32 and mg.cat([b, h]).tolist() == [1.5, 2.0, 0.25, 3.0]
    x = mg.tensor([0.0999755859375, 1.0], dtype="float16")  # float16's 0.1
    assert (x < mg.tensor(0.1, dtype="float64")).tolist() == [False, False]  # in float16, as torch: 0.1 rounds to x
    assert (mg.tensor([0.1, 1.0], dtype="bfloat16") == 0.1).tolist() == [True, False]  # in bfloat16, as torch
    with pytest.raises(TypeError, match=r"^add: inputs have different dtypes \(float16 and float64\), of shapes "
                                        r"\(2, 1\) and \(3,\); minigrad does not promote float16 to float64 silently.*"
                                        r"\.double\(\) on the float16 one or \.half\(\) on the float64 one"):
        h[:, None] + mg.zeros(3, dtype="float64")


def test_promoted_values_are_computed_in_the_promoted_dtype():
    """bfloat16 + float16 is computed in float32 and stays float32, as torch's: 1 + 2^-10 (float16 holds it,
    bfloat16 does not) plus 256 in bfloat16 is 257.0009765625, not a 2-byte rounding of it."""
    for lib in (mg, torch):
        low = lib.tensor([256.0], dtype=lib.bfloat16) + lib.tensor([1 + 2 ** -10], dtype=lib.float16)
        assert low.dtype == (np.float32 if lib is mg else torch.float32) and low.tolist() == [257.0009765625]
    x = mg.tensor([256.0], dtype="bfloat16") * 1.0
    x += mg.tensor([1.0 + 2 ** -10], dtype="float16")  # computed in float32, rounded once into bfloat16
    t = torch.tensor([256.0], dtype=torch.bfloat16)
    t += torch.tensor([1.0 + 2 ** -10], dtype=torch.float16)
    assert x.dtype == mg.bfloat16 and x.tolist() == t.tolist() == [258.0]


FLOAT_NAMES = [d for d in NAMES if d in FLOATS]
MIXED = [(a, sa, b, sb) for a in FLOAT_NAMES for b in FLOAT_NAMES for sa in ("dims", "0-d") for sb in ("dims", "0-d")
         if a != b and not refused("add", [(a, sa), (b, sb)])]


@pytest.mark.parametrize("a, sa, b, sb", MIXED)
def test_each_input_s_gradient_comes_back_in_its_own_dtype_as_torch_s(a, sa, b, sb):
    """Through add, mul, div, maximum, where, pow, stack and cat of two floats of different dtypes: each leaf's
    gradient in its own dtype and shape, with torch's values (2-byte ones within their rounding)."""
    def grads(lib):
        x = lib.tensor([0.5, 1.5, 2.0] if sa == "dims" else 1.25, dtype=getattr(torch, a) if lib is torch else a,
                       requires_grad=True)
        y = lib.tensor([1.25, 0.75, 3.0] if sb == "dims" else 0.5, dtype=getattr(torch, b) if lib is torch else b,
                       requires_grad=True)
        outs = [x + y, x * y, x / y, lib.maximum(x, y), lib.where(cond(lib), x, y), x ** y]
        if sa == sb and not refused("stack", [(a, sa), (b, sb)]):  # stack joins two 0-d ones as 1-d ones
            outs.append(lib.cat([x, y]) if sa == "dims" else lib.stack([x, y]))
        sum(o.sum() * (k + 1) for k, o in enumerate(outs)).backward()  # a float32 sum of 2-byte ones, in torch too
        return x.grad, y.grad
    for mine, theirs, name in zip(grads(mg), grads(torch), (a, b)):
        assert mine.dtype.name == name and mine.shape == tuple(theirs.shape)
        np.testing.assert_allclose(np.asarray(to_host(mine)).astype(np.float64), host(theirs).astype(np.float64),
                                   rtol=2e-2 if "16" in name else 1e-6)


@pytest.mark.parametrize("a, b", [(a, b) for a, b in [("bfloat16", "float16"), ("float16", "float32"),
                                                      ("float32", "bfloat16")] if {a, b} <= set(NAMES)])
def test_a_recorded_in_place_write_of_a_wider_result_as_torch_s(a, b):
    """h += y, h of dtype a and y of dtype b, both with dims: computed in the promoted dtype, rounded once into h
    (as PyTorch's), recorded, and each leaf's gradient in its own dtype, with torch's values."""
    def run_in(lib):
        x = lib.tensor([1.5, 2.0, 3.0], dtype=getattr(torch, a) if lib is torch else a, requires_grad=True)
        y = lib.tensor([0.25, 0.5, 1.0 + 2 ** -9], dtype=getattr(torch, b) if lib is torch else b, requires_grad=True)
        h = x * 2
        h += y
        h *= lib.tensor(3.0, dtype=getattr(torch, "float64") if lib is torch else "float64")  # 0-d: h keeps a
        (h * h).sum().backward()
        return h, x.grad, y.grad
    for mine, theirs in zip(run_in(mg), run_in(torch)):
        assert mine.dtype.name == str(theirs.dtype).replace("torch.", "")
        np.testing.assert_array_equal(np.asarray(to_host(mine.detach())).astype(np.float64),
                                      host(theirs.detach()).astype(np.float64))


def test_the_readme_states_the_rule_this_table_checks():
    """The README's promotion sentence ("What differs from PyTorch") is what the code does: its examples hold, and
    it states the refusal as the table checks it."""
    readme = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
    bullet = " ".join(open(readme, encoding="utf-8").read().split("- Type promotion is PyTorch's", 1)[1]
                      .split("\n- ", 1)[0].split())
    for claim in ("(`torch.result_type`) for every pair of dtypes", "a 0-d tensor or a number does not widen a tensor "
                  "with dims of its kind", "where `torch.can_cast` allows", "a float16, bfloat16 or float32 tensor "
                  "with dims beside a float64 tensor with dims", "but not in comparisons", "names the two dtypes",
                  "`.double()`", "`minigrad/tensor/promotion.py`", "`tests/test_promotion_vs_torch.py`"):
        assert claim in bullet, claim
    ints, floats = mg.tensor([1, 2]), mg.tensor([0.5])
    assert (ints + 0.5).dtype == mg.arange(3).exp().dtype == mg.cat([ints, floats]).dtype == np.float32
    x = mg.tensor([-1.0, 2.0], dtype="float64")
    assert (x * (x < 0)).dtype == np.float64
    if "bfloat16" in NAMES:
        b = mg.tensor([1.0], dtype="bfloat16")
        assert (b + mg.tensor([1.0], dtype="float16")).dtype == np.float32 and (b * mg.tensor(3.0)).dtype == b.dtype
    assert (mg.tensor([1], dtype="int8") + mg.tensor(2)).dtype == np.int8
    for fn in (lambda a, b: a + b, lambda a, b: mg.where(a > 0, a, b), lambda a, b: mg.cat([a, b])):
        with pytest.raises(TypeError, match=r"\(float32 and float64\).*\.double\(\).*\.float\(\)"):
            fn(mg.zeros(2), mg.zeros(2, dtype="float64"))
    assert (mg.zeros(2) < mg.zeros(2, dtype="float64")).dtype == np.bool_


@pytest.mark.parametrize("low", [d for d in ("bfloat16", "float16") if d in NAMES])
def test_a_0d_tensor_beside_2_byte_floats_is_read_as_pytorch_reads_it(low):
    """x * s and x / s, x float16 or bfloat16 with dims and s a 0-d tensor of another dtype: PyTorch's CPU kernels
    read s's value as a number's, compute in float32 and round once (NOTE [a number beside 2-byte floats],
    ops/pointwise.py). Rounding s to x's dtype first, as promotion alone does, gave 38.5% of 4,000 bfloat16
    products x * tensor(3.1) another value than torch's (17.8% in float16). s * x rounds once too (torch rounds s
    first there: within one ulp). Multiplying by such a number, Mul's backward gave the 0-d tensor's own gradient
    as g * s instead of g * x (30% off here)."""
    values = (np.abs(np.random.default_rng(0).standard_normal(4000)) * 3).astype(np.float32)  # s.grad: no cancelling
    other = "float16" if low == "bfloat16" else "bfloat16"
    for s_dtype, s_value in [("float32", 3.1), ("float64", 3.1), ("int64", 257)] + [(other, 0.3)] * (other in NAMES):
        def run_in(lib):
            def as_dtype(name):
                return getattr(torch, name) if lib is torch else name
            x = lib.tensor(values, requires_grad=True)
            s = lib.tensor(s_value, dtype=as_dtype(s_dtype), requires_grad=s_dtype != "int64")
            low_x = x.to(as_dtype(low))
            outs = [low_x * s, low_x / s, s * low_x]
            (outs[0] * 2 + outs[1]).mean().backward()  # (a sum of 4,000 would overflow float16)
            return outs + [x.grad] + ([s.grad] if s.requires_grad else [])
        mine, theirs = run_in(mg), run_in(torch)
        for k, (m, t) in enumerate(zip(mine, theirs)):
            assert m.dtype.name == str(t.dtype).replace("torch.", ""), (s_dtype, k)
            got, want = np.asarray(to_host(m.detach())).astype(np.float64), host(t.detach()).astype(np.float64)
            rtol = ULP[low] if k == 2 else 1e-2 if k == 4 else 0  # s * x: one rounding; s.grad: a 2-byte sum's
            np.testing.assert_allclose(got, want, rtol=rtol, atol=0, err_msg=f"{s_dtype}, output {k}")
