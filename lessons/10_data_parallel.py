"""Lesson 10: beyond one process. Data parallel training on MPI, where accumulation meets all-reduce.

    python lessons/10_data_parallel.py                  # on 2 processes (it starts mpirun): about 10 s (make tour, 1 BLAS thread, 2 busy cores, 2026-12-01)
    python lessons/10_data_parallel.py --quick          # fewer training steps: about 6 s
    python -m minigrad launch -n 2 lessons/10_data_parallel.py   # the same, the two processes started by hand

Gradient accumulation (lesson 4) sums the gradients of micro-batches that run one after another in one process.
Data parallel training sums the gradients of shards that run at the same time in several processes. It is the
same sum, and minigrad.distributed does it the same way: each process divides its micro-batches' summed losses
by the number of tokens in the WHOLE batch (counted over all processes), so that one all-reduce of the gradients
(a sum, in a few large buckets) after the last micro-batch leaves every process with exactly the full batch's
gradient. The processes talk through MPI (mpi4py, with Open MPI from the package index: pip install -e '.[mpi]').

Part 1: one step of the GPT on 2 processes, each with 2 micro-batches of its half of the batch, against the same
        step in one process on the whole batch: the gradients agree to rounding (float64).
Part 2: training on 2 processes with accumulation: the loss falls as one process's would.
Part 3: what each process holds and sends: plain data parallel (every process keeps AdamW's moments for every
        parameter) against ZeRO stage 1 (each keeps the moments of its half and all-gathers the updated weights).
Plot: out/10_data_parallel.png (bytes per process by category; bytes sent per step).
"""
# %%
import argparse
import os
import sys
import time

import numpy as np

import minigrad as mg
import minigrad.distributed as dist
import minigrad.functional as F
from minigrad.gpt import GPT, CharTokenizer, GPTConfig, get_batch, tiny_corpus
from minigrad.profiler import CATEGORY_COLORS

from _lesson import command_line, finish, predict, reveal, save_plot

# %% settings
RANKS = 2
CFG = dict(block_size=32, n_layer=2, n_head=4, n_embd=64)
BATCH, MICRO = 8, 2                  # the optimizer's batch, split over the ranks; micro-batches of 2 rows per rank
STEPS, QUICK_STEPS = 60, 20
SEED = 0
PLOTS = {"10_data_parallel.png": "bytes per process by category for plain data parallel and ZeRO stage 1; "
                                 "bytes sent per process per step"}
EXERCISES = (11,)
KiB = 2**10


def relaunch(argv):
    """Run this file under mpirun with RANKS processes (the lesson was started alone). The prediction is asked here,
    where the keyboard is (under mpirun no rank reads a terminal), and handed to rank 0, which measures."""
    if {"-h", "--help"} & set(argv):
        return main(argv)  # argparse prints the help, once, and exits: no processes to start for that
    guess = predict(f"ZeRO stage 1 on {RANKS} processes: each keeps AdamW's moments for its share of the "
                    f"parameters only. Each process's optimizer state, as a share of plain data parallel's?", "%",
                    quick="--quick" in argv)
    argv = argv + ([f"--predicted={guess}"] if guess is not None else [])
    print("$ " + " ".join(["mpirun", "-n", str(RANKS), "python", "lessons/10_data_parallel.py"] + argv), flush=True)
    try:
        return dist.launch(RANKS, os.path.abspath(__file__), argv)
    except ImportError as e:
        print(f"Lesson 10: {e}; then mpirun -n 2 python lessons/10_data_parallel.py", file=sys.stderr)
        return 1


def say(*args, **kwargs):
    """Print on rank 0 only (every process runs this file)."""
    if dist.get_rank() == 0:
        print(*args, **kwargs, flush=True)


