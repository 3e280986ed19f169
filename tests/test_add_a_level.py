"""Adding a level is one package and one registry entry (README.md, "Adding a level"): a copy of the
checkout gets a fake level (its own package, wrapping the NumPy model) and one ImplSpec line in
registry.py, nothing else, and the level is then found by `harness list` (the Makefile's lists),
verify, a study, the line count, the headline table, Figs. 1-3 and doctor."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness import ROOT

pytestmark = pytest.mark.slow

ENTRY = """\
        ImplSpec("fake", "lenet_fake.model:FakeLeNet", "fake-api", ("cpu",), ("default",), ("float32",),
                 "lenet_fake", display="a fake level", short="Fake", rung="inference engine", order=65,
                 ladder=(("onednn", "fake", "keras"), ("numpy", "fake")), colour="#123456",
                 versions=(("Fake engine", "fake-engine"),), hooks=(("doctor", "lenet_fake.model:doctor"),)),
"""
PACKAGE = {
    "__init__.py": '"""A fake level: the NumPy model under another name (tests/test_add_a_level.py)."""\n',
    "model.py": textwrap.dedent('''\
        """The fake level's predict: the NumPy reference's, under its own registry entry."""

        from harness.registry import REGISTRY
        from lenet_numpy.model import NumpyLeNet


        class FakeLeNet(NumpyLeNet):
            spec = REGISTRY["fake"]


        def doctor() -> dict:
            return {"line": "the fake engine is here"}
        '''),
}
STUDY = """\
[study]
name = "api_levels"
question = "a fake level beside the NumPy reference"
baseline = "numpy"

[measure]
calls = 10
rounds = 5
warmup = 2

[[cells]]
implementation = "numpy"
devices = ["cpu"]

[[cells]]
implementation = "fake"
devices = ["cpu"]
"""


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout's code with the fake level added: its package and one registry entry."""
    root = tmp_path_factory.mktemp("checkout")
    for name in [p.name for p in ROOT.glob("lenet_*") if p.is_dir()] + ["harness", "labs"]:
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "build"))
    for name in ("data", "weights"):  # read only: shared, not copied
        (root / name).symlink_to(ROOT / name)
    (root / "studies").mkdir()
    (root / "studies" / "api_levels.toml").write_text(STUDY)  # a study file is data
    (root / "lenet_fake").mkdir()
    for name, text in PACKAGE.items():
        (root / "lenet_fake" / name).write_text(text)
    registry = root / "harness" / "registry.py"
    text = registry.read_text()
    end = text.index("    )\n}\n")  # the end of REGISTRY's entries: the one edit
    registry.write_text(text[:end] + ENTRY + text[end:])
    return root


def harness(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=timeout)


def python(root: Path, code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_fake_level_is_found_everywhere(checkout: Path) -> None:
    listed = harness(checkout, "list", "--device", "cpu")
    assert listed.returncode == 0, listed.stderr
    assert "fake" in listed.stdout.strip().split(","), listed.stdout  # the Makefile's CPU_IMPLS

    verified = harness(checkout, "verify", "--implementations", "numpy,fake", "--device", "cpu",
                       "--json", str(checkout / "verify.json"))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "fake" in json.dumps(json.loads((checkout / "verify.json").read_text()))

    ran = harness(checkout, "run", "api_levels", "--devices", "cpu")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    rows = [json.loads(line) for line in next((checkout / "reports" / "results" / "api_levels").glob(
        "*/results.jsonl")).read_text().splitlines()]
    assert any(r.get("kind") == "cell" and r.get("status") == "ok" and r["cell"]["implementation"] == "fake"
               for r in rows)

    assert harness(checkout, "loc").returncode == 0
    assert "lenet_fake,fake-api" in (checkout / "reports" / "loc.csv").read_text()  # the line count

    reported = harness(checkout, "report")
    assert reported.returncode == 0, reported.stderr
    report = (checkout / "reports" / "REPORT.md").read_text()
    assert "| a fake level |" in report  # its row in the headline table, by its display name
    assert "oneDNN → Fake → Keras/TF" not in report  # not measured here: no line is promised

    figures = python(checkout, textwrap.dedent("""\
        import json
        from harness import DEFAULT_RESULTS
        from harness.machine import env
        from harness.report import machines, rundata, loc
        from harness.report.figures import code_lines, cost, latency
        from harness.report.style import colour, IMPL_ORDER
        data = rundata.load_report(DEFAULT_RESULTS, loc.read_csv())
        pts = cost.points(data.frame, data.loc_rows, data.answer)
        print(json.dumps({"fig1": [p["implementation"] for p in pts],
                          "fig1_lines": cost.lines_caption(cost.chains(pts)),
                          "fig2": list(code_lines.bars(data.loc_rows)),
                          "fig3": sorted(set(latency.api_cells(data.frame)["label"])),
                          "colour": colour("fake"), "order": IMPL_ORDER, "packages": env.PACKAGES,
                          "columns": [name for name, _get in machines.VERSION_FIELDS]}))
        """))
    found = json.loads(figures)
    assert "fake" in found["fig1"] and "NumPy ref. → Fake" in found["fig1_lines"]
    assert "fake-api" in found["fig2"]
    assert "fake/default" in found["fig3"]
    assert found["colour"] == "#123456"
    assert "fake-engine" in found["packages"] and "Fake engine" in found["columns"]  # its versions
    assert found["order"].index("onnx") < found["order"].index("fake") < found["order"].index("tf")
    assert harness(checkout, "figures").returncode == 0

    doctor = harness(checkout, "doctor", "--implementations", "fake")
    assert doctor.returncode == 0, doctor.stderr
    assert "Fake level: the fake engine is here" in doctor.stdout
    assert any(line.split()[:3] == ["fake", "cpu", "ok"] for line in doctor.stdout.splitlines()), doctor.stdout
