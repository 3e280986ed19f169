"""The host's fingerprint, recorded in every run's env.json (`host`): what tells two machines apart
when they share a model name. Two cloud hosts that both call themselves "AMD EPYC" with 2 cores can
differ twice over in speed (a different generation, a different vector unit); the model name alone
made them one machine in the report. Small collect_* functions, each reading one source (/proc/cpuinfo,
sysfs, os), each allowed to find nothing.

    collect_cpu(text) -> dict        vendor, family, model, stepping, model name (from /proc/cpuinfo)
    collect_isa(text) -> [str]       the instruction sets that change code paths (ISA_FLAGS, in order)
    collect_caches(root) -> dict     L2 and L3 size of cpu0 in KiB (sysfs cache index*)
    collect_memory(text) -> int      MemTotal in KiB (/proc/meminfo)
    collect_hypervisor(...) -> str   the hypervisor's name, "present" or None (bare metal)
    collect() -> dict                all of them, plus usable cores and the kernel: env.json's `host`
    fingerprint(env) -> str          a short hash of the host's fields and its GPUs' model, driver and CUDA
"""

import hashlib
import json
import os
import platform
from pathlib import Path

# The flags that pick a different code path in the C level (-march=native), oneDNN, OpenBLAS or
# XLA: a host with AVX-512 and one without are two machines even with the same name.
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "avx512_fp16", "avx512ifma", "avx512vbmi", "avx_vnni", "amx_tile",
             "amx_bf16", "amx_int8")
CPU_FIELDS = {"vendor_id": "vendor", "cpu family": "family", "model": "model", "stepping": "stepping",
              "model name": "model_name"}
# The fields that make the fingerprint (not loadavg or a time: those change within a machine).
FINGERPRINT_FIELDS = ("vendor", "family", "model", "stepping", "model_name", "isa", "l2_kib", "l3_kib",
                      "cpus_usable", "memory_kib", "kernel", "hypervisor")


def first_processor(text: str) -> dict[str, str]:
    """The `key: value` lines of /proc/cpuinfo's first processor block."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if found:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            found.setdefault(key.strip(), value.strip())
    return found


def collect_cpu(text: str) -> dict:
    block = first_processor(text)
    return {name: block.get(key) for key, name in CPU_FIELDS.items()}


def collect_isa(text: str) -> list[str]:
    flags = set(first_processor(text).get("flags", "").split())
    return [f for f in ISA_FLAGS if f in flags]


def size_kib(text: str) -> int | None:
    """sysfs' cache size ('2048K', '32M') in KiB."""
    text = text.strip()
    scale = {"K": 1, "M": 1024, "G": 1024 * 1024}.get(text[-1:].upper())
    try:
        return int(text[:-1]) * scale if scale else int(text) // 1024
    except ValueError:
        return None


def collect_caches(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> dict:
    """{'l2_kib': .., 'l3_kib': ..} from cpu0's unified or data caches (None where not listed)."""
    out: dict[str, int | None] = {"l2_kib": None, "l3_kib": None}
    for index in sorted(root.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = size_kib((index / "size").read_text())
        except OSError:
            continue
        if level in ("2", "3") and kind in ("Unified", "Data"):
            out[f"l{level}_kib"] = size
    return out


def collect_memory(text: str) -> int | None:
    line = next((ln for ln in text.splitlines() if ln.startswith("MemTotal:")), None)
    try:
        return int(line.split()[1]) if line else None
    except (IndexError, ValueError):
        return None


def collect_hypervisor(cpuinfo: str, sys_type: Path = Path("/sys/hypervisor/type"),
                       dmi_vendor: Path = Path("/sys/class/dmi/id/sys_vendor")) -> str | None:
    """The hypervisor's name where sysfs says it (xen, or the DMI vendor: 'Amazon EC2', 'QEMU'),
    'present' where only the CPU's `hypervisor` flag does, None on bare metal."""
    for path in (sys_type, dmi_vendor):
        try:
            name = path.read_text().strip()
        except OSError:
            continue
        if name:
            return name
    flags = first_processor(cpuinfo).get("flags", "").split()
    return "present" if "hypervisor" in flags else None


def read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count()


def collect() -> dict:
    """env.json's `host`: the CPU, its code-path instruction sets, caches, usable cores, memory,
    kernel and hypervisor."""
    cpuinfo = read("/proc/cpuinfo")
    return {**collect_cpu(cpuinfo), "isa": collect_isa(cpuinfo), **collect_caches(),
            "cpus_usable": usable_cores(), "memory_kib": collect_memory(read("/proc/meminfo")),
            "kernel": platform.release(), "hypervisor": collect_hypervisor(cpuinfo)}


def fingerprint(env: dict) -> str | None:
    """A short hash of the host's FINGERPRINT_FIELDS and its GPUs' model and driver, and with GPUs the
    CUDA version their driver runs (nvidia-smi's): two GPU leases on different hosts, drivers or runtimes
    are two machines. A host without GPUs hashes as before (its runs stay one machine). None for an
    env.json recorded before the fingerprint (its run is not fingerprinted)."""
    host = env.get("host")
    if not isinstance(host, dict):
        return None
    gpus = [(g.get("name"), g.get("driver")) for g in env.get("gpus") or []]
    key = {**{f: host.get(f) for f in FINGERPRINT_FIELDS}, "gpus": gpus}
    if gpus:
        key["cuda"] = env.get("cuda_driver_version")
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
