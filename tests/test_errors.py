"""Bad input gets a clear error: it names the op, the shapes/dtypes/devices involved, and what to do."""
import re

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad.backend import DeviceError
from minigrad.gpt import GPT, GPTConfig


def esc(s):
    return re.escape(str(s))


# ----------------------------------------------------------------------------- shapes

@pytest.mark.parametrize("requires_grad", [False, True])
def test_add_shape_mismatch_names_op_and_both_shapes(requires_grad):
    a = mg.randn(2, 3, requires_grad=requires_grad)
    b = mg.randn(4, 5)
    with pytest.raises(ValueError, match=r"^add:") as e:
        a + b
    msg = str(e.value)
    assert "(2, 3)" in msg and "(4, 5)" in msg


def test_sub_mul_div_shape_mismatch_name_their_op():
    a, b = mg.randn(2, 3), mg.randn(3, 2)
    for op, name in ((lambda: a - b, "sub"), (lambda: a * b, "mul"), (lambda: a / b, "div")):
        with pytest.raises(ValueError, match=rf"^{name}:.*\(2, 3\).*\(3, 2\)"):
            op()


def test_matmul_shape_mismatch_names_op_and_both_shapes():
    with pytest.raises(ValueError, match=r"^matmul:.*\(2, 3\).*\(4, 5\)"):
        mg.randn(2, 3) @ mg.randn(4, 5)


def test_matmul_with_a_scalar_says_to_use_mul():
    with pytest.raises(ValueError, match=r"matmul:.*use \*"):
        mg.randn(2, 3) @ mg.tensor(2.0)


def test_matmul_with_a_non_tensor():
    with pytest.raises(TypeError, match=r"matmul:.*ndarray"):
        mg.randn(2, 3) @ np.ones((3, 2), dtype=np.float32)


def test_linear_shape_mismatch():
    with pytest.raises(ValueError, match=r"^linear:.*\(2, 3\).*\(5, 4\).*in_features"):
        F.linear(mg.randn(2, 3), mg.randn(5, 4))
    with pytest.raises(ValueError, match=r"^linear:.*\(2, 3\).*\(5, 4\)"):
        mg.nn.Linear(4, 5)(mg.randn(2, 3))


def test_linear_bias_shape_mismatch():
    with pytest.raises(ValueError, match=r"^linear: bias of shape \(4,\).*\(5, 3\).*expected \(5,\)"):
        F.linear(mg.randn(2, 3), mg.randn(5, 3), mg.randn(4))


def test_cat_shape_mismatch():
    with pytest.raises(ValueError, match=r"^cat:.*\(2, 3\).*\(2, 4\).*dim 0"):
        mg.cat([mg.randn(2, 3), mg.randn(2, 4)])
    with pytest.raises(ValueError, match=r"^cat:.*\(2, 3\).*\(3, 4\).*dim 1"):
        mg.cat([mg.randn(2, 3), mg.randn(3, 4)], dim=1)


def test_cat_of_nothing():
    with pytest.raises(ValueError, match=r"cat:.*non-empty"):
        mg.cat([])


def test_reshape_mismatch():
    with pytest.raises(ValueError, match=r"^reshape:.*\(2, 3\).*6 elements.*\(4, 2\)"):
        mg.randn(2, 3).reshape(4, 2)


def test_masked_fill_mask_that_broadcasts_to_a_bigger_shape():
    with pytest.raises(ValueError, match=r"^masked_fill: mask of shape \(2, 3\).*input's shape \(3,\)"):
        mg.randn(3).masked_fill(mg.ones(2, 3, dtype="bool"), 0.0)


def test_masked_fill_mask_that_does_not_broadcast():
    with pytest.raises(ValueError, match=r"^masked_fill: mask of shape \(3, 2\).*\(2, 3\)"):
        mg.randn(2, 3).masked_fill(mg.ones(3, 2, dtype="bool"), 0.0)


