"""The GPU half in sentences and one table: the ladder from raw cuDNN up, the speed targets
(met or missed, and by how much), and where a GPU call's time goes (`kernels` rows).

Every number is read from a results row; the targets are the project's goals, not results.
"""

from collections.abc import Sequence

import pandas as pd

from harness import registry
from harness.report.claims.rundata import find, ratio, ratio_ci, study_rows
from harness.report.markup import words
from harness.report.markup.tables import compact, ms

BATCH = 512  # at this batch: where a large call's time goes
SENTENCES = "gpu.md.j2"  # in harness/report/templates/
WORDS = "gpu"  # templates/gpu.toml: how the sentences name calls, and which cells they compare


def kernels_of(rows: list[dict], label: str, machine: str, batch: int = 1) -> dict | None:
    return next((r for r in rows if f"{r['implementation']}/{r['variant']}" == label
                 and r["machine"] == machine and r.get("batch", 1) == batch), None)


def copy_share(row: dict) -> tuple[float, float]:
    """(copies' ns per call, their share of the GPU's busy time) in a kernels row's listed ops."""
    copies = sum(op["ns_per_call"] for op in row["ops"] if op["category"] == "gpu_memcpy")
    return copies, copies / row["gpu_busy_ns_per_call"]


def own_kernel(row: dict) -> dict | None:
    """The hand-written level's kernel (lenet_*) among a kernels row's ops."""
    return next((op for op in row["ops"]
                 if op["category"] == "kernel" and op["name"].startswith("lenet_")), None)


def us(ns: float) -> str:
    return ms(ns / 1e6)


def raw_tuning_line(frame: pd.DataFrame, machine: str) -> str | None:
    """The GPU's raw library as first written against tuned, and tuned against its CUDA graph
    (overhead: all three in one run; gpu.toml's raw_tuning names the variants)."""
    raw, named = registry.raw_library("gpu"), words.table_of(WORDS)["raw_tuning"]
    if raw is None:
        return None
    tuned, naive, graph = (find(frame, "overhead", f"{raw}/{named[key]}", device="gpu", machine=machine)
                           for key in ("tuned", "naive", "graph"))
    if tuned is None or naive is None:
        return None
    events = tuned["device_median_ms"]
    return words.say(SENTENCES, "raw_tuning", library=registry.short(raw), machine=machine,
                     tuned_ms=tuned["median_ms"], naive_ms=naive["median_ms"],
                     naive_over_tuned=ratio(naive, tuned), events_ms=events,
                     events_share=events / tuned["median_ms"],
                     graph_ms=None if graph is None else graph["median_ms"],
                     tuned_over_graph=None if graph is None else ratio_ci(tuned, graph))


def call_words(label: str, table: str) -> str:
    """How a sentence names a call: gpu.toml's words for it in `table`, else "<level's short name>
    <variant>"."""
    level, variant = label.split("/", 1)
    return words.table_of(WORDS)[table].get(label) or f"{registry.short(level)} {variant}"


def ladder_others() -> list[str]:
    """Every call the ladder line quotes where measured: gpu.toml's ladder, then each GPU variant of a
    level it does not name."""
    worded = list(words.table_of(WORDS)["ladder"])
    levels = {label.split("/")[0] for label in worded}
    added = [label for label in registry.targets("variants", "gpu") if label.split("/")[0] not in levels]
    return worded + added


def fastest_call(frame: pd.DataFrame, study: str, machine: str, levels: Sequence[str]) -> pd.Series | None:
    """The fastest ok GPU cell at batch 1 of the study on the machine, among every variant of these
    levels the rows hold."""
    cells = [c for c in (fastest_of(frame, study, level, machine) for level in levels) if c is not None]
    return min(cells, key=lambda c: c["median_ms"]) if cells else None


def ladder_line(frame: pd.DataFrame, machine: str) -> str | None:
    """api_levels on the GPU: every level against the floor (the fastest call measured on the
    machine, any level that computes), within rounds."""
    computing = [name for name in registry.on_device("gpu") if registry.computes(name)]
    graph = fastest_call(frame, "api_levels", machine, computing)
    if graph is None:
        return None
    others = [{"words": call_words(label, "ladder"), "ms": row["median_ms"], "ratio": ratio_ci(row, graph)}
              for label in ladder_others()
              if label != graph["label"]
              and (row := find(frame, "api_levels", label, device="gpu", machine=machine)) is not None]
    events = graph.get("device_median_ms")
    return words.say(SENTENCES, "ladder", machine=machine, floor_words=call_words(graph["label"], "floor"),
                     floor_ms=graph["median_ms"], events_ms=None if pd.isna(events) else events,
                     others=others)


