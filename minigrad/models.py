"""Full-size models by the names of their public checkpoints, with their published parameter counts.

    model = models.build("bert-large-uncased", gradient_checkpointing=True)
    batch = models.example_batch("bert-large-uncased", batch_size=8, seq_len=512)
    models.loss_of(model, batch).backward()

Each is built with minigrad's own nn (bert.py, gpt.py): the checkpoint's architecture and shapes, with
random weights. BERT's are Hugging Face's BertForSequenceClassification with the 2-label head that
fine-tuning recipes train; GPT-2's are nanoGPT's names (`h.0.attn.c_attn.weight`: Hugging Face's without
`transformer.`; HF's Conv1D stores that weight transposed) with the LM head tied to the token embedding.

parameter_count(name) counts by formula from the config alone, so that the published numbers can be
checked without materialising gpt2-xl (1.56 billion parameters, 6.2 GB in float32).

Read next: plan.py, which runs their training step on the 'meta' device to predict its memory.
"""
import dataclasses
import difflib
import functools
from dataclasses import dataclass

from .bert import BertConfig, BertForSequenceClassification, extended_attention_mask
from .gpt import GPT, GPTConfig
from .tensor import arange, ones, randint, zeros


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str       # 'bert' or 'gpt2'
    config: object    # a BertConfig or a GPTConfig; build() copies it, never changes it
    parameters: int   # the published count of the model that build() returns
    source: str


def _bert(name, hidden, layers, heads, parameters, source):
    cfg = BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=4 * hidden)
    return ModelSpec(name, "bert", cfg, parameters, source)


def _gpt2(name, n_embd, n_layer, n_head, parameters, source):
    cfg = GPTConfig(vocab_size=50257, block_size=1024, n_layer=n_layer, n_head=n_head, n_embd=n_embd, dropout=0.1,
                    bias=True, tie_word_embeddings=True, gelu_approximate="tanh")
    return ModelSpec(name, "gpt2", cfg, parameters, source)


# BERT: BertModel's count (embeddings, 12 or 24 layers, pooler) as transformers' num_parameters() reports it,
# plus the classifier Linear(hidden, 2). GPT-2: GPT2LMHeadModel's num_parameters(), the tied head counted once.
_HF = "huggingface.co/{}/config.json; transformers {}.num_parameters() = {:,}"
MODELS = {spec.name: spec for spec in [
    _bert("bert-base-uncased", 768, 12, 12, 109_482_240 + 1_538,
          _HF.format("google-bert/bert-base-uncased", "BertModel", 109_482_240) + " (+1,538 for a 2-label head)"),
    _bert("bert-large-uncased", 1024, 24, 16, 335_141_888 + 2_050,
          _HF.format("google-bert/bert-large-uncased", "BertModel", 335_141_888) + " (+2,050 for a 2-label head)"),
    _gpt2("gpt2", 768, 12, 12, 124_439_808,
          _HF.format("openai-community/gpt2", "GPT2LMHeadModel", 124_439_808)),
    _gpt2("gpt2-medium", 1024, 24, 16, 354_823_168,
          _HF.format("openai-community/gpt2-medium", "GPT2LMHeadModel", 354_823_168)),
    _gpt2("gpt2-large", 1280, 36, 20, 774_030_080,
          _HF.format("openai-community/gpt2-large", "GPT2LMHeadModel", 774_030_080)),
    _gpt2("gpt2-xl", 1600, 48, 25, 1_557_611_200,
          _HF.format("openai-community/gpt2-xl", "GPT2LMHeadModel", 1_557_611_200)),
]}


def spec(name):
    """The registry's entry for `name`; an unknown name gets a ValueError listing the known ones."""
    if name in MODELS:
        return MODELS[name]
    lower = {m.lower(): m for m in MODELS}  # GPT2-XXL: close to gpt2-xl once the case is set aside
    close = [lower[m] for m in difflib.get_close_matches(str(name).lower(), lower, n=1)]
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"unknown model {name!r}{hint}; the known models are: {', '.join(MODELS)}")


def config(name, **config_overrides):
    """A copy of the model's config with the given fields changed (config('gpt2', n_layer=2))."""
    s = spec(name)
    fields = [f.name for f in dataclasses.fields(s.config)]
    unknown = sorted(set(config_overrides) - set(fields))
    if unknown:
        raise TypeError(f"{name}: {type(s.config).__name__} has no field {', '.join(map(repr, unknown))}; "
                        f"its fields are {fields}")
    return dataclasses.replace(s.config, **config_overrides)


def build(name, device=None, dtype=None, gradient_checkpointing=False, **config_overrides):
    """The model, with random weights (the checkpoint's init), on `device` and in `dtype` (default float32).

    gradient_checkpointing=True recomputes every transformer block in backward (Hugging Face's
    gradient_checkpointing_enable()); config_overrides change the config, e.g. n_layer=2 for a small copy.
    """
    cfg = config(name, **config_overrides)
    if spec(name).family == "bert":
        model = BertForSequenceClassification(cfg, device=device)
        model.bert.encoder.gradient_checkpointing = gradient_checkpointing
    else:
        model = GPT(dataclasses.replace(cfg, gradient_checkpointing=gradient_checkpointing), device=device)
    return model.to(dtype=dtype) if dtype is not None else model