def test_masked_fill_non_bool_mask():
    with pytest.raises(TypeError, match=r"masked_fill:.*bool.*int64"):
        mg.randn(2, 3).masked_fill(mg.ones(2, 3, dtype="int64"), 0.0)


# ----------------------------------------------------------------------------- cross_entropy

def test_cross_entropy_wrong_target_shape():
    with pytest.raises(ValueError, match=r"^cross_entropy:.*\(4, 5\) and \(3,\).*reshape"):
        F.cross_entropy(mg.randn(4, 5), mg.tensor([1, 2, 3]))


def test_cross_entropy_sequence_logits_not_flattened():
    with pytest.raises(ValueError, match=r"^cross_entropy:.*\(2, 3, 5\) and \(2, 3\).*reshape\(-1, C\)"):
        F.cross_entropy(mg.randn(2, 3, 5), mg.zeros(2, 3, dtype="int64"))


@pytest.mark.parametrize("bad", [5, -1, 17])
def test_cross_entropy_target_out_of_range(bad):
    with pytest.raises(IndexError, match=rf"^cross_entropy: target {bad} is out of range for 5 classes"):
        F.cross_entropy(mg.randn(4, 5), mg.tensor([1, 2, bad, 0]))


def test_cross_entropy_ignore_index_is_not_out_of_range():
    loss = F.cross_entropy(mg.randn(4, 5), mg.tensor([1, 2, -100, 0]))
    assert np.isfinite(loss.item())


def test_cross_entropy_float_target():
    with pytest.raises(TypeError, match=r"^cross_entropy:.*integer.*float32"):
        F.cross_entropy(mg.randn(4, 5), mg.tensor([1.0, 2.0, 3.0, 0.0]))


def test_cross_entropy_target_not_a_tensor():
    with pytest.raises(TypeError, match=r"cross_entropy: target must be a Tensor, got list"):
        F.cross_entropy(mg.randn(4, 5), [1, 2, 3, 0])


def test_mse_loss_unknown_reduction():
    with pytest.raises(ValueError, match=r"mse_loss: reduction must be 'mean', 'sum' or 'none'"):
        F.mse_loss(mg.randn(3), mg.randn(3), reduction="avg")


def test_cross_entropy_unknown_reduction():
    with pytest.raises(ValueError, match=r"cross_entropy: reduction must be 'mean', 'sum' or 'none', got 'avg'"):
        F.cross_entropy(mg.randn(4, 5), mg.tensor([0, 1, 2, 3]), reduction="avg")


# ----------------------------------------------------------------------------- backward

def test_backward_on_non_scalar_without_gradient():
    y = mg.randn(2, 3, requires_grad=True) * 2.0
    with pytest.raises(RuntimeError, match=r"shape \(2, 3\).*gradient="):
        y.backward()


def test_backward_with_a_gradient_of_the_wrong_shape():
    y = mg.randn(2, 3, requires_grad=True) * 2.0
    with pytest.raises(ValueError, match=r"backward:.*\(3, 2\).*\(2, 3\)"):
        y.backward(gradient=mg.randn(3, 2))


def test_backward_with_a_gradient_of_the_wrong_dtype():
    y = mg.randn(2, 3, requires_grad=True) * 2.0
    with pytest.raises(TypeError, match=r"backward:.*float32.*float64"):
        y.backward(gradient=mg.randn(2, 3, dtype="float64"))


def test_backward_through_a_released_graph():
    x = mg.randn(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=r"second time.*retain_graph=True"):
        y.backward()


def test_backward_on_a_tensor_that_does_not_require_grad():
    y = (mg.randn(3) * 2.0).sum()
    with pytest.raises(RuntimeError, match=r"does not require grad.*requires_grad=True"):
        y.backward()


def test_backward_on_a_result_computed_under_no_grad():
    x = mg.randn(3, requires_grad=True)
    with mg.no_grad():
        y = (x * 2.0).sum()
    with pytest.raises(RuntimeError, match=r"no_grad"):
        y.backward()


