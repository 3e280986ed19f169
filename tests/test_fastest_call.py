"""The floor of a device (harness.measure.fastest_call): the fastest measured implementation, read from
result rows, never named in code; explain's floor step and a lab file's `floor` reference ask it."""

import json
from pathlib import Path

import pytest

from harness import registry
from harness.errors import Unavailable
from harness.explain import keras_steps
from harness.lab.judge.rules import assignment
from harness.measure import fastest_call
from harness.measure.store import runfolder, stats
from harness.report.sections import explain_section
from tests.conftest import ROOT


def cell(impl: str, variant: str, median_ns: float | None, status: str = "ok", device: str = "cpu",
         batch: int = 1, dtype: str = "float32", time: float = 1.0) -> dict:
    spec = {"implementation": impl, "variant": variant, "device": device, "batch_size": batch,
            "dtype": dtype}
    return {"schema": 1, "kind": "cell", "time": time, "cell_id": f"{impl}/{variant}/{device}/b{batch}/{dtype}",
            "cell": spec, "status": status, "rounds_ns": [] if median_ns is None else [[int(median_ns)] * 3] * 5,
            "stats": None if median_ns is None else {"median_ns": median_ns}}


def write_run(root: Path, run_id: str, rows: list[dict], study: str = "api_levels") -> None:
    run_dir = root / study / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "results.jsonl").write_text("".join(json.dumps({**r, "run_id": run_id}) + "\n" for r in rows))
    runfolder.mark_complete(run_dir, "a test's run", order=min(r["time"] for r in rows))


def test_the_fastest_ok_cell_wins_and_the_others_are_ignored(tmp_path):
    write_run(tmp_path, "r1", [
        cell("onednn", "tuned", 30_000.0), cell("numba", "fused", 21_000.0),
        cell("onnx", "run", 5_000.0, status="failed"), cell("cuda", "graph", None, status="skipped"),
        cell("numba", "layers", 1_000.0, batch=64), cell("numpy", "default", 900.0, dtype="float64"),
        cell("cudnn", "graph", 800.0, device="gpu"), cell("null", "default", 500.0),  # does no arithmetic
        cell("labs.x:Student", "default", 400.0)])  # a lab class is no candidate
    found = fastest_call.fastest_measured("cpu", tmp_path)
    assert (found.label, found.median_ns, found.run_id) == ("numba/fused", 21_000.0, "r1")
    assert fastest_call.fastest_measured("gpu", tmp_path).label == "cudnn/graph"


@pytest.mark.parametrize("version", [None, stats.SUMMARY_VERSION])
def test_the_floor_ranks_by_the_rows_raw_times_never_their_saved_statistics(tmp_path, version):
    """A row's saved `stats` is a copy made by the code of its day (no stats_version, or another): the
    floor summarizes the raw times with measure's own summary (cells.row_summary), the one the report
    reads; a saved summary of today's version that cannot be its times' is computed again too."""
    lying = {**cell("numba", "fused", 50_000.0), "stats": {"median_ns": 1.0}}  # saved: 1 ns
    if version is not None:
        lying["stats_version"] = version
    write_run(tmp_path, "r1", [lying, cell("onednn", "tuned", 30_000.0)])
    found = fastest_call.fastest_measured("cpu", tmp_path)
    assert (found.label, found.median_ns) == ("onednn/tuned", 30_000.0)
    lying.pop("stats_version", None)
    assert fastest_call.median_ns(lying) == stats.summarize(lying["rounds_ns"])["median_ns"] == 50_000.0


def test_the_newest_run_measuring_the_device_and_a_cells_last_row_count(tmp_path):
    write_run(tmp_path, "old", [cell("numba", "fused", 10_000.0, time=1.0)])
    write_run(tmp_path, "new", [cell("onednn", "tuned", 30_000.0, time=2.0), cell("onnx", "run", 20_000.0, time=2.0),
                                cell("onnx", "run", 40_000.0, time=3.0)])  # onnx/run measured again (--resume)
    write_run(tmp_path, "newest-gpu", [cell("cudnn", "graph", 60_000.0, device="gpu", time=5.0)])
    write_run(tmp_path, "other-study", [cell("numba", "fused", 1.0, time=9.0)], study="batch_sweep")
    assert fastest_call.fastest_measured("cpu", tmp_path).label == "onednn/tuned"


def test_nothing_measured_gives_the_registrys_first_candidate(tmp_path):
    write_run(tmp_path, "r1", [cell("onednn", "tuned", None, status="failed")])
    for device in registry.DEVICES:
        first = next(f"{s.name}/{v}" for s in registry.REGISTRY.values() for v in s.stand_ins
                     if device in s.devices and v in s.variants_for(device))
        found = fastest_call.fastest_measured(device, tmp_path / "nothing-here")
        assert found.label == first and found.median_ns is None and found.run_id is None
        assert fastest_call.fastest_measured(device, tmp_path).label == first
    assert fastest_call.standing_in("cpu").label == "onednn/tuned"  # as before the floor was measured


