"""Generated accumulation programs against the full batch (float64) and against PyTorch's accumulation loop.

tests/test_accumulate.py pins down mg.accumulate case by case; here seeded random programs draw the rest:
  full batch   a small GPT or MLP, cross_entropy (ignore_index with different ignored tokens per micro-batch,
               label_smoothing) or a summed MSE, an uneven last micro-batch, checkpointing with a policy, dropout
               (the checkpointed run against the plain one, same seed): k micro-batches give the full batch's
               gradient to float64's rounding
  PyTorch      windows of micro-batches with SGD (momentum, weight decay) steps between them, and zero_grad
               forgotten now and then: the parameters and .grad are torch's running the same loop
  the count    the items accumulate divides by must be those the loss averages over (NOTE [a loss says what it
               averages], functional.py: the loss says them to the F.loss_items() block accumulate opens around
               loss_fn, and leaves nothing on the tape's record): class probabilities (one item per row), class
               weights, a float target of -100.0, a loss_fn that ignores another index; a causal LM's loss that
               shifts its labels, counted with loss_shifts_labels=True as transformers' Trainer counts (Hugging
               Face's alignment test, ported)
  BatchNorm    in train mode with more than one micro-batch, accumulate says that the gradient is not the full
               batch's (a UserWarning); in eval mode, or in one micro-batch, it says nothing
"""
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.gpt import GPT, GPTConfig
from on_device import to_host

V = 11
POLICIES = [None, "dots_saveable", "everything_saveable", "nothing_saveable", "save_anything_except_core_attention"]


def rel_error(got, want):
    worst = 0.0
    for a, b in zip(got, want, strict=True):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        scale = float(np.abs(b).max())
        worst = max(worst, float(np.abs(a - b).max()) / (scale if scale > 0 else 1.0))
    return worst


def grads_of(model):
    return [to_host(p.grad.data).copy() for p in model.parameters()]


def mlp(dtype="float64", d_in=6, hidden=12, d_out=5, batchnorm=False):
    layers = [nn.Linear(d_in, hidden)] + ([nn.BatchNorm1d(hidden)] if batchnorm else []) + [nn.Tanh(),
                                                                                           nn.Linear(hidden, d_out)]
    return nn.Sequential(*layers).to(mg.default_device()).to(dtype)


def gpt(**kw):
    cfg = GPTConfig(vocab_size=V, block_size=6, n_layer=2, n_head=2, n_embd=8, **kw)
    return GPT(cfg).to(mg.default_device()).to("float64")


# ----------------------------------------------------------------------------- 1. generated programs, full batch

def _program(seed):
    """(model, loss_fn summed, full-batch mean loss, inputs, targets, split) drawn from the seed."""
    rng = np.random.default_rng(seed)
    mg.manual_seed(seed)
    batch = int(rng.integers(3, 8))
    split = (dict(micro_batch_size=int(rng.integers(1, batch))) if rng.random() < 0.5
             else dict(steps=int(rng.integers(2, batch + 1))))
    if seed % 3 == 2:  # a summed MSE on an MLP: every element an item
        model = mlp()
        x, y = mg.randn(batch, 6, dtype="float64"), mg.randn(batch, 5, dtype="float64")
        return model, lambda o, t: ((o - t) ** 2).sum(), lambda: F.mse_loss(model(x), y), x, y, split, rng
    smoothing = float(rng.choice([0.0, 0.1, 0.25]))
    y = rng.integers(0, V, (batch, 6))
    y[rng.random(y.shape) < rng.choice([0.2, 0.5])] = -100  # each micro-batch ignores a different number
    y[0, 0] = 3                                             # never all ignored
    policy = POLICIES[int(rng.integers(len(POLICIES)))]
    checkpointing = [False, True, [(0, 1)], [(1, 2)]][int(rng.integers(4))]
    model = gpt(gradient_checkpointing=checkpointing, tie_word_embeddings=bool(rng.random() < 0.5),
                checkpoint_policy=getattr(mg.checkpoint_policies, policy) if policy else None,
                attn_implementation=str(rng.choice(["eager", "sdpa"])))
    idx, y = mg.randint(0, V, (batch, 6)), mg.tensor(y)

    def loss_fn(out, t, reduction="sum"):
        return F.cross_entropy(out.reshape(-1, V), t.reshape(-1), reduction=reduction, label_smoothing=smoothing)
    return model, loss_fn, lambda: loss_fn(model(idx), y, "mean"), idx, y, split, rng


