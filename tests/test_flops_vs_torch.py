"""minigrad's matmul-family FLOPs (mg.profile's op 'matmul') against PyTorch's own counter,
torch.utils.flop_counter.FlopCounterMode: forward and backward separately, each input requiring grad or not, and
the recompute of a checkpoint.

What PyTorch's counter counts (torch 2.13, torch/utils/flop_counter.py): 2 m n k for each aten.mm, addmm, bmm and
baddbmm it sees dispatched (addmm's added bias is not counted), sdpa's fused kernels by a formula (below), conv;
nothing else. So:
  - only the products autograd runs are counted: a backward matmul for an input that needs no gradient is never
    dispatched, and costs nothing; minigrad's rule too (NOTE [FLOP convention], ops/base.py).
  - a broadcast batch is expanded before bmm: the product counts at the broadcast (output) batch, forward and
    backward (the sum back to the input's shape is no matmul).
  - aten.mv and aten.dot (a 1-d second operand) are not in its registry: they count 0, a gap of the counter.
    The rule compared: a 1-d operand counts as the matrix that NumPy and PyTorch promote it to (a row before
    the first operand's k, a column after the second's), so the reference is PyTorch's count of the product of
    the promoted (unsqueezed) operands, forward and backward.
  - a zero-size m, n or k: 0 FLOPs, forward and backward.
  - linear: PyTorch's addmm (or mm without a bias); the bias add is not counted by PyTorch, minigrad counts it
    under op 'add' (and the bias gradient under 'sum'), outside 'matmul': only 'matmul' is compared.
  - sdpa: PyTorch's formulas for a fused kernel (sdpa_flop_count, sdpa_backward_flop_count) count the forward as
    q k^T and P v, and the backward as five products always: the scores again, dP = g v^T, dv = P^T g, dq and dk,
    whichever inputs need a gradient. Its registry holds the CUDA kernels only; on CPU
    (_scaled_dot_product_flash_attention_for_cpu, q, k, v of one batch shape and E == Ev) the same formulas are
    registered here through custom_mapping. minigrad's sdpa is a fused kernel (NOTE [fused attention],
    ops/nn.py) that computes only the gradients needed: its backward is compared with PyTorch's math path
    (SDPBackend.MATH, which runs only the products the needed gradients take) plus PyTorch's count of the
    scores' product q k^T (the recompute a fused backward does); with q, k and v all needing a gradient it also
    equals PyTorch's fused formula. The causal mask saves nothing in either count (the full L x S scores). Not
    compared: an empty value dim (Ev = 0), where PyTorch returns the empty output and computes nothing, and
    minigrad still computes (and counts) the scores and, in backward, dq and dk (of zeros).
  - minigrad also counts elementwise ops, reductions and the sdpa's per-score work (other op names), which
    PyTorch's counter ignores: not compared.
  - checkpoint: torch.utils.checkpoint (non-reentrant) runs the recompute inside backward, under the same
    FlopCounterMode; its recompute's FLOPs are the checkpointed backward's less the plain backward's. minigrad
    counts them in phase 'recompute', its 'backward' phase being the plain run's backward.
"""
import contextlib
import functools

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.gpt import Block, GPTConfig

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count  # noqa: E402

aten = torch.ops.aten
# PyTorch's own sdpa formulas, for its CPU fused kernel, which its registry does not list
FUSED_CPU = {aten._scaled_dot_product_flash_attention_for_cpu:
             lambda q, k, v, *args, out_shape=None, **kw: sdpa_flop_count(q, k, v),
             aten._scaled_dot_product_flash_attention_for_cpu_backward:
             lambda g, q, k, v, *args, out_shape=None, **kw: sdpa_backward_flop_count(g, q, k, v)}


def torch_flops(fn):
    """(PyTorch's FLOPs of fn(), fn's result), by FlopCounterMode."""
    with FlopCounterMode(display=False, custom_mapping=FUSED_CPU) as counter:
        out = fn()
    return counter.get_total_flops(), out


