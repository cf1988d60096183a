"""The MPI test harness (tests/mpi_harness.py) keeps its promises, on 2 and 3 ranks: each rank's output apart, the
arguments passed, a failing rank ending the job within a bounded time, a hung job killed with every rank, and a
skip that says why where MPI is missing. Skipped, with the reason, where mpi4py or mpirun is not installed."""
import importlib.util
import json
import os
import sys

import pytest

import mpi_harness
from mpi_harness import _cmdline, run_ranks

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("n", [2, 3])
def test_each_rank_has_its_own_output_and_the_arguments(n):
    r = run_ranks(n, """
        import sys
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        print(comm.size, comm.allreduce(comm.rank + 1), sys.argv[1:])
        print("rank", comm.rank, "to stderr", file=sys.stderr)
    """, "a", 3).check()
    total = n * (n + 1) // 2
    assert r.stdout == [f"{n} {total} ['a', '3']\n"] * n
    assert r.stderr == [f"rank {rank} to stderr\n" for rank in range(n)]


def test_minigrad_is_imported_from_this_checkout():
    r = run_ranks(2, "import minigrad, os; print(os.path.dirname(minigrad.__file__))").check()
    assert r.stdout == [os.path.join(mpi_harness.ROOT, "minigrad") + "\n"] * 2


def test_a_relative_pythonpath_reaches_the_ranks_from_their_own_folder(monkeypatch):
    """The stand-in pass as a reader types it, `PYTHONPATH=tests/cupy_standin` from the checkout: the ranks, which run
    in a temporary folder, looked for tests/cupy_standin there, could not import cupy, and every minigrad script on
    'cuda' failed (test_profiler_export.py's collective test). The harness makes the entry absolute."""
    monkeypatch.chdir(mpi_harness.ROOT)
    monkeypatch.setenv("PYTHONPATH", os.path.join("tests", "cupy_standin"))
    r = run_ranks(2, "import cupy, os; print(os.path.dirname(cupy.__file__))").check()
    assert r.stdout == [os.path.join(mpi_harness.ROOT, "tests", "cupy_standin", "cupy") + "\n"] * 2, r


@pytest.mark.parametrize("n", [2, 3])
def test_a_rank_that_raises_ends_the_job_under_mpi4py_runner(n):
    """Without abort_on_exception the raising rank waits in MPI_Finalize and the others in the collective: a hang
    (docs/mpi_notes.md). With it, MPI_Abort ends every rank at once."""
    r = run_ranks(n, """
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        if comm.rank == comm.size - 1:
            raise ValueError("rank failed on purpose")
        comm.barrier()
    """, abort_on_exception=True, timeout=30)
    assert not r.timed_out and r.returncode != 0, r
    assert "ValueError: rank failed on purpose" in r.stderr[n - 1]
    assert "MPI_ABORT was invoked on rank" in r.launcher, r


def test_a_hung_job_is_killed_at_the_timeout_with_all_its_ranks():
    r = run_ranks(3, """
        import time
        from mpi4py import MPI
        print("started", flush=True)
        time.sleep(60)
    """, timeout=3)
    assert r.timed_out and r.stdout == ["started\n"] * 3 and 3 <= r.seconds < 15, r
    assert "timed out" in str(r)
    still_there = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).find(b"mpi_ranks_") >= 0
                   and _cmdline(p).find(r.command[-1].encode()) >= 0]
    assert not still_there


def test_check_shows_every_rank_when_the_job_failed():
    r = run_ranks(2, """
        import sys
        from mpi4py import MPI
        print("from rank", MPI.COMM_WORLD.rank)
        sys.exit(3)
    """, timeout=30)
    with pytest.raises(AssertionError) as info:
        r.check()
    message = str(info.value)
    assert "--- rank 0 stdout ---\nfrom rank 0" in message and "--- rank 1 stdout ---\nfrom rank 1" in message


def test_missing_mpi_skips_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert "mpi4py is not installed" in mpi_harness.missing() and "[mpi]" in mpi_harness.missing()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "no mpirun" in mpi_harness.missing() and "[mpi]" in mpi_harness.missing()
    with pytest.raises(pytest.skip.Exception, match="no mpirun"):
        run_ranks(2, "pass")


def test_the_allreduce_benchmark_runs_on_two_ranks(tmp_path):
    out = tmp_path / "allreduce.json"
    r = run_ranks(2, "bench/allreduce.py", "--quick", "--json", out).check()
    report = json.loads(out.read_text())
    assert report["ranks"] == 2 and [row["bytes"] for row in report["rows"]] == [8192, 262144, 1048576]
    assert all(row["blocking_s"] > 0 and row["polled_s"] > 0 and row["algbw_GBps"] > 0 for row in report["rows"])
    assert "1 MiB" in r.stdout[0] and r.stdout[1] == ""             # rank 0 prints the table, alone
