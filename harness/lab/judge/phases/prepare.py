"""A grading's first phase, before any submission: what the Grader holds across submissions
(harness.lab.judge.grade.Grader.__init__: the oracle and its answers on the gate's images, sent to
each worker, no MNIST in the sandbox; the training images the timed images are drawn from; each
[stages] stage's input and output; the workers' environment, limits and writable spaces,
harness.lab.box.walls.disk, made fresh and released whatever happens), and what it reads here:

    start_weights(lab, weights)   the weights a lab starts from (training: the shared initial ones)
    node_info(device)             the machine a row was timed on: its host, Slurm node and task, CPU
                                  and GPU (model, UUID), its Slurm task (slurm_task), its host's
                                  fingerprint and its machine_type (what the leaderboard ranks apart)
"""

import hashlib
import json
import os
from pathlib import Path

from harness import DEFAULT_WEIGHTS
from harness.lab.judge.rules.assignment import Lab
from harness.machine import env, gpu, host


def start_weights(lab: Lab, weights: str | Path = DEFAULT_WEIGHTS) -> Path:
    """The weights a lab's submissions start from: those given, except that a training lab given the
    default (trained) weights starts from the shared initial ones (weights/lenet5_init.weights.h5)."""
    return lab.kind.start_weights(weights)


def node_info(device: str) -> dict:
    """Its host name, CPU, usable CPUs, load and (on the GPU) the GPU's name."""
    system = env.collect_system()
    info = {"hostname": system["hostname"], "cpu": system["cpu"], "cpus_usable": system["cpus_usable"],
            "loadavg": system["loadavg"], "gpu": None, "slurm": slurm_task()}
    gpus: list[dict] = []
    if device == "gpu":
        gpus = env.collect_gpus().get("gpus") or []
        info["gpu"] = ", ".join(g["name"] for g in gpus) or None
        info["gpu_uuid"] = gpu.uuid_of(gpu.visible_gpu_id(), gpu.gpu_listing())  # as the GPU lock names it
    found = host.collect()
    info["fingerprint"] = host.fingerprint({"host": found, "gpus": gpus})  # this host, as studies key it
    info["machine_type"] = machine_type(found, gpus)
    return info


def machine_type(found: dict, gpus: list[dict]) -> dict:
    """The kind of machine (the leaderboard ranks each kind apart): CPU model, its code paths and
    caches, and the GPU model; not the cores or memory a Slurm job was given."""
    hardware = {k: found.get(k) for k in ("vendor", "family", "model", "stepping", "model_name", "isa",
                                          "l2_kib", "l3_kib")}
    gpu_names = sorted(str(g.get("name")) for g in gpus)
    hardware["gpus"] = gpu_names
    key = hashlib.sha256(json.dumps(hardware, sort_keys=True).encode()).hexdigest()[:12]
    isa = found.get("isa") or []
    vector = "AVX-512" if "avx512f" in isa else "AVX2" if "avx2" in isa else "no AVX2"
    cpu = f"{found.get('model_name') or '?'} ({vector}, L3 {found.get('l3_kib')} KiB)"
    name = " / ".join([*gpu_names, cpu])
    return {"key": key, "name": name}


def slurm_task() -> dict | None:
    """The Slurm node, job and array task grading here (None outside Slurm): several nodes may share
    one host name, and a requeued task runs again."""
    if not os.environ.get("SLURM_JOB_ID"):
        return None
    return {"node": os.environ.get("SLURMD_NODENAME"), "job": os.environ.get("SLURM_JOB_ID"),
            "array_job": os.environ.get("SLURM_ARRAY_JOB_ID"),
            "array_task": os.environ.get("SLURM_ARRAY_TASK_ID"),
            "restarts": int(os.environ.get("SLURM_RESTART_COUNT") or 0)}
