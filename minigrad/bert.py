"""BERT as Hugging Face's transformers writes it, in minigrad's nn: the same classes, attributes and
parameter names, so that `bert.encoder.layer.0.attention.self.query.weight` here is the tensor of that
name in `transformers.BertForSequenceClassification`.

    cfg = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    model = BertForSequenceClassification(cfg)              # bert-large-uncased's shape, random weights
    logits, loss = model(input_ids, attention_mask, labels=labels)

A post-LayerNorm encoder (x = LayerNorm(x + sublayer(x))), unlike GPT's pre-LayerNorm blocks; exact
(erf) GELU; dropout 0.1 after the embeddings, on the attention probabilities, after each sublayer and
before the classifier; 'eager' attention, which keeps its (B, nh, T, T) probabilities for backward.
The weights are random (HF's init, N(0, 0.02)); models.py names the public configurations.

Shapes in comments: B batch, T time (sequence), C channels (hidden_size), nh heads, hs head size
(C // nh), I intermediate_size, L num_labels.

Read next: models.py, the registry of full-size configurations.
"""
import math
from dataclasses import dataclass

import numpy as np

from . import functional as F
from .checkpoint import checkpoint_blocks
from . import nn
from .tensor import Tensor, arange, no_grad, ones, zeros

ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa")
ACTIVATIONS = {"gelu": "none", "gelu_new": "tanh"}  # HF's hidden_act -> nn.GELU's approximate


@dataclass
class BertConfig:
    """Hugging Face's BertConfig fields (the defaults are bert-base-uncased's)."""
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"                  # exact, erf-based GELU
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    num_labels: int = 2
    attn_implementation: str = "eager"       # 'eager' keeps the (B, nh, T, T) probabilities; 'sdpa' recomputes them
    # what the framework of the day kept (plan.Software), not in HF's config: today's PyTorch by default
    dropout_mask: object = None              # None: a 1-byte mask; a float dtype name: the older mask (nn.Dropout)
    softmax_keeps_input: bool = False        # PyTorch < 1.11's softmax also kept its input for backward

    def __post_init__(self):
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"BertConfig: hidden_size={self.hidden_size} must be divisible by "
                             f"num_attention_heads={self.num_attention_heads}")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"BertConfig: hidden_act must be one of {list(ACTIVATIONS)}, got {self.hidden_act!r}")
        if self.attn_implementation not in ATTENTION_IMPLEMENTATIONS:
            raise ValueError(f"BertConfig: attn_implementation must be one of {list(ATTENTION_IMPLEMENTATIONS)}, got "
                             f"{self.attn_implementation!r} ('eager' keeps the (B, nh, T, T) attention probabilities "
                             f"for backward, as Hugging Face's eager attention does; 'sdpa' recomputes them)")
        if self.num_labels < 2:
            raise ValueError(f"BertConfig: num_labels must be at least 2 for classification, got {self.num_labels} "
                             f"(Hugging Face's regression head for num_labels=1 is not here)")


