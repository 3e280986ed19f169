"""What the lab sandbox costs: the honest example graded with and without it, alternately, in one
run; the sandbox's start per worker; one read of the cgroup's CPU counter.

    sudo .venv/bin/python scripts/lab_sandbox_overhead.py [--repeats 3] [--json FILE]

Each grading times `labs/examples/correct` beside numpy in rounds (its ratio to numpy is what a
leaderboard ranks); with the sandbox both run in it, without it neither does. The ratios of the
two modes should agree within a few percent: the sandbox adds a fixed start, not per-call work.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import ROOT  # noqa: E402
from harness.lab import assignment, cgroup, grade  # noqa: E402

LAB = """
[lab]
name = "overhead"
references = ["numpy"]
[measure]
calls = 240
rounds = 8
warmup = 20
[gate]
images = 1000
"""


def cgroup_read_ns(reads: int = 20000) -> float | None:
    if cgroup.reason_unavailable():
        return None
    group = cgroup.Cgroup(f"overhead-{time.time_ns()}")
    try:
        t0 = time.perf_counter_ns()
        for _ in range(reads):
            group.cpu_ns()
        return (time.perf_counter_ns() - t0) / reads
    finally:
        group.remove()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    lab = assignment.parse(LAB, "overhead.toml")
    found = {"sandbox": [], "none": []}
    with tempfile.TemporaryDirectory(prefix="lenet-overhead-") as tmp:
        for repeat in range(args.repeats):
            for mode in ("sandbox", "none") if repeat % 2 == 0 else ("none", "sandbox"):
                out = Path(tmp) / f"{mode}-{repeat}"
                row = grade.grade_all(lab, ROOT / "labs" / "examples", out, only=["correct"],
                                      no_sandbox=mode == "none", report=lambda *_: None)[0]
                found[mode].append({"ratio": row["ratios"]["numpy"]["ratio"],
                                    "median_us": row["median_per_image_ns"] / 1e3,
                                    "start_s": row.get("sandbox_start_s"), "isolation": row["isolation"]})
                print(f"{mode:8s} repeat {repeat}: {row['ratios']['numpy']['ratio']:.3f}x numpy, "
                      f"{row['median_per_image_ns'] / 1e3:.1f} us per image, worker start "
                      f"{row.get('sandbox_start_s')} s", flush=True)
    ratio = {m: statistics.median(r["ratio"] for r in rows) for m, rows in found.items()}
    summary = {"ratio_sandbox": ratio["sandbox"], "ratio_none": ratio["none"],
               "sandbox_over_none": ratio["sandbox"] / ratio["none"],
               "start_s_sandbox": statistics.median(r["start_s"] for r in found["sandbox"]),
               "start_s_none": statistics.median(r["start_s"] for r in found["none"]),
               "cgroup_read_ns": cgroup_read_ns(), "runs": found}
    print(f"median ratio to numpy: sandbox {ratio['sandbox']:.3f}, none {ratio['none']:.3f} "
          f"(sandbox / none = {summary['sandbox_over_none']:.3f}); worker start "
          f"{summary['start_s_sandbox']} s vs {summary['start_s_none']} s; "
          f"one cgroup CPU read {summary['cgroup_read_ns']} ns")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
