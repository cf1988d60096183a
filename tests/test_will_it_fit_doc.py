"""docs/will_it_fit.md states what minigrad predicts for published measurements; each row holds the command that
makes the prediction. Every such row runs again here, so the page never says what the engine no longer predicts."""
import contextlib
import io
import json
import os
import re

import pytest

from minigrad.__main__ import main

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "will_it_fit.md")
ROW = re.compile(r"^\| (?P<row>[\w+ ]+?) \| `(?P<flags>--model [^`]+)` \| (?P<category>\w+) \| [^|]* \| "
                 r"(?P<mib>[\d,]+) MiB(?: \| (?P<recompute>\d\.\d{3}e\+\d+) \((?P<share>[\d.]+)%\))?", re.M)
ROWS = [m.groupdict() for m in ROW.finditer(open(DOC).read())]


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
    assert f"{predicted / 2**20:,.0f}" == row["mib"], f"{row['row']}: the page says {row['mib']} MiB"
    if row["recompute"]:  # the policy rows: checkpointing's extra FLOPs, and their share of forward + backward
        flops = prediction["flops"]
        share = flops["recompute"] / (flops["forward"] + flops["backward"])
        assert (f"{flops['recompute']:.3e}", f"{100 * share:.1f}") == (row["recompute"], row["share"]), \
            f"{row['row']}: the page says {row['recompute']} FLOPs ({row['share']}%)"