def _init_weights(module, std):
    """Hugging Face's BertPreTrainedModel._init_weights: N(0, std) weights, zero biases, a zero padding row."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, 0.0, std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, 0.0, std)
        if module.padding_idx is not None:
            with no_grad():
                module.weight[module.padding_idx] = 0.0
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class BertEmbeddings(nn.Module):
    """Word + token type + position embeddings, then LayerNorm and dropout."""

    def __init__(self, cfg, device=None):
        C = cfg.hidden_size
        self.word_embeddings = nn.Embedding(cfg.vocab_size, C, padding_idx=cfg.pad_token_id, device=device)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, C, device=device)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, C, device=device)
        self.LayerNorm = nn.LayerNorm(C, eps=cfg.layer_norm_eps, device=device)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob, mask_dtype=cfg.dropout_mask)

    def forward(self, input_ids, token_type_ids):
        T = input_ids.shape[1]
        position_ids = arange(T, device=input_ids.device)                              # (T,)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)  # (B, T, C)
        embeddings = embeddings + self.position_embeddings(position_ids)                # (B, T, C)
        return self.dropout(self.LayerNorm(embeddings))


class BertSelfAttention(nn.Module):
    """Separate query, key and value projections; the heads attend in eager_attention."""

    def __init__(self, cfg, device=None):
        C = cfg.hidden_size
        self.num_attention_heads = cfg.num_attention_heads
        self.attention_head_size = C // cfg.num_attention_heads
        self.all_head_size = C
        self.attn_implementation, self.softmax_keeps_input = cfg.attn_implementation, cfg.softmax_keeps_input
        self.query = nn.Linear(C, C, device=device)
        self.key = nn.Linear(C, C, device=device)
        self.value = nn.Linear(C, C, device=device)
        self.dropout = nn.Dropout(cfg.attention_probs_dropout_prob, mask_dtype=cfg.dropout_mask)

    def forward(self, hidden_states, attention_mask):
        B, T, C = hidden_states.shape
        nh, hs = self.num_attention_heads, self.attention_head_size
        q, k, v = (lin(hidden_states).reshape(B, T, nh, hs).transpose(1, 2)
                   for lin in (self.query, self.key, self.value))                   # (B, nh, T, hs) each
        if self.attn_implementation == "sdpa":  # one fused op, as Hugging Face's BertSdpaSelfAttention calls it
            p = self.dropout.p if self.training else 0.0
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask, dropout_p=p)  # (B, nh, T, hs)
        else:
            context = self.eager_attention(q, k, v, attention_mask)                 # (B, nh, T, hs)
        return context.transpose(1, 2).reshape(B, T, C)                             # (B, T, C)

    def eager_attention(self, q, k, v, attention_mask):
        """softmax(q k^T / sqrt(hs) + mask) v, with dropout on the probabilities. Backward reads the
        (B, nh, T, T) probabilities (softmax's output and dropout's result): eager attention keeps them,
        where a fused kernel (scaled_dot_product_attention) would recompute them."""
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.attention_head_size)   # (B, nh, T, T)
        probs = F.softmax(scores + attention_mask, dim=-1, keep_input=self.softmax_keeps_input)  # (B, nh, T, T)
        return self.dropout(probs) @ v                                              # (B, nh, T, hs)


class BertSelfOutput(nn.Module):
    """Project the heads back, dropout, then the residual and LayerNorm (post-LayerNorm)."""

    def __init__(self, cfg, device=None):
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size, device=device)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, device=device)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob, mask_dtype=cfg.dropout_mask)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)  # (B, T, C)


class BertAttention(nn.Module):
    def __init__(self, cfg, device=None):
        self.self = BertSelfAttention(cfg, device)  # HF's name, hence `attention.self.query.weight`
        self.output = BertSelfOutput(cfg, device)

    def forward(self, hidden_states, attention_mask):
        return self.output(self.self(hidden_states, attention_mask), hidden_states)     # (B, T, C)


class BertIntermediate(nn.Module):
    def __init__(self, cfg, device=None):
        self.dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size, device=device)
        self.intermediate_act_fn = nn.GELU(approximate=ACTIVATIONS[cfg.hidden_act])

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))                     # (B, T, I)


class BertOutput(nn.Module):
    def __init__(self, cfg, device=None):
        self.dense = nn.Linear(cfg.intermediate_size, cfg.hidden_size, device=device)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, device=device)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob, mask_dtype=cfg.dropout_mask)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)  # (B, T, C)


class BertLayer(nn.Module):
    """One post-LayerNorm block: x = LN(x + attention(x)), then x = LN(x + mlp(x))."""

    def __init__(self, cfg, device=None):
        self.attention = BertAttention(cfg, device)
        self.intermediate = BertIntermediate(cfg, device)
        self.output = BertOutput(cfg, device)

    def forward(self, hidden_states, attention_mask):
        attention_output = self.attention(hidden_states, attention_mask)               # (B, T, C)
        return self.output(self.intermediate(attention_output), attention_output)      # (B, T, C)


class BertEncoder(nn.Module):
    def __init__(self, cfg, device=None):
        self.layer = nn.ModuleList(BertLayer(cfg, device) for _ in range(cfg.num_hidden_layers))
        self.gradient_checkpointing = False  # True: recompute each layer in backward instead of keeping its insides;
                                             # or the segments of layers to checkpoint, [(lo, hi), ...]
        self.checkpoint_policy = None  # what each checkpoint keeps rather than recomputes (mg.checkpoint_policies)

    def forward(self, hidden_states, attention_mask):
        # as Hugging Face: only in training, where a backward follows whose memory the recompute saves
        segments = self.gradient_checkpointing if self.training else False
        return checkpoint_blocks(self.layer, hidden_states, segments, attention_mask,
                                 policy=self.checkpoint_policy)  # (B, T, C)


class BertPooler(nn.Module):
    """dense + tanh on the first ([CLS]) token: the sentence's vector that the classifier reads."""

    def __init__(self, cfg, device=None):
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size, device=device)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))                       # (B, C)


