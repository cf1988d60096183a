"""The grader of the exercises: load a learner's file, run its exercise's checks, explain what is wrong.

The course lives beside the package, in exercises/ (one file per exercise, in the order of the
engine's layers). Each exercise NN has three files:

    exercises/NN_name.py            the learner's: stubs that raise NotImplementedError("Exercise NN ...")
    exercises/solutions/NN_name.py  the reference (read it after, not before)
    exercises/checks/NN_name.py     TITLE; LESSON, the lesson that prepares it; HINTS, three tiers (a nudge, the
                                    key idea, the near-solution); QUESTION, the "explain" question's answer; and
                                    check(module): raises Failed with a message that teaches

`python -m minigrad check [N]` grades the learner's files (`--solutions` grades the references);
tests/test_exercises.py proves both directions in CI: each reference passes its checks, and each
untouched stub fails them with its own NotImplementedError.

A check grades behaviour, not only values: memory exercises are measured with mg.profile (bytes
kept), recompute exercises with its FLOP counter. When the code passes, the grader asks the question
at the end of the exercise's docstring (the learner's EXPLAIN: a number or a choice).

A failure comes in two parts: the message, which says what is wrong, and its detail (a full trace: the
moment-by-moment layout, the best schedule, the learner's traceback), shown with `check N --explain` or
when the same failure comes twice in a row. `check N --hint` shows one more hint each time. Both
remember, per exercise, in .minigrad/state.json beside exercises/ (MINIGRAD_STATE overrides the file;
`check N --reset-hints` forgets an exercise's hints).

Later exercises build on the learner's earlier ones (8 on 7, 13 on 6 and 9): the learner's file loads its earlier
exercise from its own folder (`earlier`), and the check grades that one first (`builds_on`).

The exercises follow the lessons: each is prepared by the lesson its LESSON names (its docstring's
first line says "after lesson N"), and `check` sends the learner on along that path (`arc`).

Read next: exercises/01_elementwise_backward.py.
"""
import glob
import hashlib
import importlib.util
import json
import math
import os
import sys
import traceback
from dataclasses import dataclass, field

import numpy as np

from . import backend
from .backend.random import get_rng_state, set_rng_state

COURSE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "exercises")


class Failed(AssertionError):
    """A check that did not pass: a message for the learner, and its detail (the full trace, shown on request)."""

    def __init__(self, message, detail=""):
        super().__init__(message)
        self.detail = detail


@dataclass
class Question:
    """The answer to an exercise's "explain" question: a number (within tolerance, relative) or a choice (a
    letter). wrong: {answer: why it is not}, for the answers a misconception gives."""
    answer: object
    tolerance: float = 0.0
    wrong: dict = field(default_factory=dict)

    def judge(self, given):
        """None if `given` is right, "no answer yet" if there is none, else what to say."""
        if given is None or given is Ellipsis:
            return "no answer yet"
        if isinstance(self.answer, str):
            key = str(given).strip().strip("()").lower()
            if key == self.answer:
                return None
            same = key.__eq__
        else:
            try:
                value = float(given)
            except (TypeError, ValueError):
                return f"EXPLAIN = {given!r}, but the answer is a number"
            tolerance = self.tolerance or 1e-9

            def same(w):
                return math.isclose(value, w, rel_tol=tolerance)
            if same(self.answer):
                return None
        why = next((why for w, why in self.wrong.items() if same(w)), None)
        return f"EXPLAIN = {given!r} is not it" + (f": {why}" if why else "")


@dataclass
class Exercise:
    number: int
    name: str          # e.g. '01_elementwise_backward'
    title: str
    path: str          # the learner's file
    solution: str      # the reference
    check: object      # check(module)
    lesson: int = 0    # the lesson that prepares it ("after lesson N")
    hints: tuple = ()  # three tiers: a nudge, the key idea, the near-solution
    question: Question = None  # the "explain" question's answer


@dataclass
class Result:
    exercise: Exercise
    status: str        # 'done', 'to explain' (the code passes; the question is left), 'failing', 'not started', 'broken'
    message: str = ""
    detail: str = ""   # the full trace of a failure: `check N --explain`, or the same failure twice

    @property
    def code_passes(self):
        return self.status in ("done", "to explain")


