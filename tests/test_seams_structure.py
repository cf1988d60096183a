"""The seams kept honest (#40 [seams]): what no module of minigrad/ does behind another's back, checked on the source.

  private names    no name with a leading underscore is imported across packages (nn/ importing
                   `_on` from minigrad.tensor; learner.py, of the root package, reading `optim._reported`);
                   within one package it is fine (tensor/tensor.py importing `_on` from tensor/modes.py)
  module globals   no module assigns another module's attribute at any depth: tests/test_structure.py's
                   test_no_module_assigns_to_another_modules_attributes (its check is tried here on a made-up source)
  magic            no `sys.getrefcount`, no `__closure__` or `cell_contents`, no class attributes swapped from
                   outside the class (`setattr(obj, ...)` on an object a function was handed, `cls.attr = ` in a
                   base class's `__init_subclass__`, a helper named `_swap`); outside tensor/ and ops/, no data hung
                   on a tape's record (`loss.grad_fn.loss_items = `: a loss says its items explicitly)

Each check is a ratchet: the allowlists below name what main still does, each with its reason and the step of #40
that removes it. The test fails when a new case appears that is not listed, and when a listed one no longer exists,
so a list can only shrink: strike an entry in the commit that removes its case. The last tests run each check on a
small made-up source, to show it is not vacuous.
"""
import ast
import os

from test_structure import PACKAGE, exists, files_on_disk, module_assignments, package_of, packages_on_disk, path_of
from test_structure import section
from test_structure import resolve_import as _resolve, root_name as _root

# ----------------------------------------------------------------------------- the allowlists (the ratchets)

# (importing file, package imported from, name): why it is there today
PRIVATE_IMPORTS = {}  # none left: each use went through a public name of the package that owns the idea

# (file, what): why it is there today
MAGIC = {
    ("optim/optimizer", "cls.step = in __init_subclass__"):
        "every optimizer's step is wrapped so that mg.profile sees it, a new one's too "
        "(tests/test_profiler.py's Lion), as PyTorch's Optimizer wraps step (profile_hook_step); [seams] removes it "
        "when the ledger hears steps through a seam",
}


# ----------------------------------------------------------------------------- reading the source

def parse(name):
    path = path_of(name) if name != "__init__" else os.path.join(PACKAGE, "__init__.py")
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), filename=name)


def every_file():
    return files_on_disk() + packages_on_disk() + ["__init__"]


def _is_module(target, attr):
    """Is `attr` of minigrad's `target` a module (from .checkpoint import chains) rather than a name in it?"""
    return exists(f"{target}/{attr}" if target else attr)


def private_imports(tree, name):
    """{(file, package imported from, name)} of every private name this file takes from another package: by a
    `from ... import _name`, or as `module._name` of a minigrad module it imported."""
    found, modules = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(node, name)
            if target is None:
                continue
            for a in node.names:
                if _is_module(target, a.name):
                    modules[a.asname or a.name] = f"{target}/{a.name}" if target else a.name
                elif a.name.startswith("_") and not a.name.startswith("__") and \
                        package_of(target) != package_of(name):
                    found.add((name, target, a.name))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("minigrad.") and a.asname:
                    modules[a.asname] = "/".join(a.name.split(".")[1:])
    for node in ast.walk(tree):  # optim._reported: a private name read through a module of another package
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules and \
                node.attr.startswith("_") and not node.attr.startswith("__"):
            target = modules[node.value.id]
            if package_of(target) != package_of(name):
                found.add((name, target, node.attr))
    return found


