"""The tape's functions know the seams and nothing behind them (issue [seams]): `apply` and `_run` (tensor/tensor.py),
`record`, `keep`, `release` and `_run_tape` (tensor/tape.py) call the op modes, the pair of saved-tensor hooks and
the listener, and name no feature that stands on them. Read from the code itself (its names, attributes and
strings; comments and docstrings may say who stands on a seam), so that a feature wired back into the core fails
here, naming the function and the word."""
import ast
import importlib
import inspect
import textwrap

import pytest

tape = importlib.import_module("minigrad.tensor.tape")
tensor = importlib.import_module("minigrad.tensor.tensor")

FUNCTIONS = {"apply": tensor.apply, "_run": tensor._run, "record": tape.record, "keep": tape.keep,
             "release": tape.release, "_run_tape": tape._run_tape}
FEATURES = ("checkpoint", "cache", "keep_saved", "saved_meta", "recomput", "autocast", "placeholder", "policy",
            "leaving", "learn")
WORDS = ("start",)  # features only as whole names: a checkpoint's `start` (the profiler's start_clock is the listener)
# Still there, each until [seams] puts it on a seam (none now: a checkpoint's recompute no longer stops _run_tape at
# the records made before the segment, NOTE [checkpoint sums]).
NOT_YET = set()


def _code_words(function):
    """The names, attribute names and string constants of a function's code, its docstring left out."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    body = tree.body[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    words = set()
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
        elif isinstance(node, ast.arg):
            words.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            words.update(node.value.lower().replace("'", " ").split())
    return words


def _features(words, whole=WORDS):
    return {f for f in FEATURES for w in words if f in w.lower()} | {f for f in whole if f in words}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_the_tape_calls_the_seams_and_names_no_feature(name):
    found = {(name, f) for f in _features(_code_words(FUNCTIONS[name]))}
    assert found <= NOT_YET, (f"{name} names {sorted(f for _, f in found - NOT_YET)}: a feature must stand on a seam "
                              f"(an op mode, a pair of saved-tensor hooks, the listener), not in the tape's code")
    gone = {k for k in NOT_YET if k[0] == name} - found
    assert not gone, f"{name} no longer names {sorted(f for _, f in gone)}: remove it from NOT_YET"


def test_keep_reads_only_the_hooks_and_the_listener():
    """What keep asks of the tape's switches: the innermost pair of saved-tensor hooks and the listener."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(tape.keep)))
    read = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "_on"}
    assert read == {"saved_hooks", "profiler"}


# The rest of the core, the Tensor's face included, asks the seams what it must know and names no feature either: every
# function and method of these files (tensor/modes.py, which declares the seams and the place each feature's mode takes
# in the stack, NOTE [op modes], is the one file of tensor/ left out). A mode says what the face must know of it
# (OpMode.casts_inputs: autocast; OpMode.replaying: a checkpoint's recompute), as a dispatch key does in PyTorch.
FACE = ("tensor", "tape", "methods", "args", "factories", "names", "promotion")
# Learner mode's registry (ops.LEARNED, NOTE [learner's pieces], ops/base.py) is a seam itself: the engine looks a
# learner's piece up in it where that piece would run.
FACE_ALLOWED = {("tensor", "Tensor.backward", "learn")}


def _functions(module):
    """{qualified name: function} of every function and method a module defines in its own source."""
    found = {}
    for name, value in vars(module).items():
        if inspect.isfunction(value) and value.__module__ == module.__name__:
            found[name] = value
        elif inspect.isclass(value) and value.__module__ == module.__name__:
            for attr, member in vars(value).items():
                member = getattr(member, "__func__", getattr(member, "fget", member))
                if inspect.isfunction(member):
                    found[f"{name}.{attr}"] = member
    return found


@pytest.mark.parametrize("file", FACE)
def test_the_tensors_face_asks_the_seams_and_names_no_feature(file):
    module = importlib.import_module(f"minigrad.tensor.{file}")
    found = {(file, name, f) for name, fn in _functions(module).items()
             for f in _features(_code_words(fn), whole=())}  # `start` is PyTorch's own argument name here (narrow)
    assert found <= FACE_ALLOWED, (f"minigrad/tensor/{file}.py names a feature: {sorted(found - FACE_ALLOWED)}; ask a "
                                   f"seam instead (an op mode's own answer, as OpMode.casts_inputs)")
    assert len(_functions(module)) > 3  # the check read the file's functions


def test_the_check_finds_a_feature_in_code_and_not_in_prose():
    def wired(record, inputs):
        """A checkpoint's cache is asked here."""  # prose: not counted
        if _on.cache is not None:  # noqa: F821
            raise RuntimeError("recorded inside a Checkpoint's forward")
        return record

    assert _features(_code_words(wired)) == {"cache", "checkpoint"}

    def plain(record):
        """keep_saved, checkpoint, autocast: only prose."""
        return record.saved

    assert _features(_code_words(plain)) == set()

    def stopping(op, start, profiler):
        clock = profiler.start_clock()  # the listener's clock: a seam, not the feature
        return op.seq <= start, clock

    assert _features(_code_words(stopping)) == {"start"}
    assert _features({"start_clock", "restart"}) == set()
