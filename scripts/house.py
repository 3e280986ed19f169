"""The house's measures (issue 92), each read from the code with ast: nothing is imported or run.

    grader class depth            the inheritance depth of the deepest class in GRADER (the module
                                  that grades a submission): itself and its harness bases, one a level
    places asking a lab's kind    outside the lab kinds' modules (KINDS), every place in harness/ that
                                  asks which kind a lab is, in three forms:
                                  - compare: a lab's kind name (KIND_FIELDS: `lab.task`, `x["task"]`,
                                    `x.get("task")`, a name `task`) compared with a string;
                                  - isinstance: isinstance/issubclass (or `type(x) is`) on a class of
                                    the kinds' modules;
                                  - boolean: a read of a boolean derived from either (a name or an
                                    attribute assigned one, a function returning one) or of a kind's
                                    flag (KIND_FLAGS: `lab.kernels`)
    rooms of one or two modules   a room is a folder inside a wing (harness/<wing>/.../<room>/, a
                                  package); its modules are its .py files besides __init__.py
    functions that only forward   beside a docstring and imports, the body is one `return f(...)`, f a
                                  name or a dotted name, that passes every parameter on and adds
                                  nothing: each argument a parameter, an attribute of one (`args.out`),
                                  a builtin conversion of one (`str(args.lab)`) or a name the module
                                  holds (`log`); a literal, or the object's own state (`self.x`), is
                                  more than forwarding
    registry entry fields         the fields of RECORDS (ImplSpec, Shown, Installs), the records
                                  themselves not counted
    registry hooks                the (what, "module:function") pairs of the registry's entries
    hooks a harness module asks by the level's name
                                  hooks asked only as hook(<a string>, what) (a literal, or a module
                                  constant), never by with_hook and never by a level: that module
                                  could import the level lazily (tests/test_layout.py's SERVES)
    process-global containers     module-level dicts, sets and lists a function fills (caches among them)
    pickled test cache            pickle.dump(s) calls in tests/conftest.py
    definitions of each word      modules, folders, functions, classes, module names and fields named
                                  one of WORDS, each word's count (one meaning, one definition)

What a new kind of lab touches cannot be read from the code: it is tried by hand (issue 92's
acceptance). The lines read `name: value (target: ...)`, so two runs (before, after) compare line by
line; --where adds each counted place. Exit 0 whatever the values: a report, not a gate.

    python scripts/house.py [--root CHECKOUT] [--where]
"""

import argparse
import ast
import sys
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRADER = "harness/lab/judge/grade.py"  # the module whose class grades a submission
# The lab kinds' modules (a module or a folder, relative to the checkout): what may ask which kind a
# lab is (harness.lab.judge.rules.kinds: one object per kind, issue 92 item 3).
KINDS: tuple[str, ...] = ("harness/lab/judge/rules/kinds",)  # a package, one module per kind
KIND_FIELDS = ("task",)  # the field that names a lab's kind (Lab.task: "inference" or "training")
KIND_FLAGS = ("kernels",)  # booleans that say a lab is of one kind (Lab.kernels: the CUDA kernels kind)
REGISTRY = "harness/registry.py"
RECORDS = ("ImplSpec", "Shown", "Installs")  # the registry entry: ImplSpec and the records it holds
WORDS = ("floor", "claim", "claims", "marks", "measured", "LEVEL", "LEVELS")  # issue 92, item 8
CONVERSIONS = {"str", "int", "float", "bool", "Path", "tuple", "list", "dict", "set", "frozenset"}
ALLOWED_DECORATORS = {"staticmethod", "classmethod", "property"}
FILLS = {"add", "update", "append", "extend", "setdefault", "insert", "__setitem__"}
HOOK_CALLS = ("hook", "with_hook")


@dataclass
class Module:
    name: str  # harness.lab.judge.grade
    path: str  # harness/lab/judge/grade.py, relative to the checkout
    tree: ast.Module


@dataclass
class Measure:
    name: str
    value: object
    target: str
    where: list[str] = field(default_factory=list)

    def line(self) -> str:
        return f"{self.name}: {self.value} (target: {self.target})"


