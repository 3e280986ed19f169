"""Studies on a Slurm cluster: one whole-node job per node type, then a merge job that imports every
run at once and regenerates the report.

    python -m harness campaign --slurm --out SHARED --constraint TYPE [--constraint TYPE ...]
        [--gpu-constraint TYPE ...] [--studies smoke,api_levels] [--partition P] [--account A] [--qos Q]
        [--gres gpu:1] [--time MIN] [--into reports/results] [--report reports/REPORT.md]

SHARED (a filesystem every node sees):
    campaign.json              the campaign: name, studies, node types and their run ids, the jobs
    results/<study>/<run id>/  a CPU node type's run of each study (run id slurm-<type>): rows, env.json
                               (its host fingerprint), complete.json once finished
    gpu/<type>/                a GPU node type's gpu-study folder (its results/ and archive)
    logs/<type>.out, logs/merge.out, nodes/<type>.json   each job's log, and where it ran
    <name>.tar.gz              the merge's archive of every run, imported into --into

A job asks for a whole node (--exclusive) of its type (--constraint). A job that dies leaves its run
partial (no complete.json): it never answers. Submitting the same campaign again resumes it
(`run --resume`) where the node's host fingerprint is the run's, and starts it afresh otherwise
(the partial run moved to SHARED/abandoned/): a run never mixes two hosts. The merge job runs when
every job has ended (afterany); it imports only when every run is complete (one archive, checked
whole, then renamed into place: harness.campaign.archive), else it names what is missing and
imports nothing.

    submit(out, types, gpu_types, studies, options, ...) -> 0    the jobs and the merge job
    job(args) -> 0;  merge(args) -> 0                             what they run (campaign-job, -merge)
    plan_for(run_dir, fingerprint) -> "new" | "done" | "resume" | "afresh";  run_id(type), scripts(...)
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness import DEFAULT_RESULTS, ROOT
from harness.command import log
from harness.errors import HarnessError, Unavailable
from harness.machine.files import write_atomic
from harness.machine.slurmctl import check_reachable, code_needs, header, held_advice, sbatch, still_queued
from harness.measure.plan import study
from harness.measure.store import runfolder

DEFAULT_STUDIES = ("api_levels",)
STUDY_MINUTES = 120  # a whole node, a study's default processes and rounds
MERGE_MINUTES = 30


@dataclass(frozen=True)
class Options:
    """What each job asks of the cluster (None: the cluster's default), and a quick study's narrowing."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    gres: str | None = None  # the GPU node types' jobs
    time: str | None = None
    quick: tuple[str, ...] = ()  # `run` options of a quick study (--implementations, --rounds ...)


def run_id(node_type: str) -> str:
    """The run folder name of a node type's run of each study."""
    return "slurm-" + re.sub(r"[^A-Za-z0-9_.-]", "_", node_type)


def plan_for(run_dir: Path, fingerprint: str | None) -> str:
    """What a job does with its run folder: "new" (none yet), "done" (complete), "resume" (partial,
    measured on this host: the same fingerprint), "afresh" (partial from another host, or unreadable)."""
    if not run_dir.exists():
        return "new"
    if runfolder.completion(run_dir) is not None:
        return "done"
    try:
        recorded = json.loads((run_dir / "env.json").read_text()).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return "afresh"
    return "resume" if recorded and recorded == fingerprint else "afresh"


def scripts(out: Path, node_type: str, gpu: bool, options: Options) -> str:
    """The batch script of one node type's job."""
    q = shlex.quote
    return "\n".join(
        [
            "#!/bin/bash",
            header(
                {
                    "job-name": f"campaign-{node_type}",
                    "constraint": node_type,
                    "exclusive": True,
                    "time": options.time or STUDY_MINUTES,
                    "partition": options.partition,
                    "account": options.account,
                    "qos": options.qos,
                    "gres": options.gres if gpu else None,
                    "output": f"{out}/logs/{run_id(node_type)}.out",
                    "open-mode": "append",
                    "requeue": True,
                }
            ),
            prelude(),
            f"exec {q(sys.executable)} -m harness campaign-job {q(str(out))} --type {q(node_type)}",
            "",
        ]
    )


def prelude() -> str:
    q = shlex.quote(str(ROOT))
    return f"set -euo pipefail\ncd {q}\nexport PYTHONPATH={q}${{PYTHONPATH:+:$PYTHONPATH}}"


def merge_script(out: Path, jobs: list[str], into: Path, report: Path, options: Options) -> str:
    q = shlex.quote
    return "\n".join(
        [
            "#!/bin/bash",
            header(
                {
                    "job-name": "campaign-merge",
                    "dependency": "afterany:" + ":".join(jobs),
                    "time": MERGE_MINUTES,
                    "partition": options.partition,
                    "account": options.account,
                    "qos": options.qos,
                    "output": f"{out}/logs/merge.out",
                    "open-mode": "append",
                }
            ),
            prelude(),
            f"exec {q(sys.executable)} -m harness campaign-merge {q(str(out))} --into {q(str(into))} "
            f"--report {q(str(report))}",
            "",
        ]
    )


def read_campaign(out: Path) -> dict:
    path = Path(out) / "campaign.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HarnessError(
            f"{path}: not a campaign's record ({exc}); submit with: python -m harness "
            "campaign --slurm --out DIR --constraint TYPE"
        ) from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("types"), dict)
        or not isinstance(data.get("studies"), list)
        or not isinstance(data.get("jobs", {}), dict)
        or not all(isinstance(job, str) and job.isdigit() for job in data.get("jobs", {}).values())
    ):
        raise HarnessError(
            f"{path}: expected types, studies and jobs (Slurm job ids), found "
            f"{sorted(data) if isinstance(data, dict) else data}"
        )
    return data


