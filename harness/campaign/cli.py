"""The campaign wing's commands: `compare` (two runs of a study), `gpu-study` (the GPU half in one
command), `campaign` and its Slurm jobs (studies on a cluster), `import-results` (an archive carried home)."""

import argparse
from pathlib import Path

from harness import DEFAULT_REPORT, DEFAULT_RESULTS
from harness.command import Command, log, option, out, slurm_options, split_list
from harness.errors import HarnessError, Unavailable


def commands() -> list[Command]:
    """In the order `python -m harness --help` lists them."""
    return [
        Command(
            "compare", "compare the medians of two runs of one study", cmd_compare,
            option("run_a", type=Path), option("run_b", type=Path)),
        gpu_study_command(), campaign_command(),
        Command(
            "campaign-job", "(a campaign's Slurm job) one node type's runs", "harness.campaign.slurm:job",
            option("out", type=Path), option("--type", required=True)),
        Command(
            "campaign-merge", "(a campaign's merge job) every run imported at once, then the report",
            "harness.campaign.slurm:merge", option("out", type=Path),
            option("--into", type=Path, default=DEFAULT_RESULTS),
            option("--report", type=Path, required=True)),
        Command(
            "import-results", "unpack a gpu-study archive into reports/results", cmd_import_results,
            option("archive", type=Path), option("--into", type=Path, default=DEFAULT_RESULTS))]


def gpu_study_command() -> Command:
    return Command(
        "gpu-study", "the whole GPU half in one command, into one archive", cmd_gpu_study,
        out(None, "folder for the archive and the console log (the results, logs and manifest: --work)"),
        option("--plan", action="store_true",
               help="print the steps in order with each one's seconds in the newest manifest that ran "
                    "it, and where the budget ends; run nothing (no GPU needed)"),
        option("--quick", action="store_true",
               help="a first smoke: doctor, verify on 1,000 images, api_levels' GPU cells, few calls"),
        option("--steps", type=split_list, default=None, metavar="NAMES",
               help="only these steps, e.g. doctor,verify,study-api_levels (default: all; "
                    "split the full set over two calls where one call is limited to 10 minutes)"),
        option("--levels", type=split_list, default=None, metavar="NAMES",
               help="only these GPU levels in verify, verify-train, kernels, kernels-512 and labs, "
                    "e.g. cuda,cudnn (the levels whose code changed; default: every GPU level, "
                    "python -m harness list --device gpu)"),
        option("--part", type=int, choices=(1, 2), default=None,
               help="one command of a GPU loan: 1 the smoke, the floor, verify (cuda, cudnn), api_levels "
                    "and batch_sweep at batch 1 and 512; 2 (on the same warm machine) training, "
                    "kernel-stages, kernels at batch 512, pytest -m gpu, then the labs and kernels if "
                    "time remains (--plan prints both, with their estimates)"),
        option("--work", type=Path, default=None, metavar="DIR",
               help="the campaign's results, logs and manifest (default build/gpu-study/<campaign>/); "
                    "--out keeps only the archive and the console log"),
        option("--budget-s", type=float, default=None, metavar="S",
               help="overall time budget in seconds (default: 240 quick, 540 full, a part's share of "
                    "its command)"))


def campaign_command() -> Command:
    return Command(
        "campaign", "studies on a Slurm cluster: one whole-node job per node type, then a merge "
        "job that imports every run at once and writes the report", cmd_campaign,
        option("--slurm", action="store_true", required=True, help="submit to Slurm (the one way today)"),
        out(None, "the campaign's folder, on a filesystem every node sees", required=True),
        *slurm_options("a CPU node type (a node feature), one job each: repeat it", many=True),
        option("--gpu-constraint", action="append", default=[], metavar="TYPE",
               help="a GPU node type: its job runs gpu-study (repeatable)"),
        option("--studies", type=split_list, default=None, metavar="NAMES",
               help="the CPU studies (default api_levels)"),
        option("--implementations", default=None, help="a quick study: only these levels"),
        option("--rounds", default=None, help="a quick study: rounds in each process"),
        option("--processes", default=None, help="a quick study: fresh processes per cell"),
        option("--into", type=Path, default=DEFAULT_RESULTS, help="where the merge imports the runs"),
        option("--report", type=Path, default=DEFAULT_REPORT,
               help="the report the merge writes (default reports/REPORT.md)"))


