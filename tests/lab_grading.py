"""A small class graded for real, as a TA runs it: a lab file written into a temporary folder, one
folder per submission (copied from an example folder, or a lenet.py written from text), then
`python -m harness lab grade` in a fresh process; its rows back, by student."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def grade_class(tmp_path: Path, lab_text: str, folders: dict[str, Path | str]) -> tuple[Path, dict[str, dict]]:
    """(the grading's --out, {student: row}); each of `folders` is an example folder or lenet.py's text."""
    (tmp_path / "lab.toml").write_text(lab_text)
    for name, given in folders.items():
        if isinstance(given, Path):
            shutil.copytree(given, tmp_path / "submissions" / name)
        else:
            (tmp_path / "submissions" / name).mkdir(parents=True)
            (tmp_path / "submissions" / name / "lenet.py").write_text(given)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "harness", "lab", "grade", str(tmp_path / "lab.toml"),
                           "--submissions", str(tmp_path / "submissions"), "--out", str(out)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, {name: json.loads((out / "results" / name / "row.json").read_text()) for name in folders}
