import dataclasses

import pytest

from harness import registry
from harness.errors import HarnessError
from harness.measure.plan import study
from harness.measure.store import stats

MINIMAL = """
[measure]
calls = 10
rounds = 2
[[cells]]
implementation = "numpy"
"""


def test_all_shipped_studies_parse():
    names = study.available()
    assert {"smoke", "api_levels", "overhead", "batch_sweep", "precision"} <= set(names)
    for name in names:
        assert study.load(name).cells


def test_grid_expands_variants_devices_batches_dtypes():
    s = study.parse("""
[measure]
calls = 100
rounds = 5
max_images = 1000
batch_sizes = [1, 512]
dtypes = ["float32", "float64"]
[[cells]]
implementation = "tf"
variants = "all"
devices = ["cpu", "gpu"]
""")
    assert len(s.cells) == 3 * 2 * 2 * 2
    calls = {c.batch_size: c.calls for c in s.cells}
    assert calls == {1: 100, 512: 50}  # ceil(1000/512) = 2, but never fewer than 10 (min_calls_per_round) a round
    assert s.cells[0].id == "tf/function/cpu/b1/float32" and s.cells[0].group == "tf/cpu"


def test_api_levels_has_3_processes_per_cell_and_cold_start():
    """Every cell the headline prints is measured in at least 3 fresh processes (stats.MIN_PROCESSES)."""
    s = study.load("api_levels")
    assert all(c.processes >= stats.MIN_PROCESSES and c.calls >= 300 and c.batch_size == 1 for c in s.cells)
    sweep = study.load("batch_sweep")  # the headline's GPU throughput
    assert all(c.processes >= stats.MIN_PROCESSES for c in sweep.cells if c.device == "gpu")
    assert {c.implementation for c in s.cells} >= {"numpy", "tf", "jax", "torch", "keras", "keras_jax",
                                                    "keras_torch", "cudnn", "cuda"}
    assert {(c.implementation, c.variant) for c in s.cells if c.device == "gpu"} >= {
        ("cuda", "fused"), ("cuda", "graph"), ("cudnn", "graph")}  # the hand-written rung at the ladder's foot


def test_overhead_covers_every_variant_on_the_devices_it_runs_on():
    s = study.load("overhead")
    cells = {(c.implementation, c.variant, c.device) for c in s.cells}
    for name in ("keras", "tf", "jax", "torch", "cudnn", "cuda"):
        spec = registry.REGISTRY[name]
        for device in spec.devices:
            assert {(name, v, device) for v in spec.variants_for(device)} <= cells
    assert ("torch", "cudagraph", "gpu") in cells and ("torch", "cudagraph", "cpu") not in cells


def test_batch_sweep_and_precision_have_the_cuda_rung_on_the_gpu():
    sweep = {(c.variant, c.batch_size) for c in study.load("batch_sweep").cells if c.implementation == "cuda"}
    assert sweep == {(v, b) for v in registry.spec("cuda").variants for b in (1, 8, 64, 512)}
    precision = {(c.variant, c.dtype, c.device) for c in study.load("precision").cells if c.implementation == "cuda"}
    assert precision == {("fused", "float32", "gpu"), ("fused", "float64", "gpu")}


def test_backends_study_has_every_keras_variant_on_three_backends():
    s = study.load("backends")
    cells = {(c.implementation, c.variant, c.device) for c in s.cells}
    for name in registry.KERAS_BACKENDS:
        for variant in registry.REGISTRY[name].variants:
            assert {(name, variant, "cpu"), (name, variant, "gpu")} <= cells


def test_gpu_only_variant_on_cpu_is_refused():
    with pytest.raises(HarnessError, match=r"variants: 'cudagraph' needs a GPU"):
        study.parse("[[cells]]\nimplementation='torch'\nvariants=['cudagraph']\ndevices=['cpu','gpu']")


def test_time_cap_cuts_slow_cells_but_keeps_calls_in_every_round():
    measure = study.Measure(rounds=10, max_cell_seconds=15)
    assert study.capped_calls(measure, 1000, 50e-3) == 300       # Keras predict: 15 s of calls
    assert study.capped_calls(measure, 1000, 1e-3) == 1000       # fast: all of them
    assert study.capped_calls(measure, 1000, 5.0) == 100         # very slow: 10 per round
    assert study.capped_calls(dataclasses.replace(measure, max_cell_seconds=None), 1000, 5.0) == 1000
    with pytest.raises(HarnessError, match="max_cell_seconds: expected a number of seconds > 0"):
        study.parse("[measure]\nmax_cell_seconds = 0\n[[cells]]\nimplementation='numpy'")


@pytest.mark.parametrize("text,message", [
    ("[measure]\ncals = 3\n[[cells]]\nimplementation='numpy'", r"unknown key\(s\) \['cals'\]; allowed: \["),
    ("[[cells]]\nimplementation='pytorch'", r"unknown implementation 'pytorch'; expected one of \["),
    ("[[cells]]\nimplementation='tf'\nvariants=['jit']", r"variants: unknown value 'jit'; allowed: \['function'"),
    ("[[cells]]\nimplementation='numpy'\ndevices=['tpu']", r"devices: unknown value 'tpu'; allowed: \['cpu', 'gpu'\]"),
    ("[[cells]]\nimplementation='numpy'\ndevices=['gpu']", r"numpy does not run on 'gpu'; allowed: \['cpu'\]"),
    ("[[cells]]\nimplementation='keras'\ndtypes=['float64']", r"dtypes: unknown value 'float64'"),
    ("[[cells]]\nimplementation='numpy'\nbogus=1", r"unknown key\(s\) \['bogus'\]"),
    ("[study]\nname='x'\n", r"expected at least one \[\[cells\]\] table"),
    ("[measure]\ncalls = 2\nrounds = 5\n[[cells]]\nimplementation='numpy'", "calls >= rounds"),
    ("[[cells]\nimplementation='numpy'", "TOML syntax error"),
])
def test_bad_study_files_name_the_problem(text, message):
    with pytest.raises(HarnessError, match=message):
        study.parse(text, "bad.toml")


def test_chunks_split_calls_over_rounds():
    assert study.chunk_sizes(10, 3) == [4, 3, 3]
    assert sum(study.chunk_sizes(1000, 10)) == 1000


def test_minimal_study_defaults():
    s = study.parse(MINIMAL, "x/minimal.toml")
    assert s.name == "minimal" and s.measure.warmup == 20 and len(s.cells) == 1


def test_processes_in_the_study_and_per_cells_table():
    text = """
[study]
name = "p"
[measure]
processes = 2
rounds = 3
calls = 60
max_images = 600
min_calls_per_round = 3
batch_sizes = [1, 512]
[[cells]]
implementation = "null"
devices = ["cpu"]
[[cells]]
implementation = "numpy"
processes = 4
"""
    s = study.parse(text)
    by = {(c.implementation, c.batch_size): c for c in s.cells}
    assert by[("null", 1)].processes == 2 and by[("numpy", 1)].processes == 4
    assert by[("null", 1)].total_rounds(3) == 6 and by[("numpy", 1)].process_of(7, 3) == 2
    assert by[("numpy", 512)].calls == 4 * 3 * 3  # max_images / 512, but 3 calls a round in every process
    with pytest.raises(HarnessError, match="processes"):
        study.parse(text.replace("processes = 4", "processes = 0"))
    with pytest.raises(HarnessError, match="more rounds than calls"):
        study.parse(text.replace("processes = 4", "processes = 40"))