# ----------------------------------------------------------------------------- dtypes

@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_integer_tensor_cannot_require_grad(dtype):
    with pytest.raises(TypeError, match=rf"{dtype}.*\.float\(\)"):
        mg.tensor([1, 0], dtype=dtype, requires_grad=True)
    t = mg.tensor([1, 0], dtype=dtype)
    with pytest.raises(TypeError, match=rf"{dtype}.*\.float\(\)"):
        t.requires_grad_()
    with pytest.raises(TypeError, match=rf"{dtype}.*\.float\(\)"):
        t.requires_grad = True
    assert not t.requires_grad


@pytest.mark.parametrize("op,name", [(lambda a, b: a + b, "add"), (lambda a, b: a * b, "mul"),
                                     (lambda a, b: a @ b.reshape(3, 1), "matmul")])
def test_mixing_float32_and_float64(op, name):
    a = mg.randn(3)
    b = mg.randn(3, dtype="float64")
    with pytest.raises(TypeError, match=rf"^{name}:.*float32.*float64.*not promote"):
        op(a, b)


def test_mixing_dtypes_in_cat():
    with pytest.raises(TypeError, match=r"^cat:.*float32.*float64"):
        mg.cat([mg.randn(2), mg.randn(2, dtype="float64")])


@pytest.mark.parametrize("op,expected", [(lambda t: t + 1.5, [2.5, 3.5, 4.5]), (lambda t: 1.5 * t, [1.5, 3.0, 4.5]),
                                         (lambda t: t - 0.5, [0.5, 1.5, 2.5]), (lambda t: t / 2.0, [0.5, 1.0, 1.5]),
                                         (lambda t: t / 2, [0.5, 1.0, 1.5]), (lambda t: t.exp(), np.exp([1, 2, 3]))])
