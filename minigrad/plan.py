"""Will it fit? One training step of a full-size model, run on the 'meta' device and counted by the ledger.

    predict(Setup("bert-large-uncased", batch_size=4, seq_len=512))   # bytes by category, FLOPs by phase
    reserved(Setup("bert-large-uncased", batch_size=4, seq_len=512))  # what the caching allocator would hold
    search("gpt2-xl", memory=80e9, batch_size=64, seq_len=1024)       # what fits, cheapest first

Nothing here estimates: `predict` builds the model on 'meta' (backend/meta.py: shapes, no data), runs the very
step a real run would (forward, backward and the optimizer, with the accumulation and checkpointing
asked for) under mg.profile, and reads the ledger. At sizes that fit in memory, the same step on 'cpu'
gives the same numbers (tests/test_plan.py). `reserved` replays a whole run through PyTorch's caching
allocator (profiler/allocator.py): what it would reserve, the peak plus fragmentation. What neither counts (the
CUDA context, library workspaces) is in docs/will_it_fit.md, beside published measurements.

The step, as a training loop runs it once it is under way (`Setup.software` says how the framework of
the day behaves):
    for each of the grad_accum micro-batches: loss = model(batch) / grad_accum; loss.backward()
    optimizer.step(); optimizer.zero_grad()
Under mixed precision (Setup.precision), as Hugging Face's Trainer of 2022 ran it with fp16=True: the weights stay
float32, the forward and the loss run under mg.autocast('cuda', dtype=float16) (CUDA's lists: on 'meta' a region
follows the device it names), and
    for each micro-batch: with autocast: loss = model(batch); scaler.scale(loss / grad_accum).backward()
    scaler.unscale_(optimizer); scaler.step(optimizer); scaler.update(); optimizer.zero_grad()
bf16-mixed: autocast in bfloat16, no scaler. (The Trainer clips the unscaled gradients at max_grad_norm 1.0; the
planner's step clips in no precision: the norms are a number per parameter.)
Before it, unprofiled, what an earlier step leaves behind is made: the optimizer's state (as in every
step but the first), and the gradients, dropped or zeroed in place. With zero_grad='zeros' (set_to_none=False, PyTorch before 2.0) the gradients stay allocated
through the next forward; with 'none' (today's default) they are freed after the step.

Read next: formulas.py, the closed forms that the ledger's measurements must equal; __main__.py, whose
`memory` and `plan` commands print these predictions.
"""
import contextlib
import difflib
import math
import re
from dataclasses import dataclass, field

from . import backend, models, optim, schedules
from .amp import GradScaler, autocast, autocast_of
from .checkpoint import checkpoint_policies, measure_chain
from .profiler import CachingAllocator, profile
from .backend.random import manual_seed
from .tensor import no_grad, zeros_like

STRATEGIES = ("none", "every", "sqrt", "budget")
POLICIES = tuple(vars(checkpoint_policies))  # what each checkpoint keeps; the first, nothing_saveable, is the default
ORDER = ("parameters", "gradients", "optimizer", "activations", "transient")  # the profiler's categories, as printed
# NOTE [the planner's optimizers]: as Hugging Face's Trainer of 2022 built them (the write-up's rows): adamw its
# default AdamW (weight decay 0: a difference of values, not of bytes); adafactor transformers' Adafactor with
# scale_parameter=False, relative_step=False and the Trainer's lr; adamw8bit bitsandbytes' Adam8bit, which is
# AdamW8bit with weight_decay=0 (moments of 4096 elements or more in 8 bits, the rest in float32).
OPTIMIZERS = {"adamw": lambda params: optim.AdamW(params, lr=1e-4),
              "adafactor": lambda params: optim.Adafactor(params, lr=1e-4, scale_parameter=False, relative_step=False),
              "adamw8bit": lambda params: optim.AdamW8bit(params, lr=1e-4, weight_decay=0.0),
              "sgd": lambda params: optim.SGD(params, lr=1e-3)}
DTYPES = {"fp32": "float32", "fp16": "float16"}           # a model stored wholly in one dtype (model.half())
PRECISIONS = {"fp32": None, "fp16-mixed": "float16", "bf16-mixed": "bfloat16"}  # float32 weights, autocast to this