def test_the_committed_rows_floor_is_their_fastest_cpu_cell():
    """Whichever rung the committed api_levels run measured fastest on the CPU (it was onednn/tuned
    until the hand-written rung ran): a measured cell, none of its ok batch-1 neighbours faster."""
    cpu = fastest_call.fastest_measured("cpu")
    assert cpu.median_ns is not None and cpu.run_id is not None
    cells = fastest_call.measured_cells("cpu")
    assert {row["run_id"] for row in cells} == {cpu.run_id} and len(cells) >= 5
    assert min(fastest_call.median_ns(row) for row in cells) == cpu.median_ns
    assert any(f'{row["cell"]["implementation"]}/{row["cell"]["variant"]}' == cpu.label for row in cells)


# --- explain: the floor step names what it ran ----------------------------------------------------
class Fake:
    def __init__(self, weights, device="cpu", variant=None, dtype="float32"):
        self.variant = variant

    def predict(self, images):
        return images


def test_explains_floor_step_names_the_fastest_measured_implementation(monkeypatch):
    monkeypatch.setattr(fastest_call, "fastest_measured", lambda device: fastest_call.Fastest("numba", "fused", 2e4, "r"))
    monkeypatch.setattr(registry, "create", lambda name, *a, **k: Fake(*a, **k))
    _, (ran, rung) = keras_steps.floor_call("w.h5", "cpu")
    assert ran == "numba/fused"
    assert rung[1] == "the fastest measured implementation on this device (numba/fused)"
    assert keras_steps.ladder("tf", "xla", rung)[-1] == rung
    assert "arithmetic" not in rung[1] + rung[2]


def test_explains_floor_falls_back_to_numpy_and_says_so(monkeypatch):
    def create(name, *args, **kwargs):
        if name != "numpy":
            raise Unavailable("no wheel here")
        return Fake(*args, **kwargs)

    monkeypatch.setattr(fastest_call, "fastest_measured", lambda device: fastest_call.Fastest("onednn", "tuned", 3e4, "r"))
    monkeypatch.setattr(registry, "create", create)
    _, (ran, rung) = keras_steps.floor_call("w.h5", "cpu")
    assert ran == "numpy/default"
    assert rung[1] == ("the NumPy reference (numpy/default), standing in for the fastest measured "
                       "implementation on this device (onednn/tuned), which cannot run here")


def test_the_reports_method_names_the_floors_the_rows_recorded():
    rows = [{"device": "cpu", "floor": "numba/fused"}, {"device": "cpu", "floor": None},
            {"device": "gpu", "floor": "cudnn/graph"}]
    text = explain_section.method(rows)
    assert ("(the fastest implementation measured when the explain run chose it, not the arithmetic: "
            "`numba/fused` on the CPU, "
            "cuDNN replayed as one CUDA graph on the GPU; timed in the same process") in text
    assert "not the arithmetic; timed" in explain_section.method([{"device": "cpu", "floor": None}])


# --- a lab file's `floor` reference ---------------------------------------------------------------
LAB = (ROOT / "labs" / "cpu_numpy.toml").read_text()


def test_the_shipped_cpu_lab_names_the_floor_and_reads_it_as_a_concrete_label():
    assert 'references = ["numpy", "floor"]' in LAB
    lab = assignment.parse(LAB, "labs/cpu_numpy.toml")
    assert [r.label for r in lab.references] == ["numpy", fastest_call.fastest_measured("cpu").label]
    assert "floor" not in [r.label for r in lab.references]


def test_a_floor_reference_resolves_once_into_the_labs_own_text(monkeypatch):
    asked = []

    def fastest(device, shared=False):
        asked.append((device, shared))  # a lab's floor is asked as for a shared GPU: never resident
        return fastest_call.Fastest("numba", "fused", 2e4, "r")

    monkeypatch.setattr(assignment, "fastest_measured", fastest)
    text = LAB.replace('rank_by = "numpy"', "rank_by = 'floor'")
    lab = assignment.parse(text, "lab.toml")
    assert [r.label for r in lab.references] == ["numpy", "numba/fused"] and lab.rank_by.label == "numba/fused"
    assert asked == [("cpu", True)]
    # the grading's copy of the file (lab.source) keeps the concrete name: re-read, it asks nothing
    assert "'numba/fused'" in lab.source and '"floor"' not in lab.source
    assert [r.label for r in assignment.parse(lab.source, "copy.toml").references] == ["numpy", "numba/fused"]
    assert asked == [("cpu", True)]


def test_a_lab_without_a_floor_reference_never_asks_for_one(monkeypatch):
    monkeypatch.setattr(assignment, "fastest_measured", lambda device, shared=False: pytest.fail("asked for the floor"))
    text = LAB.replace('"floor"', '"onednn/tuned"')
    assert assignment.parse(text, "lab.toml").source == text
