"""Lesson 12 (half the bytes) runs, and what it prints holds up: autocast saves fewer bytes, in bfloat16 and
float32, and caches a 2-byte copy of each product's weight; float16 without a scaler has only zero gradients and
with one matches float32; the optimizers keep 8, well under 1 and about 2 bytes per parameter; and part 4 predicts
the write-up's rows when the planner has mixed precision, and says it is not there yet otherwise."""
import dataclasses
import importlib.util
import os
import re
import sys
from dataclasses import dataclass, field

from minigrad import plan

from test_lessons_07_08 import ROOT, assert_ends_with_exercises, assert_plot, nbytes, run

LESSON = os.path.join(ROOT, "lessons", "12_half_the_bytes.py")


def test_lesson_12_runs_and_measures_what_it_says(tmp_path):
    r = run([LESSON, "--quick"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert_plot(tmp_path / "out" / "12_half_the_bytes.png")
    assert_ends_with_exercises(out, [14])
    size = r"([\d.]+ (?:B|KiB|MiB))"
    rows = {m.group(1): [nbytes(g) for g in m.groups()[1:]] for m in re.finditer(
        rf"^(float32|bfloat16 autocast)\s+{size}\s+{size}\s+{size}\s+{size}\s+{size}\s+{size}\s+{size}$", out, re.M)}
    assert set(rows) == {"float32", "bfloat16 autocast"}, out
    fp32, bf16 = rows["float32"], rows["bfloat16 autocast"]
    assert fp32[1] == 0 and bf16[1] > bf16[0] > 0  # no bfloat16 in float32; under autocast most is bfloat16
    assert bf16[4] < 0.7 * fp32[4] and bf16[5] < fp32[5]  # fewer bytes saved, a lower peak of activations
    assert fp32[6] == 0 and bf16[6] > 0  # the cast weights
    share = int(re.search(r"the records save (\d+)% of float32's bytes", out).group(1))
    assert 50 < share < 70
    scaling = re.search(r"^float16, no scaler\s+(\d+)%.*\n^float16, GradScaler\s+(\d+)%\s+([\d.e+-]+)\s+([\d.e+-]+)$",
                        out, re.M)
    assert scaling and scaling.group(1) == "100" and scaling.group(2) == "0", out
    assert float(scaling.group(3)) < 5e-3 and float(scaling.group(4)) < 5e-4
    trail = [int(s) for s in re.search(r"log2 of the scale after each step: ([\d ]+)\.", out).group(1).split()]
    assert trail[0] == 47 and min(trail) < 44 and trail[-1] >= min(trail)  # backed off, then found its level
    per = {m.group(1): float(m.group(2)) for m in re.finditer(
        r"^(AdamW|Adafactor|AdamW8bit)\s+\S+ \w+\s+\S+ \w+\s+([\d.]+)\s+\S+ \w+$", out, re.M)}
    assert per["AdamW"] == 8.0 and per["Adafactor"] < 0.5 and 2.0 < per["AdamW8bit"] < 2.5, per
    if "precision" not in {f.name for f in dataclasses.fields(plan.Setup)}:
        assert "The planner's mixed precision is not there yet" in out
        return
    rows = list(re.finditer(r"^(H\d) .*?\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([+-][\d,]+)$", out, re.M))
    assert {m.group(1) for m in rows} >= {"H1", "H4"}, out  # --quick: the batch-4 rows the planner can run
    for m in rows:  # the issue asks for 5%; the lesson's test holds the predictions to 10% of what was measured
        measured, full = (int(g.replace(",", "")) for g in m.group(2, 4))
        assert abs(measured - full) < 0.1 * measured, m.group(0)


def test_part_4_predicts_the_rows_when_the_planner_has_precision(monkeypatch, capsys):
    """Part 4's other branch, before the planner has it: a Setup with a precision field, and a predict that says
    what it was asked; the lesson prints each row's measured MiB, the prediction and the context."""
    sys.path.insert(0, os.path.join(ROOT, "lessons"))
    try:
        spec = importlib.util.spec_from_file_location("lesson_12", LESSON)
        lesson = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(lesson)
    finally:
        sys.path.pop(0)
    @dataclass(frozen=True)
    class Setup:
        model: str
        batch_size: int = 1
        seq_len: int = 512
        grad_accum: int = 1
        checkpointing: object = "none"
        optimizer: str = "adamw"
        precision: str = "fp32"
        software: object = field(default=None)

    asked = []

    class Prediction:
        def __init__(self, setup):
            asked.append(setup)
            self.bytes = {"total": (10_000 if setup.precision == "fp32" else 9_000) * 2**20}

    monkeypatch.setattr(plan, "Setup", Setup)
    monkeypatch.setattr(plan, "predict", Prediction)
    monkeypatch.setattr(plan, "OPTIMIZERS", {"adamw": None, "adafactor": None})
    found = lesson.part4(quick=False)
    out = capsys.readouterr().out
    assert {s.precision for s in asked} == {"fp32", "fp16-mixed"} and all(s.software == lesson.HF_SOFTWARE
                                                                          for s in asked)
    assert len(found) == 5 and "has no optimizer 'adamw8bit' yet" in out  # H1, H4, H6, H5, H7; not H8, H9
    assert re.search(r"^H4 batch 4, fp16, AdamW\s+13,939\s+9,000\s+10,343\s+\+3,596$", out, re.M), out
    assert re.search(r"^batch 4, fp16, AdamW\s+1,010\s+1,000$", out, re.M), out
