"""Checks of exercise 12: adamw_step against mg.optim.AdamW (PyTorch's rule), 5 steps in float64 on
three parameters whose gradients have very different sizes (about 1, 1e-4 and 1e-2), with weight
decay and then without it and with other betas and eps. After every step the parameters and the state
(m, v) must equal AdamW's to 1e-12 relative, the gradients must be left as they were, and the
parameters must have changed in place.

A wrong step is compared with the usual mistakes, simulated from the same start: weight decay added to
the gradient (Adam with L2), decay not scaled by lr, decay after the update, no decay, no bias
correction (of m, of v, of both), eps inside the square root, eps added before v's bias correction.
The message names the one it matches, and gives the ratio of the learner's update to AdamW's."""
import math

import numpy as np

import minigrad as mg
from minigrad.grading import Failed, Question, require, rng

TITLE = "one AdamW step: decoupled weight decay, bias correction, eps outside the square root"
LESSON = 1
HINTS = ("Two things decide most of it: which arrays you may write into (params, and the state's m and v: yes; the "
         "gradients: no), and how to change an array so that the caller sees it (in place, not by binding a name).",
         "Per parameter: p *= 1 - lr * weight_decay; then m and v in place (m *= b1; m += (1 - b1) * g, and v with g * "
         "g), so that state keeps them; then the bias-corrected update, with eps added after the square root.",
         "b1, b2 = betas; bias1, bias2 = 1 - b1 ** step, 1 - b2 ** step; for p, g, s in zip(params, grads, state): m, v "
         "= s['exp_avg'], s['exp_avg_sq']; p *= 1 - lr * weight_decay; m *= b1; m += (1 - b1) * g; v *= b2; v += (1 - "
         "b2) * g * g; p -= lr * (m / bias1) / (np.sqrt(v / bias2) + eps).")
QUESTION = Question(0.1 / 0.001 ** 0.5, tolerance=0.005, wrong={
    1: "at step 1, m = (1 - b1) g and v = (1 - b2) g^2; without correction the step is lr (1 - b1) g / sqrt(1 - b2) |g|, "
       "with it lr g / |g|",
    0.1: "that is the correction of m alone; v's, under the square root, works the other way",
    31.62: "that is 1 / sqrt(1 - b2), v's correction alone; m's, 1 - b1, multiplies it"})

STEPS = 5
SHAPES = [(4, 3), (5,), (2, 3, 2)]
SCALES = [1.0, 1e-4, 1e-2]  # the size of each parameter's gradients: at 1e-4, sqrt(v) is near sqrt(eps)
CONFIGS = [dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1),
           dict(lr=3e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.0)]


def _simulate(start, grads, cfg, steps, mistake=None):
    """The parameters after `steps` steps of AdamW, or of AdamW with one of the usual mistakes."""
    lr, (b1, b2), eps, wd = cfg["lr"], cfg["betas"], cfg["eps"], cfg["weight_decay"]
    ps = [p.copy() for p in start]
    ms, vs = [np.zeros_like(p) for p in ps], [np.zeros_like(p) for p in ps]
    for t in range(1, steps + 1):
        for p, g, m, v in zip(ps, grads[t - 1], ms, vs):
            if mistake == "l2":
                g = g + wd * p
            elif mistake == "decay_without_lr":
                p *= 1 - wd
            elif mistake not in ("decay_after", "no_decay"):
                p *= 1 - lr * wd
            m[...] = b1 * m + (1 - b1) * g
            v[...] = b2 * v + (1 - b2) * g * g
            c1 = 1.0 if mistake in ("no_bias_correction", "no_bias1") else 1 - b1 ** t
            c2 = 1.0 if mistake in ("no_bias_correction", "no_bias2") else 1 - b2 ** t
            if mistake == "eps_inside_sqrt":
                denom = np.sqrt(v / c2 + eps)
            elif mistake == "eps_before_correction":
                denom = (np.sqrt(v) + eps) / math.sqrt(c2)
            else:
                denom = np.sqrt(v / c2) + eps
            p -= lr * (m / c1) / denom
            if mistake == "decay_after":
                p *= 1 - lr * wd
    return ps


