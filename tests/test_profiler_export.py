"""mg.profile's exports (profiler/export.py): a profile opened in the tools people already use.

  trace     prof.export_chrome_trace loads back with json, and every event keeps Chrome's Trace Event Format: the
            keys its ph needs, ts >= 0, dur >= 0; the spans of a track nest or follow one another; the counters are
            numbers, they are prof.timeline()'s bytes, and their largest sum is prof.peak_bytes(); the spans by phase
            are prof.calls() and the optimizer's steps; a collective is a span on a track of its own (on 2 MPI ranks)
  page      prof.export_memory_timeline: no network (no src, link or url()), the ledger's events in its data, in the
            categories' colours; a peak between two events is one point more in both exports, never in timeline()
  browser   headless Chromium (Debian's `chromium`; skipped where there is none): the page's script ran with no error
            and no console message, drew one area per category in its colour, and shows an event's op on hover; a
            broken script is caught (the check can fail)
  command   python -m minigrad memory ... --html PATH writes the page of a step on 'meta'
"""
import collections
import itertools
import json
import os
import re
import shutil
import subprocess

import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.__main__ import main
from minigrad.profiler import CATEGORIES, CATEGORY_COLORS, PHASES, TIMED_PHASES
from minigrad.profiler.export import COMMUNICATION, TAB10

from mpi_harness import run_ranks

EPS = 1e-6  # microseconds: a span's end is ts + dur, summed in floating point
NEEDS = {"X": {"name", "cat", "ph", "ts", "dur", "pid", "tid"}, "C": {"name", "ph", "ts", "pid", "args"},
         "M": {"name", "ph", "pid", "tid", "args"}, "i": {"name", "ph", "ts", "pid", "tid", "s"}}


def mlp(sizes):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.Tanh()]
    return nn.Sequential(*layers)


def checkpointed_step():
    """A steady-state AdamW step of an MLP whose middle two layers are checkpointed: all four phases run."""
    mg.manual_seed(0)
    first, middle, last = mlp([8, 32]), mlp([32, 32, 32]), nn.Linear(32, 4)
    model = nn.Sequential(first, middle, last)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    x = mg.randn(6, 8)
    run = lambda: last(mg.checkpoint(middle, first(x))).sum()  # noqa: E731
    run().backward()
    opt.step()
    with mg.profile(model, opt) as prof:
        opt.zero_grad()
        run().backward()
        opt.step()
    return prof


def check_trace(trace, prof):
    """Every event in Chrome's format, and what the profile counted. Returns the events by ph."""
    assert trace["displayTimeUnit"] in ("ms", "ns") and isinstance(trace["traceEvents"], list)
    by_ph = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        assert e.get("ph") in NEEDS, e
        assert NEEDS[e["ph"]] <= set(e), (e, NEEDS[e["ph"]] - set(e))
        assert isinstance(e["pid"], int) and isinstance(e.get("tid", 0), int) and isinstance(e["name"], str)
        if "ts" in e:
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0 and e["name"], e
        if e["ph"] == "C":
            assert e["args"] and all(type(v) in (int, float) and v >= 0 for v in e["args"].values()), e
        if e["ph"] == "i":
            assert e["s"] in ("g", "p", "t"), e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index") and e["args"], e
        by_ph[e["ph"]].append(e)

    tracks = collections.defaultdict(list)
    for e in by_ph["X"]:
        tracks[e["tid"]].append(e)
    names = {e["tid"]: e["args"]["name"] for e in by_ph["M"] if e["name"] == "thread_name"}
    for tid, spans in tracks.items():
        assert {e["cat"] for e in spans} == {names[tid]}, "one track per phase, named after it"
        ends = []  # the spans still open, innermost last: each span ends inside the one it starts in
        for e in sorted(spans, key=lambda e: (e["ts"], -e["dur"])):
            while ends and e["ts"] >= ends[-1] - EPS:
                ends.pop()
            assert not ends or e["ts"] + e["dur"] <= ends[-1] + EPS, f"{e} overlaps a span without nesting in it"
            ends.append(e["ts"] + e["dur"])

    counters = [e for e in by_ph["C"] if e["name"] == "memory (bytes)"]
    assert [e["ts"] for e in counters] == sorted(e["ts"] for e in counters)
    assert all(list(e["args"]) == list(CATEGORIES) for e in counters)
    assert max(sum(e["args"].values()) for e in counters) == prof.peak_bytes()
    peak = [e for e in by_ph["i"] if e["name"].startswith("peak")]
    assert len(peak) == 1 and peak[0]["args"]["total"] == prof.peak_bytes()
    assert {c: peak[0]["args"][c] for c in CATEGORIES} == prof.bytes_at_peak()

    ran = collections.Counter((e["cat"], e["name"]) for e in by_ph["X"] if e["cat"] in PHASES)
    assert ran == {key: prof.calls(*key) for key in prof._calls}, "one span per op run, by phase"
    return by_ph


