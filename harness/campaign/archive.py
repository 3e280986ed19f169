"""One archive per campaign, under a size cap, and its import into reports/results/.

    gpu-study-<host>-<run-id>.tar.gz
      gpu-study-<host>-<run-id>/manifest.json   every step: command, exit code, seconds, log tail
      gpu-study-<host>-<run-id>/results/...      run folders, explain rows, verify JSON (never dropped)
      gpu-study-<host>-<run-id>/logs/*.log       raw logs (dropped first when over the cap)

`import-results` unpacks results/ into reports/results/ and refuses to overwrite any file there,
but for verify's and verify-train's JSON (verify-*.json at the top), which it merges row by row
(merge_verify): a campaign that verified some levels only (gpu-study --levels) replaces those
levels' rows and keeps every other row, each row stamped with the campaign it came from, and says
what it replaced and what it kept. A labs step's output (results/labs-gpu/<run-id>/<lab>/) comes
in as it is, like a run folder.
"""

import fnmatch
import json
import shutil
import tarfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from harness.errors import HarnessError

Row = dict[str, Any]

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


def row_key(row: Row) -> tuple[str, str, str, str]:
    """What one verify or verify-train row checked: its level, variant, dtype and device."""
    return (str(row.get("implementation")), str(row.get("variant")), str(row.get("dtype", "-")),
            str(row.get("device")))


def exit_code(rows: list[Row]) -> int:
    """verify's and verify-train's rule, over the merged rows: 1 a check failed, 3 something could
    not run, else 0."""
    if any(row.get("status") == "FAIL" for row in rows):
        return 1
    return 3 if any(row.get("status") == "unavailable" for row in rows) else 0


def stamped(rows: list[Row], campaign: str) -> list[Row]:
    """The rows, each saying the campaign it came from (a row that already says one keeps it)."""
    return [row if row.get("campaign") else {**row, "campaign": campaign} for row in rows]


def older_source(into: Path, name: str) -> str:
    """The campaign an unstamped verify file most likely came from: the newest imported campaign
    whose steps wrote a file of that name; else `unknown`."""
    best = ("", "unknown (written before rows said their campaign)")
    for path in sorted((into / MANIFESTS).glob("*.manifest.json")):
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        wrote = any(str(part).endswith("/" + name) for step in manifest.get("steps", [])
                    for part in step.get("command", []))
        if wrote and str(manifest.get("started", "")) >= best[0]:
            best = (str(manifest.get("started", "")), str(manifest.get("campaign", path.name.split(".")[0])))
    return best[1]


def merge_verify(old: dict[str, Any] | None, new: dict[str, Any], campaign: str,
                 old_campaign: str = "unknown") -> tuple[dict[str, Any], list[str]]:
    """(the merged file, what was done, line by line). A new row replaces the old row of the same
    key (row_key); an old row of a level the new file has real rows for, whose key it lacks, is
    replaced too when it is that level's placeholder (variant "-": could not run then); every
    other old row is kept. The file's own fields are the new one's, its exit code that of the
    merged rows; `campaigns` keeps each campaign's fields."""
    new_rows = stamped(list(new.get("rows", [])), campaign)
    fields = {k: v for k, v in new.items() if k not in ("rows", "campaigns")}
    if old is None:
        return {**fields, "exit_code": exit_code(new_rows), "rows": new_rows,
                "campaigns": {campaign: fields}}, [f"added {len(new_rows)} rows"]
    old_rows = stamped(list(old.get("rows", [])), old_campaign)
    keys = {row_key(row) for row in new_rows}
    real = {(row.get("implementation"), row.get("device")) for row in new_rows if row.get("variant") != "-"}

    def superseded(row: Row) -> bool:
        return row_key(row) in keys or (row.get("variant") == "-" and
                                        (row.get("implementation"), row.get("device")) in real)

    replaced = [row for row in old_rows if superseded(row)]
    added = [row for row in new_rows if row_key(row) not in {row_key(r) for r in old_rows}]
    kept = [row for row in old_rows if not superseded(row)]
    rows = kept + new_rows
    names = dict.fromkeys(str(r.get("implementation")) for r in old_rows + new_rows)
    order = {name: i for i, name in enumerate(names)}
    rows.sort(key=lambda r: order[str(r.get("implementation"))])  # stable: each level's rows together
    campaigns = dict(old.get("campaigns") or {old_campaign: {k: v for k, v in old.items() if k != "rows"}})
    campaigns[campaign] = fields

    def levels(found: list[Row]) -> str:
        counts = Counter((str(r.get("implementation")), str(r.get("campaign"))) for r in found)
        return ", ".join(f"{name} ({n} from {source})" for (name, source), n in counts.items()) or "none"

    said = [f"replaced {len(replaced)} rows: {levels(replaced)}",
            f"added {len(added)} new rows: {levels(added)}" if added else "",
            f"kept {len(kept)} rows of levels this campaign did not verify: {levels(kept)}"]
    merged = {**fields, "exit_code": exit_code(rows), "rows": rows, "campaigns": campaigns}
    return merged, [line for line in said if line]


def member_file(tar: tarfile.TarFile, member: tarfile.TarInfo, archive: Path) -> IO[bytes]:
    """The member's bytes (safe_members and the manifest's lookup let only files through)."""
    src = tar.extractfile(member)
    if src is None:
        raise HarnessError(f"{archive}: {member.name} is not a file")
    return src


def merged_text(tar: tarfile.TarFile, member: tarfile.TarInfo, archive: Path, target: Path, campaign: str,
                say: Callable[[str], None]) -> str:
    """The verify JSON to write at target: the archive's rows merged into the file there (said)."""
    with member_file(tar, member, archive) as src:
        try:
            new = json.loads(src.read())
        except ValueError as exc:
            raise HarnessError(f"{archive}: {member.name} is not JSON ({exc})") from None
    old = None
    if target.exists():
        try:
            old = json.loads(target.read_text())
        except ValueError as exc:
            raise HarnessError(f"{target}: not JSON ({exc}); move it away to import") from None
    for where, found in ((member.name, new), (str(target), old)):
        if found is not None and not (isinstance(found, dict) and isinstance(found.get("rows", []), list)
                                      and all(isinstance(r, dict) for r in found.get("rows", []))):
            raise HarnessError(f"{where}: not a verify file (expected {{\"rows\": [{{...}}, ...], ...}})")
    data, said = merge_verify(old, new, campaign, older_source(target.parent, target.name))
    verb = "merging into" if old is not None else "writing"
    say(f"{verb} {target}: " + "; ".join(said))
    return json.dumps(data, indent=2) + "\n"


def import_results(archive: Path, into: Path, say: Callable[[str], None] = print) -> list[Path]:
    """Unpack the archive's results/ into `into`; returns the files written. Nothing existing is
    overwritten (verify's JSON aside: merged row by row, and said): a clash is one error naming the
    files, before anything is written."""
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
        merged = {rel: merged_text(tar, member, archive, into / rel, top, say) for member, rel in members
                  if replaceable(rel)}  # every file read and merged before anything is written
        written = []
        for member, rel in members:
            target = into / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if rel in merged:
                target.write_text(merged[rel])
            else:
                with member_file(tar, member, archive) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            written.append(target)
        labs = sorted({"/".join(rel.parts[:2]) for _, rel in members if rel.parts[0] == "labs-gpu"})
        for folder in labs:
            say(f"labs graded on the GPU: {into / folder}/ (each lab's LEADERBOARD.md, leaderboard.csv)")
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
