"""REPORT.md's compact table of each device: per level, its lines of code as first written, its
call as first written and its fastest call, each a median with its marks as symbols and its ratio
to the device's raw library (within rounds; "no measurable difference" where the interval holds 1).
The intervals are in DETAILS' full table (headline.render); a level with no number on the device
says why in a note below the table.

    times(r) -> str                         a ratio for the table: '1760x', 'no measurable difference'
    device_table(levels, device) -> dict    {device, table, notes, cells} (None: no level has a number)
"""

import math

import pandas as pd

from harness import registry
from harness.report.claims import headline
from harness.report.claims.headline import Level
from harness.report.markup import quote
from harness.report.markup.tables import includes_one, sig3, table


def times(r: dict | None) -> str:
    """A within-round ratio without its interval (DETAILS gives it): '1760x'; 'no measurable
    difference' where its interval holds 1; '–' for none."""
    if not r or math.isnan(r["ratio"]):
        return "–"
    return "no measurable difference" if includes_one(r) else f"{sig3(r['ratio'])}x"


def call(cell: pd.Series) -> str:
    return f"`{cell['variant']}` {quote.short(cell)}"


def device_table(levels: list[Level], device: str) -> dict | None:
    """The device's table: a row per level that runs on it (its lines of code as first written, its
    first-written and its fastest call with their ratios to the raw library), and the notes of the
    rows without a number."""
    raw = headline.RAW.get(device)
    mine = [lv for lv in levels if device in registry.spec(lv.implementation).devices]
    if raw is None or not any(device in lv.cells for lv in mine):
        return None
    notes: list[str] = []
    rows, cells = [], []
    for lv in mine:
        lines = str(lv.loc) if lv.loc is not None else "–"
        if device not in lv.cells:
            why = lv.missing.get(device, "not measured")
            if why not in notes:
                notes.append(why)
            rows.append([lv.name, lines, f"– ({chr(ord('a') + notes.index(why))})", "", "", ""])
            continue
        first, best = lv.first.get(device), lv.cells[device]
        itself = lv.implementation == raw
        row = [lv.name, lines]
        same = first is not None and first["cell_id"] == best["cell_id"]
        row += ([call(first), "1" if itself and same else times(lv.first_ratios.get(device))]
                if first is not None else ["– (not measured as first written)", ""])
        fastest = times(lv.ratios.get(device)) if not itself else "1"
        row += ["the same call", ""] if same else [call(best), fastest]
        rows.append(row)
        cells += [c for c in (first, best) if c is not None]
    name = registry.short(raw)
    text = table(["level", "lines of code, as first written", "as first written", f"x {name}", "fastest call",
                  f"x {name}"], rows)
    return {"device": device, "table": text, "cells": cells,
            "notes": [f"({chr(ord('a') + i)}) {why}." for i, why in enumerate(notes)]}
