"""Lesson 12 (half the bytes) runs, and what it prints holds up: autocast saves fewer bytes, in bfloat16 and
float32, and caches a 2-byte copy of each product's weight; float16 without a scaler has only zero gradients and
with one matches float32; the optimizers keep 8, well under 1 and about 2 bytes per parameter; and part 4 predicts
the write-up's rows, each within 5% once the caching allocator's reserve and the CUDA context are added."""
import importlib.util
import os
import re
import sys

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
    rows = list(re.finditer(r"^(H\d) .*?\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([+-][\d,]+)$", out, re.M))
    assert {m.group(1) for m in rows} == {"H1", "H4", "H6", "H8"}, out  # --quick: the batch-4 rows
    for m in rows:  # the bound: each row within 5% of what was measured
        measured, peak, reserved, full, difference = (int(g.replace(",", "")) for g in m.group(2, 3, 4, 5, 6))
        assert peak <= reserved and abs(measured - full) < 0.05 * measured, m.group(0)
        assert abs(difference - (full - measured)) <= 1, m.group(0)  # 'pred - meas', as docs/will_it_fit.md's rows


def test_part_4_prints_each_rows_reserve_and_what_each_saves(monkeypatch, capsys):
    """Part 4's table from a planner that says what it was asked: the measured MiB, the peak, the reserve, the
    reserve plus the context and the difference, per row; and what fp16 and each optimizer save at batch 4."""
    sys.path.insert(0, os.path.join(ROOT, "lessons"))
    try:
        spec = importlib.util.spec_from_file_location("lesson_12", LESSON)
        lesson = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(lesson)
    finally:
        sys.path.pop(0)
    asked = []

    class Allocator:
        def __init__(self, setup):
            asked.append(setup)
            self.mib = 10_000 if setup.precision == "fp32" else 9_000

        def max_memory_allocated(self):
            return (self.mib - 100) * 2**20

        def max_memory_reserved(self):
            return self.mib * 2**20

    monkeypatch.setattr(plan, "reserved", lambda setup: (Allocator(setup), []))
    found = lesson.part4(quick=False)
    out = capsys.readouterr().out
    assert len(found) == 7 and {s.precision for s in asked} == {"fp32", "fp16-mixed"}
    assert all(s.software == (lesson.HF_SOFTWARE_FP16 if s.precision == "fp16-mixed" else lesson.HF_SOFTWARE)
               for s in asked)
    assert re.search(r"^H4 batch 4, fp16, AdamW\s+13,939\s+8,900\s+9,000\s+10,343\s+-3,596$", out, re.M), out
    assert re.search(r"^batch 4, fp16, AdamW\s+1,010\s+1,000$", out, re.M), out