def test_the_chrome_trace_loads_back_and_every_event_keeps_the_format(tmp_path):
    prof = checkpointed_step()
    path = prof.export_chrome_trace(str(tmp_path / "step.json"))
    trace = json.load(open(path))
    by_ph = check_trace(trace, prof)
    cats = collections.Counter(e["cat"] for e in by_ph["X"])
    assert cats["recompute"] == prof.calls("recompute") > 0 and cats["backward"] == prof.calls("backward") > 0
    assert [e["name"] for e in by_ph["X"] if e["cat"] == "step"] == ["AdamW"]  # one optimizer step, on its track
    # the counters are the ledger's events, in order, and one point more: here the total peaks inside the optimizer's
    # step (AdamW's two temporaries, freed before the step's event: NOTE [a step's temporaries]), not at an event
    counters = [list(e["args"].values()) for e in by_ph["C"]]
    rows, k = [[row[c] for c in CATEGORIES] for row in prof.timeline()], len(prof.timeline()) - 2
    assert prof.timeline()[k]["op"] == "AdamW.step" and prof.peak_bytes() > max(r["total"] for r in prof.timeline())
    assert counters == rows[:k] + [[prof.bytes_at_peak()[c] for c in CATEGORIES]] + rows[k:]
    # a checkpoint's backward holds its recompute's backward on the same track, in time
    (ck,) = [e for e in by_ph["X"] if e["name"] == "checkpoint" and e["cat"] == "backward"]
    inside = [e for e in by_ph["X"] if e["cat"] in ("backward", "recompute") and e is not ck
              and ck["ts"] <= e["ts"] and e["ts"] + e["dur"] <= ck["ts"] + ck["dur"] + EPS]
    assert {e["cat"] for e in inside} == {"backward", "recompute"}
    assert len([e for e in inside if e["cat"] == "recompute"]) == prof.calls("recompute")


def test_the_format_check_catches_a_broken_trace(tmp_path):
    """check_trace is not vacuous: a negative duration, two overlapping spans, a lost span each fail it."""
    prof = checkpointed_step()
    good = prof._chrome_trace()
    check_trace(good, prof)
    spans = [i for i, e in enumerate(good["traceEvents"]) if e["ph"] == "X" and e["cat"] == "forward"]

    def broken(change):
        trace = json.loads(json.dumps(good))
        change(trace["traceEvents"])
        with pytest.raises(AssertionError):
            check_trace(trace, prof)
    broken(lambda ev: ev[spans[0]].update(dur=-1.0))
    broken(lambda ev: ev[spans[0]].update(dur=ev[spans[1]]["ts"] - ev[spans[0]]["ts"] + 1.0))
    broken(lambda ev: ev.pop(spans[1]))
    broken(lambda ev: ev[spans[0]].pop("cat"))


def test_times_stay_beside_the_events_so_meta_and_real_steps_still_compare():
    """NOTE [when, beside what]: the events hold no time; one time per event sits in a list of its own."""
    prof = checkpointed_step()
    assert all(set(row) == {"index", "op", "phase", "total", *CATEGORIES} for row in prof.timeline())
    assert len(prof._event_ns) == len(prof._events) and prof._event_ns == sorted(prof._event_ns)
    assert len(prof._spans) == sum(prof._calls.values()) + 1  # each op run, and the optimizer's step


def peak_between_events():
    with mg.profile() as prof:
        a = mg.randn(1000)  # a factory makes no event: the peak, 4000 bytes, falls between two events
        del a
        (mg.randn(10) * 2).sum()
    return prof


