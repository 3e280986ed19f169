"""reports/REPORT.md, generated from the result files alone (and loc.csv): every number in it
is read from a results row; nothing is typed by hand. `python -m harness report`."""

import math
from pathlib import Path

import numpy as np

from harness import DEFAULT_REPORT
from harness.report import explain_section, gpu_section, tables, training_section
from harness.report.figures import overhead_split
from harness.report.rundata import find, ratio, ratio_ci
from harness.report.style import caption, ok_cells
from harness.report.tables import fmt_ratio, ms, table

REPORT_PATH = DEFAULT_REPORT


def findings(frame, loc_rows, runs=()) -> list[str]:
    out = []
    if frame.empty:
        return ["No results yet: run `make run-all`."]
    for machine in sorted(frame["machine"].unique()):
        predict = find(frame, "overhead", "keras/predict", machine=machine)
        call = find(frame, "overhead", "keras/call", machine=machine)
        function = find(frame, "overhead", "keras/function", machine=machine)
        numpy_ref = find(frame, "overhead", "numpy/default", machine=machine)
        if predict is not None and call is not None:
            cells = frame[(frame["study"] == "overhead") & (frame["machine"] == machine)
                          & (frame["status"] == "ok") & (frame["batch_size"] == 1)]
            split = {r["cell_id"]: (base, how) for r, base, how in overhead_split(cells)}
            base, how = split.get(predict["cell_id"], (np.nan, ""))
            host = 100 * (1 - base / predict["median_ms"]) if not np.isnan(base) else None
            out.append(
                f"**Keras `model.predict` is {ratio(predict, call):.1f}x slower per image than "
                f"`model(x)`** on {machine} (CPU): {ms(predict['median_ms'])} against "
                f"{ms(call['median_ms'])} (medians; ratio taken within rounds)"
                + (f"; {host:.1f}% of its time is host overhead above the {how}"
                   f" ({ms(base)})." if host is not None else "."))
            if function is not None:
                out.append(f"Wrapping the same `model(x)` in `tf.function` brings Keras to "
                           f"{ms(function['median_ms'])} per image, {ratio(predict, function):.0f}x "
                           f"faster than `model.predict`, with the same weights and answers.")
            if numpy_ref is not None:
                out.append(f"The NumPy reference (im2col + BLAS, no framework) takes "
                           f"{ms(numpy_ref['median_ms'])} per image on {machine}: "
                           f"`model.predict` is {ratio(predict, numpy_ref):.0f}x slower than it.")
        eager, tf_function = (find(frame, "overhead", "tf/eager", machine=machine),
                              find(frame, "overhead", "tf/function", machine=machine))
        if eager is not None and tf_function is not None:
            out.append(f"TensorFlow ops: eager {ms(eager['median_ms'])} against tf.function "
                       f"{ms(tf_function['median_ms'])} per image ({ratio(eager, tf_function):.1f}x).")
        cold = find(frame, "api_levels", "keras/predict", machine=machine)
        if cold is not None and not math.isnan(cold["cold_start_ms"]):
            out.append(f"Cold start: the first `model.predict` call takes {ms(cold['cold_start_ms'])}, "
                       f"{cold['cold_start_ms'] / cold['median_ms']:.1f}x a steady-state call.")
        out += raw_library_findings(frame, machine)
        out += training_section.findings(frame, machine)
        out += backend_findings(frame, machine)
        out += gpu_section.findings(frame, runs, machine)
    totals = {}
    for row in loc_rows:
        totals[row["api_level"]] = totals.get(row["api_level"], 0) + row["code"]
    if "keras" in totals and "cudnn" in totals:
        out.append(f"Code: the cuDNN level takes {totals['cudnn']} lines, Keras {totals['keras']} "
                   f"({totals['cudnn'] / totals['keras']:.0f}x; one package for all three backends), "
                   f"oneDNN {totals.get('onednn', '-')}, "
                   f"TensorFlow ops {totals.get('tensorflow-ops', '-')}, JAX ops "
                   f"{totals.get('jax-ops', '-')}, PyTorch ops {totals.get('torch-ops', '-')}, NumPy "
                   f"{totals.get('numpy', '-')} (pygount code lines; the shared loaders, "
                   f"{totals.get('shared', '-')} lines, apart).")
    return out