def test_python_float_with_int_tensor_promotes_to_float32_as_pytorch(op, expected):
    """NOTE [type promotion]: once an error here, now PyTorch's rule (issue [parity])."""
    out = op(mg.tensor([1, 2, 3]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


def test_python_int_with_int_tensor_is_fine():
    assert (mg.tensor([1, 2, 3]) + 1).tolist() == [2, 3, 4]


def test_unknown_dtype():
    with pytest.raises(TypeError, match=r"unknown dtype 'float8'.*float32"):
        mg.tensor([1.0], dtype="float8")
    with pytest.raises(TypeError, match=r"complex64 is not supported.*float64"):
        mg.zeros(2, dtype="complex64")
    with pytest.raises(TypeError, match=r"unknown dtype 'foo'"):
        mg.randn(2).to(dtype="foo")


def test_numpy_array_as_operand():
    with pytest.raises(TypeError, match=r"add:.*ndarray.*mg\.tensor"):
        mg.randn(3) + np.ones(3, dtype=np.float32)


# ----------------------------------------------------------------------------- devices

@pytest.mark.skipif(mg.cuda_is_available(), reason="this machine has CuPy and a GPU")
def test_cuda_without_cupy_or_gpu():
    with pytest.raises(DeviceError, match=r"(CuPy|GPU).*device='cpu'"):
        mg.tensor([1.0], device="cuda")
    with pytest.raises(DeviceError, match=r"CuPy|GPU"):
        mg.randn(2).to("cuda")
    with pytest.raises(DeviceError, match=r"CuPy|GPU"):
        mg.zeros(2, device="cuda:0")


def test_device_error_is_a_runtime_error():
    assert issubclass(DeviceError, RuntimeError)


def test_unknown_device():
    for make in (lambda: mg.tensor([1.0], device="tpu"), lambda: mg.randn(2, device="tpu"),
                 lambda: mg.zeros(2, device="tpu"), lambda: mg.randn(2).to(device="tpu")):
        with pytest.raises(DeviceError, match=r"unknown device 'tpu'.*'cpu'.*'cuda'"):
            make()


def test_unknown_device_positional_to():
    with pytest.raises(DeviceError, match=r"unknown device 'tpu'"):
        mg.randn(2).to("tpu")


def test_unknown_device_module_to():
    with pytest.raises(DeviceError, match=r"unknown device 'tpu'"):
        mg.nn.Linear(2, 2).to("tpu")


def test_module_to_integer_dtype_is_refused():
    lin = mg.nn.Linear(3, 2)
    with pytest.raises(TypeError, match=r"int64"):
        lin.to("int64")


# ----------------------------------------------------------------------------- ranges and indices

def test_dim_out_of_range_in_sum():
    with pytest.raises(IndexError, match=r"^sum: dim 2 is out of range.*\(2, 3\).*\[-2, 1\]"):
        mg.randn(2, 3).sum(dim=2)
    with pytest.raises(IndexError, match=r"^sum: dim -3 is out of range"):
        mg.randn(2, 3).sum(dim=-3)
    with pytest.raises(IndexError, match=r"^mean: dim 5 is out of range"):
        mg.randn(2, 3).mean(dim=5)
    with pytest.raises(IndexError, match=r"^softmax: dim 2"):
        mg.randn(2, 3).softmax(dim=2)


def test_indexing_out_of_range():
    with pytest.raises(IndexError, match=r"^index:.*5.*size 2.*\(2, 3\)"):
        mg.randn(2, 3)[5]
    with pytest.raises(IndexError, match=r"^index:.*7.*size 3.*\(2, 3\)"):
        mg.randn(2, 3)[0, 7]
    with pytest.raises(IndexError, match=r"^index:.*4.*\(2, 3\)"):
        mg.randn(2, 3)[mg.tensor([0, 4])]


def test_indexing_with_a_float_tensor():
    with pytest.raises(IndexError, match=r"integer or bool.*float32"):
        mg.randn(2, 3)[mg.tensor([0.0, 1.0])]


def test_embedding_index_out_of_range():
    with pytest.raises(IndexError, match=r"^embedding: index out of range.*\[0, 10\].*5 embeddings"):
        mg.nn.Embedding(5, 3)(mg.tensor([0, 10]))
    with pytest.raises(IndexError, match=r"^embedding: index out of range.*\[-1, 2\].*5 embeddings"):
        F.embedding(mg.tensor([2, -1]), mg.randn(5, 3))


def test_embedding_float_indices():
    with pytest.raises(TypeError, match=r"embedding:.*integer.*float32"):
        mg.nn.Embedding(5, 3)(mg.tensor([0.0, 1.0]))


@pytest.mark.parametrize("p", [1.5, -0.1])
def test_dropout_p_out_of_range(p):
    with pytest.raises(ValueError, match=rf"dropout: p must be a probability in \[0, 1\], got {esc(p)}"):
        F.dropout(mg.randn(3), p=p)
    with pytest.raises(ValueError, match=rf"Dropout: p must be a probability.*{esc(p)}"):
        mg.nn.Dropout(p)


@pytest.mark.parametrize("mask_dtype", ["int8", "uint8", "float128x", 3])
def test_dropout_mask_dtype_lists_the_choices(mask_dtype):
    for make in (lambda: F.dropout(mg.randn(3), 0.5, mask_dtype=mask_dtype),
                 lambda: mg.nn.Dropout(0.5, mask_dtype=mask_dtype)):
        with pytest.raises(TypeError, match=rf"^dropout: mask_dtype must be None or 'bool'.*'float32'.*got "
                                            rf"{esc(repr(mask_dtype))}"):
            make()


def test_dropout_of_integers_says_to_convert():
    with pytest.raises(TypeError, match=r"^dropout: needs a floating-point input, got int64 of shape \(3,\).*"
                                        r"\.float\(\)"):
        F.dropout(mg.arange(3), 0.5)


SDPA = "scaled_dot_product_attention"


def _qkv(L=4, S=6, E=8, Ev=8, dtype="float32"):
    return mg.randn(2, L, E, dtype=dtype), mg.randn(2, S, E, dtype=dtype), mg.randn(2, S, Ev, dtype=dtype)


def test_sdpa_key_query_width_mismatch_names_all_three_shapes():
    q, _, v = _qkv()
    with pytest.raises(ValueError, match=rf"^{SDPA}: got query \(2, 4, 8\), key \(2, 6, 5\), value \(2, 6, 8\);"
                                         rf".*key's last dim \(5\) must equal query's \(E = 8\)"):
        F.scaled_dot_product_attention(q, mg.randn(2, 6, 5), v)
    with pytest.raises(ValueError, match=rf"^{SDPA}:.*value's second-to-last dim \(5\) must equal key's \(S = 6\)"):
        F.scaled_dot_product_attention(q, mg.randn(2, 6, 8), mg.randn(2, 5, 8))


def test_sdpa_batch_dims_that_do_not_broadcast():
    with pytest.raises(ValueError, match=rf"^{SDPA}: the leading \(batch\) dims of query \(2, 4, 8\), key "
                                         rf"\(3, 6, 8\).*do not broadcast"):
        F.scaled_dot_product_attention(mg.randn(2, 4, 8), mg.randn(3, 6, 8), mg.randn(3, 6, 8))


def test_sdpa_needs_two_dims():
    with pytest.raises(ValueError, match=rf"^{SDPA}: key must have at least 2 dims.*got shape \(8,\)"):
        F.scaled_dot_product_attention(mg.randn(4, 8), mg.randn(8), mg.randn(6, 8))


def test_sdpa_dtypes_must_match_and_be_float():
    q, k, v = _qkv()
    with pytest.raises(TypeError, match=rf"^{SDPA}: query, key and value must share one floating-point dtype, got "
                                        rf"float32, float64 and float32"):
        F.scaled_dot_product_attention(q, k.double(), v)
    with pytest.raises(TypeError, match=rf"^{SDPA}: attn_mask must be bool.*float32.*got int64; convert"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mg.zeros(4, 6, dtype="int64"))


def test_sdpa_mask_and_is_causal_together_refused_as_in_pytorch():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=rf"^{SDPA}: give attn_mask or is_causal=True, not both"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mg.ones(4, 6, dtype="bool"), is_causal=True)


def test_sdpa_mask_that_does_not_fit_the_scores():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=rf"^{SDPA}: attn_mask of shape \(6, 4\) does not broadcast to the "
                                         rf"scores' shape \(2, 4, 6\)"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mg.ones(6, 4, dtype="bool"))