def module_name(rel: Path) -> str:
    parts = list(rel.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_modules(root: Path, top: str = "harness") -> dict[str, Module]:
    """Every module under root/top, parsed (a file that does not parse is left out, and said)."""
    found = {}
    for path in sorted((root / top).rglob("*.py")):
        rel = path.relative_to(root)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(rel))
        except (SyntaxError, UnicodeDecodeError) as exc:
            print(f"house: {rel}: not read ({exc})", file=sys.stderr)
            continue
        found[module_name(rel)] = Module(module_name(rel), str(rel), tree)
    return found


def dotted(expr: ast.expr) -> str | None:
    """`a.b.c` -> "a.b.c"; anything but names and attributes -> None."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        head = dotted(expr.value)
        return None if head is None else f"{head}.{expr.attr}"
    return None


def bindings(body: list[ast.stmt]) -> Iterator[tuple[str, ast.expr | None, int]]:
    """(name, its value, line) for each name a block binds by assignment: `X = v`, `X: T = v`,
    `A, B = a, b` (a value None where it cannot be told: `A, B = f()`)."""
    for node in body:
        if isinstance(node, ast.Assign):
            pairs: list[tuple[ast.expr, ast.expr | None]] = []
            for target in node.targets:
                if isinstance(target, ast.Tuple):
                    values = node.value.elts if isinstance(node.value, ast.Tuple) \
                        and len(node.value.elts) == len(target.elts) else [None] * len(target.elts)
                    pairs += zip(target.elts, values, strict=True)
                else:
                    pairs.append((target, node.value))
            yield from ((t.id, v, node.lineno) for t, v in pairs if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, node.value, node.lineno


def docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
        and isinstance(statement.value.value, str)


def loads(node: ast.Name | ast.Attribute) -> bool:
    return isinstance(node.ctx, ast.Load)


def top_scope(nodes: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of one scope: into every statement, but not into a nested function, class or lambda."""
    stack: list[ast.AST] = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def scopes(tree: ast.Module) -> Iterator[list[ast.stmt]]:
    """The module's body, then every function's and class's body."""
    yield tree.body
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.body


# --- the grader's class depth -----------------------------------------------------------------------

def imported_names(module: Module) -> dict[str, str]:
    """local name -> the dotted name it stands for (`from a.b import C` -> C: a.b.C)."""
    out = {}
    package = module.name.split(".")
    if not module.path.endswith("__init__.py"):
        package = package[:-1]
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                head = alias.name.split(".")[0]
                out[alias.asname or head] = alias.name if alias.asname else head
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                out[alias.asname or alias.name] = f"{base}.{alias.name}"
    return out


def class_index(modules: dict[str, Module]) -> dict[str, tuple[Module, ast.ClassDef]]:
    """"harness.x.y.Class" -> (its module, its definition), top-level classes only."""
    return {f"{m.name}.{node.name}": (m, node) for m in modules.values()
            for node in m.tree.body if isinstance(node, ast.ClassDef)}


def resolve(expr: ast.expr, module: Module, index: dict) -> str | None:
    """A base class's expression -> its key in index, or None (outside the harness, or unknown)."""
    name = dotted(expr)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    if f"{module.name}.{name}" in index:
        return f"{module.name}.{name}"
    full = imported_names(module).get(head)
    if full is None:
        return None
    key = f"{full}.{rest}" if rest else full
    return key if key in index else None


def depth(key: str, index: dict, seen: frozenset = frozenset()) -> tuple[int, list[str]]:
    """(depth, chain): the class itself and its deepest line of harness bases."""
    module, node = index[key]
    best: list[str] = []
    for base in node.bases:
        found = resolve(base, module, index)
        if found is not None and found not in seen:
            chain = depth(found, index, seen | {key})[1]
            if len(chain) > len(best):
                best = chain
    return 1 + len(best), [node.name, *best]


def grader_depth(modules: dict[str, Module], grader: str = GRADER) -> Measure:
    index = class_index(modules)
    keys = [k for k, (m, _) in index.items() if m.path == grader]
    found = max((depth(k, index) for k in keys), default=(0, []))
    return Measure("grader class depth", found[0], "<= 2", [" <- ".join(found[1])] if found[1] else [])


# --- places asking which kind a lab is -----------------------------------------------------------------

def in_kinds(path: str, kinds: Sequence[str]) -> bool:
    return any(path == k or path.startswith(k.rstrip("/") + "/") for k in kinds)


