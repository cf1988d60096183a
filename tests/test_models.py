"""minigrad.models, bert.py and GPT-2 in gpt.py: published parameter counts (by formula for all six, by a real
build for the two small ones), Hugging Face's names, forward and backward of tiny configurations against finite
differences and a hand-written PyTorch model, a tied LM head, checkpointing, and the errors."""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import models
from minigrad.bert import BertConfig, BertForSequenceClassification
from minigrad.gpt import GPT, GPTConfig
from minigrad.testing import gradcheck

from on_device import to_host

PUBLISHED = {  # transformers' model.num_parameters(); BERT's with a Linear(hidden, 2) classifier added
    "bert-base-uncased": 109_482_240 + 1_538,
    "bert-large-uncased": 335_141_888 + 2_050,
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
}
TINY_BERT = dict(vocab_size=11, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16,
                 max_position_embeddings=8)
TINY_GPT2 = dict(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=8)
NO_DROPOUT = {"bert": dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), "gpt2": dict(dropout=0.0)}


def tiny(family, **kw):
    """(registry name, overrides) of a tiny model of the family, without dropout unless kw says otherwise."""
    name, base = ("bert-base-uncased", TINY_BERT) if family == "bert" else ("gpt2", TINY_GPT2)
    return name, {**base, **NO_DROPOUT[family], **kw}


def padded_bert_batch(device=None):
    """Three sequences of 6 with padding at the end of two, token 0 (the padding id) among the ids, both token types."""
    ids = mg.tensor([[2, 5, 0, 7, 1, 3], [4, 4, 9, 2, 0, 0], [10, 3, 6, 8, 5, 0]], device=device)
    mask = mg.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0]], device=device)
    token_types = mg.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1]], device=device)
    labels = mg.tensor([1, 0, 1], device=device)
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=token_types, labels=labels)


# ----------------------------------------------------------------------------- parameter counts

@pytest.mark.parametrize("name", list(PUBLISHED))
def test_the_formula_gives_the_published_count(name):
    assert models.parameter_count(name) == PUBLISHED[name] == models.MODELS[name].parameters
    assert models.MODELS[name].source


def test_bert_model_without_the_head_has_the_published_count():
    for name, base in (("bert-base-uncased", 109_482_240), ("bert-large-uncased", 335_141_888)):
        C = models.MODELS[name].config.hidden_size
        assert models.parameter_count(name) - (C * 2 + 2) == base


@pytest.mark.parametrize("name, overrides", [
    tiny("bert"), tiny("bert", num_labels=5, type_vocab_size=3, intermediate_size=12),
    tiny("gpt2"), tiny("gpt2", tie_word_embeddings=False), tiny("gpt2", bias=False, n_layer=3),
])
def test_the_formula_equals_a_built_model(name, overrides):
    assert models.parameter_count(name, **overrides) == models.count_parameters(models.build(name, **overrides))


def test_bert_base_and_gpt2_built_for_real_have_the_published_counts():
    bert = models.build("bert-base-uncased")
    assert models.count_parameters(bert) == PUBLISHED["bert-base-uncased"]
    assert models.count_parameters(bert.bert) == 109_482_240
    names = dict(bert.named_parameters())
    assert names["bert.encoder.layer.11.attention.self.query.weight"].shape == (768, 768)
    assert names["bert.encoder.layer.11.intermediate.dense.weight"].shape == (3072, 768)
    assert names["classifier.weight"].shape == (2, 768)
    del bert, names
    gpt2 = models.build("gpt2")
    assert models.count_parameters(gpt2) == PUBLISHED["gpt2"]
    assert gpt2.lm_head.weight is gpt2.wte.weight and gpt2.wte.weight.shape == (50257, 768)
    assert gpt2.wpe.weight.shape == (1024, 768)


# ----------------------------------------------------------------------------- the registry's functions