def resident(k: dict) -> bool:
    """A kernels row whose kernel spans calls (a resident kernel): fewer launches than calls."""
    return k["device_ops_per_call"] < 1


def resident_compute_ns(stages: dict | None) -> float | None:
    """A resident kernel's work per image: the cluster kernel's stages after the weights' loads
    (kernel-stages, block 0: its critical path), which a resident kernel pays once a launch."""
    if stages is None or stages.get("block0_ns") is None:
        return None
    return float(stages["block0_ns"] - stages["stages"][0]["block0_ns"])


def trace_claims(k: dict, stages: dict | None = None) -> dict:
    """Where a call goes in its kernels row: its host time; for a launched call, the GPU's busy share,
    its kernels and copies, the longest and the host's CUDA calls; for a resident kernel, its
    launches and, from kernel-stages, the cluster kernel's stages less the weights' loading, which it
    pays once a launch (compute_ns)."""
    compute = resident_compute_ns(stages) if resident(k) else None
    return {"k": k, "resident": resident(k), "busy_share": k["gpu_busy_ns_per_call"] / k["host_ns_per_call"],
            "launches": round(k["device_ops_per_call"] * k["calls"]), "compute_ns": compute,
            "stages": stages if compute is not None else None}


def fastest_of(frame: pd.DataFrame, study: str, level: str, machine: str) -> pd.Series | None:
    """The level's fastest GPU cell of the study on the machine, among every variant the rows hold
    (a new variant is judged without being listed anywhere)."""
    labels = [] if frame.empty else sorted(set(frame.loc[frame["implementation"] == level, "label"]))
    cells = [c for c in (find(frame, study, lb, device="gpu", machine=machine) for lb in labels)
             if c is not None]
    return min(cells, key=lambda c: c["median_ms"]) if cells else None


def hand_written() -> list[str]:
    """The GPU's hand-written levels (the registry's rung)."""
    return [name for name in registry.on_rung("hand-written") if "gpu" in registry.spec(name).devices]


def fastest_hand_written(frame: pd.DataFrame, study: str, machine: str) -> pd.Series | None:
    return fastest_call(frame, study, machine, hand_written())


def trace_rate(row: dict) -> float:
    """Images per second of a kernels row: its batch over its host time per call (the mean of its
    back-to-back calls, unprofiled)."""
    return row.get("batch", 1) * 1e9 / row["host_ns_per_call"]


def two_rates(frame: pd.DataFrame, row: dict) -> str:
    """' `batch_sweep` measured the same call at ...': the same call's rate in `batch_sweep` beside the
    trace's, and why the two differ; '' where the sweep did not measure it. The headline and the
    findings quote the sweep's."""
    label, batch = f"{row['implementation']}/{row['variant']}", row.get("batch", 1)
    cell = find(frame, "batch_sweep", label, device="gpu", batch=batch, machine=row["machine"])
    if cell is None:
        return ""
    return " " + words.say(SENTENCES, "two_rates", cell=cell, sweep_mega=cell["images_per_s"] / 1e6,
                           trace_mega=trace_rate(row) / 1e6, calls=row["calls"])


def batch_lines(rows: list[dict], machine: str, each: bool = True) -> list[str]:
    """At BATCH images a call (kernels rows: one process, no interval): what the host's own part of a
    call caps the rate at, then (each) where the hand-written calls' and the raw library's fastest
    call's time goes, which DETAILS' machine findings leave to the section's batch table."""
    hand = [k for k in rows if k["implementation"] in hand_written() and k["machine"] == machine
            and k.get("batch", 1) == BATCH]
    if not hand:
        return []
    out = []
    raws = [k for k in rows if k["implementation"] == registry.raw_library("gpu") and k["machine"] == machine
            and k.get("batch", 1) == BATCH]
    library = min(raws, key=lambda k: k["host_ns_per_call"]) if raws else None
    host = min(hand, key=lambda k: k["host_ns_per_call"] - k["gpu_busy_ns_per_call"])
    alone = host["host_ns_per_call"] - host["gpu_busy_ns_per_call"]
    if alone > 0:
        out.append(words.say(SENTENCES, "host_cap", batch=BATCH, cap_mega=BATCH * 1e9 / alone / 1e6,
                             label=f"{host['implementation']}/{host['variant']}", alone_ns=alone))
    for k in (hand + ([library] if library is not None else [])) if each else []:
        copies, share = copy_share(k)
        out.append(words.say(SENTENCES, "at_batch", batch=BATCH, k=k, copies_ns=copies, copies_share=share,
                             kernel=own_kernel(k) or k["ops"][0],
                             beyond_ns=k["host_ns_per_call"] - k["gpu_busy_ns_per_call"]))
    return out


