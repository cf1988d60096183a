"""Instructions per step under callgrind, for one or more trees of minigrad: a table for bench/NOTES.md.

    python bench/callgrind.py 0ed4959 main                # two revisions of this repository
    python bench/callgrind.py 0ed4959 /work/wt/mine       # a revision against a directory (its files as they are)
    python bench/callgrind.py main --only plain,profiled  # some workloads only
    python bench/callgrind.py --list                      # the workloads and what each step does

Each revision is extracted with `git archive REV | tar -x -C TMPDIR`, so the measured tree is exactly that commit
(a directory is measured as it is, uncommitted changes and all). For each tree and workload this script runs itself
twice under `PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=FILE`, once
with a few steps and once with more, and reads the total instructions (Ir) from the 'summary:' / 'totals:' line
of FILE. Instructions per step = (Ir of the long run - Ir of the short run) / (the difference in steps): the
imports, the model's construction and the first steps' warm-up cancel. The counts do not move with the machine's
load, unlike the time; PYTHONHASHSEED=0 pins dict layouts (without it a count moves by about 1% from run to run),
one OpenBLAS thread keeps a second thread's spinning out of the count.

The workloads (as bench/NOTES.md measured them since 2026-11-30):
  plain      bench.mlp(2, 16, 1): zero_grad, model(x).sum().backward()                   steps 200, 1200
  profiled   the same inside `with mg.profile():`, one profile per step                   steps 200, 1200
  autocast   the same with the forward (model(x).sum()) under mg.autocast('cpu')         steps 200, 1200
  ckpt       mlp(8, 16, 1): checkpoint_sequential(model, 'sqrt', x).sum().backward()   steps 100, 600
  ckpt-dots  the same with policy=mg.checkpoint_policies.dots_saveable                   steps 100, 600
  gpt        the smallest GPT of bench/bench.py (its --quick config: 1 layer, 4 heads, 32 wide, block 16,
             vocabulary 64, batch 2): loss, zero_grad, backward, AdamW step               steps 10, 60
  gpt-prof   the same inside `with mg.profile():`                                         steps 10, 60
The models come from this script's own bench/bench.py (bench.mlp and bench.gpt_contenders), loaded after the measured
tree's minigrad, not from the measured tree's bench/, so that every tree runs the same workload. A workload a tree cannot run (an API it lacks) shows
as 'n/a' in the table, with the error's last line below it.

Prints a markdown table: the workload, instructions per step for each tree, and the change against the first.
Callgrind is slow: a run spends about 1.2 billion instructions importing minigrad (NumPy, SciPy) before its first
step, and on the shared 2-core machine (load 6-11) ran 10-20 million instructions a second. The defaults are 14
runs and about 45 billion instructions per tree: two trees took about 45 minutes with --jobs 2. --keep DIR makes a
run resumable (a run that ended well there is not run again), and the files there are what callgrind_annotate
reads.
"""
import argparse
import concurrent.futures
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import util

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (steps of the short run, of the long run, what a step does)
WORKLOADS = {
    "plain": (200, 1200, "`bench.mlp(2, 16, 1)`, plain"),
    "profiled": (200, 1200, "the same, profiled (`mg.profile()` around each step)"),
    "autocast": (200, 1200, "the same, forward under `mg.autocast('cpu')`"),
    "ckpt": (100, 600, "`checkpoint_sequential(mlp(8, 16, 1), 'sqrt', x)`"),
    "ckpt-dots": (100, 600, "the same with `policy=dots_saveable`"),
    "gpt": (10, 60, "GPT step (1 layer, 32 wide, block 16, batch 2, AdamW)"),
    "gpt-prof": (10, 60, "the same, profiled"),
}


# --- the worker: runs inside valgrind, with the measured tree first on sys.path ---------------------------------

