"""Exercises 7 (checkpoint one segment) and 8 (replay the generator): plausible wrong answers fail,
each with the message that explains it (the reference passing and the stubs failing are proved by
test_exercises.py)."""
import os
import re
import shutil

import pytest

from minigrad import grading


def grade_edited(tmp_path, number, old, new, done=None):
    """Grade the reference of exercise `number` with `old` replaced by `new`, as a learner's file; the exercises it
    builds on (`done`: 7 for 8) are the references, as a learner who did them."""
    course = str(tmp_path / "exercises")
    shutil.copytree(grading.COURSE, course)
    for e in grading.exercises(course):
        if e.number in (done if done is not None else {8: (7,)}.get(number, ())):
            shutil.copy(e.solution, e.path)
    exercise = next(e for e in grading.exercises(course) if e.number == number)
    text = open(exercise.solution).read()
    assert old in text, old
    with open(exercise.path, "w") as f:
        f.write(text.replace(old, new))
    return grading.grade(exercise)


WRONG_7 = {
    "keeps everything": (
        "    with keep_saved(False):  # the segment's records are made, but keep nothing\n        y = module(x)",
        "    y = module(x)",
        r"kept 5120 bytes of activations after the forward; the input x alone is 1024 bytes\. That is what a plain "
        r"run of the block keeps \(5120 bytes\).*keep_saved\(False\)"),
    "saves the output too": (
        "self.save_for_backward(x)  #", "self.save_for_backward(x, out)  #",
        r"kept 2048 bytes.*x alone is 1024 bytes\. That is 1024 bytes more than x.*shapes \[\(8, 16\), \(8, 16\)\]"),
    "saves the parameters too": (
        "self.save_for_backward(x)  #", "self.save_for_backward(x, *params)  #",
        r"saved 6 arrays besides x .*the record saves x alone"),
    "records only under the caller's grad mode": (
        "with enable_grad(), recomputing():", "with recomputing():",
        r"inside `with mg.no_grad\(\):` failed in your recompute.*whatever grad mode its caller is in"),
    "saves nothing": (
        "self.save_for_backward(x)  #", "self.x = x  #",
        r"kept 0 bytes.*must call self\.save_for_backward\(x\)"),
    "forgets recomputing()": (
        "with enable_grad(), recomputing():", "with enable_grad():",
        r"backward recomputed 0 FLOPs; one forward of the segment is 33920 FLOPs.*recomputing\(\)"),
    "recomputes twice": (
        "            y = self.module(x_again)\n",
        "            self.module(x_again)\n            y = self.module(x_again)\n",
        r"backward recomputed 67840 FLOPs.*2\.00 forwards of the segment"),
    "returns the parameters' gradients too": (
        "return (x_again.grad.data,) + (None,) * self.n_params",
        "return (x_again.grad.data,) + tuple(p.grad.data for p in self.module.parameters())",
        r"0\.weight's gradient differs .* in 512 of 512 entries.*exactly twice.*return None for them"),
    "ignores g": (
        "y.backward(g)  #", "y.sum().backward()  #",
        r"x's gradient differs from the plain run's in 128 of 128 entries.*y\.backward\(g\)"),
    "makes no record": (
        "    return apply(MyCheckpoint, x, *module.parameters(), out=y.data, module=module)",
        "    return y",
        r"made by 'linear', not by MyCheckpoint"),
}


@pytest.mark.parametrize("case", WRONG_7)
def test_a_wrong_checkpoint_is_explained(tmp_path, case):
    old, new, message = WRONG_7[case]
    result = grade_edited(tmp_path, 7, old, new)
    assert result.status == "failing" and re.search(message, result.message, re.S), result.message


REPLAY = "        self.outer = mg.get_rng_state()\n        mg.set_rng_state(self.state)"
RESTORE = "    def __exit__(self, *exc):\n        mg.set_rng_state(self.outer)"
NOT_REPLAYED = (r"x's gradient differs from the plain run's in 128 of 128 entries.*another mask when backward "
                r"recomputed it: \d+ of 256 entries differ")
WRONG_8 = {
    "does not replay": (REPLAY, "        self.outer = mg.get_rng_state()", NOT_REPLAYED),
    "snapshots in __enter__": (REPLAY, "        self.outer = self.state = mg.get_rng_state()", NOT_REPLAYED),
    "leaves the generator where the recompute ended": (
        RESTORE, "    def __exit__(self, *exc):\n        pass",
        r"not where the plain run leaves it.*left where the recompute ended"),
    "restores the snapshot": (
        RESTORE, "    def __exit__(self, *exc):\n        mg.set_rng_state(self.state)",
        r"not where the plain run leaves it.*left at the snapshot"),
    "moves the generator in the forward": (
        "        self.state = mg.get_rng_state()", "        self.state = mg.get_rng_state()\n        mg.rand(1)",
        r"forward drew another dropout mask than the plain run"),
}


