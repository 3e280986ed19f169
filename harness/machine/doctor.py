"""`python -m harness doctor`: what can run here, and if not, why and how to fix it, one line
each. Every implementation is really constructed, each in its own subprocess (so one
framework's state never hides another's problem), with the harness's process settings.

The machine wing's commands are declared here (commands()): `list`, the registered levels
(what can be asked of a machine), and `doctor`.
"""

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import DEFAULT_WEIGHTS, ROOT, registry
from harness.command import Command, implementations, option, split_list
from harness.command import weights as weights_option  # `weights` here names a file
from harness.errors import HarnessError
from harness.machine import env, gpu, nvrtc, procenv

PROBE = r"""
import json, sys
from harness import registry
from harness.errors import Unavailable
name, device, weights = sys.argv[1:4]
try:
    registry.create(name, weights, device=device).close()
    print(json.dumps({"ok": True}))
except Unavailable as exc:
    print(json.dumps({"ok": False, "reason": str(exc)}))
except Exception as exc:
    print(json.dumps({"ok": False, "reason": f"{type(exc).__name__}: {exc}"}))
"""

TF_GPU = ("import json, tensorflow as tf; print(json.dumps({'version': tf.__version__, "
          "'gpus': [d.name for d in tf.config.list_physical_devices('GPU')], "
          "'cuda_build': tf.test.is_built_with_cuda()}))")
Row = tuple[str, str, str, str]  # implementation, device, runs ("ok", "no", "n/a"), reason / fix
CUPY = ("import json, cupy; n = cupy.cuda.runtime.getDeviceCount(); "
        "print(json.dumps({'version': cupy.__version__, 'devices': n, "
        "'cuda_runtime': cupy.cuda.runtime.runtimeGetVersion()}))")


def run_python(code: str, args: Sequence[str] = (), device: str = "gpu", timeout: float = 120,
               extra_env: dict[str, str] | None = None) -> dict:
    """Run a snippet in a fresh interpreter; its last stdout line is JSON."""
    child_env = {**os.environ, **procenv.settings(1, 1, device), **(extra_env or {})}
    try:
        done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=child_env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "reason": f"no answer within {timeout} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return {"ok": False, "reason": last}
    return json.loads(lines[-1])


def probe_row(name: str, device: str, weights: str | Path, gpu_absent: str | None) -> Row:
    spec = registry.spec(name)
    if device not in spec.devices:
        return name, device, "n/a", f"{name} runs on {', '.join(spec.devices)} only"
    if device == "gpu" and gpu_absent:
        return name, device, "no", (f"{gpu_absent}; fix: run on a machine with an NVIDIA GPU "
                                    "(the course's GPU server)")
    probe = run_python(PROBE, (name, device, str(weights)), device, extra_env=registry.process_env(name))
    return name, device, "ok" if probe.get("ok") else "no", probe.get("reason", "")


def implementation_rows(weights: str | Path = DEFAULT_WEIGHTS,
                        names: Sequence[str] | None = None) -> list[Row]:
    """One row per implementation and device, in registry order. The probes run side by side
    on a machine with cores to spare: each is a cold interpreter importing a framework, which
    took 82 s one after another on a fresh GPU machine."""
    gpu_absent = gpu.absent_reason()
    todo = [(name, device) for name in names or [n for n in registry.REGISTRY if n != "null"]
            for device in registry.DEVICES]
    workers = max(1, min(8, (os.cpu_count() or 2) // 2))
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda nd: probe_row(nd[0], nd[1], weights, gpu_absent), todo))


def cublaslt_line(level: str) -> str:
    """cuBLASLt, whose matmul epilogues carry the cuDNN level's dense layers (tuned, graph)."""
    found = registry.hook(level, "cublaslt")()
    return (f"cuBLASLt: version {found['version']} from {found['path']} ({found['how']})" if found["found"]
            else f"cuBLASLt: {found['reason']} (cuDNN's dense layers then use cuBLAS gemm + cuDNN ops)")


# A level's hook asked in a fresh interpreter: sys.argv[1] the level, sys.argv[2] the hook.
HOOK = ("import json, sys; from harness import registry; "
        "print(json.dumps(registry.hook(sys.argv[1], sys.argv[2])()))")