@pytest.mark.parametrize("seed", range(8))
def test_generated_program_k_micro_batches_give_the_full_batch_gradient(seed):
    model, loss_fn, full_mean, x, y, split, _ = _program(seed)
    model.zero_grad()
    full_mean().backward()
    want, full_loss = grads_of(model), full_mean().item()
    model.zero_grad()
    result = mg.accumulate(model, loss_fn, x, y, **split)
    err = rel_error(grads_of(model), want)
    assert err < 1e-12, f"seed {seed} ({split}): relative error {err:.2e}"
    assert abs(result.loss - full_loss) <= 1e-12 * abs(full_loss), (result.loss, full_loss)


@pytest.mark.parametrize("seed", range(3))
def test_dropout_checkpointed_accumulation_is_the_plain_one_bit_for_bit(seed):
    """Dropout draws the same masks in a checkpoint's recompute, and the RNG goes on after it as without one: the
    checkpointed accumulation is the plain one exactly (the full batch draws other masks: no reference there)."""
    policy = POLICIES[seed % len(POLICIES)]
    plain = gpt(dropout=0.3)
    ckpt = gpt(dropout=0.3, gradient_checkpointing=[True, [(0, 1)], [(1, 2)]][seed],
               checkpoint_policy=getattr(mg.checkpoint_policies, policy) if policy else None)
    ckpt.load_state_dict(plain.state_dict())
    idx, y = mg.randint(0, V, (5, 6)), mg.randint(0, V, (5, 6))

    def loss_fn(out, t):
        return F.cross_entropy(out.reshape(-1, V), t.reshape(-1), reduction="sum")
    runs = []
    for model in (plain, ckpt):
        mg.manual_seed(100 + seed)
        model.zero_grad()
        loss = mg.accumulate(model, loss_fn, idx, y, micro_batch_size=2).loss
        runs.append((grads_of(model), loss, to_host(mg.rand(4).data)))
    assert all(np.array_equal(a, b) for a, b in zip(runs[0][0], runs[1][0]))
    assert runs[0][1] == runs[1][1] and np.array_equal(runs[0][2], runs[1][2])


# ----------------------------------------------------------------------------- 2. against PyTorch's loop

@pytest.mark.torch
@pytest.mark.parametrize("seed", range(3))
def test_windows_with_steps_between_and_zero_grad_forgotten_as_torch(seed):
    """Three windows of micro-batches, an SGD step after each; before the second window zero_grad is forgotten
    (seed 1, 2), so its step takes both windows' gradients: as PyTorch's loop, the same numbers."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    model = mlp()
    tmodel = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 5)).double()
    with torch.no_grad():
        for p, q in zip(model.parameters(), tmodel.parameters()):
            q.copy_(torch.from_numpy(to_host(p.data).copy()))
    opt = mg.optim.SGD(list(model.parameters()), lr=0.1, momentum=0.9, weight_decay=0.01)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    for window in range(3):
        batch = int(rng.integers(4, 9))
        x = rng.standard_normal((batch, 6))
        y = rng.integers(0, 5, batch)
        y[rng.random(batch) < 0.4] = -100
        y[0] = 1
        m = int(rng.integers(1, batch))
        if not (window == 1 and seed):
            opt.zero_grad()
            topt.zero_grad()
        mg.accumulate(model, lambda o, t: F.cross_entropy(o, t, reduction="sum"), mg.tensor(x), mg.tensor(y),
                      micro_batch_size=m)
        items = int((y != -100).sum())
        for a in range(0, batch, m):  # the loop people write in PyTorch: summed loss / the window's items
            out = tmodel(torch.from_numpy(x[a:a + m]))
            (torch.nn.functional.cross_entropy(out, torch.from_numpy(y[a:a + m]), reduction="sum") / items).backward()
        got, want = grads_of(model), [q.grad.numpy() for q in tmodel.parameters()]
        assert rel_error(got, want) < 1e-12, (window, rel_error(got, want))
        opt.step()
        topt.step()
    got, want = [to_host(p.data) for p in model.parameters()], [q.detach().numpy() for q in tmodel.parameters()]
    assert rel_error(got, want) < 1e-12


# ----------------------------------------------------------------------------- 3. what is counted

def _full_and_accumulated(model, full_loss, loss_fn, x, y, **kw):
    model.zero_grad()
    full_loss().backward()
    want = grads_of(model)
    model.zero_grad()
    result = mg.accumulate(model, loss_fn, x, y, **kw)
    return rel_error(grads_of(model), want), result


def test_class_probabilities_are_one_item_per_row():
    """Soft labels (N, C): F.cross_entropy's mean is over the N rows. accumulate counted N * C elements and gave a
    gradient C times too small (1/5 here), silently; now it refuses, and total_items=N gives the full batch's."""
    model, x = mlp(), mg.randn(8, 6, dtype="float64")
    probs = F.softmax(mg.randn(8, 5, dtype="float64"), dim=1)

    def soft_sum(out, t):
        return F.cross_entropy(out, t, reduction="sum")
    with pytest.raises(ValueError, match=r"cross_entropy\(reduction='sum'\) adds up 4 items, but accumulate counted "
                                         r"20 .*\(4, 5\).*total_items"):
        mg.accumulate(model, soft_sum, x, probs, steps=2)
    assert all(p.grad is None for p in model.parameters()), "nothing may be accumulated before the error"
    err, result = _full_and_accumulated(model, lambda: F.cross_entropy(model(x), probs), soft_sum, x, probs,
                                        steps=2, total_items=8)
    assert err < 1e-12 and result.items == 8, err


