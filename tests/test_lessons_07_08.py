"""Lessons 7 (one checkpointed block) and 8 (schedules) run, and the numbers they print make sense.

Each lesson runs in a temporary directory (its plot goes to out/ there); the tests read what it printed.
The lessons assert prediction == measurement themselves; these tests check what they show: the replayed
mask and the other one, BatchNorm's one update and the naive two, the frozen input's gradients, the
nested checkpoint's memory and recompute, the k sweep's minimum at sqrt(n), and the schedules' ranking.
"""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LESSON_07 = os.path.join(ROOT, "lessons", "07_one_checkpointed_block.py")
LESSON_08 = os.path.join(ROOT, "lessons", "08_schedules.py")
UNITS = {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30}


def run(args, cwd=ROOT):
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable] + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def nbytes(text):
    """'64.0 KiB' -> 65536."""
    value, unit = text.split()
    return float(value) * UNITS[unit]


def assert_plot(path):
    assert path.exists(), f"{path} was not written"
    assert path.stat().st_size > 20_000, f"{path} is only {path.stat().st_size} bytes"


def assert_ends_with_exercises(stdout, numbers):
    tail = stdout.strip().splitlines()[-len(numbers) - 1:]
    assert tail[0] == "Now build it:", tail
    for line, n in zip(tail[1:], numbers):
        assert line.strip().startswith(f"python -m minigrad check {n} "), line


