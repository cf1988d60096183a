"""minigrad.gpt: tokenizer, corpus, batches, the model's shapes, causality, learning, sampling, gradients."""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad.gpt import GPT, CharTokenizer, GPTConfig, get_batch, tiny_corpus, unigram_entropy
from minigrad.testing import gradcheck


def make_gpt(cfg):
    # .to(default device): GPT's init writes host arrays into its weights (see test_devices.py), so a model
    # built under MINIGRAD_DEVICE=cuda is moved explicitly; on cpu this changes nothing
    return GPT(cfg).to(mg.default_device())


def small_cfg(**kw):
    cfg = dict(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=16)
    cfg.update(kw)
    return GPTConfig(**cfg)


# ----------------------------------------------------------------------------- tokenizer and data

def test_char_tokenizer_roundtrip():
    text = tiny_corpus(200)
    tok = CharTokenizer(text)
    assert tok.chars == sorted(set(text))
    assert tok.vocab_size == len(set(text))
    ids = tok.encode(text)
    assert len(ids) == len(text)
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text
    assert tok.decode(tok.encode("the cat sees a song.\n")) == "the cat sees a song.\n"
    assert tok.encode("") == [] and tok.decode([]) == ""
    assert tok.encode(" ") == [tok.chars.index(" ")]


def test_char_tokenizer_unknown_char():
    tok = CharTokenizer("abc")
    with pytest.raises(ValueError, match=r"character 'z' is not in the vocabulary"):
        tok.encode("abz")


def test_tiny_corpus_is_deterministic_for_a_seed():
    a, b = tiny_corpus(300, seed=5), tiny_corpus(300, seed=5)
    assert a == b
    assert tiny_corpus(300, seed=6) != a
    assert a.endswith("\n") and a.count("\n") == 300
    assert tiny_corpus() == tiny_corpus(2000, seed=0)


def test_get_batch_shapes_and_shift():
    data = list(range(1000))  # token k at position k: a window's start is its first token
    x, y = get_batch(data, batch_size=6, block_size=10)
    assert x.shape == (6, 10) and y.shape == (6, 10)
    assert x.dtype == np.int64 and y.dtype == np.int64
    xn, yn = x.numpy(), y.numpy()
    np.testing.assert_array_equal(yn, xn + 1)  # the targets are the inputs shifted by one
    np.testing.assert_array_equal(xn, xn[:, :1] + np.arange(10))  # contiguous windows
    assert xn.min() >= 0 and yn.max() <= 999


def test_get_batch_on_real_text_and_seeded():
    text = tiny_corpus(100)
    data = CharTokenizer(text).encode(text)
    mg.manual_seed(3)
    x1, y1 = get_batch(data, 4, 16)
    mg.manual_seed(3)
    x2, _ = get_batch(data, 4, 16)
    np.testing.assert_array_equal(x1.numpy(), x2.numpy())
    np.testing.assert_array_equal(x1.numpy()[:, 1:], y1.numpy()[:, :-1])
    joined = "," + ",".join(map(str, data)) + ","
    for row_x, row_y in zip(x1.numpy(), y1.numpy()):
        assert "," + ",".join(map(str, row_x)) + "," in joined
        assert "," + ",".join(map(str, list(row_x[1:]) + [row_y[-1]])) + "," in joined


def test_unigram_entropy():
    assert unigram_entropy([1, 1, 1]) == 0
    assert unigram_entropy([0, 1, 2, 3]) == pytest.approx(math.log(4))


# ----------------------------------------------------------------------------- the model

def test_gpt_forward_shapes_and_initial_loss():
    cfg = small_cfg(vocab_size=29)
    model = make_gpt(cfg)
    idx = mg.randint(0, 29, (3, 8))
    logits = model(idx)
    assert logits.shape == (3, 8, 29) and logits.dtype == np.float32
    logits2, loss = model(idx, mg.randint(0, 29, (3, 8)))
    assert logits2.shape == (3, 8, 29) and loss.shape == ()
    assert abs(loss.item() - math.log(29)) < 0.3
    assert model(idx[:, :3]).shape == (3, 3, 29)  # shorter than block_size is fine


