"""docs/mpi_notes.md's table of what the other ranks see when one fails, rerun for the rows that a design stands on
(rows 1 and 14 to 20 hang or vary, and are left to the notes). If a newer Open MPI wheel behaves otherwise, this
says which row to rewrite. Skipped, with the reason, where mpi4py or mpirun is not installed."""
import re

import pytest

from mpi_harness import run_ranks

pytestmark = pytest.mark.mpi
SCRIPT = "docs/mpi_failures.py"


def seen(r, rank):
    """What a surviving rank logged last: 'RuntimeError', 'TimeoutError', ... or None when it ended without one."""
    found = re.findall(r"rank \d+: (\w*(?:Error|Exception)): ", r.stdout[rank])
    return found[-1] if found else None


def test_row_8_a_killed_rank_gives_the_other_a_python_error_from_its_sigterm_handler():
    r = run_ranks(2, SCRIPT, "kill", "poll-sigterm", timeout=30)
    assert not r.timed_out and r.returncode == 137, r
    assert "exited on\nsignal 9 (Killed)" in r.launcher, r
    assert seen(r, 0) == "RuntimeError" and "another rank failed" in r.stdout[0], r


def test_row_13_a_raising_rank_under_mpi4py_aborts_and_every_other_rank_raises():
    r = run_ranks(3, SCRIPT, "raise", "poll-sigterm", abort_on_exception=True, timeout=30)
    assert not r.timed_out and r.returncode == 1, r
    assert "MPI_ABORT was invoked on rank 2" in r.launcher, r
    assert "ValueError: this rank failed" in r.stderr[2], r
    assert [seen(r, k) for k in (0, 1)] == ["RuntimeError", "RuntimeError"], r


@pytest.mark.parametrize("wait", ["block", "poll"])
def test_rows_10_and_12_without_a_handler_the_others_end_with_no_python_error(wait):
    r = run_ranks(2, SCRIPT, "raise", wait, abort_on_exception=True, timeout=30)
    assert not r.timed_out and r.returncode == 1, r
    assert seen(r, 0) is None and "Current thread" in r.stderr[0], r      # faulthandler: SIGTERM found it there
