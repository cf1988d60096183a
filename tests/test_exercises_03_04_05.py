"""Exercises 3, 4 and 5 can fail: plausible wrong answers (the reference with one mistake) are graded
'failing', with a message that names the mistake's consequence and what to do."""
import re
import shutil

import pytest

from minigrad import grading


@pytest.fixture
def course(tmp_path):
    """A copy of the course, to break on purpose."""
    shutil.copytree(grading.COURSE, tmp_path / "exercises")
    return str(tmp_path / "exercises")


def grade_wrong(course, number, *edits):
    """Write the reference with each (old, new) edit made as the learner's file, and grade it."""
    exercise = next(e for e in grading.exercises(course) if e.number == number)
    text = open(exercise.solution).read()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    with open(exercise.path, "w") as f:
        f.write(text)
    return grading.grade(exercise)


MATMUL_RETURN = "    return unbroadcast(ga, a.shape), unbroadcast(gb, b.shape)"


@pytest.mark.parametrize("old,new,message", [
    (MATMUL_RETURN, "    return ga, gb",  # forgot to sum the broadcast batch dims
     r"ga \(broadcast batch dims: .*\) has shape \(2, 5, 3, 4\).*input is \(2, 1, 3, 4\): sum the gradient over the "
     r"batch dims that were broadcast"),
    ("g @ b.swapaxes(-1, -2)", "g @ b.T",  # .T reverses every dim of a stack
     r"matmul_backward \(3-d, the same batch: .*\) raised ValueError at line \d+: .*\.T reverses every dim"),
    ("    gb = a.swapaxes(-1, -2) @ g", "    gb = g.swapaxes(-1, -2) @ a",  # the product in the wrong order
     r"gb: \d+ of 20 elements differ; at index .* expected .* got .*\(2-d: a \(3, 4\) @ b \(4, 5\)"),
    (MATMUL_RETURN, "    return unbroadcast(ga, a.shape), unbroadcast(gb, b.shape).astype('float64')",
     r"gb is float64 for float32 inputs: a gradient has its input's dtype"),
], ids=["no-unbroadcast", "dot-T", "wrong-order", "float64"])
def test_matmul_backward_wrong_answers(course, old, new, message):
    result = grade_wrong(course, 3, (old, new))
    assert result.status == "failing" and re.search(message, result.message), result.message


COLLECT = """    records, seen, stack = [], set(), [root.grad_fn]
    while stack:
        record = stack.pop()
        if record in seen:
            continue
        seen.add(record)
        records.append(record)
        stack.extend(n for n in record.next if isinstance(n, Op))
    # 2. newest first: a record runs after every record that used its output
    records.sort(key=lambda r: r.seq, reverse=True)"""
RECURSIVE = """    records, seen = [], set()

    def visit(record):  # micrograd's build_topo: one nested call per record
        if record not in seen:
            seen.add(record)
            for n in record.next:
                if isinstance(n, Op):
                    visit(n)
            records.append(record)
    visit(root.grad_fn)
    records.reverse()"""
SUM_AT_RECORD = "                grads[nxt] = grads[nxt] + gi if nxt in grads else gi"


@pytest.mark.parametrize("old,new,message", [
    (COLLECT, RECURSIVE, r"a chain of 20,000 ops, .*: RecursionError\. Your backward calls itself once per record.*"
                         r"explicit stack"),
    (SUM_AT_RECORD, "                grads[nxt] = gi",  # the second gradient replaces the first
     r"x\.grad: \d+ of 12 elements differ.*\(a diamond, .*sum them, and run h only after both\)"),
    ("    records.sort(key=lambda r: r.seq, reverse=True)", "",  # the order of discovery is not topological
     r"x\.grad: \d+ of 12 elements differ.*\(a diamond"),
    (SUM_AT_RECORD, "                if nxt in grads:\n                    grads[nxt] += gi\n"
                    "                else:\n                    grads[nxt] = gi",  # in place, into an array Add shared
     r"y\.grad: .* elements differ.*one array handed to two inputs"),
    ("total = gi if nxt.grad is None else nxt.grad.data + gi", "total = gi",  # a leaf's .grad replaced, not added to
     r"x\.grad: 12 of 12 elements differ.*\(x used 3 times"),
    ("mg.tensor(total, dtype=nxt.dtype)", "mg.tensor(total.tolist())",  # Python floats: float32
     r"x used 3 times, .*: x\.grad is float32, but x is float64: a gradient has its leaf's dtype"),
    ("    # 1. the records", "    root.backward()\n    return\n    # 1. the records",  # the engine's walk
     r"your backward ran minigrad's own walk \(\d+ records ran through the engine's tape"),
    ("                total = gi if nxt.grad is None else nxt.grad.data + gi\n"
     "                nxt.grad = mg.tensor(total, dtype=nxt.dtype)  # a copy, in the leaf's dtype",
     "                from minigrad.tensor import wrap\n"
     "                if nxt.grad is None:\n                    nxt.grad = wrap(gi)\n"
     "                else:\n                    nxt.grad._data += gi",  # the array Add handed on, kept as .grad
     r"two leaves fed by one add.*x\.grad and y\.grad share one array"),
], ids=["recursion", "overwrite", "no-sort", "in-place", "leaf-overwrite", "leaf-float32", "engine", "leaf-shares"])
def test_the_tape_wrong_answers(course, old, new, message):
    result = grade_wrong(course, 4, (old, new))
    assert result.status == "failing" and re.search(message, result.message, re.S), result.message