def loss_sum(logits, targets):
    """The SUM of the micro-batch's token losses: accumulation divides by the whole batch's token count."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")


def part1(tok, data):
    """One step, 2 processes x 2 micro-batches, against 1 process x the whole batch, in float64."""
    mg.manual_seed(SEED)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, **CFG)).to("float64")
    ddp = dist.DistributedDataParallel(model)
    opt = mg.optim.SGD(model.parameters(), lr=0.0)  # lr 0: we only look at the gradient
    x, y = get_batch(data, BATCH, CFG["block_size"])  # the same batch on every rank (the same seed)
    y.data[0, :10] = -100                             # padding: ignored tokens count for nothing, anywhere
    mine_x, mine_y = dist.shard(x), dist.shard(y)
    loss, tokens = dist.accumulation_step(ddp, loss_sum, opt, mine_x, mine_y, micro_batch_size=MICRO)
    grads = [p.grad.numpy() for p in model.parameters()]
    say(f"Part 1: one step of a {sum(p.numel() for p in model.parameters()):,}-parameter GPT on {dist.get_world_size()} "
        f"processes. Rank 0 has rows 0-{BATCH // 2 - 1} of the batch and rank 1 rows {BATCH // 2}-{BATCH - 1}, each "
        f"in micro-batches of {MICRO}; {tokens} tokens count (10 are padding).")
    if dist.get_rank() == 0:
        alone = GPT(GPTConfig(vocab_size=tok.vocab_size, **CFG)).to("float64")
        alone.load_state_dict(model.state_dict())
        result = mg.accumulation_step(alone, loss_sum, mg.optim.SGD(alone.parameters(), lr=0.0), x, y, steps=1)
        worst = max(float(np.abs(g - p.grad.numpy()).max() / np.abs(p.grad.numpy()).max())
                    for g, p in zip(grads, alone.parameters()))
        print(f"  the loss over the whole batch: {loss:.12f} on 2 processes, {result.loss:.12f} in one")
        print(f"  the largest difference between the two gradients, relative to the largest entry of each: "
              f"{worst:.1e} (float64 rounding: the sums run in another order)")
        assert worst < 1e-12, worst
    say()


def part2(tok, data, steps):
    mg.manual_seed(SEED)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, **CFG))
    ddp = dist.DistributedDataParallel(model)
    opt = mg.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    t0 = time.perf_counter()
    for step in range(steps):
        x, y = get_batch(data, BATCH, CFG["block_size"])  # the same draw everywhere; each rank takes its rows
        loss, _ = dist.accumulation_step(ddp, loss_sum, opt, dist.shard(x), dist.shard(y), micro_batch_size=MICRO)
        losses.append(loss)
    say(f"Part 2: {steps} steps of training on {dist.get_world_size()} processes ({(time.perf_counter() - t0) / steps * 1e3:.0f} "
        f"ms a step): the loss per token went from {losses[0]:.3f} to {np.mean(losses[-5:]):.3f} (mean of the last "
        f"5 steps). Every process holds the same weights after each step: the same gradient, the same update.")
    weights = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, float(np.abs(weights).sum()))
    assert len(set(everyone)) == 1, everyone
    say()
    return losses


def part3(tok, data, predicted=None):
    """One step each way, under mg.profile on every rank: bytes held and bytes sent."""
    rows = {}
    for name in ("plain data parallel", "ZeRO stage 1"):
        mg.manual_seed(SEED)
        model = GPT(GPTConfig(vocab_size=tok.vocab_size, **CFG))
        ddp = dist.DistributedDataParallel(model)
        if name == "plain data parallel":
            opt = mg.optim.AdamW(model.parameters(), lr=3e-3)
        else:
            opt = dist.ZeroRedundancyOptimizer(model.parameters(), mg.optim.AdamW, lr=3e-3)
        x, y = get_batch(data, BATCH, CFG["block_size"])
        dist.accumulation_step(ddp, loss_sum, opt, dist.shard(x), dist.shard(y), micro_batch_size=MICRO)  # warm-up
        with mg.profile(model, opt) as prof:
            dist.accumulation_step(ddp, loss_sum, opt, dist.shard(x), dist.shard(y), micro_batch_size=MICRO)
        mine = dict(prof.bytes_at_peak(), sent=prof.communicated("sent"), received=prof.communicated("received"))
        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, mine)
        rows[name] = everyone
    params = rows["plain data parallel"][0]["parameters"]
    say(f"Part 3: what each process holds at its step's peak and sends per step (the parameters are {params / KiB:.0f} "
        f"KiB, float32):\n")
    say(f"{'':<22}{'rank':>5}{'parameters':>12}{'gradients':>11}{'optimizer':>11}{'activations':>13}"
        f"{'sent':>10}{'received':>10}   (KiB)")
    for name, ranks in rows.items():
        for r, b in enumerate(ranks):
            say(f"{name if r == 0 else '':<22}{r:>5}" + "".join(f"{b[c] / KiB:>{w}.0f}" for c, w in (
                ("parameters", 12), ("gradients", 11), ("optimizer", 11), ("activations", 13), ("sent", 10),
                ("received", 10))))
    plain, zero = rows["plain data parallel"], rows["ZeRO stage 1"]
    n = dist.get_world_size()
    shares = ", ".join(f"{b['optimizer'] / KiB:.0f}" for b in zero)
    if dist.get_rank() == 0 and predicted is not None:
        reveal(predicted, 100 * max(b["optimizer"] for b in zero) / plain[0]["optimizer"], "%")
    say(f"\nPlain: every process keeps AdamW's two moments for every parameter ({plain[0]['optimizer'] / KiB:.0f} "
        f"KiB), and sends 2 (N - 1) / N = {2 * (n - 1) / n:.0f} x the gradients' bytes in the ring all-reduce. "
        f"ZeRO stage 1: each keeps the moments of its share "
        f"({shares} KiB: about 1/{n} each, as the parameters split), and "
        f"sends its updated share once more in an all-gather (+{(zero[0]['sent'] - plain[0]['sent']) / KiB:.0f} KiB on "
        f"rank 0). On a GPT-2 with 1.5 billion parameters, AdamW's moments are 12 GB a process: ZeRO turns that "
        f"into 12 / N GB for one more pass of the weights over the network.\n")
    return rows


def plot(rows, losses):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4.4))
    labels, stacks = [], {c: [] for c in ("parameters", "gradients", "optimizer", "activations")}
    for name, ranks in rows.items():
        for r, b in enumerate(ranks):
            labels.append(f"{'plain' if name.startswith('plain') else 'ZeRO-1'}\nrank {r}")
            for c in stacks:
                stacks[c].append(b[c] / KiB)
    bottom = np.zeros(len(labels))
    for c, values in stacks.items():
        a1.bar(labels, values, bottom=bottom, label=c, color=CATEGORY_COLORS[c])
        bottom += values
    a1.set_ylim(0, bottom.max() * 1.3)  # room above the bars for the legend
    a1.set_ylabel("memory held at the step's peak (KiB)")
    a1.set_title("memory per process, by category", fontsize=10)
    a1.legend(fontsize=8, ncol=2, loc="upper center")
    sent = [b["sent"] / KiB for ranks in rows.values() for b in ranks]
    received = [b["received"] / KiB for ranks in rows.values() for b in ranks]
    at = np.arange(len(labels))
    a2.bar(at - 0.2, sent, 0.4, label="sent", color="0.35")  # not a category of memory: greys
    a2.bar(at + 0.2, received, 0.4, label="received", color="0.7")
    a2.set_xticks(at, labels)
    a2.set_ylim(0, max(sent + received) * 1.3)
    a2.set_ylabel("bytes per step (KiB)")
    a2.set_title("communication per process, one step", fontsize=10)
    a2.legend(fontsize=8, ncol=2, loc="upper center")
    a3.plot(range(1, len(losses) + 1), losses, color="k", lw=1)
    a3.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    a3.set_xlabel("step")
    a3.set_ylabel("loss per token (nats)")
    a3.set_title(f"training on {dist.get_world_size()} processes", fontsize=10)
    a3.grid(True, alpha=0.3)
    print(f"plot: {save_plot(fig, '10_data_parallel.png')}")


def main(argv=None):
    ap = command_line(__doc__, quick=f"{QUICK_STEPS} training steps instead of {STEPS}", no_plot="print only")
    ap.add_argument("--predicted", type=float, default=None, help=argparse.SUPPRESS)  # asked before mpirun started
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    dist.init_process_group()
    tok = CharTokenizer(tiny_corpus())
    data = tok.encode(tiny_corpus())
    part1(tok, data)
    losses = part2(tok, data, QUICK_STEPS if args.quick else STEPS)
    rows = part3(tok, data, args.predicted)
    if dist.get_rank() == 0:
        if not args.no_plot:
            plot(rows, losses)
        finish(EXERCISES, t0)
    dist.destroy_process_group()


# %%
if __name__ == "__main__":
    if "OMPI_COMM_WORLD_SIZE" not in os.environ and "PMI_SIZE" not in os.environ:  # started alone: start mpirun
        sys.exit(relaunch(sys.argv[1:]))
    main()
