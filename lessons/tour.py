"""The tour: run every lesson in order, each in its own process (the same as `python -m minigrad tour`).

    python lessons/tour.py           # everything (what `make tour` runs)
    python lessons/tour.py --list    # just list the lessons
    python lessons/tour.py --quick   # the lessons that have a quick mode run in it
"""
import sys

from minigrad.__main__ import main

if __name__ == "__main__":
    if "-h" in sys.argv[1:] or "--help" in sys.argv[1:]:
        print(__doc__.replace("The tour:", "usage: python lessons/tour.py [--list] [--quick]\n\nThe tour:"))
        sys.exit(0)
    sys.exit(main(["tour", *sys.argv[1:]]))
