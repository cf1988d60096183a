"""The exercises, both ways: every reference passes its checks, and every untouched stub fails them
with its own NotImplementedError (not an import error or a typo). MINIGRAD_LEARNER=1 also grades
the learner's files in exercises/ (`python -m minigrad check` does the same, with a table).

Also: the grader names the file and line of a learner's broken file, explains a wrong answer,
and the command's exit codes and messages; and the "explain" answers the engine can measure are measured.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import grading, schedules

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


# ----------------------------------------------------------------------------- hints, the full trace, the question

@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.name for e in EXERCISES])
def test_every_exercise_has_three_tiers_of_hints_and_a_question(exercise):
    assert len(exercise.hints) == 3 and all(len(h) > 40 for h in exercise.hints), exercise.hints
    assert len(set(exercise.hints)) == 3
    assert exercise.question is not None
    text = open(exercise.path, encoding="utf-8").read()
    assert "Explain (graded" in text and re.search(r"^EXPLAIN = None\b", text, re.M), exercise.path
    stub = grading.load(exercise.path)
    assert exercise.question.judge(stub.EXPLAIN) == "no answer yet"
    assert exercise.question.judge(grading.load(exercise.solution).EXPLAIN) is None


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.name for e in EXERCISES])
def test_the_stub_messages_say_what_is_missing_not_how(exercise):
    """Short: a stub's NotImplementedError names the piece and says what is missing; the hints say how."""
    messages = re.findall(r'NotImplementedError\(((?:"[^"]*"\s*)+)\)', open(exercise.path).read())
    assert messages
    for message in messages:
        text = "".join(re.findall(r'"([^"]*)"', message))
        assert re.match(rf"Exercise {exercise.number} \([\w.]+\): ", text), text
        assert len(text) < 110, f"{exercise.name}: {text!r} says more than what is missing"


def _learner_file(course, number, text):
    exercise = next(e for e in grading.exercises(course) if e.number == number)
    with open(exercise.path, "w") as f:
        f.write(text)
    return exercise


def test_the_question_is_asked_once_the_code_passes(course):
    exercise = next(e for e in grading.exercises(course) if e.number == 2)
    reference = open(exercise.solution).read()
    _learner_file(course, 2, reference.replace("EXPLAIN = 4", "EXPLAIN = None"))
    result = grading.grade(exercise)
    assert result.status == "to explain" and result.code_passes, result
    assert "One question is left" in result.message and "EXPLAIN" in result.message
    _learner_file(course, 2, reference.replace("EXPLAIN = 4", "EXPLAIN = 1"))
    result = grading.grade(exercise)
    assert result.status == "to explain" and "EXPLAIN = 1 is not it: " in result.message, result.message
    assert "their gradients add up" in result.message
    _learner_file(course, 2, reference.replace("EXPLAIN = 4", "EXPLAIN = 4.0"))
    assert grading.grade(exercise).status == "done"


def test_a_choice_and_a_number_are_judged():
    q = grading.Question("b", wrong={"a": "why not a"})
    assert q.judge("B") is None and q.judge("(b)") is None and q.judge(None) == "no answer yet"
    assert q.judge("a") == "EXPLAIN = 'a' is not it: why not a" and q.judge("c") == "EXPLAIN = 'c' is not it"
    q = grading.Question(48 / 9, tolerance=0.005, wrong={16: "why not 16"})
    assert q.judge(5.33) is None and q.judge(5.4) == "EXPLAIN = 5.4 is not it"
    assert q.judge(16) == "EXPLAIN = 16 is not it: why not 16" and "a number" in q.judge("five")


def test_hints_come_one_tier_at_a_time_and_are_remembered():
    assert "MINIGRAD_STATE" in os.environ  # this test's own file (the autouse fixture)
    r = run("check", "9", "--hint")
    first = [line for line in r.stdout.splitlines() if "hint " in line and " of 3:" in line]
    assert [line.split(":")[0].strip() for line in first] == ["hint 1 of 3"], r.stdout
    assert "check 9 --hint` again for the next" in r.stdout and "--reset-hints" in r.stdout
    r = run("check", "9", "--hint")
    assert "hint 1 of 3" in r.stdout and "hint 2 of 3" in r.stdout and "hint 3 of 3" not in r.stdout
    r = run("check", "9", "--hint")
    assert "hint 3 of 3" in r.stdout and "that was the last" in r.stdout
    r = run("check", "9", "--hint")  # no fourth tier: the third stays the last
    assert "hint 3 of 3" in r.stdout and "hint 4" not in r.stdout
    other = run("check", "10", "--hint").stdout  # each exercise has its own tier
    assert "hint 1 of 3" in other and "hint 2 of 3" not in other
    r = run("check", "9", "--reset-hints")
    assert r.returncode == 0 and "forgotten" in r.stdout
    r = run("check", "9", "--hint")
    assert "hint 1 of 3" in r.stdout and "hint 2 of 3" not in r.stdout


