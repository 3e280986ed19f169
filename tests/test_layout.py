"""The layout's rule (harness/__init__.py), read from the code itself with ast:

- a harness wing imports only from wings below it (siblings do not import each other);
- a level (lenet_*) imports only the harness's core, data and frameworks;
- the harness reaches a level only through the registry, whose loader imports "module:Name"
  paths with importlib (`create`, `create_trainer`, `hook`: what doctor, env.json and
  `make weights` ask a level for), so no import statement in harness/ names a level package;
- the exceptions are imported by name, and only inside a function: the oracle, `lenet_numpy`
  (NumPy only: the grader, verify, training verify and the training study's test accuracy check
  answers against it; ORACLE), and the level a harness module serves alone (SERVES: the C level's
  stage split in harness.explain.c_layers, the Keras model `make weights` trains in
  harness.data.train, the CUDA kernels' stamps and static work in harness.explain.kernel_stages and
  gpu_static), where a registry hook would only name a module of the level the caller already
  names; any other lenet_* import is a violation;
- no import cycle among harness modules;
- a wing's rooms (folders inside it, ROOMS) import one way: a module imports a room of its wing
  only if that room is below its own (siblings stay apart); the wing's own modules ("") sit above
  its rooms in the report, measure and the box and judge;
- inside the lab wing (harness/lab/__init__.py), its rooms import one way: term -> judge -> box,
  and all three may import what sits in harness/lab/ itself (text, emucuda), which imports none
  of them; a room's __init__.py says what it holds and may import, and imports nothing.

These rules guard the shape (which way imports point). Nothing here counts modules, lines or
calls: a size is judged by reading, and a cap only bends code to fit it.
"""

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

# Lower number = lower in the stack. Wings of the same rank are siblings and stay apart.
RANK = {"core": 0, "data": 1, "frameworks": 1, "machine": 2, "measure": 3, "check": 4,
        "explain": 4, "draw": 4, "report": 5, "figures": 6, "reproduce": 6, "lab": 6, "campaign": 6, "cli": 7}
# Wings that stay apart although one ranks above the other: the lab draws and counts lines with what
# sits below both (draw, machine), never through the report.
APART = {("lab", "report")}
CORE_MODULES = {"__init__", "base", "registry", "errors", "null_impl"}
CLI_MODULES = {"cli", "__main__"}
LEVEL_MAY_IMPORT = {"core", "data", "frameworks"}
MOVED = {"weights": "data", "mnist": "data"}  # harness.__getattr__ keeps these old names
ORACLE = "lenet_numpy"  # the level the harness may import by name (lazily): the correctness oracle
# (harness module, level package): a module that serves one level alone imports it by name, lazily
SERVES = {("harness.explain.c_layers", "lenet_c"), ("harness.data.train", "lenet_keras"),
          ("harness.explain.kernel_stages", "lenet_cuda"), ("harness.explain.gpu_static", "lenet_cuda")}
# The lab wing's rooms, lower = lower; "" is harness/lab/ itself (text, emucuda): below all three.
LAB_RANK = {"": 0, "box": 1, "judge": 2, "term": 3}
# A wing's rooms, lower = lower; "" is the wing's own modules (above its rooms: they assemble them).
ROOMS = {"harness.report": {"markup": 0, "claims": 1, "sections": 2, "": 3},
         "harness.measure": {"store": 0, "plan": 1, "inside": 1, "": 2},
         "harness.lab.box": {"walls": 0, "proc": 1, "": 2},
         "harness.lab.judge": {"rules": 0, "phases": 1, "": 2}}