def level_hook_lines() -> list[str]:
    """Each level's own `doctor` hook (registry.py: a function returning {"line": ...} or {"reason": ...}),
    asked in a fresh interpreter: a new level's probe without an edit here."""
    out = []
    for name in registry.with_hook("doctor"):
        found = run_python(HOOK, (name, "doctor"), device="cpu")
        out.append(f"{registry.short(name)} level: {found.get('line') or found.get('reason')}")
    return out


def cpu_level_lines() -> list[str]:
    """The CPU target and vector features the Numba level's loops are compiled for, and the C
    compiler of the hand-written C level with the path its fused variant takes here (it compiles,
    or finds its library cached). Each asked in a fresh interpreter."""
    lines: list[str] = []
    for name in registry.with_hook("cpu_target"):
        target = run_python(HOOK, (name, "cpu_target"), device="cpu")
        lines.append(f"hand-written CPU level: Numba {target['numba']} compiles for {target['cpu']}, "
                     f"vector features {', '.join(target['features']) or 'none (scalar loops)'}"
                     if "cpu" in target else f"hand-written CPU level: {target.get('reason')}")
    for name in registry.with_hook("compiler"):
        c = run_python(HOOK, (name, "compiler"), device="cpu")
        lines.append(f"hand-written C level: {c['version']} ({c['compiler']}), {c['flags']}; fused runs the "
                     f"{c['fused_path']} path" if c.get("found")
                     else f"hand-written C level: {c.get('reason')}")
    return lines


def compute_capabilities() -> list[str]:
    """Each GPU's compute capability ("9.0"), from nvidia-smi; [] where there is none."""
    text = env.run_command(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]) or ""
    return [line.strip() for line in text.splitlines() if line.strip()]


def cuda_lines(caps: Sequence[str] | None = None) -> list[str]:
    """NVRTC, and the hand-written CUDA level's kernels compiled for each GPU here: registers per
    thread and static shared memory per block, as ptxas reports them (no CuPy needed)."""
    probe = nvrtc.probe()
    if not probe["found"]:
        return [f"NVRTC: {probe['reason']}"]
    archs = probe["archs"]
    lines = [f"NVRTC: version {probe['version']} from {probe['path']} ({probe['how']}), "
             f"compiles for sm_{min(archs)} to sm_{max(archs)}"]
    caps = compute_capabilities() if caps is None else caps
    if not caps:
        lines.append("CUDA kernels: no GPU here, no compute capability to compile them for "
                     "(the tests compile them for sm_80 and sm_90)")
    for cap in sorted(set(caps)):
        arch = "sm_" + cap.replace(".", "")
        uses = []
        try:
            for text, filename, options, exprs in (unit for level in registry.with_hook("kernels")
                                                   for unit in registry.hook(level, "kernels")(arch)):
                found = nvrtc.resources(nvrtc.load(), text, filename, arch, options, exprs)
                uses += [f"{expr} {r.get('registers', '?')} regs {r.get('shared_bytes', '?')} B shared"
                         for expr, r in found.items()]
        except (nvrtc.NvrtcError, ValueError) as exc:
            first = str(exc).splitlines()[0]
            lines.append(f"CUDA kernels for compute capability {cap}: do not compile: {first}")
            continue
        lines.append(f"CUDA kernels for compute capability {cap} ({arch}): " + "; ".join(uses))
    return lines


def uses_tensorflow(name: str) -> bool:
    """The level records TensorFlow's version (its installs.versions): it runs on TensorFlow."""
    versions = registry.REGISTRY[name].installs.versions if name in registry.REGISTRY else ()
    return "tensorflow" in (dist for _column, dist in versions)


def host_line(info: dict) -> str:
    """The host fingerprint (harness.machine.host), the key the report tells machines apart by."""
    found = info.get("host") or {}
    isa = " ".join(found.get("isa") or []) or "none of the code-path sets"
    memory = (found.get("memory_kib") or 0) / 2**20
    return (f"host fingerprint {info.get('fingerprint')} (the report's machine key): {found.get('vendor')} "
            f"family {found.get('family')} model {found.get('model')} stepping {found.get('stepping')}; "
            f"{isa}; L2 {found.get('l2_kib')} KiB, L3 {found.get('l3_kib')} KiB; {memory:.1f} GiB; kernel "
            f"{found.get('kernel')}; hypervisor {found.get('hypervisor') or 'none'}")