def names_kind(expr: ast.expr, fields: Sequence[str]) -> bool:
    """A lab's kind name: `x.task`, `x["task"]`, `x.get("task")`, or a name `task`."""
    if isinstance(expr, ast.Attribute):
        return expr.attr in fields
    if isinstance(expr, ast.Name):
        return expr.id in fields
    if isinstance(expr, ast.Subscript):
        return isinstance(expr.slice, ast.Constant) and expr.slice.value in fields
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "get":
        return bool(expr.args) and isinstance(expr.args[0], ast.Constant) and expr.args[0].value in fields
    return False


def is_text(expr: ast.expr) -> bool:
    """A string, or a tuple, list or set of strings."""
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, str)
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return bool(expr.elts) and all(is_text(e) and isinstance(e, ast.Constant) for e in expr.elts)
    return False


def kind_compare(node: ast.AST, fields: Sequence[str]) -> bool:
    if not isinstance(node, ast.Compare):
        return False
    sides = [node.left, *node.comparators]
    return any(names_kind(s, fields) for s in sides) and any(is_text(s) for s in sides)


def kind_classes(modules: dict[str, Module], kinds: Sequence[str]) -> set[str]:
    return {node.name for m in modules.values() if in_kinds(m.path, kinds)
            for node in ast.walk(m.tree) if isinstance(node, ast.ClassDef)}


def names_class(expr: ast.expr, classes: set[str]) -> bool:
    if isinstance(expr, (ast.Tuple, ast.List)):
        return any(names_class(e, classes) for e in expr.elts)
    name = dotted(expr)
    return name is not None and name.split(".")[-1] in classes


def kind_isinstance(node: ast.AST, classes: set[str]) -> bool:
    if isinstance(node, ast.Call) and dotted(node.func) in ("isinstance", "issubclass"):
        return len(node.args) == 2 and names_class(node.args[1], classes)
    if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call) and dotted(node.left.func) == "type":
        return any(names_class(c, classes) for c in node.comparators)
    return False


@dataclass
class KindReader:
    """What counts as asking a lab's kind in one checkout: its kind fields, the attributes that are
    kind booleans (flags), the functions that return one, the kinds' classes."""
    fields: Sequence[str]
    flags: set[str]
    classes: set[str]
    functions: set[str] = field(default_factory=set)

    def asks(self, expr: ast.AST, derived: set[str]) -> bool:
        """A boolean that says which kind a lab is: a comparison, an isinstance, a derived name or flag."""
        if kind_compare(expr, self.fields) or kind_isinstance(expr, self.classes):
            return True
        if isinstance(expr, ast.BoolOp):
            return any(self.asks(v, derived) for v in expr.values)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            return self.asks(expr.operand, derived)
        if isinstance(expr, ast.Name):
            return expr.id in derived
        if isinstance(expr, ast.Attribute):
            return expr.attr in self.flags
        if isinstance(expr, ast.Call):
            return self.asks(expr.func, derived) if isinstance(expr.func, ast.Attribute) else (
                isinstance(expr.func, ast.Name) and expr.func.id in self.functions)
        return False


def derive(modules: dict[str, Module], reader: KindReader, kinds: Sequence[str]) -> None:
    """Add to the reader the functions that return a kind boolean (a method's name is read as an
    attribute too) and the attributes assigned one (`self.trains = ...`), outside the kinds."""
    functions: set[str] = set()
    attributes: set[str] = set()
    for m in modules.values():
        if in_kinds(m.path, kinds):
            continue
        for node in ast.walk(m.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = [s for s in node.body if not docstring(s)]
                if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None \
                        and reader.asks(body[0].value, set()):
                    functions.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Attribute) for t in targets) and reader.asks(node.value, set()):
                    attributes.update(t.attr for t in targets if isinstance(t, ast.Attribute))
    reader.functions |= functions
    reader.flags |= functions | attributes