def test_build_follows_the_config_device_dtype_and_checkpointing():
    name, kw = tiny("bert")
    model = models.build(name, dtype="float64", gradient_checkpointing=True, **kw)
    assert all(p.dtype == mg.float64 for p in model.parameters())
    assert model.bert.encoder.gradient_checkpointing and model.config.hidden_size == 8
    name, kw = tiny("gpt2")
    gpt = models.build(name, gradient_checkpointing=True, **kw)
    assert gpt.config.gradient_checkpointing and gpt.config.tie_word_embeddings
    assert gpt.config.gelu_approximate == "tanh"
    assert not models.MODELS["gpt2"].config.gradient_checkpointing  # the registry's config is copied, not changed
    assert models.MODELS["gpt2"].config.n_layer == 12


def test_the_registry_has_the_published_shapes():
    gpt2_xl = models.MODELS["gpt2-xl"].config
    assert (gpt2_xl.n_layer, gpt2_xl.n_head, gpt2_xl.n_embd, gpt2_xl.block_size, gpt2_xl.vocab_size) == \
        (48, 25, 1600, 1024, 50257)
    assert gpt2_xl.dropout == 0.1
    large = models.MODELS["bert-large-uncased"].config
    assert (large.num_hidden_layers, large.num_attention_heads, large.hidden_size, large.intermediate_size) == \
        (24, 16, 1024, 4096)
    assert (large.hidden_act, large.layer_norm_eps, large.max_position_embeddings, large.attn_implementation) == \
        ("gelu", 1e-12, 512, "eager")
    assert models.positions("bert-large-uncased") == 512 and models.positions("gpt2-xl") == 1024


@pytest.mark.parametrize("name", ["bert-base-uncased", "gpt2-large"])
def test_example_batch_has_the_forwards_keywords(name):
    batch = models.example_batch(name, batch_size=3, seq_len=7)
    cfg = models.MODELS[name].config
    if name.startswith("bert"):
        assert sorted(batch) == ["attention_mask", "input_ids", "labels", "token_type_ids"]
        assert batch["input_ids"].shape == (3, 7) and batch["labels"].shape == (3,)
        assert (batch["attention_mask"].numpy() == 1).all() and (batch["token_type_ids"].numpy() == 0).all()
        assert set(batch["labels"].numpy()) <= {0, 1}
        assert 0 <= batch["input_ids"].numpy().min() and batch["input_ids"].numpy().max() < cfg.vocab_size
    else:
        assert sorted(batch) == ["idx", "targets"]
        assert batch["idx"].shape == batch["targets"].shape == (3, 7)
        assert batch["targets"].numpy().max() < cfg.vocab_size
    assert all(t.dtype == mg.int64 for t in batch.values())
    mg.manual_seed(1)
    again = models.example_batch(name, batch_size=3, seq_len=7)
    mg.manual_seed(1)
    assert all((again[k].numpy() == v.numpy()).all() for k, v in models.example_batch(name, 3, 7).items())


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_loss_of_runs_forward_and_backward_and_every_parameter_gets_a_gradient(family):
    name, kw = tiny(family, **({"hidden_dropout_prob": 0.1} if family == "bert" else {"dropout": 0.1}))
    model = models.build(name, **kw)
    batch = models.example_batch(name, batch_size=4, seq_len=6, **kw)
    loss = models.loss_of(model, batch)
    assert loss.shape == () and loss.dtype == mg.float32
    classes = kw["vocab_size"] if family == "gpt2" else 2
    assert abs(loss.item() - math.log(classes)) < 0.1  # N(0, 0.02) weights: nearly uniform predictions
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not np.isfinite(p.grad.numpy()).all()]
    assert not missing


