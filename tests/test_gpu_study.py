"""gpu-study's plumbing on the CPU: the `null` implementation stands in for a GPU level. The
steps, the manifest, a failing and a timed-out step, the deadline, the size cap, the archive
layout, and import-results into a results folder that the report then reads."""

import io
import json
import os
import subprocess
import sys
import tarfile

import pytest

from harness.campaign import archive, gpu_study, steps
from harness.campaign.steps import Step, python_step
from harness.errors import HarnessError
from harness.machine import gpu
from harness.measure.plan import study
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
    assert {f"{top}/manifest.json", f"{top}/results/api_levels/r1/results.jsonl.gz",
            f"{top}/results/api_levels/r1/env.json", f"{top}/logs/fails.log"} <= names


def test_a_step_over_its_time_is_stopped_and_later_steps_skipped_past_the_budget(tmp_path):
    slow = Step("slow", (sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"), 1.5)
    late = python_step("late", ["-c", "print('never')"], 60)
    out = tmp_path / "out"
    out.mkdir()
    manifest, _ = gpu_study.run_campaign(out, "gpu-study-test-r2", [slow, late], 45, archive.CAP_BYTES,
                                         say=lambda line: None)
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
    assert "capped/results/api_levels/r1/results.jsonl.gz" in names
    assert not any("/logs/" in n for n in names)
    assert packed["logs_dropped"] is True and packed["steps"][1]["name"] == "noisy"
    assert any("dropping the raw logs" in m for m in messages)


def test_import_results_then_the_report_reads_the_imported_run(finished, tmp_path):
    _, _, path = finished
    into = tmp_path / "results"
    done = harness("import-results", str(path), "--into", str(into))
    assert done.returncode == 0, done.stderr
    assert (into / "api_levels" / "r1" / "results.jsonl.gz").is_file()
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
    assert [s.name for s in full] == ["doctor", "bundle", "smoke", "gpu-floor", "verify", "verify-train",
                                      "cudnn-device"] + [f"study-{s}" for s in gpu_study.STUDIES] + [
        "training", "explain", "kernels", "kernels-512", "kernel-stages", "pytest-gpu", "labs"]
    assert all("gpu" in s.command for s in full if s.name.startswith("study-"))
    assert sum(s.timeout_s for s in full) >= gpu_study.BUDGET_S["full"]  # the budget is what binds


def test_steps_selects_some_steps_in_plan_order_and_names_the_known_ones(tmp_path):
    full = gpu_study.plan(tmp_path, "r", quick=False)
    chosen = gpu_study.select(full, ["pytest-gpu", "verify"])
    assert [s.name for s in chosen] == ["verify", "pytest-gpu"]
    assert gpu_study.select(full, None) == full
    with pytest.raises(HarnessError, match=r"no step named study-typo; the steps are doctor, bundle, smoke, gpu-f"):
        gpu_study.select(full, ["verify", "study-typo"])
    assert not list(tmp_path.glob("quick-*.toml"))  # write=False plans write nothing
    gpu_study.plan(tmp_path, "r", quick=True, write=False)
    assert not list(tmp_path.glob("quick-*.toml"))


def test_a_folder_that_holds_a_campaign_is_refused(tmp_path):
    """Its results would ride along in the new archive and its manifest be overwritten."""
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(HarnessError, match="already holds a campaign"):
        gpu_study.gpu_study(tmp_path, quick=True, only=["doctor"])


ROW = json.dumps({"schema": 1, "run_id": "r", "time": 1.7e9, "kind": "load", "round": 0}) + "\n"  # a real row


def tar_of(path, top, files):
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(f"{top}/results/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return path


def vrow(impl, variant, dtype="float32", status="ok", **more):
    return {"implementation": impl, "device": "gpu", "dtype": dtype, "variant": variant, "status": status, **more}


def verify_file(rows, **fields):
    return json.dumps({"rows": rows, "exit_code": 0, "complete": True, "weights": "w.h5", "tolerance": 1e-5,
                       **fields})


def test_a_later_campaign_merges_verify_json_row_by_row_but_never_overwrites_a_run(tmp_path):
    """verify-*.json is the newest check on a machine (its name has no run id): a campaign that verified
    some levels (--levels cuda) replaces their rows, keeps the others', and says which it did."""
    into, said = tmp_path / "results", []
    first = tar_of(tmp_path / "a.tar.gz", "gpu-study-h-a", {
        "verify-gpu-h.json": verify_file([vrow("cuda", "fused", agree=1), vrow("cuda", "fused", "float64"),
                                          vrow("jax", "jit"), vrow("tf", "-", "-", "unavailable")]),
        "api_levels/r1/results.jsonl": ROW})
    second = tar_of(tmp_path / "b.tar.gz", "gpu-study-h-b", {
        "verify-gpu-h.json": verify_file([vrow("cuda", "fused", agree=2), vrow("cuda", "mapped"),
                                          vrow("tf", "xla", status="FAIL")], complete=False),
        "api_levels/r2/results.jsonl": ROW})
    clash = tar_of(tmp_path / "c.tar.gz", "gpu-study-h-c", {"verify-gpu-h.json": verify_file([vrow("jax", "jit")]),
                                                            "api_levels/r1/results.jsonl": ROW})
    archive.import_results(first, into, say=said.append)
    assert all(r["campaign"] == "gpu-study-h-a" for r in json.loads((into / "verify-gpu-h.json").read_text())["rows"])
    said.clear()
    archive.import_results(second, into, say=said.append)
    merged = json.loads((into / "verify-gpu-h.json").read_text())
    got = [(r["implementation"], r["variant"], r["dtype"], r["campaign"], r.get("agree")) for r in merged["rows"]]
    assert got == [("cuda", "fused", "float64", "gpu-study-h-a", None),  # kept: a key the new campaign lacks
                   ("cuda", "fused", "float32", "gpu-study-h-b", 2),  # replaced
                   ("cuda", "mapped", "float32", "gpu-study-h-b", None),  # added
                   ("jax", "jit", "float32", "gpu-study-h-a", None),  # a level not verified: kept
                   ("tf", "xla", "float32", "gpu-study-h-b", None)]  # its placeholder row "-" replaced
    assert merged["exit_code"] == 1 and merged["complete"] is False  # the merged rows' code; the new fields
    assert set(merged["campaigns"]) == {"gpu-study-h-a", "gpu-study-h-b"}
    assert merged["campaigns"]["gpu-study-h-a"]["complete"] is True
    line = next(line for line in said if "verify-gpu-h.json" in line)
    assert line.startswith("merging into") and "replaced 2 rows: cuda (1 from gpu-study-h-a), tf (1 from " in line
    assert "kept 2 rows of levels this campaign did not verify: cuda (1 from gpu-study-h-a), jax (1 from" in line
    assert "added 2 new rows: cuda (1 from gpu-study-h-b), tf (1 from gpu-study-h-b)" in line
    assert (into / "api_levels" / "r2" / "results.jsonl.gz").is_file()
    with pytest.raises(HarnessError, match=r"would overwrite 1 file\(s\).*api_levels/r1/results.jsonl"):
        archive.import_results(clash, into, say=said.append)
    assert json.loads((into / "verify-gpu-h.json").read_text()) == merged  # nothing written


def test_unstamped_rows_already_there_get_the_campaign_that_wrote_them(tmp_path):
    """A verify file from before rows were stamped: its rows are named after the newest imported
    campaign whose steps wrote that file, or `unknown`; verify-train's file merges the same way."""
    into = tmp_path / "results"
    (into / "campaigns").mkdir(parents=True)
    (into / "verify-train-gpu-h.json").write_text(verify_file(
        [vrow("cudnn", "default", status="tie"), vrow("jax", "jit"), {**vrow("torch", "-"), "status": "unavailable"}],
        steps=20))
    (into / "verify-gpu-h.json").write_text(verify_file([vrow("jax", "jit")]))
    for name, started in (("gpu-study-h-old", "2026-11-01"), ("gpu-study-h-new", "2026-11-27")):
        (into / "campaigns" / f"{name}.manifest.json").write_text(json.dumps(
            {"campaign": name, "started": started,
             "steps": [{"name": "verify-train", "command": ["py", "--json", "/x/results/verify-train-gpu-h.json"]}]}))
    new = tar_of(tmp_path / "d.tar.gz", "gpu-study-h-d", {
        "verify-train-gpu-h.json": verify_file([vrow("cudnn", "default"), vrow("torch", "eager")], steps=20),
        "verify-gpu-h.json": verify_file([vrow("cuda", "fused")])})
    said = []
    archive.import_results(new, into, say=said.append)
    train = json.loads((into / "verify-train-gpu-h.json").read_text())
    assert [(r["implementation"], r["variant"], r["status"], r["campaign"]) for r in train["rows"]] == [
        ("cudnn", "default", "ok", "gpu-study-h-d"), ("jax", "jit", "ok", "gpu-study-h-new"),
        ("torch", "eager", "ok", "gpu-study-h-d")]
    assert train["exit_code"] == 0 and train["steps"] == 20
    rows = json.loads((into / "verify-gpu-h.json").read_text())["rows"]
    assert [(r["implementation"], r["campaign"]) for r in rows] == [
        ("jax", "unknown (written before rows said their campaign)"), ("cuda", "gpu-study-h-d")]
    assert any("verify-train-gpu-h.json" in line and "replaced 2 rows" in line for line in said)


def test_a_verify_file_that_is_not_one_is_refused_before_anything_is_written(tmp_path):
    into = tmp_path / "results"
    bad = tar_of(tmp_path / "e.tar.gz", "gpu-study-h-e", {"verify-gpu-h.json": '{"rows": ["old"]}',
                                                          "api_levels/r9/results.jsonl": ROW})
    with pytest.raises(HarnessError, match=r"verify-gpu-h.json: not a verify file"):
        archive.import_results(bad, into, say=lambda line: None)
    assert not (into / "api_levels").exists()


def test_the_labs_result_is_imported_beside_the_runs_and_said(finished, tmp_path):
    """A labs step's output (results/labs-gpu/<run-id>/<lab>/) comes in as it is; the report still reads
    the results folder, and says which campaign each verify row came from."""
    into, said = tmp_path / "results", []
    archive.import_results(finished[2], into, say=said.append)  # a run, so the report has its sections
    fake = tar_of(tmp_path / "f.tar.gz", "gpu-study-h-r5", {
        "labs-gpu/r5/labs.json": json.dumps({"labs": [{"lab": "cuda", "status": "ok"}]}),
        "labs-gpu/r5/cuda/LEADERBOARD.md": "# cuda\n", "labs-gpu/r5/cuda/leaderboard.csv": "rank,student\n",
        "labs-gpu/r5/cuda/results/correct/row.json": "{}", "labs-gpu/r5/cuda.log": "graded\n",
        "verify-gpu-h.json": verify_file([vrow("cuda", "fused", accuracy=0.99, images=10, agree=10,
                                               max_abs_diff=1e-7)])})
    archive.import_results(fake, into, say=said.append)
    assert (into / "labs-gpu" / "r5" / "cuda" / "leaderboard.csv").read_text() == "rank,student\n"
    assert (into / "labs-gpu" / "r5" / "cuda" / "results" / "correct" / "row.json").is_file()
    assert any(line.startswith("labs graded on the GPU:") and "labs-gpu/r5" in line for line in said)
    with pytest.raises(HarnessError, match="never overwritten"):  # a second import of it clashes
        archive.import_results(fake, into, say=said.append)
    report = harness("report", "--results", str(into), "--out", str(tmp_path / "R.md"))
    assert report.returncode == 0, report.stderr
    verify = (tmp_path / "DETAILS.md").read_text().split("## Agreement with the NumPy reference")[1]
    assert "| gpu | float32 | cuda/fused | ok |" in verify.split("\n## ")[0]  # the imported campaign's row


def test_the_plans_include_the_hand_written_cuda_rung(tmp_path):
    """verify and pytest-gpu see every cuda variant, kernels profiles each, quick api_levels times it."""
    from harness import registry

    variants = registry.spec("cuda").variants
    full = {s.name: s.command for s in gpu_study.plan(tmp_path, "r", quick=False, write=False)}
    verify = full["verify"]
    assert "cuda" in verify[verify.index("--implementations") + 1].split(",")
    kernels = full["kernels"]
    assert {f"cuda/{v}" for v in variants} <= set(kernels[kernels.index("kernels") + 1].split(","))
    quick = gpu_study.plan(tmp_path, "r", quick=True)
    cells = study.load(quick[2].command[quick[2].command.index("run") + 1]).cells
    assert {(c.implementation, c.variant) for c in cells if c.implementation == "cuda"} == {
        ("cuda", "layers"), ("cuda", "fused"), ("cuda", "graph"), ("cuda", "cluster"), ("cuda", "mapped"),
        ("cuda", "persistent"), ("cuda", "resident"), ("cuda", "rows"), ("cuda", "resident_rows"),
        ("cuda", "overlap")}
    stamps = full["kernel-stages"]  # inside the cluster kernel, both dtypes
    assert list(stamps[stamps.index("kernel-stages") + 1:][:4]) == ["--calls", "200", "--dtypes", "float32,float64"]
    big = full["kernels-512"]  # the copy's share of a large batch: the level's own graphs and cuDNN's
    assert big[big.index("--batch") + 1] == "512"
    assert {"cuda/cluster", "cuda/batch", "cudnn/graph"} <= set(big[big.index("kernels") + 1].split(","))


def test_api_levels_on_the_gpu_has_the_time_its_three_processes_need(tmp_path):
    """api_levels times a cell in >= 3 fresh processes (each sets up every GPU level again): its step
    gets more than the others' 240 s."""
    full = {s.name: s for s in gpu_study.plan(tmp_path, "r", quick=False, write=False)}
    assert study.load("api_levels").measure.processes >= 3
    assert full["study-api_levels"].timeout_s == gpu_study.STUDY_LIMIT_S["api_levels"] > full["study-overhead"].timeout_s


def targets_of(step, word):
    return step.command[step.command.index(word) + 1].split(",")


def test_levels_restrict_verify_verify_train_kernels_and_labs_in_plan_order(tmp_path):
    """--levels cuda,cudnn: the device's time goes to those levels only, their targets' steps first
    (FOCUSED: the stages and the resident call's row, verify, batch 512 with the new kernels first,
    the floor, api_levels, kernels, batch_sweep, pytest -m gpu), then the others as before."""
    every = {s.name: s for s in gpu_study.plan(tmp_path, "r", quick=False, write=False)}
    some = {s.name: s for s in gpu_study.plan(tmp_path, "r", quick=False, write=False,
                                               levels=["cudnn", "cuda"])}
    assert sorted(some) == sorted(every)  # the same steps
    assert list(some) == ["bundle", "smoke", "kernel-stages", "verify", "kernels-512", "gpu-floor", "cudnn-device",
                          "study-api_levels", "kernels", "study-batch_sweep", "pytest-gpu"] + [
        name for name in every if name not in gpu_study.FOCUSED]
    assert list(some)[-1] == "labs" and list(every) == [s.name for s in gpu_study.plan(tmp_path, "r", False, False)]
    assert targets_of(some["verify"], "--implementations") == ["cuda", "cudnn"]  # GPU_IMPLS' order
    assert targets_of(some["verify-train"], "--implementations") == ["cudnn"]
    kernels = targets_of(some["kernels"], "kernels")
    assert kernels == [t for t in targets_of(every["kernels"], "kernels") if t.split("/")[0] in ("cuda", "cudnn")]
    assert kernels[0] == "cuda/fused" and "torch/eager" not in kernels  # the registry's order
    # the kernel never measured yet first, beside the pair it would replace
    assert targets_of(some["kernels-512"], "kernels") == ["cuda/overlap", "cuda/batch2", "cuda/batch2_device",
                                                          "cuda/batch", "cuda/graph", "cuda/cluster", "cuda/mapped",
                                                          "cudnn/graph", "cudnn/frontend"]
    assert targets_of(some["labs"], "--labs") == ["cuda", "cudnn"]
    for name in ("doctor", "explain", "pytest-gpu", "study-api_levels"):  # untouched by --levels
        assert some[name].command == every[name].command  # (doctor: after the smoke here, its verdicts named)
    assert not any(s.skip for s in some.values())
    # default: every level, as before
    assert targets_of(every["verify"], "--implementations") == gpu_study.GPU_IMPLS.split(",")
    assert targets_of(every["labs"], "--labs") == ["cuda", "cudnn"]


def manifest_of(folder, name, started, levels, steps_run):
    (folder / f"{name}.manifest.json").write_text(json.dumps({
        "campaign": name, "started": started, "levels": levels, "levels_all": levels is None,
        "steps": [{"name": n, "status": status, "seconds": sec} for n, status, sec in steps_run]}))


def test_the_step_plan_takes_each_steps_newest_seconds_and_says_where_the_budget_ends(tmp_path):
    manifest_of(tmp_path, "a", "2026-11-27T09:00:00+0000", ["cuda", "cudnn"],
                [("verify", "ok", 14.0), ("study-api_levels", "ok", 172.4), ("kernels-512", "ok", 54.7)])
    manifest_of(tmp_path, "b", "2026-11-27T17:00:00+0000", ["cuda", "cudnn"],
                [("verify", "ok", 20.6), ("kernels-512", "timeout", 73.2), ("pytest-gpu", "skipped", 0.0)])
    manifest_of(tmp_path, "c", "2026-11-28T01:00:00+0000", None, [("verify", "ok", 150.0)])  # every level
    (tmp_path / "d.manifest.json").write_text("{not json")  # passed by, named on stderr
    seconds = gpu_study.measured_seconds(tmp_path, ["cudnn", "cuda"])
    assert seconds["verify"]["seconds"] == 20.6 and seconds["verify"]["manifest"] == "b.manifest.json"
    assert seconds["kernels-512"] == {"seconds": 73.2, "status": "timeout", "manifest": "b.manifest.json",
                                      "same_levels": True}
    assert seconds["study-api_levels"]["seconds"] == 172.4 and "pytest-gpu" not in seconds  # skipped: no time
    assert gpu_study.measured_seconds(tmp_path, None)["verify"]["seconds"] == 150.0  # the same levels first
    todo = gpu_study.plan(tmp_path, "r", quick=False, write=False, levels=["cuda", "cudnn"])
    lines = gpu_study.step_plan(todo, seconds, 260.0)
    assert lines[0].split()[:3] == ["bundle", "3.0", "s"] and "never ran: stated" in lines[0]
    assert "70.0 s  (never ran: stated);   73.0 s in all" in lines[1]  # the smoke: STATED_S
    assert lines[2].split()[:3] == ["kernel-stages", "90.0", "s"] and "never ran: its limit" in lines[2]
    assert "20.6 s  (last, b.manifest.json);  183.6 s in all" in lines[3]  # 3 + 70 + 90 (its limit) + 20.6
    assert "73.2 s  (at least: stopped by its limit, b.manifest.json);  256.8 s in all" in lines[4]
    assert "past the budget" not in lines[4] and "past the budget" in lines[5]  # gpu-floor: its 60 s limit


def test_gpu_study_plan_prints_without_a_gpu(tmp_path):
    done = harness("gpu-study", "--plan", "--levels", "cuda,cudnn")
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0].startswith("gpu-study --levels cuda,cudnn: the steps in order, budget 540 s")
    assert [line.split()[0] for line in out[1:4]] == ["bundle", "smoke", "kernel-stages"]
    assert harness("gpu-study").returncode == 2  # a campaign needs --out


def test_a_step_left_without_targets_is_planned_out_not_run(tmp_path):
    torch_only = {s.name: s for s in gpu_study.plan(tmp_path, "r", quick=False, write=False, levels=["torch"])}
    assert targets_of(torch_only["kernels"], "kernels") == ["torch/eager", "torch/compile", "torch/cudagraph"]
    assert "none of --levels torch" in torch_only["kernels-512"].skip
    assert "none of --levels torch" in torch_only["labs"].skip
    out = tmp_path / "out"
    out.mkdir()
    manifest = steps.run_all([torch_only["kernels-512"]], out, {}, deadline_s=60, say=lambda line: None)
    record = manifest["steps"][0]
    assert record["status"] == "skipped" and record["planned_out"] is True and record["seconds"] == 0.0


def test_an_unknown_level_is_an_error_listing_the_gpu_levels():
    from harness import registry

    with pytest.raises(HarnessError, match=r"--levels: no GPU level named numpy, typo; the GPU levels are cuda,cudnn,"):
        gpu_study.check_levels(["cuda", "numpy", "typo"])  # numpy runs on the CPU only
    assert gpu_study.check_levels(None) is None and gpu_study.check_levels([]) is None
    assert gpu_study.check_levels(["cudnn", "cuda", "cudnn"]) == ["cudnn", "cuda"]
    listed = harness("list", "--device", "gpu").stdout.strip().split(",")
    assert gpu_study.gpu_levels() == listed == [n for n in registry.levels() if "gpu" in registry.spec(n).devices]
    assert set(gpu_study.GPU_IMPLS.split(",")) <= set(listed)


def test_the_command_line_checks_levels_before_looking_for_a_gpu(tmp_path):
    done = harness("gpu-study", "--out", str(tmp_path / "x"), "--levels", "cuda,cudaa")
    assert done.returncode == 2 and "no GPU level named cudaa; the GPU levels are cuda," in done.stderr
    assert not (tmp_path / "x").exists()


def test_the_manifest_records_the_levels(tmp_path):
    out = tmp_path / "out"
    manifest, _ = gpu_study.run_campaign(out, "gpu-study-t-r", [python_step("a", ["-c", "pass"], 30)], 60,
                                         say=lambda line: None, levels=["cuda"])
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["levels"] == ["cuda"] and on_disk["levels_all"] is False
    manifest, _ = gpu_study.run_campaign(tmp_path / "all", "gpu-study-t-s", [], 60, say=lambda line: None)
    assert manifest["levels"] == gpu_study.gpu_levels() and manifest["levels_all"] is True


def test_make_passes_levels_through_like_steps():
    done = subprocess.run(["make", "-n", "gpu-study", "LEVELS=cuda,cudnn", "STEPS=verify,kernels"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "gpu-study --out gpu-study-out" in done.stdout
    assert "--steps verify,kernels --levels cuda,cudnn" in done.stdout


def test_the_labs_step_comes_after_pytest_gpu_with_its_limit(tmp_path):
    full = gpu_study.plan(tmp_path, "r7", quick=False, write=False)
    names = [s.name for s in full]
    assert names.index("labs") == names.index("pytest-gpu") + 1 == len(names) - 1
    labs_step = full[-1]
    assert labs_step.timeout_s == gpu_study.LABS_LIMIT_S == 150
    assert labs_step.command[1:4] == ("-m", "harness.lab.term.gpu_labs", "--labs")
    out = labs_step.command[labs_step.command.index("--out") + 1]
    assert out == str(tmp_path / "results" / "labs-gpu" / "r7")  # imported as it is
    assert float(labs_step.command[labs_step.command.index("--budget-s") + 1]) < labs_step.timeout_s
    assert "labs" not in [s.name for s in gpu_study.plan(tmp_path, "r", quick=True, write=False)]


# --- the labs step (harness.lab.term.gpu_labs) ------------------------------------------------------

def sandbox_absent():
    from harness.lab.term import gpu_labs as labs

    return labs.sandbox_problem()


def test_the_labs_step_grades_the_cuda_examples_and_the_cudnn_starter():
    from harness.lab.judge.rules import assignment
    from harness.lab.term import gpu_labs as labs

    assert [s for s, _ in labs.submissions("cuda")] == ["correct", "wrong"]
    assert all((folder / "lenet.py").is_file() and (folder / "lenet.cu").is_file()
               for _, folder in labs.submissions("cuda"))
    assert labs.submissions("cudnn") == [("starter", assignment.load("cudnn").starter)]
    assert (ROOT / "labs" / "template" / "lenet.py").is_file()
    assert [gpu_study.lab_rung(lab) for lab in gpu_study.GPU_LABS] == ["cuda", "cudnn"]
    assert labs.GPU_LABS == gpu_study.GPU_LABS
    assert labs.grade_command("cuda", ROOT / "s", ROOT / "o")[1:] == [
        "-m", "harness", "lab", "grade", "cuda", "--submissions", str(ROOT / "s"), "--out", str(ROOT / "o")]


def test_the_labs_step_without_a_sandbox_fails_at_once_with_one_line(tmp_path):
    env = {**os.environ, "LENET_BWRAP": str(tmp_path / "no-bwrap")}
    done = subprocess.run([sys.executable, "-m", "harness.lab.term.gpu_labs", "--out", str(tmp_path / "o")], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 3
    assert done.stderr.startswith("ERROR: labs: the lab sandbox cannot run here: no sandbox tool")
    assert "Traceback" not in done.stderr and not (tmp_path / "o").exists()


def test_a_bad_labs_list_is_refused():
    from harness.lab.term import gpu_labs as labs

    with pytest.raises(HarnessError, match="--labs: expected some of cuda,cudnn, found cpu_numpy"):
        labs.grade_labs(["cpu_numpy"], ROOT / "never", 10)


@pytest.mark.skipif(gpu.absent_reason() is None, reason="this machine has a GPU: the labs would be graded")
@pytest.mark.skipif(sandbox_absent() is not None, reason=f"no lab sandbox here: {sandbox_absent()}")
def test_without_a_gpu_the_gpu_labs_fail_cleanly_and_quickly(tmp_path):
    """The step's own command line, as gpu-study runs it: each lab's grader refuses (no GPU) in seconds."""
    step = gpu_study.plan(tmp_path, "r", quick=False, write=False)[-1]
    done = subprocess.run(step.command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    out = tmp_path / "results" / "labs-gpu" / "r"
    summary = json.loads((out / "labs.json").read_text())
    assert [(r["lab"], r["exit_code"], r["status"]) for r in summary["labs"]] == [
        ("cuda", 3, "failed"), ("cudnn", 3, "failed")]
    assert all(r["seconds"] < 60 for r in summary["labs"])
    assert "ERROR: lab cuda runs on the GPU: " in (out / "cuda.log").read_text()
    assert not (out / "cuda" / ".grader-key").exists()


@pytest.mark.slow
@pytest.mark.skipif(sandbox_absent() is not None, reason=f"no lab sandbox here: {sandbox_absent()}")
def test_the_labs_step_grades_as_staff_do_proved_on_the_cpu_lab(tmp_path, monkeypatch):
    """The same code path with the CPU lab in place of a GPU one: the staff's `lab grade` in the
    sandbox writes the leaderboard and the marks CSV under the step's folder; the key stays home."""
    from harness.lab.term import gpu_labs as labs

    monkeypatch.setattr(labs, "GPU_LABS", ("cpu_numpy",))
    monkeypatch.setattr(labs, "EXAMPLES", {"cpu_numpy": (("correct", ROOT / "labs" / "examples" / "correct"),
                                                         ("wrong", ROOT / "labs" / "examples" / "wrong"))})
    summary = labs.grade_labs(["cpu_numpy"], tmp_path / "o", 240, say=lambda line: None)
    record = summary["labs"][0]
    assert record["status"] == "ok" and record["exit_code"] == 0, (tmp_path / "o" / "cpu_numpy.log").read_text()
    graded = tmp_path / "o" / "cpu_numpy"
    assert {"cpu_numpy/LEADERBOARD.md", "cpu_numpy/leaderboard.csv", "cpu_numpy/results/correct/row.json",
            "cpu_numpy/results/wrong/row.json"} <= set(record["files"])
    board = (graded / "leaderboard.csv").read_text()
    assert "correct" in board and "wrong" in board
    assert not (graded / ".grader-key").exists()
    assert json.loads((tmp_path / "o" / "labs.json").read_text()) == summary


def test_a_lab_over_its_share_is_stopped_and_the_next_still_graded(tmp_path, monkeypatch):
    from harness.lab.term import gpu_labs as labs

    monkeypatch.setattr(labs, "sandbox_problem", lambda: None)
    slow = [sys.executable, "-c", "import time; print('grading', flush=True); time.sleep(60)"]
    quick = [sys.executable, "-c", "print('graded')"]
    monkeypatch.setattr(labs, "grade_command", lambda lab, folder, out: slow if lab == "cuda" else quick)
    summary = labs.grade_labs(["cuda", "cudnn"], tmp_path, 4, say=lambda line: None)
    cuda, cudnn = summary["labs"]
    assert cuda["status"] == "timeout" and cuda["exit_code"] is None and cuda["seconds"] < 30
    assert cudnn["status"] == "ok" and (tmp_path / "cudnn.log").read_text() == "graded\n"


# --- a loan of a GPU machine: two commands, the smoke first, what finishes comes back ---------------


def test_the_loan_plan_prints_each_steps_estimate_and_fits_both_commands(tmp_path):
    """From the committed manifests (or stated, for a step never run): each command's total within its
    budget, the bundle's install and the packing counted in, and what the loan leaves out."""
    from harness import DEFAULT_RESULTS

    measured = gpu_study.measured_seconds(DEFAULT_RESULTS / "campaigns", gpu_study.PART_LEVELS)
    full = gpu_study.plan(tmp_path, "r", quick=False, write=False)
    lines, fits = gpu_study.loan_plan(measured, full)
    assert fits, "\n".join(lines)
    for part, budget in gpu_study.PART_BUDGET_S.items():
        todo = gpu_study.plan(tmp_path, "r", False, write=False, part=part, warm=True)
        assert gpu_study.part_seconds(todo, measured) <= budget
        assert any(line.startswith(f"  command {part}: ") and line.endswith("(fits)") for line in lines)
    assert sum(gpu_study.PART_BUDGET_S.values()) <= 800  # ~15 minutes a loan, ~90 s of it starting and idling
    assert any("(never ran: stated)" in line and line.split()[0] == "training" for line in lines)
    assert "only if time remains" in lines[lines.index(next(x for x in lines if x.split()[0] == "pytest-gpu")) + 1]
    left = lines[-1].split("left out: ")[1].split(", ")
    assert left == ["doctor", "verify-train", "cudnn-device", "study-overhead", "study-backends",
                    "study-batch_sweep", "study-precision", "explain"]
    done = harness("gpu-study", "--plan")
    assert done.returncode == 0, done.stderr
    assert "command 1 (gpu-study --part 1), budget 470 s" in done.stdout and "the loan: " in done.stdout


def test_each_command_of_the_loan_runs_its_steps_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_study, "SMOKE_FILE", tmp_path / "smoke" / "verify-smoke.json")
    first = gpu_study.plan(tmp_path, "r", quick=False, part=1)
    assert [s.name for s in first] == list(gpu_study.PARTS[1])
    by_name = {s.name: s for s in first}
    assert targets_of(by_name["verify"], "--implementations") == ["cuda", "cudnn"]
    assert by_name["verify"].command[by_name["verify"].command.index("--json") + 1].endswith(
        f"verify-gpu-{gpu_study.results.short_hostname()}-r.json")  # keyed by the run: the H100's stays
    sweep = by_name["batch_sweep-1-512"].command
    assert study.load(sweep[sweep.index("run") + 1]).measure.batch_sizes == (1, 512)
    smoke = by_name["smoke"].command
    assert targets_of(by_name["smoke"], "--implementations") == ["cuda/rows", "cuda/resident_rows", "cuda/overlap",
                                                                 "cuda/resident", "cudnn/frontend"]
    assert smoke[smoke.index("--child-timeout-s") + 1] == "45" and by_name["smoke"].ok_codes == (0, 1, 3)
    quarantine = (gpu_study.gpu_fault.QUARANTINE_ENV, str(gpu_study.SMOKE_FILE))
    assert [quarantine in s.env for s in first] == [False, False, True, True, True, True]  # after the smoke
    second = gpu_study.plan(tmp_path, "r", quick=False, write=False, part=2)
    assert [s.name for s in second] == list(gpu_study.PARTS[2]) and not second[1].skip  # a cold machine
    gpu_study.SMOKE_FILE.parent.mkdir()
    gpu_study.SMOKE_FILE.write_text('{"rows": []}')
    warm = gpu_study.plan(tmp_path, "r", quick=False, write=False, part=2)
    assert warm[1].name == "smoke" and "the first command's verdicts are here" in warm[1].skip
    assert all(quarantine in s.env for s in warm[2:])
    training = {s.name: s for s in warm}["training"].command
    assert training[training.index("run") + 1] == "training" and "gpu" in training


def test_the_training_study_has_a_gpu_cell_for_every_level_with_a_gpu_trainer():
    from harness import registry

    training = study.load("training")
    on_gpu = {c.implementation for c in training.cells if c.device == "gpu"}
    assert on_gpu >= set(registry.trainers("gpu")) and "cudnn" in on_gpu
    cpu_batches = {c.batch_size for c in training.cells if c.device == "cpu"}
    assert {c.batch_size for c in training.cells if c.implementation == "cudnn"} == cpu_batches


CUT_OFF = """
import sys, time
from pathlib import Path
from harness.campaign import gpu_study
from harness.campaign.steps import python_step
work, out, study_file = map(Path, sys.argv[1:4])
todo = [python_step("study-null", ["-m", "harness", "run", str(study_file), "--out", str(work / "results"),
                                   "--run-id", "r1"], 120),
        python_step("second", ["-c", "print('done')"], 30),
        python_step("stuck", ["-c", "import time; print('started', flush=True); time.sleep(600)"], 600)]
gpu_study.run_campaign(work, "gpu-study-cut-r1", todo, 900, say=print, into=out)
"""


def test_a_command_cut_off_after_step_k_brings_back_steps_1_to_k_importable(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    study_file = tmp_path / "null.toml"
    study_file.write_text(NULL_STUDY)
    child = subprocess.Popen([sys.executable, "-u", "-c", CUT_OFF, str(work), str(out), str(study_file)], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        for line in child.stdout:  # the third step has started: the first two are packed
            if line.startswith("[3/3] stuck:"):
                break
    finally:
        os.killpg(child.pid, 9)  # the borrowed machine's limit: everything killed at once
        child.wait(timeout=60)
    assert sorted(p.name for p in out.iterdir()) == ["gpu-study-cut-r1.tar.gz"]  # no half-written archive
    with tarfile.open(out / "gpu-study-cut-r1.tar.gz") as tar:
        manifest = json.load(tar.extractfile("gpu-study-cut-r1/manifest.json"))
    assert [s["name"] for s in manifest["steps"]] == ["study-null", "second"]
    written = archive.import_results(out / "gpu-study-cut-r1.tar.gz", tmp_path / "into", say=lambda line: None)
    assert tmp_path / "into" / "api_levels" / "r1" / "results.jsonl.gz" in written


def test_out_holds_the_archive_and_the_console_log_only(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    manifest, path = gpu_study.gpu_study(out, quick=False, only=["bundle"], say=lambda line: None, work=work)
    assert [s["name"] for s in manifest["steps"]] == ["bundle"] and "packed_s" in manifest["steps"][0]
    names = sorted(p.name for p in out.iterdir())
    assert names == [path.name.replace(".tar.gz", ".log"), path.name] and len(names) <= 4
    assert "bundle" in (out / names[0]).read_text() and (work / "manifest.json").is_file()