FRAMEWORK_OPS = ("tf/function", "jax/jit", "torch/eager")  # each framework's default in api_levels


def raw_library_findings(frame, machine) -> list[str]:
    """The CPU ladder from the raw library up (api_levels), and what oneDNN's cache saves (overhead)."""
    out = []
    tuned = find(frame, "api_levels", "onednn/tuned", machine=machine)
    if tuned is None:
        return out
    naive = find(frame, "api_levels", "onednn/naive", machine=machine)
    numpy_ref = find(frame, "api_levels", "numpy/default", machine=machine)
    ops = [r for r in (find(frame, "api_levels", label, machine=machine) for label in FRAMEWORK_OPS)
           if r is not None]
    best_ops = min(ops, key=lambda r: r["median_ms"]) if ops else None
    predict = find(frame, "api_levels", "keras/predict", machine=machine)
    line = (f"**The CPU ladder on {machine}, raw library → framework ops → Keras** (`api_levels`, "
            f"ratios within rounds): oneDNN tuned takes {ms(tuned['median_ms'])} per image")
    steps = [(naive, "oneDNN naive (everything created per call)"), (numpy_ref, "the NumPy reference"),
             (best_ops, f"the fastest framework-ops level ({best_ops['label']})" if best_ops is not None
              else ""), (predict, "Keras `model.predict`")]
    parts = [f"{what} {ms(r['median_ms'])} ({fmt_ratio(ratio_ci(r, tuned))}x tuned)" for r, what in steps
             if r is not None]
    if parts:
        line += "; " + ", ".join(parts)
    out.append(line + ". The tuned raw level is the measured compute floor of this CPU.")
    on, off = (find(frame, "overhead", "onednn/naive", machine=machine),
               find(frame, "overhead", "onednn/naive_nocache", machine=machine))
    if on is not None and off is not None:
        out.append(f"oneDNN's primitive cache: the naive level takes {ms(on['median_ms'])} per image "
                   f"with it and {ms(off['median_ms'])} without it "
                   f"({fmt_ratio(ratio_ci(off, on))}x within rounds): creating the primitives "
                   "again on every call is what the cache saves a first attempt.")
    return out


def backend_findings(frame, machine) -> list[str]:
    """The backends study in sentences: one Keras model's predict and compiled call per backend."""
    out = []
    names = {"keras": "TensorFlow", "keras_jax": "JAX", "keras_torch": "PyTorch"}
    compiled = {"keras": "function", "keras_jax": "jit", "keras_torch": "compile"}
    for device in ("cpu", "gpu"):
        predict = {i: find(frame, "backends", f"{i}/predict", device=device, machine=machine)
                   for i in names}
        predict = {i: r for i, r in predict.items() if r is not None}
        if len(predict) < 2:
            continue
        fastest = min(predict, key=lambda i: predict[i]["median_ms"])
        parts = [f"{ms(r['median_ms'])} on {names[i]}" for i, r in predict.items()]
        slowdowns = [f"{names[i]} {ratio(r, predict[fastest]):.1f}x" for i, r in predict.items()
                     if i != fastest and ratio(r, predict[fastest])]
        line = (f"**One Keras model, three backends** ({device.upper()}, {machine}): `model.predict` "
                f"takes {', '.join(parts)} per image; against {names[fastest]}, "
                f"{', '.join(slowdowns)} (within rounds).")
        fast = {i: find(frame, "backends", f"{i}/{compiled[i]}", device=device, machine=machine)
                for i in names}
        fast = [f"{ms(r['median_ms'])} ({compiled[i]}, {names[i]})" for i, r in fast.items()
                if r is not None]
        if fast:
            line += f" Compiled, the same model's call takes {', '.join(fast)}."
        out.append(line)
    return out


