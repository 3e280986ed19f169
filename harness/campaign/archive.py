"""One archive per campaign, under a size cap, and its import into reports/results/.

    gpu-study-<host>-<run-id>.tar.gz
      gpu-study-<host>-<run-id>/manifest.json   every step: command, exit code, seconds, log tail
      gpu-study-<host>-<run-id>/results/...      run folders, explain rows, verify JSON (never dropped)
      gpu-study-<host>-<run-id>/logs/*.log       raw logs (dropped first when over the cap)

`import-results` checks the archive whole, then unpacks results/ into reports/results/ all or nothing
(harness.campaign.unpack: the stream's checksum, caps, entries, every row through the one reader)
and refuses to overwrite any file there,
but for verify's and verify-train's JSON (verify-*.json at the top), which it merges row by row
(merge_verify): a campaign that verified some levels only (gpu-study --levels) replaces those
levels' rows and keeps every other row, each row stamped with the campaign it came from, and says
what it replaced and what it kept. A labs step's output (results/labs-gpu/<run-id>/<lab>/) comes
in as it is, like a run folder. Each run comes in with a completion marker written here (its place
in this checkout's order is the import's time) and its rows compressed (results.jsonl.gz,
harness.measure.store.rowfile), whichever form the archive held them in; a partial run comes in
partial, its rows plain, and is named.
A campaign's record (campaigns/<top>.manifest.json) is never overwritten: a later import of the
same campaign is added to it.
"""

import fnmatch
import json
import tarfile
import time
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from harness.campaign import unpack
from harness.errors import HarnessError
from harness.machine.files import disk_error, write_atomic
from harness.measure.store import rowfile, runfolder

Row = dict[str, Any]

CAP_BYTES = 16 * 1024 * 1024  # what one file brought back from a borrowed GPU machine may weigh
MANIFESTS = "campaigns"  # reports/results/campaigns/<name>.manifest.json: what each import brought


def pack(out: Path, name: str, cap_bytes: int = CAP_BYTES, say: Callable[[str], None] = print,
         into: Path | None = None) -> Path:
    """into/<name>.tar.gz (into: out where not given) from out/manifest.json, out/results/ and
    out/logs/, under the cap; written whole (a temporary file renamed), so packing it again after
    each step leaves the last whole archive in place until the next is."""
    out = Path(out)
    archive = Path(into or out) / f"{name}.tar.gz"
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    parts = ["manifest.json", "results", "logs"]
    write(archive, out, name, parts)
    if archive.stat().st_size > cap_bytes:
        say(f"WARNING: {archive.name} is {archive.stat().st_size / 2**20:.1f} MiB, over the "
            f"{cap_bytes / 2**20:g} MiB cap: dropping the raw logs (the manifest keeps their last lines)")
        manifest["logs_dropped"] = True
        write_atomic(manifest_path, json.dumps(manifest, indent=2) + "\n")
        write(archive, out, name, ["manifest.json", "results"])
    size = archive.stat().st_size
    if size > cap_bytes:  # results are never dropped: say so loudly instead
        say(f"WARNING: {archive.name} is still {size / 2**20:.1f} MiB with the results alone; "
            "bring it back in parts (split -b 15M) or run fewer steps")
    return archive


def write(archive: Path, out: Path, name: str, parts: list[str]) -> None:
    """The archive, through a temporary file renamed into place (a full disk leaves no half archive);
    a run's lock file stays home."""
    tmp = archive.with_name(f".{archive.name}.tmp")
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            for part in parts:
                if (out / part).exists():
                    tar.add(out / part, arcname=f"{name}/{part}",
                            filter=lambda info: None if Path(info.name).name == runfolder.LOCK else info)
        tmp.replace(archive)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise HarnessError(f"{disk_error(archive, exc)}; no archive written") from None


def replaceable(rel: Path) -> bool:
    """verify-*.json at the top of results/: the newest check on a machine, replaced by a newer one."""
    return len(rel.parts) == 1 and fnmatch.fnmatch(rel.name, "verify-*.json")


def row_key(row: Row) -> tuple[str, str, str, str]:
    """What one verify or verify-train row checked: its level, variant, dtype and device."""
    return (str(row.get("implementation")), str(row.get("variant")), str(row.get("dtype", "-")),
            str(row.get("device")))


def exit_code(rows: list[Row]) -> int:
    """verify's and verify-train's rule, over the merged rows: 1 a check failed (FAIL, or a variant
    that hung or faulted), 3 something could not run, else 0."""
    if any(row.get("status") in ("FAIL", "hung", "fault") for row in rows):
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


