"""docs/will_it_fit.md states what minigrad predicts for published measurements; each row holds the command that
makes the prediction. Every such row runs again here, so the page never says what the engine no longer predicts: its
number, and what its text says of it (the reserve plus the CUDA context, the difference from the measurement and its
share, the fragmentation above what was allocated; a policy row's recompute and total), the differences of two rows
with their shares, and the numbers the page's prose takes from the rows (the range of fragmentation, H4's
activations)."""
import contextlib
import io
import json
import os
import re

import pytest

from minigrad.__main__ import main

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "will_it_fit.md")
ROW = re.compile(r"^\| (?P<row>[\w+ ]+?) \| `(?P<flags>--model [^`]+)` \| (?P<category>\w+) \| (?P<published>[^|]*) \| "
                 r"(?P<mib>[\d,]+) MiB(?: \| (?P<recompute>\d\.\d{3}e\+\d+) \((?P<share>[\d.]+)%\))?(?P<rest>.*)$", re.M)
ROWS = [m.groupdict() for m in ROW.finditer(open(DOC).read())]
CONTEXT_MIB = 1343  # H0, the CUDA context alone
FRAGMENTATION = re.compile(r"(\d+) MiB of fragmentation above (?:the )?([\d,]+)(?: MiB)? allocated")


def mib(nbytes):
    return f"{nbytes / 2**20:,.0f}"


def test_the_page_has_its_predictions():
    assert {"H1", "H2", "H3", "Z2", "Z3", "B12"} | {f"K{i}" for i in range(1, 9)} <= {r["row"] for r in ROWS}
    assert all(r["recompute"] for r in ROWS if r["row"].startswith("K"))


@pytest.mark.parametrize("row", ROWS, ids=[r["row"] for r in ROWS])
def test_each_prediction_is_what_the_engine_predicts(row):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["memory"] + row["flags"].split() + ["--json"]) == 0
    prediction = json.loads(out.getvalue())
    predicted = prediction[row["category"]]
    assert mib(predicted) == row["mib"], f"{row['row']}: the page says {row['mib']} MiB"
    if row["recompute"]:  # the policy rows: checkpointing's extra FLOPs, and their share of forward + backward
        flops = prediction["flops"]
        share = flops["recompute"] / (flops["forward"] + flops["backward"])
        assert (f"{flops['recompute']:.3e}", f"{100 * share:.1f}") == (row["recompute"], row["share"]), \
            f"{row['row']}: the page says {row['recompute']} FLOPs ({row['share']}%)"
        total = re.match(r" \| ([\d,]+) MiB \|$", row["rest"])  # and the step's peak, the last column
        assert total and total.group(1) == mib(prediction["total"]), f"{row['row']}: the page says {row['rest']}"
    if row["category"] == "reserved":  # what the row's text says of the reserve, each number the engine's
        said = re.match(r" \(\+ (?:H0's )?(\d+) = ([\d,]+)\) \| ([+-]\d+) MiB \(([\d.]+)%\)", row["rest"])
        assert said, f"{row['row']}: a reserved row gives the reserve plus H0's context, then its difference"
        published = int(re.fullmatch(r"(\d+) MiB", row["published"]).group(1))
        full = round(predicted / 2**20) + CONTEXT_MIB
        assert said.groups() == (str(CONTEXT_MIB), f"{full:,}", f"{full - published:+d}",
                                 f"{100 * abs(full - published) / published:.1f}"), f"{row['row']}: {said.group(0)}"
        allocated = prediction["allocated"]
        assert FRAGMENTATION.findall(row["rest"]) == [(mib(predicted - allocated), mib(allocated))], \
            f"{row['row']}: the row states its fragmentation above what was allocated, once"
        step = re.search(r"\(the step's ([\d,]+) MiB", row["rest"])
        assert step is None or step.group(1) == mib(prediction["total"]), row["row"]


def test_the_fragmentation_the_page_sums_up_is_its_rows():
    """Twice the page gives the range of the H rows' fragmentation; each row states its own (checked above)."""
    stated = [int(m[0]) for r in ROWS if r["category"] == "reserved" for m in FRAGMENTATION.findall(r["rest"])]
    ranges = re.findall(r"(\d+) to\s+(\d+) MiB (?:of fragmentation per row|for the H rows)", open(DOC).read())
    assert len(ranges) == 2 and all((int(a), int(b)) == (min(stated), max(stated)) for a, b in ranges), (ranges, stated)


def test_the_activations_beside_the_bytes_per_parameter_are_h4s():
    """"Neither 18 nor 16 is the step's peak: the activations come on top (H4: N MiB at batch 4)"."""
    said = re.search(r"the activations come on top \(H4: ([\d,]+) MiB\s+at batch 4\)", open(DOC).read())
    h4 = next(r for r in ROWS if r["row"] == "H4")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["memory"] + h4["flags"].replace(" --reserved", "").split() + ["--json"]) == 0
    assert said and said.group(1) == mib(json.loads(out.getvalue())["activations"])