def test_class_weights_mean_is_refused_and_their_sum_is_the_count():
    """A weighted cross_entropy's mean divides by weight[targets].sum(): reduction='mean' with weights was accepted
    (the check only knew the unweighted count) and each micro-batch divided by its own weights' sum; the summed
    one was divided by the number of targets. Both are refused now; total_items=weight[y].sum() is the full batch's
    gradient."""
    model, x, y = mlp(), mg.randn(8, 6, dtype="float64"), mg.tensor(np.array([0, 1, 2, 3, 4, 1, -100, 2]))
    w = mg.tensor(np.array([0.2, 1.0, 0.5, 2.0, 0.7]))
    with pytest.raises(ValueError, match=r"cross_entropy\(reduction='mean'\).*SUM"):
        mg.accumulate(model, lambda o, t: F.cross_entropy(o, t, weight=w), x, y, steps=2)
    with pytest.raises(ValueError, match=r"adds up 3\.7 items, but accumulate counted 4"):
        mg.accumulate(model, lambda o, t: F.cross_entropy(o, t, weight=w, reduction="sum"), x, y, steps=2)
    assert all(p.grad is None for p in model.parameters())
    total = float(to_host(w.data)[[0, 1, 2, 3, 4, 1, 2]].sum())
    err, result = _full_and_accumulated(model, lambda: F.cross_entropy(model(x), y, weight=w),
                                        lambda o, t: F.cross_entropy(o, t, weight=w, reduction="sum"), x, y,
                                        micro_batch_size=3, total_items=total)
    assert err < 1e-12, err
    assert abs(result.loss - F.cross_entropy(model(x), y, weight=w).item()) < 1e-12


def test_a_float_target_of_minus_100_is_a_value_not_padding():
    """ignore_index marks class indices; a regression target that happens to be -100.0 (a dB floor) was not counted,
    so every micro-batch was divided by too few items (8% too large a gradient here)."""
    model, x = mlp(), mg.randn(8, 6, dtype="float64")
    y = to_host(mg.randn(8, 5, dtype="float64").data).copy()
    y[0, :3] = -100.0
    y = mg.tensor(y)
    err, result = _full_and_accumulated(model, lambda: F.mse_loss(model(x), y),
                                        lambda o, t: F.mse_loss(o, t, reduction="sum"), x, y, steps=2)
    assert result.items == 40 and err < 1e-12, (result.items, err)


def test_a_loss_fn_that_ignores_another_index_is_refused():
    """Padding id 0 in loss_fn, accumulate's default -100: the pads were counted as items (too small a gradient)."""
    model, x = mlp(), mg.randn(8, 6, dtype="float64")
    y = mg.tensor(np.array([0, 1, 2, 0, 4, 1, 0, 2]))

    def pad0(o, t):
        return F.cross_entropy(o, t, ignore_index=0, reduction="sum")
    with pytest.raises(ValueError, match=r"adds up 2 items, but accumulate counted 4.*ignore_index"):
        mg.accumulate(model, pad0, x, y, steps=2)
    err, result = _full_and_accumulated(model, lambda: F.cross_entropy(model(x), y, ignore_index=0), pad0, x, y,
                                        steps=2, ignore_index=0)
    assert err < 1e-12 and result.items == 5


