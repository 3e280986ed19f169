"""What code a run measured, and whether a level has changed since: recorded in every run's
env.json (`provenance`) and read back by the report, which marks a number measured on older code
as stale (the way reports/loc.sources.sha256 says whether loc.csv is current).

A level's sources are its package's counted files (Python and CUDA C kernels, the files lines of
code are counted from); their hash is sha256 over each file's name and bytes. A run made before
runs recorded this has no hashes: its level counts as changed when git's history has a commit to
the package after the run started, and as unknown where there is no git history to ask.

    package_files(package, root) -> [Path]          the files a level's sources are
    level_hash(implementation, root) -> str | None  None: no package (the null level)
    timing_hash(root) -> str | None                 the harness's timing code (TIMING_FILES), hashed
    timing_at(commit, root) -> str | None           the same, as it was at a recorded commit (git)
    collect(implementations, root) -> dict          {commit, dirty (a tracked file outside reports/
                                                    differs from it), sources: {impl: hash}, timing}
    change(provenance, implementation, started, root) -> str | None
                                                    why the level is stale, or None if current
    count_lines(path, group) -> (code, comment)    a source file's lines as pygount counts them
                                                    (the report's bill for each level, a lab's
                                                    leaderboard for each submission)
"""

import hashlib
import subprocess
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from harness import ROOT, registry

UNKNOWN = "unknown"  # a run without recorded sources, and no git history to ask
# The harness's timing code: the clock around each call, warm-up and cold start (worker), a train
# mode's timed step (training), and the rounds, processes and load samples around them (runner).
# Two runs are one result only where these were the same (harness.report.claims.rundata.result_key).
TIMING_FILES = ("harness/measure/inside/worker.py", "harness/measure/inside/training.py",
                "harness/measure/runner.py")


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


def blob_id(data: bytes) -> str:
    """git's object id of a file's bytes (`git hash-object`): the same from the working tree now
    and from a commit's tree later, so a run that recorded none can be given it (timing_at)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def timing_of(blobs: dict[str, str]) -> str:
    """sha256 over each timing file's path and git object id, in TIMING_FILES' order."""
    digest = hashlib.sha256()
    for path in TIMING_FILES:
        digest.update(path.encode() + b"\0" + blobs.get(path, "-").encode() + b"\0")
    return digest.hexdigest()


def timing_hash(root: Path = ROOT) -> str | None:
    """The timing code as it is in the checkout at root (None where a file is missing)."""
    files = {path: root / path for path in TIMING_FILES}
    if not all(f.is_file() for f in files.values()):
        return None
    return timing_of({path: blob_id(f.read_bytes()) for path, f in files.items()})


@cache
def timing_at(commit: str, root: Path = ROOT) -> str | None:
    """The timing code as it was at `commit` (its tree's object ids, `git ls-tree`), for a run that
    recorded its commit but not its timing code; None where git cannot say (no such commit here)."""
    out = git(root, "ls-tree", commit, "--", *TIMING_FILES)
    if not out:
        return None
    blobs = {line.split("\t", 1)[1]: line.split()[2] for line in out.splitlines() if "\t" in line}
    return timing_of(blobs) if set(blobs) == set(TIMING_FILES) else None


def collect(implementations: Iterable[str], root: Path = ROOT) -> dict:
    """The commit checked out (and whether the tree had changes), each level's source hash and the
    timing code's (timing_hash: from the files themselves, so a dirty tree records what ran)."""
    # reports/ is what a run writes (make run-all's verify files come first): not the code measured
    status = git(root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)reports")
    hashes = {impl: level_hash(impl, root) for impl in sorted(set(implementations))}
    return {"commit": git(root, "rev-parse", "HEAD"), "dirty": None if status is None else bool(status),
            "sources": {impl: h for impl, h in hashes.items() if h is not None}, "timing": timing_hash(root)}


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


def count_lines(path: Path, group: str) -> tuple[int, int]:
    """(code, comment) lines of a source file as pygount counts them (`group`: pygount's label)."""
    import pygount

    analysis = pygount.SourceAnalysis.from_file(str(path), group)
    return analysis.code_count, analysis.documentation_count