def torch_run(fn, leaves):
    """(forward, backward) FLOPs by PyTorch of fn() and of the backward of its sum; no backward when nothing needs
    a gradient."""
    fwd, out = torch_flops(fn)
    if not out.requires_grad:
        return fwd, 0
    bwd, _ = torch_flops(lambda: out.sum().backward())
    return fwd, bwd


def mg_run(fn):
    """(forward, backward, recompute) FLOPs of op 'matmul' that mg.profile counts for fn() and its sum's backward."""
    with mg.profile() as prof:
        out = fn()
        if out.requires_grad:
            out.sum().backward()
    return tuple(prof.flops(phase, "matmul") for phase in ("forward", "backward", "recompute"))


def pair(shape, requires_grad, seed):
    """The same float64 values as a minigrad tensor and as a torch tensor."""
    a = np.random.default_rng(seed).standard_normal(shape)
    return (mg.tensor(a, dtype="float64", requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


GRADS2 = [(True, True), (True, False), (False, True), (False, False)]

MATMUL_SHAPES = [
    ((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((5, 2, 3), (3,)), ((3,), (5, 3, 4)),  # 1-d operands
    ((2, 3), (3, 4)), ((5, 2, 3), (5, 3, 4)),                                          # 2-d, batched
    ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((5, 1, 2, 3), (6, 3, 4)), ((1, 6, 2, 3), (5, 1, 3, 4)),  # broadcast
    ((0, 3), (3, 4)), ((2, 3), (3, 0)), ((2, 0), (0, 4)), ((5, 0, 3), (3, 4)), ((3,), (3, 0)), ((0,), (0,)),  # empty
]


@pytest.mark.parametrize("grads", GRADS2, ids=lambda g: "".join("TF"[not r] for r in g))
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes, grads):
    (a, ta), (b, tb) = (pair(s, r, i) for i, (s, r) in enumerate(zip(shapes, grads)))

    def promoted():  # a 1-d operand as the matrix NumPy promotes it to: PyTorch's counter skips mv and dot
        return ((ta[None] if ta.ndim == 1 else ta) @ (tb[:, None] if tb.ndim == 1 else tb))

    assert mg_run(lambda: a @ b) == (*torch_run(promoted, (ta, tb)), 0)


@pytest.mark.parametrize("name, shapes", [("mm", ((2, 3), (3, 4))), ("bmm", ((5, 2, 3), (5, 3, 4))),
                                          ("matmul", ((5, 2, 3), (3,))), ("dot", ((3,), (3,)))])
def test_matmul_by_its_pytorch_names(name, shapes):
    """Tensor.mm, .bmm, .matmul and .dot, PyTorch's names of the product (dot: PyTorch counts the promoted one)."""
    (a, ta), (b, tb) = (pair(s, True, i) for i, s in enumerate(shapes))
    if name == "dot":
        want = torch_run(lambda: ta[None] @ tb[:, None], (ta, tb))
    elif name == "matmul":
        want = torch_run(lambda: ta.matmul(tb[:, None]), (ta, tb))
    else:
        want = torch_run(lambda: getattr(ta, name)(tb), (ta, tb))
    assert want[0] > 0 and mg_run(lambda: getattr(a, name)(b)) == (*want, 0)


LINEAR_X = [(3,), (4, 3), (2, 4, 3), (2, 2, 4, 3), (0, 3)]
GRADS3 = [(True, True, True), (False, True, True), (True, False, False), (False, False, True), (True, False, True)]


@pytest.mark.parametrize("grads", GRADS3, ids=lambda g: "".join("TF"[not r] for r in g))
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("x_shape", LINEAR_X, ids=str)
def test_linear(x_shape, bias, grads):
    (x, tx), (w, tw), (b, tb) = (pair(s, r, i) for i, (s, r) in enumerate(zip((x_shape, (5, 3), (5,)), grads)))
    want = torch_run(lambda: torch.nn.functional.linear(tx, tw, tb if bias else None), (tx, tw, tb))
    assert mg_run(lambda: F.linear(x, w, b if bias else None)) == (*want, 0)


@pytest.mark.parametrize("grads", GRADS2, ids=lambda g: "".join("TF"[not r] for r in g))
@pytest.mark.parametrize("x_shape", [(4, 3), (2, 4, 3), (3,)], ids=str)
def test_x_at_weight_transposed(x_shape, grads):
    """x @ w.T, a transposed view as the second operand (the way many write a linear layer by hand)."""
    (x, tx), (w, tw) = (pair(s, r, i) for i, (s, r) in enumerate(zip((x_shape, (5, 3)), grads)))
    assert mg_run(lambda: x @ w.T) == (*torch_run(lambda: tx @ tw.T, (tx, tw)), 0)


def test_linear_with_no_input_features():
    """in_features = 0: every output is the bias (or 0), no product at all; minigrad's profile raised a
    ZeroDivisionError (the row count as x.size // x.shape[-1])."""
    for bias in (True, False):
        (x, tx), (w, tw), (b, tb) = (pair(s, True, i) for i, s in enumerate(((4, 0), (5, 0), (5,))))
        want = torch_run(lambda: torch.nn.functional.linear(tx, tw, tb if bias else None), (tx, tw, tb))
        assert want == (0, 0)
        assert mg_run(lambda: F.linear(x, w, b if bias else None)) == (0, 0, 0)


# name: (q, k, v shapes, keyword arguments, whether PyTorch's CPU fused kernel takes them)
SDPA = {
    "plain": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), {}, True),
    "causal": ((2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 8), dict(is_causal=True), True),
    "bool_mask": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), dict(attn_mask=(4, 6, "bool")), True),
    "float_mask": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), dict(attn_mask=(2, 1, 4, 6, "float")), True),
    "float_mask_grad": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), dict(attn_mask=(2, 1, 4, 6, "grad")), False),
    "gqa": ((2, 4, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8), dict(enable_gqa=True), False),
    "broadcast": ((2, 3, 4, 8), (1, 3, 6, 8), (2, 1, 6, 5), {}, False),
    "3d_ev": ((3, 4, 8), (3, 6, 8), (3, 6, 5), {}, False),
    "dropout": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), dict(dropout_p=0.3), False),
    "2d": ((4, 8), (6, 8), (6, 8), {}, False),
    "empty_L": ((2, 3, 0, 8), (2, 3, 6, 8), (2, 3, 6, 8), {}, False),
    "empty_S": ((2, 3, 4, 8), (2, 3, 0, 8), (2, 3, 0, 8), {}, False),
    "empty_E": ((2, 3, 4, 0), (2, 3, 6, 0), (2, 3, 6, 5), {}, False),
}
GRADS_QKV = [(True, True, True), (True, False, False), (False, True, False), (False, False, True),
             (False, True, True), (False, False, False)]


