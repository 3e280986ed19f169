"""Adding a level is one package and one registry entry (docs/writing-a-level.md): a copy of the
checkout gets a fake level (its own package, wrapping the NumPy model) and one ImplSpec line in
registry.py, nothing else, and the level is then found by `harness list` (the Makefile's lists),
verify, a study, the line count, the headline table, Figs. 1-3 and doctor, and by every list of levels
the harness, the Makefile and gpu-study keep (each read from the registry). An entry without a field the
harness relies on is refused at import, in one line naming the field."""

import dataclasses
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness import ROOT, registry
from harness.errors import HarnessError
from harness.measure.store import results

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# It claims the GPU too (no GPU cell runs here), so the GPU's lists are checked as well as the CPU's.
ENTRY = """\
        ImplSpec("fake", "lenet_fake.model:FakeLeNet", "fake-api", ("cpu", "gpu"), ("default",), ("float32",),
                 "lenet_fake", hooks=(("doctor", "lenet_fake.model:doctor"),),
                 trainer="lenet_fake.model:FakeTrainer", train_variants=("default",), stand_ins=("default",),
                 explain=("default",), trace="all",
                 shown=Shown(display="a fake level", short="Fake", rung="inference engine", order=65,
                             ladder=(("onednn", "fake", "keras"), ("numpy", "fake")), colour="#123456",
                             first_written="default", guide="https://example.org/fake-engine/get-started"),
                 installs=Installs(versions=(("Fake engine", "fake-engine"),), frameworks=("fake_engine",))),
"""
PACKAGE = {
    "__init__.py": '"""A fake level: the NumPy model under another name (tests/test_add_a_level.py)."""\n',
    "model.py": textwrap.dedent('''\
        """The fake level's predict: the NumPy reference's, under its own registry entry."""

        from harness.registry import REGISTRY
        from lenet_numpy.model import NumpyLeNet
        from lenet_numpy.train import NumpyTrainer


        class FakeLeNet(NumpyLeNet):
            spec = REGISTRY["fake"]


        class FakeTrainer(NumpyTrainer):
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


def with_entry(root: Path, entry: str) -> None:
    """root's registry.py with the entry added at the end of REGISTRY's entries: the one edit."""
    registry_py = root / "harness" / "registry.py"
    text = registry_py.read_text()
    end = text.index("    )\n}\n")
    registry_py.write_text(text[:end] + entry + text[end:])


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
    with_entry(root, ENTRY)
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


@pytest.mark.slow
def test_a_fake_level_is_found_everywhere(checkout: Path) -> None:
    listed = harness(checkout, "list", "--device", "cpu")
    assert listed.returncode == 0, listed.stderr
    assert "fake" in listed.stdout.strip().split(","), listed.stdout  # the Makefile's CPU_IMPLS

    verified = harness(checkout, "verify", "--implementations", "numpy,fake", "--device", "cpu", "--limit", "500",
                       "--json", str(checkout / "verify.json"))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "fake" in json.dumps(json.loads((checkout / "verify.json").read_text()))

    ran = harness(checkout, "run", "api_levels", "--devices", "cpu")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    rows = results.read_rows(next((checkout / "reports" / "results" / "api_levels").glob("*/")))
    assert any(r.get("kind") == "cell" and r.get("status") == "ok" and r["cell"]["implementation"] == "fake"
               for r in rows)

    assert harness(checkout, "loc").returncode == 0
    assert "lenet_fake,fake-api" in (checkout / "reports" / "loc.csv").read_text()  # the line count

    reported = harness(checkout, "report")
    assert reported.returncode == 0, reported.stderr
    report = (checkout / "reports" / "REPORT.md").read_text()
    assert "| a fake level |" in report  # its row in the headline table, by its display name

    figures = python(checkout, textwrap.dedent("""\
        import json
        from harness import DEFAULT_RESULTS
        from harness.cli import main
        from harness.machine import env
        from harness.report.sections import machines
        from harness.report.claims import headline, loc, rundata
        from harness.figures import code_lines, latency
        from harness.figures.style import colour, IMPL_ORDER
        data = rundata.load_report(DEFAULT_RESULTS, loc.read_csv())
        pts = headline.points(data.frame, data.loc_rows, data.answer)
        print(json.dumps({"fig1": [p["implementation"] for p in pts],
                          "fig2": list(code_lines.bars(data.loc_rows)),
                          "fig3": sorted(set(latency.api_cells(data.frame)["label"])),
                          "colour": colour("fake"), "order": IMPL_ORDER, "packages": env.PACKAGES,
                          "columns": [name for name, _get in machines.VERSION_FIELDS]}))
        assert main(["figures"]) == 0  # `harness figures`, in the process that has its modules loaded
        """))
    found = json.loads(figures.splitlines()[0])
    assert "fake" in found["fig1"]
    assert "fake-api" in found["fig2"]
    assert "fake/default" in found["fig3"]
    assert found["colour"] == "#123456"
    assert "fake-engine" in found["packages"] and "Fake engine" in found["columns"]  # its versions
    assert found["order"].index("onnx") < found["order"].index("fake") < found["order"].index("tf")

    doctor = harness(checkout, "doctor", "--implementations", "fake")
    assert doctor.returncode == 0, doctor.stderr
    assert "Fake level: the fake engine is here" in doctor.stdout
    assert any(line.split()[:3] == ["fake", "cpu", "ok"] for line in doctor.stdout.splitlines()), doctor.stdout


LISTS = textwrap.dedent("""\
    import json
    from harness import cli
    from harness.campaign import gpu_study
    from harness.check import train_verify, verify
    from harness.measure.inside import worker
    from harness.report.sections import gpu_section

    named = {}  # what verify and verify-train are asked to check when --implementations is left out
    verify.verify = lambda names, *a, **k: named.setdefault("verify", list(names)) and []
    train_verify.verify_train = lambda names, *a, **k: named.setdefault("verify-train", list(names)) and []
    for command in ("verify", "verify-train"):
        args = cli.build_parser().parse_args([command, "--device", "cpu"])
        args.func(args)
    plan = gpu_study.plan(__import__("pathlib").Path("unused"), "r1", quick=False, write=False)
    print(json.dumps({**named, "gpu_impls": gpu_study.GPU_IMPLS, "gpu_train": gpu_study.GPU_TRAIN_IMPLS,
                      "gpu_explain": gpu_study.EXPLAIN, "kernels": gpu_study.KERNELS,
                      "steps": {s.name: s.command for s in plan},
                      "ladder": gpu_section.ladder_others(),
                      "frameworks": worker.FRAMEWORKS}))
    """)


def test_every_list_of_levels_comes_from_the_registry(checkout: Path) -> None:
    """The fake level's one entry reaches every list the harness, the Makefile and gpu-study keep."""
    found = json.loads(python(checkout, LISTS))
    assert "fake" in found["verify"] and "fake" in found["verify-train"]  # their defaults
    assert "fake" in found["gpu_impls"].split(",") and "fake" in found["gpu_train"].split(",")
    assert "fake/default" in found["gpu_explain"].split(",") and "fake/default" in found["kernels"].split(",")
    assert any("fake/default" in " ".join(cmd) for cmd in found["steps"].values())  # gpu-study runs them
    assert "fake/default" in found["ladder"]
    assert "fake_engine" in found["frameworks"]  # its worker's import is recorded
    explain = harness(checkout, "list", "--explain", "--device", "cpu")  # the Makefile's EXPLAIN
    assert "fake/default" in explain.stdout.strip().split(","), explain.stderr
    makefile = (ROOT / "Makefile").read_text()
    assert "EXPLAIN = $(shell $(PY) -m harness list --explain --device cpu)" in makefile
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert any(fnmatch.fnmatch("lenet_fake", p) for p in project["tool"]["setuptools"]["packages"]["find"]["include"])


@pytest.mark.parametrize("edit, field", [
    (("order=65", "order=None"), "order"),
    (("order=65,", ""), "order"),  # left out: Shown's default is no place
    ((ENTRY[ENTRY.index("    shown="):ENTRY.index("    installs=")], ""), "order"),  # no Shown: its defaults
    (('rung="inference engine"', 'rung="framework-ops"'), "rung"),
    (('colour="#123456"', 'colour="#000000"'), "colour"),  # the NumPy reference's: one colour a level
    (('display="a fake level", ', ""), "display"),
    (('explain=("default",)', 'explain=("fast",)'), "explain"),
])
def test_an_incomplete_entry_is_refused_at_import(tmp_path: Path, edit: tuple[str, str], field: str) -> None:
    """The harness, copied with an entry missing a field or naming an unknown rung: every command stops
    at import with one ERROR line naming the field (and, for a rung, the rungs), exit 2."""
    shutil.copytree(ROOT / "harness", tmp_path / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    with_entry(tmp_path, ENTRY.replace(*edit))
    done = harness(tmp_path, "list", timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("ERROR: harness/registry.py, level 'fake': field `" + field + "`")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    if field == "rung":
        assert "framework-ops" in done.stderr and ", ".join(registry.RUNGS) in done.stderr


def test_the_registry_as_it_is_passes_its_own_check() -> None:
    registry.check_registry(registry.REGISTRY)
    numpy = registry.REGISTRY["numpy"]
    bad = {**registry.REGISTRY, "numpy": dataclasses.replace(numpy, shown=dataclasses.replace(numpy.shown, rung=""))}
    with pytest.raises(HarnessError, match=r"level 'numpy': field `rung`: expected one of hand-written, "):
        registry.check_registry(bad)


def test_loc_lines_stay_aligned_for_a_long_package_name() -> None:
    from harness.report.cli import loc_lines

    lines = loc_lines({"lenet_numpy": 138, "lenet_a_level_with_a_long_name": 12, "lenet_cudnn": 1030})
    assert lines[1] == "lenet_a_level_with_a_long_name     12 code lines"
    assert len({line.index(" code lines") for line in lines}) == 1  # the counts end in one column
    assert lines[2].endswith(" 1,030 code lines")


def test_an_entry_without_its_first_written_call_or_guide_is_refused():
    """The report compares levels by their first-written calls: an entry names it and its guide."""
    import dataclasses

    import pytest

    from harness import registry
    from harness.errors import HarnessError

    tf = registry.REGISTRY["tf"]
    for change, field in (({"first_written": "jitted"}, "first_written"), ({"guide": ""}, "guide")):
        entry = dataclasses.replace(tf, shown=dataclasses.replace(tf.shown, **change))
        with pytest.raises(HarnessError, match=f"level 'tf': field `{field}`"):
            registry.check_entry(entry)
    assert registry.first_written("tf") == "eager" and registry.first_written("c") == "layers"
