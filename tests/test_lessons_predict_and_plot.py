"""What every lesson shares: a prediction asked before the number is printed (from the keyboard, only where someone
can answer), the plots' one colour per category, and the tour's one BLAS thread."""
import ast
import glob
import os
import re
import select
import subprocess
import sys
import textwrap
import time

import pytest

from minigrad import __main__ as command
from minigrad.profiler import CATEGORIES, CATEGORY_COLORS, PHASE_COLORS, PHASES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LESSONS = sorted(glob.glob(os.path.join(ROOT, "lessons", "[0-9][0-9]_*.py")))
BROADCASTING = os.path.join(ROOT, "lessons", "06_broadcasting.py")  # the quickest lesson: about a second


def env(**extra):
    # ROOT first, the caller's path kept (the second pass of `make test` puts the CuPy stand-in on it)
    return {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
            **extra}


# --- the prediction

@pytest.mark.parametrize("path", LESSONS, ids=os.path.basename)
def test_every_lesson_asks_for_a_prediction_and_reveals_it(path):
    """Each lesson calls _lesson.predict before it prints the number and _lesson.reveal with what it measured: one
    call of each in its code (not its comments), the reveal after the question."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)]
    asked = [c.lineno for c in calls if c.func.id == "predict"]
    revealed = [c.lineno for c in calls if c.func.id == "reveal"]
    assert asked and revealed, f"{os.path.basename(path)} asks for no prediction (lessons/_lesson.py: predict, reveal)"
    # lesson 10 asks in the process that starts mpirun and reveals on rank 0: the question is still the earlier line
    assert min(asked) < max(revealed)


def run_in_a_terminal(path, answer, *args, no_predict="0", timeout=120):
    """Run a lesson with a pseudo-terminal as its stdin and stdout; type `answer` when it asks. Returns its output."""
    pty = pytest.importorskip("pty")
    main, side = pty.openpty()
    p = subprocess.Popen([sys.executable, path, "--no-plot", *args], stdin=side, stdout=side, stderr=side,
                         cwd=ROOT, env=env(MINIGRAD_NO_PREDICT=no_predict), close_fds=True)
    os.close(side)
    out, typed, deadline = b"", False, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(main, 4096)
                except OSError:  # the lesson ended and closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            if not typed and b"your prediction" in out:
                os.write(main, answer.encode() + b"\n")
                typed = True
            if p.poll() is not None and not ready:
                break
    finally:
        p.kill() if p.poll() is None else None
        p.wait()
        os.close(main)
    return out.decode(errors="replace").replace("\r\n", "\n")


def test_in_a_terminal_the_lesson_waits_for_the_prediction_and_says_how_far_it_was():
    out = run_in_a_terminal(BROADCASTING, "10")
    question = out.index("Predict: in NumPy, b of shape (5, 1)")
    verdict = re.search(r"You predicted 10 numbers; measured 25 numbers: 15 numbers too low \(60% of the measured "
                        r"value\): off by a factor of 2\.5", out)
    assert verdict, out[question:question + 600]
    assert question < verdict.start() < out.index("NumPy, b of shape (5, 1): b - 0.1 * g.sum(axis=1) has shape")


def test_a_right_prediction_is_called_right_and_a_unit_may_be_typed():
    out = run_in_a_terminal(BROADCASTING, "25 numbers")
    assert "You predicted 25 numbers; measured 25 numbers: exactly right." in out


def test_nobody_is_asked_through_a_pipe_in_the_tour_or_in_quick_mode():
    piped = subprocess.run([sys.executable, BROADCASTING, "--no-plot"], cwd=ROOT, env=env(), capture_output=True,
                           text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert piped.returncode == 0 and "(not asked: not a terminal." in piped.stdout
    assert "You predicted" not in piped.stdout
    tour = run_in_a_terminal(BROADCASTING, "10", no_predict="1")  # a terminal, but the tour's switch: no question
    assert "(not asked: started by the tour." in tour and "You predicted" not in tour
    quick = run_in_a_terminal(os.path.join(ROOT, "lessons", "01_train_a_tiny_gpt.py"), "3", "--quick")
    assert "(not asked: --quick." in quick and "You predicted" not in quick


def test_reveal_says_the_gap_plainly(capsys):
    sys.path.insert(0, os.path.join(ROOT, "lessons"))
    try:
        import _lesson
    finally:
        sys.path.pop(0)
    _lesson.reveal(64, 66, "KiB")
    _lesson.reveal(40, 50, "%")
    _lesson.reveal(3, 3.219, "nats per character")
    _lesson.reveal(None, 1.0, "KiB")  # no prediction: nothing to say
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["  You predicted 64 KiB; measured 66 KiB: 2 KiB too low (3% of the measured value): within 10%, "
                     "well predicted.",
                     "  You predicted 40%; measured 50%: 10 points too low (20% of the measured value).",
                     "  You predicted 3 nats per character; measured 3.22 nats per character: 0.219 nats per "
                     "character too low (7% of the measured value): within 10%, well predicted."]
    assert _lesson.micro_batches(4, 1) == "4 micro-batches of 1" and _lesson.micro_batches(1, 32) == "1 micro-batch of 32"


# --- the plots' colours

def test_one_colour_per_category_and_per_phase_none_shared():
    assert set(CATEGORY_COLORS) == set(CATEGORIES) and set(PHASE_COLORS) == set(PHASES)
    colours = list(CATEGORY_COLORS.values()) + list(PHASE_COLORS.values())
    assert len(set(colours)) == len(colours)


@pytest.mark.parametrize("path", LESSONS, ids=os.path.basename)
def test_a_lesson_that_draws_a_category_takes_its_colour_from_the_profiler(path):
    """A bar, a stack or a line labelled by a category (label=c in a loop over the categories, labels=CATEGORIES)
    gets its colour from CATEGORY_COLORS: matplotlib's default cycle made gradients green in one lesson and orange
    in two others."""
    source = open(path, encoding="utf-8").read()
    drawn = 0
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("bar", "barh", "stackplot", "plot", "fill_between", "axvspan")):
            continue
        keywords = {k.arg: ast.get_source_segment(source, k.value) for k in node.keywords}
        label = keywords.get("label") or keywords.get("labels") or ""
        if re.fullmatch(r"c|CATEGORIES|plan\.ORDER", label):
            drawn += 1
            colour = keywords.get("color") or keywords.get("colors") or ""
            assert "CATEGORY_COLORS" in colour, (os.path.basename(path), ast.get_source_segment(source, node))
    if re.search(r"\.(bar|stackplot)\(", source) and "for c in" in source:
        assert drawn, f"{os.path.basename(path)}: a loop over categories draws, but no call was recognised"


# --- the tour's settings

def test_the_tour_runs_each_lesson_with_one_blas_thread_and_no_predictions(tmp_path, monkeypatch, capfd):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "01_env.py").write_text(textwrap.dedent("""\
        import os
        print("seen:", os.environ.get("OPENBLAS_NUM_THREADS"), os.environ.get("MINIGRAD_NO_PREDICT"))
        """))
    monkeypatch.setattr(command, "LESSONS", str(lessons))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert command.main(["tour"]) == 0
    assert "seen: 1 1" in capfd.readouterr().out
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")  # what the caller sets is kept
    assert command.main(["tour"]) == 0
    assert "seen: 2 1" in capfd.readouterr().out


def test_make_tour_sets_one_blas_thread_as_make_test_does():
    rules = open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read()
    tour = re.search(r"^tour:.*?(?=^\S)", rules, re.S | re.M).group(0)
    test = re.search(r"^test:.*?(?=^\S)", rules, re.S | re.M).group(0)
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        setting = f"{variable}=$${{{variable}:-1}}"
        assert setting in tour and setting in test, variable


# --- a lesson as a notebook

def test_a_lesson_runs_as_a_notebook_in_a_jupyter_kernel(tmp_path):
    """jupytext reads the lesson's `# %%` cells as a notebook; nbclient runs it in a real IPython kernel, in a
    directory of its own with lessons/ on the path (so _lesson imports and out/ lands there). The lesson takes the
    kernel's arguments for none of its own, asks its prediction of a front end that takes no input, and draws."""
    jupytext = pytest.importorskip("jupytext")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    notebook = jupytext.read(BROADCASTING)
    assert [c.cell_type for c in notebook.cells].count("markdown") >= 3  # the # %% [markdown] cells are text
    path = os.pathsep.join([ROOT, os.path.join(ROOT, "lessons"), os.environ.get("PYTHONPATH", "")])
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = path  # the kernel is a child of this process: it inherits the environment
    try:
        nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        os.environ.pop("PYTHONPATH") if old is None else os.environ.__setitem__("PYTHONPATH", old)
    text = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "Predict: in NumPy, b of shape (5, 1)" in text
    assert "(not asked: this notebook's front end takes no input)" in text
    assert "has shape (5, 5) (no error)" in text and "Now build it:" in text
    assert (tmp_path / "out" / "06_broadcasting.png").stat().st_size > 10_000


@pytest.mark.parametrize("path", LESSONS, ids=os.path.basename)
def test_every_lesson_says_how_long_the_tour_took_to_run_it(path):
    """The docstring's run command gives the time the tour measured (one BLAS thread) and when; a --quick line, its
    own. A time from another setting (two BLAS threads ran lesson 1 eight times slower) would mislead."""
    doc = ast.get_docstring(ast.parse(open(path, encoding="utf-8").read()))
    runs = re.findall(r"^\s+python lessons/\S+\.py(\s+--quick)?\s+#.*?about [\d.]+ s(.*)$", doc, re.M)
    assert any(not quick and re.search(r"\(make tour, 1 BLAS thread, .*\d{4}-\d\d-\d\d\)", rest)
               for quick, rest in runs), doc.splitlines()[:5]
    if re.search(r"python lessons/\S+\.py --quick", doc):
        assert any(quick for quick, _ in runs), "the --quick line gives its time too"
