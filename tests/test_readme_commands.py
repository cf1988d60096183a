"""The README's commands, as written, on a fresh clone.

Every line of the README's shell blocks (``` fences with no language) is a command a reader will paste into a
terminal at the clone's root. This file takes each one out of the README, and runs the quick ones exactly as
written (the `.venv/bin/python ...` form, with no venv activated and no PYTHONPATH) in a copy of the checkout
as a fresh clone has it (`git ls-files`: the tracked files and the new ones not ignored), whose `.venv` is the
one running these tests. Each must end as a fresh clone expects: exit status 0 (`check` says 1 while an
exercise is not done, and prints its table), and no Python traceback. The slow ones are named below, each with
the reason it does not run here and where it is run instead; a command that is neither quick nor named fails
the test, so a new command in the README is run or explained.

Only on the default device: the commands are what a reader types, with no MINIGRAD_DEVICE.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")

# what is not run here, by the start of the command, and why
NOT_RUN = {
    "make tour": "the main job (about 2 minutes): the lessons' own tests run each lesson, and CI's reader runs it",
    "make test": "this suite itself",
    "make bench": "a benchmark (minutes, and it installs PyTorch and JAX): never a test",
    ".venv/bin/pip install": "changes the venv and needs the package index; make test runs it",
    ".venv/bin/python bench/bench.py": "a benchmark, minutes each part; tests/test_docs_and_lessons.py runs it with --quick",
}
QUICK_SECONDS = 120   # the longest a quick command may take here (the planner's search is the slowest: ~15 s)


def readme_commands(text):
    """Each command line of the README's shell blocks, without its comment: [(line number, command)]."""
    found = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        if m.group(1):                  # ```python: code to read, not commands
            continue
        first = text[:m.start()].count("\n") + 2
        for i, line in enumerate(m.group(2).splitlines()):
            command = line.split(" #")[0].strip()
            if re.match(r"(make|\.venv/|python|bash|[A-Z_]+=)", command):  # not a table of output
                found.append((first + i, command))
    return found


COMMANDS = readme_commands(open(README).read())


def _reason_not_run(command):
    return next((why for start, why in NOT_RUN.items() if command.startswith(start)), None)


def test_the_readme_has_commands_and_every_one_is_quick_or_named():
    assert len(COMMANDS) >= 15, COMMANDS
    for line, command in COMMANDS:
        if _reason_not_run(command) is None:
            assert command.startswith(".venv/bin/python -m minigrad "), (
                f"README line {line}: {command!r} is neither a quick `.venv/bin/python -m minigrad ...` command "
                f"nor named in NOT_RUN with why it is not run: write it in the README's one form, or name it")


def test_every_reason_names_a_command_that_is_there():
    for start in NOT_RUN:
        assert any(c.startswith(start) for _, c in COMMANDS), f"NOT_RUN names {start!r}, which the README lacks"


def test_the_readme_uses_one_form():
    """The form is `.venv/bin/python`, said once near the top: a bare `python -m minigrad` in a shell block runs
    a Python without minigrad's dependencies when no venv is activated."""
    for line, command in COMMANDS:
        assert not re.match(r"(python3?|pip|mpirun) ", command), f"README line {line}: {command!r}"


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory):
    if os.environ.get("MINIGRAD_DEVICE", "cpu") != "cpu":
        pytest.skip("the README's commands run on the default device, as a reader types them (the CPU pass runs "
                    "them)")
    if sys.prefix == sys.base_prefix:
        pytest.skip(f"the README's commands use .venv/bin/python; these tests run on {sys.executable}, not in a "
                    f"venv (make test runs them in .venv)")
    if shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")):  # a worktree has a .git file
        pytest.skip("needs a git checkout (git ls-files says what a fresh clone holds)")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    clone = tmp_path_factory.mktemp("clone")
    for name in filter(None, files):
        if os.path.isfile(os.path.join(ROOT, name)):  # a file deleted but not yet committed is listed too
            os.makedirs(clone / os.path.dirname(name), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, name), clone / name)
    os.symlink(sys.prefix, clone / ".venv")
    return clone


def _run(clone, command):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIGRAD_", "PYTHON"))}
    env["OPENBLAS_NUM_THREADS"] = "1"       # the test runner's cores are busy
    env["MPLBACKEND"] = "Agg"
    return subprocess.run(shlex.split(command), cwd=clone, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=QUICK_SECONDS)


@pytest.mark.parametrize("line,command", [c for c in COMMANDS if _reason_not_run(c[1]) is None],
                         ids=[f"line{n}" for n, c in COMMANDS if _reason_not_run(c) is None])
def test_the_command_runs_as_written(fresh_clone, line, command):
    if " launch " in command:
        from mpi_harness import missing
        if missing():
            pytest.skip(missing())
    r = _run(fresh_clone, command)
    said = r.stdout + r.stderr
    assert "Traceback" not in said, f"README line {line}: {command}\n{said[-3000:]}"
    if " check" in command:    # on a fresh clone the exercises are stubs: a table, 'not started', exit status 1
        assert r.returncode in (0, 1) and "not started" in said, f"README line {line}: {command}\n{said[-3000:]}"
    else:
        assert r.returncode == 0, f"README line {line}: {command} exited {r.returncode}\n{said[-3000:]}"
    assert said.strip(), f"README line {line}: {command} printed nothing"
