"""The README's reading path, counted as a reader reads it: its files and names, and every engine function they call.

    python tests/reading_path.py          the walk's count, per file and per function (sorted), and what it skipped
    python tests/reading_path.py --all    the same, every function and skipped call listed

tests/test_structure.py keeps the counts (a ratchet and the promise of under 1,300 lines). The walk reads the sources
with `ast` and imports nothing of minigrad's, so it runs without NumPy.

NOTE [the walk]: what a reader reads, and so what the walk counts. Its roots are the README's reading path itself
(`reading_path()` parses the table, so the README and the walk cannot drift): a file named whole is read whole, a
class named is read whole (every method of it), a function named is read. From each thing read, the walk follows:

  a call, or a mention (a callback, a table entry), of a function or method of the package: its def, decorators
      and docstring, nested functions, and the comment block right above it (a NOTE is read with its def), once;
  a class constructed (`ShapeError(...)`, `_Switches()`, `with no_grad():`): its head (the class line, docstring,
      class attributes), its `__init__` and `__new__` from its own bases up, and `__enter__`/`__exit__` in a `with`;
      a method reached brings its class's head, a head its bases' heads. A class only named (isinstance, an op class
      handed to `apply`) is not read: `apply` runs it through `op.forward`, a call the walk cannot follow (below);
  a module-level name a function reads (`_on`, `DTYPES`, a table): its statement and comment block, and what
      that statement calls.

Names are resolved as Python would: a function's locals, then its module's globals (defs, module-level assignments,
imports through `from x import y`, a package's __init__ re-exports, `import x as y`), then the builtins; `mod.f`
through the module bound to `mod`; `self.f` and `cls.f` on the class and its bases, in order, then (for a mixin
whose method reaches into the class that inherits it, as methods.py's into the Tensor) in the one subclass that
defines it; `super().f` on the bases; `X.f` on class X; `self` and a local or module name assigned once from a
class's construction (`_on = _Switches()`, `t = Tensor.__new__(Tensor)`) as an instance of that class; an operator
on `self` (`self * x`, `self[k]`) as the dunder method it calls.

The walk skips, and counts in its report, the calls it cannot resolve without running the code: a method of a value
whose type it does not know (`op.forward(...)`, `_on.profiler.on_save(...)`, most of them an array's methods), a
parameter or local called (`op_cls()`, `run(...)`), an attribute that no class on the way defines. Calls into
NumPy, the standard library and the builtins are not minigrad's and are not read. Lines are counted with their
docstrings, comments and blank lines inside a def, as the file count counts them: a reader reads them all; a line
reached twice counts once.
"""
import ast
import builtins
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "minigrad")
ALIAS_WRAPPERS = {"staticmethod", "classmethod", "property"}


# ----------------------------------------------------------------------------- the README's reading path

def section(title):
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def reading_path():
    """[(file, [names] or None for the whole file)] of the README's reading path, in order."""
    rows = re.findall(r"^\| \d+ \| `minigrad/([\w/]+)\.py`(?:: ([^|]+))? \|", section("Where each idea lives"), re.M)
    return [(f, re.findall(r"`(\w+)`", names) or None) for f, names in rows]


def package_sources(directory=PACKAGE):
    """{'tensor/tape.py': its text, ...}: every .py file of a package, by its path inside it."""
    found = {}
    for root, _, files in os.walk(directory):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(root, f)
                with open(path, encoding="utf-8") as fh:
                    found[os.path.relpath(path, directory).replace(os.sep, "/")] = fh.read()
    return found


# ----------------------------------------------------------------------------- the package, parsed

