"""nn.Module against torch.nn: what a training script calls on a model behaves as in PyTorch.

Sequential slicing keeps the layers' names; containers refuse what is not a module and say what to write;
requires_grad_, apply, register_buffer (persistent or not), add_module, get_submodule, float/double/half;
named_modules and state_dict with shared modules and tied weights; ModuleDict as nanoGPT uses it;
BatchNorm1d(momentum=None). Each PyTorch comparison skips where torch is not installed.
"""
import copy
from collections import OrderedDict

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.tensor import recomputing

from on_device import to_host


def torch_nn():
    return pytest.importorskip("torch").nn


def chain(lib):
    return lib.Sequential(lib.Linear(2, 3), lib.ReLU(), lib.Linear(3, 4), lib.Tanh(), lib.Linear(4, 1))


# ----------------------------------------------------------------------------- Sequential slicing

def test_a_slice_keeps_the_original_layers_and_names():
    m = chain(nn)
    tail = m[2:]
    assert isinstance(tail, nn.Sequential) and len(tail) == 3
    assert tail[0] is m[2] and tail[-1] is m[4] and list(tail) == [m[2], m[3], m[4]]
    params = dict(tail.named_parameters())
    assert list(params) == ["2.weight", "2.bias", "4.weight", "4.bias"]
    assert params["2.weight"] is m[2].weight and params["4.bias"] is m[4].bias
    assert list(tail.state_dict()) == list(params)
    assert "(2): Linear" in repr(tail) and "(0)" not in repr(tail)
    assert m[::2][1] is m[2] and m[1:3][1:][0] is m[2]  # a slice of a slice still counts by position
    x = mg.randn(5, 2)
    np.testing.assert_array_equal(m[2:](m[:2](x)).detach().numpy(), m(x).detach().numpy())


@pytest.mark.torch
def test_slice_names_match_pytorch():
    tnn = torch_nn()
    for idx in (slice(2, None), slice(None, 3), slice(1, 4), slice(None, None, 2), slice(-2, None)):
        ours, theirs = chain(nn)[idx], chain(tnn)[idx]
        assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
        assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
        assert list(ours.state_dict()) == list(theirs.state_dict())


def test_sequential_from_an_ordered_dict_uses_its_names():
    m = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 3)), ("act", nn.Tanh()), ("out", nn.Linear(3, 1))]))
    assert m.fc is m[0] and m.out is m[-1]
    assert [n for n, _ in m.named_parameters()] == ["fc.weight", "fc.bias", "out.weight", "out.bias"]
    assert [n for n, _ in m[1:].named_parameters()] == ["out.weight", "out.bias"]
    x = mg.randn(4, 2)
    np.testing.assert_array_equal(m(x).detach().numpy(), m.out(m.act(m.fc(x))).detach().numpy())
    with pytest.raises(TypeError, match=r"Sequential: argument 0 is a dict.*OrderedDict"):
        nn.Sequential({"fc": nn.Linear(2, 3)})


def test_sequential_append():
    m = nn.Sequential(nn.Linear(2, 3))
    assert m.append(nn.Tanh()) is m and len(m) == 2 and isinstance(m[1], nn.Tanh)
    assert [n for n, _ in m.named_children()] == ["0", "1"]


@pytest.mark.torch
def test_the_containers_edits_return_what_pytorchs_return():
    """Sequential.insert returned None; PyTorch's returns the Sequential (so that edits chain), while its
    ModuleList.insert returns None. Each edit of both containers, side by side with PyTorch's."""
    tnn = torch_nn()

    def returned(lib, kind):
        n = nn if lib == "mg" else tnn
        c = getattr(n, kind)(*([n.ReLU()] if kind == "Sequential" else [[n.ReLU()]]))
        out = {"append": c.append(n.Tanh()), "insert": c.insert(1, n.GELU()), "extend": c.extend([n.ReLU()])}
        out["pop"] = c.pop(0)
        return {k: "self" if v is c else (type(v).__name__ if v is not None else None) for k, v in out.items()}, \
            [type(m).__name__ for m in c]

    for kind in ("Sequential", "ModuleList"):
        assert returned("mg", kind) == returned("torch", kind)
    assert returned("mg", "Sequential")[0]["insert"] == "self"


# ----------------------------------------------------------------------------- what is not a module

