"""The exercises teach the idea and the contract, not the code: of the reference's code lines that the learner
must write (those not already code in the learner's stub), under 10% stand verbatim in the stub's docstrings,
comments or strings (its messages). Whitespace is ignored on both sides, so `g*(1-y*y)` in a docstring matches
`g * (1 - y * y)` in the reference.

Also, in the same spirit: the stubs' NotImplementedError messages say what is missing, not how (short, and no code
of the reference), and every exercise has three tiers of hints and an "explain" question the grader checks.

    python tests/test_exercises_give_nothing_away.py     # the table: per exercise, the share and the lines that match
"""
import ast
import io
import os
import re
import sys
import tokenize

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from minigrad import grading  # noqa: E402

EXERCISES = grading.exercises()
LIMIT = 0.10


def _squash(text):
    return re.sub(r"\s+", "", text)


def _code_lines(source):
    """The file's code, one (squashed line, its sub-expressions) per physical line, comments and docstrings left
    out, and lines that are only brackets or punctuation."""
    tree = ast.parse(source)
    docstring_lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                docstring_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines = source.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):  # blank out the comments
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col]
    out = []
    for i, line in enumerate(lines, 1):
        if i in docstring_lines:
            continue
        squashed = _squash(line)
        if re.search(r"\w", squashed):
            out.append((squashed, _parts(line.strip())))
    return out


def _parts(line):
    """The sub-expressions of one line of code that say something on their own: those with two operations or more
    (`1 - y * y`), and calls with keyword arguments (`x.max(axis=dim, keepdims=True)`). A line that does not parse
    alone (the head of a block, the middle of a long expression) is tried as a block head; else it has none."""
    for attempt in (line, line + "\n    pass", line.removeprefix("elif ").removeprefix("else") + "\n    pass"):
        try:
            tree = ast.parse(attempt)
            break
        except SyntaxError:
            continue
    else:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.expr):
            continue
        ops = sum(isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Call)) for n in ast.walk(node))
        if ops >= 2 or (isinstance(node, ast.Call) and node.keywords):
            found.append(_squash(ast.unparse(node)))
    return found


def _prose(source):
    """Everything in the file that is not code: docstrings, comments and every string literal (the messages), each
    with its whitespace removed."""
    parts = [node.value for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    parts += [tok.string.lstrip("#") for tok in tokenize.generate_tokens(io.StringIO(source).readline)
              if tok.type == tokenize.COMMENT]
    return [_squash(p) for p in parts]


def verbatim(exercise):
    """(the reference's lines the learner must write, those of them found in the stub's prose). A line is found
    when it stands there whole (less a leading `return` and a 1-tuple's brackets), or any of its sub-expressions
    with two operations or more, or a call with keyword arguments, does."""
    stub = open(exercise.path, encoding="utf-8").read()
    reference = open(exercise.solution, encoding="utf-8").read()
    given = {line for line, _ in _code_lines(stub)}
    to_write = [(line, parts) for line, parts in _code_lines(reference) if line not in given]
    prose = _prose(stub)
    found = [line for line, parts in to_write if any(c in p for c in {line, _core(line)} | set(parts) for p in prose)]
    return [line for line, _ in to_write], found


def _core(line):
    """A line as it may stand in prose: without a leading return and the brackets and comma of a 1-tuple, so that
    `return (g / x,)` is found in "the gradient is g / x"."""
    core = re.sub(r"^(return|yield)(?=[\W_]|$)", "", line)
    while len(core) > 2 and core[0] == "(" and core.endswith(",)"):
        core = core[1:-2]
    while len(core) > 2 and core[0] == "(" and core[-1] == ")" and _balanced(core[1:-1]):
        core = core[1:-1]
    return core if re.search(r"\W", core) else line  # a bare name (`return y`) is everywhere in prose: whole lines only


def _balanced(text):
    depth = 0
    for c in text:
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.name for e in EXERCISES])
def test_the_stub_does_not_hold_the_reference(exercise):
    to_write, found = verbatim(exercise)
    assert to_write, "the learner has nothing to write?"
    share = len(found) / len(to_write)
    assert share < LIMIT, (f"{exercise.name}: {len(found)} of the reference's {len(to_write)} lines to write stand "
                           f"verbatim in the stub's docstring, comments or messages ({share:.0%}): {found}")


def test_the_measure_sees_a_line_given_away(tmp_path):
    """The measure itself can fail: a stub whose message holds a line of the reference counts it."""
    stub, ref = tmp_path / "stub.py", tmp_path / "ref.py"
    ref.write_text("def f(g, y):\n    # comment\n    return (g * (1 - y * y),)\n")
    stub.write_text('"""Exercise."""\n\ndef f(g, y):\n    raise NotImplementedError("do return (g*(1 - y*y),)")\n')
    ex = grading.Exercise(0, "x", "x", str(stub), str(ref), None)
    assert verbatim(ex) == (["return(g*(1-y*y),)"], ["return(g*(1-y*y),)"])
    stub.write_text('"""Exercise: the derivative of tanh, from what forward saved."""\n\ndef f(g, y):\n'
                    '    raise NotImplementedError("Exercise 0 (f): not written yet")\n')
    assert verbatim(ex) == (["return(g*(1-y*y),)"], [])


def _table():
    rows = []
    for e in EXERCISES:
        to_write, found = verbatim(e)
        rows.append((e.number, len(found), len(to_write), found))
    return rows


if __name__ == "__main__":
    for number, found, total, lines in _table():
        print(f"{number:>3}  {found:>3} of {total:>3}  {found / total:>4.0%}  {'; '.join(lines)[:150]}")