def latency_table(frame, study, with_device=False) -> str:
    cells = ok_cells(frame, study)
    if cells.empty:
        return f"_No results for study `{study}` yet._"
    rows = []
    for _, r in cells.iterrows():
        base = find(frame, study, "numpy/default", machine=r["machine"], batch=r["batch_size"],
                    dtype=r["dtype"])
        rel = ratio_ci(r, base) if base is not None and r["label"] != "numpy/default" else None
        flags = " ".join(f for f, on in (("noisy", r["noisy"]), ("contended", r["contended"])) if on)
        row = [r["label"], r["device"], r["batch_size"], r["dtype"], ms(r["median_ms"]),
               f"{ms(r['ci_low_ms'])} – {ms(r['ci_high_ms'])}", ms(r["p90_ms"]), ms(r["p99_ms"]),
               ms(r["min_ms"]), r["n"], fmt_ratio(rel), flags or "-", r["machine"]]
        if with_device:
            row.insert(5, ms(r["device_median_ms"]))
        rows.append(row)
    headers = ["implementation/variant", "device", "batch", "dtype", "median", "95% CI of median",
               "p90", "p99", "min", "calls", "x numpy (within rounds) [95% CI]", "flags", "machine"]
    if with_device:
        headers.insert(5, "device time (median)")
    return table(headers, rows)


