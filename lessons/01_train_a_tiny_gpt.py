"""Lesson 1: train a tiny GPT with minigrad and watch its loss fall.

    python lessons/01_train_a_tiny_gpt.py            # about 10 s (make tour, 1 BLAS thread, 2 busy cores, 2026-12-01)
    python lessons/01_train_a_tiny_gpt.py --quick    # 40 steps: about 2.8 s
    python lessons/01_train_a_tiny_gpt.py --steps 50 # any number of steps

A character-level GPT (minigrad/gpt.py) learns a small generated corpus of sentences. The
yardstick is the unigram baseline: the loss of the best model that ignores context, which
is the entropy of the character frequencies. Anything below it, the model learned from context.
Every number printed here is measured in this run. The loss curve goes to out/01_loss.png.
"""
# %%
import argparse
import sys
import time

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from tqdm import tqdm

import minigrad as mg
from minigrad.gpt import GPT, CharTokenizer, GPTConfig, get_batch, tiny_corpus, unigram_entropy

from _lesson import finish, predict, reveal, save_plot

# settings
SEED = 0
STEPS = 300
QUICK_STEPS = 40
BATCH, BLOCK = 16, 32
N_LAYER, N_HEAD, N_EMBD = 2, 4, 64
LR = 3e-3
EXERCISES = (12,)  # python -m minigrad check N: the exercises this lesson prepares (the optimizer it trains with)
PLOTS = {"01_loss.png": "the tiny GPT's training loss, step by step, against the unigram baseline"}


# %% [markdown]
# ## The corpus and its yardstick
# The unigram baseline is the loss of the best model that ignores context: the entropy of the
# character frequencies. A loss below it can only come from reading the context.

# %%
def corpus():
    text = tiny_corpus()
    tok = CharTokenizer(text)
    data = np.array(tok.encode(text))
    baseline = unigram_entropy(data.tolist())
    print(f"corpus: {len(text):,} characters, {tok.vocab_size} distinct; e.g. {text[:45]!r}")
    print(f"unigram baseline (entropy of character frequencies): {baseline:.3f} nats/char")
    return data, tok, baseline


# %% [markdown]
# ## The training loop
# Forward (the GPT returns the mean cross-entropy), zero_grad, backward, step: the loop every lesson
# after this one takes apart.

# %%
def train(model, data, steps):
    opt = mg.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    losses, t0 = [], time.perf_counter()
    bar = tqdm(range(steps), desc="training", unit="step", disable=None)  # no bar when piped
    for step in bar:
        x, y = get_batch(data, BATCH, BLOCK, device=model.wte.weight.device)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
        if step % max(1, steps // 6) == 0 or step == steps - 1:
            tqdm.write(f"step {step:4d}  loss {losses[-1]:.3f} nats/char")
    return losses, time.perf_counter() - t0


# %%
def plot(losses, baseline):
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(losses, color="k", lw=1, label="training loss (one batch)")
    ax.axhline(baseline, color="gray", ls="--", label=f"unigram baseline {baseline:.2f}")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy (nats per character)")
    ax.set_title("A tiny GPT learns its corpus")
    ax.legend()
    print(f"plot: {save_plot(fig, '01_loss.png')}")


# %%
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=STEPS, help=f"training steps (default {STEPS})")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps instead of {STEPS}: the loss falls, "
                                                         f"the sample stays poor")
    ap.add_argument("--device", default=None, help="'cpu' or 'cuda' (default: $MINIGRAD_DEVICE, else cpu)")
    ap.add_argument("--no-plot", action="store_true", help="skip writing out/01_loss.png")
    args = ap.parse_args(argv)
    steps = QUICK_STEPS if args.quick else args.steps
    if steps < 1:
        ap.error(f"--steps must be at least 1, got {steps}")

    mg.manual_seed(SEED)
    data, tok, baseline = corpus()
    cfg = GPTConfig(vocab_size=tok.vocab_size, block_size=BLOCK, n_layer=N_LAYER, n_head=N_HEAD, n_embd=N_EMBD)
    model = GPT(cfg).to(args.device or mg.default_device())
    print(f"model: {model.num_parameters():,} parameters, {N_LAYER} blocks, {N_EMBD} wide, context {BLOCK}")
    guess = predict(f"the loss at step 0, before any training. A fresh model spreads its bets about evenly over the "
                    f"{tok.vocab_size} characters", "nats per character", quick=args.quick)

    losses, seconds = train(model, data, steps)
    reveal(guess, losses[0], "nats per character")
    if guess is not None:
        print(f"  (-ln(1/{tok.vocab_size}) = {np.log(tok.vocab_size):.3f}: the loss of even odds; the measured start "
              f"differs by what the random initial weights prefer)")
    final = float(np.mean(losses[-10:]))
    print(f"{steps} steps in {seconds:.1f} s ({steps * BATCH * BLOCK / seconds:,.0f} tokens/s)")
    print(f"loss: {losses[0]:.3f} at the start, {final:.3f} at the end (mean of the last {min(10, steps)} steps); "
          f"{baseline - final:.3f} nats below the unigram baseline" if final < baseline else
          f"loss: {losses[0]:.3f} at the start, {final:.3f} at the end; still {final - baseline:.3f} nats above "
          f"the unigram baseline: train longer")

    prompt = mg.tensor([tok.encode("the ")], device=model.wte.weight.device)
    sample = model.eval().generate(prompt, 60)
    print("sample:", repr(tok.decode(sample.numpy()[0].tolist())))
    if not args.no_plot:
        plot(losses, baseline)
    finish(EXERCISES)


# %%
if __name__ == "__main__":
    main([] if "ipykernel" in sys.modules else None)  # in a notebook, the kernel's arguments are not the lesson's
