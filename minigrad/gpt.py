"""A small GPT (after nanoGPT), a character tokenizer and a tiny generated corpus.

nanoGPT's GPT is GPT-2's architecture: with a tied LM head (tie_word_embeddings) and tanh GELU
(gelu_approximate='tanh', Hugging Face's "gelu_new") the same class is GPT-2 at any size
(models.py builds gpt2 ... gpt2-xl from it). The defaults are the small model the lessons train.

Shapes in comments: B batch, T time (sequence), C channels (n_embd), nh heads, hs head size
(C // nh), V vocabulary.

Read next: bert.py, the encoder family, and models.py, both at their published sizes; lessons/,
which train this model and measure where its memory goes; formulas.py and testing.py, the checks
the tests stand on.
"""
import math
import random as _pyrandom
from dataclasses import dataclass

from . import functional as F
from .checkpoint import checkpoint_blocks
from . import nn
from .backend.random import generator
from .tensor import arange, cat, no_grad, ones, randn, tensor


@dataclass
class GPTConfig:
    vocab_size: int = 65
    block_size: int = 32     # the longest context the model sees
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True
    gradient_checkpointing: object = False  # True: recompute each block in backward instead of keeping its insides;
                                            # or the segments of blocks to checkpoint, [(lo, hi), ...]
    checkpoint_policy: object = None      # what each checkpoint keeps rather than recomputes: one of
                                          # mg.checkpoint_policies (None: nothing, recompute the whole block)
    tie_word_embeddings: bool = False     # GPT-2: lm_head.weight is wte.weight, one Parameter
    gelu_approximate: str = "none"        # GPT-2: 'tanh' (Hugging Face's "gelu_new")
    # what the framework of the day kept (plan.Software): today's PyTorch by default
    attn_implementation: str = "eager"    # 'eager' keeps the (B, nh, T, T) probabilities; 'sdpa' recomputes them
    dropout_mask: object = None           # None: a 1-byte mask; a float dtype name: the older mask (nn.Dropout)
    softmax_keeps_input: bool = False     # PyTorch < 1.11's softmax also kept its input for backward


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg, device=None):
        if cfg.n_embd % cfg.n_head:
            raise ValueError(f"GPTConfig: n_embd={cfg.n_embd} must be divisible by n_head={cfg.n_head}")
        if cfg.attn_implementation not in ("eager", "sdpa"):
            raise ValueError(f"GPTConfig: attn_implementation must be 'eager' or 'sdpa', got {cfg.attn_implementation!r}")
        self.n_head, self.n_embd = cfg.n_head, cfg.n_embd
        self.attn_implementation, self.softmax_keeps_input = cfg.attn_implementation, cfg.softmax_keeps_input
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias, device=device)  # q, k, v in one product
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias, device=device)
        self.attn_dropout = nn.Dropout(cfg.dropout, mask_dtype=cfg.dropout_mask)
        self.resid_dropout = nn.Dropout(cfg.dropout, mask_dtype=cfg.dropout_mask)

    def forward(self, x):
        B, T, C = x.shape
        nh, hs = self.n_head, C // self.n_head
        qkv = self.c_attn(x)                                                  # (B, T, 3C)
        q, k, v = (qkv[:, :, i * C:(i + 1) * C].reshape(B, T, nh, hs).transpose(1, 2)
                   for i in range(3))                                         # (B, nh, T, hs) each
        if self.attn_implementation == "sdpa":  # one fused op: keeps q, k, v, y and a log-sum-exp per row
            p = self.attn_dropout.p if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, nh, T, hs)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))           # (B, nh, T, T)
            future = ones(T, T, dtype="bool", device=x.device).triu(1)        # True above the diagonal
            att = F.softmax(att.masked_fill(future, float("-inf")), dim=-1, keep_input=self.softmax_keeps_input)
            y = self.attn_dropout(att) @ v                                    # (B, nh, T, hs)
        y = y.transpose(1, 2).reshape(B, T, C)                                # (B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg, device=None):
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias, device=device)
        self.gelu = nn.GELU(approximate=cfg.gelu_approximate)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias, device=device)
        self.dropout = nn.Dropout(cfg.dropout, mask_dtype=cfg.dropout_mask)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))             # (B, T, C)


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg, device=None):
        self.ln_1 = nn.LayerNorm(cfg.n_embd, device=device)
        self.attn = CausalSelfAttention(cfg, device)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, device=device)
        self.mlp = MLP(cfg, device)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg, device=None):
        if cfg.gelu_approximate not in ("none", "tanh"):
            raise ValueError(f"GPTConfig: gelu_approximate must be 'none' (exact) or 'tanh' (GPT-2's), "
                             f"got {cfg.gelu_approximate!r}")
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd, device=device)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd, device=device)
        self.drop = nn.Dropout(cfg.dropout, mask_dtype=cfg.dropout_mask)
        self.h = nn.ModuleList(Block(cfg, device) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, device=device)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False, device=device)
        if cfg.tie_word_embeddings:
            # one Parameter under two names: its gradient is the sum of both uses, and named_parameters(),
            # optimizers and the profile see it once (under its first name, wte.weight), as in PyTorch
            self.lm_head.weight = self.wte.weight
        self._init_weights()

    def _init_weights(self):
        # nanoGPT's init: N(0, 0.02) for weights, zero biases, residual projections scaled by 1/sqrt(2 n_layer)
        for name, p in self.named_parameters():
            if name.endswith("bias") or ".ln_" in name or name.startswith("ln_"):
                continue
            std = 0.02 / math.sqrt(2 * self.config.n_layer) if name.endswith("c_proj.weight") else 0.02
            p.data = randn(*p.shape, dtype=p.dtype, device=p.device).data * std
        for m in self.modules():
            if isinstance(m, nn.Linear) and m.bias is not None:
                m.bias.data = m.bias.data * 0

    def forward(self, idx, targets=None):
        """Logits (B, T, V) for token ids idx (B, T); with targets (B, T), also the mean cross-entropy."""
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"GPT: sequence length {T} is longer than block_size {self.config.block_size}")
        pos = arange(T, device=idx.device)                                    # (T,)
        x = self.drop(self.wte(idx) + self.wpe(pos))                          # (B, T, C)
        x = checkpoint_blocks(self.h, x, self.config.gradient_checkpointing,
                              policy=self.config.checkpoint_policy)                   # (B, T, C)
        logits = self.lm_head(self.ln_f(x))                                   # (B, T, V)
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
        return logits, loss

    @no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0):
        """Extend idx (B, T) by sampling max_new_tokens tokens, one at a time."""
        for _ in range(max_new_tokens):
            context = idx[:, -self.config.block_size:]
            logits = self(context)[:, -1, :] * (1.0 / temperature)           # (B, V)
            probs = logits.softmax(dim=-1).numpy().astype("float64")
            probs /= probs.sum(axis=-1, keepdims=True)
            nxt = [generator().choice(len(p), p=p) for p in probs]
            idx = cat([idx, tensor(nxt, device=idx.device).reshape(-1, 1)], dim=1)
        return idx