def test_sdpa_dropout_p_and_gqa():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=rf"^{SDPA}: dropout_p must be a probability in \[0, 1\], got 1.5"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.5)
    q4, kv3 = mg.randn(1, 4, 5, 8), mg.randn(1, 3, 5, 8)  # grouped-query attention: key's heads must divide query's
    with pytest.raises(ValueError, match=rf"^{SDPA}: enable_gqa=True: the heads \(dim -3\) of key \(3\) and value "
                                         rf"\(3\) must each divide the query's \(4\); got query \(1, 4, 5, 8\)"):
        F.scaled_dot_product_attention(q4, kv3, kv3, enable_gqa=True)
    with pytest.raises(ValueError, match=rf"^{SDPA}: enable_gqa=True needs a heads dim"):
        F.scaled_dot_product_attention(q[0], k[0], v[0], enable_gqa=True)
    kv2 = mg.randn(1, 2, 5, 8)  # fewer heads without enable_gqa: the batch dims do not broadcast, and the hint
    with pytest.raises(ValueError, match=rf"^{SDPA}: the leading \(batch\) dims of query \(1, 4, 5, 8\), key "
                                         rf"\(1, 2, 5, 8\).* do not broadcast.*pass enable_gqa=True"):
        F.scaled_dot_product_attention(q4, kv2, kv2)