def worker(tree, name, steps):
    sys.path[:] = [tree] + [p for p in sys.path if os.path.abspath(p or ".") != HERE]  # not this tree's bench/
    import minigrad as mg
    if os.path.dirname(os.path.abspath(mg.__file__)) != os.path.join(os.path.abspath(tree), "minigrad"):
        raise SystemExit(f"imported minigrad from {mg.__file__}, not from {tree}")

    spec = util.spec_from_file_location("bench", os.path.join(HERE, "bench.py"))  # this script's, on that minigrad
    bench = util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    if name in ("plain", "profiled", "autocast"):
        model, x = bench.mlp(2, 16, 1)

        def step():
            model.zero_grad()
            model(x).sum().backward()
        if name == "autocast":
            def step():
                model.zero_grad()
                with mg.autocast("cpu"):
                    y = model(x).sum()
                y.backward()
    elif name in ("ckpt", "ckpt-dots"):
        model, x = bench.mlp(8, 16, 1)
        policy = mg.checkpoint_policies.dots_saveable if name == "ckpt-dots" else None

        def step():
            model.zero_grad()
            mg.checkpoint_sequential(model, "sqrt", x, policy=policy).sum().backward()
    elif name in ("gpt", "gpt-prof"):  # bench.gpt_contenders with bench.sizes('c', quick=True)
        cfg = dict(vocab_size=64, block_size=16, n_layer=1, n_head=4, n_embd=32)
        step = bench.gpt_contenders("minigrad", 2, cfg)[0]["minigrad"]
    else:
        raise SystemExit(f"unknown workload {name!r}")
    if name.endswith("prof") or name == "profiled":
        unprofiled = step

        def step():
            with mg.profile():
                unprofiled()
    for _ in range(steps):
        step()


# --- the driver ------------------------------------------------------------------------------------------------

def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout.strip()