@pytest.mark.parametrize("build, message", [
    (lambda: nn.Sequential(nn.Tanh), r"^Sequential: argument 0 is the class Tanh, not a module; write nn\.Tanh\(\)$"),
    (lambda: nn.Sequential(nn.Linear(2, 2), nn.Linear),
     r"^Sequential: argument 1 is the class Linear, not a module; write nn\.Linear\(\.\.\.\)$"),
    (lambda: nn.Sequential(3), r"^Sequential: argument 0 is 3 \(type int\), not a module; pass layers such as"),
    (lambda: nn.Sequential(OrderedDict(act=nn.Tanh)), r"^Sequential: entry 'act' is the class Tanh"),
    (lambda: nn.Sequential(mg.Tensor.tanh), r"^Sequential: argument 0 is the function tanh, not a module; write a "
                                            r"Module whose forward calls it"),
    (lambda: nn.ModuleList([nn.Tanh]), r"^ModuleList: item 0 is the class Tanh, not a module; write nn\.Tanh\(\)$"),
    (lambda: nn.ModuleList([nn.ReLU(), "relu"]), r"^ModuleList: item 1 is 'relu' \(type str\)"),
    (lambda: nn.ModuleList(nn.Tanh()), r"^ModuleList: expected an iterable of modules, got one Tanh; "
                                       r"write ModuleList\(\[module\]\)"),
    (lambda: nn.ModuleList().append(nn.GELU), r"^ModuleList: item 0 is the class GELU, not a module; write nn\.GELU"),
    (lambda: nn.ModuleDict({"act": nn.Tanh}), r"^ModuleDict: entry 'act' is the class Tanh"),
    (lambda: nn.Module().add_module("act", nn.Tanh), r"^add_module\('act', \.\.\.\): the module is the class Tanh"),
])
def test_containers_refuse_what_is_not_a_module(build, message):
    with pytest.raises(TypeError, match=message):
        build()


def test_a_user_defined_class_is_named_without_the_nn_prefix():
    class Block(nn.Module):
        def __init__(self, width):
            self.fc = nn.Linear(width, width)

    with pytest.raises(TypeError, match=r"the class Block, not a module; write Block\(\.\.\.\)$"):
        nn.Sequential(Block)


@pytest.mark.torch
def test_pytorch_refuses_the_same_arguments():
    tnn = torch_nn()
    for build in (lambda: tnn.Sequential(tnn.Tanh), lambda: tnn.Sequential(3), lambda: tnn.ModuleList([tnn.Tanh]),
                  lambda: tnn.Sequential({"fc": tnn.Linear(2, 3)})):
        with pytest.raises(TypeError):
            build()


# ----------------------------------------------------------------------------- shared modules, tied weights

