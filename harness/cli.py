"""`python -m harness COMMAND`: the one place that turns errors into `ERROR: ...` and an exit code.

Exit codes: 0 ok; 1 a check failed (verify disagreement); 2 bad input or environment
(`ERROR:` line); 3 something asked for cannot run here (no GPU, library missing); 130 Ctrl-C.
"""

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from harness import (
    DEFAULT_FIGURES,
    DEFAULT_LOC_CSV,
    DEFAULT_REPORT,
    DEFAULT_RESULTS,
    DEFAULT_WEIGHTS,
    procenv,
    registry,
)
from harness.errors import HarnessError, Unavailable


def log(line: str) -> None:
    """Progress and messages go to stderr, so stdout carries only results (tables, JSON)."""
    print(line, file=sys.stderr, flush=True)


def split_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def cmd_verify(args) -> int:
    from harness import verify, weights

    names = split_list(args.implementations)
    verify.require_known(names)
    weights.read(args.weights)  # an unusable file fails here, in one line, before any work
    procenv.apply(procenv.settings(args.threads, 1, args.device))
    log(verify.HEADER)
    rows = verify.verify(names, args.device, args.weights, args.data_dir, args.limit,
                         progress=log)
    code = verify.exit_code(rows)
    if args.json:
        text = json.dumps({"rows": rows, "exit_code": code, "weights": str(args.weights),
                           "tolerance": verify.TOLERANCE}, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(text + "\n")
    verdict = {0: "all implementations agree", 1: "DISAGREEMENT: see FAIL rows",
               3: "some implementations could not run here (see reasons)"}[code]
    log(verdict)
    return code


def cmd_run(args) -> int:
    import dataclasses

    from harness import gpu, results, runner, study, summary, weights

    weights.read(args.weights)  # an unusable weights file stops here, not in every worker
    if args.resume:
        run_dir = results.find_run_dir(args.out, study.path_of(args.study).stem, args.run_id)
        plan = study.parse((run_dir / "study.toml").read_text(), str(run_dir / "study.toml"))
        args.run_id = run_dir.name
    else:
        plan = study.load(args.study)
    if args.devices:
        devices = split_list(args.devices)
        for device in devices:
            if device not in registry.DEVICES:
                raise HarnessError(f"--devices: unknown device {device!r}; "
                                   f"allowed: {', '.join(registry.DEVICES)}")
        plan = dataclasses.replace(plan, cells=tuple(c for c in plan.cells if c.device in devices))
        if not plan.cells:
            raise HarnessError(f"--devices {args.devices}: no cell of study {plan.name!r} left")
        absent = gpu.absent_reason() if "gpu" in devices else None
        if absent:
            raise Unavailable(f"--devices {args.devices}: {absent}")
    try:
        run_dir, states = runner.start_run(plan, args.out, args.run_id, args.resume, args.weights,
                                           log, args.lock_timeout)
    except KeyboardInterrupt:
        print("interrupted: finished rows are kept; complete the run with "
              f"python -m harness run {args.study} --resume" +
              (f" --run-id {args.run_id}" if args.run_id else ""), file=sys.stderr)
        return 130
    for line in summary.lines(states, plan):
        print(line)
    print(f"results: {run_dir}")
    return 0


def cmd_loc(args) -> int:
    from harness import loc

    rows = loc.count()
    path = loc.write_csv(rows, args.out)
    for package, code in loc.totals(rows).items():
        print(f"{package:<16} {code:>5} code lines")
    print(f"wrote {path}")
    return 0


def load_results(args, with_history=False):
    """(runs, frame, loc rows), and with_history the cells of every run as a fourth."""
    from harness import loc, reportdata

    if not Path(args.results).is_dir():
        raise HarnessError(f"{args.results}: no results folder (run make run-all, or --results DIR)")
    loaded = (reportdata.load_with_history(args.results) if with_history
              else reportdata.load(args.results))
    loc_rows = loc.read_csv() if loc.CSV_PATH.is_file() else loc.count()
    return (*loaded[:2], loc_rows, *loaded[2:])


def cmd_figures(args) -> int:
    from harness import figures

    runs, frame, loc_rows = load_results(args)
    for path in figures.draw_all(runs, frame, loc_rows, args.out,
                                 report=log):
        print(f"wrote {path}")
    return 0


def cmd_report(args) -> int:
    from harness import report, reportdata

    runs, frame, loc_rows, history = load_results(args, with_history=True)  # every committed run
    text = report.build(runs, frame, loc_rows, reportdata.verify_records(args.results), history,
                        reportdata.crosscheck_records(args.results))
    print(f"wrote {report.write(text, args.out)}")
    return 0


def cmd_compare(args) -> int:
    """Median of each cell in run B over run A: how repeatable a study is."""
    from harness import reportdata

    frames = []
    for run_dir in (args.run_a, args.run_b):
        runs = [r for r in reportdata.load_runs(Path(run_dir).parent.parent)
                if r["dir"].resolve() == Path(run_dir).resolve()]
        if not runs:
            raise HarnessError(f"{run_dir}: not a run folder (expected <out>/<study>/<run-id>/results.jsonl)")
        frames.append(reportdata.cells_frame(runs).set_index("cell_id"))
    a, b = frames
    print(f"{'cell':<40} {'median A':>10} {'median B':>10} {'B / A':>7}  flags")
    worst = 0.0
    for cell in a.index.intersection(b.index):
        ra, rb = a.loc[cell], b.loc[cell]
        if ra["status"] != "ok" or rb["status"] != "ok":
            continue
        r = rb["median_ms"] / ra["median_ms"]
        noisy = bool(ra["noisy"] or rb["noisy"])
        if not noisy:
            worst = max(worst, abs(r - 1))
        print(f"{cell:<40} {ra['median_ms']:>9.4f}m {rb['median_ms']:>9.4f}m {r:>7.3f}  "
              f"{'noisy' if noisy else ''}")
    print(f"largest change among cells not flagged noisy: {100 * worst:.1f}%")
    return 0


def cmd_explain(args) -> int:
    from harness import explain

    rows = []
    for target in split_list(args.targets):
        log(f"explaining {target} on {args.device} ({args.calls} calls per step, {args.rounds} rounds)")
        row = explain.explain(target, args.device, args.calls, args.rounds, args.weights)
        print("\n".join(explain.table(row)) + "\n")
        rows.append(row)
    if args.out:
        print(f"results: {explain.write(rows, args.out)}")
    return 0


def cmd_crosscheck(args) -> int:
    from harness import crosscheck, env

    procenv.apply(procenv.settings(1, 1, "cpu"))  # one thread, as in every study
    result = crosscheck.crosscheck(args.implementation, args.calls, args.rounds, args.weights, log)
    system = env.collect_system()
    result["env"] = {k: system[k] for k in ("hostname", "cpu", "cpus_usable", "loadavg", "python")}
    low, high = result["ratio_ci95"]
    print(f"harness / timeit, mean per call: {result['ratio_median']:.3f} "
          f"[95% CI {low:.3f}-{high:.3f}] over {result['rounds']} rounds ({args.implementation})")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def cmd_doctor(args) -> int:
    from harness import doctor

    names = split_list(args.implementations) if args.implementations else None
    return doctor.report(args.weights, names)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None,
                        help="MNIST folder (default: $LENET_DATA_DIR or data/mnist)")
    parser.add_argument("--gpu", default=None, metavar="N",
                        help="the GPU to use on a shared server (sets CUDA_VISIBLE_DEVICES)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("verify", help="check every implementation against the NumPy reference")
    p.add_argument("--implementations", default="numpy,tf,keras",
                   help="comma-separated names or module:Class paths (default: numpy,tf,keras)")
    p.add_argument("--device", choices=registry.DEVICES, default="cpu")
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   help="write the rows as JSON to FILE (or stdout when no FILE)")
    p.add_argument("--limit", type=int, default=None, help="only the first N test images")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("run", help="run a study (studies/NAME.toml or a path)")
    p.add_argument("study", help="a name in studies/ (api_levels, overhead, ...) or a .toml path")
    p.add_argument("--devices", default=None, help="only these devices, e.g. cpu or cpu,gpu")
    p.add_argument("--out", type=Path, default=DEFAULT_RESULTS,
                   help="results folder (default reports/results)")
    p.add_argument("--resume", action="store_true",
                   help="complete an interrupted run (the newest, or --run-id)")
    p.add_argument("--run-id", default=None, help="name of the run folder")
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--lock-timeout", type=float, default=None, metavar="S",
                   help="wait at most S seconds for another run's GPU lock, then measure anyway "
                        "with the cells flagged contended (default: wait)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("loc", help="count code lines per implementation package (pygount)")
    p.add_argument("--out", type=Path, default=DEFAULT_LOC_CSV)
    p.set_defaults(func=cmd_loc)
    p = sub.add_parser("figures", help="draw the figures from the result files")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    p.add_argument("--out", type=Path, default=DEFAULT_FIGURES)
    p.set_defaults(func=cmd_figures)
    p = sub.add_parser("report", help="write REPORT.md from the result files")
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    p.add_argument("--out", type=Path, default=DEFAULT_REPORT)
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("doctor", help="what can run here, and why not")
    p.add_argument("--implementations", default=None, help="only these (default: all)")
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.set_defaults(func=cmd_doctor)
    p = sub.add_parser("explain", help="where one call's time goes, stage by stage")
    p.add_argument("targets", help="IMPL[/VARIANT], comma-separated (e.g. keras/predict,keras_jax/predict)")
    p.add_argument("--device", choices=registry.DEVICES, default="cpu")
    p.add_argument("--calls", type=int, default=200, help="timed calls per ladder step")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--out", type=Path, default=None,
                   help="write the rows to OUT/explain/<run-id>/ (the report reads reports/results)")
    p.set_defaults(func=cmd_explain)
    p = sub.add_parser("crosscheck", help="time one implementation with the harness and with timeit")
    p.add_argument("--implementation", default="numpy")
    p.add_argument("--calls", type=int, default=200, help="calls per round and timer")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--json", default=None, metavar="FILE", help="write the result as JSON")
    p.set_defaults(func=cmd_crosscheck)
    p = sub.add_parser("compare", help="compare the medians of two runs of one study")
    p.add_argument("run_a", type=Path)
    p.add_argument("run_b", type=Path)
    p.set_defaults(func=cmd_compare)
    return parser


def on_sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.data_dir:
        os.environ["LENET_DATA_DIR"] = str(args.data_dir)  # workers inherit it
    if args.gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
    signal.signal(signal.SIGTERM, on_sigterm)  # a scheduler's kill: clean up like Ctrl-C
    # A process started in the background by a non-interactive shell (`cmd &`) inherits SIGINT
    # ignored; `kill -INT` must still stop a run cleanly, keeping its rows.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return args.func(args)
    except Unavailable as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 3
    except HarnessError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
