"""The environment of a run, recorded with every run (env.json): small collect_* functions
merged into one dict, as pyperf does. Nothing here imports a framework; every probe is
allowed to fail and then records why."""

import importlib.metadata
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

from harness import registry
from harness.errors import HarnessError
from harness.machine import host, procenv

# The harness's own distributions, then every level's (its spec's `versions`): a new level's are
# recorded without an edit here.
HARNESS_PACKAGES = ("numpy", "h5py", "nvidia-ml-py", "matplotlib", "pandas", "pygount", "lenet-levels")
PACKAGES = tuple(dict.fromkeys(HARNESS_PACKAGES + tuple(registry.distributions())))
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "CUDA_VISIBLE_DEVICES")


def run_command(args: Sequence[str], timeout: float = 10) -> str | None:
    if not shutil.which(args[0]):
        return None
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def collect_system() -> dict:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    affinity: int | None
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"hostname": socket.gethostname(), "os": platform.platform(), "cpu": cpu,
            "cpu_count": os.cpu_count(), "cpus_usable": affinity,
            "loadavg": [round(x, 2) for x in load] if load else None,
            "python": platform.python_version(), "python_executable": sys.executable}


def collect_packages() -> dict:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return versions


def collect_gpus() -> dict:
    """GPUs, driver, CUDA and the compute processes on them, from nvidia-smi."""
    query = run_command(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,"
                         "memory.used,utilization.gpu", "--format=csv,noheader,nounits"])
    if query is None:
        return {"gpus": [], "gpu_note": "no NVIDIA GPU found (nvidia-smi missing or failing)"}
    gpus = []
    for line in query.strip().splitlines():
        index, name, driver, total, used, util = [part.strip() for part in line.split(",")]
        gpus.append({"index": int(index), "name": name, "driver": driver,
                     "memory_total_mib": float(total), "memory_used_mib": float(used),
                     "utilization_pct": float(util)})
    header = run_command(["nvidia-smi"]) or ""
    cuda = next((part.split(":")[1].strip().split()[0] for part in header.split("|")
                 if "CUDA Version" in part), None)
    apps = run_command(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory",
                        "--format=csv,noheader,nounits"]) or ""
    processes = [dict(zip(("pid", "name", "used_memory_mib"), [p.strip() for p in line.split(",")],
                          strict=False)) for line in apps.strip().splitlines() if line.strip()]
    return {"gpus": gpus, "cuda_driver_version": cuda, "gpu_processes": processes}


def library_probe(level: str, key: str) -> dict:
    """{key: the native library the level would load here (its registry hook "library")}; where
    the level's module cannot even be imported, None and why (env collection stays alive)."""
    try:
        probe = registry.hook(level, "library")
    except HarnessError as exc:
        return {key: None, f"{key}_note": str(exc)}
    return {key: probe()}


def collect_cudnn() -> dict:
    """The cuDNN library the raw GPU level would load: path, version, how it was found."""
    return library_probe(registry.raw_library("gpu") or "cudnn", "cudnn")


def collect_onednn(settings: dict | None = None) -> dict:
    """The oneDNN library the raw CPU level would load: path, version, and the OpenMP threads its
    workers use. The probe runs in this process, whose libgomp read this process's environment (none
    set: one thread a core); a worker gets the harness's thread rule (settings: procenv.settings, 1
    thread by default) before the library loads. So `threads` is the workers' OMP_NUM_THREADS, and
    this process's count is kept apart as `parent_threads`."""
    found = library_probe(registry.raw_library("cpu") or "onednn", "onednn")
    library = found.get("onednn")
    if library and library.get("found"):
        library["parent_threads"] = library.pop("threads", None)
        library["threads"] = int((settings or procenv.settings())["OMP_NUM_THREADS"])
    return found


def collect_nvrtc() -> dict:
    """The NVRTC that compiles the hand-written CUDA level's kernels here: path and version."""
    from harness.machine import nvrtc

    found = nvrtc.probe()
    found.pop("archs", None)
    return {"nvrtc": found}


def collect_host() -> dict:
    """The host's fingerprint fields (harness.machine.host): CPU, instruction sets, caches, cores,
    memory, kernel, hypervisor."""
    return {"host": host.collect()}


def collect_threads(settings: dict | None = None) -> dict:
    env = settings or os.environ
    return {"threads": {var: env.get(var) for var in THREAD_VARS}}


def collect(thread_settings: dict | None = None) -> dict:
    info: dict = {"collected_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    for collect_part in (collect_system, collect_host, collect_gpus, collect_cudnn, collect_onednn,
                         collect_nvrtc):
        try:  # oneDNN's threads are the workers' (thread_settings), not this process's
            info.update(collect_part(thread_settings) if collect_part is collect_onednn else collect_part())
        except Exception as exc:  # an odd machine must not stop a run
            info[f"{collect_part.__name__}_error"] = f"{type(exc).__name__}: {exc}"
    info["packages"] = collect_packages()
    info.update(collect_threads(thread_settings))
    info["fingerprint"] = host.fingerprint(info)  # the host and its GPUs: the report's machine key
    return info


def collect_identity() -> dict:
    """What names this machine in the report (harness.report.claims.hosts): the system, the host's
    fingerprint fields and the GPUs, without the libraries' probes."""
    info = {**collect_system(), **collect_host(), **collect_gpus()}
    info["fingerprint"] = host.fingerprint(info)
    return info
