"""One arc through the course: every exercise a lesson names is prepared by that lesson or an earlier one.

The source of truth is each exercise's LESSON (in exercises/checks/): the stub's and the reference's first line
say "after lesson N" with that N; the lesson that prepares an exercise names it in its EXERCISES; no lesson names,
nor mentions, an exercise that a later lesson prepares; an exercise mentions no exercise that comes after it; the
README's path (lesson, then the exercises it prepares) is the same, and so are its counts of lessons and exercises; and
`check` sends the learner on along it.
"""
import ast
import glob
import os
import re

import pytest

from minigrad import grading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXERCISES = grading.exercises()
BY_NUMBER = {e.number: e for e in EXERCISES}
LESSONS = {int(os.path.basename(p)[:2]): p for p in glob.glob(os.path.join(ROOT, "lessons", "[0-9][0-9]_*.py"))}


def named_by(path):
    """A lesson's EXERCISES, read from its source."""
    found = re.search(r"^EXERCISES = (\(.*?\))", open(path, encoding="utf-8").read(), re.M)
    return tuple(ast.literal_eval(found.group(1))) if found else ()


def first_line(path):
    return ast.get_docstring(ast.parse(open(path, encoding="utf-8").read())).splitlines()[0]


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.name for e in EXERCISES])
def test_each_exercise_says_after_which_lesson(exercise):
    assert exercise.lesson in LESSONS, f"{exercise.name}: LESSON = {exercise.lesson} is no lesson"
    for path in (exercise.path, exercise.solution):
        assert f"(after lesson {exercise.lesson})" in first_line(path), (path, first_line(path))


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.name for e in EXERCISES])
def test_the_lesson_that_prepares_an_exercise_names_it(exercise):
    assert exercise.number in named_by(LESSONS[exercise.lesson]), \
        f"lesson {exercise.lesson} prepares exercise {exercise.number} but does not name it in its EXERCISES"


@pytest.mark.parametrize("number", sorted(LESSONS))
def test_no_lesson_names_an_exercise_it_has_not_prepared(number):
    source = open(LESSONS[number], encoding="utf-8").read()
    named = set(named_by(LESSONS[number]))
    named |= {int(n) for n in re.findall(r"\bexercises? (\d+)", source, re.I)}  # in its prose and its comments too
    for n in named:
        assert n in BY_NUMBER, f"lesson {number} names exercise {n}, which does not exist"
        assert BY_NUMBER[n].lesson <= number, \
            f"lesson {number} names exercise {n}, which lesson {BY_NUMBER[n].lesson} prepares, later in the course"


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.name for e in EXERCISES])
def test_no_exercise_leans_on_a_later_one(exercise):
    text = open(exercise.path, encoding="utf-8").read()
    for n in {int(n) for n in re.findall(r"\bexercises? (\d+)", text, re.I)} - {exercise.number}:
        assert BY_NUMBER[n].lesson <= exercise.lesson, \
            f"{exercise.name} (after lesson {exercise.lesson}) leans on exercise {n}, after lesson {BY_NUMBER[n].lesson}"


def test_the_readme_shows_the_same_path():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    rows = re.findall(r"^\| lesson (\d+), [^|]+\| ([\d, ]+) \|$", readme, re.M)
    assert rows, "README: the table of the path, lesson then exercises"
    shown = {int(lesson): [int(n) for n in numbers.split(",")] for lesson, numbers in rows}
    want = {}
    for e in grading.arc(EXERCISES):
        want.setdefault(e.lesson, []).append(e.number)
    assert shown == want
    assert [int(lesson) for lesson, _ in rows] == sorted(shown), "README: the path in the lessons' order"


def test_the_arc_follows_the_lessons():
    path = grading.arc(EXERCISES)
    assert [e.lesson for e in path] == sorted(e.lesson for e in EXERCISES)
    assert sorted(e.number for e in path) == sorted(BY_NUMBER)


def test_check_names_the_lesson_to_read_next(tmp_path, monkeypatch):
    """With the first exercises of the path done, `Next:` names the next one and the lesson that prepares it."""
    import shutil
    course = tmp_path / "exercises"
    shutil.copytree(grading.COURSE, course)
    path = grading.arc(grading.exercises(str(course)))
    for e in path[:3]:
        shutil.copy(e.solution, e.path)
    monkeypatch.setattr(grading, "COURSE", str(course))
    monkeypatch.setenv("MINIGRAD_STATE", str(tmp_path / "state.json"))
    from minigrad.__main__ import main
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["check"]) == 1
    nxt = path[3]
    assert f"3 of {len(path)} done" in out.getvalue()
    assert (f"Next: exercise {nxt.number}, {nxt.title} (" in out.getvalue()
            and f"after lesson {nxt.lesson} (python -m minigrad lesson {nxt.lesson})" in out.getvalue()), out.getvalue()


def test_the_readme_counts_the_lessons_and_exercises_there_are():
    """README, Status: "..., N lessons (`python -m minigrad tour`), M graded exercises ..."."""
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    words = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split())}
    said = re.search(r"(\w+) lessons \(`python -m minigrad tour`\), (\w+) graded exercises", readme)
    assert said and (words[said.group(1)], words[said.group(2)]) == (len(LESSONS), len(EXERCISES)), said
