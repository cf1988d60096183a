"""Lesson 1: train a tiny GPT with minigrad and watch its loss fall.

    python lessons/01_train_a_tiny_gpt.py            # about 4 s on 2 cores (measured 2026-11-30)
    python lessons/01_train_a_tiny_gpt.py --steps 50 # quicker

A character-level GPT (minigrad/gpt.py) learns a small generated corpus of sentences. The
yardstick is the unigram baseline: the loss of the best model that ignores context, which
is the entropy of the character frequencies. Anything below it, the model learned from context.
Every number printed here is measured in this run. The loss curve goes to out/01_loss.png.
"""
import argparse
import os
import time

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from tqdm import tqdm

import minigrad as mg
from minigrad.gpt import GPT, CharTokenizer, GPTConfig, get_batch, tiny_corpus, unigram_entropy

# settings
SEED = 0
STEPS = 300
BATCH, BLOCK = 16, 32
N_LAYER, N_HEAD, N_EMBD = 2, 4, 64
LR = 3e-3
OUT = "out"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=STEPS, help=f"training steps (default {STEPS})")
    ap.add_argument("--device", default=None, help="'cpu' or 'cuda' (default: $MINIGRAD_DEVICE, else cpu)")
    ap.add_argument("--no-plot", action="store_true", help="skip writing out/01_loss.png")
    args = ap.parse_args()

    mg.manual_seed(SEED)
    text = tiny_corpus()
    tok = CharTokenizer(text)
    data = np.array(tok.encode(text))
    baseline = unigram_entropy(data.tolist())
    print(f"corpus: {len(text):,} characters, {tok.vocab_size} distinct; e.g. {text[:45]!r}")
    print(f"unigram baseline (entropy of character frequencies): {baseline:.3f} nats/char")

    cfg = GPTConfig(vocab_size=tok.vocab_size, block_size=BLOCK, n_layer=N_LAYER, n_head=N_HEAD, n_embd=N_EMBD)
    model = GPT(cfg).to(args.device or mg.default_device())
    opt = mg.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    print(f"model: {model.num_parameters():,} parameters, {N_LAYER} blocks, {N_EMBD} wide, context {BLOCK}")

    losses, t0 = [], time.perf_counter()
    bar = tqdm(range(args.steps), desc="training", unit="step", disable=None)  # no bar when piped
    for step in bar:
        x, y = get_batch(data, BATCH, BLOCK, device=model.wte.weight.device)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
        if step % max(1, args.steps // 6) == 0 or step == args.steps - 1:
            tqdm.write(f"step {step:4d}  loss {losses[-1]:.3f} nats/char")
    seconds = time.perf_counter() - t0
    final = float(np.mean(losses[-10:]))
    print(f"{args.steps} steps in {seconds:.1f} s ({args.steps * BATCH * BLOCK / seconds:,.0f} tokens/s)")
    print(f"loss: {losses[0]:.3f} at the start, {final:.3f} at the end (mean of the last 10 steps); "
          f"{baseline - final:.3f} nats below the unigram baseline" if final < baseline else
          f"still {final - baseline:.3f} nats above the unigram baseline: train longer")

    prompt = mg.tensor([tok.encode("the ")], device=x.device)
    sample = model.eval().generate(prompt, 60)
    print("sample:", repr(tok.decode(sample.numpy()[0].tolist())))

    if not args.no_plot:
        os.makedirs(OUT, exist_ok=True)
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(losses, label="training loss (one batch)")
        ax.axhline(baseline, color="gray", ls="--", label=f"unigram baseline {baseline:.2f}")
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("cross-entropy (nats per character)")
        ax.set_title("A tiny GPT learns its corpus")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(OUT, "01_loss.png"), dpi=120)
        print(f"plot: {os.path.join(OUT, '01_loss.png')}")


if __name__ == "__main__":
    main()