def onednn_line(onednn: dict) -> str:
    """oneDNN's line: the library, and the OpenMP threads a worker uses (the harness's thread rule),
    with this process's libgomp count labelled as this process's (it read no OMP_NUM_THREADS)."""
    if not onednn.get("found"):
        return f"oneDNN: {onednn.get('reason', 'not probed')}"
    parent = onednn.get("parent_threads")
    return (f"oneDNN: version {onednn['version']} from {onednn['path']} ({onednn['how']}), "
            f"{onednn['threads']} OpenMP thread(s) in a worker (the harness's thread rule)"
            + (f"; this process's own libgomp: {parent}" if parent is not None else ""))


def report(weights: str | Path = DEFAULT_WEIGHTS, names: Sequence[str] | None = None,
           out: Callable[[str], object] = print) -> int:
    """The machine, then one row per implementation and device (names: all when None). The
    TensorFlow line is printed when a level asked for runs on TensorFlow."""
    info = env.collect(procenv.settings(1, 1, "cpu"))  # the settings its probes and a study's workers get
    out(f"Python {info['python']} ({info['python_executable']})")
    out(f"CPU: {info['cpu']}, {info['cpus_usable']} usable cores, load average {info['loadavg']}")
    out(host_line(info))
    out("packages: " + ", ".join(f"{k} {v}" for k, v in sorted(info["packages"].items())))
    gpus = info.get("gpus") or []
    if gpus:
        for g in gpus:
            out(f"GPU {g['index']}: {g['name']}, driver {g['driver']}, "
                f"CUDA {info.get('cuda_driver_version')}, "
                f"{g['memory_used_mib']:.0f}/{g['memory_total_mib']:.0f} MiB in use, "
                f"{g['utilization_pct']:.0f}% busy")
        procs = info.get("gpu_processes") or []
        out("processes on the GPUs: " + (", ".join(f"{p.get('pid')} {p.get('name')} "
                                                   f"({p.get('used_memory_mib')} MiB)" for p in procs)
                                         or "none"))
    else:
        out(f"GPU: {info.get('gpu_note') or gpu.absent_reason()}")
    cudnn = info.get("cudnn") or {}
    out(f"cuDNN: version {cudnn['version']} from {cudnn['path']} ({cudnn['how']})" if cudnn.get("found")
        else f"cuDNN: {cudnn.get('reason', 'not probed')}")
    out(onednn_line(info.get("onednn") or {}))
    for level in registry.with_hook("cublaslt"):
        out(cublaslt_line(level))
    for line in cpu_level_lines() + level_hook_lines():
        out(line)
    for line in cuda_lines():
        out(line)
    cupy = run_python(CUPY)
    out(f"CuPy: {cupy['version']}, {cupy['devices']} device(s), CUDA runtime {cupy['cuda_runtime']}"
        if "version" in cupy else f"CuPy: unusable ({cupy.get('reason')}); fix: make install-gpu")
    if names is None or any(uses_tensorflow(name) for name in names):  # its import alone takes 5-7 s
        tf = run_python(TF_GPU)
        out(f"TensorFlow {tf['version']} ({'CUDA build' if tf['cuda_build'] else 'CPU-only build'}) "
            f"sees {len(tf['gpus'])} GPU(s)" if "version" in tf else f"TensorFlow: {tf.get('reason')}")
    out("")
    out(f"{'implementation':<15} {'device':<6} {'runs':<5} reason / fix")
    for name, device, status, reason in implementation_rows(weights, names):
        out(f"{name:<15} {device:<6} {status:<5} {reason}")
    return 0


def commands() -> list[Command]:
    """`list`, `doctor`: in the order `python -m harness --help` lists them."""
    return [
        Command(
            "list", "the registered levels, comma-separated (the Makefile's CPU_IMPLS, GPU_IMPLS)",
            cmd_list, option("--device", choices=("cpu", "gpu"), default=None,
                             help="only the levels that run on this device"),
            option("--explain", action="store_true",
                   help="their explain targets instead, level/variant (the Makefile's EXPLAIN; "
                        "needs --device)")),
        Command(
            "doctor", "what can run here, and why not", cmd_doctor,
            implementations(None, "only these (default: all)"), weights_option())]


def cmd_list(args: argparse.Namespace) -> int:
    """The report's levels (registry.levels: bottom rung first), on one device or all, one line; --explain:
    their explain targets (level/variant)."""
    if args.explain and args.device is None:
        raise HarnessError("list --explain: which device's targets? add --device cpu or --device gpu")
    names = registry.targets("explain", args.device) if args.explain else registry.on_device(args.device)
    print(",".join(names))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    names = split_list(args.implementations) if args.implementations else None
    return report(args.weights, names)