def test_a_shared_module_is_walked_once_but_shown_and_saved_under_each_name():
    lin = nn.Linear(2, 2)
    m = nn.Sequential(lin, nn.ReLU(), lin)
    assert [n for n, _ in m.named_modules()] == ["", "0", "1"]
    assert [n for n, _ in m.named_modules(remove_duplicate=False)] == ["", "0", "1", "2"]
    assert [n for n, _ in m.named_children()] == ["0", "1"]
    assert [n for n, _ in m.named_parameters()] == ["0.weight", "0.bias"]
    assert [n for n, _ in m.named_parameters(remove_duplicate=False)] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert list(m.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert "(2): Linear" in repr(m) and len(m) == 3
    x = mg.randn(3, 2)
    np.testing.assert_array_equal(m(x).detach().numpy(), lin(lin(x).relu()).detach().numpy())  # it runs twice


def tied(lib):
    """nanoGPT's layout: a ModuleDict transformer, an lm_head tied to the token embedding, a causal-mask buffer."""
    class Attn(lib.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = lib.Linear(4, 12)
            ones = (mg if lib is nn else pytest.importorskip("torch")).ones(3, 3)
            self.register_buffer("bias", ones.tril().reshape(1, 1, 3, 3))

    class Block(lib.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = lib.LayerNorm(4)
            self.attn = Attn()

    class GPT(lib.Module):
        def __init__(self):
            super().__init__()
            self.transformer = lib.ModuleDict(dict(
                wte=lib.Embedding(5, 4), drop=lib.Dropout(0.0), h=lib.ModuleList([Block() for _ in range(2)]),
                ln_f=lib.LayerNorm(4)))
            self.lm_head = lib.Linear(4, 5, bias=False)
            self.transformer.wte.weight = self.lm_head.weight

    return GPT()


def test_a_tied_weight_is_one_parameter_saved_under_both_names():
    m = tied(nn)
    assert m.transformer["wte"] is m.transformer.wte and "h" in m.transformer and len(m.transformer) == 4
    assert list(m.transformer) == ["wte", "drop", "h", "ln_f"]
    names = [n for n, _ in m.named_parameters()]
    assert "transformer.wte.weight" in names and "lm_head.weight" not in names
    sd = m.state_dict()
    assert "lm_head.weight" in sd and "transformer.h.1.attn.bias" in sd
    np.testing.assert_array_equal(to_host(sd["lm_head.weight"]), to_host(sd["transformer.wte.weight"]))
    other = tied(nn)
    sd["lm_head.weight"] = sd["transformer.wte.weight"] = np.full((5, 4), 0.5, np.float32)
    other.load_state_dict(sd)
    assert other.lm_head.weight is other.transformer.wte.weight and (other.lm_head.weight.detach().numpy() == 0.5).all()


@pytest.mark.torch
def test_names_of_a_nanogpt_layout_match_pytorch():
    ours, theirs = tied(nn), tied(torch_nn())
    for method in ("named_modules", "named_children", "named_parameters", "named_buffers"):
        assert [n for n, _ in getattr(ours, method)()] == [n for n, _ in getattr(theirs, method)()], method
    assert ([n for n, _ in ours.named_parameters(prefix="model")]
            == [n for n, _ in theirs.named_parameters(prefix="model")])
    assert [n for n, _ in ours.lm_head.named_parameters(recurse=False)] == ["weight"]
    assert list(ours.parameters(recurse=False)) == [] == list(theirs.parameters(recurse=False))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.transformer.items()] == [n for n, _ in theirs.transformer.items()]
    lin, tlin = nn.Linear(2, 2), torch_nn().Linear(2, 2)
    ours, theirs = nn.Sequential(lin, nn.ReLU(), lin), torch_nn().Sequential(tlin, torch_nn().ReLU(), tlin)
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours, theirs = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)), torch_nn().Sequential(
        torch_nn().Linear(2, 3), torch_nn().BatchNorm1d(3))
    assert list(ours.state_dict()) == list(theirs.state_dict())  # module by module: parameters, then buffers


def test_parameters_buffers_and_modules_walk_as_their_named_forms_do():
    """NOTE [unnamed walks] (nn.py): the nameless walks give the named ones' tensors, in their order, each once."""
    lin = nn.Linear(2, 2)
    shared = nn.Sequential(lin, nn.ReLU(), lin, nn.ModuleList([nn.BatchNorm1d(2), lin]))
    for model in (tied(nn), shared, nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))):
        for recurse in (True, False):
            for plain, named in (("parameters", "named_parameters"), ("buffers", "named_buffers")):
                got = list(getattr(model, plain)(recurse=recurse))
                want = [t for _, t in getattr(model, named)(recurse=recurse)]
                assert [id(t) for t in got] == [id(t) for t in want], (plain, recurse)
        assert [id(m) for m in model.modules()] == [id(m) for _, m in model.named_modules()]
    assert len(list(shared.parameters())) == 4 and len(list(shared.buffers())) == 3  # lin once; BatchNorm's three


def test_a_remembered_walk_sees_every_change_to_the_tree():
    """NOTE [unnamed walks] (nn.py): parameters() is remembered between calls, and stands only while nothing changed."""
    def walk(model):
        got = [id(p) for p in model.parameters()]
        assert got == [id(p) for _, p in model.named_parameters()]  # the named walk remembers nothing
        return got
    inner = nn.Module()
    inner.blocks = []                       # a plain list, empty: no children yet
    model = nn.Sequential(nn.Linear(2, 2), inner)
    first = walk(model)
    assert walk(model) == first and len(first) == 2
    inner.blocks.append(nn.Linear(2, 3))    # in place: no attribute is set
    assert len(walk(model)) == 4
    inner.blocks[0] = nn.Linear(2, 4, bias=False)  # replaced in place
    assert len(walk(model)) == 3 and id(inner.blocks[0].weight) in walk(model)
    inner.extra = nn.Linear(1, 1)           # a new child, deep in the tree
    assert len(walk(model)) == 5
    model[0].weight = nn.Parameter(mg.zeros(2, 2))  # a parameter replaced
    assert id(model[0].weight) in walk(model)
    del inner.extra
    assert len(walk(model)) == 3
    model[0].bias = None
    assert len(walk(model)) == 2
    inner.blocks.clear()
    assert len(walk(model)) == 1 and len(list(inner.parameters())) == 0
    assert len(list(model.parameters(recurse=False))) == 0  # each (kind, recurse) remembered on its own
    assert len(list(model[0].parameters(recurse=False))) == 1
    twin = copy.deepcopy(model)  # a copy remembers its own tensors, not the original's
    assert walk(twin) != walk(model) and len(walk(twin)) == len(walk(model))


