"""The command line's traps (issue 28, [habits]), each now a clear answer: a budget without a unit, a flag's prefix
(--checkpoint for --checkpointing), an unknown flag (the subcommand's usage, with the nearest flag), `plan --top N`
printing up to N rows (or saying why fewer), a model name's case (GPT2-XL), `curve` keeping its earlier plot, and
the examples of each --help written as a shell reads them."""
import os
import re

import pytest

from minigrad import plan
from minigrad.__main__ import main


def refused(argv, capsys):
    """The exit code and stderr of a command that argparse refuses."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code, capsys.readouterr().err


def test_a_budget_without_a_unit_is_refused_saying_which_units(capsys):
    code, err = refused(["plan", "--model", "gpt2", "--memory", "16", "--batch-size", "4", "--seq-len", "64"], capsys)
    assert code == 2 and "usage: python -m minigrad plan" in err
    assert "'16' has no unit: write 16GB (16 x 10^9 bytes), 16GiB (16 x 2^30), or 16B if you mean bytes" in err
    assert plan.parse_bytes("16B") == 16 and plan.parse_bytes("80e9") == 80 * 10 ** 9  # the library still reads them


def test_a_prefix_of_a_flag_is_not_taken_for_it(capsys):
    code, err = refused(["memory", "--model", "gpt2", "--batch-size", "1", "--seq-len", "64", "--checkpoint"], capsys)
    assert code == 2 and "usage: python -m minigrad memory" in err
    assert "unrecognized arguments: --checkpoint (did you mean --checkpointing?)" in err
    code, err = refused(["plan", "--model", "gpt2", "--mem", "4GB", "--batch-size", "4", "--seq-len", "64"], capsys)
    assert "--memory" in err and "usage: python -m minigrad plan" in err  # --mem was once taken as --memory


def test_no_subcommand_prints_the_help_not_an_error(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m minigrad") and "tour" in out and "plan" in out and "options:" in out


@pytest.mark.parametrize("argv, usage", [
    (["curve", "--no-plot", "--deep", "3"], "usage: python -m minigrad curve"),
    (["check", "--hints"], "usage: python -m minigrad check"),
    (["tour", "--lst"], "usage: python -m minigrad tour"),
])
def test_an_unknown_flag_shows_its_subcommands_usage_and_the_nearest_flag(argv, usage, capsys):
    code, err = refused(argv, capsys)
    assert code == 2 and usage in err and "did you mean" in err and "--help` lists its flags" in err


def test_plan_top_prints_up_to_that_many_rows_or_says_why_fewer(capsys):
    def rows(top, batch):
        assert main(["plan", "--model", "gpt2", "--memory", "6GiB", "--batch-size", str(batch), "--seq-len", "512",
                     "--top", str(top), "--quiet"]) == 0
        out = capsys.readouterr().out
        table = out.split("recompute\n", 1)[1].split("\n\n", 1)[0].splitlines()
        return [line.split() for line in table], out

    table, out = rows(10, 8)
    assert len(table) == 10 and [r[0] for r in table] == [str(i) for i in range(1, 11)]
    assert len({r[3] for r in table[:4]}) == 4  # each strategy's best first
    table, out = rows(50, 4)  # micro-batches 1, 2, 4 under 4 strategies: at most 12
    assert len(table) < 50 and f"only these {len(table)} steps fit" in out


def test_a_models_name_is_matched_whatever_its_case(capsys):
    assert main(["memory", "--model", "GPT2-XL", "--batch-size", "1", "--seq-len", "64", "--json"]) == 0
    code, err = refused(["memory", "--model", "GPT2-XXL", "--batch-size", "1", "--seq-len", "64"], capsys)
    assert "did you mean 'gpt2-xl'?" in err


def test_curve_keeps_its_earlier_plot_and_says_where_the_new_one_went(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    small = ["curve", "--depth", "2", "--width", "4", "--batch", "2"]
    assert main(small) == 0
    assert "plot: out/curve.png" in capsys.readouterr().out
    first = os.path.getmtime("out/curve.png")
    assert main(small) == 0
    out = capsys.readouterr().out
    assert "plot: out/curve-2.png" in out and "out/curve.png is an earlier run's, kept" in out
    assert os.path.getmtime("out/curve.png") == first
    assert main(small + ["--out", "out/curve-2.png"]) == 0  # a path given is replaced, saying so
    assert "it replaced the out/curve-2.png that was there" in capsys.readouterr().out


def test_launch_names_a_missing_script_and_its_help_says_what_root_needs(capsys):
    from minigrad.__main__ import main
    assert main(["launch", "-n", "2", "no_such_script.py"]) == 2
    assert "no file 'no_such_script.py'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["launch", "--help"])
    said = capsys.readouterr().out
    assert "OMPI_ALLOW_RUN_AS_ROOT=1" in said and "mpirun -n N python SCRIPT" in said


@pytest.mark.parametrize("sub", ["", "tour", "lesson", "check", "curve", "memory", "plan", "launch"])
def test_each_example_in_help_is_written_as_a_shell_reads_it(sub, capsys):
    """An example too long for one line continues with ` \\` on the next, as a shell reads it. In a docstring that
    is not raw, a lone backslash at a line's end joins the two lines in the text itself, and --help then shows one
    line with a gap of spaces inside the command (memory's --policy example did)."""
    with pytest.raises(SystemExit) as e:
        main([sub, "--help"] if sub else ["--help"])
    assert e.value.code == 0
    examples = [line.strip() for line in capsys.readouterr().out.splitlines() if "python -m minigrad " in line]
    assert examples or sub in ("tour", "lesson", "check")
    for line in examples:
        assert not re.search(r"\S {2,}--\w", line), f"minigrad {sub} --help: {line!r}"
