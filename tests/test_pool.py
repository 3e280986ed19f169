"""A result is every complete, uncontended run of the same code on the same machine, pooled: the
interval resamples runs, then processes, then rounds (harness.measure.store.stats.pooled_*), and the
report's frame holds one pooled number per cell (harness.report.claims.rundata.pool)."""

import numpy as np
import pytest

from harness.measure.store import stats


def run_rounds(seed, speed, processes=3, rounds=4, calls=30, jitter=0.03):
    """One run of a cell: `processes` processes of `rounds` rounds each, calls around `speed`."""
    rng = np.random.default_rng(seed)
    found = [list(rng.normal(speed, speed * jitter, calls)) for _ in range(processes * rounds)]
    return found, [p for p in range(processes) for _ in range(rounds)]


def test_two_runs_ten_percent_apart_give_an_interval_covering_both():
    first, second = run_rounds(1, 100e3), run_rounds(2, 110e3)
    low, high = stats.pooled_median_ci([first, second])
    medians = [stats.pooled_median(r) for r, _ in (first, second)]
    assert low <= min(medians) and high >= max(medians)
    for rounds, processes in (first, second):  # each run's own interval covers itself, not the other
        one_low, one_high = stats.hierarchical_median_ci(rounds, processes)
        assert one_high - one_low < high - low
    found = stats.pooled_summary([first, second])
    assert found["runs"] == 2 and found["processes"] == 6
    assert (found["ci95_low_ns"], found["ci95_high_ns"]) == (low, high)
    assert found["run_medians_ns"] == pytest.approx(medians)


def test_a_pooled_interval_is_seeded_and_one_run_is_that_runs_own():
    runs = [run_rounds(3, 100e3), run_rounds(4, 103e3), run_rounds(5, 98e3)]
    assert stats.pooled_median_ci(runs) == stats.pooled_median_ci(runs)  # byte for byte, every time
    rounds, processes = runs[0]
    assert stats.pooled_median_ci(runs[:1]) == stats.hierarchical_median_ci(rounds, processes)
    alone = stats.pooled_summary(runs[:1])
    assert alone["runs"] == 1 and alone["ci95_low_ns"] == stats.summarize(rounds, processes)["ci95_low_ns"]


def test_many_runs_are_not_widened_to_the_outermost_run():
    runs = [run_rounds(10 + i, 100e3) for i in range(stats.MAX_RUNS_WIDENED + 3)] + [run_rounds(99, 140e3)]
    low, high = stats.pooled_median_ci(runs)
    assert high < 140e3  # one slow run of eight does not set the interval's edge


def test_a_pooled_ratio_covers_each_runs_ratio_and_cancels_each_runs_drift():
    a1, b1 = run_rounds(1, 300e3), run_rounds(2, 100e3)  # a is 3x b in the first run
    a2, b2 = run_rounds(3, 330e3 * 1.2), run_rounds(4, 100e3 * 1.2)  # 3.3x in the second, a slower machine
    found = stats.pooled_round_ratio([(a1, b1), (a2, b2)])
    assert found["runs"] == 2 and found["ci95_low"] <= 3.0 * 1.01 and found["ci95_high"] >= 3.3 * 0.99
    one = stats.pooled_round_ratio([(a1, b1)])
    plain = stats.round_ratio(a1[0], b1[0], processes_a=a1[1], processes_b=b1[1])
    assert one == {**plain, "runs": 1}


# --- the report's frame: one pooled number per cell --------------------------------------------

CELL = {"implementation": "numpy", "variant": "default", "device": "cpu", "batch_size": 1, "dtype": "float32"}
RAW = {**CELL, "implementation": "onednn", "variant": "tuned"}


def cell_row(spec, rounds, processes, contended=False):
    return {"kind": "cell", "cell_id": "{implementation}/{variant}/{device}/b{batch_size}/{dtype}".format(**spec),
            "status": "ok", "rounds_ns": rounds, "round_process": processes, "contended": contended,
            "contended_reasons": ["other processes used 1.00 cores (> 0.25): hog (7) 1.00"] if contended else [],
            "cell": spec}


