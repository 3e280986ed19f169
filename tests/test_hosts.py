"""The host fingerprint (harness.machine.host) and the report's machines keyed by it
(harness.report.claims.hosts): two hosts that share a model name are two machines; runs recorded before
the fingerprint keep what they recorded, and an arithmetic run's peak tells such hosts apart."""

import json

from harness.machine import env, host
from harness.measure.store import runfolder
from harness.report.claims import hosts, rundata

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse avx2 fma avx512f avx512dq avx512bw avx512vl avx512_bf16 hypervisor

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: not the first processor
"""


def test_the_fingerprint_fields_are_read_from_cpuinfo_sysfs_and_meminfo(tmp_path):
    assert host.collect_cpu(CPUINFO) == {"vendor": "AuthenticAMD", "family": "25", "model": "17",
                                         "stepping": "1", "model_name": "AMD EPYC"}
    assert host.collect_isa(CPUINFO) == ["avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl",
                                         "avx512_bf16"]
    for index, (level, kind, size) in enumerate([("1", "Data", "32K"), ("1", "Instruction", "32K"),
                                                 ("2", "Unified", "1024K"), ("3", "Unified", "32M")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (folder / name).write_text(value + "\n")
    assert host.collect_caches(tmp_path) == {"l2_kib": 1024, "l3_kib": 32768}
    assert host.collect_memory("MemTotal:       24684084 kB\nMemFree: 1 kB\n") == 24684084
    assert host.collect_hypervisor(CPUINFO, tmp_path / "none", tmp_path / "none") == "present"
    (tmp_path / "vendor").write_text("QEMU\n")
    assert host.collect_hypervisor(CPUINFO, tmp_path / "none", tmp_path / "vendor") == "QEMU"
    assert host.collect_hypervisor("flags : fpu\n", tmp_path / "none", tmp_path / "none") is None


def test_this_machine_has_a_fingerprint_and_env_records_it():
    identity = env.collect_identity()
    assert identity["fingerprint"] == host.fingerprint(identity) and len(identity["fingerprint"]) == 12
    assert identity["host"]["cpus_usable"] >= 1 and identity["host"]["kernel"]
    assert host.fingerprint({"cpu": "AMD EPYC"}) is None  # an env.json from before the fingerprint


def fingerprinted(isa, l3=32768, gpus=()):
    found = {"hostname": "vm", "cpu": "AMD EPYC", "cpus_usable": 2, "os": "Linux-6.1",
             "gpus": [{"name": g, "driver": "580"} for g in gpus],
             "host": {"vendor": "AuthenticAMD", "family": "25", "model": "17", "stepping": "1",
                      "model_name": "AMD EPYC", "isa": list(isa), "l2_kib": 1024, "l3_kib": l3,
                      "cpus_usable": 2, "memory_kib": 8 << 20, "kernel": "6.1", "hypervisor": "KVM"}}
    return {**found, "fingerprint": host.fingerprint(found)}


def run(study, started, env_json, rows=()):
    return {"study": study, "run_id": f"r{started}", "started": started, "env": env_json, "rows": list(rows)}


def test_two_hosts_that_differ_only_in_the_fingerprint_are_two_machines_named_apart():
    a, b = fingerprinted(["avx2", "avx512f"]), fingerprinted(["avx2", "avx512f"], l3=16384)
    c = fingerprinted(["avx2"])
    runs = hosts.assign([run("api_levels", 1, a), run("api_levels", 2, b), run("api_levels", 3, c)])
    names = [r["machine"] for r in runs]
    assert len(set(names)) == 3 and len({r["host_key"] for r in runs}) == 3
    assert names[2] == "vm: AMD EPYC, AVX2, 2 cores"
    assert names[0].startswith("vm: AMD EPYC, AVX-512, 2 cores") and "L3 32768 KiB" in names[0]
    assert "L3 16384 KiB" in names[1]
    gpu = hosts.assign([run("api_levels", 1, fingerprinted(["avx2", "avx512f", "amx_tile"], gpus=["H100"]))])
    assert gpu[0]["machine"] == "vm: H100, AMD EPYC, AVX-512, AMX, 2 cores"


def legacy(os_name):
    return {"hostname": "vm", "cpu": "AMD EPYC", "cpus_usable": 2, "gpus": [], "os": os_name}


def arithmetic_row(peak):
    return {"kind": "arithmetic", "status": "ok", "peak": {"isa": "avx512", "macs_per_s": peak}}


def test_unfingerprinted_runs_keep_what_they_recorded_and_an_arithmetic_peak_names_the_host():
    """The AMD hosts of 2026-11-25 and 2026-11-27: the same model name and cores, their kernels and
    their arithmetic runs' peaks (58.7 and 129.7 G multiply-adds/s) differ."""
    runs = hosts.assign([run("api_levels", 1, legacy("Linux-6.18.44-fc-v657-x86_64")),
                         run("arithmetic", 2, legacy("Linux-6.18.44-fc-v657-x86_64"), [arithmetic_row(58.7e9)]),
                         run("api_levels", 3, legacy("Linux-6.18.44-fc-v509-x86_64")),
                         run("arithmetic", 4, legacy("Linux-6.18.44-fc-v509-x86_64"), [arithmetic_row(129.7e9)]),
                         run("api_levels", 5, legacy("Linux-6.18.44-fc-v669-x86_64"))])
    names = [r["machine"] for r in runs]
    assert names[0] == names[1] == "vm: AMD EPYC, 2 cores, AVX-512, peak 58.7 G MAC/s (not fingerprinted)"
    assert names[2] == names[3] == "vm: AMD EPYC, 2 cores, AVX-512, peak 130 G MAC/s (not fingerprinted)"
    assert names[4] == "vm: AMD EPYC, 2 cores (not fingerprinted)"
    same = hosts.assign([run("api_levels", 1, legacy("Linux-a")), run("api_levels", 2, legacy("Linux-b"))])
    assert same[0]["machine"] != same[1]["machine"] and "kernel a" in same[0]["machine"]