def wing_of(module: str, root: Path) -> str | None:
    """harness.measure.stats -> measure; harness.base -> core; not the harness -> None."""
    parts = module.split(".")
    if parts[0] != "harness":
        return None
    if len(parts) == 1:
        return "core"
    if (root / "harness" / parts[1]).is_dir():
        return parts[1]
    if parts[1] in MOVED:
        return MOVED[parts[1]]
    return "cli" if parts[1] in CLI_MODULES else "core"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path):
    """(imported module, line, at top level?) for every import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    lazy = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lazy.update(id(n) for n in ast.walk(node) if n is not node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, id(node) not in lazy
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:  # `from harness import weights` names a module
                sub = f"{node.module}.{alias.name}"
                is_module = (root / Path(*sub.split("."))).is_dir() or \
                    (root / Path(*sub.split("."))).with_suffix(".py").is_file() or \
                    (node.module == "harness" and alias.name in MOVED)
                yield (sub if is_module else node.module), node.lineno, id(node) not in lazy


def violations(root: Path) -> list[str]:
    found = []
    for path in sorted((root / "harness").rglob("*.py")):
        here = module_name(path, root)
        own = wing_of(here, root)
        for target, line, top in imports(path, root):
            where = f"{path.relative_to(root)}:{line}"
            package = target.split(".")[0]
            named = package == ORACLE or (here, package) in SERVES
            if package.startswith("lenet_") and not named:
                found.append(f"{where}: imports the level {target} (ask the registry: create, hook)")
            elif named and top:
                found.append(f"{where}: imports the level {target} at import time (import it in a function)")
            other = wing_of(target, root)
            if other is None or other == own:
                continue
            if RANK[other] >= RANK[own]:
                found.append(f"{where}: {own} imports {target} ({other} is not below {own})")
            elif (own, other) in APART:
                found.append(f"{where}: {own} imports {target} ({own} and {other} stay apart)")
    for path in sorted(root.glob("lenet_*/*.py")):
        for target, line, _ in imports(path, root):
            other = wing_of(target, root)
            if other is not None and other not in LEVEL_MAY_IMPORT:
                found.append(f"{path.relative_to(root)}:{line}: a level imports {target} ({other})")
    return found


def cycles(root: Path) -> list[list[str]]:
    graph = {}
    for path in (root / "harness").rglob("*.py"):
        here = module_name(path, root)
        graph[here] = {t for t, _, _ in imports(path, root) if t.startswith("harness.") and t != here}
    found, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_every_import_follows_the_layout():
    assert violations(ROOT) == []


def test_no_import_cycle_among_harness_modules():
    assert cycles(ROOT) == []


def test_each_wing_says_in_one_line_what_it_holds():
    for wing in (p for p in (ROOT / "harness").iterdir() if p.is_dir() and p.name != "__pycache__"):
        doc = ast.get_docstring(ast.parse((wing / "__init__.py").read_text()))
        assert doc and len(doc.splitlines()) == 1, f"{wing.name}/__init__.py needs a one-line docstring"


def fake_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


BASE_TREE = {"harness/__init__.py": "", "harness/errors.py": "",
             "harness/measure/__init__.py": "", "harness/measure/stats.py": "",
             "harness/report/__init__.py": "", "harness/report/figures.py": "",
             "harness/data/__init__.py": "", "harness/data/mnist.py": "",
             "harness/lab/__init__.py": ""}


@pytest.mark.parametrize("path,text,expected", [
    ("harness/measure/stats.py", "from harness.report import figures\n", "measure imports harness.report.figures"),
    ("harness/measure/stats.py", "import lenet_numpy.model\n", "imports the level lenet_numpy.model at import time"),
    ("harness/measure/stats.py", "import lenet_tf.model\n", "imports the level lenet_tf.model (ask the registry"),
    ("harness/measure/stats.py", "def f():\n    from lenet_cudnn import binding\n",
     "imports the level lenet_cudnn (ask the registry"),  # lazy, still not allowed
    ("harness/data/mnist.py", "def f():\n    from lenet_keras.model import build_model\n",
     "imports the level lenet_keras.model (ask the registry"),
    ("lenet_x/model.py", "from harness.measure import stats\n", "a level imports harness.measure.stats"),
    ("harness/data/mnist.py", "from harness import weights\n", None),  # same wing, the old name
    ("harness/report/figures.py", "def f():\n    from lenet_numpy.model import NumpyLeNet\n", None),  # the oracle
    ("harness/report/figures.py", "def f():\n    return registry.create('tf', 'w.h5')\n", None),  # the registry
    ("harness/report/figures.py", "from harness.measure import stats\n", None),  # downward: allowed
    ("harness/lab/plots.py", "def f():\n    from harness.report import figures\n",
     "lab imports harness.report.figures (lab and report stay apart)"),  # above it, yet apart
    ("harness/explain/c_layers.py", "def f():\n    from lenet_c.explain import stages\n", None),  # it serves c
    ("harness/explain/c_layers.py", "from lenet_c.explain import stages\n",
     "imports the level lenet_c.explain at import time"),
    ("harness/explain/ladder.py", "def f():\n    from lenet_c.explain import stages\n",
     "imports the level lenet_c.explain (ask the registry"),  # not the module that serves it
    ("harness/explain/c_layers.py", "def f():\n    import lenet_tf.model\n",
     "imports the level lenet_tf.model (ask the registry"),  # not the level it serves
])
def test_the_checker_names_a_wrong_arrow(tmp_path, path, text, expected):
    root = fake_tree(tmp_path, {**BASE_TREE, path: text})
    found = violations(root)
    if expected is None:
        assert found == []
    else:
        assert len(found) == 1 and expected in found[0], found


def test_the_checker_finds_a_cycle(tmp_path):
    root = fake_tree(tmp_path, {**BASE_TREE, "harness/report/figures.py": "from harness.report import style\n",
                                "harness/report/style.py": "def f():\n    from harness.report import figures\n"})
    assert cycles(root) and "harness.report.figures" in cycles(root)[0]


# --- rooms: a wing's rooms import one way ------------------------------------------------------------
def room_of(module: str, wing: str, root: Path) -> str | None:
    """harness.report.claims.rundata -> claims (of wing harness.report); the wing's own -> ""; else None."""
    if module != wing and not module.startswith(wing + "."):
        return None
    rest = module[len(wing) + 1:].split(".") if module != wing else []
    return rest[0] if rest and (root / Path(*wing.split(".")) / rest[0]).is_dir() else ""


