"""Will it fit? plan.predict runs a training step on 'meta' and reads the ledger; here the same step runs for real.

"meta equals real exactly where both run": small copies of BERT and GPT-2 under every checkpointing strategy,
with and without accumulation, and bert-base-uncased itself at full size.
"""
import json

import pytest

from minigrad import plan
from minigrad.__main__ import main

SMALL = {
    "bert-base-uncased": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=256,
                              vocab_size=500),
    "gpt2": dict(n_layer=3, n_embd=64, n_head=4, vocab_size=500, block_size=64),
}


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("checkpointing", plan.STRATEGIES)
def test_meta_predicts_the_real_step_exactly(name, checkpointing):
    for grad_accum in (1, 3):
        setup = plan.Setup(name, 2, 32, grad_accum, checkpointing, overrides=SMALL[name])
        meta, real = plan.predict(setup), plan.predict(setup, device="cpu")
        assert meta.bytes == real.bytes
        assert meta.flops == real.flops
        assert meta.segments == real.segments
        assert (meta.flops["recompute"] > 0) == (checkpointing != "none" and bool(meta.segments))
        quick = plan.predict(setup, exact_accumulation=False)  # what search runs: at most 2 micro-batches
        assert (quick.bytes, quick.flops) == (meta.bytes, meta.flops)


def test_meta_predicts_bert_base_at_full_size():
    setup = plan.Setup("bert-base-uncased", 1, 64)
    meta, real = plan.predict(setup), plan.predict(setup, device="cpu")
    assert meta.bytes == real.bytes and meta.flops == real.flops
    assert meta.bytes["parameters"] == 4 * 109_483_778
    assert meta.bytes["optimizer"] == 2 * meta.bytes["parameters"]   # AdamW's two moments


def test_what_accumulation_and_checkpointing_save():
    big = plan.predict(plan.Setup("bert-large-uncased", 4, 512))
    accumulated = plan.predict(plan.Setup("bert-large-uncased", 1, 512, grad_accum=4))
    checkpointed = plan.predict(plan.Setup("bert-large-uncased", 1, 512, grad_accum=4, checkpointing="every"))
    assert big.bytes["total"] > accumulated.bytes["total"] > checkpointed.bytes["total"]
    assert big.bytes["activations"] > 3.5 * accumulated.bytes["activations"]
    # the same samples cost the same forward and backward FLOPs (but for dividing each micro-batch's loss by 4);
    # checkpointing adds about one forward
    assert accumulated.flops["forward"] - big.flops["forward"] == 3
    assert 0.8 < checkpointed.flops["recompute"] / checkpointed.flops["forward"] <= 1.0


def test_fp16_halves_every_category_but_not_the_shape_of_the_step():
    fp32 = plan.predict(plan.Setup("gpt2", 1, 128))
    fp16 = plan.predict(plan.Setup("gpt2", 1, 128, dtype="fp16"))
    assert fp16.bytes["parameters"] * 2 == fp32.bytes["parameters"]
    assert fp16.flops == fp32.flops


def test_in_place_zero_grad_keeps_the_gradients_through_the_forward():
    none = plan.predict(plan.Setup("gpt2", 2, 256))
    zeros = plan.predict(plan.Setup("gpt2", 2, 256, software=plan.Software(zero_grad="zeros")))
    params = none.bytes["parameters"]
    assert zeros.bytes["gradients"] == params                  # all of them, alive when the step peaks
    assert zeros.bytes["total"] > none.bytes["total"]


def test_gpt2_xl_at_1024_is_planned_on_meta():
    """(Its speed, about a second, is the benchmark's to measure, not a unit test's.)"""
    p = plan.predict(plan.Setup("gpt2-xl", 1, 1024, checkpointing="sqrt"))
    assert p.bytes["parameters"] == 4 * 1_557_611_200


