"""The PyTorch names a training script reaches for (issue 28, [habits]), each against PyTorch where it is installed:
the loss modules, nn.init's formulas, mg.from_numpy's shared memory, .cuda()/.cpu(), inference_mode, axis= in
reductions, mg.utils.checkpoint; and what a name minigrad does not offer says (did you mean, or what instead).
The learning-rate schedulers are tests/test_lr_scheduler.py; a whole training script, test_training_script.py."""
import math
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.backend import DeviceError


def host(t):
    return t.detach().cpu().numpy()


def pair(array, requires_grad=True):
    """The same float64 array as a minigrad tensor and a torch tensor."""
    torch = pytest.importorskip("torch")
    a = np.asarray(array, dtype=np.float64)
    return (mg.tensor(a, dtype="float64", requires_grad=requires_grad),
            torch.tensor(a, dtype=torch.float64, requires_grad=requires_grad))


def same_loss(ours, theirs, inputs):
    """Equal losses, and equal gradients of a random cotangent, to float64 rounding."""
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(host(ours), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)
    cot = np.random.default_rng(1).standard_normal(theirs.shape)
    ours.backward(mg.tensor(cot, dtype="float64"))
    theirs.backward(torch.tensor(cot, dtype=torch.float64))
    for a, b in inputs:
        np.testing.assert_allclose(host(a.grad), b.grad.numpy(), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- the loss modules

rng = np.random.default_rng(0)
LOGITS, CLASSES = rng.standard_normal((6, 4)), np.array([0, 3, 1, -100, 2, 3])
LOGITS_3D, CLASSES_3D = rng.standard_normal((2, 4, 3)), np.array([[0, 1, 3], [2, -100, 1]])
WEIGHT = np.array([0.5, 2.0, 1.0, 3.0])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("kwargs", [{}, {"weight": True}, {"label_smoothing": 0.2}, {"ignore_index": 3},
                                    {"weight": True, "label_smoothing": 0.1}])
@pytest.mark.parametrize("logits, classes", [(LOGITS, CLASSES), (LOGITS_3D, CLASSES_3D)], ids=["2d", "3d"])
def test_cross_entropy_loss_is_pytorchs(reduction, kwargs, logits, classes):
    torch = pytest.importorskip("torch")
    x, tx = pair(logits)
    kw, tkw = dict(kwargs), dict(kwargs)
    if kw.pop("weight", None):
        kw["weight"], tkw["weight"] = mg.tensor(WEIGHT, dtype="float64"), torch.tensor(WEIGHT)
    if "ignore_index" in kw:  # the padding is that class now; -100 would be out of range, in both libraries
        classes = np.where(classes == -100, 1, classes)
    ours = nn.CrossEntropyLoss(reduction=reduction, **kw)(x, mg.tensor(classes))
    theirs = torch.nn.CrossEntropyLoss(reduction=reduction, **tkw)(tx, torch.tensor(classes))
    same_loss(ours, theirs, [(x, tx)])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_is_pytorchs_and_is_cross_entropy_after_log_softmax(reduction, weighted):
    torch = pytest.importorskip("torch")
    x, tx = pair(LOGITS_3D)
    w, tw = (mg.tensor(WEIGHT, dtype="float64"), torch.tensor(WEIGHT)) if weighted else (None, None)
    ours = nn.NLLLoss(weight=w, reduction=reduction)(x.log_softmax(1), mg.tensor(CLASSES_3D))
    theirs = torch.nn.NLLLoss(weight=tw, reduction=reduction)(tx.log_softmax(1), torch.tensor(CLASSES_3D))
    np.testing.assert_allclose(host(ours), host(F.cross_entropy(x, mg.tensor(CLASSES_3D), w, reduction=reduction)),
                               rtol=1e-12)
    same_loss(ours, theirs, [(x, tx)])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", ["MSELoss", "L1Loss"])
def test_mse_and_l1_losses_are_pytorchs(name, reduction):
    torch = pytest.importorskip("torch")
    a, ta = pair(rng.standard_normal((5, 3)))
    b, tb = pair(rng.standard_normal((5, 3)))
    same_loss(getattr(nn, name)(reduction=reduction)(a, b), getattr(torch.nn, name)(reduction=reduction)(ta, tb),
              [(a, ta), (b, tb)])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weight, pos_weight", [(None, None), ((3,), None), (None, (3,)), ((5, 1), (3,))])
def test_bce_with_logits_loss_is_pytorchs_and_stable(reduction, weight, pos_weight):
    torch = pytest.importorskip("torch")
    logits = rng.standard_normal((5, 3)) * 4
    logits[0, 0], logits[1, 1] = 80.0, -80.0  # where exp overflows a naive formula
    x, tx = pair(logits)
    y, ty = pair(rng.random((5, 3)), requires_grad=False)
    kw, tkw = {}, {}
    for key, shape in (("weight", weight), ("pos_weight", pos_weight)):
        if shape is not None:
            values = rng.random(shape) + 0.5
            kw[key], tkw[key] = mg.tensor(values, dtype="float64"), torch.tensor(values)
    ours = nn.BCEWithLogitsLoss(reduction=reduction, **kw)(x, y)
    theirs = torch.nn.BCEWithLogitsLoss(reduction=reduction, **tkw)(tx, ty)
    assert np.isfinite(host(ours)).all()
    same_loss(ours, theirs, [(x, tx)])


def test_loss_modules_hold_their_weights_as_buffers_and_say_what_is_wrong():
    loss = nn.CrossEntropyLoss(weight=mg.ones(4))
    assert [name for name, _ in loss.named_buffers()] == ["weight"] and "weight" in loss.state_dict()
    assert list(nn.CrossEntropyLoss().named_buffers()) == []
    with pytest.raises(TypeError, match=r"weight must be a Tensor.*mg.tensor"):
        nn.CrossEntropyLoss(weight=[1.0, 2.0])
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none', got 'avg'"):
        nn.MSELoss(reduction="avg")
    with pytest.warns(UserWarning, match="reduction='sum' instead"):  # PyTorch's legacy pair, read as PyTorch reads it
        assert nn.L1Loss(size_average=False).reduction == "sum"
    with pytest.warns(UserWarning, match="reduction='none'"):
        assert nn.NLLLoss(reduce=False).reduction == "none"
    with pytest.raises(ValueError, match="target size"):
        nn.BCEWithLogitsLoss()(mg.zeros(4, 1), mg.zeros(4))
    with pytest.warns(UserWarning, match="different to the input size"):
        nn.MSELoss()(mg.zeros(4, 1), mg.zeros(4))
    with pytest.raises(TypeError, match="class indices"):
        nn.NLLLoss()(mg.zeros(4, 3), mg.zeros(4))
    with pytest.raises(mg.ops.ShapeError, match=r"nll_loss: got log-probabilities and targets of shapes"):
        nn.NLLLoss()(mg.zeros(4, 3), mg.zeros(3, dtype="int64"))


# ----------------------------------------------------------------------------- nn.init

def test_fans_and_gains_are_pytorchs():
    torch = pytest.importorskip("torch")
    for shape in [(3, 5), (7, 2, 3), (4, 6, 2, 2)]:
        assert nn.init._calculate_fan_in_and_fan_out(mg.zeros(*shape)) == \
            torch.nn.init._calculate_fan_in_and_fan_out(torch.zeros(*shape))
    for args in [("linear",), ("sigmoid",), ("tanh",), ("relu",), ("leaky_relu",), ("leaky_relu", 0.2),
                 ("leaky_relu", math.sqrt(5)), ("selu",), ("conv2d",)]:
        assert nn.init.calculate_gain(*args) == torch.nn.init.calculate_gain(*args)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.kaiming_uniform_(mg.zeros(5))
    with pytest.raises(ValueError, match="Unsupported nonlinearity gelu"):
        nn.init.calculate_gain("gelu")
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        nn.init.kaiming_normal_(mg.zeros(3, 4), mode="fan_avg")
    with pytest.raises(TypeError, match="one generator"):
        nn.init.normal_(mg.zeros(3), generator=object())


@pytest.mark.parametrize("name, kwargs, shape", [
    ("kaiming_uniform_", {}, (300, 200)),
    ("kaiming_uniform_", {"a": math.sqrt(5)}, (300, 200)),                       # nn.Linear's own
    ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"}, (300, 200)),
    ("kaiming_normal_", {}, (300, 200)),
    ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}, (100, 30, 3)),
    ("xavier_uniform_", {}, (300, 200)),
    ("xavier_uniform_", {"gain": 5 / 3}, (300, 200)),
    ("xavier_normal_", {"gain": 2.0}, (300, 200)),
    ("trunc_normal_", {"std": 0.02}, (300, 200)),                                # a and b are values: +-2
    ("trunc_normal_", {"mean": 1.0, "std": 1.0, "a": 0.5, "b": 2.0}, (300, 200)),
])
def test_init_draws_pytorchs_distribution(name, kwargs, shape):
    """The same distribution as PyTorch's (the generators differ, so not the same numbers): the bounds exactly where
    PyTorch has them, the mean and std within sampling error of 60,000 draws."""
    torch = pytest.importorskip("torch")
    mg.manual_seed(0)
    torch.manual_seed(0)
    ours = host(getattr(nn.init, name)(mg.zeros(*shape), **kwargs)).ravel()
    theirs = getattr(torch.nn.init, name)(torch.zeros(*shape, dtype=torch.float32), **kwargs).numpy().ravel()
    scale = theirs.std()
    assert abs(ours.mean() - theirs.mean()) < 0.03 * scale
    assert abs(ours.std() - scale) < 0.02 * scale
    if name.endswith("uniform_"):
        fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(mg.zeros(*shape))
        if name.startswith("kaiming"):
            fan = fan_out if kwargs.get("mode") == "fan_out" else fan_in
            bound = math.sqrt(3) * nn.init.calculate_gain(kwargs.get("nonlinearity", "leaky_relu"),
                                                          kwargs.get("a", 0)) / math.sqrt(fan)
        else:
            bound = kwargs.get("gain", 1.0) * math.sqrt(6 / (fan_in + fan_out))
        for values in (ours, theirs):
            assert values.max() <= bound and values.min() >= -bound and values.max() > 0.999 * bound
    if name == "trunc_normal_":
        lo, hi = kwargs.get("a", -2.0), kwargs.get("b", 2.0)
        assert ours.min() >= lo and ours.max() <= hi
        if hi - lo < 4 * kwargs.get("std", 1.0):  # bounds within the bulk: the extremes sit at them in both
            assert abs(ours.min() - theirs.min()) < 0.01 * scale and abs(ours.max() - theirs.max()) < 0.01 * scale


