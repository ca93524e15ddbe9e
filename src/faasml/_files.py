"""Files written all at once: a reader sees the old file or the new one, never a part."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_atomic(target: Path, text: str, *, durable: bool = True) -> None:
    """Write ``text`` to ``target`` all at once (temporary file, fsync, rename), with the
    permissions the umask gives a new file (0644 under the usual 022), not mkstemp's 0600.
    ``durable=False`` leaves out the fsync: still all at once for every process (a killed
    writer loses nothing the kernel has), only a crash of the machine may lose it."""
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            if durable:
                os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException as err:
        temporary.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise naming(err, target) from None
        raise


def naming(err: OSError, target: os.PathLike[str] | str) -> OSError:
    """``err`` naming ``target`` where it names no file (a write or fsync that failed: a full
    disk says which file it was writing)."""
    if err.filename is not None:
        return err
    return OSError(err.errno, err.strerror, str(target))
