"""Checks of exercise 6: the learner's closed forms against what mg.profile measures on real MLPs of
seeded random depths, widths, batches and dtypes. Each count is compared layer by layer (the
learner's function on the first k layers' sizes against the ledger after k layers), so a failure
names the first layer whose saves or products were miscounted, and what that layer measured."""
import numpy as np

import minigrad as mg
from minigrad.grading import Failed, Question, rng

TITLE = "the ledger by hand: an MLP's activation bytes and matmul FLOPs from its shapes"
LESSON = 2
HINTS = ("Draw one layer's arrays: x, Linear's output, Tanh's output. Which does each record keep? Then draw two "
         "layers, and look at where the first layer's Tanh output goes next.",
         "The Tanh output of layer i is the input that Linear i + 1 saves: one buffer, counted once. So the step "
         "keeps the data batch and each layer's output, once each. In backward, each Linear makes dW = g^T x (always) "
         "and dx = g W (only when its input needs a gradient: not the data batch), each costing what the forward "
         "product costs.",
         "activation_bytes: batch * sum(sizes) * itemsize. matmul_flops: per layer 2 * batch * a * b for (a, b) in "
         "zip(sizes[:-1], sizes[1:]); forward = their sum; backward = 2 * forward less the first layer's product.")
QUESTION = Question(524288, wrong={0: "the data batch's gradient is a product too: dx = g W, for the first layer",
                                   1048576: "that is two products; only dx = g W of the first layer is new "
                                            "(dW was made already)"})


def _configs():
    r = rng(6)
    yield 4, [8, 16, 16, 4], "float32"
    for _ in range(6):
        depth = int(r.integers(1, 6))
        yield (int(r.integers(1, 17)), [int(w) for w in r.integers(1, 49, depth + 1)],
               str(r.choice(["float32", "float64"])))


def _step(batch, sizes, dtype):
    """One step of a Linear -> Tanh MLP under mg.profile: per layer, the activation bytes held after
    its Linear and after its Tanh, and the forward matmul FLOPs so far; then the peak and the totals."""
    mg.manual_seed(0)
    layers = [(mg.nn.Linear(a, b).to(dtype=dtype), mg.nn.Tanh()) for a, b in zip(sizes[:-1], sizes[1:])]
    x = mg.randn(batch, sizes[0], dtype=dtype)  # the data batch: needs no gradient
    with mg.profile() as prof:
        base = prof.timeline()[0]["activations"]
        per_layer, h = [], x
        for linear, tanh in layers:
            h = linear(h)
            after_linear = prof.current_bytes("activations") - base
            h = tanh(h)
            per_layer.append((after_linear, prof.current_bytes("activations") - base,
                              prof.flops("forward", op="matmul")))
        h.sum().backward()
    return dict(layers=per_layer, peak=prof.peak_bytes("activations") - base,
                forward=prof.flops("forward", op="matmul"), backward=prof.flops("backward", op="matmul"))


def _layers(k):
    return "that 1 layer" if k == 1 else f"those {k} layers"


def _matched(k):
    return "" if k == 1 else "Layer 1 matched. " if k == 2 else f"Layers 1 to {k - 1} matched. "


def _model(sizes, dtype):
    return " -> ".join(f"Linear({a}, {b}) -> Tanh" for a, b in zip(sizes[:-1], sizes[1:])) + f", {dtype}"


def _as_int(name, value, call):
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        value = int(value)
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise Failed(f"{call} returned {value!r} ({type(value).__name__}): {name} is a whole number, return an int")
    return int(value)


def _activation_hint(batch, sizes, k, itemsize, extra):
    """What a difference of `extra` bytes in layer k's count most likely is."""
    a, b = sizes[k - 1], sizes[k]
    if k > 1 and extra == batch * a * itemsize:
        return (f" The extra {extra} bytes are a {batch} x {a} array: Linear({a}, {b})'s input is the Tanh output "
                f"of layer {k - 1}, the same array saved by two records, so it is one buffer, counted once.")
    if k == 1 and extra == -batch * a * itemsize:
        return (f" The missing {-extra} bytes are the data batch ({batch} x {a}): Linear({a}, {b}) saves its input "
                f"for dW = g^T x even though the batch itself needs no gradient.")
    if extra == a * b * itemsize or extra == (a * b + b) * itemsize:
        return (f" The extra {extra} bytes are the size of Linear({a}, {b})'s parameters: a weight saved for "
                f"dx = g W is still a parameter in the ledger, not an activation.")
    return ""


