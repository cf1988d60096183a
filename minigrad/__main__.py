"""The command: python -m minigrad (or `minigrad`) tour | lesson N | check [N].

    python -m minigrad tour              every lesson in order, each in its own process
    python -m minigrad lesson 3          one lesson (extra arguments go to it: lesson 3 --quick)
    python -m minigrad check             grade every exercise in exercises/ (a table, then the first hint)
    python -m minigrad check 2           grade exercise 2 only
    python -m minigrad check --solutions grade the reference solutions instead (they all pass)

The lessons live in lessons/ and the exercises in exercises/, beside the package (a clone of the
repository, installed with `pip install -e .`).
"""
import argparse
import glob
import os
import subprocess
import sys
import time

from . import grading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LESSONS = os.path.join(ROOT, "lessons")


def lessons():
    return sorted(glob.glob(os.path.join(LESSONS, "[0-9][0-9]_*.py")))


def tour(args):
    from tqdm import tqdm
    found = lessons()
    if args.list:
        print("\n".join(os.path.basename(p) for p in found))
        return 0
    failed = []
    bar = tqdm(found, desc="tour", unit="lesson", disable=None)  # no bar when piped
    for path in bar:
        name = os.path.basename(path)
        bar.set_postfix_str(name)
        print(f"\n{'=' * 78}\n{name}\n{'=' * 78}", flush=True)
        t0 = time.perf_counter()
        if subprocess.run([sys.executable, path] + (["--quick"] if args.quick and _has_quick(path) else [])).returncode:
            failed.append(name)
            print(f"({name} FAILED; the tour goes on)", flush=True)
        else:
            print(f"({name} took {time.perf_counter() - t0:.1f} s)", flush=True)
    plots = sorted(glob.glob(os.path.join("out", "*.png")))
    print("\nPlots in out/:" if plots else "\nNo plots were written.")
    for p in plots:
        print(f"  {p}")
    if failed:
        print(f"\n{len(failed)} of {len(found)} lessons failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"\nDone: {len(found)} lessons. Next, build the engine yourself: python -m minigrad check")
    return 0


def _has_quick(path):
    with open(path, encoding="utf-8") as f:
        return "--quick" in f.read()


def lesson(args):
    found = {int(os.path.basename(p)[:2]): p for p in lessons()}
    if args.number not in found:
        print(f"lesson {args.number}: there is no such lesson; the lessons are {', '.join(map(str, sorted(found)))} "
              f"(python -m minigrad tour --list names them)", file=sys.stderr)
        return 2
    return subprocess.run([sys.executable, found[args.number]] + args.rest).returncode


def check(args):
    everything = grading.exercises()
    if not everything:
        print(f"check: no exercises found in {grading.COURSE}: the course lives in a clone of the repository",
              file=sys.stderr)
        return 2
    chosen = everything
    if args.number is not None:
        chosen = [e for e in everything if e.number == args.number]
        if not chosen:
            print(f"check {args.number}: there is no exercise {args.number}; they are numbered "
                  f"{everything[0].number} to {everything[-1].number}", file=sys.stderr)
            return 2
    results = [grading.grade(e, solutions=args.solutions) for e in chosen]
    width = max(len(r.exercise.title) for r in results)
    print(f"{'':3}{'exercise':<{width + 2}}status")
    for r in results:
        print(f"{r.exercise.number:>2} {r.exercise.title:<{width + 2}}{r.status}")
    done = sum(r.status == "done" for r in results)
    print(f"\n{done} of {len(results)} done" + (" (the reference solutions)" if args.solutions else ""))
    first = next((r for r in results if r.status != "done"), None)
    if first is not None:
        where = first.exercise.solution if args.solutions else first.exercise.path
        print(f"\nNext: exercise {first.exercise.number}, {first.exercise.title} ({os.path.relpath(where)})\n"
              f"  {first.message}")
    return 0 if done == len(results) else 1


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m minigrad", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True, metavar="{tour,lesson,check}")
    p = sub.add_parser("tour", help="run every lesson in order")
    p.add_argument("--list", action="store_true", help="list the lessons and stop")
    p.add_argument("--quick", action="store_true", help="run the lessons that have one in their quick mode")
    p.set_defaults(run=tour)
    p = sub.add_parser("lesson", help="run one lesson: lesson N [its own arguments]")
    p.add_argument("number", type=int, help="the lesson's number, as in lessons/NN_*.py")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="passed to the lesson (for example --quick)")
    p.set_defaults(run=lesson)
    p = sub.add_parser("check", help="grade the exercises in exercises/")
    p.add_argument("number", type=int, nargs="?", help="one exercise (all of them when left out)")
    p.add_argument("--solutions", action="store_true", help="grade the reference solutions instead")
    p.set_defaults(run=check)
    args = ap.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