def _truncated_normal_moments(mean, std, a, b):
    """The mean and std of N(mean, std^2) truncated to [a, b], and its CDF, from the normal's pdf and CDF."""
    std = abs(std)
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2            # noqa: E731
    al, be = (a - mean) / std, (b - mean) / std
    z = cdf(be) - cdf(al)
    m = (pdf(al) - pdf(be)) / z
    var = 1 + (al * pdf(al) - be * pdf(be)) / z - m * m
    return mean + std * m, std * math.sqrt(var), lambda x: (np.vectorize(cdf)((x - mean) / std) - cdf(al)) / z


@pytest.mark.parametrize("kwargs", [dict(a=3.5, b=5.0), dict(mean=1.0, std=0.5, a=-3.0, b=-2.0),
                                    dict(mean=0.0, std=-1.0, a=-1.0, b=1.5), dict(mean=2.0, std=3.0, a=1.9, b=2.1),
                                    dict(mean=0.0, std=1.0, a=-0.5, b=4.0)])
def test_trunc_normal_draws_a_far_tail_window_as_pytorch_does(kwargs):
    """[a, b] = [3.5, 5] holds 0.02% of N(0, 1): minigrad refused it (too little to draw from by rejection), where
    PyTorch 2.13 draws it (NOTE [two ways to a truncated normal]). Now every value lies in [a, b], the mean and std
    are the truncated normal's within sampling error (5 standard errors of 20,000 draws), the largest gap between
    the empirical CDF and the truncated normal's is within the Kolmogorov-Smirnov bound at 0.1%, and PyTorch's
    draws, judged the same way, agree (a negative std is |std|, as in PyTorch's)."""
    torch = pytest.importorskip("torch")
    kwargs = {"mean": 0.0, "std": 1.0, **kwargs}
    mean, std, cdf = _truncated_normal_moments(**kwargs)
    mg.manual_seed(0)
    torch.manual_seed(0)
    n = 20_000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the mean is more than 2 std from [a, b] in some: PyTorch's warning
        ours = host(nn.init.trunc_normal_(mg.zeros(n, dtype=mg.float64), **kwargs))
        theirs = torch.nn.init.trunc_normal_(torch.zeros(n, dtype=torch.float64), **kwargs).numpy()
    for values in (ours, theirs):
        assert values.min() >= kwargs["a"] and values.max() <= kwargs["b"]
        assert abs(values.mean() - mean) < 5 * std / math.sqrt(n)
        assert abs(values.std() - std) < 5 * std / math.sqrt(2 * n) * 1.5  # the std's error, kurtosis allowed for
        x = np.sort(values)
        gap = np.max(np.maximum(np.arange(1, n + 1) / n - cdf(x), cdf(x) - np.arange(n) / n))
        assert gap < 1.95 / math.sqrt(n)  # Kolmogorov-Smirnov at 0.1%


