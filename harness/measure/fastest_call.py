"""The fastest call of a device: its fastest measured implementation, read from the committed result
rows (the report's words and a lab file's `floor` reference still call it the device's floor).

Code that needs it (explain's last rung, a lab's `floor` reference) asks here and never
names an implementation. The answer is the cell with the lowest median (its summary, saved with its row
or computed from its raw times: harness.measure.plan.cells.row_summary) among the final cell rows
(status ok, batch 1, float32) of the newest complete `api_levels` run that measured the device; the null
level (it does no arithmetic) and lab classes are no candidates. With nothing measured, the
registry's stand-ins (ImplSpec.stand_ins) stand in: the first one that runs on the device, in
the registry's order. The same files always give the same answer.

    Fastest                                 implementation, variant, median_ns (None: a stand-in)
    fastest_measured(device, results, run_id)   the fastest call of `device` (run_id: of that run)
    measured_cells(device, results, run_id)     the cells it chooses from
    standing_in(device)                     the stand-in when nothing is measured
"""

from dataclasses import dataclass
from pathlib import Path

from harness import DEFAULT_RESULTS, registry
from harness.errors import HarnessError
from harness.measure.plan import cells, narrow
from harness.measure.store import results, rowfile, rows, runfolder

STUDY = "api_levels"  # every level at batch 1 in the same rounds: the study the fastest call is read from
BATCH, DTYPE = 1, "float32"


@dataclass(frozen=True)
class Fastest:
    implementation: str
    variant: str
    median_ns: float | None  # per call, from the rows; None: nothing measured, a candidate stands in
    run_id: str | None  # the api_levels run it was read from

    @property
    def label(self) -> str:
        return f"{self.implementation}/{self.variant}"


def fastest_measured(device: str, root: Path = DEFAULT_RESULTS, run_id: str | None = None,
                     shared: bool = False) -> Fastest:
    """The fastest measured implementation on `device` (see the module's docstring); run_id: read
    that api_levels run instead of the newest (the report, for a machine named by MACHINE=); shared:
    for a GPU that a class shares (a lab), no variant whose kernel stays resident (ImplSpec.resident)."""
    candidates = [row for row in measured_cells(device, root, run_id) if not (
        shared and row["cell"]["variant"] in registry.spec(row["cell"]["implementation"]).resident)]
    if not candidates:
        return standing_in(device, shared)
    medians = [(median_ns(row), row["cell_id"], row) for row in candidates]
    median, _, best = min(medians, key=lambda found: found[:2])
    return Fastest(best["cell"]["implementation"], best["cell"]["variant"], median, best.get("run_id"))


def median_ns(row: dict) -> float:
    """A measured cell row's median per call (cells.row_summary)."""
    found = cells.row_summary(row)
    if found is None:
        raise HarnessError(f"cell {row.get('cell_id')}: no timed call to take a median of")
    return float(found["median_ns"])


def measured_cells(device: str, root: Path = DEFAULT_RESULTS, run_id: str | None = None) -> list[dict]:
    """The final ok cell rows at batch 1, float32, on `device`, of registered levels that compute,
    from the newest complete api_levels run (in this checkout's order: runfolder) that has any, or
    from run_id's."""
    runs = []
    for run_dir in rowfile.run_dirs(root, f"{STUDY}/{run_id or '*'}"):
        order = runfolder.order(run_dir)
        if order is None:
            continue  # a partial run (killed, or still running) never answers
        if narrow.run_is_narrowed(run_dir):  # a quick run of some cells never answers
            continue
        runs.append((order, run_dir.name, run_dir))
    # newest first, and only until one answers: a lab's grader asks at start, and reading every
    # committed run's rows took seconds
    for *_, run_dir in sorted(runs, reverse=True):
        # a cell measured again (--resume): its last row is final
        final = {row["cell_id"]: row for row in results.read_rows(run_dir) if row.get("kind") == "cell"}
        found = [row for row in final.values() if _candidate(row, device)]
        if found:
            return found
    return []


def _candidate(row: dict, device: str) -> bool:
    cell = row.get("cell") or {}
    name = cell.get("implementation")
    return (rows.measured(row) and cell.get("device") == device and cell.get("batch_size") == BATCH
            and cell.get("dtype") == DTYPE and registry.computes(name))


def standing_in(device: str, shared: bool = False) -> Fastest:
    """The first stand-in (ImplSpec.stand_ins) that runs on `device`, in the registry's order
    (shared: none whose kernel stays resident)."""
    for spec in registry.REGISTRY.values():
        for variant in spec.stand_ins:
            if device in spec.devices and variant in spec.variants_for(device) and not (
                    shared and variant in spec.resident):
                return Fastest(spec.name, variant, None, None)
    raise HarnessError(f"no stand-in for the fastest call runs on {device!r}: mark one in the registry "
                       "(ImplSpec.stand_ins)")
