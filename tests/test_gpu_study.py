"""gpu-study's plumbing on the CPU: the `null` implementation stands in for a GPU level. The
steps, the manifest, a failing and a timed-out step, the deadline, the size cap, the archive
layout, and import-results into a results folder that the report then reads."""

import io
import json
import subprocess
import sys
import tarfile

import pytest

from harness.campaign import archive, gpu_study, steps
from harness.campaign.steps import Step, python_step
from harness.errors import HarnessError
from harness.machine import gpu
from harness.measure import study
from tests.conftest import ROOT

NULL_STUDY = """
[study]
name = "api_levels"
question = "plumbing"
[measure]
calls = 20
rounds = 2
warmup = 2
[[cells]]
implementation = "null"
devices = ["cpu"]
"""


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.skipif(gpu.absent_reason() is None, reason="this machine has a GPU")
def test_without_a_gpu_it_exits_3_with_one_line(tmp_path):
    done = harness("gpu-study", "--out", str(tmp_path / "x"), "--quick")
    assert done.returncode == 3
    assert done.stderr.startswith("ERROR: gpu-study needs a GPU: ") and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr and not (tmp_path / "x").exists()


def campaign(tmp_path, extra=(), cap=archive.CAP_BYTES, budget=240):
    out = tmp_path / "out"
    out.mkdir()
    study_file = tmp_path / "null.toml"
    study_file.write_text(NULL_STUDY)
    todo = [python_step("study-null", ["-m", "harness", "run", str(study_file), "--out",
                                       str(out / "results"), "--run-id", "r1"], 120),
            python_step("fails", ["-c", "import sys; print('about to fail'); sys.exit(4)"], 30),
            *extra]
    return gpu_study.run_campaign(out, "gpu-study-test-r1", todo, budget, cap, say=lambda line: None)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One campaign (a null study, a failing step, a step after it) that three tests read:
    (folder, manifest, archive path)."""
    folder = tmp_path_factory.mktemp("campaign")
    after = python_step("after", ["-c", "print('still ran')"], 30)
    return folder, *campaign(folder, extra=[after])


def test_manifest_records_every_step_and_a_failure_does_not_stop_the_next(finished):
    folder, manifest, _ = finished
    by_name = {s["name"]: s for s in manifest["steps"]}
    assert [s["name"] for s in manifest["steps"]] == ["study-null", "fails", "after"]
    assert by_name["study-null"]["status"] == "ok" and by_name["study-null"]["exit_code"] == 0
    assert by_name["fails"]["status"] == "failed" and by_name["fails"]["exit_code"] == 4
    assert by_name["fails"]["tail"] == ["about to fail"]
    assert by_name["after"]["status"] == "ok" and by_name["after"]["tail"] == ["still ran"]
    on_disk = json.loads((folder / "out" / "manifest.json").read_text())
    assert on_disk["steps"] == manifest["steps"]
    assert all(isinstance(s["seconds"], float) and s["command"] for s in manifest["steps"])


def test_archive_layout(finished):
    _, _, path = finished
    assert path.name == "gpu-study-test-r1.tar.gz"
    with tarfile.open(path) as tar:
        names = set(tar.getnames())
    top = "gpu-study-test-r1"
    assert {f"{top}/manifest.json", f"{top}/results/api_levels/r1/results.jsonl",
            f"{top}/results/api_levels/r1/env.json", f"{top}/logs/fails.log"} <= names


def test_a_step_over_its_time_is_stopped_and_later_steps_skipped_past_the_budget(tmp_path):
    slow = Step("slow", (sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"), 1.5)
    late = python_step("late", ["-c", "print('never')"], 60)
    manifest, _ = campaign(tmp_path, extra=[slow, late], budget=45)
    by_name = {s["name"]: s for s in manifest["steps"]}
    assert by_name["slow"]["status"] == "timeout" and by_name["slow"]["tail"] == ["started"]
    assert by_name["slow"]["seconds"] < 30
    # the budget is spent by then only if the machine is slow; either way the record says which
    assert by_name["late"]["status"] in ("ok", "skipped")
    if by_name["late"]["status"] == "skipped":
        assert "out of time" in by_name["late"]["reason"]


def test_the_deadline_skips_what_cannot_start(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    todo = [python_step("a", ["-c", "pass"], 60), python_step("b", ["-c", "pass"], 60)]
    manifest = steps.run_all(todo, out, {}, deadline_s=0.0, say=lambda line: None)
    assert [s["status"] for s in manifest["steps"]] == ["skipped", "skipped"]


def test_over_the_cap_logs_are_dropped_never_results(tmp_path):
    noisy = python_step("noisy", ["-c", "import os, sys; sys.stdout.buffer.write(os.urandom(3_000_000))"], 60)
    messages = []
    out = tmp_path / "out"
    out.mkdir()
    study_file = tmp_path / "null.toml"
    study_file.write_text(NULL_STUDY)
    todo = [python_step("study-null", ["-m", "harness", "run", str(study_file), "--out",
                                       str(out / "results"), "--run-id", "r1"], 120), noisy]
    manifest, path = gpu_study.run_campaign(out, "capped", todo, 240, cap_bytes=1_000_000,
                                            say=messages.append)
    assert path.stat().st_size < 1_000_000
    with tarfile.open(path) as tar:
        names = set(tar.getnames())
        packed = json.load(tar.extractfile("capped/manifest.json"))
    assert "capped/results/api_levels/r1/results.jsonl" in names
    assert not any("/logs/" in n for n in names)
    assert packed["logs_dropped"] is True and packed["steps"][1]["name"] == "noisy"
    assert any("dropping the raw logs" in m for m in messages)


def test_import_results_then_the_report_reads_the_imported_run(finished, tmp_path):
    _, _, path = finished
    into = tmp_path / "results"
    done = harness("import-results", str(path), "--into", str(into))
    assert done.returncode == 0, done.stderr
    assert (into / "api_levels" / "r1" / "results.jsonl").is_file()
    assert (into / "campaigns" / "gpu-study-test-r1.manifest.json").is_file()
    report = harness("report", "--results", str(into), "--out", str(tmp_path / "R.md"))
    assert report.returncode == 0, report.stderr
    assert "| api_levels | r1 |" in (tmp_path / "DETAILS.md").read_text()  # each run's environment
    again = harness("import-results", str(path), "--into", str(into))
    assert again.returncode == 2 and "never overwritten" in again.stderr


def test_import_refuses_an_entry_outside_its_folder(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        info = tarfile.TarInfo("gpu-study-x/results/../../evil.txt")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"evil"))
    with pytest.raises(HarnessError, match="refusing the entry"):
        archive.import_results(bad, tmp_path / "into", say=lambda line: None)
    assert not (tmp_path / "evil.txt").exists()


def test_the_plans_ask_for_the_gpu_half(tmp_path):
    quick = gpu_study.plan(tmp_path, "r", quick=True)
    assert [s.name for s in quick] == ["doctor", "verify", "study-api_levels"]
    verify = quick[1].command
    assert verify[verify.index("--device") + 1] == "gpu" and "--limit" in verify
    assert "float64" in verify[verify.index("--dtypes") + 1] and quick[1].ok_codes == (0, 3)
    plan = study.load(quick[2].command[quick[2].command.index("run") + 1])
    assert plan.name == "api_levels" and plan.measure.calls == 100 and plan.measure.rounds == 3
    full = gpu_study.plan(tmp_path, "r", quick=False)
    assert [s.name for s in full] == ["doctor", "verify", "verify-train"] + \
        [f"study-{s}" for s in gpu_study.STUDIES] + ["explain", "kernels", "kernels-512", "pytest-gpu"]
    assert all("gpu" in s.command for s in full if s.name.startswith("study-"))
    assert sum(s.timeout_s for s in full) >= gpu_study.BUDGET_S["full"]  # the budget is what binds


def test_steps_selects_some_steps_in_plan_order_and_names_the_known_ones(tmp_path):
    full = gpu_study.plan(tmp_path, "r", quick=False)
    chosen = gpu_study.select(full, ["pytest-gpu", "verify"])
    assert [s.name for s in chosen] == ["verify", "pytest-gpu"]
    assert gpu_study.select(full, None) == full
    with pytest.raises(HarnessError, match=r"no step named study-typo; the steps are doctor, verify"):
        gpu_study.select(full, ["verify", "study-typo"])
    assert not list(tmp_path.glob("quick-*.toml"))  # write=False plans write nothing
    gpu_study.plan(tmp_path, "r", quick=True, write=False)
    assert not list(tmp_path.glob("quick-*.toml"))


def test_a_folder_that_holds_a_campaign_is_refused(tmp_path):
    """Its results would ride along in the new archive and its manifest be overwritten."""
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(HarnessError, match="already holds a campaign"):
        gpu_study.gpu_study(tmp_path, quick=True, only=["doctor"])


def tar_of(path, top, files):
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(f"{top}/results/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return path


def test_a_later_campaign_replaces_verify_json_but_never_a_run(tmp_path):
    """verify-*.json is the newest check on a machine (its name has no run id): replaced, and said."""
    into, said = tmp_path / "results", []
    first = tar_of(tmp_path / "a.tar.gz", "gpu-study-a", {"verify-gpu-h.json": '{"rows": ["old"]}',
                                                          "api_levels/r1/results.jsonl": "{}\n"})
    second = tar_of(tmp_path / "b.tar.gz", "gpu-study-b", {"verify-gpu-h.json": '{"rows": ["new"]}',
                                                           "api_levels/r2/results.jsonl": "{}\n"})
    clash = tar_of(tmp_path / "c.tar.gz", "gpu-study-c", {"verify-gpu-h.json": '{"rows": ["newest"]}',
                                                          "api_levels/r1/results.jsonl": "{}\n"})
    archive.import_results(first, into, say=said.append)
    archive.import_results(second, into, say=said.append)
    assert json.loads((into / "verify-gpu-h.json").read_text())["rows"] == ["new"]
    assert any(line.startswith("replacing") and "verify-gpu-h.json" in line for line in said)
    assert (into / "api_levels" / "r2" / "results.jsonl").is_file()
    with pytest.raises(HarnessError, match=r"would overwrite 1 file\(s\).*api_levels/r1/results.jsonl"):
        archive.import_results(clash, into, say=said.append)
    assert json.loads((into / "verify-gpu-h.json").read_text())["rows"] == ["new"]  # nothing written


def test_the_plans_include_the_hand_written_cuda_rung(tmp_path):
    """verify and pytest-gpu see every cuda variant, kernels profiles each, quick api_levels times it."""
    from harness import registry

    variants = registry.spec("cuda").variants
    full = {s.name: s.command for s in gpu_study.plan(tmp_path, "r", quick=False, write=False)}
    verify = full["verify"]
    assert "cuda" in verify[verify.index("--implementations") + 1].split(",")
    kernels = full["kernels"]
    # cuda/batch (the throughput kernel) joins gpu_study's KERNELS in its own change; until then it is left out here
    assert {f"cuda/{v}" for v in variants if v != "batch"} <= set(kernels[kernels.index("kernels") + 1].split(","))
    quick = gpu_study.plan(tmp_path, "r", quick=True)
    cells = study.load(quick[2].command[quick[2].command.index("run") + 1]).cells
    assert {(c.implementation, c.variant) for c in cells if c.implementation == "cuda"} == {
        ("cuda", "fused"), ("cuda", "graph"), ("cuda", "cluster"), ("cuda", "mapped")}
    big = full["kernels-512"]  # the copy's share of a large batch: the level's own graphs and cuDNN's
    assert big[big.index("--batch") + 1] == "512"
    assert {"cuda/cluster", "cudnn/graph"} <= set(big[big.index("kernels") + 1].split(","))


def test_api_levels_on_the_gpu_has_the_time_its_three_processes_need(tmp_path):
    """api_levels times a cell in >= 3 fresh processes (each sets up every GPU level again): its step
    gets more than the others' 240 s."""
    full = {s.name: s for s in gpu_study.plan(tmp_path, "r", quick=False, write=False)}
    assert study.load("api_levels").measure.processes >= 3
    assert full["study-api_levels"].timeout_s == gpu_study.STUDY_LIMIT_S["api_levels"] > full["study-overhead"].timeout_s