def test_a_loss_says_its_items_to_the_block_that_asks_and_leaves_nothing_on_the_tape():
    """NOTE [a loss says what it averages]: a reduced loss tells the innermost F.loss_items() block (name, reduction,
    items); it used to leave them on its record (grad_fn.loss_items), a loss function's note on the tape's object
    for accumulate.py to read back (#40 [seams])."""
    out, y = mg.randn(4, 5, dtype="float64", requires_grad=True), mg.tensor(np.array([0, -100, 2, 3]))
    w = mg.tensor(np.array([0.2, 1.0, 0.5, 2.0, 0.7]))
    with F.loss_items() as outer:
        a = F.cross_entropy(out, y, reduction="sum")
        with F.loss_items() as inner:
            b = F.cross_entropy(out, y, weight=w)
            c = F.mse_loss(out, out.detach() * 2, reduction="sum")
        d = a + b
    assert F.said_of(a, outer) == ("cross_entropy", "sum", 3.0) and F.said_of(a, inner) == (None, None, None)
    assert F.said_of(b, inner) == ("cross_entropy", "mean", pytest.approx(0.2 + 0.5 + 2.0))
    assert F.said_of(c, inner) == ("mse_loss", "sum", 20.0)
    assert F.said_of(d, outer) == (None, None, None)  # a sum of two losses says nothing, as its record said nothing
    assert len(outer) == 1 and len(inner) == 2
    e = F.cross_entropy(out, y, reduction="sum")  # no block open: said to no one
    for loss in (a, b, c, d, e):
        assert not hasattr(loss.grad_fn, "loss_items"), "nothing of the loss is left on the tape's record"


def test_a_loss_fn_returning_more_than_the_loss_is_not_checked_as_the_loss():
    """The loss accumulate compares is the one loss_fn returns: a weighted cross_entropy plus another term says
    nothing (as when the count sat on the record: the sum's record had none), and is divided by accumulate's own
    count, which is what it was before; the weighted cross_entropy alone is refused."""
    model, x, y = mlp(), mg.randn(8, 6, dtype="float64"), mg.tensor(np.array([0, 1, 2, 3, 4, 1, 0, 2]))
    w = mg.tensor(np.array([0.2, 1.0, 0.5, 2.0, 0.7]))
    with pytest.raises(ValueError, match=r"adds up \d\.?\d* items, but accumulate counted 4"):
        mg.accumulate(model, lambda o, t: F.cross_entropy(o, t, weight=w, reduction="sum"), x, y, steps=2)
    model.zero_grad()
    result = mg.accumulate(model, lambda o, t: F.cross_entropy(o, t, weight=w, reduction="sum") + 0 * o.sum(), x, y,
                           steps=2)
    assert result.items == 8


def causal_lm_batch(rng, rows=8, T=6):
    """Token ids and labels as Hugging Face's DataCollatorForLanguageModeling(mlm=False) makes them: padded on the right
    to T with the pad token (the last id), whose labels are -100; every row at least 2 tokens (one shifted target)."""
    ids = rng.integers(0, V - 1, (rows, T))
    lengths = rng.integers(2, T + 1, rows)
    ids[np.arange(T) >= lengths[:, None]] = V - 1
    labels = np.where(ids == V - 1, -100, ids)
    return mg.tensor(ids), mg.tensor(labels)


def shifted_ce(logits, labels, reduction="sum"):
    """The textbook causal LM loss (nanoGPT's): the logits at t against the label at t + 1."""
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1), reduction=reduction)


def for_causal_lm_loss(logits, labels, reduction="sum"):
    """transformers' ForCausalLMLoss: the labels padded by one -100 at the end, the first dropped, every logit kept."""
    pad = mg.full((labels.shape[0], 1), -100, dtype=labels.dtype, device=labels.device)
    shifted = mg.cat([labels, pad], dim=1)[:, 1:]
    return F.cross_entropy(logits.reshape(-1, V), shifted.reshape(-1), reduction=reduction)


def shifted_count(labels):  # Trainer._get_num_items_in_batch for a ForCausalLMLoss model: labels[..., 1:].ne(-100)
    return int((to_host(labels.data)[..., 1:] != -100).sum())