def set_checkpointing(model, segments, policy=None):
    """Checkpoint the model's transformer blocks: False, True (every block) or segments [(lo, hi), ...], each
    keeping what `policy` (one of mg.checkpoint_policies; None: nothing) says rather than recomputing it."""
    if isinstance(model, BertForSequenceClassification):
        model.bert.encoder.gradient_checkpointing = segments
        model.bert.encoder.checkpoint_policy = policy
    else:
        model.config = dataclasses.replace(model.config, gradient_checkpointing=segments, checkpoint_policy=policy)


def blocks_and_input(model, batch):
    """The transformer blocks as one-argument functions, and what the first one reads (the embeddings' output):
    the chain that schedules.py plans for (checkpoint.measure_chain measures it)."""
    if isinstance(model, BertForSequenceClassification):
        bert = model.bert
        mask = extended_attention_mask(batch["attention_mask"], bert.embeddings.word_embeddings.weight.dtype)
        x = bert.embeddings(batch["input_ids"], batch["token_type_ids"])                  # (B, T, C)
        return [functools.partial(layer, attention_mask=mask) for layer in bert.encoder.layer], x
    idx = batch["idx"]
    x = model.drop(model.wte(idx) + model.wpe(arange(idx.shape[1], device=idx.device)))   # (B, T, C)
    return list(model.h), x


def positions(name, **config_overrides):
    """The longest sequence the model reads: its position embeddings' count."""
    cfg = config(name, **config_overrides)
    return cfg.max_position_embeddings if spec(name).family == "bert" else cfg.block_size


def example_batch(name, batch_size, seq_len, device=None, **config_overrides):
    """The keyword inputs of the model's forward, labels included, with random token ids from minigrad's
    generator: BERT input_ids, attention_mask (ones), token_type_ids (zeros) (B, T) and labels (B,);
    GPT-2 idx and targets (B, T)."""
    cfg = config(name, **config_overrides)
    longest = positions(name, **config_overrides)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"example_batch({name!r}): batch_size must be a whole number of at least 1, "
                         f"got {batch_size!r}")
    if not isinstance(seq_len, int) or not 1 <= seq_len <= longest:
        raise ValueError(f"example_batch({name!r}): seq_len must be between 1 and {longest}, the model's number of "
                         f"positions, got {seq_len!r}; longer texts are cut into windows of at most {longest} tokens")
    shape = (batch_size, seq_len)
    if spec(name).family == "bert":
        return dict(input_ids=randint(0, cfg.vocab_size, shape, device=device),
                    attention_mask=ones(*shape, dtype="int64", device=device),
                    token_type_ids=zeros(*shape, dtype="int64", device=device),
                    labels=randint(0, cfg.num_labels, (batch_size,), device=device))
    return dict(idx=randint(0, cfg.vocab_size, shape, device=device),
                targets=randint(0, cfg.vocab_size, shape, device=device))


def loss_of(model, batch):
    """The scalar loss of model(**batch): BERT's cross-entropy over labels, GPT-2's over next tokens."""
    out = model(**batch)
    if not isinstance(out, tuple):
        raise ValueError(f"loss_of: {type(model).__name__} returned logits only, so the batch has no labels (BERT) "
                         f"or targets (GPT-2); its keys are {sorted(batch)}. Make it with example_batch(...)")
    return out[1]


def count_parameters(model):
    """The number of parameter elements, each Parameter once (a tied weight is one)."""
    return sum(p.numel() for p in model.parameters())


def parameter_count(name, **config_overrides):
    """The parameter count of build(name, **config_overrides), by formula from the config alone."""
    cfg = config(name, **config_overrides)
    if spec(name).family == "bert":
        C, I, L = cfg.hidden_size, cfg.intermediate_size, cfg.num_labels
        embeddings = (cfg.vocab_size + cfg.max_position_embeddings + cfg.type_vocab_size) * C + 2 * C
        # query, key, value, output dense (C^2 + C each); intermediate C -> I; output I -> C; two LayerNorms
        layer = 4 * (C * C + C) + (C * I + I) + (I * C + C) + 2 * 2 * C
        pooler, classifier = C * C + C, C * L + L
        return embeddings + cfg.num_hidden_layers * layer + pooler + classifier
    C, V = cfg.n_embd, cfg.vocab_size
    embeddings = (V + cfg.block_size) * C
    # c_attn C -> 3C, c_proj C -> C, c_fc C -> 4C, c_proj 4C -> C (12 C^2 weights, 9C biases); two LayerNorms
    layer = 12 * C * C + (9 * C if cfg.bias else 0) + 2 * 2 * C
    head = 0 if cfg.tie_word_embeddings else V * C
    return embeddings + cfg.n_layer * layer + 2 * C + head
