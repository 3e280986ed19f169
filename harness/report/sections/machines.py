"""The machines behind the report in one short table, their versions printed the way their
vendors print them (cuDNN 91900 -> 9.19.0), and a line naming what differs between the machine
of the CPU rows and that of the GPU rows. Read from each run's env.json."""

from harness import registry
from harness.machine.versions import cuda_runtime, cudnn_version
from harness.report.claims import hosts
from harness.report.markup import words
from harness.report.markup.tables import compact, table

# Python, then each level's distributions (its spec's `versions`: TensorFlow, Keras, JAX, PyTorch, CuPy,
# Numba, ONNX Runtime, OpenVINO, NumPy, ...), the first installed of a column's distributions.
VERSION_FIELDS = (("Python", lambda e: e.get("python")),
                  *((column, lambda e, dists=dists: pkg(e, *dists))
                    for column, dists in registry.version_columns().items()))


def pkg(env: dict, *names: str) -> str | None:
    packages = env.get("packages") or {}
    return next((packages[n] for n in names if packages.get(n)), None)


def onednn_version(env: dict) -> str | None:
    found = env.get("onednn") or {}
    return found.get("version", "").split(" ")[0] or None if found.get("found") else None


# A native library's column shows its version only where the machine's runs measured the level that
# loads it: a library merely installed (the cuDNN wheel on a machine with no GPU) was not used.
# Where installed but not loaded, the column says so ("9.28.0, installed, not used") rather than hide it.
LOADED_BY = {"oneDNN": registry.raw_library("cpu"), "cuDNN": registry.raw_library("gpu"),
             "CUDA runtime": registry.raw_library("gpu")}


def fingerprint_words(env: dict) -> str:
    """'687df5f2e67f: GenuineIntel 6/167/1, AVX-512, AMX, L2 2048 KiB, L3 491520 KiB, 24 GiB, kernel
    6.18.44, hypervisor KVM', or 'not fingerprinted' (a run from before harness.machine.host)."""
    host = env.get("host") or {}
    if not env.get("fingerprint"):
        return "not fingerprinted"
    return (f"{env['fingerprint']}: {host.get('vendor')} {host.get('family')}/{host.get('model')}/"
            f"{host.get('stepping')}, {hosts.isa_words(host.get('isa') or [])}, L2 {host.get('l2_kib')} KiB, "
            f"L3 {host.get('l3_kib')} KiB, {(host.get('memory_kib') or 0) / 2**20:.0f} GiB, kernel "
            f"{host.get('kernel')}, hypervisor {host.get('hypervisor') or 'none'}")


def describe(env: dict, measured: set[str] | None = None) -> dict:
    """A machine's row; measured: the implementations its runs measured (None: show every library)."""
    gpus = env.get("gpus") or []
    found = {"CPU": env.get("cpu", "?"), "cores": env.get("cpus_usable", "?"),
             "host fingerprint": fingerprint_words(env),
             "GPU": ", ".join(g["name"] for g in gpus) or "none",
             **{name: get(env) for name, get in VERSION_FIELDS},
             "oneDNN": onednn_version(env), "CUDA runtime": cuda_runtime(env),
             "cuDNN": cudnn_version(env),
             "driver": gpus[0]["driver"] if gpus else None}
    for column, level in LOADED_BY.items():
        if measured is not None and level not in measured and found[column]:
            found[column] = f"{found[column]}, installed, not used"
    return found


def measured_levels(run: dict) -> set[str]:
    """The implementations of a run's ok cells: what its workers loaded."""
    return {row["cell"]["implementation"] for row in run["rows"]
            if row.get("kind") == "cell" and row.get("status") == "ok"}


def by_machine(runs: list[dict]) -> dict[str, dict]:
    """Each machine's newest environment, the studies it ran and the levels they measured."""
    out: dict[str, dict] = {}
    for run in sorted(runs, key=lambda r: r["order"]):
        entry = out.setdefault(run["machine"], {"studies": [], "measured": set()})
        entry["env"] = run["env"]
        entry["studies"].append(run["study"])
        entry["measured"] |= measured_levels(run)
    return out


def machine_table(runs: list[dict], pages: dict[str, str] | None = None,
                  answering: dict | None = None) -> str:
    """Every machine, one row each; pages: machine -> its page's NAME (machine_pages.names), linked
    in a first column that says, of an answering machine, which device it answers for."""
    machines = by_machine(runs)
    if not machines:
        return "_No runs yet._"
    answers = {m: [d.upper() for d, found in (answering or {}).items() if found == m] for m in machines}
    headers = ["machine", "CPU", "cores", "host fingerprint", "GPU", "driver", "CUDA runtime", "cuDNN",
               "oneDNN", *(name for name, _get in VERSION_FIELDS), "studies"]
    rows = []
    for machine, entry in machines.items():
        d = describe(entry["env"], entry["measured"])
        rows.append([machine] + [d[h] or "–" for h in headers[1:-1]]
                    + [", ".join(sorted(set(entry["studies"])))])
    if pages is None:
        return table(headers, rows)
    where = [f"answers for the {' and '.join(answers[row[0]])} (this report)" if answers[row[0]]
             else f"[its page](machines/{pages[row[0]]}.md)" if row[0] in pages else "–" for row in rows]
    return compact(["page", *headers], [[w, *row] for w, row in zip(where, rows, strict=True)], keep=2)


def difference_line(runs: list[dict], cpu_machine: str | None, gpu_machine: str | None) -> str | None:
    """What differs between the machine of the CPU rows and that of the GPU rows."""
    machines = by_machine(runs)
    if cpu_machine not in machines or gpu_machine not in machines or cpu_machine == gpu_machine:
        return None
    a, b = describe(machines[cpu_machine]["env"]), describe(machines[gpu_machine]["env"])
    keys = ["CPU", "cores", "host fingerprint"] + [name for name, _ in VERSION_FIELDS]
    return words.say("first_screen.md.j2", "machines_differ", cpu=cpu_machine, gpu=gpu_machine,
                     diffs=[(k, a[k], b[k]) for k in keys if a[k] != b[k]])
