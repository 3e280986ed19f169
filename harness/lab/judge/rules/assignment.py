"""Lab files (labs/NAME.toml): what students implement, what each submission is timed beside,
the correctness gate and the per-submission limits. Validated like study files: an unknown key
is an error naming the file, the table and the allowed keys.

    [lab]      name, title, rung (the API level students implement), module (default lenet.py),
               class ("" = the module's one harness.base.LeNet subclass), device, dtype,
               references (registry names, "name/variant", or "floor": the device's fastest measured
               implementation, named when the file is read), rank_by (default: the first reference),
               allow_imports (the project's level packages a submission may import; default none),
               starter (the folder handed out: relative to the lab file's folder, else the checkout's
               labs/; default "template"), task ("inference", default: predict; "training": one SGD
               step, a harness.base.Trainer, harness.lab.judge.phases.training)
    [measure]  calls (timed calls per participant, split over rounds), rounds, warmup, batch_size,
               threads
    [gate]     images (first N test images), min_agree (default: all of them), max_abs_diff,
               slow_images (default 1000: a submission past max_ratio in the probe is gated on its
               first slow_images only, then too-slow; its gate points: [grade] slow_gate_points); for
               training: steps and batch (the first steps x batch training images in order, from the
               shared initial weights), max_rel_loss (each step's loss) and max_abs_diff (every weight
               after each step; both default to verify-train's 1e-4)
    [limits]   wall_s (the grader's whole wait on one submission), import_s (import + construction),
               memory_mb (the worker's cgroup; also RLIMIT_AS on the CPU, resident memory watched on
               the GPU), cpu_s (RLIMIT_CPU), max_ratio (slower than this x rank_by in the probe before
               the full gate, or in the warm-up: too-slow, not timed), pids (processes and threads,
               the cgroup's pids.max), output_mb
               (RLIMIT_FSIZE: any one file it writes, its log included), disk_mb and files (its
               writable space: its folder's copy, /tmp and /dev/shm on one tmpfs of that size and
               that many inodes, harness.lab.box.walls.disk; without root, bwrap's tmpfs: size only),
               peak_mb (default none: no gate; the most MiB the worker's measured peak memory may
               reach, over its whole run, read from outside it: harness.lab.box.proc.peak; past it an
               otherwise ok submission is over-memory, not ranked; at most memory_mb)
    [stages]   stage = points, ... (harness.lab.judge.rules.stages: for inference conv1, pool1, conv2,
               pool2, fc1, fc2, fc3, softmax; for training each layer's gradient): a submission that
               fails the gate gets the points of the stages it gets right, at most gate_points in all
               (a lab without it grades all or nothing)
    [grade]    gate_points, speed_points, speed ("linear": full_at, zero_at; or "tiers"), due,
               late_per_day, late_max_days, slow_gate_points (default true) (see Grade;
               harness.lab.term.marks.points computes them)

    load(name_or_path) -> Lab       a lab of labs/ by name, or a lab file by path
    parse(text, where) -> Lab       a lab file's text; `where` names it in errors
    Lab                             the lab: its [lab] keys, and .measure, .gate, .limits, .starter, .kernels
    Measure, Gate, Limits, Grade    the other tables, one record each (read and checked by
                                    harness.lab.judge.rules.tables)
    Reference                       a reference implementation: .implementation, .variant, .label
    parse_reference, floor_named(text) ("floor" -> the fastest measured "name/variant")
"""

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import ROOT, registry
from harness.errors import HarnessError
from harness.lab.judge.rules import kinds
from harness.lab.judge.rules import stages as stage_rules
from harness.lab.judge.rules.tables import (
    Gate,
    Grade,
    Limits,
    Measure,
    fail,
    read_gate,
    read_grade,
    read_limits,
    read_measure,
)
from harness.measure.fastest_call import fastest_measured
from harness.measure.plan import study

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

LABS_DIR = ROOT / "labs"
# the API levels a lab's rung may name: every level of the registry's (a new level is a new rung)
API_LEVELS = tuple(dict.fromkeys(spec.api_level for spec in registry.REGISTRY.values() if spec.package))
DEFAULTS: dict[str, dict[str, Any]] = {
    "lab": {"name": None, "title": "", "rung": "numpy", "module": "lenet.py", "class": "",
            "device": "cpu", "dtype": "float32", "references": ["numpy"], "rank_by": None,
            "allow_imports": [], "starter": "template", "task": "inference"},
    "measure": {"calls": 300, "rounds": 10, "warmup": 20, "batch_size": 1, "threads": 1},
    "gate": {"images": 10000, "min_agree": None, "max_abs_diff": 1e-4, "slow_images": 1000, "steps": 3,
             "batch": 32, "max_rel_loss": 1e-4},
    "limits": {"wall_s": 600, "import_s": 120, "memory_mb": 4096, "cpu_s": 900, "max_ratio": 100,
               "pids": 64, "output_mb": 16, "disk_mb": 256, "files": 4096, "peak_mb": None},
    "grade": {"gate_points": 60, "speed_points": 40, "speed": "linear", "full_at": 1.0, "zero_at": 4.0,
              "tiers": [], "due": None, "late_per_day": 0, "late_max_days": 7, "slow_gate_points": True},
}