def _mistakes(cfg, t):
    lr, (b1, b2), eps, wd = cfg["lr"], cfg["betas"], cfg["eps"], cfg["weight_decay"]
    return {
        "l2": ("weight_decay * p was added to the GRADIENT: that is Adam with an L2 penalty (torch.optim.Adam's "
               "weight_decay), not AdamW. Through the gradient the decay goes into m and v and is divided by "
               "sqrt(v_hat) like the rest of it: where the gradient is small (params[1] and params[2] here), "
               "weight_decay * p dominates it and Adam's normalisation turns it into a step of about lr towards 0, "
               "whatever weight_decay is; where the gradient is large the decay is barely felt. AdamW decouples "
               "it: p *= 1 - lr * weight_decay, on the weights, before the Adam update; the gradient stays as it is"),
        "decay_without_lr": (f"the weights were multiplied by 1 - weight_decay = {1 - wd:g}; AdamW (PyTorch's, and "
                             f"minigrad's) scales the decay by the learning rate: p *= 1 - lr * weight_decay = "
                             f"{1 - lr * wd:g}"),
        "decay_after": ("the weight decay was applied AFTER the Adam update; AdamW decays first (p *= 1 - lr * "
                        "weight_decay), then updates. The two differ by lr * weight_decay times the update: small, "
                        "but far above rounding"),
        "no_decay": (f"weight_decay was ignored: AdamW first multiplies each parameter by 1 - lr * weight_decay "
                     f"({1 - lr * wd:g} here)"),
        "no_bias_correction": (f"there is no bias correction: m and v start at 0, so at step t they are too small by "
                               f"the factors (1 - b1^t) and (1 - b2^t). At step 1 the update without them is "
                               f"(1 - b1) / sqrt(1 - b2) = {(1 - b1) / math.sqrt(1 - b2):.3g} times AdamW's. Divide: "
                               f"m_hat = m / (1 - b1 ** step), v_hat = v / (1 - b2 ** step)"),
        "no_bias1": (f"v is bias-corrected but m is not: the update is (1 - b1^t) times AdamW's ({1 - b1 ** t:.3g} at "
                     f"step {t}). Divide m by 1 - b1 ** step too"),
        "no_bias2": (f"m is bias-corrected but v is not: the update is 1 / sqrt(1 - b2^t) times AdamW's "
                     f"({1 / math.sqrt(1 - b2 ** t):.3g} at step {t}). Divide v by 1 - b2 ** step too"),
        "eps_inside_sqrt": (f"eps is INSIDE the square root, sqrt(v_hat + eps); AdamW adds it outside, sqrt(v_hat) + "
                            f"eps. For params[1], whose gradients are about {SCALES[1]:g}, sqrt(v_hat) is about "
                            f"{SCALES[1]:g}: sqrt(v_hat + eps) is then about {math.sqrt(SCALES[1] ** 2 + eps):.3g}, "
                            f"sqrt(v_hat) + eps about {SCALES[1] + eps:.6g}"),
        "eps_before_correction": ("eps was added to sqrt(v) BEFORE v's bias correction (the Adam paper's 'efficient' "
                                  "form, lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t); p -= lr_t * m / (sqrt(v) + eps)); "
                                  "PyTorch's AdamW adds eps after it: sqrt(v) / sqrt(1 - b2^t) + eps"),
    }


def _rel(a, b):
    scale = float(np.abs(b).max())
    return float(np.abs(a - b).max()) / scale if scale else float(np.abs(a - b).max())


def _worst(a, b):
    i = tuple(int(k) for k in np.unravel_index(np.abs(a - b).argmax(), b.shape))
    return f"at index {i} expected {float(b[i])!r}, got {float(a[i])!r}"


def _explain(ps, before, returned, ref, start, grads, cfg, t, k, err):
    """Why the learner's params after step t differ from AdamW's (ref), as a message."""
    where = (f"step {t} of {STEPS} (lr={cfg['lr']}, betas={cfg['betas']}, eps={cfg['eps']}, "
             f"weight_decay={cfg['weight_decay']}): params[{k}] (gradients of about {SCALES[k]:g}) differs from "
             f"mg.optim.AdamW's by {err:.1e} relative (1e-12 allowed), {_worst(ps[k], ref[k])}")
    if all(np.array_equal(p, b) for p, b in zip(ps, before)):
        got = f" and returned a {type(returned).__name__}" if returned is not None else ""
        return (f"{where}. adamw_step left every parameter unchanged{got}: update them IN PLACE (p *= ..., "
                f"p -= ...). `p = p - ...` only rebinds a local name: the caller's array, which the model holds, "
                f"never changes")
    if not all(np.isfinite(p).all() for p in ps):
        return (f"{where}. It holds nan or inf: is step 1 on the first call used as t (1 - b1 ** 0 is 0), and is "
                f"eps added to the denominator?")
    decay = 1 - cfg["lr"] * cfg["weight_decay"]
    if cfg["weight_decay"] and all(_rel(p, b * decay) < 1e-12 for p, b in zip(ps, before)):
        return (f"{where}. Only the weight decay reached the parameters: the Adam update was computed but not "
                f"written into them. `p = p - ...` makes a new array; write p -= ... to change the caller's")
    for mistake, sentence in _mistakes(cfg, t).items():
        wrong = _simulate(start, grads, cfg, t, mistake)
        if all(_rel(w, r) < 1e-12 for w, r in zip(wrong, ref)):
            continue  # the same as AdamW here (e.g. L2 when weight_decay is 0)
        if all(_rel(p, w) < 1e-9 for p, w in zip(ps, wrong)):
            ratio = ""
            if mistake.startswith(("no_bias", "eps")):  # mistakes in the size of the Adam update: measure it
                decayed = before[k] * decay
                ratio = (f" (at step {t} your update of params[{k}] after the decay is "
                         f"{np.median((ps[k] - decayed) / (ref[k] - decayed)):.3g} times AdamW's, the median over "
                         f"its elements)")
            return f"{where}. It matches AdamW with one usual mistake{ratio}: {sentence}"
    return (f"{where}. It matches none of the usual mistakes (weight decay through the gradient, a missing bias "
            f"correction, eps inside the square root). Compare your lines with the six in the exercise's docstring")