# ----------------------------------------------------------------------------- data

class CharTokenizer:
    """Characters to integer ids and back; the vocabulary is the sorted set of characters seen."""

    def __init__(self, text):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self):
        return len(self.chars)

    def encode(self, s):
        try:
            return [self.stoi[c] for c in s]
        except KeyError as e:
            raise ValueError(f"CharTokenizer: character {e.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)


_SUBJECTS = ["the cat", "the dog", "a bird", "my friend", "the old man", "the child", "a fox", "the teacher"]
_VERBS = ["sees", "likes", "finds", "follows", "draws", "hears", "helps", "calls"]
_OBJECTS = ["the ball", "a red hat", "the moon", "a small boat", "the green tree", "a song", "the river", "the door"]
_ENDINGS = [".", " today.", " at night.", " in the garden.", " again."]


def tiny_corpus(n_sentences=2000, seed=0):
    """A generated text of simple sentences: small enough to learn in seconds, with real structure."""
    rng = _pyrandom.Random(seed)
    return "\n".join(f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}{rng.choice(_ENDINGS)}"
                     for _ in range(n_sentences)) + "\n"


def get_batch(data, batch_size, block_size, device=None):
    """Random windows of the token array `data`: inputs (B, T) and the next tokens as targets (B, T)."""
    starts = generator().integers(0, len(data) - block_size - 1, size=batch_size)
    x = [data[s:s + block_size] for s in starts]
    y = [data[s + 1:s + block_size + 1] for s in starts]
    return tensor(x, device=device), tensor(y, device=device)


def unigram_entropy(data):
    """The loss (nats per token) of the best model that ignores context: the entropy of token frequencies."""
    counts = {}
    for t in data:
        counts[t] = counts.get(t, 0) + 1
    n = len(data)
    return -sum(c / n * math.log(c / n) for c in counts.values())