def fake_run(run_id, order, speed, seed, contended=False, sources="s1", timing="t1", machine="m"):
    """An api_levels run of one machine: numpy at `speed` ns and oneDNN at a third of it, in the same
    rounds; its env records sources, versions and timing code."""
    numpy_rounds, processes = run_rounds(seed, speed)
    raw_rounds, _ = run_rounds(seed + 1000, speed / 3)
    env = {"fingerprint": machine, "packages": {"numpy": "2.0", "onednn-cpu-gomp": "3.5"},
           "provenance": {"commit": "c", "dirty": False, "sources": {"numpy": sources, "onednn": "o1"},
                          "timing": timing}}
    return {"study": "api_levels", "run_id": run_id, "machine": machine, "host_key": f"fp:{machine}",
            "env": env, "started": float(order), "order": float(order),
            "rows": [cell_row(CELL, numpy_rounds, processes, contended), cell_row(RAW, raw_rounds, processes)]}


def pooled(every):
    """rundata.pool's frame for the newest of `every` (runs of one study and machine)."""
    from harness.report.claims import rundata

    history = rundata.cells_frame(every)
    newest = max(every, key=lambda r: r["order"])["run_id"]
    return rundata.pool(history[history["run_id"] == newest].reset_index(drop=True), history, every)


def numpy_cell(frame):
    return frame[frame["implementation"] == "numpy"].iloc[0]


def test_the_report_pools_two_runs_of_the_same_code_and_a_rerun_never_replaces_a_number():
    from harness.report.claims import rundata

    first, second = fake_run("r1", 1, 100e3, 1), fake_run("r2", 2, 110e3, 2)
    cell = numpy_cell(pooled([first, second]))
    medians = [stats.pooled_median(r["rows"][0]["rounds_ns"]) / 1e6 for r in (first, second)]
    assert cell["runs"] == 2 and cell["pooled_runs"] == ["r1", "r2"] and cell["runs_contended"] == 0
    assert cell["ci_low_ms"] <= min(medians) and cell["ci_high_ms"] >= max(medians)
    assert min(medians) < cell["median_ms"] < max(medians)  # the second run added evidence, replaced nothing
    frame = pooled([first, second])
    r = rundata.ratio_ci(numpy_cell(frame), frame[frame["implementation"] == "onednn"].iloc[0])
    assert r["runs"] == 2 and r["ci95_low"] < 3.0 < r["ci95_high"]  # within rounds, pooled over both runs


def test_a_contended_run_is_left_out_and_counted():
    quiet, busy = fake_run("r1", 1, 100e3, 1), fake_run("r2", 2, 400e3, 2, contended=True)
    cell = numpy_cell(pooled([quiet, busy]))
    assert cell["runs"] == 1 and cell["pooled_runs"] == ["r1"] and cell["runs_contended"] == 1
    assert not cell["contended"] and cell["median_ms"] < 0.2  # the newest run's 0.4 ms left out
    alone = numpy_cell(pooled([busy]))  # every run contended: it stands, marked
    assert alone["runs"] == 1 and alone["contended"] and alone["runs_contended"] == 0


def test_runs_of_other_sources_versions_timing_code_or_machine_are_not_pooled():
    first = fake_run("r1", 1, 100e3, 1)
    for other in (fake_run("r2", 2, 110e3, 2, sources="s2"), fake_run("r2", 2, 110e3, 2, timing="t2")):
        assert numpy_cell(pooled([first, other]))["runs"] == 1
    newer = fake_run("r2", 2, 110e3, 2)
    newer["env"]["packages"]["numpy"] = "2.1"
    assert numpy_cell(pooled([first, newer]))["runs"] == 1
    raw = pooled([first, newer])
    assert raw[raw["implementation"] == "onednn"].iloc[0]["runs"] == 2  # oneDNN's code and version held
    elsewhere = fake_run("r2", 2, 110e3, 2, machine="n")
    assert numpy_cell(pooled([first, elsewhere]))["runs"] == 1


