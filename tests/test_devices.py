"""Devices and dtype moves: the default device, .to(), and (where CuPy and a GPU exist) real CUDA runs."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.backend import DeviceError
from minigrad.gpt import GPT, GPTConfig

needs_cuda = pytest.mark.skipif(not mg.cuda_is_available(), reason="needs CuPy and a GPU (CI has none)")


def cuda_test(fn):
    return pytest.mark.cuda(needs_cuda(fn))


# ----------------------------------------------------------------------------- the default device

def test_default_device_from_environment(monkeypatch):
    monkeypatch.setenv("MINIGRAD_DEVICE", "cpu")
    assert mg.default_device() == "cpu"
    assert mg.tensor([1.0]).device == "cpu"
    assert mg.randn(2).device == "cpu" and mg.zeros(2).device == "cpu" and mg.arange(3).device == "cpu"
    assert nn.Linear(2, 2).weight.device == "cpu"


def test_default_device_unset_or_empty_is_cpu(monkeypatch):
    monkeypatch.delenv("MINIGRAD_DEVICE", raising=False)
    assert mg.default_device() == "cpu"
    assert mg.tensor([1.0]).device == "cpu"
    monkeypatch.setenv("MINIGRAD_DEVICE", "")
    assert mg.default_device() == "cpu"
    assert mg.ones(2).device == "cpu"


def test_default_device_unknown(monkeypatch):
    monkeypatch.setenv("MINIGRAD_DEVICE", "tpu")
    with pytest.raises(DeviceError, match=r"unknown device 'tpu'"):
        mg.tensor([1.0])
    assert mg.tensor([1.0], device="cpu").device == "cpu"  # an explicit device still works


@pytest.mark.skipif(mg.cuda_is_available(), reason="this machine has CuPy and a GPU")
def test_default_device_cuda_without_gpu(monkeypatch):
    monkeypatch.setenv("MINIGRAD_DEVICE", "cuda")
    with pytest.raises(DeviceError, match=r"CuPy|GPU"):
        mg.tensor([1.0])


@cuda_test
def test_default_device_cuda(monkeypatch):
    monkeypatch.setenv("MINIGRAD_DEVICE", "cuda")
    assert mg.tensor([1.0]).device == "cuda"
    assert mg.randn(2).device == "cuda" and mg.zeros(2).device == "cuda" and mg.arange(3).device == "cuda"
    assert nn.Linear(2, 2).weight.device == "cuda"
    assert mg.tensor([1.0], device="cpu").device == "cpu"


def test_cpu_with_an_index_is_cpu():
    assert mg.tensor([1.0], device="cpu:0").device == "cpu"


# ----------------------------------------------------------------------------- .to()

def test_to_returns_self_when_nothing_changes():
    x = mg.randn(3, device="cpu", requires_grad=True)
    assert x.to("cpu") is x
    assert x.to("float32") is x
    assert x.to("cpu", "float32") is x
    assert x.to(device="cpu", dtype=mg.float32) is x
    assert x.to(np.float32) is x
    assert x.float() is x
    d = mg.randn(3, dtype="float64", device="cpu")
    assert d.double() is d and d.to("float64") is d


def test_to_float64_is_differentiable():
    x = mg.tensor([0.5, -1.0, 2.0], device="cpu", requires_grad=True)
    y = x.to("float64")
    assert y.dtype == np.float64 and y.requires_grad and y.grad_fn is not None
    assert x.dtype == np.float32  # the input is untouched
    (y * y).sum().backward()
    assert x.grad.dtype == np.float32  # the gradient comes back in the input's dtype
    assert x.grad.shape == (3,)
    np.testing.assert_allclose(x.grad.numpy(), [1.0, -2.0, 4.0])


def test_to_float16_and_back_is_differentiable():
    x = mg.tensor([0.5, -1.0], device="cpu", requires_grad=True)
    y = x.half()
    assert y.dtype == np.float16
    (y.float() * 3.0).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_to_dtype_values():
    x = mg.tensor([1.7, -2.2, 3.0])
    np.testing.assert_array_equal(x.long().numpy(), [1, -2, 3])
    assert x.long().dtype == np.int64
    np.testing.assert_allclose(x.double().numpy(), np.array([1.7, -2.2, 3.0], np.float32).astype(np.float64))
    i = mg.tensor([1, 2])
    f = i.float()
    assert f.dtype == np.float32 and not f.requires_grad
    assert f.tolist() == [1.0, 2.0]


def test_to_integer_dtype_cuts_the_gradient():
    x = mg.tensor([1.7, -2.2], requires_grad=True)
    y = x.to("int64")
    assert y.dtype == np.int64
    assert not y.requires_grad and y.grad_fn is None  # only float tensors can require grad


def test_tensor_copies_its_data():
    a = np.array([1.0, 2.0], dtype=np.float32)
    t = mg.tensor(a, device="cpu")
    a[0] = 5.0
    assert t.tolist() == [1.0, 2.0]
    u = mg.tensor(t)
    assert u.data is not t.data and not u.requires_grad


def test_module_to_cpu_is_a_no_op():
    m = nn.Linear(3, 2).to("cpu")
    w = m.weight
    assert m.to("cpu") is m and m.weight is w and w.device == "cpu"


# ----------------------------------------------------------------------------- CUDA

@cuda_test
def test_tensor_moves_to_cuda_and_back():
    import cupy

    x = mg.randn(3, 4, device="cpu")
    y = x.to("cuda")
    assert y.device == "cuda" and isinstance(y.data, cupy.ndarray)
    assert x.device == "cpu" and isinstance(x.data, np.ndarray)
    z = y.to("cpu")
    assert z.device == "cpu" and isinstance(z.data, np.ndarray)
    np.testing.assert_array_equal(z.numpy(), x.numpy())
    np.testing.assert_array_equal(y.numpy(), x.numpy())  # .numpy() copies from the GPU
    assert isinstance(y.numpy(), np.ndarray)
    assert y.to("cuda") is y
    assert mg.tensor([1.0, 2.0], device="cuda:0").device == "cuda"
    assert "device='cuda'" in repr(y)


@cuda_test
def test_to_cuda_is_differentiable():
    x = mg.tensor([1.0, -2.0, 3.0], device="cpu", requires_grad=True)
    y = x.to("cuda")
    assert y.requires_grad and y.device == "cuda"
    (y * y).sum().backward()
    assert x.grad.device == "cpu"  # the gradient comes back to the input's device
    np.testing.assert_allclose(x.grad.numpy(), [2.0, -4.0, 6.0])

    w = mg.tensor([0.5, 1.5], device="cuda", requires_grad=True)
    (w.to("cpu", "float64") * 2.0).sum().backward()
    assert w.grad.device == "cuda" and w.grad.dtype == np.float32
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0])


def _make_model():
    return nn.Sequential(nn.Linear(5, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 4))


@cuda_test
def test_mlp_forward_backward_on_cuda_matches_cpu():
    mg.manual_seed(0)
    cpu = _make_model().to("cpu")
    mg.manual_seed(0)
    gpu = _make_model().to("cuda")
    assert all(p.device == "cuda" for p in gpu.parameters())
    xh = np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32)
    th = np.random.default_rng(1).integers(0, 4, 8)
    xc = mg.tensor(xh, device="cpu", requires_grad=True)
    xg = mg.tensor(xh, device="cuda", requires_grad=True)
    out_c, out_g = cpu(xc), gpu(xg)
    assert out_g.device == "cuda"
    np.testing.assert_allclose(out_g.detach().numpy(), out_c.detach().numpy(), rtol=1e-5, atol=1e-5)
    loss_c = F.cross_entropy(out_c, mg.tensor(th, device="cpu"))
    loss_g = F.cross_entropy(out_g, mg.tensor(th, device="cuda"))
    np.testing.assert_allclose(loss_g.item(), loss_c.item(), rtol=1e-5, atol=1e-5)
    loss_c.backward()
    loss_g.backward()
    np.testing.assert_allclose(xg.grad.numpy(), xc.grad.numpy(), rtol=1e-5, atol=1e-5)
    for (name, pc), (_, pg) in zip(cpu.named_parameters(), gpu.named_parameters()):
        assert pg.grad.device == "cuda", name
        np.testing.assert_allclose(pg.grad.numpy(), pc.grad.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)
    # one optimizer step on each keeps them together
    for model in (cpu, gpu):
        mg.optim.AdamW(model.parameters(), lr=0.01).step()
    for (name, pc), (_, pg) in zip(cpu.named_parameters(), gpu.named_parameters()):
        np.testing.assert_allclose(pg.detach().numpy(), pc.detach().numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


@cuda_test
def test_mixing_cpu_and_cuda_names_both_devices():
    a = mg.randn(3, device="cpu")
    b = mg.randn(3, device="cuda")
    with pytest.raises(RuntimeError, match=r"^add:.*different devices \(cpu and cuda\).*\.to\(device\)"):
        a + b
    with pytest.raises(RuntimeError, match=r"^mul:.*cpu and cuda"):
        b * a
    with pytest.raises(RuntimeError, match=r"^matmul:.*cpu and cuda"):
        a.reshape(1, 3) @ b.reshape(3, 1)
    with pytest.raises(RuntimeError, match=r"^cat:.*cpu and cuda"):
        mg.cat([a, b])
    with pytest.raises(RuntimeError, match=r"cpu.*cuda"):
        nn.Linear(3, 2).to("cuda")(a)


@cuda_test
def test_dropout_masks_equal_on_cpu_and_cuda():
    mg.manual_seed(5)
    a = F.dropout(mg.ones(40, 30, device="cpu"), 0.5)
    mg.manual_seed(5)
    b = F.dropout(mg.ones(40, 30, device="cuda"), 0.5)
    assert b.device == "cuda"
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    mg.manual_seed(5)
    c = mg.randn(4, 4, device="cpu")
    mg.manual_seed(5)
    d = mg.randn(4, 4, device="cuda")
    np.testing.assert_array_equal(c.numpy(), d.numpy())  # the same seed gives the same numbers


@cuda_test
def test_module_to_cuda_moves_parameters_and_buffers():
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).to("cpu")
    m(mg.randn(6, 3, device="cpu"))
    sd_cpu = m.state_dict()
    m.to("cuda")
    assert all(p.device == "cuda" for p in m.parameters())
    assert all(b.device == "cuda" for b in m.buffers())
    out = m(mg.randn(6, 3, device="cuda"))
    assert out.device == "cuda"
    fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).to("cpu")
    fresh.load_state_dict(sd_cpu)
    other = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).to("cpu")
    other.load_state_dict(m.state_dict())  # CuPy arrays load into a cpu model
    assert all(p.device == "cpu" for p in other.parameters())
    for (n, a), (_, b) in zip(fresh.named_parameters(), other.named_parameters()):
        assert n and a.device == b.device == "cpu"
    m.eval(), other.eval()
    x = np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(m(mg.tensor(x, device="cuda")).detach().numpy(),
                               other(mg.tensor(x, device="cpu")).detach().numpy(), rtol=1e-5, atol=1e-5)


GPT_CFG = dict(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16)


@cuda_test
def test_gpt_on_cuda_matches_cpu():
    mg.manual_seed(0)
    cpu = GPT(GPTConfig(**GPT_CFG)).to("cpu")
    mg.manual_seed(0)
    gpu = GPT(GPTConfig(**GPT_CFG)).to("cuda")
    assert all(p.device == "cuda" for p in gpu.parameters())
    idx = np.random.default_rng(0).integers(0, 11, (2, 8))
    tgt = np.random.default_rng(1).integers(0, 11, (2, 8))
    lc, loss_c = cpu(mg.tensor(idx, device="cpu"), mg.tensor(tgt, device="cpu"))
    lg, loss_g = gpu(mg.tensor(idx, device="cuda"), mg.tensor(tgt, device="cuda"))
    assert lg.device == "cuda"
    np.testing.assert_allclose(lg.detach().numpy(), lc.detach().numpy(), rtol=1e-5, atol=1e-5)
    loss_c.backward()
    loss_g.backward()
    for (name, pc), (_, pg) in zip(cpu.named_parameters(), gpu.named_parameters()):
        np.testing.assert_allclose(pg.grad.numpy(), pc.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    out = gpu.generate(mg.zeros(2, 1, dtype="int64", device="cuda"), 5)
    assert out.device == "cuda" and out.shape == (2, 6)


@cuda_test
def test_gpt_built_on_the_default_cuda_device(monkeypatch):
    monkeypatch.setenv("MINIGRAD_DEVICE", "cuda")
    model = GPT(GPTConfig(**GPT_CFG))
    assert {n: p.device for n, p in model.named_parameters()} == {n: "cuda" for n, _ in model.named_parameters()}
    assert model(mg.randint(0, 11, (2, 8))).device == "cuda"


# ----------------------------------------------------------------------------- the GPU path (issue 27)
# Each test below ran red on the CuPy stand-in (MINIGRAD_DEVICE=cuda, tests/cupy_standin) before its fix; they run
# on every pass, on the default device.

def test_a_numpy_integer_indexes_as_a_python_int():
    x = mg.arange(6).reshape(2, 3)
    assert x[np.int64(1)].tolist() == [3, 4, 5]  # was "the index is on cpu but the tensor is on cuda"
    assert x[np.int32(0), np.int64(-1)].item() == 2
    assert x[:, np.uint8(1)].tolist() == [1, 4]
    x[np.int64(0), np.int64(1)] = 7
    assert x.tolist() == [[0, 7, 2], [3, 4, 5]]


def test_integer_indices_out_of_range_raise_pytorchs_error_on_every_device():
    x = mg.arange(6).reshape(2, 3)
    # CuPy wraps an integer array's indices around (it would read row 0 for 4 here, silently); PyTorch's words
    with pytest.raises(IndexError, match=r"^index: index 4 is out of bounds for dimension 0 with size 2 "
                                         r"\(tensor of shape \(2, 3\)\)$"):
        x[mg.tensor([0, 4])]
    with pytest.raises(IndexError, match=r"index -4 is out of bounds for dimension 1 with size 3"):
        x[:, [0, -4]]
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for dimension 1 with size 3"):
        x[..., np.array([3])]
    with pytest.raises(IndexError, match=r"index 2 is out of bounds for dimension 0 with size 2"):
        x[None, mg.tensor([2])]
    with pytest.raises(IndexError, match=r"index 5 is out of bounds for dimension 0 with size 2"):
        x[mg.tensor([5])] = 9  # and nothing written
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for dimension 1 with size 3"):
        x[0, 3]
    w = mg.randn(2, 3, requires_grad=True) * 1
    with pytest.raises(IndexError, match=r"index 2 is out of bounds for dimension 0 with size 2"):
        w[mg.tensor([2])] = mg.zeros(3)  # recorded: the same check
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert x[mg.tensor([-2, 1])].tolist() == [[0, 1, 2], [3, 4, 5]]  # -n ... n - 1 are fine


def test_a_repeated_index_keeps_the_last_write_on_every_device():
    x = mg.zeros(4)
    x[mg.tensor([0, 2, 0, 0])] = mg.tensor([1.0, 2.0, 3.0, 4.0])
    assert x.tolist() == [4.0, 0.0, 2.0, 0.0]  # the stand-in, like CuPy, may keep any of 1, 3, 4 without the rule
    m = mg.zeros(2, 3)
    m[mg.tensor([1, 1]), mg.tensor([[0], [0]])] = mg.tensor([[5.0], [6.0]])  # broadcast: C order, the last
    assert m.tolist() == [[0.0, 0.0, 0.0], [6.0, 0.0, 0.0]]
    rows = mg.zeros(3, 2)
    rows[[2, 2]] = mg.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert rows.tolist() == [[0.0, 0.0], [0.0, 0.0], [3.0, 4.0]]
    # recorded: the same values, and the overwritten elements of the value get no gradient
    v = mg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = mg.zeros(4, requires_grad=True) * 1
    y[mg.tensor([0, 2, 0, 0])] = v
    assert y.tolist() == [4.0, 0.0, 2.0, 0.0]
    (y * mg.tensor([10.0, 20.0, 30.0, 40.0])).sum().backward()
    assert v.grad.tolist() == [0.0, 30.0, 0.0, 10.0]


def test_a_repeated_index_put_passes_gradcheck():
    from minigrad.testing import gradcheck
    idx = mg.tensor([[1, 0], [1, 3]])
    x = mg.randn(4, 3, dtype="float64", requires_grad=True)
    v = mg.randn(2, 2, 3, dtype="float64", requires_grad=True)

    def f(x, v):
        y = x * 1
        y[idx] = v
        return y
    assert gradcheck(f, (x, v))


def test_where_and_recorded_writes_stay_on_the_tensors_device():
    dev = mg.default_device()
    x = mg.randn(3, requires_grad=True)
    with mg.device("meta"):  # a default that is not the tensor's: the mask was made there ("the mask is on meta")
        y = x * 1
        y.fill_(2.0)
        assert y.device == dev and y.tolist() == [2.0, 2.0, 2.0]
        y.zero_()
        y.copy_(mg.tensor([1.0, 2.0, 3.0], device=dev))
        z = mg.where([True, False, True], y, 0.0)
        w = mg.where(np.array([False, True, False]), y, 5.0)
    assert z.device == w.device == dev
    assert z.tolist() == [1.0, 0.0, 3.0] and w.tolist() == [5.0, 2.0, 5.0]
    (z + w).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]  # fill_ and copy_ cut what came before


def test_memory_reserved_and_empty_cache_on_each_device():
    assert mg.backend.memory_reserved("meta") == 0
    mg.backend.empty_cache("meta")  # nothing to give back
    assert mg.backend.memory_reserved() == mg.backend.memory_reserved(mg.default_device())


@pytest.mark.skipif(mg.default_device() != "cuda", reason="reads CuPy's memory pool: MINIGRAD_DEVICE=cuda only")
def test_memory_reserved_and_empty_cache_read_and_free_cupys_pool():
    import cupy
    pool = cupy.get_default_memory_pool()
    x = mg.randn(256, 1024)  # 1 MiB
    assert mg.backend.memory_reserved() == pool.total_bytes() >= pool.used_bytes() >= x.data.nbytes
    held = mg.backend.memory_reserved()
    del x
    assert mg.backend.memory_reserved() == held  # freed into the pool, still held
    mg.backend.empty_cache()
    assert mg.backend.memory_reserved() == pool.total_bytes() == pool.used_bytes() <= held - 2**20