def test_search_finds_what_fits_cheapest_first():
    fits, tried = plan.search("gpt2", 6 * 2**30, batch_size=8, seq_len=512)
    assert fits and all(p.bytes["total"] <= 6 * 2**30 for p in fits)
    # first each strategy's best, cheapest first; then (to fill top) smaller micro-batches of those strategies, in
    # the same order of strategies, each smaller than the strategy's row above it
    strategies = list(dict.fromkeys(p.setup.checkpointing for p in fits))
    bests = fits[:len(strategies)]
    assert [p.setup.checkpointing for p in bests] == strategies
    costs = [p.flops_per_sample for p in bests]
    assert costs == sorted(costs)
    last = {p.setup.checkpointing: p.setup.batch_size for p in bests}
    for p in fits[len(strategies):]:
        assert p.setup.batch_size < last[p.setup.checkpointing]
        last[p.setup.checkpointing] = p.setup.batch_size
    assert all(p.setup.batch_size * p.setup.grad_accum == 8 for p in tried)
    # the best plan is the largest micro-batch of the cheapest strategy that fits: one micro-batch more would not
    best = fits[0]
    bigger = [p for p in tried if p.setup.checkpointing == best.setup.checkpointing
              and p.setup.batch_size > best.setup.batch_size]
    assert all(p.bytes["total"] > 6 * 2**30 for p in bigger)


@pytest.mark.parametrize("text, n", [("24GB", 24 * 10**9), ("24GiB", 24 * 2**30), ("24000MB", 24 * 10**9),
                                     ("80e9", 80 * 10**9), ("1.5 GiB", 3 * 2**29)])
def test_memory_budgets_read_as_written(text, n):
    assert plan.parse_bytes(text) == n


def test_a_bad_budget_says_how_to_write_one():
    with pytest.raises(ValueError, match="24GiB"):
        plan.parse_bytes("lots")


# ----------------------------------------------------------------------------- the commands

