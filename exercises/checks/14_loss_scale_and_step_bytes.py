"""Checks of exercise 14.

update_scale: on four runs of mg.amp.GradScaler (infs and nans injected at chosen steps; growth and backoff of 2 and
0.5, 3 and 0.25; growth intervals of 3 and of 1; a scale of 2^126 growing into float32's edge), each call of the
learner's rule gets the scaler's scale and tracker before its update and must return exactly the scaler's after it
(the scale a float32 number, bit for bit; the tracker an int). A wrong result is compared with the usual mistakes:
the tracker not reset on an inf, or not after growing; growing one step late; backing off and growing at once; a
scale grown to inf, or tested for finiteness in float64.

step_bytes: a model of an embedding, a layer norm, and three linear layers, the middle one used twice, in two
sizes; one step of it (forward under mg.autocast('cpu', dtype) in float32, bfloat16 and float16, backward, AdamW)
under mg.profile: parameters, gradients and optimizer at their peak, and cast_weight_bytes(), each must equal the
learner's to the byte. A wrong count is compared with the usual mistakes (2-byte weights or gradients, one moment,
copies of the embedding or the layer norm, the shared weight cast twice, 4-byte copies) and named."""
import math

import numpy as np

import minigrad as mg
import minigrad.functional as F
from minigrad.grading import Failed, Question, require

TITLE = "a loss scaler's update rule, and a mixed-precision AdamW step's bytes by hand"
LESSON = 12
HINTS = ("Part 1 has three cases (an inf was found; a clean step that completes the interval; any other clean step) "
         "and each sets both outputs. Part 2: ask, for each category, what dtype it is in under autocast and how "
         "many arrays per parameter it holds; then which parameters get a copy, and how many.",
         "Part 1: on an inf, back off and count from 0; otherwise count one more clean step, and when the count "
         "reaches growth_interval, grow (keep the old scale if the new one is not finite as a float32) and count "
         "from 0. Part 2: weights, gradients and AdamW's two moments are float32 for every parameter; a copy of 2 "
         "bytes per element is made once for each parameter that a product (linear) reads, none without autocast.",
         "if found_inf: return np.float32(float(scale) * backoff_factor), 0; growth_tracker += 1; if growth_tracker "
         "== growth_interval: grown = np.float32(float(scale) * growth_factor); scale = grown if np.isfinite(grown) "
         "else scale; growth_tracker = 0. return np.float32(scale), growth_tracker. Bytes: n = sum of "
         "math.prod(shape); "
         "parameters 4n, gradients 4n, optimizer 8n, cast_weights 2 x the elements of parameters with 'linear' in "
         "their uses (0 if low_dtype is None).")
QUESTION = Question(18, tolerance=1e-9, wrong={
    16: "that is ZeRO's count, whose gradients are float16 (2 + 2 + 12); minigrad's gradients come back through the "
        "cast into the float32 weights, float32, and the copy is extra",
    20: "the copies are float16: 2 bytes each, not 4",
    14: "the weights stay float32 under autocast (4 bytes); the float16 copy comes on top of them",
    12: "AdamW keeps two moments, 8 bytes, and the copy, 2 bytes, is alive too"})

SCALER_RUNS = [  # (keyword arguments of GradScaler, iterations, the iterations whose gradients hold inf or nan)
    (dict(init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=3), 24, {2, 3, 9, 10, 11, 17}),
    (dict(init_scale=2.0 ** 10, growth_factor=3.0, backoff_factor=0.25, growth_interval=3), 20, {0, 4, 5, 12}),
    (dict(init_scale=2.0 ** 8, growth_factor=2.0, backoff_factor=0.5, growth_interval=1), 10, {3, 4, 7}),
    (dict(init_scale=2.0 ** 126, growth_factor=2.0, backoff_factor=0.5, growth_interval=2), 9, {6}),
]


# ----------------------------------------------------------------------------- part 1: the rule

def _trajectory(kw, iterations, infs):
    """Drive a real mg.amp.GradScaler: [(scale before, tracker before, found_inf, scale after, tracker after)]."""
    w = mg.nn.Parameter(mg.tensor(np.ones(3, dtype=np.float32), device="cpu"))
    opt = mg.optim.SGD([w], lr=0.0)
    scaler = mg.amp.GradScaler("cpu", **kw)
    calls = []
    for i in range(iterations):
        g = np.ones(3, dtype=np.float32)
        if i in infs:
            g[i % 3] = np.nan if i % 2 else np.inf
        before = (np.float32(scaler.get_scale()), scaler.state_dict()["_growth_tracker"])
        w.grad = mg.tensor(g * scaler.get_scale(), device="cpu")
        with np.errstate(over="ignore", invalid="ignore"):
            scaler.step(opt)
        scaler.update()
        calls.append((*before, i in infs, np.float32(scaler.get_scale()), scaler.state_dict()["_growth_tracker"]))
    return calls