def tree_of(spec, repo, scratch):
    """(label, directory) for a revision (extracted with git archive) or a directory (as it is)."""
    if os.path.isdir(spec) and os.path.isdir(os.path.join(spec, "minigrad")):
        return spec, os.path.abspath(spec)
    commit = git(repo, "rev-parse", "--verify", spec + "^{commit}")
    short = git(repo, "rev-parse", "--short", commit)
    where = tempfile.mkdtemp(prefix=f"tree-{short}-", dir=scratch)
    archive = subprocess.Popen(["git", "-C", repo, "archive", commit], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", where], stdin=archive.stdout, check=True)
    archive.stdout.close()
    if archive.wait():
        raise SystemExit(f"git archive {spec} failed")
    return (short if commit.startswith(spec.lower()) else f"{spec} ({short})"), where


def total_ir(path):
    """The total instructions of a callgrind output file: its 'totals:' line, or its 'summary:' line."""
    found = {}
    with open(path) as f:
        for line in f:
            for key in ("totals:", "summary:"):
                if line.startswith(key):
                    found[key] = int(line.split()[1])
    if not found:
        raise ValueError(f"no 'totals:' or 'summary:' line in {path}")
    return found.get("totals:", found.get("summary:"))


def measure(args, tree, label, name, steps, out_dir):
    """Ir of one run of `steps` steps of the workload under callgrind, or an error message (a str)."""
    tag = re.sub(r"[^\w.-]+", "_", label)
    out = os.path.join(out_dir, f"callgrind.{tag}.{name}.{steps}.out")
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    command = [args.valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", args.python,
               os.path.abspath(__file__), "--worker", tree, name, str(steps)]
    if args.keep and os.path.exists(out + ".done"):  # a run that finished before (a killed one dumps its totals
        ir = total_ir(out)                           # so far: only a run that ended well leaves the .done mark)
        print(f"  {label} {name} x{steps}: Ir {ir:,} (kept from {out})", file=sys.stderr)
        return ir
    start = time.time()
    r = subprocess.run(command, cwd=out_dir, env=env, capture_output=True, text=True)
    took = time.time() - start
    if r.returncode:
        lines = [line for line in r.stderr.splitlines() if line.strip() and not line.startswith("==")]
        print(f"  {label} {name} x{steps}: failed ({took:.0f} s)", file=sys.stderr)
        return lines[-1] if lines else f"exit status {r.returncode}"
    ir = total_ir(out)
    open(out + ".done", "w").close()
    print(f"  {label} {name} x{steps}: Ir {ir:,} ({took:.0f} s)", file=sys.stderr)
    return ir


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trees", nargs="*", help="git revisions of --repo (extracted with git archive) or directories "
                                             "that hold minigrad/; the first is the baseline of the change column")
    ap.add_argument("--repo", default=os.path.dirname(HERE), help="the git repository the revisions name "
                                                                   "(default: the one this script is in)")
    ap.add_argument("--only", help="comma-separated workloads (default: all; see --list)")
    ap.add_argument("--list", action="store_true", help="print the workloads and their step counts, and exit")
    ap.add_argument("--steps", action="append", default=[], metavar="WORKLOAD=SHORT,LONG",
                    help="the step counts of a workload's two runs, e.g. --steps gpt=5,30 (repeatable); the "
                         "workload may be a shell pattern: --steps 'gpt*=5,30' sets gpt's and gpt-prof's")
    ap.add_argument("--python", default=sys.executable, help="the Python that runs the workloads (default: this one)")
    ap.add_argument("--valgrind", default=shutil.which("valgrind") or "valgrind")
    ap.add_argument("--jobs", type=int, default=1, help="callgrind runs at once (default 1: the machine's other "
                                                         "work slows them, but does not change their counts)")
    ap.add_argument("--keep", metavar="DIR", help="keep the callgrind output files (and the extracted trees) in DIR, "
                    "for callgrind_annotate; a run whose file is already there is not run again")
    ap.add_argument("--worker", nargs=3, metavar=("TREE", "WORKLOAD", "STEPS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        tree, name, steps = args.worker
        return worker(tree, name, int(steps))
    steps = {name: (short, long) for name, (short, long, _) in WORKLOADS.items()}
    for item in args.steps:
        key, _, value = item.partition("=")
        try:
            short, long = (int(n) for n in value.split(","))
        except ValueError:
            ap.error(f"--steps {item}: expected WORKLOAD=SHORT,LONG")
        if not 0 <= short < long:
            ap.error(f"--steps {item}: the long run needs more steps than the short one")
        matched = fnmatch.filter(WORKLOADS, key)
        if not matched:
            ap.error(f"--steps {item}: no workload {key!r} (see --list)")
        for name in matched:
            steps[name] = (short, long)
    if args.list:
        for name, (_, _, what) in WORKLOADS.items():
            print(f"{name:10} {what}: {steps[name][0]} and {steps[name][1]} steps")
        return
    if not args.trees:
        ap.error("name at least one revision or directory")
    names = args.only.split(",") if args.only else list(WORKLOADS)
    for name in names:
        if name not in WORKLOADS:
            ap.error(f"--only: no workload {name!r} (see --list)")
    scratch = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="callgrind-")
    os.makedirs(scratch, exist_ok=True)
    try:
        trees = [tree_of(spec, args.repo, scratch) for spec in args.trees]
        for _, tree in trees:  # bytecode compiled now, not inside the first (short) run it would weigh on
            subprocess.run([args.python, "-m", "compileall", "-q", os.path.join(tree, "minigrad")],
                           check=True, capture_output=True)
        runs = [(label, tree, name, n) for name in names for label, tree in trees for n in steps[name]]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            irs = dict(zip([(label, name, n) for label, _, name, n in runs],
                           pool.map(lambda run: measure(args, run[1], run[0], run[2], run[3], scratch), runs)))
        per_step, errors = {}, []
        for name in names:
            short, long = steps[name]
            for label, _ in trees:
                a, b = irs[label, name, short], irs[label, name, long]
                if isinstance(a, int) and isinstance(b, int):
                    per_step[name, label] = (b - a) / (long - short)
                else:
                    errors.append(f"{label}, {name}: {a if isinstance(a, str) else b}")
        labels = [label for label, _ in trees]
        print(f"\nInstructions per step (callgrind Ir, (long - short) / steps between), "
              f"PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1, {args.python}:\n")
        head = ["step", *labels] + [f"change ({label})" if len(labels) > 2 else "change" for label in labels[1:]]
        print("| " + " | ".join(head) + " |")
        print("| " + " | ".join("---" for _ in head) + " |")
        for name in names:
            what = WORKLOADS[name][2] + f" [{steps[name][0]}, {steps[name][1]} steps]"
            cells = [f"{per_step[name, label]:,.0f}" if (name, label) in per_step else "n/a" for label in labels]
            base = per_step.get((name, labels[0]))
            for label in labels[1:]:
                new = per_step.get((name, label))
                cells.append(f"{(new / base - 1) * 100:+.1f}%" if base and new is not None else "n/a")
            print("| " + " | ".join([what, *cells]) + " |")
        for error in errors:
            print(f"\nn/a: {error}")
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