def extended_attention_mask(attention_mask, dtype):
    """A (B, T) mask of 1 (attend) and 0 (padding) as the additive (B, 1, 1, T) mask that Hugging Face's
    get_extended_attention_mask builds: 0 where a key may be attended, the dtype's lowest number where not,
    so that the softmax gives padding exactly 0 (and never NaN, as -inf would for a row of padding)."""
    B, T = attention_mask.shape
    return (1.0 - attention_mask.to(dtype)).reshape(B, 1, 1, T) * float(np.finfo(dtype).min)


class BertModel(nn.Module):
    """Embeddings, the encoder's layers and the pooler; returns (sequence_output, pooled_output) as HF's
    BertModel does with return_dict=False."""

    def __init__(self, config, add_pooling_layer=True, device=None):
        self.config = config
        self.embeddings = BertEmbeddings(config, device)
        self.encoder = BertEncoder(config, device)
        self.pooler = BertPooler(config, device) if add_pooling_layer else None
        self.apply(lambda m: _init_weights(m, config.initializer_range))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        cfg = self.config
        if not isinstance(input_ids, Tensor) or input_ids.ndim != 2 or input_ids.dtype.kind not in "iu":
            got = f"{input_ids.dtype} {input_ids.shape}" if isinstance(input_ids, Tensor) else type(input_ids).__name__
            raise TypeError(f"BertModel: input_ids must be an integer tensor of shape (B, T), got {got}")
        B, T = input_ids.shape
        if T > cfg.max_position_embeddings:
            raise ValueError(f"BertModel: sequence length {T} is longer than max_position_embeddings "
                             f"{cfg.max_position_embeddings}; cut the input to at most that many tokens")
        for name, t in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids)):
            if t is not None and tuple(t.shape) != (B, T):
                raise ValueError(f"BertModel: {name} must have input_ids' shape ({B}, {T}), got {tuple(t.shape)}")
        if token_type_ids is None:
            token_type_ids = zeros(B, T, dtype="int64", device=input_ids.device)
        if attention_mask is None:  # HF's eager path adds a mask of ones (a mask of zeros) all the same
            attention_mask = ones(B, T, dtype="int64", device=input_ids.device)
        mask = extended_attention_mask(attention_mask, self.embeddings.word_embeddings.weight.dtype)  # (B, 1, 1, T)
        hidden_states = self.embeddings(input_ids, token_type_ids)                      # (B, T, C)
        sequence_output = self.encoder(hidden_states, mask)                             # (B, T, C)
        pooled_output = self.pooler(sequence_output) if self.pooler is not None else None  # (B, C)
        return sequence_output, pooled_output


class BertForSequenceClassification(nn.Module):
    """BERT with the head that fine-tuning recipes train: dropout and a Linear on the pooled [CLS] vector."""

    def __init__(self, config, device=None):
        self.config = config
        self.num_labels = config.num_labels
        self.bert = BertModel(config, device=device)
        self.dropout = nn.Dropout(config.hidden_dropout_prob, mask_dtype=config.dropout_mask)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels, device=device)
        _init_weights(self.classifier, config.initializer_range)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None):
        """Logits (B, L); with labels (B,), also the mean cross-entropy: (logits, loss)."""
        _, pooled_output = self.bert(input_ids, attention_mask, token_type_ids)         # (B, C)
        logits = self.classifier(self.dropout(pooled_output))                           # (B, L)
        if labels is None:
            return logits
        loss = F.cross_entropy(logits.reshape(-1, self.num_labels), labels.reshape(-1))
        return logits, loss
