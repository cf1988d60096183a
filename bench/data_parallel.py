"""Data parallel on this machine's cores: time per step on 1 and 2 processes, and the share of it spent talking.

    python bench/data_parallel.py                  # runs itself under mpirun -n 1, then -n 2; prints a table
    python bench/data_parallel.py --json out/data_parallel.json
    python bench/data_parallel.py --quick          # fewer steps (a smoke run)

The workload is bench.py's case (c), the GPT training step, at an optimizer batch of 16 sequences: on N processes
each runs its 16 / N rows (in micro-batches of 4) and the gradients are all-reduced once per step
(minigrad.distributed.accumulation_step, taken apart here so that the all-reduce is timed alone). 'talking' is
the time in that all-reduce, which includes waiting for the slower process. Each process runs with one BLAS
thread, so that 2 processes on 2 cores do not fight over them. A benchmark, never a test.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import minigrad as mg  # noqa: E402
import minigrad.distributed as dist  # noqa: E402
import minigrad.functional as F  # noqa: E402
from minigrad.accumulate import accumulate  # noqa: E402
from minigrad.gpt import GPT, GPTConfig  # noqa: E402

CFG = dict(vocab_size=64, block_size=64, n_layer=4, n_head=4, n_embd=128)   # bench.py's GPT_CFG
BATCH, MICRO = 16, 4


def loss_sum(logits, targets):
    return F.cross_entropy(logits.reshape(-1, CFG["vocab_size"]), targets.reshape(-1), reduction="sum")


def rank_main(steps, out):
    dist.init_process_group()
    mg.manual_seed(0)
    model = GPT(GPTConfig(**CFG))
    ddp = dist.DistributedDataParallel(model)
    opt = mg.optim.AdamW(model.parameters(), lr=1e-4)
    x = mg.randint(0, CFG["vocab_size"], (BATCH, CFG["block_size"]))
    y = mg.randint(0, CFG["vocab_size"], (BATCH, CFG["block_size"]))
    xs, ys = dist.shard(x), dist.shard(y)
    total, talking = [], []
    for i in range(steps + 2):  # two warm-up steps
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        accumulate(ddp, loss_sum, xs, ys, micro_batch_size=min(MICRO, xs.shape[0]), total_items=x.numel())
        t1 = time.perf_counter()
        ddp.all_reduce_gradients()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if i >= 2:
            total.append(t3 - t0)
            talking.append(t2 - t1)
    grad_bytes = sum(p.data.nbytes for p in model.parameters())
    mine = dict(step_ms=1e3 * statistics.median(total), talking_ms=1e3 * statistics.median(talking))
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    if dist.get_rank() == 0:
        n = dist.get_world_size()
        step = max(r["step_ms"] for r in everyone)
        talk = max(r["talking_ms"] for r in everyone)
        with open(out, "w") as f:
            json.dump(dict(ranks=n, step_ms=step, talking_ms=talk, tokens_per_s=x.numel() / step * 1e3,
                           gradient_bytes=grad_bytes,
                           sent_per_step=2 * (n - 1) * grad_bytes // n if n > 1 else 0), f)
    dist.destroy_process_group()


def launch(ranks, steps, out):
    try:
        status = dist.launch(ranks, os.path.abspath(__file__), ["--rank", "--steps", steps, "--out", out],
                             env=dict(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1"))
    except ImportError as e:
        raise SystemExit(f"bench/data_parallel.py: {e}") from None
    if status:
        raise SystemExit(f"bench/data_parallel.py: mpirun -n {ranks} failed (exit status {status})")
    with open(out) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 timed steps instead of 15")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)   # set when mpirun starts a process
    ap.add_argument("--steps", type=int, default=15, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank:
        return rank_main(args.steps, args.out)
    steps = 3 if args.quick else args.steps
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in (1, 2):
            rows.append(launch(ranks, steps, os.path.join(tmp, f"{ranks}.json")))
    print(f"GPT step ({CFG}), optimizer batch {BATCH} x {CFG['block_size']} tokens, micro-batches of {MICRO} rows, "
          f"median of {steps} steps; one BLAS thread per process, {os.cpu_count()} cores\n")
    print(f"{'processes':>9}{'ms/step':>10}{'talking':>10}{'share':>8}{'tokens/s':>11}{'sent/step':>12}{'speed-up':>10}")
    for r in rows:
        print(f"{r['ranks']:>9}{r['step_ms']:>10.1f}{r['talking_ms']:>10.2f}{r['talking_ms'] / r['step_ms']:>8.1%}"
              f"{r['tokens_per_s']:>11,.0f}{r['sent_per_step'] / 2**20:>10.2f} MiB"
              f"{rows[0]['step_ms'] / r['step_ms']:>10.2f}")
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
