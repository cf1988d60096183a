"""All-reduce latency and bandwidth on this machine, through mpi4py: what a data-parallel step's gradient sum costs.

    mpirun -n 2 python bench/allreduce.py                         # float64 buffers from 8 KiB to 64 MiB: a table
    mpirun -n 2 python bench/allreduce.py --json out/allreduce.json
    mpirun -n 2 python bench/allreduce.py --quick                 # three sizes, few rounds: checks that it runs

For each size every rank sums a float64 buffer with comm.Allreduce (MPI.SUM), round after round; each round starts
after a barrier and takes the slowest rank's time, and the table gives the median round. Two ways to wait:
'blocking' is Allreduce; 'polled' is Iallreduce and a loop on req.Test(), the wait that leaves Python in control
(a deadline, a signal handler: docs/mpi_notes.md), so its column is what that control costs.
algbw = bytes / time, the rate at which one rank's buffer is reduced; busbw = algbw * 2(n-1)/n, the bytes each
rank actually moves in a ring all-reduce (nccl-tests' definitions, in their doc PERFORMANCE.md), comparable across n.
A benchmark, never a test: no timing is asserted.
"""
import argparse
import json
import statistics
import time

import mpi4py
import numpy as np
from mpi4py import MPI

KiB, MiB = 2 ** 10, 2 ** 20
SIZES = [8 * KiB * 2 ** k for k in range(14)]           # 8 KiB, 16 KiB, ..., 64 MiB
QUICK_SIZES = [8 * KiB, 256 * KiB, 1 * MiB]
SECONDS_PER_SIZE = 1.0                                  # rounds are chosen to take about this long, 5 to 200 of them


def blocking(comm, x, y):
    comm.Allreduce(x, y, op=MPI.SUM)


def polled(comm, x, y):
    req = comm.Iallreduce(x, y, op=MPI.SUM)
    while not req.Test():
        pass


def round_time(comm, allreduce, x, y):
    """One all-reduce, started together after a barrier; the slowest rank's time."""
    comm.Barrier()
    start = time.perf_counter()
    allreduce(comm, x, y)
    return comm.allreduce(time.perf_counter() - start, op=MPI.MAX)


def measure(comm, nbytes, rounds=None):
    """Median seconds per all-reduce of nbytes of float64, blocking and polled, rounds interleaved."""
    x = np.full(nbytes // 8, comm.rank + 1.0)           # (elements,) float64
    y = np.empty_like(x)
    blocking(comm, x, y)                                # warm-up: connections, registration, pages touched
    expected = comm.size * (comm.size + 1) / 2
    if not (y == expected).all():
        raise RuntimeError(f"Allreduce of {nbytes} bytes on {comm.size} ranks gave {y[:3]}..., expected {expected}")
    polled(comm, x, y)
    if rounds is None:                                  # rank 0's first round decides, for every rank alike
        first = round_time(comm, blocking, x, y)
        rounds = comm.bcast(int(min(200, max(5, SECONDS_PER_SIZE / 2 / max(first, 1e-9)))), root=0)
    times = {"blocking": [], "polled": []}
    for _ in range(rounds):
        for name, allreduce in (("blocking", blocking), ("polled", polled)):
            times[name].append(round_time(comm, allreduce, x, y))
    return rounds, statistics.median(times["blocking"]), statistics.median(times["polled"])


def library():
    """'Open MPI v5.0.11' (the version string's first part; Open MPI's ends in a NUL byte)."""
    return MPI.Get_library_version().strip("\0 \n").splitlines()[0].split(",")[0]


def size_text(nbytes):
    return f"{nbytes // MiB} MiB" if nbytes >= MiB else f"{nbytes // KiB} KiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="three sizes (8 KiB, 256 KiB, 1 MiB), 3 rounds each")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH (rank 0 writes)")
    args = ap.parse_args()

    comm = MPI.COMM_WORLD
    n = comm.size
    rows = []
    for nbytes in QUICK_SIZES if args.quick else SIZES:
        rounds, t_block, t_poll = measure(comm, nbytes, rounds=3 if args.quick else None)
        algbw = nbytes / t_block
        rows.append({"bytes": nbytes, "elements": nbytes // 8, "rounds": rounds, "blocking_s": t_block,
                     "polled_s": t_poll, "algbw_GBps": algbw / 1e9, "busbw_GBps": algbw * 2 * (n - 1) / n / 1e9})

    if comm.rank != 0:
        return
    print(f"Allreduce(SUM) of float64 on {n} rank{'s' if n > 1 else ''}, {library()}, mpi4py {mpi4py.__version__}")
    print("median of rounds, each the slowest rank's time; algbw = bytes/time, busbw = algbw*2(n-1)/n")
    print(f"{'size':>8} {'rounds':>6} {'blocking':>11} {'polled':>11} {'algbw':>10} {'busbw':>10}")
    for r in rows:
        print(f"{size_text(r['bytes']):>8} {r['rounds']:>6} {r['blocking_s'] * 1e6:>8.1f} us "
              f"{r['polled_s'] * 1e6:>8.1f} us {r['algbw_GBps']:>6.2f} GB/s {r['busbw_GBps']:>6.2f} GB/s")
    if n == 1:
        print("one rank: nothing moves. Run it on two: mpirun -n 2 python bench/allreduce.py")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ranks": n, "dtype": "float64", "op": "SUM", "mpi": library(),
                       "mpi4py": mpi4py.__version__, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
