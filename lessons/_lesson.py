"""What every lesson does the same way around what it measures: its command line, its plots, its last lines.

    from _lesson import command_line, finish, save_plot

    ap = command_line(__doc__, quick="what --quick leaves out", no_plot="print only")  # an argparse parser
    args = ap.parse_args(argv)
    print(f"plot: {save_plot(fig, '03_checkpointing.png')}")   # out/03_checkpointing.png, at 120 dpi
    finish(EXERCISES, t0)                                      # "(the lesson took 1.2 s)", then "Now build it:"

Nothing here measures anything: a lesson reads top to bottom without this file. It is not a lesson itself (the
tour runs lessons/NN_*.py only). A lesson finds it beside itself: `python lessons/NN_name.py`, as the tour and the
tests run it, puts lessons/ first on sys.path, and a notebook kernel started in lessons/ (Jupyter's and VS Code's
default for a file there) imports from its working directory. A kernel started elsewhere does not find it: start it
in lessons/, or put lessons/ on sys.path first.
"""
import argparse
import os
import time

from minigrad import grading

OUT = "out"  # every plot goes to out/, in the directory the lesson runs in


def command_line(doc, quick=None, no_plot="print only"):
    """The lesson's argparse parser: --help prints the lesson's docstring as it is written; --quick, where the lesson
    has a quick mode, with `quick` saying what it leaves out; --no-plot. A lesson may add options of its own."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if quick is not None:
        ap.add_argument("--quick", action="store_true", help=quick)
    ap.add_argument("--no-plot", action="store_true", help=no_plot)
    return ap


def save_plot(fig, name, dpi=120):
    """Lay the figure out, write it to out/<name> and close it. Returns the path, for the lesson to print."""
    import matplotlib.pyplot as plt  # loaded already (fig came from it); lessons 10 and 11 load it only to plot
    fig.tight_layout()
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def finish(exercises, started=None):
    """The lesson's last lines: how long it took, if `started` (a time.perf_counter() reading) is given, then the
    exercises that build what it measured, each with the command that grades it (python -m minigrad check N)."""
    if started is not None:
        print(f"(the lesson took {time.perf_counter() - started:.1f} s)\n")
    grading.now_build_it(exercises)