@dataclass(frozen=True)
class Reference:
    implementation: str
    variant: str

    @property
    def label(self) -> str:
        """As a lab file writes it: `numpy`, `onednn/tuned`."""
        return self.implementation if self.variant == "default" else f"{self.implementation}/{self.variant}"


@dataclass(frozen=True)
class Lab:
    name: str
    title: str
    rung: str
    module: str
    class_name: str
    device: str
    dtype: str
    references: tuple[Reference, ...]
    rank_by: Reference
    allow_imports: tuple[str, ...]  # level packages (lenet_*) a submission may import
    measure: Measure
    gate: Gate
    limits: Limits
    source: str  # the TOML text (copied next to the results, read by Slurm tasks)
    path: str
    grade: Grade = Grade()
    starter_name: str = "template"  # [lab] starter, as the file wrote it
    stages: tuple[tuple[str, float], ...] = ()  # [stages]: (name, points) in network order
    task: str = "inference"  # or "training": one SGD step (harness.lab.judge.phases.training)

    @property
    def kind(self) -> kinds.Kind:
        """Its kind of task (harness.lab.judge.rules.kinds): what differs between kinds of lab."""
        return kinds.of(self.task, self.rung)

    @property
    def gate_rule(self) -> str:
        """The gate's rule in words (the leaderboard's, the feedback's)."""
        return self.kind.gate_rule(self.gate)

    def reference(self, label: str) -> Reference:
        return next(r for r in self.references if r.label == label)

    @property
    def kernels(self) -> bool:
        """Its students write CUDA C kernels (its kind is harness.lab.judge.rules.kinds.KERNELS)."""
        return self.kind is kinds.KERNELS

    @property
    def starter(self) -> Path:
        """The starter folder students are handed (the kit's, similarity's boilerplate): [lab] starter,
        relative to the lab file's own folder (a course's lab folder), else to the checkout's labs/ (a
        grading's copy of a shipped lab file); a folder found nowhere is an error naming both."""
        for base in (Path(self.path).parent, LABS_DIR):
            folder = base / self.starter_name
            if folder.is_dir():
                return folder
        raise HarnessError(f"{self.path} [lab]: starter: no folder {self.starter_name!r} beside the lab file "
                           f"({Path(self.path).parent}) nor in {LABS_DIR}")


def parse_reference(where: str, text: object, device: str) -> Reference:
    if not isinstance(text, str):
        fail(where, f"references: expected 'name' or 'name/variant' strings, found {text!r}")
    name, _, variant = text.partition("/")
    try:
        spec = registry.spec(name)
    except HarnessError as exc:
        fail(where, f"references: {exc}")
    if device not in spec.devices:
        fail(where, f"references: {name} does not run on {device!r}; it runs on {list(spec.devices)}")
    variant = variant or spec.variants[0]
    if variant not in spec.variants_for(device):
        fail(where, f"references: unknown variant {variant!r} of {name}; "
                     f"allowed: {list(spec.variants_for(device))}")
    if variant in spec.resident:  # its kernel would spin on SMs the class's workers share
        fail(where, f"references: {name}/{variant} keeps a kernel resident on the GPU between calls, which "
                     f"a class's shared GPU cannot live with; allowed: "
                     f"{[v for v in spec.variants_for(device) if v not in spec.resident]}")
    return Reference(name, variant)


def floor_named(text: str) -> str:
    """The lab file's text with a "floor" reference (references, rank_by) replaced by the device's
    fastest measured implementation, "name/variant" (harness.measure.fastest_call), read once: the grading's
    copy of the file, its rows and its leaderboard name the same concrete label. Text that is no
    valid TOML or names no floor comes back as it is (parse says what is wrong)."""
    try:
        head = tomllib.loads(text).get("lab")
    except tomllib.TOMLDecodeError:
        return text
    if not isinstance(head, dict):
        return text
    refs = head.get("references")
    named = [*(refs if isinstance(refs, list) else [refs]), head.get("rank_by")]
    device = head.get("device", DEFAULTS["lab"]["device"])
    if "floor" not in named or device not in registry.DEVICES:
        return text
    label = fastest_measured(device, shared=True).label  # never a resident kernel where a class runs
    return re.sub(r"""(["'])floor\1""", lambda quoted: f"{quoted[1]}{label}{quoted[1]}", text)