def sdpa_args(kw, seed=9):
    """kwargs for minigrad and for torch: an attn_mask spec (shape..., kind) made into a tensor of each."""
    kw, tkw = dict(kw), dict(kw)
    if "attn_mask" in kw:
        *shape, kind = kw["attn_mask"]
        if kind == "bool":
            m = np.random.default_rng(seed).random(shape) > 0.3
            m[..., 0] = True  # every query attends somewhere
            kw["attn_mask"], tkw["attn_mask"] = mg.tensor(m), torch.tensor(m)
        else:
            kw["attn_mask"], tkw["attn_mask"] = pair(tuple(shape), kind == "grad", seed)
    return kw, tkw


@pytest.mark.parametrize("grads", GRADS_QKV, ids=lambda g: "".join("TF"[not r] for r in g))
@pytest.mark.parametrize("case", list(SDPA))
def test_sdpa(case, grads):
    *shapes, kw, fused = SDPA[case]
    (q, tq), (k, tk), (v, tv) = (pair(s, r, i) for i, (s, r) in enumerate(zip(shapes, grads)))
    kw, tkw = sdpa_args(kw)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with sdpa_kernel(SDPBackend.MATH):  # only the products that the needed gradients take
        fwd, bwd = torch_run(lambda: sdpa(tq, tk, tv, **tkw), (tq, tk, tv))
    got = mg_run(lambda: F.scaled_dot_product_attention(q, k, v, **kw))
    if any(grads) or (case == "float_mask_grad"):  # a fused backward computes the scores again
        if tkw.get("enable_gqa"):
            tk = tk.repeat_interleave(tq.shape[-3] // tk.shape[-3], dim=-3)
        bwd += torch_flops(lambda: tq @ tk.transpose(-2, -1))[0]
    assert got == (fwd, bwd, 0)
    if fused and all(grads):  # PyTorch's formulas for a fused kernel, on its CPU one
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            assert torch_run(lambda: sdpa(tq, tk, tv, **tkw), (tq, tk, tv)) == got[:2]


class TorchBlock(torch.nn.Module):
    """minigrad.gpt.Block in PyTorch: the same products in the same order."""

    def __init__(self, C, nh, sdpa):
        super().__init__()
        self.nh, self.sdpa = nh, sdpa
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
        self.c_attn, self.attn_proj = torch.nn.Linear(C, 3 * C), torch.nn.Linear(C, C)
        self.c_fc, self.mlp_proj = torch.nn.Linear(C, 4 * C), torch.nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        qkv = self.c_attn(self.ln_1(x)).split(C, -1)
        q, k, v = (t.reshape(B, T, self.nh, C // self.nh).transpose(1, 2) for t in qkv)
        if self.sdpa:
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (C // self.nh) ** -0.5
            att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
            y = att @ v
        x = x + self.attn_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(torch.nn.functional.gelu(self.c_fc(self.ln_2(x))))


def blocks(impl, frozen=()):
    """A minigrad GPT block and its PyTorch twin, with the parameters named in `frozen` needing no gradient."""
    cfg = GPTConfig(n_embd=16, n_head=4, block_size=8, attn_implementation=impl)
    block, twin = Block(cfg), TorchBlock(16, 4, impl == "sdpa").double()
    block.to(dtype="float64")
    for name, p in block.named_parameters():
        if name.split(".")[-2] in frozen:
            p.requires_grad_(False)
    for name, p in twin.named_parameters():
        if name.split(".")[-2] in frozen:
            p.requires_grad_(False)
    return block, twin


def torch_block_kernel(impl):
    # PyTorch's CPU picks its fused kernel for is_causal (q, k and v of one shape): forced, so that it is counted
    return sdpa_kernel(SDPBackend.FLASH_ATTENTION) if impl == "sdpa" else contextlib.nullcontext()


@pytest.mark.parametrize("frozen", [(), ("c_attn",), ("c_attn", "ln_1", "c_fc")], ids=str)
@pytest.mark.parametrize("x_grad", [True, False])
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_gpt_block(impl, x_grad, frozen):
    block, twin = blocks(impl, frozen)
    x, tx = pair((2, 8, 16), x_grad, 0)
    with torch_block_kernel(impl):
        want = torch_run(lambda: twin(tx), (tx,))
    assert mg_run(lambda: block(x)) == (*want, 0)


def checkpointed_torch(fn, x, early_stop):
    """(forward, backward, recompute) of fn(x) through torch.utils.checkpoint: its recompute runs inside backward,
    so it is the checkpointed backward's FLOPs less the plain one's."""
    fwd, bwd = torch_run(lambda: fn(x), (x,))
    with torch.utils.checkpoint.set_checkpoint_early_stop(early_stop):
        ck_fwd, ck_bwd = torch_run(lambda: torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False), (x,))
    assert ck_fwd == fwd
    return fwd, bwd, ck_bwd - bwd


@pytest.mark.parametrize("early_stop", [False, True], ids=["every_op", "early_stop"])
@pytest.mark.parametrize("x_grad", [True, False])
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_checkpointed_gpt_block_recomputes_its_forward(impl, x_grad, early_stop):
    """Recomputing every op (early stop off, on both sides): the recompute's products are the block's forward. With
    early stop (the default of both), the MLP's c_proj, whose output no backward reads, does not run again."""
    block, twin = blocks(impl)
    x, tx = pair((2, 8, 16), x_grad, 0)
    with torch_block_kernel(impl):
        want = checkpointed_torch(twin, tx, early_stop)
    skipped = torch_flops(lambda: twin.mlp_proj(torch.zeros(2, 8, 64, dtype=torch.float64)))[0] if early_stop else 0
    assert want[2] == want[0] - skipped > 0
    with mg.utils.checkpoint.set_checkpoint_early_stop(early_stop):
        assert mg_run(lambda: mg.checkpoint(block, x, use_reentrant=False)) == want


def _save_products(ctx, op, *args, **kwargs):
    products = (aten.mm.default, aten.addmm.default, aten.bmm.default)
    policy = torch.utils.checkpoint.CheckpointPolicy
    return policy.MUST_SAVE if op in products else policy.PREFER_RECOMPUTE


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_selective_checkpoint_keeps_the_products(impl):
    """dots_saveable keeps every 'matmul' and 'linear' op, as PyTorch's selective checkpoint saving mm, addmm and
    bmm: no product runs again, but the fused attention, which is neither, recomputes its two."""
    block, twin = blocks(impl)
    x, tx = pair((2, 8, 16), True, 0)
    context = functools.partial(torch.utils.checkpoint.create_selective_checkpoint_contexts, _save_products)
    with torch_block_kernel(impl):
        fwd, bwd = torch_run(lambda: twin(tx), (tx,))
        _, ck_bwd = torch_run(lambda: torch.utils.checkpoint.checkpoint(twin, tx, use_reentrant=False,
                                                                        context_fn=context), (tx,))
    want = (fwd, bwd, ck_bwd - bwd)
    assert want[2] == (2 * 2 * 8 * 8 * 16 * 2 if impl == "sdpa" else 0)  # q k^T and P v: 2 B T T C each
    assert mg_run(lambda: mg.checkpoint(block, x, use_reentrant=False, policy=mg.checkpoint_policies.dots_saveable)) \
        == want


def test_checkpoint_early_stop_recomputes_only_what_backward_reads():
    """By default both stop early. Linear -> GELU -> Linear: the last Linear's output is read by no backward, and
    both skip it; the recompute is the first Linear's forward (widths 3 -> 5 -> 7, so the two differ)."""
    seq = nn.Sequential(nn.Linear(3, 5), nn.GELU(), nn.Linear(5, 7)).to(dtype="float64")
    tseq = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.GELU(), torch.nn.Linear(5, 7)).double()
    x, tx = pair((4, 3), True, 0)
    want = checkpointed_torch(tseq, tx, early_stop=True)
    assert want[2] == torch_run(lambda: tseq[0](tx), (tx,))[0] == 2 * 4 * 3 * 5
    assert mg_run(lambda: mg.checkpoint(seq, x, use_reentrant=False)) == want


def test_checkpoint_recompute_skips_the_last_linear_before_a_kept_output():
    """Linear -> Tanh -> Linear -> Tanh: minigrad keeps the segment's output (NOTE [recompute what backward reads],
    checkpoint/policies.py), so the last Tanh and its Linear do not run again; PyTorch's early stop runs them
    (Tanh saved its output). minigrad's recompute is then the forward of what it ran again, the first Linear,
    as PyTorch counts that Linear; without early stop, both recompute the whole segment."""
    seq = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 7), nn.Tanh()).to(dtype="float64")
    tseq = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 7), torch.nn.Tanh()).double()
    x, tx = pair((4, 3), True, 0)
    fwd, bwd, _ = checkpointed_torch(tseq, tx, early_stop=True)
    first = torch_run(lambda: tseq[0](tx), (tx,))[0]
    assert mg_run(lambda: mg.checkpoint(seq, x, use_reentrant=False)) == (fwd, bwd, first)
    with mg.utils.checkpoint.set_checkpoint_early_stop(False):
        assert mg_run(lambda: mg.checkpoint(seq, x, use_reentrant=False)) == checkpointed_torch(tseq, tx, False)