def kind_places(modules: dict[str, Module], kinds: Sequence[str] = KINDS, fields: Sequence[str] = KIND_FIELDS,
                flags: Sequence[str] = KIND_FLAGS) -> list[tuple[str, int, str]]:
    """(path, line, form) for every place outside the kinds that asks which kind a lab is."""
    reader = KindReader(fields, set(flags), kind_classes(modules, kinds))
    derive(modules, reader, kinds)
    places = []
    for m in modules.values():
        if in_kinds(m.path, kinds):
            continue
        for node in ast.walk(m.tree):
            if kind_compare(node, fields):
                places.append((m.path, node.lineno, "compare"))
            elif kind_isinstance(node, reader.classes):
                places.append((m.path, node.lineno, "isinstance"))
            elif isinstance(node, ast.Attribute) and loads(node) and node.attr in reader.flags:
                places.append((m.path, node.lineno, "boolean"))
            elif isinstance(node, ast.Call) and dotted(node.func) in reader.functions:
                places.append((m.path, node.lineno, "boolean"))
        for body in scopes(m.tree):
            nodes = list(top_scope(body))
            derived: set[str] = set()
            for _ in range(3):  # a boolean derived from a derived one, a few deep
                for node in nodes:
                    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) \
                            and node.value is not None and reader.asks(node.value, derived):
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        derived.update(t.id for t in targets if isinstance(t, ast.Name))
            places += [(m.path, node.lineno, "boolean") for node in nodes
                       if isinstance(node, ast.Name) and loads(node) and node.id in derived]
    return sorted(places)


def kind_measure(modules: dict[str, Module], kinds: Sequence[str] = KINDS) -> Measure:
    places = kind_places(modules, kinds)
    forms = {form: sum(1 for p in places if p[2] == form) for form in ("compare", "isinstance", "boolean")}
    files = len({p[0] for p in places})
    value = (f"{len(places)} in {files} files ({forms['compare']} compare, {forms['isinstance']} isinstance, "
             f"{forms['boolean']} boolean)")
    return Measure("places asking a lab's kind", value, "0 outside the kinds' modules",
                   [f"{path}:{line}: {form}" for path, line, form in places])


# --- rooms ---------------------------------------------------------------------------------------

def small_rooms(root: Path, top: str = "harness") -> list[tuple[str, int]]:
    """(room, modules) for every room of at most two modules: a package folder inside a wing."""
    out = []
    for folder in sorted({init.parent for init in (root / top).glob("*/*/**/__init__.py")}):
        count = sum(1 for p in folder.glob("*.py") if p.name != "__init__.py")
        if count <= 2:
            out.append((str(folder.relative_to(root / top)), count))
    return out


def room_measure(root: Path) -> Measure:
    rooms = small_rooms(root)
    return Measure("rooms of one or two modules", len(rooms), "0",
                   [f"harness/{room}: {n} module{'s' if n != 1 else ''}" for room, n in rooms])


# --- forwarders ----------------------------------------------------------------------------------

def literal_names(module: Module) -> set[str]:
    """The module-level names bound to a literal (STUDY = "explain")."""
    return {name for name, value, _ in bindings(module.tree.body) if isinstance(value, ast.Constant)}


def passed(expr: ast.expr, params: set[str], literals: Collection[str]) -> bool:
    """An argument that only passes a parameter on: the parameter, an attribute of it (`args.out`), a
    starred one, a builtin conversion of one (`str(args.lab)`), or a name the module holds (`log`);
    never a literal (that binds a value), nor the object's own state (`self.x`)."""
    if isinstance(expr, ast.Starred):
        return passed(expr.value, params, literals)
    if isinstance(expr, ast.Call) and dotted(expr.func) in CONVERSIONS:
        return all(passed(a, params, literals) for a in expr.args) and not expr.keywords
    name = dotted(expr)
    if name is None:
        return False
    root = name.split(".")[0]
    return root in params or (root not in literals and root not in ("self", "cls"))


def forwards(node: ast.FunctionDef | ast.AsyncFunctionDef, literals: Collection[str] = ()) -> bool:
    """Beside a docstring and imports, one `return f(...)` (f a name or a dotted name) that passes every
    parameter of the function on (passed) and nothing else; a function without parameters passes none."""
    if any(dotted(d) not in ALLOWED_DECORATORS for d in node.decorator_list):
        return False
    body = [s for s in node.body if not isinstance(s, (ast.Import, ast.ImportFrom)) and not docstring(s)]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Call):
        return False
    call = body[0].value
    if dotted(call.func) is None:
        return False
    values = [*call.args, *(k.value for k in call.keywords)]
    args = node.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} - {"self", "cls"}
    params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    used = {n.id for v in values for n in ast.walk(v) if isinstance(n, ast.Name)}
    return bool(params) and params <= used and all(passed(v, params, literals) for v in values)


