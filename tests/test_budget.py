"""What a GPU run carries (issue 78): the checkout's files and the offline bundle's recorded wheels,
largest first with what each saved, held to harness.campaign.budget.LIMIT_BYTES. The first test is the
budget itself: a commit that breaks it is red."""

import gzip
import importlib.util
import json
import subprocess

import pytest

from harness import ROOT
from harness.campaign import budget
from harness.errors import HarnessError

_spec = importlib.util.spec_from_file_location("offline_bundle", ROOT / "scripts" / "offline_bundle.py")
ob = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ob)


def test_the_checkout_and_the_offline_bundle_fit_the_budget():
    found = budget.parts()
    said = "\n".join(budget.lines(found))
    assert budget.total(found) <= budget.LIMIT_BYTES, said
    assert any(p.name.startswith("offline bundle") for p in found) and "within the budget" in said


def test_the_bundle_record_is_the_bundle_the_requirements_build():
    """The committed record names one wheel a requirement, none of what the server brings: a changed
    list needs `make offline-bundle` (which rewrites the record) before the budget can be told."""
    record = json.loads(ob.RECORD.read_text())
    assert sorted(w["name"] for w in record["wheels"]) == sorted(ob.requirement_name(r) for r in ob.REQUIREMENTS)
    assert record["python"] == "3.12" and record["total_bytes"] == sum(w["bytes"] for w in record["wheels"])
    assert not {w["name"] for w in record["wheels"]} & (set(ob.SERVER_PROVIDES) | set(ob.NOT_NEEDED))
    assert {w["name"] for w in record["left_out"]} == set(ob.WEIGHED_LEFT_OUT)


def git_checkout(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("dist/\n")
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "big.whl").write_bytes(bytes(1 << 20))  # ignored: never carried
    (tmp_path / "reports" / "results" / "s" / "r").mkdir(parents=True)
    rows = b'{"kind": "load"}\n' * 20000
    (tmp_path / "reports" / "results" / "s" / "r" / "results.jsonl.gz").write_bytes(gzip.compress(rows, mtime=0))
    (tmp_path / "reports" / "REPORT.md").write_text("# r\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mnist.gz").write_bytes(bytes(300_000))
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "offline_bundle.json").write_text(json.dumps({
        "python": "3.12", "wheels": [{"name": "keras", "bytes": 2 << 20}, {"name": "rich", "bytes": 1 << 20}],
        "left_out": [{"name": "h5py", "bytes": 5 << 20}]}))
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    (tmp_path / "untracked.txt").write_text("x" * 1000)  # not ignored: carried too
    return tmp_path, len(rows)


def test_parts_largest_first_with_what_each_saved(tmp_path):
    root, plain = git_checkout(tmp_path)
    found = budget.parts(root)
    assert found[0].name == "offline bundle (Python 3.12, 2 wheels)" and found[0].bytes == 3 << 20
    assert found[0].saved == 5 << 20 and "h5py" in found[0].how
    results = next(p for p in found if p.name == "reports/results/")
    packed = (root / "reports" / "results" / "s" / "r" / "results.jsonl.gz").stat().st_size
    assert results.bytes == packed and results.saved == plain - packed and "rows compressed" in results.how
    assert [p.bytes for p in found[:-1]] == sorted((p.bytes for p in found[:-1]), reverse=True)
    assert found[-1].name.startswith("the rest (") and "reports/*.*" in found[-1].name
    carried = {str(p.relative_to(root)) for p in budget.carried_files(root)}
    assert "untracked.txt" in carried and "dist/big.whl" not in carried
    assert budget.total(found) == sum(p.stat().st_size for p in budget.carried_files(root)) + (3 << 20)


def test_over_the_budget_is_said_and_without_a_record_it_cannot_be_told(tmp_path):
    root, _ = git_checkout(tmp_path)
    said = budget.lines(budget.parts(root), limit=1 << 20)
    assert "in all: OVER the budget of 1.00 MiB" in said[-1]
    assert "within the budget" in budget.lines(budget.parts(root), limit=10 << 20)[-1]
    (root / "scripts" / "offline_bundle.json").write_text("{}")
    with pytest.raises(HarnessError, match=r"offline_bundle.json: not a readable bundle record .*make offline-bundle"):
        budget.parts(root)