def build(runs, frame, loc_rows, verify_rows=(), history=None, crosschecks=(),
          verify_train_rows=()) -> str:
    """The report. `history`: every committed run's cells (not only the newest run of each
    study), for the repeatability section; by default the newest runs alone."""
    parts = ["# lenet-levels: what each API level costs and saves",
             "",
             "_Generated by `make report` from the result files in `reports/results/` and "
             "`reports/loc.csv`. Do not edit: every number below is read from a results row._",
             "", "## Findings", ""]
    parts += [f"- {line}" for line in findings(frame, loc_rows, runs)
              + explain_section.headline(explain_section.explain_rows(runs))]
    parts += ["", "## How the numbers are computed", ""] + [
        f"- {line}" for line in tables.METHOD + tables.crosscheck_lines(crosschecks)]
    parts += ["", "## Environment of each run", ""]
    env_rows = []
    for run in runs:
        env = run["env"]
        pk = env.get("packages", {})
        gpus = env.get("gpus") or []
        env_rows.append([run["study"], run["run_id"], env.get("hostname", "-"), env.get("cpu", "-"),
                         env.get("cpus_usable", "-"),
                         ", ".join(g["name"] for g in gpus) or "none",
                         gpus[0]["driver"] if gpus else "-", env.get("cuda_driver_version") or "-",
                         (env.get("cudnn") or {}).get("version", "-"), env.get("python", "-"),
                         pk.get("tensorflow") or pk.get("tensorflow-cpu") or "-", pk.get("keras", "-"),
                         pk.get("jax", "-"), pk.get("torch", "-"),
                         pk.get("numpy", "-"), (env.get("threads") or {}).get("OPENBLAS_NUM_THREADS", "-"),
                         env.get("loadavg") or "-"])
    parts.append(table(["study", "run", "host", "CPU", "cores", "GPU", "driver", "CUDA", "cuDNN",
                        "Python", "TF", "Keras", "JAX", "PyTorch", "NumPy", "threads", "load avg"], env_rows)
                 if env_rows else "_No runs yet._")

    parts += ["", "## Fig. 1: lines of code per API level", "", "![](figures/fig1_loc.png)", "",
              table(["package", "API level", "part", "files", "code lines", "comment lines"],
                    [[r["package"], r["api_level"], r["part"], r["files"], r["code"], r["comment"]]
                     for r in loc_rows])]
    parts += ["", "## Fig. 2: per-image latency per API level (study `api_levels`)", "",
              "![](figures/fig2_latency.png)", "", "![](figures/fig3_histograms.png)", "",
              latency_table(frame, "api_levels")]
    cold = ok_cells(frame, "api_levels")
    parts += ["", "## Fig. 4: cold start against steady state", "", "![](figures/fig4_cold_start.png)", ""]
    parts.append(table(["implementation/variant", "device", "framework import", "first call",
                        "steady-state median", "first / steady", "machine"],
                       [[r["label"], r["device"], f"{r['import_s']:.2f} s", ms(r["cold_start_ms"]),
                         ms(r["median_ms"]), f"{r['cold_start_ms'] / r['median_ms']:.1f}",
                         r["machine"]] for _, r in cold.iterrows()]) if not cold.empty else "_None._")
    parts += ["", "## Fig. 5: where the time goes (study `overhead`)", "",
              "![](figures/fig5_overhead.png)", "",
              "On the GPU, device time is measured with CUDA events around the work of a call; on "
              "the CPU there is no device, so the compute floor is estimated as the fastest "
              "measured implementation of the same arithmetic, and the rest of a call is host "
              "overhead.", "", latency_table(frame, "overhead", with_device=True)]
    parts += ["", "## Fig. 8: one Keras model, three backends (study `backends`)", "",
              "The same `lenet_keras` model and weights file, with KERAS_BACKEND set to tensorflow, "
              "jax or torch in the worker before Keras is imported. Each backend's compiled path: "
              "`function`/`xla` (tf.function, with XLA), `jit` (jax.jit of `model.stateless_call`), "
              "`compile` (torch.compile of `model(x)`).", "",
              "![](figures/fig8_backends.png)", "", latency_table(frame, "backends")]
    parts += ["", "## Why Keras is slow (Fig. 9, `python -m harness explain`)", "",
              "![](figures/fig9_explain.png)", ""]
    parts += explain_section.section(explain_section.explain_rows(runs))
    parts += gpu_section.section(runs)
    parts += ["", "## Fig. 6: throughput against batch size (study `batch_sweep`)", "",
              "![](figures/fig6_throughput.png)", ""]
    sweep = ok_cells(frame, "batch_sweep")
    parts.append(table(["implementation/variant", "device", "batch", "median per call",
                        "images/s", "machine"],
                       [[r["label"], r["device"], r["batch_size"], ms(r["median_ms"]),
                         f"{r['images_per_s']:,.0f}", r["machine"]] for _, r in sweep.iterrows()])
                 if not sweep.empty else "_No results for study `batch_sweep` yet._")
    parts += ["", "## Fig. 7: float32 against float64 (study `precision`)", "",
              "![](figures/fig7_precision.png)", "", latency_table(frame, "precision")]
    parts += training_section.section(frame, verify_train_rows)
    if verify_rows:
        parts += ["", "## Agreement with the NumPy reference (verify)", "",
                  table(["file", "implementation/variant", "device", "dtype", "status", "accuracy",
                         "argmax agreement", "max abs diff"],
                        [[v["file"], f"{v['implementation']}/{v['variant']}", v["device"],
                          v.get("dtype", "float32"), v["status"],
                          f"{v['accuracy']:.4f}" if "accuracy" in v else "-",
                          f"{v['agree']}/{v['images']}" if "agree" in v else "-",
                          f"{v['max_abs_diff']:.1e}" if "max_abs_diff" in v else v.get("reason", "-")]
                         for v in verify_rows])]
    parts += ["", "## Cells not measured, and why", ""]
    missing = frame[frame["status"] != "ok"] if not frame.empty else frame
    parts.append(table(["study", "cell", "status", "reason", "machine"],
                       [[r["study"], r["cell_id"], r["status"], r["reason"], r["machine"]]
                        for _, r in missing.iterrows()]) if not missing.empty else "_None._")
    parts += ["", "## Noisy cells", ""] + tables.noisy_section(frame)
    parts += ["", "## Repeatability across runs", ""] + tables.repeatability_section(
        frame if history is None else history)
    parts += ["", "## Runs behind this report", "", "```", caption(runs), "```", ""]
    return "\n".join(parts)


def write(text: str, path: Path = REPORT_PATH) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