def forwarders(modules: dict[str, Module]) -> list[tuple[str, int, str]]:
    found = []
    for m in modules.values():
        literals = literal_names(m)
        found += [(m.path, node.lineno, node.name) for node in ast.walk(m.tree)
                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and forwards(node, literals)]
    return sorted(found)


def forward_measure(modules: dict[str, Module]) -> Measure:
    found = forwarders(modules)
    return Measure("functions that only forward", len(found), "0",
                   [f"{path}:{line}: {name}" for path, line, name in found])


# --- the registry entry --------------------------------------------------------------------------

def record_fields(modules: dict[str, Module], registry: str = REGISTRY) -> list[str]:
    """Record.field for every field of RECORDS, the fields holding another record left out."""
    module = next((m for m in modules.values() if m.path == registry), None)
    if module is None:
        return []
    out = []
    for node in module.tree.body:
        if isinstance(node, ast.ClassDef) and node.name in RECORDS:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) \
                        and dotted(item.annotation) not in RECORDS:
                    out.append(f"{node.name}.{item.target.id}")
    return out


def registry_hooks(modules: dict[str, Module], registry: str = REGISTRY) -> list[tuple[str, str]]:
    """(level, what) for every hook of every entry: ImplSpec(...)'s `hooks=((what, path), ...)`."""
    module = next((m for m in modules.values() if m.path == registry), None)
    out: list[tuple[str, str]] = []
    for node in ast.walk(module.tree) if module else ():
        if isinstance(node, ast.Call) and dotted(node.func) == "ImplSpec" and node.args \
                and isinstance(node.args[0], ast.Constant):
            for keyword in node.keywords:
                if keyword.arg == "hooks" and isinstance(keyword.value, (ast.Tuple, ast.List)):
                    out += [(str(node.args[0].value), str(pair.elts[0].value)) for pair in keyword.value.elts
                            if isinstance(pair, ast.Tuple) and isinstance(pair.elts[0], ast.Constant)]
    return out


def constant_text(expr: ast.expr, module: Module, modules: dict[str, Module], depth: int = 0) -> str | None:
    """A string literal, or a module-level name bound to one (in this module, or imported from another:
    `from harness.explain.gpu_static import LEVEL`, `gpu_static.LEVEL`)."""
    if isinstance(expr, ast.Constant):
        return expr.value if isinstance(expr.value, str) else None
    name = dotted(expr)
    if name is None or depth > 5:
        return None
    if "." not in name:
        for bound, value, _ in bindings(module.tree.body):
            if bound == name and value is not None:
                return constant_text(value, module, modules, depth + 1)
    head, _, rest = name.partition(".")
    full = imported_names(module).get(head)
    if full is None:
        return None
    where, _, attr = (f"{full}.{rest}" if rest else full).rpartition(".")
    other = modules.get(where)
    return None if other is None else constant_text(ast.Name(attr), other, modules, depth + 1)


def hook_uses(modules: dict[str, Module]) -> dict[str, list[str]]:
    """what -> how each use names the level: "named" (a constant), "asked" (a variable: any level that
    has it), "level" (a level package asks it)."""
    uses: dict[str, list[str]] = {}
    for m in modules.values():
        for node in ast.walk(m.tree):
            if not isinstance(node, ast.Call) or str(dotted(node.func)).split(".")[-1] not in HOOK_CALLS:
                continue
            generic = str(dotted(node.func)).endswith("with_hook")
            what_arg = node.args[0 if generic else 1] if len(node.args) > (0 if generic else 1) else None
            what = constant_text(what_arg, m, modules) if what_arg is not None else None
            if what is None:
                continue
            if m.path.startswith("lenet_"):
                how = "level"
            elif generic:
                how = "asked"
            else:
                how = "named" if constant_text(node.args[0], m, modules) is not None else "asked"
            uses.setdefault(what, []).append(how)
    return uses