def test_a_run_without_its_timing_code_gets_its_commits_or_its_own_key():
    from harness.machine import provenance
    from harness.report.claims import rundata

    head = provenance.git(provenance.ROOT, "rev-parse", "HEAD")
    clean = {"study": "s", "run_id": "a", "env": {"provenance": {"commit": head, "dirty": False}}}
    assert rundata.timing_code(clean) == provenance.timing_at(head)
    assert provenance.timing_at(head) == provenance.timing_of(
        {line.split("\t")[1]: line.split()[2] for line in provenance.git(
            provenance.ROOT, "ls-tree", head, "--", *provenance.TIMING_FILES).splitlines()})
    dirty = {"study": "s", "run_id": "b", "env": {"provenance": {"commit": head, "dirty": True}}}
    none = {"study": "s", "run_id": "c", "env": {}}
    assert rundata.timing_code(dirty) == "unknown: run s/b" and rundata.timing_code(none) == "unknown: run s/c"
    recorded = {"study": "s", "run_id": "d", "env": {"provenance": {"timing": "t9", "dirty": True}}}
    assert rundata.timing_code(recorded) == "t9"
    assert provenance.collect([])["timing"] == provenance.timing_hash()


def test_the_timing_code_hash_is_gits_object_ids():
    from harness.machine import provenance

    assert provenance.blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # git hash-object /dev/null
    blobs = {path: provenance.blob_id((provenance.ROOT / path).read_bytes()) for path in provenance.TIMING_FILES}
    assert provenance.timing_hash() == provenance.timing_of(blobs)
    assert provenance.timing_of({**blobs, provenance.TIMING_FILES[0]: "0" * 40}) != provenance.timing_hash()


# --- one machine per device, and two machines of one type --------------------------------------

HOST = {"vendor": "AuthenticAMD", "family": "26", "model": "2", "stepping": "1", "model_name": "AMD EPYC",
        "isa": ["avx2", "avx512f"], "l2_kib": 1024, "l3_kib": 32768, "cpus_usable": 2}


def test_two_vms_of_one_cpu_type_stay_two_machines_and_their_spread_is_a_claim():
    import pandas as pd

    from harness.report.claims import pairs

    older, newer = fake_run("r1", 1, 100e3, 1, machine="a"), fake_run("r2", 2, 180e3, 2, machine="b")
    for run, kernel in ((older, "6.18.44-fc-v669"), (newer, "6.18.44-fc-v1045")):
        run["env"]["host"] = {**HOST, "kernel": kernel, "memory_kib": 24684084}
    other = fake_run("r3", 3, 50e3, 3, machine="c")
    other["env"]["host"] = {**HOST, "model": "17"}  # another CPU type: no pair
    frame = pd.concat([pooled([run]) for run in (older, newer, other)], ignore_index=True)
    (found,) = pairs.pairs([older, newer, other], frame)
    assert (found.older, found.newer, found.cells) == ("a", "b", 2)
    assert 1.6 < found.time_low <= found.time_median <= found.time_high < 2.0  # every cell ~1.8x as long
    assert found.raw == "onednn/tuned" and found.ratio_cells == 1
    assert found.ratio_low == found.ratio_high and found.ratio_most == pytest.approx(abs(found.ratio_low - 1))
    assert found.ratio_most < 0.1  # the ratio to the raw library cancels the slower machine
    assert pairs.cpu_type(older["env"]) == pairs.cpu_type(newer["env"]) != pairs.cpu_type(other["env"])
    assert pairs.cpu_type({"host": HOST}) is None  # not fingerprinted: no type to pair


def study_run(study, machine, order):
    return {"study": study, "run_id": f"{study}-{machine}-{order}", "machine": machine, "order": float(order),
            "rows": [], "env": {}}