def load(name_or_path: str) -> Lab:
    path = study.existing_toml(LABS_DIR, "lab", name_or_path)
    return parse(path.read_text(), str(path))


def parse(text: str, where: str = "<lab>") -> Lab:
    text = floor_named(text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HarnessError(f"{where}: TOML syntax error: {exc}") from None
    tables = _tables({k: v for k, v in data.items() if k != "stages"}, where)
    head = tables["lab"]
    try:
        kind = kinds.of(head["task"], head["rung"])
    except HarnessError as exc:
        fail(f"{where} [lab]", str(exc))
    stages = stage_rules.read(data.get("stages", {}), f"{where} [stages]", kind.stage_names)
    references, rank_by = _references(head, f"{where} [lab]")
    measure = read_measure(tables["measure"], f"{where} [measure]")
    gate = read_gate(tables["gate"], f"{where} [gate]")
    limits = read_limits(tables["limits"], f"{where} [limits]")
    allow = _allow_imports(head["allow_imports"], f"{where} [lab]")
    grade = read_grade(tables["grade"], f"{where} [grade]")
    if sum(points for _, points in stages) > grade.gate_points:
        fail(f"{where} [stages]", f"expected points adding up to at most [grade] gate_points "
                                  f"({grade.gate_points:g}), found {sum(p for _, p in stages):g}")
    return Lab(head["name"] or Path(where).stem, head["title"], head["rung"], head["module"], head["class"],
               head["device"], head["dtype"], references, rank_by, allow, measure, gate, limits, text, where,
               grade, head["starter"], stages, head["task"])


def _tables(data: dict, where: str) -> dict[str, dict]:
    """Each table's keys over its defaults; an unknown table or key is an error."""
    unknown = sorted(set(data) - set(DEFAULTS))
    if unknown:
        fail(where, f"unknown table(s) {unknown}; allowed: {sorted([*DEFAULTS, 'stages'])}")
    tables = {}
    for table, defaults in DEFAULTS.items():
        given = data.get(table, {})
        if not isinstance(given, dict):
            fail(f"{where} [{table}]", f"expected a table, found {type(given).__name__}")
        unknown = sorted(set(given) - set(defaults))
        if unknown:
            fail(f"{where} [{table}]", f"unknown key(s) {unknown}; allowed: {sorted(defaults)}")
        tables[table] = {**defaults, **given}
    return tables


def _references(head: dict, at: str) -> tuple[tuple[Reference, ...], Reference]:
    """The [lab] table checked; (its references, rank_by)."""
    for key in ("title", "module", "class", "starter"):
        if not isinstance(head[key], str):
            fail(at, f"{key}: expected a string, found {head[key]!r}")
    if not head["module"].endswith(".py") or "/" in head["module"]:
        fail(at, f"module: expected a file name ending in .py (e.g. lenet.py), found {head['module']!r}")
    if not head["starter"] or Path(head["starter"]).is_absolute() or ".." in Path(head["starter"]).parts:
        fail(at, f"starter: expected a folder relative to the lab file (e.g. template), found "
                 f"{head['starter']!r}")
    if head["rung"] not in API_LEVELS:
        fail(at, f"rung: unknown API level {head['rung']!r}; allowed: {list(API_LEVELS)}")
    if head["device"] not in registry.DEVICES:
        fail(at, f"device: unknown {head['device']!r}; allowed: {list(registry.DEVICES)}")
    if head["dtype"] not in ("float32", "float64"):
        fail(at, f"dtype: expected 'float32' or 'float64', found {head['dtype']!r}")
    refs = head["references"] if isinstance(head["references"], list) else [head["references"]]
    if not refs:
        fail(at, "references: expected at least one reference implementation")
    references = tuple(parse_reference(at, r, head["device"]) for r in refs)
    wrong = kinds.of(head["task"], head["rung"]).check_references(
        [r.label for r in references], [n for n, s in registry.REGISTRY.items() if s.trainer])
    if wrong:
        fail(at, wrong)
    labels = [r.label for r in references]
    if len(set(labels)) != len(labels):
        fail(at, f"references: listed twice: {labels}")
    if head["rank_by"] is None:
        return references, references[0]
    wanted = parse_reference(at, head["rank_by"], head["device"]).label
    if wanted not in labels:
        fail(at, f"rank_by: {head['rank_by']!r} is not one of the references {labels}")
    return references, references[labels.index(wanted)]


def _allow_imports(allow: object, at: str) -> tuple[str, ...]:
    packages = sorted({s.package for s in registry.REGISTRY.values() if s.package})
    if not isinstance(allow, list) or any(a not in packages for a in allow):
        fail(at, f"allow_imports: expected a list of the project's level packages {packages}, "
                  f"found {allow!r}")
    return tuple(allow)