def read_member(tar: tarfile.TarFile, member: tarfile.TarInfo, archive: Path) -> bytes:
    """The member's bytes (unpack.checked_entries lets only files through)."""
    src = tar.extractfile(member)
    if src is None:
        raise HarnessError(f"{archive}: {member.name} is not a file")
    with src:
        return src.read()


def merged_text(data: bytes, member: tarfile.TarInfo, archive: Path, target: Path, campaign: str,
                say: Callable[[str], None]) -> str:
    """The verify JSON to write at target: the archive's rows merged into the file there (said)."""
    try:
        new = json.loads(data)
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
    merged, said = merge_verify(old, new, campaign, older_source(target.parent, target.name))
    verb = "merging into" if old is not None else "writing"
    say(f"{verb} {target}: " + "; ".join(said))
    return json.dumps(merged, indent=2) + "\n"


def campaign_record(data: bytes, archive: Path, target: Path) -> bytes:
    """campaigns/<top>.manifest.json: the archive's manifest; where the campaign is already known,
    the record there kept whole and this import added to it (`later_imports`)."""
    try:
        new = json.loads(data)
        if not isinstance(new, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        raise HarnessError(f"{archive}: its manifest.json is not a campaign's record ({exc})") from None
    if not target.exists():
        return data
    try:
        old = json.loads(target.read_text())
        if not isinstance(old, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{target}: not a campaign's record ({exc}); move it away to import") from None
    if new == {k: v for k, v in old.items() if k != "later_imports"}:
        return target.read_bytes()
    earlier = old.get("later_imports")
    later: list[Any] = earlier if isinstance(earlier, list) else []
    added = {"archive": archive.name, "imported": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
             "manifest": new}
    return (json.dumps({**old, "later_imports": [*later, added]}, indent=2) + "\n").encode()


def marks_complete(data: bytes) -> bool:
    """Whether an archive's complete.json is a completion marker (its order is not taken: this
    checkout writes its own)."""
    try:
        marker = json.loads(data)
    except ValueError:
        return False
    return isinstance(marker, dict) and marker.get("complete") is True


def run_markers(found: dict[PurePosixPath, tuple[list[dict], bytes]], marked: set[PurePosixPath],
                archive: Path, staging: unpack.Staging, say: Callable[[str], None]) -> None:
    """Each imported run's rows and completion marker, written here (its order: now, this checkout's).
    A run is complete when every cell its rows name has its final row, and the archive marks it
    complete (a run from before markers: by its rows alone): its rows come in compressed, recorded
    in its marker. Any other run comes in partial, its rows plain, said, never an answer until
    finished. found: run folder -> (its rows, their uncompressed bytes)."""
    now = runfolder.next_order(staging.into)
    for i, (run, (rows, data)) in enumerate(sorted(found.items())):
        if runfolder.complete_by_rows(rows) and (run in marked or not marked):
            whole = rowfile.whole_lines(data)
            staging.put(run / rowfile.PACKED, rowfile.compress(whole))
            how = f"imported from {archive.name}" + ("" if run in marked else " (by its rows: no marker)")
            marker = {"run_id": run.name, "complete": True, "how": how, "order": now + i * 1e-6,
                      **rowfile.record(whole)}
            staging.put(run / runfolder.MARKER, (json.dumps(marker, indent=2) + "\n").encode())
        else:
            staging.put(run / rowfile.PLAIN, data)
            say(f"WARNING: {run} is a partial run (cells without their final row): imported as partial, "
                "never an answer; finish it where it ran (--resume) and bring it back")


def import_results(archive: Path, into: Path, say: Callable[[str], None] = print,
                   limits: unpack.Limits = unpack.DEFAULT_LIMITS) -> list[Path]:
    """Unpack the archive's results/ into `into`; returns the files written. Everything is checked
    before anything is written (harness.campaign.unpack); nothing existing is overwritten (verify's
    JSON aside: merged row by row, and said; a campaign's record: added to); then all or nothing."""
    archive, into = Path(archive), Path(into)
    if not archive.is_file():
        raise HarnessError(f"{archive}: no such archive (expected gpu-study-<host>-<run-id>.tar.gz)")
    unpack.check_stream(archive, limits)
    importing = runfolder.hold_results(into)
    try:
        with tarfile.open(archive, "r:*") as tar:
            top, members = unpack.checked_entries(tar, archive, limits)
            name = f"{top}/manifest.json"
            manifest = tar.getmember(name) if name in tar.getnames() else None
            return unpack_checked(tar, archive, into, top, members, manifest, say, limits)
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise HarnessError(f"{archive}: not a readable tar archive ({exc})") from None
    finally:
        importing.release()


def forms(rel: PurePosixPath) -> list[PurePosixPath]:
    """The paths a file may clash with here: a run's rows in either form (rowfile), else itself."""
    if rel.name in (rowfile.PLAIN, rowfile.PACKED):
        return [rel.with_name(rowfile.PLAIN), rel.with_name(rowfile.PACKED)]
    return [rel]


def unpack_checked(tar: tarfile.TarFile, archive: Path, into: Path, top: str,
                   members: list[tuple[tarfile.TarInfo, PurePosixPath]], manifest: tarfile.TarInfo | None,
                   say: Callable[[str], None], limits: unpack.Limits = unpack.DEFAULT_LIMITS) -> list[Path]:
    """import_results' body, once the entries are checked: clashes, rows, staging, rename."""
    rels = [PurePosixPath(*rel.parts) for _, rel in members]
    both = sorted({rel.parent for rel in rels if rel.name == rowfile.PACKED} &
                  {rel.parent for rel in rels if rel.name == rowfile.PLAIN})
    if both:
        raise HarnessError(f"{archive}: {top}/results/{both[0]} holds its rows twice ({rowfile.PLAIN} and "
                           f"{rowfile.PACKED}); which one is meant cannot be told: refusing it")
    clashes = [str(into.joinpath(*other.parts)) for rel in rels for other in forms(rel)
               if into.joinpath(*other.parts).exists() and not replaceable(Path(*rel.parts))]
    clashes += [str(into.joinpath(*p.parts)) for rel in rels for p in rel.parents
                if p.parts and into.joinpath(*p.parts).is_file()]
    if clashes:
        raise HarnessError(f"{archive}: would overwrite {len(clashes)} file(s) in {into}, e.g. "
                           f"{clashes[0]}; results are never overwritten (already imported?)")
    now = time.time()
    found: dict[PurePosixPath, tuple[list[dict], bytes]] = {}  # run folder -> (rows, uncompressed)
    markers: dict[PurePosixPath, bytes] = {}
    packed: list[tuple[PurePosixPath, bytes, str]] = []  # checked once every marker is read
    room = limits.total_bytes - sum(m.size for m, rel in members if rel.name != rowfile.PACKED)
    staging = unpack.Staging(into, top)
    try:
        for member, rel in members:  # every file read, checked and merged before anything is moved
            data = read_member(tar, member, archive)
            where = f"{archive}: {member.name}"
            unpack.check_env(rel, data, where)
            if rel.name == rowfile.PLAIN:
                found[rel.parent] = (unpack.check_rows(data, where, now), data)
                continue
            if rel.name == rowfile.PACKED:
                packed.append((rel.parent, data, where))
                continue
            if replaceable(Path(*rel.parts)):
                data = merged_text(data, member, archive, into.joinpath(*rel.parts), top, say).encode()
            if rel.name == runfolder.MARKER:  # this checkout writes its own (run_markers)
                markers[rel.parent] = data
            else:
                staging.put(rel, data)
        for run, data, where in packed:  # uncompressed sizes count against the caps
            rows_data = unpack.packed_rows(data, markers.get(run), where, limits, room)
            room -= len(rows_data)
            found[run] = (unpack.check_rows(rows_data, where, now), rows_data)
        marked = {run for run, data in markers.items() if marks_complete(data)}
        run_markers(found, marked, archive, staging, say)
        if manifest is not None:
            record = PurePosixPath(MANIFESTS, f"{top}.manifest.json")
            staging.put(record, campaign_record(read_member(tar, manifest, archive), archive,
                                                into.joinpath(*record.parts)))
        written = sorted(into / p.relative_to(staging.root) for p in staging.root.rglob("*") if p.is_file())
        staging.commit()
    except BaseException:
        staging.discard()
        raise
    for folder in sorted({"/".join(rel.parts[:2]) for rel in rels if rel.parts[0] == "labs-gpu"}):
        say(f"labs graded on the GPU: {into / folder}/ (each lab's LEADERBOARD.md, leaderboard.csv)")
    say(f"imported {len(written)} files from {archive.name} into {into}")
    return written
