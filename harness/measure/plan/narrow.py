"""A quick run of a study (`python -m harness run STUDY --implementations A,B --rounds N --processes P`):
the study file narrowed to some levels and fewer (or more) rounds and processes, written back as a study
file of its own, so the run folder's study.toml is what ran (and `--resume` completes it).

A narrowed study says so in its [study] table (`narrowed`: what was cut), the runner copies that into
the run's env.json, and a run that carries it is never a machine's answer: the report's loader
(harness.report.claims.rundata.load_runs) and the floor (harness.measure.fastest_call) pass it by.

    narrow(study, implementations, rounds, processes) -> Study   the narrowed study, parsed again
    is_narrowed(env) -> bool                                      a run's env.json says it was narrowed
    run_is_narrowed(run_dir) -> bool                              the same, read from the run's folder
"""

import json
import sys
from pathlib import Path
from typing import Any

from harness import registry
from harness.errors import HarnessError
from harness.measure.plan import study as studies

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def narrow(study: studies.Study, implementations: list[str] | None, rounds: int | None,
           processes: int | None) -> studies.Study:
    """The study's cells of these implementations (a level the file has no cell for gets one: its first
    variant, on every device it runs on), its rounds and processes replaced where given."""
    data = tomllib.loads(study.source)
    cut = []
    for name in implementations or ():
        try:
            registry.spec(name)
        except HarnessError as exc:
            raise HarnessError(f"--implementations: {exc}") from None
    if implementations:
        entries = [e for e in data["cells"] if e.get("implementation") in implementations]
        listed = {e["implementation"] for e in entries}
        entries += [{"implementation": name} for name in implementations if name not in listed]
        data["cells"] = entries
        if data["study"].get("baseline") not in implementations:
            data["study"].pop("baseline", None)  # ratios to it need its cells in the same rounds
        cut.append(f"implementations {','.join(implementations)}")
    for key, value in (("rounds", rounds), ("processes", processes)):
        if value is None:
            continue
        if value < 1:
            raise HarnessError(f"--{key}: expected a whole number >= 1, found {value}")
        data.setdefault("measure", {})[key] = value
        if key == "processes":
            for entry in data["cells"]:
                entry.pop("processes", None)  # one count for every cell of a quick run
        cut.append(f"{key} {value}")
    if not cut:
        return study
    data["study"]["narrowed"] = "; ".join(cut)
    return studies.parse(toml_text(data), f"{study.name} narrowed ({'; '.join(cut)})")


def is_narrowed(env: dict) -> bool:
    """A run's env.json records a narrowed study (runner.start_run copies the study's `narrowed`)."""
    return bool(env.get("narrowed"))


def run_is_narrowed(run_dir: Path) -> bool:
    """is_narrowed of the run folder's env.json (a folder without one was not narrowed by this harness)."""
    path = Path(run_dir) / "env.json"
    if not path.is_file():
        return False
    try:
        env = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise HarnessError(f"{path}: not JSON ({exc})") from None
    return isinstance(env, dict) and is_narrowed(env)


def toml_text(data: dict[str, Any]) -> str:
    """A study's tables as TOML: [study], [measure], then each [[cells]] (the values a study file holds:
    strings, numbers, booleans and lists of them)."""
    out = ["# a quick run's study: the study file narrowed (harness.measure.plan.narrow)"]
    for table in ("study", "measure"):
        if table in data:
            out += ["", f"[{table}]"] + [f"{key} = {toml_value(v)}" for key, v in data[table].items()]
    for entry in data.get("cells", []):
        out += ["", "[[cells]]"] + [f"{key} = {toml_value(v)}" for key, v in entry.items()]
    return "\n".join(out) + "\n"


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise HarnessError(f"a study's value {value!r}: expected a string, number, boolean or list")