@pytest.fixture(scope="module")
def lesson_07(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("lesson07")
    r = run([LESSON_07], cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r.stdout, cwd


@pytest.fixture(scope="module")
def lesson_08(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("lesson08")
    r = run([LESSON_08, "--quick"], cwd=cwd)
    assert r.returncode == 0, r.stderr  # the lesson asserts measured == predicted for every plan it runs
    return r.stdout, cwd


# ----------------------------------------------------------------------------- lesson 7

def test_07_rng_replay_matches_and_no_replay_differs(lesson_07):
    out, _ = lesson_07
    rows = {m.group(1): m for m in re.finditer(
        r"^(True|False)\s+([\d.]+)%\s+(\d+) of (\d+) \(\d+%\)\s+([\d.e+-]+)$", out, re.M)}
    assert set(rows) == {"True", "False"}, out
    replay, fresh = rows["True"], rows["False"]
    assert float(replay.group(2)) == 0 and int(replay.group(3)) == 0 and float(replay.group(5)) == 0
    assert 30 < float(fresh.group(2)) < 70  # two independent p = 0.5 masks disagree on about half their entries
    assert int(fresh.group(3)) > int(fresh.group(4)) // 2 and float(fresh.group(5)) > 0
    assert "the plain run leaves it: True for both" in out
    assert "preserve_rng_state=False, so its recompute" in out  # the engine's warning, caught and shown
    assert re.search(r"determinism_check='values' stops the backward:\n  checkpoint: recomputing 'block' .*different "
                     r"values", out)


def test_07_batchnorm_updates_once_and_the_naive_recompute_twice(lesson_07):
    out, _ = lesson_07
    rows = {m.group(1).strip(): m for m in re.finditer(
        r"^(plain|mg\.checkpoint|naive recompute|naive, momentum [\d.]+)\s+(\d+)\s+([\d.-]+)\s+([\d.e+-]+)\s+"
        r"([\d.e+-]+)\s+(identical|DIFFER)$", out, re.M)}
    assert len(rows) == 4, out
    tracked = {k: int(m.group(2)) for k, m in rows.items()}
    mean_diff = {k: float(m.group(4)) for k, m in rows.items()}
    assert tracked["plain"] == tracked["mg.checkpoint"] == 1 and tracked["naive recompute"] == 2
    assert mean_diff["mg.checkpoint"] == 0 and float(rows["mg.checkpoint"].group(5)) == 0
    assert mean_diff["naive recompute"] > 1e-2  # the batch counted twice moved the statistics further
    momentum_row = next(k for k in rows if k.startswith("naive, momentum"))
    assert tracked[momentum_row] == 2 and mean_diff[momentum_row] < 1e-5  # the workaround: right values, two counts
    assert all(m.group(6) == "identical" for m in rows.values())  # gradients cannot see the difference
    ratio = float(re.search(r"moved the running mean ([\d.]+)x as far", out).group(1))
    assert 1.85 < ratio < 1.95  # (1 - (1 - m)^2) / m = 1.9 for m = 0.1


def test_07_frozen_input_still_gives_the_parameters_gradients(lesson_07):
    out, _ = lesson_07
    assert "x.requires_grad = False; y = mg.checkpoint(block, x): y.requires_grad = True" in out
    m = re.search(r"after backward: (\d+) of (\d+) parameters have a gradient, bit-identical to the plain run's; "
                  r"the embedding's \.grad is None; Linear recomputed (\d+) times", out)
    assert m and m.group(1) == m.group(2) and int(m.group(1)) > 0 and int(m.group(3)) == 2, out


def test_07_nesting_lowers_the_peak_for_more_recompute(lesson_07):
    out, cwd = lesson_07
    rows = {}
    for m in re.finditer(r"^(plain|one checkpoint|two in a row|nested)\s+([\d.]+ \w+)\s+([\d.]+ \w+)\s+\S+(?: \w)?\s+"
                         r"([\d.]+)\s+(\d+)\s+(identical|DIFFER)$", out, re.M):
        rows[m.group(1)] = dict(after=nbytes(m.group(2)), peak=nbytes(m.group(3)), passes=float(m.group(4)),
                                linears=int(m.group(5)), grads=m.group(6))
    assert set(rows) == {"plain", "one checkpoint", "two in a row", "nested"}, out
    plain, one, row, nested = rows["plain"], rows["one checkpoint"], rows["two in a row"], rows["nested"]
    assert all(r["grads"] == "identical" for r in rows.values())
    assert plain["passes"] == 0 and one["passes"] == row["passes"] == 1.0 and nested["passes"] == 1.5
    assert one["after"] < row["after"] < plain["after"] and nested["after"] == one["after"]
    assert one["peak"] == plain["peak"]  # one segment alone: the recompute rebuilds the whole block
    assert nested["peak"] == row["peak"] < plain["peak"]
    assert nested["linears"] == 12 and one["linears"] == 8
    assert_plot(cwd / "out" / "07_checkpointed_block.png")
    assert_ends_with_exercises(out, (7, 8))


# ----------------------------------------------------------------------------- lesson 8

def test_08_k_sweep_is_least_at_sqrt_n_and_matches_the_theory(lesson_08):
    out, cwd = lesson_08
    n = int(re.search(r"a uniform chain of n = (\d+) functions", out).group(1))
    rows = [(int(m.group(1)), nbytes(m.group(2)), nbytes(m.group(3)), float(m.group(4))) for m in re.finditer(
        r"^\s+(\d+)\s+\d+(?: \.\. \d+)?\s+([\d.]+ \w+)\s+([\d.]+ \w+)\s+([\d.]+)$", out, re.M)]
    assert len(rows) >= 3, out
    for k, measured, theory, passes in rows:
        if n % k == 0:
            assert measured == theory, k  # n/k + k layer outputs, exactly, where k divides n
            # the checkpointed segments' forward but each one's last pair (NOTE [recompute what backward reads])
            assert passes == pytest.approx((k - 1) * (n // k - 1) / n, abs=1e-3)
    m = re.search(r"The least peak: k = (\d+) \(sqrt\(n\) = ([\d.]+)\), [\d.]+ \w+ = ([\d.]+) layer outputs", out)
    assert int(m.group(1)) == int(float(m.group(2))) and float(m.group(3)) == 2 * float(m.group(2))
    assert_plot(cwd / "out" / "08_schedules.png")


def test_08_schedules_rank_as_the_lesson_says(lesson_08):
    out, _ = lesson_08
    assert out.count("every one measured = predicted") == 2
    studies = re.split(r"^(?=uniform chain \(|transformer chain \()", out, flags=re.M)
    tables = {}
    for study in studies[1:]:
        name = study.split()[0]
        tables[name] = {m.group(1).strip(): (float(m.group(2)), float(m.group(3))) for m in re.finditer(
            r"^  (\S.*?)\s+\d+\s+[\d.]+ \w+\s+([\d.]+)%\s+([\d.]+)$", study, re.M)}
    assert set(tables) == {"uniform", "transformer"}
    for name, t in tables.items():
        sqrt, best, one_slot = t["sqrt(n) segments"], t["budgeted greedy, least peak"], t["revolve, 1 slot"]
        assert best[0] <= sqrt[0] < 100  # the greedy over every budget does at least as well as sqrt(n)
        assert one_slot[0] < best[0] and one_slot[1] > 2 * sqrt[1]  # revolve: least memory, most recompute
        assert max(sqrt[1], best[1]) < 1  # segments: each function recomputed at most once
    assert tables["transformer"]["budgeted greedy, least peak"][0] < 0.75 * tables["transformer"]["sqrt(n) segments"][0]
    per_block = tables["transformer"]["one segment per block (2 sublayers)"]
    assert per_block[0] < tables["transformer"]["sqrt(n) segments"][0]
    m = re.search(r"a sublayer keeps (\d+)x \(attention\) and (\d+)x \(MLP\)", out)
    assert int(m.group(1)) > int(m.group(2)) > 1  # the non-uniform chain: attention's (T, T) scores weigh more
    assert_ends_with_exercises(out, (9, 10))


# ----------------------------------------------------------------------------- both

@pytest.mark.parametrize("script", [LESSON_07, LESSON_08])
def test_help_helps(script):
    r = run([script, "--help"])
    assert r.returncode == 0 and "usage" in r.stdout and "python lessons/" in r.stdout
    if script == LESSON_08:  # the test above runs it with --quick: --help says what that leaves out
        assert re.search(r"^\s+--quick\s+\S", r.stdout, re.M), r.stdout
