"""The report's GPU half (harness/report/sections/gpu_section.py) read from the committed H100 rows:
the ladder, the targets (met or missed, by how much) and the kernels table follow the rows."""

import json
import shutil

import pandas as pd
import pytest

from harness import DEFAULT_RESULTS
from harness.report import details
from harness.report.claims import rundata
from harness.report.markup import words
from harness.report.markup.tables import ms
from harness.report.sections import gpu_floor_section, gpu_section
from tests import rowfiles


@pytest.fixture
def results_copy(tmp_path):
    if not any(DEFAULT_RESULTS.glob("kernels/*/results.jsonl*")):
        pytest.skip("no committed GPU results (python -m harness gpu-study on a GPU writes them)")
    dest = tmp_path / "results"
    shutil.copytree(DEFAULT_RESULTS, dest)
    return dest


@pytest.fixture
def committed(committed_report):
    """The committed results as read once a session (conftest.committed_report), for the tests that
    read them unchanged: (runs, frame) as rundata.load gives them."""
    if not any(DEFAULT_RESULTS.glob("kernels/*/results.jsonl*")):
        pytest.skip("no committed GPU results (python -m harness gpu-study on a GPU writes them)")
    return committed_report.runs, committed_report.frame


def gpu_machine(frame):
    return next(m for m in frame["machine"].unique() if "H100" in m or "GPU" in m.upper())


def test_targets_are_read_from_the_api_levels_cells_and_turn_to_met_when_the_row_does(committed):
    """The best cuDNN call and the fastest cuda call (whichever variants the rows hold) are judged
    against issue 73's absolute goals; a faster row turns the verdict."""
    runs, frame = committed
    machine = gpu_machine(frame)
    graph = rundata.find(frame, "api_levels", "cudnn/graph", device="gpu", machine=machine)
    line = next(x for x in gpu_floor_section.target_lines(frame, runs, machine)
                if x.startswith("Target: best cuDNN call"))
    assert f"≤ 30 µs: {ms(graph['median_ms'])} (api_levels, cudnn/graph)" in line
    assert ("met" if graph["median_ms"] <= 0.030 else f"missed by {ms(graph['median_ms'] - 0.030)}") in line
    faster = frame.copy()
    faster.loc[(faster["study"] == "api_levels") & (faster["implementation"] == "cudnn")
               & (faster["machine"] == machine), "median_ms"] = 0.025
    line = next(x for x in gpu_floor_section.target_lines(faster, runs, machine)
                if x.startswith("Target: best cuDNN call"))
    assert "25 µs (api_levels, cudnn/" in line and "met (5 µs under)" in line


def test_the_fastest_hand_written_call_is_the_gpu_floor_and_gets_its_targets(committed):
    """Whichever hand-written variant is fastest in api_levels is the ladder's floor and is judged
    against 8 µs (stretch 6); a faster row turns the verdicts."""
    runs, frame = committed
    machine = gpu_machine(frame)
    hand = gpu_section.fastest_hand_written(frame, "api_levels", machine)
    assert hand is not None and hand["implementation"] == "cuda"
    cells = frame[(frame["study"] == "api_levels") & (frame["machine"] == machine) & (frame["status"] == "ok")
                  & (frame["implementation"] == "cuda") & (frame["device"] == "gpu")]
    assert hand["median_ms"] == cells["median_ms"].min()
    assert f"takes {ms(hand['median_ms'])} per image end to end" in gpu_section.ladder_line(frame, machine)
    line = next(t for t in gpu_floor_section.target_lines(frame, runs, machine)
                if t.startswith("Target: fastest cuda call"))
    assert f"≤ 8 µs: {ms(hand['median_ms'])} (api_levels, {hand['label']})" in line
    fast = frame.copy()
    fast.loc[(fast["label"] == hand["label"]) & (fast["machine"] == machine), "median_ms"] = 0.007
    line = next(t for t in gpu_floor_section.target_lines(fast, runs, machine)
                if t.startswith("Target: fastest cuda call"))
    assert "7 µs (api_levels" in line and "met (1 µs under, stretch 6 µs missed)" in line


def kernels_row(variant, batch, host_us, ops, impl="cuda"):
    busy = sum(o[2] for o in ops)
    return {"implementation": impl, "variant": variant, "batch": batch, "machine": "m", "calls": 50,
            "device_ops_per_call": float(len(ops)), "kind": "kernels", "status": "ok",
            "host_ns_per_call": host_us * 1e3, "gpu_busy_ns_per_call": busy * 1e3,
            "ops": [{"category": c, "name": n, "ns_per_call": t * 1e3, "per_call": 1.0} for c, n, t in ops]}