def test_module_list_slice_is_a_module_list_numbered_from_zero():
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(4)])
    part = ml[1:3]
    assert isinstance(part, nn.ModuleList) and list(part) == [ml[1], ml[2]]
    assert [n for n, _ in part.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert ml.extend([nn.Tanh()]) is ml and len(ml) == 5


def test_module_dict_set_and_delete():
    d = nn.ModuleDict()
    d["fc"] = nn.Linear(2, 2)
    d.update([("act", nn.Tanh())])
    assert d.keys() == ["fc", "act"] and d.values() == [d.fc, d.act]
    del d["fc"]
    assert list(d) == ["act"] and "fc" not in d
    with pytest.raises(KeyError):
        d["fc"]
    with pytest.raises(KeyError, match="attribute 'train' already exists"):
        d["train"] = nn.Tanh()  # it would hide the method


# ----------------------------------------------------------------------------- requires_grad_, apply

def test_requires_grad_freezes_and_unfreezes():
    m = chain(nn)
    assert m[0].requires_grad_(False) is m[0]
    assert not any(p.requires_grad for p in m[0].parameters())
    m(mg.randn(4, 2)).sum().backward()
    assert m[0].weight.grad is None and m[2].weight.grad is not None
    assert m.requires_grad_() is m and all(p.requires_grad for p in m.parameters())


def test_apply_visits_children_first_then_self():
    m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Tanh(), nn.Linear(2, 1)))
    seen = []
    assert m.apply(seen.append) is m
    assert seen == [m[0], m[1][0], m[1][1], m[1], m]


def visit_order(lib):
    lin = lib.Linear(2, 2)
    model = lib.Sequential(lin, lib.Sequential(lib.Tanh(), lin, lib.Linear(2, 1)), lin)
    names = {id(m): n for n, m in model.named_modules()}
    seen = []
    model.apply(seen.append)
    return [names[id(m)] for m in seen]


def test_apply_reaches_a_shared_module_from_each_parent():
    # the root holds lin twice ('0', '2') but visits it once; the inner Sequential visits it again
    assert visit_order(nn) == ["0", "1.0", "0", "1.2", "1", ""]


@pytest.mark.torch
def test_apply_order_matches_pytorch():
    assert visit_order(nn) == visit_order(torch_nn())


def test_apply_initialises_like_nanogpt():
    def init_weights(module):
        if isinstance(module, nn.Linear):
            module.weight.data = mg.full(module.weight.shape, 0.25).data
            if module.bias is not None:
                module.bias.data = mg.zeros(*module.bias.shape).data

    m = tied(nn)
    m.apply(init_weights)
    assert (m.transformer.h[0].attn.c_attn.weight.detach().numpy() == 0.25).all()
    assert (m.transformer.wte.weight.detach().numpy() == 0.25).all()  # tied to lm_head


# ----------------------------------------------------------------------------- buffers, registration

class WithBuffers(nn.Module):
    def __init__(self):
        self.fc = nn.Linear(2, 2)
        self.register_buffer("mask", mg.ones(2, 2).tril())
        self.register_buffer("cache", mg.zeros(2), persistent=False)
        self.register_buffer("steps", mg.tensor(0, dtype="int64"))
        self.register_buffer("empty", None)


def test_non_persistent_buffers_move_but_are_not_saved():
    m = WithBuffers()
    assert [n for n, _ in m.named_buffers()] == ["mask", "cache", "steps"]
    assert list(m.state_dict()) == ["mask", "steps", "fc.weight", "fc.bias"]  # own state before the children's
    m.to("float64")
    assert m.mask.dtype == m.cache.dtype == np.float64 and m.steps.dtype == np.int64
    m.cache = mg.ones(2, dtype="float64")  # reassigning keeps it non-persistent, as in PyTorch
    assert "cache" not in m.state_dict()
    sd = m.state_dict()
    other = WithBuffers().to("float64")
    assert other.load_state_dict(sd) == ([], []) and not other.cache.numpy().any()  # not saved, so not loaded
    sd["cache"] = np.ones(2)
    with pytest.raises(RuntimeError, match=r"unexpected keys \['cache'\]"):
        other.load_state_dict(sd)
    m.register_buffer("cache", m.cache, persistent=True)
    assert "cache" in m.state_dict()