def test_trunc_normal_with_std_0_raises_at_once_as_pytorchs():
    """mean=3, std=0, a=-2, b=2 never returned: every draw of N(3, 0) is 3, outside [a, b], and the rejection loop
    drew again forever. PyTorch raises at once (ZeroDivisionError, from (b - mean) / std); minigrad raises the same
    error, saying what to do, before any draw, so this test needs no timeout. a == b fills with a, as PyTorch's."""
    torch = pytest.importorskip("torch")
    for mean in (3.0, 0.0):
        with pytest.raises(ZeroDivisionError, match="float division by zero"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch warns that mean=3 is more than 2 std from [a, b], then raises
            torch.nn.init.trunc_normal_(torch.zeros(4), mean=mean, std=0.0, a=-2.0, b=2.0)
        with pytest.raises(ZeroDivisionError, match=r"std=0 .*nn.init.constant_\(tensor, "):
            nn.init.trunc_normal_(mg.zeros(4), mean=mean, std=0.0, a=-2.0, b=2.0)
    assert (host(nn.init.trunc_normal_(mg.zeros(4), a=2.0, b=2.0)) == 2.0).all()
    assert (torch.nn.init.trunc_normal_(torch.zeros(4), a=2.0, b=2.0) == 2.0).all()
    with pytest.raises(RuntimeError, match="from=2.0 > to=1.0|from=2 > to=1"):
        torch.nn.init.trunc_normal_(torch.zeros(4), a=2.0, b=1.0)
    with pytest.raises(ValueError, match="a <= b, got a=2.0, b=1.0"):
        nn.init.trunc_normal_(mg.zeros(4), a=2.0, b=1.0)


def test_init_writes_in_place_and_returns_the_tensor():
    w = nn.Linear(4, 3).weight
    for fill in (nn.init.kaiming_uniform_, nn.init.kaiming_normal_, nn.init.xavier_uniform_, nn.init.xavier_normal_,
                 nn.init.trunc_normal_):
        before = host(w).copy()
        assert fill(w) is w and w.requires_grad and not np.array_equal(before, host(w))
    assert nn.init.constant_(w, 0.5) is w and (host(w) == 0.5).all()
    with pytest.warns(UserWarning, match="zero-element"):
        nn.init.kaiming_uniform_(mg.zeros(0, 3))
    from minigrad.nn import init
    import minigrad.nn.init as init_module
    assert init is init_module is nn.init


# ----------------------------------------------------------------------------- from_numpy, .cuda() / .cpu()

def test_from_numpy_shares_memory_both_ways_as_torchs():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = mg.from_numpy(a)
    assert t.dtype == mg.float64 and t.device == "cpu" and t.shape == (2, 3) and not t.requires_grad
    a[0, 0] = 10.0
    assert t[0, 0].item() == 10.0  # a write through NumPy shows in the tensor
    with mg.no_grad():
        t.mul_(2)
    assert a[1, 2] == 10.0          # and one through the tensor in the array
    assert np.shares_memory(t.numpy(), a)
    torch = pytest.importorskip("torch")
    b = np.ones(3, dtype=np.int32)
    assert mg.from_numpy(b).dtype == mg.int32 and torch.from_numpy(b).dtype == torch.int32


def test_from_numpy_refuses_what_it_cannot_share():
    with pytest.raises(TypeError, match=r"expected np.ndarray \(got list\).*mg.tensor"):
        mg.from_numpy([1.0, 2.0])
    with pytest.raises(TypeError, match="can't convert np.ndarray of type complex128"):
        mg.from_numpy(np.zeros(2, dtype=np.complex128))
    with pytest.raises(ValueError, match="negative"):
        mg.from_numpy(np.arange(4.0)[::-1])
    frozen = np.zeros(2)
    frozen.flags.writeable = False
    with pytest.warns(UserWarning, match="not writable"):
        mg.from_numpy(frozen)


def test_cuda_and_cpu_move_a_tensor_and_a_module():
    x, lin = mg.randn(2, 3, device="cpu"), nn.Linear(3, 2, device="cpu")
    assert x.cpu() is x and lin.cpu() is lin
    if not mg.cuda_is_available():
        with pytest.raises(DeviceError, match="needs CuPy"):
            x.cuda()
        with pytest.raises(DeviceError, match="needs CuPy"):
            lin.cuda()
        return
    y = x.cuda()
    assert y.device == "cuda" and y.cpu().device == "cpu"
    np.testing.assert_array_equal(host(y), host(x))
    assert lin.cuda() is lin and lin.weight.device == "cuda"
    with pytest.raises(ValueError, match="one GPU device"):
        x.cuda(1)


# ----------------------------------------------------------------------------- inference_mode

def test_inference_mode_is_no_grad_as_a_context_and_a_decorator():
    w = mg.randn(3, requires_grad=True)
    with mg.inference_mode():
        assert not mg.is_grad_enabled() and not (w * 2).requires_grad
    assert mg.is_grad_enabled()
    with mg.inference_mode(False):  # PyTorch's: changes nothing
        assert mg.is_grad_enabled() and (w * 2).requires_grad

    @mg.inference_mode
    def bare():
        return (w * 2).requires_grad, mg.is_grad_enabled()

    @mg.inference_mode()
    def called(depth):
        return called(depth - 1) if depth else (w * 2).requires_grad

    assert bare() == (False, False) and called(3) is False and mg.is_grad_enabled()
    with pytest.raises(ZeroDivisionError):
        with mg.inference_mode():
            1 / 0
    assert mg.is_grad_enabled()
    with mg.no_grad():
        with mg.inference_mode(False):
            assert mg.is_grad_enabled()  # inference_mode(False) turns recording back on, as PyTorch's does
        assert not mg.is_grad_enabled()
    with pytest.raises(TypeError, match="True or False"):
        mg.inference_mode("yes")


# ----------------------------------------------------------------------------- axis= and keepdims= in reductions

@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "var", "std",
                                  "logsumexp", "softmax", "log_softmax", "cumsum"])