@pytest.mark.parametrize("loss", [shifted_ce, for_causal_lm_loss])
@pytest.mark.parametrize("split", [dict(steps=2), dict(micro_batch_size=3), dict(micro_batch_size=1)])
def test_a_causal_lm_loss_that_shifts_its_labels_counts_labels_from_the_second_on(loss, split):
    """A causal LM's loss scores the logits at t against the label at t + 1, so each row's first label is never an
    item: accumulate counted every label (38 for the loss's 30 here), refused, and had no way to count as the loss
    does. loss_shifts_labels=True counts labels[..., 1:], as transformers' Trainer counts num_items_in_batch for such
    a loss, and gives the full batch's gradient; the refusal now names the option."""
    mg.manual_seed(0)
    model, (ids, labels) = gpt(), causal_lm_batch(np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"adds up \d+ items, but accumulate counted \d+ .*targets\[\.\.\., 1:\].*"
                                         r"shifts its labels.*loss_shifts_labels=True"):
        mg.accumulate(model, loss, ids, labels, **split)
    assert all(p.grad is None for p in model.parameters()), "nothing may be accumulated before the error"
    err, result = _full_and_accumulated(model, lambda: loss(model(ids), labels, "mean"), loss, ids, labels,
                                        **split, loss_shifts_labels=True)
    assert err < 1e-12 and result.items == shifted_count(labels) == 30, (err, result.items)
    full = loss(model(ids), labels, "mean").item()
    assert abs(result.loss - full) <= 1e-12 * full, (result.loss, full)


def test_counting_shifted_labels_still_refuses_counts_that_disagree():
    """loss_shifts_labels=True with a loss that does not shift, or that ignores another index: the counts differ and
    accumulate refuses, as before. One-dimensional targets have no sequence to shift. A mask is shifted with them."""
    model, (ids, labels) = gpt(), causal_lm_batch(np.random.default_rng(1))
    unshifted = lambda o, t: F.cross_entropy(o.reshape(-1, V), t.reshape(-1), reduction="sum")  # noqa: E731
    with pytest.raises(ValueError, match=r"adds up \d+ items, but accumulate counted \d+ .*wrong count"):
        mg.accumulate(model, unshifted, ids, labels, steps=2, loss_shifts_labels=True)
    pads = lambda o, t: F.cross_entropy(o[:, :-1].reshape(-1, V), t[:, 1:].reshape(-1), ignore_index=V - 1,  # noqa
                                        reduction="sum")
    with pytest.raises(ValueError, match=r"adds up \d+ items, but accumulate counted \d+ .*wrong count"):
        mg.accumulate(model, pads, ids, ids, steps=2, loss_shifts_labels=True)  # pads counted: ignore_index=-100
    err, result = _full_and_accumulated(model, lambda: pads(model(ids), ids) / shifted_count(labels), pads, ids, ids,
                                        steps=2, loss_shifts_labels=True, ignore_index=V - 1)
    assert err < 1e-12 and result.items == shifted_count(labels), (err, result.items)
    with pytest.raises(ValueError, match=r"loss_shifts_labels counts target\[\.\.\., 1:\].*sequence.*\(4,\)"):
        mg.accumulate(mlp(), lambda o, t: F.cross_entropy(o, t, reduction="sum"), mg.randn(8, 6, dtype="float64"),
                      mg.randint(0, 5, (8,)), steps=2, loss_shifts_labels=True)
    mask = mg.tensor(to_host(labels.data) != -100)

    def masked(o, t, m):  # every label a class id, the mask says which count
        ce = F.cross_entropy(o[:, :-1].reshape(-1, V), t[:, 1:].reshape(-1), reduction="none")
        return (ce * m[:, 1:].reshape(-1).to("float64")).sum()
    err, result = _full_and_accumulated(model, lambda: masked(model(ids), ids, mask) / shifted_count(labels), masked,
                                        ids, ids, mask=mask, micro_batch_size=3, loss_shifts_labels=True)
    assert err < 1e-12 and result.items == shifted_count(labels), (err, result.items)