def room_violations(root: Path, rooms: dict[str, dict[str, int]] = ROOMS) -> list[str]:
    """Every import inside a wing with rooms (at import time or in a function) against their order."""
    found = []
    for wing, rank in rooms.items():
        for path in sorted((root / Path(*wing.split("."))).rglob("*.py")):
            own = room_of(module_name(path, root), wing, root)
            if own not in rank:
                found.append(f"{path.relative_to(root)}: {wing}.{own} is not a room of {wing} {sorted(rank)}")
                continue
            for target, line, _ in imports(path, root):
                other = room_of(target, wing, root)
                if other is None or other == own:
                    continue
                if other not in rank or rank[other] >= rank[own]:
                    found.append(f"{path.relative_to(root)}:{line}: {wing}.{own or '(its own)'} imports {target} "
                                 f"({other or 'the wing'} is not below {own or 'the wing'})")
    return found


def test_the_rooms_of_each_wing_import_one_way():
    assert room_violations(ROOT) == []


def test_each_room_says_what_it_holds_and_may_import():
    for wing, rank in ROOMS.items():
        for room in (r for r in rank if r):
            folder = ROOT / Path(*wing.split(".")) / room
            doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
            assert "May import:" in doc, f"{wing}.{room} does not say what it may import"
            missing = [p.stem for p in folder.glob("*.py") if p.stem != "__init__" and p.stem not in doc]
            assert not missing, f"{wing}.{room}/__init__.py does not name {missing}"


ROOM_TREE = {**BASE_TREE, "harness/report/markup/__init__.py": "", "harness/report/markup/tables.py": "",
             "harness/report/claims/__init__.py": "", "harness/report/claims/rundata.py": "",
             "harness/report/markdown.py": ""}
ROOM_RANK = {"harness.report": {"markup": 0, "claims": 1, "": 2}}


@pytest.mark.parametrize("path,text,expected", [
    ("harness/report/markup/tables.py", "from harness.report.claims import rundata\n",
     "harness.report.markup imports harness.report.claims.rundata (claims is not below markup)"),
    ("harness/report/claims/rundata.py", "def f():\n    from harness.report import markdown\n",
     "imports harness.report.markdown (the wing is not below claims)"),  # lazy: still upward
    ("harness/report/extra/mod.py", "", "harness.report.extra is not a room of harness.report"),
    ("harness/report/markdown.py", "from harness.report.claims import rundata\nfrom harness.report.markup import tables\n",
     None),  # the wing's own modules assemble its rooms
    ("harness/report/claims/rundata.py", "from harness.report.markup import tables\n", None),  # downward
])
def test_the_room_checker_names_a_wrong_arrow(tmp_path, path, text, expected):
    root = fake_tree(tmp_path, {**ROOM_TREE, path: text})
    found = room_violations(root, ROOM_RANK)
    if expected is None:
        assert found == []
    else:
        assert len(found) == 1 and expected in found[0], found


