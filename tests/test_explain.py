"""`python -m harness explain`: the stage arithmetic on synthetic timings, and a real run for
every CPU implementation."""

import importlib.util
import json
import platform
import subprocess
import sys

import numpy as np
import pytest

from harness import registry
from harness.explain import child, keras_steps, ladder
from harness.measure.fastest_call import fastest_measured
from harness.measure.store import results
from harness.report.sections import explain_section
from tests.conftest import ROOT, harness_in_process

LADDER = [{"step": "predict", "removes": "pipeline"}, {"step": "predict_on_batch", "removes": "loop"},
          {"step": "floor", "removes": "arithmetic"}]


def rounds(value, n=3, k=4):
    return [[value] * k for _ in range(n)]


def test_ladder_stages_are_neighbour_differences_and_sum_to_the_top_step():
    stages = ladder.ladder_stages(LADDER, {"predict": rounds(1000.0), "predict_on_batch": rounds(300.0),
                                            "floor": rounds(100.0)})
    assert [s["ns"] for s in stages] == [700.0, 200.0, 100.0]
    assert [s["name"] for s in stages] == ["pipeline", "loop", "arithmetic"]
    assert [s["to"] for s in stages] == ["predict_on_batch", "floor", None]
    assert sum(s["share"] for s in stages) == pytest.approx(1.0)
    assert sum(s["ns"] for s in stages) == 1000.0


def test_a_noisy_step_gives_a_negative_stage_that_is_kept_not_hidden():
    stages = ladder.ladder_stages(LADDER, {"predict": rounds(1000.0), "predict_on_batch": rounds(1100.0),
                                            "floor": rounds(100.0)})
    assert stages[0]["ns"] == -100.0 and sum(s["share"] for s in stages) == pytest.approx(1.0)


def internal(stage_values, predict):
    return {"stages": [{"name": f"s{i}", "rounds_ns": rounds(v)} for i, v in enumerate(stage_values)],
            "predict_rounds_ns": rounds(predict)}


def test_internal_breakdown_shows_other_and_is_accepted_within_ten_percent():
    done = ladder.internal_stages(internal([500.0, 300.0, 150.0], 1000.0))
    assert done["stages"][-1] == {"name": "other", "ns": 50.0, "share": 0.05}
    assert sum(s["share"] for s in done["stages"]) == pytest.approx(1.0)
    assert done["accepted"] and done["sum_ns"] == 950.0


@pytest.mark.parametrize("values", [[500.0, 300.0], [700.0, 450.0]])  # 80% and 115% of predict
def test_internal_breakdown_off_by_more_than_ten_percent_is_rejected(values):
    done = ladder.internal_stages(internal(values, 1000.0))
    assert not done["accepted"]
    assert sum(s["share"] for s in done["stages"]) == pytest.approx(1.0)  # 'other' takes the rest


def test_levels_with_nothing_to_peel_have_one_stage_called_model():
    assert keras_steps.ladder("numpy", "default") == [("default", "model", "model")]
    assert keras_steps.ladder("keras", "xla")[-1] == keras_steps.FLOOR_RUNG
    for name, steps in keras_steps.LADDERS.items():
        variants = registry.REGISTRY[name].variants
        assert all(step in variants or step == "predict_dataset" for step, *_ in steps), name


def test_report_section_is_generated_from_rows():
    row = {"implementation": "keras", "variant": "predict", "device": "cpu", "machine": "m",
           "steps": [{"step": "predict", "median_ns": 1e6}],
           "stages": ladder.ladder_stages(LADDER, {"predict": rounds(1e6), "predict_on_batch": rounds(3e5),
                                                    "floor": rounds(1e5)}),
           "counts": {"function_calls": 5000, "iterators_created": 2, "datasets_created": 7,
                      "tf_function_traces": 0}}
    text = "\n".join(explain_section.section([row]))
    assert "one call takes 1 ms" in text and "pipeline 700 µs (70%)" in text
    assert "creates 7 tf.data datasets and 2 iterators" in text and "tensorflow/tensorflow#33340" in text


# The CPU levels in two halves of about equal time, each explained by its own test: the second
# half is a group of its own (xdist_group), so the two can run on two workers at once.
HALVES = {"ops-keras": ("null", "numpy", "tf", "jax", "torch", "keras", "keras_jax", "onnx"),
          "keras_torch-compiled": ("keras_torch", "onednn", "numba", "c")}


def test_the_halves_hold_every_cpu_level_once():
    names = [n for n, spec in registry.REGISTRY.items() if "cpu" in spec.devices]
    assert sorted(n for half in HALVES.values() for n in half) == sorted(names)


@pytest.mark.slow
@pytest.mark.parametrize("half", [pytest.param("ops-keras"), pytest.param("keras_torch-compiled",
                                                                      marks=pytest.mark.xdist_group("test_explain.py:2"))])
