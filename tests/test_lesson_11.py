"""Lesson 11 (selective recomputation) runs; gradients are asserted bit-identical inside it; what it prints holds."""
import os
import re

from test_lessons_07_08 import ROOT, assert_ends_with_exercises, assert_plot, run

LESSON = os.path.join(ROOT, "lessons", "11_selective_recomputation.py")


def test_lesson_11_runs_and_each_policy_trades_as_it_says(tmp_path):
    r = run([LESSON, "--quick"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert_plot(tmp_path / "out" / "11_selective_recomputation.png")
    assert_ends_with_exercises(out, [7])
    rows = {m.group(1): (float(m.group(2)), float(m.group(3))) for m in re.finditer(
        r"^(\w[\w ]+?)\s+([\d.]+) MiB\s+\d+%\s+[\d.]+ MFLOP\s+([\d.]+)%$", out, re.M)}
    assert len(rows) == 5, rows
    assert rows["everything_saveable"][1] == 0.0
    assert rows["nothing_saveable"][0] == min(m for m, _ in rows.values())
    # nothing_saveable runs all but each block's MLP projection, dropout and residual add: under 100%
    assert 0 < rows["dots_saveable"][1] < rows["save_anything_except_core_attention"][1] < \
        rows["nothing_saveable"][1] < 100
    sweep = [tuple(map(float, m)) for m in re.findall(r"^\s+\d+\s+[\d.]+\s+(\d+)% mem\s+([\d.]+)% re\s+(\d+)% mem\s+"
                                                      r"([\d.]+)% re$", out, re.M)]
    assert len(sweep) == 4
    core_memory = [s[2] for s in sweep]
    assert core_memory == sorted(core_memory, reverse=True)  # the split saves more as T grows
    full = {m.group(1): (float(m.group(2)), float(m.group(4))) for m in re.finditer(
        r"^(no checkpointing|every block, \w+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%$", out, re.M)}
    assert len(full) == 5, full
    split, whole = full["every block, save_anything_except_core_attention"], full["every block, nothing_saveable"]
    assert whole[0] < split[0] < full["no checkpointing"][0] and split[1] < whole[1] / 5