# --- the lab wing's rooms: term -> judge -> box ----------------------------------------------------
def lab_room(module: str, root: Path) -> str | None:
    """harness.lab.judge.grade -> judge; harness.lab.text (or harness.lab) -> ""; not the lab -> None."""
    parts = module.split(".")
    if parts[:2] != ["harness", "lab"]:
        return None
    if len(parts) > 2 and (root / "harness" / "lab" / parts[2]).is_dir():
        return parts[2]
    return ""


def lab_violations(root: Path) -> list[str]:
    """Every import in harness/lab/ (at import time or in a function) against term -> judge -> box."""
    found = []
    for path in sorted((root / "harness" / "lab").rglob("*.py")):
        own = lab_room(module_name(path, root), root)
        if own not in LAB_RANK:
            found.append(f"{path.relative_to(root)}: harness.lab.{own} is not a room of the lab {sorted(LAB_RANK)}")
            continue
        for target, line, _ in imports(path, root):
            other = lab_room(target, root)
            if other is None or other == own:
                continue
            if other not in LAB_RANK or LAB_RANK[other] >= LAB_RANK[own]:
                found.append(f"{path.relative_to(root)}:{line}: {own or 'harness.lab'} imports {target} "
                             f"({other or 'harness.lab'} is not below {own or 'harness.lab'})")
    return found


def test_the_lab_rooms_import_one_way():
    assert lab_violations(ROOT) == []


def test_each_lab_room_says_what_it_holds_and_may_import():
    """A room's __init__.py: a docstring naming each of its modules and what it may import; no import
    (the box's is shown to the worker in the sandbox, which sees little else)."""
    lab = ROOT / "harness" / "lab"
    rooms = sorted(p.name for p in lab.iterdir() if (p / "__init__.py").is_file())
    assert rooms == sorted(r for r in LAB_RANK if r), rooms
    for room in rooms:
        tree = ast.parse((lab / room / "__init__.py").read_text())
        doc = ast.get_docstring(tree) or ""
        assert "May import:" in doc, f"{room}/__init__.py does not say what it may import"
        missing = [p.stem for p in (lab / room).glob("*.py") if p.stem != "__init__" and p.stem not in doc]
        assert not missing, f"{room}/__init__.py does not name {missing}"
        assert not [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))], room


LAB_TREE = {**BASE_TREE, "harness/lab/__init__.py": "", "harness/lab/text.py": "",
            "harness/lab/box/__init__.py": "", "harness/lab/box/disk.py": "",
            "harness/lab/judge/__init__.py": "", "harness/lab/judge/store.py": "",
            "harness/lab/term/__init__.py": "", "harness/lab/term/marks/leaderboard.py": ""}


@pytest.mark.parametrize("path,text,expected", [
    ("harness/lab/box/disk.py", "from harness.lab.judge import store\n", "box imports harness.lab.judge.store"),
    ("harness/lab/judge/store.py", "def f():\n    from harness.lab.term.marks import leaderboard\n",
     "judge imports harness.lab.term.marks.leaderboard (term is not below judge)"),  # lazy: still upward
    ("harness/lab/box/disk.py", "import harness.lab.term.marks.leaderboard\n", "box imports harness.lab.term"),
    ("harness/lab/text.py", "from harness.lab.box.disk import Space\n",
     "harness.lab imports harness.lab.box.disk (box is not below harness.lab)"),
    ("harness/lab/extra/mod.py", "", "harness.lab.extra is not a room of the lab"),
    ("harness/lab/term/marks/leaderboard.py", "from harness.lab.judge import store\nfrom harness.lab.box import disk\n",
     None),  # downward, two rooms down
    ("harness/lab/judge/store.py", "from harness.lab import text\n", None),  # what sits below all three
    ("harness/lab/box/disk.py", "from harness.lab.box import disk\n", None),  # its own room
])
def test_the_lab_checker_names_a_wrong_arrow(tmp_path, path, text, expected):
    root = fake_tree(tmp_path, {**LAB_TREE, path: text})
    found = lab_violations(root)
    if expected is None:
        assert found == []
    else:
        assert len(found) == 1 and expected in found[0], found