def test_errors_name_what_would_fit():
    with pytest.raises(ValueError, match=r"unknown model 'gpt2-xxl' \(did you mean 'gpt2-xl'\?\); the known "
                                         r"models are: bert-base-uncased, bert-large-uncased, gpt2, gpt2-medium"):
        models.build("gpt2-xxl")
    with pytest.raises(ValueError, match=r"the known models are"):
        models.parameter_count("resnet50")
    with pytest.raises(ValueError, match=r"seq_len must be between 1 and 512, the model's number of positions, "
                                         r"got 513"):
        models.example_batch("bert-large-uncased", batch_size=2, seq_len=513)
    with pytest.raises(ValueError, match=r"between 1 and 1024.*got 2048"):
        models.example_batch("gpt2-xl", batch_size=1, seq_len=2048)
    with pytest.raises(ValueError, match=r"batch_size must be a whole number of at least 1, got 0"):
        models.example_batch("gpt2", batch_size=0, seq_len=16)
    with pytest.raises(TypeError, match=r"GPTConfig has no field 'hidden_size'; its fields are \['vocab_size'"):
        models.build("gpt2", hidden_size=8)
    name, kw = tiny("bert")
    batch = models.example_batch(name, 2, 4, **kw)
    with pytest.raises(ValueError, match=r"returned logits only.*keys are \['input_ids'\]"):
        models.loss_of(models.build(name, **kw), {"input_ids": batch["input_ids"]})


def test_bert_config_and_forward_errors():
    with pytest.raises(ValueError, match=r"attn_implementation must be one of \['eager', 'sdpa'\], got 'flash'"):
        BertConfig(attn_implementation="flash")
    with pytest.raises(ValueError, match=r"hidden_size=10 must be divisible by num_attention_heads=4"):
        BertConfig(hidden_size=10, num_attention_heads=4)
    with pytest.raises(ValueError, match=r"hidden_act must be one of \['gelu', 'gelu_new'\], got 'swish'"):
        BertConfig(hidden_act="swish")
    model = BertForSequenceClassification(BertConfig(**TINY_BERT))
    with pytest.raises(ValueError, match=r"sequence length 9 is longer than max_position_embeddings 8"):
        model(mg.zeros(1, 9, dtype="int64"))
    with pytest.raises(ValueError, match=r"attention_mask must have input_ids' shape \(2, 3\), got \(2, 4\)"):
        model(mg.zeros(2, 3, dtype="int64"), attention_mask=mg.ones(2, 4, dtype="int64"))
    with pytest.raises(TypeError, match=r"input_ids must be an integer tensor of shape \(B, T\), got float32 \(2, 3\)"):
        model(mg.zeros(2, 3))


# ----------------------------------------------------------------------------- BERT's forward and backward

def test_bert_outputs_and_hugging_faces_layout():
    name, kw = tiny("bert")
    model = models.build(name, **kw)
    batch = padded_bert_batch()
    sequence_output, pooled = model.bert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    assert sequence_output.shape == (3, 6, 8) and pooled.shape == (3, 8)
    assert model(batch["input_ids"]).shape == (3, 2)  # no labels: logits alone
    assert (model.bert.embeddings.word_embeddings.weight.detach().numpy()[0] == 0).all()  # padding row, as HF
    assert abs(model.bert.encoder.layer[0].attention.self.query.weight.detach().numpy().std() - 0.02) < 0.01
    names = [n for n, _ in model.named_parameters()]
    assert names[:5] == ["bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
                         "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
                         "bert.embeddings.LayerNorm.bias"]
    assert names[5:21] == [f"bert.encoder.layer.0.{m}.{p}" for m in (
        "attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
        "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm")
        for p in ("weight", "bias")]
    assert names[-4:] == ["bert.pooler.dense.weight", "bert.pooler.dense.bias", "classifier.weight", "classifier.bias"]


def test_padding_changes_nothing_at_the_positions_that_attend():
    """The additive mask gives padded keys a probability of exactly 0: what sits there cannot matter."""
    name, kw = tiny("bert")
    model = models.build(name, **kw)
    batch = padded_bert_batch()
    out, _ = model.bert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    ids = batch["input_ids"].numpy().copy()
    ids[1, 4:] = [7, 3]
    ids[2, 5] = 9
    out2, _ = model.bert(mg.tensor(ids), batch["attention_mask"], batch["token_type_ids"])
    np.testing.assert_array_equal(out.detach().numpy()[0], out2.detach().numpy()[0])
    np.testing.assert_array_equal(out.detach().numpy()[1, :4], out2.detach().numpy()[1, :4])
    np.testing.assert_array_equal(out.detach().numpy()[2, :5], out2.detach().numpy()[2, :5])
    assert not np.array_equal(out.detach().numpy()[1, 4:], out2.detach().numpy()[1, 4:])  # padded positions change
    unmasked, _ = model.bert(mg.tensor(ids), None, batch["token_type_ids"])
    assert not np.array_equal(out2.detach().numpy()[1, :4], unmasked.detach().numpy()[1, :4])


