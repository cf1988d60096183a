"""The README's example runs, every lesson runs (short), and the benchmark runs in smoke mode."""
import json
import os
import re
import subprocess
import sys

import pytest

import minigrad as mg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_readme_example_runs():
    text = open(os.path.join(ROOT, "README.md")).read()
    block = re.search(r"## The API in ten lines\s+```python\n(.*?)```", text, re.S).group(1)
    assert len(block.strip().splitlines()) <= 10
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["model"][0].weight.grad.shape == (16, 4)


QUICK = {"lessons/03_checkpointing.py", "lessons/04_gradient_accumulation.py", "bench/bench.py"}  # have --quick


def run(args, **kw):
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.run([sys.executable] + args, cwd=kw.get("cwd", ROOT), env=env, capture_output=True,
                          text=True, timeout=120)


def test_lesson_01_trains_and_reports_measured_numbers(tmp_path):
    r = run([os.path.join(ROOT, "lessons", "01_train_a_tiny_gpt.py"), "--steps", "40"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    start = float(re.search(r"loss: ([\d.]+) at the start", r.stdout).group(1))
    end = float(re.search(r", ([\d.]+) at the end", r.stdout).group(1))
    assert end < start - 0.5  # 40 steps already bring the loss down
    assert (tmp_path / "out" / "01_loss.png").exists()


def test_lesson_02_measures_what_the_hand_derivation_predicts(tmp_path):
    r = run([os.path.join(ROOT, "lessons", "02_where_the_memory_goes.py")], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "(equal)" in r.stdout and "DIFFERENT" not in r.stdout
    assert "activations after backward: 0 B" in r.stdout
    assert (tmp_path / "out" / "02_memory_timeline.png").exists()


def test_lesson_03_predictions_match_measurements(tmp_path):
    r = run([os.path.join(ROOT, "lessons", "03_checkpointing.py"), "--quick"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # the lesson asserts prediction == measurement for every plan it runs
    slope = re.search(r"sqrt\(n\) segments ([\d.]+) \(theory", r.stdout)
    assert slope and float(slope.group(1)) < 0.8
    assert (tmp_path / "out" / "03_checkpointing.png").exists()


def test_lesson_04_shows_the_memory_and_the_normalisation(tmp_path):
    r = run([os.path.join(ROOT, "lessons", "04_gradient_accumulation.py"), "--quick"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    totals = [float(m) for m in re.findall(r"^(?:batch 8|2 x 4 accumulated|8 x 1 accumulated|8 x 1 \+ checkpointing)"
                                            r"\s+([\d.]+) MiB", r.stdout, re.M)]
    assert len(totals) == 4 and all(a > b for a, b in zip(totals, totals[1:]))  # less memory at each step
    errors = [float(m) for m in re.findall(r"^(?:batch 8|\d x \d.*?)\s+\S+ MiB.*\s([\d.e+-]+)$", r.stdout, re.M)]
    assert len(errors) == 4 and max(errors) < 1e-5  # every way gives the full batch's gradient (float32 rounding)
    row8 = re.search(r"^\s+8\s+([\d.e+-]+)\s+([\d.e+-]+)$", r.stdout.split("Part 2")[1], re.M)
    assert float(row8.group(1)) < 1e-12 and float(row8.group(2)) > 1e-2  # tokens right, mean of means wrong
    assert (tmp_path / "out" / "04_accumulation.png").exists()


def test_tour_lists_lessons():
    r = run([os.path.join("lessons", "tour.py"), "--list"])
    assert r.returncode == 0 and "01_train_a_tiny_gpt.py" in r.stdout


@pytest.mark.parametrize("script", ["lessons/01_train_a_tiny_gpt.py", "lessons/02_where_the_memory_goes.py",
                                    "lessons/03_checkpointing.py", "lessons/04_gradient_accumulation.py",
                                    "lessons/tour.py", "bench/bench.py"])
def test_help_helps(script):
    r = run([script, "--help"])
    assert r.returncode == 0 and "usage" in r.stdout and "python" in r.stdout
    if script in QUICK:  # the tests above run these with --quick: a reader of --help learns what it leaves out
        assert re.search(r"^\s+--quick\s+\S", r.stdout, re.M), r.stdout


def test_bench_smoke(tmp_path):
    out = tmp_path / "bench.json"
    r = run(["bench/bench.py", "--quick", "--json", str(out), "--plot", str(tmp_path / "bench.png")])
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    assert [name[:3] for name in report] == ["(a)", "(b)", "(c)", "(f)"]
    assert {"minigrad", "numpy", "profiled", "sqrt-ckpt"} <= set(report[next(iter(report))])
    for name, rows in report.items():
        if name.startswith("(f)"):
            continue
        assert rows["minigrad"]["it_over_minigrad"] == 1.0 and all(v["median_s"] > 0 for v in rows.values())
    scaling = report["(f) scaling"]
    plain = {r["depth"]: r["peak_activation_bytes"] for r in scaling if r["vary"] == "depth" and r["mode"] == "plain"}
    assert plain[4] > plain[2] > 0  # deeper keeps more
    assert (tmp_path / "bench.png").exists() and (tmp_path / "bench_scaling.png").exists()


def test_bench_runs_only_the_parts_asked_for(tmp_path):
    out = tmp_path / "bench.json"
    r = run(["bench/bench.py", "--quick", "--only", "c", "--json", str(out)])
    assert r.returncode == 0, r.stderr
    assert [name[:3] for name in json.loads(out.read_text())] == ["(c)"]
    r = run(["bench/bench.py", "--quick", "--only", "z"])
    assert r.returncode != 0 and "--only takes letters from 'abcf'" in r.stderr


@pytest.mark.skipif(mg.cuda_is_available(), reason="this machine has a GPU")
def test_bench_on_a_missing_gpu_says_why():
    r = run(["bench/bench.py", "--quick", "--device", "cuda"])
    assert r.returncode == 2 and "device 'cuda'" in r.stderr and "Traceback" not in r.stderr