def check_request(types: list[str], gpu_types: list[str], studies: list[str]) -> None:
    """The node types named once each, the studies known, sbatch here."""
    if not types and not gpu_types:
        raise HarnessError(
            "campaign --slurm: name each node type with --constraint (CPU studies) or "
            "--gpu-constraint (gpu-study), e.g. --constraint type-a --constraint type-b"
        )
    if len(set(types + gpu_types)) != len(types + gpu_types):
        raise HarnessError(f"campaign --slurm: a node type named twice in {types + gpu_types}")
    for name in studies:
        study.path_of(name)  # an unknown study stops here, not in every job
    if not shutil.which("sbatch"):
        raise Unavailable(
            "sbatch not found: campaign --slurm needs a Slurm cluster (a local one: "
            "sudo scripts/slurm-local.sh start --nodes 3)"
        )


def submit(
    out: Path,
    types: list[str],
    gpu_types: list[str],
    studies: list[str],
    options: Options,
    into: Path = DEFAULT_RESULTS,
    report_path: Path = ROOT / "reports" / "REPORT.md",
    say: Callable[[str], None] = print,
) -> int:
    """One job per node type and the merge job after them; the same OUT again resumes a campaign."""
    check_request(types, gpu_types, studies)
    check_reachable(code_needs())  # here, not as each job starts on its node
    out = Path(out).resolve()
    earlier = read_campaign(out) if (out / "campaign.json").exists() else None
    running = still_queued(list((earlier or {}).get("jobs", {}).values()))
    if running:
        raise HarnessError(
            f"{out}: the campaign's earlier jobs are still queued or running ({', '.join(running)}); "
            "wait for them (squeue) or scancel them, then submit again to resume" + held_advice(running)
        )
    for folder in ("logs", "nodes", "results", "gpu"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    jobs: dict[str, str] = {}
    kinds = {
        **{t: {"kind": "cpu", "run_id": run_id(t)} for t in types},
        **{t: {"kind": "gpu", "run_id": run_id(t)} for t in gpu_types},
    }
    record = {
        "name": (earlier or {}).get("name") or f"campaign-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}",
        "studies": studies,
        "quick": list(options.quick),
        "types": kinds,
        "jobs": jobs,
    }
    write_atomic(out / "campaign.json", json.dumps(record, indent=1) + "\n")
    for node_type, spec in kinds.items():
        script = out / f"{spec['run_id']}.sh"
        script.write_text(scripts(out, node_type, spec["kind"] == "gpu", options))
        jobs[node_type] = sbatch(str(script))
        write_atomic(out / "campaign.json", json.dumps(record, indent=1) + "\n")
    merge_sh = out / "merge.sh"
    merge_sh.write_text(
        merge_script(out, list(jobs.values()), Path(into).resolve(), Path(report_path).resolve(), options)
    )
    jobs["merge"] = sbatch(str(merge_sh))
    write_atomic(out / "campaign.json", json.dumps(record, indent=1) + "\n")
    say(
        f"campaign {record['name']}: "
        + ", ".join(f"{t} -> job {j}" for t, j in jobs.items())
        + f"; watch: squeue -j {','.join(jobs.values())}"
    )
    return 0


def job(args: argparse.Namespace) -> int:
    """`campaign-job OUT --type TYPE`, one node type's job: each study's run here (new, resumed on this
    host, or afresh), or gpu-study; progress to stderr."""
    from harness.machine import env  # here, not above: every command's start loads this module

    out, node_type = Path(args.out), args.type
    record = read_campaign(out)
    spec = record["types"].get(node_type)
    if spec is None:
        raise HarnessError(
            f"campaign-job --type {node_type}: not a node type of {out} ({sorted(record['types'])})"
        )
    identity = env.collect_identity()
    here = {
        "type": node_type,
        "node": os.environ.get("SLURMD_NODENAME"),
        "job": os.environ.get("SLURM_JOB_ID"),
        "hostname": identity.get("hostname"),
        "fingerprint": identity.get("fingerprint"),
        "features": node_features(os.environ.get("SLURMD_NODENAME")),
    }
    write_atomic(out / "nodes" / f"{spec['run_id']}.json", json.dumps(here, indent=1) + "\n")
    log(f"campaign job {node_type} on {here['node']} ({here['hostname']}, fingerprint {here['fingerprint']})")
    harness = [sys.executable, "-m", "harness"]
    if spec["kind"] == "gpu":
        return call([*harness, "gpu-study", "--out", str(out / "gpu" / node_type)], log)
    for name in record["studies"]:
        stem = study.path_of(name).stem
        run_dir = out / "results" / stem / spec["run_id"]
        todo = plan_for(run_dir, identity.get("fingerprint"))
        if todo == "resume" and record.get("quick"):
            todo = "afresh"  # a quick run cannot be resumed (run --resume completes a study as planned)
        log(f"{name}: {todo} ({run_dir})")
        if todo == "done":
            continue
        if todo == "afresh":
            aside = out / "abandoned" / f"{stem}-{spec['run_id']}-{time.time_ns()}"
            aside.parent.mkdir(parents=True, exist_ok=True)
            run_dir.rename(aside)
            log(f"{name}: the partial run from another host (or unreadable) moved to {aside}")
        command = [
            *harness,
            "run",
            name,
            "--out",
            str(out / "results"),
            "--run-id",
            spec["run_id"],
            "--devices",
            "cpu",
            *record.get("quick", []),
        ]
        code = call(command + (["--resume"] if todo == "resume" else []), log)
        if code != 0:
            return code
    return 0


def node_features(node: str | None) -> list[str]:
    if not node:
        return []
    done = subprocess.run(
        ["sinfo", "-h", "-N", "-n", node, "-o", "%f"], capture_output=True, text=True, timeout=30
    )
    return (
        sorted({f for line in done.stdout.split() for f in line.split(",") if f})
        if done.returncode == 0
        else []
    )


def call(command: list[str], say: Callable[[str], None]) -> int:
    say("$ " + " ".join(shlex.quote(c) for c in command))
    return subprocess.run(command, cwd=ROOT).returncode


def missing(out: Path, record: dict) -> list[str]:
    """What keeps the merge from importing: each node type's run that is not complete."""
    found = []
    for node_type, spec in record["types"].items():
        if spec["kind"] == "gpu":
            folder = out / "gpu" / node_type
            if not list(folder.glob("*.tar.gz")):
                found.append(f"{node_type}: no gpu-study archive in {folder}")
            continue
        for name in record["studies"]:
            run_dir = out / "results" / study.path_of(name).stem / spec["run_id"]
            if runfolder.completion(run_dir) is None:
                found.append(
                    f"{node_type}: {name} run {run_dir} is " + ("partial" if run_dir.exists() else "missing")
                )
    return found


def merge(args: argparse.Namespace) -> int:
    """`campaign-merge OUT --into DIR --report PATH`: every run of the campaign imported at once (one
    archive, checked whole), then the report; progress to stderr."""
    from harness.campaign import archive  # here, not above: every command's start loads this module

    out, into, report_path = Path(args.out), Path(args.into), Path(args.report)
    record = read_campaign(out)
    gaps = missing(out, record)
    if gaps:
        raise HarnessError(
            f"campaign {record['name']}: nothing imported, as not every run is complete: "
            + "; ".join(gaps)
            + f". Submit the same campaign again to resume: python -m harness "
            f"campaign --slurm --out {out} ..."
        )
    stage = out / "merge" / record["name"]
    if stage.exists():
        shutil.rmtree(stage)
    (stage / "results").mkdir(parents=True)
    for node_type, spec in record["types"].items():
        if spec["kind"] == "gpu":
            shutil.copytree(out / "gpu" / node_type / "results", stage / "results", dirs_exist_ok=True)
            continue
        for name in record["studies"]:
            stem = study.path_of(name).stem
            shutil.copytree(
                out / "results" / stem / spec["run_id"],
                stage / "results" / stem / spec["run_id"],
                ignore=shutil.ignore_patterns(runfolder.LOCK),
            )
    shutil.copytree(out / "logs", stage / "logs", ignore=shutil.ignore_patterns("merge.out"))
    nodes = {p.stem: json.loads(p.read_text()) for p in sorted((out / "nodes").glob("*.json"))}
    write_atomic(
        stage / "manifest.json",
        json.dumps({"campaign": record["name"], "slurm": record, "nodes": nodes}, indent=1) + "\n",
    )
    packed = archive.pack(stage, record["name"], say=log)
    archive.import_results(packed, into, say=log)
    return call(
        [sys.executable, "-m", "harness", "report", "--results", str(into), "--out", str(report_path)], log
    )