def test_a_peak_between_two_events_is_one_point_more_in_both_exports(tmp_path):
    prof = peak_between_events()
    assert prof.peak_bytes() == 4000 > max(row["total"] for row in prof.timeline())
    trace = json.load(open(prof.export_chrome_trace(str(tmp_path / "t.json"))))
    check_trace(trace, prof)
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert len(counters) == len(prof.timeline()) + 1
    page = open(prof.export_memory_timeline(str(tmp_path / "t.html"))).read()
    data = page_data(page)
    assert len(data["points"]) == len(prof.timeline()) + 1 and data["peak"] == 1
    assert data["points"][1][0] == "peak, between start and mul" and sum(data["points"][1][2]) == 4000
    assert "Peak 3.9 KiB at event 1 of 5" in page


def page_data(page):
    return json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S).group(1))


def test_the_memory_page_is_self_contained_and_holds_the_ledgers_events(tmp_path):
    prof = checkpointed_step()
    page = open(prof.export_memory_timeline(str(tmp_path / "step.html"), title="a <checkpointed> {data} step")).read()
    assert not re.search(r"\bsrc=|<link|url\(|@import|fetch\(|XMLHttpRequest|https?://(?!www\.w3\.org/2000/svg\")",
                         page), "the page must load nothing from anywhere"
    assert "<title>a &lt;checkpointed&gt; {data} step</title>" in page  # escaped, and filled in one pass
    data = page_data(page)
    assert data["categories"] == list(CATEGORIES)
    assert data["colors"] == [TAB10[CATEGORY_COLORS[c]] for c in CATEGORIES]
    k = data["peak"]  # inside the optimizer's step: one point more, before the step's event (as above)
    assert data["points"][k][0].startswith("peak, between") and prof.timeline()[k]["op"] == "AdamW.step"
    assert [p[:3] for p in data["points"][:k] + data["points"][k + 1:]] == \
        [[r["op"], r["phase"], [r[c] for c in CATEGORIES]] for r in prof.timeline()]
    assert sum(data["points"][k][2]) == prof.peak_bytes()
    assert all(b >= a for (*_, a), (*_, b) in zip(data["points"], data["points"][1:])), "milliseconds in order"


def test_export_before_the_block_has_run_says_so(tmp_path):
    with pytest.raises(RuntimeError, match="nothing to export yet"):
        mg.profile().export_chrome_trace(str(tmp_path / "t.json"))


# ----------------------------------------------------------------------------- in a real browser

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on PATH to render the memory page headless: install Debian's "
                             "(`apt-get install -y chromium`, as root; Ubuntu: chromium-browser) to run this test")


def render(page, tmp_path, fragment=""):
    """Chromium's DOM of the page once its script has run, and the console lines it logged."""
    r = subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                        "--v=0", f"--user-data-dir={tmp_path / 'chromium'}", "--dump-dom",
                        f"file://{os.path.abspath(page)}{fragment}"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, [line for line in r.stderr.splitlines() if ":CONSOLE" in line]


