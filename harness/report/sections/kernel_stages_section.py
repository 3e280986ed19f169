"""DETAILS' "Inside lenet_cluster": the newest `kernel-stages` rows of each GPU (the kernel's stages
from each block's cycle counter) beside the kernels trace's time for the same kernel, and what the
stamps cannot see (the cluster's launch and end).
"""

from collections.abc import Sequence

from harness.report.claims.rundata import study_rows
from harness.report.markup.tables import table
from harness.report.sections.gpu_section import kernels_of, us


def section(runs: Sequence[dict]) -> list[str]:
    out = []
    traced = study_rows(runs, "kernels")
    for r in study_rows(runs, "kernel_stages"):
        ghz = f" (ns at the SM's highest clock, {r['clock_khz'] / 1e6:.2f} GHz)" if r.get("clock_khz") else ""
        body = [[s["name"], f"{s['block0_cycles']:,.0f}",
                 f"{s['block0_ns']:,.0f}" if s.get("block0_ns") is not None else "–",
                 f"{s['slowest_block_cycles']:,.0f}"] for s in r["stages"]]
        longest = max(r["stages"], key=lambda s: s["block0_cycles"])
        share = longest["block0_cycles"] / r["block0_cycles"] if r["block0_cycles"] else 0.0
        words = [f"Block 0 runs {r['block0_cycles']:,.0f} cycles from entry to end"
                 + (f" ({us(r['block0_ns'])})" if r.get("block0_ns") is not None else "")
                 + f"; its longest stage is \"{longest['name']}\" ({100 * share:.0f}%)."]
        k = kernels_of(traced, f"{r['implementation']}/{r['variant']}", r["machine"])
        same = k is not None and k.get("dtype", "float32") == r["dtype"]  # the trace's dtype: float32
        op = next((o for o in k["ops"] if o["name"] == r["kernel"]), None) if same and k else None
        if op is not None and r.get("block0_ns") is not None:
            rest = op["ns_per_call"] - r["block0_ns"]
            words.append(f"The kernels trace times {r['kernel']} at {us(op['ns_per_call'])} a call: "
                         f"{us(max(rest, 0.0))} of it is outside block 0's stamps (the cluster's launch "
                         "and end, and any clock below the highest).")
        title = (f"## Inside {r['kernel']}, {r['dtype']}, on {r['machine']} "
                 "(`python -m harness kernel-stages`)")
        out += ["", title, "",
                f"{r['gpu']}, {r['dtype']}, {r['calls']} single-image calls of {r['implementation']}/"
                f"{r['variant']}: thread 0 of each block stamps its SM's cycle counter as it leaves each "
                f"stage; medians over the calls{ghz}. Block 0 waits at every cluster barrier for the "
                "slowest block, so its stages are the kernel's critical path; the slowest block's column "
                "is the most any block spent in that stage.", "",
                table(["stage", "block 0, cycles", "block 0, ns", "slowest block, cycles"], body),
                "", " ".join(words)]
    return out
