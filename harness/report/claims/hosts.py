"""Which machine a run was measured on, and its name in the report. A machine is keyed by its host
fingerprint (env.json's `fingerprint`, harness.machine.host): two hosts that share a model name
("AMD EPYC", 2 cores) are two machines. A run recorded before the fingerprint keeps what it recorded:
its host name, CPU model name, usable cores, GPUs and kernel are its key, and it is named "not
fingerprinted"; where an `arithmetic` run of the same key measured the CPU's multiply-add peak, the
name gives that peak and its instruction set, which tells such hosts apart (the AMD hosts of
2026-11-25 and 2026-11-27: 58.3 and 130 G multiply-adds/s, "peak 58.3 G MAC/s" in their names).

    key(env) -> str                     the machine key of one env.json
    isa_words(isa) -> str               'AVX-512, AMX' from the host's instruction sets
    assign(runs) -> runs                each run's `host_key` and `machine` (its name, unique per key)
    name_of(runs, env) -> str | None    the name of the machine whose key env has, among runs
"""

import re
import statistics
from collections.abc import Iterable

LEGACY = "legacy:"  # keys of runs recorded before the fingerprint


def key(env: dict) -> str:
    if env.get("fingerprint"):
        return f"fp:{env['fingerprint']}"
    gpus = ",".join(g.get("name", "?") for g in env.get("gpus") or [])
    recorded = (env.get("hostname"), env.get("cpu"), env.get("cpus_usable"), gpus, env.get("os"))
    return LEGACY + "|".join(str(part) for part in recorded)


def isa_words(isa: Iterable[str]) -> str:
    """The code path the host's vector unit picks: 'AVX-512, AMX', 'AVX-512', 'AVX2', 'no AVX2'."""
    found = set(isa)
    vector = "AVX-512" if "avx512f" in found else "AVX2" if "avx2" in found else "no AVX2"
    return vector + (", AMX" if "amx_tile" in found else "")


def cpu_words(name: str | None) -> str:
    """'Intel(R) Xeon(R) Processor' -> 'Intel Xeon Processor'."""
    return re.sub(r"\((R|TM|tm|r)\)", "", name or "?").replace("  ", " ").strip()


def peaks(runs: list[dict]) -> dict[str, tuple[str, float]]:
    """key -> (instruction set, median G multiply-adds/s) of its `arithmetic` runs' measured peaks."""
    found: dict[str, list[tuple[str, float]]] = {}
    for run in runs:
        if run["study"] != "arithmetic":
            continue
        for row in run["rows"]:
            peak = row.get("peak") if row.get("kind") == "arithmetic" and row.get("status") == "ok" else None
            if peak and peak.get("macs_per_s"):
                found.setdefault(run["host_key"], []).append((peak.get("isa", "?"), peak["macs_per_s"]))
    return {k: (v[0][0], statistics.median(p for _, p in v) / 1e9) for k, v in found.items()}


def base_name(env: dict) -> str:
    """'vm: AMD EPYC, AVX-512, 2 cores'; with a GPU, the GPU first: 'vm: NVIDIA H100 80GB HBM3, Intel
    Xeon Processor, AVX-512, AMX, 16 cores'. An unfingerprinted run has no instruction sets, and with
    a GPU is named by the GPU alone."""
    host = env.get("host") or {}
    cpu = cpu_words(host.get("model_name") or env.get("cpu"))
    cores = host.get("cpus_usable") or env.get("cpus_usable") or "?"
    isa = [isa_words(host.get("isa") or [])] if env.get("fingerprint") else []
    gpus = [g.get("name", "?") for g in env.get("gpus") or []]
    # a GPU machine from before the fingerprint is named by its GPU, as it was (its CPU is in the table)
    parts = [cpu, *isa, f"{cores} cores"] if env.get("fingerprint") or not gpus else []
    return f"{env.get('hostname', '?')}: " + ", ".join(gpus[:1] + parts)


def extras(env: dict, peak: tuple[str, float] | None) -> list[str]:
    """What may be added to a name, in order, until no two machines share one."""
    host = env.get("host") or {}
    if env.get("fingerprint"):
        return [f"family {host.get('family')} model {host.get('model')} stepping {host.get('stepping')}",
                f"L2 {host.get('l2_kib')} KiB, L3 {host.get('l3_kib')} KiB",
                f"{(host.get('memory_kib') or 0) / 2**20:.0f} GiB",
                f"kernel {host.get('kernel')}", f"fingerprint {env['fingerprint']}"]
    return [f"kernel {(env.get('os') or '?').removeprefix('Linux-').split('-with-')[0]}"]


def names(envs: dict[str, dict], found_peaks: dict[str, tuple[str, float]]) -> dict[str, str]:
    """key -> a name no other key has: the base name, an unfingerprinted one's peak and mark, then
    extras (family and model, caches, memory, kernel, fingerprint) until the names differ."""
    out = {}
    for k, env in envs.items():
        name = base_name(env)
        if k.startswith(LEGACY):
            peak = found_peaks.get(k)
            # MAC: multiply-accumulate, the report's multiply-add; short, as a panel's title carries it
            name += (f", {peak[0].upper().replace('AVX512', 'AVX-512')}, peak {peak[1]:.3g} G MAC/s"
                     if peak else "") + " (not fingerprinted)"
        out[k] = name
    more = {k: extras(env, found_peaks.get(k)) for k, env in envs.items()}
    for step in range(max((len(v) for v in more.values()), default=0)):
        shared = [k for k in out if list(out.values()).count(out[k]) > 1]
        if not shared:
            break
        for k in shared:
            if step < len(more[k]):
                out[k] += f", {more[k][step]}"
    return out


def assign(runs: list[dict]) -> list[dict]:
    """Each run's `host_key` (key) and `machine` (the name of its key); the runs, in place."""
    for run in runs:
        run["host_key"] = key(run["env"])
    envs = {}
    for run in sorted(runs, key=lambda r: r["started"]):
        envs[run["host_key"]] = run["env"]  # the newest env of a key names it
    found = names(envs, peaks(runs))
    for run in runs:
        run["machine"] = found[run["host_key"]]
    return runs


def name_of(runs: list[dict], env: dict) -> str | None:
    """The report's name of the machine env.json `env` describes, among runs (assign's), or None."""
    k = key(env)
    return next((r["machine"] for r in runs if r.get("host_key") == k), None)