@pytest.mark.torch
def test_buffer_names_and_state_dict_match_pytorch():
    torch = pytest.importorskip("torch")

    class Theirs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(2, 2)
            self.register_buffer("mask", torch.ones(2, 2).tril())
            self.register_buffer("cache", torch.zeros(2), persistent=False)
            self.register_buffer("steps", torch.tensor(0))
            self.register_buffer("empty", None)

    ours, theirs = WithBuffers(), Theirs()
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_register_buffer_and_add_module_refuse_bad_names_and_values():
    m = nn.Module()
    with pytest.raises(KeyError, match=r"register_buffer: the name must be non-empty and contain no '\.'"):
        m.register_buffer("a.b", mg.zeros(1))
    with pytest.raises(KeyError, match=r"register_buffer: attribute 'train' already exists on Module"):
        m.register_buffer("train", mg.zeros(1))
    with pytest.raises(KeyError, match=r"'_mask' starts with '_'"):
        m.register_buffer("_mask", mg.zeros(1))
    with pytest.raises(TypeError, match=r"register_buffer: 'w' is a Parameter.*register_parameter"):
        m.register_buffer("w", nn.Parameter(mg.zeros(1)))
    with pytest.raises(TypeError, match=r"register_buffer: 'x' must be a Tensor or None, got list"):
        m.register_buffer("x", [1.0])
    with pytest.raises(TypeError, match=r"register_parameter: 'w' must be an nn.Parameter or None, got Tensor"):
        m.register_parameter("w", mg.zeros(1))
    with pytest.raises(TypeError, match=r"add_module: the name must be a str, got int"):
        m.add_module(0, nn.Tanh())
    m.add_module("fc", nn.Linear(1, 1))
    with pytest.raises(KeyError, match=r"register_buffer: attribute 'fc' already exists"):
        m.register_buffer("fc", mg.zeros(1))


def test_add_module_register_module_register_parameter():
    m = nn.Module()
    m.add_module("fc", nn.Linear(2, 3))
    m.register_module("act", nn.Tanh())
    m.register_parameter("scale", nn.Parameter(mg.ones(3)))
    m.register_parameter("shift", None)
    assert [n for n, _ in m.named_children()] == ["fc", "act"]
    assert [n for n, _ in m.named_parameters()] == ["scale", "fc.weight", "fc.bias"]
    new = nn.Linear(2, 3)
    m.add_module("fc", new)  # replacing a child is allowed
    assert m.fc is new and m.shift is None


def test_get_submodule_walks_dotted_paths_and_names_the_missing_part():
    m = tied(nn)
    assert m.get_submodule("") is m
    assert m.get_submodule("transformer.h.1.attn") is m.transformer.h[1].attn
    assert m.get_submodule("lm_head") is m.lm_head
    with pytest.raises(AttributeError, match=r"get_submodule\('transformer\.h\.5\.attn'\): ModuleList at "
                                             r"'transformer\.h' has no submodule '5'; its children are \['0', '1'\]"):
        m.get_submodule("transformer.h.5.attn")
    with pytest.raises(AttributeError, match=r"get_submodule\('encoder'\): GPT has no submodule 'encoder'; its "
                                             r"children are \['transformer', 'lm_head'\]"):
        m.get_submodule("encoder")
    with pytest.raises(AttributeError, match=r"'weight' of Linear at 'lm_head' is a Parameter, not a module"):
        m.get_submodule("lm_head.weight")


def test_get_submodule_through_a_plain_list_of_modules():
    class Net(nn.Module):
        def __init__(self):
            self.layers = [nn.Linear(2, 2), nn.Tanh()]

    net = Net()
    assert net.get_submodule("layers.1") is net.layers[1]
    with pytest.raises(AttributeError, match=r"has no submodule '2'"):
        net.get_submodule("layers.2")
    with pytest.raises(AttributeError, match=r"'layers' is a list of modules, not a module; add an index, as in "
                                             r"'layers\.0'"):
        net.get_submodule("layers")


# ----------------------------------------------------------------------------- float, double, half, to