def exercises(course=None):
    """Every exercise in exercises/ (or in `course`), in order."""
    course = course or COURSE
    found = []
    for check_path in sorted(glob.glob(os.path.join(course, "checks", "[0-9][0-9]_*.py"))):
        name = os.path.basename(check_path)[:-3]
        checks = load(check_path, f"minigrad_check_{name}")
        found.append(Exercise(int(name[:2]), name, checks.TITLE, os.path.join(course, name + ".py"),
                              os.path.join(course, "solutions", name + ".py"), checks.check,
                              getattr(checks, "LESSON", 0), tuple(getattr(checks, "HINTS", ())),
                              getattr(checks, "QUESTION", None)))
    return found


def arc(found):
    """The exercises in the order of the course: by the lesson that prepares them, then by number."""
    return sorted(found, key=lambda e: (e.lesson, e.number))


def load(path, module_name=None):
    """Import a file as a fresh module (a learner's edit is always read anew)."""
    module_name = module_name or "minigrad_exercise_" + os.path.basename(path)[:-3]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop(module_name, None)
    spec.loader.exec_module(module)
    return module


def earlier(path, number):
    """The learner's exercise `number`, loaded anew from the folder of `path` (a later exercise's file: its
    __file__). A later exercise builds on the learner's own earlier one, as `seven = earlier(__file__, 7)`."""
    return load(_beside(path, number))


def _beside(path, number):
    folder = os.path.dirname(os.path.abspath(path))
    found = sorted(glob.glob(os.path.join(folder, f"{number:02d}_*.py")))
    if not found:
        raise ImportError(f"{os.path.basename(path)} builds on your exercise {number}, but there is no "
                          f"{number:02d}_*.py beside it in {folder}: restore it with `git checkout -- {folder}`")
    return found[0]


def builds_on(module, number, piece):
    """In the check of a later exercise (the learner's `module`, its piece named `piece`): the learner's exercise
    `number`, beside it, must pass its own check first. Not started: NotImplementedError, so that the later exercise
    counts as not started too; failing: Failed, saying which check to run."""
    path = _beside(module.__file__, number)
    exercise = next(e for e in exercises() if e.number == number)
    later = os.path.basename(module.__file__)[:2].lstrip("0")
    result = grade(Exercise(**{**vars(exercise), "path": path, "question": None}))
    if result.status == "not started":
        raise NotImplementedError(f"Exercise {later} ({piece}): it builds on your exercise {number}, which is not "
                                  f"written yet: finish it first (python -m minigrad check {number})")
    if not result.code_passes:
        raise Failed(f"exercise {later} builds on your exercise {number}, which does not pass its check yet: "
                     f"{result.message}. Make `python -m minigrad check {number}` pass first", result.detail)


def grade(exercise, solutions=False):
    """Run one exercise's checks on the learner's file (or the reference) and say how it went."""
    path = exercise.solution if solutions else exercise.path
    try:
        module = load(path)
    except FileNotFoundError:
        return Result(exercise, "broken", f"{path} is missing: restore it with `git checkout -- {path}`")
    except Exception as e:  # a syntax error, an import error: name the file and the line, not the grader's insides
        return Result(exercise, "broken", _where(e, path), _trace(e, path))
    outer_rng = get_rng_state()  # checks seed minigrad's generator: the caller's stream is put back after
    try:
        exercise.check(module)
    except NotImplementedError as e:
        return Result(exercise, "not started", str(e))
    except Failed as e:
        return Result(exercise, "failing", str(e), e.detail)
    except Exception as e:
        return Result(exercise, "failing", _where(e, path), _trace(e, path))
    finally:
        set_rng_state(outer_rng)
    if exercise.question is not None:
        wrong = exercise.question.judge(getattr(module, "EXPLAIN", None))
        if wrong == "no answer yet":
            return Result(exercise, "to explain", f"Exercise {exercise.number} (explain): the code passes every check. "
                          f"One question is left, at the end of the docstring: set EXPLAIN in {os.path.relpath(path)}")
        if wrong:
            return Result(exercise, "to explain", f"Exercise {exercise.number} (explain): the code passes; {wrong}. "
                          f"Think it through from the exercise's idea, not from the code")
    return Result(exercise, "done")


