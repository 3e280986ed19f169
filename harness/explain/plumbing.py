"""What `explain` (ladder.py) and `kernels` (kernels.py) share: a target's implementation and
variant, checked; one child process per target, answering one JSON line; the rows written to
<out>/<study>/<run-id>/ with the environment beside them."""

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import ROOT, registry
from harness.errors import HarnessError, Unavailable
from harness.machine import env, procenv
from harness.machine.files import write_atomic
from harness.measure.store import results, runfolder


def target_of(target: str, device: str, what: str) -> tuple[str, str]:
    """IMPL[/VARIANT] -> (implementation, variant), the variant defaulting to the first."""
    name, _, variant = target.partition("/")
    spec = registry.spec(name)
    variant = variant or spec.variants[0]
    if device not in spec.devices or variant not in spec.variants_for(device):
        raise HarnessError(f"{what} {target}: {name} has no variant {variant!r} on {device}; "
                           f"expected one of {list(spec.variants_for(device))}")
    return name, variant


def run_child(module: str, args: Sequence[object], name: str, variant: str, device: str, what: str,
              timeout: float) -> dict[str, Any]:
    """`python -m module args...` with the harness's one-thread settings and the level's registry
    environment; its last stdout line is JSON. A missing framework is Unavailable."""
    child_env = {**os.environ, **procenv.settings(1, 1, device), **registry.process_env(name)}
    done = subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=ROOT, env=child_env,
                          capture_output=True, text=True, timeout=timeout)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        if "No module named" in tail or "Unavailable" in tail:
            raise Unavailable(f"{what} {name}/{variant}: {tail}")
        raise HarnessError(f"{what} {name}/{variant} failed: {tail}")
    return json.loads(lines[-1])


def write(rows: list[dict[str, Any]], out: Path, study: str, device: str, run_id: str | None = None) -> Path:
    run_dir = results.create_run_dir(out, study, run_id)
    info = env.collect(procenv.settings(1, 1, device))
    write_atomic(run_dir / "env.json", json.dumps(info, indent=2) + "\n")
    writer = results.RowWriter(run_dir, run_dir.name)
    try:
        for row in rows:
            writer.write(row)
    finally:
        writer.close()
    runfolder.mark_complete(run_dir, "finished")  # last: the rows are all there
    return run_dir