@pytest.mark.parametrize("seed", range(2))
def test_hugging_faces_gradient_accumulation_alignment_on_a_tiny_gpt(seed):
    """transformers' test_gradient_accumulation_loss_alignment_with_model_loss, ported: 5 AdamW steps on batches of 8
    padded sequences with a shifted-label loss, each as one batch and as 2 micro-batches of 4, give the same losses and
    parameters (float64, where Hugging Face's float32 test allows 0.01); averaging each micro-batch by its own count
    and then the two means (normalize='mean_of_means', a model that does not take num_items_in_batch) does not."""
    rng = np.random.default_rng(seed)
    batches = [causal_lm_batch(rng) for _ in range(5)]
    mg.manual_seed(seed)
    runs = {how: gpt() for how in ("base", "accumulated", "broken")}
    for model in list(runs.values())[1:]:
        model.load_state_dict(runs["base"].state_dict())
    opts = {how: mg.optim.AdamW(m.parameters(), lr=3e-3) for how, m in runs.items()}
    losses = {how: [] for how in runs}
    for step, (ids, labels) in enumerate(batches):
        opts["base"].zero_grad()
        full = for_causal_lm_loss(runs["base"](ids), labels, "mean")
        full.backward()
        losses["base"].append(full.item())
        for how in ("accumulated", "broken"):
            opts[how].zero_grad()
            result = mg.accumulate(runs[how], for_causal_lm_loss, ids, labels, steps=2, loss_shifts_labels=True,
                                   normalize="items" if how == "accumulated" else "mean_of_means")
            losses[how].append(result.loss)
        if step == 0:
            assert rel_error(grads_of(runs["accumulated"]), grads_of(runs["base"])) < 1e-12
            assert rel_error(grads_of(runs["broken"]), grads_of(runs["base"])) > 1e-3
        for opt in opts.values():
            opt.step()
    params = {how: [to_host(p.data) for p in m.parameters()] for how, m in runs.items()}
    assert max(abs(a - b) for a, b in zip(losses["base"], losses["accumulated"])) < 1e-12, losses
    assert rel_error(params["accumulated"], params["base"]) < 1e-10
    assert rel_error(params["broken"], params["base"]) > 1e-3
    assert max(abs(a - b) for a, b in zip(losses["base"], losses["broken"])) > 1e-4, losses


