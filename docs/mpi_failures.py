"""What the other ranks see when one rank fails in the middle of training: the experiment of docs/mpi_notes.md.

    mpirun -n 2 python docs/mpi_failures.py raise block              # a hang: see the notes
    mpirun -n 3 python -m mpi4py docs/mpi_failures.py raise poll-sigterm
    mpirun -n 2 python docs/mpi_failures.py kill poll

The last rank fails at step 2 of 5, half a second after the others have entered that step's all-reduce, by
    raise     an unhandled ValueError          exit      os._exit(1)
    kill      SIGKILL before the all-reduce    kill-mid  SIGKILL 5 ms into a 64 MiB all-reduce
while the others wait in it by
    block         comm.Allreduce
    poll          comm.Iallreduce and a loop on req.Test(), with a 10 s deadline (TimeoutError)
    poll-sigterm  the same, with a SIGTERM handler that raises a RuntimeError saying why
Every rank logs what it sees, in seconds since the job started; faulthandler prints where a SIGTERM found a rank,
even inside MPI's C code, where no Python handler can run.
"""
import faulthandler
import os
import signal
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

DEADLINE = 10.0

mode, wait = sys.argv[1], sys.argv[2]
comm = MPI.COMM_WORLD
rank, victim = comm.rank, comm.size - 1
t0 = float(os.environ.get("T0") or comm.bcast(time.time()))    # one clock for every rank's log (T0: a driver's)


def log(*what):
    print(f"{time.time() - t0:6.3f}s rank {rank}:", *what, flush=True)


def on_sigterm(signum, frame):
    raise RuntimeError(f"rank {rank}: mpirun is ending the job (SIGTERM) while this rank waits in an all-reduce: "
                       f"another rank failed; its error is above")


faulthandler.register(signal.SIGTERM, chain=True)
if wait == "poll-sigterm":
    signal.signal(signal.SIGTERM, on_sigterm)

x = np.ones((64 if mode == "kill-mid" else 1) * 2 ** 20 // 8)   # (elements,) float64: 1 MiB, or 64 MiB
y = np.empty_like(x)
try:
    for step in range(5):
        if rank == victim and step == 2:
            time.sleep(0.5)                             # the others are inside this step's all-reduce by now
            log(f"fails by {mode}")
            if mode == "raise":
                raise ValueError("this rank failed")
            if mode == "exit":
                os._exit(1)
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if mode == "kill-mid":
                threading.Timer(0.005, os.kill, (os.getpid(), signal.SIGKILL)).start()
        log(f"step {step}: all-reduce ({wait})")
        if wait == "block":
            comm.Allreduce(x, y)
        else:
            req = comm.Iallreduce(x, y)
            deadline = time.monotonic() + DEADLINE
            while not req.Test():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"rank {rank}: the all-reduce of step {step} is not done after {DEADLINE} s")
                time.sleep(0.001)
        log(f"step {step}: done")
except BaseException as e:
    log(f"{type(e).__name__}: {e}")
    raise
log("finished")