def test_reductions_take_axis_as_pytorch_does(name):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(3).standard_normal((3, 4))
    x, tx = pair(a, requires_grad=False)
    ours, theirs = getattr(x, name)(axis=1), getattr(tx, name)(axis=1)
    np.testing.assert_allclose(host(ours), theirs.numpy(), rtol=1e-12)
    np.testing.assert_array_equal(host(getattr(x, name)(axis=1)), host(getattr(x, name)(dim=1)))
    if name not in ("softmax", "log_softmax", "cumsum"):
        assert getattr(x, name)(axis=0, keepdims=True).shape == tuple(getattr(tx, name)(axis=0, keepdims=True).shape)
    with pytest.raises(TypeError, match="both dim= and its alias axis="):
        getattr(x, name)(dim=1, axis=1)


def test_max_and_min_along_an_axis_give_values_and_indices():
    x = mg.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    values, indices = x.max(axis=1)
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    assert x.argmax(axis=1).tolist() == [1, 0] and x.min(axis=0)[1].tolist() == [0, 1, 0]


# ----------------------------------------------------------------------------- mg.utils.checkpoint

def test_utils_checkpoint_is_torchs_module_path_to_the_same_functions():
    from minigrad.utils.checkpoint import checkpoint, checkpoint_sequential
    import minigrad.utils.checkpoint as module
    assert mg.utils.checkpoint is module and checkpoint is mg.checkpoint
    assert checkpoint_sequential is mg.checkpoint_sequential
    mg.manual_seed(0)
    layers = [nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4), nn.Tanh()]
    x = mg.randn(3, 4, requires_grad=True)
    checkpoint_sequential(layers, 2, x, use_reentrant=False).sum().backward()
    ours = [host(p.grad) for layer in layers for p in layer.parameters()] + [host(x.grad)]
    for layer in layers:
        layer.zero_grad()
    x.grad = None
    nn.Sequential(*layers)(x).sum().backward()
    for a, b in zip(ours, [host(p.grad) for layer in layers for p in layer.parameters()] + [host(x.grad)]):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(AttributeError, match="policy="):
        module.create_selective_checkpoint_contexts