def where_lines(frame: pd.DataFrame, rows: list[dict], machine: str, stages: dict | None = None) -> list[str]:
    """Where the fastest hand-written and raw library calls' time goes (their kernels rows), the large
    batch's, and the raw library's best variant against gpu.toml's raw_against level's (overhead,
    within rounds). The
    targets themselves are judged against the GPU's floor (gpu_floor_section)."""
    out = []
    hand = fastest_hand_written(frame, "api_levels", machine)
    raw = registry.raw_library("gpu")
    library = fastest_call(frame, "api_levels", machine, [raw] if raw else [])
    for cell, its_stages in ((hand, stages), (library, None)):
        k = kernels_of(rows, cell["label"], machine) if cell is not None else None
        if cell is not None and k is not None:
            out.append(words.say(SENTENCES, "where", cell=cell, **trace_claims(k, its_stages)))
    out += batch_lines(rows, machine, each=False)  # each call at the batch: the batch table
    against = words.table_of(WORDS)["raw_against"]
    best = fastest_call(frame, "overhead", machine, [raw] if raw else [])
    peer = fastest_call(frame, "overhead", machine, [against["level"]])
    if raw is not None and best is not None and peer is not None:
        r = ratio_ci(best, peer)
        out.append(words.say(SENTENCES, "raw_against", library=registry.short(raw), peer=against["words"],
                             best=best["label"], best_ms=best["median_ms"], peer_best=peer["label"],
                             peer_ms=peer["median_ms"], ratio=r, met=bool(r and r["ratio"] <= 1)))
    return out


def findings(frame: pd.DataFrame, runs: Sequence[dict], machine: str) -> list[str]:
    lines = [raw_tuning_line(frame, machine), ladder_line(frame, machine)]
    stages = next((r for r in study_rows(runs, "kernel_stages") if r["machine"] == machine
                   and r["dtype"] == "float32"), None)
    return [line for line in lines if line] + where_lines(frame, study_rows(runs, "kernels"), machine, stages)


def section(runs: list[dict]) -> list[str]:
    """## Where a GPU call's time goes: one row per profiled level, at batch 1 and at larger batches."""
    rows = study_rows(runs, "kernels")
    if not rows:
        return []
    body = []
    for r in (r for r in rows if r.get("batch", 1) == 1):
        busy, host = r["gpu_busy_ns_per_call"], r["host_ns_per_call"]
        api = f"{r['api_calls_per_call']:.0f} ({us(r['api_ns_per_call'])})"
        if resident(r):  # one kernel across the calls: no busy time or ops of a call
            launches = round(r["device_ops_per_call"] * r["calls"])
            body.append([f"{r['implementation']}/{r['variant']}", us(host), "resident", "–",
                         f"{launches} launches in {r['calls']} calls", api,
                         f"{r['ops'][0]['name']} (spans calls)", r["machine"]])
            continue
        top = "; ".join(f"{op['name']} x{op['per_call']:.0f} {us(op['ns_per_call'])}" for op in r["ops"][:3])
        body.append([f"{r['implementation']}/{r['variant']}", us(host), us(busy), f"{100 * busy / host:.0f}%",
                     f"{r['device_ops_per_call']:.0f}", api, top, r["machine"]])
    return ["", words.say(SENTENCES, "kernels_title"), "", words.say(SENTENCES, "kernels_method"), "",
            compact(["level/variant", "host per call", "GPU busy", "busy share", "kernels+copies",
                   "CUDA calls (host time, profiled)", "longest three on the GPU (per call)", "machine"],
                  body)] + batch_table(rows)


def batch_table(rows: list[dict]) -> list[str]:
    """The kernels rows of more than one image a call: images per second and the copies' share."""
    big = [r for r in rows if r.get("batch", 1) > 1]
    if not big:
        return []
    body = []
    for r in big:
        copies, share = copy_share(r)
        kernel = own_kernel(r) or r["ops"][0]
        body.append([f"{r['implementation']}/{r['variant']}", r["batch"], us(r["host_ns_per_call"]),
                     f"{r['batch'] * 1e9 / r['host_ns_per_call'] / 1e6:.2f} M", us(r["gpu_busy_ns_per_call"]),
                     f"{us(copies)} ({100 * share:.0f}%)", f"{kernel['name']} {us(kernel['ns_per_call'])}",
                     r["machine"]])
    return ["", words.say(SENTENCES, "batch_method"), "",
            compact(["level/variant", "batch", "host per call", "images/s", "GPU busy",
                   "copies (share of busy)", "longest kernel", "machine"], body)]