@pytest.mark.torch
def test_the_shifted_count_is_transformers_own():
    """The count and the loss as transformers 5 makes them for the same labels: Trainer._get_num_items_in_batch over
    the micro-batches (labels[..., 1:] != -100 for a ForCausalLMLoss model) and ForCausalLMLoss(..., num_items_in_batch)
    summed over them (skipped without transformers: it is not one of minigrad's dependencies)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.loss.loss_utils import ForCausalLMLoss
    from transformers.trainer import Trainer
    from types import SimpleNamespace
    mg.manual_seed(2)
    model, (ids, labels) = gpt(), causal_lm_batch(np.random.default_rng(2), rows=6)
    trainer = SimpleNamespace(model_accepts_loss_kwargs=True, compute_loss_func=None, _loss_shifts_labels=True,
                              args=SimpleNamespace(average_tokens_across_devices=False, n_gpu=1, world_size=1),
                              get_tp_size=lambda: 1, get_cp_size=lambda: 1, get_sp_size=lambda: 1)
    as_torch = lambda t: torch.from_numpy(to_host(t.data).copy())  # noqa: E731
    micro = [(ids[a:a + 2], labels[a:a + 2]) for a in range(0, 6, 2)]
    hf_items = Trainer._get_num_items_in_batch(trainer, [{"labels": as_torch(y)} for _, y in micro], "cpu")
    hf_loss = sum(ForCausalLMLoss(as_torch(model(x).detach()), as_torch(y), V, num_items_in_batch=hf_items).item()
                  for x, y in micro)
    model.zero_grad()
    result = mg.accumulate(model, for_causal_lm_loss, micro_batches=micro, loss_shifts_labels=True)
    assert result.items == int(hf_items), (result.items, hf_items)
    assert abs(result.loss - hf_loss) <= 1e-6 * hf_loss, (result.loss, hf_loss)  # ForCausalLMLoss computes in float32


# ----------------------------------------------------------------------------- 4. BatchNorm says so

def test_batchnorm_in_train_mode_warns_that_micro_batches_are_not_the_full_batch():
    model, x, y = mlp(batchnorm=True), mg.randn(8, 6, dtype="float64"), mg.randint(0, 5, (8,))

    def ce(o, t):
        return F.cross_entropy(o, t, reduction="sum")
    with pytest.warns(UserWarning, match=r"accumulate: BatchNorm1d \(model\.1\) normalised 4 micro-batches.*"
                                          r"\(train mode\).*not the full batch's.*eval mode"):
        mg.accumulate(model, ce, x, y, steps=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mg.accumulate(model, ce, x, y, steps=1)  # one micro-batch: the full batch's statistics
        model.eval()
        mg.accumulate(model, ce, x, y, steps=4)  # running statistics: every micro-batch uses the same


def test_a_float_mask_is_weights_and_the_mean_divides_by_their_sum():
    """A float mask weighs the items; count_items took int() of each micro-batch's sum, so weights summing to 21.17
    were divided by 19 (an 11% too large gradient here); it is the weights' sum now, as a weighted mean's."""
    model, x, y = mlp(), mg.randn(8, 6, dtype="float64"), mg.randn(8, 5, dtype="float64")
    w = mg.tensor(np.random.default_rng(0).uniform(0.1, 0.9, (8, 5)))

    def weighted_sum(out, t, weights):
        return (((out - t) ** 2) * weights).sum()
    model.zero_grad()
    (weighted_sum(model(x), y, w) / w.sum()).backward()
    want = grads_of(model)
    model.zero_grad()
    result = mg.accumulate(model, weighted_sum, x, y, mask=w, micro_batch_size=3)
    assert result.items == pytest.approx(float(to_host(w.data).sum()), rel=1e-15)
    err = rel_error(grads_of(model), want)
    assert err < 1e-12, err


@pytest.mark.parametrize("dtype", ["float16"] + (["bfloat16"] if mg.default_device() == "cpu" else []))
def test_two_byte_parameters_accumulate_in_float32_and_step(dtype):
    """float16 parameters got float32 gradient buffers, bfloat16 ones did not: 64 micro-batches added in bfloat16
    lost 2% of their sum (relative to its largest entry); in float32 the sum is exact to 1e-6. AdamW then steps
    the 2-byte parameters with the float32 gradients."""
    model = mlp(dtype, 8, 32, 4)
    x, y = mg.randn(64, 8).to(dtype), mg.randn(64, 4).to(dtype)
    pieces = []
    for i in range(64):  # each micro-batch's own 2-byte gradient, summed exactly in float64
        model.zero_grad()
        (((model(x[i:i + 1]) - y[i:i + 1]) ** 2).sum() * (1.0 / 256)).backward()
        pieces.append([to_host(p.grad.to("float32").data).astype(np.float64) for p in model.parameters()])
    exact = [sum(ps) for ps in zip(*pieces)]
    model.zero_grad()
    result = mg.accumulate(model, lambda o, t: ((o - t) ** 2).sum(), x, y, micro_batch_size=1)
    assert result.grad_dtype == "float32" and all(p.grad.dtype == np.float32 for p in model.parameters())
    err = rel_error([to_host(p.grad.data) for p in model.parameters()], exact)
    assert err < 1e-6, f"{dtype}: the float32 buffer's sum is off the exact one by {err:.2e}"
    before = [to_host(p.to("float32").data).copy() for p in model.parameters()]
    mg.optim.AdamW(model.parameters(), lr=1e-2).step()
    assert all(p.dtype == np.dtype(mg.bfloat16 if dtype == "bfloat16" else dtype) for p in model.parameters())
    assert rel_error([to_host(p.to("float32").data) for p in model.parameters()], before) > 1e-3


def test_a_two_byte_parameter_no_micro_batch_reaches_keeps_no_gradient():
    """accumulate made a float32 buffer of zeros for every float16 parameter before the first backward, so one that
    the forward never uses (a second head) had a .grad of zeros where a plain backward leaves None, and AdamW's weight
    decay moved it. The buffer now comes with the first gradient."""
    class TwoHeads(nn.Module):
        def __init__(self):
            self.body, self.head, self.unused = nn.Linear(6, 8), nn.Linear(8, 5), nn.Linear(8, 5)

        def forward(self, x):
            return self.head(self.body(x).tanh())

    model = TwoHeads().to(mg.default_device()).to("float16")
    unused = [to_host(p.data).copy() for p in model.unused.parameters()]
    x, y = mg.randn(8, 6).to("float16"), mg.randint(0, 5, (8,))
    result = mg.accumulation_step(model, lambda o, t: F.cross_entropy(o, t, reduction="sum"),
                                  mg.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1), x, y, steps=3)
    assert result.grad_dtype == "float32"
    assert model.unused.weight.grad is None and model.unused.bias.grad is None
    assert all(p.grad.dtype == np.float32 for m in (model.body, model.head) for p in m.parameters())
    assert all(np.array_equal(to_host(p.data), u) for p, u in zip(model.unused.parameters(), unused))
