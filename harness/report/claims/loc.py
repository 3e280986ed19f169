"""Lines of code per API level, counted by pygount as code lines (no blanks, no comments, no
docstrings), the same numbers `pygount --format=summary PACKAGE` prints.

Each implementation package is split by file into the parts a reader wants apart:
  forward        building the network and predict
  weight layout  converting the shared weights into the level's layout (layout.py)
  ffi binding    declaring a C API to Python (binding.py, cublas.py, cublaslt.py): a cost of driving cuDNN
                 or oneDNN from Python that a C++ program gets from #include <cudnn.h>
  training step  the level's train_step (train.py, and the raw levels' backward.py,
                 train_plan.py, train_algos.py), counted apart so inference stays comparable
  kernel source  CUDA C kernels and headers (*.cu, *.cuh) and C (*.c), the hand-written levels',
                 apart from their glue (cuda/resident's host side in C, resident_host.c, is forward)
  graph API variant  cuDNN's graph API through NVIDIA's Python frontend (lenet_cudnn/frontend*.py):
                 a second API in the cudnn package, apart so the legacy-API lines stay comparable
and the loaders every level shares (MNIST, the HDF5 weights file) are rows of their own. loc.csv
has one row per file (its package, its part, its code and comment lines).

One working implementation (the headline's lines of code, first_written): what the level's call
as first written needs, as its registry entry names it (`Shown.first_written_code`): a file of the
level's package, counted whole, or a Python function or class in one ("model.py:build_model",
"model.py:KerasLeNet"), its lines counted as pygount counts a file's (no blanks, comments or
docstrings: piece_count). Each level with such a list has one more row, of part FIRST, named
"level/variant". A level whose entry names nothing counts every inference file of its package. A
file or class that also serves other variants counts in full, so the count is an upper bound of
that call's own code; what only other variants need (another kernel file, a second API, another
backend's class) is left out. Every file's lines are in DETAILS.
"""

import ast
import csv
import io
import tokenize
from pathlib import Path

from harness import DEFAULT_LOC_CSV, ROOT, registry
from harness.errors import HarnessError
from harness.machine import provenance
from harness.machine.files import write_atomic

PARTS = {"layout.py": "weight layout", "binding.py": "ffi binding", "cublas.py": "ffi binding",
         "cublaslt.py": "ffi binding",
         "train.py": "training step", "backward.py": "training step", "train_plan.py": "training step",
         "train_algos.py": "training step",
         ".cu": "kernel source", ".cuh": "kernel source", ".c": "kernel source",
         "resident_host.c": "forward",  # cuda/resident's predict in C: host code, not a kernel
         "frontend.py": "graph API variant", "frontend_device.py": "graph API variant"}
APART = ("training step", "graph API variant")  # parts outside a level's inference lines
FIRST = "as first written"  # the part of a level's first-written count (first_written_code)
SHARED = ("harness/data/mnist.py", "harness/data/weights.py")
CSV_PATH = DEFAULT_LOC_CSV
FIELDS = ["package", "api_level", "part", "file", "code", "comment"]


package_files = provenance.package_files  # the files a level's count (and its source hash) come from


def count(root: Path = ROOT) -> list[dict]:
    """One row per counted file: its package, API level, part, name (in its package's folder, or
    from the checkout's root for the shared loaders) and pygount's code and comment lines."""
    rows = []
    packages = {spec.package: spec.api_level for spec in registry.REGISTRY.values() if spec.package}
    # one package, counted once: keras, keras_jax and keras_torch are the same lenet_keras code
    targets = [(package, level, package_files(package, root)) for package, level in packages.items()]
    targets.append(("shared loaders", "shared", [root / p for p in SHARED]))
    for package, level, files in targets:
        found = []
        for path in files:
            code, comment = provenance.count_lines(path, package)
            part = "shared" if level == "shared" else PARTS.get(path.name, PARTS.get(path.suffix, "forward"))
            name = str(path.relative_to(root)) if level == "shared" else path.name
            found.append({"package": package, "api_level": level, "part": part, "file": name,
                          "code": code, "comment": comment})
        rows += sorted(found, key=lambda r: (r["part"], r["file"]))
    return rows + [first_written_row(name, root) for name in registry.levels() if first_written_code(name)]


def first_written_code(implementation: str) -> tuple[str, ...]:
    """What a level's call as first written needs (its registry entry's `first_written_code`: files
    of its package, or 'file:Name' for a function or class in one); () where it names nothing."""
    return tuple(registry.spec(implementation).shown.first_written_code)


def first_written_row(implementation: str, root: Path = ROOT) -> dict:
    """The row of a level's first-written count: the files and pieces its entry names, summed."""
    spec = registry.spec(implementation)
    code = comment = 0
    for item in first_written_code(implementation):
        file, _, name = item.partition(":")
        path = root / str(spec.package) / file
        if not path.is_file():
            raise HarnessError(f"harness/registry.py, level {implementation!r}: field `first_written_code`: "
                               f"files of {spec.package}/; found {item!r}, no such file")
        if name:
            found = piece_count(path, name, implementation)
        else:
            found = provenance.count_lines(path, str(spec.package))
        code, comment = code + found[0], comment + found[1]
    return {"package": spec.package, "api_level": spec.api_level, "part": FIRST,
            "file": f"{implementation}/{registry.first_written(implementation)}", "code": code,
            "comment": comment}


DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)  # what "file:Name" may name


def piece_count(path: Path, name: str, implementation: str = "") -> tuple[int, int]:
    """(code, comment) lines of a top-level function or class of a Python file, or a class's method
    ("KerasLeNet.predict"), decorators included: a line with a token other than a comment is code,
    unless it is part of a docstring, which counts as comment as a comment line does."""
    source = path.read_text()
    tree = ast.parse(source)
    node: ast.AST | None = tree
    for part in name.split("."):
        body = getattr(node, "body", [])
        node = next((n for n in body if isinstance(n, DEFINITIONS) and n.name == part), None)
        if node is None:
            raise HarnessError(f"harness/registry.py, level {implementation!r}: field `first_written_code`: "
                               f"a function or class of {path.name}; found {name!r}, no such definition")
    assert isinstance(node, DEFINITIONS)
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    end = node.end_lineno or node.lineno
    docs = set()
    for n in ast.walk(tree):
        body = getattr(n, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docs |= set(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    code, comments = set(), set()
    skip = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER,
            tokenize.ENCODING}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        lines = set(range(token.start[0], token.end[0] + 1))
        if token.type == tokenize.COMMENT:
            comments |= lines
        elif token.type not in skip:
            code |= lines
    inside = set(range(start, end + 1))
    return len((code - docs) & inside), len(((comments - code) | docs) & inside)


def first_written(rows: list[dict], implementation: str) -> int | None:
    """One working implementation's code lines: its FIRST row (what its entry's first_written_code
    names), or, where its entry names nothing, every file of its package outside the parts apart
    (training, a second API). None: the level has no package or no row; a level whose entry names its
    code and whose package has rows but no FIRST row is an error (loc.csv of an older layout)."""
    spec = registry.REGISTRY.get(implementation)
    if spec is None or spec.package is None or not any(r["package"] == spec.package for r in rows):
        return None
    if spec.api_level != "none" and first_written_code(implementation):
        label = f"{implementation}/{registry.first_written(implementation)}"
        row = next((r for r in rows if r["part"] == FIRST and r["file"] == label), None)
        if row is None:
            raise HarnessError(f"loc.csv has no row of {label}'s first-written count: make loc recounts it")
        return row["code"]
    mine = [r["code"] for r in rows if r["package"] == spec.package and r["part"] not in (*APART, FIRST)]
    return sum(mine) if mine else None


def files(rows: list[dict]) -> list[dict]:
    """The rows of counted files (every row but the first-written counts)."""
    return [r for r in rows if r["part"] != FIRST]


def totals(rows: list[dict]) -> dict[str, int]:
    """Code lines per package, all parts (each file once)."""
    out: dict[str, int] = {}
    for row in files(rows):
        out[row["package"]] = out.get(row["package"], 0) + row["code"]
    return out


def write_csv(rows: list[dict], path: Path = CSV_PATH, root: Path = ROOT) -> Path:
    """The rows, and beside them the fingerprint of the sources they were counted from."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, FIELDS)
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, buffer.getvalue())  # each whole or not at all
    write_atomic(fingerprint_path(path), fingerprint(root) + "\n")
    return path


def sources(root: Path = ROOT) -> list[Path]:
    """Every file the counts come from: the level packages and the shared loaders."""
    packages = {spec.package for spec in registry.REGISTRY.values() if spec.package}
    files = sorted(p for package in packages for p in package_files(package, root))
    return files + [root / p for p in SHARED]


def fingerprint(root: Path = ROOT) -> str:
    """sha256 over the names and contents of every counted file: what loc.csv was counted from."""
    import hashlib

    digest = hashlib.sha256()
    # what each level's first-written count names (the registry's): a changed list is a recount
    digest.update(repr([(name, first_written_code(name)) for name in registry.levels()]).encode() + b"\0")
    for path in sources(root):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"(missing)")
    return digest.hexdigest()


def fingerprint_path(path: Path) -> Path:
    return path.with_name(path.stem + ".sources.sha256")


def current_rows(path: Path = CSV_PATH, root: Path = ROOT) -> list[dict]:
    """loc.csv's rows, recounted first (pygount, about two seconds) when the level sources are not
    the ones it was counted from (their fingerprint, written beside it) or the file is of an older
    layout, so the figures and the report never show stale counts. Without pygount a stale file is an
    error, not an old number."""
    stamp = fingerprint_path(path)
    now = fingerprint(root)
    if path.is_file() and stamp.is_file() and stamp.read_text().strip() == now and header(path) == FIELDS:
        return read_csv(path)
    try:
        rows = count(root)
    except ImportError as exc:
        raise HarnessError(f"{path} was counted from other level sources than these and pygount is "
                           f"missing to recount ({exc}): pip install pygount, then make loc") from exc
    write_csv(rows, path, root)
    return rows


def header(path: Path) -> list[str]:
    with open(path, newline="") as f:
        return next(csv.reader(f), [])


def read_csv(path: Path = CSV_PATH) -> list[dict]:
    """loc.csv's rows; a file of another layout is an error that says how to recount it."""
    found = header(path)
    if found != FIELDS:
        raise HarnessError(f"{path}: columns {found}, expected {FIELDS}: make loc recounts it")
    with open(path, newline="") as f:
        return [{**row, "code": int(row["code"]), "comment": int(row["comment"])}
                for row in csv.DictReader(f)]
