"""docs/writing-a-lab.md's "A lab of your own, step by step", followed from scratch: its code blocks run exactly as written,
in order, in a fresh folder outside the checkout; the lab it writes there (its own starter, gate and
references) checks and grades the examples it copied, and its kit hands out its own starter."""

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.lab.judge.rules import assignment
from tests.conftest import ROOT

GUIDE = "## A lab of your own, step by step"


def guide_blocks() -> list[str]:
    """The section's ```sh blocks, as written."""
    text = (ROOT / "docs" / "writing-a-lab.md").read_text()
    section = text.split(GUIDE, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def test_the_guide_has_its_steps():
    blocks = guide_blocks()
    assert len(blocks) == 3 and "starter = " in blocks[1] and "lab grade" in blocks[2]


@pytest.mark.slow  # the examples checked, graded and a kit built: about 30 s
def test_a_lab_written_by_following_the_guide_grades_its_examples(tmp_path):
    script = "set -e\n" + "\n".join(guide_blocks())
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lab = assignment.load(str(tmp_path / "my_lab" / "my_lab.toml"))
    assert lab.starter == tmp_path / "my_lab" / "template"  # its own, beside the lab file
    rows = {}
    for path in (tmp_path / "my_lab" / "graded" / "results").glob("*/row.json"):
        row = json.loads(path.read_text())
        rows[row["student"]] = row
    assert {name: row["status"] for name, row in rows.items()} == {"correct": "ok", "wrong": "wrong"}
    assert rows["correct"]["gate"]["images"] == lab.gate.images == 300
    assert "correct" in (tmp_path / "my_lab" / "graded" / "LEADERBOARD.md").read_text()
    with zipfile.ZipFile(tmp_path / "my_lab" / "dist" / "lab-kit-my_lab.zip") as kit:
        handed_out = kit.read("lab-kit-my_lab/lenet.py").decode()
    assert handed_out.split("\n", 3)[3] == (lab.starter / "lenet.py").read_text().split("\n", 3)[3]


def test_a_starter_found_nowhere_is_named(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text('[lab]\nname = "x"\nstarter = "mine"\n')
    with pytest.raises(Exception, match=r"starter: no folder 'mine' beside the lab file"):
        print(assignment.load(str(path)).starter)
    path.write_text('[lab]\nname = "x"\nstarter = "../elsewhere"\n')
    with pytest.raises(Exception, match="starter: expected a folder relative to the lab file"):
        assignment.load(str(path))
