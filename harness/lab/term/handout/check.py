"""`lab check LAB path/to/lenet.py`: a student's own check before handing in. The same worker,
limits and gate as the grader, then a short timing beside the lab's rank_by reference only
(2 rounds): minutes become seconds, and the answer says what the grader would say. It uses the
best sandbox the laptop has (bubblewrap if present; without it, none), never refuses.

    check(lab, path, weights, report) -> (row, feedback text)
"""

import dataclasses
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness import DEFAULT_WEIGHTS
from harness.errors import HarnessError
from harness.lab import text
from harness.lab.judge import grade
from harness.lab.judge.rules import assignment

QUICK = {"rounds": 2, "calls": 40, "warmup": 5}


def check(lab: assignment.Lab, path: Path, weights: str | Path = DEFAULT_WEIGHTS,
          report: Callable[[str], None] = print, lock_timeout: float | None = None) -> tuple[dict, str]:
    """(the row, the feedback text) for one submission file or folder; on the GPU it times under the
    GPU lock, waiting at most `lock_timeout` seconds for another run's (None: as long as it takes)."""
    from harness.lab.term.marks import feedback

    path = Path(path)
    if not path.exists():
        raise HarnessError(f"{path}: no such file or folder (expected your {lab.module})")
    folder, module = (path.parent, path.name) if path.is_file() else (path, lab.module)
    if not module.endswith(".py"):
        raise HarnessError(f"{path}: expected a .py file (the lab's module is {lab.module})")
    quick = dataclasses.replace(lab, module=module, references=(lab.rank_by,),
                                measure=dataclasses.replace(lab.measure, **QUICK))
    with tempfile.TemporaryDirectory(prefix="lenet-lab-check-") as tmp:
        submissions = Path(tmp) / "submissions"
        submissions.mkdir()
        name = folder.resolve().name or "submission"
        (submissions / name).symlink_to(folder.resolve(), target_is_directory=True)
        out = Path(tmp) / "out"
        rows = grade.grade_all(quick, submissions, out, weights=weights, report=report, strict=False,
                               links=True, lock_timeout=lock_timeout)  # links: our own to the folder
        row = rows[0]
        # one submission: no rank, no points, and no figure (the text is printed)
        feedback.write(row, quick, None, 1, out, with_points=False, histogram=False)
        file = text.safe_id(name)  # feedback files are named by the student's safe id
        written = (out / "feedback" / f"{file}.md").read_text()
    return row, written