def test_gpt_every_parameter_gets_a_gradient():
    model = make_gpt(small_cfg())
    idx = mg.randint(0, 13, (2, 8))
    _, loss = model(idx, mg.randint(0, 13, (2, 8)))
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert p.grad.shape == p.shape and np.isfinite(p.grad.numpy()).all(), name


def test_gpt_is_causal():
    model = make_gpt(small_cfg())
    idx = mg.randint(0, 13, (2, 8))
    base = model(idx).detach().numpy()
    for t in range(7):
        changed = idx.numpy().copy()
        changed[:, t + 1:] = (changed[:, t + 1:] + 1 + np.arange(7 - t)) % 13  # alter every later token
        out = model(mg.tensor(changed)).detach().numpy()
        np.testing.assert_allclose(out[:, :t + 1], base[:, :t + 1], rtol=0, atol=1e-6)
        assert not np.allclose(out[:, t + 1:], base[:, t + 1:], atol=1e-4)  # the future did change


def test_gpt_learns_the_tiny_corpus():
    text = tiny_corpus()
    tok = CharTokenizer(text)
    data = tok.encode(text)
    mg.manual_seed(0)
    cfg = GPTConfig(vocab_size=tok.vocab_size, block_size=16, n_layer=1, n_head=4, n_embd=32)
    model = make_gpt(cfg)
    opt = mg.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    losses = []
    for _ in range(150):
        x, y = get_batch(data, 16, 16)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert abs(losses[0] - math.log(tok.vocab_size)) < 0.3
    h = unigram_entropy(data)
    assert np.isfinite(losses).all()
    # beating the unigram entropy by a wide margin means the model uses its context
    assert np.mean(losses[-10:]) < h - 1.0, (np.mean(losses[-10:]), h)


def test_generate_shape_and_valid_ids():
    V = 13
    model = make_gpt(small_cfg(vocab_size=V, block_size=8))
    start = mg.tensor([[1, 2, 3], [4, 5, 6]])
    out = model.generate(start, max_new_tokens=10)  # runs past block_size: the context is cropped
    assert out.shape == (2, 13)
    assert out.dtype.kind in "iu"
    ids = out.numpy()
    np.testing.assert_array_equal(ids[:, :3], start.numpy())
    assert ids.min() >= 0 and ids.max() < V
    assert not out.requires_grad and out.grad_fn is None
    assert mg.is_grad_enabled()


def test_generate_is_deterministic_under_manual_seed():
    model = make_gpt(small_cfg())
    start = mg.zeros(1, 1, dtype="int64")
    mg.manual_seed(11)
    a = model.generate(start, 6).numpy()
    mg.manual_seed(11)
    b = model.generate(start, 6).numpy()
    np.testing.assert_array_equal(a, b)


def test_gpt_float64_gradcheck():
    mg.manual_seed(0)
    model = make_gpt(GPTConfig(vocab_size=7, block_size=4, n_layer=1, n_head=2, n_embd=8)).to("float64")
    idx = mg.randint(0, 7, (2, 4))
    targets = mg.randint(0, 7, (2, 4))
    # make the LayerNorm parameters non-trivial so their gradients are not special
    model.ln_f.weight.data = mg.tensor(1 + 0.1 * np.random.default_rng(1).standard_normal(8), dtype="float64").data
    model.h[0].ln_1.bias.data = mg.tensor(0.1 * np.random.default_rng(2).standard_normal(8), dtype="float64").data
    params = [model.ln_f.weight, model.h[0].ln_1.bias, model.h[0].attn.c_attn.bias]
    assert all(p.dtype == np.float64 for p in params)
    assert gradcheck(lambda *_: model(idx), params, name="gpt_logits")
    assert gradcheck(lambda *_: model(idx, targets)[1], params[:2], name="gpt_loss")
