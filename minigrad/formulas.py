"""Closed forms, derived by hand, that the ledger's measurements must equal (pure functions).

Lessons print them next to what mg.profile measured; tests assert the two are equal.
"""


def mlp_saved_bytes(batch, sizes, itemsize=4):
    """Activation bytes an MLP of Linear -> Tanh layers keeps for backward, with a data batch
    that needs no gradient. sizes = [in, hidden_1, ..., out].

    Derivation, layer by layer (B = batch):
      linear i saves its input (B x sizes[i]), which dW = g^T x needs; it would save W for
        dx = g W, but W is a parameter, already counted as one, and the first layer's input
        needs no dx anyway;
      tanh i saves its output (B x sizes[i+1]), since d tanh = 1 - y^2 needs y; that same
        array is the next linear's input, so the two saves are one buffer.
    Total: B * (sizes[0] + sizes[1] + ... + sizes[L]) elements: the input and every layer's
    output, once each. (ReLU saves its output too: the same count.)
    """
    return batch * sum(sizes) * itemsize


def mlp_matmul_flops(batch, sizes, input_requires_grad=False):
    """(forward, backward) matrix-product FLOPs of one step of that MLP.

    Forward: each layer is a (B x in) @ (in x out) product, 2 B in out FLOPs.
    Backward: dW = g^T x and dx = g W cost the same again each, so twice the forward; but the
    first layer's dx is skipped when the input needs no gradient.
    """
    per_layer = [2 * batch * a * b for a, b in zip(sizes[:-1], sizes[1:])]
    forward = sum(per_layer)
    backward = 2 * forward - (0 if input_requires_grad else per_layer[0])
    return forward, backward


def attention_matmul_flops(batch, seq, n_embd):
    """Forward matrix-product FLOPs of one causal self-attention layer (B, T, C), any head count.

      q, k, v = x W_qkv:      2 B T C (3C)
      scores  = q k^T:        2 B T T C   (per head 2 B T T hs; the heads' hs add up to C)
      y       = att v:        2 B T T C
      out     = y W_proj:     2 B T C C
    Total 8 B T C^2 + 4 B T^2 C. The causal mask does not save work here: minigrad computes the
    full T x T scores and then masks them, as a plain implementation does.
    """
    B, T, C = batch, seq, n_embd
    return 8 * B * T * C * C + 4 * B * T * T * C