def test_kernel_and_batch_targets_follow_the_kernels_rows():
    """The hand-written kernel's own time (batch 1) against 4 µs; at batch 512 the fastest hand-written
    call's images per second from a host array against 8 M, a kernel reading device memory against
    50 M; the copies' share and the host's own part of a call beside them."""
    rows = [kernels_row("cluster", 1, 35, [("kernel", "lenet_cluster", 7.9), ("gpu_memcpy", "Memcpy HtoD", 1.4)]),
            kernels_row("graph", 1, 70, [("kernel", "lenet_fused", 36.1)]),
            kernels_row("cluster", 512, 500, [("kernel", "lenet_cluster", 180), ("gpu_memcpy", "Memcpy HtoD", 60)]),
            kernels_row("mapped", 512, 400, [("kernel", "lenet_cluster", 220)]),
            kernels_row("graph", 512, 320, [("kernel", "implicit_convolve_sgemm", 100),
                                            ("gpu_memcpy", "Memcpy HtoD", 50)], impl="cudnn")]
    runs = [{"study": "kernels", "machine": "m", "rows": rows}]
    empty = pd.DataFrame()
    lines = gpu_floor_section.target_lines(empty, runs, "m")
    assert ("Target: the hand-written kernel, launched, batch 1 ≤ 4 µs: 7.9 µs (kernels trace, lenet_cluster "
            "(cuda/cluster)), missed by 3.9 µs (2x the goal).") in lines
    assert any(x.startswith("Target: batch 512 from a host array") and "1.28 M images/s (kernels trace, host time, "
               "cuda/mapped), missed (6.2x short)." in x for x in lines)
    assert any(x.startswith("Target: batch 512, input on the device ≥ 50 M images/s: 2.84 M images/s "
                            "(kernels trace, the kernel's own time, lenet_cluster (cuda/cluster))") for x in lines)
    where = gpu_section.batch_lines(rows, "m")
    assert any("cuda/cluster: the GPU is busy 240 µs of a 500 µs call; the copies take 60 µs (25% of the busy "
               "time), lenet_cluster 180 µs; 260 µs of the call is the host's alone (its copy of the images "
               "into page-locked memory, the launch, the wait)." in x for x in where)
    assert any(x.startswith("Even with all of the GPU's work hidden behind it, the host's own part of a call "
                            "at batch 512 caps the rate at 2.84 M images/s (cuda/mapped's") for x in where)
    rows[1]["ops"][0]["ns_per_call"] = 3_000
    assert any("3 µs (kernels trace, lenet_fused (cuda/graph)), met (1 µs under)" in x
               for x in gpu_floor_section.target_lines(empty, runs, "m"))
    assert gpu_section.batch_lines([r for r in rows if r["batch"] == 1], "m") == []


def test_a_resident_kernel_s_call_is_told_apart():
    """cuda/persistent: one kernel spans the calls (0.01 launches a call); its row says so, and its
    target line puts the kernel-stages' stages (less the weights' loading) beside the host's call."""
    k = {"implementation": "cuda", "variant": "persistent", "batch": 1, "machine": "m", "calls": 200,
         "host_ns_per_call": 17_800.0, "gpu_busy_ns_per_call": 40_900.0, "device_ops_per_call": 0.01,
         "api_calls_per_call": 0.05, "api_ns_per_call": 13_500.0,
         "ops": [{"category": "kernel", "name": "lenet_persistent", "ns_per_call": 40_900.0, "per_call": 0.01}]}
    stages = {"kernel": "lenet_cluster", "block0_ns": 7_200.0, "stages": [{"block0_ns": 1_800.0}]}
    found = gpu_section.trace_claims(k, stages)
    assert found["resident"] and found["launches"] == 2  # 0.01 launches a call, 200 calls
    assert found["compute_ns"] == 5_400.0 and found["stages"] is stages  # 7.2 µs less 1.8 µs of loading
    said = words.say(gpu_section.SENTENCES, "where", cell={"label": "cuda/persistent", "median_ms": 0.02}, **found)
    assert "no launch and no CUDA call on the host" in said and "busy" not in said  # no busy share of a call
    assert "230%" not in "\n".join(gpu_section.section([{"study": "kernels", "machine": "m", "rows": [
        {**k, "kind": "kernels", "status": "ok"}]}]))


