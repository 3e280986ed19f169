"""DETAILS' section on `python -m harness reproduce` (harness.reproduce): the newest reproduce row of
each machine, its shares of cells reproduced and the cells whose second run fell outside.

    section(runs) -> [str]      DETAILS' lines
"""

from harness.report.claims import drift
from harness.report.markup import words
from harness.report.markup.tables import sig3, table

FOLDER = "reproduce"  # RESULTS/reproduce/<run-id>/: the reproduce rows
TEMPLATE = "reproduce.md.j2"  # DETAILS' section's words
CHECKS = (("median_inside", "new medians inside the reference's 95% interval"),
          ("ratio_inside", "new within-round ratios inside the reference's interval"),
          ("medians_overlap", "median intervals that overlap"),
          ("ratios_overlap", "ratio intervals that overlap"),
          ("median_inside_rerun", "new medians inside the reference's interval for a rerun (widened by "
                                  "the drift an earlier reproduce measured)"),
          ("ratio_inside_rerun", "new ratios inside the reference ratio's interval for a rerun (widened by "
                                 "the ratios' drift an earlier reproduce measured)"))


def share_text(held: int, of: int) -> str:
    return f"{held} of {of} ({held / of:.0%})" if of else "none to compare"


def time_text(value: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if value >= scale:
            return f"{sig3(value / scale)} {unit}"
    return f"{sig3(value)} ns"


def outside_claims(c: dict) -> dict:
    """A cell whose second run fell outside the first's interval: its medians, and its ratios where
    the ratio fell outside."""
    ratio = (c["ratio_reference"]["ratio"], c["ratio_new"]["ratio"]) if c["ratio_inside"] is False else None
    return {"cell_id": c["cell_id"], "before": time_text(c["reference"]["median_ns"]),
            "after": time_text(c["new"]["median_ns"]), "ratio": ratio}


def section(runs: list[dict]) -> list[str]:
    """DETAILS' lines: the newest reproduce row of each machine (runs: the newest run of each study
    folder on each machine, so the newest reproduce run of each machine), its shares and the cells
    whose second run fell outside."""
    found = [(run, row) for run in runs if run["study"] == FOLDER
             for row in run["rows"] if row.get("kind") == "reproduce"]
    head = ["", words.say(TEMPLATE, "title"), "", words.say(TEMPLATE, "method"), ""]
    if not found:
        return head + [words.say(TEMPLATE, "no_run")]
    out = list(head)
    for run, row in sorted(found, key=lambda item: item[0]["machine"]):
        share_rows = [[what, share_text(*row["shares"][key])] for key, what in CHECKS
                      if key in row["shares"]]  # a row from before a check was added lacks it
        moves = [drift.sentence(None, device, moved) for device in ("cpu", "gpu")
                 if (moved := drift.measured(row, device)) is not None]
        out += [words.say(TEMPLATE, "run", machine=run["machine"], row=row, moves=moves), "",
                table(["check", "cells"], share_rows), ""]
        outside = [c for c in row["cells"] if c["median_inside"] is False or c["ratio_inside"] is False]
        if outside:
            out += [words.say(TEMPLATE, "outside", cells=[outside_claims(c) for c in outside]), ""]
    return out