def _check_activations(ex, batch, sizes, dtype, measured):
    itemsize = np.dtype(dtype).itemsize
    previous = 0
    for k in range(1, len(sizes)):
        call = f"activation_bytes(batch={batch}, sizes={sizes[:k + 1]}, itemsize={itemsize})"
        got = _as_int("a byte count", ex.activation_bytes(batch, sizes[:k + 1], itemsize), call)
        after_linear, after_tanh, _ = measured["layers"][k - 1]
        before = measured["layers"][k - 2][1] if k > 1 else 0
        if got != after_tanh:
            a, b = sizes[k - 1], sizes[k]
            ratio = (f" That is your count times {itemsize}: count bytes, not elements (multiply by itemsize)."
                     if got * itemsize == after_tanh else
                     f" That is your count times {itemsize} / 4: this model is {dtype}, {itemsize} bytes per element; "
                     f"use the itemsize argument." if got * itemsize == after_tanh * 4 else "")
            raise Failed(
                f"{call} = {got} bytes, but mg.profile measured {after_tanh} bytes of activations after the forward "
                f"of {_layers(k)} ({_model(sizes[:k + 1], dtype)}; a data batch of {batch} that needs no "
                f"gradient). " + _matched(k)
                + f"Layer {k}, measured: Linear({a}, {b}) added {after_linear - before} bytes, its Tanh added "
                f"{after_tanh - after_linear} bytes (a {batch} x {b} array is {batch * b * itemsize} bytes); your "
                f"count added {got - previous} bytes for that layer." + (ratio or _activation_hint(
                    batch, sizes, k, itemsize, (got - previous) - (after_tanh - before))))
        previous = got
    if measured["peak"] != previous:
        raise Failed(f"activation_bytes(batch={batch}, sizes={sizes}, itemsize={itemsize}) = {previous}, but the "
                     f"peak over the whole step, backward included, was {measured['peak']} bytes")


def _products(n, batch, a, b):
    """n FLOPs, in products of Linear(a, b)'s size where they divide evenly."""
    unit = 2 * batch * a * b
    if n and n % unit == 0:
        return f"{n // unit} product{'s' if n != unit else ''} of 2 x {batch} x {a} x {b} = {unit} FLOPs"
    if n and unit % n == 0:
        return f"{n} FLOPs (1/{unit // n} of a product of 2 x {batch} x {a} x {b} = {unit} FLOPs)"
    return f"{n} FLOPs"


def _check_flops(ex, batch, sizes, dtype, prefixes):
    previous = (0, 0)
    for k in range(1, len(sizes)):
        call = f"matmul_flops(batch={batch}, sizes={sizes[:k + 1]})"
        got = ex.matmul_flops(batch, sizes[:k + 1])
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise Failed(f"{call} returned {got!r}: return a pair (forward FLOPs, backward FLOPs)")
        got = tuple(_as_int("a FLOP count", g, call) for g in got)
        measured = (prefixes[k - 1]["forward"], prefixes[k - 1]["backward"])
        before = (prefixes[k - 2]["forward"], prefixes[k - 2]["backward"]) if k > 1 else (0, 0)
        for phase, i in (("forward", 0), ("backward", 1)):
            if got[i] != measured[i]:
                a, b = sizes[k - 1], sizes[k]
                raise Failed(
                    f"{call}: {phase} = {got[i]}, but mg.profile measured {measured[i]} matmul FLOPs in the "
                    f"{phase} of {_layers(k)} ({_model(sizes[:k + 1], dtype)}; a data batch of {batch} that "
                    f"needs no gradient). " + _matched(k)
                    + f"Layer {k}, Linear({a}, {b}), measured {_products(measured[i] - before[i], batch, a, b)}; "
                    f"your count added {_products(got[i] - previous[i], batch, a, b)}."
                    + (" In backward, the first layer makes dW = g^T x only: dx = g W would be the data batch's "
                       "gradient, which nobody needs." if phase == "backward" and k == 1 else ""))
        previous = got


def check(ex):
    for batch, sizes, dtype in _configs():
        prefixes = [_step(batch, sizes[:k + 1], dtype) for k in range(1, len(sizes))]
        _check_activations(ex, batch, sizes, dtype, prefixes[-1])
        _check_flops(ex, batch, sizes, dtype, prefixes)
