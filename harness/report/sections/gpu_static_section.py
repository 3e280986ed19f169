"""DETAILS' "The GPU's kernels before a GPU": the newest `gpu-explain` rows (each hand-written
kernel's work per image, registers and spills, from NVRTC without a GPU) beside the kernel's time
in the newest `kernels` trace at batch 1, where one was measured.
"""

from collections.abc import Sequence

from harness.report.claims.rundata import study_rows
from harness.report.markup.tables import table
from harness.report.sections.gpu_section import hand_written, resident, us

STUDY = "gpu_explain"


def static_rows(runs: Sequence[dict]) -> list[dict]:
    """The ok rows of the newest gpu_explain run (a static run's machine is the one that compiled)."""
    found = [run for run in runs if run["study"] == STUDY]
    if not found:
        return []
    newest = max(found, key=lambda run: run["order"])
    return [r for r in newest["rows"] if r.get("kind") == STUDY and r.get("status") == "ok"]


def kernel_time(kernel_rows_: list[dict], kernel: str, variants: Sequence[str]) -> str:
    """The kernel's device time per call in the newest batch-1 trace of one of its variants."""
    for row in kernel_rows_:
        if (row.get("batch", 1) != 1 or row["implementation"] not in hand_written()
                or row["variant"] not in variants):
            continue
        if resident(row):  # one kernel spans many calls and the idle wait between them
            return "resident between calls: no kernel a call"
        op = next((o for o in row["ops"] if o["category"] == "kernel" and o["name"] == kernel), None)
        if op is not None:
            launches = f" ({op['per_call']:.0f} launches together)" if op["per_call"] > 1 else ""
            return f"{us(op['ns_per_call'])}{launches} (cuda/{row['variant']}, {row['machine']})"
    return "not measured"


def section(runs: Sequence[dict]) -> list[str]:
    rows = static_rows(runs)
    if not rows:
        return []
    traced = study_rows(runs, "kernels")
    double = {(r["kernel"], r["part"]): r for r in rows if r["dtype"] == "float64"}
    body = []
    for r in sorted((r for r in rows if r["dtype"] == "float32"), key=lambda r: r["order"]):
        d = double.get((r["kernel"], r["part"]), {})
        body.append([r["kernel"], r["part"], ", ".join(r["variants"]), r["blocks_per_image"],
                     f"{r['macs']:,}", f"{r['global_bytes'] / 1e3:.1f}", f"{r['busiest_thread_macs']:,}",
                     r["chain"], f"{r['registers']} / {d.get('registers', '–')}",
                     f"{r['spill_bytes']} / {d.get('spill_bytes', '–')}", r["shared_bytes"],
                     kernel_time(traced, r["kernel"], r["variants"])])
    whole = {r["kernel"]: r for r in rows if r["dtype"] == "float32" and r["part"] == "the whole network"}
    lines = ["", "## The GPU's kernels before a GPU (`python -m harness gpu-explain`)", "",
             f"Each hand-written CUDA kernel's work for one image, as its source does it "
             f"(lenet_cuda/kernels.py's `work`), and ptxas' registers and spills for {rows[0]['arch']} "
             "(NVRTC: no GPU needed), float32 / float64. Multiply-adds are nominal (conv1's padded taps "
             "counted); global KB are the bytes its threads load from global memory; the busiest thread's "
             "multiply-adds and the longest dependent chain (one accumulator's multiply-adds) are summed "
             "over the kernel's stages, which run one after another. A kernel's time at batch 1 is bound by "
             "its busiest thread and its chains, not by its total: the GPU has 132 SMs, and a kernel that "
             "gives one image a block of one SM leaves the others idle.", "",
             table(["kernel", "part", "variants", "blocks (SMs) per image", "multiply-adds", "global KB",
                    "busiest thread's MACs", "longest chain", "registers", "spill bytes", "shared B",
                    "measured (kernels, batch 1)"], body)]
    if "lenet_fused" in whole and "lenet_cluster" in whole:
        one, many = whole["lenet_fused"], whole["lenet_cluster"]
        lines += ["", f"lenet_cluster spreads an image over {many['blocks_per_image']} blocks against "
                      f"lenet_fused's {one['blocks_per_image']}: its busiest thread does "
                      f"{many['busiest_thread_macs']:,} multiply-adds against {one['busiest_thread_macs']:,} "
                      f"({one['busiest_thread_macs'] / many['busiest_thread_macs']:.1f}x fewer), its chains "
                      f"sum to "
                      f"{many['chain']} against {one['chain']}, for {many['registers']} registers a thread "
                      f"against {one['registers']} (the dense weights it holds in registers)."]
    return lines