# ----------------------------------------------------------------------------- a name minigrad does not offer

@pytest.mark.parametrize("where, name, says", [
    (mg, "from_numpi", "did you mean 'from_numpy'?"),
    (mg, "Inference_Mode", "did you mean 'inference_mode'?"),
    (mg, "CrossEntropyLoss", "it is mg.nn.CrossEntropyLoss"),
    (mg, "kaiming_uniform_", "it is mg.nn.init.kaiming_uniform_"),
    (mg, "Adam", "nor has mg.optim: write AdamW"),
    (mg, "compile", "no compiler"),
    (mg, "softmax", "it is mg.functional.softmax"),
    (mg, "exp", "Tensor method: x.exp"),
    (mg, "gpt", "import minigrad.gpt"),
    (nn, "CrossEntropyLos", "did you mean 'CrossEntropyLoss'?"),
    (nn, "mseloss", "did you mean 'MSELoss'?"),
    (nn, "Conv2d", "no convolutions"),
    (nn, "LSTM", "no recurrent layers"),
    (nn, "BCELoss", "BCEWithLogitsLoss"),
    (nn.init, "kaiming_uniform", "did you mean 'kaiming_uniform_'"),
    (nn.init, "orthogonal_", "kaiming_uniform_"),
    (mg.optim, "Adam", "weight_decay=0.0"),
    (mg.optim, "RMSprop", "SGD (momentum, nesterov), AdamW, Adafactor and AdamW8bit"),
    (mg.optim, "adamw", "did you mean 'AdamW'?"),
    (mg.optim.lr_scheduler, "CyclicLR", "LambdaLR"),
    (F, "conv2d", "no convolutions"),
    (F, "binary_cross_entropy", "binary_cross_entropy_with_logits"),
    (F, "crossentropy", "did you mean 'cross_entropy'?"),
    (mg.utils, "data", "no DataLoader"),
])
def test_a_missing_name_says_what_to_use_instead(where, name, says, monkeypatch):
    if where is mg and name == "gpt":  # as before any `import minigrad.gpt` (another test may have made one)
        monkeypatch.delattr(mg, "gpt", raising=False)
    with pytest.raises(AttributeError) as e:
        getattr(where, name)
    assert says in str(e.value) and f"no attribute {name!r}" in str(e.value)