class Module:
    """One file: its tree, its lines, and what each of its top-level names is bound to."""

    def __init__(self, filename, text):
        self.file = filename
        self.is_package = filename == "__init__.py" or filename.endswith("/__init__.py")
        self.name = filename[:-3].rsplit("__init__", 1)[0].rstrip("/") if self.is_package else filename[:-3]
        self.lines = text.splitlines()
        self.tree = ast.parse(text, filename=filename)
        self.symbols = {}  # name -> ("def", node) | ("assign", node) | ("import", level, module, attr) | ("extern",)
        for node in _top_statements(self.tree.body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.symbols[node.name] = ("def", node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name) and n.id not in self.symbols:
                            self.symbols[n.id] = ("assign", node)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    self.symbols[a.asname or a.name.split(".")[0]] = ("import", 0, a.name if a.asname else
                                                                      a.name.split(".")[0], None)
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    self.symbols[a.asname or a.name] = ("import", node.level, node.module, a.name)

    def package_parts(self):
        parts = self.name.split("/") if self.name else []
        return parts if self.is_package else parts[:-1]


def _top_statements(body):
    """A module's statements, those inside its top-level if and try blocks too (try: import cupy ...)."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _top_statements(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_statements(node.body + node.orelse + node.finalbody +
                                       [s for h in node.handlers for s in h.body])
        else:
            yield node


def span(module, node):
    """(first, last) line of a def, class or statement as a reader reads it: from its decorators, or the comment
    block right above it (no blank line between), to its end."""
    first = node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno
    while first > 1 and module.lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return first, node.end_lineno


def _docstring_end(node):
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0].end_lineno
    return body[0].lineno - 1 if body else node.end_lineno


def _literal(node):
    """A list, dict, set, tuple, string or number written out (or comprehended): its methods are Python's."""
    return isinstance(node, (ast.List, ast.Dict, ast.Set, ast.Tuple, ast.Constant, ast.JoinedStr, ast.ListComp,
                             ast.DictComp, ast.SetComp))


def _is_def(node):
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))


def _alias_value(node):
    """`x = f`, `x = staticmethod(f)`: the expression x stands for, or None where the statement is no alias."""
    if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        return None
    value = node.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ALIAS_WRAPPERS \
            and len(value.args) == 1:
        value = value.args[0]
    return value if isinstance(value, (ast.Name, ast.Attribute)) else None


# ----------------------------------------------------------------------------- what a name stands for

# targets: ("module", mod) | ("def", mod, node, cls or None) a function or method | ("class", mod, node)
#          | ("instance", mod, classnode) | ("assign", mod, node) a module-level value | ("extern",) not minigrad's
#          | ("local", why) | ("unknown", why)