BYTES_ROW = re.compile(r"^\| (?P<model>gpt2-xl|bert-large-uncased) \| (?P<n>[\d,]+) \| (?P<weights>[\d,]+) MiB \| "
                       r"(?P<cast>[\d,]+) MiB \| (?P<grads>[\d,]+) MiB \| (?P<adamw>[\d,]+) MiB \| (?P<per>[\d.]+) \|$", re.M)


def test_the_bytes_per_parameter_table_is_the_engines_count():
    """18 (Hugging Face), 16 (ZeRO) and minigrad's exact count under fp16-mixed AdamW, every gradient alive."""
    from minigrad import plan
    rows = [m.groupdict() for m in BYTES_ROW.finditer(open(DOC).read())]
    assert [r["model"] for r in rows] == ["gpt2-xl", "bert-large-uncased"]
    for r in rows:
        p = plan.predict(plan.Setup(r["model"], 1, 1024 if r["model"] == "gpt2-xl" else 512, precision="fp16-mixed",
                                    software=plan.Software(zero_grad="zeros")))
        n, cast = p.bytes["parameters"] // 4, p.profile.cast_weight_bytes()
        mib = lambda b: f"{b / 2**20:,.0f}"  # noqa: E731
        assert (r["n"], r["weights"], r["cast"], r["grads"], r["adamw"]) == \
            (f"{n:,}", mib(p.bytes["parameters"]), mib(cast), mib(p.bytes["gradients"]), mib(p.bytes["optimizer"]))
        per = (p.bytes["parameters"] + p.bytes["gradients"] + p.bytes["optimizer"] + cast) / n
        assert r["per"] == f"{per:.2f}"


DIFFERENCE = re.compile(r"^\| (?P<a>H\d+) - (?P<b>H\d+) \| [^|]+ \| [^|]+ \| (?P<pa>[\d,]+) - (?P<pb>[\d,]+) = "
                        r"\+?(?P<d>[\d,]+) MiB", re.M)


def test_the_differences_are_of_the_rows_predictions():
    """Each difference of two H rows subtracts the two predictions the page's rows state (which the test above
    checks against the engine): what the caching allocator would reserve, where the rows compare that."""
    total = {r["row"]: int(r["mib"].replace(",", "")) for r in ROWS if r["category"] in ("total", "reserved")}
    pairs = [m.groupdict() for m in DIFFERENCE.finditer(open(DOC).read())]
    assert {(p["a"], p["b"]) for p in pairs} >= {("H1", "H4"), ("H5", "H3"), ("H1", "H6"), ("H5", "H7")}
    for p in pairs:
        a, b, d = (int(p[k].replace(",", "")) for k in ("pa", "pb", "d"))
        assert (a, b, a - b) == (total[p["a"]], total[p["b"]], d), p


H_ROW = re.compile(r"^\| (?P<row>H\d) \| `[^`]+` \| reserved \| (?P<published>\d+) MiB \| (?P<mib>[\d,]+) MiB", re.M)
PUBLISHED_DIFFERENCE = re.compile(r"^\| (?P<a>H\d+) - (?P<b>H\d+) \| [^|]+ \| \d+ - \d+ = \+?(?P<published>\d+) MiB"
                                  r"(?: \([^)]*\))? \| [\d,]+ - [\d,]+ = \+?(?P<d>[\d,]+) MiB(?: \((?P<pct>[\d.]+)% "
                                  r"(?P<way>less|more))?", re.M)


def test_the_summary_the_readme_and_the_page_give_holds():
    """What README's Status and "The mixed-precision rows" say of these rows: each H row's reserve plus the context
    within 2% of what was measured, and each difference of two rows within 15%."""
    text = open(DOC).read()
    rows = {m["row"]: m.groupdict() for m in H_ROW.finditer(text)}
    assert sorted(rows) == [f"H{i}" for i in range(1, 10)]
    for name, r in rows.items():
        published, predicted = int(r["published"]), int(r["mib"].replace(",", "")) + CONTEXT_MIB
        assert abs(predicted - published) < 0.02 * published, r
    pairs = [m.groupdict() for m in PUBLISHED_DIFFERENCE.finditer(text)]
    assert {(p["a"], p["b"]) for p in pairs} >= {("H1", "H2"), ("H2", "H3"), ("H1", "H4"), ("H5", "H3"), ("H1", "H6"),
                                                  ("H5", "H7"), ("H1", "H8"), ("H5", "H9")}
    for p in pairs:
        published, predicted = int(p["published"]), int(p["d"].replace(",", ""))
        assert abs(predicted - published) <= 0.15 * published, p
        if p["pct"]:  # "(5.4% less)": the prediction against the published difference, to the digits written
            digits = len(p["pct"].partition(".")[2])
            assert (p["pct"], p["way"]) == (f"{100 * abs(predicted - published) / published:.{digits}f}",
                                            "less" if predicted < published else "more"), p