def test_gpt_sequence_longer_than_block_size():
    model = GPT(GPTConfig(vocab_size=10, block_size=4, n_layer=1, n_head=2, n_embd=8)).to(mg.default_device())
    with pytest.raises(ValueError, match=r"sequence length 5 is longer than block_size 4"):
        model(mg.zeros(1, 5, dtype="int64"))


def test_gpt_n_embd_not_divisible_by_n_head():
    with pytest.raises(ValueError, match=r"n_embd=10.*n_head=4"):
        GPT(GPTConfig(vocab_size=10, block_size=4, n_layer=1, n_head=4, n_embd=10))


# ----------------------------------------------------------------------------- conversions and data

def test_numpy_on_a_tensor_requiring_grad():
    with pytest.raises(RuntimeError, match=r"requires grad.*\.detach\(\)\.numpy\(\)"):
        mg.randn(2, requires_grad=True).numpy()
    with pytest.raises(RuntimeError, match=r"detach"):
        (mg.randn(2, requires_grad=True) * 2.0).numpy()


def test_item_on_a_multi_element_tensor():
    with pytest.raises(ValueError, match=r"item: only a one-element tensor.*shape \(2,\)"):
        mg.randn(2).item()
    assert mg.tensor([[3.5]]).item() == 3.5


def test_bool_of_a_multi_element_tensor():
    with pytest.raises(RuntimeError, match=r"\(2,\) is ambiguous.*any\(\).*all\(\)"):
        bool(mg.randn(2))


def test_replacing_data_with_a_wrong_shape():
    t = mg.randn(2, 3)
    with pytest.raises(ValueError, match=r"data:.*shape \(2, 3\).*got \(3, 2\)"):
        t.data = np.zeros((3, 2), dtype=np.float32)
    with pytest.raises(ValueError, match=r"data:.*shape \(2, 3\).*got list"):
        t.data = [[0.0] * 3] * 2
    assert t.shape == (2, 3)


def test_replacing_data_of_a_grad_tensor_with_ints():
    p = mg.nn.Parameter(mg.randn(3))
    with pytest.raises(TypeError, match=r"data:.*requires grad.*float.*int64"):
        p.data = np.zeros(3, dtype=np.int64)


def test_tensor_from_an_unsupported_object():
    with pytest.raises(TypeError, match=r"tensor: cannot make a tensor from"):
        mg.tensor([object()])


def test_pow_with_an_exponent_that_is_neither_a_number_nor_a_tensor():
    with pytest.raises(TypeError, match=r"pow: the exponent must be a number or a Tensor, got str"):
        mg.randn(2) ** "2"


# ----------------------------------------------------------------------------- optimizers

@pytest.mark.parametrize("opt", [mg.optim.SGD, mg.optim.AdamW])
def test_optimizer_with_an_empty_parameter_list(opt):
    with pytest.raises(ValueError, match=rf"{opt.__name__}: got an empty parameter list"):
        opt([])
    with pytest.raises(ValueError, match=r"empty parameter list"):
        opt(mg.nn.ReLU().parameters())  # a module without parameters: an empty generator


def test_optimizer_bad_hyperparameters():
    p = [mg.nn.Parameter(mg.randn(2))]
    with pytest.raises(ValueError, match=r"SGD:.*-0.1"):
        mg.optim.SGD(p, lr=-0.1)
    with pytest.raises(ValueError, match=r"SGD: nesterov"):
        mg.optim.SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match=r"AdamW:.*betas"):
        mg.optim.AdamW(p, betas=(0.9, 1.0))


def test_gelu_bad_approximate():
    with pytest.raises(ValueError, match=r"gelu: approximate must be 'none' or 'tanh', got 'fast'"):
        F.gelu(mg.randn(2), approximate="fast")