class Walk:
    """The walk from `roots` over the package's `sources` ({'tensor/tape.py': text}); NOTE [the walk] above."""

    def __init__(self, sources, roots, top="minigrad"):
        self.modules = {}
        for filename, text in sources.items():
            m = Module(filename, text)
            self.modules[m.name] = m
        self.top = top
        self.owner = {}  # id(def node) -> (module, class node or None)
        self.classes = []  # (module, class node)
        for m in self.modules.values():
            for node in _top_statements(m.tree.body):
                self._index(m, node, None)
        self.lines = collections.defaultdict(set)  # file -> the line numbers read
        self.units = {}  # (kind, file, name) -> the lines that thing brought that were not read yet
        self.skipped = collections.Counter()  # (why, the call as written) -> how many call sites
        self.outside = 0  # calls into NumPy, the standard library, the builtins
        self.via = {}  # (kind, file, name) -> what reached it first ("file: name"; None for a root)
        self.skipped_in = collections.defaultdict(set)  # the call as written -> where
        self._queue, self._where = [], None
        self._mro = {}
        for module_name, names in roots:
            self._root(module_name, names)
        while self._queue:
            self._read(*self._queue.pop())

    def _index(self, m, node, cls):
        if isinstance(node, ast.ClassDef):
            self.classes.append((m, node))
            for sub in node.body:
                self._index(m, sub, node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.owner[id(node)] = (m, cls)

    # --- the count
    @property
    def total(self):
        return sum(len(v) for v in self.lines.values())

    def per_file(self):
        """[(file, lines)], most first."""
        return sorted(((f, len(v)) for f, v in self.lines.items()), key=lambda x: (-x[1], x[0]))

    def per_unit(self):
        """[(file, what, lines it brought, what reached it first)], most first: each function, method, class head,
        module-level statement or file read, with the lines it brought that nothing before it had."""
        return sorted(((f, what, n, self.via[(kind, f, what)]) for (kind, f, what), n in self.units.items()),
                      key=lambda x: (-x[2], x[0], x[1]))

    # --- reaching things
    def _reach(self, kind, m, node, what, first_last=None):
        """Read `node` of module m: count its lines (once) and walk what it calls."""
        key = (kind, m.file, what)
        if key in self.units:
            return
        first, last = first_last or span(m, node)
        lines = set(range(first, last + 1))
        self.units[key] = len(lines - self.lines[m.file])
        self.via[key] = self._where
        self.lines[m.file] |= lines
        self._queue.append((m, node, kind, what))

    def _root(self, module_name, names):
        m = self.modules[module_name]
        if names is None:
            self._reach("file", m, m.tree, "(the whole file)", (1, len(m.lines)))
            return
        for name in names:
            binding = m.symbols.get(name)
            if binding is None or binding[0] != "def":
                raise LookupError(f"the reading path names {name} in {m.file}, which has no such class or function")
            node = binding[1]
            if isinstance(node, ast.ClassDef):
                self._reach("class", m, node, f"{node.name} (the whole class)")
            else:
                self.reach_def(m, node, None)

    def reach_def(self, m, node, cls):
        if cls is not None:
            self.reach_head(m, cls)
        self._reach("def", m, node, f"{cls.name}.{node.name}" if cls is not None else node.name)

    def reach_head(self, m, cls):
        head = set(range(span(m, cls)[0], _docstring_end(cls) + 1))
        for stmt in cls.body:
            if not _is_def(stmt):
                first, last = span(m, stmt)
                head |= set(range(first, last + 1))
        key = ("head", m.file, f"{cls.name} (class head)")
        if key in self.units:
            return
        self.units[key] = len(head - self.lines[m.file])
        self.via[key] = self._where
        self.lines[m.file] |= head
        self._queue.append((m, cls, "head", key[2]))

    def reach_construction(self, m, cls, with_block=False):
        self.reach_head(m, cls)
        for dunder in ("__new__", "__init__") + (("__enter__", "__exit__") if with_block else ()):
            found = self.member(m, cls, dunder)
            if found[0] == "def":
                self.reach_def(*found[1:])

    def reach_target(self, target):
        kind = target[0]
        if kind == "def":
            self.reach_def(*target[1:])
        elif kind == "assign":
            m, node = target[1:]
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            self._reach("const", m, node, ", ".join(names) + " (module-level)")
        elif kind == "instance" and len(target) > 3:  # a module-level instance (_on = _Switches()): its line
            self.reach_target(target[3])

    # --- reading one thing
    def _read(self, m, node, kind, what):
        self._where = f"{m.file}: {what}"
        if kind == "file":
            for stmt in m.tree.body:
                self._read_module_statement(m, stmt)
        elif kind == "class":
            self.reach_head(m, node)
            for stmt in node.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.reach_def(m, stmt, node)
                elif isinstance(stmt, ast.ClassDef):
                    self._reach("class", m, stmt, f"{node.name}.{stmt.name} (the whole class)")
        elif kind == "head":
            for base in node.bases:
                target = self.resolve(base, Scope(self, m, None, None))
                if target[0] == "class":
                    self.reach_head(target[1], target[2])
            scope = Scope(self, m, None, None)
            for expr in node.decorator_list + node.keywords:
                self.visit(expr, scope)
            for stmt in node.body:
                if not _is_def(stmt) and _alias_value(stmt) is None:  # an alias is read when it is used
                    self.visit(stmt, Scope(self, m, None, None, in_class=node))
        elif kind == "const":
            value = node.value if not isinstance(node, ast.AugAssign) else node.value
            if value is not None:
                self.visit(value, Scope(self, m, None, None))
        elif kind == "def":
            self.visit(node, Scope(self, m, node, self.owner.get(id(node), (m, None))[1]))

    def _read_module_statement(self, m, stmt):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.reach_def(m, stmt, None)
        elif isinstance(stmt, ast.ClassDef):
            self._reach("class", m, stmt, f"{stmt.name} (the whole class)")
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            pass
        elif isinstance(stmt, (ast.If, ast.Try)):
            for sub in _top_statements([stmt]):
                self._read_module_statement(m, sub)
        else:
            self.visit(stmt, Scope(self, m, None, None))

    def visit(self, node, scope):
        """Follow every call and mention in `node` (NOTE [the walk])."""
        for n in ast.walk(node):
            if isinstance(n, ast.Call):
                self._call(n, scope)
            elif isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load):
                target = self.resolve(n, scope)
                if target[0] in ("def", "assign", "instance"):
                    self.reach_target(target)
            elif isinstance(n, (ast.With, ast.AsyncWith)):
                for item in n.items:
                    target = self.resolve(item.context_expr, scope)
                    if target[0] == "instance":
                        self.reach_construction(target[1], target[2], with_block=True)
            elif isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Subscript)):
                self._operator(n, scope)

    def _call(self, call, scope):
        target = self.resolve(call.func, scope)
        kind = target[0]
        if kind == "class":
            self.reach_construction(target[1], target[2])
        elif kind in ("def", "assign"):
            pass  # read as the mention it is (visit)
        elif kind == "extern":
            self.outside += 1
        elif kind in ("local", "unknown"):
            self.skipped[(target[1], ast.unparse(call.func))] += 1
            self.skipped_in[ast.unparse(call.func)].add(self._where)
        elif kind == "instance":
            found = self.member(target[1], target[2], "__call__")
            if found[0] == "def":
                self.reach_def(*found[1:])
            else:
                self.outside += 1

    def _operator(self, n, scope):
        name = None
        if isinstance(n, ast.BinOp):
            operand, name = n.left, f"__{type(n.op).__name__.lower()}__"
            name = {"__mult__": "__mul__", "__div__": "__truediv__", "__matmult__": "__matmul__", "__bitand__": "__and__",
                    "__bitor__": "__or__", "__bitxor__": "__xor__"}.get(name, name)
        elif isinstance(n, ast.UnaryOp):
            operand, name = n.operand, {"USub": "__neg__", "Invert": "__invert__"}.get(type(n.op).__name__)
        elif isinstance(n.ctx, ast.Load):
            operand, name = n.value, "__getitem__"
        if name is None:
            return
        target = self.resolve(operand, scope)
        if target[0] == "instance":
            found = self.member(target[1], target[2], name)
            if found[0] == "def":
                self.reach_def(*found[1:])

    # --- resolving names
    def lookup(self, module_name, name, seen=()):
        """What `name` is in module `module_name`'s globals."""
        m = self.modules[module_name]
        if (module_name, name) in seen:
            return ("unknown", "an import cycle")
        seen = seen + ((module_name, name),)
        binding = m.symbols.get(name)
        if binding is None:
            sub = f"{module_name}/{name}" if module_name else name
            if m.is_package and sub in self.modules:
                return ("module", sub)
            if hasattr(builtins, name):
                return ("extern",)
            return ("unknown", "a name bound nowhere the walk looks")
        if binding[0] == "def":
            node = binding[1]
            return ("class", m, node) if isinstance(node, ast.ClassDef) else ("def", m, node, None)
        if binding[0] == "assign":
            node = binding[1]
            alias = _alias_value(node)
            if alias is not None:
                target = self.resolve(alias, Scope(self, m, None, None), seen)
                if target[0] in ("def", "class", "module"):
                    self.reach_target(("assign", m, node))  # the alias's own line is read too
                    return target
            value = node.value if isinstance(node, ast.Assign) else None
            if isinstance(value, ast.Call):
                made = self.resolve(value.func, Scope(self, m, None, None), seen)
                if made[0] == "class":
                    return ("instance", made[1], made[2], ("assign", m, node))
            return ("assign", m, node)
        _, level, module, attr = binding
        base = self.import_base(m, level, module)
        if base is None:
            return ("extern",)
        if attr is None:
            return ("module", base)
        sub = f"{base}/{attr}" if base else attr
        if sub in self.modules:
            return ("module", sub)
        if base not in self.modules:
            return ("unknown", "an import from a file the walk was not given")
        return self.lookup(base, attr, seen)

    def import_base(self, m, level, module):
        """The package module that `from <level dots><module> import ...` (or `import module`) reads, or None."""
        if level:
            parts = m.package_parts()
            parts = parts[:len(parts) - level + 1]
            parts = parts + (module.split(".") if module else [])
        elif module and module.split(".")[0] == self.top:
            parts = module.split(".")[1:]
        else:
            return None
        return "/".join(parts)

    def resolve(self, node, scope, seen=()):
        """What the expression `node` stands for, read in `scope`."""
        if isinstance(node, ast.Name):
            if node.id in scope.instances:
                return scope.instances[node.id]
            if node.id in scope.class_names:
                return scope.class_names[node.id]
            if node.id in scope.literals:
                return ("extern",)
            if node.id in scope.local_names:
                return ("local", "a parameter or local called")
            return self.lookup(scope.module.name, node.id, seen)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
                    and node.value.func.id == "super" and scope.cls is not None:
                for base_m, base in self.mro(scope.module, scope.cls)[1:]:
                    found = self.own_member(base_m, base, node.attr)
                    if found is not None:
                        return found
                return ("extern",)
            base = self.resolve(node.value, scope, seen)
            if base[0] == "assign" and _literal(base[2].value):
                return ("extern",)  # a method of a module-level list, dict, set or string
            if base[0] == "module":
                return self.lookup(base[1], node.attr, seen)
            if base[0] in ("class", "instance"):
                return self.member(base[1], base[2], node.attr, instance=base[0] == "instance")
            if base[0] == "extern":
                return ("extern",)
            return ("unknown", "a method of a value whose type the walk does not know")
        if _literal(node):
            return ("extern",)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "__new__" and node.args:
                made = self.resolve(node.args[0], scope, seen)
                if made[0] == "class":
                    return ("instance", made[1], made[2])
            made = self.resolve(func, scope, seen)
            if made[0] == "class":
                return ("instance", made[1], made[2])
            if made[0] == "extern":
                return ("extern",)
            return ("unknown", "a method of a value whose type the walk does not know")
        return ("unknown", "a method of a value whose type the walk does not know")

    def mro(self, m, cls):
        """[(module, class)] of `cls` and its package bases, depth first, left to right, each once."""
        if id(cls) in self._mro:
            return self._mro[id(cls)]
        order, stack = [], [(m, cls)]
        while stack:
            here = stack.pop(0)
            if any(c is here[1] for _, c in order):
                continue
            order.append(here)
            for base in here[1].bases:
                target = self.resolve(base, Scope(self, here[0], None, None))
                if target[0] == "class":
                    stack.append((target[1], target[2]))
        self._mro[id(cls)] = order
        return order

    def own_member(self, m, cls, name):
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                return ("def", m, stmt, cls)
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                return ("class", m, stmt)
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    alias = _alias_value(stmt)
                    if alias is not None:
                        return self.resolve(alias, Scope(self, m, None, None, in_class=cls))
                    return ("unknown", "a class attribute whose value the walk does not follow")
        return None

    def member(self, m, cls, name, instance=True):
        """What `obj.name` is, obj a `cls` (or the class itself): on its bases, in order, else on the one subclass
        that defines it (a mixin reaching into the class that inherits it)."""
        order = self.mro(m, cls)
        for base_m, base in order:
            found = self.own_member(base_m, base, name)
            if found is not None:
                return found
        subs = [(sm, sc) for sm, sc in self.classes if sc is not cls and any(c is cls for _, c in self.mro(sm, sc)[1:])
                and self.own_member(sm, sc, name) is not None]
        if len(subs) == 1:
            return self.own_member(*subs[0], name)
        if len(subs) > 1:
            return ("unknown", "a method that several subclasses define (dynamic dispatch)")
        if hasattr(object, name) or any(self.resolve(b, Scope(self, bm, None, None))[0] == "extern"
                                        for bm, base in order for b in base.bases):
            return ("extern",)  # object's own (__new__), or a base from outside (Exception, ContextDecorator)
        return ("unknown", "an attribute that no class on the way defines")


