"""The tour: run every lesson in order, each in its own process, and say where its output went.

    python lessons/tour.py           # everything (what `make tour` runs)
    python lessons/tour.py --list    # just list the lessons
"""
import argparse
import glob
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def lessons():
    return sorted(glob.glob(os.path.join(HERE, "[0-9][0-9]_*.py")))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the lessons and stop")
    args = ap.parse_args()
    for i, path in enumerate(lessons(), 1):
        name = os.path.basename(path)
        if args.list:
            print(name)
            continue
        print(f"\n{'=' * 78}\n[{i}/{len(lessons())}] {name}\n{'=' * 78}", flush=True)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, path], check=True)
        print(f"({name} took {time.perf_counter() - t0:.1f} s)", flush=True)
    if not args.list:
        print("\nDone. Plots are in out/; each lesson's docstring says how to run it on its own.")


if __name__ == "__main__":
    main()