def _where(e, path):
    """An exception from the learner's code, located in the learner's file."""
    if isinstance(e, SyntaxError):
        return f"{path}, line {e.lineno}: {type(e).__name__}: {e.msg}"
    frames = [f for f in traceback.extract_tb(e.__traceback__) if os.path.abspath(f.filename) == os.path.abspath(path)]
    at = f"{path}, line {frames[-1].lineno} ({frames[-1].name})" if frames else path
    return f"{at}: {type(e).__name__}: {e}"


def _trace(e, path):
    """The traceback of an exception raised in the learner's code, from the learner's first frame on."""
    frames = traceback.extract_tb(e.__traceback__)
    mine = [i for i, f in enumerate(frames) if os.path.abspath(f.filename) == os.path.abspath(path)]
    frames = frames[mine[0]:] if mine else frames
    return "".join(traceback.format_list(frames)) + f"{type(e).__name__}: {e}"


# ----------------------------------------------------------------------------- what the grader remembers

def state_path(course=None):
    """The file that remembers, per exercise, the hints shown and the last failure."""
    return os.environ.get("MINIGRAD_STATE") or os.path.join(os.path.dirname(os.path.abspath(course or COURSE)),
                                                            ".minigrad", "state.json")


def _read_state(course=None):
    try:
        with open(state_path(course), encoding="utf-8") as f:
            state = json.load(f)
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_state(state, course=None):
    path = state_path(course)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(state, f, indent=1, sort_keys=True)
    except OSError:
        pass  # a read-only clone: the grader forgets, and still grades


def next_hint(exercise, course=None):
    """Reveal one more tier of the exercise's hints: (the hints shown so far, how many there are)."""
    state = _read_state(course)
    shown = state.setdefault("hints", {})
    tier = min(int(shown.get(str(exercise.number), 0)) + 1, len(exercise.hints))
    shown[str(exercise.number)] = tier
    _write_state(state, course)
    return list(exercise.hints[:tier]), len(exercise.hints)


def reset_hints(exercise, course=None):
    state = _read_state(course)
    state.get("hints", {}).pop(str(exercise.number), None)
    _write_state(state, course)


def failed_again(result, course=None):
    """Note the result's failure; True if the exercise failed the same way the last time it was graded."""
    state = _read_state(course)
    last = state.setdefault("failures", {})
    key = str(result.exercise.number)
    if result.status not in ("failing", "broken"):
        if last.pop(key, None) is not None:
            _write_state(state, course)
        return False
    digest = hashlib.sha1(result.message.encode()).hexdigest()[:16]
    again = last.get(key) == digest
    last[key] = digest
    _write_state(state, course)
    return again


def now_build_it(numbers):
    """The lines a lesson ends with: the exercises that go with it, and the command that grades each."""
    titles = {e.number: e.title for e in exercises()}  # none outside a clone of the repository
    print("\nNow build it:")
    for n in numbers:
        print(f"  python -m minigrad check {n:<3} {titles.get(n, '')}")


# ----------------------------------------------------------------------------- helpers for the checks

def close(name, got, expected, rtol=1e-7, atol=1e-10, where=""):
    """Compare arrays and, when they differ, say which element, what was expected and what came."""
    got = backend.to_numpy(got.data if hasattr(got, "requires_grad") else got) if got is not None else None
    expected = np.asarray(expected)
    if got is None:
        raise Failed(f"{name}: got None, expected an array of shape {expected.shape}{where}")
    got = np.asarray(got)
    if got.shape != expected.shape:
        raise Failed(f"{name}: got shape {got.shape}, expected {expected.shape}{where}")
    bad = ~np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        i = tuple(int(k) for k in np.argwhere(bad)[0])
        raise Failed(f"{name}: {int(bad.sum())} of {bad.size} elements differ; at index {i} expected "
                     f"{expected[i]!r}, got {got[i]!r}{where}")


def require(condition, message):
    if not condition:
        raise Failed(message)


def rng(seed=0):
    return np.random.default_rng(seed)