def test_memory_json_has_exactly_the_categories_and_flops(capsys):
    assert main(["memory", "--model", "gpt2", "--batch-size", "2", "--seq-len", "128", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"parameters", "gradients", "optimizer", "activations", "transient", "total", "flops"}
    assert all(isinstance(out[k], int) for k in out if k != "flops")
    assert set(out["flops"]) == {"forward", "backward", "recompute"}
    expected = plan.predict(plan.Setup("gpt2", 2, 128))
    assert out["total"] == expected.bytes["total"]


def test_memory_prints_a_table(capsys):
    assert main(["memory", "--model", "bert-base-uncased", "--batch-size", "2", "--seq-len", "64", "--grad-accum",
                 "2", "--checkpointing"]) == 0
    out = capsys.readouterr().out
    assert "every block checkpointed" in out and "activations" in out and "recompute" in out


def test_plan_prints_the_best_plans(capsys):
    assert main(["plan", "--model", "gpt2", "--memory", "6GiB", "--batch-size", "8", "--seq-len", "512",
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "6GiB read as 6,442,450,944 bytes" in out and "rank" in out


@pytest.mark.parametrize("argv, message", [
    (["memory", "--model", "gpt3", "--batch-size", "1", "--seq-len", "8"], "gpt2-xl"),
    (["memory", "--model", "gpt2", "--batch-size", "1", "--seq-len", "2048"], "between 1 and 1024"),
    (["memory", "--model", "gpt2", "--batch-size", "0", "--seq-len", "8"], "at least 1"),
    # nothing fits: gpt2-xl's weights alone are 6 GB. At an optimizer batch of 1 the search tries micro-batch 1 under
    # each strategy, as at 4 it ends by trying it (4 gpt2-xl predictions on 'meta' instead of 8); the message is
    # the same but for the smallest step it names
    (["plan", "--model", "gpt2-xl", "--memory", "2GB", "--batch-size", "1", "--seq-len", "1024", "--quiet"],
     "nothing fits"),
    (["plan", "--model", "gpt2", "--memory", "lots", "--batch-size", "4", "--seq-len", "64"], "24GiB"),
])
def test_bad_input_says_what_would_fit(argv, message, capsys):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    assert code != 0
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("software", [plan.Software(dropout_mask="float"), plan.Software(attention="sdpa"),
                                      plan.Software(softmax_keeps_input=True), plan.Software(zero_grad="zeros")])
def test_the_software_switches_run_for_real_too(name, software):
    setup = plan.Setup(name, 2, 32, 2, "every", software=software, overrides=SMALL[name])
    meta, real = plan.predict(setup), plan.predict(setup, device="cpu")
    assert (meta.bytes, meta.flops) == (real.bytes, real.flops)


def test_each_switch_keeps_what_it_says():
    """bert-large at batch 4 x 512: per layer, the (B, heads, T, T) arrays decide."""
    B, H, T, L = 4, 16, 512, 24
    scores = B * H * T * T
    today = plan.predict(plan.Setup("bert-large-uncased", B, T))
    def more(**kw):
        return plan.predict(plan.Setup("bert-large-uncased", B, T, software=plan.Software(**kw))).bytes["activations"] \
            - today.bytes["activations"]
    assert more(softmax_keeps_input=True) == L * 4 * scores          # the scores before softmax, float32
    assert more(dropout_mask="float") >= L * 3 * scores              # 4 bytes per attention weight instead of 1
    # sdpa keeps no probabilities, mask or dropped probabilities (4 + 1 + 4 bytes per score), but its own output
    # (the next linear keeps a reshaped copy) and a log-sum-exp per row; compared at each step's peak, to 0.1%
    fused_keeps = B * T * 1024 * 4 + B * H * T * 4
    assert -more(attention="sdpa") == pytest.approx(L * ((4 + 1 + 4) * scores - fused_keeps), rel=1e-3)


def test_gelu_in_float32_keeps_8_more_bytes_per_token_per_layer_under_autocast():
    """PyTorch 1.9's CUDA autocast (Software.gelu_float32): GELU keeps a float32 copy of its (B, T, 4h) input, 16h bytes
    per token, where 1.10's keeps the float16 product, 8h; the next product keeps a float16 copy of the float32
    output, as it kept the float16 output before. In float32 the switch changes nothing. What the records keep is the
    activations' own peak (the forward's end): the step's total peaks elsewhere once GELU's backward computes a float16
    input in float32 temporaries (NOTE [every array an op makes], backend/pool.py), at the last layer's."""
    B, T, h, L = 4, 512, 1024, 24

    def activations(precision, gelu_float32):
        software = plan.Software(zero_grad="zeros", gelu_float32=gelu_float32)
        setup = plan.Setup("bert-large-uncased", B, T, precision=precision, software=software)
        return plan.predict(setup).profile.peak_bytes("activations")
    assert activations("fp16-mixed", True) - activations("fp16-mixed", False) == L * 8 * B * T * h
    assert activations("fp32", True) == activations("fp32", False)


# ----------------------------------------------------------------------------- checkpoint policies

@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("policy", plan.POLICIES[1:])
def test_meta_predicts_the_real_step_exactly_under_a_policy(name, policy):
    for checkpointing, grad_accum in (("every", 1), ("sqrt", 2)):
        setup = plan.Setup(name, 2, 32, grad_accum, checkpointing, overrides=SMALL[name], policy=policy)
        meta, real = plan.predict(setup), plan.predict(setup, device="cpu")
        assert (meta.bytes, meta.flops, meta.segments) == (real.bytes, real.flops, real.segments)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_the_policies_order_memory_against_recompute(name):
    def run(checkpointing, policy="nothing_saveable"):  # 64 tokens: at 32, AdamW's step peaks above the backward
        return plan.predict(plan.Setup(name, 2, 64, 1, checkpointing, overrides=SMALL[name], policy=policy))
    plain, full = run("none"), run("every")
    assert (full.bytes, full.flops) == (run("every", "nothing_saveable").bytes, run("every", "nothing_saveable").flops)
    core, dots, every = (run("every", p) for p in ("save_anything_except_core_attention", "dots_saveable",
                                                   "everything_saveable"))
    assert full.flops["recompute"] > core.flops["recompute"] > dots.flops["recompute"] > 0 == every.flops["recompute"]
    # memory at the step's peak (what must fit): the categories at that moment shift with the policy, as an output a
    # checkpoint kept counts as transient once handed to its recompute's records, until one of them saves it
    assert full.bytes["total"] < core.bytes["total"] <= every.bytes["total"]
    assert plain.flops["forward"] == core.flops["forward"] and plain.flops["backward"] == core.flops["backward"]


def test_gpt2_xl_selective_recompute_keeps_most_of_the_saving_for_a_tenth_of_the_recompute():
    def run(checkpointing, policy="nothing_saveable"):
        return plan.predict(plan.Setup("gpt2-xl", 4, 1024, 1, checkpointing, policy=policy))
    plain, full, core = run("none"), run("every"), run("every", "save_anything_except_core_attention")
    assert core.flops["recompute"] < 0.12 * full.flops["recompute"]
    assert plain.bytes["total"] - core.bytes["total"] > 0.5 * (plain.bytes["total"] - full.bytes["total"])


@pytest.mark.parametrize("kwargs, message", [(dict(policy="dots"), "dots_saveable"),
                                             (dict(policy="dots_saveable"), "--checkpointing")])
def test_a_bad_policy_says_what_to_do(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan.Setup("gpt2", 1, 32, **kwargs)


def test_memory_and_plan_take_a_policy(capsys):
    argv = ["--model", "gpt2", "--seq-len", "256", "--policy", "save_anything_except_core_attention"]
    assert main(["memory", "--batch-size", "2", "--checkpointing", "every", "--json"] + argv) == 0
    out = json.loads(capsys.readouterr().out)
    expected = plan.predict(plan.Setup("gpt2", 2, 256, 1, "every", policy="save_anything_except_core_attention"))
    assert out["total"] == expected.bytes["total"] and out["flops"] == expected.flops
    assert main(["memory", "--batch-size", "2", "--checkpointing"] + argv) == 0
    assert "keeping save_anything_except_core_attention" in capsys.readouterr().out
    assert main(["plan", "--memory", "4GiB", "--batch-size", "8", "--quiet"] + argv) == 0
    assert "checkpoints keep save_anything_except_core_attention" in capsys.readouterr().out


# ----------------------------------------------------------------------------- mixed precision and the optimizers

@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("precision", ["fp16-mixed", "bf16-mixed"])
@pytest.mark.parametrize("optimizer", sorted(plan.OPTIMIZERS))
def test_meta_predicts_the_real_mixed_precision_step_event_by_event(name, precision, optimizer):
    """On the CPU, autocast('cuda') casts no CPU tensor (as torch's): the real run and its meta twin both follow the
    CPU's lists here (amp_device='cpu'); the stand-in pass (MINIGRAD_DEVICE=cuda) compares CUDA's lists below."""
    for checkpointing, grad_accum in (("none", 1), ("every", 2)):
        setup = plan.Setup(name, 2, 32, grad_accum, checkpointing, optimizer, precision=precision,
                           overrides=SMALL[name])
        meta, real = plan.predict(setup, amp_device="cpu"), plan.predict(setup, device="cpu")
        assert meta.profile.timeline() == real.profile.timeline()
        assert (meta.bytes, meta.flops) == (real.bytes, real.flops)
        by_dtype = real.profile.saved_bytes_by_dtype()
        assert meta.profile.saved_bytes_by_dtype() == by_dtype
        low = "float16" if precision == "fp16-mixed" else "bfloat16"
        assert by_dtype.get(low, 0) > 0 and meta.profile.cast_weight_bytes() == real.profile.cast_weight_bytes() > 0


@pytest.mark.skipif(__import__("minigrad").default_device() != "cuda", reason="CUDA's lists need 'cuda' tensors "
                    "(MINIGRAD_DEVICE=cuda: the GPU or the CuPy stand-in)")
@pytest.mark.parametrize("optimizer", sorted(plan.OPTIMIZERS))
def test_meta_predicts_the_real_step_under_cudas_lists(optimizer):
    setup = plan.Setup("bert-base-uncased", 2, 32, 2, "every", optimizer, precision="fp16-mixed",
                       overrides=SMALL["bert-base-uncased"])
    meta, real = plan.predict(setup), plan.predict(setup, device="cuda")
    assert meta.profile.timeline() == real.profile.timeline() and meta.bytes == real.bytes
    # bfloat16 under CUDA's lists: predicted on 'meta' (a GPU that has it), refused on CuPy, saying what to use
    bf16 = plan.Setup("bert-base-uncased", 2, 32, precision="bf16-mixed", overrides=SMALL["bert-base-uncased"])
    assert "bfloat16" in plan.predict(bf16).profile.saved_bytes_by_dtype()
    with pytest.raises(RuntimeError, match="switch dtype to float16"):
        plan.predict(bf16, device="cuda")


def test_mixed_precision_keeps_float32_weights_and_its_weight_copies():
    fp32 = plan.predict(plan.Setup("gpt2", 2, 128))
    for precision in ("fp16-mixed", "bf16-mixed"):
        mixed = plan.predict(plan.Setup("gpt2", 2, 128, precision=precision))
        assert {c: mixed.bytes[c] for c in ("parameters", "gradients", "optimizer")} == \
            {c: fp32.bytes[c] for c in ("parameters", "gradients", "optimizer")}
        assert mixed.profile.cast_weight_bytes() >= 2 * 85_000_000  # a 2-byte copy of every matrix (gpt2's 85 M)
        scaled = precision == "fp16-mixed"  # the loss times the scale: one multiply forward, one backward
        assert {k: mixed.flops[k] - fp32.flops[k] for k in fp32.flops} == \
            {"forward": scaled, "backward": scaled, "recompute": 0}
    fp16, bf16 = (plan.predict(plan.Setup("gpt2", 2, 128, precision=p)) for p in ("fp16-mixed", "bf16-mixed"))
    assert fp16.bytes == bf16.bytes  # the same bytes: two per element either way; the scaler holds numbers
    assert "float16" in fp16.profile.saved_bytes_by_dtype() and "bfloat16" in bf16.profile.saved_bytes_by_dtype()


def test_each_optimizer_keeps_its_state():
    setup = dict(model="bert-large-uncased", batch_size=1, seq_len=128)
    params = 335_143_938
    state = {o: plan.predict(plan.Setup(**setup, optimizer=o)).bytes["optimizer"] for o in plan.OPTIMIZERS}
    assert state["adamw"] == 8 * params and state["sgd"] == 0
    assert 2 * params < state["adamw8bit"] < 2.1 * params   # two uint8 codes, absmax per block, small ones in float32
    assert 0 < state["adafactor"] < 0.01 * params           # rows and columns of the squared gradients


@pytest.mark.parametrize("kwargs, message", [(dict(dtype="fp16", precision="fp16-mixed"), "--precision keeps float32"),
                                             (dict(precision="fp8"), "fp16-mixed"),
                                             (dict(optimizer="adam"), "adamw8bit")])
def test_a_bad_precision_or_optimizer_says_what_to_do(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan.Setup("gpt2", 1, 32, **kwargs)


def test_plan_searches_precision_and_optimizer(capsys):
    fits, tried = plan.search("gpt2", 3 * 2**30, 8, 256, optimizer=["adamw", "adafactor"],
                              precision=["fp32", "fp16-mixed"], strategies=("none",))
    assert {(p.setup.optimizer, p.setup.precision) for p in tried} == \
        {(o, pr) for o in ("adamw", "adafactor") for pr in ("fp32", "fp16-mixed")}
    assert all(p.bytes["total"] <= 3 * 2**30 for p in fits)
    best = {(p.setup.optimizer, p.setup.precision): p.setup.batch_size for p in fits}
    assert best[("adafactor", "fp32")] >= best[("adamw", "fp32")]  # less state, room for a larger micro-batch
    # the command: 'any' and a list of precisions reach the search and its table. What is checked is printed from
    # the flags (the header names every optimizer and precision searched, the table a precision column), whatever
    # fits: an optimizer batch of 1, not the search's 8, runs each of the same 32 ways once, in 32 predictions
    # instead of 94 (each a Python-speed step on 'meta'; 8 took 19 s of a pass's CPU); the search over micro-batches
    # is the plan.search call's above
    assert main(["plan", "--model", "gpt2", "--memory", "3GiB", "--batch-size", "1", "--seq-len", "256",
                 "--optimizer", "any", "--precision", "fp32,bf16-mixed", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "precision" in out and "adamw8bit" in out and "bf16-mixed" in out


@pytest.mark.parametrize("argv, message", [
    (["--precision", "fp16"], "choose from fp32, fp16-mixed, bf16-mixed"),
    (["--optimizer", "adam8bit"], "did you mean adamw8bit?"),
    (["--dtype", "fp16", "--precision", "bf16-mixed"], "choose one"),
])
def test_memory_says_what_precision_and_optimizer_to_write(argv, message, capsys):
    try:
        code = main(["memory", "--model", "gpt2", "--batch-size", "1", "--seq-len", "32"] + argv)
    except SystemExit as e:
        code = e.code
    assert code != 0 and message in capsys.readouterr().err
