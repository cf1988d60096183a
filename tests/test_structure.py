"""The promises the docs make about the code's structure, each checked against the source.

  reading order   the README's table lists every module of minigrad/, and each imports only the
                  modules above it: no cycle, and no import of a minigrad module inside a function
  one choke point an op's `saved` is set only by Op.save_for_backward and the tape's keep/release;
                  inside keep_saved(False) every record keeps nothing
  tape state      no module assigns to another module's attributes; the tape's switches change only
                  through their context managers, and each has a public query
"""
import ast
import os
import re

import pytest

import minigrad as mg
from minigrad import nn
from minigrad.tensor import (active_profiler, is_grad_enabled, is_keeping_saved, is_recomputing, keep_saved,
                             records_since, recomputing)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "minigrad")


def readme_order():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = text.split("## Where each idea lives", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `minigrad/(\w+)\.py` \|", section, re.M)


def modules_on_disk():
    return sorted(f[:-3] for f in os.listdir(PACKAGE) if f.endswith(".py") and f != "__init__.py")


def parse(name):
    with open(os.path.join(PACKAGE, name + ".py"), encoding="utf-8") as f:
        return ast.parse(f.read(), filename=name + ".py")


def package_imports(tree, name):
    """[(module imported, ast node)] for every import of a minigrad module in this module's tree."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:           # from .tensor import Tensor
                found.append((node.module.split(".")[0], node))
            elif node.level == 1:                         # from . import backend, ops
                found.extend((a.name, node) for a in node.names)
            elif node.module and node.module.split(".")[0] == "minigrad":
                parts = node.module.split(".")
                found.extend([(parts[1], node)] if len(parts) > 1 else [(a.name, node) for a in node.names])
        elif isinstance(node, ast.Import):
            found.extend((a.name.split(".")[1], node) for a in node.names
                         if a.name.startswith("minigrad.") and a.name.count(".") >= 1)
    return found


def test_readme_table_lists_every_module_once():
    order = readme_order()
    assert len(order) == len(set(order)), order
    assert sorted(order) == modules_on_disk()


def test_package_docstring_gives_the_same_order():
    listed = re.findall(r"(\w+)\.py", mg.__doc__)
    listed = [m for m in listed if m != "exercises"]
    assert listed == readme_order()


@pytest.mark.parametrize("name", modules_on_disk())
def test_each_module_imports_only_the_ones_above_it(name):
    order = readme_order()
    above = set(order[:order.index(name)])
    wrong = sorted({m for m, _ in package_imports(parse(name), name) if m not in above})
    assert not wrong, (f"minigrad/{name}.py imports {wrong}, which the README lists below it (or not at all); "
                       f"move the code, or reorder the table if the new order reads better")


@pytest.mark.parametrize("name", modules_on_disk())
def test_no_late_imports_of_the_package(name):
    tree = parse(name)
    top = {id(n) for n in tree.body}
    late = [(m, node.lineno) for m, node in package_imports(tree, name) if id(node) not in top]
    assert not late, f"minigrad/{name}.py imports minigrad modules inside a function or block: {late}"


def test_the_import_walk_catches_a_cycle():
    """The walk above is not vacuous: a module importing one below it fails the check."""
    tree = ast.parse("from .checkpoint import checkpoint\nfrom . import backend\n")
    order = readme_order()
    above = set(order[:order.index("tensor")])
    assert {m for m, _ in package_imports(tree, "tensor")} - above == {"checkpoint"}


# ----------------------------------------------------------------------------- one choke point

def assignments_to(attr):
    """[(module, enclosing function)] of every `<something>.<attr> = ...` in the package."""
    found = []
    for name in modules_on_disk():
        tree = parse(name)
        for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            for node in ast.walk(func):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
                for t in targets:
                    for sub in ast.walk(t):
                        if isinstance(sub, ast.Attribute) and sub.attr == attr:
                            found.append((name, func.name))
    return sorted(set(found))


def test_only_the_choke_point_sets_what_a_record_keeps():
    assert assignments_to("saved") == [("ops", "save_for_backward"), ("tensor", "hand_over"), ("tensor", "keep"),
                                       ("tensor", "release")]


def test_a_record_made_under_keep_saved_false_keeps_nothing():
    w = mg.randn(4, 4, requires_grad=True)
    x = mg.randn(3, 4)
    with keep_saved(False):
        assert not is_keeping_saved()
        y = (x @ w).tanh().exp().sum()
    assert is_keeping_saved()
    records = records_since(y)
    assert {r.name for r in records} == {"matmul", "tanh", "exp", "sum"}
    assert all(r.saved == () for r in records)
    z = (x @ w).tanh().exp().sum()  # the same ops outside keep what their backward reads
    assert any(len(r.saved) for r in records_since(z))


def test_checkpoint_record_is_made_by_apply_and_keeps_only_its_inputs():
    lin = nn.Linear(4, 4)
    x = mg.randn(3, 4, requires_grad=True)
    with mg.profile() as prof:
        y = mg.checkpoint(lambda t: lin(t.tanh()), x)  # ends on a Linear, which reads only its input
    rec = y.grad_fn
    assert rec.name == "checkpoint" and rec.seq > 0
    assert rec.next[0] is x and {id(n) for n in rec.next[1:]} == {id(lin.weight), id(lin.bias)}
    assert len(rec.saved) == 1 and rec.saved[0] is x.data
    assert prof.calls("forward", "checkpoint") == 1
    assert prof.activations_kept([rec]) == {prof.buffer_id(x.data): x.data.nbytes}


# ----------------------------------------------------------------------------- tape state in plain sight

def test_no_module_assigns_to_another_modules_attributes():
    offenders = []
    for name in modules_on_disk():
        tree = parse(name)
        aliases = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1
                   and not n.module for a in n.names}
        aliases |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AugAssign) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in aliases:
                    offenders.append(f"{name}.py:{node.lineno} sets {t.value.id}.{t.attr}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                    and isinstance(node.args[0], ast.Name) and node.args[0].id in aliases:
                offenders.append(f"{name}.py:{node.lineno} setattr on module {node.args[0].id}")
    assert not offenders, offenders


def test_switches_are_context_managers_with_queries_and_restore_on_error():
    assert is_grad_enabled() and is_keeping_saved() and not is_recomputing() and active_profiler() is None
    with pytest.raises(ZeroDivisionError):
        with mg.no_grad(), keep_saved(False), recomputing():
            assert not is_grad_enabled() and not is_keeping_saved() and is_recomputing()
            1 / 0
    assert is_grad_enabled() and is_keeping_saved() and not is_recomputing()
    with mg.profile() as prof:
        assert active_profiler() is prof and prof.phase == "forward"
        with recomputing():
            assert prof.phase == "recompute"
    assert active_profiler() is None


def test_no_grad_as_a_decorator_nests_in_itself():
    guard = mg.no_grad()

    @guard
    def inner(depth):
        assert not is_grad_enabled()
        return inner(depth - 1) if depth else (mg.randn(2, requires_grad=True) * 2).requires_grad

    assert inner(3) is False and is_grad_enabled()
    with mg.no_grad():
        with mg.enable_grad():
            assert is_grad_enabled()
        assert not is_grad_enabled()
    assert is_grad_enabled()


# ----------------------------------------------------------------------------- the tape's reports in one place

def test_the_listener_declares_every_report_the_code_makes():
    """NOTE [what the tape reports] (tensor.py): each report called on a profiler anywhere in minigrad/ is a method
    of tensor.Listener, each Listener method is called somewhere, and mg.profile overrides every one."""
    from minigrad.tensor import Listener
    called = set()
    for root, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                text = open(os.path.join(root, f), encoding="utf-8").read()
                called |= set(re.findall(r"\bprofiler\.(on_\w+|start_clock|stop_clock)\(", text))
    declared = {n for n in vars(Listener) if not n.startswith("_")}
    assert called == declared, (called - declared, declared - called)
    assert all(getattr(mg.profile, n) is not getattr(Listener, n) for n in declared)
    assert issubclass(mg.profile, Listener)