@dataclass(frozen=True)
class Software:
    """What the framework of the day keeps, where that changed over the years (defaults: PyTorch today)."""
    zero_grad: str = "none"            # 'none': set_to_none (PyTorch >= 2.0); 'zeros': filled in place, alive in forward
    dropout_mask: str = "bool"         # 'bool': 1 byte per element (native_dropout); 'float': the input's dtype
    attention: str = "eager"           # 'eager': keeps its (B, heads, T, T) scores; 'sdpa': fused, recomputes them
    softmax_keeps_input: bool = False  # PyTorch < 1.11's softmax backward kept its input as well as its output
    gelu_float32: bool = False         # PyTorch < 1.10's CUDA autocast ran GELU in float32 (amp/autocast_mode.py)

    def __post_init__(self):
        for name, allowed in (("zero_grad", ("none", "zeros")), ("dropout_mask", ("bool", "float")),
                              ("attention", ("eager", "sdpa"))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"Software: {name} must be one of {', '.join(allowed)}; got {getattr(self, name)!r}")


@dataclass(frozen=True)
class Setup:
    """One training step: `batch_size` is the micro-batch that runs at once, `grad_accum` how many run before the
    optimizer steps (so the batch the optimizer sees is batch_size * grad_accum)."""
    model: str
    batch_size: int
    seq_len: int
    grad_accum: int = 1
    checkpointing: object = "none"     # 'none', 'every' (each block, as Hugging Face's gradient_checkpointing),
                                       # 'sqrt' (sqrt(n) segments of blocks), or segments [(lo, hi), ...]
    optimizer: str = "adamw"
    dtype: str = "fp32"                # the dtype the whole model is stored in; mixed precision is `precision`
    software: Software = field(default_factory=Software)
    overrides: dict = field(default_factory=dict)  # changes to the model's config: {'n_layer': 2} for a small one
    policy: str = "nothing_saveable"   # what each checkpoint keeps rather than recomputes: a name in
                                       # mg.checkpoint_policies ('save_anything_except_core_attention': Korthikanti's)
    precision: str = "fp32"            # 'fp16-mixed' (autocast float16, a GradScaler), 'bf16-mixed' (autocast bfloat16)

    def __post_init__(self):
        models.spec(self.model)  # an unknown name lists the known ones
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch size must be a whole number >= 1 (the micro-batch that runs at once); got "
                             f"{self.batch_size!r}")
        if not isinstance(self.grad_accum, int) or self.grad_accum < 1:
            raise ValueError(f"grad accumulation must be a whole number >= 1 (micro-batches per optimizer step); got "
                             f"{self.grad_accum!r}")
        longest = models.positions(self.model, **self.overrides)
        if not 1 <= self.seq_len <= longest:
            raise ValueError(f"sequence length {self.seq_len}: {self.model} has {longest} positions, so "
                             f"--seq-len must be between 1 and {longest}")
        if isinstance(self.checkpointing, str) and self.checkpointing not in STRATEGIES:
            raise ValueError(f"checkpointing must be one of {', '.join(STRATEGIES)}, or a list of segments; got "
                             f"{self.checkpointing!r}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)} (mg.checkpoint_policies); got "
                             f"{self.policy!r}")
        if self.policy != "nothing_saveable" and self.checkpointing == "none":
            raise ValueError(f"policy {self.policy}: a policy chooses what a checkpoint keeps, and with checkpointing "
                             f"'none' there is no checkpoint; add --checkpointing (every block) or another strategy")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {self.optimizer!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {self.dtype!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}; got {self.precision!r}")
        if self.precision != "fp32" and self.dtype != "fp32":
            raise ValueError(f"dtype {self.dtype} with precision {self.precision}: --dtype stores the whole model in "
                             f"one dtype (model.half()), --precision keeps float32 weights and runs the products in "
                             f"16 bits under autocast (what fp16=True does); choose one: --dtype fp32 --precision "
                             f"{self.precision} for mixed precision, or --dtype {self.dtype} alone")


@dataclass
class Prediction:
    setup: Setup
    bytes: dict          # {category: bytes} at the moment the step's total peaked, and 'total'
    flops: dict          # {'forward', 'backward', 'recompute': FLOPs of the whole step}
    segments: list       # the checkpointed segments of blocks that ran ([] without checkpointing)
    profile: object = field(default=None, repr=False, compare=False)  # the step's mg.profile: its events, to export

    @property
    def samples(self):
        return self.setup.batch_size * self.setup.grad_accum

    @property
    def flops_per_sample(self):
        return sum(self.flops.values()) / self.samples

    @property
    def overhead(self):
        """Recompute FLOPs as a share of forward + backward: what checkpointing costs."""
        return self.flops["recompute"] / (self.flops["forward"] + self.flops["backward"])

    def as_json(self):
        """{category: bytes, ..., 'total': bytes, 'flops': {phase: FLOPs}}: what `memory --json` prints."""
        return {**self.bytes, "flops": dict(self.flops)}


def block_segments(how, blocks, input_):
    """The segments of blocks to checkpoint for a strategy: 'every' one per block; 'sqrt' and 'budget' from the
    schedules (schedules.py) on the blocks' chain, measured on the input (a meta tensor)."""
    n = len(blocks)
    if how == "none":
        return []
    if how == "every":
        return [(i, i + 1) for i in range(n)]
    chain = measure_chain(blocks, input_)
    plan = schedules.sqrt_n(chain) if how == "sqrt" else schedules.best_budgeted(chain)
    return plan.segments[:-1]  # as checkpoint_sequential runs a plan: the last segment runs plainly


def predict(setup, exact_accumulation=True, device="meta", amp_device=None):
    """Run `setup`'s training step on 'meta' under mg.profile and read the ledger. (On device='cpu' the same step
    runs for real, with real numbers: the tests compare the two.)

    amp_device: whose autocast lists a mixed-precision step follows: 'cuda' (the GPU a prediction is for, the default
    on 'meta' and 'cuda'), or 'cpu' (the default on 'cpu', where autocast('cuda') would cast nothing).

    With exact_accumulation=False, at most 2 of the grad_accum micro-batches run: from the second on, each finds
    the same state (the gradients of the ones before), so the peak is the same, and each adds the same FLOPs
    (they are scaled up). `search` uses it; tests check it against the full run."""
    model, batch, segments, opt, set_to_none, region, scaler = _build(setup, device, amp_device)
    runs = setup.grad_accum if exact_accumulation else min(setup.grad_accum, 2)
    _warm_up(model, opt, set_to_none)
    with profile(model, opt) as prof:
        _step(model, opt, batch, runs, setup.grad_accum, set_to_none, region, scaler)
    scale = setup.grad_accum / runs
    flops = {phase: round(prof.flops(phase) * scale) for phase in ("forward", "backward", "recompute")}
    at_peak = prof.bytes_at_peak()
    return Prediction(setup, {**{c: at_peak[c] for c in ORDER}, "total": prof.peak_bytes()}, flops, segments, prof)


def reserved(setup, steps=2, device="meta", amp_device=None):
    """What PyTorch's caching allocator would reserve for `setup`'s training (profiler/allocator.py), from the run's
    first byte: the model's weights, then `steps` whole steps, the first making the gradients and the optimizer's
    state as a run's first step does (predict's warm-up makes them unprofiled; what _checkpointing measures to cut
    the chain, before, is no part of the run). Returns the
    allocator after the run and its max_memory_reserved() after each step: what nvidia-smi would show, less the CUDA
    context (docs/will_it_fit.md compares the two). A segment once taken is kept, so the list only grows; from the
    second step on, each step finds the state the one before left, so the next adds nothing (tests/test_allocator.py)."""
    model, batch, _, opt, set_to_none, region, scaler = _build(setup, device, amp_device)
    alloc, per_step, seen = CachingAllocator(), [], 0
    with profile(model, opt) as prof:  # the weights first, in the model's order, as model.to('cuda') makes them
        opt.zero_grad(set_to_none=set_to_none)  # the Trainer's model.zero_grad() before its first step
        for _ in range(steps):
            _step(model, opt, batch, setup.grad_accum, setup.grad_accum, set_to_none, region, scaler)
            new = prof.buffer_lifetimes(since=seen)  # this step's births and deaths, through the allocator's rules
            seen += len(new)
            per_step.append(alloc.replay(new).max_memory_reserved())
    return alloc, per_step


def _build(setup, device, amp_device):
    """The model, its batch, the checkpointed segments, the optimizer and the step's switches for `setup`."""
    manual_seed(0)
    model = models.build(setup.model, device=device, dtype=DTYPES[setup.dtype],
                         **_software_config(setup.software, DTYPES[setup.dtype]), **setup.overrides)
    batch = models.example_batch(setup.model, setup.batch_size, setup.seq_len, device=device, **setup.overrides)
    segments = _checkpointing(model, setup.checkpointing, batch, setup.policy)
    opt = OPTIMIZERS[setup.optimizer](list(model.parameters()))
    set_to_none = setup.software.zero_grad == "none"
    low = PRECISIONS[setup.precision]
    amp_device = amp_device or ("cpu" if device == "cpu" else "cuda")
    scaler = GradScaler(device, enabled=low == "float16")
    lists = "1.9" if setup.software.gelu_float32 else None

    def region():
        if low is None:
            return contextlib.nullcontext()
        with backend.device(device):  # bfloat16 under CUDA's lists is allowed on 'meta' only (amp/autocast_mode.py)
            return autocast(amp_device, dtype=low) if lists is None else autocast_of(lists, amp_device, dtype=low)
    region()  # an unsupported pair (bfloat16 on a real 'cuda') is refused before the step
    return model, batch, segments, opt, set_to_none, region, scaler


def _warm_up(model, opt, set_to_none):
    """What a step before this one leaves behind: the optimizer's state (made by stepping once on zero gradients,
    which makes the same arrays as a real step's), and the gradients, zeroed in place or dropped."""
    for p in opt.params:
        p.grad = zeros_like(p)
    opt.step()
    opt.zero_grad(set_to_none=set_to_none)


def _step(model, opt, batch, runs, grad_accum, set_to_none, region, scaler):
    """One optimizer step (the module's docstring); a disabled scaler is the fp32 and bf16 loop, call for call."""
    for _ in range(runs):
        with region():
            loss = models.loss_of(model, batch)
        scaler.scale(loss / grad_accum).backward()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=set_to_none)