def _mistakes(scale, tracker, found, grow, back, interval):
    """What the usual mistaken rules return for this call."""
    s = float(scale)
    with np.errstate(over="ignore"):
        grown = np.float32(s * grow)
    out = {}
    if found:
        out["no_reset_on_inf"] = (np.float32(s * back), tracker)
        out["keeps_counting_on_inf"] = (np.float32(s * back), tracker + 1)
    else:
        out["grows_late"] = (np.float32(s), tracker + 1)  # counts to growth_interval + 1 before it grows
        if tracker + 1 == interval:
            out["no_reset_after_growth"] = (grown if np.isfinite(grown) else np.float32(s), tracker + 1)
            out["grown_to_inf"] = (grown, 0)
    return out


_SAY = {
    "no_reset_on_inf": "on an inf the scale backed off but the growth tracker kept its count: an inf ends the run of "
                       "clean steps, so the count starts again from 0 (else the scale grows again too soon after "
                       "an overflow)",
    "keeps_counting_on_inf": "on an inf the step was counted as a clean one: it is not (it was skipped); back off and "
                             "count from 0",
    "grows_late": "the scale grew one clean step late: it grows on the step whose count REACHES growth_interval "
                  "(with growth_interval 1, on every clean step), and the tracker goes back to 0 then",
    "no_reset_after_growth": "the scale grew but the tracker was not reset: after growing, the count of clean steps "
                             "starts again from 0, so the next growth needs a whole new interval",
    "grown_to_inf": "the scale grew to inf: 2^127 x 2 is beyond float32's range (3.4e38; a Python float, float64, "
                    "holds it, so test the float32 number you return). A scale of inf would make every scaled "
                    "gradient inf; keep the old scale when the grown one is not finite",
}


def _check_rule(ex):
    for run, (kw, iterations, infs) in enumerate(SCALER_RUNS):
        for i, (scale, tracker, found, want_scale, want_tracker) in enumerate(_trajectory(kw, iterations, infs)):
            args = (scale, tracker, found, kw["growth_factor"], kw["backoff_factor"], kw["growth_interval"])
            where = (f"update_scale(scale={float(scale):g}, growth_tracker={tracker}, found_inf={found}, "
                     f"growth_factor={kw['growth_factor']}, backoff_factor={kw['backoff_factor']}, "
                     f"growth_interval={kw['growth_interval']}) (run {run + 1}, iteration {i})")
            with np.errstate(over="ignore"):
                got = ex.update_scale(*args)
            require(isinstance(got, tuple) and len(got) == 2,
                    f"{where} returned {got!r}: return a pair, (the new scale, the new growth tracker)")
            got_scale, got_tracker = got
            require(isinstance(got_scale, np.float32),
                    f"{where}: the scale came back as {type(got_scale).__name__} {got_scale!r}; return it as a "
                    f"float32 number, np.float32(...), as PyTorch keeps it (its range is float32's)")
            require(isinstance(got_tracker, (int, np.integer)) and not isinstance(got_tracker, bool),
                    f"{where}: the growth tracker came back as {got_tracker!r}; it is a count, an int")
            if got_scale == want_scale and got_tracker == want_tracker:
                continue
            for name, wrong in _mistakes(*args).items():
                if (wrong[0] == got_scale or (np.isnan(wrong[0]) and np.isnan(got_scale))) and \
                        wrong[1] == got_tracker and (wrong[0], wrong[1]) != (want_scale, want_tracker):
                    raise Failed(f"{where}: expected ({float(want_scale):g}, {want_tracker}), got "
                                 f"({float(got_scale):g}, {got_tracker}): {_SAY[name]}")
            raise Failed(f"{where}: expected ({float(want_scale):g}, {want_tracker}) as mg.amp.GradScaler gives, got "
                         f"({float(got_scale):g}, {got_tracker})")


# ----------------------------------------------------------------------------- part 2: the bytes

