"""One archive per campaign, under a size cap, and its import into reports/results/.

    gpu-study-<host>-<run-id>.tar.gz
      gpu-study-<host>-<run-id>/manifest.json   every step: command, exit code, seconds, log tail
      gpu-study-<host>-<run-id>/results/...      run folders, explain rows, verify JSON (never dropped)
      gpu-study-<host>-<run-id>/logs/*.log       raw logs (dropped first when over the cap)

`import-results` unpacks results/ into reports/results/ and refuses to overwrite any file there,
but for verify's and verify-train's JSON (verify-*.json at the top): each is the newest check on
its machine, as `make verify` rewrites it, so a later campaign replaces it and says so.
"""

import fnmatch
import json
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from harness.errors import HarnessError

CAP_BYTES = 16 * 1024 * 1024  # what one file brought back from a borrowed GPU machine may weigh
MANIFESTS = "campaigns"  # reports/results/campaigns/<name>.manifest.json: what each import brought


def pack(out: Path, name: str, cap_bytes: int = CAP_BYTES, say: Callable[[str], None] = print) -> Path:
    """out/<name>.tar.gz from out/manifest.json, out/results/ and out/logs/, under the cap."""
    out = Path(out)
    archive = out / f"{name}.tar.gz"
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    parts = ["manifest.json", "results", "logs"]
    write(archive, out, name, parts)
    if archive.stat().st_size > cap_bytes:
        say(f"WARNING: {archive.name} is {archive.stat().st_size / 2**20:.1f} MiB, over the "
            f"{cap_bytes / 2**20:g} MiB cap: dropping the raw logs (the manifest keeps their last lines)")
        manifest["logs_dropped"] = True
        manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
        write(archive, out, name, ["manifest.json", "results"])
    size = archive.stat().st_size
    if size > cap_bytes:  # results are never dropped: say so loudly instead
        say(f"WARNING: {archive.name} is still {size / 2**20:.1f} MiB with the results alone; "
            "bring it back in parts (split -b 15M) or run fewer steps")
    return archive


def write(archive: Path, out: Path, name: str, parts: list[str]) -> None:
    with tarfile.open(archive, "w:gz") as tar:
        for part in parts:
            if (out / part).exists():
                tar.add(out / part, arcname=f"{name}/{part}")


def safe_members(tar: tarfile.TarFile, archive: Path) -> tuple[str, list[tuple[tarfile.TarInfo, Path]]]:
    """The top folder's name, and (member, path under results/) for each of the archive's results;
    anything odd is an error."""
    members = tar.getmembers()
    tops = {m.name.split("/")[0] for m in members}
    if len(tops) != 1:
        raise HarnessError(f"{archive}: expected one top folder (gpu-study-...), found {sorted(tops)}")
    top = tops.pop()
    found = []
    for m in members:
        parts = Path(m.name).parts
        if m.name.startswith("/") or ".." in parts or not (m.isfile() or m.isdir()):
            raise HarnessError(f"{archive}: refusing the entry {m.name!r} (absolute, '..' or a link)")
        if len(parts) > 2 and parts[1] == "results" and m.isfile():
            found.append((m, Path(*parts[2:])))
    if not found:
        raise HarnessError(f"{archive}: no results/ inside (expected {top}/results/...)")
    return top, found


def replaceable(rel: Path) -> bool:
    """verify-*.json at the top of results/: the newest check on a machine, replaced by a newer one."""
    return len(rel.parts) == 1 and fnmatch.fnmatch(rel.name, "verify-*.json")


def member_file(tar: tarfile.TarFile, member: tarfile.TarInfo, archive: Path) -> IO[bytes]:
    """The member's bytes (safe_members and the manifest's lookup let only files through)."""
    src = tar.extractfile(member)
    if src is None:
        raise HarnessError(f"{archive}: {member.name} is not a file")
    return src


def import_results(archive: Path, into: Path, say: Callable[[str], None] = print) -> list[Path]:
    """Unpack the archive's results/ into `into`; returns the files written. Nothing existing is
    overwritten (verify's JSON aside: replaced, and said): a clash is one error naming the files,
    before anything is written."""
    archive, into = Path(archive), Path(into)
    if not archive.is_file():
        raise HarnessError(f"{archive}: no such archive (expected gpu-study-<host>-<run-id>.tar.gz)")
    try:
        tar = tarfile.open(archive, "r:*")
    except tarfile.TarError as exc:
        raise HarnessError(f"{archive}: not a readable tar archive ({exc})") from None
    with tar:
        top, members = safe_members(tar, archive)
        clashes = [str(into / rel) for _, rel in members if (into / rel).exists() and not replaceable(rel)]
        if clashes:
            raise HarnessError(f"{archive}: would overwrite {len(clashes)} file(s) in {into}, e.g. "
                               f"{clashes[0]}; results are never overwritten (already imported?)")
        written = []
        for member, rel in members:
            target = into / rel
            if target.exists():
                say(f"replacing {target}: the newer check from this campaign")
            target.parent.mkdir(parents=True, exist_ok=True)
            with member_file(tar, member, archive) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            written.append(target)
        manifest = next((m for m in tar.getmembers() if m.name == f"{top}/manifest.json" and m.isfile()),
                        None)
        if manifest is not None:
            target = into / MANIFESTS / f"{top}.manifest.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            with member_file(tar, manifest, archive) as src:
                target.write_bytes(src.read())
            written.append(target)
    say(f"imported {len(written)} files from {archive.name} into {into}")
    return written
