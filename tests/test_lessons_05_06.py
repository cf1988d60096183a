"""Lessons 5 (the tape) and 6 (broadcasting) run, and the numbers they measure say what the lessons claim."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LESSON_05 = os.path.join(ROOT, "lessons", "05_the_tape.py")
LESSON_06 = os.path.join(ROOT, "lessons", "06_broadcasting.py")


def run(args, cwd=ROOT):
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.run([sys.executable] + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def number(pattern, text):
    m = re.search(pattern, text, re.M)
    assert m, f"the lesson's output has no line matching {pattern!r}:\n{text}"
    return float(m.group(1).replace(",", ""))


def test_lesson_05_prints_the_tape_frees_it_and_walks_deeper_than_recursion(tmp_path):
    r = run([LESSON_05, "--quick"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout

    # the tape as a list: one row per record, numbered in order, the bytes of what each saved
    rows = re.findall(r"^\s+(\d+)\s+(mul|add|tanh|sum)\s.*?\s(\d+)\s+(\d+)$", out, re.M)
    assert [op for _, op, _, _ in rows] == ["mul", "add", "tanh", "mul", "sum"]
    seqs = [int(s) for s, _, _, _ in rows]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    assert [int(b) for _, _, b, _ in rows] == [1024, 0, 1024, 2048, 0]  # 256 float32 per saved array
    total = number(r"saved arrays add up to (\d+) B", out)
    ledger = number(r"the ledger's activations are (\d+) B", out)
    assert total == 4096 and ledger == 3072  # h, kept by two records, is one buffer

    # gradients by hand beside the engine's
    diffs = [float(d) for d in re.findall(r"^dL/d\w\s.*\s([\d.e+-]+)$", out, re.M)]
    assert len(diffs) == 6 and max(diffs) < 1e-5

    # backward frees: the activations drain record by record, to nothing; a second backward is refused
    drain = [int(b) for b in re.findall(r"^\s+after #\d+ \w+\s+backward:\s+(\d+) B", out, re.M)]
    assert len(drain) == 5 and drain[0] == ledger and drain[-1] == 0
    assert all(a >= b for a, b in zip(drain, drain[1:]))
    assert "after backward: 0 of 5 records keep anything" in out
    assert number(r"after backward: .*the ledger's activations: (\d+) B", out) == 0
    assert "a second backward: RuntimeError" in out
    assert number(r"retain_graph=True.*\((\d+) B after it\)", out) == ledger
    assert number(r"it frees them \((\d+) B\)", out) == 0

    # a chain deeper than the recursion limit: recursion fails, the engine's loop does not
    limit = number(r"sys\.getrecursionlimit\(\) = (\d+)", out)
    depth = number(r"Part 3: a chain of ([\d,]+) ops", out)
    assert depth > limit
    assert re.search(r"recursive walk of a 500-op chain: orders 500 records", out)
    assert re.search(r"recursive walk of the [\d,]+-op chain: RecursionError", out)
    engine = number(r"dy/dx: engine ([\d.]+)", out)
    hand = number(r"by hand [\d.]+\^\d+ = ([\d.]+)", out)
    assert abs(engine - hand) < 1e-9 * hand and engine > 1.01
    assert int(number(r"iterative walk: ([\d,]+) records run backward", out)) == depth
    assert number(r"after backward: (\d+) B$", out) == 0

    plot = tmp_path / "out" / "05_tape.png"
    assert plot.exists() and plot.stat().st_size > 20_000
    for n in (1, 4, 5):
        assert f"python -m minigrad check {n}" in out


def test_lesson_06_sums_over_the_copies_and_keeps_shapes(tmp_path):
    r = run([LESSON_06], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout

    err = {name: number(rf"^{re.escape(name)}\s.*\s([\d.e+-]+)$", out)
           for name in ("engine: b.grad", "sum over the copies", "mean over the copies", "copy 0 alone")}
    assert err["engine: b.grad"] < 1e-7 and err["sum over the copies"] < 1e-7  # finite differences agree
    assert err["mean over the copies"] > 1e-2 and err["copy 0 alone"] > 1e-2  # the wrong answers are caught
    assert number(r"shape \(5, 1\), equals .* to ([\d.e+-]+) and", out) < 1e-12
    assert number(r"and the finite differences to ([\d.e+-]+)$", out) < 1e-7

    cases = re.findall(r"^(add|mul)\s+(\(.*?\))\s+(\(.*?\))\s+(\(.*?\))\s+(\(.*?\))\s+(\(.*?\))\s+\(.*?\)\s+([\d.e+-]+)$",
                       out, re.M)
    assert len(cases) == 6
    for op, a, b, _, ga, gb, e in cases:
        assert ga == a and gb == b, f"{op} {a} {b}: gradients of shapes {ga}, {gb}"
        assert float(e) < 1e-7
    assert "every gradient has its tensor's shape: True" in out

    assert number(r"bias\.grad - y\.grad\.sum\(axis=\(0, 1\)\): ([\d.e+-]+);", out) < 1e-12
    assert number(r"bias\.grad - finite differences: ([\d.e+-]+)$", out) < 1e-7
    assert "bias.grad shape (4,), weight.grad shape (4, 6)" in out

    assert re.search(r"forgets to sum: ShapeError: .*shape \(4,\).*\(5, 4\)", out)
    assert "has shape (5, 5) (no error); with keepdims=True: (5, 1)" in out
    assert "after p -= 0.1 * p.grad: (5, 1)" in out

    plot = tmp_path / "out" / "06_broadcasting.png"
    assert plot.exists() and plot.stat().st_size > 20_000
    for n in (2, 3):
        assert f"python -m minigrad check {n}" in out


def test_help_helps():
    for script, quick in ((LESSON_05, True), (LESSON_06, False)):
        r = run([script, "--help"])
        assert r.returncode == 0 and "usage" in r.stdout and "python lessons/" in r.stdout
        if quick:  # the test above runs it with --quick: --help says what that leaves out
            assert re.search(r"^\s+--quick\s+\S", r.stdout, re.M), r.stdout
