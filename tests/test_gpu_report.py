"""The report's GPU half (harness/report/gpu_section.py) read from the committed H100 rows:
the ladder, the targets (met or missed, by how much) and the kernels table follow the rows."""

import json
import shutil

import pandas as pd
import pytest

from harness import DEFAULT_RESULTS
from harness.report import details, gpu_section, rundata
from harness.report.tables import ms


@pytest.fixture
def results_copy(tmp_path):
    if not any(DEFAULT_RESULTS.glob("kernels/*/results.jsonl")):
        pytest.skip("no committed GPU results (python -m harness gpu-study on a GPU writes them)")
    dest = tmp_path / "results"
    shutil.copytree(DEFAULT_RESULTS, dest)
    return dest


def gpu_machine(frame):
    return next(m for m in frame["machine"].unique() if "H100" in m or "GPU" in m.upper())


def test_targets_are_read_from_the_overhead_cells_and_turn_to_met_when_the_row_does(results_copy):
    runs, frame = rundata.load(results_copy)
    machine = gpu_machine(frame)
    graph = rundata.find(frame, "overhead", "cudnn/graph", device="gpu", machine=machine)
    lines = gpu_section.target_lines(frame, gpu_section.kernel_rows(runs), machine)
    line = next(x for x in lines if x.startswith("Target cudnn/graph"))
    assert f": {ms(graph['median_ms'])} (`overhead`)" in line
    goal = gpu_section.TARGETS_MS["cudnn/graph"]
    verdict = "met" if graph["median_ms"] <= goal else f"missed by {ms(graph['median_ms'] - goal)}"
    assert verdict in line
    faster = frame.copy()
    faster.loc[(faster["study"] == "overhead") & (faster["label"] == "cudnn/graph")
               & (faster["machine"] == machine), "median_ms"] = goal - 0.005
    line = next(x for x in gpu_section.target_lines(faster, [], machine) if x.startswith("Target cudnn/graph"))
    assert line.endswith("met (5 µs under).")


def test_the_hand_written_rung_becomes_the_gpu_floor_and_gets_its_targets(results_copy):
    """A cuda/graph cell beside cudnn/graph (api_levels and overhead, as the GPU run will write them)
    becomes the ladder's floor, and its two targets are judged from the rows."""
    runs, frame = rundata.load(results_copy)
    machine = gpu_machine(frame)
    assert "cuDNN replayed as one CUDA graph takes" in gpu_section.ladder_line(frame, machine)
    assert not any("cuda/graph" in line for line in gpu_section.target_lines(frame, [], machine))
    graph = (frame["label"] == "cudnn/graph") & (frame["machine"] == machine) & frame["study"].isin(
        ["api_levels", "overhead"])
    hand = frame[graph].copy()
    hand["label"], hand["implementation"], hand["median_ms"] = "cuda/graph", "cuda", 0.012
    frame = pd.concat([frame, hand], ignore_index=True)
    line = gpu_section.ladder_line(frame, machine)
    assert "the hand-written kernel replayed as one CUDA graph takes 12 µs" in line
    assert "cuDNN replayed as one CUDA graph" in line.split("takes 12 µs")[1]
    targets = gpu_section.target_lines(frame, [], machine)
    assert any(t.startswith("Target cuda/graph ≤ 15 µs per image: 12 µs") and "met (3 µs under)" in t
               for t in targets), targets
    speedup = next(t for t in targets if t.startswith("Target: cuda/graph at least 3x"))
    assert speedup.endswith("missed."), speedup  # the copied rows hold cudnn/graph's own calls: 1x


def test_the_kernels_table_has_one_line_per_ok_row_and_follows_its_numbers(results_copy, loc_rows):
    runs, frame = rundata.load(results_copy)
    rows_path = next(r for r in runs if r["study"] == "kernels")["dir"] / "results.jsonl"
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    graph = next(r for r in rows if r.get("kind") == "kernels" and r["variant"] == "graph")
    text = "\n".join(gpu_section.section(runs))
    assert text.count("\n| cudnn/") == sum(r.get("implementation") == "cudnn" for r in rows)
    assert f"| cudnn/graph | {ms(graph['host_ns_per_call'] / 1e6)} | {ms(graph['gpu_busy_ns_per_call'] / 1e6)} |" in text
    graph["gpu_busy_ns_per_call"] = 12_345.0
    failed = {"kind": "kernels", "implementation": "jax", "variant": "eager", "device": "gpu",
              "status": "failed", "reason": "no GPU kernels", "time": graph["time"]}
    rows_path.write_text("".join(json.dumps(r) + "\n" for r in rows + [failed]))
    data = rundata.load_report(results_copy, loc_rows)
    text = "\n".join(gpu_section.section(data.runs))
    assert "| 12.3 µs |" in text and "jax/eager" not in text
    report = details.build(data)
    assert "## Where a GPU call's time goes" in report and "the GPU is busy 12.3 µs" in report