def test_bert_gradcheck_in_float64():
    name, kw = tiny("bert")
    model = models.build(name, dtype="float64", **kw)
    b = padded_bert_batch()
    # id 0 (the padding row, which gets no gradient by design, as in HF) only where the mask hides it: there its
    # true derivative is 0 too
    b["input_ids"] = mg.tensor([[2, 5, 6, 7, 1, 3], [4, 4, 9, 2, 0, 0], [10, 3, 6, 8, 5, 0]])
    layer0, layer1 = model.bert.encoder.layer
    checked = [model.bert.embeddings.word_embeddings.weight, model.bert.embeddings.token_type_embeddings.weight,
               model.bert.embeddings.LayerNorm.weight, layer0.attention.self.query.weight,
               layer0.attention.self.key.bias, layer0.attention.self.value.weight,
               layer0.attention.output.LayerNorm.bias, layer0.intermediate.dense.weight,
               layer1.output.dense.bias, layer1.output.LayerNorm.weight, model.bert.pooler.dense.weight,
               model.classifier.weight]

    def logits_and_loss(*_):  # the checked parameters are the model's own: gradcheck perturbs them in place
        logits, loss = model(b["input_ids"], b["attention_mask"], b["token_type_ids"], labels=b["labels"])
        return logits + loss

    assert gradcheck(logits_and_loss, checked, name="BertForSequenceClassification")