class _Net(mg.nn.Module):
    def __init__(self, vocab, width, hidden):
        super().__init__()
        self.emb = mg.nn.Embedding(vocab, width)
        self.ln = mg.nn.LayerNorm(width)
        self.up = mg.nn.Linear(width, hidden)
        self.mid = mg.nn.Linear(hidden, hidden, bias=False)  # used twice
        self.out = mg.nn.Linear(hidden, vocab)

    def forward(self, idx):
        h = self.up(self.ln(self.emb(idx))).tanh()
        h = self.mid(self.mid(h).tanh()).tanh()
        return self.out(h)


USES = {"emb": ("embedding",), "ln": ("layer_norm",), "up": ("linear",), "mid": ("linear", "linear"),
        "out": ("linear",)}
SIZES = [(11, 8, 12), (23, 16, 40)]
DTYPES = [None, "bfloat16", "float16"]


def _measure(size, low):
    mg.manual_seed(0)
    vocab = size[0]
    net = _Net(*size)
    opt = mg.optim.AdamW(net.parameters(), lr=1e-3)
    x, y = mg.randint(0, vocab, (4, 5), device="cpu"), mg.randint(0, vocab, (4, 5), device="cpu")
    net.to("cpu")
    with mg.profile(net, opt) as prof:
        with mg.autocast("cpu", dtype=getattr(mg, low) if low else None, enabled=low is not None):
            loss = F.cross_entropy(net(x).reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        opt.step()
    params = [(tuple(p.shape), USES[name.split(".")[0]]) for name, p in net.named_parameters()]
    measured = {c: prof.peak_bytes(c) for c in ("parameters", "gradients", "optimizer")}
    measured["cast_weights"] = prof.cast_weight_bytes()
    return params, measured


def _bytes_mistakes(params, low, n):
    linear = sum(math.prod(s) for s, u in params if "linear" in u)
    twice = sum(math.prod(s) * u.count("linear") for s, u in params)
    return {
        "parameters": {2 * n: "the weights stay float32 under autocast (the master copy the optimizer updates): "
                              "4 bytes each; the 2-byte copies are apart, in cast_weights"},
        "gradients": {2 * n: "the gradients come back through the cast records into the float32 weights: they are "
                             "float32, 4 bytes each"},
        "optimizer": {4 * n: "AdamW keeps TWO float32 moments per element (exp_avg and exp_avg_sq): 8 bytes",
                      16 * n: "AdamW's state is two float32 moments per element, 8 bytes; the weights and gradients "
                              "are counted in their own categories"},
        "cast_weights": {2 * n: "not every parameter is cast: on the CPU autocast casts what the products read "
                                "(linear here); the embedding is a lookup and the layer norm runs in its input's "
                                "dtype, float32 here",
                         2 * (n - sum(math.prod(s) for s, u in params if "layer_norm" in u)):
                             "the embedding is not a product: its weight is not cast (it is read by a lookup)",
                         2 * (linear + sum(math.prod(s) for s, u in params if "layer_norm" in u)):
                             "on the CPU layer_norm runs in its input's dtype, and here its input (the embedding's "
                             "output) is float32: its weight and bias are not cast",
                         2 * twice: "the weight used twice is cast ONCE per region: autocast caches the copy (NOTE "
                                    "[the weight-cast cache]); its second use hands back the same array",
                         4 * linear: "the copies are in the low precision: 2 bytes per element, not 4"},
    }


def _check_bytes(ex):
    for size in SIZES:
        for low in DTYPES:
            params, want = _measure(size, low)
            n = sum(math.prod(s) for s, _ in params)
            got = ex.step_bytes([(tuple(s), tuple(u)) for s, u in params], low)
            where = f"step_bytes(params of a model of {n:,} elements, {low!r})"
            require(isinstance(got, dict) and set(want) <= set(got),
                    f"{where} returned {got!r}: return a dict with the keys {', '.join(want)}")
            for key, value in want.items():
                if got[key] == value:
                    continue
                if low is None and key == "cast_weights":
                    raise Failed(f"{where}['cast_weights'] = {got[key]:,}, measured 0: without autocast nothing is "
                                 f"cast (low_dtype None: float32 throughout)")
                say = _bytes_mistakes(params, low, n)[key].get(got[key])
                raise Failed(f"{where}['{key}'] = {got[key]:,} bytes; mg.profile measured {value:,}"
                             + (f": {say}" if say else f". The parameters: {params}"))


def check(ex):
    _check_rule(ex)
    _check_bytes(ex)
