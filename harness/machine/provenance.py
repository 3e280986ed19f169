"""What code a run measured, and whether a level has changed since: recorded in every run's
env.json (`provenance`) and read back by the report, which marks a number measured on older code
as stale (the way reports/loc.sources.sha256 says whether loc.csv is current).

A level's sources are its package's counted files (Python and CUDA C kernels, the files lines of
code are counted from); their hash is sha256 over each file's name and bytes. A run made before
runs recorded this has no hashes: its level counts as changed when git's history has a commit to
the package after the run started, and as unknown where there is no git history to ask.

    package_files(package, root) -> [Path]          the files a level's sources are
    level_hash(implementation, root) -> str | None  None: no package (the null level)
    collect(implementations, root) -> dict          {commit, dirty (a tracked file outside reports/
                                                    differs from it), sources: {impl: hash}}
    change(provenance, implementation, started, root) -> str | None
                                                    why the level is stale, or None if current
    analyze(path, group) -> pygount.SourceAnalysis  a source file's lines of code as pygount counts
                                                    them (the report's bill for each level, a lab's
                                                    leaderboard for each submission)
"""

import hashlib
import subprocess
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from harness import ROOT, registry

UNKNOWN = "unknown"  # a run without recorded sources, and no git history to ask


def package_files(package: str, root: Path = ROOT) -> list[Path]:
    """The files a level package's sources are: its Python, its CUDA C kernels and headers, its C."""
    return sorted(p for pattern in ("*.py", "*.cu", "*.cuh", "*.c") for p in (root / package).glob(pattern))


def level_hash(implementation: str, root: Path = ROOT) -> str | None:
    spec = registry.REGISTRY.get(implementation)
    if spec is None or spec.package is None:
        return None
    digest = hashlib.sha256()
    for path in package_files(spec.package, root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def git(root: Path, *args: str) -> str | None:
    """git's answer in the checkout at root, or None (no git, not a checkout)."""
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def collect(implementations: Iterable[str], root: Path = ROOT) -> dict:
    """The commit checked out (and whether the tree had changes) and each level's source hash."""
    # reports/ is what a run writes (make run-all's verify files come first): not the code measured
    status = git(root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)reports")
    hashes = {impl: level_hash(impl, root) for impl in sorted(set(implementations))}
    return {"commit": git(root, "rev-parse", "HEAD"), "dirty": None if status is None else bool(status),
            "sources": {impl: h for impl, h in hashes.items() if h is not None}}


@cache
def _current(implementation: str, root: Path) -> str | None:
    return level_hash(implementation, root)


@cache
def _last_change(package: str, root: Path) -> tuple[float, str] | None:
    """(commit time, short hash) of the last commit that touched the package, or None."""
    out = git(root, "log", "-1", "--format=%ct %h", "--", package)
    if not out:
        return None
    when, short = out.split()
    return float(when), short


def change(provenance: dict | None, implementation: str, started: float, root: Path = ROOT) -> str | None:
    """Why `implementation`'s numbers in a run are stale, or None when its sources are those
    measured. provenance: the run's env.json entry (None: not recorded); started: the run's first
    row's time (epoch seconds), for runs without one."""
    spec = registry.REGISTRY.get(implementation)
    if spec is None or spec.package is None:
        return None
    recorded = (provenance or {}).get("sources", {}).get(implementation)
    if recorded is not None:
        current = _current(implementation, root)
        if recorded == current:
            return None
        return (f"{spec.package} changed since it was measured "
                f"(sources {recorded[:8]} -> {(current or '-')[:8]})")
    last = _last_change(spec.package, root)
    if last is None:
        return f"{UNKNOWN}: the run recorded no source hashes and there is no git history to compare"
    if last[0] > started:
        return f"{spec.package} changed after the run (commit {last[1]}); the run recorded no source hashes"
    return None


def analyze(path: Path, group: str) -> Any:  # a pygount.SourceAnalysis
    import pygount

    return pygount.SourceAnalysis.from_file(str(path), group)