def test_float_double_half_cast_floating_state_and_return_self():
    m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    assert m.double() is m
    assert all(t.dtype == np.float64 for t in m.parameters()) and m[1].running_var.dtype == np.float64
    assert m[1].num_batches_tracked.dtype == np.int64
    assert m.half() is m and m[0].weight.dtype == np.float16 and m[1].running_mean.dtype == np.float16
    assert m.float() is m and all(t.dtype == np.float32 for t in m.parameters())
    assert all(p.requires_grad for p in m.parameters())


def test_a_cast_or_move_that_changes_nothing_keeps_the_gradients():
    m = chain(nn)
    m(mg.randn(3, 2)).sum().backward()
    grads = [p.grad for p in m.parameters()]
    weights = [p.data for p in m.parameters()]
    m.float().to(mg.default_device())
    assert all(p.grad is g and p.data is w for p, g, w in zip(m.parameters(), grads, weights))
    m.double()  # a cast that changes the weights casts their gradients too, as PyTorch's (not dropped)
    assert all(p.grad is not g and p.grad.dtype == np.float64 and (to_host(p.grad) == to_host(g)).all()
               for p, g in zip(m.parameters(), grads))


# ----------------------------------------------------------------------------- BatchNorm1d(momentum=None)

def batches():
    rng = np.random.default_rng(7)
    return [rng.standard_normal((n, 3)) * [1.0, 2.0, 0.5] + [0.5, -1.0, 2.0] for n in (6, 4, 9)]


def test_batchnorm_momentum_none_is_the_average_of_all_batches():
    bn = nn.BatchNorm1d(3, momentum=None).double()
    for k, x in enumerate(batches(), start=1):
        bn(mg.tensor(x, dtype="float64"))
        seen = batches()[:k]
        np.testing.assert_allclose(bn.running_mean.numpy(), np.mean([b.mean(0) for b in seen], 0), rtol=1e-13)
        np.testing.assert_allclose(bn.running_var.numpy(), np.mean([b.var(0, ddof=1) for b in seen], 0), rtol=1e-13)
        assert int(bn.num_batches_tracked.item()) == k
    assert "momentum=None" in repr(bn)


@pytest.mark.torch
def test_batchnorm_momentum_none_matches_pytorch():
    torch = pytest.importorskip("torch")
    for momentum in (None, 0.3):
        ours = nn.BatchNorm1d(3, momentum=momentum).double()
        theirs = torch.nn.BatchNorm1d(3, momentum=momentum).double()
        for x in batches():
            ours(mg.tensor(x, dtype="float64"))
            theirs(torch.tensor(x))
        np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-12, atol=1e-15)
        assert int(ours.num_batches_tracked.item()) == int(theirs.num_batches_tracked) == 3
        ours.eval(), theirs.eval()
        x = batches()[0]
        np.testing.assert_allclose(ours(mg.tensor(x, dtype="float64")).detach().numpy(),
                                   theirs(torch.tensor(x)).detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("momentum", [None, 0.1])
def test_batchnorm_on_meta_gives_the_real_runs_ledger(momentum):
    """momentum=None weights the k-th batch 1/k: a count 'meta' has no value of, which it needs none of to write the
    same bytes (it raised MetaError reading num_batches_tracked)."""
    def run(device):
        with mg.device(device):
            bn, x = nn.BatchNorm1d(3, momentum=momentum), mg.ones(6, 3, requires_grad=True)
        with mg.profile(bn) as prof:
            for _ in range(2):
                bn(x).sum().backward()
        return prof, bn
    (real, bn_real), (meta, bn_meta) = run("cpu"), run("meta")
    assert meta.timeline() == real.timeline() and meta.bytes_at_peak() == real.bytes_at_peak()
    assert bn_meta.running_var.dtype == bn_real.running_var.dtype and bn_meta.running_var.shape == (3,)


def test_batchnorm_momentum_none_is_not_updated_again_when_recomputing():
    bn = nn.BatchNorm1d(3, momentum=None).double()
    first, second = (mg.tensor(x, dtype="float64") for x in batches()[:2])
    bn(first)
    with recomputing():
        bn(second)  # checkpointing's rerun of a forward that already counted
    assert int(bn.num_batches_tracked.item()) == 1
    np.testing.assert_allclose(bn.running_mean.numpy(), batches()[0].mean(0), rtol=1e-13)
    x = mg.tensor(batches()[1], dtype="float64", requires_grad=True)
    mg.checkpoint(bn, x).sum().backward()
    assert int(bn.num_batches_tracked.item()) == 2
    np.testing.assert_allclose(bn.running_mean.numpy(), (batches()[0].mean(0) + batches()[1].mean(0)) / 2,
                               rtol=1e-13)