def test_bert_checkpointing_gives_bit_identical_gradients_with_dropout():
    name, kw = tiny("bert", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    grads, recompute = [], []
    for flag in (False, True):
        mg.manual_seed(3)
        model = models.build(name, gradient_checkpointing=flag, **kw)
        batch = padded_bert_batch()
        with mg.profile() as prof:
            models.loss_of(model, batch).backward()
        grads.append({n: p.grad.numpy() for n, p in model.named_parameters()})
        recompute.append(prof.flops("recompute"))
    assert recompute[0] == 0 and recompute[1] > 0
    for n in grads[0]:
        np.testing.assert_array_equal(grads[0][n], grads[1][n], err_msg=n)


def test_bert_checkpoints_only_in_training_as_hugging_face():
    name, kw = tiny("bert")
    model = models.build(name, gradient_checkpointing=True, **kw).eval()
    with mg.profile() as prof:
        models.loss_of(model, padded_bert_batch()).backward()
    assert prof.flops("recompute") == 0


def test_bert_dropout_only_in_training():
    name, kw = tiny("bert", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    model = models.build(name, **kw)
    b = padded_bert_batch()
    assert not np.array_equal(model(b["input_ids"]).detach().numpy(), model(b["input_ids"]).detach().numpy())
    model.eval()
    np.testing.assert_array_equal(model(b["input_ids"]).detach().numpy(), model(b["input_ids"]).detach().numpy())


# ----------------------------------------------------------------------------- GPT-2: the tied head

def test_a_tied_head_is_one_parameter_for_names_optimizers_zero_grad_and_the_profile():
    name, kw = tiny("gpt2", dropout=0.1)
    model = models.build(name, **kw)
    assert model.lm_head.weight is model.wte.weight
    names = [n for n, _ in model.named_parameters()]
    assert "wte.weight" in names and "lm_head.weight" not in names and len(names) == len(set(names))
    state = model.state_dict()  # both names, as PyTorch's state_dict lists a tied weight
    np.testing.assert_array_equal(to_host(state["wte.weight"]), to_host(state["lm_head.weight"]))
    model.load_state_dict(state)
    assert model.lm_head.weight is model.wte.weight

    opt = mg.optim.AdamW(model.parameters(), lr=1e-3)
    batch = models.example_batch(name, 2, 8, **kw)
    models.loss_of(model, batch).backward()
    opt.step()  # a warm-up step: AdamW's moments exist
    assert len(opt.state) == len(names)
    param_bytes = models.count_parameters(model) * 4
    with mg.profile(model, opt) as prof:
        opt.zero_grad()
        models.loss_of(model, batch).backward()
        opt.step()
    assert prof.peak_bytes("parameters") == param_bytes  # the tied weight counted once, as its optimizer state
    assert prof.peak_bytes("optimizer") == 2 * param_bytes
    model.zero_grad()
    assert model.wte.weight.grad is None and model.lm_head.weight.grad is None


def _gradient_peak(tie):
    name, kw = tiny("gpt2", tie_word_embeddings=tie)
    model = models.build(name, **kw)
    batch = models.example_batch(name, 2, 8, **kw)
    with mg.profile(model) as prof:
        models.loss_of(model, batch).backward()
    return prof.peak_bytes("gradients"), models.count_parameters(model) * 4


def test_gradients_peak_at_one_buffer_per_parameter_without_a_tie():
    peak, param_bytes = _gradient_peak(tie=False)
    assert peak == param_bytes


def test_a_tied_weights_two_gradients_add_in_place_as_in_pytorch():
    peak, param_bytes = _gradient_peak(tie=True)
    assert peak == param_bytes


def test_the_tied_gradient_is_the_sum_of_both_uses():
    name, kw = tiny("gpt2")
    tied = models.build(name, dtype="float64", **kw)
    untied = models.build(name, dtype="float64", **{**kw, "tie_word_embeddings": False})
    untied.load_state_dict(tied.state_dict())  # lm_head.weight gets its own copy of wte.weight
    batch = models.example_batch(name, 3, 8, **kw)
    loss_tied, loss_untied = models.loss_of(tied, batch), models.loss_of(untied, batch)
    assert loss_tied.item() == loss_untied.item()
    loss_tied.backward()
    loss_untied.backward()
    both_uses = untied.wte.weight.grad.numpy() + untied.lm_head.weight.grad.numpy()
    np.testing.assert_allclose(tied.wte.weight.grad.numpy(), both_uses, rtol=1e-12, atol=1e-15)


def test_gpt2_gradcheck_in_float64_with_the_tied_head_and_tanh_gelu():
    name, kw = tiny("gpt2")
    model = models.build(name, dtype="float64", **kw)
    batch = models.example_batch(name, 2, 5, **kw)
    checked = [model.wte.weight, model.wpe.weight, model.h[0].attn.c_attn.weight, model.h[1].mlp.c_fc.weight,
               model.h[1].ln_2.bias, model.ln_f.weight]
    assert gradcheck(lambda *_: model(batch["idx"]), checked, name="GPT-2 (tied)")


def test_the_small_gpts_defaults_are_unchanged():
    """The lessons' GPT keeps its own head and exact GELU: its numbers do not move."""
    model = GPT(GPTConfig())
    assert model.lm_head.weight is not model.wte.weight and model.h[0].mlp.gelu.approximate == "none"
    with pytest.raises(ValueError, match=r"gelu_approximate must be 'none' \(exact\) or 'tanh' \(GPT-2's\), got 'fa"):
        GPT(GPTConfig(gelu_approximate="fast"))


# ----------------------------------------------------------------------------- against PyTorch

def _torch_params(torch, model):
    return {n: torch.tensor(p.detach().numpy(), requires_grad=True) for n, p in model.named_parameters()}


def _torch_bert(torch, P, cfg, ids, mask, token_types, labels):
    """Hugging Face's BertForSequenceClassification, eager attention and no dropout, written out in torch."""
    Fn = torch.nn.functional
    B, T = ids.shape
    C, nh = cfg.hidden_size, cfg.num_attention_heads
    hs = C // nh

    def lin(x, name):
        return Fn.linear(x, P[name + ".weight"], P[name + ".bias"])

    def ln(x, name):
        return Fn.layer_norm(x, (C,), P[name + ".weight"], P[name + ".bias"], cfg.layer_norm_eps)

    e = "bert.embeddings."
    h = (Fn.embedding(ids, P[e + "word_embeddings.weight"], padding_idx=cfg.pad_token_id)
         + Fn.embedding(token_types, P[e + "token_type_embeddings.weight"])
         + Fn.embedding(torch.arange(T), P[e + "position_embeddings.weight"]))
    h = ln(h, e + "LayerNorm")
    extended = (1.0 - mask[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
    for i in range(cfg.num_hidden_layers):
        p = f"bert.encoder.layer.{i}."
        q, k, v = (lin(h, p + "attention.self." + n).view(B, T, nh, hs).transpose(1, 2)
                   for n in ("query", "key", "value"))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hs) + extended, dim=-1)
        context = (probs @ v).transpose(1, 2).reshape(B, T, C)
        a = ln(lin(context, p + "attention.output.dense") + h, p + "attention.output.LayerNorm")
        h = ln(lin(Fn.gelu(lin(a, p + "intermediate.dense")), p + "output.dense") + a, p + "output.LayerNorm")
    logits = lin(torch.tanh(lin(h[:, 0], "bert.pooler.dense")), "classifier")
    return logits, Fn.cross_entropy(logits, labels)


def _torch_gpt2(torch, P, cfg, idx, targets):
    """GPT-2 (Hugging Face's GPT2LMHeadModel without dropout) written out in torch, the head tied to wte."""
    Fn = torch.nn.functional
    B, T = idx.shape
    C, nh = cfg.n_embd, cfg.n_head

    def lin(x, name):
        return Fn.linear(x, P[name + ".weight"], P[name + ".bias"])

    def ln(x, name):
        return Fn.layer_norm(x, (C,), P[name + ".weight"], P[name + ".bias"], 1e-5)

    h = P["wte.weight"][idx] + P["wpe.weight"][torch.arange(T)]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    for i in range(cfg.n_layer):
        p = f"h.{i}."
        qkv = lin(ln(h, p + "ln_1"), p + "attn.c_attn")
        q, k, v = (t.view(B, T, nh, C // nh).transpose(1, 2) for t in qkv.split(C, 2))
        att = (q @ k.transpose(-1, -2) / math.sqrt(C // nh)).masked_fill(future, float("-inf")).softmax(-1)
        h = h + lin((att @ v).transpose(1, 2).reshape(B, T, C), p + "attn.c_proj")
        h = h + lin(Fn.gelu(lin(ln(h, p + "ln_2"), p + "mlp.c_fc"), approximate="tanh"), p + "mlp.c_proj")
    logits = ln(h, "ln_f") @ P["wte.weight"].T
    return logits, Fn.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))


def _compare(torch, model, P, logits, loss, t_logits, t_loss):
    np.testing.assert_allclose(logits.detach().numpy(), t_logits.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(loss.item(), t_loss.item(), rtol=1e-12)
    loss.backward()
    t_loss.backward()
    for n, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), P[n].grad.numpy(), rtol=1e-8, atol=1e-12, err_msg=n)


@pytest.mark.torch
def test_bert_matches_a_hand_written_pytorch_bert():
    torch = pytest.importorskip("torch")
    name, kw = tiny("bert")
    model = models.build(name, dtype="float64", **kw)
    b = padded_bert_batch()
    logits, loss = model(**b)
    P = _torch_params(torch, model)
    t = {k: torch.tensor(v.numpy()) for k, v in b.items()}
    t_logits, t_loss = _torch_bert(torch, P, model.config, t["input_ids"], t["attention_mask"], t["token_type_ids"],
                                   t["labels"])
    _compare(torch, model, P, logits, loss, t_logits, t_loss)
    assert not P["bert.embeddings.word_embeddings.weight"].grad[0].any()  # the padding row learns nothing, in both


@pytest.mark.torch
def test_gpt2_matches_a_hand_written_pytorch_gpt2():
    torch = pytest.importorskip("torch")
    name, kw = tiny("gpt2")
    model = models.build(name, dtype="float64", **kw)
    b = models.example_batch(name, 3, 8, **kw)
    logits, loss = model(**b)
    P = _torch_params(torch, model)
    idx, targets = torch.tensor(b["idx"].numpy()), torch.tensor(b["targets"].numpy())
    _compare(torch, model, P, logits, loss, *_torch_gpt2(torch, P, model.config, idx, targets))
