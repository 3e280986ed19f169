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
and the loaders every level shares (MNIST, the HDF5 weights file) are one row of their own.
"""

import csv
import io
from pathlib import Path

from harness import DEFAULT_LOC_CSV, ROOT, registry
from harness.machine import provenance
from harness.machine.files import write_atomic

PARTS = {"layout.py": "weight layout", "binding.py": "ffi binding", "cublas.py": "ffi binding",
         "cublaslt.py": "ffi binding",
         "train.py": "training step", "backward.py": "training step", "train_plan.py": "training step",
         "train_algos.py": "training step",
         ".cu": "kernel source", ".cuh": "kernel source", ".c": "kernel source",
         "resident_host.c": "forward",  # cuda/resident's predict in C: host code, not a kernel
         "frontend.py": "graph API variant", "frontend_device.py": "graph API variant"}
APART = ("training step", "graph API variant")  # parts outside a level's inference lines (the headline's)
SHARED = ("harness/data/mnist.py", "harness/data/weights.py")
CSV_PATH = DEFAULT_LOC_CSV
FIELDS = ["package", "api_level", "part", "files", "code", "comment"]


analyze = provenance.analyze
package_files = provenance.package_files  # the files a level's count (and its source hash) come from


def count(root: Path = ROOT) -> list[dict]:
    rows = []
    packages = {spec.package: spec.api_level for spec in registry.REGISTRY.values() if spec.package}
    # one package, counted once: keras, keras_jax and keras_torch are the same lenet_keras code
    targets = [(package, level, package_files(package, root)) for package, level in packages.items()]
    targets.append(("shared loaders", "shared", [root / p for p in SHARED]))
    for package, level, files in targets:
        parts: dict[str, dict] = {}
        for path in files:
            analysis = analyze(path, package)
            part = "shared" if level == "shared" else PARTS.get(path.name, PARTS.get(path.suffix, "forward"))
            row = parts.setdefault(part, {"package": package, "api_level": level, "part": part,
                                          "files": 0, "code": 0, "comment": 0})
            row["files"] += 1
            row["code"] += analysis.code_count
            row["comment"] += analysis.documentation_count
        rows += sorted(parts.values(), key=lambda r: r["part"])
    return rows


def totals(rows: list[dict]) -> dict[str, int]:
    """Code lines per package, all parts."""
    out: dict[str, int] = {}
    for row in rows:
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
    for path in sources(root):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"(missing)")
    return digest.hexdigest()


def fingerprint_path(path: Path) -> Path:
    return path.with_name(path.stem + ".sources.sha256")


def current_rows(path: Path = CSV_PATH, root: Path = ROOT) -> list[dict]:
    """loc.csv's rows, recounted first (pygount, about two seconds) when the level sources are not
    the ones it was counted from (their fingerprint, written beside it), so the figures and the
    report never show stale counts. Without pygount a stale file is an error, not an old number."""
    stamp = fingerprint_path(path)
    now = fingerprint(root)
    if path.is_file() and stamp.is_file() and stamp.read_text().strip() == now:
        return read_csv(path)
    try:
        rows = count(root)
    except ImportError as exc:
        from harness.errors import HarnessError

        raise HarnessError(f"{path} was counted from other level sources than these and pygount is "
                           f"missing to recount ({exc}): pip install pygount, then make loc") from exc
    write_csv(rows, path, root)
    return rows


def read_csv(path: Path = CSV_PATH) -> list[dict]:
    with open(path, newline="") as f:
        return [{**row, "files": int(row["files"]), "code": int(row["code"]),
                 "comment": int(row["comment"])} for row in csv.DictReader(f)]