class Scope:
    """Where a name is read: a module, the def it is in (its locals), the class that def belongs to."""

    def __init__(self, walk, module, func, cls, in_class=None):
        self.module, self.cls = module, cls or in_class
        self.local_names, self.instances, self.class_names, self.literals = set(), {}, {}, set()
        if func is None:
            return
        assigned = collections.Counter()
        declared_global = set()
        values = {}
        for n in ast.walk(func):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                a = n.args
                for arg in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
                    self.local_names.add(arg.arg)
                if n is not func and not isinstance(n, ast.Lambda):
                    self.local_names.add(n.name)
            elif isinstance(n, ast.ClassDef):
                self.local_names.add(n.name)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                self.local_names.add(n.id)
                assigned[n.id] += 1
            elif isinstance(n, ast.ExceptHandler) and n.name:
                self.local_names.add(n.name)
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                declared_global |= set(n.names)
            elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                values[n.targets[0].id] = n.value
        self.local_names -= declared_global
        decorators = {d.id for d in func.decorator_list if isinstance(d, ast.Name)}
        args = func.args.posonlyargs + func.args.args
        if self.cls is not None and args and "staticmethod" not in decorators:
            first = args[0].arg
            if "classmethod" in decorators or func.name in ("__new__", "__init_subclass__"):
                self.class_names[first] = ("class", module, self.cls)
            elif assigned[first] == 0:
                self.instances[first] = ("instance", module, self.cls)
        for name, value in values.items():
            if assigned[name] == 1 and _literal(value):
                self.literals.add(name)  # found = []: found.append is a list's
            if assigned[name] == 1 and isinstance(value, ast.Call) and name not in self.instances:
                plain = Scope(walk, module, None, cls)
                plain.class_names, plain.instances = self.class_names, self.instances
                made = walk.resolve(value, plain)
                if made[0] == "instance":
                    self.instances[name] = made[:3]


