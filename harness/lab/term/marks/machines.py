"""Machine types on a leaderboard: a class graded across a cluster is timed on several kinds of
node, and a ratio to the references is fair within a machine type (same CPU model, code paths and
caches; same GPU model), so each type is ranked on its own. A row names its type in its node
(harness.lab.judge.phases.prepare.node_info: `machine_type`); a row from before that is typed by
its CPU and GPU names.

    machine_type(row) -> (key, name)     by_type(rows) -> [rows of one type], type by type
    type_lines(rows) -> the line naming the types, where there are several
"""


def machine_type(row: dict) -> tuple[str, str]:
    """(the key rows are grouped by, its name for readers)."""
    node = row.get("node") or {}
    found = node.get("machine_type")
    if isinstance(found, dict) and isinstance(found.get("key"), str):
        return found["key"], str(found.get("name") or found["key"])
    name = " / ".join(str(part) for part in (node.get("gpu"), node.get("cpu")) if part) or "unknown machine"
    return f"named:{name}", name


def by_type(rows: list[dict]) -> list[list[dict]]:
    """The rows of each machine type apart, in their order, the types in order of their first row."""
    types: dict[str, list[dict]] = {}
    for row in rows:
        types.setdefault(machine_type(row)[0], []).append(row)
    return list(types.values())


def type_lines(rows: list[dict]) -> list[str]:
    """A line saying the rows were ranked per machine type, where there are several; else none."""
    names = sorted({machine_type(row) for row in rows})
    if len(names) <= 1:
        return []
    return [f"Timed on {len(names)} machine types, each ranked on its own (a ratio to the references is "
            "compared within a type): " + "; ".join(name for _, name in names) + ".", ""]
