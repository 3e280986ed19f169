"""The explain wing's commands, where a call's time goes: `explain` (the ablation ladder), `kernels`,
`gpu-explain`, `kernel-stages`, `gpu-floor` (a GPU call, and the hardware's probes), `arithmetic` (the
CPU's arithmetic peak)."""

import argparse
from collections.abc import Callable

from harness.command import Command, calls, device, log, option, out, rounds, split_list, weights
from harness.errors import HarnessError, Unavailable


def commands() -> list[Command]:
    """In the order `python -m harness --help` lists them."""
    return [
        Command(
            "explain", "where one call's time goes, stage by stage", cmd_explain,
            option("targets", help="IMPL[/VARIANT], comma-separated (e.g. keras/predict,keras_jax/predict)"),
            device(), calls("timed calls per ladder step"), rounds(), weights(),
            out(None, "write the rows to OUT/explain/<run-id>/ (the report reads reports/results)")),
        Command(
            "kernels", "where one GPU call's time goes: kernels, copies, CUDA calls "
                       "(CUPTI through torch.profiler)", cmd_kernels,
            option("targets", help="comma-separated IMPL[/VARIANT], e.g. cudnn/tuned,cudnn/graph"),
            device(("gpu",), "gpu"), calls("profiled calls (default 200)"),
            option("--batch", type=int, default=1, help="images per call (default 1)"), weights(),
            out(None, "write the rows to OUT/kernels/<run-id>/ (the report reads reports/results)")),
        Command(
            "gpu-explain", "the hand-written CUDA kernels before a GPU: each one's multiply-adds, "
                           "global bytes, SMs per image, longest dependent chain, registers, spills",
            cmd_gpu_explain,
            option("--arch", default="sm_90", help="the GPU architecture ptxas compiles for (default sm_90)"),
            out(None, "write the rows to OUT/gpu_explain/<run-id>/ (the report reads reports/results)")),
        Command(
            "kernel-stages", "on a GPU: the hand-written cluster kernel's stages from inside it, and "
                             "cuda/resident's call attributed part by part "
                             "(each block's cycle counter at each stage's end)",
            cmd_kernel_stages, calls("single-image calls (default 200)"),
            option("--dtypes", default="float32", help="comma-separated: float32,float64 (default float32)"),
            weights(),
            out(None, "write the rows to OUT/kernel_stages/<run-id>/ (the report reads reports/results)")),
        Command(
            "gpu-floor", "on a GPU: the hardware's probes of what a call needs: the bus round trip, "
                         "pinned copies, an empty launch and graph, the FMA peak of one SM and of all, "
                         "a cluster barrier",
            cmd_gpu_probes, option("--calls", type=int, default=2000,
                                  help="round trips, launches and small copies per probe (default 2000)"),
            out(None, "write the row to OUT/gpu_floor/<run-id>/ (the report reads reports/results)")),
        Command(
            "arithmetic", "the CPU's arithmetic peak: this core's measured multiply-adds per second, "
                          "and the hand-written C call split by layer against it",
            cmd_arithmetic,
            option("--calls", type=int, default=1000, help="single-image calls per round"),
            option("--rounds", type=int, default=5),
            option("--processes", type=int, default=3,
                   help="fresh processes, one after another (each draws its own address layout)"),
            weights(),
            out(None, "write the row to OUT/arithmetic/<run-id>/ (the report reads reports/results)"))]


def each_on_its_own(items: list[str], measure: Callable[[str], dict],
                    failed: Callable[[str, str], dict | None], show: Callable[[dict], list[str]],
                    catch: type[HarnessError] = HarnessError, why: str = "") -> list[dict]:
    """measure(item) for each item in turn, show(row)'s lines printed; one that cannot run (`catch`:
    HarnessError, Unavailable too) is said (`item: why reason`) and is failed(item, reason): a row
    saying why, or None (no row); the others still run."""
    rows = []
    for item in items:
        row: dict | None
        try:
            row = measure(item)
            print("\n".join(show(row)) + "\n")
        except catch as exc:
            log(f"{item}: {why}{exc}")
            row = failed(item, str(exc))
        if row is not None:
            rows.append(row)
    return rows


def cmd_explain(args: argparse.Namespace) -> int:
    """Each target on its own: one whose framework is not here is said, and the others still run."""
    from harness.explain import ladder

    def measure(target: str) -> dict:
        log(f"explaining {target} on {args.device} ({args.calls} calls per step, {args.rounds} rounds)")
        return ladder.explain(target, args.device, args.calls, args.rounds, args.weights)

    skipped: list[str] = []

    def left_out(target: str, reason: str) -> None:
        skipped.append(target)

    rows = each_on_its_own(split_list(args.targets), measure, left_out, ladder.table,
                           catch=Unavailable, why="not explained here: ")
    if args.out and rows:
        print(f"results: {ladder.write(rows, args.out)}")
    if skipped:
        log(f"could not run here: {', '.join(skipped)}")
    return 3 if skipped else 0


