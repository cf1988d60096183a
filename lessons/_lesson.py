"""What every lesson does the same way around what it measures: its command line, its plots, its last lines.

    from _lesson import command_line, finish, predict, reveal, save_plot

    ap = command_line(__doc__, quick="what --quick leaves out", no_plot="print only")  # an argparse parser
    args = ap.parse_args(argv)
    guess = predict("the peak of activations after the forward", "KiB", quick=args.quick)  # before it is printed
    ...                                                                    # measure it, then print it
    reveal(guess, measured / 1024, "KiB")     # "You predicted 64 KiB; measured 66 KiB: 2 KiB too low (3% ...)"
    print(f"plot: {save_plot(fig, '03_checkpointing.png')}")   # out/03_checkpointing.png, at 120 dpi
    finish(EXERCISES, t0)                                      # "(the lesson took 1.2 s)", then "Now build it:"

Nothing here measures anything: a lesson reads top to bottom without this file. It is not a lesson itself (the
tour runs lessons/NN_*.py only). A lesson finds it beside itself: `python lessons/NN_name.py`, as the tour and the
tests run it, puts lessons/ first on sys.path, and a notebook kernel started in lessons/ (Jupyter's and VS Code's
default for a file there) imports from its working directory. A kernel started elsewhere does not find it: start it
in lessons/, or put lessons/ on sys.path first.

Predictions are asked for only where someone can answer: stdin is a terminal or the lesson runs as a notebook (Jupyter
shows an input box), the lesson is not in --quick mode, and the tour did not start it (the tour sets
MINIGRAD_NO_PREDICT=1 so that it runs straight through, and its times are the lessons' own). Elsewhere (tests, a pipe,
a notebook run by nbclient) the question is printed and the lesson goes on. The seconds spent answering are left out
of the time a lesson reports.
"""
import argparse
import math
import os
import sys
import time

from minigrad import grading

OUT = "out"  # every plot goes to out/, in the directory the lesson runs in
NO_PREDICT = "MINIGRAD_NO_PREDICT"  # set (to anything but "" or "0") by the tour: ask for no predictions
_answering = [0.0]  # seconds spent waiting for the learner's answers, left out of the lesson's time


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


def micro_batches(count, size):
    """The one way every lesson names an accumulated batch: '4 micro-batches of 1' (how many, then how big)."""
    return f"{count} micro-batch{'' if count == 1 else 'es'} of {size}"


def predict(question, unit="", quick=False):
    """Ask the learner for a number before the lesson prints it. Prints the question; returns the number typed, or
    None where nobody is asked (see the module's docstring) or the answer is left empty. `unit` is what the answer
    is counted in ("KiB", "forward passes", ""); an answer may repeat it ("64 KiB")."""
    print(f"\nPredict: {question}" + (f" (in {unit})" if unit else ""), flush=True)
    why_not = ("--quick" if quick else "started by the tour" if os.environ.get(NO_PREDICT, "") not in ("", "0")
               else "" if sys.stdin.isatty() or "ipykernel" in sys.modules else "not a terminal")
    if why_not:
        print(f"  (not asked: {why_not}. Run the lesson alone in a terminal to answer first.)")
        return None
    started = time.perf_counter()
    try:
        for _ in range(3):
            try:
                text = input("  your prediction (Enter to skip): ").strip()
            except EOFError:
                return None
            except Exception as e:  # IPython's StdinNotImplementedError: a kernel whose front end takes no input
                if type(e).__name__ != "StdinNotImplementedError":
                    raise
                print("  (not asked: this notebook's front end takes no input)")
                return None
            if unit and text.lower().endswith(unit.lower()):
                text = text[:-len(unit)].strip()
            if not text:
                return None
            try:
                number = float(text.replace(",", "").replace("_", "").rstrip("%x"))
            except ValueError:
                print(f"  {text!r} is not a number" + (f" of {unit}" if unit else "") + ": try again")
                continue
            if math.isfinite(number):
                return number
            print("  a finite number, please")
        return None
    finally:
        _answering[0] += time.perf_counter() - started


def reveal(guess, measured, unit="", digits=3):
    """Say plainly how far the prediction was from the measured number (nothing if there was no prediction)."""
    if guess is None:
        return
    show = lambda v: f"{v:,.{digits}g}%" if unit == "%" else f"{v:,.{digits}g} {unit}".rstrip()  # noqa: E731
    gap = guess - measured
    if gap == 0:
        verdict = "exactly right"
    else:
        share = f" ({abs(gap) / abs(measured):.0%} of the measured value)" if measured else ""
        size = f"{abs(gap):,.{digits}g} points" if unit == "%" else show(abs(gap))
        verdict = f"{size} too {'high' if gap > 0 else 'low'}{share}"
        if measured and abs(gap) <= 0.1 * abs(measured):
            verdict += ": within 10%, well predicted"
        elif measured and guess / measured > 0 and max(guess / measured, measured / guess) >= 2:
            verdict += f": off by a factor of {max(guess / measured, measured / guess):.1f}; find the term you missed"
    print(f"  You predicted {show(guess)}; measured {show(measured)}: {verdict}.")


def finish(exercises, started=None):
    """The lesson's last lines: how long it took, if `started` (a time.perf_counter() reading) is given, less the
    time spent answering its predictions; then the exercises that build what it measured, each with the command
    that grades it (python -m minigrad check N)."""
    if started is not None:
        answering = f", not counting {_answering[0]:.0f} s of answering" if _answering[0] >= 0.5 else ""
        print(f"(the lesson took {time.perf_counter() - started - _answering[0]:.1f} s{answering})\n")
    grading.now_build_it(exercises)
