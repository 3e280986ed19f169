"""A submission's peak memory in its row, and the lab's gate on it ([limits] peak_mb). The peak is
read by the grader from outside the worker (harness.lab.box.proc.peak: its cgroup's high-water mark, or
without one the worker process's VmHWM), over the worker's whole run (import, gate, warm-up, timed
calls), never from anything the worker says; the references' peaks, read the same way from their
own workers (their whole life so far), go in the row beside it.

    peak_memory(worker, refs) -> dict  the row's peak_mb, memory_source and reference_peak_mb, read
                                       while the workers still exist (before the worker is stopped)
    gate(row, limit)                   an ok row past peak_mb becomes over-memory, its numbers kept
    timed(row) -> bool                 a row with its times: ok, or over-memory (timed, then gated)
    STATUS                             "over-memory" (distinct from out-of-memory: the kill at memory_mb)
"""

from harness.lab.box.sandbox import Sandbox

STATUS = "over-memory"


def peak_memory(worker: Sandbox | None, refs: dict[str, Sandbox]) -> dict:
    """{"peak_mb", "memory_source"} of the submission's worker ({} when it never started), and
    {"reference_peak_mb": {label: MiB}} of the references' workers running now."""
    out = worker.box.memory() if worker is not None else {}
    peaks = {label: ref.box.memory().get("peak_mb") for label, ref in refs.items()}
    if any(v is not None for v in peaks.values()):
        out["reference_peak_mb"] = peaks
    return out


def gate(row: dict, limit: int | None) -> None:
    """[limits] peak_mb: an ok row whose measured peak is above it becomes `over-memory`, not ranked
    and no speed points, its times and its peak kept in the row. A row that failed already keeps its
    own status; a row without a measured peak is not gated (its memory_source says why)."""
    peak = row.get("peak_mb")
    if limit is None or row.get("status") != "ok" or not isinstance(peak, (int, float)) or peak <= limit:
        return
    row.update(status=STATUS, reason=f"its peak memory was {peak:.0f} MiB, above the lab's peak_mb of "
                                     f"{limit} MiB")


def timed(row: dict) -> bool:
    """Whether the row holds its times and ratios: an ok row, or an over-memory one (it was timed
    in full before its peak was gated)."""
    return row.get("status") in ("ok", STATUS) and "median_per_image_ns" in row and "ratios" in row
