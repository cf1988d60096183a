"""The exercises, both ways: every reference passes its checks, and every untouched stub fails them
with its own NotImplementedError (not an import error or a typo). MINIGRAD_LEARNER=1 also grades
the learner's files in exercises/ (`python -m minigrad check` does the same, with a table).

Also: the grader names the file and line of a learner's broken file, explains a wrong answer,
and the command's exit codes and messages.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

from minigrad import grading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXERCISES = grading.exercises()
LEARNER = os.environ.get("MINIGRAD_LEARNER") == "1"


def test_the_course_has_its_exercises_in_order():
    numbers = [e.number for e in EXERCISES]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 2
    for e in EXERCISES:
        assert os.path.exists(e.path) and os.path.exists(e.solution), e.name


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.name for e in EXERCISES])
def test_the_reference_passes(exercise):
    result = grading.grade(exercise, solutions=True)
    assert result.status == "done", result.message


@pytest.mark.skipif(LEARNER, reason="MINIGRAD_LEARNER=1: the learner's files are graded instead")
@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.name for e in EXERCISES])
def test_the_stub_fails_for_the_stated_reason(exercise):
    result = grading.grade(exercise)
    assert result.status == "not started", (result.status, result.message)
    assert result.message.startswith(f"Exercise {exercise.number} ("), result.message


@pytest.mark.skipif(not LEARNER, reason="set MINIGRAD_LEARNER=1 to grade your own files in exercises/")
@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.name for e in EXERCISES])
def test_the_learners_file_passes(exercise):
    result = grading.grade(exercise)
    assert result.status == "done", f"{result.status}: {result.message}"


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    """What the grader remembers (hints shown, the last failure) goes to a file of this test's own."""
    monkeypatch.setenv("MINIGRAD_STATE", str(tmp_path / "state.json"))


@pytest.fixture
def course(tmp_path):
    """A copy of the course, to break on purpose."""
    shutil.copytree(grading.COURSE, tmp_path / "exercises")
    return str(tmp_path / "exercises")


def test_a_wrong_gradient_is_explained(course):
    path = os.path.join(course, "01_elementwise_backward.py")
    text = open(os.path.join(course, "solutions", "01_elementwise_backward.py")).read()
    open(path, "w").write(text.replace("return (g * (1 - y * y),)", "return (g * (1 + y * y),)"))
    result = grading.grade(grading.exercises(course)[0])
    assert result.status == "failing"
    assert re.search(r"Tanh\.backward.*index.*expected", result.message, re.S), result.message


def test_a_wrong_return_type_is_explained(course):
    path = os.path.join(course, "01_elementwise_backward.py")
    text = open(os.path.join(course, "solutions", "01_elementwise_backward.py")).read()
    open(path, "w").write(text.replace("return (g * self.saved[0],)", "return g * self.saved[0]"))
    result = grading.grade(grading.exercises(course)[0])
    assert result.status == "failing" and "Exp.backward must return a tuple" in result.message, result.message


def test_keeping_too_much_is_explained(course):
    path = os.path.join(course, "01_elementwise_backward.py")
    text = open(os.path.join(course, "solutions", "01_elementwise_backward.py")).read()
    open(path, "w").write(text.replace("        self.save_for_backward(y)\n        return y\n\n    def backward(self, g):\n"
                                       "        return (g * self.saved[0],)",
                                       "        self.save_for_backward(y, x)\n        return y\n\n"
                                       "    def backward(self, g):\n        return (g * self.saved[0],)"))
    result = grading.grade(grading.exercises(course)[0])
    assert result.status == "failing" and re.search(r"Exp kept 65536 bytes.*32768 bytes", result.message), \
        result.message


def test_a_syntax_error_names_the_file_and_line(course):
    path = os.path.join(course, "02_unbroadcast.py")
    with open(path, "a") as f:
        f.write("\ndef broken(:\n")
    result = grading.grade(grading.exercises(course)[1])
    assert result.status == "broken" and re.search(r"02_unbroadcast\.py, line \d+: SyntaxError", result.message)


def test_an_exception_in_the_learners_code_names_its_line(course):
    path = os.path.join(course, "02_unbroadcast.py")
    text = open(path).read().replace('    raise NotImplementedError("Exercise 2', '    return grad.sum(axis=99)\n    raise Foo("')
    open(path, "w").write(text)
    result = grading.grade(grading.exercises(course)[1])
    assert result.status == "failing" and re.search(r"02_unbroadcast\.py, line \d+ \(unbroadcast\): AxisError",
                                                    result.message), result.message


def run(*args):
    return subprocess.run([sys.executable, "-m", "minigrad", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.skipif(LEARNER, reason="the stubs are the learner's files now")
def test_check_on_the_stubs_shows_none_done_and_the_first_hint():
    r = run("check")
    assert r.returncode == 1, r.stderr
    assert f"0 of {len(EXERCISES)} done" in r.stdout
    first = grading.arc(EXERCISES)[0]  # the course's order: the exercise that the first lesson prepares
    assert first.lesson == 1 and f"Next: exercise {first.number}, " in r.stdout, r.stdout
    assert f"after lesson 1 (python -m minigrad lesson 1)" in r.stdout and f"Exercise {first.number} (" in r.stdout
    assert f"python -m minigrad check {first.number} --hint" in r.stdout


def test_check_on_the_solutions_shows_all_done():
    r = run("check", "--solutions")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(EXERCISES)} of {len(EXERCISES)} done" in r.stdout


@pytest.mark.parametrize("args,message", [(("check", "99"), "there is no exercise 99"),
                                          (("lesson", "0"), "there is no such lesson"),
                                          (("check", "x"), "invalid int value")])
def test_bad_input_gets_a_message_not_a_traceback(args, message):
    r = run(*args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_help_names_the_commands():
    r = run("--help")
    assert r.returncode == 0 and all(c in r.stdout for c in ("tour", "lesson", "check"))
