"""Lesson 9 (will it fit?) runs, and what it prints holds up: the three runs of the write-up in the right order,
one layer's activations split op by op adding up, and the predicted savings close to Hugging Face's measured ones.
"""
import os
import re

from test_lessons_07_08 import ROOT, assert_ends_with_exercises, assert_plot, run

LESSON = os.path.join(ROOT, "lessons", "09_will_it_fit.py")


def test_lesson_09_runs_and_agrees_with_the_published_savings(tmp_path):
    r = run([LESSON, "--quick"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert_plot(tmp_path / "out" / "09_will_it_fit.png")
    assert_ends_with_exercises(out, [6, 13])

    totals = {m.group(1).strip(): float(m.group(2)) for m in
              re.finditer(r"^(batch \d|4 micro-batches of 1[ \w+]*?)\s+(?:[\d.]+\s+){5}([\d.]+)\s+[\d.e+]+$", out, re.M)}
    assert totals["batch 1"] < totals["batch 2"] < totals["batch 4"] < totals["batch 8"]
    assert totals["4 micro-batches of 1 + checkpointing"] < totals["4 micro-batches of 1"] < totals["batch 4"]

    layer = int(re.search(r"keeps for backward, batch 4 x 512: (\d+) MiB", out).group(1))
    rows = [float(x) for x in re.findall(r"^  \w+\s+([\d.]+) MiB   \(", out, re.M)]
    assert abs(sum(rows) - layer) <= 1 + 0.05 * len(rows)  # the printed rows (>= 1 MiB each) add up to the layer

    for what in ("accumulation", "checkpointing"):
        measured, predicted = map(lambda s: int(s.replace(",", "")),
                                  re.search(rf"^{what} \(.*?\)\s+([\d,]+)\s+([\d,]+)$", out, re.M).groups())
        assert abs(predicted - measured) < 0.1 * measured, (what, measured, predicted)
    against = list(re.finditer(r"^(?:batch 4|4 micro-batches of 1[ \w+]*?)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([+-][\d,]+)$",
                               out, re.M))
    assert len(against) == 3 and len(totals) == 6
    for m in against:
        measured, full, difference = (int(g.replace(",", "")) for g in m.group(1, 3, 4))
        assert 0 <= measured - full < 0.1 * measured  # the GPU holds a little more than the tensors, never less
        assert difference == full - measured  # 'pred - meas', the sign docs/will_it_fit.md's rows use
