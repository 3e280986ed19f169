"""What a GPU run carries, held to a budget: the checkout's files (tracked, and untracked ones git does
not ignore) and the offline bundle (its wheels as scripts/offline_bundle.json records them, so a fresh
clone needs no download), largest part first, each with what it saved, against LIMIT_BYTES.

A borrowed GPU machine receives the working tree and the carried bundle, 64 MiB at most; the budget
keeps room below that for the runs a campaign adds. `make budget` prints it; `make test` checks it
(tests/test_budget.py), so a commit that breaks it is red.

    LIMIT_BYTES                  the budget
    Part(name, bytes, saved, how)    one part: what it carries, what it saved and how
    carried_files(root) -> [Path]    the files a run receives (git's list)
    parts(root) -> [Part]            largest first; the bundle one of them
    lines(parts) -> [str]            the table a person reads, and the verdict
    main() -> exit code              0 within the budget, 1 over it, 2 when it cannot be told
"""

import json
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from harness import ROOT
from harness.errors import HarnessError

LIMIT_BYTES = 52 << 20
BUNDLE_RECORD = Path("scripts") / "offline_bundle.json"  # written by scripts/offline_bundle.py build
PACKED_SUFFIX = ".jsonl.gz"  # a complete run's compressed rows (harness.measure.store.rowfile)
SPLIT = ("reports",)  # folders shown by their subfolders (reports/results, reports/figures)
SMALL_BYTES = LIMIT_BYTES // 100  # parts below it are shown together, as "the rest"


@dataclass(frozen=True)
class Part:
    name: str
    bytes: int
    saved: int = 0  # bytes it would weigh without what `how` says
    how: str = ""


def carried_files(root: Path = ROOT) -> list[Path]:
    """The files git lists in root: tracked, and untracked ones it does not ignore (what a run receives)."""
    try:
        done = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                               "--exclude-standard"], capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise HarnessError(f"{root}: cannot list the checkout's files with git ({exc}); the budget needs a "
                           "git checkout") from None
    names = sorted({name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name})
    return [root / name for name in names if (root / name).is_file() and not (root / name).is_symlink()]


def part_of(rel: Path) -> str:
    parts = rel.parts
    if len(parts) == 1:
        return "files at the top"
    if parts[0] in SPLIT:
        return f"{parts[0]}/{parts[1]}/" if len(parts) > 2 else f"{parts[0]}/*.*"
    return f"{parts[0]}/"


def gzip_isize(path: Path) -> int:
    """The uncompressed size a gzip file records in its last four bytes (below 4 GiB: one run's rows)."""
    with open(path, "rb") as f:
        f.seek(-4, 2)
        return int.from_bytes(f.read(4), "little")


def checkout_parts(root: Path) -> list[Part]:
    sizes: dict[str, int] = defaultdict(int)
    saved: dict[str, int] = defaultdict(int)
    for path in carried_files(root):
        name = part_of(path.relative_to(root))
        size = path.stat().st_size
        sizes[name] += size
        if path.name.endswith(PACKED_SUFFIX) and size >= 18:  # a gzip file's header and trailer
            saved[name] += gzip_isize(path) - size
    return [Part(name, sizes[name], saved[name], "rows compressed; as plain JSON lines they would weigh "
                 f"{(sizes[name] + saved[name]) / 2**20:.1f} MiB" if saved[name] else "")
            for name in sizes]


def bundle_part(root: Path) -> Part:
    """The offline bundle, from its committed record: its wheels, and the wheels it leaves out."""
    path = root / BUNDLE_RECORD
    try:
        record = json.loads(path.read_text())
        wheels = [int(w["bytes"]) for w in record["wheels"]]
        left_out = [(str(w["name"]), int(w["bytes"])) for w in record.get("left_out", [])]
        python = str(record["python"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarnessError(f"{path}: not a readable bundle record ({exc}); build it with "
                           "`make offline-bundle` (it writes the record)") from None
    names = ", ".join(name for name, _ in left_out)
    how = f"left out what the server brings or the GPU half never imports: {names}" if left_out else ""
    return Part(f"offline bundle (Python {python}, {len(wheels)} wheels)", sum(wheels),
                sum(b for _, b in left_out), how)


def parts(root: Path = ROOT) -> list[Part]:
    """Every part, largest first; those under SMALL_BYTES (that saved nothing) as one, last."""
    found = sorted([*checkout_parts(root), bundle_part(root)], key=lambda p: (-p.bytes, p.name))
    small = [p for p in found if p.bytes < SMALL_BYTES and not p.saved]
    big = [p for p in found if p not in small]
    names = ", ".join(p.name for p in small)
    rest = [Part(f"the rest ({len(small)}: {names})", total(small))] if small else []
    return big + rest


def mib(n: int) -> str:
    return f"{n / 2**20:6.2f} MiB"


def total(found: list[Part]) -> int:
    return sum(p.bytes for p in found)


def lines(found: list[Part], limit: int = LIMIT_BYTES) -> list[str]:
    """One line a part, largest first (with what it saved), the total, and the verdict."""
    out = ["what a GPU run carries (the checkout's files git lists, and the offline bundle):"]
    for p in found:
        note = f"  (saved {mib(p.saved).strip()}: {p.how})" if p.saved else ""
        out.append(f"  {mib(p.bytes)}  {p.name}{note}")
    size, saved = total(found), sum(p.saved for p in found)
    verdict = "within the budget" if size <= limit else "OVER the budget"
    out.append(f"  {mib(size)}  in all: {verdict} of {mib(limit).strip()} (a GPU run takes 64 MiB); "
               f"{mib(saved).strip()} saved")
    return out


def main() -> int:
    try:
        found = parts()
    except HarnessError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines(found)))
    return 0 if total(found) <= LIMIT_BYTES else 1


if __name__ == "__main__":
    sys.exit(main())