def test_explain_runs_for_every_cpu_implementation(half, tmp_path, capsys):
    """The command in this process (its children are processes, one per level, as always)."""
    pytest.importorskip("torch", reason="PyTorch is not installed (make install EXTRAS=dev,torch)")
    names = HALVES[half]
    run = harness_in_process(capsys, "explain", ",".join(names), "--calls", "6", "--rounds", "2", "--out", tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    (run_dir,) = (tmp_path / "explain").iterdir()
    rows = {r["implementation"]: r for r in results.read_rows(run_dir)}
    assert set(rows) == set(names)
    for name, row in rows.items():
        assert sum(s["share"] for s in row["stages"]) == pytest.approx(1.0), name
        assert np.isclose(sum(s["ns"] for s in row["stages"]), row["steps"][0]["median_ns"]), name
    json.dumps(rows)  # rows are plain JSON
    # the floor is the fastest measured implementation on the CPU (harness.measure.fastest_call: oneDNN's
    # tuned variant in the committed rows, whose wheel exists on x86_64), in the same rounds
    floor = fastest_measured("cpu").label if platform.machine() == "x86_64" else "numpy/default"
    if half != "ops-keras":
        return
    assert [s["name"] for s in rows["numpy"]["stages"]] == ["model"]
    assert rows["keras"]["floor"] == floor and rows["torch"]["floor"] == floor
    assert rows["keras"]["stages"][-1]["name"] == f"the fastest measured implementation on this device ({floor})" \
        or floor == "numpy/default"
    assert [s["step"] for s in rows["keras"]["steps"]] == ["predict", "predict_dataset", "predict_on_batch",
                                                          "function", "xla", "floor"]
    keras_internal = rows["keras"]["internal"]
    assert keras_internal["stages"][-1]["name"] == "other"
    assert sum(s["share"] for s in keras_internal["stages"]) == pytest.approx(1.0)
    assert rows["keras"]["counts"]["datasets_created"] > 0 and rows["keras_jax"]["counts"]["datasets_created"] == 0
    assert "tensorflow" not in rows["keras_jax"]["frameworks"]
    # each child imports its ladder's frameworks alone, though TensorFlow and Keras would import JAX
    assert rows["tf"]["frameworks"] == ["tensorflow"] and rows["keras"]["frameworks"] == ["tensorflow", "keras"]
    assert "(a) ablation ladder" in run.stdout and "(b) Keras predict's own steps" in run.stdout


def test_a_module_kept_out_of_a_child_is_as_if_not_installed(monkeypatch):
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setattr(child.KeptOut, "modules", child.KeptOut.modules)
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    child.keep_out(["colorsys"])  # a standard module, installed everywhere
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("colorsys")
    assert importlib.util.find_spec("colorsys") is None and "colorsys" not in sys.modules
    assert importlib.util.find_spec("wave") is not None  # the others are found as before


def test_a_child_keeps_out_every_framework_but_its_ladders(monkeypatch):
    from harness.measure import fastest_call

    monkeypatch.setattr(fastest_call, "fastest_measured", lambda device: fastest_call.Fastest("numba", "fused", 2e4, "r"))
    assert set(registry.frameworks()) - set(keras_steps.unused_frameworks("keras", "predict", "cpu")) \
        == {"keras", "tensorflow", "numba"}
    assert set(registry.frameworks()) - set(keras_steps.unused_frameworks("numpy", "default", "cpu")) == set()


def test_the_onnx_child_can_still_export_the_model_its_engines_run():
    """An explain child of the ONNX level keeps out the other levels' frameworks, but not the Keras
    and TensorFlow its first run looks for to export the model (with an empty ONNX cache)."""
    code = ("from harness.explain import child, keras_steps; "
            "child.keep_out(keras_steps.unused_frameworks('onnx', 'run', 'cpu')); "
            "from lenet_onnx import export; print(export.missing_exporter())")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_a_target_whose_framework_is_missing_is_said_and_the_others_still_run(monkeypatch, tmp_path, capsys):
    """explain's targets each on their own: one that cannot run here (Unavailable) is said and left out
    of the rows, the others are written, exit 3; any other error stops the command (exit 2)."""
    from harness.errors import HarnessError, Unavailable

    def explain(target, *args):
        if target == "gone/x":
            raise Unavailable("cannot import 'gone'")
        if target == "bad/x":
            raise HarnessError("bad/x: unknown level")
        return {"target": target}

    written = []
    monkeypatch.setattr(ladder, "explain", explain)
    monkeypatch.setattr(ladder, "table", lambda row: [row["target"]])
    monkeypatch.setattr(ladder, "write", lambda rows, out: written.extend(rows) or out)
    run = harness_in_process(capsys, "explain", "gone/x,numpy/default", "--out", tmp_path)
    assert run.returncode == 3
    assert "gone/x: not explained here: cannot import 'gone'" in run.stderr and "could not run here: gone/x" in run.stderr
    assert written == [{"target": "numpy/default"}]
    run = harness_in_process(capsys, "explain", "bad/x,numpy/default")
    assert run.returncode == 2 and "ERROR: bad/x: unknown level" in run.stderr