@pytest.mark.parametrize("case", WRONG_8)
def test_a_wrong_replay_is_explained(tmp_path, case):
    old, new, message = WRONG_8[case]
    result = grade_edited(tmp_path, 8, old, new)
    assert result.status == "failing" and re.search(message, result.message, re.S), result.message


def test_exercise_8_builds_on_the_learners_exercise_7(tmp_path):
    """8 extends the learner's own 7: with 7 a stub, 8 says to finish 7 first; with 7 done, 8's stub fails for its own
    reason; with 7 wrong, 8 says so; and a checkpoint that is not 7's (the engine's) is refused."""
    course = str(tmp_path / "exercises")
    shutil.copytree(grading.COURSE, course)
    by_number = {e.number: e for e in grading.exercises(course)}
    result = grading.grade(by_number[8])
    assert result.status == "not started" and re.match(
        r"Exercise 8 \(my_checkpoint\): it builds on your exercise 7, which is not written yet: finish it first "
        r"\(python -m minigrad check 7\)", result.message), result.message
    shutil.copy(by_number[7].solution, by_number[7].path)
    result = grading.grade(by_number[8])
    assert result.status == "not started" and result.message.startswith(
        "Exercise 8 (my_checkpoint): exercise 7's checkpoint, replayed, is not written yet"), result
    seven = open(by_number[7].solution).read()
    with open(by_number[7].path, "w") as f:
        f.write(seven.replace("y.backward(g)  #", "y.sum().backward()  #"))
    result = grading.grade(by_number[8])
    assert result.status == "failing" and result.message.startswith(
        "exercise 8 builds on your exercise 7, which does not pass its check yet: x's gradient differs"), result
    shutil.copy(by_number[7].solution, by_number[7].path)
    reference = open(by_number[8].solution).read()
    engine = reference + "\n\ndef my_checkpoint(module, x):\n    return mg.checkpoint(module, x)\n"
    with open(by_number[8].path, "w") as f:
        f.write(engine)
    result = grading.grade(by_number[8])
    assert result.status == "failing" and "not by your exercise 7's MyCheckpoint" in result.message, result.message
    with open(by_number[8].path, "w") as f:
        f.write(reference)
    assert grading.grade(by_number[8]).status == "done"


def test_exercise_8s_stub_no_longer_holds_exercise_7s_answer():
    stub = open(next(e for e in grading.exercises() if e.number == 8).path).read()
    assert "keep_saved(False):\n" not in stub and "save_for_backward" not in stub and "x_again" not in stub
    assert "seven = earlier(__file__, 7)" in stub


def test_the_checks_leave_the_generator_as_they_found_it():
    import minigrad as mg
    mg.manual_seed(123)
    want = mg.rand(3).numpy()
    mg.manual_seed(123)
    for exercise in grading.exercises():  # the checks seed it; the grader puts the caller's stream back
        assert grading.grade(exercise, solutions=True).status == "done"
    assert (mg.rand(3).numpy() == want).all()


def test_the_stubs_name_every_piece():
    for number, pieces in ((7, ("my_checkpoint", "MyCheckpoint.forward", "MyCheckpoint.backward")),
                           (8, ("RngReplay.__init__", "RngReplay.__enter__", "RngReplay.__exit__"))):
        exercise = next(e for e in grading.exercises() if e.number == number)
        text = open(exercise.path).read()
        for piece in pieces:
            assert f'NotImplementedError("Exercise {number} ({piece}):' in text, piece
        assert f"python -m minigrad check {number}" in text
        assert os.path.exists(exercise.solution)


def test_no_grad_for_keep_saved_is_caught_and_explained(tmp_path):
    """no_grad() gives the right numbers here (the parameters are handed over), but it makes no record at all:
    the check refuses it and says what it breaks."""
    result = grade_edited(tmp_path, 7, "    with keep_saved(False):  #", "    with mg.no_grad():  #")
    assert result.status == "failing", result
    for said in ("without making a single record", "nothing of the segment is on the tape to backward through",
                 "None of the inputs have requires_grad=True", "BatchNorm's running statistics",
                 "keep_saved(False)"):
        assert said in result.message, (said, result.message)


def test_the_explain_answers_of_7_and_8_are_judged(tmp_path):
    result = grade_edited(tmp_path, 7, 'EXPLAIN = "b"', 'EXPLAIN = "a"')
    assert result.status == "to explain" and "holds all of it while its backward runs" in result.message
    result = grade_edited(tmp_path / "8", 8, 'EXPLAIN = "c"', 'EXPLAIN = "a"')
    assert result.status == "to explain" and "only __exit__ can put it back" in result.message