def test_the_committed_amd_runs_of_two_days_are_two_machines():
    runs = rundata.load_runs()
    by_day = {day: {r["machine"] for r in runs if r["run_id"].startswith(day) and r["study"] == "api_levels"
                    and "EPYC" in r["machine"]} for day in ("20261125", "20261127")}
    assert len(by_day["20261125"]) == 1 and len(by_day["20261127"]) == 1
    assert by_day["20261125"] != by_day["20261127"]


def test_a_run_written_with_a_fingerprint_is_keyed_by_it(tmp_path):
    identity = env.collect_identity()
    folder = tmp_path / "api_levels" / "20990101-000000-x"
    folder.mkdir(parents=True)
    (folder / "env.json").write_text(json.dumps(identity))
    (folder / "results.jsonl").write_text(json.dumps({"schema": 1, "run_id": "20990101-000000-x", "time": 1.0,
                                                      "kind": "load", "round": 0}) + "\n")
    runfolder.mark_complete(folder, "test")  # a run answers once it is complete
    (found,) = rundata.load_runs(tmp_path)
    assert found["host_key"] == f"fp:{identity['fingerprint']}"
    assert hosts.name_of([found], identity) == found["machine"] and "not fingerprinted" not in found["machine"]


def test_a_gpu_hosts_fingerprint_holds_its_gpu_driver_and_cuda_a_cpu_hosts_is_as_before():
    """Two GPU leases are two machines where the GPU model, driver or CUDA differ; a host without GPUs
    hashes its fields alone, as before (its runs stay one machine)."""
    h100, h200 = fingerprinted(["avx2"], gpus=["NVIDIA H100 80GB HBM3"]), fingerprinted(["avx2"], gpus=["NVIDIA H200"])
    assert h100["fingerprint"] != h200["fingerprint"]
    cuda12 = host.fingerprint({**h200, "cuda_driver_version": "12.8"})
    assert cuda12 != host.fingerprint({**h200, "cuda_driver_version": "13.0"}) and cuda12 != h200["fingerprint"]
    cpu = fingerprinted(["avx2"])
    assert host.fingerprint({**cpu, "cuda_driver_version": "13.0"}) == cpu["fingerprint"]
    import hashlib
    import json as json_module

    key = {**{f: cpu["host"].get(f) for f in host.FINGERPRINT_FIELDS}, "gpus": []}
    assert cpu["fingerprint"] == hashlib.sha256(json_module.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
