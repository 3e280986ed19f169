"""A GPU variant registered today, and no other change: with rows that make it the fastest call on its
device, the report names it wherever a fastest call is quoted (the headline, the GPU floor's section,
the figures' data), since the report asks the registry and the rows, never a list of names."""

import dataclasses
import json
import shutil

import pytest

from harness import DEFAULT_RESULTS, registry
from harness.figures import latency
from harness.measure import fastest_call
from harness.measure.store.rows import read_run
from harness.report import details, markdown
from harness.report.claims import headline, rundata
from harness.report.sections import gpu_floor_section
from tests import rowfiles

LEVEL, VARIANT = "cudnn", "zippy"
LABEL = f"{LEVEL}/{VARIANT}"


@pytest.fixture
def with_fast_variant(tmp_path, monkeypatch):
    """The committed results, with a cell of LEVEL/VARIANT in the GPU's answering api_levels run:
    cudnn/graph's calls at a quarter of their time (faster than every call measured there), and
    the variant in LEVEL's registry entry, one of its stand-ins."""
    if not any(DEFAULT_RESULTS.glob("api_levels/*/results.jsonl*")):
        pytest.skip("no committed reference results (make run-all writes them)")
    results = tmp_path / "results"
    shutil.copytree(DEFAULT_RESULTS, results)
    spec = registry.spec(LEVEL)
    monkeypatch.setitem(registry.REGISTRY, LEVEL, dataclasses.replace(
        spec, variants=(*spec.variants, VARIANT), stand_ins=(*spec.stand_ins, VARIANT)))
    run_id = fastest_call.fastest_measured("gpu", results).run_id
    run_dir = results / "api_levels" / str(run_id)
    rows = read_run(run_dir)  # a complete run's rows are stored compressed
    graph = next(r for r in rows if r.get("kind") == "cell" and r["cell_id"] == f"{LEVEL}/graph/gpu/b1/float32")
    fast = {**graph, "cell_id": f"{LABEL}/gpu/b1/float32", "cell": {**graph["cell"], "variant": VARIANT},
            "rounds_ns": [[t // 4 for t in r] for r in graph["rounds_ns"]]}
    rowfiles.rewrite(run_dir, "".join(json.dumps(r) + "\n" for r in [*rows, fast]))
    return results


def test_a_new_fastest_gpu_variant_is_named_in_the_headline_the_gpu_floor_and_the_figures(
        with_fast_variant, loc_rows):
    assert fastest_call.fastest_measured("gpu", with_fast_variant).label == LABEL
    data = rundata.load_report(with_fast_variant, loc_rows)
    assert data.floors["gpu"].label == LABEL
    report = markdown.build(data)
    row = next(line for line in report.splitlines() if line.startswith(f"| {registry.display(LEVEL)} |"))
    assert f"`{VARIANT}`" in row  # the level's fastest call measured, named by its variant
    text = details.build(data)
    assert LABEL in text.split(gpu_floor_section.TITLE)[1].split("\n## ")[0]
    assert LABEL in {p["label"] for p in headline.points(data.frame, data.loc_rows, data.answer)}
    assert LABEL in set(latency.api_cells(data.frame)["label"])
