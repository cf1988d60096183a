"""The README's example runs, every lesson runs (short), and the benchmark runs in smoke mode."""
import ast
import json
import os
import platform
import re
import subprocess
import sys

import pytest

import minigrad as mg
from minigrad.__main__ import lesson_plots

from on_device import DEVICE, host_only

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the benchmark runs on the default device: its by-hand column is NumPy's or CuPy's, PyTorch's on the same kind
HAND = "numpy" if DEVICE == "cpu" else "cupy"


def test_readme_example_runs():
    text = open(os.path.join(ROOT, "README.md")).read()
    block = re.search(r"## The API in ten lines\s+```python\n(.*?)```", text, re.S).group(1)
    assert len(block.strip().splitlines()) <= 10
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["model"][0].weight.grad.shape == (16, 4)


QUICK = {"lessons/01_train_a_tiny_gpt.py", "lessons/03_checkpointing.py", "lessons/04_gradient_accumulation.py",
         "bench/bench.py"}  # have --quick
LESSONS = ["lessons/01_train_a_tiny_gpt.py", "lessons/02_where_the_memory_goes.py", "lessons/03_checkpointing.py",
           "lessons/04_gradient_accumulation.py"]


def run(args, **kw):
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.run([sys.executable] + args, cwd=kw.get("cwd", ROOT), env=env, capture_output=True,
                          text=True, timeout=120)