def test_a_walk_that_grows_with_the_square_is_stopped_before_the_long_chain(course):
    result = grade_wrong(course, 4, ("records, seen, stack = [], set(), [root.grad_fn]",
                                     "records, seen, stack = [], [], [root.grad_fn]"),  # `in` a list: a scan per record
                         ("seen.add(record)", "seen.append(record)"))
    assert result.status == "failing" and re.search(r"took [\d.]+ s on a chain of 20,000 ops, minigrad's own [\d.]+ s: "
                                                    r".*a set or a dict", result.message, re.S), result.message


SAVE = "        y = e / e.sum(axis=dim, keepdims=True)\n        self.save_for_backward(y)"
READ = "        (y,) = self.saved\n        return (y * (g"


@pytest.mark.parametrize("edits,message", [
    ([(SAVE, SAVE.replace("(y)", "(y, x)")), (READ, READ.replace("(y,) = self.saved", "y = self.saved[0]"))],
     r"Softmax kept 65536 bytes for its backward \(the output y, 32768 bytes; the input x, 32768 bytes\) against "
     r"32768 bytes for the output alone"),
    ([(SAVE, SAVE.replace("(y)", "(x)")),
      (READ, "        (x,) = self.saved\n        e = np.exp(x - x.max(axis=self.dim, keepdims=True))\n"
             "        y = e / e.sum(axis=self.dim, keepdims=True)\n        return (y * (g")],
     r"Softmax kept 32768 bytes for its backward \(the input x, 32768 bytes\) against 32768 bytes for the output"),
    ([(SAVE, SAVE.replace("(y)", "(y.copy())"))], r"not the output's own buffer, 32768 bytes.*save y itself"),
    ([(SAVE, SAVE.replace("self.save_for_backward(y)", "self.y = y")), (READ, READ.replace("(y,) = self.saved",
                                                                                           "y = self.y"))],
     r"Softmax keeps self\.y \(32768 bytes\) outside save_for_backward"),
    ([("np.exp(x - x.max(axis=dim, keepdims=True))", "np.exp(x)")],
     r"Softmax\.forward of x near \+1000: got nan .*Subtract the max along dim"),
    ([("return (y * (g - (g * y).sum(axis=self.dim, keepdims=True)),)", "return (y * g,)")],
     r"gradcheck\(Softmax\.backward \(x of shape \(3, 5\), dim=-1\)\): wrong gradient .* expected d loss / d x"),
    ([("g - np.exp(y) * g.sum", "g - y * g.sum")], r"gradcheck\(LogSoftmax\.backward .*wrong gradient"),
], ids=["keeps-x-too", "keeps-x-instead", "keeps-a-copy", "attribute", "unstable", "softmax-no-sum",
        "log-softmax-y"])
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_softmax_wrong_answers(course, edits, message):
    result = grade_wrong(course, 5, *edits)
    assert result.status == "failing" and re.search(message, result.message, re.S), result.message


def test_log_softmax_as_the_log_of_softmax_underflows_and_is_explained(course):
    """Found by a new-user trial: log(softmax(x)) passed every other check, and is -inf for confident logits."""
    result = grade_wrong(course, 5, ("        y = z - np.log(np.exp(z).sum(axis=dim, keepdims=True))",
                                      "        y = np.log(np.exp(z) / np.exp(z).sum(axis=dim, keepdims=True))"))
    assert result.status == "failing" and "log(softmax(x)) underflows" in result.message, result.message