def cmd_compare(args: argparse.Namespace) -> int:
    """Median of each cell in run B over run A: how repeatable a study is."""
    from harness.measure.store import rowfile
    from harness.report.claims import rundata

    frames = []
    for run_dir in (args.run_a, args.run_b):
        runs = [r for r in rundata.load_runs(Path(run_dir).parent.parent)
                if r["dir"].resolve() == Path(run_dir).resolve()]
        if not runs and rowfile.has_rows(Path(run_dir)):
            raise HarnessError(f"{run_dir}: a partial run (no completion marker: killed, or still running); "
                               "finish it with `python -m harness run STUDY --resume --run-id ID` first")
        if not runs:
            raise HarnessError(f"{run_dir}: not a run folder (expected <out>/<study>/<run-id>/results.jsonl, "
                               "or results.jsonl.gz once complete)")
        frames.append(rundata.cells_frame(runs).set_index("cell_id"))
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


def cmd_gpu_study(args: argparse.Namespace) -> int:
    from harness.campaign import gpu_study
    from harness.machine import gpu

    levels = gpu_study.check_levels(args.levels)  # a typo is said before the GPU is looked for
    if args.plan and args.part is None and not (args.quick or args.steps or levels):
        # the loan: both commands, each step's estimate, each command's total, what is left out
        measured = gpu_study.measured_seconds(DEFAULT_RESULTS / "campaigns", gpu_study.PART_LEVELS)
        full = gpu_study.plan(Path("."), "plan", False, write=False)
        lines, fits = gpu_study.loan_plan(measured, full)
        print(f"gpu-study: a GPU loan in two commands (seconds from {DEFAULT_RESULTS / 'campaigns'})")
        print("\n".join(lines))
        return 0 if fits else 1
    if args.plan:  # no GPU needed: the steps, in order, with their last measured seconds
        budget = args.budget_s or (gpu_study.PART_BUDGET_S[args.part] if args.part
                                   else gpu_study.BUDGET_S["quick" if args.quick else "full"])
        todo = gpu_study.select(gpu_study.plan(Path(args.out or "."), "plan", args.quick, write=False,
                                               levels=levels, part=args.part), args.steps)
        print(f"gpu-study{' --levels ' + ','.join(levels) if levels else ''}: the steps in order, "
              f"budget {budget:g} s (seconds from {DEFAULT_RESULTS / 'campaigns'})")
        measured = gpu_study.measured_seconds(DEFAULT_RESULTS / "campaigns",
                                              levels or (gpu_study.PART_LEVELS if args.part else None))
        print("\n".join(gpu_study.step_plan(todo, measured, budget)))
        return 0
    if args.out is None:
        raise HarnessError("gpu-study: --out DIR is needed (the folder for its archive and console log)")
    absent = gpu.absent_reason()
    if absent:
        raise Unavailable(f"gpu-study needs a GPU: {absent}")
    manifest, archive = gpu_study.gpu_study(args.out, args.quick, args.steps, args.budget_s, say=log,
                                            levels=levels, part=args.part, work=args.work)
    failed = [s["name"] for s in manifest["steps"] if s["status"] != "ok" and not s.get("planned_out")]
    print(f"manifest: {archive.parent / archive.name.removesuffix('.tar.gz')}/manifest.json in the archive")
    print(f"archive: {archive} ({archive.stat().st_size / 2**20:.1f} MiB)")
    if failed:
        log(f"steps not ok: {', '.join(failed)} (see the manifest; the others' results are in the archive)")
    return 1 if failed else 0


def cmd_campaign(args: argparse.Namespace) -> int:
    from harness.campaign import slurm

    quick = tuple(part for flag in ("implementations", "rounds", "processes")
                  if getattr(args, flag) is not None for part in (f"--{flag}", str(getattr(args, flag))))
    options = slurm.Options(partition=args.partition, account=args.account, qos=args.qos, gres=args.gres,
                            time=args.time, quick=quick)
    return slurm.submit(args.out, args.constraint, args.gpu_constraint,
                        args.studies or list(slurm.DEFAULT_STUDIES), options, args.into,
                        args.report, say=log)


def cmd_import_results(args: argparse.Namespace) -> int:
    from harness.campaign import archive

    archive.import_results(args.archive, args.into, say=print)
    return 0
