"""The grader of the exercises: load a learner's file, run its exercise's checks, explain what is wrong.

The course lives beside the package, in exercises/ (one file per exercise, in the order of the
engine's layers). Each exercise NN has three files:

    exercises/NN_name.py            the learner's: stubs that raise NotImplementedError("Exercise NN ...")
    exercises/solutions/NN_name.py  the reference (read it after, not before)
    exercises/checks/NN_name.py     TITLE, and check(module): raises Failed with a message that teaches

`python -m minigrad check [N]` grades the learner's files (`--solutions` grades the references);
tests/test_exercises.py proves both directions in CI: each reference passes its checks, and each
untouched stub fails them with its own NotImplementedError.

A check grades behaviour, not only values: memory exercises are measured with mg.profile (bytes
kept), recompute exercises with its FLOP counter.

Read next: exercises/01_elementwise_backward.py.
"""
import glob
import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass

import numpy as np

from . import backend
from .backend.random import get_rng_state, set_rng_state

COURSE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "exercises")


class Failed(AssertionError):
    """A check that did not pass, with a message for the learner."""


@dataclass
class Exercise:
    number: int
    name: str          # e.g. '01_elementwise_backward'
    title: str
    path: str          # the learner's file
    solution: str      # the reference
    check: object      # check(module)


@dataclass
class Result:
    exercise: Exercise
    status: str        # 'done', 'failing', 'not started', 'broken'
    message: str = ""


def exercises(course=COURSE):
    """Every exercise in exercises/, in order."""
    found = []
    for check_path in sorted(glob.glob(os.path.join(course, "checks", "[0-9][0-9]_*.py"))):
        name = os.path.basename(check_path)[:-3]
        checks = load(check_path, f"minigrad_check_{name}")
        found.append(Exercise(int(name[:2]), name, checks.TITLE, os.path.join(course, name + ".py"),
                              os.path.join(course, "solutions", name + ".py"), checks.check))
    return found


def load(path, module_name=None):
    """Import a file as a fresh module (a learner's edit is always read anew)."""
    module_name = module_name or "minigrad_exercise_" + os.path.basename(path)[:-3]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop(module_name, None)
    spec.loader.exec_module(module)
    return module


def grade(exercise, solutions=False):
    """Run one exercise's checks on the learner's file (or the reference) and say how it went."""
    path = exercise.solution if solutions else exercise.path
    try:
        module = load(path)
    except FileNotFoundError:
        return Result(exercise, "broken", f"{path} is missing: restore it with `git checkout -- {path}`")
    except Exception as e:  # a syntax error, an import error: name the file and the line, not the grader's insides
        return Result(exercise, "broken", _where(e, path))
    outer_rng = get_rng_state()  # checks seed minigrad's generator: the caller's stream is put back after
    try:
        exercise.check(module)
    except NotImplementedError as e:
        return Result(exercise, "not started", str(e))
    except Failed as e:
        return Result(exercise, "failing", str(e))
    except Exception as e:
        return Result(exercise, "failing", _where(e, path))
    finally:
        set_rng_state(outer_rng)
    return Result(exercise, "done")


def _where(e, path):
    """An exception from the learner's code, located in the learner's file."""
    if isinstance(e, SyntaxError):
        return f"{path}, line {e.lineno}: {type(e).__name__}: {e.msg}"
    frames = [f for f in traceback.extract_tb(e.__traceback__) if os.path.abspath(f.filename) == os.path.abspath(path)]
    at = f"{path}, line {frames[-1].lineno} ({frames[-1].name})" if frames else path
    return f"{at}: {type(e).__name__}: {e}"


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