def _software_config(software, dtype):
    """The models' config fields that make them keep what that software kept."""
    return dict(attn_implementation=software.attention, softmax_keeps_input=software.softmax_keeps_input,
                dropout_mask=None if software.dropout_mask == "bool" else dtype)


def _checkpointing(model, how, batch, policy):
    """Set the model's block checkpointing for `how` under the named policy; returns the segments. ('sqrt' and
    'budget' cut where a whole-segment recompute would: schedules.py knows no policies.)"""
    if not isinstance(how, str):
        segments = [tuple(s) for s in how]
    else:
        with no_grad():
            blocks, x = models.blocks_and_input(model, batch)
        segments = block_segments(how, blocks, x)
    models.set_checkpointing(model, segments, getattr(checkpoint_policies, policy))
    return segments


# ----------------------------------------------------------------------------- the planner

def search(model, memory, batch_size, seq_len, optimizer="adamw", dtype="fp32", software=None, strategies=STRATEGIES,
           top=5, progress=None, policy="nothing_saveable", precision="fp32"):
    """Up to `top` steps that fit in `memory` bytes, for an optimizer batch of `batch_size`: micro-batches that
    divide it, accumulation making up the rest. `optimizer` and `precision` are a name or a list of names, searched
    with each strategy (a "way": precision, optimizer, strategy). Per way, the largest micro-batch that fits is
    found by bisection (memory grows with the micro-batch). First the best of each way, ranked by FLOPs per sample
    (least recompute first), then by the larger micro-batch (fewer, larger kernels), then in the order the lists
    give; then, to fill `top`, each way's next smaller micro-batch in the same order, and so on (they fit too, with
    more accumulation and about the same FLOPs per sample). Every checkpoint keeps what `policy` (a name in
    mg.checkpoint_policies) says. Returns (those steps, every step predicted)."""
    software = software or Software()
    sizes = [b for b in range(1, batch_size + 1) if batch_size % b == 0]
    listed = lambda x: [x] if isinstance(x, str) else list(x)  # noqa: E731
    ways = [(pr, o, how) for pr in listed(precision) for o in listed(optimizer) for how in strategies]
    tried, largest = [], {}  # largest: way -> (index in sizes of the largest micro-batch that fits, its step)

    def run(way, i):
        pr, o, how = way
        p = predict(Setup(model, sizes[i], seq_len, batch_size // sizes[i], how, o, dtype, software,
                          policy=policy if how != "none" else "nothing_saveable", precision=pr),
                    exact_accumulation=False)
        tried.append(p)
        if progress is not None:
            progress(p.setup)
        return p

    for way in ways:
        lo, hi = 0, len(sizes) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            p = run(way, mid)
            if p.bytes["total"] <= memory:
                largest[way], lo = (mid, p), mid + 1
            else:
                hi = mid - 1
    ranked = sorted(largest, key=lambda w: (round(largest[w][1].flops_per_sample), -largest[w][1].setup.batch_size,
                                            ways.index(w)))
    known = {(p.setup.precision, p.setup.optimizer, p.setup.checkpointing, p.setup.batch_size): p for p in tried}
    fits = []
    for smaller in range(len(sizes)):  # 0: each way's best; 1: its next smaller micro-batch; ...
        for way in ranked:
            i = largest[way][0] - smaller
            if i >= 0 and len(fits) < top:
                p = known.get((*way, sizes[i])) or run(way, i)
                if p.bytes["total"] <= memory:  # as memory grows with the micro-batch, always; checked all the same
                    fits.append(p)
    return fits, tried