def _functions(tree):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def magic(tree, name):
    """{(file, what)} of the tricks a reader cannot follow: reference counts, closure cells, and class attributes
    set from outside the class."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("getrefcount", "__closure__", "cell_contents"):
            found.add((name, f"{ast.unparse(node.value)}.{node.attr}" if node.attr == "getrefcount" else node.attr))
    if package_of(name) not in ("tensor", "ops"):  # the record is the tape's: no feature hangs its data on it
        for node in ast.walk(tree):
            for t in node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []:
                for sub in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                    if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute) and \
                            sub.value.attr in ("grad_fn", "_ctx"):
                        found.add((name, f"a record's .{sub.attr} set"))
    for func in _functions(tree):
        params = {a.arg for a in func.args.args + func.args.kwonlyargs + func.args.posonlyargs} - {"self"}
        if func.name in ("_swap", "swap"):
            found.add((name, f"def {func.name}"))
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr",
                                                                                                  "delattr") \
                    and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in params:
                # an object the function was handed, whose attribute it sets: a class (or a module) swapped
                found.add((name, f"{node.func.id}({node.args[0].id}, ...) in {func.name}"))
            if func.name == "__init_subclass__" and isinstance(node, (ast.Assign, ast.AugAssign)):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(t, ast.Attribute) and _root(t) == "cls":
                        found.add((name, f"{ast.unparse(t)} = in __init_subclass__"))
    return found


# ----------------------------------------------------------------------------- the checks

def _ratchet(found, allowed, what):
    new, gone = sorted(found - set(allowed)), sorted(set(allowed) - found)
    assert not new, (f"{what}, not in the allowlist: {new}. Go through a public name or a seam (#40 [seams]) "
                     f"instead; if it must stay for now, list it in tests/test_seams_structure.py with its reason")
    assert not gone, (f"{what}: these allowlisted cases no longer exist: {gone}. Strike them from the allowlist "
                      f"in tests/test_seams_structure.py, so that the list only shrinks")
    assert all("[seams]" in why for why in allowed.values()), "each allowlisted case says which step removes it"


def test_no_private_name_is_imported_across_packages():
    found = set().union(*(private_imports(parse(n), n) for n in every_file()))
    _ratchet(found, PRIVATE_IMPORTS, "private names imported across packages")


def test_no_reference_counts_closure_cells_or_swapped_class_attributes():
    found = set().union(*(magic(parse(n), n) for n in every_file()))
    _ratchet(found, MAGIC, "reference counts, closure cells or class attributes swapped")


# ----------------------------------------------------------------------------- the checks are not vacuous

def test_the_private_import_check_catches_each_form():
    source = ("from ..tensor import _placeholders, Tensor\nfrom .segment import _check_options\n"
              "from .. import optim\nfrom ..tensor import tape\nx = optim._reported\ny = tape._values\n"
              "from ..tensor.args import _shape\nfrom . import segment\nz = segment._wrap\n")
    found = private_imports(ast.parse(source), "checkpoint/chains")
    assert found == {("checkpoint/chains", "tensor", "_placeholders"), ("checkpoint/chains", "optim", "_reported"),
                     ("checkpoint/chains", "tensor/tape", "_values"), ("checkpoint/chains", "tensor/args", "_shape")}
    top = "from .tensor import _written_since\nfrom .accumulate import _half\nfrom . import optim\noptim._reported\n"
    assert private_imports(ast.parse(top), "learner") == {("learner", "tensor", "_written_since"),
                                                          ("learner", "optim", "_reported")}
    inside = "from .modes import _on\nfrom . import tape\ntape._values\n"
    assert private_imports(ast.parse(inside), "tensor/tensor") == set()


def test_the_module_assignment_check_catches_each_depth():
    source = ("from .. import backend\nfrom ..checkpoint import chains\nimport numpy as np\n"
              "from numpy import random\nfrom ..tensor import Tensor\n"
              "def f(x):\n    backend.pool._report = x\n    chains.checkpoint = x\n    np.seterr = x\n"
              "    setattr(backend.pool, '_report', x)\n    random.seed = x\n    del backend.xp\n"
              "    Tensor.shape = x\n    x.y = 1\n")
    found = {what for _, what in module_assignments(ast.parse(source), "tensor/modes")}
    assert found == {"backend.pool._report", "chains.checkpoint", "np.seterr", "setattr(backend.pool, ...)",
                     "random.seed", "backend.xp"}


def test_the_magic_check_catches_each_trick():
    source = ("import sys\nclass Base:\n    def __init_subclass__(cls, **kw):\n        cls.step = wrap(cls.step)\n"
              "def _swap(obj, attribute, value):\n    setattr(obj, attribute, value)\n"
              "def dig(f):\n    return f.__closure__[0].cell_contents\n"
              "def count(a):\n    return sys.getrefcount(a)\n"
              "def fine(self, name):\n    setattr(self, name, 1)\n    new = object()\n    setattr(new, name, 2)\n"
              "def note(loss):\n    loss.grad_fn.loss_items = 3\n")
    found = {what for _, what in magic(ast.parse(source), "functional")}
    assert found == {"cls.step = in __init_subclass__", "def _swap", "setattr(obj, ...) in _swap", "__closure__",
                     "cell_contents", "sys.getrefcount", "a record's .loss_items set"}
    assert "a record's .loss_items set" not in {what for _, what in magic(ast.parse(source), "tensor/tensor")}


# ----------------------------------------------------------------------------- the picture

# each feature's module, and the seam its docstring names (README's "Where each idea lives" draws them)
FEATURE_SEAMS = {
    "amp/autocast_mode": "op mode",
    "profiler": "op mode",
    "checkpoint/segment": "op mode",
    "checkpoint/policies": "op mode",
    "autograd/graph": "saved_tensors_hooks",
    "learner": "LEARNED",
}


def test_each_features_module_says_which_seam_it_uses():
    for name, seam in FEATURE_SEAMS.items():
        doc = " ".join((ast.get_docstring(parse(name)) or "").split())
        assert "seam" in doc and seam in doc, f"minigrad/{name}'s docstring should say which seam it uses ({seam})"
    picture = section("Where each idea lives").split("### The reading path")[0]
    for word in ("apply", "keep", "_run_tape", "release", "pack", "unpack", "Listener", "watching_reads", "LEARNED"):
        assert word in picture, f"the README's picture of the seams does not show {word}"
