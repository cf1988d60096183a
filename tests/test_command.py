"""The command (minigrad/__main__.py): `tour` goes on past a failed lesson and ends with the plots it made;
`curve` measures what it predicts, and says what is wrong with bad input."""
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

from minigrad import __main__ as command, curve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args, **kw):
    # ROOT first, the caller's path kept (the second pass of `make test` puts the CuPy stand-in on it)
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable] + args, cwd=kw.get("cwd", ROOT), env=env, capture_output=True,
                          text=True, timeout=120)


# --- tour

def fake_lessons(tmp_path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "01_breaks.py").write_text("raise SystemExit('this lesson breaks on purpose')\n")
    (lessons / "02_draws.py").write_text(textwrap.dedent("""\
        import os
        PLOTS = {"02_fake.png": "a fake plot, with the line its lesson gives it"}
        os.makedirs("out", exist_ok=True)
        for name in ("02_fake.png", "02_unnamed.png", "02_page.html"):
            with open(os.path.join("out", name), "wb") as f:
                f.write(b"not really a png")
        """))
    return lessons


def test_tour_reports_a_failed_lesson_goes_on_and_fails_at_the_end(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(command, "LESSONS", str(fake_lessons(tmp_path)))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "00_stale.png").write_bytes(b"from an earlier run")
    os.utime(tmp_path / "out" / "00_stale.png", (time.time() - 3600,) * 2)

    assert command.main(["tour"]) == 1
    out, err = capfd.readouterr()
    assert "(01_breaks.py FAILED; the tour goes on)" in out
    assert "(02_draws.py took" in out                                  # it went on
    assert "1 of 2 lessons failed: 01_breaks.py" in err
    closing = out.split("The plots, in out/:")[1]
    assert re.search(r"02_fake\.png\s+a fake plot, with the line its lesson gives it", closing)
    assert re.search(r"02_unnamed\.png\s+\(its lesson's PLOTS does not name it\)", closing)
    assert re.search(r"02_page\.html\s+\(its lesson's PLOTS does not name it\)", closing)  # a page is listed too
    assert "00_stale.png" not in closing                               # only what this tour wrote


def test_tour_passes_when_every_lesson_does(tmp_path, monkeypatch, capfd):
    lessons = fake_lessons(tmp_path)
    (lessons / "01_breaks.py").unlink()
    monkeypatch.setattr(command, "LESSONS", str(lessons))
    monkeypatch.chdir(tmp_path)
    assert command.main(["tour"]) == 0
    assert "Done: 1 lessons." in capfd.readouterr().out


def test_every_lesson_names_its_plots():
    for path in command.lessons():
        plots = command.lesson_plots(path)
        assert plots and all(name.endswith(command.OUTPUTS) and len(line) > 20 for name, line in plots.items()), path


def test_lesson_plots_reads_no_code(tmp_path):
    lesson = tmp_path / "05_x.py"
    lesson.write_text("PLOTS = dict(a=open('/nonexistent').read())\n")  # not a literal: never evaluated
    assert command.lesson_plots(str(lesson)) == {}


# --- curve

def table(out):
    """[(k, predicted peak, measured peak, predicted recompute, measured recompute, notes)] of curve's table."""
    rows = re.findall(r"^\s+(\d+)\s+\d+\s+([\d.]+ \w+)\s+([\d.]+ \w+)\s+(\S+(?: [kMGT])?)\s+(\S+(?: [kMGT])?)"
                      r"\s+[\d.]+(.*)$", out, re.M)
    return [(int(k), *rest) for k, *rest in rows]


def test_curve_of_an_mlp_measures_what_it_predicts(tmp_path):
    r = run(["-m", "minigrad", "curve", "--depth", "3", "--width", "8", "--batch", "2"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert [k for k, *_ in rows] == [1, 2, 3, 4, 5, 6]                 # n = 2 x depth functions, every k
    assert all(pp == mp and pr == mr for _, pp, mp, pr, mr, _ in rows)
    assert rows[0][3] == "0" and "no checkpointing" in rows[0][5] and "front" in rows[0][5]
    assert sum("front" in notes for *_, notes in rows) >= 2 and sum("sqrt(n)" in notes for *_, notes in rows) == 1
    assert "measured = predicted for all 6 values of k." in r.stdout
    assert (tmp_path / "out" / "curve.png").stat().st_size > 10_000


def test_curve_of_the_gpt_blocks(tmp_path):
    r = run(["-m", "minigrad", "curve", "--gpt", "--depth", "3", "--width", "16", "--heads", "2", "--context", "8",
             "--batch", "2", "--no-plot"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "the GPT's 3 blocks (2 heads, 16 wide), batch 2 x 8 tokens" in r.stdout
    rows = table(r.stdout)
    assert [k for k, *_ in rows] == [1, 2, 3] and all(pp == mp and pr == mr for _, pp, mp, pr, mr, _ in rows)
    assert not (tmp_path / "out").exists()


def test_curve_samples_k_for_a_long_chain():
    assert curve.curve_ks(10) == list(range(1, 11))
    ks = curve.curve_ks(1000)
    assert ks == sorted(set(ks)) and ks[0] == 1 and ks[-1] == 1000 and 32 in ks and len(ks) <= 50


@pytest.mark.parametrize("args, message", [
    (["--depth", "-3"], "argument --depth: must be at least 1, got -3"),
    (["--width", "0"], "argument --width: must be at least 1, got 0"),
    (["--batch", "two"], "argument --batch: must be a whole number, got 'two'"),
    (["--gpt", "--width", "10", "--heads", "4"], "--width 10 must be divisible by --heads 4"),
    (["--depth", "100000", "--width", "4096"], "make --depth, --width or --batch smaller"),
    (["--out", "curve.txt"], "the plot is written as .png, .svg or .pdf"),
])
def test_curve_says_what_is_wrong_with_bad_input(args, message, tmp_path):
    r = run(["-m", "minigrad", "curve", *args], cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_curve_help_helps():
    r = run(["-m", "minigrad", "curve", "--help"])
    assert r.returncode == 0
    for words in ("--depth", "--width", "--batch", "--gpt", "--heads", "--context", "out/curve.png", "examples:"):
        assert words in r.stdout
