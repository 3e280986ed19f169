"""Files written whole (a report, a figure, a manifest, env.json, a completion marker): written to a
temporary file beside the target, flushed to disk, then renamed over it. A full disk or a kill
leaves the previous version (or nothing), never half a file; the error names the file.

    write_atomic(path, data)    text (UTF-8) or bytes -> path, whole or not at all
    disk_error(path, exc)       an OSError while writing path -> one HarnessError for a person
"""

import errno
import os
import secrets
from pathlib import Path

from harness.errors import HarnessError


def disk_error(path: Path, exc: OSError) -> HarnessError:
    """The error a person reads: the file, and what the system said (a full disk named as such)."""
    why = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
           errno.EFBIG: "over the file size limit"}.get(
        exc.errno or 0, exc.strerror or str(exc))
    return HarnessError(f"{path}: cannot write it ({why})")


def write_atomic(path: Path | str, data: str | bytes) -> Path:
    """data -> path through `.<name>.<random>.tmp` in the same folder (so the rename is atomic); the
    temporary file is removed when anything fails. Permissions as a plain open() would give (umask)."""
    path = Path(path)
    blob = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
    except OSError as exc:
        raise HarnessError(f"{disk_error(path, exc)}; the previous version, if any, is kept") from None
    return path