@needs_chromium
def test_headless_chromium_draws_the_page_with_no_error(tmp_path):
    """The page draws each run of events of one phase as a band in the phase's colour, the optimizer's step too (the
    test expected forward, backward and recompute only, and failed wherever Chromium was), names every phase in the
    legend, and keeps every label inside the chart (the peak's event, "peak, between linear and AdamW.step", ran
    past its right edge)."""
    prof = checkpointed_step()
    page = prof.export_memory_timeline(str(tmp_path / "step.html"))
    k = next(i for i, row in enumerate(prof.timeline()) if row["phase"] == "recompute")
    dom, console = render(page, tmp_path, f"#hover={k}")
    assert not console, console
    body = re.search(r"<body[^>]*>", dom).group(0)  # where the script leaves its markers
    assert "data-error" not in body and f'data-drawn="{len(CATEGORIES)}"' in body, body
    assert 'data-clipped="0"' in body, body
    areas = re.findall(r'<path [^>]*class="area"[^>]*>', dom)
    assert [re.search(r'data-category="(\w+)"', a).group(1) for a in areas] == list(CATEGORIES)
    assert [re.search(r'fill="(#\w+)"', a).group(1) for a in areas] == [TAB10[CATEGORY_COLORS[c]] for c in CATEGORIES]
    tip = re.search(r'<div id="tip"[^>]*>(.*?)</div>', dom, re.S)
    assert tip and f"event {k}: {prof.timeline()[k]['op']}</b> (recompute" in tip.group(1), dom[-3000:]
    runs = [phase for phase, _ in itertools.groupby(p[1] for p in page_data(open(page).read())["points"])]
    bands = re.findall(r'<rect [^>]*class="phase"[^>]*>', dom)
    assert [re.search(r'data-phase="(\w+)"', b).group(1) for b in bands] == [p for p in runs if p in TIMED_PHASES]
    assert {re.search(r'data-phase="(\w+)"', b).group(1) for b in bands} == set(TIMED_PHASES)  # step included
    colors = page_data(open(page).read())["phases"]
    assert [re.search(r'fill="(#\w+)"', b).group(1) for b in bands] == \
        [colors[re.search(r'data-phase="(\w+)"', b).group(1)] for b in bands]
    legend = re.search(r"phases \(the band under the axis\):</text>(.*?)</svg>", dom, re.S).group(1)
    assert re.findall(r"<text[^>]*>(\w+)</text>", legend)[:len(TIMED_PHASES)] == list(colors) and \
        set(colors) == set(TIMED_PHASES)
    # an op's name too long for the legend's line, one word: cut with an ellipsis, still inside the chart
    data = page_data(open(page).read())
    data["points"][data["peak"]][0] = "an_op_name_far_too_long_for_one_line_of_the_legend_" * 2
    long = tmp_path / "long.html"
    long.write_text(open(page).read().replace(json.dumps(page_data(open(page).read()), separators=(",", ":")),
                                              json.dumps(data, separators=(",", ":"))))
    dom, console = render(long, tmp_path)
    assert not console and 'data-clipped="0"' in re.search(r"<body[^>]*>", dom).group(0), console
    assert re.search(r"<text[^>]*>an_op_name_far_too\w*\u2026</text>", dom), dom[-3000:]


@needs_chromium
def test_headless_chromium_reports_a_broken_script(tmp_path):
    """The check above can fail: a page whose script throws gets the error marker, and the console says why."""
    good = open(peak_between_events().export_memory_timeline(str(tmp_path / "ok.html"))).read()
    bad = tmp_path / "broken.html"
    bad.write_text(good.replace("var D = JSON.parse(", "var D = JSON.parsed("))
    dom, console = render(bad, tmp_path)
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-error="Uncaught TypeError' in body and "data-drawn" not in body, body
    assert any("Uncaught TypeError" in line for line in console), console


# ----------------------------------------------------------------------------- collectives, the command

def test_a_collective_is_a_span_on_the_communication_track():
    r = run_ranks(2, """
import json
import minigrad as mg, minigrad.distributed as dist
dist.init_process_group(timeout=60)
t = mg.ones(1000)
with mg.profile() as prof:
    dist.all_reduce(t)
    (t * 2).sum()
trace = prof._chrome_trace()
tracks = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
print(json.dumps([dict(e, track=tracks[e["tid"]]) for e in trace["traceEvents"] if e.get("cat") == "communication"]))
""", timeout=60)
    r.check()
    for out in r.stdout:
        (span,) = json.loads(out)
        assert span["name"] == "all_reduce" and span["ph"] == "X" and span["track"] == COMMUNICATION
        assert span["args"] == {"sent": 4000, "received": 4000} and span["dur"] > 0  # a ring of 2: half each way, twice


def test_memory_html_writes_the_page_of_a_step_on_meta(tmp_path, capsys):
    path = tmp_path / "out" / "step.html"
    assert main(["memory", "--model", "gpt2", "--batch-size", "1", "--seq-len", "32", "--html", str(path)]) == 0
    said = capsys.readouterr().out
    events = int(re.search(rf"memory timeline: {re.escape(str(path))} \((\d+) events; open it in any browser\)",
                           said).group(1))
    page = path.read_text()
    data = page_data(page)
    assert len(data["points"]) >= events > 100 and "gpt2: 1 micro-batch of 1 x 32 tokens" in page
    total = int(re.search(r"^total\s+[\d.]+\s+([\d,]+)$", said, re.M).group(1).replace(",", ""))
    assert sum(data["points"][data["peak"]][2]) == total  # the page's peak is the table's
    assert main(["memory", "--model", "gpt2", "--batch-size", "1", "--seq-len", "32", "--json", "--html",
                 str(path)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["total"] == total and "memory timeline:" in out.err  # stdout stays one JSON object