def test_the_full_trace_comes_on_request_or_on_the_same_failure_twice(course, monkeypatch):
    """Exercise 9's moment-by-moment layout is the answer: not in the message, but with --explain or on the same
    failure twice."""
    exercise = next(e for e in grading.exercises(course) if e.number == 9)
    reference = open(exercise.solution).read()
    wrong = reference.replace("still_kept = {i: b for i, b in kept.items() if i <= lo}", "still_kept = kept")
    assert wrong != reference
    _learner_file(course, 9, wrong)
    monkeypatch.setattr(grading, "COURSE", course)
    from minigrad.__main__ import main
    import contextlib
    import io

    def check(*args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(["check", "9", *args])
        return out.getvalue()
    once = check()
    assert "failing" in once and "moment by moment" not in once and "check 9 --explain" in once, once
    twice = check()
    assert "The full trace (the same failure as last time):" in twice and "moment by moment" in twice, twice
    assert "moment by moment" in check("--explain")


def test_a_traceback_is_the_detail_of_an_error_in_the_learners_code(course):
    path = os.path.join(course, "02_unbroadcast.py")
    text = open(path).read().replace('    raise NotImplementedError("Exercise 2', '    return grad.sum(axis=99)\n    raise Foo("')
    open(path, "w").write(text)
    result = grading.grade(grading.exercises(course)[1])
    assert result.status == "failing" and "AxisError" in result.message
    assert 'File "' in result.detail and "02_unbroadcast.py" in result.detail and "grad.sum(axis=99)" in result.detail


def test_a_gradient_for_pows_exponent_is_explained(course):
    path = os.path.join(course, "01_elementwise_backward.py")
    text = open(os.path.join(course, "solutions", "01_elementwise_backward.py")).read()
    old = "return (g * (p * x ** (p - 1)),)"
    assert old in text
    open(path, "w").write(text.replace(old, "return (g * (p * x ** (p - 1)), None)"))
    result = grading.grade(grading.exercises(course)[0])
    assert result.status == "failing" and "the exponent is a Python number kept on self" in result.message, result


def test_the_questions_that_the_engine_can_measure_have_its_answers():
    """An exercise's "explain" answer is a number in its check (QUESTION); the ones the engine measures are measured
    here, each as its question states it, so that no answer is a number nobody reran."""
    answer = {e.number: e.question.answer for e in EXERCISES}
    x = mg.randn(1000, requires_grad=True)  # 1: y = x.exp(); z = y.log(), float32, 1,000 elements: bytes kept
    with mg.profile() as prof:
        x.exp().log()
    assert prof.peak_bytes("activations") == answer[1]
    a, b = mg.randn(4, 3, requires_grad=True), mg.randn(3, requires_grad=True)  # 2: b.grad[0] of (a + b).sum()
    (a + b).sum().backward()
    assert b.grad.tolist()[0] == answer[2]
    a, b = mg.randn(6, 5, requires_grad=True), mg.randn(5, 7, requires_grad=True)  # 3: backward's products / forward's
    with mg.profile() as prof:
        (a @ b).sum().backward()
    assert prof.flops("backward", "matmul") / prof.flops("forward", "matmul") == answer[3]
    with mg.device("meta"):  # 5: softmax's record on (8, 12, 512, 512) float32 scores, in MiB
        scores = mg.randn(8, 12, 512, 512, requires_grad=True)
        with mg.profile() as prof:
            F.softmax(scores, -1)
    assert prof.peak_bytes("activations") / 2**20 == answer[5]

    def backward_flops(x_needs_grad):  # 6: B = 32, sizes [64, 128, 10]: what x requiring grad adds to backward
        mg.manual_seed(0)
        model = mg.nn.Sequential(mg.nn.Linear(64, 128), mg.nn.Tanh(), mg.nn.Linear(128, 10), mg.nn.Tanh())
        with mg.profile() as prof:
            model(mg.randn(32, 64, requires_grad=x_needs_grad)).sum().backward()
        return prof.flops("backward", "matmul")
    assert backward_flops(True) - backward_flops(False) == answer[6]
    # 9: 10 functions of equal FLOPs cut as sqrt_plan (checkpoint_sequential's 'sqrt') cuts them: forwards recomputed
    bounds = schedules.segment_bounds(10, round(10 ** 0.5))
    assert sum(hi - lo for lo, hi in bounds[:-1]) == answer[9]  # every segment but the last runs again
    # 10: the fewest slots that reverse 16 steps in 15 advances
    assert min(s for s in range(20) if schedules.binomial_steps(16, s) == 15) == answer[10]
    with mg.device("cpu"):  # 14: every parameter read by a product, under float16 autocast: bytes per parameter
        model = mg.nn.Sequential(mg.nn.Linear(16, 32), mg.nn.Tanh(), mg.nn.Linear(32, 4))
        opt = mg.optim.AdamW(model.parameters())
        with mg.profile(model, opt) as prof:
            with mg.autocast("cpu", dtype=mg.float16):
                loss = model(mg.randn(8, 16)).float().sum()
            loss.backward()
            opt.step()
    n = sum(p.numel() for p in model.parameters())
    kept = sum(prof.peak_bytes(c) for c in ("parameters", "gradients", "optimizer")) + prof.cast_weight_bytes()
    assert kept / n == answer[14]