def test_newest_kernels_row_per_target_and_batch_across_runs():
    """A later kernels run that profiles a few targets again replaces only those (a failed row never
    replaces an ok one); a target at another batch size is a row of its own."""
    def run(started, rows):
        return {"study": "kernels", "machine": "m", "run_id": f"r{started}", "started": started, "order": started,
                "rows": rows}
    ok = {"status": "ok"}
    old = run(1, [{"implementation": "cuda", "variant": "graph", **ok, "v": 1},
                  {"implementation": "cuda", "variant": "cluster", **ok, "v": 1}])
    new = run(2, [{"implementation": "cuda", "variant": "cluster", **ok, "v": 2},
                  {"implementation": "cuda", "variant": "graph", "status": "failed"},
                  {"implementation": "cuda", "variant": "cluster", "batch": 512, **ok, "v": 3}])
    other = {**run(3, []), "study": "api_levels"}
    merged = rundata.latest_runs([old, new, other])
    kernels = next(r for r in merged if r["study"] == "kernels")
    assert kernels["run_ids"] == ["r1", "r2"] and kernels["started"] == 2
    assert [(r["variant"], r.get("batch", 1), r.get("v")) for r in kernels["rows"]] == [
        ("graph", 1, 1), ("cluster", 1, 2), ("cluster", 512, 3)]


def test_the_kernels_table_has_one_line_per_ok_row_and_follows_its_numbers(results_copy, loc_rows, committed):
    runs, _ = committed  # the copy as read before it is changed
    merged = next(r for r in runs if r["study"] == "kernels")
    run_dir = next(p for p in sorted(results_copy.glob("kernels/*/"), reverse=True)
                   if any(json.loads(x).get("implementation") == "cudnn" and json.loads(x).get("variant") == "graph"
                          and json.loads(x).get("batch", 1) == 1 for x in rowfiles.text(p).splitlines()))
    rows = [json.loads(line) for line in rowfiles.text(run_dir).splitlines()]
    graph = next(r for r in rows if r.get("kind") == "kernels" and r["variant"] == "graph"
                 and r["implementation"] == "cudnn" and r.get("batch", 1) == 1)
    text = "\n".join(gpu_section.section(runs))
    assert text.count("\n| cudnn/") == sum(r.get("implementation") == "cudnn" for r in merged["rows"]
                                            if r.get("status") == "ok")
    assert f"| cudnn/graph | {ms(graph['host_ns_per_call'] / 1e6)} | {ms(graph['gpu_busy_ns_per_call'] / 1e6)} |" in text
    graph["gpu_busy_ns_per_call"] = 12_345.0
    failed = {"kind": "kernels", "implementation": "keras_torch", "variant": "compile", "device": "gpu",
              "status": "failed", "reason": "no GPU kernels", "time": graph["time"]}
    rowfiles.rewrite(run_dir, "".join(json.dumps(r) + "\n" for r in rows + [failed]))
    data = rundata.load_report(results_copy, loc_rows)
    text = "\n".join(gpu_section.section(data.runs))
    assert "| 12.3 µs |" in text and "keras_torch/compile" not in text
    report = details.build(data)
    assert "## Where a GPU call's time goes" in report and "the GPU is busy 12.3 µs" in report


def test_copy_rate_and_device_resident_targets_follow_the_kernels_rows():
    """At batch 512: the fastest call from a host array against 8 M images/s or 75% of gpu-floor's
    measured copy rate (the more), and the fastest kernel whose input was copied in before it (device
    memory) against 50 M images/s; a row without a copy is not device-resident; a bad time is an error."""
    rows = [kernels_row("batch2", 512, 64, [("kernel", "lenet_batch2", 50)]),  # zero copy: reads the bus
            kernels_row("batch2_device", 512, 90, [("gpu_memcpy", "Memcpy HtoD", 48), ("kernel", "lenet_batch2", 12.8),
                                                   ("gpu_memcpy", "Memcpy DtoH", 2)]),
            kernels_row("cluster", 512, 500, [("kernel", "lenet_cluster", 180), ("gpu_memcpy", "Memcpy HtoD", 60)])]
    runs = [{"study": "kernels", "machine": "m", "rows": rows}]
    lines = gpu_floor_section.target_lines(pd.DataFrame(), runs, "m")
    host = next(x for x in lines if "from a host array" in x)
    assert "≥ 8 M images/s: 8 M images/s (kernels trace, host time, cuda/batch2), met." in host
    device = next(x for x in lines if "input on the device" in x)
    assert "40 M images/s (kernels trace, the kernel's own time, lenet_batch2 (cuda/batch2_device)), " \
           "missed (1.2x short)." in device
    rows[1]["ops"][1]["ns_per_call"] = 10_000.0
    assert "51.2 M images/s" in next(x for x in gpu_floor_section.target_lines(pd.DataFrame(), runs, "m")
                                     if "on the device" in x)
    rows[1]["ops"][1]["ns_per_call"] = float("nan")
    with pytest.raises(ValueError, match=r"kernels row cuda/batch2_device \(batch 512\): lenet_batch2 "
                                         r"must be a finite positive number, found nan"):
        gpu_floor_section.target_lines(pd.DataFrame(), runs, "m")