def test_pythons_own_probes_get_a_plain_attribute_error():
    assert not hasattr(mg, "__wrapped__") and not hasattr(nn, "__array_interface__")
    assert getattr(mg.optim, "_nothing", None) is None


def test_an_import_of_a_missing_module_still_fails_as_python_says():
    with pytest.raises(ModuleNotFoundError):
        import minigrad.utils.data  # noqa: F401


def test_is_inference_mode_enabled_as_pytorchs():
    assert not mg.is_inference_mode_enabled()
    with mg.inference_mode():
        assert mg.is_inference_mode_enabled()
        with mg.inference_mode(False):      # PyTorch: inference_mode(False) inside turns it off
            assert not mg.is_inference_mode_enabled() and mg.is_grad_enabled()
        assert mg.is_inference_mode_enabled() and not mg.is_grad_enabled()
    with mg.no_grad():
        assert not mg.is_inference_mode_enabled()   # no_grad is not inference mode, in PyTorch either
    with pytest.raises(ZeroDivisionError):
        with mg.inference_mode():
            1 / 0
    assert not mg.is_inference_mode_enabled()       # restored on error
    torch = pytest.importorskip("torch")
    with torch.inference_mode():
        assert torch.is_inference_mode_enabled()
        with torch.inference_mode(False):
            assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()
    with torch.no_grad():
        assert not torch.is_inference_mode_enabled()
        with torch.inference_mode(False):
            assert torch.is_grad_enabled()


def test_import_minigrad_nn_functional_as_f_works_as_in_pytorch():
    import minigrad.nn.functional as F
    from minigrad.nn.functional import cross_entropy
    assert F is mg.functional and cross_entropy is mg.functional.cross_entropy
