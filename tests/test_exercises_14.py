"""Exercise 14 (a loss scaler's update rule, a mixed-precision step's bytes): plausible wrong answers fail, each with
the message that names its mistake; answers that are right another way pass.

Each case edits the reference solution (replacements that must apply) in a copy of the course.
"""
import os
import re
import shutil

import pytest

from minigrad import grading

REF = "exercises/solutions/14_loss_scale_and_step_bytes.py"
BACKOFF = "return np.float32(float(scale) * backoff_factor), 0"
GROWN = "        if np.isfinite(grown):\n            scale = grown\n"
CAST = "math.prod(shape) * low for shape, uses in params if PRODUCTS & set(uses))"

WRONG = {
    "tracker kept on an inf": ([(BACKOFF, "return np.float32(float(scale) * backoff_factor), growth_tracker")],
                               r"found_inf=True.*expected \(32768, 0\), got \(32768, 2\).*count starts again from 0"),
    "no reset after growing": ([("        growth_tracker = 0\n    return", "    return")],
                               r"got \(32768, 3\).*tracker was not reset"),
    "grows one step late": ([("if growth_tracker == growth_interval", "if growth_tracker > growth_interval")],
                            r"grew one clean step late"),
    "grown to inf": ([(GROWN, "        scale = grown\n")], r"scale=1\.70141e\+38.*got \(inf, 0\).*beyond float32's"),
    "finite as a Python float": ([(GROWN, "        if np.isfinite(float(scale) * growth_factor):\n"
                                          "            scale = grown\n")], r"got \(inf, 0\).*float64"),
    "a Python float": ([("return np.float32(scale), growth_tracker", "return float(scale), growth_tracker")],
                       r"the scale came back as float .*np\.float32"),
    "2-byte weights": ([('"parameters": 4 * elements', '"parameters": 2 * elements')],
                       r"\['parameters'\] = 998 bytes; mg\.profile measured 1,996: the weights stay float32"),
    "2-byte gradients": ([('"gradients": 4 * elements', '"gradients": 2 * elements')],
                         r"\['gradients'\].*through the cast records.*float32"),
    "one moment": ([("2 * 4 * elements", "4 * elements")], r"\['optimizer'\].*TWO float32 moments"),
    "everything cast": ([(CAST, "math.prod(shape) * low for shape, uses in params)")],
                        r"'bfloat16'\)\['cast_weights'\] = 998 bytes; mg\.profile measured 790: not every parameter"),
    "the layer norm cast": ([(CAST, "math.prod(shape) * low for shape, uses in params if 'embedding' not in uses)")],
                            r"layer_norm runs in its input's dtype"),
    "the shared weight cast twice": ([(CAST, "math.prod(shape) * low * uses.count('linear') for shape, uses in "
                                             "params)")], r"cast ONCE per region"),
    "4-byte copies": ([('low = np.dtype(low_dtype).itemsize if low_dtype != "bfloat16" else 2', "low = 4")],
                      r"2 bytes per element, not 4"),
    "copies without autocast": ([("    if low_dtype is not None:", "    if True:\n        low_dtype = low_dtype or "
                                                                   "'float16'")],
                                r"None\)\['cast_weights'\] = 790, measured 0: without autocast nothing is cast"),
}
RIGHT = {
    "the scale multiplied in float32": [(BACKOFF, "return scale * np.float32(backoff_factor), 0"),
                                        ("grown = np.float32(float(scale) * growth_factor)",
                                         "grown = scale * np.float32(growth_factor)")],
    "the copies counted from a set of products": [(CAST, "math.prod(shape) * 2 for shape, uses in params if "
                                                         "any(u in ('linear', 'matmul') for u in uses))")],
}


def _grade(tmp_path, edits):
    course = str(tmp_path / "exercises")
    shutil.copytree(grading.COURSE, course)
    exercise = next(e for e in grading.exercises(course) if e.number == 14)
    text = open(os.path.join(os.path.dirname(grading.COURSE), REF)).read()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    open(exercise.path, "w").write(text)
    return grading.grade(exercise)


@pytest.mark.parametrize("case", WRONG, ids=list(WRONG))
def test_a_wrong_answer_is_explained(tmp_path, case, monkeypatch):
    monkeypatch.setenv("MINIGRAD_STATE", str(tmp_path / "state.json"))
    edits, message = WRONG[case]
    result = _grade(tmp_path, edits)
    assert result.status == "failing", (result.status, result.message)
    assert re.search(message, result.message, re.S), result.message


@pytest.mark.parametrize("case", RIGHT, ids=list(RIGHT))
def test_a_right_answer_written_another_way_passes(tmp_path, case, monkeypatch):
    monkeypatch.setenv("MINIGRAD_STATE", str(tmp_path / "state.json"))
    result = _grade(tmp_path, RIGHT[case])
    assert result.status == "done", result.message


def test_the_explain_question_names_zeros_count():
    exercise = next(e for e in grading.exercises() if e.number == 14)
    assert exercise.question.judge(18) is None
    assert "ZeRO" in exercise.question.judge(16) and "2 bytes each" in exercise.question.judge(20)
