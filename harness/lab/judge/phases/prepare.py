"""A grading's first phase, before any submission: what the Grader holds across submissions
(harness.lab.judge.grade.Grader builds on it: references, then steps, then the row).

    Prepared(lab, out, weights, report, iso)   the oracle and its answers on the gate's images (sent
                                  to each worker: no MNIST in the sandbox), the training images the
                                  timed images are drawn from, each [stages] stage's input and output
                                  (.stage_oracle), the workers' environment, the sandbox
                                  chosen (harness.lab.box.walls.isolation), the node, the scratch folder
      .predict_oracle(images)     the oracle's probabilities on uint8 images
      .limits(trusted) -> Limits  a worker's limits (harness.lab.box.proc.limits): the lab's; a reference
                                  has no time limits
      .space(slot, name), .space_root(name), .release(root)   a worker's writable space
                                  (harness.lab.box.walls.disk), made fresh, released whatever happens
    start_weights(lab, weights)   the weights a lab starts from (training: the shared initial ones)
    node_info(device)             the machine a row was timed on: its host, Slurm node and task, CPU
                                  and GPU (model, UUID), its Slurm task (slurm_task), its host's
                                  fingerprint and its machine_type (what the leaderboard ranks apart)
"""

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path

import numpy as np

from harness import DEFAULT_WEIGHTS
from harness.data import mnist
from harness.data import weights as weights_file
from harness.errors import HarnessError
from harness.lab.box.proc.limits import Limits
from harness.lab.box.sandbox import Sandbox
from harness.lab.box.walls import disk, isolation
from harness.lab.judge.rules import deadlines, timing
from harness.lab.judge.rules.assignment import Lab
from harness.machine import env, gpu, host, procenv


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


class Prepared:
    """The oracle, the images and the workers' environment and spaces, across submissions."""

    def __init__(self, lab: Lab, out: Path, weights: str | Path = DEFAULT_WEIGHTS,
                 report: Callable[[str], None] = print, iso: isolation.Isolation | None = None) -> None:
        from lenet_numpy.model import NumpyLeNet  # the oracle: NumPy only

        self.lab = lab
        self.out = Path(out)
        self.weights = str(start_weights(lab, weights))
        self.report = report
        self.oracle = NumpyLeNet(self.weights, dtype=lab.dtype)
        # sent to each worker (no MNIST there); a training lab's gate is its steps (phases.training)
        self.gate_images = mnist.load("test")[0][:lab.kind.gate_images(lab.gate)]
        self.initial = {name: weights_file.Layer(k.astype("float64"), b.astype("float64"))
                        for name, (k, b) in weights_file.read(self.weights).items()}  # training's start
        self.last_weights = self.initial  # a training submission's weights after its last steps
        self.gate_oracle = (self.predict_oracle(self.gate_images) if len(self.gate_images) else
                            np.empty((0, 10)))
        self.stage_oracle = lab.kind.stage_oracle(self.weights, self.gate_images, lab.dtype, bool(lab.stages))
        self.train = mnist.load("train")[0]
        self.env = procenv.settings(lab.measure.threads, 1, lab.device)
        self.iso = iso or isolation.decide()
        self.refs: dict[str, Sandbox] = {}
        self.node = node_info(lab.device)
        self.scratch = Path(tempfile.mkdtemp(prefix="lenet-lab-"))  # 0700: the grader's alone
        self.spaces: dict[Path, disk.Space] = {}  # the workers' writable spaces, by folder
        self.tmpfs = self.iso.bwrap is not None and os.geteuid() == 0  # a bounded tmpfs per space
        self.cold_s: float | None = None  # rank_by's cold start (deadlines.Pace), measured once
        self.pace: deadlines.Pace | None = None  # this submission's deadlines come from it
        self.waits: dict[str, dict] = {}  # per step: the exchange nearest its deadline
        self.worker: Sandbox | None = None  # the submission's worker now (a fresh one may replace it)
        self.current: tuple[str, Path, Path] = ("", Path(), Path())  # its student, folder, results
        if self.tmpfs:
            disk.private_mounts()  # the spaces' tmpfs mounts vanish with the grader, however it ends

    def stopping(self) -> bool:
        """Whether the grader was told to stop (a grader signal: the grade module's, above this room);
        then its workers are killed rather than asked to exit."""
        return False

    def predict_oracle(self, images_u8: np.ndarray) -> np.ndarray:
        return timing.oracle_answers(self.oracle, images_u8, self.lab.dtype)

    def limits(self, trusted: bool) -> Limits:
        """A worker's limits: the lab's; a reference (trusted) has no time limits."""
        given = self.lab.limits  # the lab's, of which a box enforces Limits' fields
        limits = Limits(**{f.name: getattr(given, f.name) for f in fields(Limits)})
        return replace(limits, wall_s=None, cpu_s=None) if trusted else limits

    def space(self, slot: int, name: str) -> disk.Space:
        """A worker's writable space (harness.lab.box.walls.disk), made fresh; released in clean_up or
        close."""
        root = self.space_root(name)
        self.release(root)
        given = self.lab.limits
        try:
            self.spaces[root] = disk.make(root, given.disk_mb, given.files, self.iso.uid(slot), self.tmpfs)
        except OSError as exc:
            raise HarnessError(f"cannot make a worker's writable space {root}: {exc}") from None
        return self.spaces[root]

    def space_root(self, name: str) -> Path:
        return self.scratch / f"space-{name}"

    def release(self, root: Path) -> None:
        space = self.spaces.pop(root, None)
        why = disk.release(space) if space is not None else disk.remove_tree(root)
        if why:
            self.report(f"warning: clean-up of {root} failed ({why}); grading goes on")