def lesson(name, tmp_path, *args):
    """Run lessons/<name> in tmp_path; check that it succeeded, wrote exactly the plots its PLOTS names (each
    image more than a few KB), and ended by naming its exercises. Returns its stdout."""
    path = os.path.join(ROOT, "lessons", name)
    r = run([path, *args], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    written = {p.name: p.stat().st_size for p in (out.iterdir() if out.exists() else ())}
    assert set(written) == set(lesson_plots(path)), "the lesson's PLOTS must name exactly the plots it writes"
    assert all(size > 10_000 for name, size in written.items() if name.endswith(".png")), written
    ending = r.stdout.rsplit("Now build it:", 1)
    assert len(ending) == 2, "the lesson ends by naming its exercises"
    named = [int(n) for n in re.findall(r"python -m minigrad check (\d+)", ending[1])]
    exercises = ast.literal_eval(re.search(r"^EXERCISES = (\(.*?\))", open(path).read(), re.M).group(1))
    assert named == list(exercises) and named
    return r.stdout


def mib(text):
    """'1.5 MiB' / '384.0 KiB' / '12 B' -> bytes."""
    number, unit = text.split()
    return float(number) * {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30}[unit]


def test_lesson_01_trains_and_reports_measured_numbers(tmp_path):
    out = lesson("01_train_a_tiny_gpt.py", tmp_path, "--quick")
    assert re.search(r"^40 steps in ", out, re.M)
    start = float(re.search(r"loss: ([\d.]+) at the start", out).group(1))
    end = float(re.search(r", ([\d.]+) at the end", out).group(1))
    baseline = float(re.search(r"unigram baseline .*: ([\d.]+) nats/char", out).group(1))
    assert end < start - 0.5 and end < baseline  # 40 steps already bring the loss down, below the baseline
    assert [12] == [int(n) for n in re.findall(r"check (\d+)", out)]  # the one exercise lesson 1 prepares


@host_only("lesson 2 counts the host's page faults between steps, with and without the host pool")
def test_lesson_02_measures_a_steady_step_and_the_late_zero_grad(tmp_path):
    out = lesson("02_where_the_memory_goes.py", tmp_path)
    assert "(equal)" in out and "DIFFERENT" not in out
    assert "activations after backward: 0 B" in out
    opt = re.search(r"measured ([\d.]+ \w+) at the start of the step and ([\d.]+ \w+) after it", out)
    assert opt and opt.group(1) == opt.group(2)  # a steady step makes no optimizer state
    early = re.search(r"zero_grad before the forward: peak ([\d.]+ \w+), during the (\w+)", out)
    late = re.search(r"zero_grad after  the forward: peak ([\d.]+ \w+), during the (\w+)(?:, inside '\w+')? \(at "
                     r"that moment: gradients ([\d.]+ \w+)", out)  # inside an op: its temporaries count too
    assert early.group(2) == "backward" and late.group(2) == "forward"
    grads = mib(re.search(r"gradients after backward: ([\d.]+ \w+)", out).group(1))
    assert mib(late.group(3)) == grads  # at the late peak, all of last step's gradients are alive
    assert mib(late.group(1)) - mib(early.group(1)) > grads / 2
    # the first step, exported: the page and the trace it names, with the counts it prints
    page = re.search(r"^memory timeline: (out/02_memory_timeline\.html) \((\d+) points, the peak of ([\d.]+ \w+) "
                     r"marked; open it in any browser", out, re.M)
    trace = re.search(r"^trace: (out/02_step_trace\.json) \((\d+) spans: (\d+) op runs and AdamW's step; (\d+) "
                      r"memory samples\); open it in Perfetto, https://ui\.perfetto\.dev", out, re.M)
    assert page and trace and page.group(3) == early.group(1)
    events = json.load(open(tmp_path / trace.group(1)))["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == int(trace.group(2)) == int(trace.group(3)) + 1
    assert sum(e["ph"] == "C" for e in events) == int(trace.group(4)) == int(page.group(2))
    assert "<svg" in (tmp_path / page.group(1)).read_text()
    faults = [float(m) for m in re.findall(r"^  (?:no pool, malloc as it comes|minigrad's pool \(the default\)|no pool, "
                                           r"malloc keeps memory)\s+([\d.]+) page faults per step", out, re.M)]
    assert len(faults) == 3  # between steps: no pool, the pool, malloc keeping freed memory
    assert faults[1] < faults[0] / 4  # the pool keeps the ops' arrays (NOTE [host memory pool])
    if platform.libc_ver()[0] == "glibc":
        assert faults[2] < 100


def test_lesson_03_predictions_match_measurements(tmp_path):
    out = lesson("03_checkpointing.py", tmp_path, "--quick")  # it asserts prediction == measurement for every plan
    slope = re.search(r"sqrt\(n\) segments ([\d.]+) \(theory", out)
    assert slope and float(slope.group(1)) < 0.8
    plain = mib(re.search(r"no checkpointing \(s = n, one segment\): ([\d.]+ \w+)", out).group(1))
    every_one = mib(re.search(r"segments of s = 1 function \(k = n segments\): ([\d.]+ \w+)", out).group(1))
    assert every_one > plain
    front = re.findall(r"^  (.+?)\s{2,}([\d.]+ \w+)\s+([\d.]+)$", out.split("the Pareto front")[1], re.M)
    assert len(front) >= 3 and front[0][2] == "0.00"
    memory, recompute = [mib(m) for _, m, _ in front], [float(r) for _, _, r in front]
    assert memory == sorted(memory, reverse=True) and len(set(memory)) == len(memory)  # each step down in memory
    assert recompute == sorted(recompute)                                                # costs more recompute


def test_lesson_04_shows_the_memory_the_normalisation_and_float16(tmp_path):
    out = lesson("04_gradient_accumulation.py", tmp_path, "--quick")
    totals = [float(m) for m in re.findall(r"^(?:batch 8|2 micro-batches of 4|8 micro-batches of 1|8 micro-batches of 1 "
                                            r"\+ checkpointing)\s+([\d.]+) MiB", out, re.M)]
    assert len(totals) == 4 and all(a > b for a, b in zip(totals, totals[1:]))  # less memory at each step
    errors = [float(m) for m in re.findall(r"^(?:batch 8|\d micro-batches of \d.*?)\s+\S+ MiB.*?\s([\d.e+-]+)\s+[\d.]+\s+[\d.]+$",
                                           out, re.M)]
    assert len(errors) == 4 and max(errors) < 1e-5  # every way gives the full batch's gradient (float32 rounding)
    row8 = re.search(r"^\s+8\s+([\d.e+-]+)\s+([\d.e+-]+)$", out.split("Part 2")[1].split("Part 3")[0], re.M)
    assert float(row8.group(1)) < 1e-12 and float(row8.group(2)) > 1e-2  # tokens right, mean of means wrong
    part3 = re.findall(r"^\s+(\d+)\s+([\d.e+-]+)\s+([\d.e+-]+)$", out.split("Part 3")[1], re.M)
    e16, e32 = [float(a) for _, a, _ in part3], [float(b) for _, _, b in part3]
    assert len(part3) == 7 and e16[0] == e32[0]       # one micro-batch: nothing to add up, the same error
    assert e16[-1] > 4 * e32[-1] and max(e32) < 2 * min(e32)  # float16 .grad drifts, mg.accumulate's float32 does not


@pytest.mark.parametrize("script", LESSONS)
def test_lesson_opens_as_a_notebook(script):
    """`# %%` cells at the top level: each cell parses on its own, so jupytext / VS Code can run them in turn."""
    source = open(os.path.join(ROOT, script), encoding="utf-8").read()
    cells = re.split(r"^# %%.*$", source, flags=re.M)
    assert len(cells) >= 4, "a docstring-and-settings cell, one or more cells of work, and a last cell that runs main"
    for cell in cells:
        ast.parse(cell)
    assert "main([] if \"ipykernel\" in sys.modules else None)" in cells[-1]


def test_tour_lists_lessons():
    r = run([os.path.join("lessons", "tour.py"), "--list"])
    assert r.returncode == 0 and "01_train_a_tiny_gpt.py" in r.stdout


@pytest.mark.parametrize("script", LESSONS + ["lessons/10_data_parallel.py", "lessons/tour.py", "bench/bench.py"])
def test_help_helps(script):
    r = run([script, "--help"])
    assert r.returncode == 0 and "usage" in r.stdout and "python" in r.stdout
    assert r.stdout.count("usage:") <= 1 and "mpirun" not in r.stdout.split("usage:")[0], \
        "--help prints once, without starting processes (lesson 10 once ran mpirun to print it twice)"
    if script in QUICK:  # the tests above run these with --quick: a reader of --help learns what it leaves out
        assert re.search(r"^\s+--quick\s+\S", r.stdout, re.M), r.stdout


def test_bench_smoke(tmp_path):
    out = tmp_path / "bench.json"
    r = run(["bench/bench.py", "--quick", "--json", str(out), "--plot", str(tmp_path / "bench.png")])
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    assert [name[:3] for name in report] == ["(a)", "(b)", "(c)", "(f)"]
    a = report[next(iter(report))]
    assert {"minigrad", HAND, "profiled", "sqrt-ckpt", "sqrt-dots", "sqrt-core", "sqrt-all"} <= set(a)
    assert a["sqrt-dots"]["policy"] == "dots_saveable"  # each policy's time, and which policy it is
    for name, rows in report.items():
        if name.startswith("(f)"):
            continue
        assert rows["minigrad"]["it_over_minigrad"] == 1.0 and all(v["median_s"] > 0 for v in rows.values())
        assert all(v["faults_per_step"] >= 0 for v in rows.values())  # page faults per step beside each time
        for k, v in rows.items():  # each engine alone in its own process; minigrad's variants in minigrad's
            assert v["process"] == ("its own" if k in (HAND, "torch", "jax", "kept-mem", "no-pool") else "minigrad's"), (k, v)
    if platform.libc_ver()[0] == "glibc":  # minigrad in a process whose malloc keeps freed memory
        assert all("kept-mem" in rows and "no-pool" in rows for name, rows in report.items() if not name.startswith("(f)"))
    scaling = report["(f) scaling"]
    plain = {r["depth"]: r["peak_activation_bytes"] for r in scaling if r["vary"] == "depth" and r["mode"] == "plain"}
    assert plain[4] > plain[2] > 0  # deeper keeps more
    assert (tmp_path / "bench.png").exists() and (tmp_path / "bench_scaling.png").exists()


def test_bench_runs_only_the_parts_asked_for(tmp_path):
    out = tmp_path / "bench.json"
    r = run(["bench/bench.py", "--quick", "--only", "c", "--json", str(out), "--breakdown", "--gelu", "tanh"])
    assert r.returncode == 0, r.stderr
    assert [name[:3] for name in json.loads(out.read_text())] == ["(c)"]
    assert "GELU tanh (GPT-2's)" in r.stdout  # --gelu: every engine's GPT with that GELU (their losses agree)
    times = r.stdout[r.stdout.index("self time"):].splitlines()  # --breakdown: the profile's time table
    assert any(line.startswith("linear ") for line in times) and any(line.startswith("AdamW ") for line in times)
    if torch_here():  # and PyTorch's own profile of its step, from a process of its own
        theirs = r.stdout[r.stdout.index("PyTorch's own breakdown"):].splitlines()
        assert any(line.startswith("aten::mm ") or line.startswith("aten::addmm ") for line in theirs), theirs
    r = run(["bench/bench.py", "--quick", "--only", "z"])
    assert r.returncode != 0 and "--only takes letters from 'abcf'" in r.stderr


def importable(name):
    """Can this Python import the module (not only find it: a stub that refuses to load counts as missing)?"""
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def torch_here():
    """Does the benchmark have PyTorch columns: PyTorch importable, with CUDA where minigrad runs on 'cuda'?"""
    if not importable("torch"):
        return False
    import torch
    return DEVICE == "cpu" or torch.cuda.is_available()


def test_bench_threads_reach_every_engine():
    """--threads N: each engine's process starts with its thread pools set to N (the workers say what they run on)."""
    r = run(["bench/bench.py", "--quick", "--only", "b", "--threads", "1"])
    assert r.returncode == 0, r.stderr
    assert "1 thread(s) per engine" in r.stdout
    if torch_here():
        assert re.search(rf"PyTorch \S+ on {DEVICE}, 1 threads", r.stdout)
    r = run(["bench/bench.py", "--quick", "--only", "b", "--threads", "0"])
    assert r.returncode == 2 and "--threads takes a number of threads >= 1" in r.stderr


@pytest.mark.skipif(mg.cuda_is_available(), reason="this machine has a GPU")
def test_bench_on_a_missing_gpu_says_why():
    r = run(["bench/bench.py", "--quick", "--device", "cuda"])
    assert r.returncode == 2 and "device 'cuda'" in r.stderr and "Traceback" not in r.stderr