# ----------------------------------------------------------------------------- the reading path, walked

def walk_reading_path(sources=None, path=None):
    """The Walk of the README's reading path over minigrad's sources."""
    return Walk(package_sources() if sources is None else sources, reading_path() if path is None else path)


def report(walk, every=False, top=15):
    """The walk as a reader would like it printed: the count, per file, per function, and what it skipped."""
    out = [f"The reading path, walked: {walk.total} lines in {len(walk.lines)} files "
           f"(the path's own files and names: {path_lines()}).", "", "Per file:"]
    out += [f"  {n:5}  minigrad/{f}" for f, n in walk.per_file()]
    units = walk.per_unit()
    units = [u for u in units if u[2]]  # a method of a class read whole brings no line of its own
    out += ["", f"Per function, class or statement read (the lines each brought that none before it had; "
            f"{len(units)} in all" + ("" if every else f", the {top} largest; --all for every one, and what reached "
                                      f"it first") + "):"]
    out += [f"  {n:5}  minigrad/{f}: {what}" + (f"  (from {via})" if every and via else "")
            for f, what, n, via in (units if every else units[:top])]
    by_why = collections.Counter()
    for (why, _), n in walk.skipped.items():
        by_why[why] += n
    out += ["", f"Skipped: {sum(walk.skipped.values())} call sites the walk cannot resolve without running the code "
            f"(and {walk.outside} calls into NumPy, the standard library and the builtins, not minigrad's):"]
    for why, n in by_why.most_common():
        calls = sorted(((c, k) for (w, c), k in walk.skipped.items() if w == why), key=lambda x: (-x[1], x[0]))
        if every:
            out.append(f"  {n:5}  {why}:")
            out += [f"           {c}" + (f" ({k})" if k > 1 else "") + f"  in {', '.join(sorted(walk.skipped_in[c]))}"
                    for c, k in calls]
            continue
        shown = calls[:8]
        out.append(f"  {n:5}  {why}: " + ", ".join(f"{c}" + (f" ({k})" if k > 1 else "") for c, k in shown)
                   + ("" if len(shown) == len(calls) else f", ... ({len(calls) - len(shown)} more)"))
    return "\n".join(out)


def lines_of(name, names):
    """The path's own count of one row: file `name` ('tensor/tape') whole, or its named top-level classes and
    functions (from the first decorator to the end, blank lines included), as the README's file count counts them."""
    with open(os.path.join(PACKAGE, *name.split("/")) + ".py", encoding="utf-8") as f:
        text = f.read()
    if names is None:
        return len(text.splitlines())
    defs = {n.name: n for n in ast.parse(text).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    missing = [n for n in names if n not in defs]
    assert not missing, f"the reading path names {missing} in minigrad/{name}, which has no such class or function"
    return sum(defs[n].end_lineno - (defs[n].decorator_list[0].lineno if defs[n].decorator_list else defs[n].lineno)
               + 1 for n in names)


def path_lines():
    """The reading path counted by its files and names alone (tests/test_structure.py: READING_PATH_NOW)."""
    return sum(lines_of(f, names) for f, names in reading_path())


if __name__ == "__main__":
    print(report(walk_reading_path(), every="--all" in sys.argv[1:]))