def registry_measures(modules: dict[str, Module], levels: dict[str, Module]) -> list[Measure]:
    fields = record_fields(modules)
    hooks = registry_hooks(modules)
    uses = hook_uses({**modules, **levels})
    named = sorted({f"{level}:{what}" for level, what in hooks if set(uses.get(what, ["none"])) == {"named"}})
    return [Measure("registry entry fields", len(fields), f"only what the harness reads of every level "
                    f"({', '.join(RECORDS)})", fields),
            Measure("registry hooks", len(hooks), "those that serve many modules or a level",
                    [f"{level}:{what}" for level, what in hooks]),
            Measure("hooks a harness module asks by the level's name", len(named), "0", named)]


# --- process-global state, the test cache, words ---------------------------------------------------

def container(expr: ast.expr | None) -> bool:
    """A dict, set or list made at import: a literal (`[None] * 4` too) or a call that makes one."""
    if isinstance(expr, (ast.Dict, ast.Set, ast.List)):
        return True
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        return container(expr.left) or container(expr.right)
    return isinstance(expr, ast.Call) and (dotted(expr.func) or "").split(".")[-1] in (
        "dict", "set", "list", "OrderedDict", "defaultdict", "deque")


def filled_containers(modules: dict[str, Module]) -> list[tuple[str, int, str]]:
    """(path, line, name) for each module-level container a function of its module fills."""
    out = []
    for m in modules.values():
        made = {name: line for name, value, line in bindings(m.tree.body) if container(value)}
        filled = set()
        for fn in ast.walk(m.tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and isinstance(node.func.value, ast.Name) and node.func.attr in FILLS:
                    filled.add(node.func.value.id)
                elif isinstance(node, (ast.Assign, ast.AugAssign)):
                    for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                            filled.add(t.value.id)
        out += [(m.path, line, name) for name, line in made.items() if name in filled]
    return sorted(out)


def pickled_caches(root: Path) -> int:
    path = root / "tests" / "conftest.py"
    if not path.is_file():
        return 0
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Call)
               and dotted(node.func) in ("pickle.dump", "pickle.dumps"))


def word_definitions(root: Path, modules: dict[str, Module],
                     words: Sequence[str] = WORDS) -> dict[str, list[str]]:
    """word -> where it is defined: a module or folder, a function or class, a module name, a field."""
    out: dict[str, list[str]] = {word: [] for word in words}
    for path in sorted((root / "harness").rglob("*")):
        stem = path.stem if path.suffix == ".py" else path.name if path.is_dir() else None
        if stem in out and path.name != "__init__.py":
            out[stem].append(str(path.relative_to(root)))
    for m in modules.values():
        for node in ast.walk(m.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in out:
                out[node.name].append(f"{m.path}:{node.lineno}: {node.name}")
            if isinstance(node, (ast.Module, ast.ClassDef)):
                out_of = [(name, line) for name, _, line in bindings(node.body) if name in out]
                for name, line in out_of:
                    out[name].append(f"{m.path}:{line}: {name}")
    return out


def other_measures(root: Path, modules: dict[str, Module]) -> list[Measure]:
    found = filled_containers(modules)
    words = word_definitions(root, modules)
    return [Measure("process-global containers a function fills", len(found),
                    "no cache of a computed summary (cells.SUMMARIES, rows.CHECKED, rundata.FOUND, "
                    "headline.LAST gone)", [f"{path}:{line}: {name}" for path, line, name in found]),
            Measure("pickled test cache (pickle.dump calls in tests/conftest.py)", pickled_caches(root), "0"),
            Measure("definitions of each word", ", ".join(f"{w} {len(d)}" for w, d in words.items()),
                    "1 each", [place for places in words.values() for place in places])]


def measures(root: Path) -> list[Measure]:
    modules = read_modules(root)
    levels = {k: v for top in sorted(p.name for p in root.glob("lenet_*") if p.is_dir())
              for k, v in read_modules(root, top).items()}
    return [grader_depth(modules), kind_measure(modules), room_measure(root), forward_measure(modules),
            *registry_measures(modules, levels), *other_measures(root, modules)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to read (default: this one)")
    parser.add_argument("--where", action="store_true", help="each counted place under its line")
    args = parser.parse_args(argv)
    for measure in measures(args.root):
        print(measure.line())
        if args.where:
            print("".join(f"    {place}\n" for place in measure.where), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
