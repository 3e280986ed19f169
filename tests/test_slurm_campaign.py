"""Studies on Slurm (harness.campaign.slurm): one whole-node job per node type, then a merge job that
imports every run at once and writes the report. On the local three-node Slurm (two node types by
Features, one host): the smoke study, one job a type, each on a node of its type, the report keying
both runs by the host's fingerprint. Without a cluster: what a job does with a partial run (resume on
the same host, afresh on another), and a merge that imports nothing while a run is partial."""

import argparse
import json
import subprocess
import sys
import time

import pytest

from harness.campaign import slurm
from harness.errors import HarnessError
from harness.machine.files import write_atomic
from harness.measure.store import runfolder
from harness.report.claims import rundata
from tests.conftest import ROOT, slurm_missing

DEADLINE_S = 240


def test_a_partial_run_is_resumed_on_its_own_host_and_started_afresh_on_another(tmp_path):
    run_dir = tmp_path / "smoke" / "slurm-type-a"
    assert slurm.plan_for(run_dir, "abc") == "new"
    run_dir.mkdir(parents=True)
    (run_dir / "env.json").write_text(json.dumps({"fingerprint": "abc"}))
    assert slurm.plan_for(run_dir, "abc") == "resume"
    assert slurm.plan_for(run_dir, "other") == "afresh"  # never two hosts in one run
    (run_dir / "env.json").write_text("{not json")
    assert slurm.plan_for(run_dir, "abc") == "afresh"
    runfolder.mark_complete(run_dir, "test")
    assert slurm.plan_for(run_dir, "other") == "done"


def test_the_merge_imports_nothing_while_a_run_is_partial(tmp_path):
    out, into = tmp_path / "shared", tmp_path / "results"
    record = {"name": "c1", "studies": ["smoke"], "quick": [], "jobs": {},
              "types": {"type-a": {"kind": "cpu", "run_id": "slurm-type-a"},
                        "type-b": {"kind": "cpu", "run_id": "slurm-type-b"}}}
    out.mkdir()
    write_atomic(out / "campaign.json", json.dumps(record))
    (out / "results" / "smoke" / "slurm-type-a").mkdir(parents=True)  # died: no complete.json
    with pytest.raises(HarnessError) as caught:
        slurm.merge(argparse.Namespace(out=out, into=into, report=tmp_path / "REPORT.md"))
    message = str(caught.value)
    assert "nothing imported" in message and "type-a: smoke run" in message and "partial" in message
    assert "type-b: smoke run" in message and "missing" in message
    assert not into.exists()


def test_bad_campaigns_are_refused_by_name(tmp_path):
    with pytest.raises(HarnessError, match="--constraint"):
        slurm.submit(tmp_path, [], [], ["smoke"], slurm.Options())
    with pytest.raises(HarnessError, match="named twice"):
        slurm.submit(tmp_path, ["a", "a"], [], ["smoke"], slurm.Options())
    (tmp_path / "campaign.json").write_text(json.dumps({"types": {}, "studies": [], "jobs": ["-x"]}))
    with pytest.raises(HarnessError, match="campaign.json: expected types, studies and jobs"):
        slurm.read_campaign(tmp_path)  # what submit reads first, before any job id reaches squeue


@pytest.mark.slurm
def test_a_campaign_s_job_slurm_holds_is_named_with_the_command_that_releases_it(tmp_path):
    """Submitting again while the campaign's jobs are queued is refused; one that Slurm holds (a node
    that failed to start it: "launch failed requeued held"; a held submission stands in) is named, with
    `scontrol release`, as lab grade --resume names a held task."""
    if why := slurm_missing():
        pytest.skip(why)
    done = subprocess.run(["sbatch", "--parsable", "--hold", "--job-name=lenet-slurm-test", f"--chdir={tmp_path}",
                           "--wrap", "true"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip().split(";")[0]
    try:
        (tmp_path / "campaign.json").write_text(json.dumps({"types": {}, "studies": ["smoke"],
                                                            "jobs": {"type-a": job}}))
        with pytest.raises(HarnessError) as refused:
            slurm.submit(tmp_path, ["type-a"], [], ["smoke"], slurm.Options())
        words = str(refused.value)
        assert "still queued or running" in words and f"Slurm holds {job} (JobHeldUser)" in words, words
        assert words.endswith(f"scontrol release {job}"), words
    finally:
        subprocess.run(["scancel", job], capture_output=True, timeout=30)


def cluster_reason() -> str | None:
    if why := slurm_missing():
        return why
    done = subprocess.run(["sinfo", "-h", "-N", "-o", "%f"], capture_output=True, text=True, timeout=30)
    features = {f for line in done.stdout.split() for f in line.split(",")}
    if done.returncode != 0 or not {"type-a", "type-b"} <= features:
        return (f"no Slurm with node types type-a and type-b (found {sorted(features)}); "
                "sudo scripts/slurm-local.sh start --nodes 3")
    return None


@pytest.mark.slurm
def test_a_campaign_runs_one_job_per_node_type_and_the_report_keys_runs_by_fingerprint(tmp_path):
    why = cluster_reason()
    if why:
        pytest.skip(why)
    shared, into = tmp_path / "shared", tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "harness", "campaign", "--slurm", "--out", str(shared),
                           "--constraint", "type-a", "--constraint", "type-b", "--studies", "smoke",
                           "--into", str(into), "--report", str(tmp_path / "REPORT.md")],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin:/usr/local/bin", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    jobs = json.loads((shared / "campaign.json").read_text())["jobs"]
    deadline = time.monotonic() + DEADLINE_S
    try:
        while subprocess.run(["squeue", "-h", "-j", ",".join(jobs.values())], capture_output=True,
                             text=True, timeout=30).stdout.strip():
            assert time.monotonic() < deadline, subprocess.run(["squeue"], capture_output=True, text=True).stdout
            time.sleep(0.25)
    finally:
        subprocess.run(["scancel", *jobs.values()], capture_output=True, timeout=30)
    merged = (shared / "logs" / "merge.out").read_text()
    assert "wrote" in merged and "REPORT.md" in merged, merged
    for node_type in ("type-a", "type-b"):
        where = json.loads((shared / "nodes" / f"slurm-{node_type}.json").read_text())
        assert node_type in where["features"], where  # each job on a node of its type
        assert where["job"] == jobs[node_type]
    runs = [r for r in rundata.load_runs(into) if r["study"] == "smoke"]
    assert sorted(r["run_id"] for r in runs) == ["slurm-type-a", "slurm-type-b"]
    fingerprints = {r["env"]["fingerprint"] for r in runs}
    assert {r["host_key"] for r in runs} == {f"fp:{f}" for f in fingerprints}  # one host here: one key
    assert len(fingerprints) == 1 and next(iter(fingerprints)) in (tmp_path / "DETAILS.md").read_text()