def test_the_answering_cpu_machine_is_the_newest_with_every_cpu_study():
    import pandas as pd

    from harness.report.claims import rundata

    complete = fake_run("c1", 1, 100e3, 1, machine="complete")
    newer = fake_run("n1", 5, 100e3, 2, machine="newer")  # newer, but api_levels only
    frame = pd.concat([pooled([complete]), pooled([newer])], ignore_index=True)
    runs = [complete, newer] + [study_run(s, "complete", 2) for s in rundata.CPU_STUDIES[1:]]
    assert rundata.answering_machines(runs, frame) == {"cpu": "complete", "gpu": None}
    assert rundata.missing_studies(runs, "newer") == list(rundata.CPU_STUDIES[1:])
    assert rundata.answering_machines(runs[:2], frame)["cpu"] == "newer"  # none has them all: the newest
    assert rundata.answering_machines(runs, frame, machine="newer")["cpu"] == "newer"  # MACHINE= decides


def test_every_other_machine_has_a_short_page_listed_in_the_machines_table(committed_report, tmp_path):
    from harness.report.claims import hosts
    from harness.report.sections import machine_pages, machines

    data = committed_report
    names = machine_pages.names(data)
    assert names and not set(names) & set(data.machines.values())  # the answering machines are the report's
    assert set(names) == {r["machine"] for r in data.runs} - set(data.machines.values())
    found = machine_pages.pages(data)
    assert sorted(found) == sorted(names.values())  # one page a machine, no two share a name
    for machine, name in names.items():
        text = found[name]
        assert text.startswith(f"# {machine}\n") and len(text.split()) <= 2000, (name, len(text.split()))
        assert "![" not in text  # no figures
    table = machines.machine_table(data.runs, names, data.machines)
    assert all(f"(machines/{name}.md)" in table for name in names.values())
    assert "answers for the CPU" in table
    (tmp_path / "fp-gone.md").write_text("a machine no longer here")
    (tmp_path / "notes.md").write_text("not a page")
    written = machine_pages.write(found, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([p.name for p in written] + ["notes.md"])
    assert hosts.LEGACY  # pages of machines before the fingerprint are named by their key's hash
    assert all(name.startswith(machine_pages.PREFIXES) for name in names.values())


def test_the_report_shows_each_devices_cells_of_its_answering_machine_only():
    import pandas as pd

    from harness.report.claims import rundata

    cpu_machine = pooled([fake_run("c1", 1, 100e3, 1, machine="a")])
    other = pooled([fake_run("c2", 2, 100e3, 2, machine="b")])
    frame = pd.concat([cpu_machine, other], ignore_index=True)
    shown = rundata.answering_cells(frame, {"cpu": "a", "gpu": None})
    assert set(shown["machine"]) == {"a"} and len(shown) == len(cpu_machine)


def test_the_report_names_the_runs_each_devices_cells_pool(committed_report):
    from harness.report import markdown

    data = committed_report
    for said in markdown.sources(data, data.machines):
        cells = data.frame[(data.frame["run_id"] == said["run_id"]) & (data.frame["study"] == "api_levels")
                           & (data.frame["device"] == said["device"])]
        others = {r for ids in cells["pooled_runs"] for r in ids} - {said["run_id"]}
        assert set(said["pooled"]) == others and said["run_id"] not in said["pooled"]


def test_reports_device_tables_say_how_many_runs_they_pool(committed_report, committed_texts):
    """REPORT.md's table of each device names the runs its numbers pool, or says there is one."""
    from harness.report import markdown

    data = committed_report
    text = committed_texts[0]  # markdown.build(data)
    for said in markdown.sources(data, data.machines):
        section = text.split(f"## On the {said['device'].upper()}")[1].split("\n## ")[0]
        if said["pooled"]:
            n = len(said["pooled"])
            assert f"pooled with {n} other run{'s' if n > 1 else ''} of the same code" in section
            assert all(f"`{r}`" in section for r in said["pooled"])
        else:
            assert "the one run of this code on that machine" in section