# ----------------------------------------------------------------------------- reading what users type

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "K": 10**3, "M": 10**6, "G": 10**9}


def parse_bytes(text):
    """'24GB' (10^9), '24GiB' (2^30), '24000MB', '80e9' -> bytes. GB is the decimal unit, as GPU makers print it."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"memory {text!r}: write a number and a unit, e.g. 24GB (24 x 10^9 bytes), 24GiB (24 x 2^30) "
                         f"or 24000MB")
    n = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if not math.isfinite(n):  # 1e999 is inf as a float: no number of bytes
        raise ValueError(f"memory {text!r} is too large to be a number of bytes (beyond the largest float, about "
                         f"1.8e308); write a budget such as 24GB (24 x 10^9 bytes), 24GiB (24 x 2^30) or 24000MB")
    return int(n)


def parse_names(text, known, what, many=False):
    """'adamw' -> 'adamw'; with many=True (plan's search) 'adamw,sgd' -> ['adamw', 'sgd'] and 'any' -> all known."""
    names = (list(known) if text == "any" else [n.strip() for n in text.split(",")]) if many else [text]
    wrong = next((n for n in names if n not in known), None)
    if wrong is not None:
        close = difflib.get_close_matches(wrong, known, n=1)
        raise ValueError(f"{what} {text!r}: choose from {', '.join(known)}"
                         + (", a comma-separated list of them, or any (each one)" if many else "")
                         + (f" (did you mean {close[0]}?)" if close else ""))
    return names if many else names[0]


def gib(n):
    return f"{n / 2**30:.2f} GiB"


# ----------------------------------------------------------------------------- what the commands print

def describe(setup, software=True):
    s = setup
    how = {"none": "no checkpointing", "every": "every block checkpointed", "sqrt": "sqrt(n) segments of blocks",
           "budget": "the budgeted schedule"}.get(s.checkpointing, f"segments {s.checkpointing}") \
        if isinstance(s.checkpointing, str) else f"segments {list(s.checkpointing)}"
    if s.policy != "nothing_saveable":
        how += f", keeping {s.policy}"
    sw = s.software
    micro = f"{s.grad_accum} micro-batch{'' if s.grad_accum == 1 else 'es'}"  # how many, then how big: the lessons'
    step = (f"{s.model}: {micro} of {s.batch_size} x {s.seq_len} tokens per optimizer step (batch "
            f"{s.batch_size * s.grad_accum}), {how}, {s.optimizer}, "
            + (f"{s.dtype}" if s.precision == "fp32" else f"{s.precision} (float32 weights, autocast)"))
    if not software:
        return step
    return (f"{step}\nsoftware: zero_grad {'set_to_none' if sw.zero_grad == 'none' else 'in place (zeros)'}, dropout mask "
            f"{'1 byte' if sw.dropout_mask == 'bool' else 'in the activations dtype'}, {sw.attention} attention"
            + (", softmax keeps its input" if sw.softmax_keeps_input else "")
            + (", GELU in float32 under autocast (PyTorch < 1.10)" if sw.gelu_float32 else ""))


def table(prediction):
    """The step's peak by category, and its FLOPs by phase, as lines of text."""
    p = prediction
    lines = [describe(p.setup), "", f"{'peak of the step':<16}{'GiB':>10}{'bytes':>18}"]
    for c in ORDER + ("total",):
        lines.append(f"{c:<16}{p.bytes[c] / 2**30:>10.2f}{p.bytes[c]:>18,}")
    lines.append("(each category at the moment the total peaked; the allocator's reserve (--reserved), the CUDA "
                 "context and library workspaces come on top: docs/will_it_fit.md)")
    f = p.flops
    lines += ["", f"FLOPs: forward {f['forward']:.3e}, backward {f['backward']:.3e}, recompute {f['recompute']:.3e} "
                  f"({p.overhead:.0%} of forward + backward); {p.flops_per_sample:.3e} per sample"]
    return lines