def cmd_gpu_explain(args: argparse.Namespace) -> int:
    """The CUDA kernels' static work, registers and spills (NVRTC, no GPU); without NVRTC exit 3."""
    from harness.explain import gpu_static

    found = gpu_static.rows(args.arch)
    print("\n".join(gpu_static.lines(found)))
    if args.out:
        print(f"results: {gpu_static.write(found, args.out)}")
    return 0


def cmd_arithmetic(args: argparse.Namespace) -> int:
    """The core's peak and the C call by layer against it; a machine where the C level cannot build
    gets a row saying why (as a skipped cell does), so `make run-all` goes on."""
    from harness.explain import c_layers

    if args.calls < 1 or args.rounds < 1 or args.processes < 1:
        raise HarnessError(f"--calls, --rounds and --processes: expected positive numbers, "
                           f"found {args.calls}, {args.rounds} and {args.processes}")
    # the C level runs on the calling thread alone: no thread settings to apply (nor to leak)
    log(f"measuring this core's multiply-add peak and the C call by layer "
        f"({args.processes} processes, each {args.rounds} rounds of {args.calls} calls)")
    try:
        row = c_layers.in_processes("fused", args.calls, args.rounds, args.weights, args.processes)
        print("\n".join(c_layers.lines(row)) + "\n")
        if row["contended"]:
            log(f"WARNING: the machine was busy while it measured ({row['contended']}): run it again")
    except HarnessError as exc:  # Unavailable (no compiler) above all: the reason and the fix
        log(f"arithmetic: {exc}")
        row = {"kind": c_layers.STUDY, "implementation": c_layers.LEVEL, "variant": "fused",
               "device": "cpu", "status": "unavailable", "reason": str(exc)}
    if args.out:
        print(f"results: {c_layers.write([row], args.out)}")
    return 0


def needs_gpu_and_calls(command: str, calls: int) -> None:
    """A GPU command's checks before it starts: Unavailable without a GPU, --calls positive."""
    from harness.machine import gpu

    absent = gpu.absent_reason()
    if absent:
        raise Unavailable(f"{command} needs a GPU: {absent}")
    if calls < 1:
        raise HarnessError(f"--calls: expected a positive number, found {calls}")


def cmd_kernels(args: argparse.Namespace) -> int:
    """Each target on its own: one that cannot run is a row saying why, the others still run."""
    from harness.explain import kernels

    needs_gpu_and_calls("kernels", args.calls)

    def measure(target: str) -> dict:
        log(f"profiling {target} on {args.device} ({args.calls} calls of {args.batch} images)")
        return {**kernels.profile(target, args.device, args.calls, args.weights, args.batch), "status": "ok"}

    def failed(target: str, reason: str) -> dict:
        name, _, variant = target.partition("/")
        return {"kind": "kernels", "implementation": name, "variant": variant or "-", "device": args.device,
                "batch": args.batch, "status": "failed", "reason": reason}

    rows = each_on_its_own(split_list(args.targets), measure, failed, kernels.table)
    if args.out:
        print(f"results: {kernels.write(rows, args.out)}")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def cmd_kernel_stages(args: argparse.Namespace) -> int:
    """Per dtype a row of the cluster kernel's stages and one of the resident call attributed; a dtype
    that cannot run (a GPU before sm_90) is a row saying why."""
    from harness.explain import kernel_stages

    needs_gpu_and_calls("kernel-stages", args.calls)

    def measure(dtype: str) -> dict:
        log(f"stamping {kernel_stages.KERNEL}'s stages ({args.calls} calls, {dtype})")
        return kernel_stages.row(args.weights, args.calls, dtype)

    def measure_resident(item: str) -> dict:  # "variant dtype"
        variant, dtype = item.split()
        log(f"attributing cuda/{variant}'s call ({args.calls} calls, {dtype})")
        return kernel_stages.resident_row(args.weights, args.calls, dtype, variant)

    def resident_failed(item: str, reason: str) -> dict:
        variant, dtype = item.split()
        return kernel_stages.resident_failed(dtype, variant, reason)

    rows = each_on_its_own(split_list(args.dtypes), measure, kernel_stages.failed, kernel_stages.lines)
    items = [f"{v} {d}" for v in kernel_stages.RESIDENT_KERNELS for d in split_list(args.dtypes)]
    rows += each_on_its_own(items, measure_resident, resident_failed, kernel_stages.resident_lines)
    if args.out:
        print(f"results: {kernel_stages.write(rows, args.out)}")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def cmd_gpu_probes(args: argparse.Namespace) -> int:
    """`gpu-floor`: one row of probes; a GPU where they cannot run gets a row saying why."""
    from harness.explain import gpu_probes

    needs_gpu_and_calls("gpu-floor", args.calls)
    rows = each_on_its_own(["probes"], lambda _: gpu_probes.measure(args.calls),
                           lambda _, reason: gpu_probes.failed(reason), gpu_probes.lines)
    if args.out:
        print(f"results: {gpu_probes.write(rows, args.out)}")
    return 0 if rows[0]["status"] == "ok" else 1