def _check_state(state, opt_state, t, k):
    for key, name, formula in (("exp_avg", "m", "b1 * m + (1 - b1) * g"),
                               ("exp_avg_sq", "v", "b2 * v + (1 - b2) * g * g")):
        want = opt_state[key]
        require(isinstance(state[k], dict) and key in state[k],
                f"step {t}: state[{k}] has no '{key}': keep {name} in state[{k}]['{key}'] (PyTorch's name)")
        got = np.asarray(state[k][key])
        require(got.shape == want.shape, f"step {t}: state[{k}]['{key}'] has shape {got.shape}, expected {want.shape}")
        if not _rel(got, want) <= 1e-12:
            if not got.any():
                raise Failed(f"step {t}: the parameters are right but state[{k}]['{key}'] ({name}) is still all zeros: "
                             f"`{name} = {formula}` makes a new array and leaves the one in state as it was. Update "
                             f"it in place ({name} *= ...; {name} += ...) or store it back: "
                             f"state[{k}]['{key}'] = {name}")
            raise Failed(f"step {t}: state[{k}]['{key}'] ({name}) differs from AdamW's by {_rel(got, want):.1e} "
                         f"relative, {_worst(got, want)}: {name} = {formula}, kept between steps in state")


def _run(ex, cfg, seed):
    r = rng(seed)
    start = [r.standard_normal(s) for s in SHAPES]
    grads = [[r.standard_normal(s) * c for s, c in zip(SHAPES, SCALES)] for _ in range(STEPS)]
    ref = [mg.nn.Parameter(mg.tensor(p.copy(), device="cpu")) for p in start]  # NumPy, as the learner's
    opt = mg.optim.AdamW(ref, **cfg)
    ps = [p.copy() for p in start]
    state = [{"exp_avg": np.zeros_like(p), "exp_avg_sq": np.zeros_like(p)} for p in ps]
    for t in range(1, STEPS + 1):
        before = [p.copy() for p in ps]
        given = [g.copy() for g in grads[t - 1]]
        arrays = list(ps)
        returned = ex.adamw_step(ps, given, state, cfg["lr"], cfg["betas"], cfg["eps"], cfg["weight_decay"], t)
        for k, (p, a) in enumerate(zip(ps, arrays)):
            require(p is a, f"step {t}: adamw_step put a new array in params[{k}]; the model holds the old one, "
                    f"which did not change. Update the arrays themselves, in place: p *= ..., p -= ...")
        for k, (g, want) in enumerate(zip(given, grads[t - 1])):
            require(np.array_equal(g, want),
                    f"step {t}: adamw_step changed grads[{k}] ({_worst(g, want)}): the gradients are read only. "
                    f"`g += weight_decay * p` writes into the caller's gradient (and is Adam's L2, not AdamW's "
                    f"decay); compute with new arrays, e.g. g2 = g + ..., or leave g alone")
        for p, g in zip(ref, grads[t - 1]):
            p.grad = mg.tensor(g.copy(), device="cpu")
        opt.step()
        want = [p.detach().numpy() for p in ref]
        for k, (p, w) in enumerate(zip(ps, want)):
            require(p.shape == w.shape and p.dtype == w.dtype,
                    f"step {t}: params[{k}] is now {p.dtype} of shape {p.shape}, expected {w.dtype} of shape {w.shape}")
        errors = [_rel(p, w) for p, w in zip(ps, want)]
        k = int(np.argmax(errors))  # the worst parameter: where a mistake shows most
        if not errors[k] <= 1e-12:
            raise Failed(_explain(ps, before, returned, want, start, grads, cfg, t, k, errors[k]))
        for k, p in enumerate(ref):
            _check_state(state, opt.state[p], t, k)


def check(ex):
    _run(ex, CONFIGS[0], 12)
    try:
        _run(ex, CONFIGS[1], 120)
    except Failed as e:
        raise Failed(f"{e}. (The first set of hyperparameters passed: does every one of lr, betas, eps and "
                     f"weight_decay come from the arguments, none from a constant?)") from None
